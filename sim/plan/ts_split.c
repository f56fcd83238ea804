/* ts_split: the --split specification and its placement of parallel axes on array dimensions. */
#include "ts_plan.h"
#include "ts_util.h"

#include <stdarg.h>
#include <string.h>

static const char *axis_names[TS_AX_N] = {"tp", "dp", "pp", "cp"};

const char *ts_axis_kind_name(ts_axis_kind a)
{
  return (unsigned)a < TS_AX_N ? axis_names[a] : "?";
}

const char *ts_schedule_name(ts_schedule s)
{
  static const char *const n[] = {"gpipe", "1f1b", "interleaved"};
  return (unsigned)s < G_N_ELEMENTS(n) ? n[s] : "?";
}

const char *ts_recompute_name(ts_recompute r)
{
  static const char *const n[] = {"none", "selective", "full", "stage", "op", "dots"};
  return (unsigned)r < G_N_ELEMENTS(n) ? n[r] : "?";
}

const char *ts_loss_name(ts_loss l)
{
  static const char *const n[] = {"fused", "eager"};
  return (unsigned)l < G_N_ELEMENTS(n) ? n[l] : "?";
}

const char *ts_kernels_mode_name(ts_kernels_mode k)
{
  static const char *const n[] = {"fused", "eager", "eager-fused-rmsnorm"};
  return (unsigned)k < G_N_ELEMENTS(n) ? n[k] : "?";
}

const char *ts_offload_name(ts_offload o)
{
  static const char *const n[] = {"none", "cpu", "nvme"};
  return (unsigned)o < G_N_ELEMENTS(n) ? n[o] : "?";
}

static void rule_free(gpointer p)
{
  ts_layer_rule *r = p;
  g_free(r->glob);
  g_free(r);
}

/* One more "; "-separated piece of a note. */
static void noop_add(GString *n, const char *what)
{
  g_string_append_printf(n, "%s%s", n->len ? "; " : "", what);
}

char *ts_split_noop_options(const ts_split *s, int dp, gint64 micro_batches)
{
  GString *n = g_string_new(NULL);
  if (s->tp_grad_serial && s->degree[TS_AX_TP] <= 1)
    noop_add(n, "tp-grad=serial has no effect without tp (tp = 1)");
  /* A rule making layers data-parallel over the tp axis: with no tp axis there is nothing to
   * re-purpose (the rules are checked to match a layer when the split is planned). */
  for (guint i = 0; s->rules != NULL && i < s->rules->len && s->degree[TS_AX_TP] <= 1; i++) {
    const ts_layer_rule *r = g_ptr_array_index(s->rules, i);
    if (r->mode != TS_LAYER_MODE_DP)
      continue;
    g_autofree char *what = g_strdup_printf(
        "%s%s=dp has no effect without tp (tp = 1: every layer is data-parallel already)",
        r->by_kind ? "kind:" : "name:", r->by_kind ? ts_layer_kind_name(r->kind) : r->glob);
    noop_add(n, what);
  }
  if (s->early_stop && s->fsdp2)
    noop_add(n, "early-stop has no effect with fsdp2 (FSDP2's non-reentrant checkpoint stops "
                "early already)");
  if (s->p2p_blocking && s->degree[TS_AX_PP] <= 1)
    noop_add(n, "p2p=blocking has no effect without pp (pp = 1)");
  if (s->replica_reduce_end && (s->shard <= 0 || s->shard >= dp))
    noop_add(n, "replica-reduce=end has no effect without hybrid sharding (shard < dp: no "
                "replicas to all-reduce across)");
  if (s->schedule == TS_SCHED_INTERLEAVED && s->degree[TS_AX_PP] <= 1)
    noop_add(n, "schedule=interleaved has no effect without pp (pp = 1: one chunk, 1F1B)");
  /* Gradients are summed over dp x cp ranks; ZeRO-2/3 and offload reduce through buckets of
   * their own (ts_plan_bucket_bytes). */
  if (s->bucket_copy && dp * MAX(s->degree[TS_AX_CP], 1) <= 1)
    noop_add(n, "buckets=copy has no effect without dp or cp (dp = cp = 1: no gradient "
                "buckets)");
  else if (s->bucket_copy && (s->zero >= 2 || s->offload != TS_OFFLOAD_NONE))
    noop_add(n, "buckets=copy has no effect with zero=2, zero=3 or offload (their reduce "
                "buckets hold the gradients)");
  if (s->fp8_cache && micro_batches <= 1)
    noop_add(n, "fp8-cache has no effect with one micro-batch per step (each weight is cast "
                "once either way)");
  if (s->recompute_keep_last && micro_batches <= 1)
    noop_add(n, "recompute=stage:except-last recomputes nothing with one micro-batch per step "
                "(the last one is kept)");
  return n->len ? g_string_free(n, FALSE) : (g_string_free(n, TRUE), NULL);
}

