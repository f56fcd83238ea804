/* Tests of the splits (pipeline, recomputation, sequence parallelism, ZeRO, offload, parameter
 * servers, per-layer hybrids) and the memory model: closed forms from the papers they follow. */
#include "ts_coll.h"
#include "ts_plan.h"
#include "ts_plan_priv.h"
#include "ts_replay.h"
#include "ts_run.h"
#include "ts_trace.h"
#include "ts_util.h"

#include "ts_test.h"
#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

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
    l->src = i - 1; /* a chain */
    l->block = i;   /* each layer a block of its own, as its name says */
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

static void replay_plan(const ts_plan *p, ts_replay_result *rr)
{
  g_autoptr(ts_trace) tr = trace_of(p);
  GError *err = NULL;
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  cr_assert(ts_run_replay(tr, p->topo, &ro, rr, &err), "%s", err ? err->message : "");
}

/* Idle share of the critical rank's forward + backward + idle time: the pipeline bubble. */
/* The parameters of layers [first, last) of a plan, and how many of them have any. */
static double layers_params(const ts_plan *p, int first, int last, int *with_params)
{
  double params = 0;
  int n = 0;
  for (int i = first; i < last; i++) {
    params += ts_plan_layer_params(p, i);
    n += ts_plan_layer_params(p, i) > 0;
  }
  if (with_params != NULL)
    *with_params = n;
  return params;
}

static double bubble_fraction(const ts_replay_result *rr)
{
  double work = rr->critical.cat_s[TS_CAT_FWD] + rr->critical.cat_s[TS_CAT_BWD];
  return rr->critical.idle_s / (rr->critical.idle_s + work);
}

/* Ops of program `prog` whose label contains `needle`. */
static int count_ops(const ts_trace *tr, int prog, const char *needle, double *bytes)
{
  int n = 0;
  if (bytes != NULL)
    *bytes = 0;
  for (int i = 0; i < tr->programs[prog].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[prog], i), *o = &o_;
    if (strstr(g_ptr_array_index(tr->labels, o->label), needle) == NULL)
      continue;
    n++;
    if (bytes != NULL)
      *bytes += o->bytes;
  }
  return n;
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
      /* All of that idle time is spent waiting for pipeline receives: the reported bubble. */
      double bub = rr.critical.bubble_s, idle = rr.critical.idle_s;
      cr_assert_float_eq(bub, idle, 1e-12 + 1e-9 * idle, "P=%d M=%d: bubble %g s, idle %g s", P, M,
                         bub, idle);
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
      cr_assert_float_eq(got, want, 1e-6, "P=%d M=%d: bubble %.9f, expected %.9f", P, M, got, want);
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
        cr_assert_float_eq(got, want, 1e-6, "P=%d V=%d M=%d: bubble %.9f, expected %.9f", P, V, M,
                           got, want);
      }
}

/* p2p=blocking (Megatron-LM's and DeepSpeed's pipeline exchange): every pipeline send is a
 * dependency of the first compute-stream op after it on its stage; with async (the default) no
 * compute op waits for a send. With a send as long as a layer's forward the blocking step is
 * slower; with free links the two are the same step. */
Test(pipeline, blocking_sends_gate_the_next_compute)
{
  int P = 4, M = 8;
  g_autoptr(ts_model) m = equal_model(2 * P, 1e9, 1000, 1e6);
  for (int slow = 0; slow < 2; slow++) {
    /* 2 bytes a sample cross each boundary: 2 ms at 1000 B/s, a layer's forward is 1 ms. */
    g_autoptr(ts_topo) t = ring_topo(P, slow ? 1e3 : 1e18, 0);
    double step[2];
    for (int blocking = 0; blocking < 2; blocking++) {
      g_autoptr(ts_plan) p = make_plan(
          m, t, blocking ? "pp=4,schedule=1f1b,p2p=blocking" : "pp=4,schedule=1f1b", M, 1);
      cr_assert_eq(strstr(p->split_text, "p2p=blocking") != NULL, blocking, "%s", p->split_text);
      g_autoptr(ts_trace) tr = trace_of(p);
      int sends = 0, gated = 0;
      for (int q = 0; q < tr->nprograms; q++) {
        const ts_program *prog = &tr->programs[q];
        for (int i = 0; i < prog->nops; i++) {
          if (ts_program_op_kind(prog, i) != TS_OP_SEND)
            continue;
          int j = i + 1;
          while (j < prog->nops && ts_program_op(prog, j).stream != 0)
            j++;
          if (j == prog->nops)
            continue;
          sends++;
          int n;
          const int *d = ts_program_deps(prog, j, &n);
          for (int k = 0; k < n; k++)
            gated += d[k] == i;
        }
      }
      cr_assert_gt(sends, 0);
      cr_assert_eq(gated, blocking ? sends : 0, "%d of %d sends gate the next compute", gated,
                   sends);
      ts_replay_result rr;
      replay_plan(p, &rr);
      step[blocking] = rr.step_time_s;
    }
    if (slow)
      cr_assert_gt(step[1], step[0] * 1.05, "blocking %g s, async %g s", step[1], step[0]);
    else
      cr_assert_float_eq(step[1], step[0], 1e-9 * step[0], "blocking %g s, async %g s", step[1],
                         step[0]);
  }
}

/* load=sync (Megatron's broadcast_data reads each micro-batch's sizes back to the host): the
 * first compute op of every micro-batch's forward on the stages that load data (the first and
 * the last) makes its host wait for the device, and no other op does; without it none does.
 * Without a host queue (no launch cost) the step does not move; with one it can only grow. */
Test(pipeline, load_sync_waits_once_per_micro_batch_on_loading_stages)
{
  int P = 4, M = 8;
  g_autoptr(ts_model) m = equal_model(2 * P, 1e9, 1000, 1e6);
  for (int launch = 0; launch < 2; launch++) {
    g_autoptr(ts_topo) t = ring_topo(P, 1e18, 0);
    t->chip.kernel_launch_s = launch ? 3e-3 : 0.0; /* a layer's forward is 1 ms on the device */
    double step[2];
    for (int sync = 0; sync < 2; sync++) {
      g_autoptr(ts_plan) p =
          make_plan(m, t, sync ? "pp=4,schedule=1f1b,load=sync" : "pp=4,schedule=1f1b", M, 1);
      cr_assert_eq(strstr(p->split_text, "load=sync") != NULL, sync, "%s", p->split_text);
      g_autoptr(ts_trace) tr = trace_of(p);
      for (int q = 0; q < tr->nprograms; q++) {
        const ts_program *prog = &tr->programs[q];
        int synced = 0;
        for (int i = 0; i < prog->nops; i++) {
          if (ts_program_op_kind(prog, i) != TS_OP_COMPUTE)
            continue;
          const ts_op op = ts_program_op(prog, i);
          if (ts_cost_op_syncs(op.shape) && op.cat != TS_CAT_OPTIMIZER) {
            synced++;
            cr_assert_eq(op.cat, TS_CAT_FWD, "stage %d op %d: a synchronised %d op", q, i,
                         (int)op.cat);
          }
        }
        int want = sync && (q == 0 || q == P - 1) ? M : 0;
        cr_assert_eq(synced, want, "stage %d: %d synchronised forwards, expected %d", q, synced,
                     want);
      }
      ts_replay_result rr;
      replay_plan(p, &rr);
      step[sync] = rr.step_time_s;
    }
    if (launch)
      cr_assert_geq(step[1], step[0] * (1 - 1e-12), "sync %g s, async %g s", step[1], step[0]);
    else
      cr_assert_float_eq(step[1], step[0], 1e-12 * step[0], "sync %g s, async %g s", step[1],
                         step[0]);
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

Test(pipeline, interleaved_in_flight_activations)
{
  /* Interleaved 1F1B (Narayanan et al. 2021, section 2.2; Megatron-LM schedules.py,
   * forward_backward_pipelining_with_interleaving): device s runs (P - s - 1) * 2 + (V - 1) * P
   * warm-up forwards of chunks (1/V of its layers each), then one forward before each backward,
   * so it holds that count + 1 chunk-micro-batches at its peak: (P - s - 1) * 2 + (V - 1) * P + 1
   * over V micro-batches of its layers, P + (P - 1) / V on the first stage (Korthikanti et al.
   * 2022, section 4.2.3). With M = P every forward runs first: all M x V. */
  int P = 4, V = 2;
  double act = 1e6; /* per layer per sample; one layer a chunk */
  g_autoptr(ts_topo) t = ring_topo(P, 1e18, 0);
  g_autoptr(ts_model) m = equal_model(P * V, 1e9, 1000, act);
  int Ms[] = {8, 12, P};
  for (size_t k = 0; k < G_N_ELEMENTS(Ms); k++) {
    int M = Ms[k];
    g_autoptr(ts_plan) p = make_plan(m, t, "pp=4,schedule=interleaved:2", M, 1);
    for (int s = 0; s < P; s++) {
      int items = M == P ? M * V : MIN((P - s - 1) * 2 + (V - 1) * P + 1, M * V);
      double got = p->stage_mem[s].activations, want = items * act;
      cr_assert_float_eq(got, want, want * 1e-12, "M %d stage %d: %g bytes, expected %g", M, s, got,
                         want);
      cr_assert_float_eq(p->stage_mem[s].inflight, (double)items / V, 1e-12, "M %d stage %d", M, s);
    }
    if (M > P)
      cr_assert_float_eq(p->mem.inflight, P + (P - 1.0) / V, 1e-12, "M %d: %g micro-batches", M,
                         p->mem.inflight);
  }
}

Test(pipeline, torch_pipelining_keeps_receive_buffers_and_stage_outputs)
{
  /* fsdp2's pipelines are torch.distributed.pipelining's (torch 1963fc8, TorchTitan's
   * December 2024 runs): every stage allocates one receive buffer per micro-batch, for its
   * input (all but the first stage) and for its output's gradient (all but the last), and
   * keeps them; every stage keeps each micro-batch's output (output_chunks) from its forward
   * to the step's end. Boundaries of e elements at 2 bytes, M micro-batches of b samples
   * (unit = 2 e b bytes): at 1F1B's peak, after the last forward with P - s micro-batches in
   * flight, device 0 holds M units of gradient buffers and M outputs, the middle devices 3 M,
   * the last 2 M (input buffers, outputs), and every stage but the first the input gradient
   * of each micro-batch whose backward is done, M - (P - s) of them (autograd.backward leaves
   * it in the receive buffer's .grad until the next step's clear_runtime_states); the kept
   * activations are 1F1B's P - s micro-batches of 2 layers, nothing more. Megatron-style
   * pipelines (no fsdp2) hold none of it. */
  int P = 4, M = 8, b = 3;
  double e = 1000, act = 1e6, unit = 2.0 * e * b;
  g_autoptr(ts_topo) t = ring_topo(2 * P, 1e18, 0);
  g_autoptr(ts_model) m = equal_model(2 * P, 1e9, 1000, act);
  for (int i = 0; i < m->nlayers; i++)
    m->layers[i].in_act_elems = m->layers[i].out_act_elems = e;
  g_autoptr(ts_plan) torch = make_plan(m, t, "pp=4,dp=2,zero=3,fsdp2,schedule=1f1b", 2 * M * b, b);
  g_autoptr(ts_plan) mega = make_plan(m, t, "pp=4,dp=2,zero=1,schedule=1f1b", 2 * M * b, b);
  for (int s = 0; s < P; s++) {
    double want = ((s == 0 || s == P - 1 ? 2.0 : 3.0) * M + (s > 0 ? M - (P - s) : 0)) * unit;
    cr_assert_float_eq(torch->stage_mem[s].pipeline, want, 1e-9, "stage %d: %g bytes, expected %g",
                       s, torch->stage_mem[s].pipeline, want);
    cr_assert_float_eq(mega->stage_mem[s].pipeline, 0.0, 1e-12, "Megatron stage %d", s);
    double kept = (P - s) * 2 * act * b;
    cr_assert_float_eq(torch->stage_mem[s].activations, kept, 1e-6,
                       "stage %d: %g activation bytes, expected %g", s,
                       torch->stage_mem[s].activations, kept);
  }
}

Test(pipeline, torch_interleaved_keeps_the_warm_up_formula_at_m_equal_p)
{
  /* torch.distributed.pipelining's ScheduleInterleaved1F1B (TorchTitan; trainsim's fsdp2
   * stack) warms stage s up with (V - 1) x P + 2 (P - 1 - s) forwards, capped at M V
   * (_get_rank_warmup_ops, P micro-batches a round), also when M = P, where Megatron-LM runs
   * every forward first: at M = P = 4, V = 2 the stages hold 8, 8, 7, 5 chunk-micro-batches at
   * their peak instead of 8 each (the last device's logits of one micro-batch, not four). For
   * M > P both are the same schedule. */
  int P = 4, V = 2;
  double act = 1e6;
  g_autoptr(ts_topo) t = ring_topo(2 * P, 1e18, 0);
  g_autoptr(ts_model) m = equal_model(P * V, 1e9, 1000, act);
  int Ms[] = {P, 8};
  for (size_t k = 0; k < G_N_ELEMENTS(Ms); k++) {
    int M = Ms[k];
    g_autoptr(ts_plan) torch =
        make_plan(m, t, "pp=4,dp=2,zero=3,fsdp2,schedule=interleaved:2", 2 * M, 1);
    g_autoptr(ts_plan) mega = make_plan(m, t, "pp=4,dp=2,zero=1,schedule=interleaved:2", 2 * M, 1);
    for (int s = 0; s < P; s++) {
      int items = MIN((P - s - 1) * 2 + (V - 1) * P + 1, M * V);
      int mitems = M == P ? M * V : items;
      double got = torch->stage_mem[s].activations, want = items * act;
      cr_assert_float_eq(got, want, want * 1e-12, "fsdp2 M %d stage %d: %g bytes, expected %g", M,
                         s, got, want);
      double mgot = mega->stage_mem[s].activations, mwant = mitems * act;
      cr_assert_float_eq(mgot, mwant, mwant * 1e-12, "Megatron M %d stage %d: %g, expected %g", M,
                         s, mgot, mwant);
    }
    /* The trace runs the same order, and it replays (no device waits on a message sent
     * after what it waits for). */
    ts_replay_result rr = {0};
    replay_plan(torch, &rr);
    cr_assert(rr.step_time_s > 0, "M %d: step %g s", M, rr.step_time_s);
  }
}

Test(pipeline, fsdp2_accumulators_appear_at_each_chunks_first_backward)
{
  /* fsdp2 with pp: FSDP2 keeps each block's unsharded gradient in fp32 from the block's first
   * backward (FSDPParam.to_accumulated_grad_if_needed) to the chunk's last, which
   * reduce-scatters it; the schedule walk adds a chunk's accumulators (4 bytes a parameter) at
   * its first backward. P = 4 devices, 8 layers of w parameters keeping a bytes a sample,
   * w = a / 2, M = P micro-batches of one sample, no recomputation. 1F1B (2 layers a stage),
   * device 0: after its 4 forwards it holds 8a; after the first backward 6a and all 8w of
   * accumulators: the peak, 10a. Interleaved with V = 2 (one layer a chunk), torch's warm-up
   * runs all 8 forwards on device 0 (8a), then chunk 1's backwards (7a + 4w = 9a after the
   * first), then chunk 0's (3a + 8w = 7a): the peak holds 7a and one chunk's 4w. Counting
   * every accumulator through the step (as before) gave 8a + 8w for both. */
  int P = 4, M = 4;
  double a = 1e6, w = a / 2, shard = 4.0 * 2 * w / 2; /* fp32 gradient shards over dp = 2 */
  g_autoptr(ts_topo) t = ring_topo(2 * P, 1e18, 0);
  g_autoptr(ts_model) m = equal_model(2 * P, 1e9, w, a);
  g_autoptr(ts_plan) f = make_plan(m, t, "pp=4,dp=2,zero=3,fsdp2,schedule=1f1b", 2 * M, 1);
  g_autoptr(ts_plan) v = make_plan(m, t, "pp=4,dp=2,zero=3,fsdp2,schedule=interleaved:2", 2 * M, 1);
  const ts_memory *x = &f->stage_mem[0], *y = &v->stage_mem[0];
  cr_assert_float_eq(x->activations, 6 * a, 1e-6 * a, "1F1B: %g bytes, expected %g", x->activations,
                     6 * a);
  cr_assert_float_eq(x->grads, shard + 8 * w, 1e-6 * a, "1F1B: %g bytes, expected %g", x->grads,
                     shard + 8 * w);
  cr_assert_float_eq(y->activations, 7 * a, 1e-6 * a, "interleaved: %g bytes, expected %g",
                     y->activations, 7 * a);
  cr_assert_float_eq(y->grads, shard + 4 * w, 1e-6 * a, "interleaved: %g bytes, expected %g",
                     y->grads, shard + 4 * w);
}

Test(pipeline, stages_balanced_by_compute)
{
  /* Layers of unequal cost: the planner cuts so the slowest stage is as fast as it can be. */
  g_autoptr(ts_topo) t = ring_topo(2, 1e18, 0);
  t->chip.memory_bw_Bps = 0; /* FLOPs alone (no dense epilogue traffic, equal in every layer) */
  g_autoptr(ts_model) m = equal_model(6, 1e9, 1000, 1e6);
  m->layers[0].fwd_flops = m->layers[0].bwd_input_flops = m->layers[0].bwd_weight_flops = 4e9;
  g_autoptr(ts_plan) p = make_plan(m, t, "pp=2", 2, 1);
  /* Costs 4,1,1,1,1,1: the best cut is {4} | {1,1,1,1,1}. */
  cr_assert_eq(p->stage_first[1], 1, "cut after layer %d", p->stage_first[1]);
  g_autoptr(ts_plan) q = make_plan(m, t, "pp=2,stages=3:3", 2, 1);
  cr_assert_eq(q->stage_first[1], 3);
}

Test(pipeline, decoder_boundaries_carry_the_encoder_output)
{
  /* T5 (Raffel et al. 2020): every decoder layer's cross-attention reads the encoder output,
   * so a boundary inside the decoder sends it with the decoder activation (and its gradient
   * back), as Megatron-LM's T5 pipeline does; a boundary inside the encoder sends only the
   * activation. Per micro-batch of 2, bf16, each tp rank sends 1/8: encoder (512 x 512) and
   * decoder (114 x 512 + 512 x 512) elements. */
  g_autoptr(ts_model) m = load_model("t5-small");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8@x,pp=8@y", 16, 2);
  g_autoptr(ts_trace) tr = trace_of(p);
  double enc = 512.0 * 512 * 2 * 2 / 8, dec = (114.0 + 512) * 512 * 2 * 2 / 8;
  int n_enc = 0, n_dec = 0;
  for (int s = 0; s < 8; s++)
    for (int i = 0; i < tr->programs[s].nops; i++) {
      const ts_op o_ = ts_program_op(&tr->programs[s], i), *o = &o_;
      if (o->cat != TS_CAT_COMM_PP || o->kind != TS_OP_SEND ||
          strstr(g_ptr_array_index(tr->labels, o->label), "tied") != NULL)
        continue;
      double b = o->bytes;
      cr_expect(b == enc || b == dec, "stage %d sends %g bytes: expected %g or %g", s, b, enc, dec);
      n_enc += b == enc;
      n_dec += b == dec;
    }
  cr_expect(n_enc > 0 && n_dec > 0, "%d encoder and %d decoder boundary sends", n_enc, n_dec);
}

/* The bytes of every forward activation send (ops labelled "send activations") of a trace,
 * per stage; returns how many there were. */
static int forward_sends(const ts_trace *tr, int stages, double *bytes)
{
  int n = 0;
  for (int s = 0; s < stages; s++) {
    bytes[s] = 0;
    for (int i = 0; i < tr->programs[s].nops; i++) {
      const ts_op o_ = ts_program_op(&tr->programs[s], i), *o = &o_;
      const char *label = g_ptr_array_index(tr->labels, o->label);
      if (o->cat == TS_CAT_COMM_PP && o->kind == TS_OP_SEND &&
          strstr(label, "send activations") != NULL) {
        cr_expect(bytes[s] == 0 || bytes[s] == o->bytes, "stage %d sends %g then %g bytes", s,
                  bytes[s], o->bytes);
        bytes[s] = o->bytes;
        n++;
      }
    }
  }
  return n;
}

Test(pipeline, cells_send_both_inputs_of_the_next_cell)
{
  /* AmoebaNet (GPipe's test model): a cell reads the outputs of the two cells before it, so a
   * stage boundary between cells sends both (torchgpipe's AmoebaNet passes the pair between
   * partitions). AmoebaNet-D (18, 208), fp32, micro-batch 4, pp=4 on a 2x2 board. Cell
   * outputs (blocks 0-21, D = 208): stem cells 3D/2 x 56^2 and 3D x 28^2; stack 1 (blocks
   * 2-7) 4D x 28^2; reduction 6D x 14^2; stack 2 (9-14) 8D x 14^2; reduction 12D x 7^2;
   * stack 3 (16-21) 16D x 7^2. */
  g_autoptr(ts_model) m = load_model("amoebanet-d-18-208");
  g_autoptr(ts_topo) t = load_topo("tpu-v2-8");
  g_autoptr(ts_plan) p = make_plan(m, t, "pp=4", 32, 4);
  g_autoptr(ts_trace) tr = trace_of(p);
  double sent[4];
  cr_assert_eq(forward_sends(tr, 4, sent), 3 * 8, "3 boundaries x 8 micro-batches");
  const double D = 208;
  double cell_out[22];
  for (int b = 0; b < 22; b++)
    cell_out[b] = b == 0    ? 1.5 * D * 56 * 56
                  : b == 1  ? 3 * D * 28 * 28
                  : b < 8   ? 4 * D * 28 * 28
                  : b == 8  ? 6 * D * 14 * 14
                  : b < 15  ? 8 * D * 14 * 14
                  : b == 15 ? 12 * D * 7 * 7
                            : 16 * D * 7 * 7;
  for (int k = 0; k < 3; k++) {
    const ts_layer *l = &m->layers[p->stage_first[k + 1] - 1];
    int b = l->block;
    cr_assert(b >= 1 && m->layers[p->stage_first[k + 1]].block == b + 1,
              "stage %d ends at a cell (%s)", k, l->name);
    double want = (cell_out[b] + cell_out[b - 1]) * 4 /* fp32 */ * 4 /* micro-batch */;
    cr_expect_eq(sent[k], want, "stage %d after %s sends %g bytes, expected %g", k, l->name,
                 sent[k], want);
  }
}

Test(pipeline, cut_inside_a_residual_block_sends_the_shortcut)
{
  /* ResNet-50 cut by hand inside its first bottleneck, after layer1.0.conv1. The block's
   * projection shortcut runs first (on stage 0) and its output, 256 x 56 x 56, is added by
   * layer1.0.bn3 on stage 1: the boundary sends it with conv1's output (64 x 56 x 56). */
  g_autoptr(ts_model) m = load_model("resnet50");
  g_autoptr(ts_topo) t = ring_topo(2, 1e12, 0);
  int cut = -1;
  for (int i = 0; i < m->nlayers && cut < 0; i++)
    if (strcmp(m->layers[i].name, "layer1.0.bn1") == 0)
      cut = i;
  cr_assert_gt(cut, 0);
  g_autofree char *split = g_strdup_printf("pp=2,stages=%d:%d", cut, m->nlayers - cut);
  g_autoptr(ts_plan) p = make_plan(m, t, split, 8, 2);
  g_autoptr(ts_trace) tr = trace_of(p);
  double sent[2];
  cr_assert_eq(forward_sends(tr, 2, sent), 4);
  double conv1_out = 64.0 * 56 * 56, shortcut = 256.0 * 56 * 56;
  cr_expect_eq(sent[0], (conv1_out + shortcut) * 2 /* fp16 */ * 2 /* micro-batch */,
               "sent %g bytes", sent[0]);
}

Test(pipeline, t5_embedding_group)
{
  /* T5 shares one word-embedding table among the encoder embedding, the decoder embedding and
   * the logits. With pp=4, T5-Small's encoder embedding is on device 0, the logits on device
   * 3 and the decoder embedding on a middle device: both of those keep a copy of the table
   * (32128 x 512 / tp) and the three all-reduce its gradient, here as a direct exchange: each
   * sends its copy's gradient to the two others (Megatron-LM's embedding group). */
  g_autoptr(ts_model) m = load_model("t5-small");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=4@x,pp=4@y,dp=4", 64, 2);
  int dec = -1;
  for (int i = 0; i < m->nlayers && dec < 0; i++)
    if (strcmp(m->layers[i].name, "decoder.embedding") == 0)
      dec = i;
  int dd = ts_plan_stage_of_layer(p, dec);
  cr_assert(dd == 1 || dd == 2, "decoder embedding on device %d", dd);
  int dev[4];
  double copy[4];
  cr_assert_eq(ts_plan_tied_group(p, dev, copy), 3);
  double table = 32128.0 * 512 / 4;
  cr_expect(dev[0] == 0 && dev[1] == dd && dev[2] == 3, "group %d %d %d", dev[0], dev[1], dev[2]);
  cr_expect(copy[1] == table && copy[2] == table, "copies %g %g", copy[1], copy[2]);
  /* The copy is on top of the device's own layers. */
  double own = 0;
  for (int i = p->stage_first[dd]; i < p->stage_first[dd + 1]; i++)
    own += ts_plan_layer_params(p, i);
  cr_expect_float_eq(ts_plan_device_params(p, dd), own + table, 1e-9 * own);
  g_autoptr(ts_trace) tr = trace_of(p);
  for (int s = 0; s < 4; s++) {
    double bytes;
    int sends = count_ops(tr, s, "send tied embedding gradient", &bytes);
    gboolean member = s == 0 || s == dd || s == 3;
    cr_expect_eq(sends, member ? 2 : 0, "device %d sends %d", s, sends);
    cr_expect_eq(bytes, member ? 2 * table * 2 : 0.0, "device %d sends %g bytes", s, bytes);
  }
}

Test(pipeline, encoder_output_held_for_the_decoder)
{
  /* Without a pipeline the activations held are every layer's kept bytes plus the encoder
   * output, once per micro-batch (the cross-attentions read it forward and backward). With
   * pp=8 under 1F1B, a decoder stage holds it once per micro-batch in flight; an encoder-only
   * stage never does. T5-Small, bf16, micro-batch 2: 512 x 512 x 2 x 2 bytes. */
  g_autoptr(ts_model) m = load_model("t5-small");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  double enc_out = 512.0 * 512 * 2 * 2;
  g_autoptr(ts_plan) flat = make_plan(m, t, "dp=64", 128, 2);
  double kept = 0;
  for (int i = 0; i < m->nlayers; i++)
    kept += flat->layer_act_bytes[i]; /* on a TPU the loss keeps bf16 logits (XLA fuses) */
  double got = flat->mem.activations;
  cr_expect_float_eq(got, kept + enc_out, 1e-9 * got, "%g bytes, expected %g + %g", got, kept,
                     enc_out);
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8@x,pp=8@y", 16, 2);
  int with = 0, without = 0;
  for (int s = 0; s < 8; s++) {
    double stage_kept = 0, carry = 0;
    for (int i = p->stage_first[s]; i < p->stage_first[s + 1]; i++) {
      stage_kept += p->layer_act_bytes[i];
      if (m->layers[i].cross)
        carry = enc_out; /* a stage with a cross-attention holds the encoder output */
    }
    double a = p->stage_mem[s].activations, n = p->stage_mem[s].inflight;
    cr_expect_float_eq(a, n * (stage_kept + carry), 1e-9 * a, "stage %d: %g bytes", s, a);
    with += carry == enc_out;
    without += carry == 0;
  }
  cr_expect(with > 0 && without > 0 && with + without == 8, "%d stages hold it, %d do not", with,
            without);
}

Test(pipeline, sends_activations_between_stages)
{
  /* Every micro-batch crosses each stage boundary once forward and once backward; each
   * tensor-parallel rank sends 1/t of the (replicated) activation and the receivers
   * all-gather it (Narayanan et al. 2021 SC, section 4.1). */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8@x,pp=8@y", 16, 2);
  GError *err = NULL;
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &err);
  int P = 8, M = (int)p->n_micro;
  double full = (double)m->t_seq * (double)m->t_hidden * m->dtype_bytes * 2, act = full / 8;
  for (int s = 0; s < P; s++) {
    int sends = 0, recvs = 0;
    for (int i = 0; i < tr->programs[s].nops; i++) {
      const ts_op o_ = ts_program_op(&tr->programs[s], i), *o = &o_;
      if (o->cat != TS_CAT_COMM_PP)
        continue;
      if (o->kind == TS_OP_SEND)
        sends++;
      if (o->kind == TS_OP_RECV)
        recvs++;
      if (o->kind == TS_OP_SEND || o->kind == TS_OP_RECV)
        cr_assert(o->bytes == act || strstr(g_ptr_array_index(tr->labels, o->label), "tied"),
                  "stage %d: %g bytes, expected s*b*h*2/t = %g", s, o->bytes, act);
    }
    double gathered;
    int ng = count_ops(tr, s, "all-gather", &gathered) - count_ops(tr, s, "fwd all-gather", NULL) -
             count_ops(tr, s, "bwd all-gather", NULL) -
             count_ops(tr, s, "recompute all-gather", NULL);
    int recv_boundaries = (s > 0) + (s < P - 1);
    cr_assert_eq(ng, recv_boundaries * M, "stage %d: %d boundary gathers", s, ng);
    int boundaries = (s > 0) + (s < P - 1);
    int tied = (s == 0 || s == P - 1) ? 1 : 0;
    cr_assert_eq(sends, boundaries * M + tied, "stage %d: %d sends", s, sends);
    cr_assert_eq(recvs, boundaries * M + tied, "stage %d: %d recvs", s, recvs);
  }
  /* The collapsed replay (one rank per stage) equals the full one. */
  ts_replay_result a, b;
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE},
                 rf = {.backend = "analytic", .sg_cfg = NULL, .full = TRUE};
  cr_assert(ts_run_replay(tr, t, &ro, &a, &err), "%s", err ? err->message : "");
  cr_assert(ts_run_replay(tr, t, &rf, &b, &err), "%s", err ? err->message : "");
  double x = a.step_time_s, y = b.step_time_s;
  cr_assert_eq(x, y, "collapsed %.17g != full %.17g", x, y);
  cr_assert_eq(a.nsimulated, P);
}

