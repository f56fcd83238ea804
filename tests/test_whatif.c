/* Tests of the what-if tools as a user runs them: timelines, regression checks, sweeps, shards
 * and merge, split search and plots. Each test can fail: wrong numbers, unstable bytes, a
 * missed drift or a wrong placement. */
#include "ts_util.h"

#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

typedef struct {
  int status;
  char *out, *err;
} run_result;

static run_result run(const char *args)
{
  g_autofree char *cmd = g_strdup_printf("%s %s", TS_TRAINSIM_BIN, args);
  gchar **argv = NULL;
  GError *e = NULL;
  cr_assert(g_shell_parse_argv(cmd, NULL, &argv, &e));
  run_result r = {0};
  int wait = 0;
  cr_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &r.out, &r.err, &wait, &e),
            "%s", e ? e->message : "");
  g_strfreev(argv);
  r.status = WIFEXITED(wait) ? WEXITSTATUS(wait) : 128 + WTERMSIG(wait);
  return r;
}

static void run_free(run_result *r)
{
  g_free(r->out);
  g_free(r->err);
}

static void expect_input_error(const char *args, const char *needle)
{
  run_result r = run(args);
  cr_assert_eq(r.status, 2, "`%s` exited %d, expected 2; stderr: %s", args, r.status, r.err);
  cr_assert(strstr(r.err, needle) != NULL, "`%s`: stderr '%s' lacks '%s'", args, r.err, needle);
  const char *nl = strchr(r.err, '\n');
  cr_assert(nl != NULL && nl[1] == '\0', "`%s`: expected one line, got '%s'", args, r.err);
  run_free(&r);
}

static char *slurp(const char *path)
{
  char *text = NULL;
  GError *e = NULL;
  cr_assert(g_file_get_contents(path, &text, NULL, &e), "%s: %s", path, e ? e->message : "");
  return text;
}

static void rm_rf(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  if (d == NULL)
    return;
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL) {
    g_autofree char *p = g_build_filename(dir, name, NULL);
    if (g_file_test(p, G_FILE_TEST_IS_DIR))
      rm_rf(p);
    else
      g_unlink(p);
  }
  g_dir_close(d);
  g_rmdir(dir);
}

static int count_entries(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  int n = 0;
  if (d == NULL)
    return -1;
  while (g_dir_read_name(d) != NULL)
    n++;
  g_dir_close(d);
  return n;
}

static JsonNode *parse_json(const char *text)
{
  g_autoptr(JsonParser) p = json_parser_new();
  cr_assert(json_parser_load_from_data(p, text, -1, NULL), "not JSON: %.200s", text);
  return json_node_copy(json_parser_get_root(p));
}

/* ---- timelines ------------------------------------------------------------------------ */

#define RUN "run -t tpu-v3-8x8 -m bert-large -b 64 "

/* Checks a Chrome trace-event document: spans of one track never overlap (a stream runs its
 * ops in order), the last span ends at the step time, and tensor-parallel collectives carry
 * their layer's name. Returns the number of chips with a track. */
static int check_timeline(const char *path, double step_s)
{
  g_autofree char *text = slurp(path);
  JsonNode *root = parse_json(text);
  JsonObject *o = json_node_get_object(root);
  JsonArray *ev = json_object_get_array_member(o, "traceEvents");
  GHashTable *last_end = g_hash_table_new(g_int64_hash, g_int64_equal);
  GHashTable *chips = g_hash_table_new(g_direct_hash, g_direct_equal);
  GArray *keys = g_array_new(FALSE, FALSE, sizeof(gint64));
  g_array_set_size(keys, json_array_get_length(ev));
  double max_end = 0;
  int named_coll = 0;
  for (guint i = 0; i < json_array_get_length(ev); i++) {
    JsonObject *e = json_array_get_object_element(ev, i);
    const char *ph = json_object_get_string_member(e, "ph");
    gint64 pid = json_object_get_int_member(e, "pid"), tid = json_object_get_int_member(e, "tid");
    g_hash_table_add(chips, GINT_TO_POINTER((int)pid));
    if (strcmp(ph, "X") != 0)
      continue;
    double ts = json_object_get_double_member(e, "ts"),
           dur = json_object_get_double_member(e, "dur");
    cr_assert(dur >= 0, "negative duration at event %u", i);
    gint64 *key = &g_array_index(keys, gint64, i);
    *key = pid * 64 + tid;
    double *prev = g_hash_table_lookup(last_end, key);
    if (prev != NULL)
      cr_assert(ts >= *prev - 1e-3,
                "event %u starts at %.3f us before the previous span of its "
                "track ends (%.3f us)",
                i, ts, *prev);
    double *end = g_new(double, 1);
    *end = ts + dur;
    g_hash_table_replace(last_end, key, end);
    if (ts + dur > max_end)
      max_end = ts + dur;
    const char *name = json_object_get_string_member(e, "name");
    const char *cat = json_object_get_string_member(e, "cat");
    if (strcmp(cat, "comm_tp") == 0 && strstr(name, "block.") == name &&
        (strstr(name, "all-reduce") || strstr(name, "all-gather")))
      named_coll++;
  }
  double want_us = step_s * 1e6;
  cr_assert(fabs(max_end - want_us) <= 1e-3 + 1e-9 * want_us,
            "timeline ends at %.3f us, step time is %.3f us", max_end, want_us);
  cr_assert_gt(named_coll, 0, "no tensor-parallel collective named by its layer");
  int n = (int)g_hash_table_size(chips);
  g_hash_table_unref(chips);
  g_hash_table_unref(last_end);
  g_array_unref(keys);
  json_node_unref(root);
  return n;
}

