/* ts_cmd: shared plumbing of the subcommands (option parsing, one-line errors). */
#include "ts_cmd.h"
#include "ts_backends.h"
#include "ts_degrade.h"
#include "ts_sweep.h"
#include "ts_report.h"
#include "ts_util.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stdio.h>

/* A message's words (runs without blanks) of more than WORD_MAX bytes, shortened to their first
 * HEAD and last TAIL bytes around "...[N bytes]...". Messages quote what the user gave, and a
 * 100 kB --split, -b, --vary value, file name or CSV field was echoed whole, some twice: 200 kB
 * on the one line of stderr. Cuts fall on UTF-8 character boundaries. */
enum { WORD_MAX = 512, WORD_HEAD = 240, WORD_TAIL = 40 };

static gboolean utf8_cont(char c)
{
  return ((unsigned char)c & 0xC0) == 0x80;
}

char *ts_cmd_shorten_words(const char *msg)
{
  GString *out = g_string_sized_new(strlen(msg) < 4096 ? strlen(msg) : 4096);
  const char *p = msg;
  while (*p != '\0') {
    if (*p == ' ') {
      g_string_append_c(out, *p++);
      continue;
    }
    const char *w = p;
    while (*p != '\0' && *p != ' ')
      p++;
    gsize n = (gsize)(p - w);
    if (n <= WORD_MAX) {
      g_string_append_len(out, w, (gssize)n);
      continue;
    }
    const char *h = w + WORD_HEAD, *t = p - WORD_TAIL;
    while (h > w && utf8_cont(*h))
      h--;
    while (t < p && utf8_cont(*t))
      t++;
    g_string_append_len(out, w, h - w);
    g_string_append_printf(out, "...[%" G_GSIZE_FORMAT " bytes]...", n);
    g_string_append_len(out, t, p - t);
  }
  return g_string_free(out, FALSE);
}

int ts_cmd_fail(const char *cmd, const GError *error)
{
  g_autofree char *msg = ts_cmd_shorten_words(error != NULL ? error->message : "failed");
  /* Messages start with the file they are about; an empty file name ("replay ''") left
   * "trainsim replay: : cannot read": show it as ''. */
  fprintf(stderr, "trainsim %s: %s%s\n", cmd, g_str_has_prefix(msg, ": ") ? "''" : "", msg);
  return error != NULL && error->domain == TS_ERROR && error->code == TS_ERROR_BACKEND
             ? 1
             : TS_EXIT_INPUT;
}

void ts_cmd_unexpected(const char *cmd, const char *arg, GError **error)
{
  /* "run -t ... -b 64 dp=64", the split without its -s, is the usual way to get here. */
  gboolean takes_split =
      strcmp(cmd, "run") == 0 || strcmp(cmd, "sweep") == 0 || strcmp(cmd, "trace") == 0;
  gboolean split = takes_split && strchr(arg, '=') != NULL && arg[0] != '-';
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "unexpected argument '%s'; expected options only%s%s%s (see `trainsim %s --help`)",
              arg, split ? ": a split goes after -s (-s " : "", split ? arg : "", split ? ")" : "",
              cmd);
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

/* GOption takes a short option's value only as the next word: "-j2", "-b512" or "-fjson" failed
 * with "Missing argument for -j" or "Unknown option -b512", where make, gcc and getopt take
 * them. Splits such a word into the option and its value ("-j", "2") before GOption reads the
 * line; "--" ends the options. GOption drops the words it reads from the array, so the new
 * words and the array are kept (static, for the program's life) apart from it. */
