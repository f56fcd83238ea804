/* cmd_check: `trainsim check SCENARIOS.ini`, regression checks of predicted step times against
 * golden values, and `--update` to rewrite the goldens in place (comments kept). */
#include "ts_backends.h"
#include "ts_cmd.h"
#include "ts_sweep.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  char *name;
  char *topology, *model, *split, *backend, *algo;
  gint64 global_batch, micro_batch;
  double bucket_MiB, tol_pct, golden_s;
  gboolean has_golden, full;
} scenario;

static void scenario_clear(scenario *s)
{
  g_free(s->name);
  g_free(s->topology);
  g_free(s->model);
  g_free(s->split);
  g_free(s->backend);
  g_free(s->algo);
}

/* A scenario's keys; [defaults] takes every one but the golden (scenario_keys + 1). */
static const char *const scenario_keys[] = {
    "step_time_s",  "topology",    "model",         "split",
    "global_batch", "micro_batch", "backend",       "collective_algorithm",
    "bucket_MiB",   "full",        "tolerance_pct", NULL};

#define DEFAULTS "defaults"

/* The group that holds a key: the scenario's own, else [defaults]. */
static const char *holder(GKeyFile *kf, const char *group, const char *key)
{
  if (g_key_file_has_key(kf, group, key, NULL))
    return group;
  if (g_key_file_has_group(kf, DEFAULTS) && g_key_file_has_key(kf, DEFAULTS, key, NULL))
    return DEFAULTS;
  return group;
}

static gboolean get_str(GKeyFile *kf, const char *path, const char *g, const char *key,
                        const char *def, char **out, GError **error)
{
  const char *h = holder(kf, g, key);
  if (!ts_kf_string(kf, path, h, key, def, out, error))
    return FALSE;
  if (*out == NULL || **out == '\0') {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s: missing; expected %s", path, g, key,
                strcmp(key, "split") == 0      ? "a split such as tp=8@x,dp=8@y"
                : strcmp(key, "topology") == 0 ? "a topology file or shipped name"
                                               : "a model file or shipped name");
    return FALSE;
  }
  return TRUE;
}

static gboolean parse_scenario(GKeyFile *kf, const char *path, const char *g, scenario *s,
                               GError **error)
{
  memset(s, 0, sizeof *s);
  s->name = g_strdup(g);
  if (!ts_kf_check_keys(kf, path, g, scenario_keys, error))
    return FALSE;
  if (!get_str(kf, path, g, "topology", NULL, &s->topology, error) ||
      !get_str(kf, path, g, "model", NULL, &s->model, error) ||
      !get_str(kf, path, g, "split", NULL, &s->split, error))
    return FALSE;
  if (!ts_kf_string(kf, path, holder(kf, g, "backend"), "backend", "analytic", &s->backend,
                    error) ||
      !ts_kf_string(kf, path, holder(kf, g, "collective_algorithm"), "collective_algorithm", "auto",
                    &s->algo, error))
    return FALSE;
  g_autoptr(GError) be = NULL;
  if (!ts_run_backend_valid(s->backend, &be)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] backend='%s': expected %s", path, g,
                s->backend, ts_backend_kind_list());
    return FALSE;
  }
  if (ts_coll_algo_parse(s->algo) < 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] collective_algorithm='%s': expected %s",
                path, g, s->algo, ts_coll_algo_list());
    return FALSE;
  }
  gint64 full = 0;
  if (!ts_kf_int(kf, path, holder(kf, g, "global_batch"), "global_batch", FALSE, 0, 1,
                 (gint64)TS_MAX_COUNT, "a number of samples per step, a whole number >= 1",
                 &s->global_batch, error) ||
      !ts_kf_int(kf, path, holder(kf, g, "micro_batch"), "micro_batch", TRUE, 0, 0,
                 (gint64)TS_MAX_COUNT,
                 "samples per micro-batch per replica, a whole number >= 1 (0: no accumulation)",
                 &s->micro_batch, error) ||
      !ts_kf_double(kf, path, holder(kf, g, "bucket_MiB"), "bucket_MiB", TRUE, 25.0, 1e-6, 1048576,
                    "a gradient bucket size in MiB, in (0, 1048576]", &s->bucket_MiB, error) ||
      !ts_kf_int(kf, path, holder(kf, g, "full"), "full", TRUE, 0, 0, 1,
                 "0 or 1 (replay every rank)", &full, error) ||
      !ts_kf_double(kf, path, holder(kf, g, "tolerance_pct"), "tolerance_pct", FALSE, 0, 0, 100,
                    "a tolerance in percent of the golden step time, in [0, 100]", &s->tol_pct,
                    error))
    return FALSE;
  s->full = full != 0;
  s->has_golden = g_key_file_has_key(kf, g, "step_time_s", NULL);
  if (s->has_golden &&
      !ts_kf_double(kf, path, g, "step_time_s", FALSE, 0, 1e-15, 1e12,
                    "a golden step time in seconds (or remove it and run check --update)",
                    &s->golden_s, error))
    return FALSE;
  return TRUE;
}

