/* ts_plan: a split (parallel axes and their placement on the array) applied to a model and
 * a topology: validity, per-chip memory, and the trace it produces. */
#ifndef TS_PLAN_H
#define TS_PLAN_H

#include "ts_model.h"
#include "ts_topo.h"
#include "ts_trace.h"
#include <glib.h>

G_BEGIN_DECLS

/* TS_AX_CP (context parallelism: the sequence split over a ring of ranks, issue 13) comes last
 * so the axes' numbering, and every canonical split text without cp, is unchanged. */
typedef enum { TS_AX_TP, TS_AX_DP, TS_AX_PP, TS_AX_CP, TS_AX_N } ts_axis_kind;

/** Pipeline schedules (docs/splits.md). */
typedef enum {
  TS_SCHED_GPIPE,       /* all forwards, then all backwards (Huang et al. 2019) */
  TS_SCHED_1F1B,        /* PipeDream-Flush (Narayanan et al. 2021, "Memory-efficient") */
  TS_SCHED_INTERLEAVED, /* 1F1B over V model chunks per device (Narayanan et al. 2021 SC) */
} ts_schedule;

/** Activation recomputation (Korthikanti et al. 2022, section 5). */
typedef enum {
  TS_RECOMPUTE_NONE,
  TS_RECOMPUTE_SELECTIVE, /* attention scores, softmax and dropout recomputed */
  TS_RECOMPUTE_FULL,      /* only each block's input kept; forward re-run before backward */
  TS_RECOMPUTE_STAGE,     /* GPipe's re-materialisation: only each (virtual) stage's input kept
                             per micro-batch; the stage's forward re-run before its backward */
  TS_RECOMPUTE_OP,        /* per-op selective (TorchTitan's "op" policy): each block keeps its
                             input, every other matrix product's output and the attention output;
                             the rest is recomputed before the block's backward */
  TS_RECOMPUTE_DOTS,      /* MaxText's remat_policy=minimal (JAX's checkpoint_dots_with_no_batch_
                             dims): each block keeps its input and the weight products' outputs
                             its backward reads; the attention kernel and the element-wise ops
                             are recomputed before the block's backward */
} ts_recompute;

/** How the loss over the vocabulary is computed (docs/memory.md). */
typedef enum {
  TS_LOSS_FUSED, /* a fused (vocabulary-parallel) cross-entropy: one fp32 copy of the logits */
  TS_LOSS_EAGER, /* PyTorch's cross_entropy on logits cast to fp32, not compiled: 3 fp32 copies
                    live in its backward (4 under loss parallelism) */
} ts_loss;

/** How element-wise work runs (docs/splits.md, kernels=; sim/model/ts_elementwise.h). */
typedef enum {
  TS_KERNELS_FUSED, /* fused kernels: Megatron-LM / Transformer Engine, torch.compile, XLA */
  TS_KERNELS_EAGER, /* eager PyTorch: each element-wise op its own kernel through memory */
  TS_KERNELS_EAGER_FUSED_RMSNORM, /* eager, but RMSNorm one (Triton) kernel each way:
                                     TorchTitan's norm_type = "fused_rmsnorm" */
} ts_kernels_mode;

/** Which implementation tp-overlap costs (docs/splits.md, tp-overlap=). */
typedef enum {
  TS_TP_OVERLAP_TE,    /* Transformer Engine userbuffers (Megatron-Core, NeMo): every forward's
                          collectives chunked, recomputed forwards included, at the whole GEMM's
                          efficiency */
  TS_TP_OVERLAP_ASYNC, /* PyTorch AsyncTP (torch.compile's micro-pipelined TP, TorchTitan): the
                          first forward's collectives chunked, each chunk a matmul of its own */
  TS_TP_OVERLAP_XLA,   /* XLA's collective matmul (windowed einsum, Wang et al. 2023; MaxText on
                          TPU): as TE, and the backward's all-gather of the output gradient
                          chunked beside the layer's backward too */
} ts_tp_overlap_mode;

/** How context parallelism's ring runs (docs/splits.md, cp-ring=). */
typedef enum {
  TS_CP_RING_P2P,   /* Megatron-Core / Transformer Engine: the key/value heads (grouped-query
                       width) sent to the next rank at every step, beside the step's attention */
  TS_CP_RING_TORCH, /* PyTorch's context_parallel as TorchTitan runs it (December 2024): the
                       K/V repeated to the query heads, gathered by one all-gather that only
                       the first (diagonal) block hides, the blocks' outputs merged in fp32 and
                       the K/V gradients sent round in fp32 */
} ts_cp_ring;

