/* cmd_calibrate_against: `trainsim calibrate --against FILE.csv -o chip.ini` refits a chip
 * kind's compute parameters (ts_fit) to measured step times and writes the chip profile. */
#include "ts_cmd.h"
#include "ts_fit.h"
#include "ts_plan.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_CSV_BYTES (64 * 1024 * 1024) /* a measurement file, not a data lake */

enum { C_TOPO, C_MODEL, C_SPLIT, C_GB, C_MB, C_TIME, C_ALGO, C_BUCKET, C_SET, NCOLS };
static const char *const col_names[NCOLS] = {"topology",
                                             "model",
                                             "split",
                                             "global_batch",
                                             "micro_batch",
                                             "measured_step_time_s",
                                             "collective_algorithm",
                                             "bucket_MiB",
                                             "set"};
static const gboolean col_required[NCOLS] = {TRUE, TRUE,  TRUE,  TRUE, TRUE,
                                             TRUE, FALSE, FALSE, FALSE};

/* validate --against's names for the same columns, so that one measurement file feeds both
 * commands: its topology is also machine, its collective algorithm is algorithm, and its step
 * time is step_time_s or step_time_ms (seconds per unit in to_s). */
static const struct {
  int col;
  const char *name;
  double to_s;
} col_aliases[] = {{C_TOPO, "machine", 0},
                   {C_ALGO, "algorithm", 0},
                   {C_TIME, "measured_step_time_s", 1},
                   {C_TIME, "step_time_s", 1},
                   {C_TIME, "step_time_ms", 1e-3}};

/* One CSV line split into fields: commas separate, double quotes protect commas ("" is a
 * quote). FALSE on an unterminated quote. */
static gboolean csv_fields(const char *line, GPtrArray *out)
{
  GString *f = g_string_new(NULL);
  gboolean quoted = FALSE;
  for (const char *p = line;; p++) {
    if (quoted) {
      if (*p == '\0') {
        g_string_free(f, TRUE);
        return FALSE;
      }
      if (*p == '"' && p[1] == '"')
        g_string_append_c(f, '"'), p++;
      else if (*p == '"')
        quoted = FALSE;
      else
        g_string_append_c(f, *p);
      continue;
    }
    if (*p == '"') {
      quoted = TRUE;
    } else if (*p == ',' || *p == '\0') {
      g_ptr_array_add(out, g_strstrip(g_string_free(f, FALSE)));
      if (*p == '\0')
        return TRUE;
      f = g_string_new(NULL);
    } else if (*p != '\r') {
      g_string_append_c(f, *p);
    }
  }
}

/* A row of the file, planned and traced. */
typedef struct {
  int line;
  ts_topo *topo;
  ts_model *model;
  ts_plan *plan;
  ts_trace *trace;
  double measured_s;
  int set; /* 1 fit, 0 held out, -1 not given */
} crow;

static void crow_clear(crow *r)
{
  ts_trace_free(r->trace);
  ts_plan_free(r->plan);
  ts_model_free(r->model);
  ts_topo_free(r->topo);
}

/* A topology or model named in the file: a path relative to the file's folder when one
 * exists there, else a path or shipped name as everywhere else. */
static char *near(const char *dir, const char *name)
{
  g_autofree char *p = g_build_filename(dir, name, NULL);
  if (!g_path_is_absolute(name) && g_file_test(p, G_FILE_TEST_IS_REGULAR))
    return g_steal_pointer(&p);
  return g_strdup(name);
}

static gboolean row_error(GError **error, const char *file, int line, const char *col,
                          const char *fmt, ...) G_GNUC_PRINTF(5, 6);

static gboolean row_error(GError **error, const char *file, int line, const char *col,
                          const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s:%d: column %s: %s", file, line, col, msg);
  return FALSE;
}

