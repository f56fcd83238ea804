/* ts_plot: .dat files from trainsim's JSON outputs, rendered by the plots/ scripts through gnuplot.
 */
#include "ts_plot.h"
#include "ts_goodput.h"
#include "ts_sweep.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

gboolean ts_plot_gnuplot_available(GError **error)
{
  g_autofree char *p = g_find_program_in_path("gnuplot");
  if (p != NULL)
    return TRUE;
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "gnuplot not found on PATH; expected gnuplot 5 with the pngcairo terminal "
              "(Debian: apt-get install gnuplot-nox)");
  return FALSE;
}

/* The folder of the .gp scripts, found on the data search path as models are. */
static char *plot_dir(GError **error)
{
  g_autofree char *probe = ts_find_data_file("plots/common.gp");
  if (probe != NULL)
    return g_path_get_dirname(probe);
  g_autofree char *roots = ts_data_roots_text();
  g_set_error(error, TS_ERROR, TS_ERROR_IO,
              "plots/common.gp: not found under %s; expected the plots/ folder shipped with "
              "trainsim (set TRAINSIM_DATA_DIR)",
              roots);
  return NULL;
}

/* A gnuplot single-quoted string: a quote is written twice. */
static void gp_str(GString *s, const char *name, const char *v)
{
  g_string_append_printf(s, "%s='", name);
  for (const char *p = v; *p; p++) {
    if (*p == '\'')
      g_string_append_c(s, '\'');
    g_string_append_c(s, *p);
  }
  g_string_append(s, "'; ");
}

typedef struct {
  const char *outdir;
  char *plotdir;
  GPtrArray *written;
} plot_ctx;

/* Writes NAME.dat, then runs plots/NAME.gp for PNG and SVG; vars: extra "-e" assignments. */
static gboolean render(plot_ctx *c, const char *name, const char *dat_text, const char *vars,
                       GError **error)
{
  g_autofree char *dat = g_strdup_printf("%s/%s.dat", c->outdir, name);
  if (!ts_write_file_atomic(dat, dat_text, strlen(dat_text), error))
    return FALSE;
  g_ptr_array_add(c->written, g_strdup(dat));
  g_autofree char *script = g_strdup_printf("%s/%s.gp", c->plotdir, name);
  const char *terms[] = {"png", "svg"};
  for (size_t t = 0; t < G_N_ELEMENTS(terms); t++) {
    g_autofree char *final = g_strdup_printf("%s/%s.%s", c->outdir, name, terms[t]);
    /* gnuplot writes as it draws: draw into a temporary name, rename when complete. */
    g_autofree char *tmp = g_strdup_printf("%s.tmp", final);
    GString *e = g_string_new(NULL);
    gp_str(e, "term", terms[t]);
    gp_str(e, "out", tmp);
    gp_str(e, "plotdir", c->plotdir);
    gp_str(e, "dat", dat);
    g_string_append(e, vars);
    char *argv[] = {(char *)"gnuplot", (char *)"-e", e->str, script, NULL};
    g_autofree char *err_text = NULL;
    int wait = 0;
    g_autoptr(GError) spawn_err = NULL;
    gboolean ran = g_spawn_sync(NULL, argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL,
                                NULL, NULL, NULL, &err_text, &wait, &spawn_err);
    g_string_free(e, TRUE);
    GStatBuf st;
    gboolean ok =
        ran && WIFEXITED(wait) && WEXITSTATUS(wait) == 0 && g_stat(tmp, &st) == 0 && st.st_size > 0;
    if (!ok) {
      g_unlink(tmp);
      /* gnuplot's first complaint, on one line. */
      char *msg = err_text != NULL ? g_strstrip(err_text) : (char *)"";
      for (char *p = msg; *p; p++)
        if (*p == '\n')
          *p = ' ';
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "gnuplot %s on %s (%s output): %s",
                  !ran ? "could not start" : "failed", script, terms[t],
                  !ran                                        ? spawn_err->message
                  : *msg != '\0'                              ? msg
                  : WIFEXITED(wait) && WEXITSTATUS(wait) == 0 ? "empty output"
                                                              : "non-zero exit status");
      return FALSE;
    }
    if (g_rename(tmp, final) != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot rename: %s", final, g_strerror(errno));
      return FALSE;
    }
    g_ptr_array_add(c->written, g_steal_pointer(&final));
  }
  return TRUE;
}

static void dat_num(GString *s, double v)
{
  g_string_append_c(s, ' ');
  ts_append_g(s, 8, v);
}

/* A label for gnuplot data: double quotes, none inside. */
static void dat_label(GString *s, const char *v)
{
  g_string_append_c(s, '"');
  for (const char *p = v; *p; p++)
    g_string_append_c(s, *p == '"' ? '\'' : *p);
  g_string_append_c(s, '"');
}

static double num(JsonObject *o, const char *k)
{
  JsonNode *n = json_object_get_member(o, k);
  return n != NULL && JSON_NODE_HOLDS_VALUE(n) ? json_node_get_double(n) : 0.0;
}

static const char *str(JsonObject *o, const char *k)
{
  JsonNode *n = json_object_get_member(o, k);
  return n != NULL && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
             ? json_node_get_string(n)
             : "";
}

/* fits_memory, true when absent (a result without a memory model). */
static gboolean fits(JsonObject *o)
{
  JsonNode *n = json_object_get_member(o, "fits_memory");
  return n == NULL || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_boolean(n);
}

/* ---- what the plots read, checked first --------------------------------------------------- */

/* A hand-edited or foreign document (a string where a number belongs, an event that is not an
 * object) was plotted as zeros, or made json-glib print CRITICAL assertions (a crash under
 * G_DEBUG=fatal-criticals); each member a plot reads is checked for its kind before any
 * plotting, and the first wrong one is one line naming where it is and what was expected. */
typedef enum { WANT_NUMBER, WANT_INTEGER, WANT_BOOLEAN, WANT_OBJECT, WANT_ARRAY } want_kind;

static gboolean want(JsonObject *o, const char *key, want_kind kind, gboolean required,
                     const char *where, GError **error)
{
  static const char *const what[] = {"a finite number", "a whole number", "true or false",
                                     "an object", "an array"};
  JsonNode *n = json_object_get_member(o, key);
  gboolean ok;
  if (n == NULL || JSON_NODE_HOLDS_NULL(n)) {
    ok = !required;
  } else if (kind == WANT_OBJECT) {
    ok = JSON_NODE_HOLDS_OBJECT(n);
  } else if (kind == WANT_ARRAY) {
    ok = JSON_NODE_HOLDS_ARRAY(n);
  } else if (!JSON_NODE_HOLDS_VALUE(n)) {
    ok = FALSE;
  } else {
    GType t = json_node_get_value_type(n);
    ok = kind == WANT_BOOLEAN ? t == G_TYPE_BOOLEAN
         : kind == WANT_INTEGER
             ? t == G_TYPE_INT64
             : (t == G_TYPE_INT64 || t == G_TYPE_DOUBLE) && isfinite(json_node_get_double(n));
  }
  if (!ok) {
    g_autofree char *shown = n != NULL ? json_to_string(n, FALSE) : g_strdup("absent");
    if (strlen(shown) > 40)
      strcpy(shown + 37, "...");
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s \"%s\": %s; expected %s", where, key, shown,
                what[kind]);
  }
  return ok;
}

