/* test_numeric: kernels against naive fp64 references, finite-difference gradient checks of
 * every layer type and of each small network, optimizer steps against hand-computed values. */
#include "ts_nnet.h"
#include "ts_numeric.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* ---------------- helpers ---------------- */

static double *randv(ts_rng *r, gint64 n, double scale)
{
  double *v = g_new(double, n);
  for (gint64 i = 0; i < n; i++)
    v[i] = scale * ts_rng_normal(r);
  return v;
}

static float *tof(const double *v, gint64 n)
{
  float *f = g_new(float, n);
  for (gint64 i = 0; i < n; i++)
    f[i] = (float)v[i];
  return f;
}

/* ||a - b|| / max(||b||, tiny): the normwise relative error used throughout. */
static double relerr(const double *a, const double *b, gint64 n)
{
  double num = 0, den = 0;
  for (gint64 i = 0; i < n; i++) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return sqrt(num) / fmax(sqrt(den), 1e-300);
}

static double relerr_f(const float *a, const double *b, gint64 n)
{
  double num = 0, den = 0;
  for (gint64 i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += b[i] * b[i];
  }
  return sqrt(num) / fmax(sqrt(den), 1e-300);
}

static double dot(const double *a, const double *b, gint64 n)
{
  double s = 0;
  for (gint64 i = 0; i < n; i++)
    s += a[i] * b[i];
  return s;
}

/* Naive C = alpha op(A) op(B) + beta C in fp64. */
static void gemm_ref(gboolean ta, gboolean tb, int m, int n, int k, double alpha, const double *a,
                     int lda, const double *b, int ldb, double beta, double *c, int ldc)
{
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int p = 0; p < k; p++)
        s += (ta ? a[(gint64)p * lda + i] : a[(gint64)i * lda + p]) *
             (tb ? b[(gint64)j * ldb + p] : b[(gint64)p * ldb + j]);
      c[(gint64)i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * c[(gint64)i * ldc + j]);
    }
}

/* ---------------- GEMM ---------------- */

static void check_gemm(int m, int n, int k, double alpha, double beta, int pad)
{
  ts_rng r;
  ts_rng_seed(&r, (guint64)(m * 7919 + n * 31 + k));
  for (int v = 0; v < 4; v++) {
    gboolean ta = v & 1, tb = v >> 1;
    int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    gint64 na = (gint64)(ta ? k : m) * lda, nb = (gint64)(tb ? n : k) * ldb, nc = (gint64)m * ldc;
    double *a = randv(&r, na, 1), *b = randv(&r, nb, 1), *c0 = randv(&r, nc, 1);
    double *want = g_memdup2(c0, sizeof(double) * nc), *got = g_memdup2(c0, sizeof(double) * nc);
    if (beta == 0) /* beta = 0 must not read C: poison it (not the padding, never touched) */
      for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
          got[(gint64)i * ldc + j] = NAN;
    gemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc);
    ts_gemm_f64(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, got, ldc);
    double e64 = relerr(got, want, nc);
    cr_expect(e64 < 1e-13, "f64 gemm %dx%dx%d ta=%d tb=%d: rel err %g", m, n, k, ta, tb, e64);
    float *af = tof(a, na), *bf = tof(b, nb), *cf = tof(c0, nc);
    ts_gemm_f32(ta, tb, m, n, k, (float)alpha, af, lda, bf, ldb, (float)beta, cf, ldc);
    /* fp32 rounding grows like sqrt(k) eps for random signs; 1e-5 covers k up to 4096. */
    double e32 = relerr_f(cf, want, nc);
    cr_expect(e32 < 1e-5, "f32 gemm %dx%dx%d ta=%d tb=%d: rel err %g", m, n, k, ta, tb, e32);
    g_free(a), g_free(b), g_free(c0), g_free(want), g_free(got), g_free(af), g_free(bf), g_free(cf);
  }
}

Test(gemm, small_and_edge_shapes)
{
  check_gemm(1, 1, 1, 1, 0, 0);
  check_gemm(5, 7, 3, 1, 0, 0);
  check_gemm(6, 16, 8, 1, 0, 0);      /* exactly one fp32 register tile */
  check_gemm(13, 17, 19, -0.5, 1, 3); /* edge tiles on both axes, strided */
  check_gemm(0 + 2, 3, 0 + 1, 2, 0.25, 1);
}

Test(gemm, crosses_every_block_boundary)
{
  check_gemm(97, 33, 300, 1, 1, 0);  /* m > MC = 96, k > KC = 256 */
  check_gemm(7, 2100, 5, 1.5, 0, 2); /* n > NC = 2048 */
  check_gemm(200, 150, 513, 1, -1, 0);
}

Test(gemm, k_zero_scales_c)
{
  double c[4] = {1, 2, 3, 4}, a[1] = {0}, b[1] = {0};
  ts_gemm_f64(FALSE, FALSE, 2, 2, 0, 1, a, 1, b, 2, 0.5, c, 2);
  double c3 = c[3];
  cr_assert_float_eq(c3, 2.0, 0.0);
}

/* ---------------- element-wise and row kernels vs formulas ---------------- */

