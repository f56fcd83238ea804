/* ts_sweep: what-if sweeps. Loads inputs once, parses --vary specifications, enumerates
 * configurations (topologies x array shapes x hardware scalings x models x batches x splits,
 * or every valid split with --splits auto), and renders one CSV / JSON row per configuration
 * with the same fields as `trainsim run` plus the varied parameters. */
#ifndef TS_SWEEP_H
#define TS_SWEEP_H

#include "ts_pool.h"

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* ---- inputs loaded once ----------------------------------------------------------------- */

/** A cache of models and topologies by resolved path; owns what it loads. */
typedef struct ts_inputs ts_inputs;

ts_inputs *ts_inputs_new(void);
void ts_inputs_free(ts_inputs *c);

/**
 * Loads (once) a model or topology named by a path or a shipped name. rel_dir, when not NULL,
 * is tried first for relative paths (a scenario file's folder). Borrowed result.
 */
const ts_model *ts_inputs_model(ts_inputs *c, const char *name, const char *rel_dir,
                                GError **error);
const ts_topo *ts_inputs_topo(ts_inputs *c, const char *name, const char *rel_dir, GError **error);

/** Keeps a topology (a what-if copy) alive as long as the cache; returns it. */
const ts_topo *ts_inputs_adopt_topo(ts_inputs *c, ts_topo *t);

/** The inputs record of a configuration's results (caller clears). */
void ts_config_report_inputs(const ts_config *c, ts_report_inputs *in);

/* ---- hardware what-ifs ------------------------------------------------------------------- */

/**
 * One --vary option: KEY=V1,V2,... where each value is absolute ("100") or a factor of the
 * topology's own value ("x0.5"). Keys: peak_tflops, memory_GiB, memory_bandwidth_GBps,
 * compute_efficiency, link_bandwidth_GBps, latency_us (every dimension), dim.NAME.KEY for one
 * dimension (link_bandwidth_GBps, latency_us, size), and dims (array shapes "16x16,32x32").
 */
typedef struct {
  char *text;     /* the option as given */
  char *key;      /* as given, e.g. "link_bandwidth_GBps" or "dim.x.latency_us" */
  char *column;   /* output column: "link_bandwidth_GBps_scale" for factors, else key */
  gboolean scale; /* values are factors */
  int nvalues;
  double *values; /* factors or absolute values in the key's unit */
  char **shapes;  /* dims: "16x16" strings (nvalues of them), else NULL */
} ts_vary;

/** Parses one --vary string; one-line error naming the string and the expectation. */
ts_vary *ts_vary_parse(const char *text, GError **error);
void ts_vary_free(ts_vary *v);

/**
 * Applies value i of v to a copy of t (returned, caller frees); checks the key against this
 * topology (dimension names, shape dimensionality) and the result's range.
 */
ts_topo *ts_vary_apply(const ts_vary *v, int i, const ts_topo *t, GError **error);

/** "32x32" for a topology's array (caller frees). */
char *ts_topo_shape_text(const ts_topo *t);

/* ---- automatic split enumeration ---------------------------------------------------------- */

/** What --splits auto enumerates beyond degrees and placements. */
typedef struct {
  gboolean fits_only;      /* drop splits whose memory per chip exceeds the chip's */
  gboolean all_placements; /* keep placements that are images of others under a symmetry of
                              the array (interchangeable dimensions); off: one of each */
  const char *suffix;      /* options appended to every split (",recompute=full"), may be NULL */
  /* Added with issue 13. */
  gboolean vary_options; /* also every recomputation, sequence parallelism (tp > 1), virtual
                            pipeline stages (pp > 1) and hybrid-sharding group (ZeRO) */
  int max_configs;       /* stop after this many splits (0: no bound) */
  gboolean *truncated;   /* out, may be NULL: set when max_configs stopped the enumeration */
  long *placements;      /* out, may be NULL: the placements of all axes tried, each once
                            (sequences of dimensions that give the same pieces count once) */
  const char *progress;  /* label of the time-elapsed lines of a long enumeration on stderr
                            (ts_progress_tick, "search (splits)"); NULL: none */
} ts_auto_options;

/**
 * Every valid split of the model on the topology at these planner options: every degree of
 * every axis the planner accepts (an axis ts_split_parse rejects is left out; context
 * parallelism only where a whole sample does not fit a chip, at degrees that leave a rank 8,192
 * tokens, or with vary_options), times every placement of each axis on the array's dimensions,
 * times every ZeRO stage the planner accepts when data parallelism is used (sharding), and
 * ZeRO-3 as FSDP2 (zero=3,fsdp2, with hybrid sharding over dp's inner pieces) where the planner
 * accepts fsdp2, deduplicated by the resulting group shapes (and,
 * unless all_placements, by the array's symmetries), kept when ts_plan_new accepts it. Returns
 * --split strings with explicit placements ("tp=8@x,dp=128@x+y,zero=1"), in a deterministic
 * order.
 */
