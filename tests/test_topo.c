/* test_topo: shipped topologies, chip id <-> coordinates, and one-line errors on bad files. */
#include "ts_topo.h"
#include "ts_util.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#define GIB 1073741824.0

/* Relative tolerance for numbers read from files: they are exact decimal values scaled by
 * powers of ten or two, so only rounding of the last bit is allowed. */
#define REL_TOL 1e-12

static void assert_close(double got, double want, const char *what)
{
  double err = fabs(got - want);
  cr_assert(err <= REL_TOL * fabs(want), "%s: got %.17g, expected %.17g", what, got, want);
}

static ts_topo *load_shipped(const char *name)
{
  g_autofree char *path = g_strdup_printf("%s/topologies/%s.ini", TS_SOURCE_DIR, name);
  g_autoptr(GError) error = NULL;
  ts_topo *t = ts_topo_load(path, &error);
  cr_assert_not_null(t, "%s: %s", path, error != NULL ? error->message : "(no error)");
  return t;
}

/* A temporary folder per test, so tests running in parallel never share a file. */
static char *write_temp(const char *file_name, const char *contents, char **dir_out)
{
  g_autoptr(GError) error = NULL;
  char *dir = g_dir_make_tmp("ts_topo_XXXXXX", &error);
  cr_assert_not_null(dir, "cannot make a temporary folder: %s", error ? error->message : "");
  char *path = g_build_filename(dir, file_name, NULL);
  gboolean ok = g_file_set_contents(path, contents, -1, &error);
  cr_assert(ok, "cannot write %s: %s", path, error ? error->message : "");
  *dir_out = dir;
  return path;
}

static void remove_temp(char *path, char *dir)
{
  g_unlink(path);
  g_rmdir(dir);
  g_free(path);
  g_free(dir);
}

/* ---- Every shipped topology: chip count, dimensions, published numbers. ---- */

typedef struct {
  const char *file;
  int nchips, ndims;
  struct {
    const char *name;
    int size;
    ts_shape shape;
    double bw_Bps, latency_s;
  } dims[TS_MAX_DIMS];
  double peak_flops, memory_bytes, memory_bw_Bps, host_link_bw_Bps;
} shipped;

/* DGX A100 [dim.node]: NVLink 3 is 300 GB/s per direction (datasheet), of which NCCL's Simple
 * ring achieves all (fraction 1.0, its bound; 0.984 before Simple's 128 KiB pieces, December
 * 2026) beside its local work (nccl_local_bandwidth_GBps) and piece padding (nccl_channels) with
 * 3.33 us per step: fitted to vTrain's nccl-tests all-reduce tables (tests/test_published.c
 * checks the fit, docs/collectives.md). */
#define A100_NVLINK_EFF 1.0
#define A100_NVLINK_BPS (300e9 * A100_NVLINK_EFF)
#define A100_NVLINK_LAT_S 3.333e-6
/* Azure ND A100 v4's node: NCCL fitted to Echo's logs (tests/test_published.c). */
#define ND_NVLINK_BPS (300e9 * 0.9857)
#define ND_NVLINK_LAT_S 1.909e-6
/* 200 Gb/s HDR InfiniBand, one NIC per GPU, NCCL fitted to Echo's multi-node logs. */
#define HDR_EFF 0.7196
/* NCCL's ring on NVLink 4 and 5 from published nccl-tests figures (the DGX topology files): H100
 * 370 / 450 GB/s; B200 estimated from a B300 report, 695 / 900 (also the GB200 NVL72 file's). */
#define H100_NVLINK_BPS (450e9 * 0.822)
#define B200_NVLINK_BPS (900e9 * 0.772)
#define HDR_NIC_BPS (25e9 * HDR_EFF)
#define HDR_NIC_LAT_S 10.532e-6
/* ND A100 v4's network refitted with the node's hop across nodes (nccl_node_hop_latency_us);
 * dgx-a100-{4,32}node keep the values above. */
#define ND_NIC_BPS (25e9 * 0.7160)
#define ND_NIC_LAT_S 10.868e-6
/* DGX A100 compute_efficiency (the A100 profile): fitted to vTrain's Megatron iteration times
 * (same test). */
#define A100_COMPUTE_EFF 0.79