void ts_split_free(ts_split *s)
{
  if (s == NULL)
    return;
  for (int a = 0; a < TS_AX_N; a++)
    g_free(s->place_names[a]);
  g_free(s->text);
  g_free(s->ep_place);
  g_free(s->stage_layers);
  if (s->rules != NULL)
    g_ptr_array_unref(s->rules);
  g_free(s);
}

/* Index of `v` in the NULL-terminated `names`, or -1. */
static int lookup(const char *const *names, const char *v)
{
  for (int i = 0; names[i] != NULL; i++)
    if (strcmp(names[i], v) == 0)
      return i;
  return -1;
}

/* Every OPTION=VALUE key a split takes besides its axes, in the order the unknown-axis error and
 * the --split help list them (one list, so neither forgets a new option). */
static const char *const split_options[] = {
    "zero",       "shard",        "schedule",    "recompute",
    "sp",         "tp-overlap",   "dp-overlap",  "offload",
    "ps",         "ps-placement", "stages",      "ep",
    "precision",  "attention",    "attn-kernel", "attn-block",
    "attn-bwd",   "fp8-cache",    "buckets",     "p2p",
    "cp-ring",    "load",         "tp-grad",     "pipe-engine",
    "dp-engine",  "launch",       "loss",        "kernels",
    "fsdp2",      "fsdp1",        "early-stop",  "replica-reduce",
    "fp8-gather", "projections",  "optimizer",   "layout",
    NULL};

char *ts_split_option_names(void)
{
  g_autofree char *opts = g_strjoinv(", ", (char **)split_options);
  return g_strconcat(opts, ", kind:K, name:GLOB", NULL);
}

/* A switch item's value: a bare key (val NULL) or on/true/1/yes sets *out TRUE, off/false/0/no
 * FALSE; anything else returns FALSE and leaves *out. */
static gboolean parse_switch(const char *val, gboolean *out)
{
  static const char *const on[] = {"on", "true", "1", "yes", NULL};
  static const char *const off[] = {"off", "false", "0", "no", NULL};
  if (val == NULL || lookup(on, val) >= 0)
    *out = TRUE;
  else if (lookup(off, val) >= 0)
    *out = FALSE;
  else
    return FALSE;
  return TRUE;
}

G_GNUC_PRINTF(4, 5)
static gboolean item_error(GError **error, const char *text, const char *item, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--split '%s': item '%s': expected %s", text, item,
              what);
  return FALSE;
}

