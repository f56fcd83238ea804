/* test_simgrid: the contention-aware backend. Where no link is shared it must agree with the
 * analytic backend (alpha-beta closed forms); where links are shared it must be slower by the
 * max-min factor worked out by hand. Criterion runs each test in its own process, which is
 * what SimGrid needs (one initialisation per process). */
#include "ts_backend_simgrid.h"
#include "ts_degrade.h"
#include "ts_plan.h"
#include "ts_platform.h"
#include "ts_run.h"
#include "ts_replay.h"
#include "ts_sg_shim.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <glib/gstdio.h>
#include <math.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/dynar.h>

#define REL_TOL 0.005 /* agreement where no link is shared: 0.5 % */

/* ---- fixtures ---- */

typedef struct {
  const char *name;
  int size;
  ts_shape shape;
  double bw_GBps, lat_us;
} dim_spec;

/* A fresh temporary file's path (the file exists, empty; caller frees and removes). Criterion
 * runs the tests of a binary in parallel processes, so a fixed name in /tmp is a race. */
static char *tmp_path(const char *tmpl)
{
  GError *e = NULL;
  char *path = NULL;
  int fd = g_file_open_tmp(tmpl, &path, &e);
  cr_assert(fd >= 0, "tmp file: %s", e != NULL ? e->message : "?");
  close(fd);
  return path;
}

static ts_topo *topo_make(const dim_spec *dims, int ndims)
{
  ts_topo *t = g_new0(ts_topo, 1);
  t->name = g_strdup("test-array");
  t->chip.name = g_strdup("test-chip");
  t->chip.peak_flops = 100e12;
  t->chip.memory_bw_Bps = 1e12;
  t->chip.memory_bytes = 16e9;
  t->chip.compute_efficiency = 1.0;
  t->ndims = ndims;
  t->nchips = 1;
  for (int d = 0; d < ndims; d++) {
    t->dims[d].name = g_strdup(dims[d].name);
    t->dims[d].size = dims[d].size;
    t->dims[d].shape = dims[d].shape;
    t->dims[d].link_bw_Bps = dims[d].bw_GBps * 1e9;
    t->dims[d].latency_s = dims[d].lat_us * 1e-6;
    t->nchips *= dims[d].size;
  }
  return t;
}

/* A trace where every rank runs `copies` concurrent collectives (one per stream) over the
 * groups of `shape`: one symmetric axis, one program. */
static ts_trace *coll_trace(const ts_topo *t, const ts_group_shape *shape, ts_coll_kind kind,
                            ts_coll_algo algo, double bytes, int copies)
{
  ts_trace *tr = ts_trace_new(t);
  int ax = ts_trace_add_axis(tr, "g", ts_group_size(shape), TRUE, shape);
  int g = ts_trace_group(tr, &ax, 1);
  ts_trace_set_programs(tr, 1);
  for (int c = 0; c < copies; c++) {
    ts_op op = {0};
    op.kind = TS_OP_COLL;
    op.cat = TS_CAT_COMM_DP;
    op.stream = c;
    g_autofree char *label = g_strdup_printf("coll%d", c);
    op.label = ts_trace_label(tr, label);
    op.bytes = bytes;
    op.coll = kind;
    op.algo = algo;
    op.group = g;
    ts_trace_append(tr, 0, &op, NULL, 0);
  }
  return tr;
}

/* Replays tr on the backend; returns the step time or -1 (error message in *msg). */
static double replay(const ts_trace *tr, ts_backend *b, char **msg)
{
  ts_replay *r = ts_replay_new(tr, b, TS_REPLAY_FULL);
  ts_replay_result res;
  GError *e = NULL;
  gboolean ok = ts_replay_run(r, &res, &e);
  ts_replay_free(r);
  if (!ok) {
    if (msg != NULL)
      *msg = g_strdup(e->message);
    g_error_free(e);
    return -1;
  }
  return res.step_time_s;
}

/* tr on a new simgrid backend with one trainsim setting (or none: NULL); *flows (may be NULL)
 * gets the flows SimGrid ran. */
static double sim_time_flows(const ts_topo *t, const ts_trace *tr, const ts_platform_opts *opts,
                             const char *setting, gint64 *flows)
{
  const char *cfg[] = {setting, NULL};
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new_opts(t, setting != NULL ? cfg : NULL, opts, &e);
  cr_assert_not_null(b, "%s", e != NULL ? e->message : "");
  char *msg = NULL;
  double v = replay(tr, b, &msg);
  cr_assert(v >= 0, "simgrid replay failed: %s", msg != NULL ? msg : "");
  if (flows != NULL)
    *flows = ts_backend_simgrid_flows(b);
  ts_backend_free(b);
  return v;
}

static double sim_time(const ts_topo *t, const ts_trace *tr, const ts_platform_opts *opts)
{
  return sim_time_flows(t, tr, opts, NULL, NULL);
}

static double analytic_time(const ts_topo *t, const ts_trace *tr)
{
  ts_backend *b = ts_backend_analytic_new(t);
  char *msg = NULL;
  double v = replay(tr, b, &msg);
  cr_assert(v >= 0, "analytic replay failed: %s", msg != NULL ? msg : "");
  ts_backend_free(b);
  return v;
}

static ts_group_shape one_piece(int dim, int size, int stride)
{
  ts_group_shape g = {0};
  g.npieces = 1;
  g.p[0] = (ts_piece){dim, size, stride};
  return g;
}

static void expect_close(double got, double want, double tol, const char *what)
{
  double rel = fabs(got - want) / want;
  cr_expect(rel <= tol, "%s: simgrid %.9g s, expected %.9g s (%.3g %% off, tolerance %.3g %%)",
            what, got, want, 100 * rel, 100 * tol);
}

/* ---- agreement where no link is shared ---- */

Test(agree, ring_along_torus_row)
{
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}, {"y", 4, TS_SHAPE_RING, 25, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_group_shape g = one_piece(0, 8, 1);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, 64e6, 1);
  double want = analytic_time(t, tr);
  /* The closed form itself: 2(n-1) steps of one hop carrying S/n. */
  double closed = 14 * (1e-6 + 8e6 / 100e9);
  expect_close(want, closed, 1e-9, "analytic vs closed form");
  double got = sim_time(t, tr, NULL);
  expect_close(got, want, REL_TOL, "ring along X");
}

Test(agree, asymmetric_array_both_dims)
{
  /* X links 4x Y: a ring along Y is 4x slower in its bandwidth term, in both backends. */
  const dim_spec d[] = {{"x", 16, TS_SHAPE_RING, 100, 1}, {"y", 16, TS_SHAPE_RING, 25, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_group_shape g = one_piece(1, 16, 1);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, 160e6, 1);
  double want = analytic_time(t, tr);
  double closed = 30 * (1e-6 + 10e6 / 25e9);
  expect_close(want, closed, 1e-9, "analytic vs closed form");
  double got = sim_time(t, tr, NULL);
  expect_close(got, want, REL_TOL, "ring along Y of an X=4Y array");
}

Test(agree, torus_dimwise_2d_allreduce)
{
  /* Ying et al. 2018: reduce-scatter along X then Y, all-gather back, bidirectional rings
   * (whole shards both ways, X/2 hops): 2((X/2) alpha + (X-1) S/(2X Bx)) + 2((Y/2) alpha +
   * (Y-1)(S/X)/(2Y By)). */
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}, {"y", 8, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  int dims[] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  double S = 256e6;
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_TORUS_DIMWISE, S, 1);
  double want = analytic_time(t, tr);
  expect_close(want, 16e-6 + 14 * S / 16 / 100e9 + 14 * S / 8 / 16 / 100e9, 1e-9,
               "analytic vs closed form");
  double got = sim_time(t, tr, NULL);
  expect_close(got, want, REL_TOL, "2D torus all-reduce, dimension-wise");
}

Test(agree, torus_2d_allreduce_all_dims_at_once)
{
  /* The torus algorithm: S/2 reduce-scatters along X then Y while the other S/2 goes along Y
   * then X, in the same steps (4 a phase), then all-gather back: 16 alpha + 2 * 7 ((S/2)/16/B
   * + (S/2)/128/B) = 16 alpha + 2 (63/64) S / (4 B), the bandwidth-optimal all-reduce over 4
   * links a chip. */
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}, {"y", 8, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  int dims[] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  double S = 256e6;
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_TORUS, S, 1);
  double want = analytic_time(t, tr);
  expect_close(want, 16e-6 + 2 * (63.0 / 64) * S / (4 * 100e9), 1e-9, "analytic vs closed form");
  double got = sim_time(t, tr, NULL);
  expect_close(got, want, REL_TOL, "2D torus all-reduce, all dims at once");
}

