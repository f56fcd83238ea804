/* ts_topo: reads and validates topology files (a chip kind and an array of named dimensions). */
#include "ts_topo.h"
#include "ts_cost.h"
#include "ts_goodput.h"
#include "ts_util.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define HOUR 3600.0 /* seconds */

/* Limits. A dimension of more than 65536 chips or an array of more than 2^20 chips is a typo,
 * not a machine: the largest public ML arrays are in the tens of thousands of chips. Bounds on
 * rates are "absurd" bounds that only catch unit mistakes (a link of 1 PB/s, a chip of
 * 1 EFLOP/s), not forecasts. */
#define TOPO_MAX_DIM_SIZE 65536
#define TOPO_MAX_CHIPS 1048576
#define TOPO_MAX_RATE 1e6    /* GB/s or TFLOP/s */
#define TOPO_MAX_MEMORY 1e9  /* GiB */
#define TOPO_MAX_LATENCY 1e6 /* us, one second */
/* The low ends, for the same reason: a rate of 1e-300 GB/s or an efficiency of 1e-300 is no
 * machine, and it printed step times of inf s or 38-digit seconds with -nan columns. A chip
 * below 1 GFLOP/s, a link or memory below 1 MB/s, or a kernel reaching less than 0.1% of its
 * peak is a typo (the lowest shipped values are 0.118 TFLOP/s, 12 GB/s and 0.019). */
#define TOPO_MIN_RATE 1e-3     /* GB/s or TFLOP/s */
#define TOPO_MIN_FRACTION 1e-3 /* efficiencies and bandwidth fractions */

#define GB 1e9
#define GIB 1073741824.0
#define TFLOP 1e12
#define US 1e-6

static const char *const topology_keys[] = {"name",
                                            "pue",
                                            "network_W_per_chip",
                                            "storage_GBps_per_chip",
                                            "mtbf_chip_hours",
                                            "mtbf_node_hours",
                                            "chips_per_node",
                                            "restart_minutes",
                                            NULL};
/* The [chip] keys of price, power and memory beyond memory_GiB: with memory_GiB they leave the
 * step time, and so a calibrated profile's fit, as it was (merge_profile). */
#define CHIP_KEEPS_FIT_KEYS                                                                        \
  "memory_reserve_GiB", "allocator_overhead", "price_per_hour", "tdp_W", "comm_W", "idle_W"
static const char *const chip_keys[] = {"name",
                                        "profile",
                                        "calibrated",
                                        "peak_tflops",
                                        "peak_tflops_bf16",
                                        "peak_tflops_fp8",
                                        "peak_tflops_fp32",
                                        "peak_tflops_tf32",
                                        "memory_GiB",
                                        "memory_bandwidth_GBps",
                                        "memory_bandwidth_efficiency",
                                        "compute_efficiency",
                                        "compute_efficiency_fp32",
                                        "op_overhead_us",
                                        "kernel_launch_us",
                                        "collective_launch_us",
                                        "gemm_k_overhead",
                                        "flash_efficiency",
                                        "flash_efficiency_triton",
                                        "flash_efficiency_fa1",
                                        "fp8_split_accum_rate",
                                        "compute_units",
                                        "collective_sms",
                                        "gemm_tile",
                                        "systolic_array",
                                        CHIP_KEEPS_FIT_KEYS,
                                        NULL};
static const char *const host_keys[] = {"link_bandwidth_GBps", "memory_GiB", "cpu_tflops",
                                        "nvme_bandwidth_GBps", "nvme_GiB",   NULL};
static const char *const dim_keys[] = {"size",
                                       "shape",
                                       "link_bandwidth_GBps",
                                       "latency_us",
                                       "bandwidth_efficiency",
                                       "gpus_per_nic",
                                       "nics_per_node",
                                       "in_switch_reduction",
                                       "in_switch_reduction_efficiency",
                                       "nccl_ll_bandwidth_fraction",
                                       "nccl_ll128_bandwidth_fraction",
                                       "nccl_ll_base_latency_us",
                                       "nccl_ll128_base_latency_us",
                                       "nccl_simple_base_latency_us",
                                       "nccl_ll_latency_us",
                                       "nccl_ll128_latency_us",
                                       "nccl_local_bandwidth_GBps",
                                       "nccl_ll_channel_latency_us",
                                       "nccl_channels",
                                       "nccl_tree_bandwidth_GBps",
                                       "nccl_tree_chunk_latency_us",
                                       "nccl_model_bus_bandwidth_GBps",
                                       "nccl_model_channels",
                                       "nccl_net_overhead_us",
                                       "nccl_node_hop_latency_us",
                                       "twist",
                                       "pair_links",
                                       "pair_relay_efficiency",
                                       "transfer_stall_us",
                                       NULL};

const char *ts_shape_name(ts_shape s)
{
  switch (s) {
  case TS_SHAPE_RING:
    return "ring";
  case TS_SHAPE_MESH:
    return "mesh";
  case TS_SHAPE_SWITCH:
    return "switch";
  }
  return "?";
}

/*
 * A key's text into *v (g_free it), or, when the key is missing, def into *out (*v stays NULL)
 * when has_default, else the one-line "missing" error.
 */
static gboolean read_raw(GKeyFile *kf, const char *path, const char *group, const char *key,
                         gboolean has_default, double def, const char *what, char **v, double *out,
                         GError **error)
{
  if (!ts_kf_string(kf, path, group, key, NULL, v, error))
    return FALSE;
  if (*v != NULL)
    return TRUE;
  if (has_default) {
    *out = def;
    return TRUE;
  }
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s: missing; expected %s", path, group,
              key, what);
  return FALSE;
}

/*
 * Reads a number in (0, hi] (lo_open) or [lo, hi]. ts_kf_double covers closed ranges only and
 * would print "[0, hi]" for a bandwidth, which wrongly suggests 0 is accepted; this keeps the
 * same message shape with the right interval. Missing key: def when has_default, else an error.
 */
static gboolean read_number(GKeyFile *kf, const char *path, const char *group, const char *key,
                            gboolean has_default, double def, double lo, gboolean lo_open,
                            double hi, const char *what, double *out, GError **error)
{
  if (!lo_open)
    return ts_kf_double(kf, path, group, key, has_default, def, lo, hi, what, out, error);
  g_autofree char *v = NULL;
  if (!read_raw(kf, path, group, key, has_default, def, what, &v, out, error))
    return FALSE;
  if (v == NULL)
    return TRUE;
  double d;
  if (!ts_parse_double(v, &d) || !(d > lo) || d > hi) {
    g_autofree char *los = ts_dtostr(lo);
    g_autofree char *his = ts_dtostr(hi);
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s='%s': expected %s in (%s, %s]", path,
                group, key, v, what, los, his);
    return FALSE;
  }
  *out = d;
  return TRUE;
}

/* An optional latency key in microseconds, [0, TOPO_MAX_LATENCY] (0 when missing), stored in
 * seconds. */
static gboolean read_us(GKeyFile *kf, const char *path, const char *group, const char *key,
                        const char *what, double *seconds, GError **error)
{
  double us;
  if (!read_number(kf, path, group, key, TRUE, 0.0, 0, FALSE, TOPO_MAX_LATENCY, what, &us, error))
    return FALSE;
  *seconds = us * US;
  return TRUE;
}

/*
 * A rate or a fraction: a value in [lo, hi], or 0 when zero_ok (the key's "none"). Missing key:
 * def when has_default, else an error.
 */
static gboolean read_rate(GKeyFile *kf, const char *path, const char *group, const char *key,
                          gboolean has_default, double def, gboolean zero_ok, double lo, double hi,
                          const char *what, double *out, GError **error)
{
  g_autofree char *v = NULL;
  if (!read_raw(kf, path, group, key, has_default, def, what, &v, out, error))
    return FALSE;
  if (v == NULL)
    return TRUE;
  double d;
  if (!ts_parse_double(v, &d) || !((zero_ok && d == 0) || (d >= lo && d <= hi))) {
    g_autofree char *los = ts_dtostr(lo);
    g_autofree char *his = ts_dtostr(hi);
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s='%s': expected %s in [%s, %s]%s",
                path, group, key, v, what, los, his, zero_ok ? " or 0" : "");
    return FALSE;
  }
  *out = d;
  return TRUE;
}

