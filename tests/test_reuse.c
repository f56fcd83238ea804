/* Tests of trace reuse across placements (issue 15): a sweep builds each split's trace once and
 * re-places it for the split's other placements (ts_plan_trace_key, ts_plan_trace_replace). The
 * re-placed trace must be the one ts_plan_trace builds for that placement, op for op, and a
 * sweep through the pool must predict what each configuration predicts alone, to the bit. */
#include "ts_coll.h"
#include "ts_degrade.h"
#include "ts_plan.h"
#include "ts_pool.h"
#include "ts_run.h"
#include "ts_sweep.h"
#include "ts_trace.h"

#include "ts_test.h"
#include "ts_util.h"
#include <criterion/criterion.h>
#include <string.h>

/* The trace's text and its distinct collectives (not in the text: coll_id numbering). */
static char *trace_fingerprint(const ts_trace *tr)
{
  GString *s = g_string_new(NULL);
  g_autofree char *text = ts_trace_to_text(tr);
  g_string_append(s, text);
  for (guint i = 0; tr->colls != NULL && i < tr->colls->len; i++) {
    const ts_coll_desc *d = &g_array_index(tr->colls, ts_coll_desc, i);
    g_string_append_printf(s, "coll %u %d %d %d %a\n", i, d->group, (int)d->coll, (int)d->algo,
                           d->bytes);
  }
  return g_string_free(s, FALSE);
}

/* Every split ts_splits_auto gives (all placements), grouped by trace key: each member's trace,
 * re-placed from the group's first, equals the trace built for it; then back to the first.
 * Returns the number of re-placements checked. */
static int check_auto_splits(const char *model, const char *topo, gint64 batch, gint64 micro,
                             gboolean vary_options, int max_configs)
{
  g_autoptr(ts_model) m = load_model(model);
  g_autoptr(ts_topo) t = load_topo(topo);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  po.micro_batch = micro;
  ts_auto_options ao = {0};
  ao.all_placements = TRUE;
  ao.vary_options = vary_options;
  ao.max_configs = max_configs;
  g_autoptr(GPtrArray) splits = ts_splits_auto(m, t, &po, &ao);
  cr_assert_gt(splits->len, 0u, "%s on %s: no split", model, topo);
  g_autoptr(GHashTable) first =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)ts_trace_free);
  g_autoptr(GHashTable) first_split = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  int checked = 0;
  for (guint i = 0; i < splits->len; i++) {
    const char *split = g_ptr_array_index(splits, i);
    g_autoptr(ts_plan) p = make_plan(m, t, split, batch, micro);
    char *key = ts_plan_trace_key(p);
    if (key == NULL)
      continue;
    ts_trace *kept = g_hash_table_lookup(first, key);
    if (kept == NULL) {
      g_autoptr(GError) err = NULL;
      ts_trace *tr = ts_plan_trace(p, &err);
      cr_assert_not_null(tr, "%s: %s", split, err ? err->message : "");
      g_hash_table_insert(first_split, g_strdup(key), (gpointer)split);
      g_hash_table_insert(first, key, tr);
      continue;
    }
    g_autoptr(GError) err = NULL;
    g_autoptr(ts_trace) fresh = ts_plan_trace(p, &err);
    cr_assert_not_null(fresh, "%s: %s", split, err ? err->message : "");
    cr_assert(ts_plan_trace_replace(p, kept, &err), "%s: %s", split, err ? err->message : "");
    g_autofree char *want = trace_fingerprint(fresh);
    g_autofree char *got = trace_fingerprint(kept);
    cr_assert_str_eq(got, want, "%s: the re-placed trace differs from the one built for it", split);
    /* And back to the placement it was built for. */
    const char *orig = g_hash_table_lookup(first_split, key);
    g_autoptr(ts_plan) p0 = make_plan(m, t, orig, batch, micro);
    g_autoptr(ts_trace) fresh0 = ts_plan_trace(p0, &err);
    cr_assert(ts_plan_trace_replace(p0, kept, &err), "%s: %s", orig, err ? err->message : "");
    g_autofree char *want0 = trace_fingerprint(fresh0);
    g_autofree char *got0 = trace_fingerprint(kept);
    cr_assert_str_eq(got0, want0, "%s (after %s): not the trace built for it", orig, split);
    g_free(key);
    checked++;
  }
  return checked;
}

