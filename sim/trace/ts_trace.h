/* ts_trace: the one intermediate form. Per-rank programs of operations (compute, collective,
 * send/recv, wait) with dependencies; ranks that behave identically share one program. */
#ifndef TS_TRACE_H
#define TS_TRACE_H

#include "ts_coll.h"
#include "ts_cost.h"
#include "ts_topo.h"
#include <glib.h>
#include <string.h>

G_BEGIN_DECLS

/* Format 2 (docs/formats.md#traces) adds off-chip transfers, fixed durations, op tags,
 * member-list groups and point-to-point by rank; format 1 files are still read. */
#define TS_TRACE_FORMAT_VERSION 2
#define TS_MAX_AXES 8

/* Readers refuse files larger than this (a trace of 10 million ops is ~1 GB of text). */
#define TS_TRACE_MAX_FILE_BYTES ((gint64)4 << 30)

typedef enum {
  TS_OP_COMPUTE, /* flops and device memory bytes on the rank's chip */
  TS_OP_COLL,    /* collective over a group of ranks */
  TS_OP_SEND,    /* point-to-point to the rank `offset` steps along an axis */
  TS_OP_RECV,    /* matching receive */
  TS_OP_WAIT,    /* zero cost; completes when its dependencies have */
  TS_OP_XFER,    /* format 2: bytes over an off-chip resource (host link, NVMe, storage, server) */
  TS_OP_DELAY,   /* format 2: a fixed duration (measured, or computed off the chip) */
  TS_OP_NKINDS
} ts_op_kind;

/** The off-chip resource an XFER moves bytes over (or a DELAY occupies). */
typedef enum {
  TS_RES_NONE,
  TS_RES_HOST_LINK, /* chip <-> host memory: [host] host_link_GBps */
  TS_RES_NVME,      /* host NVMe: [host] nvme_GBps */
  TS_RES_STORAGE,   /* remote storage: the op's bw_Bps (no topology key) */
  TS_RES_SERVER,    /* parameter server port: the op's bw_Bps, else the slowest network dim */
  TS_RES_HOST_CPU,  /* host CPU (DELAY only: the optimizer on the host) */
  TS_NRES
} ts_resource;

/** Phase of the step an op belongs to (op tag; TS_PHASE_NONE when untagged). */
typedef enum {
  TS_PHASE_NONE,
  TS_PHASE_FWD,
  TS_PHASE_BWD,
  TS_PHASE_RECOMPUTE,
  TS_PHASE_SYNC, /* gradient synchronisation */
  TS_PHASE_OPTIMIZER,
  TS_NPHASES
} ts_phase;

/** What an op does (op tag; TS_ROLE_NONE when untagged). */
typedef enum {
  TS_ROLE_NONE,
  TS_ROLE_COMPUTE,        /* a layer's kernels */
  TS_ROLE_TP,             /* tensor / sequence parallel activation collective */
  TS_ROLE_EP,             /* expert-parallel all-to-all */
  TS_ROLE_GRAD,           /* gradient synchronisation (collective or server push) */
  TS_ROLE_PARAM_GATHER,   /* ZeRO parameter all-gather, server pull */
  TS_ROLE_PP,             /* pipeline send / receive / stage gather */
  TS_ROLE_OFFLOAD,        /* host link and NVMe traffic of offloading */
  TS_ROLE_OPTIMIZER,      /* the optimizer step */
  TS_ROLE_MARKER,         /* zero-cost synchronisation */
  TS_ROLE_INPUT_GRAD,     /* a layer's input-gradient kernels (backward split in two) */
  TS_ROLE_WEIGHT_GRAD,    /* its weight-gradient kernels */
  TS_ROLE_ATTN_RECOMPUTE, /* attention probabilities recomputed (selective recomputation) */
  TS_ROLE_REGATHER,       /* a layer's input gathered again for its weight gradient */
  TS_ROLE_PS_UPDATE,      /* a parameter server's update */
  TS_ROLE_TIED_GRAD,      /* tied-embedding gradient exchange between pipeline stages */
  TS_ROLE_EXPERT_PARAMS,  /* expert parameters gathered after the optimizer (ZeRO) */
  TS_ROLE_OP_RECOMPUTE,   /* recompute=op: unsaved products and element-wise ops re-run */
  TS_ROLE_CP_KV,          /* context parallelism: a K/V block sent / received round the ring */
  TS_ROLE_CP_DKV,         /* ... a K/V block's partial gradient sent / received (backward) */
  TS_ROLE_CP_ATTN,        /* ... attention of the local queries against one ring block */
  TS_ROLE_LAYOUT_COPY,    /* a tensor re-laid around a collective (PyTorch sp's sequence-dim cat) */
  TS_ROLE_CONTENTION,     /* compute time a collective's SMs take from the compute it overlaps */
  TS_NROLES
} ts_role;

