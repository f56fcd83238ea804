/* ts_numeric: real fp32/fp64 kernels, generated from ts_numeric_impl.h once per precision,
 * plus the PRNG, shape helpers and the peak-FLOP/s probe. */
#define _POSIX_C_SOURCE 200809L
#include "ts_numeric.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* The micro-kernels (GEMM, peak probe) are compiled for several instruction sets and picked
 * at load time (GCC function multi-versioning through ifunc), so one binary uses AVX-512 or
 * AVX2+FMA where the host has them and SSE2 elsewhere. optimize("fp-contract=fast") lets GCC
 * fuse a*b+c into FMA: ISO C mode (-std=c11) otherwise forbids contraction. Other compilers
 * get the portable code, whose vector extensions they lower to what the target has. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&       \
    !defined(TS_NO_MULTIVERSION)
#define TS_KERNEL_ATTR                                                                             \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"),                     \
                 optimize("fp-contract=fast")))
/* Streaming kernels: the same clones, and loop vectorization at the "dynamic" cost model
 * (-O2's "very-cheap" model refuses any loop whose trip count is not a known multiple of the
 * vector width, i.e. all of them). No reassociation: sums keep their order. Adam stays
 * scalar: sqrt sets errno, and -fno-math-errno cannot be set per function. */
#define TS_STREAM_ATTR                                                                             \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"),                     \
                 optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define TS_KERNEL_ATTR
#define TS_STREAM_ATTR
#endif

/* Rows of the GEMM register tile (both precisions). */
#define TS_MR 6

/* ---- PRNG ---- */

static guint64 splitmix64(guint64 *x)
{
  guint64 z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void ts_rng_seed(ts_rng *r, guint64 seed)
{
  guint64 x = seed;
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&x);
}

static inline guint64 rotl(guint64 x, int k)
{
  return (x << k) | (x >> (64 - k));
}

guint64 ts_rng_u64(ts_rng *r)
{
  guint64 *s = r->s;
  guint64 result = rotl(s[1] * 5, 7) * 9;
  guint64 t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double ts_rng_uniform(ts_rng *r)
{
  return (double)(ts_rng_u64(r) >> 11) * 0x1.0p-53;
}

double ts_rng_normal(ts_rng *r)
{
  /* 1 - u is in (0, 1], so the log is finite. */
  double u1 = 1.0 - ts_rng_uniform(r), u2 = ts_rng_uniform(r);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * G_PI * u2);
}

guint64 ts_rng_below(ts_rng *r, guint64 n)
{
  g_return_val_if_fail(n >= 1, 0);
  return (guint64)(((unsigned __int128)ts_rng_u64(r) * n) >> 64);
}

int ts_prec_bytes(ts_prec p)
{
  return p == TS_PREC_F32 ? 4 : 8;
}

const char *ts_prec_name(ts_prec p)
{
  return p == TS_PREC_F32 ? "fp32" : "fp64";
}

/* ---- Shapes ---- */

int ts_conv_out_h(const ts_conv_shape *s)
{
  return (s->h + 2 * s->pad - s->kh) / s->stride + 1;
}

int ts_conv_out_w(const ts_conv_shape *s)
{
  return (s->w + 2 * s->pad - s->kw) / s->stride + 1;
}

gint64 ts_conv_work_elems(const ts_conv_shape *s)
{
  /* col and dcol, each [c*kh*kw][oh*ow]. */
  return 2 * (gint64)s->c * s->kh * s->kw * ts_conv_out_h(s) * ts_conv_out_w(s);
}

double ts_conv_fwd_flop(const ts_conv_shape *s)
{
  return 2.0 * s->n * s->oc * ts_conv_out_h(s) * ts_conv_out_w(s) * s->c * s->kh * s->kw;
}

double ts_numeric_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- The kernels ---- */

