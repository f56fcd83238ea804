/* ts_validate_exec: walks a trace numerically. Every rank runs its program in dependency order;
 * compute ops run the layer kernels on the rank's shard (ts_validate_layers.c); collectives
 * gather their members' buffers, are decomposed by ts_coll_decompose with the op's algorithm
 * (auto resolved exactly as the analytic backend resolves it) and executed by ts_collexec;
 * sends and receives carry real buffers between pipeline stages.
 *
 * What an op touches comes from its tag (trace format 2: role, phase, layer, the layers of a
 * gradient bucket, pipeline stage), which the planner writes on every op
 * (sim/plan/ts_plan_trace.c): role compute, phase fwd, layer L is layer L's forward pass,
 * micro-batch k for the k-th such op of a program; role tp a collective on L's output when it
 * depends directly on that pass, else on L's input before its next pass; role grad with layers A..B
 * the gradients of those layers. Labels are for people only. An op whose tag the validator does not
 * know stops the run: a trace it cannot read is not a trace it checked. */
#include "ts_collexec.h"
#include "ts_plan_priv.h"
#include "ts_util.h"
#include "ts_validate_priv.h"

#include <math.h>
#include <string.h>

typedef enum {
  VO_UNKNOWN,
  VO_NOOP,           /* timing only: host link, NVMe, step end */
  VO_FWD,            /* layer's forward pass */
  VO_RECOMPUTE,      /* its forward again before backward (full recomputation) */
  VO_BWD,            /* its whole backward pass */
  VO_DGRAD,          /* its input gradient */
  VO_WGRAD,          /* its weight gradient */
  VO_ATTN_RECOMPUTE, /* attention probabilities again (selective recomputation) */
  VO_OPT,            /* optimizer step on this chip (its own elements with ZeRO or servers) */
  VO_PS_PUSH,        /* dedicated parameter servers, timed as durations: push gradients */
  VO_PS_UPDATE,      /*   the servers' update */
  VO_PS_PULL,        /*   pull the parameters */
  VO_TP,             /* collective around a layer's pass */
  VO_REGATHER,       /* collective: a layer's input again, for its weight gradient */
  VO_PARAM_AG,       /* collective: a layer's parameters (ZeRO-3) */
  VO_GRAD,           /* collective: gradients of layers lo..hi */
  VO_PARAMS_ALL,     /* collective: every parameter of the device (ZeRO 1-2, server pull) */
  VO_SEND_ACT,       /* pipeline: a stage's output to the next stage */
  VO_RECV_ACT,
  VO_SEND_GRAD, /* pipeline: the gradient of a stage's input to the previous stage */
  VO_RECV_GRAD,
  VO_STAGE_GATHER, /* pipeline with tp: all-gather of the chunks a boundary sent */
  VO_CP_BLOCK,     /* context parallelism: attention against one ring block (fwd or bwd) */
  VO_CP_SEND,      /* ... a K/V block (or, `post`, a partial K/V gradient) to the next rank */
  VO_CP_RECV,
} vo_kind;

enum { PH_FWD, PH_RECOMPUTE, PH_BWD };

typedef struct {
  vo_kind kind;
  int layer, micro, phase;
  gboolean post; /* VO_TP: after the pass (on its output), else before (on its input) */
  int lo, hi;    /* VO_GRAD, VO_PS_PUSH: layers lo..hi */
  int stage;     /* pipeline ops: virtual stage */
  int nsync;     /* VO_GRAD: ops with this label in the program */
  int chunk;     /* tp-overlap: chunk of a forward GEMM or of its collective (else 0) */
  int nchunks;   /* tp-overlap: chunks of the op's layer forward, 0 when not chunked */
} vo_info;

typedef struct {
  int nops;
  vo_info *info;
  int *npred;
  int **succ;
  int *nsucc;
} vd_prog;

typedef struct {
  int expected, arrived;
  int *rank_of_member, *op_of_member; /* by member index */
} rendezvous;

typedef struct {
  void *data;
  gint64 n;
  vd_layout layout;
} message;

/* Dedicated parameter servers: per tensor-parallel member, the parameters they keep. Pushes
 * and updates are counted per pipeline stage: each stage's program pushes and updates only its
 * own layers (ts_plan_trace.c ps_step). */
typedef struct {
  void **w, **g, **m;
  int *pushes;       /* [stage]: pushes received this step */
  gboolean *updated; /* [stage]: that stage's layers updated this step */
} server;

struct vd_run {
  vd_exec *e;
  const ts_validate_options *o;
  const ts_model *m;
  ts_trace *tr;
  vd_prog *progs;
  ts_op **xops; /* per program: its ops, expanded from the trace's packed store */
  int *prog_of; /* per rank */
  int **pending;
  gboolean **done, **arrived;
  GArray **ready;
  int **coll_seq;
  GHashTable *rendezvous; /* "group/base/seq" -> rendezvous */
  GHashTable *mail;       /* "src/dst/tag" -> GQueue of message */
  GHashTable *plans;      /* decomposition key -> ts_coll_plan */
  GHashTable *staging;    /* tp-overlap: "rank/layer/micro/phase/post" -> chunk_stage */
  GHashTable *algos_used;
  ts_coll_algo *op_algo; /* per (program, op), flattened by prog_base */
  int *prog_base;
  server *servers;      /* tp members, dedicated servers only */
  int *pushes_per_step; /* [stage]: pushes one server gets from every worker of the stage */
  gint64 ops_compute, ops_coll, ops_p2p;
  char *failure;
};

/* ---- op meanings ----------------------------------------------------------------- */

/* Chunks the planner cuts layer i's forward (and its re-run) into with tp-overlap, 0 when it
 * does not (ts_plan_fwd_chunks; the validator refuses tp-overlap with cp). */
static int ovl_chunks_of(const vd_exec *e, int i)
{
  return e->plan->exec[i].cp_kv_bytes > 0 ? 0 : ts_plan_fwd_chunks(e->plan, i);
}

/* Is a forward collective of a chunked layer one of its chunks (the gather before it, the
 * reduction after it), rather than a whole collective beside them? */
static gboolean ovl_is_chunk(const vd_exec *e, int i, const ts_op *op)
{
  unsigned chunked = ts_plan_fwd_chunked(e->plan, i);
  if (op->coll == TS_COLL_ALLGATHER)
    return (chunked & TS_CHUNK_GATHER) != 0;
  return (chunked & TS_CHUNK_REDUCE) != 0 && (int)op->coll == e->plan->exec[i].fwd_post.kind;
}

/* What an op is, from its tag (trace format 2): the planner tags every op it writes. */
static vo_info tag_info(const ts_op *op)
{
  vo_info v = {VO_UNKNOWN, -1, 0, PH_FWD, FALSE, -1, -1, -1, 0, 0, 0};
  int ph = op->t_phase == TS_PHASE_RECOMPUTE ? PH_RECOMPUTE
           : op->t_phase == TS_PHASE_BWD     ? PH_BWD
                                             : PH_FWD;
  int layer = op->t_layer - 1;
  switch (op->t_role) {
  case TS_ROLE_COMPUTE:
    v.kind = ph == PH_RECOMPUTE ? VO_RECOMPUTE : ph == PH_BWD ? VO_BWD : VO_FWD;
    v.layer = layer;
    v.phase = ph;
    break;
  case TS_ROLE_INPUT_GRAD:
  case TS_ROLE_WEIGHT_GRAD:
  case TS_ROLE_ATTN_RECOMPUTE:
  case TS_ROLE_REGATHER:
    v.kind = op->t_role == TS_ROLE_INPUT_GRAD    ? VO_DGRAD
             : op->t_role == TS_ROLE_WEIGHT_GRAD ? VO_WGRAD
             : op->t_role == TS_ROLE_REGATHER    ? VO_REGATHER
                                                 : VO_ATTN_RECOMPUTE;
    v.layer = layer;
    v.phase = PH_BWD;
    break;
  case TS_ROLE_TP:
  case TS_ROLE_EP:
    v.kind = VO_TP;
    v.layer = layer;
    v.phase = ph;
    break;
  case TS_ROLE_PARAM_GATHER:
    v.kind = layer >= 0 ? VO_PARAM_AG : op->kind == TS_OP_COLL ? VO_PARAMS_ALL : VO_PS_PULL;
    v.layer = layer;
    break;
  case TS_ROLE_GRAD:
    v.kind = VO_GRAD; /* VO_PS_PUSH when it is a transfer, not a collective */
    v.lo = layer;
    v.hi = op->t_layer_last - 1;
    break;
  case TS_ROLE_OPTIMIZER:
    v.kind = VO_OPT;
    break;
  case TS_ROLE_PS_UPDATE:
    v.kind = VO_PS_UPDATE;
    break;
  case TS_ROLE_PP:
    if (op->kind == TS_OP_COMPUTE) {
      /* A stage's pass over its gradients (pipe-engine=deepspeed's per micro-batch
       * accumulation): timing only, the numbers accumulate every micro-batch anyway. */
      v.kind = VO_NOOP;
      break;
    }
    v.stage = op->t_stage - 1;
    v.phase = ph;
    v.kind = op->kind == TS_OP_COLL   ? VO_STAGE_GATHER
             : op->kind == TS_OP_SEND ? (ph == PH_BWD ? VO_SEND_GRAD : VO_SEND_ACT)
                                      : (ph == PH_BWD ? VO_RECV_GRAD : VO_RECV_ACT);
    if (v.kind != VO_STAGE_GATHER)
      v.phase = PH_FWD;
    break;
  case TS_ROLE_CP_KV:
  case TS_ROLE_CP_DKV:
  case TS_ROLE_CP_ATTN:
    v.kind = op->t_role == TS_ROLE_CP_ATTN ? VO_CP_BLOCK
             : op->kind == TS_OP_SEND      ? VO_CP_SEND
             : op->kind == TS_OP_RECV      ? VO_CP_RECV
                                           : VO_UNKNOWN;
    v.post = op->t_role == TS_ROLE_CP_DKV; /* the gradient ring */
    v.layer = layer;
    v.phase = ph;
    break;
  case TS_ROLE_OFFLOAD:
  case TS_ROLE_MARKER:
  case TS_ROLE_OP_RECOMPUTE: /* recompute=op: timing only (the numbers keep every value) */
  case TS_ROLE_LAYOUT_COPY:  /* a re-layout: timing only (values unchanged) */
  case TS_ROLE_CONTENTION:   /* an overlapped collective's SMs: timing only */
    v.kind = VO_NOOP;
    break;
  default:
    break;
  }
  return v;
}

/* The ring a cp op belongs to: 0 forward, 1 backward, 2 recomputed forward. */
static int cp_pass(const vo_info *v)
{
  return v->phase == PH_BWD ? 1 : v->phase == PH_RECOMPUTE ? 2 : 0;
}

static gboolean is_pass(const vo_info *v, int layer, int phase)
{
  if (v->layer != layer)
    return FALSE;
  switch (phase) {
  case PH_FWD:
    /* Ring attention's last block ends the layer's forward (context parallelism). */
    return v->kind == VO_FWD || (v->kind == VO_CP_BLOCK && v->phase == PH_FWD);
  case PH_RECOMPUTE:
    return v->kind == VO_RECOMPUTE || (v->kind == VO_CP_BLOCK && v->phase == PH_RECOMPUTE);
  default:
    return v->kind == VO_BWD || v->kind == VO_DGRAD;
  }
}

/* The micro-batch an op belongs to: the planner tags every op of a pass with the pass's
 * micro-batch (ts_plan_trace.c), which is not the order passes run in (GPipe runs the backward
 * passes from the last micro-batch to the first); `counted`, the op's rank among its kind, only
 * for an untagged op. */
static int op_micro(const ts_op *op, int counted)
{
  return op->t_micro > 0 ? op->t_micro - 1 : counted;
}

/* Micro-batch of each pass (its tag), and the position of each tensor-parallel collective:
 * after a pass when it depends on that pass directly, else before the layer's next pass; a
 * chunk's index is its rank among the layer's chunks of the same kind in program order. */
