/* ts_capacity: capacity planning from one simulated step: time to train, chip-hours, cost and
 * energy, with failures, checkpoints and restarts (ts_goodput). Reads the prices, power and
 * reliability keys of topology files; the command-line options that override them. */
#ifndef TS_CAPACITY_H
#define TS_CAPACITY_H

#include "ts_model.h"
#include "ts_plan.h"
#include "ts_replay.h"
#include "ts_report.h"
#include "ts_topo.h"

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/** What ts_result_fill adds from the plan and replay: tokens/s, busy and communication-only
 * time per chip, checkpoint size, data-parallel degree, energy per step. */
void ts_capacity_fill(ts_result *r, const ts_plan *p, const ts_replay_result *rr);

/** The command line of planning: a training target and overrides of the topology's figures.
 * Strings as given (parsed by ts_capacity_options_finish). */
typedef struct {
  char *tokens, *samples, *steps;
  char *price, *tdp, *comm_w, *idle_w, *pue, *network_w, *storage, *mtbf_chip, *mtbf_node;
  char *chips_per_node, *restart, *checkpoint_every;
  gboolean no_failures;
  gint64 mc_runs; /* Monte Carlo runs (default 10000; 0 = none) */
  gint64 seed;
  /* Parsed. */
  double target_tokens, target_samples, target_steps;
  ts_capacity_params over; /* overrides: < 0 = not given */
  double checkpoint_every_s;
  gboolean any; /* a target was given */
} ts_capacity_options;

/** Defaults (nothing given, 10000 Monte Carlo runs, seed 1). */
void ts_capacity_options_init(ts_capacity_options *o);
void ts_capacity_options_clear(ts_capacity_options *o);

/** The planning options as GOption entries pointing into o (NULL-terminated; caller frees
 * the array only). */
GOptionEntry *ts_capacity_option_entries(ts_capacity_options *o);

/** Concatenates two NULL-terminated entry arrays (caller frees the result only). */
GOptionEntry *ts_option_entries_concat(const GOptionEntry *a, const GOptionEntry *b);

/** Parses and checks the strings; one line naming the option on error. */
gboolean ts_capacity_options_finish(ts_capacity_options *o, GError **error);

/** The topology's figures with the command line's overrides. */
void ts_capacity_params_effective(const ts_capacity_options *o, const ts_topo *t,
                                  ts_capacity_params *out);

/**
 * Applies the planning options to a result (after ts_result_fill): energy per step with the
 * overrides, and with a target: steps, failure-free and expected days, Monte Carlo spread,
 * goodput, chip-hours, cost, energy. FALSE with an error when the target needs what the
 * model lacks (--tokens on a model without tokens).
 */
gboolean ts_capacity_apply(const ts_capacity_options *o, const ts_topo *t, ts_result *r,
                           GError **error);

/** The text table of time to train (empty string when no result is planned). Caller frees. */
char *ts_capacity_render_text(const ts_capacity_options *o, const ts_topo *t, const ts_result *res,
                              int n);

/** CSV header fragment (leading comma) and row fragment, JSON members: the same fields. */
const char *ts_capacity_csv_header(void);
void ts_capacity_csv_row(GString *s, const ts_result *r);
void ts_capacity_json(JsonBuilder *b, const ts_result *r);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ts_capacity_options, ts_capacity_options_clear)

G_END_DECLS

#endif
