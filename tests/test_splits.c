/* Tests of the splits (pipeline, recomputation, sequence parallelism, ZeRO, offload, parameter
 * servers, per-layer hybrids) and the memory model: closed forms from the papers they follow. */
#include "ts_plan.h"
#include "ts_plan_priv.h"
#include "ts_replay.h"
#include "ts_run.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static ts_topo *load_topo(const char *name)
{
  g_autofree char *path = g_strdup_printf("%s/topologies/%s.ini", TS_SOURCE_DIR, name);
  GError *err = NULL;
  ts_topo *t = ts_topo_load(path, &err);
  cr_assert_not_null(t, "%s", err ? err->message : "");
  return t;
}

static ts_model *load_model(const char *name)
{
  g_autofree char *path = g_strdup_printf("%s/models/%s.ini", TS_SOURCE_DIR, name);
  GError *err = NULL;
  ts_model *m = ts_model_load(path, &err);
  cr_assert_not_null(m, "%s", err ? err->message : "");
  return m;
}

/* n chips in a ring; links so fast and latency-free that point-to-point costs vanish. */
static ts_topo *ring_topo(int n, double bw, double lat)
{
  ts_topo *t = g_new0(ts_topo, 1);
  t->name = g_strdup("ring");
  t->chip.name = g_strdup("chip");
  t->chip.peak_flops = 1e12;
  t->chip.compute_efficiency = 1.0;
  t->chip.memory_bw_Bps = 1e12;
  t->chip.memory_bytes = 1e12;
  t->chip.host_link_bw_Bps = 1e10;
  t->chip.host_memory_bytes = 1e13;
  t->chip.host_flops = 1e11;
  t->chip.nvme_bw_Bps = 1e9;
  t->chip.nvme_bytes = 1e14;
  t->ndims = 1;
  t->dims[0] = (ts_dim){g_strdup("x"), n, TS_SHAPE_RING, bw, lat};
  t->nchips = n;
  return t;
}

/* A model of n equal layers: each `flops` forward, twice that backward, `params` parameters,
 * `act` bytes kept per sample, one-element activations between layers (so pipeline transfers
 * cost nothing), and device-memory traffic of only its weights. */
static ts_model *equal_model(int n, double flops, double params, double act)
{
  ts_model *m = g_new0(ts_model, 1);
  m->name = g_strdup("equal");
  m->kind = g_strdup("layers");
  m->dtype_bytes = 2;
  m->nlayers = n;
  m->layers = g_new0(ts_layer, n);
  for (int i = 0; i < n; i++) {
    ts_layer *l = &m->layers[i];
    l->name = g_strdup_printf("blk.%d", i);
    l->kind = TS_LAYER_DENSE;
    l->tp = TS_TP_REPLICATED;
    l->in_features = l->out_features = 1;
    l->tokens = 1;
    l->params = params;
    l->fwd_flops = flops;
    l->bwd_input_flops = flops;
    l->bwd_weight_flops = flops;
    l->fwd_mem_bytes = 2 * params;
    l->bwd_mem_bytes = 4 * params;
    l->in_act_elems = l->out_act_elems = 1;
    l->saved_act_bytes = act;
  }
  m->sample_elems = 1;
  return m;
}

static ts_plan *make_plan(const ts_model *m, const ts_topo *t, const char *split, gint64 batch,
                          gint64 micro)
{
  GError *err = NULL;
  g_autoptr(ts_split) s = ts_split_parse(split, &err);
  cr_assert_not_null(s, "%s: %s", split, err ? err->message : "");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  po.micro_batch = micro;
  ts_plan *p = ts_plan_new(m, t, s, &po, &err);
  cr_assert_not_null(p, "%s: %s", split, err ? err->message : "");
  return p;
}

static void replay_plan(const ts_plan *p, ts_replay_result *rr)
{
  GError *err = NULL;
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &err);
  cr_assert_not_null(tr, "%s", err ? err->message : "");
  ts_run_options ro = {"analytic", NULL, FALSE};
  cr_assert(ts_run_replay(tr, p->topo, &ro, rr, &err), "%s", err ? err->message : "");
}

/* Idle share of the critical rank's forward + backward + idle time: the pipeline bubble. */
static double bubble_fraction(const ts_replay_result *rr)
{
  double work = rr->critical.cat_s[TS_CAT_FWD] + rr->critical.cat_s[TS_CAT_BWD];
  return rr->critical.idle_s / (rr->critical.idle_s + work);
}

/* ---- pipeline ------------------------------------------------------------------------- */

