/* test_cost: the shape-aware compute cost (ts_cost): tile and wave quantisation, systolic
 * padding, memory-bound ops, launch floors, FP8; chip profiles (loading, overriding, errors,
 * the shipped ones); the shape's trace text; precision=fp8 in the planner. */
#include "ts_cost.h"
#include "ts_plan.h"
#include "ts_plan_priv.h"
#include "ts_run.h"
#include "ts_sweep.h"
#include "ts_test.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#define REL 1e-12

static gboolean close_to(double a, double b)
{
  return fabs(a - b) <= REL * fmax(fabs(a), fabs(b));
}

/* An A100-like chip: 108 SMs, 128x256 tiles, 312 TFLOP/s bf16, 2 TB/s. */
static ts_chip gpu(void)
{
  ts_chip c = {0};
  c.peak_flops = 312e12;
  c.peak_flops_fp8 = 624e12;
  c.memory_bw_Bps = 2e12;
  c.compute_efficiency = 0.5;
  c.memory_bw_efficiency = 0.8;
  c.compute_units = 108;
  c.tile_m = 128;
  c.tile_n = 256;
  c.kernel_launch_s = 10e-6;
  return c;
}

Test(cost, gpu_waves_closed_form)
{
  ts_chip c = gpu();
  /* 8192 x 4096: 64 x 16 = 1024 tiles of 128x256 over 108 SMs = 10 waves, 1024 / 1080 useful;
   * half tiles (128x128): 2048 tiles, 19 waves, 0.9 x 2048 / 2052 = 0.898 (not better). */
  double e = ts_cost_tile_efficiency(&c, 8192, 4096, 1024, 1);
  cr_assert(close_to(e, 1024.0 / 1080.0), "efficiency %.17g, expected 1024/1080", e);
  /* 1024 x 512: 8 x 2 = 16 big tiles in one wave (16 / 108), or 32 half tiles (0.9 x 32/108);
   * split-K fills the idle SMs: floor(108 / 16) = 6 slices of k, 96 of 108 SMs busy. */
  e = ts_cost_tile_efficiency(&c, 1024, 512, 1024, 1);
  cr_assert(close_to(e, 96.0 / 108.0), "efficiency %.17g, expected 96/108 (split-K)", e);
  /* A k overhead of 1024 halves a k = 1024 GEMM's rate. */
  c.gemm_k_overhead = 1024;
  double h = ts_cost_tile_efficiency(&c, 8192, 4096, 1024, 1);
  cr_assert(close_to(h, 0.5 * 1024.0 / 1080.0), "with k overhead %.17g", h);
}

/* Winograd F(2x2, 3x3) for a 3x3 stride-1 convolution: in fp32 on a GPU its GEMM time is
 * 36 / 16 = 2.25x shorter; in bf16 (tensor cores: implicit GEMM) and on a systolic chip it is
 * not. A compute-bound shape (no memory term): ResNet-50's layer3 conv2 at 64 images, 14 x 14 x
 * 64 rows, 256 output channels, k = 256 x 9. */
Test(cost, winograd_for_fp32_3x3_convolutions_only)
{
  ts_chip c = gpu();
  c.peak_flops_fp32 = 19.5e12;
  ts_op_shape s = {.oclass = TS_OPC_GEMM, .prec = TS_PRECISION_FP32, .kernels = 1};
  s.m = 14 * 14 * 64, s.n = 256, s.k = 256 * 9, s.batch = 1;
  double flops = 2 * s.m * s.n * s.k;
  double direct = ts_cost_device(&c, flops, 0, &s);
  s.conv3x3 = 1;
  double wino = ts_cost_device(&c, flops, 0, &s);
  cr_assert(close_to(direct / wino, 2.25), "fp32: %.17g / %.17g", direct, wino);
  s.prec = TS_PRECISION_BF16;
  double tc = ts_cost_device(&c, flops, 0, &s);
  s.conv3x3 = 0;
  cr_assert(close_to(tc, ts_cost_device(&c, flops, 0, &s)), "bf16: implicit GEMM, unchanged");
  ts_chip tpu = c;
  tpu.systolic = 128;
  s.prec = TS_PRECISION_FP32;
  double a = ts_cost_device(&tpu, flops, 0, &s);
  s.conv3x3 = 1;
  cr_assert(close_to(a, ts_cost_device(&tpu, flops, 0, &s)), "systolic: unchanged");
}

/* compute_efficiency_fp32: an fp32 GEMM on a chip with an fp32 rate runs at that fraction of
 * it (a GPU's CUDA cores), a bf16 GEMM at compute_efficiency (its tensor cores); 0 leaves fp32
 * at compute_efficiency. A compute-bound shape: the ratio is the efficiencies' ratio exactly. */
Test(cost, fp32_gemms_run_at_their_own_efficiency)
{
  ts_chip c = gpu();
  c.peak_flops_fp32 = 15.7e12;
  c.compute_efficiency = 0.8;
  ts_op_shape s = {.oclass = TS_OPC_GEMM, .prec = TS_PRECISION_FP32, .kernels = 1};
  s.m = 8192, s.n = 4096, s.k = 1024, s.batch = 1;
  double flops = 2 * s.m * s.n * s.k;
  double same = ts_cost_device(&c, flops, 0, &s);
  s.prec = TS_PRECISION_BF16;
  double tc = ts_cost_device(&c, flops, 0, &s);
  c.compute_efficiency_fp32 = 0.4;
  cr_assert(close_to(tc, ts_cost_device(&c, flops, 0, &s)), "bf16: unchanged");
  s.prec = TS_PRECISION_FP32;
  double own = ts_cost_device(&c, flops, 0, &s);
  cr_assert(close_to(own / same, 0.8 / 0.4), "fp32: %.17g / %.17g, expected 2", own, same);
  /* A chip without an fp32 rate runs fp32 at its 16-bit rate and efficiency. */
  c.peak_flops_fp32 = 0;
  double none = ts_cost_device(&c, flops, 0, &s);
  cr_assert(close_to(none, tc), "no fp32 rate: %.17g, expected %.17g", none, tc);
}

/* The planner marks dense 3x3 stride-1 convolutions only (ResNet-50's layer1.0.conv2, not its
 * 1x1 convolutions, not layer2.0.conv2's stride 2, not the 7x7 stem). */
Test(cost, planner_marks_3x3_stride_1_convolutions)
{
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  g_autoptr(ts_model) m = load_model("resnet50");
  ts_plan *p = make_plan(m, t, "dp=8", 256, 32);
  static const struct {
    const char *layer;
    double conv3x3;
  } want[] = {{"conv1", 0},
              {"layer1.0.conv1", 0},
              {"layer1.0.conv2", 1},
              {"layer2.0.conv2", 0},
              {"layer2.1.conv2", 1}};
  for (size_t j = 0; j < G_N_ELEMENTS(want); j++) {
    int i = 0;
    while (i < m->nlayers && strcmp(m->layers[i].name, want[j].layer) != 0)
      i++;
    cr_assert_lt(i, m->nlayers, "%s", want[j].layer);
    ts_op_shape s;
    ts_plan_layer_shape(p, i, 32, TS_PASS_FWD, &s);
    cr_assert_eq(s.conv3x3, want[j].conv3x3, "%s", want[j].layer);
  }
  ts_plan_free(p);
}

Test(cost, narrow_gemm_splits_k_and_is_memory_bound)
{
  /* A mixture-of-experts router, tokens x hidden times hidden x experts (Mixtral 8x7B: 4096 x
   * 4096 x 8), on the shipped H100 (132 SMs, 128x256 tiles, gemm_k_overhead 128). Its output
   * fills 32 tiles of 128 x 256 (16 of 256 x 128): one wave would leave 100 of the 132 SMs
   * idle, which put it at 35 us. cuBLAS / CUTLASS split k over the idle SMs: 16 tiles x 8
   * slices of 512 (or 32 x 4 of 1024, or 32 half tiles x 4), 4096 x 8 x 128 / (132 x 32768)
   * useful, x 512 / (512 + 128) for the shorter k loop. Its 2 x 4096 x 4096 x 8 FLOPs then
   * take 8.6 us, less than reading the 32 MiB input: the op is memory-bound,
   * (input + weights + output) / (0.9 x 3.35 TB/s) = 11.2 us. */
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  const ts_chip *c = &t->chip;
  double m = 4096, n = 8, k = 4096;
  double e = ts_cost_tile_efficiency(c, m, n, k, 1);
  double want = m * n * 8 / (132.0 * 256 * 128) * (512.0 / 640.0);
  cr_assert(close_to(e, want), "efficiency %.17g, expected %.17g", e, want);
  ts_op_shape s = {0};
  s.oclass = TS_OPC_GEMM;
  s.prec = TS_PRECISION_BF16;
  s.m = m, s.n = n, s.k = k, s.batch = 1;
  double flops = 2 * m * n * k, mem = 2 * (m * k + k * n + m * n);
  double got = ts_cost_device(c, flops, mem, &s);
  double tmem = mem / (3350e9 * 0.90);
  cr_assert(close_to(got, tmem), "router %.6g s, expected memory-bound %.6g s", got, tmem);
  cr_assert(flops / (989e12 * 0.585 * e) < tmem, "its FLOPs take less than its bytes");
}

Test(cost, tpu_pads_to_the_systolic_array)
{
  ts_chip c = {0};
  c.systolic = 128;
  double e = ts_cost_tile_efficiency(&c, 12, 100, 300, 1);
  double want = (100.0 / 128.0) * (300.0 / 384.0) * (12.0 / 16.0);
  cr_assert(close_to(e, want), "TPU efficiency %.17g, expected %.17g", e, want);
  c.systolic = 256; /* v6e */
  e = ts_cost_tile_efficiency(&c, 16, 512, 256, 1);
  cr_assert(close_to(e, 1.0), "aligned GEMM on 256: %.17g", e);
  ts_chip none = {0};
  e = ts_cost_tile_efficiency(&none, 7, 7, 7, 1);
  cr_assert(close_to(e, 1.0), "no tile model: %.17g", e);
}

/* A TPU's causal attention core is the Pallas kernel XLA runs (blocks of 512 keys): it skips the
 * key blocks wholly above the diagonal, (1 + 512 / S) / 2 of the scores, each block at the
 * array's padded shape (a head of 128 on a 256-wide MXU: half rate). A non-causal core, and a
 * GPU's unfused one, cost the whole S x S. */
Test(cost, tpu_causal_core_skips_blocks_above_the_diagonal)
{
  ts_chip c = {0};
  c.peak_flops = 918e12;
  c.compute_efficiency = 0.5;
  c.systolic = 256;
  const double S = 4096, d = 128, heads = 8;
  double core = 4.0 * S * S * d * heads;
  ts_op_shape s = {
      .oclass = TS_OPC_FLASH, .aq = S, .akv = S, .ad = d, .abatch = heads, .attn_flops = core};
  double full = ts_cost_device(&c, core, 0, &s);
  cr_assert(close_to(full, core / (918e12 * 0.5 * 0.5)), "non-causal %.17g", full);
  s.causal = 1;
  double causal = ts_cost_device(&c, core, 0, &s);
  double frac = 0.5 * (1.0 + 512.0 / S);
  cr_assert(close_to(causal, frac * full), "causal %.17g, expected %.4f x %.17g", causal, frac,
            full);
  /* The recipe's block (split attn-block=): the larger of the query and key blocks sets it,
   * (1 + B / S) / 2; v6e's Llama 3.1 recipes run 2,048 at 8,192 tokens (0.625, not 0.53). */
  s.attn_block = 2048;
  double big = ts_cost_device(&c, core, 0, &s);
  cr_assert(close_to(big, 0.75 * full), "block 2048 at 4096: %.17g, expected 0.75 x %.17g", big,
            full);
  s.attn_block = 8192; /* one block as long as the sequence: every score */
  cr_assert(close_to(ts_cost_device(&c, core, 0, &s), full), "block = S: the whole core");
  s.attn_block = 0;
  /* The Pallas backward's recomputed block matmuls (attn_rerun, set by the planner: 7/4 with
   * separate dQ and dK/dV kernels, 5/4 fused) scale the core's time, not its FLOPs. */
  s.attn_rerun = 7.0 / 4.0;
  cr_assert(close_to(ts_cost_device(&c, core, 0, &s), 1.75 * causal), "7 of 4 matmuls");
  s.attn_rerun = 0;
  /* Shorter than a block: every score is computed. */
  s.aq = s.akv = 256;
  double one = ts_cost_device(&c, core, 0, &s);
  s.causal = 0;
  cr_assert(close_to(one, ts_cost_device(&c, core, 0, &s)), "one block: the whole core");
  /* A GPU without a fused-core rate keeps the whole S x S (the planner marks it causal only
   * where flash_efficiency is given). */
  ts_chip g = gpu();
  ts_op_shape a = {
      .oclass = TS_OPC_ATTENTION, .aq = S, .akv = S, .ad = d, .abatch = heads, .attn_flops = core};
  double ga = ts_cost_device(&g, core, 0, &a);
  a.causal = 1;
  cr_assert(close_to(ga, ts_cost_device(&g, core, 0, &a)), "GPU unfused core unchanged");
}

