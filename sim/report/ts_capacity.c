/* ts_capacity: time to train, chip-hours, cost and energy from one simulated step, with
 * failures and checkpoints (docs/planning.md). */
#include "ts_capacity.h"
#include "ts_coll.h"
#include "ts_goodput.h"
#include "ts_util.h"

#include <math.h>
#include <string.h>

#define HOUR 3600.0
#define DAY 86400.0
/* Failure events a Monte Carlo may draw (about a second of CPU). */
#define TS_MC_MAX_EVENTS 1e8

/* ---- topology keys ------------------------------------------------------------------------ */

/* ---- from the step -------------------------------------------------------------------------- */

/* Energy of one step, all chips and the network, times PUE. Busy compute at busy_W (TDP),
 * communication-only time at comm_W, the rest of the step at idle_W; a missing comm_W or
 * idle_W falls back to busy_W (an upper bound, said in the output). */
static double step_energy(const ts_capacity_params *c, const ts_result *r)
{
  if (c->busy_W <= 0)
    return 0;
  double comm_W = c->comm_W > 0 ? c->comm_W : c->busy_W;
  double idle_W = c->idle_W > 0 ? c->idle_W : c->busy_W;
  double busy = r->mean_compute_s, comm = r->mean_comm_only_s;
  double idle = r->step_time_s - busy - comm;
  if (idle < 0)
    idle = 0;
  double per_chip =
      busy * c->busy_W + comm * comm_W + idle * idle_W + r->step_time_s * c->network_W_per_chip;
  return per_chip * r->chips * (c->pue > 0 ? c->pue : 1.0);
}

void ts_capacity_fill(ts_result *r, const ts_plan *p, const ts_replay_result *rr)
{
  const ts_model *m = p->model;
  r->tokens_per_sample = m != NULL && m->t_seq > 0 ? (double)m->t_seq : 0;
  r->tokens_per_s = r->samples_per_s * r->tokens_per_sample;
  r->mean_compute_s = rr->mean_compute_s;
  r->mean_comm_only_s = rr->mean_comm_only_s;
  /* Each shard once: parameters are replicated over data parallelism below ZeRO-3, optimizer
   * state below ZeRO-1. The memory is the largest pipeline stage's, so with pipelines this
   * is an upper bound. */
  int dp = p->degree[TS_AX_DP] > 0 ? p->degree[TS_AX_DP] : 1;
  double prep = p->zero >= 3 ? 1 : dp, orep = p->zero >= 1 ? 1 : dp;
  r->checkpoint_bytes = r->chips * (p->mem.params / prep + p->mem.optimizer / orep);
  r->dp_degree = dp;
  r->dp_active = dp;
  /* Chips out: the job shrinks by the data-parallel replicas that hold them. */
  const ts_faults *f = &p->topo->faults;
  if (f->nout > 0) {
    /* A chip's replica is its member index in its dp group; chips of one replica share it.
     * Count distinct replicas among the chips out. */
    int lost = 0;
    for (int i = 0; i < f->nout; i++) {
      int mi = 0, k;
      ts_group_base_chip(p->topo, &p->shape[TS_AX_DP], f->out[i], &mi);
      for (k = 0; k < i; k++) {
        int mk = 0;
        ts_group_base_chip(p->topo, &p->shape[TS_AX_DP], f->out[k], &mk);
        if (mk == mi)
          break;
      }
      if (k == i)
        lost++;
    }
    r->dp_active = dp - lost > 0 ? dp - lost : 0;
    r->samples_per_s *= (double)r->dp_active / dp;
    r->tokens_per_s = r->samples_per_s * r->tokens_per_sample;
  }
  r->energy_per_step_J = step_energy(&p->topo->cap, r);
}

/* ---- options ------------------------------------------------------------------------------- */

void ts_capacity_options_init(ts_capacity_options *o)
{
  memset(o, 0, sizeof *o);
  o->mc_runs = 10000;
  o->seed = 1;
}

void ts_capacity_options_clear(ts_capacity_options *o)
{
  char **s[] = {&o->tokens,    &o->samples,        &o->steps,           &o->price,
                &o->tdp,       &o->comm_w,         &o->idle_w,          &o->pue,
                &o->network_w, &o->storage,        &o->mtbf_chip,       &o->mtbf_node,
                &o->restart,   &o->chips_per_node, &o->checkpoint_every};
  for (size_t i = 0; i < G_N_ELEMENTS(s); i++)
    g_clear_pointer(s[i], g_free);
}

