/* ts_cmd: shared plumbing of the subcommands (option parsing, one-line errors). */
#include "ts_cmd.h"
#include "ts_backends.h"
#include "ts_report.h"
#include "ts_util.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stdio.h>

int ts_cmd_fail(const char *cmd, const GError *error)
{
  fprintf(stderr, "trainsim %s: %s\n", cmd, error != NULL ? error->message : "failed");
  return error != NULL && error->domain == TS_ERROR && error->code == TS_ERROR_BACKEND
             ? 1
             : TS_EXIT_INPUT;
}

/* --version on every command, as GNU tools have it: the version on stdout, exit 0, whatever
 * else the command line holds. */
static gboolean print_version(const char *name, const char *value, gpointer data, GError **error)
{
  (void)name;
  (void)value;
  (void)data;
  (void)error;
  printf("trainsim %s\n", TS_VERSION);
  fflush(stdout);
  exit(0);
}

gboolean ts_cmd_parse(const char *cmd, const char *params, const char *summary,
                      const char *description, const GOptionEntry *entries, int *argc, char ***argv,
                      GError **error)
{
  g_autoptr(GOptionContext) ctx = g_option_context_new(params);
  g_autofree char *prog = g_strdup_printf("trainsim %s", cmd);
  g_set_prgname(prog);
  g_option_context_set_summary(ctx, summary);
  if (description != NULL)
    g_option_context_set_description(ctx, description);
  g_option_context_add_main_entries(ctx, entries, NULL);
  static const GOptionEntry version[] = {{"version", 0, G_OPTION_FLAG_NO_ARG, G_OPTION_ARG_CALLBACK,
                                          (gpointer)print_version,
                                          "Print the program version and exit", NULL},
                                         G_OPTION_ENTRY_NULL};
  g_option_context_add_main_entries(ctx, version, NULL);
  g_autoptr(GError) local = NULL;
  if (!g_option_context_parse(ctx, argc, argv, &local)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s (see `trainsim %s --help`)", local->message,
                cmd);
    return FALSE;
  }
  return TRUE;
}

gboolean ts_cmd_write_outputs(const char *dir, const ts_report_inputs *in, const ts_result *res,
                              int n, GError **error)
{
  const char *names[] = {"results.txt", "results.csv", "results.json"};
  g_autofree char *txt = ts_report_render(in, res, n, TS_FORMAT_TEXT);
  g_autofree char *csv = ts_report_render(in, res, n, TS_FORMAT_CSV);
  g_autofree char *json = ts_report_render(in, res, n, TS_FORMAT_JSON);
  const char *texts[] = {txt, csv, json};
  if (!ts_write_set(dir, names, texts, 3, "run", error))
    return FALSE;
  fprintf(stderr, "trainsim run: wrote results.txt, results.csv and results.json in %s\n", dir);
  return TRUE;
}

gboolean ts_cmd_prepare_dir(const char *dir, GError **error)
{
  /* Missing folders are created, and said so: a typo in -o must not silently grow a tree. */
  gboolean existed = g_file_test(dir, G_FILE_TEST_IS_DIR);
  if (!existed && g_file_test(dir, G_FILE_TEST_EXISTS)) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "--output-dir %s: exists and is not a folder", dir);
    return FALSE;
  }
  if (!existed && g_mkdir_with_parents(dir, 0755) == 0)
    ts_note_created_dir(dir); /* said with the files written (an input error says one line) */
  if (g_mkdir_with_parents(dir, 0755) != 0 || g_access(dir, W_OK) != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO,
                "--output-dir %s: cannot create or write: %s; expected a writable folder", dir,
                g_strerror(errno));
    return FALSE;
  }
  return TRUE;
}

gboolean ts_cmd_cfg(const char *backend, char *const *cfg, GError **error)
{
  if (cfg == NULL || cfg[0] == NULL)
    return TRUE;
  const ts_backend_kind *k = ts_backend_kind_lookup(backend, NULL);
  /* --cfg holds SimGrid settings: only a backend on SimGrid (the ones that build a platform per
   * process) reads them; the others ignored them silently. */
  if (k == NULL || k->one_per_process)
    return TRUE;
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "--cfg '%s': the %s backend takes no SimGrid settings; expected --backend simgrid "
              "with --cfg",
              cfg[0], k->name);
  return FALSE;
}

gboolean ts_cmd_format(const char *name, ts_format *out, GError **error)
{
  if (ts_format_parse(name, out))
    return TRUE;
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--format '%s': expected text, csv or json", name);
  return FALSE;
}

gboolean ts_cmd_algo(const char *name, int *out, GError **error)
{
  *out = name != NULL ? ts_coll_algo_parse(name) : TS_ALGO_AUTO;
  if (*out >= 0)
    return TRUE;
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--collective-algorithm '%s': expected %s", name,
              ts_coll_algo_list());
  return FALSE;
}

ts_topo *ts_cmd_load_topo(const char *name, char **path, GError **error)
{
  char *p = ts_resolve_data_file(name, "topologies", error);
  ts_topo *t = p != NULL ? ts_topo_load(p, error) : NULL;
  if (path != NULL && t != NULL)
    *path = p;
  else
    g_free(p);
  return t;
}

