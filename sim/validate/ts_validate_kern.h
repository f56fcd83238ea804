/* ts_validate_kern: the layer kernels of the split validator written once for a real type;
 * ts_validate_layers.c includes this file once per precision (TS_R, TS_F defined) and gets a
 * vd_kern table of each. Every function works on the shard a chip holds: the shapes passed
 * are local ones. Built on ts_numeric, with the same call sequence as ts_nnet (GEMM, then the
 * bias) so that an unsplit layer rounds exactly as the reference does. */

static void TS_F(vk_dense_fwd)(int rows, int k, int n, const void *x, const void *w, const void *b,
                               void *y)
{
  TS_F(ts_gemm)(FALSE, FALSE, rows, n, k, 1, x, k, w, n, 0, y, n);
  if (b != NULL)
    TS_F(ts_bias_add)(rows, n, b, y);
}

/* dx = dy W^T: the input gradient. */
static void TS_F(vk_dense_dgrad)(int rows, int k, int n, const void *dy, const void *w, void *dx)
{
  TS_F(ts_gemm)(FALSE, TRUE, rows, k, n, 1, dy, n, w, n, 0, dx, k);
}

/* dW += x^T dy, db += sum dy (when db): the weight gradient. */
static void TS_F(vk_dense_wgrad)(int rows, int k, int n, const void *x, const void *dy, void *dw,
                                 void *db)
{
  TS_F(ts_gemm)(TRUE, FALSE, k, n, rows, 1, x, k, dy, n, 1, dw, n);
  if (db != NULL)
    TS_F(ts_bias_grad)(rows, n, dy, db);
}

static void TS_F(vk_conv_fwd)(const ts_conv_shape *s, const void *x, const void *w, const void *b,
                              void *y)
{
  TS_F(ts_conv2d_fwd)(s, x, w, b, y, NULL);
}

static void TS_F(vk_conv_bwd)(const ts_conv_shape *s, const void *x, const void *w, const void *dy,
                              void *dx, void *dw, void *db)
{
  TS_F(ts_conv2d_bwd)(s, x, w, dy, dx, dw, db, NULL);
}

/* y[i][c][j] += b[c] over n x c x hw (hw = 1: a row-major matrix and its bias). */
static void TS_F(vk_bias_add)(int n, int c, int hw, const void *bias, void *out)
{
  const TS_R *b = bias;
  TS_R *y = out;
  if (hw == 1) {
    TS_F(ts_bias_add)(n, c, b, y);
    return;
  }
  for (gint64 i = 0; i < n; i++)
    for (gint64 o = 0; o < c; o++)
      for (gint64 j = 0; j < hw; j++)
        y[(i * c + o) * hw + j] += b[o];
}

/* db[c] += sum of dy over samples and positions. */
static void TS_F(vk_bias_grad)(int n, int c, int hw, const void *dyv, void *dbv)
{
  const TS_R *dy = dyv;
  TS_R *db = dbv;
  if (hw == 1) {
    TS_F(ts_bias_grad)(n, c, dy, db);
    return;
  }
  for (gint64 i = 0; i < n; i++)
    for (gint64 o = 0; o < c; o++)
      for (gint64 j = 0; j < hw; j++)
        db[o] += dy[(i * c + o) * hw + j];
}

static void TS_F(vk_act_fwd)(vd_act a, gint64 n, const void *z, void *y)
{
  if (a == VD_ACT_RELU)
    TS_F(ts_relu_fwd)(n, z, y);
  else if (a == VD_ACT_GELU)
    TS_F(ts_gelu_fwd)(n, z, y);
  else if (y != z)
    memcpy(y, z, sizeof(TS_R) * (gsize)n);
}

/* dz = act'(z) dy; dz may equal dy. */
static void TS_F(vk_act_bwd)(vd_act a, gint64 n, const void *z, const void *dy, void *dz)
{
  if (a == VD_ACT_RELU)
    TS_F(ts_relu_bwd)(n, z, dy, dz);
  else if (a == VD_ACT_GELU)
    TS_F(ts_gelu_bwd)(n, z, dy, dz);
  else if (dz != dy)
    memcpy(dz, dy, sizeof(TS_R) * (gsize)n);
}

static void TS_F(vk_rope)(int b, int t, int heads, int dh, void *x, int ld, gboolean inverse)
{
  TS_F(ts_rope)(b, t, heads, dh, x, ld, inverse);
}

static void TS_F(vk_swiglu_fwd)(int rows, int f, const void *x, void *y)
{
  TS_F(ts_swiglu_fwd)(rows, f, x, y);
}

static void TS_F(vk_swiglu_bwd)(int rows, int f, const void *x, const void *dy, void *dx)
{
  TS_F(ts_swiglu_bwd)(rows, f, x, dy, dx);
}

static void TS_F(vk_axpy)(gint64 n, double alpha, const void *x, void *y)
{
  TS_F(ts_axpy)(n, (TS_R)alpha, x, y);
}

static void TS_F(vk_layernorm_fwd)(int rows, int cols, const void *x, const void *gamma,
                                   const void *beta, void *y, void *mean, void *rstd)
{
  /* eps as ts_nnet's transformer block uses. */
  TS_F(ts_layernorm_fwd)(rows, cols, (TS_R)1e-5, x, gamma, beta, y, mean, rstd);
}

