/* test_torus3d: 3D and twisted tori (TPU v4, v5p). Hop counts of twisted tori against Camara et
 * al. 2010 and breadth-first search, routes that are chains of real links, the analytic and
 * SimGrid backends agreeing where no link is shared (3D torus all-reduce closed form, a 3D
 * split's step), and the twist key's errors. Criterion runs each test in its own process, as
 * SimGrid needs. */
#include "ts_backend_simgrid.h"
#include "ts_coll.h"
#include "ts_platform.h"
#include "ts_replay.h"
#include "ts_run.h"
#include "ts_trace.h"
#include "ts_util.h"

#include "ts_test.h"
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#define REL_TOL 0.005 /* agreement where no link is shared: 0.5 %, as test_simgrid */

static ts_topo *torus(const int *sizes, int ndims, double bw_GBps, double lat_us)
{
  ts_topo *t = g_new0(ts_topo, 1);
  t->name = g_strdup("torus");
  t->chip.name = g_strdup("chip");
  t->chip.peak_flops = 100e12;
  t->chip.memory_bw_Bps = 1e12;
  t->chip.memory_bytes = 16e9;
  t->chip.compute_efficiency = 1.0;
  t->ndims = ndims;
  t->nchips = 1;
  static const char *names[] = {"x", "y", "z", "w"};
  for (int d = 0; d < ndims; d++) {
    t->dims[d].name = g_strdup(names[d]);
    t->dims[d].size = sizes[d];
    t->dims[d].shape = TS_SHAPE_RING;
    t->dims[d].link_bw_Bps = bw_GBps * 1e9;
    t->dims[d].latency_s = lat_us * 1e-6;
    t->nchips *= sizes[d];
  }
  return t;
}

/* Diameter and mean hop count from chip 0 (tori are vertex-transitive) by ts_route; every route
 * must be a chain of links, each starting where the previous one ended, ending at the target. */
static void hop_stats(const ts_topo *t, int *diameter, double *mean)
{
  g_autoptr(GArray) r = g_array_new(FALSE, FALSE, sizeof(ts_link_id));
  *diameter = 0;
  double sum = 0;
  for (int dst = 0; dst < t->nchips; dst++) {
    g_array_set_size(r, 0);
    ts_route(t, 0, dst, r);
    int at = 0;
    for (guint k = 0; k < r->len; k++) {
      const ts_link_id *l = &g_array_index(r, ts_link_id, k);
      cr_assert_eq(l->chip, at, "route 0 -> %d: link %u leaves chip %d, not %d", dst, k, l->chip,
                   at);
      at = ts_topo_neighbor(t, at, l->dim, l->dir);
    }
    cr_assert_eq(at, dst, "route 0 -> %d ends at %d", dst, at);
    *diameter = MAX(*diameter, (int)r->len);
    sum += r->len;
  }
  *mean = sum / t->nchips;
}

Test(twisted, hop_counts_2d_camara)
{
  /* Camara et al. 2010, "Twisted Torus Topologies for Enhanced Interconnection Networks",
   * section 3: a k x 2k rectangular twisted torus has diameter k, against k/2 + k for the
   * plain torus. k = 4: 4 vs 6; mean distance 84/32 = 2.625 vs 96/32 = 3. */
  int sizes[] = {4, 8};
  g_autoptr(ts_topo) plain = torus(sizes, 2, 50, 1);
  g_autoptr(ts_topo) tw = torus(sizes, 2, 50, 1);
  tw->dims[0].twist[1] = 4;
  int dp, dt;
  double mp, mt;
  hop_stats(plain, &dp, &mp);
  hop_stats(tw, &dt, &mt);
  cr_assert_eq(dp, 6);
  cr_assert_float_eq(mp, 3.0, 1e-12);
  cr_assert_eq(dt, 4);
  cr_assert_float_eq(mt, 2.625, 1e-12);
}

