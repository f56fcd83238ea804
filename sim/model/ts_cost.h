/* ts_cost: what one compute op costs on a chip, from its shape. GEMMs at the chip's achievable
 * fraction of the precision's peak times their tile / wave (GPU) or systolic-padding (TPU)
 * efficiency; attention cores as batched GEMMs (fused: FlashAttention; unfused: their score
 * matrices through memory); norms, element-wise ops and the optimizer at achieved memory
 * bandwidth; every op at least its kernel launches (a property of the software stack). Ops
 * without a shape (old traces) keep the roofline: max(flops / (peak x efficiency),
 * bytes / bandwidth). The planner and both backends call it. */
#ifndef TS_COST_H
#define TS_COST_H

#include "ts_topo.h"
#include <glib.h>

G_BEGIN_DECLS

/** What kind of kernel(s) a compute op is. 0 (roofline): no shape given. */
typedef enum {
  TS_OPC_ROOFLINE = 0, /* no shape: max(flops / (peak x efficiency), bytes / bandwidth) */
  TS_OPC_GEMM,         /* matrix multiplies (dense layers, convolutions as implicit GEMMs) */
  TS_OPC_ATTENTION,    /* attention sublayer, unfused core: scores through memory */
  TS_OPC_FLASH,        /* attention sublayer, fused core (FlashAttention): scores never stored */
  TS_OPC_MEMORY,       /* memory-bound: norms, softmax, element-wise, embedding lookups, pools */
  TS_OPC_OPTIMIZER,    /* optimizer step (memory-bound) */
  TS_OPC_TRANSFER,     /* off-chip transfer or host work encoded as a duration: no floor */
  TS_OPC_OTHER,        /* roofline at achieved rates, with the launch floor */
  TS_NOPCLASSES
} ts_op_class;

/** Precision of an op's GEMMs. */
typedef enum {
  TS_PRECISION_BF16 = 0, /* bf16 / fp16 tensor cores (the default) */
  TS_PRECISION_FP8,      /* FP8 tensor cores (Transformer Engine's GEMMs) */
  TS_PRECISION_FP32,     /* fp32 on the CUDA cores (TF32 not assumed) */
  TS_PRECISION_TF32,     /* fp32 tensors, GEMMs and convolutions on TF32 tensor cores where the
                          * chip has them (PyTorch's allow_tf32 on Ampere and later), else fp32 */
  TS_NPRECISIONS
} ts_precision;

/** Which fused-attention kernel runs the core (split attn-kernel=, docs/splits.md): a property
 * of the software stack. The default, FlashAttention-2, is what PyTorch's SDPA (TorchTitan)
 * runs and what the chip profiles' fitted rates stand for; cuDNN's fused attention is what
 * Transformer Engine runs on Hopper (Megatron-Core, NeMo / Megatron-Bridge). */
typedef enum {
  TS_ATTN_KERNEL_FA2 = 0, /* FlashAttention-2 (the default, the fitted rate) */
  TS_ATTN_KERNEL_CUDNN,   /* cuDNN fused flash attention (Transformer Engine on H100) */
  TS_ATTN_KERNEL_TRITON,  /* FlashAttention's Triton kernel (MPT / llm-foundry attn_impl=triton):
                           * the chip's own rate for it, flash_efficiency_triton */
  TS_ATTN_KERNEL_FA1,     /* FlashAttention 1: the chip's flash_efficiency_fa1 */
  TS_NATTN_KERNELS
} ts_attn_kernel;

/** ts_op_shape.kernels of an op the host launched together with an earlier one: the later
 * chunks of a tp-overlap GEMM, which Transformer Engine issues from one call (its userbuffers
 * overlap launches the chunk GEMMs on side streams inside one framework op), so the host pays
 * the layer's launches once, with the first chunk. */
#define TS_KERNELS_LAUNCHED (-1)

