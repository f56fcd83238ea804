/* ts_validate: split equivalence. Executes the trace the planner makes for a split on real
 * numeric kernels (every chip holds only its shard, computes only its part, and exchanges real
 * buffers through the collective decompositions the backends time), then compares parameters
 * after the training step(s) with the single-processor reference network (ts_nnet), and the
 * bytes each chip sent with the bytes the trace says it sends. docs/validation.md, "Split
 * equivalence". */
#ifndef TS_VALIDATE_H
#define TS_VALIDATE_H

#include "ts_coll.h"
#include "ts_model.h"
#include "ts_numeric.h"
#include "ts_plan.h"
#include "ts_topo.h"
#include <glib.h>

G_BEGIN_DECLS

typedef enum { TS_VALIDATE_SGD, TS_VALIDATE_ADAM } ts_validate_optimizer;

/** Options of one validation run (defaults from ts_validate_options_default). */
typedef struct {
  ts_prec prec;
  int steps;           /* training steps, >= 1 */
  gint64 global_batch; /* samples per step; 0 = 8 */
  gint64 micro_batch;  /* samples per micro-batch per replica; 0 = the whole replica batch */
  double bucket_bytes; /* data-parallel gradient bucket; small, so that a step has several */
  ts_coll_algo algo;   /* recorded on every collective of the trace; AUTO as the backends pick */
  ts_validate_optimizer optimizer;
  double lr, momentum, weight_decay; /* SGD (momentum as torch.optim.SGD); Adam uses lr */
  guint64 seed;                      /* parameters and data of the reference network */
  double tolerance;                  /* 0: 1e-5 in fp32, 1e-12 in fp64 */
  /* Negative tests: ops whose label is listed become zero-cost waits (a collective skipped),
   * or lose their explicit dependencies. NULL-terminated; borrowed; may be NULL. */
  const char *const *drop_ops;
  const char *const *drop_deps;
} ts_validate_options;

void ts_validate_options_default(ts_validate_options *o);

/** One parameter tensor after the run. */
typedef struct {
  char *name;     /* "fc1.w", "attention.wqkv", ... (layer name, then the tensor) */
  gint64 numel;   /* elements of the whole tensor */
  int copies;     /* whole copies compared: data-parallel replicas x tp members replicating it */
  double rel_err; /* largest over copies of ||w - w_ref|| / ||w_ref|| (Frobenius norms) */
} ts_validate_tensor;

/** Bytes one chip sent over the step(s), at the model's element size. */
typedef struct {
  double trace_bytes; /* what the trace's collectives send from this chip (their decomposition) */
  double sent_bytes;  /* what the executed collectives actually sent from it */
} ts_validate_rank;

typedef struct {
  char *model, *split, *placement, *topology;
  char *algorithms; /* the collective algorithms executed, e.g. "ring, torus" */
  ts_prec prec;
  int steps;
  int ntensors;
  ts_validate_tensor *tensors; /* owned */
  double max_rel_err, tolerance;
  double loss, loss_ref; /* loss of the first step: split execution and reference */
  int nranks;
  ts_validate_rank *ranks;               /* owned, nranks entries */
  gint64 ops_compute, ops_coll, ops_p2p; /* executed, all steps */
  gboolean executed;                     /* the trace ran to its end (else failure says why) */
  gboolean numeric_ok;                   /* max_rel_err <= tolerance and the losses agree */
  gboolean bytes_ok;                     /* every chip sent what the trace says */
  gboolean passed;                       /* all three */
  char *failure;                         /* why execution stopped, or NULL */
  GPtrArray *notes; /* char*: findings about the trace (partial sums read, byte mismatches) */
} ts_validate_result;

void ts_validate_result_free(ts_validate_result *r);

/**
 * Plans the split, makes its trace and executes it numerically. Returns NULL with an error
 * (TS_ERROR, exit status 2) when the inputs cannot be validated: the model is not one of the
 * validation networks (docs/validation.md), the split does not fit, the algorithm does not
 * apply to a collective of the trace, a dropped label names no op. A trace that executes
 * wrongly is not an error: the result says what failed (passed = FALSE).
 */
ts_validate_result *ts_validate_run(const ts_model *m, const ts_topo *t, const ts_split *s,
                                    const ts_validate_options *o, GError **error);

/**
 * A small in-memory topology: "torus:4x2", "mesh:2x2", "ring:8" (one dimension) or
 * "switch:2x4" (2 GPUs per node on a switch x 4 nodes on a slower switch). The path names it
 * in messages. Caller frees. NULL with an error on a bad spec.
 */
ts_topo *ts_validate_topology(const char *spec, GError **error);

/** The default topology for a split of `nchips` chips: a torus as square as the count allows
 *  (8 -> torus:4x2, 4 -> torus:2x2, 2 -> ring:2, 1 -> one chip). Caller frees; NULL with an
 *  error past the validator's limits (256 chips, 64 per dimension). */
ts_topo *ts_validate_default_topology(int nchips, GError **error);

/** Text report of one result: a summary, the per-tensor table when per_tensor, per-chip
 *  bytes and the notes. Caller frees. */
char *ts_validate_result_text(const ts_validate_result *r, gboolean per_tensor);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_validate_result, ts_validate_result_free)

G_END_DECLS

#endif