/* Expected values restate the sources cited in each file (see docs/topologies.md). */
static const shipped SHIPPED[] = {
    {"tpu-v2-8",
     4,
     2,
     {{"x", 2, TS_SHAPE_MESH, 62e9, 1e-6}, {"y", 2, TS_SHAPE_MESH, 62e9, 1e-6}},
     45e12,
     16 * GIB,
     700e9,
     0},
    {"tpu-v2-pod",
     256,
     2,
     {{"x", 16, TS_SHAPE_RING, 62e9, 1e-6}, {"y", 16, TS_SHAPE_RING, 62e9, 1e-6}},
     45e12,
     16 * GIB,
     700e9,
     0},
    {"tpu-v3-pod",
     1024,
     2,
     {{"x", 32, TS_SHAPE_RING, 82e9, 1e-6}, {"y", 32, TS_SHAPE_RING, 82e9, 1e-6}},
     123e12,
     32 * GIB,
     900e9,
     0},
    {"tpu-v3-8x8",
     64,
     2,
     {{"x", 8, TS_SHAPE_RING, 82e9, 1e-6}, {"y", 8, TS_SHAPE_RING, 82e9, 1e-6}},
     123e12,
     32 * GIB,
     900e9,
     0},
    {"dgx-a100-1node",
     8,
     1,
     {{"node", 8, TS_SHAPE_SWITCH, A100_NVLINK_BPS, A100_NVLINK_LAT_S}},
     312e12,
     80 * GIB,
     2039e9,
     25e9},
    {"dgx-a100-4node",
     32,
     2,
     {{"node", 8, TS_SHAPE_SWITCH, A100_NVLINK_BPS, A100_NVLINK_LAT_S},
      {"net", 4, TS_SHAPE_SWITCH, HDR_NIC_BPS, HDR_NIC_LAT_S}},
     312e12,
     80 * GIB,
     2039e9,
     25e9},
    {"dgx-a100-32node",
     256,
     2,
     {{"node", 8, TS_SHAPE_SWITCH, A100_NVLINK_BPS, A100_NVLINK_LAT_S},
      {"net", 32, TS_SHAPE_SWITCH, HDR_NIC_BPS, HDR_NIC_LAT_S}},
     312e12,
     80 * GIB,
     2039e9,
     25e9},
    {"azure-nd-a100-v4-1node",
     8,
     1,
     {{"node", 8, TS_SHAPE_SWITCH, ND_NVLINK_BPS, ND_NVLINK_LAT_S}},
     312e12,
     40 * GIB,
     1555e9,
     0},
    {"azure-nd-a100-v4-16node",
     128,
     2,
     {{"node", 8, TS_SHAPE_SWITCH, ND_NVLINK_BPS, ND_NVLINK_LAT_S},
      {"net", 16, TS_SHAPE_SWITCH, ND_NIC_BPS, ND_NIC_LAT_S}},
     312e12,
     40 * GIB,
     1555e9,
     0},
    {"dgx-h100-4node",
     32,
     2,
     {{"node", 8, TS_SHAPE_SWITCH, H100_NVLINK_BPS, 0.7e-6},
      {"net", 4, TS_SHAPE_SWITCH, 50e9, 3e-6}},
     989e12,
     80 * GIB,
     3350e9,
     50e9},
    {"dgx-h100-32node",
     256,
     2,
     {{"node", 8, TS_SHAPE_SWITCH, H100_NVLINK_BPS, 0.7e-6},
      {"net", 32, TS_SHAPE_SWITCH, 50e9, 3e-6}},
     989e12,
     80 * GIB,
     3350e9,
     50e9},
    /* The 500 W 96 GB HBM2e H100 of TorchTitan's benchmark on dgx-h100-32node's fabric. */
    {"grand-teton-h100-32node",
     256,
     2,
     {{"node", 8, TS_SHAPE_SWITCH, H100_NVLINK_BPS, 0.7e-6},
      {"net", 32, TS_SHAPE_SWITCH, 50e9, 3e-6}},
     989e12,
     95 * GIB,
     2400e9,
     50e9},
    {"asym-16x16",
     256,
     2,
     {{"x", 16, TS_SHAPE_RING, 100e9, 1e-6}, {"y", 16, TS_SHAPE_RING, 25e9, 1e-6}},
     123e12,
     32 * GIB,
     900e9,
     0},
    /* DGX-1V: 6 NVLink 2 links x 25 GB/s per V100, the six rings NCCL lays over the cube-mesh
     * at 0.90 of the link rate (vTrain's V100 nccl-tests tables); V100 datasheet. */
    {"dgx1-v100",
     8,
     1,
     {{"node", 8, TS_SHAPE_SWITCH, 6 * 25e9 * 0.9, 5e-6}},
     125e12,
     32 * GIB,
     900e9,
     0},
    /* PCIe 3.0 x16 15.75 GB/s at an assumed 80%; P40 datasheet (docs/topologies.md). */
    {"p40-pcie-8",
     8,
     1,
     {{"pcie", 8, TS_SHAPE_SWITCH, 15.75e9 * 0.8, 10e-6}},
     0.18e12, /* fp16 at 1/64 of fp32; the fp32 rate (11.76) is peak_tflops_fp32 */
     24 * GIB,
     346e9,
     0},
    {"dgx-h100-64node",
     512,
     2,
     {{"node", 8, TS_SHAPE_SWITCH, H100_NVLINK_BPS, 0.7e-6},
      {"net", 64, TS_SHAPE_SWITCH, 50e9, 3e-6}},
     989e12,
     80 * GIB,
     3350e9,
     50e9},
    /* Issue 13: 3D and twisted tori, 2D v5e/v6e pods, NVLink domains past a node. */
    {"tpu-v4-4x4x4",
     64,
     3,
     {{"x", 4, TS_SHAPE_RING, 45e9, 1e-6},
      {"y", 4, TS_SHAPE_RING, 45e9, 1e-6},
      {"z", 4, TS_SHAPE_RING, 45e9, 1e-6}},
     275e12,
     32 * GIB,
     1200e9,
     0},
    {"tpu-v4-4x4x8-twisted",
     128,
     3,
     {{"x", 4, TS_SHAPE_RING, 45e9, 1e-6},
      {"y", 4, TS_SHAPE_RING, 45e9, 1e-6},
      {"z", 8, TS_SHAPE_RING, 45e9, 1e-6}},
     275e12,
     32 * GIB,
     1200e9,
     0},
    {"tpu-v4-16x16x16",
     4096,
     3,
     {{"x", 16, TS_SHAPE_RING, 45e9, 1e-6},
      {"y", 16, TS_SHAPE_RING, 45e9, 1e-6},
      {"z", 16, TS_SHAPE_RING, 45e9, 1e-6}},
     275e12,
     32 * GIB,
     1200e9,
     0},
    {"tpu-v5p-8x16x16",
     2048,
     3,
     {{"x", 8, TS_SHAPE_RING, 90e9, 1e-6},
      {"y", 16, TS_SHAPE_RING, 90e9, 1e-6},
      {"z", 16, TS_SHAPE_RING, 90e9, 1e-6}},
     459e12,
     95 * GIB,
     2765e9,
     0},
    {"tpu-v5p-4x4x4",
     64,
     3,
     {{"x", 4, TS_SHAPE_RING, 90e9, 1e-6},
      {"y", 4, TS_SHAPE_RING, 90e9, 1e-6},
      {"z", 4, TS_SHAPE_RING, 90e9, 1e-6}},
     459e12,
     95 * GIB,
     2765e9,
     0},
    {"tpu-v5e-16x16",
     256,
     2,
     /* 45 GB/s x bandwidth_efficiency 0.82 (the scaling book's profiled v5e all-gather) */
     {{"x", 16, TS_SHAPE_RING, 36.9e9, 1e-6}, {"y", 16, TS_SHAPE_RING, 36.9e9, 1e-6}},
     197e12,
     16 * GIB,
     819e9, /* the tpu-v5e profile: Cloud TPU v5e docs, 819 GBps */
     0},
    {"tpu-v6e-16x16",
     256,
     2,
     {{"x", 16, TS_SHAPE_RING, 90e9, 1e-6}, {"y", 16, TS_SHAPE_RING, 90e9, 1e-6}},
     918e12,
     32 * GIB,
     1640e9, /* the tpu-v6e profile */
     0},
    {"dgx-h200-4node",
     32,
     2,
     {{"node", 8, TS_SHAPE_SWITCH, H100_NVLINK_BPS, 0.7e-6},
      {"net", 4, TS_SHAPE_SWITCH, 50e9, 3e-6}},
     989e12,
     131.3 * GIB,
     4800e9,
     0},
    {"dgx-b200-4node",
     32,
     2,
     {{"node", 8, TS_SHAPE_SWITCH, B200_NVLINK_BPS, 0.7e-6},
      {"net", 4, TS_SHAPE_SWITCH, 50e9, 3e-6}},
     2250e12,
     167.6 * GIB,
     8000e9,
     0},
    {"gb200-nvl72-8rack",
     576,
     2,
     {{"nvl", 72, TS_SHAPE_SWITCH, B200_NVLINK_BPS, 1e-6},
      {"net", 8, TS_SHAPE_SWITCH, 100e9, 3e-6}},
     2500e12,
     173.2 * GIB,
     8000e9,
     0},
};

