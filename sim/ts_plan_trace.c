/* ts_plan_trace: the trace of one training step under a plan: per pipeline device, the
 * schedule's forwards and backwards with their tensor-parallel collectives, activations sent
 * between stages, gradient synchronisation (all-reduce, or ZeRO's reduce-scatter and
 * parameter all-gathers), the optimizer step, and offload / parameter-server traffic.
 *
 * Streams let communication overlap compute as the systems modelled do: gradient buckets start
 * as soon as backward has produced them (Li et al. 2020, "PyTorch Distributed", section 3.2);
 * the input-gradient collective of a tensor-parallel layer overlaps its weight-gradient GEMM
 * (Megatron-LM's asynchronous tensor-parallel all-reduce; Korthikanti et al. 2022, 4.2.2);
 * ZeRO-3 gathers the next layer's parameters while the current one computes (Rajbhandari et
 * al. 2020, section 7.2.2); pipeline sends and receives run beside compute (Megatron-LM's
 * batched isend/irecv). Pipeline bubbles are not computed anywhere: they are the idle time
 * the replay finds when a stage waits for a neighbour. */
#include "ts_plan_priv.h"
#include "ts_util.h"

#include <stdarg.h>
#include <string.h>

enum {
  S_COMPUTE = 0, /* compute and critical-path collectives */
  S_DP = 1,      /* gradient buckets */
  S_TPSIDE = 2,  /* tensor-parallel collectives overlapping the weight gradient */
  S_ZERO = 3,    /* ZeRO-3 parameter gathers */
  S_SEND_F = 4,  /* pipeline: activations to the next stage */
  S_SEND_B = 5,  /* pipeline: gradients to the previous stage */
  S_RECV_F = 6,
  S_RECV_B = 7,
  S_HOST = 8, /* offload transfers over the host link */
  S_PS = 9,   /* parameter-server push and pull */
};

typedef struct {
  const ts_plan *p;
  ts_trace *tr;
  int prog, device;
  int g_tp, g_dp, g_dptp, g_ep, g_edp, ax_pp;
  double mb;
  int last;       /* last op of the compute stream, -1 at the start */
  GArray *pend;   /* ops the next compute-stream op must wait for */
  int *ag_op;     /* ZeRO-3: gather of layer i in the current pass, -1 when none yet */
  GArray *zorder; /* ZeRO-3: parameter layers in the order the current pass uses them */
  guint zpos;     /* next entry of zorder to gather */
  int *wgrad_op;  /* per layer: its last backward op (the weight gradient) */
  GArray *sync;   /* gradient synchronisation ops the optimizer waits for */
  int *labels;    /* label index per (layer or stage, slot), -1 until first used */
  char label[320];
} gen;

/* Label slots: per layer, then per virtual stage. Labels are formatted once per slot, not
 * once per op (a step of a large pipeline has hundreds of thousands of ops). */
enum {
  L_FWD,
  L_RECOMPUTE,
  L_FWD_PRE,
  L_FWD_POST,
  L_RC_PRE,
  L_RC_POST,
  L_BWD_PRE,
  L_PARAM_AG,
  L_ATTN_RECOMPUTE,
  L_BWD,
  L_REGATHER,
  L_DGRAD,
  L_BWD_POST,
  L_WGRAD,
  L_EP_FWD_PRE,
  L_EP_FWD_POST,
  L_EP_RC_PRE,
  L_EP_RC_POST,
  L_EP_BWD_PRE,
  L_EP_BWD_POST,
  L_NLAYER_SLOTS
};
enum { L_RECV_F, L_SEND_F, L_RECV_B, L_SEND_B, L_GATHER_F, L_GATHER_B, L_NSTAGE_SLOTS };

G_GNUC_PRINTF(3, 4) static int lbl(gen *g, int slot, const char *fmt, ...)
{
  if (g->labels[slot] >= 0)
    return g->labels[slot];
  va_list ap;
  va_start(ap, fmt);
  g_vsnprintf(g->label, sizeof g->label, fmt, ap);
  va_end(ap);
  return g->labels[slot] = ts_trace_label(g->tr, g->label);
}

static int layer_slot(const gen *g, int i, int slot)
{
  (void)g;
  return i * L_NLAYER_SLOTS + slot;
}

static int stage_slot(const gen *g, int k, int slot)
{
  return g->p->model->nlayers * L_NLAYER_SLOTS + k * L_NSTAGE_SLOTS + slot;
}

static int emit(gen *g, const ts_op *op, int label, const int *deps, int ndeps)
{
  ts_op o = *op;
  o.label = label;
  return ts_trace_append(g->tr, g->prog, &o, deps, ndeps);
}

static int text_label(gen *g, const char *text)
{
  return ts_trace_label(g->tr, text);
}

/* An op on the compute stream; it also waits for everything pending. */
static int emit_main(gen *g, const ts_op *op, int label)
{
  ts_op o = *op;
  o.stream = S_COMPUTE;
  int id = emit(g, &o, label, (const int *)g->pend->data, (int)g->pend->len);
  g_array_set_size(g->pend, 0);
  g->last = id;
  return id;
}

static void pend(gen *g, int op)
{
  if (op >= 0)
    g_array_append_val(g->pend, op);
}

