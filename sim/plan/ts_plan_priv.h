/* ts_plan_priv: what the planner's files share and nothing else uses: the per-layer execution
 * table (collectives around each layer, divisors, activations kept) and pipeline schedules. */
#ifndef TS_PLAN_PRIV_H
#define TS_PLAN_PRIV_H

#include "ts_cost.h"
#include "ts_plan.h"

G_BEGIN_DECLS

/* How an activation between layers lies across the tensor-parallel group. */
typedef enum {
  TS_ST_REPL,  /* whole, the same on every member */
  TS_ST_FEAT,  /* split by features (after a column-split layer) */
  TS_ST_SEQ,   /* split by sequence (sequence parallelism, Korthikanti et al. 2022, 4.2.2) */
  TS_ST_BATCH, /* split by samples (a layer that uses the tp axis as data parallelism) */
} ts_act_state;

#define TS_NO_COLL (-1)

/* One tensor-parallel collective around a layer: kind (or TS_NO_COLL) and bytes per sample,
 * per member as ts_coll_kind defines them. */
typedef struct {
  int kind;
  double bytes;
  gboolean redistribution; /* a boundary between per-layer splits (hybrid) */
} ts_tp_coll;

/* A layer as the plan executes it; quantities per sample (one sequence or image) per chip. */
typedef struct ts_layer_exec {
  double cdiv;             /* compute divisor (members sharing the layer's work) */
  double pdiv;             /* parameter divisor (tp for split layers) */
  ts_act_state in, out;    /* activation state consumed and produced */
  ts_tp_coll fwd_pre;      /* before the forward compute (gather the input) */
  ts_tp_coll fwd_post;     /* after it (sum partial outputs) */
  ts_tp_coll bwd_pre;      /* before the backward (conjugate of fwd_post) */
  ts_tp_coll bwd_regather; /* sequence parallel: re-gather the input for the weight gradient */
  ts_tp_coll bwd_post;     /* after the input gradient (conjugate of fwd_pre) */
  double act_bytes;        /* activations kept for backward (recompute none or selective) */
  double in_bytes;         /* the input as kept by a full-recompute checkpoint */
  double out_bytes;        /* the output as it lies (point-to-point between pipeline stages) */
  double full_act_bytes;   /* every activation of the layer (recompute working set) */
  double recompute_flops;  /* selective recomputation: FLOPs re-run before backward */
  gboolean dp_over_tp;     /* gradient synchronised over dp and tp together (TS_LAYER_MODE_DP) */
  /* Expert parallelism (mixture of experts): the layer's experts are spread over the ep
   * ranks (an inner sub-group of dp); tokens go to their experts and back by all-to-all. */
  gboolean expert;    /* an expert layer: params / ediv, gradients over dp / ep */
  double ediv;        /* ep for expert layers, else 1 */
  ts_tp_coll ep_pre;  /* dispatch before the first expert layer of a run */
  ts_tp_coll ep_post; /* combine after the last one */
  /* Context parallelism (issue 13): an attention layer's K/V block per sample per chip that
   * goes around the cp ring (0 when cp = 1 or not attention), and the FLOPs per sample of its
   * attention core (QK^T, softmax, attention over V) before any divisor. */
  double cp_kv_bytes;
  double core_flops;
  /* recompute=op (TorchTitan's per-op policy): what is re-run before the layer's backward, per
   * sample per chip: FLOPs, device memory traffic, the recomputed products' total output width
   * and input width (the GEMM shape; 0 when no product is recomputed) and kernel launches. */
  double op_rc_flops, op_rc_mem, op_rc_n, op_rc_k;
  int op_rc_kernels;
  /* Parameters per chip whose gradient each tp member holds only a partial sum of, all-reduced
   * over tp before the data-parallel reduction (multi-head latent attention's replicated down
   * projections and latent norms under sequence parallelism); 0 for every other layer. */
  double tp_grad_params;
} ts_layer_exec;

/* One step of a pipeline device's schedule. */
typedef struct {
  gboolean bwd;
  int micro; /* micro-batch */
  int chunk; /* model chunk on the device (0 unless interleaved) */
} ts_sched_item;

/* The order a pipeline device runs forwards and backwards in (appended to out). torch: the
 * schedules of torch.distributed.pipelining (TorchTitan, the fsdp2 stack) rather than
 * Megatron-LM's; they differ for interleaved 1F1B with as many micro-batches as stages. */
void ts_sched_order(ts_schedule s, int pp, int chunks, int n_micro, int device, gboolean torch,
                    GArray *out);

/* Ranks that hold the same parameters and sum their gradients: dp x cp (context-parallel ranks
 * see different tokens of the same samples, Megatron-LM's data-parallel-with-cp group). */
int ts_plan_grad_ranks(const ts_plan *p);

/* Ranks ZeRO shards model states over: the hybrid-sharding group (shard x cp), or all of
 * ts_plan_grad_ranks. */
int ts_plan_shard_ranks(const ts_plan *p);

