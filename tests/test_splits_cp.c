/* Tests of issue 13's splits: context parallelism (ring attention), hybrid sharding, and the
 * tensor- and data-parallel overlaps: closed forms of their collectives (bytes, counts) and
 * memory, the ring's wrap-around, their errors, and that the overlaps change only the schedule. */
#include "ts_coll.h"
#include "ts_cost.h"
#include "ts_plan.h"
#include "ts_plan_priv.h"
#include "ts_replay.h"
#include "ts_run.h"
#include "ts_trace.h"
#include "ts_util.h"

#include "ts_test.h"
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static ts_plan *plan_or_error(const ts_model *m, const ts_topo *t, const char *split, gint64 batch,
                              gint64 micro, GError **err)
{
  g_autoptr(ts_split) s = ts_split_parse(split, err);
  if (s == NULL)
    return NULL;
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  po.micro_batch = micro;
  return ts_plan_new(m, t, s, &po, err);
}

static double step_time(const ts_plan *p)
{
  g_autoptr(ts_trace) tr = trace_of(p);
  GError *err = NULL;
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  ts_replay_result rr;
  cr_assert(ts_run_replay(tr, p->topo, &ro, &rr, &err), "%s", err ? err->message : "");
  return rr.step_time_s;
}

/* Ops of program `prog` whose label contains `needle` (and of `kind`, unless -1); their bytes
 * summed into *bytes. */
static int count_ops(const ts_trace *tr, int prog, int kind, const char *needle, double *bytes)
{
  int n = 0;
  if (bytes != NULL)
    *bytes = 0;
  for (int i = 0; i < tr->programs[prog].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[prog], i), *o = &o_;
    if (strstr(g_ptr_array_index(tr->labels, o->label), needle) == NULL)
      continue;
    if (kind >= 0 && (int)o->kind != kind)
      continue;
    n++;
    if (bytes != NULL)
      *bytes += o->bytes;
  }
  return n;
}

static double program_flops(const ts_trace *tr, int prog)
{
  double f = 0;
  for (int i = 0; i < tr->programs[prog].nops; i++)
    if (ts_program_op(&tr->programs[prog], i).kind == TS_OP_COMPUTE)
      f += ts_program_op(&tr->programs[prog], i).flops;
  return f;
}

/* ---- context parallelism ------------------------------------------------------------- */

Test(cp, ring_bytes_and_counts)
{
  /* GPT-3 350M: 24 attention layers, s = 2048, h = 1024. tp=2, cp=2, micro-batch 1, two
   * micro-batches. Each rank's K/V block: 2 (K and V) x s/cp tokens x h/tp x 2 bytes. Forward
   * cp - 1 hops, backward cp - 1 hops of K/V and cp hops of dK/dV, per layer per micro-batch. */
  g_autoptr(ts_model) m = load_model("gpt3-350m");
  g_autoptr(ts_topo) t = ring_topo(8, 1e11, 1e-6);
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=2,cp=2,dp=2", 4, 1);
  cr_assert_eq(p->n_micro, 2);
  double cp = 2, L = 24, M = 2, kv = 2.0 * (2048 / cp) * (1024 / 2.0) * 2.0;
  g_autoptr(ts_trace) tr = trace_of(p);
  cr_assert_eq(tr->nprograms, 2, "one program per cp rank (pp = 1)");
  for (int prog = 0; prog < 2; prog++) {
    double b;
    int n = count_ops(tr, prog, TS_OP_SEND, "cp send K/V", &b);
    cr_assert_eq(n, (int)(L * M * (cp - 1)));
    cr_assert_float_eq(b, L * M * (cp - 1) * kv, 1e-6);
    n = count_ops(tr, prog, TS_OP_SEND, "cp bwd send K/V", &b);
    cr_assert_eq(n, (int)(L * M * (cp - 1)));
    n = count_ops(tr, prog, TS_OP_SEND, "cp send dK/dV", &b);
    cr_assert_eq(n, (int)(L * M * cp));
    cr_assert_float_eq(b, L * M * cp * kv, 1e-6);
    int r = count_ops(tr, prog, TS_OP_RECV, "cp ", NULL);
    int s = count_ops(tr, prog, TS_OP_SEND, "cp ", NULL);
    cr_assert_eq(r, s, "every send has a receive");
  }
  double want = L * M * (3 * cp - 2) * kv;
  cr_assert_float_eq(p->cp_bytes_per_step, want, want * 1e-12, "%g vs %g", p->cp_bytes_per_step,
                     want);
}

/* Whether op `b` of program `prog` depends on op `a`, through explicit dependencies (an op's
 * dependencies come before it). */
static gboolean reaches(const ts_program *pr, int a, int b)
{
  if (b == a)
    return TRUE;
  if (b < a)
    return FALSE;
  const ts_op o = ts_program_op(pr, b);
  for (int d = 0; d < o.ndeps; d++)
    if (reaches(pr, a, o.deps[d]))
      return TRUE;
  return FALSE;
}

Test(cp, p2p_backward_waits_for_the_partial_dkv_only_at_the_add)
{
  /* Transformer Engine's AttnFuncWithCPAndKVP2P backward computes a ring step's block, then
   * waits for the partial dK/dV sum from the previous rank and adds the block's share before
   * sending it on: the sum's hop runs beside the next block. GPT-3 350M, cp=4, one
   * micro-batch: in every layer, step j's block does not depend on the dK/dV receive of step
   * j - 1, the send of step j (the sum after the add) does, and the block after the add waits
   * for it (the add holds the compute stream). */
  g_autoptr(ts_model) m = load_model("gpt3-350m");
  g_autoptr(ts_topo) t = ring_topo(4, 1e11, 1e-6);
  g_autoptr(ts_plan) p = make_plan(m, t, "cp=4", 1, 1);
  g_autoptr(ts_trace) tr = trace_of(p);
  const ts_program *pr = &tr->programs[0];
  int cp = 4, layers = 0;
  int blk[4], drecv[4], dsend[4], nb = 0, nr = 0, ns = 0;
  for (int i = 0; i < pr->nops; i++) {
    const ts_op o = ts_program_op(pr, i);
    const char *l = g_ptr_array_index(tr->labels, o.label);
    if (strstr(l, "ring attention block bwd") != NULL && o.kind == TS_OP_COMPUTE)
      blk[nb++] = i;
    else if (strstr(l, "cp recv dK/dV") != NULL)
      drecv[nr++] = i;
    else if (strstr(l, "cp send dK/dV") != NULL)
      dsend[ns++] = i;
    if (nb < cp || nr < cp || ns < cp)
      continue;
    for (int j = 1; j < cp; j++) {
      cr_assert(!reaches(pr, drecv[j - 1], blk[j]),
                "layer %d: the backward block of step %d waits for the dK/dV receive of step %d",
                layers, j, j - 1);
      cr_assert(reaches(pr, drecv[j - 1], dsend[j]),
                "layer %d: the sum sent at step %d does not wait for the partial it adds", layers,
                j);
      cr_assert(reaches(pr, blk[j], dsend[j]), "layer %d: step %d sends before its block", layers,
                j);
      if (j + 1 < cp)
        cr_assert(reaches(pr, drecv[j - 1], blk[j + 1]),
                  "layer %d: the block after step %d's add does not wait for the add's input",
                  layers, j);
    }
    layers++;
    nb = nr = ns = 0;
  }
  cr_assert_eq(layers, 24, "every attention layer's backward ring checked (%d)", layers);
}

