/* ts_nnet_impl: forward and backward passes of the small networks, written once for a real
 * type; ts_nnet.c includes this file once per precision with TS_R and TS_F defined. The
 * layouts (tensor order, buffer sizes) come from ts_nnet.c and are the same in both. */

typedef struct {
  ts_nnet_config c;
  int nt;
  gint64 numel[TS_NNET_MAX_TENSORS];
  TS_R *w[TS_NNET_MAX_TENSORS], *g[TS_NNET_MAX_TENSORS];
  TS_R *m[TS_NNET_MAX_TENSORS], *v[TS_NNET_MAX_TENSORS]; /* optimizer state, made on first use */
  TS_R *x;                                               /* synthetic inputs, whole batch */
  int *labels;                                           /* synthetic labels, whole batch */
  gint64 per_sample[NB_COUNT]; /* elements of each buffer per sample; 0: fixed size */
  TS_R *buf[NB_COUNT];
  gint32 *argmax; /* CNN pooling */
  int adam_step;
} TS_F(net);

static TS_F(net) * TS_F(net_new)(const ts_nnet_config *c, int nt, const ts_nnet_tensor_info *info,
                                 double *const *init, const double *x, gint64 x_elems,
                                 const int *labels, gint64 nlabels, const gint64 *per_sample,
                                 const gint64 *fixed)
{
  TS_F(net) *n = g_new0(TS_F(net), 1);
  n->c = *c;
  n->nt = nt;
  for (int i = 0; i < nt; i++) {
    n->numel[i] = info[i].numel;
    n->w[i] = g_new(TS_R, info[i].numel);
    n->g[i] = g_new0(TS_R, info[i].numel);
    for (gint64 j = 0; j < info[i].numel; j++)
      n->w[i][j] = (TS_R)init[i][j];
  }
  n->x = g_new(TS_R, x_elems);
  for (gint64 j = 0; j < x_elems; j++)
    n->x[j] = (TS_R)x[j];
  n->labels = g_memdup2(labels, sizeof(int) * (gsize)nlabels);
  for (int b = 0; b < NB_COUNT; b++) {
    n->per_sample[b] = per_sample[b];
    gint64 elems = per_sample[b] * c->batch + fixed[b];
    n->buf[b] = elems > 0 ? g_new0(TS_R, elems) : NULL;
  }
  if (c->kind == TS_NNET_CNN)
    n->argmax = g_new0(gint32, per_sample[NB_POOL] * c->batch);
  return n;
}

static void TS_F(net_free)(TS_F(net) * n)
{
  for (int i = 0; i < n->nt; i++) {
    g_free(n->w[i]);
    g_free(n->g[i]);
    g_free(n->m[i]);
    g_free(n->v[i]);
  }
  for (int b = 0; b < NB_COUNT; b++)
    g_free(n->buf[b]);
  g_free(n->x);
  g_free(n->labels);
  g_free(n->argmax);
  g_free(n);
}

/* Buffer b at the first sample of the range. */
#define TS_BUF(b) (n->buf[b] + n->per_sample[b] * b0)

/* Dense layer y [rows x out] = x [rows x in] W [in x out] + bias. */
static void TS_F(dense_fwd)(int rows, int in, int out, const TS_R *x, const TS_R *w,
                            const TS_R *bias, TS_R *y)
{
  TS_F(ts_gemm)(FALSE, FALSE, rows, out, in, 1, x, in, w, out, 0, y, out);
  TS_F(ts_bias_add)(rows, out, bias, y);
}

/* Dense backward: dW += x^T dy, dbias += sum dy, dx = dy W^T (dx may be NULL). */
static void TS_F(dense_bwd)(int rows, int in, int out, const TS_R *x, const TS_R *w, const TS_R *dy,
                            TS_R *dx, TS_R *dw, TS_R *dbias)
{
  TS_F(ts_gemm)(TRUE, FALSE, in, out, rows, 1, x, in, dy, out, 1, dw, out);
  TS_F(ts_bias_grad)(rows, out, dy, dbias);
  if (dx != NULL)
    TS_F(ts_gemm)(FALSE, TRUE, rows, in, out, 1, dy, out, w, out, 0, dx, in);
}

/* ---- MLP ---- */

