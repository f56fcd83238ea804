/* test_published: trainsim against published measurements (vTrain's nccl-tests all-reduce
 * tables and Megatron iteration times on DGX A100), and the fits behind the shipped numbers.
 *
 * Data: github VIA-Research/vTrain, commit f8dda84 (MIT), copied verbatim into the repository
 * (data/published/vtrain, with its LICENSE and PROVENANCE.txt), so a clean clone tests it. Set
 * TS_PUBLISHED_REPORT=1 to print the fits and the error tables (bench/fit_published.sh does);
 * docs/validation-published.md has the results. */
#include "ts_coll.h"
#include "ts_fit.h"
#include "ts_model.h"
#include "ts_plan.h"
#include "ts_replay.h"
#include "ts_report.h"
#include "ts_run.h"
#include "ts_topo.h"
#include "ts_util.h"

#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Thresholds, justified in docs/validation-published.md ("What the tests assert"). */

static gboolean report_on(void)
{
  const char *v = g_getenv("TS_PUBLISHED_REPORT");
  return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

static ts_topo *load_shipped(const char *name)
{
  g_autofree char *path = g_strdup_printf("%s/topologies/%s.ini", TS_SOURCE_DIR, name);
  g_autoptr(GError) error = NULL;
  ts_topo *t = ts_topo_load(path, &error);
  cr_assert_not_null(t, "%s: %s", path, error != NULL ? error->message : "(no error)");
  return t;
}

/* The vTrain data folder, inside the repository. Caller frees. */
static char *vtrain_dir(void)
{
  return g_strdup(TS_SOURCE_DIR "/data/published/vtrain");
}

static char *read_data(const char *rel)
{
  g_autofree char *base = vtrain_dir();
  g_autofree char *path = g_build_filename(base, rel, NULL);
  char *text = NULL;
  g_autoptr(GError) error = NULL;
  gboolean ok = g_file_get_contents(path, &text, NULL, &error);
  cr_assert(ok, "%s: %s (the published data lives in data/published/vtrain)", path,
            error != NULL ? error->message : "");
  return text;
}

/* A topology of one DGX A100 node cut down to n GPUs: the shipped chip and [dim.node] with
 * size n, the other dimensions dropped. Owned by the caller. */
/* The first n chips of a topology's dimension `dim`, as a one-dimensional topology. */
static ts_topo *dim_of(const ts_topo *shipped, const char *dim, int n)
{
  ts_topo *t = ts_topo_copy(shipped);
  int node = ts_topo_dim_index(t, dim);
  cr_assert(node >= 0, "%s has no [dim.%s]", t->path, dim);
  ts_dim keep = t->dims[node];
  for (int d = 0; d < t->ndims; d++)
    if (d != node)
      g_free(t->dims[d].name);
  t->dims[0] = keep;
  t->dims[0].size = n;
  t->ndims = 1;
  t->nchips = n;
  return t;
}

static ts_topo *node_of(const ts_topo *shipped, int n)
{
  return dim_of(shipped, "node", n);
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of v[0..n), which it sorts. */
static double median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- Part 1: the network. nccl-tests all-reduce inside one node. ------------------------- */

/* One LUT row: nccl-tests all_reduce_perf, out-of-place and in-place times averaged. */
typedef struct {
  int n;
  double bytes, time_s;
  double x_s, y_sBps; /* trainsim's ring time is x_s * alpha/1s + y_sBps / B (see fit_ring) */
} lut_row;

static GArray *read_lut(const char *gpu)
{
  GArray *rows = g_array_new(FALSE, FALSE, sizeof(lut_row));
  for (int n = 2; n <= 8; n++) {
    g_autofree char *rel = g_strdup_printf("allreduce-lut/%s/AR_GPU%d_1M_1024M_LUT", gpu, n);
    g_autofree char *text = read_data(rel);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    int count = 0;
    for (int i = 1; lines[i] != NULL; i++) { /* line 0 is the header */
      if (*g_strstrip(lines[i]) == '\0')
        continue;
      g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
      double s, t1, t2;
      gboolean ok = g_strv_length(f) == 7 && ts_parse_double(f[0], &s) &&
                    ts_parse_double(f[3], &t1) && ts_parse_double(f[5], &t2) && s > 0 && t1 > 0 &&
                    t2 > 0;
      cr_assert(ok, "%s line %d: '%s': expected size,count,type,time,busbw,time,busbw", rel, i + 1,
                lines[i]);
      lut_row r = {n, s, 0.5 * (t1 + t2) * 1e-9, 0, 0};
      g_array_append_val(rows, r);
      count++;
    }
    cr_assert_eq(count, 1024, "%s: %d rows, expected 1024 (1 MiB steps up to 1 GiB)", rel, count);
  }
  return rows;
}

static double ring_time(const ts_topo *t, double bytes)
{
  ts_group_shape g;
  int d0 = 0;
  ts_group_shape_dims(t, &d0, 1, &g);
  g_autoptr(GError) error = NULL;
  double s = ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_RING, &g, bytes, NULL, &error);
  cr_assert(s > 0, "ring all-reduce: %s", error != NULL ? error->message : "no time");
  return s;
}

/*
 * Least-squares fit of the node's per-hop latency alpha and achieved bandwidth B to the LUT,
 * minimising the sum of squared RELATIVE errors (every row counts alike, 1 MiB or 1 GiB).
 * trainsim's ring all-reduce on a switch dimension is linear in alpha and 1/B, so the
 * coefficients are read off trainsim itself (ts_coll_time at two settings) rather than
 * restated from a closed form, and checked for linearity at a third. Minimising
 * sum (alpha x_i/T_i + y_i/(B T_i) - 1)^2 is then a 2x2 linear system (normal equations).
 */
static void fit_ring(const ts_topo *shipped, GArray *rows, double *alpha_s, double *bw_Bps)
{
  ts_topo *t[9] = {NULL};
  for (int n = 2; n <= 8; n++)
    t[n] = node_of(shipped, n);
  double sxx = 0, sxy = 0, syy = 0, sx = 0, sy = 0;
  for (guint i = 0; i < rows->len; i++) {
    lut_row *r = &g_array_index(rows, lut_row, i);
    ts_dim *d = &t[r->n]->dims[0];
    d->latency_s = 0;
    d->link_bw_Bps = 1e9;
    double t0 = ring_time(t[r->n], r->bytes);
    d->latency_s = 1e-6;
    double t1 = ring_time(t[r->n], r->bytes);
    r->y_sBps = t0 * 1e9;
    r->x_s = (t1 - t0) / 1e-6;
    d->latency_s = 3e-6;
    d->link_bw_Bps = 2e11;
    double t2 = ring_time(t[r->n], r->bytes), lin = 3e-6 * r->x_s + r->y_sBps / 2e11;
    cr_assert(fabs(t2 - lin) <= 1e-9 * t2, "ring time not linear in alpha and 1/B: %g vs %g", t2,
              lin);
    double x = r->x_s / r->time_s, y = r->y_sBps / r->time_s;
    sxx += x * x, sxy += x * y, syy += y * y, sx += x, sy += y;
  }
  double det = sxx * syy - sxy * sxy;
  cr_assert(det > 0, "singular fit");
  *alpha_s = (sx * syy - sy * sxy) / det;
  *bw_Bps = 1.0 / ((sxx * sy - sxy * sx) / det);
  for (int n = 2; n <= 8; n++)
    ts_topo_free(t[n]);
}

typedef struct {
  double median, max, mean, signed_mean;
} err_stats;

/* Relative errors of trainsim (algo over the node of the shipped topology) on the rows with n
 * GPUs (n = 0: every row). */
static err_stats lut_errors(const ts_topo *shipped, GArray *rows, int n, ts_coll_algo algo)
{
  double *e = g_new(double, rows->len);
  int k = 0;
  double sum = 0, ssum = 0, mx = 0;
  ts_topo *t[9] = {NULL};
  for (guint i = 0; i < rows->len; i++) {
    const lut_row *r = &g_array_index(rows, lut_row, i);
    if (n != 0 && r->n != n)
      continue;
    if (t[r->n] == NULL)
      t[r->n] = node_of(shipped, r->n);
    ts_group_shape g;
    int d0 = 0;
    ts_group_shape_dims(t[r->n], &d0, 1, &g);
    g_autoptr(GError) error = NULL;
    double s = ts_coll_time(t[r->n], TS_COLL_ALLREDUCE, algo, &g, r->bytes, NULL, &error);
    cr_assert(s > 0, "%s", error != NULL ? error->message : "no time");
    double rel = s / r->time_s - 1;
    e[k++] = fabs(rel);
    sum += fabs(rel), ssum += rel;
    mx = fabs(rel) > mx ? fabs(rel) : mx;
  }
  for (int m = 0; m < 9; m++)
    ts_topo_free(t[m]);
  err_stats st = {median(e, k), mx, sum / k, ssum / k};
  g_free(e);
  return st;
}

/* Reads [dim.D] link_bandwidth_GBps, bandwidth_efficiency and latency_us as written. */
static void raw_dim_keys(const char *name, const char *dim, double *bw_GBps, double *eff,
                         double *lat_us)
{
  g_autofree char *path = g_strdup_printf("%s/topologies/%s.ini", TS_SOURCE_DIR, name);
  g_autofree char *group = g_strdup_printf("dim.%s", dim);
  g_autoptr(GError) error = NULL;
  g_autoptr(GKeyFile) kf = ts_kf_load(path, &error);
  cr_assert_not_null(kf, "%s", error != NULL ? error->message : "");
  gboolean ok =
      ts_kf_double(kf, path, group, "link_bandwidth_GBps", FALSE, 0, 0, 1e6, "bw", bw_GBps,
                   &error) &&
      ts_kf_double(kf, path, group, "bandwidth_efficiency", TRUE, 1, 0, 1, "eff", eff, &error) &&
      ts_kf_double(kf, path, group, "latency_us", FALSE, 0, 0, 1e6, "lat", lat_us, &error);
  cr_assert(ok, "%s", error != NULL ? error->message : "");
}

static const char *const DGX_A100[] = {"dgx-a100-1node", "dgx-a100-4node", "dgx-a100-32node"};
/* Every file with an HGX A100 node (8 A100 SXM4 on second-generation NVSwitch): one kind. */

/* ---- NCCL's all-reduce as nccl-tests measures it: vTrain's LUT (2-8 A100s, one node, 1 MiB
 * steps) and Echo's logs (2-8 A100s on one node, 16-128 on 2-16 nodes of Azure ND A100 v4,
 * powers of two). trainsim runs `auto`, which on switch dimensions is what NCCL picks
 * (algorithm and protocol). One parameter set per machine kind: [dim.node] of the HGX A100
 * (both datasets), [dim.net] of ND A100 v4's 8x HDR InfiniBand (Echo, several nodes). Each is
 * fitted on a fixed half of the rows (vTrain: odd multiples of 1 MiB; Echo: even powers of two)
 * and judged on the other half. ---- */

#define ECHO_DIR TS_SOURCE_DIR "/data/published/echo-nccl"
#define TARGET_LO (1 << 20)
#define TARGET_HI (1 << 30)

typedef struct {
  int set; /* 0 vTrain, 1 Echo */
  int gpus, nodes;
  double bytes, time_s;
  gboolean train;
  gboolean first; /* the first size of an Echo sweep across nodes: a start-up cost, no statistic
                   * or fit counts it (first_size_errors reports it alone) */
} ar_row;

/* Echo's all-reduce rows; training: even powers of two, held out: odd ones. */
static GArray *read_echo(void)
{
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  cr_assert(g_file_get_contents(ECHO_DIR "/allreduce.csv", &text, NULL, &error), "%s",
            error->message);
  GArray *rows = g_array_new(FALSE, FALSE, sizeof(ar_row));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  cr_assert_str_eq(lines[0],
                   "gpus,nodes,bytes,oop_time_us,oop_busbw_GBps,ip_time_us,ip_busbw_GBps");
  for (int i = 1; lines[i] != NULL; i++) {
    if (*lines[i] == '\0')
      continue;
    g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
    double g, nd, b, t1, t2;
    gboolean ok = g_strv_length(f) == 7 && ts_parse_double(f[0], &g) &&
                  ts_parse_double(f[1], &nd) && ts_parse_double(f[2], &b) &&
                  ts_parse_double(f[3], &t1) && ts_parse_double(f[5], &t2);
    cr_assert(ok, "allreduce.csv line %d: '%s'", i + 1, lines[i]);
    int l2 = (int)llround(log2(b));
    /* The in-place and out-of-place runs averaged, as for vTrain's LUT. */
    gboolean first =
        nd > 1 && (rows->len == 0 || g_array_index(rows, ar_row, rows->len - 1).gpus != (int)g);
    ar_row r = {1, (int)g, (int)nd, b, 0.5 * (t1 + t2) * 1e-6, l2 % 2 == 0, first};
    g_array_append_val(rows, r);
  }
  return rows;
}

static GArray *vtrain_rows(void)
{
  GArray *lut = read_lut("a100");
  GArray *rows = g_array_new(FALSE, FALSE, sizeof(ar_row));
  for (guint i = 0; i < lut->len; i++) {
    const lut_row *l = &g_array_index(lut, lut_row, i);
    gint64 mib = (gint64)llround(l->bytes / (1 << 20));
    /* Training: odd multiples of 1 MiB up to 16 MiB and then every 64th (1, 3, ..., 15, 65,
     * 129, ...: 23 sizes per group size, a fixed subset of the odd half so that the fit takes
     * seconds); held out: every other row (1,001 per group size). */
    gboolean train = mib % 2 == 1 && (mib <= 16 || mib % 64 == 1);
    ar_row r = {0, l->n, 1, l->bytes, l->time_s, train, FALSE};
    g_array_append_val(rows, r);
  }
  g_array_unref(lut);
  return rows;
}

/* Topologies for every (GPUs, nodes) of the rows, from a shipped file: the node dimension cut
 * to the GPUs of one node, the network dimension to the nodes. */
typedef struct {
  ts_topo *single[9];
  ts_topo *multi[17];
} topo_set;

static void topo_set_init(topo_set *ts, const ts_topo *shipped)
{
  memset(ts, 0, sizeof *ts);
  for (int n = 2; n <= 8; n++)
    ts->single[n] = node_of(shipped, n);
  if (ts_topo_dim_index(shipped, "net") >= 0)
    for (int k = 2; k <= 16; k++) {
      ts_topo *t = ts_topo_copy(shipped);
      int net = ts_topo_dim_index(t, "net");
      t->dims[net].size = k;
      t->nchips = t->dims[0].size * k;
      ts->multi[k] = t;
    }
}

static void topo_set_clear(topo_set *ts)
{
  for (int n = 0; n < 9; n++)
    ts_topo_free(ts->single[n]);
  for (int k = 0; k < 17; k++)
    ts_topo_free(ts->multi[k]);
}

/* Sets [dim.D] of every topology of the set to an achieved bandwidth and a latency. */
static void topo_set_dim(topo_set *ts, const char *dim, double bw_Bps, double lat_s)
{
  for (int n = 0; n < 9; n++)
    if (ts->single[n] != NULL && strcmp(dim, "node") == 0) {
      ts->single[n]->dims[0].link_bw_Bps = bw_Bps;
      ts->single[n]->dims[0].latency_s = lat_s;
    }
  for (int k = 0; k < 17; k++)
    if (ts->multi[k] != NULL) {
      int d = ts_topo_dim_index(ts->multi[k], dim);
      ts->multi[k]->dims[d].link_bw_Bps = bw_Bps;
      ts->multi[k]->dims[d].latency_s = lat_s;
    }
}

/* trainsim's time of a row under auto (= what NCCL picks on these switch dimensions). */
static double predict_row(const topo_set *ts, const ar_row *r, ts_coll_algo *algo)
{
  const ts_topo *t = r->nodes > 1 ? ts->multi[r->nodes] : ts->single[r->gpus];
  cr_assert(t != NULL && t->nchips == r->gpus, "no topology for %d GPUs on %d nodes", r->gpus,
            r->nodes);
  int dims[2] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, t->ndims, &g);
  g_autoptr(GError) error = NULL;
  double s = ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, &g, r->bytes, algo, &error);
  cr_assert(s > 0, "%s", error != NULL ? error->message : "no time");
  return s;
}