Test(cp, grouped_query_attention_sends_only_the_key_value_heads)
{
  /* Llama 3.1 8B: 32 layers, s = 8192, 32 query heads of 128, 8 key/value heads: K and V are
   * J = 8 x 128 = 1024 wide. tp=2, cp=2: each rank's block is 2 x s/cp x J/tp x 2 bytes, a
   * quarter of what the query width would give; (3 cp - 2) blocks per layer per micro-batch. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = ring_topo(8, 1e11, 1e-6);
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=2,cp=2,dp=2", 2, 1);
  double cp = 2, L = 32, M = 1, J = 1024, kv = 2.0 * (8192 / cp) * (J / 2.0) * 2.0;
  double want = L * M * (3 * cp - 2) * kv;
  cr_assert_float_eq(p->cp_bytes_per_step, want, want * 1e-12, "%g vs %g", p->cp_bytes_per_step,
                     want);
}

Test(cp, torch_ring_gathers_query_wide_blocks_and_sends_fp32_gradients)
{
  /* cp-ring=torch (PyTorch's context_parallel as TorchTitan runs it): Llama 3.1 8B, tp=2,
   * cp=2, one micro-batch. TorchTitan repeats the 8 key/value heads to the 32 query heads
   * before SDPA, so each rank's K/V block is 2 x s/cp x I/tp x 2 bytes with I = 4096, four
   * times the grouped-query block. Per layer: forward one all-gather of cp blocks (each rank
   * receives cp - 1), backward another, and cp hops of the dK/dV sums in fp32 (2 x the block);
   * no point-to-point K/V sends. The blocks' FLOPs are the p2p ring's. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = ring_topo(8, 1e11, 1e-6);
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=2,cp=2,dp=2,cp-ring=torch", 2, 1);
  g_autoptr(ts_plan) q = make_plan(m, t, "tp=2,cp=2,dp=2", 2, 1);
  cr_assert_eq(p->n_micro, 1);
  cr_assert(strstr(p->split_text, "cp-ring=torch") != NULL, "%s", p->split_text);
  cr_assert(strstr(q->split_text, "cp-ring") == NULL, "the default is not printed: %s",
            q->split_text);
  double cp = 2, L = 32, I = 4096, kv = 2.0 * (8192 / cp) * (I / 2.0) * 2.0;
  double want = L * (2 * (cp - 1) + 2 * cp) * kv;
  cr_assert_float_eq(p->cp_bytes_per_step, want, want * 1e-12, "%g vs %g", p->cp_bytes_per_step,
                     want);
  g_autoptr(ts_trace) tr = trace_of(p);
  g_autoptr(ts_trace) tq = trace_of(q);
  for (int prog = 0; prog < 2; prog++) {
    double b;
    cr_assert_eq(count_ops(tr, prog, TS_OP_COLL, "cp all-gather K/V", &b), (int)L);
    cr_assert_float_eq(b, L * cp * kv, 1e-6, "forward gathers: %g", b);
    cr_assert_eq(count_ops(tr, prog, TS_OP_COLL, "cp bwd all-gather K/V", &b), (int)L);
    cr_assert_float_eq(b, L * cp * kv, 1e-6, "backward gathers: %g", b);
    cr_assert_eq(count_ops(tr, prog, TS_OP_SEND, "cp send dK/dV", &b), (int)(L * cp));
    cr_assert_float_eq(b, L * cp * 2.0 * kv, 1e-6, "fp32 gradient sums: %g", b);
    cr_assert_eq(count_ops(tr, prog, TS_OP_SEND, "K/V", NULL), 0, "no point-to-point K/V");
    cr_assert_eq(count_ops(tr, prog, TS_OP_RECV, "cp ", NULL),
                 count_ops(tr, prog, TS_OP_SEND, "cp ", NULL), "every send has a receive");
    cr_assert_float_eq(program_flops(tr, prog), program_flops(tq, prog),
                       program_flops(tq, prog) * 1e-12, "the same blocks");
  }
  /* The merges and gradient sums are memory traffic the p2p ring does not have. */
  cr_assert_gt(step_time(p), step_time(q));
}

Test(cp, torch_ring_memory_holds_the_gathered_blocks_and_fp32_gradients)
{
  /* cp-ring=torch's transient buffers in an attention layer's backward (PyTorch's
   * _templated_ring_attention_backward): with kv the rank's head-repeated K/V block (as above,
   * 2 x s/cp x I/tp x 2 bytes) and q = kv / 2 its queries, the all-gather (cp kv), the local
   * K/V concatenated for it (kv), fp32 dQ, dK, dV accumulators (2 (q + kv)), the fp32 dK/dV
   * sent and received (2 x 2 kv), one block's bf16 SDPA gradients (q + kv). They count in the
   * buffers where the layer's backward is the peak; the p2p ring and cp = 1 have none. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = ring_topo(8, 1e11, 1e-6);
  g_autoptr(ts_plan) p = make_plan(m, t, "tp=2,cp=4,recompute=full,cp-ring=torch", 1, 1);
  g_autoptr(ts_plan) q = make_plan(m, t, "tp=2,cp=4,recompute=full", 1, 1);
  double cp = 4, I = 4096, kv = 2.0 * (8192 / cp) * (I / 2.0) * 2.0, qb = kv / 2;
  double want = cp * kv + kv + 2.0 * (qb + kv) + 4.0 * kv + qb + kv;
  cr_assert_float_eq(p->mem.cp_attn, want, want * 1e-12, "%g vs %g", p->mem.cp_attn, want);
  cr_assert_eq(q->mem.cp_attn, 0.0, "the p2p ring's buffers are not modelled here");
  cr_assert_float_eq(p->mem.temp - q->mem.temp, want, want * 1e-9, "in the buffers: %g",
                     p->mem.temp - q->mem.temp);
  /* Two micro-batch samples, twice the buffers (the ring runs on the whole micro-batch). */
  g_autoptr(ts_plan) p2 = make_plan(m, t, "tp=2,cp=4,recompute=full,cp-ring=torch", 2, 2);
  cr_assert_float_eq(p2->mem.cp_attn, 2 * want, want * 1e-12, "%g", p2->mem.cp_attn);
}