/** What an operation is for: the breakdown in reports and the timeline's colours. */
typedef enum {
  TS_CAT_FWD,
  TS_CAT_BWD,
  TS_CAT_OPTIMIZER,
  TS_CAT_COMM_DP, /* gradient synchronisation (data parallel, sharding) */
  TS_CAT_COMM_TP, /* activation collectives of tensor / model parallelism */
  TS_CAT_COMM_PP, /* pipeline activations and gradients */
  TS_CAT_COMM_OTHER,
  TS_CAT_OTHER,
  TS_NCATS
} ts_op_cat;

/**
 * A parallel axis: `size` ranks whose groups have shape `shape` on the array. Symmetric axes
 * (data, tensor) have every member running the same program; asymmetric ones (pipeline)
 * give members different programs.
 */
typedef struct {
  char *name;
  int size;
  gboolean symmetric;
  ts_group_shape shape;
} ts_axis;

/** A communication group: one or more axes combined (e.g. "dp" or "dp+tp"). */
typedef struct {
  char *name;
  int naxes;
  int axes[TS_MAX_AXES];
  ts_group_shape shape; /* the combined shape, pieces of the axes in order */
  /* Format 2: an explicit member list (one group instance; member m is rank members[m]).
   * When the list is a regular shape, `shape` holds it too (npieces > 0) and backends use
   * the shape's algorithms; otherwise npieces = 0 and collectives run as rings over the list. */
  int nmembers;
  int *members; /* owned; NULL for axis groups */
} ts_group;

/* One operation of a program. Fields are ordered and the small enumerations stored as bytes so
 * that an op takes 112 bytes (224 with the shape inline and enum-sized fields): a 10-million-op
 * trace is held in memory (issue 11, bench/RESULTS.md "Streaming"). The byte fields hold the
 * enumeration named beside them; assign and compare them as before. */