static gboolean plan_row(const char *file, const char *dir, GPtrArray *f, const int *col,
                         const char *const *names, double time_to_s, int line, crow *r,
                         GError **error)
{
  r->line = line;
  g_autoptr(GError) e = NULL;
  g_autofree char *tname = near(dir, g_ptr_array_index(f, col[C_TOPO]));
  g_autofree char *mname = near(dir, g_ptr_array_index(f, col[C_MODEL]));
  r->topo = ts_cmd_load_topo(tname, NULL, &e);
  if (r->topo == NULL)
    return row_error(error, file, line, names[C_TOPO], "%s", e->message);
  r->model = ts_cmd_load_model(mname, NULL, &e);
  if (r->model == NULL)
    return row_error(error, file, line, "model", "%s", e->message);
  gint64 gb, mb;
  const char *v = g_ptr_array_index(f, col[C_GB]);
  if (!ts_parse_int(v, 1, 1 << 30, &gb))
    return row_error(error, file, line, "global_batch", "'%s': expected a whole number >= 1", v);
  v = g_ptr_array_index(f, col[C_MB]);
  if (!ts_parse_int(v, 1, 1 << 30, &mb))
    return row_error(error, file, line, "micro_batch", "'%s': expected a whole number >= 1", v);
  v = g_ptr_array_index(f, col[C_TIME]);
  /* As validate --against: 1e-300 s was fitted (a MAPE of 4e95%) and so was 1e300. */
  double t;
  if (!ts_parse_double(v, &t) || !(t * time_to_s >= 1e-6) || !(t * time_to_s <= 1e12))
    return row_error(error, file, line, names[C_TIME], "'%s': expected a step time in %s", v,
                     time_to_s == 1 ? "seconds in [1e-06, 1e+12]"
                                    : "milliseconds in [0.001, 1e+15]");
  r->measured_s = t * time_to_s;
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = gb;
  po.micro_batch = mb;
  if (col[C_ALGO] >= 0 && *(const char *)g_ptr_array_index(f, col[C_ALGO]) != '\0') {
    int a;
    if (!ts_cmd_algo(g_ptr_array_index(f, col[C_ALGO]), &a, &e))
      return row_error(error, file, line, names[C_ALGO], "%s", e->message);
    po.algo = (ts_coll_algo)a;
  }
  if (col[C_BUCKET] >= 0 && *(const char *)g_ptr_array_index(f, col[C_BUCKET]) != '\0') {
    v = g_ptr_array_index(f, col[C_BUCKET]);
    double mib;
    if (strcmp(v, "none") == 0)
      po.bucket_bytes = G_MAXDOUBLE;
    else if (ts_parse_double(v, &mib) && mib > 0 && isfinite(mib))
      po.bucket_bytes = mib * 1024 * 1024;
    else
      return row_error(error, file, line, "bucket_MiB",
                       "'%s': expected a gradient bucket in MiB > 0, or none (one bucket)", v);
  }
  r->set = -1;
  if (col[C_SET] >= 0) {
    v = g_ptr_array_index(f, col[C_SET]);
    if (strcmp(v, "fit") == 0)
      r->set = 1;
    else if (strcmp(v, "heldout") == 0)
      r->set = 0;
    else
      return row_error(error, file, line, "set", "'%s': expected fit or heldout", v);
  }
  const char *stext = g_ptr_array_index(f, col[C_SPLIT]);
  g_autoptr(ts_split) sp = ts_split_parse(stext, &e);
  if (sp == NULL)
    return row_error(error, file, line, "split", "%s", e->message);
  r->plan = ts_plan_new(r->model, r->topo, sp, &po, &e);
  if (r->plan == NULL)
    return row_error(error, file, line, "split", "%s", e->message);
  r->trace = ts_plan_trace(r->plan, &e);
  if (r->trace == NULL)
    return row_error(error, file, line, "split", "%s", e->message);
  return TRUE;
}