Test(cp, torch_ring_hides_its_all_gather_behind_the_first_block_only)
{
  /* Eager (kernels=eager): on a slow ring the all-gather dominates: the forward's (and the
   * backward's) cannot start before the projections and the second block waits for it, so the
   * step is at least the gathers' time, L x 2 x (cp - 1) x block / bandwidth, less the first
   * blocks it overlaps. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) fast = ring_topo(4, 1e11, 1e-6);
  g_autoptr(ts_topo) slow = ring_topo(4, 1e7, 1e-6);
  g_autoptr(ts_plan) pf = make_plan(m, fast, "cp=4,cp-ring=torch,kernels=eager", 1, 1);
  g_autoptr(ts_plan) ps = make_plan(m, slow, "cp=4,cp-ring=torch,kernels=eager", 1, 1);
  double cp = 4, L = 32, kv = 2.0 * (8192 / cp) * 4096 * 2.0;
  double gathers = L * 2 * (cp - 1) * kv / 1e7;
  double tf = step_time(pf), ts = step_time(ps);
  cr_assert_gt(ts - tf, 0.5 * gathers, "slow %g s, fast %g s, gathers %g s", ts, tf, gathers);
}

/* How many of program 0's ring blocks (label `block`) wait directly for the ring op (label
 * `coll`) issued right before them (no other communication between); of how many (*n). */
static int blocks_waiting(const ts_trace *tr, const char *coll, const char *block, int *n)
{
  const ts_program *pr = &tr->programs[0];
  int last = -1, waiting = 0;
  *n = 0;
  for (int i = 0; i < pr->nops; i++) {
    const char *lab = g_ptr_array_index(tr->labels, ts_program_op_label(pr, i));
    if (g_str_has_suffix(lab, coll)) {
      last = i;
      continue;
    }
    if (ts_program_op(pr, i).kind != TS_OP_COMPUTE)
      last = -1;
    if (!g_str_has_suffix(lab, block) || last < 0)
      continue;
    (*n)++;
    int nd;
    const int *d = ts_program_deps(pr, i, &nd);
    for (int k = 0; k < nd; k++)
      if (d[k] == last) {
        waiting++;
        break;
      }
    last = -1;
  }
  return waiting;
}

Test(cp, compiled_torch_ring_waits_for_every_collective)
{
  /* torch.compile traces the ring (kernels=fused, the default): each functional collective is
   * waited for right after it is issued (_functional_collectives.py, _maybe_wrap_tensor) and
   * Inductor does not move the wait by default, so the first block of a layer waits for the
   * K/V all-gather and each block of the backward for the dK/dV hop before it. Eagerly
   * (kernels=eager) the first block runs beside the all-gather and each hop beside the next
   * block (waited for at the add after it). Llama 3 8B, cp 4: 32 layers, forward and backward
   * gathers, 3 hops between a layer's 4 backward blocks. */
  g_autoptr(ts_model) m = load_model("llama3-8b");
  g_autoptr(ts_topo) t = ring_topo(4, 1e11, 1e-6);
  g_autoptr(ts_plan) c = make_plan(m, t, "cp=4,cp-ring=torch", 1, 1);
  g_autoptr(ts_plan) e = make_plan(m, t, "cp=4,cp-ring=torch,kernels=eager", 1, 1);
  g_autoptr(ts_trace) tc = trace_of(c);
  g_autoptr(ts_trace) te = trace_of(e);
  int n;
  cr_assert_eq(blocks_waiting(tc, "cp all-gather K/V", "ring attention block", &n), 32);
  cr_assert_eq(n, 32);
  cr_assert_eq(blocks_waiting(tc, "cp bwd all-gather K/V", "ring attention block bwd", &n), 32);
  cr_assert_eq(n, 32);
  cr_assert_eq(blocks_waiting(tc, "cp recv dK/dV", "ring attention block bwd", &n), 32 * 3);
  cr_assert_eq(n, 32 * 3);
  cr_assert_eq(blocks_waiting(te, "cp all-gather K/V", "ring attention block", &n), 0);
  cr_assert_eq(n, 32);
  cr_assert_eq(blocks_waiting(te, "cp bwd all-gather K/V", "ring attention block bwd", &n), 0);
  cr_assert_eq(blocks_waiting(te, "cp recv dK/dV", "ring attention block bwd", &n), 0);
  cr_assert_eq(n, 32 * 3);
  /* So on a slow ring the compiled ring exposes more of its communication: the same
   * collectives, less hidden. */
  g_autoptr(ts_topo) slow = ring_topo(4, 1e8, 1e-6);
  g_autoptr(ts_plan) cs = make_plan(m, slow, "cp=4,cp-ring=torch", 1, 1);
  g_autoptr(ts_plan) es = make_plan(m, slow, "cp=4,cp-ring=torch,kernels=eager", 1, 1);
  g_autoptr(ts_trace) tcs = trace_of(cs);
  g_autoptr(ts_trace) tes = trace_of(es);
  ts_run_options ro = {.backend = "analytic", .sg_cfg = NULL, .full = FALSE};
  ts_replay_result rc, re;
  GError *err = NULL;
  cr_assert(ts_run_replay(tcs, slow, &ro, &rc, &err), "%s", err ? err->message : "");
  cr_assert(ts_run_replay(tes, slow, &ro, &re, &err), "%s", err ? err->message : "");
  double xc = rc.critical.exposed_cat_s[TS_CAT_COMM_OTHER];
  double xe = re.critical.exposed_cat_s[TS_CAT_COMM_OTHER];
  cr_assert_gt(xc, xe, "exposed cp communication: compiled %g s, eager %g s", xc, xe);
}

Test(cp, ring_wraps_around)
{
  /* cp = 4: rank 3 sends to rank 0 (offset -3), rank 0 receives from rank 3 (offset +3). */
  g_autoptr(ts_model) m = load_model("gpt3-350m");
  g_autoptr(ts_topo) t = ring_topo(8, 1e11, 1e-6);
  g_autoptr(ts_plan) p = make_plan(m, t, "cp=4,dp=2", 2, 1);
  g_autoptr(ts_trace) tr = trace_of(p);
  cr_assert_eq(tr->nprograms, 4);
  for (int prog = 0; prog < 4; prog++)
    for (int i = 0; i < tr->programs[prog].nops; i++) {
      const ts_op o_ = ts_program_op(&tr->programs[prog], i), *o = &o_;
      if (o->kind != TS_OP_SEND && o->kind != TS_OP_RECV)
        continue;
      int peer = o->kind == TS_OP_SEND ? (prog + 1) % 4 : (prog + 3) % 4;
      cr_assert_eq(prog + o->offset, peer, "program %d op %d offset %d", prog, i, o->offset);
    }
  /* And the replay pairs them all (a missing partner or tag would fail or hang it). */
  cr_assert_gt(step_time(p), 0.0);
}

Test(cp, work_and_activations_divide_by_cp)
{
  /* The same micro-batch on a cp=2 rank and on a rank without cp: half the FLOPs (the zig-zag
   * split balances causal attention, so every rank has the same share) and half the
   * activations (Korthikanti et al.'s per-layer bytes with s/cp tokens); the same model
   * states. */
  g_autoptr(ts_model) m = load_model("gpt3-350m");
  g_autoptr(ts_topo) t4 = ring_topo(4, 1e11, 1e-6);
  g_autoptr(ts_topo) t8 = ring_topo(8, 1e11, 1e-6);
  const char *opts[] = {"", ",sp", ",recompute=selective", ",sp,recompute=full"};
  for (size_t k = 0; k < G_N_ELEMENTS(opts); k++) {
    g_autofree char *a = g_strdup_printf("tp=2,dp=2%s", opts[k]);
    g_autofree char *b = g_strdup_printf("tp=2,dp=2,cp=2%s", opts[k]);
    g_autoptr(ts_plan) ref = make_plan(m, t4, a, 4, 1);
    g_autoptr(ts_plan) cp = make_plan(m, t8, b, 4, 1);
    for (int i = 0; i < m->nlayers; i++)
      cr_assert_float_eq(cp->exec[i].act_bytes, ref->exec[i].act_bytes / 2,
                         ref->exec[i].act_bytes * 1e-12, "%s layer %s", b, m->layers[i].name);
    cr_assert_float_eq(cp->mem.activations, ref->mem.activations / 2, ref->mem.activations * 1e-12,
                       "%s", b);
    cr_assert_float_eq(cp->mem.params + cp->mem.grads + cp->mem.optimizer,
                       ref->mem.params + ref->mem.grads + ref->mem.optimizer, 1.0);
    g_autoptr(ts_trace) tr = trace_of(ref);
    g_autoptr(ts_trace) tc = trace_of(cp);
    double fr = program_flops(tr, 0), fc = program_flops(tc, 0);
    /* The optimizer step (12 FLOP per parameter) does not shrink with cp. */
    double opt = 12.0 * ref->params_per_chip;
    cr_assert_float_eq(fc - opt, (fr - opt) / 2, (fr - opt) * 1e-9, "%s: %g vs %g", b, fc, fr);
  }
}

Test(cp, gradients_and_zero_shard_over_dp_and_cp)
{
  /* cp ranks hold the same parameters: gradients are summed over dp x cp, and ZeRO shards over
   * dp x cp (Megatron-Core's data-parallel-with-cp group). */
  g_autoptr(ts_model) m = load_model("gpt3-350m");
  g_autoptr(ts_topo) t = ring_topo(8, 1e11, 1e-6);
  g_autoptr(ts_plan) p = make_plan(m, t, "cp=2,dp=4,zero=1", 8, 1);
  double psi = ts_model_params(m), K = 12;
  cr_assert_float_eq(p->mem.optimizer, K * psi / 8, psi * 1e-9);
  g_autoptr(ts_trace) tr = trace_of(p);
  const ts_group *g = NULL;
  for (int i = 0; i < tr->programs[0].nops && g == NULL; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
    if (o->kind == TS_OP_COLL && o->coll == TS_COLL_REDUCESCATTER)
      g = g_ptr_array_index(tr->groups, o->group);
  }
  cr_assert_not_null(g);
  cr_assert_eq(ts_group_size(&g->shape), 8, "gradient group of %d", ts_group_size(&g->shape));
}

Test(cp, errors_name_the_item)
{
  g_autoptr(ts_model) m = load_model("gpt3-350m");
  g_autoptr(ts_model) cnn = load_model("resnet50");
  g_autoptr(ts_topo) t = ring_topo(12, 1e11, 1e-6);
  g_autoptr(ts_topo) t8 = ring_topo(8, 1e11, 1e-6);
  GError *err = NULL;
  /* 2048 tokens are not 6 chunks. */
  cr_assert_null(plan_or_error(m, t, "cp=3,dp=4", 4, 1, &err));
  cr_assert(strstr(err->message, "2 x cp = 6") != NULL, "%s", err->message);
  g_clear_error(&err);
  cr_assert_null(plan_or_error(cnn, t8, "cp=2,dp=4", 8, 1, &err));
  cr_assert(strstr(err->message, "cp=2") != NULL, "%s", err->message);
  g_clear_error(&err);
  /* cp-ring=torch needs a ring; an unknown ring names the item. */
  cr_assert_null(plan_or_error(m, t8, "dp=8,cp-ring=torch", 8, 1, &err));
  cr_assert(strstr(err->message, "cp-ring=torch without context parallelism") != NULL, "%s",
            err->message);
  g_clear_error(&err);
  g_autoptr(ts_split) bad = ts_split_parse("cp=2,dp=4,cp-ring=nccl", &err);
  cr_assert_null(bad);
  cr_assert(strstr(err->message, "cp-ring=p2p") != NULL, "%s", err->message);
  g_clear_error(&err);
  run_result v = run("validate -m validate-transformer -t ring:4 -s cp=2,dp=2,cp-ring=torch");
  cr_assert_eq(v.status, 2, "%s", v.err);
  cr_assert(strstr(v.err, "cp-ring=torch") != NULL && strchr(v.err, '\n') == strrchr(v.err, '\n'),
            "one line: %s", v.err);
  run_free(&v);
  run_result r = run("run -t dgx-a100-1node -m gpt3-350m -b 8 -s cp=3,dp=2");
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert(strchr(r.err, '\n') == strrchr(r.err, '\n'), "one line: %s", r.err);
  run_free(&r);
}

/* ---- hybrid sharding ------------------------------------------------------------------ */

Test(shard, memory_formulas)
{
  /* ZeRO over S ranks of a group instead of all N = dp (FSDP HYBRID_SHARD, MiCS): stage 3
   * keeps (2 + 2 + K) Psi / S, stage 1 4 Psi + K Psi / S. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  double psi = ts_model_params(m), K = 12, S = 8;
  g_autoptr(ts_plan) p3 = make_plan(m, t, "dp=64,zero=3,shard=8", 64, 1);
  double got = p3->mem.params + p3->mem.grads + p3->mem.optimizer;
  cr_assert_float_eq(got, (4 + K) * psi / S, psi * 1e-9);
  g_autoptr(ts_plan) p1 = make_plan(m, t, "dp=64,zero=1,shard=8", 64, 1);
  got = p1->mem.params + p1->mem.grads + p1->mem.optimizer;
  cr_assert_float_eq(got, 4 * psi + K * psi / S, psi * 1e-9);
  cr_assert(strstr(p3->split_text, "shard=8") != NULL, "%s", p3->split_text);
  /* The shard group is dp's inner (fastest) part. */
  cr_assert_eq(ts_group_size(&p3->shard_shape), 8);
  cr_assert_eq(ts_group_size(&p3->rep_shape), 8);
  cr_assert_eq(p3->shard_shape.p[0].stride, 1);
}

Test(shard, collectives_per_step)
{
  /* ZeRO-3 with shard = S of N: per micro-batch each layer's parameters are gathered inside
   * the group before forward and backward (2 M Psi D bytes), gradients reduce-scattered inside
   * the group (M Psi D) and each rank's 1/S shard all-reduced across the N / S replicas
   * (M Psi D / S). */
  g_autoptr(ts_model) m = load_model("bert-large");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  g_autoptr(ts_plan) p = make_plan(m, t, "dp=64,zero=3,shard=8", 256, 2);
  g_autoptr(ts_trace) tr = trace_of(p);
  double psi = ts_model_params(m), D = m->dtype_bytes, M = (double)p->n_micro, S = 8;
  double ag, rs, ar;
  count_ops(tr, 0, TS_OP_COLL, "param all-gather", &ag);
  count_ops(tr, 0, TS_OP_COLL, "grad reduce-scatter", &rs);
  int nar = count_ops(tr, 0, TS_OP_COLL, "grad shard all-reduce across replicas", &ar);
  cr_assert_float_eq(ag, 2 * M * psi * D, psi * 1e-9);
  cr_assert_float_eq(rs, M * psi * D, psi * 1e-9);
  cr_assert_float_eq(ar, M * psi * D / S, psi * 1e-9);
  cr_assert_eq(nar, count_ops(tr, 0, TS_OP_COLL, "grad reduce-scatter", NULL));
  for (int i = 0; i < tr->programs[0].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
    if (o->kind != TS_OP_COLL)
      continue;
    const ts_group *g = g_ptr_array_index(tr->groups, o->group);
    int want = o->coll == TS_COLL_ALLREDUCE ? 8 : 8;
    cr_assert_eq(ts_group_size(&g->shape), want);
    cr_assert_str_eq(g->name, o->coll == TS_COLL_ALLREDUCE ? "dp" : "shard");
  }
}

Test(shard, errors_name_the_item)
{
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("tpu-v3-8x8");
  GError *err = NULL;
  cr_assert_null(plan_or_error(m, t, "dp=64,zero=3,shard=6", 64, 1, &err));
  cr_assert(strstr(err->message, "shard=6 does not divide dp=64") != NULL, "%s", err->message);
  g_clear_error(&err);
  cr_assert_null(plan_or_error(m, t, "dp=64,shard=8", 64, 1, &err));
  cr_assert(strstr(err->message, "expected zero=1, 2 or 3") != NULL, "%s", err->message);
  g_clear_error(&err);
  run_result r = run("run -t tpu-v3-8x8 -m gpt3-1.3b -b 64 -s dp=64,zero=3,shard=6");
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert(strchr(r.err, '\n') == strrchr(r.err, '\n'), "one line: %s", r.err);
  run_free(&r);
}

/* ---- overlaps ------------------------------------------------------------------------- */

static void coll_totals(const ts_trace *tr, int prog, double *bytes_by_kind, double *flops)
{
  for (int k = 0; k < TS_COLL_NKINDS; k++)
    bytes_by_kind[k] = 0;
  *flops = 0;
  for (int i = 0; i < tr->programs[prog].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[prog], i), *o = &o_;
    if (o->kind == TS_OP_COLL)
      bytes_by_kind[o->coll] += o->bytes;
    else if (o->kind == TS_OP_COMPUTE)
      *flops += o->flops;
  }
}

