/* Tests of the split enumeration behind `search` and `sweep --splits auto` (ts_splits_auto):
 * FSDP2 (zero=3,fsdp2, with hybrid sharding across nodes) and context parallelism are
 * candidates exactly where they are allowed, the list of a small case is pinned, no placement is
 * listed twice, and search's best is the fastest candidate and predicts what `run` predicts. */
#include "ts_plan.h"
#include "ts_sweep.h"

#include "ts_test.h"
#include <criterion/criterion.h>
#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

/* ts_splits_auto of a model (models/NAME.ini or a path under the source tree) on a shipped
 * topology, one micro-batch, as `sweep --splits auto` calls it. */
static GPtrArray *auto_splits(const char *model, const char *topo, gint64 batch)
{
  g_autofree char *path = strchr(model, '/') != NULL
                              ? g_strdup_printf("%s/%s", TS_SOURCE_DIR, model)
                              : g_strdup_printf("%s/models/%s.ini", TS_SOURCE_DIR, model);
  g_autoptr(GError) err = NULL;
  g_autoptr(ts_model) m = ts_model_load(path, &err);
  cr_assert_not_null(m, "%s", err ? err->message : "");
  g_autoptr(ts_topo) t = load_topo(topo);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  po.micro_batch = 1;
  ts_auto_options ao = {0};
  GPtrArray *s = ts_splits_auto(m, t, &po, &ao);
  cr_assert_gt(s->len, 0u, "%s on %s: no split", model, topo);
  return s;
}

static int count_with(const GPtrArray *s, const char *needle)
{
  int n = 0;
  for (guint i = 0; i < s->len; i++)
    n += strstr(g_ptr_array_index(s, i), needle) != NULL;
  return n;
}

/* Every fsdp2 split follows its zero=3 twin (the same axes and placement): FSDP2 is tried
 * where ZeRO-3 is, after it, and a hybrid-sharded (shard=N) fsdp2 split follows its fsdp2 one. */
static void expect_fsdp2_after_zero3(const GPtrArray *s)
{
  for (guint i = 0; i < s->len; i++) {
    const char *sp = g_ptr_array_index(s, i);
    const char *f = strstr(sp, ",zero=3,fsdp2");
    if (f == NULL)
      continue;
    cr_assert_gt(i, 0u, "%s listed first", sp);
    const char *prev = g_ptr_array_index(s, i - 1);
    g_autofree char *twin = strstr(sp, ",shard=") != NULL
                                ? g_strndup(sp, (gsize)(strstr(sp, ",shard=") - sp))
                                : g_strndup(sp, (gsize)(f - sp) + strlen(",zero=3"));
    cr_assert_str_eq(prev, twin, "%s follows %s, expected %s", sp, prev, twin);
  }
}

Test(search, small_case_lists_fsdp2_after_every_zero3_split_and_no_cp)
{
  /* GPT-3 350M on one DGX A100 (8 GPUs), 8 samples: a sample fits a chip and every chip gets
   * one, so cp is not tried; every split with dp > 1 has ZeRO 0-3 and FSDP2; the one dimension
   * leaves no hybrid sharding. The whole list, in enumeration order. */
  const char *want = /* one split a line would be 34 lines: space-separated */
      "dp=8@node dp=8@node,zero=1 dp=8@node,zero=2 dp=8@node,zero=3 dp=8@node,zero=3,fsdp2 "
      "dp=4@node,pp=2@node dp=4@node,pp=2@node,zero=1 dp=4@node,pp=2@node,zero=2 "
      "dp=4@node,pp=2@node,zero=3 dp=4@node,pp=2@node,zero=3,fsdp2 dp=2@node,pp=4@node "
      "dp=2@node,pp=4@node,zero=1 dp=2@node,pp=4@node,zero=2 dp=2@node,pp=4@node,zero=3 "
      "dp=2@node,pp=4@node,zero=3,fsdp2 pp=8@node tp=2@node,dp=4@node "
      "tp=2@node,dp=4@node,zero=1 tp=2@node,dp=4@node,zero=2 tp=2@node,dp=4@node,zero=3 "
      "tp=2@node,dp=4@node,zero=3,fsdp2 tp=2@node,dp=2@node,pp=2@node "
      "tp=2@node,dp=2@node,pp=2@node,zero=1 tp=2@node,dp=2@node,pp=2@node,zero=2 "
      "tp=2@node,dp=2@node,pp=2@node,zero=3 tp=2@node,dp=2@node,pp=2@node,zero=3,fsdp2 "
      "tp=2@node,pp=4@node tp=4@node,dp=2@node tp=4@node,dp=2@node,zero=1 "
      "tp=4@node,dp=2@node,zero=2 tp=4@node,dp=2@node,zero=3 "
      "tp=4@node,dp=2@node,zero=3,fsdp2 tp=4@node,pp=2@node tp=8@node";
  g_autoptr(GPtrArray) s = auto_splits("gpt3-350m", "dgx-a100-1node", 8);
  g_autoptr(GString) got = g_string_new(NULL);
  for (guint i = 0; i < s->len; i++)
    g_string_append_printf(got, "%s%s", i ? " " : "", (char *)g_ptr_array_index(s, i));
  cr_assert_str_eq(got->str, want);
  expect_fsdp2_after_zero3(s);
}

