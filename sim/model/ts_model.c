/* ts_model: reads models/NAME.ini (explicit layer lists or transformer / ResNet generators) and
 * derives every layer's parameters, FLOPs, memory traffic and saved activations. */
#include "ts_model.h"
#include "ts_cost.h"
#include "ts_util.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* Ranges accepted for shapes. Wider than any published network, narrow enough that products
 * of a few of them stay exact in a double (2^24 * 2^24 * 2^16 < 2^53 is not needed: FLOPs are
 * estimates, but counts of parameters up to 1e15 are exact). */
#define DIM_MAX ((gint64)1 << 24)   /* features, channels, hidden, vocabulary, tokens, pixels */
#define SMALL_MAX ((gint64)1 << 16) /* heads, layers, repeat, kernel, stride, padding */
#define LAYERS_MAX (1 << 20)        /* layers emitted after repeat / generation */
#define PARAMS_MAX 1e15             /* a model beyond this is a typo, not a network */

/* Element-wise FLOP counts per element, after the DeepSpeed flops profiler
 * (deepspeed/profiling/flops_profiler/profiler.py: layer/batch norm with affine 5 per element,
 * softmax 1, relu/gelu 1, pooling 1 per input element, add 1, embedding lookup 0, dropout 0).
 * They are small next to the GEMMs (under 0.5% for the shipped transformers), and what matters
 * for such layers is their memory traffic, which is counted separately. */
#define NORM_FWD_FLOPS 5.0    /* mean, centre, variance, normalise, affine */
#define NORM_BWD_W_FLOPS 3.0  /* dgamma = sum(dy * xhat) (multiply-add), dbeta = sum(dy) */
#define CROSS_ENTROPY_BYTES 4 /* logits kept in fp32 for the loss (Korthikanti 2022, 4.3) */

/* SwiGLU and GeGLU (Shazeer 2020, "GLU Variants Improve Transformer") are gated: fc1 computes a
 * gate and an up projection, and the MLP's value is act(gate) * up. Only the transformer
 * generator offers them (a layer list has no way to say that fc1's output is halved). */
typedef enum { ACT_NONE, ACT_RELU, ACT_GELU, ACT_TANH, ACT_SWIGLU, ACT_GEGLU } ts_act;
static const char *const act_names[] = {"none", "relu", "gelu", "tanh", NULL};
static const char *const mlp_act_names[] = {"none",   "relu",  "gelu", "tanh",
                                            "swiglu", "geglu", NULL};

/* Everything needed to derive one layer's costs; the parsers and generators fill it, and one
 * function (derive) turns it into a ts_layer, so explicit and generated layers agree. */
typedef struct {
  ts_layer_kind kind;
  ts_tp_mode tp;
  gint64 tokens, in_f, out_f;             /* dense, attention (hidden), embedding (hidden) */
  gint64 in_h, in_w, kh, kw, stride, pad; /* conv2d, pool, norm over a map (in_f = channels) */
  gint64 heads, vocab, positions, token_types;
  gint64 kv_tokens;   /* attention: key/value vectors (0: tokens, self-attention) */
  gint64 inner;       /* attention: heads x per-head width (0: in_f) */
  gint64 rel_buckets; /* attention: T5 relative-position bias table, buckets x heads params */
  gint64 groups;      /* conv2d: channel groups (0 or 1: a dense convolution) */
  gint64 pad_w;       /* conv2d: the width's padding when own_pad_w (a 1x7 kernel), else pad */
  gboolean own_pad_w;
  gboolean rms; /* norm: RMS norm (scale only, 1 parameter per feature) */
  gboolean bias, tied, residual, dropout, loss, learned_pos, avg_pool, map;
  gboolean pre_relu; /* dense / conv2d: a ReLU on the input first (AmoebaNet's ReLU-conv-BN) */
  gboolean first;    /* consumes the model input: no input gradient for dense / conv2d */
  ts_act act;
  gint64 experts, top_k; /* mixture of experts: copies of the layer, copies each token visits */
  gboolean router;       /* the expert layer also holds the gate (in_f x experts) */
  gboolean router_bias;  /* ... and a bias of one per expert (DeepSeek-V3's load-balancing bias) */
  double capacity;       /* experts: capacity factor (0: dropless) */
  gint64 kv_heads;       /* attention: key/value heads (0: heads) */
  gboolean rotary;       /* attention: rotary embedding on Q and K */
  gboolean causal;       /* attention: causal self-attention (a query sees no later key) */
  gint64 q_lora, kv_lora, qk_nope, qk_rope, v_dim; /* attention: MLA (kv_lora 0: not MLA) */
  gint64 vocab_div; /* embedding / logits: Megatron's make_vocab_size_divisible_by */
} layer_spec;

typedef struct {
  const char *path;
  double dtype_bytes;
  GArray *layers; /* of ts_layer; names owned */
  GArray *reads;  /* of read_edge: outputs layers read besides their main input */
  /* Block of the layers added next (-1: none); generators that never set it get blocks
   * derived from layer names (block_names). */
  int block;
  gboolean block_names;
  ts_attention attention; /* [model] attention, for attention layers */
} builder;

/* Layer `reader` reads the output of layer `producer` (an earlier one). */
typedef struct {
  int reader, producer;
} read_edge;

static const char *const kind_names[] = {"dense", "conv2d", "attention", "embedding",
                                         "norm",  "pool",   NULL};
static const char *const tp_names[] = {"replicated", "column", "row", "heads", "vocab", NULL};

const char *ts_layer_kind_name(ts_layer_kind k)
{
  g_return_val_if_fail((int)k >= 0 && k <= TS_LAYER_POOL, "?");
  return kind_names[k];
}

const char *ts_tp_mode_name(ts_tp_mode t)
{
  g_return_val_if_fail((int)t >= 0 && t <= TS_TP_VOCAB, "?");
  return tp_names[t];
}

/* ---- derivation of costs ------------------------------------------------------------------ */

static gint64 conv_out(gint64 in, gint64 k, gint64 stride, gint64 pad)
{
  return (in + 2 * pad - k) / stride + 1;
}

/* Elements of weights a layer reads per pass: its parameters, or for a tied logits layer the
 * shared embedding table it multiplies by (it owns none of them). */
static double weight_elems(const ts_layer *l)
{
  if (l->kind == TS_LAYER_DENSE && l->tied)
    return (double)l->in_features * (double)l->out_features + (l->bias ? l->out_features : 0);
  if (l->kind == TS_LAYER_EMBEDDING)
    return 0.0; /* the rows it reads are per sample, counted as activation traffic */
  return l->params;
}

/* Fills the GEMM-like costs (dense and conv2d): macs multiply-adds per sample, ei/eo input and
 * output elements. Backward is input gradient + weight gradient, each a GEMM as large as the
 * forward one (Narayanan et al. 2021, section 5.1: backward = 2x forward). */
static void derive_gemm(ts_layer *l, const layer_spec *sp, double D, double macs, double ei,
                        double eo, double kernel_params)
{
  double gemm = 2.0 * macs;
  double bias = sp->bias ? 1.0 : 0.0;
  double elem = ((sp->act != ACT_NONE) + sp->residual + sp->loss) * eo;
  /* A ReLU on the input: one FLOP per input element each way; its output is the input the
   * layer keeps (no extra bytes), written and read once more. */
  double pre = sp->pre_relu ? ei : 0.0;
  l->params = (sp->tied ? 0.0 : kernel_params) + bias * (double)sp->out_f;
  l->fwd_flops = gemm + bias * eo + elem + pre;
  /* The first layer's input is data, which needs no gradient (autograd skips it). */
  l->bwd_input_flops = (sp->first ? 0.0 : gemm + pre) + elem;
  l->bwd_weight_flops = gemm + bias * eo;
  l->in_act_elems = ei;
  l->out_act_elems = eo;
  /* Kept for backward: the input (weight gradient), the pre-activation output (activation
   * derivative), a one-byte dropout mask, fp32 logits for the loss. Korthikanti et al. 2022,
   * section 4.1, counts the MLP exactly this way: 2sbh + 8sbh (fc1), 8sbh + sbh (fc2). */
  l->saved_act_bytes = D * ei + (sp->act != ACT_NONE ? D * eo : 0.0) + (sp->dropout ? eo : 0.0) +
                       (sp->loss ? CROSS_ENTROPY_BYTES * eo : 0.0);
  double w = weight_elems(l);
  l->fwd_mem_bytes = D * (w + ei + eo + 2.0 * pre);
  l->bwd_mem_bytes = D * (2.0 * w + ei + eo + (sp->first ? 0.0 : ei + 2.0 * pre));
  if (sp->act == ACT_SWIGLU || sp->act == ACT_GEGLU) {
    /* Gated: the GEMM writes gate and up (eo = 2 x the width), the activation of the gate and
     * the product are one FLOP per gate element each (the eo FLOPs above), both halves are
     * kept for backward (counted above as the pre-activation output), and the layer's output
     * is their product, half as wide: written once forward, its gradient read once backward. */
    l->gated = TRUE;
    l->out_act_elems = eo / 2.0;
    l->fwd_mem_bytes += D * eo / 2.0;
    l->bwd_mem_bytes += D * eo / 2.0;
  }
}

/* Multi-head latent attention (DeepSeek-V2, Liu et al. 2024, section 2.1, equations 9-19;
 * the layer shapes of the released DeepSeek-V2/V3 checkpoints). Per token, with a heads of
 * query/key width dn + dr (dr: the decoupled rotary part) and value width dv:
 *   q_a: h -> rq, an RMS norm over rq, q_b: rq -> a (dn + dr)   (rq = 0: one h -> a (dn + dr))
 *   kv_a: h -> rkv + dr (the latent and the shared rotary key), an RMS norm over rkv,
 *   kv_b: rkv -> a (dn + dv), then attention, and the output o: a dv -> h.
 * No biases. Self-attention only (S = T). Scores 2 T S a (dn + dr), context 2 T S a dv. Kept
 * for backward: the input, each latent before and after its norm, Q and K (a (dn + dr) wide),
 * V and the context (a dv), and the T x S terms as in standard attention. */
static void derive_mla(ts_layer *l, const layer_spec *sp, double D)
{
  double T = (double)sp->tokens, h = (double)sp->in_f, a = (double)sp->heads;
  double rq = (double)sp->q_lora, rkv = (double)sp->kv_lora;
  double dn = (double)sp->qk_nope, dr = (double)sp->qk_rope, dv = (double)sp->v_dim;
  double Iqk = a * (dn + dr), Iv = a * dv, res = sp->residual ? 1.0 : 0.0;
  /* Multiply-adds per token of the five (or four) projections, and the norms' features. */
  double macs =
      (rq > 0 ? h * rq + rq * Iqk : h * Iqk) + h * (rkv + dr) + rkv * a * (dn + dv) + Iv * h;
  double nf = rq + rkv;
  l->kv_lora_rank = sp->kv_lora;
  l->q_lora_rank = sp->q_lora;
  l->qk_rope_dim = sp->qk_rope;
  l->rotary = TRUE;
  l->causal = sp->causal;
  l->kv_tokens = sp->tokens;
  l->inner = (gint64)Iv;
  l->qk_inner = (gint64)Iqk;
  l->params = macs + nf;
  double proj = 2.0 * T * macs, core = 2.0 * T * T * (Iqk + Iv), soft = a * T * T;
  double norms = NORM_FWD_FLOPS * T * nf, rope = 3.0 * T * (a * dr + dr);
  l->fwd_flops = proj + core + norms + soft + rope + res * T * h;
  l->bwd_input_flops = proj + 2.0 * core + norms + soft + rope + res * T * h;
  l->bwd_weight_flops = proj + NORM_BWD_W_FLOPS * T * nf;
  l->in_act_elems = T * h;
  l->out_act_elems = T * h;
  double soft_copies = sp->dropout ? 2.0 : 1.0;
  double linear_bytes = D * (T * h + 2.0 * T * nf + T * dr + 2.0 * T * Iqk + 2.0 * T * Iv) +
                        (sp->dropout ? T * h : 0.0);
  double scores_bytes = soft_copies * D * a * T * T + (sp->dropout ? a * T * T : 0.0);
  l->saved_act_bytes = linear_bytes + scores_bytes;
  /* Traffic as standard attention: weights, input and output, the latents written and read,
   * Q, K, V and the context written then read; scores fused. */
  double inner = 2.0 * T * (nf + dr) + 2.0 * (2.0 * T * Iqk + 2.0 * T * Iv);
  l->fwd_mem_bytes = D * (l->params + 2.0 * T * h + inner);
  l->bwd_mem_bytes = D * (2.0 * l->params + 3.0 * T * h + inner);
}

/* An attention layer's queries T, keys S and inner width I. Layers built by hand (tests, the
 * validator) may leave kv_tokens and inner 0: self-attention of width in_features. */
static void attention_dims(const ts_layer *l, double *T, double *S, double *I)
{
  *T = (double)l->tokens;
  *S = l->kv_tokens > 0 ? (double)l->kv_tokens : *T;
  *I = l->inner > 0 ? (double)l->inner : (double)l->in_features;
}

/* Korthikanti et al. 2022, section 4.1, attention block: 11sbh + 5as^2b bytes in 16-bit: QKV
 * input 2sbh, Q and K 4sbh, V 2sbh, output-projection input 2sbh, output dropout mask sbh;
 * softmax output 2as^2b, its dropout mask as^2b, dropout output 2as^2b. Written with D bytes
 * per element and 1 byte per mask element, T queries, S keys, width I: in D Th, inner
 * D (2TI + 2SI), mask Th (dropout), scores D c aTS + aTS (dropout, c = 2) or D aTS. Fused
 * (FlashAttention, Dao et al. 2022, Algorithm 2: the forward saves the output and the row
 * statistics; the dropout mask is regenerated from the RNG state): scores = 4 aT, one fp32
 * log-sum-exp per query row and head. A cross-attention's K / V input is the encoder output,
 * kept once for every decoder layer (the model's carried tensor), so it is not counted per
 * layer. */
static void attention_parts(const ts_layer *l, double D, ts_attention attn, ts_act_parts *o)
{
  double T, S, I, h = (double)l->in_features, a = (double)l->heads;
  attention_dims(l, &T, &S, &I);
  o->in = D * T * h;
  o->mask = l->dropout ? T * h : 0.0;
  /* Keys and values are J = kv_heads / heads x I wide (grouped-query attention). */
  double J = l->kv_heads > 0 ? I / a * (double)l->kv_heads : I;
  o->inner = D * (2.0 * T * I + 2.0 * S * J);
  if (attn == TS_ATTN_FLASH)
    o->scores = 4.0 * a * T;
  else
    o->scores = l->dropout ? (2.0 * D + 1.0) * a * T * S : D * a * T * S;
}

const char *ts_attention_name(ts_attention a)
{
  return a == TS_ATTN_FLASH ? "flash" : "unfused";
}

void ts_layer_act_parts(const ts_model *m, const ts_layer *l, ts_attention attn, ts_act_parts *o)
{
  double D = m->dtype_bytes, saved = l->saved_act_bytes;
  memset(o, 0, sizeof *o);
  switch (l->kind) {
  case TS_LAYER_DENSE:
  case TS_LAYER_CONV2D:
    o->in = MIN(D * l->in_act_elems, saved);
    if (l->tp == TS_TP_ROW)
      o->mask = saved - o->in; /* a row layer keeps only its output's dropout mask */
    else
      o->inner = saved - o->in; /* activation input, loss logits */
    break;
  case TS_LAYER_ATTENTION: {
    /* The layer's own saved bytes stand (a layer built by hand may state them): what is not
     * input, mask or its own scores term is inner; the scores term is then the one asked for. */
    ts_act_parts own;
    attention_parts(l, D, l->attention, &own);
    attention_parts(l, D, attn, o);
    o->inner = saved - own.in - own.mask - own.scores;
    break;
  }
  case TS_LAYER_EMBEDDING:
    o->mask = saved;
    break;
  case TS_LAYER_NORM:
  case TS_LAYER_POOL:
    o->in = saved;
    break;
  }
}

void ts_layer_precision(const ts_layer *l, int requested, int *gemm, int *other)
{
  /* Transformer Engine's FP8 recipe: the linear layers' GEMMs (QKV, attention output, MLP)
   * in FP8; the vocabulary projection (Megatron's output layer is not a TE module) and
   * embedding, attention's core (dot-product attention in bf16), norms, softmax, activations
   * and dropout in bf16; the optimizer in fp32 (docs/models.md, "Precision"). */
  gboolean gemm_layer = l->kind == TS_LAYER_DENSE || l->kind == TS_LAYER_ATTENTION;
  gboolean vocab = l->tp == TS_TP_VOCAB || l->vocab > 0;
  *other = requested == TS_PRECISION_FP8 ? TS_PRECISION_BF16 : requested;
  *gemm = requested == TS_PRECISION_FP8 && (!gemm_layer || vocab) ? TS_PRECISION_BF16 : requested;
}

/* Transformer Engine under an FP8 recipe (te.Linear, LayerNormLinear, LayerNormMLP: the input
 * quantized for the forward GEMM is what the layer saves for its weight gradient, FP8 column-
 * wise data, one byte an element): a layer whose GEMMs run in FP8 keeps its GEMM input at one
 * byte instead of D. What is not a GEMM input stays in bf16: a gated or activated MLP's
 * pre-activation (the activation's backward reads it), attention's Q, K, V and its output
 * (the fused attention kernel keeps them for its own backward), the norms' inputs. The output
 * projection's input is that attention output, which the core keeps in bf16: TE's Linear saves
 * its FP8 copy besides, one byte an element more. The vocabulary projection stays bf16
 * (ts_layer_precision). */
