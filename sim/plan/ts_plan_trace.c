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
  S_HOST = 8,     /* offload transfers over the host link */
  S_PS = 9,       /* parameter-server push and pull */
  S_CP_SEND = 10, /* context parallelism: K/V blocks to the next rank of the ring */
  S_CP_RECV = 11,
  S_CP_DSEND = 12, /* their gradients, backward */
  S_CP_DRECV = 13,
  S_TPOVL = 14,    /* tp-overlap: chunked tensor-parallel collectives beside their GEMMs */
  S_PARAM = 15,    /* dp-overlap: updated-parameter gathers ahead of each layer's forward */
  S_TPOVL_RS = 16, /* tp-overlap: the chunked reduce-scatters (all-reduces) of a layer's output,
                    * beside the gathers of S_TPOVL so neither waits for the other */
  S_SYMM_OWN = 17, /* tp-overlap=async: each fused collective's own-rank chunk, which no GEMM
                    * waits for (PyTorch's symmetric memory: the rank's own shard is not pulled) */
};

typedef struct {
  const ts_plan *p;
  ts_trace *tr;
  int prog, device;
  int g_tp, g_dp, g_dptp, g_ep, g_edp, ax_pp;
  int g_rep; /* hybrid sharding: the replicas of each shard (-1 when not hybrid) */
  /* replica-reduce=end: per gradient bucket, by its first layer, the bytes of the shard this
   * rank all-reduces across the replicas after the last backward (a bucket flushed every
   * micro-batch, as under ZeRO-2/3, holds the same layers each time: counted once). NULL
   * otherwise. */
  double *rep_end_bytes;
  int ax_cp;    /* context-parallel axis (-1 when cp = 1) */
  int g_cp;     /* cp-ring=torch: the cp ranks as a group (their all-gathers), else -1 */
  int cprank;   /* this program's position on the cp ring */
  int *pgather; /* dp-overlap: per layer, the gather of its updated parameters, -1 when none */
  double mb;
  int last;       /* last op of the compute stream, -1 at the start */
  GArray *pend;   /* ops the next compute-stream op must wait for */
  int *ag_op;     /* ZeRO-3: gather of layer i in the current pass, -1 when none yet */
  GArray *zorder; /* ZeRO-3: parameter layers in the order the current pass uses them */
  guint zpos;     /* next entry of zorder to gather */
  int *wgrad_op;  /* per layer: its last backward op (the weight gradient) */
  /* fsdp2 under pp (TorchTitan: reshard_after_forward=False, and torch.distributed.pipelining
   * keeps the parameters unsharded and skips the gradient reduction until a stage's last
   * backward): a (virtual) stage's parameters are gathered by its first forward and stay. */
  gboolean keep_gathered;
  gboolean *resident; /* keep_gathered: layer i's parameters gathered this step */
  GArray *sync;       /* gradient synchronisation ops the optimizer waits for */
  int *labels;        /* label index per (layer or stage, slot), -1 until first used */
  int cur_layer;      /* op tag: layer of the label last taken from a layer slot, -1 otherwise */
  int cur_mb;         /* op tag: micro-batch of the pass being generated, -1 outside passes */
  int cur_role, cur_phase, cur_stage; /* op tag from the label slot (0: none) */
  int cur_lo, cur_hi;                 /* op tag: a gradient bucket's layers, -1 when none */
  char label[320];
  /* Each layer's compute shape per pass, interned once per trace (the micro-batch is the same
   * for every op of a trace): a step repeats it once per micro-batch. shape_done[k] says
   * shape_of[k] is set (NULL is a roofline op's). */
  const ts_op_shape **shape_of;
  gboolean *shape_done;
  /* ts_plan_layer_params per layer, once per trace: ZeRO gathers, gradient passes and syncs
   * ask for it per layer and micro-batch (issue 15, twentieth pass: divisions, 1.3% of the
   * every-split sweep). */
  double *layer_params;
  gboolean sync_next; /* the next compute op waits for the device first (load=sync) */
  /* Gradient bucket labels by (kind, first layer, last layer): with ZeRO 2 and 3 every
   * micro-batch's backward flushes its buckets, so they are formatted once per trace. */
  GHashTable *bucket_labels;
  /* contend: the collectives' closed-form seconds by (kind, group, bytes), and the label of
   * the compute time they take; -1 until first used. */
  GHashTable *contend_s;
  int contend_label;
  gboolean contend_on; /* the chip has collective_sms and the array more than one node */
  /* ZeRO-3 on a GPU (PyTorch FSDP1, FSDP2, DeepSpeed): the shard groups (g_dp, g_edp), whose
   * collectives run one at a time in issue order, and the program's last collective on each
   * (-1 when none yet, or when the group is not one of them). See serial_dep. */
  int ser_group[2], ser_last[2];
} gen;

#define N_PASSES (TS_PASS_OP_RECOMPUTE + 1)

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
  L_CP_SEND,
  L_CP_RECV,
  L_CP_CORE,
  L_CP_BSEND,
  L_CP_BRECV,
  L_CP_DSEND,
  L_CP_DRECV,
  L_CP_BCORE,
  L_CP_RC_SEND,
  L_CP_RC_RECV,
  L_CP_RC_CORE,
  L_OVL_FWD,
  L_OVL_FWD_PRE,
  L_OVL_FWD_POST,
  L_OVL_RC,
  L_OVL_RC_PRE,
  L_OVL_RC_POST,
  L_OVL_BWD_PRE,
  L_OVL_BWD,
  L_OVL_DGRAD,
  L_PGATHER,
  L_OP_RECOMPUTE,
  L_CP_GATHER,
  L_CP_RC_GATHER,
  L_CP_BGATHER,
  L_CP_ACC,
  L_FSDP1_GRAD,
  L_SP_COPY,
  L_RC_SP_COPY,
  L_BWD_SP_COPY,
  L_SYMM_COPY,
  L_SYMM_REDUCE,
  L_RC_SYMM_COPY,
  L_RC_SYMM_REDUCE,
  L_APEX_GRAD_ADD,
  L_NLAYER_SLOTS
};
enum {
  L_RECV_F,
  L_SEND_F,
  L_RECV_B,
  L_SEND_B,
  L_GATHER_F,
  L_GATHER_B,
  L_DS_REGATHER,
  L_DS_GRAD_ACC,
  L_NSTAGE_SLOTS
};

/* What each label slot's op is (role, phase): the op tag, so nothing reads labels back. */
static const struct {
  guint8 role, phase;
} layer_slot_tag[L_NLAYER_SLOTS] = {
    [L_FWD] = {TS_ROLE_COMPUTE, TS_PHASE_FWD},
    [L_RECOMPUTE] = {TS_ROLE_COMPUTE, TS_PHASE_RECOMPUTE},
    [L_FWD_PRE] = {TS_ROLE_TP, TS_PHASE_FWD},
    [L_FWD_POST] = {TS_ROLE_TP, TS_PHASE_FWD},
    [L_RC_PRE] = {TS_ROLE_TP, TS_PHASE_RECOMPUTE},
    [L_RC_POST] = {TS_ROLE_TP, TS_PHASE_RECOMPUTE},
    [L_BWD_PRE] = {TS_ROLE_TP, TS_PHASE_BWD},
    [L_PARAM_AG] = {TS_ROLE_PARAM_GATHER, TS_PHASE_FWD},
    [L_ATTN_RECOMPUTE] = {TS_ROLE_ATTN_RECOMPUTE, TS_PHASE_BWD},
    [L_BWD] = {TS_ROLE_COMPUTE, TS_PHASE_BWD},
    [L_REGATHER] = {TS_ROLE_REGATHER, TS_PHASE_BWD},
    [L_DGRAD] = {TS_ROLE_INPUT_GRAD, TS_PHASE_BWD},
    [L_BWD_POST] = {TS_ROLE_TP, TS_PHASE_BWD},
    [L_WGRAD] = {TS_ROLE_WEIGHT_GRAD, TS_PHASE_BWD},
    [L_EP_FWD_PRE] = {TS_ROLE_EP, TS_PHASE_FWD},
    [L_EP_FWD_POST] = {TS_ROLE_EP, TS_PHASE_FWD},
    [L_EP_RC_PRE] = {TS_ROLE_EP, TS_PHASE_RECOMPUTE},
    [L_EP_RC_POST] = {TS_ROLE_EP, TS_PHASE_RECOMPUTE},
    [L_EP_BWD_PRE] = {TS_ROLE_EP, TS_PHASE_BWD},
    [L_EP_BWD_POST] = {TS_ROLE_EP, TS_PHASE_BWD},
    [L_OVL_FWD] = {TS_ROLE_COMPUTE, TS_PHASE_FWD},
    [L_OVL_FWD_PRE] = {TS_ROLE_TP, TS_PHASE_FWD},
    [L_OVL_FWD_POST] = {TS_ROLE_TP, TS_PHASE_FWD},
    [L_OVL_RC] = {TS_ROLE_COMPUTE, TS_PHASE_RECOMPUTE},
    [L_OVL_RC_PRE] = {TS_ROLE_TP, TS_PHASE_RECOMPUTE},
    [L_OVL_RC_POST] = {TS_ROLE_TP, TS_PHASE_RECOMPUTE},
    [L_OVL_BWD_PRE] = {TS_ROLE_TP, TS_PHASE_BWD},
    [L_OVL_BWD] = {TS_ROLE_COMPUTE, TS_PHASE_BWD},
    [L_OVL_DGRAD] = {TS_ROLE_INPUT_GRAD, TS_PHASE_BWD},
    [L_OP_RECOMPUTE] = {TS_ROLE_OP_RECOMPUTE, TS_PHASE_BWD},
    [L_SP_COPY] = {TS_ROLE_LAYOUT_COPY, TS_PHASE_FWD},
    [L_RC_SP_COPY] = {TS_ROLE_LAYOUT_COPY, TS_PHASE_RECOMPUTE},
    [L_BWD_SP_COPY] = {TS_ROLE_LAYOUT_COPY, TS_PHASE_BWD},
    [L_SYMM_COPY] = {TS_ROLE_LAYOUT_COPY, TS_PHASE_FWD},
    [L_SYMM_REDUCE] = {TS_ROLE_LAYOUT_COPY, TS_PHASE_FWD},
    [L_RC_SYMM_COPY] = {TS_ROLE_LAYOUT_COPY, TS_PHASE_RECOMPUTE},
    [L_RC_SYMM_REDUCE] = {TS_ROLE_LAYOUT_COPY, TS_PHASE_RECOMPUTE},
    [L_CP_SEND] = {TS_ROLE_CP_KV, TS_PHASE_FWD},
    [L_CP_RECV] = {TS_ROLE_CP_KV, TS_PHASE_FWD},
    [L_CP_CORE] = {TS_ROLE_CP_ATTN, TS_PHASE_FWD},
    [L_CP_BSEND] = {TS_ROLE_CP_KV, TS_PHASE_BWD},
    [L_CP_BRECV] = {TS_ROLE_CP_KV, TS_PHASE_BWD},
    [L_CP_DSEND] = {TS_ROLE_CP_DKV, TS_PHASE_BWD},
    [L_CP_DRECV] = {TS_ROLE_CP_DKV, TS_PHASE_BWD},
    [L_CP_BCORE] = {TS_ROLE_CP_ATTN, TS_PHASE_BWD},
    [L_CP_RC_SEND] = {TS_ROLE_CP_KV, TS_PHASE_RECOMPUTE},
    [L_CP_RC_RECV] = {TS_ROLE_CP_KV, TS_PHASE_RECOMPUTE},
    [L_CP_RC_CORE] = {TS_ROLE_CP_ATTN, TS_PHASE_RECOMPUTE},
    [L_CP_GATHER] = {TS_ROLE_CP_KV, TS_PHASE_FWD},
    [L_CP_RC_GATHER] = {TS_ROLE_CP_KV, TS_PHASE_RECOMPUTE},
    [L_CP_BGATHER] = {TS_ROLE_CP_KV, TS_PHASE_BWD},
    [L_CP_ACC] = {TS_ROLE_CP_ATTN, TS_PHASE_BWD},
    [L_FSDP1_GRAD] = {TS_ROLE_LAYOUT_COPY, TS_PHASE_BWD},
    [L_APEX_GRAD_ADD] = {TS_ROLE_WEIGHT_GRAD, TS_PHASE_BWD},
};
static const guint8 stage_slot_phase[L_NSTAGE_SLOTS] = {
    [L_RECV_F] = TS_PHASE_FWD,      [L_SEND_F] = TS_PHASE_FWD,      [L_RECV_B] = TS_PHASE_BWD,
    [L_SEND_B] = TS_PHASE_BWD,      [L_GATHER_F] = TS_PHASE_FWD,    [L_GATHER_B] = TS_PHASE_BWD,
    [L_DS_REGATHER] = TS_PHASE_BWD, [L_DS_GRAD_ACC] = TS_PHASE_BWD,
};

