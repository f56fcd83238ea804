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

/* Ring attention (context parallelism), one block: the local queries (tq per sample, fused
 * QKV rows of width ldq, Q in the first heads x dh columns) against a K/V block (tk tokens per
 * sample, rows [K | V] of 2 kv dh), causal by the tokens' places in the whole sequence (qpos,
 * kpos). The running row maxima m, sums l ([b][heads][tq]) and unnormalised outputs acc
 * ([b * tq][heads dh]) are merged online (Milakov & Gimelshein 2018; Liu et al. 2023, "Ring
 * Attention"): m' = max(m, max_j s_j), acc = acc e^(m - m') + sum_j e^(s_j - m') v_j. */
static void TS_F(vk_cp_block_fwd)(int b, int tq, int tk, int heads, int kv, int dh, int ldq,
                                  const void *qkvv, const void *kvv, const int *qpos,
                                  const int *kpos, void *mv, void *lv, void *accv)
{
  const TS_R *qkv = qkvv, *kvb = kvv;
  TS_R *m = mv, *l = lv, *acc = accv;
  const TS_R scale = 1 / TS_SQRT((TS_R)dh);
  int ldk = 2 * kv * dh, grp = heads / kv;
  TS_R *sc = g_new(TS_R, (gsize)MAX(tk, 1));
  for (int s = 0; s < b; s++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < tq; i++) {
        const TS_R *q = qkv + ((gint64)s * tq + i) * ldq + (gint64)h * dh;
        gint64 st = ((gint64)s * heads + h) * tq + i;
        TS_R mx = -INFINITY;
        for (int j = 0; j < tk; j++) {
          if (kpos[j] > qpos[i]) {
            sc[j] = -INFINITY;
            continue;
          }
          const TS_R *kr = kvb + ((gint64)s * tk + j) * ldk + (gint64)(h / grp) * dh;
          TS_R d = 0;
          for (int c = 0; c < dh; c++)
            d += q[c] * kr[c];
          sc[j] = d * scale;
          mx = sc[j] > mx ? sc[j] : mx;
        }
        if (mx == -INFINITY)
          continue; /* every key of the block is in this query's future */
        TS_R mn = m[st] > mx ? m[st] : mx;
        TS_R alpha = m[st] == -INFINITY ? 0 : TS_EXP(m[st] - mn);
        TS_R *o = acc + ((gint64)s * tq + i) * heads * dh + (gint64)h * dh;
        for (int c = 0; c < dh; c++)
          o[c] *= alpha;
        TS_R sum = 0;
        for (int j = 0; j < tk; j++) {
          if (sc[j] == -INFINITY)
            continue;
          TS_R pj = TS_EXP(sc[j] - mn);
          sum += pj;
          const TS_R *vr = kvb + ((gint64)s * tk + j) * ldk + (gint64)(kv + h / grp) * dh;
          for (int c = 0; c < dh; c++)
            o[c] += pj * vr[c];
        }
        l[st] = l[st] * alpha + sum;
        m[st] = mn;
      }
  g_free(sc);
}

/* After the last block: out = acc / l, lse = m + log l (the statistics the backward needs). */
static void TS_F(vk_cp_finish)(int b, int tq, int heads, int dh, const void *mv, const void *lv,
                               const void *accv, void *outv, void *lsev)
{
  const TS_R *m = mv, *l = lv, *acc = accv;
  TS_R *out = outv, *lse = lsev;
  for (int s = 0; s < b; s++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < tq; i++) {
        gint64 st = ((gint64)s * heads + h) * tq + i,
               o = ((gint64)s * tq + i) * heads * dh + h * dh;
        for (int c = 0; c < dh; c++)
          out[o + c] = acc[o + c] / l[st];
        lse[st] = m[st] + TS_LOG(l[st]);
      }
}

/* Backward of one block (FlashAttention's, Dao et al. 2022, Alg. 4, with the final lse and
 * dsum = rowsum(dO o O)): p = e^(s - lse), dV += p dO, dp = dO . v, ds = p (dp - dsum),
 * dQ += ds k scale (dq: [b * tq][heads dh]), dK += ds q scale (dkv rows [dK | dV]). */
static void TS_F(vk_cp_block_bwd)(int b, int tq, int tk, int heads, int kv, int dh, int ldq,
                                  const void *qkvv, const void *kvv, const int *qpos,
                                  const int *kpos, const void *lsev, const void *dsumv,
                                  const void *doutv, void *dqv, void *dkvv)
{
  const TS_R *qkv = qkvv, *kvb = kvv, *lse = lsev, *dsum = dsumv, *dout = doutv;
  TS_R *dq = dqv, *dkv = dkvv;
  const TS_R scale = 1 / TS_SQRT((TS_R)dh);
  int ldk = 2 * kv * dh, grp = heads / kv, ldo = heads * dh;
  for (int s = 0; s < b; s++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < tq; i++) {
        const TS_R *q = qkv + ((gint64)s * tq + i) * ldq + (gint64)h * dh;
        const TS_R *dO = dout + ((gint64)s * tq + i) * ldo + (gint64)h * dh;
        TS_R *dqi = dq + ((gint64)s * tq + i) * ldo + (gint64)h * dh;
        gint64 st = ((gint64)s * heads + h) * tq + i;
        for (int j = 0; j < tk; j++) {
          if (kpos[j] > qpos[i])
            continue;
          gint64 kr0 = ((gint64)s * tk + j) * ldk;
          const TS_R *kr = kvb + kr0 + (gint64)(h / grp) * dh;
          const TS_R *vr = kvb + kr0 + (gint64)(kv + h / grp) * dh;
          TS_R *dk = dkv + kr0 + (gint64)(h / grp) * dh;
          TS_R *dv = dkv + kr0 + (gint64)(kv + h / grp) * dh;
          TS_R d = 0, dp = 0;
          for (int c = 0; c < dh; c++) {
            d += q[c] * kr[c];
            dp += dO[c] * vr[c];
          }
          TS_R pj = TS_EXP(d * scale - lse[st]);
          TS_R ds = pj * (dp - dsum[st]);
          for (int c = 0; c < dh; c++) {
            dv[c] += pj * dO[c];
            dqi[c] += ds * kr[c] * scale;
            dk[c] += ds * q[c] * scale;
          }
        }
      }
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
    .cp_block_fwd = TS_F(vk_cp_block_fwd),
    .cp_finish = TS_F(vk_cp_finish),
    .cp_block_bwd = TS_F(vk_cp_block_bwd),
    .maxpool_fwd = TS_F(vk_maxpool_fwd),
    .maxpool_bwd = TS_F(vk_maxpool_bwd),
    .xent_fwd = TS_F(vk_xent_fwd),
    .xent_bwd = TS_F(vk_xent_bwd),
    .sgd = TS_F(vk_sgd),
    .adam = TS_F(vk_adam),
    .get = TS_F(vk_get),
    .set = TS_F(vk_set),
};