/* Which rows a statistic covers. */
typedef enum { PICK_TRAIN, PICK_HELD_OUT, PICK_ALL } pick;

static gboolean picked(const ar_row *r, int set, int multi, pick p, double lo, double hi)
{
  if (r->set != set || (multi != (r->nodes > 1)) || r->bytes < lo || r->bytes > hi || r->first)
    return FALSE;
  return p == PICK_ALL || (p == PICK_TRAIN) == r->train;
}

/* busbw error of trainsim (signed: + is trainsim too fast) = measured time / predicted - 1. */
static err_stats busbw_errors(const topo_set *ts, GArray *rows, int set, int multi, pick p,
                              double lo, double hi, int gpus, int *count)
{
  double *e = g_new(double, rows->len + 1);
  int k = 0;
  double sum = 0, ssum = 0, mx = 0;
  for (guint i = 0; i < rows->len; i++) {
    const ar_row *r = &g_array_index(rows, ar_row, i);
    if (!picked(r, set, multi, p, lo, hi) || (gpus != 0 && r->gpus != gpus))
      continue;
    double rel = r->time_s / predict_row(ts, r, NULL) - 1;
    e[k++] = fabs(rel);
    sum += fabs(rel), ssum += rel;
    mx = MAX(mx, fabs(rel));
  }
  err_stats st = {k > 0 ? median(e, k) : 0, mx, k > 0 ? sum / k : 0, k > 0 ? ssum / k : 0};
  g_free(e);
  if (count != NULL)
    *count = k;
  return st;
}

/* The fit's objective: mean squared log error of the time over the training rows (every size:
 * the small ones fix the LL and LL128 protocols), each dataset weighted alike. */
typedef struct {
  topo_set *ts;
  GArray *rows;
  const char *dim;
  int set, multi; /* the rows fitted: dataset (0 vTrain, 1 Echo), one node or several */
  double raw_Bps; /* the dimension's datasheet bandwidth */
  double eff, lat_s;
  double ll, ll128;             /* LL and LL128 bandwidth as fractions of Simple's */
  double base_s[3];             /* fixed cost of LL, LL128, Simple */
  double step_s[2];             /* per-step latency of LL, LL128 */
  double local_Bps;             /* local work rate */
  gboolean protocols;           /* fit LL and LL128 too (the data has sizes below 1 MiB) */
  double tree_Bps;              /* cap on the tree's bus bandwidth (0: none, not fitted) */
  double ll_ch_s;               /* LL's cost per channel (0: none, not fitted) */
  double hop_s;                 /* the node's Simple hop across nodes (0: none, not fitted) */
  double chunk_s;               /* the Simple tree's cost per chunk (0: none, not fitted) */
  const struct nfit_bounds *bd; /* physical bounds of the parameters (NULL: none) */
} nfit;

/* Bounds on a fit's parameters, [lo, hi] each (seconds, fractions, B/s). */
typedef struct nfit_bounds {
  double eff[2], lat_s[2], ll[2], ll128[2], base_s[3][2], step_s[2][2], tree_Bps[2], hop_s[2],
      chunk_s[2];
} nfit_bounds;

/* The network's bounds, from NCCL's own tuning model (src/graph/tuning.cc, NVIDIA/nccl 5067397;
 * the constants sim/coll/ts_coll_algos.c uses): a per-step latency within half to twice NCCL's
 * hwLat for the network's ring (LL 2.7, LL128 4.0, Simple 14 us); a fixed cost from NCCL's ring
 * baseLat (LL 6.6, LL128 14, Simple 8.4 us) up to 40 us more (kernel launch and nccl-tests' loop,
 * which NCCL's model leaves out); the node's Simple hop across nodes between NCCL's NVLink LL hop
 * (0.6 us, the fastest hop NCCL knows) and its NVLink Simple ring hop (3.4 us); LL128 at least
 * half NCCL's 0.92 of Simple's bandwidth, LL at least a quarter (NCCL's nominal 0.5 halved); the
 * tree's cost per chunk at most a network Simple step (14 us). Without them (before December
 * 2026, s12) the fit ran LL128's fixed cost to 0.01 us and its bandwidth to 0.02 of Simple's, the
 * node's hop to 0.03 us and LL's fixed cost to 11.5 ms (never chosen). */
static const nfit_bounds NET_BOUNDS = {{0.5, 1.0},
                                       {7e-6, 28e-6},
                                       {0.25, 1.0},
                                       {0.46, 1.0},
                                       {{6.6e-6, 46.6e-6}, {14e-6, 54e-6}, {8.4e-6, 48.4e-6}},
                                       {{1.35e-6, 5.4e-6}, {2e-6, 8e-6}},
                                       {1e9, 1e12},
                                       {0.6e-6, 3.4e-6},
                                       {0.0, 14e-6}};

/* Is v inside bounds b (no bounds: always)? */
static gboolean in_bounds(const double *b, double v)
{
  return b == NULL || (v >= b[0] * (1 - 1e-9) && v <= b[1] * (1 + 1e-9));
}

static void topo_set_fracs(topo_set *ts, const char *dim, double ll, double ll128)
{
  for (int n = 0; n < 9; n++)
    if (ts->single[n] != NULL && strcmp(dim, "node") == 0) {
      ts->single[n]->dims[0].ll_bw_frac = ll;
      ts->single[n]->dims[0].ll128_bw_frac = ll128;
    }
  for (int k = 0; k < 17; k++)
    if (ts->multi[k] != NULL) {
      int d = ts_topo_dim_index(ts->multi[k], dim);
      ts->multi[k]->dims[d].ll_bw_frac = ll;
      ts->multi[k]->dims[d].ll128_bw_frac = ll128;
    }
}

static void topo_set_bases(topo_set *ts, const char *dim, const double *base_s)
{
  for (int n = 0; n < 9; n++)
    if (ts->single[n] != NULL && strcmp(dim, "node") == 0)
      memcpy(ts->single[n]->dims[0].nccl_base_s, base_s, 3 * sizeof(double));
  for (int k = 0; k < 17; k++)
    if (ts->multi[k] != NULL) {
      int d = ts_topo_dim_index(ts->multi[k], dim);
      memcpy(ts->multi[k]->dims[d].nccl_base_s, base_s, 3 * sizeof(double));
    }
}

static void topo_set_steps(topo_set *ts, const char *dim, const double *step_s)
{
  for (int n = 0; n < 9; n++)
    if (ts->single[n] != NULL && strcmp(dim, "node") == 0)
      memcpy(ts->single[n]->dims[0].nccl_step_s, step_s, 2 * sizeof(double));
  for (int k = 0; k < 17; k++)
    if (ts->multi[k] != NULL) {
      int d = ts_topo_dim_index(ts->multi[k], dim);
      memcpy(ts->multi[k]->dims[d].nccl_step_s, step_s, 2 * sizeof(double));
    }
}

static void topo_set_local(topo_set *ts, const char *dim, double v)
{
  for (int n = 0; n < 9; n++)
    if (ts->single[n] != NULL && strcmp(dim, "node") == 0)
      ts->single[n]->dims[0].nccl_local_Bps = v;
  for (int k = 0; k < 17; k++)
    if (ts->multi[k] != NULL)
      ts->multi[k]->dims[ts_topo_dim_index(ts->multi[k], dim)].nccl_local_Bps = v;
}

static void topo_set_tree(topo_set *ts, const char *dim, double v)
{
  for (int k = 0; k < 17; k++)
    if (ts->multi[k] != NULL)
      ts->multi[k]->dims[ts_topo_dim_index(ts->multi[k], dim)].nccl_tree_Bps = v;
}

static void topo_set_ll_ch(topo_set *ts, const char *dim, double v)
{
  for (int n = 0; n < 9; n++)
    if (ts->single[n] != NULL && strcmp(dim, "node") == 0)
      ts->single[n]->dims[0].nccl_ll_channel_s = v;
  for (int k = 0; k < 17; k++)
    if (ts->multi[k] != NULL)
      ts->multi[k]->dims[ts_topo_dim_index(ts->multi[k], dim)].nccl_ll_channel_s = v;
}

static void topo_set_hop(topo_set *ts, const char *dim, double v)
{
  for (int k = 0; k < 17; k++)
    if (ts->multi[k] != NULL)
      ts->multi[k]->dims[ts_topo_dim_index(ts->multi[k], dim)].nccl_node_hop_s = v;
}

static void topo_set_chunk(topo_set *ts, const char *dim, double v)
{
  for (int k = 0; k < 17; k++)
    if (ts->multi[k] != NULL)
      ts->multi[k]->dims[ts_topo_dim_index(ts->multi[k], dim)].nccl_tree_chunk_s = v;
}

static double nfit_objective(const nfit *f)
{
  topo_set_ll_ch(f->ts, f->dim, f->ll_ch_s);
  if (f->multi)
    topo_set_hop(f->ts, f->dim, f->hop_s);
  if (f->multi)
    topo_set_tree(f->ts, f->dim, f->tree_Bps);
  if (f->multi)
    topo_set_chunk(f->ts, f->dim, f->chunk_s);
  topo_set_local(f->ts, f->dim, f->local_Bps);
  topo_set_steps(f->ts, f->dim, f->step_s);
  topo_set_dim(f->ts, f->dim, f->raw_Bps * f->eff, f->lat_s);
  topo_set_fracs(f->ts, f->dim, f->ll, f->ll128);
  topo_set_bases(f->ts, f->dim, f->base_s);
  double sum[2] = {0, 0};
  int n[2] = {0, 0};
  for (guint i = 0; i < f->rows->len; i++) {
    const ar_row *r = &g_array_index(f->rows, ar_row, i);
    if (!picked(r, f->set, f->multi, PICK_TRAIN, 0, INFINITY))
      continue;
    /* Echo's sweeps across nodes start at 1 KiB, and that first size pays a start-up cost the
     * sizes after it do not: on 16 nodes its out-of-place run took 1,242 us and the in-place run
     * right after it 92 us (2 KiB: 103 / 92 us); on 8 nodes 315 / 294 us (2 KiB: 82 / 73). No
     * per-byte or per-step cost has it, and at a third of the weight those two rows were 83% of
     * the network fit's objective (they pulled LL's costs up); picked() leaves it out (ar_row's
     * first), of the fit and of every statistic but first_size_errors. */
    /* Sizes below 1 MiB (the low-latency protocols) count a third: the targets are on the
     * 1 MiB-1 GiB range, where the fit must not trade accuracy for the small sizes. */
    double l = log(predict_row(f->ts, r, NULL) / r->time_s), w = r->bytes >= TARGET_LO ? 1 : 0.3;
    sum[r->set] += w * l * l;
    n[r->set]++;
  }
  double v = 0;
  int sets = 0;
  for (int k = 0; k < 2; k++)
    if (n[k] > 0)
      v += sum[k] / n[k], sets++;
  return v / sets;
}

static double nfit_at_eff(double eff, void *v)
{
  nfit *f = v;
  f->eff = eff;
  return nfit_objective(f);
}

static double nfit_at_lat(double lat, void *v)
{
  nfit *f = v;
  f->lat_s = lat;
  return nfit_objective(f);
}

static double nfit_at_ll(double v, void *p)
{
  nfit *f = p;
  f->ll = v;
  return nfit_objective(f);
}

static double nfit_at_ll128(double v, void *p)
{
  nfit *f = p;
  f->ll128 = v;
  return nfit_objective(f);
}

/* The fit's state at a shipped file's values for dimension dim. */
static nfit nfit_of(topo_set *ts, GArray *rows, const ts_topo *t, const char *dim, int set,
                    int multi, double raw_GBps, double eff, double lat_us)
{
  const ts_dim *d = &t->dims[ts_topo_dim_index(t, dim)];
  nfit f = {ts,
            rows,
            dim,
            set,
            multi,
            raw_GBps * 1e9,
            eff,
            lat_us * 1e-6,
            d->ll_bw_frac,
            d->ll128_bw_frac,
            {0, 0, 0},
            {0, 0},
            d->nccl_local_Bps,
            TRUE,
            d->nccl_tree_Bps,
            d->nccl_ll_channel_s,
            d->nccl_node_hop_s,
            d->nccl_tree_chunk_s,
            NULL};
  memcpy(f.base_s, d->nccl_base_s, sizeof f.base_s);
  memcpy(f.step_s, d->nccl_step_s, sizeof f.step_s);
  return f;
}

static void nfit_print(const nfit *f, const char *label)
{
  fprintf(stderr,
          "nccl fit, %s [dim.%s] (training half): bandwidth_efficiency = %.4f "
          "(%.2f GB/s), latency_us = %.3f, nccl_ll_bandwidth_fraction = %.3f, "
          "nccl_ll128_bandwidth_fraction = %.3f, nccl_ll_base_latency_us = %.2f, "
          "nccl_ll128_base_latency_us = %.2f, nccl_simple_base_latency_us = %.2f, "
          "nccl_ll_latency_us = %.3f, nccl_ll128_latency_us = %.3f, "
          "nccl_local_bandwidth_GBps = %.1f, nccl_tree_bandwidth_GBps = %.1f, "
          "nccl_ll_channel_latency_us = %.3f, nccl_node_hop_latency_us = %.3f, "
          "nccl_tree_chunk_latency_us = %.3f; objective %.6g\n",
          label, f->dim, f->eff, f->eff * f->raw_Bps / 1e9, f->lat_s * 1e6, f->ll, f->ll128,
          f->base_s[0] * 1e6, f->base_s[1] * 1e6, f->base_s[2] * 1e6, f->step_s[0] * 1e6,
          f->step_s[1] * 1e6, f->local_Bps / 1e9, f->tree_Bps / 1e9, f->ll_ch_s * 1e6,
          f->hop_s * 1e6, f->chunk_s * 1e6, nfit_objective(f));
}

static int nfit_q; /* the protocol whose base latency nfit_at_base moves */
static double nfit_at_base(double v, void *p)
{
  nfit *f = p;
  f->base_s[nfit_q] = v;
  return nfit_objective(f);
}

static double nfit_at_step(double v, void *p)
{
  nfit *f = p;
  f->step_s[nfit_q] = v;
  return nfit_objective(f);
}

static double nfit_at_tree(double v, void *p)
{
  nfit *f = p;
  f->tree_Bps = v;
  return nfit_objective(f);
}

static double nfit_at_ll_ch(double v, void *p)
{
  nfit *f = p;
  f->ll_ch_s = v;
  return nfit_objective(f);
}

static double nfit_at_hop(double v, void *p)
{
  nfit *f = p;
  f->hop_s = v;
  return nfit_objective(f);
}

static double nfit_at_chunk(double v, void *p)
{
  nfit *f = p;
  f->chunk_s = v;
  return nfit_objective(f);
}

static double nfit_at_local(double v, void *p)
{
  nfit *f = p;
  f->local_Bps = v;
  return nfit_objective(f);
}

