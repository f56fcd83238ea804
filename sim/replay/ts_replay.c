/* ts_replay: the discrete-event replay engine. It resolves dependencies, stream order,
 * collective rendezvous and send/recv matching, and leaves every cost to a backend. */
#include "ts_replay.h"
#include "ts_util.h"

#include <stdlib.h>
#include <string.h>

/* Per-program structure shared by every rank running it: successors (explicit deps plus
 * the next op of the same stream) in CSR form and initial predecessor counts. */
typedef struct {
  int nops;
  int *npred;    /* predecessors per op (explicit deps + stream predecessor) */
  int *succ_off; /* nops + 1 offsets into succ */
  int *succ;
} prog_info;

/* One simulated rank's state. */
typedef struct {
  int rank;
  int program;
  int *remaining; /* predecessors not yet complete */
  double *ready;  /* max end time of completed predecessors */
  double *start;  /* activity start (when the backend began it) */
  double *end;    /* completion */
  guint8 *done;
  int ndone;
  int *coll_seq; /* per trace group: collectives this rank has reached */
  int *base;     /* per trace group: member 0 of this rank's group, -1 until first needed */
} sim_rank;

typedef struct {
  int sim; /* sim_rank index */
  int op;
} member_ref;

/* A collective instance waiting for (or running with) its simulated members. */
typedef struct {
  int group, base, seq;
  int expected, arrived;
  double arrival_max;
  GArray *members; /* member_ref */
} rendezvous;

/* A send or receive waiting for its partner. */
typedef struct {
  int sim, op;
  double ready;
} p2p_wait;

typedef struct {
  ts_activity act;
  GArray *members;   /* collectives: the rendezvous's member_ref list (owned by rv) */
  member_ref inl[2]; /* compute (one op) and send/recv (two ops): no allocation per event */
  int ninl;
  rendezvous *rv;
  gboolean in_use;
} activity_rec;

struct ts_replay {
  const ts_trace *tr;
  ts_backend *backend;
  ts_replay_mode mode;
  gboolean keep_spans;
  prog_info *progs;
  int nsim;
  sim_rank *sims;
  int *sim_of_rank;         /* nranks entries, -1 when not simulated */
  GHashTable *rendezvous;   /* "group/base/seq" -> rendezvous */
  GHashTable *p2p_sends;    /* "src/dst/tag" -> GQueue of p2p_wait (sends waiting) */
  GHashTable *p2p_recvs;    /* likewise receives */
  GHashTable *group_expect; /* "group/base" -> expected simulated members + 1 */
  GArray *acts;             /* activity_rec */
  GArray *free_acts;        /* int */
  GArray *ready_stack;      /* member_ref waiting to be started */
  GArray *spans;
  gint64 events;
  int outstanding;
};

static void prog_info_init(prog_info *pi, const ts_program *p)
{
  int n = p->nops;
  pi->nops = n;
  pi->npred = g_new0(int, n);
  pi->succ_off = g_new0(int, n + 1);
  /* Last op seen per stream gives each op its stream predecessor. */
  GHashTable *last = g_hash_table_new(g_direct_hash, g_direct_equal);
  int *stream_pred = g_new(int, n);
  for (int i = 0; i < n; i++) {
    gpointer v;
    stream_pred[i] = g_hash_table_lookup_extended(last, GINT_TO_POINTER(p->ops[i].stream), NULL, &v)
                         ? GPOINTER_TO_INT(v)
                         : -1;
    g_hash_table_insert(last, GINT_TO_POINTER(p->ops[i].stream), GINT_TO_POINTER(i));
  }
  for (int i = 0; i < n; i++) {
    pi->npred[i] = p->ops[i].ndeps + (stream_pred[i] >= 0);
    for (int k = 0; k < p->ops[i].ndeps; k++)
      pi->succ_off[p->ops[i].deps[k] + 1]++;
    if (stream_pred[i] >= 0)
      pi->succ_off[stream_pred[i] + 1]++;
  }
  for (int i = 0; i < n; i++)
    pi->succ_off[i + 1] += pi->succ_off[i];
  pi->succ = g_new(int, pi->succ_off[n] > 0 ? pi->succ_off[n] : 1);
  int *fill = g_memdup2(pi->succ_off, sizeof(int) * (gsize)n);
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < p->ops[i].ndeps; k++)
      pi->succ[fill[p->ops[i].deps[k]]++] = i;
    if (stream_pred[i] >= 0)
      pi->succ[fill[stream_pred[i]]++] = i;
  }
  g_free(fill);
  g_free(stream_pred);
  g_hash_table_unref(last);
}