Test(agree, asymmetric_array_torus)
{
  const dim_spec d[] = {{"x", 16, TS_SHAPE_RING, 100, 1}, {"y", 16, TS_SHAPE_RING, 25, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  int dims[] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  double S = 128e6;
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_TORUS_DIMWISE, S, 1);
  double want = analytic_time(t, tr);
  expect_close(want, 32e-6 + 30 * S / 32 / 100e9 + 30 * S / 16 / 32 / 25e9, 1e-9,
               "analytic vs closed form");
  double got = sim_time(t, tr, NULL);
  expect_close(got, want, REL_TOL, "2D torus all-reduce, X = 4 Y");
}

Test(agree, asymmetric_array_torus_all_dims_at_once)
{
  /* X links 4x Y: every step of the concurrent schedule waits for its chunk on Y:
   * 4 * 8 alpha + 2 * 15 (S/2)/32/By + 2 * 15 (S/2)/512/By. */
  const dim_spec d[] = {{"x", 16, TS_SHAPE_RING, 100, 1}, {"y", 16, TS_SHAPE_RING, 25, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  int dims[] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  double S = 128e6;
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_TORUS, S, 1);
  double want = analytic_time(t, tr);
  expect_close(want, 32e-6 + 30 * S / 64 / 25e9 + 30 * S / 1024 / 25e9, 1e-9,
               "analytic vs closed form");
  double got = sim_time(t, tr, NULL);
  expect_close(got, want, REL_TOL, "2D torus all-reduce all dims at once, X = 4 Y");
}

Test(agree, hierarchical_gpu_cluster)
{
  /* NCCL-style: ring reduce-scatter in the node, ring all-reduce across nodes on the shard,
   * ring all-gather in the node: 2*7*(a_n + S/8/B_n) + 2*3*(a_net + S/8/4/B_net). */
  const dim_spec d[] = {{"node", 8, TS_SHAPE_SWITCH, 300, 0.7}, {"net", 4, TS_SHAPE_SWITCH, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  int dims[] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  double S = 1e9;
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_HIERARCHICAL, S, 1);
  double want = analytic_time(t, tr);
  expect_close(want, 14 * (0.7e-6 + S / 8 / 300e9) + 6 * (3e-6 + S / 32 / 25e9), 1e-9,
               "analytic vs closed form");
  double got = sim_time(t, tr, NULL);
  expect_close(got, want, REL_TOL, "hierarchical all-reduce");
}

/* Every collective and algorithm on a switch hierarchy, where no two flows of a step share a
 * port unevenly: both backends give the same time (broadcast chains excepted, see below). */
Test(agree, every_algorithm_on_switches)
{
  const dim_spec d[] = {{"node", 4, TS_SHAPE_SWITCH, 300, 0.7}, {"net", 4, TS_SHAPE_SWITCH, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  int dims[] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  GError *e = NULL;
  ts_backend *sg = ts_backend_simgrid_new(t, NULL, &e);
  cr_assert_not_null(sg);
  int checked = 0;
  for (int k = 0; k < TS_COLL_NKINDS; k++)
    for (int a = TS_ALGO_RING; a < TS_ALGO_NALGOS; a++) {
      /* Pipelined chains over edges of unequal cost: the analytic model times fill and drain
       * steps as full steps (docs/collectives.md), the simulation does not. */
      if (k == TS_COLL_BROADCAST &&
          (a == TS_ALGO_RING || a == TS_ALGO_BIDIR_RING || a == TS_ALGO_NCCL))
        continue;
      ts_coll_algo chosen = TS_ALGO_AUTO;
      if (ts_coll_time(t, k, a, &g, 48e6, &chosen, &e) < 0) {
        g_clear_error(&e);
        continue;
      }
      g_autoptr(ts_trace) tr = coll_trace(t, &g, k, a, 48e6, 1);
      double want = analytic_time(t, tr);
      char *msg = NULL;
      double got = replay(tr, sg, &msg);
      cr_assert(got > 0, "%s", msg);
      g_autofree char *what = g_strdup_printf("%s %s", ts_coll_kind_name(k), ts_coll_algo_name(a));
      if (chosen == TS_ALGO_NCCL_TREE || chosen == TS_ALGO_NCCL_RING) {
        /* Across nodes the analytic model times NCCL's ring and tree as pipelines (a hop's
         * latency once per step of the path, the bytes at the most loaded link:
         * docs/collectives.md); the simulation runs their steps one after the other, each
         * waiting for its slowest hop, so it is slower by at most the steps' extra latency
         * (here 5-10%), and never faster. */
        cr_expect(got >= want * (1 - REL_TOL) && got <= 1.2 * want,
                  "%s: simgrid %.9g s, analytic %.9g s", what, got, want);
      } else {
        expect_close(got, want, REL_TOL, what);
      }
      checked++;
    }
  cr_expect(checked >= 26, "%d combinations", checked);
  ts_backend_free(sg);
}

/* ---- whole steps from the planner ---- */

static void predict_cfg_algo(const char *model, const char *topo, const char *split, gint64 batch,
                             const char *backend, const char *const *cfg, ts_coll_algo algo,
                             ts_result *out)
{
  GError *e = NULL;
  g_autofree char *mp = g_strdup_printf("%s/models/%s.ini", TS_SOURCE_DIR, model);
  g_autofree char *tp = g_strdup_printf("%s/topologies/%s.ini", TS_SOURCE_DIR, topo);
  g_autoptr(ts_model) mm = ts_model_load(mp, &e);
  cr_assert_not_null(mm, "%s", e != NULL ? e->message : "");
  g_autoptr(ts_topo) t = ts_topo_load(tp, &e);
  cr_assert_not_null(t, "%s", e != NULL ? e->message : "");
  g_autoptr(ts_split) sp = ts_split_parse(split, &e);
  cr_assert_not_null(sp, "%s", e != NULL ? e->message : "");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  po.algo = algo;
  ts_run_options ro = {.backend = backend, .sg_cfg = cfg, .full = FALSE};
  gboolean ok = ts_run_predict(mm, t, sp, &po, &ro, out, &e);
  cr_assert(ok, "%s", e != NULL ? e->message : "");
}

static void predict_cfg(const char *model, const char *topo, const char *split, gint64 batch,
                        const char *backend, const char *const *cfg, ts_result *out)
{
  predict_cfg_algo(model, topo, split, batch, backend, cfg, TS_ALGO_AUTO, out);
}

static void predict(const char *model, const char *topo, const char *split, gint64 batch,
                    const char *backend, ts_result *out)
{
  predict_cfg(model, topo, split, batch, backend, NULL, out);
}

Test(step, data_parallel_resnet50_agrees)
{
  /* One all-reduce group, buckets one after another on one stream: nothing shared. */
  ts_result a = {0}, s = {0};
  predict("resnet50", "tpu-v3-8x8", "dp=64", 1024, "analytic", &a);
  predict("resnet50", "tpu-v3-8x8", "dp=64", 1024, "simgrid", &s);
  expect_close(s.step_time_s, a.step_time_s, REL_TOL, "ResNet-50 dp=64 step");
  ts_result_clear(&a);
  ts_result_clear(&s);
}

Test(step, tensor_and_data_on_separate_links_agree)
{
  ts_result a = {0}, s = {0};
  predict("bert-large", "tpu-v3-8x8", "tp=8@x,dp=8@y", 64, "analytic", &a);
  predict("bert-large", "tpu-v3-8x8", "tp=8@x,dp=8@y", 64, "simgrid", &s);
  expect_close(s.step_time_s, a.step_time_s, REL_TOL, "BERT-large tp@x, dp@y step");
  ts_result_clear(&a);
  ts_result_clear(&s);
}

Test(step, tensor_and_data_crossing_links_slower)
{
  /* dp@x:2+y puts gradient all-reduces on the x links the tensor-parallel all-reduces use,
   * while both run (gradients overlap the backward pass): contention the analytic backend
   * does not see. */
  ts_result a = {0}, s = {0};
  predict("bert-base", "tpu-v3-8x8", "tp=4@x,dp=16@x+y", 64, "analytic", &a);
  predict("bert-base", "tpu-v3-8x8", "tp=4@x,dp=16@x+y", 64, "simgrid", &s);
  double ratio = s.step_time_s / a.step_time_s;
  cr_expect(ratio > 1.02 && ratio < 2.0, "simgrid %.6g s / analytic %.6g s = %.4f", s.step_time_s,
            a.step_time_s, ratio);
  double compute_a = a.compute_time_s, compute_s = s.compute_time_s;
  expect_close(compute_s, compute_a, 1e-9, "compute is not contended");
  ts_result_clear(&a);
  ts_result_clear(&s);
}

/* ---- shared links: slower by the max-min factor ---- */

Test(contention, stride2_rings_share_every_link)
{
  /* An 8-ring, groups {0,2,4,6} and {1,3,5,7}: each neighbour transfer crosses two links and
   * every link carries one flow of each ring, so each flow gets bw/2:
   * per step 2 alpha + (S/4)/(bw/2), against 2 alpha + (S/4)/bw without contention. */
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 1);
  ts_group_shape g = one_piece(0, 4, 2);
  double S = 40e6;
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, S, 1);
  double free_flow = analytic_time(t, tr);
  expect_close(free_flow, 6 * (2e-6 + (S / 4) / 100e9), 1e-9, "analytic");
  double got = sim_time(t, tr, NULL);
  expect_close(got, 6 * (2e-6 + (S / 4) / 50e9), REL_TOL, "two rings on one ring");
}

Test(contention, two_allreduces_same_dim)
{
  /* Two concurrent ring all-reduces over the same rows: every link carries two flows. */
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 2}, {"y", 2, TS_SHAPE_RING, 100, 2}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_group_shape g = one_piece(0, 8, 1);
  double S = 80e6;
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, S, 2);
  double alone = analytic_time(t, tr);
  expect_close(alone, 14 * (2e-6 + (S / 8) / 100e9), 1e-9, "analytic (no contention)");
  double got = sim_time(t, tr, NULL);
  expect_close(got, 14 * (2e-6 + 2 * (S / 8) / 100e9), REL_TOL, "two all-reduces");
}

Test(contention, eight_gpus_share_one_nic)
{
  /* 4 nodes of 8 GPUs; ring all-reduce along "net" on all 8 rails at once. With one NIC per
   * GPU the rails are independent; with one NIC per node all 8 flows of a step share it:
   * bandwidth term x8, latency unchanged. */
  const dim_spec d[] = {{"node", 8, TS_SHAPE_SWITCH, 300, 0.7}, {"net", 4, TS_SHAPE_SWITCH, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_group_shape g = one_piece(1, 4, 1);
  double S = 100e6;
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, S, 1);
  double per_gpu = analytic_time(t, tr);
  expect_close(per_gpu, 6 * (3e-6 + (S / 4) / 25e9), 1e-9, "analytic, one NIC per GPU");
  ts_platform_opts o = {{0}};
  o.chips_per_port[1] = 8;
  double got = sim_time(t, tr, &o);
  expect_close(got, 6 * (3e-6 + 8 * (S / 4) / 25e9), REL_TOL, "8 GPUs per NIC");
}

Test(contention, per_gpu_nics_agree)
{
  const dim_spec d[] = {{"node", 8, TS_SHAPE_SWITCH, 300, 0.7}, {"net", 4, TS_SHAPE_SWITCH, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_group_shape g = one_piece(1, 4, 1);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, 100e6, 1);
  double want = analytic_time(t, tr);
  double got = sim_time(t, tr, NULL);
  expect_close(got, want, REL_TOL, "rails with one NIC per GPU");
}

/* ---- merged flows: a run of alike steps replayed as one flow per peer ---- */

/* Merged and per-step flows give the same time (sizes divide evenly, so every step of a run
 * moves the same bytes), and the flow counts worked out by hand. */
static void expect_merged_equal(const ts_topo *t, const ts_trace *tr, const ts_platform_opts *o,
                                gint64 per_step_flows, gint64 merged_flows, const char *what)
{
  gint64 fp = 0, fm = 0;
  double per_step = sim_time_flows(t, tr, o, "trainsim/collective-flows:per-step", &fp);
  double merged = sim_time_flows(t, tr, o, "trainsim/collective-flows:merged", &fm);
  expect_close(merged, per_step, 1e-9, what);
  cr_expect_eq(fp, per_step_flows, "%s: %" G_GINT64_FORMAT " flows per step", what, fp);
  cr_expect_eq(fm, merged_flows, "%s: %" G_GINT64_FORMAT " merged flows", what, fm);
}

Test(flows, merged_equals_per_step_without_contention)
{
  /* 2D torus all-reduce on 8x8, bidirectional rings: per step 64 members x 2 directions;
   * 4 + 4 + 4 + 4 steps, of which the Y reduce-scatter and the Y all-gather are alike (the same
   * peers), so 3 runs. */
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}, {"y", 8, TS_SHAPE_RING, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  int dims[] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_TORUS_DIMWISE, 256e6, 1);
  expect_merged_equal(t, tr, NULL, 16 * 128, 3 * 128, "2D torus all-reduce");
}

Test(flows, merged_equals_per_step_under_steady_contention)
{
  /* Two ring all-reduces on every row of an 8x2 array at once: 2 x 2 rings x 14 steps x 8
   * flows, or one run per ring. */
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 2}, {"y", 2, TS_SHAPE_RING, 100, 2}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_group_shape g = one_piece(0, 8, 1);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, 80e6, 2);
  expect_merged_equal(t, tr, NULL, 4 * 14 * 8, 4 * 8, "two all-reduces on one ring");
}

