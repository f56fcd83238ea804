/* test_collectives: closed forms, numeric execution of every algorithm on real buffers, and
 * the agreement of transfers, flows and time (tolerances stated at each check). */
#include "ts_coll.h"
#include "ts_coll_internal.h"
#include "ts_coll_memo.h"
#include "ts_util.h"

#include "ts_test.h"
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* ---- hand-built topologies (ts_topo.c belongs to another module) ---- */

typedef struct {
  const char *name;
  int size;
  ts_shape shape;
  double bw_Bps, lat_s;
} dimspec;

static ts_topo *topo_new(int ndims, const dimspec *d)
{
  ts_topo *t = g_new0(ts_topo, 1);
  t->name = g_strdup("test");
  t->ndims = ndims;
  t->nchips = 1;
  for (int i = 0; i < ndims; i++) {
    t->dims[i].name = g_strdup(d[i].name);
    t->dims[i].size = d[i].size;
    t->dims[i].shape = d[i].shape;
    t->dims[i].link_bw_Bps = d[i].bw_Bps;
    t->dims[i].latency_s = d[i].lat_s;
    /* Every switch reduces in place (NVLS), so nvls runs wherever a switch is. */
    t->dims[i].in_switch_reduction = d[i].shape == TS_SHAPE_SWITCH;
    t->dims[i].in_switch_efficiency = 0.85;
    t->nchips *= d[i].size;
  }
  return t;
}

static void topo_free(ts_topo *t)
{
  for (int i = 0; i < t->ndims; i++)
    g_free(t->dims[i].name);
  g_free(t->name);
  g_free(t);
}

static ts_topo *topo1(int n, ts_shape shape, double bw, double lat)
{
  dimspec d = {"x", n, shape, bw, lat};
  return topo_new(1, &d);
}

static const char *shape_label(ts_shape s)
{
  return s == TS_SHAPE_RING ? "ring" : s == TS_SHAPE_MESH ? "mesh" : "switch";
}

static ts_group_shape whole(const ts_topo *t)
{
  int dims[TS_MAX_DIMS];
  for (int i = 0; i < t->ndims; i++)
    dims[i] = i;
  ts_group_shape g;
  ts_group_shape_dims(t, dims, t->ndims, &g);
  return g;
}

static double rel_err(double a, double b)
{
  double s = MAX(fabs(a), fabs(b));
  return s == 0.0 ? 0.0 : fabs(a - b) / s;
}

/* Relative tolerance of closed forms: the model sums the same terms in another order. */
#define CLOSED_TOL 1e-12

#define expect_close(actual, expected, tol, ...)                                                   \
  do {                                                                                             \
    double a_ = (actual), e_ = (expected);                                                         \
    double r_ = rel_err(a_, e_);                                                                   \
    cr_expect(r_ <= (tol), "got %.17g, expected %.17g (rel err %.3g): %s", a_, e_, r_,             \
              g_strdup_printf(__VA_ARGS__));                                                       \
  } while (0)

static double coll_time(const ts_topo *t, ts_coll_kind k, ts_coll_algo a, const ts_group_shape *g,
                        double bytes)
{
  g_autoptr(GError) e = NULL;
  double v = ts_coll_time(t, k, a, g, bytes, NULL, &e);
  cr_assert(v >= 0.0, "ts_coll_time %s %s failed: %s", ts_coll_kind_name(k), ts_coll_algo_name(a),
            e != NULL ? e->message : "?");
  return v;
}

/* ---- closed forms ---- */

Test(closed_form, ring_allreduce)
{
  const double alpha = 1e-6, B = 1e11, S = 1e8;
  int ns[] = {2, 3, 8, 16, 32};
  for (size_t i = 0; i < G_N_ELEMENTS(ns); i++) {
    int N = ns[i];
    ts_topo *t = topo1(N, TS_SHAPE_RING, B, alpha);
    ts_group_shape g = whole(t);
    double expect = 2.0 * (N - 1) * (alpha + S / (N * B)); /* Patarasuk & Yuan 2009 */
    expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_RING, &g, S), expect, CLOSED_TOL,
                 "ring allreduce N=%d", N);
    /* The plan's time (4-byte elements) comes from the same phase structure. */
    g_autoptr(ts_coll_plan) p =
        ts_coll_decompose(t, TS_COLL_ALLREDUCE, TS_ALGO_RING, &g, (gint64)(S / 4), 4.0, NULL);
    cr_assert_not_null(p);
    expect_close(ts_coll_plan_time(p), expect, CLOSED_TOL, "plan time N=%d", N);
    int steps = ts_coll_plan_nsteps(p);
    cr_expect_eq(steps, 2 * (N - 1), "ring allreduce N=%d steps", N);
    /* Halves: reduce-scatter and all-gather are (N-1)(alpha + S/(NB)) each. */
    expect_close(coll_time(t, TS_COLL_REDUCESCATTER, TS_ALGO_RING, &g, S), expect / 2, CLOSED_TOL,
                 "ring reducescatter N=%d", N);
    expect_close(coll_time(t, TS_COLL_ALLGATHER, TS_ALGO_RING, &g, S), expect / 2, CLOSED_TOL,
                 "ring allgather N=%d", N);
    topo_free(t);
  }
}

/* [dim.X] transfer_stall_us (a TPU's data-centre network): the chip's time in the hand-off ops
 * is the stall times the transfers a member makes over that dimension, n - 1 for a
 * reduce-scatter or all-gather and 2 (n - 1) for an all-reduce; a dimension without it (the
 * ICI) adds nothing, and the collective's own time does not change. */
Test(closed_form, dcn_transfer_stall_is_linear_in_the_members)
{
  const double stall = 160e-6;
  dimspec d[2] = {{"x", 16, TS_SHAPE_RING, 4.5e10, 1e-6},
                  {"dcn", 32, TS_SHAPE_SWITCH, 3.125e9, 2e-5}};
  ts_topo *t = topo_new(2, d);
  double before =
      coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, &(ts_group_shape){1, {{1, 32, 1}}}, 1e6);
  t->dims[1].transfer_stall_s = stall;
  int ns[] = {2, 4, 8, 32};
  for (size_t i = 0; i < G_N_ELEMENTS(ns); i++) {
    int n = ns[i];
    ts_group_shape dcn = {1, {{1, n, 1}}}, both = {2, {{0, 16, 1}, {1, n, 1}}};
    expect_close(ts_coll_chip_stall_s(t, TS_COLL_ALLREDUCE, &dcn), 2.0 * (n - 1) * stall, 1e-12,
                 "all-reduce over %d slices", n);
    expect_close(ts_coll_chip_stall_s(t, TS_COLL_REDUCESCATTER, &dcn), (n - 1) * stall, 1e-12,
                 "reduce-scatter over %d slices", n);
    expect_close(ts_coll_chip_stall_s(t, TS_COLL_ALLGATHER, &both), (n - 1) * stall, 1e-12,
                 "all-gather over the ICI ring and %d slices", n);
  }
  ts_group_shape ici = {1, {{0, 16, 1}}};
  double s_ici = ts_coll_chip_stall_s(t, TS_COLL_ALLREDUCE, &ici);
  cr_assert_eq(s_ici, 0.0, "the ICI ring stalls nothing: %g s", s_ici);
  double after =
      coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, &(ts_group_shape){1, {{1, 32, 1}}}, 1e6);
  cr_assert_eq(after, before, "the collective's own time moved: %g -> %g s", before, after);
  topo_free(t);
}

/* A bidirectional ring sends every shard both ways (Austin et al. 2025, sharding.md): floor(N/2)
 * hops instead of N-1, the same (N-1)/(2N) S a link direction (for even N the antipodal shard
 * half each way). Before s14 trainsim ran two rings of half shards for N-1 steps: 2 (N-1) alpha
 * + 2 (N-1)/(2N) S/B, twice the hops at every N. */
Test(closed_form, bidir_ring_halves_bandwidth_term)
{
  const double alpha = 2e-6, B = 5e10, S = 3e8;
  int ns[] = {2, 3, 8, 16, 32};
  for (size_t i = 0; i < G_N_ELEMENTS(ns); i++) {
    int N = ns[i];
    ts_topo *t = topo1(N, TS_SHAPE_RING, B, alpha);
    ts_group_shape g = whole(t);
    double expect = 2.0 * ((N / 2) * alpha + (N - 1.0) / (2.0 * N) * S / B);
    if (N == 2) /* both directions are the one link to the other member: S/2 over it */
      expect = 2.0 * (alpha + S / (2.0 * B));
    expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_BIDIR_RING, &g, S), expect, CLOSED_TOL,
                 "bidir ring N=%d", N);
    /* On a single ring dim, torus = bidirectional ring, hierarchical = one-way ring. */
    expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_TORUS, &g, S), expect, CLOSED_TOL,
                 "torus on one ring dim N=%d", N);
    expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_HIERARCHICAL, &g, S),
                 2.0 * (N - 1) * (alpha + S / (N * B)), CLOSED_TOL, "hierarchical N=%d", N);
    /* Reduce-scatter and all-gather are each half of it (the half step first, resp. last). */
    expect_close(coll_time(t, TS_COLL_REDUCESCATTER, TS_ALGO_BIDIR_RING, &g, S), expect / 2,
                 CLOSED_TOL, "bidir ring reducescatter N=%d", N);
    expect_close(coll_time(t, TS_COLL_ALLGATHER, TS_ALGO_BIDIR_RING, &g, S), expect / 2, CLOSED_TOL,
                 "bidir ring allgather N=%d", N);
    g_autoptr(ts_coll_plan) p =
        ts_coll_decompose(t, TS_COLL_ALLGATHER, TS_ALGO_BIDIR_RING, &g, 1000, 4.0, NULL);
    cr_assert_not_null(p);
    cr_expect_eq(ts_coll_plan_nsteps(p), N / 2, "bidir ring allgather N=%d: steps", N);
    topo_free(t);
  }
  /* On a switch both directions share the chip's port: half the hops, no bandwidth gain. */
  ts_topo *t = topo1(8, TS_SHAPE_SWITCH, B, alpha);
  ts_group_shape g = whole(t);
  expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_BIDIR_RING, &g, S),
               2.0 * (4 * alpha + 7 * S / (8 * B)), CLOSED_TOL, "bidir ring on a switch");
  topo_free(t);
}

