/* ts_model: a network as an ordered list of layers, with per-layer parameters, FLOPs, memory
 * traffic and activation sizes derived from shapes (explicit lists or generated from
 * hyperparameters). */
#ifndef TS_MODEL_H
#define TS_MODEL_H

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  TS_LAYER_DENSE,     /* fully connected: in -> out features, applied to `tokens` vectors */
  TS_LAYER_CONV2D,    /* 2D convolution, grouped when groups > 1 (depthwise: groups = channels) */
  TS_LAYER_ATTENTION, /* attention sublayer: QKV projection, scores, softmax, context, output
                         projection; self-attention, or cross-attention over kv_tokens vectors
                         of an encoder */
  TS_LAYER_EMBEDDING, /* token (+ optional learned position) embedding lookup */
  TS_LAYER_NORM,      /* layer norm / batch norm: 2 parameters per feature */
  TS_LAYER_POOL,      /* max / average pooling, no parameters */
} ts_layer_kind;

/**
 * How tensor (model) parallelism splits the layer, after Megatron-LM (Shoeybi et al. 2019,
 * section 3) for transformers and output-channel splitting for other layers.
 */
typedef enum {
  TS_TP_REPLICATED, /* every member computes the whole layer (norms, pooling) */
  TS_TP_COLUMN,     /* weights split by output feature/channel: input replicated, output split */
  TS_TP_ROW,        /* weights split by input feature: input split, output partial sums */
  TS_TP_HEADS,      /* attention split by heads: column QKV + row output projection */
  TS_TP_VOCAB,      /* embedding or logits split by vocabulary rows */
} ts_tp_mode;

/**
 * How attention keeps what its backward needs. FLASH (the default of every model file): a fused
 * kernel (FlashAttention, Dao et al. 2022, section 3.1) keeps Q, K, V, the output and the
 * softmax statistics (one fp32 log-sum-exp per query and head), never the T x S scores, the
 * softmax or its dropout mask (regenerated from the RNG state). UNFUSED: the scores path as
 * separate kernels, keeping the softmax output, its dropout mask and the dropout output
 * (Korthikanti et al. 2022, section 4.1: 5as^2b bytes per layer in 16-bit with dropout).
 */
typedef enum { TS_ATTN_UNFUSED, TS_ATTN_FLASH } ts_attention;

/** The optimizer a model trains with ([model] optimizer): Adam (the default; two fp32 moments)
 * or SGD with momentum (one fp32 velocity; He et al. 2016's ResNet recipe). */
typedef enum { TS_OPT_ADAM, TS_OPT_SGD } ts_optimizer;