Test(kernels, relu_gelu_values)
{
  double x[5] = {-2, -0.5, 0, 0.5, 2}, y[5], dx[5], one[5] = {1, 1, 1, 1, 1};
  ts_relu_fwd_f64(5, x, y);
  double y0 = y[0], y4 = y[4];
  cr_assert(y0 == 0 && y4 == 2);
  ts_gelu_fwd_f64(5, x, y);
  for (int i = 0; i < 5; i++) {
    double want = x[i] * 0.5 * (1 + erf(x[i] / sqrt(2.0)));
    double got = y[i];
    cr_expect_float_eq(got, want, 1e-15);
  }
  /* GELU(1) = Phi(1) = 0.8413447460685429 (standard normal table). */
  double one_in = 1, one_out;
  ts_gelu_fwd_f64(1, &one_in, &one_out);
  cr_expect_float_eq(one_out, 0.8413447460685429, 1e-15);
  ts_gelu_bwd_f64(5, x, one, dx);
  double d0 = dx[2];
  cr_expect_float_eq(d0, 0.5, 1e-15); /* Phi(0) + 0 */
}

Test(kernels, layernorm_matches_definition)
{
  ts_rng r;
  ts_rng_seed(&r, 3);
  int rows = 3, cols = 10;
  double *x = randv(&r, rows * cols, 2), *g = randv(&r, cols, 1), *b = randv(&r, cols, 1);
  double y[30], mean[3], rstd[3];
  ts_layernorm_fwd_f64(rows, cols, 1e-5, x, g, b, y, mean, rstd);
  for (int i = 0; i < rows; i++) {
    double mu = 0, var = 0;
    for (int j = 0; j < cols; j++)
      mu += x[i * cols + j] / cols;
    for (int j = 0; j < cols; j++)
      var += (x[i * cols + j] - mu) * (x[i * cols + j] - mu) / cols;
    for (int j = 0; j < cols; j++) {
      double want = (x[i * cols + j] - mu) / sqrt(var + 1e-5) * g[j] + b[j];
      double got = y[i * cols + j];
      cr_expect_float_eq(got, want, 1e-13);
    }
  }
  g_free(x), g_free(g), g_free(b);
}

Test(kernels, softmax_xent_known_values)
{
  /* Equal logits: p = 1/C, loss = log C per row. */
  double logits[8] = {3, 3, 3, 3, -1, -1, -1, -1}, prob[8];
  int labels[2] = {1, 3};
  double loss = ts_xent_fwd_f64(2, 4, logits, labels, prob);
  cr_expect_float_eq(loss, 2 * log(4.0), 1e-14);
  double p0 = prob[0];
  cr_expect_float_eq(p0, 0.25, 1e-15);
  /* Large logits do not overflow (max-shifted). */
  double big[2] = {1000, 0};
  int l0 = 0;
  double loss_big = ts_xent_fwd_f64(1, 2, big, &l0, prob);
  cr_expect(loss_big >= 0 && loss_big < 1e-300 + 1e-10, "loss %g", loss_big);
  float bigf[2] = {100, 0}, pf[2];
  double loss_f = ts_xent_fwd_f32(1, 2, bigf, &l0, pf);
  cr_expect(isfinite(loss_f));
}

/* Direct convolution from the definition. */
static void conv_ref(const ts_conv_shape *s, const double *x, const double *w, const double *b,
                     double *y)
{
  int oh = ts_conv_out_h(s), ow = ts_conv_out_w(s);
  for (int n = 0; n < s->n; n++)
    for (int o = 0; o < s->oc; o++)
      for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
          double acc = b[o];
          for (int c = 0; c < s->c; c++)
            for (int u = 0; u < s->kh; u++)
              for (int v = 0; v < s->kw; v++) {
                int iy = oy * s->stride - s->pad + u, ix = ox * s->stride - s->pad + v;
                if (iy >= 0 && iy < s->h && ix >= 0 && ix < s->w)
                  acc += w[((o * s->c + c) * s->kh + u) * s->kw + v] *
                         x[((n * s->c + c) * s->h + iy) * s->w + ix];
              }
          y[((n * s->oc + o) * oh + oy) * ow + ox] = acc;
        }
}

Test(kernels, conv2d_matches_direct)
{
  ts_conv_shape shapes[] = {
      {.n = 2, .c = 3, .h = 7, .w = 6, .oc = 4, .kh = 3, .kw = 3, .stride = 1, .pad = 1},
      {.n = 1, .c = 2, .h = 9, .w = 8, .oc = 5, .kh = 3, .kw = 2, .stride = 2, .pad = 1},
      {.n = 3, .c = 1, .h = 5, .w = 5, .oc = 2, .kh = 5, .kw = 5, .stride = 1, .pad = 0},
  };
  ts_rng r;
  ts_rng_seed(&r, 11);
  for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++) {
    ts_conv_shape *s = &shapes[i];
    gint64 nx = (gint64)s->n * s->c * s->h * s->w, nw = (gint64)s->oc * s->c * s->kh * s->kw;
    gint64 ny = (gint64)s->n * s->oc * ts_conv_out_h(s) * ts_conv_out_w(s);
    double *x = randv(&r, nx, 1), *w = randv(&r, nw, 1), *b = randv(&r, s->oc, 1);
    double *want = g_new(double, ny), *got = g_new(double, ny);
    conv_ref(s, x, w, b, want);
    ts_conv2d_fwd_f64(s, x, w, b, got, NULL);
    double e = relerr(got, want, ny);
    cr_expect(e < 1e-14, "conv shape %zu: rel err %g", i, e);
    g_free(x), g_free(w), g_free(b), g_free(want), g_free(got);
  }
}