/** Where ZeRO offloads model states (Ren et al. 2021; Rajbhandari et al. 2021). */
typedef enum { TS_OFFLOAD_NONE, TS_OFFLOAD_CPU, TS_OFFLOAD_NVME } ts_offload;

typedef enum { TS_PS_COLOCATED, TS_PS_DEDICATED } ts_ps_placement;

/** What the tensor-parallel axis does for a layer (per-layer hybrid splits). */
typedef enum {
  TS_LAYER_MODE_TP, /* the layer is split as its tp mode says (default) */
  TS_LAYER_MODE_DP, /* the layer is replicated and the tp axis splits its batch instead */
} ts_layer_mode;

/** A per-layer rule: layers of a kind, or whose name matches a glob, take a mode. */
/* pipe-engine= values (ts_split.pipe_engine_ds, ts_plan.pipe_engine_ds; 0 is megatron):
 * DeepSpeed's PipelineEngine as of 0.4-0.7, and as before 0.4.0 (EleutherAI's DeeperSpeed, a
 * fork of 0.3.15), whose _exec_reduce_grads all-reduces the gradients whole
 * (buffered_allreduce_fallback) even under ZeRO-1. */
#define TS_PIPE_ENGINE_DS 1
#define TS_PIPE_ENGINE_DS03 2

typedef struct {
  gboolean by_kind;
  ts_layer_kind kind;
  char *glob; /* when !by_kind */
  ts_layer_mode mode;
} ts_layer_rule;