static int emit_compute(gen *g, ts_op_cat cat, double flops, double mem, const ts_op_shape *shape,
                        int label)
{
  ts_op op = {.kind = TS_OP_COMPUTE, .cat = cat};
  op.flops = flops;
  op.mem_bytes = mem;
  if (shape != NULL)
    op.shape = *shape;
  return emit_main(g, &op, label);
}

/* The shape of layer i's op in a pass (ts_plan_layer_shape) for this micro-batch. */
static const ts_op_shape *layer_shape(gen *g, int i, ts_pass pass, ts_op_shape *s)
{
  ts_plan_layer_shape(g->p, i, g->mb, pass, s);
  return s;
}

static ts_op coll_op(const gen *g, ts_coll_kind kind, int group, double bytes, ts_op_cat cat,
                     int stream)
{
  ts_op op = {.kind = TS_OP_COLL, .cat = cat, .stream = stream};
  op.coll = kind;
  op.algo = g->p->opt.algo;
  op.group = group;
  op.bytes = bytes;
  return op;
}

static const char *coll_word(int kind)
{
  switch (kind) {
  case TS_COLL_ALLREDUCE:
    return "all-reduce";
  case TS_COLL_REDUCESCATTER:
    return "reduce-scatter";
  case TS_COLL_ALLGATHER:
    return "all-gather";
  case TS_COLL_ALLTOALL:
    return "all-to-all";
  default:
    return "broadcast";
  }
}

/* A tensor-parallel collective on the compute stream (the next layer needs its result). */
static void emit_tp(gen *g, const ts_tp_coll *c, int i, int slot, const char *when)
{
  if (c->kind == TS_NO_COLL || c->bytes <= 0 || g->p->degree[TS_AX_TP] <= 1)
    return;
  ts_op op = coll_op(g, (ts_coll_kind)c->kind, g->g_tp, c->bytes * g->mb, TS_CAT_COMM_TP, 0);
  emit_main(g, &op,
            lbl(g, layer_slot(g, i, slot), "%s %s %s%s", g->p->model->layers[i].name, when,
                coll_word(c->kind), c->redistribution ? " (redistribution)" : ""));
}

/* An expert-parallel all-to-all (dispatch or combine) on the compute stream. */
static void emit_ep(gen *g, const ts_tp_coll *c, int i, int slot, const char *what)
{
  if (c->kind == TS_NO_COLL || c->bytes <= 0 || g->p->ep <= 1)
    return;
  ts_op op = coll_op(g, TS_COLL_ALLTOALL, g->g_ep, c->bytes * g->mb, TS_CAT_COMM_OTHER, 0);
  emit_main(g, &op,
            lbl(g, layer_slot(g, i, slot), "%s %s all-to-all", g->p->model->layers[i].name, what));
}

/* ---- host link, NVMe, servers ------------------------------------------------------------ */

/* A transfer or computation off the chip (host link, NVMe, host CPU, parameter servers) that
 * takes `seconds`: written as a compute-like op on its own stream whose roofline time is
 * exactly that (memory traffic at the chip's bandwidth), so every backend replays it; the
 * label says what it really is. */
static int emit_duration(gen *g, int stream, ts_op_cat cat, double seconds, int label,
                         const int *deps, int ndeps)
{
  const ts_topo *t = g->p->topo;
  ts_op op = {.kind = TS_OP_COMPUTE, .cat = cat, .stream = stream};
  op.shape.oclass = TS_OPC_TRANSFER; /* a duration: no kernel, no launch floor */
  if (t->chip.memory_bw_Bps > 0)
    op.mem_bytes = seconds * t->chip.memory_bw_Bps;
  else
    op.flops = seconds * t->chip.peak_flops * t->chip.compute_efficiency;
  return emit(g, &op, label, deps, ndeps);
}

/* Bytes over the host link, one direction (ZeRO-Offload, Ren et al. 2021, section 4). */
static int host_link(gen *g, double bytes, const char *what, const int *deps, int ndeps)
{
  char b[48];
  g_snprintf(g->label, sizeof g->label, "host link: %s (%s)", what,
             ts_fmt_bytes(b, sizeof b, bytes));
  return emit_duration(g, S_HOST, TS_CAT_OTHER, bytes / g->p->topo->chip.host_link_bw_Bps,
                       text_label(g, g->label), deps, ndeps);
}

static int nvme(gen *g, double bytes, const char *what, const int *deps, int ndeps)
{
  char b[48];
  g_snprintf(g->label, sizeof g->label, "nvme: %s (%s)", what, ts_fmt_bytes(b, sizeof b, bytes));
  return emit_duration(g, S_HOST, TS_CAT_OTHER, bytes / g->p->topo->chip.nvme_bw_Bps,
                       text_label(g, g->label), deps, ndeps);
}

/* ---- ZeRO-3 parameter gathers ------------------------------------------------------- */

static void zero_gather(gen *g, int i)
{
  const ts_layer *l = &g->p->model->layers[i];
  double bytes = ts_plan_layer_params(g->p, i) * g->p->model->dtype_bytes;
  gboolean expert = g->p->exec[i].expert;
  ts_op op =
      coll_op(g, TS_COLL_ALLGATHER, expert ? g->g_edp : g->g_dp, bytes, TS_CAT_COMM_DP, S_ZERO);
  int dep = g->last;
  if (g->p->offload == TS_OFFLOAD_NVME) {
    /* ZeRO-Infinity (Rajbhandari et al. 2021, section 5.1): the parameter shard comes from
     * NVMe through host memory before the gather. */
    double shard = bytes / (expert ? g->p->degree[TS_AX_DP] / g->p->ep : g->p->degree[TS_AX_DP]);
    int r = nvme(g, shard, "read parameter shard", &dep, dep >= 0 ? 1 : 0);
    dep = host_link(g, shard, "parameter shard to device", &r, 1);
  }
  g->ag_op[i] = emit(g, &op, lbl(g, layer_slot(g, i, L_PARAM_AG), "%s param all-gather", l->name),
                     &dep, dep >= 0 ? 1 : 0);
}

