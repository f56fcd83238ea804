/* test_calibrate: the roofline fit on synthetic timings with a known answer (never on wall
 * clock), and the `trainsim calibrate` command's outputs and one-line errors. */
#include "ts_calib.h"
#include "ts_topo.h"
#include "ts_util.h"

#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

/* A sweep-like set of kernels: GEMMs (compute-bound) and element-wise ones (memory-bound),
 * with times made from the model itself, times exp(noise) with noise ~ N(0, sigma). */
static GArray *synthetic(double peak, double eff, double bw, double t0, double sigma, int copies)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(ts_calib_sample));
  ts_rng r;
  ts_rng_seed(&r, 2024);
  for (int c = 0; c < copies; c++) {
    for (int n = 64; n <= 4096; n *= 2) {
      ts_calib_sample s = {
          .kind = "gemm", .flop = 2.0 * n * n * n, .bytes = 12.0 * n * n, .in_fit = TRUE};
      g_snprintf(s.name, sizeof s.name, "gemm %d", n);
      a = g_array_append_val(a, s);
    }
    for (gint64 len = 1 << 20; len <= 64 << 20; len *= 2) {
      ts_calib_sample s = {
          .kind = "eltwise", .flop = (double)len, .bytes = 12.0 * (double)len, .in_fit = TRUE};
      g_snprintf(s.name, sizeof s.name, "add %ld", (long)len);
      a = g_array_append_val(a, s);
    }
  }
  for (guint i = 0; i < a->len; i++) {
    ts_calib_sample *s = &g_array_index(a, ts_calib_sample, i);
    double t = t0 + fmax(s->flop / (peak * eff), s->bytes / bw);
    s->time_s = t * exp(sigma * ts_rng_normal(&r));
  }
  return a;
}

static void expect_within(double got, double want, double rel, const char *what)
{
  double e = fabs(got / want - 1);
  cr_expect(e <= rel, "%s: fitted %.6g, true %.6g (rel err %.3g > %.3g)", what, got, want, e, rel);
}

Test(fit, noiseless_roofline_is_recovered_exactly)
{
  g_autoptr(GArray) a = synthetic(100e9, 0.7, 20e9, 0, 0, 1);
  ts_calib_fit f;
  g_autoptr(GError) err = NULL;
  cr_assert(ts_calib_fit_roofline((ts_calib_sample *)a->data, (int)a->len, 100e9, FALSE, &f, &err),
            "%s", err ? err->message : "");
  expect_within(f.efficiency, 0.7, 1e-12, "efficiency");
  expect_within(f.mem_bw_Bps, 20e9, 1e-12, "bandwidth");
  cr_expect(f.overhead_s == 0 && f.rms_log_error < 1e-12);
  /* Every GEMM, even 64^3 (7.5 us of arithmetic vs 2.5 us of traffic at 70 GFLOP/s and
   * 20 GB/s), is compute-bound, and every element-wise kernel memory-bound: 7 and 7. */
  cr_expect(f.ncompute == 7 && f.nmemory == 7, "compute %d memory %d", f.ncompute, f.nmemory);
}

Test(fit, noisy_timings_recover_within_one_percent)
{
  /* 2% log-normal noise on 8 copies of the sweep: 48 compute and 64 memory samples. */
  g_autoptr(GArray) a = synthetic(100e9, 0.7, 20e9, 0, 0.02, 8);
  ts_calib_fit f;
  cr_assert(ts_calib_fit_roofline((ts_calib_sample *)a->data, (int)a->len, 100e9, FALSE, &f, NULL));
  expect_within(f.efficiency, 0.7, 0.01, "efficiency");
  expect_within(f.mem_bw_Bps, 20e9, 0.01, "bandwidth");
  /* Another answer, to show the fit follows the data and not a constant. */
  g_autoptr(GArray) b = synthetic(2e12, 0.45, 900e9, 0, 0.02, 8);
  cr_assert(ts_calib_fit_roofline((ts_calib_sample *)b->data, (int)b->len, 2e12, FALSE, &f, NULL));
  expect_within(f.efficiency, 0.45, 0.01, "efficiency (accelerator-like)");
  expect_within(f.mem_bw_Bps, 900e9, 0.01, "bandwidth (accelerator-like)");
}

