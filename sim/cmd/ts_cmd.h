/* ts_cmd: the subcommands of the trainsim program. Each returns the process exit status:
 * 0 success, 1 a check failed (validate, check), 2 bad input (one line on stderr). */
#ifndef TS_CMD_H
#define TS_CMD_H

#include "ts_import.h"
#include "ts_model.h"
#include "ts_plan.h"
#include "ts_report.h"
#include "ts_topo.h"

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef int (*ts_cmd_fn)(int argc, char **argv);

typedef struct {
  const char *name;
  ts_cmd_fn fn;
  const char *summary;
} ts_cmd;

int ts_cmd_run(int argc, char **argv);
int ts_cmd_collective(int argc, char **argv);
int ts_cmd_trace(int argc, char **argv);
int ts_cmd_replay(int argc, char **argv);
int ts_cmd_platform(int argc, char **argv);
int ts_cmd_validate(int argc, char **argv);
int ts_cmd_calibrate(int argc, char **argv);
int ts_cmd_check(int argc, char **argv);
int ts_cmd_sweep(int argc, char **argv);
int ts_cmd_merge(int argc, char **argv);
int ts_cmd_search(int argc, char **argv);
int ts_cmd_plot(int argc, char **argv);
int ts_cmd_model(int argc, char **argv);
int ts_cmd_import(int argc, char **argv);
int ts_cmd_export(int argc, char **argv);

/** A trace from files of another tool (from: chakra, astrasim, or NULL to detect; a trainsim
 * trace is detected too), checked against topo, algorithms resolved. cmd names the command in
 * the note printed when a Chakra trace's collectives lack ranks that were not given. */
ts_trace *ts_cmd_import_trace(const char *cmd, const char *from, const char *const *paths, int n,
                              const ts_topo *topo, const ts_import_options *o, GError **error);

/**
 * `calibrate --against FILE.csv -o OUT.ini`: fits the chip's compute parameters to the file's
 * measured step times (a random share `fraction` of rows drawn with `seed`, unless the file has
 * a set column) and writes the profile. cmdline is recorded in the file. Returns the exit
 * status.
 */
int ts_calibrate_against(const char *file, const char *output, guint seed, double fraction,
                         const char *cmdline, gboolean quiet);

/**
 * check's reader of a scenarios file, from its text (the fuzzing entry point; models and
 * topologies are named, not loaded): the number of scenarios, their names (NULL-terminated)
 * and golden step times (NAN when none), or -1 with one error naming the file and the
 * [group] key. names and golden_s may be NULL; the caller frees them.
 */
int ts_check_parse(const char *path, const char *text, gsize len, char ***names, double **golden_s,
                   GError **error);

/** check --update's rewrite: the text with step_time_s = now[i] for scenario names[i] (a
 * scenario without one gets a line after its last key); everything else kept byte for byte. */
char *ts_check_rewrite(const char *text, char *const *names, const double *now, int n);

/** Prints "trainsim <cmd>: <message>" for an input error and returns TS_EXIT_INPUT. */
int ts_cmd_fail(const char *cmd, const GError *error);

/** Sets *error for a word left over after the options of `trainsim CMD`, saying what to do. */
void ts_cmd_unexpected(const char *cmd, const char *arg, GError **error);
/** msg with each word of over 512 bytes cut to its ends around "...[N bytes]..." (caller frees). */
char *ts_cmd_shorten_words(const char *msg);

/**
 * Parses argv with a GOption context built from entries; on error prints one line and
 * returns FALSE (the caller exits 2). summary and description go to --help.
 */
gboolean ts_cmd_parse(const char *cmd, const char *params, const char *summary,
                      const char *description, const GOptionEntry *entries, int *argc, char ***argv,
                      GError **error);

/** Parses --collective-algorithm (NULL = auto); FALSE with a one-line error naming the choices. */
gboolean ts_cmd_algo(const char *name, int *out, GError **error);

/** --cfg (may be NULL) given with a backend that reads no SimGrid settings: FALSE, one line. */
gboolean ts_cmd_cfg(const char *backend, char *const *cfg, GError **error);

/* Parses --format (NULL: text); the error names the value. */
gboolean ts_cmd_format(const char *name, ts_format *out, GError **error);

/** Loads a topology given as a path or a shipped name; *path (may be NULL) gets the file. */
ts_topo *ts_cmd_load_topo(const char *name, char **path, GError **error);

/** Loads a model given as a path or a shipped name; *path (may be NULL) gets the file. */
ts_model *ts_cmd_load_model(const char *name, char **path, GError **error);

/** Creates an output folder (with parents) and checks it is writable, before any work. */
gboolean ts_cmd_prepare_dir(const char *dir, GError **error);

