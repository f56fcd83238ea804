/* ts_cost: the cost of one compute op from its shape (see ts_cost.h for the model). */
#include "ts_cost.h"

#include <math.h>
#include <string.h>

/* A GPU GEMM library (cuBLAS, CUTLASS) picks among tile shapes the one that wastes least; a
 * tile of half the width keeps fewer operands in flight and reaches a lower per-SM rate. 0.9 is
 * an assumption (CUTLASS profiler runs put 128x128 tiles at 85-95% of 128x256 on large
 * problems), not a fitted parameter. */
#define HALF_TILE_RATE 0.9
/* The key tile of a fused attention kernel (FlashAttention-2's block of 128 keys for head width
 * 128 on Ampere / Hopper): a causal core computes the diagonal tiles whole. */
#define FLASH_KEY_TILE 128.0
/* TPU: the row (M) dimension streams through the array in groups of 8 sublanes. */
#define TPU_SUBLANES 8.0
/* Winograd's minimal filtering F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional
 * Neural Networks", CVPR 2016, section 4): a 2x2 output tile of a 3x3 convolution takes 4 x 4 =
 * 16 multiplies instead of 2 x 2 x 9 = 36, 2.25x fewer; the input, filter and output
 * transforms are additions, not counted. cuDNN's fused WINOGRAD algorithm is F(2x2, 3x3) (its
 * non-fused one F(4x4, 3x3), up to 4x, pays larger transforms through memory); PyTorch with
 * cudnn.benchmark picks it for fp32 3x3 stride-1 layers on CUDA cores, forward, data gradient
 * (a 3x3 stride-1 convolution of the gradient) and filter gradient (WINOGRAD_NONFUSED). On
 * tensor cores (fp16 / bf16) cuDNN runs implicit GEMM: the tensor core's rate beats the saved
 * multiplies, and Winograd's transforms lose precision in 16 bits. A closed form, not fitted. */
#define WINOGRAD_F2X2_3X3 2.25

static const char *const class_names[TS_NOPCLASSES] = {
    "roofline", "gemm", "attention", "flash", "memory", "optimizer", "transfer", "other"};
static const char *const precision_names[TS_NPRECISIONS] = {"bf16", "fp8", "fp32", "tf32"};

/* Index of s among the n names, or -1 (the parsers of the name tables below). */
static int name_index(const char *const *names, int n, const char *s)
{
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0)
      return i;
  return -1;
}

const char *ts_op_class_name(ts_op_class c)
{
  return c >= 0 && c < TS_NOPCLASSES ? class_names[c] : "?";
}

int ts_op_class_parse(const char *s)
{
  return name_index(class_names, TS_NOPCLASSES, s);
}

const char *ts_precision_name(ts_precision p)
{
  return p >= 0 && p < TS_NPRECISIONS ? precision_names[p] : "?";
}

int ts_precision_parse(const char *s)
{
  if (strcmp(s, "fp16") == 0)
    return TS_PRECISION_BF16;
  return name_index(precision_names, TS_NPRECISIONS, s);
}

/* Shah et al. 2024 (FlashAttention-3, arXiv 2407.08608), H100 80GB SXM5, BF16, head dim 128,
 * TFLOP/s (a causal core counted as half the FLOPs) at sequence lengths 512, 1k, 2k, 4k, 8k,
 * 16k: Figure 5 "with causal mask" (forward) and Figure 6 (backward, the published backward
 * figures are without the mask). Only the ratio to FlashAttention-2 is used. */
static const double attn_seq[] = {512, 1024, 2048, 4096, 8192, 16384};
static const double attn_tflops[TS_NATTN_KERNELS][2][6] = {
    [TS_ATTN_KERNEL_FA2] = {{191, 260, 298, 319, 333, 335}, {214, 260, 291, 310, 318, 322}},
    [TS_ATTN_KERNEL_CUDNN] = {{315, 410, 484, 518, 529, 539}, {305, 408, 465, 499, 518, 516}},
};
static const char *const attn_kernel_names[TS_NATTN_KERNELS] = {"fa2", "cudnn", "triton", "fa1"};

/* Dao 2023 (FlashAttention-2, arXiv 2307.08691), Figure 4 "Attention forward + backward speed on
 * A100 GPU", causal panels, TFLOP/s (a causal core counted as half the FLOPs, the backward as 2.5
 * forwards) at head widths 64 and 128 and the lengths of attn_seq; the bars of
 * data/published/flash-attention/fa2-a100-fwd-bwd.csv. Only their shape is used. */