/* Starts a pass over `layers` (in the order it uses them): forgets earlier gathers. */
static void zero_pass(gen *g, const int *layers, int n)
{
  if (g->p->zero < 3)
    return;
  for (guint k = 0; k < g->zorder->len; k++)
    g->ag_op[g_array_index(g->zorder, int, k)] = -1;
  g_array_set_size(g->zorder, 0);
  g->zpos = 0;
  for (int k = 0; k < n; k++)
    if (g->p->model->layers[layers[k]].params > 0 && g->ag_op[layers[k]] != -2) {
      g_array_append_val(g->zorder, layers[k]);
      g->ag_op[layers[k]] = -2; /* listed */
    }
  for (guint k = 0; k < g->zorder->len; k++)
    g->ag_op[g_array_index(g->zorder, int, k)] = -1;
}

/* Layer i is about to compute: its parameters must be gathered, and the next layer's gather
 * starts now, one layer ahead (the previous compute op is its dependency). */
static void zero_need(gen *g, int i)
{
  if (g->p->zero < 3 || g->p->model->layers[i].params <= 0)
    return;
  while (g->ag_op[i] < 0 && g->zpos < g->zorder->len)
    zero_gather(g, g_array_index(g->zorder, int, g->zpos++));
  if (g->zpos < g->zorder->len)
    zero_gather(g, g_array_index(g->zorder, int, g->zpos++));
  pend(g, g->ag_op[i]);
}

/* ---- one layer ------------------------------------------------------------------------ */

static void fwd_layer(gen *g, int i, gboolean recompute)
{
  const ts_plan *p = g->p;
  const ts_model *m = p->model;
  const ts_layer *l = &m->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  const char *what = recompute ? "recompute" : "fwd";
  emit_ep(g, &e->ep_pre, i, recompute ? L_EP_RC_PRE : L_EP_FWD_PRE,
          recompute ? "recompute dispatch" : "fwd dispatch");
  emit_tp(g, &e->fwd_pre, i, recompute ? L_RC_PRE : L_FWD_PRE, what);
  zero_need(g, i);
  ts_op_shape sh;
  emit_compute(g, TS_CAT_FWD, l->fwd_flops * g->mb / e->cdiv,
               ts_layer_fwd_mem_bytes_batch(m, l, g->mb) / e->cdiv,
               layer_shape(g, i, TS_PASS_FWD, &sh),
               lbl(g, layer_slot(g, i, recompute ? L_RECOMPUTE : L_FWD), "%s %s", l->name, what));
  emit_tp(g, &e->fwd_post, i, recompute ? L_RC_POST : L_FWD_POST, what);
  emit_ep(g, &e->ep_post, i, recompute ? L_EP_RC_POST : L_EP_FWD_POST,
          recompute ? "recompute combine" : "fwd combine");
}

static void bwd_layer(gen *g, int i, gboolean gathered)
{
  const ts_plan *p = g->p;
  const ts_model *m = p->model;
  const ts_layer *l = &m->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  double mem = ts_layer_bwd_mem_bytes_batch(m, l, g->mb) / e->cdiv;
  ts_op_shape sh;
  emit_ep(g, &e->ep_post, i, L_EP_BWD_PRE, "bwd combine");
  emit_tp(g, &e->bwd_pre, i, L_BWD_PRE, "bwd");
  if (!gathered)
    zero_need(g, i);
  else if (p->zero >= 3 && g->ag_op[i] >= 0)
    pend(g, g->ag_op[i]);
  if (e->recompute_flops > 0) {
    emit_compute(g, TS_CAT_FWD, e->recompute_flops * g->mb, 0.0,
                 layer_shape(g, i, TS_PASS_ATTN_RECOMPUTE, &sh),
                 lbl(g, layer_slot(g, i, L_ATTN_RECOMPUTE), "%s recompute attention", l->name));
  }
  double fi = l->bwd_input_flops * g->mb / e->cdiv, fw = l->bwd_weight_flops * g->mb / e->cdiv;
  gboolean async = p->degree[TS_AX_TP] > 1 && (e->bwd_post.kind == TS_COLL_ALLREDUCE ||
                                               e->bwd_post.kind == TS_COLL_REDUCESCATTER);
  if (!async) {
    g->wgrad_op[i] = emit_compute(g, TS_CAT_BWD, fi + fw, mem, layer_shape(g, i, TS_PASS_BWD, &sh),
                                  lbl(g, layer_slot(g, i, L_BWD), "%s bwd", l->name));
    emit_tp(g, &e->bwd_post, i, L_BWD_POST, "bwd");
    emit_ep(g, &e->ep_pre, i, L_EP_BWD_POST, "bwd dispatch");
    return;
  }
  /* The input gradient first; its collective runs while the weight gradient computes. With
   * sequence parallelism the kept (sharded) input is gathered again during the input
   * gradient (Korthikanti et al. 2022, 4.2.2). */
  int regather = -1;
  if (e->bwd_regather.kind != TS_NO_COLL) {
    ts_op op = coll_op(g, TS_COLL_ALLGATHER, g->g_tp, e->bwd_regather.bytes * g->mb, TS_CAT_COMM_TP,
                       S_TPSIDE);
    int deps[8], nd = 0;
    for (guint k = 0; k < g->pend->len && nd < 7; k++)
      deps[nd++] = g_array_index(g->pend, int, k);
    if (g->last >= 0)
      deps[nd++] = g->last;
    regather = emit(g, &op, lbl(g, layer_slot(g, i, L_REGATHER), "%s bwd input re-gather", l->name),
                    deps, nd);
  }
  double share = fi + fw > 0 ? fi / (fi + fw) : 0.5;
  int dgrad = emit_compute(g, TS_CAT_BWD, fi, mem * share, layer_shape(g, i, TS_PASS_DGRAD, &sh),
                           lbl(g, layer_slot(g, i, L_DGRAD), "%s bwd input grad", l->name));
  ts_op op = coll_op(g, (ts_coll_kind)e->bwd_post.kind, g->g_tp, e->bwd_post.bytes * g->mb,
                     TS_CAT_COMM_TP, S_TPSIDE);
  int post =
      emit(g, &op,
           lbl(g, layer_slot(g, i, L_BWD_POST), "%s bwd %s%s", l->name, coll_word(e->bwd_post.kind),
               e->bwd_post.redistribution ? " (redistribution)" : ""),
           &dgrad, 1);
  pend(g, regather);
  g->wgrad_op[i] =
      emit_compute(g, TS_CAT_BWD, fw, mem * (1.0 - share), layer_shape(g, i, TS_PASS_WGRAD, &sh),
                   lbl(g, layer_slot(g, i, L_WGRAD), "%s bwd weight grad", l->name));
  pend(g, post); /* the previous layer's backward needs the summed input gradient */
  emit_ep(g, &e->ep_pre, i, L_EP_BWD_POST, "bwd dispatch");
}