/* Golden-section search for the minimum of f on [a, b] to within tol (f unimodal there). */
static double golden(double (*f)(double, void *), void *ctx, double a, double b, double tol)
{
  const double r = 0.6180339887498949;
  double c = b - r * (b - a), d = a + r * (b - a), fc = f(c, ctx), fd = f(d, ctx);
  while (fabs(b - a) > tol) {
    if (fc < fd) {
      b = d, d = c, fd = fc;
      c = b - r * (b - a);
      fc = f(c, ctx);
    } else {
      a = c, c = d, fc = fd;
      d = a + r * (b - a);
      fd = f(d, ctx);
    }
  }
  return 0.5 * (a + b);
}

/* Coordinate descent, golden section on each parameter in turn (the objective is smooth and
 * unimodal in each over these ranges; the shipped-optimum test checks the result). */
static void nfit_run(nfit *f)
{
  /* Local golden sections, [x/2, 2x] around the current value of each parameter in turn (cut
   * to the parameter's bounds where the fit has them): the objective is a minimum over
   * protocols, so it has kinks and other basins; the fit starts at the shipped values and walks
   * downhill. */
  const char *rounds_env = g_getenv("TS_PUBLISHED_FIT_ROUNDS");
  int rounds = rounds_env != NULL ? atoi(rounds_env) : f->multi ? 4 : 12;
  const nfit_bounds *b = f->bd;
#define LO(x, k, field) (b != NULL ? MAX((x) / (k), b->field[0]) : (x) / (k))
#define HI(x, k, field) (b != NULL ? MIN((x) * (k), b->field[1]) : (x) * (k))
  if (b != NULL) { /* a start outside the bounds begins at the nearest bound */
    f->eff = CLAMP(f->eff, b->eff[0], b->eff[1]);
    f->lat_s = CLAMP(f->lat_s, b->lat_s[0], b->lat_s[1]);
    f->ll = CLAMP(f->ll, b->ll[0], b->ll[1]);
    f->ll128 = CLAMP(f->ll128, b->ll128[0], b->ll128[1]);
    for (int q = 0; q < 3; q++)
      f->base_s[q] = CLAMP(f->base_s[q], b->base_s[q][0], b->base_s[q][1]);
    for (int q = 0; q < 2; q++)
      f->step_s[q] = CLAMP(f->step_s[q], b->step_s[q][0], b->step_s[q][1]);
    f->tree_Bps = CLAMP(f->tree_Bps, b->tree_Bps[0], b->tree_Bps[1]);
    f->hop_s = CLAMP(f->hop_s, b->hop_s[0], b->hop_s[1]);
    f->chunk_s = CLAMP(f->chunk_s, b->chunk_s[0], b->chunk_s[1]);
  }
  for (int round = 0; round < rounds; round++) {
    f->eff = golden(nfit_at_eff, f, LO(f->eff, 1.5, eff), MIN(HI(f->eff, 1.5, eff), 1.0), 1e-5);
    f->lat_s = golden(nfit_at_lat, f, LO(f->lat_s, 2, lat_s), HI(f->lat_s, 2, lat_s), 1e-10);
    if (f->protocols) {
      f->ll = golden(nfit_at_ll, f, LO(f->ll, 2, ll), MIN(HI(f->ll, 2, ll), 1.0), 1e-5);
      f->ll128 =
          golden(nfit_at_ll128, f, LO(f->ll128, 2, ll128), MIN(HI(f->ll128, 2, ll128), 1.0), 1e-5);
    }
    for (nfit_q = f->protocols ? 0 : 2; nfit_q < 3; nfit_q++)
      f->base_s[nfit_q] = golden(nfit_at_base, f, LO(f->base_s[nfit_q], 2, base_s[nfit_q]),
                                 HI(f->base_s[nfit_q], 2, base_s[nfit_q]), 1e-9);
    for (nfit_q = 0; nfit_q < (f->protocols ? 2 : 0); nfit_q++)
      f->step_s[nfit_q] = golden(nfit_at_step, f, LO(f->step_s[nfit_q], 2, step_s[nfit_q]),
                                 HI(f->step_s[nfit_q], 2, step_s[nfit_q]), 1e-10);
    if (f->local_Bps > 0)
      f->local_Bps = golden(nfit_at_local, f, f->local_Bps / 2, f->local_Bps * 2, 1e6);
    if (f->multi && f->tree_Bps > 0)
      f->tree_Bps =
          golden(nfit_at_tree, f, LO(f->tree_Bps, 2, tree_Bps), HI(f->tree_Bps, 2, tree_Bps), 1e6);
    if (f->protocols && f->ll_ch_s > 0)
      f->ll_ch_s = golden(nfit_at_ll_ch, f, f->ll_ch_s / 2, f->ll_ch_s * 2, 1e-10);
    if (f->multi && f->hop_s > 0)
      f->hop_s = golden(nfit_at_hop, f, LO(f->hop_s, 2, hop_s), HI(f->hop_s, 2, hop_s), 1e-10);
    if (f->multi && f->chunk_s > 0)
      f->chunk_s =
          golden(nfit_at_chunk, f, LO(f->chunk_s, 2, chunk_s), HI(f->chunk_s, 2, chunk_s), 1e-10);
  }
#undef LO
#undef HI
  nfit_objective(f);
}

#define NCCL_FIT_EFF_ABS 0.002  /* shipped bandwidth_efficiency within 0.002 of the optimum */
#define NCCL_FIT_LAT_REL 0.02   /* shipped latency_us within 2% of the optimum */
#define NCCL_FIT_FRAC_ABS 0.005 /* shipped LL / LL128 fractions within 0.005 of the optimum */
#define NCCL_FIT_OBJ_REL 0.002  /* no such step improves the objective by more than 0.2% */

/* The shipped values are the optimum: no step of the rounding size improves the objective. */
static void check_optimum(nfit *f, const char *file)
{
  double eff = f->eff, lat = f->lat_s, ll = f->ll, ll128 = f->ll128, best = nfit_objective(f);
  const double de[] = {NCCL_FIT_EFF_ABS, -NCCL_FIT_EFF_ABS, 0, 0, 0, 0, 0, 0};
  const double dl[] = {0, 0, NCCL_FIT_LAT_REL, -NCCL_FIT_LAT_REL, 0, 0, 0, 0};
  const double d1[] = {0, 0, 0, 0, NCCL_FIT_FRAC_ABS, -NCCL_FIT_FRAC_ABS, 0, 0};
  const double d2[] = {0, 0, 0, 0, 0, 0, NCCL_FIT_FRAC_ABS, -NCCL_FIT_FRAC_ABS};
  double base[3];
  memcpy(base, f->base_s, sizeof base);
  double step[2];
  memcpy(step, f->step_s, sizeof step);
  double local = f->local_Bps, tree = f->tree_Bps, ll_ch = f->ll_ch_s, hop = f->hop_s;
  double chunk = f->chunk_s;
  for (int i = 0; i < 28; i++) {
    /* the Simple tree's cost per chunk, up and down (multi-node fits that give it) */
    f->chunk_s = i >= 26 ? chunk * (i == 26 ? 1 + NCCL_FIT_LAT_REL : 1 - NCCL_FIT_LAT_REL) : chunk;
    /* the node's hop across nodes, up and down (multi-node fits that give it) */
    f->hop_s =
        i == 24 || i == 25 ? hop * (i == 24 ? 1 + NCCL_FIT_LAT_REL : 1 - NCCL_FIT_LAT_REL) : hop;
    /* LL's cost per channel, up and down */
    f->ll_ch_s = i == 22 || i == 23
                     ? ll_ch * (i == 22 ? 1 + NCCL_FIT_LAT_REL : 1 - NCCL_FIT_LAT_REL)
                     : ll_ch;
    f->local_Bps = i == 18 || i == 19
                       ? local * (i == 18 ? 1 + NCCL_FIT_LAT_REL : 1 - NCCL_FIT_LAT_REL)
                       : local;
    /* the tree's bandwidth cap, up and down (multi-node fits) */
    f->tree_Bps =
        i == 20 || i == 21 ? tree * (i == 20 ? 1 + NCCL_FIT_LAT_REL : 1 - NCCL_FIT_LAT_REL) : tree;
    f->eff = eff + (i < 8 ? de[i] : 0);
    f->lat_s = lat * (1 + (i < 8 ? dl[i] : 0));
    f->ll = ll + (i < 8 ? d1[i] : 0);
    f->ll128 = MIN(ll128 + (i < 8 ? d2[i] : 0), 1.0);
    memcpy(f->base_s, base, sizeof base);
    memcpy(f->step_s, step, sizeof step);
    if (i >= 18)
      ;               /* the local rate, the tree's cap and LL's channel cost, set above */
    else if (i >= 14) /* LL's and LL128's step latency, up and down */
      f->step_s[(i - 14) / 2] =
          step[(i - 14) / 2] * ((i % 2) ? 1 - NCCL_FIT_LAT_REL : 1 + NCCL_FIT_LAT_REL);
    else if (i >= 8) /* each protocol's base latency, up and down */
      f->base_s[(i - 8) / 2] =
          base[(i - 8) / 2] * ((i % 2) ? 1 - NCCL_FIT_LAT_REL : 1 + NCCL_FIT_LAT_REL);
    const nfit_bounds *b = f->bd; /* a step out of the fit's bounds is not a candidate */
    if (b != NULL &&
        !(in_bounds(b->eff, f->eff) && in_bounds(b->lat_s, f->lat_s) && in_bounds(b->ll, f->ll) &&
          in_bounds(b->ll128, f->ll128) && in_bounds(b->base_s[0], f->base_s[0]) &&
          in_bounds(b->base_s[1], f->base_s[1]) && in_bounds(b->base_s[2], f->base_s[2]) &&
          in_bounds(b->step_s[0], f->step_s[0]) && in_bounds(b->step_s[1], f->step_s[1]) &&
          in_bounds(b->tree_Bps, f->tree_Bps) && in_bounds(b->hop_s, f->hop_s) &&
          in_bounds(b->chunk_s, f->chunk_s)))
      continue;
    double v = nfit_objective(f);
    cr_assert(v >= best * (1 - NCCL_FIT_OBJ_REL),
              "%s [dim.%s]: objective %.6g at efficiency %.4f, latency %.3f us, LL %.3f, LL128 "
              "%.3f beats the shipped %.6g (%.4f, %.3f us, %.3f, %.3f): refit "
              "(bench/fit_published.sh nccl)",
              file, f->dim, v, f->eff, f->lat_s * 1e6, f->ll, f->ll128, best, eff, lat * 1e6, ll,
              ll128);
  }
  f->eff = eff;
  f->lat_s = lat;
  f->ll = ll;
  f->ll128 = ll128;
  memcpy(f->base_s, base, sizeof base);
  memcpy(f->step_s, step, sizeof step);
  f->local_Bps = local;
  f->tree_Bps = tree;
  f->ll_ch_s = ll_ch;
  f->hop_s = hop;
  f->chunk_s = chunk;
  nfit_objective(f); /* leaves the topologies at the shipped values */
}