/* Hash keys of up to three integers (group/base/seq, src/dst/tag): no string formatting on
 * the replay's hot path. */
typedef struct {
  int a, b, c;
} key3;

static guint key3_hash(gconstpointer p)
{
  const key3 *k = p;
  guint h = (guint)k->a * 2654435761u;
  h ^= (guint)k->b * 2246822519u + (h << 6) + (h >> 2);
  h ^= (guint)k->c * 3266489917u + (h << 6) + (h >> 2);
  return h;
}

static gboolean key3_equal(gconstpointer x, gconstpointer y)
{
  const key3 *p = x, *q = y;
  return p->a == q->a && p->b == q->b && p->c == q->c;
}

static key3 *key3_new(int a, int b, int c)
{
  key3 *k = g_new(key3, 1);
  *k = (key3){a, b, c};
  return k;
}

static void rendezvous_free(gpointer p)
{
  rendezvous *rv = p;
  g_array_unref(rv->members);
  g_free(rv);
}

static void queue_free(gpointer p)
{
  g_queue_free_full(p, g_free);
}

static gboolean needs_full(const ts_trace *tr)
{
  /* A send along a symmetric axis pairs ranks of the same class: its partner is not a
   * class representative, so collapsing cannot replay it. */
  for (int p = 0; p < tr->nprograms; p++)
    for (int i = 0; i < tr->programs[p].nops; i++) {
      const ts_op *o = &tr->programs[p].ops[i];
      if ((o->kind == TS_OP_SEND || o->kind == TS_OP_RECV) &&
          (o->peer > 0 || tr->axes[o->axis].symmetric))
        return TRUE;
    }
  return FALSE;
}

ts_replay *ts_replay_new(const ts_trace *tr, ts_backend *b, ts_replay_mode mode)
{
  ts_replay *r = g_new0(ts_replay, 1);
  r->tr = tr;
  r->backend = b;
  r->mode = mode == TS_REPLAY_COLLAPSED && needs_full(tr) ? TS_REPLAY_FULL : mode;
  r->progs = g_new0(prog_info, tr->nprograms);
  for (int p = 0; p < tr->nprograms; p++)
    prog_info_init(&r->progs[p], &tr->programs[p]);
  r->sim_of_rank = g_new(int, tr->nranks);
  GArray *sims = g_array_new(FALSE, TRUE, sizeof(sim_rank));
  for (int rank = 0; rank < tr->nranks; rank++) {
    gboolean rep = TRUE;
    if (r->mode == TS_REPLAY_COLLAPSED)
      for (int a = 0; a < tr->naxes && rep; a++)
        if (tr->axes[a].symmetric && ts_trace_axis_coord(tr, rank, a) != 0)
          rep = FALSE;
    r->sim_of_rank[rank] = rep ? (int)sims->len : -1;
    if (!rep)
      continue;
    sim_rank s = {0};
    s.rank = rank;
    s.program = ts_trace_program_of(tr, rank);
    int n = tr->programs[s.program].nops;
    s.remaining = g_memdup2(r->progs[s.program].npred, sizeof(int) * (gsize)(n > 0 ? n : 1));
    s.ready = g_new0(double, n > 0 ? n : 1);
    s.start = g_new0(double, n > 0 ? n : 1);
    s.end = g_new0(double, n > 0 ? n : 1);
    s.done = g_new0(guint8, n > 0 ? n : 1);
    s.coll_seq = g_new0(int, tr->groups->len > 0 ? tr->groups->len : 1);
    s.base = g_new(int, tr->groups->len > 0 ? tr->groups->len : 1);
    for (guint g = 0; g < tr->groups->len; g++)
      s.base[g] = -1;
    g_array_append_val(sims, s);
  }
  r->nsim = (int)sims->len;
  r->sims = (sim_rank *)g_array_free(sims, FALSE);
  r->rendezvous = g_hash_table_new_full(key3_hash, key3_equal, g_free, rendezvous_free);
  r->p2p_sends = g_hash_table_new_full(key3_hash, key3_equal, g_free, queue_free);
  r->p2p_recvs = g_hash_table_new_full(key3_hash, key3_equal, g_free, queue_free);
  r->group_expect = g_hash_table_new_full(key3_hash, key3_equal, g_free, NULL);
  r->acts = g_array_new(FALSE, TRUE, sizeof(activity_rec));
  r->free_acts = g_array_new(FALSE, FALSE, sizeof(int));
  r->ready_stack = g_array_new(FALSE, FALSE, sizeof(member_ref));
  r->spans = g_array_new(FALSE, FALSE, sizeof(ts_span));
  return r;
}