static const double attn_a100_causal[TS_NATTN_KERNELS][2][6] = {
    [TS_ATTN_KERNEL_TRITON] = {{59, 75, 79, 76, 79, 80}, {50, 61, 68, 74, 78, 80}},
    [TS_ATTN_KERNEL_FA1] = {{58, 70, 77, 87, 92, 97}, {55, 62, 69, 76, 80, 83}},
};

const char *ts_attn_kernel_name(ts_attn_kernel k)
{
  return k >= 0 && k < TS_NATTN_KERNELS ? attn_kernel_names[k] : "?";
}

int ts_attn_kernel_parse(const char *s)
{
  return name_index(attn_kernel_names, TS_NATTN_KERNELS, s);
}

double ts_attn_kernel_speedup(ts_attn_kernel k, gboolean bwd, double keys)
{
  /* The kernels without a row in the table are a chip's own rates (ts_plan.c). */
  if (k != TS_ATTN_KERNEL_CUDNN)
    return 1.0;
  int n = (int)G_N_ELEMENTS(attn_seq), d = bwd ? 1 : 0;
  double r[6];
  for (int i = 0; i < n; i++)
    r[i] = attn_tflops[k][d][i] / attn_tflops[TS_ATTN_KERNEL_FA2][d][i];
  if (!(keys > attn_seq[0]))
    return r[0];
  if (keys >= attn_seq[n - 1])
    return r[n - 1];
  int i = 0;
  while (keys >= attn_seq[i + 1])
    i++;
  double f = log2(keys / attn_seq[i]); /* the lengths double: log2 of their ratio is 1 */
  return r[i] + f * (r[i + 1] - r[i]);
}

/* A published bar on the tiles a causal core computes: its rate x (1 + tile / S) (the figure
 * counts half the scores; the kernel computes the diagonal tiles whole). */
static double attn_bar(ts_attn_kernel k, int w, int i)
{
  return attn_a100_causal[k][w][i] * (1.0 + FLASH_KEY_TILE / attn_seq[i]);
}

double ts_attn_kernel_shape(ts_attn_kernel k, double head_dim, double keys)
{
  if (k != TS_ATTN_KERNEL_TRITON && k != TS_ATTN_KERNEL_FA1)
    return 1.0;
  /* The profile's rate: the geometric mean of the 8 bars at 2k-16k, both head widths. */
  double lg = 0.0;
  for (int w = 0; w < 2; w++)
    for (int i = 2; i < 6; i++)
      lg += log(attn_bar(k, w, i));
  double mean = exp(lg / 8.0);
  /* Each head width's bar at these keys, then between the widths. */
  double at[2];
  for (int w = 0; w < 2; w++) {
    int i = 0;
    double f = 0.0;
    if (keys >= attn_seq[5]) {
      i = 4, f = 1.0;
    } else if (keys > attn_seq[0]) {
      while (keys >= attn_seq[i + 1])
        i++;
      f = log2(keys / attn_seq[i]); /* the lengths double: log2 of their ratio is 1 */
    }
    at[w] = attn_bar(k, w, i) + f * (attn_bar(k, w, i + 1) - attn_bar(k, w, i));
  }
  double x = fmin(1.0, fmax(0.0, (head_dim - 64.0) / 64.0));
  return (at[0] + x * (at[1] - at[0])) / mean;
}

double ts_chip_peak(const ts_chip *c, ts_precision p)
{
  switch (p) {
  case TS_PRECISION_FP8:
    return c->peak_flops_fp8;
  case TS_PRECISION_FP32:
    return c->peak_flops_fp32;
  case TS_PRECISION_TF32:
    /* PyTorch's allow_tf32 does nothing on a chip without TF32 tensor cores (a V100): fp32. */
    return c->peak_flops_tf32 > 0 ? c->peak_flops_tf32 : c->peak_flops_fp32;
  default:
    return c->peak_flops;
  }
}

/* The rate an op of precision p runs at: its own peak, or the bf16 / training-type peak
 * (peak_tflops) where the chip gives none. */
static double rate_of(const ts_chip *c, int p)
{
  double r = ts_chip_peak(c, (ts_precision)p);
  return r > 0 ? r : c->peak_flops;
}

/* Useful fraction of a dimension padded up to a multiple of q. */
static double pad_eff(double x, double q)
{
  return x / (ceil(x / q) * q);
}

/* GPU: output tiles of tm x tn spread over the SMs in waves; the last wave is partly idle
 * (NVIDIA, "Matrix Multiplication Background User's Guide", tile and wave quantization). */