static void report_table(const topo_set *ts, GArray *rows, int set, int multi, const char *label)
{
  fprintf(stderr, "\n%s: nccl-tests all-reduce busbw, trainsim auto (NCCL's choice)\n", label);
  fprintf(stderr, "| GPUs | rows 1 MiB-1 GiB (train / held-out) | held-out median | held-out max "
                  "| all median | all max | all signed mean | < 1 MiB median | < 1 MiB max "
                  "| < 1 MiB held-out median | < 1 MiB held-out max |\n"
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  int gl[] = {0, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128};
  for (size_t i = 0; i < G_N_ELEMENTS(gl); i++) {
    int ntr = 0, nho = 0, nsm = 0;
    err_stats tr =
        busbw_errors(ts, rows, set, multi, PICK_TRAIN, TARGET_LO, TARGET_HI, gl[i], &ntr);
    err_stats ho =
        busbw_errors(ts, rows, set, multi, PICK_HELD_OUT, TARGET_LO, TARGET_HI, gl[i], &nho);
    err_stats al = busbw_errors(ts, rows, set, multi, PICK_ALL, TARGET_LO, TARGET_HI, gl[i], NULL);
    err_stats sm = busbw_errors(ts, rows, set, multi, PICK_ALL, 0, TARGET_LO - 1, gl[i], &nsm);
    err_stats sh = busbw_errors(ts, rows, set, multi, PICK_HELD_OUT, 0, TARGET_LO - 1, gl[i], NULL);
    (void)tr;
    if (ntr + nho == 0)
      continue;
    char who[16];
    g_snprintf(who, sizeof who, gl[i] == 0 ? "all" : "%d", gl[i]);
    fprintf(stderr, "| %s | %d / %d | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %+.1f%% | ", who, ntr,
            nho, 100 * ho.median, 100 * ho.max, 100 * al.median, 100 * al.max,
            100 * al.signed_mean);
    if (nsm > 0)
      fprintf(stderr, "%.1f%% | %.1f%% | %.1f%% | %.1f%% |\n", 100 * sm.median, 100 * sm.max,
              100 * sh.median, 100 * sh.max);
    else
      fprintf(stderr, "— | — | — | — |\n");
  }
  /* The first size of each sweep across nodes, left out of every statistic above (a start-up
   * cost, not a steady-state all-reduce): reported alone. */
  for (guint i = 0; i < rows->len; i++) {
    const ar_row *r = &g_array_index(rows, ar_row, i);
    if (r->first && r->set == set && multi)
      fprintf(stderr,
              "first size (start-up), %d GPUs, %.0f B: measured %.1f us, trainsim %.1f us, "
              "busbw error %+.1f%%\n",
              r->gpus, r->bytes, r->time_s * 1e6, predict_row(ts, r, NULL) * 1e6,
              100 * (r->time_s / predict_row(ts, r, NULL) - 1));
  }
}

/* Targets (docs/validation-published.md): busbw median <= 3%, no row from 1 MiB to 1 GiB off by
 * more than 15%. The tests pin what is achieved with a small margin, so a regression fails. */
/* One node, with LL128 against Simple chosen by NCCL's own model (docs/collectives.md: the
 * knee at 8-16 MiB on 6-8 GPUs is NCCL keeping LL128 too long): Echo held-out median 3.5%
 * (2.6% when the fitted costs chose; the median over all 33 rows fell from 2.5% to 1.9%),
 * worst 11.6% (17.3% at 16 MiB on 8 GPUs before); vTrain's LUT held-out median 1.6%, worst
 * 21.1% (20.9% before; 2 MiB on 8 GPUs, where NCCL's LL / LL128 boundary falls). */
/* 2026-12-07 (later): LL's cost per channel (nccl_ll_channel_latency_us) and the node refitted:
 * Echo held-out median 3.4%, worst 7.9% (2 GPUs, 8 MiB); below 1 MiB median 2.4% (6.1% before),
 * worst 21.9% (2 GPUs, 16 KiB; 36.5% before), held-out half (odd powers) 2.4% / 13.2%. */
/* 2026-12-07 (s11): Simple's 128 KiB pieces in one node (nccl_channels = 24, a quarter of the
 * padding's link time) and both nodes refitted: Echo held-out median 3.4% -> 2.4%, worst 7.9% ->
 * 6.8% (2 GPUs, 2 MiB); vTrain's LUT held-out median 1.6% -> 1.3%, worst 21.1% -> 20.1%. */
#define NODE_HELDOUT_MEDIAN_MAX 0.026
#define NODE_WORST_MAX 0.075       /* Echo 1 node: measured 6.8% (2 GPUs, 2 MiB) */
#define NODE_SMALL_MEDIAN_MAX 0.03 /* Echo 1 node, 8 B-512 KiB, all 51 rows: measured 2.4% */
#define NODE_SMALL_WORST_MAX 0.23  /* the same: measured 21.9% (2 GPUs, 16 KiB) */
#define VTRAIN_WORST_MAX 0.21      /* vTrain LUT: measured 20.1% (8 GPUs, 2 MiB) */
/* Across nodes, with the ring and the tree timed as NCCL's pipelines and NCCL's bit-pattern
 * double binary tree (was 9.1% / 39.6% when every step paid the slowest hop's latency):
 * held-out median 3.3% (target 3%, not met), worst 10.7% (target 15%, met). */
/* 2026-12-07: the node's LL128 is now a real protocol (0.61 of Simple, chosen by NCCL's model)
 * and a group's fixed cost is its outermost dimension's; refitted, held-out median 3.8%, worst
 * 12.6% (2 nodes, 8 MiB). */
/* Refitted after the node's LL channel cost: held-out median 3.8%, worst 11.5% (2 nodes). */
/* Refitted after the tree's hop took NCCL's same-protocol tree/ring ratio, LL's NVLink hop 0.6 us
 * in multi-node groups and no x1.8 (NCCL >= 2.18.1): held-out median 3.9%, worst 11.2%; below
 * 1 MiB median 16.0% (16.1%). LL stays out of use across nodes (see docs/collectives.md). */
/* 2026-12-07 (s9): the node's Simple hop across nodes is the network's fitted
 * nccl_node_hop_latency_us (1.06 us, not the one-thread node's 3.34 us): held-out median 3.5%
 * (3.9%), held-out worst 8.5% (11.2%); over all 44 rows median 3.8% (3.4%), worst 14.0% (11.2%:
 * 4 MiB on 4 nodes, a dip in the log between 2 and 8 MiB); below 1 MiB median 14.4% (16.0%). */
/* 2026-12-07 (s11): refitted on the node with Simple's pieces (which do not apply across nodes;
 * the node's bandwidth and local rate they share moved): held-out median 3.5% -> 3.3%, worst
 * 8.5%; over all 44 rows median 3.7%, worst 13.3% (4 MiB on 4 nodes). */
/* 2026-12-07 (s11, nccl2): the Simple tree pays a cost per chunk of NCCL's chunk rule
 * (nccl_tree_chunk_latency_us 2.085 us, tree cap 103.5 -> 114.7 GB/s, network refitted;
 * training objective 0.02453 -> 0.02281): held-out median 3.3% -> 3.1%, held-out worst 8.5% ->
 * 13.3% (32 MiB on 16 nodes); all 44 rows median 3.7% -> 3.4%, worst 13.3%; below 1 MiB median
 * 14.2% -> 8.5%. */
/* 2026-12-07 (s12, nccl): the network's costs fitted inside NCCL's own tuning constants
 * (NET_BOUNDS; no more LL128 fixed cost at 0.01 us, node hop at 0.025 us; training objective
 * 0.02281 -> 0.03324): held-out median 3.1% -> 3.2%, held-out worst 13.3% -> 9.1% (128 MiB on 16
 * nodes); all 44 rows median 3.4% -> 3.2%, worst 13.3% -> 11.3% (16 MiB on 2 nodes); below 1 MiB
 * median 8.5% -> 18.0%. Then the fit left out the sweeps' first size (1 KiB, a start-up cost:
 * 83% of the objective) and was refitted (4 rounds, objective without those rows 0.00563 ->
 * 0.00452): held-out median 3.3% (3.1% before s12: the one figure that is worse), held-out
 * mean 4.4% -> 3.6%, held-out worst 9.1%; all 44 rows median 3.0%, worst 11.4%; below 1 MiB
 * median 12.7%. */
/* 2026-12-07 (s12, nccl2): LL128's tree cap follows NCCL's per-channel caps (perChMaxTreeBws
 * 23.6 / 17.8 and perChMaxTreeLL128Bws 20: 0.9375 of Simple's on 3+ nodes, 20/17.8 on 2, where
 * it took Simple's 23.6/17.8), refitted (4 rounds, objective 0.00485 at the old point -> 0.00427;
 * tree cap 106.9 -> 116.5 GB/s for Simple): held-out median 3.3% -> 3.1%, held-out worst 9.1%
 * -> 9.1% (now 2 nodes, 8 MiB); all 44 rows median 3.0% -> 3.1%, worst 11.4% -> 11.6% (4 nodes,
 * 4 MiB); 16 nodes 16-128 MiB -5..-9% -> -4..-7%, 2 nodes 16 MiB +11.4% -> +6.2%. */
/* 2026-12-07 (s13, nccl): LL pays its cost per channel on every network hop of the tree
 * (nccl_ll_channel_latency_us of [dim.net], 1.75 us; 6 rounds, training objective 0.00427 ->
 * 0.00246): held-out median 3.1% -> 2.9%, held-out worst 9.1% -> 8.9% (2 nodes, 8 MiB); all
 * 44 rows median 3.1% -> 3.1%, worst 11.6% -> 10.8% (4 nodes, 4 MiB). Then per channel beyond
 * the first (2.07 us; 6 rounds, objective 0.00235): held-out median 2.9% (2.94%), worst 9.2%
 * (2 nodes, 8 MiB); all 44 rows 3.1% / 11.1% (4 nodes, 4 MiB). */
#define NET_HELDOUT_MEDIAN_MAX 0.031
#define NET_WORST_MAX 0.115
/* Below 1 MiB across nodes (2 KiB-512 KiB, 36 rows; the sweeps' first size, 1 KiB, is a start-up
 * cost no statistic counts, ar_row's first): s13 nccl, before any change, median 12.6%; with
 * LL's channel cost on the network hops 9.2% (held-out odd powers 11.4% -> 11.2%); per channel
 * beyond the first 8.0% (held-out 9.4%). */
#define NET_SMALL_MEDIAN_MAX 0.085

static GArray *node_rows(void)
{
  GArray *rows = vtrain_rows();
  g_autoptr(GArray) echo = read_echo();
  for (guint i = 0; i < echo->len; i++)
    if (g_array_index(echo, ar_row, i).nodes == 1)
      g_array_append_val(rows, g_array_index(echo, ar_row, i));
  return rows;
}

/* The node of a machine kind: its files all ship one [dim.node], which is the optimum of the
 * fit to its dataset's training rows, and matches the held-out rows. */
static void check_node(int set, const char *const *files, size_t nfiles, const char *label,
                       double worst_max)
{
  g_autoptr(GArray) rows = node_rows();
  g_autoptr(ts_topo) t = load_shipped(files[0]);
  double raw, eff, lat;
  raw_dim_keys(files[0], "node", &raw, &eff, &lat);
  for (size_t i = 1; i < nfiles; i++) {
    double r2, e2, l2;
    raw_dim_keys(files[i], "node", &r2, &e2, &l2);
    cr_assert(r2 == raw && e2 == eff && l2 == lat,
              "%s [dim.node]: %g GB/s x %g, %g us; %s has %g x %g, %g us", files[i], r2, e2, l2,
              files[0], raw, eff, lat);
  }
  topo_set ts;
  topo_set_init(&ts, t);
  nfit f = nfit_of(&ts, rows, t, "node", set, 0, raw, eff, lat);
  /* NCCL runs LL and LL128 up to a few MiB (LL128 up to ~24 MiB on 8 A100s, by its own model),
   * so vTrain's LUT, which starts at 1 MiB, fixes them on its machine too. */
  f.protocols = TRUE;
  if (g_getenv("TS_PUBLISHED_FIT") != NULL) {
    nfit g = f;
    nfit_run(&g);
    nfit_print(&g, label);
  }
  check_optimum(&f, files[0]);
  int nho = 0;
  err_stats ho = busbw_errors(&ts, rows, set, 0, PICK_HELD_OUT, TARGET_LO, TARGET_HI, 0, &nho);
  err_stats al = busbw_errors(&ts, rows, set, 0, PICK_ALL, TARGET_LO, TARGET_HI, 0, NULL);
  if (report_on())
    report_table(&ts, rows, set, 0, label);
  cr_assert(nho > 0, "%s: no held-out rows", label);
  cr_assert(ho.median <= NODE_HELDOUT_MEDIAN_MAX, "%s: held-out busbw median error %.4f > %g",
            label, ho.median, NODE_HELDOUT_MEDIAN_MAX);
  cr_assert(al.max <= worst_max, "%s: worst busbw error %.4f (1 MiB-1 GiB) > %g", label, al.max,
            worst_max);
  int nsm = 0;
  err_stats sm = busbw_errors(&ts, rows, set, 0, PICK_ALL, 0, TARGET_LO - 1, 0, &nsm);
  if (nsm > 0) { /* Echo's 8 B-512 KiB rows (LL's channel cost; vTrain's LUT starts at 1 MiB) */
    cr_assert(sm.median <= NODE_SMALL_MEDIAN_MAX, "%s: busbw median error %.4f below 1 MiB > %g",
              label, sm.median, NODE_SMALL_MEDIAN_MAX);
    cr_assert(sm.max <= NODE_SMALL_WORST_MAX, "%s: worst busbw error %.4f below 1 MiB > %g", label,
              sm.max, NODE_SMALL_WORST_MAX);
  }
  topo_set_clear(&ts);
}

Test(nccl, dgx_a100_node_is_the_fit_to_vtrain, .timeout = 600)
{
  check_node(0, DGX_A100, G_N_ELEMENTS(DGX_A100), "DGX A100 (vTrain's LUT)", VTRAIN_WORST_MAX);
}

Test(nccl, nd_a100_v4_node_is_the_fit_to_echo, .timeout = 600)
{
  static const char *const nd[] = {"azure-nd-a100-v4-1node", "azure-nd-a100-v4-16node"};
  check_node(1, nd, G_N_ELEMENTS(nd), "Azure ND A100 v4 (Echo, 1 node)", NODE_WORST_MAX);
}

/* NCCL chooses LL128 against Simple by its own model (docs/collectives.md): on an A100 node
 * (Simple's bus bandwidth 240 GB/s in that model, 12 NVLinks x 20 GB/s) the two ring estimates
 * are 14 + 14 x 1.9 us + S / (0.92 x 240 GB/s x 8/14) and 8.4 + 14 x 3.4 us + S / (240 GB/s x
 * 8/14) on 8 GPUs, equal at S* = 15.4 us / (1/126.17 - 1/137.14 GB/s) = 24.3 MB: LL128 up to
 * there (16 MiB is nccl-tests' knee), Simple above, whatever the fitted costs say. On 2 GPUs
 * Simple's estimate is below LL128's at every size (15.2 against 17.8 us, and more bandwidth). */
static ts_coll_proto auto_proto(const ts_topo *t, double bytes)
{
  int dims[1] = {0};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 1, &g);
  ts_coll_algo algo = TS_ALGO_AUTO;
  ts_coll_proto proto = TS_PROTO_NONE;
  g_autoptr(GError) e = NULL;
  double s = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, TS_PROTO_AUTO, &g, bytes, &algo,
                             &proto, &e);
  cr_assert(s > 0, "%s", e != NULL ? e->message : "no time");
  cr_assert_eq(algo, TS_ALGO_NCCL_RING, "one node: %s", ts_coll_algo_name(algo));
  return proto;
}

Test(nccl, protocol_is_chosen_by_nccls_model_on_one_node)
{
  g_autoptr(ts_topo) t = load_shipped("azure-nd-a100-v4-1node");
  const double s_star = 15.4e-6 / (1.0 / (0.92 * 240e9 * 8 / 14) - 1.0 / (240e9 * 8 / 14));
  cr_assert(fabs(s_star - 24.3e6) < 0.1e6, "%g", s_star);
  cr_expect_eq(auto_proto(t, 16777216), TS_PROTO_LL128);
  cr_expect_eq(auto_proto(t, 0.98 * s_star), TS_PROTO_LL128);
  cr_expect_eq(auto_proto(t, 1.02 * s_star), TS_PROTO_SIMPLE);
  cr_expect_eq(auto_proto(t, 33554432), TS_PROTO_SIMPLE);
  /* The fitted costs alone would have switched earlier: Simple is faster at 16 MiB. */
  int dims[1] = {0};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 1, &g);
  double ll128 = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL128, &g,
                                 16777216, NULL, NULL, NULL);
  double simple = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g,
                                  16777216, NULL, NULL, NULL);
  cr_expect(simple < ll128, "Simple %g s, LL128 %g s", simple, ll128);
  g_autoptr(ts_topo) two = node_of(t, 2);
  cr_expect_eq(auto_proto(two, 4194304), TS_PROTO_SIMPLE);
  cr_expect_eq(auto_proto(two, 16777216), TS_PROTO_SIMPLE);
}

/* LL inside a node of a multi-node group hops at NCCL's NVLink 0.6 us, not at the node's measured
 * LL step (nThread 1 nGpus 8 in the one-node logs: one thread launches every GPU's kernel), so a
 * group across nodes does not move with that step, while the node alone does. */
Test(nccl, multi_node_ll_does_not_take_the_single_process_step)
{
  g_autoptr(ts_topo) t = load_shipped("azure-nd-a100-v4-16node");
  g_autoptr(ts_topo) u = ts_topo_copy(t);
  u->dims[0].nccl_step_s[0] *= 2.0;
  int both[2] = {0, 1}, node[1] = {0};
  ts_group_shape g, n;
  ts_group_shape_dims(t, both, 2, &g);
  ts_group_shape_dims(t, node, 1, &n);
  for (int a = 0; a < 2; a++) {
    ts_coll_algo algo = a == 0 ? TS_ALGO_NCCL_TREE : TS_ALGO_NCCL_RING;
    double x = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, algo, TS_PROTO_LL, &g, 4096, NULL, NULL, NULL);
    double y = ts_coll_time_ex(u, TS_COLL_ALLREDUCE, algo, TS_PROTO_LL, &g, 4096, NULL, NULL, NULL);
    cr_assert(x > 0 && x == y, "%s LL across nodes: %g s, %g s with the node's LL step doubled",
              ts_coll_algo_name(algo), x, y);
  }
  double x = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL, &n, 4096, NULL,
                             NULL, NULL);
  double y = ts_coll_time_ex(u, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL, &n, 4096, NULL,
                             NULL, NULL);
  /* one node of 8: 14 ring steps of 1.805 us more */
  cr_assert(fabs(y - x - 14 * t->dims[0].nccl_step_s[0]) < 0.05 * (y - x), "%g s -> %g s", x, y);
}

/* The node's Simple hop in a group across nodes is the network's nccl_node_hop_latency_us (one
 * process per GPU), not the node's latency_us (one thread driving 8 GPUs in the one-node logs):
 * a 128-GPU ring pays 2 x 127 steps, 7 of every 8 on NVLink, so doubling the hop adds
 * 254 x 7/8 x hop; the node alone does not move. The fitted hop stays inside NCCL's NVLink
 * hwLat (0.6 us for LL to 3.4 us for Simple's ring; NET_BOUNDS). */
Test(nccl, multi_node_simple_takes_the_networks_node_hop)
{
  g_autoptr(ts_topo) t = load_shipped("azure-nd-a100-v4-16node");
  g_autoptr(ts_topo) u = ts_topo_copy(t);
  int net = ts_topo_dim_index(t, "net");
  double hop = t->dims[net].nccl_node_hop_s;
  cr_assert(hop >= 0.6e-6 && hop <= 3.4e-6, "hop %g s: outside NCCL's NVLink 0.6-3.4 us", hop);
  u->dims[net].nccl_node_hop_s = 2 * hop;
  int both[2] = {0, 1}, node[1] = {0};
  ts_group_shape g, n;
  ts_group_shape_dims(t, both, 2, &g);
  ts_group_shape_dims(t, node, 1, &n);
  double S = 268435456.0;
  double x = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S, NULL,
                             NULL, NULL);
  double y = ts_coll_time_ex(u, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S, NULL,
                             NULL, NULL);
  cr_assert(fabs(y - x - 254 * 7.0 / 8.0 * hop) < 0.05 * (y - x), "%g s -> %g s (hop %g s)", x, y,
            hop);
  x = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &n, S, NULL, NULL,
                      NULL);
  y = ts_coll_time_ex(u, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &n, S, NULL, NULL,
                      NULL);
  cr_assert(x > 0 && x == y, "one node: %g s, %g s with the hop doubled", x, y);
}