static void prog_meanings(const vd_run *run, const ts_program *pr, vo_info *info)
{
  const vd_net *n = run->e->net;
  int nl = n->nlayers;
  int *seen = g_new0(int, (gsize)(VO_STAGE_GATHER + 1) * (nl + 1));
  GHashTable *count = g_hash_table_new(g_direct_hash, g_direct_equal);
  GHashTable *last = g_hash_table_new(g_direct_hash, g_direct_equal);
  /* The op a tp collective sees through an op before it on its stream: a timing-only re-layout
   * (PyTorch's sequence-dim copy) or a layer's weight gradient (PyTorch's serial backward runs
   * it before the input gradient's collective) passes on what it follows. */
  int *via = g_new(int, (gsize)pr->nops);
  for (int j = 0; j < pr->nops; j++) {
    const ts_op ob = ts_program_op(pr, j), *op = &ob;
    vo_info v = tag_info(op);
    if (v.kind == VO_GRAD && op->kind != TS_OP_COLL)
      v.kind = VO_PS_PUSH;
    gpointer prevp;
    int prev = g_hash_table_lookup_extended(last, GINT_TO_POINTER(op->stream), NULL, &prevp)
                   ? GPOINTER_TO_INT(prevp)
                   : -1;
    int slot = v.kind * (nl + 1) + (v.layer >= 0 ? v.layer : nl);
    switch (v.kind) {
    case VO_FWD:
    case VO_RECOMPUTE:
    case VO_BWD:
    case VO_DGRAD:
    case VO_WGRAD:
    case VO_ATTN_RECOMPUTE: {
      int k = seen[slot]++;
      v.micro = op_micro(op, k);
      if ((v.kind == VO_FWD || v.kind == VO_RECOMPUTE) && v.layer >= 0 && v.layer < nl &&
          (v.nchunks = ovl_chunks_of(run->e, v.layer)) > 0) {
        /* tp-overlap: n GEMM chunks per micro-batch, recomputed forwards included. */
        v.chunk = k % v.nchunks;
        v.micro = op_micro(op, k / v.nchunks);
      }
      if ((v.kind == VO_BWD || v.kind == VO_DGRAD) && v.layer >= 0 && v.layer < nl &&
          (v.nchunks = ts_plan_bwd_chunks(run->e->plan, v.layer)) > 0) {
        /* tp-overlap=xla: n backward (input-gradient) GEMM chunks per micro-batch. */
        v.chunk = k % v.nchunks;
        v.micro = op_micro(op, k / v.nchunks);
      }
      break;
    }
    case VO_TP: {
      gboolean after = FALSE;
      for (int d = -1; d < op->ndeps && !after; d++) {
        int q = d < 0 ? prev : op->deps[d];
        q = q >= 0 ? via[q] : q;
        if (q >= 0 && is_pass(&info[q], v.layer, v.phase)) {
          after = TRUE;
          v.micro = info[q].micro;
        }
      }
      v.post = after;
      /* Before a pass: passes (or GEMM chunks) of the layer seen so far. */
      int k = 0;
      if (!after) {
        vo_kind pass = v.phase == PH_FWD ? VO_FWD : v.phase == PH_RECOMPUTE ? VO_RECOMPUTE : VO_BWD;
        k = seen[pass * (nl + 1) + v.layer] +
            seen[VO_DGRAD * (nl + 1) + v.layer] * (pass == VO_BWD);
        int nb = pass == VO_BWD && v.layer >= 0 && v.layer < nl
                     ? ts_plan_bwd_chunks(run->e->plan, v.layer)
                     : 0;
        if (nb > 0 && op->kind == TS_OP_COLL && op->coll == TS_COLL_ALLGATHER) {
          /* A backward gather chunk comes before GEMM chunk c (c chunks seen). */
          v.nchunks = nb;
          v.chunk = k % nb;
        }
        v.micro = op_micro(op, nb > 0 ? k / nb : k);
      }
      if (v.phase != PH_BWD && v.layer >= 0 && v.layer < nl && op->kind == TS_OP_COLL &&
          ovl_chunks_of(run->e, v.layer) > 0 && ovl_is_chunk(run->e, v.layer, op)) {
        /* A gather chunk comes before GEMM chunk c (c GEMM chunks seen), a reduction chunk
         * after it (its dependency's chunk). */
        v.nchunks = ovl_chunks_of(run->e, v.layer);
        if (after) {
          for (int d = -1; d < op->ndeps; d++) {
            int q = d < 0 ? prev : op->deps[d];
            q = q >= 0 ? via[q] : q;
            if (q >= 0 && is_pass(&info[q], v.layer, v.phase))
              v.chunk = info[q].chunk;
          }
        } else {
          v.chunk = k % v.nchunks;
          v.micro = op_micro(op, k / v.nchunks);
        }
      }
      break;
    }
    case VO_REGATHER: {
      int k = seen[VO_DGRAD * (nl + 1) + v.layer] + seen[VO_BWD * (nl + 1) + v.layer];
      int nb = v.layer >= 0 && v.layer < nl ? ts_plan_bwd_chunks(run->e->plan, v.layer) : 0;
      v.micro = op_micro(op, nb > 0 ? k / nb : k);
      break;
    }
    case VO_CP_BLOCK:
    case VO_CP_SEND:
    case VO_CP_RECV:
      /* The ring follows the layer's forward (micro-batch of the last one seen) and comes
       * before its backward (the next one). */
      if (v.layer < 0 || v.layer >= nl)
        break;
      v.micro = op_micro(op, v.phase == PH_BWD ? seen[VO_BWD * (nl + 1) + v.layer] +
                                                     seen[VO_DGRAD * (nl + 1) + v.layer]
                             : v.phase == PH_RECOMPUTE ? seen[VO_RECOMPUTE * (nl + 1) + v.layer] - 1
                                                       : seen[VO_FWD * (nl + 1) + v.layer] - 1);
      break;
    default: {
      /* Labels of sends, receives and gradient syncs repeat once per micro-batch: a pipeline
       * transfer belongs to its tagged micro-batch; a gradient sync keeps its rank among its
       * label's (how many backward passes it must follow, check_early). */
      gpointer c = g_hash_table_lookup(count, GINT_TO_POINTER(op->label));
      v.micro = GPOINTER_TO_INT(c);
      g_hash_table_insert(count, GINT_TO_POINTER(op->label), GINT_TO_POINTER(v.micro + 1));
      if (v.kind >= VO_SEND_ACT && v.kind <= VO_STAGE_GATHER)
        v.micro = op_micro(op, v.micro);
      break;
    }
    }
    info[j] = v;
    via[j] = (v.kind == VO_NOOP || v.kind == VO_WGRAD) && prev >= 0 ? via[prev] : j;
    g_hash_table_insert(last, GINT_TO_POINTER(op->stream), GINT_TO_POINTER(j));
  }
  g_free(via);
  for (int j = 0; j < pr->nops; j++)
    if (info[j].kind == VO_GRAD || info[j].kind == VO_PS_PUSH)
      info[j].nsync =
          GPOINTER_TO_INT(g_hash_table_lookup(count, GINT_TO_POINTER(ts_program_op_label(pr, j))));
  g_hash_table_unref(count);
  g_hash_table_unref(last);
  g_free(seen);
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
    const ts_op ob = ts_program_op(pr, j), *op = &ob;
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

/* ---- helpers ------------------------------------------------------------------------- */

static const ts_op *op_at(const vd_run *run, int rank, int j)
{
  return &run->xops[run->prog_of[rank]][j];
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

static const ts_coll_plan *plan_for(vd_run *run, ts_coll_kind kind, ts_coll_algo algo, int group,
                                    gint64 count, double elem_bytes, GError **error)
{
  g_autofree char *key =
      g_strdup_printf("%d/%d/%d/%" G_GINT64_FORMAT "/%g", kind, algo, group, count, elem_bytes);
  ts_coll_plan *p = g_hash_table_lookup(run->plans, key);
  if (p != NULL)
    return p;
  const ts_group *g = g_ptr_array_index(run->tr->groups, group);
  p = ts_coll_decompose(run->e->topo, kind, algo, &g->shape, count, elem_bytes, error);
  if (p != NULL)
    g_hash_table_insert(run->plans, g_steal_pointer(&key), p);
  return p;
}

/* plan_for, or NULL with the run failed on the op labelled `label` (naming why). */
static const ts_coll_plan *plan_or_fail(vd_run *run, const char *label, ts_coll_kind kind,
                                        ts_coll_algo algo, int group, gint64 count,
                                        double elem_bytes)
{
  GError *err = NULL;
  const ts_coll_plan *p = plan_for(run, kind, algo, group, count, elem_bytes, &err);
  if (p == NULL) {
    run_fail(run, "'%s': %s", label, err->message);
    g_error_free(err);
  }
  return p;
}

/* The op's algorithm: as recorded, or for auto the fastest by analytic time, exactly as the
 * analytic backend resolves it (ts_coll_time with the op's bytes). */
static gboolean resolve_algo(vd_run *run, const ts_op *op, ts_coll_algo *out, GError **error)
{
  const ts_group *g = g_ptr_array_index(run->tr->groups, op->group);
  if (!ts_coll_algo_is_choice(op->algo)) {
    *out = op->algo;
    return TRUE;
  }
  ts_coll_algo chosen = TS_ALGO_RING;
  if (ts_coll_time(run->e->topo, op->coll, op->algo, &g->shape, op->bytes, &chosen, error) < 0)
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

static gboolean group_has_axis(const vd_run *run, int group, int axis)
{
  const ts_group *g = g_ptr_array_index(run->tr->groups, group);
  for (int a = 0; a < g->naxes; a++)
    if (g->axes[a] == axis)
      return TRUE;
  return FALSE;
}

/* Does layer i's gradient need summing over the tp axis too (replicated parameters, work split
 * over tp: per-layer hybrid, or a per-token layer under sequence parallelism)? */
static gboolean dp_over_tp(const vd_exec *e, int i)
{
  return e->T > 1 && !vd_layer_split(e, i) && e->net->layers[i].ntensors > 0 &&
         (e->work[i] == VD_BATCH || e->work[i] == VD_SEQ);
}

/* Is the op's group the tp axis alone (no data-parallel axis)? */
static gboolean tp_only(const vd_run *run, int group)
{
  const vd_exec *e = run->e;
  return group >= 0 && e->T > 1 && e->ax[TS_AX_TP] >= 0 &&
         group_has_axis(run, group, e->ax[TS_AX_TP]) &&
         !(e->ax[TS_AX_DP] >= 0 && group_has_axis(run, group, e->ax[TS_AX_DP])) &&
         !(e->ax_shard >= 0 && group_has_axis(run, group, e->ax_shard));
}

/* Hybrid sharding: is the op the all-reduce of reduce-scattered gradient shards across the
 * replicas (a gradient all-reduce whose group leaves the sharding group out)? */
static gboolean replica_allreduce(const vd_run *run, const ts_op *op, const vo_info *v)
{
  const vd_exec *e = run->e;
  return e->ax_shard >= 0 && v->kind == VO_GRAD && op->kind == TS_OP_COLL &&
         op->coll == TS_COLL_ALLREDUCE && !group_has_axis(run, op->group, e->ax_shard) &&
         !tp_only(run, op->group);
}

/* The layers a gradient op synchronises: those of lo..hi on the chip whose gradient needs the
 * op's group (dp alone, or dp and tp; or dp alone once a tp-only all-reduce summed it, as the
 * planner does with ZeRO), last layer first as the planner fills a bucket. */
static int sync_layers(const vd_run *run, const vd_rank *r, const vo_info *v, int group, int *out)
{
  const vd_exec *e = run->e;
  gboolean with_tp =
      group >= 0 && e->ax[TS_AX_TP] >= 0 && group_has_axis(run, group, e->ax[TS_AX_TP]);
  int c = 0;
  for (int i = v->hi; i >= v->lo; i--)
    if (r->holds[i] && e->net->layers[i].ntensors > 0 &&
        (group < 0 || dp_over_tp(e, i) == with_tp ||
         (!with_tp && dp_over_tp(e, i) && r->tp_summed[i])))
      out[c++] = i;
  return c;
}

/* A layer's parameters on a chip as one flat vector: tensor t's elements [a, b) of the layer's
 * owned range map to tensor-local indices. */
static gint64 layer_flat(const vd_exec *e, const vd_rank *r, int i)
{
  const vd_layer *L = &e->net->layers[i];
  gint64 c = 0;
  for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++)
    c += r->n[t];
  return c;
}

/* Element `pos` of layer i's flat vector on chip r: its tensor and index. */
static void flat_at(const vd_exec *e, const vd_rank *r, int i, gint64 pos, int *t, gint64 *j)
{
  const vd_layer *L = &e->net->layers[i];
  for (int q = L->tensor0; q < L->tensor0 + L->ntensors; q++) {
    if (pos < r->n[q]) {
      *t = q;
      *j = pos;
      return;
    }
    pos -= r->n[q];
  }
  *t = -1;
  *j = 0;
}

/* Owned range of member d of D in a flat vector of c elements (natural partition). */
static void owned(gint64 c, int d, int D, gint64 *lo, gint64 *hi)
{
  *lo = c * d / D;
  *hi = c * (d + 1) / D;
}

/* ---- collectives --------------------------------------------------------------------- */

typedef struct {
  /* Packed layout: position -> (tensor, index) for parameter collectives. */
  GArray *pos_t, *pos_j;
} packing;

/* For parameter and gradient collectives with owners: a buffer whose chunk j (where the plan
 * puts member j's shard) holds member j's owned elements of the layers, in layer order. */
static gboolean owner_packing(vd_run *run, const ts_coll_plan *plan, const vd_rank *r0,
                              const int *layers, int nlay, int nm, gint64 count, packing *pk,
                              const char *label)
{
  vd_exec *e = run->e;
  pk->pos_t = g_array_sized_new(FALSE, FALSE, sizeof(int), (guint)count);
  pk->pos_j = g_array_sized_new(FALSE, FALSE, sizeof(gint64), (guint)count);
  g_array_set_size(pk->pos_t, (guint)count);
  g_array_set_size(pk->pos_j, (guint)count);
  for (int m = 0; m < nm; m++) {
    gint64 off, cnt, c = 0;
    ts_coll_shard(plan, m, &off, &cnt);
    for (int q = 0; q < nlay; q++) {
      gint64 lo, hi;
      owned(layer_flat(e, r0, layers[q]), m, nm, &lo, &hi);
      for (gint64 p = lo; p < hi; p++, c++) {
        if (c >= cnt)
          break;
        flat_at(e, r0, layers[q], p, &g_array_index(pk->pos_t, int, off + c),
                &g_array_index(pk->pos_j, gint64, off + c));
      }
      if (c > cnt)
        break;
    }
    gint64 want = 0;
    for (int q = 0; q < nlay; q++) {
      gint64 lo, hi;
      owned(layer_flat(e, r0, layers[q]), m, nm, &lo, &hi);
      want += hi - lo;
    }
    if (want != cnt)
      return run_fail(run,
                      "'%s': member %d owns %" G_GINT64_FORMAT " elements but the collective's "
                      "decomposition gives it a shard of %" G_GINT64_FORMAT,
                      label, m, want, cnt);
  }
  return TRUE;
}

/* Values (tp collectives) or parameter vectors each member contributes. */
typedef struct {
  vd_run *run;
  rendezvous *rv;
  const ts_op *op;
  const vo_info *v;
  const char *label;
  int nm;
  gint64 count;
  void **bufs;
} coll_ctx;

static void *buf0(const vd_exec *e, gint64 n)
{
  return g_malloc0(e->k->elem * (gsize)MAX(n, 1));
}

/* The value a tensor-parallel collective acts on for one member. */
static vd_val *tp_target(vd_exec *e, vd_rank *r, const vo_info *v, char **why)
{
  int nl = e->net->nlayers, u = v->micro, i = v->layer;
  if (u >= e->nmicro) {
    *why = g_strdup_printf("micro-batch %d of layer '%s' does not exist (%d per replica)", u,
                           e->net->layers[i].name, e->nmicro);
    return NULL;
  }
  if (v->phase == PH_BWD)
    return v->post ? &r->dx[u * nl + i] : vd_out_grad(e, r, i, u, why);
  if (v->post)
    return &r->y[u * nl + i];
  if (i == 0)
    return vd_act_read(e, r, 0, u, "a collective", why);
  vd_val *x = &r->y[u * nl + i - 1];
  if (x->set && x->epilogue >= 0 && !vd_epilogue(e, r, i - 1, u, why))
    return NULL;
  return x;
}

/* Geometry of the activation a tp collective's value belongs to. */
static int tp_act(const vo_info *v)
{
  return (v->phase == PH_BWD) == v->post ? v->layer : v->layer + 1;
}

/* ---- tp-overlap: chunked collectives -------------------------------------------------- */

/* The chunk the validator computes a chunked layer's forward at: after the last gather chunk
 * when its input is gathered in chunks (every chunk of the input is then there), else the
 * first (its input is whole from the start; the reduction chunks follow each GEMM chunk). */
static int ovl_exec_chunk(const vd_exec *e, int i)
{
  return ts_plan_fwd_chunked(e->plan, i) & TS_CHUNK_GATHER ? ovl_chunks_of(e, i) - 1 : 0;
}

/* What the chunks of one collective assembled so far, per member: the whole collective's
 * buffer (in its decomposition's layout) and which chunks arrived. */
typedef struct {
  void *buf;
  guint mask;
} chunk_stage;

static void chunk_stage_free(gpointer p)
{
  chunk_stage *st = p;
  g_free(st->buf);
  g_free(st);
}

static char *stage_key(int rank, const vo_info *v)
{
  return g_strdup_printf("%d/%d/%d/%d/%d", rank, v->layer, v->micro, v->phase, v->post);
}

static gboolean ovl_chunk_arrived(vd_run *run, int rank, const vo_info *v, int chunk)
{
  vo_info pre = *v;
  pre.post = FALSE;
  g_autofree char *key = stage_key(rank, &pre);
  chunk_stage *st = g_hash_table_lookup(run->staging, key);
  return st != NULL && (st->mask & (1u << chunk));
}

static gboolean run_tp(vd_run *run, coll_ctx *c, ts_coll_algo algo, const ts_coll_plan **planp,
                       vd_val **vals, vd_layout *target);

/* Chunk c of n of a tensor-parallel collective (tp-overlap): the whole collective's buffers are
 * packed as without chunks (run_tp), and chunk c carries the c-th n-th of every member's shard
 * of them (of the flat buffer for an all-reduce), in the chunk decomposition's shards. */
static gboolean run_tp_chunk(vd_run *run, coll_ctx *c, ts_coll_algo algo,
                             const ts_coll_plan **planp, const ts_coll_plan **fullp, vd_val **vals,
                             vd_layout *target)
{
  vd_exec *e = run->e;
  const vd_kern *k = e->k;
  const ts_op *op = c->op;
  int n = c->v->nchunks, ch = c->v->chunk;
  if (!run_tp(run, c, algo, fullp, vals, target))
    return FALSE;
  const ts_coll_plan *full = *fullp;
  gint64 total = c->count;
  if (total % n != 0)
    return run_fail(run, "'%s': %" G_GINT64_FORMAT " elements do not split into %d chunks",
                    c->label, total, n);
  *planp = plan_or_fail(run, c->label, op->coll, algo, op->group, total / n, (double)k->elem);
  if (*planp == NULL)
    return FALSE;
  for (int m = 0; m < c->nm; m++) {
    void *cb = buf0(e, total / n);
    if (op->coll == TS_COLL_ALLREDUCE) {
      memcpy(cb, (char *)c->bufs[m] + k->elem * (gsize)(ch * (total / n)),
             k->elem * (gsize)(total / n));
    } else {
      for (int j = 0; j < c->nm; j++) {
        gint64 off, cnt, coff, ccnt;
        ts_coll_shard(full, j, &off, &cnt);
        ts_coll_shard(*planp, j, &coff, &ccnt);
        if (cnt != ccnt * n)
          return run_fail(run,
                          "'%s': member %d's shard (%" G_GINT64_FORMAT
                          " elements) does not split into %d equal chunks",
                          c->label, j, cnt, n);
        memcpy((char *)cb + k->elem * (gsize)coff,
               (char *)c->bufs[m] + k->elem * (gsize)(off + ch * ccnt), k->elem * (gsize)ccnt);
      }
    }
    g_free(c->bufs[m]);
    c->bufs[m] = cb;
  }
  c->count = total / n;
  return TRUE;
}

static gboolean unpack_tp(vd_run *run, coll_ctx *c, const ts_coll_plan *plan, vd_val **vals,
                          vd_layout target);

/* The chunk's result joins what earlier chunks assembled; after the last chunk the members'
 * values change as the whole collective would change them (unpack_tp). A chunk missing by then
 * stops the run. */
static gboolean unpack_tp_chunk(vd_run *run, coll_ctx *c, const ts_coll_plan *plan,
                                const ts_coll_plan *full, vd_val **vals, vd_layout target)
{
  vd_exec *e = run->e;
  const vd_kern *k = e->k;
  int n = c->v->nchunks, ch = c->v->chunk;
  gint64 total = c->count * n;
  for (int m = 0; m < c->nm; m++) {
    int rank = c->rv->rank_of_member[m];
    char *key = stage_key(rank, c->v);
    chunk_stage *st = g_hash_table_lookup(run->staging, key);
    if (st != NULL && st->buf == NULL) {
      g_free(key);
      return run_fail(run, "'%s' on chip %d: chunk %d runs after its collective was complete",
                      c->label, rank, ch + 1);
    }
    if (st == NULL) {
      st = g_new0(chunk_stage, 1);
      st->buf = buf0(e, total);
      for (gint64 q = 0; q < total; q++)
        k->set(st->buf, q, NAN);
      g_hash_table_insert(run->staging, key, st);
    } else {
      g_free(key);
    }
    if (c->op->coll == TS_COLL_ALLREDUCE) {
      memcpy((char *)st->buf + k->elem * (gsize)(ch * c->count), c->bufs[m],
             k->elem * (gsize)c->count);
    } else {
      for (int j = 0; j < c->nm; j++) {
        gint64 off, cnt, coff, ccnt;
        ts_coll_shard(full, j, &off, &cnt);
        ts_coll_shard(plan, j, &coff, &ccnt);
        memcpy((char *)st->buf + k->elem * (gsize)(off + ch * ccnt),
               (char *)c->bufs[m] + k->elem * (gsize)coff, k->elem * (gsize)ccnt);
      }
    }
    st->mask |= 1u << ch;
  }
  if (ch != n - 1)
    return TRUE;
  /* The last chunk: every chunk must be there. */
  for (int m = 0; m < c->nm; m++) {
    g_autofree char *key = stage_key(c->rv->rank_of_member[m], c->v);
    chunk_stage *st = g_hash_table_lookup(run->staging, key);
    for (int q = 0; q < n; q++)
      if (!(st->mask & (1u << q)))
        return run_fail(run,
                        "'%s' on chip %d: chunk %d of %d never ran, so the %s is missing part "
                        "of its value (a missing %s chunk)",
                        c->label, c->rv->rank_of_member[m], q + 1, n,
                        ts_coll_kind_name(c->op->coll), ts_coll_kind_name(c->op->coll));
  }
  for (int m = 0; m < c->nm; m++) {
    g_autofree char *key = stage_key(c->rv->rank_of_member[m], c->v);
    chunk_stage *st = g_hash_table_lookup(run->staging, key);
    g_free(c->bufs[m]);
    c->bufs[m] = g_steal_pointer(&st->buf);
    /* The mask stays (until the step ends): a GEMM chunk may run after the last gather chunk
     * and checks its own chunk arrived. */
  }
  c->count = total;
  return unpack_tp(run, c, full, vals, target);
}

static gboolean run_tp(vd_run *run, coll_ctx *c, ts_coll_algo algo, const ts_coll_plan **planp,
                       vd_val **vals, vd_layout *target)
{
  vd_exec *e = run->e;
  const vd_kern *k = e->k;
  const ts_op *op = c->op;
  const vo_info *v = c->v;
  gint64 dims[4];
  vd_act_dims(e, tp_act(v), dims);
  g_autofree char *why = NULL;
  for (int m = 0; m < c->nm; m++) {
    vd_rank *r = &e->ranks[c->rv->rank_of_member[m]];
    vals[m] = tp_target(e, r, v, &why);
    if (vals[m] == NULL)
      return run_fail(run, "'%s' on chip %d: %s", c->label, r->rank, why);
    if (!vals[m]->set)
      return run_fail(run,
                      "'%s' on chip %d acts on a value not computed yet (a missing dependency?)",
                      c->label, r->rank);
    if (m != r->tp)
      return run_fail(run, "'%s': member %d of the group is tensor-parallel member %d", c->label, m,
                      r->tp);
  }
  vd_val *v0 = vals[0];
  gboolean whole = v0->layout == VD_FULL || v0->layout == VD_PARTIAL;
  /* Target layouts: a reduce-scatter leaves token blocks going forward (sequence parallelism)
   * or the layout the input came in going backward; an all-to-all turns the layer's input into
   * the layout it computes in, or its input gradient back into the input's layout. */
  const vd_saved *s0 = &e->ranks[c->rv->rank_of_member[0]].s[v->micro * e->net->nlayers + v->layer];
  switch (op->coll) {
  case TS_COLL_ALLREDUCE:
    if (!whole)
      return run_fail(run, "'%s' all-reduces a %s", c->label, vd_layout_name(v0->layout));
    *target = VD_FULL;
    c->count = v0->n;
    break;
  case TS_COLL_REDUCESCATTER:
    if (!whole)
      return run_fail(run, "'%s' reduce-scatters a %s", c->label, vd_layout_name(v0->layout));
    *target = v->phase == PH_BWD ? s0->in_orig : VD_SEQ;
    if (*target == VD_FULL || *target == VD_PARTIAL)
      return run_fail(run, "'%s': a reduce-scatter into a whole value", c->label);
    if (*target == VD_SEQ && dims[1] % e->T != 0)
      return run_fail(run,
                      "'%s' scatters the sequence, but %" G_GINT64_FORMAT " token%s per sample do "
                      "not split over tp=%d",
                      c->label, dims[1], dims[1] == 1 ? "" : "s", e->T);
    c->count = v0->n;
    break;
  case TS_COLL_ALLGATHER:
    if (whole && v0->pre == NULL)
      return run_fail(run, "'%s' all-gathers a value every member holds whole", c->label);
    *target = VD_FULL;
    c->count = dims[0] * dims[1] * dims[2] * dims[3];
    break;
  case TS_COLL_ALLTOALL:
    if (whole)
      return run_fail(run, "'%s': an all-to-all of a whole value", c->label);
    *target = v->phase == PH_BWD ? s0->in_orig : vd_layer_want(e, v->layer, v0->layout);
    if (*target == v0->layout || *target == VD_FULL)
      return run_fail(run, "'%s': an all-to-all from a %s to a %s", c->label,
                      vd_layout_name(v0->layout), vd_layout_name(*target));
    c->count = v0->n * c->nm;
    break;
  default:
    return run_fail(run, "'%s': a tensor-parallel %s is not supported by the validator", c->label,
                    ts_coll_kind_name(op->coll));
  }
  for (int m = 1; m < c->nm; m++)
    if (vals[m]->n != v0->n || vals[m]->layout != v0->layout)
      return run_fail(run, "'%s': members hold different values (%s and %s)", c->label,
                      vd_layout_name(v0->layout), vd_layout_name(vals[m]->layout));
  *planp = plan_or_fail(run, c->label, op->coll, algo, op->group, c->count, (double)k->elem);
  if (*planp == NULL)
    return FALSE;
  const ts_coll_plan *plan = *planp;
  gint64 wlo[4] = {0, 0, 0, 0};
  for (int m = 0; m < c->nm; m++) {
    c->bufs[m] = buf0(e, c->count);
    vd_val *x = vals[m];
    if (op->coll == TS_COLL_ALLREDUCE) {
      memcpy(c->bufs[m], x->data, k->elem * (gsize)x->n);
    } else if (op->coll == TS_COLL_REDUCESCATTER) {
      /* Chunk j holds the elements of member j's block, in block order. */
      for (int j = 0; j < c->nm; j++) {
        gint64 off, cnt, lo[4], hi[4];
        ts_coll_shard(plan, j, &off, &cnt);
        if (vd_box(dims, *target, e->T, j, lo, hi) != cnt)
          return run_fail(run, "'%s': member %d's block does not fit the %s shard", c->label, j,
                          ts_coll_algo_name(algo));
        vd_box_copy(k, x->data, wlo, dims, (char *)c->bufs[m] + k->elem * (gsize)off, lo, hi, lo,
                    hi);
      }
    } else if (op->coll == TS_COLL_ALLGATHER) {
      gboolean use_pre = x->layout == VD_FULL || x->layout == VD_PARTIAL;
      vd_layout bl = use_pre ? x->pre_layout : x->layout;
      gint64 off, cnt, lo[4], hi[4];
      ts_coll_shard(plan, m, &off, &cnt);
      if (vd_box(dims, bl, e->T, m, lo, hi) != cnt || cnt != (use_pre ? x->pre_n : x->n))
        return run_fail(run, "'%s': member %d's block does not fit the %s shard", c->label, m,
                        ts_coll_algo_name(algo));
      memcpy((char *)c->bufs[m] + k->elem * (gsize)off, use_pre ? x->pre : x->data,
             k->elem * (gsize)cnt);
    } else {
      /* All-to-all: block j = my block intersected with member j's target block. */
      gint64 blk = c->count / c->nm, xl[4], xh[4];
      vd_box(dims, x->layout, e->T, m, xl, xh);
      for (int j = 0; j < c->nm; j++) {
        gint64 yl[4], yh[4], rl[4], rh[4], rn = 1;
        vd_box(dims, *target, e->T, j, yl, yh);
        for (int q = 0; q < 4; q++) {
          rl[q] = MAX(xl[q], yl[q]);
          rh[q] = MIN(xh[q], yh[q]);
          rn *= MAX(rh[q] - rl[q], 0);
        }
        if (rn != blk)
          return run_fail(run, "'%s': unequal all-to-all blocks", c->label);
        vd_box_copy(k, x->data, xl, xh, (char *)c->bufs[m] + k->elem * (gsize)(j * blk), rl, rh, rl,
                    rh);
      }
    }
  }
  return TRUE;
}

/* Writes a tp collective's result back into each member's value. */
static gboolean unpack_tp(vd_run *run, coll_ctx *c, const ts_coll_plan *plan, vd_val **vals,
                          vd_layout target)
{
  vd_exec *e = run->e;
  const vd_kern *k = e->k;
  const vo_info *v = c->v;
  gint64 dims[4], wlo[4] = {0, 0, 0, 0};
  vd_act_dims(e, tp_act(v), dims);
  for (int m = 0; m < c->nm; m++) {
    vd_val *x = vals[m];
    vd_rank *r = &e->ranks[c->rv->rank_of_member[m]];
    void *data;
    gint64 n;
    if (c->op->coll == TS_COLL_ALLREDUCE) {
      data = g_memdup2(c->bufs[m], k->elem * (gsize)MAX(c->count, 1));
      n = c->count;
    } else if (c->op->coll == TS_COLL_REDUCESCATTER) {
      gint64 off, cnt;
      ts_coll_shard(plan, m, &off, &cnt);
      data = g_memdup2((char *)c->bufs[m] + k->elem * (gsize)off, k->elem * (gsize)MAX(cnt, 1));
      n = cnt;
    } else if (c->op->coll == TS_COLL_ALLGATHER) {
      gboolean use_pre = x->layout == VD_FULL || x->layout == VD_PARTIAL;
      vd_layout bl = use_pre ? x->pre_layout : x->layout;
      n = c->count;
      data = buf0(e, n);
      for (int j = 0; j < c->nm; j++) {
        gint64 off, cnt, lo[4], hi[4];
        ts_coll_shard(plan, j, &off, &cnt);
        vd_box(dims, bl, e->T, j, lo, hi);
        vd_box_copy(k, (char *)c->bufs[m] + k->elem * (gsize)off, lo, hi, data, wlo, dims, lo, hi);
      }
      /* Keep the block: a re-gather (or a recomputation) gathers it again. */
      if (!use_pre) {
        g_free(x->pre);
        x->pre = g_steal_pointer(&x->data);
        x->pre_n = x->n;
        x->pre_layout = x->layout;
      }
    } else {
      gint64 blk = c->count / c->nm, yl[4], yh[4];
      n = vd_box(dims, target, e->T, m, yl, yh);
      data = buf0(e, n);
      for (int j = 0; j < c->nm; j++) {
        gint64 xl[4], xh[4], rl[4], rh[4];
        vd_box(dims, x->layout, e->T, j, xl, xh);
        for (int q = 0; q < 4; q++) {
          rl[q] = MAX(xl[q], yl[q]);
          rh[q] = MIN(xh[q], yh[q]);
        }
        vd_box_copy(k, (char *)c->bufs[m] + k->elem * (gsize)(j * blk), rl, rh, data, yl, yh, rl,
                    rh);
      }
    }
    g_free(x->data);
    x->data = data;
    x->n = n;
    x->layout = target;
    x->collective = TRUE;
    x->coll_label = c->op->label;
    /* Megatron adds the bias (and here the activation and residual) after the sum. */
    g_autofree char *why = NULL;
    if (v->phase != PH_BWD && v->post && x->epilogue >= 0 &&
        !vd_epilogue(e, r, v->layer, v->micro, &why))
      return run_fail(run, "'%s': %s", c->label, why);
  }
  return TRUE;
}

/* Re-gather of a layer's input (sequence parallelism): all-gather the block kept before the
 * forward gather, into the saved input the weight gradient reads. */
static gboolean run_regather(vd_run *run, coll_ctx *c, ts_coll_algo algo, const ts_coll_plan **pp)
{
  vd_exec *e = run->e;
  const vd_kern *k = e->k;
  const vo_info *v = c->v;
  int nl = e->net->nlayers, i = v->layer, u = v->micro;
  gint64 dims[4];
  vd_act_dims(e, i, dims);
  c->count = dims[0] * dims[1] * dims[2] * dims[3];
  const vd_val **src = g_newa(const vd_val *, c->nm);
  for (int m = 0; m < c->nm; m++) {
    vd_rank *r = &e->ranks[c->rv->rank_of_member[m]];
    const vd_val *x = i == 0 ? &r->a0[u] : &r->y[u * nl + i - 1];
    if (u >= e->nmicro || x->pre == NULL)
      return run_fail(run, "'%s' on chip %d: no block of the input was kept to re-gather", c->label,
                      r->rank);
    src[m] = x;
  }
  *pp =
      plan_or_fail(run, c->label, TS_COLL_ALLGATHER, algo, c->op->group, c->count, (double)k->elem);
  if (*pp == NULL)
    return FALSE;
  for (int m = 0; m < c->nm; m++) {
    gint64 off, cnt;
    ts_coll_shard(*pp, m, &off, &cnt);
    if (cnt != src[m]->pre_n)
      return run_fail(run, "'%s': member %d's block does not fit the shard", c->label, m);
    c->bufs[m] = buf0(e, c->count);
    memcpy((char *)c->bufs[m] + k->elem * (gsize)off, src[m]->pre, k->elem * (gsize)cnt);
  }
  return TRUE;
}

static void finish_regather(vd_run *run, coll_ctx *c, const ts_coll_plan *plan)
{
  vd_exec *e = run->e;
  const vd_kern *k = e->k;
  int nl = e->net->nlayers, i = c->v->layer, u = c->v->micro;
  gint64 dims[4], wlo[4] = {0, 0, 0, 0};
  vd_act_dims(e, i, dims);
  for (int m = 0; m < c->nm; m++) {
    vd_rank *r = &e->ranks[c->rv->rank_of_member[m]];
    const vd_val *x = i == 0 ? &r->a0[u] : &r->y[u * nl + i - 1];
    void *full = buf0(e, c->count);
    for (int j = 0; j < c->nm; j++) {
      gint64 off, cnt, lo[4], hi[4];
      ts_coll_shard(plan, j, &off, &cnt);
      vd_box(dims, x->pre_layout, e->T, j, lo, hi);
      vd_box_copy(k, (char *)c->bufs[m] + k->elem * (gsize)off, lo, hi, full, wlo, dims, lo, hi);
    }
    vd_saved *s = &r->s[u * nl + i];
    vd_layout w = s->work;
    g_free(s->x);
    s->x = w == VD_FULL ? full : vd_slice_box(e, full, dims, w, r->tp);
    if (w != VD_FULL)
      g_free(full);
    s->x_stale = FALSE;
  }
}

/* The chunks a pipeline boundary sent to the tp members of a stage (Megatron-LM's scatter /
 * gather, Narayanan et al. 2021 SC, section 4.1): member r holds flat chunk r. */
static gboolean run_stage_gather(vd_run *run, coll_ctx *c, ts_coll_algo algo,
                                 const ts_coll_plan **pp, vd_val **vals)
{
  vd_exec *e = run->e;
  const ts_plan *p = e->plan;
  const vo_info *v = c->v;
  int nl = e->net->nlayers, u = v->micro;
  if (v->stage < 0 || v->stage >= p->nstages || u >= e->nmicro)
    return run_fail(run, "'%s': stage %d, micro-batch %d out of range", c->label, v->stage, u);
  /* pipe-engine=deepspeed: after the received gradient's gather, the stage all-gathers its
   * own output back from the tp slices it kept (PartitionedTensor.full): member r sends flat
   * chunk r of the whole output, which must come back unchanged. */
  const vd_val *ga0 =
      &e->ranks[c->rv->rank_of_member[0]].ga[u * (nl + 1) + p->stage_first[v->stage + 1]];
  gboolean ds_out = v->phase == PH_BWD && p->pipe_engine_ds && ga0->set && ga0->layout != VD_FLAT;
  for (int m = 0; m < c->nm; m++) {
    vd_rank *r = &e->ranks[c->rv->rank_of_member[m]];
    vals[m] = v->phase == PH_FWD || ds_out ? &r->y[u * nl + p->stage_first[v->stage + ds_out] - 1]
                                           : &r->ga[u * (nl + 1) + p->stage_first[v->stage + 1]];
    gboolean ok =
        ds_out ? vals[m]->layout == VD_FULL && vals[m]->n % c->nm == 0 : vals[m]->layout == VD_FLAT;
    if (!vals[m]->set || !ok || m != r->tp || vals[m]->n != vals[0]->n)
      return run_fail(run, "'%s' on chip %d: no chunk %d of the boundary value was %s", c->label,
                      r->rank, m, ds_out ? "kept" : "received");
  }
  c->count = ds_out ? vals[0]->n : vals[0]->n * c->nm;
  *pp = plan_or_fail(run, c->label, TS_COLL_ALLGATHER, algo, c->op->group, c->count,
                     (double)e->k->elem);
  if (*pp == NULL)
    return FALSE;
  for (int m = 0; m < c->nm; m++) {
    gint64 off, cnt;
    ts_coll_shard(*pp, m, &off, &cnt);
    if (cnt != (ds_out ? c->count / c->nm : vals[m]->n) || (ds_out && off != m * cnt))
      return run_fail(run, "'%s': member %d's chunk does not fit the shard", c->label, m);
    c->bufs[m] = buf0(e, c->count);
    memcpy((char *)c->bufs[m] + e->k->elem * (gsize)off,
           (char *)vals[m]->data + (ds_out ? e->k->elem * (gsize)off : 0), e->k->elem * (gsize)cnt);
  }
  return TRUE;
}

/* Gradient or parameter collectives: the layers, and each member's packed buffer. */
static gboolean run_params(vd_run *run, coll_ctx *c, ts_coll_algo algo, const ts_coll_plan **pp,
                           int *layers, int *nlay, packing *pk)
{
  vd_exec *e = run->e;
  const vd_kern *k = e->k;
  const ts_op *op = c->op;
  const vo_info *v = c->v;
  vd_rank *r0 = &e->ranks[c->rv->rank_of_member[0]];
  if (v->kind == VO_GRAD) {
    *nlay = sync_layers(run, r0, v, op->group, layers);
  } else if (v->kind == VO_PARAM_AG) {
    *nlay = 1;
    layers[0] = v->layer;
  } else {
    *nlay = 0;
    for (int i = 0; i < e->net->nlayers; i++)
      if (r0->holds[i] && e->net->layers[i].ntensors > 0)
        layers[(*nlay)++] = i;
  }
  if (replica_allreduce(run, op, v)) {
    /* Each member sends the shard it owns (the same elements in every replica), as the
     * reduce-scatter inside its group left it in gp. */
    c->count = 0;
    for (int q = 0; q < *nlay; q++) {
      const vd_layer *L = &e->net->layers[layers[q]];
      for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++)
        c->count += r0->own_hi[t] - r0->own_lo[t];
    }
    *pp = plan_or_fail(run, c->label, op->coll, algo, op->group, MAX(c->count, 1), (double)k->elem);
    if (*pp == NULL)
      return FALSE;
    for (int m = 0; m < c->nm; m++) {
      vd_rank *r = &e->ranks[c->rv->rank_of_member[m]];
      if (r->sh != r0->sh)
        return run_fail(run, "'%s': members own different shards (%d and %d)", c->label, r0->sh,
                        r->sh);
      c->bufs[m] = buf0(e, c->count);
      gint64 pos = 0;
      for (int q = 0; q < *nlay; q++) {
        const vd_layer *L = &e->net->layers[layers[q]];
        for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++) {
          gint64 n = r->own_hi[t] - r->own_lo[t];
          memcpy((char *)c->bufs[m] + k->elem * (gsize)pos,
                 (char *)r->gp[t] + k->elem * (gsize)r->own_lo[t], k->elem * (gsize)n);
          pos += n;
        }
      }
    }
    return TRUE;
  }
  gboolean own = op->coll != TS_COLL_ALLREDUCE;
  gboolean with_tp =
      e->T > 1 && e->ax[TS_AX_TP] >= 0 && group_has_axis(run, op->group, e->ax[TS_AX_TP]);
  if (own && v->kind == VO_GRAD && with_tp) {
    /* Gradients reduce-scattered over dp and tp: each member of that group owns its share. */
    for (int m = 0; m < c->nm; m++) {
      vd_rank *r = &e->ranks[c->rv->rank_of_member[m]];
      for (int q = 0; q < *nlay; q++) {
        const vd_layer *L = &e->net->layers[layers[q]];
        gint64 cnt = layer_flat(e, r, layers[q]), lo, hi, base = 0;
        if (cnt % c->nm != 0)
          return run_fail(run,
                          "'%s': layer '%s' holds %" G_GINT64_FORMAT " parameters per chip, "
                          "which the %d members do not divide (the validator does not pad)",
                          c->label, L->name, cnt, c->nm);
        owned(cnt, m, c->nm, &lo, &hi);
        for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++) {
          r->own_lo[t] = CLAMP(lo - base, 0, r->n[t]);
          r->own_hi[t] = CLAMP(hi - base, 0, r->n[t]);
          base += r->n[t];
        }
        r->own_tp[layers[q]] = TRUE;
      }
    }
  } else if (own && !with_tp) {
    for (int q = 0; q < *nlay; q++)
      if (r0->own_tp[layers[q]])
        return run_fail(run,
                        "'%s' gathers the parameters of '%s' over the data-parallel group only, "
                        "but its gradient was reduce-scattered over dp and tp, so each "
                        "tensor-parallel member updated a different part of it: their copies "
                        "diverge (the gradient should be summed over tp first)",
                        c->label, e->net->layers[layers[q]].name);
  } else if (own) {
    return run_fail(run, "'%s': a %s of parameters over the tensor-parallel axis", c->label,
                    ts_coll_kind_name(op->coll));
  }
  if (own && op->coll != TS_COLL_REDUCESCATTER && op->coll != TS_COLL_ALLGATHER)
    return run_fail(run, "'%s': a %s of parameters or gradients is not supported", c->label,
                    ts_coll_kind_name(op->coll));
  if (v->kind == VO_GRAD && op->coll == TS_COLL_ALLGATHER)
    return run_fail(run, "'%s': an all-gather of gradients", c->label);
  if (v->kind != VO_GRAD && op->coll != TS_COLL_ALLGATHER)
    return run_fail(run, "'%s': parameters are gathered, not %s", c->label,
                    ts_coll_kind_name(op->coll));
  if (own && !e->owners)
    return run_fail(run,
                    "'%s': a sharded synchronisation, but the plan gives parameters no "
                    "owners (neither ZeRO nor parameter servers)",
                    c->label);
  c->count = 0;
  for (int q = 0; q < *nlay; q++)
    c->count += layer_flat(e, r0, layers[q]);
  for (int m = 1; m < c->nm; m++) {
    gint64 cm = 0;
    for (int q = 0; q < *nlay; q++)
      cm += layer_flat(e, &e->ranks[c->rv->rank_of_member[m]], layers[q]);
    if (cm != c->count)
      return run_fail(run, "'%s': members hold parameter shards of different sizes", c->label);
  }
  *pp = plan_or_fail(run, c->label, op->coll, algo, op->group, MAX(c->count, 1), (double)k->elem);
  if (*pp == NULL)
    return FALSE;
  if (own && !owner_packing(run, *pp, r0, layers, *nlay, c->nm, c->count, pk, c->label))
    return FALSE;
  for (int m = 0; m < c->nm; m++) {
    vd_rank *r = &e->ranks[c->rv->rank_of_member[m]];
    c->bufs[m] = buf0(e, c->count);
    if (v->kind == VO_GRAD && !own) {
      gint64 pos = 0;
      for (int q = 0; q < *nlay; q++) {
        const vd_layer *L = &e->net->layers[layers[q]];
        for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++) {
          memcpy((char *)c->bufs[m] + k->elem * (gsize)pos, r->g[t], k->elem * (gsize)r->n[t]);
          pos += r->n[t];
        }
      }
    } else {
      /* Reduce-scatter: the whole local gradient in the owners' order; all-gather: this
       * member's own chunk. */
      gint64 off = 0, cnt = c->count;
      if (op->coll == TS_COLL_ALLGATHER)
        ts_coll_shard(*pp, m, &off, &cnt);
      for (gint64 p = off; p < off + cnt; p++) {
        int t = g_array_index(pk->pos_t, int, p);
        gint64 j = g_array_index(pk->pos_j, gint64, p);
        k->set(c->bufs[m], p, k->get(v->kind == VO_GRAD ? r->g[t] : r->w[t], j));
      }
    }
  }
  return TRUE;
}