Test(closed_form, torus_dimwise_2d_is_sum_of_dimension_phases)
{
  const double S = 1.6e9, ax = 1.5e-6, ay = 2.5e-6;
  int sizes[] = {8, 16, 32};
  double ratios[] = {1.0, 4.0}; /* X bandwidth = ratio * Y bandwidth */
  for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
    for (size_t j = 0; j < G_N_ELEMENTS(ratios); j++) {
      int X = sizes[i], Y = sizes[i];
      double By = 4.5e10, Bx = ratios[j] * By;
      dimspec d[2] = {{"x", X, TS_SHAPE_RING, Bx, ax}, {"y", Y, TS_SHAPE_RING, By, ay}};
      ts_topo *t = topo_new(2, d);
      ts_group_shape g = whole(t);
      /* Ying et al. 2018 / Kumar et al. 2019: reduce-scatter along x (bidirectional ring on S),
       * then along y on S/X, all-gather y, then x. Each phase by hand: */
      double phase_x = (X / 2) * ax + (X - 1.0) / (2.0 * X) * S / Bx;
      double phase_y = (Y / 2) * ay + (Y - 1.0) / (2.0 * Y) * (S / X) / By;
      expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_TORUS_DIMWISE, &g, S),
                   2 * phase_x + 2 * phase_y, CLOSED_TOL, "torus %dx%d ratio %g", X, Y, ratios[j]);
      expect_close(coll_time(t, TS_COLL_REDUCESCATTER, TS_ALGO_TORUS, &g, S), phase_x + phase_y,
                   CLOSED_TOL, "torus reducescatter %dx%d", X, Y);
      /* The sum of the per-dimension collectives, each timed on its own. */
      ts_group_shape gx = {1, {{0, X, 1}}}, gy = {1, {{1, Y, 1}}};
      double rx = coll_time(t, TS_COLL_REDUCESCATTER, TS_ALGO_TORUS, &gx, S);
      double ry = coll_time(t, TS_COLL_REDUCESCATTER, TS_ALGO_TORUS, &gy, S / X);
      double agy = coll_time(t, TS_COLL_ALLGATHER, TS_ALGO_TORUS, &gy, S / X);
      double agx = coll_time(t, TS_COLL_ALLGATHER, TS_ALGO_TORUS, &gx, S);
      expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_TORUS_DIMWISE, &g, S),
                   rx + ry + agy + agx, CLOSED_TOL, "torus = sum of 1D phases %dx%d", X, Y);
      topo_free(t);
    }
  /* 3D: 4 x 4 x 4 torus. */
  dimspec d3[3] = {{"x", 4, TS_SHAPE_RING, 1e11, 1e-6},
                   {"y", 4, TS_SHAPE_RING, 5e10, 2e-6},
                   {"z", 4, TS_SHAPE_RING, 2.5e10, 3e-6}};
  ts_topo *t = topo_new(3, d3);
  ts_group_shape g = whole(t);
  double e = 2 * (2 * 1e-6 + 3 * S / 8 / 1e11) + 2 * (2 * 2e-6 + 3 * S / 4 / 8 / 5e10) +
             2 * (2 * 3e-6 + 3 * S / 16 / 8 / 2.5e10);
  expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_TORUS_DIMWISE, &g, S), e, CLOSED_TOL,
               "3D torus");
  topo_free(t);
}

/* The torus all-reduce runs every dimension at once: on a k^D torus with links of bandwidth B
 * each way and latency alpha, chunk c of S/D reduce-scatters along dims c, c+1, ... with
 * bidirectional rings (k/2 steps a phase, whole shards both ways), all chunks in the same steps.
 * Summed: 2 D (k/2) alpha + 2 (N-1)/N * S / (2 D B), N = k^D: the bandwidth-optimal all-reduce
 * over the 2D links of every chip, with the book's sum |X_i| / 2 hops each way. */
Test(closed_form, torus_allreduce_uses_all_dimensions_at_once)
{
  const double B = 4.5e10, alpha = 1.5e-6;
  int ks[] = {4, 8};
  for (int D = 2; D <= 3; D++)
    for (size_t i = 0; i < G_N_ELEMENTS(ks); i++) {
      int k = ks[i], N = D == 2 ? k * k : k * k * k;
      dimspec d[3] = {{"x", k, TS_SHAPE_RING, B, alpha},
                      {"y", k, TS_SHAPE_RING, B, alpha},
                      {"z", k, TS_SHAPE_RING, B, alpha}};
      ts_topo *t = topo_new(D, d);
      ts_group_shape g = whole(t);
      double sizes[] = {1e3, 1e6, 1.6e9};
      for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++) {
        double S = sizes[s];
        double expect = 2.0 * D * (k / 2) * alpha + 2.0 * (N - 1) / N * S / (2.0 * D * B);
        expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_TORUS, &g, S), expect, CLOSED_TOL,
                     "torus %d^%d S=%g", k, D, S);
        /* Same steps as the dimension-wise schedule, 1/D of its largest phase's bytes. */
        double dimwise = coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_TORUS_DIMWISE, &g, S);
        cr_expect(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_TORUS, &g, S) <= dimwise * (1 + 1e-12),
                  "torus %d^%d S=%g: concurrent slower than dimension-wise", k, D, S);
      }
      /* The plan (4-byte elements) has the same time and 2 D (k/2) steps. */
      double S = 1.6e9;
      g_autoptr(ts_coll_plan) p =
          ts_coll_decompose(t, TS_COLL_ALLREDUCE, TS_ALGO_TORUS, &g, (gint64)(S / 4), 4.0, NULL);
      cr_assert_not_null(p);
      cr_expect_eq(ts_coll_plan_nsteps(p), 2 * D * (k / 2), "torus %d^%d steps", k, D);
      expect_close(ts_coll_plan_time(p),
                   2.0 * D * (k / 2) * alpha + 2.0 * (N - 1) / N * S / (2.0 * D * B), CLOSED_TOL,
                   "torus %d^%d plan", k, D);
      /* Reduce-scatter and all-gather keep the dimension-wise schedule (contiguous shards). */
      expect_close(coll_time(t, TS_COLL_REDUCESCATTER, TS_ALGO_TORUS, &g, S),
                   coll_time(t, TS_COLL_REDUCESCATTER, TS_ALGO_TORUS_DIMWISE, &g, S), 1e-12,
                   "torus %d^%d reducescatter", k, D);
      topo_free(t);
    }
}

static ts_topo *gpu_cluster(void)
{
  dimspec d[2] = {{"node", 8, TS_SHAPE_SWITCH, 3e11, 1e-6},
                  {"net", 32, TS_SHAPE_SWITCH, 2.5e10, 5e-6}};
  return topo_new(2, d);
}

Test(closed_form, hierarchical_gpu_cluster)
{
  ts_topo *t = gpu_cluster();
  ts_group_shape g = whole(t);
  double sizes[] = {1e3, 1e6, 1e9, 4e9};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
    double S = sizes[i];
    double expect = 2 * 7 * (1e-6 + S / 8 / 3e11) + 2 * 31 * (5e-6 + S / 8 / 32 / 2.5e10);
    expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_HIERARCHICAL, &g, S), expect, CLOSED_TOL,
                 "hierarchical S=%g", S);
    /* On switch dims the dimension-wise torus algorithm uses one-way rings too: same time. */
    expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_TORUS_DIMWISE, &g, S), expect, CLOSED_TOL,
                 "torus on switches S=%g", S);
  }
  topo_free(t);
}

Test(closed_form, tree_and_halving_doubling)
{
  const double alpha = 3e-6, B = 2e10, S = 5e7;
  int ns[] = {2, 3, 5, 8, 16, 17};
  for (size_t i = 0; i < G_N_ELEMENTS(ns); i++) {
    int n = ns[i];
    ts_topo *t = topo1(n, TS_SHAPE_SWITCH, B, alpha);
    ts_group_shape g = whole(t);
    int L = (int)ceil(log2(n));
    /* Binomial tree: ceil(log2 n) steps of the whole buffer up, as many down. */
    expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_TREE, &g, S), 2.0 * L * (alpha + S / B),
                 CLOSED_TOL, "tree allreduce n=%d", n);
    expect_close(coll_time(t, TS_COLL_BROADCAST, TS_ALGO_TREE, &g, S), L * (alpha + S / B),
                 CLOSED_TOL, "tree broadcast n=%d", n);
    /* Direct: every port carries n-1 chunks of S/n (Thakur et al. 2005's lower bound shape). */
    expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_DIRECT, &g, S),
                 2.0 * (alpha + (n - 1.0) / n * S / B), CLOSED_TOL, "direct allreduce n=%d", n);
    expect_close(coll_time(t, TS_COLL_BROADCAST, TS_ALGO_DIRECT, &g, S), alpha + (n - 1.0) * S / B,
                 CLOSED_TOL, "direct broadcast n=%d", n);
    /* Pairwise all-to-all: floor(n/2) steps; the bandwidth term is (n-1)/n S/B. */
    double a2a = (n / 2) * alpha + (n - 1.0) / n * S / B;
    expect_close(coll_time(t, TS_COLL_ALLTOALL, TS_ALGO_RING, &g, S), a2a, CLOSED_TOL,
                 "pairwise alltoall n=%d", n);
    if ((n & (n - 1)) == 0) {
      /* Rabenseifner: 2 log2(n) alpha + 2 (n-1)/n S/B (Thakur et al. 2005). */
      expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_HALVING_DOUBLING, &g, S),
                   2.0 * L * alpha + 2.0 * (n - 1.0) / n * S / B, CLOSED_TOL, "hd n=%d", n);
    }
    topo_free(t);
  }
  /* On a ring of 8, tree steps cross 1, 2, 4 links; each step one flow per link. */
  ts_topo *t = topo1(8, TS_SHAPE_RING, B, alpha);
  ts_group_shape g = whole(t);
  expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_TREE, &g, S), 2.0 * (7 * alpha + 3 * S / B),
               CLOSED_TOL, "tree on ring 8");
  /* Halving-doubling on a ring congests: at distance d, d flows share a link, each carrying
   * S/(2d): every step costs d alpha + (S/2)/B, so a half costs 7 alpha + 3 (S/2)/B. */
  expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_HALVING_DOUBLING, &g, S),
               2.0 * (7 * alpha + 1.5 * S / B), CLOSED_TOL, "hd on ring 8");
  topo_free(t);
}

