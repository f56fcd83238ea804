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
 * trace is detected too), checked against topo, algorithms resolved. */
ts_trace *ts_cmd_import_trace(const char *from, const char *const *paths, int n,
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

/**
 * The plan options run and trace share (topology, model, split, batch sizes, gradient bucket,
 * collective algorithm): one GOption table binds them for both, so their --help and their
 * checks cannot drift apart. Strings are owned (ts_cmd_plan_args_clear frees them).
 */
typedef struct {
  char *topology, *model, *algo;
  char **splits;       /* NULL: none given */
  gint64 global_batch; /* G_MININT64: not given */
  gint64 micro_batch;  /* 0: the default */
  double bucket_MiB;   /* default 25 */
} ts_cmd_plan_args;

void ts_cmd_plan_args_init(ts_cmd_plan_args *a);
void ts_cmd_plan_args_clear(ts_cmd_plan_args *a);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ts_cmd_plan_args, ts_cmd_plan_args_clear)

/** The entries binding a (NULL-terminated; caller g_frees the array, not a). repeat_split: the
 * --split help says it may be repeated to compare splits (run). */
GOptionEntry *ts_cmd_plan_entries(ts_cmd_plan_args *a, gboolean repeat_split);

/**
 * Checks the parsed values: --topology, --model, --global-batch given (and --split when
 * need_split), each in range, the algorithm known, at most one --split unless repeat_split;
 * fills po. FALSE with one error naming the option and what was expected.
 */
gboolean ts_cmd_plan_args_finish(const ts_cmd_plan_args *a, gboolean need_split,
                                 gboolean repeat_split, ts_plan_options *po, GError **error);

/** "auto (the fastest valid, default), ring, ...": the algorithm table, for --help. Static. */
const char *ts_cmd_algo_help(void);

G_END_DECLS

#endif