static void unpack_params(vd_run *run, coll_ctx *c, const ts_coll_plan *plan, const int *layers,
                          int nlay, const packing *pk)
{
  vd_exec *e = run->e;
  const vd_kern *k = e->k;
  const ts_op *op = c->op;
  for (int m = 0; m < c->nm; m++) {
    vd_rank *r = &e->ranks[c->rv->rank_of_member[m]];
    if (c->v->kind == VO_GRAD && op->coll == TS_COLL_ALLREDUCE && tp_only(run, op->group)) {
      /* A sum over tp alone replaces the local gradient: the data-parallel sync follows. */
      gint64 pos = 0;
      for (int q = 0; q < nlay; q++) {
        const vd_layer *L = &e->net->layers[layers[q]];
        for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++) {
          memcpy(r->g[t], (char *)c->bufs[m] + k->elem * (gsize)pos, k->elem * (gsize)r->n[t]);
          pos += r->n[t];
        }
        r->tp_summed[layers[q]] = TRUE;
      }
      continue;
    }
    if (replica_allreduce(run, op, c->v)) {
      /* The shard summed over every replica joins the synchronised gradient. */
      gint64 pos = 0;
      for (int q = 0; q < nlay; q++) {
        const vd_layer *L = &e->net->layers[layers[q]];
        for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++) {
          gint64 lo = r->own_lo[t], n = r->own_hi[t] - lo;
          gsize off = k->elem * (gsize)lo;
          k->axpy(n, 1.0, (char *)c->bufs[m] + k->elem * (gsize)pos, (char *)r->gs[t] + off);
          memset((char *)r->gp[t] + off, 0, k->elem * (gsize)n);
          pos += n;
        }
      }
      continue;
    }
    if (c->v->kind == VO_GRAD && op->coll == TS_COLL_ALLREDUCE) {
      gint64 pos = 0;
      for (int q = 0; q < nlay; q++) {
        const vd_layer *L = &e->net->layers[layers[q]];
        for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++) {
          k->axpy(r->n[t], 1.0, (char *)c->bufs[m] + k->elem * (gsize)pos, r->gs[t]);
          pos += r->n[t];
        }
      }
    } else if (c->v->kind == VO_GRAD) {
      /* This member's chunk holds the sums of the elements it owns (with hybrid sharding,
       * over its group only: they wait in gp for the all-reduce across the replicas). */
      gint64 off, cnt;
      ts_coll_shard(plan, m, &off, &cnt);
      void **into = e->ax_shard >= 0 ? r->gp : r->gs;
      for (gint64 p = off; p < off + cnt; p++) {
        int t = g_array_index(pk->pos_t, int, p);
        gint64 j = g_array_index(pk->pos_j, gint64, p);
        k->set(into[t], j, k->get(into[t], j) + k->get(c->bufs[m], p));
      }
    } else {
      for (gint64 p = 0; p < c->count; p++) {
        int t = g_array_index(pk->pos_t, int, p);
        gint64 j = g_array_index(pk->pos_j, gint64, p);
        k->set(r->w[t], j, k->get(c->bufs[m], p));
      }
      for (int q = 0; q < nlay; q++)
        r->materialized[layers[q]] = TRUE;
    }
    if (c->v->kind == VO_GRAD)
      for (int q = 0; q < nlay; q++) {
        /* The synchronised sum joins what earlier syncs brought; the local buffer restarts. */
        const vd_layer *L = &e->net->layers[layers[q]];
        for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++) {
          memset(r->g[t], 0, k->elem * (gsize)r->n[t]);
          r->synced[t] = TRUE;
        }
      }
  }
}