Test(fit, per_call_overhead_is_recovered)
{
  g_autoptr(GArray) a = synthetic(100e9, 0.6, 25e9, 4e-6, 0, 1);
  ts_calib_fit f;
  cr_assert(ts_calib_fit_roofline((ts_calib_sample *)a->data, (int)a->len, 100e9, TRUE, &f, NULL));
  expect_within(f.efficiency, 0.6, 0.01, "efficiency");
  expect_within(f.mem_bw_Bps, 25e9, 0.01, "bandwidth");
  expect_within(f.overhead_s, 4e-6, 0.01, "overhead");
  /* Without the overhead term the same data fit worse (that is what the diagnostic shows). */
  ts_calib_fit g;
  cr_assert(ts_calib_fit_roofline((ts_calib_sample *)a->data, (int)a->len, 100e9, FALSE, &g, NULL));
  cr_expect(g.rms_log_error > f.rms_log_error + 1e-3);
}

Test(fit, samples_outside_the_fit_are_ignored)
{
  g_autoptr(GArray) a = synthetic(100e9, 0.7, 20e9, 0, 0, 1);
  ts_calib_sample wild = {
      .kind = "scalar-math", .flop = 1e6, .bytes = 1e6, .time_s = 1.0, .in_fit = FALSE};
  g_strlcpy(wild.name, "gelu", sizeof wild.name);
  for (int i = 0; i < 10; i++)
    g_array_append_val(a, wild);
  ts_calib_fit f;
  cr_assert(ts_calib_fit_roofline((ts_calib_sample *)a->data, (int)a->len, 100e9, FALSE, &f, NULL));
  expect_within(f.efficiency, 0.7, 1e-12, "efficiency");
  expect_within(f.mem_bw_Bps, 20e9, 1e-12, "bandwidth");
}

Test(fit, bad_inputs_are_one_line_errors)
{
  g_autoptr(GArray) a = synthetic(100e9, 0.7, 20e9, 0, 0, 1);
  ts_calib_sample *s = (ts_calib_sample *)a->data;
  ts_calib_fit f;
  /* Peak below the sustained rate. */
  g_autoptr(GError) e1 = NULL;
  cr_expect(!ts_calib_fit_roofline(s, (int)a->len, 50e9, FALSE, &f, &e1));
  cr_expect(e1 != NULL && strstr(e1->message, "exceeds the peak") && !strchr(e1->message, '\n'));
  /* Only GEMMs: nothing to fit the bandwidth from. */
  g_autoptr(GError) e2 = NULL;
  cr_expect(!ts_calib_fit_roofline(s + 1, 6, 100e9, FALSE, &f, &e2));
  cr_expect(e2 != NULL && strstr(e2->message, "memory-bound"), "%s", e2 ? e2->message : "");
  /* A negative time names the sample. */
  s[3].time_s = -1;
  g_autoptr(GError) e3 = NULL;
  cr_expect(!ts_calib_fit_roofline(s, (int)a->len, 100e9, FALSE, &f, &e3));
  cr_expect(e3 != NULL && strstr(e3->message, "gemm 512"), "%s", e3 ? e3->message : "");
}

Test(fit, median_absolute_percentage_error)
{
  double pred[4] = {1.1, 0.8, 2.0, 3.0}, meas[4] = {1.0, 1.0, 2.0, 2.0};
  double m = ts_calib_median_ape(pred, meas, 4); /* errors 10, 20, 0, 50 -> (10 + 20) / 2 */
  cr_expect_float_eq(m, 15.0, 1e-12);
  double m3 = ts_calib_median_ape(pred, meas, 3); /* 10, 20, 0 -> 10 */
  cr_expect_float_eq(m3, 10.0, 1e-12);
}

Test(sweep, quick_sweep_has_both_roofs)
{
  ts_calib_options o = {.prec = TS_PREC_F64, .quick = TRUE, .min_time_s = 0};
  g_autoptr(GArray) a = ts_calib_sweep(&o, NULL, NULL);
  int gemm = 0, elt = 0, out = 0;
  for (guint i = 0; i < a->len; i++) {
    ts_calib_sample *s = &g_array_index(a, ts_calib_sample, i);
    cr_expect(s->time_s > 0 && s->flop > 0 && s->bytes > 0, "%s", s->name);
    gemm += strcmp(s->kind, "gemm") == 0;
    elt += strcmp(s->kind, "eltwise") == 0 && s->in_fit;
    out += !s->in_fit;
  }
  cr_expect(gemm >= 4 && elt >= 4 && out >= 1, "gemm %d eltwise %d outside %d", gemm, elt, out);
}

/* ---------------- the command ---------------- */

static int run(char **argv, const char *const *envp, char **out, char **err)
{
  int status = 0;
  g_autoptr(GError) e = NULL;
  cr_assert(
      g_spawn_sync(NULL, argv, (char **)envp, G_SPAWN_DEFAULT, NULL, NULL, out, err, &status, &e),
      "%s", e ? e->message : "");
  g_autoptr(GError) w = NULL;
  if (g_spawn_check_wait_status(status, &w))
    return 0;
  return w->domain == G_SPAWN_EXIT_ERROR ? w->code : -1; /* -1: killed by a signal */
}