/* A required, non-empty string value. */
static gboolean read_name(GKeyFile *kf, const char *path, const char *group, const char *key,
                          const char *what, char **out, GError **error)
{
  g_autofree char *v = NULL;
  if (!ts_kf_string(kf, path, group, key, NULL, &v, error))
    return FALSE;
  if (v == NULL || *v == '\0') {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s: %s; expected %s", path, group, key,
                v == NULL ? "missing" : "empty", what);
    return FALSE;
  }
  *out = g_steal_pointer(&v);
  return TRUE;
}

/* Dimension names end up in split specifications ("tensor=x") and CSV columns, so they are
 * identifiers: a letter, then letters, digits or '_'. */
static gboolean valid_dim_name(const char *s)
{
  if (!g_ascii_isalpha(*s))
    return FALSE;
  for (; *s != '\0'; s++)
    if (!g_ascii_isalnum(*s) && *s != '_')
      return FALSE;
  return TRUE;
}

static gboolean read_chip(GKeyFile *kf, const char *path, ts_chip *c, GError **error)
{
  const char *g = "chip";
  if (!g_key_file_has_group(kf, g)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [chip]: missing group; expected the chip kind (name, peak_tflops, memory_GiB, "
                "memory_bandwidth_GBps)",
                path);
    return FALSE;
  }
  double tflops, mem_gib, mem_gbps, overhead_us, fp8, fp32, tf32, mem_eff, launch_us, k_over,
      coll_launch_us;
  gint64 units, systolic, coll_sms;
  g_autofree char *tile = NULL, *calibrated = NULL;
  /* The bf16 rate: peak_tflops_bf16, or the older peak_tflops (one of them). */
  const char *peak_key =
      g_key_file_has_key(kf, g, "peak_tflops_bf16", NULL) ? "peak_tflops_bf16" : "peak_tflops";
  if (g_key_file_has_key(kf, g, "peak_tflops_bf16", NULL) &&
      g_key_file_has_key(kf, g, "peak_tflops", NULL)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [chip] peak_tflops: given with peak_tflops_bf16; expected one of them (the "
                "older peak_tflops is the bf16 rate)",
                path);
    return FALSE;
  }
  if (!ts_kf_check_keys(kf, path, g, chip_keys, error) ||
      !read_name(kf, path, g, "name", "the chip's name, e.g. TPU v3", &c->name, error) ||
      !read_rate(kf, path, g, peak_key, FALSE, 0, FALSE, TOPO_MIN_RATE, TOPO_MAX_RATE,
                 "a dense bf16 peak in TFLOP/s (1e12 FLOP/s)", &tflops, error) ||
      !read_rate(kf, path, g, "peak_tflops_fp8", TRUE, 0, TRUE, TOPO_MIN_RATE, TOPO_MAX_RATE,
                 "a dense FP8 peak in TFLOP/s (0 = none)", &fp8, error) ||
      !read_rate(kf, path, g, "peak_tflops_fp32", TRUE, 0, TRUE, TOPO_MIN_RATE, TOPO_MAX_RATE,
                 "a dense fp32 peak in TFLOP/s (0 = none)", &fp32, error) ||
      !read_rate(kf, path, g, "peak_tflops_tf32", TRUE, 0, TRUE, TOPO_MIN_RATE, TOPO_MAX_RATE,
                 "a dense TF32 tensor-core peak in TFLOP/s (0 = none)", &tf32, error) ||
      !read_number(kf, path, g, "memory_GiB", FALSE, 0, 0, TRUE, TOPO_MAX_MEMORY,
                   "a device memory capacity in GiB", &mem_gib, error) ||
      !read_rate(kf, path, g, "memory_bandwidth_GBps", FALSE, 0, FALSE, TOPO_MIN_RATE,
                 TOPO_MAX_RATE, "a device memory bandwidth in GB/s (1e9 B/s)", &mem_gbps, error) ||
      !read_rate(kf, path, g, "memory_bandwidth_efficiency", TRUE, 1.0, FALSE, TOPO_MIN_FRACTION,
                 1.0, "the fraction of memory_bandwidth_GBps memory-bound kernels reach", &mem_eff,
                 error) ||
      !read_rate(kf, path, g, "compute_efficiency", TRUE, 1.0, FALSE, TOPO_MIN_FRACTION, 1.0,
                 "the fraction of peak a large GEMM reaches", &c->compute_efficiency, error) ||
      !read_rate(kf, path, g, "compute_efficiency_fp32", TRUE, 0, TRUE, TOPO_MIN_FRACTION, 1.0,
                 "the fraction of peak_tflops_fp32 a large fp32 GEMM reaches (0 = "
                 "compute_efficiency)",
                 &c->compute_efficiency_fp32, error) ||
      !read_number(kf, path, g, "op_overhead_us", TRUE, 0, 0, FALSE, TOPO_MAX_LATENCY,
                   "the minimum time of one compute op in us (0 = none)", &overhead_us, error) ||
      !read_number(kf, path, g, "kernel_launch_us", TRUE, 0, 0, FALSE, TOPO_MAX_LATENCY,
                   "the host's time per kernel launch in us (0 = none)", &launch_us, error) ||
      !read_number(kf, path, g, "collective_launch_us", TRUE, 0, 0, FALSE, TOPO_MAX_LATENCY,
                   "the host's time to issue one collective in us (0 = none)", &coll_launch_us,
                   error) ||
      !read_number(kf, path, g, "gemm_k_overhead", TRUE, 0, 0, FALSE, 1e6,
                   "a GEMM tile's fixed cost as extra reduction length k (0 = none)", &k_over,
                   error) ||
      !read_rate(kf, path, g, "flash_efficiency", TRUE, 0, TRUE, TOPO_MIN_FRACTION, 1.0,
                 "the fused attention core's fraction of the GEMM rate (0 = costed as GEMMs)",
                 &c->flash_efficiency, error) ||
      !read_rate(kf, path, g, "flash_efficiency_triton", TRUE, 0, TRUE, TOPO_MIN_FRACTION, 1.0,
                 "FlashAttention's Triton kernel's fraction of the GEMM rate (0 = none)",
                 &c->flash_efficiency_triton, error) ||
      !read_rate(kf, path, g, "flash_efficiency_fa1", TRUE, 0, TRUE, TOPO_MIN_FRACTION, 1.0,
                 "FlashAttention 1's fraction of the GEMM rate (0 = none)",
                 &c->flash_efficiency_fa1, error) ||
      !read_rate(kf, path, g, "fp8_split_accum_rate", TRUE, 0, TRUE, TOPO_MIN_FRACTION, 1.0,
                 "an FP8 GEMM's rate with fp32 promotion as a fraction of its fast-"
                 "accumulation rate (0 = the same)",
                 &c->fp8_split_accum_rate, error) ||
      !ts_kf_int(kf, path, g, "compute_units", TRUE, 0, 0, 100000,
                 "the GPU's streaming multiprocessors (0 = no wave model)", &units, error) ||
      !ts_kf_int(kf, path, g, "collective_sms", TRUE, 0, 0, 100000,
                 "the streaming multiprocessors a running collective holds (0 = none)", &coll_sms,
                 error) ||
      !ts_kf_int(kf, path, g, "systolic_array", TRUE, 0, 0, 4096,
                 "the TPU systolic array's width (0 = not a TPU)", &systolic, error) ||
      !ts_kf_string(kf, path, g, "gemm_tile", NULL, &tile, error) ||
      !ts_kf_string(kf, path, g, "calibrated", "false", &calibrated, error))
    return FALSE;
  c->peak_flops_fp8 = fp8 * TFLOP;
  c->peak_flops_fp32 = fp32 * TFLOP;
  c->peak_flops_tf32 = tf32 * TFLOP;
  c->memory_bw_efficiency = mem_eff;
  c->kernel_launch_s = launch_us * US;
  c->collective_launch_s = coll_launch_us * US;
  c->gemm_k_overhead = k_over;
  c->compute_units = (int)units;
  if (coll_sms > 0 && units == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [chip] collective_sms: %" G_GINT64_FORMAT
                " without compute_units; expected compute_units, the GPU's streaming "
                "multiprocessors the collective shares (or no collective_sms)",
                path, coll_sms);
    return FALSE;
  }
  if (coll_sms > 0 && coll_sms >= units) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [chip] collective_sms: %" G_GINT64_FORMAT
                "; expected fewer than compute_units (%" G_GINT64_FORMAT
                ", the SMs the collective shares the chip with)",
                path, coll_sms, units);
    return FALSE;
  }
  c->collective_sms = (int)coll_sms;
  c->systolic = (int)systolic;
  if (tile != NULL) {
    g_strstrip(tile);
    gint64 tm = 0, tn = 0;
    g_auto(GStrv) mn = g_strsplit(tile, "x", 3);
    if (g_strv_length(mn) != 2 || !ts_parse_int(mn[0], 1, 4096, &tm) ||
        !ts_parse_int(mn[1], 1, 4096, &tn)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [chip] gemm_tile='%s': expected MxN, the GEMM output tile, e.g. 128x256",
                  path, tile);
      return FALSE;
    }
    c->tile_m = (int)tm, c->tile_n = (int)tn;
  }
  /* A chip is calibrated only when its file or shipped profile says so: an inline [chip]
   * without the key holds rates nobody fitted (often a datasheet peak at compute_efficiency 1),
   * and its MFU must read as the upper bound it is. Until December 2026 the default was true. */
  g_strstrip(calibrated);
  if (strcmp(calibrated, "true") == 0)
    c->uncalibrated = FALSE;
  else if (strcmp(calibrated, "false") == 0)
    c->uncalibrated = TRUE;
  else {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [chip] calibrated='%s': expected true (fitted to measurements) or false", path,
                calibrated);
    return FALSE;
  }
  c->op_overhead_s = overhead_us * US;
  c->memory_reserve_bytes = -1.0;
  if (g_key_file_has_key(kf, g, "memory_reserve_GiB", NULL)) {
    double reserve_gib;
    if (!read_number(kf, path, g, "memory_reserve_GiB", FALSE, 0, 0, FALSE, TOPO_MAX_MEMORY,
                     "device memory the runtime holds, in GiB (0 = none)", &reserve_gib, error))
      return FALSE;
    if (reserve_gib >= mem_gib) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [chip] memory_reserve_GiB: %g; expected less than memory_GiB (%g)", path,
                  reserve_gib, mem_gib);
      return FALSE;
    }
    c->memory_reserve_bytes = reserve_gib * GIB;
  }
  c->allocator_overhead = -1.0;
  if (g_key_file_has_key(kf, g, "allocator_overhead", NULL) &&
      !read_number(kf, path, g, "allocator_overhead", FALSE, 0, 0, FALSE, 1.0,
                   "the fraction of the allocated peak the memory allocator reserves on top "
                   "(0 = none, at most 1)",
                   &c->allocator_overhead, error))
    return FALSE;
  c->peak_flops = tflops * TFLOP;
  c->memory_bytes = mem_gib * GIB;
  c->memory_bw_Bps = mem_gbps * GB;

  /* [host] is optional and so is every key in it: 0 means "this machine has none", which the
   * offload planner must treat as "offload impossible", never as infinitely fast. */
  g = "host";
  double link = 0, hmem = 0, cpu = 0, nvme_bw = 0, nvme = 0;
  if (g_key_file_has_group(kf, g) &&
      (!ts_kf_check_keys(kf, path, g, host_keys, error) ||
       !read_rate(kf, path, g, "link_bandwidth_GBps", TRUE, 0, TRUE, TOPO_MIN_RATE, TOPO_MAX_RATE,
                  "a chip-to-host bandwidth in GB/s, one direction (0 = none)", &link, error) ||
       !read_number(kf, path, g, "memory_GiB", TRUE, 0, 0, FALSE, TOPO_MAX_MEMORY,
                    "host memory per chip in GiB (0 = none)", &hmem, error) ||
       !read_rate(kf, path, g, "cpu_tflops", TRUE, 0, TRUE, TOPO_MIN_RATE, TOPO_MAX_RATE,
                  "host CPU TFLOP/s per chip (0 = none)", &cpu, error) ||
       !read_rate(kf, path, g, "nvme_bandwidth_GBps", TRUE, 0, TRUE, TOPO_MIN_RATE, TOPO_MAX_RATE,
                  "an NVMe bandwidth per chip in GB/s (0 = none)", &nvme_bw, error) ||
       !read_number(kf, path, g, "nvme_GiB", TRUE, 0, 0, FALSE, TOPO_MAX_MEMORY,
                    "NVMe capacity per chip in GiB (0 = none)", &nvme, error)))
    return FALSE;
  c->host_link_bw_Bps = link * GB;
  c->host_memory_bytes = hmem * GIB;
  c->host_flops = cpu * TFLOP;
  c->nvme_bw_Bps = nvme_bw * GB;
  c->nvme_bytes = nvme * GIB;
  return TRUE;
}