typedef struct {
  guint8 kind;      /* ts_op_kind */
  guint8 cat;       /* ts_op_cat */
  guint8 coll;      /* COLL: ts_coll_kind */
  guint8 algo;      /* COLL: ts_coll_algo */
  guint8 resource;  /* format 2, XFER/DELAY: ts_resource */
  guint8 t_phase;   /* tag: ts_phase */
  guint8 t_role;    /* tag: ts_role */
  int stream;       /* ops of one stream run in program order; streams overlap */
  int label;        /* index in ts_trace.labels */
  double flops;     /* COMPUTE */
  double mem_bytes; /* COMPUTE: device memory traffic */
  double bytes;     /* COLL (per member, as ts_coll_kind defines), SEND/RECV */
  int group;        /* COLL: index in ts_trace.groups */
  int axis;         /* SEND/RECV: axis along which the peer lies */
  int offset;       /* SEND/RECV: peer = this rank moved `offset` along the axis (no wrap) */
  int tag;          /* SEND/RECV: matched with the same tag, in order */
  int ndeps;
  /* Format 2. Zero-initialised ops mean "absent", so older code that builds ops is valid. */
  int peer;  /* SEND/RECV: absolute peer rank + 1; 0 = use axis and offset */
  int *deps; /* indices of earlier ops of the same program; in the program's pool (owned by it) */
  double seconds; /* DELAY: duration; XFER: fixed latency added to bytes / bandwidth */
  double bw_Bps;  /* XFER: bandwidth; 0 = the topology's for the resource */
  /* Tag: what the op is, for the validator, timeline and imported traces' messages. */
  int t_layer;      /* layer index + 1 (first layer of a gradient bucket); 0 = none */
  int t_layer_last; /* last layer + 1 of a range (gradient bucket); 0 = t_layer alone */
  int t_micro;      /* micro-batch + 1; 0 = none */
  int t_stage;      /* pipeline (virtual) stage + 1 of a send, receive or stage gather; 0 = none */
  /* COMPUTE: kernel class, GEMM and attention shape; NULL (or class 0): roofline. Shapes are
   * interned in the trace, one copy per distinct shape (a model's layers repeat): an op holds a
   * pointer, not 96 bytes of it. ts_trace_append interns what the op it is given points to, so
   * a caller may point at its own (stack) copy. Borrowed from the trace; never free it. */
  const ts_op_shape *shape;
  /* COLL: index + 1 of the op's distinct collective in ts_trace.colls, set by
   * ts_trace_resolve_algos (0 = not resolved), so a backend costs each distinct collective
   * once and finds it by index. Not written to the text form. */
  int coll_id;
} ts_op;

/** A distinct collective of a trace: every COLL op with these four fields shares one cost. */
typedef struct {
  int group;
  ts_coll_kind coll;
  ts_coll_algo algo;
  double bytes;
} ts_coll_desc;

/* How a program stores its ops (issue 11: a 10-million-op trace replays in <= 1 GB; a ts_op is
 * 120 bytes, this is 40). Read ops through ts_program_op / ts_program_deps and the inline
 * accessors below, never these fields: they are internal to ts_trace. The kind-specific fields
 * share u, d0 and d1 (COMPUTE: shape, flops, mem_bytes; COLL: group, coll_id, bytes; SEND/RECV:
 * axis, offset, bytes; XFER/DELAY: bytes, seconds); the tag fields, a send's tag and peer and an
 * XFER's bw_Bps live in a side record (ts_op_ext) only when one is non-zero; an op whose fields
 * fit neither (e.g. flops on a collective) is kept whole in a second side table, so storage is
 * lossless for any op. */
typedef struct {
  guint8 kind, cat, coll, algo, resource, t_phase, t_role;
  guint8 flags; /* TS_PK_* */
  int stream, label;
  union {
    const ts_op_shape *shape; /* COMPUTE */
    struct {
      int i0, i1; /* COLL: group, coll_id; SEND/RECV: axis, offset */
    } g;
  } u;
  double d0, d1;
} ts_op_packed;

/** The op's rarely set fields (present when one is non-zero). */
typedef struct {
  int t_layer, t_layer_last, t_micro, t_stage, tag, peer;
  double bw_Bps;
} ts_op_ext;

#define TS_PK_EXT 1u      /* ext_of[i] - 1 indexes ext */
#define TS_PK_WIDE 2u     /* ext_of[i] - 1 indexes wide (the whole op) */
#define TS_PK_NODEPS 4u   /* dependencies dropped (ts_program_drop_deps) */
#define TS_PK_GROUP_M1 8u /* group is -1 (else 0) where the kind does not store it */
#define TS_PK_AXIS_M1 16u /* axis is -1 (else 0) where the kind does not store it */

typedef struct {
  int nops;
  /* Internal to ts_trace (see ts_op_packed): */
  ts_op_packed *pk; /* nops ops */
  int cap;
  guint32 *ext_of;  /* per op: side record + 1, 0 = none; NULL while no op has one */
  GArray *ext;      /* ts_op_ext */
  GArray *wide;     /* ts_op: ops that do not pack */
  guint32 *dep_off; /* nops + 1 offsets into deps (dependencies in one CSR array) */
  int *deps;
  guint32 ndeps_total, deps_cap;
} ts_program;