/* Per program: the gradient-accumulation ops' count, bytes, kernels and the stage they name;
 * the output re-gathers' count and bytes; the data-parallel reduce-scatter and all-reduce
 * bytes. */
typedef struct {
  int acc, acc_kernels, stage, regather, synced;
  double acc_bytes, regather_bytes, rs_bytes, ar_bytes;
} ds_ops;

static void ds_count(const ts_trace *tr, int q, ds_ops *o)
{
  memset(o, 0, sizeof *o);
  o->stage = -1;
  const ts_program *prog = &tr->programs[q];
  for (int i = 0; i < prog->nops; i++) {
    const ts_op op = ts_program_op(prog, i);
    const char *l = g_ptr_array_index(tr->labels, op.label);
    if (strstr(l, "gradient accumulation") != NULL) {
      o->acc++;
      o->acc_bytes += op.mem_bytes;
      o->acc_kernels = op.shape != NULL ? op.shape->kernels : 0;
      cr_assert_eq(sscanf(l, "stage %d", &o->stage), 1, "%s", l);
    }
    if (op.kind == TS_OP_COMPUTE && op.cat != TS_CAT_OPTIMIZER && ts_cost_op_syncs(op.shape))
      o->synced++;
    if (strstr(l, "output re-gather") != NULL) {
      o->regather++;
      o->regather_bytes = op.bytes;
    }
    if (op.kind == TS_OP_COLL && op.cat == TS_CAT_COMM_DP && op.coll == TS_COLL_REDUCESCATTER)
      o->rs_bytes += op.bytes;
    if (op.kind == TS_OP_COLL && op.cat == TS_CAT_COMM_DP && op.coll == TS_COLL_ALLREDUCE)
      o->ar_bytes += op.bytes;
  }
}

/* pipe-engine=deepspeed (DeepSpeed's PipelineEngine, runtime/pipe/engine.py and
 * bf16_optimizer.py) against Megatron-LM's pipeline on GPT-3 1.3B, tp 8 x pp 2 x dp 2, ZeRO-1,
 * 4 micro-batches of 2: every micro-batch's backward adds its gradients into fp32 ones (bf16:
 * BF16_Optimizer, 2 + 4 + 4 + 4 + 4 = 18 bytes a parameter of the stage, two kernels a
 * tensor); in fp16 autograd adds them in place from the second micro-batch on (3 x 2 bytes,
 * one kernel a tensor); each non-last stage all-gathers its output (b s h D) back over tp
 * before each backward; bf16's gradients are all-reduced in fp32 (4 bytes a parameter) instead
 * of reduce-scattered in bf16; the host waits for the device before every forward and backward
 * that rebuilds a received tensor from its metadata. Megatron-LM's pipeline has none of these. */
Test(pipeline, deepspeed_engine_closed_forms)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  const int M = 4, mb = 2;
  const char *base = "tp=8@node,pp=2@net,dp=2@net,zero=1,schedule=1f1b";
  for (int fp16 = 0; fp16 < 2; fp16++) {
    m->fp16 = fp16;
    g_autoptr(ts_plan) meg = make_plan(m, t, base, 2 * M * mb, mb);
    g_autofree char *split = g_strdup_printf("%s,pipe-engine=deepspeed", base);
    g_autoptr(ts_plan) ds = make_plan(m, t, split, 2 * M * mb, mb);
    cr_assert(strstr(ds->split_text, "pipe-engine=deepspeed") != NULL, "%s", ds->split_text);
    cr_assert_eq(ds->n_micro, M);
    g_autoptr(ts_trace) tm = trace_of(meg);
    g_autoptr(ts_trace) td = trace_of(ds);
    cr_assert_eq(tm->nprograms, td->nprograms);
    int seen[2] = {0, 0};
    for (int q = 0; q < td->nprograms; q++) {
      ds_ops a, b;
      ds_count(tm, q, &a);
      ds_count(td, q, &b);
      cr_assert(a.acc == 0 && a.regather == 0 && a.synced == 0,
                "Megatron: %d accumulations, %d re-gathers, %d synchronised ops", a.acc, a.regather,
                a.synced);
      int k = b.stage;
      cr_assert(k == 0 || k == 1, "program %d: stage %d", q, k);
      seen[k]++;
      int tensors = 0;
      double params = layers_params(ds, ds->stage_first[k], ds->stage_first[k + 1], &tensors);
      tensors *= 2; /* weight and bias */
      double per = fp16 ? 6.0 : 18.0;
      int n = fp16 ? M - 1 : M;
      cr_assert_eq(b.acc, n, "stage %d: %d accumulations, expected %d", k, b.acc, n);
      cr_assert_float_eq(b.acc_bytes, n * per * params, 1e-9 * n * per * params,
                         "stage %d: %.6g bytes, expected %d x %g x %.6g", k, b.acc_bytes, n, per,
                         params);
      cr_assert_eq(b.acc_kernels, tensors * (fp16 ? 1 : 2), "stage %d: %d kernels", k,
                   b.acc_kernels);
      double out = (double)mb * (double)m->t_seq * (double)m->t_hidden * m->dtype_bytes;
      cr_assert_eq(b.regather, k == 0 ? M : 0, "stage %d: %d re-gathers", k, b.regather);
      /* PartitionedTensor.from_meta reads its metadata back (.tolist()): the host waits for the
       * device before each forward that received an activation and each backward that received
       * a gradient. */
      cr_assert_eq(b.synced, M * ((k > 0) + (k < 1)), "stage %d: %d synchronised ops", k, b.synced);
      if (k == 0)
        cr_assert_float_eq(b.regather_bytes, out, 1e-9 * out, "re-gather %.6g bytes, b s h D %.6g",
                           b.regather_bytes, out);
      /* Megatron: bf16 gradients reduce-scattered; BF16_Optimizer: all-reduced in fp32. fp16
       * (FP16 ZeRO-1) keeps the reduce-scatter. */
      cr_assert_gt(a.rs_bytes, 0);
      if (fp16) {
        cr_assert_float_eq(b.rs_bytes, a.rs_bytes, 1e-9 * a.rs_bytes);
        cr_assert_float_eq(b.ar_bytes, a.ar_bytes, 1e-9 * a.rs_bytes + 1e-9);
      } else {
        cr_assert(b.rs_bytes == 0, "stage %d: %g bytes reduce-scattered", k, b.rs_bytes);
        double want = a.ar_bytes + a.rs_bytes * 4.0 / m->dtype_bytes;
        cr_assert_float_eq(b.ar_bytes, want, 1e-9 * want,
                           "stage %d: %.6g all-reduced, expected %.6g", k, b.ar_bytes, want);
      }
    }
    cr_assert(seen[0] > 0 && seen[1] > 0);
    /* Each cost only adds: the step is longer. */
    ts_replay_result rm, rd;
    replay_plan(meg, &rm);
    replay_plan(ds, &rd);
    cr_assert_gt(rd.step_time_s, rm.step_time_s, "DeepSpeed %g s, Megatron %g s", rd.step_time_s,
                 rm.step_time_s);
  }
}

/* pipe-engine=deepspeed-0.3 (DeepSpeed before 0.4.0; EleutherAI's DeeperSpeed, a fork of 0.3.15,
 * which GPT-NeoX-20B ran): the same engine, but _exec_reduce_grads all-reduces ZeRO-1's 16-bit
 * gradients whole (buffered_allreduce_fallback) and there is no BF16_Optimizer. On GPT-3 1.3B,
 * tp 8 x pp 2 x dp 2, ZeRO-1, 4 micro-batches: every stage's data-parallel traffic is one
 * all-reduce carrying the bytes Megatron's reduce-scatter (and all-reduce) carry, no
 * reduce-scatter; the accumulation is autograd's, M - 1 passes of 3 x 2 bytes a parameter in
 * fp16 and bf16 alike; the fp16 step is longer than under pipe-engine=deepspeed (an all-reduce
 * moves twice a reduce-scatter's bytes); zero=2 is refused as for deepspeed. */
Test(pipeline, deepspeed_03_allreduces_zero1_gradients)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  const int M = 4, mb = 2;
  const char *base = "tp=8@node,pp=2@net,dp=2@net,zero=1,schedule=1f1b";
  for (int fp16 = 0; fp16 < 2; fp16++) {
    m->fp16 = fp16;
    g_autoptr(ts_plan) meg = make_plan(m, t, base, 2 * M * mb, mb);
    g_autofree char *s1 = g_strdup_printf("%s,pipe-engine=deepspeed", base);
    g_autofree char *s0 = g_strdup_printf("%s,pipe-engine=deepspeed-0.3", base);
    g_autoptr(ts_plan) ds = make_plan(m, t, s1, 2 * M * mb, mb);
    g_autoptr(ts_plan) old = make_plan(m, t, s0, 2 * M * mb, mb);
    cr_assert(strstr(old->split_text, "pipe-engine=deepspeed-0.3") != NULL, "%s", old->split_text);
    g_autoptr(ts_trace) tm = trace_of(meg);
    g_autoptr(ts_trace) to = trace_of(old);
    cr_assert_eq(tm->nprograms, to->nprograms);
    for (int q = 0; q < to->nprograms; q++) {
      ds_ops a, b;
      ds_count(tm, q, &a);
      ds_count(to, q, &b);
      int k = b.stage;
      cr_assert(k == 0 || k == 1, "program %d: stage %d", q, k);
      double params = layers_params(old, old->stage_first[k], old->stage_first[k + 1], NULL);
      cr_assert_eq(b.acc, M - 1, "stage %d: %d accumulations", k, b.acc);
      double acc = (M - 1) * 3.0 * m->dtype_bytes * params;
      cr_assert_float_eq(b.acc_bytes, acc, 1e-9 * acc, "stage %d: %.6g bytes, expected %.6g", k,
                         b.acc_bytes, acc);
      cr_assert_gt(a.rs_bytes, 0);
      cr_assert(b.rs_bytes == 0, "stage %d: %g bytes reduce-scattered", k, b.rs_bytes);
      double want = a.ar_bytes + a.rs_bytes;
      cr_assert_float_eq(b.ar_bytes, want, 1e-9 * want, "stage %d: %.6g all-reduced, expected %.6g",
                         k, b.ar_bytes, want);
    }
    if (fp16) {
      ts_replay_result rd, ro;
      replay_plan(ds, &rd);
      replay_plan(old, &ro);
      cr_assert_gt(ro.step_time_s, rd.step_time_s, "0.3: %g s, 0.4+: %g s", ro.step_time_s,
                   rd.step_time_s);
    }
  }
  g_autoptr(GError) err = plan_refusal(
      m, t, "tp=8@node,pp=2@net,dp=2@net,zero=2,pipe-engine=deepspeed-0.3", 2 * M * mb, mb);
  cr_assert(strstr(err->message, "zero=2") != NULL, "%s", err->message);
}

/* dp-engine=apex (apex's DistributedFusedAdam as NeMo-Megatron ran it in 2022) against the
 * default on GPT-3 1.3B, dp 8 over one DGX A100 node, ZeRO-1, 4 micro-batches of 2: after every
 * layer's weight gradient, in every micro-batch, one op adds its bf16 gradient into the fp32
 * bucket (2 + 4 + 4 = 10 bytes a parameter, 4 more for the bucket's zeroing in the first
 * micro-batch; two kernels: weight and bias); the gradients are reduce-scattered in fp32, twice
 * the default's bf16 bytes, once a step; the step is longer. Refused without zero=1. */
Test(splits, apex_dp_engine_closed_forms)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  const int M = 4, mb = 2;
  g_autoptr(ts_plan) meg = make_plan(m, t, "dp=8,zero=1", 8 * M * mb, mb);
  g_autoptr(ts_plan) apex = make_plan(m, t, "dp=8,zero=1,dp-engine=apex", 8 * M * mb, mb);
  cr_assert(strstr(apex->split_text, "dp-engine=apex") != NULL, "%s", apex->split_text);
  cr_assert_eq(apex->n_micro, M);
  int layers = 0;
  double params = layers_params(apex, 0, m->nlayers, &layers);
  g_autoptr(ts_trace) tm = trace_of(meg);
  g_autoptr(ts_trace) ta = trace_of(apex);
  double rs[2] = {0, 0}, add = 0;
  int adds = 0, rs_ops[2] = {0, 0};
  for (int w = 0; w < 2; w++) {
    const ts_trace *tr = w ? ta : tm;
    const ts_program *prog = &tr->programs[0];
    for (int i = 0; i < prog->nops; i++) {
      const ts_op op = ts_program_op(prog, i);
      const char *l = g_ptr_array_index(tr->labels, op.label);
      if (op.kind == TS_OP_COLL && op.cat == TS_CAT_COMM_DP && op.coll == TS_COLL_REDUCESCATTER)
        rs[w] += op.bytes, rs_ops[w]++;
      if (strstr(l, "gradient added into fp32 bucket") != NULL) {
        cr_assert(w == 1, "%s in the default trace", l);
        cr_assert_eq(op.kind, TS_OP_COMPUTE);
        cr_assert_eq(op.shape->kernels, 2, "%s: %d kernels", l, op.shape->kernels);
        add += op.mem_bytes, adds++;
      }
    }
  }
  cr_assert_eq(adds, M * layers, "%d additions, expected %d x %d layers", adds, M, layers);
  double want = (M * (m->dtype_bytes + 8.0) + 4.0) * params;
  cr_assert_float_eq(add, want, 1e-9 * want, "%.6g bytes added, expected %.6g", add, want);
  cr_assert_gt(rs[0], 0);
  cr_assert_eq(rs_ops[0], rs_ops[1]);
  cr_assert_float_eq(rs[1], rs[0] * 4.0 / m->dtype_bytes, 1e-9 * rs[1],
                     "fp32 reduce-scatter %.6g bytes, bf16 %.6g", rs[1], rs[0]);
  ts_replay_result rm, ra;
  replay_plan(meg, &rm);
  replay_plan(apex, &ra);
  cr_assert_gt(ra.step_time_s, rm.step_time_s, "apex %g s, default %g s", ra.step_time_s,
               rm.step_time_s);
  /* Only with ZeRO-1. */
  for (int z = 0; z <= 3; z += 2) {
    g_autofree char *split = g_strdup_printf("dp=8,zero=%d,dp-engine=apex", z);
    g_autoptr(GError) err = plan_refusal(m, t, split, 8 * M * mb, mb);
    cr_assert(strstr(err->message, "expected zero=1") != NULL, "%s", err->message);
  }
}

/* dp-engine=autograd (Megatron-LM 2021's fp16 gradients in .grad): every micro-batch after the
 * first adds its weight gradient into the held one, 3 D bytes a parameter, two kernels a layer
 * with parameters; (M - 1) of those a layer in all, none in the default trace; the
 * data-parallel reduction is the default's; the step longer; refused with the passes of
 * pipe-engine=deepspeed, fsdp2 and zero=2. */
Test(splits, autograd_dp_engine_closed_forms)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  const int M = 4, mb = 2;
  g_autoptr(ts_plan) meg = make_plan(m, t, "dp=8", 8 * M * mb, mb);
  g_autoptr(ts_plan) ag = make_plan(m, t, "dp=8,dp-engine=autograd", 8 * M * mb, mb);
  cr_assert(strstr(ag->split_text, "dp-engine=autograd") != NULL, "%s", ag->split_text);
  cr_assert_eq(ag->n_micro, M);
  int layers = 0;
  double params = layers_params(ag, 0, m->nlayers, &layers);
  g_autoptr(ts_trace) tm = trace_of(meg);
  g_autoptr(ts_trace) ta = trace_of(ag);
  double dp[2] = {0, 0}, add = 0;
  int adds = 0;
  for (int w = 0; w < 2; w++) {
    const ts_trace *tr = w ? ta : tm;
    const ts_program *prog = &tr->programs[0];
    for (int i = 0; i < prog->nops; i++) {
      const ts_op op = ts_program_op(prog, i);
      const char *l = g_ptr_array_index(tr->labels, op.label);
      if (op.kind == TS_OP_COLL && op.cat == TS_CAT_COMM_DP)
        dp[w] += op.bytes;
      if (strstr(l, "gradient accumulated (autograd)") != NULL) {
        cr_assert(w == 1, "%s in the default trace", l);
        cr_assert_eq(op.kind, TS_OP_COMPUTE);
        cr_assert_eq(op.shape->kernels, 2, "%s: %d kernels", l, op.shape->kernels);
        /* Each launch at one eager op's published host cost (TS_TORCH_OPTIM_OP_US), not the
         * chip's fitted kernel_launch_us. */
        cr_assert_float_eq(op.shape->host_op_us, 6.7, 1e-12, "%s: %g us a launch", l,
                           op.shape->host_op_us);
        add += op.mem_bytes, adds++;
      }
    }
  }
  cr_assert_eq(adds, (M - 1) * layers, "%d additions, expected %d x %d layers", adds, M - 1,
               layers);
  double want = (M - 1) * 3.0 * m->dtype_bytes * params;
  cr_assert_float_eq(add, want, 1e-9 * want, "%.6g bytes added, expected %.6g", add, want);
  cr_assert_gt(dp[0], 0);
  cr_assert_float_eq(dp[1], dp[0], 1e-9 * dp[0], "dp bytes %.6g against %.6g", dp[1], dp[0]);
  ts_replay_result rm, ra;
  replay_plan(meg, &rm);
  replay_plan(ag, &ra);
  cr_assert_gt(ra.step_time_s, rm.step_time_s, "autograd %g s, default %g s", ra.step_time_s,
               rm.step_time_s);
  const char *refused[] = {"dp=8,zero=2,dp-engine=autograd",
                           "dp=8,zero=3,fsdp2,dp-engine=autograd"};
  for (size_t k = 0; k < G_N_ELEMENTS(refused); k++) {
    g_autoptr(GError) err = plan_refusal(m, t, refused[k], 8 * M * mb, mb);
    cr_assert(strstr(err->message, "dp-engine=autograd with") != NULL, "%s", err->message);
  }
  g_autoptr(ts_topo) t4 = load_topo("dgx-a100-4node");
  g_autoptr(GError) err = plan_refusal(
      m, t4, "tp=8@node,pp=4@net,schedule=1f1b,pipe-engine=deepspeed,dp-engine=autograd",
      8 * M * mb, mb);
  cr_assert(strstr(err->message, "expected neither pipe-engine=deepspeed") != NULL, "%s",
            err->message);
}

/* ZeRO-3 on a GPU issues its parameter all-gathers and gradient reduce-scatters from two
 * streams on one process group, one NCCL communicator, which runs them one at a time in issue
 * order (ts_plan_trace.c, serial_dep). Eight equal layers of 1e8 parameters and next to no
 * FLOPs, tp 8 in a DGX A100 node and dp 4 over the network, two micro-batches of 1: on rank 0
 * no two collectives of the shard group overlap, they run in program order, switching between
 * the gather and gradient streams, and the step is their serial sum (the compute, over a fifth
 * of it, hides behind them but for the optimizer step and what precedes the first gather:
 * within 3%). Before, a backward's prefetched gather ran beside the previous layer's
 * reduce-scatter at full bandwidth each, and the step was below the sum. */
Test(zero, shard_group_collectives_run_one_at_a_time)
{
  g_autoptr(ts_model) m = equal_model(8, 1e3, 1e8, 1);
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  const char *splits[] = {"tp=8@node,dp=4@net,zero=3", "tp=8@node,dp=4@net,zero=3,fsdp1",
                          "tp=8@node,dp=4@net,zero=3,fsdp1=fp32",
                          "tp=8@node,dp=4@net,zero=3,fsdp2,projections=fused"};
  for (guint c = 0; c < G_N_ELEMENTS(splits); c++) {
    g_autoptr(ts_plan) p = make_plan(m, t, splits[c], 8, 1);
    g_autoptr(ts_trace) tr = trace_of(p);
    ts_backend *b = ts_backend_analytic_new(t);
    ts_replay *r = ts_replay_new(tr, b, TS_REPLAY_FULL);
    ts_replay_keep_spans(r, TRUE);
    ts_replay_result res;
    g_autoptr(GError) err = NULL;
    cr_assert(ts_replay_run(r, &res, &err), "%s: %s", splits[c], err ? err->message : "");
    const GArray *spans = ts_replay_spans(r);
    const ts_program *pr = &tr->programs[0];
    /* The shard group: that of the first all-gather. */
    int gid = -1;
    for (int i = 0; i < pr->nops && gid < 0; i++)
      if (ts_program_op_kind(pr, i) == TS_OP_COLL &&
          strstr(g_ptr_array_index(tr->labels, ts_program_op_label(pr, i)), "param all-gather") !=
              NULL)
        gid = ts_program_op_group(pr, i);
    cr_assert_geq(gid, 0, "%s", splits[c]);
    double serial = 0, rest = 0, prev_end = -1, t0 = -1;
    int prev_op = -1, ncoll = 0, switches = 0, prev_stream = -1;
    for (guint k = 0; k < spans->len; k++) {
      const ts_span *sp = &g_array_index(spans, ts_span, k);
      if (sp->rank != 0)
        continue;
      if (t0 < 0)
        t0 = sp->start_s;
      gboolean mine =
          ts_program_op_kind(pr, sp->op) == TS_OP_COLL && ts_program_op_group(pr, sp->op) == gid;
      if (!mine) {
        rest += sp->end_s - sp->start_s;
        continue;
      }
      /* Spans come by start: each after the one before has ended, in program order. */
      cr_assert_geq(sp->start_s, prev_end - 1e-12,
                    "%s: op %d starts at %.9g s, op %d ends at %.9g s", splits[c], sp->op,
                    sp->start_s, prev_op, prev_end);
      cr_assert_gt(sp->op, prev_op, "%s: op %d ran after op %d", splits[c], sp->op, prev_op);
      int st = ts_program_op_stream(pr, sp->op);
      switches += prev_stream >= 0 && st != prev_stream;
      prev_stream = st;
      serial += sp->end_s - sp->start_s;
      prev_end = sp->end_s;
      prev_op = sp->op;
      ncoll++;
    }
    /* Forward gathers (8 layers x 2 micro-batches), backward gathers and reduce-scatters. */
    cr_assert_geq(ncoll, 3 * 8 * 2, "%s: %d collectives", splits[c], ncoll);
    cr_assert_geq(switches, 8, "%s: %d changes of stream", splits[c], switches);
    /* The compute hides behind the collectives but for the optimizer step after the last
     * reduce-scatter and what runs before the first gather (2% of the sum here). */
    cr_assert_geq(res.step_time_s, serial * (1 - 1e-9), "%s: step %.9g s, serial sum %.9g s",
                  splits[c], res.step_time_s, serial);
    cr_assert_leq(res.step_time_s, 1.03 * serial, "%s: step %.9g s, serial sum %.9g s", splits[c],
                  res.step_time_s, serial);
    cr_assert_gt(rest, 0.2 * serial, "%s: rest %.6g s", splits[c], rest);
    ts_replay_free(r);
    ts_backend_free(b);
  }
}

/* fsdp2 (PyTorch FSDP2 as TorchTitan runs it, reduce dtype fp32) against plain ZeRO-3 on GPT-3
 * 1.3B, dp 8 over one DGX A100 node, 2 micro-batches of 1: the reduce-scatters carry 4/D x plain
 * ZeRO-3's bytes. */
Test(splits, fsdp2_reduces_in_fp32)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  const int M = 2;
  g_autoptr(ts_plan) z3 = make_plan(m, t, "dp=8,zero=3", 8 * M, 1);
  g_autoptr(ts_plan) f2 = make_plan(m, t, "dp=8,zero=3,fsdp2", 8 * M, 1);
  double rs[2] = {0, 0};
  for (int w = 0; w < 2; w++) {
    g_autoptr(ts_trace) tr = trace_of(w ? f2 : z3);
    const ts_program *prog = &tr->programs[0];
    for (int i = 0; i < prog->nops; i++) {
      const ts_op op = ts_program_op(prog, i);
      if (op.kind == TS_OP_COLL && op.cat == TS_CAT_COMM_DP && op.coll == TS_COLL_REDUCESCATTER)
        rs[w] += op.bytes;
    }
  }
  cr_assert_gt(rs[0], 0);
  cr_assert_float_eq(rs[1], rs[0] * 4.0 / m->dtype_bytes, 1e-9 * rs[1],
                     "fsdp2 %.6g, ZeRO-3 %.6g bytes", rs[1], rs[0]);
}

/* A layer whose weights Float8 training casts: attention and dense GEMMs, not the embedding or
 * the vocabulary projection. */
static gboolean float8_gemm_layer(const ts_layer *l)
{
  return (l->kind == TS_LAYER_ATTENTION || l->kind == TS_LAYER_DENSE) && l->vocab == 0 &&
         l->tp != TS_TP_VOCAB;
}

/* fsdp2 with precision=fp8 (TorchTitan's float8 with enable_fsdp_float8_all_gather, on in its
 * 405B preset of August 2024): on Llama 3 8B, dp 32 over four DGX H100 nodes, the parameter
 * all-gathers of the Float8 GEMM layers (attention, MLP) carry one byte a parameter, 1/D of the
 * bf16 run's; the norms', the embedding's and the (bf16) output projection's are unchanged, and
 * so are the fp32 reduce-scatters. Plain ZeRO-3 with fp8 gathers in D (no float8 all-gather). */
Test(splits, fsdp2_float8_all_gathers_gemm_weights_in_fp8)
{
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  const char *splits[4] = {"dp=32,zero=3,fsdp2", "dp=32,zero=3,fsdp2,precision=fp8", "dp=32,zero=3",
                           "dp=32,zero=3,precision=fp8"};
  double *ag[4], rs[4] = {0, 0, 0, 0};
  for (int w = 0; w < 4; w++) {
    g_autoptr(ts_plan) p = make_plan(m, t, splits[w], 32, 1);
    g_autoptr(ts_trace) tr = trace_of(p);
    const ts_program *prog = &tr->programs[0];
    ag[w] = g_new0(double, m->nlayers);
    for (int i = 0; i < prog->nops; i++) {
      const ts_op op = ts_program_op(prog, i);
      if (op.kind != TS_OP_COLL || op.cat != TS_CAT_COMM_DP)
        continue;
      if (op.coll == TS_COLL_REDUCESCATTER)
        rs[w] += op.bytes;
      else if (op.coll == TS_COLL_ALLGATHER && op.t_layer > 0)
        ag[w][op.t_layer - 1] += op.bytes;
    }
  }
  int fp8_layers = 0, other_layers = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    if (!(ag[0][i] > 0))
      continue;
    gboolean gemm = float8_gemm_layer(l);
    double want = gemm ? ag[0][i] / m->dtype_bytes : ag[0][i];
    fp8_layers += gemm, other_layers += !gemm;
    cr_assert_float_eq(ag[1][i], want, 1e-9 * want, "%s: fp8 %.6g bytes, bf16 %.6g", l->name,
                       ag[1][i], ag[0][i]);
    cr_assert_float_eq(ag[3][i], ag[2][i], 1e-9 * ag[2][i], "%s: ZeRO-3 fp8 %.6g, bf16 %.6g",
                       l->name, ag[3][i], ag[2][i]);
  }
  cr_assert_gt(fp8_layers, 0);
  cr_assert_gt(other_layers, 0);
  cr_assert_gt(rs[0], 0);
  cr_assert_float_eq(rs[1], rs[0], 1e-9 * rs[0], "fp32 reduce-scatters fp8 %.6g, bf16 %.6g", rs[1],
                     rs[0]);
  for (int w = 0; w < 4; w++)
    g_free(ag[w]);
}

/* Bytes of each layer's FSDP parameter all-gathers (the dp collectives of program 0). */
static double *gather_bytes_by_layer(const ts_plan *p)
{
  g_autoptr(ts_trace) tr = trace_of(p);
  const ts_program *prog = &tr->programs[0];
  double *ag = g_new0(double, p->model->nlayers);
  for (int i = 0; i < prog->nops; i++) {
    const ts_op op = ts_program_op(prog, i);
    if (op.kind == TS_OP_COLL && op.cat == TS_CAT_COMM_DP && op.coll == TS_COLL_ALLGATHER &&
        op.t_layer > 0)
      ag[op.t_layer - 1] += op.bytes;
  }
  return ag;
}

/* Plans each of the four splits (global batch `batch`, micro-batch 1) and keeps its all-gather
 * bytes by layer (gather_bytes_by_layer), its gathered-parameter memory and its split text. */
static void plan_gathers(const ts_model *m, const ts_topo *t, const char *const splits[4],
                         gint64 batch, double *ag[4], double gathered[4], char *text[4])
{
  for (int w = 0; w < 4; w++) {
    g_autoptr(ts_plan) p = make_plan(m, t, splits[w], batch, 1);
    ag[w] = gather_bytes_by_layer(p);
    gathered[w] = p->mem.gathered;
    text[w] = g_strdup(p->split_text);
  }
}

/* fp8-gather=off states a Float8 run without torchao's enable_fsdp_float8_all_gather: on Llama 3
 * 8B (dp 32, four DGX H100 nodes) every layer's all-gathers carry what the bf16 fsdp2 run's do,
 * D bytes a parameter, where the default (and fp8-gather stated) carries 1 for the GEMM layers'
 * weights. FSDP2 holds the gathered weights in the gather's dtype: the root module (embedding,
 * final norm, logits: 2 x 525,336,576 + 4,096 parameters, bf16 either way) and two blocks of
 * 218,103,808 GEMM parameters and 8,192 norm parameters: 2 root + 2 (218,103,808 + 2 x 8,192)
 * bytes with the float8 gather, 2 root + 2 x 2 x 218,112,000 without. The plan names the option
 * only where it departs from the default. */