/* The members of a result row (sweep.json, run's results.json) the plots read. */
static gboolean check_result_row(JsonObject *o, const char *where, GError **error)
{
  if (!want(o, "step_time_s", WANT_NUMBER, TRUE, where, error))
    return FALSE;
  static const char *const numbers[] = {
      "compute_time_s",    "exposed_comm_time_s", "exposed_comm_dp_s",
      "exposed_comm_tp_s", "exposed_comm_pp_s",   "idle_time_s",
      "bubble_time_s",     "samples_per_s",       "memory_capacity_bytes"};
  static const char *const ttt_numbers[] = {"days_expected", "days_no_failures",   "cost_usd",
                                            "job_mtbf_s",    "checkpoint_write_s", "restart_s"};
  for (size_t k = 0; k < G_N_ELEMENTS(numbers); k++)
    if (!want(o, numbers[k], WANT_NUMBER, FALSE, where, error))
      return FALSE;
  if (!want(o, "chips", WANT_INTEGER, FALSE, where, error) ||
      !want(o, "micro_batch", WANT_INTEGER, FALSE, where, error) ||
      !want(o, "fits_memory", WANT_BOOLEAN, FALSE, where, error) ||
      !want(o, "memory_breakdown_bytes", WANT_OBJECT, FALSE, where, error) ||
      !want(o, "time_to_train", WANT_OBJECT, FALSE, where, error))
    return FALSE;
  JsonObject *mb =
      json_object_get_member(o, "memory_breakdown_bytes") != NULL &&
              JSON_NODE_HOLDS_OBJECT(json_object_get_member(o, "memory_breakdown_bytes"))
          ? json_object_get_object_member(o, "memory_breakdown_bytes")
          : NULL;
  static const char *const parts[] = {"params", "grads",    "optimizer", "gathered", "activations",
                                      "temp",   "pipeline", "allocator", "reserve"};
  g_autofree char *mwhere = g_strdup_printf("%s \"memory_breakdown_bytes\"", where);
  for (size_t k = 0; mb != NULL && k < G_N_ELEMENTS(parts); k++)
    if (!want(mb, parts[k], WANT_NUMBER, FALSE, mwhere, error))
      return FALSE;
  JsonObject *t = json_object_get_member(o, "time_to_train") != NULL &&
                          JSON_NODE_HOLDS_OBJECT(json_object_get_member(o, "time_to_train"))
                      ? json_object_get_object_member(o, "time_to_train")
                      : NULL;
  g_autofree char *twhere = g_strdup_printf("%s \"time_to_train\"", where);
  for (size_t k = 0; t != NULL && k < G_N_ELEMENTS(ttt_numbers); k++)
    if (!want(t, ttt_numbers[k], WANT_NUMBER, FALSE, twhere, error))
      return FALSE;
  return TRUE;
}

static gboolean check_results(JsonObject *root, GError **error)
{
  if (!want(root, "inputs", WANT_OBJECT, FALSE, "the document's", error) ||
      !want(root, "sweep", WANT_OBJECT, FALSE, "the document's", error))
    return FALSE;
  if (json_object_has_member(root, "sweep")) {
    JsonObject *sw = json_object_get_object_member(root, "sweep");
    if (!want(sw, "vary", WANT_ARRAY, FALSE, "\"sweep\"", error))
      return FALSE;
    JsonArray *va = json_object_get_member(sw, "vary") != NULL &&
                            JSON_NODE_HOLDS_ARRAY(json_object_get_member(sw, "vary"))
                        ? json_object_get_array_member(sw, "vary")
                        : NULL;
    for (guint i = 0; va != NULL && i < json_array_get_length(va); i++) {
      JsonNode *n = json_array_get_element(va, i);
      if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "\"sweep\" \"vary\"[%u]: expected a string (a --vary option)", i);
        return FALSE;
      }
    }
  }
  JsonArray *res = json_object_get_array_member(root, "results");
  if (json_array_get_length(res) == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "no results to plot; expected rows in \"results\"");
    return FALSE;
  }
  for (guint i = 0; i < json_array_get_length(res); i++) {
    JsonNode *n = json_array_get_element(res, i);
    g_autofree char *where = g_strdup_printf("\"results\"[%u]", i);
    if (!JSON_NODE_HOLDS_OBJECT(n)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: expected an object (one result row)",
                  where);
      return FALSE;
    }
    if (!check_result_row(json_node_get_object(n), where, error))
      return FALSE;
  }
  return TRUE;
}

/* The members of a timeline (run --timeline) the plot reads. */
static gboolean check_timeline(JsonObject *root, GError **error)
{
  if (!want(root, "traceEvents", WANT_ARRAY, TRUE, "the document's", error) ||
      !want(root, "otherData", WANT_OBJECT, FALSE, "the document's", error))
    return FALSE;
  JsonArray *ev = json_object_get_array_member(root, "traceEvents");
  guint spans = 0;
  for (guint i = 0; i < json_array_get_length(ev); i++) {
    JsonNode *n = json_array_get_element(ev, i);
    g_autofree char *where = g_strdup_printf("\"traceEvents\"[%u]", i);
    if (!JSON_NODE_HOLDS_OBJECT(n)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: expected an object (one event)", where);
      return FALSE;
    }
    JsonObject *e = json_node_get_object(n);
    const char *ph = str(e, "ph");
    gboolean span = strcmp(ph, "X") == 0, meta = strcmp(ph, "M") == 0;
    if (!span && !meta)
      continue; /* other phases are not drawn */
    spans += span;
    if (!want(e, "pid", WANT_INTEGER, TRUE, where, error) ||
        !want(e, "tid", WANT_INTEGER, FALSE, where, error) ||
        !want(e, "args", WANT_OBJECT, meta, where, error) ||
        !want(e, "ts", WANT_NUMBER, span, where, error) ||
        !want(e, "dur", WANT_NUMBER, span, where, error))
      return FALSE;
    if (meta && !want(json_object_get_object_member(e, "args"), "program", WANT_INTEGER, FALSE,
                      where, error))
      return FALSE;
    if (span && num(e, "dur") < 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s \"dur\": %g; expected a duration >= 0",
                  where, num(e, "dur"));
      return FALSE;
    }
  }
  if (json_object_has_member(root, "otherData") &&
      JSON_NODE_HOLDS_OBJECT(json_object_get_member(root, "otherData"))) {
    JsonObject *od = json_object_get_object_member(root, "otherData");
    gboolean collapsed = strcmp(str(od, "replay"), "collapsed") == 0;
    if (!want(od, "chips", WANT_INTEGER, collapsed, "\"otherData\"", error) ||
        !want(od, "simulated_chips", WANT_INTEGER, collapsed, "\"otherData\"", error))
      return FALSE;
  }
  if (spans == 0) {
    /* Said before the output folder is made (an empty folder was left behind). */
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "the timeline has no spans to plot; expected \"traceEvents\" with \"ph\": \"X\" "
                "events (trainsim run --timeline)");
    return FALSE;
  }
  return TRUE;
}