/** Metadata recorded with every result: what produced the trace. */
typedef struct {
  char *model, *split, *topology, *producer;
  double samples;           /* samples per step over all ranks (global batch) */
  double model_flops;       /* useful model FLOPs per step over all ranks (for MFU) */
  double tokens_per_sample; /* the model's sequence length (for tokens/s); 0 without one */
} ts_trace_meta;

typedef struct {
  int nranks;
  int ndims;
  char *dim_names[TS_MAX_DIMS];
  int dim_sizes[TS_MAX_DIMS];
  int naxes;
  ts_axis axes[TS_MAX_AXES];
  GPtrArray *groups;       /* ts_group*, owned */
  GPtrArray *labels;       /* char*, owned; op labels */
  GHashTable *label_index; /* label -> index+1, for interning */
  GHashTable *shapes;      /* interned compute shapes (ts_op_shape*, owned; NULL until one) */
  /* Recently interned shapes by address (issue 15): a pointer found here is one of `shapes`,
   * returned without hashing its twelve fields (planners pass the trace's own pointer back). */
  const ts_op_shape *shape_recent[64];
  int nprograms;
  ts_program *programs; /* owned */
  ts_trace_meta meta;
  GArray *colls; /* ts_coll_desc: the distinct collectives (ts_op.coll_id - 1); owned, NULL
                    until ts_trace_resolve_algos */
} ts_trace;

/** A new trace over the topology's array (dimension names and sizes recorded). */
ts_trace *ts_trace_new(const ts_topo *t);
void ts_trace_free(ts_trace *tr);

/** Adds an axis; returns its index. */
int ts_trace_add_axis(ts_trace *tr, const char *name, int size, gboolean symmetric,
                      const ts_group_shape *shape);

/** Returns the index of the group made of these axes, adding it when new. */
int ts_trace_group(ts_trace *tr, const int *axes, int naxes);

/**
 * Adds a group of explicit members (format 2); returns its index, or -1 with an error when a
 * member is out of range or repeated. The shape is inferred when the list is regular.
 */
int ts_trace_group_members(ts_trace *tr, const char *name, const int *members, int n,
                           GError **error);

/** Members of a group instance. */
int ts_trace_group_size(const ts_group *g);

/** Chip of member m of the group instance whose member 0 is base (member lists: base ignored). */
int ts_trace_group_chip(const ts_topo *t, const ts_group *g, int base, int m);

/** Rank of member m of the group instance whose member 0 is base, on the trace's own array
 * (ranks are chips: no topology needed). */
int ts_trace_group_rank(const ts_trace *tr, const ts_group *g, int base, int m);

/** The trace's array (dimension names and sizes as recorded; a view, valid while tr is). */
ts_array ts_trace_array(const ts_trace *tr);

/** Member 0 of the instance holding rank; *member its index; -1 when rank is not a member. */
int ts_trace_group_base(const ts_trace *tr, const ts_group *g, int rank, int *member);

/** Peer rank of a SEND/RECV op run by rank, or -1 when it leaves the axis or the array. */
int ts_trace_op_peer(const ts_trace *tr, const ts_op *op, int rank);

/**
 * Replaces algo=auto by the algorithm the analytic model finds fastest for each collective
 * (the one place `auto` is resolved; backends then replay what the trace says), and numbers
 * the distinct collectives (ts_op.coll_id, ts_trace.colls).
 */
gboolean ts_trace_resolve_algos(ts_trace *tr, const ts_topo *t, GError **error);

/** Interns a label; returns its index. */
int ts_trace_label(ts_trace *tr, const char *label);

/** Sets the number of programs (product of the sizes of asymmetric axes), allocating them. */
void ts_trace_set_programs(ts_trace *tr, int nprograms);