Test(reuse, gpt_every_placement_and_option_on_8x8)
{
  /* Recomputation, sequence parallelism, interleaved stages, hybrid sharding, ZeRO stages. */
  int n = check_auto_splits("gpt3-350m", "tpu-v3-8x8", 16, 1, FALSE, 0);
  cr_assert_gt(n, 20, "only %d re-placements exercised", n);
}

/* a and b, one split placed two ways: one key, different traces, and a's trace re-placed as b's
 * is the one built for b. */
static void check_pair(const ts_model *m, const ts_topo *t, const char *a_split,
                       const char *b_split, gint64 batch)
{
  g_autoptr(ts_plan) a = make_plan(m, t, a_split, batch, 1);
  g_autoptr(ts_plan) b = make_plan(m, t, b_split, batch, 1);
  g_autofree char *ka = ts_plan_trace_key(a);
  g_autofree char *kb = ts_plan_trace_key(b);
  cr_assert_not_null(ka, "%s: no key", a_split);
  cr_assert_str_eq(ka, kb, "%s and %s: one split, two keys", a_split, b_split);
  g_autoptr(GError) err = NULL;
  g_autoptr(ts_trace) tr = ts_plan_trace(a, &err);
  cr_assert_not_null(tr, "%s: %s", a_split, err ? err->message : "");
  g_autoptr(ts_trace) fresh = ts_plan_trace(b, &err);
  cr_assert_not_null(fresh, "%s: %s", b_split, err ? err->message : "");
  g_autofree char *before = trace_fingerprint(tr);
  g_autofree char *want = trace_fingerprint(fresh);
  cr_assert_str_neq(before, want, "%s and %s: the placements give the same trace", a_split,
                    b_split);
  cr_assert(ts_plan_trace_replace(b, tr, &err), "%s", err ? err->message : "");
  g_autofree char *got = trace_fingerprint(tr);
  cr_assert_str_eq(got, want, "%s re-placed as %s", a_split, b_split);
}

Test(reuse, explicit_splits_cp_overlap_interleaved)
{
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  /* Context parallelism, tp-overlap with sequence parallelism, dp-overlap, interleaved stages,
   * hybrid sharding. */
  check_pair(m, t, "tp=4@x,cp=2@x,dp=8@y", "tp=4@y,cp=2@y,dp=8@x", 64);
  check_pair(m, t, "tp=8@x,dp=8@y,tp-overlap,sp", "tp=8@y,dp=8@x,tp-overlap,sp", 64);
  check_pair(m, t, "tp=2@x,dp=32@x+y,zero=1,dp-overlap", "tp=2@y,dp=32@y+x,zero=1,dp-overlap", 64);
  check_pair(m, t, "tp=8@x,pp=2@y,dp=4@y,schedule=interleaved:2",
             "tp=8@y,pp=2@x,dp=4@x,schedule=interleaved:2", 64);
  check_pair(m, t, "dp=64@x+y,zero=3,shard=8", "dp=64@y+x,zero=3,shard=8", 64);
}