/** A parsed --split: degrees and requested placements; 0 degree = not given. */
typedef struct {
  int degree[TS_AX_N];
  int place_dims[TS_AX_N][TS_MAX_DIMS]; /* requested dims, in order */
  int nplace[TS_AX_N];                  /* 0 = let the planner place it */
  char *place_names[TS_AX_N];           /* dims as written, resolved against a topology later */
  char *text;                           /* as given */
  /* Options (items that are not axes). */
  int schedule; /* ts_schedule, -1 = not given (1f1b when pp > 1) */
  int chunks;   /* interleaved: model chunks per device (V) */
  ts_recompute recompute;
  int recompute_every;          /* recompute=full:N: every N-th block checkpointed (1: all) */
  gboolean recompute_keep_last; /* recompute=stage:except-last: the last micro-batch kept */
  gboolean recompute_mlpwi;     /* recompute=dots:except-mlpwi: the MLP's first products too */
  gboolean sp;                  /* sequence parallelism with tp */
  int zero;                     /* 0..3 */
  ts_offload offload;
  int ps; /* parameter-server shards, 0 = none */
  ts_ps_placement ps_placement;
  int ep;            /* expert parallelism inside dp (mixture of experts), 0 = none */
  char *ep_place;    /* ep=N@DIMS: the array dimensions (of dp's) the ep ranks lie on, as
                        written ("net", "node+net"); NULL: the inner end of dp's placement */
  int nstages_given; /* explicit stages=N1:N2:...; 0 = balance by compute */
  int *stage_layers; /* layers per (virtual) stage, nstages_given entries */
  GPtrArray *rules;  /* ts_layer_rule*, owned; later rules win */
  /* Added with issue 10. */
  int attention;        /* attention=: 0 not given (each layer's own), else 1 + ts_attention */
  gboolean bucket_copy; /* buckets=copy: DDP copies gradients into its buckets (not views) */
  /* Added with issue 13. */
  int shard;           /* hybrid sharding: ZeRO shards over the inner `shard` ranks of dp and
                          replicates across the dp / shard groups; 0 = shard over all of dp */
  gboolean tp_overlap; /* tensor-parallel collectives chunked and overlapped with their GEMMs */
  gboolean dp_overlap; /* ZeRO 1/2: the updated-parameter all-gather overlapped with forward */
  int precision;       /* ts_precision of GEMMs (precision=), -1 = not given (the model's dtype) */
  /* Added with issue 10 (the H100 Megatron stack). */
  int tp_overlap_mode; /* ts_tp_overlap_mode of tp-overlap= (0 te unless given) */
  /* Added with issue 10 item 5 (memory as PyTorch allocates it). */
  int loss;       /* loss=: 0 not given (fused), else 1 + ts_loss */
  gboolean fsdp2; /* ZeRO-3 as PyTorch FSDP2 allocates it (docs/memory.md) */
  /* Added with issue 10 (H100 fidelity). */
  int kernels; /* kernels=: 0 not given (fused), else 1 + ts_kernels_mode */
  /* Added with issue 10 (the H100 Megatron stack). */
  int attn_kernel;    /* attn-kernel=: 0 not given (fa2), else 1 + ts_attn_kernel */
  gboolean fp8_cache; /* fp8-cache: FP8 weight copies cast once per step (Transformer Engine) */
  /* Added with issue 10 (MPT, held out). */
  gboolean early_stop; /* early-stop: PyTorch's non-reentrant checkpoint stops re-running a block
                          once the backward's saved tensors are rebuilt (torch >= 2.0) */
  /* Added with issue 10 (the A100 pipelined runs). */
  gboolean p2p_blocking; /* p2p=blocking: a stage's compute waits for its pipeline sends */
  /* Added with issue 11 (MPT, held out). */
  int fsdp1; /* fsdp1=: 0 off, 1 on (gradients reduced in the parameter dtype), 2 fp32 */
  /* Added with issue 10 (TorchTitan's long sequences). */
  int cp_ring; /* cp-ring=: 0 not given (p2p), else 1 + ts_cp_ring */
  /* Added with issue 10 (vTrain's host-bound rows). */
  gboolean load_sync; /* load=sync: loading a micro-batch synchronises host and device */
  /* Added with issue 10 (vTrain's tensor-parallel rows). */
  gboolean tp_grad_serial; /* tp-grad=serial: a layer's input-gradient all-reduce after its
                              whole linear backward (Megatron-DeepSpeed's mpu) */
  /* Added with issue 10 (the DeepSpeed-era A100 runs). */
  int pipe_engine_ds;       /* pipe-engine=: 0 megatron, TS_PIPE_ENGINE_DS (deepspeed) or
                               TS_PIPE_ENGINE_DS03 (deepspeed-0.3) */
  gboolean launch_blocking; /* launch=blocking: CUDA_LAUNCH_BLOCKING=1 */
  /* Added with issue 10 (TPU, the v6e recipes' attention blocks). */
  int attn_block_fwd; /* attn-block=: a TPU attention kernel's larger block in tokens, forward */
  int attn_block_bwd; /* and backward (attn-block=FWD:BWD); 0 not given (512) */
  gboolean attn_bwd_fused; /* attn-bwd=fused: the Pallas backward as one kernel (dQ with dK/dV) */
  /* Added with the A100 scaling study (NeMo-Megatron's 2022 runs). */
  gboolean dp_engine_apex; /* dp-engine=apex: apex's DistributedFusedAdam holds the gradients */
  /* Added with the multi-node A100 study (Megatron-LM 2021). */
  gboolean dp_engine_autograd; /* dp-engine=autograd: autograd accumulates the 16-bit gradients */
  /* Added with the large paper runs (PaLM's two pods). */
  gboolean replica_reduce_end; /* replica-reduce=end: hybrid sharding's cross-replica all-reduce
                                  once, after the whole backward */
  /* Added with the CNN / BERT-on-V100 study (session 12). */
  gboolean opt_bertadam; /* optimizer=bertadam: BERT's Python per-tensor Adam loop */
  /* Added in session 12 (FSDP2's TorchTitan behaviours stated per run). */
  int fp8_gather;  /* fp8-gather=: 0 not given (on with fsdp2, precision=fp8 and a dp shard
                      group > 1), 1 off, 2 on */
  int projections; /* projections=: 0 not given (separate with fsdp2, else fused), 1 fused,
                      2 separate */
  /* Added in session 14 (CNN training). */
  int layout; /* layout=: 0 not given (nhwc), 1 nhwc, 2 nchw */
} ts_split;

/** Parses "dp=32@y,tp=32@x", "tp=8@node,pp=8,dp=16@net,zero=1,schedule=1f1b". */
ts_split *ts_split_parse(const char *text, GError **error);
void ts_split_free(ts_split *s);
/** The option keys a split takes besides its axes ("zero, shard, ..., kind:K, name:GLOB"); caller
 * frees. */