/* ---- gradient synchronisation ----------------------------------------------------------- */

typedef struct {
  double bytes;
  int first, last_op;
} bucket;

/* Parameter servers colocated with every data-parallel worker: their traffic is exactly a pair
 * of direct collectives over the dp group. */
static gboolean ps_as_collectives(const ts_plan *p)
{
  return p->ps_placement == TS_PS_COLOCATED && p->ps == p->degree[TS_AX_DP] && p->ps > 1;
}

static void flush(gen *g, bucket *b, int group, int upto)
{
  if (b->bytes <= 0)
    return;
  const ts_plan *p = g->p;
  if (p->ps > 0 && ps_as_collectives(p)) {
    /* A server on every worker: pushing shard k of every gradient to worker k is a direct
     * reduce-scatter (and the pull below a direct all-gather). */
    ts_op op = coll_op(g, TS_COLL_REDUCESCATTER, g->g_dp, b->bytes, TS_CAT_COMM_DP, S_PS);
    op.algo = TS_ALGO_DIRECT;
    g_snprintf(g->label, sizeof g->label, "ps push %s..%s", p->model->layers[b->first].name,
               p->model->layers[upto].name);
    int id = emit(g, &op, text_label(g, g->label), &b->last_op, 1);
    g_array_append_val(g->sync, id);
    b->bytes = 0;
    b->first = -1;
    return;
  }
  if (p->ps > 0) {
    /* GeePS (Cui et al. 2016, section 3.3): each layer's gradients are pushed to the sharded
     * servers as soon as backward has produced them. */
    char h[48];
    g_snprintf(g->label, sizeof g->label, "ps push %s..%s (%s)", p->model->layers[b->first].name,
               p->model->layers[upto].name, ts_fmt_bytes(h, sizeof h, b->bytes));
    int id = emit_duration(g, S_PS, TS_CAT_COMM_DP, ts_plan_ps_time(p, b->bytes),
                           text_label(g, g->label), &b->last_op, 1);
    g_array_append_val(g->sync, id);
    b->bytes = 0;
    b->first = -1;
    return;
  }
  gboolean rs = p->zero >= 1;
  ts_op op = coll_op(g, rs ? TS_COLL_REDUCESCATTER : TS_COLL_ALLREDUCE, group, b->bytes,
                     TS_CAT_COMM_DP, S_DP);
  g_snprintf(g->label, sizeof g->label, "grad %s %s..%s", rs ? "reduce-scatter" : "all-reduce",
             p->model->layers[b->first].name, p->model->layers[upto].name);
  int id = emit(g, &op, text_label(g, g->label), &b->last_op, 1);
  if (p->offload != TS_OFFLOAD_NONE) {
    /* ZeRO-Offload (Ren et al. 2021, section 4.2): each reduced gradient shard goes to host
     * memory while backward continues. */
    double n = group == g->g_edp ? p->degree[TS_AX_DP] / p->ep : p->degree[TS_AX_DP];
    id = host_link(g, b->bytes / n, "gradient shard to host", &id, 1);
  }
  g_array_append_val(g->sync, id);
  b->bytes = 0;
  b->first = -1;
}

/* Buckets the gradients of layers [a, b) (just computed, last layer first) and starts their
 * synchronisation as each bucket fills; layers replicated over the tp axis while it splits
 * their work synchronise over dp and tp together. */