Test(reuse, expert_parallel_pairs)
{
  /* Expert parallelism: the ep ranks are the inner end of dp's placement, so dp's order moves
   * them (ts_splits_auto does not enumerate ep: these pairs are the only re-placed ones). */
  g_autoptr(ts_model) m = load_model("mixtral-8x7b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  check_pair(m, t, "tp=4@node,dp=8@node+net,ep=2", "tp=4@node,dp=8@net+node,ep=2", 32);
}

Test(reuse, keys_tell_splits_apart)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  /* Differences that change the trace: ZeRO stage, explicit stages, micro-batch, batch. */
  g_autoptr(ts_plan) a = make_plan(m, t, "dp=32@x+y,pp=2@y,zero=1", 64, 1);
  g_autoptr(ts_plan) b = make_plan(m, t, "dp=32@x+y,pp=2@y,zero=2", 64, 1);
  /* Explicit stages (not in the canonical split text): one block (5 layers) off the balance. */
  int cut = a->stage_first[1] + 5;
  g_autofree char *staged =
      g_strdup_printf("dp=32@x+y,pp=2@y,zero=1,stages=%d:%d", cut, m->nlayers - cut);
  g_autoptr(ts_plan) c = make_plan(m, t, staged, 64, 1);
  g_autoptr(ts_plan) d = make_plan(m, t, "dp=32@x+y,pp=2@y,zero=1", 64, 2);
  g_autoptr(ts_plan) e = make_plan(m, t, "dp=32@x+y,pp=2@y,zero=1", 128, 1);
  g_autofree char *ka = ts_plan_trace_key(a);
  g_autofree char *kb = ts_plan_trace_key(b);
  g_autofree char *kc = ts_plan_trace_key(c);
  g_autofree char *kd = ts_plan_trace_key(d);
  g_autofree char *ke = ts_plan_trace_key(e);
  const char *k[] = {ka, kb, kc, kd, ke};
  for (size_t i = 0; i < G_N_ELEMENTS(k); i++) {
    cr_assert_not_null(k[i]);
    for (size_t j = 0; j < i; j++)
      cr_assert_str_neq(k[i], k[j], "plans %zu and %zu share a key", j, i);
  }
  /* Parameter servers take the placement's bandwidth: never re-placed. */
  g_autoptr(ts_plan) ps = make_plan(m, t, "dp=64,ps=8", 64, 1);
  g_autofree char *kps = ts_plan_trace_key(ps);
  cr_assert_null(kps);
}