static double run_step(const char *args)
{
  run_result r = run(args);
  cr_assert_eq(r.status, 0, "%s: %s", args, r.err);
  JsonNode *root = parse_json(r.out);
  JsonArray *res = json_object_get_array_member(json_node_get_object(root), "results");
  double s = json_object_get_double_member(json_array_get_object_element(res, 0), "step_time_s");
  json_node_unref(root);
  run_free(&r);
  return s;
}

Test(timeline, spans_end_at_step_time_and_name_layers)
{
  g_autofree char *dir = g_dir_make_tmp("ts-whatif-XXXXXX", NULL);
  g_autofree char *a = g_build_filename(dir, "a.json", NULL);
  g_autofree char *b = g_build_filename(dir, "b.json", NULL);
  g_autofree char *c = g_build_filename(dir, "full.json", NULL);
  double step = run_step(RUN "-s tp=8,dp=8 --format json");
  g_autofree char *args = g_strdup_printf(RUN "-s tp=8,dp=8 --format json --timeline %s", a);
  cr_assert_eq(run_step(args), step, "a timeline must not change the prediction");
  int n = check_timeline(a, step);
  cr_assert_eq(n, 1, "collapsed replay of tp=8,dp=8: expected 1 simulated chip, got %d", n);
  g_autofree char *text = slurp(a);
  cr_assert(strstr(text, "\"replay\":\"collapsed\"") &&
                strstr(text, "\"simulated_chip_ids\":\"0\""),
            "collapsed metadata missing");
  /* Same inputs, same bytes. */
  g_autofree char *args_b = g_strdup_printf(RUN "-s tp=8,dp=8 --timeline %s", b);
  run_result rb = run(args_b);
  cr_assert_eq(rb.status, 0, "%s", rb.err);
  g_autofree char *tb = slurp(b);
  cr_assert_str_eq(text, tb, "two timelines of the same run differ");
  /* --full: one track per chip, same step. */
  g_autofree char *args_c = g_strdup_printf(RUN "-s tp=8,dp=8 --full --timeline %s", c);
  run_result rc = run(args_c);
  cr_assert_eq(rc.status, 0, "%s", rc.err);
  int nf = check_timeline(c, step);
  cr_assert_eq(nf, 64, "full replay: expected 64 chip tracks, got %d", nf);
  run_free(&rb);
  run_free(&rc);
  rm_rf(dir);
}

Test(timeline, needs_one_split_and_leaves_nothing_on_error)
{
  g_autofree char *dir = g_dir_make_tmp("ts-whatif-XXXXXX", NULL);
  g_autofree char *p = g_build_filename(dir, "t.json", NULL);
  g_autofree char *a = g_strdup_printf(RUN "--timeline %s", p);
  expect_input_error(a, "expected exactly one --split");
  g_autofree char *b = g_strdup_printf(RUN "-s dp=64 -s tp=8 --timeline %s", p);
  expect_input_error(b, "expected exactly one --split");
  g_autofree char *c = g_strdup_printf(RUN "-s dp=7 --timeline %s", p);
  expect_input_error(c, "uses 7 chips");
  int n = count_entries(dir);
  cr_assert_eq(n, 0, "a failed run left %d files", n);
  rm_rf(dir);
}
