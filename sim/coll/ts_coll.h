/* ts_coll: collective algorithms as decompositions into steps of point-to-point transfers.
 *
 * One decomposition, three uses: the analytic backend turns a decomposition's phases into
 * closed-form time, the simgrid backend sends its transfers as flows, and the numeric
 * validator runs its transfers on real buffers. A wrong algorithm therefore cannot hide. */
#ifndef TS_COLL_H
#define TS_COLL_H

#include "ts_topo.h"
#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  TS_COLL_ALLREDUCE,     /* bytes = buffer per member */
  TS_COLL_REDUCESCATTER, /* bytes = whole input per member; each member ends with bytes/n */
  TS_COLL_ALLGATHER,     /* bytes = whole output per member; each member starts with bytes/n */
  TS_COLL_ALLTOALL,      /* bytes = send buffer per member, bytes/n to each member */
  TS_COLL_BROADCAST,     /* bytes = buffer; member 0 is the root */
  TS_COLL_NKINDS
} ts_coll_kind;

typedef enum {
  TS_ALGO_AUTO,       /* the fastest valid algorithm by analytic time */
  TS_ALGO_RING,       /* one ring through all members (snake order over several dims) */
  TS_ALGO_BIDIR_RING, /* two counter-rotating rings, half the data each */
  TS_ALGO_TORUS, /* all-reduce over several dimensions: the buffer in D chunks (D pieces of >= 2
                    members), chunk k reduce-scatters along dims k, k+1, ... (rotated) and
                    all-gathers back, all chunks at once, so every dimension's links are busy;
                    bidirectional rings on ring/mesh dims. Other kinds, and one dimension: as
                    torus-dimwise */
  TS_ALGO_HIERARCHICAL, /* per dimension as TORUS, with a one-way ring in every phase (NCCL-style
                           for switch hierarchies) */
  TS_ALGO_TREE,         /* binary tree reduce then broadcast, log2 steps of whole buffers */
  TS_ALGO_HALVING_DOUBLING, /* recursive halving reduce-scatter + recursive doubling all-gather;
                               power-of-two groups */
  TS_ALGO_DIRECT,           /* every member exchanges with every other member in one step */
  TS_ALGO_NCCL_RING, /* NCCL's rings: one ring per channel (per local chip, so one per NIC on a
                        rail-optimised cluster), each through every member, 1/channels of the
                        data each; intra- and inter-node hops of a step run together */
  TS_ALGO_NCCL_TREE, /* NCCL's tree all-reduce: per channel a double binary tree across nodes and
                        a chain inside each node, reduce and broadcast pipelined together */
  TS_ALGO_NVLS,      /* NVLink SHARP: the switch reduces (reduce-scatter) and multicasts
                        (all-gather), both pipelined; dims with in_switch_reduction = true */
  TS_ALGO_NCCL, /* a choice, like auto: the algorithm and protocol NCCL's tuning model would pick
                   (lowest time among nccl-ring, nccl-tree, nvls and LL, LL128, Simple); all-to-all
                   is direct (NCCL's send/recv to every peer), broadcast ring */
  TS_ALGO_TORUS_DIMWISE, /* per dimension: reduce-scatter along X on the whole buffer, then Y, ...,
                            all-gather back, one dimension's links busy at a time (the torus
                            algorithm before 2026-12); bidirectional rings on ring/mesh dims */
  TS_ALGO_NALGOS
} ts_coll_algo;

/** NCCL's protocols (src/device/prims_*.h): LL (8-byte flag+data stores, low latency, half the
 * bandwidth), LL128 (128-byte lines with 8 bytes of flags), Simple (plain copies with
 * fences). Only the NCCL algorithms use them; the other algorithms are plain alpha-beta. */
typedef enum {
  TS_PROTO_AUTO, /* the fastest, as NCCL picks */
  TS_PROTO_LL,
  TS_PROTO_LL128,
  TS_PROTO_SIMPLE,
  TS_PROTO_NONE, /* not an NCCL algorithm: no protocol costs */
  TS_PROTO_NPROTOS
} ts_coll_proto;