/* NICs and rails: on a switch dimension after the first, gpus_per_nic (or nics_per_node)
 * says how many consecutive chips of dimension 0 share one port into this switch; every chip
 * has its own port by default. in_switch_reduction (switch dims): the switch reduces and
 * multicasts (NVLink SHARP). first_dim_size: the size of dimension 0. */
static gboolean read_ports(GKeyFile *kf, const char *path, const char *group, ts_shape shape,
                           gint64 chips_before, gint64 first_dim_size, ts_dim *d, GError **error)
{
  gint64 per_nic = 0, nics = 0;
  d->chips_per_port = 1;
  d->in_switch_efficiency = 0.85;
  g_autofree char *red = NULL;
  if (!ts_kf_int(kf, path, group, "gpus_per_nic", TRUE, 0, 1, TOPO_MAX_DIM_SIZE,
                 "a count of chips sharing one NIC", &per_nic, error) ||
      !ts_kf_int(kf, path, group, "nics_per_node", TRUE, 0, 1, TOPO_MAX_DIM_SIZE,
                 "a count of NICs per node", &nics, error) ||
      !ts_kf_string(kf, path, group, "in_switch_reduction", NULL, &red, error) ||
      !read_rate(kf, path, group, "in_switch_reduction_efficiency", TRUE, 0.85, FALSE,
                 TOPO_MIN_FRACTION, 1.0,
                 "the fraction of link bandwidth an in-switch (NVLS) all-reduce reaches",
                 &d->in_switch_efficiency, error) ||
      !read_rate(kf, path, group, "nccl_ll_bandwidth_fraction", TRUE, 0.5, FALSE, TOPO_MIN_FRACTION,
                 1.0, "the fraction of Simple's bandwidth NCCL's LL protocol reaches",
                 &d->ll_bw_frac, error) ||
      !read_rate(kf, path, group, "nccl_ll128_bandwidth_fraction", TRUE, 0.92, FALSE,
                 TOPO_MIN_FRACTION, 1.0,
                 "the fraction of Simple's bandwidth NCCL's LL128 protocol reaches",
                 &d->ll128_bw_frac, error))
    return FALSE;
  static const char *const base_keys[3] = {"nccl_ll_base_latency_us", "nccl_ll128_base_latency_us",
                                           "nccl_simple_base_latency_us"};
  for (int q = 0; q < 3; q++) {
    double v;
    if (!read_number(kf, path, group, base_keys[q], TRUE, 0.0, 0, TRUE, TOPO_MAX_LATENCY,
                     "a fixed latency per NCCL collective in microseconds", &v, error))
      return FALSE;
    d->nccl_base_s[q] = v * US;
  }
  static const char *const step_keys[2] = {"nccl_ll_latency_us", "nccl_ll128_latency_us"};
  for (int q = 0; q < 2; q++) {
    double v;
    if (!read_number(kf, path, group, step_keys[q], TRUE, 0.0, 0, TRUE, TOPO_MAX_LATENCY,
                     "a per-step latency in microseconds", &v, error))
      return FALSE;
    d->nccl_step_s[q] = v * US;
  }
  if (!read_rate(kf, path, group, "nccl_local_bandwidth_GBps", TRUE, 0.0, TRUE, TOPO_MIN_RATE,
                 TOPO_MAX_RATE, "a rate in GB/s (0 = no local cost)", &d->nccl_local_Bps, error))
    return FALSE;
  d->nccl_local_Bps *= GB;
  if (!read_us(kf, path, group, "nccl_ll_channel_latency_us",
               "a latency per LL channel in microseconds (0 = none)", &d->nccl_ll_channel_s, error))
    return FALSE;
  gint64 node_ch = 0;
  if (!ts_kf_int(kf, path, group, "nccl_channels", TRUE, 0, 0, 64,
                 "a channel count (0 = no piece padding)", &node_ch, error))
    return FALSE;
  d->nccl_channels = (int)node_ch;
  if (node_ch > 0 && chips_before > 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] nccl_channels='%" G_GINT64_FORMAT "': expected the first dimension "
                "(NCCL's channels inside a node)",
                path, group, node_ch);
    return FALSE;
  }
  if (!read_rate(kf, path, group, "nccl_tree_bandwidth_GBps", TRUE, 0.0, TRUE, TOPO_MIN_RATE,
                 TOPO_MAX_RATE, "a bus bandwidth in GB/s (0 = no cap)", &d->nccl_tree_Bps, error))
    return FALSE;
  d->nccl_tree_Bps *= GB;
  if (!read_us(kf, path, group, "nccl_tree_chunk_latency_us",
               "a latency per chunk of the tree in microseconds (0 = none)", &d->nccl_tree_chunk_s,
               error))
    return FALSE;
  if (d->nccl_tree_chunk_s > 0 && chips_before <= 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] nccl_tree_chunk_latency_us: expected a dimension after the first (the "
                "tree's chunks across nodes)",
                path, group);
    return FALSE;
  }
  if (!read_rate(kf, path, group, "nccl_model_bus_bandwidth_GBps", TRUE, 0.0, TRUE, TOPO_MIN_RATE,
                 TOPO_MAX_RATE, "a bus bandwidth in GB/s (0 = what Simple reaches)",
                 &d->nccl_model_Bps, error))
    return FALSE;
  d->nccl_model_Bps *= GB;
  gint64 model_ch = 0;
  if (!ts_kf_int(kf, path, group, "nccl_model_channels", TRUE, 0, 0, 64,
                 "a channel count (0 = the fitted costs choose)", &model_ch, error))
    return FALSE;
  d->nccl_model_channels = (int)model_ch;
  if (!read_us(kf, path, group, "nccl_net_overhead_us",
               "a latency in microseconds (0 = NCCL's 1 us)", &d->nccl_net_overhead_s, error) ||
      !read_us(kf, path, group, "nccl_node_hop_latency_us",
               "a per-hop latency in microseconds (0 = the node's own)", &d->nccl_node_hop_s,
               error))
    return FALSE;
  if (d->nccl_node_hop_s > 0 && chips_before <= 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] nccl_node_hop_latency_us: expected a dimension after the first (the "
                "node's hop inside groups that span this dimension)",
                path, group);
    return FALSE;
  }
  /* NCCL's model across nodes (ts_coll_algos.c) reads both only on a switch dimension after
   * the first: elsewhere they were ignored without a word. */
  if (model_ch > 0 && (shape != TS_SHAPE_SWITCH || chips_before <= 1)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] nccl_model_channels='%" G_GINT64_FORMAT "': expected a switch "
                "dimension after the first (NCCL's channels across nodes; dimension 0 is the "
                "node)",
                path, group, model_ch);
    return FALSE;
  }
  if (d->nccl_net_overhead_s > 0 && model_ch == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] nccl_net_overhead_us: expected nccl_model_channels > 0 with it (only "
                "NCCL's tuning model across nodes reads it)",
                path, group);
    return FALSE;
  }
  if (per_nic > 0 && nics > 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] gpus_per_nic and nics_per_node: expected one of the two", path, group);
    return FALSE;
  }
  if (per_nic > 0 || nics > 0) {
    const char *key = per_nic > 0 ? "gpus_per_nic" : "nics_per_node";
    if (shape != TS_SHAPE_SWITCH || chips_before <= 1) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] %s: expected a switch dimension after the first (the network "
                  "between nodes; dimension 0 is the node)",
                  path, group, key);
      return FALSE;
    }
    /* Chips of a node: the first dimension (rails: chip k of every node on NIC k / share). */
    gint64 node = first_dim_size;
    if (nics > 0 && node % nics != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] nics_per_node='%" G_GINT64_FORMAT "': expected a divisor of the first "
                  "dimension's %" G_GINT64_FORMAT " chips per node",
                  path, group, nics, node);
      return FALSE;
    }
    if (per_nic > 0 && node % per_nic != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] gpus_per_nic='%" G_GINT64_FORMAT "': expected a divisor of the first "
                  "dimension's %" G_GINT64_FORMAT " chips per node",
                  path, group, per_nic, node);
      return FALSE;
    }
    d->chips_per_port = (int)(per_nic > 0 ? per_nic : node / nics);
  }
  if (red != NULL) {
    if (strcmp(red, "true") == 0) {
      d->in_switch_reduction = TRUE;
    } else if (strcmp(red, "false") != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] in_switch_reduction='%s': expected true or false", path, group, red);
      return FALSE;
    }
    if (d->in_switch_reduction && shape != TS_SHAPE_SWITCH) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] in_switch_reduction=true: expected a switch dimension (NVLink SHARP "
                  "reduces inside an NVSwitch)",
                  path, group);
      return FALSE;
    }
  }
  return TRUE;
}

