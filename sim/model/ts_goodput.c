/* ts_goodput: expected time to train under exponential failures with periodic checkpoints,
 * the optimum interval, and a seeded Monte Carlo of the same process. */
#include "ts_goodput.h"

#include <math.h>
#include <stdlib.h>

double ts_goodput_young(double checkpoint_s, double mtbf_s)
{
  return sqrt(2.0 * checkpoint_s * mtbf_s);
}

double ts_goodput_daly(double checkpoint_s, double mtbf_s)
{
  double d = checkpoint_s, m = mtbf_s;
  if (d >= 2.0 * m)
    return m;
  double r = d / (2.0 * m);
  return sqrt(2.0 * d * m) * (1.0 + sqrt(r) / 3.0 + r / 9.0) - d;
}

/* Wall time per unit of work with interval tau, up to the factor M exp(R/M). */
static double cost_per_work(double tau, double d, double m)
{
  return expm1((tau + d) / m) / tau;
}

double ts_goodput_optimum(double checkpoint_s, double mtbf_s)
{
  if (mtbf_s <= 0)
    return 0;
  /* The minimiser lies below M + delta (beyond it the exponential dominates) and above zero;
   * golden-section on a log scale converges in ~100 steps to 1e-12 relative. */
  double lo = log(fmax(1e-9 * mtbf_s, 1e-9)), hi = log(10.0 * mtbf_s + checkpoint_s);
  const double g = (sqrt(5.0) - 1.0) / 2.0;
  double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
  double fa = cost_per_work(exp(a), checkpoint_s, mtbf_s);
  double fb = cost_per_work(exp(b), checkpoint_s, mtbf_s);
  for (int i = 0; i < 200 && hi - lo > 1e-13; i++) {
    if (fa < fb) {
      hi = b;
      b = a;
      fb = fa;
      a = hi - g * (hi - lo);
      fa = cost_per_work(exp(a), checkpoint_s, mtbf_s);
    } else {
      lo = a;
      a = b;
      fa = fb;
      b = lo + g * (hi - lo);
      fb = cost_per_work(exp(b), checkpoint_s, mtbf_s);
    }
  }
  return exp(0.5 * (lo + hi));
}

double ts_goodput_segment(double len_s, double restart_s, double mtbf_s)
{
  if (mtbf_s <= 0)
    return len_s;
  return mtbf_s * exp(restart_s / mtbf_s) * expm1(len_s / mtbf_s);
}

/* The interval to use: given, or the optimum; the whole work when there are no failures
 * (then one final checkpoint). */
static double interval_of(const ts_goodput_in *in)
{
  if (in->interval_s > 0)
    return in->interval_s;
  if (in->mtbf_s <= 0)
    return in->work_s;
  /* The optimum, but no more often than the job can checkpoint (once a step); free
   * checkpoints would otherwise make it zero. */
  double tau = ts_goodput_optimum(in->checkpoint_s, in->mtbf_s);
  return MIN(MAX(tau, in->min_interval_s), in->work_s);
}

void ts_goodput_expect(const ts_goodput_in *in, ts_goodput *out)
{
  double w = in->work_s, d = in->checkpoint_s, r = in->restart_s, m = in->mtbf_s;
  double tau = interval_of(in);
  out->interval_s = tau;
  out->young_s = m > 0 ? ts_goodput_young(d, m) : 0;
  out->daly_s = m > 0 ? ts_goodput_daly(d, m) : 0;
  double full = floor(w / tau), rem = w - full * tau;
  /* A remainder below 1e-9 of the interval is rounding, not a segment. */
  if (rem <= 1e-9 * tau)
    rem = 0;
  out->checkpoints = full + (rem > 0 ? 1 : 0);
  out->expected_s =
      full * ts_goodput_segment(tau + d, r, m) + (rem > 0 ? ts_goodput_segment(rem + d, r, m) : 0);
  out->goodput = out->expected_s > 0 ? w / out->expected_s : 0;
  out->expected_failures = m > 0 ? out->expected_s / m : 0;
  out->checkpoint_total_s = out->checkpoints * d;
  out->restart_total_s = out->expected_failures * r;
  out->lost_work_s = out->expected_s - w - out->checkpoint_total_s - out->restart_total_s;
  if (out->lost_work_s < 0)
    out->lost_work_s = 0;
}