Test(pipeline, gpipe_bubble_emerges_from_replay)
{
  /* GPipe (Huang et al. 2019, section 2.2): with P equal stages and M micro-batches, each
   * stage idles (P - 1) of the M + P - 1 slots: bubble fraction (P - 1) / (M + P - 1). */
  const int Ps[] = {2, 4, 8}, Ms[] = {1, 4, 8, 16};
  for (size_t a = 0; a < G_N_ELEMENTS(Ps); a++)
    for (size_t b = 0; b < G_N_ELEMENTS(Ms); b++) {
      int P = Ps[a], M = Ms[b];
      g_autoptr(ts_topo) t = ring_topo(P, 1e18, 0);
      g_autoptr(ts_model) m = equal_model(2 * P, 1e9, 1000, 1e6);
      g_autofree char *split = g_strdup_printf("pp=%d,schedule=gpipe", P);
      g_autoptr(ts_plan) p = make_plan(m, t, split, M, 1);
      ts_replay_result rr;
      replay_plan(p, &rr);
      double got = bubble_fraction(&rr), want = (double)(P - 1) / (M + P - 1);
      cr_assert_float_eq(got, want, 1e-6, "P=%d M=%d: bubble %.9f, expected (P-1)/(M+P-1) = %.9f",
                         P, M, got, want);
    }
}

Test(pipeline, one_f_one_b_has_gpipe_bubble)
{
  /* PipeDream-Flush (Narayanan et al. 2021, section 3.1) reorders work, not its amount: the
   * same (P - 1) / (M + P - 1) bubble as GPipe. */
  const int Ps[] = {2, 4, 8}, Ms[] = {1, 4, 8, 16};
  for (size_t a = 0; a < G_N_ELEMENTS(Ps); a++)
    for (size_t b = 0; b < G_N_ELEMENTS(Ms); b++) {
      int P = Ps[a], M = Ms[b];
      g_autoptr(ts_topo) t = ring_topo(P, 1e18, 0);
      g_autoptr(ts_model) m = equal_model(3 * P, 1e9, 1000, 1e6);
      g_autofree char *split = g_strdup_printf("pp=%d,schedule=1f1b", P);
      g_autoptr(ts_plan) p = make_plan(m, t, split, M, 1);
      ts_replay_result rr;
      replay_plan(p, &rr);
      double got = bubble_fraction(&rr), want = (double)(P - 1) / (M + P - 1);
      cr_assert_float_eq(got, want, 1e-6, "P=%d M=%d: bubble %.9f, expected %.9f", P, M, got,
                         want);
    }
}

Test(pipeline, interleaved_bubble_shrinks_by_chunks)
{
  /* Megatron-LM interleaved schedule (Narayanan et al. 2021 SC, section 2.2): the bubble time
   * is (P - 1) / V chunk-slots of the whole-stage work, so the fraction of the step is
   * (P - 1) / (V M + P - 1). */
  const int Ps[] = {2, 4}, Vs[] = {2, 3}, Ms[] = {4, 8};
  for (size_t a = 0; a < G_N_ELEMENTS(Ps); a++)
    for (size_t v = 0; v < G_N_ELEMENTS(Vs); v++)
      for (size_t b = 0; b < G_N_ELEMENTS(Ms); b++) {
        int P = Ps[a], V = Vs[v], M = Ms[b];
        g_autoptr(ts_topo) t = ring_topo(P, 1e18, 0);
        g_autoptr(ts_model) m = equal_model(P * V, 1e9, 1000, 1e6);
        g_autofree char *split = g_strdup_printf("pp=%d,schedule=interleaved:%d", P, V);
        g_autoptr(ts_plan) p = make_plan(m, t, split, M, 1);
        ts_replay_result rr;
        replay_plan(p, &rr);
        double got = bubble_fraction(&rr), want = (double)(P - 1) / (V * M + P - 1);
        cr_assert_float_eq(got, want, 1e-6, "P=%d V=%d M=%d: bubble %.9f, expected %.9f", P, V,
                           M, got, want);
      }
}

Test(pipeline, in_flight_activations)
{
  /* 1F1B holds at most P micro-batches of activations on the first stage (P - s on stage s);
   * GPipe holds all M (Narayanan et al. 2021, section 3.1). Counted from the schedule. */
  int P = 4, M = 16;
  double act = 1e6; /* per layer per sample */
  g_autoptr(ts_topo) t = ring_topo(P, 1e18, 0);
  g_autoptr(ts_model) m = equal_model(2 * P, 1e9, 1000, act);
  g_autoptr(ts_plan) f = make_plan(m, t, "pp=4,schedule=1f1b", M, 1);
  g_autoptr(ts_plan) g = make_plan(m, t, "pp=4,schedule=gpipe", M, 1);
  for (int s = 0; s < P; s++) {
    double a1 = f->stage_mem[s].activations, n1 = f->stage_mem[s].inflight;
    double a2 = g->stage_mem[s].activations;
    double want1 = (P - s) * 2 * act, want2 = M * 2 * act;
    cr_assert_float_eq(a1, want1, want1 * 1e-12, "1f1b stage %d: %g bytes, expected %g", s, a1,
                       want1);
    cr_assert_float_eq(n1, (double)(P - s), 1e-12);
    cr_assert_float_eq(a2, want2, want2 * 1e-12, "gpipe stage %d: %g, expected %g", s, a2, want2);
  }
  double worst = f->mem.inflight;
  cr_assert_float_eq(worst, (double)P, 1e-12, "1F1B holds %g micro-batches, expected P", worst);
}