Test(cost, op_classes_closed_forms)
{
  ts_chip c = gpu();
  ts_op_shape s = {.oclass = TS_OPC_GEMM, .kernels = 2, .m = 8192, .n = 4096, .k = 1024};
  double f = 2.0 * 8192 * 4096 * 1024, eff = 1024.0 / 1080.0;
  double t = ts_cost_compute(&c, f, 1e3, &s);
  double want = f / (312e12 * 0.5 * eff);
  cr_assert(close_to(t, want), "GEMM %.17g, expected %.17g", t, want);
  /* FP8: the GEMM at the FP8 rate. */
  s.prec = TS_PRECISION_FP8;
  t = ts_cost_compute(&c, f, 1e3, &s);
  cr_assert(close_to(t, want / 2), "FP8 GEMM %.17g, expected %.17g", t, want / 2);
  /* Memory-bound: bytes at the achieved bandwidth. */
  ts_op_shape m = {.oclass = TS_OPC_MEMORY, .kernels = 1};
  t = ts_cost_compute(&c, 1e6, 1e9, &m);
  cr_assert(close_to(t, 1e9 / (2e12 * 0.8)), "memory op %.17g", t);
  /* Launch floor: 3 kernels of 10 us. */
  m.kernels = 3;
  t = ts_cost_compute(&c, 1, 1, &m);
  cr_assert(close_to(t, 30e-6), "launch-bound op %.17g, expected 30 us", t);
  /* A transfer is a duration: no floor, raw bandwidth. */
  ts_op_shape x = {.oclass = TS_OPC_TRANSFER};
  t = ts_cost_compute(&c, 0, 1e3, &x);
  cr_assert(close_to(t, 1e3 / 2e12), "transfer %.17g", t);
  /* No shape: the roofline of old traces, with op_overhead_us as its floor. */
  c.op_overhead_s = 50e-6;
  t = ts_cost_compute(&c, 1e6, 0, NULL);
  cr_assert(close_to(t, 50e-6), "roofline floor %.17g", t);
  t = ts_cost_compute(&c, 312e12, 0, NULL);
  cr_assert(close_to(t, 2.0), "roofline %.17g, expected 2 s at efficiency 0.5", t);
  /* An op with no work costs nothing, whatever its launches. */
  t = ts_cost_compute(&c, 0, 0, &m);
  cr_assert(t == 0.0, "empty op %.17g", t);
}

/* The host launches ahead of the device: launch-heavy ops hide behind device-heavy ones, and
 * no kernel runs before it is launched. */
Test(cost, host_issues_ahead_of_the_device)
{
  double host = 0, now = 0;
  now += ts_cost_issue(&host, now, 5, 1, 1, FALSE); /* launched at 1, device to 6 */
  cr_assert(close_to(now, 6) && close_to(host, 1), "op 1 ends %g, host %g", now, host);
  now += ts_cost_issue(&host, now, 1, 10, 1, FALSE); /* launched at 11: runs 11-12 */
  cr_assert(close_to(now, 12) && close_to(host, 11), "op 2 ends %g, host %g", now, host);
  now += ts_cost_issue(&host, now, 2, 1, 1, FALSE); /* launched at 12, device 12-14 */
  cr_assert(close_to(now, 14) && close_to(host, 12), "op 3 ends %g, host %g", now, host);
  double d = ts_cost_issue(&host, now, 3, 0, 1, FALSE); /* a transfer: no launches */
  cr_assert(close_to(d, 3) && close_to(host, 12), "transfer %g, host %g", d, host);
  /* In isolation an op costs the larger of the two. */
  ts_chip c = gpu();
  ts_op_shape m = {.oclass = TS_OPC_MEMORY, .kernels = 3};
  double t = ts_cost_compute(&c, 1, 1, &m), l = ts_cost_launch(&c, 1, 1, &m);
  cr_assert(close_to(t, 30e-6) && close_to(l, 30e-6), "isolated %g, launch %g", t, l);
}

/* The dispatch queue's closed forms (ts_cost_issue), N ops in program order, each ready when
 * the one before it ends, from an idle host: kernels of d shorter than the launch h end at
 * N h + d (the host sets the step), longer ones at N d + h (the device does, the first launch
 * aside), whatever N. */
Test(cost, dispatch_queue_closed_forms)
{
  const double h = 20e-6;
  for (int n = 1; n <= 64; n *= 4) {
    double host = 0, now = 0, d = 7e-6;
    for (int i = 0; i < n; i++)
      now += ts_cost_issue(&host, now, d, h, 1, FALSE);
    cr_assert(close_to(now, n * h + d), "%d short ops end %.17g, expected %.17g", n, now,
              n * h + d);
    cr_assert(close_to(host, n * h), "%d short ops: host %.17g", n, host);
    host = now = 0, d = 300e-6;
    for (int i = 0; i < n; i++)
      now += ts_cost_issue(&host, now, d, h, 1, FALSE);
    cr_assert(close_to(now, n * d + h), "%d long ops end %.17g, expected %.17g", n, now, n * d + h);
  }
  /* One op of k kernels, device D split evenly: host-bound it ends one kernel after its last
   * launch (k h + D / k), device-bound at D. */
  double host = 0;
  double t = ts_cost_issue(&host, 0, 40e-6, 8 * h, 8, FALSE);
  cr_assert(close_to(t, 8 * h + 5e-6), "host-bound op of 8 kernels %.17g", t);
  host = 0;
  t = ts_cost_issue(&host, 0, 8e-3, 8 * h, 8, FALSE);
  cr_assert(close_to(t, 8e-3), "device-bound op of 8 kernels %.17g", t);
  /* A host behind the device delays an op by its backlog: ready at 1 ms, launched at 3 ms. */
  host = 3e-3 - h;
  t = ts_cost_issue(&host, 1e-3, 5e-3, h, 1, FALSE);
  cr_assert(close_to(1e-3 + t, 3e-3 + 5e-3), "op behind the host ends %.17g", 1e-3 + t);
}

/* A synchronisation point (the optimizer's .item(), ts_cost_op_syncs) resets the host's lead:
 * after long ops the host is far ahead and an op's launch is hidden; a syncing op's launch
 * waits for the device and is exposed, and the host's lead starts again from there. */
Test(cost, sync_point_resets_the_hosts_lead)
{
  const double h = 20e-6, d = 1e-3;
  double host = 0, now = 0;
  for (int i = 0; i < 10; i++)
    now += ts_cost_issue(&host, now, d, h, 1, FALSE);
  cr_assert(close_to(host, 10 * h) && close_to(now, 10 * d + h), "host %g, now %g", host, now);
  double t = ts_cost_issue(&host, now, d, h, 1, FALSE); /* launched long ago: d */
  cr_assert(close_to(t, d), "unsynchronised op %.17g", t);
  now += t;
  t = ts_cost_issue(&host, now, d, h, 1, TRUE); /* waits for the device, then its launch */
  cr_assert(close_to(t, h + d), "synchronised op %.17g, expected %.17g", t, h + d);
  cr_assert(close_to(host, now + h), "host after the sync %.17g", host);
  now += t;
  /* 60 short ops after it: the host's lead is now d (1 ms), not 11 (d - h); it covers 50 of
   * their launches, then the host sets the pace: they end at the host's last launch plus one
   * kernel. */
  double t0 = now, h0 = host;
  for (int i = 0; i < 60; i++)
    now += ts_cost_issue(&host, now, 1e-6, h, 1, FALSE);
  cr_assert(close_to(now, h0 + 60 * h + 1e-6), "after the sync %.17g, expected %.17g (from %g)",
            now, h0 + 60 * h + 1e-6, t0);
  /* Only the optimizer step synchronises. */
  ts_op_shape s = {.oclass = TS_OPC_OPTIMIZER, .kernels = 4};
  cr_assert(ts_cost_op_syncs(&s) && ts_cost_kernels(&s) == 4);
  s.oclass = TS_OPC_GEMM;
  cr_assert(!ts_cost_op_syncs(&s) && !ts_cost_op_syncs(NULL) && ts_cost_kernels(NULL) == 1);
}

/* launch=blocking (CUDA_LAUNCH_BLOCKING=1, BLOOM's launch script): the host waits for the device
 * and then for every kernel, so N ops in program order end at N (h + d) whatever their sizes,
 * where asynchronous launches give N h + d (short kernels) or N d + h (long ones). */
Test(cost, blocking_launches_add_host_and_device)
{
  const double h = 20e-6;
  for (int n = 1; n <= 64; n *= 4)
    for (int longer = 0; longer < 2; longer++) {
      double d = longer ? 300e-6 : 7e-6, host = 0, now = 0;
      for (int i = 0; i < n; i++)
        now += ts_cost_issue(&host, now, d, h, 1, TS_COST_SYNC_BLOCKING);
      cr_assert(close_to(now, n * (h + d)), "%d ops of %g s end %.17g, expected %.17g", n, d, now,
                n * (h + d));
      cr_assert(close_to(host, now), "%d ops: host %.17g, device %.17g", n, host, now);
    }
  /* An op of k kernels: its k launches and its device time, one after the other. */
  double host = 0;
  double t = ts_cost_issue(&host, 0, 8e-3, 8 * h, 8, TS_COST_SYNC_BLOCKING);
  cr_assert(close_to(t, 8 * h + 8e-3), "blocking op of 8 kernels %.17g", t);
  /* A host far ahead (an earlier asynchronous op) is pulled back to the device first. */
  host = 0;
  double now = ts_cost_issue(&host, 0, 1e-3, h, 1, FALSE);
  t = ts_cost_issue(&host, now, 1e-3, h, 1, TS_COST_SYNC_BLOCKING);
  cr_assert(close_to(t, h + 1e-3), "after an async op %.17g", t);
  /* The shape says it; in isolation an op costs the sum. */
  ts_chip c = gpu();
  ts_op_shape m = {.oclass = TS_OPC_MEMORY, .kernels = 3};
  double async = ts_cost_compute(&c, 1, 1e6, &m);
  cr_assert(ts_cost_op_syncs(&m) == FALSE);
  m.launch_blocking = 1;
  cr_assert(ts_cost_op_syncs(&m) == TS_COST_SYNC_BLOCKING);
  double blocking = ts_cost_compute(&c, 1, 1e6, &m);
  double want = ts_cost_device(&c, 1, 1e6, &m) + ts_cost_launch(&c, 1, 1e6, &m);
  cr_assert(close_to(blocking, want) && blocking > async, "blocking %g, async %g", blocking, async);
}