GOptionEntry *ts_capacity_option_entries(ts_capacity_options *o)
{
  GOptionEntry e[] = {
      {"tokens", 0, 0, G_OPTION_ARG_STRING, &o->tokens,
       "Train on N tokens (e.g. 15e12): days, chip-hours, cost, energy, goodput", "N"},
      {"samples", 0, 0, G_OPTION_ARG_STRING, &o->samples, "Train on N samples instead", "N"},
      {"steps", 0, 0, G_OPTION_ARG_STRING, &o->steps, "Train for N steps instead", "N"},
      {"price-per-hour", 0, 0, G_OPTION_ARG_STRING, &o->price,
       "USD per chip-hour (default: the topology's [chip] price_per_hour)", "USD"},
      {"tdp-W", 0, 0, G_OPTION_ARG_STRING, &o->tdp, "Chip power while computing, W ([chip] tdp_W)",
       "W"},
      {"comm-W", 0, 0, G_OPTION_ARG_STRING, &o->comm_w,
       "Chip power while only communicating, W ([chip] comm_W; default the TDP)", "W"},
      {"idle-W", 0, 0, G_OPTION_ARG_STRING, &o->idle_w,
       "Chip power while waiting, W ([chip] idle_W; default the TDP)", "W"},
      {"pue", 0, 0, G_OPTION_ARG_STRING, &o->pue,
       "Facility power usage effectiveness, >= 1 ([topology] pue; default 1, IT power only)", "P"},
      {"network-W", 0, 0, G_OPTION_ARG_STRING, &o->network_w,
       "Switch and NIC power per chip, W ([topology] network_W_per_chip)", "W"},
      {"storage-GBps-per-chip", 0, 0, G_OPTION_ARG_STRING, &o->storage,
       "Checkpoint write/read bandwidth per chip, GB/s (the job's is this x chips; [topology] "
       "storage_GBps_per_chip)",
       "GBPS"},
      {"mtbf-chip-hours", 0, 0, G_OPTION_ARG_STRING, &o->mtbf_chip,
       "Mean time between job-interrupting failures of one chip, hours ([topology] "
       "mtbf_chip_hours)",
       "H"},
      {"mtbf-node-hours", 0, 0, G_OPTION_ARG_STRING, &o->mtbf_node,
       "Of one node beyond its chips, hours ([topology] mtbf_node_hours)", "H"},
      {"chips-per-node", 0, 0, G_OPTION_ARG_STRING, &o->chips_per_node,
       "Chips per node, for node failures ([topology] chips_per_node)", "N"},
      {"restart-minutes", 0, 0, G_OPTION_ARG_STRING, &o->restart,
       "Minutes from an interruption to training again, checkpoint read aside ([topology] "
       "restart_minutes; default 10, bounded by Llama 3's interruptions: docs/planning.md)",
       "MIN"},
      {"checkpoint-every-minutes", 0, 0, G_OPTION_ARG_STRING, &o->checkpoint_every,
       "Minutes of training between checkpoints (default: the optimum)", "MIN"},
      {"no-failures", 0, 0, G_OPTION_ARG_NONE, &o->no_failures,
       "Plan without failures (the failure-free time to train)", NULL},
      {"monte-carlo", 0, 0, G_OPTION_ARG_INT64, &o->mc_runs,
       "Monte Carlo runs over failure times for the median and 90th percentile (default 10000)",
       "N"},
      {"seed", 0, 0, G_OPTION_ARG_INT64, &o->seed, "Seed of the Monte Carlo (default 1)", "S"},
      {NULL}};
  return g_memdup2(e, sizeof e);
}

GOptionEntry *ts_option_entries_concat(const GOptionEntry *a, const GOptionEntry *b)
{
  int na = 0, nb = 0;
  while (a[na].long_name != NULL)
    na++;
  while (b[nb].long_name != NULL)
    nb++;
  GOptionEntry *e = g_new0(GOptionEntry, (gsize)(na + nb + 1));
  memcpy(e, a, sizeof *e * (gsize)na);
  memcpy(e + na, b, sizeof *e * (gsize)nb);
  return e;
}