/* An option item (not an axis): key=value, or a bare boolean such as `sp`. */
static gboolean parse_option(ts_split *s, const char *text, const char *item, const char *key,
                             const char *val, GError **error)
{
  if (strcmp(key, "zero") == 0) {
    gint64 z;
    if (val == NULL || !ts_parse_int(val, 0, 3, &z))
      return item_error(error, text, item, "zero=0, 1, 2 or 3 (ZeRO stage)");
    s->zero = (int)z;
  } else if (strcmp(key, "schedule") == 0) {
    if (val != NULL && strcmp(val, "gpipe") == 0) {
      s->schedule = TS_SCHED_GPIPE;
    } else if (val != NULL && strcmp(val, "1f1b") == 0) {
      s->schedule = TS_SCHED_1F1B;
    } else if (val != NULL && g_str_has_prefix(val, "interleaved")) {
      gint64 v = 2;
      const char *rest = val + strlen("interleaved");
      if (*rest != '\0' && (*rest != ':' || !ts_parse_int(rest + 1, 2, 1024, &v)))
        return item_error(error, text, item,
                          "schedule=interleaved:V with V, the model chunks per device, a whole "
                          "number in [2, 1024]");
      s->schedule = TS_SCHED_INTERLEAVED;
      s->chunks = (int)v;
    } else {
      return item_error(error, text, item, "schedule=gpipe, 1f1b or interleaved[:V]");
    }
  } else if (strcmp(key, "recompute") == 0) {
    static const char *const n[] = {"none", "selective", "full", "stage", "op", "dots", NULL};
    gint64 every = 1;
    gboolean keep_last = FALSE, mlpwi = FALSE;
    g_autofree char *name = g_strdup(val ? val : "");
    char *colon = strchr(name, ':');
    if (colon != NULL && g_str_has_prefix(name, "dots:")) {
      /* dots:except-mlpwi, MaxText's remat_policy=save_dot_except_mlpwi */
      if (strcmp(colon + 1, "except-mlpwi") != 0)
        return item_error(error, text, item, "recompute=dots or dots:except-mlpwi");
      *colon = '\0';
      mlpwi = TRUE;
    } else if (colon != NULL && g_str_has_prefix(name, "stage:")) {
      /* stage:except-last, torchgpipe's default checkpoint='except_last' */
      if (strcmp(colon + 1, "except-last") != 0)
        return item_error(error, text, item, "recompute=stage or stage:except-last");
      *colon = '\0';
      keep_last = TRUE;
    } else if (colon != NULL) {
      /* full:N, TorchTitan's "selective layer" checkpointing: every N-th block */
      *colon = '\0';
      if (strcmp(name, "full") != 0 || !ts_parse_int(colon + 1, 1, 1024, &every))
        return item_error(error, text, item,
                          "recompute=full:N with N, checkpoint every N-th block, a whole number "
                          "in [1, 1024]");
    }
    int v = val ? lookup(n, name) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "recompute=none, selective, full, full:N, stage, stage:except-last, op, "
                        "dots or dots:except-mlpwi");
    s->recompute = (ts_recompute)v;
    s->recompute_every = (int)every;
    s->recompute_keep_last = keep_last;
    s->recompute_mlpwi = mlpwi;
  } else if (strcmp(key, "sp") == 0) {
    if (!parse_switch(val, &s->sp))
      return item_error(error, text, item, "sp, sp=on or sp=off (sequence parallelism)");
  } else if (strcmp(key, "offload") == 0) {
    static const char *const n[] = {"none", "cpu", "nvme", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item, "offload=none, cpu or nvme");
    s->offload = (ts_offload)v;
  } else if (strcmp(key, "ps") == 0) {
    gint64 v;
    if (val == NULL || !ts_parse_int(val, 1, 1 << 20, &v))
      return item_error(error, text, item,
                        "ps=N, N parameter-server shards, a whole number in [1, 1048576]");
    s->ps = (int)v;
  } else if (strcmp(key, "ep") == 0) {
    gint64 v;
    const char *at = val != NULL ? strchr(val, '@') : NULL;
    g_autofree char *deg = at != NULL ? g_strndup(val, (gsize)(at - val)) : g_strdup(val);
    if (deg == NULL || !ts_parse_int(deg, 1, 1 << 20, &v) || (at != NULL && at[1] == '\0'))
      return item_error(error, text, item,
                        "ep=N or ep=N@DIM[+DIM], the expert-parallel degree inside dp, a whole "
                        "number in [1, 1048576], on some of dp's dimensions");
    s->ep = (int)v;
    g_free(s->ep_place);
    s->ep_place = at != NULL ? g_strdup(at + 1) : NULL;
  } else if (strcmp(key, "attention") == 0) {
    static const char *const n[] = {"unfused", "flash", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item, "attention=flash or unfused");
    s->attention = 1 + v;
  } else if (strcmp(key, "loss") == 0) {
    static const char *const n[] = {"fused", "eager", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "loss=fused (one fp32 copy of the logits) or eager (PyTorch's "
                        "cross_entropy on fp32 logits, not compiled)");
    s->loss = 1 + v;
  } else if (strcmp(key, "kernels") == 0) {
    static const char *const n[] = {"fused", "eager", "eager-fused-rmsnorm", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "kernels=fused (element-wise work in fused kernels: Megatron-LM, "
                        "torch.compile), eager (each element-wise op its own kernel, as "
                        "uncompiled PyTorch runs it) or eager-fused-rmsnorm (eager, RMSNorm "
                        "one kernel each way)");
    s->kernels = 1 + v;
  } else if (strcmp(key, "optimizer") == 0) {
    static const char *const n[] = {"fused", "bertadam", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "optimizer=fused (a multi-tensor step: apex FusedAdam / FusedLAMB, "
                        "foreach) or bertadam (BERT's BertAdam: a Python loop over the "
                        "parameter tensors, each op its own kernel)");
    s->opt_bertadam = v == 1;
  } else if (strcmp(key, "attn-kernel") == 0) {
    int v = val ? ts_attn_kernel_parse(val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "attn-kernel=fa2 (FlashAttention-2, PyTorch SDPA: the default), cudnn "
                        "(cuDNN fused attention, as Transformer Engine runs it on Hopper), triton "
                        "(FlashAttention's Triton kernel, MPT's attn_impl=triton) or fa1 "
                        "(FlashAttention 1)");
    s->attn_kernel = 1 + v;
  } else if (strcmp(key, "attn-block") == 0) {
    /* The block of a TPU's Pallas attention kernels (MaxText's sa_block_q / sa_block_kv and
     * their backward counterparts): FWD, or FWD:BWD when the backward's kernels use another. */
    gint64 f = 0, b = 0;
    const char *colon = val != NULL ? strchr(val, ':') : NULL;
    g_autofree char *fwd = colon != NULL ? g_strndup(val, (gsize)(colon - val)) : g_strdup(val);
    if (fwd == NULL || !ts_parse_int(fwd, 1, 1 << 20, &f) ||
        (colon != NULL && !ts_parse_int(colon + 1, 1, 1 << 20, &b)))
      return item_error(error, text, item,
                        "attn-block=N or attn-block=FWD:BWD, the tokens of a TPU attention "
                        "kernel's larger block (query or key), whole numbers in [1, 1048576]");
    s->attn_block_fwd = (int)f;
    s->attn_block_bwd = (int)(colon != NULL ? b : f);
  } else if (strcmp(key, "attn-bwd") == 0) {
    /* The Pallas attention backward on a TPU: separate dQ and dK/dV kernels (split, the
     * kernels' default) or one (fused, MaxText's sa_use_fused_bwd_kernel). */
    static const char *const n[] = {"split", "fused", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "attn-bwd=split (a TPU attention backward's dQ and dK/dV kernels apart, "
                        "the default) or fused (one kernel: sa_use_fused_bwd_kernel)");
    s->attn_bwd_fused = v == 1;
  } else if (strcmp(key, "fp8-cache") == 0) {
    if (!parse_switch(val, &s->fp8_cache))
      return item_error(error, text, item,
                        "fp8-cache, fp8-cache=on or fp8-cache=off (FP8 weights cast once per step, "
                        "with precision=fp8)");
  } else if (strcmp(key, "fsdp2") == 0) {
    if (!parse_switch(val, &s->fsdp2))
      return item_error(error, text, item, "fsdp2, fsdp2=on or fsdp2=off (with zero=3)");
  } else if (strcmp(key, "fp8-gather") == 0) {
    /* torchao's enable_fsdp_float8_all_gather (docs/splits.md): FSDP2 casts each Float8 GEMM
     * weight shard to float8 before its all-gather; on by default with fsdp2 and precision=fp8,
     * as TorchTitan's Float8 presets run it. Checked against the split in ts_plan_new. */
    gboolean on = FALSE;
    if (!parse_switch(val, &on))
      return item_error(error, text, item,
                        "fp8-gather, fp8-gather=on or fp8-gather=off (FSDP2's all-gather of the "
                        "FP8 GEMMs' weights in float8, with fsdp2 and precision=fp8)");
    s->fp8_gather = on ? 2 : 1;
  } else if (strcmp(key, "projections") == 0) {
    /* How the attention's q/k/v and a gated MLP's gate/up projections run (docs/splits.md):
     * separate (three and two GEMMs whose input gradients autograd sums: TorchTitan's Llama,
     * the default with fsdp2) or fused (one GEMM each: Megatron-LM's linear_qkv and gated
     * linear_fc1, the default otherwise). */
    static const char *const n[] = {"fused", "separate", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "projections=fused (q/k/v and gate/up one GEMM each: Megatron-LM) or "
                        "separate (a GEMM each, input gradients summed: TorchTitan's Llama)");
    s->projections = 1 + v;
  } else if (strcmp(key, "layout") == 0) {
    /* The activations' memory layout (docs/splits.md): nhwc (channels last, what tensor-core
     * convolutions run natively; the default) or nchw (PyTorch's default contiguous format). */
    static const char *const n[] = {"nhwc", "nchw", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "layout=nhwc (channels last, tensor cores' native layout) or nchw "
                        "(PyTorch's contiguous default: tensor-core convolutions transpose)");
    s->layout = 1 + v;
  } else if (strcmp(key, "fsdp1") == 0) {
    static const char *const n[] = {"off", "on", "fp32", NULL};
    int v = val ? lookup(n, val) : 1;
    if (v < 0)
      return item_error(error, text, item,
                        "fsdp1, fsdp1=on (gradients reduced in the parameter dtype), fsdp1=fp32 "
                        "(cast to fp32 and reduced in fp32) or fsdp1=off (with zero=2 or 3)");
    s->fsdp1 = v;
  } else if (strcmp(key, "early-stop") == 0) {
    if (!parse_switch(val, &s->early_stop))
      return item_error(error, text, item,
                        "early-stop, early-stop=on or early-stop=off (with recompute=full)");
  } else if (strcmp(key, "buckets") == 0) {
    static const char *const n[] = {"view", "copy", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "buckets=view (gradients live in the buckets) or copy (DDP's "
                        "gradient_as_bucket_view=False)");
    s->bucket_copy = v == 1;
  } else if (strcmp(key, "p2p") == 0) {
    /* How a stage's pipeline sends relate to its compute (docs/splits.md): async (the default,
     * torch.distributed.pipelining's isend, Megatron-Core's overlap_p2p_comm) or blocking. */
    static const char *const n[] = {"async", "blocking", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "p2p=async (sends overlap the next compute) or blocking (the compute "
                        "waits for each send: Megatron-LM, DeepSpeed's pipeline engine)");
    s->p2p_blocking = v == 1;
  } else if (strcmp(key, "replica-reduce") == 0) {
    /* When hybrid sharding's cross-replica all-reduce runs (docs/splits.md): overlap (the
     * default: each bucket's shard as soon as its reduce-scatter ends, FSDP HYBRID_SHARD) or end
     * (every shard once, after the step's last backward: PaLM's cross-pod transfer, Chowdhery
     * et al. 2022, section 4). */
    static const char *const n[] = {"overlap", "end", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "replica-reduce=overlap (each bucket's shard all-reduced across the "
                        "replicas beside the backward) or end (after the whole backward)");
    s->replica_reduce_end = v == 1;
  } else if (strcmp(key, "pipe-engine") == 0) {
    /* Which framework's pipeline engine runs the stages (docs/splits.md): megatron (the
     * default: Megatron-LM's schedules) or deepspeed (DeepSpeed's PipelineEngine, as
     * Megatron-DeepSpeed and GPT-NeoX run it). */
    static const char *const n[] = {"megatron", "deepspeed", "deepspeed-0.3", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "pipe-engine=megatron (Megatron-LM's pipeline), deepspeed (DeepSpeed's "
                        "PipelineEngine: gradients accumulated per micro-batch, output "
                        "re-gathered before each backward; needs pp > 1) or deepspeed-0.3 "
                        "(the same before DeepSpeed 0.4.0: ZeRO-1's gradients all-reduced)");
    s->pipe_engine_ds = v == 2 ? TS_PIPE_ENGINE_DS03 : v == 1 ? TS_PIPE_ENGINE_DS : 0;
  } else if (strcmp(key, "dp-engine") == 0) {
    /* Which framework holds the data-parallel gradients (docs/splits.md): megatron (the
     * default: the weight-gradient GEMMs add into Megatron-LM's gradient buffer, reduced in the
     * model's dtype), apex (apex's DistributedFusedAdam as NeMo-Megatron ran it in 2022) or
     * autograd (the 16-bit gradients accumulated in .grad by autograd, as Megatron-LM did
     * before its gradient_accumulation_fusion of February 2022). */
    static const char *const n[] = {"megatron", "apex", "autograd", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "dp-engine=megatron (Megatron-LM's gradient buffer), apex (apex's "
                        "DistributedFusedAdam: each micro-batch's gradients added into fp32 "
                        "buckets, reduce-scattered in fp32; needs zero=1) or autograd (each "
                        "micro-batch's 16-bit gradients added into .grad by autograd after the "
                        "first: Megatron-LM before February 2022)");
    s->dp_engine_apex = v == 1;
    s->dp_engine_autograd = v == 2;
  } else if (strcmp(key, "launch") == 0) {
    /* How the host launches kernels (docs/splits.md): async (the default, CUDA's asynchronous
     * launches) or blocking (CUDA_LAUNCH_BLOCKING=1: each launch returns when its kernel has
     * run). */
    static const char *const n[] = {"async", "blocking", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "launch=async (the host launches ahead of the device) or blocking "
                        "(CUDA_LAUNCH_BLOCKING=1: the host waits for every kernel)");
    s->launch_blocking = v == 1;
  } else if (strcmp(key, "cp-ring") == 0) {
    /* How the context-parallel ring runs (docs/splits.md): p2p (Megatron-Core / Transformer
     * Engine, the default) or torch (PyTorch's context_parallel as TorchTitan runs it). */
    static const char *const n[] = {"p2p", "torch", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "cp-ring=p2p (each step's K/V block sent to the next rank: Megatron-Core, "
                        "Transformer Engine) or torch (PyTorch's context_parallel as TorchTitan "
                        "runs it: repeated K/V heads, one all-gather, fp32 merges)");
    s->cp_ring = 1 + v;
  } else if (strcmp(key, "load") == 0) {
    /* How loading a micro-batch meets the host's dispatch queue (docs/splits.md): async (the
     * default: the loader never waits for the device) or sync (Megatron's broadcast_data
     * copies the batch's sizes back to the host, a synchronisation per micro-batch). */
    static const char *const n[] = {"async", "sync", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "load=async (the input load never waits for the device) or sync (the "
                        "host waits for the device before each micro-batch's forward: "
                        "Megatron's broadcast_data)");
    s->load_sync = v == 1;
  } else if (strcmp(key, "tp-grad") == 0) {
    /* Where a tensor-parallel layer's input-gradient all-reduce runs (docs/splits.md): async
     * (the default: beside the weight gradient, Megatron-LM's async_tensor_model_parallel_
     * allreduce, Megatron-Core) or serial (after the linear's whole backward: the all-reduce is
     * the backward of copy_to_tensor_model_parallel_region, an autograd node after F.linear's,
     * which computes both gradients; Megatron-DeepSpeed's mpu). */
    static const char *const n[] = {"async", "serial", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item,
                        "tp-grad=async (the input gradient's all-reduce beside the weight "
                        "gradient: Megatron-LM, Megatron-Core) or serial (after the weight "
                        "gradient: Megatron-DeepSpeed's mpu)");
    s->tp_grad_serial = v == 1;
  } else if (strcmp(key, "shard") == 0) {
    gint64 v;
    if (val == NULL || !ts_parse_int(val, 1, 1 << 20, &v))
      return item_error(error, text, item,
                        "shard=N, the hybrid-sharding group (ZeRO over N data-parallel ranks, "
                        "replicated across groups), a whole number in [1, 1048576]");
    s->shard = (int)v;
  } else if (strcmp(key, "tp-overlap") == 0 || strcmp(key, "dp-overlap") == 0) {
    gboolean *flag = key[0] == 't' ? &s->tp_overlap : &s->dp_overlap;
    /* tp-overlap=te (Transformer Engine's userbuffers, the default), async (PyTorch's
     * AsyncTP) or xla (XLA's collective matmul): ts_plan.h ts_tp_overlap_mode. */
    static const char *const modes[] = {"te", "async", "xla", NULL};
    int mode = key[0] == 't' && val != NULL ? lookup(modes, val) : -1;
    if (mode >= 0) {
      *flag = TRUE;
      s->tp_overlap_mode = mode;
    } else if (!parse_switch(val, flag)) {
      if (key[0] == 't')
        return item_error(error, text, item,
                          "tp-overlap, tp-overlap=te (Transformer Engine), tp-overlap=async "
                          "(PyTorch AsyncTP), tp-overlap=xla (XLA collective matmul), "
                          "tp-overlap=on or tp-overlap=off");
      return item_error(error, text, item, "%s, %s=on or %s=off", key, key, key);
    }
  } else if (strcmp(key, "ps-placement") == 0) {
    static const char *const n[] = {"colocated", "dedicated", NULL};
    int v = val ? lookup(n, val) : -1;
    if (v < 0)
      return item_error(error, text, item, "ps-placement=colocated or dedicated");
    s->ps_placement = (ts_ps_placement)v;
  } else if (strcmp(key, "stages") == 0) {
    if (val == NULL || *val == '\0')
      return item_error(error, text, item,
                        "stages=N1:N2:...: layers per pipeline stage, whole numbers >= 1");
    g_auto(GStrv) parts = g_strsplit(val, ":", -1);
    int n = (int)g_strv_length(parts);
    g_free(s->stage_layers);
    s->stage_layers = g_new0(int, n > 0 ? n : 1);
    s->nstages_given = n;
    for (int i = 0; i < n; i++) {
      gint64 v;
      if (!ts_parse_int(parts[i], 1, 1 << 20, &v))
        return item_error(error, text, item,
                          "stages=N1:N2:...: layers per pipeline stage, whole numbers >= 1 "
                          "('%s' is not)",
                          parts[i]);
      s->stage_layers[i] = (int)v;
    }
  } else if (strcmp(key, "precision") == 0) {
    int v = val ? ts_precision_parse(val) : -1;
    if (v < 0 || strcmp(val, "fp16") == 0)
      return item_error(
          error, text, item,
          "precision=bf16, fp8, fp32 or tf32 (fp8: Transformer Engine's recipe, GEMMs "
          "in FP8, the rest in bf16 / fp32; tf32: fp32 training with its GEMMs and "
          "convolutions on TF32 tensor cores)");
    s->precision = v;
  } else if (g_str_has_prefix(key, "kind:") || g_str_has_prefix(key, "name:")) {
    static const char *const modes[] = {"tp", "dp", NULL};
    int mode = val ? lookup(modes, val) : -1;
    ts_layer_rule *r = g_new0(ts_layer_rule, 1);
    g_ptr_array_add(s->rules, r);
    if (mode < 0)
      return item_error(error, text, item,
                        "%s=tp or %s=dp: whether the tensor-parallel axis splits those layers "
                        "(tp) or their batch (dp)",
                        key, key);
    r->mode = (ts_layer_mode)mode;
    const char *what = key + 5;
    if (g_str_has_prefix(key, "kind:")) {
      static const char *const kinds[] = {"dense", "conv2d", "attention", "embedding",
                                          "norm",  "pool",   NULL};
      int k = lookup(kinds, what);
      if (k < 0)
        return item_error(error, text, item,
                          "kind:K=MODE with K one of dense, conv2d, attention, embedding, norm, "
                          "pool");
      r->by_kind = TRUE;
      r->kind = (ts_layer_kind)k;
    } else {
      if (*what == '\0')
        return item_error(error, text, item, "name:GLOB=MODE with a layer-name pattern");
      r->glob = g_strdup(what);
    }
  } else {
    return item_error(
        error, text, item,
        "an axis (dp, tp or mp, pp, cp) or an option (zero, shard, schedule, "
        "recompute, sp, tp-overlap, dp-overlap, offload, ps, ps-placement, stages, "
        "ep, precision, attention, attn-kernel, attn-block, attn-bwd, fp8-cache, buckets, p2p, "
        "cp-ring, load, "
        "pipe-engine, dp-engine, launch, loss, kernels, fsdp2, fsdp1, early-stop, "
        "replica-reduce, fp8-gather, projections, kind:K, name:GLOB)");
  }
  return TRUE;
}