Test(overlap, tp_overlap_changes_only_the_schedule)
{
  /* tp-overlap cuts each forward GEMM and its all-gather / reduce-scatter into tp chunks: the
   * same bytes per collective kind and the same FLOPs, so the same numbers (the validator's
   * equivalence of the split without it carries over); only the time may change, and it can
   * not exceed the step without overlap, and here (no per-op floor, op_overhead_us = 0) it
   * hides some of the collectives. On a chip whose op_overhead_us floors every kernel, chunks
   * smaller than the floor make it slower, as Transformer Engine warns for small GEMMs. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = ring_topo(8, 2e10, 1e-6);
  const char *base[] = {"tp=8", "tp=8,sp", "tp=4,dp=2,sp"};
  for (size_t k = 0; k < G_N_ELEMENTS(base); k++) {
    g_autofree char *ov = g_strdup_printf("%s,tp-overlap", base[k]);
    g_autoptr(ts_plan) a = make_plan(m, t, base[k], 8, 0);
    g_autoptr(ts_plan) b = make_plan(m, t, ov, 8, 0);
    g_autoptr(ts_trace) ta = trace_of(a);
    g_autoptr(ts_trace) tb = trace_of(b);
    double ba[TS_COLL_NKINDS], bb[TS_COLL_NKINDS], fa, fb;
    coll_totals(ta, 0, ba, &fa);
    coll_totals(tb, 0, bb, &fb);
    for (int c = 0; c < TS_COLL_NKINDS; c++)
      cr_assert_float_eq(bb[c], ba[c], ba[c] * 1e-12 + 1e-6, "%s kind %d", ov, c);
    cr_assert_float_eq(fb, fa, fa * 1e-12);
    int chunks = count_ops(tb, 0, TS_OP_COMPUTE, "fwd chunk", NULL);
    int tp = b->degree[TS_AX_TP];
    cr_assert_eq(chunks % tp, 0);
    cr_assert_gt(chunks, 0);
    double sa = step_time(a), sb = step_time(b);
    cr_assert_lt(sb, sa, "%s: %g s vs %g s without overlap", ov, sb, sa);
  }
}

Test(overlap, tp_overlap_with_cp_chunks_the_projections_around_the_ring)
{
  /* tp-overlap with cp (Megatron-Core runs Transformer Engine's userbuffers beside the cp ring):
   * an attention layer's input all-gather goes in tp chunks with its QKV projection before the
   * ring, its output reduce-scatter in tp chunks with the output projection after it, and the
   * backward's output-gradient gather in tp chunks with the output projection's input
   * gradient. Same bytes per collective kind and same FLOPs as without the overlap; no whole
   * attention collective is left on the compute stream; the step is not longer. The ring's
   * projection ops carry no attention-core FLOPs (the core runs in the ring's blocks). */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = ring_topo(8, 2e10, 1e-6);
  g_autoptr(ts_plan) a = make_plan(m, t, "tp=2,cp=2,dp=2,sp", 8, 1);
  g_autoptr(ts_plan) b = make_plan(m, t, "tp=2,cp=2,dp=2,sp,tp-overlap", 8, 1);
  g_autoptr(ts_trace) ta = trace_of(a);
  g_autoptr(ts_trace) tb = trace_of(b);
  double ba[TS_COLL_NKINDS], bb[TS_COLL_NKINDS], fa, fb;
  coll_totals(ta, 0, ba, &fa);
  coll_totals(tb, 0, bb, &fb);
  for (int c = 0; c < TS_COLL_NKINDS; c++)
    cr_assert_float_eq(bb[c], ba[c], ba[c] * 1e-12 + 1e-6, "kind %d", c);
  cr_assert_float_eq(fb, fa, fa * 1e-12);
  int per = m->t_layers * (int)b->n_micro; /* attention layers x micro-batches */
  int tp = b->degree[TS_AX_TP];
  cr_assert_eq(count_ops(tb, 0, TS_OP_COLL, "attention fwd all-gather chunk", NULL), per * tp);
  cr_assert_eq(count_ops(tb, 0, TS_OP_COLL, "attention fwd reduce-scatter chunk", NULL), per * tp);
  cr_assert_eq(count_ops(tb, 0, TS_OP_COLL, "attention bwd all-gather chunk", NULL), per * tp);
  cr_assert_eq(count_ops(ta, 0, TS_OP_COLL, "attention fwd all-gather", NULL), per);
  cr_assert_eq(count_ops(ta, 0, TS_OP_COLL, "attention fwd all-gather chunk", NULL), 0);
  cr_assert_eq(count_ops(tb, 0, TS_OP_COMPUTE, "attention fwd chunk", NULL), 2 * per * tp);
  cr_assert_eq(count_ops(tb, 0, TS_OP_COMPUTE, "attention ring attention block", NULL),
               2 * per * b->degree[TS_AX_CP]); /* forward and backward blocks */
  for (int k = 0; k < 2; k++) {
    const ts_trace *tr = k == 0 ? ta : tb;
    for (int i = 0; i < tr->programs[0].nops; i++) {
      const ts_op o = ts_program_op(&tr->programs[0], i);
      const char *lab = g_ptr_array_index(tr->labels, o.label);
      if (o.kind == TS_OP_COMPUTE && strstr(lab, "attention") != NULL &&
          strstr(lab, "ring") == NULL && o.shape != NULL)
        cr_assert_eq(o.shape->attn_flops, 0.0, "%s carries attention-core FLOPs", lab);
    }
  }
  cr_assert_leq(step_time(b), step_time(a));
}