/** Removes the folders ts_cmd_prepare_dir created, each only if still empty: a command that
 * fails leaves no empty output set behind (main calls it on a non-zero status). */
void ts_cmd_remove_created_dir(void);

/**
 * The plan options (topology, model, split, batch sizes, gradient bucket, collective
 * algorithm): ONE GOption table binds them for run, trace, sweep, search and validate, so their
 * names, --help texts and checks cannot drift apart. A mode says what each command does with
 * them: one value, a split repeated to compare, lists that sweep, every split searched, or
 * validate's lists with their defaults.
 */
typedef enum {
  TS_CMD_PLAN_ONE,      /* trace: one of each, --split needed */
  TS_CMD_PLAN_COMPARE,  /* run: --split repeated to compare (default: a set of splits) */
  TS_CMD_PLAN_SWEEP,    /* sweep: lists of topologies, models, splits, batches, micro-batches */
  TS_CMD_PLAN_SEARCH,   /* search: every split searched (no --split), --micro-batch auto|list */
  TS_CMD_PLAN_VALIDATE, /* validate: lists of models and splits, every option has a default */
} ts_cmd_plan_mode;

typedef struct {
  ts_cmd_plan_mode mode;
  /* As given (owned; every option is an array so a repeat is seen, not silently last-wins). */
  char **g_topology, **g_model, **g_split, **g_batch, **g_micro, **g_bucket, **g_algo;
  /* After ts_cmd_plan_args_finish (owned). Lists are split at commas where the mode sweeps. */
  char *topology, *model;      /* the first given; NULL when none */
  char **topologies, **models; /* every one given, NULL-terminated (never NULL) */
  char **splits;               /* NULL: none given */
  gint64 global_batch;         /* the first; G_MININT64: not given */
  GArray *global_batches;      /* gint64, every one given */
  gint64 micro_batch;          /* the first; 0: the default */
  GArray *micro_batches;       /* gint64, every one given (empty: the default) */
  gboolean micro_auto;         /* search: --micro-batch auto (its default) */
  double bucket_MiB;           /* default 25 (validate: 256 bytes) */
  gboolean bucket_given;
  int algo; /* ts_coll_algo; validate: -1 for "all" */
  gboolean algo_given;
} ts_cmd_plan_args;

void ts_cmd_plan_args_init(ts_cmd_plan_args *a, ts_cmd_plan_mode mode);
void ts_cmd_plan_args_clear(ts_cmd_plan_args *a);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ts_cmd_plan_args, ts_cmd_plan_args_clear)

/** The entries binding a (NULL-terminated; caller g_frees the array, not a); their help texts
 * say what a's mode does with each option. */
GOptionEntry *ts_cmd_plan_entries(ts_cmd_plan_args *a);

/**
 * Checks the parsed values: what the mode needs is given (--topology, --model, --global-batch;
 * --split for trace), an option the mode takes once is given once, each value in range, the
 * algorithm known; fills the parsed fields and po (the first of each list). FALSE with one error
 * naming the option, the value and what was expected.
 */
gboolean ts_cmd_plan_args_finish(ts_cmd_plan_args *a, ts_plan_options *po, GError **error);

/**
 * The machine options of run that sweep and search take too, with the same help: SimGrid
 * settings (--cfg), dead links and chips out (--fail), slow chips and fabrics (--straggler).
 * Strings owned (ts_cmd_machine_args_clear).
 */
typedef struct {
  char **cfg, **fails, **stragglers;
} ts_cmd_machine_args;

void ts_cmd_machine_args_clear(ts_cmd_machine_args *a);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ts_cmd_machine_args, ts_cmd_machine_args_clear)

/** Their entries (NULL-terminated; caller g_frees the array). */
GOptionEntry *ts_cmd_machine_entries(ts_cmd_machine_args *a);

typedef struct ts_inputs ts_inputs;

/**
 * sweep and search: loads each named topology into cache and applies --fail and --straggler to
 * it, so every configuration built on it is degraded alike; FALSE with one line naming the
 * option. --vary keys that rebuild or degrade the array (dims, dead_links, straggler...) cannot
 * be combined with them (the coordinates would not carry over).
 */
gboolean ts_cmd_machine_apply(const ts_cmd_machine_args *a, ts_inputs *cache,
                              char *const *topologies, char *const *vary, GError **error);

/** Records the machine options in a sweep's spec object (JsonNode of an object): what produced
 * the rows, and what merge compares across shards. Nothing when none was given. */
void ts_cmd_machine_record(const ts_cmd_machine_args *a, JsonNode *spec);

/** "auto (the fastest valid, default), ring, ...": the algorithm table, for --help. Static. */
const char *ts_cmd_algo_help(void);

G_END_DECLS

#endif