static void sync_grads(gen *g, int a, int b)
{
  const ts_plan *p = g->p;
  const ts_model *m = p->model;
  int dp = p->degree[TS_AX_DP], tp = p->degree[TS_AX_TP];
  /* Three kinds: dense (over dp), replicated over tp too (dp and tp), experts (dp / ep). */
  bucket bk[3] = {{0, -1, -1}, {0, -1, -1}, {0, -1, -1}};
  int groups[3] = {g->g_dp, g->g_dptp, g->g_edp};
  int size[3] = {dp, dp * tp, dp / p->ep};
  int lastl[3] = {-1, -1, -1};
  for (int i = b - 1; i >= a; i--) {
    const ts_layer_exec *e = &p->exec[i];
    /* With ZeRO the optimizer shards over dp only, so a gradient reduce-scattered over dp and
     * tp would leave each tp member updating a different part of a parameter they all hold:
     * sum it over tp first, then shard it over dp with the rest (Megatron-LM all-reduces the
     * sequence-parallel layer-norm gradients over tp before the data-parallel reduction,
     * Korthikanti et al. 2022, section 4.2.2). */
    gboolean tp_first = p->ps == 0 && p->zero >= 1 && e->dp_over_tp;
    int w = p->ps > 0 || tp_first ? 0
            : e->expert           ? 2
            : e->dp_over_tp       ? 1
                                  : 0; /* servers take all */
    if ((size[w] <= 1 && p->ps == 0) || m->layers[i].params <= 0)
      continue;
    if (tp_first) {
      /* On the gradient stream, so the bucket's reduce-scatter follows it. */
      double bytes = ts_plan_layer_params(p, i) * m->dtype_bytes;
      ts_op op = coll_op(g, TS_COLL_ALLREDUCE, g->g_tp, bytes, TS_CAT_COMM_DP, S_DP);
      g_snprintf(g->label, sizeof g->label, "grad all-reduce %s..%s", m->layers[i].name,
                 m->layers[i].name);
      emit(g, &op, text_label(g, g->label), &g->wgrad_op[i], 1);
    }
    if (bk[w].first < 0)
      bk[w].first = i;
    bk[w].bytes += ts_plan_layer_params(p, i) * m->dtype_bytes;
    bk[w].last_op = g->wgrad_op[i];
    lastl[w] = i;
    if (bk[w].bytes >= p->opt.bucket_bytes)
      flush(g, &bk[w], groups[w], i);
  }
  for (int w = 0; w < 3; w++)
    if (bk[w].bytes > 0)
      flush(g, &bk[w], groups[w], lastl[w]);
}

/* ---- pipeline passes ------------------------------------------------------------------ */

static int tag(const gen *g, gboolean bwd, int boundary, int micro)
{
  return ((bwd ? g->p->nstages : 0) + boundary) * (int)g->p->n_micro + micro;
}

static int p2p(gen *g, ts_op_kind kind, int stream, int peer_device, double bytes, int t, int label)
{
  ts_op op = {.kind = kind, .cat = TS_CAT_COMM_PP, .stream = stream};
  op.axis = g->ax_pp;
  op.offset = peer_device - g->device;
  op.bytes = bytes;
  op.tag = t;
  if (kind == TS_OP_SEND) {
    pend(g, g->last);
    int id = emit(g, &op, label, (const int *)g->pend->data, (int)g->pend->len);
    g_array_set_size(g->pend, 0);
    return id;
  }
  return emit(g, &op, label, NULL, 0);
}

/* Bytes of one micro-batch leaving layer i towards the next stage, per rank before any
 * tensor-parallel slicing: the layer's output, and the earlier outputs later stages still read
 * (ts_layer carry_elems: an encoder-decoder's encoder output, a cell's previous cell), whole
 * on every rank, which travel along (forward) and their gradients back (backward). */
static double boundary_unit_bytes(const gen *g, int i)
{
  const ts_plan *p = g->p;
  double carry = p->model->layers[i].carry_elems * p->model->dtype_bytes;
  return (p->exec[i].out_bytes + carry) * g->mb;
}

/* Bytes a rank sends across the boundary after layer i. A whole activation is the same on
 * every tensor-parallel rank: each sends only its 1/t slice and the receivers all-gather it
 * over their fast links (Megatron-LM's scatter/gather optimisation, Narayanan et al. 2021 SC,
 * section 4.1). A split output is sent as it is, with the carried tensor whole. */
static double boundary_bytes(const gen *g, int i, gboolean *gather)
{
  const ts_plan *p = g->p;
  int tp = p->degree[TS_AX_TP];
  *gather = p->exec[i].out == TS_ST_REPL && tp > 1;
  return boundary_unit_bytes(g, i) / (*gather ? tp : 1);
}

static void boundary_gather(gen *g, int i, int k, int slot, const char *what)
{
  ts_op op = coll_op(g, TS_COLL_ALLGATHER, g->g_tp, boundary_unit_bytes(g, i), TS_CAT_COMM_PP, 0);
  emit_main(g, &op, lbl(g, stage_slot(g, k, slot), "stage %d %s all-gather", k, what));
}