/* ---- rows: breakdown, memory, scaling, efficiency, what-if -------------------------------- */

typedef struct {
  JsonObject *o;
  int k;
  char *family; /* split family, with the model when several */
} row;

static gint by_step(gconstpointer a, gconstpointer b)
{
  const row *x = a, *y = b;
  double sx = num(x->o, "step_time_s"), sy = num(y->o, "step_time_s");
  if (sx != sy)
    return sx < sy ? -1 : 1;
  return x->k - y->k;
}

static gboolean differs(GArray *rows, const char *key)
{
  for (guint i = 1; i < rows->len; i++) {
    JsonNode *a = json_object_get_member(g_array_index(rows, row, 0).o, key);
    JsonNode *b = json_object_get_member(g_array_index(rows, row, i).o, key);
    if ((a == NULL) != (b == NULL))
      return TRUE;
    if (a == NULL)
      continue;
    g_autofree char *sa = json_to_string(a, FALSE), *sb = json_to_string(b, FALSE);
    if (strcmp(sa, sb) != 0)
      return TRUE;
  }
  return FALSE;
}

/* The bars to draw: every row when few, else the best of each family then the fastest. */
static GArray *pick_bars(GArray *rows, int max)
{
  GArray *sorted = g_array_copy(rows);
  g_array_sort(sorted, by_step);
  GArray *pick = g_array_new(FALSE, FALSE, sizeof(row));
  if ((int)sorted->len <= max) {
    g_array_append_vals(pick, sorted->data, sorted->len);
    g_array_unref(sorted);
    return pick;
  }
  GHashTable *fam = g_hash_table_new(g_str_hash, g_str_equal);
  gboolean *taken = g_new0(gboolean, sorted->len);
  for (guint i = 0; i < sorted->len && (int)pick->len < max; i++) {
    row *r = &g_array_index(sorted, row, i);
    if (!g_hash_table_contains(fam, r->family)) {
      g_hash_table_add(fam, r->family);
      g_array_append_val(pick, *r);
      taken[i] = TRUE;
    }
  }
  for (guint i = 0; i < sorted->len && (int)pick->len < max; i++)
    if (!taken[i])
      g_array_append_val(pick, g_array_index(sorted, row, i));
  g_array_sort(pick, by_step);
  g_free(taken);
  g_hash_table_unref(fam);
  g_array_unref(sorted);
  return pick;
}

/* The split's options, what its placement does not say, less those every bar has (common: a
 * set of "KEY=VALUE" items, may be NULL): "sp,zero=1" of "tp=8,dp=8,pp=4,schedule=1f1b,sp,zero=1"
 * beside "tp=8,dp=8,pp=4,schedule=1f1b" (the degrees of the axes placed are dropped). Only
 * what differs is shown: the labels are rotated and long ones are cut at the figure's edge. */
static char *split_options(const char *split, GHashTable *common)
{
  g_auto(GStrv) items = g_strsplit(split, ",", -1);
  GString *s = g_string_new(NULL);
  for (char **it = items; *it != NULL; it++) {
    gboolean axis = FALSE;
    static const char *const axes[] = {"dp=", "tp=", "mp=", "pp=", "cp="};
    for (size_t k = 0; k < G_N_ELEMENTS(axes); k++)
      axis |= g_str_has_prefix(*it, axes[k]);
    if (!axis && (common == NULL || !g_hash_table_contains(common, *it)))
      g_string_append_printf(s, "%s%s", s->len ? "," : "", *it);
  }
  return g_string_free(s, FALSE);
}

/* The options every bar's split has (caller frees). */
static GHashTable *common_options(GArray *bars)
{
  GHashTable *count = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; i < bars->len; i++) {
    g_autofree char *opt = split_options(str(g_array_index(bars, row, i).o, "split"), NULL);
    g_auto(GStrv) items = g_strsplit(opt, ",", -1);
    for (char **it = items; *it != NULL; it++)
      if (**it) {
        guint n = GPOINTER_TO_UINT(g_hash_table_lookup(count, *it));
        g_hash_table_insert(count, g_strdup(*it), GUINT_TO_POINTER(n + 1));
      }
  }
  GHashTable *common = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, count);
  while (g_hash_table_iter_next(&it, &k, &v))
    if (GPOINTER_TO_UINT(v) == bars->len)
      g_hash_table_add(common, g_strdup(k));
  g_hash_table_unref(count);
  return common;
}

/* Whether two bars share a placement but not a split (the same degrees, other options): their
 * labels then need the options, or the bars read alike. */
static gboolean placements_collide(GArray *bars)
{
  for (guint i = 0; i < bars->len; i++)
    for (guint j = i + 1; j < bars->len; j++) {
      JsonObject *a = g_array_index(bars, row, i).o, *b = g_array_index(bars, row, j).o;
      if (strcmp(str(a, "placement"), str(b, "placement")) == 0 &&
          strcmp(str(a, "split"), str(b, "split")) != 0)
        return TRUE;
    }
  return FALSE;
}

static char *bar_label(JsonObject *o, gboolean arr, gboolean micro, gboolean model,
                       GHashTable *options, char **vary_cols)
{
  GString *s = g_string_new(NULL);
  if (model)
    g_string_append_printf(s, "%s ", str(o, "model"));
  if (arr)
    g_string_append_printf(s, "%s ", str(o, "array"));
  const char *pl = str(o, "placement");
  g_string_append(s, *pl ? pl : str(o, "split"));
  if (options != NULL && *pl) {
    g_autofree char *opt = split_options(str(o, "split"), options);
    if (*opt)
      g_string_append_printf(s, " %s", opt);
  }
  if (micro)
    g_string_append_printf(s, " micro-batch %" G_GINT64_FORMAT, (gint64)num(o, "micro_batch"));
  for (char **c = vary_cols; c != NULL && *c != NULL; c++) {
    g_string_append_printf(s, " %s", g_str_has_suffix(*c, "_scale") ? "x" : "");
    ts_append_g(s, 4, num(o, *c));
  }
  return g_string_free(s, FALSE);
}