static void check_shipped(const shipped *e)
{
  g_autoptr(ts_topo) t = load_shipped(e->file);
  int nchips = t->nchips, ndims = t->ndims;
  cr_assert_eq(nchips, e->nchips, "%s: %d chips, expected %d", e->file, nchips, e->nchips);
  cr_assert_eq(ndims, e->ndims, "%s: %d dims, expected %d", e->file, ndims, e->ndims);
  int product = 1;
  for (int d = 0; d < ndims; d++) {
    const ts_dim *dim = &t->dims[d];
    cr_assert_str_eq(dim->name, e->dims[d].name, "%s: dim %d", e->file, d);
    int size = dim->size;
    cr_assert_eq(size, e->dims[d].size, "%s: [dim.%s] size %d", e->file, dim->name, size);
    int shape = dim->shape;
    cr_assert_eq(shape, (int)e->dims[d].shape, "%s: [dim.%s] shape %s", e->file, dim->name,
                 ts_shape_name(dim->shape));
    g_autofree char *what = g_strdup_printf("%s [dim.%s] link bandwidth", e->file, dim->name);
    assert_close(dim->link_bw_Bps, e->dims[d].bw_Bps, what);
    g_autofree char *lwhat = g_strdup_printf("%s [dim.%s] latency", e->file, dim->name);
    assert_close(dim->latency_s, e->dims[d].latency_s, lwhat);
    product *= size;
  }
  cr_assert_eq(product, nchips, "%s: product of sizes %d != %d chips", e->file, product, nchips);
  g_autofree char *peak = g_strdup_printf("%s peak FLOP/s", e->file);
  g_autofree char *mem = g_strdup_printf("%s memory bytes", e->file);
  g_autofree char *mem_bw = g_strdup_printf("%s memory bandwidth", e->file);
  assert_close(t->chip.peak_flops, e->peak_flops, peak);
  assert_close(t->chip.memory_bytes, e->memory_bytes, mem);
  assert_close(t->chip.memory_bw_Bps, e->memory_bw_Bps, mem_bw);
  double host = t->chip.host_link_bw_Bps;
  cr_assert(host == e->host_link_bw_Bps || fabs(host - e->host_link_bw_Bps) <= REL_TOL * host,
            "%s: host link %.17g", e->file, host);
  double eff = t->chip.compute_efficiency;
  /* No shipped machine defaults to the raw datasheet peak (issue 10): the H200, B200 and GB200
   * files carried compute_efficiency 1.0 inline, marked calibrated, until December 2026. */
  cr_assert(eff > 0 && eff < 1, "%s: compute efficiency %g", e->file, eff);
  if (g_str_has_prefix(e->file, "dgx-a100-"))
    assert_close(eff, A100_COMPUTE_EFF, "DGX A100 compute_efficiency (fitted)");
  cr_assert_str_eq(t->path + strlen(t->path) - strlen(".ini"), ".ini");
}

Test(topo, shipped_topologies_load_with_expected_numbers)
{
  for (size_t i = 0; i < G_N_ELEMENTS(SHIPPED); i++)
    check_shipped(&SHIPPED[i]);
}

/* A file added to topologies/ without an entry above would go unchecked: refuse that. */
Test(topo, every_file_in_topologies_is_checked)
{
  g_autofree char *dir_path = g_build_filename(TS_SOURCE_DIR, "topologies", NULL);
  g_autoptr(GDir) dir = g_dir_open(dir_path, 0, NULL);
  cr_assert_not_null(dir, "cannot open %s", dir_path);
  int n = 0;
  for (const char *f; (f = g_dir_read_name(dir)) != NULL;) {
    if (!g_str_has_suffix(f, ".ini"))
      continue;
    /* A profile written by `trainsim calibrate` has measured values no table can hold: it
     * must load, and must say it was generated. */
    g_autofree char *path = g_build_filename(dir_path, f, NULL);
    g_autofree char *text = NULL;
    cr_assert(g_file_get_contents(path, &text, NULL, NULL));
    if (g_str_has_prefix(text, "# Generated by `trainsim calibrate")) {
      GError *err = NULL;
      ts_topo *t = ts_topo_load(path, &err);
      cr_assert_not_null(t, "generated %s does not load: %s", f, err ? err->message : "");
      cr_assert_gt(t->chip.peak_flops, 0);
      ts_topo_free(t);
      continue;
    }
    n++;
    gboolean known = FALSE;
    for (size_t i = 0; i < G_N_ELEMENTS(SHIPPED); i++) {
      g_autofree char *want = g_strconcat(SHIPPED[i].file, ".ini", NULL);
      if (strcmp(f, want) == 0)
        known = TRUE;
    }
    cr_assert(known, "topologies/%s has no expected values in test_topo.c", f);
  }
  int want = (int)G_N_ELEMENTS(SHIPPED);
  cr_assert_eq(n, want, "%d files in topologies/, %d expected", n, want);
}

Test(topo, asym_x_links_are_4x_y_links)
{
  g_autoptr(ts_topo) t = load_shipped("asym-16x16");
  int x = ts_topo_dim_index(t, "x"), y = ts_topo_dim_index(t, "y");
  cr_assert(x >= 0 && y >= 0);
  double ratio = t->dims[x].link_bw_Bps / t->dims[y].link_bw_Bps;
  cr_assert(fabs(ratio - 4.0) <= 1e-12, "X/Y bandwidth ratio %.17g, expected 4", ratio);
  int same_shape = t->dims[x].shape == t->dims[y].shape;
  cr_assert(same_shape, "X and Y should differ in bandwidth only");
}

Test(topo, dgx_host_and_published_chip_numbers)
{
  g_autoptr(ts_topo) a = load_shipped("dgx-a100-4node");
  g_autoptr(ts_topo) h = load_shipped("dgx-h100-32node");
  /* DGX datasheets: 2 TB host memory over 8 GPUs; 8x 3.84 TB NVMe, one per GPU. */
  assert_close(a->chip.host_memory_bytes, 256 * GIB, "A100 host memory");
  assert_close(h->chip.host_memory_bytes, 256 * GIB, "H100 host memory");
  assert_close(a->chip.nvme_bytes, 3576 * GIB, "A100 NVMe");
  double a_cpu = a->chip.host_flops, a_nvme = a->chip.nvme_bw_Bps;
  cr_assert(a_cpu > 0 && a_nvme > 0);
  /* NVLink 4 is 1.5x NVLink 3 per GPU (450 vs 300 GB/s per direction), NDR 2x HDR. The A100
   * node and its HDR network are calibrated to what NCCL achieves (bandwidth_efficiency), the
   * H100 node to NVIDIA's published ring figure (0.822); its NDR network is not. */
  assert_close((h->dims[0].link_bw_Bps / 0.822) / (a->dims[0].link_bw_Bps / A100_NVLINK_EFF), 1.5,
               "NVLink ratio");
  assert_close(h->dims[1].link_bw_Bps / (a->dims[1].link_bw_Bps / HDR_EFF), 2.0, "IB ratio");
  /* NVLink SHARP on the H100's NVSwitch, not on the A100's; one NIC per GPU on both. */
  cr_assert(h->dims[0].in_switch_reduction && !a->dims[0].in_switch_reduction);
  cr_assert(h->dims[1].chips_per_port == 1 && a->dims[1].chips_per_port == 1);
}

Test(topo, describe_dim_index_and_shape_names)
{
  g_autoptr(ts_topo) t = load_shipped("tpu-v3-8x8");
  g_autofree char *s = ts_topo_describe(t);
  cr_assert_str_eq(s, "TPU v3 slice 8x8 (64 chips)");
  int x = ts_topo_dim_index(t, "x"), y = ts_topo_dim_index(t, "y"), z = ts_topo_dim_index(t, "z");
  cr_assert(x == 0 && y == 1 && z == -1, "dim_index x=%d y=%d z=%d", x, y, z);
  cr_assert_str_eq(ts_shape_name(TS_SHAPE_RING), "ring");
  cr_assert_str_eq(ts_shape_name(TS_SHAPE_MESH), "mesh");
  cr_assert_str_eq(ts_shape_name(TS_SHAPE_SWITCH), "switch");
  g_autoptr(ts_topo) d = load_shipped("dgx-a100-32node");
  int node = ts_topo_dim_index(d, "node"), net = ts_topo_dim_index(d, "net");
  cr_assert(node == 0 && net == 1);
  g_autofree char *ds = ts_topo_describe(d);
  cr_assert_str_eq(ds, "DGX A100 32 nodes (256 chips)");
}