Test(splits, fp8_gather_option_states_the_float8_all_gather)
{
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  const char *splits[4] = {"dp=32,zero=3,fsdp2", "dp=32,zero=3,fsdp2,precision=fp8",
                           "dp=32,zero=3,fsdp2,precision=fp8,fp8-gather=off",
                           "dp=32,zero=3,fsdp2,precision=fp8,fp8-gather=on"};
  double *ag[4], gathered[4];
  g_autofree char *text[4] = {NULL, NULL, NULL, NULL};
  plan_gathers(m, t, splits, 32, ag, gathered, text);
  double D = m->dtype_bytes;
  int gemm_layers = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    if (!(ag[0][i] > 0))
      continue;
    gboolean gemm = float8_gemm_layer(l);
    gemm_layers += gemm;
    cr_assert_float_eq(ag[2][i], ag[0][i], 1e-9 * ag[0][i], "%s: fp8-gather=off %.6g, bf16 %.6g",
                       l->name, ag[2][i], ag[0][i]);
    cr_assert_float_eq(ag[3][i], gemm ? ag[0][i] / D : ag[0][i], 1e-9 * ag[0][i],
                       "%s: fp8-gather %.6g, bf16 %.6g", l->name, ag[3][i], ag[0][i]);
    cr_assert_float_eq(ag[3][i], ag[1][i], 1e-9 * ag[1][i], "%s: stated = default", l->name);
  }
  cr_assert_gt(gemm_layers, 0);
  double root = 2 * 525336576.0 + 4096;
  cr_assert_float_eq(gathered[2], 2 * root + 2 * 2 * 218112000.0, 1.0, "%g", gathered[2]);
  cr_assert_float_eq(gathered[2], gathered[0], 1.0, "off = bf16: %g %g", gathered[2], gathered[0]);
  cr_assert_float_eq(gathered[3], 2 * root + 2 * (218103808.0 + 2 * 8192.0), 1.0, "%g",
                     gathered[3]);
  cr_assert_float_eq(gathered[1], gathered[3], 1.0);
  cr_assert(strstr(text[2], ",fp8-gather=off") != NULL, "%s", text[2]);
  cr_assert(strstr(text[1], "fp8-gather") == NULL && strstr(text[3], "fp8-gather") == NULL,
            "%s / %s", text[1], text[3]);
  for (int w = 0; w < 4; w++)
    g_free(ag[w]);
  /* Off where nothing gathers in float8 is the default, the same plan. */
  g_autoptr(ts_plan) a = make_plan(m, t, "dp=32,zero=3,precision=fp8,fp8-gather=off", 32, 1);
  g_autoptr(ts_plan) b = make_plan(m, t, "dp=32,zero=3,precision=fp8", 32, 1);
  cr_assert_str_eq(a->split_text, b->split_text);
  /* On needs FSDP2's Float8 weights: refused without fsdp2 or without precision=fp8. */
  const char *bad[] = {"dp=32,zero=3,precision=fp8,fp8-gather", "dp=32,zero=3,fsdp2,fp8-gather",
                       "dp=32,fp8-gather=on"};
  for (size_t k = 0; k < G_N_ELEMENTS(bad); k++) {
    g_autoptr(GError) e = plan_refusal(m, t, bad[k], 32, 1);
    cr_assert(strstr(e->message, "expected fsdp2 and precision=fp8") != NULL, "%s", e->message);
  }
  g_autoptr(GError) pe = NULL;
  g_autoptr(ts_split) ps = ts_split_parse("dp=32,fp8-gather=bf16", &pe);
  cr_assert_null(ps);
  cr_assert(strstr(pe->message, "item 'fp8-gather=bf16': expected fp8-gather, fp8-gather=on or "
                                "fp8-gather=off") != NULL,
            "%s", pe->message);
}

/* The float8 all-gather's default follows TorchTitan 9dec370's Float8Handler
 * (torchtitan/float8.py): enable_fsdp_float8_all_gather only with dp_shard > 1. A run sharded
 * over context parallelism alone (cp=32, dp 1: FSDP2 still shards over the 32 ranks) gathers in
 * bf16 unless the split says fp8-gather; with dp 4 x cp 8 it gathers in float8. Llama 3 8B on
 * four DGX H100 nodes, the closed forms of fp8_gather_option_states_the_float8_all_gather:
 * gathered = 2 root + 2 x 2 x 218,112,000 bytes in bf16, 2 root + 2 (218,103,808 + 2 x 8,192)
 * in float8 (root: 2 x 525,336,576 + 4,096 parameters, bf16 either way). */
Test(splits, fp8_gather_default_needs_a_data_parallel_shard)
{
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  const char *splits[4] = {
      "cp=32,zero=3,fsdp2,precision=fp8", "cp=32,zero=3,fsdp2,precision=fp8,fp8-gather=off",
      "cp=32,zero=3,fsdp2,precision=fp8,fp8-gather", "dp=4,cp=8,zero=3,fsdp2,precision=fp8"};
  double *ag[4], gathered[4];
  g_autofree char *text[4] = {NULL, NULL, NULL, NULL};
  /* Global batch 4 (the least dp=4 takes): each cp rank is a program of its own, and at 32
   * micro-batches cp=32's trace was estimated at 1.47 GiB (0.8 GB resident), so the test was
   * refused where less memory was available (ts_plan_trace's MemAvailable guard). */
  plan_gathers(m, t, splits, 4, ag, gathered, text);
  double root = 2 * 525336576.0 + 4096, bf16 = 2 * root + 2 * 2 * 218112000.0;
  double fp8 = 2 * root + 2 * (218103808.0 + 2 * 8192.0);
  cr_assert_float_eq(gathered[0], bf16, 1.0, "cp only, default: %g", gathered[0]);
  cr_assert_float_eq(gathered[1], bf16, 1.0, "cp only, off: %g", gathered[1]);
  cr_assert_float_eq(gathered[2], fp8, 1.0, "cp only, stated: %g", gathered[2]);
  cr_assert_float_eq(gathered[3], fp8, 1.0, "dp 4 x cp 8, default: %g", gathered[3]);
  int moved = 0;
  for (int i = 0; i < m->nlayers; i++) {
    cr_assert_float_eq(ag[0][i], ag[1][i], 1e-9 * ag[1][i] + 1e-9, "%s: default %.6g, off %.6g",
                       m->layers[i].name, ag[0][i], ag[1][i]);
    moved += ag[2][i] < ag[0][i] * (1.0 - 1e-9);
  }
  cr_assert_gt(moved, 0, "the stated float8 gather carries fewer bytes");
  /* The plan names the option only where it departs from the default. */
  cr_assert(strstr(text[0], "fp8-gather") == NULL, "%s", text[0]);
  cr_assert(strstr(text[1], "fp8-gather") == NULL, "%s", text[1]);
  cr_assert(strstr(text[2], ",fp8-gather") != NULL && strstr(text[2], "=off") == NULL, "%s",
            text[2]);
  cr_assert(strstr(text[3], "fp8-gather") == NULL, "%s", text[3]);
  for (int w = 0; w < 4; w++)
    g_free(ag[w]);
}

/* launch=blocking (CUDA_LAUNCH_BLOCKING=1): every compute op says so in its shape and the host
 * waits for it (ts_cost_op_syncs), no op does without it; the step grows by at least the
 * launches of the critical stage's ops, which asynchronous launches hide behind its kernels. */
Test(pipeline, blocking_launches_mark_every_compute_op)
{
  int P = 4, M = 8;
  g_autoptr(ts_model) m = equal_model(2 * P, 1e9, 1000, 1e6);
  g_autoptr(ts_topo) t = ring_topo(P, 1e18, 0);
  t->chip.kernel_launch_s = 1e-4; /* a layer's forward is 1 ms on the device */
  double step[2];
  for (int blocking = 0; blocking < 2; blocking++) {
    g_autoptr(ts_plan) p = make_plan(
        m, t, blocking ? "pp=4,schedule=1f1b,launch=blocking" : "pp=4,schedule=1f1b", M, 1);
    g_autoptr(ts_trace) tr = trace_of(p);
    int marked = 0, compute = 0;
    for (int q = 0; q < tr->nprograms; q++)
      for (int i = 0; i < tr->programs[q].nops; i++) {
        const ts_op op = ts_program_op(&tr->programs[q], i);
        if (op.kind != TS_OP_COMPUTE || op.shape == NULL || op.shape->oclass == TS_OPC_ROOFLINE)
          continue;
        compute++;
        marked += ts_cost_op_syncs(op.shape) == TS_COST_SYNC_BLOCKING;
      }
    cr_assert_gt(compute, 0);
    cr_assert_eq(marked, blocking ? compute : 0, "%d of %d ops blocking", marked, compute);
    ts_replay_result rr;
    replay_plan(p, &rr);
    step[blocking] = rr.step_time_s;
  }
  /* The stage's 2 layers x M micro-batches x (forward + backward) ops each pay a launch. */
  cr_assert_geq(step[1], step[0] + 2 * M * 2 * 1e-4 * (1 - 1e-9), "blocking %g s, async %g s",
                step[1], step[0]);
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
      {"dp=64,attention=unfused", sbh * (34 + 5 * a * s / h)},
      {"tp=8,dp=8,attention=unfused", sbh * (10 + 24 / tt + 5 * a * s / (h * tt))},
      {"tp=8,dp=8,sp,attention=unfused", sbh * (34 / tt + 5 * a * s / (h * tt))},
      {"tp=8,dp=8,recompute=selective,attention=unfused", sbh * (10 + 24 / tt)},
      {"tp=8,dp=8,sp,recompute=selective,attention=unfused", sbh * 34 / tt},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(ts_plan) p = make_plan(m, t, cases[i].split, 128, 2);
    double got = block_act(p, FALSE);
    cr_assert_float_eq(got, cases[i].want, cases[i].want * 1e-12,
                       "%s: %.17g bytes per layer, expected %.17g", cases[i].split, got,
                       cases[i].want);
  }
}

Test(activations, flash_attention_keeps_no_scores)
{
  /* Flash attention (the model files' default; Dao et al. 2022, Algorithm 2) keeps Q, K, V,
   * the output and one fp32 log-sum-exp per query and head instead of the softmax, its
   * dropout mask and the dropout output: Korthikanti's Table 2 with 5as^2b replaced by 4asb,
   * split over tp by heads. Selective recomputation drops the statistics too. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  cr_assert_eq(m->attention, TS_ATTN_FLASH, "a model file runs flash attention by default");
  double s = (double)m->t_seq, h = (double)m->t_hidden, a = (double)m->t_heads, b = 2, tt = 8;
  double sbh = s * b * h, lse = 4 * a * s * b;
  const struct {
    const char *split;
    double want;
  } cases[] = {
      {"dp=64", sbh * 34 + lse},
      {"dp=64,attention=flash", sbh * 34 + lse},
      {"tp=8,dp=8", sbh * (10 + 24 / tt) + lse / tt},
      {"tp=8,dp=8,sp", sbh * 34 / tt + lse / tt},
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
  /* The split option is in the canonical text only when given. */
  g_autoptr(ts_plan) u = make_plan(m, t, "dp=64,attention=unfused", 128, 2);
  g_autoptr(ts_plan) f = make_plan(m, t, "dp=64", 128, 2);
  cr_expect_str_eq(u->split_text, "dp=64,attention=unfused");
  cr_expect_str_eq(f->split_text, "dp=64");
  /* Selective recomputation re-runs the same FLOPs either way (the fused kernel's forward). */
  g_autoptr(ts_plan) su =
      make_plan(m, t, "tp=8,dp=8,recompute=selective,attention=unfused", 128, 2);
  g_autoptr(ts_plan) sf = make_plan(m, t, "tp=8,dp=8,recompute=selective", 128, 2);
  for (int i = 0; i < m->nlayers; i++)
    cr_assert_eq(su->exec[i].recompute_flops, sf->exec[i].recompute_flops, "layer %d", i);
}

Test(activations, fp8_gemm_inputs_kept_in_one_byte)
{
  /* Transformer Engine's FP8 linears keep the FP8 cast of their GEMM input for backward, one
   * byte an element (te.Linear / LayerNormLinear / LayerNormMLP save the quantized input):
   * with tp + sp and flash, Korthikanti's 34 sbh/t per block loses sbh/t on the QKV input,
   * sbh/t on the first MLP GEMM's input and 4 sbh/t on the second's (the GELU output), and
   * gains sbh/t for the output projection's FP8 copy of the attention output, which the fused
   * attention keeps in bf16: 29 sbh/t. Without sp the two replicated GEMM inputs lose sbh each:
   * 8 sbh + 21 sbh/t. PyTorch-native Float8 (fsdp2, torchao) keeps its inputs as it gets
   * them; with DTensor's tensor parallelism (fsdp2: TorchTitan) the two column-parallel GEMMs
   * keep their inputs gathered, in fp8 (Float8ColwiseParallel casts before the all-gather)
   * and not gathered again in backward: 34 sbh/t less 2 x 2 sbh/t plus 2 x sbh. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-64node");
  double s = (double)m->t_seq, h = (double)m->t_hidden, a = (double)m->t_heads, b = 2, tt = 8;
  double sbh = s * b * h, lse = 4 * a * s * b;
  const struct {
    const char *split;
    double want;
  } cases[] = {
      {"tp=8,dp=64,sp", sbh * 34 / tt + lse / tt},
      {"tp=8,dp=64,sp,precision=fp8", sbh * 29 / tt + lse / tt},
      {"tp=8,dp=64,precision=fp8", sbh * (10 - 2 + 21 / tt) + lse / tt},
      {"tp=8,dp=64,sp,zero=3,fsdp2,precision=fp8", sbh * (30 / tt + 2) + lse / tt},
      {"tp=8,dp=64,sp,zero=3,fsdp2", sbh * (30 / tt + 4) + lse / tt}, /* gathered in bf16 */
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(ts_plan) p = make_plan(m, t, cases[i].split, 1024, 2);
    double got = block_act(p, FALSE);
    cr_assert_float_eq(got, cases[i].want, cases[i].want * 1e-12,
                       "%s: %.17g bytes per layer, expected %.17g", cases[i].split, got,
                       cases[i].want);
  }
}

Test(activations, pytorch_sequence_dim_copies_are_twice_the_tensor)
{
  /* DTensor's sequence parallelism (fsdp2) keeps Shard(1) of [batch, sequence, hidden]; NCCL
   * gathers and scatters on dim 0, so PyTorch's functional collectives copy the whole tensor
   * around each: the gathered result re-concatenated along the sequence (a view when batch is
   * 1), a reduce-scatter's input re-concatenated along dim 0 (any batch). One read and one
   * write: 2 x batch x s h x 2 bytes. Megatron-style sp (no fsdp2) and plain tp pay none. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-64node");
  g_autoptr(ts_plan) pt = make_plan(m, t, "tp=8,dp=64,sp,zero=3,fsdp2", 1024, 2);
  g_autoptr(ts_plan) meg = make_plan(m, t, "tp=8,dp=64,sp", 1024, 2);
  g_autoptr(ts_plan) nosp = make_plan(m, t, "tp=8,dp=64,zero=3,fsdp2", 1024, 2);
  double sbh = (double)m->t_seq * (double)m->t_hidden * 2.0; /* per sample, bf16 */
  int gathers = 0, scatters = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer_exec *e = &pt->exec[i];
    const ts_tp_coll *cs[] = {&e->fwd_pre, &e->fwd_post, &e->bwd_pre, &e->bwd_post};
    for (int k = 0; k < 4; k++) {
      const ts_tp_coll *c = cs[k];
      if (c->redistribution || (c->kind != TS_COLL_ALLGATHER && c->kind != TS_COLL_REDUCESCATTER))
        continue;
      cr_assert_float_eq(c->bytes, sbh, 1e-6, "%s", m->layers[i].name);
      cr_expect_float_eq(ts_plan_sp_copy_bytes(pt, c, 2), 2.0 * 2 * sbh, 1e-6, "%s",
                         m->layers[i].name);
      cr_expect_float_eq(ts_plan_sp_copy_bytes(pt, c, 1),
                         c->kind == TS_COLL_ALLGATHER ? 0.0 : 2.0 * sbh, 1e-6, "%s batch 1",
                         m->layers[i].name);
      cr_expect_eq(ts_plan_sp_copy_bytes(meg, c, 2), 0.0, "%s: Megatron-style sp",
                   m->layers[i].name);
      cr_expect_eq(ts_plan_sp_copy_bytes(nosp, c, 2), 0.0, "%s: no sp", m->layers[i].name);
      gathers += c->kind == TS_COLL_ALLGATHER;
      scatters += c->kind == TS_COLL_REDUCESCATTER;
    }
  }
  cr_expect_gt(gathers, 0);
  cr_expect_gt(scatters, 0);
}

/* One sequence-dim copy per backward tp gather or scatter that happens: the output gradient's
 * all-gather, the input gradient's reduce-scatter and, under per-op recomputation, the input's
 * re-gather. After a full-recompute forward nothing is gathered again (autograd keeps the
 * re-run gather's output, its copy made then), so no copy either: it was charged once per
 * column-split layer before, 2 x 1.99 ms a block on the 70B at tp 8. */
Test(activations, pytorch_backward_copies_follow_its_gathers)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-64node");
  const char *splits[] = {"tp=8,dp=64,sp,zero=3,fsdp2,recompute=full",
                          "tp=8,dp=64,sp,zero=3,fsdp2,recompute=op"};
  for (size_t k = 0; k < G_N_ELEMENTS(splits); k++) {
    g_autoptr(ts_plan) p = make_plan(m, t, splits[k], 1024, 2);
    g_autoptr(ts_trace) tr = trace_of(p);
    int copies = 0, colls = 0, regathers = 0; /* re-gathers inside the checkpointed blocks */
    for (int i = 0; i < tr->programs[0].nops; i++) {
      const ts_op op = ts_program_op(&tr->programs[0], i);
      const char *l = g_ptr_array_index(tr->labels, op.label);
      regathers += g_str_has_prefix(l, "block.") && strstr(l, "bwd input re-gather") != NULL;
      if (g_str_has_suffix(l, " bwd sequence-dim copy"))
        copies++;
      else if (op.kind == TS_OP_COLL && op.cat == TS_CAT_COMM_TP && strstr(l, " bwd ") != NULL &&
               strstr(l, "redistribution") == NULL &&
               (op.coll == TS_COLL_ALLGATHER || op.coll == TS_COLL_REDUCESCATTER))
        colls++;
    }
    cr_expect(k == 0 ? regathers == 0 : regathers > 0, "%s: %d re-gathers", splits[k], regathers);
    cr_expect_gt(colls, 0, "%s", splits[k]);
    cr_expect_eq(copies, colls, "%s: %d backward copies for %d backward gathers and scatters",
                 splits[k], copies, colls);
  }
}

Test(activations, fp8_gathers_carry_one_byte)
{
  /* Transformer Engine's FP8 recipe gathers a tensor-parallel FP8 GEMM's input after
   * quantizing it: under tp + sp the QKV and fc1 inputs' all-gathers, the output projection's
   * and fc2's output-gradient gathers and the saved inputs' re-gathers carry s b h / tp x tp
   * elements of one byte, half of bf16; the reduce-scatters stay bf16. The logits GEMM (bf16
   * under the recipe) keeps bf16 gathers. PyTorch-native Float8 (fsdp2: torchao's Float8 tensor
   * parallelism, PrepareFloat8ModuleInput and Float8RowwiseParallel) casts before its gathers
   * too: the same bytes. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-64node");
  g_autoptr(ts_plan) bf = make_plan(m, t, "tp=8,dp=64,sp", 1024, 2);
  g_autoptr(ts_plan) f8 = make_plan(m, t, "tp=8,dp=64,sp,precision=fp8", 1024, 2);
  g_autoptr(ts_plan) ao = make_plan(m, t, "tp=8,dp=64,sp,zero=3,fsdp2,precision=fp8", 1024, 2);
  double sbh = (double)m->t_seq * (double)m->t_hidden * 2.0; /* per sample, bf16 */
  int checked = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    const ts_layer_exec *a = &bf->exec[i], *b = &f8->exec[i], *c = &ao->exec[i];
    cr_assert_eq(b->fwd_post.bytes, a->fwd_post.bytes, "%s", l->name);
    cr_assert_eq(b->bwd_post.bytes, a->bwd_post.bytes, "%s", l->name);
    cr_assert_eq(c->fwd_pre.bytes, b->fwd_pre.bytes, "%s", l->name);
    cr_assert_eq(c->bwd_pre.bytes, b->bwd_pre.bytes, "%s", l->name);
    cr_assert_eq(c->fwd_post.bytes, a->fwd_post.bytes, "%s", l->name);
    cr_assert_eq(c->bwd_post.bytes, a->bwd_post.bytes, "%s", l->name);
    gboolean fp8_gemm = (l->kind == TS_LAYER_ATTENTION || l->kind == TS_LAYER_DENSE) &&
                        l->tp != TS_TP_VOCAB && l->vocab == 0;
    double k = fp8_gemm ? 0.5 : 1.0;
    if (a->fwd_pre.kind == TS_COLL_ALLGATHER) {
      cr_assert_float_eq(b->fwd_pre.bytes, k * a->fwd_pre.bytes, 1e-6, "%s", l->name);
      cr_assert_float_eq(a->fwd_pre.bytes, sbh, 1e-6, "%s", l->name);
      checked += fp8_gemm;
    }
    if (a->bwd_pre.kind == TS_COLL_ALLGATHER)
      cr_assert_float_eq(b->bwd_pre.bytes, k * a->bwd_pre.bytes, 1e-6, "%s", l->name);
    if (a->bwd_regather.kind == TS_COLL_ALLGATHER)
      cr_assert_float_eq(b->bwd_regather.bytes, k * a->bwd_regather.bytes, 1e-6, "%s", l->name);
  }
  cr_assert_eq(checked, 2 * m->t_layers, "the QKV and fc1 gathers of every block");
}

/* Activation bytes a plan keeps for the layers outside the transformer blocks (embedding,
 * final norm, logits), which recomputation keeps whole. */
static double outside_blocks(const ts_model *m, const ts_plan *p)
{
  double sum = 0;
  for (int i = 0; i < m->nlayers; i++)
    if (!g_str_has_prefix(m->layers[i].name, "block."))
      sum += p->layer_act_bytes[i];
  return sum;
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
  double outside = outside_blocks(m, none);
  /* On a TPU the checkpoint is the residual stream as XLA's 2D layout keeps it, 1/tp of it
   * with or without sp (ts_plan.c, checkpoint_bytes); on a GPU the input as the layer gets it,
   * whole on each of the tp ranks. */
  double want = L * 2 * s * b * h / 8 + outside;
  double got = full->mem.activations;
  cr_assert_float_eq(got, want, want * 1e-12, "full on a TPU: %.17g, expected %.17g", got, want);
  g_autoptr(ts_topo) gpu = load_topo("dgx-a100-4node");
  g_autoptr(ts_plan) gnone = make_plan(m, gpu, "tp=8,dp=4", 64, 2);
  g_autoptr(ts_plan) gfull = make_plan(m, gpu, "tp=8,dp=4,recompute=full", 64, 2);
  double goutside = outside_blocks(m, gnone);
  double gwant = L * 2 * s * b * h + goutside;
  double ggot = gfull->mem.activations;
  cr_assert_float_eq(ggot, gwant, gwant * 1e-12, "full on a GPU: %.17g, expected %.17g", ggot,
                     gwant);
  double outside_sp = outside_blocks(m, fsp);
  double want_sp = L * 2 * s * b * h / 8 + outside_sp;
  double got_sp = fsp->mem.activations;
  cr_assert_float_eq(got_sp, want_sp, want_sp * 1e-12, "full+sp: %.17g, expected %.17g", got_sp,
                     want_sp);
  /* Compute: every block's forward once more, on a TPU without the block's last product (the
   * MLP's down projection, whose output only the next block reads: JAX's rematerialised forward
   * drops it, ts_plan_recompute_skips). */
  GError *err = NULL;
  g_autoptr(ts_trace) a = ts_plan_trace(none, &err);
  g_autoptr(ts_trace) c = ts_plan_trace(full, &err);
  double fa = 0, fc = 0, blocks_fwd = 0;
  for (int i = 0; i < a->programs[0].nops; i++)
    fa += ts_program_op(&a->programs[0], i).flops;
  for (int i = 0; i < c->programs[0].nops; i++)
    fc += ts_program_op(&c->programs[0], i).flops;
  for (int i = 0; i < m->nlayers; i++)
    if (g_str_has_prefix(m->layers[i].name, "block.") &&
        !g_str_has_suffix(m->layers[i].name, ".fc2"))
      blocks_fwd += m->layers[i].fwd_flops * b * (double)none->n_micro / full->exec[i].cdiv;
  double extra = fc - fa;
  cr_assert_float_eq(extra, blocks_fwd, blocks_fwd * 1e-9,
                     "recompute adds %.17g FLOP, expected %.17g", extra, blocks_fwd);
}

/* early-stop (PyTorch's non-reentrant checkpoint, torch >= 2.0: set_checkpoint_early_stop on by
 * default) on a GPU: the re-run forward stops once the backward's saved tensors are rebuilt, so
 * each block's last product, the MLP's down projection (fc2), is not run again: recompute=full
 * adds every block's forward but fc2's (as on a TPU), where without it it adds the whole
 * forward. The kept activations do not change, and without recompute=full the option is
 * refused. */
static double trace_flops(const ts_plan *p)
{
  GError *err = NULL;
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &err);
  cr_assert_not_null(tr, "%s", err ? err->message : "");
  double f = 0;
  for (int i = 0; i < tr->programs[0].nops; i++)
    f += ts_program_op(&tr->programs[0], i).flops;
  return f;
}

Test(activations, early_stop_skips_each_blocks_last_dense_on_a_gpu)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b"); /* 24 blocks */
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  g_autoptr(ts_plan) none = make_plan(m, t, "tp=8,dp=4", 64, 2);
  g_autoptr(ts_plan) full = make_plan(m, t, "tp=8,dp=4,recompute=full", 64, 2);
  g_autoptr(ts_plan) early = make_plan(m, t, "tp=8,dp=4,recompute=full,early-stop", 64, 2);
  cr_assert(strstr(early->split_text, ",early-stop") != NULL, "%s", early->split_text);
  cr_assert_eq(early->mem.activations, full->mem.activations);
  double all = 0, fc2 = 0, mb = 2.0 * (double)none->n_micro;
  int skipped = 0;
  for (int i = 0; i < m->nlayers; i++) {
    gboolean last = g_str_has_suffix(m->layers[i].name, ".fc2");
    cr_assert_eq(ts_plan_recompute_skips(early, i), last, "%s", m->layers[i].name);
    cr_assert(!ts_plan_recompute_skips(full, i), "%s", m->layers[i].name);
    skipped += last;
    if (!g_str_has_prefix(m->layers[i].name, "block."))
      continue;
    double f = m->layers[i].fwd_flops * mb / full->exec[i].cdiv;
    all += f;
    if (last)
      fc2 += f;
  }
  cr_assert_eq(skipped, 24);
  double base = trace_flops(none), ef = trace_flops(full) - base, ee = trace_flops(early) - base;
  cr_assert_float_eq(ef, all, all * 1e-9, "full adds %.17g FLOP, expected %.17g", ef, all);
  cr_assert_float_eq(ee, all - fc2, all * 1e-9, "early-stop adds %.17g FLOP, expected %.17g", ee,
                     all - fc2);
  g_autoptr(GError) e = plan_refusal(m, t, "tp=8,dp=4,early-stop", 64, 2);
  cr_assert_str_eq(e->message,
                   "--split 'tp=8,dp=4,early-stop': early-stop ends the re-run of each "
                   "checkpointed block early; expected recompute=full (or full:N) with it (or "
                   "no early-stop)");
}

/* On a GPU under PyTorch's own non-reentrant checkpointing (fsdp2: TorchTitan's
 * checkpoint_wrapper), compiled or eager, the re-run recomputes only what the backward reads:
 * each block's down projection (fc2) and its sequence-parallel reduce-scatter are not re-run;
 * everything else is (compiled: AOTAutograd's partitioner; eager: early stop, torch >= 2.0).
 * Megatron-LM's reentrant checkpoint (no fsdp2, no early-stop) re-runs the whole block. GPT-3
 * 1.3B, tp 8 with sp, 24 blocks, 8 micro-batches. */
Test(activations, pytorch_checkpoint_recompute_skips_the_down_projection)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-64node");
  const struct {
    const char *split;
    gboolean skips;
  } cases[] = {
      {"tp=8,dp=64,sp,zero=3,fsdp2,recompute=full", TRUE},
      {"tp=8,dp=64,sp,zero=3,fsdp2,recompute=full,kernels=eager", TRUE},
      {"tp=8,dp=64,sp,zero=1,recompute=full,early-stop", TRUE},
      {"tp=8,dp=64,sp,zero=3,recompute=full", FALSE},
  };
  int blocks = 0;
  for (int i = 0; i < m->nlayers; i++)
    blocks += g_str_has_prefix(m->layers[i].name, "block.") &&
              g_str_has_suffix(m->layers[i].name, ".fc2");
  cr_assert_eq(blocks, 24);
  for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autoptr(ts_plan) p = make_plan(m, t, cases[k].split, 1024, 2);
    g_autoptr(ts_trace) tr = trace_of(p);
    int M = (int)p->n_micro;
    int fc2 = count_ops(tr, 0, ".fc2 recompute", NULL);
    int fc1 = count_ops(tr, 0, ".fc1 recompute", NULL);
    int rs = count_ops(tr, 0, ".fc2 recompute reduce-scatter", NULL);
    int rs_attn = count_ops(tr, 0, ".attention recompute reduce-scatter", NULL);
    cr_expect_eq(rs_attn, blocks * M, "%s: %d attention re-run reduce-scatters", cases[k].split,
                 rs_attn);
    cr_expect(fc1 >= blocks * M, "%s: %d fc1 re-run ops", cases[k].split, fc1);
    if (cases[k].skips)
      cr_expect(fc2 == 0 && rs == 0, "%s: fc2 re-run %d ops, %d reduce-scatters", cases[k].split,
                fc2, rs);
    else
      cr_expect(fc2 > 0 && rs == blocks * M, "%s: fc2 re-run %d ops, %d reduce-scatters",
                cases[k].split, fc2, rs);
  }
}

/* recompute=full:N (TorchTitan's "selective layer" checkpointing, selective_ac_option = N):
 * block b is checkpointed when (b + 1) % N == 0. With N = 2 half the blocks keep their input and
 * re-run their forward, the other half keep everything: activations and extra FLOPs are the
 * mean of none and full; N = 1 is full; N above the block count checkpoints nothing. */
