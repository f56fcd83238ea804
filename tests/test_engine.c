/* Tests of the trace form, the replay engine and the planner: closed forms and invariants. */
#include "ts_coll_memo.h"
#include "ts_evq.h"
#include "ts_plan.h"
#include "ts_replay.h"
#include "ts_run.h"
#include "ts_cost.h"
#include "ts_trace.h"
#include "ts_util.h"

#include "ts_test.h"
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#define REL_TOL 1e-9

static gboolean predict(const ts_model *m, const ts_topo *t, const char *split, gint64 batch,
                        gboolean full, ts_result *res, GError **err)
{
  g_autoptr(ts_split) s = ts_split_parse(split, err);
  if (s == NULL)
    return FALSE;
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = full};
  return ts_run_predict(m, t, s, &po, &ro, res, err);
}

Test(engine, stream_order_and_overlap)
{
  g_autoptr(ts_topo) t = ring_topo(1, 1e9, 0);
  g_autoptr(ts_trace) tr = ts_trace_new(t);
  ts_group_shape none = {0};
  ts_trace_add_axis(tr, "dp", 1, TRUE, &none);
  ts_trace_set_programs(tr, 1);
  ts_op c = {.kind = TS_OP_COMPUTE, .stream = 0, .flops = 1e12}; /* 1 s each */
  c.label = ts_trace_label(tr, "a");
  int a = ts_trace_append(tr, 0, &c, NULL, 0);
  ts_trace_append(tr, 0, &c, NULL, 0); /* same stream: after a, ends at 2 */
  ts_op o = c;
  o.stream = 1;
  o.flops = 0.5e12;
  ts_trace_append(tr, 0, &o, &a, 1); /* other stream, after a: 1..1.5 */
  ts_op w = {.kind = TS_OP_WAIT, .stream = 2};
  int deps[] = {1, 2};
  ts_trace_append(tr, 0, &w, deps, 2);
  ts_replay_result rr;
  GError *err = NULL;
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  cr_assert(ts_run_replay(tr, t, &ro, &rr, &err), "%s", err ? err->message : "");
  double step = rr.step_time_s;
  cr_assert_float_eq(step, 2.0, 1e-12, "step %g, expected 2 s", step);
  double comp = rr.critical.compute_s;
  cr_assert_float_eq(comp, 2.0, 1e-12);
}

Test(engine, stuck_replay_names_rank_and_op)
{
  g_autoptr(ts_topo) t = ring_topo(2, 1e9, 0);
  g_autoptr(ts_trace) tr = pp2_trace(t);
  ts_op r = {.kind = TS_OP_RECV, .axis = 0, .offset = -1, .bytes = 10};
  r.label = ts_trace_label(tr, "recv activations");
  ts_trace_append(tr, 1, &r, NULL, 0); /* rank 1 waits for a send rank 0 never makes */
  ts_replay_result rr;
  GError *err = NULL;
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  gboolean ok = ts_run_replay(tr, t, &ro, &rr, &err);
  cr_assert(!ok);
  cr_assert_eq(err->code, TS_ERROR_BACKEND);
  cr_assert(strstr(err->message, "rank 1") && strstr(err->message, "recv activations"), "%s",
            err->message);
  g_error_free(err);
}

Test(engine, send_recv_pair_costs_one_transfer)
{
  g_autoptr(ts_topo) t = ring_topo(2, 1e9, 1e-6);
  g_autoptr(ts_trace) tr = pp2_trace(t);
  ts_op s = {.kind = TS_OP_SEND, .axis = 0, .offset = 1, .bytes = 1e9};
  s.label = ts_trace_label(tr, "send");
  ts_trace_append(tr, 0, &s, NULL, 0);
  ts_op r = s;
  r.kind = TS_OP_RECV;
  r.offset = -1;
  ts_trace_append(tr, 1, &r, NULL, 0);
  ts_replay_result rr;
  GError *err = NULL;
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  cr_assert(ts_run_replay(tr, t, &ro, &rr, &err), "%s", err ? err->message : "");
  double step = rr.step_time_s, expect = 1e-6 + 1.0;
  cr_assert_float_eq(step, expect, expect * REL_TOL, "p2p %g, expected alpha + S/B = %g", step,
                     expect);
}

/* Issue 15: sends and receives wait for their partner in open-addressing tables by (source,
 * destination, tag), one queue per key. Rank 0 posts every send at once (one stream each):
 * `nkeys` tags, received by rank 1 in reverse tag order (the table grows, and keys leave it
 * from every position of their probe runs), then `nsame` sends of one tag and growing sizes,
 * which must pair with rank 1's receives of that tag in the order they were posted. Rank 1
 * receives one at a time, so receive k ends at the sum of the transfers before it. */
Test(engine, p2p_matching_by_tag_and_in_order)
{
  const double lat = 1e-6, bw = 1e9;
  enum { nkeys = 300, nsame = 5 };
  g_autoptr(ts_topo) t = ring_topo(2, bw, lat);
  g_autoptr(ts_trace) tr = pp2_trace(t);
  ts_op s = {.kind = TS_OP_SEND, .axis = 0, .offset = 1};
  s.label = ts_trace_label(tr, "send");
  ts_op r = {.kind = TS_OP_RECV, .axis = 0, .offset = -1};
  r.label = ts_trace_label(tr, "recv");
  double expect[nkeys + nsame], end = 0;
  for (int k = 0; k < nkeys + nsame; k++) {
    s.stream = k;
    s.tag = k < nkeys ? k + 1 : nkeys + 1;
    s.bytes = k < nkeys ? 1e6 * (k + 1) : 1e8 * (k - nkeys + 1);
    ts_trace_append(tr, 0, &s, NULL, 0);
  }
  for (int k = 0; k < nkeys + nsame; k++) {
    int sent = k < nkeys ? nkeys - 1 - k : k; /* the send this receive pairs with */
    r.tag = sent < nkeys ? sent + 1 : nkeys + 1;
    r.bytes = sent < nkeys ? 1e6 * (sent + 1) : 1e8 * (sent - nkeys + 1);
    ts_trace_append(tr, 1, &r, NULL, 0);
    end += lat + r.bytes / bw;
    expect[k] = end;
  }
  GError *err = NULL;
  ts_backend *be = ts_backend_analytic_new(t);
  ts_replay *rp = ts_replay_new(tr, be, TS_REPLAY_COLLAPSED);
  ts_replay_keep_spans(rp, TRUE);
  ts_replay_result rr;
  cr_assert(ts_replay_run(rp, &rr, &err), "%s", err ? err->message : "");
  const GArray *spans = ts_replay_spans(rp);
  int seen = 0;
  for (guint i = 0; i < spans->len; i++) {
    const ts_span *sp = &g_array_index(spans, ts_span, i);
    if (sp->rank != 1)
      continue;
    seen++;
    cr_assert_float_eq(sp->end_s, expect[sp->op], expect[sp->op] * REL_TOL,
                       "receive %d ends at %.17g, expected %.17g", sp->op, sp->end_s,
                       expect[sp->op]);
  }
  cr_assert_eq(seen, nkeys + nsame);
  cr_assert_eq(rr.events, nkeys + nsame, "one event per matched pair");
  cr_assert_float_eq(rr.step_time_s, end, end * REL_TOL);
  ts_replay_free(rp);
  ts_backend_free(be);
}

