/* ts_backend_analytic: the fast backend. Shape-aware compute (ts_cost), closed-form (alpha-beta)
 * collectives from the shared decompositions, its own event queue; no link is shared. */
#include "ts_coll.h"
#include "ts_coll_memo.h"
#include "ts_coll_members.h"
#include "ts_degrade.h"
#include "ts_cost.h"
#include "ts_evq.h"
#include "ts_replay.h"
#include "ts_util.h"

#include <math.h>
#include <string.h>

typedef struct {
  double device, launch;
  int kernels;   /* launches the host makes for the op (ts_cost_kernels) */
  gboolean sync; /* the host waits for the device before launching it (ts_cost_op_syncs) */
} op_cost;

/* One op's entry in its program's table, 4 bytes (issue 11: 24 before, 240 MB of a
 * 10-million-op trace): a compute op's index in the table of its program's distinct compute
 * costs (analytic.cost_tab), a resolved collective's distinct-collective index (ts_op.coll_id -
 * 1), -1 otherwise. One array, so starting an op reads one place whatever its kind. */
typedef gint32 op_entry;

/* Compute costs by (flops, memory bytes, interned shape): a model's layers repeat once per
 * micro-batch and layer, so a program of a million ops has a few hundred distinct compute ops.
 * ts_cost_device and ts_cost_launch are functions of these and the chip alone. Open
 * addressing, linear probing, at most half full. */
typedef struct {
  guint64 flops, mem; /* the doubles' bits */
  const ts_op_shape *shape;
  int idx; /* in analytic.cost_tab */
  gboolean used;
} memo_slot;

typedef struct {
  memo_slot *slots;
  guint cap, len;
} cost_memo;

typedef struct {
  const ts_topo *topo;
  ts_evq q;               /* pending completions by (time, start order) */
  GHashTable *coll_cache; /* coll_key -> double* seconds */
  /* Degraded arrays (issue 14): the topology collectives crossing dead links see, by mask of
   * dimensions, built on first use; every chip's compute speed. */
  ts_topo *degraded[1u << TS_MAX_DIMS];
  double *speed;
  GHashTable *mask_cache;    /* (shape, base chip) -> dead-link mask + 1, when links are dead */
  op_entry **costs;          /* per program, per op (NULL: not made yet) */
  int nprograms;             /* entries of costs */
  cost_memo memo;            /* compute costs by (flops, memory bytes, shape) */
  GArray *cost_tab;          /* op_cost: the distinct compute costs, by memo_slot.idx */
  const ts_trace *tables_of; /* the trace costs and coll_s were made for */
  double *host_clock;        /* per rank: when its host has launched every op so far */
  /* per rank: the end of its latest pipeline send or receive, whose synchronisation the host
   * waits for (ts_cost_host_sync) from then on, as the SimGrid backend applies it when the
   * exchange ends: an op started during the exchange was issued before it */
  double *sync_at;
  /* Per distinct collective of the trace (ts_op.coll_id - 1) on the healthy array: seconds,
   * or -1 until first costed. A collective is then an index, not a key to hash. */
  double *coll_s;
  guint ncoll;
  /* ts_p2p_time by (source, destination, bytes), direct-mapped (NULL until the first pair): a
   * pipeline repeats each stage's transfer per micro-batch, and the route's coordinates cost
   * divisions per call (issue 15, twentieth pass: 2-3% of the every-split sweep). */
  struct p2p_memo {
    int src, dst; /* src -1: empty */
    guint64 bytes_bits;
    double seconds;
  } * p2p_memo;
} analytic;

#define P2P_MEMO_SIZE 256u

static inline guint64 mix64(guint64 h, guint64 w);

