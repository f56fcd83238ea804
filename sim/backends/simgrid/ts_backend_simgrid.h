/* ts_backend_simgrid: what the contention-aware backend offers beyond ts_backend_simgrid_new
 * (declared in ts_replay.h): platform options, the recorded network model, the link report. */
#ifndef TS_BACKEND_SIMGRID_H
#define TS_BACKEND_SIMGRID_H

#include "ts_platform.h"
#include "ts_replay.h"
#include <glib.h>

G_BEGIN_DECLS

/**
 * The network model pinned by the backend, as --cfg strings (NULL-terminated, static). A
 * user's cfg is applied after these, so it can override them.
 */
extern const char *const ts_simgrid_pinned_cfg[];

/**
 * As ts_backend_simgrid_new, with platform options (opts may be NULL). Initialises SimGrid
 * (once per process: a second call fails with TS_ERROR_BACKEND) and builds the platform, so
 * every input error is reported here, before any replay starts. The topology is borrowed.
 */
ts_backend *ts_backend_simgrid_new_opts(const ts_topo *t, const char *const *cfg,
                                        const ts_platform_opts *opts, GError **error);

/** True when b is a simgrid backend. */
gboolean ts_backend_is_simgrid(const ts_backend *b);

/**
 * The SimGrid configuration in effect, "key:value" items separated by spaces: the pinned
 * model, then the user's --cfg items (a user value replaces a pinned one in place). Record it
 * with results.
 */
const char *ts_backend_simgrid_config(const ts_backend *b);

/** Flows (point-to-point transfers) sent to SimGrid by the last run. */
gint64 ts_backend_simgrid_flows(const ts_backend *b);

/** The platform (borrowed). */
const ts_platform *ts_backend_simgrid_platform(const ts_backend *b);

/**
 * Link accounting (driver mode): busy intervals that no flow can reach any more are summed and
 * dropped while the replay runs (on by default; the link report is the same to the last bit).
 * Off keeps every interval until the report, for tests. Returns the previous setting.
 */
gboolean ts_backend_simgrid_set_settle(ts_backend *b, gboolean on);

/** Busy intervals settled (summed and dropped) by the last run. */
gint64 ts_backend_simgrid_settled(const ts_backend *b);

/**
 * Symmetry collapse for the next runs (driver mode): a collective step in which every line
 * of the group along one piece sends the images of the first line's flows is simulated on
 * that line only, the others accounted as its images (exact: see docs/backends.md). Off
 * unless set; trainsim/symmetry:full keeps it off. Returns whether it is on (it stays off for
 * actor mode, asynchronous steps, shared ports, dead links and twisted tori).
 */
gboolean ts_backend_simgrid_set_collapse(ts_backend *b, gboolean on);

/**
 * After a failed run: whether it failed because a flow crossed a collapsed step's links (the
 * symmetry did not hold). Replay again with collapse off.
 */
gboolean ts_backend_simgrid_symmetry_broken(const ts_backend *b);

/**
 * Whether replaying one rank per class of tr is bound to break: some group of rank 0 (a class
 * representative) has an image (the group moved along a symmetric axis outside it) whose
 * ring of members crosses a link of the group's own ring (data-parallel rings strided over
 * the tensor-parallel chips). A hint only: exactness is checked while replaying either way.
 * Added with issue 15.
 */
gboolean ts_backend_simgrid_images_cross(const ts_backend *b, const ts_trace *tr);

/**
 * Folding by translations, for a one-rank-per-class replay (TS_REPLAY_COLLAPSED) of tr that
 * ts_backend_simgrid_images_cross says the rank collapse cannot do. The symmetric axes whose
 * pieces each wrap a whole ring of the torus (a data-parallel ring strided over the
 * tensor-parallel chips) move chips by translations G under which the whole replay is
 * invariant. The next replay then runs every image of an activity that leaves the fundamental
 * domain of G as a real flow (so strided rings share links as they do in the full replay),
 * on the quotient torus (each link replaced by its canonical translate, where the other flows
 * of its G-orbit would share it), and none of the others. Exact when the replay is symmetric
 * under G and the engine's classes are alike; checked while it runs (a break:
 * ts_backend_simgrid_symmetry_broken). Returns FALSE, and leaves the collapse as
 * ts_backend_simgrid_set_collapse(b, TRUE) sets it, when the array or layout has no such
 * translations (no wrap-around, a degraded array, shared ports, a twisted torus, actor mode,
 * asynchronous steps, trainsim/symmetry:full). ts_backend_simgrid_set_collapse turns it off.
 * Added with issue 15's third session.
 */