/* Issue 15: ts_trace_check reads the ops once; the transfer-bandwidth check, which used a pass
 * of its own, runs again only when an op is a transfer or another check failed, and its error
 * still comes first: before a later op's undefined label, and found when it is the only one. */
Test(engine, trace_check_reports_transfer_bandwidth_first)
{
  g_autoptr(ts_topo) t = ring_topo(1, 1e9, 0);
  t->chip.nvme_bw_Bps = 0;
  for (int bad_label = 0; bad_label < 2; bad_label++) {
    g_autoptr(ts_trace) tr = ts_trace_new(t);
    ts_group_shape none = {0};
    ts_trace_add_axis(tr, "dp", 1, TRUE, &none);
    ts_trace_set_programs(tr, 1);
    ts_op c = {.kind = TS_OP_COMPUTE, .flops = 1e9};
    c.label = ts_trace_label(tr, "layer");
    ts_trace_append(tr, 0, &c, NULL, 0);
    ts_op x = {.kind = TS_OP_XFER, .resource = TS_RES_NVME, .bytes = 1e6};
    x.label = ts_trace_label(tr, "checkpoint write");
    ts_trace_append(tr, 0, &x, NULL, 0);
    if (bad_label) {
      c.label = 99;
      ts_trace_append(tr, 0, &c, NULL, 0);
    }
    GError *err = NULL;
    cr_assert_not(ts_trace_check(tr, t, &err));
    cr_assert(strstr(err->message, "op 1 'checkpoint write': transfer over nvme") != NULL, "%s",
              err->message);
    g_clear_error(&err);
    t->chip.nvme_bw_Bps = 1e9; /* with a bandwidth: only the label is wrong, or nothing */
    gboolean ok = ts_trace_check(tr, t, &err);
    cr_assert_eq(ok, !bad_label);
    if (bad_label)
      cr_assert(strstr(err->message, "op 2: label 99 undefined") != NULL, "%s", err->message);
    g_clear_error(&err);
    t->chip.nvme_bw_Bps = 0;
  }
}

/* Issue 15: ts_trace_check first tests each op on its packed fields and falls back to the
 * field-by-field tests only for an op that fails there; every bad field must still be found,
 * and named as before, on an op of each storage form (packed, with a side record, whole). */
Test(engine, trace_check_names_each_bad_op)
{
  g_autoptr(ts_topo) t = ring_topo(1, 1e9, 0);
  const double big = 1e300, nan = 0.0 / 0.0;
  struct {
    ts_op op;
    int dep;            /* a dependency of op 2 (-2: none) */
    const char *expect; /* NULL: the trace is valid */
  } cases[] = {
      {{.kind = TS_OP_COMPUTE, .flops = 1e9, .mem_bytes = 1e6}, 1, NULL},
      {{.kind = TS_OP_COMPUTE, .flops = 1e9, .t_layer = 3, .t_micro = 2}, 0, NULL},
      {{.kind = TS_OP_COLL, .bytes = 1e6}, -2, NULL},
      {{.kind = TS_OP_COLL, .bytes = 1e6, .flops = 5}, -2, NULL}, /* kept whole */
      {{.kind = TS_OP_SEND, .axis = 0, .offset = 1, .bytes = 8}, -2, NULL},
      {{.kind = TS_OP_RECV, .peer = 1, .bytes = 8, .tag = 4}, -2, NULL},
      {{.kind = TS_OP_XFER, .resource = TS_RES_NVME, .bytes = 1e6, .bw_Bps = 1e9}, -2, NULL},
      {{.kind = TS_OP_DELAY, .seconds = 1e-3}, -2, NULL},
      {{.kind = TS_OP_WAIT}, 1, NULL},
      {{.kind = TS_OP_COMPUTE, .flops = 1}, 2, "op 2: dependency 2 is not an earlier op"},
      {{.kind = TS_OP_COMPUTE, .flops = 1}, -1, "op 2: dependency -1 is not an earlier op"},
      {{.kind = TS_OP_COMPUTE, .flops = 1, .label = 99}, -2, "op 2: label 99 undefined"},
      {{.kind = TS_OP_COLL, .group = 7, .bytes = 1}, -2, "op 2: group 7 undefined"},
      {{.kind = TS_OP_COLL, .group = 7, .flops = 1}, -2, "op 2: group 7 undefined"},
      {{.kind = TS_OP_SEND, .axis = 1, .offset = 1}, -2, "op 2: send/recv needs a peer"},
      {{.kind = TS_OP_RECV, .axis = 0, .offset = 0}, -2, "op 2: send/recv needs a peer"},
      {{.kind = TS_OP_SEND, .peer = 2}, -2, "op 2: send/recv needs a peer"},
      {{.kind = TS_OP_COMPUTE, .t_phase = TS_NPHASES}, -2, "op 2: kind, resource or tag"},
      {{.kind = TS_OP_COMPUTE, .t_role = TS_NROLES}, -2, "op 2: kind, resource or tag"},
      {{.kind = TS_OP_DELAY, .resource = TS_NRES}, -2, "op 2: kind, resource or tag"},
      {{.kind = TS_OP_COMPUTE, .t_micro = -1}, -2, "op 2: kind, resource or tag"},
      {{.kind = TS_OP_XFER, .bytes = 1, .bw_Bps = 1e9}, -2, "op 2: xfer needs a resource"},
      {{.kind = TS_OP_COMPUTE, .flops = -1}, -2, "op 2: sizes out of range"},
      {{.kind = TS_OP_COMPUTE, .flops = nan}, -2, "op 2: sizes out of range"},
      {{.kind = TS_OP_COMPUTE, .mem_bytes = big}, -2, "op 2: sizes out of range"},
      {{.kind = TS_OP_COLL, .bytes = big}, -2, "op 2: sizes out of range"},
      {{.kind = TS_OP_SEND, .axis = 0, .offset = 1, .bytes = -1}, -2, "op 2: sizes out of range"},
      {{.kind = TS_OP_DELAY, .seconds = 2e6}, -2, "op 2: sizes out of range"},
      {{.kind = TS_OP_XFER, .resource = TS_RES_NVME, .bytes = 1, .bw_Bps = 2e15},
       -2,
       "op 2: sizes out of range"},
      {{.kind = TS_OP_WAIT, .bw_Bps = -1}, -2, "op 2: sizes out of range"},
  };
  for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autoptr(ts_trace) tr = ts_trace_new(t);
    ts_group_shape none = {0};
    int ax = ts_trace_add_axis(tr, "dp", 1, TRUE, &none);
    int g = ts_trace_group(tr, &ax, 1);
    ts_trace_set_programs(tr, 1);
    ts_op ok = {.kind = TS_OP_COMPUTE, .flops = 1e9};
    ok.label = ts_trace_label(tr, "layer");
    ts_trace_append(tr, 0, &ok, NULL, 0);
    ts_trace_append(tr, 0, &ok, (int[]){0}, 1);
    ts_op op = cases[c].op;
    if (op.label == 0)
      op.label = ok.label;
    if (op.kind == TS_OP_COLL && op.group == 0)
      op.group = g;
    int dep = cases[c].dep;
    ts_trace_append(tr, 0, &op, &dep, dep == -2 ? 0 : 1);
    GError *err = NULL;
    gboolean passed = ts_trace_check(tr, NULL, &err);
    if (cases[c].expect == NULL) {
      cr_assert(passed, "case %zu: %s", c, err != NULL ? err->message : "");
    } else {
      cr_assert_not(passed, "case %zu passed, expected '%s'", c, cases[c].expect);
      cr_assert(strstr(err->message, cases[c].expect) != NULL, "case %zu: %s", c, err->message);
    }
    g_clear_error(&err);
  }
}