#define TS_R float
#define TS_F(name) name##_f32
#define TS_VL 8
#define TS_EXP expf
#define TS_LOG logf
#define TS_SQRT sqrtf
#define TS_ERF erff
typedef float ts_v_f32 __attribute__((vector_size(32)));
#define TS_V ts_v_f32
#include "ts_numeric_impl.h"
#undef TS_R
#undef TS_F
#undef TS_VL
#undef TS_V
#undef TS_EXP
#undef TS_LOG
#undef TS_SQRT
#undef TS_ERF

#define TS_R double
#define TS_F(name) name##_f64
#define TS_VL 4
#define TS_EXP exp
#define TS_LOG log
#define TS_SQRT sqrt
#define TS_ERF erf
typedef double ts_v_f64 __attribute__((vector_size(32)));
#define TS_V ts_v_f64
#include "ts_numeric_impl.h"
#undef TS_R
#undef TS_F
#undef TS_VL
#undef TS_V
#undef TS_EXP
#undef TS_LOG
#undef TS_SQRT
#undef TS_ERF

/* ---- Peak probe ---- */

/* 12 independent vector multiply-add chains, the same register shape as the GEMM tile, for
 * `iters` iterations; returns a value depending on every chain so nothing is optimized out.
 * The multiplier is just below 1 and the addend small, so values stay finite. */
TS_KERNEL_ATTR static float peak_chains_f32(gint64 iters)
{
  ts_v_f32 acc[12], mul, add;
  for (int i = 0; i < 8; i++) {
    mul[i] = 0.999999f;
    add[i] = 1e-7f;
  }
  for (int j = 0; j < 12; j++)
    for (int i = 0; i < 8; i++)
      acc[j][i] = (float)(j + i);
#define TS_CH(j) acc[j] = acc[j] * mul + add
  for (gint64 it = 0; it < iters; it++) {
    TS_CH(0);
    TS_CH(1);
    TS_CH(2);
    TS_CH(3);
    TS_CH(4);
    TS_CH(5);
    TS_CH(6);
    TS_CH(7);
    TS_CH(8);
    TS_CH(9);
    TS_CH(10);
    TS_CH(11);
  }
  float s = 0;
  for (int j = 0; j < 12; j++)
    for (int i = 0; i < 8; i++)
      s += acc[j][i];
  return s;
}

TS_KERNEL_ATTR static double peak_chains_f64(gint64 iters)
{
  ts_v_f64 acc[12], mul, add;
  for (int i = 0; i < 4; i++) {
    mul[i] = 0.999999;
    add[i] = 1e-7;
  }
  for (int j = 0; j < 12; j++)
    for (int i = 0; i < 4; i++)
      acc[j][i] = (double)(j + i);
  for (gint64 it = 0; it < iters; it++) {
    TS_CH(0);
    TS_CH(1);
    TS_CH(2);
    TS_CH(3);
    TS_CH(4);
    TS_CH(5);
    TS_CH(6);
    TS_CH(7);
    TS_CH(8);
    TS_CH(9);
    TS_CH(10);
    TS_CH(11);
  }
#undef TS_CH
  double s = 0;
  for (int j = 0; j < 12; j++)
    for (int i = 0; i < 4; i++)
      s += acc[j][i];
  return s;
}

double ts_numeric_peak_flops(int elem_bytes, double seconds)
{
  g_return_val_if_fail(elem_bytes == 4 || elem_bytes == 8, 0.0);
  int lanes = 32 / elem_bytes;
  double flop_per_iter = 12.0 * lanes * 2.0;
  volatile double sink = 0;
  /* Grow the iteration count until one run lasts a tenth of the budget, then keep the best
   * rate of repeated runs: the maximum is the least disturbed by other load. */
  gint64 iters = 1 << 14;
  double best = 0, spent = 0;
  while (spent < seconds) {
    double t0 = ts_numeric_now();
    sink += elem_bytes == 4 ? (double)peak_chains_f32(iters) : peak_chains_f64(iters);
    double dt = ts_numeric_now() - t0;
    spent += dt;
    if (dt > 0)
      best = MAX(best, flop_per_iter * (double)iters / dt);
    if (dt < seconds / 10)
      iters *= 2;
  }
  (void)sink;
  return best;
}
