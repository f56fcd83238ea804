/* ts_validate: split equivalence. The planner's trace of a split is executed on real buffers:
 * every rank walks its program in dependency order, compute ops run the layer's kernel on the
 * rank's shard (ts_validate_layers.c), collective ops gather their members' buffers, are
 * decomposed by ts_coll_decompose with the op's algorithm (auto resolved as the backends
 * resolve it) and run by ts_collexec. The parameters after the step(s) are compared with the
 * single-processor reference (ts_nnet) and the bytes every chip sent with what the trace's
 * decompositions say it sends.
 *
 * Which tensor an op touches comes from its label (the trace has no tensor field): "L fwd" and
 * "L bwd" are layer L's passes, micro-batch k for the k-th such op of a program; "L fwd X" /
 * "L bwd X" a tensor-parallel collective on L's input (before the pass: the pass depends on
 * it), output or input gradient (after the pass: it depends on the pass); "grad all-reduce
 * A..B" the gradients of layers B..A; "optimizer step" the update. docs/validation.md. */
#include "ts_collexec.h"
#include "ts_util.h"
#include "ts_validate_priv.h"

#include <math.h>
#include <string.h>

void ts_validate_options_default(ts_validate_options *o)
{
  memset(o, 0, sizeof *o);
  o->prec = TS_PREC_F32;
  o->steps = 2;
  o->global_batch = 8;
  o->micro_batch = 0;
  /* 256 bytes: every validation network then synchronises its gradients in several buckets,
   * so bucket boundaries are exercised (the planner's default is DDP's 25 MiB). */
  o->bucket_bytes = 256;
  o->algo = TS_ALGO_AUTO;
  o->optimizer = TS_VALIDATE_SGD;
  o->lr = 0.1;
  o->momentum = 0.9;
  o->weight_decay = 0.0;
  o->seed = 42;
}

void ts_validate_result_free(ts_validate_result *r)
{
  if (r == NULL)
    return;
  g_free(r->model);
  g_free(r->split);
  g_free(r->placement);
  g_free(r->topology);
  g_free(r->algorithms);
  for (int i = 0; i < r->ntensors; i++)
    g_free(r->tensors[i].name);
  g_free(r->tensors);
  g_free(r->ranks);
  g_free(r->failure);
  if (r->notes != NULL)
    g_ptr_array_unref(r->notes);
  g_free(r);
}

/* ---- topologies ------------------------------------------------------------------------ */

ts_topo *ts_validate_topology(const char *spec, GError **error)
{
  g_autofree char *kind = NULL;
  const char *colon = spec ? strchr(spec, ':') : NULL;
  gint64 a = 0, b = 1;
  gboolean ok = colon != NULL;
  if (ok) {
    kind = g_strndup(spec, (gsize)(colon - spec));
    g_auto(GStrv) parts = g_strsplit(colon + 1, "x", 3);
    int np = (int)g_strv_length(parts);
    ok = (np == 1 || np == 2) && ts_parse_int(parts[0], 1, 64, &a) &&
         (np == 1 || ts_parse_int(parts[1], 1, 64, &b));
    if (np == 1 && ok && strcmp(kind, "ring") != 0 && strcmp(kind, "switch") != 0)
      ok = FALSE;
    if (np == 2 && strcmp(kind, "ring") == 0)
      ok = FALSE;
    if (ok && strcmp(kind, "torus") != 0 && strcmp(kind, "mesh") != 0 &&
        strcmp(kind, "ring") != 0 && strcmp(kind, "switch") != 0)
      ok = FALSE;
  }
  if (!ok || a * b > 256) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--topology '%s': expected a topology file, a shipped name, or a small array: "
                "torus:AxB, mesh:AxB, ring:N or switch:GxN (G per node, N nodes), at most 256 "
                "chips",
                spec ? spec : "");
    return NULL;
  }
  /* Links with round numbers: the validator checks bytes, not times, but `auto` picks an
   * algorithm by time, so the dimensions differ as a real machine's would (a switch
   * hierarchy's outer level is slower). */
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "[topology]\nname = %s\n[chip]\nname = validation chip\n"
                            "peak_tflops = 1\nmemory_GiB = 16\nmemory_bandwidth_GBps = 100\n",
                         spec);
  gboolean sw = strcmp(kind, "switch") == 0;
  const char *shape = sw ? "switch" : strcmp(kind, "mesh") == 0 ? "mesh" : "ring";
  const char *names[2] = {sw ? "node" : "x", sw ? "net" : "y"};
  gint64 sizes[2] = {a, b};
  int nd = (strcmp(kind, "ring") == 0 || (sw && colon && !strchr(colon, 'x'))) ? 1 : 2;
  for (int d = 0; d < nd; d++)
    g_string_append_printf(s, "[dim.%s]\nsize = %" G_GINT64_FORMAT "\nshape = %s\n"
                              "link_bandwidth_GBps = %d\nlatency_us = %d\n",
                           names[d], sizes[d], shape, sw && d == 1 ? 25 : 100, sw && d == 1 ? 3 : 1);
  g_autoptr(GKeyFile) kf = g_key_file_new();
  g_autoptr(GError) local = NULL;
  gboolean loaded = g_key_file_load_from_data(kf, s->str, s->len, G_KEY_FILE_NONE, &local);
  g_string_free(s, TRUE);
  if (!loaded) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--topology '%s': %s", spec, local->message);
    return NULL;
  }
  return ts_topo_from_keyfile(kf, spec, error);
}

ts_topo *ts_validate_default_topology(int nchips)
{
  int a = nchips, b = 1;
  for (int f = 2; f * f <= nchips; f++)
    if (nchips % f == 0) {
      a = nchips / f;
      b = f;
    }
  g_autofree char *spec = b == 1 ? g_strdup_printf("ring:%d", MAX(nchips, 1))
                                 : g_strdup_printf("torus:%dx%d", a, b);
  return ts_validate_topology(spec, NULL);
}

/* ---- what each op of the trace means ----------------------------------------------------- */

typedef enum {
  VO_UNKNOWN,
  VO_FWD,  /* layer's forward pass */
  VO_BWD,  /* layer's backward pass */
  VO_TP,   /* tensor-parallel collective around a layer's pass */
  VO_GRAD, /* gradient synchronisation of a range of layers */
  VO_OPT,  /* optimizer step */
} vo_kind;

typedef enum { VP_FWD_PRE, VP_FWD_POST, VP_BWD_PRE, VP_BWD_POST } vo_pos;

typedef struct {
  vo_kind kind;
  int layer, micro;
  gboolean bwd;
  vo_pos pos;
  int lo, hi; /* VO_GRAD: layers lo..hi */
} vo_info;

static int layer_by_name(const vd_net *n, const char *name, gsize len)
{
  for (int i = 0; i < n->nlayers; i++)
    if (strlen(n->layers[i].name) == len && strncmp(n->layers[i].name, name, len) == 0)
      return i;
  return -1;
}