/* Every micro-batch's backward pass (or, for a sync after each micro-batch, the next one) must
 * have produced the gradients a sync sends. */
static void check_early(vd_run *run, coll_ctx *c, const int *layers, int nlay)
{
  vd_exec *e = run->e;
  for (int m = 0; m < c->nm; m++) {
    vd_rank *r = &e->ranks[c->rv->rank_of_member[m]];
    int need = c->v->nsync <= 1 ? e->nmicro : MIN(c->v->micro + 1, e->nmicro);
    for (int q = 0; q < nlay; q++) {
      int done = 0;
      for (int u = 0; u < e->nmicro; u++)
        done += r->s[u * e->net->nlayers + layers[q]].wgrad_done;
      if (done < need) {
        g_autofree char *key = g_strdup_printf("early-%d", c->op->label);
        vd_note(e, key,
                "'%s' ran on chip %d when the backward pass of '%s' had produced %d of the %d "
                "micro-batch gradients it sends: a missing dependency",
                c->label, r->rank, e->net->layers[layers[q]].name, done, need);
      }
    }
  }
}

static gboolean run_coll(vd_run *run, rendezvous *rv)
{
  vd_exec *e = run->e;
  const vd_kern *k = e->k;
  int nm = rv->expected, r0 = rv->rank_of_member[0];
  const ts_op *op = op_at(run, r0, rv->op_of_member[0]);
  coll_ctx c = {run, rv, op, info_at(run, r0, rv->op_of_member[0]), label_of(run, op), nm, 0, NULL};
  for (int m = 1; m < nm; m++) {
    const ts_op *o2 = op_at(run, rv->rank_of_member[m], rv->op_of_member[m]);
    if (o2->label != op->label || o2->coll != op->coll)
      return run_fail(run,
                      "collective '%s' of chip %d meets '%s' of chip %d: the replay pairs "
                      "different collectives",
                      c.label, r0, label_of(run, o2), rv->rank_of_member[m]);
  }
  ts_coll_algo algo = run->op_algo[run->prog_base[run->prog_of[r0]] + rv->op_of_member[0]];
  g_hash_table_add(run->algos_used, (gpointer)ts_coll_algo_name(algo));
  c.bufs = g_new0(void *, nm);
  vd_val **vals = g_new0(vd_val *, nm);
  int *layers = g_new(int, e->net->nlayers + 1), nlay = 0;
  packing pk = {NULL, NULL};
  double *sent = g_new0(double, nm);
  const ts_coll_plan *plan = NULL, *fullplan = NULL;
  vd_layout target = VD_FULL;
  gboolean ok;
  switch (c.v->kind) {
  case VO_TP:
    ok = c.v->nchunks > 0 ? run_tp_chunk(run, &c, algo, &plan, &fullplan, vals, &target)
                          : run_tp(run, &c, algo, &plan, vals, &target);
    break;
  case VO_REGATHER:
    ok = op->coll == TS_COLL_ALLGATHER
             ? run_regather(run, &c, algo, &plan)
             : run_fail(run, "'%s': a re-gather that is not an all-gather", c.label);
    break;
  case VO_STAGE_GATHER:
    ok = run_stage_gather(run, &c, algo, &plan, vals);
    break;
  case VO_GRAD:
  case VO_PARAM_AG:
  case VO_PARAMS_ALL:
    ok = run_params(run, &c, algo, &plan, layers, &nlay, &pk);
    if (ok && c.v->kind == VO_GRAD)
      check_early(run, &c, layers, nlay);
    break;
  default:
    ok = run_fail(run, "collective '%s': the validator does not know which tensor it carries",
                  c.label);
  }
  GError *err = NULL;
  if (ok && !ts_collexec_run(plan, e->prec, nm, c.count, c.bufs, sent, &err))
    ok = run_fail(run, "'%s': %s", c.label, err->message);
  if (err != NULL)
    g_error_free(err);
  if (ok) {
    /* Bytes: what was sent, at the model's element size, against the trace's decomposition.
     * Under an FP8 recipe (Transformer Engine's, torchao's Float8 tensor parallelism) a
     * tensor-parallel gather of an FP8 GEMM's input or output gradient carries one byte an
     * element (ts_plan_exec_table): such a gather counts
     * its elements at one byte. */
    double eb = run->m->dtype_bytes;
    if (op->coll == TS_COLL_ALLGATHER && ts_plan_fp8_gathers(e->plan) &&
        (c.v->kind == VO_TP || c.v->kind == VO_REGATHER) && fabs(op->bytes - (double)c.count) < 0.5)
      eb = 1.0;
    gboolean whole;
    gint64 tc = trace_count(run, op, &whole);
    if (eb != run->m->dtype_bytes)
      tc = c.count, whole = TRUE;
    const ts_coll_plan *tplan =
        whole ? plan_for(run, op->coll, algo, op->group, tc, eb, NULL) : NULL;
    if (!whole || tc != c.count) {
      GString *kept = g_string_new(NULL);
      for (int q = 0; q < nlay && e->T > 1; q++) {
        const vd_layer *L = &e->net->layers[layers[q]];
        for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++)
          if (vd_layer_split(e, layers[q]) && e->ranks[r0].shard[t] == NULL)
            g_string_append_printf(kept, "%s%s (%" G_GINT64_FORMAT ")", kept->len ? ", " : "",
                                   e->net->tensors[t].name, e->net->tensors[t].numel);
      }
      g_autofree char *key = g_strdup_printf("count-%d", op->label);
      vd_note(e, key,
              "'%s' carries %.17g bytes per member in the trace (%.6g elements of %g bytes), but "
              "the values it moves hold %" G_GINT64_FORMAT " elements (%.17g bytes)%s%s",
              c.label, op->bytes, op->bytes / run->m->dtype_bytes, run->m->dtype_bytes, c.count,
              (double)c.count * run->m->dtype_bytes,
              kept->len ? "; whole on every tensor-parallel member although their layer is "
                          "split: "
                        : "",
              kept->str);
      g_string_free(kept, TRUE);
    }
    for (int m = 0; m < nm; m++) {
      vd_rank *r = &e->ranks[rv->rank_of_member[m]];
      r->sent_bytes += sent[m] / (double)k->elem * eb;
      r->trace_bytes += tplan ? ts_coll_plan_bytes_sent(tplan, m) : NAN;
    }
    switch (c.v->kind) {
    case VO_TP:
      ok = c.v->nchunks > 0 ? unpack_tp_chunk(run, &c, plan, fullplan, vals, target)
                            : unpack_tp(run, &c, plan, vals, target);
      break;
    case VO_REGATHER:
      finish_regather(run, &c, plan);
      break;
    case VO_STAGE_GATHER: {
      gint64 n = c.count / nm; /* each member's chunk */
      for (int m = 0; m < nm; m++) {
        void *full = buf0(e, c.count);
        for (int j = 0; j < nm; j++) {
          gint64 off, cnt;
          ts_coll_shard(plan, j, &off, &cnt);
          memcpy((char *)full + k->elem * (gsize)(j * n), (char *)c.bufs[m] + k->elem * (gsize)off,
                 k->elem * (gsize)n);
        }
        g_free(vals[m]->data);
        vals[m]->data = full;
        vals[m]->n = c.count;
        vals[m]->layout = VD_FULL;
        vals[m]->collective = TRUE;
        vals[m]->coll_label = op->label;
      }
      break;
    }
    default:
      unpack_params(run, &c, plan, layers, nlay, &pk);
      break;
    }
  }
  for (int m = 0; m < nm; m++)
    g_free(c.bufs[m]);
  g_free(c.bufs);
  g_free(vals);
  g_free(layers);
  g_free(sent);
  if (pk.pos_t != NULL) {
    g_array_unref(pk.pos_t);
    g_array_unref(pk.pos_j);
  }
  if (ok)
    run->ops_coll++;
  return ok;
}

