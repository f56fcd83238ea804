/* ts_numeric_impl: the kernel definitions of ts_numeric_decl.h, written once for a real type;
 * ts_numeric.c includes this file once per precision with TS_R, TS_F, TS_V (a 32-byte
 * vector of TS_R), TS_VL (its lanes) and the math macros TS_EXP, TS_LOG, TS_SQRT, TS_ERF. */

/* ---------------- GEMM ---------------- */

/* Register tile: TS_MR rows of C times two vectors of columns. Six rows keep 12 vector
 * accumulators plus 2 B vectors and 1 broadcast in the 16 registers of AVX2 (the 6x16 fp32
 * tile of BLIS's Haswell kernel). KC sizes a B micro-panel (KC x NR) to stay in L1, MC an A
 * block (MC x KC) in L2, NC a B block (KC x NC) in L3 (Goto & van de Geijn 2008, sec. 6). */
#define TS_NR (2 * TS_VL)
enum { TS_F(gemm_kc) = 256, TS_F(gemm_mc) = 96, TS_F(gemm_nc) = 2048 };

/* C[TS_MR x TS_NR] (leading dimension ldc) += Apanel * Bpanel over kc. Accumulators are
 * named variables, not an array, so that they stay in registers at -O2. */
TS_KERNEL_ATTR static void TS_F(gemm_micro)(int kc, const TS_R *restrict ap,
                                            const TS_R *restrict bp, TS_R *restrict c, int ldc)
{
#define TS_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define TS_DECL(i) TS_V c##i##0 = {0}, c##i##1 = {0};
  TS_ROWS(TS_DECL)
  for (int p = 0; p < kc; p++) {
    TS_V b0, b1;
    memcpy(&b0, bp, sizeof b0);
    memcpy(&b1, bp + TS_VL, sizeof b1);
#define TS_FMA(i)                                                                                  \
  {                                                                                                \
    TS_R a_ = ap[i];                                                                               \
    c##i##0 += a_ * b0;                                                                            \
    c##i##1 += a_ * b1;                                                                            \
  }
    TS_ROWS(TS_FMA)
    ap += TS_MR;
    bp += TS_NR;
  }
#define TS_STORE(i)                                                                                \
  {                                                                                                \
    TS_V t0_, t1_;                                                                                 \
    memcpy(&t0_, c + (gint64)(i)*ldc, sizeof t0_);                                                 \
    memcpy(&t1_, c + (gint64)(i)*ldc + TS_VL, sizeof t1_);                                         \
    t0_ += c##i##0;                                                                                \
    t1_ += c##i##1;                                                                                \
    memcpy(c + (gint64)(i)*ldc, &t0_, sizeof t0_);                                                 \
    memcpy(c + (gint64)(i)*ldc + TS_VL, &t1_, sizeof t1_);                                         \
  }
  TS_ROWS(TS_STORE)
#undef TS_ROWS
#undef TS_DECL
#undef TS_FMA
#undef TS_STORE
}

/* Packs alpha * op(A)[i0.., p0..] (mc x kc) into TS_MR-row panels, column by column,
 * zero-padding the last panel so the micro-kernel never needs an edge case. */
static void TS_F(gemm_pack_a)(gboolean trans, const TS_R *a, int lda, int i0, int p0, int mc,
                              int kc, TS_R alpha, TS_R *out)
{
  for (int i = 0; i < mc; i += TS_MR) {
    int rows = MIN(TS_MR, mc - i);
    for (int p = 0; p < kc; p++) {
      for (int ii = 0; ii < rows; ii++) {
        gint64 r = i0 + i + ii, col = p0 + p;
        out[ii] = alpha * (trans ? a[col * lda + r] : a[r * lda + col]);
      }
      for (int ii = rows; ii < TS_MR; ii++)
        out[ii] = 0;
      out += TS_MR;
    }
  }
}