/* ---- --update: rewrite golden values in the text, keeping everything else byte for byte ---- */

static char *key_of(const char *line)
{
  const char *p = line;
  while (g_ascii_isspace(*p)) /* as GKeyFile, which skips \r, \f and \v too */
    p++;
  if (*p == '#' || *p == '[' || *p == '\0')
    return NULL;
  const char *eq = strchr(p, '=');
  if (eq == NULL)
    return NULL;
  char *k = g_strndup(p, (gsize)(eq - p));
  return g_strchomp(k);
}

static char *group_of(const char *line)
{
  const char *p = line;
  while (g_ascii_isspace(*p)) /* as GKeyFile, which skips \r, \f and \v too */
    p++;
  if (*p != '[')
    return NULL;
  const char *e = strchr(p, ']');
  return e != NULL ? g_strndup(p + 1, (gsize)(e - p - 1)) : NULL;
}

static char *golden_text(double v)
{
  GString *s = g_string_new(NULL);
  ts_append_g(s, 10, v);
  return g_string_free(s, FALSE);
}

/* New text of a scenarios file with step_time_s set for each scenario of `names`. An inline
 * comment after the old value is kept; a scenario without a golden gets a line after its last
 * key (groups are unique: unique_groups has checked). */
char *ts_check_rewrite(const char *text, char *const *names, const double *now, int n)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  int nl = (int)g_strv_length(lines);
  GHashTable *index = g_hash_table_new(g_str_hash, g_str_equal);
  for (int i = 0; i < n; i++)
    g_hash_table_insert(index, names[i], GINT_TO_POINTER(i + 1));
  int *last_key = g_new(int, n), *has = g_new0(int, n), *header = g_new(int, n);
  for (int i = 0; i < n; i++)
    last_key[i] = header[i] = -1;
  int cur = -1;
  for (int l = 0; l < nl; l++) {
    g_autofree char *g = group_of(lines[l]);
    if (g != NULL) {
      cur = GPOINTER_TO_INT(g_hash_table_lookup(index, g)) - 1;
      if (cur >= 0)
        header[cur] = l;
      continue;
    }
    g_autofree char *k = key_of(lines[l]);
    if (cur < 0 || k == NULL)
      continue;
    last_key[cur] = l;
    if (strcmp(k, "step_time_s") != 0)
      continue;
    has[cur] = 1;
    char *eq = strchr(lines[l], '=');
    const char *hash = strchr(eq, '#');
    size_t ll = strlen(lines[l]);
    const char *tail = ll > 0 && lines[l][ll - 1] == '\r' ? lines[l] + ll - 1 : "";
    if (hash != NULL) { /* keep the blanks before the comment */
      tail = hash;
      while (tail > eq + 1 && (tail[-1] == ' ' || tail[-1] == '\t'))
        tail--;
    }
    g_autofree char *v = golden_text(now[cur]);
    char *nw = g_strdup_printf("%.*s= %s%s", (int)(eq - lines[l]), lines[l], v, tail);
    g_free(lines[l]);
    lines[l] = nw;
  }
  GString *out = g_string_new(NULL);
  for (int l = 0; l < nl; l++) {
    g_string_append(out, lines[l]);
    if (l + 1 < nl)
      g_string_append_c(out, '\n');
    for (int i = 0; i < n; i++)
      if (!has[i] && (last_key[i] >= 0 ? last_key[i] : header[i]) == l) {
        g_autofree char *v = golden_text(now[i]);
        if (l + 1 == nl) /* a last line without a newline */
          g_string_append_c(out, '\n');
        g_string_append_printf(out, "step_time_s = %s\n", v);
      }
  }
  g_hash_table_unref(index);
  g_free(last_key);
  g_free(has);
  g_free(header);
  return g_string_free(out, FALSE);
}