void ts_replay_free(ts_replay *r)
{
  if (r == NULL)
    return;
  for (int p = 0; p < r->tr->nprograms; p++) {
    g_free(r->progs[p].npred);
    g_free(r->progs[p].succ_off);
    g_free(r->progs[p].succ);
  }
  g_free(r->progs);
  for (int i = 0; i < r->nsim; i++) {
    g_free(r->sims[i].remaining);
    g_free(r->sims[i].ready);
    g_free(r->sims[i].start);
    g_free(r->sims[i].end);
    g_free(r->sims[i].done);
    g_free(r->sims[i].coll_seq);
    g_free(r->sims[i].base);
  }
  g_free(r->sims);
  g_free(r->sim_of_rank);
  for (guint i = 0; i < r->acts->len; i++) {
    activity_rec *a = &g_array_index(r->acts, activity_rec, i);
    if (a->rv != NULL)
      rendezvous_free(a->rv);
  }
  g_array_unref(r->acts);
  g_array_unref(r->free_acts);
  g_array_unref(r->ready_stack);
  g_array_unref(r->spans);
  g_hash_table_unref(r->rendezvous);
  g_hash_table_unref(r->p2p_sends);
  g_hash_table_unref(r->p2p_recvs);
  g_hash_table_unref(r->group_expect);
  g_free(r);
}

void ts_replay_keep_spans(ts_replay *r, gboolean keep)
{
  r->keep_spans = keep;
}

const GArray *ts_replay_spans(const ts_replay *r)
{
  return r->spans;
}

const ts_trace *ts_replay_trace(const ts_replay *r)
{
  return r->tr;
}

static const ts_op *op_of(const ts_replay *r, int sim, int op)
{
  return &r->tr->programs[r->sims[sim].program].ops[op];
}

static int activity_new(ts_replay *r)
{
  int idx;
  if (r->free_acts->len > 0) {
    idx = g_array_index(r->free_acts, int, r->free_acts->len - 1);
    g_array_set_size(r->free_acts, r->free_acts->len - 1);
  } else {
    idx = (int)r->acts->len;
    g_array_set_size(r->acts, r->acts->len + 1);
  }
  activity_rec *a = &g_array_index(r->acts, activity_rec, idx);
  memset(a, 0, sizeof *a);
  a->in_use = TRUE;
  a->act.token = (guint64)idx;
  return idx;
}

static gboolean activity_start(ts_replay *r, int idx, double now, GError **error)
{
  r->outstanding++;
  activity_rec *a = &g_array_index(r->acts, activity_rec, idx);
  const member_ref *m = a->members != NULL ? (const member_ref *)a->members->data : a->inl;
  guint n = a->members != NULL ? a->members->len : (guint)a->ninl;
  for (guint i = 0; i < n; i++)
    r->sims[m[i].sim].start[m[i].op] = now;
  ts_activity act = a->act; /* the backend may start more activities, growing r->acts */
  return r->backend->start(r->backend, r, &act, now, error);
}

/* "Group instance" expected simulated members: those of the group's ranks that are simulated. */
static int group_expected(ts_replay *r, int group, int base)
{
  key3 k = {group, base, 0};
  gpointer v = g_hash_table_lookup(r->group_expect, &k);
  if (v != NULL)
    return GPOINTER_TO_INT(v) - 1;
  const ts_group *g = g_ptr_array_index(r->tr->groups, group);
  ts_topo t = {0};
  t.ndims = r->tr->ndims;
  t.nchips = r->tr->nranks;
  for (int d = 0; d < t.ndims; d++)
    t.dims[d].size = r->tr->dim_sizes[d];
  int n = ts_trace_group_size(g), count = 0;
  for (int m = 0; m < n; m++)
    if (r->sim_of_rank[ts_trace_group_chip(&t, g, base, m)] >= 0)
      count++;
  g_hash_table_insert(r->group_expect, key3_new(group, base, 0), GINT_TO_POINTER(count + 1));
  return count;
}