Test(cost, attention_core_stays_bf16_and_unfused_scores_add)
{
  ts_chip c = gpu();
  c.compute_units = 0; /* no tile model: efficiencies 1 */
  double core = 1e12, proj = 3e12;
  ts_op_shape s = {.oclass = TS_OPC_FLASH, .prec = TS_PRECISION_FP8, .kernels = 4};
  s.attn_flops = core;
  double t = ts_cost_compute(&c, core + proj, 0, &s);
  double want = proj / (624e12 * 0.5) + core / (312e12 * 0.5);
  cr_assert(close_to(t, want), "flash fp8 %.17g, expected %.17g", t, want);
  s.oclass = TS_OPC_ATTENTION;
  s.scores_bytes = 4e9;
  t = ts_cost_compute(&c, core + proj, 0, &s);
  want += 4e9 / (2e12 * 0.8);
  cr_assert(close_to(t, want), "unfused %.17g, expected %.17g", t, want);
}

/* attn-kernel=: cuDNN's fused attention over FlashAttention-2, the ratio of the FA3 paper's
 * H100 figures (head width 128): causal forward 518 / 319 at 4k, backward 518 / 318 at 8k; in
 * log2 of the length between published lengths; held at 512 and 16k; FA2 is 1 everywhere. */
Test(cost, attention_kernel_speedup_closed_form)
{
  cr_assert(ts_attn_kernel_speedup(TS_ATTN_KERNEL_FA2, FALSE, 4096) == 1.0);
  cr_assert(ts_attn_kernel_speedup(TS_ATTN_KERNEL_FA2, TRUE, 100) == 1.0);
  cr_assert(close_to(ts_attn_kernel_speedup(TS_ATTN_KERNEL_CUDNN, FALSE, 4096), 518.0 / 319));
  cr_assert(close_to(ts_attn_kernel_speedup(TS_ATTN_KERNEL_CUDNN, TRUE, 8192), 518.0 / 318));
  double mid = (484.0 / 298 + 518.0 / 319) / 2; /* halfway in log2 between 2k and 4k */
  cr_assert(close_to(ts_attn_kernel_speedup(TS_ATTN_KERNEL_CUDNN, FALSE, 2048 * sqrt(2)), mid));
  cr_assert(close_to(ts_attn_kernel_speedup(TS_ATTN_KERNEL_CUDNN, TRUE, 64), 305.0 / 214));
  cr_assert(close_to(ts_attn_kernel_speedup(TS_ATTN_KERNEL_CUDNN, FALSE, 131072), 539.0 / 335));
  cr_assert_str_eq(ts_attn_kernel_name(TS_ATTN_KERNEL_CUDNN), "cudnn");
  cr_assert_eq(ts_attn_kernel_parse("fa2"), TS_ATTN_KERNEL_FA2);
  cr_assert_eq(ts_attn_kernel_parse("fa3"), -1);
  cr_assert_eq(ts_attn_kernel_parse("triton"), TS_ATTN_KERNEL_TRITON);
  cr_assert_eq(ts_attn_kernel_parse("fa1"), TS_ATTN_KERNEL_FA1);
  /* The chip's own rates, not a table ratio (ts_plan.c writes them as flash_eff). */
  cr_assert(ts_attn_kernel_speedup(TS_ATTN_KERNEL_TRITON, TRUE, 4096) == 1.0);
}

/* The speedup divides the core's time only: projections and memory terms unchanged. */
Test(cost, attention_speedup_scales_the_core_alone)
{
  ts_chip c = gpu();
  c.compute_units = 0;
  double core = 1e12, proj = 3e12;
  ts_op_shape s = {.oclass = TS_OPC_FLASH, .kernels = 4, .attn_flops = core, .attn_speedup = 1.6};
  double t = ts_cost_compute(&c, core + proj, 0, &s);
  double want = proj / (312e12 * 0.5) + core / (312e12 * 0.5 * 1.6);
  cr_assert(close_to(t, want), "%.17g, expected %.17g", t, want);
  s.attn_speedup = 0; /* unset: as 1 */
  cr_assert(close_to(ts_cost_compute(&c, core + proj, 0, &s), (proj + core) / (312e12 * 0.5)));
}

/* flash_efficiency: a fused core runs at that fraction of the GEMM rate; a causal one computes
 * (1 + 128 / keys) / 2 of its tiles (the diagonal tiles whole, those above skipped). A
 * non-causal core computes them all; the stack's kernel speedup still scales it. Without the
 * key the core is costed as before (the tile model over the whole score matrix). */
Test(cost, flash_efficiency_and_causal_skip_closed_form)
{
  ts_chip c = gpu();
  c.compute_units = 0;
  double core = 1e12, proj = 3e12, keys = 4096;
  ts_op_shape s = {.oclass = TS_OPC_FLASH, .kernels = 4, .attn_flops = core, .akv = keys};
  double legacy = ts_cost_compute(&c, core + proj, 0, &s);
  cr_assert(close_to(legacy, (proj + core) / (312e12 * 0.5)), "no key: as before, %.17g", legacy);
  s.causal = 1; /* ignored without the key */
  cr_assert(close_to(ts_cost_compute(&c, core + proj, 0, &s), legacy));
  c.flash_efficiency = 0.4;
  double frac = 0.5 * (1.0 + 128.0 / keys);
  double t = ts_cost_compute(&c, core + proj, 0, &s);
  double want = proj / (312e12 * 0.5) + core * frac / (312e12 * 0.5 * 0.4);
  cr_assert(close_to(t, want), "causal %.17g, expected %.17g", t, want);
  s.causal = 0;
  t = ts_cost_compute(&c, core + proj, 0, &s);
  cr_assert(close_to(t, proj / (312e12 * 0.5) + core / (312e12 * 0.5 * 0.4)), "non-causal %.17g",
            t);
  s.causal = 1, s.attn_speedup = 1.6;
  t = ts_cost_compute(&c, core + proj, 0, &s);
  cr_assert(close_to(t, proj / (312e12 * 0.5) + core * frac / (312e12 * 0.5 * 0.4 * 1.6)));
  /* Keys shorter than a tile: the one diagonal tile is computed whole. */
  s.attn_speedup = 0, s.akv = 64;
  t = ts_cost_compute(&c, core + proj, 0, &s);
  cr_assert(close_to(t, proj / (312e12 * 0.5) + core / (312e12 * 0.5 * 0.4)), "%.17g", t);
}

/* fp8_split_accum_rate: an FP8 GEMM whose shape says split_accum (the backward's under torchao
 * and Transformer Engine) runs at that fraction of the FP8 rate; the flag changes nothing on a
 * bf16 GEMM, nor on a chip without the key, nor on the attention core (bf16 under FP8). */
Test(cost, fp8_split_accumulation_closed_form)
{
  ts_chip c = gpu();
  c.compute_units = 0;
  double f = 4e12;
  ts_op_shape s = {.oclass = TS_OPC_GEMM, .kernels = 1, .prec = TS_PRECISION_FP8};
  double fast = ts_cost_compute(&c, f, 0, &s);
  cr_assert(close_to(fast, f / (624e12 * 0.5)), "%.17g", fast);
  s.split_accum = 1;
  cr_assert(close_to(ts_cost_compute(&c, f, 0, &s), fast), "no key: the same rate");
  c.fp8_split_accum_rate = 0.87;
  double slow = ts_cost_compute(&c, f, 0, &s);
  cr_assert(close_to(slow, f / (624e12 * 0.5 * 0.87)), "%.17g", slow);
  s.prec = TS_PRECISION_BF16;
  cr_assert(close_to(ts_cost_compute(&c, f, 0, &s), f / (312e12 * 0.5)), "bf16 unchanged");
  /* A flash op under FP8: the projections slow down, the bf16 core does not. */
  c.flash_efficiency = 0.4;
  double core = 1e12;
  ts_op_shape a = {.oclass = TS_OPC_FLASH,
                   .kernels = 1,
                   .prec = TS_PRECISION_FP8,
                   .attn_flops = core,
                   .akv = 128,
                   .split_accum = 1};
  double t = ts_cost_compute(&c, f + core, 0, &a);
  cr_assert(close_to(t, f / (624e12 * 0.5 * 0.87) + core / (312e12 * 0.5 * 0.4)), "%.17g", t);
}

/* The planner marks an FP8 layer's gradient passes split_accum (torchao's and Transformer
 * Engine's dgrad / wgrad GEMMs run without fast accumulation), never its forward nor a bf16
 * run's. */
Test(cost, fp8_backward_shapes_say_split_accumulation)
{
  g_autoptr(ts_model) llama = load_model("llama3-8b");
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  cr_assert(t->chip.fp8_split_accum_rate > 0 && t->chip.fp8_split_accum_rate < 1,
            "the shipped H100 sets fp8_split_accum_rate");
  int mlp = -1;
  for (int i = 0; i < llama->nlayers && mlp < 0; i++)
    if (llama->layers[i].kind == TS_LAYER_DENSE && llama->layers[i].vocab == 0)
      mlp = i;
  cr_assert(mlp >= 0);
  const char *splits[] = {"dp=32,precision=fp8", "dp=32"};
  for (int k = 0; k < 2; k++) {
    ts_plan *p = make_plan(llama, t, splits[k], 64, 2);
    ts_op_shape s;
    ts_plan_layer_shape(p, mlp, 2, TS_PASS_FWD, &s);
    cr_assert(s.split_accum == 0, "%s forward", splits[k]);
    ts_pass passes[] = {TS_PASS_BWD, TS_PASS_DGRAD, TS_PASS_WGRAD};
    for (int j = 0; j < 3; j++) {
      ts_plan_layer_shape(p, mlp, 2, passes[j], &s);
      cr_assert(s.split_accum == (k == 0 ? 1 : 0), "%s pass %d", splits[k], (int)passes[j]);
    }
    ts_plan_free(p);
  }
}

/* The model marks a decoder's self-attention causal, an encoder's (BERT: causal = false) not;
 * the planner writes the flag into the shape only on a chip with flash_efficiency (the shipped
 * H100 profiles set it; a chip without it, here the H100 with it cleared as on the A100, costs
 * the core over the whole score matrix). */
Test(cost, causal_layers_and_the_shape_flag)
{
  g_autoptr(ts_model) llama = load_model("llama3-8b");
  g_autoptr(ts_model) bert = load_model("bert-large");
  int attn = -1;
  for (int i = 0; i < llama->nlayers && attn < 0; i++)
    if (llama->layers[i].kind == TS_LAYER_ATTENTION)
      attn = i;
  cr_assert(attn >= 0 && llama->layers[attn].causal);
  for (int i = 0; i < bert->nlayers; i++)
    cr_assert(!bert->layers[i].causal, "bert layer %s", bert->layers[i].name);
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  cr_assert(t->chip.flash_efficiency > 0, "the shipped H100 sets flash_efficiency");
  t->chip.flash_efficiency = 0;
  ts_plan *p = make_plan(llama, t, "dp=32", 64, 2);
  ts_op_shape s;
  ts_plan_layer_shape(p, attn, 2, TS_PASS_FWD, &s);
  cr_assert(s.causal == 0);
  ts_plan_free(p);
  t->chip.flash_efficiency = 0.4;
  p = make_plan(llama, t, "dp=32", 64, 2);
  ts_plan_layer_shape(p, attn, 2, TS_PASS_BWD, &s);
  cr_assert(s.causal == 1);
  ts_plan_free(p);
}

/* flash_efficiency is a what-if key (--vary, a measurement row's vary column): 0 (off) and a
 * fraction are accepted, the causal core then costs less; a negative value is one line. */
Test(cost, flash_efficiency_what_if)
{
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(GError) e = NULL;
  g_autoptr(ts_vary) v = ts_vary_parse("flash_efficiency=0,0.41", &e);
  cr_assert_not_null(v, "%s", e ? e->message : "");
  g_autoptr(ts_topo) off = ts_vary_apply(v, 0, t, &e);
  g_autoptr(ts_topo) on = ts_vary_apply(v, 1, t, &e);
  cr_assert_not_null(off);
  cr_assert_not_null(on, "%s", e ? e->message : "");
  cr_assert(off->chip.flash_efficiency == 0 && on->chip.flash_efficiency == 0.41);
  g_autoptr(ts_vary) bad = ts_vary_parse("flash_efficiency=-1", &e);
  cr_assert_null(bad);
}

