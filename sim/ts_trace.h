/* ts_trace: the one intermediate form. Per-rank programs of operations (compute, collective,
 * send/recv, wait) with dependencies; ranks that behave identically share one program. */
#ifndef TS_TRACE_H
#define TS_TRACE_H

#include "ts_coll.h"
#include "ts_cost.h"
#include "ts_topo.h"
#include <glib.h>

G_BEGIN_DECLS

#define TS_TRACE_FORMAT_VERSION 1
#define TS_MAX_AXES 8

typedef enum {
  TS_OP_COMPUTE, /* flops and device memory bytes on the rank's chip */
  TS_OP_COLL,    /* collective over a group of ranks */
  TS_OP_SEND,    /* point-to-point to the rank `offset` steps along an axis */
  TS_OP_RECV,    /* matching receive */
  TS_OP_WAIT,    /* zero cost; completes when its dependencies have */
} ts_op_kind;

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
} ts_group;

typedef struct {
  ts_op_kind kind;
  ts_op_cat cat;
  int stream;       /* ops of one stream run in program order; streams overlap */
  int label;        /* index in ts_trace.labels */
  double flops;     /* COMPUTE */
  double mem_bytes; /* COMPUTE: device memory traffic */
  double bytes;     /* COLL (per member, as ts_coll_kind defines), SEND/RECV */
  ts_coll_kind coll;
  ts_coll_algo algo;
  int group;  /* COLL: index in ts_trace.groups */
  int axis;   /* SEND/RECV: axis along which the peer lies */
  int offset; /* SEND/RECV: peer = this rank moved `offset` along the axis (no wrap) */
  int tag;    /* SEND/RECV: matched with the same tag, in order */
  int ndeps;
  int *deps;         /* indices of earlier ops of the same program; owned by the program */
  ts_op_shape shape; /* COMPUTE: kernel class, GEMM and attention shape (zero: roofline) */
} ts_op;

typedef struct {
  int nops;
  ts_op *ops; /* owned */
} ts_program;

/** Metadata recorded with every result: what produced the trace. */
typedef struct {
  char *model, *split, *topology, *producer;
  double samples;     /* samples per step over all ranks (global batch) */
  double model_flops; /* useful model FLOPs per step over all ranks (for MFU) */
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
  int nprograms;
  ts_program *programs; /* owned */
  ts_trace_meta meta;
} ts_trace;

/** A new trace over the topology's array (dimension names and sizes recorded). */
ts_trace *ts_trace_new(const ts_topo *t);
void ts_trace_free(ts_trace *tr);

/** Adds an axis; returns its index. */
int ts_trace_add_axis(ts_trace *tr, const char *name, int size, gboolean symmetric,
                      const ts_group_shape *shape);

/** Returns the index of the group made of these axes, adding it when new. */
int ts_trace_group(ts_trace *tr, const int *axes, int naxes);

/** Interns a label; returns its index. */
int ts_trace_label(ts_trace *tr, const char *label);

/** Sets the number of programs (product of the sizes of asymmetric axes), allocating them. */
void ts_trace_set_programs(ts_trace *tr, int nprograms);

/** Appends an op (deps copied) to program p; returns its index. */
int ts_trace_append(ts_trace *tr, int p, const ts_op *op, const int *deps, int ndeps);

/** Coordinate of rank along axis a. */
int ts_trace_axis_coord(const ts_trace *tr, int rank, int a);

/** Rank moved by `offset` along axis a, or -1 when that leaves the axis. */
int ts_trace_axis_neighbor(const ts_trace *tr, int rank, int a, int offset);

/** Program index of a rank (mixed radix over the asymmetric axes' coordinates). */
int ts_trace_program_of(const ts_trace *tr, int rank);

/** Checks the trace is consistent with a topology (ranks, dims) and internally (deps, groups). */
gboolean ts_trace_check(const ts_trace *tr, const ts_topo *t, GError **error);

/** Text form (documented in docs/formats.md). Caller frees. */
char *ts_trace_to_text(const ts_trace *tr);

/** Reads the text form; errors name the file and the line. */
ts_trace *ts_trace_from_text(const char *text, const char *path, GError **error);

/** Total ops over all programs. */
gint64 ts_trace_nops(const ts_trace *tr);

const char *ts_op_kind_name(ts_op_kind k);
const char *ts_op_cat_name(ts_op_cat c);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_trace, ts_trace_free)

G_END_DECLS

#endif