/* GKeyFile merges a group given twice; a scenario named twice is a mistake, say so. */
static gboolean unique_groups(const char *path, const char *text, GError **error)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (int l = 0; lines[l] != NULL; l++) {
    char *g = group_of(lines[l]);
    if (g == NULL)
      continue;
    if (g_hash_table_contains(seen, g)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s:%d: [%s] given again (first at line %d); expected each scenario once", path,
                  l + 1, g, GPOINTER_TO_INT(g_hash_table_lookup(seen, g)));
      g_free(g);
      return FALSE;
    }
    g_hash_table_insert(seen, g, GINT_TO_POINTER(l + 1));
  }
  return TRUE;
}

/* Every scenario of a scenarios file's text (groups once each, known keys, values in range,
 * splits that parse), or NULL with one error naming the file and the [group] key. Models and
 * topologies are named, not loaded. */
static GArray *load_scenarios(const char *path, const char *text, gsize len, GError **error)
{
  if (!unique_groups(path, text, error))
    return NULL;
  g_autoptr(GKeyFile) kf = ts_kf_load_data(text, len, path, error);
  if (kf == NULL)
    return NULL;
  if (g_key_file_has_group(kf, DEFAULTS)) {
    if (!ts_kf_check_keys(kf, path, DEFAULTS, scenario_keys + 1, error))
      return NULL;
  }
  gsize ng = 0;
  g_auto(GStrv) groups = g_key_file_get_groups(kf, &ng);
  GArray *sc = g_array_new(FALSE, TRUE, sizeof(scenario));
  g_array_set_clear_func(sc, (GDestroyNotify)scenario_clear);
  for (gsize i = 0; i < ng; i++) {
    if (strcmp(groups[i], DEFAULTS) == 0)
      continue;
    scenario s;
    if (!parse_scenario(kf, path, groups[i], &s, error)) {
      scenario_clear(&s);
      g_array_unref(sc);
      return NULL;
    }
    g_array_append_val(sc, s);
    g_autoptr(ts_split) sp = ts_split_parse(s.split, error);
    if (sp == NULL) {
      g_prefix_error(error, "%s: [%s] split: ", path, s.name);
      g_array_unref(sc);
      return NULL;
    }
  }
  if (sc->len == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: no scenarios; expected [NAME] groups with topology, model, split, "
                "global_batch, tolerance_pct",
                path);
    g_array_unref(sc);
    return NULL;
  }
  return sc;
}

int ts_check_parse(const char *path, const char *text, gsize len, char ***names, double **golden_s,
                   GError **error)
{
  GArray *sc = load_scenarios(path, text, len, error);
  if (sc == NULL)
    return -1;
  int n = (int)sc->len;
  if (names != NULL)
    *names = g_new0(char *, n + 1);
  if (golden_s != NULL)
    *golden_s = g_new0(double, n > 0 ? n : 1);
  for (int i = 0; i < n; i++) {
    const scenario *s = &g_array_index(sc, scenario, i);
    if (names != NULL)
      (*names)[i] = g_strdup(s->name);
    if (golden_s != NULL)
      (*golden_s)[i] = s->has_golden ? s->golden_s : NAN;
  }
  g_array_unref(sc);
  return n;
}

/* The planner names what it refuses by the command-line option (--split 'S', --global-batch N,
 * --micro-batch N); in a scenarios file it is a key: "split='S': ...". NULL for other
 * messages. */
static char *file_terms(const char *msg)
{
  static const char *const opt[][2] = {{"--split ", "split="},
                                       {"--global-batch ", "global_batch="},
                                       {"--micro-batch ", "micro_batch="}};
  for (size_t k = 0; k < G_N_ELEMENTS(opt); k++) {
    if (!g_str_has_prefix(msg, opt[k][0]))
      continue;
    const char *v = msg + strlen(opt[k][0]);
    const char *end = v[0] == '\'' ? strchr(v + 1, '\'') : v + strcspn(v, ": ");
    if (end == NULL)
      break;
    if (v[0] == '\'')
      end++;
    const char *rest = end[0] == ':' ? end + 1 : end;
    while (*rest == ' ')
      rest++;
    return g_strdup_printf("%s%.*s: %s", opt[k][1], (int)(end - v), v, rest);
  }
  return NULL;
}

/* ---- the command ---------------------------------------------------------------------------- */

