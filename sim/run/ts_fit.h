/* ts_fit: fits a chip kind's compute parameters (ts_cost) to measured step times: one
 * parameter set for every row, chosen to minimise the mean absolute percentage error. Used by
 * `trainsim calibrate --against` and by tests/test_published.c. */
#ifndef TS_FIT_H
#define TS_FIT_H

#include "ts_trace.h"
#include <glib.h>

G_BEGIN_DECLS

/** The fitted parameters, as [chip] keys. */
typedef enum {
  TS_FIT_EFFICIENCY,  /* compute_efficiency: achievable fraction of peak, well-tiled GEMMs */
  TS_FIT_LAUNCH,      /* kernel_launch_us: host time per kernel launch */
  TS_FIT_MEMORY,      /* memory_bandwidth_efficiency: achieved fraction of memory bandwidth */
  TS_FIT_K_OVERHEAD,  /* gemm_k_overhead: per-tile fixed cost as extra reduction length */
  TS_FIT_COLL_LAUNCH, /* collective_launch_us: host time to issue one collective */
  TS_FIT_NPARAMS
} ts_fit_param;

/** A point in parameter space, SI units (seconds for the launch). */
typedef struct {
  double v[TS_FIT_NPARAMS];
} ts_fit_point;

/** One measured row: a traced step on its machine, and what it took. */
typedef struct {
  ts_topo *topo;         /* borrowed; its chip's fitted parameters are overwritten */
  const ts_trace *trace; /* borrowed */
  double measured_s;
} ts_fit_row;

/** The [chip] key of a parameter ("compute_efficiency", "kernel_launch_us", ...). */
const char *ts_fit_param_key(ts_fit_param p);

/** Value as written in a profile (the launch in us). */
double ts_fit_param_file_value(ts_fit_param p, double v);

void ts_fit_get(const ts_chip *c, ts_fit_point *x);
void ts_fit_set(ts_chip *c, const ts_fit_point *x);

/** The row's predicted step time at x (analytic backend); < 0 with error set on failure. */
double ts_fit_predict(ts_fit_row *r, const ts_fit_point *x, GError **error);

/** MAPE (a fraction) over the rows at x; ape (may be NULL) gets each row's |error|. */
double ts_fit_mape(ts_fit_row *rows, int n, const ts_fit_point *x, double *ape, GError **error);

/**
 * Minimises the MAPE over the parameters in `mask` (bit p for parameter p) from `start`,
 * others held: coordinate descent, along each parameter in turn a search outwards from the
 * current point (bracket, then golden sections) within the parameter's bounds, until a round
 * moves none by more than its tolerance. With many rows it first descends on every fourth
 * row, then refines on all. Deterministic. A local search: start it near the answer (the
 * shipped profile) and it needs far fewer replays than a search of the whole box.
 */
gboolean ts_fit_minimise(ts_fit_row *rows, int n, const ts_fit_point *start, guint mask,
                         ts_fit_point *out, GError **error);

/** Called after each round of the fit: stage 1 is the coarse search on a quarter of the rows
 * (when there are many), 2 the refinement on all; the best point, its MAPE and the MAPE
 * evaluations made so far. */
typedef void (*ts_fit_progress)(int stage, int round, int nrows, const ts_fit_point *x, double mape,
                                int evals, void *user);

/** ts_fit_minimise with a progress callback (may be NULL). */
gboolean ts_fit_minimise_ex(ts_fit_row *rows, int n, const ts_fit_point *start, guint mask,
                            ts_fit_progress progress, void *user, ts_fit_point *out,
                            GError **error);

G_END_DECLS

#endif
