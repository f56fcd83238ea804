/* ts_coll_memo: a collective's analytic time remembered across the many predictions of one
 * sweep or search, for the topologies that outlive it. */
#ifndef TS_COLL_MEMO_H
#define TS_COLL_MEMO_H

#include "ts_coll.h"

G_BEGIN_DECLS

/**
 * Starts remembering ts_coll_time results on these topologies (borrowed: the caller keeps
 * every one alive, unchanged, until ts_coll_memo_end). Nested calls add topologies; results
 * on other topologies are computed every time.
 */
void ts_coll_memo_begin(const ts_topo *const *topos, int n);

/** Forgets everything remembered since the outermost ts_coll_memo_begin. */
void ts_coll_memo_end(void);

/** ts_coll_time, remembered while the topology is registered: the same value and choice. */
double ts_coll_time_memo(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                         const ts_group_shape *g, double bytes, ts_coll_algo *chosen,
                         GError **error);

G_END_DECLS

#endif