/* The op of program 0 labelled exactly `label` (copied into *buf), or NULL. */
static const ts_op *op_labelled_in(const ts_trace *tr, const char *label, ts_op *buf)
{
  for (int i = 0; i < tr->programs[0].nops; i++) {
    *buf = ts_program_op(&tr->programs[0], i);
    if (strcmp(g_ptr_array_index(tr->labels, buf->label), label) == 0)
      return buf;
  }
  return NULL;
}

static double coll_seconds(const ts_trace *tr, const ts_topo *t, const ts_op *o)
{
  GError *err = NULL;
  const ts_group *grp = g_ptr_array_index(tr->groups, o->group);
  double s = ts_coll_time(t, o->coll, o->algo, &grp->shape, o->bytes, NULL, &err);
  cr_assert_geq(s, 0, "%s", err ? err->message : "");
  return s;
}

static double launch_seconds(const ts_trace *tr, const ts_topo *t)
{
  double s = 0;
  for (int i = 0; i < tr->programs[0].nops; i++) {
    const ts_op o_ = ts_program_op(&tr->programs[0], i), *o = &o_;
    if (o->kind == TS_OP_COMPUTE)
      s += ts_cost_launch(&t->chip, o->flops, o->mem_bytes, o->shape);
  }
  return s;
}