static int group_base(const ts_replay *r, int group, int rank)
{
  return ts_trace_group_base(r->tr, g_ptr_array_index(r->tr->groups, group), rank, NULL);
}

static gboolean op_complete(ts_replay *r, int sim, int op, double end);

/* An op whose predecessors are all complete: start it, join its rendezvous, or match it. */
static gboolean op_ready(ts_replay *r, int sim, int opi, double now, GError **error)
{
  sim_rank *s = &r->sims[sim];
  const ts_op *op = op_of(r, sim, opi);
  switch (op->kind) {
  case TS_OP_WAIT:
    s->start[opi] = now;
    return op_complete(r, sim, opi, now);
  case TS_OP_COMPUTE:
  case TS_OP_XFER:
  case TS_OP_DELAY: {
    int idx = activity_new(r);
    activity_rec *a = &g_array_index(r->acts, activity_rec, idx);
    a->inl[0] = (member_ref){sim, opi};
    a->ninl = 1;
    a->act.kind = op->kind;
    a->act.op = op;
    a->act.chip = s->rank;
    a->act.label = g_ptr_array_index(r->tr->labels, op->label);
    return activity_start(r, idx, now, error);
  }
  case TS_OP_COLL: {
    if (s->base[op->group] < 0)
      s->base[op->group] = group_base(r, op->group, s->rank);
    int base = s->base[op->group];
    if (base < 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "rank %d op %d '%s': collective on group %s, which does not list rank %d",
                  s->rank, opi, (char *)g_ptr_array_index(r->tr->labels, op->label),
                  ((ts_group *)g_ptr_array_index(r->tr->groups, op->group))->name, s->rank);
      return FALSE;
    }
    int seq = s->coll_seq[op->group]++;
    key3 k = {op->group, base, seq};
    key3 *key = &k;
    rendezvous *rv = g_hash_table_lookup(r->rendezvous, key);
    if (rv == NULL) {
      rv = g_new0(rendezvous, 1);
      rv->group = op->group;
      rv->base = base;
      rv->seq = seq;
      rv->expected = group_expected(r, op->group, base);
      rv->members = g_array_new(FALSE, FALSE, sizeof(member_ref));
      g_hash_table_insert(r->rendezvous, key3_new(k.a, k.b, k.c), rv);
    }
    const ts_op *first = rv->members->len > 0
                             ? op_of(r, g_array_index(rv->members, member_ref, 0).sim,
                                     g_array_index(rv->members, member_ref, 0).op)
                             : op;
    if (first->coll != op->coll || first->bytes != op->bytes) {
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "rank %d op %d '%s': collective %s of %.17g bytes on group %s meets %s of "
                  "%.17g bytes from another member; expected matching collectives",
                  s->rank, opi, (char *)g_ptr_array_index(r->tr->labels, op->label),
                  ts_coll_kind_name(op->coll), op->bytes,
                  ((ts_group *)g_ptr_array_index(r->tr->groups, op->group))->name,
                  ts_coll_kind_name(first->coll), first->bytes);
      return FALSE;
    }
    member_ref ref = {sim, opi};
    g_array_append_val(rv->members, ref);
    rv->arrived++;
    if (now > rv->arrival_max)
      rv->arrival_max = now;
    if (rv->arrived < rv->expected)
      return TRUE;
    int idx = activity_new(r);
    activity_rec *a = &g_array_index(r->acts, activity_rec, idx);
    a->members = rv->members;
    a->rv = rv;
    a->act.kind = TS_OP_COLL;
    a->act.op = first;
    a->act.chip = base;
    a->act.group = g_ptr_array_index(r->tr->groups, op->group);
    a->act.nmembers_simulated = rv->expected;
    a->act.label = g_ptr_array_index(r->tr->labels, first->label);
    gpointer stored_key = NULL;
    g_hash_table_steal_extended(r->rendezvous, key, &stored_key, NULL);
    g_free(stored_key);
    return activity_start(r, idx, rv->arrival_max, error);
  }
  case TS_OP_SEND:
  case TS_OP_RECV: {
    int peer = ts_trace_op_peer(r->tr, op, s->rank);
    if (peer < 0 || r->sim_of_rank[peer] < 0) {
      if (op->peer > 0)
        g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                    "rank %d op %d '%s': %s with peer rank %d, which is not replayed", s->rank, opi,
                    (char *)g_ptr_array_index(r->tr->labels, op->label), ts_op_kind_name(op->kind),
                    op->peer - 1);
      else
        g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                    "rank %d op %d '%s': %s to offset %d along axis %s has no partner rank",
                    s->rank, opi, (char *)g_ptr_array_index(r->tr->labels, op->label),
                    ts_op_kind_name(op->kind), op->offset, r->tr->axes[op->axis].name);
      return FALSE;
    }
    gboolean is_send = op->kind == TS_OP_SEND;
    int src = is_send ? s->rank : peer, dst = is_send ? peer : s->rank;
    key3 k = {src, dst, op->tag};
    key3 *key = &k;
    GHashTable *mine = is_send ? r->p2p_sends : r->p2p_recvs;
    GHashTable *theirs = is_send ? r->p2p_recvs : r->p2p_sends;
    GQueue *q = g_hash_table_lookup(theirs, key);
    if (q == NULL || g_queue_is_empty(q)) {
      GQueue *my = g_hash_table_lookup(mine, key);
      if (my == NULL) {
        my = g_queue_new();
        g_hash_table_insert(mine, key3_new(k.a, k.b, k.c), my);
      }
      p2p_wait *w = g_new(p2p_wait, 1);
      *w = (p2p_wait){sim, opi, now};
      g_queue_push_tail(my, w);
      return TRUE;
    }
    g_autofree p2p_wait *other = g_queue_pop_head(q);
    int idx = activity_new(r);
    activity_rec *a = &g_array_index(r->acts, activity_rec, idx);

    member_ref send_ref = is_send ? (member_ref){sim, opi} : (member_ref){other->sim, other->op};
    member_ref recv_ref = is_send ? (member_ref){other->sim, other->op} : (member_ref){sim, opi};
    a->inl[0] = send_ref;
    a->inl[1] = recv_ref;
    a->ninl = 2;
    const ts_op *sop = op_of(r, send_ref.sim, send_ref.op);
    a->act.kind = TS_OP_SEND;
    a->act.op = sop;
    a->act.chip = src;
    a->act.peer = dst;
    a->act.label = g_ptr_array_index(r->tr->labels, sop->label);
    return activity_start(r, idx, now > other->ready ? now : other->ready, error);
  }
  default:
    break;
  }
  return TRUE;
}