/* ---- Coordinates. ---- */

#define CHIP_OK                                                                                    \
  "[chip]\nname = Test chip\npeak_tflops = 100\nmemory_GiB = 16\nmemory_bandwidth_GBps = 1000\n"
#define DIM(n, size, shape, bw, lat)                                                               \
  "[dim." n "]\nsize = " size "\nshape = " shape "\nlink_bandwidth_GBps = " bw                     \
  "\nlatency_us = " lat "\n"
#define DIM_OK(n) DIM(n, "4", "ring", "100", "1")

static ts_topo *from_text(const char *text, const char *path)
{
  g_autoptr(GKeyFile) kf = g_key_file_new();
  g_autoptr(GError) error = NULL;
  gboolean ok = g_key_file_load_from_data(kf, text, (gsize)-1, G_KEY_FILE_NONE, &error);
  cr_assert(ok, "%s", error ? error->message : "");
  ts_topo *t = ts_topo_from_keyfile(kf, path, &error);
  cr_assert_not_null(t, "%s", error ? error->message : "(no error)");
  return t;
}

static void check_round_trip(const ts_topo *t)
{
  int coords[TS_MAX_DIMS];
  int expect_stride = 1;
  for (int d = 0; d < t->ndims; d++) {
    int s = ts_topo_stride(t, d);
    cr_assert_eq(s, expect_stride, "stride of dim %d is %d, expected %d", d, s, expect_stride);
    expect_stride *= t->dims[d].size;
  }
  cr_assert_eq(expect_stride, t->nchips);
  for (int chip = 0; chip < t->nchips; chip++) {
    ts_topo_coords(t, chip, coords);
    int sum = 0;
    for (int d = 0; d < t->ndims; d++) {
      cr_assert(coords[d] >= 0 && coords[d] < t->dims[d].size, "chip %d dim %d coord %d", chip, d,
                coords[d]);
      sum += coords[d] * ts_topo_stride(t, d);
    }
    int back = ts_topo_chip(t, coords);
    cr_assert_eq(back, chip, "chip %d -> coords -> %d", chip, back);
    cr_assert_eq(sum, chip, "chip %d != sum(coord * stride) = %d", chip, sum);
  }
  /* The topology's ts_array (what the SimGrid platform lays its links out with) gives the same
   * strides and coordinates, and names no chip for a coordinate off its dimension. */
  ts_array a = ts_topo_array(t);
  cr_assert_eq(ts_array_nchips(&a), t->nchips);
  for (int d = 0; d < a.ndims; d++)
    cr_assert_eq(ts_array_stride(&a, d), ts_topo_stride(t, d), "dim %d", d);
  for (int chip = 0; chip < t->nchips; chip++) {
    int ac[TS_MAX_DIMS];
    ts_topo_coords(t, chip, coords);
    ts_array_coords(&a, chip, ac);
    for (int d = 0; d < a.ndims; d++)
      cr_assert_eq(ac[d], coords[d], "chip %d dim %d", chip, d);
    cr_assert_eq(ts_array_chip(&a, ac), chip);
  }
  ts_array_coords(&a, t->nchips - 1, coords);
  coords[a.ndims - 1] = a.size[a.ndims - 1];
  cr_assert_eq(ts_array_chip(&a, coords), -1, "a coordinate past its dimension names no chip");
  coords[a.ndims - 1] = -1;
  cr_assert_eq(ts_array_chip(&a, coords), -1, "a negative coordinate names no chip");
}

Test(topo, coords_chip_stride_round_trip_3d)
{
  g_autoptr(ts_topo) t =
      from_text(CHIP_OK DIM("a", "3", "ring", "100", "1") DIM("b", "4", "mesh", "50", "2")
                    DIM("c", "5", "switch", "25", "3"),
                "mem/array-3d.ini");
  cr_assert_eq(t->nchips, 60);
  int s1 = ts_topo_stride(t, 1), s2 = ts_topo_stride(t, 2);
  cr_assert(s1 == 3 && s2 == 12, "strides %d %d, expected 3 12", s1, s2);
  /* Dimension 0 is fastest: chip 1 is (1,0,0), chip 3 is (0,1,0), chip 12 is (0,0,1). */
  int c[3];
  ts_topo_coords(t, 59, c);
  cr_assert(c[0] == 2 && c[1] == 3 && c[2] == 4, "chip 59 at (%d,%d,%d)", c[0], c[1], c[2]);
  check_round_trip(t);
}

Test(topo, coords_round_trip_4d_and_shipped)
{
  g_autoptr(ts_topo) t =
      from_text(CHIP_OK DIM("a", "2", "ring", "1", "0") DIM("b", "3", "mesh", "1", "0")
                    DIM("c", "1", "ring", "1", "0") DIM("d", "5", "switch", "1", "0"),
                "mem/array-4d.ini");
  cr_assert_eq(t->nchips, 30);
  check_round_trip(t);
  g_autoptr(ts_topo) d = load_shipped("dgx-h100-4node");
  check_round_trip(d);
}

Test(topo, copy_is_deep)
{
  g_autoptr(ts_topo) t = load_shipped("asym-16x16");
  ts_topo *c = ts_topo_copy(t);
  cr_assert_str_eq(c->name, t->name);
  cr_assert_str_eq(c->chip.name, t->chip.name);
  cr_assert_str_eq(c->dims[1].name, t->dims[1].name);
  cr_assert(c->name != t->name && c->chip.name != t->chip.name && c->path != t->path &&
            c->dims[0].name != t->dims[0].name);
  c->dims[0].size = 99;
  c->name[0] = '#';
  int size = t->dims[0].size;
  cr_assert_eq(size, 16, "copy changed the original");
  cr_assert_neq(t->name[0], '#');
  ts_topo_free(c);
  ts_topo_free(NULL);
}

Test(topo, defaults_and_units)
{
  char *dir;
  char *path = write_temp("my-array.ini",
                          "# no [topology], no [host], no compute_efficiency\n" CHIP_OK
                          "[dim.x]\nsize = 4  # four chips\nshape = mesh\n"
                          "link_bandwidth_GBps = 12.5\nlatency_us = 0\n" DIM_OK("y"),
                          &dir);
  g_autoptr(GError) error = NULL;
  ts_topo *t = ts_topo_load(path, &error);
  cr_assert_not_null(t, "%s", error ? error->message : "");
  cr_assert_str_eq(t->name, "my-array");
  g_autofree char *s = ts_topo_describe(t);
  cr_assert_str_eq(s, "Test chip 4x4 (16 chips)");
  assert_close(t->chip.compute_efficiency, 1.0, "default efficiency");
  double zero = t->chip.host_link_bw_Bps + t->chip.host_memory_bytes + t->chip.host_flops +
                t->chip.nvme_bw_Bps + t->chip.nvme_bytes;
  cr_assert(zero == 0.0, "absent [host] must read as zeros");
  assert_close(t->chip.peak_flops, 100e12, "TFLOP/s -> FLOP/s");
  assert_close(t->chip.memory_bytes, 16 * GIB, "GiB -> bytes");
  assert_close(t->chip.memory_bw_Bps, 1000e9, "GB/s -> B/s");
  assert_close(t->dims[0].link_bw_Bps, 12.5e9, "link GB/s -> B/s (bandwidth_efficiency 1)");
  assert_close(t->dims[1].latency_s, 1e-6, "us -> s");
  double lat0 = t->dims[0].latency_s;
  cr_assert(lat0 == 0.0);
  ts_topo_free(t);
  remove_temp(path, dir);
}

