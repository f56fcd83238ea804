/* cmd_merge: `trainsim merge SHARD_DIR...`, combines the outputs of `sweep --shard i/n` into
 * the files one unsharded sweep would have written, byte for byte. */
#include "ts_cmd.h"
#include "ts_sweep.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  gint64 config;
  char *line; /* borrowed from the shard's CSV text */
} csv_row;

typedef struct {
  gint64 config;
  JsonNode *node; /* borrowed from the shard's parsed document */
} json_row;

/* Where a result ran, as sweep's summary says it: the topology's description, or "NAME
 * resized to ARRAY (N chips)" when --vary dims changed its array. The topology is loaded from
 * the sweep's spec by name; when none loads (moved since), its name and chip count. */
static char *result_where(JsonObject *spec, JsonObject *r)
{
  const char *name = json_object_get_string_member_with_default(r, "topology", "?");
  const char *array = json_object_get_string_member_with_default(r, "array", "");
  gint64 chips = json_object_get_int_member_with_default(r, "chips", 0);
  JsonArray *tl = json_object_get_array_member(spec, "topologies");
  for (guint i = 0; tl != NULL && i < json_array_get_length(tl); i++) {
    g_autoptr(ts_topo) t = ts_cmd_load_topo(json_array_get_string_element(tl, i), NULL, NULL);
    if (t == NULL || strcmp(t->name, name) != 0)
      continue;
    g_autofree char *shape = ts_topo_shape_text(t);
    if (strcmp(shape, array) == 0)
      return ts_topo_describe(t);
    break;
  }
  if (*array != '\0')
    return g_strdup_printf("%s resized to %s (%" G_GINT64_FORMAT " chip%s)", name, array, chips,
                           chips == 1 ? "" : "s");
  return g_strdup_printf("%s (%" G_GINT64_FORMAT " chip%s)", name, chips, chips == 1 ? "" : "s");
}

/* The summary an unsharded sweep prints: its counts and the fastest result that fits (the
 * first of equal steps in configuration order, as sweep picks it). */
static void print_summary(JsonObject *spec, gint64 total, GPtrArray *results, guint nskipped)
{
  printf("sweep: %" G_GINT64_FORMAT " configuration%s: %u predicted, %u skipped (reasons in "
         "sweep.json)\n",
         total, total == 1 ? "" : "s", results->len, nskipped);
  JsonObject *best = NULL;
  for (guint i = 0; i < results->len; i++) {
    JsonObject *r = json_node_get_object(g_ptr_array_index(results, i));
    if (json_object_get_boolean_member_with_default(r, "fits_memory", FALSE) &&
        (best == NULL || json_object_get_double_member(r, "step_time_s") <
                             json_object_get_double_member(best, "step_time_s")))
      best = r;
  }
  if (best == NULL)
    return;
  char t[32];
  g_autofree char *where = result_where(spec, best);
  printf("fastest that fits: %s (%s), %s on %s, global batch %" G_GINT64_FORMAT ": %s per step\n",
         json_object_get_string_member_with_default(best, "split", "?"),
         json_object_get_string_member_with_default(best, "placement", "?"),
         json_object_get_string_member_with_default(best, "model", "?"), where,
         json_object_get_int_member_with_default(best, "global_batch", 0),
         ts_fmt_time(t, sizeof t, json_object_get_double_member(best, "step_time_s")));
}

static gint by_config_csv(gconstpointer a, gconstpointer b)
{
  gint64 x = ((const csv_row *)a)->config, y = ((const csv_row *)b)->config;
  return x < y ? -1 : x > y;
}

static gint by_config_json(gconstpointer a, gconstpointer b)
{
  gint64 x = ((const json_row *)a)->config, y = ((const json_row *)b)->config;
  return x < y ? -1 : x > y;
}

static char *compact(JsonNode *n)
{
  g_autoptr(JsonGenerator) g = json_generator_new();
  json_generator_set_root(g, n);
  return json_generator_to_data(g, NULL);
}

