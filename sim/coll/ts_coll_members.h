/* ts_coll_members: collectives over explicit member lists (groups that are no regular shape). */
#ifndef TS_COLL_MEMBERS_H
#define TS_COLL_MEMBERS_H

#include "ts_coll.h"

G_BEGIN_DECLS

/** Decomposition over n members in list order (auto, torus, hierarchical become a ring). */
ts_coll_plan *ts_coll_members_decompose(ts_coll_kind kind, ts_coll_algo algo, int n, gint64 count,
                                        GError **error);

/** Analytic time over members placed on chips: per step, the slowest transfer's route time. */
double ts_coll_members_time(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                            const int *members, int n, double bytes, GError **error);

G_END_DECLS

#endif