Test(topo, bandwidth_efficiency_scales_the_stored_bandwidth)
{
  /* The loader stores what a transfer achieves, so every backend uses it. */
  g_autoptr(ts_topo) t = from_text(CHIP_OK "[dim.x]\nsize = 4\nshape = switch\n"
                                           "link_bandwidth_GBps = 300\nlatency_us = 6.34\n"
                                           "bandwidth_efficiency = 0.722  # measured\n" DIM_OK("y"),
                                   "mem/eff.ini");
  assert_close(t->dims[0].link_bw_Bps, 300e9 * 0.722, "300 GB/s x 0.722");
  assert_close(t->dims[0].latency_s, 6.34e-6, "latency");
  assert_close(t->dims[1].link_bw_Bps, 100e9, "default efficiency 1");
}

/* pair_links: the rings NCCL lays over GPUs 0..n-1 of DGX-1V's cube-mesh, as vTrain's V100
 * nccl-tests tables show them at 1 GiB (22.5, 45.1, 85.4, 45.7, 87.0 and 134.5 GB/s busbw on
 * 2, 3, 4, 6, 7 and 8 GPUs: 1, 2, 4, 2, 4 and 6 links of 25 GB/s at 0.90). Over 5 GPUs GPU 4's
 * only NVLink neighbour is GPU 0, so no ring closes over direct links and the rings go through
 * GPU 0 (NVB): 2, at pair_relay_efficiency (0.83: 37.2 GB/s measured, not 44.9). Cutting the
 * machine re-derives the port rate; a chip without any link talks over PCIe (the chip's host
 * link). */
Test(topo, pair_links_rings_follow_the_cut)
{
  g_autoptr(ts_topo) t = load_shipped("dgx1-v100");
  static const int rings[9] = {0, 0, 1, 2, 4, 2, 2, 4, 6};
  for (int n = 2; n <= 8; n++) {
    cr_assert_eq(t->dims[0].pair_rings[n], rings[n], "%d GPUs: %d rings, want %d", n,
                 t->dims[0].pair_rings[n], rings[n]);
    /* Only the 5-GPU cut's rings hop through another GPU (GPU 0), at pair_relay_efficiency. */
    cr_assert_eq(t->dims[0].pair_relayed[n], n == 5, "%d GPUs: relayed %d", n,
                 t->dims[0].pair_relayed[n]);
    cr_assert(ts_topo_dim_set_size(&t->dims[0], n, NULL));
    cr_assert_eq(t->dims[0].size, n);
    assert_close(t->dims[0].link_bw_Bps, rings[n] * 25e9 * 0.9 * (n == 5 ? 0.83 : 1.0),
                 "port rate");
  }
  /* A star (chip 0 joined to 1 and 2 by two links each, 1 and 2 not joined): no ring closes over
   * direct links; through chip 0 each ring 0 -> 1 -> (0) -> 2 -> 0 takes one of each direction
   * of both pairs, so 2 rings, each at 0.5 of one link's 25 x 0.8. */
  g_autoptr(ts_topo) s =
      from_text(CHIP_OK DIM("node", "3", "switch", "25", "1") "pair_links = 0-1:2,0-2:2\n"
                                                              "bandwidth_efficiency = 0.8\n"
                                                              "pair_relay_efficiency = 0.5\n",
                "mem/star.ini");
  cr_assert_eq(s->dims[0].pair_rings[3], 2);
  cr_assert(s->dims[0].pair_relayed[3]);
  cr_assert(!s->dims[0].pair_relayed[2], "chips 0 and 1 ring over their own links");
  assert_close(s->dims[0].link_bw_Bps, 2 * 25e9 * 0.8 * 0.5, "two relayed rings");
  cr_assert(ts_topo_dim_set_size(&s->dims[0], 2, NULL));
  assert_close(s->dims[0].link_bw_Bps, 2 * 25e9 * 0.8, "two direct rings over chips 0-1");
  g_autoptr(ts_topo) u = from_text(
      CHIP_OK "[host]\nlink_bandwidth_GBps = 12\n" DIM(
          "node", "3", "switch", "25", "1") "pair_links = 0-1:2\nbandwidth_efficiency = 0.5\n",
      "mem/pairs.ini");
  cr_assert_eq(u->dims[0].pair_rings[2], 2, "two links, two rings over two chips");
  cr_assert_eq(u->dims[0].pair_rings[3], 0, "chip 2 has no link");
  assert_close(u->dims[0].link_bw_Bps, 12e9 * 0.5, "PCIe without a ring");
  cr_assert(ts_topo_dim_set_size(&u->dims[0], 2, NULL));
  assert_close(u->dims[0].link_bw_Bps, 2 * 25e9 * 0.5, "two rings of one link");
  /* A what-if on the port before the cut (--vary link_bandwidth_GBps=x2 listed before
   * dim.node.size) stays a factor: the cut used to reset the port to its rings, and the x2 rows
   * came out as the x1 rows. */
  g_autoptr(ts_topo) w = load_shipped("dgx1-v100");
  w->dims[0].link_bw_Bps *= 2;
  cr_assert(ts_topo_dim_set_size(&w->dims[0], 4, NULL));
  assert_close(w->dims[0].link_bw_Bps, 2 * 4 * 25e9 * 0.9, "x2 kept over 4 rings");
  cr_assert(ts_topo_dim_set_size(&w->dims[0], 8, NULL));
  assert_close(w->dims[0].link_bw_Bps, 2 * 6 * 25e9 * 0.9, "and back over 6");
}

Test(topo, largest_array_accepted)
{
  /* 1024 x 1024 = 2^20 chips is the limit, and nothing is allocated per chip. */
  g_autoptr(ts_topo) t = from_text(
      CHIP_OK DIM("x", "1024", "ring", "1", "1") DIM("y", "1024", "ring", "1", "1"), "mem/big.ini");
  cr_assert_eq(t->nchips, 1048576);
  int c[2] = {1023, 1023};
  int last = ts_topo_chip(t, c);
  cr_assert_eq(last, 1048575);
}

/* ---- Bad inputs: each gives one line naming the file, the place and what was expected. ---- */

typedef struct {
  const char *what;
  const char *contents; /* NULL: the file does not exist */
  const char *expect[3];
} bad_case;

/* Criterion runs each parameter in a fresh process, where pointers inside parameters are not
 * valid; so the parameters are indices into this table, which every process has. */