static double TS_F(mlp_pass)(TS_F(net) * n, int b0, int b1, gboolean backward)
{
  const ts_nnet_config *c = &n->c;
  int rows = b1 - b0, in = c->in, hid = c->hidden, cls = c->classes;
  const TS_R *x = n->x + (gint64)b0 * in;
  TS_R *z1 = TS_BUF(NB_Z1), *a1 = TS_BUF(NB_A1), *z2 = TS_BUF(NB_Z2), *a2 = TS_BUF(NB_A2);
  TS_R *logits = TS_BUF(NB_LOGITS), *prob = TS_BUF(NB_PROB);
  TS_F(dense_fwd)(rows, in, hid, x, n->w[MLP_W1], n->w[MLP_B1], z1);
  TS_F(ts_relu_fwd)((gint64)rows * hid, z1, a1);
  TS_F(dense_fwd)(rows, hid, hid, a1, n->w[MLP_W2], n->w[MLP_B2], z2);
  TS_F(ts_relu_fwd)((gint64)rows * hid, z2, a2);
  TS_F(dense_fwd)(rows, hid, cls, a2, n->w[MLP_W3], n->w[MLP_B3], logits);
  double loss = TS_F(ts_xent_fwd)(rows, cls, logits, n->labels + b0, prob) / c->batch;
  if (!backward)
    return loss;
  TS_R *dlog = TS_BUF(NB_DLOGITS), *d1 = TS_BUF(NB_D1), *d2 = TS_BUF(NB_D2);
  TS_F(ts_xent_bwd)(rows, cls, prob, n->labels + b0, (TS_R)(1.0 / c->batch), dlog);
  TS_F(dense_bwd)(rows, hid, cls, a2, n->w[MLP_W3], dlog, d2, n->g[MLP_W3], n->g[MLP_B3]);
  TS_F(ts_relu_bwd)((gint64)rows * hid, z2, d2, d2);
  TS_F(dense_bwd)(rows, hid, hid, a1, n->w[MLP_W2], d2, d1, n->g[MLP_W2], n->g[MLP_B2]);
  TS_F(ts_relu_bwd)((gint64)rows * hid, z1, d1, d1);
  TS_F(dense_bwd)(rows, in, hid, x, n->w[MLP_W1], d1, NULL, n->g[MLP_W1], n->g[MLP_B1]);
  return loss;
}

/* ---- CNN ---- */

static double TS_F(cnn_pass)(TS_F(net) * n, int b0, int b1, gboolean backward)
{
  const ts_nnet_config *c = &n->c;
  int rows = b1 - b0, f = c->filters, hw = c->height * c->width;
  int ph = c->height / 2, pw = c->width / 2, flat = f * ph * pw, cls = c->classes;
  ts_conv_shape s1 = {.n = rows,
                      .c = c->channels,
                      .h = c->height,
                      .w = c->width,
                      .oc = f,
                      .kh = c->kernel,
                      .kw = c->kernel,
                      .stride = 1,
                      .pad = c->kernel / 2};
  ts_conv_shape s2 = s1;
  s2.c = f;
  const TS_R *x = n->x + (gint64)b0 * c->channels * hw;
  TS_R *z1 = TS_BUF(NB_Z1), *a1 = TS_BUF(NB_A1), *z2 = TS_BUF(NB_Z2), *a2 = TS_BUF(NB_A2);
  TS_R *pool = TS_BUF(NB_POOL), *logits = TS_BUF(NB_LOGITS), *prob = TS_BUF(NB_PROB);
  TS_R *work = n->buf[NB_WORK];
  gint32 *argmax = n->argmax + (gint64)b0 * flat;
  TS_F(ts_conv2d_fwd)(&s1, x, n->w[CNN_C1W], n->w[CNN_C1B], z1, work);
  TS_F(ts_relu_fwd)((gint64)rows * f * hw, z1, a1);
  TS_F(ts_conv2d_fwd)(&s2, a1, n->w[CNN_C2W], n->w[CNN_C2B], z2, work);
  TS_F(ts_relu_fwd)((gint64)rows * f * hw, z2, a2);
  TS_F(ts_maxpool_fwd)(rows * f, c->height, c->width, 2, a2, pool, argmax);
  TS_F(dense_fwd)(rows, flat, cls, pool, n->w[CNN_FCW], n->w[CNN_FCB], logits);
  double loss = TS_F(ts_xent_fwd)(rows, cls, logits, n->labels + b0, prob) / c->batch;
  if (!backward)
    return loss;
  TS_R *dlog = TS_BUF(NB_DLOGITS), *dpool = TS_BUF(NB_D2), *d2 = TS_BUF(NB_DA), *d1 = TS_BUF(NB_D1);
  TS_F(ts_xent_bwd)(rows, cls, prob, n->labels + b0, (TS_R)(1.0 / c->batch), dlog);
  TS_F(dense_bwd)(rows, flat, cls, pool, n->w[CNN_FCW], dlog, dpool, n->g[CNN_FCW], n->g[CNN_FCB]);
  TS_F(ts_maxpool_bwd)(rows * f, c->height, c->width, 2, dpool, argmax, d2);
  TS_F(ts_relu_bwd)((gint64)rows * f * hw, z2, d2, d2);
  TS_F(ts_conv2d_bwd)(&s2, a1, n->w[CNN_C2W], d2, d1, n->g[CNN_C2W], n->g[CNN_C2B], work);
  TS_F(ts_relu_bwd)((gint64)rows * f * hw, z1, d1, d1);
  TS_F(ts_conv2d_bwd)(&s1, x, n->w[CNN_C1W], d1, NULL, n->g[CNN_C1W], n->g[CNN_C1B], work);
  return loss;
}