Test(activations, full_every_nth_block_checkpoints_every_nth_block)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b"); /* 24 blocks */
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  g_autoptr(ts_plan) none = make_plan(m, t, "tp=8,dp=4", 64, 2);
  g_autoptr(ts_plan) full = make_plan(m, t, "tp=8,dp=4,recompute=full", 64, 2);
  g_autoptr(ts_plan) half = make_plan(m, t, "tp=8,dp=4,recompute=full:2", 64, 2);
  g_autoptr(ts_plan) one = make_plan(m, t, "tp=8,dp=4,recompute=full:1", 64, 2);
  g_autoptr(ts_plan) past = make_plan(m, t, "tp=8,dp=4,recompute=full:25", 64, 2);
  for (int i = 0; i < m->nlayers; i++) {
    int b = m->layers[i].block;
    cr_assert_eq(half->unit[i] >= 0, b >= 0 && b % 2 == 1, "%s: unit %d", m->layers[i].name,
                 half->unit[i]);
    cr_assert_eq(one->unit[i], full->unit[i]);
    cr_assert_eq(past->unit[i], -1, "%s", m->layers[i].name);
  }
  cr_assert_eq(one->mem.activations, full->mem.activations);
  cr_assert_eq(past->mem.activations, none->mem.activations);
  /* Identical blocks: the kept bytes are the mean of none's and full's. */
  double want = (none->mem.activations + full->mem.activations) / 2;
  cr_assert_float_eq(half->mem.activations, want, want * 1e-12, "full:2 keeps %.17g, mean %.17g",
                     half->mem.activations, want);
  GError *err = NULL;
  double f[4] = {0};
  const ts_plan *ps[4] = {none, full, half, past};
  for (int k = 0; k < 4; k++) {
    g_autoptr(ts_trace) tr = ts_plan_trace(ps[k], &err);
    cr_assert_not_null(tr, "%s", err ? err->message : "");
    for (int i = 0; i < tr->programs[0].nops; i++)
      f[k] += ts_program_op(&tr->programs[0], i).flops;
  }
  cr_assert_float_eq(f[2] - f[0], (f[1] - f[0]) / 2, f[1] * 1e-12, "full:2 re-runs %.17g FLOP",
                     f[2] - f[0]);
  cr_assert_eq(f[3], f[0]);
  cr_assert(strstr(half->split_text, "recompute=full:2") != NULL, "%s", half->split_text);
  g_autoptr(GError) e = NULL;
  g_autoptr(ts_split) bad = ts_split_parse("dp=8,recompute=op:2", &e);
  cr_assert_null(bad);
  cr_assert(strstr(e->message, "recompute=op:2") != NULL && strstr(e->message, "full:N"), "%s",
            e->message);
  g_clear_error(&e);
  g_autoptr(ts_split) zero = ts_split_parse("dp=8,recompute=full:0", &e);
  cr_assert_null(zero);
}

Test(activations, stage_recompute_keeps_stage_inputs)
{
  /* GPipe's re-materialisation (Huang et al. 2019, section 2.3): a device keeps only each
   * micro-batch's stage input, and re-runs the whole stage's forward before its backward, so
   * one micro-batch's full stage activations are its working set. GPT-3 1.3B, pp = 4 under
   * the GPipe schedule (all M = 4 micro-batches in flight), micro-batch 2, device 1: M x the
   * 2sbh-byte input of its stage; every layer's forward (embedding and logits too) runs twice. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) st = make_plan(m, t, "pp=4,dp=16,schedule=gpipe,recompute=stage", 128, 2);
  /* The same stages without recomputation (balancing by cost would cut elsewhere). */
  g_autofree char *same = g_strdup_printf(
      "pp=4,dp=16,schedule=gpipe,stages=%d:%d:%d:%d", st->stage_first[1] - st->stage_first[0],
      st->stage_first[2] - st->stage_first[1], st->stage_first[3] - st->stage_first[2],
      st->stage_first[4] - st->stage_first[3]);
  g_autoptr(ts_plan) none = make_plan(m, t, same, 128, 2);
  cr_assert_eq(st->n_micro, 4);
  double s = (double)m->t_seq, h = (double)m->t_hidden, b = 2;
  int a = st->stage_first[1];
  cr_assert(strstr(m->layers[a].name, "norm1") != NULL, "stage 1 starts at a block");
  double want = 4 * 2 * s * b * h;
  cr_expect_float_eq(st->stage_mem[1].activations, want, want * 1e-12,
                     "%.17g bytes, expected %.17g", st->stage_mem[1].activations, want);
  double work = 0;
  for (int i = a; i < st->stage_first[2]; i++)
    work += st->exec[i].full_act_bytes * b;
  cr_expect_geq(st->stage_mem[1].temp, work, "the working set holds one micro-batch's stage");
  cr_expect_lt(st->stage_mem[1].activations, none->stage_mem[1].activations / 10);
  /* Compute: every layer's forward once more, on every device. */
  g_autoptr(ts_trace) ta = trace_of(none);
  g_autoptr(ts_trace) tc = trace_of(st);
  for (int d = 0; d < 4; d++) {
    double fa = 0, fc = 0, fwd = 0;
    for (int i = 0; i < ta->programs[d].nops; i++)
      fa += ts_program_op(&ta->programs[d], i).flops;
    for (int i = 0; i < tc->programs[d].nops; i++)
      fc += ts_program_op(&tc->programs[d], i).flops;
    for (int i = st->stage_first[d]; i < st->stage_first[d + 1]; i++)
      fwd += m->layers[i].fwd_flops * b * 4;
    cr_expect_float_eq(fc - fa, fwd, fwd * 1e-9, "device %d recomputes %.17g FLOP, expected %.17g",
                       d, fc - fa, fwd);
  }
}

Test(activations, torchgpipe_copy_stream_pools)
{
  /* GPipe on a GPU is torchgpipe (ts_plan.c, copy_stream_pools): micro-batch i's received stage
   * input lives on copy stream i mod 32 of the receiving device, its gradient on stream i mod
   * 32 of the sending one, and torch's caching allocator gives each stream its own 20 MiB
   * segments for requests of 1-10 MiB (a block is split while more than 1 MiB remains).
   * GPT-3 1.3B, pp = 4, dp = 2 on one DGX A100, micro-batch 1 of 2048 tokens: M = 64, a stage
   * input is s h 2 = 8 MiB. Per stream: two inputs fill one segment (4 MiB left), a gradient
   * needs another. Device 0 (gradients only) and device 3 (inputs only): 32 x 20 MiB; devices
   * 1 and 2: 32 x 40 MiB. The received inputs leave the activations (M x 8 MiB): they are in
   * these pools. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  g_autoptr(ts_plan) st = make_plan(m, t, "pp=4,dp=2,schedule=gpipe,recompute=stage", 128, 1);
  cr_assert_eq(st->n_micro, 64);
  double MiB = 1048576.0, in = (double)m->t_seq * (double)m->t_hidden * 2;
  cr_assert_float_eq(in, 8 * MiB, 1e-9);
  const double want_mib[] = {640, 1280, 1280, 640};
  for (int d = 0; d < 4; d++) {
    double got = st->stage_mem[d].pipeline / MiB;
    cr_expect_float_eq(got, want_mib[d], 1e-9, "device %d: %.17g MiB, expected %g", d, got,
                       want_mib[d]);
  }
  /* The same split on a TPU (XLA plans its buffers: no streams, no pools) keeps the received
   * inputs among the activations. */
  g_autoptr(ts_topo) tpu = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) xla = make_plan(m, tpu, "pp=4,dp=16,schedule=gpipe,recompute=stage", 1024, 1);
  cr_assert_eq(xla->n_micro, 64);
  double pipe = xla->stage_mem[1].pipeline;
  cr_expect_eq(pipe, 0.0, "%.17g bytes of pools on a TPU", pipe);
  double gpu_act = st->stage_mem[1].activations, tpu_act = xla->stage_mem[1].activations;
  cr_expect_float_eq(tpu_act - gpu_act, 64 * in, 64 * in * 1e-9,
                     "the GPU's activations are M stage inputs fewer: %.17g vs %.17g", gpu_act,
                     tpu_act);
  /* Without recomputation the same: the first block keeps the received input, which is in the
   * pools; and fsdp2's GPipe (torch.distributed.pipelining, not torchgpipe) has no such pools. */
  g_autoptr(ts_plan) keep_tpu = make_plan(m, tpu, "pp=4,dp=16,schedule=gpipe", 1024, 1);
  /* The GPU plan takes the TPU's stage boundaries (each balances its own op costs). */
  g_autofree char *same = g_strdup_printf("pp=4,dp=2,schedule=gpipe,stages=%d:%d:%d:%d",
                                          keep_tpu->stage_first[1] - keep_tpu->stage_first[0],
                                          keep_tpu->stage_first[2] - keep_tpu->stage_first[1],
                                          keep_tpu->stage_first[3] - keep_tpu->stage_first[2],
                                          keep_tpu->stage_first[4] - keep_tpu->stage_first[3]);
  g_autoptr(ts_plan) keep = make_plan(m, t, same, 128, 1);
  double d_act = keep_tpu->stage_mem[1].activations - keep->stage_mem[1].activations;
  cr_expect_float_eq(d_act, 64 * in, 64 * in * 1e-9, "%.17g", d_act);
  double keep_pipe = keep->stage_mem[1].pipeline / MiB;
  cr_expect_float_eq(keep_pipe, 1280.0, 1e-9, "%.17g MiB", keep_pipe);
  g_autoptr(ts_plan) f2 = make_plan(m, t, "pp=4,dp=2,zero=3,fsdp2,schedule=gpipe", 128, 1);
  /* (its receive buffers for inputs and gradients and the 64 kept outputs, 8 MiB each, and
   * the input gradient of the first backward, which makes the fp32 accumulators: the peak) */
  double f2_pipe = f2->stage_mem[1].pipeline, f2_want = (3 * 64 + 1) * in;
  cr_expect_float_eq(f2_pipe, f2_want, 1e-9 * f2_want, "fsdp2: %.17g bytes", f2_pipe);
}

/* Forward FLOPs over all ops of each device's program. */
static double program_flops(const ts_trace *tr, int d)
{
  double f = 0;
  for (int i = 0; i < tr->programs[d].nops; i++)
    f += ts_program_op(&tr->programs[d], i).flops;
  return f;
}

Test(activations, stage_except_last_keeps_the_last_micro_batch)
{
  /* torchgpipe's default checkpoint='except_last' (recompute=stage:except-last): micro-batches
   * 0 .. M-2 are checkpointed as recompute=stage does, the last keeps its stage activations and
   * is not re-run. GPT-3 1.3B, pp = 4 under GPipe, micro-batch 2: with M = 4 each device re-runs
   * (M - 1) / M = 3/4 of what recompute=stage re-runs, and device 1 holds 3 stage inputs
   * (2sbh bytes each) plus one micro-batch's activations without recomputation; with M = 1
   * nothing is re-run (the program's FLOPs are recompute=none's). */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) st = make_plan(m, t, "pp=4,dp=16,schedule=gpipe,recompute=stage", 128, 2);
  g_autofree char *cuts = g_strdup_printf(
      "stages=%d:%d:%d:%d", st->stage_first[1] - st->stage_first[0],
      st->stage_first[2] - st->stage_first[1], st->stage_first[3] - st->stage_first[2],
      st->stage_first[4] - st->stage_first[3]);
  g_autofree char *s_none = g_strdup_printf("pp=4,dp=16,schedule=gpipe,%s", cuts);
  g_autofree char *s_st = g_strdup_printf("pp=4,dp=16,schedule=gpipe,recompute=stage,%s", cuts);
  g_autofree char *s_el =
      g_strdup_printf("pp=4,dp=16,schedule=gpipe,recompute=stage:except-last,%s", cuts);
  g_autoptr(ts_plan) none = make_plan(m, t, s_none, 128, 2);
  g_autoptr(ts_plan) rs = make_plan(m, t, s_st, 128, 2);
  g_autoptr(ts_plan) el = make_plan(m, t, s_el, 128, 2);
  cr_assert_eq(el->n_micro, 4);
  cr_assert(el->recompute_keep_last);
  cr_expect(strstr(el->split_text, "recompute=stage:except-last") != NULL, "%s", el->split_text);
  g_autoptr(ts_trace) tn = trace_of(none);
  g_autoptr(ts_trace) ts = trace_of(rs);
  g_autoptr(ts_trace) te = trace_of(el);
  for (int d = 0; d < 4; d++) {
    double again_st = program_flops(ts, d) - program_flops(tn, d);
    double again_el = program_flops(te, d) - program_flops(tn, d);
    cr_expect_gt(again_st, 0);
    cr_expect_float_eq(again_el, 0.75 * again_st, again_st * 1e-9,
                       "device %d re-runs %.17g FLOP, expected 3/4 of %.17g", d, again_el,
                       again_st);
  }
  double s = (double)m->t_seq, h = (double)m->t_hidden, b = 2;
  double want = 3 * 2 * s * b * h + none->stage_mem[1].activations / 4;
  cr_expect_float_eq(el->stage_mem[1].activations, want, want * 1e-9, "%.17g bytes, expected %.17g",
                     el->stage_mem[1].activations, want);
  /* One micro-batch: no recomputation at all. */
  g_autofree char *s_none1 = g_strdup_printf("pp=4,dp=16,schedule=gpipe,%s", cuts);
  g_autoptr(ts_plan) none1 = make_plan(m, t, s_none1, 32, 2);
  g_autoptr(ts_plan) el1 = make_plan(m, t, s_el, 32, 2);
  cr_assert_eq(el1->n_micro, 1);
  g_autoptr(ts_trace) tn1 = trace_of(none1);
  g_autoptr(ts_trace) te1 = trace_of(el1);
  for (int d = 0; d < 4; d++)
    cr_expect_float_eq(program_flops(te1, d), program_flops(tn1, d), program_flops(tn1, d) * 1e-12,
                       "device %d", d);
  cr_expect_float_eq(el1->stage_mem[1].activations, none1->stage_mem[1].activations,
                     none1->stage_mem[1].activations * 1e-12);
  /* Bad input names the accepted forms. */
  GError *e = NULL;
  g_autoptr(ts_split) bad = ts_split_parse("pp=2,recompute=stage:always", &e);
  cr_assert_null(bad);
  cr_expect(strstr(e->message, "stage:except-last") != NULL, "%s", e->message);
  g_clear_error(&e);
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
  const double want[4] = {(2 + 2 + K) * psi, 4 * psi + K * psi / N, 2 * psi + (2 + K) * psi / N,
                          (2 + 2 + K) * psi / N};
  for (int z = 0; z <= 3; z++) {
    g_autofree char *split = g_strdup_printf("dp=64,zero=%d", z);
    g_autoptr(ts_plan) p = make_plan(m, t, split, 64, 1);
    double got = p->mem.params + p->mem.grads + p->mem.optimizer;
    cr_assert_float_eq(got, want[z], want[z] * 1e-9, "zero=%d: %.17g bytes, expected %.17g", z, got,
                       want[z]);
  }
}

Test(zero, stage_3_gathers_each_layer_once_per_pass)
{
  /* ZeRO-3 (Rajbhandari et al. 2020, section 7.2.2): each layer's parameters are all-gathered
   * before its forward and again before its backward, for every micro-batch; gradients are
   * reduce-scattered after every micro-batch. */
  g_autoptr(ts_model) m = load_model("bert-large");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=64,zero=3", 256, 2);
  GError *err = NULL;
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &err);
  int with_params = 0;
  double psi = 0;
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].params > 0) {
      with_params++;
      psi += m->layers[i].params;
    }
  int M = (int)p->n_micro;
  cr_assert_eq(M, 2);
  double bytes;
  int ag = count_ops(tr, 0, "param all-gather", &bytes);
  cr_assert_eq(ag, 2 * with_params * M, "%d gathers, expected 2 x %d layers x %d micro-batches", ag,
               with_params, M);
  double want = 2.0 * M * psi * m->dtype_bytes;
  cr_assert_float_eq(bytes, want, want * 1e-12, "gathered %g bytes, expected 2 M Psi 2", bytes);
  double rs;
  count_ops(tr, 0, "grad reduce-scatter", &rs);
  double want_rs = M * psi * m->dtype_bytes;
  cr_assert_float_eq(rs, want_rs, want_rs * 1e-12);
  /* Stage 1 and 2 reduce-scatter once (stage 1) or per micro-batch (stage 2), then gather the
   * updated parameters once; no per-layer gathers. */
  g_autoptr(ts_plan) p1 = make_plan(m, t, "dp=64,zero=1", 256, 2);
  g_autoptr(ts_trace) t1 = ts_plan_trace(p1, &err);
  cr_assert_eq(count_ops(t1, 0, "param all-gather", NULL), 1);
  count_ops(t1, 0, "grad reduce-scatter", &rs);
  cr_assert_float_eq(rs, psi * m->dtype_bytes, psi * 1e-12);
}

/* The collectives program q issues on group gid, as (kind, bytes) pairs in program order. */
static GArray *group_colls(const ts_trace *tr, int q, int gid)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(double));
  const ts_program *pr = &tr->programs[q];
  for (int i = 0; i < pr->nops; i++) {
    if (ts_program_op_kind(pr, i) != TS_OP_COLL || ts_program_op_group(pr, i) != gid)
      continue;
    ts_coll_kind k;
    double b, kd;
    ts_program_op_coll(pr, i, &k, &b);
    kd = (double)k;
    g_array_append_val(a, kd);
    g_array_append_val(a, b);
  }
  return a;
}

Test(zero, shard_group_collectives_pair_up_whatever_the_mapping)
{
  /* ZeRO-3 shards over dp and cp together (the cp ranks hold the same parameters): its
   * parameter all-gathers (one stream) and gradient reduce-scatters (another) share the dp+cp
   * group. Every member issues the same collectives on it in the same program order: before
   * each layer's forward and backward an all-gather of its parameters (bytes: the layer's
   * parameters x the gather's bytes per parameter, fp8 for Float8 GEMM weights with
   * fp8-gather), and reduce-scatters of all its gradients (fsdp2: fp32, 4 bytes a parameter;
   * else the model's dtype). With cp spread over node and net the cp ranks' ring hops differ,
   * so their streams run at different paces: the replay must still pair each member's k-th
   * collective with the others' k-th (dp=4,cp=8,zero=3,fsdp2 met a reduce-scatter with an
   * all-gather before ts_replay numbered them in program order). */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  /* Each failed so before (the first three at 4 samples a step, the next two at 8). */
  static const struct {
    const char *split;
    gint64 batch;
  } cases[] = {
      {"dp=4,cp=8,zero=3,fsdp2", 4},                          /* cp on node:2+net (the report) */
      {"cp=32,zero=3,fsdp2", 4},                              /* cp on node+net */
      {"cp=32,zero=3,fsdp2,precision=fp8,fp8-gather=off", 4}, /* bf16 gathers under fp8 */
      {"dp=2,cp=16,zero=3,fsdp2", 8},                         /* cp on node:4+net */
      {"cp=32,zero=3", 8},                                    /* ZeRO-3 without fsdp2 */
      {"cp=8@node,dp=4@net,zero=3,fsdp2", 4},                 /* cp inside a node */
      {"cp=4@node,dp=8,zero=3,fsdp2", 8},                     /* dp on node:2+net */
      {"dp=4,cp=8,zero=3,fsdp2,precision=fp8", 4},            /* fp8 all-gathers */
      {"dp=4,cp=8,zero=3", 4},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    const char *split = cases[c].split;
    g_autoptr(ts_plan) p = make_plan(m, t, split, cases[c].batch, 0);
    g_autoptr(ts_trace) tr = trace_of(p);
    /* The shard group: that of the first parameter all-gather. */
    int gid = -1;
    const ts_program *p0 = &tr->programs[0];
    for (int i = 0; i < p0->nops && gid < 0; i++) {
      if (ts_program_op_kind(p0, i) != TS_OP_COLL)
        continue;
      ts_coll_kind k;
      double b;
      ts_program_op_coll(p0, i, &k, &b);
      if (k == TS_COLL_ALLGATHER && ts_program_op(p0, i).t_role == TS_ROLE_PARAM_GATHER)
        gid = ts_program_op_group(p0, i);
    }
    cr_assert_geq(gid, 0, "%s: no parameter all-gather", split);
    const ts_group *grp = g_ptr_array_index(tr->groups, gid);
    int n = ts_trace_group_size(grp);
    cr_assert_eq(n, 32, "%s: shard group of %d ranks, expected dp x cp = 32", split, n);
    /* Closed forms over the first member's program. */
    int base = ts_trace_group_base(tr, grp, 0, NULL);
    g_autoptr(GArray) want = group_colls(tr, ts_trace_program_of(tr, base), gid);
    double ag = 0, rs = 0, ag_want = 0, rs_want = 0;
    int nag = 0, with_params = 0;
    for (guint k = 0; k < want->len; k += 2) {
      ts_coll_kind kind = (ts_coll_kind)g_array_index(want, double, k);
      double b = g_array_index(want, double, k + 1);
      if (kind == TS_COLL_ALLGATHER)
        ag += b, nag++;
      else if (kind == TS_COLL_REDUCESCATTER)
        rs += b;
      else
        cr_assert_fail("%s: a %s on the shard group", split, ts_coll_kind_name(kind));
    }
    for (int i = 0; i < m->nlayers; i++) {
      if (m->layers[i].params <= 0)
        continue;
      with_params++;
      ag_want += 2 * ts_plan_layer_params(p, i) * ts_plan_gather_bytes_per_param(p, i);
      rs_want += ts_plan_layer_params(p, i) * (p->fsdp2 ? 4.0 : m->dtype_bytes);
    }
    cr_assert_eq(nag, 2 * with_params, "%s: %d all-gathers, expected 2 x %d layers", split, nag,
                 with_params);
    cr_assert_float_eq(ag, ag_want, ag_want * 1e-12, "%s: gathered %.17g bytes, expected %.17g",
                       split, ag, ag_want);
    cr_assert_float_eq(rs, rs_want, rs_want * 1e-12, "%s: reduced %.17g bytes, expected %.17g",
                       split, rs, rs_want);
    /* Every member the same sequence. */
    for (int k = 1; k < n; k++) {
      int q = ts_trace_program_of(tr, ts_trace_group_rank(tr, grp, base, k));
      g_autoptr(GArray) got = group_colls(tr, q, gid);
      cr_assert_eq(got->len, want->len, "%s: member %d issues %u collectives, member 0 %u", split,
                   k, got->len / 2, want->len / 2);
      cr_assert(memcmp(got->data, want->data, want->len * sizeof(double)) == 0,
                "%s: member %d's collectives differ from member 0's", split, k);
    }
    /* The replay pairs them: collapsed and full, the same step. */
    GError *err = NULL;
    ts_replay_result rc, rf;
    ts_run_options oc = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
    ts_run_options of = {.backend = "analytic", .sg_cfg = NULL, .full = TRUE};
    cr_assert(ts_run_replay(tr, t, &oc, &rc, &err), "%s: %s", split, err ? err->message : "");
    cr_assert(ts_run_replay(tr, t, &of, &rf, &err), "%s (full): %s", split,
              err ? err->message : "");
    cr_assert_gt(rc.step_time_s, 0);
    cr_assert_float_eq(rc.step_time_s, rf.step_time_s, 1e-12 * rf.step_time_s,
                       "%s: collapsed %.17g s, full %.17g s", split, rc.step_time_s,
                       rf.step_time_s);
  }
}

Test(zero, fsdp1_flat_gradient_passes)
{
  /* fsdp1 (PyTorch FSDP's FlatParameter): every micro-batch, after each layer's weight gradient,
   * one pass over its gradient of 4D bytes a parameter (the views' gradients concatenated, D + D;
   * the pre-division, D + D), 3D + 12 with fsdp1=fp32 (the concatenation, the cast to fp32, D + 4,
   * and the pre-division in fp32, 4 + 4), whose reduce-scatters carry 4 bytes a parameter instead
   * of D, one a wrapped unit; nothing without it. GPT-3 1.3B (bf16) on a DGX A100, dp 8, ZeRO-3
   * and ZeRO-2, two micro-batches. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  const char *zeros[] = {"zero=3", "zero=2"};
  for (size_t z = 0; z < G_N_ELEMENTS(zeros); z++) {
    g_autofree char *s0 = g_strdup_printf("dp=8,%s", zeros[z]);
    g_autofree char *s1 = g_strdup_printf("dp=8,%s,fsdp1", zeros[z]);
    g_autofree char *s2 = g_strdup_printf("dp=8,%s,fsdp1=fp32", zeros[z]);
    g_autoptr(ts_plan) p0 = make_plan(m, t, s0, 32, 2);
    g_autoptr(ts_plan) p1 = make_plan(m, t, s1, 32, 2);
    g_autoptr(ts_plan) p2 = make_plan(m, t, s2, 32, 2);
    g_autoptr(ts_trace) t0 = trace_of(p0);
    g_autoptr(ts_trace) t1 = trace_of(p1);
    g_autoptr(ts_trace) t2 = trace_of(p2);
    int M = (int)p1->n_micro, with_params = 0;
    cr_assert_eq(M, 2);
    double psi = 0, D = m->dtype_bytes;
    for (int i = 0; i < m->nlayers; i++)
      if (m->layers[i].params > 0) {
        with_params++;
        psi += m->layers[i].params;
      }
    cr_assert_eq(count_ops(t0, 0, "flat gradient (fsdp1)", NULL), 0);
    const ts_trace *trs[] = {t1, t2};
    const double per[] = {4.0 * D, 3.0 * D + 12.0};
    for (int k = 0; k < 2; k++) {
      int n = 0;
      double mem = 0;
      for (int i = 0; i < trs[k]->programs[0].nops; i++) {
        const ts_op o = ts_program_op(&trs[k]->programs[0], i);
        if (strstr(g_ptr_array_index(trs[k]->labels, o.label), "flat gradient (fsdp1)") == NULL)
          continue;
        n++;
        mem += o.mem_bytes;
      }
      cr_assert_eq(n, with_params * M, "%s: %d passes, expected %d layers x %d micro-batches",
                   k ? s2 : s1, n, with_params, M);
      double want = M * psi * per[k];
      cr_assert_float_eq(mem, want, want * 1e-12, "%s: %.17g bytes, expected %.17g", k ? s2 : s1,
                         mem, want);
    }
    double rs0, rs1, rs2;
    count_ops(t0, 0, "grad reduce-scatter", &rs0);
    count_ops(t1, 0, "grad reduce-scatter", &rs1);
    count_ops(t2, 0, "grad reduce-scatter", &rs2);
    cr_assert_float_eq(rs0, M * psi * D, psi * 1e-9);
    cr_assert_float_eq(rs1, rs0, psi * 1e-9);
    cr_assert_float_eq(rs2, rs0 * 4.0 / D, psi * 1e-9, "fp32: %g bytes, bf16 %g", rs2, rs0);
    /* One reduce-scatter a wrapped unit (FlatParameter) and micro-batch: each block's, and the
     * root's (the layers of no block) after the backward's last layer. */
    int nblocks = ts_model_blocks(m);
    cr_assert_eq(nblocks, 24);
    cr_assert_eq(count_ops(t1, 0, "grad reduce-scatter", NULL), M * (nblocks + 1));
    cr_assert_eq(count_ops(t2, 0, "grad reduce-scatter", NULL), M * (nblocks + 1));
    ts_replay_result r0, r1, r2;
    replay_plan(p0, &r0);
    replay_plan(p1, &r1);
    replay_plan(p2, &r2);
    cr_assert_gt(r1.step_time_s, r0.step_time_s);
    cr_assert_gt(r2.step_time_s, r1.step_time_s);
  }
  g_autoptr(GError) e = plan_refusal(m, t, "dp=8,zero=1,fsdp1", 32, 2);
  cr_assert_str_eq(e->message,
                   "--split 'dp=8,zero=1,fsdp1': fsdp1 is PyTorch FSDP's FlatParameter gradient "
                   "path (FULL_SHARD or SHARD_GRAD_OP); expected zero=2 or zero=3 with it (and no "
                   "fsdp2, offload or ps)");
}

Test(zero, stage_3_prefetches_one_block_ahead)
{
  /* FSDP gathers a wrapped block (a transformer layer) at a time and starts the next block's
   * gathers while the current one computes (PyTorch FSDP's forward prefetch, FSDP2's per-block
   * fully_shard; XLA's latency-hiding scheduler on MaxText's scanned layers): when block b's
   * first forward op is issued, every gather of block b + 1 has been issued and none of block
   * b + 2. (Gathering one layer ahead left each block's large first layer waiting for its
   * gather behind the short norm before it.) */
  g_autoptr(ts_model) m = load_model("bert-large");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=64,zero=3", 64, 1);
  g_autoptr(ts_trace) tr = trace_of(p);
  int nblocks = ts_model_blocks(m);
  cr_assert_gt(nblocks, 3);
  int *with_params = g_new0(int, nblocks + 2), *gathered = g_new0(int, nblocks + 2);
  gboolean *seen = g_new0(gboolean, m->nlayers), *started = g_new0(gboolean, nblocks);
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].block >= 0 && m->layers[i].params > 0)
      with_params[m->layers[i].block]++;
  int checked = 0;
  for (int k = 0; k < tr->programs[0].nops; k++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], k), *o = &o_;
    if (o->t_phase == TS_PHASE_BWD)
      break;
    int layer = o->t_layer - 1;
    if (layer < 0)
      continue;
    int b = m->layers[layer].block;
    if (o->t_role == TS_ROLE_PARAM_GATHER && !seen[layer]) {
      seen[layer] = TRUE;
      if (b >= 0)
        gathered[b]++;
    } else if (o->kind == TS_OP_COMPUTE && b >= 0 && !started[b]) {
      started[b] = TRUE;
      cr_assert_eq(gathered[b], with_params[b], "block %d starts with %d of %d gathers", b,
                   gathered[b], with_params[b]);
      cr_assert_eq(gathered[b + 1], with_params[b + 1],
                   "block %d starts with %d of block %d's %d gathers issued", b, gathered[b + 1],
                   b + 1, with_params[b + 1]);
      cr_assert_eq(gathered[b + 2], 0, "block %d starts with %d gathers of block %d issued", b,
                   gathered[b + 2], b + 2);
      checked++;
    }
  }
  cr_assert_eq(checked, nblocks, "%d of %d blocks checked", checked, nblocks);
  g_free(with_params);
  g_free(gathered);
  g_free(seen);
  g_free(started);
}