static void forward_pass(gen *g, int chunk, int u)
{
  const ts_plan *p = g->p;
  int P = p->degree[TS_AX_PP], k = chunk * P + g->device;
  int a = p->stage_first[k], b = p->stage_first[k + 1];
  const ts_model *m = p->model;
  if (k > 0) {
    gboolean gather;
    double bytes = boundary_bytes(g, a - 1, &gather);
    pend(g, p2p(g, TS_OP_RECV, S_RECV_F, (k - 1) % P, bytes, tag(g, FALSE, k - 1, u),
                lbl(g, stage_slot(g, k, L_RECV_F), "recv activations stage %d", k)));
    if (gather)
      boundary_gather(g, a - 1, k, L_GATHER_F, "activations");
  }
  if (p->zero >= 3) {
    int *order = g_new(int, b - a);
    for (int i = a; i < b; i++)
      order[i - a] = i;
    zero_pass(g, order, b - a);
    g_free(order);
  }
  for (int i = a; i < b; i++)
    fwd_layer(g, i, FALSE);
  if (k < p->nstages - 1) {
    gboolean gather;
    double bytes = boundary_bytes(g, b - 1, &gather);
    p2p(g, TS_OP_SEND, S_SEND_F, (k + 1) % P, bytes, tag(g, FALSE, k, u),
        lbl(g, stage_slot(g, k, L_SEND_F), "send activations %s stage %d", m->layers[b - 1].name,
            k));
  }
}

static void backward_pass(gen *g, int chunk, int u, gboolean sync)
{
  const ts_plan *p = g->p;
  int P = p->degree[TS_AX_PP], k = chunk * P + g->device;
  int a = p->stage_first[k], b = p->stage_first[k + 1];
  if (k < p->nstages - 1) {
    gboolean gather;
    double bytes = boundary_bytes(g, b - 1, &gather);
    pend(g, p2p(g, TS_OP_RECV, S_RECV_B, (k + 1) % P, bytes, tag(g, TRUE, k, u),
                lbl(g, stage_slot(g, k, L_RECV_B), "recv gradients stage %d", k)));
    if (gather)
      boundary_gather(g, b - 1, k, L_GATHER_B, "gradients");
  }
  gboolean full = ts_plan_recomputes_forward(p);
  if (p->zero >= 3) {
    /* The order parameters are used in: with full recomputation each block's forward is re-run
     * (first layer first) just before its backward. */
    int *order = g_new(int, b - a), n = 0;
    for (int i = b - 1; i >= a;) {
      int u0 = full && p->unit[i] >= 0 ? MAX(p->unit[i], a) : i;
      for (int j = u0; j <= i; j++)
        order[n++] = j;
      i = u0 - 1;
    }
    zero_pass(g, order, n);
    g_free(order);
  }
  for (int i = b - 1; i >= a;) {
    if (!full || p->unit[i] < 0) {
      bwd_layer(g, i, FALSE);
      i--;
      continue;
    }
    /* Full recomputation (Chen et al. 2016; Korthikanti et al. 2022, section 5): re-run the
     * block's forward from its kept input, then its backward. */
    int u0 = MAX(p->unit[i], a);
    for (int j = u0; j <= i; j++)
      fwd_layer(g, j, TRUE);
    for (int j = i; j >= u0; j--)
      bwd_layer(g, j, TRUE);
    i = u0 - 1;
  }
  if (k > 0) {
    gboolean gather;
    double bytes = boundary_bytes(g, a - 1, &gather);
    p2p(g, TS_OP_SEND, S_SEND_B, (k - 1) % P, bytes, tag(g, TRUE, k - 1, u),
        lbl(g, stage_slot(g, k, L_SEND_B), "send gradients %s stage %d", p->model->layers[a].name,
            k));
  }
  if (sync)
    sync_grads(g, a, b);
}

/* ---- after the last backward ------------------------------------------------------------ */

/* Megatron-LM keeps the tied word embedding on every stage that uses it (the first and the
 * last; T5's decoder embedding stage too) and all-reduces its gradient among them
 * (Narayanan et al. 2021 SC, section 2): here a direct exchange, every member sending its
 * gradient to every other (two members: one exchange). */
static void tied_exchange(gen *g)
{
  const ts_plan *p = g->p;
  int pp = p->degree[TS_AX_PP];
  int *dev = g_new(int, pp);
  double *copy = g_new(double, pp);
  int n = ts_plan_tied_group(p, dev, copy), me = -1;
  for (int k = 0; k < n; k++)
    if (dev[k] == g->device)
      me = k;
  int base = 2 * p->nstages * (int)p->n_micro;
  /* Tags: the table's device sends base + 1, the copies base. */
  for (int k = 0; me >= 0 && k < n; k++)
    if (k != me)
      p2p(g, TS_OP_SEND, S_SEND_F, dev[k], MAX(copy[me], copy[k]) * p->model->dtype_bytes,
          base + (me == 0), text_label(g, "send tied embedding gradient"));
  for (int k = 0; me >= 0 && k < n; k++)
    if (k != me) {
      int r = p2p(g, TS_OP_RECV, S_RECV_F, dev[k], MAX(copy[me], copy[k]) * p->model->dtype_bytes,
                  base + (k == 0), text_label(g, "recv tied embedding gradient"));
      g_array_append_val(g->sync, r);
    }
  g_free(dev);
  g_free(copy);
}

/* ZeRO stages 1 and 2: every rank updated its shard; gather the updated parameters
 * (Rajbhandari et al. 2020, section 7.2.1: reduce-scatter plus all-gather = all-reduce); expert
 * parameters over the ranks that share each expert. */