Test(reuse, pool_predicts_as_each_alone)
{
  /* Through the pool (grouped by split, traces re-placed) and one by one (each its own trace):
   * every result bit for bit. Placements of one split interleaved with others in the input. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  const char *splits[] = {"tp=8@x,dp=8@y",           "dp=32@x+y,pp=2@y,zero=1", "tp=8@y,dp=8@x",
                          "dp=32@y+x,pp=2@x,zero=1", "tp=4@x,dp=16@x+y",        "tp=4@y,dp=16@y+x",
                          "dp=32@x+y,pp=2@y,zero=2", "tp=2@x,dp=32@y+x,zero=3"};
  int n = (int)G_N_ELEMENTS(splits);
  ts_config cfg[G_N_ELEMENTS(splits)];
  int idx[G_N_ELEMENTS(splits)];
  for (int i = 0; i < n; i++) {
    memset(&cfg[i], 0, sizeof cfg[i]);
    cfg[i].model = m;
    cfg[i].topo = t;
    cfg[i].split = splits[i];
    ts_plan_options_default(&cfg[i].po);
    cfg[i].po.global_batch = 64;
    cfg[i].po.micro_batch = 1;
    cfg[i].ro.backend = "analytic";
    idx[i] = i;
  }
  ts_outcome out[G_N_ELEMENTS(splits)];
  ts_pool_options o = {1, FALSE, "test"};
  g_autoptr(GError) err = NULL;
  cr_assert(ts_pool_run(cfg, idx, n, &o, out, &err), "%s", err ? err->message : "");
  for (int i = 0; i < n; i++) {
    cr_assert_eq(out[i].status, TS_OUTCOME_OK, "%s: %s", splits[i],
                 out[i].message ? out[i].message : "");
    g_autoptr(ts_split) sp = ts_split_parse(splits[i], &err);
    ts_result alone;
    cr_assert(ts_run_predict(m, t, sp, &cfg[i].po, &cfg[i].ro, &alone, &err), "%s: %s", splits[i],
              err ? err->message : "");
    cr_assert(memcmp(&alone.step_time_s, &out[i].res.step_time_s, sizeof(double)) == 0,
              "%s: %.17g through the pool, %.17g alone", splits[i], out[i].res.step_time_s,
              alone.step_time_s);
    cr_assert_eq(alone.events, out[i].res.events, "%s", splits[i]);
    cr_assert_eq(alone.ops, out[i].res.ops, "%s", splits[i]);
    ts_result_clear(&alone);
    ts_outcome_clear(&out[i]);
  }
}

/* Every number of a replay's result, bit for bit (the struct's padding aside). */
static void assert_same_result(const ts_replay_result *a, const ts_replay_result *b,
                               const char *what)
{
  const ts_rank_result *x = &a->critical, *y = &b->critical;
  double av[] = {a->step_time_s, a->mean_compute_s, a->mean_comm_only_s, x->end_s,   x->compute_s,
                 x->comm_s,      x->exposed_comm_s, x->idle_s,           x->bubble_s};
  double bv[] = {b->step_time_s, b->mean_compute_s, b->mean_comm_only_s, y->end_s,   y->compute_s,
                 y->comm_s,      y->exposed_comm_s, y->idle_s,           y->bubble_s};
  for (guint i = 0; i < G_N_ELEMENTS(av); i++)
    cr_assert(memcmp(&av[i], &bv[i], sizeof(double)) == 0, "%s: number %u is %.17g, not %.17g",
              what, i, av[i], bv[i]);
  cr_assert(memcmp(x->cat_s, y->cat_s, sizeof x->cat_s) == 0, "%s: categories differ", what);
  cr_assert(memcmp(x->exposed_cat_s, y->exposed_cat_s, sizeof x->exposed_cat_s) == 0,
            "%s: exposed categories differ", what);
  cr_assert_eq(a->critical_rank, b->critical_rank, "%s", what);
  cr_assert_eq(a->events, b->events, "%s", what);
  cr_assert_eq(a->nsimulated, b->nsimulated, "%s", what);
}

/* Every span of a replay (rank, op, start and end bit for bit) is the reference's, in order;
 * both arrays are released. */
static void assert_same_spans(GArray *got, GArray *want, const char *what)
{
  cr_assert_eq(got->len, want->len, "%s", what);
  for (guint j = 0; j < want->len; j++) {
    const ts_span *x = &g_array_index(want, ts_span, j), *y = &g_array_index(got, ts_span, j);
    cr_assert(x->rank == y->rank && x->op == y->op &&
                  memcmp(&x->start_s, &y->start_s, sizeof(double)) == 0 &&
                  memcmp(&x->end_s, &y->end_s, sizeof(double)) == 0,
              "%s: span %u: rank %d op %d [%.17g, %.17g], expected [%.17g, %.17g]", what, j,
              y->rank, y->op, y->start_s, y->end_s, x->start_s, x->end_s);
  }
  g_array_unref(got);
  g_array_unref(want);
}

/* tr replayed by the analytic backend on t in mode, with the view of its ops given (NULL: its
 * own), order-free when the engine may (pure, the backend's default) or timed (!pure). With
 * spans, every span is kept and returned; with order_free, whether it ran without time order. */
static ts_replay_result replay_on(const ts_trace *tr, const ts_topo *t, const ts_replay_ops *ops,
                                  ts_replay_mode mode, gboolean pure, GArray **spans,
                                  gboolean *order_free)
{
  ts_backend *b = ts_backend_analytic_new(t);
  b->pure_when_fixed = pure;
  ts_replay *r = ts_replay_new_shared(tr, ops, b, mode);
  cr_assert_not_null(r);
  if (spans != NULL)
    ts_replay_keep_spans(r, TRUE);
  ts_replay_result res;
  g_autoptr(GError) err = NULL;
  cr_assert(ts_replay_run(r, &res, &err), "%s", err ? err->message : "");
  if (order_free != NULL)
    *order_free = ts_replay_is_order_free(r);
  if (spans != NULL)
    *spans = g_array_ref((GArray *)ts_replay_spans(r));
  ts_replay_free(r);
  ts_backend_free(b);
  return res;
}

/* tr replayed on t in mode, with the view of its ops given (NULL: its own). */
static ts_replay_result replay_with(const ts_trace *tr, const ts_topo *t, const ts_replay_ops *ops,
                                    ts_replay_mode mode)
{
  return replay_on(tr, t, ops, mode, TRUE, NULL, NULL);
}

Test(reuse, replay_ops_shared_across_placements)
{
  /* The view of a trace's ops made once (successor lists, initial states, sends and receives)
   * serves the replays of every placement the trace is re-placed to, again and again, in both
   * modes: each result is the one its own replay of a freshly built trace gives. Pairs with
   * pipeline sends (their axis changes symmetry with the placement), tensor and data parallel
   * collectives, ZeRO. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  const char *pairs[][2] = {{"dp=32@x+y,pp=2@y,zero=1", "dp=32@y+x,pp=2@x,zero=1"},
                            {"tp=8@x,dp=8@y", "tp=8@y,dp=8@x"},
                            {"tp=4@x,dp=8@x+y,pp=2@y", "tp=4@y,dp=8@y+x,pp=2@x"}};
  ts_replay_mode modes[] = {TS_REPLAY_COLLAPSED, TS_REPLAY_FULL};
  for (guint i = 0; i < G_N_ELEMENTS(pairs); i++) {
    g_autoptr(ts_plan) pa = make_plan(m, t, pairs[i][0], 64, 1);
    g_autoptr(ts_plan) pb = make_plan(m, t, pairs[i][1], 64, 1);
    g_autoptr(ts_trace) tr = trace_of(pa);
    g_autoptr(ts_trace) built_b = trace_of(pb);
    g_autoptr(ts_replay_ops) ops = ts_replay_ops_new(tr);
    g_autoptr(GError) err = NULL;
    for (int round = 0; round < 2; round++)
      for (guint k = 0; k < G_N_ELEMENTS(modes); k++) {
        /* a as built, b re-placed from it, and back to a. */
        cr_assert(ts_plan_trace_replace(pa, tr, &err), "%s", err ? err->message : "");
        cr_assert(ts_trace_check_placement(tr, t, &err), "%s", err ? err->message : "");
        ts_replay_result shared = replay_with(tr, t, ops, modes[k]);
        ts_replay_result own = replay_with(tr, t, NULL, modes[k]);
        assert_same_result(&shared, &own, pairs[i][0]);
        cr_assert(ts_plan_trace_replace(pb, tr, &err), "%s", err ? err->message : "");
        cr_assert(ts_trace_check_placement(tr, t, &err), "%s", err ? err->message : "");
        shared = replay_with(tr, t, ops, modes[k]);
        own = replay_with(built_b, t, NULL, modes[k]);
        assert_same_result(&shared, &own, pairs[i][1]);
      }
  }
}