/* A number from an option: NULL keeps *out; otherwise in [lo, hi] (lo excluded when open). */
static gboolean opt_number(const char *name, const char *v, double lo, gboolean open, double hi,
                           const char *what, double *out, GError **error)
{
  if (v == NULL)
    return TRUE;
  double d;
  if (!ts_parse_double(v, &d) || !(open ? d > lo : d >= lo) || !(d <= hi)) {
    g_autofree char *los = ts_dtostr(lo), *his = ts_dtostr(hi);
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--%s '%s': expected %s in %s%s, %s]", name, v,
                what, open ? "(" : "[", los, his);
    return FALSE;
  }
  *out = d;
  return TRUE;
}

gboolean ts_capacity_options_finish(ts_capacity_options *o, GError **error)
{
  ts_capacity_params *c = &o->over;
  double *all[] = {
      &c->price_per_chip_hour, &c->busy_W,      &c->comm_W,      &c->idle_W,      &c->pue,
      &c->network_W_per_chip,  &c->storage_Bps, &c->mtbf_chip_s, &c->mtbf_node_s, &c->restart_s};
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    *all[i] = -1;
  c->chips_per_node = -1;
  double storage = -1, mtbf_chip = -1, mtbf_node = -1, restart = -1, every = -1, per_node = -1;
  o->target_tokens = o->target_samples = o->target_steps = 0;
  if (!opt_number("tokens", o->tokens, 0, TRUE, 1e30, "a number of tokens", &o->target_tokens,
                  error) ||
      !opt_number("samples", o->samples, 0, TRUE, 1e30, "a number of samples", &o->target_samples,
                  error) ||
      !opt_number("steps", o->steps, 1, FALSE, 1e30, "a whole number of steps", &o->target_steps,
                  error) ||
      !opt_number("price-per-hour", o->price, 0, FALSE, 1e6, "USD per chip-hour",
                  &c->price_per_chip_hour, error) ||
      !opt_number("tdp-W", o->tdp, 0, FALSE, 1e6, "a power in W", &c->busy_W, error) ||
      !opt_number("comm-W", o->comm_w, 0, FALSE, 1e6, "a power in W", &c->comm_W, error) ||
      !opt_number("idle-W", o->idle_w, 0, FALSE, 1e6, "a power in W", &c->idle_W, error) ||
      !opt_number("pue", o->pue, 1, FALSE, 10, "a power usage effectiveness", &c->pue, error) ||
      !opt_number("network-W", o->network_w, 0, FALSE, 1e6, "a power per chip in W",
                  &c->network_W_per_chip, error) ||
      !opt_number("storage-GBps-per-chip", o->storage, 0, TRUE, 1e9, "a bandwidth in GB/s",
                  &storage, error) ||
      !opt_number("mtbf-chip-hours", o->mtbf_chip, 0, TRUE, 1e12, "hours", &mtbf_chip, error) ||
      !opt_number("mtbf-node-hours", o->mtbf_node, 0, TRUE, 1e12, "hours", &mtbf_node, error) ||
      !opt_number("chips-per-node", o->chips_per_node, 1, FALSE, 1048576, "a number of chips",
                  &per_node, error) ||
      !opt_number("restart-minutes", o->restart, 0, FALSE, 1e6, "minutes", &restart, error) ||
      !opt_number("checkpoint-every-minutes", o->checkpoint_every, 0, TRUE, 1e9, "minutes", &every,
                  error))
    return FALSE;
  /* --steps 0.5 planned half a step ("steps 0.5", goodput 0.6%), --chips-per-node 2.5 nodes of
   * two and a half chips. */
  if ((o->steps != NULL && o->target_steps != floor(o->target_steps)) ||
      (o->chips_per_node != NULL && per_node != floor(per_node))) {
    gboolean st = o->steps != NULL && o->target_steps != floor(o->target_steps);
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--%s '%s': expected a whole number of %s",
                st ? "steps" : "chips-per-node", st ? o->steps : o->chips_per_node,
                st ? "steps in [1, 1e+30]" : "chips in [1, 1048576]");
    return FALSE;
  }
  int ntargets = (o->tokens != NULL) + (o->samples != NULL) + (o->steps != NULL);
  if (ntargets > 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--tokens, --samples, --steps: expected one training target, got %d", ntargets);
    return FALSE;
  }
  if (o->mc_runs < 0 || o->mc_runs > 100000000) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--monte-carlo %" G_GINT64_FORMAT ": expected a number of runs in [0, 1e8]",
                o->mc_runs);
    return FALSE;
  }
  o->any = ntargets == 1;
  c->storage_Bps = storage > 0 ? storage * 1e9 : -1;
  c->mtbf_chip_s = mtbf_chip > 0 ? mtbf_chip * HOUR : -1;
  c->mtbf_node_s = mtbf_node > 0 ? mtbf_node * HOUR : -1;
  c->restart_s = restart >= 0 ? restart * 60 : -1;
  c->chips_per_node = per_node > 0 ? (int)per_node : -1;
  o->checkpoint_every_s = every > 0 ? every * 60 : 0;
  return TRUE;
}

