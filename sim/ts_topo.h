/* ts_topo: a chip kind plus an array that is the product of named dimensions. */
#ifndef TS_TOPO_H
#define TS_TOPO_H

#include <glib.h>

G_BEGIN_DECLS

#define TS_MAX_DIMS 4

typedef enum {
  TS_SHAPE_RING,   /* torus dimension: neighbours linked, with wrap-around */
  TS_SHAPE_MESH,   /* neighbours linked, no wrap-around */
  TS_SHAPE_SWITCH, /* every chip of the line has one port into a non-blocking switch */
} ts_shape;

/** One dimension of the array. Bandwidths in bytes/s, one direction of one link. */
typedef struct {
  char *name; /* "x", "y", "node", "net" (the [dim.NAME] group) */
  int size;   /* chips along this dimension, >= 1 */
  ts_shape shape;
  double link_bw_Bps; /* one direction, one link (ring/mesh) or one chip's port (switch) */
  double latency_s;   /* per hop (ring/mesh) or per traversal of the switch */
} ts_dim;

/** The chip kind. SI units inside: FLOP/s, bytes, bytes/s. */
typedef struct {
  char *name;
  double peak_flops;         /* dense peak at the training data type */
  double memory_bytes;       /* device memory capacity */
  double memory_bw_Bps;      /* device memory bandwidth */
  double compute_efficiency; /* fraction of peak a large GEMM reaches, (0, 1] */
  /* [host] keys (offload, parameter servers); 0 where a topology does not give them. */
  double host_link_bw_Bps;  /* chip <-> host memory, one direction */
  double host_memory_bytes; /* host memory per chip */
  double host_flops;        /* host CPU FLOP/s available per chip for optimizer steps */
  double nvme_bw_Bps;       /* NVMe read/write bandwidth per chip */
  double nvme_bytes;        /* NVMe capacity per chip */
  /* [chip] op_overhead_us: the minimum time of one compute op (kernel launches, framework);
   * ts_compute_time returns max(roofline, this). 0 where a topology does not give it. */
  double op_overhead_s;
  /* Shape-aware compute (sim/ts_cost.c). All optional: a chip without them costs ops by the
   * roofline above. peak_flops is the bf16 rate; fp8 / fp32 rates are 0 where the chip has
   * none (an fp8 request there is an error). */
  double peak_flops_fp8, peak_flops_fp32;
  double memory_bw_efficiency; /* fraction of memory_bw_Bps memory-bound kernels reach, (0, 1] */
  double kernel_launch_s;      /* [chip] kernel_launch_us: the host's time per kernel launch */
  double gemm_k_overhead;      /* per-tile fixed cost, as extra k (GEMM prologue / epilogue) */
  int compute_units;           /* GPU: streaming multiprocessors (0: no wave model) */
  int tile_m, tile_n;          /* GPU: the GEMM output tile (e.g. 128 x 256) */
  int systolic;                /* TPU: systolic array width (128; v6e 256); 0: not a TPU */
  gboolean uncalibrated;       /* [chip] calibrated = false: not fitted, MFU an upper bound */
  char *profile;               /* [chip] profile it was loaded from, NULL when none */
} ts_chip;

/** A topology. Chip id = sum(coord[d] * stride[d]), dimension 0 fastest. */
typedef struct {
  char *name; /* [topology] name, or the file's base name */
  char *path; /* file it was read from (for messages and provenance) */
  ts_chip chip;
  int ndims;
  ts_dim dims[TS_MAX_DIMS];
  int nchips;
} ts_topo;

/** Reads and validates a topology file; errors name the file and the [group] key. */
ts_topo *ts_topo_load(const char *path, GError **error);

/** Builds a topology from a key file already in memory (path used in messages only). */
ts_topo *ts_topo_from_keyfile(GKeyFile *kf, const char *path, GError **error);

/** Deep copy (for what-if scaling of a loaded topology). */
ts_topo *ts_topo_copy(const ts_topo *t);

void ts_topo_free(ts_topo *t);

/** Index of the dimension named name, or -1. */
int ts_topo_dim_index(const ts_topo *t, const char *name);

/** Coordinates of chip id (coords has ndims entries). */
void ts_topo_coords(const ts_topo *t, int chip, int *coords);

/** Chip id of coordinates. */
int ts_topo_chip(const ts_topo *t, const int *coords);

/** Stride of dimension d in chip ids. */
int ts_topo_stride(const ts_topo *t, int d);

/** "TPU v3 slice 8x8 (64 chips)" style description. Caller frees. */
char *ts_topo_describe(const ts_topo *t);

/** Shape name ("ring", "mesh", "switch"). */
const char *ts_shape_name(ts_shape s);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_topo, ts_topo_free)

G_END_DECLS

#endif