/* LL's cost per channel on the network (nccl_ll_channel_latency_us of [dim.net]) is paid per
 * channel NCCL runs LL on beyond the first (bytes / 4 KiB for the tree, bytes / (4 KiB x n) for
 * the ring: 512 threads of NCCL_LL_THREAD_THRESHOLD 8 B; the first channel's network work is in
 * the per-hop latency) on every network hop of the path: the tree's 2 x log2(nodes) levels, the
 * ring's 2 (nodes - 1) steps. On 16 nodes of 8 GPUs, 16 KiB: the tree 3 extra channels x 8 hops
 * = 24 times the cost, the ring (1/32 of a channel) none; 1 MiB on the ring, 2 channels: 1 x 30
 * steps; on 2 nodes the tree 3 x 2 = 6 times. LL128, Simple and one node do not pay it. */
Test(nccl, ll_pays_its_channels_on_every_network_hop)
{
  g_autoptr(ts_topo) t = load_shipped("azure-nd-a100-v4-16node");
  int net = ts_topo_dim_index(t, "net");
  double c = t->dims[net].nccl_ll_channel_s;
  cr_assert(c > 0, "[dim.net] LL channel cost %g s", c);
  const struct {
    int nodes;
    ts_coll_algo algo;
    ts_coll_proto proto;
    double bytes, times;
  } want[] = {{16, TS_ALGO_NCCL_TREE, TS_PROTO_LL, 16384, 24.0},
              {16, TS_ALGO_NCCL_RING, TS_PROTO_LL, 16384, 0.0},
              {16, TS_ALGO_NCCL_RING, TS_PROTO_LL, 1048576, 30.0},
              {2, TS_ALGO_NCCL_TREE, TS_PROTO_LL, 16384, 6.0},
              {16, TS_ALGO_NCCL_TREE, TS_PROTO_LL, 4096, 0.0},
              {16, TS_ALGO_NCCL_TREE, TS_PROTO_LL128, 16384, 0.0},
              {16, TS_ALGO_NCCL_TREE, TS_PROTO_SIMPLE, 16384, 0.0}};
  for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
    g_autoptr(ts_topo) a = ts_topo_copy(t);
    a->dims[net].size = want[i].nodes;
    a->nchips = a->dims[0].size * want[i].nodes;
    g_autoptr(ts_topo) b = ts_topo_copy(a);
    b->dims[net].nccl_ll_channel_s = 2 * c;
    int both[2] = {0, 1};
    ts_group_shape g;
    ts_group_shape_dims(a, both, 2, &g);
    double x = ts_coll_time_ex(a, TS_COLL_ALLREDUCE, want[i].algo, want[i].proto, &g, want[i].bytes,
                               NULL, NULL, NULL);
    double y = ts_coll_time_ex(b, TS_COLL_ALLREDUCE, want[i].algo, want[i].proto, &g, want[i].bytes,
                               NULL, NULL, NULL);
    cr_assert(x > 0 && fabs(y - x - want[i].times * c) < 1e-9 * y,
              "%d nodes, %s, protocol %d, %g B: %g s -> %g s, expected +%g x %g s", want[i].nodes,
              ts_coll_algo_name(want[i].algo), (int)want[i].proto, want[i].bytes, x, y,
              want[i].times, c);
  }
  g_autoptr(ts_topo) u = ts_topo_copy(t);
  u->dims[net].nccl_ll_channel_s = 2 * c;
  int node[1] = {0};
  ts_group_shape n;
  ts_group_shape_dims(t, node, 1, &n);
  double x = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL, &n, 16384, NULL,
                             NULL, NULL);
  double y = ts_coll_time_ex(u, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL, &n, 16384, NULL,
                             NULL, NULL);
  cr_assert(x > 0 && x == y, "one node: %g s, %g s", x, y);
}

/* The Simple tree's cost per chunk (nccl_tree_chunk_latency_us): NCCL's chunk rule on 16 nodes
 * of 8 GPUs (depth 7 + log2 16 = 11, 8 channels): 32 MiB moves in 64 KiB chunks (32 MiB / (8 x
 * 128 KiB) = 32 < 4 x 11), 64 per channel; 1 GiB in 512 KiB chunks (1 GiB / (8 x 512 KiB) = 256
 * >= 8 x 11), 256 per channel. Doubling the cost adds that many; the ring and one node do not
 * pay it. */
Test(nccl, tree_pays_ncclls_chunks_across_nodes)
{
  g_autoptr(ts_topo) t = load_shipped("azure-nd-a100-v4-16node");
  g_autoptr(ts_topo) u = ts_topo_copy(t);
  int net = ts_topo_dim_index(t, "net");
  double c = t->dims[net].nccl_tree_chunk_s;
  cr_assert(c > 0, "chunk cost %g s", c);
  u->dims[net].nccl_tree_chunk_s = 2 * c;
  int both[2] = {0, 1}, node[1] = {0};
  ts_group_shape g, n;
  ts_group_shape_dims(t, both, 2, &g);
  ts_group_shape_dims(t, node, 1, &n);
  const double S[2] = {33554432.0, 1073741824.0}, chunks[2] = {64, 256};
  for (int i = 0; i < 2; i++) {
    double x = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_TREE, TS_PROTO_SIMPLE, &g, S[i],
                               NULL, NULL, NULL);
    double y = ts_coll_time_ex(u, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_TREE, TS_PROTO_SIMPLE, &g, S[i],
                               NULL, NULL, NULL);
    cr_assert(fabs(y - x - chunks[i] * c) < 1e-9 * y, "%g B: %g s -> %g s (chunk %g s)", S[i], x, y,
              c);
    x = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S[i], NULL,
                        NULL, NULL);
    y = ts_coll_time_ex(u, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S[i], NULL,
                        NULL, NULL);
    cr_assert(x == y, "ring %g B: %g s, %g s", S[i], x, y);
  }
  double x = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &n, S[0],
                             NULL, NULL, NULL);
  double y = ts_coll_time_ex(u, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &n, S[0],
                             NULL, NULL, NULL);
  cr_assert(x > 0 && x == y, "one node: %g s, %g s", x, y);
}

/* Across nodes NCCL's own model picks algorithm and protocol where the network names its
 * search's channels (here ND A100 v4's network given nccl_model_channels = 8 and 8 x 24 GB/s,
 * NCCL's speed for a 200 Gb/s NIC; AMD hosts: net overhead 2 us, llMaxBw 19 GB/s on > 2 nodes;
 * the shipped file does not set them, docs/collectives.md says why). On 16 nodes (128 GPUs,
 * ppn 8, log2 16 = 4 tree levels), tree LL: 6.8 + 2 (7 x 0.6 + 4 x 5.0) = 55.2 us and
 * min(min(0.92 x 192, 8 x 17.8) / 3.8, 19) / 2 = 9.5 GB/s times the tree correction (0.5 at
 * 128 KiB, 0.4 at 256 KiB). Tree LL128: 14 + 2 (7 x 1.25 + 4 x 8.5) = 99.5 us and
 * min(142.4 x 120/128, 8 x 20) / 2 = 66.75 GB/s (correction 0.6 at both sizes, 1.0 at 128 MiB).
 * Ring LL128: 14 + (254 - 30) x max(1.9, 2) + 30 x 4.0 = 582 us and 160 x 128/254 = 80.63 GB/s.
 * So LL at 128 KiB (82.8 against 102.8 us), LL128 at 256 KiB (124.2 against 106.0 us): Echo's
 * 128 KiB on 8-16 nodes takes twice 256 KiB's time. Tree LL128 at 128 MiB (2,110 against
 * 2,247 us), the ring at 256 MiB (3,911 against 4,121 us): NCCL's own tree-to-ring threshold. */
static void multi_choice(const ts_topo *t, double bytes, ts_coll_algo *algo, ts_coll_proto *proto)
{
  int dims[2] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  g_autoptr(GError) e = NULL;
  double s = ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, TS_PROTO_AUTO, &g, bytes, algo,
                             proto, &e);
  cr_assert(s > 0, "%s", e != NULL ? e->message : "no time");
}

Test(nccl, multi_node_choice_is_nccls_model)
{
  g_autoptr(ts_topo) t = load_shipped("azure-nd-a100-v4-16node");
  int net = ts_topo_dim_index(t, "net");
  t->dims[net].nccl_model_channels = 8;
  t->dims[net].nccl_model_Bps = 192e9;
  t->dims[net].nccl_net_overhead_s = 2e-6;
  const double ll_128k = 55.2 + 131072 / (9.5e3 * 0.5),
               ll128_128k = 99.5 + 131072 / (66.75e3 * 0.6);
  const double ll_256k = 55.2 + 262144 / (9.5e3 * 0.4),
               ll128_256k = 99.5 + 262144 / (66.75e3 * 0.6);
  cr_assert(ll_128k < ll128_128k && ll_256k > ll128_256k, "%g %g %g %g", ll_128k, ll128_128k,
            ll_256k, ll128_256k);
  const double tree_128m = 99.5 + 134217728 / 66.75e3, ring_128m = 582 + 134217728 / 80.63e3;
  const double tree_256m = 99.5 + 268435456 / 66.75e3, ring_256m = 582 + 268435456 / 80.63e3;
  cr_assert(tree_128m < ring_128m && tree_256m > ring_256m, "%g %g %g %g", tree_128m, ring_128m,
            tree_256m, ring_256m);
  static const struct {
    double bytes;
    ts_coll_algo algo;
    ts_coll_proto proto;
  } want[] = {{131072, TS_ALGO_NCCL_TREE, TS_PROTO_LL},
              {262144, TS_ALGO_NCCL_TREE, TS_PROTO_LL128},
              {134217728, TS_ALGO_NCCL_TREE, TS_PROTO_LL128},
              {268435456, TS_ALGO_NCCL_RING, TS_PROTO_LL128}};
  for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
    ts_coll_algo a = TS_ALGO_AUTO;
    ts_coll_proto p = TS_PROTO_NONE;
    multi_choice(t, want[i].bytes, &a, &p);
    cr_expect(a == want[i].algo && p == want[i].proto, "%g B on 16 nodes: %s %d, expected %s %d",
              want[i].bytes, ts_coll_algo_name(a), (int)p, ts_coll_algo_name(want[i].algo),
              (int)want[i].proto);
  }
}

Test(nccl, nd_a100_v4_network_is_the_fit_and_matches_nccl_tests, .timeout = 600)
{
  g_autoptr(GArray) rows = read_echo();
  g_autoptr(ts_topo) t = load_shipped("azure-nd-a100-v4-16node");
  double raw, eff, lat;
  raw_dim_keys("azure-nd-a100-v4-16node", "net", &raw, &eff, &lat);
  topo_set ts;
  topo_set_init(&ts, t);
  nfit f = nfit_of(&ts, rows, t, "net", 1, 1, raw, eff, lat);
  f.bd = &NET_BOUNDS;
  if (g_getenv("TS_PUBLISHED_FIT") != NULL) {
    nfit g = f;
    nfit_run(&g);
    nfit_print(&g, "Azure ND A100 v4 (Echo, 2-16 nodes)");
  }
  check_optimum(&f, "azure-nd-a100-v4-16node");
  int nho = 0;
  err_stats ho = busbw_errors(&ts, rows, 1, 1, PICK_HELD_OUT, TARGET_LO, TARGET_HI, 0, &nho);
  err_stats al = busbw_errors(&ts, rows, 1, 1, PICK_ALL, TARGET_LO, TARGET_HI, 0, NULL);
  if (report_on())
    report_table(&ts, rows, 1, 1, "Echo (Azure ND A100 v4, 2-16 nodes)");
  cr_assert(nho > 0);
  cr_assert(ho.median <= NET_HELDOUT_MEDIAN_MAX, "Echo 2-16 nodes: held-out busbw median %.4f > %g",
            ho.median, NET_HELDOUT_MEDIAN_MAX);
  cr_assert(al.max <= NET_WORST_MAX, "Echo 2-16 nodes: worst busbw error %.4f > %g", al.max,
            NET_WORST_MAX);
  int nsm = 0;
  err_stats sm = busbw_errors(&ts, rows, 1, 1, PICK_ALL, 0, TARGET_LO - 1, 0, &nsm);
  cr_assert(nsm == 36, "Echo 2-16 nodes below 1 MiB: %d rows, not 36", nsm);
  cr_assert(sm.median <= NET_SMALL_MEDIAN_MAX,
            "Echo 2-16 nodes below 1 MiB: busbw median error %.4f > %g", sm.median,
            NET_SMALL_MEDIAN_MAX);
  topo_set_clear(&ts);
}

/* One parameter set per machine kind for the network too: the DGX A100 files of every size ship
 * the same [dim.net] NCCL costs (ND A100 v4's earlier fit, topologies/dgx-a100-4node.ini says
 * why they are not ND's current keys), whatever their node count. */
Test(nccl, dgx_a100_networks_are_one_parameter_set)
{
  g_autoptr(ts_topo) a = load_shipped("dgx-a100-4node");
  g_autoptr(ts_topo) b = load_shipped("dgx-a100-32node");
  const ts_dim *x = &a->dims[ts_topo_dim_index(a, "net")];
  const ts_dim *y = &b->dims[ts_topo_dim_index(b, "net")];
  cr_assert(x->size == 4 && y->size == 32, "net sizes %d, %d", x->size, y->size);
  cr_assert(x->link_bw_Bps == y->link_bw_Bps && x->latency_s == y->latency_s &&
                x->ll_bw_frac == y->ll_bw_frac && x->ll128_bw_frac == y->ll128_bw_frac &&
                x->nccl_tree_Bps == y->nccl_tree_Bps && x->nccl_node_hop_s == y->nccl_node_hop_s &&
                x->chips_per_port == y->chips_per_port,
            "dgx-a100-4node and dgx-a100-32node: different [dim.net] costs");
  for (int q = 0; q < 3; q++)
    cr_assert(x->nccl_base_s[q] == y->nccl_base_s[q], "[dim.net] base latency %d: %g, %g s", q,
              x->nccl_base_s[q], y->nccl_base_s[q]);
  for (int q = 0; q < 2; q++)
    cr_assert(x->nccl_step_s[q] == y->nccl_step_s[q], "[dim.net] step latency %d: %g, %g s", q,
              x->nccl_step_s[q], y->nccl_step_s[q]);
  /* the HDR link itself is ND A100 v4's (same NIC, one per GPU) */
  g_autoptr(ts_topo) nd = load_shipped("azure-nd-a100-v4-16node");
  const ts_dim *z = &nd->dims[ts_topo_dim_index(nd, "net")];
  cr_assert(z->chips_per_port == x->chips_per_port, "gpus per NIC %d, %d", z->chips_per_port,
            x->chips_per_port);
}

/* The iteration-time rows use trainsim's hierarchical algorithm (NCCL runs a ring per rail
 * across nodes, which a single ring through one GPU's port would not model); inside one node it
 * is the ring the LUT calibrates, to rounding. */
