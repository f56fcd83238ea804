/* test_planning: capacity planning (issue 14). Failures and checkpoints against closed forms
 * (Young, Daly, the expected time of a segment) and a Monte Carlo of the same process; a
 * dead link's detour on a torus ring; a straggler in a data-parallel step; bad input. */
#include "ts_capacity.h"
#include "ts_coll.h"
#include "ts_degrade.h"
#include "ts_goodput.h"
#include "ts_run.h"
#include "ts_util.h"

#include "ts_test.h"
#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

/* ---- checkpoints and failures ---------------------------------------------------------------- */

Test(goodput, optimum_matches_young_and_daly)
{
  /* delta << M: Young's sqrt(2 delta M) is the first-order optimum; its relative error is
   * O(sqrt(delta / 2M)) (Daly 2006, section 4), Daly's higher-order formula is closer. */
  const double cases[][2] = {{60, 1e6}, {300, 2e5}, {30, 3.6e4}};
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    double d = cases[i][0], m = cases[i][1];
    double opt = ts_goodput_optimum(d, m), young = ts_goodput_young(d, m);
    double daly = ts_goodput_daly(d, m);
    double ey = fabs(opt / young - 1), ed = fabs(opt / daly - 1);
    double bound = 2 * sqrt(d / (2 * m));
    cr_expect(ey < bound, "delta %g M %g: optimum %g vs Young %g (rel %g, bound %g)", d, m, opt,
              young, ey, bound);
    cr_expect(ed < 0.1 * ey + 1e-6,
              "delta %g M %g: optimum %g vs Daly %g (rel %g) not closer "
              "than Young (%g)",
              d, m, opt, daly, ed, ey);
  }
  /* Daly's formula at delta >= 2M is M. */
  double big = ts_goodput_daly(10, 4);
  cr_expect_float_eq(big, 4.0, 1e-12);
}

Test(goodput, optimum_minimises_expected_time)
{
  ts_goodput_in in = {.work_s = 1e6, .mtbf_s = 2e4, .checkpoint_s = 120, .restart_s = 600};
  ts_goodput best;
  ts_goodput_expect(&in, &best);
  const double f[] = {0.5, 0.8, 1.25, 2.0};
  for (size_t i = 0; i < G_N_ELEMENTS(f); i++) {
    ts_goodput_in o = in;
    o.interval_s = best.interval_s * f[i];
    ts_goodput g;
    ts_goodput_expect(&o, &g);
    /* Whole segments shift the sum a little; the optimum's per-work cost is the smallest. */
    cr_expect(g.expected_s > best.expected_s * (1 - 1e-3), "interval x%g: %g < optimum's %g", f[i],
              g.expected_s, best.expected_s);
  }
}

Test(goodput, no_failures_is_work_plus_checkpoints)
{
  ts_goodput_in in = {.work_s = 1000, .checkpoint_s = 5, .interval_s = 300};
  ts_goodput g;
  ts_goodput_expect(&in, &g);
  /* 3 full intervals + a 100 s remainder, each followed by a checkpoint. */
  cr_expect_float_eq(g.expected_s, 1000 + 4 * 5, 1e-9);
  cr_expect_float_eq(g.checkpoints, 4, 1e-12);
  cr_expect_float_eq(g.expected_failures, 0, 1e-12);
}

Test(goodput, segment_closed_form)
{
  /* Daly 2006 eq. 13 at small L/M tends to L + L^2/(2M) + R L / M. */
  double l = 100, r = 10, m = 1e7;
  double e = ts_goodput_segment(l, r, m);
  double approx = l + l * l / (2 * m) + r * l / m;
  cr_expect(fabs(e - approx) < 1e-6, "segment %g vs %g", e, approx);
}

