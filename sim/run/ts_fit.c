/* ts_fit: the fit of a chip kind's compute parameters to measured step times (ts_fit.h). */
#include "ts_fit.h"
#include "ts_run.h"
#include "ts_util.h"

#include <math.h>

/* Bounds and tolerances. The launch bound (200 us) is ten times the slowest eager-mode
 * per-kernel host cost published (PyTorch: ~10-20 us per op); the memory-bound kernels'
 * achieved fraction of the datasheet bandwidth is kept to 0.75-0.95, what streaming kernels
 * reach on HBM GPUs and TPUs (BabelStream-class copies and triads reach about 0.9 of the
 * datasheet rate on A100 and V100): a fit that wants less is missing memory traffic, not
 * finding a slower memory; the k overhead's (4096) is
 * longer than any tile's reduction loop prologue could be; a collective's host cost (1 ms) is
 * more than ten launches of the slowest host. The tolerances are what moves a
 * step time by well under 1%: 0.3% of peak, 0.4 us a launch, 12 of k, 2 us a collective. */
static const struct {
  const char *key;
  double lo, hi, tol, file_scale;
} params[TS_FIT_NPARAMS] = {
    [TS_FIT_EFFICIENCY] = {"compute_efficiency", 0.2, 1.0, 3e-3, 1.0},
    [TS_FIT_LAUNCH] = {"kernel_launch_us", 0.0, 200e-6, 0.4e-6, 1e6},
    [TS_FIT_MEMORY] = {"memory_bandwidth_efficiency", 0.75, 0.95, 6e-3, 1.0},
    [TS_FIT_K_OVERHEAD] = {"gemm_k_overhead", 0.0, 4096.0, 12.0, 1.0},
    [TS_FIT_COLL_LAUNCH] = {"collective_launch_us", 0.0, 1000e-6, 2e-6, 1e6},
};

const char *ts_fit_param_key(ts_fit_param p)
{
  return params[p].key;
}

double ts_fit_param_file_value(ts_fit_param p, double v)
{
  return v * params[p].file_scale;
}

void ts_fit_get(const ts_chip *c, ts_fit_point *x)
{
  x->v[TS_FIT_EFFICIENCY] = c->compute_efficiency;
  x->v[TS_FIT_LAUNCH] = c->kernel_launch_s;
  x->v[TS_FIT_MEMORY] = c->memory_bw_efficiency > 0 ? c->memory_bw_efficiency : 1.0;
  x->v[TS_FIT_K_OVERHEAD] = c->gemm_k_overhead;
  x->v[TS_FIT_COLL_LAUNCH] = c->collective_launch_s;
}

void ts_fit_set(ts_chip *c, const ts_fit_point *x)
{
  c->compute_efficiency = x->v[TS_FIT_EFFICIENCY];
  c->kernel_launch_s = x->v[TS_FIT_LAUNCH];
  c->memory_bw_efficiency = x->v[TS_FIT_MEMORY];
  c->gemm_k_overhead = x->v[TS_FIT_K_OVERHEAD];
  c->collective_launch_s = x->v[TS_FIT_COLL_LAUNCH];
}

double ts_fit_predict(ts_fit_row *r, const ts_fit_point *x, GError **error)
{
  ts_fit_set(&r->topo->chip, x);
  ts_run_options ro = {.backend = "analytic"};
  ts_replay_result rr;
  if (!ts_run_replay(r->trace, r->topo, &ro, &rr, error))
    return -1.0;
  return rr.step_time_s;
}

double ts_fit_mape(ts_fit_row *rows, int n, const ts_fit_point *x, double *ape, GError **error)
{
  double sum = 0;
  for (int i = 0; i < n; i++) {
    double t = ts_fit_predict(&rows[i], x, error);
    if (t < 0)
      return -1.0;
    double e = fabs(t / rows[i].measured_s - 1.0);
    if (ape != NULL)
      ape[i] = e;
    sum += e;
  }
  return n > 0 ? sum / n : 0.0;
}

typedef struct {
  ts_fit_row *rows;
  int n;
  ts_fit_point x; /* the best point so far */
  double fx;      /* its MAPE */
  int p;
  GError **error;
  gboolean failed;
  int evals;                                     /* MAPE evaluations so far */
  double lo[TS_FIT_NPARAMS], hi[TS_FIT_NPARAMS]; /* the search box */
  ts_fit_progress progress;
  void *user;
} line_ctx;

/* MAPE at x with parameter c->p set to v; INFINITY once a replay failed. */
static double along(line_ctx *c, double v)
{
  if (c->failed)
    return INFINITY;
  ts_fit_point y = c->x;
  y.v[c->p] = v;
  double m = ts_fit_mape(c->rows, c->n, &y, NULL, c->error);
  c->evals++;
  if (m < 0) {
    c->failed = TRUE;
    return INFINITY;
  }
  return m;
}

/*
 * The minimum along parameter c->p, searched from the current point outwards: a step h each
 * way, then steps growing by the golden ratio while the MAPE keeps falling (the bracket), then
 * golden sections inside the bracket down to the parameter's tolerance. From a start near the
 * optimum this takes a few evaluations where a golden section over the whole box takes a
 * dozen or more; the rows' replays are the whole cost of a fit. Sets c->x, c->fx when it finds
 * a better point.
 */