ts_model *ts_cmd_load_model(const char *name, char **path, GError **error)
{
  char *p = ts_resolve_data_file(name, "models", error);
  ts_model *m = p != NULL ? ts_model_load(p, error) : NULL;
  if (path != NULL && m != NULL)
    *path = p;
  else
    g_free(p);
  return m;
}

const char *ts_cmd_algo_help(void)
{
  static gsize once = 0;
  static const char *text = NULL;
  if (g_once_init_enter(&once)) {
    GString *s = g_string_new(
        "auto (default: what NCCL picks on switch dimensions, else the fastest valid)");
    for (int a = TS_ALGO_AUTO + 1; a < TS_ALGO_NALGOS; a++)
      g_string_append_printf(s, ", %s", ts_coll_algo_name((ts_coll_algo)a));
    text = g_string_free(s, FALSE);
    g_once_init_leave(&once, 1);
  }
  return text;
}

void ts_cmd_plan_args_init(ts_cmd_plan_args *a)
{
  memset(a, 0, sizeof *a);
  a->global_batch = G_MININT64;
  a->bucket_MiB = 25.0;
}

void ts_cmd_plan_args_clear(ts_cmd_plan_args *a)
{
  g_clear_pointer(&a->topology, g_free);
  g_clear_pointer(&a->model, g_free);
  g_clear_pointer(&a->algo, g_free);
  g_clear_pointer(&a->splits, g_strfreev);
}

GOptionEntry *ts_cmd_plan_entries(ts_cmd_plan_args *a, gboolean repeat_split)
{
  const GOptionEntry e[] = {
      {"topology", 't', 0, G_OPTION_ARG_FILENAME, &a->topology,
       "Topology file or shipped name (topologies/NAME.ini)", "T"},
      {"model", 'm', 0, G_OPTION_ARG_FILENAME, &a->model,
       "Model file or shipped name (models/NAME.ini)", "M"},
      {"split", 's', 0, G_OPTION_ARG_STRING_ARRAY, &a->splits,
       repeat_split
           ? "Split, e.g. dp=64, tp=8@x,dp=8@y or tp=8,pp=8,dp=16,zero=1,schedule=1f1b,"
             "recompute=full (docs/splits.md); repeat to compare (default: data, hybrid and "
             "tensor parallel)"
           : "Split, e.g. dp=64, tp=8@x,dp=8@y or tp=8,pp=8,dp=16,zero=1,schedule=1f1b,"
             "recompute=full (docs/splits.md)",
       "S"},
      {"global-batch", 'b', 0, G_OPTION_ARG_INT64, &a->global_batch,
       "Samples (sequences or images) per step, all replicas together", "N"},
      {"micro-batch", 0, 0, G_OPTION_ARG_INT64, &a->micro_batch,
       "Samples per micro-batch per replica (default: global batch / dp, no accumulation; with "
       "pp, the largest giving >= 4 micro-batches per stage)",
       "N"},
      {"bucket-MiB", 0, 0, G_OPTION_ARG_DOUBLE, &a->bucket_MiB,
       "Data-parallel gradient bucket in MiB (default 25, as PyTorch DDP)", "MiB"},
      {"collective-algorithm", 0, 0, G_OPTION_ARG_STRING, &a->algo, ts_cmd_algo_help(), "A"},
      G_OPTION_ENTRY_NULL};
  return g_memdup2(e, sizeof e);
}

gboolean ts_cmd_plan_args_finish(const ts_cmd_plan_args *a, gboolean need_split,
                                 gboolean repeat_split, ts_plan_options *po, GError **error)
{
  const char *missing = a->topology == NULL               ? "--topology"
                        : a->model == NULL                ? "--model"
                        : need_split && a->splits == NULL ? "--split"
                        : a->global_batch == G_MININT64   ? "--global-batch"
                                                          : NULL;
  if (missing != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "missing %s; expected --topology T --model M%s "
                "--global-batch N",
                missing, need_split ? " --split S" : "");
    return FALSE;
  }
  if (!repeat_split && a->splits != NULL && a->splits[0] != NULL && a->splits[1] != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split given twice ('%s', '%s'); expected one split", a->splits[0], a->splits[1]);
    return FALSE;
  }
  if (a->global_batch <= 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--global-batch %" G_GINT64_FORMAT ": expected a positive number of samples",
                a->global_batch);
    return FALSE;
  }
  if (a->micro_batch < 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--micro-batch %" G_GINT64_FORMAT
                ": expected a positive number of samples (0: the default)",
                a->micro_batch);
    return FALSE;
  }
  if (!(a->bucket_MiB > 0 && a->bucket_MiB <= 1048576)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--bucket-MiB %g: expected a size in (0, 1048576] MiB", a->bucket_MiB);
    return FALSE;
  }
  int algo;
  if (!ts_cmd_algo(a->algo, &algo, error))
    return FALSE;
  ts_plan_options_default(po);
  po->global_batch = a->global_batch;
  po->micro_batch = a->micro_batch;
  po->bucket_bytes = a->bucket_MiB * 1024 * 1024;
  po->algo = (ts_coll_algo)algo;
  return TRUE;
}