Test(reuse, replays_in_the_views_initial_states)
{
  /* With a shared view, each program's last simulated rank replays in the view's initial
   * states, set back from the counts the view keeps (issue 15, twentieth pass); a replay made
   * while another holds them copies its states from them as that replay left them. Replays of
   * one placement, one at a time and two at once, order-free and timed, in both modes, must
   * give every span of a replay with a view of its own, bit for bit. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  const char *splits[] = {"tp=4@x,dp=8@x+y,pp=2@y", "dp=32@x+y,pp=2@y,zero=1", "tp=8@x,dp=8@y"};
  ts_replay_mode modes[] = {TS_REPLAY_COLLAPSED, TS_REPLAY_FULL};
  for (guint i = 0; i < G_N_ELEMENTS(splits); i++)
    for (guint k = 0; k < G_N_ELEMENTS(modes); k++)
      for (int pure = 0; pure < 2; pure++) {
        g_autoptr(ts_plan) p = make_plan(m, t, splits[i], 64, 1);
        g_autoptr(ts_trace) tr = trace_of(p);
        g_autoptr(ts_replay_ops) ops = ts_replay_ops_new(tr);
        GArray *want = NULL, *got = NULL;
        ts_replay_result own = replay_on(tr, t, NULL, modes[k], pure, &want, NULL);
        g_autofree char *what = g_strdup_printf(
            "%s %s %s", splits[i], k == 0 ? "collapsed" : "full", pure ? "order-free" : "timed");
        /* One at a time, twice: the second in the states the first left. */
        for (int round = 0; round < 2; round++) {
          ts_replay_result r = replay_on(tr, t, ops, modes[k], pure, &got, NULL);
          assert_same_result(&r, &own, what);
          assert_same_spans(got, g_array_ref(want), what);
        }
        /* Two at once: the second copies the first's states, set back. */
        ts_backend *b1 = ts_backend_analytic_new(t), *b2 = ts_backend_analytic_new(t);
        b1->pure_when_fixed = b2->pure_when_fixed = pure;
        ts_replay *r1 = ts_replay_new_shared(tr, ops, b1, modes[k]);
        ts_replay_keep_spans(r1, TRUE);
        ts_replay_result x1, x2;
        g_autoptr(GError) err = NULL;
        cr_assert(ts_replay_run(r1, &x1, &err), "%s", err ? err->message : "");
        ts_replay *r2 = ts_replay_new_shared(tr, ops, b2, modes[k]);
        ts_replay_keep_spans(r2, TRUE);
        cr_assert(ts_replay_run(r2, &x2, &err), "%s: %s", what, err ? err->message : "");
        assert_same_result(&x1, &own, what);
        assert_same_result(&x2, &own, what);
        assert_same_spans(g_array_ref((GArray *)ts_replay_spans(r2)), g_array_ref(want), what);
        assert_same_spans(g_array_ref((GArray *)ts_replay_spans(r1)), want, what);
        ts_replay_free(r1);
        ts_replay_free(r2);
        ts_backend_free(b1);
        ts_backend_free(b2);
      }
}

