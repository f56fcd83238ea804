/* ts_validate_priv: what the split validator's files share and nothing else uses: the network
 * as the validator executes it, the kernel table of each precision, and the per-chip state
 * (parameter shards, activations with their layout across the tensor-parallel group). */
#ifndef TS_VALIDATE_PRIV_H
#define TS_VALIDATE_PRIV_H

#include "ts_nnet.h"
#include "ts_trace.h"
#include "ts_validate.h"

G_BEGIN_DECLS

typedef enum { VD_ACT_NONE, VD_ACT_RELU, VD_ACT_GELU } vd_act;

/* The kernels of one precision, on untyped buffers (ts_validate_kern.h). */
typedef struct {
  gsize elem;
  void (*dense_fwd)(int rows, int k, int n, const void *x, const void *w, const void *b, void *y);
  void (*dense_bwd)(int rows, int k, int n, const void *x, const void *w, const void *dy, void *dx,
                    void *dw, void *db);
  void (*conv_fwd)(const ts_conv_shape *s, const void *x, const void *w, const void *b, void *y);
  void (*conv_bwd)(const ts_conv_shape *s, const void *x, const void *w, const void *dy, void *dx,
                   void *dw, void *db);
  void (*bias_add)(int n, int c, int hw, const void *bias, void *y);
  void (*bias_grad)(int n, int c, int hw, const void *dy, void *db);
  void (*act_fwd)(vd_act a, gint64 n, const void *z, void *y);
  void (*act_bwd)(vd_act a, gint64 n, const void *z, const void *dy, void *dz);
  void (*axpy)(gint64 n, double alpha, const void *x, void *y);
  void (*layernorm_fwd)(int rows, int cols, const void *x, const void *gamma, const void *beta,
                        void *y, void *mean, void *rstd);
  void (*layernorm_bwd)(int rows, int cols, const void *x, const void *gamma, const void *mean,
                        const void *rstd, const void *dy, void *dx, void *dgamma, void *dbeta);
  void (*attn_fwd)(int b, int t, int heads, int dh, gboolean causal, const void *qkv, void *p,
                   void *out);
  void (*attn_bwd)(int b, int t, int heads, int dh, const void *qkv, const void *p,
                   const void *dout, void *dqkv);
  void (*maxpool_fwd)(int planes, int h, int w, int k, const void *x, void *y, gint32 *argmax);
  void (*maxpool_bwd)(int planes, int h, int w, int k, const void *dy, const gint32 *argmax,
                      void *dx);
  double (*xent_fwd)(int rows, int cols, const void *logits, const int *labels, void *prob);
  void (*xent_bwd)(int rows, int cols, const void *prob, const int *labels, double scale,
                   void *dlogits);
  void (*sgd)(gint64 n, double lr, double momentum, double wd, void *w, const void *g, void *vel);
  void (*adam)(gint64 n, const ts_adam *hp, int step, void *w, const void *g, void *m, void *v);
  double (*get)(const void *buf, gint64 i);
  void (*set)(void *buf, gint64 i, double v);
} vd_kern;

const vd_kern *vd_kern_of(ts_prec prec);

/* A layer as the validator runs it: the model's layer plus what ts_layer does not carry
 * (activation, residual, loss), read from the model file. */
typedef struct {
  const ts_layer *l; /* borrowed from the model */
  char *name;
  ts_layer_kind kind;
  ts_tp_mode tp;
  vd_act act;
  gboolean bias, residual, loss;
  int res_from; /* activation index k (A_k, the input of layer k) a residual adds; -1 */
  /* Shapes, whole layer. dense: in -> out features on `tokens` vectors per sample; conv:
   * in -> out channels, in_h x in_w -> out_h x out_w; pool: channels; norm and attention:
   * in = out = features, `tokens` vectors. */
  int tokens, in, out, in_h, in_w, out_h, out_w, kernel, stride, pad, heads;
  int tensor0, ntensors; /* this layer's parameter tensors in vd_net.tensors */
} vd_layer;

/* Roles of parameter tensors (how tensor parallelism shards them). */
typedef enum {
  VD_T_W,     /* dense [in][out] or conv [out][in*k*k] */
  VD_T_B,     /* bias of a dense or conv layer */
  VD_T_GAMMA, /* layer-norm gain */
  VD_T_BETA,  /* layer-norm shift */
  VD_T_WQKV,  /* attention [d][3d]: Q, K, V column blocks */
  VD_T_BQKV,
  VD_T_WO, /* attention output projection [d][d] */
  VD_T_BO,
} vd_role;

typedef struct {
  char *name;
  vd_role role;
  int layer;
  gint64 rows, cols, numel;
} vd_tensor;

typedef struct {
  const ts_model *m; /* borrowed */
  int nlayers;
  vd_layer *layers;
  int ntensors;
  vd_tensor *tensors;
  ts_nnet_config cfg; /* the reference network this model is */
  gboolean causal;
  int classes;
  int label_tokens; /* labels per sample (1, or tokens for the transformer) */
  gint64 x_per_sample;
} vd_net;