/* ---- compute ops ----------------------------------------------------------------------- */

static void optimizer_step(vd_run *run, vd_rank *r)
{
  vd_exec *e = run->e;
  const ts_validate_options *o = run->o;
  r->adam_step++;
  for (int t = 0; t < r->ntensors; t++) {
    if (!r->holds[e->net->tensors[t].layer])
      continue;
    gint64 lo = e->owners ? r->own_lo[t] : 0, hi = e->owners ? r->own_hi[t] : r->n[t];
    if (e->D > 1)
      for (gint64 j = 0; j < r->n[t]; j++)
        if (e->k->get(r->g[t], j) != 0) {
          g_autofree char *key = g_strdup_printf("unsynced-%d", t);
          vd_note(e, key,
                  "the optimizer step on chip %d used gradients of '%s' that no data-parallel "
                  "synchronisation summed (a missing or early all-reduce)",
                  r->rank, e->net->tensors[t].name);
          break;
        }
    for (gint64 j = lo; j < hi && e->ax_shard >= 0; j++)
      if (e->k->get(r->gp[t], j) != 0) {
        g_autofree char *key = g_strdup_printf("replicas-%d", t);
        vd_note(e, key,
                "the optimizer step on chip %d used a shard of '%s' that was reduce-scattered "
                "inside its sharding group but never all-reduced across the replicas (a missing "
                "or early all-reduce)",
                r->rank, e->net->tensors[t].name);
        break;
      }
    gint64 n = hi - lo;
    if (n <= 0)
      continue;
    gsize es = e->k->elem, off = es * (gsize)lo;
    /* The gradient: what synchronisation summed, plus anything never synchronised. */
    void *g = g_memdup2((char *)r->g[t] + off, es * (gsize)n);
    if (r->synced[t])
      e->k->axpy(n, 1.0, (char *)r->gs[t] + off, g);
    void *w = (char *)r->w[t] + off, *m = (char *)r->m[t] + off, *v = (char *)r->v[t] + off;
    if (o->optimizer == TS_VALIDATE_ADAM) {
      ts_adam hp = {o->lr, 0.9, 0.999, 1e-8, o->weight_decay};
      e->k->adam(n, &hp, r->adam_step, w, g, m, v);
    } else {
      e->k->sgd(n, o->lr, o->momentum, o->weight_decay, w, g, m);
    }
    g_free(g);
  }
  /* dp-overlap: only the owned shard is current until the next step's gathers bring the
   * other owners' updates (each forward must wait for its layer's). */
  if (e->plan->dp_overlap && e->zero < 3 && e->S > 1)
    for (int t = 0; t < r->ntensors; t++)
      r->materialized[e->net->tensors[t].layer] = FALSE;
  /* ZeRO-3 keeps only the owned shard: the rest must be gathered again before use. */
  if (e->zero >= 3 && e->S > 1)
    for (int t = 0; t < r->ntensors; t++) {
      for (gint64 j = 0; j < r->n[t]; j++)
        if (j < r->own_lo[t] || j >= r->own_hi[t])
          e->k->set(r->w[t], j, NAN);
      r->materialized[e->net->tensors[t].layer] = FALSE;
    }
}