static vo_info parse_label(const vd_net *n, const char *label)
{
  vo_info v = {VO_UNKNOWN, -1, 0, FALSE, VP_FWD_PRE, -1, -1};
  if (strcmp(label, "optimizer step") == 0) {
    v.kind = VO_OPT;
    return v;
  }
  if (g_str_has_prefix(label, "grad all-reduce ")) {
    const char *range = label + strlen("grad all-reduce ");
    const char *dots = strstr(range, "..");
    if (dots != NULL) {
      int a = layer_by_name(n, range, (gsize)(dots - range));
      int b = layer_by_name(n, dots + 2, strlen(dots + 2));
      if (a >= 0 && b >= 0) {
        v.kind = VO_GRAD;
        v.lo = MIN(a, b);
        v.hi = MAX(a, b);
      }
    }
    return v;
  }
  /* "<layer> fwd|bwd[ <collective>]": the longest layer name that prefixes the label. */
  int best = -1;
  gsize blen = 0;
  for (int i = 0; i < n->nlayers; i++) {
    gsize len = strlen(n->layers[i].name);
    if (len > blen && strncmp(label, n->layers[i].name, len) == 0 && label[len] == ' ') {
      best = i;
      blen = len;
    }
  }
  if (best < 0)
    return v;
  const char *rest = label + blen + 1;
  v.layer = best;
  if (strcmp(rest, "fwd") == 0)
    v.kind = VO_FWD;
  else if (strcmp(rest, "bwd") == 0) {
    v.kind = VO_BWD;
    v.bwd = TRUE;
  } else if (g_str_has_prefix(rest, "fwd ") || g_str_has_prefix(rest, "bwd ")) {
    v.kind = VO_TP;
    v.bwd = rest[0] == 'b';
  }
  return v;
}

/* Per program: op meanings, and the dependency graph (explicit deps plus the previous op of
 * the same stream) as successor lists. */
typedef struct {
  int nops;
  vo_info *info;
  int *npred;
  int **succ;
  int *nsucc;
} vd_prog;

static void prog_free(vd_prog *p)
{
  for (int j = 0; j < p->nops; j++)
    g_free(p->succ[j]);
  g_free(p->succ);
  g_free(p->nsucc);
  g_free(p->npred);
  g_free(p->info);
}

/* Micro-batch of each pass (its rank among the same layer's passes in program order), and the
 * position of each tensor-parallel collective: after a pass when it depends on that pass
 * directly, else before the layer's next pass. */
static void prog_meanings(const vd_net *n, const ts_trace *tr, const ts_program *pr, vo_info *info)
{
  int nl = n->nlayers;
  int *seen = g_new0(int, 2 * nl);
  int *last_of_stream = g_new(int, 64);
  for (int s = 0; s < 64; s++)
    last_of_stream[s] = -1;
  for (int j = 0; j < pr->nops; j++) {
    const ts_op *op = &pr->ops[j];
    vo_info v = parse_label(n, g_ptr_array_index(tr->labels, op->label));
    int prev = op->stream >= 0 && op->stream < 64 ? last_of_stream[op->stream] : -1;
    if (v.kind == VO_FWD || v.kind == VO_BWD) {
      v.micro = seen[v.layer * 2 + v.bwd]++;
    } else if (v.kind == VO_TP) {
      gboolean after = FALSE;
      for (int d = -1; d < op->ndeps && !after; d++) {
        int q = d < 0 ? prev : op->deps[d];
        if (q >= 0 && info[q].kind == (v.bwd ? VO_BWD : VO_FWD) && info[q].layer == v.layer) {
          after = TRUE;
          v.micro = info[q].micro;
        }
      }
      if (!after)
        v.micro = seen[v.layer * 2 + v.bwd];
      v.pos = v.bwd ? (after ? VP_BWD_POST : VP_BWD_PRE) : (after ? VP_FWD_POST : VP_FWD_PRE);
    }
    info[j] = v;
    if (op->stream >= 0 && op->stream < 64)
      last_of_stream[op->stream] = j;
  }
  g_free(seen);
  g_free(last_of_stream);
}

static void prog_graph(const ts_program *pr, vd_prog *p)
{
  p->nops = pr->nops;
  p->npred = g_new0(int, MAX(pr->nops, 1));
  p->nsucc = g_new0(int, MAX(pr->nops, 1));
  p->succ = g_new0(int *, MAX(pr->nops, 1));
  GArray **succ = g_new(GArray *, MAX(pr->nops, 1));
  for (int j = 0; j < pr->nops; j++)
    succ[j] = g_array_new(FALSE, FALSE, sizeof(int));
  GHashTable *last = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (int j = 0; j < pr->nops; j++) {
    const ts_op *op = &pr->ops[j];
    gpointer prev;
    if (g_hash_table_lookup_extended(last, GINT_TO_POINTER(op->stream), NULL, &prev)) {
      g_array_append_val(succ[GPOINTER_TO_INT(prev)], j);
      p->npred[j]++;
    }
    for (int d = 0; d < op->ndeps; d++) {
      g_array_append_val(succ[op->deps[d]], j);
      p->npred[j]++;
    }
    g_hash_table_insert(last, GINT_TO_POINTER(op->stream), GINT_TO_POINTER(j));
  }
  for (int j = 0; j < pr->nops; j++) {
    p->nsucc[j] = (int)succ[j]->len;
    p->succ[j] = (int *)g_array_free(succ[j], FALSE);
  }
  g_free(succ);
  g_hash_table_unref(last);
}

/* ---- execution state ------------------------------------------------------------------- */

typedef struct {
  int expected, arrived;
  int base;
  int *rank_of_member, *op_of_member; /* by member index */
} rendezvous;

typedef struct {
  vd_exec e;
  const ts_validate_options *o;
  const ts_model *m;
  ts_trace *tr;
  vd_prog *progs;
  int *prog_of; /* per rank */
  /* per rank, per op */
  int **pending;
  gboolean **done, **arrived;
  GArray **ready;          /* per rank: ops ready, in the order they became ready */
  int **coll_seq;          /* per rank, per group */
  GHashTable *rendezvous;  /* "group/base/seq" -> rendezvous */
  GHashTable *plans;       /* decomposition key -> ts_coll_plan */
  GHashTable *algos_used;  /* algorithm names */
  ts_coll_algo *op_algo;   /* resolved algorithm per (program, op): flattened by prog_base */
  int *prog_base;
  gint64 ops_compute, ops_coll;
  char *failure;
} vd_run;

static void rendezvous_free(gpointer p)
{
  rendezvous *rv = p;
  g_free(rv->rank_of_member);
  g_free(rv->op_of_member);
  g_free(rv);
}

static const ts_op *op_at(const vd_run *run, int rank, int j)
{
  return &run->tr->programs[run->prog_of[rank]].ops[j];
}

static const vo_info *info_at(const vd_run *run, int rank, int j)
{
  return &run->progs[run->prog_of[rank]].info[j];
}

static const char *label_of(const vd_run *run, const ts_op *op)
{
  return g_ptr_array_index(run->tr->labels, op->label);
}

G_GNUC_PRINTF(2, 3) static gboolean run_fail(vd_run *run, const char *fmt, ...)
{
  if (run->failure == NULL) {
    va_list ap;
    va_start(ap, fmt);
    run->failure = g_strdup_vprintf(fmt, ap);
    va_end(ap);
  }
  return FALSE;
}

/* A decomposition, memoized (plans are read-only once built). */
static const ts_coll_plan *plan_for(vd_run *run, ts_coll_kind kind, ts_coll_algo algo, int group,
                                    gint64 count, double elem_bytes, GError **error)
{
  g_autofree char *key =
      g_strdup_printf("%d/%d/%d/%" G_GINT64_FORMAT "/%g", kind, algo, group, count, elem_bytes);
  ts_coll_plan *p = g_hash_table_lookup(run->plans, key);
  if (p != NULL)
    return p;
  const ts_group *g = g_ptr_array_index(run->tr->groups, group);
  p = ts_coll_decompose(run->e.topo, kind, algo, &g->shape, count, elem_bytes, error);
  if (p != NULL)
    g_hash_table_insert(run->plans, g_steal_pointer(&key), p);
  return p;
}

/* The op's algorithm: as recorded, or for auto the fastest by analytic time, exactly as the
 * analytic backend resolves it (ts_coll_time with the op's bytes). */