/* A what-if that changes a fitted rate of a calibrated chip (--vary, a measurement row's vary
 * column) runs another chip than the fitted one: its MFU is an upper bound, as a topology's own
 * [chip] key makes it (ts_topo.c). Capacity, the network, stragglers and a factor of 1 keep the
 * fit. Before, every varied copy kept the profile's calibration. */
Test(cost, what_if_of_a_fitted_rate_is_uncalibrated)
{
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  cr_assert(!t->chip.uncalibrated, "the shipped A100 profile is calibrated");
  static const struct {
    const char *vary;
    gboolean calibrated;
  } rows[] = {{"compute_efficiency=1.0", FALSE},
              {"peak_tflops=x2", FALSE},
              {"memory_bandwidth_GBps=x0.5", FALSE},
              {"flash_efficiency=0", FALSE},
              {"compute_efficiency=x1", TRUE},
              {"memory_GiB=40", TRUE},
              {"link_bandwidth_GBps=x2", TRUE},
              {"dim.node.latency_us=9", TRUE},
              {"straggler=0.9", TRUE}};
  for (gsize i = 0; i < G_N_ELEMENTS(rows); i++) {
    g_autoptr(GError) e = NULL;
    g_autoptr(ts_vary) v = ts_vary_parse(rows[i].vary, &e);
    cr_assert_not_null(v, "%s: %s", rows[i].vary, e ? e->message : "");
    g_autoptr(ts_topo) w = ts_vary_apply(v, 0, t, &e);
    cr_assert_not_null(w, "%s: %s", rows[i].vary, e ? e->message : "");
    gboolean got = !w->chip.uncalibrated;
    cr_expect_eq(got, rows[i].calibrated, "--vary %s: calibrated %d", rows[i].vary, got);
  }
}

/* The index of the model's first attention layer (the test fails without one). */
static int first_attention(const ts_model *m)
{
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].kind == TS_LAYER_ATTENTION)
      return i;
  cr_assert_fail("%s has no attention layer", m->name);
  return -1;
}

/* The split option sets every fused core's speedup, the backward's in backward passes, and
 * nothing in the default (the trace's shapes stay as before); a bad value is one line. */
Test(cost, attention_kernel_split_option)
{
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_model) m = load_model("llama3-8b");
  int attn = first_attention(m);
  ts_plan *p = make_plan(m, t, "dp=32,attn-kernel=cudnn", 64, 2);
  ts_op_shape s;
  ts_plan_layer_shape(p, attn, 2, TS_PASS_FWD, &s);
  cr_assert_eq(s.oclass, TS_OPC_FLASH);
  cr_assert(close_to(s.attn_speedup, 529.0 / 333), "forward at 8k keys: %g", s.attn_speedup);
  ts_plan_layer_shape(p, attn, 2, TS_PASS_BWD, &s);
  cr_assert(close_to(s.attn_speedup, 518.0 / 318), "backward at 8k keys: %g", s.attn_speedup);
  cr_assert_str_eq(p->split_text, "dp=32,attn-kernel=cudnn"); /* shown in every output */
  ts_plan_free(p);
  p = make_plan(m, t, "dp=32", 64, 2);
  ts_plan_layer_shape(p, attn, 2, TS_PASS_BWD, &s);
  cr_assert(s.attn_speedup == 0, "default fa2 leaves the shape as before: %g", s.attn_speedup);
  ts_plan_free(p);
  g_autoptr(GError) e = NULL;
  g_autoptr(ts_split) bad = ts_split_parse("dp=8,attn-kernel=fa3", &e);
  cr_assert_null(bad);
  cr_assert(strstr(e->message, "attn-kernel=fa3") != NULL && strstr(e->message, "cudnn") != NULL &&
                strstr(e->message, "triton") != NULL,
            "%s", e->message);
}

/* attn-kernel=triton on the A100: the core runs at the profile's own rate for FlashAttention's
 * Triton kernel (flash_efficiency_triton 0.27 of 312 x 0.79 TFLOP/s, set from the FlashAttention-2
 * paper's Figure 4), with the causal skip, whatever the chip's own flash_efficiency (it has, since
 * December 2026, flash_efficiency 0.41 for the default fa2). Llama 3 8B, one 8,192-token sequence:
 * the core is 4 x 8192^2 x 4096 FLOPs forward, twice that backward, of which (1 + 128 / 8192) / 2
 * are computed, at 66.55 TFLOP/s times the kernel's published shape at head width 128 and 8,192
 * keys (its 78 TFLOP/s bar x (1 + 128 / 8192) over the 8 bars' geometric mean, 78.879: 1.00431),
 * 25.06 ms for forward and backward together, split as the paper says FlashAttention-2 outruns
 * the kernel (1.4x forward, 2x backward, each pass weighted by its FLOP count 1 : 2.5): 1.4 : 5,
 * the forward 1.4 / 6.4 = 0.21875 of the pair, 5.48 ms (the rate x 6.4 / 4.2), the backward
 * 19.58 ms (x 12.8 / 15). The default kernel (fa2) is unchanged there; on a chip whose profile
 * has no Triton rate (H100) the option is refused in one line naming the key. */
Test(cost, a100_triton_kernel_closed_form)
{
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  g_autoptr(ts_model) m = load_model("llama3-8b");
  cr_assert(t->chip.flash_efficiency == 0.41 && t->chip.flash_efficiency_triton == 0.27 &&
            t->chip.flash_efficiency_fa1 == 0.29);
  int attn = first_attention(m);
  ts_plan *p = make_plan(m, t, "dp=8,attn-kernel=triton", 8, 1);
  ts_op_shape s;
  ts_plan_layer_shape(p, attn, 1, TS_PASS_FWD, &s);
  double core = 4.0 * 8192 * 8192 * 4096;
  double shape = 78.0 * (1.0 + 128.0 / 8192) / 78.879087681221;
  cr_assert(close_to(ts_attn_kernel_shape(TS_ATTN_KERNEL_TRITON, 128, 8192), shape));
  cr_assert(s.oclass == TS_OPC_FLASH && s.causal == 1 &&
                close_to(s.flash_eff, 0.27 * shape * 6.4 / 4.2) && s.attn_speedup == 0 &&
                close_to(s.attn_flops, core),
            "class %d causal %g flash_eff %g core %g", s.oclass, s.causal, s.flash_eff,
            s.attn_flops);
  double flops = 1e13; /* the op's FLOPs: projections and core */
  double with = ts_cost_device(&t->chip, flops, 0, &s);
  ts_op_shape g = s;
  g.attn_flops = 0; /* the same op without its core: the projections alone */
  double without = ts_cost_device(&t->chip, flops - core, 0, &g);
  double both = 3.0 * core * 0.5 * (1.0 + 128.0 / 8192) / (312e12 * 0.79 * 0.27 * shape);
  double want = both * 1.4 / 6.4;
  cr_assert(fabs(with - without - want) <= 1e-9 * want && fabs(want - 5.48e-3) < 0.01e-3,
            "forward core %.17g s, expected %.17g s", with - without, want);
  /* The backward: 5 / 6.4 of the pair, so forward + backward take the published rate's time. */
  ts_plan_layer_shape(p, attn, 1, TS_PASS_BWD, &s);
  cr_assert(close_to(s.attn_flops, 2.0 * core) && close_to(s.flash_eff, 0.27 * shape * 12.8 / 15.0),
            "backward flash_eff %g", s.flash_eff);
  g = s;
  g.attn_flops = 0;
  double bwd = ts_cost_device(&t->chip, 2.0 * flops, 0, &s) -
               ts_cost_device(&t->chip, 2.0 * flops - 2.0 * core, 0, &g);
  cr_assert(fabs(bwd - 5.0 / 1.4 * want) <= 1e-9 * want && fabs(want + bwd - both) <= 1e-9 * both &&
                fabs(bwd - 19.58e-3) < 0.01e-3 && fabs(both - 25.06e-3) < 0.01e-3,
            "backward core %.17g s, expected %.17g s", bwd, 5.0 / 1.4 * want);
  /* Selective recomputation re-runs the forward core at the forward's rate (recompute=full
   * re-runs the forward pass itself). */
  ts_plan_layer_shape(p, attn, 1, TS_PASS_ATTN_RECOMPUTE, &s);
  cr_assert(close_to(s.flash_eff, 0.27 * shape * 6.4 / 4.2), "recompute flash_eff %g", s.flash_eff);
  ts_plan_free(p);
  /* FlashAttention 1 has no published forward / backward split: its pair follows the FLOP count,
   * 1 : 2.5 (the forward at 3.5 / 3 of its rate, the backward at 3.5 / 3.75). */
  p = make_plan(m, t, "dp=8,attn-kernel=fa1", 8, 1);
  ts_plan_layer_shape(p, attn, 1, TS_PASS_FWD, &s);
  double fa1 = ts_attn_kernel_shape(TS_ATTN_KERNEL_FA1, 128, 8192);
  cr_assert(close_to(s.flash_eff, 0.29 * fa1 * 3.5 / 3), "fa1 forward flash_eff %g", s.flash_eff);
  ts_plan_layer_shape(p, attn, 1, TS_PASS_BWD, &s);
  cr_assert(close_to(s.flash_eff, 0.29 * fa1 * 3.5 / 3.75), "fa1 backward flash_eff %g",
            s.flash_eff);
  ts_plan_free(p);
  p = make_plan(m, t, "dp=8", 8, 1);
  ts_plan_layer_shape(p, attn, 1, TS_PASS_FWD, &s);
  cr_assert(s.oclass == TS_OPC_FLASH && s.causal == 1 && s.flash_eff == 0,
            "fa2 on the A100: the chip's own flash_efficiency (class %d causal %g eff %g)",
            s.oclass, s.causal, s.flash_eff);
  ts_plan_free(p);
  g_autoptr(ts_topo) h = load_topo("dgx-h100-4node");
  g_autoptr(GError) e = plan_refusal(m, h, "dp=32,attn-kernel=triton", 32, 1);
  cr_assert(strstr(e->message, "flash_efficiency_triton") != NULL &&
                strchr(e->message, '\n') == NULL,
            "%s", e->message);
}

/* ts_attn_kernel_shape: the Triton and FlashAttention 1 rates follow their published A100 bars
 * (Dao 2023, Figure 4, causal) in head width and length, relative to the 8 bars at 2k-16k the
 * profile's one number is the geometric mean of. Closed forms from the bars: held beyond 16k and
 * below 512 tokens and outside widths 64-128, linear in log2(keys) and in the width between; the
 * 8 bars' shapes multiply to 1; FlashAttention-2 and cuDNN (rates of their own) are 1. */
