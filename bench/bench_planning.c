/* bench_planning: the cost of capacity planning beyond the simulated step (issue 14): the
 * closed-form time to train of one split (optimum interval, expectation), and Monte Carlo
 * runs over failure times. Prints one line per measurement; run by bench/bench_planning.sh. */
#include "ts_goodput.h"

#include <glib.h>
#include <stdio.h>

int main(void)
{
  /* A Llama-3-70B-class job on 1,024 H100s: 160 days of work, a failure every ~49 h
   * (50,677 h / 1024 chips), 9 s checkpoints, 10 min restarts. */
  ts_goodput_in in = {.work_s = 160 * 86400.0,
                      .mtbf_s = 50677.0 * 3600 / 1024,
                      .checkpoint_s = 9.0,
                      .restart_s = 609.0,
                      .min_interval_s = 3.9};
  const int reps = 1000;
  gint64 t0 = g_get_monotonic_time();
  double sink = 0;
  for (int i = 0; i < reps; i++) {
    ts_goodput g;
    ts_goodput_in x = in;
    x.work_s += i; /* defeat hoisting */
    ts_goodput_expect(&x, &g);
    sink += g.expected_s;
  }
  double per = (g_get_monotonic_time() - t0) / 1e6 / reps;
  printf("closed_form_time_to_train_s %.3g (per split, %d repetitions)\n", per, reps);
  const int runs[] = {1000, 10000, 100000};
  for (size_t k = 0; k < G_N_ELEMENTS(runs); k++) {
    ts_goodput_mc mc;
    t0 = g_get_monotonic_time();
    ts_goodput_monte_carlo(&in, runs[k], 1, &mc);
    double s = (g_get_monotonic_time() - t0) / 1e6;
    printf("monte_carlo_runs %d wall_s %.3g median_days %.4f p90_days %.4f\n", runs[k], s,
           mc.median_s / 86400, mc.p90_s / 86400);
    sink += mc.mean_s;
  }
  /* Many failures: a 16,384-GPU job (a failure every ~3.1 h) over 60 days. */
  ts_goodput_in big = {.work_s = 60 * 86400.0,
                       .mtbf_s = 50677.0 * 3600 / 16384,
                       .checkpoint_s = 5.0,
                       .restart_s = 605.0,
                       .min_interval_s = 1.0};
  ts_goodput_mc mc;
  t0 = g_get_monotonic_time();
  ts_goodput_monte_carlo(&big, 10000, 1, &mc);
  printf("monte_carlo_runs 10000 (16384 GPUs, ~470 failures a run) wall_s %.3g\n",
         (g_get_monotonic_time() - t0) / 1e6);
  return sink > 0 ? 0 : 1;
}
