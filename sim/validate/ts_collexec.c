/* ts_collexec: one step of point-to-point transfers on real buffers (no dependency on how a
 * plan is made, so hand-written steps can test it). */
#include "ts_collexec.h"
#include "ts_util.h"

#include <stdlib.h>
#include <string.h>

/* A write range of a step, for the overlap check. */
typedef struct {
  int dst;
  gint64 off, end;
  guint index;
  ts_xfer_op op;
} write_range;

static int cmp_range(const void *a, const void *b)
{
  const write_range *x = a, *y = b;
  if (x->dst != y->dst)
    return x->dst < y->dst ? -1 : 1;
  if (x->off != y->off)
    return x->off < y->off ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

static gboolean check_xfers(const ts_xfer *xf, guint nx, int nmembers, gint64 count, GError **error)
{
  for (guint i = 0; i < nx; i++) {
    const ts_xfer *x = &xf[i];
    if (x->src < 0 || x->src >= nmembers || x->dst < 0 || x->dst >= nmembers) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "transfer %u (member %d -> %d): member outside [0, %d)", i, x->src, x->dst,
                  nmembers);
      return FALSE;
    }
    if (x->count < 0 || x->src_off < 0 || x->dst_off < 0 || x->src_off > count - x->count ||
        x->dst_off > count - x->count || (x->op != TS_XFER_COPY && x->op != TS_XFER_REDUCE)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "transfer %u (member %d -> %d): %" G_GINT64_FORMAT
                  " elements from %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT
                  ", op %d: expected ranges in [0, %" G_GINT64_FORMAT ") and op COPY or REDUCE",
                  i, x->src, x->dst, x->count, x->src_off, x->dst_off, (int)x->op, count);
      return FALSE;
    }
  }
  /* Sorted by (member, start), a range overlaps an earlier one iff it starts before the
   * furthest end seen so far; track that end over all ranges and over COPY ranges. */
  write_range *w = g_new(write_range, nx ? nx : 1);
  guint nw = 0;
  for (guint i = 0; i < nx; i++)
    if (xf[i].count > 0)
      w[nw++] = (write_range){xf[i].dst, xf[i].dst_off, xf[i].dst_off + xf[i].count, i, xf[i].op};
  qsort(w, nw, sizeof *w, cmp_range);
  gboolean ok = TRUE;
  gint64 end_any = 0, end_copy = 0;
  guint who_any = 0, who_copy = 0;
  for (guint i = 0; i < nw && ok; i++) {
    if (i == 0 || w[i].dst != w[i - 1].dst) {
      end_any = end_copy = 0;
    }
    guint other = G_MAXUINT;
    if (w[i].off < end_copy)
      other = who_copy;
    else if (w[i].op == TS_XFER_COPY && w[i].off < end_any)
      other = who_any;
    if (other != G_MAXUINT) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "transfers %u and %u both write member %d around element %" G_GINT64_FORMAT
                  " and one is a COPY: expected disjoint ranges within a step",
                  MIN(other, w[i].index), MAX(other, w[i].index), w[i].dst, w[i].off);
      ok = FALSE;
    }
    if (w[i].end > end_any) {
      end_any = w[i].end;
      who_any = w[i].index;
    }
    if (w[i].op == TS_XFER_COPY && w[i].end > end_copy) {
      end_copy = w[i].end;
      who_copy = w[i].index;
    }
  }
  g_free(w);
  return ok;
}

gboolean ts_collexec_step(ts_prec prec, const ts_xfer *xf, guint nx, int nmembers, gint64 count,
                          void *const *bufs, double *bytes_sent, GError **error)
{
  if (!check_xfers(xf, nx, nmembers, count, error))
    return FALSE;
  size_t esz = (size_t)ts_prec_bytes(prec);
  gint64 total = 0;
  for (guint i = 0; i < nx; i++)
    total += xf[i].count;
  /* Read phase: every source into scratch before any write, as concurrent sends would. */
  char *scratch = g_malloc(esz * (size_t)(total > 0 ? total : 1));
  gint64 at = 0;
  for (guint i = 0; i < nx; i++) {
    const char *src = (const char *)bufs[xf[i].src] + esz * (size_t)xf[i].src_off;
    memcpy(scratch + esz * (size_t)at, src, esz * (size_t)xf[i].count);
    at += xf[i].count;
    if (bytes_sent != NULL && xf[i].src != xf[i].dst)
      bytes_sent[xf[i].src] += (double)esz * (double)xf[i].count;
  }
  /* Write phase, in transfer order (REDUCE order is thus deterministic). */
  at = 0;
  for (guint i = 0; i < nx; i++) {
    const ts_xfer *x = &xf[i];
    char *dst = (char *)bufs[x->dst] + esz * (size_t)x->dst_off;
    const char *s = scratch + esz * (size_t)at;
    if (x->op == TS_XFER_COPY) {
      memcpy(dst, s, esz * (size_t)x->count);
    } else if (prec == TS_PREC_F32) {
      float *d = (float *)dst;
      const float *v = (const float *)s;
      for (gint64 j = 0; j < x->count; j++)
        d[j] += v[j];
    } else {
      double *d = (double *)dst;
      const double *v = (const double *)s;
      for (gint64 j = 0; j < x->count; j++)
        d[j] += v[j];
    }
    at += x->count;
  }
  g_free(scratch);
  return TRUE;
}