gboolean ts_backend_simgrid_set_fold(ts_backend *b, const ts_trace *tr);

/** Load of one link over the last run. */
typedef struct {
  int link;              /* index in the platform */
  const char *name;      /* SimGrid link name (borrowed from the platform) */
  int chip;              /* ts_link_id: the link's chip (a shared port's lowest chip) */
  const char *dim;       /* dimension name (borrowed from the topology) */
  const char *direction; /* "+", "-" (ring, mesh) or "up", "down" (switch port) */
  double bandwidth_Bps;
  double bytes;         /* bytes that crossed the link */
  double busy_s;        /* time with at least one flow on the link */
  double busy_fraction; /* busy_s / makespan_s */
  double utilization;   /* bytes / (bandwidth_Bps * makespan_s) */
  char *top_label;      /* label of the operations that moved most bytes over it ("" if none) */
  double top_label_bytes;
} ts_link_load;

void ts_link_load_free(ts_link_load *l);

/**
 * Every link's load over the last run, most bytes first (ties by link index). *rows is a new
 * array owning its ts_link_load items; *makespan_s (may be NULL) gets the run's simulated
 * length. Fails with TS_ERROR_BACKEND when b has not run.
 */
gboolean ts_backend_simgrid_link_report(const ts_backend *b, GPtrArray **rows, double *makespan_s,
                                        GError **error);

/** CSV of the rows, header line with units; locale independent. Caller frees. */
char *ts_link_report_csv(const GPtrArray *rows);

/** Writes ts_link_report_csv atomically to path ("-" is stdout). */
gboolean ts_link_report_write_csv(const GPtrArray *rows, const char *path, GError **error);

/** A short text table of the `top` most loaded links, for a replay's summary. Caller frees. */
char *ts_link_report_summary(const GPtrArray *rows, int top);

/**
 * After a run, in one call for the commands: writes every link's load as CSV to csv_path
 * (NULL: no file) and returns the `top` most loaded links as text in *summary (NULL: not
 * wanted; caller frees). Does nothing and returns TRUE when b is not a simgrid backend.
 */
gboolean ts_backend_simgrid_report_links(const ts_backend *b, const char *csv_path, int top,
                                         char **summary, GError **error);

/** What a simgrid replay of a trace will need, estimated before it starts. */
typedef struct {
  int hosts, links;     /* the platform */
  gint64 ops;           /* ops replayed, every rank */
  gint64 ops_collapsed; /* ops replayed, one rank per class of the symmetric axes */
  int ranks_collapsed;  /* ranks replayed then */
  gint64 flows_at_once; /* bound on concurrent flows (largest collective step on every rank) */
  double memory_bytes;  /* expected peak resident memory of the replay process, every rank */
  double memory_collapsed_bytes; /* the same, one rank per class (rank collapse or fold) */
  double expected_bytes;         /* memory_collapsed_bytes unless cfg or the array rule it out */
  double available_bytes;        /* the machine's available memory (MemAvailable), 0 if unknown */
  double max_memory_bytes;       /* --cfg trainsim/max-memory:SIZE, 0 if not given */
} ts_simgrid_estimate;

/**
 * Estimates the cost of replaying tr on t with the simgrid backend (cfg: the --cfg items, for
 * trainsim/max-memory). Cheap: one pass over the trace's programs.
 */
void ts_simgrid_estimate_cost(const ts_trace *tr, const ts_topo *t, const char *const *cfg,
                              ts_simgrid_estimate *out);

/**
 * Refuses (FALSE, TS_ERROR_INVALID: one line with the estimate and the option that overrides
 * it) a replay whose estimated memory exceeds --cfg trainsim/max-memory:SIZE, or the available
 * memory when that is not given; TS_ERROR_INPUT for a bad SIZE.
 */
gboolean ts_simgrid_preflight(const ts_trace *tr, const ts_topo *t, const char *const *cfg,
                              GError **error);

/**
 * The same check for a replay of every rank (memory_bytes), made by ts_run before one starts:
 * the preflight expects one rank per class where the configuration allows it, and whether the
 * rank collapse or the fold holds is only known once the backend has looked at the trace.
 */
gboolean ts_simgrid_check_every_rank(const ts_trace *tr, const ts_topo *t, const char *const *cfg,
                                     GError **error);

G_END_DECLS

#endif