static gboolean resolve_algo(vd_run *run, const ts_op *op, ts_coll_algo *out, GError **error)
{
  const ts_group *g = g_ptr_array_index(run->tr->groups, op->group);
  if (op->algo != TS_ALGO_AUTO) {
    *out = op->algo;
    return TRUE;
  }
  ts_coll_algo chosen = TS_ALGO_RING;
  if (ts_coll_time(run->e.topo, op->coll, TS_ALGO_AUTO, &g->shape, op->bytes, &chosen, error) < 0)
    return FALSE;
  *out = chosen;
  return TRUE;
}

/* Elements the trace says a collective carries (its bytes at the model's element size). */
static gint64 trace_count(const vd_run *run, const ts_op *op, gboolean *whole)
{
  double c = op->bytes / run->m->dtype_bytes;
  *whole = fabs(c - nearbyint(c)) < 1e-9 * MAX(1.0, c);
  return (gint64)nearbyint(c);
}

static void rank_free(vd_exec *e, vd_rank *r)
{
  vd_rank_clear_acts(e, r);
  for (int t = 0; t < r->ntensors; t++) {
    g_free(r->shard[t]);
    g_free(r->w[t]);
    g_free(r->g[t]);
    g_free(r->gs[t]);
    g_free(r->m[t]);
    g_free(r->v[t]);
  }
  g_free(r->n);
  g_free(r->shard);
  g_free(r->w);
  g_free(r->g);
  g_free(r->gs);
  g_free(r->m);
  g_free(r->v);
  g_free(r->synced);
  g_free(r->y);
  g_free(r->dx);
  g_free(r->dr);
  g_free(r->s);
  g_free(r->a0);
  g_free(r->label_seen);
}

static void rank_init(vd_exec *e, vd_rank *r, int rank, double *const *init)
{
  const vd_net *n = e->net;
  const ts_trace *tr = e->tr;
  r->rank = rank;
  r->tp = e->ax[TS_AX_TP] >= 0 ? ts_trace_axis_coord(tr, rank, e->ax[TS_AX_TP]) : 0;
  r->dp = e->ax[TS_AX_DP] >= 0 ? ts_trace_axis_coord(tr, rank, e->ax[TS_AX_DP]) : 0;
  r->pp = e->ax[TS_AX_PP] >= 0 ? ts_trace_axis_coord(tr, rank, e->ax[TS_AX_PP]) : 0;
  int nt = r->ntensors = n->ntensors;
  r->n = g_new0(gint64, MAX(nt, 1));
  r->shard = g_new0(gint64 *, MAX(nt, 1));
  r->w = g_new0(void *, MAX(nt, 1));
  r->g = g_new0(void *, MAX(nt, 1));
  r->gs = g_new0(void *, MAX(nt, 1));
  r->m = g_new0(void *, MAX(nt, 1));
  r->v = g_new0(void *, MAX(nt, 1));
  r->synced = g_new0(gboolean, MAX(nt, 1));
  gsize es = e->k->elem;
  for (int t = 0; t < nt; t++) {
    /* This chip's shard: the planner splits the layer by its tp mode over the tp axis. */
    r->shard[t] = vd_tensor_shard(n, t, e->T, r->tp, &r->n[t]);
    gint64 cnt = MAX(r->n[t], 1);
    r->w[t] = g_malloc0(es * (gsize)cnt);
    r->g[t] = g_malloc0(es * (gsize)cnt);
    r->gs[t] = g_malloc0(es * (gsize)cnt);
    r->m[t] = g_malloc0(es * (gsize)cnt);
    r->v[t] = g_malloc0(es * (gsize)cnt);
    for (gint64 j = 0; j < r->n[t]; j++)
      e->k->set(r->w[t], j, init[t][r->shard[t] ? r->shard[t][j] : j]);
  }
  int cells = MAX(e->nmicro * n->nlayers, 1);
  r->y = g_new0(vd_val, cells);
  r->dx = g_new0(vd_val, cells);
  r->dr = g_new0(vd_val, cells);
  r->s = g_new0(vd_saved, cells);
  r->a0 = g_new0(vd_val, MAX(e->nmicro, 1));
  r->label_seen = g_new0(int, MAX(tr->labels->len, 1));
  vd_rank_clear_acts(e, r);
}

/* ---- collectives ----------------------------------------------------------------------- */

/* The value a tensor-parallel collective acts on for one member. */
static vd_val *tp_target(vd_exec *e, vd_rank *r, const vo_info *v, char **why)
{
  int nl = e->net->nlayers, u = v->micro, i = v->layer;
  if (u >= e->nmicro) {
    *why = g_strdup_printf("micro-batch %d of layer '%s' does not exist (%d per replica)", u,
                           e->net->layers[i].name, e->nmicro);
    return NULL;
  }
  switch (v->pos) {
  case VP_FWD_PRE: {
    /* The layer's input: the samples, or the previous layer's output (its epilogue first). */
    if (i == 0)
      return &r->a0[u];
    vd_val *x = &r->y[u * nl + i - 1];
    if (x->set && x->epilogue >= 0 && !vd_epilogue(e, r, i - 1, u, why))
      return NULL;
    return x;
  }
  case VP_FWD_POST:
    return &r->y[u * nl + i];
  case VP_BWD_POST:
    return &r->dx[u * nl + i];
  default:
    *why = g_strdup_printf("a collective before the backward pass of '%s' (sequence "
                           "parallelism) is not supported by the validator yet",
                           e->net->layers[i].name);
    return NULL;
  }
}

/* Geometry of the activation a tp collective's value belongs to. */
static void tp_geom(const vd_exec *e, const vo_info *v, gint64 *outer, gint64 *f, gint64 *inner)
{
  int k = v->pos == VP_FWD_POST ? v->layer + 1 : v->layer;
  vd_act_geom(e->net, k, outer, f, inner);
  *outer *= e->mb;
}

/* Layers lo..hi in the order the planner fills a bucket (last layer first), their tensors in
 * order: the packed layout every member of the group uses. */
static int bucket_tensors(const vd_net *n, const vo_info *v, int *out)
{
  int c = 0;
  for (int i = v->hi; i >= v->lo; i--)
    for (int t = 0; t < n->layers[i].ntensors; t++)
      out[c++] = n->layers[i].tensor0 + t;
  return c;
}