static void gather_updated(gen *g)
{
  const ts_plan *p = g->p;
  double dense, expert, D = p->model->dtype_bytes;
  ts_plan_device_params_split(p, g->device, &dense, &expert);
  gboolean any = FALSE;
  if (dense > 0 && p->degree[TS_AX_DP] > 1) {
    ts_op op = coll_op(g, TS_COLL_ALLGATHER, g->g_dp, dense * D, TS_CAT_COMM_DP, 0);
    emit_main(g, &op, text_label(g, "updated param all-gather"));
    any = TRUE;
  }
  if (expert > 0 && p->degree[TS_AX_DP] / p->ep > 1) {
    ts_op op = coll_op(g, TS_COLL_ALLGATHER, g->g_edp, expert * D, TS_CAT_COMM_DP, 0);
    emit_main(g, &op, text_label(g, "updated expert param all-gather"));
    any = TRUE;
  }
  if (!any)
    emit_compute(g, TS_CAT_OTHER, 0, 0, NULL, text_label(g, "step end"));
}

/* Bulk-synchronous parameter-server step (GeePS, Cui et al. 2016, section 3): once every
 * push has arrived the servers apply the update, then every worker pulls the new parameters. */
static void ps_step(gen *g, double psi)
{
  const ts_plan *p = g->p;
  const ts_model *m = p->model;
  double D = m->dtype_bytes, K = ts_plan_optimizer_bytes_per_param(m), shard = psi / p->ps;
  char h[48];
  int *deps = (int *)g->sync->data, nd = (int)g->sync->len, upd;
  if (p->ps_placement == TS_PS_COLOCATED) {
    /* A colocated server updates its shard on its worker's chip. */
    for (int k = 0; k < nd; k++)
      pend(g, deps[k]);
    ts_op_shape sh;
    ts_plan_optimizer_shape(&sh);
    upd = emit_compute(g, TS_CAT_OPTIMIZER, 12.0 * shard, shard * (2.0 * D + 2.0 * K), &sh,
                       text_label(g, "ps update (colocated server shard)"));
  } else {
    upd = emit_duration(g, S_PS, TS_CAT_OPTIMIZER, 12.0 * shard / p->topo->chip.host_flops,
                        text_label(g, "ps update (dedicated server CPU)"), deps, nd);
  }
  int pull;
  if (ps_as_collectives(p)) {
    ts_op op = coll_op(g, TS_COLL_ALLGATHER, g->g_dp, D * psi, TS_CAT_COMM_DP, S_PS);
    op.algo = TS_ALGO_DIRECT;
    pull = emit(g, &op, text_label(g, "ps pull parameters"), &upd, 1);
  } else {
    g_snprintf(g->label, sizeof g->label, "ps pull parameters (%s)",
               ts_fmt_bytes(h, sizeof h, D * psi));
    pull = emit_duration(g, S_PS, TS_CAT_COMM_DP, ts_plan_ps_time(p, D * psi),
                         text_label(g, g->label), &upd, 1);
  }
  pend(g, pull);
  emit_compute(g, TS_CAT_OTHER, 0, 0, NULL, text_label(g, "step end"));
}

/* The optimizer on the host CPU (ZeRO-Offload, Ren et al. 2021, section 4.1: CPU-Adam), with
 * ZeRO-Infinity's optimizer state read from and written back to NVMe (Rajbhandari et al.
 * 2021, section 5). */
static void offload_step(gen *g, double local)
{
  const ts_plan *p = g->p;
  const ts_model *m = p->model;
  double D = m->dtype_bytes, K = ts_plan_optimizer_bytes_per_param(m);
  int *deps = (int *)g->sync->data, nd = (int)g->sync->len;
  int prev;
  if (p->offload == TS_OFFLOAD_NVME)
    prev = nvme(g, K * local, "read optimizer state", deps, nd);
  prev = emit_duration(g, S_HOST, TS_CAT_OPTIMIZER, 12.0 * local / p->topo->chip.host_flops,
                       text_label(g, "host CPU optimizer step"),
                       p->offload == TS_OFFLOAD_NVME ? &prev : deps,
                       p->offload == TS_OFFLOAD_NVME ? 1 : nd);
  if (p->offload == TS_OFFLOAD_NVME) {
    prev = nvme(g, K * local, "write optimizer state", &prev, 1);
    if (p->zero >= 3) {
      /* Parameters live on NVMe; each pass fetches them layer by layer. */
      prev = nvme(g, D * local, "write updated parameter shard", &prev, 1);
      pend(g, prev);
      emit_compute(g, TS_CAT_OTHER, 0, 0, NULL, text_label(g, "step end"));
      return;
    }
  }
  prev = host_link(g, D * local, "updated parameter shard to device", &prev, 1);
  pend(g, prev);
  if (p->zero == 1 || p->zero == 2)
    gather_updated(g);
  else
    emit_compute(g, TS_CAT_OTHER, 0, 0, NULL, text_label(g, "step end"));
}