void ts_layer_saved_parts(const ts_model *m, const ts_layer *l, ts_attention attn,
                          gboolean fp8_saved, ts_act_parts *ap)
{
  double D = m->dtype_bytes;
  ts_layer_act_parts(m, l, attn, ap);
  if (!fp8_saved)
    return;
  int gemm, other;
  ts_layer_precision(l, TS_PRECISION_FP8, &gemm, &other);
  if (gemm != TS_PRECISION_FP8 || !(D > 1.0))
    return;
  if (l->kind == TS_LAYER_DENSE) {
    ap->in /= D;
  } else if (l->kind == TS_LAYER_ATTENTION) {
    double T, S, I;
    attention_dims(l, &T, &S, &I);
    ap->in /= D;
    ap->inner += T * I;
  }
}

double ts_layer_saved_bytes(const ts_model *m, const ts_layer *l, gboolean fp8_saved)
{
  ts_act_parts ap;
  ts_layer_saved_parts(m, l, l->attention, fp8_saved, &ap);
  return ap.in + ap.inner + ap.mask + ap.scores;
}

static void derive(ts_layer *l, const layer_spec *sp, double D)
{
  l->kind = sp->kind;
  l->tp = sp->tp;
  l->bias = sp->bias;
  l->tied = sp->tied;
  l->dropout = sp->dropout;
  l->residual = sp->residual;
  l->rms = sp->kind == TS_LAYER_NORM && sp->rms;
  l->tokens = sp->tokens;
  l->in_features = sp->in_f;
  l->heads = sp->heads;
  l->vocab = sp->vocab;
  double T = (double)sp->tokens;
  double res = sp->residual ? 1.0 : 0.0;
  double act = sp->act != ACT_NONE ? 1.0 : 0.0;
  switch (sp->kind) {
  case TS_LAYER_DENSE: {
    l->out_features = sp->out_f;
    double K = (double)sp->in_f, N = (double)sp->out_f;
    derive_gemm(l, sp, D, T * K * N, T * K, T * N, K * N);
    if (sp->experts > 0) {
      /* Mixture of experts (Shazeer et al. 2017; Lepikhin et al. 2021, GShard, section 2.2):
       * E copies of the layer, each token through top_k of them, so parameters scale with E
       * and work and kept activations with top_k; the gate (K x E, softmax) is folded into
       * the first expert layer. Routing is assumed balanced (no capacity padding or drops). */
      double E = (double)sp->experts, k = (double)sp->top_k;
      double gate = sp->router ? K * E + (sp->router_bias ? E : 0.0) : 0.0,
             gate_flops = sp->router ? 2.0 * T * K * E : 0.0;
      l->experts = sp->experts;
      l->top_k = sp->top_k;
      l->capacity_factor = sp->capacity;
      l->active_params = l->params * k + gate;
      /* A capacity factor C (GShard, section 2.2; Switch, Fedus et al. 2022, section 2.2): each
       * expert takes C x its balanced share k T / E of token copies. Under balanced routing
       * that is C x the dropless work: C < 1 drops the rest (they skip the MLP through the
       * residual), C > 1 computes padding, as drop-and-pad implementations do. */
      if (sp->capacity > 0.0)
        k *= sp->capacity;
      l->params = l->params * E + gate;
      l->fwd_flops = l->fwd_flops * k + gate_flops + (sp->router ? T * E : 0.0);
      l->bwd_input_flops = l->bwd_input_flops * k + gate_flops;
      l->bwd_weight_flops = l->bwd_weight_flops * k + gate_flops;
      l->saved_act_bytes *= k;
      /* Every expert's weights are read once per micro-batch; activations top_k times. */
      double w = l->params;
      double No = l->out_act_elems / T; /* the output width (half of N when gated) */
      l->fwd_mem_bytes = D * (w + k * (T * K + T * N + (l->gated ? T * No : 0.0)));
      l->bwd_mem_bytes = D * (2.0 * w + k * (2.0 * T * K + T * N + (l->gated ? T * No : 0.0)));
    }
    break;
  }
  case TS_LAYER_CONV2D: {
    l->out_features = sp->out_f;
    l->kernel_h = sp->kh;
    l->kernel_w = sp->kw;
    l->stride = sp->stride;
    l->padding = sp->pad;
    l->padding_w = sp->own_pad_w ? sp->pad_w : sp->pad;
    l->in_h = sp->in_h;
    l->in_w = sp->in_w;
    l->out_h = conv_out(sp->in_h, sp->kh, sp->stride, sp->pad);
    l->out_w = conv_out(sp->in_w, sp->kw, sp->stride, l->padding_w);
    /* A grouped convolution connects each output channel to in / groups input channels
     * (depthwise: groups = channels, one input channel each). */
    l->groups = sp->groups > 1 ? sp->groups : 1;
    double k =
        (double)sp->in_f / (double)l->groups * (double)sp->out_f * (double)sp->kh * (double)sp->kw;
    double pixels_out = (double)l->out_h * (double)l->out_w;
    derive_gemm(l, sp, D, k * pixels_out, (double)sp->in_f * (double)sp->in_h * (double)sp->in_w,
                (double)sp->out_f * pixels_out, k);
    break;
  }
  case TS_LAYER_ATTENTION: {
    l->out_features = sp->in_f;
    if (sp->kv_lora > 0) {
      derive_mla(l, sp, D);
      break;
    }
    /* Narayanan et al. 2021, section 5.1 / appendix: QKV 6sh^2, scores QK^T 2s^2h, context
     * 2s^2h, output projection 2sh^2 (per sample, b = 1). Softmax 1 FLOP per score (DeepSpeed
     * profiler). Backward: the two projections are GEMMs with weights (input and weight
     * gradients each = forward); scores and context have no weights, their backward is two
     * GEMMs each (dQ, dK; dP, dV), all input gradient.
     * Generalised to queries from T tokens and keys / values from S (cross-attention over an
     * encoder's S tokens, Vaswani et al. 2017, section 3.2.3; S = T for self-attention), an
     * inner width I = heads x kv_channels (T5-3B/11B: I != h; Raffel et al. 2020, 3.7), and
     * g key/value heads shared by groups of query heads (grouped-query attention, Ainslie et
     * al. 2023; multi-query g = 1, Shazeer 2019), so K and V are J = g/a x I wide:
     * Q 2ThI, K and V 2 x 2ShJ, output 2TIh; scores and context 2TSI each (every query head
     * still scores every key). */
    double h = (double)sp->in_f, a = (double)sp->heads;
    double S = sp->kv_tokens > 0 ? (double)sp->kv_tokens : T;
    double I = sp->inner > 0 ? (double)sp->inner : h;
    double g = sp->kv_heads > 0 ? (double)sp->kv_heads : a;
    double J = I / a * g; /* key / value width */
    gboolean cross = sp->kv_tokens > 0;
    l->cross = cross;
    l->kv_tokens = (gint64)S;
    l->inner = (gint64)I;
    l->kv_heads = sp->kv_heads;
    l->rotary = sp->rotary;
    l->causal = sp->causal && !cross;
    double proj = 2.0 * h * I * T + 2.0 * T * I * h + 4.0 * S * h * J, core = 4.0 * T * S * I,
           soft = a * T * S;
    double bias = sp->bias ? 1.0 : 0.0, rel = sp->rel_buckets > 0 ? 1.0 : 0.0;
    l->params = 2.0 * h * I + 2.0 * h * J + bias * (I + 2.0 * J + h) + (double)sp->rel_buckets * a;
    double bias_flops = bias * (T * I + 2.0 * S * J + T * h);
    /* Rotary embedding (Su et al. 2021, RoFormer, equation 34): each element of Q and K is
     * x cos + rotate(x) sin, 3 FLOPs, and the same again for its gradient; no parameters. */
    double rope = sp->rotary ? 3.0 * (T * I + S * J) : 0.0;
    l->fwd_flops = proj + core + bias_flops + (1.0 + rel) * soft + res * T * h + rope;
    l->bwd_input_flops = proj + 2.0 * core + soft + res * T * h + rope;
    l->bwd_weight_flops = proj + bias_flops + rel * soft;
    l->in_act_elems = T * h;
    l->out_act_elems = T * h;
    /* Kept activations: attention_parts (flash or unfused, the layer's choice). */
    ts_act_parts parts;
    attention_parts(l, D, l->attention, &parts);
    l->saved_act_bytes = parts.in + parts.inner + parts.mask + parts.scores;
    /* Traffic: weights, input, output (and the encoder output read by K and V), plus Q, K, V
     * and context written then read; the T x S scores are assumed fused (FlashAttention, Dao
     * et al. 2022) and never stored. */
    double inner = 2.0 * (2.0 * T * I + 2.0 * S * J);
    double enc = cross ? S * h : 0.0;
    l->fwd_mem_bytes = D * (l->params + 2.0 * T * h + enc + inner);
    l->bwd_mem_bytes = D * (2.0 * l->params + 3.0 * T * h + 2.0 * enc + inner);
    break;
  }
  case TS_LAYER_EMBEDDING: {
    /* A lookup: no multiply. Adding the position / token-type rows is 1 FLOP per element;
     * backward scatter-adds the output gradient into each table's rows. */
    l->out_features = sp->in_f;
    double h = (double)sp->in_f;
    double tables = 1.0 + (sp->learned_pos ? 1.0 : 0.0) + (sp->token_types > 0 ? 1.0 : 0.0);
    /* A decoder's input embedding shares the encoder's table (T5: tied): no parameters. */
    l->params = sp->tied
                    ? 0.0
                    : (double)sp->vocab * h + (sp->learned_pos ? (double)sp->positions * h : 0.0) +
                          (double)sp->token_types * h;
    l->fwd_flops = (tables - 1.0) * T * h;
    l->bwd_input_flops = 0.0;
    l->bwd_weight_flops = tables * T * h;
    l->in_act_elems = T;
    l->out_act_elems = T * h;
    l->saved_act_bytes = sp->dropout ? T * h : 0.0; /* dropout mask (Korthikanti 2022, 4.3) */
    l->fwd_mem_bytes = D * (T + tables * T * h + T * h);
    l->bwd_mem_bytes = D * (T * h + 2.0 * tables * T * h);
    break;
  }
  case TS_LAYER_NORM: {
    double f = (double)sp->in_f;
    double e = sp->map ? f * (double)sp->in_h * (double)sp->in_w : T * f;
    l->out_features = sp->in_f;
    if (sp->map) {
      l->in_h = l->out_h = sp->in_h;
      l->in_w = l->out_w = sp->in_w;
    }
    l->params = (sp->rms ? 1.0 : 2.0) * f; /* RMS norm: a scale, no shift (Zhang & Sennrich 2019) */
    l->fwd_flops = NORM_FWD_FLOPS * e + (act + res) * e;
    l->bwd_input_flops = NORM_FWD_FLOPS * e + (act + res) * e;
    l->bwd_weight_flops = NORM_BWD_W_FLOPS * e;
    l->in_act_elems = e;
    l->out_act_elems = e;
    /* Input (2sbh per layer norm in Korthikanti 2022, 4.1), and the activation's input. */
    l->saved_act_bytes = D * e + act * D * e;
    l->fwd_mem_bytes = D * (l->params + 2.0 * e);
    l->bwd_mem_bytes = D * (2.0 * l->params + 3.0 * e);
    if (sp->map) {
      /* Batch norm in training (Ioffe & Szegedy 2015, Algorithm 1 and its backward): each
       * channel's mean and variance are over the whole batch and map, so the kernel cannot
       * normalise an element before it has read them all: a statistics pass reads the input,
       * then a second pass reads it again and writes the output (3 e; cuDNN's and PyTorch's
       * native batch-norm training kernels, NCHW and NHWC, for activations larger than the
       * chip's caches). Backward likewise: a pass reading the input and the output gradient for
       * the reductions (dgamma, dbeta), then one reading both again and writing the input
       * gradient (5 e). Fused with what follows it (cuDNN's BN + add + ReLU, MXNet's and
       * TensorFlow's fused batch norm, the default kernels=fused): the ReLU costs its backward's
       * read of the output (the gate), the residual add a read of the shortcut forward and a
       * write of its gradient backward. As separate eager kernels (PyTorch's torchvision
       * ResNet) they cost more: ts_elementwise.c. */
      l->batch_norm = TRUE;
      l->relu = sp->act == ACT_RELU;
      /* Kept: the input only. The ReLU's backward needs its output, which is the tensor the
       * convolution or pool after it keeps as its input (torchvision's ReLU(inplace=True)
       * overwrites the norm's output; cuDNN's fused BN + ReLU writes only the ReLU's):
       * counted there, not twice. */
      l->saved_act_bytes = D * e;
      l->fwd_mem_bytes = D * (l->params + 3.0 * e + res * e);
      l->bwd_mem_bytes = D * (2.0 * l->params + 5.0 * e + act * e + res * e);
    }
    break;
  }
  case TS_LAYER_POOL: {
    l->out_features = sp->in_f;
    l->kernel_h = sp->kh;
    l->kernel_w = sp->kw;
    l->stride = sp->stride;
    l->padding = l->padding_w = sp->pad;
    l->in_h = sp->in_h;
    l->in_w = sp->in_w;
    l->out_h = conv_out(sp->in_h, sp->kh, sp->stride, sp->pad);
    l->out_w = conv_out(sp->in_w, sp->kw, sp->stride, sp->pad);
    double ei = (double)sp->in_f * (double)sp->in_h * (double)sp->in_w;
    double eo = (double)sp->in_f * (double)l->out_h * (double)l->out_w;
    l->params = 0.0;
    /* One compare or add per input element (DeepSpeed profiler), and a residual add. */
    l->fwd_flops = ei + res * eo;
    l->bwd_input_flops = ei + res * eo;
    l->bwd_weight_flops = 0.0;
    l->in_act_elems = ei;
    l->out_act_elems = eo;
    /* Max pooling needs its input (or argmax) for backward; averaging needs only shapes. */
    l->saved_act_bytes = sp->avg_pool ? 0.0 : D * ei;
    l->fwd_mem_bytes = D * (ei + eo);
    l->bwd_mem_bytes = D * (eo + ei + (sp->avg_pool ? 0.0 : ei));
    break;
  }
  }
  if (l->experts == 0)
    l->active_params = l->params;
  if (l->vocab > 0)
    l->vocab_divisible_by = sp->vocab_div;
}

/* Appends a layer reading layer `src`'s output (-1: the model input). */
static gboolean add_layer_from(builder *b, char *name, const layer_spec *sp, int src,
                               GError **error)
{
  if (b->layers->len >= LAYERS_MAX) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: more than %d layers; expected a smaller model (check repeat / layers)",
                b->path, LAYERS_MAX);
    g_free(name);
    return FALSE;
  }
  ts_layer l = {0};
  l.name = name;
  l.src = src;
  l.block = b->block;
  l.attention = b->attention;
  derive(&l, sp, b->dtype_bytes);
  g_array_append_val(b->layers, l);
  return TRUE;
}

/* Index of the last layer added (-1: none yet). */
static int last_layer(const builder *b)
{
  return (int)b->layers->len - 1;
}

/* Appends a layer reading the previous layer's output. */
static gboolean add_layer(builder *b, char *name, const layer_spec *sp, GError **error)
{
  return add_layer_from(b, name, sp, last_layer(b), error);
}

/* The last layer added also reads layer `producer`'s output (a residual add, keys and values,
 * a concatenation). */
static void add_read(builder *b, int producer)
{
  read_edge e = {last_layer(b), producer};
  if (producer >= 0 && producer < e.reader)
    g_array_append_val(b->reads, e);
}

/* Layers belong to the same block when their names share the prefix before the last dot
 * ("block.3.fc1", "layer2.0.conv1"); a name without a dot, or ending in a copy number
 * ("fc.0" from repeat), is a block of its own. */
static gboolean same_block_name(const char *a, const char *b)
{
  const char *da = strrchr(a, '.'), *db = strrchr(b, '.');
  if (da == NULL || db == NULL || da - a != db - b || strncmp(a, b, (size_t)(da - a)) != 0)
    return FALSE;
  for (const char *c = da + 1; *c; c++)
    if (!g_ascii_isdigit(*c))
      return TRUE;
  return FALSE;
}

/* After the layers are built: blocks from names where the generator gave none, and what a cut
 * after each layer carries besides its output. A layer's output is live from its producer
 * until its last reader; a cut after layer i sends every output of a layer j < i whose last
 * reader comes after i. */
static void finish_graph(builder *b)
{
  int n = (int)b->layers->len;
  ts_layer *L = (ts_layer *)(void *)b->layers->data;
  if (b->block_names) {
    int next = 0;
    for (int i = 0; i < n; i++) {
      if (i > 0 && same_block_name(L[i - 1].name, L[i].name))
        L[i].block = L[i - 1].block;
      else
        L[i].block = strchr(L[i].name, '.') != NULL ? next++ : -1;
    }
  }
  int *last = g_new(int, n > 0 ? n : 1);
  for (int i = 0; i < n; i++)
    last[i] = i;
  for (int i = 0; i < n; i++)
    if (L[i].src >= 0)
      last[L[i].src] = MAX(last[L[i].src], i);
  for (guint k = 0; k < b->reads->len; k++) {
    const read_edge *e = &g_array_index(b->reads, read_edge, k);
    last[e->producer] = MAX(last[e->producer], e->reader);
  }
  /* Sweep: `live` sums the outputs produced so far that a later layer reads; ends[i] lists
   * the outputs whose last reader is layer i. */
  g_autoptr(GPtrArray) ends = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  for (int i = 0; i < n; i++)
    g_ptr_array_add(ends, g_array_new(FALSE, FALSE, sizeof(int)));
  for (int j = 0; j < n; j++)
    if (last[j] > j)
      g_array_append_val((GArray *)g_ptr_array_index(ends, last[j]), j);
  double live = 0.0;
  for (int i = 0; i < n; i++) {
    GArray *done = g_ptr_array_index(ends, i);
    for (guint k = 0; k < done->len; k++)
      live -= L[g_array_index(done, int, k)].out_act_elems;
    if (last[i] > i)
      live += L[i].out_act_elems;
    /* Sums of whole element counts below 2^53 are exact: no rounding residue. */
    L[i].carry_elems = live - (last[i] > i ? L[i].out_act_elems : 0.0);
  }
  g_free(last);
}