static gboolean plot_breakdown_memory(plot_ctx *c, GArray *rows, const char *ttl, char **vary_cols,
                                      GError **error)
{
  g_autoptr(GArray) bars = pick_bars(rows, 24);
  gboolean arr = differs(rows, "array"), micro = differs(rows, "micro_batch"),
           model = differs(rows, "model");
  g_autoptr(GHashTable) options = placements_collide(bars) ? common_options(bars) : NULL;
  /* Only the varied columns that differ among the bars label them. */
  GPtrArray *vc = g_ptr_array_new();
  for (char **v = vary_cols; v != NULL && *v != NULL; v++)
    if (differs(bars, *v))
      g_ptr_array_add(vc, *v);
  g_ptr_array_add(vc, NULL);
  GString *b = g_string_new("# label compute_s exposed_tp_s exposed_dp_s exposed_pp_s "
                            "exposed_other_s bubble_s idle_s\n");
  GString *m = g_string_new("# label params_GiB grads_GiB optimizer_GiB gathered_GiB "
                            "activations_GiB temp_GiB pipeline_GiB allocator_GiB capacity_GiB "
                            "reserve_GiB\n");
  const double gib = 1073741824.0;
  for (guint i = 0; i < bars->len; i++) {
    JsonObject *o = g_array_index(bars, row, i).o;
    g_autofree char *lab = bar_label(o, arr, micro, model, options, (char **)vc->pdata);
    double tp = num(o, "exposed_comm_tp_s"), dp = num(o, "exposed_comm_dp_s"),
           pp = num(o, "exposed_comm_pp_s"), all = num(o, "exposed_comm_time_s");
    double other = all - tp - dp - pp;
    dat_label(b, lab);
    /* Idle splits into the pipeline bubble and the rest (waiting for other ranks). */
    double bubble = num(o, "bubble_time_s"), idle = num(o, "idle_time_s") - bubble;
    const double v[] = {num(o, "compute_time_s"), tp, dp, pp, other > 0 ? other : 0, bubble,
                        idle > 0 ? idle : 0};
    for (size_t k = 0; k < G_N_ELEMENTS(v); k++)
      dat_num(b, v[k]);
    g_string_append_c(b, '\n');
    JsonObject *mb = json_object_has_member(o, "memory_breakdown_bytes")
                         ? json_object_get_object_member(o, "memory_breakdown_bytes")
                         : NULL;
    dat_label(m, lab);
    /* Every part memory_per_chip_bytes sums, so the stack's top is the table's memory/chip. */
    const char *parts[] = {"params",      "grads", "optimizer", "gathered",
                           "activations", "temp",  "pipeline",  "allocator"};
    for (size_t k = 0; k < G_N_ELEMENTS(parts); k++)
      dat_num(m, mb != NULL ? num(mb, parts[k]) / gib : 0);
    dat_num(m, num(o, "memory_capacity_bytes") / gib);
    dat_num(m, mb != NULL ? num(mb, "reserve") / gib : 0);
    g_string_append_c(m, '\n');
  }
  g_ptr_array_unref(vc);
  GString *vars = g_string_new(NULL);
  g_autofree char *t2 = bars->len < rows->len
                            ? g_strdup_printf("%s (%u fastest of %u)", ttl, bars->len, rows->len)
                            : g_strdup(ttl);
  gp_str(vars, "ttl", t2);
  gboolean ok = render(c, "breakdown", b->str, vars->str, error) &&
                render(c, "memory", m->str, vars->str, error);
  g_string_free(vars, TRUE);
  g_string_free(b, TRUE);
  g_string_free(m, TRUE);
  return ok;
}

/* Per family, the best step time at each value of x (chips, or a varied parameter). */
typedef struct {
  char *family;
  GArray *x, *step, *tput; /* double, sorted by x */
} series;

static void series_free(gpointer p)
{
  series *s = p;
  g_free(s->family);
  g_array_unref(s->x);
  g_array_unref(s->step);
  g_array_unref(s->tput);
  g_free(s);
}

static GPtrArray *best_series(GArray *rows, const char *xkey, gboolean fitting_only)
{
  GPtrArray *out = g_ptr_array_new_with_free_func(series_free);
  GHashTable *by = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < rows->len; i++) {
    row *r = &g_array_index(rows, row, i);
    if (fitting_only && json_object_has_member(r->o, "fits_memory") &&
        !json_object_get_boolean_member(r->o, "fits_memory"))
      continue;
    series *s = g_hash_table_lookup(by, r->family);
    if (s == NULL) {
      s = g_new0(series, 1);
      s->family = g_strdup(r->family);
      s->x = g_array_new(FALSE, FALSE, sizeof(double));
      s->step = g_array_new(FALSE, FALSE, sizeof(double));
      s->tput = g_array_new(FALSE, FALSE, sizeof(double));
      g_ptr_array_add(out, s);
      g_hash_table_insert(by, s->family, s);
    }
    double x = num(r->o, xkey), st = num(r->o, "step_time_s"), tp = num(r->o, "samples_per_s");
    guint j = 0;
    while (j < s->x->len && g_array_index(s->x, double, j) < x)
      j++;
    if (j < s->x->len && g_array_index(s->x, double, j) == x) {
      if (st < g_array_index(s->step, double, j)) {
        g_array_index(s->step, double, j) = st;
        g_array_index(s->tput, double, j) = tp;
      }
    } else {
      g_array_insert_val(s->x, j, x);
      g_array_insert_val(s->step, j, st);
      g_array_insert_val(s->tput, j, tp);
    }
  }
  g_hash_table_unref(by);
  return out;
}

static gboolean plot_scaling(plot_ctx *c, GArray *rows, const char *ttl, GError **error)
{
  gboolean any_fit = FALSE;
  for (guint i = 0; i < rows->len && !any_fit; i++) {
    JsonObject *o = g_array_index(rows, row, i).o;
    any_fit = !json_object_has_member(o, "fits_memory") ||
              json_object_get_boolean_member(o, "fits_memory");
  }
  g_autoptr(GPtrArray) ser = best_series(rows, "chips", any_fit);
  GString *d = g_string_new(NULL), *e = g_string_new(NULL);
  int nb = 0;
  for (guint i = 0; i < ser->len; i++) {
    series *s = g_ptr_array_index(ser, i);
    if (s->x->len == 0)
      continue;
    GString *bufs[] = {d, e};
    for (int k = 0; k < 2; k++) {
      if (nb > 0)
        g_string_append(bufs[k], "\n\n");
      dat_label(bufs[k], s->family);
      g_string_append_c(bufs[k], '\n');
    }
    double ref = g_array_index(s->tput, double, 0) / g_array_index(s->x, double, 0);
    for (guint j = 0; j < s->x->len; j++) {
      double x = g_array_index(s->x, double, j);
      dat_num(d, x);
      dat_num(d, g_array_index(s->step, double, j));
      dat_num(d, g_array_index(s->tput, double, j));
      g_string_append_c(d, '\n');
      dat_num(e, x);
      dat_num(e, ref > 0 ? 100.0 * g_array_index(s->tput, double, j) / x / ref : 0);
      g_string_append_c(e, '\n');
    }
    nb++;
  }
  GString *vars = g_string_new(NULL);
  gp_str(vars, "ttl", ttl);
  gp_str(vars, "sub",
         any_fit ? "best fitting split of each family at each chip count"
                 : "best split of each family at each chip count; none fits in memory");
  g_string_append_printf(vars, "nblocks=%d; ", nb);
  gboolean ok = nb == 0 || (render(c, "scaling", d->str, vars->str, error) &&
                            render(c, "efficiency", e->str, vars->str, error));
  g_string_free(vars, TRUE);
  g_string_free(d, TRUE);
  g_string_free(e, TRUE);
  return ok;
}