Test(kernels, maxpool_and_attention_match_naive)
{
  double x[2 * 4 * 4], y[2 * 2 * 2];
  gint32 am[8];
  for (int i = 0; i < 32; i++)
    x[i] = (double)((i * 7) % 13);
  ts_maxpool_fwd_f64(2, 4, 4, 2, x, y, am);
  for (int p = 0; p < 2; p++)
    for (int oy = 0; oy < 2; oy++)
      for (int ox = 0; ox < 2; ox++) {
        double m = -INFINITY;
        for (int u = 0; u < 2; u++)
          for (int v = 0; v < 2; v++)
            m = fmax(m, x[p * 16 + (oy * 2 + u) * 4 + ox * 2 + v]);
        double got = y[(p * 2 + oy) * 2 + ox];
        cr_expect_float_eq(got, m, 0.0);
      }
  /* Attention, 2 sequences x 3 tokens, 2 heads of 2, causal, against the formula. */
  ts_rng r;
  ts_rng_seed(&r, 5);
  int b = 2, t = 3, h = 2, dh = 2, d = h * dh;
  double *qkv = randv(&r, b * t * 3 * d, 1), out[2 * 3 * 4], p[2 * 2 * 3 * 3];
  ts_attention_fwd_f64(b, t, h, dh, TRUE, qkv, qkv + d, qkv + 2 * d, 3 * d, p, out, d);
  for (int s = 0; s < b; s++)
    for (int hh = 0; hh < h; hh++)
      for (int i = 0; i < t; i++) {
        double sc[3], mx = -INFINITY, sum = 0;
        for (int j = 0; j <= i; j++) {
          sc[j] = 0;
          for (int e = 0; e < dh; e++)
            sc[j] +=
                qkv[(s * t + i) * 3 * d + hh * dh + e] * qkv[(s * t + j) * 3 * d + d + hh * dh + e];
          sc[j] /= sqrt((double)dh);
          mx = fmax(mx, sc[j]);
        }
        for (int j = 0; j <= i; j++)
          sum += exp(sc[j] - mx);
        for (int e = 0; e < dh; e++) {
          double want = 0;
          for (int j = 0; j <= i; j++)
            want += exp(sc[j] - mx) / sum * qkv[(s * t + j) * 3 * d + 2 * d + hh * dh + e];
          double got = out[(s * t + i) * d + hh * dh + e];
          cr_expect_float_eq(got, want, 1e-14);
        }
      }
  g_free(qkv);
}

/* ---------------- finite-difference gradient checks of each layer type ---------------- */

/* A layer under test: loss(ctx) = sum(r . f(inputs)), and grads() fills the analytic
 * gradients of every input for dy = r. */
typedef struct {
  double (*loss)(void *ctx);
  void *ctx;
} fd_fn;

/* Central differences (h = 1e-6) of loss with respect to every element of v, compared
 * normwise with the analytic gradient. fp64 throughout. */
static double fd_err(fd_fn f, double *v, gint64 n, const double *analytic)
{
  const double h = 1e-6;
  double *fd = g_new(double, n);
  for (gint64 i = 0; i < n; i++) {
    double keep = v[i];
    v[i] = keep + h;
    double lp = f.loss(f.ctx);
    v[i] = keep - h;
    double lm = f.loss(f.ctx);
    v[i] = keep;
    fd[i] = (lp - lm) / (2 * h);
  }
  double e = relerr(analytic, fd, n);
  g_free(fd);
  return e;
}

#define FD_TOL 1e-6
#define EXPECT_FD(f, v, n, g, what)                                                                \
  do {                                                                                             \
    double e_ = fd_err(f, v, n, g);                                                                \
    cr_expect(e_ < FD_TOL, "%s: finite-difference rel err %g", what, e_);                          \
  } while (0)

/* Dense: y = x W + b, W [in x out]. */
typedef struct {
  int rows, in, out;
  double *x, *w, *b, *r;
} dense_ctx;

static double dense_loss(void *p)
{
  dense_ctx *c = p;
  double *y = g_new(double, c->rows * c->out);
  ts_gemm_f64(FALSE, FALSE, c->rows, c->out, c->in, 1, c->x, c->in, c->w, c->out, 0, y, c->out);
  ts_bias_add_f64(c->rows, c->out, c->b, y);
  double l = dot(y, c->r, c->rows * c->out);
  g_free(y);
  return l;
}