Test(nccl, hierarchical_is_the_ring_inside_a_node)
{
  g_autoptr(ts_topo) shipped = load_shipped("dgx-a100-1node");
  for (int n = 2; n <= 8; n++) {
    g_autoptr(ts_topo) t = node_of(shipped, n);
    ts_group_shape g;
    int d0 = 0;
    ts_group_shape_dims(t, &d0, 1, &g);
    for (double bytes = 1 << 20; bytes <= (1 << 30); bytes *= 4) {
      double ring = ring_time(t, bytes);
      double hier = ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_HIERARCHICAL, &g, bytes, NULL, NULL);
      cr_assert(fabs(hier - ring) <= 1e-12 * ring, "%d GPUs, %g B: hierarchical %.17g, ring %.17g",
                n, bytes, hier, ring);
    }
  }
}

/* The DGX H100 node against NVIDIA's published nccl-tests figures for 8x H100 SXM, 2-4 GiB
 * all-reduce (topologies/dgx-h100-4node.ini cites them: NVIDIA/nccl-tests #212, NVIDIA/nccl
 * #1455, GTC 2024 S62129): the ring's bus bandwidth 365-370 GB/s on 2-8 GPUs; NVLink SHARP's
 * 420 / 440 / 460 / 480 GB/s on 5 / 6 / 7 / 8 GPUs, which `auto` picks there; on 2-4 GPUs the
 * ring (NVLS is no faster: 370 GB/s measured on 4). Before the NVLS port traffic and the
 * measured efficiencies, the ring was 449 GB/s (+21%) and NVLS 599-655 (+34-37%). */
Test(nccl, dgx_h100_node_matches_published_busbw)
{
  g_autoptr(ts_topo) shipped = load_shipped("dgx-h100-4node");
  static const double nvls_GBps[9] = {0, 0, 0, 0, 0, 420, 440, 460, 480};
  double S = 4294967296.0;
  for (int n = 2; n <= 8; n++) {
    g_autoptr(ts_topo) t = node_of(shipped, n);
    ts_group_shape g;
    int d0 = 0;
    ts_group_shape_dims(t, &d0, 1, &g);
    double factor = 2.0 * (n - 1) / n; /* nccl-tests' busbw = algbw x 2(n-1)/n */
    g_autoptr(GError) error = NULL;
    double ring = ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, &g, S, NULL, &error);
    cr_assert(ring > 0, "%s", error != NULL ? error->message : "");
    double ring_bus = S / ring * factor / 1e9;
    cr_expect(ring_bus > 365 * 0.98 && ring_bus < 370 * 1.02, "%d GPUs: ring busbw %.1f GB/s", n,
              ring_bus);
    ts_coll_algo picked = TS_ALGO_AUTO;
    double aut = ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, &g, S, &picked, NULL);
    double bus = S / aut * factor / 1e9;
    if (n >= 5) {
      cr_expect(picked == TS_ALGO_NVLS, "%d GPUs: auto picked %s", n, ts_coll_algo_name(picked));
      cr_expect(fabs(bus / nvls_GBps[n] - 1) < 0.04, "%d GPUs: NVLS busbw %.1f GB/s, published %g",
                n, bus, nvls_GBps[n]);
    } else if (n <= 3) { /* on 4 the two are within 0.2% of each other */
      cr_expect(picked == TS_ALGO_NCCL_RING, "%d GPUs: auto picked %s", n,
                ts_coll_algo_name(picked));
    }
  }
}

/* The V100 tables come from a DGX-1 (hybrid cube-mesh NVLink, no switch): the busbw plateau
 * is 22.5 GB/s on 2 GPUs, 85 on 4, 37 on 5, 134 on 8, which no single switch dimension
 * reproduces; this test keeps that reason true (the best single-switch fit stays poor), and is
 * why topologies/dgx1-v100.ini lists the mesh's links (pair_links) instead; test_heldout pins
 * that topology's error on these tables. */
Test(nccl, v100_tables_are_not_one_switch)
{
  GArray *rows = read_lut("v100");
  g_autoptr(ts_topo) t = load_shipped("dgx-a100-1node");
  double alpha, bw;
  fit_ring(t, rows, &alpha, &bw);
  int node = ts_topo_dim_index(t, "node");
  t->dims[node].latency_s = alpha;
  t->dims[node].link_bw_Bps = bw;
  err_stats v = lut_errors(t, rows, 0, TS_ALGO_RING);
  cr_assert(v.median > 0.25, "V100: a single switch fits to median %.3f; reconsider shipping it",
            v.median);
  if (report_on())
    fprintf(stderr,
            "V100 best single switch: latency %.2f us, %.1f GB/s; median error %.1f%%, max "
            "%.1f%%\n",
            alpha * 1e6, bw / 1e9, 100 * v.median, 100 * v.max);
  g_array_unref(rows);
}

/* ---- Part 2: Megatron iteration times (vTrain's ground truth). -------------------------- */

typedef struct {
  int line; /* in the CSV file */
  int gpus, tp, dp, pp;
  gint64 global_batch, micro_batch;
  int hidden, heads, layers, seq;
  double time_s; /* measured iteration time */
} gt_row;

/* ground_truth_single.csv: 11 columns; ground_truth_multi.csv: parameters (billion) first. */
static GArray *read_ground_truth(const char *file)
{
  g_autofree char *text = read_data(file);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  GArray *rows = g_array_new(FALSE, FALSE, sizeof(gt_row));
  for (int i = 1; lines[i] != NULL; i++) { /* line 0: header (after a UTF-8 byte-order mark) */
    if (*g_strstrip(lines[i]) == '\0')
      continue;
    g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
    guint nf = g_strv_length(f);
    cr_assert(nf == 11 || nf == 12, "%s line %d: '%s': expected 11 or 12 columns", file, i + 1,
              lines[i]);
    char **c = f + (nf - 11); /* skip the parameter count */
    gint64 v[10];
    double ms;
    gboolean ok = ts_parse_double(c[10], &ms) && ms > 0;
    for (int k = 0; k < 10; k++)
      ok = ok && ts_parse_int(c[k], 1, 1 << 20, &v[k]);
    cr_assert(ok, "%s line %d: '%s': expected whole numbers and a time in ms", file, i + 1,
              lines[i]);
    gt_row r = {i + 1, (int)v[0], (int)v[7], (int)v[8], (int)v[9], v[1],
                v[2],  (int)v[3], (int)v[4], (int)v[5], (int)v[6], ms * 1e-3};
    g_array_append_val(rows, r);
  }
  return rows;
}

/* Megatron-LM / Megatron-DeepSpeed pad GPT-2's 50,257-token vocabulary to a multiple of
 * make_vocab_size_divisible_by (128) x tensor-parallel size (megatron/tokenizer/tokenizer.py,
 * _vocab_size_with_padding): 50304, 50432, 50688, 51200 for tp = 1, 2, 4, 8. */
static gint64 padded_vocab(int tp)
{
  gint64 m = 128 * (gint64)tp;
  return (50257 + m - 1) / m * m;
}

/* Models are written once per shape into a temporary folder and cached. */
typedef struct {
  char *dir;
  GHashTable *models; /* file name -> ts_model* */
} model_cache;

static void cache_init(model_cache *c)
{
  g_autoptr(GError) error = NULL;
  c->dir = g_dir_make_tmp("ts_published_XXXXXX", &error);
  cr_assert_not_null(c->dir, "%s", error != NULL ? error->message : "");
  c->models = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)ts_model_free);
}

static void cache_clear(model_cache *c)
{
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, c->models);
  while (g_hash_table_iter_next(&it, &k, NULL)) {
    g_autofree char *p = g_build_filename(c->dir, (const char *)k, NULL);
    g_unlink(p);
  }
  g_hash_table_unref(c->models);
  g_rmdir(c->dir);
  g_free(c->dir);
}

/* A row's model file name and text. Caller frees. */
static char *row_model_file(const gt_row *r)
{
  return g_strdup_printf("gpt-h%d-a%d-l%d-s%d-v%" G_GINT64_FORMAT ".ini", r->hidden, r->heads,
                         r->layers, r->seq, padded_vocab(r->tp));
}

static char *row_model_text(const gt_row *r)
{
  gint64 vocab = padded_vocab(r->tp);
  return g_strdup_printf(
      "[model]\nname = GPT h%d l%d (vTrain)\nkind = transformer\ndtype = fp16\n"
      "[transformer]\nlayers = %d\nhidden = %d\nheads = %d\nsequence = %d\nvocab = "
      "%" G_GINT64_FORMAT
      "\nposition_embedding = learned\ntied_embeddings = true\nnorm = pre\ndropout = true\n"
      "bias = true\nactivation = gelu\n",
      r->hidden, r->layers, r->layers, r->hidden, r->heads, r->seq, vocab);
}

/* The GPT model vTrain's runs trained (Megatron-DeepSpeed GPT: fp16, learned positions, tied
 * logits, pre-norm, biases, dropout, GeLU MLP of 4h), with the row's shape. */
static const ts_model *row_model(model_cache *c, const gt_row *r)
{
  g_autofree char *file = row_model_file(r);
  ts_model *m = g_hash_table_lookup(c->models, file);
  if (m != NULL)
    return m;
  g_autofree char *path = g_build_filename(c->dir, file, NULL);
  g_autofree char *text = row_model_text(r);
  g_autoptr(GError) error = NULL;
  gboolean ok = g_file_set_contents(path, text, -1, &error);
  cr_assert(ok, "%s", error != NULL ? error->message : "");
  m = ts_model_load(path, &error);
  cr_assert_not_null(m, "%s", error != NULL ? error->message : "");
  g_hash_table_insert(c->models, g_strdup(file), m);
  return m;
}

/*
 * The multi-node machine: vTrain's validation configs give 8 GPUs per node and
 * inter_node_bandwidth = 800 Gb/s per node (src/config.py: "total bandwidth of inter-node
 * communication in Gbps"), i.e. 100 GB/s per node = 12.5 GB/s per GPU, half a DGX A100's eight
 * 200 Gb/s HDR ports. The [dim.net] of the shipped DGX A100 is used with that bandwidth; its
 * 3 us latency is not calibrated (no inter-node table is published).
 */
#define MULTI_NET_GBPS 12.5

static ts_topo *cluster_of(const ts_topo *shipped, int nodes)
{
  ts_topo *t = ts_topo_copy(shipped);
  int net = ts_topo_dim_index(t, "net");
  cr_assert(net == 1 && t->ndims == 2, "%s: expected [dim.node] then [dim.net]", t->path);
  t->dims[net].size = nodes;
  t->dims[net].link_bw_Bps = MULTI_NET_GBPS * 1e9;
  t->nchips = t->dims[0].size * nodes;
  return t;
}

/*
 * The compute parameters of the A100 profile (topologies/chips/a100-sxm4-80gb.ini) are fitted
 * here: compute_efficiency (the fraction of peak a well-tiled GEMM reaches), kernel_launch_us
 * (the host's time per kernel: Megatron drives these small models from Python, and a short op
 * waits for its launches), memory_bandwidth_efficiency and gemm_k_overhead (ts_cost.h). One
 * set for every row. The fit uses a fixed random half of each file (FIT_SEED); the other
 * half is held out and reported separately.
 */
#define FIT_SEED 20261201u

/* One row planned and traced once; replayed under any parameters. */
typedef struct {
  gt_row row;
  ts_topo *topo;   /* the row's machine (owned) */
  ts_plan *plan;   /* owned */
  ts_trace *trace; /* owned */
} row_sim;

/*
 * The row as trainsim plans it: the shipped DGX A100 cut to the row's GPUs (one node of N, or
 * N/8 nodes), Megatron's order (tp innermost, then dp, pp outermost), full recomputation
 * (activation checkpointing was on), 1F1B with Megatron's stages (L/pp blocks each, the
 * embedding on the first, the final norm and logits on the last), collectives by `algo`
 * (auto: what NCCL picks, with the node's and the network's fitted NCCL constants, as
 * `validate --against data/published/vtrain/megatron-*.csv` and `calibrate --against
 * data/published/vtrain/trainsim/a100.csv` run them), one gradient
 * all-reduce after the backward (vTrain's runs: no gradient bucketing), and attention=unfused
 * (Megatron-DeepSpeed's fused softmax between two batched GEMMs, not FlashAttention).
 */
/* The split of a row on a machine whose first dimension has `node` GPUs (and ndims
 * dimensions: node, or node and net). Caller frees. */
static char *row_split(const gt_row *r, int node, int ndims)
{
  /* Megatron's rank = tp + TP (dp + DP pp) on GPUs numbered node-major: each axis takes what
   * the previous ones left of the node, then nodes. */
  GString *text = g_string_new("recompute=full,attention=unfused,load=sync,tp-grad=serial");
  const char *name[] = {"tp", "dp", "pp"};
  int degree[] = {r->tp, r->dp, r->pp}, left_node = node;
  for (int a = 0; a < 3; a++) {
    if (degree[a] <= 1)
      continue;
    const char *where = left_node == 1           ? "net"
                        : degree[a] <= left_node ? "node"
                        : ndims > 1              ? "node+net"
                                                 : "node";
    g_string_append_printf(text, ",%s=%d@%s", name[a], degree[a], where);
    left_node = degree[a] <= left_node ? left_node / degree[a] : 1;
  }
  if (r->pp > 1) {
    int per = 5 * (r->layers / r->pp); /* sublayers: norm1, attention, norm2, fc1, fc2 */
    cr_assert_eq(r->layers % r->pp, 0, "line %d: %d layers over pp %d", r->line, r->layers, r->pp);
    g_string_append_printf(text, ",schedule=1f1b,p2p=blocking,stages=%d", 1 + per);
    for (int k = 1; k < r->pp; k++)
      g_string_append_printf(text, ":%d", per + (k == r->pp - 1 ? 2 : 0));
  }
  return g_string_free(text, FALSE);
}

static void row_sim_init(row_sim *s, model_cache *c, const ts_topo *shipped, const gt_row *r,
                         ts_coll_algo algo)
{
  memset(s, 0, sizeof *s);
  s->row = *r;
  const ts_model *m = row_model(c, r);
  s->topo = r->gpus <= 8 ? node_of(shipped, r->gpus) : cluster_of(shipped, r->gpus / 8);
  cr_assert_eq(s->topo->nchips, r->gpus, "line %d: %d GPUs", r->line, r->gpus);
  g_autofree char *stext = row_split(r, s->topo->dims[0].size, s->topo->ndims);
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_split) sp = ts_split_parse(stext, &error);
  cr_assert_not_null(sp, "%s: %s", stext, error != NULL ? error->message : "");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = r->global_batch;
  po.micro_batch = r->micro_batch;
  po.bucket_bytes = G_MAXDOUBLE;
  po.algo = algo;
  s->plan = ts_plan_new(m, s->topo, sp, &po, &error);
  cr_assert_not_null(s->plan, "line %d: %s", r->line, error != NULL ? error->message : "");
  s->trace = ts_plan_trace(s->plan, &error);
  cr_assert_not_null(s->trace, "line %d: %s", r->line, error != NULL ? error->message : "");
}

static void row_sim_clear(row_sim *s)
{
  ts_trace_free(s->trace);
  ts_plan_free(s->plan);
  ts_topo_free(s->topo);
}

/* The replayed step under parameters k; res (may be NULL) gets the breakdown. */
static double row_step(row_sim *s, const ts_fit_point *k, ts_result *res)
{
  ts_fit_set(&s->topo->chip, k);
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  ts_replay_result rr;
  g_autoptr(GError) error = NULL;
  gboolean ok = ts_run_replay(s->trace, s->topo, &ro, &rr, &error);
  cr_assert(ok, "line %d: %s", s->row.line, error != NULL ? error->message : "");
  if (res != NULL)
    ts_result_fill(res, s->plan, s->trace, &rr);
  return rr.step_time_s;
}