/* ---- key-file helpers --------------------------------------------------------------------- */

/* Reads [group] key as one of choices (NULL-terminated); *out is the index. def NULL: required. */
static gboolean kf_enum(GKeyFile *kf, const char *path, const char *group, const char *key,
                        const char *def, const char *const *choices, int *out, GError **error)
{
  g_autofree char *v = NULL;
  if (!ts_kf_string(kf, path, group, key, def, &v, error))
    return FALSE;
  if (v != NULL)
    for (int i = 0; choices[i] != NULL; i++)
      if (strcmp(v, choices[i]) == 0) {
        *out = i;
        return TRUE;
      }
  g_autofree char *list = g_strjoinv(" | ", (char **)choices);
  if (v == NULL)
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s: missing; expected one of: %s", path,
                group, key, list);
  else
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s='%s': expected one of: %s", path,
                group, key, v, list);
  return FALSE;
}

static gboolean kf_bool(GKeyFile *kf, const char *path, const char *group, const char *key,
                        gboolean def, gboolean *out, GError **error)
{
  static const char *const bools[] = {"false", "true", NULL};
  int i = def ? 1 : 0;
  if (!kf_enum(kf, path, group, key, bools[i], bools, &i, error))
    return FALSE;
  *out = i == 1;
  return TRUE;
}

/* Reads a dimension that the previous layer's output may imply (inferred > 0): absent, it takes
 * that value; present, it must equal it, so a mismatched shape is caught where it is written. */
static gboolean kf_dim(GKeyFile *kf, const char *path, const char *group, const char *key,
                       gint64 inferred, const char *from, const char *what, gint64 lo, gint64 hi,
                       gint64 *out, GError **error)
{
  if (!ts_kf_int(kf, path, group, key, inferred > 0, inferred, lo, hi, what, out, error))
    return FALSE;
  if (inferred > 0 && *out != inferred) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] %s='%" G_GINT64_FORMAT "': expected %" G_GINT64_FORMAT
                ", the output of [%s]",
                path, group, key, *out, inferred, from);
    return FALSE;
  }
  return TRUE;
}

static gboolean fail_key(GError **error, const char *path, const char *group, const char *key,
                         gint64 value, const char *expected)
{
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s='%" G_GINT64_FORMAT "': expected %s",
              path, group, key, value, expected);
  return FALSE;
}

/* ---- explicit layers (kind = layers) ------------------------------------------------------ */

typedef enum { SHAPE_NONE, SHAPE_VEC, SHAPE_MAP } shape_form;

/* The output of the layer parsed last: vectors (tokens x features) or a feature map (c x h x w). */
typedef struct {
  shape_form form;
  gint64 tokens, features;
  gint64 c, h, w;
  const char *from; /* group that produced it; borrowed from the key file's group list */
  gint64 emb_vocab, emb_hidden; /* the embedding seen, for tied logits; 0 when none */
} shape;

static gboolean wrong_input(GError **error, const char *path, const char *group, const char *kind,
                            const char *expected, const shape *in)
{
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "%s: [%s] kind='%s': expected %s, but [%s] outputs %s", path, group, kind, expected,
              in->from, in->form == SHAPE_MAP ? "a feature map" : "vectors");
  return FALSE;
}

static gboolean same_shape(const shape *a, const shape *b)
{
  return a->form == b->form &&
         (a->form == SHAPE_VEC ? a->tokens == b->tokens && a->features == b->features
                               : a->c == b->c && a->h == b->h && a->w == b->w);
}

/* Multi-head latent attention in a layer list (the keys of [transformer], derive_mla):
 * kv_lora_rank > 0 makes the layer MLA, with its own head widths, one key per query head, no
 * biases and rotary on the decoupled part; the other keys need it. */
static gboolean parse_latent_attention(GKeyFile *kf, const char *path, const char *group,
                                       layer_spec *sp, GError **error)
{
  static const char *const mla_keys[] = {"q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                         "v_head_dim"};
  if (!ts_kf_int(kf, path, group, "kv_lora_rank", TRUE, 0, 0, DIM_MAX,
                 "a key/value latent rank (0: no multi-head latent attention)", &sp->kv_lora,
                 error))
    return FALSE;
  if (sp->kv_lora == 0) {
    for (size_t k = 0; k < G_N_ELEMENTS(mla_keys); k++)
      if (g_key_file_has_key(kf, group, mla_keys[k], NULL)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "%s: [%s] %s: a multi-head latent attention key; expected kv_lora_rank > 0 "
                    "with it",
                    path, group, mla_keys[k]);
        return FALSE;
      }
    return TRUE;
  }
  if (!ts_kf_int(kf, path, group, "q_lora_rank", TRUE, 0, 0, DIM_MAX,
                 "a query latent rank (0: a full query projection)", &sp->q_lora, error) ||
      !ts_kf_int(kf, path, group, "qk_nope_head_dim", FALSE, 0, 1, DIM_MAX,
                 "a positive query/key head width without rotary", &sp->qk_nope, error) ||
      !ts_kf_int(kf, path, group, "qk_rope_head_dim", FALSE, 0, 1, DIM_MAX,
                 "a positive rotary query/key head width", &sp->qk_rope, error) ||
      !ts_kf_int(kf, path, group, "v_head_dim", FALSE, 0, 1, DIM_MAX, "a positive value head width",
                 &sp->v_dim, error))
    return FALSE;
  const char *clash = sp->kv_heads != sp->heads                                      ? "kv_heads"
                      : sp->bias                                                     ? "bias"
                      : g_key_file_has_key(kf, group, "rotary", NULL) && !sp->rotary ? "rotary"
                                                                                     : NULL;
  if (clash != NULL) {
    g_set_error(
        error, TS_ERROR, TS_ERROR_INPUT,
        "%s: [%s] %s: not available with kv_lora_rank (multi-head latent attention has "
        "one key per query head, decoupled rotary keys and no biases); expected bias = false, "
        "kv_heads and rotary left out",
        path, group, clash);
    return FALSE;
  }
  if (sp->heads * (sp->qk_nope + sp->qk_rope + sp->v_dim) > DIM_MAX)
    return fail_key(error, path, group, "heads", sp->heads,
                    "heads x (qk_nope_head_dim + qk_rope_head_dim + v_head_dim) at most 2^24");
  sp->rotary = TRUE;
  return TRUE;
}

/* in: the previous output (updated to this layer's); seen: every earlier output, for residuals. */
static gboolean parse_layer(GKeyFile *kf, const char *path, const char *group, shape *in,
                            const GArray *seen, layer_spec *sp, gint64 *repeat, GError **error)
{
  int kind = 0;
  if (!kf_enum(kf, path, group, "kind", NULL, kind_names, &kind, error))
    return FALSE;
  static const char *const keys[][20] = {
      [TS_LAYER_DENSE] = {"kind", "repeat", "tp", "input", "in_features", "out_features", "tokens",
                          "bias", "activation", "residual", "residual_from", "dropout", "loss",
                          "tied", "experts", "top_k", "capacity_factor", "router", NULL},
      [TS_LAYER_CONV2D] = {"kind", "repeat", "tp", "input", "in_channels", "out_channels", "in_h",
                           "in_w", "kernel", "kernel_h", "kernel_w", "stride", "padding", "groups",
                           "bias", "activation", "residual", "residual_from", NULL},
      [TS_LAYER_ATTENTION] = {"kind",
                              "repeat",
                              "tp",
                              "input",
                              "hidden",
                              "heads",
                              "tokens",
                              "bias",
                              "residual",
                              "residual_from",
                              "dropout",
                              "kv_heads",
                              "rotary",
                              "q_lora_rank",
                              "kv_lora_rank",
                              "qk_nope_head_dim",
                              "qk_rope_head_dim",
                              "v_head_dim",
                              "causal",
                              NULL},
      [TS_LAYER_EMBEDDING] = {"kind", "repeat", "tp", "input", "vocab", "hidden", "tokens",
                              "position_embedding", "positions", "token_types", "dropout", NULL},
      [TS_LAYER_NORM] = {"kind", "repeat", "tp", "input", "features", "tokens", "channels", "in_h",
                         "in_w", "activation", "residual", "residual_from", NULL},
      [TS_LAYER_POOL] = {"kind", "repeat", "tp", "input", "channels", "in_h", "in_w", "kernel",
                         "stride", "padding", "mode", "global", NULL},
  };
  if (!ts_kf_check_keys(kf, path, group, keys[kind], error))
    return FALSE;
  memset(sp, 0, sizeof *sp);
  sp->kind = (ts_layer_kind)kind;
  sp->first = in->form == SHAPE_NONE;
  if (!ts_kf_int(kf, path, group, "repeat", TRUE, 1, 1, SMALL_MAX, "a repeat count", repeat, error))
    return FALSE;

  /* Tensor-parallel modes a kind may take; the first is the default. */
  static const char *const tp_dense[] = {"column", "row", "replicated", "vocab", NULL};
  static const char *const tp_conv[] = {"column", "row", "replicated", NULL};
  static const char *const tp_attn[] = {"heads", "replicated", NULL};
  static const char *const tp_emb[] = {"vocab", "replicated", NULL};
  static const char *const tp_rep[] = {"replicated", NULL};
  const char *const *tp_choices = kind == TS_LAYER_DENSE       ? tp_dense
                                  : kind == TS_LAYER_CONV2D    ? tp_conv
                                  : kind == TS_LAYER_ATTENTION ? tp_attn
                                  : kind == TS_LAYER_EMBEDDING ? tp_emb
                                                               : tp_rep;
  /* A tied logits layer splits like the embedding table it shares (Megatron-LM). */
  gboolean tied_default = FALSE;
  if (kind == TS_LAYER_DENSE && !kf_bool(kf, path, group, "tied", FALSE, &tied_default, error))
    return FALSE;
  int tpi = 0;
  if (!kf_enum(kf, path, group, "tp", tied_default ? "vocab" : tp_choices[0], tp_choices, &tpi,
               error))
    return FALSE;
  for (int i = 0; tp_names[i] != NULL; i++)
    if (strcmp(tp_names[i], tp_choices[tpi]) == 0)
      sp->tp = (ts_tp_mode)i;

  int act = ACT_NONE;
  shape out = *in;
  out.from = group;
  switch (sp->kind) {
  case TS_LAYER_DENSE: {
    gint64 inf = 0, tok = 0;
    if (in->form == SHAPE_VEC) {
      inf = in->features;
      tok = in->tokens;
    } else if (in->form == SHAPE_MAP) {
      /* A dense layer after a feature map flattens it (VGG, ResNet classifier). */
      inf = in->c * in->h * in->w;
      tok = 1;
    }
    const char *tok_what = "vectors per sample (sequence length, 1 for an MLP)";
    if (!kf_dim(kf, path, group, "in_features", inf, in->from, "a feature count", 1, DIM_MAX,
                &sp->in_f, error) ||
        (tok > 0 ? !kf_dim(kf, path, group, "tokens", tok, in->from, tok_what, 1, DIM_MAX,
                           &sp->tokens, error)
                 : !ts_kf_int(kf, path, group, "tokens", TRUE, 1, 1, DIM_MAX, tok_what, &sp->tokens,
                              error)))
      return FALSE;
    if (!ts_kf_int(kf, path, group, "out_features", FALSE, 0, 1, DIM_MAX, "a feature count",
                   &sp->out_f, error) ||
        !kf_bool(kf, path, group, "bias", TRUE, &sp->bias, error) ||
        !kf_enum(kf, path, group, "activation", "none", mlp_act_names, &act, error) ||
        !kf_bool(kf, path, group, "residual", FALSE, &sp->residual, error) ||
        !kf_bool(kf, path, group, "dropout", FALSE, &sp->dropout, error) ||
        !kf_bool(kf, path, group, "loss", FALSE, &sp->loss, error) ||
        !kf_bool(kf, path, group, "tied", FALSE, &sp->tied, error))
      return FALSE;
    /* An explicit mixture-of-experts layer (the split validator's MoE block,
     * models/validate-moe.ini): as a generated one; router = true folds the gate in. */
    if (!ts_kf_int(kf, path, group, "experts", TRUE, 0, 0, SMALL_MAX,
                   "an expert count (0: a dense layer)", &sp->experts, error))
      return FALSE;
    if (sp->experts == 0 && (g_key_file_has_key(kf, group, "top_k", NULL) ||
                             g_key_file_has_key(kf, group, "capacity_factor", NULL) ||
                             g_key_file_has_key(kf, group, "router", NULL))) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] top_k, capacity_factor, router: mixture-of-experts keys; expected "
                  "experts > 0 with them",
                  path, group);
      return FALSE;
    }
    if (sp->experts > 0 &&
        (!ts_kf_int(kf, path, group, "top_k", TRUE, 1, 1, sp->experts,
                    "the experts each token is routed to, at most experts", &sp->top_k, error) ||
         !ts_kf_double(kf, path, group, "capacity_factor", TRUE, 0.0, 0.0, 1024.0,
                       "an expert capacity factor in (0, 1024] (0 or absent: dropless)",
                       &sp->capacity, error) ||
         !kf_bool(kf, path, group, "router", FALSE, &sp->router, error)))
      return FALSE;
    /* A gated layer (SwiGLU / GeGLU) outputs out_features, computed from a GEMM twice as wide
     * (gate and up): an MLP's first layer, split by columns or replicated. */
    gboolean gated = act == ACT_SWIGLU || act == ACT_GEGLU;
    if (gated &&
        (sp->tied || sp->loss || sp->residual || sp->tp == TS_TP_ROW || sp->tp == TS_TP_VOCAB)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] activation='%s': expected a gated MLP's first layer (tp column or "
                  "replicated, no tied, loss or residual)",
                  path, group, mlp_act_names[act]);
      return FALSE;
    }
    if (sp->tied) {
      if (in->emb_vocab == 0 || in->emb_vocab != sp->out_f || in->emb_hidden != sp->in_f) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "%s: [%s] tied='true': expected an earlier embedding of vocab = "
                    "out_features (%" G_GINT64_FORMAT
                    ") and hidden = in_features (%" G_GINT64_FORMAT
                    ") whose table this layer shares",
                    path, group, sp->out_f, sp->in_f);
        return FALSE;
      }
      sp->vocab = sp->out_f;
    }
    out.form = SHAPE_VEC;
    out.tokens = sp->tokens;
    out.features = sp->out_f;
    if (gated)
      sp->out_f *= 2; /* the GEMM: gate and up side by side */
    break;
  }
  case TS_LAYER_CONV2D:
  case TS_LAYER_POOL: {
    const char *kname = kind_names[kind];
    if (in->form == SHAPE_VEC)
      return wrong_input(error, path, group, kname, "a feature-map input", in);
    gboolean map_in = in->form == SHAPE_MAP;
    const char *ckey = sp->kind == TS_LAYER_CONV2D ? "in_channels" : "channels";
    if (!kf_dim(kf, path, group, ckey, map_in ? in->c : 0, in->from, "a channel count", 1, DIM_MAX,
                &sp->in_f, error) ||
        !kf_dim(kf, path, group, "in_h", map_in ? in->h : 0, in->from, "an input height in pixels",
                1, DIM_MAX, &sp->in_h, error) ||
        !kf_dim(kf, path, group, "in_w", map_in ? in->w : 0, in->from, "an input width in pixels",
                1, DIM_MAX, &sp->in_w, error))
      return FALSE;
    gboolean global = FALSE;
    if (sp->kind == TS_LAYER_CONV2D) {
      gboolean square = g_key_file_has_key(kf, group, "kernel", NULL);
      gint64 k = 0;
      if (!ts_kf_int(kf, path, group, "out_channels", FALSE, 0, 1, DIM_MAX, "a channel count",
                     &sp->out_f, error) ||
          (square && !ts_kf_int(kf, path, group, "kernel", FALSE, 0, 1, SMALL_MAX,
                                "a kernel size in pixels", &k, error)) ||
          !ts_kf_int(kf, path, group, "kernel_h", square, k, 1, SMALL_MAX,
                     "a kernel height in pixels (or give kernel)", &sp->kh, error) ||
          !ts_kf_int(kf, path, group, "kernel_w", square, k, 1, SMALL_MAX,
                     "a kernel width in pixels (or give kernel)", &sp->kw, error) ||
          !ts_kf_int(kf, path, group, "stride", TRUE, 1, 1, SMALL_MAX, "a stride in pixels",
                     &sp->stride, error) ||
          !ts_kf_int(kf, path, group, "padding", TRUE, 0, 0, SMALL_MAX, "a padding in pixels",
                     &sp->pad, error) ||
          !ts_kf_int(kf, path, group, "groups", TRUE, 1, 1, DIM_MAX,
                     "a channel-group count (1: dense; in_channels: depthwise)", &sp->groups,
                     error) ||
          !kf_bool(kf, path, group, "bias", TRUE, &sp->bias, error) ||
          !kf_enum(kf, path, group, "activation", "none", act_names, &act, error) ||
          !kf_bool(kf, path, group, "residual", FALSE, &sp->residual, error))
        return FALSE;
      if (sp->in_f % sp->groups != 0 || sp->out_f % sp->groups != 0) {
        g_autofree char *what = g_strdup_printf("a divisor of in_channels = %" G_GINT64_FORMAT
                                                " and out_channels = %" G_GINT64_FORMAT,
                                                sp->in_f, sp->out_f);
        return fail_key(error, path, group, "groups", sp->groups, what);
      }
    } else {
      static const char *const modes[] = {"max", "avg", NULL};
      int mode = 0;
      if (!kf_enum(kf, path, group, "mode", "max", modes, &mode, error) ||
          !kf_bool(kf, path, group, "global", FALSE, &global, error))
        return FALSE;
      sp->avg_pool = mode == 1;
      if (global) {
        /* Global pooling: one window over the whole map (ResNet's final average pool). */
        for (const char *const *k = (const char *const[]){"kernel", "stride", "padding", NULL};
             *k != NULL; k++)
          if (g_key_file_has_key(kf, group, *k, NULL)) {
            g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                        "%s: [%s] %s: expected no %s with global = true (the window is the "
                        "whole map)",
                        path, group, *k, *k);
            return FALSE;
          }
        sp->kh = sp->in_h;
        sp->kw = sp->in_w;
        sp->stride = 1;
        sp->pad = 0;
      } else {
        if (!ts_kf_int(kf, path, group, "kernel", FALSE, 0, 1, SMALL_MAX, "a window size in pixels",
                       &sp->kh, error) ||
            !ts_kf_int(kf, path, group, "stride", TRUE, sp->kh, 1, SMALL_MAX, "a stride in pixels",
                       &sp->stride, error) ||
            !ts_kf_int(kf, path, group, "padding", TRUE, 0, 0, SMALL_MAX, "a padding in pixels",
                       &sp->pad, error))
          return FALSE;
        sp->kw = sp->kh;
        /* PyTorch refuses padding above half the window: such a window can lie wholly in the
         * padding. */
        if (2 * sp->pad > sp->kh)
          return fail_key(error, path, group, "padding", sp->pad, "at most half the kernel size");
      }
    }
    if (sp->kh > sp->in_h + 2 * sp->pad)
      return fail_key(error, path, group, sp->kind == TS_LAYER_CONV2D ? "kernel_h" : "kernel",
                      sp->kh, "at most the padded input height (in_h + 2 * padding)");
    if (sp->kw > sp->in_w + 2 * sp->pad)
      return fail_key(error, path, group, sp->kind == TS_LAYER_CONV2D ? "kernel_w" : "kernel",
                      sp->kw, "at most the padded input width (in_w + 2 * padding)");
    out.form = SHAPE_MAP;
    out.c = sp->kind == TS_LAYER_CONV2D ? sp->out_f : sp->in_f;
    out.h = conv_out(sp->in_h, sp->kh, sp->stride, sp->pad);
    out.w = conv_out(sp->in_w, sp->kw, sp->stride, sp->pad);
    sp->tokens = 1;
    break;
  }
  case TS_LAYER_ATTENTION: {
    if (in->form == SHAPE_MAP)
      return wrong_input(error, path, group, "attention", "vectors (tokens x hidden)", in);
    gboolean vec = in->form == SHAPE_VEC;
    if (!kf_dim(kf, path, group, "hidden", vec ? in->features : 0, in->from,
                "a hidden size (features)", 1, DIM_MAX, &sp->in_f, error) ||
        !kf_dim(kf, path, group, "tokens", vec ? in->tokens : 0, in->from,
                "a sequence length in tokens", 1, DIM_MAX, &sp->tokens, error) ||
        !ts_kf_int(kf, path, group, "heads", FALSE, 0, 1, SMALL_MAX, "a head count", &sp->heads,
                   error) ||
        !kf_bool(kf, path, group, "bias", TRUE, &sp->bias, error) ||
        !kf_bool(kf, path, group, "residual", FALSE, &sp->residual, error) ||
        !kf_bool(kf, path, group, "dropout", FALSE, &sp->dropout, error))
      return FALSE;
    if (sp->in_f % sp->heads != 0) {
      g_autofree char *what = g_strdup_printf("a divisor of hidden = %" G_GINT64_FORMAT, sp->in_f);
      return fail_key(error, path, group, "heads", sp->heads, what);
    }
    /* Grouped-query attention in a layer list (the validator's GQA network). */
    if (!ts_kf_int(kf, path, group, "kv_heads", TRUE, sp->heads, 1, SMALL_MAX,
                   "a key/value head count (default heads)", &sp->kv_heads, error))
      return FALSE;
    if (sp->heads % sp->kv_heads != 0) {
      g_autofree char *what = g_strdup_printf("a divisor of heads = %" G_GINT64_FORMAT, sp->heads);
      return fail_key(error, path, group, "kv_heads", sp->kv_heads, what);
    }
    if (!kf_bool(kf, path, group, "rotary", FALSE, &sp->rotary, error) ||
        !kf_bool(kf, path, group, "causal", FALSE, &sp->causal, error))
      return FALSE;
    if (!parse_latent_attention(kf, path, group, sp, error))
      return FALSE;
    out.form = SHAPE_VEC;
    out.tokens = sp->tokens;
    out.features = sp->in_f;
    break;
  }
  case TS_LAYER_EMBEDDING: {
    if (in->form != SHAPE_NONE) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] kind='embedding': expected the first layer (an embedding reads "
                  "token ids), but it follows [%s]",
                  path, group, in->from);
      return FALSE;
    }
    static const char *const pos[] = {"none", "learned", NULL};
    int p = 0;
    if (!ts_kf_int(kf, path, group, "vocab", FALSE, 0, 1, DIM_MAX, "a vocabulary size", &sp->vocab,
                   error) ||
        !ts_kf_int(kf, path, group, "hidden", FALSE, 0, 1, DIM_MAX, "a hidden size", &sp->in_f,
                   error) ||
        !ts_kf_int(kf, path, group, "tokens", FALSE, 0, 1, DIM_MAX, "a sequence length in tokens",
                   &sp->tokens, error) ||
        !kf_enum(kf, path, group, "position_embedding", "none", pos, &p, error) ||
        !ts_kf_int(kf, path, group, "positions", TRUE, sp->tokens, 1, DIM_MAX,
                   "a position-table size", &sp->positions, error) ||
        !ts_kf_int(kf, path, group, "token_types", TRUE, 0, 0, SMALL_MAX,
                   "a token-type (segment) count", &sp->token_types, error) ||
        !kf_bool(kf, path, group, "dropout", FALSE, &sp->dropout, error))
      return FALSE;
    sp->learned_pos = p == 1;
    if (sp->learned_pos && sp->positions < sp->tokens)
      return fail_key(error, path, group, "positions", sp->positions,
                      "at least tokens (one learned position per token)");
    out.form = SHAPE_VEC;
    out.tokens = sp->tokens;
    out.features = sp->in_f;
    out.emb_vocab = sp->vocab;
    out.emb_hidden = sp->in_f;
    break;
  }
  case TS_LAYER_NORM: {
    gboolean has_map_keys = g_key_file_has_key(kf, group, "channels", NULL) ||
                            g_key_file_has_key(kf, group, "in_h", NULL) ||
                            g_key_file_has_key(kf, group, "in_w", NULL);
    gboolean has_vec_keys = g_key_file_has_key(kf, group, "features", NULL) ||
                            g_key_file_has_key(kf, group, "tokens", NULL);
    sp->map = in->form == SHAPE_MAP || (in->form == SHAPE_NONE && has_map_keys);
    if (sp->map && has_vec_keys) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] features / tokens: expected channels, in_h, in_w for a norm over a "
                  "feature map",
                  path, group);
      return FALSE;
    }
    if (!sp->map && has_map_keys) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] channels / in_h / in_w: expected features and tokens for a norm over "
                  "vectors (the input is [%s])",
                  path, group, in->from != NULL ? in->from : "none");
      return FALSE;
    }
    if (sp->map) {
      gboolean m = in->form == SHAPE_MAP;
      if (!kf_dim(kf, path, group, "channels", m ? in->c : 0, in->from, "a channel count", 1,
                  DIM_MAX, &sp->in_f, error) ||
          !kf_dim(kf, path, group, "in_h", m ? in->h : 0, in->from, "an input height in pixels", 1,
                  DIM_MAX, &sp->in_h, error) ||
          !kf_dim(kf, path, group, "in_w", m ? in->w : 0, in->from, "an input width in pixels", 1,
                  DIM_MAX, &sp->in_w, error))
        return FALSE;
      sp->tokens = 1;
      out.form = SHAPE_MAP;
      out.c = sp->in_f;
      out.h = sp->in_h;
      out.w = sp->in_w;
    } else {
      gboolean v = in->form == SHAPE_VEC;
      if (!kf_dim(kf, path, group, "features", v ? in->features : 0, in->from, "a feature count", 1,
                  DIM_MAX, &sp->in_f, error) ||
          !kf_dim(kf, path, group, "tokens", v ? in->tokens : 0, in->from, "vectors per sample", 1,
                  DIM_MAX, &sp->tokens, error))
        return FALSE;
      out.form = SHAPE_VEC;
      out.tokens = sp->tokens;
      out.features = sp->in_f;
    }
    if (!kf_enum(kf, path, group, "activation", "none", act_names, &act, error) ||
        !kf_bool(kf, path, group, "residual", FALSE, &sp->residual, error))
      return FALSE;
    break;
  }
  }
  sp->act = (ts_act)act;
  /* A residual adds an earlier tensor (the block input) to this output: some earlier layer
   * must have produced that shape. */
  if (sp->residual) {
    gboolean found = FALSE;
    for (guint i = 0; i < seen->len && !found; i++)
      found = same_shape(&g_array_index(seen, shape, i), &out);
    if (!found) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] residual='true': expected the output shape to equal an earlier "
                  "layer's output (the residual adds it)",
                  path, group);
      return FALSE;
    }
  }
  /* A repeated layer feeds itself, so its output must have its input's shape. */
  if (*repeat > 1) {
    gboolean same =
        sp->kind != TS_LAYER_EMBEDDING && in->form == out.form &&
        (out.form == SHAPE_VEC ? out.tokens == sp->tokens && out.features == sp->in_f
                               : out.c == sp->in_f && out.h == sp->in_h && out.w == sp->in_w);
    if (!same)
      return fail_key(error, path, group, "repeat", *repeat,
                      "1, since the layer's output shape differs from its input shape");
  }
  *in = out;
  return TRUE;
}