/* Flags of ts_plan_exec_table. */
enum {
  TS_FP8_SAVES_INPUTS = 1u, /* the FP8 GEMMs keep their inputs for backward in FP8, one byte an
                               element (Transformer Engine; ts_plan_fp8_saves_inputs) */
  TS_FP8_GATHERS = 2u,      /* tensor-parallel gathers of FP8 GEMM operands carry FP8
                               (ts_plan_fp8_gathers) */
  TS_EXEC_COMPILED = 4u,    /* the blocks are compiled (kernels=fused): recompute=op saves
                               only what the block's backward reads (op_kept_bytes) */
};

/* The per-layer table for these degrees and options; n = m->nlayers entries; attention: a
 * ts_attention for every attention layer, or -1 for each layer's own; fp8: TS_FP8_* and
 * TS_EXEC_* flags.
 * Caller frees. */
ts_layer_exec *ts_plan_exec_table(const ts_model *m, const int *degree, ts_recompute rc,
                                  gboolean mlpwi, gboolean sp, const ts_layer_mode *mode, int ep,
                                  int attention, unsigned fp8);

/* PyTorch tensor parallelism's copies around a sequence-parallel collective (fsdp2 and sp:
 * DTensor's Shard(1) of a [batch, sequence, hidden] activation). NCCL's all-gather and
 * reduce-scatter work on dim 0, so torch.distributed._functional_collectives re-lays the
 * tensor around them: all_gather_tensor cats the dim-0 chunks of the gathered result along
 * the sequence dim (a copy of the whole gathered tensor; later versions keep a view when
 * every dim before it is 1, batch 1), reduce_scatter_tensor cats the sequence-dim chunks of
 * its input along dim 0 before reducing (a copy of the whole input, any batch). The bytes such
 * a copy reads and writes for collective c (bytes per sample) on a micro-batch of mb samples,
 * 0 when there is none. */
double ts_plan_sp_copy_bytes(const ts_plan *p, const ts_tp_coll *c, double mb);

/* Whether the plan's FP8 GEMMs keep their inputs in FP8 for backward: precision=fp8 run by
 * Transformer Engine (Megatron-LM / NeMo), which trainsim takes every non-fsdp2 FP8 run to be;
 * PyTorch-native Float8 (torchao, under fsdp2 as TorchTitan runs it) keeps the bf16 inputs. */
gboolean ts_plan_fp8_saves_inputs(const ts_plan *p);

/* Whether the plan's tensor-parallel gathers of FP8 GEMM operands (a block's input forward, the
 * output gradient backward) carry one byte an element: the input is cast on its shard before
 * the gather. Transformer Engine (fp8_buf, its input quantizer) and torchao's Float8 tensor
 * parallelism (PrepareFloat8ModuleInput, Float8RowwiseParallel) both do. */
gboolean ts_plan_fp8_gathers(const ts_plan *p);

/* Bytes a parameter of layer i carries in its FSDP / ZeRO-3 all-gather (and while gathered):
 * one for an FP8 GEMM layer's weights with fp8-gather (fsdp2 and precision=fp8: torchao's FSDP
 * float8 all-gather), else the model's dtype. */
double ts_plan_gather_bytes_per_param(const ts_plan *p, int i);

/* Which pass of a layer a compute op is. */
typedef enum {
  TS_PASS_FWD,            /* forward (or its recomputation) */
  TS_PASS_BWD,            /* the whole backward */
  TS_PASS_DGRAD,          /* the input gradient of a split backward */
  TS_PASS_WGRAD,          /* the weight gradient of a split backward */
  TS_PASS_ATTN_RECOMPUTE, /* selective recomputation of the attention core */
  TS_PASS_OP_RECOMPUTE,   /* recompute=op: the unsaved products and element-wise ops */
} ts_pass;

/* The shape of layer i's compute op in a pass, per chip, for a micro-batch of mb samples. */
void ts_plan_layer_shape(const ts_plan *p, int i, double mb, ts_pass pass, ts_op_shape *s);

/* The shape of the optimizer step. */
void ts_plan_optimizer_shape(ts_op_shape *s);

/* Host time of one tensor op in a per-tensor Python loop (torch.optim's, DeepSpeed's
 * BF16_Optimizer.update_hp_grads): PyTorch's multi-tensor optimizer pull request
 * (pytorch/pytorch#45299, 2020) times torch.optim.SGD with momentum on torchvision's ResNet-101
 * at 6.28 ms a step (torch.cuda.synchronize() included): its 314 parameter tensors x 3 ops (the
 * velocity's mul_ and add_, the parameter's add_) = 942 ops, 6.7 us each, host and device
 * together. A published measurement, not fitted here; it stands for every host (the chip's
 * kernel_launch_us is fitted to other stacks' layers). */
#define TS_TORCH_OPTIM_OP_US 6.7
/** The optimizer step as torch.optim's per-tensor SGD loop (a [model] optimizer = sgd under an
 * eager split, on a GPU): its ops on `device`, their host cost and whether a loss scaler's
 * read-back makes the host wait first; s is left as it is otherwise. */