Test(command, quick_run_writes_a_loadable_profile_table_dat_and_plot)
{
  g_autofree char *dir = g_dir_make_tmp("ts-calib-XXXXXX", NULL);
  g_autofree char *ini = g_build_filename(dir, "host-cpu.ini", NULL);
  g_autofree char *png = g_build_filename(dir, "cal.png", NULL);
  g_autofree char *dat = g_build_filename(dir, "cal.dat", NULL);
  char *argv[] = {TS_TRAINSIM_BIN, "calibrate", "--quick", "-q", "--min-time", "0", "-o", ini,
                  "--plot",        png,         NULL};
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
  gboolean have_gnuplot = gnuplot != NULL;
  if (!have_gnuplot)
    argv[8] = NULL; /* no --plot where gnuplot is missing: the plot test below covers it */
  int rc = run(argv, NULL, &out, &err);
  cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
  cr_expect(strstr(out, "median_abs_error_pct") != NULL && strstr(out, "measured_ms") != NULL);
  g_autoptr(GError) e = NULL;
  g_autoptr(ts_topo) t = ts_topo_load(ini, &e);
  cr_assert_not_null(t, "%s", e ? e->message : "");
  cr_expect(t->nchips == 1 && t->chip.compute_efficiency > 0 && t->chip.compute_efficiency <= 1 &&
            t->chip.memory_bw_Bps > 0 && t->chip.peak_flops > 0);
  /* The profile is fitted, and says so: without the key a chip reads as uncalibrated. */
  cr_expect(!t->chip.uncalibrated, "calibrate -o wrote no calibrated = true");
  if (have_gnuplot) {
    g_autofree char *d = NULL;
    cr_assert(g_file_get_contents(dat, &d, NULL, NULL));
    int lines = 0;
    for (char *p = d; *p; p++)
      lines += *p == '\n';
    cr_expect(lines == 2 + 19, "%d lines in the .dat", lines); /* 2 comments, 19 kernels */
    GStatBuf st;
    cr_expect(g_stat(png, &st) == 0 && st.st_size > 1000, "no plot");
    g_unlink(png);
    g_unlink(dat);
  }
  g_unlink(ini);
  g_rmdir(dir);
}

Test(command, bad_options_fail_with_one_line_and_write_nothing)
{
  g_autofree char *dir = g_dir_make_tmp("ts-calib-XXXXXX", NULL);
  g_autofree char *ini = g_build_filename(dir, "p.ini", NULL);
  g_autofree char *missing = g_build_filename(dir, "no", "such", "p.ini", NULL);
  struct {
    const char *opt, *val, *needle;
  } cases[] = {
      {"--precision", "fp16", "expected fp32 or fp64"},
      {"--plot", "x.gif", "expected a .png or .svg"},
      {"--min-time", "-1", "expected seconds per kernel"},
      {"--peak-gflops", "-5", "expected a rate in GFLOP/s"},
      {"--output", missing, "does not exist"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *argv[] = {TS_TRAINSIM_BIN,      "calibrate",          "--quick", "-o", ini,
                    (char *)cases[i].opt, (char *)cases[i].val, NULL};
    g_autofree char *out = NULL, *err = NULL;
    int rc = run(argv, NULL, &out, &err);
    cr_expect_eq(rc, 2, "%s %s: exit %d", cases[i].opt, cases[i].val, rc);
    cr_expect(strstr(err, cases[i].needle) != NULL, "%s: %s", cases[i].opt, err);
    char *nl = strchr(err, '\n');
    cr_expect(nl != NULL && nl[1] == '\0', "%s: more than one line: %s", cases[i].opt, err);
    cr_expect(!g_file_test(ini, G_FILE_TEST_EXISTS), "%s: wrote the profile", cases[i].opt);
    g_unlink(ini);
  }
  /* gnuplot missing from PATH: a clear error before the sweep, nothing written. */
  g_autofree char *png = g_build_filename(dir, "c.png", NULL);
  char *argv[] = {TS_TRAINSIM_BIN, "calibrate", "--quick", "-o", ini, "--plot", png, NULL};
  const char *envp[] = {"PATH=/nonexistent", NULL};
  g_autofree char *out = NULL, *err = NULL;
  int rc = run(argv, envp, &out, &err);
  cr_expect_eq(rc, 2);
  cr_expect(strstr(err, "gnuplot not found") != NULL, "%s", err);
  cr_expect(!g_file_test(ini, G_FILE_TEST_EXISTS) && !g_file_test(png, G_FILE_TEST_EXISTS));
  g_unlink(ini);
  g_unlink(png);
  g_rmdir(dir);
}