void ts_capacity_params_effective(const ts_capacity_options *o, const ts_topo *t,
                                  ts_capacity_params *out)
{
  *out = t->cap;
  if (o == NULL)
    return;
  const ts_capacity_params *v = &o->over;
#define OVER(f)                                                                                    \
  if (v->f >= 0)                                                                                   \
  out->f = v->f
  OVER(price_per_chip_hour);
  OVER(busy_W);
  OVER(comm_W);
  OVER(idle_W);
  OVER(pue);
  OVER(network_W_per_chip);
  OVER(storage_Bps);
  OVER(mtbf_chip_s);
  OVER(mtbf_node_s);
  OVER(restart_s);
  if (v->restart_s >= 0)
    out->restart_default = FALSE;
  OVER(chips_per_node);
#undef OVER
  if (out->chips_per_node <= 0) {
    int d = ts_topo_dim_index(t, "node");
    out->chips_per_node = d >= 0 ? t->dims[d].size : 0;
  }
}

/* The job's interruption rate: every chip's and every node's, in series (one failure stops
 * a synchronous job; arXiv 2410.21680 models a job's MTTF the same way). */
static double job_mtbf(const ts_capacity_params *c, int chips)
{
  double rate = 0;
  if (c->mtbf_chip_s > 0)
    rate += chips / c->mtbf_chip_s;
  if (c->mtbf_node_s > 0 && c->chips_per_node > 0)
    rate += ceil((double)chips / c->chips_per_node) / c->mtbf_node_s;
  return rate > 0 ? 1.0 / rate : 0;
}

static const char *fmt_dur(char *b, size_t n, double s);