char *ts_split_option_names(void);
/**
 * The framework options of a split that change nothing at its degrees (tp-grad=serial without
 * tp, p2p=blocking or schedule=interleaved without pp, buckets=copy at dp (the resolved
 * replicas) = 1, fp8-cache or recompute=stage:except-last with micro_batches = 1), as one text
 * for a note, or NULL. They are accepted (a dataset names its framework once for every row)
 * where options asking for another configuration (sp, tp-overlap without tp, fp8-cache without
 * precision=fp8) are refused. Caller frees.
 */
char *ts_split_noop_options(const ts_split *s, int dp, gint64 micro_batches);

/**
 * Resolves degrees (an unstated dp takes the chips left) and places every axis on the array:
 * explicit placements first, then tensor and data parallelism on the fastest dimensions.
 */
gboolean ts_split_place(const ts_split *s, const ts_topo *t, int *degree, ts_group_shape *shape,
                        GError **error);

/**
 * As ts_split_place, with the unplaced axes other than pp taken onto the fastest dimensions in
 * the order rank[0], rank[1], ... (TS_AX_N entries, a permutation of the axes).
 */
gboolean ts_split_place_ranked(const ts_split *s, const ts_topo *t, const int *rank, int *degree,
                               ts_group_shape *shape, GError **error);

/**
 * Places one axis of `degree` chips on the dimensions dims[0..ndims) as an explicit
 * AXIS=N@DIMS does in ts_split_place (same rule, same pieces): appends the pieces to shape and
 * multiplies used[] by what they take. FALSE when a dimension neither divides nor is divided by
 * the chips left, or the dimensions hold fewer than degree (used and shape then undefined).
 */
gboolean ts_split_place_on(const ts_topo *t, int *used, const int *dims, int ndims, int degree,
                           ts_group_shape *shape);

/** Planner options (defaults from ts_plan_options_default). */
typedef struct {
  gint64 global_batch; /* samples per step over all replicas */
  gint64 micro_batch;  /* samples per micro-batch per replica; 0 = global_batch / dp */
  double bucket_bytes; /* data-parallel gradient bucket (PyTorch DDP default 25 MiB) */
  ts_coll_algo algo;   /* collective algorithm for every collective (TS_ALGO_AUTO) */
} ts_plan_options;

void ts_plan_options_default(ts_plan_options *o);

/** Memory per chip, bytes. */
typedef struct {
  double params, grads, optimizer, activations, temp, total, capacity;
  gboolean fits;
  /* Added with issue 4. */
  double host;            /* bytes offloaded to host memory (per chip) */
  double nvme;            /* bytes offloaded to NVMe (per chip) */
  double host_capacity;   /* host memory per chip (topology [host]) */
  double nvme_capacity;   /* NVMe per chip */
  double over;            /* total + reserve - capacity when it does not fit, else 0 */
  double inflight;        /* micro-batches whose activations the schedule holds at peak */
  int stage;              /* pipeline stage (device) this memory is for: the largest */
  gint64 max_micro_batch; /* largest micro-batch (divisor of the per-replica batch) that
                             fits, 0 when none does */
  /* Added with issue 10. */
  double reserve; /* device memory the runtime holds outside total (CUDA context, communication
                     library buffers): fits is total + reserve <= capacity */
  /* Added with issue 10 item 5. Each is part of total (but step_temp, see below). */
  double gathered;    /* FSDP2: unsharded parameters held at the peak (the root module, the
                         block running and the one prefetched; with pp every layer of the device) */
  double loss_temp;   /* loss=eager: fp32 copies of the logits beyond the kept one, at the loss's
                         backward (counted in temp when the peak is there) */
  double step_temp;   /* FSDP2: the optimizer step's temporary (foreach AdamW: one fp32 tensor per
                         sharded parameter); the peak is max(forward/backward, step) */
  double allocator;   /* the caching allocator's reserved-but-unallocated share of the peak:
                         [chip] allocator_overhead x the allocated peak */
  gboolean step_peak; /* the peak is at the optimizer step (activations freed) */
  double pipeline;    /* fsdp2 with pp (torch.distributed.pipelining): receive buffers, one per
                         micro-batch, and the stage outputs kept to the step's end */
  /* Added December 2026 (cp-ring=torch). Counted in temp when the peak is there (not when
   * the loss's backward or the optimizer step is the larger). */
  double cp_attn; /* PyTorch's context_parallel: the largest attention layer's transient ring
                     buffers at its backward (all-gathered head-repeated K/V, fp32 dQ/dK/dV
                     accumulators and the fp32 dK/dV sent round), else 0 */
} ts_memory;