static void line_search(line_ctx *c, double h)
{
  const double g = (sqrt(5.0) - 1) / 2, tol = params[c->p].tol;
  double lo = c->lo[c->p], hi = c->hi[c->p], x0 = c->x.v[c->p], f0 = c->fx;
  /* Bracket: a < b < d with f(b) below both ends (an end may be the box's edge). */
  double a, b = x0, d, fb = f0;
  double xp = fmin(hi, x0 + h), fp = xp > x0 ? along(c, xp) : INFINITY;
  if (fp < f0) {
    a = x0;
    b = xp, fb = fp;
    for (double step = h / g;; step /= g) {
      d = fmin(hi, b + step);
      if (d <= b) {
        d = b;
        break;
      }
      double fd = along(c, d);
      if (fd >= fb)
        break;
      a = b, b = d, fb = fd;
    }
  } else {
    double xm = fmax(lo, x0 - h), fm = xm < x0 ? along(c, xm) : INFINITY;
    if (fm < f0) {
      d = x0;
      b = xm, fb = fm;
      for (double step = h / g;; step /= g) {
        a = fmax(lo, b - step);
        if (a >= b) {
          a = b;
          break;
        }
        double fa = along(c, a);
        if (fa >= fb)
          break;
        d = b, b = a, fb = fa;
      }
    } else {
      a = xm, d = xp;
    }
  }
  /* Golden sections of [a, d] around b (Kiefer 1953; Numerical Recipes' `golden`). */
  while (d - a > tol && !c->failed) {
    double x = b - a > d - b ? b - (1 - g) * (b - a) : b + (1 - g) * (d - b);
    double fx = along(c, x);
    if (fx < fb) {
      if (x < b)
        d = b;
      else
        a = b;
      b = x, fb = fx;
    } else if (x < b) {
      a = x;
    } else {
      d = x;
    }
  }
  if (!c->failed && fb < c->fx) {
    c->x.v[c->p] = b;
    c->fx = fb;
  }
}

/* Coordinate descent inside the box of c from c->x, starting with steps h[] (shrunk as the
 * moves shrink); FALSE on a replay error. */
static gboolean descend(line_ctx *c, guint mask, int rounds, double *h, int stage)
{
  c->fx = ts_fit_mape(c->rows, c->n, &c->x, NULL, c->error);
  c->evals++;
  if (c->fx < 0)
    return FALSE;
  for (int round = 0; round < rounds; round++) {
    gboolean moved = FALSE;
    for (int p = 0; p < TS_FIT_NPARAMS; p++) {
      if (!(mask & (1u << p)))
        continue;
      c->p = p;
      double before = c->x.v[p];
      line_search(c, h[p]);
      if (c->failed)
        return FALSE;
      double move = fabs(c->x.v[p] - before);
      moved |= move > params[p].tol;
      /* The next round looks about as far as this one moved, never closer than 4 tolerances. */
      h[p] = fmax(4 * params[p].tol, fmin(h[p], 2 * move > 0 ? 2 * move : h[p] / 2));
    }
    if (c->progress != NULL)
      c->progress(stage, round + 1, c->n, &c->x, c->fx, c->evals, c->user);
    if (!moved)
      break;
  }
  return TRUE;
}

/* Rows above which the fit first searches on a quarter of them (every fourth row), then
 * refines on all of them from that point with short steps: about the same optimum for a
 * fraction of the replays. */
#define COARSE_ROWS 200

gboolean ts_fit_minimise_ex(ts_fit_row *rows, int n, const ts_fit_point *start, guint mask,
                            ts_fit_progress progress, void *user, ts_fit_point *out, GError **error)
{
  line_ctx c = {rows, n, *start, 0, 0, error, FALSE, 0, {0}, {0}, progress, user};
  double h[TS_FIT_NPARAMS];
  for (int p = 0; p < TS_FIT_NPARAMS; p++) {
    c.lo[p] = params[p].lo, c.hi[p] = params[p].hi;
    c.x.v[p] = fmin(c.hi[p], fmax(c.lo[p], c.x.v[p]));
    h[p] = (params[p].hi - params[p].lo) / 16;
  }
  if (n > COARSE_ROWS) {
    int m = (n + 3) / 4;
    ts_fit_row *sub = g_new(ts_fit_row, m);
    for (int i = 0; i < m; i++)
      sub[i] = rows[4 * i];
    line_ctx s = c;
    s.rows = sub;
    s.n = m;
    gboolean ok = descend(&s, mask, 6, h, 1);
    g_free(sub);
    if (!ok)
      return FALSE;
    c.x = s.x;
    c.evals = s.evals;
    for (int p = 0; p < TS_FIT_NPARAMS; p++)
      h[p] = 4 * params[p].tol;
  }
  if (!descend(&c, mask, 3, h, 2))
    return FALSE;
  *out = c.x;
  return TRUE;
}

gboolean ts_fit_minimise(ts_fit_row *rows, int n, const ts_fit_point *start, guint mask,
                         ts_fit_point *out, GError **error)
{
  return ts_fit_minimise_ex(rows, n, start, mask, NULL, NULL, out, error);
}