/* An axis label for a --vary column: words and a unit, not the raw key ("link bandwidth,
 * factor of the topology's value", "latency (us)"; not "link_bandwidth_GBps_scale"). */
static char *axis_label(const char *col)
{
  static const struct {
    const char *suffix, *unit;
  } units[] = {{"_GBps", "GB/s"}, {"_tflops", "TFLOP/s"}, {"_us", "us"}, {"_GiB", "GiB"},
               {"_s", "s"},       {"_pct", "%"}};
  gboolean scale = g_str_has_suffix(col, "_scale");
  g_autofree char *key = g_strndup(col, strlen(col) - (scale ? 6 : 0));
  const char *unit = NULL;
  for (size_t i = 0; i < G_N_ELEMENTS(units) && unit == NULL; i++)
    if (g_str_has_suffix(key, units[i].suffix)) {
      key[strlen(key) - strlen(units[i].suffix)] = '\0';
      unit = units[i].unit;
    }
  if (strcmp(key, "dims") == 0)
    return g_strdup("array shape");
  for (char *p = key; *p; p++)
    if (*p == '_' || *p == '.')
      *p = ' ';
  if (scale) /* a factor has no unit */
    return g_strdup_printf("%s, factor of the topology's value", key);
  return unit ? g_strdup_printf("%s (%s)", key, unit) : g_strdup(key);
}

static gboolean plot_whatif(plot_ctx *c, GArray *rows, const char *ttl, char **vary_cols,
                            GError **error)
{
  /* The first varied column with several values; the others held at their baseline. */
  const char *col = NULL;
  for (char **v = vary_cols; v != NULL && *v != NULL && col == NULL; v++)
    if (differs(rows, *v))
      col = *v;
  if (col == NULL)
    return TRUE;
  GArray *sub = g_array_new(FALSE, FALSE, sizeof(row));
  for (guint i = 0; i < rows->len; i++) {
    row *r = &g_array_index(rows, row, i);
    gboolean base = TRUE;
    for (char **v = vary_cols; *v != NULL && base; v++) {
      if (*v == col)
        continue;
      double first = num(g_array_index(rows, row, 0).o, *v);
      double want = g_str_has_suffix(*v, "_scale") ? 1.0 : first;
      base = num(r->o, *v) == want || (num(r->o, *v) == first && want != first);
    }
    if (base)
      g_array_append_val(sub, *r);
  }
  g_autoptr(GPtrArray) ser = best_series(sub, col, FALSE);
  g_array_unref(sub);
  GString *d = g_string_new(NULL);
  int nb = 0;
  gboolean positive = TRUE;
  for (guint i = 0; i < ser->len; i++) {
    series *s = g_ptr_array_index(ser, i);
    /* Baseline: factor 1 when present, else the smallest value. */
    guint b = 0;
    for (guint j = 0; j < s->x->len; j++)
      if (g_str_has_suffix(col, "_scale") && g_array_index(s->x, double, j) == 1.0)
        b = j;
    double base = g_array_index(s->step, double, b);
    if (nb > 0)
      g_string_append(d, "\n\n");
    dat_label(d, s->family);
    g_string_append_c(d, '\n');
    for (guint j = 0; j < s->x->len; j++) {
      double x = g_array_index(s->x, double, j);
      positive &= x > 0;
      dat_num(d, x);
      dat_num(d, base > 0 ? g_array_index(s->step, double, j) / base : 0);
      g_string_append_c(d, '\n');
    }
    nb++;
  }
  GString *vars = g_string_new(NULL);
  gp_str(vars, "ttl", ttl);
  g_autofree char *xl = axis_label(col);
  gp_str(vars, "xlab", xl);
  g_string_append_printf(vars, "nblocks=%d; ", nb);
  g_autofree char *script_vars =
      positive ? g_strdup(vars->str) : g_strconcat(vars->str, "nolog = 1; ", NULL);
  gboolean ok = nb == 0 || render(c, "whatif", d->str, script_vars, error);
  g_string_free(vars, TRUE);
  g_string_free(d, TRUE);
  return ok;
}

/* ---- capacity planning (issue 14): days and cost vs chips, Pareto, goodput ------------------ */

static JsonObject *ttt(JsonObject *o)
{
  return json_object_has_member(o, "time_to_train")
             ? json_object_get_object_member(o, "time_to_train")
             : NULL;
}

/* Time to train and cost against chips: at each chip count the split with the fewest expected
 * days (fitting splits first), its failure-free days and its cost. Then every planned row as
 * (days, cost) with the Pareto frontier: no other row is both faster and cheaper. */
static gboolean plot_planning(plot_ctx *c, GArray *rows, const char *ttl, GError **error)
{
  GArray *best = g_array_new(FALSE, FALSE, sizeof(row));
  gboolean any_fit = FALSE;
  for (guint i = 0; i < rows->len; i++) {
    JsonObject *o = g_array_index(rows, row, i).o;
    any_fit |= ttt(o) != NULL && fits(o);
  }
  GString *pts = g_string_new(NULL);
  GArray *pareto = g_array_new(FALSE, FALSE, sizeof(double));
  for (guint i = 0; i < rows->len; i++) {
    row *r = &g_array_index(rows, row, i);
    JsonObject *t = ttt(r->o);
    if (t == NULL || (any_fit && !fits(r->o)))
      continue;
    double chips = num(r->o, "chips"), days = num(t, "days_expected");
    guint j = 0;
    while (j < best->len && num(g_array_index(best, row, j).o, "chips") < chips)
      j++;
    if (j < best->len && num(g_array_index(best, row, j).o, "chips") == chips) {
      if (days < num(ttt(g_array_index(best, row, j).o), "days_expected"))
        g_array_index(best, row, j) = *r;
    } else
      g_array_insert_val(best, j, *r);
    double pt[3] = {days, num(t, "cost_usd"), chips};
    g_array_append_vals(pareto, pt, 3);
  }
  if (best->len < 2) {
    g_array_unref(best);
    g_array_unref(pareto);
    g_string_free(pts, TRUE);
    return TRUE;
  }
  GString *d = g_string_new(NULL);
  gboolean cost = FALSE;
  for (guint j = 0; j < best->len; j++) {
    JsonObject *o = g_array_index(best, row, j).o, *t = ttt(o);
    dat_num(d, num(o, "chips"));
    dat_num(d, num(t, "days_no_failures"));
    dat_num(d, num(t, "days_expected"));
    dat_num(d, num(t, "days_p90"));
    dat_num(d, num(t, "cost_usd"));
    g_string_append_c(d, ' ');
    dat_label(d, str(o, "split"));
    g_string_append_c(d, '\n');
    cost |= num(t, "cost_usd") > 0;
  }
  /* Pareto: sort by days, keep a row when it is cheaper than every faster one. */
  int np = (int)pareto->len / 3;
  double *p = (double *)(void *)pareto->data;
  for (int a = 1; a < np; a++)
    for (int b = a; b > 0 && (p[3 * b] < p[3 * (b - 1)] ||
                              (p[3 * b] == p[3 * (b - 1)] && p[3 * b + 1] < p[3 * (b - 1) + 1]));
         b--)
      for (int k = 0; k < 3; k++) {
        double tmp = p[3 * b + k];
        p[3 * b + k] = p[3 * (b - 1) + k];
        p[3 * (b - 1) + k] = tmp;
      }
  GString *all = g_string_new(NULL), *front = g_string_new(NULL);
  double cheapest = INFINITY;
  for (int a = 0; a < np; a++) {
    dat_num(all, p[3 * a]);
    dat_num(all, p[3 * a + 1]);
    dat_num(all, p[3 * a + 2]);
    g_string_append_c(all, '\n');
    if (p[3 * a + 1] < cheapest) {
      cheapest = p[3 * a + 1];
      dat_num(front, p[3 * a]);
      dat_num(front, p[3 * a + 1]);
      dat_num(front, p[3 * a + 2]);
      g_string_append_c(front, '\n');
    }
  }
  g_string_append_printf(all, "\n\n%s", front->str);
  GString *vars = g_string_new(NULL);
  gp_str(vars, "ttl", ttl);
  g_string_append_printf(vars, "has_cost=%d; ", cost);
  gboolean ok = render(c, "time_to_train", d->str, vars->str, error) &&
                (!cost || render(c, "pareto", all->str, vars->str, error));
  g_string_free(vars, TRUE);
  g_string_free(d, TRUE);
  g_string_free(all, TRUE);
  g_string_free(front, TRUE);
  g_string_free(pts, TRUE);
  g_array_unref(best);
  g_array_unref(pareto);
  return ok;
}