/* The largest cp degree among the splits (1 when none has cp). */
static int max_cp(const GPtrArray *s)
{
  int m = 1;
  for (guint i = 0; i < s->len; i++) {
    const char *c = strstr(g_ptr_array_index(s, i), "cp=");
    if (c != NULL)
      m = MAX(m, atoi(c + 3));
  }
  return m;
}

Test(search, cp_is_tried_when_a_sample_does_not_fit_and_chunks_stay_long)
{
  /* Llama 3.1 8B on 32 H100s, one sample per chip. At 8,192 tokens a sample fits a chip (no
   * cp). At 32,768 and 65,536 tokens it does not (199 and 392 GiB with every state sharded), so
   * cp is tried, at the degrees that leave a rank >= 8,192 tokens: up to 4, and up to 8. */
  g_autoptr(GPtrArray) s8k = auto_splits("llama3-8b", "dgx-h100-4node", 32);
  g_autoptr(GPtrArray) s32k = auto_splits(
      "data/published/torchtitan/models/llama3.1-8b-seq32768.ini", "dgx-h100-4node", 32);
  g_autoptr(GPtrArray) s64k = auto_splits(
      "data/published/torchtitan/models/llama3.1-8b-seq65536.ini", "dgx-h100-4node", 32);
  int c8 = max_cp(s8k), c32 = max_cp(s32k), c64 = max_cp(s64k);
  cr_assert_eq(c8, 1, "cp=%d at 8K tokens", c8);
  cr_assert_eq(c32, 4, "largest cp %d at 32K tokens, expected 4", c32);
  cr_assert_eq(c64, 8, "largest cp %d at 64K tokens, expected 8", c64);
  /* Llama 3 70B at 8,192 tokens does not fit a chip a sample either, but cp 2 would leave
   * 4,096 tokens a rank: not tried (Llama 3's 8K pre-training ran cp 1). */
  g_autoptr(GPtrArray) s70 = auto_splits("llama3-70b", "dgx-h100-4node", 32);
  int c70 = max_cp(s70);
  cr_assert_eq(c70, 1, "cp=%d for 70B at 8K tokens", c70);
  /* Hybrid sharding with FSDP2 across the nodes (HSDP): dp over node+net shards inside a node. */
  cr_assert_gt(count_with(s8k, "dp=32@node+net,zero=3,fsdp2,shard=8"), 0, "no HSDP split");
  expect_fsdp2_after_zero3(s8k);
  expect_fsdp2_after_zero3(s64k);
  /* With --vary-options every cp degree 2s/cp divides is tried, as before. */
  g_autoptr(ts_model) m = load_model("gpt3-350m");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 8;
  po.micro_batch = 1;
  ts_auto_options ao = {0};
  ao.vary_options = TRUE;
  g_autoptr(GPtrArray) vo = ts_splits_auto(m, t, &po, &ao);
  int cvo = max_cp(vo);
  cr_assert_eq(cvo, 8, "largest cp %d with vary_options, expected 8", cvo);
}

Test(search, fsdp2_and_cp_are_not_tried_where_refused)
{
  /* A TPU runs XLA, which refuses fsdp2 (PyTorch's allocation): no fsdp2 split, though ZeRO-3
   * is there; cp is (TPU v2-8: 4 chips of 8 GiB, a 64K-token sample does not fit). An MLP has
   * no sequence: no cp. */
  g_autoptr(GPtrArray) tpu =
      auto_splits("data/published/torchtitan/models/llama3.1-8b-seq65536.ini", "tpu-v2-8", 4);
  int f = count_with(tpu, "fsdp2"), z = count_with(tpu, "zero=3"), c = max_cp(tpu);
  cr_assert_eq(f, 0, "%d fsdp2 splits on a TPU", f);
  cr_assert_gt(z, 0);
  cr_assert_eq(c, 4, "largest cp %d on the TPU, expected 4", c);
  g_autoptr(GPtrArray) mlp = auto_splits("mlp", "dgx-a100-1node", 8);
  int cm = count_with(mlp, "cp="), fm = count_with(mlp, "fsdp2");
  cr_assert_eq(cm, 0, "%d cp splits of a model without a sequence", cm);
  cr_assert_gt(fm, 0, "FSDP2 shards any PyTorch model");
}