/* An earlier layer's output, by group name (a repeated layer: its last copy). */
typedef struct {
  int layer;
  shape sh;
} named_output;

/* The `input` key: the earlier layers (or `data`, the model input) a layer reads instead of the
 * previous one; several are concatenated (channels of equal maps, features of equal token
 * counts). Sets *in to the input's shape, *src to the layer read last (-1: data) and appends
 * the others to reads. */
static gboolean resolve_input(GKeyFile *kf, const char *path, const char *group,
                              GHashTable *outputs, shape *in, int *src, GArray *reads,
                              GError **error)
{
  g_autofree char *text = NULL;
  if (!g_key_file_has_key(kf, group, "input", NULL))
    return TRUE;
  if (!ts_kf_string(kf, path, group, "input", NULL, &text, error))
    return FALSE;
  g_auto(GStrv) names = g_strsplit(text, ",", -1);
  shape cat = {0};
  int parts = 0;
  for (int k = 0; names[k] != NULL; k++) {
    const char *name = g_strstrip(names[k]);
    if (strcmp(name, "data") == 0 && names[1] == NULL) {
      *in = (shape){0};
      *src = -1;
      return TRUE;
    }
    const named_output *o = g_hash_table_lookup(outputs, name);
    if (o == NULL) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] input='%s': expected 'data' or names of earlier layers ([layer.NAME] "
                  "groups above this one), comma-separated; '%s' is none",
                  path, group, text, name);
      return FALSE;
    }
    const shape *s = &o->sh;
    gboolean fits =
        parts == 0 || (s->form == cat.form && (s->form == SHAPE_MAP ? s->h == cat.h && s->w == cat.w
                                                                    : s->tokens == cat.tokens));
    if (!fits) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] input='%s': expected outputs that concatenate: all feature maps of "
                  "one height and width, or all vectors of one token count",
                  path, group, text);
      return FALSE;
    }
    if (parts == 0)
      cat = *s;
    else if (s->form == SHAPE_MAP)
      cat.c += s->c;
    else
      cat.features += s->features;
    cat.from = s->from;
    if (parts > 0)
      g_array_append_val(reads, *src);
    *src = o->layer;
    parts++;
  }
  *in = cat;
  return TRUE;
}

/* The `residual_from` key: the earlier layer whose output this layer adds (its shape must be
 * the layer's output shape). Returns its index, -1 without the key, -2 on error. */
static int resolve_residual(GKeyFile *kf, const char *path, const char *group, GHashTable *outputs,
                            const shape *out, gint64 repeat, layer_spec *sp, GError **error)
{
  if (!g_key_file_has_key(kf, group, "residual_from", NULL))
    return -1;
  g_autofree char *name = NULL;
  if (!ts_kf_string(kf, path, group, "residual_from", NULL, &name, error))
    return -2;
  g_strstrip(name);
  const named_output *o = g_hash_table_lookup(outputs, name);
  const char *why = NULL;
  if (g_key_file_has_key(kf, group, "residual", NULL) && !sp->residual)
    why = "no residual_from with residual = false";
  else if (repeat > 1)
    why = "repeat = 1 with residual_from (each copy would add the same tensor)";
  else if (o == NULL || !same_shape(&o->sh, out))
    why = "the name of an earlier layer whose output has this layer's output shape";
  if (why != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] residual_from='%s': expected %s", path,
                group, name, why);
    return -2;
  }
  sp->residual = TRUE;
  return o->layer;
}

static gboolean build_layers(GKeyFile *kf, const char *path, builder *b, GError **error)
{
  gsize n = 0;
  g_auto(GStrv) groups = g_key_file_get_groups(kf, &n);
  shape sh = {0};
  g_autoptr(GArray) seen = g_array_new(FALSE, TRUE, sizeof(shape));
  g_autoptr(GArray) reads = g_array_new(FALSE, FALSE, sizeof(int));
  g_autoptr(GHashTable) outputs = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free);
  for (gsize i = 0; i < n; i++) {
    if (!g_str_has_prefix(groups[i], "layer."))
      continue;
    layer_spec sp;
    gint64 repeat = 1;
    int src = last_layer(b);
    g_array_set_size(reads, 0);
    if (!resolve_input(kf, path, groups[i], outputs, &sh, &src, reads, error) ||
        !parse_layer(kf, path, groups[i], &sh, seen, &sp, &repeat, error))
      return FALSE;
    int add = resolve_residual(kf, path, groups[i], outputs, &sh, repeat, &sp, error);
    if (add < -1)
      return FALSE;
    g_array_append_val(seen, sh);
    const char *name = groups[i] + strlen("layer.");
    for (gint64 r = 0; r < repeat; r++) {
      char *lname = repeat == 1 ? g_strdup(name) : g_strdup_printf("%s.%" G_GINT64_FORMAT, name, r);
      if (!add_layer_from(b, lname, &sp, r == 0 ? src : last_layer(b), error))
        return FALSE;
      sp.first = FALSE;
    }
    for (guint k = 0; k < reads->len; k++)
      add_read(b, g_array_index(reads, int, k));
    add_read(b, add);
    named_output *o = g_new(named_output, 1);
    *o = (named_output){last_layer(b), sh};
    g_hash_table_insert(outputs, (gpointer)name, o);
  }
  if (b->layers->len == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [model] kind='layers': expected at least one [layer.NAME] group", path);
    return FALSE;
  }
  return TRUE;
}

/* ---- transformer generator ---------------------------------------------------------------- */

typedef struct {
  gint64 layers, hidden, heads, seq, vocab, ffn, positions, token_types;
  gint64 head_tokens; /* tokens per sequence BERT's masked-LM head runs on (default: seq) */
  gboolean learned_pos, tied, bias, post_norm, dropout, pooler, head_transform, logits_bias;
  gboolean causal; /* self-attention causal (a decoder's); false: bidirectional (an encoder's) */
  ts_act act;
  gint64 experts, moe_every, top_k; /* mixture of experts; experts = 0: dense */
  /* Encoder-decoder (T5, Raffel et al. 2020): decoder blocks (0: encoder or decoder only) and
   * their tokens; attention inner width (0: hidden); RMS norms; relative-position buckets. */
  gint64 dec_layers, dec_seq, kv_channels, rel_buckets;
  gboolean rms;
  /* Today's decoders (Llama, Mixtral, DeepSeek): key/value heads, rotary positions, Megatron's
   * vocabulary padding; fine-grained and shared experts, leading dense blocks, capacity, the
   * gate's bias; multi-head latent attention (kv_lora 0: none). */
  gint64 kv_heads, vocab_div, moe_ffn, shared_experts, first_dense;
  gboolean rotary, router_bias;
  double capacity;
  gint64 q_lora, kv_lora, qk_nope, qk_rope, v_dim;
} transformer_hp;

/* The keys of today's decoder-only models (grouped-query and latent attention, fine-grained
 * and shared experts), read after the classic ones so their checks can name them. */