gboolean ts_capacity_apply(const ts_capacity_options *o, const ts_topo *t, ts_result *r,
                           GError **error)
{
  ts_capacity_params c;
  ts_capacity_params_effective(o, t, &c);
  r->energy_per_step_J = step_energy(&c, r);
  r->cap_used = c;
  /* Normalised comparisons: what a dollar and a joule buy, failure-free. */
  double per_s = r->tokens_per_s > 0 ? r->tokens_per_s : r->samples_per_s;
  r->tokens_per_usd =
      c.price_per_chip_hour > 0 ? per_s * HOUR / (r->chips * c.price_per_chip_hour) : 0;
  r->tokens_per_J = r->energy_per_step_J > 0 ? per_s * r->step_time_s / r->energy_per_step_J : 0;
  if (o == NULL || !o->any)
    return TRUE;
  double samples_per_step =
      (double)r->global_batch * r->dp_active / (r->dp_degree > 0 ? r->dp_degree : 1);
  if (o->target_tokens > 0 && r->tokens_per_sample <= 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--tokens: the model has no sequence length; expected --samples or --steps");
    return FALSE;
  }
  if (samples_per_step <= 0 || r->step_time_s <= 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--fail: every data-parallel replica of %s has a chip out; expected at least one "
                "left",
                r->split);
    return FALSE;
  }
  double steps = o->target_steps > 0 ? o->target_steps
                 : o->target_samples > 0
                     ? ceil(o->target_samples / samples_per_step)
                     : ceil(o->target_tokens / (samples_per_step * r->tokens_per_sample));
  r->planned = TRUE;
  r->train_steps = steps;
  r->train_s = steps * r->step_time_s;
  r->job_mtbf_s = o->no_failures ? 0 : job_mtbf(&c, r->chips);
  r->checkpoint_s = c.storage_Bps > 0 ? r->checkpoint_bytes / (c.storage_Bps * r->chips) : 0;
  ts_goodput_in gi = {.work_s = r->train_s,
                      .mtbf_s = r->job_mtbf_s,
                      .checkpoint_s = r->checkpoint_s,
                      .restart_s = c.restart_s + r->checkpoint_s, /* read back at write speed */
                      .interval_s = o->checkpoint_every_s,
                      .min_interval_s = r->step_time_s};
  r->restart_s = gi.restart_s;
  ts_goodput g;
  ts_goodput_expect(&gi, &g);
  r->expected_train_s = g.expected_s;
  r->goodput = g.goodput;
  r->checkpoint_interval_s = g.interval_s;
  r->expected_failures = g.expected_failures;
  r->median_train_s = r->p90_train_s = g.expected_s;
  /* A restart or a checkpoint interval long against the job MTBF: training never ends (each
   * restart is retried exp(R/M) times on average), and the expectation overflows to inf,
   * which JSON cannot carry. Refused, naming the figures. */
  if (r->job_mtbf_s > 0 && (!isfinite(g.expected_s) || g.goodput < 1e-6)) {
    char m[48], rs[48], iv[48];
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "time to train of %s: with a job MTBF of %s, a downtime of %s per interruption and "
                "checkpoints every %s, training would not finish (goodput %.2g); expected a "
                "restart and a checkpoint interval well under the job MTBF (--restart-minutes, "
                "--checkpoint-every-minutes, --mtbf-chip-hours)",
                r->split, fmt_dur(m, sizeof m, r->job_mtbf_s), fmt_dur(rs, sizeof rs, gi.restart_s),
                fmt_dur(iv, sizeof iv, g.interval_s), g.goodput);
    return FALSE;
  }
  /* The Monte Carlo draws every failure of every run: runs x expected failures events. Past
   * TS_MC_MAX_EVENTS (--tokens 1e30 meant 1e21 failures: a hang) it is skipped; a run of that
   * many failures has a relative spread of about 1/sqrt(failures), under 1% from 1e4 on, so
   * the median and 90th percentile are the expectation, and the output says so. */
  gboolean mc_affordable = (double)o->mc_runs * (g.expected_failures + 1) <= TS_MC_MAX_EVENTS;
  r->mc_skipped = r->job_mtbf_s > 0 && o->mc_runs > 0 && !mc_affordable;
  if (r->job_mtbf_s > 0 && o->mc_runs > 0 && mc_affordable) {
    ts_goodput_mc mc;
    ts_goodput_monte_carlo(&gi, (int)o->mc_runs, (guint64)o->seed, &mc);
    r->median_train_s = mc.median_s;
    r->p90_train_s = mc.p90_s;
    r->mc_runs = o->mc_runs;
    r->mc_seed = o->seed;
  }
  r->chip_hours = r->chips * r->expected_train_s / HOUR;
  r->cost_usd = r->chip_hours * c.price_per_chip_hour;
  /* Steps redone after failures and checkpoint stalls cost step energy pro rata; restarts
   * hold the chips idle. */
  double idle_W = c.idle_W > 0 ? c.idle_W : c.busy_W;
  double stall = g.expected_s - g.restart_total_s;
  r->energy_J = r->energy_per_step_J * steps * (r->train_s > 0 ? stall / r->train_s : 1) +
                g.restart_total_s * r->chips * idle_W * (c.pue > 0 ? c.pue : 1);
  return TRUE;
}

/* ---- outputs --------------------------------------------------------------------------------- */

static char *fmt_days(double s)
{
  char b[48];
  /* %.1f of 1e19 days wrote twenty digits and ".0": three significant digits past 1e6. */
  g_ascii_formatd(b, sizeof b, s >= 1e6 * DAY ? "%.3g" : s >= 10 * DAY ? "%.1f" : "%.2f", s / DAY);
  return g_strdup(b);
}

/* Durations a planner reads: seconds to minutes, hours, days. */
static const char *fmt_dur(char *b, size_t n, double s)
{
  char v[32];
  const char *u = "s";
  double x = s;
  if (s >= 2 * DAY) {
    x = s / DAY;
    u = "days";
  } else if (s >= 2 * HOUR) {
    x = s / HOUR;
    u = "h";
  } else if (s >= 120) {
    x = s / 60;
    u = "min";
  }
  g_ascii_formatd(v, sizeof v, x >= 100 ? "%.0f" : "%.3g", x);
  g_snprintf(b, n, "%s %s", v, u);
  return b;
}

