/* test_collexec: the step executor on hand-written decompositions (ring all-reduce, swaps,
 * trees): sums, bytes sent, read-before-write semantics and rejected malformed steps. Plans
 * from ts_coll_decompose are run through it by the collective tests. */
#include "ts_collexec.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* Chunk c of a count-element buffer split into n nearly equal chunks. */
static void chunk(gint64 count, int n, int c, gint64 *off, gint64 *len)
{
  *off = count * c / n;
  *len = count * (c + 1) / n - *off;
}

/* Ring all-reduce (Patarasuk & Yuan 2009): n-1 reduce-scatter steps, member i sends chunk
 * (i - s) mod n to i + 1; then n-1 all-gather steps sending chunk (i + 1 - s) mod n. */
static gboolean ring_allreduce(ts_prec prec, int n, gint64 count, void **bufs, double *sent,
                               GError **error)
{
  GArray *xf = g_array_new(FALSE, FALSE, sizeof(ts_xfer));
  gboolean ok = TRUE;
  for (int phase = 0; phase < 2 && ok; phase++)
    for (int s = 0; s < n - 1 && ok; s++) {
      g_array_set_size(xf, 0);
      for (int i = 0; i < n; i++) {
        int c = ((i - s + (phase ? 1 : 0)) % n + n) % n;
        gint64 off, len;
        chunk(count, n, c, &off, &len);
        ts_xfer x = {.src = i, .dst = (i + 1) % n, .src_off = off, .dst_off = off, .count = len,
                     .op = phase ? TS_XFER_COPY : TS_XFER_REDUCE};
        g_array_append_val(xf, x);
      }
      ok = ts_collexec_step(prec, (ts_xfer *)xf->data, xf->len, n, count, bufs, sent, error);
    }
  g_array_free(xf, TRUE);
  return ok;
}

static void check_ring(ts_prec prec, int n, gint64 count)
{
  size_t esz = (size_t)ts_prec_bytes(prec);
  void **bufs = g_new(void *, n);
  double *want = g_new0(double, count), *sent = g_new0(double, n);
  for (int m = 0; m < n; m++) {
    bufs[m] = g_malloc(esz * (size_t)count);
    for (gint64 i = 0; i < count; i++) {
      /* Small integers: every partial sum is exact in both precisions, so order is moot. */
      double v = (double)((m * 31 + i * 7) % 17) - 8;
      want[i] += v;
      if (prec == TS_PREC_F32)
        ((float *)bufs[m])[i] = (float)v;
      else
        ((double *)bufs[m])[i] = v;
    }
  }
  g_autoptr(GError) err = NULL;
  gboolean ok = ring_allreduce(prec, n, count, bufs, sent, &err);
  cr_assert(ok, "%s", err ? err->message : "");
  for (int m = 0; m < n; m++)
    for (gint64 i = 0; i < count; i++) {
      double got = prec == TS_PREC_F32 ? ((float *)bufs[m])[i] : ((double *)bufs[m])[i];
      cr_assert(got == want[i], "n=%d member %d element %ld: %g, expected %g", n, m, (long)i, got,
                want[i]);
    }
  /* Each member sends every chunk but one in each phase: 2 (n-1)/n of the buffer when the
   * chunks are equal (Patarasuk & Yuan 2009, bandwidth-optimal). */
  if (count % n == 0)
    for (int m = 0; m < n; m++) {
      double expect = 2.0 * (n - 1) / n * (double)count * (double)esz;
      double got = sent[m];
      cr_expect_float_eq(got, expect, 1e-9, "n=%d member %d bytes sent", n, m);
    }
  for (int m = 0; m < n; m++)
    g_free(bufs[m]);
  g_free(bufs), g_free(want), g_free(sent);
}

Test(collexec, ring_allreduce_sums_for_many_sizes)
{
  int sizes[] = {1, 2, 3, 4, 5, 7, 8};
  for (size_t k = 0; k < G_N_ELEMENTS(sizes); k++) {
    check_ring(TS_PREC_F64, sizes[k], 56);
    check_ring(TS_PREC_F32, sizes[k], 56);
    check_ring(TS_PREC_F64, sizes[k], 13); /* uneven chunks */
  }
}

Test(collexec, sources_are_read_before_writes)
{
  /* A swap in one step: 0 -> 1 and 1 -> 0 of the same range must exchange the values. */
  double a[2] = {1, 2}, b[2] = {3, 4};
  void *bufs[2] = {a, b};
  ts_xfer xf[2] = {{0, 1, 0, 0, 2, TS_XFER_COPY}, {1, 0, 0, 0, 2, TS_XFER_COPY}};
  double sent[2] = {0, 0};
  cr_assert(ts_collexec_step(TS_PREC_F64, xf, 2, 2, 2, bufs, sent, NULL));
  cr_expect(a[0] == 3 && a[1] == 4 && b[0] == 1 && b[1] == 2);
  cr_expect(sent[0] == 16 && sent[1] == 16);
  /* Two children reducing into one parent in the same step is allowed (a tree level). */
  double p[1] = {1}, c1[1] = {10}, c2[1] = {100};
  void *tb[3] = {p, c1, c2};
  ts_xfer tree[2] = {{1, 0, 0, 0, 1, TS_XFER_REDUCE}, {2, 0, 0, 0, 1, TS_XFER_REDUCE}};
  cr_assert(ts_collexec_step(TS_PREC_F64, tree, 2, 3, 1, tb, NULL, NULL));
  cr_expect(p[0] == 111);
}

Test(collexec, malformed_steps_are_rejected_untouched)
{
  double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  void *bufs[2] = {a, b};
  struct {
    ts_xfer x[2];
    guint n;
    const char *needle;
  } cases[] = {
      {{{0, 2, 0, 0, 1, TS_XFER_COPY}}, 1, "outside [0, 2)"},
      {{{-1, 0, 0, 0, 1, TS_XFER_COPY}}, 1, "outside [0, 2)"},
      {{{0, 1, 3, 0, 2, TS_XFER_COPY}}, 1, "expected ranges in [0, 4)"},
      {{{0, 1, 0, 0, -1, TS_XFER_REDUCE}}, 1, "expected ranges"},
      {{{0, 1, 0, 0, 2, TS_XFER_COPY}, {0, 1, 2, 1, 2, TS_XFER_REDUCE}}, 2, "both write member 1"},
      {{{0, 1, 0, 1, 2, TS_XFER_REDUCE}, {0, 1, 0, 0, 2, TS_XFER_COPY}}, 2, "both write member 1"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) err = NULL;
    gboolean ok = ts_collexec_step(TS_PREC_F64, cases[i].x, cases[i].n, 2, 4, bufs, NULL, &err);
    cr_expect(!ok, "case %zu accepted", i);
    if (err != NULL)
      cr_expect(strstr(err->message, cases[i].needle) != NULL && !strchr(err->message, '\n'),
                "case %zu: %s", i, err->message);
    cr_expect(a[0] == 1 && a[3] == 4 && b[0] == 5 && b[3] == 8, "case %zu wrote", i);
  }
}