Test(closed_form, strided_pieces_and_mesh)
{
  const double alpha = 1e-6, B = 1e11, S = 1e8;
  /* dp(size 4, stride 4) on a 16-ring: every ring edge is 4 hops, the wrap the short way. */
  ts_topo *t = topo1(16, TS_SHAPE_RING, B, alpha);
  ts_group_shape dp = {1, {{0, 4, 4}}};
  expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_RING, &dp, S),
               2.0 * 3 * (4 * alpha + S / (4 * B)), CLOSED_TOL, "strided ring");
  topo_free(t);
  /* On a mesh the wrap edge goes back along the line: 12 hops, on the other direction. */
  t = topo1(16, TS_SHAPE_MESH, B, alpha);
  expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_RING, &dp, S),
               2.0 * 3 * (12 * alpha + S / (4 * B)), CLOSED_TOL, "strided ring on mesh");
  /* Whole mesh line of 16: the one-way ring's wrap edge is 15 hops. Both ways at once on the
   * open line, every shard runs to both ends, one hop a step: 15 steps of a whole shard, each
   * link direction carrying one (the one-way ring's bandwidth, one hop's latency). */
  ts_group_shape g = whole(t);
  double one_way = 2.0 * 15 * (15 * alpha + S / (16 * B));
  expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_RING, &g, S), one_way, CLOSED_TOL,
               "mesh ring");
  expect_close(coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_BIDIR_RING, &g, S),
               2.0 * 15 * (alpha + S / (16 * B)), CLOSED_TOL, "mesh bidir line");
  /* A unit-stride piece of 4 on a ring of 16 is open too (its closing edge is 3 hops). */
  topo_free(t);
  t = topo1(16, TS_SHAPE_RING, B, alpha);
  ts_group_shape sub = {1, {{0, 4, 1}}};
  expect_close(coll_time(t, TS_COLL_ALLGATHER, TS_ALGO_BIDIR_RING, &sub, S),
               3 * (alpha + S / (4 * B)), CLOSED_TOL, "bidir line on part of a ring");
  topo_free(t);
}

/* The scaling book's measured all-gather (data/published/scaling-book, sharding.md): 33.6 MB
 * gathered over a 4-chip TPU v5e axis without wrap-around, 4.5e10 B/s a link one way, ~1 us a
 * hop. The book's estimate is the edge shards crossing all 3 links, 3 x 8.4 MB / 4.5e10 = 560 us;
 * the ring over the line loads every link direction with the same 3 shards (its closing
 * transfer goes back over the 3 hops, on the other direction), so it costs the book's figure
 * plus 3 steps of 3 hops' latency: 3 (3 alpha + S / (4 B)) = 568 us. Both ways on the line,
 * each shard to both ends: the book's figure plus 3 hops, 3 (alpha + S / (4 B)) = 562 us. */
Test(closed_form, scaling_book_line_allgather)
{
  const double alpha = 1e-6, B = 4.5e10, S = 33554432;
  ts_topo *t = topo1(4, TS_SHAPE_MESH, B, alpha);
  ts_group_shape g = whole(t);
  double ring = coll_time(t, TS_COLL_ALLGATHER, TS_ALGO_RING, &g, S);
  expect_close(ring, 3 * (3 * alpha + S / (4 * B)), CLOSED_TOL, "ring over a 4-chip line");
  cr_expect(fabs(3 * S / (4 * B) - 560e-6) < 2e-6, "the book's 560 us bandwidth term");
  expect_close(coll_time(t, TS_COLL_ALLGATHER, TS_ALGO_BIDIR_RING, &g, S),
               3 * (alpha + S / (4 * B)), CLOSED_TOL, "both ways over a 4-chip line");
  expect_close(coll_time(t, TS_COLL_ALLGATHER, TS_ALGO_TORUS, &g, S), 3 * (alpha + S / (4 * B)),
               CLOSED_TOL, "torus over a 4-chip line");
  /* The latency-bound case (the book's part 2, 128 KiB): 3 hops, not 3 x 3. */
  expect_close(coll_time(t, TS_COLL_ALLGATHER, TS_ALGO_BIDIR_RING, &g, 131072),
               3 * (alpha + 131072 / (4 * B)), CLOSED_TOL, "both ways over a line, 128 KiB");
  /* With the wrap-around, whole shards both ways for 2 hops, the second shard's halves each
   * way (the book's Question 3: "only 2 hops"): 2 alpha + 3 S / (8 B), 281 us (the book's
   * bidirectional estimate, V / (2 W) = 373 us, counts whole shards on both hops). */
  ts_topo *r = topo1(4, TS_SHAPE_RING, B, alpha);
  ts_group_shape gr = whole(r);
  expect_close(coll_time(r, TS_COLL_ALLGATHER, TS_ALGO_BIDIR_RING, &gr, S),
               2 * alpha + 3 * S / (8 * B), CLOSED_TOL, "bidirectional ring with wrap-around");
  topo_free(r);
  topo_free(t);
}

/* ---- NCCL's algorithms and protocols ---- */

static double time_proto(const ts_topo *t, ts_coll_kind k, ts_coll_algo a, ts_coll_proto q,
                         const ts_group_shape *g, double S)
{
  ts_coll_proto got = TS_PROTO_AUTO;
  g_autoptr(GError) e = NULL;
  double v = ts_coll_time_ex(t, k, a, q, g, S, NULL, &got, &e);
  cr_assert(v >= 0.0, "%s: %s", ts_coll_algo_name(a), e ? e->message : "");
  cr_assert_eq(got, q, "protocol %s, asked %s", ts_coll_proto_name(got), ts_coll_proto_name(q));
  return v;
}

/* One switch of n: every ring carries 1/rings of each chunk and the rings share each port, so
 * the ring's closed form holds with NCCL's fixed latency (tuning.cc baseLat, ring) and each
 * protocol's per-hop latency ratio (hwLat, NVLink ring) and bandwidth fraction. */
Test(closed_form, nccl_ring_protocols_on_a_switch)
{
  double B = 2e11, alpha = 3e-6, S = 6e7;
  int sizes[] = {2, 5, 8};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
    int n = sizes[i];
    ts_topo *t = topo1(n, TS_SHAPE_SWITCH, B, alpha);
    ts_group_shape g = whole(t);
    double steps = 2.0 * (n - 1);
    expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S),
                 8.4e-6 + steps * (alpha + S / n / B), CLOSED_TOL, "Simple n=%d", n);
    expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL, &g, S),
                 6.6e-6 + steps * (alpha * 0.6 / 3.4 + S / n / (0.5 * B)), CLOSED_TOL, "LL n=%d",
                 n);
    expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL128, &g, S),
                 14e-6 + steps * (alpha * 1.9 / 3.4 + S / n / (0.92 * B)), CLOSED_TOL, "LL128 n=%d",
                 n);
    expect_close(time_proto(t, TS_COLL_REDUCESCATTER, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S),
                 8.4e-6 + (n - 1) * (alpha + S / n / B), CLOSED_TOL, "RS Simple n=%d", n);
    /* Measured constants replace NCCL's: fixed cost, per-step latency, fraction, local rate. */
    t->dims[0].nccl_base_s[0] = 20e-6;
    t->dims[0].nccl_step_s[0] = 1e-6;
    t->dims[0].ll_bw_frac = 0.1;
    t->dims[0].nccl_local_Bps = 5e11;
    expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL, &g, S),
                 20e-6 + steps * (1e-6 + S / n / (0.1 * B)) + S / 5e11, CLOSED_TOL,
                 "measured LL n=%d", n);
    /* LL's cost per channel: NCCL's ring runs S / (8 B x nRanks) threads, 512 per channel
     * (enqueue.cc, NCCL_LL_THREAD_THRESHOLD), each channel adding the measured cost; LL only. */
    double ll = time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL, &g, S);
    double ll128 = time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL128, &g, S);
    t->dims[0].nccl_ll_channel_s = 2e-6;
    expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL, &g, S),
                 ll + 2e-6 * S / (8.0 * 512 * n), CLOSED_TOL, "LL channels n=%d", n);
    expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL128, &g, S), ll128,
                 CLOSED_TOL, "LL128 has no LL channel cost, n=%d", n);
    t->dims[0].nccl_ll_channel_s = 0.0;
    /* Simple's pieces (nccl_channels): the buffer padded to a multiple of Q = channels x n x 128
     * KiB from Q / 2 up, a quarter of the padded bytes at the link rate added; nothing below Q / 2,
     * nothing for LL128 or the reduce-scatter. */
    double simple = time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S);
    double rs = time_proto(t, TS_COLL_REDUCESCATTER, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S);
    double small = time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, 1e5);
    t->dims[0].nccl_channels = 4;
    double Q = 4.0 * n * 131072.0, pad = ceil(S / Q) * Q - S;
    expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S),
                 simple + 0.25 * pad * steps / n / B, CLOSED_TOL, "Simple pieces n=%d", n);
    expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, 1e5),
                 small, CLOSED_TOL, "below half a piece n=%d", n);
    expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_LL128, &g, S), ll128,
                 CLOSED_TOL, "LL128 has no pieces, n=%d", n);
    expect_close(time_proto(t, TS_COLL_REDUCESCATTER, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S),
                 rs, CLOSED_TOL, "reduce-scatter has no pieces, n=%d", n);
    cr_expect(pad > 0.0, "n=%d: S = %g is not a multiple of Q = %g", n, S, Q);
    t->dims[0].nccl_channels = 0;
    /* The choice is the fastest protocol, and auto on a switch is nccl. */
    ts_coll_proto q = TS_PROTO_AUTO;
    ts_coll_algo a = TS_ALGO_AUTO;
    double best =
        ts_coll_time_ex(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, TS_PROTO_AUTO, &g, S, &a, &q, NULL);
    double m = INFINITY;
    for (int p = TS_PROTO_LL; p <= TS_PROTO_SIMPLE; p++)
      for (int al = TS_ALGO_NCCL_RING; al <= TS_ALGO_NVLS; al++)
        if (al != TS_ALGO_NVLS || p == TS_PROTO_SIMPLE) /* NVLS runs Simple only */
          m = MIN(m, time_proto(t, TS_COLL_ALLREDUCE, (ts_coll_algo)al, (ts_coll_proto)p, &g, S));
    expect_close(best, m, CLOSED_TOL, "nccl choice n=%d (%s %s)", n, ts_coll_algo_name(a),
                 ts_coll_proto_name(q));
    topo_free(t);
  }
}