/* Packs op(B)[p0.., j0..] (kc x nc) into TS_NR-column panels, row by row, zero-padded. */
static void TS_F(gemm_pack_b)(gboolean trans, const TS_R *b, int ldb, int p0, int j0, int kc,
                              int nc, TS_R *out)
{
  for (int j = 0; j < nc; j += TS_NR) {
    int cols = MIN(TS_NR, nc - j);
    for (int p = 0; p < kc; p++) {
      gint64 row = p0 + p;
      if (!trans && cols == TS_NR) {
        memcpy(out, b + row * ldb + j0 + j, sizeof(TS_R) * TS_NR);
      } else {
        for (int jj = 0; jj < cols; jj++) {
          gint64 col = j0 + j + jj;
          out[jj] = trans ? b[col * ldb + row] : b[row * ldb + col];
        }
        for (int jj = cols; jj < TS_NR; jj++)
          out[jj] = 0;
      }
      out += TS_NR;
    }
  }
}

void TS_F(ts_gemm)(gboolean trans_a, gboolean trans_b, int m, int n, int k, TS_R alpha,
                   const TS_R *a, int lda, const TS_R *b, int ldb, TS_R beta, TS_R *c, int ldc)
{
  g_return_if_fail(m >= 0 && n >= 0 && k >= 0 && ldc >= n);
  if (m == 0 || n == 0)
    return;
  /* beta first, over the whole of C, so the blocked loops below only ever accumulate. */
  for (int i = 0; i < m; i++) {
    TS_R *ci = c + (gint64)i * ldc;
    if (beta == 0)
      memset(ci, 0, sizeof(TS_R) * (size_t)n);
    else if (beta != 1)
      for (int j = 0; j < n; j++)
        ci[j] *= beta;
  }
  if (k == 0 || alpha == 0)
    return;
  const int KC = TS_F(gemm_kc), MC = TS_F(gemm_mc), NC = TS_F(gemm_nc);
  /* Buffers sized to this call, so that small products (attention heads) do not pay for
   * page-faulting megabytes. */
  int kcmax = MIN(k, KC);
  int mcmax = (MIN(m, MC) + TS_MR - 1) / TS_MR * TS_MR;
  int ncmax = (MIN(n, NC) + TS_NR - 1) / TS_NR * TS_NR;
  TS_R *apack = g_new(TS_R, (gsize)mcmax * kcmax);
  TS_R *bpack = g_new(TS_R, (gsize)ncmax * kcmax);
  TS_R edge[TS_MR * TS_NR];
  for (int jc = 0; jc < n; jc += NC) {
    int nc = MIN(NC, n - jc);
    for (int pc = 0; pc < k; pc += KC) {
      int kc = MIN(KC, k - pc);
      TS_F(gemm_pack_b)(trans_b, b, ldb, pc, jc, kc, nc, bpack);
      for (int ic = 0; ic < m; ic += MC) {
        int mc = MIN(MC, m - ic);
        TS_F(gemm_pack_a)(trans_a, a, lda, ic, pc, mc, kc, alpha, apack);
        for (int j = 0; j < nc; j += TS_NR) {
          const TS_R *bp = bpack + (gint64)j * kc;
          int cols = MIN(TS_NR, nc - j);
          for (int i = 0; i < mc; i += TS_MR) {
            const TS_R *ap = apack + (gint64)i * kc;
            int rows = MIN(TS_MR, mc - i);
            TS_R *cij = c + (gint64)(ic + i) * ldc + jc + j;
            if (rows == TS_MR && cols == TS_NR) {
              TS_F(gemm_micro)(kc, ap, bp, cij, ldc);
            } else {
              /* Edge tile: compute a full tile into scratch, add back the valid part. */
              memset(edge, 0, sizeof edge);
              TS_F(gemm_micro)(kc, ap, bp, edge, TS_NR);
              for (int ii = 0; ii < rows; ii++)
                for (int jj = 0; jj < cols; jj++)
                  cij[(gint64)ii * ldc + jj] += edge[ii * TS_NR + jj];
            }
          }
        }
      }
    }
  }
  g_free(apack);
  g_free(bpack);
}

/* ---------------- Bias, activations, element-wise ---------------- */

TS_STREAM_ATTR void TS_F(ts_bias_add)(int rows, int cols, const TS_R *bias, TS_R *y)
{
  for (int r = 0; r < rows; r++) {
    TS_R *yr = y + (gint64)r * cols;
    for (int j = 0; j < cols; j++)
      yr[j] += bias[j];
  }
}

TS_STREAM_ATTR void TS_F(ts_bias_grad)(int rows, int cols, const TS_R *dy, TS_R *dbias)
{
  for (int r = 0; r < rows; r++) {
    const TS_R *dr = dy + (gint64)r * cols;
    for (int j = 0; j < cols; j++)
      dbias[j] += dr[j];
  }
}

