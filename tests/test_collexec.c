/* test_collexec: the step executor on hand-written decompositions (ring all-reduce, swaps,
 * trees): sums, bytes sent, read-before-write semantics and rejected malformed steps. Plans
 * from ts_coll_decompose are run through it by the collective tests. */
#include "ts_collexec.h"
#include "ts_topo.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
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
        ts_xfer x = {.src = i,
                     .dst = (i + 1) % n,
                     .src_off = off,
                     .dst_off = off,
                     .count = len,
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

/* ---------------- real plans from ts_coll_decompose ---------------- */

static ts_topo *topo_from(const char *ini)
{
  g_autoptr(GKeyFile) kf = g_key_file_new();
  g_autoptr(GError) err = NULL;
  cr_assert(g_key_file_load_from_data(kf, ini, (gsize)-1, G_KEY_FILE_NONE, &err), "%s",
            err ? err->message : "");
  ts_topo *t = ts_topo_from_keyfile(kf, "<test>", &err);
  cr_assert_not_null(t, "%s", err ? err->message : "");
  return t;
}

static const char *const chip_ini = "[chip]\nname = c\npeak_tflops = 1\nmemory_GiB = 1\n"
                                    "memory_bandwidth_GBps = 1\n";

static char *dim_ini(const char *name, int size, const char *shape)
{
  return g_strdup_printf("[dim.%s]\nsize = %d\nshape = %s\nlink_bandwidth_GBps = 10\n"
                         "latency_us = 1\n",
                         name, size, shape);
}

/* Every (kind, algorithm) the decomposer accepts for the whole array, run on real buffers in
 * both precisions; results checked against each kind's definition, and bytes sent against
 * the plan's own count. Returns how many plans ran. */
static int run_all(const ts_topo *t, const char *label)
{
  int dims[TS_MAX_DIMS];
  for (int i = 0; i < t->ndims; i++)
    dims[i] = i;
  ts_group_shape g;
  ts_group_shape_dims(t, dims, t->ndims, &g);
  int n = ts_group_size(&g), runs = 0;
  ts_rng r;
  ts_rng_seed(&r, (guint64)n * 977);
  gint64 counts[] = {1, 2 * (gint64)n + 1, 6 * (gint64)n};
  for (int k = 0; k < TS_COLL_NKINDS; k++)
    for (int a = TS_ALGO_RING; a < TS_ALGO_NALGOS; a++)
      for (size_t c = 0; c < G_N_ELEMENTS(counts); c++)
        for (int pr = 0; pr < 2; pr++) {
          ts_prec prec = pr ? TS_PREC_F64 : TS_PREC_F32;
          gint64 count = counts[c];
          int esz = ts_prec_bytes(prec);
          g_autoptr(ts_coll_plan) p =
              ts_coll_decompose(t, (ts_coll_kind)k, (ts_coll_algo)a, &g, count, esz, NULL);
          if (p == NULL)
            continue; /* the algorithm does not apply here */
          void **before = g_new(void *, n), **after = g_new(void *, n);
          for (int m = 0; m < n; m++) {
            before[m] = g_malloc((gsize)esz * count);
            for (gint64 i = 0; i < count; i++) {
              double v = ts_rng_uniform(&r) * 2 - 1;
              if (prec == TS_PREC_F32)
                ((float *)before[m])[i] = (float)v;
              else
                ((double *)before[m])[i] = v;
            }
            after[m] = g_memdup2(before[m], (gsize)esz * count);
          }
          double *sent = g_new0(double, n);
          g_autoptr(GError) err = NULL;
          gboolean ok = ts_collexec_run(p, prec, n, count, after, sent, &err) &&
                        ts_collexec_check(p, (ts_coll_kind)k, prec, n, count, before, after,
                                          pr ? 1e-13 : 1e-6, &err);
          cr_expect(ok, "%s %s %s count %ld %s: %s", label, ts_coll_kind_name((ts_coll_kind)k),
                    ts_coll_algo_name((ts_coll_algo)a), (long)count, ts_prec_name(prec),
                    err ? err->message : "");
          for (int m = 0; m < n; m++) {
            double want = ts_coll_plan_bytes_sent(p, m), got = sent[m];
            cr_expect(fabs(got - want) <= 1e-9 * MAX(want, 1.0),
                      "%s %s %s member %d: executed %g bytes, plan says %g", label,
                      ts_coll_kind_name((ts_coll_kind)k), ts_coll_algo_name((ts_coll_algo)a), m,
                      got, want);
            g_free(before[m]);
            g_free(after[m]);
          }
          g_free(before), g_free(after), g_free(sent);
          runs++;
        }
  return runs;
}

Test(collexec, every_algorithm_on_rings_and_switches_of_many_sizes)
{
  int sizes[] = {1, 2, 3, 4, 5, 6, 7, 8};
  const char *shapes[] = {"ring", "mesh", "switch"};
  for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++)
    for (size_t h = 0; h < G_N_ELEMENTS(shapes); h++) {
      g_autofree char *d = dim_ini("x", sizes[s], shapes[h]);
      g_autofree char *ini = g_strconcat(chip_ini, d, NULL);
      ts_topo *t = topo_from(ini);
      g_autofree char *label = g_strdup_printf("%s of %d", shapes[h], sizes[s]);
      int runs = run_all(t, label);
      cr_expect(runs > 0, "%s: no algorithm ran", label);
      ts_topo_free(t);
    }
}

Test(collexec, every_algorithm_on_tori_and_hierarchies)
{
  const char *specs[][3] = {{"ring:2", "ring:3", NULL},
                            {"ring:4", "ring:4", NULL},
                            {"ring:2", "ring:2", "ring:2"},
                            {"switch:4", "switch:2", NULL},
                            {"mesh:3", "ring:2", "switch:2"}};
  const char *names[] = {"x", "y", "z"};
  for (size_t i = 0; i < G_N_ELEMENTS(specs); i++) {
    GString *ini = g_string_new(chip_ini);
    for (int d = 0; d < 3 && specs[i][d] != NULL; d++) {
      g_auto(GStrv) parts = g_strsplit(specs[i][d], ":", 2);
      g_autofree char *dd = dim_ini(names[d], atoi(parts[1]), parts[0]);
      g_string_append(ini, dd);
    }
    ts_topo *t = topo_from(ini->str);
    int runs = run_all(t, specs[i][0]);
    cr_expect(runs > 0);
    ts_topo_free(t);
    g_string_free(ini, TRUE);
  }
}