static char **split_attached_values(const GOptionEntry *entries, int argc, char **argv)
{
  static GPtrArray *keep;
  gboolean options = TRUE;
  GPtrArray *out = NULL;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (options && i > 0 && strcmp(a, "--") == 0)
      options = FALSE;
    const GOptionEntry *hit = NULL;
    if (options && i > 0 && a[0] == '-' && a[1] != '-' && a[1] != '\0' && a[2] != '\0')
      for (const GOptionEntry *e = entries; e->long_name != NULL && hit == NULL; e++)
        if (e->short_name == a[1] && e->arg != G_OPTION_ARG_NONE &&
            !(e->flags & G_OPTION_FLAG_NO_ARG))
          hit = e;
    if (hit != NULL && out == NULL) {
      out = g_ptr_array_new();
      for (int k = 0; k < i; k++)
        g_ptr_array_add(out, argv[k]);
    }
    if (hit != NULL) {
      if (keep == NULL)
        keep = g_ptr_array_new_with_free_func(g_free);
      char *opt = g_strndup(a, 2), *val = g_strdup(a + 2);
      g_ptr_array_add(keep, opt);
      g_ptr_array_add(keep, val);
      g_ptr_array_add(out, opt);
      g_ptr_array_add(out, val);
    } else if (out != NULL) {
      g_ptr_array_add(out, argv[i]);
    }
  }
  if (out == NULL)
    return NULL;
  g_ptr_array_add(out, NULL);
  char **v = (char **)g_ptr_array_free(out, FALSE);
  g_ptr_array_add(keep, v);
  return v;
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
  char **split = split_attached_values(entries, *argc, *argv);
  if (split != NULL) {
    *argc = (int)g_strv_length(split); /* counts to the NULL the array ends with */
    *argv = split;
  }
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

/* The output folder ts_cmd_prepare_dir made and the outermost of the parents it made with it,
 * for ts_cmd_remove_created_dir. */
static char *made_dir, *made_top;

/* The outermost folder of DIR that does not exist yet (what g_mkdir_with_parents creates), or
 * NULL. */
static char *first_missing_dir(const char *dir)
{
  char *top = NULL, *path = g_strdup(dir);
  while (!g_file_test(path, G_FILE_TEST_EXISTS)) {
    g_free(top);
    top = path;
    path = g_path_get_dirname(top);
    if (strcmp(path, top) == 0)
      break;
  }
  g_free(path);
  return top;
}

void ts_cmd_remove_created_dir(void)
{
  if (made_dir == NULL)
    return;
  /* Each folder only if empty (g_rmdir refuses otherwise), from the output up to the outermost
   * one created. */
  g_autofree char *path = g_strdup(made_dir);
  while (g_rmdir(path) == 0 && strcmp(path, made_top) != 0) {
    char *up = g_path_get_dirname(path);
    g_free(path);
    path = up;
  }
  g_clear_pointer(&made_dir, g_free);
  g_clear_pointer(&made_top, g_free);
}