/** The trace's copy of a compute shape (interned: equal shapes share one); NULL for NULL or a
 * shape of class 0 (roofline). */
const ts_op_shape *ts_trace_intern_shape(ts_trace *tr, const ts_op_shape *s);

/** Appends an op (deps copied into the program's pool, its shape interned) to program p;
 * returns its index. */
int ts_trace_append(ts_trace *tr, int p, const ts_op *op, const int *deps, int ndeps);

/** Room in program p for at least nops ops, ndeps dependencies and next ops with a side record
 * in all, so that appending up to those counts moves no memory (issue 15: the geometric growth
 * of a program's arrays was 3-5% of the every-split sweep in realloc and memmove). Capacity
 * only: what the program holds, and every read of it, are unchanged. */
void ts_program_reserve(ts_trace *tr, int p, int nops, guint32 ndeps, guint next);

/** Coordinate of rank along axis a. */
int ts_trace_axis_coord(const ts_trace *tr, int rank, int a);

/** Rank moved by `offset` along axis a, or -1 when that leaves the axis. */
int ts_trace_axis_neighbor(const ts_trace *tr, int rank, int a, int offset);

/** Program index of a rank (mixed radix over the asymmetric axes' coordinates). */
int ts_trace_program_of(const ts_trace *tr, int rank);

/** Checks the trace is consistent with a topology (ranks, dims) and internally (deps, groups). */
gboolean ts_trace_check(const ts_trace *tr, const ts_topo *t, GError **error);

/**
 * ts_trace_check of a trace that passed it on this topology and was re-placed since
 * (ts_plan_trace_replace: its axes' and groups' shapes and its collectives' algorithms, no op
 * otherwise): the array and the layout again, not every op (issue 15).
 */
gboolean ts_trace_check_placement(const ts_trace *tr, const ts_topo *t, GError **error);

/** Text form (documented in docs/formats.md). Caller frees. */
char *ts_trace_to_text(const ts_trace *tr);

/** Reads the text form; errors name the file and the line. */
ts_trace *ts_trace_from_text(const char *text, const char *path, GError **error);

/**
 * Reads the text form from bytes (not NUL-terminated; a NUL byte is an error): the entry point
 * for fuzzing harnesses. path is used in messages only.
 */
ts_trace *ts_trace_from_bytes(const guint8 *data, gsize len, const char *path, GError **error);

/**
 * Reads a whole input file, refusing what is not a regular file (a directory, FIFO, device)
 * and files over max_bytes, with one line naming the file. *len may be NULL.
 */
gboolean ts_read_input_file(const char *path, gint64 max_bytes, char **text, gsize *len,
                            GError **error);

/** Reads a trace file (ts_read_input_file, then the text form). */
ts_trace *ts_trace_load(const char *path, GError **error);

/** The topology's bandwidth of an off-chip resource (bytes/s; 0 when it has none). */
double ts_resource_bw_Bps(const ts_topo *t, int resource);

/**
 * Time of an off-chip op (format 2): DELAY its seconds; XFER latency + bytes / bandwidth (the
 * op's bw_Bps, else the topology's for the resource). Negative when no bandwidth is known.
 */
double ts_offchip_time(const ts_topo *t, const ts_op *op);

/** The numeric fields of a compute op's shape, by the names the text form gives them ("m",
 * "n", "k", "batch", "aq", ...): how many, the name of field i, and a pointer to it. Exporters
 * carry them so that a round trip keeps what ts_cost_compute reads. */
int ts_op_shape_nfields(void);
const char *ts_op_shape_field_name(int i);
double *ts_op_shape_field(ts_op_shape *sh, int i);

const char *ts_resource_name(int r);
const char *ts_phase_name(int p);
const char *ts_role_name(int r);

/**
 * The op's distinct collective, or NULL when the op is not a resolved collective or was
 * changed since it was resolved (its fields no longer match): then cost it from its fields.
 */