/**
 * A group's shape on the array: pieces, fastest first. Piece k covers `size` members spaced
 * `stride` coordinates apart along topology dimension `dim`. A group is this shape placed at
 * a base chip (its member 0); every group of an axis has the same shape.
 */
typedef struct {
  int dim;
  int size;
  int stride;
} ts_piece;

#define TS_MAX_PIECES (2 * TS_MAX_DIMS)

typedef struct {
  int npieces;
  ts_piece p[TS_MAX_PIECES];
} ts_group_shape;

/** Members in the group (product of piece sizes; 1 for no pieces). */
int ts_group_size(const ts_group_shape *g);

/** Chip of member m of the group whose member 0 is base_chip. */
int ts_group_member_chip(const ts_topo *t, const ts_group_shape *g, int base_chip, int m);

/** Member 0 of the group of this shape that contains chip; *member gets chip's index. */
int ts_group_base_chip(const ts_topo *t, const ts_group_shape *g, int chip, int *member);

/** A shape covering whole dimensions (dims listed fastest first). */
void ts_group_shape_dims(const ts_topo *t, const int *dims, int ndims, ts_group_shape *out);

/** Checks the shape fits the topology (dims exist, size*stride <= dim size, no overlap). */
gboolean ts_group_shape_valid(const ts_topo *t, const ts_group_shape *g, GError **error);

/* The same on an array's geometry alone (ts_topo_array, ts_trace_array): the ts_group_*
 * functions above are these on the topology's array. */
int ts_array_member_chip(const ts_array *a, const ts_group_shape *g, int base_chip, int m);
int ts_array_base_chip(const ts_array *a, const ts_group_shape *g, int chip, int *member);
gboolean ts_array_shape_valid(const ts_array *a, const ts_group_shape *g, GError **error);

/** One point-to-point transfer of a step, between member indices, offsets in elements. */
typedef enum { TS_XFER_COPY, TS_XFER_REDUCE } ts_xfer_op;
typedef struct {
  int src, dst;
  gint64 src_off, dst_off, count;
  ts_xfer_op op; /* REDUCE: dst[dst_off..] += src[src_off..]; COPY: dst[...] = src[...] */
} ts_xfer;

/** A collective decomposed for one group shape and size. Opaque. */
typedef struct ts_coll_plan ts_coll_plan;

/**
 * Decomposes a collective of `count` elements of `elem_bytes` each (per-member buffer as in
 * ts_coll_kind) over a group shape. TS_ALGO_AUTO is not accepted here. Returns NULL with
 * TS_ERROR_INVALID when the algorithm does not apply (e.g. halving-doubling on 6 members).
 * Buffers hold `count` elements for every kind (all-gather: the whole output; member m's
 * input shard sits at its own offset, see ts_coll_shard).
 */
ts_coll_plan *ts_coll_decompose(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                                const ts_group_shape *g, gint64 count, double elem_bytes,
                                GError **error);

void ts_coll_plan_free(ts_coll_plan *p);

/** Analytic (alpha-beta, contention-free) time of the decomposition, seconds. */
double ts_coll_plan_time(const ts_coll_plan *p);

/** Members of the group the plan was decomposed for. */
int ts_coll_plan_nmembers(const ts_coll_plan *p);

/** Number of sequential steps; transfers within a step run concurrently. */
int ts_coll_plan_nsteps(const ts_coll_plan *p);

/** Appends step s's transfers (ts_xfer) to out. */
void ts_coll_plan_step(const ts_coll_plan *p, int s, GArray *out);

/** Bytes member m sends over the whole collective (for checks against the trace). */
double ts_coll_plan_bytes_sent(const ts_coll_plan *p, int m);

/** The [offset, offset+count) shard member m owns after reduce-scatter / before all-gather. */
void ts_coll_shard(const ts_coll_plan *p, int m, gint64 *offset, gint64 *count);

/**
 * Analytic time of a collective of `bytes` over a group, seconds. With TS_ALGO_AUTO: on a
 * group whose pieces all lie on switch dimensions, what NCCL picks (TS_ALGO_NCCL); otherwise
 * every classic algorithm (ring .. direct, torus-dimwise) valid for the group, the fastest, in
 * *chosen (may be NULL); ring and bidir-ring are left out for an all-reduce over two or more
 * ring/mesh axes (TPU runtimes go axis by axis there). NCCL algorithms use their fastest protocol.
 * Returns a negative value with an error when no requested algorithm applies.
 */
