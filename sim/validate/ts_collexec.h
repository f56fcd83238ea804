/* ts_collexec: executes collective decompositions (ts_coll.h) on real buffers, so the same
 * steps the backends time are checked to compute the right sums.
 *
 * A step's transfers are concurrent: every source range is read (copied to scratch) before any
 * destination is written, then REDUCE adds and COPY overwrites, in transfer order. Member
 * buffers are borrowed: bufs[m] holds `count` elements of member m. */
#ifndef TS_COLLEXEC_H
#define TS_COLLEXEC_H

#include "ts_coll.h"
#include "ts_numeric.h"
#include <glib.h>

G_BEGIN_DECLS

/**
 * Runs one step's nxfer transfers on buffers of float (TS_PREC_F32) or double (TS_PREC_F64).
 * bytes_sent (nmembers entries, may be NULL) is increased by the bytes each member sends to
 * another member (elements x 4 or 8; a transfer to itself is local and not counted).
 * Fails with TS_ERROR_INVALID, leaving the buffers untouched, when a transfer names a member
 * outside [0, nmembers) or a range outside [0, count), or when two transfers of the step write
 * overlapping ranges of one member and one of them is a COPY (the result would depend on
 * their order). The message names the transfer.
 */
gboolean ts_collexec_step(ts_prec prec, const ts_xfer *xfers, guint nxfer, int nmembers,
                          gint64 count, void *const *bufs, double *bytes_sent, GError **error);

/** Runs every step of plan p in order (ts_coll_plan_nsteps, ts_coll_plan_step); errors name
 *  the step. nmembers must be the group size the plan was decomposed for. */
gboolean ts_collexec_run(const ts_coll_plan *p, ts_prec prec, int nmembers, gint64 count,
                         void *const *bufs, double *bytes_sent, GError **error);

/**
 * Checks buffers after a collective of `kind` against its definition, given each member's
 * buffer before it: all-reduce, every element is the sum over members; reduce-scatter, member
 * m's shard (ts_coll_shard) holds the sum; all-gather, shard j of every member holds member
 * j's shard j; all-to-all, block i of member j is block j of member i (count / nmembers
 * elements per block, a tail past nmembers whole blocks unchanged); broadcast, every member holds
 * member 0's buffer. Sums are compared in double with relative tolerance rel_tol of the sum of
 * magnitudes. The error names kind, member, element, value and expectation.
 */
gboolean ts_collexec_check(const ts_coll_plan *p, ts_coll_kind kind, ts_prec prec, int nmembers,
                           gint64 count, void *const *before, void *const *after, double rel_tol,
                           GError **error);

G_END_DECLS

#endif