/* ---- [dim.X] pair_links: a direct-connect NVLink mesh (DGX-1's hybrid cube-mesh) -------- */

#define PAIR_MAX TS_PAIR_MAX
#define PAIR_SEARCH_STEPS 200000 /* ring-search budget: the search is exact below it */

typedef struct {
  int n;
  int links[PAIR_MAX][PAIR_MAX]; /* links between chips i and j, as written */
  int cap[PAIR_MAX][PAIR_MAX];   /* directed link-directions left for further rings */
  long steps;
  int best;
  gboolean relays; /* hops through an intermediate member allowed */
} ring_search;

/* One hop u -> v of a ring: the direct links when there are any (NCCL's NVL path), else through
 * one intermediate member joined to both (NCCL's NVB path: NVLink through another GPU). Takes
 * the capacity and returns the relay (-1: direct), or -2 when no NVLink path has room. */
static int take_hop(ring_search *r, int u, int v)
{
  if (r->links[u][v] > 0) {
    if (r->cap[u][v] == 0)
      return -2;
    r->cap[u][v]--;
    return -1;
  }
  for (int w = 0; r->relays && w < r->n; w++)
    if (w != u && w != v && r->links[u][w] > 0 && r->links[w][v] > 0 && r->cap[u][w] > 0 &&
        r->cap[w][v] > 0) {
      r->cap[u][w]--;
      r->cap[w][v]--;
      return w;
    }
  return -2;
}

static void give_hop(ring_search *r, int u, int v, int relay)
{
  if (relay < 0) {
    r->cap[u][v]++;
  } else {
    r->cap[u][relay]++;
    r->cap[relay][v]++;
  }
}

/* No chip can be in more rings than it has link-directions out. */
static int ring_bound(const ring_search *r)
{
  int bound = INT_MAX;
  for (int u = 0; u < r->n; u++) {
    int out = 0;
    for (int v = 0; v < r->n; v++)
      out += r->cap[u][v];
    bound = MIN(bound, out);
  }
  return bound;
}

static void search_rings(ring_search *r, int rings);

/* Extends a ring from chip u with `len` members placed; at the last member, closes it on chip
 * 0 and searches for the next ring. */
static void extend_ring(ring_search *r, int rings, int u, int len, guint32 used)
{
  if (r->best >= rings + 1 + ring_bound(r) || ++r->steps > PAIR_SEARCH_STEPS)
    return;
  if (len == r->n) {
    int relay = take_hop(r, u, 0);
    if (relay == -2)
      return;
    r->best = MAX(r->best, rings + 1);
    search_rings(r, rings + 1);
    give_hop(r, u, 0, relay);
    return;
  }
  for (int v = 1; v < r->n; v++) {
    if (used & (1u << v))
      continue;
    int relay = take_hop(r, u, v);
    if (relay == -2)
      continue;
    extend_ring(r, rings, v, len + 1, used | (1u << v));
    give_hop(r, u, v, relay);
  }
}

static void search_rings(ring_search *r, int rings)
{
  if (ring_bound(r) > 0)
    extend_ring(r, rings, 0, 1, 1u);
}

/* How many rings NCCL's topology search lays over chips 0..n-1 of the mesh, each at the full
 * rate of one link (graph/search.cc searches ring channels hop by hop, taking each link's
 * bandwidth as it uses it; two chips form the ring u -> v -> u). Each directed link-direction
 * carries one ring. The search tries direct NVLink paths first and widens to paths through
 * another GPU (NVB) only when no ring closes over direct links alone: vTrain's V100 tables
 * show 2 rings over GPUs 0-5, which direct links allow and a third through GPU 0 would pass.
 * Exact: the search stops only at the bound every chip's links set, or at the step budget. */
