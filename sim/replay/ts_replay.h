/* ts_replay: the discrete-event replay engine. It walks every simulated rank's program,
 * resolves dependencies and stream order, matches collectives and send/recv pairs across
 * ranks, and asks a backend what each activity costs. It knows nothing about any topology. */
#ifndef TS_REPLAY_H
#define TS_REPLAY_H

#include "ts_trace.h"
#include <glib.h>

G_BEGIN_DECLS

typedef struct ts_replay ts_replay;
typedef struct ts_backend ts_backend;
typedef struct ts_evq ts_evq;

/** One activity handed to a backend. Chips are trace ranks. */
typedef struct {
  guint64 token;          /* pass back to ts_replay_complete */
  ts_op_kind kind;        /* COMPUTE, COLL or SEND (a matched send/recv pair) */
  const ts_op *op;        /* the op (for COLL, the first member's; for SEND, the send); NULL for
                             a backend with op_on_demand: read it with ts_activity_op */
  int chip;               /* COMPUTE: the chip; COLL: base chip (member 0); SEND: source */
  int peer;               /* SEND: destination chip */
  const ts_group *group;  /* COLL */
  int nmembers_simulated; /* COLL: members present in this replay (1 in collapsed mode) */
  const char *label;      /* NULL for a backend with label_on_error_only (then the op's label) */
  int program;  /* the op's program (for COLL and SEND, the first member's and the sender's) */
  int index;    /* the op's index in that program, so backends keep per-op tables */
  double bytes; /* SEND: the send's bytes (added with issue 15: op_on_demand backends get no op) */
} ts_activity;

/**
 * A backend. start() is called by the engine when an activity may begin at `now`; the
 * backend later calls ts_replay_complete() with its end time. run() drives time until no
 * activity is outstanding.
 */
struct ts_backend {
  const char *name;
  void *ctx;
  gboolean (*start)(ts_backend *b, ts_replay *r, const ts_activity *a, double now, GError **error);
  gboolean (*run)(ts_backend *b, ts_replay *r, GError **error);
  void (*free)(ts_backend *b);
  /* Added with issue 15: the backend reads an activity's label only to name it in an error
   * (from the trace's labels, by act->op->label), so the engine passes label = NULL and does
   * not load the op to find it. */
  gboolean label_on_error_only;
  /* Added with issue 11 (streaming): ops are stored packed, so act.op needs a copy made. A
   * backend that sets this gets act.op = NULL for every activity (a send/recv pair too since
   * issue 15: its bytes are act.bytes) and reads the op, when it needs it, with ts_activity_op
   * (during start()); otherwise act.op is a copy valid until the activity completes. */
  gboolean op_on_demand;
  /* Added with issue 15 (tenth pass): a backend whose activities end at their start plus a
   * duration known from the op alone (the analytic backend on a healthy array, no host launch
   * costs) fills, per program, each op's seconds as a one-op activity (a compute op, an off-chip
   * transfer or delay, a collective with one simulated member), NaN where start() must decide;
   * FALSE: none of the program's ops has one. The engine then pushes such an op's completion
   * into `queue` itself (as start() would, at now + seconds) without calling start(), and
   * drains `queue` with ts_replay_drain_queue. Both NULL: every activity goes through start(). */
  gboolean (*fixed_seconds)(ts_backend *b, ts_replay *r, int program, double *secs);
  ts_evq *queue;
  /* Added with issue 15 (fourteenth pass): when fixed_seconds gives a program's seconds, start()
   * ends every activity of the replay at now + seconds that depend on the activity alone (no
   * state carried from one activity to the next), pushing that one event into `queue`. The
   * engine may then replay without time order: each op's times are max-plus sums of its
   * predecessors', the same bits in any order of completion. */
  gboolean pure_when_fixed;
  /* Added with issue 15 (seventeenth pass): with pure_when_fixed, a matched send/receive pair's
   * seconds (source and destination chips, bytes, start), after doing whatever else start()
   * does for one (its bookkeeping), without queueing its end: the order-free replay then ends
   * the pair at now + seconds itself, with no activity record, queue event or start() call.
   * NULL: every pair goes through start(). */
  double (*p2p_seconds)(ts_backend *b, ts_replay *r, int src, int dst, double bytes, double now);
};

/** An activity's op (a copy): *act->op, or the op the activity's program and index name. */
ts_op ts_activity_op(const ts_replay *r, const ts_activity *act);

/** An activity's label (act->label, or the op's label when the engine passed NULL). */
const char *ts_activity_label(const ts_replay *r, const ts_activity *act);

typedef enum {
  TS_REPLAY_COLLAPSED, /* one rank per class of identical ranks (all symmetric-axis coords 0) */
  TS_REPLAY_FULL,      /* every rank (contention-aware backends need this) */
} ts_replay_mode;