/* Dedicated servers, timed in the trace as durations (no bytes): push, update once every
 * worker pushed, pull. */
static gboolean ps_op(vd_run *run, vd_rank *r, const vo_info *v, const char *label)
{
  vd_exec *e = run->e;
  server *sv = &run->servers[r->tp];
  const vd_kern *k = e->k;
  if (v->kind == VO_PS_PUSH) {
    int layers[64];
    int nlay = sync_layers(run, r, v, -1, layers);
    for (int q = 0; q < nlay; q++) {
      const vd_layer *L = &e->net->layers[layers[q]];
      for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++) {
        k->axpy(r->n[t], 1.0, r->g[t], sv->g[t]);
        memset(r->g[t], 0, k->elem * (gsize)r->n[t]);
      }
    }
    sv->pushes[r->pp]++;
    return TRUE;
  }
  if (v->kind == VO_PS_UPDATE) {
    /* The update of a stage's layers, once every worker of that stage (each replica, each cp
     * rank) pushed all its buckets. */
    if (sv->updated[r->pp])
      return TRUE;
    if (sv->pushes[r->pp] < run->pushes_per_step[r->pp])
      return run_fail(run,
                      "chip %d '%s': the servers update stage %d after %d of its %d pushes of the "
                      "step: the trace makes a worker's update wait only for its own pushes",
                      r->rank, label, r->pp, sv->pushes[r->pp], run->pushes_per_step[r->pp]);
    for (int t = 0; t < e->net->ntensors; t++)
      if (r->holds[e->net->tensors[t].layer])
        k->sgd(r->n[t], run->o->lr, run->o->momentum, run->o->weight_decay, sv->w[t], sv->g[t],
               sv->m[t]);
    sv->updated[r->pp] = TRUE;
    return TRUE;
  }
  if (!sv->updated[r->pp])
    return run_fail(run, "chip %d '%s': pulls parameters the servers have not updated", r->rank,
                    label);
  for (int t = 0; t < e->net->ntensors; t++)
    if (r->holds[e->net->tensors[t].layer])
      memcpy(r->w[t], sv->w[t], k->elem * (gsize)r->n[t]);
  return TRUE;
}