Test(goodput, monte_carlo_mean_matches_expectation)
{
  /* 100 h of work, a failure every 10 h on average, 6 min checkpoints, 12 min restarts. */
  ts_goodput_in in = {
      .work_s = 100 * 3600.0, .mtbf_s = 10 * 3600.0, .checkpoint_s = 360, .restart_s = 720};
  ts_goodput g;
  ts_goodput_expect(&in, &g);
  ts_goodput_mc mc;
  ts_goodput_monte_carlo(&in, 40000, 7, &mc);
  double rel = fabs(mc.mean_s / g.expected_s - 1);
  /* The standard error of a 40,000-run mean is ~0.1% here; 0.5% is five of them. */
  cr_expect(rel < 5e-3, "Monte Carlo mean %g vs expected %g (rel %g)", mc.mean_s, g.expected_s,
            rel);
  cr_expect(mc.median_s <= mc.p90_s && mc.min_s <= mc.median_s && mc.p90_s <= mc.max_s);
  cr_expect(mc.min_s >= in.work_s, "a run shorter than the work: %g", mc.min_s);
  /* Deterministic for a seed; another seed gives another sample. */
  ts_goodput_mc again, other;
  ts_goodput_monte_carlo(&in, 40000, 7, &again);
  ts_goodput_monte_carlo(&in, 40000, 8, &other);
  /* Field by field: the struct's padding after `runs` is not part of the result. */
  cr_expect(mc.runs == again.runs && mc.mean_s == again.mean_s && mc.median_s == again.median_s &&
                mc.p90_s == again.p90_s && mc.min_s == again.min_s && mc.max_s == again.max_s,
            "same seed, different result");
  cr_expect(mc.mean_s != other.mean_s, "different seeds, same mean");
}

/* ---- degraded arrays ------------------------------------------------------------------------ */

/* An 8 x 4 torus: x links 10 GB/s and 1 us, y links 10 GB/s and 2 us. */
static ts_topo *torus_8x4(void)
{
  ts_topo *t = ring_topo(8, 1e10, 1e-6);
  t->ndims = 2;
  t->dims[1] = (ts_dim){.name = g_strdup("y"),
                        .size = 4,
                        .shape = TS_SHAPE_RING,
                        .link_bw_Bps = 1e10,
                        .latency_s = 2e-6};
  t->nchips = 32;
  return t;
}

Test(degrade, ring_with_one_dead_link_doubles_one_hop)
{
  g_autoptr(ts_topo) t = torus_8x4();
  GError *e = NULL;
  /* The x link between (3, 0) and (4, 0). */
  cr_assert(ts_degrade_add_link(t, 0, 3, "test", &e));
  int dims[] = {0};
  ts_group_shape g;
  ts_group_shape_dims(t, dims, 1, &g);
  /* The x ring at y = 0 crosses it; the one at y = 1 does not. */
  guint m0 = ts_degrade_group_mask(t, &g, 0), m1 = ts_degrade_group_mask(t, &g, 8);
  cr_expect_eq(m0, 1u);
  cr_expect_eq(m1, 0u);
  /* The detour (3,0) -> (3,1) -> (4,1) -> (4,0) adds two y hops to the x hop and shares
   * (3,1) -> (4,1) with that link's own ring traffic, so the hop moves its bytes at half the
   * bandwidth; a ring runs in lockstep, so every one of its 2(n-1) steps waits for it:
   * T = 2 (n - 1) (a_x + 2 a_y + S / (n B / 2)). */
  const double n = 8, S = 8e8, B = 1e10, ax = 1e-6, ay = 2e-6;
  g_autoptr(ts_topo) dt = ts_degrade_topo(t, m0);
  double dead = ts_coll_time(dt, TS_COLL_ALLREDUCE, TS_ALGO_RING, &g, S, NULL, &e);
  double healthy = ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_RING, &g, S, NULL, &e);
  double want_dead = 2 * (n - 1) * (ax + 2 * ay + S / (n * B / 2));
  double want_healthy = 2 * (n - 1) * (ax + S / (n * B));
  cr_expect(fabs(dead / want_dead - 1) < 1e-12, "dead %g vs %g", dead, want_dead);
  cr_expect(fabs(healthy / want_healthy - 1) < 1e-12, "healthy %g vs %g", healthy, want_healthy);
  /* A pipeline send across the dead link sees the same detour. */
  cr_expect_eq(ts_degrade_route_mask(t, 3, 4), 1u);
  cr_expect_eq(ts_degrade_route_mask(t, 11, 12), 0u);
}

