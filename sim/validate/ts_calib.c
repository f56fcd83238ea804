/* ts_calib: the calibration sweep (real kernels timed on the host) and the roofline fit. */
#include "ts_calib.h"
#include "ts_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- fit ---------------- */

double ts_calib_predict(const ts_calib_fit *f, double flop, double bytes)
{
  /* The same formula as ts_compute_time (Williams, Waterman & Patterson, CACM 52(4), 2009). */
  double tc = flop / (f->peak_flops * f->efficiency);
  double tm = bytes / f->mem_bw_Bps;
  return f->overhead_s + (tc > tm ? tc : tm);
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double ts_calib_median_ape(const double *pred, const double *meas, int n)
{
  g_return_val_if_fail(n >= 1, NAN);
  double *e = g_new(double, n);
  for (int i = 0; i < n; i++)
    e[i] = fabs(pred[i] / meas[i] - 1.0) * 100.0;
  qsort(e, (size_t)n, sizeof *e, cmp_double);
  double med = n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
  g_free(e);
  return med;
}

static double median_inplace(double *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Fit of rate F (FLOP/s) and bandwidth B (bytes/s) for a fixed overhead t0. Alternates, as
 * Lloyd's k-means does, between assigning each sample to the roof that bounds it under the
 * current (F, B) and setting F and B from their samples' rates flop / (t - t0) and
 * bytes / (t - t0). The update takes the MEDIAN rate, the least-absolute-deviation estimate
 * in log space: it minimises the typical relative error (what the report measures) and one
 * kernel far off the roofline (a cache-resident or latency-bound one) cannot drag the roof.
 * Starting from the highest observed rates, noiseless roofline data are assigned right at
 * once and reproduced exactly. */
static void fit_rates(const ts_calib_sample *s, int n, double t0, double *F, double *B, int *nc,
                      int *nm)
{
  double f = 0, b = 0;
  for (int i = 0; i < n; i++) {
    if (!s[i].in_fit)
      continue;
    double y = s[i].time_s - t0;
    f = MAX(f, s[i].flop / y);
    b = MAX(b, s[i].bytes / y);
  }
  *nc = *nm = 0;
  char *roof = g_new0(char, n); /* 0 unassigned, 1 compute, 2 memory */
  double *rc = g_new(double, n), *rm = g_new(double, n);
  for (int iter = 0; iter < 100; iter++) {
    gboolean changed = FALSE;
    int c = 0, m = 0;
    for (int i = 0; i < n; i++) {
      if (!s[i].in_fit)
        continue;
      double y = s[i].time_s - t0;
      char r = s[i].flop / f >= s[i].bytes / b ? 1 : 2;
      changed |= r != roof[i];
      roof[i] = r;
      if (r == 1)
        rc[c++] = s[i].flop / y;
      else
        rm[m++] = s[i].bytes / y;
    }
    if (c > 0)
      f = median_inplace(rc, c);
    if (m > 0)
      b = median_inplace(rm, m);
    *nc = c;
    *nm = m;
    if (!changed && iter > 0)
      break;
  }
  g_free(roof);
  g_free(rc);
  g_free(rm);
  *F = f;
  *B = b;
}

/* Mean absolute log error of the fitted samples (the overhead search minimises it). */
static double objective(const ts_calib_sample *s, int n, const ts_calib_fit *fit, double *rms)
{
  double sum = 0, sq = 0;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (s[i].in_fit) {
      double d = log(ts_calib_predict(fit, s[i].flop, s[i].bytes)) - log(s[i].time_s);
      sum += fabs(d);
      sq += d * d;
      k++;
    }
  *rms = k > 0 ? sqrt(sq / k) : 0;
  return k > 0 ? sum / k : 0;
}

/* Full fit for a given overhead; returns the mean absolute log error. */
static double fit_at(const ts_calib_sample *s, int n, double peak, double t0, ts_calib_fit *out)
{
  double F, B;
  fit_rates(s, n, t0, &F, &B, &out->ncompute, &out->nmemory);
  out->peak_flops = peak;
  out->efficiency = F / peak;
  out->mem_bw_Bps = B;
  out->overhead_s = t0;
  return objective(s, n, out, &out->rms_log_error);
}

gboolean ts_calib_fit_roofline(const ts_calib_sample *s, int n, double peak_flops,
                               gboolean fit_overhead, ts_calib_fit *out, GError **error)
{
  if (!(peak_flops > 0) || !isfinite(peak_flops)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID, "peak %g FLOP/s: expected a positive rate",
                peak_flops);
    return FALSE;
  }
  double tmin = INFINITY;
  int used = 0;
  for (int i = 0; i < n; i++) {
    if (!s[i].in_fit)
      continue;
    if (!(s[i].time_s > 0) || !isfinite(s[i].time_s) || !(s[i].flop >= 0) || !(s[i].bytes >= 0) ||
        s[i].flop + s[i].bytes <= 0 || !isfinite(s[i].flop + s[i].bytes)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "calibration sample %d '%s': time %g s, %g FLOP, %g bytes: expected a positive "
                  "time and non-negative, not both zero, work and traffic",
                  i, s[i].name, s[i].time_s, s[i].flop, s[i].bytes);
      return FALSE;
    }
    tmin = MIN(tmin, s[i].time_s);
    used++;
  }
  if (used < 2) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "%d calibration samples in the fit: expected at least 2 (one per roof)", used);
    return FALSE;
  }
  ts_calib_fit best;
  double best_obj = fit_at(s, n, peak_flops, 0.0, &best);
  if (fit_overhead) {
    /* Golden-section search of the overhead in [0, 0.99 tmin) (every sample must keep a
     * positive time above it); the objective is evaluated with the rates refitted. */
    const double phi = 0.6180339887498949;
    double lo = 0, hi = 0.99 * tmin;
    double x1 = hi - phi * (hi - lo), x2 = lo + phi * (hi - lo);
    ts_calib_fit f1, f2;
    double o1 = fit_at(s, n, peak_flops, x1, &f1), o2 = fit_at(s, n, peak_flops, x2, &f2);
    for (int it = 0; it < 100 && hi - lo > 1e-6 * tmin; it++) {
      if (o1 < o2) {
        hi = x2;
        x2 = x1, o2 = o1, f2 = f1;
        x1 = hi - phi * (hi - lo);
        o1 = fit_at(s, n, peak_flops, x1, &f1);
      } else {
        lo = x1;
        x1 = x2, o1 = o2, f1 = f2;
        x2 = lo + phi * (hi - lo);
        o2 = fit_at(s, n, peak_flops, x2, &f2);
      }
    }
    if (o1 < best_obj)
      best = f1, best_obj = o1;
    if (o2 < best_obj)
      best = f2, best_obj = o2;
  }
  if (best.ncompute == 0 || best.nmemory == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "calibration fit: %d compute-bound and %d memory-bound samples: expected some of "
                "each (GEMMs and element-wise kernels) to fit both roofs",
                best.ncompute, best.nmemory);
    return FALSE;
  }
  if (best.efficiency > 1.0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "calibration fit: sustained %.4g GFLOP/s exceeds the peak %.4g GFLOP/s: expected "
                "a peak at least as high as every kernel's rate",
                best.efficiency * peak_flops / 1e9, peak_flops / 1e9);
    return FALSE;
  }
  *out = best;
  return TRUE;
}