typedef struct {
  const ts_model *model; /* borrowed, or own_fp32 */
  const ts_topo *topo;   /* borrowed */
  ts_plan_options opt;
  /* Added with issue 10 (CNN training). The model as trained in fp32 when the split says
   * precision=fp32 and the model's dtype is 16-bit (owned; NULL otherwise): FP32 training keeps
   * and moves 4-byte activations, so its memory-bound kernels move twice AMP's bytes. */
  ts_model *own_fp32;
  int degree[TS_AX_N];           /* resolved (1 when unused) */
  ts_group_shape shape[TS_AX_N]; /* placement of each axis on the array */
  char *split_text;              /* canonical, e.g. "tp=8,dp=8" */
  char *placement_text;          /* e.g. "tp@x,dp@y" */
  gint64 micro_batch, n_micro;   /* per replica */
  double params_per_chip;        /* parameters a chip holds */
  ts_memory mem;
  double model_flops_per_step; /* useful FLOPs per step, all chips (for MFU) */
  /* Added with issue 4. */
  ts_schedule schedule;
  int chunks;       /* model chunks per pipeline device (V; 1 unless interleaved) */
  int nstages;      /* virtual stages = pp * chunks */
  int *stage_first; /* nstages + 1 layer boundaries; virtual stage k holds layers
                       [stage_first[k], stage_first[k+1]), on device k % pp */
  ts_recompute recompute;
  int recompute_every; /* recompute=full:N: blocks b with (b + 1) % N == 0 checkpointed */
  /* recompute=stage:except-last, torchgpipe's default checkpoint='except_last': the step's last
   * micro-batch is not checkpointed (its stage activations kept, its forward not re-run). */
  gboolean recompute_keep_last;
  /* recompute=dots:except-mlpwi, MaxText's remat_policy=save_dot_except_mlpwi: as dots, but an
   * MLP's first products (wi_0, wi_1) are not saved and run again before the block's backward. */
  gboolean recompute_mlpwi;
  gboolean sp;
  int zero;
  ts_offload offload;
  int ps;
  ts_ps_placement ps_placement;
  ts_layer_mode *layer_mode;       /* per layer */
  ts_memory *stage_mem;            /* per pipeline device (pp entries) */
  double *layer_act_bytes;         /* per layer: activation bytes kept per micro-batch per chip */
  double host_link_bytes_per_step; /* bytes each chip moves over its host link (offload) */
  double ps_push_bytes_per_step;   /* gradient bytes each worker pushes (parameter server) */
  double ps_pull_bytes_per_step;   /* parameter bytes each worker pulls */
  double redistribution_bytes_per_step; /* per-layer hybrid: bytes of boundary collectives */
  int ep;                               /* expert-parallel degree (1 = none), divides dp */
  ts_group_shape ep_shape;              /* the ep members of the dp axis (inner end of dp's
                                           placement, or the dimensions ep=N@DIMS names) */
  gboolean ep_placed;                   /* ep=N@DIMS was given (shown in placement_text) */
  ts_group_shape edp_shape;             /* the rest of dp: the replicas of each expert */
  struct ts_layer_exec *exec;           /* per layer: how it runs (internal, ts_plan_priv.h) */
  int *unit;                            /* per layer: full-recompute checkpoint unit, -1 = none */
  /* Added with issue 10. */
  int attention;        /* ts_attention of every attention layer, -1 = each layer's own */
  gboolean bucket_copy; /* data-parallel buckets hold a copy of every gradient */
  /* Added with issue 13. */
  int shard;                  /* hybrid sharding group size (divides dp); dp when not hybrid */
  ts_group_shape shard_shape; /* the inner `shard` members of dp: ZeRO's gathers and scatters */
  ts_group_shape rep_shape;   /* the rest of dp: the replicas, which all-reduce the shards */
  gboolean tp_overlap;
  gboolean dp_overlap;
  ts_tp_overlap_mode tp_overlap_mode; /* which implementation tp-overlap costs */
  double cp_bytes_per_step; /* context parallelism: K/V (and their gradients) each chip sends
                               around the ring per step */
  int precision;            /* ts_precision of the GEMMs (ts_cost.h) */
  /* Added with issue 10 item 5. */
  ts_loss loss;
  gboolean fsdp2;
  /* Added with issue 10 (H100 fidelity). */
  ts_kernels_mode kernels;
  /* Added with issue 10 (the H100 Megatron stack). */
  ts_attn_kernel attn_kernel; /* the fused attention kernel (attn-kernel=; ts_cost.h) */
  gboolean fp8_cache;         /* FP8 weights (and transposes) cast once per step, not per
                                 micro-batch (fp8-cache: Transformer Engine's weight cache) */
  /* Added with issue 10 (MPT, held out). */
  gboolean early_stop; /* full recomputation skips each unit's last dense layer (early-stop) */
  /* Added with issue 11 (MPT, held out). */
  int fsdp1; /* PyTorch FSDP1's FlatParameter gradient passes every micro-batch: 0 off, 1 reduced
                in the parameter dtype (Composer's PURE), 2 cast to fp32 first (DEFAULT) */
  /* Added with issue 10 (the A100 pipelined runs). */
  gboolean p2p_blocking; /* p2p=blocking: the compute stream waits for each pipeline send to
                            complete (Megatron-LM's and DeepSpeed's non-overlapped exchange) */
  /* Added with issue 10 (TorchTitan's long sequences). */
  ts_cp_ring cp_ring; /* how the cp ring runs (cp-ring=) */
  /* Added with issue 10 (vTrain's host-bound rows). */
  gboolean load_sync; /* load=sync: on the stages that load data (the first and the last), the
                         host waits for the device before each micro-batch's forward */
  /* Added with issue 10 (vTrain's tensor-parallel rows). */
  gboolean tp_grad_serial; /* tp-grad=serial: the input gradient's tensor-parallel all-reduce
                              runs after the weight gradient, not beside it */
  /* Added with issue 10 (the DeepSpeed-era A100 runs). */
  int pipe_engine_ds;       /* pipe-engine=deepspeed: DeepSpeed's PipelineEngine runs the stages
                               (per-micro-batch gradient accumulation, BF16_Optimizer's fp32
                               all-reduce, the output re-gathered over tp before each backward);
                               TS_PIPE_ENGINE_DS03 (deepspeed-0.3): DeepSpeed before 0.4.0, whose
                               engine all-reduces ZeRO-1's 16-bit gradients whole; 0 megatron */
  gboolean launch_blocking; /* launch=blocking: every kernel launch waits for the kernel
                               (CUDA_LAUNCH_BLOCKING=1), so host and device times add */
  /* Added with issue 10 (TPU). attn-block=: the Pallas attention kernels' larger block (query
   * or key) in tokens, forward and backward; 0: TS_TPU_ATTN_BLOCK (ts_cost.h). */
  int attn_block_fwd, attn_block_bwd;
  gboolean attn_bwd_fused; /* attn-bwd=fused: one Pallas backward kernel for dQ, dK and dV */
  gboolean dp_engine_apex; /* dp-engine=apex: apex's DistributedFusedAdam (NeMo-Megatron 2022)
                              adds every micro-batch's 16-bit gradients into its fp32 buckets
                              and reduce-scatters them in fp32 */
  /* Added with the multi-node A100 study (Megatron-LM 2021). */
  gboolean dp_engine_autograd; /* dp-engine=autograd: each micro-batch's 16-bit weight gradient
                                  after the first is a tensor of its own, added into .grad by
                                  autograd's AccumulateGrad (3 D bytes a parameter) */
  /* Added with the large paper runs (PaLM's two pods). */
  gboolean replica_reduce_end; /* replica-reduce=end: with hybrid sharding, each rank's reduced
                                  gradient shard is all-reduced across the replicas once, after
                                  the step's last backward (Pathways' cross-pod transfer), not
                                  bucket by bucket beside the backward */
  gboolean opt_bertadam;       /* optimizer=bertadam: the step is BertAdam's Python loop over the
                                  parameter tensors, each op its own kernel (ts_plan_bertadam_shape) */
  /* Added in session 12. */
  gboolean fp8_gather; /* fp8-gather: FSDP2 casts each Float8 GEMM weight shard to float8 before
                          its all-gather (torchao's enable_fsdp_float8_all_gather) */
  gboolean separate_projections; /* projections=separate: q/k/v and gate/up are separate GEMMs
                                    whose input gradients autograd sums (TorchTitan's Llama) */
  gboolean layout_nchw; /* layout=nchw: tensor-core convolutions transpose their operands */
} ts_plan;