/* ---- Transformer block ---- */

static double TS_F(tf_pass)(TS_F(net) * n, int b0, int b1, gboolean backward)
{
  const ts_nnet_config *c = &n->c;
  int nseq = b1 - b0, t = c->seq, d = c->dmodel, ff = c->dff, cls = c->classes;
  int rows = nseq * t, dhead = d / c->heads, dqkv_w = ts_nnet_qkv_width(c);
  int kvh = c->kv_heads > 0 ? c->kv_heads : c->heads;
  const TS_R eps = (TS_R)1e-5;
  const TS_R *x = n->x + (gint64)b0 * t * d;
  TS_R *l1 = TS_BUF(NB_L1), *mean1 = TS_BUF(NB_MEAN1), *rstd1 = TS_BUF(NB_RSTD1);
  TS_R *qkv = TS_BUF(NB_QKV), *att = TS_BUF(NB_ATT), *p = TS_BUF(NB_P), *h = TS_BUF(NB_H);
  TS_R *l2 = TS_BUF(NB_L2), *mean2 = TS_BUF(NB_MEAN2), *rstd2 = TS_BUF(NB_RSTD2);
  TS_R *f1 = TS_BUF(NB_F1), *gl = TS_BUF(NB_G), *y = TS_BUF(NB_Y);
  TS_R *logits = TS_BUF(NB_LOGITS), *prob = TS_BUF(NB_PROB);
  const int *labels = n->labels + (gint64)b0 * t;
  /* h = x + Attn(LN1(x)) Wo + bo */
  TS_F(ts_layernorm_fwd)(rows, d, eps, x, n->w[TF_LN1G], n->w[TF_LN1B], l1, mean1, rstd1);
  TS_F(dense_fwd)(rows, d, dqkv_w, l1, n->w[TF_WQKV], n->w[TF_BQKV], qkv);
  if (c->rotary) {
    TS_F(ts_rope)(nseq, t, c->heads, dhead, qkv, dqkv_w, FALSE); /* Q */
    TS_F(ts_rope)(nseq, t, kvh, dhead, qkv + d, dqkv_w, FALSE);  /* K */
  }
  if (kvh == c->heads)
    TS_F(ts_attention_fwd)
  (nseq, t, c->heads, dhead, c->causal, qkv, qkv + d, qkv + 2 * d, 3 * d, p, att, d);
  else TS_F(ts_gqa_attention_fwd)(nseq, t, c->heads, kvh, dhead, c->causal, qkv, p, att);
  TS_F(dense_fwd)(rows, d, d, att, n->w[TF_WO], n->w[TF_BO], h);
  TS_F(ts_axpy)((gint64)rows * d, 1, x, h);
  /* y = h + GELU(LN2(h) W1 + b1) W2 + b2 */
  TS_F(ts_layernorm_fwd)(rows, d, eps, h, n->w[TF_LN2G], n->w[TF_LN2B], l2, mean2, rstd2);
  int f1w = c->gated ? 2 * ff : ff; /* SwiGLU: gate and up */
  TS_F(dense_fwd)(rows, d, f1w, l2, n->w[TF_W1], n->w[TF_B1], f1);
  if (c->gated)
    TS_F(ts_swiglu_fwd)(rows, ff, f1, gl);
  else
    TS_F(ts_gelu_fwd)((gint64)rows * ff, f1, gl);
  TS_F(dense_fwd)(rows, ff, d, gl, n->w[TF_W2], n->w[TF_B2], y);
  TS_F(ts_axpy)((gint64)rows * d, 1, h, y);
  TS_F(dense_fwd)(rows, d, cls, y, n->w[TF_WH], n->w[TF_BH], logits);
  double loss = TS_F(ts_xent_fwd)(rows, cls, logits, labels, prob) / ((double)c->batch * t);
  if (!backward)
    return loss;
  TS_R *dlog = TS_BUF(NB_DLOGITS), *dy = TS_BUF(NB_DY), *dg = TS_BUF(NB_DG);
  TS_R *dl = TS_BUF(NB_DL), *dh = TS_BUF(NB_DH), *datt = TS_BUF(NB_DATT);
  TS_R *dqkv = TS_BUF(NB_DQKV), *work = n->buf[NB_WORK];
  TS_F(ts_xent_bwd)(rows, cls, prob, labels, (TS_R)(1.0 / ((double)c->batch * t)), dlog);
  TS_F(dense_bwd)(rows, d, cls, y, n->w[TF_WH], dlog, dy, n->g[TF_WH], n->g[TF_BH]);
  /* MLP branch; the residual passes dy straight to dh. */
  TS_F(dense_bwd)(rows, ff, d, gl, n->w[TF_W2], dy, dg, n->g[TF_W2], n->g[TF_B2]);
  if (c->gated) {
    /* dg holds dG (rows x ff); the gate/up gradient goes to its second half's room. */
    TS_R *df1 = dg + (gint64)rows * ff;
    TS_F(ts_swiglu_bwd)(rows, ff, f1, dg, df1);
    TS_F(dense_bwd)(rows, d, f1w, l2, n->w[TF_W1], df1, dl, n->g[TF_W1], n->g[TF_B1]);
  } else {
    TS_F(ts_gelu_bwd)((gint64)rows * ff, f1, dg, dg);
    TS_F(dense_bwd)(rows, d, ff, l2, n->w[TF_W1], dg, dl, n->g[TF_W1], n->g[TF_B1]);
  }
  TS_F(ts_layernorm_bwd)
  (rows, d, h, n->w[TF_LN2G], mean2, rstd2, dl, dh, n->g[TF_LN2G], n->g[TF_LN2B]);
  TS_F(ts_axpy)((gint64)rows * d, 1, dy, dh);
  /* Attention branch. */
  TS_F(dense_bwd)(rows, d, d, att, n->w[TF_WO], dh, datt, n->g[TF_WO], n->g[TF_BO]);
  if (kvh == c->heads)
    TS_F(ts_attention_bwd)
  (nseq, t, c->heads, dhead, qkv, qkv + d, qkv + 2 * d, 3 * d, p, datt, d, dqkv, dqkv + d,
   dqkv + 2 * d, work);
  else TS_F(ts_gqa_attention_bwd)(nseq, t, c->heads, kvh, dhead, qkv, p, datt, dqkv);
  if (c->rotary) {
    TS_F(ts_rope)(nseq, t, c->heads, dhead, dqkv, dqkv_w, TRUE);
    TS_F(ts_rope)(nseq, t, kvh, dhead, dqkv + d, dqkv_w, TRUE);
  }
  TS_F(dense_bwd)(rows, d, dqkv_w, l1, n->w[TF_WQKV], dqkv, dl, n->g[TF_WQKV], n->g[TF_BQKV]);
  /* The input gradient is not needed, but layer norm's dgamma/dbeta come with it: reuse dy. */
  TS_F(ts_layernorm_bwd)
  (rows, d, x, n->w[TF_LN1G], mean1, rstd1, dl, dy, n->g[TF_LN1G], n->g[TF_LN1B]);
  return loss;
}