/* NVLS all-reduce: every step a member's port carries S/K (n+1)/n each way (its chunks to
 * reduce and its own chunk read back by the ld_reduce, its reduced chunk to multicast and the
 * multicast of every chunk, its own included), at the NVLS efficiency; K + 1 pipelined steps. */
Test(closed_form, nvls_allreduce_pipelines_reduce_and_multicast)
{
  double B = 4.5e11, alpha = 1e-6, S = 1e9;
  for (int n = 2; n <= 8; n += 3) {
    ts_topo *t = topo1(n, TS_SHAPE_SWITCH, B, alpha);
    ts_group_shape g = whole(t);
    g_autoptr(ts_coll_plan) p =
        ts_coll_decompose(t, TS_COLL_ALLREDUCE, TS_ALGO_NVLS, &g, (gint64)S, 1.0, NULL);
    cr_assert_not_null(p);
    double K = (double)p->st[0].nseg, f = (n + 1.0) / n;
    cr_assert(K > 1, "n=%d: K=%g", n, K);
    expect_close(ts_coll_plan_time(p), (K + 1) * (alpha + f * S / K / (0.85 * B)), CLOSED_TOL,
                 "nvls n=%d", n);
    /* K minimises (K+1)(alpha + f S/(K b)): K* = sqrt(f S / (b alpha)), floor or ceil. */
    double ks = sqrt(f * S / (0.85 * B * alpha));
    cr_assert(K == floor(ks) || K == ceil(ks), "n=%d: K=%g, K*=%g", n, K, ks);
    /* Reduce-scatter alone: one step, S up (the n - 1 remote chunks and the member's own, read
     * through the switch), S/n down. */
    expect_close(time_proto(t, TS_COLL_REDUCESCATTER, TS_ALGO_NVLS, TS_PROTO_SIMPLE, &g, S),
                 alpha + S / (0.85 * B), CLOSED_TOL, "nvls rs n=%d", n);
    /* All-gather alone: S/n up, S down (the multicast comes back to its sender too). */
    expect_close(time_proto(t, TS_COLL_ALLGATHER, TS_ALGO_NVLS, TS_PROTO_SIMPLE, &g, S),
                 alpha + S / (0.85 * B), CLOSED_TOL, "nvls ag n=%d", n);
    /* Faster than the ring on 5 or more GPUs: (n+1)/n S/(0.85 B) against 2(n-1)/n S/B; slower
     * on 2 (1.5 S/(0.85 B) against S/B). */
    double ring = time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S);
    cr_assert(n < 5 || ts_coll_plan_time(p) < ring, "n=%d: nvls %g, ring %g", n,
              ts_coll_plan_time(p), ring);
    cr_assert(n > 2 || ts_coll_plan_time(p) > ring, "n=%d: nvls %g, ring %g", n,
              ts_coll_plan_time(p), ring);
    topo_free(t);
  }
  /* No in-switch reduction: refused with the key to set. */
  ts_topo *t = topo1(4, TS_SHAPE_SWITCH, B, alpha);
  t->dims[0].in_switch_reduction = FALSE;
  ts_group_shape g = whole(t);
  g_autoptr(GError) e = NULL;
  cr_assert(ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_NVLS, &g, S, NULL, &e) < 0);
  cr_assert(strstr(e->message, "in_switch_reduction = true") != NULL, "%s", e->message);
  topo_free(t);
}

/* Rails: with 8 GPUs per node and large messages NCCL's rings are NIC-bound; two GPUs per NIC
 * halve the bandwidth of the network part, so the time doubles (to the NVSwitch share). */
Test(closed_form, nccl_ring_shared_nics)
{
  dimspec d[2] = {{"node", 8, TS_SHAPE_SWITCH, 1e14, 0}, {"net", 4, TS_SHAPE_SWITCH, 2.5e10, 0}};
  ts_topo *t = topo_new(2, d);
  ts_group_shape g = whole(t);
  double S = 1e10;
  double own = time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S);
  /* NIC-bound: each ring step a NIC carries one ring's chunk, S/(8 n) of each of 8 rings' ... =
   * S/n per step over 2(n-1) steps at 25 GB/s (the NVSwitch hops are free here). */
  int n = 32;
  expect_close(own, 8.4e-6 + 2.0 * (n - 1) * (S / n / 8 / 2.5e10), 1e-9, "own NICs");
  t->dims[1].chips_per_port = 2;
  double shared = time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S);
  expect_close(shared - 8.4e-6, 2.0 * (own - 8.4e-6), 1e-9, "two GPUs per NIC");
  topo_free(t);
}

/* Across nodes NCCL's ring and tree are pipelines of small chunks (tuning.cc times them as
 * latency + size / bandwidth): the ring pays each hop's latency once per step along its path
 * (the snake crosses N node boundaries per turn, each a network hop to the same local GPU),
 * the tree twice its deepest root-to-leaf path (a chain of 7 NVSwitch hops in the node, then
 * the node-level binary tree, depth 2 on 4 nodes), and the bytes at the rate of the most
 * loaded link or the tree's bus-bandwidth cap. */
Test(closed_form, nccl_across_nodes_is_pipelined)
{
  const double a1 = 1e-6, a2 = 5e-6, Bn = 2.5e10, S = 1e9;
  dimspec d[2] = {{"node", 8, TS_SHAPE_SWITCH, 1e14, a1}, {"net", 4, TS_SHAPE_SWITCH, Bn, a2}};
  ts_topo *t = topo_new(2, d);
  ts_group_shape g = whole(t);
  int n = 32, N = 4;
  double hop = (N * a2 + (n - N) * a1) / n;
  expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S),
               8.4e-6 + 2.0 * (n - 1) * (hop + S / n / 8 / Bn), 1e-9, "ring");
  expect_close(time_proto(t, TS_COLL_REDUCESCATTER, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g, S),
               8.4e-6 + (n - 1) * (hop + S / n / 8 / Bn), 1e-9, "ring reduce-scatter");
  /* The tree at its cap (far below the links): 2 (7 a1 + 2 a2) + 2 (n-1)/n S / cap. */
  t->dims[1].nccl_tree_Bps = 1e9;
  expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_TREE, TS_PROTO_SIMPLE, &g, S),
               8.4e-6 + 2.0 * (7 * a1 + 2 * a2) + 2.0 * (n - 1) / n * S / 1e9, 1e-9, "tree");
  /* The cap per protocol and node count follows NCCL's per-channel tree caps (Ampere: Simple
   * perChMaxTreeBw 23.6 on 2 nodes, 17.8 on more; LL128 min(that x 120/128, 20)): the key is
   * Simple's on 3+ nodes, LL128's there is 120/128 of it, on 2 nodes Simple's is 23.6/17.8 of
   * it and LL128's 20/17.8. Slopes between two sizes leave the latencies out. */
  {
    const double S1 = 1e8, S2 = 5e8;
    double ll128 = time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_TREE, TS_PROTO_LL128, &g, S2) -
                   time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_TREE, TS_PROTO_LL128, &g, S1);
    expect_close(ll128, 2.0 * (n - 1) / n * (S2 - S1) / (1e9 * 120.0 / 128.0), 1e-9,
                 "tree LL128 cap, 4 nodes");
    dimspec d2[2] = {{"node", 8, TS_SHAPE_SWITCH, 1e14, a1}, {"net", 2, TS_SHAPE_SWITCH, Bn, a2}};
    ts_topo *t2 = topo_new(2, d2);
    t2->dims[1].nccl_tree_Bps = 1e9;
    ts_group_shape g2 = whole(t2);
    int n2 = 16;
    double simple2 =
        time_proto(t2, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_TREE, TS_PROTO_SIMPLE, &g2, S2) -
        time_proto(t2, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_TREE, TS_PROTO_SIMPLE, &g2, S1);
    expect_close(simple2, 2.0 * (n2 - 1) / n2 * (S2 - S1) / (1e9 * 23.6 / 17.8), 1e-9,
                 "tree Simple cap, 2 nodes");
    double ll128_2 = time_proto(t2, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_TREE, TS_PROTO_LL128, &g2, S2) -
                     time_proto(t2, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_TREE, TS_PROTO_LL128, &g2, S1);
    expect_close(ll128_2, 2.0 * (n2 - 1) / n2 * (S2 - S1) / (1e9 * 20.0 / 17.8), 1e-9,
                 "tree LL128 cap, 2 nodes");
    topo_free(t2);
  }
  /* LL's cost per channel on the tree: its threshold is 8 B per thread, not times nRanks, so
   * S / 4 KiB channels (the largest cost of the dimensions spanned: the node's here). */
  double tll = time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_TREE, TS_PROTO_LL, &g, 65536);
  t->dims[0].nccl_ll_channel_s = 1e-6;
  expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_TREE, TS_PROTO_LL, &g, 65536),
               tll + 1e-6 * 65536 / 4096, 1e-9, "tree LL channels");
  t->dims[0].nccl_ll_channel_s = 0.0;
  /* Inside one node nothing changes: the ring's steps each pay the latency (the classic form). */
  ts_group_shape g0;
  int d0 = 0;
  ts_group_shape_dims(t, &d0, 1, &g0);
  expect_close(time_proto(t, TS_COLL_ALLREDUCE, TS_ALGO_NCCL_RING, TS_PROTO_SIMPLE, &g0, S),
               8.4e-6 + 2.0 * 7 * (a1 + S / 8 / 1e14), 1e-9, "ring in a node");
  topo_free(t);
}

Test(closed_form, pipelined_chain_broadcast)
{
  const double alpha = 1e-6, B = 1e10, S = 1e8;
  int N = 16;
  ts_topo *t = topo1(N, TS_SHAPE_RING, B, alpha);
  ts_group_shape g = whole(t);
  g_autoptr(ts_coll_plan) p =
      ts_coll_decompose(t, TS_COLL_BROADCAST, TS_ALGO_RING, &g, (gint64)S, 1.0, NULL);
  cr_assert_not_null(p);
  gint64 K = p->st[0].nseg;
  double kstar = sqrt((N - 2) * S / (alpha * B));
  cr_expect(fabs((double)K - kstar) <= 1.0, "K=%" G_GINT64_FORMAT ", optimum %g", K, kstar);
  expect_close(ts_coll_plan_time(p), (K + N - 2) * (alpha + S / K / B), CLOSED_TOL, "chain");
  int steps = ts_coll_plan_nsteps(p);
  cr_expect_eq(steps, (int)(K + N - 2));
  topo_free(t);
}