/** One layer. Shapes as given; derived costs are per sample (one sequence or one image). */
typedef struct {
  char *name;
  ts_layer_kind kind;
  ts_tp_mode tp;
  /* Shape. Unused fields are 0. */
  gint64 in_features,
      out_features; /* dense; conv: channels; norm: features; attention/embedding: hidden */
  gint64 tokens;    /* vectors per sample the layer is applied to (sequence length; 1 for an MLP) */
  gint64 kernel_h, kernel_w, stride, padding; /* conv2d, pool (padding: of the height) */
  gint64 padding_w;                           /* conv2d, pool: of the width */
  gint64 groups;                              /* conv2d: channel groups (1: dense convolution) */
  gint64 in_h, in_w, out_h, out_w;            /* conv2d, pool, norm over a feature map */
  gint64 heads;                               /* attention */
  gint64 kv_tokens; /* attention: key/value vectors per sample (= tokens for self-attention;
                       the encoder's sequence for cross-attention) */
  gint64 inner;     /* attention: heads x per-head width (= in_features unless kv_channels) */
  gboolean cross;   /* attention: cross-attention (keys / values from an earlier layer's output) */
  /* The layer graph. Layers are listed in an order in which they can run (every input exists
   * before its reader); most read the previous layer's output, but a branch may start from an
   * earlier one, and residual adds, cross-attention and concatenations read earlier outputs
   * too. */
  int src; /* the layer whose output is this layer's main input; -1: the model's input */
  /* Elements per sample of earlier layers' outputs, other than this layer's own output, that
   * layers after it still read: what a pipeline cut right after this layer must send along
   * with the output (and their gradients back). A ResNet block's input on its way to the
   * residual add, an encoder-decoder's encoder output, an AmoebaNet cell's other inputs. 0 in
   * a chain. */
  double carry_elems;
  /* The block the layer belongs to (a residual block, a transformer layer, a cell), numbered
   * from 0 in order; -1: a layer of its own (embedding, logits). Pipeline balancing cuts
   * between blocks, and full recomputation checkpoints a block's inputs. */
  int block;
  gint64 vocab; /* embedding, tied logits */
  gboolean bias;
  gboolean tied;    /* dense logits layer sharing the embedding's weights: 0 parameters */
  gboolean dropout; /* dropout on the output (and, in attention, on the softmax): masks kept */
  /* Derived, per sample. */
  double params;           /* trainable parameters (whole layer, unsplit) */
  double fwd_flops;        /* forward FLOPs (multiply-add = 2) */
  double bwd_input_flops;  /* backward FLOPs for the input gradient */
  double bwd_weight_flops; /* backward FLOPs for the weight gradient */
  double fwd_mem_bytes;    /* device memory traffic of the forward pass (roofline) */
  double bwd_mem_bytes;    /* device memory traffic of the backward pass */
  double in_act_elems;     /* input activation elements */
  double out_act_elems;    /* output activation elements */
  double saved_act_bytes;  /* activation bytes kept for the backward pass */
  /* Mixture of experts (0 for a dense layer): the layer is `experts` copies, each token goes
   * through `top_k` of them; params count every copy, FLOPs and activations top_k copies. */
  gint64 experts, top_k;
  /* Added for today's transformers (0 / FALSE: the layer as before). */
  gint64 kv_heads; /* attention: key/value heads (grouped-query; 1: multi-query; 0: = heads) */
  gint64 qk_inner; /* attention: heads x query/key width per head, when it differs from inner
                      (multi-head latent attention: nope + rope dims); 0: = inner */
  gboolean rotary; /* attention: rotary position embedding on Q and K (Su et al. 2021) */
  /* Multi-head latent attention (DeepSeek-V2, Liu et al. 2024, section 2.1): queries and
   * keys/values go through low-rank latents (q_lora_rank 0: a full query projection), with a
   * decoupled rotary key of qk_rope_dim shared by all heads. kv_lora_rank 0: not MLA. */
  gint64 q_lora_rank, kv_lora_rank, qk_rope_dim;
  gboolean gated; /* dense: a gated MLP's fc1 (SwiGLU / GeGLU, Shazeer 2020): out_features = 2 x
                     the width the next layer reads (gate and up projections side by side, as
                     Megatron-LM's linear_fc1); out_act_elems is after the gating */
  double capacity_factor;    /* experts: tokens each expert takes, x the balanced share;
                                0: dropless (every routed token copy computed) */
  gint64 vocab_divisible_by; /* embedding / logits: the vocabulary is padded to a multiple of
                                this x tp as Megatron-LM does (0 or 1: no padding) */
  double active_params;      /* parameters one token goes through: params, but for an expert
                                layer top_k experts' worth (and the gate) */
  /* Added with issue 10. */
  ts_attention attention; /* attention: how its activations are kept (0 = unfused) */
  /* Added with issue 10 (element-wise kernels, ts_elementwise.h). */
  gboolean residual; /* the layer adds its output to an earlier one (a residual connection) */
  gboolean rms;      /* norm: RMS norm (scale only) */
  /* Added with issue 10 (long sequences). Attention: causal self-attention, each query sees
   * the keys up to its own position (a decoder's; an encoder's and cross-attention are not).
   * A fused kernel skips the key tiles above the diagonal (ts_cost.c). */
  gboolean causal;
  /* Added with issue 10 (CNN training). A norm over a feature map (batch norm: statistics over
   * the batch and the map, a pass of its own before normalising) and, for one, whether a ReLU
   * follows it (ResNet's BN + ReLU; ts_elementwise.c costs it as its own kernel when eager). */
  gboolean batch_norm;
  gboolean relu;
} ts_layer;

/** A model. Owns its layers. */
typedef struct {
  char *name;
  char *path;
  char *kind;         /* "layers", "transformer", "resnet" */
  double dtype_bytes; /* bytes per element of weights / activations in compute (2 for bf16) */
  int nlayers;
  ts_layer *layers;
  /* Transformer hyperparameters (0 for other kinds), kept for published-formula checks. */
  gint64 t_layers, t_hidden, t_heads, t_seq, t_vocab, t_ffn;
  gint64 t_experts, t_moe_every, t_top_k; /* mixture of experts (0 experts: dense) */
  gint64 t_dec_layers, t_dec_seq;         /* encoder-decoder: decoder blocks and tokens (0: none) */
  gint64 t_kv_heads; /* key/value heads (= t_heads without grouped-query attention) */
  gint64 t_moe_ffn;  /* expert MLP width (= t_ffn unless fine-grained) */
  gint64 t_shared_experts, t_first_dense; /* shared experts; leading dense blocks */
  double published_params;                /* [model] published_params, 0 when not given */
  gint64 sample_elems; /* input elements per sample (tokens or pixels), for data loading */
  /* Added with issue 10. */
  ts_attention attention; /* [model] attention: flash (default) or unfused */
  /* Added with issue 10 (CNN training). */
  ts_optimizer optimizer; /* [model] optimizer: adam (default) or sgd (with momentum) */
  gboolean fp16;          /* [model] dtype = fp16 (not bf16): mixed precision with loss scaling */
} ts_model;