#undef TS_BUF

static double TS_F(net_pass)(TS_F(net) * n, int b0, int b1, gboolean backward)
{
  switch (n->c.kind) {
  case TS_NNET_MLP:
    return TS_F(mlp_pass)(n, b0, b1, backward);
  case TS_NNET_CNN:
    return TS_F(cnn_pass)(n, b0, b1, backward);
  default:
    return TS_F(tf_pass)(n, b0, b1, backward);
  }
}

static void TS_F(net_sgd)(TS_F(net) * n, double lr, double momentum, double weight_decay)
{
  for (int i = 0; i < n->nt; i++) {
    if (momentum != 0 && n->m[i] == NULL)
      n->m[i] = g_new0(TS_R, n->numel[i]);
    TS_F(ts_sgd_step)
    (n->numel[i], (TS_R)lr, (TS_R)momentum, (TS_R)weight_decay, n->w[i], n->g[i], n->m[i]);
  }
}

static void TS_F(net_adam)(TS_F(net) * n, const ts_adam *hp)
{
  n->adam_step++;
  for (int i = 0; i < n->nt; i++) {
    if (n->v[i] == NULL) {
      /* SGD momentum and Adam's first moment would share m: start Adam from zero. */
      g_free(n->m[i]);
      n->m[i] = g_new0(TS_R, n->numel[i]);
      n->v[i] = g_new0(TS_R, n->numel[i]);
    }
    TS_F(ts_adam_step)(n->numel[i], hp, n->adam_step, n->w[i], n->g[i], n->m[i], n->v[i]);
  }
}