static int pair_rings(const int links[PAIR_MAX][PAIR_MAX], int n, gboolean *relayed)
{
  *relayed = FALSE;
  if (n < 2)
    return 0;
  for (int relays = 0; relays < 2; relays++) {
    ring_search r = {.n = n, .relays = relays};
    memcpy(r.links, links, sizeof r.links);
    memcpy(r.cap, links, sizeof r.cap);
    search_rings(&r, 0);
    if (r.best > 0) {
      *relayed = relays;
      return r.best;
    }
  }
  return 0;
}

/* A whole number written as decimal digits only, in [0, hi]; *p moves past it. sscanf's %d
 * took signs, inner blanks and values past INT_MAX (4294967296 read as chip 0). */
static gboolean pair_number(const char **p, int hi, int *out)
{
  gint64 v = 0;
  const char *s = *p;
  if (!g_ascii_isdigit(*s))
    return FALSE;
  for (; g_ascii_isdigit(*s); s++) {
    v = v * 10 + (*s - '0');
    if (v > hi)
      return FALSE;
  }
  *out = (int)v;
  *p = s;
  return TRUE;
}

/* [dim.X] pair_links = A-B:N,...: the NVLink links between chips A and B of the dimension (a
 * direct-connect mesh, not a switch); a cut dimension (--vary dim.X.size) keeps chips 0..n-1.
 * Fills d->pair_rings for every n. d->size is the file's size: every chip named is below it,
 * and a mesh of more than TS_PAIR_MAX chips is refused (its rings are searched exactly). */
static gboolean read_pair_links(GKeyFile *kf, const char *path, const char *group, ts_dim *d,
                                GError **error)
{
  d->pair_links = g_key_file_has_key(kf, group, "pair_links", NULL);
  if (!d->pair_links)
    return TRUE;
  g_autofree char *v = g_key_file_get_value(kf, group, "pair_links", NULL);
  if (v == NULL || *g_strstrip(v) == '\0') {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] pair_links='': expected A-B:N,... (N links between chips A and B)", path,
                group);
    return FALSE;
  }
  if (d->size > PAIR_MAX) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] pair_links: size = %d; expected a mesh of at most %d chips with "
                "pair_links",
                path, group, d->size, PAIR_MAX);
    return FALSE;
  }
  int links[PAIR_MAX][PAIR_MAX] = {{0}}, top = 0;
  g_auto(GStrv) items = g_strsplit(v, ",", -1);
  for (int i = 0; items[i] != NULL; i++) {
    const char *it = g_strstrip(items[i]), *q = it;
    int a = -1, b = -1, nl = 0;
    if (!pair_number(&q, d->size - 1, &a) || *q++ != '-' || !pair_number(&q, d->size - 1, &b) ||
        *q++ != ':' || !pair_number(&q, 64, &nl) || *q != '\0' || a == b || nl < 1 ||
        links[a][b] != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] pair_links item '%s': expected A-B:N (chips A != B below the size, "
                  "%d, each pair once, N links from 1 to 64), comma-separated",
                  path, group, it, d->size);
      return FALSE;
    }
    links[a][b] = links[b][a] = nl;
    top = MAX(top, MAX(a, b) + 1);
  }
  d->pair_chips = d->size;
  /* Chips past the last one named have no links: no ring reaches them. */
  for (int n = 0; n <= PAIR_MAX; n++)
    d->pair_rings[n] = n <= top ? pair_rings(links, n, &d->pair_relayed[n]) : 0;
  return TRUE;
}

/* A pair_links mesh's port rate over chips 0..size-1: its rings times one link (times
 * pair_relay_efficiency when the rings hop through another GPU), or PCIe (one link's rate if
 * the file gives no host link) without a ring over NVLink. */
static double pair_port_Bps(const ts_dim *d, int size)
{
  int rings = size <= TS_PAIR_MAX ? d->pair_rings[size] : 0;
  double ring_Bps =
      d->pair_link_Bps * (rings > 0 && d->pair_relayed[size] ? d->pair_relay_eff : 1.0);
  return rings > 0 ? rings * ring_Bps : d->pair_pcie_Bps > 0 ? d->pair_pcie_Bps : d->pair_link_Bps;
}

gboolean ts_topo_dim_set_size(ts_dim *d, int size, GError **error)
{
  /* A pair_links mesh names the links of its file's chips: a larger one would put the chips
   * past them on PCIe, a machine nobody wrote down (and past 16 chips no ring is searched). */
  if (d->pair_links && size > d->pair_chips) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "[dim.%s] size %d: pair_links names the links of %d chips; expected at most %d "
                "(a cut keeps chips 0..n-1 and their links)",
                d->name, size, d->pair_chips, d->pair_chips);
    return FALSE;
  }
  if (d->pair_links) {
    /* The port follows the cut's rings; a what-if already applied to it (--vary
     * link_bandwidth_GBps before dim.X.size, a slow fabric) is kept as a factor. */
    double was = pair_port_Bps(d, d->size);
    double scale = was > 0 ? d->link_bw_Bps / was : 1.0;
    d->link_bw_Bps = pair_port_Bps(d, size) * scale;
  }
  d->size = size;
  return TRUE;
}

static gboolean read_dim(GKeyFile *kf, const char *path, const char *group, gint64 chips_before,
                         gint64 first_dim_size, const ts_chip *chip, ts_dim *d, GError **error)
{
  gint64 size;
  double bw_gbps, lat_us, bw_eff, stall_us;
  g_autofree char *shape = NULL;
  if (!ts_kf_check_keys(kf, path, group, dim_keys, error) ||
      !ts_kf_int(kf, path, group, "size", FALSE, 0, 1, TOPO_MAX_DIM_SIZE, "a chip count", &size,
                 error) ||
      !read_name(kf, path, group, "shape", "ring, mesh or switch", &shape, error))
    return FALSE;
  if (strcmp(shape, "ring") == 0)
    d->shape = TS_SHAPE_RING;
  else if (strcmp(shape, "mesh") == 0)
    d->shape = TS_SHAPE_MESH;
  else if (strcmp(shape, "switch") == 0)
    d->shape = TS_SHAPE_SWITCH;
  else {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] shape='%s': expected ring (torus line, wraps around), mesh (no "
                "wrap-around) or switch (one port per chip into a non-blocking switch)",
                path, group, shape);
    return FALSE;
  }
  if (!read_rate(kf, path, group, "link_bandwidth_GBps", FALSE, 0, FALSE, TOPO_MIN_RATE,
                 TOPO_MAX_RATE, "a one-direction link bandwidth in GB/s (1e9 B/s)", &bw_gbps,
                 error) ||
      !read_number(kf, path, group, "latency_us", FALSE, 0, 0, FALSE, TOPO_MAX_LATENCY,
                   "a latency in microseconds", &lat_us, error) ||
      !read_rate(kf, path, group, "bandwidth_efficiency", TRUE, 1.0, FALSE, TOPO_MIN_FRACTION, 1.0,
                 "the fraction of link_bandwidth_GBps a transfer achieves", &bw_eff, error) ||
      !read_number(kf, path, group, "transfer_stall_us", TRUE, 0.0, 0, FALSE, TOPO_MAX_LATENCY,
                   "the chip's time per transfer over this dimension in microseconds (0 = none)",
                   &stall_us, error))
    return FALSE;
  if (chips_before * size > TOPO_MAX_CHIPS) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] size='%" G_GINT64_FORMAT "': the array would have %" G_GINT64_FORMAT
                " chips; expected at most %d in total",
                path, group, size, chips_before * size, TOPO_MAX_CHIPS);
    return FALSE;
  }
  if (!read_ports(kf, path, group, d->shape, chips_before,
                  first_dim_size > 0 ? first_dim_size : size, d, error))
    return FALSE;
  d->name = g_strdup(group + strlen("dim."));
  d->size = (int)size;
  /* The file keeps the datasheet rate and the measured fraction apart, so each can be cited;
   * every backend reads only the product (what a transfer achieves), so none can forget the
   * efficiency. */
  d->link_bw_Bps = bw_gbps * bw_eff * GB;
  d->latency_s = lat_us * US;
  if (!read_pair_links(kf, path, group, d, error) ||
      !read_rate(kf, path, group, "pair_relay_efficiency", TRUE, 1.0, FALSE, TOPO_MIN_FRACTION, 1.0,
                 "the fraction of one link's rate a ring through another GPU reaches",
                 &d->pair_relay_eff, error))
    return FALSE;
  if (!d->pair_links && g_key_file_has_key(kf, group, "pair_relay_efficiency", NULL)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] pair_relay_efficiency: expected pair_links too (it applies to the "
                "rings of a direct-connect mesh)",
                path, group);
    return FALSE;
  }
  if (d->pair_links && d->shape != TS_SHAPE_SWITCH) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] pair_links: expected shape = switch (the mesh's rings are written as "
                "each chip's port rate)",
                path, group);
    return FALSE;
  }
  /* With pair_links, link_bandwidth_GBps is one link's rate and a chip's port carries the rings
   * NCCL lays over the mesh; without a ring over NVLink the members talk over PCIe. */
  if (d->pair_links) {
    d->pair_link_Bps = d->link_bw_Bps;
    d->pair_pcie_Bps = chip->host_link_bw_Bps * bw_eff;
    d->link_bw_Bps = pair_port_Bps(d, d->size);
  }
  d->transfer_stall_s = stall_us * US;
  return TRUE;
}