Test(gradcheck, dense_bias)
{
  ts_rng rg;
  ts_rng_seed(&rg, 21);
  dense_ctx c = {.rows = 4, .in = 5, .out = 3};
  c.x = randv(&rg, 20, 1), c.w = randv(&rg, 15, 1), c.b = randv(&rg, 3, 1), c.r = randv(&rg, 12, 1);
  double dx[20], dw[15] = {0}, db[3] = {0};
  ts_gemm_f64(TRUE, FALSE, c.in, c.out, c.rows, 1, c.x, c.in, c.r, c.out, 1, dw, c.out);
  ts_gemm_f64(FALSE, TRUE, c.rows, c.in, c.out, 1, c.r, c.out, c.w, c.out, 0, dx, c.in);
  ts_bias_grad_f64(c.rows, c.out, c.r, db);
  fd_fn f = {dense_loss, &c};
  EXPECT_FD(f, c.x, 20, dx, "dense dx (A B^T)");
  EXPECT_FD(f, c.w, 15, dw, "dense dW (A^T B)");
  EXPECT_FD(f, c.b, 3, db, "bias");
  g_free(c.x), g_free(c.w), g_free(c.b), g_free(c.r);
}

/* Element-wise activation y = f(x). */
typedef struct {
  int n, kind; /* 0 relu, 1 gelu, 2 softmax rows of 5 */
  double *x, *r;
} act_ctx;

static double act_loss(void *p)
{
  act_ctx *c = p;
  double *y = g_new(double, c->n);
  if (c->kind == 0)
    ts_relu_fwd_f64(c->n, c->x, y);
  else if (c->kind == 1)
    ts_gelu_fwd_f64(c->n, c->x, y);
  else
    ts_softmax_fwd_f64(c->n / 5, 5, c->x, y);
  double l = dot(y, c->r, c->n);
  g_free(y);
  return l;
}

Test(gradcheck, relu_gelu_softmax)
{
  ts_rng rg;
  ts_rng_seed(&rg, 22);
  for (int kind = 0; kind < 3; kind++) {
    act_ctx c = {.n = 20, .kind = kind};
    c.x = randv(&rg, 20, 1.5), c.r = randv(&rg, 20, 1);
    /* Keep ReLU inputs away from the kink, where the derivative does not exist. */
    for (int i = 0; i < 20; i++)
      if (fabs(c.x[i]) < 1e-3)
        c.x[i] = 0.5;
    double dx[20], y[20];
    if (kind == 0)
      ts_relu_bwd_f64(20, c.x, c.r, dx);
    else if (kind == 1)
      ts_gelu_bwd_f64(20, c.x, c.r, dx);
    else {
      ts_softmax_fwd_f64(4, 5, c.x, y);
      ts_softmax_bwd_f64(4, 5, y, c.r, dx);
    }
    fd_fn f = {act_loss, &c};
    EXPECT_FD(f, c.x, 20, dx, kind == 0 ? "relu" : kind == 1 ? "gelu" : "softmax");
    g_free(c.x), g_free(c.r);
  }
}

typedef struct {
  int rows, cols;
  double *x, *g, *b, *r;
} ln_ctx;

static double ln_loss(void *p)
{
  ln_ctx *c = p;
  double *y = g_new(double, c->rows * c->cols), mean[8], rstd[8];
  ts_layernorm_fwd_f64(c->rows, c->cols, 1e-5, c->x, c->g, c->b, y, mean, rstd);
  double l = dot(y, c->r, c->rows * c->cols);
  g_free(y);
  return l;
}

Test(gradcheck, layernorm)
{
  ts_rng rg;
  ts_rng_seed(&rg, 23);
  ln_ctx c = {.rows = 3, .cols = 7};
  c.x = randv(&rg, 21, 2), c.g = randv(&rg, 7, 1), c.b = randv(&rg, 7, 1), c.r = randv(&rg, 21, 1);
  double y[21], mean[3], rstd[3], dx[21], dg[7] = {0}, db[7] = {0};
  ts_layernorm_fwd_f64(3, 7, 1e-5, c.x, c.g, c.b, y, mean, rstd);
  ts_layernorm_bwd_f64(3, 7, c.x, c.g, mean, rstd, c.r, dx, dg, db);
  fd_fn f = {ln_loss, &c};
  EXPECT_FD(f, c.x, 21, dx, "layernorm dx");
  EXPECT_FD(f, c.g, 7, dg, "layernorm dgamma");
  EXPECT_FD(f, c.b, 7, db, "layernorm dbeta");
  g_free(c.x), g_free(c.g), g_free(c.b), g_free(c.r);
}

typedef struct {
  double *x;
  int labels[4];
} xent_ctx;

static double xent_loss(void *p)
{
  xent_ctx *c = p;
  double prob[24];
  return ts_xent_fwd_f64(4, 6, c->x, c->labels, prob) / 4;
}

Test(gradcheck, softmax_cross_entropy)
{
  ts_rng rg;
  ts_rng_seed(&rg, 24);
  xent_ctx c = {.labels = {0, 5, 2, 2}};
  c.x = randv(&rg, 24, 2);
  double prob[24], dx[24];
  ts_xent_fwd_f64(4, 6, c.x, c.labels, prob);
  ts_xent_bwd_f64(4, 6, prob, c.labels, 0.25, dx);
  fd_fn f = {xent_loss, &c};
  EXPECT_FD(f, c.x, 24, dx, "softmax cross-entropy");
  g_free(c.x);
}

typedef struct {
  int b, t, h, dh;
  gboolean causal;
  double *qkv, *r;
} att_ctx;