/** The shape of a compute op. Zero-filled means "no shape" (roofline). Dimensions per chip. */
typedef struct {
  int oclass;                 /* ts_op_class */
  int prec;                   /* ts_precision of the GEMMs */
  int kernels;                /* kernel launches the op makes (>= 1 when oclass is set), or
                               * TS_KERNELS_LAUNCHED: issued by an earlier op's launch */
  double m, n, k, batch;      /* its GEMMs: (m x k) x (k x n), batch of them (0: no GEMM) */
  double aq, akv, ad, abatch; /* attention core: queries, keys, head width, batch x heads */
  double attn_flops;          /* FLOPs of the attention core, part of the op's flops */
  double scores_bytes;        /* unfused attention: score-matrix bytes read and written */
  /* Added with issue 10 (H100): bytes read and written by memory-bound kernels the op runs
   * besides its main kernels, one after the other on the same stream: element-wise ops an
   * eager framework launches one by one (split kernels=eager), FP8 scaling's amax
   * reductions, casts and transposes (precision=fp8). Costed at achieved memory bandwidth and
   * added to the op's time; the op's `kernels` counts their launches. */
  double elem_bytes;
  /* Added with issue 10 (A100 fidelity). */
  double epilogue_bytes; /* bytes the element-wise kernels after the GEMMs read and write (bias +
                          * activation, bias + dropout + residual add, layout copies): on a GPU
                          * their own kernels at achieved bandwidth, after the GEMMs; on a
                          * systolic chip fused into the matmul (XLA) and free */
  /* Added with issue 10 (the H100 Megatron stack). */
  double attn_speedup; /* the fused attention core's rate relative to the fitted one (the
                        * stack's kernel, ts_attn_kernel_speedup); 0 reads as 1 */
  /* Added with issue 10 (long sequences). */
  double causal; /* 1: the attention core is causal self-attention (ts_layer.causal); 0: not */
  /* Added with issue 10 (CNN training). 1: the GEMM is a dense 3x3 stride-1 convolution, which
   * cuDNN can run by Winograd's minimal filtering (ts_cost.c decides where it does); 0: not. */
  double conv3x3;
  /* Host microseconds per kernel launch when the op's own (a Python loop of small tensor ops,
   * such as torch.optim's per-tensor SGD), instead of the chip's kernel_launch_us; 0: the
   * chip's. */
  double host_op_us;
  /* 1: an optimizer step the host does not wait for the device before launching (no loss
   * scaler's overflow check read back); 0: it waits (ts_cost_op_syncs). */
  double no_sync;
  /* A convolution's input channels padded for a GPU's 16-bit tensor cores over its own (cuDNN
   * pads a first layer's 3 colour channels: ts_cost.c); 0 reads as 1. */
  double chan_pad;
  /* Added with issue 10 (vTrain, Megatron's timers). 1: the host waits for the device before
   * launching the op (a torch.cuda.synchronize() in the framework just before it); 0: not. */
  double host_sync;
  /* Added with issue 10 (the DeepSpeed-era A100 runs). 1: the host launches the op's kernels
   * blocking (CUDA_LAUNCH_BLOCKING=1, split launch=blocking): it waits for the device before
   * the op and for each kernel before launching the next, so the op takes its launches plus
   * its device time; 0: launches run ahead of the device. */
  double launch_blocking;
  /* Added with the A100 fused-attention rates. The fused core's rate as a fraction of the GEMM
   * rate when the stack's kernel has its own in the chip's profile (attn-kernel=triton:
   * flash_efficiency_triton, fa1: flash_efficiency_fa1), in place of the chip's
   * flash_efficiency (FlashAttention-2's); 0: the chip's. */
  double flash_eff;
  /* Added with the H100 FP8 backward. 1: the op's FP8 GEMMs accumulate with fp32 promotion
   * (torchao's and Transformer Engine's input and weight gradients), at the chip's
   * fp8_split_accum_rate; 0: fast accumulation (the forward's). */
  double split_accum;
  /* Added with issue 10 (TPU). The larger block (query or key, tokens) of the Pallas kernel a
   * TPU runs the causal attention core with in this pass (split attn-block=): it computes
   * (1 + block / S) / 2 of the scores; 0 reads as TS_TPU_ATTN_BLOCK. */
  double attn_block;
  /* The block matmuls a TPU's Pallas backward runs over the four attn_flops counts (dV, dP, dQ,
   * dK): it recomputes the scores, and with separate dQ and dK/dV kernels the scores and dP in
   * each: 7/4; fused, 5/4. 0 reads as 1. */
  double attn_rerun;
} ts_op_shape;

/** The Pallas attention kernels' default block on a TPU (jax.experimental.pallas.ops.tpu
 * flash_attention and splash_attention, 512 tokens: MaxText's sa_block_* defaults). */
#define TS_TPU_ATTN_BLOCK 512.0

/** What ts_cost_op_syncs returns for an op launched blocking (launch_blocking): a
 * synchronisation point whose kernels also wait one for another (ts_cost_issue). */
#define TS_COST_SYNC_BLOCKING 2

/** Seconds one compute op takes on the topology's chip (shape NULL or zero: roofline), in
 * isolation: the larger of its device time and its launches (ts_cost_device, ts_cost_launch). */
double ts_cost_compute(const ts_chip *c, double flops, double mem_bytes, const ts_op_shape *s);

/** The device's time for the op's kernels, launches aside. */
double ts_cost_device(const ts_chip *c, double flops, double mem_bytes, const ts_op_shape *s);

/** The host's time to launch the op's kernels (kernels x kernel_launch_us); 0 for ops without
 * a shape, transfers and ops with no work. */
double ts_cost_launch(const ts_chip *c, double flops, double mem_bytes, const ts_op_shape *s);