/* [dim.NAME] twist = DIM:OFFSET[,DIM:OFFSET]: the ring's wrap-around link lands OFFSET places
 * along DIM (read after every dimension, as it names others). */
static gboolean read_twists(GKeyFile *kf, const char *path, ts_topo *t, GError **error)
{
  for (int d = 0; d < t->ndims; d++) {
    g_autofree char *group = g_strdup_printf("dim.%s", t->dims[d].name);
    g_autofree char *v = NULL;
    if (!ts_kf_string(kf, path, group, "twist", NULL, &v, error))
      return FALSE;
    if (v == NULL)
      continue;
    g_auto(GStrv) items = g_strsplit(v, ",", -1);
    for (char **it = items; *it != NULL; it++) {
      char *item = g_strstrip(*it);
      const char *colon = strchr(item, ':');
      g_autofree char *dn = colon ? g_strndup(item, (gsize)(colon - item)) : g_strdup(item);
      int e = ts_topo_dim_index(t, dn);
      gint64 off = 0;
      if (t->dims[d].shape != TS_SHAPE_RING || colon == NULL || e < 0 || e == d ||
          t->dims[e].shape != TS_SHAPE_RING ||
          !ts_parse_int(colon + 1, 1, t->dims[e].size - 1, &off)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "%s: [%s] twist='%s': expected DIM:OFFSET[,DIM:OFFSET] on a ring, each DIM "
                    "another ring dimension and OFFSET in [1, its size - 1] (e.g. twist = z:4 "
                    "for a 4x4x8 twisted torus)",
                    path, group, v);
        return FALSE;
      }
      t->dims[d].twist[e] = (int)off;
    }
  }
  return TRUE;
}

gboolean ts_topo_twisted(const ts_topo *t)
{
  for (int d = 0; d < t->ndims; d++)
    for (int e = 0; e < t->ndims; e++)
      if (t->dims[d].twist[e] != 0)
        return TRUE;
  return FALSE;
}

int ts_topo_neighbor(const ts_topo *t, int chip, int d, int dir)
{
  int c[TS_MAX_DIMS];
  ts_topo_coords(t, chip, c);
  const ts_dim *dm = &t->dims[d];
  int n = dm->size, v = c[d] + dir;
  if (v >= 0 && v < n) {
    c[d] = v;
    return ts_topo_chip(t, c);
  }
  if (dm->shape != TS_SHAPE_RING)
    return -1;
  c[d] = (v + n) % n;
  for (int e = 0; e < t->ndims; e++)
    if (dm->twist[e] != 0)
      c[e] = ((c[e] + dir * dm->twist[e]) % t->dims[e].size + t->dims[e].size) % t->dims[e].size;
  return ts_topo_chip(t, c);
}

/* Whether the topology's [chip] key restates the profile's value (the same number or text;
 * peak_tflops and peak_tflops_bf16 are one rate): a copied profile line changes no fitted rate. */
static gboolean same_as_profile(GKeyFile *kf, GKeyFile *pk, const char *key)
{
  g_autofree char *mine = g_key_file_get_value(kf, "chip", key, NULL);
  const gboolean peak = strcmp(key, "peak_tflops") == 0 || strcmp(key, "peak_tflops_bf16") == 0;
  const char *const alias[] = {key, peak ? "peak_tflops_bf16" : NULL, peak ? "peak_tflops" : NULL};
  for (gsize a = 0; a < G_N_ELEMENTS(alias) && alias[a] != NULL; a++) {
    g_autofree char *theirs = g_key_file_get_value(pk, "chip", alias[a], NULL);
    if (mine == NULL || theirs == NULL)
      continue;
    g_strstrip(mine), g_strstrip(theirs);
    char *e1 = NULL, *e2 = NULL;
    double x = g_ascii_strtod(mine, &e1), y = g_ascii_strtod(theirs, &e2);
    if (strcmp(mine, theirs) == 0 ||
        (e1 != mine && *e1 == '\0' && e2 != theirs && *e2 == '\0' && x == y))
      return TRUE;
  }
  return FALSE;
}

/*
 * [chip] profile = NAME: the chip's keys come from topologies/chips/NAME.ini (the chips folder
 * beside the topology file; NAME may also be a path ending in .ini, relative to the topology's
 * folder), and any key the topology's own [chip] gives overrides the profile's. *out is a copy
 * of kf with the profile's keys filled in, or NULL when there is no profile.
 */
