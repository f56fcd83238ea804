/* For the trace and importer harnesses: what replay does with a trace once it is read (the
 * checks against the topology, algorithm resolution, the text writer and reader agreeing),
 * then a replay on the analytic backend when the trace is small enough to stay well under the
 * harness's 1 s per input. */
#ifndef TS_FUZZ_REPLAY_H
#define TS_FUZZ_REPLAY_H

#include "ts_run.h"
#include "ts_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text form of a trace read back must write the same text (the writer and reader agree). */
static inline void fuzz_round_trip(const ts_trace *tr)
{
  char *t1 = ts_trace_to_text(tr);
  GError *e = NULL;
  ts_trace *back = ts_trace_from_text(t1, "fuzz-round-trip.trace", &e);
  if (back == NULL) {
    fprintf(stderr, "a trace's own text does not read back: %s\n%s", e->message, t1);
    abort();
  }
  char *t2 = ts_trace_to_text(back);
  if (strcmp(t1, t2) != 0) {
    fprintf(stderr, "text -> trace -> text differs\n--- first\n%s--- second\n%s", t1, t2);
    abort();
  }
  ts_trace_free(back);
  g_free(t1);
  g_free(t2);
}

/* topo may be NULL: the checks that need none. */
static inline void fuzz_check_and_replay(ts_trace *tr, const ts_topo *topo)
{
  if (!ts_trace_check(tr, topo, NULL))
    return;
  fuzz_round_trip(tr);
  if (topo == NULL || !ts_trace_resolve_algos(tr, topo, NULL))
    return;
  if ((double)ts_trace_nops(tr) * tr->nranks > 2e4)
    return;
  ts_run_options ro = {.backend = "analytic"};
  ts_replay_result rr;
  GError *e = NULL;
  if (ts_run_replay(tr, topo, &ro, &rr, &e) && !(rr.step_time_s >= 0)) {
    fprintf(stderr, "replay gave step time %g\n", rr.step_time_s);
    abort();
  }
  g_clear_error(&e);
}

#endif