Test(reuse, analytic_pair_seconds_by_source_destination_and_bytes)
{
  /* The analytic backend remembers a send/receive pair's seconds by (source, destination,
   * bytes) in a direct-mapped table (issue 15, twentieth pass): every pair of chips of the 8x8
   * torus, with one dead link, in an order that makes keys share slots, at three sizes, must
   * give ts_p2p_time's bits on the array the pair's route sees. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  GError *e = NULL;
  cr_assert(ts_degrade_add_link(t, 0, 3, "test", &e)); /* x link (3, 0) - (4, 0) */
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=4@x,dp=8@x+y,pp=2@y", 64, 1);
  g_autoptr(ts_trace) tr = trace_of(p);
  ts_backend *b = ts_backend_analytic_new(t);
  ts_replay *r = ts_replay_new(tr, b, TS_REPLAY_FULL);
  cr_assert_not_null(b->p2p_seconds);
  const double sizes[] = {1e6, 3.5e7, 1e6 + 1};
  int n = t->nchips, checked = 0;
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < n * n; i++)
      for (int k = 0; k < 3; k++) { /* a pair's sizes one after another: one slot */
        int src = (i * 37 + round) % n, dst = (i / n * 11 + i) % n;
        double got = b->p2p_seconds(b, r, src, dst, sizes[k], 0.0);
        g_autoptr(ts_topo) dt = ts_degrade_topo(t, ts_degrade_route_mask(t, src, dst));
        double want = ts_p2p_time(ts_degrade_route_mask(t, src, dst) ? dt : t, src, dst, sizes[k]);
        cr_assert(memcmp(&got, &want, sizeof got) == 0, "%d -> %d, %g bytes: %.17g, not %.17g", src,
                  dst, sizes[k], got, want);
        checked++;
      }
  cr_assert_eq(checked, 6 * n * n);
  ts_replay_free(r);
  ts_backend_free(b);
}

Test(reuse, fixed_durations_replay_as_start_would)
{
  /* The analytic backend gives the engine each op's seconds when they depend on the op alone
   * (issue 15, tenth pass): the engine then queues one-op activities itself. Every number of
   * the result is the one start() gives for every activity, in both modes, for splits with
   * pipeline sends, tensor and data parallel collectives and ZeRO, re-placed. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  const char *splits[] = {"dp=32@x+y,pp=2@y,zero=1", "tp=8@x,dp=8@y", "tp=4@x,dp=8@x+y,pp=2@y",
                          "tp=4@y,dp=8@y+x,pp=2@x"};
  ts_replay_mode modes[] = {TS_REPLAY_COLLAPSED, TS_REPLAY_FULL};
  for (guint i = 0; i < G_N_ELEMENTS(splits); i++) {
    g_autoptr(ts_plan) p = make_plan(m, t, splits[i], 64, 1);
    g_autoptr(ts_trace) tr = trace_of(p);
    for (guint k = 0; k < G_N_ELEMENTS(modes); k++) {
      ts_replay_result res[2];
      GArray *spans[2];
      for (int fixed = 0; fixed < 2; fixed++) {
        ts_backend *b = ts_backend_analytic_new(t);
        cr_assert_not_null(b->fixed_seconds, "a TPU array has no launch costs");
        if (!fixed) {
          b->fixed_seconds = NULL;
          b->queue = NULL;
        }
        ts_replay *r = ts_replay_new(tr, b, modes[k]);
        ts_replay_keep_spans(r, TRUE); /* every op's start and end (stored or start + seconds) */
        g_autoptr(GError) err = NULL;
        cr_assert(ts_replay_run(r, &res[fixed], &err), "%s", err ? err->message : "");
        spans[fixed] = g_array_ref((GArray *)ts_replay_spans(r));
        ts_replay_free(r);
        ts_backend_free(b);
      }
      cr_assert_gt(res[0].events, 100, "%s", splits[i]);
      assert_same_result(&res[1], &res[0], splits[i]);
      assert_same_spans(spans[1], spans[0], splits[i]);
    }
  }
}