/* The index in a->cost_tab of the op's compute cost (made when new). */
static int memo_cost(analytic *a, double flops, double mem_bytes, const ts_op_shape *shape)
{
  guint64 fb, mb;
  memcpy(&fb, &flops, sizeof fb);
  memcpy(&mb, &mem_bytes, sizeof mb);
  cost_memo *m = &a->memo;
  if (2 * (m->len + 1) > m->cap) {
    guint cap = m->cap > 0 ? 2 * m->cap : 1024;
    memo_slot *old = m->slots;
    guint ocap = m->cap;
    m->slots = g_new0(memo_slot, cap);
    m->cap = cap;
    for (guint i = 0; i < ocap; i++)
      if (old[i].used) {
        guint h = (guint)mix64(mix64(mix64(0, old[i].flops), old[i].mem),
                               (guint64)(guintptr)old[i].shape);
        guint j = h & (cap - 1);
        while (m->slots[j].used)
          j = (j + 1) & (cap - 1);
        m->slots[j] = old[i];
      }
    g_free(old);
  }
  guint h = (guint)mix64(mix64(mix64(0, fb), mb), (guint64)(guintptr)shape);
  guint j = h & (m->cap - 1);
  for (; m->slots[j].used; j = (j + 1) & (m->cap - 1))
    if (m->slots[j].flops == fb && m->slots[j].mem == mb && m->slots[j].shape == shape)
      return m->slots[j].idx;
  const ts_chip *chip = &a->topo->chip;
  op_cost c = {ts_cost_device(chip, flops, mem_bytes, shape),
               ts_cost_launch(chip, flops, mem_bytes, shape), ts_cost_kernels(shape),
               ts_cost_op_syncs(shape)};
  if (a->cost_tab == NULL)
    a->cost_tab = g_array_new(FALSE, FALSE, sizeof(op_cost));
  g_array_append_val(a->cost_tab, c);
  int idx = (int)a->cost_tab->len - 1;
  m->slots[j] = (memo_slot){fb, mb, shape, idx, TRUE};
  m->len++;
  return idx;
}

/* A program's per-op tables, made when one of its ops is first started, in one pass over the
 * program in order (the trace's ops are read there, not at every start): compute ops' device and
 * launch seconds, and each resolved collective's distinct-collective index. */
static void tables_free(analytic *a)
{
  for (int p = 0; p < a->nprograms; p++)
    g_free(a->costs[p]);
  g_clear_pointer(&a->costs, g_free);
  g_clear_pointer(&a->coll_s, g_free);
  a->nprograms = 0;
  a->ncoll = 0;
  /* The memo's shapes are the trace's interned copies: another trace's may reuse the address. */
  g_clear_pointer(&a->memo.slots, g_free);
  a->memo.cap = a->memo.len = 0;
  if (a->cost_tab != NULL)
    g_array_set_size(a->cost_tab, 0);
}

static void program_tables(analytic *a, const ts_trace *tr, int p)
{
  if (a->tables_of != tr) { /* a backend reused for another trace: its tables are not these */
    tables_free(a);
    a->tables_of = tr;
  }
  if (a->costs == NULL) {
    a->costs = g_new0(op_entry *, tr->nprograms);
    a->nprograms = tr->nprograms;
  }
  if (a->costs[p] != NULL)
    return;
  const ts_program *prog = &tr->programs[p];
  gsize n = prog->nops > 0 ? (gsize)prog->nops : 1;
  op_entry *e = g_new(op_entry, n);
  for (int k = 0; k < prog->nops; k++) {
    const ts_op_packed *pk = &prog->pk[k];
    ts_op_kind kind = (ts_op_kind)pk->kind;
    e[k] = -1;
    if (kind != TS_OP_COMPUTE && kind != TS_OP_COLL)
      continue;
    if (pk->flags & TS_PK_WIDE) { /* an op that does not pack: expanded */
      const ts_op op = ts_program_op(prog, k);
      if (kind == TS_OP_COMPUTE)
        e[k] = memo_cost(a, op.flops, op.mem_bytes, op.shape);
      else if (ts_trace_coll_desc(tr, &op) != NULL)
        e[k] = op.coll_id - 1;
      continue;
    }
    /* The packed fields themselves (issue 15: expanding every op into a 120-byte ts_op here
     * was 5% of the every-split sweep): a compute op's flops, memory bytes and shape; a
     * collective's group, coll_id and bytes (ts_program_op's expansion of them). */
    if (kind == TS_OP_COMPUTE) {
      e[k] = memo_cost(a, pk->d0, pk->d1, pk->u.shape);
    } else {
      ts_op op = {.coll = pk->coll, .algo = pk->algo, .group = pk->u.g.i0, .bytes = pk->d0};
      op.coll_id = pk->u.g.i1;
      if (ts_trace_coll_desc(tr, &op) != NULL)
        e[k] = op.coll_id - 1;
    }
  }
  a->costs[p] = e;
}

/* Rank c's host after the pipeline exchanges that ended by `now`. */
static inline void host_synced(analytic *a, int c, double now)
{
  if (a->sync_at[c] <= now)
    ts_cost_host_sync(&a->host_clock[c], a->sync_at[c]);
}

/* An op's compute time: device and launch seconds from its program's table (a collapsed replay
 * starts each op once per simulated rank; a full one once per rank). */