static gboolean read_modern(GKeyFile *kf, const char *path, transformer_hp *hp, GError **error)
{
  const char *g = "transformer";
  if (!ts_kf_int(kf, path, g, "kv_heads", TRUE, hp->heads, 1, SMALL_MAX,
                 "a key/value head count (default heads)", &hp->kv_heads, error) ||
      !ts_kf_int(kf, path, g, "vocab_divisible_by", TRUE, 1, 1, SMALL_MAX,
                 "Megatron's make_vocab_size_divisible_by (1: no padding)", &hp->vocab_div,
                 error) ||
      !ts_kf_int(kf, path, g, "moe_ffn_hidden", TRUE, hp->ffn, 1, DIM_MAX,
                 "an expert MLP inner size (default ffn_hidden)", &hp->moe_ffn, error) ||
      !ts_kf_int(kf, path, g, "shared_experts", TRUE, 0, 0, SMALL_MAX,
                 "a shared-expert count (0: none)", &hp->shared_experts, error) ||
      !ts_kf_int(kf, path, g, "first_dense_layers", TRUE, 0, 0, SMALL_MAX,
                 "a count of leading blocks with a dense MLP", &hp->first_dense, error) ||
      !ts_kf_double(kf, path, g, "capacity_factor", TRUE, 0.0, 0.0, 1024.0,
                    "an expert capacity factor in (0, 1024] (0 or absent: dropless)", &hp->capacity,
                    error) ||
      !kf_bool(kf, path, g, "router_bias", FALSE, &hp->router_bias, error) ||
      !ts_kf_int(kf, path, g, "q_lora_rank", TRUE, 0, 0, DIM_MAX,
                 "a query latent rank (0: a full query projection)", &hp->q_lora, error) ||
      !ts_kf_int(kf, path, g, "kv_lora_rank", TRUE, 0, 0, DIM_MAX,
                 "a key/value latent rank (0: no multi-head latent attention)", &hp->kv_lora,
                 error) ||
      !ts_kf_int(kf, path, g, "qk_nope_head_dim", TRUE, 0, 0, DIM_MAX,
                 "query/key features per head without rotary", &hp->qk_nope, error) ||
      !ts_kf_int(kf, path, g, "qk_rope_head_dim", TRUE, 0, 0, DIM_MAX,
                 "query/key features per head with rotary", &hp->qk_rope, error) ||
      !ts_kf_int(kf, path, g, "v_head_dim", TRUE, 0, 0, DIM_MAX, "value features per head",
                 &hp->v_dim, error))
    return FALSE;
  if (hp->heads % hp->kv_heads != 0) {
    g_autofree char *what = g_strdup_printf("a divisor of [transformer] heads = %" G_GINT64_FORMAT
                                            " (query heads share each "
                                            "key/value head in equal groups)",
                                            hp->heads);
    return fail_key(error, path, g, "kv_heads", hp->kv_heads, what);
  }
  gboolean moe_keys = g_key_file_has_key(kf, g, "moe_ffn_hidden", NULL) || hp->shared_experts > 0 ||
                      hp->first_dense > 0 || hp->capacity > 0.0 || hp->router_bias;
  if (hp->experts == 0 && moe_keys) {
    const char *k = g_key_file_has_key(kf, g, "moe_ffn_hidden", NULL) ? "moe_ffn_hidden"
                    : hp->shared_experts > 0                          ? "shared_experts"
                    : hp->first_dense > 0                             ? "first_dense_layers"
                    : hp->capacity > 0.0                              ? "capacity_factor"
                                                                      : "router_bias";
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [transformer] %s: a mixture-of-experts key; expected [transformer] experts "
                "> 0 with it",
                path, k);
    return FALSE;
  }
  if (hp->shared_experts > 0 && hp->post_norm) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [transformer] shared_experts: only with norm = pre (DeepSeek's layout); "
                "expected it left out with norm = post",
                path);
    return FALSE;
  }
  if (hp->first_dense >= hp->layers && hp->experts > 0) {
    g_autofree char *what = g_strdup_printf("fewer than [transformer] layers = %" G_GINT64_FORMAT
                                            " (some blocks must be MoE)",
                                            hp->layers);
    return fail_key(error, path, g, "first_dense_layers", hp->first_dense, what);
  }
  if (hp->kv_lora == 0) {
    const char *k = hp->q_lora > 0    ? "q_lora_rank"
                    : hp->qk_nope > 0 ? "qk_nope_head_dim"
                    : hp->qk_rope > 0 ? "qk_rope_head_dim"
                    : hp->v_dim > 0   ? "v_head_dim"
                                      : NULL;
    if (k != NULL) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [transformer] %s: a multi-head latent attention key; expected "
                  "[transformer] kv_lora_rank > 0 with it",
                  path, k);
      return FALSE;
    }
    return TRUE;
  }
  /* Multi-head latent attention: its own head widths, no biases, rotary on its decoupled part,
   * one key per query head (the latent is shared instead). */
  const char *missing = hp->qk_nope == 0   ? "qk_nope_head_dim"
                        : hp->qk_rope == 0 ? "qk_rope_head_dim"
                        : hp->v_dim == 0   ? "v_head_dim"
                                           : NULL;
  if (missing != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [transformer] %s: missing; expected a positive width with kv_lora_rank", path,
                missing);
    return FALSE;
  }
  const char *clash = hp->kv_heads != hp->heads ? "kv_heads"
                      : hp->bias                ? "bias"
                      : hp->learned_pos         ? "position_embedding"
                      : hp->kv_channels > 0     ? "kv_channels"
                      : hp->rel_buckets > 0     ? "relative_attention_buckets"
                                                : NULL;
  if (clash != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [transformer] %s: not available with kv_lora_rank (multi-head latent "
                "attention has its own head widths and decoupled rotary keys, no biases); "
                "expected it left out (bias = false, position_embedding = rotary)",
                path, clash);
    return FALSE;
  }
  if (hp->heads * (hp->qk_nope + hp->qk_rope + hp->v_dim) > DIM_MAX)
    return fail_key(error, path, g, "heads", hp->heads,
                    "heads x (qk_nope_head_dim + qk_rope_head_dim + v_head_dim) at most 2^24");
  return TRUE;
}

static gboolean read_transformer(GKeyFile *kf, const char *path, transformer_hp *hp, GError **error)
{
  static const char *const keys[] = {"layers",
                                     "hidden",
                                     "heads",
                                     "sequence",
                                     "vocab",
                                     "ffn_hidden",
                                     "position_embedding",
                                     "positions",
                                     "tied_embeddings",
                                     "bias",
                                     "norm",
                                     "dropout",
                                     "activation",
                                     "token_types",
                                     "pooler",
                                     "head_transform",
                                     "head_tokens",
                                     "logits_bias",
                                     "experts",
                                     "moe_every",
                                     "top_k",
                                     "decoder_layers",
                                     "decoder_sequence",
                                     "kv_channels",
                                     "norm_type",
                                     "relative_attention_buckets",
                                     "kv_heads",
                                     "vocab_divisible_by",
                                     "moe_ffn_hidden",
                                     "shared_experts",
                                     "first_dense_layers",
                                     "capacity_factor",
                                     "router_bias",
                                     "q_lora_rank",
                                     "kv_lora_rank",
                                     "qk_nope_head_dim",
                                     "qk_rope_head_dim",
                                     "v_head_dim",
                                     "causal",
                                     NULL};
  const char *g = "transformer";
  if (!ts_kf_check_keys(kf, path, g, keys, error))
    return FALSE;
  static const char *const pos[] = {"none", "learned", "rotary", NULL};
  static const char *const norms[] = {"pre", "post", NULL};
  int p = 1, nm = 0, act = ACT_GELU;
  if (!ts_kf_int(kf, path, g, "layers", FALSE, 0, 1, SMALL_MAX, "a transformer layer count",
                 &hp->layers, error) ||
      !ts_kf_int(kf, path, g, "hidden", FALSE, 0, 1, DIM_MAX, "a hidden size", &hp->hidden,
                 error) ||
      !ts_kf_int(kf, path, g, "heads", FALSE, 0, 1, SMALL_MAX, "an attention head count",
                 &hp->heads, error) ||
      !ts_kf_int(kf, path, g, "sequence", FALSE, 0, 1, DIM_MAX, "a sequence length in tokens",
                 &hp->seq, error) ||
      !ts_kf_int(kf, path, g, "vocab", FALSE, 0, 1, DIM_MAX, "a vocabulary size", &hp->vocab,
                 error))
    return FALSE;
  static const char *const norm_types[] = {"layer", "rms", NULL};
  int nt = 0;
  if (!ts_kf_int(kf, path, g, "kv_channels", TRUE, 0, 0, DIM_MAX,
                 "features per attention head (default hidden / heads)", &hp->kv_channels, error) ||
      !ts_kf_int(kf, path, g, "decoder_layers", TRUE, 0, 0, SMALL_MAX,
                 "a decoder block count (0: no decoder)", &hp->dec_layers, error) ||
      !ts_kf_int(kf, path, g, "decoder_sequence", TRUE, hp->seq, 1, DIM_MAX,
                 "a decoder sequence length in tokens (default sequence)", &hp->dec_seq, error) ||
      !ts_kf_int(kf, path, g, "relative_attention_buckets", TRUE, 0, 0, SMALL_MAX,
                 "a relative-position bucket count (0: none)", &hp->rel_buckets, error) ||
      !kf_enum(kf, path, g, "norm_type", "layer", norm_types, &nt, error))
    return FALSE;
  hp->rms = nt == 1;
  if (hp->kv_channels == 0 && hp->hidden % hp->heads != 0) {
    g_autofree char *what = g_strdup_printf("a divisor of [transformer] hidden = %" G_GINT64_FORMAT
                                            " (or set kv_channels)",
                                            hp->hidden);
    return fail_key(error, path, g, "heads", hp->heads, what);
  }
  if (hp->kv_channels > 0 && hp->kv_channels * hp->heads > DIM_MAX) {
    g_autofree char *what = g_strdup_printf(
        "heads x kv_channels at most %d (the attention's inner width)", (int)DIM_MAX);
    return fail_key(error, path, g, "kv_channels", hp->kv_channels, what);
  }
  gint64 ffn_def = 4 * hp->hidden <= DIM_MAX ? 4 * hp->hidden : DIM_MAX;
  if (!ts_kf_int(kf, path, g, "ffn_hidden", TRUE, ffn_def, 1, DIM_MAX,
                 "an MLP inner size (default 4 * hidden)", &hp->ffn, error) ||
      !kf_enum(kf, path, g, "position_embedding", "learned", pos, &p, error) ||
      !ts_kf_int(kf, path, g, "positions", TRUE, hp->seq, 1, DIM_MAX,
                 "a position-table size (default sequence)", &hp->positions, error) ||
      !kf_bool(kf, path, g, "tied_embeddings", TRUE, &hp->tied, error) ||
      !kf_bool(kf, path, g, "bias", TRUE, &hp->bias, error) ||
      !kf_enum(kf, path, g, "norm", "pre", norms, &nm, error) ||
      !kf_bool(kf, path, g, "dropout", TRUE, &hp->dropout, error) ||
      !kf_enum(kf, path, g, "activation", "gelu", mlp_act_names, &act, error) ||
      !ts_kf_int(kf, path, g, "token_types", TRUE, 0, 0, SMALL_MAX, "a token-type (segment) count",
                 &hp->token_types, error) ||
      !kf_bool(kf, path, g, "pooler", FALSE, &hp->pooler, error) ||
      !kf_bool(kf, path, g, "head_transform", FALSE, &hp->head_transform, error) ||
      !kf_bool(kf, path, g, "logits_bias", FALSE, &hp->logits_bias, error) ||
      !kf_bool(kf, path, g, "causal", TRUE, &hp->causal, error) ||
      !ts_kf_int(kf, path, g, "head_tokens", TRUE, hp->seq, 1, hp->seq,
                 "the tokens per sequence the masked-LM head runs on, 1 to [transformer] "
                 "sequence (default sequence)",
                 &hp->head_tokens, error))
    return FALSE;
  if (hp->head_tokens < hp->seq && !hp->head_transform)
    return fail_key(error, path, g, "head_tokens", hp->head_tokens,
                    "no head_tokens below sequence without [transformer] head_transform = true "
                    "(BERT's masked-LM head)");
  if (!ts_kf_int(kf, path, g, "experts", TRUE, 0, 0, SMALL_MAX,
                 "an expert count (0: a dense MLP in every layer)", &hp->experts, error) ||
      !ts_kf_int(kf, path, g, "moe_every", TRUE, 2, 1, SMALL_MAX,
                 "a layer interval: every moe_every-th layer's MLP is a mixture of experts",
                 &hp->moe_every, error) ||
      !ts_kf_int(kf, path, g, "top_k", TRUE, 1, 1, SMALL_MAX, "the experts each token is routed to",
                 &hp->top_k, error))
    return FALSE;
  if (hp->experts > 0 && hp->top_k > hp->experts) {
    g_autofree char *what =
        g_strdup_printf("at most [transformer] experts = %" G_GINT64_FORMAT, hp->experts);
    return fail_key(error, path, g, "top_k", hp->top_k, what);
  }
  hp->learned_pos = p == 1;
  hp->rotary = p == 2;
  hp->post_norm = nm == 1;
  if (!read_modern(kf, path, hp, error))
    return FALSE;
  hp->act = (ts_act)act;
  if (hp->learned_pos && hp->positions < hp->seq)
    return fail_key(error, path, g, "positions", hp->positions,
                    "at least [transformer] sequence (one learned position per token)");
  if (hp->dec_layers == 0 && g_key_file_has_key(kf, g, "decoder_sequence", NULL))
    return fail_key(error, path, g, "decoder_sequence", hp->dec_seq,
                    "no decoder_sequence without [transformer] decoder_layers > 0");
  if (hp->dec_layers > 0) {
    /* The encoder-decoder generator builds T5's layout (pre-norm, dense MLPs, no BERT heads). */
    const char *bad = hp->post_norm         ? "norm"
                      : hp->experts > 0     ? "experts"
                      : hp->kv_lora > 0     ? "kv_lora_rank"
                      : hp->pooler          ? "pooler"
                      : hp->head_transform  ? "head_transform"
                      : hp->token_types > 0 ? "token_types"
                                            : NULL;
    if (bad != NULL) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [transformer] %s: not available with decoder_layers (the encoder-decoder "
                  "is pre-norm with dense MLPs and a tied LM head); expected it left out",
                  path, bad);
      return FALSE;
    }
    if (hp->learned_pos && hp->positions < hp->dec_seq)
      return fail_key(error, path, g, "positions", hp->positions,
                      "at least [transformer] decoder_sequence (one learned position per token)");
  }
  return TRUE;
}

/* The logits over `tokens` tokens: h -> V, split by vocabulary, softmax cross-entropy. */
static layer_spec logits_spec(const transformer_hp *hp, gint64 tokens)
{
  return (layer_spec){.kind = TS_LAYER_DENSE,
                      .tp = TS_TP_VOCAB,
                      .tokens = tokens,
                      .in_f = hp->hidden,
                      .out_f = hp->vocab,
                      .vocab = hp->vocab,
                      .tied = hp->tied,
                      .bias = hp->logits_bias,
                      .loss = TRUE,
                      .vocab_div = hp->vocab_div};
}

/* One pre-norm block: name.i.norm1, attention, norm2, [cross_attention, norm3,] fc1, fc2.
 * Each sublayer's last layer adds the sublayer's input (the residual stream); a
 * cross-attention also reads layer `enc` (the encoder output). */
static gboolean add_block(builder *b, const char *stack, gint64 i, const layer_spec *norm,
                          const layer_spec *attn, const layer_spec *cross, int enc,
                          const layer_spec *fc1, const layer_spec *fc2, GError **error)
{
  const char *names[] = {"norm1", "attention", "norm2", "cross_attention", "norm3", "fc1", "fc2"};
  const layer_spec *specs[] = {norm, attn, norm, cross, norm, fc1, fc2};
  int stream = last_layer(b); /* the residual stream entering the sublayer */
  for (int j = 0; j < 7; j++) {
    if (cross == NULL && (j == 3 || j == 4))
      continue;
    char *name = g_strdup_printf("%s.%" G_GINT64_FORMAT ".%s", stack, i, names[j]);
    if (!add_layer(b, name, specs[j], error))
      return FALSE;
    if (j == 3)
      add_read(b, enc);
    if (j == 1 || j == 3 || j == 6) {
      add_read(b, stream);
      stream = last_layer(b);
    }
  }
  return TRUE;
}

/* T5's encoder-decoder (Raffel et al. 2020, section 3.1; layer shapes of the released
 * checkpoints): the encoder's blocks over `sequence` tokens and a final norm; the decoder's
 * input embedding (the same table: no parameters of its own), blocks over `decoder_sequence`
 * tokens with causal self-attention, cross-attention over the encoder output and the MLP, a
 * final norm and the tied logits. The relative-position bias table (buckets x heads) belongs
 * to the first self-attention of each stack. Decoder layers carry the encoder output (s x h
 * per sample) across pipeline boundaries, as Megatron-LM's T5 pipeline sends it. */
static gboolean build_encoder_decoder(const transformer_hp *hp, const layer_spec *emb,
                                      const layer_spec *norm, const layer_spec *attn,
                                      const layer_spec *fc1, const layer_spec *fc2, builder *b,
                                      GError **error)
{
  layer_spec first = *attn;
  first.rel_buckets = hp->rel_buckets;
  if (!add_layer(b, g_strdup("embedding"), emb, error))
    return FALSE;
  for (gint64 i = 0; i < hp->layers; i++)
    if (!add_block(b, "encoder.block", i, norm, i == 0 ? &first : attn, NULL, -1, fc1, fc2, error))
      return FALSE;
  if (!add_layer(b, g_strdup("encoder.final_norm"), norm, error))
    return FALSE;
  /* The decoder reads its own tokens (the model input), and every cross-attention reads the
   * encoder output, which the graph then carries across pipeline cuts in the decoder. */
  int enc = last_layer(b);
  layer_spec demb = *emb, dnorm = *norm, dattn = *attn, dfirst = first, dcross = *attn, dfc1 = *fc1,
             dfc2 = *fc2;
  layer_spec *dec[] = {&demb, &dnorm, &dattn, &dfirst, &dcross, &dfc1, &dfc2};
  dattn.causal = dfirst.causal = TRUE; /* the decoder's self-attention (cross: never causal) */
  for (size_t k = 0; k < G_N_ELEMENTS(dec); k++)
    dec[k]->tokens = hp->dec_seq;
  demb.tied = TRUE;
  dcross.kv_tokens = hp->seq;
  if (!add_layer_from(b, g_strdup("decoder.embedding"), &demb, -1, error))
    return FALSE;
  for (gint64 i = 0; i < hp->dec_layers; i++)
    if (!add_block(b, "decoder.block", i, &dnorm, i == 0 ? &dfirst : &dattn, &dcross, enc, &dfc1,
                   &dfc2, error))
      return FALSE;
  layer_spec logits = logits_spec(hp, hp->dec_seq);
  return add_layer(b, g_strdup("final_norm"), &dnorm, error) &&
         add_layer(b, g_strdup("logits"), &logits, error);
}