Test(cost, attn_kernel_shape_follows_the_published_bars)
{
  static const double tri[2][6] = {{59, 75, 79, 76, 79, 80}, {50, 61, 68, 74, 78, 80}};
  static const double len[6] = {512, 1024, 2048, 4096, 8192, 16384};
  double lg = 0;
  for (int w = 0; w < 2; w++)
    for (int i = 2; i < 6; i++)
      lg += log(tri[w][i] * (1.0 + 128.0 / len[i]));
  double mean = exp(lg / 8), prod = 1;
  for (int w = 0; w < 2; w++)
    for (int i = 2; i < 6; i++)
      prod *= ts_attn_kernel_shape(TS_ATTN_KERNEL_TRITON, 64 + 64 * w, len[i]);
  cr_assert(fabs(prod - 1.0) < 1e-12, "the 8 bars' shapes multiply to %.15g", prod);
  double at16k = 80.0 * (1.0 + 128.0 / 16384) / mean;
  cr_assert(close_to(ts_attn_kernel_shape(TS_ATTN_KERNEL_TRITON, 128, 65536), at16k));
  cr_assert(close_to(ts_attn_kernel_shape(TS_ATTN_KERNEL_TRITON, 256, 16384), at16k));
  cr_assert(close_to(ts_attn_kernel_shape(TS_ATTN_KERNEL_TRITON, 64, 128), 59.0 * 1.25 / mean));
  /* Half-way in log2 between 2k and 4k (2,896.3 keys), width 96 half-way between 64 and 128. */
  double w64 = (79.0 * (1.0 + 128.0 / 2048) + 76.0 * (1.0 + 128.0 / 4096)) / 2;
  double w128 = (68.0 * (1.0 + 128.0 / 2048) + 74.0 * (1.0 + 128.0 / 4096)) / 2;
  double got = ts_attn_kernel_shape(TS_ATTN_KERNEL_TRITON, 96, 2048 * sqrt(2.0));
  cr_assert(close_to(got, (w64 + w128) / 2 / mean), "%.15g", got);
  /* The short end: the 512-token bar at width 128 is 0.79 of the mean. */
  cr_assert(fabs(ts_attn_kernel_shape(TS_ATTN_KERNEL_TRITON, 128, 512) - 0.792) < 0.001);
  cr_assert(ts_attn_kernel_shape(TS_ATTN_KERNEL_FA2, 128, 512) == 1.0);
  cr_assert(ts_attn_kernel_shape(TS_ATTN_KERNEL_CUDNN, 128, 512) == 1.0);
  /* FlashAttention 1 rises with the length: width 64, 0.86 of its mean at 512, 1.16 at 16k. */
  cr_assert(fabs(ts_attn_kernel_shape(TS_ATTN_KERNEL_FA1, 64, 512) - 0.857) < 0.001);
  cr_assert(fabs(ts_attn_kernel_shape(TS_ATTN_KERNEL_FA1, 64, 16384) - 1.156) < 0.001);
}

/* The table behind ts_attn_kernel_shape is the published figure's: every causal Triton and
 * FlashAttention 1 bar of data/published/flash-attention/fa2-a100-fwd-bwd.csv, on its computed
 * tiles (x (1 + 128 / S)), over the geometric mean of the file's 8 bars at 2k-16k, is the shape
 * at its head width and length (and the flash_efficiency_triton / _fa1 of the A100 profile, 0.27
 * and 0.29, are that mean in trainsim's FLOP count over 312 x 0.79 TFLOP/s, to 0.01). */
Test(cost, attn_kernel_shape_is_the_published_file)
{
  g_autofree char *path = g_build_filename(TS_SOURCE_DIR, "data", "published", "flash-attention",
                                           "fa2-a100-fwd-bwd.csv", NULL);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(path, &text, NULL, NULL), "%s", path);
  static const char *const method[2] = {"fa-triton", "fa1"};
  static const ts_attn_kernel kernel[2] = {TS_ATTN_KERNEL_TRITON, TS_ATTN_KERNEL_FA1};
  static const double profile[2] = {0.27, 0.29};
  for (int k = 0; k < 2; k++) {
    double hd[12], len[12], bar[12], lg = 0;
    int n = 0, in_mean = 0;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (int i = 0; lines[i] != NULL; i++) {
      g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
      if (g_strv_length(f) != 5 || strcmp(f[0], method[k]) != 0 || strcmp(f[1], "true") != 0)
        continue;
      cr_assert(n < 12);
      hd[n] = g_ascii_strtod(f[2], NULL), len[n] = g_ascii_strtod(f[3], NULL);
      bar[n] = g_ascii_strtod(f[4], NULL) * (1.0 + 128.0 / len[n]);
      if (len[n] >= 2048) {
        lg += log(bar[n]);
        in_mean++;
      }
      n++;
    }
    cr_assert(n == 12 && in_mean == 8, "%s: %d causal bars, %d at 2k-16k", method[k], n, in_mean);
    double mean = exp(lg / 8);
    for (int i = 0; i < n; i++)
      cr_assert(close_to(ts_attn_kernel_shape(kernel[k], hd[i], len[i]), bar[i] / mean),
                "%s width %g at %g: %g, the file %g", method[k], hd[i], len[i],
                ts_attn_kernel_shape(kernel[k], hd[i], len[i]), bar[i] / mean);
    double frac = 6.0 / 3.5 * 0.5 * mean / (312.0 * 0.79);
    cr_assert(fabs(frac - profile[k]) < 0.01, "%s: the bars' mean is %g of the GEMM rate",
              method[k], frac);
  }
}

/* fp8-cache: a weight's FP8 cast (2D + 1 bytes an element) and its transposed copy (2 bytes)
 * are paid once per step, 1 / n_micro of them per micro-batch; the input's and the output
 * gradient's casts and transposes stay per micro-batch. Llama 3.1 8B fc2 on 8,192-token
 * sequences, 2 a micro-batch, 4 micro-batches a replica. */
Test(cost, fp8_cache_pays_weight_casts_once_per_step)
{
  g_autoptr(ts_topo) t = load_topo("dgx-h100-4node");
  g_autoptr(ts_model) m = load_model("llama3-8b");
  int fc2 = -1;
  for (int i = 0; i < m->nlayers && fc2 < 0; i++)
    if (strcmp(m->layers[i].name, "block.0.fc2") == 0)
      fc2 = i;
  cr_assert(fc2 >= 0);
  double M = 2 * 8192, K = 14336, N = 4096, nm = 4;
  ts_plan *p = make_plan(m, t, "dp=32,zero=3,precision=fp8,fp8-cache", 256, 2);
  cr_assert_eq(p->n_micro, 4);
  cr_assert(p->fp8_cache);
  cr_assert(strstr(p->split_text, ",fp8-cache") != NULL, "%s", p->split_text);
  ts_op_shape s;
  ts_plan_layer_shape(p, fc2, 2, TS_PASS_FWD, &s);
  cr_assert(close_to(s.elem_bytes, 5 * (M * K + K * N / nm)), "forward %g", s.elem_bytes);
  ts_plan_layer_shape(p, fc2, 2, TS_PASS_DGRAD, &s);
  cr_assert(close_to(s.elem_bytes, 5 * M * N + 2 * K * N / nm), "input gradient %g", s.elem_bytes);
  ts_plan_layer_shape(p, fc2, 2, TS_PASS_WGRAD, &s);
  cr_assert(close_to(s.elem_bytes, 2 * (M * K + M * N)), "weight gradient %g", s.elem_bytes);
  ts_plan_free(p);
  p = make_plan(m, t, "dp=32,zero=3,precision=fp8", 256, 2);
  ts_plan_layer_shape(p, fc2, 2, TS_PASS_FWD, &s);
  cr_assert(close_to(s.elem_bytes, 5 * (M * K + K * N)), "without the cache %g", s.elem_bytes);
  ts_plan_free(p);
  g_autoptr(GError) e = NULL;
  g_autoptr(ts_split) bad = ts_split_parse("dp=8,fp8-cache=maybe", &e);
  cr_assert_null(bad);
  cr_assert(strstr(e->message, "fp8-cache=maybe") != NULL, "%s", e->message);
}

/* ---- chip profiles ------------------------------------------------------------------------ */

static char *tmpdir_with(const char *profile_text, const char *topo_text)
{
  g_autoptr(GError) error = NULL;
  char *dir = g_dir_make_tmp("ts_cost_XXXXXX", &error);
  cr_assert_not_null(dir);
  g_autofree char *chips = g_build_filename(dir, "chips", NULL);
  g_mkdir(chips, 0755);
  g_autofree char *p = g_build_filename(chips, "x.ini", NULL);
  g_autofree char *t = g_build_filename(dir, "t.ini", NULL);
  cr_assert(g_file_set_contents(p, profile_text, -1, NULL));
  cr_assert(g_file_set_contents(t, topo_text, -1, NULL));
  return dir;
}

static void rm_tmpdir(char *dir)
{
  g_autofree char *p = g_build_filename(dir, "chips", "x.ini", NULL);
  g_autofree char *c = g_build_filename(dir, "chips", NULL);
  g_autofree char *t = g_build_filename(dir, "t.ini", NULL);
  g_unlink(p);
  g_unlink(t);
  g_rmdir(c);
  g_rmdir(dir);
  g_free(dir);
}

#define PROFILE                                                                                    \
  "[chip]\nname = X\npeak_tflops_bf16 = 100\npeak_tflops_fp8 = 200\nmemory_GiB = 8\n"              \
  "memory_bandwidth_GBps = 1000\ncompute_efficiency = 0.5\nkernel_launch_us = 7\n"                 \
  "gemm_tile = 64x128\ncompute_units = 10\ncalibrated = false\n"
#define DIMX "[dim.x]\nsize = 2\nshape = ring\nlink_bandwidth_GBps = 10\nlatency_us = 1\n"

Test(profile, loads_and_topology_keys_override)
{
  char *dir = tmpdir_with(PROFILE, "[chip]\nprofile = x\ncompute_efficiency = 0.25\n" DIMX);
  g_autofree char *t = g_build_filename(dir, "t.ini", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_topo) topo = ts_topo_load(t, &error);
  cr_assert_not_null(topo, "%s", error != NULL ? error->message : "");
  const ts_chip *c = &topo->chip;
  cr_assert(c->peak_flops == 100e12 && c->peak_flops_fp8 == 200e12, "peaks");
  cr_assert(c->compute_efficiency == 0.25, "override: %g", c->compute_efficiency);
  cr_assert(close_to(c->kernel_launch_s, 7e-6) && c->tile_m == 64 && c->tile_n == 128 &&
                c->compute_units == 10,
            "profile keys");
  cr_assert(c->uncalibrated, "calibrated = false read");
  cr_assert_str_eq(c->profile, "x");
  g_autoptr(ts_topo) copy = ts_topo_copy(topo);
  cr_assert_str_eq(copy->chip.profile, "x");
  rm_tmpdir(dir);
}

static void expect_error(const char *profile, const char *topo, const char *needle)
{
  char *dir = tmpdir_with(profile, topo);
  g_autofree char *t = g_build_filename(dir, "t.ini", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_topo) x = ts_topo_load(t, &error);
  cr_assert_null(x, "expected an error containing '%s'", needle);
  cr_assert(strstr(error->message, needle) != NULL && strchr(error->message, '\n') == NULL,
            "message '%s' lacks '%s' (or is not one line)", error->message, needle);
  rm_tmpdir(dir);
}

Test(profile, errors_name_the_file_and_the_key)
{
  expect_error(PROFILE, "[chip]\nprofile = nope\n" DIMX, "[chip] profile='nope'");
  /* Both places looked in are named; it said "DIR/chips/nope.ini: cannot read" only. */
  expect_error(PROFILE, "[chip]\nprofile = nope\n" DIMX,
               "chips/nope.ini, and no topologies/chips/nope.ini shipped (searched ");
  /* A path without .ini was taken for a name: "DIR/chips//dev/zero.ini: cannot read". */
  expect_error(PROFILE, "[chip]\nprofile = /dev/zero\n" DIMX,
               "[chip] profile='/dev/zero': expected a chip profile name "
               "(topologies/chips/NAME.ini) or a path to a profile file ending in .ini");
  expect_error(PROFILE "bogus = 1\n", "[chip]\nprofile = x\n" DIMX, "chips/x.ini: [chip] bogus");
  expect_error("[chip]\nname = X\npeak_tflops = 1\npeak_tflops_bf16 = 2\nmemory_GiB = 1\n"
               "memory_bandwidth_GBps = 1\n",
               "[chip]\nprofile = x\n" DIMX, "[chip] peak_tflops: given with peak_tflops_bf16");
  expect_error(PROFILE, "[chip]\nprofile = x\ngemm_tile = 128\n" DIMX, "[chip] gemm_tile='128'");
  expect_error(PROFILE, "[chip]\nprofile = x\ncalibrated = maybe\n" DIMX,
               "[chip] calibrated='maybe'");
  expect_error("[chip]\nprofile = y\n", "[chip]\nprofile = x\n" DIMX, "a profile cannot name");
}