static const bad_case BAD[] = {
    {"missing file", NULL, {"cannot read", "No such file"}},
    {"not an INI", "{\"chip\": {\"name\": \"x\"}}\n", {"expected a [group] line"}},
    {"binary junk", "\x01\x02\xff\xfe\n[\n", {"expected a [group] line"}},
    /* Not group lines for GKeyFile, but taken for ones when naming the bad line: the error
     * pointed at the line after the last with an empty excerpt. */
    {"empty group name", CHIP_OK "[]\n" DIM_OK("x"), {":6: '[]': expected a [group] line"}},
    {"text after a group", "[chip]x\nname = T\n" DIM_OK("x"), {":1: '[chip]x'"}},
    {"nested brackets", CHIP_OK "[dim.x]]\n", {":6: '[dim.x]]'"}},
    {"unknown group",
     CHIP_OK DIM_OK("x") "[chips]\nname = x\n",
     {"[chips]: unknown group", "expected [topology], [chip], [host] or [dim.NAME]"}},
    {"unknown key",
     CHIP_OK "[dim.x]\nsize = 4\nshape = ring\nlink_bandwidth_GBps = 1\n"
             "latency_us = 1\nbandwith_GBps = 5\n",
     {"[dim.x] bandwith_GBps: unknown key",
      "expected one of: size, shape, link_bandwidth_GBps, latency_us, bandwidth_efficiency, "
      "gpus_per_nic, nics_per_node, in_switch_reduction"}},
    {"unknown chip key",
     CHIP_OK "peak_tflop = 3\n" DIM_OK("x"),
     {"[chip] peak_tflop: unknown key"}},
    {"unknown host key",
     CHIP_OK "[host]\nram_GiB = 3\n" DIM_OK("x"),
     {"[host] ram_GiB: unknown key"}},
    {"size=0",
     CHIP_OK DIM("x", "0", "ring", "1", "1"),
     {"[dim.x] size='0': expected a chip count, a whole number in [1, 65536]"}},
    {"size=-3",
     CHIP_OK DIM("x", "-3", "ring", "1", "1"),
     {"[dim.x] size='-3': expected a chip count"}},
    {"size=1e30",
     CHIP_OK DIM("x", "1e30", "ring", "1", "1"),
     {"[dim.x] size='1e30': expected a chip count"}},
    {"size=2.5", CHIP_OK DIM("x", "2.5", "ring", "1", "1"), {"[dim.x] size='2.5'"}},
    {"bandwidth=100x",
     CHIP_OK DIM("x", "4", "ring", "100x", "1"),
     {"[dim.x] link_bandwidth_GBps='100x': expected a one-direction link bandwidth in GB/s",
      "[0.001, 1000000]"}},
    {"bandwidth=0",
     CHIP_OK DIM("x", "4", "ring", "0", "1"),
     {"[dim.x] link_bandwidth_GBps='0'", "[0.001, 1000000]"}},
    {"bandwidth=1e300",
     CHIP_OK DIM("x", "4", "ring", "1e300", "1"),
     {"[dim.x] link_bandwidth_GBps='1e300'"}},
    {"shape=hexagon",
     CHIP_OK DIM("x", "4", "hexagon", "1", "1"),
     {"[dim.x] shape='hexagon': expected ring", "mesh", "switch"}},
    {"no dims", CHIP_OK, {"no [dim.NAME] group", "expected 1 to 4 dimensions"}},
    {"too many dims",
     CHIP_OK DIM_OK("a") DIM_OK("b") DIM_OK("c") DIM_OK("d") DIM_OK("e"),
     {"[dim.e]: dimension 5; expected at most 4"}},
    {"NaN peak",
     "[chip]\nname = T\npeak_tflops = nan\nmemory_GiB = 1\n"
     "memory_bandwidth_GBps = 1\n" DIM_OK("x"),
     {"[chip] peak_tflops='nan': expected a dense bf16 peak in TFLOP/s"}},
    {"NaN latency", CHIP_OK DIM("x", "4", "ring", "1", "NaN"), {"[dim.x] latency_us='NaN'"}},
    {"inf bandwidth",
     CHIP_OK DIM("x", "4", "ring", "inf", "1"),
     {"[dim.x] link_bandwidth_GBps='inf'"}},
    {"negative latency",
     CHIP_OK DIM("x", "4", "ring", "1", "-1"),
     {"[dim.x] latency_us='-1': expected a latency in microseconds in [0, 1000000]"}},
    {"efficiency 0",
     CHIP_OK "compute_efficiency = 0\n" DIM_OK("x"),
     {"[chip] compute_efficiency='0'", "[0.001, 1]"}},
    {"efficiency 1.5",
     CHIP_OK "compute_efficiency = 1.5\n" DIM_OK("x"),
     {"[chip] compute_efficiency='1.5'", "[0.001, 1]"}},
    {"fp32 efficiency 1.5",
     CHIP_OK "compute_efficiency_fp32 = 1.5\n" DIM_OK("x"),
     {"[chip] compute_efficiency_fp32='1.5'", "peak_tflops_fp32", "[0.001, 1]"}},
    {"fp32 efficiency 1e-300",
     CHIP_OK "compute_efficiency_fp32 = 1e-300\n" DIM_OK("x"),
     {"[chip] compute_efficiency_fp32='1e-300'", "[0.001, 1] or 0"}},
    {"fp8 split accumulation rate 1.5",
     CHIP_OK "fp8_split_accum_rate = 1.5\n" DIM_OK("x"),
     {"[chip] fp8_split_accum_rate='1.5'", "fast-accumulation rate", "[0.001, 1]"}},
    {"fp8 split accumulation rate 1e-300",
     CHIP_OK "fp8_split_accum_rate = 1e-300\n" DIM_OK("x"),
     {"[chip] fp8_split_accum_rate='1e-300'", "[0.001, 1]"}},
    {"fp8 split accumulation rate -0.1",
     CHIP_OK "fp8_split_accum_rate = -0.1\n" DIM_OK("x"),
     {"[chip] fp8_split_accum_rate='-0.1'"}},
    {"collective SMs all the SMs",
     CHIP_OK "compute_units = 108\ncollective_sms = 108\n" DIM_OK("x"),
     {"[chip] collective_sms: 108", "expected fewer than compute_units (108"}},
    {"collective SMs without SMs",
     CHIP_OK "collective_sms = 16\n" DIM_OK("x"),
     {"[chip] collective_sms: 16 without compute_units", "expected compute_units"}},
    {"negative collective SMs",
     CHIP_OK "compute_units = 108\ncollective_sms = -1\n" DIM_OK("x"),
     {"[chip] collective_sms='-1'", "streaming multiprocessors a running collective holds"}},
    {"bandwidth efficiency 0",
     CHIP_OK DIM_OK("x") "bandwidth_efficiency = 0\n",
     {"[dim.x] bandwidth_efficiency='0'", "fraction of link_bandwidth_GBps", "[0.001, 1]"}},
    {"bandwidth efficiency 1.2",
     CHIP_OK DIM_OK("x") "bandwidth_efficiency = 1.2\n",
     {"[dim.x] bandwidth_efficiency='1.2'", "[0.001, 1]"}},
    {"bandwidth efficiency text",
     CHIP_OK DIM_OK("x") "bandwidth_efficiency = 72%\n",
     {"[dim.x] bandwidth_efficiency='72%'"}},
    /* The low ends: 1e-300 was accepted and printed step times of inf s or 38-digit seconds
     * with -nan columns; a rate below 0.001 TFLOP/s or GB/s, or a fraction below 0.001, is a
     * typo. */
    {"tiny Triton rate",
     CHIP_OK "flash_efficiency_triton = 1e-300\n" DIM_OK("x"),
     {"[chip] flash_efficiency_triton='1e-300'", "in [0.001, 1] or 0"}},
    {"tiny compute efficiency",
     CHIP_OK "compute_efficiency = 1e-300\n" DIM_OK("x"),
     {"[chip] compute_efficiency='1e-300'", "[0.001, 1]"}},
    {"tiny memory efficiency",
     CHIP_OK "memory_bandwidth_efficiency = 0.0001\n" DIM_OK("x"),
     {"[chip] memory_bandwidth_efficiency='0.0001'", "[0.001, 1]"}},
    {"tiny peak",
     "[chip]\nname = T\npeak_tflops = 1e-300\nmemory_GiB = 1\n"
     "memory_bandwidth_GBps = 1\n" DIM_OK("x"),
     {"[chip] peak_tflops='1e-300'", "[0.001, 1000000]"}},
    {"tiny fp32 peak",
     CHIP_OK "peak_tflops_fp32 = 1e-300\n" DIM_OK("x"),
     {"[chip] peak_tflops_fp32='1e-300'", "[0.001, 1000000] or 0"}},
    {"tiny memory bandwidth",
     "[chip]\nname = T\npeak_tflops = 1\nmemory_GiB = 1\n"
     "memory_bandwidth_GBps = 1e-300\n" DIM_OK("x"),
     {"[chip] memory_bandwidth_GBps='1e-300'", "[0.001, 1000000]"}},
    {"tiny link bandwidth",
     CHIP_OK DIM("x", "4", "ring", "1e-300", "1"),
     {"[dim.x] link_bandwidth_GBps='1e-300'", "[0.001, 1000000]"}},
    {"tiny bandwidth efficiency",
     CHIP_OK DIM_OK("x") "bandwidth_efficiency = 1e-300\n",
     {"[dim.x] bandwidth_efficiency='1e-300'", "[0.001, 1]"}},
    {"tiny NCCL local rate",
     CHIP_OK DIM_OK("x") "nccl_local_bandwidth_GBps = 1e-300\n",
     {"[dim.x] nccl_local_bandwidth_GBps='1e-300'", "[0.001, 1000000] or 0"}},
    {"tiny host link",
     CHIP_OK "[host]\nlink_bandwidth_GBps = 1e-300\n" DIM_OK("x"),
     {"[host] link_bandwidth_GBps='1e-300'", "[0.001, 1000000] or 0"}},
    {"negative host memory",
     CHIP_OK "[host]\nmemory_GiB = -1\n" DIM_OK("x"),
     {"[host] memory_GiB='-1'", "[0, 1000000000]"}},
    {"missing size",
     CHIP_OK "[dim.x]\nshape = ring\nlink_bandwidth_GBps = 1\nlatency_us = 1\n",
     {"[dim.x] size: missing; expected a chip count"}},
    {"missing shape",
     CHIP_OK "[dim.x]\nsize = 2\nlink_bandwidth_GBps = 1\nlatency_us = 1\n",
     {"[dim.x] shape: missing; expected ring, mesh or switch"}},
    {"missing latency",
     CHIP_OK "[dim.x]\nsize = 2\nshape = ring\nlink_bandwidth_GBps = 1\n",
     {"[dim.x] latency_us: missing"}},
    {"missing chip", DIM_OK("x"), {"[chip]: missing group"}},
    {"empty file", "", {"[chip]: missing group"}},
    {"empty chip name",
     "[chip]\nname =\npeak_tflops = 1\nmemory_GiB = 1\n"
     "memory_bandwidth_GBps = 1\n" DIM_OK("x"),
     {"[chip] name: empty"}},
    {"bad dim name", CHIP_OK DIM_OK("1x"), {"[dim.1x]: dimension name '1x'"}},
    {"empty dim name", CHIP_OK "[dim.]\nsize = 1\n", {"[dim.]: dimension name ''"}},
    {"too many chips",
     CHIP_OK DIM("x", "1024", "ring", "1", "1") DIM("y", "1024", "ring", "1", "1")
         DIM("z", "2", "ring", "1", "1"),
     {"[dim.z] size='2': the array would have 2097152 chips; expected at most 1048576"}},
    {"dim too long", CHIP_OK DIM("x", "65537", "ring", "1", "1"), {"[dim.x] size='65537'"}},
    {"nics on the first dim",
     CHIP_OK "[dim.node]\nsize = 8\nshape = switch\nlink_bandwidth_GBps = 1\nlatency_us = 1\n"
             "nics_per_node = 4\n",
     {"[dim.node] nics_per_node", "expected a switch dimension after the first"}},
    {"nics not a divisor",
     CHIP_OK DIM("node", "8", "switch", "1", "1")
         DIM("net", "2", "switch", "1", "1") "nics_per_node = 3\n",
     {"[dim.net] nics_per_node='3'", "expected a divisor of the first dimension's 8 chips"}},
    {"gpus per nic and nics",
     CHIP_OK DIM("node", "8", "switch", "1", "1")
         DIM("net", "2", "switch", "1", "1") "nics_per_node = 4\ngpus_per_nic = 2\n",
     {"[dim.net] gpus_per_nic and nics_per_node: expected one of the two"}},
    {"gpus per nic zero",
     CHIP_OK DIM("node", "8", "switch", "1", "1")
         DIM("net", "2", "switch", "1", "1") "gpus_per_nic = 0\n",
     {"[dim.net] gpus_per_nic='0'"}},
    {"nics on a ring",
     CHIP_OK DIM("x", "8", "ring", "1", "1") DIM("y", "2", "ring", "1", "1") "nics_per_node = 4\n",
     {"[dim.y] nics_per_node", "expected a switch dimension"}},
    {"in-switch reduction maybe",
     CHIP_OK DIM("node", "8", "switch", "1", "1") "in_switch_reduction = maybe\n",
     {"[dim.node] in_switch_reduction='maybe': expected true or false"}},
    {"in-switch reduction on a ring",
     CHIP_OK DIM_OK("x") "in_switch_reduction = true\n",
     {"[dim.x] in_switch_reduction=true: expected a switch dimension"}},
    {"LL fraction 2",
     CHIP_OK DIM_OK("x") "nccl_ll_bandwidth_fraction = 2\n",
     {"[dim.x] nccl_ll_bandwidth_fraction='2'", "[0.001, 1]"}},
    {"negative NCCL base latency",
     CHIP_OK DIM_OK("x") "nccl_simple_base_latency_us = -3\n",
     {"[dim.x] nccl_simple_base_latency_us='-3'"}},
    {"unknown topology key",
     "[topology]\nname = a\ncolor = red\n" CHIP_OK DIM_OK("x"),
     {"[topology] color: unknown key"}},
    {"pair link to itself",
     CHIP_OK DIM("node", "4", "switch", "25", "1") "pair_links = 0-1:1,2-2:1\n",
     {"[dim.node] pair_links item '2-2:1'", "expected A-B:N"}},
    {"pair link twice",
     CHIP_OK DIM("node", "4", "switch", "25", "1") "pair_links = 0-1:1,1-0:2\n",
     {"[dim.node] pair_links item '1-0:2'", "each pair once"}},
    {"pair links on a ring",
     CHIP_OK DIM("x", "4", "ring", "25", "1") "pair_links = 0-1:1\n",
     {"[dim.x] pair_links: expected shape = switch"}},
    {"pair links empty",
     CHIP_OK DIM("node", "4", "switch", "25", "1") "pair_links =\n",
     {"[dim.node] pair_links=''", "expected A-B:N"}},
    {"pair link past the size",
     CHIP_OK DIM("node", "4", "switch", "25", "1") "pair_links = 0-1:1,2-4:1\n",
     {"[dim.node] pair_links item '2-4:1'", "below the size, 4"}},
    {"pair link chip past INT_MAX (read as chip 0 by %d)",
     CHIP_OK DIM("node", "4", "switch", "25", "1") "pair_links = 4294967296-1:1\n",
     {"[dim.node] pair_links item '4294967296-1:1'", "expected A-B:N"}},
    {"pair link with a sign",
     CHIP_OK DIM("node", "4", "switch", "25", "1") "pair_links = +0-1:2\n",
     {"[dim.node] pair_links item '+0-1:2'", "expected A-B:N"}},
    {"pair link with inner blanks",
     CHIP_OK DIM("node", "4", "switch", "25", "1") "pair_links = 0- 1: 2\n",
     {"[dim.node] pair_links item '0- 1: 2'", "expected A-B:N"}},
    {"pair relay efficiency without pair links",
     CHIP_OK DIM("node", "4", "switch", "25", "1") "pair_relay_efficiency = 0.8\n",
     {"[dim.node] pair_relay_efficiency", "expected pair_links too"}},
    {"pair relay efficiency above 1",
     CHIP_OK DIM("node", "4", "switch", "25", "1") "pair_links = 0-1:1\n"
                                                   "pair_relay_efficiency = 1.5\n",
     {"[dim.node] pair_relay_efficiency='1.5'", "in [0.001, 1]"}},
    {"pair links on a huge dimension",
     CHIP_OK DIM("node", "65536", "switch", "25", "1") "pair_links = 0-1:1\n",
     {"[dim.node] pair_links: size = 65536", "at most 16 chips"}},
    {"NCCL model channels on the first dimension (ignored)",
     CHIP_OK DIM("node", "8", "switch", "300", "1") "nccl_model_channels = 8\n",
     {"[dim.node] nccl_model_channels='8'", "expected a switch dimension after the first"}},
    {"NCCL model channels on a ring (ignored)",
     CHIP_OK DIM("node", "8", "switch", "300", "1")
         DIM("x", "4", "ring", "25", "1") "nccl_model_channels = 8\n",
     {"[dim.x] nccl_model_channels='8'", "expected a switch dimension after the first"}},
    {"NCCL net overhead without the model's channels (ignored)",
     CHIP_OK DIM("node", "8", "switch", "300", "1")
         DIM("net", "4", "switch", "25", "1") "nccl_net_overhead_us = 2\n",
     {"[dim.net] nccl_net_overhead_us", "expected nccl_model_channels > 0"}},
    {"NCCL node hop on the node itself (ignored)",
     CHIP_OK DIM("node", "8", "switch", "300", "1") "nccl_node_hop_latency_us = 1\n",
     {"[dim.node] nccl_node_hop_latency_us", "expected a dimension after the first"}},
    {"NCCL channels on a dimension after the first (ignored)",
     CHIP_OK DIM("node", "8", "switch", "300", "1")
         DIM("net", "4", "switch", "25", "1") "nccl_channels = 24\n",
     {"[dim.net] nccl_channels='24'", "expected the first dimension"}},
    {"NCCL channels out of range",
     CHIP_OK DIM("node", "8", "switch", "300", "1") "nccl_channels = 65\n",
     {"[dim.node] nccl_channels", "channel count"}},
    {"NCCL node hop negative",
     CHIP_OK DIM("node", "8", "switch", "300", "1")
         DIM("net", "4", "switch", "25", "1") "nccl_node_hop_latency_us = -1\n",
     {"[dim.net] nccl_node_hop_latency_us", "per-hop latency"}},
    {"NCCL tree chunk cost on the node itself (ignored)",
     CHIP_OK DIM("node", "8", "switch", "300", "1") "nccl_tree_chunk_latency_us = 1\n",
     {"[dim.node] nccl_tree_chunk_latency_us", "expected a dimension after the first"}},
    {"NCCL tree chunk cost negative",
     CHIP_OK DIM("node", "8", "switch", "300", "1")
         DIM("net", "4", "switch", "25", "1") "nccl_tree_chunk_latency_us = -1\n",
     {"[dim.net] nccl_tree_chunk_latency_us", "latency per chunk"}},
};