static double wave_eff(const ts_chip *c, double m, double n, double b, double tm, double tn)
{
  double tiles = ceil(m / tm) * ceil(n / tn) * b;
  double waves = ceil(tiles / c->compute_units);
  return m * n * b / (waves * c->compute_units * tm * tn);
}

/* Split-K (cuBLAS's and CUTLASS's split-K GEMMs): when a GEMM's output tiles do not fill one
 * wave of the SMs, the library splits the k loop over the idle ones, s = floor(SMs / tiles)
 * slices of k / s each, and sums the partial tiles (s m n fp32 values, negligible beside the
 * operands here). One wave of s x tiles, each slice paying the per-tile fixed cost over its
 * shorter k. 0 when the tiles fill a wave (no split). */
static double splitk_eff(const ts_chip *c, double m, double n, double k, double b, double tm,
                         double tn)
{
  double tiles = ceil(m / tm) * ceil(n / tn) * b;
  double s = floor(c->compute_units / tiles);
  if (!(s >= 2))
    return 0.0;
  double ks = k / s;
  double ek = c->gemm_k_overhead > 0 ? ks / (ks + c->gemm_k_overhead) : 1.0;
  return m * n * b * s / (c->compute_units * tm * tn) * ek;
}

double ts_cost_tile_efficiency(const ts_chip *c, double m, double n, double k, double batch)
{
  if (!(m > 0 && n > 0 && k > 0))
    return 1.0;
  double b = batch >= 1 ? batch : 1.0;
  /* A per-tile fixed cost (loading the first operands, writing the tile) amortised over the
   * k loop: short reductions run below the rate of long ones. */
  double ek = c->gemm_k_overhead > 0 ? k / (k + c->gemm_k_overhead) : 1.0;
  if (c->systolic > 0) {
    /* A weight-stationary systolic array holds a k x n block of the weights: k and n pad to
     * the array, rows stream in groups of sublanes (Jouppi et al., ISCA 2017, section 2). */
    double s = c->systolic;
    return pad_eff(n, s) * pad_eff(k, s) * pad_eff(m, TPU_SUBLANES) * ek;
  }
  if (c->compute_units <= 0 || c->tile_m <= 0 || c->tile_n <= 0)
    return ek;
  double tm = c->tile_m, tn = c->tile_n;
  double best = wave_eff(c, m, n, b, tm, tn);
  best = fmax(best, wave_eff(c, m, n, b, tn, tm));
  double half = tn >= tm ? tn / 2 : tm / 2;
  double sm = tn >= tm ? tm : tn;
  best = fmax(best, HALF_TILE_RATE * wave_eff(c, m, n, b, sm, half));
  best = fmax(best, HALF_TILE_RATE * wave_eff(c, m, n, b, half, sm));
  best *= ek;
  best = fmax(best, splitk_eff(c, m, n, k, b, tm, tn));
  best = fmax(best, splitk_eff(c, m, n, k, b, tn, tm));
  best = fmax(best, HALF_TILE_RATE * splitk_eff(c, m, n, k, b, sm, half));
  best = fmax(best, HALF_TILE_RATE * splitk_eff(c, m, n, k, b, half, sm));
  return best;
}

/* The roofline (Williams, Waterman & Patterson, CACM 2009) with the per-op floor of old
 * profiles: what every op without a shape costs. */
static double roofline(const ts_chip *c, double flops, double mem, gboolean floor)
{
  double tc = flops / (c->peak_flops * c->compute_efficiency);
  double tm = c->memory_bw_Bps > 0 ? mem / c->memory_bw_Bps : 0.0;
  double r = fmax(tc, tm);
  /* [chip] op_overhead_us: launches are asynchronous, so the device waits for the host only
   * when the host is slower than the kernels. */
  if (floor && r < c->op_overhead_s)
    r = c->op_overhead_s;
  return r;
}

double ts_cost_launch(const ts_chip *c, double flops, double mem, const ts_op_shape *s)
{
  if (s == NULL || s->oclass == TS_OPC_ROOFLINE || s->oclass == TS_OPC_TRANSFER ||
      (!(flops > 0) && !(mem > 0)) || s->kernels == TS_KERNELS_LAUNCHED)
    return 0.0;
  double per = s->host_op_us > 0 ? s->host_op_us * 1e-6 : c->kernel_launch_s;
  return (s->kernels > 0 ? s->kernels : 1) * per;
}