Test(reuse, order_free_replay_as_timed)
{
  /* Issue 15, fourteenth pass: with every op's seconds its own, the engine completes each
   * activity as it starts, in no time order (successors first, depth first). Every op's start
   * and end, and every number of the result, are the timed replay's bits, in both modes, for
   * pipelines (1F1B and GPipe), tensor and data parallel collectives, ZeRO-3 (parameter
   * all-gathers and gradient reduce-scatters on one group, two streams: not in program order,
   * so a full replay, where the group has several simulated members, stays timed). */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  const char *splits[] = {"dp=32@x+y,pp=2@y,zero=3", "tp=4@x,dp=8@x+y,pp=2@y",
                          "tp=2@x,dp=4@y,pp=8@x+y,schedule=1f1b",
                          "tp=2@x,dp=4@y,pp=8@x+y,schedule=gpipe", "tp=8@x,dp=8@y,zero=3"};
  ts_replay_mode modes[] = {TS_REPLAY_COLLAPSED, TS_REPLAY_FULL};
  for (guint i = 0; i < G_N_ELEMENTS(splits); i++) {
    g_autoptr(ts_plan) p = make_plan(m, t, splits[i], 64, 1);
    g_autoptr(ts_trace) tr = trace_of(p);
    for (guint k = 0; k < G_N_ELEMENTS(modes); k++) {
      GArray *spans[2];
      gboolean of[2];
      ts_replay_result timed = replay_on(tr, t, NULL, modes[k], FALSE, &spans[0], &of[0]);
      ts_replay_result free = replay_on(tr, t, NULL, modes[k], TRUE, &spans[1], &of[1]);
      cr_assert(!of[0], "%s: timed when the backend is not pure", splits[i]);
      if (modes[k] == TS_REPLAY_COLLAPSED)
        cr_assert(of[1], "%s: a collapsed replay runs order-free", splits[i]);
      if (modes[k] == TS_REPLAY_FULL && strstr(splits[i], "zero=3") != NULL)
        cr_assert(!of[1], "%s: ZeRO-3's data-parallel group meets in time order", splits[i]);
      cr_assert_gt(timed.events, 100, "%s", splits[i]);
      assert_same_result(&free, &timed, splits[i]);
      assert_same_spans(spans[1], spans[0], splits[i]);
    }
  }
}