gboolean ts_cmd_prepare_dir(const char *dir, GError **error)
{
  if (*dir == '\0') { /* mkdir("") said "cannot create or write: Invalid argument" */
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--output-dir '': expected a folder name");
    return FALSE;
  }
  /* Missing folders are created, and said so: a typo in -o must not silently grow a tree. */
  gboolean existed = g_file_test(dir, G_FILE_TEST_IS_DIR);
  if (!existed && made_dir == NULL && (made_top = first_missing_dir(dir)) != NULL)
    made_dir = g_strdup(dir);
  /* Tested again as a folder: another process of the same job (a sweep's MPI ranks) may have
   * just made it, which is no error; only a file or device in its place is. */
  if (!existed && g_file_test(dir, G_FILE_TEST_EXISTS) && !g_file_test(dir, G_FILE_TEST_IS_DIR)) {
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

void ts_cmd_plan_args_init(ts_cmd_plan_args *a, ts_cmd_plan_mode mode)
{
  memset(a, 0, sizeof *a);
  a->mode = mode;
  a->global_batch = G_MININT64;
  /* validate runs networks of a few hundred parameters: 256-byte buckets give several. */
  a->bucket_MiB = mode == TS_CMD_PLAN_VALIDATE ? 256.0 / 1048576.0 : 25.0;
  a->algo = TS_ALGO_AUTO;
}

void ts_cmd_plan_args_clear(ts_cmd_plan_args *a)
{
  char ***given[] = {&a->g_topology, &a->g_model,  &a->g_split, &a->g_batch,
                     &a->g_micro,    &a->g_bucket, &a->g_algo};
  for (size_t i = 0; i < G_N_ELEMENTS(given); i++)
    g_clear_pointer(given[i], g_strfreev);
  g_clear_pointer(&a->topologies, g_strfreev);
  g_clear_pointer(&a->models, g_strfreev);
  g_clear_pointer(&a->splits, g_strfreev);
  g_clear_pointer(&a->global_batches, g_array_unref);
  g_clear_pointer(&a->micro_batches, g_array_unref);
  a->topology = a->model = NULL; /* borrowed from the lists */
}

/* The help texts: one base per option, then what the command's mode does with it. */
static char *plan_help(const ts_cmd_plan_args *a, const char *opt)
{
  ts_cmd_plan_mode m = a->mode;
  gboolean sweep = m == TS_CMD_PLAN_SWEEP;
  if (strcmp(opt, "topology") == 0)
    return g_strconcat("Topology file or shipped name (topologies/NAME.ini)",
                       sweep ? "; repeat or comma-separate to sweep several"
                       : m == TS_CMD_PLAN_VALIDATE
                           ? ", or torus:AxB, mesh:AxB, ring:N, switch:GxN (default: a torus as "
                             "square as the split's chip count allows)"
                           : "",
                       NULL);
  if (strcmp(opt, "model") == 0)
    return g_strconcat("Model file or shipped name (models/NAME.ini)",
                       sweep ? "; repeat or comma-separate to sweep several"
                       : m == TS_CMD_PLAN_VALIDATE
                           ? "; repeatable (default: validate-mlp, validate-cnn, "
                             "validate-transformer)"
                           : "",
                       NULL);
  if (strcmp(opt, "split") == 0) {
    g_autofree char *names = ts_split_option_names();
    return g_strconcat(
        "Split, e.g. dp=64, tp=8@x,dp=8@y or tp=8,pp=8,dp=16,zero=1,schedule=1f1b,"
        "recompute=full; axes dp, tp (mp), pp, cp, options ",
        names, " (docs/splits.md)",
        m == TS_CMD_PLAN_COMPARE ? "; repeat to compare (default: data, hybrid and tensor parallel)"
        : sweep                  ? "; repeat to sweep several (or --splits)"
        : m == TS_CMD_PLAN_VALIDATE ? "; repeatable (default: a set of dp, tp and hybrid splits)"
        : m == TS_CMD_PLAN_SEARCH   ? "; search ranks every split itself, so it takes none"
                                    : "",
        NULL);
  }
  if (strcmp(opt, "global-batch") == 0)
    return g_strconcat("Samples (sequences or images) per step, all replicas together",
                       sweep                       ? "; a list sweeps several"
                       : m == TS_CMD_PLAN_VALIDATE ? " (default 8)"
                                                   : "",
                       NULL);
  if (strcmp(opt, "micro-batch") == 0)
    return g_strconcat(
        "Samples per micro-batch per replica",
        m == TS_CMD_PLAN_SEARCH
            ? ": auto (default: the per-replica batch halved down to 1) or a list to search"
            : " (default: global batch / dp, no accumulation; with pp, the largest giving >= 4 "
              "micro-batches per stage)",
        sweep ? "; a list sweeps several" : "", NULL);
  if (strcmp(opt, "bucket-MiB") == 0)
    return g_strdup(
        m == TS_CMD_PLAN_VALIDATE
            ? "Data-parallel gradient bucket in MiB (default 0.000244140625, 256 bytes: "
              "several buckets in the validation networks)"
            : "Data-parallel gradient bucket in MiB (default 25, as PyTorch DDP)");
  /* collective-algorithm */
  return g_strconcat(ts_cmd_algo_help(),
                     m == TS_CMD_PLAN_VALIDATE
                         ? ", or all (each in turn; those that do not apply to a split are skipped)"
                         : "",
                     NULL);
}

GOptionEntry *ts_cmd_plan_entries(ts_cmd_plan_args *a)
{
  /* The texts live as long as the process (GOption keeps pointers into them). */
  static GPtrArray *texts = NULL;
  if (texts == NULL)
    texts = g_ptr_array_new();
  const char *opts[] = {"topology",
                        "model",
                        "split",
                        "global-batch",
                        "micro-batch",
                        "bucket-MiB",
                        "collective-algorithm"};
  const char *help[G_N_ELEMENTS(opts)];
  for (size_t i = 0; i < G_N_ELEMENTS(opts); i++) {
    char *h = plan_help(a, opts[i]);
    g_ptr_array_add(texts, h);
    help[i] = h;
  }
  gboolean lists = a->mode == TS_CMD_PLAN_SWEEP;
  const GOptionEntry e[] = {
      {"topology", 't', 0, G_OPTION_ARG_FILENAME_ARRAY, &a->g_topology, help[0], "T"},
      {"model", 'm', 0, G_OPTION_ARG_FILENAME_ARRAY, &a->g_model, help[1], "M"},
      {"split", 's', a->mode == TS_CMD_PLAN_SEARCH ? G_OPTION_FLAG_HIDDEN : 0,
       G_OPTION_ARG_STRING_ARRAY, &a->g_split, help[2], "S"},
      {"global-batch", 'b', 0, G_OPTION_ARG_STRING_ARRAY, &a->g_batch, help[3],
       lists ? "N[,N...]" : "N"},
      {"micro-batch", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a->g_micro, help[4],
       lists                           ? "N[,N...]"
       : a->mode == TS_CMD_PLAN_SEARCH ? "auto|N[,N...]"
                                       : "N"},
      {"bucket-MiB", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a->g_bucket, help[5], "MiB"},
      {"collective-algorithm", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a->g_algo, help[6], "A"},
      G_OPTION_ENTRY_NULL};
  return g_memdup2(e, sizeof e);
}

/* An option the mode takes once, given twice: refused (GOption kept the last silently). */
static gboolean once(char **given, const char *opt, gboolean sweep_hint, GError **error)
{
  if (given == NULL || given[0] == NULL || given[1] == NULL)
    return TRUE;
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--%s given twice ('%s', '%s'); expected one %s",
              opt, given[0], given[1],
              strcmp(opt, "split") == 0 ? "split (run compares several)"
              : sweep_hint              ? "value (trainsim sweep takes lists)"
                                        : "value");
  return FALSE;
}

/* The values given, split at commas when the mode takes lists (a file name with a comma stays
 * whole elsewhere); each value once. */
static char **values(char **given, gboolean lists, const char *opt, GError **error)
{
  GPtrArray *v = g_ptr_array_new();
  for (char **g = given; g != NULL && *g != NULL; g++) {
    if (!lists) {
      g_ptr_array_add(v, g_strdup(*g));
      continue;
    }
    g_auto(GStrv) parts = g_strsplit(*g, ",", -1);
    if (parts[0] == NULL) /* '' splits into nothing: an empty item, not no option */
      g_ptr_array_add(v, g_strdup(""));
    for (char **p = parts; *p != NULL; p++)
      g_ptr_array_add(v, g_strdup(g_strstrip(*p)));
  }
  g_ptr_array_add(v, NULL);
  char **out = (char **)g_ptr_array_free(v, FALSE);
  /* An empty item ("-t a,,b", "-m ,") is named as such: two of them read "--model '': given
   * twice". */
  if (lists)
    for (int i = 0; out[i] != NULL; i++)
      if (*out[i] == '\0') {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--%s: an empty item in a comma-separated list; expected values such as "
                    "a,b",
                    opt);
        g_strfreev(out);
        return NULL;
      }
  /* A value listed twice would predict the same configurations twice (duplicate rows). */
  for (int i = 0; out[i] != NULL; i++)
    for (int j = 0; j < i; j++)
      if (strcmp(out[i], out[j]) == 0) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--%s '%s': given twice; expected each value once", opt, out[i]);
        g_strfreev(out);
        return NULL;
      }
  return out;
}

