/* ts_collexec_plan: runs a whole ts_coll_plan on real buffers and checks the result against
 * the collective's definition. */
#include "ts_collexec.h"
#include "ts_util.h"

#include <math.h>

gboolean ts_collexec_run(const ts_coll_plan *p, ts_prec prec, int nmembers, gint64 count,
                         void *const *bufs, double *bytes_sent, GError **error)
{
  g_autoptr(GArray) xf = g_array_new(FALSE, FALSE, sizeof(ts_xfer));
  int nsteps = ts_coll_plan_nsteps(p);
  for (int s = 0; s < nsteps; s++) {
    g_array_set_size(xf, 0);
    ts_coll_plan_step(p, s, xf);
    if (!ts_collexec_step(prec, (const ts_xfer *)xf->data, xf->len, nmembers, count, bufs,
                          bytes_sent, error)) {
      g_prefix_error(error, "collective step %d of %d: ", s, nsteps);
      return FALSE;
    }
  }
  return TRUE;
}

static double elem(ts_prec prec, void *const *bufs, int m, gint64 i)
{
  return prec == TS_PREC_F32 ? (double)((const float *)bufs[m])[i] : ((const double *)bufs[m])[i];
}

/* Compares got with want, within rel_tol of scale (the sum of the magnitudes summed). */
static gboolean expect(ts_coll_kind kind, int m, gint64 i, double got, double want, double scale,
                       double rel_tol, GError **error)
{
  if (fabs(got - want) <= rel_tol * scale && isfinite(got))
    return TRUE;
  g_autofree char *g = ts_dtostr(got);
  g_autofree char *w = ts_dtostr(want);
  g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
              "%s: member %d element %" G_GINT64_FORMAT " = %s; expected %s (tolerance %g of %g)",
              ts_coll_kind_name(kind), m, i, g, w, rel_tol, scale);
  return FALSE;
}

gboolean ts_collexec_check(const ts_coll_plan *p, ts_coll_kind kind, ts_prec prec, int nmembers,
                           gint64 count, void *const *before, void *const *after, double rel_tol,
                           GError **error)
{
  int n = nmembers;
  switch (kind) {
  case TS_COLL_ALLREDUCE:
  case TS_COLL_REDUCESCATTER:
    for (int m = 0; m < n; m++) {
      gint64 lo = 0, len = count;
      if (kind == TS_COLL_REDUCESCATTER)
        ts_coll_shard(p, m, &lo, &len);
      for (gint64 i = lo; i < lo + len; i++) {
        double want = 0, scale = 0;
        for (int j = 0; j < n; j++) {
          double v = elem(prec, before, j, i);
          want += v;
          scale += fabs(v);
        }
        if (!expect(kind, m, i, elem(prec, after, m, i), want, scale, rel_tol, error))
          return FALSE;
      }
    }
    return TRUE;
  case TS_COLL_ALLGATHER:
    for (int j = 0; j < n; j++) {
      gint64 lo, len;
      ts_coll_shard(p, j, &lo, &len);
      for (int m = 0; m < n; m++)
        for (gint64 i = lo; i < lo + len; i++) {
          double want = elem(prec, before, j, i);
          if (!expect(kind, m, i, elem(prec, after, m, i), want, fabs(want), 0, error))
            return FALSE;
        }
    }
    return TRUE;
  case TS_COLL_ALLTOALL: {
    /* Blocks of count / n elements; a tail past n whole blocks stays where it is. */
    gint64 blk = count / n;
    for (int j = 0; j < n; j++)
      for (gint64 i = 0; i < count; i++) {
        double want = i >= blk * n ? elem(prec, before, j, i)
                                   : elem(prec, before, (int)(i / blk), j * blk + i % blk);
        if (!expect(kind, j, i, elem(prec, after, j, i), want, fabs(want), 0, error))
          return FALSE;
      }
    return TRUE;
  }
  case TS_COLL_BROADCAST:
    for (int m = 0; m < n; m++)
      for (gint64 i = 0; i < count; i++) {
        double want = elem(prec, before, 0, i);
        if (!expect(kind, m, i, elem(prec, after, m, i), want, fabs(want), 0, error))
          return FALSE;
      }
    return TRUE;
  default:
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID, "collective kind %d: expected one of %d kinds",
                (int)kind, TS_COLL_NKINDS);
    return FALSE;
  }
}