Test(pipeline, stages_balanced_by_compute)
{
  /* Layers of unequal cost: the planner cuts so the slowest stage is as fast as it can be. */
  g_autoptr(ts_topo) t = ring_topo(2, 1e18, 0);
  g_autoptr(ts_model) m = equal_model(6, 1e9, 1000, 1e6);
  m->layers[0].fwd_flops = m->layers[0].bwd_input_flops = m->layers[0].bwd_weight_flops = 4e9;
  g_autoptr(ts_plan) p = make_plan(m, t, "pp=2", 2, 1);
  /* Costs 4,1,1,1,1,1: the best cut is {4} | {1,1,1,1,1}. */
  cr_assert_eq(p->stage_first[1], 1, "cut after layer %d", p->stage_first[1]);
  g_autoptr(ts_plan) q = make_plan(m, t, "pp=2,stages=3:3", 2, 1);
  cr_assert_eq(q->stage_first[1], 3);
}

Test(pipeline, sends_activations_between_stages)
{
  /* Every micro-batch crosses each stage boundary once forward and once backward. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8@x,pp=8@y", 16, 2);
  GError *err = NULL;
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &err);
  int P = 8, M = (int)p->n_micro;
  double act = (double)m->t_seq * (double)m->t_hidden * m->dtype_bytes * 2;
  for (int s = 0; s < P; s++) {
    int sends = 0, recvs = 0;
    for (int i = 0; i < tr->programs[s].nops; i++) {
      const ts_op *o = &tr->programs[s].ops[i];
      if (o->cat != TS_CAT_COMM_PP)
        continue;
      if (o->kind == TS_OP_SEND)
        sends++;
      if (o->kind == TS_OP_RECV)
        recvs++;
      if (o->kind == TS_OP_SEND || o->kind == TS_OP_RECV)
        cr_assert(o->bytes == act || strstr(g_ptr_array_index(tr->labels, o->label), "tied"),
                  "stage %d: %g bytes, expected s*b*h*2 = %g", s, o->bytes, act);
    }
    int boundaries = (s > 0) + (s < P - 1);
    int tied = (s == 0 || s == P - 1) ? 1 : 0;
    cr_assert_eq(sends, boundaries * M + tied, "stage %d: %d sends", s, sends);
    cr_assert_eq(recvs, boundaries * M + tied, "stage %d: %d recvs", s, recvs);
  }
  /* The collapsed replay (one rank per stage) equals the full one. */
  ts_replay_result a, b;
  ts_run_options ro = {"analytic", NULL, FALSE}, rf = {"analytic", NULL, TRUE};
  cr_assert(ts_run_replay(tr, t, &ro, &a, &err), "%s", err ? err->message : "");
  cr_assert(ts_run_replay(tr, t, &rf, &b, &err), "%s", err ? err->message : "");
  double x = a.step_time_s, y = b.step_time_s;
  cr_assert_eq(x, y, "collapsed %.17g != full %.17g", x, y);
  cr_assert_eq(a.nsimulated, P);
}

/* ---- activations: recomputation and sequence parallelism ------------------------------- */

/* Activation bytes of one transformer block (block.1.*) per micro-batch per chip. */
static double block_act(const ts_plan *p, gboolean checkpoint)
{
  double s = 0;
  for (int i = 0; i < p->model->nlayers; i++)
    if (g_str_has_prefix(p->model->layers[i].name, "block.1."))
      s += checkpoint ? 0 : p->layer_act_bytes[i];
  return s;
}