/* Whole numbers of samples >= lo, one by one. */
static gboolean counts(char **given, gboolean lists, const char *opt, gint64 lo,
                       gboolean allow_auto, GArray *out, gboolean *saw_auto, GError **error)
{
  g_auto(GStrv) items = values(given, lists, opt, error);
  if (items == NULL)
    return FALSE;
  for (char **p = items; *p != NULL; p++) {
    gint64 v;
    if (allow_auto && strcmp(*p, "auto") == 0) {
      *saw_auto = TRUE;
      continue;
    }
    if (!ts_parse_int(*p, lo, (gint64)TS_MAX_COUNT, &v)) {
      /* A list's item is quoted ("--global-batch 'x'"), a single value as given. */
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  lists ? "--%s '%s': expected a %s number of samples%s%s"
                        : "--%s %s: expected a %s number of samples%s%s",
                  opt, **p != '\0' || lists ? *p : "''", lo > 0 ? "positive whole" : "whole",
                  lo > 0 ? "" : " >= 0 (0: the default)",
                  allow_auto                ? ", or auto (a list: 1,2,4)"
                  : lists                   ? " (a list: 256,512)"
                  : strchr(*p, ',') != NULL ? " (a list sweeps: trainsim sweep)"
                                            : "");
      return FALSE;
    }
    g_array_append_val(out, v);
  }
  if (allow_auto && *saw_auto && out->len > 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--%s: auto and numbers given; expected auto or a list of numbers", opt);
    return FALSE;
  }
  return TRUE;
}