int ts_cmd_check(int argc, char **argv)
{
  gboolean update = FALSE;
  gint64 jobs = G_MININT64; /* not given: every core (-j -1 is refused) */
  GOptionEntry entries[] = {
      {"update", 0, 0, G_OPTION_ARG_NONE, &update,
       "Rewrite every scenario's golden step_time_s with today's prediction (atomically; "
       "comments and layout kept)",
       NULL},
      {"jobs", 'j', 0, G_OPTION_ARG_INT64, &jobs, "Worker processes (default: every core)", "N"},
      {NULL}};
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse(
          "check", "SCENARIOS.ini",
          "Re-predicts named scenarios and compares their step time (s) with golden "
          "values; exits 1 when one drifts beyond its tolerance (%).",
          "A scenario is a group of topology, model, split, global_batch, and optional "
          "micro_batch, backend,\ncollective_algorithm, bucket_MiB, full; with "
          "step_time_s (golden, s) and tolerance_pct (%). A [defaults]\ngroup gives "
          "keys to every scenario. See docs/regression.md.\n\nExample:\n  trainsim "
          "check tests/scenarios/tpu.ini\n  trainsim check tests/scenarios/tpu.ini --update   "
          "# rewrite its goldens",
          entries, &argc, &argv, &err))
    return ts_cmd_fail("check", err);
  if (argc != 2) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                argc < 2 ? "missing SCENARIOS.ini; expected one "
                           "scenarios file"
                         : "unexpected argument '%s'; expected "
                           "one scenarios file",
                argc < 2 ? "" : argv[2]);
    return ts_cmd_fail("check", err);
  }
  if (jobs != G_MININT64 && !ts_pool_parse_jobs(jobs, &err))
    return ts_cmd_fail("check", err);
  const char *path = argv[1];
  g_autofree char *text = NULL;
  gsize len = 0;
  /* A scenarios file is a few kilobytes: 16 MiB bounds a mistaken device or huge file. */
  if (!ts_read_input_file(path, (gint64)16 << 20, &text, &len, &err))
    return ts_cmd_fail("check", err);
  GArray *sc = load_scenarios(path, text, len, &err);
  if (sc == NULL)
    return ts_cmd_fail("check", err);
  int status = 0;
  int n = (int)sc->len;
  g_autoptr(ts_inputs) cache = ts_inputs_new();
  g_autofree char *dir = g_path_get_dirname(path);
  ts_config *cfg = g_new0(ts_config, n > 0 ? n : 1);
  int *idx = g_new(int, n > 0 ? n : 1);
  for (int i = 0; i < n && status == 0; i++) {
    scenario *s = &g_array_index(sc, scenario, i);
    idx[i] = i;
    cfg[i].model = ts_inputs_model(cache, s->model, dir, &err);
    if (cfg[i].model == NULL) {
      g_prefix_error(&err, "%s: [%s] model='%s': ", path, s->name, s->model);
      status = ts_cmd_fail("check", err);
      break;
    }
    cfg[i].topo = ts_inputs_topo(cache, s->topology, dir, &err);
    if (cfg[i].topo == NULL) {
      g_prefix_error(&err, "%s: [%s] topology='%s': ", path, s->name, s->topology);
      status = ts_cmd_fail("check", err);
      break;
    }
    cfg[i].split = s->split;
    ts_plan_options_default(&cfg[i].po);
    cfg[i].po.global_batch = s->global_batch;
    cfg[i].po.micro_batch = s->micro_batch;
    cfg[i].po.bucket_bytes = s->bucket_MiB * 1024 * 1024;
    cfg[i].po.algo = (ts_coll_algo)ts_coll_algo_parse(s->algo);
    cfg[i].ro.backend = s->backend;
    cfg[i].ro.full = s->full;
  }
  ts_outcome *out = g_new0(ts_outcome, n > 0 ? n : 1);
  if (status == 0) {
    ts_pool_options o = {jobs > 0 ? (int)jobs : ts_pool_default_jobs(), TRUE, "check"};
    if (!ts_pool_run(cfg, idx, n, &o, out, &err))
      status = ts_cmd_fail("check", err);
  }
  /* Any scenario that cannot be predicted is bad input: report the first, change nothing. */
  for (int i = 0; i < n && status == 0; i++)
    if (out[i].status != TS_OUTCOME_OK) {
      scenario *s = &g_array_index(sc, scenario, i);
      g_autofree char *why = file_terms(out[i].message);
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "%s: [%s]%s %s", path, s->name,
                  why != NULL ? "" : ":", why != NULL ? why : out[i].message);
      status = ts_cmd_fail("check", err);
      if (out[i].error_code == TS_ERROR_BACKEND)
        status = 1;
    }
  if (status == 0) {
    enum { NC = 6 };
    const char *head[NC] = {"scenario",  "golden_s",      "now_s",
                            "drift_pct", "tolerance_pct", "status"};
    gboolean right[NC] = {FALSE, TRUE, TRUE, TRUE, TRUE, FALSE};
    char ***cells = g_new0(char **, n);
    int w[NC];
    for (int c = 0; c < NC; c++)
      w[c] = (int)strlen(head[c]);
    int drifted = 0, missing = 0;
    double *now = g_new(double, n);
    char **names = g_new0(char *, n + 1);
    for (int i = 0; i < n; i++) {
      scenario *s = &g_array_index(sc, scenario, i);
      now[i] = out[i].res.step_time_s;
      names[i] = s->name;
      char b[4][G_ASCII_DTOSTR_BUF_SIZE];
      double drift = s->has_golden ? 100.0 * (now[i] - s->golden_s) / s->golden_s : 0;
      /* Goldens are written with 10 significant digits: half a unit of the last one (5e-8 %)
       * is rounding, not drift, so tolerance_pct = 0 means "unchanged", not "always drifts". */
      gboolean bad = s->has_golden && !(fabs(drift) <= s->tol_pct + 5e-8);
      drifted += bad;
      missing += !s->has_golden;
      /* The drift as shown, to 3 decimals; a drift that rounds to zero is +0.000, not -0.000
       * (adding +0.0 turns a negative zero positive). */
      double shown = nearbyint(drift * 1e3) / 1e3 + 0.0;
      cells[i] = g_new0(char *, NC + 1); /* NULL-terminated for g_strfreev */
      cells[i][0] = g_strdup(s->name);
      cells[i][1] = s->has_golden
                        ? g_strdup(g_ascii_formatd(b[0], sizeof b[0], "%.6g", s->golden_s))
                        : g_strdup("-");
      cells[i][2] = g_strdup(g_ascii_formatd(b[1], sizeof b[1], "%.6g", now[i]));
      cells[i][3] = s->has_golden
                        ? g_strdup_printf("%s%s", shown >= 0 ? "+" : "",
                                          g_ascii_formatd(b[2], sizeof b[2], "%.3f", shown))
                        : g_strdup("-");
      cells[i][4] = g_strdup(g_ascii_formatd(b[3], sizeof b[3], "%.3g", s->tol_pct));
      cells[i][5] = g_strdup(update           ? "updated"
                             : !s->has_golden ? "NO GOLDEN"
                             : bad            ? "DRIFT"
                                              : "ok");
      for (int c = 0; c < NC; c++)
        w[c] = MAX(w[c], (int)g_utf8_strlen(cells[i][c], -1));
    }
    GString *t = g_string_new(NULL);
    for (int c = 0; c < NC; c++) {
      ts_append_cell(t, head[c], c + 1 < NC ? w[c] : 0, right[c]);
      g_string_append(t, c + 1 < NC ? "  " : "\n");
    }
    for (int i = 0; i < n; i++) {
      for (int c = 0; c < NC; c++) {
        ts_append_cell(t, cells[i][c], c + 1 < NC ? w[c] : 0, right[c]);
        g_string_append(t, c + 1 < NC ? "  " : "\n");
      }
      g_strfreev(cells[i]);
    }
    g_free(cells);
    if (update) {
      g_autofree char *nt = ts_check_rewrite(text, names, now, n);
      if (!ts_write_file_atomic(path, nt, strlen(nt), &err)) {
        status = ts_cmd_fail("check", err);
      } else {
        /* A note, on stderr as every command's "wrote" (the table is the result). */
        fprintf(stderr, "trainsim check: wrote the golden step times of %d scenario%s to %s\n", n,
                n == 1 ? "" : "s", path);
      }
    } else {
      g_string_append_printf(t,
                             "%d scenario%s: %d within tolerance, %d drifted, %d without a "
                             "golden%s\n",
                             n, n == 1 ? "" : "s", n - drifted - missing, drifted, missing,
                             missing > 0 ? " (add one with trainsim check --update)" : "");
      if (drifted + missing > 0)
        status = 1;
    }
    g_autoptr(GError) werr = NULL;
    if (t->len > 0 && status != 2 && !ts_write_file_atomic("-", t->str, t->len, &werr))
      status = ts_cmd_fail("check", werr); /* a full disk is not "within tolerance" */
    g_string_free(t, TRUE);
    g_free(now);
    g_free(names);
  }
  for (int i = 0; i < n; i++)
    ts_outcome_clear(&out[i]);
  g_free(out);
  g_free(cfg);
  g_free(idx);
  g_array_unref(sc);
  return status;
}