static char *fmt_si(double v, const char *unit)
{
  const char *pre[] = {"", "k", "M", "G", "T", "P", "E"};
  int k = 0;
  while (fabs(v) >= 1000 && k < 6) {
    v /= 1000;
    k++;
  }
  char b[48];
  /* Past exa the mantissa would grow without bound ("1907349 E"): an exponent instead. */
  g_ascii_formatd(b, sizeof b, v >= 1000 ? "%.3g" : v >= 100 ? "%.0f" : "%.3g", v);
  return g_strdup_printf("%s %s%s", b, pre[k], unit);
}

char *ts_capacity_render_text(const ts_capacity_options *o, const ts_topo *t, const ts_result *res,
                              int n)
{
  int planned = 0;
  for (int i = 0; i < n; i++)
    planned += res[i].planned;
  if (planned == 0)
    return g_strdup("");
  ts_capacity_params c;
  ts_capacity_params_effective(o, t, &c);
  GString *s = g_string_new("\n");
  const ts_result *r0 = &res[0];
  double target = o->target_tokens > 0    ? o->target_tokens
                  : o->target_samples > 0 ? o->target_samples
                                          : o->target_steps;
  g_autofree char *tg = fmt_si(target, o->target_tokens > 0    ? "tokens"
                                       : o->target_samples > 0 ? "samples"
                                                               : "steps");
  g_string_append_printf(s, "time to train %s", tg);
  if (r0->job_mtbf_s > 0) {
    char m[48], st[48];
    g_string_append_printf(s, ": failures every %s (job MTBF), restart %s%s + checkpoint read",
                           fmt_dur(m, sizeof m, r0->job_mtbf_s),
                           fmt_dur(st, sizeof st, c.restart_s),
                           c.restart_default ? " (default)" : "");
    if (c.storage_Bps <= 0)
      g_string_append(s, "; no storage bandwidth: checkpoints taken as free");
  } else
    g_string_append(s, o->no_failures ? ": no failures (--no-failures)"
                                      : ": no failure model (no mtbf_chip_hours)");
  g_string_append_c(s, '\n');
  /* Throughput per chip beside the total, so that arrays of different sizes compare. */
  enum { NC = 13 };
  const char *head[NC] = {"split",         "tokens/s", "tokens/s/chip", "steps",   "days no fail",
                          "days expected", "p50 days", "p90 days",      "goodput", "ckpt every",
                          "chip-hours",    "cost",     "energy"};
  char ***cells = g_new0(char **, n);
  int w[NC];
  for (int k = 0; k < NC; k++)
    w[k] = (int)strlen(head[k]);
  for (int i = 0; i < n; i++) {
    const ts_result *r = &res[i];
    cells[i] = g_new0(char *, NC + 1);
    char b[48];
    cells[i][0] = g_strdup(r->split);
    cells[i][1] = r->tokens_per_s > 0 ? fmt_si(r->tokens_per_s, "") : g_strdup("-");
    g_strstrip(cells[i][1]);
    cells[i][2] = r->tokens_per_s > 0 && r->chips > 0 ? fmt_si(r->tokens_per_s / r->chips, "")
                                                      : g_strdup("-");
    g_strstrip(cells[i][2]);
    cells[i][3] = fmt_si(r->train_steps, "");
    g_strstrip(cells[i][3]);
    cells[i][4] = fmt_days(r->train_s);
    cells[i][5] = fmt_days(r->expected_train_s);
    cells[i][6] = fmt_days(r->median_train_s);
    cells[i][7] = fmt_days(r->p90_train_s);
    g_ascii_formatd(b, sizeof b, "%.1f", 100 * r->goodput);
    cells[i][8] = g_strdup_printf("%s%%", b);
    cells[i][9] = r->job_mtbf_s > 0 ? g_strdup(fmt_dur(b, sizeof b, r->checkpoint_interval_s))
                                    : g_strdup("-");
    cells[i][10] = fmt_si(r->chip_hours, "");
    g_strstrip(cells[i][10]);
    cells[i][11] = r->cost_usd > 0 ? fmt_si(r->cost_usd, "USD") : g_strdup("-");
    cells[i][12] = r->energy_J > 0 ? fmt_si(r->energy_J / 3600.0, "Wh") : g_strdup("-");
    for (int k = 0; k < NC; k++)
      w[k] = MAX(w[k], (int)g_utf8_strlen(cells[i][k], -1));
  }
  for (int k = 0; k < NC; k++) {
    ts_append_cell(s, head[k], k + 1 < NC ? w[k] : 0, k > 0);
    g_string_append(s, k + 1 < NC ? "  " : "\n");
  }
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < NC; k++) {
      ts_append_cell(s, cells[i][k], k + 1 < NC ? w[k] : 0, k > 0);
      g_string_append(s, k + 1 < NC ? "  " : "\n");
    }
    g_strfreev(cells[i]);
  }
  g_free(cells);
  if (c.busy_W > 0 && (c.comm_W <= 0 || c.idle_W <= 0))
    g_string_append(s, "energy: no comm_W/idle_W given, the TDP is used for them (an upper "
                       "bound)\n");
  if (c.price_per_chip_hour <= 0)
    g_string_append(s, "cost: no price given ([chip] price_per_hour or --price-per-hour)\n");
  /* The energy column's "-" said nothing of why, where the cost's did. */
  if (c.busy_W <= 0)
    g_string_append(s, "energy: no chip power given ([chip] tdp_W or --tdp-W)\n");
  for (int i = 0; i < n; i++)
    if (res[i].mc_skipped) {
      g_string_append(s, "p50/p90: Monte Carlo skipped, too many failures per run to draw (over "
                         "1e8 events); their spread is under 1%, the expectation is shown\n");
      break;
    }
  return g_string_free(s, FALSE);
}

