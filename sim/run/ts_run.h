/* ts_run: one prediction end to end: plan, trace, replay on a backend, result. Shared by
 * run, sweep-like commands and tests. */
#ifndef TS_RUN_H
#define TS_RUN_H

#include "ts_report.h"

G_BEGIN_DECLS

typedef struct {
  const char *backend;       /* "analytic" (default) or "simgrid" */
  const char *const *sg_cfg; /* extra SimGrid --cfg values, may be NULL */
  gboolean full;             /* replay every rank even where ranks are identical */
  const char *link_report;   /* simgrid: write every link's load here as CSV (may be NULL) */
  int top_links;             /* simgrid: links in the summary (0 = 5) */
  gboolean timeline;         /* keep every op's interval (ts_run_extra.spans) */
  const char *progress;      /* simgrid: time elapsed on stderr under this label (ts_progress) */
} ts_run_options;

/** What a replay adds beyond the step: the simgrid backend's most loaded links. */
typedef struct {
  char *link_summary;   /* text table of the most loaded links, or NULL (caller frees) */
  char *network_config; /* the SimGrid configuration in effect, or NULL (caller frees) */
  gint64 flows;         /* point-to-point flows simulated (simgrid) */
  GArray *spans;        /* ts_span of every op replayed, with ts_run_options.timeline (owned) */
} ts_run_extra;

void ts_run_extra_clear(ts_run_extra *x);

/**
 * As ts_run_replay, also returning the backend's extras (x may be NULL). SimGrid can run one
 * platform per process, so a simgrid replay runs in a child process: a crash or an abort
 * inside SimGrid becomes an error, never a dead program.
 */
gboolean ts_run_replay_ex(const ts_trace *tr, const ts_topo *t, const ts_run_options *ro,
                          ts_replay_result *out, ts_run_extra *x, GError **error);

/**
 * What the replays of one trace share while ts_plan_trace_replace re-places it between them
 * (its ops and the topology unchanged; issue 15): the check of its every op and the replay's
 * view of its ops, each made once. Zero-initialised; ts_pool keeps one beside the trace it
 * reuses.
 */
typedef struct {
  gboolean checked;   /* the trace passed ts_trace_check on the topology */
  ts_replay_ops *ops; /* owned; NULL until the first replay */
} ts_run_reuse;

/** Frees what u holds and zeroes it (for another trace). */
void ts_run_reuse_clear(ts_run_reuse *u);

/**
 * ts_run_replay_ex with what u holds for tr, made by an earlier call for this trace on this
 * topology (or empty: filled here). The result is the same bit for bit.
 */
gboolean ts_run_replay_reusing(const ts_trace *tr, const ts_topo *t, const ts_run_options *ro,
                               ts_run_reuse *u, ts_replay_result *out, ts_run_extra *x,
                               GError **error);

/**
 * Predicts one split. On input errors returns FALSE with TS_ERROR_INVALID / TS_ERROR_INPUT;
 * a replay that cannot finish gives TS_ERROR_BACKEND.
 */
gboolean ts_run_predict(const ts_model *m, const ts_topo *t, const ts_split *s,
                        const ts_plan_options *po, const ts_run_options *ro, ts_result *out,
                        GError **error);

/**
 * As ts_run_predict; with timeline_json non-NULL also renders the replayed step as Chrome
 * trace-event JSON there (caller frees), from the very replay that gave the result: the same
 * backend, replay mode and process (a simgrid replay's spans come back from its child).
 */
gboolean ts_run_predict_ex(const ts_model *m, const ts_topo *t, const ts_split *s,
                           const ts_plan_options *po, const ts_run_options *ro, ts_result *out,
                           char **timeline_json, GError **error);

/**
 * The range check of a trace planned from p (ts_trace_check on t), a failure said in the
 * user's terms: the global batch (po) and micro-batch that made it, and what to give instead.
 */
gboolean ts_run_check_planned(const ts_trace *tr, const ts_topo *t, const ts_plan *p,
                              const ts_plan_options *po, GError **error);

/** Replays a trace on a topology with a backend; fills the replay result. */
gboolean ts_run_replay(const ts_trace *tr, const ts_topo *t, const ts_run_options *ro,
                       ts_replay_result *out, GError **error);

/** Checks a backend name; FALSE with an error naming the accepted ones. */
gboolean ts_run_backend_valid(const char *name, GError **error);

/** The network model string recorded with results of a backend. Caller frees. */
char *ts_run_network_model(const ts_run_options *ro);

G_END_DECLS

#endif