/* A set of rows, each planned once, with their ts_fit rows. */
typedef struct {
  int n;
  row_sim *sim;
  ts_fit_row *fit;
} row_set;

typedef enum { ROWS_FIT, ROWS_HELDOUT, ROWS_PIPELINED, ROWS_ALL } row_kind;

/* The fixed random half of a file's rows used by the fit: a Fisher-Yates shuffle of the row
 * indices by GLib's Mersenne Twister seeded with FIT_SEED; the first half (rounded down) is
 * the fitting half. Caller frees. */
static gboolean *fit_half(guint n)
{
  gboolean *fit = g_new0(gboolean, n > 0 ? n : 1);
  guint *idx = g_new(guint, n > 0 ? n : 1);
  for (guint i = 0; i < n; i++)
    idx[i] = i;
  GRand *rng = g_rand_new_with_seed(FIT_SEED);
  for (guint i = n; i > 1; i--) {
    guint j = (guint)g_rand_int_range(rng, 0, (gint32)i);
    guint t = idx[i - 1];
    idx[i - 1] = idx[j];
    idx[j] = t;
  }
  g_rand_free(rng);
  for (guint i = 0; i < n / 2; i++)
    fit[idx[i]] = TRUE;
  g_free(idx);
  return fit;
}

static row_set rows_of(GArray *all, row_kind kind, model_cache *c, const ts_topo *t,
                       ts_coll_algo algo)
{
  row_set s = {0, g_new0(row_sim, all->len), g_new0(ts_fit_row, all->len)};
  g_autofree gboolean *fit = fit_half(all->len);
  for (guint i = 0; i < all->len; i++) {
    const gt_row *r = &g_array_index(all, gt_row, i);
    gboolean take = kind == ROWS_ALL || (kind == ROWS_FIT && fit[i]) ||
                    (kind == ROWS_HELDOUT && !fit[i]) || (kind == ROWS_PIPELINED && r->pp > 1);
    if (!take)
      continue;
    row_sim_init(&s.sim[s.n], c, t, r, algo);
    s.fit[s.n] = (ts_fit_row){s.sim[s.n].topo, s.sim[s.n].trace, r->time_s};
    s.n++;
  }
  return s;
}

static void rows_clear(row_set *s)
{
  for (int i = 0; i < s->n; i++)
    row_sim_clear(&s->sim[i]);
  g_free(s->sim);
  g_free(s->fit);
}

/* The union of two sets' fit rows (borrowed). Caller frees. */
static ts_fit_row *fit_rows_union(const row_set *a, const row_set *b, int *n)
{
  *n = a->n + b->n;
  ts_fit_row *r = g_new(ts_fit_row, *n);
  memcpy(r, a->fit, sizeof *r * (size_t)a->n);
  memcpy(r + a->n, b->fit, sizeof *r * (size_t)b->n);
  return r;
}

/* Mean absolute percentage error (a fraction); ape[] (may be NULL) gets each row's. */
static double mape_of(row_set *s, const ts_fit_point *k, double *ape)
{
  g_autoptr(GError) error = NULL;
  double m = ts_fit_mape(s->fit, s->n, k, ape, &error);
  cr_assert(m >= 0, "%s", error != NULL ? error->message : "");
  return m;
}

static ts_fit_point shipped_point(const ts_topo *t)
{
  ts_fit_point k;
  ts_fit_get(&t->chip, &k);
  return k;
}

/* Per (GPUs, tp, pp, dp) bucket: rows, MAPE, median APE, signed mean error, exposed shares. */
static void report_buckets(row_set *s, const ts_fit_point *k, const char *title)
{
  fprintf(stderr,
          "\n%s\n| GPUs | tp | pp | dp | rows | MAPE | median | signed mean | exposed tp comm "
          "| exposed dp comm | idle (bubbles) |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
          "---:|---:|\n",
          title);
  gboolean *done = g_new0(gboolean, s->n);
  double *e = g_new(double, s->n);
  for (;;) {
    /* The next bucket: the smallest (GPUs, tp, pp) not reported yet. */
    int a = -1;
    for (int i = 0; i < s->n; i++) {
      const gt_row *r = &s->sim[i].row, *b = a >= 0 ? &s->sim[a].row : NULL;
      if (!done[i] &&
          (b == NULL || r->gpus < b->gpus ||
           (r->gpus == b->gpus && (r->tp < b->tp || (r->tp == b->tp && r->pp < b->pp)))))
        a = i;
    }
    if (a < 0)
      break;
    const gt_row *ra = &s->sim[a].row;
    int n = 0;
    double sum = 0, ssum = 0, tpc = 0, dpc = 0, idle = 0;
    for (int i = a; i < s->n; i++) {
      const gt_row *r = &s->sim[i].row;
      if (done[i] || r->gpus != ra->gpus || r->tp != ra->tp || r->pp != ra->pp)
        continue;
      done[i] = TRUE;
      ts_result res;
      double step = row_step(&s->sim[i], k, &res), rel = step / r->time_s - 1;
      e[n++] = fabs(rel);
      sum += fabs(rel), ssum += rel;
      tpc += res.exposed_comm_tp_s / step, dpc += res.exposed_comm_dp_s / step;
      idle += res.idle_time_s / step;
      ts_result_clear(&res);
    }
    double m = sum / n, sm = ssum / n, tc = tpc / n, dc = dpc / n, id = idle / n;
    fprintf(stderr,
            "| %d | %d | %d | %d | %d | %.1f%% | %.1f%% | %+.1f%% | %.1f%% | %.1f%% | %.1f%% |\n",
            ra->gpus, ra->tp, ra->pp, ra->dp, n, 100 * m, 100 * median(e, n), 100 * sm, 100 * tc,
            100 * dc, 100 * id);
  }
  g_free(e);
  g_free(done);
}

/* TS_PUBLISHED_DUMP=FILE.csv: every row of a set with trainsim's prediction, for plots. */
static void dump_rows(row_set *s, const ts_fit_point *k, const char *file)
{
  GString *out = g_string_new("line,gpus,tp,dp,pp,global_batch,micro_batch,hidden,heads,layers,"
                              "seq,measured_s,predicted_s\n");
  for (int i = 0; i < s->n; i++) {
    const gt_row *r = &s->sim[i].row;
    g_string_append_printf(out,
                           "%d,%d,%d,%d,%d,%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%d,%d,%d,%d",
                           r->line, r->gpus, r->tp, r->dp, r->pp, r->global_batch, r->micro_batch,
                           r->hidden, r->heads, r->layers, r->seq);
    double v[] = {r->time_s, row_step(&s->sim[i], k, NULL)};
    for (size_t j = 0; j < G_N_ELEMENTS(v); j++) {
      g_string_append_c(out, ',');
      ts_append_g(out, 9, v[j]);
    }
    g_string_append_c(out, '\n');
  }
  g_autoptr(GError) error = NULL;
  gboolean ok = ts_write_file_atomic(file, out->str, out->len, &error);
  cr_assert(ok, "%s", error != NULL ? error->message : "");
  g_string_free(out, TRUE);
}

static void summary(row_set *s, const ts_fit_point *k, const char *what)
{
  double *ape = g_new(double, s->n);
  ts_fit_point k0 = *k;
  k0.v[TS_FIT_LAUNCH] = 0;
  double m = mape_of(s, k, ape), med = median(ape, s->n), m0 = mape_of(s, &k0, NULL);
  fprintf(stderr, "%s: %d rows, MAPE %.2f%%, median %.2f%%; without launch floors %.2f%%\n", what,
          s->n, 100 * m, 100 * med, 100 * m0);
  g_free(ape);
}

Test(megatron, ground_truth_files_have_the_published_row_counts)
{
  GArray *single = read_ground_truth("ground_truth_single.csv");
  GArray *multi = read_ground_truth("ground_truth_multi.csv");
  cr_assert_eq(single->len, 1440, "%u rows in ground_truth_single.csv, expected 1440", single->len);
  cr_assert_eq(multi->len, 109, "%u rows in ground_truth_multi.csv, expected 109", multi->len);
  int pp1 = 0;
  for (guint i = 0; i < single->len; i++) {
    const gt_row *r = &g_array_index(single, gt_row, i);
    int product = r->tp * r->dp * r->pp;
    cr_assert_eq(product, r->gpus, "line %d: tp x dp x pp = %d GPUs, row says %d", r->line, product,
                 r->gpus);
    pp1 += r->pp == 1;
  }
  cr_assert_eq(pp1, 720, "%d single-node rows with pipeline degree 1, expected 720", pp1);
  /* The fitting half is fixed: its size, and two of its rows, so a change of the shuffle (or
   * of GLib's generator) fails here instead of silently moving the held-out set. */
  g_autofree gboolean *half = fit_half(single->len);
  int n_fit = 0;
  for (guint i = 0; i < single->len; i++)
    n_fit += half[i];
  cr_assert_eq(n_fit, 720, "%d rows in the fitting half, expected 720", n_fit);
  g_array_unref(multi);
  g_array_unref(single);
}

/* The rows of both files as `trainsim calibrate --against` reads them: one line per row with
 * the machine and model files of data/published/vtrain/trainsim and the row's set (fit or
 * heldout, the fixed halves above). Caller frees. */
static char *calibration_csv(GHashTable *models)
{
  GString *out = g_string_new(
      "# vTrain's Megatron measurements (data/published/vtrain/*.csv, MIT) as trainsim rows;\n"
      "# written by tests/test_published.c (TS_PUBLISHED_EXPORT=1), checked by it.\n"
      "topology,model,split,global_batch,micro_batch,measured_step_time_s,"
      "collective_algorithm,bucket_MiB,set,source\n");
  const char *files[] = {"ground_truth_single.csv", "ground_truth_multi.csv"};
  for (int f = 0; f < 2; f++) {
    GArray *all = read_ground_truth(files[f]);
    g_autofree gboolean *half = fit_half(all->len);
    for (guint i = 0; i < all->len; i++) {
      const gt_row *r = &g_array_index(all, gt_row, i);
      g_autofree char *topo = r->gpus <= 8
                                  ? g_strdup_printf("topologies/a100-%dgpu.ini", r->gpus)
                                  : g_strdup_printf("topologies/a100-%dnode.ini", r->gpus / 8);
      g_autofree char *split = row_split(r, r->gpus <= 8 ? r->gpus : 8, r->gpus <= 8 ? 1 : 2);
      g_autofree char *model = row_model_file(r);
      if (models != NULL && !g_hash_table_contains(models, model))
        g_hash_table_insert(models, g_strdup(model), row_model_text(r));
      g_string_append_printf(out, "%s,models/%s,\"%s\",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",",
                             topo, model, split, r->global_batch, r->micro_batch);
      ts_append_g(out, 9, r->time_s);
      g_string_append_printf(out, ",auto,none,%s,%s:%d\n", half[i] ? "fit" : "heldout", files[f],
                             r->line);
    }
    g_array_unref(all);
  }
  return g_string_free(out, FALSE);
}

/* data/published/vtrain/trainsim/a100.csv is what calibration_csv writes: the command's fit
 * and this file's are the same rows and halves. TS_PUBLISHED_EXPORT=1 rewrites it and the
 * model files. */
Test(megatron, calibration_csv_matches_the_test_rows)
{
  g_autoptr(GHashTable) models = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_autofree char *want = calibration_csv(models);
  g_autofree char *dir = g_build_filename(TS_SOURCE_DIR, "data/published/vtrain/trainsim", NULL);
  g_autofree char *path = g_build_filename(dir, "a100.csv", NULL);
  g_autoptr(GError) error = NULL;
  if (g_getenv("TS_PUBLISHED_EXPORT") != NULL) {
    g_autofree char *mdir = g_build_filename(dir, "models", NULL);
    g_mkdir_with_parents(mdir, 0755);
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, models);
    while (g_hash_table_iter_next(&it, &k, &v)) {
      g_autofree char *mp = g_build_filename(mdir, (const char *)k, NULL);
      cr_assert(ts_write_file_atomic(mp, v, strlen(v), &error), "%s", error->message);
    }
    cr_assert(ts_write_file_atomic(path, want, strlen(want), &error), "%s", error->message);
  }
  g_autofree char *have = NULL;
  gboolean ok = g_file_get_contents(path, &have, NULL, &error);
  cr_assert(ok, "%s: %s (TS_PUBLISHED_EXPORT=1 writes it)", path, error->message);
  cr_assert(strcmp(have, want) == 0, "%s differs from the test's rows: TS_PUBLISHED_EXPORT=1",
            path);
}

/* Parameters fitted and their tolerances: the shipped profile must be the fit's optimum. */
#define FIT_MASK                                                                                   \
  ((1u << TS_FIT_EFFICIENCY) | (1u << TS_FIT_LAUNCH) | (1u << TS_FIT_MEMORY) |                     \
   (1u << TS_FIT_K_OVERHEAD) | (1u << TS_FIT_COLL_LAUNCH))

/*
 * The shipped profile on the fitting halves of both files (single-node and multi-node rows
 * together): its MAPE is pinned (FIT_MAPE_MAX). The shipped values come from a coordinate
 * descent on every third single-node fitting row and every multi-node one, each file weighted
 * equally, with the bandwidth set (topologies/chips/a100-sxm4-80gb.ini says how);
 * TS_PUBLISHED_FIT=1 refits on every fitting row from the shipped point and prints the result
 * (bench/fit_published.sh; `trainsim calibrate --against` runs the same fit).
 */
/* measured 8.13% (single-node 8.09%, multi-node 8.17%) since the loads' synchronisation
 * (load=sync) and the loss's kernels; 8.33% before */
#define FIT_MAPE_MAX 0.084

Test(megatron, fitting_half_error_is_bounded, .timeout = 600)
{
  GArray *single = read_ground_truth("ground_truth_single.csv");
  GArray *multi = read_ground_truth("ground_truth_multi.csv");
  g_autoptr(ts_topo) t = load_shipped("dgx-a100-1node");
  g_autoptr(ts_topo) t4 = load_shipped("dgx-a100-4node");
  model_cache c;
  cache_init(&c);
  row_set fs = rows_of(single, ROWS_FIT, &c, t, TS_ALGO_AUTO);
  row_set fm = rows_of(multi, ROWS_FIT, &c, t4, TS_ALGO_AUTO);
  int n = 0;
  g_autofree ts_fit_row *rows = fit_rows_union(&fs, &fm, &n);
  ts_fit_point k = shipped_point(t);
  /* Every DGX A100 file ships the same chip profile. */
  for (size_t i = 0; i < G_N_ELEMENTS(DGX_A100); i++) {
    g_autoptr(ts_topo) other = load_shipped(DGX_A100[i]);
    ts_fit_point ko = shipped_point(other);
    cr_assert(memcmp(&ko, &k, sizeof k) == 0, "%s: not the A100 profile's parameters", DGX_A100[i]);
  }
  g_autoptr(GError) error = NULL;
  if (g_getenv("TS_PUBLISHED_FIT") != NULL) {
    ts_fit_point f;
    gboolean ok = ts_fit_minimise(rows, n, &k, FIT_MASK, &f, &error);
    cr_assert(ok, "%s", error != NULL ? error->message : "");
    fprintf(stderr, "fit on the fitting halves (%d single-node + %d multi-node rows, seed %u):\n",
            fs.n, fm.n, FIT_SEED);
    for (int p = 0; p < TS_FIT_NPARAMS; p++)
      fprintf(stderr, "  %s = %.6g\n", ts_fit_param_key(p), ts_fit_param_file_value(p, f.v[p]));
    fprintf(stderr, "  fitting MAPE %.2f%% (single %.2f%%, multi %.2f%%)\n",
            100 * ts_fit_mape(rows, n, &f, NULL, NULL), 100 * mape_of(&fs, &f, NULL),
            100 * mape_of(&fm, &f, NULL));
  }
  double m = ts_fit_mape(rows, n, &k, NULL, &error);
  cr_assert(m >= 0, "%s", error != NULL ? error->message : "");
  cr_assert(m < FIT_MAPE_MAX, "fitting-half MAPE %.4f, expected < %g", m, FIT_MAPE_MAX);
  rows_clear(&fm);
  rows_clear(&fs);
  cache_clear(&c);
  g_array_unref(multi);
  g_array_unref(single);
}