static double compute_cost(analytic *a, ts_replay *r, const ts_activity *act, double now)
{
  program_tables(a, ts_replay_trace(r), act->program);
  const op_entry *e = &a->costs[act->program][act->index];
  __builtin_prefetch(e + 16); /* ops start roughly in program order (no fault past the end) */
  const op_cost *c = &g_array_index(a->cost_tab, op_cost, *e);
  if (c->launch <= 0)
    return c->device;
  host_synced(a, act->chip, now);
  return ts_cost_issue(&a->host_clock[act->chip], now, c->device, c->launch, c->kernels, c->sync);
}

/* Memo key of a collective's cost: binary, zero-filled so padding hashes the same way. */
typedef struct {
  ts_group_shape shape;
  int kind, algo;
  double bytes;
  guint degraded; /* dimensions whose dead links the group crosses (issue 14) */
} coll_key;

/* Mixes one 64-bit word into a hash (multiply, xor-shift): fixed-width fields, not bytes. */
static inline guint64 mix64(guint64 h, guint64 w)
{
  h = (h ^ w) * 0x9E3779B97F4A7C15u;
  return h ^ (h >> 29);
}

static guint64 shape_hash(guint64 h, const ts_group_shape *s)
{
  h = mix64(h, (guint64)(guint)s->npieces);
  for (int i = 0; i < s->npieces; i++)
    h = mix64(h, (guint64)(guint)s->p[i].dim << 48 ^ (guint64)(guint)s->p[i].size << 24 ^
                     (guint64)(guint)s->p[i].stride);
  return h;
}

static guint coll_key_hash(gconstpointer p)
{
  const coll_key *k = p;
  guint64 bits;
  memcpy(&bits, &k->bytes, sizeof bits);
  guint64 h = shape_hash(0, &k->shape);
  h = mix64(h, (guint64)(guint)k->kind << 40 ^ (guint64)(guint)k->algo << 20 ^ k->degraded);
  h = mix64(h, bits);
  return (guint)(h ^ (h >> 32));
}

static gboolean coll_key_equal(gconstpointer x, gconstpointer y)
{
  return memcmp(x, y, sizeof(coll_key)) == 0;
}

/* Memo of ts_degrade_group_mask: a group's members are walked once, not at every collective. */
typedef struct {
  ts_group_shape shape;
  int base;
} mask_key;

static guint mask_key_hash(gconstpointer p)
{
  const mask_key *k = p;
  guint64 h = mix64(shape_hash(0, &k->shape), (guint64)(guint)k->base);
  return (guint)(h ^ (h >> 32));
}

static gboolean mask_key_equal(gconstpointer x, gconstpointer y)
{
  return memcmp(x, y, sizeof(mask_key)) == 0;
}

static guint group_mask(analytic *a, const ts_group_shape *shape, int base_chip)
{
  if (a->topo->faults.ndead == 0)
    return 0;
  mask_key k;
  memset(&k, 0, sizeof k);
  k.shape = *shape; /* zero-padded copy from coll_cost */
  k.base = base_chip;
  gpointer v = g_hash_table_lookup(a->mask_cache, &k);
  if (v != NULL)
    return GPOINTER_TO_UINT(v) - 1;
  guint m = ts_degrade_group_mask(a->topo, shape, base_chip);
  g_hash_table_insert(a->mask_cache, g_memdup2(&k, sizeof k), GUINT_TO_POINTER(m + 1));
  return m;
}

static const ts_topo *topo_for(analytic *a, guint mask)
{
  if (mask == 0)
    return a->topo;
  if (a->degraded[mask] == NULL)
    a->degraded[mask] = ts_degrade_topo(a->topo, mask);
  return a->degraded[mask];
}