Test(engine, one_chip_step_is_sum_of_compute)
{
  g_autoptr(ts_topo) t = ring_topo(1, 1e9, 0);
  g_autoptr(ts_model) m = load_model("bert-large");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 4;
  GError *err = NULL;
  g_autoptr(ts_split) s = ts_split_parse("dp=1", &err);
  g_autoptr(ts_plan) p = ts_plan_new(m, t, s, &po, &err);
  cr_assert_not_null(p, "%s", err ? err->message : "");
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &err);
  double sum = 0;
  for (int i = 0; i < tr->programs[0].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
    cr_assert_eq(o->kind, TS_OP_COMPUTE, "a 1-chip step has only compute");
    /* Each op as its shape costs it (a GEMM's epilogue after it, ts_cost.c). */
    sum += ts_cost_compute(&t->chip, o->flops, o->mem_bytes, o->shape);
  }
  ts_replay_result rr;
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  cr_assert(ts_run_replay(tr, t, &ro, &rr, &err));
  double step = rr.step_time_s;
  cr_assert_float_eq(step, sum, sum * REL_TOL, "step %.17g vs sum of compute %.17g", step, sum);
}

Test(engine, dp_step_never_below_compute)
{
  g_autoptr(ts_model) m = load_model("resnet50");
  const char *topos[] = {"tpu-v3-8x8", "dgx-a100-4node", "asym-16x16", "tpu-v2-pod"};
  for (size_t i = 0; i < G_N_ELEMENTS(topos); i++) {
    g_autoptr(ts_topo) t = load_topo(topos[i]);
    for (gint64 per = 1; per <= 64; per *= 4) {
      ts_result r;
      GError *err = NULL;
      g_autofree char *split = g_strdup_printf("dp=%d", t->nchips);
      cr_assert(predict(m, t, split, per * t->nchips, FALSE, &r, &err), "%s",
                err ? err->message : "");
      double step = r.step_time_s, comp = r.compute_time_s;
      cr_assert(step >= comp * (1 - 1e-12), "%s batch/chip %ld: step %g < compute %g", topos[i],
                (long)per, step, comp);
      double sum = r.compute_time_s + r.exposed_comm_time_s + r.idle_time_s;
      cr_assert_float_eq(sum, step, step * 1e-9, "breakdown must add up to the step");
      ts_result_clear(&r);
    }
  }
}

Test(engine, collapsed_replay_equals_full_replay)
{
  g_autoptr(ts_model) m = load_model("bert-large");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  const char *splits[] = {"dp=64", "tp=8@x,dp=8@y", "tp=4,dp=16"};
  for (size_t i = 0; i < G_N_ELEMENTS(splits); i++) {
    ts_result a, b;
    GError *err = NULL;
    cr_assert(predict(m, t, splits[i], 128, FALSE, &a, &err), "%s", err ? err->message : "");
    cr_assert(predict(m, t, splits[i], 128, TRUE, &b, &err), "%s", err ? err->message : "");
    double x = a.step_time_s, y = b.step_time_s;
    cr_assert_eq(x, y, "%s: collapsed %.17g != full %.17g", splits[i], x, y);
    cr_assert_lt(a.simulated_ranks, b.simulated_ranks);
    ts_result_clear(&a);
    ts_result_clear(&b);
  }
}

/* Issue 15: the replay's fast paths (one simulated member, pooled rendezvous, the op-state
 * layout) keep collapsed and full replays equal on pipelines too, where every pipeline rank
 * is simulated and collectives of several simulated members meet. */
Test(engine, collapsed_equals_full_with_pipelines_and_zero)
{
  g_autoptr(ts_model) m = load_model("bert-large");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  const char *splits[] = {"tp=4@x,pp=4@y,dp=4@x+y", "pp=8@y,dp=8@x,zero=3", "tp=2@x,pp=2@x,dp=16"};
  for (size_t i = 0; i < G_N_ELEMENTS(splits); i++) {
    ts_result a, b;
    GError *err = NULL;
    cr_assert(predict(m, t, splits[i], 256, FALSE, &a, &err), "%s", err ? err->message : "");
    cr_assert(predict(m, t, splits[i], 256, TRUE, &b, &err), "%s", err ? err->message : "");
    double x = a.step_time_s, y = b.step_time_s;
    cr_assert_eq(x, y, "%s: collapsed %.17g != full %.17g", splits[i], x, y);
    double bx = a.bubble_time_s, by = b.bubble_time_s;
    cr_assert_eq(bx, by, "%s: bubble collapsed %.17g != full %.17g", splits[i], bx, by);
    ts_result_clear(&a);
    ts_result_clear(&b);
  }
}