static gboolean op_complete(ts_replay *r, int sim, int opi, double end)
{
  sim_rank *s = &r->sims[sim];
  s->end[opi] = end;
  s->done[opi] = 1;
  s->ndone++;
  const prog_info *pi = &r->progs[s->program];
  for (int k = pi->succ_off[opi]; k < pi->succ_off[opi + 1]; k++) {
    int j = pi->succ[k];
    if (end > s->ready[j])
      s->ready[j] = end;
    if (--s->remaining[j] == 0) {
      member_ref ref = {sim, j};
      g_array_append_val(r->ready_stack, ref);
    }
  }
  return TRUE;
}

/* Starts everything that became ready, in a fixed order, so replays are deterministic. */
static gboolean drain_ready(ts_replay *r, GError **error)
{
  while (r->ready_stack->len > 0) {
    member_ref ref = g_array_index(r->ready_stack, member_ref, r->ready_stack->len - 1);
    g_array_set_size(r->ready_stack, r->ready_stack->len - 1);
    if (!op_ready(r, ref.sim, ref.op, r->sims[ref.sim].ready[ref.op], error))
      return FALSE;
  }
  return TRUE;
}

gboolean ts_replay_complete(ts_replay *r, guint64 token, double end_s, GError **error)
{
  g_return_val_if_fail(token < r->acts->len, FALSE);
  activity_rec *a = &g_array_index(r->acts, activity_rec, token);
  g_return_val_if_fail(a->in_use, FALSE);
  rendezvous *rv = a->rv;
  member_ref inl[2] = {a->inl[0], a->inl[1]};
  const member_ref *m = rv != NULL ? (const member_ref *)rv->members->data : inl;
  guint n = rv != NULL ? rv->members->len : (guint)a->ninl;
  a->in_use = FALSE;
  a->members = NULL;
  a->rv = NULL;
  int idx = (int)token;
  g_array_append_val(r->free_acts, idx);
  r->outstanding--;
  r->events++;
  /* Reverse order on the ready stack keeps member order = start order. */
  for (guint i = n; i-- > 0;)
    op_complete(r, m[i].sim, m[i].op, end_s);
  if (rv != NULL)
    rendezvous_free(rv);
  return drain_ready(r, error);
}