/* The topology text's chip, loaded as from /nonexistent/t.ini (a profile path must be absolute). */
static gboolean chip_calibrated(const char *text)
{
  g_autoptr(GKeyFile) kf = g_key_file_new();
  cr_assert(g_key_file_load_from_data(kf, text, (gsize)-1, G_KEY_FILE_NONE, NULL));
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_topo) t = ts_topo_from_keyfile(kf, "/nonexistent/t.ini", &error);
  cr_assert_not_null(t, "%s", error != NULL ? error->message : "");
  return !t->chip.uncalibrated;
}

/* A chip is calibrated only when its file or profile says calibrated = true: an inline [chip]
 * without the key (a datasheet peak at compute_efficiency 1.0, say) was taken as calibrated
 * until December 2026, and run printed its MFU with no upper-bound mark. */
Test(profile, a_chip_is_calibrated_only_when_a_file_says_so)
{
#define INLINE                                                                                     \
  "[chip]\nname = X\npeak_tflops = 100\nmemory_GiB = 8\nmemory_bandwidth_GBps = 1000\n"            \
  "compute_efficiency = 1.0\n"
  gboolean none = chip_calibrated(INLINE DIMX);
  cr_expect(!none, "an inline [chip] with no calibrated key is taken as calibrated");
  gboolean yes = chip_calibrated(INLINE "calibrated = true\n" DIMX);
  cr_expect(yes, "calibrated = true not read");
  gboolean no = chip_calibrated(INLINE "calibrated = false\n" DIMX);
  cr_expect(!no, "calibrated = false not read");
#undef INLINE
  g_autofree char *cal = g_strdup_printf(
      "[chip]\nprofile = %s/topologies/chips/a100-sxm4-80gb.ini\n" DIMX, TS_SOURCE_DIR);
  gboolean shipped = chip_calibrated(cal);
  cr_expect(shipped, "the calibrated A100 80GB profile reads as uncalibrated");
  g_autofree char *uncal = g_strdup_printf(
      "[chip]\nprofile = %s/topologies/chips/h200-sxm-141gb.ini\n" DIMX, TS_SOURCE_DIR);
  gboolean unshipped = chip_calibrated(uncal);
  cr_expect(!unshipped, "the uncalibrated H200 profile reads as calibrated");
  /* A profile of the user's own with no key is not calibrated either. */
  char *dir = tmpdir_with("[chip]\nname = X\npeak_tflops_bf16 = 100\nmemory_GiB = 8\n"
                          "memory_bandwidth_GBps = 1000\n",
                          "[chip]\nprofile = x\n" DIMX);
  g_autofree char *t = g_build_filename(dir, "t.ini", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_topo) topo = ts_topo_load(t, &error);
  cr_assert_not_null(topo, "%s", error != NULL ? error->message : "");
  cr_expect(topo->chip.uncalibrated, "a profile with no calibrated key reads as calibrated");
  rm_tmpdir(dir);
  /* A topology that changes a rate of a calibrated profile runs another chip than the fitted
   * one: calibrated only when it says so itself. Price, power and capacity keep the fit. */
  static const struct {
    const char *own;
    gboolean calibrated;
  } over[] = {{"", TRUE},
              {"price_per_hour = 2\ntdp_W = 400\nmemory_GiB = 40\n", TRUE},
              {"compute_efficiency = 1.0\n", FALSE},
              {"kernel_launch_us = 0\n", FALSE},
              {"compute_efficiency = 1.0\ncalibrated = true\n", TRUE},
              /* A copied profile line is no change (before, any such key read as a refit). */
              {"compute_efficiency = 0.790\n", TRUE},
              {"peak_tflops = 312.0\n", TRUE},
              {"gemm_tile = 128x256\n", TRUE},
              {"peak_tflops = 312.5\n", FALSE}};
  for (gsize i = 0; i < G_N_ELEMENTS(over); i++) {
    g_autofree char *text =
        g_strdup_printf("[chip]\nprofile = %s/topologies/chips/a100-sxm4-80gb.ini\n%s" DIMX,
                        TS_SOURCE_DIR, over[i].own);
    gboolean got = chip_calibrated(text);
    cr_expect_eq(got, over[i].calibrated, "calibrated profile with '%s': calibrated %d",
                 over[i].own, got);
  }
}

/* Every shipped profile loads (through a topology naming it), states whether it is calibrated,
 * and none runs at the raw datasheet peak. */
Test(profile, shipped_profiles_are_derated_and_say_whether_calibrated)
{
  static const char *const names[] = {"v100-sxm2-32gb",
                                      "a100-sxm4-40gb",
                                      "a100-sxm4-80gb",
                                      "h100-sxm5-80gb",
                                      "h100-hbm2e-96gb-500w",
                                      "h200-sxm-141gb",
                                      "b200",
                                      "gb200",
                                      "tpu-v2",
                                      "tpu-v3",
                                      "tpu-v4",
                                      "tpu-v5e",
                                      "tpu-v5p",
                                      "tpu-v6e",
                                      "p40"};
  int calibrated = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autofree char *text = g_strdup_printf("[chip]\nprofile = %s/topologies/chips/%s.ini\n" DIMX,
                                            TS_SOURCE_DIR, names[i]);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    cr_assert(g_key_file_load_from_data(kf, text, (gsize)-1, G_KEY_FILE_NONE, NULL));
    g_autoptr(GError) error = NULL;
    g_autoptr(ts_topo) t = ts_topo_from_keyfile(kf, "/nonexistent/t.ini", &error);
    cr_assert_not_null(t, "%s: %s", names[i], error != NULL ? error->message : "");
    cr_assert(t->chip.compute_efficiency < 1.0, "%s: compute_efficiency %g (raw peak)", names[i],
              t->chip.compute_efficiency);
    calibrated += !t->chip.uncalibrated;
  }
  /* A100 80GB (vTrain), the two H100s (TorchTitan's 500 W part fitted, the 700 W SXM5 by the
   * power rule), B200 and GB200 (Megatron-Bridge's Llama 3 8B rows, one fit each), P40
   * (torchgpipe), V100 (DeepLearningExamples' BERT-Large), TPU v3 (mesh-transformer-jax's GPT-J
   * 6B step) and TPU v4, v5e, v5p, v6e (MaxText) are fitted; the others say they are not. */
  cr_assert_eq(calibrated, 12, "%d calibrated profiles, expected 12", calibrated);
}

/* Loads a shipped chip profile through a one-dimension topology. */
static ts_topo *load_profile(const char *name)
{
  g_autofree char *text =
      g_strdup_printf("[chip]\nprofile = %s/topologies/chips/%s.ini\n" DIMX, TS_SOURCE_DIR, name);
  g_autoptr(GKeyFile) kf = g_key_file_new();
  cr_assert(g_key_file_load_from_data(kf, text, (gsize)-1, G_KEY_FILE_NONE, NULL));
  GError *error = NULL;
  ts_topo *t = ts_topo_from_keyfile(kf, "/nonexistent/t.ini", &error);
  cr_assert_not_null(t, "%s: %s", name, error != NULL ? error->message : "");
  return t;
}

/* The H100 kind has one fit (bench/fit_h100.sh, on the 500 W 96 GB part TorchTitan measured):
 * the 700 W SXM5 is the same die with clocks as P^(1/3), so its compute_efficiency is the fit's
 * x (700 / 500)^(1/3) to the profile's three decimals, its fused-core fraction the fit's, and the
 * H200 (the same die at 700 W) carries the SXM5's pair. A refit that updates one file only fails
 * here. */
Test(profile, h100_700w_is_the_500w_fit_by_the_power_rule)
{
  g_autoptr(ts_topo) p500 = load_profile("h100-hbm2e-96gb-500w");
  g_autoptr(ts_topo) p700 = load_profile("h100-sxm5-80gb");
  g_autoptr(ts_topo) h200 = load_profile("h200-sxm-141gb");
  double want = p500->chip.compute_efficiency * cbrt(700.0 / 500.0);
  cr_assert(fabs(p700->chip.compute_efficiency - want) <= 5e-4, "700 W %g, expected %g",
            p700->chip.compute_efficiency, want);
  cr_assert(p500->chip.flash_efficiency > 0, "the fit sets flash_efficiency");
  cr_assert_eq(p700->chip.flash_efficiency, p500->chip.flash_efficiency);
  cr_assert_eq(h200->chip.compute_efficiency, p700->chip.compute_efficiency);
  cr_assert_eq(h200->chip.flash_efficiency, p700->chip.flash_efficiency);
  cr_assert_eq(p500->chip.memory_bw_Bps, 2400e9, "the 96 GB part's HBM2e");
}

/* Power in a chip profile reaches the topology (issue 14: TPU v4's 192 W maximum and 90 W
 * minimum, Jouppi et al. 2023, Table 1); a topology's own key overrides it; a profile without
 * power (v5p: none published) leaves energy to --tdp-W. */
Test(profile, power_comes_from_the_profile)
{
  g_autoptr(ts_topo) v4 = load_topo("tpu-v4-4x4x4");
  cr_assert_eq(v4->cap.busy_W, 192.0);
  cr_assert_eq(v4->cap.idle_W, 90.0);
  g_autoptr(ts_topo) v5p = load_topo("tpu-v5p-4x4x4");
  cr_assert_eq(v5p->cap.busy_W, 0.0, "v5p: %g W, expected none", v5p->cap.busy_W);
  g_autofree char *text = g_strdup_printf(
      "[chip]\nprofile = %s/topologies/chips/tpu-v4.ini\ntdp_W = 200\n" DIMX, TS_SOURCE_DIR);
  g_autoptr(GKeyFile) kf = g_key_file_new();
  cr_assert(g_key_file_load_from_data(kf, text, (gsize)-1, G_KEY_FILE_NONE, NULL));
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_topo) t = ts_topo_from_keyfile(kf, "/nonexistent/t.ini", &error);
  cr_assert_not_null(t, "%s", error != NULL ? error->message : "");
  cr_assert_eq(t->cap.busy_W, 200.0, "the topology's tdp_W overrides the profile's");
  cr_assert_eq(t->cap.idle_W, 90.0);
}

Test(profile, shipped_topologies_use_profiles)
{
  static const char *const names[] = {
      "dgx-a100-1node", "dgx-a100-4node",  "dgx-a100-32node",
      "dgx-h100-4node", "dgx-h100-32node", "grand-teton-h100-32node",
      "tpu-v2-8",       "tpu-v2-pod",      "tpu-v3-8x8",
      "tpu-v3-pod",     "asym-16x16",      "p40-pcie-8",
      "tpu-v4-4x4x4",   "tpu-v4-16x16x16", "tpu-v4-4x4x8-twisted",
      "tpu-v5e-16x16",  "tpu-v5p-4x4x4",   "tpu-v5p-8x16x16",
      "tpu-v6e-16x16",  "dgx1-v100"};
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autoptr(ts_topo) t = load_topo(names[i]);
    cr_assert_not_null(t->chip.profile, "%s: no [chip] profile", names[i]);
  }
}

/* ---- trace text ------------------------------------------------------------------------- */