TS_STREAM_ATTR void TS_F(ts_relu_fwd)(gint64 n, const TS_R *x, TS_R *y)
{
  for (gint64 i = 0; i < n; i++)
    y[i] = x[i] > 0 ? x[i] : 0;
}

TS_STREAM_ATTR void TS_F(ts_relu_bwd)(gint64 n, const TS_R *x, const TS_R *dy, TS_R *dx)
{
  for (gint64 i = 0; i < n; i++)
    dx[i] = x[i] > 0 ? dy[i] : 0;
}

void TS_F(ts_swiglu_fwd)(int rows, int f, const TS_R *x, TS_R *y)
{
  for (gint64 r = 0; r < rows; r++) {
    const TS_R *g = x + r * 2 * f, *u = g + f;
    for (int j = 0; j < f; j++) {
      TS_R sg = 1 / (1 + TS_EXP(-g[j]));
      y[r * f + j] = g[j] * sg * u[j];
    }
  }
}

void TS_F(ts_swiglu_bwd)(int rows, int f, const TS_R *x, const TS_R *dy, TS_R *dx)
{
  for (gint64 r = 0; r < rows; r++) {
    const TS_R *g = x + r * 2 * f, *u = g + f, *d = dy + r * f;
    TS_R *dg = dx + r * 2 * f, *du = dg + f;
    for (int j = 0; j < f; j++) {
      TS_R sg = 1 / (1 + TS_EXP(-g[j]));
      du[j] = d[j] * g[j] * sg;
      dg[j] = d[j] * u[j] * sg * (1 + g[j] * (1 - sg)); /* silu'(g) = s (1 + g (1 - s)) */
    }
  }
}

void TS_F(ts_gelu_fwd)(gint64 n, const TS_R *x, TS_R *y)
{
  const TS_R inv_sqrt2 = (TS_R)0.70710678118654752440;
  for (gint64 i = 0; i < n; i++)
    y[i] = (TS_R)0.5 * x[i] * (1 + TS_ERF(x[i] * inv_sqrt2));
}

void TS_F(ts_gelu_bwd)(gint64 n, const TS_R *x, const TS_R *dy, TS_R *dx)
{
  const TS_R inv_sqrt2 = (TS_R)0.70710678118654752440;
  const TS_R inv_sqrt2pi = (TS_R)0.39894228040143267794;
  for (gint64 i = 0; i < n; i++) {
    TS_R xi = x[i];
    TS_R cdf = (TS_R)0.5 * (1 + TS_ERF(xi * inv_sqrt2));
    TS_R pdf = inv_sqrt2pi * TS_EXP((TS_R)-0.5 * xi * xi);
    dx[i] = dy[i] * (cdf + xi * pdf);
  }
}

TS_STREAM_ATTR void TS_F(ts_axpy)(gint64 n, TS_R alpha, const TS_R *x, TS_R *y)
{
  for (gint64 i = 0; i < n; i++)
    y[i] += alpha * x[i];
}

TS_STREAM_ATTR void TS_F(ts_add)(gint64 n, const TS_R *x, const TS_R *y, TS_R *z)
{
  for (gint64 i = 0; i < n; i++)
    z[i] = x[i] + y[i];
}

/* ---------------- Layer norm ---------------- */