static gboolean run_coll(vd_run *run, rendezvous *rv)
{
  vd_exec *e = &run->e;
  const vd_kern *k = e->k;
  int nm = rv->expected;
  int r0 = rv->rank_of_member[0];
  const ts_op *op = op_at(run, r0, rv->op_of_member[0]);
  const vo_info *v = info_at(run, r0, rv->op_of_member[0]);
  const char *label = label_of(run, op);
  for (int m = 1; m < nm; m++) {
    const ts_op *o2 = op_at(run, rv->rank_of_member[m], rv->op_of_member[m]);
    if (o2->label != op->label || o2->coll != op->coll)
      return run_fail(run,
                      "collective '%s' of chip %d meets '%s' of chip %d: the replay pairs "
                      "different collectives",
                      label, r0, label_of(run, o2), rv->rank_of_member[m]);
  }
  ts_coll_algo algo = run->op_algo[run->prog_base[run->prog_of[r0]] + rv->op_of_member[0]];
  g_hash_table_add(run->algos_used, (gpointer)ts_coll_algo_name(algo));
  /* Build each member's buffer. */
  gint64 count = -1;
  void **bufs = g_new0(void *, nm);
  vd_val **vals = g_new0(vd_val *, nm);
  int *tl = g_new(int, MAX(e->net->ntensors, 1));
  int ntl = 0;
  g_autofree char *why = NULL;
  GError *err = NULL;
  double *sent = NULL;
  gboolean ok = TRUE;
  gint64 outer = 0, f = 0, inner = 0;
  if (v->kind == VO_GRAD) {
    if (op->coll != TS_COLL_ALLREDUCE) {
      ok = run_fail(run, "'%s': a %s of gradients is not supported by the validator yet", label,
                    ts_coll_kind_name(op->coll));
      goto out;
    }
    ntl = bucket_tensors(e->net, v, tl);
    for (int m = 0; m < nm; m++) {
      vd_rank *r = &e->ranks[rv->rank_of_member[m]];
      /* Every micro-batch's backward pass must have produced these gradients already. */
      for (int i = v->lo; i <= v->hi; i++)
        for (int u = 0; u < e->nmicro && e->net->layers[i].ntensors > 0; u++)
          if (!r->s[u * e->net->nlayers + i].bwd_done) {
            g_autofree char *key = g_strdup_printf("early-%d", op->label);
            vd_note(e, key,
                    "'%s' ran on chip %d before the backward pass of '%s' (micro-batch %d) "
                    "produced its gradient: a missing dependency",
                    label, r->rank, e->net->layers[i].name, u);
          }
      gint64 c = 0;
      for (int q = 0; q < ntl; q++)
        c += r->n[tl[q]];
      if (m == 0)
        count = c;
      else if (c != count) {
        ok = run_fail(run, "'%s': members hold gradient shards of different sizes", label);
        goto out;
      }
      bufs[m] = g_malloc0(k->elem * (gsize)MAX(count, 1));
      c = 0;
      for (int q = 0; q < ntl; q++) {
        memcpy((char *)bufs[m] + k->elem * (gsize)c, r->g[tl[q]], k->elem * (gsize)r->n[tl[q]]);
        c += r->n[tl[q]];
      }
    }
  } else if (v->kind == VO_TP) {
    tp_geom(e, v, &outer, &f, &inner);
    for (int m = 0; m < nm; m++) {
      vd_rank *r = &e->ranks[rv->rank_of_member[m]];
      vals[m] = tp_target(e, r, v, &why);
      if (vals[m] == NULL) {
        ok = run_fail(run, "'%s' on chip %d: %s", label, r->rank, why);
        goto out;
      }
      if (!vals[m]->set) {
        ok = run_fail(run,
                      "'%s' on chip %d acts on a value not computed yet (a missing dependency?)",
                      label, r->rank);
        goto out;
      }
      if (op->coll == TS_COLL_ALLREDUCE && vals[m]->layout == VD_FEAT) {
        ok = run_fail(run, "'%s' on chip %d all-reduces a feature block", label, r->rank);
        goto out;
      }
      if (op->coll == TS_COLL_ALLGATHER && vals[m]->layout != VD_FEAT) {
        ok = run_fail(run, "'%s' on chip %d all-gathers a value it holds whole", label, r->rank);
        goto out;
      }
      if (op->coll == TS_COLL_ALLGATHER && m != r->tp) {
        ok = run_fail(run, "'%s': member %d of the group is tensor-parallel member %d", label, m,
                      r->tp);
        goto out;
      }
    }
    gint64 n0 = vals[0]->n;
    for (int m = 1; m < nm; m++)
      if (vals[m]->n != n0) {
        ok = run_fail(run, "'%s': members hold values of different sizes", label);
        goto out;
      }
    if (op->coll == TS_COLL_ALLREDUCE) {
      count = n0;
      for (int m = 0; m < nm; m++)
        bufs[m] = g_memdup2(vals[m]->data, k->elem * (gsize)MAX(count, 1));
    } else if (op->coll == TS_COLL_ALLGATHER) {
      count = n0 * nm;
    } else {
      ok = run_fail(run, "'%s': a tensor-parallel %s is not supported by the validator yet", label,
                    ts_coll_kind_name(op->coll));
      goto out;
    }
  } else {
    ok = run_fail(run, "collective '%s': the validator does not know which tensor it carries",
                  label);
    goto out;
  }
  const ts_coll_plan *plan = plan_for(run, op->coll, algo, op->group, count, (double)k->elem, &err);
  if (plan == NULL) {
    ok = run_fail(run, "'%s': %s", label, err->message);
    goto out;
  }
  if (op->coll == TS_COLL_ALLGATHER) {
    /* Each member's block sits where the algorithm expects it (ts_coll_shard). */
    for (int m = 0; m < nm; m++) {
      gint64 off, cnt;
      ts_coll_shard(plan, m, &off, &cnt);
      if (cnt != vals[m]->n) {
        ok = run_fail(run, "'%s': member %d owns %" G_GINT64_FORMAT " elements of the %s "
                      "layout but holds a block of %" G_GINT64_FORMAT,
                      label, m, cnt, ts_coll_algo_name(algo), vals[m]->n);
        goto out;
      }
      bufs[m] = g_malloc0(k->elem * (gsize)MAX(count, 1));
      memcpy((char *)bufs[m] + k->elem * (gsize)off, vals[m]->data, k->elem * (gsize)cnt);
    }
  }
  sent = g_new0(double, nm);
  if (!ts_collexec_run(plan, e->prec, nm, count, bufs, sent, &err)) {
    ok = run_fail(run, "'%s': %s", label, err->message);
    goto out;
  }
  /* Bytes: what was sent, at the model's element size, against the trace's decomposition. */
  gboolean whole;
  gint64 tc = trace_count(run, op, &whole);
  const ts_coll_plan *tplan =
      whole ? plan_for(run, op->coll, algo, op->group, tc, run->m->dtype_bytes, NULL) : NULL;
  if (!whole || tc != count) {
    /* Name the tensors a split layer keeps whole on every member (a row-split layer's bias,
     * attention's output bias): a planner that divides every parameter of a split layer by
     * the tp degree counts them short. */
    GString *whole_ts = g_string_new(NULL);
    for (int q = 0; q < ntl && e->T > 1; q++) {
      const vd_tensor *vt = &e->net->tensors[tl[q]];
      if (e->net->layers[vt->layer].tp != TS_TP_REPLICATED && e->ranks[r0].shard[tl[q]] == NULL)
        g_string_append_printf(whole_ts, "%s%s (%" G_GINT64_FORMAT ")", whole_ts->len ? ", " : "",
                               vt->name, vt->numel);
    }
    g_autofree char *key = g_strdup_printf("count-%d", op->label);
    vd_note(e, key,
            "'%s' carries %.17g bytes per member in the trace (%.6g elements of %g bytes), but "
            "the tensors it moves hold %" G_GINT64_FORMAT " elements (%.17g bytes)%s%s%s",
            label, op->bytes, op->bytes / run->m->dtype_bytes, run->m->dtype_bytes, count,
            (double)count * run->m->dtype_bytes,
            whole_ts->len ? "; whole on every tensor-parallel member although their layer is "
                            "split: "
                          : "",
            whole_ts->str, whole_ts->len ? "" : "");
    g_string_free(whole_ts, TRUE);
  }
  for (int m = 0; m < nm; m++) {
    vd_rank *r = &e->ranks[rv->rank_of_member[m]];
    r->sent_bytes += sent[m] / (double)k->elem * run->m->dtype_bytes;
    r->trace_bytes += tplan ? ts_coll_plan_bytes_sent(tplan, m) : NAN;
  }
  /* Unpack. */
  if (v->kind == VO_GRAD) {
    for (int m = 0; m < nm; m++) {
      vd_rank *r = &e->ranks[rv->rank_of_member[m]];
      gint64 c = 0;
      for (int q = 0; q < ntl; q++) {
        int t = tl[q];
        /* The synchronised sum joins what earlier syncs brought; the local buffer restarts. */
        k->axpy(r->n[t], 1.0, (char *)bufs[m] + k->elem * (gsize)c, r->gs[t]);
        memset(r->g[t], 0, k->elem * (gsize)r->n[t]);
        r->synced[t] = TRUE;
        c += r->n[t];
      }
    }
  } else if (op->coll == TS_COLL_ALLREDUCE) {
    for (int m = 0; m < nm; m++) {
      memcpy(vals[m]->data, bufs[m], k->elem * (gsize)count);
      vals[m]->layout = VD_FULL;
      vals[m]->collective = TRUE;
      vals[m]->coll_label = op->label;
    }
    /* Megatron adds the bias (and here the activation and residual) after the sum. */
    if (v->pos == VP_FWD_POST)
      for (int m = 0; m < nm; m++)
        if (vals[m]->epilogue >= 0 &&
            !vd_epilogue(e, &e->ranks[rv->rank_of_member[m]], v->layer, v->micro, &why)) {
          ok = run_fail(run, "'%s': %s", label, why);
          goto out;
        }
  } else {
    /* All-gather: every member reassembles the whole value from the blocks in its buffer. */
    void **blocks = g_new(void *, nm);
    for (int m = 0; m < nm; m++) {
      for (int j = 0; j < nm; j++) {
        gint64 off, cnt;
        ts_coll_shard(plan, j, &off, &cnt);
        blocks[j] = (char *)bufs[m] + k->elem * (gsize)off;
      }
      void *full = g_malloc0(k->elem * (gsize)MAX(count, 1));
      vd_unslice(k, blocks, full, outer, f, inner, nm);
      g_free(vals[m]->data);
      vals[m]->data = full;
      vals[m]->n = count;
      vals[m]->layout = VD_FULL;
      vals[m]->collective = TRUE;
      vals[m]->coll_label = op->label;
    }
    g_free(blocks);
  }
out:
  if (err != NULL)
    g_error_free(err);
  g_free(sent);
  for (int m = 0; m < nm; m++)
    g_free(bufs[m]);
  g_free(bufs);
  g_free(vals);
  g_free(tl);
  if (ok)
    run->ops_coll++;
  return ok;
}

