/* ts_plan: a split (parallel axes and their placement on the array) applied to a model and
 * a topology: validity, per-chip memory, and the trace it produces. */
#ifndef TS_PLAN_H
#define TS_PLAN_H

#include "ts_model.h"
#include "ts_topo.h"
#include "ts_trace.h"
#include <glib.h>

G_BEGIN_DECLS

typedef enum { TS_AX_TP, TS_AX_DP, TS_AX_PP, TS_AX_N } ts_axis_kind;

/** A parsed --split: degrees and requested placements; 0 degree = not given. */
typedef struct {
  int degree[TS_AX_N];
  int place_dims[TS_AX_N][TS_MAX_DIMS]; /* requested dims, in order */
  int nplace[TS_AX_N];                  /* 0 = let the planner place it */
  char *place_names[TS_AX_N];           /* dims as written, resolved against a topology later */
  char *text;                           /* as given */
} ts_split;

/** Parses "dp=32@y,tp=32@x", "tp=8@node,dp=16@net", "dp=1024". */
ts_split *ts_split_parse(const char *text, GError **error);
void ts_split_free(ts_split *s);

/**
 * Resolves degrees (an unstated dp takes the chips left) and places every axis on the array:
 * explicit placements first, then tensor and data parallelism on the fastest dimensions.
 */
gboolean ts_split_place(const ts_split *s, const ts_topo *t, int *degree, ts_group_shape *shape,
                        GError **error);

/** Planner options (defaults from ts_plan_options_default). */
typedef struct {
  gint64 global_batch; /* samples per step over all replicas */
  gint64 micro_batch;  /* samples per micro-batch per replica; 0 = global_batch / dp */
  double bucket_bytes; /* data-parallel gradient bucket (PyTorch DDP default 25 MiB) */
  ts_coll_algo algo;   /* collective algorithm for every collective (TS_ALGO_AUTO) */
} ts_plan_options;

void ts_plan_options_default(ts_plan_options *o);

/** Memory per chip, bytes. */
typedef struct {
  double params, grads, optimizer, activations, temp, total, capacity;
  gboolean fits;
} ts_memory;

typedef struct {
  const ts_model *model; /* borrowed */
  const ts_topo *topo;   /* borrowed */
  ts_plan_options opt;
  int degree[TS_AX_N];           /* resolved (1 when unused) */
  ts_group_shape shape[TS_AX_N]; /* placement of each axis on the array */
  char *split_text;              /* canonical, e.g. "tp=8,dp=8" */
  char *placement_text;          /* e.g. "tp@x,dp@y" */
  gint64 micro_batch, n_micro;   /* per replica */
  double params_per_chip;        /* parameters a chip holds */
  ts_memory mem;
  double model_flops_per_step; /* useful FLOPs per step, all chips (for MFU) */
} ts_plan;

/** Validates the split against model, topology and batch, and places it on the array. */
ts_plan *ts_plan_new(const ts_model *m, const ts_topo *t, const ts_split *s,
                     const ts_plan_options *o, GError **error);
void ts_plan_free(ts_plan *p);

/** The trace of one training step under the plan. Caller frees. */
ts_trace *ts_plan_trace(const ts_plan *p, GError **error);

const char *ts_axis_kind_name(ts_axis_kind a);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_split, ts_split_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_plan, ts_plan_free)

G_END_DECLS

#endif