double ts_cost_compute(const ts_chip *c, double flops, double mem, const ts_op_shape *s)
{
  if (s != NULL && s->launch_blocking > 0) /* launches and kernels one after the other */
    return ts_cost_device(c, flops, mem, s) + ts_cost_launch(c, flops, mem, s);
  return fmax(ts_cost_device(c, flops, mem, s), ts_cost_launch(c, flops, mem, s));
}

double ts_cost_issue(double *host_clock, double now, double device_s, double launch_s, int kernels,
                     gboolean sync)
{
  if (sync)
    ts_cost_host_sync(host_clock, now);
  if (!(launch_s > 0))
    return device_s;
  if (sync == TS_COST_SYNC_BLOCKING) {
    /* CUDA_LAUNCH_BLOCKING=1: each of the op's kernels is launched only once the one before
     * has run, so its launches and its device time add up, and the host is busy until the
     * op ends. */
    double end = *host_clock + launch_s + device_s;
    *host_clock = end;
    return end - now;
  }
  /* The op's n kernels, each a launch of launch_s / n on the host and d / n on the device (a
   * uniform split: the op's kernels are not costed one by one). Its last kernel is issued when
   * the host has launched all of them and runs d / n: a host-bound op ends one kernel after its
   * last launch. (Its first kernel also waits for its own launch; that gate is left out for
   * ops of several kernels: this host clock is advanced in the order ops start, not in program
   * order, so an op issued before a pipeline exchange's synchronisation (ts_cost_host_sync) but
   * started after it would be gated on it; docs/accuracy.md, "The host's dispatch queue".) */
  int n = kernels >= 1 ? kernels : 1;
  *host_clock += launch_s;
  double end = fmax(now + device_s, *host_clock + device_s / n);
  return end - now;
}

gboolean ts_cost_op_syncs(const ts_op_shape *s)
{
  if (s != NULL && s->launch_blocking > 0)
    return TS_COST_SYNC_BLOCKING;
  return s != NULL && ((s->oclass == TS_OPC_OPTIMIZER && !(s->no_sync > 0)) || s->host_sync > 0);
}

int ts_cost_kernels(const ts_op_shape *s)
{
  return s != NULL && s->kernels > 0 ? s->kernels : 1;
}

double ts_cost_issue_collective(double *host_clock, double now, double launch_s)
{
  if (!(launch_s > 0))
    return 0.0;
  *host_clock += launch_s;
  return fmax(0.0, *host_clock - now);
}

void ts_cost_host_sync(double *host_clock, double end_s)
{
  if (*host_clock < end_s)
    *host_clock = end_s;
}