static inline const ts_coll_desc *ts_trace_coll_desc(const ts_trace *tr, const ts_op *op)
{
  if (op->coll_id <= 0 || tr->colls == NULL || (guint)op->coll_id > tr->colls->len)
    return NULL;
  const ts_coll_desc *d = &g_array_index(tr->colls, ts_coll_desc, op->coll_id - 1);
  return d->group == op->group && d->coll == op->coll && d->algo == op->algo &&
                 d->bytes == op->bytes
             ? d
             : NULL;
}

/** Dependencies of op i of program p (indices of earlier ops of p); *n gets their count.
 * Borrowed; valid until the program is changed or freed. */
static inline const int *ts_program_deps(const ts_program *p, int i, int *n)
{
  if (p->pk[i].flags & TS_PK_NODEPS) {
    *n = 0;
    return NULL;
  }
  *n = (int)(p->dep_off[i + 1] - p->dep_off[i]);
  return *n > 0 ? p->deps + p->dep_off[i] : NULL;
}

/**
 * Op i of program p (0 <= i < p->nops), expanded from the packed store into a whole ts_op (its
 * deps point into the program's dependency array, ndeps their count). A copy: changing it does
 * not change the trace (ts_program_set_op does). Changed with issue 11 (streaming): it returned
 * a pointer into a ts_op array, which no longer exists.
 * Inline, so that a caller reading a few fields pays for those (dead stores are dropped).
 */
static inline ts_op ts_program_op(const ts_program *p, int i)
{
  const ts_op_packed *k = &p->pk[i];
  ts_op o;
  if (k->flags & TS_PK_WIDE) {
    o = g_array_index(p->wide, ts_op, p->ext_of[i] - 1);
  } else {
    memset(&o, 0, sizeof o);
    o.kind = k->kind;
    o.cat = k->cat;
    o.coll = k->coll;
    o.algo = k->algo;
    o.resource = k->resource;
    o.t_phase = k->t_phase;
    o.t_role = k->t_role;
    o.stream = k->stream;
    o.label = k->label;
    o.group = k->flags & TS_PK_GROUP_M1 ? -1 : 0;
    o.axis = k->flags & TS_PK_AXIS_M1 ? -1 : 0;
    switch (k->kind) {
    case TS_OP_COMPUTE:
      o.shape = k->u.shape;
      o.flops = k->d0;
      o.mem_bytes = k->d1;
      break;
    case TS_OP_COLL:
      o.group = k->u.g.i0;
      o.coll_id = k->u.g.i1;
      o.bytes = k->d0;
      break;
    case TS_OP_SEND:
    case TS_OP_RECV:
      o.axis = k->u.g.i0;
      o.offset = k->u.g.i1;
      o.bytes = k->d0;
      break;
    case TS_OP_XFER:
    case TS_OP_DELAY:
      o.bytes = k->d0;
      o.seconds = k->d1;
      break;
    default:
      break;
    }
    if (k->flags & TS_PK_EXT) {
      const ts_op_ext *x = &g_array_index(p->ext, ts_op_ext, p->ext_of[i] - 1);
      o.t_layer = x->t_layer;
      o.t_layer_last = x->t_layer_last;
      o.t_micro = x->t_micro;
      o.t_stage = x->t_stage;
      o.tag = x->tag;
      o.peer = x->peer;
      o.bw_Bps = x->bw_Bps;
    }
  }
  o.deps = (int *)ts_program_deps(p, i, &o.ndeps);
  return o;
}

/* The fields the replay reads on its hot path, without expanding the op. */
static inline ts_op_kind ts_program_op_kind(const ts_program *p, int i)
{
  return (ts_op_kind)p->pk[i].kind;
}

static inline ts_op_cat ts_program_op_cat(const ts_program *p, int i)
{
  return (ts_op_cat)p->pk[i].cat;
}