void ts_plan_sgd_loop_shape(const ts_plan *p, int device, ts_op_shape *s);
/** optimizer=bertadam: the step as BERT's BertAdam runs it (a Python loop over the parameter
 * tensors, every op its own fp32 kernel) on `device`: sets s's kernels and their host cost and
 * returns the bytes the step moves through memory. */
double ts_plan_bertadam_shape(const ts_plan *p, int device, ts_op_shape *s);

/* Parameters of layer i one chip holds (after tp and ep, before ZeRO). */
double ts_plan_layer_params(const ts_plan *p, int i);

/* pipe-engine=deepspeed: bytes per parameter of a stage that DeepSpeed's pipeline engine moves
 * to accumulate micro-batch `micro`'s gradients (BF16_Optimizer's fp32 accumulation, or
 * autograd's in-place add from the second micro-batch on); 0 without the option. */
double ts_plan_ds_grad_acc_bytes(const ts_plan *p, gint64 micro);
/* Bytes per parameter FSDP1's flat gradient passes move every micro-batch (fsdp1; 0 without). */
double ts_plan_fsdp1_grad_bytes(const ts_plan *p);

/* Parameters of a device split into those synchronised over the whole dp group (dense) and over
 * dp / ep (experts); ts_plan_device_params is their sum. */
void ts_plan_device_params_split(const ts_plan *p, int device, double *dense, double *expert);

/* Parameters whose optimizer state one rank of a device updates: all of them, or with ZeRO
 * its shard of each group (dense / dp + expert / (dp / ep)). */
double ts_plan_device_shard_params(const ts_plan *p, int device);

/* Checkpoint units for full recomputation: unit[i] = index of the first layer of the unit
 * holding layer i, or -1 when layer i is not checkpointed (kept whole). Units never cross a
 * pipeline-stage boundary. Caller frees. */
int *ts_plan_units(const ts_plan *p);

/* Whether the plan re-runs forwards before backwards (recompute=full or stage), keeping only
 * each checkpoint unit's input (ts_plan_units). */
gboolean ts_plan_recomputes_forward(const ts_plan *p);
/* A TPU's rematerialised forward leaves out layer i (ts_plan.c). */
gboolean ts_plan_recompute_skips(const ts_plan *p, int i);
/* Whether full (or stage) recomputation re-runs this layer's block (recompute=full:N skips
 * some blocks); FALSE for layers of no block and for the other policies. */
gboolean ts_plan_layer_recomputed(const ts_plan *p, int layer);

/* Bytes of optimizer state per parameter (Adam: K = 12 with 16-bit training). */
double ts_plan_optimizer_bytes_per_param(const ts_model *m);
double ts_plan_optimizer_flops_per_param(const ts_model *m);

/* Parameters a pipeline device holds per chip (after tp, before ZeRO), including a tied
 * embedding copy on the last stage. */
double ts_plan_device_params(const ts_plan *p, int device);

/* The devices sharing the word-embedding table (Megatron-LM's embedding group, Narayanan et
 * al. 2021 SC, section 2): device[0] holds the table; every other device holds a layer that
 * uses it (tied logits, an encoder-decoder's decoder embedding) and so keeps a copy of
 * params[k] parameters (after tp), whose gradient the group all-reduces before the optimizer
 * step. device and params have room for pp entries. Returns the group's size, 0 when every
 * user of the table is on the table's device (or there is no pipeline). */
int ts_plan_tied_group(const ts_plan *p, int *device, double *params);

/* The virtual stage holding layer i. */
int ts_plan_stage_of_layer(const ts_plan *p, int layer);

/* Seconds for every worker to push (or pull) `bytes` to (from) the parameter servers at once:
 * the slower of a worker's sending and a server's receiving, over the network port. */
double ts_plan_ps_time(const ts_plan *p, double bytes);
/** A push or pull of `bytes` as one transfer over a server port: the bytes on the busiest
 * port, its bandwidth and latency (ts_plan_ps_time = latency + wire / bandwidth). */
void ts_plan_ps_xfer(const ts_plan *p, double bytes, double *wire_bytes, double *bw_Bps,
                     double *latency_s);

/* Bytes one worker sends to the servers when it pushes `bytes` of gradients (its own shard,
 * when it hosts one, stays local). */
double ts_plan_ps_remote_bytes(const ts_plan *p, double bytes);

/* Gradient synchronisations per step for a pipeline device: once, or (ZeRO 2 and 3, which keep
 * only a gradient shard) after every micro-batch's backward. */
int ts_plan_syncs_per_step(const ts_plan *p);

/* Bytes of data-parallel gradient buckets beside the gradients on a device holding psi
 * parameters (per chip), with buckets of `bucket` bytes. */
double ts_plan_bucket_bytes(const ts_plan *p, double psi, double bucket);

G_END_DECLS

#endif