Test(degrade, disconnecting_failures_are_detected)
{
  g_autoptr(ts_topo) t = ring_topo(8, 1e10, 1e-6);
  GError *e = NULL;
  cr_assert(ts_degrade_add_link(t, 0, 2, "test", &e));
  cr_expect(ts_degrade_connected(t), "one dead link on a ring leaves a line");
  cr_assert(ts_degrade_add_link(t, 0, 5, "test", &e));
  cr_expect(!ts_degrade_connected(t), "two dead links cut a ring in two");
  g_autoptr(ts_topo) tor = torus_8x4();
  cr_assert(ts_degrade_pick_links(tor, 6, 1, &e), "%s", e ? e->message : "");
  cr_expect_eq(tor->faults.ndead, 6);
  cr_expect(ts_degrade_connected(tor));
}

/* Replays `split` of `model` on `topo` healthy and with one chip at `speed`: every replica waits
 * for the straggler, so the critical compute is the healthy one / speed (to 1e-9) and the step
 * that compute plus about the healthy step's communication (2%). */
static void expect_straggler_step(const char *topo, const char *model, double batch,
                                  const char *split, const char *straggler, double speed)
{
  g_autoptr(ts_topo) t = load_topo(topo);
  g_autoptr(ts_model) m = load_model(model);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  ts_run_options ro = {.backend = "analytic"};
  GError *e = NULL;
  g_autoptr(ts_split) s = ts_split_parse(split, &e);
  ts_result healthy, slow;
  cr_assert(ts_run_predict(m, t, s, &po, &ro, &healthy, &e), "%s", e ? e->message : "");
  g_autoptr(ts_topo) ts = ts_topo_copy(t);
  char *strag[] = {(char *)straggler, NULL};
  cr_assert(ts_degrade_apply_options(ts, NULL, strag, &e), "%s", e ? e->message : "");
  cr_assert(ts_run_predict(m, ts, s, &po, &ro, &slow, &e), "%s", e ? e->message : "");
  double want_compute = healthy.compute_time_s / speed;
  cr_expect(fabs(slow.compute_time_s / want_compute - 1) < 1e-9, "critical compute %g vs %g",
            slow.compute_time_s, want_compute);
  double want_step = want_compute + healthy.step_time_s - healthy.compute_time_s;
  cr_expect(fabs(slow.step_time_s / want_step - 1) < 0.02, "step %g vs %g", slow.step_time_s,
            want_step);
  ts_result_clear(&healthy);
  ts_result_clear(&slow);
}

/* Every replica waits for the straggler's gradients: the step is the straggler's, whose compute
 * takes 1 / 0.8 as long; the all-reduce after it is the healthy one. */
Test(degrade, straggler_sets_the_data_parallel_step)
{
  expect_straggler_step("tpu-v3-8x8", "bert-large", 512, "dp=64", "chip:17=0.8", 0.8);
}

/* ZeRO-3's parameter all-gathers and gradient reduce-scatters share the data-parallel group on
 * two streams: a straggler reaches them in another time order than the other ranks, but every
 * rank issues them in program order, which is how they meet. The replay numbered them by time
 * and refused the step ("allgather ... meets reducescatter"); now the step is the straggler's
 * compute (1 / 0.9 of the healthy one's) plus about the healthy step's communication. */
Test(degrade, straggler_under_zero3_meets_its_collectives_in_program_order)
{
  expect_straggler_step("dgx1-v100", "bert-large", 64, "dp=8,zero=3", "chip:0=0.9", 0.9);
}

/* ---- the command line ----------------------------------------------------------------------- */