/* The gate of a mixture-of-experts block as a layer of its own, reading the normed stream as
 * the experts do: a replicated dense hidden -> experts (its logits; softmax and top_k), so its
 * gradient is summed over every data-parallel rank like any replicated weight's, where folded
 * into the experts' first layer it was reduced with theirs over the ranks holding the same
 * experts only (found by trainsim validate, docs/validation.md; Megatron-Core's TopKRouter is
 * likewise a module of its own with a replicated weight). */
static gboolean add_router(builder *b, gint64 i, const layer_spec *router, int src, GError **error)
{
  if (!add_layer_from(b, g_strdup_printf("block.%" G_GINT64_FORMAT ".router", i), router, src,
                      error))
    return FALSE;
  /* The softmax over the logits: one FLOP per logit, as the folded gate counted it. Kept for
   * backward: the probabilities (T x experts); its input is the tensor the experts' and the
   * shared expert's layers read and keep already (one tensor, saved once), so it is not
   * counted again. */
  ts_layer *l = &g_array_index(b->layers, ts_layer, last_layer(b));
  double logits = (double)router->tokens * (double)router->out_f;
  l->fwd_flops += logits;
  l->saved_act_bytes = (double)b->dtype_bytes * logits;
  return TRUE;
}

/* A pre-norm block whose MLP is shared experts beside routed ones: norm1, attention, norm2,
 * shared_fc1, shared_fc2, then the router, fc1 and fc2 (the routed experts), the router and fc1
 * reading norm2's output; fc2 adds the residual stream and the shared experts' output. */
static gboolean add_shared_moe_block(builder *b, gint64 i, const layer_spec *norm,
                                     const layer_spec *attn, const layer_spec *sh1,
                                     const layer_spec *sh2, const layer_spec *router,
                                     const layer_spec *moe1, const layer_spec *moe2, GError **error)
{
  int stream = last_layer(b);
  if (!add_layer(b, g_strdup_printf("block.%" G_GINT64_FORMAT ".norm1", i), norm, error) ||
      !add_layer(b, g_strdup_printf("block.%" G_GINT64_FORMAT ".attention", i), attn, error))
    return FALSE;
  add_read(b, stream);
  stream = last_layer(b);
  if (!add_layer(b, g_strdup_printf("block.%" G_GINT64_FORMAT ".norm2", i), norm, error))
    return FALSE;
  int normed = last_layer(b);
  layer_spec shared2 = *sh2;
  shared2.dropout = FALSE; /* one dropout, after the sum (fc2) */
  /* shared2.residual stays: the add of its output into the routed experts' sum, 1 FLOP per
   * element (fc2 counts the residual stream's add). */
  if (!add_layer(b, g_strdup_printf("block.%" G_GINT64_FORMAT ".shared_fc1", i), sh1, error) ||
      !add_layer(b, g_strdup_printf("block.%" G_GINT64_FORMAT ".shared_fc2", i), &shared2, error))
    return FALSE;
  int shared = last_layer(b);
  if (!add_router(b, i, router, normed, error))
    return FALSE;
  int gate = last_layer(b);
  if (!add_layer_from(b, g_strdup_printf("block.%" G_GINT64_FORMAT ".fc1", i), moe1, normed, error))
    return FALSE;
  add_read(b, gate);
  if (!add_layer(b, g_strdup_printf("block.%" G_GINT64_FORMAT ".fc2", i), moe2, error))
    return FALSE;
  add_read(b, stream);
  add_read(b, shared);
  return TRUE;
}

/* Layer order follows GPT-2 / Megatron (pre-norm) or BERT (post-norm). Tensor parallelism after
 * Megatron-LM (Shoeybi et al. 2019, section 3): attention by heads, fc1 by columns, fc2 by rows,
 * embedding and logits by vocabulary rows, norms replicated. */
static gboolean build_transformer(const transformer_hp *hp, builder *b, GError **error)
{
  const layer_spec vec = {
      .tokens = hp->seq, .in_f = hp->hidden, .out_f = hp->hidden, .bias = hp->bias};
  layer_spec emb = vec;
  emb.kind = TS_LAYER_EMBEDDING;
  emb.tp = TS_TP_VOCAB;
  emb.vocab = hp->vocab;
  emb.positions = hp->positions;
  emb.learned_pos = hp->learned_pos;
  emb.token_types = hp->token_types;
  emb.dropout = hp->dropout;
  emb.bias = FALSE;
  emb.vocab_div = hp->vocab_div;
  layer_spec norm = vec;
  norm.kind = TS_LAYER_NORM;
  norm.tp = TS_TP_REPLICATED;
  norm.bias = FALSE;
  norm.rms = hp->rms;
  layer_spec attn = vec;
  attn.kind = TS_LAYER_ATTENTION;
  attn.tp = TS_TP_HEADS;
  attn.heads = hp->heads;
  attn.inner = hp->kv_channels > 0 ? hp->heads * hp->kv_channels : 0;
  attn.residual = TRUE;
  attn.dropout = hp->dropout;
  attn.kv_heads = hp->kv_heads;
  attn.rotary = hp->rotary;
  /* A decoder-only model's self-attention is causal unless [transformer] causal = false (an
   * encoder such as BERT's); an encoder-decoder's encoder is not, its decoder's is. */
  attn.causal = hp->causal && hp->dec_layers == 0;
  attn.q_lora = hp->q_lora;
  attn.kv_lora = hp->kv_lora;
  attn.qk_nope = hp->qk_nope;
  attn.qk_rope = hp->qk_rope;
  attn.v_dim = hp->v_dim;
  /* A gated MLP's fc1 holds the gate and up projections side by side (2 x ffn_hidden). */
  gint64 gate_mult = hp->act == ACT_SWIGLU || hp->act == ACT_GEGLU ? 2 : 1;
  layer_spec fc1 = vec;
  fc1.kind = TS_LAYER_DENSE;
  fc1.tp = TS_TP_COLUMN;
  fc1.out_f = gate_mult * hp->ffn;
  fc1.act = hp->act;
  layer_spec fc2 = vec;
  fc2.kind = TS_LAYER_DENSE;
  fc2.tp = TS_TP_ROW;
  fc2.in_f = hp->ffn;
  fc2.residual = TRUE;
  fc2.dropout = hp->dropout;

  if (hp->dec_layers > 0)
    return build_encoder_decoder(hp, &emb, &norm, &attn, &fc1, &fc2, b, error);
  if (!add_layer(b, g_strdup("embedding"), &emb, error))
    return FALSE;
  if (hp->post_norm && !add_layer(b, g_strdup("embedding_norm"), &norm, error))
    return FALSE;
  /* Mixture-of-experts MLPs in every moe_every-th layer (the second of each pair with the
   * default 2, as GShard and DeepSpeed-MoE place them). */
  layer_spec moe1 = fc1, moe2 = fc2;
  moe1.experts = moe2.experts = hp->experts;
  moe1.top_k = moe2.top_k = hp->top_k;
  layer_spec router = vec;
  router.kind = TS_LAYER_DENSE;
  router.tp = TS_TP_REPLICATED;
  router.out_f = hp->experts;
  router.bias = hp->router_bias; /* DeepSeek-V3's load-balancing bias, one per expert */
  moe1.capacity = moe2.capacity = hp->capacity;
  moe1.out_f = gate_mult * hp->moe_ffn;
  moe2.in_f = hp->moe_ffn;
  /* Shared experts (DeepSeekMoE, Dai et al. 2024, section 3.2): a dense MLP as wide as
   * shared_experts experts, every token through it, its output added to the routed ones'. */
  layer_spec sh1 = fc1, sh2 = fc2;
  sh1.out_f = gate_mult * hp->shared_experts * hp->moe_ffn;
  sh2.in_f = hp->shared_experts * hp->moe_ffn;
  for (gint64 i = 0; i < hp->layers; i++) {
    gboolean moe =
        hp->experts > 0 && i >= hp->first_dense && i % hp->moe_every == hp->moe_every - 1;
    if (moe && hp->shared_experts > 0) {
      if (!add_shared_moe_block(b, i, &norm, &attn, &sh1, &sh2, &router, &moe1, &moe2, error))
        return FALSE;
      continue;
    }
    const char *order_pre[] = {"norm1", "attention", "norm2", "fc1", "fc2"};
    const char *order_post[] = {"attention", "norm1", "fc1", "fc2", "norm2"};
    const char **order = hp->post_norm ? order_post : order_pre;
    /* The residual adds of a block: attention adds the block input; fc2 adds the attention's
     * output (pre-norm) or its norm's (post-norm). */
    int stream = last_layer(b);
    for (int j = 0; j < 5; j++) {
      const layer_spec *sp = strcmp(order[j], "attention") == 0 ? &attn
                             : strcmp(order[j], "fc1") == 0     ? (moe ? &moe1 : &fc1)
                             : strcmp(order[j], "fc2") == 0     ? (moe ? &moe2 : &fc2)
                                                                : &norm;
      int gate = -1, normed = last_layer(b);
      if (moe && sp == &moe1) {
        if (!add_router(b, i, &router, normed, error))
          return FALSE;
        gate = last_layer(b);
      }
      if (!add_layer_from(b, g_strdup_printf("block.%" G_GINT64_FORMAT ".%s", i, order[j]), sp,
                          normed, error))
        return FALSE;
      if (gate >= 0)
        add_read(b, gate);
      if (sp->residual)
        add_read(b, stream);
      if (sp->residual || (hp->post_norm && j == 1))
        stream = last_layer(b);
    }
  }
  if (!hp->post_norm && !add_layer(b, g_strdup("final_norm"), &norm, error))
    return FALSE;
  int encoded = last_layer(b); /* the encoder output the heads read */
  if (hp->head_transform) {
    /* BERT's masked-LM head: dense h -> h with GeLU, then a layer norm, before the logits
     * (Devlin et al. 2019; the google-research/bert `cls/predictions/transform` variables). */
    /* With head_tokens below the sequence the head runs on those tokens only: NVIDIA
     * DeepLearningExamples' BertPreTrainingHeads (sequence_output_is_dense, run_pretraining.py's
     * default) index_selects the positions with a masked-LM label before the transform, and
     * the loss reads the same rows. */
    layer_spec tr = vec, hn = norm;
    tr.kind = TS_LAYER_DENSE;
    tr.tp = TS_TP_REPLICATED;
    tr.act = hp->act;
    tr.tokens = hn.tokens = hp->head_tokens;
    if (!add_layer(b, g_strdup("head.transform"), &tr, error) ||
        !add_layer(b, g_strdup("head.norm"), &hn, error))
      return FALSE;
  }
  layer_spec logits = logits_spec(hp, hp->head_transform ? hp->head_tokens : hp->seq);
  if (!add_layer(b, g_strdup("logits"), &logits, error))
    return FALSE;
  if (hp->pooler) {
    /* BERT's pooler: dense h -> h with tanh on the first token, feeding next-sentence
     * prediction. */
    layer_spec pool = vec;
    pool.kind = TS_LAYER_DENSE;
    pool.tp = TS_TP_REPLICATED;
    pool.tokens = 1;
    pool.act = ACT_TANH;
    if (!add_layer_from(b, g_strdup("pooler"), &pool, encoded, error))
      return FALSE;
  }
  return TRUE;
}

/* ---- layers over feature maps (ResNet, AmoebaNet) ------------------------------------------ */

/* A k_h x k_w convolution of a c x h x w map to out_c channels, split by output channel. */
static layer_spec map_conv(gint64 c, gint64 h, gint64 w, gint64 out_c, gint64 kh, gint64 kw,
                           gint64 stride, gint64 pad)
{
  return (layer_spec){.kind = TS_LAYER_CONV2D,
                      .tp = TS_TP_COLUMN,
                      .tokens = 1,
                      .in_f = c,
                      .out_f = out_c,
                      .in_h = h,
                      .in_w = w,
                      .kh = kh,
                      .kw = kw,
                      .stride = stride,
                      .pad = pad};
}

/* Batch norm over a c x h x w map, replicated. */
static layer_spec map_norm(gint64 c, gint64 h, gint64 w)
{
  return (layer_spec){.kind = TS_LAYER_NORM,
                      .tp = TS_TP_REPLICATED,
                      .tokens = 1,
                      .in_f = c,
                      .out_f = c,
                      .in_h = h,
                      .in_w = w,
                      .map = TRUE};
}

/* A k x k max (or average) pool of a c x h x w map, replicated. */
static layer_spec map_pool(gint64 c, gint64 h, gint64 w, gint64 k, gint64 stride, gint64 pad,
                           gboolean avg)
{
  return (layer_spec){.kind = TS_LAYER_POOL,
                      .tp = TS_TP_REPLICATED,
                      .tokens = 1,
                      .in_f = c,
                      .in_h = h,
                      .in_w = w,
                      .kh = k,
                      .kw = k,
                      .stride = stride,
                      .pad = pad,
                      .avg_pool = avg};
}

/* The classifier after global pooling: features -> classes with a bias and the loss. */
static layer_spec classifier(gint64 features, gint64 classes)
{
  return (layer_spec){.kind = TS_LAYER_DENSE,
                      .tp = TS_TP_COLUMN,
                      .tokens = 1,
                      .in_f = features,
                      .out_f = classes,
                      .bias = TRUE,
                      .loss = TRUE};
}

/* ---- ResNet generator ----------------------------------------------------------------------- */

/* He et al. 2016, "Deep Residual Learning for Image Recognition", Table 1; layer names and the
 * v1.5 stride placement (on the 3x3 convolution) as in torchvision.models.resnet. */
typedef struct {
  gint64 depth, image, classes, channels;
  gboolean v1; /* stride on the first 1x1 convolution of a bottleneck, as in the paper */
} resnet_hp;

static gboolean read_resnet(GKeyFile *kf, const char *path, resnet_hp *hp, GError **error)
{
  static const char *const keys[] = {"depth", "image", "classes", "channels", "variant", NULL};
  static const char *const variants[] = {"v1.5", "v1", NULL};
  const char *g = "resnet";
  int v = 0;
  if (!ts_kf_check_keys(kf, path, g, keys, error) ||
      !ts_kf_int(kf, path, g, "depth", FALSE, 0, 18, 152, "a ResNet depth (18, 34, 50, 101, 152)",
                 &hp->depth, error))
    return FALSE;
  if (hp->depth != 18 && hp->depth != 34 && hp->depth != 50 && hp->depth != 101 && hp->depth != 152)
    return fail_key(error, path, g, "depth", hp->depth, "one of 18, 34, 50, 101, 152");
  if (!ts_kf_int(kf, path, g, "image", TRUE, 224, 1, DIM_MAX, "an image side in pixels", &hp->image,
                 error) ||
      !ts_kf_int(kf, path, g, "classes", TRUE, 1000, 1, DIM_MAX, "a class count", &hp->classes,
                 error) ||
      !ts_kf_int(kf, path, g, "channels", TRUE, 3, 1, SMALL_MAX, "an input channel count",
                 &hp->channels, error) ||
      !kf_enum(kf, path, g, "variant", "v1.5", variants, &v, error))
    return FALSE;
  hp->v1 = v == 1;
  return TRUE;
}

typedef struct {
  builder *b;
  gint64 c, h, w; /* current feature map */
  gboolean first;
} resnet_state;

/* A convolution reading layer src's output (a c x h x w map). */
static gboolean rn_conv(resnet_state *st, char *name, int src, gint64 in_c, gint64 in_h,
                        gint64 in_w, gint64 out_c, gint64 k, gint64 stride, gint64 pad,
                        GError **error)
{
  layer_spec sp = map_conv(in_c, in_h, in_w, out_c, k, k, stride, pad);
  sp.first = st->first;
  if (k > in_h + 2 * pad || k > in_w + 2 * pad) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [resnet] image: expected a larger image; layer %s gets a %" G_GINT64_FORMAT
                "x%" G_GINT64_FORMAT " map, smaller than its %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                " kernel",
                st->b->path, name, in_h, in_w, k, k);
    g_free(name);
    return FALSE;
  }
  st->first = FALSE;
  st->c = out_c;
  st->h = conv_out(in_h, k, stride, pad);
  st->w = conv_out(in_w, k, stride, pad);
  return add_layer_from(st->b, name, &sp, src, error);
}

static gboolean rn_bn(resnet_state *st, char *name, gboolean relu, gboolean residual,
                      GError **error)
{
  layer_spec sp = map_norm(st->c, st->h, st->w);
  sp.act = relu ? ACT_RELU : ACT_NONE;
  sp.residual = residual;
  return add_layer(st->b, name, &sp, error);
}