GPtrArray *ts_splits_auto(const ts_model *m, const ts_topo *t, const ts_plan_options *po,
                          const ts_auto_options *o);

/** The family of a split: the axes with degree > 1 in axis order, "tp+dp", "dp", "pp+tp+dp". */
char *ts_split_family(const char *split);

/* ---- sweeps -------------------------------------------------------------------------------- */

/** What to sweep; every list is tried against every other (a cartesian product). */
typedef struct {
  char **topologies;       /* names or paths as given (NULL-terminated) */
  char **models;           /* likewise */
  char **splits;           /* --split texts; NULL with auto_splits */
  gboolean auto_splits;    /* every valid split (ts_splits_auto) */
  gboolean fits_only;      /* auto: only splits that fit the chip's memory */
  gboolean all_placements; /* auto: also placements equivalent under the array's symmetries */
  char **suffixes;         /* options appended to every split, one sweep value each (e.g.
                              "recompute=full"); NULL = none */
  GArray *global_batch;    /* gint64 samples per step; empty with batch_per_chip */
  GArray *batch_per_chip;  /* gint64 samples per chip per step (weak scaling); may be empty */
  GArray *micro_batch;     /* gint64 per replica; 0 = planner default */
  gboolean micro_auto;     /* instead: per split, the per-replica batch halved down to 1 */
  GPtrArray *vary;         /* ts_vary*, applied in order */
  const char *backend;     /* "analytic" or "simgrid" */
  ts_coll_algo algo;
  double bucket_MiB;
  gboolean full;
  /* Added with issue 13 (ts_auto_options). */
  gboolean vary_options; /* auto: also recomputation, sp, virtual stages, sharding group */
  int max_configs;       /* auto: at most this many splits per (topology, model, batch); 0 = all */
  gboolean *truncated;   /* out, may be NULL: set when max_configs cut an enumeration short */
  const char *progress;  /* auto: ts_auto_options.progress, NULL: none */
} ts_sweep_spec;

/** The configurations of a sweep, enumerated in a fixed order. Opaque. */
typedef struct ts_sweep ts_sweep;

/**
 * Loads every input and enumerates the configurations (topology x vary values in order x
 * model x batch x micro-batch x split). Input errors (a file, a --vary key that does not apply
 * to a topology) fail here, before anything is predicted. The cache must outlive the sweep.
 */
ts_sweep *ts_sweep_new(const ts_sweep_spec *spec, ts_inputs *cache, GError **error);
void ts_sweep_free(ts_sweep *s);

int ts_sweep_size(const ts_sweep *s);
const ts_config *ts_sweep_configs(const ts_sweep *s);

/** Every configuration's replay reads these SimGrid settings (`--cfg`, NULL-terminated; owned by
 * the caller, which keeps them alive while the sweep predicts). */
void ts_sweep_set_sg_cfg(ts_sweep *s, const char *const *cfg);

/** The spec as a JSON object (what was swept, as the user wrote it, and the count). */
JsonNode *ts_sweep_spec_json(const ts_sweep *s);

/**
 * Rows of configurations idx[0..n) with outcomes out[0..n): a CSV table (header, then one row
 * per predicted configuration: config index, array, split_arg, varied parameters, then the
 * columns of `trainsim run`) and JSON result / skipped objects appended to results / skipped
 * (JsonNode*, owned by the arrays).
 */
char *ts_sweep_render_csv(const ts_sweep *s, const int *idx, const ts_outcome *out, int n);
void ts_sweep_render_json(const ts_sweep *s, const int *idx, const ts_outcome *out, int n,
                          GPtrArray *results, GPtrArray *skipped);

/**
 * The sweep JSON document: version, spec, optional shard {index, count}, results, skipped.
 * Shared by sweep and merge, so merged shards are byte-identical to one unsharded sweep.
 * shard_count 0 = not a shard. Caller frees.
 */
char *ts_sweep_document(JsonNode *spec, int shard_index, int shard_count, GPtrArray *results,
                        GPtrArray *skipped);

/** Parses "--shard i/n" (0 <= i < n <= 1000000). */
gboolean ts_shard_parse(const char *text, int *index, int *count, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_sweep, ts_sweep_free)

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_inputs, ts_inputs_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_vary, ts_vary_free)

G_END_DECLS

#endif