const char *ts_capacity_csv_header(void)
{
  return ",tokens_per_s,tokens_per_s_per_chip,tokens_per_usd,tokens_per_J,checkpoint_bytes,"
         "dp_active,energy_per_step_J,"
         "train_steps,train_days_no_failures,train_days_expected,train_days_median,"
         "train_days_p90,goodput,job_mtbf_s,checkpoint_write_s,checkpoint_interval_s,"
         "expected_failures,chip_hours,cost_usd,energy_J";
}

static void num(GString *s, double v)
{
  g_string_append_c(s, ',');
  ts_append_g(s, 10, v);
}

/* A figure that needs an input the user may not have given (a price, a power, a failure
 * model): empty when it is missing, never a 0 that reads as "free" or "fails at once". */
static void num_opt(GString *s, double v, gboolean have)
{
  if (have)
    num(s, v);
  else
    g_string_append_c(s, ',');
}

void ts_capacity_csv_row(GString *s, const ts_result *r)
{
  const ts_capacity_params *c = &r->cap_used;
  gboolean priced = c->price_per_chip_hour > 0, powered = r->energy_per_step_J > 0;
  /* A model without a sequence (a CNN) has no tokens: empty, not "0 tokens/s". */
  gboolean tokens = r->tokens_per_sample > 0;
  num_opt(s, r->tokens_per_s, tokens);
  num_opt(s, r->chips > 0 ? r->tokens_per_s / r->chips : 0, tokens);
  /* For a model without tokens these held samples per USD and per J under a tokens name. */
  num_opt(s, r->tokens_per_usd, priced && tokens);
  num_opt(s, r->tokens_per_J, powered && tokens);
  /* A byte count, exact (%.10g wrote 18449428480 as 1.844942848e+10). */
  g_string_append_printf(s, ",%.0f", r->checkpoint_bytes);
  g_string_append_printf(s, ",%d", r->dp_active);
  num_opt(s, r->energy_per_step_J, powered);
  if (!r->planned) {
    g_string_append(s, ",,,,,,,,,,,,,");
    return;
  }
  const double v[] = {r->train_steps,
                      r->train_s / DAY,
                      r->expected_train_s / DAY,
                      r->median_train_s / DAY,
                      r->p90_train_s / DAY,
                      r->goodput,
                      r->job_mtbf_s,
                      r->checkpoint_s,
                      r->checkpoint_interval_s,
                      r->expected_failures,
                      r->chip_hours,
                      r->cost_usd,
                      r->energy_J};
  for (size_t k = 0; k < G_N_ELEMENTS(v); k++)
    num_opt(s, v[k],
            k == 6    ? r->job_mtbf_s > 0 /* no failure model */
            : k == 11 ? priced
            : k == 12 ? powered
                      : TRUE);
}

static void jnum(JsonBuilder *b, const char *k, double v)
{
  json_builder_set_member_name(b, k);
  json_builder_add_double_value(b, v);
}

/* null when the input it needs was not given (see num_opt). */
static void jnum_opt(JsonBuilder *b, const char *k, double v, gboolean have)
{
  if (have) {
    jnum(b, k, v);
  } else {
    json_builder_set_member_name(b, k);
    json_builder_add_null_value(b);
  }
}