static gboolean run_compute(vd_run *run, int rank, int j)
{
  vd_exec *e = run->e;
  vd_rank *r = &e->ranks[rank];
  const ts_op *op = op_at(run, rank, j);
  const vo_info *v = info_at(run, rank, j);
  const char *label = label_of(run, op);
  g_autofree char *why = NULL;
  gboolean ok = TRUE;
  if (v->layer >= 0 && v->micro >= e->nmicro && v->kind != VO_PARAM_AG)
    return run_fail(run, "chip %d op %d '%s': micro-batch %d of %d", rank, j, label, v->micro,
                    e->nmicro);
  switch (v->kind) {
  case VO_NOOP:
    break;
  case VO_FWD:
  case VO_RECOMPUTE:
    if (v->nchunks > 0 && v->chunk != ovl_exec_chunk(e, v->layer)) {
      /* tp-overlap: a GEMM chunk the validator does not compute on its own (the layer runs
       * whole at one chunk); its gather chunk must have arrived all the same. */
      if (ovl_exec_chunk(e, v->layer) > 0 && !ovl_chunk_arrived(run, rank, v, v->chunk))
        return run_fail(run,
                        "chip %d op %d '%s': GEMM chunk %d of %d ran before its all-gather chunk "
                        "(a missing dependency or a missing all-gather chunk)",
                        rank, j, label, v->chunk + 1, v->nchunks);
      break;
    }
    ok = vd_layer_fwd(e, r, v->layer, v->micro, v->kind == VO_RECOMPUTE, &why);
    break;
  case VO_BWD:
  case VO_DGRAD:
  case VO_WGRAD:
    if (v->kind != VO_WGRAD && v->nchunks > 0 && v->chunk != v->nchunks - 1) {
      /* tp-overlap=xla: a backward GEMM chunk before the last; the layer's backward runs whole
       * at the last, once every gather chunk is there. Its own gather chunk must have
       * arrived. */
      if (!ovl_chunk_arrived(run, rank, v, v->chunk))
        return run_fail(run,
                        "chip %d op %d '%s': backward GEMM chunk %d of %d ran before its "
                        "all-gather chunk (a missing dependency or a missing all-gather chunk)",
                        rank, j, label, v->chunk + 1, v->nchunks);
      break;
    }
    ok = vd_layer_bwd(e, r, v->layer, v->micro,
                      v->kind == VO_BWD     ? 0
                      : v->kind == VO_DGRAD ? 1
                                            : 2,
                      &why);
    break;
  case VO_ATTN_RECOMPUTE:
    ok = vd_attn_recompute(e, r, v->layer, v->micro, &why);
    break;
  case VO_CP_BLOCK:
    ok = vd_cp_block(e, r, v->layer, v->micro, cp_pass(v), &why);
    break;
  case VO_OPT:
    optimizer_step(run, r);
    break;
  case VO_PS_UPDATE:
    if (run->servers == NULL) {
      /* Servers on every worker, reached by collectives: each updates the shard it owns. */
      optimizer_step(run, r);
      break;
    }
    /* fall through */
  case VO_PS_PUSH:
  case VO_PS_PULL:
    if (run->servers == NULL)
      return run_fail(run, "chip %d op %d '%s': a parameter-server op in a plan without servers",
                      rank, j, label);
    if (!ps_op(run, r, v, label))
      return FALSE;
    break;
  default:
    return run_fail(run,
                    "chip %d op %d '%s': the validator does not know what this op computes, so "
                    "the trace cannot be checked",
                    rank, j, label);
  }
  if (!ok)
    return run_fail(run, "chip %d op %d '%s': %s", rank, j, label, why);
  run->ops_compute++;
  return TRUE;
}

/* ---- point to point ------------------------------------------------------------------ */

static char *mail_key(int src, int dst, int tag)
{
  return g_strdup_printf("%d/%d/%d", src, dst, tag);
}

static void message_free(gpointer p)
{
  message *m = p;
  g_free(m->data);
  g_free(m);
}

static gboolean post_message(vd_run *run, int rank, int j, message *msg);

/* A send posts a copy of its value (buffered): first layer of the stage it feeds, or the
 * gradient of the stage's input; a ring send (cp) the block the ring state holds. */
static gboolean run_send(vd_run *run, int rank, int j)
{
  vd_exec *e = run->e;
  vd_rank *r = &e->ranks[rank];
  const ts_op *op = op_at(run, rank, j);
  const vo_info *v = info_at(run, rank, j);
  const char *label = label_of(run, op);
  const ts_plan *p = e->plan;
  g_autofree char *why = NULL;
  if (v->kind == VO_CP_SEND) {
    if (v->layer < 0 || v->micro < 0 || v->micro >= e->nmicro)
      return run_fail(run, "chip %d op %d '%s': layer %d, micro-batch %d out of range", rank, j,
                      label, v->layer, v->micro);
    gint64 n = 0;
    const void *buf = vd_cp_send(e, r, v->layer, v->micro, cp_pass(v), v->post, &n, &why);
    if (buf == NULL)
      return run_fail(run, "chip %d op %d: %s", rank, j, why);
    message *cm = g_new0(message, 1);
    cm->data = g_memdup2(buf, e->k->elem * (gsize)MAX(n, 1));
    cm->n = n;
    cm->layout = VD_FULL;
    return post_message(run, rank, j, cm);
  }
  if (v->stage < 0 || v->stage >= p->nstages || v->micro >= e->nmicro)
    return run_fail(run, "chip %d op %d '%s': stage %d, micro-batch %d out of range", rank, j,
                    label, v->stage, v->micro);
  message *msg = g_new0(message, 1);
  if (v->kind == VO_SEND_ACT) {
    int b = p->stage_first[v->stage + 1];
    g_autofree char *reader = g_strdup_printf("'%s' on chip %d", label, rank);
    vd_val *x = vd_act_read(e, r, b, v->micro, reader, &why);
    if (x == NULL) {
      message_free(msg);
      return run_fail(run, "chip %d op %d: %s", rank, j, why);
    }
    msg->data = g_memdup2(x->data, e->k->elem * (gsize)MAX(x->n, 1));
    msg->n = x->n;
    msg->layout = x->layout == VD_PARTIAL ? VD_FULL : x->layout;
  } else {
    int a = p->stage_first[v->stage];
    vd_val tmp = {0};
    if (!vd_act_grad(e, r, a, v->micro, &tmp, &why)) {
      message_free(msg);
      return run_fail(run, "chip %d op %d '%s': %s", rank, j, label, why);
    }
    msg->data = g_steal_pointer(&tmp.data);
    msg->n = tmp.n;
    msg->layout = tmp.layout;
    vd_val_clear(&tmp);
  }
  /* A whole value the trace sends a 1/T of: this member's flat chunk (Megatron's scatter). */
  if (e->T > 1 && msg->layout == VD_FULL && msg->n % e->T == 0 &&
      op->bytes * e->T == (double)msg->n * run->m->dtype_bytes) {
    gint64 n = msg->n / e->T;
    void *chunk = g_memdup2((char *)msg->data + e->k->elem * (gsize)(r->tp * n),
                            e->k->elem * (gsize)MAX(n, 1));
    g_free(msg->data);
    msg->data = chunk;
    msg->n = n;
    msg->layout = VD_FLAT;
  }
  return post_message(run, rank, j, msg);
}

/* Posts a send's message (taken) to its peer's mailbox, counting its bytes. */
static gboolean post_message(vd_run *run, int rank, int j, message *msg)
{
  vd_exec *e = run->e;
  vd_rank *r = &e->ranks[rank];
  const ts_op *op = op_at(run, rank, j);
  const char *label = label_of(run, op);
  int peer = ts_trace_axis_neighbor(run->tr, rank, op->axis, op->offset);
  if (peer < 0) {
    message_free(msg);
    return run_fail(run, "chip %d op %d '%s': no peer %+d along axis %s", rank, j, label,
                    op->offset, run->tr->axes[op->axis].name);
  }
  double sent = (double)msg->n * run->m->dtype_bytes;
  if (sent != op->bytes) {
    g_autofree char *key = g_strdup_printf("p2p-%d", op->label);
    vd_note(e, key, "'%s' carries %.17g bytes in the trace, but the value it sends holds %.17g",
            label, op->bytes, sent);
  }
  r->sent_bytes += sent;
  r->trace_bytes += op->bytes;
  g_autofree char *key = mail_key(rank, peer, op->tag);
  GQueue *q = g_hash_table_lookup(run->mail, key);
  if (q == NULL) {
    q = g_queue_new();
    g_hash_table_insert(run->mail, g_strdup(key), q);
  }
  g_queue_push_tail(q, msg);
  run->ops_p2p++;
  return TRUE;
}

/* A receive completes when its message is there; returns FALSE (without failing) otherwise. */
static gboolean run_recv(vd_run *run, int rank, int j, gboolean *delivered)
{
  vd_exec *e = run->e;
  vd_rank *r = &e->ranks[rank];
  const ts_op *op = op_at(run, rank, j);
  const vo_info *v = info_at(run, rank, j);
  const ts_plan *p = e->plan;
  *delivered = FALSE;
  int peer = ts_trace_axis_neighbor(run->tr, rank, op->axis, op->offset);
  g_autofree char *key = mail_key(peer, rank, op->tag);
  GQueue *q = g_hash_table_lookup(run->mail, key);
  if (q == NULL || g_queue_is_empty(q))
    return TRUE;
  message *msg = g_queue_pop_head(q);
  if (v->kind == VO_CP_RECV) {
    g_autofree char *why = NULL;
    gint64 n = msg->n;
    void *data = g_steal_pointer(&msg->data);
    message_free(msg);
    if (v->layer < 0 || v->micro < 0 || v->micro >= e->nmicro) {
      g_free(data);
      return run_fail(run, "chip %d op %d '%s': layer %d, micro-batch %d out of range", rank, j,
                      label_of(run, op), v->layer, v->micro);
    }
    if (!vd_cp_recv(e, r, v->layer, v->micro, cp_pass(v), v->post, data, n, &why))
      return run_fail(run, "chip %d op %d: %s", rank, j, why);
    *delivered = TRUE;
    run->ops_p2p++;
    return TRUE;
  }
  if (v->stage < 0 || v->stage >= p->nstages || v->micro >= e->nmicro) {
    message_free(msg);
    return run_fail(run, "chip %d op %d '%s': stage %d, micro-batch %d out of range", rank, j,
                    label_of(run, op), v->stage, v->micro);
  }
  int nl = e->net->nlayers;
  vd_val *dst;
  if (v->kind == VO_RECV_ACT) {
    int a = p->stage_first[v->stage];
    dst = a > 0 ? &r->y[v->micro * nl + a - 1] : &r->a0[v->micro];
  } else {
    dst = &r->ga[v->micro * (nl + 1) + p->stage_first[v->stage + 1]];
  }
  vd_val_set(dst, g_steal_pointer(&msg->data), msg->n, msg->layout);
  message_free(msg);
  *delivered = TRUE;
  run->ops_p2p++;
  return TRUE;
}

/* ---- the walk ------------------------------------------------------------------------- */

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

static void rendezvous_free(gpointer p)
{
  rendezvous *rv = p;
  g_free(rv->rank_of_member);
  g_free(rv->op_of_member);
  g_free(rv);
}

/* Rank joins the rendezvous of its collective op j (matched per group in arrival order, as
 * the replay matches them); returns it when complete. */
static rendezvous *arrive(vd_run *run, int rank, int j)
{
  vd_exec *e = run->e;
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
  gpointer stored = NULL;
  g_hash_table_steal_extended(run->rendezvous, key, &stored, NULL);
  g_free(stored);
  return rv;
}

/* Waves: every op ready at the start of a wave runs in it, compute and sends first, then
 * collectives whose members have all arrived, then receives whose message is there. Running
 * each op as early as its dependencies allow means a dependency the trace forgot shows: the
 * reader runs before the writer and sees wrong values. */