/* ---------------- sweep ---------------- */

enum {
  OP_GEMM,
  OP_CONV,
  OP_ADD,
  OP_AXPY,
  OP_RELU,
  OP_RELU_BWD,
  OP_BIAS,
  OP_SGD,
  OP_ADAM,
  OP_GELU,
  OP_SOFTMAX,
  OP_LAYERNORM
};

typedef struct {
  ts_prec prec;
  int op;
  int m, n, k;
  gboolean ta, tb;
  ts_conv_shape cs;
  gint64 len;
  int rows, cols;
  void *buf[5];
} bench;

/* Calls the fp32 or fp64 version of a kernel with the same arguments (void * buffers convert
 * to either pointer type). */
#define TS_DISPATCH(prec, fn, args)                                                                \
  do {                                                                                             \
    if ((prec) == TS_PREC_F32)                                                                     \
      fn##_f32 args;                                                                               \
    else                                                                                           \
      fn##_f64 args;                                                                               \
  } while (0)

static void bench_run(bench *b)
{
  void **v = b->buf;
  ts_adam hp = {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0};
  switch (b->op) {
  case OP_GEMM:
    TS_DISPATCH(b->prec, ts_gemm,
                (b->ta, b->tb, b->m, b->n, b->k, 1, v[0], b->ta ? b->m : b->k, v[1],
                 b->tb ? b->k : b->n, 0, v[2], b->n));
    break;
  case OP_CONV:
    TS_DISPATCH(b->prec, ts_conv2d_fwd, (&b->cs, v[0], v[1], v[3], v[2], v[4]));
    break;
  case OP_ADD:
    TS_DISPATCH(b->prec, ts_add, (b->len, v[0], v[1], v[2]));
    break;
  case OP_AXPY:
    TS_DISPATCH(b->prec, ts_axpy, (b->len, 1e-3, v[0], v[1]));
    break;
  case OP_RELU:
    TS_DISPATCH(b->prec, ts_relu_fwd, (b->len, v[0], v[1]));
    break;
  case OP_RELU_BWD:
    TS_DISPATCH(b->prec, ts_relu_bwd, (b->len, v[0], v[1], v[2]));
    break;
  case OP_BIAS:
    TS_DISPATCH(b->prec, ts_bias_add, (b->rows, b->cols, v[0], v[1]));
    break;
  case OP_SGD:
    TS_DISPATCH(b->prec, ts_sgd_step, (b->len, 1e-4, 0.9, 0, v[0], v[1], v[2]));
    break;
  case OP_ADAM:
    TS_DISPATCH(b->prec, ts_adam_step, (b->len, &hp, 10, v[0], v[1], v[2], v[3]));
    break;
  case OP_GELU:
    TS_DISPATCH(b->prec, ts_gelu_fwd, (b->len, v[0], v[1]));
    break;
  case OP_SOFTMAX:
    TS_DISPATCH(b->prec, ts_softmax_fwd, (b->rows, b->cols, v[0], v[1]));
    break;
  case OP_LAYERNORM:
    TS_DISPATCH(b->prec, ts_layernorm_fwd,
                (b->rows, b->cols, 1e-5, v[0], v[2], v[3], v[1], v[4],
                 (void *)((char *)v[4] + (size_t)ts_prec_bytes(b->prec) * (size_t)b->rows)));
    break;
  default:
    g_assert_not_reached();
  }
}