/* ---- compute ops ------------------------------------------------------------------------- */

static void optimizer_step(vd_run *run, vd_rank *r)
{
  vd_exec *e = &run->e;
  const ts_validate_options *o = run->o;
  r->adam_step++;
  for (int t = 0; t < r->ntensors; t++) {
    gint64 n = r->n[t];
    if (e->D > 1)
      for (gint64 j = 0; j < n; j++)
        if (e->k->get(r->g[t], j) != 0) {
          g_autofree char *key = g_strdup_printf("unsynced-%d", t);
          vd_note(e, key,
                  "the optimizer step on chip %d used gradients of '%s' that no data-parallel "
                  "synchronisation summed (a missing or early all-reduce)",
                  r->rank, e->net->tensors[t].name);
          break;
        }
    /* The gradient: what synchronisation summed, plus anything never synchronised. */
    void *g = g_memdup2(r->g[t], e->k->elem * (gsize)MAX(n, 1));
    if (r->synced[t])
      e->k->axpy(n, 1.0, r->gs[t], g);
    if (o->optimizer == TS_VALIDATE_ADAM) {
      ts_adam hp = {o->lr, 0.9, 0.999, 1e-8, o->weight_decay};
      e->k->adam(n, &hp, r->adam_step, r->w[t], g, r->m[t], r->v[t]);
    } else {
      e->k->sgd(n, o->lr, o->momentum, o->weight_decay, r->w[t], g, r->m[t]);
    }
    g_free(g);
  }
}

static gboolean run_compute(vd_run *run, int rank, int j)
{
  vd_exec *e = &run->e;
  vd_rank *r = &e->ranks[rank];
  const ts_op *op = op_at(run, rank, j);
  const vo_info *v = info_at(run, rank, j);
  g_autofree char *why = NULL;
  gboolean ok = TRUE;
  switch (v->kind) {
  case VO_FWD:
  case VO_BWD:
    if (v->micro >= e->nmicro)
      return run_fail(run, "chip %d op %d '%s': micro-batch %d of %d", rank, j, label_of(run, op),
                      v->micro, e->nmicro);
    ok = v->kind == VO_FWD ? vd_layer_fwd(e, r, v->layer, v->micro, &why)
                           : vd_layer_bwd(e, r, v->layer, v->micro, &why);
    break;
  case VO_OPT:
    optimizer_step(run, r);
    break;
  default:
    return run_fail(run,
                    "chip %d op %d '%s': the validator does not know what this op computes, so "
                    "the trace cannot be checked",
                    rank, j, label_of(run, op));
  }
  if (!ok)
    return run_fail(run, "chip %d op %d '%s': %s", rank, j, label_of(run, op), why);
  run->ops_compute++;
  return TRUE;
}

/* ---- the walk ------------------------------------------------------------------------------ */

static void complete(vd_run *run, int rank, int j)
{
  const vd_prog *p = &run->progs[run->prog_of[rank]];
  run->done[rank][j] = TRUE;
  for (int s = 0; s < p->nsucc[j]; s++) {
    int q = p->succ[j][s];
    if (--run->pending[rank][q] == 0)
      g_array_append_val(run->ready[rank], q);
  }
}

/* Rank joins the rendezvous of its collective op j; returns it when complete. */
static rendezvous *arrive(vd_run *run, int rank, int j)
{
  vd_exec *e = &run->e;
  const ts_op *op = op_at(run, rank, j);
  const ts_group *g = g_ptr_array_index(run->tr->groups, op->group);
  int member = 0;
  int base = ts_group_base_chip(e->topo, &g->shape, rank, &member);
  int seq = run->coll_seq[rank][op->group]++;
  g_autofree char *key = g_strdup_printf("%d/%d/%d", op->group, base, seq);
  rendezvous *rv = g_hash_table_lookup(run->rendezvous, key);
  if (rv == NULL) {
    rv = g_new0(rendezvous, 1);
    rv->expected = ts_group_size(&g->shape);
    rv->base = base;
    rv->rank_of_member = g_new(int, rv->expected);
    rv->op_of_member = g_new(int, rv->expected);
    for (int m = 0; m < rv->expected; m++)
      rv->rank_of_member[m] = rv->op_of_member[m] = -1;
    g_hash_table_insert(run->rendezvous, g_strdup(key), rv);
  }
  rv->rank_of_member[member] = rank;
  rv->op_of_member[member] = j;
  run->arrived[rank][j] = TRUE;
  if (++rv->arrived < rv->expected)
    return NULL;
  g_hash_table_steal(run->rendezvous, key);
  return rv;
}

/* Waves: every op ready at the start of a wave runs in it, compute first, then collectives
 * whose members have all arrived. Running each op as early as its dependencies allow means a
 * dependency the trace forgot shows: the reader runs before the writer and sees wrong values. */