/** Per-rank results. */
typedef struct {
  int rank;
  double end_s;                   /* when the rank's last op completed */
  double compute_s;               /* union of compute intervals */
  double comm_s;                  /* union of communication intervals */
  double exposed_comm_s;          /* communication while no compute ran */
  double idle_s;                  /* end - compute - exposed communication */
  double bubble_s;                /* part of idle_s spent waiting for pipeline receives */
  double cat_s[TS_NCATS];         /* summed op durations per category */
  double exposed_cat_s[TS_NCATS]; /* exposed communication attributed per category */
} ts_rank_result;

typedef struct {
  double step_time_s;      /* max over ranks of end_s */
  int critical_rank;       /* the (lowest) rank whose end is the step time */
  ts_rank_result critical; /* its breakdown */
  gint64 events;           /* activities completed (for events/s in bench) */
  int nsimulated;          /* ranks simulated */
  /* Added with issue 14: averages over the simulated ranks (each stands for as many ranks as
   * every other in collapsed mode, so this is the average over all ranks). */
  double mean_compute_s;   /* compute time per rank */
  double mean_comm_only_s; /* communication while not computing, per rank */
} ts_replay_result;

/** One op's replayed interval, kept when timelines are requested. */
typedef struct {
  int rank, program, op;
  double start_s, end_s;
} ts_span;

/** A replay of `tr` in `mode` (trace and backend borrowed). */
ts_replay *ts_replay_new(const ts_trace *tr, ts_backend *b, ts_replay_mode mode);

/**
 * The replay's view of a trace's ops: each program's successor lists, initial op states and
 * sends and receives. ts_replay_new makes one per replay; made once here, it serves every
 * replay of the trace while its ops do not change (ts_plan_trace_replace changes its
 * placement only: a sweep replays each split's trace once per placement; issue 15).
 */
typedef struct ts_replay_ops ts_replay_ops;
ts_replay_ops *ts_replay_ops_new(const ts_trace *tr);
void ts_replay_ops_free(ts_replay_ops *o);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_replay_ops, ts_replay_ops_free)

/**
 * ts_replay_new reading `ops`, made by ts_replay_ops_new for tr's ops (borrowed: unchanged and
 * alive while the replay lives; NULL makes one for this replay). NULL when ops has other
 * programs than tr.
 */
ts_replay *ts_replay_new_shared(const ts_trace *tr, const ts_replay_ops *ops, ts_backend *b,
                                ts_replay_mode mode);
void ts_replay_free(ts_replay *r);

/** Keeps every op's interval (for timelines); off by default. */
void ts_replay_keep_spans(ts_replay *r, gboolean keep);

/**
 * Runs the replay to the end. A replay where some rank cannot finish (a collective or send
 * whose partner never arrives) fails with TS_ERROR_BACKEND naming the rank and the op.
 */
gboolean ts_replay_run(ts_replay *r, ts_replay_result *out, GError **error);

/** Backend callback: the activity with this token ended at time end_s. */
gboolean ts_replay_complete(ts_replay *r, guint64 token, double end_s, GError **error);

/**
 * Backend run(): pops q's events, earliest first, completing each (ts_replay_complete), until q
 * is empty; activities started meanwhile push theirs into q. Added with issue 15: the engine's
 * own loop completes one-op activities without a call per event.
 */
gboolean ts_replay_drain_queue(ts_replay *r, ts_evq *q, GError **error);

/** Spans kept (ts_span), ordered by rank, then start. Borrowed. */
const GArray *ts_replay_spans(const ts_replay *r);

/**
 * The mode the replay runs in: TS_REPLAY_COLLAPSED asked for may run TS_REPLAY_FULL (a send
 * along a symmetric axis). Added with issue 15, for backends that act on the collapse.
 */
ts_replay_mode ts_replay_get_mode(const ts_replay *r);

/**
 * Whether the replay runs without time order (ts_backend.pure_when_fixed, every simulated
 * program's seconds fixed and its matching order-safe; issue 15, fourteenth pass). Its results
 * are the timed replay's, bit for bit.
 */
gboolean ts_replay_is_order_free(const ts_replay *r);

/** The trace replayed (borrowed). */
const ts_trace *ts_replay_trace(const ts_replay *r);

/** The analytic backend: roofline compute, alpha-beta collectives (borrowed topology). */
ts_backend *ts_backend_analytic_new(const ts_topo *t);

/** The simgrid backend (contention-aware); cfg: extra SimGrid --cfg strings, may be NULL. */
ts_backend *ts_backend_simgrid_new(const ts_topo *t, const char *const *cfg, GError **error);

void ts_backend_free(ts_backend *b);

G_END_DECLS

#endif