/* Collectives are numbered once per distinct (group, kind, algorithm, bytes); an op changed
 * after resolution no longer matches its number, and the backend costs it from its fields. */
Test(engine, collectives_numbered_once_per_distinct_collective)
{
  g_autoptr(ts_topo) t = ring_topo(4, 1e9, 0);
  g_autoptr(ts_trace) tr = ts_trace_new(t);
  ts_group_shape dp = {1, {{0, 4, 1}}};
  int ax = ts_trace_add_axis(tr, "dp", 4, TRUE, &dp);
  int g = ts_trace_group(tr, &ax, 1);
  ts_trace_set_programs(tr, 1);
  ts_op c = {.kind = TS_OP_COLL, .coll = TS_COLL_ALLREDUCE, .algo = TS_ALGO_RING, .group = g};
  c.label = ts_trace_label(tr, "all-reduce");
  c.bytes = 4e6;
  ts_trace_append(tr, 0, &c, NULL, 0);
  ts_trace_append(tr, 0, &c, NULL, 0);
  c.bytes = 8e6;
  ts_trace_append(tr, 0, &c, NULL, 0);
  GError *err = NULL;
  cr_assert(ts_trace_resolve_algos(tr, t, &err), "%s", err ? err->message : "");
  int id0 = ts_program_op(&tr->programs[0], 0).coll_id,
      id1 = ts_program_op(&tr->programs[0], 1).coll_id,
      id2 = ts_program_op(&tr->programs[0], 2).coll_id;
  cr_assert(id0 > 0 && id0 == id1 && id2 > 0 && id2 != id0, "ids %d %d %d", id0, id1, id2);
  guint n = tr->colls->len;
  cr_assert_eq(n, 2);
  /* Ring all-reduce of B bytes over 4 at 1 GB/s, no latency: 2 (4-1)/4 B / bw. */
  ts_replay_result rr;
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  cr_assert(ts_run_replay(tr, t, &ro, &rr, &err), "%s", err ? err->message : "");
  double want = 1.5 * (4e6 + 4e6 + 8e6) / 1e9, got = rr.step_time_s;
  cr_assert_float_eq(got, want, want * REL_TOL, "step %.17g, expected %.17g", got, want);
  /* Changed after resolution: the stale number is not trusted. */
  ts_op changed = ts_program_op(&tr->programs[0], 1);
  changed.bytes = 2e6;
  ts_program_set_op(tr, 0, 1, &changed);
  changed = ts_program_op(&tr->programs[0], 1);
  cr_assert_eq(changed.bytes, 2e6, "set_op stores the change");
  cr_assert_null(ts_trace_coll_desc(tr, &changed));
  cr_assert(ts_run_replay(tr, t, &ro, &rr, &err), "%s", err ? err->message : "");
  want = 1.5 * (4e6 + 2e6 + 8e6) / 1e9;
  got = rr.step_time_s;
  cr_assert_float_eq(got, want, want * REL_TOL, "step %.17g, expected %.17g", got, want);
}

/* The sweep's memo of collective times gives ts_coll_time's value on the topologies
 * registered with it, and leaves every other topology alone. */
Test(engine, coll_memo_equals_direct_time_and_skips_unregistered)
{
  g_autoptr(ts_topo) t = ring_topo(8, 1e9, 1e-6);
  g_autoptr(ts_topo) u = ring_topo(8, 2e9, 1e-6);
  ts_group_shape sh = {1, {{0, 8, 1}}};
  GError *err = NULL;
  double direct_t = ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, &sh, 1e6, NULL, &err);
  double direct_u = ts_coll_time(u, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, &sh, 1e6, NULL, &err);
  cr_assert(direct_t > 0 && direct_u > 0 && direct_u < direct_t);
  const ts_topo *reg[] = {t};
  ts_coll_memo_begin(reg, 1);
  for (int rep = 0; rep < 2; rep++) { /* computed, then remembered */
    ts_coll_algo chosen = TS_ALGO_AUTO, direct_chosen = TS_ALGO_AUTO;
    double a = ts_coll_time_memo(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, &sh, 1e6, &chosen, &err);
    ts_coll_time(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, &sh, 1e6, &direct_chosen, &err);
    cr_assert_eq(a, direct_t, "memo %.17g != direct %.17g", a, direct_t);
    cr_assert_eq(chosen, direct_chosen);
    double b = ts_coll_time_memo(u, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, &sh, 1e6, NULL, &err);
    cr_assert_eq(b, direct_u, "unregistered %.17g != direct %.17g", b, direct_u);
  }
  /* Errors are returned, never remembered. */
  double bad = ts_coll_time_memo(t, TS_COLL_ALLREDUCE, TS_ALGO_AUTO, &sh, -1.0, NULL, &err);
  cr_assert_lt(bad, 0);
  cr_assert_not_null(err);
  g_clear_error(&err);
  ts_coll_memo_end();
}

/* Issue 15: the memo stores a choice (auto) under the algorithm it chose as well, which is what
 * the backend asks for once the trace is resolved; that is right only if ts_coll_time of the
 * chosen algorithm is, to the bit, the choice's time. Checked on every kind, on a ring, a torus
 * and a switch, at sizes where different algorithms win. */