static inline int ts_program_op_stream(const ts_program *p, int i)
{
  return p->pk[i].stream;
}

static inline int ts_program_op_label(const ts_program *p, int i)
{
  return p->pk[i].label;
}

/** A COLL op's group (-1 for another kind). */
static inline int ts_program_op_group(const ts_program *p, int i)
{
  const ts_op_packed *k = &p->pk[i];
  if (k->kind != TS_OP_COLL)
    return -1;
  if (k->flags & TS_PK_WIDE)
    return g_array_index(p->wide, ts_op, p->ext_of[i] - 1).group;
  return k->u.g.i0;
}

/** The op's `bytes` field (COLL, SEND, RECV, XFER, DELAY; 0 for the others) without expanding
 * it. */
static inline double ts_program_op_bytes(const ts_program *p, int i)
{
  const ts_op_packed *k = &p->pk[i];
  if (k->flags & TS_PK_WIDE)
    return g_array_index(p->wide, ts_op, p->ext_of[i] - 1).bytes;
  return k->kind == TS_OP_COMPUTE || k->kind == TS_OP_WAIT ? 0.0 : k->d0;
}

/** A SEND/RECV op's peer fields (ts_op.axis, offset, tag, peer) without expanding the op. */
static inline void ts_program_op_p2p(const ts_program *p, int i, int *axis, int *offset, int *tag,
                                     int *peer)
{
  const ts_op_packed *k = &p->pk[i];
  if (k->flags & TS_PK_WIDE) {
    const ts_op *w = &g_array_index(p->wide, ts_op, p->ext_of[i] - 1);
    *axis = w->axis;
    *offset = w->offset;
    *tag = w->tag;
    *peer = w->peer;
    return;
  }
  if (k->kind == TS_OP_SEND || k->kind == TS_OP_RECV) {
    *axis = k->u.g.i0;
    *offset = k->u.g.i1;
  } else {
    *axis = k->flags & TS_PK_AXIS_M1 ? -1 : 0;
    *offset = 0;
  }
  if (k->flags & TS_PK_EXT) {
    const ts_op_ext *x = &g_array_index(p->ext, ts_op_ext, p->ext_of[i] - 1);
    *tag = x->tag;
    *peer = x->peer;
  } else {
    *tag = *peer = 0;
  }
}

/** A COLL op's collective kind and bytes (what members of one collective must agree on). */
static inline void ts_program_op_coll(const ts_program *p, int i, ts_coll_kind *kind, double *bytes)
{
  const ts_op_packed *k = &p->pk[i];
  if (k->flags & TS_PK_WIDE) {
    const ts_op *w = &g_array_index(p->wide, ts_op, p->ext_of[i] - 1);
    *kind = (ts_coll_kind)w->coll;
    *bytes = w->bytes;
    return;
  }
  *kind = (ts_coll_kind)k->coll;
  *bytes = k->kind == TS_OP_COLL ? k->d0 : 0.0;
}

/** Replaces op i of program p by op (its dependencies kept; op's deps and ndeps ignored; its
 * shape interned). */
void ts_program_set_op(ts_trace *tr, int p, int i, const ts_op *op);

/** Writes collective op i's algorithm and distinct-collective id (ts_op.algo, coll_id) in
 * place, without repacking the op (resolving algorithms, re-placing a trace). */
void ts_program_set_resolved(ts_program *p, int i, int algo, int coll_id);

/** Drops op i's dependencies (the validator's "drop a dependency" fault). */
void ts_program_drop_deps(ts_program *p, int i);

/** Bytes the program's ops and dependencies take in memory (bench, tests). */
gsize ts_program_bytes(const ts_program *p);

/** Total ops over all programs. */
gint64 ts_trace_nops(const ts_trace *tr);

const char *ts_op_kind_name(ts_op_kind k);
const char *ts_op_cat_name(ts_op_cat c);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_trace, ts_trace_free)

G_END_DECLS

#endif
