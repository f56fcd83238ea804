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

/* Chips a [dim.X] pair_links mesh may describe. */
#define TS_PAIR_MAX 16

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
  /* Switch dims after the first: how many consecutive chips of dimension 0 share one port
   * into this switch (GPUs per NIC; [dim.X] gpus_per_nic or nics_per_node). 1: a port each. */
  int chips_per_port;
  /* [dim.X] in_switch_reduction: the switch reduces and multicasts (NVLink SHARP, NVLS), and
   * the fraction of link bandwidth an in-switch all-reduce reaches. */
  gboolean in_switch_reduction;
  double in_switch_efficiency;
  /* [dim.X] nccl_ll_bandwidth_fraction, nccl_ll128_bandwidth_fraction: the fraction of what
   * NCCL's Simple protocol reaches that LL and LL128 reach on this dimension (0: NCCL's
   * nominal 0.5 and 0.92). */
  double ll_bw_frac, ll128_bw_frac;
  /* [dim.X] nccl_{ll,ll128,simple}_base_latency_us: the fixed cost of one NCCL collective with
   * each protocol (launch, synchronisation; NCCL's baseLat is 6.6, 14 and 8.4 us for its ring),
   * seconds; 0: NCCL's value. A group spanning several dimensions pays its outermost given. */
  double nccl_base_s[3];
  /* [dim.X] nccl_ll_latency_us, nccl_ll128_latency_us: per-step latency of LL and LL128 on this
   * dimension (latency_us is Simple's), seconds; 0: latency_us times NCCL's hwLat ratio. */
  double nccl_step_s[2];
  /* [dim.X] nccl_local_bandwidth_GBps: the rate at which a chip runs NCCL's local work on the
   * buffer (reductions, copies through its memory), bytes/s; each NCCL collective adds
   * bytes / rate. 0: none. A group spanning several dimensions pays the slowest. */
  double nccl_local_Bps;
  /* [dim.X] nccl_ll_channel_latency_us: what LL costs per channel NCCL runs it on, seconds.
   * NCCL spreads a collective over channels (one thread block of up to 512 threads each) and,
   * for small buffers, threads, as many as bytes / threadThreshold (enqueue.cc; LL's threshold
   * is 8 B per thread, times the ranks for the ring): LL's time grows with that count where
   * its steps are latency-bound. 0: no such cost. */
  double nccl_ll_channel_s;
  /* [dim.X] nccl_channels (the first dimension): the channels NCCL runs a ring all-reduce on
   * in one node ("24 coll channels" on an HGX A100). With it, Simple's ring moves each
   * channel's per-rank chunk in 128 KiB pieces and pays for the last piece's padding
   * (ts_coll_algos.c, set_proto). 0: no such cost. */
  int nccl_channels;
  /* [dim.X] nccl_tree_bandwidth_GBps: the largest bus bandwidth (nccl-tests' busbw) NCCL's tree
   * all-reduce reaches over a group spanning this dimension, bytes/s (NCCL's tuning model caps
   * the tree per channel, perChMaxTreeBw); 0: no cap beyond the links'. */
  double nccl_tree_Bps;
  /* [dim.X] nccl_tree_chunk_latency_us: a fixed cost per chunk of NCCL's Simple tree across
   * this dimension, seconds. NCCL shrinks the tree's chunk from 512 KiB to 32 KiB while a
   * channel has fewer than 8, 4, 1 x the tree's depth chunks (enqueue.cc, ncclPatternTreeUpDown),
   * so smaller buffers move in more, smaller chunks. 0: no such cost. */
  double nccl_tree_chunk_s;
  /* [dim.X] nccl_model_bus_bandwidth_GBps: the bus bandwidth NCCL's tuning model assumes for
   * Simple over this dimension (its topology search's channels x bandwidth per channel: 240 on
   * an HGX A100 node, 12 NVLinks x NCCL's 20 GB/s; a node's NICs across nodes), bytes/s; used
   * only to choose algorithm and protocol as NCCL does. 0: what Simple reaches here. */
  double nccl_model_Bps;
  /* [dim.X] pair_links (a direct-connect NVLink mesh such as DGX-1's): the rings NCCL lays over
   * chips 0..n-1 for each n (pair_rings[n]; 0: none over NVLink), one link's achieved rate and
   * the PCIe rate without a ring, bytes/s. link_bw_Bps is then pair_rings[size] links (or the
   * PCIe rate); ts_topo_dim_set_size keeps it so when a sweep cuts the dimension. pair_links
   * is FALSE without the key; pair_chips is the file's size (a cut keeps at most that many). */
  gboolean pair_links;
  int pair_chips;
  int pair_rings[TS_PAIR_MAX + 1];
  /* pair_relayed[n]: chips 0..n-1's rings need a hop through another GPU (no ring closes over
   * direct links); such a ring runs at [dim.X] pair_relay_efficiency (pair_relay_eff) of one
   * link. */
  gboolean pair_relayed[TS_PAIR_MAX + 1];
  double pair_relay_eff;
  double pair_link_Bps, pair_pcie_Bps;
  /* [dim.X] transfer_stall_us: the time a chip's core spends, not computing, on each transfer
   * a collective sends and receives over this dimension, seconds. On a TPU a data-centre
   * network (DCN) transfer between slices is a send / send-done / recv / recv-done sequence
   * of ops on the TensorCore that hand buffers to the host, which moves the data (Cloud TPU
   * "Profiling Multislice environments", the Megascale stats' "stall duration"): the transfer
   * itself overlaps compute, these ops do not. 0: none (ICI, NVLink, NCCL's network). */
  double transfer_stall_s;
  /* [dim.X] nccl_model_channels: the channels of NCCL's topology search across this dimension
   * (graph nChannels; NCCL's per-channel caps scale with it). Given on a network dimension, NCCL's
   * tuning model (tuning.cc) chooses the algorithm and protocol of a group spanning it, with
   * nccl_model_bus_bandwidth_GBps as channels x bwInter. 0: the fitted costs choose. */
  int nccl_model_channels;
  /* [dim.X] nccl_net_overhead_us: NCCL's network post overhead per ring step (getNetOverhead:
   * 1 us on Intel hosts, 2 on AMD), seconds; 2 us also selects NCCL's AMD row of llMaxBws.
   * 0: NCCL's default, 1 us. */
  double nccl_net_overhead_s;
  /* [dim.X] nccl_node_hop_latency_us: Simple's per-hop latency on the node's links (dimension 0)
   * inside a group that spans this dimension, seconds; LL128's and the tree's follow by NCCL's
   * hwLat ratios. The node's own latency_us and nccl_ll128_latency_us are measured by nccl-tests
   * on one node, one thread driving every GPU ("nThread 1 nGpus 8"); across nodes NCCL runs one
   * process per GPU. 0: the node's own steps. */
  double nccl_node_hop_s;
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
  /* Added with issue 10. [chip] memory_reserve_GiB: device memory the runtime holds beside
   * the training's tensors; < 0 when the file does not give it (ts_chip_memory_reserve gives
   * the default), 0 in a topology built in code. */
  double memory_reserve_bytes;
  /* Added with issue 10 item 5. [chip] allocator_overhead: the fraction of the allocated peak
   * that the framework's memory allocator reserves on top of it (PyTorch's caching allocator:
   * freed blocks it keeps, rounding, blocks too small to reuse); < 0 when the file does not give
   * it (ts_chip_allocator_overhead gives the default), 0 in a topology built in code. */
  double allocator_overhead;
  /* Shape-aware compute (sim/ts_cost.c). All optional: a chip without them costs ops by the
   * roofline above. peak_flops is the bf16 rate; fp8 / fp32 rates are 0 where the chip has
   * none (an fp8 request there is an error). */
  double peak_flops_fp8, peak_flops_fp32;
  /* [chip] compute_efficiency_fp32: the fraction of peak_flops_fp32 a large fp32 GEMM reaches
   * on a GPU's CUDA cores, a different unit from the tensor cores compute_efficiency describes;
   * 0 (not given): compute_efficiency. */
  double compute_efficiency_fp32;
  /* Added with issue 10 (CNN training). [chip] peak_tflops_tf32: the dense TF32 tensor-core
   * rate (Ampere and later), which fp32 convolutions and GEMMs run at when the framework allows
   * TF32 (precision=tf32); 0: none, TF32 requests run at the fp32 rate as on a V100. */
  double peak_flops_tf32;
  double memory_bw_efficiency; /* fraction of memory_bw_Bps memory-bound kernels reach, (0, 1] */
  double kernel_launch_s;      /* [chip] kernel_launch_us: the host's time per kernel launch */
  double gemm_k_overhead;      /* per-tile fixed cost, as extra k (GEMM prologue / epilogue) */
  int compute_units;           /* GPU: streaming multiprocessors (0: no wave model) */
  int tile_m, tile_n;          /* GPU: the GEMM output tile (e.g. 128 x 256) */
  int systolic;                /* TPU: systolic array width (128; v6e 256); 0: not a TPU */
  gboolean uncalibrated;       /* [chip] calibrated = false or missing: MFU an upper bound */
  char *profile;               /* [chip] profile it was loaded from, NULL when none */
  /* Added with issue 10 (gpu-step). [chip] collective_launch_us: the host's time to issue one
   * collective (the framework's call, NCCL's enqueue); 0 (not charged) when not given. */
  double collective_launch_s;
  /* Added with issue 10 (long sequences). [chip] flash_efficiency: the fused attention core's
   * rate as a fraction of a large GEMM's (peak x compute_efficiency), on the FLOPs it computes
   * (a causal core skips the key tiles above the diagonal, ts_cost.c). 0 (not given): the core
   * is costed as batched GEMMs over the whole score matrix, with the GEMM tile model. */
  double flash_efficiency;
  /* Added with the A100 fused-attention rates. [chip] flash_efficiency_triton and
   * flash_efficiency_fa1: the same fraction for the other fused kernels a stack may run
   * (attn-kernel=triton: FlashAttention's Triton kernel, MPT / llm-foundry's attn_impl=triton;
   * attn-kernel=fa1: FlashAttention 1), where the chip's profile has a published rate for them;
   * 0 (not given): the split option is refused on this chip. */
  double flash_efficiency_triton, flash_efficiency_fa1;
  /* Added with the H100 FP8 backward. [chip] fp8_split_accum_rate: the rate of an FP8 GEMM that
   * promotes its partial sums to fp32 every few tensor-core steps (cuBLASLt without
   * CUBLASLT_MATMUL_DESC_FAST_ACCUM: torchao's and Transformer Engine's backward GEMMs) as a
   * fraction of the fast-accumulation rate the forward's run at; 0 (not given): the same rate
   * (a chip without a separate fast-accumulation mode). */
  double fp8_split_accum_rate;
  /* Added with the comm/compute contention of overlapped collectives. [chip] collective_sms: the
   * streaming multiprocessors a running NCCL collective holds, one thread block per channel,
   * none shared with a compute kernel; compute that runs beside the collective gets the other
   * compute_units - collective_sms (sim/plan/ts_plan_trace.c, contend). 0 (not given): none. */
  int collective_sms;
} ts_chip;

