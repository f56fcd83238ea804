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
  /* Added with issue 13: a twisted torus (Camara et al. 2010, "Twisted Torus Topologies for
   * Enhanced Interconnection Networks"; TPU v4's k x k x 2k and k x 2k x 2k slices, Jouppi et
   * al. 2023, section 2): crossing this ring's wrap-around link in the + direction also moves
   * twist[e] places along dimension e (- direction: back). All zero for a plain torus. */
  int twist[TS_MAX_DIMS];
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

/** Whether some dimension's wrap-around is twisted (routes are then shortest paths). */
gboolean ts_topo_twisted(const ts_topo *t);

/**
 * The chip one link away from `chip` along ring or mesh dimension d in direction dir (+1 or
 * -1), following a twisted wrap-around; -1 where a mesh has no such link.
 */
int ts_topo_neighbor(const ts_topo *t, int chip, int d, int dir);

/** "TPU v3 slice 8x8 (64 chips)" style description. Caller frees. */
char *ts_topo_describe(const ts_topo *t);

/** Shape name ("ring", "mesh", "switch"). */
const char *ts_shape_name(ts_shape s);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_topo, ts_topo_free)

G_END_DECLS

#endif