void TS_F(ts_layernorm_fwd)(int rows, int cols, TS_R eps, const TS_R *x, const TS_R *gamma,
                            const TS_R *beta, TS_R *y, TS_R *mean, TS_R *rstd)
{
  for (int r = 0; r < rows; r++) {
    const TS_R *xr = x + (gint64)r * cols;
    TS_R *yr = y + (gint64)r * cols;
    /* Two passes (mean, then squared deviations): no cancellation for rows with a large
     * mean, unlike E[x^2] - E[x]^2. */
    TS_R mu = 0, var = 0;
    for (int j = 0; j < cols; j++)
      mu += xr[j];
    mu /= (TS_R)cols;
    for (int j = 0; j < cols; j++)
      var += (xr[j] - mu) * (xr[j] - mu);
    var /= (TS_R)cols;
    TS_R rs = 1 / TS_SQRT(var + eps);
    for (int j = 0; j < cols; j++)
      yr[j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
    mean[r] = mu;
    rstd[r] = rs;
  }
}

void TS_F(ts_layernorm_bwd)(int rows, int cols, const TS_R *x, const TS_R *gamma, const TS_R *mean,
                            const TS_R *rstd, const TS_R *dy, TS_R *dx, TS_R *dgamma, TS_R *dbeta)
{
  for (int r = 0; r < rows; r++) {
    const TS_R *xr = x + (gint64)r * cols, *dyr = dy + (gint64)r * cols;
    TS_R *dxr = dx + (gint64)r * cols;
    TS_R mu = mean[r], rs = rstd[r];
    TS_R sum_g = 0, sum_gx = 0;
    for (int j = 0; j < cols; j++) {
      TS_R xhat = (xr[j] - mu) * rs;
      TS_R g = dyr[j] * gamma[j];
      sum_g += g;
      sum_gx += g * xhat;
      dgamma[j] += dyr[j] * xhat;
      dbeta[j] += dyr[j];
    }
    sum_g /= (TS_R)cols;
    sum_gx /= (TS_R)cols;
    for (int j = 0; j < cols; j++) {
      TS_R xhat = (xr[j] - mu) * rs;
      dxr[j] = rs * (dyr[j] * gamma[j] - sum_g - xhat * sum_gx);
    }
  }
}

/* ---------------- Softmax, cross-entropy ---------------- */

void TS_F(ts_softmax_fwd)(int rows, int cols, const TS_R *x, TS_R *y)
{
  for (int r = 0; r < rows; r++) {
    const TS_R *xr = x + (gint64)r * cols;
    TS_R *yr = y + (gint64)r * cols;
    TS_R mx = xr[0];
    for (int j = 1; j < cols; j++)
      mx = MAX(mx, xr[j]);
    TS_R sum = 0;
    for (int j = 0; j < cols; j++) {
      yr[j] = TS_EXP(xr[j] - mx);
      sum += yr[j];
    }
    TS_R inv = 1 / sum;
    for (int j = 0; j < cols; j++)
      yr[j] *= inv;
  }
}

void TS_F(ts_softmax_bwd)(int rows, int cols, const TS_R *y, const TS_R *dy, TS_R *dx)
{
  for (int r = 0; r < rows; r++) {
    const TS_R *yr = y + (gint64)r * cols, *dyr = dy + (gint64)r * cols;
    TS_R *dxr = dx + (gint64)r * cols;
    TS_R dot = 0;
    for (int j = 0; j < cols; j++)
      dot += dyr[j] * yr[j];
    for (int j = 0; j < cols; j++)
      dxr[j] = yr[j] * (dyr[j] - dot);
  }
}

double TS_F(ts_xent_fwd)(int rows, int cols, const TS_R *logits, const int *labels, TS_R *prob)
{
  double loss = 0;
  for (int r = 0; r < rows; r++) {
    const TS_R *lr = logits + (gint64)r * cols;
    TS_R *pr = prob + (gint64)r * cols;
    TS_R mx = lr[0];
    for (int j = 1; j < cols; j++)
      mx = MAX(mx, lr[j]);
    TS_R sum = 0;
    for (int j = 0; j < cols; j++) {
      pr[j] = TS_EXP(lr[j] - mx);
      sum += pr[j];
    }
    for (int j = 0; j < cols; j++)
      pr[j] /= sum;
    g_return_val_if_fail(labels[r] >= 0 && labels[r] < cols, NAN);
    /* -log softmax = log-sum-exp - logit, computed from logits, not from a rounded prob. */
    loss += (double)(TS_LOG(sum) + mx - lr[labels[r]]);
  }
  return loss;
}

void TS_F(ts_xent_bwd)(int rows, int cols, const TS_R *prob, const int *labels, TS_R scale,
                       TS_R *dlogits)
{
  for (int r = 0; r < rows; r++) {
    const TS_R *pr = prob + (gint64)r * cols;
    TS_R *dr = dlogits + (gint64)r * cols;
    for (int j = 0; j < cols; j++)
      dr[j] = scale * (pr[j] - (j == labels[r] ? 1 : 0));
  }
}

/* ---------------- Attention ---------------- */

void TS_F(ts_attention_fwd)(int b, int t, int heads, int dh, gboolean causal, const TS_R *q,
                            const TS_R *k, const TS_R *v, int ld, TS_R *p, TS_R *out, int ldo)
{
  const TS_R scale = 1 / TS_SQRT((TS_R)dh);
  for (int s = 0; s < b; s++)
    for (int h = 0; h < heads; h++) {
      gint64 row0 = (gint64)s * t, col0 = (gint64)h * dh;
      const TS_R *qs = q + row0 * ld + col0, *ks = k + row0 * ld + col0;
      const TS_R *vs = v + row0 * ld + col0;
      TS_R *ps = p + ((gint64)s * heads + h) * t * t;
      /* S = Q K^T * scale, then the causal mask (Vaswani et al. 2017, sec. 3.2.3) as -inf
       * before the softmax so masked probabilities are exactly zero. */
      TS_F(ts_gemm)(FALSE, TRUE, t, t, dh, scale, qs, ld, ks, ld, 0, ps, t);
      if (causal)
        for (int i = 0; i < t; i++)
          for (int j = i + 1; j < t; j++)
            ps[(gint64)i * t + j] = -INFINITY;
      TS_F(ts_softmax_fwd)(t, t, ps, ps);
      TS_F(ts_gemm)(FALSE, FALSE, t, dh, t, 1, ps, t, vs, ld, 0, out + row0 * ldo + col0, ldo);
    }
}

void TS_F(ts_attention_bwd)(int b, int t, int heads, int dh, const TS_R *q, const TS_R *k,
                            const TS_R *v, int ld, const TS_R *p, const TS_R *dout, int ldo,
                            TS_R *dq, TS_R *dk, TS_R *dv, TS_R *work)
{
  const TS_R scale = 1 / TS_SQRT((TS_R)dh);
  for (int s = 0; s < b; s++)
    for (int h = 0; h < heads; h++) {
      gint64 row0 = (gint64)s * t, col0 = (gint64)h * dh;
      gint64 off = row0 * ld + col0;
      const TS_R *ps = p + ((gint64)s * heads + h) * t * t;
      const TS_R *dos = dout + row0 * ldo + col0;
      /* dV = P^T dO; dP = dO V^T; dS = softmax backward of dP; dQ = dS K s; dK = dS^T Q s. */
      TS_F(ts_gemm)(TRUE, FALSE, t, dh, t, 1, ps, t, dos, ldo, 0, dv + off, ld);
      TS_F(ts_gemm)(FALSE, TRUE, t, t, dh, 1, dos, ldo, v + off, ld, 0, work, t);
      TS_F(ts_softmax_bwd)(t, t, ps, work, work);
      TS_F(ts_gemm)(FALSE, FALSE, t, dh, t, scale, work, t, k + off, ld, 0, dq + off, ld);
      TS_F(ts_gemm)(TRUE, FALSE, t, dh, t, scale, work, t, q + off, ld, 0, dk + off, ld);
    }
}

void TS_F(ts_rope)(int b, int t, int heads, int dh, TS_R *x, int ld, gboolean inverse)
{
  int half = dh / 2;
  for (int s = 0; s < b; s++)
    for (int i = 0; i < t; i++) {
      TS_R *row = x + ((gint64)s * t + i) * ld;
      for (int j = 0; j < half; j++) {
        /* In double, so both precisions rotate by the same angles. */
        double ang = (double)i * pow(10000.0, -2.0 * j / dh);
        TS_R c = (TS_R)cos(ang), sn = (TS_R)(inverse ? -sin(ang) : sin(ang));
        for (int h = 0; h < heads; h++) {
          TS_R *v = row + (gint64)h * dh;
          TS_R x1 = v[j], x2 = v[j + half];
          v[j] = x1 * c - x2 * sn;
          v[j + half] = x2 * c + x1 * sn;
        }
      }
    }
}

/* Grouped-query attention by expansion: each query head gets a copy of the key/value head it
 * reads, the standard kernels run on the expanded [Q | K | V] (3 heads dh wide), and the
 * gradients of the copies are summed back. Plain and exact (the same products in the same
 * order as a kernel that indexed the shared head), which is what a reference needs. */
static TS_R *TS_F(gqa_expand)(int rows, int heads, int kv_heads, int dh, const TS_R *qkv)
{
  int dq = heads * dh, dkv = kv_heads * dh, ld = dq + 2 * dkv, grp = heads / kv_heads;
  TS_R *x = g_new(TS_R, (gsize)rows * 3 * dq);
  for (gint64 r = 0; r < rows; r++) {
    const TS_R *src = qkv + r * ld;
    TS_R *dst = x + r * 3 * dq;
    memcpy(dst, src, sizeof(TS_R) * (gsize)dq);
    for (int h = 0; h < heads; h++) {
      memcpy(dst + dq + h * dh, src + dq + (h / grp) * dh, sizeof(TS_R) * (gsize)dh);
      memcpy(dst + 2 * dq + h * dh, src + dq + dkv + (h / grp) * dh, sizeof(TS_R) * (gsize)dh);
    }
  }
  return x;
}

void TS_F(ts_gqa_attention_fwd)(int b, int t, int heads, int kv_heads, int dh, gboolean causal,
                                const TS_R *qkv, TS_R *p, TS_R *out)
{
  int dq = heads * dh;
  TS_R *x = TS_F(gqa_expand)(b * t, heads, kv_heads, dh, qkv);
  TS_F(ts_attention_fwd)(b, t, heads, dh, causal, x, x + dq, x + 2 * dq, 3 * dq, p, out, dq);
  g_free(x);
}

void TS_F(ts_gqa_attention_bwd)(int b, int t, int heads, int kv_heads, int dh, const TS_R *qkv,
                                const TS_R *p, const TS_R *dout, TS_R *dqkv)
{
  int rows = b * t, dq = heads * dh, dkv = kv_heads * dh, ld = dq + 2 * dkv, grp = heads / kv_heads;
  TS_R *x = TS_F(gqa_expand)(rows, heads, kv_heads, dh, qkv);
  TS_R *dx = g_new(TS_R, (gsize)rows * 3 * dq), *work = g_new(TS_R, (gsize)t * t);
  TS_F(ts_attention_bwd)
  (b, t, heads, dh, x, x + dq, x + 2 * dq, 3 * dq, p, dout, dq, dx, dx + dq, dx + 2 * dq, work);
  for (gint64 r = 0; r < rows; r++) {
    const TS_R *src = dx + r * 3 * dq;
    TS_R *dst = dqkv + r * ld;
    memcpy(dst, src, sizeof(TS_R) * (gsize)dq);
    memset(dst + dq, 0, sizeof(TS_R) * (gsize)(2 * dkv));
    for (int h = 0; h < heads; h++)
      for (int j = 0; j < dh; j++) {
        dst[dq + (h / grp) * dh + j] += src[dq + h * dh + j];
        dst[dq + dkv + (h / grp) * dh + j] += src[2 * dq + h * dh + j];
      }
  }
  g_free(x);
  g_free(dx);
  g_free(work);
}

/* ---------------- Convolution ---------------- */

/* Output columns [*lo, *hi) whose input column ox*stride - pad + v lies inside [0, w): the
 * rest of a row is padding, so the loops below copy without a test per element. */
static void TS_F(conv_valid)(int pad, int stride, int v, int w, int ow, int *lo, int *hi)
{
  int a = pad - v; /* ox*stride >= pad - v */
  *lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  int b = w + pad - v; /* ox*stride < w + pad - v */
  *hi = b <= 0 ? 0 : MIN(ow, (b + stride - 1) / stride);
  if (*lo > *hi)
    *lo = *hi;
}

/* col[(ci*kh + u)*kw + v][oy*ow + ox] = x[ci][oy*stride - pad + u][ox*stride - pad + v] or 0. */
static void TS_F(im2col)(const ts_conv_shape *s, const TS_R *x, TS_R *col)
{
  int oh = ts_conv_out_h(s), ow = ts_conv_out_w(s);
  for (int ci = 0; ci < s->c; ci++)
    for (int u = 0; u < s->kh; u++)
      for (int vv = 0; vv < s->kw; vv++) {
        TS_R *row = col + ((gint64)(ci * s->kh + u) * s->kw + vv) * oh * ow;
        int lo, hi;
        TS_F(conv_valid)(s->pad, s->stride, vv, s->w, ow, &lo, &hi);
        for (int oy = 0; oy < oh; oy++) {
          int iy = oy * s->stride - s->pad + u;
          TS_R *out = row + (gint64)oy * ow;
          if (iy < 0 || iy >= s->h) {
            memset(out, 0, sizeof(TS_R) * (size_t)ow);
            continue;
          }
          const TS_R *in = x + ((gint64)ci * s->h + iy) * s->w - s->pad + vv;
          for (int ox = 0; ox < lo; ox++)
            out[ox] = 0;
          if (s->stride == 1)
            memcpy(out + lo, in + lo, sizeof(TS_R) * (size_t)(hi - lo));
          else
            for (int ox = lo; ox < hi; ox++)
              out[ox] = in[(gint64)ox * s->stride];
          for (int ox = hi; ox < ow; ox++)
            out[ox] = 0;
        }
      }
}

/* The adjoint of im2col: dx (zeroed here) += every column entry at its source pixel. */
static void TS_F(col2im)(const ts_conv_shape *s, const TS_R *col, TS_R *dx)
{
  int oh = ts_conv_out_h(s), ow = ts_conv_out_w(s);
  memset(dx, 0, sizeof(TS_R) * (size_t)s->c * s->h * s->w);
  for (int ci = 0; ci < s->c; ci++)
    for (int u = 0; u < s->kh; u++)
      for (int vv = 0; vv < s->kw; vv++) {
        const TS_R *row = col + ((gint64)(ci * s->kh + u) * s->kw + vv) * oh * ow;
        int lo, hi;
        TS_F(conv_valid)(s->pad, s->stride, vv, s->w, ow, &lo, &hi);
        for (int oy = 0; oy < oh; oy++) {
          int iy = oy * s->stride - s->pad + u;
          if (iy < 0 || iy >= s->h)
            continue;
          TS_R *out = dx + ((gint64)ci * s->h + iy) * s->w - s->pad + vv;
          const TS_R *in = row + (gint64)oy * ow;
          for (int ox = lo; ox < hi; ox++)
            out[(gint64)ox * s->stride] += in[ox];
        }
      }
}

void TS_F(ts_conv2d_fwd)(const ts_conv_shape *s, const TS_R *x, const TS_R *w, const TS_R *bias,
                         TS_R *y, TS_R *work)
{
  int oh = ts_conv_out_h(s), ow = ts_conv_out_w(s);
  g_return_if_fail(oh > 0 && ow > 0);
  int ohw = oh * ow, ckk = s->c * s->kh * s->kw;
  TS_R *owned = work == NULL ? g_new(TS_R, ts_conv_work_elems(s)) : NULL;
  TS_R *col = work != NULL ? work : owned;
  for (int i = 0; i < s->n; i++) {
    const TS_R *xi = x + (gint64)i * s->c * s->h * s->w;
    TS_R *yi = y + (gint64)i * s->oc * ohw;
    TS_F(im2col)(s, xi, col);
    /* y_i [oc x ohw] = W [oc x ckk] col [ckk x ohw] */
    TS_F(ts_gemm)(FALSE, FALSE, s->oc, ohw, ckk, 1, w, ckk, col, ohw, 0, yi, ohw);
    if (bias != NULL)
      for (int o = 0; o < s->oc; o++)
        for (int j = 0; j < ohw; j++)
          yi[(gint64)o * ohw + j] += bias[o];
  }
  g_free(owned);
}

void TS_F(ts_conv2d_bwd)(const ts_conv_shape *s, const TS_R *x, const TS_R *w, const TS_R *dy,
                         TS_R *dx, TS_R *dw, TS_R *dbias, TS_R *work)
{
  int oh = ts_conv_out_h(s), ow = ts_conv_out_w(s);
  g_return_if_fail(oh > 0 && ow > 0);
  int ohw = oh * ow, ckk = s->c * s->kh * s->kw;
  TS_R *owned = work == NULL ? g_new(TS_R, ts_conv_work_elems(s)) : NULL;
  TS_R *col = work != NULL ? work : owned;
  TS_R *dcol = col + (gint64)ckk * ohw;
  for (int i = 0; i < s->n; i++) {
    const TS_R *xi = x + (gint64)i * s->c * s->h * s->w;
    const TS_R *dyi = dy + (gint64)i * s->oc * ohw;
    TS_F(im2col)(s, xi, col);
    /* dW [oc x ckk] += dy_i [oc x ohw] col^T */
    TS_F(ts_gemm)(FALSE, TRUE, s->oc, ckk, ohw, 1, dyi, ohw, col, ohw, 1, dw, ckk);
    if (dbias != NULL)
      for (int o = 0; o < s->oc; o++)
        for (int j = 0; j < ohw; j++)
          dbias[o] += dyi[(gint64)o * ohw + j];
    if (dx != NULL) {
      /* dcol [ckk x ohw] = W^T dy_i, then scattered back to pixels. */
      TS_F(ts_gemm)(TRUE, FALSE, ckk, ohw, s->oc, 1, w, ckk, dyi, ohw, 0, dcol, ohw);
      TS_F(col2im)(s, dcol, dx + (gint64)i * s->c * s->h * s->w);
    }
  }
  g_free(owned);
}

/* ---------------- Pooling ---------------- */

void TS_F(ts_maxpool_fwd)(int planes, int h, int w, int k, const TS_R *x, TS_R *y, gint32 *argmax)
{
  int oh = h / k, ow = w / k;
  for (int pl = 0; pl < planes; pl++) {
    const TS_R *xp = x + (gint64)pl * h * w;
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++) {
        /* First maximum in row-major window order wins ties, so the choice is deterministic. */
        gint32 best = (gint32)((oy * k) * w + ox * k);
        for (int u = 0; u < k; u++)
          for (int vv = 0; vv < k; vv++) {
            gint32 idx = (gint32)((oy * k + u) * w + ox * k + vv);
            if (xp[idx] > xp[best])
              best = idx;
          }
        gint64 o = ((gint64)pl * oh + oy) * ow + ox;
        y[o] = xp[best];
        argmax[o] = best;
      }
  }
}