static gboolean walk(vd_run *run)
{
  vd_exec *e = &run->e;
  int nr = e->nranks;
  for (int rank = 0; rank < nr; rank++) {
    const vd_prog *p = &run->progs[run->prog_of[rank]];
    g_array_set_size(run->ready[rank], 0);
    for (int j = 0; j < p->nops; j++) {
      run->pending[rank][j] = p->npred[j];
      run->done[rank][j] = run->arrived[rank][j] = FALSE;
      if (p->npred[j] == 0)
        g_array_append_val(run->ready[rank], j);
    }
    memset(run->coll_seq[rank], 0, sizeof(int) * MAX(run->tr->groups->len, 1));
  }
  GArray **wave = g_new(GArray *, MAX(nr, 1));
  for (int rank = 0; rank < nr; rank++)
    wave[rank] = g_array_new(FALSE, FALSE, sizeof(int));
  gboolean ok = TRUE;
  for (;;) {
    gboolean any = FALSE;
    for (int rank = 0; rank < nr; rank++) {
      g_array_set_size(wave[rank], 0);
      g_array_append_vals(wave[rank], run->ready[rank]->data, run->ready[rank]->len);
      g_array_set_size(run->ready[rank], 0);
      any = any || wave[rank]->len > 0;
    }
    if (!any)
      break;
    gboolean progress = FALSE;
    /* Compute and wait ops. */
    for (int rank = 0; rank < nr && ok; rank++)
      for (guint q = 0; q < wave[rank]->len && ok; q++) {
        int j = g_array_index(wave[rank], int, q);
        const ts_op *op = op_at(run, rank, j);
        if (op->kind == TS_OP_COMPUTE || op->kind == TS_OP_WAIT) {
          if (op->kind == TS_OP_COMPUTE)
            ok = run_compute(run, rank, j);
          complete(run, rank, j);
          progress = TRUE;
        }
      }
    /* Collectives. */
    for (int rank = 0; rank < nr && ok; rank++)
      for (guint q = 0; q < wave[rank]->len && ok; q++) {
        int j = g_array_index(wave[rank], int, q);
        const ts_op *op = op_at(run, rank, j);
        if (op->kind == TS_OP_COLL) {
          progress = TRUE;
          rendezvous *rv = arrive(run, rank, j);
          if (rv != NULL) {
            ok = run_coll(run, rv);
            for (int m = 0; m < rv->expected; m++)
              complete(run, rv->rank_of_member[m], rv->op_of_member[m]);
            rendezvous_free(rv);
          }
        } else if (op->kind == TS_OP_SEND || op->kind == TS_OP_RECV) {
          ok = run_fail(run,
                        "chip %d op %d '%s': point-to-point ops (pipeline parallelism) are not "
                        "supported by the validator yet",
                        rank, j, label_of(run, op));
        }
      }
    if (!ok || !progress)
      break;
  }
  for (int rank = 0; rank < nr; rank++)
    g_array_unref(wave[rank]);
  g_free(wave);
  if (!ok)
    return FALSE;
  /* Every op must have run; name the first that did not. */
  for (int rank = 0; rank < nr; rank++) {
    const vd_prog *p = &run->progs[run->prog_of[rank]];
    for (int j = 0; j < p->nops; j++)
      if (!run->done[rank][j]) {
        const ts_op *op = op_at(run, rank, j);
        return run_fail(run,
                        "the trace stopped: chip %d op %d '%s' never ran (%s)", rank, j,
                        label_of(run, op),
                        run->arrived[rank][j] ? "the other members of its collective never "
                                                "arrived"
                                              : "its dependencies never completed");
      }
  }
  return TRUE;
}

/* ---- the run ------------------------------------------------------------------------------ */

static gboolean apply_drops(vd_run *run, const char *const *labels, gboolean deps_only,
                            GError **error)
{
  if (labels == NULL)
    return TRUE;
  for (const char *const *l = labels; *l != NULL; l++) {
    int hits = 0;
    for (int p = 0; p < run->tr->nprograms; p++)
      for (int j = 0; j < run->tr->programs[p].nops; j++) {
        ts_op *op = &run->tr->programs[p].ops[j];
        if (strcmp(label_of(run, op), *l) != 0)
          continue;
        hits++;
        if (deps_only)
          op->ndeps = 0;
        else
          op->kind = TS_OP_WAIT; /* keeps its place, stream and dependencies: a no-op */
      }
    if (hits == 0) {
      GString *known = g_string_new(NULL);
      for (guint i = 0; i < run->tr->labels->len && i < 40; i++)
        g_string_append_printf(known, "%s'%s'", i ? ", " : "",
                               (char *)g_ptr_array_index(run->tr->labels, i));
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s '%s': no op of the trace has this label; expected one of: %s",
                  deps_only ? "--drop-deps" : "--drop-op", *l, known->str);
      g_string_free(known, TRUE);
      return FALSE;
    }
  }
  return TRUE;
}

/* Every collective's algorithm is resolved, and its decomposition checked, before anything
 * runs: an algorithm that does not apply is bad input, not a failed check. */
static gboolean prescan(vd_run *run, GError **error)
{
  int total = 0;
  run->prog_base = g_new0(int, run->tr->nprograms + 1);
  for (int p = 0; p < run->tr->nprograms; p++) {
    run->prog_base[p] = total;
    total += run->tr->programs[p].nops;
  }
  run->prog_base[run->tr->nprograms] = total;
  run->op_algo = g_new0(ts_coll_algo, MAX(total, 1));
  for (int p = 0; p < run->tr->nprograms; p++)
    for (int j = 0; j < run->tr->programs[p].nops; j++) {
      const ts_op *op = &run->tr->programs[p].ops[j];
      if (op->kind != TS_OP_COLL)
        continue;
      ts_coll_algo a;
      g_autoptr(GError) local = NULL;
      gboolean whole;
      gint64 tc = trace_count(run, op, &whole);
      if (!resolve_algo(run, op, &a, &local) ||
          plan_for(run, op->coll, a, op->group, MAX(tc, 1), run->m->dtype_bytes, &local) == NULL) {
        const ts_group *g = g_ptr_array_index(run->tr->groups, op->group);
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "--algorithm %s: op '%s' (%s over the %d members of group %s): %s",
                    ts_coll_algo_name(op->algo), label_of(run, op), ts_coll_kind_name(op->coll),
                    ts_group_size(&g->shape), g->name, local ? local->message : "no algorithm");
        return FALSE;
      }
      run->op_algo[run->prog_base[p] + j] = a;
    }
  return TRUE;
}

static double tolerance_of(const ts_validate_options *o)
{
  if (o->tolerance > 0)
    return o->tolerance;
  return o->prec == TS_PREC_F32 ? 1e-5 : 1e-12;
}