static gboolean merge_profile(GKeyFile *kf, const char *path, GKeyFile **out, char **name,
                              GError **error)
{
  *out = NULL;
  g_autofree char *prof = NULL;
  if (!g_key_file_has_group(kf, "chip") ||
      !ts_kf_string(kf, path, "chip", "profile", NULL, &prof, error))
    return error == NULL || *error == NULL;
  if (prof == NULL)
    return TRUE;
  g_strstrip(prof);
  if (*prof == '\0') {
    g_set_error(
        error, TS_ERROR, TS_ERROR_INPUT,
        "%s: [chip] profile: empty; expected a chip profile name (topologies/chips/NAME.ini)",
        path);
    return FALSE;
  }
  /* A name is looked up in chips/ as NAME.ini; a path must say .ini. "/dev/zero" or "../x"
   * became "DIR/chips//dev/zero.ini: cannot read", a file nobody named. */
  if (!g_str_has_suffix(prof, ".ini") && strchr(prof, '/') != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [chip] profile='%s': expected a chip profile name (topologies/chips/NAME.ini) "
                "or a path to a profile file ending in .ini",
                path, prof);
    return FALSE;
  }
  g_autofree char *dir = g_path_get_dirname(path);
  g_autofree char *file =
      g_str_has_suffix(prof, ".ini")
          ? (g_path_is_absolute(prof) ? g_strdup(prof) : g_build_filename(dir, prof, NULL))
          : g_strdup_printf("%s/chips/%s.ini", dir, prof);
  /* A topology copied out of the shipped folder (to edit it) still finds the shipped chips. */
  if (!g_str_has_suffix(prof, ".ini") && !g_file_test(file, G_FILE_TEST_IS_REGULAR)) {
    g_autofree char *rel = g_strdup_printf("topologies/chips/%s.ini", prof);
    char *shipped = ts_find_data_file(rel);
    if (shipped != NULL) {
      g_free(file);
      file = shipped;
    }
  }
  g_autoptr(GError) local = NULL;
  if (!g_str_has_suffix(prof, ".ini") && !g_file_test(file, G_FILE_TEST_EXISTS)) {
    /* Both places were looked in; the message named only the first. */
    g_autofree char *roots = ts_data_roots_text();
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [chip] profile='%s': no %s, and no topologies/chips/%s.ini shipped (searched "
                "%s); expected a chip profile name or a path ending in .ini",
                path, prof, file, prof, roots);
    return FALSE;
  }
  g_autoptr(GKeyFile) pk = ts_kf_load(file, &local);
  if (pk == NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [chip] profile='%s': %s", path, prof,
                local->message);
    return FALSE;
  }
  if (!g_key_file_has_group(pk, "chip")) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [chip] profile='%s': %s has no [chip] group; expected a chip profile", path,
                prof, file);
    return FALSE;
  }
  gsize ng = 0;
  g_auto(GStrv) pgroups = g_key_file_get_groups(pk, &ng);
  for (gsize i = 0; i < ng; i++)
    if (strcmp(pgroups[i], "chip") != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [chip] profile='%s': %s: [%s]: unknown group; a chip profile has only "
                  "[chip]",
                  path, prof, file, pgroups[i]);
      return FALSE;
    }
  if (g_key_file_has_key(pk, "chip", "profile", NULL)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [chip] profile='%s': %s: [chip] profile: a profile cannot name another", path,
                prof, file);
    return FALSE;
  }
  /* The profile's own keys are checked against its file, so a typo there names it. */
  if (!ts_kf_check_keys(pk, file, "chip", chip_keys, error))
    return FALSE;
  g_autofree char *text = g_key_file_to_data(kf, NULL, NULL);
  g_autoptr(GKeyFile) m = g_key_file_new();
  if (!g_key_file_load_from_data(m, text, (gsize)-1, G_KEY_FILE_NONE, NULL)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: cannot re-read for [chip] profile", path);
    return FALSE;
  }
  /* A topology that changes a rate of a calibrated profile (compute_efficiency = 1.0, say) no
   * longer runs the fitted chip: it is calibrated only when it says so itself. Keys of price,
   * power and memory capacity leave the step time, and so the fit, as it was. */
  static const char *const keeps_fit[] = {"name",       "profile",           "calibrated",
                                          "memory_GiB", CHIP_KEEPS_FIT_KEYS, NULL};
  gboolean refit = FALSE;
  gsize nown = 0;
  g_auto(GStrv) own = g_key_file_get_keys(kf, "chip", &nown, NULL);
  for (gsize i = 0; i < nown; i++)
    if (!g_strv_contains(keeps_fit, own[i]) && !same_as_profile(kf, pk, own[i]))
      refit = TRUE;
  /* The older peak_tflops in the topology overrides the profile's bf16 rate. */
  gboolean own_peak = g_key_file_has_key(kf, "chip", "peak_tflops", NULL) ||
                      g_key_file_has_key(kf, "chip", "peak_tflops_bf16", NULL);
  gsize nk = 0;
  g_auto(GStrv) keys = g_key_file_get_keys(pk, "chip", &nk, NULL);
  for (gsize i = 0; i < nk; i++) {
    gboolean peak = strcmp(keys[i], "peak_tflops") == 0 || strcmp(keys[i], "peak_tflops_bf16") == 0;
    if (g_key_file_has_key(kf, "chip", keys[i], NULL) || (peak && own_peak))
      continue;
    g_autofree char *v = g_key_file_get_value(pk, "chip", keys[i], NULL);
    g_key_file_set_value(m, "chip", keys[i], v);
  }
  if (refit && !g_key_file_has_key(kf, "chip", "calibrated", NULL))
    g_key_file_set_value(m, "chip", "calibrated", "false");
  *name = g_strdup(prof);
  *out = g_steal_pointer(&m);
  return TRUE;
}

/* "pods/tpu-v3-8x8.ini" -> "tpu-v3-8x8". Caller frees. */
static char *base_name(const char *path)
{
  char *b = g_path_get_basename(path);
  if (g_str_has_suffix(b, ".ini") && strlen(b) > 4)
    b[strlen(b) - 4] = '\0';
  return b;
}

ts_topo *ts_topo_from_keyfile(GKeyFile *kf, const char *path, GError **error)
{
  g_return_val_if_fail(kf != NULL, NULL);
  if (path == NULL)
    path = "<topology>";
  g_autoptr(ts_topo) t = g_new0(ts_topo, 1);
  t->path = g_strdup(path);

  /* Unknown groups first: a misspelt [dim.x] ("[dims.x]") must not silently drop a dimension. */
  gsize ngroups = 0;
  g_auto(GStrv) groups = g_key_file_get_groups(kf, &ngroups);
  for (gsize i = 0; i < ngroups; i++) {
    const char *gr = groups[i];
    if (strcmp(gr, "topology") == 0 || strcmp(gr, "chip") == 0 || strcmp(gr, "host") == 0)
      continue;
    if (!g_str_has_prefix(gr, "dim.")) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s]: unknown group; expected [topology], [chip], [host] or [dim.NAME]",
                  path, gr);
      return NULL;
    }
    if (!valid_dim_name(gr + 4)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s]: dimension name '%s': expected [dim.NAME] with NAME a letter followed "
                  "by letters, digits or '_'",
                  path, gr, gr + 4);
      return NULL;
    }
  }

  if (g_key_file_has_group(kf, "topology")) {
    if (!ts_kf_check_keys(kf, path, "topology", topology_keys, error) ||
        !ts_kf_string(kf, path, "topology", "name", NULL, &t->name, error))
      return NULL;
    if (t->name != NULL && *t->name == '\0')
      g_clear_pointer(&t->name, g_free);
  }
  if (t->name == NULL)
    t->name = base_name(path);

  g_autoptr(GKeyFile) merged = NULL;
  if (!merge_profile(kf, path, &merged, &t->chip.profile, error))
    return NULL;
  if (!read_chip(merged != NULL ? merged : kf, path, &t->chip, error))
    return NULL;

  /* g_key_file_get_groups keeps file order, and file order is the dimension order (fastest
   * first), so chip id = x + X*y + X*Y*z as written. */
  gint64 chips = 1;
  for (gsize i = 0; i < ngroups; i++) {
    if (!g_str_has_prefix(groups[i], "dim."))
      continue;
    if (t->ndims == TS_MAX_DIMS) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s]: dimension %d; expected at most %d [dim.NAME] groups", path, groups[i],
                  t->ndims + 1, TS_MAX_DIMS);
      return NULL;
    }
    if (!read_dim(kf, path, groups[i], chips, t->ndims > 0 ? t->dims[0].size : 0, &t->chip,
                  &t->dims[t->ndims], error))
      return NULL;
    chips *= t->dims[t->ndims].size;
    t->ndims++;
  }
  if (t->ndims == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: no [dim.NAME] group; expected 1 to %d dimensions, fastest first, e.g. [dim.x] "
                "with size, shape, link_bandwidth_GBps and latency_us",
                path, TS_MAX_DIMS);
    return NULL;
  }
  t->nchips = (int)chips;
  if (!read_twists(kf, path, t, error))
    return NULL;
  /* Price and power may come from the chip profile ([chip] tdp_W in topologies/chips/): read
   * them from the merged keys, where the topology's own still override the profile's. */
  if (!ts_capacity_read(merged != NULL ? merged : kf, path, t, error))
    return NULL;
  return g_steal_pointer(&t);
}

ts_topo *ts_topo_load(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_autoptr(GKeyFile) kf = ts_kf_load(path, error);
  if (kf == NULL)
    return NULL;
  return ts_topo_from_keyfile(kf, path, error);
}

ts_topo *ts_topo_copy(const ts_topo *t)
{
  g_return_val_if_fail(t != NULL, NULL);
  ts_topo *c = g_new(ts_topo, 1);
  *c = *t;
  c->name = g_strdup(t->name);
  c->path = g_strdup(t->path);
  c->chip.name = g_strdup(t->chip.name);
  c->chip.profile = g_strdup(t->chip.profile);
  for (int d = 0; d < t->ndims; d++)
    c->dims[d].name = g_strdup(t->dims[d].name);
  return c;
}

void ts_topo_free(ts_topo *t)
{
  if (t == NULL)
    return;
  g_free(t->name);
  g_free(t->path);
  g_free(t->chip.name);
  g_free(t->chip.profile);
  for (int d = 0; d < t->ndims; d++)
    g_free(t->dims[d].name);
  g_free(t);
}

int ts_topo_dim_index(const ts_topo *t, const char *name)
{
  g_return_val_if_fail(t != NULL && name != NULL, -1);
  for (int d = 0; d < t->ndims; d++)
    if (strcmp(t->dims[d].name, name) == 0)
      return d;
  return -1;
}

/* The topology's stride, coordinates and chip ids are its array's (ts_array_*, below): one
 * statement of the mixed-radix numbering (issue 11). */