ts_split *ts_split_parse(const char *text, GError **error)
{
  g_autoptr(ts_split) s = g_new0(ts_split, 1);
  s->text = g_strdup(text != NULL ? text : "");
  s->schedule = -1;
  s->chunks = 1;
  s->recompute_every = 1;
  s->precision = -1;
  s->rules = g_ptr_array_new_with_free_func(rule_free);
  if (text == NULL || *text == '\0') {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '': expected comma-separated axes such as dp=64 or tp=8@x,dp=8@y");
    return NULL;
  }
  g_auto(GStrv) items = g_strsplit(text, ",", -1);
  /* Option keys seen so far, NULL-terminated (an option given twice is an error, as an axis). */
  g_autoptr(GPtrArray) seen = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(seen, NULL);
  for (char **it = items; *it != NULL; it++) {
    char *item = g_strstrip(*it);
    const char *eq = strchr(item, '=');
    g_autofree char *key = eq ? g_strndup(item, (gsize)(eq - item)) : g_strdup(item);
    int a = -1;
    for (int k = 0; k < TS_AX_N; k++)
      if (strcmp(key, axis_names[k]) == 0)
        a = k;
    if (strcmp(key, "mp") == 0) /* model parallel, the older name of tensor parallel */
      a = TS_AX_TP;
    if (a < 0) {
      if (eq == NULL && strcmp(key, "sp") != 0 && strcmp(key, "tp-overlap") != 0 &&
          strcmp(key, "dp-overlap") != 0 && strcmp(key, "fsdp2") != 0 &&
          strcmp(key, "fsdp1") != 0 && strcmp(key, "fp8-cache") != 0 &&
          strcmp(key, "early-stop") != 0 && strcmp(key, "fp8-gather") != 0) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--split '%s': item '%s': expected AXIS=DEGREE[@DIM[+DIM...]], e.g. tp=8@x, "
                    "or OPTION=VALUE, e.g. zero=1",
                    text, item);
        return NULL;
      }
      if (lookup(split_options, key) < 0 && !g_str_has_prefix(key, "kind:") &&
          !g_str_has_prefix(key, "name:")) {
        g_autofree char *names = ts_split_option_names();
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--split '%s': unknown axis '%s'; expected dp (data), tp or mp "
                    "(tensor/model), pp (pipeline), cp (context), or an option: %s",
                    text, key, names);
        return NULL;
      }
      gboolean rule = g_str_has_prefix(key, "kind:") || g_str_has_prefix(key, "name:");
      if (!rule && g_strv_contains((const char *const *)seen->pdata, key)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--split '%s': option %s given twice", text,
                    key);
        return NULL;
      }
      if (!rule)
        g_ptr_array_insert(seen, (gint)seen->len - 1, g_strdup(key));
      if (!parse_option(s, text, item, key, eq ? eq + 1 : NULL, error))
        return NULL;
      continue;
    }
    if (eq == NULL) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--split '%s': item '%s': expected AXIS=DEGREE[@DIM[+DIM...]], e.g. tp=8@x", text,
                  item);
      return NULL;
    }
    if (s->degree[a] != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--split '%s': axis %s given twice", text, key);
      return NULL;
    }
    const char *at = strchr(eq + 1, '@');
    g_autofree char *deg = at ? g_strndup(eq + 1, (gsize)(at - eq - 1)) : g_strdup(eq + 1);
    gint64 d;
    if (!ts_parse_int(deg, 1, 1 << 24, &d)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--split '%s': %s='%s': expected a degree, a whole number in [1, 16777216]", text,
                  key, deg);
      return NULL;
    }
    s->degree[a] = (int)d;
    if (at != NULL) {
      if (at[1] == '\0') {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--split '%s': %s: expected dimension names after '@', e.g. @x or @x+y", text,
                    key);
        return NULL;
      }
      /* tp=8@x+x: a dimension named twice was silently taken once. */
      g_auto(GStrv) names = g_strsplit(at + 1, "+", -1);
      for (int i = 0; names[i] != NULL; i++)
        for (int j = 0; j < i; j++)
          if (strcmp(names[i], names[j]) == 0) {
            g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                        "--split '%s': %s@%s: dimension '%s' given twice; expected each "
                        "dimension once, e.g. @x+y",
                        text, key, at + 1, names[i]);
            return NULL;
          }
      s->place_names[a] = g_strdup(at + 1);
    }
  }
  return g_steal_pointer(&s);
}