void TS_F(ts_maxpool_bwd)(int planes, int h, int w, int k, const TS_R *dy, const gint32 *argmax,
                          TS_R *dx)
{
  int oh = h / k, ow = w / k;
  memset(dx, 0, sizeof(TS_R) * (size_t)planes * h * w);
  for (int pl = 0; pl < planes; pl++)
    for (int o = 0; o < oh * ow; o++) {
      gint64 oi = (gint64)pl * oh * ow + o;
      dx[(gint64)pl * h * w + argmax[oi]] += dy[oi];
    }
}

/* ---------------- Optimizers ---------------- */

TS_STREAM_ATTR void TS_F(ts_sgd_step)(gint64 n, TS_R lr, TS_R momentum, TS_R weight_decay, TS_R *w,
                                      const TS_R *g, TS_R *vel)
{
  for (gint64 i = 0; i < n; i++) {
    TS_R gi = g[i] + weight_decay * w[i];
    if (momentum != 0) {
      vel[i] = momentum * vel[i] + gi;
      gi = vel[i];
    }
    w[i] -= lr * gi;
  }
}

TS_STREAM_ATTR void TS_F(ts_adam_step)(gint64 n, const ts_adam *hp, int step, TS_R *restrict w,
                                       const TS_R *restrict g, TS_R *restrict m, TS_R *restrict v)
{
  g_return_if_fail(step >= 1);
  const TS_R b1 = (TS_R)hp->beta1, b2 = (TS_R)hp->beta2, eps = (TS_R)hp->eps;
  const TS_R lr = (TS_R)hp->lr, decay = (TS_R)(hp->lr * hp->weight_decay);
  /* Bias corrections in double: 1 - beta^step loses digits in float for small steps. */
  const TS_R c1 = (TS_R)(1.0 / (1.0 - pow(hp->beta1, step)));
  const TS_R c2 = (TS_R)(1.0 / (1.0 - pow(hp->beta2, step)));
  for (gint64 i = 0; i < n; i++) {
    TS_R gi = g[i];
    TS_R mi = b1 * m[i] + (1 - b1) * gi;
    TS_R vi = b2 * v[i] + (1 - b2) * gi * gi;
    TS_R mhat = mi * c1, vhat = vi * c2;
    TS_R wi = w[i] - decay * w[i];
    w[i] = wi - lr * mhat / (TS_SQRT(vhat) + eps);
    m[i] = mi;
    v[i] = vi;
  }
}

#undef TS_NR