static double coll_cost_keyed(analytic *a, const ts_op *op, const ts_group *g, int base_chip,
                              GError **error)
{
  if (g->members != NULL && g->shape.npieces == 0) /* irregular member list: not memoised */
    return ts_coll_members_time(a->topo, op->coll, op->algo, g->members, g->nmembers, op->bytes,
                                error);
  coll_key k;
  memset(&k, 0, sizeof k);
  k.shape.npieces = g->shape.npieces;
  for (int i = 0; i < g->shape.npieces; i++)
    k.shape.p[i] = g->shape.p[i];
  k.kind = op->coll;
  k.algo = op->algo;
  k.bytes = op->bytes;
  k.degraded = group_mask(a, &k.shape, base_chip);
  double *hit = g_hash_table_lookup(a->coll_cache, &k);
  if (hit != NULL)
    return *hit;
  const ts_topo *topo = topo_for(a, k.degraded);
  double t = g->members != NULL && g->shape.npieces == 0
                 ? ts_coll_members_time(topo, op->coll, op->algo, g->members, g->nmembers,
                                        op->bytes, error)
             : topo == a->topo /* a sweep's topology, remembered across its predictions */
                 ? ts_coll_time_memo(topo, op->coll, op->algo, &g->shape, op->bytes, NULL, error)
                 : ts_coll_time(topo, op->coll, op->algo, &g->shape, op->bytes, NULL, error);
  if (t < 0)
    return t;
  double *v = g_new(double, 1);
  *v = t;
  g_hash_table_insert(a->coll_cache, g_memdup2(&k, sizeof k), v);
  return t;
}

/* A collective's seconds: by its distinct-collective index when the trace has one and no
 * link is dead (the cost then depends on nothing else), else through the keyed memo. */
static double coll_cost(analytic *a, ts_replay *r, const ts_activity *act, GError **error)
{
  const ts_trace *tr = ts_replay_trace(r);
  /* The op (act->op, or read from the trace when the backend was passed none) is needed only
   * when the collective is costed from its fields. */
  ts_op ob;
  const ts_op *op = act->op;
  if (a->topo->faults.ndead > 0) {
    if (op == NULL) {
      ob = ts_activity_op(r, act);
      op = &ob;
    }
    return coll_cost_keyed(a, op, act->group, act->chip, error);
  }
  program_tables(a, tr, act->program);
  const op_entry *e = &a->costs[act->program][act->index];
  __builtin_prefetch(e + 16);
  int id = *e;
  if (id >= 0 && a->coll_s != NULL && a->ncoll == tr->colls->len && a->coll_s[id] >= 0)
    return a->coll_s[id];
  if (op == NULL) {
    ob = ts_activity_op(r, act);
    op = &ob;
  }
  if (id < 0)
    return coll_cost_keyed(a, op, act->group, act->chip, error);
  if (a->coll_s == NULL || a->ncoll != tr->colls->len) {
    g_free(a->coll_s);
    a->ncoll = tr->colls->len;
    a->coll_s = g_new(double, a->ncoll);
    for (guint i = 0; i < a->ncoll; i++)
      a->coll_s[i] = -1.0;
  }
  if (a->coll_s[id] < 0) {
    double t = coll_cost_keyed(a, op, act->group, act->chip, error);
    if (t < 0)
      return t;
    a->coll_s[id] = t;
  }
  return a->coll_s[id];
}

/* Every rank's host clock and synchronisation time, made on first use. */
static inline void host_clocks(analytic *a, const ts_replay *r)
{
  if (a->host_clock == NULL) {
    a->host_clock = g_new0(double, ts_replay_trace(r)->nranks);
    a->sync_at = g_new0(double, ts_replay_trace(r)->nranks);
  }
}

/* A send/receive pair's seconds from src to dst, started at now, and the hosts' synchronisation
 * with it (ts_cost_host_sync: read only where launch costs are). */
/* ts_p2p_time on the array a pair's route sees (dead links' masks), remembered. */
static double p2p_seconds_of(analytic *a, int src, int dst, double bytes)
{
  if (a->p2p_memo == NULL) {
    a->p2p_memo = g_new(struct p2p_memo, P2P_MEMO_SIZE);
    for (guint i = 0; i < P2P_MEMO_SIZE; i++)
      a->p2p_memo[i].src = -1;
  }
  guint64 bb;
  memcpy(&bb, &bytes, sizeof bb);
  guint64 h = mix64(mix64((guint64)(guint)src << 32 | (guint)dst, bb), 0);
  struct p2p_memo *e = &a->p2p_memo[h & (P2P_MEMO_SIZE - 1)];
  if (e->src == src && e->dst == dst && e->bytes_bits == bb)
    return e->seconds;
  double d = ts_p2p_time(topo_for(a, ts_degrade_route_mask(a->topo, src, dst)), src, dst, bytes);
  *e = (struct p2p_memo){src, dst, bb, d};
  return d;
}

static double p2p_cost(analytic *a, int src, int dst, double bytes, double now)
{
  double d = p2p_seconds_of(a, src, dst, bytes);
  for (int k = 0; k < 2; k++) {
    int c = k == 0 ? src : dst;
    host_synced(a, c, now); /* an earlier exchange's, ended by now */
    a->sync_at[c] = fmax(a->sync_at[c], now + d);
  }
  return d;
}