/** Validates the split against model, topology and batch, and places it on the array. */
ts_plan *ts_plan_new(const ts_model *m, const ts_topo *t, const ts_split *s,
                     const ts_plan_options *o, GError **error);
void ts_plan_free(ts_plan *p);

/**
 * The trace of one training step under the plan. Caller frees. A trace of several programs
 * whose estimate (ts_plan_trace_estimate_bytes of its first program) exceeds
 * TRAINSIM_MAX_MEMORY (a size) or else the available memory is refused after its first
 * program: TS_ERROR_INVALID, one line with the estimate and that variable.
 */
ts_trace *ts_plan_trace(const ts_plan *p, GError **error);

/** Expected resident bytes of a trace of nprograms programs like one of program_bytes
 *  (ts_program_bytes) and of its replay. */
double ts_plan_trace_estimate_bytes(gsize program_bytes, int nprograms);

/** The chunks the trace cuts layer i's backward into under tp-overlap (its output-gradient
 * all-gather beside the GEMMs it feeds: tp-overlap=xla, and tp-overlap=te on a GPU), 0 when it
 * runs unchunked. The planner's rule, which the validator reads too. */
int ts_plan_bwd_chunks(const ts_plan *p, int i);
/* The chunks layer i's forward, and its re-run inside the backward alike, runs its
 * tensor-parallel collectives in, beside the GEMMs (tp-overlap), 0 when it runs unchunked.
 * Under context parallelism the chunks sit around the ring. The validator reads it too. */
