/* ts_goodput: time to train under failures. Exponential interruptions at a job-wide mean time
 * between failures, periodic checkpoints, restarts that read the last checkpoint: the expected
 * wall time (closed form), the optimum checkpoint interval (Young, Daly, and the exact
 * minimiser of the closed form), and a Monte Carlo over failure times with a fixed seed. */
#ifndef TS_GOODPUT_H
#define TS_GOODPUT_H

#include <glib.h>

G_BEGIN_DECLS

/* The downtime of one interruption before the checkpoint is read back (detection, rescheduling,
 * process start, collective setup), when neither [topology] restart_minutes nor
 * --restart-minutes gives it. Without one the model took restarts as free, which made goodput
 * an upper bound nobody asked for. 10 minutes: Llama 3 (Dubey et al. 2024, arXiv 2407.21783,
 * section 3.3.4) reports 466 interruptions in 54 days on 16,384 H100s with over 90% effective
 * training time, so restart and lost work together average at most 0.10 x 54 d / 466 = 16.7 min
 * per interruption; Kokolis et al. (arXiv 2410.21680, HPCA 2025) model the same fixed
 * per-interruption restart overhead in their ETTR estimate. 10 minutes sits inside Llama 3's
 * bound with room for the lost work; docs/planning.md says how it was chosen. */
#define TS_GOODPUT_DEFAULT_RESTART_MINUTES 10.0

/** A training job under failures. Times in seconds. */
typedef struct {
  double work_s;         /* failure-free training time (steps x step time), > 0 */
  double mtbf_s;         /* job-wide mean time between interruptions; 0 = no failures */
  double checkpoint_s;   /* stall to write one checkpoint, >= 0 */
  double restart_s;      /* downtime after an interruption until work resumes (restart + read) */
  double interval_s;     /* work between checkpoints; 0 = the optimum */
  double min_interval_s; /* the optimum is no shorter than this (one step); may be 0 */
} ts_goodput_in;

/** Expected time to train and where the time goes beyond the work. */
typedef struct {
  double interval_s;         /* interval used (given, or the exact optimum) */
  double young_s, daly_s;    /* Young (1974) and Daly (2006) optimum intervals */
  double expected_s;         /* expected wall time */
  double goodput;            /* work_s / expected_s */
  double checkpoints;        /* checkpoints written in a failure-free run */
  double expected_failures;  /* expected interruptions (expected_s / mtbf_s) */
  double checkpoint_total_s; /* checkpoints x checkpoint_s */
  double restart_total_s;    /* expected failures x restart_s */
  double lost_work_s;        /* the rest: work (and checkpoint writes) redone after failures */
} ts_goodput;

/** Young's optimum interval sqrt(2 delta M) (Young, CACM 17(9), 1974). */
double ts_goodput_young(double checkpoint_s, double mtbf_s);

/** Daly's higher-order optimum (Daly, FGCS 22(3), 2006, eq. 37); M when delta >= 2M. */
double ts_goodput_daly(double checkpoint_s, double mtbf_s);

/**
 * The interval that minimises the expected wall time per unit of work,
 * (exp((tau + delta)/M) - 1) / tau, found by golden-section search (the function is unimodal).
 */
double ts_goodput_optimum(double checkpoint_s, double mtbf_s);

/** Expected wall time of one segment of length L (work + its checkpoint) with restarts R:
 * M exp(R/M) (exp(L/M) - 1) (Daly 2006, eq. 13); L when M = 0 (no failures). */
double ts_goodput_segment(double len_s, double restart_s, double mtbf_s);

/** Expected time to train: floor(W/tau) segments of tau + delta, then the remainder and its
 * checkpoint; fills every field of out. */
void ts_goodput_expect(const ts_goodput_in *in, ts_goodput *out);

/** Spread of the wall time over Monte Carlo runs. */
typedef struct {
  int runs;
  double mean_s, median_s, p90_s, min_s, max_s;
} ts_goodput_mc;

/**
 * Monte Carlo of the same process (the interval of `in`, or the optimum when 0): runs
 * independent trainings with exponential failure times drawn from xoshiro256** seeded by
 * splitmix64(seed), so the result is the same for a given seed on every platform.
 */
void ts_goodput_monte_carlo(const ts_goodput_in *in, int runs, guint64 seed, ts_goodput_mc *out);

/** xoshiro256** (Blackman & Vigna 2018), seeded by splitmix64. */
typedef struct {
  guint64 s[4];
} ts_gp_rng;

void ts_gp_rng_seed(ts_gp_rng *r, guint64 seed);
guint64 ts_gp_rng_next(ts_gp_rng *r);
/** Uniform in [0, 1) with 53 random bits. */
double ts_gp_rng_uniform(ts_gp_rng *r);

G_END_DECLS

#endif
