/* ts_timeline: the replayed training step as a Chrome trace-event document (opens in Perfetto
 * and chrome://tracing): one track per chip, compute and communication as spans. */
#ifndef TS_TIMELINE_H
#define TS_TIMELINE_H

#include "ts_run.h"

G_BEGIN_DECLS

/**
 * Predicts one split exactly as ts_run_predict does (same plan, trace, backend and replay
 * mode) and also renders the replayed step as Chrome trace-event JSON in *json (caller
 * frees). In a collapsed replay only the simulated ranks have tracks; the document's
 * otherData says which ranks were simulated and what each stands for. Use ro->full for a
 * track per chip of the array.
 */
gboolean ts_timeline_predict(const ts_model *m, const ts_topo *t, const ts_split *s,
                             const ts_plan_options *po, const ts_run_options *ro, ts_result *out,
                             char **json, GError **error);

/**
 * Renders replayed spans (ts_span, from ts_replay_spans) of a trace as Chrome trace-event
 * JSON. res gives the step's numbers for the metadata (may be NULL). Caller frees.
 */
char *ts_timeline_render(const ts_trace *tr, const ts_topo *t, const GArray *spans,
                         const ts_result *res, const char *backend, int nsimulated);

G_END_DECLS

#endif