/* Builds the validator's view of a model and the matching reference configuration; an error
 * (TS_ERROR_INPUT) names the model file and what does not match a validation network. */
vd_net *vd_net_new(const ts_model *m, GError **error);
void vd_net_free(vd_net *n);

/* Synthetic inputs and labels of the reference network (ts_nnet), whole batch, in double.
 * Caller frees both. */
void vd_net_data(const vd_net *n, double **x, int **labels);

/* Element indices (into the whole tensor) that tensor-parallel member r of T holds, in the
 * order the shard stores them; *n gets the count; NULL when the member holds the whole
 * tensor. Caller frees. */
gint64 *vd_tensor_shard(const vd_net *n, int tensor, int T, int r, gint64 *count);

/* ---- per-chip state ---------------------------------------------------------------- */

/* How a value lies across the tensor-parallel group. */
typedef enum {
  VD_FULL,    /* whole on every member */
  VD_FEAT,    /* member r holds feature (channel) block r of T */
  VD_PARTIAL, /* whole shape, but each member holds a partial sum */
} vd_layout;

typedef struct {
  void *data; /* owned */
  gint64 n;   /* elements held */
  vd_layout layout;
  int epilogue;        /* layer whose bias / activation / residual is still to apply, or -1 */
  gboolean set;        /* produced in this step */
  gboolean collective; /* a collective acted on it */
  gboolean read;       /* a later op consumed it */
  int coll_label;      /* trace label of the last collective that acted on it, or -1 */
} vd_val;

/* What one layer kept from its forward pass for one micro-batch. */
typedef struct {
  void *x;         /* input as the layer used it (a shard when it was sliced) */
  gboolean sliced; /* a whole input sliced to this member's block (row split) */
  void *z;         /* pre-activation output, as held after the epilogue */
  void *qkv, *p, *att; /* attention */
  void *mean, *rstd;   /* layer norm */
  gint32 *argmax;      /* max pooling */
  int fwd_done, bwd_done;
} vd_saved;

typedef struct {
  int rank, tp, dp, pp; /* chip and its coordinates on the tp, dp and pp axes */
  int ntensors;
  gint64 *n;      /* elements held per tensor */
  gint64 **shard; /* index map per tensor (NULL: whole) */
  void **w, **g, **gs, **m, **v; /* parameters, local gradients, synchronised gradients, state */
  gboolean *synced;              /* gs holds a synchronised sum */
  int adam_step;
  /* [micro * nlayers + layer] */
  vd_val *y, *dx, *dr;
  vd_saved *s;
  vd_val *a0; /* [micro]: the input samples */
  int *labels; /* [micro][mb * label_tokens] */
  double loss;
  int *label_seen; /* occurrences of each trace label in this step */
  double trace_bytes, sent_bytes;
} vd_rank;

/* The execution of one trace. */
typedef struct {
  const vd_net *net;
  const vd_kern *k;
  ts_prec prec;
  const ts_topo *topo;
  const ts_trace *tr;
  int T, D, P;        /* tp, dp, pp degrees */
  int ax[TS_AX_N];    /* trace axis of each kind */
  int nmicro, mb;     /* micro-batches per replica and samples in each */
  gint64 batch;       /* global */
  int nranks;
  vd_rank *ranks;
  const double *x;    /* whole batch of inputs (double) */
  const int *labels;
  GPtrArray *notes;   /* char* */
  GHashTable *noted;  /* note keys already given */
} vd_exec;

/* Notes a finding once per key (printf-style message). */
G_GNUC_PRINTF(3, 4) void vd_note(vd_exec *e, const char *key, const char *fmt, ...);

/* Geometry of activation A_k (k = 0: the data; else layer k-1's output): per sample, `outer`
 * rows of `f` features of `inner` elements (NCHW: outer 1, f channels, inner h*w). */
void vd_act_geom(const vd_net *n, int k, gint64 *outer, gint64 *f, gint64 *inner);

/* The layer ops, on one chip, for micro-batch u. FALSE with a one-line reason in *why (caller
 * frees) when the chip's values cannot be used as the layer needs (e.g. a shard where the
 * whole tensor is needed: a missing all-gather). */
gboolean vd_layer_fwd(vd_exec *e, vd_rank *r, int layer, int u, char **why);
gboolean vd_layer_bwd(vd_exec *e, vd_rank *r, int layer, int u, char **why);
/* Applies a pending epilogue of layer i's output (micro u). */
gboolean vd_epilogue(vd_exec *e, vd_rank *r, int i, int u, char **why);

/* Slices a whole value to member r's block of T along the geometry (outer, f, inner), or puts
 * the T blocks (in member order) back together. */
void *vd_slice(const vd_kern *k, const void *full, gint64 outer, gint64 f, gint64 inner, int T,
               int r);
void vd_unslice(const vd_kern *k, void *const *blocks, void *full, gint64 outer, gint64 f,
                gint64 inner, int T);

/* Frees the activations and saved state of every micro-batch of a chip. */
void vd_rank_clear_acts(vd_exec *e, vd_rank *r);

G_END_DECLS

#endif