/* ---- routes and point-to-point ---- */

Test(route, dimension_order_shorter_way_and_ports)
{
  dimspec d[3] = {{"x", 8, TS_SHAPE_RING, 1e11, 1e-6},
                  {"y", 4, TS_SHAPE_MESH, 5e10, 2e-6},
                  {"z", 3, TS_SHAPE_SWITCH, 2e10, 5e-6}};
  ts_topo *t = topo_new(3, d);
  g_autoptr(GArray) r = g_array_new(FALSE, FALSE, sizeof(ts_link_id));
  /* (1,0,0) -> (6,3,2): x the short way backwards 1->0->7->6 (3 hops), y +3, z up/down. */
  int src = 1, dst = 6 + 8 * 3 + 32 * 2;
  ts_route(t, src, dst, r);
  ts_link_id want[] = {{1, 0, -1},    {0, 0, -1},     {7, 0, -1},         {6, 1, 1},
                       {6 + 8, 1, 1}, {6 + 16, 1, 1}, {6 + 24, 0 + 2, 1}, {6 + 24 + 64, 2, -1}};
  guint len = r->len;
  cr_assert_eq(len, G_N_ELEMENTS(want), "route length %u", len);
  for (guint i = 0; i < len; i++) {
    ts_link_id l = g_array_index(r, ts_link_id, i);
    cr_expect(l.chip == want[i].chip && l.dim == want[i].dim && l.dir == want[i].dir,
              "link %u: (%d,%d,%d), expected (%d,%d,%d)", i, l.chip, l.dim, l.dir, want[i].chip,
              want[i].dim, want[i].dir);
  }
  /* Ring tie (distance 4 of 8) goes towards +1. */
  g_array_set_size(r, 0);
  ts_route(t, 2, 6, r);
  ts_link_id l0 = g_array_index(r, ts_link_id, 0);
  cr_expect(r->len == 4 && l0.chip == 2 && l0.dir == 1);
  /* p2p: latency of 3 + 3 hops + 1 traversal, bandwidth of the slowest dim crossed. */
  double v = ts_p2p_time(t, src, dst, 1e6);
  expect_close(v, 3e-6 + 3 * 2e-6 + 5e-6 + 1e6 / 2e10, CLOSED_TOL, "p2p");
  double same = ts_p2p_time(t, 5, 5, 1e6);
  cr_expect_eq(same, 0.0);
  topo_free(t);
}

/* ---- group shapes ---- */

Test(group, member_and_base_chip_round_trip)
{
  dimspec d[2] = {{"x", 16, TS_SHAPE_RING, 1e11, 1e-6}, {"y", 6, TS_SHAPE_MESH, 1e11, 1e-6}};
  ts_topo *t = topo_new(2, d);
  ts_group_shape shapes[] = {
      {1, {{0, 4, 1}}},                       /* tp: contiguous blocks of 4 along x */
      {1, {{0, 4, 4}}},                       /* dp: strided by 4 along x */
      {2, {{0, 4, 1}, {0, 4, 4}}},            /* both: all of x */
      {2, {{0, 2, 8}, {1, 3, 2}}},            /* strided on two dims */
      {3, {{0, 2, 1}, {1, 2, 1}, {0, 2, 4}}}, /* interleaved dims */
  };
  for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++) {
    const ts_group_shape *g = &shapes[s];
    g_autoptr(GError) e = NULL;
    cr_assert(ts_group_shape_valid(t, g, &e), "shape %zu: %s", s, e ? e->message : "");
    int n = ts_group_size(g);
    int groups = t->nchips / n;
    int *seen = g_new0(int, t->nchips);
    for (int c = 0; c < t->nchips; c++) {
      int m = -1;
      int base = ts_group_base_chip(t, g, c, &m);
      int back = ts_group_member_chip(t, g, base, m);
      cr_expect_eq(back, c, "shape %zu chip %d: base %d member %d -> %d", s, c, base, m, back);
      int b0 = -1;
      int bb = ts_group_base_chip(t, g, base, &b0);
      cr_expect(bb == base && b0 == 0, "shape %zu: base %d is its own member 0", s, base);
      seen[base]++;
    }
    int nbases = 0;
    for (int c = 0; c < t->nchips; c++)
      if (seen[c] > 0) {
        nbases++;
        cr_expect_eq(seen[c], n, "shape %zu: group at %d has %d chips", s, c, seen[c]);
      }
    cr_expect_eq(nbases, groups, "shape %zu: groups tile the array", s);
    g_free(seen);
  }
  /* The brief's example: x(16) = tp(4, stride 1) x dp(4, stride 4); chip 13 is tp member 1 of
   * the block at 12 and dp member 3 of the group at 1. */
  int m;
  ts_group_shape tp = {1, {{0, 4, 1}}}, dp = {1, {{0, 4, 4}}};
  int b = ts_group_base_chip(t, &tp, 13, &m);
  cr_expect(b == 12 && m == 1);
  b = ts_group_base_chip(t, &dp, 13, &m);
  cr_expect(b == 1 && m == 3);
  topo_free(t);
}

Test(group, invalid_shapes_name_the_problem)
{
  dimspec d[2] = {{"x", 16, TS_SHAPE_RING, 1e11, 1e-6}, {"y", 6, TS_SHAPE_MESH, 1e11, 1e-6}};
  ts_topo *t = topo_new(2, d);
  struct {
    ts_group_shape g;
    const char *needle;
  } bad[] = {
      {{1, {{2, 2, 1}}}, "dim=2"},           {{1, {{0, 0, 1}}}, "size=0"},
      {{1, {{1, 4, 2}}}, "size*stride=8"},   {{2, {{0, 4, 1}, {0, 2, 2}}}, "overlap"},
      {{2, {{0, 2, 1}, {0, 2, 3}}}, "nest"}, {{-1, {{0, 1, 1}}}, "pieces"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) e = NULL;
    gboolean ok = ts_group_shape_valid(t, &bad[i].g, &e);
    cr_expect(!ok, "bad shape %zu accepted", i);
    if (!ok) {
      cr_expect(e != NULL && e->domain == TS_ERROR && e->code == TS_ERROR_INVALID);
      cr_expect(strstr(e->message, bad[i].needle) != NULL && strchr(e->message, '\n') == NULL,
                "shape %zu message '%s' lacks '%s'", i, e->message, bad[i].needle);
    }
    g_autoptr(GError) e2 = NULL;
    double v = ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_RING, &bad[i].g, 1e6, NULL, &e2);
    cr_expect(v < 0.0 && e2 != NULL, "ts_coll_time accepted bad shape %zu", i);
  }
  topo_free(t);
}

/* ---- numeric execution ---- */

typedef struct {
  int nchecked;
} run_stats;

/* Runs every step on real buffers: each step reads all its sources, then applies. Checks
 * ranges, that no element is written twice by COPY (or COPY and REDUCE) in one step, and
 * the result against the serial answer: exact for copies, 1e-12 relative for sums. */
static void check_numeric(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                          const ts_group_shape *g, gint64 count, GRand *rng, const char *what)
{
  g_autoptr(GError) e = NULL;
  g_autoptr(ts_coll_plan) p = ts_coll_decompose(t, kind, algo, g, count, 8.0, &e);
  cr_assert_not_null(p, "%s: decompose failed: %s", what, e ? e->message : "?");
  int n = ts_group_size(g);
  gint64 C = count;
  gsize tot = (gsize)n * (gsize)MAX(C, 1);
  double *buf = g_new(double, tot), *orig = g_new(double, tot), *snap = g_new(double, tot);
  guint8 *mark = g_new(guint8, tot);
  gint64 *soff = g_new(gint64, n), *scnt = g_new(gint64, n);
  for (int m = 0; m < n; m++)
    ts_coll_shard(p, m, &soff[m], &scnt[m]);
  gboolean sharded =
      kind == TS_COLL_ALLREDUCE || kind == TS_COLL_REDUCESCATTER || kind == TS_COLL_ALLGATHER;
  if (sharded) {
    /* Shards partition the buffer. */
    gint64 sum = 0;
    guint8 *cover = g_new0(guint8, MAX(C, 1));
    for (int m = 0; m < n; m++) {
      sum += scnt[m];
      for (gint64 i = soff[m]; i < soff[m] + scnt[m]; i++)
        cover[i]++;
    }
    cr_expect_eq(sum, C, "%s: shard counts sum to %" G_GINT64_FORMAT, what, sum);
    for (gint64 i = 0; i < C; i++)
      cr_expect_eq(cover[i], 1, "%s: element %" G_GINT64_FORMAT " in %d shards", what, i, cover[i]);
    g_free(cover);
  }
  for (gsize i = 0; i < tot; i++)
    orig[i] = g_rand_double_range(rng, -1.0, 1.0);
  if (kind == TS_COLL_ALLGATHER) /* only the shard is input: poison the rest */
    for (int m = 0; m < n; m++)
      for (gint64 i = 0; i < C; i++)
        if (i < soff[m] || i >= soff[m] + scnt[m])
          orig[(gsize)m * C + i] = NAN;
  memcpy(buf, orig, sizeof(double) * tot);
  g_autoptr(GArray) xs = g_array_new(FALSE, FALSE, sizeof(ts_xfer));
  int nsteps = ts_coll_plan_nsteps(p);
  gboolean ranges_ok = TRUE, conflicts_ok = TRUE;
  for (int s = 0; s < nsteps; s++) {
    g_array_set_size(xs, 0);
    ts_coll_plan_step(p, s, xs);
    memcpy(snap, buf, sizeof(double) * tot);
    memset(mark, 0, tot);
    for (guint k = 0; k < xs->len; k++) {
      const ts_xfer *x = &g_array_index(xs, ts_xfer, k);
      if (x->src < 0 || x->src >= n || x->dst < 0 || x->dst >= n || x->src == x->dst ||
          x->count <= 0 || x->src_off < 0 || x->dst_off < 0 || x->src_off + x->count > C ||
          x->dst_off + x->count > C) {
        ranges_ok = FALSE;
        continue;
      }
      for (gint64 i = 0; i < x->count; i++) {
        gsize di = (gsize)x->dst * C + x->dst_off + i, si = (gsize)x->src * C + x->src_off + i;
        guint8 want = x->op == TS_XFER_COPY ? 1 : 2;
        if (mark[di] == 1 || (mark[di] == 2 && want == 1))
          conflicts_ok = FALSE;
        mark[di] = want;
        if (x->op == TS_XFER_COPY)
          buf[di] = snap[si];
        else
          buf[di] += snap[si];
      }
    }
  }
  cr_expect(ranges_ok, "%s: a transfer is out of range", what);
  cr_expect(conflicts_ok, "%s: an element is written by two copies in one step", what);
  int bad = 0;
  for (int m = 0; m < n && bad < 3; m++) {
    for (gint64 i = 0; i < C && bad < 3; i++) {
      double got = buf[(gsize)m * C + i], want = NAN, tol = 0.0;
      gboolean check = TRUE;
      switch (kind) {
      case TS_COLL_ALLREDUCE:
      case TS_COLL_REDUCESCATTER: {
        if (kind == TS_COLL_REDUCESCATTER && (i < soff[m] || i >= soff[m] + scnt[m])) {
          check = FALSE;
          break;
        }
        double sum = 0.0, mag = 0.0;
        for (int j = 0; j < n; j++) {
          sum += orig[(gsize)j * C + i];
          mag += fabs(orig[(gsize)j * C + i]);
        }
        want = sum;
        tol = 1e-12 * mag;
        break;
      }
      case TS_COLL_ALLGATHER:
        for (int j = 0; j < n; j++)
          if (i >= soff[j] && i < soff[j] + scnt[j])
            want = orig[(gsize)j * C + i];
        break;
      case TS_COLL_ALLTOALL: {
        gint64 bs = C / n;
        if (i >= bs * n) {
          want = orig[(gsize)m * C + i]; /* the tail past n whole blocks stays */
        } else {
          gint64 src = i / bs, within = i % bs;
          want = orig[(gsize)src * C + (gsize)m * bs + within];
        }
        break;
      }
      default:
        want = orig[i];
        break;
      }
      if (check && !(fabs(got - want) <= tol)) {
        bad++;
        cr_expect(FALSE, "%s: member %d element %" G_GINT64_FORMAT ": %.17g, expected %.17g", what,
                  m, i, got, want);
      }
    }
  }
  g_free(buf);
  g_free(orig);
  g_free(snap);
  g_free(mark);
  g_free(soff);
  g_free(scnt);
}