static double att_loss(void *p)
{
  att_ctx *c = p;
  int d = c->h * c->dh, rows = c->b * c->t;
  double *out = g_new(double, rows *d), *pr = g_new(double, c->b * c->h * c->t * c->t);
  ts_attention_fwd_f64(c->b, c->t, c->h, c->dh, c->causal, c->qkv, c->qkv + d, c->qkv + 2 * d,
                       3 * d, pr, out, d);
  double l = dot(out, c->r, rows * d);
  g_free(out), g_free(pr);
  return l;
}

Test(gradcheck, attention)
{
  ts_rng rg;
  ts_rng_seed(&rg, 25);
  for (int causal = 0; causal < 2; causal++) {
    att_ctx c = {.b = 2, .t = 4, .h = 2, .dh = 3, .causal = causal};
    int d = c.h * c.dh, rows = c.b * c.t;
    c.qkv = randv(&rg, rows * 3 * d, 1), c.r = randv(&rg, rows * d, 1);
    double *out = g_new(double, rows *d), *pr = g_new(double, c.b *c.h *c.t *c.t);
    double *dqkv = g_new(double, rows * 3 * d), work[16];
    ts_attention_fwd_f64(c.b, c.t, c.h, c.dh, causal, c.qkv, c.qkv + d, c.qkv + 2 * d, 3 * d, pr,
                         out, d);
    ts_attention_bwd_f64(c.b, c.t, c.h, c.dh, c.qkv, c.qkv + d, c.qkv + 2 * d, 3 * d, pr, c.r, d,
                         dqkv, dqkv + d, dqkv + 2 * d, work);
    fd_fn f = {att_loss, &c};
    EXPECT_FD(f, c.qkv, rows * 3 * d, dqkv, causal ? "causal attention" : "attention");
    g_free(c.qkv), g_free(c.r), g_free(out), g_free(pr), g_free(dqkv);
  }
}

typedef struct {
  ts_conv_shape s;
  double *x, *w, *b, *r;
} conv_ctx;

static double conv_loss(void *p)
{
  conv_ctx *c = p;
  gint64 ny = (gint64)c->s.n * c->s.oc * ts_conv_out_h(&c->s) * ts_conv_out_w(&c->s);
  double *y = g_new(double, ny);
  ts_conv2d_fwd_f64(&c->s, c->x, c->w, c->b, y, NULL);
  double l = dot(y, c->r, ny);
  g_free(y);
  return l;
}

Test(gradcheck, conv2d)
{
  ts_conv_shape shapes[] = {
      {.n = 2, .c = 2, .h = 5, .w = 4, .oc = 3, .kh = 3, .kw = 3, .stride = 1, .pad = 1},
      {.n = 1, .c = 3, .h = 7, .w = 6, .oc = 2, .kh = 3, .kw = 2, .stride = 2, .pad = 1},
  };
  ts_rng rg;
  ts_rng_seed(&rg, 26);
  for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++) {
    conv_ctx c = {.s = shapes[i]};
    ts_conv_shape *s = &c.s;
    gint64 nx = (gint64)s->n * s->c * s->h * s->w, nw = (gint64)s->oc * s->c * s->kh * s->kw;
    gint64 ny = (gint64)s->n * s->oc * ts_conv_out_h(s) * ts_conv_out_w(s);
    c.x = randv(&rg, nx, 1), c.w = randv(&rg, nw, 1), c.b = randv(&rg, s->oc, 1);
    c.r = randv(&rg, ny, 1);
    double *dx = g_new(double, nx), *dw = g_new0(double, nw), *db = g_new0(double, s->oc);
    ts_conv2d_bwd_f64(s, c.x, c.w, c.r, dx, dw, db, NULL);
    fd_fn f = {conv_loss, &c};
    EXPECT_FD(f, c.x, nx, dx, "conv dx");
    EXPECT_FD(f, c.w, nw, dw, "conv dw");
    EXPECT_FD(f, c.b, s->oc, db, "conv dbias");
    g_free(c.x), g_free(c.w), g_free(c.b), g_free(c.r), g_free(dx), g_free(dw), g_free(db);
  }
}

typedef struct {
  double *x, *r;
} pool_ctx;

static double pool_loss(void *p)
{
  pool_ctx *c = p;
  double y[2 * 3 * 2];
  gint32 am[12];
  ts_maxpool_fwd_f64(2, 6, 5, 2, c->x, y, am); /* 6x5 planes: the last column is dropped */
  return dot(y, c->r, 12);
}

Test(gradcheck, maxpool)
{
  ts_rng rg;
  ts_rng_seed(&rg, 27);
  pool_ctx c;
  c.x = randv(&rg, 60, 1), c.r = randv(&rg, 12, 1);
  double y[12], dx[60];
  gint32 am[12];
  ts_maxpool_fwd_f64(2, 6, 5, 2, c.x, y, am);
  ts_maxpool_bwd_f64(2, 6, 5, 2, c.r, am, dx);
  fd_fn f = {pool_loss, &c};
  EXPECT_FD(f, c.x, 60, dx, "maxpool");
  g_free(c.x), g_free(c.r);
}

/* ---------------- whole networks ---------------- */