Test(engine, choice_time_equals_chosen_algorithm_time_and_memo)
{
  g_autoptr(ts_topo) ring = ring_topo(8, 1e9, 1e-6);
  g_autoptr(ts_topo) torus = load_topo("tpu-v3-8x8");
  g_autoptr(ts_topo) dgx = load_topo("dgx-a100-1node");
  ts_group_shape ring_sh = {1, {{0, 8, 1}}}, torus_sh = {2, {{0, 8, 1}, {1, 8, 1}}},
                 dgx_sh = {1, {{0, 8, 1}}};
  const ts_topo *topos[] = {ring, torus, dgx};
  const ts_group_shape *shapes[] = {&ring_sh, &torus_sh, &dgx_sh};
  const double sizes[] = {64, 4096, 1e6, 3.3e8};
  int checked = 0;
  for (size_t ti = 0; ti < G_N_ELEMENTS(topos); ti++)
    for (int kind = 0; kind < TS_COLL_NKINDS; kind++)
      for (size_t si = 0; si < G_N_ELEMENTS(sizes); si++) {
        GError *err = NULL;
        ts_coll_algo chosen = TS_ALGO_AUTO;
        double t_auto = ts_coll_time(topos[ti], (ts_coll_kind)kind, TS_ALGO_AUTO, shapes[ti],
                                     sizes[si], &chosen, &err);
        if (t_auto < 0) { /* no algorithm for this kind here */
          g_clear_error(&err);
          continue;
        }
        double t_chosen =
            ts_coll_time(topos[ti], (ts_coll_kind)kind, chosen, shapes[ti], sizes[si], NULL, &err);
        cr_assert_eq(t_auto, t_chosen, "%s on topology %zu, %g bytes: auto %.17g, %s %.17g",
                     ts_coll_kind_name((ts_coll_kind)kind), ti, sizes[si], t_auto,
                     ts_coll_algo_name(chosen), t_chosen);
        const ts_topo *reg[] = {topos[ti]};
        ts_coll_memo_begin(reg, 1);
        ts_coll_algo mc = TS_ALGO_AUTO;
        double m_auto = ts_coll_time_memo(topos[ti], (ts_coll_kind)kind, TS_ALGO_AUTO, shapes[ti],
                                          sizes[si], &mc, &err);
        ts_coll_algo mc2 = TS_ALGO_AUTO;
        double m_chosen = ts_coll_time_memo(topos[ti], (ts_coll_kind)kind, chosen, shapes[ti],
                                            sizes[si], &mc2, &err);
        ts_coll_memo_end();
        cr_assert(m_auto == t_auto && m_chosen == t_chosen && mc == chosen && mc2 == chosen);
        checked++;
      }
  cr_assert_gt(checked, 30, "only %d cases checked", checked);
}

/* Issue 15: the analytic backend's event queue (a sorted run while short, a 4-ary heap past
 * TS_EVQ_SORTED_MAX events, sorted back at TS_EVQ_SORTED_MIN) pops what a plain list searched for
 * its least (time, insertion order) pops, run side by side on random pushes and pops with many
 * equal times, never pushing before the last time popped (as a replay does). Rounds of up to
 * 2000 pushes, two in three steps a push, grow past TS_EVQ_SORTED_MAX and drain through both forms.
 */
Test(engine, event_queue_pops_in_time_then_insertion_order)
{
  GRand *rng = g_rand_new_with_seed(15);
  int pops = 0, heap_pops = 0, back_to_sorted = 0;
  for (int round = 0; round < 60; round++) {
    ts_evq q = {0};
    GArray *ref = g_array_new(FALSE, FALSE, sizeof(ts_event)); /* the reference queue */
    int n = g_rand_int_range(rng, 1, 2000);
    int levels = g_rand_int_range(rng, 1, 30); /* few distinct times: many ties */
    double now = 0;
    guint64 seq = 0;
    int pushed = 0;
    while (pushed < n || q.len > 0) {
      cr_assert_eq(q.len, ref->len);
      if (pushed < n && (q.len == 0 || g_rand_int_range(rng, 0, 3) > 0)) {
        double t = now + g_rand_int_range(rng, 0, levels) * 0.25;
        ts_evq_push(&q, t, (guint64)pushed);
        ts_event e = {t, seq++, (guint64)pushed};
        g_array_append_val(ref, e);
        pushed++;
        continue;
      }
      guint best = 0;
      for (guint k = 1; k < ref->len; k++)
        if (ts_event_less(&g_array_index(ref, ts_event, k), &g_array_index(ref, ts_event, best)))
          best = k;
      ts_event want = g_array_index(ref, ts_event, best);
      g_array_remove_index(ref, best);
      gboolean was_heap = q.heap;
      ts_event got = ts_evq_pop(&q);
      heap_pops += was_heap;
      back_to_sorted += was_heap && !q.heap;
      cr_assert(got.token == want.token && got.t == want.t && got.seq == want.seq,
                "round %d: popped token %" G_GUINT64_FORMAT " at %g, expected %" G_GUINT64_FORMAT
                " at %g",
                round, got.token, got.t, want.token, want.t);
      now = got.t;
      pops++;
    }
    g_array_unref(ref);
    ts_evq_clear(&q);
  }
  g_rand_free(rng);
  cr_assert_gt(pops, 1000);
  cr_assert_gt(heap_pops, 100, "the heap form popped only %d events", heap_pops);
  cr_assert_gt(back_to_sorted, 0);
}

/* A one-chip trace of n compute ops of `flops` each on one stream, plus one transfer over storage
 * that has no bandwidth when bad is set (to check the error names it). */
static ts_trace *compute_chain(const ts_topo *t, int n, double flops, gboolean bad)
{
  ts_trace *tr = ts_trace_new(t);
  ts_group_shape none = {0};
  ts_trace_add_axis(tr, "dp", 1, TRUE, &none);
  ts_trace_set_programs(tr, 1);
  ts_op c = {.kind = TS_OP_COMPUTE, .stream = 0, .flops = flops};
  c.label = ts_trace_label(tr, "layer");
  for (int i = 0; i < n; i++)
    ts_trace_append(tr, 0, &c, NULL, 0);
  if (bad) {
    ts_op x = {.kind = TS_OP_XFER, .stream = 0, .resource = TS_RES_STORAGE, .bytes = 1e6};
    x.label = ts_trace_label(tr, "checkpoint read");
    ts_trace_append(tr, 0, &x, NULL, 0);
  }
  return tr;
}

/* Issue 15: the analytic backend keeps per-program cost tables and a cost memo keyed by the
 * trace's interned shapes; a backend given a second trace must cost that trace, not the first,
 * and name an op it cannot cost by its label (the engine passes labels only on errors). */