/**
 * The op's duration from `now` (when its inputs are ready) on a chip whose host dispatches
 * kernels ahead of the device (PyTorch's asynchronous CUDA launches): the host issues the
 * op's `kernels` kernels one after the other from *host_clock (the end of its previous
 * launches, then advanced by launch_s), never waiting for the device; the op's last kernel
 * runs once it is issued. With d = device_s / kernels (a uniform split) the op ends at the
 * later of now + device_s (the device's work) and *host_clock + d (its last launch, then its
 * last kernel): N one-kernel ops of d < launch h from an idle host end at N h + d, of d > h at
 * N d + h. With `sync` the host first waits for the device (*host_clock = max(*host_clock,
 * now)): a synchronisation point of the framework (ts_cost_op_syncs). launch_s 0: device_s,
 * the host clock unchanged. sync TS_COST_SYNC_BLOCKING (CUDA_LAUNCH_BLOCKING=1): the host
 * waits for the device first and then for each kernel, so the op ends launch_s + device_s
 * after the host could start it, and the host with it.
 */
double ts_cost_issue(double *host_clock, double now, double device_s, double launch_s, int kernels,
                     gboolean sync);

/** Whether the framework waits for the device before launching this op: the optimizer step,
 * whose inputs the host reads (Megatron-LM's optimizer: the loss scaler's found-inf flag and
 * the gradient norm for clipping, each a .item() that synchronises), and an op whose shape
 * says host_sync (the first op of a micro-batch's forward under load=sync). */
gboolean ts_cost_op_syncs(const ts_op_shape *s);

/** The kernels of an op whose launches the host pays (ts_cost_launch / kernel_launch_us): the
 * shape's count, at least 1; 1 without a shape. */
int ts_cost_kernels(const ts_op_shape *s);

/**
 * A collective's wait for its own launch: the host issues it after the ops before it
 * (*host_clock, then advanced by launch_s: one kernel launch, NCCL's kernel enqueued from the
 * framework's Python), and the collective cannot move data before that, so it starts
 * max(now, *host_clock) and this returns the delay from now (0 when the host is ahead). In a
 * host-bound step (small tensor-parallel layers) each all-reduce adds a launch to the host's
 * queue, as it does in PyTorch; a step bound by the GPUs never sees it.
 */
double ts_cost_issue_collective(double *host_clock, double now, double launch_s);

/** A pipeline send or receive that ends at end_s: Megatron-LM synchronises the device after
 * its point-to-point exchanges (torch.cuda.synchronize() in p2p_communication.py), so the
 * host's launches resume from there (*host_clock = max(*host_clock, end_s)). */
void ts_cost_host_sync(double *host_clock, double end_s);

/** Fraction of the chip's per-unit rate a GEMM of this shape reaches from tiling alone (GPU
 * waves over the SMs, TPU padding to the systolic array); 1 when the chip gives neither. */
double ts_cost_tile_efficiency(const ts_chip *c, double m, double n, double k, double batch);

/** The chip's dense peak (FLOP/s) at a precision; 0 when it has no such rate (TF32 without TF32
 * tensor cores: the fp32 rate). */
double ts_chip_peak(const ts_chip *c, ts_precision p);

/** "gemm", "attention", ... and the inverse (-1 when unknown). */
const char *ts_op_class_name(ts_op_class c);
int ts_op_class_parse(const char *s);

/**
 * How much faster than FlashAttention-2 the fused attention kernel `k` runs a causal core on an
 * H100 (head width 128), forward or backward, at `keys` keys per query block: the ratio of the
 * two kernels' published TFLOP/s (Shah et al., "FlashAttention-3", arXiv 2407.08608, Figure 5
 * causal forward and Figure 6 backward, H100 80GB SXM5, sequence 512 to 16k), interpolated in
 * log2(keys) between the published lengths and held at the ends. 1 for FA2 (the fitted rate).
 */
double ts_attn_kernel_speedup(ts_attn_kernel k, gboolean bwd, double keys);

/**
 * The published length and head-width shape of a kernel whose rate a chip profile gives as one
 * number (attn-kernel=triton: flash_efficiency_triton, fa1: flash_efficiency_fa1): the kernel's
 * causal forward + backward TFLOP/s on the A100 at this head width and key length, on the tiles
 * it computes (x (1 + 128 / S)), over the geometric mean of the 8 bars the profile's rate is
 * taken from (head widths 64 and 128, 2k-16k tokens). From the FlashAttention-2 paper's Figure 4
 * (Dao 2023, arXiv 2307.08691; data/published/flash-attention/fa2-a100-fwd-bwd.csv), linear in
 * the head width between 64 and 128 and in log2(keys) between the published lengths, held at
 * the ends (512 and 16k tokens, 64 and 128 wide). 1 for the other kernels.
 */
double ts_attn_kernel_shape(ts_attn_kernel k, double head_dim, double keys);

/** "fa2", "cudnn" and the inverse (-1 when unknown). */
const char *ts_attn_kernel_name(ts_attn_kernel k);
int ts_attn_kernel_parse(const char *s);

/** "bf16", "fp8", "fp32", "tf32" and the inverse (-1 when unknown; "fp16" reads as bf16). */
const char *ts_precision_name(ts_precision p);
int ts_precision_parse(const char *s);

G_END_DECLS

#endif