typedef struct {
  ts_nnet *net;
} net_ctx;

static double net_loss(void *p)
{
  net_ctx *c = p;
  return ts_nnet_forward(c->net, 0, ts_nnet_config_of(c->net)->batch);
}

/* Every parameter of every tensor by central differences through ts_nnet_set; kv_heads > 0
 * makes the transformer's attention grouped-query. */
static void check_net_cfg(ts_nnet_kind kind, int kv_heads, gboolean gated)
{
  ts_nnet_config cfg;
  ts_nnet_config_default(kind, &cfg);
  cfg.kv_heads = kv_heads;
  cfg.gated = gated;
  cfg.rotary = gated; /* the Llama-style block: GQA, SwiGLU and rotary together */
  g_autoptr(GError) err = NULL;
  g_autoptr(ts_nnet) net = ts_nnet_new(&cfg, TS_PREC_F64, &err);
  cr_assert_not_null(net, "%s", err ? err->message : "");
  ts_nnet_zero_grad(net);
  double loss = ts_nnet_forward_backward(net, 0, cfg.batch);
  cr_assert(isfinite(loss) && loss > 0);
  net_ctx c = {net};
  for (int i = 0; i < ts_nnet_ntensors(net); i++) {
    const ts_nnet_tensor_info *t = ts_nnet_tensor(net, i);
    double *w = g_new(double, t->numel), *g = g_new(double, t->numel);
    double *fd = g_new(double, t->numel);
    ts_nnet_get(net, i, TS_NNET_PARAM, w);
    ts_nnet_get(net, i, TS_NNET_GRAD, g);
    for (gint64 j = 0; j < t->numel; j++) {
      const double h = 1e-6, keep = w[j];
      w[j] = keep + h;
      ts_nnet_set(net, i, TS_NNET_PARAM, w);
      double lp = net_loss(&c);
      w[j] = keep - h;
      ts_nnet_set(net, i, TS_NNET_PARAM, w);
      double lm = net_loss(&c);
      w[j] = keep;
      ts_nnet_set(net, i, TS_NNET_PARAM, w);
      fd[j] = (lp - lm) / (2 * h);
    }
    double e = relerr(g, fd, t->numel);
    cr_expect(e < FD_TOL, "%s %s: finite-difference rel err %g (|g| %g)", ts_nnet_kind_name(kind),
              t->name, e, sqrt(dot(g, g, t->numel)));
    double gnorm = sqrt(dot(g, g, t->numel));
    cr_expect(gnorm > 0, "%s %s: zero gradient (the check would be vacuous)",
              ts_nnet_kind_name(kind), t->name);
    g_free(w), g_free(g), g_free(fd);
  }
}

static void check_net(ts_nnet_kind kind)
{
  check_net_cfg(kind, 0, FALSE);
}

Test(network, mlp_gradients_match_finite_differences)
{
  check_net(TS_NNET_MLP);
}

Test(network, cnn_gradients_match_finite_differences)
{
  check_net(TS_NNET_CNN);
}

Test(network, transformer_gradients_match_finite_differences)
{
  check_net(TS_NNET_TRANSFORMER);
}

Test(network, grouped_query_transformer_gradients_match_finite_differences)
{
  /* The default block's 2 heads sharing 1 key/value head (multi-query): the fused projection
   * is dmodel + 2 dmodel / 2 wide, and each key/value gradient sums over both query heads. */
  ts_nnet_config cfg;
  ts_nnet_config_default(TS_NNET_TRANSFORMER, &cfg);
  cr_assert_eq(cfg.heads, 2);
  cfg.kv_heads = 1;
  gint64 w = ts_nnet_qkv_width(&cfg);
  cr_assert_eq(w, cfg.dmodel * 2);
  check_net_cfg(TS_NNET_TRANSFORMER, 1, FALSE);
}

Test(kernels, rope_rotates_pairs_and_inverts)
{
  /* Rotary embedding is a rotation per pair: position 0 is unchanged, norms are kept, the
   * inverse restores the input, and position i, pair j turns by i 10000^(-2j/dh). */
  const int b = 2, t = 5, heads = 3, dh = 4, ld = heads * dh + 1;
  double x[2 * 5 * 13], y[2 * 5 * 13];
  for (int i = 0; i < b * t * ld; i++)
    x[i] = y[i] = sin(0.7 * i + 0.3);
  ts_rope_f64(b, t, heads, dh, y, ld, FALSE);
  for (int s = 0; s < b; s++)
    for (int i = 0; i < t; i++) {
      const double *xr = x + (s * t + i) * ld, *yr = y + (s * t + i) * ld;
      for (int h = 0; h < heads; h++)
        for (int j = 0; j < dh / 2; j++) {
          double a = i * pow(10000.0, -2.0 * j / dh);
          double x1 = xr[h * dh + j], x2 = xr[h * dh + j + dh / 2];
          double w1 = x1 * cos(a) - x2 * sin(a), w2 = x2 * cos(a) + x1 * sin(a);
          cr_assert_float_eq(yr[h * dh + j], w1, 1e-14);
          cr_assert_float_eq(yr[h * dh + j + dh / 2], w2, 1e-14);
        }
      cr_assert_eq(yr[ld - 1], xr[ld - 1], "the column past the heads is untouched");
    }
  ts_rope_f64(b, t, heads, dh, y, ld, TRUE);
  for (int i = 0; i < b * t * ld; i++)
    cr_assert_float_eq(y[i], x[i], 1e-14);
}

