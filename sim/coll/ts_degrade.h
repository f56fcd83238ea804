/* ts_degrade: degraded arrays. Parses --fail (dead links, chips out) and --straggler (slow
 * chips, slow fabrics), checks them against the array (the link exists, the array stays
 * connected), and gives the backends what a fault costs: which collectives' lines cross a
 * dead link, the topology those collectives see, a chip's compute speed. */
#ifndef TS_DEGRADE_H
#define TS_DEGRADE_H

#include "ts_coll.h"
#include "ts_topo.h"

G_BEGIN_DECLS

/**
 * Applies --fail and --straggler strings (NULL-terminated arrays, either may be NULL) to t:
 * "link:DIM:C1,C2,..." (the link from the chip at those coordinates to its + neighbour along
 * DIM, both directions), "chip:ID" (out: the job shrinks by its data-parallel replica), "chip:ID=F"
 * (compute at F of nominal speed), "dim.NAME=F" (that dimension's links at F of their bandwidth).
 * One-line errors naming the option; a failure set that disconnects the array is refused.
 */
gboolean ts_degrade_apply_options(ts_topo *t, char **fails, char **stragglers, GError **error);

/** Adds one dead link (dimension d, from chip to its + neighbour); checks it exists. */
gboolean ts_degrade_add_link(ts_topo *t, int d, int chip, const char *option, GError **error);

/** Marks n dead links picked deterministically from seed among the array's ring and mesh
 * links, none disconnecting the array (for sweep --vary dead_links=N). */
gboolean ts_degrade_pick_links(ts_topo *t, int n, guint64 seed, GError **error);

/** Whether the live chips are connected (chips out excluded). */
gboolean ts_degrade_connected(const ts_topo *t);

/** Any fault that changes a replay (dead links, chips out, slow chips). */
gboolean ts_degrade_active(const ts_topo *t);

/** Whether the link from chip to its + neighbour along d is dead. */
gboolean ts_degrade_link_dead(const ts_topo *t, int d, int chip);

/**
 * Dimensions (bit d) along which the group of shape g with member 0 at base_chip crosses a
 * dead link: the group has a piece along d and one of its lines along d is the dead link's.
 */
guint ts_degrade_group_mask(const ts_topo *t, const ts_group_shape *g, int base_chip);

/** Dimensions whose dead links the dimension-order route from src to dst crosses. */
guint ts_degrade_route_mask(const ts_topo *t, int src_chip, int dst_chip);

/**
 * The topology a collective crossing dead links along the dimensions of mask sees: along
 * each, the detour's traffic shares a healthy link with that link's own traffic (bandwidth
 * halved) and adds the detour's hops to the hop it replaces: two hops of the fastest other
 * dimension on a torus, the long way round (n - 2 more hops) on a lone ring. Rings run in
 * lockstep, so every step waits for the detour hop. Caller frees.
 */
ts_topo *ts_degrade_topo(const ts_topo *t, guint mask);

/**
 * Rewrites a route (ts_link_id, from ts_route) around dead links: a dead hop becomes one hop
 * along a neighbouring dimension, the hop there, one hop back; on a lone ring, the long way
 * round. The SimGrid platform routes with it, so the detour shares links with their own
 * traffic and SimGrid resolves the contention.
 */
void ts_degrade_reroute(const ts_topo *t, GArray *links);

/** Compute speed of a chip as a fraction of nominal (1 unless a straggler). */
double ts_degrade_chip_speed(const ts_topo *t, int chip);

/** Picks the replay mode: degraded arrays need every rank (groups are no longer alike). */
gboolean ts_degrade_needs_full(const ts_topo *t);

/** "2 dead links, 1 chip out, 1 straggler" (caller frees); "" when healthy. */
char *ts_degrade_describe(const ts_topo *t);

G_END_DECLS

#endif