void ts_capacity_json(JsonBuilder *b, const ts_result *r)
{
  /* null for a model without a sequence (see ts_capacity_csv_row). */
  gboolean tokens = r->tokens_per_sample > 0;
  jnum_opt(b, "tokens_per_s", r->tokens_per_s, tokens);
  jnum_opt(b, "tokens_per_s_per_chip", r->chips > 0 ? r->tokens_per_s / r->chips : 0, tokens);
  const ts_capacity_params *c = &r->cap_used;
  gboolean priced = c->price_per_chip_hour > 0, powered = r->energy_per_step_J > 0;
  jnum_opt(b, "tokens_per_usd", r->tokens_per_usd, priced && tokens);
  jnum_opt(b, "tokens_per_J", r->tokens_per_J, powered && tokens);
  jnum(b, "checkpoint_bytes", r->checkpoint_bytes);
  json_builder_set_member_name(b, "dp_active");
  json_builder_add_int_value(b, r->dp_active);
  jnum_opt(b, "energy_per_step_J", r->energy_per_step_J, powered);
  if (!r->planned)
    return;
  json_builder_set_member_name(b, "time_to_train");
  json_builder_begin_object(b);
  jnum(b, "steps", r->train_steps);
  jnum(b, "days_no_failures", r->train_s / DAY);
  jnum(b, "days_expected", r->expected_train_s / DAY);
  jnum(b, "days_median", r->median_train_s / DAY);
  jnum(b, "days_p90", r->p90_train_s / DAY);
  jnum(b, "goodput", r->goodput);
  jnum_opt(b, "job_mtbf_s", r->job_mtbf_s, r->job_mtbf_s > 0);
  jnum(b, "checkpoint_write_s", r->checkpoint_s);
  jnum(b, "checkpoint_interval_s", r->checkpoint_interval_s);
  jnum(b, "restart_s", r->restart_s);
  jnum(b, "expected_failures", r->expected_failures);
  jnum(b, "chip_hours", r->chip_hours);
  jnum_opt(b, "cost_usd", r->cost_usd, priced);
  jnum_opt(b, "energy_J", r->energy_J, powered);
  /* What produced these numbers: the figures in effect (topology keys or their overrides),
   * fallbacks applied (comm_W and idle_W default to the TDP, PUE to 1), null for a figure not
   * given (no price, no power, no failure model, free checkpoints); and the Monte Carlo. The
   * zeros written here before read as "PUE 0" and "MTBF 0 h". */
  json_builder_set_member_name(b, "assumptions");
  json_builder_begin_object(b);
  jnum_opt(b, "price_per_chip_hour_usd", c->price_per_chip_hour, priced);
  jnum_opt(b, "tdp_W", c->busy_W, c->busy_W > 0);
  jnum_opt(b, "comm_W", c->comm_W > 0 ? c->comm_W : c->busy_W, c->busy_W > 0 || c->comm_W > 0);
  jnum_opt(b, "idle_W", c->idle_W > 0 ? c->idle_W : c->busy_W, c->busy_W > 0 || c->idle_W > 0);
  jnum(b, "pue", c->pue > 0 ? c->pue : 1.0);
  jnum(b, "network_W_per_chip", c->network_W_per_chip);
  jnum_opt(b, "storage_GBps_per_chip", c->storage_Bps / 1e9, c->storage_Bps > 0);
  jnum_opt(b, "mtbf_chip_hours", c->mtbf_chip_s / HOUR, c->mtbf_chip_s > 0);
  jnum_opt(b, "mtbf_node_hours", c->mtbf_node_s / HOUR, c->mtbf_node_s > 0);
  json_builder_set_member_name(b, "chips_per_node");
  json_builder_add_int_value(b, c->chips_per_node);
  jnum(b, "restart_minutes", c->restart_s / 60);
  /* true: trainsim's default (docs/planning.md), not the topology's or the command line's. */
  json_builder_set_member_name(b, "restart_minutes_default");
  json_builder_add_boolean_value(b, c->restart_default);
  json_builder_set_member_name(b, "monte_carlo_runs");
  json_builder_add_int_value(b, r->mc_runs);
  json_builder_set_member_name(b, "monte_carlo_skipped");
  json_builder_add_boolean_value(b, r->mc_skipped);
  json_builder_set_member_name(b, "seed");
  json_builder_add_int_value(b, r->mc_seed);
  json_builder_end_object(b);
  json_builder_end_object(b);
}