Test(activations, korthikanti_table_2)
{
  /* Korthikanti et al. 2022, Table 2, activation memory per transformer layer (16-bit, with
   * dropout): none sbh(34 + 5as/h); tp: sbh(10 + 24/t + 5as/(ht)); tp+sp: sbh(34/t +
   * 5as/(ht)); tp + selective: sbh(10 + 24/t); tp+sp + selective: 34 sbh/t. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  double s = (double)m->t_seq, h = (double)m->t_hidden, a = (double)m->t_heads, b = 2, tt = 8;
  double sbh = s * b * h;
  const struct {
    const char *split;
    double want;
  } cases[] = {
      {"dp=64", sbh * (34 + 5 * a * s / h)},
      {"tp=8,dp=8", sbh * (10 + 24 / tt + 5 * a * s / (h * tt))},
      {"tp=8,dp=8,sp", sbh * (34 / tt + 5 * a * s / (h * tt))},
      {"tp=8,dp=8,recompute=selective", sbh * (10 + 24 / tt)},
      {"tp=8,dp=8,sp,recompute=selective", sbh * 34 / tt},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(ts_plan) p = make_plan(m, t, cases[i].split, 128, 2);
    double got = block_act(p, FALSE);
    cr_assert_float_eq(got, cases[i].want, cases[i].want * 1e-12,
                       "%s: %.17g bytes per layer, expected %.17g", cases[i].split, got,
                       cases[i].want);
  }
}

Test(activations, full_recompute_keeps_block_inputs)
{
  /* Full recomputation keeps 2sbh per layer (Korthikanti et al. 2022, Table 2), and 2sbh/t
   * with sequence parallelism; the forward is run twice (one more forward per backward). */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  double s = (double)m->t_seq, h = (double)m->t_hidden, b = 2, L = (double)m->t_layers;
  g_autoptr(ts_plan) none = make_plan(m, t, "tp=8,dp=8", 128, 2);
  g_autoptr(ts_plan) full = make_plan(m, t, "tp=8,dp=8,recompute=full", 128, 2);
  g_autoptr(ts_plan) fsp = make_plan(m, t, "tp=8,dp=8,sp,recompute=full", 128, 2);
  /* Whole model: blocks keep their input; embedding and logits are kept whole. */
  double outside = 0;
  for (int i = 0; i < m->nlayers; i++)
    if (!g_str_has_prefix(m->layers[i].name, "block."))
      outside += none->layer_act_bytes[i];
  double want = L * 2 * s * b * h + outside;
  double got = full->mem.activations;
  cr_assert_float_eq(got, want, want * 1e-12, "full: %.17g, expected %.17g", got, want);
  double outside_sp = 0;
  for (int i = 0; i < m->nlayers; i++)
    if (!g_str_has_prefix(m->layers[i].name, "block."))
      outside_sp += fsp->layer_act_bytes[i];
  double want_sp = L * 2 * s * b * h / 8 + outside_sp;
  double got_sp = fsp->mem.activations;
  cr_assert_float_eq(got_sp, want_sp, want_sp * 1e-12, "full+sp: %.17g, expected %.17g", got_sp,
                     want_sp);
  /* Compute: every block's forward once more. */
  GError *err = NULL;
  g_autoptr(ts_trace) a = ts_plan_trace(none, &err);
  g_autoptr(ts_trace) c = ts_plan_trace(full, &err);
  double fa = 0, fc = 0, blocks_fwd = 0;
  for (int i = 0; i < a->programs[0].nops; i++)
    fa += a->programs[0].ops[i].flops;
  for (int i = 0; i < c->programs[0].nops; i++)
    fc += c->programs[0].ops[i].flops;
  for (int i = 0; i < m->nlayers; i++)
    if (g_str_has_prefix(m->layers[i].name, "block."))
      blocks_fwd += m->layers[i].fwd_flops * b * (double)none->n_micro / full->exec[i].cdiv;
  double extra = fc - fa;
  cr_assert_float_eq(extra, blocks_fwd, blocks_fwd * 1e-9, "recompute adds %.17g FLOP, expected %.17g",
                     extra, blocks_fwd);
}

/* ---- ZeRO ----------------------------------------------------------------------------- */

Test(zero, model_state_memory_formulas)
{
  /* Rajbhandari et al. 2020, section 5.1 / Figure 1, Psi parameters, K = 12, N ranks:
   * baseline (2 + 2 + K) Psi; P_os 4 Psi + K Psi / N; P_os+g 2 Psi + (2 + K) Psi / N;
   * P_os+g+p (2 + 2 + K) Psi / N. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  double psi = ts_model_params(m), K = 12, N = 64;
  const double want[4] = {(2 + 2 + K) * psi, 4 * psi + K * psi / N,
                          2 * psi + (2 + K) * psi / N, (2 + 2 + K) * psi / N};
  for (int z = 0; z <= 3; z++) {
    g_autofree char *split = g_strdup_printf("dp=64,zero=%d", z);
    g_autoptr(ts_plan) p = make_plan(m, t, split, 64, 1);
    double got = p->mem.params + p->mem.grads + p->mem.optimizer;
    cr_assert_float_eq(got, want[z], want[z] * 1e-9, "zero=%d: %.17g bytes, expected %.17g", z,
                       got, want[z]);
  }
}