Test(trace_shape, round_trips_and_old_lines_read_as_roofline)
{
  g_autoptr(ts_topo) t = ring_topo(1, 1e9, 1e-6);
  g_autoptr(ts_trace) tr = ts_trace_new(t);
  ts_trace_set_programs(tr, 1);
  ts_op op = {.kind = TS_OP_COMPUTE, .flops = 1e9, .mem_bytes = 1e6};
  op.label = ts_trace_label(tr, "a");
  ts_op_shape shape = {.oclass = TS_OPC_FLASH,
                       .prec = TS_PRECISION_FP8,
                       .kernels = 4,
                       .m = 2048,
                       .n = 1024,
                       .k = 4096,
                       .batch = 1,
                       .aq = 2048,
                       .akv = 2048,
                       .ad = 128,
                       .abatch = 16,
                       .attn_flops = 3e8,
                       .causal = 1};
  op.shape = &shape;
  ts_trace_append(tr, 0, &op, NULL, 0);
  ts_op old = {.kind = TS_OP_COMPUTE, .flops = 5, .mem_bytes = 6};
  old.label = op.label;
  ts_trace_append(tr, 0, &old, NULL, 0);
  g_autofree char *text = ts_trace_to_text(tr);
  cr_assert(strstr(text, "class=flash prec=fp8 kernels=4 m=2048") != NULL, "%s", text);
  cr_assert(strstr(text, " causal=1") != NULL, "%s", text);
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_trace) back = ts_trace_from_text(text, "x.trace", &error);
  cr_assert_not_null(back, "%s", error != NULL ? error->message : "");
  const ts_op b_ = ts_program_op(&back->programs[0], 0), *b = &b_;
  cr_assert_not_null(b->shape);
  cr_assert(memcmp(b->shape, &shape, sizeof shape) == 0, "shape differs after reading");
  cr_assert_null(ts_program_op(&back->programs[0], 1).shape, "an op without a class has no shape");
  /* Bad values: one line naming the file and the line. */
  g_autofree char *bad = g_strdup(text);
  char *p = strstr(bad, "class=flash");
  memcpy(p, "class=flush", 11);
  g_autoptr(GError) e2 = NULL;
  g_autoptr(ts_trace) none = ts_trace_from_text(bad, "x.trace", &e2);
  cr_assert_null(none);
  cr_assert(strstr(e2->message, "x.trace") != NULL && strstr(e2->message, "class='flush'"), "%s",
            e2->message);
}

/* ---- precision in the planner ------------------------------------------------------------ */

static double step_mb(const char *topo, const char *model, const char *split, gint64 mb,
                      ts_result *res)
{
  g_autoptr(ts_topo) t = load_topo(topo);
  g_autoptr(ts_model) m = load_model(model);
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_split) sp = ts_split_parse(split, &error);
  cr_assert_not_null(sp, "%s", error != NULL ? error->message : "");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 64;
  po.micro_batch = mb;
  ts_run_options ro = {.backend = "analytic"};
  gboolean ok = ts_run_predict(m, t, sp, &po, &ro, res, &error);
  cr_assert(ok, "%s", error != NULL ? error->message : "");
  return res->step_time_s;
}

static double step_of(const char *topo, const char *model, const char *split, ts_result *res)
{
  return step_mb(topo, model, split, 2, res);
}

Test(precision, fp8_is_faster_and_keeps_the_memory_recipe)
{
  ts_result a, b;
  /* Large GEMMs (GPT-3 13B, micro-batch 16): device-bound, so FP8's rate shows. */
  double bf = step_mb("dgx-h100-4node", "gpt3-13b", "tp=8,dp=4", 16, &a);
  double f8 = step_mb("dgx-h100-4node", "gpt3-13b", "tp=8,dp=4,precision=fp8", 16, &b);
  cr_assert(f8 < bf, "fp8 step %g not faster than bf16 %g", f8, bf);
  /* Mixed-precision Adam either way: 16 bytes per parameter of model state (FP8 keeps bf16
   * weights and fp32 master weights and moments). */
  cr_assert(a.mem.params == b.mem.params && a.mem.optimizer == b.mem.optimizer,
            "FP8 changed the model state");
  double per = (a.mem.params + a.mem.grads + a.mem.optimizer) / (a.mem.params / 2.0);
  cr_assert(fabs(per - 16.0) < 1e-9, "%g bytes of model state per parameter, expected 16", per);
  cr_assert_eq(b.precision, TS_PRECISION_FP8);
  cr_assert(a.calibrated, "the H100 profile is calibrated (TorchTitan's H100 table)");
  ts_result_clear(&a);
  ts_result_clear(&b);
}

Test(precision, fp8_on_a_chip_without_fp8_is_one_line)
{
  g_autoptr(ts_topo) t = load_topo("dgx-a100-4node");
  g_autoptr(ts_model) m = load_model("gpt3-1.3b");
  g_autoptr(GError) error = plan_refusal(m, t, "tp=2,dp=16,precision=fp8", 64, 0);
  cr_assert(strstr(error->message, "[chip] peak_tflops_fp8") != NULL &&
                strstr(error->message, "dgx-a100-4node.ini") != NULL,
            "%s", error->message);
  g_autoptr(GError) e2 = NULL;
  g_autoptr(ts_split) bad = ts_split_parse("dp=8,precision=fp4", &e2);
  cr_assert_null(bad);
  cr_assert(strstr(e2->message, "precision=bf16, fp8, fp32 or tf32") != NULL, "%s", e2->message);
}

/* precision=tf32 (fp32 training with PyTorch's allow_tf32): GEMMs and convolutions on the TF32
 * tensor cores at the chip's tensor-core efficiency, where it has them (A100: the datasheet's
 * 156 TFLOPS dense, half the bf16 312), else at the fp32 rate as precision=fp32 (V100). A large
 * compute-bound GEMM: 2 m n k / (156e12 x 0.79 x its tile efficiency), exactly twice the bf16
 * time; a first convolution's 3 channels pad to TF32's multiple of 4 (4 / 3). The plan reads
 * the fp16 model as fp32 (4-byte activations). */
Test(precision, tf32_runs_on_tensor_cores_where_the_chip_has_them)
{
  g_autoptr(ts_topo) a = load_topo("dgx-a100-1node");
  g_autoptr(ts_topo) v = load_topo("dgx1-v100");
  cr_assert_float_eq(a->chip.peak_flops_tf32, 156e12, 1.0);
  cr_assert(v->chip.peak_flops_tf32 == 0.0);
  double M = 16384, N = 8192, K = 8192, f = 2 * M * N * K;
  ts_op_shape s = {.oclass = TS_OPC_GEMM, .prec = TS_PRECISION_TF32, .kernels = 1};
  s.m = M, s.n = N, s.k = K, s.batch = 1;
  double tt = ts_cost_device(&a->chip, f, 0, &s);
  double want =
      f / (156e12 * a->chip.compute_efficiency * ts_cost_tile_efficiency(&a->chip, M, N, K, 1));
  cr_assert_float_eq(tt, want, want * 1e-12, "tf32 %g s, expected %g", tt, want);
  s.prec = TS_PRECISION_BF16;
  double tb = ts_cost_device(&a->chip, f, 0, &s);
  cr_assert_float_eq(tt, 2 * tb, tb * 1e-12);
  /* On the V100 tf32 is fp32. */
  s.prec = TS_PRECISION_TF32;
  double vt = ts_cost_device(&v->chip, f, 0, &s);
  s.prec = TS_PRECISION_FP32;
  double vf = ts_cost_device(&v->chip, f, 0, &s);
  cr_assert_float_eq(vt, vf, vf * 1e-12);
  /* The peak MFU is taken against: TF32's, or fp32's on a chip without TF32. */
  double pa = ts_chip_peak(&a->chip, TS_PRECISION_TF32),
         pv = ts_chip_peak(&v->chip, TS_PRECISION_TF32);
  cr_assert(pa == 156e12 && pv == v->chip.peak_flops_fp32 && pv > 0);
  int tf = ts_precision_parse("tf32");
  cr_assert_eq(tf, TS_PRECISION_TF32);
  cr_assert_str_eq(ts_precision_name(TS_PRECISION_TF32), "tf32");
  /* ResNet-50 on the A100 in tf32: the stem's 3 channels pad to 4, and the plan trains the fp16
   * model in fp32. */
  g_autoptr(ts_model) m = load_model("resnet50");
  ts_plan *p = make_plan(m, a, "dp=8,precision=tf32,kernels=eager", 256, 32);
  cr_assert(p->own_fp32 != NULL && p->model->dtype_bytes == 4.0);
  ts_op_shape c;
  ts_plan_layer_shape(p, 0, 32, TS_PASS_FWD, &c);
  cr_assert(c.prec == TS_PRECISION_TF32 && c.oclass == TS_OPC_GEMM);
  cr_assert_float_eq(c.chan_pad, 4.0 / 3.0, 1e-12);
  ts_plan_free(p);
}

/* Index of the layer called name in m (the test fails when there is none). */
static int layer_index(const ts_model *m, const char *name)
{
  for (int i = 0; i < m->nlayers; i++)
    if (strcmp(m->layers[i].name, name) == 0)
      return i;
  cr_assert_fail("no layer %s", name);
  return -1;
}

/* layout=nchw: each tensor-core convolution call transposes its two activation operands to NHWC
 * and back, 2 D (ei + eo) bytes more: the forward once, the backward twice (input and weight
 * gradients), the stem's backward once (no input gradient), each call two kernels more. ResNet-50's
 * layer1.0.conv2 (3x3, 64 -> 64 channels at 56 x 56: ei = eo = 200,704 an image) at 32 images:
 * 2 x 2 x 401,408 x 32 bytes forward in bf16, twice in tf32 (4-byte tensors). fp32 on the CUDA
 * cores runs NCHW natively: nothing; layout=nhwc (the default): nothing. */
Test(precision, nchw_layout_transposes_tensor_core_convolutions)
{
  g_autoptr(ts_topo) a = load_topo("dgx-a100-1node");
  g_autoptr(ts_model) m = load_model("resnet50");
  int c2 = layer_index(m, "layer1.0.conv2"), stem = layer_index(m, "conv1");
  double e = 2.0 * 64 * 56 * 56 * 32, es = (3.0 * 224 * 224 + 64.0 * 112 * 112) * 32;
  static const struct {
    const char *split;
    double D; /* bytes an element of the transposed tensors; 0: no transposes */
  } cases[] = {{"dp=8,kernels=eager,layout=nchw", 2},
               {"dp=8,kernels=eager,precision=tf32,layout=nchw", 4},
               {"dp=8,kernels=eager,precision=fp32,layout=nchw", 0},
               {"dp=8,kernels=eager,layout=nhwc", 0}};
  for (size_t j = 0; j < G_N_ELEMENTS(cases); j++) {
    g_autofree char *plain =
        g_strndup(cases[j].split, strstr(cases[j].split, ",layout") - cases[j].split);
    ts_plan *p = make_plan(m, a, cases[j].split, 256, 32);
    ts_plan *q = make_plan(m, a, plain, 256, 32);
    ts_op_shape s, t;
    ts_plan_layer_shape(p, c2, 32, TS_PASS_FWD, &s);
    ts_plan_layer_shape(q, c2, 32, TS_PASS_FWD, &t);
    double D = cases[j].D, fwd = s.elem_bytes - t.elem_bytes;
    cr_assert_float_eq(fwd, 2 * D * e, 1.0, "%s: forward %g bytes", cases[j].split, fwd);
    cr_assert_eq(s.kernels - t.kernels, D > 0 ? 2 : 0, "%s", cases[j].split);
    ts_plan_layer_shape(p, c2, 32, TS_PASS_BWD, &s);
    ts_plan_layer_shape(q, c2, 32, TS_PASS_BWD, &t);
    double bwd = s.elem_bytes - t.elem_bytes;
    cr_assert_float_eq(bwd, 4 * D * e, 1.0, "%s: backward %g bytes", cases[j].split, bwd);
    ts_plan_layer_shape(p, stem, 32, TS_PASS_BWD, &s);
    ts_plan_layer_shape(q, stem, 32, TS_PASS_BWD, &t);
    double sb = s.elem_bytes - t.elem_bytes;
    cr_assert_float_eq(sb, 2 * D * es, 1.0, "%s: stem backward %g bytes", cases[j].split, sb);
    ts_plan_free(p);
    ts_plan_free(q);
  }
  g_autoptr(GError) err = NULL;
  g_autoptr(ts_split) bad = ts_split_parse("dp=8,layout=chw", &err);
  cr_assert_null(bad);
  cr_assert(strstr(err->message, "layout=nhwc") != NULL, "%s", err->message);
}

