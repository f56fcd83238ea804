/* ts_fit: the fit of a chip kind's compute parameters to measured step times (ts_fit.h). */
#include "ts_fit.h"
#include "ts_run.h"
#include "ts_util.h"

#include <math.h>

/* Bounds and tolerances. The launch bound (200 us) is ten times the slowest eager-mode
 * per-kernel host cost published (PyTorch: ~10-20 us per op); the k overhead's (4096) is
 * longer than any tile's reduction loop prologue could be. */
static const struct {
  const char *key;
  double lo, hi, tol, file_scale;
} params[TS_FIT_NPARAMS] = {
    [TS_FIT_EFFICIENCY] = {"compute_efficiency", 0.2, 1.0, 2e-3, 1.0},
    [TS_FIT_LAUNCH] = {"kernel_launch_us", 0.0, 200e-6, 0.1e-6, 1e6},
    [TS_FIT_MEMORY] = {"memory_bandwidth_efficiency", 0.2, 1.0, 2e-3, 1.0},
    [TS_FIT_K_OVERHEAD] = {"gemm_k_overhead", 0.0, 4096.0, 4.0, 1.0},
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
}

void ts_fit_set(ts_chip *c, const ts_fit_point *x)
{
  c->compute_efficiency = x->v[TS_FIT_EFFICIENCY];
  c->kernel_launch_s = x->v[TS_FIT_LAUNCH];
  c->memory_bw_efficiency = x->v[TS_FIT_MEMORY];
  c->gemm_k_overhead = x->v[TS_FIT_K_OVERHEAD];
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
  ts_fit_point x;
  int p;
  GError **error;
  gboolean failed;
  double lo[TS_FIT_NPARAMS], hi[TS_FIT_NPARAMS]; /* the search box */
} line_ctx;

static double along(line_ctx *c, double v)
{
  ts_fit_point y = c->x;
  y.v[c->p] = v;
  if (c->failed)
    return INFINITY;
  double m = ts_fit_mape(c->rows, c->n, &y, NULL, c->error);
  if (m < 0) {
    c->failed = TRUE;
    return INFINITY;
  }
  return m;
}

/* Golden-section search along parameter c->p within its bounds; returns the argmin. */
static double golden(line_ctx *c)
{
  const double g = (sqrt(5.0) - 1) / 2;
  double a = c->lo[c->p], b = c->hi[c->p];
  double x1 = b - g * (b - a), x2 = a + g * (b - a), f1 = along(c, x1), f2 = along(c, x2);
  while (b - a > params[c->p].tol && !c->failed) {
    if (f1 < f2)
      b = x2, x2 = x1, f2 = f1, x1 = b - g * (b - a), f1 = along(c, x1);
    else
      a = x1, x1 = x2, f1 = f2, x2 = a + g * (b - a), f2 = along(c, x2);
  }
  return f1 < f2 ? x1 : x2;
}

/* Coordinate descent inside the box of c from c->x; FALSE on a replay error. */
static gboolean descend(line_ctx *c, guint mask, int rounds)
{
  double best = ts_fit_mape(c->rows, c->n, &c->x, NULL, c->error);
  if (best < 0)
    return FALSE;
  for (int round = 0; round < rounds; round++) {
    gboolean moved = FALSE;
    for (int p = 0; p < TS_FIT_NPARAMS; p++) {
      if (!(mask & (1u << p)))
        continue;
      c->p = p;
      double v = golden(c);
      if (c->failed)
        return FALSE;
      /* Keep the move only when it helps: the section may end beside the old point. */
      ts_fit_point y = c->x;
      y.v[p] = v;
      double m = ts_fit_mape(c->rows, c->n, &y, NULL, c->error);
      if (m < 0)
        return FALSE;
      if (m < best) {
        moved |= fabs(v - c->x.v[p]) > params[p].tol;
        c->x = y;
        best = m;
      }
    }
    if (!moved)
      break;
  }
  return TRUE;
}

/* Rows above which the fit first searches on a quarter of them (every fourth row), then
 * refines on all of them in a box an eighth as wide around that point: the same optimum on
 * smooth objectives at about half the replays. */
#define COARSE_ROWS 200

gboolean ts_fit_minimise(ts_fit_row *rows, int n, const ts_fit_point *start, guint mask,
                         ts_fit_point *out, GError **error)
{
  line_ctx c = {rows, n, *start, 0, error, FALSE, {0}, {0}};
  for (int p = 0; p < TS_FIT_NPARAMS; p++)
    c.lo[p] = params[p].lo, c.hi[p] = params[p].hi;
  if (n > COARSE_ROWS) {
    int m = (n + 3) / 4;
    ts_fit_row *sub = g_new(ts_fit_row, m);
    for (int i = 0; i < m; i++)
      sub[i] = rows[4 * i];
    line_ctx s = c;
    s.rows = sub;
    s.n = m;
    gboolean ok = descend(&s, mask, 6);
    g_free(sub);
    if (!ok)
      return FALSE;
    c.x = s.x;
    for (int p = 0; p < TS_FIT_NPARAMS; p++) {
      double w = (params[p].hi - params[p].lo) / 16;
      c.lo[p] = fmax(params[p].lo, c.x.v[p] - w);
      c.hi[p] = fmin(params[p].hi, c.x.v[p] + w);
    }
  }
  if (!descend(&c, mask, 6))
    return FALSE;
  *out = c.x;
  return TRUE;
}