/* Takes `want` chips of an axis from dimension d, innermost unused factor first. */
static gboolean take(const ts_topo *t, int *used, int d, int *remaining, ts_group_shape *shape,
                     gboolean exact)
{
  int avail = t->dims[d].size / used[d];
  if (avail <= 1 || *remaining <= 1)
    return *remaining <= 1;
  int k;
  if (*remaining % avail == 0)
    k = avail;
  else if (avail % *remaining == 0)
    k = *remaining;
  else if (exact)
    return FALSE;
  else {
    int x = avail, y = *remaining;
    while (y != 0) {
      int tmp = x % y;
      x = y;
      y = tmp;
    }
    k = x;
    if (k <= 1)
      return TRUE;
  }
  shape->p[shape->npieces++] = (ts_piece){d, k, used[d]};
  used[d] *= k;
  *remaining /= k;
  return TRUE;
}

gboolean ts_split_place_on(const ts_topo *t, int *used, const int *dims, int ndims, int degree,
                           ts_group_shape *shape)
{
  int remaining = degree;
  for (int i = 0; i < ndims; i++)
    if (!take(t, used, dims[i], &remaining, shape, TRUE))
      return FALSE;
  return remaining == 1;
}

/* Dimensions ordered fastest link first; ties keep file order. */
static void dims_by_speed(const ts_topo *t, int *order)
{
  for (int d = 0; d < t->ndims; d++)
    order[d] = d;
  for (int i = 1; i < t->ndims; i++)
    for (int j = i; j > 0 && t->dims[order[j]].link_bw_Bps > t->dims[order[j - 1]].link_bw_Bps;
         j--) {
      int tmp = order[j];
      order[j] = order[j - 1];
      order[j - 1] = tmp;
    }
}