static double csv_value(const char *csv, int row, const char *col);

static void expect_exit2(const char *args, const char *needle)
{
  run_result r = run(args);
  cr_expect_eq(r.status, 2, "%s: status %d", args, r.status);
  cr_expect(strstr(r.err, needle) != NULL, "%s: stderr '%s' lacks '%s'", args, r.err, needle);
  cr_expect(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "%s: not one line: %s", args, r.err);
  run_free(&r);
}

#define BASE "run -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 "

Test(cli, bad_planning_input_exits_2)
{
  expect_exit2(BASE "--steps 10 --price-per-hour -1", "--price-per-hour");
  expect_exit2(BASE "--steps 10 --mtbf-chip-hours -5", "--mtbf-chip-hours");
  expect_exit2(BASE "--steps 10 --mtbf-chip-hours 0", "--mtbf-chip-hours");
  expect_exit2(BASE "--tokens 1e9 --steps 3", "one training target");
  /* Half a step was planned ("steps 0.5", goodput 0.6%), nodes of 2.5 chips were counted. */
  expect_exit2(BASE "--steps 0.5", "--steps '0.5': expected a whole number of steps in [1, 1e+30]");
  expect_exit2(BASE "--steps 10 --chips-per-node 2.5",
               "--chips-per-node '2.5': expected a whole number of chips");
  expect_exit2(BASE "--fail link:x:8,0", "--fail link:x:8,0");
  expect_exit2(BASE "--fail link:z:1,0", "--fail link:z:1,0");
  /* A dimension name that is not there is answered with the ones that are. */
  expect_exit2(BASE "--fail link:z:1,0", "one of the array's dimensions (x, y)");
  expect_exit2("run -t dgx-h100-4node -m gpt3-1.3b -b 64 -s dp=32 --straggler dim.ib=0.5",
               "NAME one of the array's dimensions (node, net)");
  expect_exit2(BASE "--fail chip:64", "--fail chip:64");
  expect_exit2(BASE "--straggler chip:3=1.5", "[0.001, 1]");
  expect_exit2(BASE "--straggler chip:3=0", "[0.001, 1]");
  /* 1e-300 printed a step of 38-digit seconds: a part that slow is dead (--fail). */
  expect_exit2(BASE "--straggler chip:3=1e-300", "--straggler chip:3=1e-300: expected a speed "
                                                 "factor in [0.001, 1]");
  expect_exit2(BASE "--straggler dim.x=0.0001", "[0.001, 1]");
  expect_exit2("run -t dgx-h100-4node -m gpt3-1.3b -b 64 -s dp=32 --fail link:node:1,0", "no link");
  /* Two dead links cut a lone ring of 8 in two. */
  g_autofree char *dir = g_dir_make_tmp("ts_planning_XXXXXX", NULL);
  g_autofree char *ini = g_build_filename(dir, "ring8.ini", NULL);
  const char *text = "[chip]\nname = c\npeak_tflops = 100\nmemory_GiB = 32\n"
                     "memory_bandwidth_GBps = 900\n[dim.x]\nsize = 8\nshape = ring\n"
                     "link_bandwidth_GBps = 50\nlatency_us = 1\n";
  cr_assert(g_file_set_contents(ini, text, -1, NULL));
  g_autofree char *args =
      g_strdup_printf("run -t %s -m bert-large -b 64 -s dp=8 --fail link:x:1 --fail link:x:5", ini);
  expect_exit2(args, "disconnect");
  g_unlink(ini);
  g_rmdir(dir);
}