static gboolean build_resnet(const resnet_hp *hp, builder *b, GError **error)
{
  gint64 blocks[4];
  gboolean bottleneck = hp->depth >= 50;
  switch (hp->depth) {
  case 18:
    memcpy(blocks, (gint64[]){2, 2, 2, 2}, sizeof blocks);
    break;
  case 34:
    memcpy(blocks, (gint64[]){3, 4, 6, 3}, sizeof blocks);
    break;
  case 50:
    memcpy(blocks, (gint64[]){3, 4, 6, 3}, sizeof blocks);
    break;
  case 101:
    memcpy(blocks, (gint64[]){3, 4, 23, 3}, sizeof blocks);
    break;
  default:
    memcpy(blocks, (gint64[]){3, 8, 36, 3}, sizeof blocks);
    break;
  }
  const gint64 expansion = bottleneck ? 4 : 1;
  resnet_state st = {.b = b, .c = hp->channels, .h = hp->image, .w = hp->image, .first = TRUE};
  /* Stem: 7x7/2 convolution, batch norm + ReLU, 3x3/2 max pool. */
  b->block = -1;
  if (!rn_conv(&st, g_strdup("conv1"), -1, st.c, st.h, st.w, 64, 7, 2, 3, error) ||
      !rn_bn(&st, g_strdup("bn1"), TRUE, FALSE, error))
    return FALSE;
  layer_spec mp = map_pool(st.c, st.h, st.w, 3, 2, 1, FALSE);
  if (!add_layer(b, g_strdup("maxpool"), &mp, error))
    return FALSE;
  st.h = conv_out(st.h, 3, 2, 1);
  st.w = conv_out(st.w, 3, 2, 1);
  for (int s = 0; s < 4; s++) {
    gint64 width = (gint64)64 << s;
    for (gint64 i = 0; i < blocks[s]; i++) {
      gint64 stride = (s > 0 && i == 0) ? 2 : 1;
      gint64 in_c = st.c, in_h = st.h, in_w = st.w;
      g_autofree char *pre = g_strdup_printf("layer%d.%" G_GINT64_FORMAT, s + 1, i);
      b->block++; /* one block per residual block, its shortcut included */
      /* The projection shortcut reads the block input: emitted first so that every layer's
       * inputs exist when it runs; the last norm of the block adds it (residual), or the block
       * input itself when there is no projection. */
      int x = last_layer(b), shortcut = x;
      if (stride != 1 || in_c != width * expansion) {
        resnet_state ds = st;
        if (!rn_conv(&ds, g_strdup_printf("%s.downsample.0", pre), x, in_c, in_h, in_w,
                     width * expansion, 1, stride, 0, error) ||
            !rn_bn(&ds, g_strdup_printf("%s.downsample.1", pre), FALSE, FALSE, error))
          return FALSE;
        shortcut = last_layer(b);
      }
      if (bottleneck) {
        gint64 s1 = hp->v1 ? stride : 1, s2 = hp->v1 ? 1 : stride;
        if (!rn_conv(&st, g_strdup_printf("%s.conv1", pre), x, in_c, in_h, in_w, width, 1, s1, 0,
                     error) ||
            !rn_bn(&st, g_strdup_printf("%s.bn1", pre), TRUE, FALSE, error) ||
            !rn_conv(&st, g_strdup_printf("%s.conv2", pre), last_layer(b), width, st.h, st.w, width,
                     3, s2, 1, error) ||
            !rn_bn(&st, g_strdup_printf("%s.bn2", pre), TRUE, FALSE, error) ||
            !rn_conv(&st, g_strdup_printf("%s.conv3", pre), last_layer(b), width, st.h, st.w,
                     width * 4, 1, 1, 0, error) ||
            !rn_bn(&st, g_strdup_printf("%s.bn3", pre), TRUE, TRUE, error))
          return FALSE;
      } else {
        if (!rn_conv(&st, g_strdup_printf("%s.conv1", pre), x, in_c, in_h, in_w, width, 3, stride,
                     1, error) ||
            !rn_bn(&st, g_strdup_printf("%s.bn1", pre), TRUE, FALSE, error) ||
            !rn_conv(&st, g_strdup_printf("%s.conv2", pre), last_layer(b), width, st.h, st.w, width,
                     3, 1, 1, error) ||
            !rn_bn(&st, g_strdup_printf("%s.bn2", pre), TRUE, TRUE, error))
          return FALSE;
      }
      add_read(b, shortcut);
    }
  }
  b->block = -1;
  /* Global average pooling (the whole map, square: the image is) and the classifier. */
  layer_spec ap = map_pool(st.c, st.h, st.w, st.h, 1, 0, TRUE);
  layer_spec fc = classifier(st.c, hp->classes);
  return add_layer(b, g_strdup("avgpool"), &ap, error) && add_layer(b, g_strdup("fc"), &fc, error);
}

/* ---- AmoebaNet generator -------------------------------------------------------------------- */

/* AmoebaNet-D (Real et al. 2019, "Regularized Evolution for Image Classifier Architecture
 * Search", AAAI, figure 8 / appendix; the genotype of tensorflow/tpu's amoeba_net model_specs
 * `amoeba_net_d`) in the layout GPipe's PyTorch reimplementation uses (kakaobrain/torchgpipe,
 * benchmarks/models/amoebanet; Huang et al. 2019, "GPipe", Table 1, counts these models): a
 * ReLU + 3x3/2 convolution + batch-norm stem, two reduction cells, then three stacks of
 * normal_cells / 3 normal cells with a reduction cell between stacks (filters doubling at
 * each), global average pooling and a linear classifier. */
typedef struct {
  gint64 normal_cells, filters, image, classes, channels;
} amoeba_hp;

static gboolean read_amoebanet(GKeyFile *kf, const char *path, amoeba_hp *hp, GError **error)
{
  static const char *const keys[] = {"normal_cells", "filters",  "image",
                                     "classes",      "channels", NULL};
  const char *g = "amoebanet";
  if (!ts_kf_check_keys(kf, path, g, keys, error) ||
      !ts_kf_int(kf, path, g, "normal_cells", FALSE, 0, 3, 3 * 1024,
                 "a normal-cell count L (GPipe's AmoebaNet-D (L, D))", &hp->normal_cells, error) ||
      !ts_kf_int(kf, path, g, "filters", FALSE, 0, 8, (gint64)1 << 16,
                 "a filter count D (GPipe's AmoebaNet-D (L, D))", &hp->filters, error) ||
      !ts_kf_int(kf, path, g, "image", TRUE, 224, 32, (gint64)1 << 16, "an image side in pixels",
                 &hp->image, error) ||
      !ts_kf_int(kf, path, g, "classes", TRUE, 1000, 1, DIM_MAX, "a class count", &hp->classes,
                 error) ||
      !ts_kf_int(kf, path, g, "channels", TRUE, 3, 1, SMALL_MAX, "an input channel count",
                 &hp->channels, error))
    return FALSE;
  if (hp->normal_cells % 3 != 0)
    return fail_key(error, path, g, "normal_cells", hp->normal_cells,
                    "a multiple of 3 (three stacks of equal length)");
  if (hp->filters % 8 != 0)
    return fail_key(error, path, g, "filters", hp->filters,
                    "a multiple of 8 (the first cells work on filters / 2 channels and their "
                    "convolution branches on a quarter of those)");
  if (hp->image % 32 != 0)
    return fail_key(error, path, g, "image", hp->image,
                    "a multiple of 32 (five halvings, each of an even side, so that the 2x2 and "
                    "3x3 pooling branches of a reduction cell agree)");
  return TRUE;
}

/* A feature map: the concatenation (along channels) of the outputs of n layers; n = 0 is the
 * model input. */
typedef struct {
  int n, layer[4];
  gint64 c, h, w;
} am_map;

typedef struct {
  builder *b;
  const char *cell; /* name prefix of the cell being built */
  GError **error;
} am_ctx;

static am_map am_single(const builder *b, gint64 c, gint64 h, gint64 w)
{
  return (am_map){.n = 1, .layer = {last_layer(b)}, .c = c, .h = h, .w = w};
}

/* Appends a layer reading `in` (all of its parts); `add` >= 0: the layer's output also adds
 * layer add's output (a node's sum of its two branches). */
static gboolean am_emit(am_ctx *x, const char *what, layer_spec *sp, const am_map *in, int add)
{
  sp->residual = add >= 0;
  char *name = g_strdup_printf("%s.%s", x->cell, what);
  if (!add_layer_from(x->b, name, sp, in->n > 0 ? in->layer[in->n - 1] : -1, x->error))
    return FALSE;
  for (int k = 0; k + 1 < in->n; k++)
    add_read(x->b, in->layer[k]);
  add_read(x->b, add);
  return TRUE;
}

static gboolean am_conv(am_ctx *x, const char *what, const am_map *in, gint64 out_c, gint64 kh,
                        gint64 kw, gint64 stride, gboolean relu, am_map *out)
{
  /* "Same" padding for odd kernels, per axis ((k - 1) / 2: 1x7 pads only the width). */
  layer_spec sp = map_conv(in->c, in->h, in->w, out_c, kh, kw, stride, (kh - 1) / 2);
  sp.pad_w = (kw - 1) / 2;
  sp.own_pad_w = TRUE;
  sp.pre_relu = relu;
  sp.first = in->n == 0;
  if (!am_emit(x, what, &sp, in, -1))
    return FALSE;
  const ts_layer *l = &g_array_index(x->b->layers, ts_layer, last_layer(x->b));
  *out = am_single(x->b, out_c, l->out_h, l->out_w);
  return TRUE;
}

/* Batch norm over `in` (one map, or a concatenation it normalises as one). */
static gboolean am_bn(am_ctx *x, const char *what, const am_map *in, int add, am_map *out)
{
  layer_spec sp = map_norm(in->c, in->h, in->w);
  if (!am_emit(x, what, &sp, in, add))
    return FALSE;
  *out = am_single(x->b, in->c, in->h, in->w);
  return TRUE;
}

/* ReLU, k x k convolution (stride s), batch norm: AmoebaNet's basic unit. */
static gboolean am_relu_conv_bn(am_ctx *x, const char *what, const am_map *in, gint64 c, gint64 k,
                                gint64 stride, int add, am_map *out)
{
  g_autofree char *conv = g_strdup_printf("%s.conv", what);
  g_autofree char *bn = g_strdup_printf("%s.bn", what);
  am_map t;
  return am_conv(x, conv, in, c, k, k, stride, TRUE, &t) && am_bn(x, bn, &t, add, out);
}

/* Factorised reduction of a map twice as large: ReLU, two 1x1/2 convolutions to c/2 channels
 * each (the second on the map shifted by one pixel: same cost), concatenated, batch norm. */
static gboolean am_factorized_reduce(am_ctx *x, const char *what, const am_map *in, gint64 c,
                                     am_map *out)
{
  g_autofree char *c1 = g_strdup_printf("%s.conv1", what);
  g_autofree char *c2 = g_strdup_printf("%s.conv2", what);
  g_autofree char *bn = g_strdup_printf("%s.bn", what);
  am_map a, b;
  if (!am_conv(x, c1, in, c / 2, 1, 1, 2, TRUE, &a) ||
      !am_conv(x, c2, in, c / 2, 1, 1, 2, TRUE, &b))
    return FALSE;
  am_map cat = {.n = 2, .layer = {a.layer[0], b.layer[0]}, .c = c, .h = a.h, .w = a.w};
  return am_bn(x, bn, &cat, -1, out);
}

typedef enum {
  AM_NONE,
  AM_CONV_1X1,
  AM_CONV_3X3,
  AM_CONV_1X7_7X1,
  AM_MAX_3X3,
  AM_AVG_3X3,
  AM_MAX_2X2
} am_op;

static gboolean am_pool(am_ctx *x, const char *what, const am_map *in, gint64 k, gint64 stride,
                        gint64 pad, gboolean avg, int add, am_map *out)
{
  layer_spec sp = map_pool(in->c, in->h, in->w, k, stride, pad, avg);
  if (!am_emit(x, what, &sp, in, add))
    return FALSE;
  *out = am_single(x->b, in->c, conv_out(in->h, k, stride, pad), conv_out(in->w, k, stride, pad));
  return TRUE;
}

/* One branch of a node: operation `op` on `in` (c channels out, stride s); `add` >= 0 adds
 * layer add's output to the branch's last layer (the node's sum). An identity branch adds no
 * layer: the caller folds it into the other branch's add. */
static gboolean am_branch(am_ctx *x, const char *what, am_op op, const am_map *in, gint64 c,
                          gint64 stride, int add, am_map *out)
{
  gint64 r = c / 4; /* the bottleneck of the convolution branches */
  am_map t;
  g_autofree char *n1 = NULL, *n2 = NULL, *n3 = NULL, *n4 = NULL;
  switch (op) {
  case AM_NONE:
    *out = *in;
    return TRUE;
  case AM_CONV_1X1:
    return am_relu_conv_bn(x, what, in, c, 1, stride, add, out);
  case AM_MAX_3X3:
  case AM_AVG_3X3:
    n1 = g_strdup_printf("%s.pool", what);
    return am_pool(x, n1, in, 3, stride, 1, op == AM_AVG_3X3, add, out);
  case AM_MAX_2X2:
    n1 = g_strdup_printf("%s.pool", what);
    return am_pool(x, n1, in, 2, stride, 0, FALSE, add, out);
  case AM_CONV_3X3:
    /* 1x1 to c/4, 3x3 (stride s), 1x1 back to c; each ReLU-conv-BN. */
    n1 = g_strdup_printf("%s.reduce", what);
    n2 = g_strdup_printf("%s.conv3x3", what);
    n3 = g_strdup_printf("%s.expand", what);
    return am_relu_conv_bn(x, n1, in, r, 1, 1, -1, &t) &&
           am_relu_conv_bn(x, n2, &t, r, 3, stride, -1, &t) &&
           am_relu_conv_bn(x, n3, &t, c, 1, 1, add, out);
  case AM_CONV_1X7_7X1: {
    /* 1x1 to c/4, 1x7, 7x1, 1x1 back to c; each ReLU-conv-BN. */
    n1 = g_strdup_printf("%s.reduce", what);
    n2 = g_strdup_printf("%s.conv1x7.conv", what);
    n3 = g_strdup_printf("%s.conv1x7.bn", what);
    n4 = g_strdup_printf("%s.conv7x1.conv", what);
    g_autofree char *n5 = g_strdup_printf("%s.conv7x1.bn", what);
    g_autofree char *n6 = g_strdup_printf("%s.expand", what);
    return am_relu_conv_bn(x, n1, in, r, 1, 1, -1, &t) &&
           am_conv(x, n2, &t, r, 1, 7, stride, TRUE, &t) && am_bn(x, n3, &t, -1, &t) &&
           am_conv(x, n4, &t, r, 7, 1, stride, TRUE, &t) && am_bn(x, n5, &t, -1, &t) &&
           am_relu_conv_bn(x, n6, &t, c, 1, 1, add, out);
  }
  }
  return FALSE;
}

/* The AmoebaNet-D genotype (tensorflow/tpu model_specs `amoeba_net_d`): node k + 2 sums
 * op[2k](state[in[2k]]) and op[2k + 1](state[in[2k + 1]]); state 0 is the previous cell's
 * output and state 1 the one before, each preprocessed to c channels. */
static const am_op am_normal_op[10] = {AM_CONV_1X1, AM_MAX_3X3,      AM_NONE,    AM_CONV_1X7_7X1,
                                       AM_CONV_1X1, AM_CONV_1X7_7X1, AM_MAX_3X3, AM_NONE,
                                       AM_AVG_3X3,  AM_CONV_1X1};
static const int am_normal_in[10] = {1, 1, 1, 0, 0, 0, 2, 2, 1, 5};
static const int am_normal_out[] = {0, 3, 4, 6};
static const am_op am_reduce_op[10] = {AM_MAX_2X2,      AM_MAX_3X3, AM_NONE, AM_CONV_3X3,
                                       AM_CONV_1X7_7X1, AM_MAX_3X3, AM_NONE, AM_MAX_2X2,
                                       AM_AVG_3X3,      AM_CONV_1X1};
static const int am_reduce_in[10] = {0, 0, 2, 1, 2, 2, 3, 1, 2, 3};
static const int am_reduce_out[] = {4, 5, 6};

/* One cell over prev (h_{i-1}) and prev2 (h_{i-2}), c filters; a reduction cell halves the
 * map (its branches reading the inputs use stride 2). Its output: the concatenation. */
static gboolean am_cell(am_ctx *x, const am_map *prev, const am_map *prev2, gint64 c,
                        gboolean reduction, am_map *out)
{
  am_map st[7];
  /* Preprocessing: h_{i-1} by ReLU-conv-BN to c channels, first, so that the cell's first
   * layer reads the previous cell's output; h_{i-2} likewise, or by a factorised reduction
   * when it is twice as large (the cell before was a reduction). */
  if (!am_relu_conv_bn(x, "pre0", prev, c, 1, 1, -1, &st[0]))
    return FALSE;
  if (prev2->h != prev->h ? !am_factorized_reduce(x, "pre1", prev2, c, &st[1])
                          : !am_relu_conv_bn(x, "pre1", prev2, c, 1, 1, -1, &st[1]))
    return FALSE;
  const am_op *op = reduction ? am_reduce_op : am_normal_op;
  const int *in = reduction ? am_reduce_in : am_normal_in;
  for (int k = 0; k < 5; k++) {
    int a = 2 * k, b = 2 * k + 1;
    /* The identity branch, if any, is added by the other one, emitted second. */
    if (op[b] == AM_NONE) {
      int t = a;
      a = b;
      b = t;
    }
    gint64 sa = reduction && in[a] < 2 ? 2 : 1, sb = reduction && in[b] < 2 ? 2 : 1;
    g_autofree char *wa = g_strdup_printf("node%d.%c", k + 2, a % 2 == 0 ? 'a' : 'b');
    g_autofree char *wb = g_strdup_printf("node%d.%c", k + 2, b % 2 == 0 ? 'a' : 'b');
    am_map ra;
    if (!am_branch(x, wa, op[a], &st[in[a]], c, sa, -1, &ra) ||
        !am_branch(x, wb, op[b], &st[in[b]], c, sb, ra.layer[ra.n - 1], &st[k + 2]))
      return FALSE;
  }
  const int *cat = reduction ? am_reduce_out : am_normal_out;
  int ncat = reduction ? (int)G_N_ELEMENTS(am_reduce_out) : (int)G_N_ELEMENTS(am_normal_out);
  *out = (am_map){.n = ncat, .c = 0, .h = st[cat[0]].h, .w = st[cat[0]].w};
  for (int k = 0; k < ncat; k++) {
    out->layer[k] = st[cat[k]].layer[0];
    out->c += st[cat[k]].c;
  }
  return TRUE;
}