/* Held-out thresholds: the achieved errors pinned just above them, so a regression fails. The
 * issue's targets are 5% single-node (missed: measured 8.46%, 8.47% before the host queue's
 * fixes of 2026-12-02; 8.98% before the GPU's element-wise epilogues, cross-entropy and
 * optimizer traffic were costed and the bandwidth set to a measured 0.88) and 8% multi-node
 * (met: 7.53%); docs/accuracy.md. With the pipelines' blocking sends (p2p=blocking, December
 * 2026): 8.44% and 7.48%. With each micro-batch's load synchronising (load=sync) and the
 * loss's 26 kernels launched (kernel_launch_us refitted 64 -> 62): 8.21% and 7.52%. With the
 * input gradient's tensor-parallel all-reduce after the weight gradient (tp-grad=serial,
 * Megatron-DeepSpeed's mpu; profile not refitted): 8.27% and 7.72% (fitting halves 8.09% ->
 * 8.12% and 8.17% -> 7.90%; multi-node bias -5.8% -> -2.3%). With Megatron's eager softmax
 * where its fused kernel does not apply (micro-batch x heads a GPU not a multiple of 4: the
 * tp = 8, micro-batch 1 rows): 7.95% and 7.56%. */
#define HELDOUT_SINGLE_MAPE_MAX 0.081
#define HELDOUT_MULTI_MAPE_MAX 0.077

/* The shipped profile on the single-node rows it was not fitted to; tables with
 * TS_PUBLISHED_REPORT. */
Test(megatron, held_out_single_node_error_is_bounded, .timeout = 600)
{
  GArray *all = read_ground_truth("ground_truth_single.csv");
  g_autoptr(ts_topo) t = load_shipped("dgx-a100-1node");
  model_cache c;
  cache_init(&c);
  row_set held = rows_of(all, ROWS_HELDOUT, &c, t, TS_ALGO_AUTO);
  ts_fit_point k = shipped_point(t);
  double m_held = mape_of(&held, &k, NULL);
  if (report_on()) {
    fprintf(stderr, "\nshipped A100 profile:");
    for (int p = 0; p < TS_FIT_NPARAMS; p++)
      fprintf(stderr, " %s %.6g", ts_fit_param_key(p), ts_fit_param_file_value(p, k.v[p]));
    fprintf(stderr, "\n");
    row_set fit = rows_of(all, ROWS_FIT, &c, t, TS_ALGO_AUTO);
    row_set every = rows_of(all, ROWS_ALL, &c, t, TS_ALGO_AUTO);
    summary(&fit, &k, "single node, fitting half");
    summary(&held, &k, "single node, held-out half");
    summary(&every, &k, "single node, all rows");
    report_buckets(&held, &k, "single-node held-out rows");
    const char *dump = g_getenv("TS_PUBLISHED_DUMP");
    if (dump != NULL && *dump != '\0')
      dump_rows(&every, &k, dump);
    rows_clear(&every);
    rows_clear(&fit);
  }
  cr_assert(m_held < HELDOUT_SINGLE_MAPE_MAX, "held-out single-node MAPE %.4f, expected < %g",
            m_held, HELDOUT_SINGLE_MAPE_MAX);
  rows_clear(&held);
  cache_clear(&c);
  g_array_unref(all);
}

/* Multi-node rows (64-512 GPUs, GPT 3.6B-175B) held out of the fit, on a network whose
 * inter-node part is vTrain's stated bandwidth, not a measurement. */
Test(megatron, held_out_multi_node_error_is_bounded, .timeout = 600)
{
  GArray *all = read_ground_truth("ground_truth_multi.csv");
  g_autoptr(ts_topo) t = load_shipped("dgx-a100-4node");
  model_cache c;
  cache_init(&c);
  row_set held = rows_of(all, ROWS_HELDOUT, &c, t, TS_ALGO_AUTO);
  ts_fit_point k = shipped_point(t);
  double m = mape_of(&held, &k, NULL);
  if (report_on()) {
    row_set every = rows_of(all, ROWS_ALL, &c, t, TS_ALGO_AUTO);
    row_set fit = rows_of(all, ROWS_FIT, &c, t, TS_ALGO_AUTO);
    summary(&fit, &k, "\nmulti-node, fitting half");
    summary(&held, &k, "multi-node, held-out half");
    summary(&every, &k, "multi-node, all rows");
    report_buckets(&every, &k, "multi-node rows");
    rows_clear(&fit);
    rows_clear(&every);
  }
  cr_assert(m < HELDOUT_MULTI_MAPE_MAX, "held-out multi-node MAPE %.4f, expected < %g", m,
            HELDOUT_MULTI_MAPE_MAX);
  rows_clear(&held);
  cache_clear(&c);
  g_array_unref(all);
}

/* docs/validation-published.md says the GPU rates alone cannot fit these runs (small models
 * wait for the host): without the launch floor the held-out MAPE stays above 20%. */
Test(megatron, launch_floor_is_needed, .timeout = 600)
{
  GArray *all = read_ground_truth("ground_truth_single.csv");
  g_autoptr(ts_topo) t = load_shipped("dgx-a100-1node");
  model_cache c;
  cache_init(&c);
  row_set held = rows_of(all, ROWS_HELDOUT, &c, t, TS_ALGO_AUTO);
  ts_fit_point k = shipped_point(t);
  k.v[TS_FIT_LAUNCH] = 0;
  double m = mape_of(&held, &k, NULL);
  cr_assert(m > 0.20, "without launch floors the held-out MAPE is %.3f", m);
  rows_clear(&held);
  cache_clear(&c);
  g_array_unref(all);
}

/* ---- torchgpipe: AmoebaNet-D (18, 256) through GPipe on Tesla P40s ----------------------- */

/* torchgpipe's speed benchmark (github kakaobrain/torchgpipe a1b4ee2,
 * benchmarks/amoebanetd-speed/main.py and README.md, reproducing GPipe's Table 2): partitions
 * n, global batch, micro-batches (chunks), the balance in torchgpipe's modules (the stem, the
 * 22 cells, the classifier) and the measured throughput on Tesla P40s. Checkpointing is
 * 'always' with one micro-batch and 'except_last' otherwise; trainsim recomputes every
 * micro-batch (the last one's recomputation is the difference). */
static const struct {
  int n, batch, chunks;
  int balance[8];
  double samples_per_s;
} TG[] = {
    {2, 96, 1, {7, 17}, 26.733},
    {2, 256, 4, {9, 15}, 41.133},
    {2, 1280, 32, {9, 15}, 47.386},
    {4, 160, 1, {3, 4, 5, 12}, 26.827},
    {4, 360, 4, {3, 6, 7, 8}, 44.543},
    {4, 1152, 32, {3, 6, 7, 8}, 72.412},
    {8, 196, 1, {2, 2, 2, 2, 2, 3, 4, 7}, 24.918},
    {8, 480, 4, {2, 2, 2, 3, 3, 4, 4, 4}, 70.065},
    {8, 1280, 32, {2, 2, 2, 3, 3, 4, 4, 4}, 132.413},
};

/* Thresholds, justified in docs/validation-published.md, section 3. */
#define TG_FIT_REL 0.01   /* the shipped efficiency reproduces the one fitted configuration */
#define TG_MAPE_MAX 0.12  /* the eight predicted configurations (measured 8.5%) */
#define TG_WORST_MAX 0.25 /* the worst of them, n = 4 with 4 micro-batches (measured +21%) */

/* The split of torchgpipe's partitions as trainsim stages: its balance counts modules (the
 * stem, each cell, the classifier), trainsim's stages count layers (the stem's, each cell's
 * block, the classifier's). Caller frees. */
static char *tg_split(const ts_model *m, int n, const int *balance, const char *options)
{
  int layers_of[128] = {0}; /* per torchgpipe module */
  gboolean cells_seen = FALSE;
  int last = 0;
  for (int i = 0; i < m->nlayers; i++) {
    int b = m->layers[i].block;
    cells_seen |= b >= 0;
    last = MAX(last, b + 2);
    cr_assert_lt(b + 2, 128);
    /* the stem (before the first cell), cell b, the classifier (after the last) */
    layers_of[b >= 0 ? 1 + b : cells_seen ? last : 0]++;
  }
  GString *split = g_string_new(NULL);
  g_string_printf(split, "pp=%d,%s", n, options);
  int mod = 0;
  for (int s = 0; s < n && n > 1; s++) {
    int count = 0;
    for (int j = 0; j < balance[s]; j++)
      count += layers_of[mod++];
    g_string_append_printf(split, "%s%d", s > 0 ? ":" : ",stages=", count);
  }
  cr_assert(n == 1 || mod == last + 1, "the balance covers torchgpipe's %d modules", last + 1);
  return g_string_free(split, FALSE);
}

/* The plan of torchgpipe's partitions on the first n chips of the shipped P40 server. */
static ts_plan *tg_plan(const ts_model *m, const ts_topo *t, int n, const int *balance,
                        gint64 batch, gint64 micro)
{
  g_autofree char *text = tg_split(m, n, balance, "schedule=gpipe,recompute=stage");
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_split) sp = ts_split_parse(text, &error);
  cr_assert_not_null(sp, "%s: %s", text, error != NULL ? error->message : "");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  po.micro_batch = micro;
  ts_plan *p = ts_plan_new(m, t, sp, &po, &error);
  cr_assert_not_null(p, "%s: %s", text, error != NULL ? error->message : "");
  return p;
}

/* Predicted samples/s of configuration k. */
static double tg_throughput(const ts_model *m, const ts_topo *shipped, int k)
{
  g_autoptr(ts_topo) t = dim_of(shipped, "pcie", TG[k].n);
  g_autoptr(ts_plan) p =
      tg_plan(m, t, TG[k].n, TG[k].balance, TG[k].batch, TG[k].batch / TG[k].chunks);
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &error);
  cr_assert_not_null(tr, "%s", error != NULL ? error->message : "");
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  ts_replay_result rr;
  cr_assert(ts_run_replay(tr, t, &ro, &rr, &error), "%s", error != NULL ? error->message : "");
  return (double)TG[k].batch / rr.step_time_s;
}

/* docs/validation-published.md, section 3: with the compute efficiency fitted to the first
 * configuration, trainsim predicts the other eight within TG_MAPE_MAX on average. */
Test(torchgpipe, amoebanet_pipeline_speed_on_p40)
{
  g_autoptr(ts_topo) shipped = load_shipped("p40-pcie-8");
  g_autofree char *path = g_strdup_printf("%s/models/amoebanet-d-18-256.ini", TS_SOURCE_DIR);
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_model) m = ts_model_load(path, &error);
  cr_assert_not_null(m, "%s", error != NULL ? error->message : "");
  double sum = 0, worst = 0;
  if (report_on())
    printf(
        "torchgpipe AmoebaNet-D (18, 256) on P40s: n, m, measured, predicted samples/s, error\n");
  for (int k = 0; k < (int)G_N_ELEMENTS(TG); k++) {
    double got = tg_throughput(m, shipped, k), want = TG[k].samples_per_s;
    double err = (got - want) / want;
    if (report_on())
      printf("  n=%d m=%-2d %8.3f %8.3f %+6.1f%%\n", TG[k].n, TG[k].chunks, want, got, 100 * err);
    if (k == 0) {
      cr_expect(fabs(err) < TG_FIT_REL, "fitted n=2 m=1: %.3f vs %.3f", got, want);
      continue;
    }
    sum += fabs(err);
    worst = MAX(worst, fabs(err));
  }
  double mape = sum / (G_N_ELEMENTS(TG) - 1);
  cr_expect(mape < TG_MAPE_MAX, "MAPE %.3f over the eight predicted configurations", mape);
  cr_expect(worst < TG_WORST_MAX, "worst error %.3f", worst);
}

/* torchgpipe's memory benchmark (benchmarks/amoebanetd-memory/main.py and docs/benchmarks.rst,
 * reproducing GPipe's Table 1): AmoebaNet-D (L, D) on 1-8 Tesla P40s, a batch of 128 images in
 * 128 micro-batches, stage checkpointing, and the peak activation memory summed over the GPUs
 * (PyTorch's max_memory_cached less 3 x the parameters' bytes: parameters, gradients and
 * RMSprop's one slot). */
static const struct {
  const char *model;
  int n;
  int balance[8];
  double peak_GiB;
} TG_MEM[] = {
    {"amoebanet-d-18-416", 1, {24}, 0.91},
    {"amoebanet-d-18-544", 2, {16, 8}, 3.39},
    {"amoebanet-d-36-544", 4, {16, 12, 7, 7}, 6.91},
    {"amoebanet-d-72-512", 8, {23, 16, 11, 6, 6, 5, 5, 6}, 10.83},
};

/* docs/validation-published.md, section 3: trainsim's kept activations and working buffers,
 * summed over the devices, are below the caching allocator's measured peak (which also holds
 * cuDNN workspaces and freed blocks) but not by more than half. */
#define TG_MEM_LO 0.5
#define GIB_BYTES 1073741824.0
#define TG_MEM_HI 1.0

Test(torchgpipe, amoebanet_pipeline_memory)
{
  g_autoptr(ts_topo) shipped = load_shipped("p40-pcie-8");
  if (report_on())
    printf("torchgpipe AmoebaNet-D memory: model, n, measured, predicted GiB (activations + "
           "buffers), ratio\n");
  for (size_t k = 0; k < G_N_ELEMENTS(TG_MEM); k++) {
    g_autofree char *path = g_strdup_printf("%s/models/%s.ini", TS_SOURCE_DIR, TG_MEM[k].model);
    g_autoptr(GError) error = NULL;
    g_autoptr(ts_model) m = ts_model_load(path, &error);
    cr_assert_not_null(m, "%s", error != NULL ? error->message : "");
    int n = TG_MEM[k].n;
    g_autoptr(ts_topo) t = dim_of(shipped, "pcie", n);
    g_autoptr(ts_plan) p = tg_plan(m, t, n, TG_MEM[k].balance, 128, 1);
    double got = 0, pools = 0;
    for (int d = 0; d < n; d++) {
      got += p->stage_mem[d].activations + p->stage_mem[d].temp + p->stage_mem[d].pipeline;
      pools += p->stage_mem[d].pipeline;
    }
    double ratio = got / (TG_MEM[k].peak_GiB * GIB_BYTES);
    if (report_on())
      printf("  %s n=%d %6.2f %6.3f %5.2f (copy-stream pools %.3f)\n", TG_MEM[k].model, n,
             TG_MEM[k].peak_GiB, got / GIB_BYTES, ratio, pools / GIB_BYTES);
    cr_expect(ratio > TG_MEM_LO && ratio < TG_MEM_HI, "%s on %d: %.3f GiB, measured %.2f",
              TG_MEM[k].model, n, got / GIB_BYTES, TG_MEM[k].peak_GiB);
  }
}