/* A buffer of n elements of small, varied values (no denormals, no overflow over the
 * repetitions: repeated axpy and SGD calls only drift slowly). */
static void *bench_buf(ts_prec prec, gint64 n)
{
  void *p = g_malloc((gsize)n * (gsize)ts_prec_bytes(prec));
  for (gint64 i = 0; i < n; i++) {
    double v = 0.01 * (double)((i * 7) % 17 + 1);
    if (prec == TS_PREC_F32)
      ((float *)p)[i] = (float)v;
    else
      ((double *)p)[i] = v;
  }
  return p;
}

/* Minimum time of one call: a warm-up call (page faults, caches), then at least two timed
 * calls and as many as fit in min_time. The minimum is the least disturbed by other load. */
static double bench_time(bench *b, double min_time)
{
  bench_run(b);
  double best = INFINITY, spent = 0;
  for (int reps = 0; reps < 2 || spent < min_time; reps++) {
    double t0 = ts_numeric_now();
    bench_run(b);
    double dt = ts_numeric_now() - t0;
    spent += dt;
    best = MIN(best, dt);
  }
  return best;
}

static void bench_free(bench *b)
{
  for (int i = 0; i < 5; i++)
    g_free(b->buf[i]);
}

static void add_sample(GArray *out, const ts_calib_options *o, bench *b, const char *kind,
                       gboolean in_fit, double flop, double bytes, const char *name,
                       void (*progress)(const ts_calib_sample *, void *), void *user)
{
  ts_calib_sample s = {.kind = kind, .flop = flop, .bytes = bytes, .in_fit = in_fit};
  g_strlcpy(s.name, name, sizeof s.name);
  s.time_s = bench_time(b, o->min_time_s);
  bench_free(b);
  g_array_append_val(out, s);
  if (progress != NULL)
    progress(&s, user);
}

/* "16M", "512K" or "1000" for an element count. */
static void fmt_count(char *buf, size_t n, gint64 v)
{
  if (v % (1 << 20) == 0)
    g_snprintf(buf, n, "%" G_GINT64_FORMAT "M", v >> 20);
  else if (v % (1 << 10) == 0)
    g_snprintf(buf, n, "%" G_GINT64_FORMAT "K", v >> 10);
  else
    g_snprintf(buf, n, "%" G_GINT64_FORMAT, v);
}