Test(engine, analytic_backend_reused_for_another_trace_and_names_failing_op)
{
  g_autoptr(ts_topo) t = ring_topo(1, 1e9, 0);
  g_autoptr(ts_trace) a = compute_chain(t, 10, 1e12, FALSE);
  g_autoptr(ts_trace) b = compute_chain(t, 10, 3e12, FALSE);
  GError *err = NULL;
  ts_backend *be = ts_backend_analytic_new(t);
  ts_replay_result ra, rb, fresh;
  ts_replay *r = ts_replay_new(a, be, TS_REPLAY_COLLAPSED);
  cr_assert(ts_replay_run(r, &ra, &err), "%s", err ? err->message : "");
  ts_replay_free(r);
  r = ts_replay_new(b, be, TS_REPLAY_COLLAPSED);
  cr_assert(ts_replay_run(r, &rb, &err), "%s", err ? err->message : "");
  ts_replay_free(r);
  ts_backend_free(be);
  be = ts_backend_analytic_new(t);
  r = ts_replay_new(b, be, TS_REPLAY_COLLAPSED);
  cr_assert(ts_replay_run(r, &fresh, &err), "%s", err ? err->message : "");
  ts_replay_free(r);
  ts_backend_free(be);
  cr_assert_eq(rb.step_time_s, fresh.step_time_s, "reused %.17g != fresh %.17g", rb.step_time_s,
               fresh.step_time_s);
  cr_assert_float_eq(rb.step_time_s, 3 * ra.step_time_s, 1e-9 * rb.step_time_s);
  cr_assert_eq(rb.events, 10);
  g_autoptr(ts_trace) c = compute_chain(t, 3, 1e12, TRUE);
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  cr_assert_not(ts_run_replay(c, t, &ro, &ra, &err));
  cr_assert(strstr(err->message, "'checkpoint read'") != NULL, "%s", err->message);
  g_clear_error(&err);
}

Test(engine, tensor_parallel_faster_along_fast_dimension)
{
  g_autoptr(ts_model) m = load_model("bert-large");
  g_autoptr(ts_topo) t = load_topo("asym-16x16");
  int fast = t->dims[0].link_bw_Bps > t->dims[1].link_bw_Bps ? 0 : 1;
  g_autofree char *good =
      g_strdup_printf("tp=16@%s,dp=16@%s", t->dims[fast].name, t->dims[1 - fast].name);
  g_autofree char *bad =
      g_strdup_printf("tp=16@%s,dp=16@%s", t->dims[1 - fast].name, t->dims[fast].name);
  ts_result a, b, d;
  GError *err = NULL;
  cr_assert(predict(m, t, good, 256, FALSE, &a, &err), "%s", err ? err->message : "");
  cr_assert(predict(m, t, bad, 256, FALSE, &b, &err), "%s", err ? err->message : "");
  cr_assert(predict(m, t, "tp=16,dp=16", 256, FALSE, &d, &err), "%s", err ? err->message : "");
  double ta = a.step_time_s, tb = b.step_time_s;
  cr_assert_lt(ta, tb, "tp on fast links %g s should beat tp on slow links %g s", ta, tb);
  /* The default placement must choose the fast dimension for tensor parallelism. */
  cr_assert_str_eq(d.placement, a.placement);
  ts_result_clear(&a);
  ts_result_clear(&b);
  ts_result_clear(&d);
}

Test(engine, trace_text_round_trip)
{
  g_autoptr(ts_model) m = load_model("bert-large");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  GError *err = NULL;
  g_autoptr(ts_split) s = ts_split_parse("tp=8,dp=8", &err);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 64;
  po.micro_batch = 4;
  g_autoptr(ts_plan) p = ts_plan_new(m, t, s, &po, &err);
  cr_assert_not_null(p, "%s", err ? err->message : "");
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &err);
  g_autofree char *text = ts_trace_to_text(tr);
  g_autoptr(ts_trace) back = ts_trace_from_text(text, "mem.trace", &err);
  cr_assert_not_null(back, "%s", err ? err->message : "");
  g_autofree char *again = ts_trace_to_text(back);
  cr_assert_str_eq(text, again, "text -> trace -> text must be identical");
  ts_replay_result r1, r2;
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  cr_assert(ts_run_replay(tr, t, &ro, &r1, &err));
  cr_assert(ts_run_replay(back, t, &ro, &r2, &err));
  double a = r1.step_time_s, b = r2.step_time_s;
  cr_assert_eq(a, b, "replay of the read-back trace must give the same step time");
}

