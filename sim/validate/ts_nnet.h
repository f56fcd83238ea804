/* ts_nnet: small real networks (an MLP, a CNN, a transformer block) with forward and backward
 * passes on synthetic data drawn from a seed, in fp32 or fp64, built on ts_numeric kernels.
 *
 * They are the ground truth of split validation: a split must reproduce the gradients one
 * processor computes here. Losses and gradients of a batch range [b0, b1) are normalised by
 * the WHOLE batch, so the ranges of a data-parallel split add up to the full-batch values. */
#ifndef TS_NNET_H
#define TS_NNET_H

#include "ts_numeric.h"
#include <glib.h>

G_BEGIN_DECLS

typedef enum { TS_NNET_MLP, TS_NNET_CNN, TS_NNET_TRANSFORMER, TS_NNET_NKINDS } ts_nnet_kind;

/** Sizes of a small network. Fields a kind does not use are ignored. */
typedef struct {
  ts_nnet_kind kind;
  int batch;   /* samples (sequences for the transformer) */
  int classes; /* output classes of the softmax cross-entropy */
  /* MLP: in -> dense -> ReLU -> dense -> ReLU -> dense -> classes (hidden wide). */
  int in, hidden;
  /* CNN: [channels][height][width] -> conv (filters, kernel x kernel, same padding) -> ReLU ->
   * conv (filters) -> ReLU -> 2x2 max pool -> dense -> classes. height, width even. */
  int channels, height, width, filters, kernel;
  /* Transformer block (pre-LN, as GPT-2): x + Attn(LN(x)), then h + MLP(LN(h)) with a GELU
   * MLP of width dff, then a dense head to classes on every token. dmodel % heads == 0. */
  int seq, dmodel, heads, dff;
  gboolean causal;
  guint64 seed;    /* parameters and data are drawn from this seed */
  gboolean rotary; /* transformer: rotary embedding on Q and K after the projection (Su et al.
                      2021; ts_rope) */
  gboolean gated;  /* transformer: a SwiGLU MLP (Shazeer 2020): W1 is dmodel x 2 dff (gate, then
                      up), GELU replaced by silu(gate) * up */
  int kv_heads;    /* transformer: key/value heads, dividing heads (grouped-query attention,
                      Ainslie et al. 2023; Q, K, V fused as [heads | kv_heads | kv_heads] heads);
                      0: heads (multi-head attention) */
} ts_nnet_config;

/** One parameter tensor. Matrices are [rows][cols] with y = x W (rows = fan-in). */
typedef struct {
  const char *name; /* "fc1.w", "attn.wqkv", ... */
  gint64 rows, cols;
  gint64 numel;
} ts_nnet_tensor_info;

typedef struct ts_nnet ts_nnet;

/** Transformer: width of the fused Q, K, V projection, dmodel + 2 kv_heads dmodel / heads. */
int ts_nnet_qkv_width(const ts_nnet_config *c);

/** Fills a tiny default configuration of a kind (what the tests check by finite differences). */
void ts_nnet_config_default(ts_nnet_kind kind, ts_nnet_config *out);

/** Checks a configuration; the error names the field, its value and what was expected. */
gboolean ts_nnet_config_check(const ts_nnet_config *c, GError **error);

/** Builds a network with parameters and data drawn from c->seed (the same values, rounded, in
 *  either precision). Caller frees with ts_nnet_free. NULL with an error on a bad config. */
ts_nnet *ts_nnet_new(const ts_nnet_config *c, ts_prec prec, GError **error);
void ts_nnet_free(ts_nnet *net);

ts_prec ts_nnet_prec(const ts_nnet *net);
const ts_nnet_config *ts_nnet_config_of(const ts_nnet *net);
int ts_nnet_ntensors(const ts_nnet *net);
/** Borrowed; valid while net lives. */
const ts_nnet_tensor_info *ts_nnet_tensor(const ts_nnet *net, int i);
/** Total parameter count. */
gint64 ts_nnet_nparams(const ts_nnet *net);

typedef enum { TS_NNET_PARAM, TS_NNET_GRAD } ts_nnet_buf;

/** Raw parameter or gradient storage of tensor i (float * or double * per precision). */
void *ts_nnet_data(ts_nnet *net, int i, ts_nnet_buf which);
/** Copies tensor i's parameters or gradients out as doubles (numel of them). */
void ts_nnet_get(const ts_nnet *net, int i, ts_nnet_buf which, double *out);
/** Sets tensor i's parameters or gradients from doubles (rounded to fp32 if need be). */
void ts_nnet_set(ts_nnet *net, int i, ts_nnet_buf which, const double *in);

/** Zeroes every gradient. */
void ts_nnet_zero_grad(ts_nnet *net);

/** Loss of samples [b0, b1) divided by the full batch count (mean cross-entropy over samples,
 *  or over tokens for the transformer). No gradients. */
double ts_nnet_forward(ts_nnet *net, int b0, int b1);

/** As ts_nnet_forward, then the backward pass: ACCUMULATES the gradients of that loss. */
double ts_nnet_forward_backward(ts_nnet *net, int b0, int b1);

/** SGD (ts_sgd_step) on every tensor with its own velocity state. */
void ts_nnet_sgd(ts_nnet *net, double lr, double momentum, double weight_decay);
/** Adam (ts_adam_step) on every tensor; the step counter is kept per network. */
void ts_nnet_adam(ts_nnet *net, const ts_adam *hp);

const char *ts_nnet_kind_name(ts_nnet_kind k);
/** Parses "mlp", "cnn", "transformer"; -1 if unknown. */
int ts_nnet_kind_parse(const char *s);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_nnet, ts_nnet_free)

G_END_DECLS

#endif