static gboolean pipelined(const ts_stage *st)
{
  return st->type == TS_ST_CHAIN || st->type == TS_ST_PTREE || st->type == TS_ST_NVLS_AR;
}

/* Checks every step's transfers against the flows the analytic model times for that step:
 * the same (src, dst) pairs, and bytes equal up to rounding of uneven chunks. Also checks the
 * step evaluator against the link-by-link reference, and that timing one representative line
 * equals timing all of them. */
static void check_structure(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                            const ts_group_shape *g, const char *what)
{
  int n = ts_group_size(g);
  gint64 C = 256 * (gint64)n + 7; /* uneven, and large enough that no chunk is empty */
  g_autoptr(ts_coll_plan) p = ts_coll_decompose(t, kind, algo, g, C, 2.0, NULL);
  cr_assert_not_null(p);
  g_autoptr(GArray) xs = g_array_new(FALSE, FALSE, sizeof(ts_xfer));
  g_autoptr(GArray) fl = g_array_new(FALSE, FALSE, sizeof(ts_flow));
  g_autoptr(GHashTable) pairs = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  ts_eval *ev = ts_eval_new(&p->net);
  int P = g->npieces;
  for (int si = 0; si < p->nstages; si++) {
    const ts_stage *st = &p->st[si];
    for (int tt = 0; tt < st->nsteps; tt++) {
      g_array_set_size(xs, 0);
      g_array_set_size(fl, 0);
      g_hash_table_remove_all(pairs);
      ts_coll_plan_step(p, st->first_step + tt, xs);
      ts_coll_stage_flows(p, st, tt, TRUE, fl);
      /* value[0]: transfer bytes, [1]: flow bytes, [2]: transfers */
      for (guint k = 0; k < xs->len; k++) {
        const ts_xfer *x = &g_array_index(xs, ts_xfer, k);
        gint64 key = (gint64)p->chip[x->src] * 1000003 + p->chip[x->dst];
        double *v = g_hash_table_lookup(pairs, &key);
        if (v == NULL) {
          gint64 *kp = g_new(gint64, 1);
          *kp = key;
          v = g_new0(double, 3);
          g_hash_table_insert(pairs, kp, v);
        }
        v[0] += x->count * 2.0;
        v[2] += 1;
      }
      for (guint k = 0; k < fl->len; k++) {
        const ts_flow *f = &g_array_index(fl, ts_flow, k);
        gint64 key = (gint64)f->src * 1000003 + f->dst;
        double *v = g_hash_table_lookup(pairs, &key);
        if (v == NULL) {
          /* Pipelined stages' fill and drain steps are timed as full steps: idle edges are
           * fine. */
          cr_expect(pipelined(st), "%s: step %d: flow %d->%d has no transfer", what,
                    st->first_step + tt, f->src, f->dst);
          continue;
        }
        v[1] += f->bytes;
      }
      GHashTableIter it;
      gpointer kp, vp;
      g_hash_table_iter_init(&it, pairs);
      while (g_hash_table_iter_next(&it, &kp, &vp)) {
        const double *v = vp;
        double tol = 2.0 * (v[2] * (P + 3) + n);
        /* A pipelined step in fill or drain moves fewer segments than the steady state
         * timed for it; never more. */
        cr_expect(pipelined(st) ? v[0] <= v[1] + tol : fabs(v[0] - v[1]) <= tol,
                  "%s: step %d pair %" G_GINT64_FORMAT ": transfers %g bytes, flows %g", what,
                  st->first_step + tt, *(gint64 *)kp, v[0], v[1]);
      }
      if (tt < 3) {
        double fast = ts_eval_step(ev, (ts_flow *)(void *)fl->data, (int)fl->len);
        double ref = ts_eval_step_reference(t, (ts_flow *)(void *)fl->data, (int)fl->len);
        cr_expect(rel_err(fast, ref) <= 1e-9, "%s: step %d: evaluator %.17g, reference %.17g", what,
                  st->first_step + tt, fast, ref);
      }
    }
  }
  ts_eval_free(ev);
  double slab = ts_coll_plan_time_full(p, FALSE), full = ts_coll_plan_time_full(p, TRUE);
  cr_expect(rel_err(slab, full) <= 1e-12, "%s: one line %.17g, all lines %.17g", what, slab, full);
}

/* Sum over members of bytes_sent, as multiples of S, for one algorithm (known totals). */
static void check_bytes_sent(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                             const ts_group_shape *g, const char *what)
{
  int n = ts_group_size(g);
  /* Divisible by every chunking used (n, 2n for bidirectional halves, chain segments aside). */
  gint64 C = 2 * (gint64)n * n * 3;
  double eb = 4.0, S = C * eb;
  g_autoptr(ts_coll_plan) p = ts_coll_decompose(t, kind, algo, g, C, eb, NULL);
  cr_assert_not_null(p);
  double total = 0.0;
  for (int m = 0; m < n; m++)
    total += ts_coll_plan_bytes_sent(p, m);
  double expect = -1.0;
  double half = 0.0; /* per member, one reduce-scatter or all-gather, in units of S */
  int tp[TS_MAX_PIECES], ntp = 0;
  for (int k = 0; k < g->npieces; k++)
    if (g->p[k].size >= 2)
      tp[ntp++] = k;
  if (algo == TS_ALGO_TORUS && kind == TS_COLL_ALLREDUCE && ntp >= 2) {
    /* 1/ntp of the buffer per chunk, chunk c through the pieces in rotated order. */
    for (int c = 0; c < ntp; c++) {
      double seg = 1.0 / ntp;
      for (int i = 0; i < ntp; i++) {
        int k = tp[(c + i) % ntp];
        half += seg * (g->p[k].size - 1.0) / g->p[k].size;
        seg /= g->p[k].size;
      }
    }
  } else if (algo == TS_ALGO_TORUS || algo == TS_ALGO_TORUS_DIMWISE ||
             algo == TS_ALGO_HIERARCHICAL) {
    double seg = 1.0;
    for (int k = 0; k < g->npieces; k++) {
      half += seg * (g->p[k].size - 1.0) / g->p[k].size;
      seg /= g->p[k].size;
    }
  } else {
    half = (n - 1.0) / n;
  }
  switch (kind) {
  case TS_COLL_ALLREDUCE:
    /* Trees: every member but the root sends its buffer up once and receives it back. */
    expect =
        algo == TS_ALGO_TREE || algo == TS_ALGO_NCCL_TREE ? 2.0 * (n - 1) * S : 2.0 * n * half * S;
    break;
  case TS_COLL_REDUCESCATTER:
  case TS_COLL_ALLGATHER:
    expect = n * half * S;
    break;
  case TS_COLL_ALLTOALL: {
    /* Pairwise and direct send (n-1)/n S per member; dimension-wise all of S per phase. */
    double a = (n - 1.0) / n;
    if (algo == TS_ALGO_TORUS || algo == TS_ALGO_TORUS_DIMWISE || algo == TS_ALGO_HIERARCHICAL) {
      a = 0.0;
      for (int k = 0; k < g->npieces; k++)
        a += (g->p[k].size - 1.0) / g->p[k].size;
    }
    expect = n * a * S;
    break;
  }
  default: /* every member but the root receives the buffer exactly once */
    expect = (n - 1.0) * S;
    break;
  }
  expect_close(total, expect, 1e-12, "%s: sum of bytes_sent", what);
}

static const ts_coll_algo all_algos[] = {
    TS_ALGO_RING,         TS_ALGO_BIDIR_RING,   TS_ALGO_TORUS,
    TS_ALGO_HIERARCHICAL, TS_ALGO_TREE,         TS_ALGO_HALVING_DOUBLING,
    TS_ALGO_DIRECT,       TS_ALGO_NCCL_RING,    TS_ALGO_NCCL_TREE,
    TS_ALGO_NVLS,         TS_ALGO_TORUS_DIMWISE};

/* What auto chooses among: NCCL's algorithms on switch dims (all-to-all direct, broadcast
 * ring), every classic algorithm elsewhere. */