Test(cli, time_to_train_outputs)
{
  run_result r = run(BASE "--tokens 1e10 --mtbf-chip-hours 1000 --storage-GBps-per-chip 1.5 "
                          "--price-per-hour 2 --tdp-W 450 --restart-minutes 10 --format csv");
  cr_assert_eq(r.status, 0, "%s", r.err);
  g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
  g_auto(GStrv) head = g_strsplit(lines[0], ",", -1);
  g_auto(GStrv) row = g_strsplit(lines[1], ",", -1);
  double days = -1, nofail = -1, goodput = -1, cost = -1, hours = -1, steps = -1, step = -1;
  for (int i = 0; head[i] != NULL && row[i] != NULL; i++) {
    double v = g_ascii_strtod(row[i], NULL);
    if (strcmp(head[i], "train_days_expected") == 0)
      days = v;
    else if (strcmp(head[i], "train_days_no_failures") == 0)
      nofail = v;
    else if (strcmp(head[i], "goodput") == 0)
      goodput = v;
    else if (strcmp(head[i], "cost_usd") == 0)
      cost = v;
    else if (strcmp(head[i], "chip_hours") == 0)
      hours = v;
    else if (strcmp(head[i], "train_steps") == 0)
      steps = v;
    else if (strcmp(head[i], "step_time_s") == 0)
      step = v;
  }
  /* 1e10 tokens / (512 x 512 tokens per step), rounded up. */
  cr_expect_float_eq(steps, ceil(1e10 / (512.0 * 512.0)), 1e-9);
  cr_expect(fabs(nofail * 86400 / (steps * step) - 1) < 1e-6);
  cr_expect(days > nofail && goodput > 0 && goodput < 1, "days %g no-failure %g goodput %g", days,
            nofail, goodput);
  cr_expect(fabs(goodput - nofail / days) < 1e-6);
  cr_expect(fabs(cost - 2 * hours) < 1e-6 * cost);
  cr_expect(fabs(hours - 64 * days * 24) < 1e-6 * hours);
  /* Per dollar: tokens/s x 3600 / (64 chips x 2 USD/h); per joule: a step's tokens over its
   * energy, which at 450 W for every state is 64 x 450 W x the step. */
  double tps = csv_value(r.out, 0, "tokens_per_s"), per_usd = csv_value(r.out, 0, "tokens_per_usd");
  double per_j = csv_value(r.out, 0, "tokens_per_J"), ej = csv_value(r.out, 0, "energy_per_step_J");
  cr_expect(fabs(per_usd / (tps * 3600 / 128) - 1) < 1e-9, "tokens/USD %g", per_usd);
  cr_expect(fabs(ej / (64 * 450 * step) - 1) < 1e-9, "energy per step %g", ej);
  cr_expect(fabs(per_j / (tps * step / ej) - 1) < 1e-9, "tokens/J %g", per_j);
  run_free(&r);
  /* Without a power the text's energy column is "-" and a line says why and what to give, as
   * the cost's does (the energy's "-" went unexplained). */
  r = run("run -t tpu-v5p-4x4x4 -m bert-large -b 512 -s dp=64 --tokens 1e10");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "\nenergy: no chip power given ([chip] tdp_W or --tdp-W)\n") != NULL,
            "%s", r.out);
  run_free(&r);
  r = run("run -t tpu-v5p-4x4x4 -m bert-large -b 512 -s dp=64 --tokens 1e10 --tdp-W 400");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "no chip power") == NULL, "%s", r.out);
  run_free(&r);
}

/* A number of data row `row` of a CSV by column name (ts_test.h's csv_cell); NAN when absent. */
static double csv_value(const char *csv, int row, const char *col)
{
  g_autofree char *cell = csv_cell(csv, row, col);
  return cell != NULL ? g_ascii_strtod(cell, NULL) : NAN;
}

Test(cli, chip_out_shrinks_by_one_replica)
{
  run_result h = run(BASE "--format csv");
  run_result o = run(BASE "--fail chip:17 --format csv");
  cr_assert_eq(h.status, 0, "%s", h.err);
  cr_assert_eq(o.status, 0, "%s", o.err);
  double sh = csv_value(h.out, 0, "samples_per_s"), so = csv_value(o.out, 0, "samples_per_s");
  double th = csv_value(h.out, 0, "step_time_s"), to = csv_value(o.out, 0, "step_time_s");
  /* dp=64: one replica of 64 drops out, the step stays. */
  cr_expect(fabs(so / sh - 63.0 / 64.0) < 1e-9, "samples/s %g vs %g", so, sh);
  cr_expect(fabs(to / th - 1) < 1e-12, "step %g vs %g", to, th);
  cr_expect_float_eq(csv_value(o.out, 0, "dp_active"), 63, 1e-12);
  run_free(&h);
  run_free(&o);
}