Test(reuse, order_free_failure_reports_as_timed)
{
  /* A replay that cannot finish fails order-free too, then runs timed, whose failure (the op
   * time order meets first) is reported: the message is the timed replay's, word for word.
   * Rank 1 computes, then waits for a send rank 0 makes with another tag. */
  g_autoptr(ts_topo) t = ring_topo(2, 1e9, 0);
  g_autoptr(ts_trace) tr = pp2_trace(t);
  ts_op c = {.kind = TS_OP_COMPUTE, .flops = 1e12};
  c.label = ts_trace_label(tr, "compute");
  ts_op s = {.kind = TS_OP_SEND, .axis = 0, .offset = 1, .bytes = 10, .tag = 1};
  s.label = ts_trace_label(tr, "send");
  ts_op rv = {.kind = TS_OP_RECV, .axis = 0, .offset = -1, .bytes = 10, .tag = 2};
  rv.label = ts_trace_label(tr, "recv activations");
  int c0 = ts_trace_append(tr, 0, &c, NULL, 0);
  ts_trace_append(tr, 0, &s, &c0, 1);
  int c1 = ts_trace_append(tr, 1, &c, NULL, 0);
  ts_trace_append(tr, 1, &rv, &c1, 1);
  char *msg[2];
  for (int pure = 0; pure < 2; pure++) {
    ts_backend *b = ts_backend_analytic_new(t);
    b->pure_when_fixed = pure;
    ts_replay *r = ts_replay_new(tr, b, TS_REPLAY_COLLAPSED);
    cr_assert_eq(ts_replay_is_order_free(r), pure);
    ts_replay_result res;
    GError *err = NULL;
    cr_assert(!ts_replay_run(r, &res, &err));
    cr_assert_eq(err->code, TS_ERROR_BACKEND);
    msg[pure] = g_strdup(err->message);
    g_error_free(err);
    ts_replay_free(r);
    ts_backend_free(b);
  }
  cr_assert(strstr(msg[0], "replay stuck") != NULL, "%s", msg[0]);
  cr_assert_str_eq(msg[1], msg[0]);
  g_free(msg[0]);
  g_free(msg[1]);
}

Test(reuse, placement_check_reads_the_layout)
{
  /* ts_trace_check_placement skips the per-op pass, not the layout re-placing changes: an axis
   * whose shape no longer has its size fails there as in the full check. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8@x,dp=8@y", 64, 1);
  g_autoptr(ts_trace) tr = trace_of(p);
  g_autoptr(GError) err = NULL;
  cr_assert(ts_trace_check(tr, t, &err), "%s", err ? err->message : "");
  cr_assert(ts_trace_check_placement(tr, t, &err), "%s", err ? err->message : "");
  tr->axes[0].shape.p[0].size *= 2;
  cr_assert_not(ts_trace_check_placement(tr, t, &err));
  cr_assert_not_null(strstr(err->message, "differs from its shape"), "%s", err->message);
  g_clear_error(&err);
  cr_assert_not(ts_trace_check(tr, t, &err));
}

/* The split enumeration places each axis once per distinct placement: on a 2x2x2x2 array an
 * axis of degree 2^k takes k whole dimensions, so each degree tuple (tp = 2^a, pp = 2^b, dp
 * the rest) has 4!/(4-a)! * (4-a)!/(4-a-b)! * (4-a-b)! = 4! = 24 placements, and there are 15
 * tuples (a + b <= 4): 360. Enumerating every dimension sequence per axis instead tried up to
 * 64^3 = 262,144 placements per tuple, parsing and placing each to refuse it (minutes on PaLM's
 * 12x16x16x2 array). */
Test(auto_splits, four_dim_array_tries_each_placement_once)
{
  GString *ini = g_string_new("[topology]\nname = q\n[chip]\nprofile = tpu-v4\n");
  for (int d = 0; d < 4; d++)
    g_string_append_printf(ini,
                           "[dim.d%d]\nsize = 2\nshape = ring\nlink_bandwidth_GBps = 45\n"
                           "latency_us = 1\n",
                           d);
  g_autoptr(GKeyFile) kf = g_key_file_new();
  cr_assert(g_key_file_load_from_data(kf, ini->str, (gsize)-1, G_KEY_FILE_NONE, NULL));
  g_string_free(ini, TRUE);
  g_autofree char *path = g_strdup_printf("%s/topologies/q.ini", TS_SOURCE_DIR);
  g_autoptr(GError) err = NULL;
  g_autoptr(ts_topo) t = ts_topo_from_keyfile(kf, path, &err);
  cr_assert_not_null(t, "%s", err ? err->message : "");
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 64;
  po.micro_batch = 1;
  long placements = 0;
  ts_auto_options ao = {0};
  ao.all_placements = TRUE;
  ao.placements = &placements;
  g_autoptr(GPtrArray) splits = ts_splits_auto(m, t, &po, &ao);
  cr_assert_eq(placements, 15 * 24, "placements tried: %ld, expected 360", placements);
  /* Each kept split is one of them with one of the 4 ZeRO stages where dp > 1. */
  cr_assert_gt(splits->len, 0u);
  cr_assert_leq(splits->len, 360u * 4u);
}