/* ---- calibrate --against ------------------------------------------------------------------ */

static char *write_csv(const char *dir, const char *name, const char *text)
{
  char *p = g_build_filename(dir, name, NULL);
  cr_assert(g_file_set_contents(p, text, -1, NULL));
  return p;
}

#define CSV_HEAD "topology,model,split,global_batch,micro_batch,measured_step_time_s\n"

Test(calibrate_against, bad_files_are_one_line_and_write_nothing)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp("ts_cal_XXXXXX", &error);
  cr_assert_not_null(dir);
  g_autofree char *out = g_build_filename(dir, "out.ini", NULL);
  const struct {
    const char *text, *needle;
  } cases[] = {
      {"topology,model,split,global_batch,micro_batch\ndgx-a100-1node,gpt3-350m,dp=8,8,1\n",
       "no column measured_step_time_s"},
      {CSV_HEAD "dgx-a100-1node,gpt3-350m,dp=8,8,1,abc\n",
       "m.csv:2: column measured_step_time_s: 'abc'"},
      {CSV_HEAD "nope-topo,gpt3-350m,dp=8,8,1,1\n", "m.csv:2: column topology"},
      {CSV_HEAD "dgx-a100-1node,gpt3-350m,\"dp=8,zero=9\",8,1,1\n", "m.csv:2: column split"},
      {CSV_HEAD "dgx-a100-1node,gpt3-350m,dp=8,8\n", "m.csv:2: 4 fields; expected 6"},
      {CSV_HEAD "dgx-a100-1node,gpt3-350m,dp=8,8,1,1\ndgx-h100-4node,gpt3-350m,dp=32,32,1,1\n",
       "m.csv:3: column topology: chip 'NVIDIA H100 SXM5 80GB'"},
      /* Same "FILE:LINE: column X" form as validate --against and the trace/INI readers. */
      {CSV_HEAD "dgx-a100-1node,gpt3-350m,\"dp=8,8,1,1\n",
       "m.csv:2: unterminated quote; expected a closing quote"},
      {"topology,model,split,global_batch,micro_batch\ndgx-a100-1node,gpt3-350m,dp=8,8,1\n",
       "m.csv:1: no column measured_step_time_s"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *csv = write_csv(dir, "m.csv", cases[i].text);
    g_autofree char *args = g_strdup_printf("calibrate --against %s -o %s", csv, out);
    run_result r = run(args);
    cr_assert_eq(r.status, 2, "case %zu: exit %d (%s)", i, r.status, r.err);
    cr_assert(strstr(r.err, cases[i].needle) != NULL, "case %zu: '%s' lacks '%s'", i, r.err,
              cases[i].needle);
    cr_assert(strchr(r.err, '\n') == strrchr(r.err, '\n'), "case %zu: more than one line", i);
    cr_assert(!g_file_test(out, G_FILE_TEST_EXISTS), "case %zu: a profile was written", i);
    run_free(&r);
    g_unlink(csv);
  }
  g_rmdir(dir);
}

/* Rows measured 20% slower than the shipped A100 profile predicts: the fit finds parameters
 * that predict them (a MAPE far below the 20% it starts from) and writes a loadable profile. */
Test(calibrate_against, refits_to_slower_measurements, .timeout = 300)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp("ts_cal_XXXXXX", &error);
  cr_assert_not_null(dir);
  const char *splits[] = {"dp=8", "tp=2,dp=4"};
  GString *csv = g_string_new(CSV_HEAD);
  for (size_t i = 0; i < G_N_ELEMENTS(splits); i++) {
    ts_result res;
    double t = step_of("dgx-a100-1node", "gpt3-350m", splits[i], &res);
    ts_result_clear(&res);
    g_string_append_printf(csv, "dgx-a100-1node,gpt3-350m,\"%s\",64,2,", splits[i]);
    ts_append_g(csv, 17, 1.2 * t);
    g_string_append_c(csv, '\n');
  }
  g_autofree char *path = write_csv(dir, "m.csv", csv->str);
  g_string_free(csv, TRUE);
  g_autofree char *out = g_build_filename(dir, "fit.ini", NULL);
  g_autofree char *args =
      g_strdup_printf("calibrate --against %s -o %s --fit-fraction 1 --quiet", path, out);
  run_result r = run(args);
  cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
  const char *m = strstr(r.out, "fitting rows:");
  cr_assert_not_null(m, "%s", r.out);
  double mape = 0;
  cr_assert(sscanf(strstr(m, "MAPE") + 4, "%lf", &mape) == 1, "%s", m);
  cr_assert(mape < 2.0, "fitting MAPE %g%% after the fit (20%% before)", mape);
  g_autofree char *topo = g_strdup_printf("[chip]\nprofile = fit.ini\n" DIMX);
  g_autofree char *tpath = write_csv(dir, "t.ini", topo);
  g_autoptr(ts_topo) t = ts_topo_load(tpath, &error);
  cr_assert_not_null(t, "%s", error != NULL ? error->message : "");
  cr_assert(!t->chip.uncalibrated && t->chip.compute_units == 108, "profile keys");
  run_free(&r);
  g_unlink(tpath);
  g_unlink(out);
  g_unlink(path);
  g_rmdir(dir);
}

/* A collective waits for the host to issue it (ts_cost_issue_collective): with the host ahead of
 * the device no delay; behind it, the delay is exactly the host's backlog plus the launch. */
Test(cost, collective_waits_for_its_launch)
{
  double host = 0.0;
  /* Host idle since t = 0, collective ready at t = 1 ms, launch 50 us: the host issues it at
   * 50 us, long before, so it starts on time. */
  /* (criterion's float macros evaluate their arguments twice: call first) */
  double d = ts_cost_issue_collective(&host, 1e-3, 50e-6);
  cr_assert_float_eq(d, 0.0, 1e-15);
  cr_assert_float_eq(host, 50e-6, 1e-15);
  /* The host has 2 ms of launches queued: the collective starts when it is issued. */
  host = 2e-3;
  d = ts_cost_issue_collective(&host, 1e-3, 50e-6);
  cr_assert_float_eq(d, 1.05e-3, 1e-15);
  cr_assert_float_eq(host, 2.05e-3, 1e-15);
  /* No launch cost: never delayed, the host clock unchanged. */
  d = ts_cost_issue_collective(&host, 0.0, 0.0);
  cr_assert_float_eq(d, 0.0, 1e-15);
  cr_assert_float_eq(host, 2.05e-3, 1e-15);
}

/* [chip] collective_launch_us is 0 unless given, whatever kernel_launch_us is. */
Test(profile, collective_launch_is_given_apart)
{
  const char *base = "[chip]\nname = g\npeak_tflops = 100\nmemory_GiB = 16\n"
                     "memory_bandwidth_GBps = 1000\nkernel_launch_us = 7\n";
  for (int k = 0; k < 2; k++) {
    g_autofree char *text =
        g_strdup_printf("%s%s" DIMX, base, k == 0 ? "" : "collective_launch_us = 250\n");
    g_autoptr(GKeyFile) kf = g_key_file_new();
    cr_assert(g_key_file_load_from_data(kf, text, (gsize)-1, G_KEY_FILE_NONE, NULL));
    g_autoptr(GError) error = NULL;
    g_autoptr(ts_topo) t = ts_topo_from_keyfile(kf, "/nonexistent/t.ini", &error);
    cr_assert_not_null(t, "%s", error != NULL ? error->message : "");
    cr_assert_float_eq(t->chip.collective_launch_s, k == 0 ? 0.0 : 250e-6, 1e-15);
  }
}

/* The V100 profile's fp32 convolution cost against DeepBench's measured cuDNN kernels
 * (data/published/deepbench/v100_conv_fp32.csv: 94 training convolutions on a DGX-1 V100 in
 * FP32, cuDNN 7.6.2; docs/accuracy.md, "FP32 convolutions on V100: DeepBench"), fitted to none
 * of them. Each layer is costed as the planner costs a conv2d (ts_plan.c: an m = N P Q, n = K,
 * k = C R S GEMM, Winograd's 2.25 for 3x3 stride 1; ts_model.c's traffic, 4-byte elements): the
 * forward op against fwd_ms, the backward op (input and weight gradients, one op) against
 * bwd_input_ms + bwd_weight_ms (the weight gradient only where DeepBench has no input gradient).
 * Summed over the 94 layers the prediction was 5.2% above the measurement (the BERT-fitted fp32
 * GEMM rate, compute_efficiency_fp32 0.95, is about what cuDNN's convolutions reach in
 * aggregate), 5.1% below over DeepBench's 32 ResNet layers, 11.2% below over the 3x3 stride-1
 * (Winograd) layers and 15.1% above over the others; pins a little above each. */
Test(profile, v100_fp32_convolutions_against_deepbench)
{
  g_autoptr(ts_topo) t = load_profile("v100-sxm2-32gb");
  g_autofree char *path =
      g_build_filename(TS_SOURCE_DIR, "data", "published", "deepbench", "v100_conv_fp32.csv", NULL);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(path, &text, NULL, NULL), "%s", path);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  /* Predicted and measured seconds: all layers, ResNet's, the 3x3 stride-1 ones. */
  double pred[3] = {0}, meas[3] = {0};
  int rows = 0;
  for (int i = 0; lines[i] != NULL; i++) {
    if (lines[i][0] == '#' || lines[i][0] == '\0' || g_str_has_prefix(lines[i], "app,"))
      continue;
    g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
    cr_assert_eq(g_strv_length(f), 16, "%s line %d: 16 columns", path, i + 1);
    double W = atof(f[1]), H = atof(f[2]), C = atof(f[3]), N = atof(f[4]), K = atof(f[5]);
    double S = atof(f[6]), R = atof(f[7]), pw = atof(f[8]), ph = atof(f[9]);
    double sw = atof(f[10]), sh = atof(f[11]);
    double P = floor((H + 2 * ph - R) / sh) + 1, Q = floor((W + 2 * pw - S) / sw) + 1;
    ts_op_shape s = {.oclass = TS_OPC_GEMM, .prec = TS_PRECISION_FP32, .kernels = 1};
    s.m = N * P * Q, s.n = K, s.k = C * R * S, s.batch = 1;
    s.conv3x3 = R == 3 && S == 3 && sh == 1 && sw == 1 ? 1.0 : 0.0;
    double w = K * C * R * S, ei = N * C * H * W, eo = N * K * P * Q, gemm = 2 * s.m * s.n * s.k;
    gboolean dgrad = f[13][0] != '\0';
    double tf = ts_cost_device(&t->chip, gemm, 4 * (w + ei + eo), &s);
    double tb = ts_cost_device(&t->chip, (dgrad ? 2 : 1) * gemm,
                               4 * (2 * w + ei + eo + (dgrad ? ei : 0)), &s);
    double mf = atof(f[12]) * 1e-3, mb = (atof(f[13]) + atof(f[14])) * 1e-3;
    cr_assert(mf > 0 && mb > 0, "%s line %d: times", path, i + 1);
    gboolean in[3] = {TRUE, strcmp(f[0], "Resnet") == 0, s.conv3x3 > 0};
    for (int g = 0; g < 3; g++)
      if (in[g])
        pred[g] += tf + tb, meas[g] += mf + mb;
    rows++;
  }
  cr_assert_eq(rows, 94, "%d rows", rows);
  static const char *const what[3] = {"all", "ResNet", "3x3 stride 1"};
  static const double pin[3] = {0.07, 0.07, 0.13};
  for (int g = 0; g < 3; g++) {
    double err = pred[g] / meas[g] - 1;
    cr_assert(fabs(err) <= pin[g], "%s: summed prediction %+.1f%% off the measured, pin %g%%",
              what[g], 100 * err, 100 * pin[g]);
  }
  double other = (pred[0] - pred[2]) / (meas[0] - meas[2]) - 1;
  cr_assert(fabs(other) <= 0.17, "other layers: %+.1f%% off the measured", 100 * other);
}