static int cmp_str(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Per tensor, the largest normwise error over the whole copies the chips hold: copies are
 * told apart by data-parallel replica and, for a tensor tp replicates, by tp member. */
static void compare(vd_run *run, ts_nnet *ref, ts_validate_result *res)
{
  vd_exec *e = &run->e;
  const vd_net *n = e->net;
  res->ntensors = n->ntensors;
  res->tensors = g_new0(ts_validate_tensor, MAX(n->ntensors, 1));
  res->max_rel_err = 0;
  for (int t = 0; t < n->ntensors; t++) {
    gint64 numel = n->tensors[t].numel;
    double *want = g_new(double, numel);
    ts_nnet_get(ref, t, TS_NNET_PARAM, want);
    double norm = 0;
    for (gint64 j = 0; j < numel; j++)
      norm += want[j] * want[j];
    GHashTable *copies = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    for (int rank = 0; rank < e->nranks; rank++) {
      vd_rank *r = &e->ranks[rank];
      int copy = r->dp * e->T + (r->shard[t] == NULL ? r->tp : 0);
      double *acc = g_hash_table_lookup(copies, GINT_TO_POINTER(copy));
      if (acc == NULL) {
        acc = g_new0(double, 2);
        g_hash_table_insert(copies, GINT_TO_POINTER(copy), acc);
      }
      for (gint64 j = 0; j < r->n[t]; j++) {
        double d = e->k->get(r->w[t], j) - want[r->shard[t] ? r->shard[t][j] : j];
        acc[0] += d * d;
      }
      acc[1] += (double)r->n[t];
    }
    double worst = 0;
    GHashTableIter it;
    gpointer key, val;
    g_hash_table_iter_init(&it, copies);
    while (g_hash_table_iter_next(&it, &key, &val)) {
      double *acc = val;
      double err = norm > 0 ? sqrt(acc[0] / norm) : sqrt(acc[0]);
      if (acc[1] != (double)numel)
        err = INFINITY; /* a copy missing elements: the shards do not cover the tensor */
      worst = MAX(worst, err);
    }
    ts_validate_tensor *vt = &res->tensors[t];
    vt->name = g_strdup(n->tensors[t].name);
    vt->numel = numel;
    vt->copies = (int)g_hash_table_size(copies);
    vt->rel_err = worst;
    res->max_rel_err = MAX(res->max_rel_err, worst);
    if (isnan(worst))
      res->max_rel_err = NAN;
    g_hash_table_unref(copies);
    g_free(want);
  }
}

/* Values a collective moved that nothing read: communication the simulator times for
 * nothing (e.g. the input gradient of the first layer). */
static void note_unread(vd_run *run)
{
  vd_exec *e = &run->e;
  int cells = e->nmicro * e->net->nlayers;
  for (int rank = 0; rank < e->nranks; rank++)
    for (int c = 0; c < cells; c++) {
      const vd_val *vals[2] = {&e->ranks[rank].dx[c], &e->ranks[rank].y[c]};
      for (int q = 0; q < 2; q++)
        if (vals[q]->set && vals[q]->collective && !vals[q]->read && vals[q]->coll_label >= 0) {
          const char *l = g_ptr_array_index(run->tr->labels, vals[q]->coll_label);
          g_autofree char *key = g_strdup_printf("unread-%s", l);
          vd_note(e, key,
                  "'%s' moves a %s nothing reads%s: communication the simulator times for "
                  "nothing",
                  l, q == 0 ? "gradient" : "value",
                  q == 0 && c % e->net->nlayers == 0 ? " (the input gradient of the first layer)"
                                                     : "");
        }
    }
}

ts_validate_result *ts_validate_run(const ts_model *m, const ts_topo *t, const ts_split *s,
                                    const ts_validate_options *o, GError **error)
{
  if (o->steps < 1 || !(o->lr > 0) || o->momentum < 0 || o->weight_decay < 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--steps %d, --lr %g: expected at least one step and a positive learning rate",
                o->steps, o->lr);
    return NULL;
  }
  vd_net *net = vd_net_new(m, error);
  if (net == NULL)
    return NULL;
  gint64 batch = o->global_batch > 0 ? o->global_batch : 8;
  net->cfg.batch = (int)MIN(batch, G_MAXINT);
  net->cfg.seed = o->seed;
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  po.micro_batch = o->micro_batch;
  po.bucket_bytes = o->bucket_bytes > 0 ? o->bucket_bytes : 256;
  po.algo = o->algo;
  ts_validate_result *res = NULL;
  g_autoptr(ts_nnet) ref = NULL;
  g_autoptr(ts_plan) plan = ts_plan_new(m, t, s, &po, error);
  if (plan == NULL) {
    vd_net_free(net);
    return NULL;
  }
  ref = ts_nnet_new(&net->cfg, o->prec, error);
  if (ref == NULL) {
    vd_net_free(net);
    return NULL;
  }
  /* The validator's tensors are the reference's, one for one. */
  g_assert(ts_nnet_ntensors(ref) == net->ntensors);
  for (int i = 0; i < net->ntensors; i++)
    g_assert(ts_nnet_tensor(ref, i)->numel == net->tensors[i].numel);

  vd_run run = {0};
  run.o = o;
  run.m = m;
  run.tr = ts_plan_trace(plan, error);
  if (run.tr == NULL || !ts_trace_check(run.tr, t, error)) {
    if (run.tr != NULL)
      ts_trace_free(run.tr);
    vd_net_free(net);
    return NULL;
  }
  vd_exec *e = &run.e;
  e->net = net;
  e->prec = o->prec;
  e->k = vd_kern_of(o->prec);
  e->topo = t;
  e->tr = run.tr;
  e->notes = g_ptr_array_new_with_free_func(g_free);
  e->noted = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (int a = 0; a < TS_AX_N; a++) {
    e->ax[a] = -1;
    for (int x = 0; x < run.tr->naxes; x++)
      if (strcmp(run.tr->axes[x].name, ts_axis_kind_name(a)) == 0)
        e->ax[a] = x;
  }
  e->T = plan->degree[TS_AX_TP];
  e->D = plan->degree[TS_AX_DP];
  e->P = plan->degree[TS_AX_PP];
  e->nmicro = (int)plan->n_micro;
  e->mb = (int)plan->micro_batch;
  e->batch = batch;
  e->nranks = run.tr->nranks;
  double *x = NULL;
  int *labels = NULL;
  vd_net_data(net, &x, &labels);
  e->x = x;
  e->labels = labels;

  /* Op meanings from the trace as planned, before any op is dropped. */
  run.progs = g_new0(vd_prog, MAX(run.tr->nprograms, 1));
  for (int p = 0; p < run.tr->nprograms; p++) {
    run.progs[p].info = g_new0(vo_info, MAX(run.tr->programs[p].nops, 1));
    prog_meanings(net, run.tr, &run.tr->programs[p], run.progs[p].info);
  }
  run.plans = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                    (GDestroyNotify)ts_coll_plan_free);
  run.rendezvous = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, rendezvous_free);
  run.algos_used = g_hash_table_new(g_str_hash, g_str_equal);
  gboolean inputs_ok = apply_drops(&run, o->drop_ops, FALSE, error) &&
                       apply_drops(&run, o->drop_deps, TRUE, error) && prescan(&run, error);
  if (inputs_ok) {
    for (int p = 0; p < run.tr->nprograms; p++)
      prog_graph(&run.tr->programs[p], &run.progs[p]);
    res = g_new0(ts_validate_result, 1);
    double **init = g_new(double *, MAX(net->ntensors, 1));
    for (int i = 0; i < net->ntensors; i++) {
      init[i] = g_new(double, net->tensors[i].numel);
      ts_nnet_get(ref, i, TS_NNET_PARAM, init[i]);
    }
    e->ranks = g_new0(vd_rank, e->nranks);
    run.prog_of = g_new(int, e->nranks);
    run.pending = g_new(int *, e->nranks);
    run.done = g_new(gboolean *, e->nranks);
    run.arrived = g_new(gboolean *, e->nranks);
    run.ready = g_new(GArray *, e->nranks);
    run.coll_seq = g_new(int *, e->nranks);
    for (int rank = 0; rank < e->nranks; rank++) {
      rank_init(e, &e->ranks[rank], rank, init);
      run.prog_of[rank] = ts_trace_program_of(run.tr, rank);
      int nops = run.tr->programs[run.prog_of[rank]].nops;
      run.pending[rank] = g_new0(int, MAX(nops, 1));
      run.done[rank] = g_new0(gboolean, MAX(nops, 1));
      run.arrived[rank] = g_new0(gboolean, MAX(nops, 1));
      run.ready[rank] = g_array_new(FALSE, FALSE, sizeof(int));
      run.coll_seq[rank] = g_new0(int, MAX(run.tr->groups->len, 1));
    }
    for (int i = 0; i < net->ntensors; i++)
      g_free(init[i]);
    g_free(init);

    /* The split's steps. */
    res->executed = TRUE;
    for (int step = 0; step < o->steps && res->executed; step++) {
      for (int rank = 0; rank < e->nranks; rank++) {
        vd_rank *r = &e->ranks[rank];
        vd_rank_clear_acts(e, r);
        for (int q = 0; q < r->ntensors; q++) {
          memset(r->g[q], 0, e->k->elem * (gsize)MAX(r->n[q], 1));
          memset(r->gs[q], 0, e->k->elem * (gsize)MAX(r->n[q], 1));
          r->synced[q] = FALSE;
        }
        r->loss = 0;
      }
      res->executed = walk(&run);
      if (step == 0) {
        res->loss = 0;
        for (int rank = 0; rank < e->nranks; rank++)
          res->loss += e->ranks[rank].loss;
      }
      if (res->executed)
        note_unread(&run);
    }
    /* The reference's steps. */
    for (int step = 0; step < o->steps; step++) {
      ts_nnet_zero_grad(ref);
      double l = ts_nnet_forward_backward(ref, 0, net->cfg.batch);
      if (step == 0)
        res->loss_ref = l;
      if (o->optimizer == TS_VALIDATE_ADAM) {
        ts_adam hp = {o->lr, 0.9, 0.999, 1e-8, o->weight_decay};
        ts_nnet_adam(ref, &hp);
      } else {
        ts_nnet_sgd(ref, o->lr, o->momentum, o->weight_decay);
      }
    }
    compare(&run, ref, res);
    res->tolerance = tolerance_of(o);
    res->nranks = e->nranks;
    res->ranks = g_new0(ts_validate_rank, MAX(e->nranks, 1));
    res->bytes_ok = res->executed;
    for (int rank = 0; rank < e->nranks; rank++) {
      res->ranks[rank].trace_bytes = e->ranks[rank].trace_bytes;
      res->ranks[rank].sent_bytes = e->ranks[rank].sent_bytes;
      if (!(res->ranks[rank].trace_bytes == res->ranks[rank].sent_bytes))
        res->bytes_ok = FALSE;
    }
    double loss_err = fabs(res->loss - res->loss_ref) / MAX(fabs(res->loss_ref), 1e-300);
    res->numeric_ok = res->executed && res->max_rel_err <= res->tolerance &&
                      loss_err <= res->tolerance;
    res->passed = res->executed && res->numeric_ok && res->bytes_ok;
    res->failure = g_steal_pointer(&run.failure);
    res->ops_compute = run.ops_compute;
    res->ops_coll = run.ops_coll;
    res->model = g_strdup(m->name);
    res->split = g_strdup(plan->split_text);
    res->placement = g_strdup(plan->placement_text);
    res->topology = g_strdup(t->name);
    res->prec = o->prec;
    res->steps = o->steps;
    GPtrArray *names = g_ptr_array_new();
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, run.algos_used);
    while (g_hash_table_iter_next(&it, &key, NULL))
      g_ptr_array_add(names, key);
    g_ptr_array_sort(names, cmp_str);
    g_ptr_array_add(names, NULL);
    res->algorithms = names->len > 1 ? g_strjoinv(", ", (char **)names->pdata) : g_strdup("none");
    g_ptr_array_free(names, TRUE);
    res->notes = g_steal_pointer(&e->notes);
    for (int rank = 0; rank < e->nranks; rank++) {
      rank_free(e, &e->ranks[rank]);
      g_free(run.pending[rank]);
      g_free(run.done[rank]);
      g_free(run.arrived[rank]);
      g_array_unref(run.ready[rank]);
      g_free(run.coll_seq[rank]);
    }
    g_free(e->ranks);
    g_free(run.prog_of);
    g_free(run.pending);
    g_free(run.done);
    g_free(run.arrived);
    g_free(run.ready);
    g_free(run.coll_seq);
  }
  for (int p = 0; p < run.tr->nprograms; p++)
    prog_free(&run.progs[p]);
  g_free(run.progs);
  g_free(run.prog_base);
  g_free(run.op_algo);
  g_free(run.failure);
  g_hash_table_unref(run.plans);
  g_hash_table_unref(run.rendezvous);
  g_hash_table_unref(run.algos_used);
  if (e->notes != NULL)
    g_ptr_array_unref(e->notes);
  g_hash_table_unref(e->noted);
  ts_trace_free(run.tr);
  g_free(x);
  g_free(labels);
  vd_net_free(net);
  return res;
}