typedef struct {
  char *dir, *json_path, *csv_path;
  char *csv_text;
  JsonParser *parser;
  JsonObject *root;
  gint64 index, count;
} shard;

static void shard_clear(gpointer p)
{
  shard *s = p;
  g_free(s->dir);
  g_free(s->json_path);
  g_free(s->csv_path);
  g_free(s->csv_text);
  if (s->parser)
    g_object_unref(s->parser);
}

static gboolean load_shard(const char *dir, shard *s, GError **error)
{
  memset(s, 0, sizeof *s);
  s->dir = g_strdup(dir);
  s->json_path = g_build_filename(dir, "sweep.json", NULL);
  s->csv_path = g_build_filename(dir, "sweep.csv", NULL);
  g_autoptr(GError) e = NULL;
  g_autofree char *jt = NULL;
  /* Regular files only, at most 1 GiB each (a FIFO or device would hang or never end). */
  if (!ts_read_input_file(s->json_path, (gint64)1 << 30, &jt, NULL, &e) ||
      !ts_read_input_file(s->csv_path, (gint64)1 << 30, &s->csv_text, NULL, &e)) {
    g_set_error(error, TS_ERROR, e->code == TS_ERROR_IO ? TS_ERROR_IO : TS_ERROR_INPUT,
                "%s; expected a folder written by trainsim sweep --shard i/n", e->message);
    return FALSE;
  }
  int deep = 0;
  if (!ts_json_depth_ok(jt, -1, TS_JSON_MAX_DEPTH, &deep)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s:%d: JSON nested deeper than %d levels; expected sweep.json written by trainsim "
                "sweep",
                s->json_path, deep, TS_JSON_MAX_DEPTH);
    return FALSE;
  }
  s->parser = json_parser_new();
  JsonNode *root =
      json_parser_load_from_data(s->parser, jt, -1, &e) ? json_parser_get_root(s->parser) : NULL;
  g_autofree char *dup = NULL;
  int dup_line = 0;
  if (root != NULL && !ts_json_keys_unique(jt, -1, &dup_line, &dup)) {
    /* json-glib keeps the last of two: a shard edited by hand merged its second value. */
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s:%d: key \"%s\" given twice in one object; expected each key once", s->json_path,
                dup_line, dup);
    return FALSE;
  }
  s->root = root != NULL && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
  JsonObject *sh = s->root != NULL && json_object_has_member(s->root, "shard")
                       ? json_object_get_object_member(s->root, "shard")
                       : NULL;
  if (s->root == NULL || !json_object_has_member(s->root, "sweep") ||
      !json_object_has_member(s->root, "results") || !json_object_has_member(s->root, "skipped")) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: not a sweep document; expected sweep.json written by trainsim sweep",
                s->json_path);
    return FALSE;
  }
  if (sh == NULL || !json_object_has_member(sh, "index") || !json_object_has_member(sh, "count")) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: not a shard (no \"shard\" member); expected the output of trainsim sweep "
                "--shard i/n",
                s->json_path);
    return FALSE;
  }
  s->index = json_object_get_int_member(sh, "index");
  s->count = json_object_get_int_member(sh, "count");
  if (s->count < 1 || s->count > 1000000) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: shard count %" G_GINT64_FORMAT ": expected a count in [1, 1000000]",
                s->json_path, s->count);
    return FALSE;
  }
  return TRUE;
}