Test(overlap, tp_overlap_closed_form)
{
  /* validate-mlp, tp=2, one micro-batch: only fc2 (row split, its output all-reduced) is
   * overlapped, in n = tp = 2 chunks. With the GEMM's time G (chunk g = G/n: no tile or floor
   * effects on this chip), the whole all-reduce C and a chunk's c, the forward of fc2 takes
   * G + C without overlap and g + (n - 1) max(g, c) + c with it (the first chunk's GEMM and the
   * last chunk's all-reduce exposed); the rest of the step is the same. Checked in a
   * communication-bound regime (c > g), a compute-bound one (g > c), both faster than without
   * overlap; one where the GEMM is negligible (nothing to hide behind: the chunks' extra
   * latency makes it a little slower, by the closed form too); and with host launches of 1 ms
   * per kernel (host-bound): the chunks launch with the first, so the host's total is the same
   * and the overlapped step is not longer. */
  g_autoptr(ts_model) m = load_model("validate-mlp");
  const double bws[] = {1e5, 1e6, 1e6, 1e6};
  const double peak[] = {1e6, 1e6, 1e12, 1e6};
  const double launch[] = {0, 0, 0, 1e-3};
  for (int k = 0; k < 4; k++) {
    g_autoptr(ts_topo) t = ring_topo(2, bws[k], 1e-6);
    t->chip.peak_flops = peak[k];
    t->chip.kernel_launch_s = launch[k];
    g_autoptr(ts_plan) a = make_plan(m, t, "tp=2", 8, 0);
    g_autoptr(ts_plan) b = make_plan(m, t, "tp=2,tp-overlap", 8, 0);
    g_autoptr(ts_trace) ta = trace_of(a);
    g_autoptr(ts_trace) tb = trace_of(b);
    ts_op b_fwd, b_ar, b_car;
    const ts_op *fwd = op_labelled_in(ta, "fc2 fwd", &b_fwd);
    const ts_op *ar = op_labelled_in(ta, "fc2 fwd all-reduce", &b_ar);
    const ts_op *car = op_labelled_in(tb, "fc2 fwd all-reduce chunk", &b_car);
    cr_assert(fwd != NULL && ar != NULL && car != NULL);
    cr_assert_eq(count_ops(tb, 0, TS_OP_COMPUTE, "fc2 fwd chunk", NULL), 2);
    cr_assert_eq(count_ops(tb, 0, TS_OP_COLL, "fc2 fwd all-reduce chunk", NULL), 2);
    double n = 2, G = ts_cost_device(&t->chip, fwd->flops, fwd->mem_bytes, fwd->shape),
           C = coll_seconds(ta, t, ar), c = coll_seconds(tb, t, car), g = G / n;
    cr_assert_gt(C, 0);
    cr_assert_float_eq(launch_seconds(tb, t), launch_seconds(ta, t), 1e-15);
    double sa = step_time(a), sb = step_time(b);
    if (launch[k] > 0) {
      cr_assert_leq(sb, sa * (1 + 1e-12), "host-bound: %g s vs %g s", sb, sa);
      continue;
    }
    cr_assert(k == 1 ? g > c : c > g, "regime %d: c %g g %g", k, c, g);
    double want = (G + C) - (g + (n - 1) * fmax(g, c) + c);
    if (k < 2)
      cr_assert_gt(want, 0.1 * g, "regime %d: G %g C %g c %g", k, G, C, c);
    cr_assert_float_eq(sa - sb, want, 1e-9 * sa, "regime %d: saved %g s, closed form %g s", k,
                       sa - sb, want);
  }
}

/* validate-transformer, tp=2 with sequence parallelism, one micro-batch, under a tp-overlap MODE
 * that chunks the backward's output-gradient all-gather (sequence parallelism's transpose of the
 * forward reduce-scatter) beside the GEMMs it feeds: fc2's whole backward and attention's input
 * gradient, in n = tp = 2 chunks. tp-overlap=async keeps that gather whole before the GEMM; on
 * this chip (no tile model, no launches, memory traffic free) the two modes' forward chunks cost
 * the same, with the same bytes and FLOPs, but AsyncTP's forward needs no gather for its own
 * chunk and no reduction of its own partial chunk (the symmetric-memory copy and partial sum it
 * runs instead are free here): with n = 2 it is shorter by one gather chunk c_a per gathering
 * layer and one reduce-scatter chunk c_r per reducing layer, F in all. Per chunked layer, with the
 * whole gather C, a chunk's c, the GEMM G and g = G/n: C + G without, c + (n - 1) max(c, g) + g
 * with; the step saves the sum. Checked communication-bound (c > g) and compute-bound (g > c).
 * te (own = TRUE): Transformer Engine's ring exchange starts every chunked gather, forward and
 * backward, with the rank's own shard (split_overlap_ag_p2p), so its forward differs from
 * AsyncTP's only by the own reduce-scatter chunks, and a backward layer takes
 * (n - 1) max(c, g) + g. */
static void backward_overlap_closed_form(const char *mode, gboolean own)
{
  g_autoptr(ts_model) m = load_model("validate-transformer");
  const double bws[] = {1e4, 1e6};
  static const char *const layer[] = {"block.0.fc2", "block.0.attention"};
  static const char *const gemm[] = {"bwd", "bwd input grad"};
  g_autofree char *split = g_strdup_printf("tp=2,sp,%s", mode);
  for (int k = 0; k < 2; k++) {
    g_autoptr(ts_topo) t = ring_topo(2, bws[k], 1e-6);
    t->chip.peak_flops = 1e6;
    t->chip.memory_bw_Bps = 1e30;
    g_autoptr(ts_plan) a = make_plan(m, t, "tp=2,sp,tp-overlap=async", 8, 0);
    g_autoptr(ts_plan) b = make_plan(m, t, split, 8, 0);
    g_autoptr(ts_trace) ta = trace_of(a);
    g_autoptr(ts_trace) tb = trace_of(b);
    double ba[TS_COLL_NKINDS], bb[TS_COLL_NKINDS], fa, fb;
    coll_totals(ta, 0, ba, &fa);
    coll_totals(tb, 0, bb, &fb);
    for (int c = 0; c < TS_COLL_NKINDS; c++)
      cr_assert_float_eq(bb[c], ba[c], ba[c] * 1e-12 + 1e-6, "%s: kind %d", mode, c);
    cr_assert_float_eq(fb, fa, fa * 1e-12, "%s", mode);
    double want = 0, n = 2;
    /* F: the async forward's own-rank gather and reduce-scatter chunks, which nothing waits
     * for (with n = 2, half of each layer's chunks) */
    for (int o = 0; o < ta->programs[0].nops; o++) {
      const ts_op op = ts_program_op(&ta->programs[0], o);
      const char *lab = g_ptr_array_index(ta->labels, op.label);
      if (op.kind == TS_OP_COLL && ((!own && g_str_has_suffix(lab, "fwd all-gather chunk")) ||
                                    g_str_has_suffix(lab, "fwd reduce-scatter chunk")))
        want -= 0.5 * coll_seconds(ta, t, &op);
    }
    for (int l = 0; l < 2; l++) {
      g_autofree char *lg = g_strdup_printf("%s %s", layer[l], gemm[l]);
      g_autofree char *la = g_strdup_printf("%s bwd all-gather", layer[l]);
      g_autofree char *lc = g_strdup_printf("%s bwd all-gather chunk", layer[l]);
      g_autofree char *lgc = g_strdup_printf("%s %s chunk", layer[l], gemm[l]);
      ts_op b_g, b_a, b_c;
      const ts_op *og = op_labelled_in(ta, lg, &b_g), *oa = op_labelled_in(ta, la, &b_a),
                  *oc = op_labelled_in(tb, lc, &b_c);
      cr_assert(og != NULL && oa != NULL && oc != NULL, "%s %s: ops not found", mode, layer[l]);
      cr_assert_eq(count_ops(tb, 0, TS_OP_COLL, lc, NULL), 2, "%s %s", mode, lc);
      cr_assert_eq(count_ops(tb, 0, TS_OP_COMPUTE, lgc, NULL), 2, "%s %s", mode, lgc);
      cr_assert_eq(count_ops(tb, 0, TS_OP_COLL, la, NULL), 2, "%s %s: only the chunks", mode, la);
      double G = ts_cost_device(&t->chip, og->flops, og->mem_bytes, og->shape),
             C = coll_seconds(ta, t, oa), c = coll_seconds(tb, t, oc), g = G / n;
      cr_assert(k == 1 ? g > c : c > g, "%s regime %d %s: c %g g %g", mode, k, layer[l], c, g);
      want += (C + G) - ((own ? 0 : c) + (n - 1) * fmax(c, g) + g);
    }
    double sa = step_time(a), sb = step_time(b);
    cr_assert_float_eq(sa - sb, want, 1e-9 * sa, "%s regime %d: saved %g s, closed form %g s", mode,
                       k, sa - sb, want);
  }
}