/* ---- report ---------------------------------------------------------------------------- */

char *ts_validate_result_text(const ts_validate_result *r, gboolean per_tensor)
{
  GString *s = g_string_new(NULL);
  char e1[32], e2[32];
  g_string_append_printf(s, "%s, split %s (%s) on %s, %s, %d step%s, collectives: %s\n", r->model,
                         r->split, r->placement, r->topology, ts_prec_name(r->prec), r->steps,
                         r->steps == 1 ? "" : "s", r->algorithms);
  g_string_append_printf(s, "  executed %" G_GINT64_FORMAT " compute ops and %" G_GINT64_FORMAT
                            " collectives per step%s\n",
                         r->ops_compute / MAX(r->steps, 1), r->ops_coll / MAX(r->steps, 1),
                         r->executed ? "" : " (stopped)");
  if (r->failure != NULL)
    g_string_append_printf(s, "  execution failed: %s\n", r->failure);
  g_string_append_printf(s, "  loss of step 1: %s split, %s reference\n",
                         g_ascii_formatd(e1, sizeof e1, "%.10f", r->loss),
                         g_ascii_formatd(e2, sizeof e2, "%.10f", r->loss_ref));
  if (per_tensor) {
    g_string_append_printf(s, "  %-22s %10s %7s %12s\n", "tensor", "elements", "copies",
                           "rel_err");
    for (int i = 0; i < r->ntensors; i++)
      g_string_append_printf(s, "  %-22s %10" G_GINT64_FORMAT " %7d %12s\n", r->tensors[i].name,
                             r->tensors[i].numel, r->tensors[i].copies,
                             g_ascii_formatd(e1, sizeof e1, "%.3e", r->tensors[i].rel_err));
  }
  g_string_append_printf(s, "  largest normwise relative error %s (tolerance %s): %s\n",
                         g_ascii_formatd(e1, sizeof e1, "%.3e", r->max_rel_err),
                         g_ascii_formatd(e2, sizeof e2, "%.0e", r->tolerance),
                         r->numeric_ok ? "pass" : "FAIL");
  double tb = 0, sb = 0;
  int bad = 0;
  for (int i = 0; i < r->nranks; i++) {
    tb += r->ranks[i].trace_bytes;
    sb += r->ranks[i].sent_bytes;
    bad += !(r->ranks[i].trace_bytes == r->ranks[i].sent_bytes);
  }
  g_string_append_printf(s, "  bytes sent, all chips: %s by the trace, %s executed; %d of %d chips "
                            "differ: %s\n",
                         g_ascii_formatd(e1, sizeof e1, "%.0f", tb),
                         g_ascii_formatd(e2, sizeof e2, "%.0f", sb), bad, r->nranks,
                         r->bytes_ok ? "pass" : "FAIL");
  if (bad > 0 || per_tensor)
    for (int i = 0; i < r->nranks; i++)
      if (per_tensor || r->ranks[i].trace_bytes != r->ranks[i].sent_bytes)
        g_string_append_printf(s, "    chip %d: trace %s, executed %s\n", i,
                               g_ascii_formatd(e1, sizeof e1, "%.0f", r->ranks[i].trace_bytes),
                               g_ascii_formatd(e2, sizeof e2, "%.0f", r->ranks[i].sent_bytes));
  for (guint i = 0; r->notes != NULL && i < r->notes->len; i++)
    g_string_append_printf(s, "  note: %s\n", (char *)g_ptr_array_index(r->notes, i));
  g_string_append_printf(s, "  result: %s\n", r->passed ? "PASS" : "FAIL");
  return g_string_free(s, FALSE);
}