Test(cli, dead_links_never_speed_up_a_sweep)
{
  run_result r = run("sweep -t tpu-v3-8x8 -m bert-large -b 512 -s tp=8@x,dp=8@y "
                     "--vary dead_links=0,1,2,4 -j 1 --format csv");
  cr_assert_eq(r.status, 0, "%s", r.err);
  double prev = 0;
  for (int k = 0; k < 4; k++) {
    double st = csv_value(r.out, k, "step_time_s");
    cr_expect(st >= prev * (1 - 1e-12), "row %d: step %g below %g", k, st, prev);
    prev = st;
  }
  double healthy = csv_value(r.out, 0, "step_time_s"), four = csv_value(r.out, 3, "step_time_s");
  cr_expect(four > healthy, "4 dead links cost nothing: %g vs %g", four, healthy);
  run_free(&r);
}

Test(cli, planning_output_is_deterministic)
{
  const char *args = BASE "--tokens 1e10 --mtbf-chip-hours 100 --storage-GBps-per-chip 1 "
                          "--restart-minutes 5 --monte-carlo 2000 --seed 3 --format json";
  run_result a = run(args), b = run(args);
  cr_assert_eq(a.status, 0, "%s", a.err);
  cr_expect_str_eq(a.out, b.out);
  cr_expect(strstr(a.out, "\"days_p90\"") != NULL);
  run_free(&a);
  run_free(&b);
}

Test(cli, search_objective_and_constraints)
{
  expect_exit2("search -t tpu-v2-8 -m bert-large -b 64 --objective speed", "--objective");
  expect_exit2("search -t tpu-v2-8 -m bert-large -b 64 --max-days 3", "--max-days");
  /* Without a target a cost ranked exactly as time, with no cost column and no note. */
  expect_exit2("search -t tpu-v2-8 -m bert-large -b 64 --price-per-hour 1 --objective cost",
               "--objective cost: expected --tokens, --samples or --steps");
  expect_exit2("search -t tpu-v3-8x8 -m bert-large -b 512 --max-chips 32", "--max-chips 32");
  run_result r = run("search -t tpu-v2-8 -m bert-large -b 64 -k 2 -j 1 --steps 1000 "
                     "--price-per-hour 1 --objective cost");
  cr_expect_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "time to train 1 ksteps") != NULL, "%s", r.out);
  run_free(&r);
}

Test(degrade, simgrid_routes_around_a_dead_link)
{
  g_autoptr(ts_topo) t = torus_8x4();
  GError *e = NULL;
  cr_assert(ts_degrade_add_link(t, 0, 3, "test", &e));
  g_autoptr(GArray) r = g_array_new(FALSE, FALSE, sizeof(ts_link_id));
  ts_route(t, 3, 4, r);
  ts_degrade_reroute(t, r);
  /* (3,0) -> (3,1) -> (4,1) -> (4,0): y up, x across at y = 1, y back. */
  cr_assert_eq(r->len, 3u);
  ts_link_id *l = (ts_link_id *)(void *)r->data;
  cr_expect(l[0].chip == 3 && l[0].dim == 1 && l[0].dir == 1);
  cr_expect(l[1].chip == 11 && l[1].dim == 0 && l[1].dir == 1);
  cr_expect(l[2].chip == 12 && l[2].dim == 1 && l[2].dir == -1);
  /* The reverse direction of the same cable is dead too. */
  g_array_set_size(r, 0);
  ts_route(t, 4, 3, r);
  ts_degrade_reroute(t, r);
  cr_expect_eq(r->len, 3u);
  /* On a lone ring of 8, the long way round: 7 hops the other way. */
  g_autoptr(ts_topo) ring = ring_topo(8, 1e10, 1e-6);
  cr_assert(ts_degrade_add_link(ring, 0, 3, "test", &e));
  g_array_set_size(r, 0);
  ts_route(ring, 3, 4, r);
  ts_degrade_reroute(ring, r);
  cr_expect_eq(r->len, 7u);
}