static double host_link_bytes_in_trace(const ts_trace *tr, const ts_topo *t, int prog)
{
  double s = 0;
  for (int i = 0; i < tr->programs[prog].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[prog], i), *o = &o_;
    /* Format 2: host-link traffic is xfer ops over the host_link resource (their labels say
     * so too); the bytes are the op's and its time bytes / host_link_GBps. */
    if (o->kind == TS_OP_XFER && o->resource == TS_RES_HOST_LINK) {
      cr_assert(g_str_has_prefix(g_ptr_array_index(tr->labels, o->label), "host link:"));
      cr_assert_float_eq(ts_offchip_time(t, o), o->bytes / t->chip.host_link_bw_Bps, 1e-18);
      s += o->bytes;
    }
  }
  return s;
}

Test(offload, host_link_traffic)
{
  /* ZeRO-Offload (Ren et al. 2021, section 4): after each gradient reduction the shard
   * (2 Psi / N bytes) goes to the host, and the updated 16-bit shard comes back once per step.
   * ZeRO-Infinity with stage 3 on NVMe (Rajbhandari et al. 2021, section 5) brings each layer's
   * parameter shard up in every pass instead. */
  int N = 4, M = 4;
  g_autoptr(ts_topo) t = ring_topo(N, 1e11, 1e-6);
  g_autoptr(ts_model) m = equal_model(8, 1e9, 1e6, 1e6);
  double psi = 8e6, D = 2, shard = D * psi / N;
  const struct {
    const char *split;
    double want;
  } cases[] = {
      {"dp=4,zero=1,offload=cpu", shard + shard},
      {"dp=4,zero=2,offload=cpu", M * shard + shard},
      {"dp=4,zero=3,offload=cpu", M * shard + shard},
      {"dp=4,zero=2,offload=nvme", M * shard + shard},
      {"dp=4,zero=3,offload=nvme", M * shard + 2 * M * shard},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(ts_plan) p = make_plan(m, t, cases[i].split, N * M, 1);
    GError *err = NULL;
    g_autoptr(ts_trace) tr = ts_plan_trace(p, &err);
    double planned = p->host_link_bytes_per_step, traced = host_link_bytes_in_trace(tr, t, 0);
    cr_assert_float_eq(planned, cases[i].want, cases[i].want * 1e-12, "%s: plan %g, expected %g",
                       cases[i].split, planned, cases[i].want);
    cr_assert_float_eq(traced, cases[i].want, cases[i].want * 1e-9, "%s: trace %g, expected %g",
                       cases[i].split, traced, cases[i].want);
    /* The offloaded states leave the device. */
    double dev = p->mem.optimizer + p->mem.grads;
    cr_assert_eq(dev, 0.0, "%s: %g bytes of optimizer state and gradients left on the device",
                 cases[i].split, dev);
    double off = p->mem.host + p->mem.nvme;
    cr_assert(off > 0);
    ts_replay_result rr;
    replay_plan(p, &rr);
  }
}

Test(ps, push_pull_bytes_per_step)
{
  /* GeePS (Cui et al. 2016): every step each worker pushes its gradients (2 Psi bytes) to the
   * sharded servers and pulls the parameters back; with a server on every worker, the shard it
   * hosts stays local: (N - 1) / N of it crosses the network. */
  g_autoptr(ts_topo) t = ring_topo(8, 1e11, 1e-6);
  g_autoptr(ts_model) m = equal_model(8, 1e9, 1e6, 1e6);
  double bytes = 2 * 8e6;
  g_autoptr(ts_plan) d = make_plan(m, t, "dp=8,ps=2,ps-placement=dedicated", 16, 1);
  g_autoptr(ts_plan) c = make_plan(m, t, "dp=8,ps=8", 16, 1);
  g_autoptr(ts_plan) c4 = make_plan(m, t, "dp=8,ps=4", 16, 1);
  double a = d->ps_push_bytes_per_step, b = d->ps_pull_bytes_per_step;
  cr_assert_float_eq(a, bytes, bytes * 1e-12);
  cr_assert_float_eq(b, bytes, bytes * 1e-12);
  double cc = c->ps_push_bytes_per_step, want = bytes * 7 / 8;
  cr_assert_float_eq(cc, want, want * 1e-12);
  double c4b = c4->ps_push_bytes_per_step;
  cr_assert_float_eq(c4b, bytes, bytes * 1e-12, "a worker without a shard pushes everything");
  /* Dedicated: the push takes the slower of a worker sending 2 Psi and a server receiving
   * W / N of it: here W / N = 4 times a worker's share. */
  double tp = ts_plan_ps_time(d, bytes), want_t = 1e-6 + bytes * 8 / 2 / 1e11;
  cr_assert_float_eq(tp, want_t, want_t * 1e-12);
  /* Colocated on every worker: the trace pushes by reduce-scatter and pulls by all-gather of
   * the whole model. */
  GError *err = NULL;
  g_autoptr(ts_trace) tr = ts_plan_trace(c, &err);
  double push, pull;
  count_ops(tr, 0, "ps push", &push);
  count_ops(tr, 0, "ps pull", &pull);
  cr_assert_float_eq(push, bytes, bytes * 1e-12);
  cr_assert_float_eq(pull, bytes, bytes * 1e-12);
  ts_replay_result rr;
  replay_plan(d, &rr);
  replay_plan(c4, &rr);
  /* No optimizer state on a chip whose servers are dedicated hosts. */
  double opt = d->mem.optimizer;
  cr_assert_eq(opt, 0.0);
}

Test(hybrid, one_weird_trick_redistribution)
{
  /* Krizhevsky 2014, "One weird trick", section 2: convolutions data-parallel, fully
   * connected layers model-parallel; at the boundary every worker gathers all workers' last
   * convolutional outputs (forward) and the input gradients are summed back to their owners
   * (backward): an all-gather and a reduce-scatter of the whole batch's activations. */
  g_autoptr(ts_model) m = load_model("vgg16");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8@node,dp=4@net,kind:conv2d=dp", 256, 16);
  int fc6 = -1;
  for (int i = 0; i < m->nlayers; i++)
    if (strcmp(m->layers[i].name, "fc6") == 0)
      fc6 = i;
  cr_assert(fc6 > 0);
  double act = m->layers[fc6].in_act_elems * m->dtype_bytes * 16; /* per micro-batch */
  double want = 2 * act * (double)p->n_micro;
  double got = p->redistribution_bytes_per_step;
  cr_assert_float_eq(got, want, want * 1e-12, "redistribution %g bytes, expected %g", got, want);
  GError *err = NULL;
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &err);
  double b;
  int n = count_ops(tr, 0, "(redistribution)", &b);
  cr_assert_eq(n, 2 * (int)p->n_micro);
  cr_assert_float_eq(b, want, want * 1e-12);
  /* Convolutions compute a quarter... an eighth of the micro-batch each, and their gradients are
   * synchronised over dp and tp together. */
  int conv_sync = 0;
  for (int i = 0; i < tr->programs[0].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
    if (o->kind == TS_OP_COLL && o->cat == TS_CAT_COMM_DP &&
        strcmp(((ts_group *)g_ptr_array_index(tr->groups, o->group))->name, "dp+tp") == 0)
      conv_sync++;
  }
  cr_assert(conv_sync > 0, "no gradient synchronisation over dp+tp");
  double conv_f = 0, want_f = 0;
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].kind == TS_LAYER_CONV2D)
      want_f += m->layers[i].fwd_flops * 16 / 8;
  for (int i = 0; i < tr->programs[0].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
    const char *l = g_ptr_array_index(tr->labels, o->label);
    if (o->kind == TS_OP_COMPUTE && g_str_has_prefix(l, "conv") && g_str_has_suffix(l, " fwd"))
      conv_f += o->flops;
  }
  want_f *= (double)p->n_micro;
  cr_assert_float_eq(conv_f, want_f, want_f * 1e-12);
  /* Everything data-parallel over tp is plain data parallelism. */
  ts_result a, c;
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 256;
  po.micro_batch = 8;
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  g_autoptr(ts_split) s1 = ts_split_parse("dp=32", &err);
  g_autoptr(ts_split) s2 = ts_split_parse("tp=8@node,dp=4@net,kind:conv2d=dp,kind:dense=dp", &err);
  po.micro_batch = 8;
  cr_assert(ts_run_predict(m, t, s1, &po, &ro, &a, &err), "%s", err ? err->message : "");
  po.micro_batch = 64;
  cr_assert(ts_run_predict(m, t, s2, &po, &ro, &c, &err), "%s", err ? err->message : "");
  double x = a.mem.params, y = c.mem.params;
  cr_assert_float_eq(x, y, x * 1e-12);
  ts_result_clear(&a);
  ts_result_clear(&c);
}

Test(memory, does_not_fit_reports_largest_micro_batch)
{
  /* Memory = model states + activations x micro-batch + buffers; a capacity between the
   * micro-batches 8 and 16 must report "does not fit", by how much, and 8. */
  g_autoptr(ts_topo) t = ring_topo(1, 1e11, 1e-6);
  g_autoptr(ts_model) m = equal_model(4, 1e9, 1e6, 1e6);
  double states = 16 * 4e6, per_sample = 4 * 1e6 + 2 * 2; /* activations + 2 outputs */
  t->chip.memory_bytes = states + 12 * per_sample;
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=1", 64, 64);
  cr_assert(!p->mem.fits);
  double over = p->mem.over, want = states + 64 * per_sample - t->chip.memory_bytes;
  cr_assert_float_eq(over, want, want * 1e-12, "over by %g, expected %g", over, want);
  cr_assert_eq(p->mem.max_micro_batch, 8, "largest fitting micro-batch %ld, expected 8",
               (long)p->mem.max_micro_batch);
  g_autoptr(ts_plan) q = make_plan(m, t, "dp=1", 64, 8);
  cr_assert(q->mem.fits);
  /* States alone too large: nothing fits. */
  t->chip.memory_bytes = states / 2;
  g_autoptr(ts_plan) r = make_plan(m, t, "dp=1", 64, 1);
  cr_assert_eq(r->mem.max_micro_batch, 0);
}

Test(memory, reserve_counts_in_fits)
{
  /* fits compares memory/chip + the runtime reserve with the capacity: with room for 12
   * micro-batch samples beside the reserve, 8 fits and 16 does not, by states + 16 samples +
   * reserve - capacity. memory/chip (total) itself excludes the reserve. */
  g_autoptr(ts_topo) t = ring_topo(1, 1e11, 1e-6);
  g_autoptr(ts_model) m = equal_model(4, 1e9, 1e6, 1e6);
  double states = 16 * 4e6, per_sample = 4 * 1e6 + 2 * 2, R = 3e6;
  t->chip.memory_reserve_bytes = R;
  t->chip.memory_bytes = states + 12 * per_sample + R;
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=1", 64, 16);
  cr_assert(!p->mem.fits);
  cr_assert_eq(p->mem.reserve, R);
  cr_assert_float_eq(p->mem.total, states + 16 * per_sample, 1e-3);
  double over = p->mem.over, want = states + 16 * per_sample + R - t->chip.memory_bytes;
  cr_assert_float_eq(over, want, want * 1e-12, "over by %g, expected %g", over, want);
  cr_assert_eq(p->mem.max_micro_batch, 8);
  g_autoptr(ts_plan) q = make_plan(m, t, "dp=1", 64, 8);
  cr_assert(q->mem.fits);
  /* Without the reserve the same capacity holds micro-batch 16 (12 + 3e6 / 4e6 samples). */
  t->chip.memory_bytes = states + 16 * per_sample + R - 1;
  g_autoptr(ts_plan) r = make_plan(m, t, "dp=1", 64, 16);
  cr_assert(!r->mem.fits, "1 byte short of the reserve must not fit");
  t->chip.memory_reserve_bytes = 0;
  g_autoptr(ts_plan) z = make_plan(m, t, "dp=1", 64, 16);
  cr_assert(z->mem.fits);
}

Test(memory, reserve_default_and_key)
{
  /* A topology file without the key: 1 GiB, the CUDA context and communication buffers
   * (docs/topologies.md); the allocator's fragmentation is a fraction of the transient peak
   * instead: 0.15 by default on a GPU, 0 on a TPU (XLA's static buffer plan). */
  g_autoptr(ts_topo) a = load_topo("dgx-a100-4node");
  double gib = 1073741824.0;
  cr_assert_float_eq(ts_chip_memory_reserve(&a->chip), gib, 1.0);
  cr_assert_float_eq(ts_chip_allocator_overhead(&a->chip), 0.15, 1e-12);
  g_autoptr(ts_topo) tpu = load_topo("tpu-v3-8x8");
  cr_assert_eq(ts_chip_allocator_overhead(&tpu->chip), 0.0);
  const char *base = "[chip]\nname = X\npeak_tflops = 100\nmemory_GiB = 16\n"
                     "memory_bandwidth_GBps = 900\n";
  const char *dims = "[dim.x]\nsize = 2\nshape = ring\nlink_bandwidth_GBps = 10\n"
                     "latency_us = 1\n";
  g_autofree char *ok = g_strdup_printf("%smemory_reserve_GiB = 2.5\n%s", base, dims);
  g_autoptr(GKeyFile) kf = g_key_file_new();
  cr_assert(g_key_file_load_from_data(kf, ok, (gsize)-1, G_KEY_FILE_NONE, NULL));
  GError *err = NULL;
  g_autoptr(ts_topo) t = ts_topo_from_keyfile(kf, "x.ini", &err);
  cr_assert_not_null(t, "%s", err ? err->message : "");
  cr_assert_eq(ts_chip_memory_reserve(&t->chip), 2.5 * gib);
  g_autofree char *al = g_strdup_printf("%sallocator_overhead = 0.3\n%s", base, dims);
  g_autoptr(GKeyFile) ka = g_key_file_new();
  cr_assert(g_key_file_load_from_data(ka, al, (gsize)-1, G_KEY_FILE_NONE, NULL));
  g_autoptr(ts_topo) ta = ts_topo_from_keyfile(ka, "x.ini", &err);
  cr_assert_not_null(ta, "%s", err ? err->message : "");
  cr_assert_eq(ts_chip_allocator_overhead(&ta->chip), 0.3);
  g_autofree char *al2 = g_strdup_printf("%sallocator_overhead = 1.5\n%s", base, dims);
  g_autoptr(GKeyFile) kb2 = g_key_file_new();
  cr_assert(g_key_file_load_from_data(kb2, al2, (gsize)-1, G_KEY_FILE_NONE, NULL));
  g_autoptr(ts_topo) tb = ts_topo_from_keyfile(kb2, "x.ini", &err);
  cr_assert_null(tb);
  cr_assert(strstr(err->message, "x.ini: [chip] allocator_overhead") != NULL, "%s", err->message);
  g_clear_error(&err);
  /* A reserve as large as the memory is refused, naming the key. */
  g_autofree char *bad = g_strdup_printf("%smemory_reserve_GiB = 16\n%s", base, dims);
  g_autoptr(GKeyFile) kb = g_key_file_new();
  cr_assert(g_key_file_load_from_data(kb, bad, (gsize)-1, G_KEY_FILE_NONE, NULL));
  g_autoptr(ts_topo) u = ts_topo_from_keyfile(kb, "x.ini", &err);
  cr_assert_null(u);
  cr_assert(strstr(err->message, "x.ini: [chip] memory_reserve_GiB") != NULL, "%s", err->message);
  g_clear_error(&err);
}

/* Bytes of buffers (temp) of a plan with a given bucket size. */
static double temp_with_bucket(const ts_model *m, const ts_topo *t, const char *split,
                               double bucket)
{
  GError *err = NULL;
  g_autoptr(ts_split) s = ts_split_parse(split, &err);
  cr_assert_not_null(s, "%s", err ? err->message : "");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 64;
  po.micro_batch = 8;
  po.bucket_bytes = bucket;
  g_autoptr(ts_plan) p = ts_plan_new(m, t, s, &po, &err);
  cr_assert_not_null(p, "%s", err ? err->message : "");
  return p->mem.temp;
}

Test(memory, gradient_buckets_follow_the_framework)
{
  /* psi = 4e6 parameters, 2-byte gradients: G = 8e6 bytes. The buckets are views of the
   * contiguous gradient buffer (Megatron DDP, PyTorch DDP gradient_as_bucket_view): no bytes
   * beside the gradients, whatever the bucket size, "no bucketing" (1e6 MiB) included.
   * buckets=copy (PyTorch DDP's default) adds one gradient-sized buffer, G. ZeRO 2 keeps a
   * gradient shard and reduces through two buckets: min(2B, G). */
  g_autoptr(ts_topo) t = ring_topo(8, 1e11, 1e-6);
  g_autoptr(ts_model) m = equal_model(4, 1e9, 1e6, 1e6);
  double G = 2 * 4e6, B = 1e6, huge = 1e6 * 1048576.0;
  double base = temp_with_bucket(m, t, "dp=8,zero=1", B);
  g_autoptr(ts_topo) t1 = ring_topo(1, 1e11, 1e-6);
  double one = temp_with_bucket(m, t1, "dp=1", B); /* no data parallelism: no buckets */
  cr_assert_float_eq(base, one, 1e-6, "views: %g vs %g", base, one);
  cr_assert_float_eq(temp_with_bucket(m, t, "dp=8", huge), base, 1e-6,
                     "no bucketing adds no gradient buffer");
  cr_assert_float_eq(temp_with_bucket(m, t, "dp=8,buckets=copy", B) - base, G, 1e-6);
  cr_assert_float_eq(temp_with_bucket(m, t, "dp=8,buckets=copy", huge) - base, G, 1e-6);
  cr_assert_float_eq(temp_with_bucket(m, t, "dp=8,zero=2", B) - base, 2 * B, 1e-6);
  cr_assert_float_eq(temp_with_bucket(m, t, "dp=8,zero=2", huge) - base, G, 1e-6,
                     "one bucket of every gradient, not two");
}

Test(tensor, pooler_gathers_the_sequence_under_sp)
{
  /* BERT's pooler reads the first token of the encoder output (not the logits before it in
   * layer order). Under sequence parallelism that output is split by tokens, so the pooler
   * all-gathers all of it first, as Megatron-LM's Pooler does: s x h x 2 bytes per sample.
   * Without sp the output is whole and nothing is gathered. */
  g_autoptr(ts_model) m = load_model("bert-base");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  int pooler = m->nlayers - 1;
  cr_assert_str_eq(m->layers[pooler].name, "pooler");
  cr_assert_str_eq(m->layers[m->layers[pooler].src].name, "block.11.norm2");
  g_autoptr(ts_plan) sp = make_plan(m, t, "tp=4@x,dp=16@x+y,sp", 64, 2);
  const ts_layer_exec *e = &sp->exec[pooler];
  cr_expect_eq(e->fwd_pre.kind, TS_COLL_ALLGATHER);
  cr_expect_eq(e->fwd_pre.bytes, 512.0 * 768 * 2, "gathers %g bytes", e->fwd_pre.bytes);
  cr_expect_eq(e->bwd_post.kind, TS_NO_COLL, "the pooler is not split: no gradient to sum");
  g_autoptr(ts_plan) plain = make_plan(m, t, "tp=4@x,dp=16@x+y", 64, 2);
  cr_expect_eq(plain->exec[pooler].fwd_pre.kind, TS_NO_COLL);
}

Test(split, option_errors_name_the_item)
{
  const struct {
    const char *split, *expect;
  } cases[] = {
      {"pp=4,zero=4", "item 'zero=4': expected zero=0, 1, 2 or 3"},
      {"pp=4,schedule=zigzag", "item 'schedule=zigzag': expected schedule=gpipe, 1f1b"},
      {"pp=4,p2p=sync", "item 'p2p=sync': expected p2p=async (sends overlap the next compute) or "
                        "blocking"},
      {"pp=4,pipe-engine=torch", "item 'pipe-engine=torch': expected pipe-engine=megatron "},
      {"pp=4,launch=sync", "item 'launch=sync': expected launch=async (the host launches "},
      {"pp=4,load=maybe", "item 'load=maybe': expected load=async (the input load never waits "
                          "for the device) or sync"},
      {"pp=4,schedule=interleaved:1", "expected schedule=interleaved:V"},
      {"tp=4,recompute=most", "item 'recompute=most': expected recompute=none, selective, full, "
                              "full:N, stage, stage:except-last, op, dots or dots:except-mlpwi"},
      {"tp=4,sp=maybe", "item 'sp=maybe'"},
      {"dp=8,offload=disk", "item 'offload=disk': expected offload=none, cpu or nvme"},
      {"dp=8,ps=0", "item 'ps=0'"},
      {"dp=8,ps-placement=far", "item 'ps-placement=far'"},
      {"pp=2,stages=3:x", "item 'stages=3:x'"},
      {"tp=8,kind:lstm=dp", "item 'kind:lstm=dp'"},
      {"tp=8,kind:conv2d=both", "item 'kind:conv2d=both'"},
      {"tp=8,colour=red", "unknown axis 'colour'"},
      {"zero", "item 'zero': expected AXIS=DEGREE"},
      {"pp=2,stages=", "item 'stages=': expected stages=N1:N2"},
      {"pp=8,schedule=gpipe,schedule=1f1b", "option schedule given twice"},
      {"tp=8,sp,sp=off", "option sp given twice"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    GError *err = NULL;
    ts_split *s = ts_split_parse(cases[i].split, &err);
    cr_assert_null(s, "'%s' parsed", cases[i].split);
    cr_assert(strstr(err->message, cases[i].expect) != NULL, "'%s': '%s' lacks '%s'",
              cases[i].split, err->message, cases[i].expect);
    cr_assert(strchr(err->message, '\n') == NULL);
    g_error_free(err);
  }
}

/* What run prints as a split is accepted back by --split and plans the same: this session's
 * framework options (pipe-engine, launch, tp-grad, attn-kernel) print only when not the default,
 * each in the form the parser reads. */
Test(split, printed_split_parses_back)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  const struct {
    const char *split, *printed;
  } cases[] = {
      {"tp=8@node,pp=2@net,dp=2@net,zero=1,recompute=full,p2p=blocking,pipe-engine=deepspeed,"
       "launch=blocking,tp-grad=serial,attn-kernel=fa1",
       "tp=8,dp=2,pp=2,schedule=1f1b,recompute=full,zero=1,attn-kernel=fa1,p2p=blocking,"
       "tp-grad=serial,pipe-engine=deepspeed,launch=blocking"},
      {"dp=32,attn-kernel=triton,launch=async,tp-grad=async,pipe-engine=megatron",
       "dp=32,attn-kernel=triton"},
      {"tp=8,pp=4,attn-kernel=fa2,tp-grad=serial,pipe-engine=deepspeed",
       "tp=8,pp=4,schedule=1f1b,tp-grad=serial,pipe-engine=deepspeed"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(ts_plan) p = make_plan(m, t, cases[i].split, 64, 0);
    cr_assert_str_eq(p->split_text, cases[i].printed);
    g_autoptr(ts_plan) q = make_plan(m, t, p->split_text, 64, 0);
    cr_assert_str_eq(q->split_text, p->split_text);
    cr_assert_str_eq(q->placement_text, p->placement_text);
  }
}

Test(split, invalid_combinations)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  const struct {
    const char *split;
    gint64 batch, micro;
    const char *expect;
  } cases[] = {
      {"dp=64,sp", 64, 0, "expected tp > 1"},
      {"tp=64,zero=1", 64, 0, "expected dp > 1"},
      {"dp=64,offload=cpu", 64, 0, "expected zero=1, 2 or 3"},
      {"dp=64,zero=2,offload=cpu", 64, 0, "has no [host] link_bandwidth_GBps"},
      {"dp=64,ps=4,zero=1", 64, 0, "without zero or offload"},
      {"dp=8,tp=8,ps=16", 64, 0, "at most dp=8 shards"},
      {"pp=8,dp=8,schedule=interleaved:2", 96, 1, "expected a multiple of 8"},
      {"pp=8,dp=8,stages=4:4", 64, 1, "expected 8 stages"},
      {"tp=8,dp=8,name:nothing*=dp", 64, 0, "matches no layer"},
      {"dp=64,ep=8", 64, 0, "has no mixture-of-experts layer"},
      {"tp=8,dp=8,pipe-engine=deepspeed", 64, 0, "pipeline engine; expected pp > 1"},
      {"pp=8,dp=8,zero=2,pipe-engine=deepspeed", 64, 1, "with zero=2; expected zero=0 or 1"},
      {"pp=8,dp=8,zero=3,pipe-engine=deepspeed", 64, 1, "with zero=3; expected zero=0 or 1"},
      {"pp=8,dp=8,schedule=gpipe,pipe-engine=deepspeed", 64, 1, "expected schedule=1f1b"},
      {"pp=8,dp=8,schedule=interleaved:2,pipe-engine=deepspeed", 64, 1,
       "with schedule=interleaved; expected schedule=1f1b"},
      {"dp=64,attention=unfused,attn-kernel=cudnn", 64, 0,
       "attn-kernel=cudnn with attention=unfused; expected one of them"},
      {"dp=64,launch=blocking", 64, 0, "([chip] kernel_launch_us > 0; TPU v3 has none)"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    GError *err = NULL;
    g_autoptr(ts_split) s = ts_split_parse(cases[i].split, &err);
    cr_assert_not_null(s, "%s", err ? err->message : "");
    ts_plan_options po;
    ts_plan_options_default(&po);
    po.global_batch = cases[i].batch;
    po.micro_batch = cases[i].micro;
    ts_plan *p = ts_plan_new(m, t, s, &po, &err);
    cr_assert_null(p, "'%s' accepted", cases[i].split);
    cr_assert(strstr(err->message, cases[i].expect) != NULL, "'%s': '%s' lacks '%s'",
              cases[i].split, err->message, cases[i].expect);
    g_error_free(err);
  }
}

/* attn-block=FWD[:BWD]: the Pallas attention kernels' block on a TPU (MaxText's sa_block_*),
 * printed back as given (the backward only when it differs), refused on a GPU (no Pallas
 * kernel) and when not a positive whole number. */
Test(split, tpu_attention_block)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  const struct {
    const char *split, *printed;
  } cases[] = {
      {"dp=64,attn-block=1024:2048", "dp=64,attn-block=1024:2048"},
      {"dp=64,attn-block=2048:2048", "dp=64,attn-block=2048"},
      {"dp=64,attn-block=512", "dp=64,attn-block=512"},
      {"dp=64,attn-block=2048,attn-bwd=fused", "dp=64,attn-block=2048,attn-bwd=fused"},
      {"dp=64,attn-bwd=split", "dp=64"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(ts_plan) p = make_plan(m, t, cases[i].split, 64, 0);
    cr_assert_str_eq(p->split_text, cases[i].printed);
    g_autoptr(ts_plan) q = make_plan(m, t, p->split_text, 64, 0);
    cr_assert_str_eq(q->split_text, p->split_text);
  }
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=64,attn-block=1024:2048", 64, 0);
  cr_assert_eq(p->attn_block_fwd, 1024);
  cr_assert_eq(p->attn_block_bwd, 2048);
  const char *bad[] = {"dp=64,attn-block=0", "dp=64,attn-block=512:", "dp=64,attn-block=x",
                       "dp=64,attn-block=:512"};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    GError *err = NULL;
    ts_split *s = ts_split_parse(bad[i], &err);
    cr_assert_null(s, "'%s' accepted", bad[i]);
    cr_assert(strstr(err->message, "attn-block=N or attn-block=FWD:BWD") != NULL, "'%s': %s",
              bad[i], err->message);
    g_error_free(err);
  }
  {
    GError *e = NULL;
    ts_split *x = ts_split_parse("dp=64,attn-bwd=both", &e);
    cr_assert_null(x);
    cr_assert(strstr(e->message, "attn-bwd=split") != NULL, "%s", e->message);
    g_error_free(e);
  }
  g_autoptr(ts_topo) g = load_topo("dgx-a100-4node");
  GError *err = NULL;
  g_autoptr(ts_split) s = ts_split_parse("dp=32,attn-block=1024", &err);
  cr_assert_not_null(s);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 32;
  ts_plan *r = ts_plan_new(m, g, s, &po, &err);
  cr_assert_null(r, "attn-block accepted on a GPU");
  cr_assert(strstr(err->message, "expected a systolic chip") != NULL, "%s", err->message);
  g_error_free(err);
}

Test(split, more_stages_than_layers)
{
  g_autoptr(ts_topo) t = ring_topo(4, 1e11, 1e-6);
  g_autoptr(ts_model) m = equal_model(3, 1e9, 1e6, 1e6);
  GError *err = NULL;
  g_autoptr(ts_split) s = ts_split_parse("pp=4", &err);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 4;
  ts_plan *p = ts_plan_new(m, t, s, &po, &err);
  cr_assert_null(p);
  cr_assert(strstr(err->message, "4 pipeline stages but equal has 3 layers"), "%s", err->message);
  g_error_free(err);
}