static gboolean analytic_start(ts_backend *b, ts_replay *r, const ts_activity *act, double now,
                               GError **error)
{
  analytic *a = b->ctx;
  double d = 0.0;
  host_clocks(a, r);
  switch (act->kind) {
  case TS_OP_COMPUTE:
    d = compute_cost(a, r, act, now);
    if (a->speed != NULL)
      d /= a->speed[act->chip];
    break;
  case TS_OP_XFER:
  case TS_OP_DELAY: {
    const ts_op op = ts_activity_op(r, act);
    d = ts_offchip_time(a->topo, &op);
    if (d < 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "'%s': transfer over %s, which the topology gives no bandwidth; expected its "
                  "[host] key or the op's bw_Bps",
                  ts_activity_label(r, act), ts_resource_name(op.resource));
      return FALSE;
    }
  } break;
  case TS_OP_COLL:
    d = ts_trace_group_size(act->group) <= 1 ? 0.0 : coll_cost(a, r, act, error);
    if (d < 0) {
      g_prefix_error(error, "'%s': ", ts_activity_label(r, act));
      return FALSE;
    }
    /* NCCL's kernel waits until every member's host has issued it (in a collapsed replay the
     * members not simulated have idle hosts: the simulated one decides, as in a full one). */
    if (d > 0 && a->topo->chip.collective_launch_s > 0) {
      double wait = 0;
      int nranks = ts_replay_trace(r)->nranks;
      for (int m = 0, n = ts_trace_group_size(act->group); m < n; m++) {
        int c = ts_trace_group_chip(a->topo, act->group, act->chip, m);
        if (c >= 0 && c < nranks) {
          host_synced(a, c, now);
          wait = fmax(wait, ts_cost_issue_collective(&a->host_clock[c], now,
                                                     a->topo->chip.collective_launch_s));
        }
      }
      d += wait;
    }
    break;
  case TS_OP_SEND:
    d = p2p_cost(a, act->chip, act->peer, act->bytes, now);
    break;
  default:
    break;
  }
  ts_evq_push(&a->q, now + d, act->token);
  return TRUE;
}

/* The seconds analytic_start gives each op of program p started as a one-op activity, where
 * they depend on the op alone: on an array with no dead link, no slow chip and no host launch
 * cost, a compute op (its device seconds), an off-chip transfer or delay, a collective (its
 * seconds from the same memos, by the same calls); NaN for the rest, which start() costs. One
 * pass over the packed ops, as program_tables makes its table (which start() makes only when it
 * needs it). A collective whose costing fails is left to start(), which fails it again with its
 * message. */