/** Prices, power and reliability (issue 14, capacity planning). SI inside; 0 = not given.
 * Read from [chip] price_per_hour, tdp_W, comm_W, idle_W and [topology] pue,
 * network_W_per_chip, storage_GBps_per_chip, mtbf_chip_hours, mtbf_node_hours,
 * chips_per_node, restart_minutes (ts_capacity.c); every one overridable on the command line. */
typedef struct {
  double price_per_chip_hour; /* USD per chip-hour */
  double busy_W;              /* chip power while computing (its TDP) */
  double comm_W;              /* chip power while only communicating */
  double idle_W;              /* chip power while waiting */
  double pue;                 /* facility power usage effectiveness, >= 1 */
  double network_W_per_chip;  /* switches, NICs and optics, per chip */
  double storage_Bps;         /* checkpoint storage bandwidth per chip (write and read) */
  double mtbf_chip_s;         /* mean time between job-interrupting failures of one chip */
  double mtbf_node_s;         /* of one node (host, NIC, power) beyond its chips */
  int chips_per_node;         /* for node failures */
  double restart_s;           /* from an interruption to training again, checkpoint read aside */
  gboolean restart_default;   /* restart_s is TS_GOODPUT_DEFAULT_RESTART_MINUTES, not given */
} ts_capacity_params;