static gboolean auto_candidate(const ts_topo *t, ts_coll_kind k, ts_coll_algo a)
{
  gboolean sw = TRUE;
  for (int d = 0; d < t->ndims; d++)
    sw = sw && (t->dims[d].shape == TS_SHAPE_SWITCH || t->dims[d].size == 1);
  if (!sw)
    return a <= TS_ALGO_DIRECT || a == TS_ALGO_TORUS_DIMWISE;
  switch (k) {
  case TS_COLL_ALLREDUCE:
    return a == TS_ALGO_NCCL_RING || a == TS_ALGO_NCCL_TREE || a == TS_ALGO_NVLS;
  case TS_COLL_REDUCESCATTER:
  case TS_COLL_ALLGATHER:
    return a == TS_ALGO_NCCL_RING || a == TS_ALGO_NVLS;
  case TS_COLL_ALLTOALL:
    return a == TS_ALGO_DIRECT;
  default:
    return a == TS_ALGO_RING;
  }
}

static gboolean applies(const ts_topo *t, ts_coll_kind k, ts_coll_algo a, const ts_group_shape *g)
{
  g_autoptr(ts_coll_plan) p = ts_coll_decompose(t, k, a, g, 10, 8.0, NULL);
  return p != NULL;
}

/* Every valid (kind, algorithm) on a topology and shape: numeric, structure, bytes. */
static int check_all(const ts_topo *t, const ts_group_shape *g, GRand *rng, const char *label)
{
  int n = ts_group_size(g), runs = 0;
  gint64 counts[] = {0, 1, 2 * n + 1, 5 * n + 3, 16 * n};
  for (int k = 0; k < TS_COLL_NKINDS; k++)
    for (size_t a = 0; a < G_N_ELEMENTS(all_algos); a++) {
      if (!applies(t, (ts_coll_kind)k, all_algos[a], g))
        continue;
      for (size_t c = 0; c < G_N_ELEMENTS(counts); c++) {
        g_autofree char *what = g_strdup_printf("%s %s %s n=%d count=%" G_GINT64_FORMAT, label,
                                                ts_coll_kind_name((ts_coll_kind)k),
                                                ts_coll_algo_name(all_algos[a]), n, counts[c]);
        check_numeric(t, (ts_coll_kind)k, all_algos[a], g, counts[c], rng, what);
      }
      g_autofree char *what =
          g_strdup_printf("%s %s %s n=%d", label, ts_coll_kind_name((ts_coll_kind)k),
                          ts_coll_algo_name(all_algos[a]), n);
      check_structure(t, (ts_coll_kind)k, all_algos[a], g, what);
      check_bytes_sent(t, (ts_coll_kind)k, all_algos[a], g, what);
      runs++;
    }
  return runs;
}

Test(numeric, single_dimension_every_size_and_shape)
{
  GRand *rng = g_rand_new_with_seed(12345);
  int sizes[] = {1, 2, 3, 5, 7, 8, 12, 16};
  ts_shape shapes[] = {TS_SHAPE_RING, TS_SHAPE_MESH, TS_SHAPE_SWITCH};
  for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++)
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
      ts_topo *t = topo1(sizes[i], shapes[s], 1e10, 1e-6);
      ts_group_shape g = whole(t);
      int runs = check_all(t, &g, rng, shape_label(shapes[s]));
      cr_expect(runs >= 5, "only %d algorithms ran for n=%d", runs, sizes[i]);
      topo_free(t);
    }
  g_rand_free(rng);
}

Test(numeric, multi_piece_shapes)
{
  GRand *rng = g_rand_new_with_seed(777);
  /* 2D ring x mesh, 3D mixed, strided and nested pieces, switch hierarchies. */
  dimspec d2[2] = {{"x", 3, TS_SHAPE_RING, 1e11, 1e-6}, {"y", 4, TS_SHAPE_MESH, 5e10, 2e-6}};
  dimspec d3[3] = {{"x", 2, TS_SHAPE_RING, 1e11, 1e-6},
                   {"y", 3, TS_SHAPE_SWITCH, 5e10, 2e-6},
                   {"z", 2, TS_SHAPE_MESH, 2e10, 3e-6}};
  dimspec dx[2] = {{"x", 16, TS_SHAPE_RING, 1e11, 1e-6}, {"y", 2, TS_SHAPE_RING, 1e11, 1e-6}};
  dimspec dg[2] = {{"node", 4, TS_SHAPE_SWITCH, 3e11, 1e-6},
                   {"net", 4, TS_SHAPE_SWITCH, 2.5e10, 5e-6}};
  struct {
    int ndims;
    const dimspec *d;
    ts_group_shape g;
    const char *label;
  } cases[] = {
      {2, d2, {2, {{0, 3, 1}, {1, 4, 1}}}, "3x4 ring*mesh"},
      {2, d2, {2, {{1, 4, 1}, {0, 3, 1}}}, "4x3 y first"},
      {2, d2, {1, {{1, 2, 2}}}, "y stride 2"},
      {3, d3, {3, {{0, 2, 1}, {1, 3, 1}, {2, 2, 1}}}, "2x3x2"},
      {3, d3, {2, {{1, 3, 1}, {2, 2, 1}}}, "switch x mesh"},
      {2, dx, {2, {{0, 4, 1}, {0, 4, 4}}}, "tp x dp on x16"},
      {2, dx, {1, {{0, 4, 4}}}, "dp stride 4"},
      {2, dx, {2, {{0, 2, 8}, {1, 2, 1}}}, "x stride 8 by y"},
      {2, dx, {3, {{0, 2, 1}, {1, 2, 1}, {0, 2, 4}}}, "interleaved"},
      {2, dg, {2, {{0, 4, 1}, {1, 4, 1}}}, "gpu 4x4"},
      {2, dg, {2, {{0, 2, 1}, {1, 3, 1}}}, "gpu 2x3 partial"},
      {2, dg, {2, {{0, 4, 1}, {1, 4, 1}}}, "gpu 4x4 two GPUs per NIC"},
      {2, dg, {2, {{0, 2, 2}, {1, 4, 1}}}, "gpu stride 2 x 4, two GPUs per NIC"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    ts_topo *t = topo_new(cases[i].ndims, cases[i].d);
    if (strstr(cases[i].label, "per NIC") != NULL)
      t->dims[1].chips_per_port = 2;
    g_autoptr(GError) e = NULL;
    cr_assert(ts_group_shape_valid(t, &cases[i].g, &e), "%s: %s", cases[i].label,
              e ? e->message : "");
    int runs = check_all(t, &cases[i].g, rng, cases[i].label);
    cr_expect(runs >= 5, "%s: only %d algorithms ran", cases[i].label, runs);
    topo_free(t);
  }
  g_rand_free(rng);
}

Test(numeric, fuzz_200_random_shapes)
{
  GRand *rng = g_rand_new_with_seed(20240611);
  ts_shape shapes[] = {TS_SHAPE_RING, TS_SHAPE_MESH, TS_SHAPE_SWITCH};
  int done = 0;
  for (int it = 0; it < 200; it++) {
    int ndims = g_rand_int_range(rng, 1, 4);
    dimspec d[3];
    static const char *names[] = {"x", "y", "z"};
    for (int k = 0; k < ndims; k++) {
      d[k].name = names[k];
      d[k].size = g_rand_int_range(rng, 1, 7);
      d[k].shape = shapes[g_rand_int_range(rng, 0, 3)];
      d[k].bw_Bps = g_rand_double_range(rng, 1e9, 1e11);
      d[k].lat_s = g_rand_double_range(rng, 0.0, 5e-6);
    }
    ts_topo *t = topo_new(ndims, d);
    /* Up to two pieces per dim: a coarse one nested over a fine one, in random order. */
    ts_group_shape g = {0};
    for (int k = 0; k < ndims; k++) {
      int n = d[k].size;
      int a = 1;
      for (int f = n; f >= 1; f--)
        if (n % f == 0 && g_rand_boolean(rng)) {
          a = f;
          break;
        }
      int b = n / a;
      if (g_rand_int_range(rng, 0, 4) == 0)
        b = 1; /* a partial dim */
      if (a > 1 || g_rand_boolean(rng))
        g.p[g.npieces++] = (ts_piece){k, a, 1};
      if (b > 1)
        g.p[g.npieces++] = (ts_piece){k, b, a};
    }
    for (int k = g.npieces - 1; k > 0; k--) { /* shuffle the piece order */
      int j = g_rand_int_range(rng, 0, k + 1);
      ts_piece tmp = g.p[k];
      g.p[k] = g.p[j];
      g.p[j] = tmp;
    }
    g_autoptr(GError) e = NULL;
    cr_assert(ts_group_shape_valid(t, &g, &e), "fuzz %d: %s", it, e ? e->message : "");
    ts_coll_kind kind = (ts_coll_kind)g_rand_int_range(rng, 0, TS_COLL_NKINDS);
    ts_coll_algo algo = all_algos[g_rand_int_range(rng, 0, G_N_ELEMENTS(all_algos))];
    gint64 count = g_rand_int_range(rng, 0, 60);
    if (applies(t, kind, algo, &g)) {
      g_autofree char *what =
          g_strdup_printf("fuzz %d (%s %s, %d members, %d pieces)", it, ts_coll_kind_name(kind),
                          ts_coll_algo_name(algo), ts_group_size(&g), g.npieces);
      check_numeric(t, kind, algo, &g, count, rng, what);
      check_structure(t, kind, algo, &g, what);
      check_bytes_sent(t, kind, algo, &g, what);
      /* Plan time and ts_coll_time agree for the same bytes (1-byte elements). */
      g_autoptr(ts_coll_plan) p = ts_coll_decompose(t, kind, algo, &g, 1000, 1.0, NULL);
      double tp = ts_coll_plan_time(p), tc = coll_time(t, kind, algo, &g, 1000.0);
      cr_expect(rel_err(tp, tc) <= 1e-12, "%s: plan %.17g, ts_coll_time %.17g", what, tp, tc);
      done++;
    }
    topo_free(t);
  }
  cr_expect(done >= 100, "only %d of 200 fuzz cases applied", done);
  g_rand_free(rng);
}

/* ---- choice, errors, names ---- */

Test(choice, auto_picks_the_fastest)
{
  ts_topo *tops[3];
  dimspec d2[2] = {{"x", 8, TS_SHAPE_RING, 1e11, 1e-6}, {"y", 8, TS_SHAPE_RING, 5e10, 1e-6}};
  tops[0] = topo_new(2, d2);
  tops[1] = gpu_cluster();
  tops[2] = topo1(12, TS_SHAPE_SWITCH, 2e10, 3e-6);
  double sizes[] = {8.0, 4e3, 1e6, 1e9};
  for (int i = 0; i < 3; i++) {
    ts_group_shape g = whole(tops[i]);
    for (int k = 0; k < TS_COLL_NKINDS; k++)
      for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++) {
        ts_coll_algo chosen = TS_ALGO_AUTO;
        double best =
            ts_coll_time(tops[i], (ts_coll_kind)k, TS_ALGO_AUTO, &g, sizes[s], &chosen, NULL);
        cr_assert(best >= 0.0);
        double min = INFINITY;
        for (size_t a = 0; a < G_N_ELEMENTS(all_algos); a++) {
          if (!auto_candidate(tops[i], (ts_coll_kind)k, all_algos[a]))
            continue;
          double v = ts_coll_time(tops[i], (ts_coll_kind)k, all_algos[a], &g, sizes[s], NULL, NULL);
          if (v >= 0.0)
            min = MIN(min, v);
        }
        cr_expect_eq(best, min, "topo %d %s S=%g: auto %.17g, min %.17g", i,
                     ts_coll_kind_name((ts_coll_kind)k), sizes[s], best, min);
        double again = ts_coll_time(tops[i], (ts_coll_kind)k, chosen, &g, sizes[s], NULL, NULL);
        cr_expect_eq(again, best, "chosen algorithm %s reproduces the time",
                     ts_coll_algo_name(chosen));
      }
  }
  for (int i = 0; i < 3; i++)
    topo_free(tops[i]);
}