/* ---- Monte Carlo ------------------------------------------------------------------------- */

static guint64 splitmix64(guint64 *x)
{
  guint64 z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void ts_gp_rng_seed(ts_gp_rng *r, guint64 seed)
{
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&seed);
}

static inline guint64 rotl(guint64 x, int k)
{
  return (x << k) | (x >> (64 - k));
}

guint64 ts_gp_rng_next(ts_gp_rng *r)
{
  guint64 *s = r->s;
  guint64 result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double ts_gp_rng_uniform(ts_gp_rng *r)
{
  return (double)(ts_gp_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Time to the next failure: exponential with mean m (inversion; 1 - u is in (0, 1]). */
static inline double draw(ts_gp_rng *r, double m)
{
  return -m * log1p(-ts_gp_rng_uniform(r));
}

/* A failure, then restarts until one completes: returns the time from the failure until
 * work resumes, drawing the time left to the next failure into *x. */
static double fail_and_restart(ts_gp_rng *rng, double lost, double r, double m, double *x)
{
  double t = lost; /* the work since the last checkpoint is lost */
  for (;;) {
    *x = draw(rng, m);
    if (*x >= r) {
      *x -= r;
      return t + r;
    }
    t += *x; /* a failure during the restart starts it over */
  }
}

/* One training: full segments of tau + delta, then the remainder and its checkpoint.
 * Exponential failure times are memoryless, so the time left to the next failure carries
 * over between segments, and the segments a failure-free stretch completes are counted in
 * one division: the work is O(failures), not O(segments). */
static double one_run(ts_gp_rng *rng, double w, double tau, double d, double r, double m)
{
  double full = floor(w / tau), rem = w - full * tau;
  if (rem <= 1e-9 * tau)
    rem = 0;
  double t = 0, x = m > 0 ? draw(rng, m) : INFINITY, len = tau + d, left = full;
  while (left > 0) {
    double fit = floor(x / len);
    if (fit >= left) {
      t += left * len;
      x -= left * len;
      break;
    }
    t += fit * len;
    left -= fit;
    t += fail_and_restart(rng, x - fit * len, r, m, &x);
  }
  if (rem > 0) {
    double last = rem + d;
    while (x < last)
      t += fail_and_restart(rng, x, r, m, &x);
    t += last;
  }
  return t;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Quantile by linear interpolation between order statistics (type 7, as R and numpy). */
static double quantile(const double *v, int n, double q)
{
  double h = (n - 1) * q;
  int i = (int)floor(h);
  if (i + 1 >= n)
    return v[n - 1];
  return v[i] + (h - i) * (v[i + 1] - v[i]);
}

void ts_goodput_monte_carlo(const ts_goodput_in *in, int runs, guint64 seed, ts_goodput_mc *out)
{
  g_return_if_fail(runs > 0);
  double tau = interval_of(in);
  ts_gp_rng rng;
  ts_gp_rng_seed(&rng, seed);
  double *v = g_new(double, runs);
  double sum = 0;
  for (int i = 0; i < runs; i++) {
    v[i] = one_run(&rng, in->work_s, tau, in->checkpoint_s, in->restart_s, in->mtbf_s);
    sum += v[i];
  }
  qsort(v, (size_t)runs, sizeof *v, cmp_double);
  out->runs = runs;
  out->mean_s = sum / runs;
  out->median_s = quantile(v, runs, 0.5);
  out->p90_s = quantile(v, runs, 0.9);
  out->min_s = v[0];
  out->max_s = v[runs - 1];
  g_free(v);
}