/** A degraded array (issue 14): dead links, chips out, slow chips. */
#define TS_MAX_FAULTS 64
typedef struct {
  int dim;  /* dimension of the link */
  int chip; /* the link joins chip and its + neighbour along dim (wrapping on a ring) */
} ts_dead_link;

typedef struct {
  int ndead;
  ts_dead_link dead[TS_MAX_FAULTS];
  int nout;
  int out[TS_MAX_FAULTS]; /* chips out of the job (their links are dead too) */
  int nslow;
  int slow_chip[TS_MAX_FAULTS];
  double slow_factor[TS_MAX_FAULTS]; /* speed as a fraction of nominal, (0, 1] */
  /* A slow fabric (--straggler dim.NAME=F): the factor already applied to that dimension's
   * link bandwidth, kept to say so in the output; 0 = nominal. */
  double fabric_factor[TS_MAX_DIMS];
} ts_faults;

/** A topology. Chip id = sum(coord[d] * stride[d]), dimension 0 fastest. */
typedef struct {
  char *name; /* [topology] name, or the file's base name */
  char *path; /* file it was read from (for messages and provenance) */
  ts_chip chip;
  int ndims;
  ts_dim dims[TS_MAX_DIMS];
  int nchips;
  /* Added with issue 14. */
  ts_capacity_params cap;
  ts_faults faults;
} ts_topo;