Test(placement, pipeline_on_slowest_dimension)
{
  /* pp goes on the slowest dimension, tensor parallelism on the fastest; the placement text
   * says so. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8,pp=4", 32, 1);
  cr_assert_str_eq(p->placement_text, "tp@node,pp@net");
  g_autoptr(ts_plan) q = make_plan(m, t, "tp=4,pp=4,dp=2", 32, 1);
  cr_assert_str_eq(q->placement_text, "tp@node:4,dp@node:2,pp@net");
}

Test(compose, every_combination_replays)
{
  /* The issue's example and its neighbours: every split composes with every other. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-32node");
  const char *splits[] = {
      "tp=8@node,pp=8,dp=4@net,zero=1",
      "tp=8@node,pp=8,dp=4@net,zero=1,schedule=1f1b,recompute=full",
      "tp=8,pp=4,dp=8,schedule=interleaved:2,sp,recompute=selective",
      "tp=4,pp=4,dp=16,zero=2,schedule=gpipe",
      "tp=2,pp=2,dp=64,zero=3,recompute=full,sp",
      "tp=8,pp=2,dp=16,zero=3,offload=nvme",
      "tp=8,pp=2,dp=16,zero=2,offload=cpu",
      "tp=8,pp=2,dp=16,ps=4,ps-placement=dedicated",
      "tp=8,pp=2,dp=16,ps=16",
      "tp=8,dp=32,name:block.1*=dp,sp",
  };
  for (size_t i = 0; i < G_N_ELEMENTS(splits); i++) {
    ts_result a, b;
    GError *err = NULL;
    g_autoptr(ts_split) s = ts_split_parse(splits[i], &err);
    cr_assert_not_null(s, "%s", err ? err->message : "");
    ts_plan_options po;
    ts_plan_options_default(&po);
    po.global_batch = 256;
    ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE},
                   rf = {.backend = "analytic", .sg_cfg = NULL, .full = TRUE};
    cr_assert(ts_run_predict(m, t, s, &po, &ro, &a, &err), "%s: %s", splits[i],
              err ? err->message : "");
    cr_assert(ts_run_predict(m, t, s, &po, &rf, &b, &err), "%s: %s", splits[i],
              err ? err->message : "");
    double x = a.step_time_s, y = b.step_time_s;
    cr_assert_eq(x, y, "%s: collapsed %.17g != full %.17g", splits[i], x, y);
    double sum = a.compute_time_s + a.exposed_comm_time_s + a.idle_time_s;
    cr_assert_float_eq(sum, x, x * 1e-9, "%s: breakdown does not add up", splits[i]);
    double flops = a.model_flops_per_step;
    cr_assert(flops > 0);
    ts_result_clear(&a);
    ts_result_clear(&b);
  }
}

Test(models, megatron_gpt_table_1)
{
  /* Narayanan et al. 2021 SC, Table 1 and section 5.1: P = 12 l h^2 (1 + 13/(12h) +
   * (V + s)/(12 l h)), V = 51200, s = 2048; the generator adds the final layer norm (2h). The
   * published figures are rounded; the two smallest differ from the formula by 2.8% and 1.1%
   * (as printed in the paper), the rest by under 0.3%. */
  const struct {
    const char *name;
    double published, tol;
  } cases[] = {{"1.7b", 1.7e9, 0.03},    {"3.6b", 3.6e9, 0.015},   {"7.5b", 7.5e9, 0.005},
               {"18b", 18.4e9, 0.003},   {"39b", 39.1e9, 0.003},   {"76b", 76.1e9, 0.003},
               {"145b", 145.6e9, 0.003}, {"310b", 310.1e9, 0.003}, {"530b", 529.6e9, 0.003},
               {"1t", 1008.0e9, 0.003}};
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf("megatron-gpt-%s", cases[i].name);
    g_autoptr(ts_model) m = load_model(name);
    double l = (double)m->t_layers, h = (double)m->t_hidden, V = 51200, s = 2048;
    double formula = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h)) + 2 * h;
    double p = ts_model_params(m);
    cr_assert_float_eq(p, formula, formula * 1e-12, "%s: %.17g vs formula %.17g", name, p, formula);
    double r = fabs(p / cases[i].published - 1);
    cr_assert(r < cases[i].tol, "%s: %.4g vs published %.4g", name, p, cases[i].published);
    /* FLOPs per sample: 6 P s + the attention's 12 l s^2 h (Narayanan et al. 2021 SC, 5.1,
     * without recomputation: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) per batch B). */
    double f = ts_model_train_flops_per_sample(m);
    double want = 72 * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    cr_assert(fabs(f / want - 1) < 0.01, "%s: %.4g FLOP vs %.4g", name, f, want);
  }
}

/* ---- the program -------------------------------------------------------------------------- */

static int run_cli(const char *args, char **out, char **err)
{
  g_autofree char *cmd = g_strdup_printf("%s %s", TS_TRAINSIM_BIN, args);
  g_auto(GStrv) argv = NULL;
  cr_assert(g_shell_parse_argv(cmd, NULL, &argv, NULL));
  int wait = 0;
  cr_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, out, err, &wait, NULL));
  return WIFEXITED(wait) ? WEXITSTATUS(wait) : 128;
}

Test(cli, bad_split_item_exits_2_with_one_line)
{
  const char *cases[] = {"-s pp=4,zero=9",
                         "-s tp=4,schedule=zigzag",
                         "-s dp=64,sp",
                         "-s pp=4,dp=16,stages=1:2",
                         "-s pp=8,dp=8,zero=2,pipe-engine=deepspeed",
                         "-s dp=64,launch=blocking",
                         "-s dp=64,attention=unfused,attn-kernel=fa2",
                         "-s dp=64,attn-kernel=triton"};
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *args = g_strdup_printf("run -t tpu-v3-8x8 -m gpt3-1.3b -b 64 %s", cases[i]);
    g_autofree char *out = NULL, *err = NULL;
    int st = run_cli(args, &out, &err);
    cr_assert_eq(st, 2, "`%s` exited %d: %s", args, st, err);
    const char *nl = strchr(err, '\n');
    cr_assert(nl != NULL && nl[1] == '\0', "`%s`: expected one line, got '%s'", args, err);
    cr_assert_str_eq(out, "");
  }
}

Test(cli, pipeline_run_reports_memory_fields)
{
  g_autofree char *out = NULL, *err = NULL;
  int st = run_cli("run -t tpu-v3-8x8 -m gpt3-1.3b -b 64 -s tp=8,pp=8,schedule=gpipe "
                   "-s tp=8,pp=8,zero=0 --format json",
                   &out, &err);
  cr_assert_eq(st, 0, "%s", err);
  const char *fields[] = {"\"max_micro_batch_fits\"",
                          "\"memory_over_bytes\"",
                          "\"inflight_micro_batches\"",
                          "\"memory_offloaded_bytes\"",
                          "\"pipeline_stages\" : 8",
                          "schedule=gpipe",
                          "pp@y"};
  for (size_t i = 0; i < G_N_ELEMENTS(fields); i++)
    cr_assert(strstr(out, fields[i]) != NULL, "JSON lacks %s", fields[i]);
  g_autofree char *t = NULL, *e2 = NULL;
  st = run_cli("run -t tpu-v3-8x8 -m gpt3-1.3b -b 512 -s tp=8,dp=8", &t, &e2);
  cr_assert_eq(st, 0, "%s", e2);
  cr_assert(strstr(t, "micro-batch <= ") != NULL, "text lacks the fitting micro-batch: %s", t);
}

/* run's JSON gives every pipeline device's memory (memory_per_device_bytes, pipeline order):
 * as many as pp, memory_per_chip_bytes the largest of them, at memory_stage. TorchTitan's
 * interleaved Llama 3.1 405B (docs/splits.md, "fsdp2 with pp"): the last device, which keeps
 * every micro-batch's logits, is the largest; without a pipeline one device. */
Test(cli, pipeline_run_reports_every_devices_memory)
{
  const char *runs[][2] = {
      {"run -t grand-teton-h100-32node -m llama3-405b -b 128 --micro-batch 4 -s "
       "tp=8@node,dp=4@net,pp=8@net,sp,zero=3,fsdp2,recompute=full,loss=eager,precision=fp8,"
       "schedule=interleaved:2,stages=36:40:40:40:40:40:40:40:40:40:40:40:40:40:40:37 -f json",
       "8"},
      {"run -t tpu-v3-8x8 -m gpt3-1.3b -b 64 -s tp=8,dp=8 -f json", "1"}};
  for (size_t k = 0; k < G_N_ELEMENTS(runs); k++) {
    g_autofree char *out = NULL, *err = NULL;
    int st = run_cli(runs[k][0], &out, &err);
    cr_assert_eq(st, 0, "%s", err);
    g_autoptr(JsonParser) jp = json_parser_new();
    cr_assert(json_parser_load_from_data(jp, out, -1, NULL));
    JsonObject *root = json_node_get_object(json_parser_get_root(jp));
    JsonObject *r = json_array_get_object_element(json_object_get_array_member(root, "results"), 0);
    JsonArray *dev = json_object_get_array_member(r, "memory_per_device_bytes");
    cr_assert_not_null(dev, "no memory_per_device_bytes: %s", out);
    guint n = json_array_get_length(dev);
    cr_assert_eq(n, (guint)atoi(runs[k][1]), "%u devices", n);
    guint argmax = 0;
    for (guint d = 0; d < n; d++) {
      cr_assert_gt(json_array_get_double_element(dev, d), 0);
      if (json_array_get_double_element(dev, d) > json_array_get_double_element(dev, argmax))
        argmax = d;
    }
    double chip = json_object_get_double_member(r, "memory_per_chip_bytes");
    cr_assert_float_eq(json_array_get_double_element(dev, argmax), chip, chip * 1e-12);
    cr_assert_eq(json_object_get_int_member(r, "memory_stage"), (gint64)argmax);
    if (n == 8) {
      cr_assert_eq(argmax, 7, "the interleaved pipeline's last device is the largest");
      cr_assert_lt(json_array_get_double_element(dev, 0), 0.95 * chip,
                   "device 0 holds no logits: %g vs %g", json_array_get_double_element(dev, 0),
                   chip);
    }
  }
}

/* ---- mixture of experts ----------------------------------------------------------------- */

Test(models, mixture_of_experts_counts)
{
  /* E copies of the MLP in every other layer, each token through top_k of them, plus the gate
   * (h x E): parameters grow by (E - 1) MLPs + gate per MoE layer, FLOPs by (top_k - 1) MLPs
   * + gate. DeepSpeed-MoE (Rajbhandari et al. 2022): 1.3B+MoE-128 has 52B parameters. */
  g_autoptr(ts_model) moe = load_model("gpt-1.3b-moe-128");
  g_autoptr(ts_model) dense = load_model("gpt3-1.3b");
  double h = 2048, f = 8192, E = 128, T = 2048, nmoe = 12;
  double mlp = h * f + f + f * h + h;
  double want = ts_model_params(dense) + nmoe * ((E - 1) * mlp + h * E);
  double got = ts_model_params(moe);
  cr_assert_float_eq(got, want, want * 1e-12, "%.17g vs %.17g", got, want);
  double r = fabs(got / 52e9 - 1);
  cr_assert(r < 0.01, "%.4g parameters vs DeepSpeed-MoE's 52B", got);
  /* Top-1: the same work per token as the dense model, plus the gate (forward 2ThE + TE
   * softmax, backward 2 x 2ThE). */
  double fd = ts_model_train_flops_per_sample(dense), fm = ts_model_train_flops_per_sample(moe);
  double gate = nmoe * (3 * 2 * T * h * E + T * E);
  cr_assert_float_eq(fm, fd + gate, (fd + gate) * 1e-12, "%.17g vs %.17g", fm, fd + gate);
  int nexp = 0;
  for (int i = 0; i < moe->nlayers; i++)
    if (moe->layers[i].experts > 0) {
      nexp++;
      cr_assert(strstr(moe->layers[i].name, "fc") != NULL);
      cr_assert(g_str_has_prefix(moe->layers[i].name, "block."));
    }
  cr_assert_eq(nexp, 24, "%d expert layers, expected fc1 and fc2 of 12 blocks", nexp);
}

Test(models, mixture_of_experts_key_errors)
{
  g_autofree char *dir = g_dir_make_tmp("ts-moe-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "m.ini", NULL);
  const char *text = "[model]\nkind = transformer\n[transformer]\nlayers = 2\nhidden = 64\n"
                     "heads = 4\nsequence = 16\nvocab = 100\nexperts = 4\ntop_k = 5\n";
  cr_assert(g_file_set_contents(path, text, -1, NULL));
  GError *err = NULL;
  ts_model *m = ts_model_load(path, &err);
  cr_assert_null(m);
  cr_assert(strstr(err->message, "[transformer] top_k='5': expected at most [transformer] "
                                 "experts = 4"),
            "%s", err->message);
  g_error_free(err);
  g_unlink(path);
  g_rmdir(dir);
}

Test(experts, all_to_all_and_expert_shards)
{
  /* GShard (Lepikhin et al. 2021, section 2.2) / DeepSpeed-MoE: with ep ranks each keeps
   * E / ep experts; every MoE layer dispatches its tokens' top_k copies to their experts and
   * combines them back, forward and backward: four all-to-alls of top_k s b h D bytes per MoE
   * layer per micro-batch. Expert gradients are synchronised over the dp / ep replicas of each
   * expert, the rest over all of dp. */
  g_autoptr(ts_model) m = load_model("gpt-1.3b-moe-128");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=32,ep=8,zero=1", 128, 2);
  double dense = 0, expert = 0;
  for (int i = 0; i < m->nlayers; i++)
    *(m->layers[i].experts > 0 ? &expert : &dense) += m->layers[i].params;
  double psi = p->params_per_chip, want = dense + expert / 8;
  cr_assert_float_eq(psi, want, want * 1e-12, "%.17g parameters per chip, expected %.17g", psi,
                     want);
  /* ZeRO-1: optimizer state sharded over 32 ranks (dense) and over 4 (experts). */
  double opt = p->mem.optimizer, want_opt = 12 * (dense / 32 + expert / 8 / 4);
  cr_assert_float_eq(opt, want_opt, want_opt * 1e-12);
  GError *err = NULL;
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &err);
  double bytes;
  int n = count_ops(tr, 0, "all-to-all", &bytes);
  int M = (int)p->n_micro;
  double each = 1 * 2048.0 * 2 * 2048 * 2; /* top_k s b h D */
  cr_assert_eq(n, 4 * 12 * M, "%d all-to-alls, expected 4 x 12 MoE layers x %d", n, M);
  cr_assert_float_eq(bytes, n * each, n * each * 1e-12);
  int ep_groups = 0, edp_sync = 0;
  for (int i = 0; i < tr->programs[0].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
    if (o->kind != TS_OP_COLL)
      continue;
    const char *gname = ((ts_group *)g_ptr_array_index(tr->groups, o->group))->name;
    if (o->coll == TS_COLL_ALLTOALL)
      ep_groups += strcmp(gname, "ep") == 0;
    if (o->cat == TS_CAT_COMM_DP && o->coll == TS_COLL_REDUCESCATTER && strcmp(gname, "dp") == 0)
      edp_sync++;
  }
  cr_assert_eq(ep_groups, n);
  cr_assert(edp_sync > 0, "no expert gradient reduction over dp / ep");
  ts_replay_result rr;
  replay_plan(p, &rr);
  /* Collapsed and full replays agree with the extra axis. */
  ts_replay_result full;
  ts_run_options rf = {.backend = "analytic", .sg_cfg = NULL, .full = TRUE};
  cr_assert(ts_run_replay(tr, t, &rf, &full, &err), "%s", err ? err->message : "");
  double a = rr.step_time_s, b = full.step_time_s;
  cr_assert_eq(a, b, "collapsed %.17g != full %.17g", a, b);
}

Test(tensor, row_split_biases_are_whole_on_every_member)
{
  /* Megatron's RowParallelLinear adds its bias after the all-reduce, so a row-split layer's
   * bias and attention's output bias are whole on every member; weights and column biases are
   * split (Shoeybi et al. 2019, section 3). validate-transformer, h = 8, ffn 16, tp = 2:
   * norms 2 x 16 whole; attention 4h^2/2 + 3h/2 + h = 148; fc1 (8*16 + 16)/2 = 72;
   * fc2 16*8/2 + 8 = 72; head (replicated) 64 + 8 = 72: 396 per chip (672 unsplit). */
  g_autoptr(ts_topo) t = ring_topo(2, 1e18, 0);
  g_autoptr(ts_model) m = load_model("validate-transformer");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=2", 2, 2);
  static const double want[] = {16, 148, 16, 72, 72, 72};
  cr_assert_eq(m->nlayers, (int)G_N_ELEMENTS(want));
  for (int i = 0; i < m->nlayers; i++) {
    double got = ts_plan_layer_params(p, i);
    cr_assert_float_eq(got, want[i], 1e-9, "%s: %g parameters per chip, expected %g",
                       m->layers[i].name, got, want[i]);
  }
  double psi = p->params_per_chip;
  cr_assert_float_eq(psi, 396.0, 1e-9, "%g parameters per chip", psi);
}

/* ---- today's decoders under tensor and expert parallelism ------------------------------- */

static int layer_index(const ts_model *m, const char *name)
{
  for (int i = 0; i < m->nlayers; i++)
    if (strcmp(m->layers[i].name, name) == 0)
      return i;
  cr_assert_fail("no layer %s", name);
  return -1;
}

Test(tensor, grouped_query_attention_under_tp8)
{
  /* Llama 3.1 8B, tp = 8 (Megatron-LM): each member holds a / 8 = 4 query heads and g / 8 = 1
   * key/value head: an eighth of every projection, params / 8 (no biases). Forward: the
   * attention all-reduces its partial output, T h D bytes; backward the norm-to-attention
   * input gradient is all-reduced, T h D. Work per member: the layer's FLOPs / 8. Kept: the
   * input T h D whole (no sp), the rest / 8: (D (2 T I + 2 T J) + 4 a T) / 8 (flash attention,
   * the default, keeps the softmax statistics, 4 a T bytes, instead of the a T^2 scores). */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8,dp=4", 4, 1);
  int i = layer_index(m, "block.3.attention");
  const ts_layer *l = &m->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  double T = 8192, h = 4096, a = 32, I = 4096, J = 1024, D = 2;
  double got = ts_plan_layer_params(p, i), want = (2 * h * I + 2 * h * J) / 8;
  cr_assert_eq(got, want, "attention params per chip %.0f vs %.0f", got, want);
  cr_assert_eq(e->fwd_post.kind, TS_COLL_ALLREDUCE);
  cr_assert_eq(e->bwd_post.kind, TS_COLL_ALLREDUCE);
  double fb = e->fwd_post.bytes, bb = e->bwd_post.bytes;
  cr_assert_eq(fb, T * h * D);
  cr_assert_eq(bb, T * h * D);
  double flops = l->fwd_flops / e->cdiv;
  want =
      (4 * T * h * I + 4 * T * h * J + 4 * T * T * I + a * T * T + T * h + 3 * (T * I + T * J)) / 8;
  cr_assert_eq(flops, want, "forward FLOPs per chip %.0f vs %.0f", flops, want);
  double kept = e->act_bytes;
  want = D * T * h + (D * (2 * T * I + 2 * T * J) + 4 * a * T) / 8;
  cr_assert_eq(kept, want, "kept per chip %.0f vs %.0f", kept, want);
  /* The trace: per micro-batch one forward all-reduce of T h D per attention layer. */
  g_autoptr(ts_trace) tr = trace_of(p);
  double bytes = 0;
  int n = 0;
  for (int k = 0; k < tr->programs[0].nops; k++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], k), *o = &o_;
    const char *lab = g_ptr_array_index(tr->labels, o->label);
    if (o->kind == TS_OP_COLL && o->coll == TS_COLL_ALLREDUCE && strstr(lab, "attention") &&
        strstr(lab, "fwd")) {
      n++;
      bytes += o->bytes;
    }
  }
  cr_assert_eq(n, 32, "%d forward attention all-reduces, expected 32", n);
  cr_assert_eq(bytes, 32 * T * h * D);
}

Test(tensor, kv_heads_must_divide_by_tp)
{
  /* Megatron-LM divides the key/value heads among tp members (divide(num_query_groups, tp))
   * and refuses a tp that does not divide them: Llama 3's 8 key/value heads allow tp <= 8. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = ring_topo(16, 1e11, 0);
  g_autoptr(ts_split) s = ts_split_parse("tp=16", NULL);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 1;
  GError *err = NULL;
  ts_plan *p = ts_plan_new(m, t, s, &po, &err);
  cr_assert_null(p);
  cr_assert_not_null(err);
  cr_assert_not_null(strstr(err->message, "tp=16 does not divide the 8 key/value heads"), "%s",
                     err->message);
  cr_assert_null(strchr(err->message, '\n'));
  g_error_free(err);
}

Test(tensor, vocabulary_padded_as_megatron)
{
  /* Megatron-LM pads the vocabulary to a multiple of make_vocab_size_divisible_by x tp:
   * 128,256 with 128 x 8 = 1024 becomes 129,024, each member holds 129,024 / 8 rows of the
   * embedding and of the untied logits, and computes the logits of as many. tp = 1 pads to 128:
   * 128,256 is already a multiple (1002 x 128). */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8,dp=4", 4, 1);
  int emb = layer_index(m, "embedding"), lg = layer_index(m, "logits");
  double h = 4096, T = 8192;
  double got = ts_plan_layer_params(p, emb), want = 129024.0 * h / 8;
  cr_assert_float_eq(got, want, 1e-3, "embedding rows per chip: %.3f vs %.0f", got, want);
  got = ts_plan_layer_params(p, lg);
  cr_assert_float_eq(got, want, 1e-3);
  /* The logits GEMM 2 T h V and the loss, 1 FLOP per logit, over the padded rows. */
  double f = m->layers[lg].fwd_flops / p->exec[lg].cdiv, wf = (2 * T * h + T) * 129024.0 / 8;
  cr_assert_float_eq(f, wf, wf * 1e-12, "logits FLOPs per chip %.6g vs %.6g", f, wf);
  g_autoptr(ts_plan) p1 = make_plan(m, t, "dp=32", 32, 1);
  got = ts_plan_layer_params(p1, emb);
  cr_assert_eq(got, 128256.0 * h);
}

Test(tensor, latent_attention_replicates_its_down_projections)
{
  /* Megatron-Core's MLA: q_a (h x rq), kv_a (h x (rkv + dr)) and the two latent norms are
   * replicated over tp; q_b, kv_b and o are split by heads. DeepSeek-V3 at tp = 8. */
  g_autoptr(ts_model) m = load_model("deepseek-v3");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-32node");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8,pp=16,dp=2,ep=2", 64, 1);
  int i = layer_index(m, "block.0.attention");
  double h = 7168, rq = 1536, rkv = 512, dr = 64;
  double repl = h * rq + rq + h * (rkv + dr) + rkv;
  double all = m->layers[i].params, got = ts_plan_layer_params(p, i);
  double want = (all - repl) / 8 + repl;
  cr_assert_eq(got, want, "MLA params per chip %.0f vs %.0f", got, want);
}

/* Sum of the bytes of program `prog`'s collectives whose label contains `needle`, each
 * checked to be over the group named `group`; returns how many. */
static int coll_ops_on(const ts_trace *tr, int prog, const char *needle, const char *group,
                       double *bytes)
{
  int n = 0;
  *bytes = 0;
  for (int i = 0; i < tr->programs[prog].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[prog], i), *o = &o_;
    if (o->kind != TS_OP_COLL || strstr(g_ptr_array_index(tr->labels, o->label), needle) == NULL)
      continue;
    const char *g = ((ts_group *)g_ptr_array_index(tr->groups, o->group))->name;
    cr_assert_str_eq(g, group, "%s: over %s, expected %s",
                     (const char *)g_ptr_array_index(tr->labels, o->label), g, group);
    n++;
    *bytes += o->bytes;
  }
  return n;
}

Test(tensor, latent_attention_sums_its_partial_gradients_over_tp)
{
  /* Under tp each member back-propagates only its heads' up projections, so the gradients of
   * the latents, of the rotary key shared by all heads and of the replicated down projections
   * are partial over tp. Without sequence parallelism the up projections' input gradient (the
   * latents' and the rotary key's, T (rq + rkv + dr) per sample) is all-reduced over tp in
   * place of the layer input's (T h), as Megatron-Core's column-parallel up projections do;
   * with it the input gradient is reduce-scattered as for any attention layer and the
   * replicated weights' gradients (h rq + rq + h (rkv + dr) + rkv) are all-reduced over tp
   * once per step before the dp reduction. DeepSeek-V3 at tp = 8, micro-batch 1. */
  g_autoptr(ts_model) m = load_model("deepseek-v3");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-32node");
  double h = 7168, rq = 1536, rkv = 512, dr = 64, T = 4096, D = m->dtype_bytes;
  double repl = h * rq + rq + h * (rkv + dr) + rkv, bytes;
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8,pp=16,dp=2,ep=2", 64, 1);
  g_autoptr(ts_trace) tr = trace_of(p);
  int M = (int)p->n_micro;
  int n = coll_ops_on(tr, 0, "block.0.attention bwd all-reduce", "tp", &bytes);
  double each = T * (rq + rkv + dr) * D;
  cr_assert_eq(n, M, "%d latent all-reduces, expected one per micro-batch (%d)", n, M);
  cr_assert_float_eq(bytes, M * each, each * 1e-12, "%.0f vs %d x %.0f", bytes, M, each);
  cr_assert_eq(coll_ops_on(tr, 0, "grad tp all-reduce", "tp", &bytes), 0);
  /* A dense layer's input-gradient all-reduce is unchanged: the first (dense) block's fc1, T h. */
  n = coll_ops_on(tr, 0, "block.0.fc1 bwd all-reduce", "tp", &bytes);
  cr_assert(n == M && bytes == M * T * h * D, "fc1: %d ops, %.0f bytes", n, bytes);

  g_autoptr(ts_plan) ps = make_plan(m, t, "tp=8,sp,pp=16,dp=2,ep=2", 64, 1);
  g_autoptr(ts_trace) ts = trace_of(ps);
  for (int a = 0; a < 3; a++) {
    char name[64];
    g_snprintf(name, sizeof name, "grad tp all-reduce block.%d.attention", a);
    n = coll_ops_on(ts, 0, name, "tp", &bytes);
    cr_assert_eq(n, 1, "%s: %d ops, expected one per step", name, n);
    cr_assert_float_eq(bytes, repl * D, 1e-6, "%s: %.0f vs %.0f bytes", name, bytes, repl * D);
  }
  cr_assert_eq(coll_ops_on(ts, 0, "grad tp all-reduce block.0.norm", "tp", &bytes), 0);
  cr_assert_eq(ps->exec[layer_index(m, "block.0.attention")].bwd_post.kind, TS_COLL_REDUCESCATTER);
  /* Under sp the up projections gather the latents and the rotary key (not the input), their
   * gradients are reduce-scattered, the latents gathered again for the weight gradients, and
   * the down projections run on each member's sequence shard: all the work / tp. */
  int Ms = (int)ps->n_micro;
  n = coll_ops_on(ts, 0, "block.0.attention fwd all-gather", "tp", &bytes);
  cr_assert(n == Ms && bytes == Ms * each, "sp fwd all-gather: %d ops, %.0f bytes", n, bytes);
  n = coll_ops_on(ts, 0, "block.0.attention bwd reduce-scatter", "tp", &bytes);
  cr_assert(n == Ms && bytes == Ms * each, "sp bwd reduce-scatter: %d ops, %.0f bytes", n, bytes);
  n = coll_ops_on(ts, 0, "block.0.attention bwd input re-gather", "tp", &bytes);
  cr_assert(n == Ms && bytes == Ms * T * (rq + rkv) * D, "sp re-gather: %d ops, %.0f bytes", n,
            bytes);
  cr_assert_eq(ps->exec[layer_index(m, "block.0.attention")].cdiv, 8.0);
  /* Without tp nothing is partial: no tp reduction at all. */
  g_autoptr(ts_plan) p1 = make_plan(m, t, "pp=16,dp=16,ep=16", 256, 1);
  cr_assert_eq(p1->exec[layer_index(m, "block.0.attention")].tp_grad_params, 0.0);
}

Test(experts, router_gradient_summed_over_every_dp_rank)
{
  /* The gate is a replicated layer of its own (hidden -> experts), reading the normed stream
   * the experts read: every ep rank holds it whole and its gradient is summed over all dp
   * ranks (the ep+dp group), not over the dp / ep replicas of the experts (dp), where it went
   * when folded into fc1. Mixtral 8x7B, dp = 32, ep = 8: per chip h E = 4096 x 8 gate
   * parameters; the dense buckets carry every non-expert parameter, the expert ones the
   * experts / ep, and nothing else. */
  g_autoptr(ts_model) m = load_model("mixtral-8x7b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=32,ep=8", 64, 1);
  int r = layer_index(m, "block.0.router"), f = layer_index(m, "block.0.fc1");
  int nrm = layer_index(m, "block.0.norm2");
  cr_assert(r >= 0 && f == r + 1, "router %d, fc1 %d", r, f);
  cr_assert_eq(m->layers[r].experts, 0);
  cr_assert_eq(m->layers[r].src, nrm, "the router reads %d", m->layers[r].src);
  cr_assert_eq(m->layers[f].src, nrm, "fc1 reads %d", m->layers[f].src);
  cr_assert_eq(m->layers[r].params, 4096.0 * 8);
  cr_assert_eq(ts_plan_layer_params(p, r), 4096.0 * 8);
  cr_assert_float_eq(m->layers[f].params, 8.0 * 4096 * 2 * 14336, 1.0);
  double dense = 0, expert = 0, D = m->dtype_bytes;
  for (int i = 0; i < m->nlayers; i++)
    *(m->layers[i].experts > 0 ? &expert : &dense) += m->layers[i].params;
  g_autoptr(ts_trace) tr = trace_of(p);
  double be;
  double sum[2] = {0, 0};
  for (int i = 0; i < tr->programs[0].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
    if (o->kind != TS_OP_COLL || o->cat != TS_CAT_COMM_DP)
      continue;
    const char *g = ((ts_group *)g_ptr_array_index(tr->groups, o->group))->name;
    cr_assert(strcmp(g, "dp") == 0 || strcmp(g, "ep+dp") == 0, "gradient over %s", g);
    sum[strcmp(g, "dp") == 0] += o->bytes;
  }
  be = sum[1];
  cr_assert_float_eq(sum[0], dense * D, dense * D * 1e-12, "all-dp buckets %.0f vs %.0f", sum[0],
                     dense * D);
  cr_assert_float_eq(be, expert / 8 * D, expert * D * 1e-12, "expert buckets %.0f vs %.0f", be,
                     expert / 8 * D);
}

Test(experts, mixtral_all_to_all_under_ep)
{
  /* Mixtral 8x7B on 32 H100s, dp = 32, ep = 8: each rank holds one expert of each layer. Every
   * MoE layer (all 32) dispatches top_k = 2 copies of its T = 4096 tokens and combines them,
   * forward and backward: 4 all-to-alls of k T h D = 2 x 4096 x 4096 x 2 bytes per layer per
   * micro-batch, on the ep group. A capacity factor C multiplies them by C. */
  g_autoptr(ts_model) m = load_model("mixtral-8x7b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=32,ep=8", 64, 1);
  g_autoptr(ts_trace) tr = trace_of(p);
  double bytes;
  int n = count_ops(tr, 0, "all-to-all", &bytes);
  int M = (int)p->n_micro;
  double each = 2.0 * 4096 * 4096 * 2;
  cr_assert_eq(M, 2);
  cr_assert_eq(n, 4 * 32 * M, "%d all-to-alls", n);
  cr_assert_eq(bytes, n * each, "%.0f bytes vs %.0f", bytes, n * each);
  /* Experts per chip: 8 / 8 = 1 of each layer; the rest whole. */
  double dense = 0, expert = 0;
  for (int i = 0; i < m->nlayers; i++)
    *(m->layers[i].experts > 0 ? &expert : &dense) += m->layers[i].params;
  double psi = p->params_per_chip, want = dense + expert / 8;
  cr_assert_float_eq(psi, want, want * 1e-12);
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].experts > 0)
      m->layers[i].capacity_factor = 1.25;
  g_autoptr(ts_plan) pc = make_plan(m, t, "dp=32,ep=8", 64, 1);
  g_autoptr(ts_trace) tc = trace_of(pc);
  double bc;
  int nc = count_ops(tc, 0, "all-to-all", &bc);
  cr_assert_eq(nc, n);
  cr_assert_float_eq(bc, 1.25 * bytes, bytes * 1e-12, "capacity 1.25: %.0f vs %.0f", bc,
                     1.25 * bytes);
}

