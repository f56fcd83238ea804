/* test_overhead: the per-op overhead ([chip] op_overhead_us), a floor under every compute op's
 * roofline time: its loading, its closed form in ts_compute_time, and both backends using it. */
#include "ts_plan.h"
#include "ts_replay.h"
#include "ts_run.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#define REL_TOL 1e-12
#define SG_REL_TOL 0.005 /* simgrid vs analytic where nothing is shared (test_simgrid) */

#define CHIP                                                                                       \
  "[chip]\nname = Test chip\npeak_tflops = 100\nmemory_GiB = 16\nmemory_bandwidth_GBps = 1000\n"
#define DIM "[dim.x]\nsize = 1\nshape = ring\nlink_bandwidth_GBps = 100\nlatency_us = 1\n"

/* The topology of `text`, or NULL with *error set. */
static ts_topo *from_text(const char *text, GError **error)
{
  g_autoptr(GKeyFile) kf = g_key_file_new();
  gboolean ok = g_key_file_load_from_data(kf, text, (gsize)-1, G_KEY_FILE_NONE, error);
  cr_assert(ok, "test text does not parse");
  return ts_topo_from_keyfile(kf, "t.ini", error);
}

Test(overhead, key_is_optional_and_in_microseconds)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_topo) none = from_text(CHIP DIM, &error);
  cr_assert_not_null(none, "%s", error != NULL ? error->message : "");
  double o = none->chip.op_overhead_s;
  cr_assert_eq(o, 0.0, "default op_overhead_s %g, expected 0", o);
  g_autoptr(ts_topo) t = from_text(CHIP "op_overhead_us = 224.4\n" DIM, &error);
  cr_assert_not_null(t, "%s", error != NULL ? error->message : "");
  o = t->chip.op_overhead_s;
  cr_assert(fabs(o - 224.4e-6) <= REL_TOL * 224.4e-6, "op_overhead_s %.17g, expected 224.4e-6", o);
  g_autoptr(ts_topo) c = ts_topo_copy(t);
  o = c->chip.op_overhead_s;
  cr_assert_eq(o, t->chip.op_overhead_s, "ts_topo_copy lost the overhead");
}

Test(overhead, bad_values_are_one_line_errors)
{
  const char *bad[] = {"-1", "1000001", "abc", "nan"};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *text = g_strdup_printf(CHIP "op_overhead_us = %s\n" DIM, bad[i]);
    g_autoptr(GError) error = NULL;
    ts_topo *t = from_text(text, &error);
    cr_assert_null(t, "op_overhead_us = %s accepted", bad[i]);
    cr_assert_not_null(error);
    g_autofree char *want = g_strdup_printf("t.ini: [chip] op_overhead_us='%s'", bad[i]);
    cr_assert(strstr(error->message, want) != NULL, "message '%s' lacks '%s'", error->message,
              want);
    cr_assert(strstr(error->message, "[0, 1000000]") != NULL, "message '%s' lacks the range",
              error->message);
    cr_assert(strchr(error->message, '\n') == NULL, "message '%s' is not one line", error->message);
  }
}

/* time = max(flops / (peak x efficiency), bytes / bandwidth, o) for an op with work; 0 for an
 * op without (nothing is launched). Peak 100 TFLOP/s x 0.5, 1 TB/s, o = 1 ms. */