/**
 * An array's geometry: its dimensions' count, sizes and names; chip (rank) ids in mixed radix,
 * dimension 0 fastest. The one type group arithmetic works on (coll's ts_array_* functions):
 * ts_topo_array gives a topology's, ts_trace_array a trace's, so a trace or a replay does its
 * rank arithmetic without a topology built for the purpose (review B4). A small value type:
 * names and label are borrowed from the topology or trace it was taken from.
 */
typedef struct {
  int ndims;
  int size[TS_MAX_DIMS];
  const char *name[TS_MAX_DIMS];
  const char *label; /* for messages: the topology's path or name, or "trace" */
} ts_array;

/** The topology's array (a view, valid while the topology is). */
ts_array ts_topo_array(const ts_topo *t);

/** Chips (ranks) of an array: the product of its sizes. */
int ts_array_nchips(const ts_array *a);

/** Stride of dimension d in chip ids: the product of the sizes of the dimensions before it. */
int ts_array_stride(const ts_array *a, int d);

/** Coordinates of chip (coords has ndims entries), dimension 0 fastest. */
void ts_array_coords(const ts_array *a, int chip, int *coords);

/** Coordinate of chip along dimension d alone (entry d of ts_array_coords). */
int ts_array_coord(const ts_array *a, int chip, int d);

/** Chip id of coordinates; -1 when a coordinate lies outside its dimension. */
int ts_array_chip(const ts_array *a, const int *coords);

/** Reads and validates a topology file; errors name the file and the [group] key. */
ts_topo *ts_topo_load(const char *path, GError **error);

/** Builds a topology from a key file already in memory (path used in messages only). */
ts_topo *ts_topo_from_keyfile(GKeyFile *kf, const char *path, GError **error);

/** Deep copy (for what-if scaling of a loaded topology). */
ts_topo *ts_topo_copy(const ts_topo *t);

void ts_topo_free(ts_topo *t);

/**
 * Device memory per chip the runtime holds outside the training's tensors: the CUDA context and
 * the communication library's buffers. The topology's [chip] memory_reserve_GiB, or by default
 * 1 GiB (docs/topologies.md gives the measurements behind it). The allocator's fragmentation is
 * ts_chip_allocator_overhead, part of the memory per chip.
 */
double ts_chip_memory_reserve(const ts_chip *c);

/**
 * The fraction of the allocated peak the memory allocator reserves on top: the topology's
 * [chip] allocator_overhead, or by default TS_GPU_ALLOCATOR_OVERHEAD on a GPU (PyTorch's CUDA
 * caching allocator, docs/splits.md "Memory") and 0 on a TPU (XLA's static buffer plan).
 */
double ts_chip_allocator_overhead(const ts_chip *c);
#define TS_GPU_ALLOCATOR_OVERHEAD 0.15

/** Sets a dimension's size (what-if cuts); a pair_links mesh's port rate follows its rings.
 * FALSE (error "[dim.X] size N: ...") when a pair_links mesh would grow past its file's chips. */
gboolean ts_topo_dim_set_size(ts_dim *d, int size, GError **error);

/** Index of the dimension named name, or -1. */
int ts_topo_dim_index(const ts_topo *t, const char *name);

/** Coordinates of chip id (coords has ndims entries). */
void ts_topo_coords(const ts_topo *t, int chip, int *coords);

/** Coordinate of chip id along dimension d alone. */
int ts_topo_coord(const ts_topo *t, int chip, int d);

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

/** Roofline time of a compute op on the topology's chip. */
double ts_compute_time(const ts_topo *t, double flops, double mem_bytes);

/** Reads the capacity keys of a topology file into t->cap (ts_topo_from_keyfile calls it). */
gboolean ts_capacity_read(GKeyFile *kf, const char *path, ts_topo *t, GError **error);

G_END_DECLS

#endif