int ts_topo_stride(const ts_topo *t, int d)
{
  g_return_val_if_fail(t != NULL && d >= 0 && d < t->ndims, 0);
  ts_array a = ts_topo_array(t);
  return ts_array_stride(&a, d);
}

void ts_topo_coords(const ts_topo *t, int chip, int *coords)
{
  g_return_if_fail(t != NULL && coords != NULL && chip >= 0 && chip < t->nchips);
  ts_array a = ts_topo_array(t);
  ts_array_coords(&a, chip, coords);
}

int ts_topo_coord(const ts_topo *t, int chip, int d)
{
  g_return_val_if_fail(t != NULL && chip >= 0 && chip < t->nchips, -1);
  ts_array a = ts_topo_array(t);
  return ts_array_coord(&a, chip, d);
}

int ts_topo_chip(const ts_topo *t, const int *coords)
{
  g_return_val_if_fail(t != NULL && coords != NULL, -1);
  ts_array a = ts_topo_array(t);
  int chip = ts_array_chip(&a, coords);
  g_return_val_if_fail(chip >= 0, -1); /* a coordinate outside its dimension */
  return chip;
}

char *ts_topo_describe(const ts_topo *t)
{
  g_return_val_if_fail(t != NULL, NULL);
  GString *s = g_string_new(NULL);
  /* A [topology] name is written for people ("TPU v3 slice 8x8") and is used as is. Without
   * one the name is only the file's base name, so say what the array is instead:
   * "TPU v3 8x8 (64 chips)". */
  g_autofree char *base = t->path != NULL ? base_name(t->path) : NULL;
  gboolean named = base == NULL || strcmp(base, t->name) != 0;
  if (!named && t->nchips == 1) {
    /* One chip: its name says it all. The array form read "AMD EPYC (1 core, fp32) 1 (1 chip)"
     * for the profile `trainsim calibrate` writes. */
    g_string_append_printf(s, "one %s", t->chip.name);
    return g_string_free(s, FALSE);
  }
  if (named) {
    g_string_append(s, t->name);
  } else {
    g_string_append(s, t->chip.name);
    g_string_append_c(s, ' ');
    for (int d = 0; d < t->ndims; d++)
      g_string_append_printf(s, "%s%d", d > 0 ? "x" : "", t->dims[d].size);
  }
  g_string_append_printf(s, " (%d chip%s)", t->nchips, t->nchips == 1 ? "" : "s");
  return g_string_free(s, FALSE);
}

double ts_compute_time(const ts_topo *t, double flops, double mem_bytes)
{
  /* An op without a shape: the roofline with the per-op floor (model/ts_cost.c). */
  return ts_cost_compute(&t->chip, flops, mem_bytes, NULL);
}

double ts_chip_memory_reserve(const ts_chip *c)
{
  if (c->memory_reserve_bytes >= 0)
    return c->memory_reserve_bytes;
  /* The CUDA context of a training process (287 MB lazy, 667 MB eager module loading,
   * measured in pytorch/pytorch#86509; cuBLAS / cuDNN workspaces on top) and the
   * communicators' buffers (NCCL_BUFFSIZE, 4 MiB per channel and peer and protocol, about
   * 0.5 GiB for the few communicators of a 3D split). The caching allocator's fragmentation is
   * not here: it grows with what the training allocates (ts_chip_allocator_overhead). */
  return MIN(GIB, 0.5 * c->memory_bytes);
}

double ts_chip_allocator_overhead(const ts_chip *c)
{
  if (c->allocator_overhead >= 0)
    return c->allocator_overhead;
  /* A TPU's XLA plans every buffer of the step ahead of time: nothing on top. */
  if (c->systolic > 0)
    return 0.0;
  return TS_GPU_ALLOCATOR_OVERHEAD;
}

gboolean ts_capacity_read(GKeyFile *kf, const char *path, ts_topo *t, GError **error)
{
  ts_capacity_params *c = &t->cap;
  memset(c, 0, sizeof *c);
  double storage_gbps = 0, mtbf_chip_h = 0, mtbf_node_h = 0, restart_min = 0;
  gint64 per_node = 0;
  if (!ts_kf_double(kf, path, "chip", "price_per_hour", TRUE, 0, 0, 1e6,
                    "a price in USD per chip-hour", &c->price_per_chip_hour, error) ||
      !ts_kf_double(kf, path, "chip", "tdp_W", TRUE, 0, 0, 1e6, "the chip's power when busy in W",
                    &c->busy_W, error) ||
      !ts_kf_double(kf, path, "chip", "comm_W", TRUE, 0, 0, 1e6,
                    "the chip's power while only communicating in W", &c->comm_W, error) ||
      !ts_kf_double(kf, path, "chip", "idle_W", TRUE, 0, 0, 1e6, "the chip's power while idle in W",
                    &c->idle_W, error) ||
      !ts_kf_double(kf, path, "topology", "pue", TRUE, 0, 1, 10,
                    "a power usage effectiveness (facility / IT power)", &c->pue, error) ||
      !ts_kf_double(kf, path, "topology", "network_W_per_chip", TRUE, 0, 0, 1e6,
                    "switch and NIC power per chip in W", &c->network_W_per_chip, error) ||
      !ts_kf_double(kf, path, "topology", "storage_GBps_per_chip", TRUE, 0, 0, 1e9,
                    "checkpoint storage bandwidth per chip in GB/s (1e9 B/s)", &storage_gbps,
                    error) ||
      !ts_kf_double(kf, path, "topology", "mtbf_chip_hours", TRUE, 0, 0, 1e12,
                    "a chip's mean time between failures in hours", &mtbf_chip_h, error) ||
      !ts_kf_double(kf, path, "topology", "mtbf_node_hours", TRUE, 0, 0, 1e12,
                    "a node's mean time between failures in hours", &mtbf_node_h, error) ||
      !ts_kf_int(kf, path, "topology", "chips_per_node", TRUE, 0, 0, 1048576, "chips per node",
                 &per_node, error) ||
      !ts_kf_double(kf, path, "topology", "restart_minutes", TRUE,
                    TS_GOODPUT_DEFAULT_RESTART_MINUTES, 0, 1e6,
                    "minutes from an interruption to training again", &restart_min, error))
    return FALSE;
  c->storage_Bps = storage_gbps * 1e9;
  c->mtbf_chip_s = mtbf_chip_h * HOUR;
  c->mtbf_node_s = mtbf_node_h * HOUR;
  c->chips_per_node = (int)per_node;
  c->restart_s = restart_min * 60.0;
  c->restart_default = !g_key_file_has_key(kf, "topology", "restart_minutes", NULL);
  return TRUE;
}

ts_array ts_topo_array(const ts_topo *t)
{
  ts_array a = {0};
  g_return_val_if_fail(t != NULL, a);
  a.ndims = t->ndims;
  for (int d = 0; d < t->ndims; d++) {
    a.size[d] = t->dims[d].size;
    a.name[d] = t->dims[d].name;
  }
  a.label = t->path != NULL ? t->path : t->name != NULL ? t->name : "topology";
  return a;
}

int ts_array_nchips(const ts_array *a)
{
  int n = 1;
  for (int d = 0; d < a->ndims; d++)
    n *= a->size[d];
  return n;
}

int ts_array_stride(const ts_array *a, int d)
{
  g_return_val_if_fail(a != NULL && d >= 0 && d < a->ndims, 0);
  int s = 1;
  for (int i = 0; i < d; i++)
    s *= a->size[i];
  return s;
}

void ts_array_coords(const ts_array *a, int chip, int *coords)
{
  g_return_if_fail(a != NULL && coords != NULL && chip >= 0);
  for (int d = 0; d < a->ndims; d++) {
    coords[d] = chip % a->size[d];
    chip /= a->size[d];
  }
}

int ts_array_coord(const ts_array *a, int chip, int d)
{
  g_return_val_if_fail(a != NULL && d >= 0 && d < a->ndims && chip >= 0, -1);
  return chip / ts_array_stride(a, d) % a->size[d];
}

int ts_array_chip(const ts_array *a, const int *coords)
{
  g_return_val_if_fail(a != NULL && coords != NULL, -1);
  int chip = 0;
  for (int d = a->ndims - 1; d >= 0; d--) {
    if (coords[d] < 0 || coords[d] >= a->size[d])
      return -1;
    chip = chip * a->size[d] + coords[d];
  }
  return chip;
}