static gboolean build_amoebanet(const amoeba_hp *hp, builder *b, GError **error)
{
  gint64 D = hp->filters, n = hp->normal_cells / 3;
  am_ctx x = {.b = b, .cell = "stem", .error = error};
  am_map img = {.n = 0, .c = hp->channels, .h = hp->image, .w = hp->image}, stem;
  /* Stem: ReLU, 3x3/2 convolution to D/4 channels, batch norm; it feeds the first cell as
   * both of its inputs. */
  b->block = -1;
  am_map t;
  if (!am_conv(&x, "conv", &img, D / 4, 3, 3, 2, TRUE, &t) || !am_bn(&x, "bn", &t, -1, &stem))
    return FALSE;
  am_map prev = stem, prev2 = stem, next;
  int cells = 0;
  g_autofree char *name = NULL;
  /* Two reduction cells in the stem (D/2, D filters), then the stacks. */
  for (int s = 0; s < 5; s++) {
    gboolean stack = s == 2 || s == 3 || s == 4;
    gint64 c = s == 0 ? D / 2 : s == 1 ? D : D << (s - 2);
    for (gint64 i = stack && s > 2 ? -1 : 0; i < (stack ? n : 1); i++) {
      gboolean reduction = !stack || i < 0;
      g_free(name);
      name = !stack  ? g_strdup_printf("stem_cell%d", s)
             : i < 0 ? g_strdup_printf("reduce%d", s - 2)
                     : g_strdup_printf("stack%d.cell%" G_GINT64_FORMAT, s - 1, i);
      x.cell = name;
      b->block = cells++;
      if (!am_cell(&x, &prev, &prev2, c, reduction, &next))
        return FALSE;
      prev2 = prev;
      prev = next;
    }
  }
  b->block = -1;
  /* Head: global average pooling, then the classifier with the loss. */
  x.cell = "head";
  am_map pooled;
  if (!am_pool(&x, "avgpool", &prev, prev.h, 1, 0, TRUE, -1, &pooled))
    return FALSE;
  layer_spec fc = classifier(pooled.c, hp->classes);
  return add_layer(b, g_strdup("head.fc"), &fc, error);
}

/* ---- loading ---------------------------------------------------------------------------- */

static void free_layers(ts_layer *layers, int n)
{
  for (int i = 0; i < n; i++)
    g_free(layers[i].name);
  g_free(layers);
}

void ts_model_free(ts_model *m)
{
  if (m == NULL)
    return;
  g_free(m->name);
  g_free(m->path);
  g_free(m->kind);
  free_layers(m->layers, m->nlayers);
  g_free(m);
}

static gboolean check_groups(GKeyFile *kf, const char *path, const char *kind, GError **error)
{
  gsize n = 0;
  g_auto(GStrv) groups = g_key_file_get_groups(kf, &n);
  gboolean layers = strcmp(kind, "layers") == 0;
  for (gsize i = 0; i < n; i++) {
    const char *g = groups[i];
    if (strcmp(g, "model") == 0 || (!layers && strcmp(g, kind) == 0) ||
        (layers && g_str_has_prefix(g, "layer.") && g[strlen("layer.")] != '\0'))
      continue;
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s]: unknown group for [model] kind='%s'; expected [model]%s%s%s", path, g,
                kind, layers ? " and [layer.NAME] groups" : " and [", layers ? "" : kind,
                layers ? "" : "]");
    return FALSE;
  }
  return TRUE;
}

/* Reads a model file; force_fp32: as trained in fp32 whatever its [model] dtype says. */
static ts_model *model_load(const char *path, gboolean force_fp32, GError **error);

ts_model *ts_model_load(const char *path, GError **error)
{
  return model_load(path, FALSE, error);
}

ts_model *ts_model_load_fp32(const char *path, GError **error)
{
  return model_load(path, TRUE, error);
}

static ts_model *model_load(const char *path, gboolean force_fp32, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_autoptr(GKeyFile) kf = ts_kf_load(path, error);
  if (kf == NULL)
    return NULL;
  if (!g_key_file_has_group(kf, "model")) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [model]: missing group; expected [model] with kind = layers | transformer | "
                "resnet | amoebanet",
                path);
    return NULL;
  }
  static const char *const model_keys[] = {"name",      "kind",      "dtype", "published_params",
                                           "attention", "optimizer", NULL};
  static const char *const optimizers[] = {"adam", "sgd", NULL};
  static const char *const attentions[] = {"unfused", "flash", NULL};
  static const char *const kinds[] = {"layers", "transformer", "resnet", "amoebanet", NULL};
  static const char *const dtypes[] = {"bf16", "fp16", "fp32", NULL};
  static const double dtype_bytes[] = {2.0, 2.0, 4.0};
  int kind = 0, dtype = 0, attention = TS_ATTN_FLASH, optimizer = TS_OPT_ADAM;
  double published = 0.0;
  g_autofree char *name = NULL;
  if (!ts_kf_check_keys(kf, path, "model", model_keys, error) ||
      !kf_enum(kf, path, "model", "kind", NULL, kinds, &kind, error) ||
      !kf_enum(kf, path, "model", "dtype", "bf16", dtypes, &dtype, error) ||
      !kf_enum(kf, path, "model", "attention", "flash", attentions, &attention, error) ||
      !kf_enum(kf, path, "model", "optimizer", "adam", optimizers, &optimizer, error) ||
      !ts_kf_double(kf, path, "model", "published_params", TRUE, 0.0, 1.0, PARAMS_MAX,
                    "a published parameter count", &published, error) ||
      !ts_kf_string(kf, path, "model", "name", NULL, &name, error) ||
      !check_groups(kf, path, kinds[kind], error))
    return NULL;
  if (force_fp32)
    dtype = 2; /* "fp32": every tensor 4 bytes, no loss scaler */
  if (name == NULL || *name == '\0') {
    g_free(name);
    g_autofree char *base = g_path_get_basename(path);
    name = g_str_has_suffix(base, ".ini") ? g_strndup(base, strlen(base) - 4) : g_strdup(base);
  }

  builder b = {.path = path,
               .dtype_bytes = dtype_bytes[dtype],
               .layers = g_array_new(FALSE, TRUE, sizeof(ts_layer)),
               .reads = g_array_new(FALSE, FALSE, sizeof(read_edge)),
               .block = -1,
               .block_names = kind <= 1,
               .attention = (ts_attention)attention};
  transformer_hp hp = {0};
  resnet_hp rp = {0};
  amoeba_hp ap = {0};
  gboolean ok = FALSE;
  switch (kind) {
  case 0:
    ok = build_layers(kf, path, &b, error);
    break;
  case 1:
    if (!g_key_file_has_group(kf, "transformer"))
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [transformer]: missing group; expected it with [model] kind='transformer'",
                  path);
    else
      ok = read_transformer(kf, path, &hp, error) && build_transformer(&hp, &b, error);
    break;
  case 2:
    if (!g_key_file_has_group(kf, "resnet"))
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [resnet]: missing group; expected it with [model] kind='resnet'", path);
    else
      ok = read_resnet(kf, path, &rp, error) && build_resnet(&rp, &b, error);
    break;
  default:
    if (!g_key_file_has_group(kf, "amoebanet"))
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [amoebanet]: missing group; expected it with [model] kind='amoebanet'",
                  path);
    else
      ok = read_amoebanet(kf, path, &ap, error) && build_amoebanet(&ap, &b, error);
    break;
  }
  if (ok)
    finish_graph(&b);
  g_array_unref(b.reads);
  int n = (int)b.layers->len;
  ts_layer *layers = (ts_layer *)(void *)g_array_free(b.layers, FALSE);
  if (!ok) {
    free_layers(layers, n);
    return NULL;
  }

  ts_model *m = g_new0(ts_model, 1);
  m->name = g_steal_pointer(&name);
  m->path = g_strdup(path);
  m->kind = g_strdup(kinds[kind]);
  m->dtype_bytes = dtype_bytes[dtype];
  m->attention = (ts_attention)attention;
  m->optimizer = (ts_optimizer)optimizer;
  m->fp16 = dtype == 1;
  m->nlayers = n;
  m->layers = layers;
  m->published_params = published;
  /* A sample: what every layer reading the model input reads (T5: input and target tokens). */
  for (int i = 0; i < n; i++)
    if (layers[i].src < 0)
      m->sample_elems += (gint64)layers[i].in_act_elems;
  if (kind == 1) {
    m->t_layers = hp.layers;
    m->t_hidden = hp.hidden;
    m->t_heads = hp.heads;
    m->t_seq = hp.seq;
    m->t_vocab = hp.vocab;
    m->t_ffn = hp.ffn;
    m->t_experts = hp.experts;
    m->t_moe_every = hp.moe_every;
    m->t_top_k = hp.top_k;
    m->t_dec_layers = hp.dec_layers;
    m->t_dec_seq = hp.dec_layers > 0 ? hp.dec_seq : 0;
    m->t_kv_heads = hp.kv_heads;
    m->t_moe_ffn = hp.experts > 0 ? hp.moe_ffn : 0;
    m->t_shared_experts = hp.shared_experts;
    m->t_first_dense = hp.first_dense;
  }
  /* Shapes are each in range, but their products may still describe nothing real. */
  double params = ts_model_params(m), flops = ts_model_train_flops_per_sample(m);
  if (!(params <= PARAMS_MAX) || !isfinite(flops)) {
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: the model has %s parameters; expected at most 1e15 (check the sizes)", path,
                g_ascii_formatd(buf, sizeof buf, "%.3g", params));
    ts_model_free(m);
    return NULL;
  }
  return m;
}

/* ---- totals and reports ----------------------------------------------------------------- */

/* The sum over the model's layers of the double at offset `field` of ts_layer. */
static double layers_sum(const ts_model *m, size_t field)
{
  double s = 0.0;
  for (int i = 0; i < m->nlayers; i++)
    s += *(const double *)((const char *)&m->layers[i] + field);
  return s;
}

int ts_model_blocks(const ts_model *m)
{
  g_return_val_if_fail(m != NULL, 0);
  int n = 0;
  for (int i = 0; i < m->nlayers; i++)
    n = MAX(n, m->layers[i].block + 1);
  return n;
}

double ts_model_params(const ts_model *m)
{
  g_return_val_if_fail(m != NULL, 0.0);
  return layers_sum(m, offsetof(ts_layer, params));
}

double ts_model_active_params(const ts_model *m)
{
  g_return_val_if_fail(m != NULL, 0.0);
  return layers_sum(m, offsetof(ts_layer, active_params));
}

double ts_model_train_flops_per_sample(const ts_model *m)
{
  g_return_val_if_fail(m != NULL, 0.0);
  double s = 0.0;
  for (int i = 0; i < m->nlayers; i++)
    s += m->layers[i].fwd_flops + m->layers[i].bwd_input_flops + m->layers[i].bwd_weight_flops;
  return s;
}

double ts_model_fwd_flops_per_sample(const ts_model *m)
{
  g_return_val_if_fail(m != NULL, 0.0);
  return layers_sum(m, offsetof(ts_layer, fwd_flops));
}

double ts_model_saved_act_bytes_per_sample(const ts_model *m)
{
  g_return_val_if_fail(m != NULL, 0.0);
  return layers_sum(m, offsetof(ts_layer, saved_act_bytes));
}

double ts_layer_weight_bytes(const ts_model *m, const ts_layer *l)
{
  g_return_val_if_fail(m != NULL && l != NULL, 0.0);
  return m->dtype_bytes * weight_elems(l);
}

double ts_layer_fwd_mem_bytes_batch(const ts_model *m, const ts_layer *l, double samples)
{
  g_return_val_if_fail(m != NULL && l != NULL && samples >= 0.0, 0.0);
  if (samples == 0.0)
    return 0.0;
  double w = ts_layer_weight_bytes(m, l);
  return w + samples * (l->fwd_mem_bytes - w);
}

double ts_layer_bwd_mem_bytes_batch(const ts_model *m, const ts_layer *l, double samples)
{
  g_return_val_if_fail(m != NULL && l != NULL && samples >= 0.0, 0.0);
  if (samples == 0.0)
    return 0.0;
  double w = 2.0 * ts_layer_weight_bytes(m, l);
  return w + samples * (l->bwd_mem_bytes - w);
}

char *ts_layer_shape_text(const ts_layer *l)
{
  g_return_val_if_fail(l != NULL, NULL);
  gboolean map = l->kind == TS_LAYER_CONV2D || l->kind == TS_LAYER_POOL ||
                 (l->kind == TS_LAYER_NORM && l->in_h > 0);
  GString *s = g_string_new(NULL);
  if (map) {
    g_string_append_printf(s, "%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT,
                           l->in_features, l->in_h, l->in_w);
    if (l->kind != TS_LAYER_NORM)
      g_string_append_printf(s,
                             " k%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT
                             " -> %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT,
                             l->kernel_h, l->kernel_w, l->stride, l->out_features, l->out_h,
                             l->out_w);
    if (l->groups > 1)
      g_string_append_printf(s, " groups=%" G_GINT64_FORMAT, l->groups);
  } else {
    g_string_append_printf(s, "%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT,
                           l->tokens, l->in_features, l->out_features);
    if (l->kind == TS_LAYER_ATTENTION)
      g_string_append_printf(s, " heads=%" G_GINT64_FORMAT "%s", l->heads,
                             l->cross ? " cross" : "");
    if (l->kv_heads > 0 && l->kv_heads != l->heads)
      g_string_append_printf(s, " kv_heads=%" G_GINT64_FORMAT, l->kv_heads);
    if (l->kv_lora_rank > 0)
      g_string_append_printf(s,
                             " mla q_lora=%" G_GINT64_FORMAT " kv_lora=%" G_GINT64_FORMAT
                             " qk=%" G_GINT64_FORMAT " v=%" G_GINT64_FORMAT,
                             l->q_lora_rank, l->kv_lora_rank, l->qk_inner / l->heads,
                             l->inner / l->heads);
    if (l->rotary)
      g_string_append(s, " rotary");
    if (l->gated)
      g_string_append(s, " gated");
    if (l->vocab > 0)
      g_string_append_printf(s, " vocab=%" G_GINT64_FORMAT "%s", l->vocab, l->tied ? " tied" : "");
    if (l->experts > 0)
      g_string_append_printf(s, " experts=%" G_GINT64_FORMAT " top_k=%" G_GINT64_FORMAT, l->experts,
                             l->top_k);
    if (l->capacity_factor > 0) {
      char c[G_ASCII_DTOSTR_BUF_SIZE];
      g_string_append_printf(s, " capacity=%s",
                             g_ascii_formatd(c, sizeof c, "%g", l->capacity_factor));
    }
    if (l->vocab_divisible_by > 1)
      g_string_append_printf(s, " vocab_divisible_by=%" G_GINT64_FORMAT, l->vocab_divisible_by);
  }
  return g_string_free(s, FALSE);
}

char *ts_model_describe(const ts_model *m)
{
  g_return_val_if_fail(m != NULL, NULL);
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "# model: %s (%s, %s, dtype_bytes=", m->name, m->path, m->kind);
  ts_append_g(s, 6, m->dtype_bytes);
  g_string_append(s, ")\n");
  g_string_append(s, "# index name kind tp params fwd_flops bwd_input_flops bwd_weight_flops "
                     "fwd_mem_bytes bwd_mem_bytes saved_act_bytes block input carry_elems shape\n");
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    g_string_append_printf(s, "%d %s %s %s ", i, l->name, ts_layer_kind_name(l->kind),
                           ts_tp_mode_name(l->tp));
    const double v[] = {l->params,        l->fwd_flops,     l->bwd_input_flops, l->bwd_weight_flops,
                        l->fwd_mem_bytes, l->bwd_mem_bytes, l->saved_act_bytes};
    for (size_t j = 0; j < G_N_ELEMENTS(v); j++) {
      ts_append_g(s, 6, v[j]);
      g_string_append_c(s, ' ');
    }
    /* The graph: block, the layer read as input ("data": the model input), and what a cut
     * after this layer carries besides its output. */
    g_string_append_printf(s, "%d %s ", l->block, l->src >= 0 ? m->layers[l->src].name : "data");
    ts_append_g(s, 6, l->carry_elems);
    g_string_append_c(s, ' ');
    g_autofree char *text = ts_layer_shape_text(l);
    g_string_append(s, text);
    g_string_append_c(s, '\n');
  }
  g_string_append(s, "# total params ");
  ts_append_g(s, 10, ts_model_params(m));
  if (m->published_params > 0.0) {
    g_string_append(s, " (published ");
    ts_append_g(s, 6, m->published_params);
    g_string_append(s, ")");
  }
  g_string_append(s, ", train_flops_per_sample ");
  ts_append_g(s, 6, ts_model_train_flops_per_sample(m));
  g_string_append(s, ", saved_act_bytes_per_sample ");
  ts_append_g(s, 6, ts_model_saved_act_bytes_per_sample(m));
  g_string_append_c(s, '\n');
  return g_string_free(s, FALSE);
}