double ts_cost_device(const ts_chip *c, double flops, double mem, const ts_op_shape *s)
{
  /* An op with no work launches nothing and stays free. */
  if (!(flops > 0) && !(mem > 0))
    return 0.0;
  if (s == NULL || s->oclass == TS_OPC_ROOFLINE)
    return roofline(c, flops, mem, TRUE);
  if (s->oclass == TS_OPC_TRANSFER)
    return roofline(c, flops, mem, FALSE); /* a duration, never floored (no kernel launched) */
  double eff_bw = c->memory_bw_efficiency > 0 ? c->memory_bw_efficiency : 1.0;
  double bw = c->memory_bw_Bps * eff_bw;
  double tm = bw > 0 ? mem / bw : 0.0;
  double ach = c->compute_efficiency;
  double t;
  switch (s->oclass) {
  case TS_OPC_GEMM:
  case TS_OPC_ATTENTION:
  case TS_OPC_FLASH: {
    double peak = rate_of(c, s->prec);
    /* TF32 where the chip has no TF32 tensor cores is fp32 (rate_of). */
    int prec =
        s->prec == TS_PRECISION_TF32 && !(c->peak_flops_tf32 > 0) ? TS_PRECISION_FP32 : s->prec;
    /* FP8 GEMMs promoting their partial sums to fp32 (the backward's): the chip's slower rate. */
    if (s->prec == TS_PRECISION_FP8 && s->split_accum > 0 && c->fp8_split_accum_rate > 0)
      peak *= c->fp8_split_accum_rate;
    /* An fp32 GEMM on a chip with its own fp32 rate runs on other units (a GPU's CUDA cores,
     * not its tensor cores), at its own fraction of that rate where the profile gives one. */
    if (prec == TS_PRECISION_FP32 && c->peak_flops_fp32 > 0 && c->compute_efficiency_fp32 > 0)
      ach = c->compute_efficiency_fp32;
    int core_prec = prec == TS_PRECISION_FP8 ? TS_PRECISION_BF16 : prec;
    double fa = fmin(s->attn_flops, flops), fg = flops - fa;
    /* A 16-bit convolution on a GPU's tensor cores with its input channels padded (cuDNN's
     * padding transform, NVIDIA's Convolutional Layers User's Guide, "Channels In And Out":
     * tensor cores take fp16 channels in multiples of 8; a first layer's 3 colour channels pad
     * to 4 when its stride is 2): the padded reduction's work, zeros included (TF32's multiple
     * of 4: ts_plan.c). */
    double pad =
        s->chan_pad > 1 && c->systolic <= 0 && prec != TS_PRECISION_FP32 ? s->chan_pad : 1.0;
    double tc =
        fg * pad / (peak * ach * ts_cost_tile_efficiency(c, s->m, s->n, s->k * pad, s->batch));
    /* A 3x3 stride-1 convolution in fp32 on a GPU's CUDA cores: Winograd's fewer multiplies. */
    if (s->conv3x3 > 0 && prec == TS_PRECISION_FP32 && c->systolic <= 0)
      tc /= WINOGRAD_F2X2_3X3;
    /* The attention core (scores, context) stays in bf16 under FP8 recipes (Transformer
     * Engine runs dot-product attention in bf16). */
    double kernel = s->attn_speedup > 0 ? s->attn_speedup : 1.0;
    double fe = s->flash_eff > 0 ? s->flash_eff : c->flash_efficiency;
    if (fa > 0 && s->oclass == TS_OPC_FLASH && fe > 0) {
      /* A fused core (FlashAttention, Dao et al. 2022, Algorithm 1; FlashAttention-2, Dao 2023,
       * section 3.1.1) loops over key tiles for each query tile; with a causal mask it skips
       * the tiles wholly above the diagonal, so of the T x S scores it computes the lower half
       * and the diagonal tiles: (1 + tile / S) / 2 of them. It runs at its own fraction of the
       * GEMM rate (softmax and rescaling between its two matmuls; no tile model of its own). */
      double frac =
          s->causal > 0 && s->akv > 0 ? 0.5 * (1.0 + fmin(1.0, FLASH_KEY_TILE / s->akv)) : 1.0;
      tc += fa * frac * (s->attn_rerun > 0 ? s->attn_rerun : 1.0) /
            (rate_of(c, core_prec) * ach * fe * kernel);
    } else if (fa > 0) {
      /* A TPU's fused core (Pallas: jax.experimental.pallas.ops.tpu flash_attention and
       * splash_attention), causal: the kernel skips every (query block, key block) pair wholly
       * above the diagonal and computes the others whole. With blocks Bq and Bk, one a multiple
       * of the other, query block i needs the key blocks up to the end of the larger block that
       * holds its last row, so of the S x S scores it computes (1 + B / S) / 2, B = max(Bq, Bk)
       * (split attn-block=, 512 by default). Each block runs on the systolic array at its
       * padded shape (a head of 128 on a 256-wide MXU: half). */
      double blk = s->attn_block > 0 ? s->attn_block : TS_TPU_ATTN_BLOCK;
      double frac = c->systolic > 0 && s->causal > 0 && s->akv > 0
                        ? 0.5 * (1.0 + fmin(1.0, blk / s->akv))
                        : 1.0;
      tc += fa * frac * (s->attn_rerun > 0 ? s->attn_rerun : 1.0) /
            (rate_of(c, core_prec) * ach *
             ts_cost_tile_efficiency(c, s->aq, s->akv, s->ad, s->abatch) * kernel);
    }
    /* Score matrices of an unfused core (softmax, mask, dropout) are memory-bound kernels of
     * their own, after the GEMMs; so on a GPU are the epilogues (bias + GeLU, bias + dropout +
     * residual add, layout copies: Megatron-LM's fused element-wise kernels), which XLA fuses
     * into a systolic chip's matmuls. */
    double after = s->scores_bytes + (c->systolic > 0 ? 0.0 : s->epilogue_bytes);
    t = fmax(tc, tm) + (bw > 0 ? after / bw : 0.0);
    break;
  }
  default: {
    /* Element-wise work of an FP8 recipe stays in bf16 / fp32. */
    int p = s->prec == TS_PRECISION_FP8 ? TS_PRECISION_BF16 : s->prec;
    t = fmax(flops / (rate_of(c, p) * ach), tm);
    break;
  }
  }
  /* Memory-bound kernels of their own around the main ones (eager element-wise ops, FP8
   * scaling's amax, cast and transpose passes): serial on the op's stream. */
  if (bw > 0)
    t += s->elem_bytes / bw;
  return fmax(t, c->op_overhead_s);
}