/* The file's rows, planned; every row on the same chip kind. */
static GArray *read_rows(const char *file, GError **error)
{
  /* Bounded, and never a device or FIFO (/dev/zero was read until memory ran out). */
  g_autofree char *text = NULL;
  gsize len = 0;
  if (!ts_read_input_file(file, MAX_CSV_BYTES, &text, &len, error)) {
    g_prefix_error(error, "--against ");
    return NULL;
  }
  /* As validate --against says it: random bytes read as a header "with no column topology". */
  if (memchr(text, '\0', len) != NULL || !g_utf8_validate(text, (gssize)len, NULL)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: not UTF-8 text; expected a CSV file", file);
    return NULL;
  }
  g_autofree char *dir = g_path_get_dirname(file);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  GArray *rows = g_array_new(FALSE, TRUE, sizeof(crow));
  g_array_set_clear_func(rows, (GDestroyNotify)crow_clear);
  int col[NCOLS], ncols = 0, header = 0, vary_col = -1;
  const char *names[NCOLS]; /* the header's name of each column (static) */
  double time_to_s = 1;
  for (int i = 0; lines[i] != NULL; i++) {
    char *l = lines[i];
    if (i == 0 && g_str_has_prefix(l, "\xEF\xBB\xBF"))
      l += 3; /* a UTF-8 byte-order mark */
    g_strstrip(l);
    if (*l == '\0' || *l == '#')
      continue;
    g_autoptr(GPtrArray) f = g_ptr_array_new_with_free_func(g_free);
    if (!csv_fields(l, f)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s:%d: unterminated quote; expected a closing quote", file, i + 1);
      g_array_unref(rows);
      return NULL;
    }
    if (header == 0) {
      header = i + 1;
      ncols = (int)f->len;
      for (int c = 0; c < NCOLS; c++) {
        col[c] = -1;
        names[c] = col_names[c];
      }
      for (guint k = 0; k < f->len; k++) {
        const char *h = g_ptr_array_index(f, k);
        int c = -1;
        const char *name = NULL; /* h's static twin: f is freed after the header */
        for (int j = 0; j < NCOLS && c < 0; j++)
          if (strcmp(h, col_names[j]) == 0)
            c = j, name = col_names[j];
        for (size_t j = 0; j < G_N_ELEMENTS(col_aliases) && c < 0; j++)
          if (strcmp(h, col_aliases[j].name) == 0) {
            c = col_aliases[j].col, name = col_aliases[j].name;
            if (c == C_TIME)
              time_to_s = col_aliases[j].to_s;
          }
        if (strcmp(h, "vary") == 0)
          vary_col = (int)k;
        if (c < 0)
          continue;
        if (col[c] >= 0) {
          if (strcmp(h, names[c]) == 0)
            g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                        "%s:%d: column %s: given twice; expected each column once", file, i + 1, h);
          else
            g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                        "%s:%d: column %s: given with %s; expected one of them", file, i + 1, h,
                        names[c]);
          g_array_unref(rows);
          return NULL;
        }
        col[c] = (int)k;
        names[c] = name;
      }
      for (int c = 0; c < NCOLS; c++) {
        if (col[c] < 0 && col_required[c]) {
          g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                      "%s:%d: no column %s; expected a header with topology, model, split, "
                      "global_batch, micro_batch, measured_step_time_s (or step_time_s or "
                      "step_time_ms) (optional: collective_algorithm, bucket_MiB, set)",
                      file, i + 1, col_names[c]);
          g_array_unref(rows);
          return NULL;
        }
      }
      continue;
    }
    if ((int)f->len != ncols) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s:%d: %u fields; expected %d as the header",
                  file, i + 1, f->len, ncols);
      g_array_unref(rows);
      return NULL;
    }
    /* validate applies a row's vary to its topology; a fit without it would fit another
     * machine. */
    if (vary_col >= 0 && *(const char *)g_ptr_array_index(f, vary_col) != '\0') {
      row_error(error, file, i + 1, "vary",
                "'%s': calibrate does not vary topologies; expected it empty (write the varied "
                "machine as a topology file)",
                (const char *)g_ptr_array_index(f, vary_col));
      g_array_unref(rows);
      return NULL;
    }
    crow r = {0};
    if (!plan_row(file, dir, f, col, names, time_to_s, i + 1, &r, error)) {
      crow_clear(&r);
      g_array_unref(rows);
      return NULL;
    }
    const crow *first = rows->len > 0 ? &g_array_index(rows, crow, 0) : NULL;
    if (first != NULL && strcmp(first->topo->chip.name, r.topo->chip.name) != 0) {
      row_error(error, file, i + 1, "topology",
                "chip '%s'; expected every row on one chip kind (line %d: '%s'): one profile "
                "per chip kind",
                r.topo->chip.name, first->line, first->topo->chip.name);
      crow_clear(&r);
      g_array_unref(rows);
      return NULL;
    }
    g_array_append_val(rows, r);
  }
  if (rows->len < 2) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--against %s: %u measured rows; expected at least 2 (a header, then rows)", file,
                rows->len);
    g_array_unref(rows);
    return NULL;
  }
  return rows;
}