/**
 * The activation bytes a layer keeps per sample, split by where they lie across a
 * tensor-parallel group: its input (kept in the state it was consumed in), what its own
 * computation produces (split like its work), a dropout mask on an output a collective has
 * already summed (lies like the output), and, for attention only, the part that depends on how
 * attention runs (`scores`: unfused, the softmax output, its dropout mask and the dropout output;
 * flash, the softmax statistics). Selective recomputation drops `scores`. saved_act_bytes =
 * in + inner + mask + scores with the layer's own attention.
 */
typedef struct {
  double in, inner, mask, scores;
} ts_act_parts;

/** The parts of layer l's kept activations (per sample) with attention run as `attn` (for an
 * attention layer; other layers ignore it). */
void ts_layer_act_parts(const ts_model *m, const ts_layer *l, ts_attention attn, ts_act_parts *out);

/** The precision (ts_precision) a layer's GEMMs and its other work run in when `requested` is
 * asked for (FP8: Transformer Engine's recipe; docs/models.md, "Precision"). */
void ts_layer_precision(const ts_layer *l, int requested, int *gemm, int *other);

/** The parts of layer l's kept activations per sample as the planner keeps them: those of
 * ts_layer_act_parts, and with fp8_saved (precision=fp8 run by Transformer Engine, which saves
 * each FP8 GEMM's input in FP8) an FP8 GEMM's input at one byte an element and the output
 * projection's FP8 copy of the attention output. The one formula `trainsim model --precision`
 * and the planner's memory use. */
void ts_layer_saved_parts(const ts_model *m, const ts_layer *l, ts_attention attn,
                          gboolean fp8_saved, ts_act_parts *out);

/** in + inner + mask + scores of ts_layer_saved_parts with the layer's own attention:
 * saved_act_bytes, or what the layer keeps under Transformer Engine's FP8 (fp8_saved). */
double ts_layer_saved_bytes(const ts_model *m, const ts_layer *l, gboolean fp8_saved);

/** "flash" or "unfused". */
const char *ts_attention_name(ts_attention a);

/** Reads a model file; errors name the file and the [group] key. */
ts_model *ts_model_load(const char *path, GError **error);

/** The same model as trained in fp32 whatever its [model] dtype says (split precision=fp32 on
 * a 16-bit model): activations, their traffic and the gradients 4 bytes an element. */
ts_model *ts_model_load_fp32(const char *path, GError **error);

void ts_model_free(ts_model *m);

/** Blocks (residual blocks, transformer layers, cells): the largest layer block + 1, 0 when
 * no layer is in one. */
int ts_model_blocks(const ts_model *m);

/** Total trainable parameters. */
double ts_model_params(const ts_model *m);

/** Parameters one token goes through: every parameter except the experts it is not routed to
 * (top_k of experts per MoE layer). Equals ts_model_params for a dense model. */
double ts_model_active_params(const ts_model *m);

/** Forward + backward FLOPs per sample (no recomputation). */
double ts_model_train_flops_per_sample(const ts_model *m);

/** Forward FLOPs per sample. */
double ts_model_fwd_flops_per_sample(const ts_model *m);

/** Activation bytes kept for the backward pass per sample, summed over layers (no recomputation).
 */
double ts_model_saved_act_bytes_per_sample(const ts_model *m);

/**
 * Bytes of weights a layer reads in one forward pass: its parameters, or for a tied logits
 * layer the shared embedding table (it owns no parameters but multiplies by them). Embedding
 * lookups return 0: the rows they read are per-sample traffic.
 */
double ts_layer_weight_bytes(const ts_model *m, const ts_layer *l);

/**
 * Device memory traffic of the forward (backward) pass of a micro-batch of `samples` samples:
 * weights once, activations per sample. The ts_layer fields fwd_mem_bytes / bwd_mem_bytes are
 * this for samples = 1; do not multiply them by a batch size (weights would count per sample).
 */
double ts_layer_fwd_mem_bytes_batch(const ts_model *m, const ts_layer *l, double samples);
double ts_layer_bwd_mem_bytes_batch(const ts_model *m, const ts_layer *l, double samples);

/** A per-layer table of shapes and derived costs, one line per layer, for `trainsim`
 * reports and debugging. Caller frees. */
char *ts_model_describe(const ts_model *m);

/** A layer's shape in one short line: "CxHxW kKHxKW/S -> CxHxW" for feature maps, "T x IN ->
 * OUT" for vectors, with heads, vocabulary, groups and experts where they apply. Caller
 * frees. */
char *ts_layer_shape_text(const ts_layer *l);

/** Layer kind name ("dense", "conv2d", ...). */
const char *ts_layer_kind_name(ts_layer_kind k);

/** Tensor-parallel mode name ("column", "row", ...). */
const char *ts_tp_mode_name(ts_tp_mode t);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_model, ts_model_free)

G_END_DECLS

#endif