gboolean ts_cmd_plan_args_finish(ts_cmd_plan_args *a, ts_plan_options *po, GError **error)
{
  ts_cmd_plan_mode m = a->mode;
  gboolean lists = m == TS_CMD_PLAN_SWEEP, validate = m == TS_CMD_PLAN_VALIDATE;
  if (m == TS_CMD_PLAN_SEARCH && a->g_split != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split %s: search ranks every split itself; expected no --split (to predict "
                "given splits: trainsim run --split S or trainsim sweep -s S)",
                a->g_split[0]);
    return FALSE;
  }
  /* Once-only options: what the mode does not sweep or compare. */
  if ((!lists && !validate &&
       (!once(a->g_topology, "topology", TRUE, error) || !once(a->g_model, "model", TRUE, error) ||
        !once(a->g_batch, "global-batch", TRUE, error))) ||
      (m == TS_CMD_PLAN_ONE && !once(a->g_split, "split", FALSE, error)) ||
      (validate && (!once(a->g_topology, "topology", FALSE, error) ||
                    !once(a->g_batch, "global-batch", FALSE, error))) ||
      (!lists && m != TS_CMD_PLAN_SEARCH && !once(a->g_micro, "micro-batch", FALSE, error)) ||
      !once(a->g_bucket, "bucket-MiB", FALSE, error) ||
      !once(a->g_algo, "collective-algorithm", FALSE, error))
    return FALSE;
  const char *missing = NULL;
  if (!validate)
    missing = a->g_topology == NULL                        ? "--topology"
              : a->g_model == NULL                         ? "--model"
              : m == TS_CMD_PLAN_ONE && a->g_split == NULL ? "--split"
              : !lists && a->g_batch == NULL               ? "--global-batch"
                                                           : NULL;
  if (missing != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "missing %s; expected --topology T --model M%s%s",
                missing, m == TS_CMD_PLAN_ONE ? " --split S" : "",
                lists ? "" : " --global-batch N");
    return FALSE;
  }
  g_clear_pointer(&a->topologies, g_strfreev);
  g_clear_pointer(&a->models, g_strfreev);
  g_clear_pointer(&a->splits, g_strfreev);
  if ((a->topologies = values(a->g_topology, lists, "topology", error)) == NULL ||
      (a->models = values(a->g_model, lists || validate, "model", error)) == NULL)
    return FALSE;
  a->topology = a->topologies[0];
  a->model = a->models[0];
  if (a->g_split != NULL) {
    /* Splits hold commas: never split them; each is one split. */
    if ((a->splits = values(a->g_split, FALSE, "split", error)) == NULL)
      return FALSE;
  }
  g_clear_pointer(&a->global_batches, g_array_unref);
  g_clear_pointer(&a->micro_batches, g_array_unref);
  a->global_batches = g_array_new(FALSE, FALSE, sizeof(gint64));
  a->micro_batches = g_array_new(FALSE, FALSE, sizeof(gint64));
  gboolean unused = FALSE;
  a->micro_auto = FALSE;
  if (!counts(a->g_batch, lists, "global-batch", 1, FALSE, a->global_batches, &unused, error) ||
      !counts(a->g_micro, lists || m == TS_CMD_PLAN_SEARCH, "micro-batch",
              m == TS_CMD_PLAN_SEARCH ? 1 : 0, m == TS_CMD_PLAN_SEARCH, a->micro_batches,
              &a->micro_auto, error))
    return FALSE;
  if (m == TS_CMD_PLAN_SEARCH && a->micro_batches->len == 0)
    a->micro_auto = TRUE;
  a->global_batch =
      a->global_batches->len > 0 ? g_array_index(a->global_batches, gint64, 0) : G_MININT64;
  a->micro_batch = a->micro_batches->len > 0 ? g_array_index(a->micro_batches, gint64, 0) : 0;
  a->bucket_given = a->g_bucket != NULL;
  if (a->bucket_given) {
    double v = 0;
    if (!ts_parse_double(a->g_bucket[0], &v) || !(v > 0 && v <= 1048576)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--bucket-MiB %s: expected a size in (0, 1048576] MiB", a->g_bucket[0]);
      return FALSE;
    }
    a->bucket_MiB = v;
  }
  a->algo_given = a->g_algo != NULL;
  if (validate && a->algo_given && strcmp(a->g_algo[0], "all") == 0)
    a->algo = -1;
  else if (!ts_cmd_algo(a->algo_given ? a->g_algo[0] : NULL, &a->algo, error)) {
    if (validate && error != NULL && *error != NULL) {
      char *msg = g_strconcat((*error)->message, ", or all", NULL);
      g_free((*error)->message);
      (*error)->message = msg;
    }
    return FALSE;
  }
  if (po != NULL) {
    ts_plan_options_default(po);
    po->global_batch = a->global_batch;
    po->micro_batch = a->micro_batch;
    po->bucket_bytes = a->bucket_MiB * 1024 * 1024;
    po->algo = a->algo >= 0 ? (ts_coll_algo)a->algo : TS_ALGO_AUTO;
  }
  return TRUE;
}

