/* ts_numeric: real fp32 and fp64 kernels (GEMM, bias, activations, layer norm, softmax
 * cross-entropy, attention, convolution, pooling, optimizers) and a deterministic PRNG.
 *
 * Every kernel exists in both precisions, generated from one template: the prototypes are in
 * ts_numeric_decl.h, included twice below, so ts_gemm_f32 and ts_gemm_f64 take the same
 * arguments with float or double. Layouts are row-major; images are NCHW.
 *
 * Conventions, shared by every backward kernel so that gradients of micro-batches, data
 * shards or tensor shards can be summed by the caller:
 *   - parameter gradients (dw, dbias, dgamma, dbeta) ACCUMULATE (+=): the caller zeroes them;
 *   - input gradients (dx) are OVERWRITTEN.
 * Buffers are borrowed; no kernel keeps a pointer after it returns. */
#ifndef TS_NUMERIC_H
#define TS_NUMERIC_H

#include <glib.h>

G_BEGIN_DECLS

/* ---- Deterministic random numbers (same stream on every machine for a given seed) ---- */

/** xoshiro256** state (Blackman & Vigna, "Scrambled linear pseudorandom number generators",
 *  2021), seeded through splitmix64 as its authors recommend. */
typedef struct {
  guint64 s[4];
} ts_rng;

/** Seeds the generator; every seed, including 0, gives a valid state. */
void ts_rng_seed(ts_rng *r, guint64 seed);
/** Next 64 random bits. */
guint64 ts_rng_u64(ts_rng *r);
/** Uniform double in [0, 1) with 53 random bits. */
double ts_rng_uniform(ts_rng *r);
/** Standard normal deviate (Box-Muller; one deviate per call, so the stream is simple). */
double ts_rng_normal(ts_rng *r);
/** Uniform whole number in [0, n), n >= 1 (Lemire's multiply-shift; bias < n / 2^64). */
guint64 ts_rng_below(ts_rng *r, guint64 n);

/** Precision of a real buffer: fp32 (float) or fp64 (double). */
typedef enum { TS_PREC_F32, TS_PREC_F64 } ts_prec;

/** Bytes per element of a precision (4 or 8). */
int ts_prec_bytes(ts_prec p);
/** "fp32" or "fp64". */
const char *ts_prec_name(ts_prec p);

/* ---- Shapes ---- */

/** A 2D convolution: input [n][c][h][w], weight [oc][c][kh][kw], output [n][oc][oh][ow]. */
typedef struct {
  int n, c, h, w;  /* batch, input channels, input height and width */
  int oc, kh, kw;  /* output channels, kernel height and width */
  int stride, pad; /* same along both axes; pad is zero padding on every side */
} ts_conv_shape;

/** Output height: (h + 2 pad - kh) / stride + 1. */
int ts_conv_out_h(const ts_conv_shape *s);
/** Output width: (w + 2 pad - kw) / stride + 1. */
int ts_conv_out_w(const ts_conv_shape *s);
/** Elements of scratch the conv kernels need for `work` (im2col and col2im buffers). */
gint64 ts_conv_work_elems(const ts_conv_shape *s);
/** FLOP of one forward convolution (2 per multiply-add; bias not counted). */
double ts_conv_fwd_flop(const ts_conv_shape *s);

/** Adam hyperparameters (Kingma & Ba, ICLR 2015, Algorithm 1). weight_decay is decoupled
 *  (AdamW, Loshchilov & Hutter, ICLR 2019): w -= lr * weight_decay * w before the update. */
typedef struct {
  double lr, beta1, beta2, eps, weight_decay;
} ts_adam;

/* ---- The kernels, once per precision ---- */
#define TS_R float
#define TS_F(name) name##_f32
#include "ts_numeric_decl.h"
#undef TS_R
#undef TS_F
#define TS_R double
#define TS_F(name) name##_f64
#include "ts_numeric_decl.h"
#undef TS_R
#undef TS_F

/** Measures this core's peak FLOP/s at fp32 (elem_bytes 4) or fp64 (8): independent
 *  multiply-add chains in registers with the widest vector unit the GEMM kernel uses, run for
 *  about `seconds`. An upper bound for the GEMM rate on one core. */
double ts_numeric_peak_flops(int elem_bytes, double seconds);

/** Monotonic wall clock, seconds. */
double ts_numeric_now(void);

G_END_DECLS

#endif