int ts_cmd_merge(int argc, char **argv)
{
  g_autofree char *outdir = NULL;
  GOptionEntry entries[] = {{"output-dir", 'o', 0, G_OPTION_ARG_FILENAME, &outdir,
                             "Write the merged sweep.csv and sweep.json here (atomically)", "DIR"},
                            {NULL}};
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse("merge", "SHARD_DIR...",
                    "Combines the outputs of trainsim sweep --shard i/n (every shard of one "
                    "sweep) into the files one unsharded sweep writes.",
                    "Example:\n  trainsim sweep -t tpu-v3-8x8 -m bert-large -b 512 --splits auto "
                    "--shard 0/2 -o s0\n  trainsim sweep -t tpu-v3-8x8 -m bert-large -b 512 "
                    "--splits auto --shard 1/2 -o s1\n  trainsim merge s0 s1 -o all",
                    entries, &argc, &argv, &err))
    return ts_cmd_fail("merge", err);
  if (argc < 2 || outdir == NULL) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "missing %s; expected SHARD_DIR... --output-dir DIR",
                argc < 2 ? "shard folders" : "--output-dir");
    return ts_cmd_fail("merge", err);
  }
  GArray *shards = g_array_new(FALSE, TRUE, sizeof(shard));
  g_array_set_clear_func(shards, shard_clear);
  int status = 0;
  for (int i = 1; i < argc && status == 0; i++) {
    shard s;
    if (!load_shard(argv[i], &s, &err)) {
      shard_clear(&s);
      status = ts_cmd_fail("merge", err);
    } else {
      g_array_append_val(shards, s);
    }
  }
  if (status != 0) {
    g_array_unref(shards);
    return status;
  }
  /* Every shard must come from the same sweep: same version, same spec, same count. */
  shard *s0 = &g_array_index(shards, shard, 0);
  g_autofree char *spec0 = compact(json_object_get_member(s0->root, "sweep"));
  const char *ver0 = json_object_get_string_member(s0->root, "trainsim_version");
  const char *nl0 = strchr(s0->csv_text, '\n');
  gsize head_len = nl0 != NULL ? (gsize)(nl0 - s0->csv_text) : strlen(s0->csv_text);
  gint64 n = s0->count;
  gboolean *have = g_new0(gboolean, n);
  GArray *csv = g_array_new(FALSE, FALSE, sizeof(csv_row));
  GArray *res = g_array_new(FALSE, FALSE, sizeof(json_row));
  GArray *skp = g_array_new(FALSE, FALSE, sizeof(json_row));
  for (guint i = 0; i < shards->len && status == 0; i++) {
    shard *s = &g_array_index(shards, shard, i);
    g_autofree char *spec = compact(json_object_get_member(s->root, "sweep"));
    const char *ver = json_object_get_string_member(s->root, "trainsim_version");
    if (strcmp(spec, spec0) != 0 || g_strcmp0(ver, ver0) != 0 || s->count != n) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "%s: a shard of a different sweep than %s (%s differs); expected shards of "
                  "one sweep",
                  s->json_path, s0->json_path,
                  s->count != n               ? "shard count"
                  : g_strcmp0(ver, ver0) != 0 ? "trainsim version"
                                              : "the \"sweep\" spec");
      status = ts_cmd_fail("merge", err);
      break;
    }
    if (s->index < 0 || s->index >= n || have[s->index]) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "%s: shard %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT " %s; expected each shard "
                  "once",
                  s->json_path, s->index, n,
                  s->index >= 0 && s->index < n ? "given twice" : "out of range");
      status = ts_cmd_fail("merge", err);
      break;
    }
    have[s->index] = TRUE;
    if (strncmp(s->csv_text, s0->csv_text, head_len + 1) != 0) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "%s: CSV columns differ from %s; expected shards of one sweep", s->csv_path,
                  s0->csv_path);
      status = ts_cmd_fail("merge", err);
      break;
    }
    /* CSV rows start with their configuration index. */
    char *p = strchr(s->csv_text, '\n');
    int nrows = 0;
    while (p != NULL && p[1] != '\0') {
      char *line = p + 1;
      p = strchr(line, '\n');
      char *end = NULL;
      csv_row r = {g_ascii_strtoll(line, &end, 10), line};
      if (end == line || *end != ',') {
        g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                    "%s:%d: expected a row starting with its configuration index", s->csv_path,
                    nrows + 2);
        status = ts_cmd_fail("merge", err);
        break;
      }
      if (p != NULL)
        *p = '\0'; /* the text is ours: cut it into lines */
      g_array_append_val(csv, r);
      nrows++;
      if (p == NULL)
        break;
    }
    JsonArray *rs = json_object_get_array_member(s->root, "results");
    JsonArray *sk = json_object_get_array_member(s->root, "skipped");
    if (status == 0 && (int)json_array_get_length(rs) != nrows) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "%s: %d rows but %s has %u results; expected the two files of one shard",
                  s->csv_path, nrows, s->json_path, json_array_get_length(rs));
      status = ts_cmd_fail("merge", err);
    }
    for (guint k = 0; k < json_array_get_length(rs); k++) {
      JsonNode *node = json_array_get_element(rs, k);
      json_row r = {json_object_get_int_member(json_node_get_object(node), "config"), node};
      g_array_append_val(res, r);
    }
    for (guint k = 0; k < json_array_get_length(sk); k++) {
      JsonNode *node = json_array_get_element(sk, k);
      json_row r = {json_object_get_int_member(json_node_get_object(node), "config"), node};
      g_array_append_val(skp, r);
    }
  }
  if (status == 0) {
    GString *missing = g_string_new(NULL);
    int nmissing = 0;
    for (gint64 i = 0; i < n; i++)
      if (!have[i] && nmissing++ < 8)
        g_string_append_printf(missing, "%s%" G_GINT64_FORMAT, missing->len ? ", " : "", i);
    if (nmissing > 0) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "%d of %" G_GINT64_FORMAT
                  " shards missing (%s%s); expected every shard i/%" G_GINT64_FORMAT,
                  nmissing, n, missing->str, nmissing > 8 ? ", ..." : "", n);
      status = ts_cmd_fail("merge", err);
    }
    g_string_free(missing, TRUE);
  }
  gint64 total = json_object_get_int_member(json_object_get_object_member(s0->root, "sweep"),
                                            "configurations");
  if (status == 0 && (gint64)(res->len + skp->len) != total) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "the shards hold %u configurations but the sweep has %" G_GINT64_FORMAT
                "; expected complete shards",
                res->len + skp->len, total);
    status = ts_cmd_fail("merge", err);
  }
  if (status == 0 && !ts_cmd_prepare_dir(outdir, &err))
    status = ts_cmd_fail("merge", err);
  if (status == 0) {
    g_array_sort(csv, by_config_csv);
    g_array_sort(res, by_config_json);
    g_array_sort(skp, by_config_json);
    GString *ct = g_string_new_len(s0->csv_text, (gssize)head_len + 1);
    for (guint i = 0; i < csv->len; i++)
      g_string_append_printf(ct, "%s\n", g_array_index(csv, csv_row, i).line);
    g_autoptr(GPtrArray) rn = g_ptr_array_new();
    g_autoptr(GPtrArray) sn = g_ptr_array_new();
    for (guint i = 0; i < res->len; i++)
      g_ptr_array_add(rn, g_array_index(res, json_row, i).node);
    for (guint i = 0; i < skp->len; i++)
      g_ptr_array_add(sn, g_array_index(skp, json_row, i).node);
    g_autofree char *doc =
        ts_sweep_document(json_object_get_member(s0->root, "sweep"), 0, 0, rn, sn);
    g_autofree char *pc = g_build_filename(outdir, "sweep.csv", NULL);
    g_autofree char *pj = g_build_filename(outdir, "sweep.json", NULL);
    const char *names[] = {"sweep.csv", "sweep.json"};
    const char *texts[] = {ct->str, doc};
    if (!ts_write_set(outdir, names, texts, 2, "merge", &err)) {
      status = ts_cmd_fail("merge", err);
    } else {
      /* Streams: results on stdout, notes of files written on stderr (every command). The
       * summary reads as the unsharded sweep's (it printed none: no "fastest that fits"). */
      print_summary(json_object_get_object_member(s0->root, "sweep"), total, rn, skp->len);
      fprintf(stderr, "trainsim merge: %u shards, %u results, %u skipped; wrote %s and %s\n",
              shards->len, res->len, skp->len, pc, pj);
    }
    g_string_free(ct, TRUE);
  }
  g_free(have);
  g_array_unref(csv);
  g_array_unref(res);
  g_array_unref(skp);
  g_array_unref(shards);
  return status;
}
