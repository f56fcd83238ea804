/* ts_elementwise: element-wise kernels of a software stack (see ts_elementwise.h). */
#include "ts_elementwise.h"

#include <string.h>

static ts_elem_op *add(ts_elem_op *out, int *n, const char *name, const char *tensor, double elems)
{
  ts_elem_op *o = &out[(*n)++];
  memset(o, 0, sizeof *o);
  o->name = name;
  o->tensor = tensor;
  o->elems = elems;
  return o;
}

static void set(ts_elem_op *o, double ef, double eb, int kf, int kb, double ff, double fb, int qf,
                int qb)
{
  o->eager_fwd_bytes = ef, o->eager_bwd_bytes = eb;
  o->eager_fwd_kernels = kf, o->eager_bwd_kernels = kb;
  o->fused_fwd_bytes = ff, o->fused_bwd_bytes = fb;
  o->fused_fwd_kernels = qf, o->fused_bwd_kernels = qb;
}

int ts_layer_elementwise_ops(const ts_model *m, const ts_layer *l, ts_elem_op *out)
{
  int n = 0;
  double D = m->dtype_bytes > 0 ? m->dtype_bytes : 2.0;
  double T = (double)l->tokens;
  switch (l->kind) {
  case TS_LAYER_NORM:
    if (l->rms) {
      /* RMSNorm as PyTorch ops (Meta's Llama reference and TorchTitan's norm_type = "rmsnorm":
       * (x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).type_as(x) * weight). Forward,
       * per element: the fp32 copy (D + 4), pow (8), mean (4), x * rsqrt (8), back to bf16
       * (4 + D), times the weight (2D); 7 kernels with the per-row add and rsqrt. Backward
       * (autograd of each): grad x weight and the weight's product and sum (6D), the fp32
       * gradient (D + 4), the product's two gradients and a row sum (24), mean and pow
       * backward (16), the two paths' gradients summed (12), back to bf16 (4 + D): 11 kernels.
       * Fused (Apex, Transformer Engine, torch.compile): one kernel reading the input and
       * writing the output (2D), backward reading input and gradient, writing its gradient
       * (3D): what trainsim's norm op costs. LayerNorm is one aten kernel in eager PyTorch: not
       * listed. */
      ts_elem_op *o = add(out, &n, "rmsnorm", "input (tokens x features)", l->in_act_elems);
      set(o, 4.0 * D + 28.0, 8.0 * D + 60.0, 7, 11, 2.0 * D, 3.0 * D, 1, 2);
    }
    if (l->batch_norm && l->relu) {
      /* The ReLU after a batch norm (torchvision's ResNet: nn.ReLU(inplace=True) after each
       * BatchNorm2d, eager): its own kernel reading and writing the map (2D) forward, and
       * backward (threshold_backward) reading the gradient and the output, writing the
       * gradient (3D). Fused into the batch norm (cuDNN's BN + ReLU): nothing forward, the
       * output's read as the backward's gate (D), what the norm op already costs. */
      ts_elem_op *o = add(out, &n, "relu", "output (channels x map)", l->out_act_elems);
      set(o, 2.0 * D, 3.0 * D, 1, 1, 0.0, D, 0, 0);
    }
    if (l->batch_norm && l->residual) {
      /* The residual add after the block's last batch norm (torchvision: out += identity):
       * its own kernel reading both and writing the sum (3D) forward; backward, autograd sums
       * the block input's two gradients (the shortcut's and the first convolution's) in a
       * kernel of its own (3D). Fused (cuDNN's BN + add + ReLU): the shortcut read forward and
       * its gradient's write backward (D each), what the norm op already costs. */
      ts_elem_op *o = add(out, &n, "residual add", "output (channels x map)", l->out_act_elems);
      set(o, 3.0 * D, 3.0 * D, 1, 1, D, D, 0, 0);
    }
    break;
  case TS_LAYER_ATTENTION:
    if (l->rotary && l->kv_lora_rank == 0) {
      /* Rotary embedding through complex numbers (Meta's reference, TorchTitan's
       * apply_rotary_emb): per element of Q and K, the fp32 copy (D + 4), the complex multiply
       * (8), back to bf16 (4 + D), 3 kernels per tensor each way; fused, one kernel reading and
       * writing each (2D). */
      double S = l->kv_tokens > 0 ? (double)l->kv_tokens : T;
      double I = l->inner > 0 ? (double)l->inner : (double)l->in_features, a = (double)l->heads;
      double J = l->kv_heads > 0 && a > 0 ? I / a * (double)l->kv_heads : I;
      ts_elem_op *o = add(out, &n, "rope", "queries and keys (tokens x q/k width)", T * I + S * J);
      set(o, 2.0 * D + 16.0, 2.0 * D + 16.0, 6, 6, 2.0 * D, 2.0 * D, 1, 1);
    }
    break;
  case TS_LAYER_DENSE:
    if (l->gated) {
      /* SwiGLU / GeGLU, act(gate) * up (TorchTitan's w2(F.silu(w1(x)) * w3(x))): eager, the
       * activation (2D) and the product (3D) forward; the product's two gradients (6D) and the
       * activation's (3D) backward. Fused: one kernel each way (3D forward; 5D backward,
       * reading the gradient, gate and up, writing both gradients). */
      ts_elem_op *o = add(out, &n, "swiglu", "gated output (tokens x ffn)", l->out_act_elems);
      set(o, 5.0 * D, 9.0 * D, 2, 3, 3.0 * D, 5.0 * D, 1, 1);
    }
    if (l->vocab > 0 && l->tp == TS_TP_VOCAB) {
      /* The loss, cross_entropy(logits.float(), labels) as PyTorch runs it uncompiled: the fp32
       * copy (D + 4), log-softmax (a max/sum pass and a write, 12), the NLL gather; backward the
       * NLL gradient (4), the log-softmax backward (12) and back to bf16 (4 + D). A fused
       * vocabulary-parallel loss (Megatron-LM) reads the logits once forward (D) and reads
       * them and writes their gradient backward (2D). */
      ts_elem_op *o = add(out, &n, "cross-entropy", "logits (tokens x vocabulary)",
                          T * (double)l->out_features);
      set(o, D + 16.0, D + 20.0, 3, 3, D, 2.0 * D, 1, 1);
      o->loss = TRUE;
    }
    break;
  default:
    break;
  }
  if (l->residual && l->kind != TS_LAYER_NORM) {
    /* The residual add (with dropout before it when the model has it): eager, its own kernel
     * (3D; dropout 2D + 1 more, its 1-byte mask), and in backward the residual stream's two
     * gradients summed (3D; dropout's mask applied 2D + 1). Fused (Megatron-LM's
     * bias-dropout-add, or compiled into the next norm): one more write of the sum (D), and
     * the mask (1). */
    double drop = l->dropout ? 2.0 * D + 1.0 : 0.0, mask = l->dropout ? 1.0 : 0.0;
    ts_elem_op *o = add(out, &n, l->dropout ? "dropout + residual add" : "residual add",
                        "output (tokens x hidden)", l->out_act_elems);
    set(o, 3.0 * D + drop, 3.0 * D + drop, l->dropout ? 2 : 1, l->dropout ? 2 : 1, D + mask,
        D + mask, 0, 0);
  }
  return n;
}

void ts_fp8_scaling_cost(double m, double n, double k, double x_rows, double g_rows, double hp,
                         ts_fp8_cost *o)
{
  memset(o, 0, sizeof *o);
  if (!(m > 0 && n > 0 && k > 0))
    return;
  /* Dynamic tensor-wise scaling (torchao's Float8Linear; Transformer Engine's current
   * scaling): each high-precision tensor is read once for its amax and once for the cast, which
   * writes one byte per element. The scaled GEMMs (cuBLASLt's FP8 kernels on Hopper) take
   * their operands in one layout only, so backward needs transposed FP8 copies: the weight's
   * for the input gradient, the input's and the output gradient's for the weight gradient (a
   * read and a write of one byte each). */
  double cast = 2.0 * hp + 1.0;
  o->fwd_bytes = cast * (x_rows * k + k * n);
  o->fwd_kernels = 4;
  o->dgrad_bytes = cast * g_rows * n + 2.0 * k * n;
  o->dgrad_kernels = 3;
  o->wgrad_bytes = 2.0 * (m * k + m * n);
  o->wgrad_kernels = 2;
}