/* Length of the union of intervals (sorted in place by start). */
typedef struct {
  double s, e;
} ival;

static int ival_cmp(const void *a, const void *b)
{
  const ival *x = a, *y = b;
  return x->s < y->s ? -1 : x->s > y->s ? 1 : (x->e < y->e ? -1 : x->e > y->e);
}

static double union_len(ival *v, int n)
{
  if (n == 0)
    return 0.0;
  qsort(v, (size_t)n, sizeof *v, ival_cmp);
  double total = 0, cs = v[0].s, ce = v[0].e;
  for (int i = 1; i < n; i++) {
    if (v[i].s > ce) {
      total += ce - cs;
      cs = v[i].s;
      ce = v[i].e;
    } else if (v[i].e > ce) {
      ce = v[i].e;
    }
  }
  return total + (ce - cs);
}

static gboolean is_comm(ts_op_kind k)
{
  return k == TS_OP_COLL || k == TS_OP_SEND || k == TS_OP_RECV;
}

/* Union length of two interval lists, each sorted by start: one merge pass. */
static double union_len_merged(const ival *a, int na, const ival *b, int nb)
{
  double total = 0, cs = 0, ce = 0;
  gboolean open = FALSE;
  for (int i = 0, j = 0; i < na || j < nb;) {
    const ival *v = j >= nb || (i < na && a[i].s <= b[j].s) ? &a[i++] : &b[j++];
    if (!open || v->s > ce) {
      if (open)
        total += ce - cs;
      cs = v->s;
      ce = v->e;
      open = TRUE;
    } else if (v->e > ce) {
      ce = v->e;
    }
  }
  return open ? total + (ce - cs) : 0.0;
}

static void rank_breakdown(const ts_replay *r, int sim, ts_rank_result *out)
{
  const sim_rank *s = &r->sims[sim];
  const ts_program *p = &r->tr->programs[s->program];
  memset(out, 0, sizeof *out);
  out->rank = s->rank;
  ival *comp = g_new(ival, p->nops + 1), *comm = g_new(ival, p->nops + 1);
  int *comm_cat = g_new(int, p->nops + 1);
  int nc = 0, nm = 0;
  for (int i = 0; i < p->nops; i++) {
    const ts_op *o = &p->ops[i];
    double d = s->end[i] - s->start[i];
    if (s->end[i] > out->end_s)
      out->end_s = s->end[i];
    out->cat_s[o->cat] += d;
    /* Off-chip transfers and fixed durations count as busy time, as the compute-like ops
     * that stood for them in format 1 did. */
    if (o->kind == TS_OP_COMPUTE || o->kind == TS_OP_XFER || o->kind == TS_OP_DELAY)
      comp[nc++] = (ival){s->start[i], s->end[i]};
    else if (is_comm(o->kind))
      comm[nm++] = (ival){s->start[i], s->end[i]};
  }
  out->compute_s = union_len(comp, nc); /* sorts comp */
  /* Sort communication with its categories, so each category's intervals stay sorted. */
  typedef struct {
    ival v;
    int cat;
  } cival;
  cival *cc = g_new(cival, nm + 1);
  for (int i = 0, k = 0; i < p->nops; i++)
    if (is_comm(p->ops[i].kind)) {
      cc[k] = (cival){comm[k], (int)p->ops[i].cat};
      k++;
    }
  qsort(cc, (size_t)nm, sizeof *cc, ival_cmp); /* ival is the first member */
  for (int i = 0; i < nm; i++) {
    comm[i] = cc[i].v;
    comm_cat[i] = cc[i].cat;
  }
  g_free(cc);
  out->comm_s = union_len_merged(comm, nm, NULL, 0);
  double u_all = union_len_merged(comp, nc, comm, nm);
  out->exposed_comm_s = u_all - out->compute_s;
  out->idle_s = out->end_s - u_all;
  /* Pipeline bubble: the rank waits for a pipeline receive whose partner has not sent yet
   * (from when the receive could start to when the transfer began), doing nothing else. */
  ival *wait = g_new(ival, p->nops + 1);
  int nw = 0;
  for (int i = 0; i < p->nops; i++)
    if (p->ops[i].kind == TS_OP_RECV && p->ops[i].cat == TS_CAT_COMM_PP &&
        s->start[i] > s->ready[i])
      wait[nw++] = (ival){s->ready[i], s->start[i]};
  if (nw > 0) {
    ival *busy = g_new(ival, nc + nm + 1);
    int nb = 0;
    for (int i = 0, j = 0; i < nc || j < nm;) /* compute and comm, merged by start */
      busy[nb++] = j >= nm || (i < nc && comp[i].s <= comm[j].s) ? comp[i++] : comm[j++];
    qsort(wait, (size_t)nw, sizeof *wait, ival_cmp);
    out->bubble_s = union_len_merged(busy, nb, wait, nw) - u_all;
    g_free(busy);
  }
  g_free(wait);
  /* Per category: what that category's communication alone adds on top of compute. */
  ival *one = g_new(ival, nm + 1);
  for (int c = 0; c < TS_NCATS; c++) {
    int n = 0;
    for (int i = 0; i < nm; i++)
      if (comm_cat[i] == c)
        one[n++] = comm[i];
    if (n > 0)
      out->exposed_cat_s[c] = union_len_merged(comp, nc, one, n) - out->compute_s;
  }
  g_free(one);
  g_free(comp);
  g_free(comm);
  g_free(comm_cat);
}