Test(experts, expert_tp_collectives_carry_the_routed_copies)
{
  /* Mixtral 8x7B, tp = 2 inside the experts (fc1 column, fc2 row): an expert layer runs on the
   * top_k = 2 routed copies of every token, so its tp all-reduces (fc2's output forward, fc1's
   * input gradient backward) carry 2 x what a dense layer's do, e.g. the attention output's
   * all-reduce of the same T x h; a capacity factor 1.25 makes it 2.5 x (capacity slots).
   * `trainsim validate -m validate-moe -s tp=2,...` found the 1 x the trace had (it executes the
   * experts on their slots and compares every chip's bytes with the trace's). */
  g_autoptr(ts_model) m = load_model("mixtral-8x7b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  for (int c = 0; c < 2; c++) {
    double cf = c == 0 ? 0.0 : 1.25, k = c == 0 ? 2.0 : 2.5;
    for (int i = 0; i < m->nlayers; i++)
      if (m->layers[i].experts > 0)
        m->layers[i].capacity_factor = cf;
    g_autoptr(ts_plan) p = make_plan(m, t, "tp=2,dp=16,ep=8", 64, 1);
    g_autoptr(ts_trace) tr = trace_of(p);
    double attn, fc2, fc1;
    int na = count_ops(tr, 0, "block.0.attention fwd all-reduce", &attn);
    int n2 = count_ops(tr, 0, "block.0.fc2 fwd all-reduce", &fc2);
    int n1 = count_ops(tr, 0, "block.0.fc1 bwd all-reduce", &fc1);
    cr_assert(na > 0 && na == n2 && na == n1, "%d %d %d ops", na, n2, n1);
    cr_assert_float_eq(fc2, k * attn, attn * 1e-12, "capacity %g: fc2 %.0f vs %g x %.0f", cf, fc2,
                       k, attn);
    cr_assert_float_eq(fc1, k * attn, attn * 1e-12, "capacity %g: fc1 bwd %.0f vs %g x %.0f", cf,
                       fc1, k, attn);
  }
}

Test(experts, shared_experts_stay_outside_the_all_to_all)
{
  /* DeepSeek-V3: the shared expert runs on every rank's own tokens; only the routed experts
   * are dispatched: one dispatch and one combine per MoE layer each way (58 MoE layers, the
   * first three dense), top_k = 8 copies of T = 4096 tokens of h = 7168. */
  g_autoptr(ts_model) m = load_model("deepseek-v3");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-32node");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=256,ep=64,zero=1", 256, 1);
  int sh = layer_index(m, "block.5.shared_fc1");
  cr_assert_eq(p->exec[sh].ediv, 1.0);
  g_autoptr(ts_trace) tr = trace_of(p);
  double bytes;
  int n = count_ops(tr, 0, "all-to-all", &bytes);
  double each = 8.0 * 4096 * 7168 * 2;
  cr_assert_eq(n, 4 * 58, "%d all-to-alls", n);
  cr_assert_float_eq(bytes, n * each, n * each * 1e-12);
}

Test(experts, ep_placed_on_named_dimensions)
{
  /* ep=N@DIMS puts the expert-parallel ranks on those of dp's dimensions: the all-to-alls run
   * there, and the expert replicas (gradient synchronisation) on the rest of dp. Mixtral on 4
   * DGX nodes, dp = 32 on node:8 + net:4: ep=4 takes node:4 (the inner end), ep=4@net the 4
   * nodes, ep=8@node+net node:8. The collapsed and full replays agree for each. */
  g_autoptr(ts_model) m = load_model("mixtral-8x7b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  int node = ts_topo_dim_index(t, "node"), net = ts_topo_dim_index(t, "net");
  static const struct {
    const char *split;
    int ndims, dim0, size0;
  } cases[] = {
      {"dp=32,ep=4", 1, 0, 4}, {"dp=32,ep=4@net", 1, 1, 4}, {"dp=32,ep=8@node+net", 1, 0, 8}};
  for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autoptr(ts_plan) p = make_plan(m, t, cases[c].split, 32, 1);
    int want_dim = cases[c].dim0 == 0 ? node : net;
    cr_assert_eq(p->ep_shape.npieces, cases[c].ndims, "%s", cases[c].split);
    cr_assert_eq(p->ep_shape.p[0].dim, want_dim, "%s: ep on dim %d", cases[c].split,
                 p->ep_shape.p[0].dim);
    cr_assert_eq(p->ep_shape.p[0].size, cases[c].size0, "%s", cases[c].split);
    int edp = 1;
    for (int k = 0; k < p->edp_shape.npieces; k++)
      edp *= p->edp_shape.p[k].size;
    cr_assert_eq(edp * p->ep, 32);
    g_autoptr(ts_trace) tr = trace_of(p);
    int seen = 0;
    for (int i = 0; i < tr->programs[0].nops; i++) {
      const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
      if (o->kind != TS_OP_COLL || o->coll != TS_COLL_ALLTOALL)
        continue;
      const ts_group *g = g_ptr_array_index(tr->groups, o->group);
      cr_assert_eq(g->shape.p[0].dim, want_dim, "%s: all-to-all on dim %d", cases[c].split,
                   g->shape.p[0].dim);
      seen++;
    }
    cr_assert(seen > 0);
    GError *err = NULL;
    ts_replay_result a, b;
    ts_run_options rc = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
    ts_run_options rf = {.backend = "analytic", .sg_cfg = NULL, .full = TRUE};
    cr_assert(ts_run_replay(tr, t, &rc, &a, &err), "%s", err ? err->message : "");
    cr_assert(ts_run_replay(tr, t, &rf, &b, &err), "%s", err ? err->message : "");
    cr_assert_eq(a.step_time_s, b.step_time_s, "%s: collapsed %.17g != full %.17g", cases[c].split,
                 a.step_time_s, b.step_time_s);
  }
  /* ep on a dimension dp is not placed on, or more ranks than dp has there: one line. */
  static const char *const bad[] = {"dp=32,ep=8@net", "dp=32,ep=8@foo"};
  for (size_t k = 0; k < G_N_ELEMENTS(bad); k++) {
    g_autoptr(ts_split) s = ts_split_parse(bad[k], NULL);
    ts_plan_options po;
    ts_plan_options_default(&po);
    po.global_batch = 32;
    GError *err = NULL;
    ts_plan *p = ts_plan_new(m, t, s, &po, &err);
    cr_assert_null(p, "%s accepted", bad[k]);
    cr_assert_not_null(strstr(err->message, "ep=8@"), "%s", err->message);
    cr_assert_null(strchr(err->message, '\n'));
    g_error_free(err);
  }
}

/* ---- memory as PyTorch allocates it (TorchTitan: FSDP2, per-op checkpointing, eager loss) -- */

/* Llama 3.1 8B: sequence T, hidden 4096, 32 heads, 8 key/value heads (K, V 1024 wide), SwiGLU
 * 14336, vocabulary 128256 (a multiple of 128: no padding at tp = 1), bf16. */
#define L8_T 8192.0
#define L8_V 128256.0

/* Bytes kept per micro-batch by the layers of block b. */
static double block_kept(const ts_plan *p, int b)
{
  double s = 0;
  for (int i = 0; i < p->model->nlayers; i++)
    if (p->model->layers[i].block == b)
      s += p->layer_act_bytes[i];
  return s;
}

Test(pytorch_memory, op_checkpoint_keeps_every_other_product)
{
  /* TorchTitan's per-op policy, eager (kernels=eager): the block's input, then the matrix
   * products counted from the block's start, odd ones saved: Q (1), V (3), gate (5), down (7);
   * not K (2), output (4), up (6); the fused attention's output and its fp32 log-sum-exp per
   * head; norms recomputed. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=32,recompute=op,kernels=eager", 32, 1);
  double want = L8_T * (2.0 * (4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 32 * 4.0);
  for (int b = 0; b < 32; b += 31)
    cr_assert_float_eq(block_kept(p, b), want, 1e-6 * want, "block %d: %g, expected %g", b,
                       block_kept(p, b), want);
  /* Compiled blocks (kernels=fused, the default) save only what the backward reads: not the
   * down projection's output (4096), which feeds only the residual add. */
  g_autoptr(ts_plan) c = make_plan(m, t, "dp=32,recompute=op", 32, 1);
  double wantc = want - L8_T * 2.0 * 4096;
  cr_assert_float_eq(block_kept(c, 5), wantc, 1e-6 * wantc, "compiled: %g, expected %g",
                     block_kept(c, 5), wantc);
  /* tp = 2 with sequence parallelism: the input sequence-sharded (1/2), column products 1/2,
   * the down projection's whole partial sums (4096), and the reduce-scatter outputs after the
   * output and down projections (4096 / 2 each), saved as TorchTitan's list names them;
   * compiled, neither the down projection's partial sums nor their reduce-scatter. */
  g_autoptr(ts_plan) q = make_plan(m, t, "tp=2@node,dp=16,sp,recompute=op,kernels=eager", 16, 1);
  double want2 = L8_T * (2.0 * (2048 + 2048 + 512 + 2048 + 2048 + 7168 + 4096 + 2048) + 16 * 4.0);
  cr_assert_float_eq(block_kept(q, 3), want2, 1e-6 * want2, "tp=2: %g, expected %g",
                     block_kept(q, 3), want2);
  g_autoptr(ts_plan) qc = make_plan(m, t, "tp=2@node,dp=16,sp,recompute=op", 16, 1);
  double want2c = want2 - L8_T * 2.0 * (4096 + 2048);
  cr_assert_float_eq(block_kept(qc, 3), want2c, 1e-6 * want2c, "tp=2 compiled: %g, expected %g",
                     block_kept(qc, 3), want2c);
  /* Fewer bytes than Megatron's selective (which keeps every product's input with flash). */
  g_autoptr(ts_plan) s = make_plan(m, t, "dp=32,recompute=selective", 32, 1);
  cr_assert_lt(block_kept(p, 0), 0.6 * block_kept(s, 0));
}

Test(pytorch_memory, dots_checkpoint_keeps_products_the_backward_reads)
{
  /* MaxText's remat_policy=minimal (checkpoint_dots_with_no_batch_dims): the block's input, Q,
   * K, V, the output projection's output and the MLP's first product; not the MLP's last
   * product, nothing element-wise, not the attention kernel's output. The MaxText 32B (E 10240,
   * 32 heads of 256, ReLU MLP 32768) at tp = 4 with sp, as the v5p 32B run: everything 1/4. */
  g_autoptr(ts_model) m = load_model("maxtext-32b");
  g_autoptr(ts_topo) t = load_topo("tpu-v5p-4x4x4");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=4,dp=16,zero=3,sp,recompute=dots", 32, 1);
  double want = 2048.0 * 2.0 * (2.0 * 10240 + 3.0 * 8192 + 32768) / 4.0;
  for (int b = 0; b < 32; b += 31)
    cr_assert_float_eq(block_kept(p, b), want, 1e-12 * want, "block %d: %.17g, expected %.17g", b,
                       block_kept(p, b), want);
  /* Megatron-style selective keeps (4E + 4 a d_h + 2F) with flash attention (its log-sum-exp
   * too): 1.79x. The attention kernel's forward is re-run as selective re-runs it. */
  g_autoptr(ts_plan) s = make_plan(m, t, "tp=4,dp=16,zero=3,sp,recompute=selective", 32, 1);
  cr_assert_gt(block_kept(s, 0), 1.78 * block_kept(p, 0));
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].kind == TS_LAYER_ATTENTION) {
      cr_assert_gt(p->exec[i].recompute_flops, 0.0);
      cr_assert_float_eq(p->exec[i].recompute_flops, s->exec[i].recompute_flops,
                         1e-12 * s->exec[i].recompute_flops);
    }
}

Test(pytorch_memory, dots_except_mlpwi_reruns_the_mlp_input_products)
{
  /* MaxText's remat_policy=save_dot_except_mlpwi (decoders.py: minimal's names without mlpwi_0,
   * mlpwi_1): as dots, but the gated MLP's first products are not kept and run again before the
   * block's backward. Llama 2 70B at dp = 512 (the v5p recipe), per sample and block: dots keeps
   * the block input, Q, K, V, the output projection's and the gate/up products,
   * s·2·(h + (h + 2·1024) + h + 2·f); except-mlpwi drops the 2·f, and re-runs 2·s·h·2f FLOPs
   * more (the activation's 5 FLOPs per output as dots). */
  g_autoptr(ts_model) m = load_model("llama2-70b");
  g_autoptr(ts_topo) t = load_topo("tpu-v5p-4x4x4");
  g_autoptr(ts_plan) d = make_plan(m, t, "dp=64,zero=3,recompute=dots", 64, 1);
  g_autoptr(ts_plan) x = make_plan(m, t, "dp=64,zero=3,recompute=dots:except-mlpwi", 64, 1);
  double S = 4096, h = 8192, f = 28672;
  double want_d = S * 2.0 * (h + (h + 2.0 * 1024) + h + 2.0 * f);
  double want_x = S * 2.0 * (h + (h + 2.0 * 1024) + h);
  cr_assert_float_eq(block_kept(d, 0), want_d, 1e-12 * want_d, "dots %.17g", block_kept(d, 0));
  cr_assert_float_eq(block_kept(x, 0), want_x, 1e-12 * want_x, "except-mlpwi %.17g",
                     block_kept(x, 0));
  double fd = 0, fx = 0;
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].block == 0)
      fd += d->exec[i].op_rc_flops, fx += x->exec[i].op_rc_flops;
  double more = 2.0 * S * h * 2.0 * f;
  cr_assert_float_eq(fx - fd, more, 1e-12 * more, "re-run %.17g more, expected %.17g", fx - fd,
                     more);
  /* The split prints as written; a bad variant names the accepted forms. */
  cr_expect(strstr(x->split_text, "recompute=dots:except-mlpwi") != NULL, "%s", x->split_text);
  GError *e = NULL;
  g_autoptr(ts_split) bad = ts_split_parse("dp=8,recompute=dots:except-mlp", &e);
  cr_assert_null(bad);
  cr_expect(strstr(e->message, "dots:except-mlpwi") != NULL, "%s", e->message);
  g_clear_error(&e);
}

/* recompute=op's re-run work in block b (per sample per chip), FLOPs and bytes, and the same
 * for the block's norms alone. */
static void block_op_rc(const ts_plan *p, int b, double *flops, double *mem, double *nflops,
                        double *nmem)
{
  *flops = *mem = *nflops = *nmem = 0;
  for (int i = 0; i < p->model->nlayers; i++) {
    const ts_layer *l = &p->model->layers[i];
    if (l->block != b)
      continue;
    *flops += p->exec[i].op_rc_flops;
    *mem += p->exec[i].op_rc_mem;
    if (l->kind == TS_LAYER_NORM) {
      *nflops += l->fwd_flops / p->exec[i].cdiv;
      *nmem += (l->fwd_mem_bytes - ts_layer_weight_bytes(p->model, l)) / p->exec[i].cdiv;
    }
  }
}

Test(pytorch_memory, op_checkpoint_recomputes_unsaved_products)
{
  /* What TorchTitan's per-op policy did not save is re-run before the block's backward: the
   * even products K (4096 -> 1024), the output projection (4096 -> 4096) and up (4096 -> 14336),
   * 2 T k n FLOPs and T (k + n) x 2 bytes each; rotary on Q and K (3 FLOPs, 2 x 2 bytes per
   * element of 4096 + 1024); silu(gate) * up (5 FLOPs and 3 x 2 bytes per element of 14336);
   * both RMS norms' forward. Per sample, Llama 3.1 8B, bf16. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=32,recompute=op", 64, 2);
  double f, b, nf, nb;
  block_op_rc(p, 5, &f, &b, &nf, &nb);
  cr_assert_gt(nf, 0.0);
  double wf = L8_T * (2.0 * 4096 * (1024 + 4096 + 14336) + 3.0 * 5120 + 5.0 * 14336) + nf;
  double wb =
      L8_T * 2.0 * ((4096 + 1024) + (4096 + 4096) + (4096 + 14336) + 2.0 * 5120 + 3.0 * 14336) + nb;
  cr_assert_float_eq(f, wf, 1e-9 * wf, "FLOPs %.6g, expected %.6g", f, wf);
  cr_assert_float_eq(b, wb, 1e-9 * wb, "bytes %.6g, expected %.6g", b, wb);
  /* tp = 2 with sequence parallelism: column products n / 2, the output projection's input
   * I / 2 (row split), element-wise work on half the heads and features, norms on half the
   * tokens. */
  g_autoptr(ts_plan) q = make_plan(m, t, "tp=2@node,dp=16,sp,recompute=op", 32, 2);
  block_op_rc(q, 5, &f, &b, &nf, &nb);
  double wf2 =
      L8_T * (2.0 * (4096 * 512 + 2048 * 4096 + 4096 * 7168) + 3.0 * 2560 + 5.0 * 7168) + nf;
  cr_assert_float_eq(f, wf2, 1e-9 * wf2, "tp=2 FLOPs %.6g, expected %.6g", f, wf2);
  /* The trace carries it: one op per layer and micro-batch (one of 2 samples here) before the
   * layer's backward (the down projection re-runs nothing), summing to 32 blocks x 2 samples. */
  g_autoptr(ts_trace) tr = trace_of(p);
  double tf = 0;
  int nops = 0;
  for (int i = 0; i < tr->programs[0].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
    if (o->t_role == TS_ROLE_OP_RECOMPUTE)
      tf += o->flops, nops++;
  }
  block_op_rc(p, 5, &f, &b, &nf, &nb);
  cr_assert_float_eq(tf, 32 * 2 * f, 1e-9 * tf, "trace %.6g, expected %.6g", tf, 32 * 2 * f);
  cr_assert_eq(nops, 32 * 4, "%d ops: norm, attention, norm, gate/up per block", nops);
  /* Its time: between no recomputation and recomputing every block's whole forward. */
  ts_replay_result rn, ro, rf;
  g_autoptr(ts_plan) pn = make_plan(m, t, "dp=32", 64, 2);
  g_autoptr(ts_plan) pf = make_plan(m, t, "dp=32,recompute=full", 64, 2);
  replay_plan(pn, &rn);
  replay_plan(p, &ro);
  replay_plan(pf, &rf);
  cr_assert_gt(ro.step_time_s, rn.step_time_s * 1.01, "op %g vs none %g", ro.step_time_s,
               rn.step_time_s);
  cr_assert_lt(ro.step_time_s, rf.step_time_s, "op %g vs full %g", ro.step_time_s, rf.step_time_s);
}

Test(pytorch_memory, eager_loss_keeps_fp32_logit_copies)
{
  /* cross_entropy(logits.float()) uncompiled: in its backward the saved log-probabilities (the
   * copy the logits layer keeps), the NLL gradient and the log-softmax gradient: 2 copies more
   * than the layer keeps, micro-batch x T x V x 4 bytes each. Under loss parallelism (tp = 8,
   * the vocabulary padded to a multiple of 128 x 8 = 129024) DTensor's fused backward holds 4:
   * 3 more, of V / tp each. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=32,loss=eager", 64, 2);
  double want = 2.0 * 4.0 * 2 * L8_T * L8_V;
  cr_assert_float_eq(p->mem.loss_temp, want, 1e-6 * want, "%g, expected %g", p->mem.loss_temp,
                     want);
  cr_assert_geq(p->mem.temp, p->mem.loss_temp, "the loss's backward is a peak");
  g_autoptr(ts_plan) f = make_plan(m, t, "dp=32", 64, 2);
  cr_assert_eq(f->mem.loss_temp, 0.0, "the fused loss keeps one copy only");
  g_autoptr(ts_plan) q = make_plan(m, t, "tp=8@node,dp=4,sp,loss=eager", 8, 2);
  double want8 = 3.0 * 4.0 * 2 * L8_T * 129024.0 / 8;
  cr_assert_float_eq(q->mem.loss_temp, want8, 1e-6 * want8, "%g, expected %g", q->mem.loss_temp,
                     want8);
}

Test(pytorch_memory, fsdp2_states_gathers_and_step)
{
  /* FSDP2 with bf16 compute and fp32 reduction: fp32 parameter, gradient and two Adam moments
   * per sharded parameter (16 / N bytes); gathered in bf16: the root module (embedding, final
   * norm, logits: 2 x 525,336,576 + 4,096) for the whole pass, and two blocks (the running and
   * the prefetched: 218,112,000 each); the foreach AdamW step's fp32 temporary, 4 / N bytes. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=32,zero=3,fsdp2", 32, 1);
  double psi = 8030261248.0, N = 32, root = 2 * 525336576.0 + 4096, block = 218112000.0;
  cr_assert_float_eq(p->mem.params, 4 * psi / N, 1.0);
  cr_assert_float_eq(p->mem.grads, 4 * psi / N, 1.0);
  cr_assert_float_eq(p->mem.optimizer, 8 * psi / N, 1.0);
  cr_assert_float_eq(p->mem.gathered, 2 * root + 2 * 2 * block, 1.0, "%g", p->mem.gathered);
  cr_assert_float_eq(p->mem.step_temp, 4 * psi / N, 1.0);
  /* With pp nothing is resharded after forward: every parameter of the device gathered, and
   * the micro-batches' gradients accumulated unsharded in fp32 from the first backward on.
   * Device 0 peaks before it (4 micro-batches of 8 blocks in flight: one micro-batch's
   * activations, freed by that backward, outweigh the 4 d bytes of accumulators it makes);
   * the others after it, with the accumulators. */
  g_autoptr(ts_plan) q = make_plan(m, t, "dp=8,pp=4,zero=3,fsdp2", 64, 2);
  for (int s = 0; s < 4; s++) {
    double d = ts_plan_device_params(q, s);
    cr_assert_float_eq(q->stage_mem[s].gathered, 2 * d, 1.0, "stage %d", s);
    double want = (s == 0 ? 0.0 : 4 * d) + 4 * d / 8;
    cr_assert_float_eq(q->stage_mem[s].grads, want, 1.0, "stage %d: %g, expected %g", s,
                       q->stage_mem[s].grads, want);
  }
  /* fsdp2 is ZeRO-3's allocation: refused without it. */
  g_autoptr(GError) err = plan_refusal(m, t, "dp=32,zero=1,fsdp2", 32, 0);
  cr_assert(strstr(err->message, "fsdp2") && strstr(err->message, "zero=3"), "%s", err->message);
}

Test(pytorch_memory, allocator_overhead_on_what_churns)
{
  /* The caching allocator's overhead is [chip] allocator_overhead (0.15 on a GPU) of the
   * allocations made and freed during the step (gathered parameters, activations, buffers,
   * and FSDP2's sharded gradients, set to None by every step's zero_grad and re-made by the
   * reduce-scatters amid the backward), not of the parameters and the optimizer's states,
   * allocated once: total = states + 1.15 x the rest + 0.15 x the gradients. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=32,zero=3,fsdp2,recompute=op,loss=eager", 64, 2);
  const ts_memory *x = &p->mem;
  double states = x->params + x->grads + x->optimizer;
  double churn = x->gathered + x->activations + x->temp;
  cr_assert_float_eq(x->grads, 4 * 8030261248.0 / 32, 1.0);
  cr_assert_float_eq(x->allocator, 0.15 * (churn + x->grads), 1e-6 * churn);
  cr_assert_float_eq(x->total, states + 1.15 * churn + 0.15 * x->grads, 1e-6 * x->total);
  /* A topology built in code has none. */
  g_autoptr(ts_topo) u = ts_topo_copy(t);
  u->chip.allocator_overhead = 0;
  g_autoptr(ts_plan) r = make_plan(m, u, "dp=32,zero=3,fsdp2,recompute=op,loss=eager", 64, 2);
  cr_assert_eq(r->mem.allocator, 0.0);
  cr_assert_float_eq(r->mem.total, states + churn, 1e-6 * x->total);
}

Test(pytorch_memory, allocator_overhead_on_pipeline_gradient_accumulators)
{
  /* fsdp2 with pp: each step allocates the unsharded fp32 gradient accumulators at the first
   * micro-batch's backward (FSDPParam.to_accumulated_grad_if_needed) and frees them with the
   * last one's reduce-scatter, so they churn like the activations among which they are
   * allocated: allocator = 0.15 x (gathered + activations + temp + pipeline + 4 x the device's
   * parameters + the sharded fp32 gradients, re-made every step), which the sharded
   * parameters and optimizer states (allocated once) do not join. Llama 3 8B, pp = 4. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_plan) q = make_plan(m, t, "dp=8,pp=4,zero=3,fsdp2,recompute=full", 64, 2);
  for (int s = 0; s < 4; s++) {
    const ts_memory *x = &q->stage_mem[s];
    cr_assert(!x->step_peak);
    double acc = 4 * ts_plan_device_params(q, s), shard = acc / 8;
    double churn = x->gathered + x->activations + x->temp + x->pipeline + acc + shard;
    cr_expect_float_eq(x->allocator, 0.15 * churn, 1e-9 * churn, "stage %d: %.17g, expected %.17g",
                       s, x->allocator, 0.15 * churn);
  }
  /* Without pp there are no accumulators: of the states only the sharded gradients join. */
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=32,zero=3,fsdp2,recompute=full", 64, 2);
  const ts_memory *y = &p->mem;
  double churn = y->gathered + y->activations + y->temp + y->pipeline + y->grads;
  cr_expect_float_eq(y->allocator, 0.15 * churn, 1e-9 * churn);
}

Test(pytorch_memory, fsdp2_pipeline_block_backward_holds_its_bf16_gradients)
{
  /* fsdp2 with pp accumulates the micro-batches' gradients in fp32, but autograd still makes
   * each block's bf16 .grad in every backward before FSDP2's post-backward adds it into the
   * accumulator (FSDPParam.accumulate_unsharded_grad_if_needed): a block's backward holds its
   * bf16 gradients beside the recomputed block. The same split without fsdp2 (ZeRO-1, buckets
   * as views) walks the same activations and working set: temp differs by 2 bytes x one
   * block's parameters (Llama 3 8B: 218,112,000), on every stage. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_plan) f = make_plan(m, t, "dp=8,pp=4,zero=3,fsdp2,recompute=full", 64, 2);
  g_autoptr(ts_plan) z = make_plan(m, t, "dp=8,pp=4,zero=1,recompute=full", 64, 2);
  for (int s = 0; s < 4; s++) {
    double diff = f->stage_mem[s].temp - z->stage_mem[s].temp;
    cr_expect_float_eq(diff, 2 * 218112000.0, 1.0, "stage %d: %.17g", s, diff);
  }
}

Test(activations, model_command_lists_the_planners_fp8_saved_bytes)
{
  /* One formula: `trainsim model --precision fp8` lists each layer's kept activations as the
   * planner keeps them under Transformer Engine's FP8 (ts_layer_saved_bytes). GPT-3 1.3B at
   * tp = 1, per sample (s tokens, width h): fc1 keeps its input in FP8 (sh bytes) and the
   * GELU's input in bf16 (2 x 4sh): 9sh; fc2 its input (the GELU output) in FP8 (4sh) and
   * its output's dropout mask (sh): 5sh. Before, the listing showed only the bf16 bytes (fc1
   * 10sh, fc2 9sh). */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-64node");
  double s = (double)m->t_seq, h = (double)m->t_hidden;
  int fc1 = layer_index(m, "block.0.fc1"), fc2 = layer_index(m, "block.0.fc2");
  cr_assert_float_eq(ts_layer_saved_bytes(m, &m->layers[fc1], TRUE), 9 * s * h, 1e-6);
  cr_assert_float_eq(ts_layer_saved_bytes(m, &m->layers[fc2], TRUE), 5 * s * h, 1e-6);
  /* The planner's per-layer bytes are the same numbers (micro-batch 2, tp 1). */
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=512,precision=fp8", 1024, 2);
  for (int i = 0; i < m->nlayers; i++) {
    double want = 2 * ts_layer_saved_bytes(m, &m->layers[i], TRUE);
    cr_assert_float_eq(p->layer_act_bytes[i], want, want * 1e-12 + 1e-9, "layer %d", i);
  }
  /* The command's text shows them (4 significant digits). */
  char *out = NULL, *err = NULL;
  cr_assert_eq(run_cli("model -m gpt3-1.3b --precision fp8", &out, &err), 0, "%s", err);
  const char *sec = strstr(out, "\nprecision=fp8");
  cr_assert(sec != NULL, "%.300s", out);
  const char *want_names[] = {"block.0.fc1 ", "block.0.fc2 "};
  const double want_bytes[] = {9 * s * h, 5 * s * h};
  for (int k = 0; k < 2; k++) {
    const char *row = strstr(sec, want_names[k]);
    cr_assert(row != NULL, "no %s row in the precision section", want_names[k]);
    const char *cell = strstr(row, "saved_act_bytes ");
    const char *eol = strchr(row, '\n');
    cr_assert(cell != NULL && (eol == NULL || cell < eol), "%s: no saved_act_bytes: %.120s",
              want_names[k], row);
    double got = g_ascii_strtod(cell + strlen("saved_act_bytes "), NULL);
    cr_expect_float_eq(got, want_bytes[k], want_bytes[k] * 1e-3, "%s %.6g, expected %.6g",
                       want_names[k], got, want_bytes[k]);
  }
  g_free(out);
  g_free(err);
}

/* `trainsim model --precision fp32` (or tf32) on a 16-bit model lists the activations the
 * planner keeps in fp32 training: twice the fp16 table's, 4 bytes an element (ResNet-50's first
 * batch norm keeps its 64 x 112 x 112 input: 802,816 elements, 3.211e+06 bytes; 1.606e+06 in
 * fp16), while the table above stays the model's own. */