/* A fixed random half: the first floor(n * fraction) of a Fisher-Yates shuffle by GLib's
 * Mersenne Twister seeded with seed (tests/test_published.c draws vTrain's halves the same
 * way). */
static void random_sets(GArray *rows, guint seed, double fraction)
{
  guint n = rows->len;
  guint *idx = g_new(guint, n);
  for (guint i = 0; i < n; i++)
    idx[i] = i;
  GRand *rng = g_rand_new_with_seed(seed);
  for (guint i = n; i > 1; i--) {
    guint j = (guint)g_rand_int_range(rng, 0, (gint32)i);
    guint t = idx[i - 1];
    idx[i - 1] = idx[j];
    idx[j] = t;
  }
  g_rand_free(rng);
  guint nfit = (guint)floor(n * fraction);
  if (nfit < 1)
    nfit = 1;
  for (guint i = 0; i < n; i++)
    g_array_index(rows, crow, idx[i]).set = i < nfit;
  g_free(idx);
}

static void fmt_key(GString *s, const char *key, double v, const char *note)
{
  char b[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append_printf(s, "%s = %s%s%s\n", key, g_ascii_formatd(b, sizeof b, "%.6g", v),
                         note != NULL ? "  # " : "", note != NULL ? note : "");
}

/* Progress of the fit on stderr: one line per round of the coordinate descent. */
static void fit_progress(int stage, int round, int nrows, const ts_fit_point *x, double mape,
                         int evals, void *user)
{
  (void)user;
  fprintf(stderr, "  %s round %d on %d rows: MAPE %.2f%% (", stage == 1 ? "coarse" : "refine",
          round, nrows, 100 * mape);
  for (int p = 0; p < TS_FIT_NPARAMS; p++)
    fprintf(stderr, "%s%s %.4g", p > 0 ? ", " : "", ts_fit_param_key(p),
            ts_fit_param_file_value(p, x->v[p]));
  fprintf(stderr, "), %d evaluations\n", evals);
}

int ts_calibrate_against(const char *file, const char *output, guint seed, double fraction,
                         const char *cmdline, gboolean quiet)
{
  g_autoptr(GError) error = NULL;
  if (output == NULL) {
    g_set_error(&error, TS_ERROR, TS_ERROR_INPUT,
                "--against %s: no -o FILE.ini; expected the chip profile to write", file);
    return ts_cmd_fail("calibrate", error);
  }
  if (!(fraction > 0 && fraction <= 1)) {
    g_set_error(&error, TS_ERROR, TS_ERROR_INPUT,
                "--fit-fraction %g: expected the share of rows fitted, in (0, 1]", fraction);
    return ts_cmd_fail("calibrate", error);
  }
  g_autofree char *how = NULL;
  GArray *rows = read_rows(file, &error);
  if (rows == NULL)
    return ts_cmd_fail("calibrate", error);
  gboolean given = g_array_index(rows, crow, 0).set >= 0;
  if (!given)
    random_sets(rows, seed, fraction);
  int n = (int)rows->len, nfit = 0, nheld = 0;
  ts_fit_row *fit = g_new(ts_fit_row, n), *held = g_new(ts_fit_row, n);
  for (int i = 0; i < n; i++) {
    crow *r = &g_array_index(rows, crow, i);
    ts_fit_row fr = {r->topo, r->trace, r->measured_s};
    if (r->set == 1)
      fit[nfit++] = fr;
    else
      held[nheld++] = fr;
  }
  const ts_chip *c0 = &g_array_index(rows, crow, 0).topo->chip;
  ts_fit_point start, best;
  ts_fit_get(c0, &start);
  if (!quiet)
    fprintf(stderr, "trainsim calibrate: fitting %d of %d rows (%s)...\n", nfit, n,
            given ? "the file's set column" : "a fixed random share");
  guint mask = (1u << TS_FIT_NPARAMS) - 1;
  int status = 0;
  if (nfit == 0 || !ts_fit_minimise_ex(fit, nfit, &start, mask, quiet ? NULL : fit_progress, NULL,
                                       &best, &error)) {
    if (error == NULL)
      g_set_error(&error, TS_ERROR, TS_ERROR_INPUT, "--against %s: no row in the fitting set",
                  file);
    status = ts_cmd_fail("calibrate", error);
    goto out;
  }
  double m_fit = ts_fit_mape(fit, nfit, &best, NULL, NULL);
  double m_held = nheld > 0 ? ts_fit_mape(held, nheld, &best, NULL, NULL) : NAN;
  double m_start = ts_fit_mape(fit, nfit, &start, NULL, NULL);
  GString *s = g_string_new(NULL);
  char b1[G_ASCII_DTOSTR_BUF_SIZE], b2[G_ASCII_DTOSTR_BUF_SIZE];
  how = given ? g_strdup("the file's set column") : g_strdup_printf("random share, seed %u", seed);
  g_string_append_printf(
      s,
      "# Chip profile written by `%s` (trainsim %s).\n"
      "# Fitted to %s: %d of %d rows (%s), MAPE %s%% on them; held-out rows: %d, MAPE %s%%.\n"
      "# Rates and sizes are the first row's topology's; the fitted keys are marked.\n\n[chip]\n",
      cmdline, TS_VERSION, file, nfit, n, how, g_ascii_formatd(b1, sizeof b1, "%.2f", 100 * m_fit),
      nheld, nheld > 0 ? g_ascii_formatd(b2, sizeof b2, "%.2f", 100 * m_held) : "-");
  g_string_append_printf(s, "name = %s\n", c0->name);
  fmt_key(s, "peak_tflops_bf16", c0->peak_flops / 1e12, NULL);
  if (c0->peak_flops_fp8 > 0)
    fmt_key(s, "peak_tflops_fp8", c0->peak_flops_fp8 / 1e12, NULL);
  if (c0->peak_flops_fp32 > 0)
    fmt_key(s, "peak_tflops_fp32", c0->peak_flops_fp32 / 1e12, NULL);
  fmt_key(s, "memory_GiB", c0->memory_bytes / 1073741824.0, NULL);
  fmt_key(s, "memory_bandwidth_GBps", c0->memory_bw_Bps / 1e9, NULL);
  if (c0->compute_units > 0)
    g_string_append_printf(s, "compute_units = %d\n", c0->compute_units);
  if (c0->tile_m > 0)
    g_string_append_printf(s, "gemm_tile = %dx%d\n", c0->tile_m, c0->tile_n);
  if (c0->systolic > 0)
    g_string_append_printf(s, "systolic_array = %d\n", c0->systolic);
  if (c0->op_overhead_s > 0)
    fmt_key(s, "op_overhead_us", c0->op_overhead_s * 1e6, NULL);
  for (int p = 0; p < TS_FIT_NPARAMS; p++)
    fmt_key(s, ts_fit_param_key(p), ts_fit_param_file_value(p, best.v[p]), "fitted");
  g_string_append(s, "calibrated = true\n");
  if (!ts_write_file_atomic(output, s->str, s->len, &error)) {
    g_string_free(s, TRUE);
    status = ts_cmd_fail("calibrate", error);
    goto out;
  }
  g_string_free(s, TRUE);
  printf("%s: %d rows on %s\n", file, n, c0->name);
  for (int p = 0; p < TS_FIT_NPARAMS; p++)
    printf("  %-28s %12.6g  (start %.6g)\n", ts_fit_param_key(p),
           ts_fit_param_file_value(p, best.v[p]), ts_fit_param_file_value(p, start.v[p]));
  printf("fitting rows:  %5d  MAPE %6.2f%%  (at the start %.2f%%)\n", nfit, 100 * m_fit,
         100 * m_start);
  if (nheld > 0)
    printf("held-out rows: %5d  MAPE %6.2f%%\n", nheld, 100 * m_held);
  fflush(stdout); /* the fit summary (results) first, then the note, as run does */
  fprintf(stderr, "trainsim calibrate: wrote %s\n", output);
out:
  g_free(fit);
  g_free(held);
  g_array_unref(rows);
  return status;
}