int ts_plan_fwd_chunks(const ts_plan *p, int i);
/* Which of layer i's forward tensor-parallel collectives ts_plan_fwd_chunks cuts into those
 * chunks: TS_CHUNK_GATHER its input all-gather, TS_CHUNK_REDUCE its output reduce-scatter or
 * all-reduce (0: unchunked). The planner's one rule; the validator reads it. */
enum { TS_CHUNK_GATHER = 1u, TS_CHUNK_REDUCE = 2u };
unsigned ts_plan_fwd_chunked(const ts_plan *p, int i);
/* Whether micro-batch micro of n_micro re-runs its forward before its backward: under full or
 * stage recomputation every one, but with recompute=stage:except-last (torchgpipe) not the
 * step's last. The trace builder and the validator both read it. */
gboolean ts_plan_micro_recomputed(const ts_plan *p, gint64 micro, gint64 n_micro);

/**
 * What a plan's trace depends on besides its axes' placement: two plans with equal keys (on one
 * model and topology that stay alive) have traces that differ only in their axes' shapes and
 * the collective algorithms resolved for them, so a sweep builds a split's trace once for all
 * its placements (ts_plan_trace_replace). NULL when the trace cannot be re-placed (parameter
 * servers, whose transfers take the placement's bandwidth). Caller frees.
 */
char *ts_plan_trace_key(const ts_plan *p);

/**
 * Re-places a trace ts_plan_trace made for a plan with the same ts_plan_trace_key on p's
 * placement: the axes' and groups' shapes, then the collectives' algorithms resolved again.
 * The result is the trace ts_plan_trace(p) would build, op for op.
 */
gboolean ts_plan_trace_replace(const ts_plan *p, ts_trace *tr, GError **error);

const char *ts_axis_kind_name(ts_axis_kind a);
const char *ts_schedule_name(ts_schedule s);
const char *ts_recompute_name(ts_recompute r);
const char *ts_offload_name(ts_offload o);
const char *ts_loss_name(ts_loss l);
const char *ts_kernels_mode_name(ts_kernels_mode k);

/**
 * Memory per chip of pipeline device `stage` with micro-batch `micro_batch` (the plan's other
 * choices kept). Used for the fit search; the plan's own is p->stage_mem[stage].
 */
void ts_plan_memory_at(const ts_plan *p, int stage, gint64 micro_batch, ts_memory *out);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_split, ts_split_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_plan, ts_plan_free)

G_END_DECLS

#endif