Test(activations, model_command_lists_fp32_training_bytes)
{
  char *out = NULL, *err = NULL;
  cr_assert_eq(run_cli("model -m resnet50 --precision fp32", &out, &err), 0, "%s", err);
  cr_assert(strstr(out, "under precision=fp32: 86.1 MiB (bf16 table above: 43.1 MiB)") != NULL,
            "%.2000s", out);
  const char *sec = strstr(out, "\nprecision=fp32");
  cr_assert(sec != NULL);
  const char *row = strstr(sec, " bn1 ");
  cr_assert(row != NULL);
  g_autofree char *line = g_strndup(row, strcspn(row, "\n"));
  cr_assert(strstr(line, "saved_act_bytes 3.211e+06") != NULL, "%s", line);
  g_free(out);
  g_free(err);
}

/* MaxText's published TPU runs (data/published/maxtext: launch scripts and recipes that ran) fit
 * in HBM as XLA allocates it (ts_plan.c, xla_backward_extra): the forward-backward peak on
 * top of the kept activations is the backward's live set at one point, the loss keeps its
 * logits in bf16, a recomputed block materialises its dot outputs only, ZeRO-3 gathers the
 * block running plus one layer, and the TPU runtime reserves 0.25 GiB. Before: v4 22B 39.6,
 * v5e 32B 15.1, v5p 64B 94.4, v6e Llama 2 70B 35.8 and Llama 3.1 8B 46.5 GiB, "not fitting".
 * A run that did not happen does not fit either: the v5p 64B at twice the batch per chip. */
Test(memory, maxtext_tpu_runs_fit_as_xla_allocates)
{
  static const struct {
    const char *model, *topo, *split;
    gint64 batch, micro;
    gboolean fits;
  } runs[] = {
      {"maxtext-22b", "tpu-v4-4x4x4", "dp=64,zero=3,recompute=full", 1024, 16, TRUE},
      {"maxtext-32b", "tpu-v5e-16x16", "dp=256,zero=3,recompute=full", 1024, 4, TRUE},
      {"maxtext-64b", "tpu-v5p-4x4x4", "tp=4,dp=16,zero=3,tp-overlap=xla,sp,recompute=dots", 256,
       16, TRUE},
      {"llama2-70b", "tpu-v6e-16x16", "dp=256,zero=3,recompute=full", 1024, 4, TRUE},
      {"llama3-8b", "tpu-v6e-16x16", "dp=256,zero=3,recompute=full", 1024, 4, TRUE},
      {"maxtext-64b", "tpu-v5p-4x4x4", "tp=4,dp=16,zero=3,tp-overlap=xla,sp,recompute=dots", 512,
       32, FALSE},
  };
  for (size_t r = 0; r < G_N_ELEMENTS(runs); r++) {
    g_autoptr(ts_model) m = load_model(runs[r].model);
    g_autoptr(ts_topo) t = load_topo(runs[r].topo);
    g_autoptr(ts_plan) p = make_plan(m, t, runs[r].split, runs[r].batch, runs[r].micro);
    const ts_memory *mem = &p->mem;
    cr_expect(mem->fits == runs[r].fits, "%s on %s: %.2f GiB + %.2f reserve of %.0f, fits %d",
              runs[r].model, runs[r].topo, mem->total / 1073741824.0, mem->reserve / 1073741824.0,
              mem->capacity / 1073741824.0, mem->fits);
    cr_expect_float_eq(mem->reserve, 0.25 * 1073741824.0, 1.0, "TPU reserve %g", mem->reserve);
    /* The working set is at least the last layer's (the logits') output and input gradients. */
    int last = m->nlayers - 1;
    double grads = (p->exec[last].in_bytes + p->exec[last].out_bytes) * (double)p->micro_batch;
    cr_expect(mem->temp >= grads, "%s: temp %g below the logits' gradients %g", runs[r].model,
              mem->temp, grads);
  }
}

/* Index of the first op of program 0 whose label contains needle (-1 if none). */
static int op_labelled(const ts_trace *tr, const char *needle)
{
  const ts_program *pr = &tr->programs[0];
  for (int i = 0; i < pr->nops; i++) {
    const ts_op o = ts_program_op(pr, i);
    if (strstr(g_ptr_array_index(tr->labels, o.label), needle) != NULL)
      return i;
  }
  return -1;
}

Test(tensor, pytorch_tp_backward_is_serial_megatron_overlaps_it)
{
  /* With fsdp2 (PyTorch's DTensor tensor parallelism) and no tp-overlap, a column-parallel
   * layer's backward under sp is the re-gather, then the input and weight gradients, then the
   * input gradient's reduce-scatter, on one stream; Megatron's (no fsdp2) runs the
   * reduce-scatter on a side stream beside the weight gradient and the re-gather beside the
   * input gradient. Llama 3 8B's fc1 at tp = 8. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  for (int fsdp2 = 0; fsdp2 <= 1; fsdp2++) {
    g_autoptr(ts_plan) p =
        make_plan(m, t, fsdp2 ? "tp=8,dp=4,sp,zero=3,fsdp2" : "tp=8,dp=4,sp,zero=3", 4, 1);
    g_autoptr(ts_trace) tr = trace_of(p);
    const ts_program *pr = &tr->programs[0];
    int rg = op_labelled(tr, "block.0.fc1 bwd input re-gather");
    int wg = op_labelled(tr, "block.0.fc1 bwd weight grad");
    int rs = op_labelled(tr, "block.0.fc1 bwd reduce-scatter");
    int dg = op_labelled(tr, "block.0.fc1 bwd input grad");
    cr_assert(rg >= 0 && wg >= 0 && rs >= 0 && dg >= 0, "fsdp2=%d: ops %d %d %d %d", fsdp2, rg, wg,
              rs, dg);
    int nd;
    const int *d = ts_program_deps(pr, dg, &nd);
    gboolean dg_waits = FALSE;
    for (int k = 0; k < nd; k++)
      dg_waits |= d[k] == rg;
    gboolean rs_beside = ts_program_op_stream(pr, rs) != ts_program_op_stream(pr, wg);
    if (fsdp2) {
      cr_assert(dg_waits, "fsdp2: the input gradient waits for the re-gather");
      cr_assert(!rs_beside && rs > wg, "fsdp2: the reduce-scatter follows the weight gradient");
    } else {
      cr_assert(!dg_waits, "megatron: the re-gather runs beside the input gradient");
      cr_assert(rs_beside && rs < wg, "megatron: the reduce-scatter runs beside the weight grad");
    }
  }
}

/* PyTorch's async TP (tp-overlap=async, fsdp2) fuses a reduce-scatter with the matmul that
 * produces its input (Inductor's micro-pipeline pass, _find_producer_matmul: mm, _scaled_mm, or
 * reshape-mm-reshape): an input gradient that autograd sums from several matmuls (attention's
 * separate Q, K and V projections; a gated MLP's gate and up) keeps the plain reduce-scatter,
 * after the weight gradient on the compute stream as without async TP; an ungated
 * column-parallel layer's (GPT-3's fc1) runs beside its weight gradient. */
Test(tensor, async_tp_keeps_summed_input_gradients_plain)
{
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  const struct {
    const char *model, *layer;
    gboolean plain;
  } cases[] = {
      {"llama3-8b", "block.0.attention", TRUE},
      {"llama3-8b", "block.0.fc1", TRUE},
      {"gpt3-1.3b", "block.0.attention", TRUE},
      {"gpt3-1.3b", "block.0.fc1", FALSE},
  };
  for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autoptr(ts_model) m = load_model(cases[k].model);
    g_autoptr(ts_plan) p = make_plan(m, t, "tp=8,dp=4,sp,zero=3,fsdp2,tp-overlap=async", 4, 1);
    g_autoptr(ts_trace) tr = trace_of(p);
    const ts_program *pr = &tr->programs[0];
    g_autofree char *w = g_strdup_printf("%s bwd weight grad", cases[k].layer);
    g_autofree char *r = g_strdup_printf("%s bwd reduce-scatter", cases[k].layer);
    int wg = op_labelled(tr, w), rs = op_labelled(tr, r);
    cr_assert(wg >= 0 && rs >= 0, "%s %s: ops %d %d", cases[k].model, cases[k].layer, wg, rs);
    gboolean beside = ts_program_op_stream(pr, rs) != ts_program_op_stream(pr, wg);
    if (cases[k].plain)
      cr_expect(!beside && rs > wg, "%s %s: the reduce-scatter follows the weight gradient",
                cases[k].model, cases[k].layer);
    else
      cr_expect(beside && rs < wg, "%s %s: the reduce-scatter runs beside the weight gradient",
                cases[k].model, cases[k].layer);
  }
}

/* Hybrid sharding over a data-centre-network dimension with transfer_stall_us (a TPU's DCN):
 * every gradient-shard all-reduce across the S replicas holds the compute stream for
 * 2 (S - 1) x the stall (ts_coll_chip_stall_s), where it is issued, so with the transfers
 * themselves hidden the step grows by (all-reduces) x 2 (S - 1) x stall, less at most one
 * stall at the end; without the key nothing is added. */
Test(zero, dcn_transfer_stall_holds_the_compute_stream)
{
  const double stall = 100e-6;
  g_autoptr(ts_model) m = equal_model(8, 1e10, 1e6, 1e6);
  int slices[] = {2, 8};
  for (size_t k = 0; k < G_N_ELEMENTS(slices); k++) {
    int S = slices[k];
    double step[2];
    int stalls[2], reduces[2];
    for (int with = 0; with < 2; with++) {
      g_autoptr(ts_topo) t = ring_topo(4, 1e12, 0);
      t->ndims = 2;
      t->dims[1] = (ts_dim){.name = g_strdup("dcn"),
                            .size = S,
                            .shape = TS_SHAPE_SWITCH,
                            .link_bw_Bps = 1e12,
                            .latency_s = 0,
                            .chips_per_port = 1,
                            .transfer_stall_s = with ? stall : 0.0};
      t->nchips = 4 * S;
      g_autofree char *split = g_strdup_printf("dp=%d,zero=3,shard=4", 4 * S);
      GError *err = NULL;
      g_autoptr(ts_split) s = ts_split_parse(split, &err);
      cr_assert_not_null(s, "%s", err ? err->message : "");
      ts_plan_options po;
      ts_plan_options_default(&po);
      po.global_batch = 4 * S;
      po.micro_batch = 1;
      g_autoptr(ts_plan) p = ts_plan_new(m, t, s, &po, &err);
      cr_assert_not_null(p, "%s", err ? err->message : "");
      g_autoptr(ts_trace) tr = trace_of(p);
      reduces[with] = count_ops(tr, 0, "across replicas", NULL);
      stalls[with] = count_ops(tr, 0, "over the data-centre network", NULL);
      ts_replay_result rr;
      replay_plan(p, &rr);
      step[with] = rr.step_time_s;
    }
    cr_assert_gt(reduces[0], 0, "%d slices: no all-reduce across the replicas", S);
    cr_assert_eq(stalls[0], 0, "%d slices: a stall without the key", S);
    cr_assert_eq(stalls[1], reduces[1], "%d slices: %d stalls for %d all-reduces", S, stalls[1],
                 reduces[1]);
    /* Every stall but the last lies between backward ops; the last may overlap the step's
     * final transfers (the reduce-scatter and all-reduce of the first layer), by less than
     * one stall. */
    double one = 2.0 * (S - 1) * stall, expect = reduces[1] * one, grew = step[1] - step[0];
    cr_assert(grew <= expect * (1 + 1e-9) && grew > expect - one,
              "%d slices: step %g -> %g s, expected + %g s (less at most %g)", S, step[0], step[1],
              expect, one);
  }
  /* ZeRO-3 over the slices without hybrid sharding: every parameter gather over the DCN stalls
   * too, (S - 1) transfers. */
  g_autoptr(ts_topo) t = ring_topo(4, 1e12, 0);
  t->ndims = 2;
  t->dims[1] = (ts_dim){.name = g_strdup("dcn"),
                        .size = 2,
                        .shape = TS_SHAPE_SWITCH,
                        .link_bw_Bps = 1e12,
                        .chips_per_port = 1,
                        .transfer_stall_s = stall};
  t->nchips = 8;
  GError *err = NULL;
  g_autoptr(ts_split) s = ts_split_parse("dp=8,zero=3", &err);
  cr_assert_not_null(s, "%s", err ? err->message : "");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 8;
  po.micro_batch = 1;
  g_autoptr(ts_plan) p = ts_plan_new(m, t, s, &po, &err);
  cr_assert_not_null(p, "%s", err ? err->message : "");
  g_autoptr(ts_trace) tr = trace_of(p);
  int gathers = count_ops(tr, 0, "param all-gather", NULL);
  int stalled = count_ops(tr, 0, "all-gather over the data-centre network", NULL);
  cr_assert(gathers > 0 && stalled == gathers, "%d gathers, %d stalls", gathers, stalled);
}

/* replica-reduce=end (PaLM's cross-pod gradient exchange, Chowdhery et al. 2022, section 4: it
 * "does not start until each core finishes computing the gradients"): one all-reduce across the
 * replicas, of this rank's whole shard (L x params x D / shard bytes), after the last
 * reduce-scatter, and the optimizer waits for it. With the slice's own links and the optimizer
 * free next to the DCN, the step is the one-slice step (dp = shard, same shard) plus that
 * all-reduce, 2 (S - 1) / S x shard bytes / bandwidth on a switch of S replicas (and the
 * collective's fixed cost); by default
 * (bucket by bucket beside the backward) it hides behind the backward and the step is shorter. */
Test(zero, replica_reduce_end_adds_the_whole_shard_exchange_after_the_backward)
{
  const int L = 8, shard = 4;
  const double params = 2e7, dcn_Bps = 1e9; /* 40 MB a layer: a bucket each */
  g_autoptr(ts_model) m = equal_model(L, 1e10, params, 1e6);
  g_autoptr(ts_topo) one = ring_topo(shard, 1e15, 0);
  g_autoptr(ts_plan) p1 = make_plan(m, one, "dp=4,zero=3", shard, 1);
  ts_replay_result r1;
  replay_plan(p1, &r1);
  const int slices[] = {2, 4};
  for (size_t k = 0; k < G_N_ELEMENTS(slices); k++) {
    int S = slices[k];
    g_autoptr(ts_topo) t = ring_topo(shard, 1e15, 0);
    t->ndims = 2;
    t->dims[1] = (ts_dim){.name = g_strdup("dcn"),
                          .size = S,
                          .shape = TS_SHAPE_SWITCH,
                          .link_bw_Bps = dcn_Bps,
                          .latency_s = 0,
                          .chips_per_port = 1};
    t->nchips = shard * S;
    double step[2];
    for (int end = 0; end <= 1; end++) {
      g_autofree char *split = g_strdup_printf("dp=%d,zero=3,shard=%d%s", shard * S, shard,
                                               end ? ",replica-reduce=end" : "");
      g_autoptr(ts_plan) p = make_plan(m, t, split, shard * S, 1);
      g_autoptr(ts_trace) tr = trace_of(p);
      double bytes = 0;
      int n = count_ops(tr, 0, "across replicas", &bytes);
      if (end) {
        cr_assert_eq(n, 1, "%d slices: %d all-reduces across the replicas, expected one", S, n);
        cr_assert_float_eq(bytes, L * params * m->dtype_bytes / shard, 1e-6, "%g bytes", bytes);
      } else {
        cr_assert_gt(n, 1, "%d slices: the default reduces bucket by bucket", S);
      }
      ts_replay_result rr;
      replay_plan(p, &rr);
      step[end] = rr.step_time_s;
    }
    double ar = 2.0 * (S - 1) / S * (L * params * m->dtype_bytes / shard) / dcn_Bps;
    /* 50 us: NCCL's fixed cost per collective on a switch dimension, against 40-60 ms. */
    cr_assert_float_eq(step[1], r1.step_time_s + ar, 50e-6,
                       "%d slices: step %.9f s, one slice %.9f s + all-reduce %.9f s", S, step[1],
                       r1.step_time_s, ar);
    cr_assert_lt(step[0], step[1], "%d slices: overlapped %g s, at the end %g s", S, step[0],
                 step[1]);
  }
  /* Without hybrid sharding there are no replicas: a no-op the split's note names. */
  GError *err = NULL;
  g_autoptr(ts_split) s = ts_split_parse("dp=4,zero=3,replica-reduce=end", &err);
  cr_assert_not_null(s, "%s", err ? err->message : "");
  g_autofree char *note = ts_split_noop_options(s, 4, 1);
  cr_assert(note != NULL && strstr(note, "replica-reduce=end") != NULL, "%s", note ? note : "");
  cr_assert_null(ts_split_parse("dp=4,zero=3,replica-reduce=later", &err));
  cr_assert(err != NULL && strstr(err->message, "replica-reduce=overlap") != NULL);
  g_clear_error(&err);
}

/* tp-grad=serial (Megatron-DeepSpeed's mpu: the input gradient's all-reduce is the backward of
 * copy_to_tensor_model_parallel_region, an autograd node after F.linear's, which computes the
 * input and the weight gradients): a column-parallel layer's backward all-reduce follows its
 * weight gradient on the compute stream; by default (Megatron-LM's async all-reduce) it runs
 * on a side stream beside it, so on the device the serial step is longer by what the weight
 * gradient hid. Under sp (the re-gathered input waited for before the weight gradient) the
 * plan replays. GPT-3 1.3B at tp = 8 on one DGX A100 node, launch floor off. */
Test(tensor, tp_grad_serial_puts_the_all_reduce_after_the_weight_gradient)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  t->chip.kernel_launch_s = 0.0;
  double step[2];
  for (int serial = 0; serial <= 1; serial++) {
    g_autoptr(ts_plan) p = make_plan(
        m, t, serial ? "tp=8,recompute=full,tp-grad=serial" : "tp=8,recompute=full", 4, 1);
    cr_assert_eq(strstr(p->split_text, "tp-grad=serial") != NULL, serial, "%s", p->split_text);
    g_autoptr(ts_trace) tr = trace_of(p);
    const ts_program *pr = &tr->programs[0];
    for (int l = 0; l < 2; l++) {
      const char *layer = l ? "block.0.attention" : "block.0.fc1";
      g_autofree char *wgl = g_strdup_printf("%s bwd weight grad", layer);
      g_autofree char *arl = g_strdup_printf("%s bwd all-reduce", layer);
      int wg = op_labelled(tr, wgl), ar = op_labelled(tr, arl);
      cr_assert(wg >= 0 && ar >= 0, "serial=%d %s: ops %d %d", serial, layer, wg, ar);
      gboolean beside = ts_program_op_stream(pr, ar) != ts_program_op_stream(pr, wg);
      if (serial)
        cr_assert(!beside && ar > wg, "serial %s: the all-reduce follows the weight grad", layer);
      else
        cr_assert(beside && ar < wg, "async %s: the all-reduce runs beside the weight grad", layer);
    }
    ts_replay_result rr;
    replay_plan(p, &rr);
    step[serial] = rr.step_time_s;
  }
  /* The backward all-reduces (8 MiB a micro-batch) are shorter than their weight gradients on
   * NVLink: async hides them whole, serial adds them (6.5% of this step on the device). */
  cr_assert_gt(step[1], step[0] * 1.02, "serial %g s, async %g s", step[1], step[0]);
  g_autoptr(ts_plan) q = make_plan(m, t, "tp=8,sp,recompute=full,tp-grad=serial", 4, 1);
  ts_replay_result rq;
  replay_plan(q, &rq);
  cr_assert_gt(rq.step_time_s, 0.0);
}

/* Megatron's FusedScaleMaskSoftmax falls back to PyTorch's eager softmax when micro-batch x
 * heads on the chip is not a multiple of 4 (or the key length is outside (16, 2048], or the
 * query length is not a multiple of 4; megatron/model/fused_softmax.py): the scores cast to
 * fp32, scaled, masked, softmax, cast back. vTrain's h 1,024 with 16 heads at tp = 8 is 2 heads
 * a GPU: micro-batch 1 falls back (4 more kernels in the forward and in the input gradient, 32
 * and 34 more bytes a score), micro-batch 2 and 4 do not. */
Test(tensor, unfused_softmax_falls_back_to_eager_when_batch_x_heads_is_not_a_multiple_of_4)
{
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  g_autofree char *path = g_build_filename(TS_SOURCE_DIR, "data", "published", "vtrain", "models",
                                           "gpt-h1024-a16-l20-s1024-v51200.ini", NULL);
  GError *e = NULL;
  g_autoptr(ts_model) m = ts_model_load(path, &e);
  cr_assert_not_null(m, "%s", e ? e->message : "");
  double k[3][2], sb[3][2];
  const int mbs[3] = {1, 2, 4};
  for (int c = 0; c < 3; c++) {
    g_autoptr(ts_plan) p = make_plan(m, t, "tp=8,recompute=full", 4 * mbs[c], mbs[c]);
    g_autoptr(ts_trace) tr = trace_of(p);
    const char *lab[2] = {"block.0.attention fwd", "block.0.attention bwd input grad"};
    for (int j = 0; j < 2; j++) {
      int i = op_labelled(tr, lab[j]);
      cr_assert(i >= 0, "%s", lab[j]);
      const ts_op op = ts_program_op(&tr->programs[0], i);
      k[c][j] = op.shape->kernels;
      sb[c][j] = op.shape->scores_bytes / mbs[c];
    }
  }
  /* Forward: 8 kernels fused (QKV, QK^T, softmax, dropout, context, copy, output, epilogue). */
  cr_assert_eq(k[1][0], 8, "micro-batch 2 forward: %g kernels", k[1][0]);
  cr_assert_eq(k[0][0], 12, "micro-batch 1 forward: %g kernels", k[0][0]);
  cr_assert_eq(k[0][1], k[1][1] + 4, "input gradient: %g and %g kernels", k[0][1], k[1][1]);
  cr_assert_eq(k[2][0], k[1][0]);
  /* Bytes a score (per sample: heads/tp x s x s scores): the fused 6D + 1 forward, 8D + 1
   * backward, plus 32 and 36 - D on the eager path (D = 2). */
  double scores = 16.0 / 8.0 * 1024.0 * 1024.0;
  cr_assert_float_eq(sb[1][0], scores * 13.0, 1e-9 * scores, "fused forward %g", sb[1][0]);
  cr_assert_float_eq(sb[0][0], scores * 45.0, 1e-9 * scores, "eager forward %g", sb[0][0]);
  cr_assert_float_eq(sb[0][1] - sb[1][1], scores * 34.0, 1e-9 * scores, "eager backward %g - %g",
                     sb[0][1], sb[1][1]);
  /* GPT-3 1.3B (16 heads, 2 a GPU at tp = 8) at s 2048, the fused kernel's largest key length:
   * eager at micro-batch 1 only. */
  g_autoptr(ts_model) g = load_model("gpt3-1.3b");
  for (int mb = 1; mb <= 4; mb *= 2) {
    g_autoptr(ts_plan) q = make_plan(g, t, "tp=8,attention=unfused", 4 * mb, mb);
    g_autoptr(ts_trace) tq = trace_of(q);
    int i = op_labelled(tq, "block.0.attention fwd");
    cr_assert(i >= 0);
    const ts_op op = ts_program_op(&tq->programs[0], i);
    int want = mb == 1 ? 12 : 8;
    cr_assert_eq(op.shape->kernels, want, "GPT-3 1.3B tp 8 mb %d: %d kernels", mb,
                 op.shape->kernels);
  }
}

/* Comm/compute contention ([chip] collective_sms; ts_plan_trace.c, contend): on an array of
 * several nodes every collective issued beside the compute stream is followed by a fixed charge
 * on the compute stream of its closed-form time x collective_sms / compute_units when it leaves
 * the node, 0 within it (NVLink); collectives on the compute stream (tensor parallelism's) get
 * none, nor does anything on one node. The A100 profile holds 16 of 108 SMs (NCCL issue 689: 16
 * SMs on a DGX with 8 NICs). */
static void contention_charges(const ts_plan *p, const ts_trace *tr, int *ncharged, int *nzero,
                               double *rank0_s)
{
  gboolean one_node = TRUE;
  for (int d = 1; d < p->topo->ndims; d++)
    one_node = one_node && p->topo->dims[d].size == 1;
  const ts_chip *c = &p->topo->chip;
  *ncharged = *nzero = 0;
  *rank0_s = 0;
  for (int q = 0; q < tr->nprograms; q++) {
    const ts_program *prog = &tr->programs[q];
    int side = 0, charges = 0;
    for (int i = 0; i < prog->nops; i++) {
      ts_op o = ts_program_op(prog, i);
      if (o.kind == TS_OP_COLL && o.stream != 0)
        side++;
      if (o.t_role != TS_ROLE_CONTENTION)
        continue;
      charges++;
      cr_assert_eq(o.kind, TS_OP_DELAY);
      cr_assert_eq(o.stream, 0, "a charge on stream %d, not the compute stream", o.stream);
      ts_op coll = ts_program_op(prog, i - 1);
      cr_assert_eq(coll.kind, TS_OP_COLL, "op %d: a charge not after its collective", i);
      cr_assert_neq(coll.stream, 0, "op %d: a charge after a compute-stream collective", i);
      const ts_group *g = g_ptr_array_index(tr->groups, coll.group);
      gboolean net = FALSE;
      for (int k = 0; k < g->shape.npieces; k++)
        net = net || (g->shape.p[k].dim > 0 && g->shape.p[k].size > 1);
      double want = 0;
      if (net) {
        g_autoptr(GError) err = NULL;
        want = ts_coll_time(p->topo, coll.coll, coll.algo, &g->shape, coll.bytes, NULL, &err) *
               c->collective_sms / c->compute_units;
        cr_assert_gt(want, 0, "%s", err ? err->message : "");
      }
      cr_assert_float_eq(o.seconds, want, 1e-12 * (want + 1e-9), "op %d: %g s, expected %g s", i,
                         o.seconds, want);
      *ncharged += want > 0;
      *nzero += want == 0;
      if (q == 0)
        *rank0_s += o.seconds;
    }
    cr_assert_eq(charges, one_node ? 0 : side, "program %d: %d charges for %d side collectives", q,
                 charges, side);
  }
}

Test(splits, overlapped_collectives_take_nccl_sms_from_compute)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  cr_assert_eq(t->chip.collective_sms, 16);
  cr_assert_eq(t->chip.compute_units, 108);
  /* FSDP over the 4 nodes: every gather and reduce-scatter leaves the node. */
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=32,zero=3", 32, 1);
  g_autoptr(ts_trace) tr = trace_of(p);
  int charged, zero;
  double total;
  contention_charges(p, tr, &charged, &zero, &total);
  cr_assert_gt(charged, 0);
  cr_assert_eq(zero, 0, "%d collectives of dp over the nodes charged nothing", zero);
  /* The step grows by no more than the charges and by something: without them (0 SMs) it is
   * the old step. */
  ts_replay_result with, without;
  replay_plan(p, &with);
  t->chip.collective_sms = 0;
  g_autoptr(ts_plan) p0 = make_plan(m, t, "dp=32,zero=3", 32, 1);
  replay_plan(p0, &without);
  cr_assert_gt(with.step_time_s, without.step_time_s);
  cr_assert_leq(with.step_time_s, without.step_time_s + total * (1 + 1e-9), "%g s, %g s + %g s",
                with.step_time_s, without.step_time_s, total);
  /* Tensor parallelism inside the node, data parallelism across: the tp collectives on the
   * compute stream have no charge, those beside a weight gradient 0 s (NVLink), the gradient
   * buckets over the network their share. */
  t->chip.collective_sms = 16;
  g_autoptr(ts_plan) q = make_plan(m, t, "tp=8@node,dp=4@net", 32, 1);
  g_autoptr(ts_trace) tq = trace_of(q);
  contention_charges(q, tq, &charged, &zero, &total);
  cr_assert_gt(charged, 0);
  cr_assert_gt(zero, 0);
  /* One node: no charges, the step is the uncharged one. */
  g_autoptr(ts_topo) one = load_topo("dgx-a100-1node");
  g_autoptr(ts_plan) r = make_plan(m, one, "dp=8,zero=3", 8, 1);
  g_autoptr(ts_trace) trr = trace_of(r);
  contention_charges(r, trr, &charged, &zero, &total);
  cr_assert_eq(charged + zero, 0);
  ts_replay_result a, b;
  replay_plan(r, &a);
  one->chip.collective_sms = 0;
  g_autoptr(ts_plan) r0 = make_plan(m, one, "dp=8,zero=3", 8, 1);
  replay_plan(r0, &b);
  cr_assert_float_eq(a.step_time_s, b.step_time_s, 1e-12 * b.step_time_s);
}

Test(pipeline, trace_over_memory_limit_is_refused_with_estimate)
{
  /* Closed form: twice the first program's bytes for every program (ts_plan_trace). */
  cr_assert_float_eq(ts_plan_trace_estimate_bytes(1000, 3), 6000.0, 1e-9);
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=8@x,pp=8@y", 16, 2);
  GError *err = NULL;
  g_setenv("TRAINSIM_MAX_MEMORY", "1GiB", TRUE);
  ts_trace *ok = ts_plan_trace(p, &err);
  cr_assert_not_null(ok, "%s", err != NULL ? err->message : "");
  double want = ts_plan_trace_estimate_bytes(ts_program_bytes(&ok->programs[0]), ok->nprograms);
  cr_assert_eq(ok->nprograms, 8);
  ts_trace_free(ok);
  /* Just under the estimate: refused, the message names the estimate and the variable. */
  char lim[32];
  g_snprintf(lim, sizeof lim, "%.0f", want - 1);
  g_setenv("TRAINSIM_MAX_MEMORY", lim, TRUE);
  ts_trace *no = ts_plan_trace(p, &err);
  g_unsetenv("TRAINSIM_MAX_MEMORY");
  cr_assert_null(no);
  cr_assert(err != NULL && err->code == TS_ERROR_INVALID);
  char nb[32];
  cr_expect(strstr(err->message, ts_fmt_bytes(nb, sizeof nb, want)) != NULL &&
                strstr(err->message, "TRAINSIM_MAX_MEMORY") != NULL,
            "%s", err->message);
  g_error_free(err);
}
