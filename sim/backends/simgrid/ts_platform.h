/* ts_platform: a topology as a SimGrid platform. One host per chip, one one-direction link per
 * (chip, dimension, direction) and routes equal to ts_route's dimension-order paths; written as
 * XML for SimGrid's own tools, or built inside the running simulator for the simgrid backend.
 *
 * Naming (also in docs/backends.md): chip k is host "c<k>"; the link leaving chip k along ring
 * or mesh dimension D towards +1 / -1 is "c<k>.D+" / "c<k>.D-"; chip k's port into the switch
 * of switch dimension D is "c<k>.D.up" (chip to switch) and "c<k>.D.down" (switch to chip). */
#ifndef TS_PLATFORM_H
#define TS_PLATFORM_H

#include "ts_coll.h"
#include "ts_topo.h"
#include <glib.h>
#include <simgrid/forward.h>

G_BEGIN_DECLS

/** Options the topology file cannot express yet (see docs/backends.md, "shared NICs"). */
typedef struct {
  /* Switch dimension d > 0: chips_per_port[d] consecutive chips along dimension 0 share one
   * port (a NIC shared by several GPUs). 0 or 1: one port per chip. */
  int chips_per_port[TS_MAX_DIMS];
} ts_platform_opts;

/** How routes are written in XML. */
typedef enum {
  TS_PLATFORM_AUTO,     /* TORUS for uniform tori, FULL up to 256 chips, else DIJKSTRA */
  TS_PLATFORM_TORUS,    /* <cluster topology="TORUS">: uniform tori only, compact */
  TS_PLATFORM_FULL,     /* every route written out: exact, O(chips^2) size */
  TS_PLATFORM_DIJKSTRA, /* adjacent routes only, routing="DijkstraCache": shortest paths */
  TS_PLATFORM_FLOYD,    /* adjacent routes only, routing="Floyd" (slow to seal past ~1k chips) */
  TS_PLATFORM_NROUTINGS
} ts_platform_routing;

/** Largest array that TS_PLATFORM_AUTO writes with every route (about 16 MB of XML). */
#define TS_PLATFORM_FULL_MAX_CHIPS 256
/** Largest array TS_PLATFORM_FULL accepts at all (about 350 MB of XML at 1024 chips). */
#define TS_PLATFORM_FULL_LIMIT_CHIPS 1024

typedef struct ts_platform ts_platform;

/**
 * Validates the topology for SimGrid (positive finite bandwidths, finite latencies, port
 * sharing that fits) and lays out its links. opts may be NULL. The topology is borrowed and
 * must outlive the platform. Errors name the topology file and the [dim.NAME] group.
 */
ts_platform *ts_platform_new(const ts_topo *t, const ts_platform_opts *opts, GError **error);
void ts_platform_free(ts_platform *p);

const ts_topo *ts_platform_topo(const ts_platform *p);

/** Number of links (every one exists: mesh line ends and size-1 dimensions have none). */
int ts_platform_nlinks(const ts_platform *p);

/** Index of the link (chip, dim, dir) as ts_route names it, or -1 when the array has none. */
int ts_platform_link_index(const ts_platform *p, const ts_link_id *id);

/** Link i: identity (for a shared port, its lowest chip), SimGrid name, bandwidth, latency. */
const ts_link_id *ts_platform_link_id(const ts_platform *p, int i);
const char *ts_platform_link_name(const ts_platform *p, int i);
double ts_platform_link_bandwidth(const ts_platform *p, int i);
double ts_platform_link_latency(const ts_platform *p, int i);
/** "+", "-", "up" or "down". */
const char *ts_platform_link_direction(const ts_platform *p, int i);

/**
 * Appends the link indices (int) of the route from chip src to chip dst (ts_route's
 * dimension-order path) to out; returns FALSE if ts_route names a link the array lacks.
 */
gboolean ts_platform_route(const ts_platform *p, int src, int dst, GArray *out);

/** Whether some chips share a port (ts_platform_opts.chips_per_port). */
gboolean ts_platform_shared_ports(const ts_platform *p);

/** Longest route, in links (bounds route buffers). */
int ts_platform_max_route(const ts_platform *p);

/** SimGrid platform XML (version 4.1). Caller frees. Fails when the routing does not apply. */
char *ts_platform_xml(const ts_platform *p, ts_platform_routing routing, GError **error);

/** The routing TS_PLATFORM_AUTO picks for this platform. */
ts_platform_routing ts_platform_auto_routing(const ts_platform *p);

const char *ts_platform_routing_name(ts_platform_routing r);
/** Parses "auto", "torus", "full", "dijkstra", "floyd"; -1 if unknown. */
int ts_platform_routing_parse(const char *s);

/**
 * Builds the platform inside SimGrid (after ts_sg_init; once per process): hosts of
 * host_speed flop/s, links, and a zone routing along ts_platform_route.
 */
gboolean ts_platform_load(ts_platform *p, double host_speed, GError **error);

/**
 * Routes SimGrid asks for from now on go through fold: link i of ts_platform_route is replaced
 * by link fold[i] (borrowed; NULL: routes as they are). The simgrid backend's translation
 * folding (docs/backends.md, "Folding by translations") simulates on the quotient of a torus.
 */
void ts_platform_set_fold(ts_platform *p, const int *fold);

/** Host of chip after ts_platform_load. */
sg_host_t ts_platform_host(const ts_platform *p, int chip);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_platform, ts_platform_free)

G_END_DECLS

#endif