Test(twisted, hop_counts_tpu_v4_4x4x8)
{
  /* The shipped 4x4x8 twisted slice (x and y wraps shifted by 4 along z): diameter 6 and mean
   * 3.4375 hops against 8 and 4 for the plain 4x4x8 torus (breadth-first counts over the
   * 128 chips, checked independently of trainsim). */
  g_autoptr(ts_topo) tw = load_topo("tpu-v4-4x4x8-twisted");
  cr_assert(ts_topo_twisted(tw));
  int sizes[] = {4, 4, 8};
  g_autoptr(ts_topo) plain = torus(sizes, 3, 45, 1);
  int dp, dt;
  double mp, mt;
  hop_stats(plain, &dp, &mp);
  hop_stats(tw, &dt, &mt);
  cr_assert_eq(dp, 8);
  cr_assert_float_eq(mp, 4.0, 1e-12);
  cr_assert_eq(dt, 6);
  cr_assert_float_eq(mt, 3.4375, 1e-12);
  /* v5p 8x16x16 with the diagonal seam: shorter than the plain torus's 4 + 8 + 8 = 20. */
  g_autoptr(ts_topo) v5p = load_topo("tpu-v5p-8x16x16");
  g_autoptr(GArray) r = g_array_new(FALSE, FALSE, sizeof(ts_link_id));
  int far[3] = {4, 8, 8};
  ts_route(v5p, 0, ts_topo_chip(v5p, far), r);
  cr_assert_lt(r->len, 20u, "%u hops", r->len);
}

Test(twisted, key_errors_name_the_key)
{
  const char *bad[] = {"twist = q:4", "twist = z:9", "twist = z", "twist = x:1"};
  for (size_t k = 0; k < G_N_ELEMENTS(bad); k++) {
    g_autofree char *text = g_strdup_printf(
        "[chip]\nname = c\npeak_tflops = 1\nmemory_GiB = 1\nmemory_bandwidth_GBps = 1\n"
        "[dim.x]\nsize = 4\nshape = ring\nlink_bandwidth_GBps = 1\nlatency_us = 1\n%s\n"
        "[dim.z]\nsize = 8\nshape = ring\nlink_bandwidth_GBps = 1\nlatency_us = 1\n",
        bad[k]);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    cr_assert(g_key_file_load_from_data(kf, text, (gsize)-1, G_KEY_FILE_NONE, NULL));
    GError *err = NULL;
    ts_topo *t = ts_topo_from_keyfile(kf, "t.ini", &err);
    cr_assert_null(t, "%s accepted", bad[k]);
    cr_assert(strstr(err->message, "t.ini: [dim.x] twist=") != NULL, "%s", err->message);
    g_error_free(err);
  }
}

/* ---- analytic vs SimGrid ------------------------------------------------------------ */

/* One collective over the groups of `shape` (pieces' strides in units of their dimension's
 * coordinate), on every rank. */
static ts_trace *coll_trace(const ts_topo *t, const ts_group_shape *shape, ts_coll_kind kind,
                            ts_coll_algo algo, double bytes)
{
  ts_trace *tr = ts_trace_new(t);
  int ax = ts_trace_add_axis(tr, "g", ts_group_size(shape), TRUE, shape);
  int g = ts_trace_group(tr, &ax, 1);
  ts_trace_set_programs(tr, 1);
  ts_op op = {0};
  op.kind = TS_OP_COLL;
  op.cat = TS_CAT_COMM_DP;
  op.label = ts_trace_label(tr, "coll");
  op.bytes = bytes;
  op.coll = kind;
  op.algo = algo;
  op.group = g;
  ts_trace_append(tr, 0, &op, NULL, 0);
  return tr;
}

static double replay_on(const ts_trace *tr, ts_backend *b)
{
  ts_replay *r = ts_replay_new(tr, b, TS_REPLAY_FULL);
  ts_replay_result res;
  GError *e = NULL;
  gboolean ok = ts_replay_run(r, &res, &e);
  ts_replay_free(r);
  cr_assert(ok, "%s", e ? e->message : "");
  return res.step_time_s;
}

static double both(const ts_topo *t, const ts_trace *tr, double *sim)
{
  ts_backend *a = ts_backend_analytic_new(t);
  double v = replay_on(tr, a);
  ts_backend_free(a);
  GError *e = NULL;
  ts_backend *s = ts_backend_simgrid_new_opts(t, NULL, NULL, &e);
  cr_assert_not_null(s, "%s", e ? e->message : "");
  *sim = replay_on(tr, s);
  ts_backend_free(s);
  return v;
}

static void expect_close(double got, double want, double tol, const char *what)
{
  double rel = fabs(got - want) / want;
  cr_expect(rel <= tol, "%s: %.9g s, expected %.9g s (%.3g %% off)", what, got, want, 100 * rel);
}