Test(cli, simgrid_dead_link_slows_the_step)
{
  run_result h = run(BASE "--backend simgrid --format csv");
  run_result d = run(BASE "--backend simgrid --fail link:x:3,4 --format csv");
  cr_assert_eq(h.status, 0, "%s", h.err);
  cr_assert_eq(d.status, 0, "%s", d.err);
  double th = csv_value(h.out, 0, "step_time_s"), td = csv_value(d.out, 0, "step_time_s");
  cr_expect(td > th, "a dead link on the dp=64 ring did not slow the step: %g vs %g", td, th);
  run_free(&h);
  run_free(&d);
}

Test(cli, node_failures_add_to_chip_failures)
{
  /* 64 chips at 1000 h and 8 nodes of 8 at 500 h: 1 / (64/1000 + 8/500) h = 12.5 h. */
  run_result r = run(BASE "--steps 1000 --mtbf-chip-hours 1000 --mtbf-node-hours 500 "
                          "--chips-per-node 8 --format csv");
  cr_assert_eq(r.status, 0, "%s", r.err);
  double m = csv_value(r.out, 0, "job_mtbf_s");
  cr_expect(fabs(m / (12.5 * 3600) - 1) < 1e-9, "job MTBF %g s", m);
  run_free(&r);
}

Test(cli, straggler_per_node_sweep)
{
  run_result r = run("sweep -t dgx-h100-4node -m gpt3-1.3b -b 64 -s dp=32 "
                     "--vary straggler_per_node=1,0.5,0.25 -j 1 --format csv");
  cr_assert_eq(r.status, 0, "%s", r.err);
  double h = csv_value(r.out, 0, "compute_time_s"), s = csv_value(r.out, 1, "compute_time_s");
  double q = csv_value(r.out, 2, "compute_time_s");
  /* The critical chip is a slow one: its kernels take 2x (4x) the healthy time, but for what a
   * slow GPU does not slow: the host's kernel launches (ts_cost's launch queue) and the compute
   * time an overlapping cross-node collective's SMs take ([chip] collective_sms: a time, not
   * work). So the compute is affine in the slowdown, the second halving adding twice the first
   * (within 0.1%; 4e-5 measured), and about twice the healthy compute (-0.9% measured). */
  cr_expect(fabs((q - s) / (2 * (s - h)) - 1) < 1e-3, "compute %g, %g, %g", h, s, q);
  cr_expect(fabs(s / (2 * h) - 1) < 0.02, "compute %g vs %g", s, h);
  run_free(&r);
}

Test(cli, simgrid_straggler_sets_the_step)
{
  run_result h = run(BASE "--backend simgrid --format csv");
  run_result s = run(BASE "--backend simgrid --straggler chip:17=0.8 --format csv");
  cr_assert_eq(h.status, 0, "%s", h.err);
  cr_assert_eq(s.status, 0, "%s", s.err);
  double ch = csv_value(h.out, 0, "compute_time_s"), cs = csv_value(s.out, 0, "compute_time_s");
  double th = csv_value(h.out, 0, "step_time_s"), ts = csv_value(s.out, 0, "step_time_s");
  /* As on the analytic backend: the critical chip is the straggler, the step follows it. */
  cr_expect(fabs(cs / (ch / 0.8) - 1) < 1e-6, "compute %g vs %g / 0.8", cs, ch);
  cr_expect(ts > th + 0.9 * (cs - ch), "step %g vs healthy %g", ts, th);
  run_free(&h);
  run_free(&s);
}
