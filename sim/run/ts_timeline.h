/* ts_timeline: the replayed training step as a Chrome trace-event document (opens in Perfetto
 * and chrome://tracing): one track per chip, compute and communication as spans. The spans come
 * from the prediction's own replay (ts_run_predict_ex). */
#ifndef TS_TIMELINE_H
#define TS_TIMELINE_H

#include "ts_report.h"

G_BEGIN_DECLS

/**
 * Renders replayed spans (ts_span, from ts_replay_spans) of a trace as Chrome trace-event
 * JSON. res gives the step's numbers for the metadata (may be NULL). Caller frees.
 */
char *ts_timeline_render(const ts_trace *tr, const ts_topo *t, const GArray *spans,
                         const ts_result *res, const char *backend, int nsimulated);

G_END_DECLS

#endif