Test(flows, merged_equals_per_step_stride2_rings)
{
  /* Two stride-2 rings on an 8-ring: every link carries one flow of each. */
  const dim_spec d1[] = {{"x", 8, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t1 = topo_make(d1, 1);
  ts_group_shape g1 = one_piece(0, 4, 2);
  g_autoptr(ts_trace) tr1 = coll_trace(t1, &g1, TS_COLL_ALLREDUCE, TS_ALGO_RING, 40e6, 1);
  expect_merged_equal(t1, tr1, NULL, 2 * 6 * 4, 2 * 4, "stride-2 rings");
}

Test(flows, merged_equals_per_step_eight_gpus_per_nic)
{
  const dim_spec d[] = {{"node", 8, TS_SHAPE_SWITCH, 300, 0.7}, {"net", 4, TS_SHAPE_SWITCH, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_group_shape g = one_piece(1, 4, 1);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, 100e6, 1);
  ts_platform_opts o = {{0}};
  o.chips_per_port[1] = 8;
  expect_merged_equal(t, tr, &o, 8 * 6 * 4, 8 * 4, "8 rails through one NIC");
}

Test(flows, merged_close_to_per_step_when_contention_moves)
{
  /* Tensor-parallel all-reduces on X come and go while the gradient all-reduces cross the same
   * links: contention on a ring's links changes during a run, which a merged flow averages
   * where per-step flows wait, each step, for its slowest link. Measured 0.70 % apart. */
  ts_result p = {0}, m = {0};
  const char *per_step[] = {"trainsim/collective-flows:per-step", NULL};
  const char *merged[] = {"trainsim/collective-flows:merged", NULL};
  predict_cfg("bert-base", "tpu-v3-8x8", "tp=4@x,dp=16@x+y", 64, "simgrid", per_step, &p);
  predict_cfg("bert-base", "tpu-v3-8x8", "tp=4@x,dp=16@x+y", 64, "simgrid", merged, &m);
  double ratio = m.step_time_s / p.step_time_s;
  cr_expect(fabs(ratio - 1) < 0.02, "merged %.9g s / per-step %.9g s = %.5f", m.step_time_s,
            p.step_time_s, ratio);
  ts_result_clear(&p);
  ts_result_clear(&m);
}

/* ---- driver mode (default) against actor mode: the same flows, the same times ---- */

/* tr replayed in both modes (and with an extra trainsim setting, or none) must give the same
 * step (1e-9 relative: the same flows start at the same times on the same routes) and the same
 * number of flows. Both backends live in one process: the modes share SimGrid's platform. */
static void expect_modes_equal(const ts_topo *t, const ts_trace *tr, const ts_platform_opts *o,
                               const char *extra, const char *what)
{
  double v[2];
  gint64 flows[2];
  const char *modes[] = {"trainsim/simgrid-mode:driver", "trainsim/simgrid-mode:actors"};
  for (int i = 0; i < 2; i++) {
    const char *cfg[] = {modes[i], extra, NULL};
    GError *e = NULL;
    ts_backend *b = ts_backend_simgrid_new_opts(t, cfg, o, &e);
    cr_assert_not_null(b, "%s", e != NULL ? e->message : "");
    char *msg = NULL;
    v[i] = replay(tr, b, &msg);
    cr_assert(v[i] > 0, "%s (%s): %s", what, modes[i], msg != NULL ? msg : "");
    flows[i] = ts_backend_simgrid_flows(b);
    ts_backend_free(b);
  }
  cr_expect(fabs(v[0] - v[1]) <= 1e-9 * v[1], "%s: driver %.17g s, actors %.17g s", what, v[0],
            v[1]);
  cr_expect_eq(flows[0], flows[1],
               "%s: driver %" G_GINT64_FORMAT " flows, actors %" G_GINT64_FORMAT, what, flows[0],
               flows[1]);
}

Test(modes, ring_and_torus_on_a_torus)
{
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}, {"y", 8, TS_SHAPE_RING, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_group_shape row = one_piece(0, 8, 1);
  g_autoptr(ts_trace) ring = coll_trace(t, &row, TS_COLL_ALLREDUCE, TS_ALGO_RING, 64e6, 1);
  expect_modes_equal(t, ring, NULL, NULL, "ring all-reduce on every row");
  int dims[] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  g_autoptr(ts_trace) torus = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_TORUS, 256e6, 1);
  expect_modes_equal(t, torus, NULL, NULL, "2D torus all-reduce");
  expect_modes_equal(t, torus, NULL, "trainsim/collective-flows:per-step",
                     "2D torus all-reduce, per-step flows");
  expect_modes_equal(t, torus, NULL, "trainsim/collective-steps:async",
                     "2D torus all-reduce, asynchronous steps");
}

Test(modes, hierarchical_and_every_kind_on_switches)
{
  const dim_spec d[] = {{"node", 8, TS_SHAPE_SWITCH, 300, 0.7}, {"net", 4, TS_SHAPE_SWITCH, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  int dims[] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  g_autoptr(ts_trace) h = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_HIERARCHICAL, 1e9, 1);
  expect_modes_equal(t, h, NULL, NULL, "hierarchical all-reduce");
  /* Algorithms whose peers change every step (never merged), and a pipelined broadcast. */
  const struct {
    ts_coll_kind kind;
    ts_coll_algo algo;
  } cases[] = {{TS_COLL_ALLREDUCE, TS_ALGO_HALVING_DOUBLING},
               {TS_COLL_ALLTOALL, TS_ALGO_DIRECT},
               {TS_COLL_ALLGATHER, TS_ALGO_RING},
               {TS_COLL_BROADCAST, TS_ALGO_TREE}};
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(ts_trace) tr = coll_trace(t, &g, cases[i].kind, cases[i].algo, 96e6, 1);
    g_autofree char *what = g_strdup_printf("kind %d algorithm %d", cases[i].kind, cases[i].algo);
    expect_modes_equal(t, tr, NULL, NULL, what);
    expect_modes_equal(t, tr, NULL, "trainsim/collective-steps:async", what);
  }
}

Test(modes, contention)
{
  /* Two stride-2 rings sharing every link, two all-reduces on the same rows, 8 GPUs on one
   * NIC: max-min shares differ from alpha-beta, and must not differ between the modes. */
  const dim_spec d1[] = {{"x", 8, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t1 = topo_make(d1, 1);
  ts_group_shape g1 = one_piece(0, 4, 2);
  g_autoptr(ts_trace) tr1 = coll_trace(t1, &g1, TS_COLL_ALLREDUCE, TS_ALGO_RING, 40e6, 1);
  expect_modes_equal(t1, tr1, NULL, NULL, "stride-2 rings");
  g_autoptr(ts_trace) tr2 = coll_trace(t1, &g1, TS_COLL_ALLREDUCE, TS_ALGO_RING, 40e6, 3);
  expect_modes_equal(t1, tr2, NULL, "trainsim/collective-flows:per-step",
                     "three stride-2 ring all-reduces at once, per-step flows");
}

Test(modes, nic_shared_by_eight_gpus)
{
  const dim_spec d[] = {{"node", 8, TS_SHAPE_SWITCH, 300, 0.7}, {"net", 4, TS_SHAPE_SWITCH, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_group_shape g = one_piece(1, 4, 1);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, 100e6, 2);
  ts_platform_opts o = {{0}};
  o.chips_per_port[1] = 8;
  expect_modes_equal(t, tr, &o, NULL, "two all-reduces on 8 rails through one NIC");
}

Test(modes, computes_share_a_chip_and_pipeline_sends)
{
  /* Rank 0 runs two computes at once (streams 0 and 1: 10 ms and 4 ms alone, so 8 ms shared
   * then 2 ms alone), then sends to rank 2; rank 1 sends to rank 3 over a shared link
   * meanwhile. Processor sharing and p2p flows, both modes. */
  const dim_spec d[] = {{"x", 4, TS_SHAPE_MESH, 50, 2}};
  g_autoptr(ts_topo) t = topo_make(d, 1);
  g_autoptr(ts_trace) tr = ts_trace_new(t);
  ts_group_shape g = one_piece(0, 4, 1);
  ts_trace_add_axis(tr, "pp", 4, FALSE, &g);
  ts_trace_set_programs(tr, 4);
  ts_op c = {0};
  c.kind = TS_OP_COMPUTE;
  c.cat = TS_CAT_FWD;
  c.label = ts_trace_label(tr, "fwd");
  c.flops = 1e12;
  ts_trace_append(tr, 0, &c, NULL, 0);
  c.stream = 1;
  c.flops = 0.4e12;
  ts_trace_append(tr, 0, &c, NULL, 0);
  ts_op s = {0};
  s.kind = TS_OP_SEND;
  s.cat = TS_CAT_COMM_PP;
  s.label = ts_trace_label(tr, "act");
  s.bytes = 1e8;
  s.axis = 0;
  s.offset = 2;
  int deps[] = {0, 1};
  ts_trace_append(tr, 0, &s, deps, 2);
  ts_trace_append(tr, 1, &s, NULL, 0);
  ts_op rv = s;
  rv.kind = TS_OP_RECV;
  rv.offset = -2;
  ts_trace_append(tr, 2, &rv, NULL, 0);
  ts_trace_append(tr, 3, &rv, NULL, 0);
  /* Rank 0 ends its computes at 14 ms, then 2 hops of 2 us and 1e8 B at 50 GB/s: alone on
   * the links by then (rank 1's send ended at 2.004 ms). */
  double want = 0.014 + 4e-6 + 1e8 / 50e9;
  double got = sim_time(t, tr, NULL);
  expect_close(got, want, 1e-9, "shared chip then a send");
  expect_modes_equal(t, tr, NULL, NULL, "shared chip and sends");
}

Test(modes, planner_steps)
{
  /* Whole steps: a pipeline (1F1B sends between stages while tensor- and data-parallel
   * collectives run) and tensor and data parallelism crossing the same links. */
  const char *const steps[][4] = {
      {"bert-large", "tpu-v3-8x8", "tp=2,pp=4,dp=8,zero=1,schedule=1f1b", "512"},
      {"bert-base", "tpu-v3-8x8", "tp=4@x,dp=16@x+y", "64"},
      {"gpt3-1.3b", "dgx-a100-4node", "tp=8@node,dp=4@net", "64"}};
  for (gsize i = 0; i < G_N_ELEMENTS(steps); i++) {
    ts_result r[2] = {{0}, {0}};
    /* Every flow simulated in both (no collapse), so the flow counts compare too. */
    const char *driver[] = {"trainsim/simgrid-mode:driver", "trainsim/symmetry:full", NULL};
    const char *actors[] = {"trainsim/simgrid-mode:actors", NULL};
    gint64 batch = g_ascii_strtoll(steps[i][3], NULL, 10);
    predict_cfg(steps[i][0], steps[i][1], steps[i][2], batch, "simgrid", driver, &r[0]);
    predict_cfg(steps[i][0], steps[i][1], steps[i][2], batch, "simgrid", actors, &r[1]);
    cr_expect(fabs(r[0].step_time_s - r[1].step_time_s) <= 1e-9 * r[1].step_time_s,
              "%s %s: driver %.17g s, actors %.17g s", steps[i][0], steps[i][2], r[0].step_time_s,
              r[1].step_time_s);
    cr_expect_eq(r[0].flows, r[1].flows, "%s: flows", steps[i][2]);
    ts_result_clear(&r[0]);
    ts_result_clear(&r[1]);
  }
}

/* ---- link report ---- */

Test(report, stride2_link_loads)
{
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 1);
  ts_group_shape g = one_piece(0, 4, 2);
  double S = 40e6;
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, S, 1);
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new(t, NULL, &e);
  cr_assert_not_null(b);
  double step = replay(tr, b, NULL);
  cr_assert(step > 0);
  GPtrArray *rows = NULL;
  double makespan = 0;
  gboolean ok = ts_backend_simgrid_link_report(b, &rows, &makespan, &e);
  cr_assert(ok);
  expect_close(makespan, step, 1e-12, "makespan");
  cr_assert_eq(rows->len, 16); /* 8 chips x {+, -} */
  /* + links: two rings x 6 steps x S/4 each; - links unused. Busy for the whole run. */
  int plus = 0;
  for (guint i = 0; i < rows->len; i++) {
    const ts_link_load *l = g_ptr_array_index(rows, i);
    if (strcmp(l->direction, "+") == 0) {
      plus++;
      expect_close(l->bytes, 2 * 6 * S / 4, 1e-12, l->name);
      expect_close(l->busy_s, step, 1e-9, "busy time");
      cr_expect_str_eq(l->top_label, "coll0");
    } else {
      double bytes = l->bytes;
      cr_expect(bytes == 0, "%s carried %g bytes", l->name, bytes);
    }
  }
  cr_expect_eq(plus, 8);
  const ts_link_load *first = g_ptr_array_index(rows, 0);
  cr_expect_str_eq(first->name, "c0.x+");
  cr_expect_str_eq(first->dim, "x");
  g_autofree char *csv = ts_link_report_csv(rows);
  cr_expect(g_str_has_prefix(csv, "link,chip,dim,direction,bandwidth_Bps,bytes,busy_s,"
                                  "busy_fraction,utilization,top_label,top_label_bytes\n"));
  cr_expect(strstr(csv, "\nc0.x+,0,x,+,100000000000,120000000,") != NULL, "%s", csv);
  g_autofree char *sum = ts_link_report_summary(rows, 3);
  cr_expect(strstr(sum, "c0.x+") != NULL && strstr(sum, "coll0") != NULL, "%s", sum);
  g_ptr_array_unref(rows);
  /* The one-call form the commands use: a CSV line per link, and the summary. */
  g_autofree char *path = tmp_path("ts-test-links-XXXXXX.csv");
  char *top = NULL;
  ok = ts_backend_simgrid_report_links(b, path, 2, &top, &e);
  cr_assert(ok, "%s", e != NULL ? e->message : "");
  g_autofree char *file = NULL;
  cr_assert(g_file_get_contents(path, &file, NULL, NULL));
  int lines = 0;
  for (const char *c = file; *c != '\0'; c++)
    lines += *c == '\n';
  cr_expect_eq(lines, 17);
  cr_expect(top != NULL && strstr(top, "c0.x+") != NULL);
  g_free(top);
  g_unlink(path);
  ts_backend_free(b);
}

/* ---- configuration, errors, silence ---- */

Test(config, pinned_model_recorded)
{
  const dim_spec d[] = {{"x", 4, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 1);
  const char *cfg[] = {"surf/precision:1e-10", NULL};
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new(t, cfg, &e);
  cr_assert_not_null(b, "%s", e != NULL ? e->message : "");
  const char *rec = ts_backend_simgrid_config(b);
  cr_expect(strstr(rec, "network/model:CM02") != NULL, "%s", rec);
  cr_expect(strstr(rec, "network/crosstraffic:0") != NULL, "%s", rec);
  cr_expect(strstr(rec, "network/TCP-gamma:0") != NULL, "%s", rec);
  cr_expect(strstr(rec, "surf/precision:1e-10") != NULL, "%s", rec);
  cr_expect(strstr(rec, "trainsim/collective-flows:merged") != NULL, "%s", rec);
  ts_backend_free(b);
}

Test(config, user_cfg_overrides_and_is_recorded)
{
  const dim_spec d[] = {{"x", 4, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 1);
  const char *cfg[] = {"network/model:LV08", NULL};
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new(t, cfg, &e);
  cr_assert_not_null(b, "%s", e != NULL ? e->message : "");
  const char *rec = ts_backend_simgrid_config(b);
  cr_expect(strstr(rec, "network/model:LV08") != NULL && strstr(rec, "CM02") == NULL, "%s", rec);
  ts_backend_free(b);
}

static void expect_cfg_error(const char *item, const char *needle)
{
  const dim_spec d[] = {{"x", 4, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 1);
  const char *cfg[] = {item, NULL};
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new(t, cfg, &e);
  cr_assert_null(b);
  cr_assert_not_null(e);
  cr_expect(e->domain == TS_ERROR && e->code == TS_ERROR_INPUT);
  cr_expect(strchr(e->message, '\n') == NULL, "one line: %s", e->message);
  cr_expect(strstr(e->message, needle) != NULL, "%s", e->message);
  g_error_free(e);
}

Test(config, bad_key, .init = cr_redirect_stderr)
{
  /* SimGrid's "Bad config key: network/modle" named nothing expected. */
  expect_cfg_error("network/modle:CM02",
                   "--cfg 'network/modle:CM02': network/modle is not a SimGrid setting; "
                   "expected a SimGrid setting such as network/model or network/latency-factor, "
                   "or a trainsim/... setting (docs/backends.md)");
  expect_cfg_error("network/latency-factor:abc", "network/latency-factor: invalid double; "
                                                 "expected a number");
  cr_expect_stderr_eq_str("");
}

Test(config, bad_model, .init = cr_redirect_stderr)
{
  expect_cfg_error("network/model:CM03", "expected one of");
  cr_expect_stderr_eq_str("");
}

Test(config, bad_value, .init = cr_redirect_stderr)
{
  expect_cfg_error("network/TCP-gamma:lots", "network/TCP-gamma");
  expect_cfg_error("trainsim/collective-flows:coarse", "trainsim/collective-flows:merged");
  expect_cfg_error("trainsim/collective-steps:lazy", "trainsim/collective-steps:sync");
  cr_expect_stderr_eq_str("");
}

Test(config, abort_at_model_setup_caught, .init = cr_redirect_stderr)
{
  /* Accepted when set, but SimGrid's CM02 setup asserts against it and aborts: the probe
   * process takes the abort, the caller gets one line. */
  expect_cfg_error("network/maxmin-selective-update:no", "SimGrid cannot run with these");
  cr_expect_stderr_eq_str("");
}

Test(config, no_colon)
{
  expect_cfg_error("CM02", "expected KEY:VALUE");
}

Test(config, help_rejected)
{
  expect_cfg_error("network/model:help", "not supported");
}

Test(config, one_platform_per_process)
{
  /* A second backend on the same array and settings reuses the simulator and replays again,
   * with the same result; another array is refused in one line. */
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 1);
  ts_group_shape g = one_piece(0, 8, 1);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, 8e6, 1);
  double first = sim_time(t, tr, NULL);
  double second = sim_time(t, tr, NULL);
  expect_close(second, first, 1e-9, "second replay in the same process");
  const dim_spec d2[] = {{"x", 4, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t2 = topo_make(d2, 1);
  GError *e = NULL;
  ts_backend *b2 = ts_backend_simgrid_new(t2, NULL, &e);
  cr_assert_null(b2);
  cr_expect(e != NULL && e->code == TS_ERROR_BACKEND && strchr(e->message, '\n') == NULL &&
                strstr(e->message, "one platform per process") != NULL,
            "%s", e != NULL ? e->message : "");
  g_clear_error(&e);
  const char *other[] = {"network/model:LV08", NULL};
  b2 = ts_backend_simgrid_new(t, other, &e);
  cr_assert_null(b2);
  g_clear_error(&e);
  /* The same array with a dead link routes around it: another platform, refused (it was
   * reused, detours and all, before the faults were compared). */
  g_autoptr(ts_topo) t3 = topo_make(d, 1);
  t3->faults.ndead = 1;
  t3->faults.dead[0] = (ts_dead_link){.dim = 0, .chip = 3};
  b2 = ts_backend_simgrid_new(t3, NULL, &e);
  cr_assert_null(b2);
  cr_expect(e != NULL && strstr(e->message, "one platform per process") != NULL, "%s",
            e != NULL ? e->message : "");
  g_clear_error(&e);
}

Test(config, zero_bandwidth_named)
{
  const dim_spec d[] = {{"x", 4, TS_SHAPE_RING, 100, 1}, {"y", 4, TS_SHAPE_MESH, 0, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  GError *e = NULL;
  ts_platform *p = ts_platform_new(t, NULL, &e);
  cr_assert_null(p);
  cr_expect(strstr(e->message, "[dim.y] link_bandwidth_GBps='0'") != NULL, "%s", e->message);
  g_error_free(e);
}

Test(config, bad_port_sharing_named)
{
  const dim_spec d[] = {{"node", 8, TS_SHAPE_SWITCH, 300, 1}, {"net", 4, TS_SHAPE_SWITCH, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_platform_opts o = {{0}};
  o.chips_per_port[1] = 3;
  GError *e = NULL;
  ts_platform *p = ts_platform_new(t, &o, &e);
  cr_assert_null(p);
  cr_expect(strstr(e->message, "[dim.net] chips_per_port='3'") != NULL, "%s", e->message);
  g_error_free(e);
}

Test(silence, stuck_replay_reported_simgrid_quiet, .init = cr_redirect_stderr)
{
  /* Rank 0 sends to rank 1, which never receives: the engine names the stuck op, SimGrid
   * ends normally (no actor is ever blocked) and prints nothing. */
  const dim_spec d[] = {{"x", 4, TS_SHAPE_RING, 100, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 1);
  ts_trace *tr = ts_trace_new(t);
  ts_group_shape g = one_piece(0, 4, 1);
  int ax = ts_trace_add_axis(tr, "pp", 4, FALSE, &g);
  (void)ax;
  ts_trace_set_programs(tr, 4);
  ts_op op = {0};
  op.kind = TS_OP_SEND;
  op.cat = TS_CAT_COMM_PP;
  op.label = ts_trace_label(tr, "act");
  op.bytes = 1e6;
  op.axis = 0;
  op.offset = 1;
  ts_trace_append(tr, 0, &op, NULL, 0);
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new(t, NULL, &e);
  cr_assert_not_null(b);
  char *msg = NULL;
  double v = replay(tr, b, &msg);
  cr_assert(v < 0);
  cr_expect(strstr(msg, "rank 0") != NULL && strstr(msg, "'act'") != NULL, "%s", msg);
  g_free(msg);
  ts_backend_free(b);
  ts_trace_free(tr);
  fflush(stderr);
  cr_expect_stderr_eq_str("");
}

Test(silence, send_and_compute_times)
{
  /* A compute then a send: roofline time, then alpha-beta over two hops. */
  const dim_spec d[] = {{"x", 4, TS_SHAPE_MESH, 50, 2}};
  g_autoptr(ts_topo) t = topo_make(d, 1);
  ts_trace *tr = ts_trace_new(t);
  ts_group_shape g = one_piece(0, 4, 1);
  ts_trace_add_axis(tr, "pp", 4, FALSE, &g);
  ts_trace_set_programs(tr, 4);
  ts_op c = {0};
  c.kind = TS_OP_COMPUTE;
  c.cat = TS_CAT_FWD;
  c.label = ts_trace_label(tr, "fwd");
  c.flops = 1e12; /* 10 ms at 100 TFLOP/s */
  ts_trace_append(tr, 0, &c, NULL, 0);
  ts_op s = {0};
  s.kind = TS_OP_SEND;
  s.cat = TS_CAT_COMM_PP;
  s.label = ts_trace_label(tr, "act");
  s.bytes = 1e8;
  s.axis = 0;
  s.offset = 2;
  int dep = 0;
  ts_trace_append(tr, 0, &s, &dep, 1);
  ts_op rv = s;
  rv.kind = TS_OP_RECV;
  rv.offset = -2;
  ts_trace_append(tr, 2, &rv, NULL, 0);
  double want = analytic_time(t, tr);
  expect_close(want, 0.01 + 4e-6 + 1e8 / 50e9, 1e-9, "analytic");
  double got = sim_time(t, tr, NULL);
  expect_close(got, want, 1e-6, "compute + 2-hop send");
  ts_trace_free(tr);
}

/* ---- platforms ---- */

/* Every route of the in-process platform and of the Full XML is ts_route's, link by link. */
Test(platform, full_xml_routes_are_dimension_order)
{
  const dim_spec d[] = {{"x", 4, TS_SHAPE_RING, 100, 1},
                        {"y", 3, TS_SHAPE_MESH, 50, 1},
                        {"z", 2, TS_SHAPE_SWITCH, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 3);
  GError *e = NULL;
  g_autoptr(ts_platform) p = ts_platform_new(t, NULL, &e);
  cr_assert_not_null(p);
  g_autofree char *xml = ts_platform_xml(p, TS_PLATFORM_FULL, &e);
  cr_assert_not_null(xml);
  g_autofree char *path = tmp_path("ts-test-full-XXXXXX.xml");
  cr_assert(g_file_set_contents(path, xml, -1, NULL));
  cr_assert(ts_sg_init(NULL, &e));
  gboolean ok = ts_sg_load_xml(path, &e);
  cr_assert(ok, "%s", e != NULL ? e->message : "");
  GArray *route = g_array_new(FALSE, FALSE, sizeof(int));
  for (int a = 0; a < t->nchips; a++)
    for (int b = 0; b < t->nchips; b++) {
      if (a == b)
        continue;
      char na[16], nb[16];
      g_snprintf(na, sizeof na, "c%d", a);
      g_snprintf(nb, sizeof nb, "c%d", b);
      xbt_dynar_t links = xbt_dynar_new(sizeof(sg_link_t), NULL);
      sg_host_get_route(sg_host_by_name(na), sg_host_by_name(nb), links);
      g_array_set_size(route, 0);
      cr_assert(ts_platform_route(p, a, b, route));
      cr_assert_eq(xbt_dynar_length(links), route->len, "%s->%s", na, nb);
      for (guint k = 0; k < route->len; k++) {
        const char *got = sg_link_get_name(xbt_dynar_get_as(links, k, sg_link_t));
        cr_assert_str_eq(got, ts_platform_link_name(p, g_array_index(route, int, k)));
      }
      xbt_dynar_free(&links);
    }
  g_array_unref(route);
  g_unlink(path);
}

static void load_xml_ok(const ts_topo *t, ts_platform_routing r, const ts_platform_opts *o)
{
  GError *e = NULL;
  g_autoptr(ts_platform) p = ts_platform_new(t, o, &e);
  cr_assert_not_null(p);
  g_autofree char *xml = ts_platform_xml(p, r, &e);
  cr_assert_not_null(xml, "%s", e != NULL ? e->message : "");
  g_autofree char *path = tmp_path("ts-test-plat-XXXXXX.xml");
  cr_assert(g_file_set_contents(path, xml, -1, NULL));
  cr_assert(ts_sg_init(NULL, &e));
  gboolean ok = ts_sg_load_xml(path, &e);
  cr_assert(ok, "%s", e != NULL ? e->message : "");
  size_t hosts = sg_host_count();
  cr_expect_eq(hosts, (size_t)t->nchips);
  /* A route along every dimension exists and has the link's bandwidth. */
  double bw = sg_host_get_route_bandwidth(sg_host_by_name("c0"), sg_host_by_name("c1"));
  cr_expect(fabs(bw - t->dims[0].link_bw_Bps) <= 1e-9 * bw, "bw %g", bw);
  g_unlink(path);
}

Test(platform, torus_cluster_loads)
{
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 82, 1}, {"y", 8, TS_SHAPE_RING, 82, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  GError *e = NULL;
  g_autoptr(ts_platform) p = ts_platform_new(t, NULL, &e);
  ts_platform_routing r = ts_platform_auto_routing(p);
  cr_expect_eq(r, TS_PLATFORM_TORUS);
  load_xml_ok(t, TS_PLATFORM_AUTO, NULL);
}

Test(platform, dijkstra_gpu_cluster_loads)
{
  const dim_spec d[] = {{"node", 8, TS_SHAPE_SWITCH, 300, 0.7}, {"net", 4, TS_SHAPE_SWITCH, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_platform_opts o = {{0}};
  o.chips_per_port[1] = 8;
  load_xml_ok(t, TS_PLATFORM_DIJKSTRA, &o);
}

Test(platform, floyd_mesh_loads)
{
  const dim_spec d[] = {{"x", 5, TS_SHAPE_MESH, 50, 1}, {"y", 2, TS_SHAPE_RING, 50, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  load_xml_ok(t, TS_PLATFORM_FLOYD, NULL);
}

Test(platform, torus_refused_for_asymmetric)
{
  const dim_spec d[] = {{"x", 4, TS_SHAPE_RING, 100, 1}, {"y", 4, TS_SHAPE_RING, 25, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  GError *e = NULL;
  g_autoptr(ts_platform) p = ts_platform_new(t, NULL, &e);
  char *xml = ts_platform_xml(p, TS_PLATFORM_TORUS, &e);
  cr_assert_null(xml);
  cr_expect(strstr(e->message, "routing torus needs") != NULL, "%s", e->message);
  g_error_free(e);
  ts_platform_routing r = ts_platform_auto_routing(p);
  cr_expect_eq(r, TS_PLATFORM_FULL);
}

Test(platform, link_table)
{
  /* Mesh line ends have no outward link; a shared port is one link pair for its chips. */
  const dim_spec d[] = {{"x", 4, TS_SHAPE_MESH, 100, 1}, {"n", 2, TS_SHAPE_SWITCH, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_platform_opts o = {{0}};
  o.chips_per_port[1] = 2;
  GError *e = NULL;
  g_autoptr(ts_platform) p = ts_platform_new(t, &o, &e);
  cr_assert_not_null(p);
  int n = ts_platform_nlinks(p);
  cr_expect_eq(n, 2 * 3 * 2 + 2 * 2 * 2); /* 3 mesh edges x 2 dirs x 2 rows; 4 ports x 2 */
  ts_link_id end = {3, 0, +1}, shared = {1, 1, +1}, rep = {0, 1, +1};
  int i_end = ts_platform_link_index(p, &end);
  cr_expect_eq(i_end, -1);
  int i_sh = ts_platform_link_index(p, &shared), i_rep = ts_platform_link_index(p, &rep);
  cr_expect_eq(i_sh, i_rep);
  cr_expect_str_eq(ts_platform_link_name(p, i_rep), "c0.n.up");
  double lat_down = ts_platform_link_latency(p, i_rep + 1);
  cr_expect_eq(lat_down, 0.0);
}

/* ---- the command ---- */

static int run_cmd(const char *args, char **out, char **err)
{
  g_autofree char *cmd = g_strdup_printf("%s platform %s", TS_TRAINSIM_BIN, args);
  int status = -1;
  g_spawn_command_line_sync(cmd, out, err, &status, NULL);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(cmd, platform_writes_xml)
{
  g_autofree char *path = tmp_path("ts-test-cmd-XXXXXX.xml");
  g_autofree char *args = g_strdup_printf("--topology dgx-a100-4node -o %s", path);
  char *out = NULL, *err = NULL;
  int rc = run_cmd(args, &out, &err);
  cr_expect_eq(rc, 0, "%s", err);
  g_autofree char *xml = NULL;
  cr_assert(g_file_get_contents(path, &xml, NULL, NULL));
  cr_expect(strstr(xml, "routing=\"Full\"") != NULL);
  /* 25 GB/s HDR x the NCCL-fitted 0.7196, 10.532 us (topologies/dgx-a100-4node.ini [dim.net]). */
  cr_expect(strstr(xml, "<link id=\"c0.net.up\" bandwidth=\"17990000000.000004Bps\" "
                        "latency=\"1.0532e-05s\"/>") != NULL);
  g_unlink(path);
  g_free(out);
  g_free(err);
}

Test(cmd, platform_errors_one_line)
{
  const char *bad[] = {"",
                       "--topology nosuch",
                       "--topology tpu-v3-8x8 --routing fast",
                       "--topology asym-16x16 --routing torus",
                       "--topology dgx-a100-4node --chips-per-port net=3",
                       "--topology dgx-a100-4node --chips-per-port nett=8",
                       "--topology tpu-v3-8x8 -o /nonexistent-dir/p.xml",
                       "--topology " TS_SOURCE_DIR
                       "/bench/topologies/tpu-v3-64x64.ini --routing full"};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    char *out = NULL, *err = NULL;
    int rc = run_cmd(bad[i], &out, &err);
    cr_expect_eq(rc, 2, "'%s' -> %d", bad[i], rc);
    cr_expect(g_str_has_prefix(err, "trainsim platform: "), "'%s': %s", bad[i], err);
    const char *nl = strchr(err, '\n');
    cr_expect(nl != NULL && nl[1] == '\0', "one line for '%s': %s", bad[i], err);
    cr_expect_str_eq(out, "");
    g_free(out);
    g_free(err);
  }
}

/* ---- cost estimate and refusal ---- */

Test(estimate, counts_and_bounds)
{
  /* 8x4 torus, a ring all-reduce on every row: 32 hosts, 2 links per chip and dimension,
   * 32 ops (one per rank), at most 2 peers per member plus a send: 3 flows per rank. */
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}, {"y", 4, TS_SHAPE_RING, 25, 1}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  ts_group_shape g = one_piece(0, 8, 1);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, 64e6, 1);
  ts_simgrid_estimate e;
  ts_simgrid_estimate_cost(tr, t, NULL, &e);
  cr_expect_eq(e.hosts, 32);
  cr_expect_eq(e.links, 128);
  cr_expect_eq(e.ops, 32);
  cr_expect_eq(e.flows_at_once, 96);
  cr_expect(e.memory_bytes > 30e6 && e.memory_bytes < 100e6, "%g", e.memory_bytes);
  cr_expect_eq(e.max_memory_bytes, 0);
  /* Two copies at once: more ops, more memory. */
  g_autoptr(ts_trace) tr2 = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_RING, 64e6, 2);
  ts_simgrid_estimate e2;
  const char *cfg[] = {"trainsim/max-memory:1GiB", NULL};
  ts_simgrid_estimate_cost(tr2, t, cfg, &e2);
  cr_expect_eq(e2.ops, 64);
  cr_expect(e2.memory_bytes > e.memory_bytes);
  cr_expect_eq(e2.max_memory_bytes, 1073741824.0);
  GError *err = NULL;
  cr_expect(ts_simgrid_preflight(tr2, t, cfg, &err), "%s", err != NULL ? err->message : "");
  const char *tiny[] = {"trainsim/max-memory:1MiB", NULL};
  cr_expect_not(ts_simgrid_preflight(tr2, t, tiny, &err));
  cr_assert_not_null(err);
  cr_expect_eq(err->code, TS_ERROR_INVALID);
  cr_expect(strstr(err->message, "--cfg trainsim/max-memory:SIZE") != NULL, "%s", err->message);
  g_clear_error(&err);
  const char *bad[] = {"trainsim/max-memory:lots", NULL};
  cr_expect_not(ts_simgrid_preflight(tr2, t, bad, &err));
  cr_expect_eq(err->code, TS_ERROR_INPUT);
  g_clear_error(&err);
}

Test(estimate, refusal_is_one_line_exit_2)
{
  g_autofree char *cmd =
      g_strdup_printf("%s run -t tpu-v3-8x8 -m bert-base -b 64 -s dp=64 --backend simgrid "
                      "--cfg trainsim/max-memory:1MiB",
                      TS_TRAINSIM_BIN);
  char *out = NULL, *err = NULL;
  int status = -1;
  g_spawn_command_line_sync(cmd, &out, &err, &status, NULL);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status %d: %s", status, err);
  cr_expect(g_str_has_prefix(err, "trainsim run: the simgrid replay would need about "), "%s", err);
  cr_expect(strstr(err, "64 hosts") != NULL && strstr(err, "trainsim/max-memory") != NULL, "%s",
            err);
  const char *nl = strchr(err, '\n');
  cr_expect(nl != NULL && nl[1] == '\0', "one line: %s", err);
  cr_expect_str_eq(out, "");
  g_free(out);
  g_free(err);
}

/* ---- symmetry collapse ---- */

/* tr with collapse on (through the backend API) and off: *broken gets whether the collapsed
 * run stopped on a broken symmetry; returns the collapsed step (or -1) and the full one. */
static double collapsed_and_full(const ts_topo *t, const ts_trace *tr, gboolean *broken,
                                 double *full, gint64 *flows_c, gint64 *flows_f)
{
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new(t, NULL, &e);
  cr_assert_not_null(b, "%s", e != NULL ? e->message : "");
  cr_assert(ts_backend_simgrid_set_collapse(b, TRUE));
  char *msg = NULL;
  double c = replay(tr, b, &msg);
  *broken = ts_backend_simgrid_symmetry_broken(b);
  *flows_c = ts_backend_simgrid_flows(b);
  g_free(msg);
  cr_assert_not(ts_backend_simgrid_set_collapse(b, FALSE));
  *full = replay(tr, b, NULL);
  *flows_f = ts_backend_simgrid_flows(b);
  ts_backend_free(b);
  return c;
}

Test(symmetry, torus_allreduce_collapses_exactly)
{
  /* 2D torus all-reduce, one dimension at a time (torus-dimwise), on 8x8: X steps on row 0, Y
   * steps on column 0, the rest images. (The concurrent `torus` schedule is collapsed by
   * transfer classes instead: concurrent_torus_collapses_exactly.) */
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}, {"y", 8, TS_SHAPE_RING, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  int dims[] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_TORUS_DIMWISE, 256e6, 1);
  gboolean broken;
  double full;
  gint64 fc, ff;
  double c = collapsed_and_full(t, tr, &broken, &full, &fc, &ff);
  cr_expect_not(broken);
  cr_expect(fabs(c - full) <= 1e-12 * full, "collapsed %.17g s, full %.17g s", c, full);
  /* 3 runs x 128 flows in full; one line of 8 members (16 flows) per run collapsed. */
  cr_expect_eq(ff, 3 * 128);
  cr_expect_eq(fc, 3 * 16);
}

/* The concurrent `torus` all-reduce (chunk c along dimension c in the same step) on a torus of
 * dims: every step's transfers are classed by bytes and offset, one per class simulated; with
 * an evenly divided buffer the classes are member 0's transfers. */
static void concurrent_torus(const dim_spec *d, int nd, int nchips, double bytes)
{
  g_autoptr(ts_topo) t = topo_make(d, nd);
  int dims[] = {0, 1, 2};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, nd, &g);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_TORUS, bytes, 1);
  gboolean broken;
  double full;
  gint64 fc, ff;
  double c = collapsed_and_full(t, tr, &broken, &full, &fc, &ff);
  cr_expect_not(broken);
  cr_expect(full > 0);
  cr_expect(fabs(c - full) <= 1e-12 * full, "collapsed %.17g s, full %.17g s", c, full);
  /* One member's flows per step instead of every member's. */
  cr_expect(fc > 0 && fc * nchips == ff,
            "collapsed %" G_GINT64_FORMAT " flows, full %" G_GINT64_FORMAT, fc, ff);
}

Test(symmetry, concurrent_torus_collapses_exactly)
{
  /* 8x8, the y links slower and longer. */
  const dim_spec d2[] = {{"x", 8, TS_SHAPE_RING, 100, 1}, {"y", 8, TS_SHAPE_RING, 25, 3}};
  concurrent_torus(d2, 2, 64, 256e6);
}

Test(symmetry, concurrent_torus_uneven_collapses_exactly)
{
  /* 256e6 + 7 bytes: chunks and segments a byte apart, more classes, still exact. */
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}, {"y", 8, TS_SHAPE_RING, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  int dims[] = {0, 1};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 2, &g);
  g_autoptr(ts_trace) tr = coll_trace(t, &g, TS_COLL_ALLREDUCE, TS_ALGO_TORUS, 256e6 + 7, 1);
  gboolean broken;
  double full;
  gint64 fc, ff;
  double c = collapsed_and_full(t, tr, &broken, &full, &fc, &ff);
  cr_expect_not(broken);
  cr_expect(fabs(c - full) <= 1e-12 * full, "collapsed %.17g s, full %.17g s", c, full);
  cr_expect(fc * 4 <= ff && fc * 64 > ff,
            "collapsed %" G_GINT64_FORMAT " flows, full %" G_GINT64_FORMAT, fc, ff);
}

Test(symmetry, concurrent_torus_3d_collapses_exactly)
{
  /* SimGrid takes one platform per process: the 3D torus in its own test. 192e6 bytes divide
   * evenly into 3 chunks and their 4 x 4 x 4 x 2-way segments, so the classes are member 0's
   * transfers (an uneven split adds classes of chunks a byte apart). */
  const dim_spec d3[] = {{"x", 4, TS_SHAPE_RING, 100, 1},
                         {"y", 4, TS_SHAPE_RING, 50, 2},
                         {"z", 4, TS_SHAPE_RING, 25, 3}};
  concurrent_torus(d3, 3, 64, 192e6);
}

static void crossing_flow(ts_coll_algo algo)
{
  /* The same all-reduce while a ring all-reduce runs on one row: its flows cross links of the
   * X steps' images (rows 1-7 are not images of row 0 any more). The collapsed run stops
   * broken; the full replay is what counts. */
  const dim_spec d[] = {{"x", 8, TS_SHAPE_RING, 100, 1}, {"y", 8, TS_SHAPE_RING, 25, 3}};
  g_autoptr(ts_topo) t = topo_make(d, 2);
  g_autoptr(ts_trace) tr = ts_trace_new(t);
  /* Axes: x symmetric, y asymmetric (a program per row, so row 5 can differ). */
  ts_group_shape gx = one_piece(0, 8, 1), gy = one_piece(1, 8, 1);
  int ax = ts_trace_add_axis(tr, "x", 8, TRUE, &gx);
  int ay = ts_trace_add_axis(tr, "y", 8, FALSE, &gy);
  int both[] = {ax, ay};
  int g_all = ts_trace_group(tr, both, 2);
  int g_row = ts_trace_group(tr, &ax, 1);
  ts_trace_set_programs(tr, 8);
  for (int p = 0; p < 8; p++) {
    ts_op op = {0};
    op.kind = TS_OP_COLL;
    op.cat = TS_CAT_COMM_DP;
    op.label = ts_trace_label(tr, "grad");
    op.bytes = 256e6;
    op.coll = TS_COLL_ALLREDUCE;
    op.algo = algo;
    op.group = g_all;
    ts_trace_append(tr, p, &op, NULL, 0);
    if (p == 5) {
      op.stream = 1;
      op.label = ts_trace_label(tr, "row");
      op.algo = TS_ALGO_RING;
      op.group = g_row;
      ts_trace_append(tr, p, &op, NULL, 0);
    }
  }
  gboolean broken;
  double full;
  gint64 fc, ff;
  double c = collapsed_and_full(t, tr, &broken, &full, &fc, &ff);
  cr_expect(broken, "%s", ts_coll_algo_name(algo));
  cr_expect(c < 0, "a broken collapsed run reports no step (%g)", c);
  cr_expect(full > 0);
}

Test(symmetry, crossing_flow_breaks_it)
{
  crossing_flow(TS_ALGO_TORUS_DIMWISE);
  crossing_flow(TS_ALGO_TORUS); /* concurrent: translations broken the same way */
}

Test(symmetry, planner_steps_collapsed_equal_full)
{
  /* Through ts_run (collapse on by default, the full replay when it breaks). Collapsed:
   * ResNet-50 data-parallel with torus-dimwise (2D torus steps on one line) and with auto's
   * concurrent `torus` (steps collapsed by transfer classes: bytes and offset). Nothing to collapse
   * (one-piece groups) within a step: a 1F1B pipeline. One rank per class (the other rows and
   * columns are images): BERT-large tp@x, dp@y (1,632 flows instead of 13,056). Broken, replayed
   * in full:
   * BERT-base with gradients crossing tensor-parallel links. */
  const struct {
    const char *model, *topo, *split;
    gint64 batch;
    ts_coll_algo algo;
    gboolean collapses;
  } steps[] = {{"resnet50", "tpu-v3-8x8", "dp=64", 1024, TS_ALGO_TORUS_DIMWISE, TRUE},
               {"resnet50", "tpu-v3-8x8", "dp=64", 1024, TS_ALGO_AUTO, TRUE},
               {"bert-large", "tpu-v3-8x8", "tp=8@x,dp=8@y", 512, TS_ALGO_TORUS_DIMWISE, TRUE},
               {"bert-base", "tpu-v3-8x8", "tp=4@x,dp=16@x+y", 64, TS_ALGO_TORUS_DIMWISE, FALSE},
               {"bert-large", "tpu-v3-8x8", "tp=2,pp=4,dp=8,zero=1,schedule=1f1b", 512,
                TS_ALGO_TORUS_DIMWISE, FALSE}};
  for (gsize i = 0; i < G_N_ELEMENTS(steps); i++) {
    ts_result r[2] = {{0}, {0}};
    const char *collapse[] = {"trainsim/symmetry:collapse", NULL};
    const char *full[] = {"trainsim/symmetry:full", NULL};
    predict_cfg_algo(steps[i].model, steps[i].topo, steps[i].split, steps[i].batch, "simgrid",
                     collapse, steps[i].algo, &r[0]);
    predict_cfg_algo(steps[i].model, steps[i].topo, steps[i].split, steps[i].batch, "simgrid", full,
                     steps[i].algo, &r[1]);
    cr_expect(fabs(r[0].step_time_s - r[1].step_time_s) <= 1e-9 * r[1].step_time_s,
              "%s %s: collapsed %.17g s, full %.17g s", steps[i].model, steps[i].split,
              r[0].step_time_s, r[1].step_time_s);
    if (steps[i].collapses)
      cr_expect(r[0].flows * 4 <= r[1].flows,
                "%s: collapsed %" G_GINT64_FORMAT " flows, full %" G_GINT64_FORMAT, steps[i].split,
                r[0].flows, r[1].flows);
    else
      cr_expect_eq(r[0].flows, r[1].flows, "%s: broken symmetry, the full replay's flows",
                   steps[i].split);
    ts_result_clear(&r[0]);
    ts_result_clear(&r[1]);
  }
}

Test(config, parallel_threads_refused, .init = cr_redirect_stderr)
{
  /* Actor mode crashed with contexts/nthreads:2 (shares update the backend without locks). */
  expect_cfg_error("contexts/nthreads:2", "contexts/nthreads:1");
}

/* ---- one rank per class (the engine's collapsed replay) under contention ---- */

typedef struct {
  double step[3];      /* rank-collapsed, every rank with collapsed steps, every flow */
  gint64 flows[3];     /* flows SimGrid ran in each */
  gboolean broken;     /* the rank-collapsed replay broke its symmetry */
  ts_replay_mode mode; /* the mode the rank-collapsed replay ran in */
} three_ways;

static double replay_mode(const ts_trace *tr, ts_backend *b, ts_replay_mode mode,
                          ts_replay_mode *ran)
{
  ts_replay *r = ts_replay_new(tr, b, mode);
  if (ran != NULL)
    *ran = ts_replay_get_mode(r);
  ts_replay_result res;
  GError *e = NULL;
  gboolean ok = ts_replay_run(r, &res, &e);
  ts_replay_free(r);
  if (!ok) {
    g_error_free(e);
    return -1;
  }
  return res.step_time_s;
}

/* The same trace three ways on one backend: one rank per class, every rank (collective steps
 * still collapsed), every flow. */
static void replay_three_ways(const ts_topo *t, const ts_trace *tr, three_ways *w)
{
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new(t, NULL, &e);
  cr_assert_not_null(b, "%s", e != NULL ? e->message : "");
  cr_assert(ts_backend_simgrid_set_collapse(b, TRUE));
  w->step[0] = replay_mode(tr, b, TS_REPLAY_COLLAPSED, &w->mode);
  w->broken = ts_backend_simgrid_symmetry_broken(b);
  w->flows[0] = ts_backend_simgrid_flows(b);
  for (int k = 1; k < 3; k++) {
    ts_backend_simgrid_set_collapse(b, k == 1);
    w->step[k] = replay_mode(tr, b, TS_REPLAY_FULL, NULL);
    w->flows[k] = ts_backend_simgrid_flows(b);
  }
  ts_backend_free(b);
  cr_assert(w->step[2] > 0, "the full replay failed");
}

static ts_trace *planner_trace_algo(const char *model, const ts_topo *t, const char *split,
                                    gint64 batch, gint64 micro_batch, ts_coll_algo algo);

static ts_trace *planner_trace(const char *model, const ts_topo *t, const char *split, gint64 batch,
                               gint64 micro_batch)
{
  return planner_trace_algo(model, t, split, batch, micro_batch, TS_ALGO_AUTO);
}

/* The planner's trace with every collective's algorithm set (TS_ALGO_AUTO: the default). */
static ts_trace *planner_trace_algo(const char *model, const ts_topo *t, const char *split,
                                    gint64 batch, gint64 micro_batch, ts_coll_algo algo)
{
  GError *e = NULL;
  g_autofree char *mp = g_strdup_printf("%s/models/%s.ini", TS_SOURCE_DIR, model);
  g_autoptr(ts_model) m = ts_model_load(mp, &e);
  cr_assert_not_null(m, "%s", e != NULL ? e->message : "");
  g_autoptr(ts_split) sp = ts_split_parse(split, &e);
  cr_assert_not_null(sp, "%s", e != NULL ? e->message : "");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  po.micro_batch = micro_batch;
  po.algo = algo;
  g_autoptr(ts_plan) p = ts_plan_new(m, t, sp, &po, &e);
  cr_assert_not_null(p, "%s: %s", split, e != NULL ? e->message : "");
  ts_trace *tr = ts_plan_trace(p, &e);
  cr_assert_not_null(tr, "%s", e != NULL ? e->message : "");
  return tr;
}

static ts_topo *shipped_topo(const char *name)
{
  GError *e = NULL;
  g_autofree char *tp = g_strdup_printf("%s/topologies/%s.ini", TS_SOURCE_DIR, name);
  ts_topo *t = ts_topo_load(tp, &e);
  cr_assert_not_null(t, "%s", e != NULL ? e->message : "");
  return t;
}

static void expect_rank_collapse(const char *model, const char *topo, const char *split,
                                 gint64 batch, gint64 micro_batch, gboolean collapses)
{
  g_autoptr(ts_topo) t = shipped_topo(topo);
  g_autoptr(ts_trace) tr = planner_trace(model, t, split, batch, micro_batch);
  three_ways w;
  replay_three_ways(t, tr, &w);
  /* Every way that finishes gives the full replay's step (CM02 shares: 1e-9). */
  for (int k = 0; k < 2; k++)
    if (w.step[k] >= 0)
      cr_expect(fabs(w.step[k] - w.step[2]) <= 1e-9 * w.step[2],
                "%s %s way %d: %.17g s, full %.17g s", model, split, k, w.step[k], w.step[2]);
  if (collapses) {
    cr_expect_eq(w.mode, TS_REPLAY_COLLAPSED, "%s", split);
    cr_expect_not(w.broken, "%s: symmetry broken", split);
    cr_expect(w.step[0] > 0 && w.flows[0] < w.flows[1],
              "%s: one rank per class ran %" G_GINT64_FORMAT " flows, every rank %" G_GINT64_FORMAT,
              split, w.flows[0], w.flows[1]);
  } else {
    cr_expect(w.broken, "%s: expected a broken symmetry", split);
    cr_expect(w.step[0] < 0, "%s: a broken replay reports no step", split);
  }
}

/* One rank per class, fewer flows, the full replay's step (SimGrid takes one platform per
 * process: one case per test). */
Test(rank_collapse, pipeline_1f1b)
{
  /* stage sends along y: their images are the other columns */
  expect_rank_collapse("bert-large", "tpu-v3-8x8", "pp=8@y,dp=8@x", 512, 4, TRUE);
}

Test(rank_collapse, pipeline_interleaved)
{
  expect_rank_collapse("bert-large", "tpu-v3-8x8", "pp=8@y,dp=8@x,schedule=interleaved", 512, 4,
                       TRUE);
}

Test(rank_collapse, tensor_and_data_parallel)
{
  /* the other rows' tensor-parallel rings and the other columns' gradient rings are images */
  expect_rank_collapse("bert-large", "tpu-v3-8x8", "tp=8@x,dp=8@y", 512, 0, TRUE);
}

Test(rank_collapse, pipeline_of_gpu_nodes)
{
  /* tensor parallel inside a DGX node, stage sends across the fabric: the images are the other
   * GPUs' sends, on their own ports */
  expect_rank_collapse("gpt3-350m", "dgx-a100-4node", "tp=8@node,pp=4", 64, 1, TRUE);
}

Test(rank_collapse, pipeline_of_gpu_nodes_with_data_parallel_ghosts)
{
  /* A stage send's images on the other data-parallel replica end on GPU ports that the
   * representative's gradient all-reduce uses: they run as real flows (ghosts), checked to end
   * with the send; the tensor-parallel images stay images (25,740 flows instead of 52,320). */
  expect_rank_collapse("gpt3-350m", "dgx-a100-4node", "tp=8@node,pp=2,dp=2", 64, 1, TRUE);
}

Test(rank_collapse, broken_symmetry_is_detected)
{
  /* Data-parallel rings strided over the tensor-parallel chips: each class's ring shares links
   * with its images (the others' rings), which the rank-collapsed replay cannot see. It must
   * stop, and the other two ways agree. */
  expect_rank_collapse("gpt3-350m", "tpu-v3-8x8", "tp=2@x,pp=4@y,dp=8", 64, 1, FALSE);
}

/* A shipped trace (traces/NAME) on one DGX A100 node, checked, resolved and replayed the
 * three ways. */
static void replay_shipped_trace_three_ways(const char *name, three_ways *w)
{
  g_autoptr(ts_topo) t = shipped_topo("dgx-a100-1node");
  GError *e = NULL;
  g_autofree char *path = g_strdup_printf("%s/traces/%s", TS_SOURCE_DIR, name);
  g_autoptr(ts_trace) tr = ts_trace_load(path, &e);
  cr_assert_not_null(tr, "%s", e != NULL ? e->message : "");
  cr_assert(ts_trace_check(tr, t, &e) && ts_trace_resolve_algos(tr, t, &e), "%s",
            e != NULL ? e->message : "");
  replay_three_ways(t, tr, w);
}

Test(rank_collapse, imported_trace_replays_every_rank)
{
  /* An imported trace names its peers rank by rank: the engine replays every rank. */
  three_ways w;
  replay_shipped_trace_three_ways("imported/chakra/bert-base-tp2-pp2-dp2.trace", &w);
  cr_expect_eq(w.mode, TS_REPLAY_FULL);
  cr_expect(fabs(w.step[0] - w.step[2]) <= 1e-9 * w.step[2], "%.17g s, full %.17g s", w.step[0],
            w.step[2]);
  cr_expect_eq(w.flows[0], w.flows[2]);
}

Test(rank_collapse, fallback_after_a_break_keeps_no_state)
{
  /* The shipped 1F1B trace breaks the symmetry on one DGX node (tensor-parallel flows share a
   * GPU's port with the images' stage sends); the replays after it must equal a fresh full
   * replay. The launch clocks of the stopped replay once delayed every compute of the next
   * (0.117 s instead of 0.0627 s, before the trace carried epilogue traffic). */
  three_ways w;
  replay_shipped_trace_three_ways("examples/bert-base-tp2-pp2-dp2.trace", &w);
  cr_expect(w.broken);
  cr_expect(fabs(w.step[1] - w.step[2]) <= 1e-9 * w.step[2],
            "after the break %.17g s, full %.17g s", w.step[1], w.step[2]);
  /* the pinned step (traces/expected-step-times.tsv), to its solver's 1e-6 (0.0651158 s before
   * the logits op launched the cross-entropy's kernels and the A100 launch went 64 -> 62 us;
   * 0.06686442 before the DGX A100 node's refit with Simple's pieces, December 2026) */
  cr_expect(fabs(w.step[2] - 0.066864188441826469) <= 1e-6 * w.step[2], "%.17g s", w.step[2]);
}

Test(rank_collapse, degraded_arrays_replay_every_rank)
{
  /* A dead link or a straggler makes chips unlike their images: ts_run replays every rank and
   * every flow, the same step as asking for it. */
  const char *dead[] = {"link:x:0,0", NULL};
  const char *slow[] = {"chip:3=0.5", NULL};
  const char *const *opts[][2] = {{dead, NULL}, {NULL, slow}};
  for (gsize i = 0; i < G_N_ELEMENTS(opts); i++) {
    ts_result r[2] = {{0}, {0}};
    for (int k = 0; k < 2; k++) {
      g_autoptr(ts_topo) t = shipped_topo("tpu-v3-8x8");
      GError *e = NULL;
      cr_assert(ts_degrade_apply_options(t, (char **)opts[i][0], (char **)opts[i][1], &e), "%s",
                e != NULL ? e->message : "");
      g_autofree char *mp = g_strdup_printf("%s/models/bert-large.ini", TS_SOURCE_DIR);
      g_autoptr(ts_model) m = ts_model_load(mp, &e);
      g_autoptr(ts_split) sp = ts_split_parse("tp=8@x,dp=8@y", &e);
      ts_plan_options po;
      ts_plan_options_default(&po);
      po.global_batch = 512;
      const char *cfg[] = {k == 0 ? "trainsim/symmetry:collapse" : "trainsim/symmetry:full", NULL};
      ts_run_options ro = {.backend = "simgrid", .sg_cfg = cfg};
      cr_assert(ts_run_predict(m, t, sp, &po, &ro, &r[k], &e), "%s", e != NULL ? e->message : "");
    }
    cr_expect(fabs(r[0].step_time_s - r[1].step_time_s) <= 1e-9 * r[1].step_time_s,
              "case %zu: %.17g s, full %.17g s", i, r[0].step_time_s, r[1].step_time_s);
    cr_expect_eq(r[0].flows, r[1].flows, "case %zu", i);
    ts_result_clear(&r[0]);
    ts_result_clear(&r[1]);
  }
}

/* ---- folding by translations (issue 15, third session) ---- */

/* Every link's bytes and busy time of the last replay, indexed by link. */
static void link_loads(ts_backend *b, double *bytes, double *busy, int n)
{
  GPtrArray *rows = NULL;
  GError *e = NULL;
  cr_assert(ts_backend_simgrid_link_report(b, &rows, NULL, &e), "%s", e != NULL ? e->message : "");
  cr_assert_eq((int)rows->len, n);
  for (guint i = 0; i < rows->len; i++) {
    const ts_link_load *l = g_ptr_array_index(rows, i);
    bytes[l->link] = l->bytes;
    busy[l->link] = l->busy_s;
  }
  g_ptr_array_unref(rows);
}

Test(fold, strided_rings_fold_exactly)
{
  /* GPT-3's kind: data-parallel rings strided over the tensor-parallel chips (dp@x:4, stride 2,
   * over tp@x:2) share x links with their images, so one rank per class would break. Moving
   * one place along the ring (x by 2) maps the whole replay onto itself: the fold simulates the
   * flows leaving x < 2 on the quotient torus, a quarter of them, with the same step and the
   * same load on every link. */
  g_autoptr(ts_topo) t = shipped_topo("tpu-v3-8x8");
  g_autoptr(ts_trace) tr = planner_trace("gpt3-350m", t, "tp=2@x,pp=8@y,dp=4@x", 64, 1);
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new(t, NULL, &e);
  cr_assert_not_null(b, "%s", e != NULL ? e->message : "");
  cr_assert(ts_backend_simgrid_set_collapse(b, TRUE));
  cr_expect(ts_backend_simgrid_images_cross(b, tr), "one rank per class would break");
  cr_assert(ts_backend_simgrid_set_fold(b, tr));
  ts_replay_mode ran;
  double folded = replay_mode(tr, b, TS_REPLAY_COLLAPSED, &ran);
  cr_expect_eq(ran, TS_REPLAY_COLLAPSED);
  cr_expect_not(ts_backend_simgrid_symmetry_broken(b));
  gint64 folded_flows = ts_backend_simgrid_flows(b);
  int n = ts_platform_nlinks(ts_backend_simgrid_platform(b));
  g_autofree double *fb = g_new(double, n), *fbusy = g_new(double, n);
  g_autofree double *bb = g_new(double, n), *bbusy = g_new(double, n);
  link_loads(b, fb, fbusy, n);
  ts_backend_simgrid_set_collapse(b, FALSE); /* every rank, every flow */
  double full = replay_mode(tr, b, TS_REPLAY_FULL, NULL);
  gint64 full_flows = ts_backend_simgrid_flows(b);
  link_loads(b, bb, bbusy, n);
  ts_backend_free(b);
  cr_assert(folded > 0 && full > 0);
  cr_expect(fabs(folded - full) <= 1e-9 * full, "folded %.17g s, full %.17g s", folded, full);
  /* every flow stands for its 4 translates, none of them simulated */
  cr_expect_eq(folded_flows * 4, full_flows, "folded %" G_GINT64_FORMAT ", full %" G_GINT64_FORMAT,
               folded_flows, full_flows);
  int loaded = 0;
  for (int l = 0; l < n; l++) {
    cr_expect(fabs(fb[l] - bb[l]) <= 1e-9 * bb[l], "link %d: %.17g B, full %.17g B", l, fb[l],
              bb[l]);
    cr_expect(fabs(fbusy[l] - bbusy[l]) <= 1e-9 * full, "link %d: busy %.17g s, full %.17g s", l,
              fbusy[l], bbusy[l]);
    loaded += bb[l] > 0;
  }
  cr_expect(loaded > n / 2, "%d of %d links loaded", loaded, n);
}

Test(fold, snaked_rings_have_no_exact_collapse)
{
  /* dp=8 over x:4 x y:2 (GPT-3 175B's dp@x:4+y:2 on the pod) with bidir-ring (auto's choice
   * before it left flat rings out on sub-grids of several axes): the gradient ring snakes
   * through the 4 x 2 grid without a wrap-around edge along x, so the replicas at the ring's x
   * ends and those in the middle see different loads: the full replay itself is not symmetric
   * along the data-parallel axis, and no collapse along it can be exact. The fold is refused
   * before replaying, and the full replay shows why. */
  g_autoptr(ts_topo) t = shipped_topo("tpu-v3-8x8");
  g_autoptr(ts_trace) tr =
      planner_trace_algo("gpt3-350m", t, "tp=2@x,pp=4@y,dp=8", 64, 1, TS_ALGO_BIDIR_RING);
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new(t, NULL, &e);
  cr_assert_not_null(b, "%s", e != NULL ? e->message : "");
  cr_assert(ts_backend_simgrid_set_collapse(b, TRUE));
  cr_expect(ts_backend_simgrid_images_cross(b, tr));
  cr_expect_not(ts_backend_simgrid_set_fold(b, tr), "no translation maps the snaked ring");
  ts_backend_simgrid_set_collapse(b, FALSE);
  ts_replay *r = ts_replay_new(tr, b, TS_REPLAY_FULL);
  ts_replay_keep_spans(r, TRUE);
  ts_replay_result res;
  cr_assert(ts_replay_run(r, &res, &e), "%s", e != NULL ? e->message : "");
  /* chips 0, 2 and 6: tensor rank 0 of the first stage in data-parallel replicas x = 0, 1 and
   * 3 along the ring (x stride 2); each op's end, per chip */
  const GArray *spans = ts_replay_spans(r);
  int nops = tr->programs[0].nops;
  g_autofree double *end = g_new0(double, 3 * (gsize)nops);
  const int chips[3] = {0, 2, 6};
  for (guint i = 0; i < spans->len; i++) {
    const ts_span *sp = &g_array_index(spans, ts_span, i);
    for (int c = 0; c < 3; c++)
      if (sp->rank == chips[c] && sp->program == 0 && sp->op < nops)
        end[(gsize)c * nops + sp->op] = sp->end_s;
  }
  double d02 = 0, d06 = 0;
  for (int i = 0; i < nops; i++) {
    d02 = fmax(d02, fabs(end[i] - end[(gsize)nops + i]));
    d06 = fmax(d06, fabs(end[i] - end[2 * (gsize)nops + i]));
  }
  /* (Replicas 0 and 3, the ring's x ends, were alike with the two rings of half shards before
   * s14; with whole shards both ways the tp pairs' traffic on x, which is not mirror-symmetric,
   * tells them apart too: d06 is no longer checked.) */
  cr_expect(d02 > 1e-7, "replicas 0 and 1 differ: %g s at most", d02);
  (void)d06;
  ts_replay_free(r);
  ts_backend_free(b);
}

/* Every collective of the trace on a group of several pieces: its algorithm. */
static gboolean multi_piece_algos(const ts_trace *tr, int *ring, int *other)
{
  *ring = *other = 0;
  for (int p = 0; p < tr->nprograms; p++)
    for (int i = 0; i < tr->programs[p].nops; i++) {
      const ts_op op = ts_program_op(&tr->programs[p], i);
      if (op.kind != TS_OP_COLL || op.group < 0)
        continue;
      const ts_group *g = g_ptr_array_index(tr->groups, op.group);
      if (g->shape.npieces < 2)
        continue;
      if (op.algo == TS_ALGO_RING || op.algo == TS_ALGO_BIDIR_RING)
        (*ring)++;
      else
        (*other)++;
    }
  return *other > 0;
}

Test(fold, sub_grid_gradients_fold_exactly_under_auto)
{
  /* The snaked case's split under auto: the gradient all-reduces over the 4 x 2 replica grid
   * run axis by axis (no flat ring over several torus axes), each axis's rings wrap, and the
   * whole replay is invariant under the grid's translations: the fold applies, simulates an
   * eighth of the flows, and gives every flow's step and every link's load to 1e-9. */
  g_autoptr(ts_topo) t = shipped_topo("tpu-v3-8x8");
  g_autoptr(ts_trace) tr = planner_trace("gpt3-350m", t, "tp=2@x,pp=4@y,dp=8", 64, 1);
  int ring = 0, other = 0;
  cr_expect(multi_piece_algos(tr, &ring, &other), "the gradient all-reduces are in the trace");
  cr_expect_eq(ring, 0, "%d collectives over the sub-grid as one flat ring", ring);
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new(t, NULL, &e);
  cr_assert_not_null(b, "%s", e != NULL ? e->message : "");
  cr_assert(ts_backend_simgrid_set_collapse(b, TRUE));
  cr_assert(ts_backend_simgrid_set_fold(b, tr), "the per-axis all-reduce is translation-invariant");
  ts_replay_mode ran;
  double folded = replay_mode(tr, b, TS_REPLAY_COLLAPSED, &ran);
  cr_expect_eq(ran, TS_REPLAY_COLLAPSED);
  cr_expect_not(ts_backend_simgrid_symmetry_broken(b));
  gint64 folded_flows = ts_backend_simgrid_flows(b);
  int n = ts_platform_nlinks(ts_backend_simgrid_platform(b));
  g_autofree double *fb = g_new(double, n), *fbusy = g_new(double, n);
  g_autofree double *bb = g_new(double, n), *bbusy = g_new(double, n);
  link_loads(b, fb, fbusy, n);
  ts_backend_simgrid_set_collapse(b, FALSE);
  double full = replay_mode(tr, b, TS_REPLAY_FULL, NULL);
  gint64 full_flows = ts_backend_simgrid_flows(b);
  link_loads(b, bb, bbusy, n);
  ts_backend_free(b);
  cr_assert(folded > 0 && full > 0);
  cr_expect(fabs(folded - full) <= 1e-9 * full, "folded %.17g s, full %.17g s", folded, full);
  cr_expect_eq(folded_flows * 8, full_flows, "folded %" G_GINT64_FORMAT ", full %" G_GINT64_FORMAT,
               folded_flows, full_flows);
  for (int l = 0; l < n; l++) {
    cr_expect(fabs(fb[l] - bb[l]) <= 1e-9 * bb[l], "link %d: %.17g B, full %.17g B", l, fb[l],
              bb[l]);
    cr_expect(fabs(fbusy[l] - bbusy[l]) <= 1e-9 * full, "link %d: busy %.17g s, full %.17g s", l,
              fbusy[l], bbusy[l]);
  }
}

/* GPT-3 350M on tpu-v3-8x8 (batch 64, micro-batch 1) through ts_run on SimGrid: r[0] by
 * default (trainsim/symmetry:collapse), r[1] with every flow (trainsim/symmetry:full). */
static void predict_collapsed_and_full(const char *split, ts_coll_algo algo, ts_result r[2])
{
  for (int k = 0; k < 2; k++) {
    g_autoptr(ts_topo) t = shipped_topo("tpu-v3-8x8");
    GError *e = NULL;
    g_autofree char *mp = g_strdup_printf("%s/models/gpt3-350m.ini", TS_SOURCE_DIR);
    g_autoptr(ts_model) m = ts_model_load(mp, &e);
    cr_assert_not_null(m, "%s", e != NULL ? e->message : "");
    g_autoptr(ts_split) sp = ts_split_parse(split, &e);
    cr_assert_not_null(sp, "%s", e != NULL ? e->message : "");
    ts_plan_options po;
    ts_plan_options_default(&po);
    po.global_batch = 64;
    po.micro_batch = 1;
    po.algo = algo;
    const char *cfg[] = {k == 0 ? "trainsim/symmetry:collapse" : "trainsim/symmetry:full", NULL};
    ts_run_options ro = {.backend = "simgrid", .sg_cfg = cfg};
    cr_assert(ts_run_predict(m, t, sp, &po, &ro, &r[k], &e), "%s", e != NULL ? e->message : "");
  }
}

Test(fold, snaked_ring_through_ts_run_falls_back_to_every_flow)
{
  /* The same split with bidir-ring forced (the snake): ts_run refuses the fold and replays
   * every rank, so the default and trainsim/symmetry:full give the same step and flows. */
  ts_result r[2] = {{0}, {0}};
  predict_collapsed_and_full("tp=2@x,pp=4@y,dp=8", TS_ALGO_BIDIR_RING, r);
  cr_expect(fabs(r[0].step_time_s - r[1].step_time_s) <= 1e-9 * r[1].step_time_s,
            "default %.17g s, full %.17g s", r[0].step_time_s, r[1].step_time_s);
  cr_expect_eq(r[0].flows, r[1].flows, "default %" G_GINT64_FORMAT ", full %" G_GINT64_FORMAT,
               r[0].flows, r[1].flows);
  ts_result_clear(&r[0]);
  ts_result_clear(&r[1]);
}

Test(estimate, one_rank_per_class_expected_every_rank_checked_again)
{
  /* tp=2@x,pp=4@y,dp=8 on 8x8: tp and dp symmetric, so one rank per class is 4 ranks (one per
   * stage) of 64. The preflight expects that replay; symmetry:full expects every rank. With
   * bidir-ring gradients the fold is refused and ts_run replays every rank, so a limit
   * between the two estimates passes the preflight and is refused in one line (exit 2) by
   * the every-rank check before that replay starts. */
  g_autoptr(ts_topo) t = shipped_topo("tpu-v3-8x8");
  g_autoptr(ts_trace) tr =
      planner_trace_algo("gpt3-350m", t, "tp=2@x,pp=4@y,dp=8", 64, 1, TS_ALGO_BIDIR_RING);
  ts_simgrid_estimate e, f;
  ts_simgrid_estimate_cost(tr, t, NULL, &e);
  const char *full_cfg[] = {"trainsim/symmetry:full", NULL};
  ts_simgrid_estimate_cost(tr, t, full_cfg, &f);
  cr_expect_eq(e.ranks_collapsed, 4);
  cr_expect_eq(e.ops_collapsed * 16, e.ops, "%" G_GINT64_FORMAT " of %" G_GINT64_FORMAT,
               e.ops_collapsed, e.ops);
  cr_expect_eq(e.expected_bytes, e.memory_collapsed_bytes);
  cr_expect_eq(f.expected_bytes, f.memory_bytes);
  cr_expect(e.memory_collapsed_bytes < e.memory_bytes, "%g >= %g", e.memory_collapsed_bytes,
            e.memory_bytes);
  gint64 mid = (gint64)((e.memory_collapsed_bytes + e.memory_bytes) / 2);
  g_autofree char *lim = g_strdup_printf("trainsim/max-memory:%" G_GINT64_FORMAT, mid);
  const char *cfg[] = {lim, NULL};
  GError *err = NULL;
  cr_expect(ts_simgrid_preflight(tr, t, cfg, &err), "%s", err != NULL ? err->message : "");
  g_clear_error(&err);
  cr_expect_not(ts_simgrid_check_every_rank(tr, t, cfg, &err));
  cr_expect(err != NULL && err->code == TS_ERROR_INVALID);
  g_clear_error(&err);
  g_autofree char *cmd = g_strdup_printf(
      "%s run -t tpu-v3-8x8 -m gpt3-350m -b 64 --micro-batch 1 -s tp=2@x,pp=4@y,dp=8 "
      "--backend simgrid --collective-algorithm bidir-ring --cfg "
      "trainsim/max-memory:%" G_GINT64_FORMAT,
      TS_TRAINSIM_BIN, mid);
  char *out = NULL, *serr = NULL;
  int status = -1;
  g_spawn_command_line_sync(cmd, &out, &serr, &status, NULL);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status %d: %s", status, serr);
  g_autofree char *ops = g_strdup_printf("%" G_GINT64_FORMAT " ops,", e.ops);
  cr_expect(g_str_has_prefix(serr, "trainsim run: the simgrid replay would need about ") &&
                strstr(serr, ops) != NULL,
            "%s", serr);
  const char *nl = strchr(serr, '\n');
  cr_expect(nl != NULL && nl[1] == '\0', "one line: %s", serr);
  g_free(out);
  g_free(serr);
}

Test(fold, ts_run_folds_and_matches_every_flow)
{
  /* Through ts_run (the path of `trainsim run`): folded by default, the same step as
   * trainsim/symmetry:full with a quarter of the flows. */
  ts_result r[2] = {{0}, {0}};
  predict_collapsed_and_full("tp=2@x,pp=8@y,dp=4@x", TS_ALGO_AUTO, r);
  cr_expect(fabs(r[0].step_time_s - r[1].step_time_s) <= 1e-9 * r[1].step_time_s,
            "folded %.17g s, full %.17g s", r[0].step_time_s, r[1].step_time_s);
  cr_expect_eq(r[0].flows * 4, r[1].flows, "folded %" G_GINT64_FORMAT ", full %" G_GINT64_FORMAT,
               r[0].flows, r[1].flows);
  ts_result_clear(&r[0]);
  ts_result_clear(&r[1]);
}
/* A folded route can cross one canonical link twice (a flow longer than the fold's period: the
 * pod's 4-member data-parallel all-reduce moves 16 hops along a fold of period 8). Max-min
 * sharing must then count the link twice, as the two translates crossing it in the full
 * replay do: SimGrid 3.32 adds a repeated link's weight. Two flows of 1e6 B on 1 GB/s links,
 * one crossing its link twice: 2 ms, the other once: 1 ms. */
static int twice_route(void *data, int src, int dst, int *links, int max)
{
  (void)data;
  (void)dst;
  int n = src == 0 ? 2 : 1; /* host 0 -> 1: link 0 twice; host 1 -> 0: link 1 once */
  for (int i = 0; i < n && i < max; i++)
    links[i] = src;
  return MIN(n, max);
}

static void twice_done(void *data, double start_s, double end_s)
{
  *(double *)data = end_s - start_s;
}

Test(fold, route_crossing_a_link_twice_counts_it_twice)
{
  GError *e = NULL;
  cr_assert(ts_sg_init(ts_simgrid_pinned_cfg, &e), "%s", e != NULL ? e->message : "");
  ts_sg_zone *z = ts_sg_zone_new("twice", twice_route, NULL, 4, &e);
  cr_assert_not_null(z);
  sg_host_t h[2] = {ts_sg_zone_add_host(z, "h0", 1e9), ts_sg_zone_add_host(z, "h1", 1e9)};
  cr_assert_eq(ts_sg_zone_add_link(z, "l0", 1e9, 0), 0);
  cr_assert_eq(ts_sg_zone_add_link(z, "l1", 1e9, 0), 1);
  cr_assert(ts_sg_zone_seal(z, &e), "%s", e != NULL ? e->message : "");
  double twice = -1, once = -1;
  ts_sg_flow_start(h[0], h[1], 1e6, twice_done, &twice);
  ts_sg_flow_start(h[1], h[0], 1e6, twice_done, &once);
  cr_assert(ts_sg_run(&e), "%s", e != NULL ? e->message : "");
  cr_expect(fabs(once - 1e-3) <= 1e-12, "once: %.17g s", once);
  cr_expect(fabs(twice - 2e-3) <= 1e-12, "twice: %.17g s", twice);
}

/* ---- link accounting: settled busy intervals (issue 15, fourth session) ---- */

/* In a child process (a fresh SimGrid clock, so that both replays compute the same floats):
 * replays tr with settling on or off and writes the step, the intervals settled and every
 * link's bytes and busy time to fd. */
static void settle_child(const ts_topo *t, const ts_trace *tr, gboolean collapsed, gboolean settle,
                         int fd)
{
  GError *e = NULL;
  ts_backend *b = ts_backend_simgrid_new(t, NULL, &e);
  if (b == NULL)
    _exit(3);
  ts_backend_simgrid_set_settle(b, settle);
  ts_backend_simgrid_set_collapse(b, collapsed);
  int n = ts_platform_nlinks(ts_backend_simgrid_platform(b));
  double *out = g_new0(double, 2 + 2 * (gsize)n);
  out[0] = replay_mode(tr, b, collapsed ? TS_REPLAY_COLLAPSED : TS_REPLAY_FULL, NULL);
  out[1] = (double)ts_backend_simgrid_settled(b);
  GPtrArray *rows = NULL;
  if (!ts_backend_simgrid_link_report(b, &rows, NULL, &e))
    _exit(4);
  for (guint i = 0; i < rows->len; i++) {
    const ts_link_load *l = g_ptr_array_index(rows, i);
    out[2 + l->link] = l->bytes;
    out[2 + n + l->link] = l->busy_s;
  }
  gsize left = sizeof(double) * (2 + 2 * (gsize)n);
  for (const char *p = (const char *)out; left > 0;) {
    ssize_t w = write(fd, p, left);
    if (w <= 0)
      _exit(5);
    p += w;
    left -= (gsize)w;
  }
  _exit(0);
}

static double *settle_run(const ts_topo *t, const ts_trace *tr, gboolean collapsed, gboolean settle,
                          int n)
{
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    settle_child(t, tr, collapsed, settle, fds[1]);
  }
  close(fds[1]);
  gsize want = sizeof(double) * (2 + 2 * (gsize)n), got = 0;
  double *out = g_new0(double, 2 + 2 * (gsize)n);
  for (ssize_t r; got < want && (r = read(fds[0], (char *)out + got, want - got)) > 0;)
    got += (gsize)r;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0 && got == want,
            "the replay's child failed (status %d, %zu of %zu bytes)", status, got, want);
  return out;
}

Test(link_settle, same_report_as_every_interval_kept)
{
  /* The busy intervals that no flow can reach any more are summed and dropped while the replay
   * runs (the every-rank GPT-3 175B replay on the pod kept ~10 M of them). The link report must
   * be the same to the last bit as with every interval kept until the end: every flow of a
   * tensor x pipeline x data parallel step (hundreds of all-reduces per link), and one rank
   * per class of an interleaved pipeline (images accounted too). */
  g_autoptr(ts_topo) t = shipped_topo("tpu-v3-8x8");
  g_autoptr(ts_trace) tr = planner_trace("gpt3-350m", t, "tp=2@x,pp=4@y,dp=8", 64, 1);
  g_autoptr(ts_trace) tr2 =
      planner_trace("bert-large", t, "tp=8@x,pp=8@y,schedule=interleaved", 256, 4);
  const ts_trace *traces[2] = {tr, tr2};
  int n = 4 * t->nchips; /* two ring dimensions, two directions */
  for (int c = 0; c < 2; c++) {
    g_autofree double *on = settle_run(t, traces[c], c == 1, TRUE, n);
    g_autofree double *off = settle_run(t, traces[c], c == 1, FALSE, n);
    cr_expect(on[0] > 0 && on[0] == off[0], "case %d: %.17g / %.17g s", c, on[0], off[0]);
    cr_expect(on[1] > 1000, "case %d: %.0f intervals settled", c, on[1]);
    cr_expect_eq(off[1], 0);
    int busy_links = 0;
    for (int i = 0; i < n; i++) {
      cr_expect_eq(on[2 + i], off[2 + i], "case %d link %d bytes", c, i);
      cr_expect_eq(on[2 + n + i], off[2 + n + i],
                   "case %d link %d: busy %.17g s, every interval kept %.17g s", c, i,
                   on[2 + n + i], off[2 + n + i]);
      busy_links += on[2 + n + i] > 0;
    }
    cr_expect(busy_links > n / 4, "case %d: %d links busy", c, busy_links);
  }
}

Test(platform, cached_routes_are_ts_routes)
{
  /* ts_platform_route keeps routes it gave (a direct-mapped cache on the chip pair): a repeat,
   * an evicted pair asked again, a detour around a dead link, all equal ts_route's route
   * (rerouted, as links of the platform). 1024 chips: pairs collide in the cache. */
  g_autoptr(ts_topo) t = shipped_topo("tpu-v3-pod");
  GError *e = NULL;
  const char *dead[] = {"link:x:3,4", NULL};
  cr_assert(ts_degrade_apply_options(t, (char **)dead, NULL, &e), "%s",
            e != NULL ? e->message : "");
  g_autoptr(ts_platform) p = ts_platform_new(t, NULL, &e);
  cr_assert_not_null(p, "%s", e != NULL ? e->message : "");
  g_autoptr(GArray) got = g_array_new(FALSE, FALSE, sizeof(int));
  g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(ts_link_id));
  int detours = 0;
  for (int pass = 0; pass < 3; pass++)
    for (int a = pass; a < t->nchips; a += 13)
      for (int k = 0; k < t->nchips; k += 1 + pass) {
        int b = pass == 1 ? t->nchips - 1 - k : k;
        g_array_set_size(got, 0);
        g_array_set_size(ids, 0);
        cr_assert(ts_platform_route(p, a, b, got));
        ts_route(t, a, b, ids);
        guint direct = ids->len;
        ts_degrade_reroute(t, ids);
        detours += ids->len != direct;
        cr_assert_eq(got->len, ids->len, "c%d -> c%d (pass %d)", a, b, pass);
        for (guint q = 0; q < ids->len; q++)
          cr_assert_eq(g_array_index(got, int, q),
                       ts_platform_link_index(p, &g_array_index(ids, ts_link_id, q)),
                       "c%d -> c%d link %u (pass %d)", a, b, q, pass);
      }
  cr_assert_gt(detours, 0, "no route went around the dead link");
}