ParameterizedTestParameters(topo, bad_input)
{
  static int index[G_N_ELEMENTS(BAD)];
  for (size_t i = 0; i < G_N_ELEMENTS(BAD); i++)
    index[i] = (int)i;
  return cr_make_param_array(int, index, G_N_ELEMENTS(index));
}

ParameterizedTest(int *which, topo, bad_input)
{
  const bad_case *c = &BAD[*which];
  char *dir = NULL;
  char *path;
  if (c->contents != NULL) {
    path = write_temp("bad.ini", c->contents, &dir);
  } else {
    path = g_strdup("/nonexistent-trainsim-dir/none.ini");
  }
  g_autoptr(GError) error = NULL;
  ts_topo *t = ts_topo_load(path, &error);
  cr_assert_null(t, "%s: loaded, expected an error", c->what);
  cr_assert_not_null(error, "%s: NULL without an error", c->what);
  int domain_ok = error->domain == TS_ERROR;
  cr_assert(domain_ok, "%s: error not in TS_ERROR: %s", c->what, error->message);
  const char *msg = error->message;
  cr_assert(strchr(msg, '\n') == NULL, "%s: message is not one line: %s", c->what, msg);
  cr_assert(g_str_has_prefix(msg, path), "%s: message does not start with the file: %s", c->what,
            msg);
  for (int i = 0; i < 3 && c->expect[i] != NULL; i++)
    cr_assert(strstr(msg, c->expect[i]) != NULL, "%s: message lacks \"%s\": %s", c->what,
              c->expect[i], msg);
  if (dir != NULL)
    remove_temp(path, dir);
  else
    g_free(path);
}

Test(topo, bad_keyfile_in_memory_names_given_path)
{
  g_autoptr(GKeyFile) kf = g_key_file_new();
  gboolean ok = g_key_file_load_from_data(kf, CHIP_OK DIM("x", "0", "ring", "1", "1"), (gsize)-1,
                                          G_KEY_FILE_NONE, NULL);
  cr_assert(ok);
  g_autoptr(GError) error = NULL;
  ts_topo *t = ts_topo_from_keyfile(kf, "topologies/pod.ini", &error);
  cr_assert_null(t);
  cr_assert_str_eq(error->message, "topologies/pod.ini: [dim.x] size='0': expected a chip count, a "
                                   "whole number in [1, 65536]");
}