Test(overlap, tp_overlap_xla_backward_closed_form)
{
  /* tp-overlap=xla: XLA's collective matmul (MaxText) decomposes the backward's gathers; its
   * first partial einsum takes the local shard (Wang et al. 2023; since s14, as te), so no
   * gather chunk is exposed before it. */
  backward_overlap_closed_form("tp-overlap=xla", TRUE);
}

/* PyTorch's AsyncTP (tp-overlap=async) as torch.distributed._symmetric_memory runs it: the
 * fused all-gather matmul copies the rank's own shard into its symmetric buffer (a read and a
 * write of the shard, on the compute stream) and works on it first, pulling only the n - 1 peer
 * shards; the fused matmul reduce-scatter computes the peers' row chunks first (n - 1 pulled)
 * and its own last, then sums the n partial chunks it holds into its shard (reading the whole
 * unreduced output, writing 1/n of it). The trace keeps the own chunks' collectives (every
 * chunk is there for the validator) but no GEMM and not the sum waits for them: the first GEMM
 * chunk depends on the copy, not on a gather. Transformer Engine's ring exchange (tp-overlap=te)
 * has the same n chunks of each collective and neither kernel. validate-transformer, tp = 4, sp:
 * fc1's input gather, fc2's output reduce-scatter. */
Test(overlap, async_tp_symmetric_memory_copy_and_partial_sum)
{
  g_autoptr(ts_model) m = load_model("validate-transformer");
  g_autoptr(ts_topo) t = ring_topo(4, 1e6, 1e-6);
  t->chip.peak_flops = 1e6;
  const int n = 4;
  g_autoptr(ts_plan) as = make_plan(m, t, "tp=4,sp,tp-overlap=async", 8, 0);
  g_autoptr(ts_plan) te = make_plan(m, t, "tp=4,sp,tp-overlap=te", 8, 0);
  g_autoptr(ts_trace) ta = trace_of(as);
  g_autoptr(ts_trace) tt = trace_of(te);
  const char *ag = "block.0.fc1 fwd all-gather chunk", *rs = "block.0.fc2 fwd reduce-scatter chunk",
             *mv = "block.0.fc1 fwd copy into symmetric memory",
             *sum = "block.0.fc2 fwd sum of reduce-scatter partials";
  double agb, rsb, tagb, trsb;
  cr_assert_eq(count_ops(ta, 0, TS_OP_COLL, ag, &agb), n);
  cr_assert_eq(count_ops(ta, 0, TS_OP_COLL, rs, &rsb), n);
  cr_assert_eq(count_ops(tt, 0, TS_OP_COLL, ag, &tagb), n);
  cr_assert_eq(count_ops(tt, 0, TS_OP_COLL, rs, &trsb), n);
  cr_assert_float_eq(agb, tagb, 1e-9 * agb, "the same chunks");
  cr_assert_float_eq(rsb, trsb, 1e-9 * rsb, "the same chunks");
  cr_assert_eq(count_ops(tt, 0, -1, mv, NULL) + count_ops(tt, 0, -1, sum, NULL), 0);
  ts_op b1, b2;
  const ts_op *c = op_labelled_in(ta, mv, &b1), *r = op_labelled_in(ta, sum, &b2);
  cr_assert(c != NULL && r != NULL);
  cr_assert_eq(c->kind, TS_OP_COMPUTE);
  cr_assert_eq(r->kind, TS_OP_COMPUTE);
  double shard = agb / n, part = rsb / n; /* one rank's chunk of each */
  /* the first GEMM chunk waits for the copy (directly or through the compute stream), no
   * gather; the sum for the gemm and the n - 1 pulled chunks, not the own one */
  int nops = ta->programs[0].nops, own_ag = 0, own_rs = 0;
  for (int o = 0; o < nops; o++) {
    const ts_op op = ts_program_op(&ta->programs[0], o);
    const char *lab = g_ptr_array_index(ta->labels, op.label);
    if (strcmp(lab, sum) == 0 || strcmp(lab, "block.0.fc1 fwd chunk") == 0)
      for (int d = 0; d < op.ndeps; d++) {
        const ts_op dep = ts_program_op(&ta->programs[0], op.deps[d]);
        own_ag += dep.stream == 17 && dep.kind == TS_OP_COLL;
      }
    if (op.kind == TS_OP_COLL && op.stream == 17)
      own_rs += strcmp(lab, rs) == 0;
  }
  cr_assert_eq(own_ag, 0, "nothing waits for an own chunk");
  cr_assert_eq(own_rs, 1, "one own reduce-scatter chunk");
  cr_assert_float_eq(c->mem_bytes, 2.0 * shard, 1e-9 * shard, "read and write the shard");
  cr_assert_float_eq(r->mem_bytes, (n + 1) * part, 1e-9 * part, "n partials read, one written");
  cr_assert_eq(c->flops, 0);
  cr_assert_eq(r->flops, 0);
}

/* AsyncTP decomposes a full checkpoint's recomputed forward as it does the forward: PyTorch
 * re-runs the checkpointed block inside the compiled backward graph (AOTAutograd's partitioner
 * puts the recomputation there) and Inductor's post-grad passes, the micro-pipeline pass among
 * them, run on that graph as on the forward one. So under recompute=full the re-run's input
 * all-gather and output reduce-scatter come in n = tp chunks, the same bytes as the plain
 * collectives and as Transformer Engine's chunks, with the symmetric-memory copy and partial sum
 * of the forward, tagged as a recomputation; no plain recompute collective is left.
 * validate-transformer, tp = 4, sp. */