Test(engine, trace_parse_errors_name_line)
{
  const struct {
    const char *text, *expect;
  } cases[] = {
      {"", "bad.trace:1: empty file"},
      {"trainsim-trace 3\n", "bad.trace:1: version='3'"},
      {"trainsim-trace 1\nranks 0\n", "bad.trace:2: ranks='0'"},
      {"trainsim-trace 1\nranks 2\ndim x 2\nbogus\n", "bad.trace:4: 'bogus'"},
      {"trainsim-trace 1\nranks 2\ndim x 2\naxis dp 2 symmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 1\n0 compute cat=fwd stream=0 label=0 flops=-1\nend\n",
       "bad.trace:7: flops='-1'"},
      {"trainsim-trace 1\nranks 2\ndim x 2\naxis dp 2 symmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 2\n0 compute cat=fwd stream=0 label=0 flops=1\nend\n",
       "bad.trace:8: program 0 declared 2 ops but has 1"},
      {"trainsim-trace 1\nranks 2\ndim x 2\naxis dp 2 symmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 1\n0 compute cat=fwd stream=0 label=0 flops=1 deps=0\nend\n",
       "bad.trace:7: deps='0'"},
      {"trainsim-trace 1\nranks 2\ndim x 2\naxis dp 2 symmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 1\n0 compute cat=fwd stream=0 label=0 flops=1\n",
       "without 'end'"},
      {"trainsim-trace 1\nranks 4\ndim x 2\ndim y 2\naxis dp 2 symmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 0\nend\n",
       "axes cover 2 ranks but the trace has 4"},
      {"trainsim-trace 1\nranks 4\ndim x 2\naxis dp 2 symmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 0\nend\n",
       "the dims multiply to 2 ranks but the trace has 4"},
      /* Strings reach JSON outputs: a 0xff byte in meta model made replay's JSON invalid. */
      {"trainsim-trace 2\nranks 2\nmeta model \"\xffMLP\"\n",
       "bad.trace:3: byte 13 (0xff) of the line is not UTF-8; expected UTF-8 text"},
      {"trainsim-trace 2\nranks 2\nmeta model \"\\377MLP\"\n",
       "bad.trace:3: field 3 decodes to bytes that are not UTF-8"},
      /* A truncated header line said "'dim': expected ranks, dim, axis, ..." (dim is one). */
      {"trainsim-trace 2\nranks 4\ndim\n",
       "bad.trace:3: 'dim' with 0 fields; expected 'dim NAME SIZE'"},
      {"trainsim-trace 2\nranks 4\ndim x\n", "bad.trace:3: 'dim' with 1 field; expected 'dim NAME"},
      {"trainsim-trace 2\nranks\n", "bad.trace:2: 'ranks' with 0 fields; expected 'ranks N'"},
      {"trainsim-trace 2\nranks 2\ndim x 2\naxis dp 2\n",
       "'axis' with 2 fields; expected 'axis NAME"},
      {"trainsim-trace 2\nranks 2\ndim x 2\naxis dp 2 symmetric x:2:1\nprogram 0\n",
       "bad.trace:5: 'program' with 1 field; expected 'program INDEX OPS'"},
      {"trainsim-trace 2\nranks 2\ndim x 2\naxis dp 2 symmetric x:2:1\nlabel 0\n",
       "'label' with 1 field; expected 'label INDEX \"TEXT\"'"},
      {"trainsim-trace 2\nranks 2\ndim x 2\naxis dp 2 symmetric x:2:1\ngroup 0\n",
       "'group' with 1 field; expected 'group INDEX AXIS...'"},
      {"trainsim-trace 2\nranks 2\ndim x 2\naxis dp 2 symmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 0\nend now\n",
       "'end' with 1 field; expected 'end' alone"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    GError *err = NULL;
    ts_trace *tr = ts_trace_from_text(cases[i].text, "bad.trace", &err);
    cr_assert_null(tr, "case %zu parsed", i);
    cr_assert(strstr(err->message, cases[i].expect) != NULL, "case %zu: '%s' lacks '%s'", i,
              err->message, cases[i].expect);
    cr_assert(strchr(err->message, '\n') == NULL, "one line");
    g_error_free(err);
  }
}

Test(plan, split_errors)
{
  g_autoptr(ts_model) m = load_model("bert-large");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  const struct {
    const char *split, *expect;
  } cases[] = {
      {"", "expected comma-separated axes"},
      {"xp=4", "unknown axis 'xp'"},
      {"dp=0", "dp='0'"},
      {"dp=abc", "dp='abc'"},
      {"dp=1e30", "dp='1e30'"},
      {"dp", "expected AXIS=DEGREE"},
      {"dp=32", "uses 32 chips but topology"},
      {"dp=128", "uses 128 chips"},
      {"tp=8@z,dp=8", "no dimension 'z'"},
      {"tp=3,dp=21", "uses 63 chips"},
      {"tp=16@x,dp=4", "those dimensions hold only 8 of its chips"},
      {"dp=8,dp=8", "given twice"},
      {"tp=64", "tp=64 does not divide the 16 attention heads"},
      {"dp=8@x,tp=8@x", "x has 1 chips left"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    GError *err = NULL;
    ts_result r;
    gboolean ok = predict(m, t, cases[i].split, 512, FALSE, &r, &err);
    cr_assert(!ok, "split '%s' accepted", cases[i].split);
    cr_assert(strstr(err->message, cases[i].expect) != NULL, "'%s': '%s' lacks '%s'",
              cases[i].split, err->message, cases[i].expect);
    g_error_free(err);
  }
}

Test(plan, batch_errors)
{
  g_autoptr(ts_model) m = load_model("bert-large");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  GError *err = NULL;
  ts_result r;
  cr_assert(!predict(m, t, "dp=64", 100, FALSE, &r, &err));
  cr_assert(strstr(err->message, "--global-batch 100: expected a positive multiple of the "
                                 "data-parallel degree 64"),
            "%s", err->message);
  g_clear_error(&err);
}

Test(plan, placement_puts_tensor_parallel_inside_dimension)
{
  g_autoptr(ts_model) m = load_model("bert-large");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  GError *err = NULL;
  g_autoptr(ts_split) s = ts_split_parse("tp=4,dp=16", &err);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 64;
  g_autoptr(ts_plan) p = ts_plan_new(m, t, s, &po, &err);
  cr_assert_not_null(p, "%s", err ? err->message : "");
  /* tp takes the contiguous inner 4 of x; dp the other factor 2 of x (stride 4) and y. */
  cr_assert_eq(p->shape[TS_AX_TP].npieces, 1);
  cr_assert_eq(p->shape[TS_AX_TP].p[0].size, 4);
  cr_assert_eq(p->shape[TS_AX_TP].p[0].stride, 1);
  cr_assert_eq(p->shape[TS_AX_DP].p[0].size, 2);
  cr_assert_eq(p->shape[TS_AX_DP].p[0].stride, 4);
  cr_assert_str_eq(p->placement_text, "tp@x:4,dp@x:2+y");
  cr_assert_str_eq(p->split_text, "tp=4,dp=16");
}

Test(plan, memory_without_sharding_is_16_bytes_per_parameter)
{
  /* ZeRO paper (Rajbhandari et al. 2020, section 3.1): mixed-precision Adam keeps
   * (2 + 2 + 12) bytes per parameter when nothing is sharded. */
  g_autoptr(ts_model) m = load_model("bert-large");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  GError *err = NULL;
  g_autoptr(ts_split) s = ts_split_parse("dp=64", &err);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 64;
  g_autoptr(ts_plan) p = ts_plan_new(m, t, s, &po, &err);
  double psi = ts_model_params(m);
  double states = p->mem.params + p->mem.grads + p->mem.optimizer;
  cr_assert_float_eq(states, 16.0 * psi, 16.0 * psi * 1e-12);
  /* Tensor parallelism divides every split layer's parameters by tp. */
  g_autoptr(ts_split) s8 = ts_split_parse("tp=8,dp=8", &err);
  g_autoptr(ts_plan) p8 = ts_plan_new(m, t, s8, &po, &err);
  double ratio = p->params_per_chip / p8->params_per_chip;
  /* Not exactly 8: layer norms, the pooler and the position embeddings stay whole. */
  cr_assert(ratio > 7.5 && ratio <= 8.0, "tp=8 keeps %g of the parameters", 1 / ratio);
}

Test(plan, tensor_parallel_collectives_follow_megatron)
{
  /* Megatron-LM (Shoeybi et al. 2019, section 3): two all-reduces forward and two backward
   * per transformer layer, each of the activation s*b*h. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  GError *err = NULL;
  g_autoptr(ts_split) s = ts_split_parse("tp=8,dp=8", &err);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 16;
  g_autoptr(ts_plan) p = ts_plan_new(m, t, s, &po, &err);
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &err);
  int ar = 0, ag = 0;
  double act = (double)m->t_seq * (double)m->t_hidden * m->dtype_bytes * (double)p->micro_batch;
  for (int i = 0; i < tr->programs[0].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
    if (o->kind != TS_OP_COLL || o->cat != TS_CAT_COMM_TP)
      continue;
    if (o->coll == TS_COLL_ALLREDUCE) {
      ar++;
      cr_assert_float_eq(o->bytes, act, act * 1e-12, "TP all-reduce of %g bytes", o->bytes);
    } else {
      ag++;
    }
  }
  /* 4 per layer, plus the embedding's forward and the logits' backward all-reduce. */
  cr_assert_eq(ar, 4 * (int)m->t_layers + 2, "%d all-reduces", ar);
  cr_assert_eq(ag, 0);
}

/* The host's synchronisation after a pipeline exchange (ts_cost_host_sync) holds the ops the
 * host launches after the exchange ends, not those started while it runs (they were issued
 * before it), in both backends. Rank 0 sends 1 s of data while three one-kernel ops of 0.5 s
 * (launch 0.1 s) run in a chain: the first ends at 0.6 (its launch, then its work), the
 * second at 1.1; the third starts at 1.1, after the exchange, so its launch waits for it:
 * 1.0 + 0.1 + 0.5 = 1.6. Held to the exchange from its start (the analytic backend before
 * 2026-12-02), the first op ended at 1.1 and the step at 2.1. */
Test(engine, pipeline_sync_holds_only_later_launches)
{
  g_autoptr(ts_topo) t = ring_topo(2, 1e9, 0);
  t->chip.kernel_launch_s = 0.1;
  g_autoptr(ts_trace) tr = pp2_trace(t);
  ts_op s = {.kind = TS_OP_SEND, .stream = 2, .axis = 0, .offset = 1, .bytes = 1e9};
  s.label = ts_trace_label(tr, "send");
  ts_trace_append(tr, 0, &s, NULL, 0);
  ts_op_shape sh = {.oclass = TS_OPC_OTHER, .kernels = 1};
  ts_op c = {.kind = TS_OP_COMPUTE, .stream = 0, .flops = 0.5e12, .shape = &sh};
  c.label = ts_trace_label(tr, "layer");
  for (int i = 0; i < 3; i++)
    ts_trace_append(tr, 0, &c, NULL, 0);
  ts_op r = s;
  r.kind = TS_OP_RECV;
  r.offset = -1;
  ts_trace_append(tr, 1, &r, NULL, 0);
  const char *backends[] = {"analytic", "simgrid"};
  for (int b = 0; b < 2; b++) {
    ts_replay_result rr;
    GError *err = NULL;
    ts_run_options ro = {.backend = backends[b], .sg_cfg = NULL, .full = TRUE};
    cr_assert(ts_run_replay(tr, t, &ro, &rr, &err), "%s: %s", backends[b], err ? err->message : "");
    cr_assert(fabs(rr.step_time_s - 1.6) <= 1e-6 * 1.6, "%s: step %.17g s, expected 1.6 s",
              backends[b], rr.step_time_s);
  }
}

/* Ops with one to six successors (issue 15, twelfth pass: an op's state names its first two
 * successors itself and keeps a list for more): a root of 1 s fans out to n children on their
 * own streams (child k takes (k + 1) / 4 s), a wait joins them, and a last op of 1 s follows the
 * root on its stream and the wait. Every span is its closed form, whether the engine queues the
 * fixed durations itself or asks the backend's start() (the end stored in the state). */
Test(engine, fan_out_successors_by_closed_form)
{
  g_autoptr(ts_topo) t = ring_topo(1, 1e9, 0);
  for (int n = 1; n <= 5; n++)
    for (int fixed = 0; fixed < 2; fixed++) {
      g_autoptr(ts_trace) tr = ts_trace_new(t);
      ts_group_shape none = {0};
      ts_trace_add_axis(tr, "dp", 1, TRUE, &none);
      ts_trace_set_programs(tr, 1);
      ts_op c = {.kind = TS_OP_COMPUTE, .stream = 0, .flops = 1e12}; /* 1 s */
      c.label = ts_trace_label(tr, "op");
      int root = ts_trace_append(tr, 0, &c, NULL, 0), kids[8];
      for (int k = 0; k < n; k++) {
        ts_op o = c;
        o.stream = k + 1;
        o.flops = (k + 1) * 0.25e12;
        kids[k] = ts_trace_append(tr, 0, &o, &root, 1);
      }
      ts_op w = {.kind = TS_OP_WAIT, .stream = 99, .label = c.label};
      int wait = ts_trace_append(tr, 0, &w, kids, n);
      int last = ts_trace_append(tr, 0, &c, &wait, 1); /* after root on stream 0 too */
      ts_backend *b = ts_backend_analytic_new(t);
      cr_assert_not_null(b->fixed_seconds, "one chip without launch costs");
      if (!fixed) {
        b->fixed_seconds = NULL;
        b->queue = NULL;
      }
      ts_replay *r = ts_replay_new(tr, b, TS_REPLAY_FULL);
      ts_replay_keep_spans(r, TRUE);
      ts_replay_result res;
      g_autoptr(GError) err = NULL;
      cr_assert(ts_replay_run(r, &res, &err), "%s", err ? err->message : "");
      const GArray *sp = ts_replay_spans(r);
      cr_assert_eq(sp->len, (guint)(n + 3));
      double join = 1.0 + n * 0.25;
      for (guint i = 0; i < sp->len; i++) {
        const ts_span *s = &g_array_index(sp, ts_span, i);
        double s0 = s->op == root ? 0.0 : s->op == wait ? join : s->op == last ? join : 1.0;
        double e0 = s->op == root   ? 1.0
                    : s->op == wait ? join
                    : s->op == last ? join + 1.0
                                    : 1.0 + s->op * 0.25; /* child k is op k + 1 */
        cr_assert(fabs(s->start_s - s0) <= 1e-12 && fabs(s->end_s - e0) <= 1e-12,
                  "n=%d fixed=%d op %d: [%.17g, %.17g], expected [%g, %g]", n, fixed, s->op,
                  s->start_s, s->end_s, s0, e0);
      }
      cr_assert_float_eq(res.step_time_s, join + 1.0, 1e-12, "n=%d fixed=%d", n, fixed);
      cr_assert_eq(res.events, n + 2, "n=%d: %" G_GINT64_FORMAT " events", n, res.events);
      ts_replay_free(r);
      ts_backend_free(b);
    }
}