gboolean ts_split_place(const ts_split *s, const ts_topo *t, int *degree, ts_group_shape *shape,
                        GError **error)
{
  static const int rank[TS_AX_N] = {TS_AX_TP, TS_AX_CP, TS_AX_DP, TS_AX_PP};
  return ts_split_place_ranked(s, t, rank, degree, shape, error);
}

gboolean ts_split_place_ranked(const ts_split *s, const ts_topo *t, const int *rank, int *degree,
                               ts_group_shape *shape, GError **error)
{
  gint64 prod = 1;
  for (int a = 0; a < TS_AX_N; a++) {
    degree[a] = s->degree[a] > 0 ? s->degree[a] : 1;
    prod *= degree[a];
    memset(&shape[a], 0, sizeof shape[a]);
  }
  /* An unstated data-parallel degree takes the chips the other axes leave. */
  if (s->degree[TS_AX_DP] == 0 && prod < t->nchips && t->nchips % prod == 0) {
    degree[TS_AX_DP] = (int)(t->nchips / prod);
    prod = t->nchips;
  }
  if (prod != t->nchips) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s' uses %" G_GINT64_FORMAT " chips but topology %s has %d; expected "
                "the degrees to multiply to %d",
                s->text, prod, t->path ? t->path : t->name, t->nchips, t->nchips);
    return FALSE;
  }
  int used[TS_MAX_DIMS];
  for (int d = 0; d < t->ndims; d++)
    used[d] = 1;
  /* Explicit placements first, in axis order. */
  for (int a = 0; a < TS_AX_N; a++) {
    if (s->place_names[a] == NULL)
      continue;
    int remaining = degree[a];
    g_auto(GStrv) dims = g_strsplit(s->place_names[a], "+", -1);
    for (char **dn = dims; *dn != NULL; dn++) {
      int d = ts_topo_dim_index(t, *dn);
      if (d < 0) {
        GString *names = g_string_new(NULL);
        for (int k = 0; k < t->ndims; k++)
          g_string_append_printf(names, "%s%s", k ? ", " : "", t->dims[k].name);
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "--split '%s': %s@%s: topology %s has no dimension '%s'; expected one of: %s",
                    s->text, axis_names[a], s->place_names[a], t->path ? t->path : t->name, *dn,
                    names->str);
        g_string_free(names, TRUE);
        return FALSE;
      }
      if (!take(t, used, d, &remaining, &shape[a], TRUE)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "--split '%s': %s=%d@%s: dimension %s has %d chips left, which neither "
                    "divides nor is divided by %d",
                    s->text, axis_names[a], degree[a], s->place_names[a], *dn,
                    t->dims[d].size / used[d], remaining);
        return FALSE;
      }
    }
    if (remaining != 1) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': %s=%d@%s: those dimensions hold only %d of its chips; expected "
                  "more dimensions or a smaller degree",
                  s->text, axis_names[a], degree[a], s->place_names[a], degree[a] / remaining);
      return FALSE;
    }
  }
  /* Unplaced axes. Pipeline parallelism sends one activation per micro-batch and stage, the
   * least of any axis, so it takes the slowest dimensions first; the others go, most
   * communication-heavy first (the order the caller ranked them in), on the fastest. */
  int order[TS_MAX_DIMS];
  dims_by_speed(t, order);
  int seq[TS_AX_N], nseq = 0;
  seq[nseq++] = TS_AX_PP;
  for (int i = 0; i < TS_AX_N; i++)
    if (rank[i] != TS_AX_PP)
      seq[nseq++] = rank[i];
  for (int k = 0; k < nseq; k++) {
    int a = seq[k];
    if (s->place_names[a] != NULL || degree[a] == 1)
      continue;
    int remaining = degree[a];
    for (int i = 0; i < t->ndims && remaining > 1; i++) {
      int d = a == TS_AX_PP ? order[t->ndims - 1 - i] : order[i];
      take(t, used, d, &remaining, &shape[a], FALSE);
    }
    if (remaining != 1) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': %s=%d does not fit the dimensions the other axes leave free; "
                  "expected degrees that factor into the array's dimension sizes",
                  s->text, axis_names[a], degree[a]);
      return FALSE;
    }
  }
  return TRUE;
}