Test(search, no_placement_is_listed_twice)
{
  /* Each split planned: its canonical text and placement, with its options, appear once (the
   * deduplication by group shapes holds for the fsdp2 and cp splits too). */
  const char *path = "data/published/torchtitan/models/llama3.1-8b-seq65536.ini";
  g_autofree char *full = g_strdup_printf("%s/%s", TS_SOURCE_DIR, path);
  g_autoptr(ts_model) m = ts_model_load(full, NULL);
  cr_assert_not_null(m);
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(GPtrArray) s = auto_splits(path, "dgx-h100-4node", 16);
  cr_assert_gt(count_with(s, "cp="), 0);
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 16;
  po.micro_batch = 1;
  for (guint i = 0; i < s->len; i++) {
    g_autoptr(ts_split) sp = ts_split_parse(g_ptr_array_index(s, i), NULL);
    cr_assert_not_null(sp);
    g_autoptr(ts_plan) p = ts_plan_new(m, t, sp, &po, NULL);
    cr_assert_not_null(p, "%s does not plan", (char *)g_ptr_array_index(s, i));
    char *key = g_strdup_printf("%s %s", p->split_text, p->placement_text);
    cr_assert(!g_hash_table_contains(seen, key), "%s listed twice", key);
    g_hash_table_add(seen, key);
  }
}

static double member_double(JsonObject *o, const char *k)
{
  return json_object_get_double_member(o, k);
}

Test(search, best_is_the_fastest_candidate_and_run_predicts_it_exactly)
{
  /* GPT-3 350M at 65,536 tokens: a sample does not fit an A100, so cp is tried with fsdp2. */
  g_autofree char *dir = g_dir_make_tmp("ts-search-XXXXXX", NULL);
  g_autofree char *src = g_strdup_printf("%s/models/gpt3-350m.ini", TS_SOURCE_DIR);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(src, &text, NULL, NULL));
  g_autoptr(GRegex) re = g_regex_new("^sequence = [0-9]+", G_REGEX_MULTILINE, 0, NULL);
  g_autofree char *longer = g_regex_replace_literal(re, text, -1, 0, "sequence = 65536", 0, NULL);
  cr_assert(strcmp(longer, text) != 0, "no sequence key in %s", src);
  g_autofree char *model = g_build_filename(dir, "gpt3-350m-64k.ini", NULL);
  cr_assert(g_file_set_contents(model, longer, -1, NULL));
  g_autofree char *out = g_build_filename(dir, "out", NULL);
  g_autofree char *args = g_strdup_printf(
      "search -t dgx-a100-1node -m %s -b 4 --micro-batch 1 -k 100 -j 1 -f json -o %s", model, out);
  run_result r = run(args);
  cr_assert_eq(r.status, 0, "%s", r.err);
  g_autoptr(JsonParser) jp = json_parser_new();
  cr_assert(json_parser_load_from_data(jp, r.out, -1, NULL));
  JsonObject *o = json_node_get_object(json_parser_get_root(jp));
  JsonObject *best = json_array_get_object_element(json_object_get_array_member(o, "ranked"), 0);
  double best_s = member_double(best, "step_time_s");
  g_autofree char *split = g_strdup(json_object_get_string_member(best, "split_arg"));
  /* The minimum over every candidate that fits (candidates.json). */
  g_autofree char *cpath = g_build_filename(out, "candidates.json", NULL);
  g_autoptr(JsonParser) cp = json_parser_new();
  cr_assert(json_parser_load_from_file(cp, cpath, NULL));
  JsonArray *res =
      json_object_get_array_member(json_node_get_object(json_parser_get_root(cp)), "results");
  double min_s = G_MAXDOUBLE;
  gboolean saw_fsdp2 = FALSE, saw_cp = FALSE;
  for (guint i = 0; i < json_array_get_length(res); i++) {
    JsonObject *c = json_array_get_object_element(res, i);
    const char *sa = json_object_get_string_member(c, "split_arg");
    saw_fsdp2 |= strstr(sa, "fsdp2") != NULL;
    saw_cp |= strstr(sa, "cp=") != NULL;
    if (json_object_get_boolean_member(c, "fits_memory") && member_double(c, "step_time_s") < min_s)
      min_s = member_double(c, "step_time_s");
  }
  cr_assert(saw_fsdp2 && saw_cp, "fsdp2 (%d) and cp (%d) candidates replayed", saw_fsdp2, saw_cp);
  cr_assert_eq(best_s, min_s, "best %.17g s, fastest candidate %.17g s", best_s, min_s);
  run_free(&r);
  /* run of the best split gives the same step, to the bit. */
  g_autofree char *rargs = g_strdup_printf(
      "run -t dgx-a100-1node -m %s -b 4 --micro-batch 1 -s %s -f json", model, split);
  r = run(rargs);
  cr_assert_eq(r.status, 0, "%s", r.err);
  g_autoptr(JsonParser) rp = json_parser_new();
  cr_assert(json_parser_load_from_data(rp, r.out, -1, NULL));
  JsonObject *ro = json_node_get_object(json_parser_get_root(rp));
  JsonObject *r0 = json_array_get_object_element(json_object_get_array_member(ro, "results"), 0);
  double run_s = member_double(r0, "step_time_s");
  cr_assert_eq(run_s, best_s, "run %.17g s, search %.17g s for %s", run_s, best_s, split);
  run_free(&r);
  g_autofree char *rm = g_strdup_printf("rm -rf %s", dir);
  cr_assert_eq(system(rm), 0);
}
