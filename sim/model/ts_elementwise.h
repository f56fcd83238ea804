/* ts_elementwise: the element-wise (memory-bound) kernels a layer's pass runs besides its GEMMs
 * and its fused kernels, as a software stack launches them (docs/models.md, "Element-wise
 * kernels"): the eager PyTorch ops of a transformer block (split option kernels=eager), the
 * uncompiled cross-entropy (loss=eager), and FP8 dynamic scaling's amax reductions, casts and
 * transposes around each FP8 GEMM (precision=fp8). The planner turns them into the `elem_bytes`
 * of the layer's ops (ts_cost.h); `trainsim model --kernels eager` and `--precision fp8` list
 * them. */
#ifndef TS_ELEMENTWISE_H
#define TS_ELEMENTWISE_H

#include "ts_model.h"

G_BEGIN_DECLS

/** Most element-wise ops one layer lists. */
#define TS_ELEM_MAX_OPS 6

/**
 * One element-wise op: what an eager framework runs as kernels of its own, and what the same
 * work costs fused (compiled by torch.compile or XLA, or Megatron-LM / Transformer Engine's
 * fused kernels) -- the cost trainsim's default (kernels=fused) stands for, inside the layer's
 * GEMM or norm op. Bytes are read + written per element of `tensor`; elements per sample of the
 * whole layer (the planner divides by the chip's share).
 */
typedef struct {
  const char *name;   /* "rmsnorm", "rope", "swiglu", "residual add", "cross-entropy" */
  const char *tensor; /* what the elements are, e.g. "input (tokens x hidden)" */
  double elems;       /* elements of that tensor per sample */
  double eager_fwd_bytes, eager_bwd_bytes; /* per element, eager kernels */
  double fused_fwd_bytes, fused_bwd_bytes; /* per element, the fused kernel(s) */
  int eager_fwd_kernels, eager_bwd_kernels;
  int fused_fwd_kernels, fused_bwd_kernels;
  gboolean loss; /* the loss: eager only under loss=eager (TorchTitan never compiles it) */
} ts_elem_op;

/** The element-wise ops layer l runs that an eager stack launches one by one (RMSNorm as
 * PyTorch ops, rotary embedding through complex numbers, the SwiGLU gate, the residual add,
 * the cross-entropy of the logits layer). Fills out (at most TS_ELEM_MAX_OPS) and returns the
 * count. Ops whose eager and fused forms move the same bytes (a LayerNorm, which PyTorch runs as
 * one kernel; GQA's repeat of K and V, materialised in both) are not listed. */
int ts_layer_elementwise_ops(const ts_model *m, const ts_layer *l, ts_elem_op *out);

/** FP8 dynamic (current) scaling around one GEMM (m x k) x (k x n), per chip: the bytes its
 * amax reductions, casts and transposes read and write, and their kernels. Forward: amax and
 * cast of the input (on x_rows of its m rows: m/tp when it is cast before a sequence-parallel
 * all-gather, as TorchTitan's Float8 tensor parallelism does) and of the weight; backward: amax
 * and cast of the output gradient (on g_rows of its m rows: m/tp for a row-parallel GEMM whose
 * output is reduce-scattered over the sequence, its gradient cast on that shard before the
 * float8 all-gather), and the transposed FP8 copies of input, weight and output gradient the
 * scaled GEMMs need. hp: bytes of the high-precision element (2 for bf16). */
typedef struct {
  double fwd_bytes, dgrad_bytes, wgrad_bytes;
  int fwd_kernels, dgrad_kernels, wgrad_kernels;
} ts_fp8_cost;

void ts_fp8_scaling_cost(double m, double n, double k, double x_rows, double g_rows,
                         double hp_bytes, ts_fp8_cost *out);

G_END_DECLS

#endif