Test(overhead, compute_time_is_the_roofline_floored_by_the_overhead)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_topo) t =
      from_text(CHIP "compute_efficiency = 0.5\nop_overhead_us = 1000\n" DIM, &error);
  cr_assert_not_null(t, "%s", error != NULL ? error->message : "");
  const struct {
    double flops, bytes, want_s;
  } c[] = {
      {1e9, 0, 1e-3},     /* 20 us of arithmetic: the floor */
      {0, 1e5, 1e-3},     /* 0.1 us of memory traffic: the floor */
      {4.9e10, 0, 1e-3},  /* 0.98 ms: still the floor */
      {5e10, 0, 1e-3},    /* exactly 1 ms: both */
      {1e12, 0, 20e-3},   /* 20 ms: the arithmetic */
      {1e9, 5e9, 5e-3},   /* 5 ms of memory traffic */
      {1e12, 5e9, 20e-3}, /* arithmetic beats memory */
      {0, 0, 0},          /* no work, no launch */
  };
  for (size_t i = 0; i < G_N_ELEMENTS(c); i++) {
    double got = ts_compute_time(t, c[i].flops, c[i].bytes);
    cr_assert(fabs(got - c[i].want_s) <= REL_TOL * c[i].want_s,
              "flops %g bytes %g: %.17g s, expected %.17g s", c[i].flops, c[i].bytes, got,
              c[i].want_s);
  }
  /* Without the key the roofline is unchanged. */
  t->chip.op_overhead_s = 0;
  double got = ts_compute_time(t, 1e9, 0);
  cr_assert(fabs(got - 20e-6) <= REL_TOL * 20e-6, "no overhead: %.17g s, expected 20 us", got);
}

/* One chip: the step is the sum of its ops' floored times, and every op with work takes at
 * least the overhead; the simgrid backend, which times executions with ts_compute_time, agrees. */
static double one_chip_step(const char *backend, ts_topo *t, double *sum, int *floored)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *mp = g_strdup_printf("%s/models/bert-large.ini", TS_SOURCE_DIR);
  g_autoptr(ts_model) m = ts_model_load(mp, &error);
  cr_assert_not_null(m, "%s", error != NULL ? error->message : "");
  g_autoptr(ts_split) sp = ts_split_parse("dp=1", &error);
  cr_assert_not_null(sp);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 4;
  g_autoptr(ts_plan) p = ts_plan_new(m, t, sp, &po, &error);
  cr_assert_not_null(p, "%s", error != NULL ? error->message : "");
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &error);
  cr_assert_not_null(tr, "%s", error != NULL ? error->message : "");
  *sum = 0;
  *floored = 0;
  for (int i = 0; i < tr->programs[0].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
    double d = ts_cost_compute(&t->chip, o->flops, o->mem_bytes, o->shape);
    if (o->flops > 0 || o->mem_bytes > 0)
      cr_assert(d >= t->chip.op_overhead_s, "op %d: %g s below the floor", i, d);
    *floored += d == t->chip.op_overhead_s;
    *sum += d;
  }
  ts_run_options ro = {.backend = backend, .sg_cfg = NULL, .full = FALSE};
  ts_replay_result rr;
  gboolean ok = ts_run_replay(tr, t, &ro, &rr, &error);
  cr_assert(ok, "%s", error != NULL ? error->message : "");
  return rr.step_time_s;
}

Test(overhead, both_backends_charge_the_floor)
{
  g_autoptr(GError) error = NULL;
  /* 2 ms: above most of bert-large's per-layer ops at batch 4 on 100 TFLOP/s, not all. */
  g_autoptr(ts_topo) t = from_text(CHIP "op_overhead_us = 2000\n" DIM, &error);
  cr_assert_not_null(t, "%s", error != NULL ? error->message : "");
  double sum, sum_sg;
  int floored, floored_sg;
  double a = one_chip_step("analytic", t, &sum, &floored);
  cr_assert(fabs(a - sum) <= 1e-9 * sum, "analytic step %.17g vs sum of ops %.17g", a, sum);
  cr_assert(floored > 0, "no op was floored: the test does not test the floor");
  double s = one_chip_step("simgrid", t, &sum_sg, &floored_sg);
  cr_assert(fabs(s - a) <= SG_REL_TOL * a, "simgrid step %.9g vs analytic %.9g", s, a);
  /* And the floor moved the step: without it the same trace is faster. */
  t->chip.op_overhead_s = 0;
  double a0 = one_chip_step("analytic", t, &sum, &floored);
  cr_assert(a0 < a, "step without the overhead %.9g not below %.9g", a0, a);
}