gboolean vd_run_step(vd_run *run)
{
  vd_exec *e = run->e;
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
  for (int t = 0; run->servers != NULL && t < e->T; t++) {
    memset(run->servers[t].pushes, 0, sizeof(int) * (gsize)e->P);
    memset(run->servers[t].updated, 0, sizeof(gboolean) * (gsize)e->P);
    for (int q = 0; q < e->net->ntensors; q++)
      memset(run->servers[t].g[q], 0, e->k->elem * (gsize)MAX(e->ranks[0].n[q], 1));
  }
  g_hash_table_remove_all(run->mail);
  g_hash_table_remove_all(run->staging);
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
    /* Within a wave, collectives run before the computations that became ready with them:
     * the most hostile order the dependencies allow, so that a collective missing its
     * dependency on a gradient runs before that gradient exists and is caught (computations
     * first hid `--drop-deps 'grad all-reduce fc2..fc2'`). */
    for (int pass = 0; pass < 3 && ok; pass++)
      for (int rank = 0; rank < nr && ok; rank++)
        for (guint q = 0; q < wave[rank]->len && ok; q++) {
          int j = g_array_index(wave[rank], int, q);
          const ts_op *op = op_at(run, rank, j);
          if (pass == 1 &&
              (op->kind == TS_OP_COMPUTE || op->kind == TS_OP_WAIT || op->kind == TS_OP_SEND ||
               op->kind == TS_OP_XFER || op->kind == TS_OP_DELAY)) {
            if (op->kind == TS_OP_COMPUTE || op->kind == TS_OP_XFER || op->kind == TS_OP_DELAY)
              ok = run_compute(run, rank, j);
            else if (op->kind == TS_OP_SEND)
              ok = run_send(run, rank, j);
            complete(run, rank, j);
            progress = TRUE;
          } else if (pass == 0 && op->kind == TS_OP_COLL) {
            progress = TRUE;
            rendezvous *rv = arrive(run, rank, j);
            if (rv != NULL) {
              ok = run_coll(run, rv);
              for (int m = 0; m < rv->expected; m++)
                complete(run, rv->rank_of_member[m], rv->op_of_member[m]);
              rendezvous_free(rv);
            }
          } else if (pass == 2 && op->kind == TS_OP_RECV) {
            gboolean delivered;
            ok = run_recv(run, rank, j, &delivered);
            if (delivered) {
              complete(run, rank, j);
              progress = TRUE;
            } else {
              g_array_append_val(run->ready[rank], j); /* try again next wave */
            }
          }
        }
    /* Collectives that became ready in this wave run in it too, before the next wave's
     * computations: a collective freed by a stream predecessor alone must not wait for them. */
    for (gboolean moved = TRUE; moved && ok;) {
      moved = FALSE;
      for (int rank = 0; rank < nr && ok; rank++)
        for (guint q = 0; q < run->ready[rank]->len && ok;) {
          int j = g_array_index(run->ready[rank], int, q);
          if (op_at(run, rank, j)->kind != TS_OP_COLL) {
            q++;
            continue;
          }
          g_array_remove_index(run->ready[rank], q);
          moved = progress = TRUE;
          rendezvous *rv = arrive(run, rank, j);
          if (rv != NULL) {
            ok = run_coll(run, rv);
            for (int m = 0; m < rv->expected; m++)
              complete(run, rv->rank_of_member[m], rv->op_of_member[m]);
            rendezvous_free(rv);
          }
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
  /* Every op must have run; name the first op each stuck chip waits at (up to four). */
  GString *stuck = g_string_new(NULL);
  int nstuck = 0;
  for (int rank = 0; rank < nr; rank++) {
    const vd_prog *p = &run->progs[run->prog_of[rank]];
    for (int j = 0; j < p->nops; j++)
      if (!run->done[rank][j] && run->pending[rank][j] == 0) {
        const ts_op *op = op_at(run, rank, j);
        if (nstuck++ < 4)
          g_string_append_printf(stuck, "%schip %d op %d '%s' (%s)", stuck->len ? "; " : "", rank,
                                 j, label_of(run, op),
                                 run->arrived[rank][j]    ? "the other members of its collective "
                                                            "never arrived"
                                 : op->kind == TS_OP_RECV ? "no matching send"
                                                          : "waiting");
        break;
      }
  }
  gboolean all_done = TRUE;
  for (int rank = 0; rank < nr && all_done; rank++)
    for (int j = 0; j < run->progs[run->prog_of[rank]].nops; j++)
      all_done = all_done && run->done[rank][j];
  if (!all_done)
    run_fail(run, "the trace stopped: %s", stuck->len ? stuck->str : "a dependency cycle");
  g_string_free(stuck, TRUE);
  return all_done;
}

/* ---- set-up ----------------------------------------------------------------------------- */

static gboolean apply_drops(vd_run *run, const char *const *labels, gboolean deps_only,
                            GError **error)
{
  if (labels == NULL)
    return TRUE;
  for (const char *const *l = labels; *l != NULL; l++) {
    int hits = 0;
    for (int p = 0; p < run->tr->nprograms; p++)
      for (int j = 0; j < run->tr->programs[p].nops; j++) {
        ts_op op = ts_program_op(&run->tr->programs[p], j);
        if (strcmp(label_of(run, &op), *l) != 0)
          continue;
        hits++;
        if (deps_only) {
          ts_program_drop_deps(&run->tr->programs[p], j);
        } else {
          op.kind = TS_OP_WAIT; /* keeps its place, stream and dependencies: a no-op */
          ts_program_set_op(run->tr, p, j, &op);
        }
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
  run->op_algo = g_new0(ts_coll_algo, MAX(total, 1));
  for (int p = 0; p < run->tr->nprograms; p++)
    for (int j = 0; j < run->tr->programs[p].nops; j++) {
      const ts_op ob = ts_program_op(&run->tr->programs[p], j), *op = &ob;
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

vd_run *vd_run_new(vd_exec *e, ts_trace *tr, const ts_model *m, const ts_validate_options *o,
                   GError **error)
{
  vd_run *run = g_new0(vd_run, 1);
  run->e = e;
  run->o = o;
  run->m = m;
  run->tr = tr;
  run->staging = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, chunk_stage_free);
  run->plans =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)ts_coll_plan_free);
  run->rendezvous = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, rendezvous_free);
  run->mail = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  run->algos_used = g_hash_table_new(g_str_hash, g_str_equal);
  /* Op meanings from the trace as planned, before any op is dropped. */
  run->progs = g_new0(vd_prog, MAX(tr->nprograms, 1));
  for (int p = 0; p < tr->nprograms; p++) {
    run->progs[p].info = g_new0(vo_info, MAX(tr->programs[p].nops, 1));
    prog_meanings(run, &tr->programs[p], run->progs[p].info);
  }
  if (!apply_drops(run, o->drop_ops, FALSE, error) ||
      !apply_drops(run, o->drop_deps, TRUE, error)) {
    vd_run_free(run);
    return NULL;
  }
  /* The ops as dropped, expanded once (op_at hands out pointers to them). */
  run->xops = g_new0(ts_op *, MAX(tr->nprograms, 1));
  for (int p = 0; p < tr->nprograms; p++) {
    run->xops[p] = g_new(ts_op, MAX(tr->programs[p].nops, 1));
    for (int j = 0; j < tr->programs[p].nops; j++)
      run->xops[p][j] = ts_program_op(&tr->programs[p], j);
  }
  if (!prescan(run, error)) {
    vd_run_free(run);
    return NULL;
  }
  for (int p = 0; p < tr->nprograms; p++)
    prog_graph(&tr->programs[p], &run->progs[p]);
  /* What the plan drops after a forward pass and brings back later; whether parameters have
   * owners (sharded synchronisation: ZeRO, or servers on every worker). */
  e->owners = FALSE;
  for (int p = 0; p < tr->nprograms; p++)
    for (int j = 0; j < tr->programs[p].nops; j++) {
      const vo_info *v = &run->progs[p].info[j];
      const ts_op *op = &run->xops[p][j];
      if (v->kind == VO_REGATHER)
        e->drop_x[v->layer] = TRUE;
      if (op->kind == TS_OP_COLL && (v->kind == VO_PARAM_AG || v->kind == VO_PARAMS_ALL ||
                                     (v->kind == VO_GRAD && op->coll != TS_COLL_ALLREDUCE)))
        e->owners = TRUE;
    }
  int nr = e->nranks;
  run->prog_of = g_new(int, MAX(nr, 1));
  run->pending = g_new(int *, MAX(nr, 1));
  run->done = g_new(gboolean *, MAX(nr, 1));
  run->arrived = g_new(gboolean *, MAX(nr, 1));
  run->ready = g_new(GArray *, MAX(nr, 1));
  run->coll_seq = g_new(int *, MAX(nr, 1));
  for (int rank = 0; rank < nr; rank++) {
    run->prog_of[rank] = ts_trace_program_of(tr, rank);
    int nops = tr->programs[run->prog_of[rank]].nops;
    run->pending[rank] = g_new0(int, MAX(nops, 1));
    run->done[rank] = g_new0(gboolean, MAX(nops, 1));
    run->arrived[rank] = g_new0(gboolean, MAX(nops, 1));
    run->ready[rank] = g_array_new(FALSE, FALSE, sizeof(int));
    run->coll_seq[rank] = g_new0(int, MAX(tr->groups->len, 1));
  }
  /* Servers whose pushes the trace times as durations (dedicated, or fewer than the workers)
   * hold a copy of each tensor-parallel member's parameters. */
  gboolean durations = FALSE;
  for (int p = 0; p < tr->nprograms; p++)
    for (int j = 0; j < tr->programs[p].nops; j++)
      if (run->progs[p].info[j].kind == VO_PS_PUSH)
        durations = TRUE;
  if (durations) {
    /* Each rank of tp member 0 pushes its program's buckets to that member's server. */
    run->pushes_per_step = g_new0(int, e->P);
    for (int rank = 0; rank < nr; rank++) {
      if (e->ranks[rank].tp != 0)
        continue;
      const vd_prog *pg = &run->progs[run->prog_of[rank]];
      for (int j = 0; j < pg->nops; j++)
        if (pg->info[j].kind == VO_PS_PUSH && pg->info[j].micro == 0)
          run->pushes_per_step[e->ranks[rank].pp]++;
    }
    run->servers = g_new0(server, e->T);
    for (int t = 0; t < e->T; t++) {
      const vd_rank *r = NULL;
      for (int rank = 0; rank < nr && r == NULL; rank++)
        if (e->ranks[rank].tp == t)
          r = &e->ranks[rank];
      server *sv = &run->servers[t];
      sv->pushes = g_new0(int, e->P);
      sv->updated = g_new0(gboolean, e->P);
      sv->w = g_new0(void *, e->net->ntensors);
      sv->g = g_new0(void *, e->net->ntensors);
      sv->m = g_new0(void *, e->net->ntensors);
      for (int q = 0; q < e->net->ntensors; q++) {
        sv->w[q] = g_memdup2(r->w[q], e->k->elem * (gsize)MAX(r->n[q], 1));
        sv->g[q] = buf0(e, r->n[q]);
        sv->m[q] = buf0(e, r->n[q]);
      }
    }
    vd_note(e, "ps-durations",
            "the trace times parameter-server pushes and pulls as durations on each worker: it "
            "records no bytes to check, and nothing makes a worker's update wait for the other "
            "workers' pushes (checked here by counting pushes)");
  }
  return run;
}

void vd_run_free(vd_run *run)
{
  if (run == NULL)
    return;
  vd_exec *e = run->e;
  for (int p = 0; p < run->tr->nprograms; p++) {
    vd_prog *pg = &run->progs[p];
    for (int j = 0; pg->succ != NULL && j < pg->nops; j++)
      g_free(pg->succ[j]);
    g_free(pg->succ);
    g_free(pg->nsucc);
    g_free(pg->npred);
    g_free(pg->info);
  }
  g_free(run->progs);
  if (run->prog_of != NULL)
    for (int rank = 0; rank < e->nranks; rank++) {
      g_free(run->pending[rank]);
      g_free(run->done[rank]);
      g_free(run->arrived[rank]);
      g_array_unref(run->ready[rank]);
      g_free(run->coll_seq[rank]);
    }
  g_free(run->prog_of);
  for (int p = 0; run->xops != NULL && p < run->tr->nprograms; p++)
    g_free(run->xops[p]);
  g_free(run->xops);
  g_free(run->pending);
  g_free(run->done);
  g_free(run->arrived);
  g_free(run->ready);
  g_free(run->coll_seq);
  if (run->servers != NULL)
    for (int t = 0; t < e->T; t++) {
      for (int q = 0; q < e->net->ntensors; q++) {
        g_free(run->servers[t].w[q]);
        g_free(run->servers[t].g[q]);
        g_free(run->servers[t].m[q]);
      }
      g_free(run->servers[t].w);
      g_free(run->servers[t].g);
      g_free(run->servers[t].m);
      g_free(run->servers[t].pushes);
      g_free(run->servers[t].updated);
    }
  g_free(run->servers);
  g_free(run->pushes_per_step);
  g_free(run->prog_base);
  g_free(run->op_algo);
  g_free(run->failure);
  GHashTableIter it;
  gpointer val;
  g_hash_table_iter_init(&it, run->mail);
  while (g_hash_table_iter_next(&it, NULL, &val))
    g_queue_free_full(val, message_free);
  g_hash_table_unref(run->mail);
  g_hash_table_unref(run->plans);
  g_hash_table_unref(run->staging);
  g_hash_table_unref(run->rendezvous);
  g_hash_table_unref(run->algos_used);
  g_free(run);
}

char *vd_run_take_failure(vd_run *run)
{
  return g_steal_pointer(&run->failure);
}

static int cmp_str(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

char *vd_run_algorithms(const vd_run *run)
{
  GPtrArray *names = g_ptr_array_new();
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init(&it, run->algos_used);
  while (g_hash_table_iter_next(&it, &key, NULL))
    g_ptr_array_add(names, key);
  g_ptr_array_sort(names, cmp_str);
  g_ptr_array_add(names, NULL);
  char *s = names->len > 1 ? g_strjoinv(", ", (char **)names->pdata) : g_strdup("none");
  g_ptr_array_free(names, TRUE);
  return s;
}

void vd_run_counts(const vd_run *run, gint64 *compute, gint64 *coll, gint64 *p2p)
{
  *compute = run->ops_compute;
  *coll = run->ops_coll;
  *p2p = run->ops_p2p;
}

void vd_run_note_unread(vd_run *run)
{
  vd_exec *e = run->e;
  int cells = e->nmicro * e->net->nlayers;
  for (int rank = 0; rank < e->nranks; rank++)
    for (int c = 0; c < cells; c++) {
      const vd_val *vals[2] = {&e->ranks[rank].dx[c], &e->ranks[rank].y[c]};
      for (int q = 0; q < 2; q++)
        if (vals[q]->set && vals[q]->collective && !vals[q]->read && vals[q]->coll_label >= 0) {
          const char *l = g_ptr_array_index(run->tr->labels, vals[q]->coll_label);
          g_autofree char *key = g_strdup_printf("unread-%s", l);
          vd_note(e, key,
                  "'%s' moves a %s nothing reads%s: the simulator times communication the "
                  "numbers do not need",
                  l, q == 0 ? "gradient" : "value",
                  q == 0 && c % e->net->nlayers == 0 ? " (the input gradient of the first layer)"
                                                     : "");
        }
    }
}
