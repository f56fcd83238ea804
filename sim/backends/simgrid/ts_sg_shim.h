/* ts_sg_shim: the few SimGrid 3.32 features its C API lacks, implemented in C++ in
 * ts_sg_shim.cpp (the only C++ file of trainsim). Internal to the simgrid backend.
 *
 * Every function here except ts_sg_init must run after a successful ts_sg_init; functions
 * marked "actor" must run inside a SimGrid actor (during ts_sg_run). */
#ifndef TS_SG_SHIM_H
#define TS_SG_SHIM_H

#include <glib.h>
#include <simgrid/forward.h>

G_BEGIN_DECLS

/**
 * Initialises SimGrid once per process: logging silenced (nothing reaches stdout/stderr;
 * TS_SIMGRID_LOG=FILE sends it to FILE instead), then every "key:value" of cfg applied in
 * order. A bad key or value fails with TS_ERROR_INPUT naming it; a second call fails with
 * TS_ERROR_BACKEND, since SimGrid cannot be initialised twice in one process.
 */
gboolean ts_sg_init(const char *const *cfg, GError **error);

/** Whether ts_sg_init succeeded in this process. */
gboolean ts_sg_initialised(void);

/**
 * Route callback of a ts_sg_zone: writes the indices (as returned by ts_sg_zone_add_link) of
 * the links from host index src to host index dst into links (room for max), returns how many.
 */
typedef int (*ts_sg_route_fn)(void *data, int src, int dst, int *links, int max);

/**
 * A netzone whose routes come from a C callback, so SimGrid sends every flow along exactly
 * the links the analytic model assumes. It becomes the platform's root zone. Owned by SimGrid.
 */
typedef struct ts_sg_zone ts_sg_zone;

ts_sg_zone *ts_sg_zone_new(const char *name, ts_sg_route_fn route, void *data, int max_route,
                           GError **error);

/** Adds a host (one core of `speed` flop/s); hosts are numbered 0, 1, ... in creation order. */
sg_host_t ts_sg_zone_add_host(ts_sg_zone *z, const char *name, double speed);

/** Adds a one-direction link (SHARED policy); returns its index, numbered from 0. */
int ts_sg_zone_add_link(ts_sg_zone *z, const char *name, double bandwidth_Bps, double latency_s);

/** Seals the zone and the platform so routes can be queried and flows sent. */
gboolean ts_sg_zone_seal(ts_sg_zone *z, GError **error);

/**
 * Loads a platform file (XML) into SimGrid and seals it, instead of a ts_sg_zone: for checking
 * `trainsim platform` output and for user-written platforms. Fails when the file is missing.
 */
gboolean ts_sg_load_xml(const char *path, GError **error);

/** Creates an actor on host running fn(arg) (arg borrowed). */
void ts_sg_spawn(const char *name, sg_host_t host, void (*fn)(void *), void *arg);

/**
 * Actor: starts n concurrent host-to-host flows (no receiving actor needed) and waits until
 * all have finished; start_s[i] and end_s[i] receive each flow's simulated interval.
 */
void ts_sg_flows(const sg_host_t *src, const sg_host_t *dst, const double *bytes, int n,
                 double *start_s, double *end_s);

/**
 * Actor: posts nout sends (bytes[i] into mailbox out[i]) and nin receives (from in[j]), then
 * waits for all of them. A send starts when its receive is posted, and goes from the sender's
 * host to the receiver's. start_s[i] and end_s[i] receive send i's simulated interval.
 */
void ts_sg_exchange(const sg_mailbox_t *out, const double *bytes, int nout, const sg_mailbox_t *in,
                    int nin, double *start_s, double *end_s);

/** Actor: executes `flops` on the actor's host and returns when done. */
void ts_sg_execute(double flops);

/*
 * Driver mode (no actor): the functions below run in the simulator's own context (inside a
 * ts_sg_at callback or a flow's completion callback, or before ts_sg_run), never in an actor.
 */

/** Called when a driver flow ends, with its simulated interval. */
typedef void (*ts_sg_flow_done_fn)(void *data, double start_s, double end_s);

/**
 * Starts a host-to-host flow of `bytes` (0 allowed: it takes the route's latency) from the
 * simulator's context; done(data, start, end) is called, in that context, when it ends.
 */
void ts_sg_flow_start(sg_host_t src, sg_host_t dst, double bytes, ts_sg_flow_done_fn done,
                      void *data);

/** A timer of the simulator (ts_sg_at). */
typedef struct ts_sg_timer ts_sg_timer;

/**
 * Calls fn(data) in the simulator's context at simulated time date_s (at the current time if
 * date_s is not later). The timer is freed after it fires.
 */
ts_sg_timer *ts_sg_at(double date_s, void (*fn)(void *), void *data);

/** Cancels a timer that has not fired yet. */
void ts_sg_timer_cancel(ts_sg_timer *t);

/** Runs the simulation until no actor is left; FALSE with an error if SimGrid throws. */
gboolean ts_sg_run(GError **error);

/** Actors alive (created and not yet finished): nonzero after ts_sg_run means a deadlock. */
int ts_sg_actor_count(void);

/** Simulated time, seconds. */
double ts_sg_clock(void);

G_END_DECLS

#endif