Test(network, swiglu_transformer_gradients_match_finite_differences)
{
  /* The block with a SwiGLU MLP (W1 dmodel x 2 dff), grouped-query attention and rotary
   * embeddings on Q and K, as Llama. */
  check_net_cfg(TS_NNET_TRANSFORMER, 1, TRUE);
}

/* Data-parallel identity the validator relies on: gradients of batch ranges add up to the
 * full-batch gradient, and the losses to the full-batch loss. */
Test(network, batch_ranges_sum_to_full_batch)
{
  for (int kind = 0; kind < TS_NNET_NKINDS; kind++) {
    ts_nnet_config cfg;
    ts_nnet_config_default(kind, &cfg);
    cfg.batch = 5;
    g_autoptr(ts_nnet) full = ts_nnet_new(&cfg, TS_PREC_F64, NULL);
    g_autoptr(ts_nnet) split = ts_nnet_new(&cfg, TS_PREC_F64, NULL);
    ts_nnet_zero_grad(full);
    ts_nnet_zero_grad(split);
    double lf = ts_nnet_forward_backward(full, 0, 5);
    double ls = ts_nnet_forward_backward(split, 0, 2) + ts_nnet_forward_backward(split, 2, 3) +
                ts_nnet_forward_backward(split, 3, 5);
    cr_expect_float_eq(ls, lf, 1e-14 * fabs(lf), "%s loss", ts_nnet_kind_name(kind));
    for (int i = 0; i < ts_nnet_ntensors(full); i++) {
      gint64 n = ts_nnet_tensor(full, i)->numel;
      double *a = g_new(double, n), *b = g_new(double, n);
      ts_nnet_get(full, i, TS_NNET_GRAD, a);
      ts_nnet_get(split, i, TS_NNET_GRAD, b);
      double e = relerr(b, a, n);
      cr_expect(e < 1e-13, "%s %s: rel err %g", ts_nnet_kind_name(kind),
                ts_nnet_tensor(full, i)->name, e);
      g_free(a), g_free(b);
    }
  }
}

/* fp32 networks start from the same (rounded) values and agree with fp64 to fp32 accuracy. */
Test(network, fp32_agrees_with_fp64_and_is_deterministic)
{
  for (int kind = 0; kind < TS_NNET_NKINDS; kind++) {
    ts_nnet_config cfg;
    ts_nnet_config_default(kind, &cfg);
    g_autoptr(ts_nnet) a = ts_nnet_new(&cfg, TS_PREC_F32, NULL);
    g_autoptr(ts_nnet) a2 = ts_nnet_new(&cfg, TS_PREC_F32, NULL);
    g_autoptr(ts_nnet) d = ts_nnet_new(&cfg, TS_PREC_F64, NULL);
    ts_nnet_zero_grad(a), ts_nnet_zero_grad(a2), ts_nnet_zero_grad(d);
    double la = ts_nnet_forward_backward(a, 0, cfg.batch);
    double la2 = ts_nnet_forward_backward(a2, 0, cfg.batch);
    double ld = ts_nnet_forward_backward(d, 0, cfg.batch);
    cr_expect(la == la2, "same seed, same loss bit for bit");
    cr_expect_float_eq(la, ld, 1e-5 * ld);
    for (int i = 0; i < ts_nnet_ntensors(a); i++) {
      gint64 n = ts_nnet_tensor(a, i)->numel;
      double *ga = g_new(double, n), *ga2 = g_new(double, n), *gd = g_new(double, n);
      ts_nnet_get(a, i, TS_NNET_GRAD, ga);
      ts_nnet_get(a2, i, TS_NNET_GRAD, ga2);
      ts_nnet_get(d, i, TS_NNET_GRAD, gd);
      cr_expect(memcmp(ga, ga2, sizeof(double) * n) == 0);
      double e = relerr(ga, gd, n);
      cr_expect(e < 1e-4, "%s %s: fp32 vs fp64 rel err %g", ts_nnet_kind_name(kind),
                ts_nnet_tensor(a, i)->name, e);
      g_free(ga), g_free(ga2), g_free(gd);
    }
  }
}

Test(network, training_lowers_the_loss)
{
  for (int kind = 0; kind < TS_NNET_NKINDS; kind++) {
    ts_nnet_config cfg;
    ts_nnet_config_default(kind, &cfg);
    g_autoptr(ts_nnet) net = ts_nnet_new(&cfg, TS_PREC_F32, NULL);
    ts_adam hp = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    double first = 0, last = 0;
    for (int step = 0; step < 30; step++) {
      ts_nnet_zero_grad(net);
      last = ts_nnet_forward_backward(net, 0, cfg.batch);
      if (step == 0)
        first = last;
      ts_nnet_adam(net, &hp);
    }
    cr_expect(last < 0.5 * first, "%s: loss %g -> %g", ts_nnet_kind_name(kind), first, last);
  }
}