Test(agree, torus_dimwise_3d_allreduce_closed_form)
{
  /* The dimension-wise torus algorithm (Ying et al. 2018) in 3D: reduce-scatter along x, y, z with
   * bidirectional rings, all-gather back: sum over dims of 2 ((n_d / 2) alpha + (n_d - 1) S_d /
   * (2 n_d B)), S_d the data left after the earlier dims (whole shards both ways, n_d / 2 hops).
   * Every phase uses its own dimension's links. */
  int sizes[] = {4, 4, 4};
  g_autoptr(ts_topo) t = torus(sizes, 3, 45, 1);
  int dims[] = {0, 1, 2};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 3, &g);
  double S = 64e6, B = 45e9, a = 1e-6, want = 0, left = S;
  for (int d = 0; d < 3; d++) {
    want += 2 * (2 * a + 3 * left / (2 * 4) / B);
    left /= 4;
  }
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_TORUS_DIMWISE, S);
  double sim, an = both(t, tr, &sim);
  expect_close(an, want, 1e-9, "analytic vs closed form");
  expect_close(sim, an, REL_TOL, "simgrid vs analytic, 4x4x4 all-reduce");
}

Test(agree, torus_3d_allreduce_all_dims_at_once)
{
  /* The torus algorithm: three chunks of S/3, chunk c along dims c, c+1, c+2, in the same
   * steps, bidirectional rings: 2 * 3 * 2 alpha + 2 (63/64) S / (6 B) on 4x4x4. */
  int sizes[] = {4, 4, 4};
  g_autoptr(ts_topo) t = torus(sizes, 3, 45, 1);
  int dims[] = {0, 1, 2};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 3, &g);
  double S = 64e6, B = 45e9, a = 1e-6;
  double want = 12 * a + 2 * (63.0 / 64) * S / (6 * B);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_TORUS, S);
  double sim, an = both(t, tr, &sim);
  expect_close(an, want, 1e-9, "analytic vs closed form");
  expect_close(sim, an, REL_TOL, "simgrid vs analytic, 4x4x4 all-reduce all dims at once");
}

Test(agree, twisted_ring_along_the_long_dimension)
{
  /* A ring along z (8 chips, untwisted links) on the twisted 4x4x8 slice: both backends see
   * the same links, one per step: 2 (n - 1) (alpha + S / (n B)) for the one-way ring. */
  g_autoptr(ts_topo) t = load_topo("tpu-v4-4x4x8-twisted");
  ts_group_shape g = {0};
  g.npieces = 1;
  g.p[0] = (ts_piece){2, 8, 1};
  double S = 32e6;
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, S);
  double sim, an = both(t, tr, &sim);
  double want = 2 * 7 * (1e-6 + S / 8 / 45e9);
  expect_close(an, want, 1e-9, "analytic vs closed form");
  expect_close(sim, an, REL_TOL, "simgrid vs analytic, twisted slice");
}

/* The concurrent-dimension all-reduce (`torus`) on a 4x4x8 array, closed form. Three chunks
 * of S/3, chunk c reduce-scatters along (x,y,z) rotated by c with bidirectional rings (whole
 * shards both ways, the antipodal one half each way: a flow carries segment / L, or / (2 L)),
 * then all-gathers back (the same steps reversed). Per flow, in units of S/768: chunk 0 x 64,
 * y 16, z 2; chunk 1 y 64, z 8, x 2; chunk 2 z 32, x 8, y 2 (halves: 32, 8, 1; 32, 4, 1; 16,
 * 4, 1).
 * Plain torus: phases of 2, 2, 4 steps (L / 2), the half step first. Reduce-scatter steps
 * (load on the busiest link): 0: 32 | 1: 64 | 2: z 4+32 | 3: z 8+32 | 4: z 1+8 | 5: z 2+8 |
 * 6, 7: 2 = 195 S/768 (the same bytes as two rings of halves, 13 steps before s14), 8 alpha.
 * Twisted (x and y wraps land 4 places along z): x and y lines have no wrap-around of their
 * own, so they run as open lines, each shard to both ends, L - 1 = 3 steps of whole shards,
 * one hop (z keeps its ring). Chunk 0 x 0-2, y 3-5, z 6-9; chunk 1 y 0-2, z 3-6, x 7-9; chunk
 * 2 z 0-3, x 4-6, y 7-9: 0-2: 64 | 3: z 4+32 | 4, 5: y 16 | 6: z 1+8 | 7-9: 2 = 275, 10 alpha
 * (before s14 the closing flows went 3 hops back over the counter ring's links: 303, 31
 * alpha). */
