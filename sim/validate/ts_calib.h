/* ts_calib: times real kernels on the host and fits the roofline compute model the simulator
 * uses (ts_compute_time): time = max(flop / (peak x efficiency), bytes / bandwidth). */
#ifndef TS_CALIB_H
#define TS_CALIB_H

#include "ts_numeric.h"
#include <glib.h>

G_BEGIN_DECLS

/** One timed kernel: its work, its traffic and its measured time. */
typedef struct {
  char name[64];    /* "gemm NN 512x512x512", "conv 8x64x56x56 k3 s1 -> 64", "add 16M" */
  const char *kind; /* "gemm", "conv", "eltwise" or "scalar-math" (static string) */
  double flop;      /* FLOP of one call (2 per multiply-add) */
  double bytes;     /* bytes one call must move to and from memory, each operand once */
  double time_s;    /* measured time of one call (minimum over repetitions) */
  gboolean in_fit;  /* used to fit; FALSE for kernels outside the roofline's scope */
} ts_calib_sample;

/** A fitted chip: peak is given (measured or from the user), the rest fitted. */
typedef struct {
  double peak_flops;     /* FLOP/s */
  double efficiency;     /* sustained compute rate / peak */
  double mem_bw_Bps;     /* sustained memory bandwidth, bytes/s */
  double overhead_s;     /* fixed time per kernel call (0 unless fitted) */
  double rms_log_error;  /* sqrt(mean (ln predicted - ln measured)^2) over the fitted samples */
  int ncompute, nmemory; /* fitted samples on each roof */
} ts_calib_fit;

/**
 * Fits the roofline to the samples with in_fit set: each roof's rate is the median rate of
 * the samples it bounds (least absolute error of log time, so errors are relative and a 10 us
 * kernel weighs as much as a 1 s one). With fit_overhead the model is overhead + max(...), the
 * overhead found by golden-section search on the mean absolute log error.
 * Fails with TS_ERROR_INVALID, naming the sample, on a non-positive time, negative work or
 * traffic, or when no fitted sample lies on one of the two roofs (nothing to fit it from), or
 * when the fitted rate exceeds peak_flops.
 */
gboolean ts_calib_fit_roofline(const ts_calib_sample *s, int n, double peak_flops,
                               gboolean fit_overhead, ts_calib_fit *out, GError **error);

/** Time the fitted model predicts for a kernel, seconds. */
double ts_calib_predict(const ts_calib_fit *f, double flop, double bytes);

/** Median of |predicted / measured - 1| x 100 over n pairs (n >= 1), percent. */
double ts_calib_median_ape(const double *predicted_s, const double *measured_s, int n);

typedef struct {
  ts_prec prec;      /* element type of every kernel */
  gboolean quick;    /* a few-second sweep of small shapes (tests, smoke checks) */
  double min_time_s; /* repeat each kernel until this much time is spent (at least 2 calls) */
} ts_calib_options;

/**
 * Times the sweep on this host: GEMM (square 64..4096, transposed and rectangular),
 * convolutions, streaming element-wise kernels and the scalar-math kernels (GELU, softmax,
 * layer norm, Adam), which are timed and reported but left out of the fit. progress (may be
 * NULL) is called after each kernel. Returns a GArray of ts_calib_sample; caller frees.
 */
GArray *ts_calib_sweep(const ts_calib_options *o,
                       void (*progress)(const ts_calib_sample *s, void *user), void *user);

G_END_DECLS

#endif