/* ts_eval_step's remembered routes (active between ts_coll_memo_begin and _end) change no
 * time by a bit: every algorithm and size, asked in an order where later sizes reuse earlier
 * sizes' routes, against the same times with nothing remembered. */
Test(memo, remembered_routes_give_the_same_bits)
{
  ts_topo *tops[3];
  dimspec d2[2] = {{"x", 8, TS_SHAPE_RING, 1e11, 1e-6}, {"y", 6, TS_SHAPE_MESH, 5e10, 2e-6}};
  tops[0] = topo_new(2, d2);
  tops[1] = gpu_cluster();
  tops[2] = topo1(12, TS_SHAPE_SWITCH, 2e10, 3e-6);
  double sizes[] = {8.0, 4e3, 3e5 + 7.0, 1e6, 1.23456789e9};
  enum { NS = G_N_ELEMENTS(sizes), NA = G_N_ELEMENTS(all_algos) };
  static double plain[3][TS_COLL_NKINDS][NA][NS];
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1)
      ts_coll_memo_begin(NULL, 0);
    int compared = 0;
    for (int i = 0; i < 3; i++) {
      ts_group_shape g = whole(tops[i]);
      for (int k = 0; k < TS_COLL_NKINDS; k++)
        for (int a = 0; a < NA; a++)
          for (int r = 0; r < 2 * NS; r++) {
            int s = r % NS; /* every size twice in the remembering pass */
            double v =
                ts_coll_time(tops[i], (ts_coll_kind)k, all_algos[a], &g, sizes[s], NULL, NULL);
            if (pass == 0) {
              plain[i][k][a][s] = v;
              continue;
            }
            cr_expect(memcmp(&v, &plain[i][k][a][s], sizeof v) == 0,
                      "topo %d %s %s S=%g: remembered routes %.17g, routed afresh %.17g", i,
                      ts_coll_kind_name((ts_coll_kind)k), ts_coll_algo_name(all_algos[a]), sizes[s],
                      v, plain[i][k][a][s]);
            compared += v >= 0.0;
          }
    }
    if (pass == 1) {
      ts_coll_memo_end();
      cr_expect(compared > 200, "only %d times compared", compared);
    }
  }
  for (int i = 0; i < 3; i++)
    topo_free(tops[i]);
}

Test(choice, invalid_combinations_are_refused_with_a_message)
{
  ts_topo *t = topo1(6, TS_SHAPE_RING, 1e11, 1e-6);
  ts_group_shape g = whole(t);
  struct {
    ts_coll_kind kind;
    ts_coll_algo algo;
    const char *needle;
  } bad[] = {
      {TS_COLL_ALLREDUCE, TS_ALGO_HALVING_DOUBLING, "power-of-two"},
      {TS_COLL_REDUCESCATTER, TS_ALGO_TREE, "does not implement reducescatter"},
      {TS_COLL_ALLGATHER, TS_ALGO_TREE, "does not implement allgather"},
      {TS_COLL_ALLTOALL, TS_ALGO_TREE, "does not implement alltoall"},
      {TS_COLL_ALLTOALL, TS_ALGO_BIDIR_RING, "does not implement alltoall"},
      {TS_COLL_ALLTOALL, TS_ALGO_HALVING_DOUBLING, "does not implement alltoall"},
      {TS_COLL_BROADCAST, TS_ALGO_HALVING_DOUBLING, "does not implement broadcast"},
      {TS_COLL_ALLREDUCE, TS_ALGO_AUTO, "concrete algorithm"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) e = NULL;
    ts_coll_plan *p = ts_coll_decompose(t, bad[i].kind, bad[i].algo, &g, 100, 4.0, &e);
    cr_expect_null(p, "case %zu accepted", i);
    ts_coll_plan_free(p);
    cr_expect(e != NULL && e->domain == TS_ERROR && e->code == TS_ERROR_INVALID);
    if (e != NULL)
      cr_expect(strstr(e->message, bad[i].needle) != NULL && strchr(e->message, '\n') == NULL,
                "case %zu: '%s' lacks '%s'", i, e->message, bad[i].needle);
    if (bad[i].algo != TS_ALGO_AUTO) {
      g_autoptr(GError) e2 = NULL;
      double v = ts_coll_time(t, bad[i].kind, bad[i].algo, &g, 1e6, NULL, &e2);
      cr_expect(v < 0.0 && e2 != NULL && e2->code == TS_ERROR_INVALID, "case %zu time", i);
    }
  }
  g_autoptr(GError) e = NULL;
  cr_expect_null(ts_coll_decompose(t, TS_COLL_ALLREDUCE, TS_ALGO_RING, &g, -1, 4.0, &e));
  g_autoptr(GError) e3 = NULL;
  double v = ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_RING, &g, NAN, NULL, &e3);
  cr_expect(v < 0.0 && e3 != NULL);
  topo_free(t);
  /* Direct over 1024 members is beyond the analytic model's work limit; auto still answers. */
  t = topo1(1024, TS_SHAPE_SWITCH, 1e11, 1e-6);
  g = whole(t);
  g_autoptr(GError) e4 = NULL;
  v = ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_DIRECT, &g, 1e6, NULL, &e4);
  cr_expect(v < 0.0 && e4 != NULL && strstr(e4->message, "limit") != NULL);
  ts_coll_algo chosen;
  v = ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, &g, 1e6, &chosen, NULL);
  cr_expect(v > 0.0 && chosen != TS_ALGO_DIRECT);
  topo_free(t);
}

Test(names, round_trip_and_busbw)
{
  for (int k = 0; k < TS_COLL_NKINDS; k++) {
    int back = ts_coll_kind_parse(ts_coll_kind_name((ts_coll_kind)k));
    cr_expect_eq(back, k);
  }
  for (int a = 0; a < TS_ALGO_NALGOS; a++) {
    int back = ts_coll_algo_parse(ts_coll_algo_name((ts_coll_algo)a));
    cr_expect_eq(back, a);
  }
  int unknown = ts_coll_algo_parse("butterfly");
  cr_expect_eq(unknown, -1);
  int bidir = ts_coll_algo_parse("bidir-ring");
  cr_expect_eq(bidir, TS_ALGO_BIDIR_RING);
  int hd = ts_coll_algo_parse("halving-doubling");
  cr_expect_eq(hd, TS_ALGO_HALVING_DOUBLING);
  /* nccl-tests PERFORMANCE.md factors. */
  double f = ts_coll_busbw_factor(TS_COLL_ALLREDUCE, 8);
  cr_expect_float_eq(f, 1.75, 1e-15);
  f = ts_coll_busbw_factor(TS_COLL_ALLGATHER, 8);
  cr_expect_float_eq(f, 0.875, 1e-15);
  f = ts_coll_busbw_factor(TS_COLL_REDUCESCATTER, 4);
  cr_expect_float_eq(f, 0.75, 1e-15);
  f = ts_coll_busbw_factor(TS_COLL_ALLTOALL, 2);
  cr_expect_float_eq(f, 0.5, 1e-15);
  f = ts_coll_busbw_factor(TS_COLL_BROADCAST, 64);
  cr_expect_float_eq(f, 1.0, 1e-15);
}

Test(structure, twisted_torus_every_algorithm)
{
  /* On a twisted torus the analytic evaluator routes by the breadth-first shortest paths of
   * ts_route (a wrap-around lands on another line), so it must equal the link-by-link
   * reference, and timing one representative line must equal timing all of them, for every
   * algorithm: on the whole 4x4x8 slice (z's routes leave their lines: all lines are timed),
   * on x (whose routes stay on their line: one line is timed) and on x+z. */
  g_autoptr(ts_topo) t = load_topo("tpu-v4-4x4x8-twisted");
  int all[] = {0, 1, 2}, xz[] = {0, 2}, x[] = {0};
  const int *dims[] = {all, xz, x};
  int nd[] = {3, 2, 1};
  int runs = 0;
  for (int s = 0; s < 3; s++) {
    ts_group_shape g;
    ts_group_shape_dims(t, dims[s], nd[s], &g);
    for (int k = 0; k < TS_COLL_NKINDS; k++)
      for (size_t a = 0; a < G_N_ELEMENTS(all_algos); a++) {
        if (!applies(t, (ts_coll_kind)k, all_algos[a], &g))
          continue;
        g_autofree char *what =
            g_strdup_printf("twisted 4x4x8 shape %d %s %s", s, ts_coll_kind_name((ts_coll_kind)k),
                            ts_coll_algo_name(all_algos[a]));
        check_structure(t, (ts_coll_kind)k, all_algos[a], &g, what);
        runs++;
      }
  }
  cr_expect(runs >= 20, "only %d (shape, kind, algorithm) ran", runs);
}