/* Goodput against the checkpoint interval for the fastest planned row with failures: the
 * closed form over intervals from 1/20 to 20 times the optimum, the optimum and Young's. */
static gboolean plot_goodput(plot_ctx *c, GArray *rows, const char *ttl, GError **error)
{
  JsonObject *o = NULL;
  for (guint i = 0; i < rows->len; i++) {
    JsonObject *x = g_array_index(rows, row, i).o, *t = ttt(x);
    if (t != NULL && num(t, "job_mtbf_s") > 0 &&
        (o == NULL || num(t, "days_expected") < num(ttt(o), "days_expected")))
      o = x;
  }
  if (o == NULL)
    return TRUE;
  JsonObject *t = ttt(o);
  ts_goodput_in in = {.work_s = num(t, "days_no_failures") * 86400.0,
                      .mtbf_s = num(t, "job_mtbf_s"),
                      .checkpoint_s = num(t, "checkpoint_write_s"),
                      .restart_s = num(t, "restart_s")};
  ts_goodput g;
  ts_goodput_expect(&in, &g);
  double opt = g.interval_s, young = g.young_s;
  GString *d = g_string_new(NULL);
  for (int k = 0; k <= 80; k++) {
    ts_goodput_in x = in;
    x.interval_s = opt * pow(20.0, (k - 40) / 40.0);
    ts_goodput gx;
    ts_goodput_expect(&x, &gx);
    dat_num(d, x.interval_s / 60);
    dat_num(d, 100 * gx.goodput);
    g_string_append_c(d, '\n');
  }
  GString *vars = g_string_new(NULL);
  g_autofree char *sub =
      /* The split on a line of its own: a long one ran off the figure's right edge. */
      g_strdup_printf("%s\n%s on %.0f chips\njob MTBF %.3g h, checkpoint %.3g s, restart %.3g s",
                      ttl, str(o, "split"), num(o, "chips"), in.mtbf_s / 3600, in.checkpoint_s,
                      in.restart_s);
  gp_str(vars, "ttl", sub);
  g_string_append_printf(vars, "opt_min=%.17g; young_min=%.17g; opt_goodput=%.17g; ", opt / 60,
                         young / 60, 100 * g.goodput);
  gboolean ok = render(c, "goodput", d->str, vars->str, error);
  g_string_free(vars, TRUE);
  g_string_free(d, TRUE);
  return ok;
}

static gboolean plot_rows(plot_ctx *c, JsonObject *root, GError **error)
{
  JsonArray *res = json_object_get_array_member(root, "results");
  GArray *rows = g_array_new(FALSE, FALSE, sizeof(row));
  gboolean many_models = FALSE;
  const char *first_model = NULL;
  for (guint i = 0; i < json_array_get_length(res); i++) {
    JsonObject *o = json_array_get_object_element(res, i);
    const char *mn = str(o, "model");
    if (first_model == NULL)
      first_model = mn;
    many_models |= strcmp(mn, first_model) != 0;
  }
  for (guint i = 0; i < json_array_get_length(res); i++) {
    row r = {json_array_get_object_element(res, i), (int)i, NULL};
    char *fam = ts_split_family(str(r.o, "split"));
    r.family = many_models ? g_strdup_printf("%s %s", str(r.o, "model"), fam) : g_strdup(fam);
    g_free(fam);
    g_array_append_val(rows, r);
  }
  /* Title: model and topology, from a sweep's spec or run's inputs. */
  g_autofree char *ttl = NULL;
  if (json_object_has_member(root, "inputs")) {
    JsonObject *in = json_object_get_object_member(root, "inputs");
    ttl = g_strdup_printf("%s on %s", str(in, "model"), str(in, "topology"));
  } else if (rows->len > 0) {
    JsonObject *o = g_array_index(rows, row, 0).o;
    gboolean mt = differs(rows, "topology"), ma = differs(rows, "array");
    ttl = g_strdup_printf("%s on %s%s", many_models ? "several models" : str(o, "model"),
                          mt ? "several topologies" : str(o, "topology"),
                          ma && !mt ? " (array shapes varied)" : "");
  } else {
    ttl = g_strdup("");
  }
  /* Varied columns, from the sweep's --vary options. */
  GPtrArray *vc = g_ptr_array_new_with_free_func(g_free);
  if (json_object_has_member(root, "sweep")) {
    JsonArray *va =
        json_object_get_array_member(json_object_get_object_member(root, "sweep"), "vary");
    for (guint i = 0; va != NULL && i < json_array_get_length(va); i++) {
      g_autoptr(ts_vary) v = ts_vary_parse(json_array_get_string_element(va, i), NULL);
      if (v != NULL && strcmp(v->key, "dims") != 0)
        g_ptr_array_add(vc, g_strdup(v->column));
    }
  }
  g_ptr_array_add(vc, NULL);
  gboolean ok = TRUE;
  if (rows->len == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "no results to plot; expected rows in \"results\"");
    ok = FALSE;
  }
  ok = ok && plot_breakdown_memory(c, rows, ttl, (char **)vc->pdata, error);
  if (ok && differs(rows, "chips"))
    ok = plot_scaling(c, rows, ttl, error);
  if (ok)
    ok = plot_whatif(c, rows, ttl, (char **)vc->pdata, error);
  if (ok)
    ok = plot_planning(c, rows, ttl, error) && plot_goodput(c, rows, ttl, error);
  for (guint i = 0; i < rows->len; i++)
    g_free(g_array_index(rows, row, i).family);
  g_array_unref(rows);
  g_ptr_array_unref(vc);
  return ok;
}

