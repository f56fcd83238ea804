/* ts_validate_priv: what the split validator's files share and nothing else uses: the network
 * as the validator executes it, the kernel table of each precision, and the per-chip state
 * (parameter shards, activations with their layout across the tensor-parallel group). */
#ifndef TS_VALIDATE_PRIV_H
#define TS_VALIDATE_PRIV_H

#include "ts_nnet.h"
#include "ts_trace.h"
#include "ts_validate.h"

G_BEGIN_DECLS

/* VD_ACT_SWIGLU: a gated layer; its GEMM is twice out wide (gate, then up), the activation
 * halves it (silu(gate) * up). */
typedef enum { VD_ACT_NONE, VD_ACT_RELU, VD_ACT_GELU, VD_ACT_SWIGLU } vd_act;

/* The kernels of one precision, on untyped buffers (ts_validate_kern.h). */
typedef struct {
  gsize elem;
  void (*dense_fwd)(int rows, int k, int n, const void *x, const void *w, const void *b, void *y);
  void (*dense_dgrad)(int rows, int k, int n, const void *dy, const void *w, void *dx);
  void (*dense_wgrad)(int rows, int k, int n, const void *x, const void *dy, void *dw, void *db);
  void (*conv_fwd)(const ts_conv_shape *s, const void *x, const void *w, const void *b, void *y);
  void (*conv_bwd)(const ts_conv_shape *s, const void *x, const void *w, const void *dy, void *dx,
                   void *dw, void *db);
  void (*bias_add)(int n, int c, int hw, const void *bias, void *y);
  void (*bias_grad)(int n, int c, int hw, const void *dy, void *db);
  void (*act_fwd)(vd_act a, gint64 n, const void *z, void *y);
  void (*act_bwd)(vd_act a, gint64 n, const void *z, const void *dy, void *dz);
  void (*axpy)(gint64 n, double alpha, const void *x, void *y);
  void (*swiglu_fwd)(int rows, int f, const void *x, void *y);
  void (*rope)(int b, int t, int heads, int dh, void *x, int ld, gboolean inverse);
  void (*swiglu_bwd)(int rows, int f, const void *x, const void *dy, void *dx);
  void (*layernorm_fwd)(int rows, int cols, const void *x, const void *gamma, const void *beta,
                        void *y, void *mean, void *rstd);
  void (*layernorm_bwd)(int rows, int cols, const void *x, const void *gamma, const void *mean,
                        const void *rstd, const void *dy, void *dx, void *dgamma, void *dbeta);
  /* Attention over `heads` local query heads and kv local key/value heads (kv = heads:
   * multi-head; fewer: grouped-query) on a fused local QKV [rows][(heads + 2 kv) dh]. */
  void (*attn_fwd)(int b, int t, int heads, int kv, int dh, gboolean causal, const void *qkv,
                   void *p, void *out);
  void (*attn_bwd)(int b, int t, int heads, int kv, int dh, const void *qkv, const void *p,
                   const void *dout, void *dqkv);
  /* Ring attention blocks (context parallelism): ts_validate_kern.h. */
  void (*cp_block_fwd)(int b, int tq, int tk, int heads, int kv, int dh, int ldq, const void *qkv,
                       const void *kv_block, const int *qpos, const int *kpos, void *m, void *l,
                       void *acc);
  void (*cp_finish)(int b, int tq, int heads, int dh, const void *m, const void *l, const void *acc,
                    void *out, void *lse);
  void (*cp_block_bwd)(int b, int tq, int tk, int heads, int kv, int dh, int ldq, const void *qkv,
                       const void *kv_block, const int *qpos, const int *kpos, const void *lse,
                       const void *dsum, const void *dout, void *dq, void *dkv);
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
  int kv_heads;          /* attention: key/value heads (= heads unless grouped-query) */
  gboolean rotary;       /* attention: rotary embedding on Q and K (ts_rope) */
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

/* How a value lies across the tensor-parallel group. A value is a box of its activation's
 * [samples][tokens][features][inner] array: whole, or member r's block of one dimension. */
typedef enum {
  VD_FULL,    /* whole on every member */
  VD_FEAT,    /* member r holds feature (channel) block r of T */
  VD_SEQ,     /* member r holds token block r of every sample (sequence parallelism) */
  VD_BATCH,   /* member r holds sample block r (a layer using the tp axis as data parallelism) */
  VD_PARTIAL, /* whole shape, but each member holds a partial sum */
  VD_FLAT,    /* member r holds flat chunk r of T (Megatron's pipeline scatter/gather) */
} vd_layout;

const char *vd_layout_name(vd_layout l);

typedef struct {
  void *data; /* owned */
  gint64 n;   /* elements held */
  vd_layout layout;
  int epilogue;        /* layer whose bias / activation / residual is still to apply, or -1 */
  gboolean set;        /* produced in this step */
  gboolean collective; /* a collective acted on it */
  gboolean read;       /* a later op consumed it */
  int coll_label;      /* trace label of the last collective that acted on it, or -1 */
  vd_layout orig;      /* layout its producer gave it (before any collective) */
  void *pre;           /* the block held before an all-gather made it whole (re-gathers) */
  gint64 pre_n;
  vd_layout pre_layout;
} vd_val;

/* What one layer kept from its forward pass for one micro-batch. */
typedef struct {
  void *x;             /* input as the layer used it (a block when it was sliced) */
  gboolean sliced;     /* a whole input sliced to this member's block */
  vd_layout work;      /* layout the layer computed in (its input as used) */
  vd_layout in_orig;   /* layout its input had from its producer (before any collective) */
  void *z;             /* pre-activation output, as held after the epilogue */
  void *qkv, *p, *att; /* attention */
  void *mean, *rstd;   /* layer norm */
  gint32 *argmax;      /* max pooling */
  void *dz;            /* backward: gradient of the pre-activation (input grad -> weight grad) */
  void *dqkv;          /* attention backward: gradient of the fused QKV projection */
  gboolean fwd_done, dgrad_done, wgrad_done;
  gboolean stale;   /* dropped for full recomputation, not recomputed yet */
  gboolean p_stale; /* attention probabilities dropped (selective recomputation) */
  gboolean x_stale; /* input dropped, to be re-gathered for the weight gradient */
  /* Context parallelism (ring attention), per pass (0 forward, 1 backward, 2 recomputed
   * forward): the K/V blocks by
   * ring step ([0] this chip's own, [j] the one received at step j - 1), sends, receives and
   * blocks done; forward: running maxima, sums and outputs, then the log-sum-exp; backward:
   * the gradient of the attention output, rowsum(dO o O), dQ, and the partial K/V gradients by
   * step ([j] received for step j, [C] this chip's own, complete). */
  int cp_len;      /* C + 1: entries of the arrays below */
  void **cp_kv[3]; /* [2]: the ring of a recomputed forward (recompute=full, stage) */
  int cp_sent[3], cp_recvd[3], cp_blocks[3];
  gint64 cp_kv_n;
  void *cp_m, *cp_l, *cp_acc, *cp_lse, *cp_dsum, *cp_dq;
  void **cp_dkv;  /* partial K/V gradients received, by the step they are for */
  void **cp_dout; /* partial K/V gradients after the block of each step, to send */
  int cp_dsent, cp_drecvd;
} vd_saved;

typedef struct {
  int rank, tp, dp, pp; /* chip and its coordinates on the tp, dp and pp axes */
  int cp;               /* its place on the context-parallel ring (0 without cp) */
  int ntensors;
  gint64 *n;                     /* elements held per tensor (its tensor-parallel shard) */
  gint64 **shard;                /* index map per tensor (NULL: whole) */
  void **w, **g, **gs, **m, **v; /* parameters, local gradients, synchronised gradients, state */
  gboolean *synced;              /* gs holds a synchronised sum */
  void **gp;                     /* hybrid sharding: the owned shard a reduce-scatter inside the
                                    sharding group summed, waiting for its all-reduce across the
                                    replicas (which adds it to gs) */
  int sh;                        /* owner index: coordinate in the sharding group (dp when not
                                    hybrid) */
  gint64 *own_lo, *own_hi;       /* per tensor: elements this chip owns (ZeRO, servers) */
  gboolean *own_tp;              /* per layer: owned over dp and tp (its gradient was
                                    reduce-scattered over both), else over dp */
  gboolean *tp_summed;           /* per layer: its local gradient was summed over tp alone
                                    (ZeRO: before the data-parallel reduce-scatter) */
  gboolean *holds;               /* per layer: on this chip's pipeline stage */
  gboolean *materialized;        /* per layer: parameters whole (ZeRO-3 gathers them) */
  int adam_step;
  /* [micro * nlayers + layer] */
  vd_val *y, *dx, *dr, *dy;
  vd_saved *s;
  vd_val *a0; /* [micro]: the input samples */
  vd_val *ga; /* [micro * (nlayers + 1) + k]: gradient of A_k received from another stage */
  double loss;
  double trace_bytes, sent_bytes;
} vd_rank;

/* The execution of one trace. */
typedef struct {
  const vd_net *net;
  const vd_kern *k;
  ts_prec prec;
  const ts_topo *topo;
  const ts_trace *tr;
  const ts_plan *plan;
  int T, D, P;     /* tp, dp, pp degrees */
  int C;           /* cp degree: every layer holds tokens / C of each sequence (zig-zag) */
  int S;           /* ranks parameters are sharded over: the sharding group (shard=S), else D */
  int ax_shard;    /* trace axis of the sharding group (hybrid sharding), or -1 */
  int ax[TS_AX_N]; /* trace axis of each kind */
  int nmicro, mb;  /* micro-batches per replica and samples in each */
  gint64 batch;    /* global */
  int nranks;
  vd_rank *ranks;
  const double *x; /* whole batch of inputs (double) */
  const int *labels;
  gboolean *drop_x;   /* per layer: the input is re-gathered for the weight gradient */
  gboolean *drop_p;   /* per layer: attention probabilities are recomputed (selective) */
  gboolean *drop_all; /* per layer: the forward is re-run before backward (full recompute; with
                        stage:except-last not the step's last micro-batch) */
  int *stage;         /* per layer: pipeline device holding it */
  gboolean *dpmode;   /* per layer: replicated, the tp axis splits its batch (per-layer hybrid) */
  vd_layout *work;    /* per layer: layout its forward computed in (first seen) */
  gboolean owners;    /* parameters and gradients have owners over dp (ZeRO, servers) */
  int zero;           /* ZeRO stage */
  GPtrArray *notes;   /* char* */
  GHashTable *noted;  /* note keys already given */
} vd_exec;

/* Notes a finding once per key (printf-style message). */
G_GNUC_PRINTF(3, 4) void vd_note(vd_exec *e, const char *key, const char *fmt, ...);

/* Geometry of activation A_k for one micro-batch (k = 0: the data; else layer k-1's output):
 * dims[0..3] = samples, tokens, features, inner (NCHW: tokens 1, channels, h*w). */
void vd_act_dims(const vd_exec *e, int k, gint64 *dims);

/* Member r's box of a layout: lo[d], hi[d] per dimension; returns the element count. */
gint64 vd_box(const gint64 *dims, vd_layout l, int T, int r, gint64 *lo, gint64 *hi);

/* Copies the elements of region [rlo, rhi) from src (holding box [slo, shi)) to dst (holding
 * box [dlo, dhi)); the region lies in both. */
void vd_box_copy(const vd_kern *k, const void *src, const gint64 *slo, const gint64 *shi, void *dst,
                 const gint64 *dlo, const gint64 *dhi, const gint64 *rlo, const gint64 *rhi);

/* Member r's block (layout l) of a whole value; caller frees. */
void *vd_slice_box(const vd_exec *e, const void *full, const gint64 *dims, vd_layout l, int r);

/* The layer ops, on one chip, for micro-batch u. FALSE with a one-line reason in *why (caller
 * frees) when the chip's values cannot be used as the layer needs (e.g. a block where the
 * whole tensor is needed: a missing all-gather). `phase`: 0 the whole backward pass, 1 its
 * input gradient, 2 its weight gradient. */
gboolean vd_layer_fwd(vd_exec *e, vd_rank *r, int layer, int u, gboolean recompute, char **why);
gboolean vd_layer_bwd(vd_exec *e, vd_rank *r, int layer, int u, int phase, char **why);
/* Selective recomputation: the attention probabilities again, from the kept Q, K, V. */
gboolean vd_attn_recompute(vd_exec *e, vd_rank *r, int layer, int u, char **why);
/* Applies a pending epilogue of layer i's output (micro u). */
gboolean vd_epilogue(vd_exec *e, vd_rank *r, int i, int u, char **why);
/* The gradient of layer i's output (micro u), prepared once (from the loss, received from the
 * next stage, or summed over its consumers); a residual's gradient is taken at that time. */
vd_val *vd_out_grad(vd_exec *e, vd_rank *r, int i, int u, char **why);
/* The gradient of A_k (k >= 1) summed over the consumers on this chip, as a new value
 * (pipeline: what a stage sends back). NULL with *why. */
gboolean vd_act_grad(vd_exec *e, vd_rank *r, int k, int u, vd_val *out, char **why);
/* Activation A_k of micro-batch u (epilogue applied), marked read; NULL with *why. */
vd_val *vd_act_read(vd_exec *e, vd_rank *r, int k, int u, const char *reader, char **why);

void vd_val_set(vd_val *v, void *data, gint64 n, vd_layout layout);
/* The layout layer i computes in given an input in layout `in` (FALSE when it cannot). */
vd_layout vd_layer_want(const vd_exec *e, int i, vd_layout in);
gboolean vd_layer_split(const vd_exec *e, int i);
void vd_val_clear(vd_val *v);

/* Frees the activations and saved state of every micro-batch of a chip. */
void vd_rank_clear_acts(vd_exec *e, vd_rank *r);

/* Context parallelism: the place in the whole sequence of local token t of cp rank c
 * (chunks c and 2C - 1 - c of 2C). */
int vd_cp_pos(const vd_exec *e, int c, int t, int tokens);
/* A ring step of layer i's attention (micro u): pass 0 forward, 1 backward, 2 recomputed
 * forward. */
gboolean vd_cp_block(vd_exec *e, vd_rank *r, int i, int u, int pass, char **why);
/* The buffer a ring send carries (dkv: a partial K/V gradient, else a K/V block), borrowed;
 * NULL with *why. */
const void *vd_cp_send(vd_exec *e, vd_rank *r, int i, int u, int pass, gboolean dkv, gint64 *n,
                       char **why);
/* A ring receive delivers data (taken) of n elements. */
gboolean vd_cp_recv(vd_exec *e, vd_rank *r, int i, int u, int pass, gboolean dkv, void *data,
                    gint64 n, char **why);

/* ---- mixtures of experts (ts_validate_moe.c) ------------------------------------------- */

/* The model has an expert layer (validated by vd_moe_run, not the layer walk). */
gboolean vd_moe_model(const ts_model *m);
/* ts_validate_run for the mixture-of-experts validation network (models/validate-moe.ini). */
ts_validate_result *vd_moe_run(const ts_model *m, const ts_topo *t, const ts_split *s,
                               const ts_validate_options *o, GError **error);

/* The reference's gradients at the initial parameters (seed, batch) against central finite
 * differences of its loss, fp64: the largest normwise relative error over the tensors, and the
 * token copies the capacity dropped (tests/test_validate.c). */
gboolean vd_moe_fd_check(const ts_model *m, guint64 seed, gint64 batch, double *max_rel_err,
                         int *dropped, GError **error);

/* ---- walking a trace (ts_validate_exec.c) -------------------------------------------- */

typedef struct vd_run vd_run;

/* Reads the meaning of every op from its label, drops the ops and dependencies the options
 * name, and resolves and checks every collective's algorithm: an error here is bad input. The
 * trace is modified (drops) and borrowed. */
vd_run *vd_run_new(vd_exec *e, ts_trace *tr, const ts_model *m, const ts_validate_options *o,
                   GError **error);
void vd_run_free(vd_run *run);
/* One training step: every rank's program in dependency order. FALSE when it stopped. */
gboolean vd_run_step(vd_run *run);
/* Why the step stopped (caller frees), or NULL. */
char *vd_run_take_failure(vd_run *run);
/* "ring, torus": the algorithms executed. Caller frees. */
char *vd_run_algorithms(const vd_run *run);
void vd_run_counts(const vd_run *run, gint64 *compute, gint64 *coll, gint64 *p2p);
/* Findings of the trace as a whole (e.g. values a collective moved that nothing read). */
void vd_run_note_unread(vd_run *run);

G_END_DECLS

#endif