Test(overlap, async_tp_decomposes_the_recomputed_forward)
{
  g_autoptr(ts_model) m = load_model("validate-transformer");
  g_autoptr(ts_topo) t = ring_topo(4, 1e6, 1e-6);
  t->chip.peak_flops = 1e6;
  const int n = 4;
  g_autoptr(ts_plan) as = make_plan(m, t, "tp=4,sp,recompute=full,tp-overlap=async", 8, 0);
  g_autoptr(ts_plan) te = make_plan(m, t, "tp=4,sp,recompute=full,tp-overlap=te", 8, 0);
  g_autoptr(ts_plan) no = make_plan(m, t, "tp=4,sp,recompute=full", 8, 0);
  g_autoptr(ts_trace) ta = trace_of(as);
  g_autoptr(ts_trace) tt = trace_of(te);
  g_autoptr(ts_trace) tn = trace_of(no);
  const char *ag = "block.0.fc1 recompute all-gather chunk",
             *rs = "block.0.fc2 recompute reduce-scatter chunk";
  double agb, rsb, tagb, trsb, pagb, prsb;
  cr_assert_eq(count_ops(ta, 0, TS_OP_COLL, ag, &agb), n);
  cr_assert_eq(count_ops(ta, 0, TS_OP_COLL, rs, &rsb), n);
  cr_assert_eq(count_ops(tt, 0, TS_OP_COLL, ag, &tagb), n);
  cr_assert_eq(count_ops(tt, 0, TS_OP_COLL, rs, &trsb), n);
  cr_assert_eq(count_ops(tn, 0, TS_OP_COLL, "block.0.fc1 recompute all-gather", &pagb), 1);
  cr_assert_eq(count_ops(tn, 0, TS_OP_COLL, "block.0.fc2 recompute reduce-scatter", &prsb), 1);
  cr_assert_float_eq(agb, tagb, 1e-9 * agb, "the same chunks as te");
  cr_assert_float_eq(rsb, trsb, 1e-9 * rsb, "the same chunks as te");
  cr_assert_float_eq(agb, pagb, 1e-9 * agb, "the plain gather's bytes");
  cr_assert_float_eq(rsb, prsb, 1e-9 * rsb, "the plain reduce-scatter's bytes");
  /* every recompute collective of the layer is a chunk */
  cr_assert_eq(count_ops(ta, 0, TS_OP_COLL, "block.0.fc1 recompute all-gather", NULL), n);
  cr_assert_eq(count_ops(ta, 0, TS_OP_COLL, "block.0.fc2 recompute reduce-scatter", NULL), n);
  ts_op b1, b2;
  const ts_op *c = op_labelled_in(ta, "block.0.fc1 recompute copy into symmetric memory", &b1);
  const ts_op *r = op_labelled_in(ta, "block.0.fc2 recompute sum of reduce-scatter partials", &b2);
  cr_assert(c != NULL && r != NULL);
  cr_assert_eq(c->t_phase, TS_PHASE_RECOMPUTE);
  cr_assert_eq(r->t_phase, TS_PHASE_RECOMPUTE);
  cr_assert_float_eq(c->mem_bytes, 2.0 * agb / n, 1e-9 * agb, "read and write the shard");
  cr_assert_float_eq(r->mem_bytes, (n + 1) * rsb / n, 1e-9 * rsb, "n partials read, one written");
}

Test(overlap, tp_overlap_backward_closed_form)
{
  /* tp-overlap (te) on a GPU: Transformer Engine's ring exchange does the same, from the own
   * shard. */
  backward_overlap_closed_form("tp-overlap", TRUE);
}

/* The DGX H100 cluster with `nodes` nodes (dgx-h100-64node.ini's [dim.net] resized). */
static ts_topo *h100_nodes(int nodes)
{
  g_autofree char *path = g_strdup_printf("%s/topologies/dgx-h100-64node.ini", TS_SOURCE_DIR);
  g_autoptr(GKeyFile) kf = g_key_file_new();
  cr_assert(g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, NULL));
  g_key_file_set_integer(kf, "dim.net", "size", nodes);
  GError *err = NULL;
  ts_topo *t = ts_topo_from_keyfile(kf, path, &err);
  cr_assert_not_null(t, "%s", err ? err->message : "");
  return t;
}

Test(overlap, mlperf_gpt3_175b_h100_runs_and_fits_in_80_GB)
{
  /* The MLPerf Training GPT-3 175B configurations on H100 (issue 13's acceptance): tp=4, pp=8,
   * interleaved with 12 model chunks per device, dp 16 to 112, FP8, distributed optimizer
   * (zero=1), sequence parallelism, tp-overlap (and dp-overlap), micro-batch 1. Each fits in
   * 80 GB with the runtime reserve (dp=16 is the largest: ZeRO-1 shards the optimizer over dp),
   * and the 512-GPU one runs: with tp-overlap faster than without. Global batch 1536 at dp=16;
   * at dp=112, 1792 (16 micro-batches per replica; 1536 does not divide by 112). */
  g_autoptr(ts_model) m = load_model("gpt3-175b");
  const int dps[] = {16, 112};
  const gint64 batch[] = {1536, 1792};
  double mem[2];
  for (int k = 0; k < 2; k++) {
    g_autoptr(ts_topo) t = h100_nodes(4 * dps[k]);
    g_autofree char *split = g_strdup_printf(
        "tp=4,pp=8,dp=%d,sp,zero=1,schedule=interleaved:12,precision=fp8,tp-overlap,dp-overlap",
        dps[k]);
    g_autoptr(ts_plan) p = make_plan(m, t, split, batch[k], 1);
    mem[k] = p->mem.total;
    cr_assert(p->mem.fits, "%s: %g GiB + reserve %g GiB of %g GiB", split, p->mem.total / 0x1p30,
              p->mem.reserve / 0x1p30, p->mem.capacity / 0x1p30);
    cr_assert_leq(p->mem.total + p->mem.reserve, 80.0 * 0x1p30);
    if (k == 0) {
      g_autoptr(ts_plan) a = make_plan(
          m, t, "tp=4,pp=8,dp=16,sp,zero=1,schedule=interleaved:12,precision=fp8", batch[k], 1);
      double sa = step_time(a), sb = step_time(p);
      cr_assert(isfinite(sb) && sb > 0);
      cr_assert_lt(sb, sa, "tp-overlap, dp-overlap: %g s vs %g s", sb, sa);
    }
  }
  cr_assert_lt(mem[1], mem[0], "a larger dp shards the optimizer state further");
}

Test(overlap, dp_overlap_gathers_each_layer_once)
{
  /* dp-overlap (distributed optimizer, Megatron's overlap-param-gather): the updated
   * parameters are gathered layer by layer beside the forward, Psi D bytes in all, instead
   * of one gather at the end of the step; step time not longer. */
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  g_autoptr(ts_plan) a = make_plan(m, t, "tp=4,dp=8,zero=1", 64, 0);
  g_autoptr(ts_plan) b = make_plan(m, t, "tp=4,dp=8,zero=1,dp-overlap", 64, 0);
  g_autoptr(ts_trace) tb = trace_of(b);
  double bytes;
  int n = count_ops(tb, 0, TS_OP_COLL, "updated param all-gather", &bytes);
  int with_params = 0;
  for (int i = 0; i < m->nlayers; i++)
    with_params += m->layers[i].params > 0;
  cr_assert_eq(n, with_params);
  double want = b->params_per_chip * m->dtype_bytes;
  cr_assert_float_eq(bytes, want, want * 1e-12);
  cr_assert_leq(step_time(b), step_time(a) * (1 + 1e-9));
}

Test(overlap, validator_refuses_what_it_does_not_execute)
{
  /* cp runs on real kernels (validate/context_parallel_ring_attention_matches_one_processor);
   * with hybrid sharding it is not executed yet, and says so. */
  run_result r = run("validate -m validate-transformer -t ring:4 -s cp=2,dp=2,zero=1,shard=2");
  cr_assert_eq(r.status, 2, "%s%s", r.out, r.err);
  cr_assert(strstr(r.err, "context parallelism (cp)") != NULL, "%s", r.err);
  run_free(&r);
  run_result ok = run("validate -m validate-transformer -t ring:4 -s cp=2,dp=2");
  cr_assert_eq(ok.status, 0, "%s%s", ok.out, ok.err);
  run_free(&ok);
}