static double torus_closed_form(gboolean twisted, double S, double B, double a)
{
  return twisted ? 2 * (275.0 / 768 * S / B + 10 * a) : 2 * (195.0 / 768 * S / B + 8 * a);
}

/* The dimension-wise schedule (x, then y, then z, whole buffer): plain, rings of L / 2 steps,
 * 3/8 + 3/32 + 7/256 = 127/256 S with 2 + 2 + 4 = 8 alpha; twisted, x and y open lines of 3
 * steps of whole shards, 3/4 + 3/16 + 7/256 = 247/256 S with 3 + 3 + 4 = 10 alpha, all-gather
 * the same. */
static double dimwise_closed_form(gboolean twisted, double S, double B, double a)
{
  return twisted ? 2 * (247.0 / 256 * S / B + 10 * a) : 2 * (127.0 / 256 * S / B + 8 * a);
}

/* tpu-v4-4x4x8-twisted, or the same slice untwisted (control): the analytic backend equals the
 * closed forms above, SimGrid (fair sharing of the doubled links) agrees within 0.5%. Before the
 * analytic evaluator followed the twisted routes it gave the plain torus's time on the twisted
 * slice (SimGrid 1.58x and 1.94x of it at this size). One topology per test: SimGrid's platform
 * is built once per process. */
static void check_4x4x8_allreduce(gboolean tw)
{
  double S = 64 * 1048576.0, B = 45e9, a = 1e-6;
  g_autoptr(ts_topo) t = load_topo("tpu-v4-4x4x8-twisted");
  if (!tw)
    for (int d = 0; d < t->ndims; d++)
      memset(t->dims[d].twist, 0, sizeof t->dims[d].twist);
  cr_assert_eq(ts_topo_twisted(t), tw);
  int dims[] = {0, 1, 2};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 3, &g);
  ts_coll_algo algos[] = {TS_ALGO_TORUS, TS_ALGO_TORUS_DIMWISE};
  for (int k = 0; k < 2; k++) {
    double want = k == 0 ? torus_closed_form(tw, S, B, a) : dimwise_closed_form(tw, S, B, a);
    g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, algos[k], S);
    double sim, an = both(t, tr, &sim);
    g_autofree char *w1 = g_strdup_printf("analytic vs closed form, %s all-reduce, %s 4x4x8",
                                          ts_coll_algo_name(algos[k]), tw ? "twisted" : "plain");
    g_autofree char *w2 = g_strdup_printf("simgrid vs closed form, %s all-reduce, %s 4x4x8",
                                          ts_coll_algo_name(algos[k]), tw ? "twisted" : "plain");
    expect_close(an, want, 1e-9, w1);
    expect_close(sim, want, REL_TOL, w2);
  }
}

Test(agree, twisted_torus_allreduce_closed_form)
{
  check_4x4x8_allreduce(TRUE);
}

Test(agree, plain_torus_allreduce_closed_form_control)
{
  check_4x4x8_allreduce(FALSE);
}

static void predict(const char *model, const char *topo, const char *split, gint64 batch,
                    const char *backend, ts_result *out)
{
  GError *e = NULL;
  g_autoptr(ts_model) m = load_model(model);
  g_autoptr(ts_topo) t = load_topo(topo);
  g_autoptr(ts_split) sp = ts_split_parse(split, &e);
  cr_assert_not_null(sp, "%s", e ? e->message : "");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  ts_run_options ro = {.backend = backend, .sg_cfg = NULL, .full = FALSE};
  cr_assert(ts_run_predict(m, t, sp, &po, &ro, out, &e), "%s", e ? e->message : "");
}

Test(agree, three_axes_on_three_dimensions)
{
  /* tp on x, dp on y and z of a TPU v4 cube: each axis on links of its own (the data-parallel
   * all-reduce's torus phases run one dimension at a time), so the contention-aware backend
   * must agree with the analytic one. */
  ts_result a = {0}, s = {0};
  predict("bert-large", "tpu-v4-4x4x4", "tp=4@x,dp=16@y+z", 64, "analytic", &a);
  predict("bert-large", "tpu-v4-4x4x4", "tp=4@x,dp=16@y+z", 64, "simgrid", &s);
  expect_close(s.step_time_s, a.step_time_s, REL_TOL, "BERT-large tp@x, dp@y+z step");
  ts_result_clear(&a);
  ts_result_clear(&s);
}