/* ---- timeline: Gantt chart of one step ------------------------------------------------------ */

static const char *const cat_order[] = {"fwd",     "bwd",     "optimizer",  "comm_tp",
                                        "comm_dp", "comm_pp", "comm_other", "other"};
static const char *const cat_title[] = {"forward",       "backward",    "optimizer",
                                        "comm (tensor)", "comm (data)", "comm (pipeline)",
                                        "comm (other)",  "other"};
static const char *const cat_colour[] = {"#0072B2", "#56B4E9", "#009E73", "#D55E00",
                                         "#E69F00", "#CC79A7", "#999999", "#F0E442"};

typedef struct {
  gint64 pid, tid;
} track;

static gint track_cmp(gconstpointer a, gconstpointer b)
{
  const track *x = a, *y = b;
  if (x->pid != y->pid)
    return x->pid < y->pid ? -1 : 1;
  return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static gboolean plot_timeline(plot_ctx *c, JsonObject *root, GError **error)
{
  JsonArray *ev = json_object_get_array_member(root, "traceEvents");
  GHashTable *pname = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  GHashTable *tname = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GHashTable *prog = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  GArray *tracks = g_array_new(FALSE, FALSE, sizeof(track));
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; i < json_array_get_length(ev); i++) {
    JsonObject *e = json_array_get_object_element(ev, i);
    const char *ph = str(e, "ph");
    gint64 pid = (gint64)num(e, "pid"), tid = (gint64)num(e, "tid"); /* checked: whole */
    if (strcmp(ph, "M") == 0 && strcmp(str(e, "name"), "process_name") == 0) {
      gint64 *k = g_new(gint64, 1);
      *k = pid;
      JsonObject *args = json_object_get_object_member(e, "args");
      g_hash_table_replace(pname, k, (gpointer)str(args, "name"));
      if (json_object_has_member(args, "program")) {
        gint64 *k2 = g_new(gint64, 1);
        *k2 = pid;
        g_hash_table_replace(prog, k2,
                             GINT_TO_POINTER((int)json_object_get_int_member(args, "program") + 1));
      }
    }
    if (strcmp(ph, "M") == 0 && strcmp(str(e, "name"), "thread_name") == 0)
      g_hash_table_replace(tname,
                           g_strdup_printf("%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT, pid, tid),
                           (gpointer)str(json_object_get_object_member(e, "args"), "name"));
    if (strcmp(ph, "X") != 0)
      continue;
    char *key = g_strdup_printf("%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT, pid, tid);
    if (!g_hash_table_contains(seen, key)) {
      track t = {pid, tid};
      g_array_append_val(tracks, t);
      g_hash_table_add(seen, key);
    } else {
      g_free(key);
    }
  }
  g_array_sort(tracks, track_cmp);
  enum { MAX_ROWS = 48 };
  guint ntracks = tracks->len;
  guint nrows = MIN(tracks->len, (guint)MAX_ROWS);
  if (tracks->len > MAX_ROWS) {
    /* Too many to draw: the chips of distinct programs (pipeline stages) first, so every stage
     * shows, then the others in chip order. */
    GHashTable *seen_prog = g_hash_table_new(g_direct_hash, g_direct_equal);
    GHashTable *first_pid = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    for (guint i = 0; i < tracks->len; i++) {
      track *t = &g_array_index(tracks, track, i);
      gpointer pr = g_hash_table_lookup(prog, &t->pid);
      if (pr != NULL && !g_hash_table_contains(seen_prog, pr)) {
        g_hash_table_add(seen_prog, pr);
        gint64 *k = g_new(gint64, 1);
        *k = t->pid;
        g_hash_table_add(first_pid, k);
      }
    }
    GArray *picked = g_array_new(FALSE, FALSE, sizeof(track));
    for (int pass = 0; pass < 2; pass++)
      for (guint i = 0; i < tracks->len && picked->len < (guint)MAX_ROWS; i++) {
        track *t = &g_array_index(tracks, track, i);
        if (g_hash_table_contains(first_pid, &t->pid) == (pass == 0))
          g_array_append_val(picked, *t);
      }
    g_array_sort(picked, track_cmp);
    g_array_set_size(tracks, 0);
    g_array_append_vals(tracks, picked->data, picked->len);
    g_array_unref(picked);
    g_hash_table_unref(seen_prog);
    g_hash_table_unref(first_pid);
  }
  GHashTable *row_of = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GString *rows = g_string_new("# row label\n");
  for (guint i = 0; i < nrows; i++) {
    track *t = &g_array_index(tracks, track, i);
    g_hash_table_insert(row_of,
                        g_strdup_printf("%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT, t->pid, t->tid),
                        GINT_TO_POINTER((int)i + 1));
    const char *pn = g_hash_table_lookup(pname, &t->pid);
    g_autofree char *chip =
        pn != NULL ? g_strdup(pn) : g_strdup_printf("chip %" G_GINT64_FORMAT, t->pid);
    char *paren = strstr(chip, " (");
    if (paren != NULL)
      *paren = '\0';
    g_autofree char *tk = g_strdup_printf("%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT, t->pid, t->tid);
    const char *tn = g_hash_table_lookup(tname, tk);
    g_autofree char *fallback = g_strdup_printf("stream %" G_GINT64_FORMAT, t->tid);
    g_autofree char *lab = g_strdup_printf("%s %s", chip, tn != NULL ? tn : fallback);
    g_string_append_printf(rows, "%u ", i);
    dat_label(rows, lab);
    g_string_append_c(rows, '\n');
  }
  /* Boxes per category; back-to-back spans of one category on one row are merged, so a
   * step of 100 000 ops still draws quickly. */
  GString *blocks[G_N_ELEMENTS(cat_order)];
  double last_end[G_N_ELEMENTS(cat_order)][MAX_ROWS];
  double last_start[G_N_ELEMENTS(cat_order)][MAX_ROWS];
  for (size_t k = 0; k < G_N_ELEMENTS(cat_order); k++) {
    blocks[k] = g_string_new(NULL);
    for (int r = 0; r < MAX_ROWS; r++)
      last_end[k][r] = last_start[k][r] = -1;
  }
  for (guint i = 0; i < json_array_get_length(ev); i++) {
    JsonObject *e = json_array_get_object_element(ev, i);
    if (strcmp(str(e, "ph"), "X") != 0)
      continue;
    g_autofree char *key = g_strdup_printf("%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT,
                                           (gint64)num(e, "pid"), (gint64)num(e, "tid"));
    int r = GPOINTER_TO_INT(g_hash_table_lookup(row_of, key)) - 1;
    if (r < 0)
      continue;
    size_t k = G_N_ELEMENTS(cat_order) - 1;
    for (size_t j = 0; j < G_N_ELEMENTS(cat_order); j++)
      if (strcmp(str(e, "cat"), cat_order[j]) == 0)
        k = j;
    double s = num(e, "ts") / 1000.0, en = s + num(e, "dur") / 1000.0;
    if (last_end[k][r] >= 0 && s <= last_end[k][r] + 1e-9) {
      last_end[k][r] = MAX(last_end[k][r], en);
      continue;
    }
    if (last_end[k][r] >= 0) {
      dat_num(blocks[k], last_start[k][r]);
      dat_num(blocks[k], last_end[k][r]);
      g_string_append_printf(blocks[k], " %d\n", r);
    }
    last_start[k][r] = s;
    last_end[k][r] = en;
  }
  GString *d = g_string_new(NULL), *colours = g_string_new(NULL);
  int nb = 0;
  for (size_t k = 0; k < G_N_ELEMENTS(cat_order); k++) {
    for (int r = 0; r < MAX_ROWS; r++)
      if (last_end[k][r] >= 0) {
        dat_num(blocks[k], last_start[k][r]);
        dat_num(blocks[k], last_end[k][r]);
        g_string_append_printf(blocks[k], " %d\n", r);
      }
    if (blocks[k]->len > 0) {
      if (nb > 0)
        g_string_append(d, "\n\n");
      dat_label(d, cat_title[k]);
      g_string_append_c(d, '\n');
      g_string_append(d, blocks[k]->str);
      g_string_append_printf(colours, "%s%s", nb ? " " : "", cat_colour[k]);
      nb++;
    }
    g_string_free(blocks[k], TRUE);
  }
  JsonObject *od = json_object_has_member(root, "otherData")
                       ? json_object_get_object_member(root, "otherData")
                       : NULL;
  g_autofree char *note =
      od != NULL && strcmp(str(od, "replay"), "collapsed") == 0
          ? g_strdup_printf(", collapsed replay: each chip shown stands for %" G_GINT64_FORMAT,
                            json_object_get_int_member(od, "chips") /
                                MAX(json_object_get_int_member(od, "simulated_chips"), 1))
      : ntracks > nrows
          ? g_strdup_printf(", %u of %u tracks (every pipeline stage first)", nrows, ntracks)
          : g_strdup("");
  g_autofree char *ttl =
      od != NULL ? g_strdup_printf("%s on %s, %s (%s)%s", str(od, "model"), str(od, "topology"),
                                   str(od, "split"), str(od, "placement"), note)
                 : g_strdup("");
  g_autofree char *rows_path = g_strdup_printf("%s/timeline-rows.dat", c->outdir);
  gboolean ok = nb > 0;
  if (!ok)
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "the timeline has no spans to plot");
  if (ok)
    ok = ts_write_file_atomic(rows_path, rows->str, rows->len, error);
  if (ok) {
    g_ptr_array_add(c->written, g_strdup(rows_path));
    GString *vars = g_string_new(NULL);
    gp_str(vars, "ttl", ttl);
    gp_str(vars, "rows", rows_path);
    gp_str(vars, "colours", colours->str);
    g_string_append_printf(vars, "nblocks=%d; nrows=%u; ", nb, nrows);
    ok = render(c, "timeline", d->str, vars->str, error);
    g_string_free(vars, TRUE);
  }
  g_string_free(d, TRUE);
  g_string_free(colours, TRUE);
  g_string_free(rows, TRUE);
  g_hash_table_unref(row_of);
  g_hash_table_unref(seen);
  g_hash_table_unref(pname);
  g_hash_table_unref(tname);
  g_hash_table_unref(prog);
  g_array_unref(tracks);
  return ok;
}

gboolean ts_plot_file(const char *json_path, const char *outdir, GPtrArray *written, GError **error)
{
  if (!ts_plot_gnuplot_available(error))
    return FALSE;
  g_autofree char *pd = plot_dir(error);
  if (pd == NULL)
    return FALSE;
  /* Bounded, and never a device or FIFO (plot /dev/zero allocated 4 GiB, a FIFO hung). A
   * timeline of a large run is tens of MiB: 1 GiB bounds a mistake. */
  g_autofree char *text = NULL;
  gsize len = 0;
  if (!ts_read_input_file(json_path, (gint64)1 << 30, &text, &len, error))
    return FALSE;
  int deep = 0;
  if (!ts_json_depth_ok(text, (gssize)len, TS_JSON_MAX_DEPTH, &deep)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s:%d: JSON nested deeper than %d levels; expected sweep.json, results.json or a "
                "timeline",
                json_path, deep, TS_JSON_MAX_DEPTH);
    return FALSE;
  }
  g_autoptr(JsonParser) p = json_parser_new();
  g_autoptr(GError) e = NULL;
  if (!json_parser_load_from_data(p, text, (gssize)len, &e)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: cannot read as JSON: %s; expected sweep.json, results.json or a timeline",
                json_path, e->message);
    return FALSE;
  }
  g_autofree char *dup = NULL;
  int dup_line = 0;
  if (!ts_json_keys_unique(text, (gssize)len, &dup_line, &dup)) {
    /* json-glib kept the last: an edited results file plotted its second step_time_s. */
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s:%d: key \"%s\" given twice in one object; expected each key once", json_path,
                dup_line, dup);
    return FALSE;
  }
  JsonNode *rn = json_parser_get_root(p);
  JsonObject *root = rn != NULL && JSON_NODE_HOLDS_OBJECT(rn) ? json_node_get_object(rn) : NULL;
  gboolean timeline = root != NULL && json_object_has_member(root, "traceEvents");
  gboolean rows = root != NULL && json_object_has_member(root, "results") &&
                  JSON_NODE_HOLDS_ARRAY(json_object_get_member(root, "results"));
  if (!timeline && !rows) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: neither results nor a timeline; expected sweep.json, run's results.json or "
                "a --timeline file",
                json_path);
    return FALSE;
  }
  if (!(timeline ? check_timeline(root, error) : check_results(root, error))) {
    g_prefix_error(error, "%s: ", json_path);
    return FALSE;
  }
  if (*outdir == '\0') {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--output-dir '': expected a folder name");
    return FALSE;
  }
  if (g_mkdir_with_parents(outdir, 0755) != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot create: %s", outdir, g_strerror(errno));
    return FALSE;
  }
  plot_ctx c = {outdir, pd, written};
  gboolean ok = timeline ? plot_timeline(&c, root, error) : plot_rows(&c, root, error);
  if (!ok)
    g_prefix_error(error, "%s: ", json_path);
  return ok;
}

gboolean ts_plot_accuracy(const char *outdir, const char *dat_text, const char *groups,
                          const char *metric, GPtrArray *written, GError **error)
{
  if (!ts_plot_gnuplot_available(error))
    return FALSE;
  g_autofree char *pd = plot_dir(error);
  if (pd == NULL)
    return FALSE;
  plot_ctx c = {outdir, pd, written};
  GString *vars = g_string_new(NULL);
  gp_str(vars, "groups", groups);
  gp_str(vars, "metric", metric);
  gboolean ok = render(&c, "accuracy", dat_text, vars->str, error);
  g_string_free(vars, TRUE);
  return ok;
}
