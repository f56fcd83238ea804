/* ts_coll_members: collectives over an explicit member list that is no regular shape of the
 * array (imported traces' process groups). The decomposition is the one for a ring of n
 * members; its transfers are placed on the members' chips, so both backends replay what the
 * trace's other collectives replay: the analytic time is the sum over steps of the slowest
 * transfer on its dimension-order route, the simgrid backend sends the same transfers as flows. */
#include "ts_coll_members.h"
#include "ts_coll_internal.h"
#include "ts_util.h"

#include <string.h>

ts_coll_plan *ts_coll_members_decompose(ts_coll_kind kind, ts_coll_algo algo, int n, gint64 count,
                                        GError **error)
{
  /* A ring of n chips standing for the members: only member indices matter here (the links
   * are placeholders; ts_coll_members_time costs each transfer on the members' own chips). */
  ts_array a = {.ndims = 1, .size = {n}, .name = {"members"}, .label = "member list"};
  ts_dim ring = {.size = n, .shape = TS_SHAPE_RING, .link_bw_Bps = 1.0};
  ts_group_shape g = {1, {{0, n, 1}}};
  if (algo == TS_ALGO_AUTO || algo == TS_ALGO_TORUS || algo == TS_ALGO_TORUS_DIMWISE ||
      algo == TS_ALGO_HIERARCHICAL)
    algo = TS_ALGO_RING;
  return ts_coll_decompose_array(&a, &ring, kind, algo, &g, count, 1.0, error);
}

double ts_coll_members_time(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                            const int *members, int n, double bytes, GError **error)
{
  if (n <= 1)
    return 0.0;
  if (!(bytes >= 0) || bytes > 9.0e15) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                "collective of %g bytes: expected a size in [0, 9e15] bytes", bytes);
    return -1;
  }
  g_autoptr(ts_coll_plan) p = ts_coll_members_decompose(kind, algo, n, (gint64)bytes, error);
  if (p == NULL)
    return -1;
  g_autoptr(GArray) xs = g_array_new(FALSE, FALSE, sizeof(ts_xfer));
  double total = 0;
  for (int s = 0; s < ts_coll_plan_nsteps(p); s++) {
    g_array_set_size(xs, 0);
    ts_coll_plan_step(p, s, xs);
    double step = 0;
    for (guint k = 0; k < xs->len; k++) {
      const ts_xfer *x = &g_array_index(xs, ts_xfer, k);
      double d = ts_p2p_time(t, members[x->src], members[x->dst], (double)x->count);
      if (d > step)
        step = d;
    }
    total += step;
  }
  return total;
}