Test(network, bad_config_is_one_line_error)
{
  ts_nnet_config cfg;
  ts_nnet_config_default(TS_NNET_TRANSFORMER, &cfg);
  cfg.heads = 3;
  g_autoptr(GError) err = NULL;
  g_autoptr(ts_nnet) net = ts_nnet_new(&cfg, TS_PREC_F64, &err);
  cr_assert_null(net);
  cr_assert_not_null(err);
  cr_expect(strstr(err->message, "heads=3") != NULL && strchr(err->message, '\n') == NULL, "%s",
            err->message);
}

/* ---------------- optimizers against hand-computed values ---------------- */

Test(optim, sgd_momentum_weight_decay)
{
  /* w = 1, lr 0.1, momentum 0.9, weight decay 0.01.
   * step 1, g = 0.5: g' = 0.5 + 0.01 = 0.51; vel = 0.51; w = 1 - 0.051 = 0.949.
   * step 2, g = 0.5: g' = 0.5 + 0.00949 = 0.50949; vel = 0.459 + 0.50949 = 0.96849;
   *                  w = 0.949 - 0.096849 = 0.852151. */
  double w = 1, vel = 0, g = 0.5;
  ts_sgd_step_f64(1, 0.1, 0.9, 0.01, &w, &g, &vel);
  cr_expect_float_eq(w, 0.949, 1e-15);
  ts_sgd_step_f64(1, 0.1, 0.9, 0.01, &w, &g, &vel);
  cr_expect_float_eq(vel, 0.96849, 1e-15);
  cr_expect_float_eq(w, 0.852151, 1e-15);
  float wf = 1, gf = 0.5f;
  ts_sgd_step_f32(1, 0.1f, 0, 0, &wf, &gf, NULL);
  cr_expect_float_eq(wf, 0.95f, 1e-7f);
}

Test(optim, adam_two_steps)
{
  /* lr 0.1, beta1 0.9, beta2 0.999, eps 1e-8, w = 1.
   * step 1, g = 0.5: m = 0.05, v = 0.00025, mhat = 0.5, vhat = 0.25,
   *                  w = 1 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.9000000019999999960...
   * step 2, g = -0.25: m = 0.045 - 0.025 = 0.02, v = 0.00024975 + 0.0000625 = 0.00031225,
   *                  mhat = 0.02 / 0.19 = 0.10526315789473684,
   *                  vhat = 0.00031225 / 0.001999 = 0.15620310155077539,
   *                  sqrt(vhat) = 0.39522538070166418,
   *                  w -= 0.1 * 0.10526315789473684 / (0.39522538070166418 + 1e-8)
   *                     = 0.026633703292153797  ->  w = 0.87336629870784616.
   * (30-digit decimal arithmetic; the kernel's binary rounding moves the 14th digit.) */
  ts_adam hp = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0};
  double w = 1, m = 0, v = 0, g = 0.5;
  ts_adam_step_f64(1, &hp, 1, &w, &g, &m, &v);
  cr_expect_float_eq(w, 0.900000002, 1e-15);
  g = -0.25;
  ts_adam_step_f64(1, &hp, 2, &w, &g, &m, &v);
  cr_expect_float_eq(m, 0.02, 1e-17);
  cr_expect_float_eq(v, 0.00031225, 1e-18);
  cr_expect_float_eq(w, 0.87336629870784616, 1e-13);
  /* Decoupled weight decay 0.5 with lr 0.1 on w = 2, g = 0: w = 2 - 0.1 (i.e. 2 * 0.05), no
   * gradient step (m = 0). */
  ts_adam wd = hp;
  wd.weight_decay = 0.5;
  double w2 = 2, m2 = 0, v2 = 0, g2 = 0;
  ts_adam_step_f64(1, &wd, 1, &w2, &g2, &m2, &v2);
  cr_expect_float_eq(w2, 1.9, 1e-15);
}

/* ---------------- PRNG ---------------- */

Test(rng, reference_values_and_moments)
{
  /* xoshiro256** from state {1, 2, 3, 4}: rotl(2 * 5, 7) * 9 = 1280 * 9 = 11520. */
  ts_rng r = {{1, 2, 3, 4}};
  guint64 first = ts_rng_u64(&r);
  cr_expect_eq(first, 11520u);
  /* splitmix64 from 0 gives 0xe220a8397b1dcdaf first (Vigna's reference splitmix64.c). */
  ts_rng_seed(&r, 0);
  guint64 s0 = r.s[0];
  cr_expect_eq(s0, 0xe220a8397b1dcdafULL);
  ts_rng_seed(&r, 7);
  double mean = 0, var = 0;
  const int n = 100000;
  for (int i = 0; i < n; i++) {
    double z = ts_rng_normal(&r);
    mean += z / n;
    var += z * z / n;
  }
  /* Standard errors: 1/sqrt(n) = 0.0032 for the mean, sqrt(2/n) = 0.0045 for the variance. */
  cr_expect(fabs(mean) < 0.015 && fabs(var - 1) < 0.02, "mean %g var %g", mean, var);
  for (int i = 0; i < 1000; i++) {
    guint64 k = ts_rng_below(&r, 7);
    cr_assert(k < 7);
  }
}