static gboolean analytic_fixed(ts_backend *b, ts_replay *r, int p, double *secs)
{
  analytic *a = b->ctx;
  /* Launch costs make compute and collective ops wait for a host clock: nothing is fixed. */
  if (a->speed != NULL || a->topo->faults.ndead > 0 || a->topo->chip.kernel_launch_s > 0 ||
      a->topo->chip.collective_launch_s > 0)
    return FALSE;
  const ts_trace *tr = ts_replay_trace(r);
  if (a->tables_of != tr) { /* as program_tables: another trace's tables are not these */
    tables_free(a);
    a->tables_of = tr;
  }
  guint ncoll = tr->colls != NULL ? tr->colls->len : 0;
  if (a->coll_s == NULL || a->ncoll != ncoll) {
    g_free(a->coll_s);
    a->ncoll = ncoll;
    a->coll_s = g_new(double, a->ncoll > 0 ? a->ncoll : 1);
    for (guint i = 0; i < a->ncoll; i++)
      a->coll_s[i] = -1.0;
  }
  const ts_program *prog = &tr->programs[p];
  for (int k = 0; k < prog->nops; k++) {
    const ts_op_packed *pk = &prog->pk[k];
    ts_op_kind kind = (ts_op_kind)pk->kind;
    secs[k] = NAN;
    if (kind == TS_OP_COMPUTE) {
      int idx;
      if (pk->flags & TS_PK_WIDE) {
        const ts_op op = ts_program_op(prog, k);
        idx = memo_cost(a, op.flops, op.mem_bytes, op.shape);
      } else {
        idx = memo_cost(a, pk->d0, pk->d1, pk->u.shape);
      }
      const op_cost *c = &g_array_index(a->cost_tab, op_cost, idx);
      if (c->launch <= 0)
        secs[k] = c->device;
    } else if (kind == TS_OP_XFER || kind == TS_OP_DELAY) {
      const ts_op op = ts_program_op(prog, k);
      double d = ts_offchip_time(a->topo, &op);
      if (d >= 0)
        secs[k] = d;
    } else if (kind == TS_OP_COLL) {
      /* coll_cost's steps: the distinct collective's seconds, else the keyed memo. The packed
       * fields first (ts_trace_coll_desc's test on them): no op is expanded per collective. */
      gboolean wide = (pk->flags & TS_PK_WIDE) != 0;
      int gi = wide ? ts_program_op_group(prog, k) : pk->u.g.i0, id = -1;
      if (gi < 0 || (guint)gi >= tr->groups->len)
        continue;
      const ts_group *g = g_ptr_array_index(tr->groups, gi);
      if (ts_trace_group_size(g) <= 1) {
        secs[k] = 0.0;
        continue;
      }
      if (!wide && pk->u.g.i1 > 0 && (guint)pk->u.g.i1 <= a->ncoll) {
        const ts_coll_desc *dc = &g_array_index(tr->colls, ts_coll_desc, pk->u.g.i1 - 1);
        if (dc->group == gi && dc->coll == (ts_coll_kind)pk->coll &&
            dc->algo == (ts_coll_algo)pk->algo && dc->bytes == pk->d0)
          id = pk->u.g.i1 - 1;
      }
      if (id >= 0 && a->coll_s[id] >= 0) {
        secs[k] = a->coll_s[id];
        continue;
      }
      ts_op op = ts_program_op(prog, k); /* costed from its fields, as start() would */
      if (wide && ts_trace_coll_desc(tr, &op) != NULL)
        id = op.coll_id - 1;
      GError *err = NULL;
      /* The base chip is read only for dead links' masks, excluded here. */
      double d = coll_cost_keyed(a, &op, g, -1, &err);
      g_clear_error(&err);
      if (d < 0)
        continue;
      if (id >= 0)
        a->coll_s[id] = d;
      secs[k] = d;
    }
  }
  return TRUE;
}

/* ts_backend.p2p_seconds: what analytic_start does for a pair, but queueing its end. */
static double analytic_p2p_seconds(ts_backend *b, ts_replay *r, int src, int dst, double bytes,
                                   double now)
{
  analytic *a = b->ctx;
  host_clocks(a, r);
  return p2p_cost(a, src, dst, bytes, now);
}

static gboolean analytic_run(ts_backend *b, ts_replay *r, GError **error)
{
  analytic *a = b->ctx;
  return ts_replay_drain_queue(r, &a->q, error);
}

static void analytic_free(ts_backend *b)
{
  analytic *a = b->ctx;
  ts_evq_clear(&a->q);
  g_hash_table_unref(a->coll_cache);
  for (guint m = 0; m < G_N_ELEMENTS(a->degraded); m++)
    ts_topo_free(a->degraded[m]);
  g_free(a->speed);
  g_hash_table_unref(a->mask_cache);
  tables_free(a);
  if (a->cost_tab != NULL)
    g_array_unref(a->cost_tab);
  g_free(a->host_clock);
  g_free(a->sync_at);
  g_free(a->p2p_memo);
  g_free(a);
  g_free(b);
}

ts_backend *ts_backend_analytic_new(const ts_topo *t)
{
  analytic *a = g_new0(analytic, 1);
  a->topo = t;
  a->coll_cache = g_hash_table_new_full(coll_key_hash, coll_key_equal, g_free, g_free);
  a->mask_cache = g_hash_table_new_full(mask_key_hash, mask_key_equal, g_free, NULL);
  if (t->faults.nslow > 0) {
    a->speed = g_new(double, t->nchips);
    for (int c = 0; c < t->nchips; c++)
      a->speed[c] = ts_degrade_chip_speed(t, c);
  }
  ts_backend *b = g_new0(ts_backend, 1);
  b->name = "analytic";
  b->ctx = a;
  b->start = analytic_start;
  b->run = analytic_run;
  b->free = analytic_free;
  b->label_on_error_only = TRUE;
  b->op_on_demand = TRUE;
  b->fixed_seconds = analytic_fixed;
  b->queue = &a->q;
  /* analytic_fixed gives seconds only with no launch cost, dead link or slow chip: then
   * start() reads no host clock and every activity's seconds are its own. */
  b->pure_when_fixed = TRUE;
  b->p2p_seconds = analytic_p2p_seconds;
  return b;
}