static void optimizer_step(gen *g)
{
  const ts_plan *p = g->p;
  const ts_model *m = p->model;
  double psi = ts_plan_device_params(p, g->device);
  double local = ts_plan_device_shard_params(p, g->device);
  double D = m->dtype_bytes, K = ts_plan_optimizer_bytes_per_param(m);
  if (p->ps > 0) {
    ps_step(g, psi);
    return;
  }
  if (p->offload != TS_OFFLOAD_NONE) {
    offload_step(g, local);
    return;
  }
  /* Adam reads the gradient, reads and writes the master weights and both moments, and writes
   * the compute copy of the weights: about 12 FLOP per parameter. */
  for (guint k = 0; k < g->sync->len; k++)
    pend(g, g_array_index(g->sync, int, k));
  ts_op_shape sh;
  ts_plan_optimizer_shape(&sh);
  emit_compute(g, TS_CAT_OPTIMIZER, 12.0 * local, local * (2.0 * D + 2.0 * K), &sh,
               text_label(g, "optimizer step"));
  if (p->zero == 1 || p->zero == 2)
    gather_updated(g);
}

ts_trace *ts_plan_trace(const ts_plan *p, GError **error)
{
  (void)error;
  const ts_model *m = p->model;
  ts_trace *tr = ts_trace_new(p->topo);
  /* With expert parallelism the dp axis is two trace axes: its inner ep ranks and the rest. */
  int axis_of[TS_AX_N], ax_ep = -1;
  for (int a = 0; a < TS_AX_N; a++) {
    gboolean cut = a == TS_AX_DP && p->ep > 1;
    axis_of[a] =
        ts_trace_add_axis(tr, ts_axis_kind_name(a), cut ? p->degree[a] / p->ep : p->degree[a],
                          a != TS_AX_PP, cut ? &p->edp_shape : &p->shape[a]);
  }
  if (p->ep > 1)
    ax_ep = ts_trace_add_axis(tr, "ep", p->ep, TRUE, &p->ep_shape);
  ts_trace_set_programs(tr, p->degree[TS_AX_PP]);
  gen g = {0};
  g.p = p;
  g.tr = tr;
  g.g_tp = ts_trace_group(tr, &axis_of[TS_AX_TP], 1);
  int dp_axes[3] = {ax_ep, axis_of[TS_AX_DP], axis_of[TS_AX_TP]};
  int *dpa = p->ep > 1 ? dp_axes : dp_axes + 1, ndpa = p->ep > 1 ? 2 : 1;
  g.g_dp = ts_trace_group(tr, dpa, ndpa);
  g.g_edp = p->ep > 1 ? ts_trace_group(tr, &axis_of[TS_AX_DP], 1) : g.g_dp;
  g.g_ep = p->ep > 1 ? ts_trace_group(tr, &ax_ep, 1) : -1;
  g.g_dptp = -1;
  for (int i = 0; i < m->nlayers; i++)
    if (p->exec[i].dp_over_tp) {
      g.g_dptp = ts_trace_group(tr, dpa, ndpa + 1);
      break;
    }
  g.ax_pp = axis_of[TS_AX_PP];
  g.mb = (double)p->micro_batch;
  g.pend = g_array_new(FALSE, FALSE, sizeof(int));
  g.zorder = g_array_new(FALSE, FALSE, sizeof(int));
  g.sync = g_array_new(FALSE, FALSE, sizeof(int));
  g.ag_op = g_new(int, m->nlayers > 0 ? m->nlayers : 1);
  g.wgrad_op = g_new(int, m->nlayers > 0 ? m->nlayers : 1);
  int nslots = m->nlayers * L_NLAYER_SLOTS + p->nstages * L_NSTAGE_SLOTS;
  g.labels = g_new(int, nslots);
  for (int k = 0; k < nslots; k++)
    g.labels[k] = -1;
  tr->meta.model = g_strdup(m->name);
  tr->meta.split = g_strdup(p->split_text);
  tr->meta.topology = g_strdup(p->topo->name);
  tr->meta.producer = g_strdup_printf("trainsim %s plan", TS_VERSION);
  tr->meta.samples = (double)p->opt.global_batch;
  tr->meta.model_flops = p->model_flops_per_step;

  int P = p->degree[TS_AX_PP];
  GArray *order = g_array_new(FALSE, FALSE, sizeof(ts_sched_item));
  for (int d = 0; d < P; d++) {
    g.prog = g.device = d;
    g.last = -1;
    g_array_set_size(g.pend, 0);
    g_array_set_size(g.sync, 0);
    for (int i = 0; i < m->nlayers; i++)
      g.ag_op[i] = g.wgrad_op[i] = -1;
    g_array_set_size(order, 0);
    ts_sched_order(p->schedule, P, p->chunks, (int)p->n_micro, d, order);
    /* Gradients are synchronised after a chunk's last backward, or (ZeRO 2 and 3, which keep
     * only a shard of the gradients) after every backward. */
    int *last_bwd = g_new0(int, p->chunks);
    for (guint k = 0; k < order->len; k++) {
      const ts_sched_item *it = &g_array_index(order, ts_sched_item, k);
      if (it->bwd)
        last_bwd[it->chunk] = (int)k;
    }
    for (guint k = 0; k < order->len; k++) {
      const ts_sched_item *it = &g_array_index(order, ts_sched_item, k);
      if (!it->bwd)
        forward_pass(&g, it->chunk, it->micro);
      else
        backward_pass(&g, it->chunk, it->micro, p->zero >= 2 || last_bwd[it->chunk] == (int)k);
    }
    g_free(last_bwd);
    tied_exchange(&g);
    optimizer_step(&g);
  }
  g_array_unref(order);
  g_array_unref(g.pend);
  g_array_unref(g.zorder);
  g_array_unref(g.sync);
  g_free(g.ag_op);
  g_free(g.wgrad_op);
  g_free(g.labels);
  return tr;
}