G_GNUC_PRINTF(3, 4) static int lbl(gen *g, int slot, const char *fmt, ...)
{
  int nl = g->p->model->nlayers;
  g->cur_layer = slot < nl * L_NLAYER_SLOTS ? slot / L_NLAYER_SLOTS : -1;
  if (slot < nl * L_NLAYER_SLOTS) {
    g->cur_role = layer_slot_tag[slot % L_NLAYER_SLOTS].role;
    g->cur_phase = layer_slot_tag[slot % L_NLAYER_SLOTS].phase;
    g->cur_stage = 0;
  } else {
    int s = slot - nl * L_NLAYER_SLOTS;
    g->cur_role = TS_ROLE_PP;
    g->cur_phase = stage_slot_phase[s % L_NSTAGE_SLOTS];
    g->cur_stage = s / L_NSTAGE_SLOTS + 1;
  }
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

/* The op's tag (format 2) from what the generator knows: the layer of a layer-slot label, the
 * phase from the category, the role from the kind, category and stream. */
static void tag_op(gen *g, ts_op *o)
{
  if (o->t_layer == 0 && g->cur_layer >= 0)
    o->t_layer = g->cur_layer + 1;
  if (g->cur_lo >= 0) {
    o->t_layer = g->cur_lo + 1;
    o->t_layer_last = g->cur_hi + 1;
  }
  if (o->t_role == TS_ROLE_NONE && g->cur_role != TS_ROLE_NONE)
    o->t_role = g->cur_role;
  if (o->t_phase == TS_PHASE_NONE && g->cur_phase != TS_PHASE_NONE)
    o->t_phase = g->cur_phase;
  if (o->t_stage == 0)
    o->t_stage = g->cur_stage;
  if (o->t_micro == 0 && g->cur_mb >= 0)
    o->t_micro = g->cur_mb + 1;
  if (o->t_phase == TS_PHASE_NONE)
    o->t_phase = o->cat == TS_CAT_FWD         ? TS_PHASE_FWD
                 : o->cat == TS_CAT_BWD       ? TS_PHASE_BWD
                 : o->cat == TS_CAT_OPTIMIZER ? TS_PHASE_OPTIMIZER
                 : o->cat == TS_CAT_COMM_DP   ? TS_PHASE_SYNC
                                              : TS_PHASE_NONE;
  if (o->t_role != TS_ROLE_NONE)
    return;
  switch (o->kind) {
  case TS_OP_COMPUTE:
    o->t_role = o->cat == TS_CAT_OPTIMIZER         ? TS_ROLE_OPTIMIZER
                : o->flops > 0 || o->mem_bytes > 0 ? TS_ROLE_COMPUTE
                                                   : TS_ROLE_MARKER;
    break;
  case TS_OP_COLL:
    o->t_role = o->cat == TS_CAT_COMM_TP      ? TS_ROLE_TP
                : o->cat == TS_CAT_COMM_OTHER ? TS_ROLE_EP
                : o->cat == TS_CAT_COMM_PP    ? TS_ROLE_PP
                : o->stream == S_DP           ? TS_ROLE_GRAD
                                              : TS_ROLE_PARAM_GATHER;
    break;
  case TS_OP_SEND:
  case TS_OP_RECV:
    o->t_role = TS_ROLE_PP;
    break;
  case TS_OP_WAIT:
    o->t_role = TS_ROLE_MARKER;
    break;
  default:
    break;
  }
}

static void contend(gen *g, const ts_op *coll);

/* Appends the caller's op with this label and the generator's tag, set in the caller's op
 * itself: each caller builds its op for one emit and discards it. Not copied (issue 15,
 * twentieth pass: copying a just-written 120-byte ts_op, twice on the way from emit_compute,
 * stalled on the caller's stores, 4-5% of the every-split sweep). */
/* The collectives of one process group run one at a time on a GPU, in the order they are
 * issued, whatever streams issue them. ZeRO-3's frameworks issue a layer's parameter all-gather
 * and a bucket's gradient reduce-scatter from two streams but on the same group: FSDP2's
 * FSDPParamGroup takes both from mesh_info.shard_process_group (_all_gather_process_group,
 * _reduce_scatter_process_group), FSDP1's FlatParamHandle both from its process_group,
 * DeepSpeed's stage 3 both from the data-parallel group. ProcessGroupNCCL keeps one NCCL
 * communicator per group and device (getNCCLComm, keyed by the device), and NCCL makes each
 * launch on a communicator wait for the one before it, whatever stream it is launched on
 * (enqueue.cc, ncclLaunchPrepare: the launch stream waits on the communicator's deviceStream,
 * which then waits on the launch). So a gather prefetched during the backward queues behind
 * the reduce-scatter issued before it, and the reverse, instead of sharing the links with it.
 * Returns the program's last collective on op o's group when o must wait for it (-1 when
 * not: another group, the first, or one on o's own stream, which waits for it anyway). */
static int serial_dep(gen *g, const ts_op *o, int *slot)
{
  *slot = -1;
  if (o->kind != TS_OP_COLL)
    return -1;
  for (int k = 0; k < 2; k++)
    if (g->ser_group[k] >= 0 && o->group == g->ser_group[k]) {
      *slot = k;
      int prev = g->ser_last[k];
      if (prev >= 0 && ts_program_op_stream(&g->tr->programs[g->prog], prev) != o->stream)
        return prev;
      return -1;
    }
  return -1;
}

static int emit(gen *g, ts_op *o, int label, const int *deps, int ndeps)
{
  o->label = label;
  tag_op(g, o);
  g->cur_layer = g->cur_lo = g->cur_hi = -1;
  g->cur_role = g->cur_phase = g->cur_stage = 0;
  int slot, prev = serial_dep(g, o, &slot), id;
  if (prev >= 0) {
    int buf[16], *more = ndeps < 16 ? buf : g_new(int, ndeps + 1);
    for (int k = 0; k < ndeps; k++)
      more[k] = deps[k];
    more[ndeps] = prev;
    id = ts_trace_append(g->tr, g->prog, o, more, ndeps + 1);
    if (more != buf)
      g_free(more);
  } else {
    id = ts_trace_append(g->tr, g->prog, o, deps, ndeps);
  }
  if (slot >= 0)
    g->ser_last[slot] = id;
  if (o->kind == TS_OP_COLL && o->stream != S_COMPUTE && g->contend_on)
    contend(g, o);
  return id;
}

static int text_label(gen *g, const char *text)
{
  g->cur_layer = g->cur_lo = g->cur_hi = -1;
  g->cur_role = g->cur_phase = g->cur_stage = 0;
  return ts_trace_label(g->tr, text);
}

/* A text label whose op has this role. */
static int text_label_role(gen *g, const char *text, ts_role role)
{
  int l = text_label(g, text);
  g->cur_role = role;
  return l;
}

/* A gradient bucket's label: layers a and b (either order) in the op's tag. */
static int bucket_label(gen *g, int a, int b)
{
  int l = text_label(g, g->label);
  g->cur_lo = MIN(a, b);
  g->cur_hi = MAX(a, b);
  g->cur_role = TS_ROLE_GRAD;
  return l;
}

/* Kinds of bucket label whose text depends on the bucket's layers alone (see flush). */
enum { BL_PS_PUSH, BL_GRAD, BL_REPLICAS, BL_TP_FIRST };

/* The label bucket_label would give, looked up by (kind, a, b) before it is formatted: returns
 * it with the op tag set, or -1 when it is not known yet (format g->label, then call
 * bucket_label_keep). */
static int bucket_label_known(gen *g, int kind, int a, int b)
{
  guint64 key = (guint64)kind << 56 | (guint64)(guint)a << 28 | (guint64)(guint)b;
  gpointer v = g_hash_table_lookup(g->bucket_labels, &key);
  if (v == NULL)
    return -1;
  g->cur_layer = -1;
  g->cur_phase = g->cur_stage = 0;
  g->cur_lo = MIN(a, b);
  g->cur_hi = MAX(a, b);
  g->cur_role = TS_ROLE_GRAD;
  return GPOINTER_TO_INT(v) - 1;
}

/* bucket_label of the text in g->label, remembered under (kind, a, b). */
static int bucket_label_keep(gen *g, int kind, int a, int b)
{
  int l = bucket_label(g, a, b);
  guint64 *key = g_new(guint64, 1);
  *key = (guint64)kind << 56 | (guint64)(guint)a << 28 | (guint64)(guint)b;
  g_hash_table_insert(g->bucket_labels, key, GINT_TO_POINTER(l + 1));
  return l;
}

/* An op on the compute stream; it also waits for everything pending. */
static int emit_main(gen *g, ts_op *op, int label)
{
  op->stream = S_COMPUTE; /* the caller's op, as emit's */
  int id = emit(g, op, label, (const int *)g->pend->data, (int)g->pend->len);
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
  op.shape = shape; /* ts_trace_append interns a copy */
  ts_op_shape synced;
  /* The first op with launches after a synchronisation point (load=sync) carries it: its
   * host waits for the device before launching it (ts_cost_op_syncs). */
  if (g->sync_next && shape != NULL) {
    synced = *shape;
    synced.host_sync = 1.0;
    op.shape = &synced;
    g->sync_next = FALSE;
  }
  /* launch=blocking (CUDA_LAUNCH_BLOCKING=1): every op with launches waits for the device
   * first and for each of its kernels (ts_cost_issue). */
  if (g->p->launch_blocking && op.shape != NULL) {
    if (op.shape != &synced)
      synced = *op.shape;
    synced.launch_blocking = 1.0;
    op.shape = &synced;
  }
  return emit_main(g, &op, label);
}

/* The shape of layer i's op in a pass (ts_plan_layer_shape) for this micro-batch. */
static const ts_op_shape *layer_shape(gen *g, int i, ts_pass pass, ts_op_shape *s)
{
  ts_plan_layer_shape(g->p, i, g->mb, pass, s);
  return s;
}

/* The same shape as the trace's interned copy (made once per layer and pass): for ops that use
 * it unchanged. */
static const ts_op_shape *layer_shape_interned(gen *g, int i, ts_pass pass)
{
  int k = i * N_PASSES + (int)pass;
  if (!g->shape_done[k]) {
    ts_op_shape s;
    ts_plan_layer_shape(g->p, i, g->mb, pass, &s);
    g->shape_of[k] = ts_trace_intern_shape(g->tr, &s);
    g->shape_done[k] = TRUE;
  }
  return g->shape_of[k];
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

/* The copy PyTorch makes around sequence-parallel collective c of layer i
 * (ts_plan_sp_copy_bytes), a memory-bound kernel on the compute stream; -1 when none. */
static int emit_sp_copy(gen *g, const ts_tp_coll *c, int i, int slot, const char *when)
{
  double bytes = ts_plan_sp_copy_bytes(g->p, c, g->mb);
  if (!(bytes > 0))
    return -1;
  ts_op_shape s = {.oclass = TS_OPC_MEMORY, .kernels = 1, .prec = TS_PRECISION_BF16};
  return emit_compute(
      g, slot == L_BWD_SP_COPY ? TS_CAT_BWD : TS_CAT_FWD, 0.0, bytes, &s,
      lbl(g, layer_slot(g, i, slot), "%s %s sequence-dim copy", g->p->model->layers[i].name, when));
}

static int sp_copy_slot(int slot)
{
  return slot == L_FWD_PRE || slot == L_FWD_POST ? L_SP_COPY
         : slot == L_RC_PRE || slot == L_RC_POST ? L_RC_SP_COPY
                                                 : L_BWD_SP_COPY;
}

/* A tensor-parallel collective on the compute stream (the next layer needs its result). */
static void emit_tp(gen *g, const ts_tp_coll *c, int i, int slot, const char *when)
{
  if (c->kind == TS_NO_COLL || c->bytes <= 0 || g->p->degree[TS_AX_TP] <= 1)
    return;
  /* A reduce-scatter's copy comes before it, an all-gather's after it. */
  if (c->kind == TS_COLL_REDUCESCATTER)
    emit_sp_copy(g, c, i, sp_copy_slot(slot), when);
  ts_op op = coll_op(g, (ts_coll_kind)c->kind, g->g_tp, c->bytes * g->mb, TS_CAT_COMM_TP, 0);
  emit_main(g, &op,
            lbl(g, layer_slot(g, i, slot), "%s %s %s%s", g->p->model->layers[i].name, when,
                coll_word(c->kind), c->redistribution ? " (redistribution)" : ""));
  if (c->kind == TS_COLL_ALLGATHER)
    emit_sp_copy(g, c, i, sp_copy_slot(slot), when);
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

/* Off-chip work (format 2): bytes over a named resource (host link, NVMe, a server port),
 * timed by the backend from the topology's bandwidth, or a fixed duration (host CPU work).
 * Neither pays the chip's kernel-launch floor, which format 1's compute-like stand-ins did. */
static int emit_xfer(gen *g, int stream, ts_op_cat cat, ts_resource res, ts_role role, double bytes,
                     double bw_Bps, double latency_s, int label, const int *deps, int ndeps)
{
  ts_op op = {.kind = TS_OP_XFER, .cat = cat, .stream = stream};
  op.resource = res;
  op.bytes = bytes;
  op.bw_Bps = bw_Bps;
  op.seconds = latency_s;
  op.t_role = role;
  return emit(g, &op, label, deps, ndeps);
}

static int emit_delay(gen *g, int stream, ts_op_cat cat, ts_resource res, ts_role role,
                      double seconds, int label, const int *deps, int ndeps)
{
  ts_op op = {.kind = TS_OP_DELAY, .cat = cat, .stream = stream};
  op.resource = res;
  op.seconds = seconds;
  op.t_role = role;
  return emit(g, &op, label, deps, ndeps);
}

/* A parameter-server push or pull: the busiest port's bytes at the port's bandwidth. */
static int emit_ps(gen *g, ts_op_cat cat, ts_role role, double bytes, int label, const int *deps,
                   int ndeps)
{
  double wire, bw, lat;
  ts_plan_ps_xfer(g->p, bytes, &wire, &bw, &lat);
  return emit_xfer(g, S_PS, cat, TS_RES_SERVER, role, wire, bw, lat, label, deps, ndeps);
}

/* Bytes over the host link, one direction (ZeRO-Offload, Ren et al. 2021, section 4). */
static int host_link(gen *g, double bytes, const char *what, const int *deps, int ndeps)
{
  char b[48];
  g_snprintf(g->label, sizeof g->label, "host link: %s (%s)", what,
             ts_fmt_bytes(b, sizeof b, bytes));
  return emit_xfer(g, S_HOST, TS_CAT_OTHER, TS_RES_HOST_LINK, TS_ROLE_OFFLOAD, bytes, 0, 0,
                   text_label(g, g->label), deps, ndeps);
}

static int nvme(gen *g, double bytes, const char *what, const int *deps, int ndeps)
{
  char b[48];
  g_snprintf(g->label, sizeof g->label, "nvme: %s (%s)", what, ts_fmt_bytes(b, sizeof b, bytes));
  return emit_xfer(g, S_HOST, TS_CAT_OTHER, TS_RES_NVME, TS_ROLE_OFFLOAD, bytes, 0, 0,
                   text_label(g, g->label), deps, ndeps);
}

/* What a gradient or parameter collective over a TPU's data-centre network costs the chip besides
 * the transfer (ts_coll_chip_stall_s: the send, send-done, recv and recv-done ops that hand each
 * transfer to the host run on the TensorCore), as a fixed duration on the compute stream where
 * the collective is issued: the TensorCore executes them between the pass's ops, so the pass
 * waits for them while the data itself moves in the background. Nothing on other networks. */
static void chip_stall(gen *g, int group, ts_coll_kind kind)
{
  const ts_group *gr = g_ptr_array_index(g->tr->groups, group);
  double s = ts_coll_chip_stall_s(g->p->topo, kind, &gr->shape);
  if (!(s > 0))
    return;
  g_snprintf(g->label, sizeof g->label,
             "%s over the data-centre network: TensorCore in its transfers' send/recv ops",
             coll_word(kind));
  ts_role role = kind == TS_COLL_ALLGATHER ? TS_ROLE_PARAM_GATHER : TS_ROLE_GRAD;
  emit_delay(g, S_COMPUTE, TS_CAT_COMM_DP, TS_RES_NONE, role, s, text_label_role(g, g->label, role),
             NULL, 0);
}

/* ---- comm/compute contention ------------------------------------------------------------ */

typedef struct {
  int kind, group;
  double bytes;
} contend_key;

static guint contend_hash(gconstpointer k)
{
  const contend_key *c = k;
  guint64 b;
  memcpy(&b, &c->bytes, sizeof b);
  return (guint)(b ^ (b >> 32)) * 31u + (guint)c->kind * 131u + (guint)c->group;
}

static gboolean contend_equal(gconstpointer a, gconstpointer b)
{
  const contend_key *x = a, *y = b;
  return x->kind == y->kind && x->group == y->group && x->bytes == y->bytes;
}

/* The compute time collective coll takes from the compute it overlaps, seconds (memo: by kind,
 * group and bytes, for one placement of the trace's groups). A collective issued beside the
 * compute stream (gradient buckets, ZeRO / FSDP gathers and scatters, the tensor-parallel
 * collectives that overlap a weight gradient) runs an NCCL kernel with one thread block per
 * channel, and NCCL's blocks do not share an SM with a compute kernel (NCCL maintainers, github
 * NVIDIA/nccl issue 689: "NCCL CTAs won't share an SM with compute kernels"; 16 SMs on a DGX
 * with 8 NICs). The compute it overlaps runs on the other compute_units - collective_sms SMs, so
 * while the collective lasts (D, its closed-form time, ts_coll_time) the compute stream does
 * (1 - collective_sms / compute_units) of its work: it loses D x collective_sms /
 * compute_units. */
static double contend_seconds(const ts_plan *p, const ts_trace *tr, GHashTable *memo,
                              const ts_op *coll)
{
  const ts_chip *c = &p->topo->chip;
  contend_key k = {(int)coll->coll, coll->group, coll->bytes};
  double *hit = g_hash_table_lookup(memo, &k);
  double d;
  if (hit != NULL)
    d = *hit;
  else {
    const ts_group *gr = g_ptr_array_index(tr->groups, coll->group);
    /* Only collectives that leave the node (a piece along a dimension after the first: the
     * network of a GPU cluster, whose NICs set NCCL's channel count); the SMs of collectives
     * within a node (NVLink) are not charged, for want of a published count. */
    gboolean net = FALSE;
    for (int q = 0; q < gr->shape.npieces; q++)
      net = net || (gr->shape.p[q].dim > 0 && gr->shape.p[q].size > 1);
    d = net ? ts_coll_time(p->topo, coll->coll, coll->algo, &gr->shape, coll->bytes, NULL, NULL)
            : 0.0;
    double *v = g_new(double, 1);
    *v = d;
    g_hash_table_insert(memo, g_memdup2(&k, sizeof k), v);
  }
  double s = d * c->collective_sms / c->compute_units;
  return s > 0 ? s : 0.0;
}

/* Charges contend_seconds of the collective just emitted as a fixed duration on the compute
 * stream where it is issued (as chip_stall does a TPU's transfer ops), as the op right after
 * it in the program (ts_plan_trace_replace re-costs it there for another placement). When the
 * compute stream is waiting for the collective instead, the charge runs inside the wait and
 * costs nothing, as an idle SM costs nothing. Memory-bandwidth contention is not modelled. */
static void contend(gen *g, const ts_op *coll)
{
  const ts_chip *c = &g->p->topo->chip;
  double s = contend_seconds(g->p, g->tr, g->contend_s, coll);
  if (g->contend_label < 0) {
    g_snprintf(g->label, sizeof g->label,
               "contention: the %d SMs of an overlapping collective taken from compute",
               c->collective_sms);
    g->contend_label = ts_trace_label(g->tr, g->label);
  }
  g->cur_layer = g->cur_lo = g->cur_hi = -1;
  g->cur_role = g->cur_phase = g->cur_stage = 0;
  emit_delay(g, S_COMPUTE, TS_CAT_OTHER, TS_RES_NONE, TS_ROLE_CONTENTION, s, g->contend_label, NULL,
             0);
}

/* Whether plan p's traces carry contention charges: the chip holds SMs for collectives and the
 * array has more than one node (a dimension after the first), whatever the placement. */
static gboolean contend_applies(const ts_plan *p)
{
  const ts_topo *t = p->topo;
  gboolean nodes = FALSE;
  for (int d = 1; d < t->ndims; d++)
    nodes = nodes || t->dims[d].size > 1;
  return nodes && t->chip.collective_sms > 0 && t->chip.compute_units > 0;
}

/* Each contention charge of the trace (contend: the op after its collective) for the groups'
 * current shapes. */
static void recontend(const ts_plan *p, ts_trace *tr)
{
  if (!contend_applies(p))
    return;
  GHashTable *memo = g_hash_table_new_full(contend_hash, contend_equal, g_free, g_free);
  for (int q = 0; q < tr->nprograms; q++) {
    ts_program *prog = &tr->programs[q];
    for (int i = 1; i < prog->nops; i++) {
      if (ts_program_op_kind(prog, i) != TS_OP_DELAY)
        continue;
      ts_op o = ts_program_op(prog, i);
      if (o.t_role != TS_ROLE_CONTENTION)
        continue;
      ts_op coll = ts_program_op(prog, i - 1);
      g_assert(coll.kind == TS_OP_COLL);
      o.seconds = contend_seconds(p, tr, memo, &coll);
      ts_program_set_op(tr, q, i, &o);
    }
  }
  g_hash_table_unref(memo);
}

/* ---- ZeRO-3 parameter gathers ------------------------------------------------------- */

static void zero_gather(gen *g, int i)
{
  const ts_layer *l = &g->p->model->layers[i];
  /* In fp8 for a Float8 GEMM layer with fp8-gather (ts_plan_gather_bytes_per_param). */
  double bytes = g->layer_params[i] * ts_plan_gather_bytes_per_param(g->p, i);
  gboolean expert = g->p->exec[i].expert;
  ts_op op =
      coll_op(g, TS_COLL_ALLGATHER, expert ? g->g_edp : g->g_dp, bytes, TS_CAT_COMM_DP, S_ZERO);
  int dep = g->last;
  if (g->p->offload == TS_OFFLOAD_NVME) {
    /* ZeRO-Infinity (Rajbhandari et al. 2021, section 5.1): the parameter shard comes from
     * NVMe through host memory before the gather. */
    double shard =
        bytes / (expert ? ts_plan_shard_ranks(g->p) / g->p->ep : ts_plan_shard_ranks(g->p));
    int r = nvme(g, shard, "read parameter shard", &dep, dep >= 0 ? 1 : 0);
    dep = host_link(g, shard, "parameter shard to device", &r, 1);
  }
  g->ag_op[i] = emit(g, &op, lbl(g, layer_slot(g, i, L_PARAM_AG), "%s param all-gather", l->name),
                     &dep, dep >= 0 ? 1 : 0);
  chip_stall(g, op.group, TS_COLL_ALLGATHER);
  if (g->keep_gathered)
    g->resident[i] = TRUE;
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

/* The unit ZeRO-3 gathers and prefetches: a layer's block (a transformer layer, a residual
 * block, a cell), or the layer alone when it belongs to none (embedding, final norm, logits). */
static int zero_unit(const gen *g, int i)
{
  int b = g->p->model->layers[i].block;
  return b >= 0 ? b : -2 - i;
}

/* Layer i is about to compute: its parameters must be gathered, and the next unit's gathers
 * start now, one unit ahead (the previous compute op is their dependency): FSDP gathers a
 * wrapped block at a time and prefetches the next block during the current one (PyTorch
 * FSDP's forward/backward prefetch, FSDP2's per-block fully_shard); XLA's latency-hiding
 * scheduler starts a scanned layer's all-gathers during the layer before (MaxText). */
static void zero_need(gen *g, int i)
{
  if (g->p->zero < 3 || g->p->model->layers[i].params <= 0)
    return;
  /* Still whole from this step's first forward (fsdp2 under pp): nothing to gather. */
  gboolean whole = g->keep_gathered && g->resident[i];
  while (!whole && g->ag_op[i] < 0 && g->zpos < g->zorder->len)
    zero_gather(g, g_array_index(g->zorder, int, g->zpos++));
  /* The rest of layer i's unit and the whole next one, unless the next is already under way
   * (the last gather started belongs to another unit than layer i's). */
  int cur = zero_unit(g, i), next = cur;
  if (g->zpos > 0)
    next = zero_unit(g, g_array_index(g->zorder, int, g->zpos - 1));
  gboolean have_next = next != cur;
  while (g->zpos < g->zorder->len) {
    int j = g_array_index(g->zorder, int, g->zpos), u = zero_unit(g, j);
    if (u != cur && have_next && u != next)
      break;
    if (u != cur && !have_next) {
      next = u;
      have_next = TRUE;
    }
    zero_gather(g, j);
    g->zpos++;
  }
  pend(g, g->ag_op[i]);
}

/* ---- context parallelism: ring attention ------------------------------------------------ */

static int tp_overlapped(gen *g, int i, const ts_tp_coll *pre, const ts_tp_coll *post, double flops,
                         double mem, const ts_op_shape *base, gboolean recompute);

/* tp-overlap chunks a forward's input all-gather and its output reduce-scatter or all-reduce
 * beside its GEMMs (ts_plan_fwd_chunked; tp_overlapped, which cp_ring_fwd gives one side at a
 * time). */
static gboolean chunks_gather(const ts_tp_coll *pre)
{
  return pre->kind == TS_COLL_ALLGATHER && pre->bytes > 0;
}

static gboolean chunks_reduce(const ts_tp_coll *post)
{
  return (post->kind == TS_COLL_REDUCESCATTER || post->kind == TS_COLL_ALLREDUCE) &&
         post->bytes > 0;
}

/* The output projection's share of an attention layer's projection FLOPs (and parameters):
 * I x h of the QKV (h x (I + 2J), grouped-query) and output (I x h) weights; what the ring
 * runs between is the QKV projection before it and the output projection after it. */
static double attn_out_share(const ts_layer *l)
{
  double I = (double)(l->inner > 0 ? l->inner : l->in_features), h = (double)l->in_features;
  return l->params > 0 ? MIN(1.0, I * h / l->params) : 0.5;
}

/* A point-to-point op to the rank `step` places along the cp ring (wrapping round). */
static int cp_p2p(gen *g, ts_op_kind kind, int stream, int step, double bytes, int t, int label,
                  const int *deps, int ndeps)
{
  const ts_plan *p = g->p;
  int cp = p->degree[TS_AX_CP];
  ts_op op = {.kind = kind, .cat = TS_CAT_COMM_OTHER, .stream = stream};
  op.axis = g->ax_cp;
  op.offset = ((g->cprank + step) % cp + cp) % cp - g->cprank;
  op.bytes = bytes;
  op.tag = t;
  return emit(g, &op, label, deps, ndeps);
}

/* Tags of the ring: one per (layer, pass, K/V or gradient); sends and receives between two
 * ranks match in order (ts_replay), so steps and micro-batches share them. */
static int cp_tag(const gen *g, int i, int which)
{
  return 2 * g->p->nstages * (int)g->p->n_micro + 2 + 3 * i + which;
}

/* cp-ring=torch: bytes per micro-batch of this rank's queries (as wide as the K/V it sends,
 * which TorchTitan repeats to the query heads): the unit of the ring's element-wise work. */
static double cp_q_bytes(const gen *g, const ts_layer *l, const ts_layer_exec *e)
{
  double T = (double)l->tokens, S = l->kv_tokens > 0 ? (double)l->kv_tokens : T;
  return 0.5 * e->cp_kv_bytes * g->mb * T / S;
}

/* cp-ring=torch: whether torch.compile traced the ring into the layer's graph (kernels=fused,
 * TorchTitan's compiled blocks) rather than running it eagerly (kernels=eager). A functional
 * collective that is traced gets its wait_tensor right after it (torch/distributed/
 * _functional_collectives.py, _maybe_wrap_tensor: "wait_tensor() op is immediately called"
 * when tracing; eagerly an AsyncCollectiveTensor waits at the first use), and Inductor leaves
 * it there: its compute/communication reordering passes run only with
 * reorder_for_compute_comm_overlap, False by default (torch/_inductor/config.py), and
 * TorchTitan 9dec370 does not set it. So a compiled ring waits for each collective before the
 * next op: the K/V all-gather before the first block, each dK/dV hop before the next block. */
static gboolean cp_ring_traced(const ts_plan *p)
{
  return p->kernels == TS_KERNELS_FUSED;
}

/* PyTorch's ring attention forward (torch.distributed.tensor.experimental.context_parallel, as
 * TorchTitan 9dec370 runs it with its default rotation, "allgather"; docs/splits.md, cp-ring=):
 * the rank's K/V go into one all-gather over the cp ranks, issued after the projections.
 * Eagerly it is waited for before the second block, so the first block (the rank's own,
 * causal) hides it; compiled, before the first (cp_ring_traced). Each later block's output is
 * merged into an fp32 running output with the log-sum-exp rescaling (torch.compile fuses it: the
 * block's bf16 output read, the fp32 sum read and written, 5 query-sized bf16 units); the first
 * carries the copy of K and V into the all-gather's buffer (4 units). */
static void cp_ring_fwd_torch(gen *g, int i, int prev, const ts_op_shape *blk, gboolean recompute)
{
  const ts_plan *p = g->p;
  const ts_layer *l = &p->model->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  int cp = p->degree[TS_AX_CP];
  double core = e->core_flops * g->mb / e->cdiv, kv = e->cp_kv_bytes * g->mb;
  double q = cp_q_bytes(g, l, e);
  ts_op op = coll_op(g, TS_COLL_ALLGATHER, g->g_cp, kv * cp, TS_CAT_COMM_OTHER, S_CP_SEND);
  int a = emit(g, &op,
               recompute ? lbl(g, layer_slot(g, i, L_CP_RC_GATHER),
                               "%s recompute cp all-gather K/V", l->name)
                         : lbl(g, layer_slot(g, i, L_CP_GATHER), "%s cp all-gather K/V", l->name),
               &prev, prev >= 0 ? 1 : 0);
  gboolean traced = cp_ring_traced(p);
  for (int j = 0; j < cp; j++) {
    ts_op_shape b = *blk;
    b.elem_bytes = (j == 0 ? 4.0 : 5.0) * q;
    if (j == (traced ? 0 : 1))
      pend(g, a);
    emit_compute(
        g, TS_CAT_FWD, core / cp, 0.0, &b,
        recompute
            ? lbl(g, layer_slot(g, i, L_CP_RC_CORE), "%s recompute ring attention block", l->name)
            : lbl(g, layer_slot(g, i, L_CP_CORE), "%s ring attention block", l->name));
  }
}

/* Ring attention forward (Liu et al. 2023, "Ring Attention", section 3; Megatron-Core /
 * Transformer Engine's context parallelism with P2P exchange): the projections run on the
 * rank's 1/cp of the sequence, then cp steps each compute attention of the local queries
 * against one K/V block while the next block comes from the previous rank and the current
 * one goes to the next (cp - 1 hops). With the zig-zag split every step has the same work. */
static void cp_ring_fwd(gen *g, int i, double flops, double mem, int label, gboolean recompute,
                        gboolean ovl)
{
  const ts_plan *p = g->p;
  const ts_layer *l = &p->model->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  int cp = p->degree[TS_AX_CP];
  double core = e->core_flops * g->mb / e->cdiv, kv = e->cp_kv_bytes * g->mb;
  /* The projections keep the layer's GEMM shape; each ring step is one fused attention block
   * (a 1/cp share of the core on the same queries). */
  ts_op_shape proj, blk;
  layer_shape(g, i, TS_PASS_FWD, &proj);
  blk = proj;
  proj.attn_flops = 0, proj.scores_bytes = 0, proj.aq = proj.akv = proj.ad = proj.abatch = 0;
  blk.m = blk.n = blk.k = blk.batch = 0, blk.akv /= cp, blk.attn_flops /= cp,
  blk.scores_bytes /= cp, blk.kernels = 1, blk.elem_bytes = 0, blk.epilogue_bytes = 0;
  /* With tp-overlap (Transformer Engine's userbuffers run beside the cp ring in Megatron-Core):
   * the QKV projection's GEMM in chunks with its input all-gather's chunks before the ring, the
   * output projection's in chunks with its reduce-scatter's after it (tp_overlapped), instead
   * of both collectives whole on the compute stream. The layer's kernels are launched half by
   * each part. */
  static const ts_tp_coll none = {.kind = TS_NO_COLL};
  double out = attn_out_share(l);
  ts_op_shape qkv_s = proj, out_s = proj;
  qkv_s.kernels = (proj.kernels + 1) / 2, out_s.kernels = MAX(1, proj.kernels / 2);
  int prev = ovl ? tp_overlapped(g, i, &e->fwd_pre, &none, (flops - core) * (1.0 - out),
                                 mem * (1.0 - out), &qkv_s, recompute)
                 : emit_compute(g, TS_CAT_FWD, flops - core, mem, &proj, label);
  if (p->cp_ring == TS_CP_RING_TORCH) {
    cp_ring_fwd_torch(g, i, prev, &blk, recompute);
    if (ovl)
      tp_overlapped(g, i, &none, &e->fwd_post, (flops - core) * out, mem * out, &out_s, recompute);
    return;
  }
  /* Labels are looked up (cached) right before each op: lbl() sets the op tag. */
  /* A recomputed forward (recompute=full, stage) goes round the ring again, tagged so. */
#define CORE_LBL                                                                                   \
  (recompute                                                                                       \
       ? lbl(g, layer_slot(g, i, L_CP_RC_CORE), "%s recompute ring attention block", l->name)      \
       : lbl(g, layer_slot(g, i, L_CP_CORE), "%s ring attention block", l->name))
#define SEND_LBL                                                                                   \
  (recompute ? lbl(g, layer_slot(g, i, L_CP_RC_SEND), "%s recompute cp send K/V", l->name)         \
             : lbl(g, layer_slot(g, i, L_CP_SEND), "%s cp send K/V", l->name))
#define RECV_LBL                                                                                   \
  (recompute ? lbl(g, layer_slot(g, i, L_CP_RC_RECV), "%s recompute cp recv K/V", l->name)         \
             : lbl(g, layer_slot(g, i, L_CP_RECV), "%s cp recv K/V", l->name))
  for (int j = 0; j < cp; j++) {
    int r = -1;
    if (j + 1 < cp) {
      cp_p2p(g, TS_OP_SEND, S_CP_SEND, 1, kv, cp_tag(g, i, 0), SEND_LBL, &prev, 1);
      r = cp_p2p(g, TS_OP_RECV, S_CP_RECV, -1, kv, cp_tag(g, i, 0), RECV_LBL, NULL, 0);
    }
    emit_compute(g, TS_CAT_FWD, core / cp, 0.0, &blk, CORE_LBL);
    if (r >= 0) {
      pend(g, r);
      prev = r;
    }
  }
  if (ovl)
    tp_overlapped(g, i, &none, &e->fwd_post, (flops - core) * out, mem * out, &out_s, recompute);
#undef CORE_LBL
#undef SEND_LBL
#undef RECV_LBL
}

/* The shape of a cp layer's projections in a pass: the layer's GEMM shape without its
 * attention core, which runs as the ring's blocks (cp_ring_fwd, cp_ring_bwd). Left in, the
 * projections' FLOPs would be costed as core FLOPs (ts_cost_device charges up to attn_flops
 * of an op at the attention kernel's rate). */
static const ts_op_shape *cp_proj_shape(gen *g, int i, ts_pass pass, ts_op_shape *s)
{
  layer_shape(g, i, pass, s);
  s->attn_flops = 0, s->scores_bytes = 0, s->aq = s->akv = s->ad = s->abatch = 0;
  return s;
}

/* FLOPs per sample of the attention core's backward (dQ, dK from the scores; dP, dV from the
 * context: two GEMMs each, ts_model.c) and the softmax: 2 x 4TSI + aTS. */
static double cp_core_bwd_flops(const ts_layer *l, const ts_layer_exec *e)
{
  double T = (double)l->tokens, S = l->kv_tokens > 0 ? (double)l->kv_tokens : T;
  return 2.0 * e->core_flops - (double)l->heads * T * S;
}

/* PyTorch's ring attention backward (cp-ring=torch): the K/V are all-gathered again (eagerly
 * hidden by the first block's backward, compiled waited for before it); after each block's
 * backward the rank adds the block's dK and dV to the partial fp32 sums that came from the
 * previous rank and sends the sums on (fp32: twice the K/V bytes), and adds the block's dQ to
 * its own fp32 sum; after cp steps the sums are back with their owners. Eagerly the rank
 * waits for the previous rank's sums only when it adds to them, after the next block's
 * backward; compiled, the hop is waited for as soon as it is sent, before the next block
 * (cp_ring_traced). The accumulation (fused: 15 query-sized bf16 units a step, 9 on the
 * first, which has nothing to read) is an op of its own; the first also copies K and V into
 * the all-gather's buffer (4), the last casts the three sums back to bf16 (9). Returns the
 * last gradient receive. */
static int cp_ring_bwd_torch(gen *g, int i, const ts_op_shape *blk)
{
  const ts_plan *p = g->p;
  const ts_layer *l = &p->model->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  int cp = p->degree[TS_AX_CP];
  double core = cp_core_bwd_flops(l, e) * g->mb / e->cdiv, kv = e->cp_kv_bytes * g->mb;
  double q = cp_q_bytes(g, l, e);
  int prev = g->last, drecv = -1;
  ts_op op = coll_op(g, TS_COLL_ALLGATHER, g->g_cp, kv * cp, TS_CAT_COMM_OTHER, S_CP_SEND);
  int a = emit(g, &op, lbl(g, layer_slot(g, i, L_CP_BGATHER), "%s cp bwd all-gather K/V", l->name),
               &prev, prev >= 0 ? 1 : 0);
  gboolean traced = cp_ring_traced(p);
  for (int j = 0; j < cp; j++) {
    if (j == (traced ? 0 : 1))
      pend(g, a);
    if (traced)
      pend(g, drecv);
    emit_compute(g, TS_CAT_BWD, core / cp, 0.0, blk,
                 lbl(g, layer_slot(g, i, L_CP_BCORE), "%s ring attention block bwd", l->name));
    if (!traced)
      pend(g, drecv);
    double acc = (j == 0 ? 9.0 + 4.0 : 15.0) + (j + 1 == cp ? 9.0 : 0.0);
    int c = emit_compute(g, TS_CAT_BWD, 0.0, acc * q, NULL,
                         lbl(g, layer_slot(g, i, L_CP_ACC), "%s cp accumulate dQ/dK/dV", l->name));
    cp_p2p(g, TS_OP_SEND, S_CP_DSEND, 1, 2.0 * kv, cp_tag(g, i, 2),
           lbl(g, layer_slot(g, i, L_CP_DSEND), "%s cp send dK/dV", l->name), &c, 1);
    drecv = cp_p2p(g, TS_OP_RECV, S_CP_DRECV, -1, 2.0 * kv, cp_tag(g, i, 2),
                   lbl(g, layer_slot(g, i, L_CP_DRECV), "%s cp recv dK/dV", l->name), NULL, 0);
  }
  return drecv;
}

/* Ring attention backward: the K/V blocks go round again (cp - 1 hops) and the gradient of each
 * block travels with it, accumulated by every rank its queries meet; after cp steps it is back
 * with its owner (cp hops). Step j's attention backward needs K/V block j only: as Transformer
 * Engine's AttnFuncWithCPAndKVP2P backward does, the rank computes the block's dK/dV on its own
 * and waits for the partial sums from the previous rank right before adding them, after the
 * block, so each partial sum's hop runs beside the next block instead of ahead of it. The add
 * (an element-wise op on the compute stream) holds the stream: the next block waits for it,
 * and the sum it makes is what goes on. Returns the last gradient receive. */
static int cp_ring_bwd(gen *g, int i)
{
  const ts_plan *p = g->p;
  const ts_layer *l = &p->model->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  int cp = p->degree[TS_AX_CP];
  double core = cp_core_bwd_flops(l, e) * g->mb / e->cdiv, kv = e->cp_kv_bytes * g->mb;
  /* One fused attention block's backward per ring step. */
  ts_op_shape blk;
  layer_shape(g, i, TS_PASS_BWD, &blk);
  blk.m = blk.n = blk.k = blk.batch = 0, blk.akv /= cp, blk.attn_flops /= cp,
  blk.scores_bytes /= cp, blk.kernels = 1, blk.elem_bytes = 0, blk.epilogue_bytes = 0;
  if (p->cp_ring == TS_CP_RING_TORCH)
    return cp_ring_bwd_torch(g, i, &blk);
#define CORE_LBL lbl(g, layer_slot(g, i, L_CP_BCORE), "%s ring attention block bwd", l->name)
#define SEND_LBL lbl(g, layer_slot(g, i, L_CP_BSEND), "%s cp bwd send K/V", l->name)
#define RECV_LBL lbl(g, layer_slot(g, i, L_CP_BRECV), "%s cp bwd recv K/V", l->name)
#define DSEND_LBL lbl(g, layer_slot(g, i, L_CP_DSEND), "%s cp send dK/dV", l->name)
#define DRECV_LBL lbl(g, layer_slot(g, i, L_CP_DRECV), "%s cp recv dK/dV", l->name)
  int prev = g->last, drecv = -1;
  for (int j = 0; j < cp; j++) {
    int r = -1;
    if (j + 1 < cp) {
      int d = prev;
      cp_p2p(g, TS_OP_SEND, S_CP_SEND, 1, kv, cp_tag(g, i, 1), SEND_LBL, &d, d >= 0 ? 1 : 0);
      r = cp_p2p(g, TS_OP_RECV, S_CP_RECV, -1, kv, cp_tag(g, i, 1), RECV_LBL, NULL, 0);
    }
    int c = emit_compute(g, TS_CAT_BWD, core / cp, 0.0, &blk, CORE_LBL);
    /* The add: after the block, waiting for the previous rank's partial sum; the sum goes on. */
    int dd[2] = {c, drecv};
    cp_p2p(g, TS_OP_SEND, S_CP_DSEND, 1, kv, cp_tag(g, i, 2), DSEND_LBL, dd, drecv >= 0 ? 2 : 1);
    pend(g, drecv);
    drecv = cp_p2p(g, TS_OP_RECV, S_CP_DRECV, -1, kv, cp_tag(g, i, 2), DRECV_LBL, NULL, 0);
    if (r >= 0) {
      pend(g, r);
      prev = r;
    }
  }
#undef CORE_LBL
#undef SEND_LBL
#undef RECV_LBL
#undef DSEND_LBL
#undef DRECV_LBL
  return drecv;
}

/* ---- tensor-parallel communication overlap -------------------------------------------- */

/* Chunks a tp-overlap layer splits its GEMM and collectives into: one per tensor-parallel rank,
 * as Transformer Engine's ring-exchange userbuffers do (Wang et al. 2022, "Overlap
 * communication with dependent computation via decomposition", section 4). */
static int ovl_chunks(const gen *g)
{
  return g->p->degree[TS_AX_TP];
}

/* The label of a tp-overlap op of layer i, set before each op it labels: emit() clears the
 * tag (layer, role) lbl() sets, so a label formatted once would leave the later chunks
 * untagged. */
static int ovl_lbl(gen *g, int i, int slot, const ts_tp_coll *post, gboolean recompute)
{
  const ts_layer *l = &g->p->model->layers[i];
  const char *what = recompute ? "recompute" : "fwd";
  if (slot == L_OVL_FWD_PRE)
    return lbl(g, layer_slot(g, i, recompute ? L_OVL_RC_PRE : slot), "%s %s all-gather chunk",
               l->name, what);
  if (slot == L_OVL_FWD_POST)
    return lbl(g, layer_slot(g, i, recompute ? L_OVL_RC_POST : slot), "%s %s %s chunk", l->name,
               what, coll_word(post->kind));
  return lbl(g, layer_slot(g, i, recompute ? L_OVL_RC : slot), "%s %s chunk", l->name, what);
}

/* A memory-bound kernel of AsyncTP's symmetric-memory collectives on the compute stream
 * (ts_plan_symm_bytes): the copy of a shard into the symmetric buffer, or the sum of the
 * reduce-scatter's partials. fmt takes the layer's name and the pass. */
static int symm_copy(gen *g, int i, int slot, double bytes, const char *fmt, gboolean recompute)
{
  ts_op_shape s = {.oclass = TS_OPC_MEMORY, .kernels = 1, .prec = TS_PRECISION_BF16};
  char text[96];
  g_snprintf(text, sizeof text, fmt, g->p->model->layers[i].name, recompute ? "recompute" : "fwd");
  if (recompute) /* its own label slot: a recomputation, tagged as one */
    slot = slot == L_SYMM_COPY ? L_RC_SYMM_COPY : L_RC_SYMM_REDUCE;
  return emit_compute(g, TS_CAT_FWD, 0.0, bytes, &s, lbl(g, layer_slot(g, i, slot), "%s", text));
}

/* Does a chunked gather start with the rank's own shard, which no GEMM chunk waits for?
 * Transformer Engine's ring exchange (CommOverlapP2PBase::split_overlap_ag, its default method
 * for qkv_fprop, fc1_fprop, proj_dgrad and fc2_dgrad; Megatron-Core's tp_comm_overlap) runs its
 * first GEMM chunk on the shard the rank holds and receives the next one beside it, so of the n
 * chunks' transfers none precedes the first GEMM: a layer of per-chunk gather time c_a and GEMM
 * time g takes g + (n - 1) max(c_a, g). On GPUs (tp-overlap=te there). XLA's collective matmul
 * does the same (s14; before, tp-overlap=xla exposed the first gather chunk): Wang et al. 2023
 * ("Overlap communication with dependent computation via decomposition", ASPLOS) replace the
 * all-gather and einsum by a loop of partial einsums and CollectivePermutes whose first
 * einsum takes the local shard, and the scaling book's collective matmul (jax-stuff.md,
 * collective_matmul_allgather_lhs_contracting) multiplies the local chunk while the first
 * ppermute runs: nothing is exposed before the first chunk's compute. AsyncTP keeps its own
 * rule (the own shard's copy into symmetric memory and a barrier first). */
static gboolean te_own_chunk(const ts_plan *p)
{
  return (p->tp_overlap_mode == TS_TP_OVERLAP_TE && p->topo->chip.systolic <= 0) ||
         p->tp_overlap_mode == TS_TP_OVERLAP_XLA;
}

/* A layer's forward with its input all-gather and / or output reduce-scatter (all-reduce)
 * decomposed into n chunks on side streams: chunk c + 1 of the gather runs while the GEMM
 * works on chunk c, and chunk c of the reduction runs while the GEMM works on chunk c + 1
 * (Megatron-Core's tp_comm_overlap, Transformer Engine userbuffers). Same bytes and FLOPs as
 * without; only the schedule changes. The host launches the layer's kernels once
 * (TS_KERNELS_LAUNCHED on all chunks but the last, which carries the layer's launches):
 * Transformer Engine issues the chunk GEMMs from one framework call, so the per-op launch cost
 * (kernel_launch_us, fitted on eager PyTorch ops) is not paid n times. On the last chunk the
 * launches end the layer where they end the unsplit one (ts_cost_issue: the later of the device
 * work and the host's launches); on the first they would add the host's lag to the chunks. What
 * stays exposed is the first gather chunk (none with te_own_chunk) and the last reduction chunk;
 * with per-chunk gather time c_a, reduction time c_r and GEMM time g (= G/n) the layer takes
 * c_a + (n - 1) max(c_a, g, c_r) + g + c_r instead of C_a + G + C_r (te: c_a less). */
static int tp_overlapped(gen *g, int i, const ts_tp_coll *pre, const ts_tp_coll *post, double flops,
                         double mem, const ts_op_shape *base, gboolean recompute)
{
  const char *what = recompute ? "recompute" : "fwd";
  int n = ovl_chunks(g);
  gboolean ag = chunks_gather(pre), rs = chunks_reduce(post);
  if (pre->kind != TS_NO_COLL && !ag)
    emit_tp(g, pre, i, recompute ? L_RC_PRE : L_FWD_PRE, what);
  /* Each chunk is the layer's forward on 1/n of its rows, at the whole GEMM's efficiency:
   * Transformer Engine runs the chunk GEMMs on several compute streams (or as one atomic GEMM
   * that signals per chunk), so together they fill the chip as the unsplit GEMM does; a GEMM of
   * m/n rows alone would leave most SMs idle (e.g. 20 output tiles on 132 SMs). So the shape
   * keeps the whole layer's dimensions (its tile efficiency) and the chunk carries 1/n of its
   * FLOPs, attention-core FLOPs, score and memory traffic. */
  ts_op_shape chunk;
  if (base != NULL)
    chunk = *base; /* a part of the layer (cp_ring_fwd) */
  else
    layer_shape(g, i, TS_PASS_FWD, &chunk);
  chunk.attn_flops /= n, chunk.scores_bytes /= n, chunk.elem_bytes /= n, chunk.epilogue_bytes /= n;
  /* PyTorch's AsyncTP (symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter) issues
   * one matmul per chunk, one after the other on the compute stream: each is a GEMM of m/n
   * rows with its own tile and wave quantisation. */
  gboolean symm = g->p->tp_overlap_mode == TS_TP_OVERLAP_ASYNC;
  if (symm)
    chunk.m /= n;
  int kernels = chunk.kernels;
  int prev_ag = -1, last_rs = -1, gemm = -1;
  int start = g->last;
  /* Whatever the compute stream is waiting for, the first gather waits for too. */
  int deps[16], nd = 0;
  for (guint k = 0; k < g->pend->len && nd < 15; k++)
    deps[nd++] = g_array_index(g->pend, int, k);
  if (start >= 0)
    deps[nd++] = start;
  /* AsyncTP's fused all-gather matmul (torch.distributed._symmetric_memory,
   * _pipelined_all_gather_and_consume) first copies the rank's own shard into its symmetric
   * (peer-readable) buffer on the compute stream, then waits at a barrier for every rank's copy
   * (PyTorch does not overlap that copy with the first matmul), then runs the matmul on its own
   * shard while the first peer shard is pulled: its own chunk needs no gather, the n - 1 others
   * are pulled one peer at a time. The trace keeps the own chunk's gather (so every chunk of the
   * collective is there, as the validator executes it) on a stream of its own that no GEMM
   * waits for. */
  if (symm && ag) {
    ts_op own =
        coll_op(g, TS_COLL_ALLGATHER, g->g_tp, pre->bytes * g->mb / n, TS_CAT_COMM_TP, S_SYMM_OWN);
    emit(g, &own, ovl_lbl(g, i, L_OVL_FWD_PRE, post, recompute), deps, nd);
    int mv = symm_copy(g, i, L_SYMM_COPY, 2.0 * pre->bytes * g->mb / n,
                       "%s %s copy into symmetric memory", recompute);
    deps[0] = mv, nd = 1;
  }
  /* Transformer Engine's ring-exchange all-gather (split_overlap_ag_p2p, its default for
   * qkv_fprop and fc1_fprop) runs GEMM chunk 0 on the rank's own shard, already in its
   * userbuffer, while the next shard is received: chunk 0's gather is kept (on the own-chunk
   * stream) but no GEMM waits for it (te_own_chunk). */
  gboolean own0 = ag && te_own_chunk(g->p);
  for (int c = 0; c < n; c++) {
    if (ag && own0 && c == 0) {
      ts_op op = coll_op(g, TS_COLL_ALLGATHER, g->g_tp, pre->bytes * g->mb / n, TS_CAT_COMM_TP,
                         S_SYMM_OWN);
      emit(g, &op, ovl_lbl(g, i, L_OVL_FWD_PRE, post, recompute), deps, nd);
    } else if (ag && !(symm && c == 0)) {
      ts_op op =
          coll_op(g, TS_COLL_ALLGATHER, g->g_tp, pre->bytes * g->mb / n, TS_CAT_COMM_TP, S_TPOVL);
      gboolean first = prev_ag < 0;
      prev_ag = emit(g, &op, ovl_lbl(g, i, L_OVL_FWD_PRE, post, recompute), first ? deps : NULL,
                     first ? nd : 0);
      pend(g, prev_ag);
    }
    chunk.kernels = c + 1 < n ? TS_KERNELS_LAUNCHED : kernels;
    gemm = emit_compute(g, TS_CAT_FWD, flops / n, mem / n, &chunk,
                        ovl_lbl(g, i, L_OVL_FWD, post, recompute));
    /* AsyncTP's fused matmul reduce-scatter (_pipelined_produce_and_all2all) computes the peers'
     * row chunks first, each pulled by its peer while the next is computed, and its own chunk
     * last, which nobody pulls (kept in the trace on the own-chunk stream, waited for by
     * nothing). */
    if (rs) {
      gboolean own = symm && c + 1 == n;
      ts_op op = coll_op(g, (ts_coll_kind)post->kind, g->g_tp, post->bytes * g->mb / n,
                         TS_CAT_COMM_TP, own ? S_SYMM_OWN : S_TPOVL_RS);
      int id = emit(g, &op, ovl_lbl(g, i, L_OVL_FWD_POST, post, recompute), &gemm, 1);
      if (!own)
        last_rs = id;
    }
  }
  if (!rs && post->kind != TS_NO_COLL)
    emit_tp(g, post, i, recompute ? L_RC_POST : L_FWD_POST, what);
  pend(g, last_rs); /* the next layer needs the whole reduced output */
  /* ... and then sums the n partial chunks it holds (its own and the n - 1 pulled: the whole
   * unreduced output, M x N) into its M/n x N shard, one memory-bound kernel on the compute
   * stream after the last chunk (reduce_partials): what NCCL's reduce-scatter does inside its
   * own kernel. */
  if (symm && rs)
    symm_copy(g, i, L_SYMM_REDUCE, post->bytes * g->mb * (1.0 + 1.0 / n),
              "%s %s sum of reduce-scatter partials", recompute);
  return gemm;
}

/* Does layer i's backward run its output-gradient all-gather in chunks beside its GEMMs
 * (tp-overlap=xla)? XLA's SPMD partitioner turns an all-gather that feeds a dot into a windowed
 * loop of collective-permutes beside the partial dots (collective matmul; Wang et al. 2023,
 * ASPLOS), wherever the dot is: JAX hands it the backward in the same program, so the gather of
 * the output gradient that sequence parallelism's reduce-scatter transposes into is decomposed
 * as the forward's gathers are: fc2's whole backward, and attention's input gradient (its
 * output projection's dgrad comes first; the reduce-scatter of its input gradient then runs
 * beside the weight gradient, as without).
 * With tp-overlap=te on a GPU, Transformer Engine's userbuffers overlap the same gathers (the
 * row-parallel layers' output gradient under sequence parallelism) with the input-gradient GEMM
 * by ring exchange, as the forward's gather with its GEMM (its default userbuffers
 * configuration: proj_dgrad and fc2_dgrad by ring exchange; Megatron-Core's tp_comm_overlap).
 * PyTorch's AsyncTP (tp-overlap=async) is left as it was: its backward is not chunked here.
 * `te` on a systolic chip keeps the unchunked backward. The validator reads the same rule.
 * A recomputed forward (recompute=full, stage) is chunked in every mode: Transformer Engine and
 * XLA re-run a checkpointed module with its overlap, and under AsyncTP the re-run is part of the
 * compiled backward graph (AOTAutograd's partitioner puts a checkpoint's recomputation there),
 * which Inductor's post-grad passes, the micro-pipeline pass among them, process as they do
 * the forward graph (torch/_inductor/fx_passes/post_grad.py; micro_pipeline_tp.py has no test
 * of the graph's kind). */
unsigned ts_plan_fwd_chunked(const ts_plan *p, int i)
{
  const ts_layer_exec *e = &p->exec[i];
  if (!p->tp_overlap || p->degree[TS_AX_TP] <= 1)
    return 0;
  return (chunks_gather(&e->fwd_pre) ? TS_CHUNK_GATHER : 0u) |
         (chunks_reduce(&e->fwd_post) ? TS_CHUNK_REDUCE : 0u);
}

int ts_plan_fwd_chunks(const ts_plan *p, int i)
{
  return ts_plan_fwd_chunked(p, i) != 0 ? p->degree[TS_AX_TP] : 0;
}

int ts_plan_bwd_chunks(const ts_plan *p, int i)
{
  const ts_layer_exec *e = &p->exec[i];
  gboolean mode = p->tp_overlap_mode == TS_TP_OVERLAP_XLA ||
                  (p->tp_overlap_mode == TS_TP_OVERLAP_TE && p->topo->chip.systolic <= 0);
  gboolean chunked = p->tp_overlap && mode && p->degree[TS_AX_TP] > 1 &&
                     e->bwd_pre.kind == TS_COLL_ALLGATHER && e->bwd_pre.bytes > 0;
  return chunked ? p->degree[TS_AX_TP] : 0;
}

/* The backward (pass TS_PASS_BWD, label slot L_OVL_BWD) or input gradient (TS_PASS_DGRAD,
 * L_OVL_DGRAD) of such a layer in n chunks: gather chunk c + 1 runs while the GEMMs work on the
 * rows of chunk c (dx's rows and dW's partial sum need only that chunk of the output gradient).
 * What stays exposed is the first gather chunk: with per-chunk gather time c_a and GEMM time
 * g = G/n it takes c_a + (n - 1) max(c_a, g) + g instead of C_a + G; with te_own_chunk (ring
 * exchange from the rank's own shard) g + (n - 1) max(c_a, g). Same bytes and FLOPs as
 * unchunked. Returns the last GEMM chunk. */
static int bwd_overlapped(gen *g, int i, ts_pass pass, int slot, double flops, double mem)
{
  const ts_layer *l = &g->p->model->layers[i];
  const ts_layer_exec *e = &g->p->exec[i];
  int n = ovl_chunks(g);
  ts_op_shape chunk;
  if (e->cp_kv_bytes > 0)
    cp_proj_shape(g, i, pass, &chunk); /* the core runs in the ring (bwd_layer) */
  else
    layer_shape(g, i, pass, &chunk);
  chunk.attn_flops /= n, chunk.scores_bytes /= n, chunk.elem_bytes /= n, chunk.epilogue_bytes /= n;
  int kernels = chunk.kernels;
  int deps[16], nd = 0;
  for (guint k = 0; k < g->pend->len && nd < 15; k++)
    deps[nd++] = g_array_index(g->pend, int, k);
  if (g->last >= 0)
    deps[nd++] = g->last;
  int gemm = -1;
  /* te: ring exchange (proj_dgrad, fc2_dgrad), chunk 0 the rank's own shard (te_own_chunk). */
  gboolean own0 = te_own_chunk(g->p);
  for (int c = 0; c < n; c++) {
    gboolean own = own0 && c == 0, first = c == 0 || (own0 && c == 1);
    ts_op op = coll_op(g, TS_COLL_ALLGATHER, g->g_tp, e->bwd_pre.bytes * g->mb / n, TS_CAT_COMM_TP,
                       own ? S_SYMM_OWN : S_TPOVL);
    int ag =
        emit(g, &op, lbl(g, layer_slot(g, i, L_OVL_BWD_PRE), "%s bwd all-gather chunk", l->name),
             first ? deps : NULL, first ? nd : 0);
    if (!own)
      pend(g, ag);
    chunk.kernels = c + 1 < n ? TS_KERNELS_LAUNCHED : kernels;
    gemm = emit_compute(g, TS_CAT_BWD, flops / n, mem / n, &chunk,
                        lbl(g, layer_slot(g, i, slot), "%s bwd %schunk", l->name,
                            slot == L_OVL_DGRAD ? "input grad " : ""));
  }
  return gemm;
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
  if (g->pgather != NULL)
    pend(g, g->pgather[i]);
  double flops = l->fwd_flops * g->mb / e->cdiv;
  double mem = ts_layer_fwd_mem_bytes_batch(m, l, g->mb) / e->cdiv;
  int slot = layer_slot(g, i, recompute ? L_RECOMPUTE : L_FWD);
  /* A recomputed forward (recompute=full, stage) overlaps its collectives as the forward does:
   * Transformer Engine and XLA re-run the checkpointed module with the same comm overlap. Its
   * chunks are tagged as a recomputation (L_OVL_RC*). */
  /* PyTorch's AsyncTP decomposes what torch.compile's micro-pipeline pass matches, in the
   * forward graph and in the recomputed forward of full activation checkpointing, which runs in
   * the compiled backward graph (ts_plan_fwd_chunked; docs/splits.md, tp-overlap=async). */
  gboolean ovl = ts_plan_fwd_chunks(p, i) > 0;
  if (ovl && e->cp_kv_bytes > 0) {
    /* Context parallelism: the ring between the two projections, each chunked with its
     * collective (cp_ring_fwd). */
    zero_need(g, i);
    cp_ring_fwd(g, i, flops, mem, lbl(g, slot, "%s %s", l->name, what), recompute, TRUE);
  } else if (ovl) {
    zero_need(g, i);
    tp_overlapped(g, i, &e->fwd_pre, &e->fwd_post, flops, mem, NULL, recompute);
  } else {
    emit_tp(g, &e->fwd_pre, i, recompute ? L_RC_PRE : L_FWD_PRE, what);
    zero_need(g, i);
    int label = lbl(g, slot, "%s %s", l->name, what);
    if (e->cp_kv_bytes > 0)
      cp_ring_fwd(g, i, flops, mem, label, recompute, FALSE);
    else
      emit_compute(g, TS_CAT_FWD, flops, mem, layer_shape_interned(g, i, TS_PASS_FWD), label);
    emit_tp(g, &e->fwd_post, i, recompute ? L_RC_POST : L_FWD_POST, what);
  }
  emit_ep(g, &e->ep_post, i, recompute ? L_EP_RC_POST : L_EP_FWD_POST,
          recompute ? "recompute combine" : "fwd combine");
}

/* The shape of a memory-bound pass over gradients in fp32 outside the GEMMs (apex's bucket
 * adds, FSDP1's flat-gradient passes, DeepSpeed's accumulation): `kernels` launches, each at
 * host_op_us when a per-tensor Python loop issues them (0: the layer-kernel floor). */
static ts_op_shape grad_pass_shape(int kernels, double host_op_us)
{
  ts_op_shape sh;
  memset(&sh, 0, sizeof sh);
  sh.oclass = TS_OPC_MEMORY;
  sh.prec = TS_PRECISION_FP32;
  sh.kernels = kernels;
  sh.host_op_us = host_op_us;
  return sh;
}

/* dp-engine=autograd: the 16-bit weight gradients accumulated by autograd, as Megatron-LM ran
 * before its gradient_accumulation_fusion (github NVIDIA/Megatron-LM 83b1e42, February 2022;
 * even after it, only with fp32 accumulation). Its 2021 code (examples/sc21/run_table_1.sh at
 * de7dc40: --fp16, local DDP without --use-contiguous-buffers-in-ddp, or torch DDP under
 * no_sync) leaves each parameter's gradient in .grad: the first micro-batch's weight-gradient
 * GEMM writes it, every later one writes a fresh tensor that autograd's AccumulateGrad adds in
 * place (the held gradient and the new one read, the sum written: 3 D bytes a parameter), as
 * DeepSpeed's engine does (ts_plan_ds_grad_acc_bytes). One kernel per parameter tensor (weight
 * and bias), each at the published host cost of one eager tensor op (TS_TORCH_OPTIM_OP_US, as
 * ds_grad_accumulate charges the same AccumulateGrad): autograd's C++ engine issues it, with no
 * Python of its own, so the chip's kernel_launch_us (fitted to Megatron's Python-issued layer
 * kernels) would overstate it. */
static void autograd_grad_add(gen *g, int i)
{
  const ts_plan *p = g->p;
  double n = g->layer_params[i];
  if (!(n > 0) || g->cur_mb <= 0)
    return;
  ts_op_shape sh = grad_pass_shape(2, TS_TORCH_OPTIM_OP_US);
  g->wgrad_op[i] =
      emit_compute(g, TS_CAT_OTHER, 0, 3.0 * p->model->dtype_bytes * n, &sh,
                   lbl(g, layer_slot(g, i, L_APEX_GRAD_ADD), "%s gradient accumulated (autograd)",
                       p->model->layers[i].name));
}

/* dp-engine=apex: apex's DistributedFusedAdam as NeMo-Megatron ran it in 2022 (NeMo 193a0c3,
 * apex contrib/optimizers/distributed_fused_adam.py). With pp = 1 NeMo turned Megatron's
 * gradient_accumulation_fusion off, so each weight-gradient GEMM writes a fresh 16-bit .grad;
 * the optimizer's post-backward hook (no_sync(greedy_grad_copy=True) on every micro-batch but
 * the last) then adds it into the optimizer's bucket, whose dtype is grad_sync_dtype, by
 * default the fp32 state dtype (_grad_copy: grad_out.add_(grad_in)), and frees it. Per
 * parameter and micro-batch: the 16-bit gradient read (D), the fp32 bucket read and written
 * (4 + 4); the bucket's zeroing once a step (4) is charged with the first micro-batch. One
 * kernel per parameter tensor (weight and bias), on the compute stream, after the layer's
 * weight gradient and before its bucket's reduce-scatter; each launch at the per-tensor Python
 * loop's op cost (TS_TORCH_OPTIM_OP_US: the hook is Python, one call per parameter). */
static void apex_grad_add(gen *g, int i)
{
  const ts_plan *p = g->p;
  if (p->dp_engine_autograd) {
    autograd_grad_add(g, i);
    return;
  }
  if (!p->dp_engine_apex) /* before the layer's parameters (divisions, per layer and micro-batch) */
    return;
  double n = g->layer_params[i];
  if (!(n > 0))
    return;
  double per = p->model->dtype_bytes + 4.0 + 4.0 + (g->cur_mb == 0 ? 4.0 : 0.0);
  ts_op_shape sh = grad_pass_shape(2, TS_TORCH_OPTIM_OP_US);
  g->wgrad_op[i] =
      emit_compute(g, TS_CAT_OTHER, 0, per * n, &sh,
                   lbl(g, layer_slot(g, i, L_APEX_GRAD_ADD), "%s gradient added into fp32 bucket",
                       p->model->layers[i].name));
}

static void bwd_layer(gen *g, int i, gboolean gathered)
{
  const ts_plan *p = g->p;
  const ts_model *m = p->model;
  const ts_layer *l = &m->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  double mem = ts_layer_bwd_mem_bytes_batch(m, l, g->mb) / e->cdiv;
  emit_ep(g, &e->ep_post, i, L_EP_BWD_PRE, "bwd combine");
  gboolean chunked = ts_plan_bwd_chunks(p, i) > 0;
  if (!chunked)
    emit_tp(g, &e->bwd_pre, i, L_BWD_PRE, "bwd");
  if (!gathered)
    zero_need(g, i);
  else if (p->zero >= 3 && g->ag_op[i] >= 0)
    pend(g, g->ag_op[i]);
  if (e->recompute_flops > 0) {
    emit_compute(g, TS_CAT_FWD, e->recompute_flops * g->mb, 0.0,
                 layer_shape_interned(g, i, TS_PASS_ATTN_RECOMPUTE),
                 lbl(g, layer_slot(g, i, L_ATTN_RECOMPUTE), "%s recompute attention", l->name));
  }
  if (e->op_rc_flops > 0 || e->op_rc_mem > 0) {
    /* recompute=op: what the per-op policy did not save, re-run before the backward. */
    emit_compute(g, TS_CAT_FWD, e->op_rc_flops * g->mb, e->op_rc_mem * g->mb,
                 layer_shape_interned(g, i, TS_PASS_OP_RECOMPUTE),
                 lbl(g, layer_slot(g, i, L_OP_RECOMPUTE), "%s recompute (op policy)", l->name));
  }
  double fi = l->bwd_input_flops * g->mb / e->cdiv, fw = l->bwd_weight_flops * g->mb / e->cdiv;
  gboolean cp = e->cp_kv_bytes > 0;
  ts_op_shape cp_bwd, cp_dgrad;
  if (cp) {
    fi = MAX(0.0, fi - cp_core_bwd_flops(l, e) * g->mb / e->cdiv);
    if (chunked) {
      /* tp-overlap: the output projection's input gradient comes before the core's, chunked
       * with the gather of the output gradient it reads (as without cp); the QKV projection's
       * follows the ring, unchunked (its reduce-scatter runs beside the weight gradient). */
      double fo = fi * attn_out_share(l), mo = fi + fw > 0 ? mem * fo / (fi + fw) : 0.0;
      bwd_overlapped(g, i, TS_PASS_DGRAD, L_OVL_DGRAD, fo, mo);
      fi -= fo, mem -= mo;
      chunked = FALSE;
    }
    /* The attention core's backward goes round the cp ring; the projections' input and
     * weight gradients follow once this rank's K/V gradient has come home. */
    pend(g, cp_ring_bwd(g, i));
  }
  gboolean async = p->degree[TS_AX_TP] > 1 && (e->bwd_post.kind == TS_COLL_ALLREDUCE ||
                                               e->bwd_post.kind == TS_COLL_REDUCESCATTER);
  if (chunked && !async) {
    g->wgrad_op[i] = bwd_overlapped(g, i, TS_PASS_BWD, L_OVL_BWD, fi + fw, mem);
    apex_grad_add(g, i);
    emit_tp(g, &e->bwd_post, i, L_BWD_POST, "bwd");
    emit_ep(g, &e->ep_pre, i, L_EP_BWD_POST, "bwd dispatch");
    return;
  }
  if (!async) {
    g->wgrad_op[i] = emit_compute(g, TS_CAT_BWD, fi + fw, mem,
                                  cp ? cp_proj_shape(g, i, TS_PASS_BWD, &cp_bwd)
                                     : layer_shape_interned(g, i, TS_PASS_BWD),
                                  lbl(g, layer_slot(g, i, L_BWD), "%s bwd", l->name));
    apex_grad_add(g, i);
    emit_tp(g, &e->bwd_post, i, L_BWD_POST, "bwd");
    emit_ep(g, &e->ep_pre, i, L_EP_BWD_POST, "bwd dispatch");
    return;
  }
  /* The input gradient first; its collective runs while the weight gradient computes. With
   * sequence parallelism the kept (sharded) input is gathered again during the input
   * gradient (Korthikanti et al. 2022, 4.2.2). */
  int regather = -1;
  /* Under PyTorch's full activation checkpointing (fsdp2; gathered: this backward follows the
   * block's re-run forward) the re-run forward's all-gather is the gather: autograd keeps its
   * output for the weight gradient, as the forward without checkpointing does, so nothing is
   * gathered again (Megatron-LM's sequence parallelism keeps the shard and re-gathers). */
  if (e->bwd_regather.kind != TS_NO_COLL && !(p->fsdp2 && gathered)) {
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
  /* PyTorch's tensor parallelism (DTensor, fsdp2) without async TP overlaps none of it: the
   * re-gather's output is the weight gradient's operand and the input gradient's collective is
   * the autograd node after the linear's whole backward (its input and weight gradients, one
   * MmBackward node), waited on by the norm's backward (TorchTitan's benchmark: the all-gather
   * before and the reduce-scatter after each TP region are exposed in vanilla TP). */
  /* So does Megatron-DeepSpeed's mpu (tp-grad=serial): ColumnParallelLinear's all-reduce is
   * the backward of copy_to_tensor_model_parallel_region, an autograd node after F.linear's
   * (one AddmmBackward computing the input and the weight gradients), and nothing waits for it
   * but the norm's backward before it. */
  /* Under PyTorch's async TP the reduce-scatter of an input gradient summed from several
   * matmuls stays the plain collective too: Inductor's micro-pipeline pass fuses a
   * reduce-scatter only when a matmul (or reshape, matmul, reshape) produces its input
   * (torch/_inductor/fx_passes/micro_pipeline_tp.py, _find_producer_matmul), and the input
   * gradient of attention's separate Q, K and V projections, or of a gated MLP's gate and up
   * projections, is their dgrads added by autograd. */
  gboolean summed = l->kind == TS_LAYER_ATTENTION || (l->kind == TS_LAYER_DENSE && l->gated);
  gboolean plain =
      !p->tp_overlap || (p->fsdp2 && p->tp_overlap_mode == TS_TP_OVERLAP_ASYNC && summed);
  gboolean serial = (p->fsdp2 || p->tp_grad_serial) && plain && !chunked;
  if (serial && !p->fsdp2)
    pend(g, regather), regather = -1; /* the weight gradient reads the re-gathered input */
  /* Under PyTorch's async TP (tp-overlap=async) too the re-gather stays exposed: its
   * micro-pipelining (Inductor's fused all-gather matmul) takes a gather feeding a matmul's
   * left operand along the rows, and the weight gradient (output gradient^T x input) reduces
   * over the gathered rows instead; the reduce-scatter after an input gradient of one matmul is
   * the fused matmul reduce-scatter, kept beside the weight gradient as before (a summed one
   * stays serial, above). */
  if (p->fsdp2 && !chunked) {
    /* The re-gathered input's sequence-dim copy, only where it was gathered again (after a
     * full-recompute forward autograd kept the re-run gather's output, its copy made then). */
    gboolean again = regather >= 0;
    pend(g, regather), regather = -1;
    if (again)
      emit_sp_copy(g, &e->bwd_regather, i, L_BWD_SP_COPY, "bwd");
  }
  double share = fi + fw > 0 ? fi / (fi + fw) : 0.5;
  int dgrad = chunked
                  ? bwd_overlapped(g, i, TS_PASS_DGRAD, L_OVL_DGRAD, fi, mem * share)
                  : emit_compute(g, TS_CAT_BWD, fi, mem * share,
                                 cp ? cp_proj_shape(g, i, TS_PASS_DGRAD, &cp_dgrad)
                                    : layer_shape_interned(g, i, TS_PASS_DGRAD),
                                 lbl(g, layer_slot(g, i, L_DGRAD), "%s bwd input grad", l->name));
  if (serial) {
    g->wgrad_op[i] = emit_compute(g, TS_CAT_BWD, fw, mem * (1.0 - share),
                                  layer_shape_interned(g, i, TS_PASS_WGRAD),
                                  lbl(g, layer_slot(g, i, L_WGRAD), "%s bwd weight grad", l->name));
    apex_grad_add(g, i);
    emit_tp(g, &e->bwd_post, i, L_BWD_POST, "bwd");
    emit_ep(g, &e->ep_pre, i, L_EP_BWD_POST, "bwd dispatch");
    return;
  }
  if (e->bwd_post.kind == TS_COLL_REDUCESCATTER) {
    int copy = emit_sp_copy(g, &e->bwd_post, i, L_BWD_SP_COPY, "bwd");
    if (copy >= 0)
      dgrad = copy;
  }
  ts_op op = coll_op(g, (ts_coll_kind)e->bwd_post.kind, g->g_tp, e->bwd_post.bytes * g->mb,
                     TS_CAT_COMM_TP, S_TPSIDE);
  int post =
      emit(g, &op,
           lbl(g, layer_slot(g, i, L_BWD_POST), "%s bwd %s%s", l->name, coll_word(e->bwd_post.kind),
               e->bwd_post.redistribution ? " (redistribution)" : ""),
           &dgrad, 1);
  pend(g, regather);
  g->wgrad_op[i] = emit_compute(g, TS_CAT_BWD, fw, mem * (1.0 - share),
                                layer_shape_interned(g, i, TS_PASS_WGRAD),
                                lbl(g, layer_slot(g, i, L_WGRAD), "%s bwd weight grad", l->name));
  apex_grad_add(g, i);
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

/* DeepSpeed runs bf16 with ZeRO through its BF16_Optimizer. */
static gboolean ds_bf16_optimizer(const ts_plan *p)
{
  /* BF16_Optimizer came with DeepSpeed 0.6.1: before 0.4.0 (pipe-engine=deepspeed-0.3) 16-bit
   * gradients of either kind accumulate through autograd. */
  return p->zero >= 1 && p->model->dtype_bytes == 2 && !p->model->fp16 &&
         p->pipe_engine_ds != TS_PIPE_ENGINE_DS03;
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
    int l = bucket_label_known(g, BL_PS_PUSH, b->first, upto);
    if (l < 0) {
      g_snprintf(g->label, sizeof g->label, "ps push %s..%s", p->model->layers[b->first].name,
                 p->model->layers[upto].name);
      l = bucket_label_keep(g, BL_PS_PUSH, b->first, upto);
    }
    int id = emit(g, &op, l, &b->last_op, 1);
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
    int id = emit_ps(g, TS_CAT_COMM_DP, TS_ROLE_GRAD, b->bytes, bucket_label(g, b->first, upto),
                     &b->last_op, 1);
    g_array_append_val(g->sync, id);
    b->bytes = 0;
    b->first = -1;
    return;
  }
  gboolean rs = p->zero >= 1;
  double bytes = b->bytes;
  if (p->pipe_engine_ds && ds_bf16_optimizer(p)) {
    /* BF16_Optimizer under DeepSpeed's pipeline engine (_exec_reduce_grads ->
     * _bf16_reduce_grads): the fp32 gradients all-reduced whole over dp
     * (buffered_allreduce_fallback), not reduce-scattered in 16 bits; each rank then updates
     * its shard and all-gathers the bf16 parameters (gather_updated). */
    rs = FALSE;
    bytes *= 4.0 / p->model->dtype_bytes;
  }
  /* DeepSpeed before 0.4.0 (EleutherAI's DeeperSpeed, a fork of 0.3.15): the pipeline engine's
   * _exec_reduce_grads calls buffered_allreduce_fallback itself, not the engine's
   * allreduce_gradients, so ZeRO-1's 16-bit gradients are all-reduced whole (flattened,
   * divided by dp, all-reduced, copied back) instead of reduce-scattered; the ZeRO-1 optimizer
   * (FP16_DeepSpeedZeroOptimizer_Stage1) then updates its partition and all-gathers the
   * parameters as with zero=1. DeepSpeed 0.4.0's "ZeRO stage 1 refresh" routed it through
   * allreduce_gradients. */
  if (p->pipe_engine_ds == TS_PIPE_ENGINE_DS03)
    rs = FALSE;
  /* Gradients reduced in fp32: dp-engine=apex's buckets are fp32 (apex_grad_add), reduce-scattered
   * as they are; fsdp2's reduce-scatter input is in the policy's reduce dtype, fp32 as TorchTitan
   * sets it (MixedPrecisionPolicy reduce_dtype from mixed_precision_reduce = "float32", its only
   * choice; foreach_reduce copies the bf16 gradients into it); fsdp1=fp32 is FSDP1's
   * reduce_dtype float32. */
  if (p->dp_engine_apex || p->fsdp2 || p->fsdp1 == 2)
    bytes *= 4.0 / p->model->dtype_bytes;
  ts_op op = coll_op(g, rs ? TS_COLL_REDUCESCATTER : TS_COLL_ALLREDUCE, group, bytes,
                     TS_CAT_COMM_DP, S_DP);
  /* rs is the same for every bucket of a trace: (first, upto) names the text. */
  int l = bucket_label_known(g, BL_GRAD, b->first, upto);
  if (l < 0) {
    g_snprintf(g->label, sizeof g->label, "grad %s %s..%s", rs ? "reduce-scatter" : "all-reduce",
               p->model->layers[b->first].name, p->model->layers[upto].name);
    l = bucket_label_keep(g, BL_GRAD, b->first, upto);
  }
  int id = emit(g, &op, l, &b->last_op, 1);
  chip_stall(g, group, op.coll);
  if (rs && g->g_rep >= 0 && g->rep_end_bytes != NULL) {
    /* replica-reduce=end: the shard waits in place for the exchange after the backward. */
    g->rep_end_bytes[b->first] = bytes / ts_plan_shard_ranks(p);
  } else if (rs && g->g_rep >= 0) {
    /* Hybrid sharding (FSDP HYBRID_SHARD; MiCS, Zhang et al. 2022, section 3.3): the shard
     * each rank reduced inside its group is all-reduced with the same shard of the other
     * groups. */
    ts_op ar = coll_op(g, TS_COLL_ALLREDUCE, g->g_rep, bytes / ts_plan_shard_ranks(p),
                       TS_CAT_COMM_DP, S_DP);
    int lr = bucket_label_known(g, BL_REPLICAS, b->first, upto);
    if (lr < 0) {
      g_snprintf(g->label, sizeof g->label, "grad shard all-reduce across replicas %s..%s",
                 p->model->layers[b->first].name, p->model->layers[upto].name);
      lr = bucket_label_keep(g, BL_REPLICAS, b->first, upto);
    }
    id = emit(g, &ar, lr, &id, 1);
    chip_stall(g, g->g_rep, TS_COLL_ALLREDUCE);
  }
  if (p->offload != TS_OFFLOAD_NONE) {
    /* ZeRO-Offload (Ren et al. 2021, section 4.2): each reduced gradient shard goes to host
     * memory while backward continues. */
    double n = group == g->g_edp ? ts_plan_shard_ranks(p) / p->ep : ts_plan_shard_ranks(p);
    id = host_link(g, b->bytes / n, "gradient shard to host", &id, 1);
  }
  g_array_append_val(g->sync, id);
  b->bytes = 0;
  b->first = -1;
}

/* The buckets sync_layer fills: three kinds, dense (over dp), replicated over tp too (dp and
 * tp), experts (dp / ep), and fsdp1's root unit. */
typedef struct {
  bucket bk[3];
  bucket root; /* fsdp1: the root unit's layers */
  int root_last;
  int lastl[3];
} grad_sync;

static void sync_begin(grad_sync *s)
{
  for (int w = 0; w < 3; w++) {
    s->bk[w] = (bucket){0, -1, -1};
    s->lastl[w] = -1;
  }
  s->root = (bucket){0, -1, -1};
  s->root_last = -1;
}

/* Layer i's gradient (just computed; layers come last first) into its bucket, whose
 * synchronisation starts once the bucket fills; layers replicated over the tp axis while it
 * splits their work synchronise over dp and tp together. */
static void sync_layer(gen *g, grad_sync *s, int i)
{
  const ts_plan *p = g->p;
  const ts_model *m = p->model;
  int dp = ts_plan_grad_ranks(p), tp = p->degree[TS_AX_TP];
  /* dp counts the context-parallel ranks, which hold the same parameters. */
  int groups[3] = {g->g_dp, g->g_dptp, g->g_edp};
  int size[3] = {dp, dp * tp, dp / p->ep};
  bucket *bk = s->bk;
  const ts_layer_exec *e = &p->exec[i];
  /* With ZeRO the optimizer shards over dp only, so a gradient reduce-scattered over dp and
   * tp would leave each tp member updating a different part of a parameter they all hold:
   * sum it over tp first, then shard it over dp with the rest (Megatron-LM all-reduces the
   * sequence-parallel layer-norm gradients over tp before the data-parallel reduction,
   * Korthikanti et al. 2022, section 4.2.2). */
  gboolean tp_first = p->ps == 0 && p->zero >= 1 && e->dp_over_tp;
  int w = p->ps > 0 || tp_first ? 0 : e->expert ? 2 : e->dp_over_tp ? 1 : 0; /* servers take all */
  if (e->tp_grad_params > 0 && tp > 1) {
    /* Replicated parameters with partial gradients (MLA under sp, ts_plan.c): sum over tp
     * first, on the gradient stream, so the bucket's reduction follows it. */
    ts_op op = coll_op(g, TS_COLL_ALLREDUCE, g->g_tp, e->tp_grad_params * m->dtype_bytes,
                       TS_CAT_COMM_DP, S_DP);
    g_snprintf(g->label, sizeof g->label, "grad tp all-reduce %s..%s", m->layers[i].name,
               m->layers[i].name);
    emit(g, &op, bucket_label(g, i, i), &g->wgrad_op[i], 1);
  }
  if ((size[w] <= 1 && p->ps == 0) || m->layers[i].params <= 0)
    return;
  if (tp_first) {
    /* On the gradient stream, so the bucket's reduce-scatter follows it. */
    double bytes = g->layer_params[i] * m->dtype_bytes;
    ts_op op = coll_op(g, TS_COLL_ALLREDUCE, g->g_tp, bytes, TS_CAT_COMM_DP, S_DP);
    int l = bucket_label_known(g, BL_TP_FIRST, i, i);
    if (l < 0) {
      g_snprintf(g->label, sizeof g->label, "grad all-reduce %s..%s", m->layers[i].name,
                 m->layers[i].name);
      l = bucket_label_keep(g, BL_TP_FIRST, i, i);
    }
    emit(g, &op, l, &g->wgrad_op[i], 1);
  }
  double bytes = g->layer_params[i] * m->dtype_bytes;
  int block = m->layers[i].block;
  if (p->fsdp1 && w == 0 && block < 0) {
    /* FSDP1 reduce-scatters a wrapped unit's FlatParameter whole, once its gradient is
     * complete: the root's (the layers of no block: embedding, final norm, head) after the
     * backward's last layer. */
    if (s->root.first < 0)
      s->root.first = i;
    s->root.bytes += bytes;
    s->root.last_op = g->wgrad_op[i];
    s->root_last = i;
    return;
  }
  /* ... and each block's, one reduce-scatter a block, not by bucket size. */
  if (p->fsdp1 && bk[w].first >= 0 && m->layers[bk[w].first].block != block)
    flush(g, &bk[w], groups[w], s->lastl[w]);
  if (bk[w].first < 0)
    bk[w].first = i;
  bk[w].bytes += bytes;
  bk[w].last_op = g->wgrad_op[i];
  s->lastl[w] = i;
  if (!p->fsdp1 && bk[w].bytes >= p->opt.bucket_bytes)
    flush(g, &bk[w], groups[w], i);
}

/* The buckets left after the pass's last layer. */
static void sync_end(gen *g, grad_sync *s)
{
  int groups[3] = {g->g_dp, g->g_dptp, g->g_edp};
  for (int w = 0; w < 3; w++)
    if (s->bk[w].bytes > 0)
      flush(g, &s->bk[w], groups[w], s->lastl[w]);
  if (s->root.bytes > 0) {
    s->root.last_op = g->wgrad_op[s->root_last];
    flush(g, &s->root, groups[0], s->root_last);
  }
}

/* Buckets the gradients of layers [a, b) (just computed, last layer first) and starts their
 * synchronisation as each bucket fills (sync_layer). */
static void sync_grads(gen *g, int a, int b)
{
  grad_sync s;
  sync_begin(&s);
  for (int i = b - 1; i >= a; i--)
    sync_layer(g, &s, i);
  sync_end(g, &s);
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
    /* p2p=blocking: the next compute waits for the send. Megatron-LM's p2p_communication
     * waits on every request of batch_isend_irecv and then synchronises the device before the
     * next forward or backward; DeepSpeed's pipeline engine issues each send as its own
     * blocking instruction (SendActivation, SendGrad). The exchange's wire time then adds to
     * the sender's critical path instead of running beside its next micro-batch. */
    if (g->p->p2p_blocking)
      pend(g, id);
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
  /* load=sync: the stages that load the micro-batch (the inputs on the first, the labels on the
   * last) synchronise before its forward; Megatron's broadcast_data reads the batch's sizes
   * back to the host (.cpu()), which waits for the device's queue. */
  g->sync_next = p->load_sync && (k == 0 || k == p->nstages - 1);
  /* pipe-engine=deepspeed: the received activation is rebuilt from its partition's metadata,
   * a CUDA tensor read back with .tolist() (PartitionedTensor.from_meta): the host waits for
   * the device before the stage's forward. */
  if (p->pipe_engine_ds && k > 0)
    g->sync_next = TRUE;
  if (k > 0) {
    gboolean gather;
    double bytes = boundary_bytes(g, a - 1, &gather);
    pend(g, p2p(g, TS_OP_RECV, S_RECV_F, (k - 1) % P, bytes, tag(g, FALSE, k - 1, u),
                lbl(g, stage_slot(g, k, L_RECV_F), "recv activations stage %d", k)));
    if (gather)
      boundary_gather(g, a - 1, k, L_GATHER_F, "activations");
  }
  if (p->zero >= 3 && !(g->keep_gathered && g->resident[a])) {
    int *order = g_new(int, b - a);
    for (int i = a; i < b; i++)
      order[i - a] = i;
    zero_pass(g, order, b - a);
    g_free(order);
  }
  for (int i = a; i < b; i++)
    fwd_layer(g, i, FALSE);
  g->sync_next = FALSE;
  if (k < p->nstages - 1) {
    gboolean gather;
    double bytes = boundary_bytes(g, b - 1, &gather);
    p2p(g, TS_OP_SEND, S_SEND_F, (k + 1) % P, bytes, tag(g, FALSE, k, u),
        lbl(g, stage_slot(g, k, L_SEND_F), "send activations %s stage %d", m->layers[b - 1].name,
            k));
  }
}

/* Bytes per parameter FSDP1 (fsdp1; torch 1.13-2.x FullyShardedDataParallel, the FlatParameter)
 * moves every micro-batch to make a wrapped block's gradient ready for its reduce-scatter,
 * outside the backward's GEMMs. Autograd builds the flat gradient from the views' gradients
 * (the split's backward, a concatenation: D read, D written); the post-backward hook casts it
 * to reduce_dtype when that differs (fsdp1=fp32, Composer's DEFAULT mixed precision: D read, 4
 * written) and _reduce_grad divides it in place by the gradient pre-divide factor, which is > 1
 * for every world size >= 2 (R read, R written, R the reduced dtype's bytes). Left out: the
 * shard-sized passes (the post-division, the sharded accumulation, the parameter shard's cast
 * before each gather), 1/N of these. */
double ts_plan_fsdp1_grad_bytes(const ts_plan *p)
{
  if (!p->fsdp1)
    return 0.0;
  double D = p->model->dtype_bytes;
  if (p->fsdp1 == 2)
    return 2.0 * D + (D + 4.0) + 2.0 * 4.0;
  return 2.0 * D + 2.0 * D;
}

/* Bytes per parameter the DeepSpeed pipeline engine moves to accumulate one micro-batch's
 * gradients outside the backward's GEMMs (ts_plan_ds_grad_acc_bytes documents them). */
double ts_plan_ds_grad_acc_bytes(const ts_plan *p, gint64 micro)
{
  if (!p->pipe_engine_ds)
    return 0.0;
  double D = p->model->dtype_bytes;
  /* bf16 with ZeRO: BF16_Optimizer (DeepSpeed 0.6.1+, the one bf16 + pipeline path, which is
   * its own ZeRO-1 equivalent). _exec_backward_pass clears the bf16 gradients before
   * each backward and update_hp_grads then adds each one into its fp32 gradient, parameter by
   * parameter: the bf16 gradient read (D), its fp32 copy written (4, the .to(float32)) and read
   * (4), the fp32 gradient read and written (4 + 4). Every micro-batch. */
  if (ds_bf16_optimizer(p))
    return D + 4.0 + 4.0 + 4.0 + 4.0;
  /* Otherwise the 16-bit gradients accumulate in param.grad through autograd's AccumulateGrad:
   * from the second micro-batch on, the new gradient is a tensor of its own, added in place to
   * the held one (2 D read, D written). Megatron-LM's gradient_accumulation_fusion writes the
   * weight-gradient GEMM straight into its fp32 main_grad instead, at no extra pass. */
  return micro > 0 ? 3.0 * D : 0.0;
}

/* DeepSpeed's pipeline engine: one micro-batch's gradients accumulated after its backward
 * (ts_plan_ds_grad_acc_bytes), on the compute stream before the gradients go to the previous
 * stage. Kernels: two parameter tensors a layer with parameters (weight and bias); BF16_Optimizer
 * launches two per tensor (the cast and the add), AccumulateGrad one; each at the host cost of
 * a per-tensor Python loop's op (TS_TORCH_OPTIM_OP_US). */
static void ds_grad_accumulate(gen *g, int k, int a, int b, int u)
{
  const ts_plan *p = g->p;
  double per = ts_plan_ds_grad_acc_bytes(p, u);
  double params = 0.0;
  int tensors = 0;
  for (int i = a; i < b; i++) {
    double n = g->layer_params[i];
    params += n;
    tensors += n > 0 ? 2 : 0;
  }
  if (!(per > 0) || !(params > 0))
    return;
  /* A per-tensor loop of small ops (update_hp_grads; autograd's AccumulateGrad per parameter):
   * each launch at the published per-op cost of such a loop, not the layer-kernel floor. */
  ts_op_shape sh =
      grad_pass_shape(tensors * (per > 3.0 * p->model->dtype_bytes ? 2 : 1), TS_TORCH_OPTIM_OP_US);
  emit_compute(g, TS_CAT_OTHER, 0, per * params, &sh,
               lbl(g, stage_slot(g, k, L_DS_GRAD_ACC), "stage %d gradient accumulation", k));
}

/* fsdp1: PyTorch FSDP's FlatParameter makes a layer's gradient for its reduce-scatter in passes of
 * its own, every micro-batch (ts_plan_fsdp1_grad_bytes counts them), after the layer's weight
 * gradient; the reduce-scatter waits for them. On the compute stream: autograd's concatenation
 * is, and the post-backward stream's cast and division take their SMs from the next layer's
 * backward GEMMs, which fill every SM (they run beside them, not under them). */
static void fsdp1_grad(gen *g, int i)
{
  const ts_plan *p = g->p;
  double n = g->layer_params[i], per = ts_plan_fsdp1_grad_bytes(p);
  if (!(per > 0) || !(n > 0) || ts_plan_grad_ranks(p) <= 1)
    return;
  ts_op_shape sh = grad_pass_shape(p->fsdp1 == 2 ? 3 : 2, 0.0);
  g->wgrad_op[i] = emit_compute(
      g, TS_CAT_BWD, 0, per * n, &sh,
      lbl(g, layer_slot(g, i, L_FSDP1_GRAD), "%s flat gradient (fsdp1)", p->model->layers[i].name));
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
    /* DeepSpeed's PipelineEngine (_exec_forward_pass) keeps only its tp slice of the output it
     * sent and frees the rest; _exec_backward_pass all-gathers the whole output back over tp
     * (PartitionedTensor.full) before autograd runs, one more gather than Megatron-LM's. */
    if (gather && p->pipe_engine_ds)
      boundary_gather(g, b - 1, k, L_DS_REGATHER, "output re-gather");
  }
  gboolean full = ts_plan_micro_recomputed(p, u, p->n_micro);
  /* pipe-engine=deepspeed: the output and the received gradient are rebuilt from their
   * partitions' metadata (PartitionedTensor.from_meta, .tolist() of a CUDA tensor): the host
   * waits for the device before the backward. */
  if (p->pipe_engine_ds && k < p->nstages - 1)
    g->sync_next = TRUE;
  if (p->zero >= 3 && !g->keep_gathered) {
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
  /* Where one group's collectives run in issue order (serial_dep), each bucket's reduction is
   * issued as its last layer's gradient is ready, between the backward's gathers, as the
   * frameworks' post-backward hooks issue it; elsewhere the order of the trace does not matter
   * (the dependencies alone place it) and the reductions follow the pass. */
  gboolean inline_sync = sync && g->ser_group[0] >= 0;
  grad_sync gs;
  sync_begin(&gs);
  for (int i = b - 1; i >= a;) {
    if (!full || p->unit[i] < 0) {
      bwd_layer(g, i, FALSE);
      fsdp1_grad(g, i);
      if (inline_sync)
        sync_layer(g, &gs, i);
      i--;
      continue;
    }
    /* Full recomputation (Chen et al. 2016; Korthikanti et al. 2022, section 5): re-run the
     * block's forward from its kept input, then its backward. */
    int u0 = MAX(p->unit[i], a);
    for (int j = u0; j <= i; j++)
      if (!ts_plan_recompute_skips(p, j))
        fwd_layer(g, j, TRUE);
    for (int j = i; j >= u0; j--) {
      bwd_layer(g, j, TRUE);
      fsdp1_grad(g, j);
      if (inline_sync)
        sync_layer(g, &gs, j);
    }
    i = u0 - 1;
  }
  g->sync_next = FALSE;
  if (p->pipe_engine_ds)
    ds_grad_accumulate(g, k, a, b, u);
  if (k > 0) {
    gboolean gather;
    double bytes = boundary_bytes(g, a - 1, &gather);
    p2p(g, TS_OP_SEND, S_SEND_B, (k - 1) % P, bytes, tag(g, TRUE, k - 1, u),
        lbl(g, stage_slot(g, k, L_SEND_B), "send gradients %s stage %d", p->model->layers[a].name,
            k));
  }
  if (inline_sync)
    sync_end(g, &gs);
  else if (sync)
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
          base + (me == 0), text_label_role(g, "send tied embedding gradient", TS_ROLE_TIED_GRAD));
  for (int k = 0; me >= 0 && k < n; k++)
    if (k != me) {
      int r = p2p(g, TS_OP_RECV, S_RECV_F, dev[k], MAX(copy[me], copy[k]) * p->model->dtype_bytes,
                  base + (k == 0),
                  text_label_role(g, "recv tied embedding gradient", TS_ROLE_TIED_GRAD));
      g_array_append_val(g->sync, r);
    }
  g_free(dev);
  g_free(copy);
}

/* replica-reduce=end: PaLM's two pods exchange gradients over the data-centre network only once
 * every core has finished computing them ("the transfer does not start until each core finishes
 * computing the gradients", Chowdhery et al. 2022, section 4 and its Figure 2; the 2.5% it costs
 * against perfect weak scaling is "a lack of overlap between the backward pass and the cross-pod
 * gradient reduction"). Each rank all-reduces its whole reduced shard with the same shard of the
 * other replicas, one collective after every reduce-scatter, and the optimizer waits for it. */
static void replicas_at_end(gen *g)
{
  if (g->rep_end_bytes == NULL)
    return;
  double bytes = 0;
  for (int i = 0; i < g->p->model->nlayers; i++)
    bytes += g->rep_end_bytes[i];
  if (!(bytes > 0))
    return;
  ts_op op = coll_op(g, TS_COLL_ALLREDUCE, g->g_rep, bytes, TS_CAT_COMM_DP, S_DP);
  /* Tagged with every layer, as each bucket's all-reduce is with its own: trainsim validate
   * reads the gradients it carries from the tag (untagged it carried none and failed). */
  g_strlcpy(g->label, "grad shard all-reduce across replicas, after the backward", sizeof g->label);
  int id = emit(g, &op, bucket_label(g, 0, g->p->model->nlayers - 1), (const int *)g->sync->data,
                (int)g->sync->len);
  chip_stall(g, g->g_rep, TS_COLL_ALLREDUCE);
  g_array_append_val(g->sync, id);
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
  if (p->dp_overlap) {
    /* dp-overlap: the gathers run layer by layer ahead of the next step's forward
     * (dp_overlap_gathers); in the steady state that is this step's forward. */
    emit_compute(g, TS_CAT_OTHER, 0, 0, NULL, text_label(g, "step end"));
    return;
  }
  if (dense > 0 && ts_plan_shard_ranks(p) > 1) {
    ts_op op = coll_op(g, TS_COLL_ALLGATHER, g->g_dp, dense * D, TS_CAT_COMM_DP, 0);
    emit_main(g, &op, text_label_role(g, "updated param all-gather", TS_ROLE_PARAM_GATHER));
    any = TRUE;
  }
  if (expert > 0 && ts_plan_shard_ranks(p) / p->ep > 1) {
    ts_op op = coll_op(g, TS_COLL_ALLGATHER, g->g_edp, expert * D, TS_CAT_COMM_DP, 0);
    emit_main(g, &op, text_label_role(g, "updated expert param all-gather", TS_ROLE_EXPERT_PARAMS));
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
  double D = m->dtype_bytes, K = ts_plan_optimizer_bytes_per_param(m),
         F = ts_plan_optimizer_flops_per_param(m), shard = psi / p->ps;
  char h[48];
  int *deps = (int *)g->sync->data, nd = (int)g->sync->len, upd;
  if (p->ps_placement == TS_PS_COLOCATED) {
    /* A colocated server updates its shard on its worker's chip. */
    for (int k = 0; k < nd; k++)
      pend(g, deps[k]);
    ts_op_shape sh;
    ts_plan_optimizer_shape(&sh);
    upd = emit_compute(g, TS_CAT_OPTIMIZER, F * shard, shard * (2.0 * D + 2.0 * K), &sh,
                       text_label_role(g, "ps update (colocated server shard)", TS_ROLE_PS_UPDATE));
  } else {
    upd = emit_delay(g, S_PS, TS_CAT_OPTIMIZER, TS_RES_HOST_CPU, TS_ROLE_PS_UPDATE,
                     F * shard / p->topo->chip.host_flops,
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
    pull =
        emit_ps(g, TS_CAT_COMM_DP, TS_ROLE_PARAM_GATHER, D * psi, text_label(g, g->label), &upd, 1);
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
  double D = m->dtype_bytes, K = ts_plan_optimizer_bytes_per_param(m),
         F = ts_plan_optimizer_flops_per_param(m);
  int *deps = (int *)g->sync->data, nd = (int)g->sync->len;
  int prev;
  if (p->offload == TS_OFFLOAD_NVME)
    prev = nvme(g, K * local, "read optimizer state", deps, nd);
  prev = emit_delay(g, S_HOST, TS_CAT_OPTIMIZER, TS_RES_HOST_CPU, TS_ROLE_OPTIMIZER,
                    F * local / p->topo->chip.host_flops, text_label(g, "host CPU optimizer step"),
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
  double D = m->dtype_bytes, K = ts_plan_optimizer_bytes_per_param(m),
         F = ts_plan_optimizer_flops_per_param(m);
  if (p->ps > 0) {
    ps_step(g, psi);
    return;
  }
  if (p->offload != TS_OFFLOAD_NONE) {
    offload_step(g, local);
    return;
  }
  /* Adam reads the gradient, reads and writes the master weights and both moments, and writes
   * the compute copy of the weights: about 12 FLOP per parameter. Around it, a mixed-precision
   * step (Megatron-LM's Float16Optimizer, as PyTorch AMP does it) copies the 16-bit gradients
   * to fp32 (D read, 4 written), unscales them checking for overflow (4 + 4) and clips them by
   * their global norm (4 read for the norm, 4 + 4 to scale): 2D + 2K + D + 28 bytes a
   * parameter in all (60 in fp16 / bf16, not the 28 of Adam alone); in fp32 the gradients are
   * already fp32 (no copy, no master copy): 2D + 2K + 20. XLA (a systolic chip) fuses the
   * update into one pass over the parameters with no loss scaling: Adam's bytes and the norm's
   * read of the gradients, 2D + 2K + 4. SGD with momentum has one moment to read and write
   * (K and F from ts_plan_optimizer_bytes_per_param and _flops_per_param). */
  for (guint k = 0; k < g->sync->len; k++)
    pend(g, g_array_index(g->sync, int, k));
  ts_op_shape sh;
  ts_plan_optimizer_shape(&sh);
  ts_plan_sgd_loop_shape(p, g->device, &sh);
  double around = p->topo->chip.systolic > 0 ? 4.0 : D < 4 ? D + 28.0 : 20.0;
  double bytes = local * (2.0 * D + 2.0 * K + around);
  if (p->opt_bertadam)
    bytes = ts_plan_bertadam_shape(p, g->device, &sh);
  emit_compute(g, TS_CAT_OPTIMIZER, F * local, bytes, &sh, text_label(g, "optimizer step"));
  if (p->zero == 1 || p->zero == 2)
    gather_updated(g);
}

/* dp-overlap (Megatron-LM's --overlap-param-gather with the distributed optimizer): the
 * all-gather of the parameters the previous optimizer step updated runs per layer on its own
 * stream, in the order the forward pass uses them, and each layer's forward waits only for its
 * own. A trace is one step of a steady state, so the gathers the step after this one would
 * issue are issued at the start of this one. */
static void dp_overlap_gathers(gen *g)
{
  const ts_plan *p = g->p;
  const ts_model *m = p->model;
  int P = p->degree[TS_AX_PP], prev = -1;
  for (int c = 0; c < p->chunks; c++) {
    int k = c * P + g->device;
    for (int i = p->stage_first[k]; i < p->stage_first[k + 1]; i++) {
      double bytes = g->layer_params[i] * m->dtype_bytes;
      if (bytes <= 0 || ts_plan_shard_ranks(p) <= 1)
        continue;
      gboolean expert = p->exec[i].expert;
      if (expert && ts_plan_shard_ranks(p) / p->ep <= 1)
        continue;
      ts_op op = coll_op(g, TS_COLL_ALLGATHER, expert ? g->g_edp : g->g_dp, bytes, TS_CAT_COMM_DP,
                         S_PARAM);
      prev = emit(
          g, &op,
          lbl(g, layer_slot(g, i, L_PGATHER), "%s updated param all-gather", m->layers[i].name),
          prev >= 0 ? &prev : NULL, prev >= 0 ? 1 : 0);
      g->pgather[i] = prev;
    }
  }
}

/* A trace axis as ts_plan_trace adds it; `kind` is the ts_axis_kind, or AX_EP / AX_SHARD. */
enum { AX_EP = -1, AX_SHARD = -2 };
typedef struct {
  const char *name;
  int size;
  gboolean symmetric;
  const ts_group_shape *shape;
  int kind;
} plan_axis;

/* The plan's trace axes, in order. With expert parallelism the dp axis is two trace axes: its
 * inner ep ranks and the rest; with hybrid sharding its inner shard ranks and the replicas. The
 * cp axis exists only when cp > 1 (traces without it are unchanged), each cp rank a program of
 * its own: the ring's last rank sends to its first, which a symmetric axis cannot say. Only the
 * shapes depend on the placement. */
static int plan_axes(const ts_plan *p, plan_axis *out)
{
  int n = 0;
  gboolean hybrid = p->shard < p->degree[TS_AX_DP];
  for (int a = 0; a < TS_AX_N; a++) {
    if (a == TS_AX_CP && p->degree[a] <= 1)
      continue;
    gboolean cut = a == TS_AX_DP && p->ep > 1;
    gboolean hcut = a == TS_AX_DP && hybrid;
    int size = cut ? p->degree[a] / p->ep : hcut ? p->degree[a] / p->shard : p->degree[a];
    out[n++] = (plan_axis){ts_axis_kind_name(a), size, a != TS_AX_PP && a != TS_AX_CP,
                           cut    ? &p->edp_shape
                           : hcut ? &p->rep_shape
                                  : &p->shape[a],
                           a};
  }
  if (p->ep > 1)
    out[n++] = (plan_axis){"ep", p->ep, TRUE, &p->ep_shape, AX_EP};
  if (hybrid)
    out[n++] = (plan_axis){"shard", p->shard, TRUE, &p->shard_shape, AX_SHARD};
  return n;
}

/* Bytes a trace may take before ts_plan_trace refuses it, in *limit, and what set them, in
 * *source: TRAINSIM_MAX_MEMORY (a size, e.g. 16GiB) when set, else the machine's available
 * memory (MemAvailable, shared by the workers of a search or sweep); 0 when neither is known
 * (no check). FALSE for a malformed TRAINSIM_MAX_MEMORY (ts_max_memory_env's error). */
static gboolean trace_memory_limit(double *limit, const char **source, GError **error)
{
  *source = "TRAINSIM_MAX_MEMORY";
  if (!ts_max_memory_env(limit, error))
    return FALSE;
  if (*limit > 0)
    return TRUE;
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/meminfo", &text, NULL, NULL))
    return TRUE;
  const char *q = strstr(text, "MemAvailable:");
  /* Worker processes of a search or sweep (ts_pool) each take their share. */
  const char *share = g_getenv("TRAINSIM_MEMORY_SHARE");
  double n = share != NULL ? g_ascii_strtod(share, NULL) : 1;
  *source = share != NULL ? "this worker's share of the available" : "the available";
  if (q != NULL)
    *limit = g_ascii_strtod(q + strlen("MemAvailable:"), NULL) * 1024.0 / MAX(n, 1);
  return TRUE;
}

double ts_plan_trace_estimate_bytes(gsize program_bytes, int nprograms)
{
  /* Every program holds about what the first does (same layers, micro-batches and ring
   * steps); the replay's per-op state and the allocator's slack take about as much again.
   * Measured (run -t tpu-v4-16x16x16 -m palm-540b -b 1024, max RSS): dp=64,pp=4,cp=16 0.81 GB
   * for an estimate of 0.76 GB; dp=16,pp=4,cp=64 9.76 GB for 10.95 GB. */
  return 2.0 * (double)program_bytes * nprograms;
}

ts_trace *ts_plan_trace(const ts_plan *p, GError **error)
{
  const ts_model *m = p->model;
  ts_trace *tr = ts_trace_new(p->topo);
  int axis_of[TS_AX_N], ax_ep = -1, ax_shard = -1;
  gboolean hybrid = p->shard < p->degree[TS_AX_DP];
  plan_axis axes[TS_MAX_AXES];
  int naxes = plan_axes(p, axes);
  for (int a = 0; a < TS_AX_N; a++)
    axis_of[a] = -1;
  for (int k = 0; k < naxes; k++) {
    int id = ts_trace_add_axis(tr, axes[k].name, axes[k].size, axes[k].symmetric, axes[k].shape);
    if (axes[k].kind == AX_EP)
      ax_ep = id;
    else if (axes[k].kind == AX_SHARD)
      ax_shard = id;
    else
      axis_of[axes[k].kind] = id;
  }
  int CP = p->degree[TS_AX_CP];
  ts_trace_set_programs(tr, p->degree[TS_AX_PP] * CP);
  gen g = {0};
  g.cur_layer = g.cur_mb = g.cur_lo = g.cur_hi = -1;
  g.p = p;
  g.tr = tr;
  g.g_tp = ts_trace_group(tr, &axis_of[TS_AX_TP], 1);
  /* The gradient group: dp's axes (or its shard axis when hybrid), then cp; then tp for the
   * layers replicated over tp. */
  int dpa[TS_MAX_AXES], ndpa = 0;
  if (hybrid) {
    dpa[ndpa++] = ax_shard;
  } else {
    if (p->ep > 1)
      dpa[ndpa++] = ax_ep;
    dpa[ndpa++] = axis_of[TS_AX_DP];
  }
  if (CP > 1)
    dpa[ndpa++] = axis_of[TS_AX_CP];
  dpa[ndpa] = axis_of[TS_AX_TP];
  g.g_dp = ts_trace_group(tr, dpa, ndpa);
  g.g_rep = hybrid ? ts_trace_group(tr, &axis_of[TS_AX_DP], 1) : -1;
  int edpa[2] = {axis_of[TS_AX_DP], axis_of[TS_AX_CP]};
  g.g_edp = p->ep > 1 ? ts_trace_group(tr, edpa, CP > 1 ? 2 : 1) : g.g_dp;
  g.g_ep = p->ep > 1 ? ts_trace_group(tr, &ax_ep, 1) : -1;
  g.ax_cp = axis_of[TS_AX_CP];
  g.g_cp =
      CP > 1 && p->cp_ring == TS_CP_RING_TORCH ? ts_trace_group(tr, &axis_of[TS_AX_CP], 1) : -1;
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
  g.rep_end_bytes = hybrid && p->replica_reduce_end ? g_new0(double, MAX(m->nlayers, 1)) : NULL;
  g.ag_op = g_new(int, m->nlayers > 0 ? m->nlayers : 1);
  g.wgrad_op = g_new(int, m->nlayers > 0 ? m->nlayers : 1);
  g.keep_gathered = p->fsdp2 && p->zero >= 3 && p->degree[TS_AX_PP] > 1;
  g.resident = g_new0(gboolean, m->nlayers > 0 ? m->nlayers : 1);
  int nslots = m->nlayers * L_NLAYER_SLOTS + p->nstages * L_NSTAGE_SLOTS;
  g.labels = g_new(int, nslots);
  g.shape_of = g_new(const ts_op_shape *, (gsize)MAX(m->nlayers, 1) * N_PASSES);
  g.shape_done = g_new0(gboolean, (gsize)MAX(m->nlayers, 1) * N_PASSES);
  g.layer_params = g_new(double, m->nlayers > 0 ? m->nlayers : 1);
  for (int i = 0; i < m->nlayers; i++)
    g.layer_params[i] = ts_plan_layer_params(p, i);
  g.bucket_labels = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  g.contend_s = g_hash_table_new_full(contend_hash, contend_equal, g_free, g_free);
  g.contend_label = -1;
  g.contend_on = contend_applies(p);
  /* ZeRO-3's shard groups serialise on a GPU (serial_dep); a TPU's XLA schedules its own. */
  gboolean serial = p->zero >= 3 && !(p->topo->chip.systolic > 0);
  g.ser_group[0] = serial ? g.g_dp : -1;
  g.ser_group[1] = serial && g.g_edp != g.g_dp ? g.g_edp : -1;
  for (int k = 0; k < nslots; k++)
    g.labels[k] = -1;
  tr->meta.model = g_strdup(m->name);
  tr->meta.split = g_strdup(p->split_text);
  tr->meta.topology = g_strdup(p->topo->name);
  tr->meta.producer = g_strdup_printf("trainsim %s plan", TS_VERSION);
  tr->meta.samples = (double)p->opt.global_batch;
  tr->meta.model_flops = p->model_flops_per_step;
  tr->meta.tokens_per_sample = p->model->t_seq > 0 ? (double)p->model->t_seq : 0;

  int P = p->degree[TS_AX_PP];
  GArray *order = g_array_new(FALSE, FALSE, sizeof(ts_sched_item));
  gboolean refused = FALSE;
  if (p->dp_overlap)
    g.pgather = g_new(int, m->nlayers > 0 ? m->nlayers : 1);
  for (int prog = 0; prog < P * CP; prog++) {
    int d = prog % P;
    g.prog = prog;
    g.device = d;
    g.cprank = prog / P;
    g.last = -1;
    g.ser_last[0] = g.ser_last[1] = -1;
    g_array_set_size(g.pend, 0);
    g_array_set_size(g.sync, 0);
    /* The programs of a split's stages are alike: room for the previous one's ops (plus a
     * sixteenth) is made at once instead of by doubling (capacity only, issue 15). */
    if (prog > 0) {
      const ts_program *prev = &tr->programs[prog - 1];
      guint next = prev->ext != NULL ? prev->ext->len : 0;
      ts_program_reserve(tr, prog, prev->nops + prev->nops / 16 + 16,
                         prev->ndeps_total + prev->ndeps_total / 16 + 16,
                         next > 0 ? next + next / 16 + 16 : 0);
    }
    for (int i = 0; i < m->nlayers; i++) {
      g.ag_op[i] = g.wgrad_op[i] = -1;
      if (g.rep_end_bytes != NULL)
        g.rep_end_bytes[i] = 0;
      g.resident[i] = FALSE;
      if (g.pgather != NULL)
        g.pgather[i] = -1;
    }
    if (p->dp_overlap)
      dp_overlap_gathers(&g);
    g_array_set_size(order, 0);
    ts_sched_order(p->schedule, P, p->chunks, (int)p->n_micro, d, p->fsdp2, order);
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
      g.cur_mb = it->micro;
      if (!it->bwd)
        forward_pass(&g, it->chunk, it->micro);
      else
        backward_pass(&g, it->chunk, it->micro,
                      (p->zero >= 2 && !g.keep_gathered) || last_bwd[it->chunk] == (int)k);
    }
    g.cur_mb = -1;
    g_free(last_bwd);
    tied_exchange(&g);
    replicas_at_end(&g);
    optimizer_step(&g);
    /* A split whose programs would exceed the machine (context parallelism's ring steps x
     * micro-batches x stages x every cp rank's own program: 384 programs of ~700,000 ops
     * for PaLM's cp=128 on two pods) is refused after its first program, with the estimate,
     * instead of being killed by the kernel part-way. */
    if (prog == 0 && P * CP > 1) {
      double limit;
      const char *source;
      gboolean valid = trace_memory_limit(&limit, &source, error);
      double need = ts_plan_trace_estimate_bytes(ts_program_bytes(&tr->programs[0]), P * CP);
      if (!valid || (limit > 0 && need > limit)) {
        char nb[32], lb[32];
        if (valid)
          g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                      "the trace of %s would need about %s (%d programs of %d ops), over %s %s; "
                      "set TRAINSIM_MAX_MEMORY=SIZE above the estimate to run it anyway",
                      p->split_text, ts_fmt_bytes(nb, sizeof nb, need), P * CP,
                      tr->programs[0].nops, source, ts_fmt_bytes(lb, sizeof lb, limit));
        refused = TRUE;
        break;
      }
    }
  }
  g_array_unref(order);
  g_array_unref(g.pend);
  g_array_unref(g.zorder);
  g_array_unref(g.sync);
  g_free(g.rep_end_bytes);
  g_free(g.ag_op);
  g_free(g.wgrad_op);
  g_free(g.resident);
  g_free(g.pgather);
  g_free(g.labels);
  g_free(g.shape_of);
  g_free(g.shape_done);
  g_free(g.layer_params);
  g_hash_table_unref(g.bucket_labels);
  g_hash_table_unref(g.contend_s);
  /* The collective algorithm is resolved here, once, so every backend replays the same one. */
  if (refused || !ts_trace_resolve_algos(tr, p->topo, error)) {
    ts_trace_free(tr);
    return NULL;
  }
  return tr;
}

char *ts_plan_trace_key(const ts_plan *p)
{
  /* A parameter server's transfers take the bandwidth of dp's dimensions (ts_plan_ps_xfer):
   * the only op fields a placement changes besides the collectives' algorithms. */
  if (p->ps > 0)
    return NULL;
  GString *k = g_string_new(NULL);
  g_string_append_printf(k, "%p %p %s|%" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %a %d|",
                         (const void *)p->model, (const void *)p->topo, p->split_text,
                         p->opt.global_batch, p->opt.micro_batch, p->opt.bucket_bytes,
                         (int)p->opt.algo);
  g_string_append_printf(k, "%" G_GINT64_FORMAT " %" G_GINT64_FORMAT "|", p->micro_batch,
                         p->n_micro);
  for (int a = 0; a < TS_AX_N; a++)
    g_string_append_printf(k, "%d ", p->degree[a]);
  g_string_append_printf(k, "|%d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d|",
                         (int)p->schedule, p->chunks, p->nstages, (int)p->recompute, p->sp, p->zero,
                         (int)p->offload, p->ep, p->shard, p->tp_overlap, p->dp_overlap,
                         p->precision, p->fsdp2, (int)p->kernels, p->p2p_blocking, p->load_sync,
                         p->tp_grad_serial);
  g_string_append_printf(k, "%d %d %d %d %d %d %d|", p->pipe_engine_ds, p->launch_blocking,
                         p->dp_engine_apex, p->replica_reduce_end, p->fp8_gather,
                         p->separate_projections, p->dp_engine_autograd);
  for (int s = 0; s <= p->nstages; s++)
    g_string_append_printf(k, "%d ", p->stage_first[s]);
  for (int i = 0; i < p->model->nlayers; i++)
    g_string_append_c(k, p->layer_mode[i] == TS_LAYER_MODE_DP ? 'd' : 't');
  /* The chip's stall in data-centre-network transfers (chip_stall) is a duration in the trace
   * that depends on the dimensions the gradient groups lie on. */
  for (int a = 0; a < TS_AX_N; a++)
    g_string_append_printf(k, "|%a",
                           ts_coll_chip_stall_s(p->topo, TS_COLL_ALLREDUCE, &p->shape[a]));
  g_string_append_printf(k, "|%a", ts_coll_chip_stall_s(p->topo, TS_COLL_ALLREDUCE, &p->rep_shape));
  g_string_append_printf(k, "|%a",
                         ts_coll_chip_stall_s(p->topo, TS_COLL_ALLREDUCE, &p->shard_shape));
  return g_string_free(k, FALSE);
}

/* Every collective of the trace back to the algorithm the generator stated (coll_op: the
 * plan's; ps_as_collectives' direct ones never reach here, ts_plan_trace_key refuses servers),
 * unresolved. */
static void unresolve_colls(ts_trace *tr, ts_coll_algo algo)
{
  for (int q = 0; q < tr->nprograms; q++) {
    ts_program *prog = &tr->programs[q];
    for (int i = 0; i < prog->nops; i++)
      if (ts_program_op_kind(prog, i) == TS_OP_COLL)
        ts_program_set_resolved(prog, i, (int)algo, 0);
  }
}

gboolean ts_plan_trace_replace(const ts_plan *p, ts_trace *tr, GError **error)
{
  plan_axis axes[TS_MAX_AXES];
  int naxes = plan_axes(p, axes);
  gboolean same = naxes == tr->naxes && tr->nranks == p->topo->nchips;
  for (int a = 0; same && a < naxes; a++)
    same = strcmp(tr->axes[a].name, axes[a].name) == 0 && tr->axes[a].size == axes[a].size &&
           tr->axes[a].symmetric == axes[a].symmetric;
  for (guint i = 0; same && i < tr->groups->len; i++)
    same = ((const ts_group *)g_ptr_array_index(tr->groups, i))->members == NULL;
  if (!same) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "split '%s': a trace of another plan cannot be re-placed", p->split_text);
    return FALSE;
  }
  for (int a = 0; a < naxes; a++)
    tr->axes[a].shape = *axes[a].shape;
  /* Each group's shape is its axes' pieces in order, as ts_trace_group makes it. */
  for (guint i = 0; i < tr->groups->len; i++) {
    ts_group *g = g_ptr_array_index(tr->groups, i);
    memset(&g->shape, 0, sizeof g->shape);
    for (int k = 0; k < g->naxes; k++) {
      const ts_axis *a = &tr->axes[g->axes[k]];
      for (int j = 0; j < a->shape.npieces && g->shape.npieces < TS_MAX_PIECES; j++)
        g->shape.p[g->shape.npieces++] = a->shape.p[j];
    }
  }
  unresolve_colls(tr, p->opt.algo);
  recontend(p, tr);
  return ts_trace_resolve_algos(tr, p->topo, error);
}