static void TS_F(vk_layernorm_bwd)(int rows, int cols, const void *x, const void *gamma,
                                   const void *mean, const void *rstd, const void *dy, void *dx,
                                   void *dgamma, void *dbeta)
{
  TS_F(ts_layernorm_bwd)(rows, cols, x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
}

/* Attention over `heads` local heads of width dh on a fused local QKV [rows][3 heads dh]. */
static void TS_F(vk_attn_fwd)(int b, int t, int heads, int kv, int dh, gboolean causal,
                              const void *qkvv, void *p, void *out)
{
  const TS_R *qkv = qkvv;
  int dl = heads * dh;
  if (kv != heads) {
    TS_F(ts_gqa_attention_fwd)(b, t, heads, kv, dh, causal, qkv, p, out);
    return;
  }
  TS_F(ts_attention_fwd)(b, t, heads, dh, causal, qkv, qkv + dl, qkv + 2 * dl, 3 * dl, p, out, dl);
}

static void TS_F(vk_attn_bwd)(int b, int t, int heads, int kv, int dh, const void *qkvv,
                              const void *p, const void *dout, void *dqkvv)
{
  const TS_R *qkv = qkvv;
  TS_R *dqkv = dqkvv;
  if (kv != heads) {
    TS_F(ts_gqa_attention_bwd)(b, t, heads, kv, dh, qkv, p, dout, dqkv);
    return;
  }
  int dl = heads * dh;
  TS_R *work = g_new(TS_R, (gsize)t * t);
  TS_F(ts_attention_bwd)
  (b, t, heads, dh, qkv, qkv + dl, qkv + 2 * dl, 3 * dl, p, dout, dl, dqkv, dqkv + dl,
   dqkv + 2 * dl, work);
  g_free(work);
}

static void TS_F(vk_maxpool_fwd)(int planes, int h, int w, int k, const void *x, void *y,
                                 gint32 *argmax)
{
  TS_F(ts_maxpool_fwd)(planes, h, w, k, x, y, argmax);
}

static void TS_F(vk_maxpool_bwd)(int planes, int h, int w, int k, const void *dy,
                                 const gint32 *argmax, void *dx)
{
  TS_F(ts_maxpool_bwd)(planes, h, w, k, dy, argmax, dx);
}

static double TS_F(vk_xent_fwd)(int rows, int cols, const void *logits, const int *labels,
                                void *prob)
{
  return TS_F(ts_xent_fwd)(rows, cols, logits, labels, prob);
}

static void TS_F(vk_xent_bwd)(int rows, int cols, const void *prob, const int *labels, double scale,
                              void *dlogits)
{
  TS_F(ts_xent_bwd)(rows, cols, prob, labels, (TS_R)scale, dlogits);
}

static void TS_F(vk_sgd)(gint64 n, double lr, double momentum, double wd, void *w, const void *g,
                         void *vel)
{
  TS_F(ts_sgd_step)(n, (TS_R)lr, (TS_R)momentum, (TS_R)wd, w, g, vel);
}

static void TS_F(vk_adam)(gint64 n, const ts_adam *hp, int step, void *w, const void *g, void *m,
                          void *v)
{
  TS_F(ts_adam_step)(n, hp, step, w, g, m, v);
}

static double TS_F(vk_get)(const void *buf, gint64 i)
{
  return (double)((const TS_R *)buf)[i];
}

static void TS_F(vk_set)(void *buf, gint64 i, double v)
{
  ((TS_R *)buf)[i] = (TS_R)v;
}

static const vd_kern TS_F(vd_kern_table) = {
    .elem = sizeof(TS_R),
    .dense_fwd = TS_F(vk_dense_fwd),
    .dense_dgrad = TS_F(vk_dense_dgrad),
    .dense_wgrad = TS_F(vk_dense_wgrad),
    .conv_fwd = TS_F(vk_conv_fwd),
    .conv_bwd = TS_F(vk_conv_bwd),
    .bias_add = TS_F(vk_bias_add),
    .bias_grad = TS_F(vk_bias_grad),
    .act_fwd = TS_F(vk_act_fwd),
    .act_bwd = TS_F(vk_act_bwd),
    .axpy = TS_F(vk_axpy),
    .layernorm_fwd = TS_F(vk_layernorm_fwd),
    .layernorm_bwd = TS_F(vk_layernorm_bwd),
    .swiglu_fwd = TS_F(vk_swiglu_fwd),
    .rope = TS_F(vk_rope),
    .swiglu_bwd = TS_F(vk_swiglu_bwd),
    .attn_fwd = TS_F(vk_attn_fwd),
    .attn_bwd = TS_F(vk_attn_bwd),
    .maxpool_fwd = TS_F(vk_maxpool_fwd),
    .maxpool_bwd = TS_F(vk_maxpool_bwd),
    .xent_fwd = TS_F(vk_xent_fwd),
    .xent_bwd = TS_F(vk_xent_bwd),
    .sgd = TS_F(vk_sgd),
    .adam = TS_F(vk_adam),
    .get = TS_F(vk_get),
    .set = TS_F(vk_set),
};