gboolean ts_replay_run(ts_replay *r, ts_replay_result *out, GError **error)
{
  memset(out, 0, sizeof *out);
  for (int i = r->nsim - 1; i >= 0; i--) {
    const sim_rank *s = &r->sims[i];
    for (int k = r->progs[s->program].nops - 1; k >= 0; k--)
      if (s->remaining[k] == 0) {
        member_ref ref = {i, k};
        g_array_append_val(r->ready_stack, ref);
      }
  }
  if (!drain_ready(r, error))
    return FALSE;
  if (!r->backend->run(r->backend, r, error))
    return FALSE;
  /* A replay whose partner never arrives ends with ops left: name the first stuck one. */
  for (int i = 0; i < r->nsim; i++) {
    const sim_rank *s = &r->sims[i];
    int n = r->progs[s->program].nops;
    if (s->ndone == n)
      continue;
    for (int k = 0; k < n; k++)
      if (!s->done[k] && s->remaining[k] == 0) {
        const ts_op *o = op_of(r, i, k);
        const char *what = o->kind == TS_OP_COLL ? "its collective's other members never arrived"
                                                 : "its send/recv partner never arrived";
        g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                    "replay stuck: rank %d (program %d) op %d '%s' (%s %s) cannot finish: %s",
                    s->rank, s->program, k, (char *)g_ptr_array_index(r->tr->labels, o->label),
                    ts_op_kind_name(o->kind),
                    o->kind == TS_OP_COLL ? ts_coll_kind_name(o->coll) : "", what);
        return FALSE;
      }
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "replay stuck: rank %d finished %d of %d ops",
                s->rank, s->ndone, n);
    return FALSE;
  }
  out->events = r->events;
  out->nsimulated = r->nsim;
  out->critical_rank = -1;
  for (int i = 0; i < r->nsim; i++) {
    ts_rank_result rr;
    rank_breakdown(r, i, &rr);
    out->mean_compute_s += rr.compute_s / r->nsim;
    out->mean_comm_only_s += rr.exposed_comm_s / r->nsim;
    if (out->critical_rank < 0 || rr.end_s > out->step_time_s) {
      out->step_time_s = rr.end_s;
      out->critical_rank = rr.rank;
      out->critical = rr;
    }
  }
  if (r->keep_spans)
    for (int i = 0; i < r->nsim; i++) {
      const sim_rank *s = &r->sims[i];
      for (int k = 0; k < r->progs[s->program].nops; k++) {
        ts_span sp = {s->rank, s->program, k, s->start[k], s->end[k]};
        g_array_append_val(r->spans, sp);
      }
    }
  return TRUE;
}

void ts_backend_free(ts_backend *b)
{
  if (b != NULL && b->free != NULL)
    b->free(b);
}

ts_replay_mode ts_replay_get_mode(const ts_replay *r)
{
  return r->mode;
}