GArray *ts_calib_sweep(const ts_calib_options *o,
                       void (*progress)(const ts_calib_sample *s, void *user), void *user)
{
  GArray *out = g_array_new(FALSE, FALSE, sizeof(ts_calib_sample));
  const ts_prec p = o->prec;
  const double e = ts_prec_bytes(p);
  char name[64];

  /* GEMM: square sizes 64..4096 (doubling) and the shapes of transformer layers (QKV and MLP
   * projections of a 768-wide model on 2048 tokens) and their transposed backward products. */
  static const int full_sq[] = {64, 128, 256, 512, 1024, 2048, 4096};
  static const int quick_sq[] = {64, 128, 256, 512};
  static const struct {
    int m, n, k;
    gboolean ta, tb;
  } full_rect[] = {{1024, 1024, 1024, TRUE, FALSE}, {1024, 1024, 1024, FALSE, TRUE},
                   {2048, 2304, 768, FALSE, FALSE}, {2048, 768, 3072, FALSE, FALSE},
                   {768, 3072, 2048, TRUE, FALSE},  {2048, 3072, 768, FALSE, TRUE},
                   {4096, 128, 1024, FALSE, FALSE}, {128, 4096, 4096, FALSE, FALSE}},
    quick_rect[] = {
        {256, 256, 256, TRUE, FALSE}, {256, 256, 256, FALSE, TRUE}, {512, 96, 384, FALSE, FALSE}};
  const int *sq = o->quick ? quick_sq : full_sq;
  int nsq = o->quick ? (int)G_N_ELEMENTS(quick_sq) : (int)G_N_ELEMENTS(full_sq);
  for (int i = 0; i < nsq; i++) {
    int n = sq[i];
    bench b = {.prec = p, .op = OP_GEMM, .m = n, .n = n, .k = n};
    b.buf[0] = bench_buf(p, (gint64)n * n);
    b.buf[1] = bench_buf(p, (gint64)n * n);
    b.buf[2] = bench_buf(p, (gint64)n * n);
    g_snprintf(name, sizeof name, "gemm NN %dx%dx%d", n, n, n);
    add_sample(out, o, &b, "gemm", TRUE, 2.0 * n * n * n, 3.0 * n * n * e, name, progress, user);
  }
  int nrect = o->quick ? (int)G_N_ELEMENTS(quick_rect) : (int)G_N_ELEMENTS(full_rect);
  for (int i = 0; i < nrect; i++) {
    int m = o->quick ? quick_rect[i].m : full_rect[i].m;
    int n = o->quick ? quick_rect[i].n : full_rect[i].n;
    int k = o->quick ? quick_rect[i].k : full_rect[i].k;
    gboolean ta = o->quick ? quick_rect[i].ta : full_rect[i].ta;
    gboolean tb = o->quick ? quick_rect[i].tb : full_rect[i].tb;
    bench b = {.prec = p, .op = OP_GEMM, .m = m, .n = n, .k = k, .ta = ta, .tb = tb};
    b.buf[0] = bench_buf(p, (gint64)m * k);
    b.buf[1] = bench_buf(p, (gint64)k * n);
    b.buf[2] = bench_buf(p, (gint64)m * n);
    g_snprintf(name, sizeof name, "gemm %c%c %dx%dx%d", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k);
    add_sample(out, o, &b, "gemm", TRUE, 2.0 * m * n * k,
               ((double)m * k + (double)k * n + (double)m * n) * e, name, progress, user);
  }

  /* Convolutions: ResNet-50's stem and a 3x3 and 1x1 layer of each stage (He et al. 2016,
   * Table 1), batch 8; the quick sweep shrinks them. */
  static const ts_conv_shape full_conv[] = {{8, 3, 224, 224, 64, 7, 7, 2, 3},
                                            {8, 64, 56, 56, 64, 3, 3, 1, 1},
                                            {8, 256, 56, 56, 64, 1, 1, 1, 0},
                                            {8, 128, 28, 28, 128, 3, 3, 1, 1},
                                            {8, 256, 14, 14, 256, 3, 3, 1, 1},
                                            {8, 512, 7, 7, 512, 3, 3, 1, 1}},
                             quick_conv[] = {{2, 16, 28, 28, 32, 3, 3, 1, 1},
                                             {2, 3, 56, 56, 16, 7, 7, 2, 3}};
  const ts_conv_shape *cv = o->quick ? quick_conv : full_conv;
  int ncv = o->quick ? (int)G_N_ELEMENTS(quick_conv) : (int)G_N_ELEMENTS(full_conv);
  for (int i = 0; i < ncv; i++) {
    bench b = {.prec = p, .op = OP_CONV, .cs = cv[i]};
    const ts_conv_shape *s = &cv[i];
    gint64 nx = (gint64)s->n * s->c * s->h * s->w, nw = (gint64)s->oc * s->c * s->kh * s->kw;
    gint64 ny = (gint64)s->n * s->oc * ts_conv_out_h(s) * ts_conv_out_w(s);
    b.buf[0] = bench_buf(p, nx);
    b.buf[1] = bench_buf(p, nw);
    b.buf[2] = bench_buf(p, ny);
    b.buf[3] = bench_buf(p, s->oc);
    b.buf[4] = bench_buf(p, ts_conv_work_elems(s));
    g_snprintf(name, sizeof name, "conv %dx%dx%dx%d k%d s%d -> %d", s->n, s->c, s->h, s->w, s->kh,
               s->stride, s->oc);
    add_sample(out, o, &b, "conv", TRUE, ts_conv_fwd_flop(s), (double)(nx + nw + ny) * e, name,
               progress, user);
  }

  /* Element-wise kernels on arrays well beyond the last-level cache (32 MiB on current
   * server CPUs; 16M fp32 elements = 64 MiB an array), so they measure memory, not cache,
   * bandwidth. Traffic counts each operand read or written once, as the simulator counts it:
   * the read a write-allocate cache makes before overwriting a fresh output is not counted,
   * so kernels with a fresh output (add, relu) land below the fitted bandwidth and in-place
   * ones (axpy, SGD) above it. */
  static const gint64 full_len[] = {16 << 20, 64 << 20}, quick_len[] = {256 << 10};
  const gint64 *lens = o->quick ? quick_len : full_len;
  int nlen = o->quick ? (int)G_N_ELEMENTS(quick_len) : (int)G_N_ELEMENTS(full_len);
  static const struct {
    int op;
    const char *name;
    double flop_per, arrays; /* FLOP per element, arrays read + written */
    gboolean stream;         /* vectorized streaming loop: in the fit */
    int nbuf;
  } ew[] = {{OP_ADD, "add", 1, 3, TRUE, 3},          {OP_AXPY, "axpy", 2, 3, TRUE, 2},
            {OP_RELU, "relu", 1, 2, TRUE, 2},        {OP_RELU_BWD, "relu-bwd", 1, 3, TRUE, 3},
            {OP_BIAS, "bias-add", 1, 2, TRUE, 2},    {OP_SGD, "sgd-momentum", 4, 5, TRUE, 3},
            {OP_ADAM, "adam", 12, 7, FALSE, 4},      {OP_GELU, "gelu", 10, 2, FALSE, 2},
            {OP_SOFTMAX, "softmax", 4, 2, FALSE, 2}, {OP_LAYERNORM, "layernorm", 8, 2, FALSE, 5}};
  for (int li = 0; li < nlen; li++)
    for (size_t k = 0; k < G_N_ELEMENTS(ew); k++) {
      gint64 len = lens[li];
      /* The scalar-math kernels run at a fraction of memory speed: one size is enough. */
      if (!ew[k].stream && li > 0)
        continue;
      bench b = {.prec = p, .op = ew[k].op, .len = len, .cols = 1024, .rows = (int)(len / 1024)};
      for (int j = 0; j < ew[k].nbuf; j++)
        b.buf[j] = bench_buf(p, len);
      if (ew[k].op == OP_BIAS) { /* bias [cols], y [rows][cols] */
        g_free(b.buf[0]);
        b.buf[0] = bench_buf(p, b.cols);
      }
      char count[32];
      fmt_count(count, sizeof count, len);
      g_snprintf(name, sizeof name, "%s %s", ew[k].name, count);
      add_sample(out, o, &b, ew[k].stream ? "eltwise" : "scalar-math", ew[k].stream,
                 ew[k].flop_per * (double)len, ew[k].arrays * (double)len * e, name, progress,
                 user);
    }
  return out;
}