void ts_cmd_machine_args_clear(ts_cmd_machine_args *a)
{
  g_clear_pointer(&a->cfg, g_strfreev);
  g_clear_pointer(&a->fails, g_strfreev);
  g_clear_pointer(&a->stragglers, g_strfreev);
}

GOptionEntry *ts_cmd_machine_entries(ts_cmd_machine_args *a)
{
  const GOptionEntry e[] = {
      {"cfg", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a->cfg,
       "simgrid backend: extra SimGrid setting (e.g. network/model:LV08) or "
       "trainsim/collective-flows:per-step | trainsim/collective-steps:async (docs/backends.md); "
       "repeatable",
       "KEY:VALUE"},
      {"fail", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a->fails,
       "A dead link (link:DIM:C1,C2,... from the chip at those coordinates to its + neighbour "
       "along DIM) or a chip out (chip:ID; the job shrinks by its data-parallel replica); "
       "repeatable (docs/planning.md)",
       "link:x:3,4|chip:N"},
      {"straggler", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a->stragglers,
       "A slow chip (chip:N=0.8, its compute at 80% speed) or a slow fabric (dim.NAME=0.9, that "
       "dimension's links at 90%); repeatable",
       "chip:N=F|dim.NAME=F"},
      G_OPTION_ENTRY_NULL};
  return g_memdup2(e, sizeof e);
}

gboolean ts_cmd_machine_apply(const ts_cmd_machine_args *a, ts_inputs *cache,
                              char *const *topologies, char *const *vary, GError **error)
{
  if (a->fails == NULL && a->stragglers == NULL)
    return TRUE;
  static const char *const rebuild[] = {"dims=", "dead_links=", "straggler", "dim."};
  for (char *const *v = vary; v != NULL && *v != NULL; v++)
    for (size_t k = 0; k < G_N_ELEMENTS(rebuild); k++)
      if (g_str_has_prefix(*v, rebuild[k]) &&
          (k != 3 || g_str_has_suffix(*v, ".size") || strstr(*v, ".size=") != NULL)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "%s with --vary '%s': the failures are placed by coordinates of the array "
                    "as given; expected one of them (--vary dead_links=... and straggler=... "
                    "sweep failures themselves)",
                    a->fails != NULL ? "--fail" : "--straggler", *v);
        return FALSE;
      }
  for (char *const *t = topologies; t != NULL && *t != NULL; t++) {
    /* The cache owns the topology the sweep will use: degrading it here degrades every
     * configuration built on it. */
    ts_topo *topo = (ts_topo *)ts_inputs_topo(cache, *t, NULL, error);
    if (topo == NULL || !ts_degrade_apply_options(topo, a->fails, a->stragglers, error))
      return FALSE;
  }
  return TRUE;
}

void ts_cmd_machine_record(const ts_cmd_machine_args *a, JsonNode *spec)
{
  if (spec == NULL || JSON_NODE_TYPE(spec) != JSON_NODE_OBJECT)
    return;
  JsonObject *o = json_node_get_object(spec);
  const struct {
    const char *name;
    char **v;
  } lists[] = {{"cfg", a->cfg}, {"fail", a->fails}, {"straggler", a->stragglers}};
  for (size_t k = 0; k < G_N_ELEMENTS(lists); k++) {
    if (lists[k].v == NULL)
      continue;
    JsonArray *arr = json_array_new();
    for (char **v = lists[k].v; *v != NULL; v++)
      json_array_add_string_element(arr, *v);
    json_object_set_array_member(o, lists[k].name, arr);
  }
}