double ts_coll_time(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo, const ts_group_shape *g,
                    double bytes, ts_coll_algo *chosen, GError **error);

/**
 * ts_coll_time with a protocol: proto TS_PROTO_AUTO picks the fastest for NCCL algorithms.
 * *chosen_proto (may be NULL) gets the protocol used (TS_PROTO_NONE for non-NCCL algorithms).
 */
double ts_coll_time_ex(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo, ts_coll_proto proto,
                       const ts_group_shape *g, double bytes, ts_coll_algo *chosen,
                       ts_coll_proto *chosen_proto, GError **error);

/**
 * The time a member's chip spends, not computing, on the transfers a collective of this kind
 * makes over dimensions with [dim.X] transfer_stall_us (a TPU's data-centre network), seconds:
 * that value times the transfers a member sends and receives over each such piece of n
 * members, n - 1 for a reduce-scatter, all-gather, all-to-all or broadcast (one shard to or
 * from each other member, as a ring or directly) and 2 (n - 1) for an all-reduce (the two).
 * The collective's own time (ts_coll_time) does not include it; 0 when no dimension has one.
 */
double ts_coll_chip_stall_s(const ts_topo *t, ts_coll_kind kind, const ts_group_shape *g);

/** Whether algo is a choice (auto, nccl) rather than one algorithm. */
gboolean ts_coll_algo_is_choice(ts_coll_algo a);

/** Whether an NCCL algorithm (nccl-ring, nccl-tree, nvls): protocols apply. */
gboolean ts_coll_algo_is_nccl(ts_coll_algo a);

/** The protocol a decomposed plan was timed with (TS_PROTO_NONE for non-NCCL algorithms). */
ts_coll_proto ts_coll_plan_proto(const ts_coll_plan *p);

/** The protocol's costs in a plan's time: the fraction of link bandwidth it reaches (the same
 * on every dimension the plan uses; 1 without a protocol) and its fixed latency, seconds. */
void ts_coll_plan_proto_costs(const ts_coll_plan *p, double *bw_frac, double *base_lat_s);

const char *ts_coll_proto_name(ts_coll_proto p);
/** Parses "auto", "LL", "LL128", "Simple" (any case); -1 if unknown. */
int ts_coll_proto_parse(const char *s);

/** Analytic time of one point-to-point transfer between chips (dimension-order route). */
double ts_p2p_time(const ts_topo *t, int src_chip, int dst_chip, double bytes);

/**
 * Links of the dimension-order route from src to dst, appended to out as ts_link_id; a link
 * is (chip, dim, direction): the link leaving `chip` along `dim` towards +1 or -1, or for a
 * switch dimension the chip's up port (dir +1) or down port (dir -1).
 */
typedef struct {
  int chip, dim, dir;
} ts_link_id;
void ts_route(const ts_topo *t, int src_chip, int dst_chip, GArray *out);

/** Bus bandwidth factor (nccl-tests): allreduce 2(n-1)/n, rs/ag/a2a (n-1)/n, bcast 1. */
double ts_coll_busbw_factor(ts_coll_kind kind, int n);

const char *ts_coll_kind_name(ts_coll_kind k);
const char *ts_coll_algo_name(ts_coll_algo a);
/** Parses "allreduce", "reducescatter", "allgather", "alltoall", "broadcast"; -1 if unknown. */
int ts_coll_kind_parse(const char *s);
/** Parses "auto", "ring", "bidir-ring", "torus", "hierarchical", "tree", "halving-doubling",
 * "direct", "nccl-ring", "nccl-tree", "nvls", "nccl", "torus-dimwise"; -1 if unknown. */
int ts_coll_algo_parse(const char *s);
/** Every algorithm name, "auto, ring, ... or direct", for help texts and errors. Static. */
const char *ts_coll_algo_list(void);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_coll_plan, ts_coll_plan_free)

G_END_DECLS

#endif
