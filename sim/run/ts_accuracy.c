/* ts_accuracy: measurement files replayed through trainsim (docs/accuracy.md). */
#include "ts_accuracy.h"
#include "ts_coll.h"
#include "ts_plan.h"
#include "ts_pool.h"
#include "ts_sweep.h"
#include "ts_util.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#define MEAS_MAX_BYTES (64 * 1024 * 1024)
#define MEAS_MAX_ROWS 1000000
#define GIB 1073741824.0

/* ---- reading ------------------------------------------------------------------------------ */

/* The measurement columns: name, metric, factor to SI, and the smallest value a measurement
 * can be, in the column's unit. A step time of 1e-300 s was read and its row's error printed
 * as a 47-digit percentage: a step under a microsecond, a bus bandwidth under 1 kB/s (the
 * shipped nccl-tests rows go down to 0.44 MB/s) or a peak under 1 MiB is not a measurement. */
static const struct {
  const char *name;
  ts_meas_metric metric;
  double to_si, lo;
} measures[] = {
    {"step_time_s", TS_MEAS_STEP_TIME, 1.0, 1e-6},
    /* calibrate --against's name (and the one validate -f csv writes): one file feeds both. */
    {"measured_step_time_s", TS_MEAS_STEP_TIME, 1.0, 1e-6},
    {"step_time_ms", TS_MEAS_STEP_TIME, 1e-3, 1e-3},
    {"busbw_GBps", TS_MEAS_BUSBW, 1.0, 1e-6},
    {"peak_memory_GiB", TS_MEAS_PEAK_MEMORY, GIB, 1.0 / 1024},
    {"peak_memory_GB", TS_MEAS_PEAK_MEMORY, 1e9, 1e-3},
    {"peak_memory_MiB", TS_MEAS_PEAK_MEMORY, 1048576.0, 1.0},
    {"peak_memory_bytes", TS_MEAS_PEAK_MEMORY, 1.0, 1048576.0},
    {"peak_activation_memory_sum_GiB", TS_MEAS_ACTIVATION_SUM, GIB, 1.0 / 1024},
    {"peak_activation_memory_sum_bytes", TS_MEAS_ACTIVATION_SUM, 1.0, 1048576.0},
};
#define MEASURES                                                                                   \
  "step_time_s, step_time_ms, measured_step_time_s, busbw_GBps, peak_memory_GiB, peak_memory_GB, " \
  "peak_memory_MiB, peak_memory_bytes, peak_activation_memory_sum_GiB or "                         \
  "peak_activation_memory_sum_bytes"

/* The configuration columns. */
enum {
  C_TOPO,
  C_VARY,
  C_MODEL,
  C_SPLIT,
  C_GB,
  C_MB,
  C_BUCKET,
  C_GROUP,
  C_COLL,
  C_SIZE,
  C_ALGO,
  C_N
};
static const char *const col_names[] = {"topology",     "vary",        "model",      "split",
                                        "global_batch", "micro_batch", "bucket_MiB", "group",
                                        "collective",   "size_bytes",  "algorithm"};

G_STATIC_ASSERT(G_N_ELEMENTS(col_names) == C_N);

const char *ts_meas_metric_name(ts_meas_metric m)
{
  return m == TS_MEAS_STEP_TIME     ? "step_time_s"
         : m == TS_MEAS_BUSBW       ? "busbw_GBps"
         : m == TS_MEAS_PEAK_MEMORY ? "peak_memory_bytes"
                                    : "peak_activation_memory_sum_bytes";
}

static void row_clear(ts_meas_row *r)
{
  g_free(r->group);
  g_free(r->topology);
  g_free(r->vary);
  g_free(r->model);
  g_free(r->split);
  g_free(r->collective);
}

void ts_meas_free(ts_meas_file *f)
{
  if (f == NULL)
    return;
  for (int i = 0; i < f->nrows; i++)
    row_clear(&f->rows[i]);
  g_free(f->rows);
  g_free(f->path);
  g_free(f->metric_column);
  g_free(f);
}

/* Splits one CSV line into fields (RFC 4180 quoting within the line). FALSE on an
 * unterminated quote or text after a closing quote. */
static gboolean csv_fields(const char *line, GPtrArray *out)
{
  const char *p = line;
  for (;;) {
    GString *f = g_string_new(NULL);
    if (*p == '"') {
      p++;
      for (;;) {
        if (*p == '\0') {
          g_string_free(f, TRUE);
          return FALSE;
        }
        if (*p == '"' && p[1] == '"') {
          g_string_append_c(f, '"');
          p += 2;
        } else if (*p == '"') {
          p++;
          break;
        } else {
          g_string_append_c(f, *p++);
        }
      }
      if (*p != ',' && *p != '\0') {
        g_string_free(f, TRUE);
        return FALSE;
      }
    } else {
      while (*p != ',' && *p != '\0')
        g_string_append_c(f, *p++);
    }
    g_ptr_array_add(out, g_strstrip(g_string_free(f, FALSE)));
    if (*p == '\0')
      return TRUE;
    p++; /* the comma */
  }
}

G_GNUC_PRINTF(5, 6)
static gboolean field_error(GError **error, const char *path, int line, const char *col,
                            const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  if (col != NULL)
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s:%d: column %s: %s", path, line, col, what);
  else
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s:%d: %s", path, line, what);
  return FALSE;
}

/* A whole number in [lo, hi] from a field. */
static gboolean field_int(const char *path, int line, const char *col, const char *v, gint64 lo,
                          gint64 hi, gint64 *out, GError **error)
{
  if (!ts_parse_int(v, lo, hi, out))
    return field_error(
        error, path, line, col,
        "'%s': expected a whole number in [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]", v, lo, hi);
  return TRUE;
}

/* A positive finite number up to hi. */
static gboolean field_pos(const char *path, int line, const char *col, const char *v, double hi,
                          double *out, GError **error)
{
  if (!ts_parse_double(v, out) || !(*out > 0) || !(*out <= hi))
    return field_error(error, path, line, col, "'%s': expected a number in (0, %g]", v, hi);
  return TRUE;
}

/* A measurement: a number in [lo, hi] of its column's unit. */
static gboolean field_measured(const char *path, int line, const char *col, const char *v,
                               double lo, double hi, double *out, GError **error)
{
  if (!ts_parse_double(v, out) || !(*out >= lo) || !(*out <= hi)) {
    char los[G_ASCII_DTOSTR_BUF_SIZE], his[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_formatd(los, sizeof los, "%g", lo);
    g_ascii_formatd(his, sizeof his, "%g", hi);
    return field_error(error, path, line, col, "'%s': expected a measurement in [%s, %s]", v, los,
                       his);
  }
  return TRUE;
}

ts_meas_file *ts_meas_load(const char *path, GError **error)
{
  GStatBuf st;
  if (g_stat(path, &st) != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: %s; expected a measurement CSV file", path,
                g_strerror(errno));
    return NULL;
  }
  if (!S_ISREG(st.st_mode) || st.st_size > MEAS_MAX_BYTES) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: %s; expected a regular measurement CSV file of at most 64 MiB", path,
                !S_ISREG(st.st_mode) ? "not a regular file" : "too large");
    return NULL;
  }
  g_autofree char *text = NULL;
  gsize len = 0;
  if (!g_file_get_contents(path, &text, &len, error))
    return NULL;
  if (memchr(text, '\0', len) != NULL || !g_utf8_validate(text, (gssize)len, NULL)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: not UTF-8 text; expected a CSV file", path);
    return NULL;
  }
  const char *body = g_str_has_prefix(text, "\xEF\xBB\xBF") ? text + 3 : text;
  g_auto(GStrv) lines = g_strsplit(body, "\n", -1);
  g_autofree char *base = g_path_get_basename(path);
  g_autofree char *stem =
      g_str_has_suffix(base, ".csv") ? g_strndup(base, strlen(base) - 4) : g_strdup(base);

  g_autoptr(ts_meas_file) f = g_new0(ts_meas_file, 1);
  f->path = g_strdup(path);
  int col[C_N], mcol = -1, ncols = 0, header_line = 0;
  double to_si = 1, meas_lo = 0;
  GArray *rows = g_array_new(FALSE, TRUE, sizeof(ts_meas_row));
  gboolean ok = TRUE;
  for (int i = 0; lines[i] != NULL && ok; i++) {
    int line = i + 1;
    char *l = lines[i];
    gsize n = strlen(l);
    if (n > 0 && l[n - 1] == '\r')
      l[n - 1] = '\0';
    const char *t = l;
    while (*t == ' ' || *t == '\t')
      t++;
    if (*t == '\0' || *t == '#')
      continue;
    g_autoptr(GPtrArray) fl = g_ptr_array_new_with_free_func(g_free);
    if (!csv_fields(l, fl)) {
      ok = field_error(error, path, line, NULL,
                       "unterminated or misplaced quote; expected CSV fields, \"quoted\" when "
                       "they hold commas");
      break;
    }
    if (header_line == 0) {
      header_line = line;
      ncols = (int)fl->len;
      for (int c = 0; c < C_N; c++)
        col[c] = -1;
      for (int k = 0; k < ncols && ok; k++) {
        const char *h = g_ptr_array_index(fl, k);
        const char *name = strcmp(h, "machine") == 0 ? "topology" : h;
        for (int c = 0; c < C_N; c++)
          if (strcmp(name, col_names[c]) == 0) {
            if (col[c] >= 0) {
              /* machine is topology's other name: "given twice" of a column given once read
               * as a typo. */
              const char *first = g_ptr_array_index(fl, col[c]);
              ok =
                  strcmp(h, first) != 0
                      ? field_error(error, path, line, h,
                                    "given with %s, its other name; expected one of them", first)
                      : field_error(error, path, line, h, "given twice; expected each column once");
            }
            col[c] = k;
          }
        gboolean known = FALSE;
        for (size_t m = 0; m < G_N_ELEMENTS(measures); m++)
          if (strcmp(h, measures[m].name) == 0) {
            known = TRUE;
            if (mcol >= 0)
              ok = field_error(error, path, line, h,
                               "a second measurement column (the first is %s); expected one "
                               "per file",
                               f->metric_column);
            mcol = k;
            f->metric = measures[m].metric;
            f->metric_column = g_strdup(h);
            to_si = measures[m].to_si;
            meas_lo = measures[m].lo;
          }
        gboolean looks = g_str_has_prefix(h, "step_time") ||
                         g_str_has_prefix(h, "measured_step_time") ||
                         g_str_has_prefix(h, "peak_memory") ||
                         g_str_has_prefix(h, "peak_activation") || g_str_has_prefix(h, "busbw");
        if (ok && looks && !known)
          ok = field_error(error, path, line, h, "unit not understood; expected one of " MEASURES);
      }
      if (!ok)
        break;
      if (mcol < 0) {
        ok = field_error(error, path, line, NULL,
                         "no measurement column; expected one of " MEASURES);
        break;
      }
      static const int need_cfg[] = {C_TOPO, C_MODEL, C_SPLIT, C_GB, C_MB};
      static const int need_bw[] = {C_TOPO, C_COLL, C_SIZE};
      const int *need = f->metric == TS_MEAS_BUSBW ? need_bw : need_cfg;
      int nneed = f->metric == TS_MEAS_BUSBW ? 3 : 5;
      for (int k = 0; k < nneed && ok; k++)
        if (col[need[k]] < 0)
          ok = field_error(error, path, line, col_names[need[k]],
                           "missing; a %s file needs columns %s", f->metric_column,
                           f->metric == TS_MEAS_BUSBW
                               ? "topology (or machine), collective, size_bytes"
                               : "topology (or machine), model, split, global_batch, "
                                 "micro_batch");
      continue;
    }
    if ((int)fl->len != ncols) {
      ok = field_error(error, path, line, NULL, "%u fields; expected %d (the header's, line %d)",
                       fl->len, ncols, header_line);
      break;
    }
    if (rows->len >= MEAS_MAX_ROWS) {
      ok = field_error(error, path, line, NULL, "more than %d rows; expected fewer", MEAS_MAX_ROWS);
      break;
    }
    ts_meas_row r = {0};
    r.line = line;
#define FIELD(c) (col[c] >= 0 ? (const char *)g_ptr_array_index(fl, col[c]) : "")
    const char *need_text[] = {"topology", "model", "split", "collective"};
    const int need_c[] = {C_TOPO, C_MODEL, C_SPLIT, C_COLL};
    for (int k = 0; k < 4 && ok; k++)
      if (col[need_c[k]] >= 0 && *FIELD(need_c[k]) == '\0' &&
          (f->metric != TS_MEAS_BUSBW) == (need_c[k] != C_COLL))
        ok = field_error(error, path, line, need_text[k], "empty; expected a value");
    if (ok) {
      r.topology = g_strdup(FIELD(C_TOPO));
      r.vary = *FIELD(C_VARY) != '\0' ? g_strdup(FIELD(C_VARY)) : NULL;
      r.group = *FIELD(C_GROUP) != '\0' ? g_strdup(FIELD(C_GROUP)) : g_strdup(stem);
      r.algo = TS_ALGO_AUTO;
      if (*FIELD(C_ALGO) != '\0' && (r.algo = ts_coll_algo_parse(FIELD(C_ALGO))) < 0)
        ok = field_error(error, path, line, "algorithm", "'%s': expected %s", FIELD(C_ALGO),
                         ts_coll_algo_list());
      double v = 0;
      if (ok && !field_measured(path, line, f->metric_column, g_ptr_array_index(fl, mcol), meas_lo,
                                1e18, &v, error))
        ok = FALSE;
      r.measured = v * to_si;
    }
    if (ok && f->metric != TS_MEAS_BUSBW) {
      r.model = g_strdup(FIELD(C_MODEL));
      r.split = g_strdup(FIELD(C_SPLIT));
      ok = field_int(path, line, "global_batch", FIELD(C_GB), 1, (gint64)1 << 40, &r.global_batch,
                     error) &&
           field_int(path, line, "micro_batch", FIELD(C_MB), 1, (gint64)1 << 40, &r.micro_batch,
                     error);
      if (ok && strcmp(FIELD(C_BUCKET), "none") == 0) {
        r.bucket_bytes = G_MAXDOUBLE; /* one bucket after the backward, as calibrate reads it */
      } else if (ok && *FIELD(C_BUCKET) != '\0') {
        double mib;
        ok = field_pos(path, line, "bucket_MiB", FIELD(C_BUCKET), 1048576.0, &mib, error);
        r.bucket_bytes = mib * 1048576.0;
      }
    } else if (ok) {
      r.collective = g_strdup(FIELD(C_COLL));
      ok = field_pos(path, line, "size_bytes", FIELD(C_SIZE), 1e15, &r.size_bytes, error);
      /* A fraction of a byte (0.5) was costed as a 0-byte collective: busbw 0, error -100%. */
      if (ok && r.size_bytes != floor(r.size_bytes))
        ok = field_error(error, path, line, "size_bytes",
                         "'%s': expected a whole number of bytes in [1, 1e15]", FIELD(C_SIZE));
    }
#undef FIELD
    if (ok)
      g_array_append_val(rows, r);
    else
      row_clear(&r);
  }
  if (ok && header_line == 0)
    ok = field_error(error, path, 1, NULL, "no header; expected a CSV header naming the columns");
  if (ok && rows->len == 0)
    ok = field_error(error, path, header_line, NULL,
                     "no rows after the header; expected at "
                     "least one measurement");
  f->nrows = (int)rows->len;
  f->rows = (ts_meas_row *)(void *)g_array_free(rows, FALSE);
  if (!ok)
    return NULL;
  return g_steal_pointer(&f);
}

/* ---- predicting --------------------------------------------------------------------------- */

void ts_accuracy_free(ts_accuracy *a)
{
  if (a == NULL)
    return;
  for (int i = 0; a->detail != NULL && i < a->file->nrows; i++)
    g_free(a->detail[i]);
  g_free(a->detail);
  g_free(a->predicted);
  g_free(a);
}

/* The row's topology with its what-ifs applied (owned by the cache; one copy per distinct
 * topology and what-ifs, kept in `varied`). */
static const ts_topo *row_topo(ts_inputs *c, GHashTable *varied, const ts_meas_file *f,
                               const ts_meas_row *r, const char *dir, GError **error)
{
  g_autoptr(GError) e = NULL;
  const ts_topo *t = ts_inputs_topo(c, r->topology, dir, &e);
  if (t == NULL)
    return field_error(error, f->path, r->line, "topology", "%s", e->message), NULL;
  if (r->vary == NULL)
    return t;
  g_autofree char *key = g_strdup_printf("%s\n%s", r->topology, r->vary);
  const ts_topo *seen = g_hash_table_lookup(varied, key);
  if (seen != NULL)
    return seen;
  g_auto(GStrv) items = g_strsplit(r->vary, ";", -1);
  g_autoptr(GHashTable) keys = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (char **it = items; *it != NULL; it++) {
    if (*g_strstrip(*it) == '\0')
      continue;
    ts_vary *v = ts_vary_parse(*it, &e);
    if (v != NULL && v->nvalues != 1) {
      g_set_error(&e, TS_ERROR, TS_ERROR_INPUT, "'%s': expected one value per key", *it);
      ts_vary_free(v);
      v = NULL;
    } else if (v != NULL && !g_hash_table_add(keys, g_strdup(v->key))) {
      /* As sweep refuses a second --vary of one key: the later value silently won (a size)
       * or compounded (two factors). */
      g_set_error(&e, TS_ERROR, TS_ERROR_INPUT, "'%s': key %s given twice; expected each once", *it,
                  v->key);
      ts_vary_free(v);
      v = NULL;
    }
    ts_topo *nt = v != NULL ? ts_vary_apply(v, 0, t, &e) : NULL;
    ts_vary_free(v);
    if (nt == NULL)
      return field_error(error, f->path, r->line, "vary", "%s", e->message), NULL;
    t = ts_inputs_adopt_topo(c, nt);
  }
  g_hash_table_insert(varied, g_steal_pointer(&key), (gpointer)t);
  return t;
}

ts_accuracy *ts_accuracy_run(const ts_meas_file *f, int jobs, const char *backend, GError **error)
{
  g_autoptr(ts_accuracy) a = g_new0(ts_accuracy, 1);
  a->file = f;
  a->predicted = g_new0(double, f->nrows);
  a->detail = g_new0(char *, f->nrows);
  ts_inputs *cache = ts_inputs_new();
  GHashTable *varied = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *dir = g_path_get_dirname(f->path);
  ts_config *cfg = g_new0(ts_config, f->nrows);
  int *idx = g_new0(int, f->nrows);
  int ncfg = 0;
  gboolean ok = TRUE;
  for (int i = 0; i < f->nrows && ok; i++) {
    const ts_meas_row *r = &f->rows[i];
    g_autoptr(GError) e = NULL;
    const ts_topo *t = row_topo(cache, varied, f, r, dir, error);
    if (t == NULL) {
      ok = FALSE;
      break;
    }
    if (f->metric == TS_MEAS_BUSBW) {
      int kind = ts_coll_kind_parse(r->collective);
      if (kind < 0) {
        ok = field_error(error, f->path, r->line, "collective",
                         "'%s': expected allreduce, reducescatter, allgather, alltoall or "
                         "broadcast",
                         r->collective);
        break;
      }
      int dims[TS_MAX_DIMS];
      for (int d = 0; d < t->ndims; d++)
        dims[d] = d;
      ts_group_shape shape;
      ts_group_shape_dims(t, dims, t->ndims, &shape);
      int n = ts_group_size(&shape);
      ts_coll_algo used = (ts_coll_algo)r->algo;
      double s = n > 1 ? ts_coll_time(t, (ts_coll_kind)kind, (ts_coll_algo)r->algo, &shape,
                                      r->size_bytes, &used, &e)
                       : -1;
      if (!(s > 0)) {
        ok = field_error(error, f->path, r->line, "topology", "%s",
                         e != NULL ? e->message : "one chip: expected a collective over 2 or more");
        break;
      }
      a->predicted[i] = r->size_bytes / s * ts_coll_busbw_factor((ts_coll_kind)kind, n) / 1e9;
      a->detail[i] = g_strdup(ts_coll_algo_name(used));
      continue;
    }
    const ts_model *m = ts_inputs_model(cache, r->model, dir, &e);
    if (m == NULL) {
      ok = field_error(error, f->path, r->line, "model", "%s", e->message);
      break;
    }
    g_autoptr(ts_split) sp = ts_split_parse(r->split, &e);
    if (sp == NULL) {
      ok = field_error(error, f->path, r->line, "split", "%s", e->message);
      break;
    }
    ts_plan_options po;
    ts_plan_options_default(&po);
    po.global_batch = r->global_batch;
    po.micro_batch = r->micro_batch;
    if (r->bucket_bytes > 0)
      po.bucket_bytes = r->bucket_bytes;
    po.algo = (ts_coll_algo)r->algo;
    if (f->metric == TS_MEAS_PEAK_MEMORY || f->metric == TS_MEAS_ACTIVATION_SUM) {
      g_autoptr(ts_plan) p = ts_plan_new(m, t, sp, &po, &e);
      if (p == NULL) {
        ok = field_error(error, f->path, r->line, "split", "'%s': %s", r->split, e->message);
        break;
      }
      a->predicted[i] = p->mem.total;
      if (f->metric == TS_MEAS_ACTIVATION_SUM) {
        a->predicted[i] = 0;
        for (int d = 0; d < p->degree[TS_AX_PP]; d++)
          a->predicted[i] += p->stage_mem[d].activations + p->stage_mem[d].temp +
                             p->stage_mem[d].gathered + p->stage_mem[d].pipeline +
                             p->stage_mem[d].allocator;
      }
      a->detail[i] = g_strdup(p->split_text);
      continue;
    }
    cfg[ncfg].model = m;
    cfg[ncfg].topo = t;
    cfg[ncfg].split = r->split;
    cfg[ncfg].po = po;
    cfg[ncfg].ro.backend = backend != NULL ? backend : "analytic";
    idx[ncfg] = ncfg;
    ncfg++;
  }
  if (ok && ncfg > 0) {
    ts_outcome *out = g_new0(ts_outcome, ncfg);
    ts_pool_options o = {jobs, TRUE, "validate"};
    ok = ts_pool_run(cfg, idx, ncfg, &o, out, error);
    for (int k = 0; k < ncfg; k++) {
      const ts_meas_row *r = &f->rows[k]; /* step-time files: every row is a configuration */
      if (ok && out[k].status != TS_OUTCOME_OK)
        ok = field_error(error, f->path, r->line, "split", "'%s': %s", r->split,
                         out[k].message != NULL ? out[k].message : "no prediction");
      if (ok) {
        a->predicted[k] = out[k].res.step_time_s;
        a->detail[k] = g_strdup(out[k].res.split);
      }
      ts_outcome_clear(&out[k]);
    }
    g_free(out);
  }
  g_free(cfg);
  g_free(idx);
  g_hash_table_unref(varied);
  ts_inputs_free(cache);
  if (!ok)
    return NULL;
  return g_steal_pointer(&a);
}

/* ---- statistics and outputs ------------------------------------------------------------ */

typedef struct {
  const char *name;
  int n;
  double mean_abs, median_abs, max_abs, mean; /* percent */
} group_stats;

static double err_pct(const ts_accuracy *a, int i)
{
  return 100.0 * (a->predicted[i] / a->file->rows[i].measured - 1.0);
}

static int cmp_double(gconstpointer x, gconstpointer y)
{
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* Stats of the rows of group g (NULL: every row). */
static group_stats stats_of(const ts_accuracy *a, const char *g)
{
  group_stats s = {g != NULL ? g : "all", 0, 0, 0, 0, 0};
  g_autoptr(GArray) abs_e = g_array_new(FALSE, FALSE, sizeof(double));
  for (int i = 0; i < a->file->nrows; i++) {
    if (g != NULL && strcmp(a->file->rows[i].group, g) != 0)
      continue;
    double e = err_pct(a, i), ae = fabs(e);
    g_array_append_val(abs_e, ae);
    s.mean += e;
    s.mean_abs += ae;
    s.max_abs = MAX(s.max_abs, ae);
  }
  s.n = (int)abs_e->len;
  if (s.n == 0)
    return s;
  s.mean /= s.n;
  s.mean_abs /= s.n;
  g_array_sort(abs_e, cmp_double);
  double *v = (double *)(void *)abs_e->data;
  s.median_abs = s.n % 2 ? v[s.n / 2] : 0.5 * (v[s.n / 2 - 1] + v[s.n / 2]);
  return s;
}

/* Group names in order of first appearance (borrowed strings). */
static GPtrArray *group_names(const ts_accuracy *a)
{
  GPtrArray *g = g_ptr_array_new();
  for (int i = 0; i < a->file->nrows; i++) {
    const char *n = a->file->rows[i].group;
    gboolean seen = FALSE;
    for (guint k = 0; k < g->len && !seen; k++)
      seen = strcmp(g_ptr_array_index(g, k), n) == 0;
    if (!seen)
      g_ptr_array_add(g, (gpointer)n);
  }
  return g;
}

static const char *fmt_value(char *buf, size_t n, ts_meas_metric m, double v)
{
  if (m == TS_MEAS_STEP_TIME)
    return ts_fmt_time(buf, n, v);
  if (m == TS_MEAS_PEAK_MEMORY || m == TS_MEAS_ACTIVATION_SUM)
    return ts_fmt_bytes(buf, n, v);
  g_ascii_formatd(buf, (gint)n, "%.1f", v);
  g_strlcat(buf, " GB/s", n);
  return buf;
}

static void fmt_pct(char *buf, size_t n, double v, gboolean sign)
{
  g_ascii_formatd(buf, (gint)n, sign ? "%+.1f" : "%.1f", v);
  g_strlcat(buf, "%", n);
}

/* Appends a table (NULL-terminated rows of ncol cells) with aligned columns. */
static void append_table(GString *s, GPtrArray *rows, int ncol, const gboolean *right)
{
  int w[16] = {0};
  for (guint i = 0; i < rows->len; i++) {
    char **r = g_ptr_array_index(rows, i);
    for (int c = 0; c < ncol; c++)
      w[c] = MAX(w[c], (int)g_utf8_strlen(r[c], -1));
  }
  for (guint i = 0; i < rows->len; i++) {
    char **r = g_ptr_array_index(rows, i);
    for (int c = 0; c < ncol; c++) {
      ts_append_cell(s, r[c], c + 1 < ncol ? w[c] : 0, right[c]);
      g_string_append(s, c + 1 < ncol ? "  " : "\n");
    }
  }
}

char *ts_accuracy_text(const ts_accuracy *a)
{
  const ts_meas_file *f = a->file;
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "%s: %d rows of %s, predicted vs measured\n", f->path, f->nrows,
                         f->metric_column);
  gboolean bw = f->metric == TS_MEAS_BUSBW;
  g_autoptr(GPtrArray) rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
  const int ncol = 7;
  const char *head[] = {"line",     "group",     "model", "split / collective",
                        "measured", "predicted", "error", NULL};
  g_ptr_array_add(rows, g_strdupv((char **)head));
  for (int i = 0; i < f->nrows; i++) {
    const ts_meas_row *r = &f->rows[i];
    char m[48], p[48], e[48], sz[48];
    char **row = g_new0(char *, ncol + 1);
    row[0] = g_strdup_printf("%d", r->line);
    row[1] = g_strdup(r->group);
    row[2] = g_strdup(bw ? r->topology : r->model);
    row[3] =
        bw ? g_strdup_printf("%s %s", r->collective, ts_fmt_bytes(sz, sizeof sz, r->size_bytes))
           : g_strdup(r->split);
    row[4] = g_strdup(fmt_value(m, sizeof m, f->metric, r->measured));
    row[5] = g_strdup(fmt_value(p, sizeof p, f->metric, a->predicted[i]));
    fmt_pct(e, sizeof e, err_pct(a, i), TRUE);
    row[6] = g_strdup(e);
    g_ptr_array_add(rows, row);
  }
  const gboolean right[] = {TRUE, FALSE, FALSE, FALSE, TRUE, TRUE, TRUE};
  append_table(s, rows, ncol, right);
  g_string_append_c(s, '\n');
  g_autoptr(GPtrArray) gs = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
  const char *ghead[] = {
      "group", "rows", "mean |error|", "median |error|", "max |error|", "mean error (bias)", NULL};
  g_ptr_array_add(gs, g_strdupv((char **)ghead));
  g_autoptr(GPtrArray) names = group_names(a);
  for (guint k = 0; k <= names->len; k++) {
    if (k == names->len && names->len == 1)
      break; /* one group: it is the whole file */
    group_stats st = stats_of(a, k < names->len ? g_ptr_array_index(names, k) : NULL);
    char b[4][48];
    fmt_pct(b[0], 48, st.mean_abs, FALSE);
    fmt_pct(b[1], 48, st.median_abs, FALSE);
    fmt_pct(b[2], 48, st.max_abs, FALSE);
    fmt_pct(b[3], 48, st.mean, TRUE);
    char **row = g_new0(char *, 7);
    row[0] = g_strdup(st.name);
    row[1] = g_strdup_printf("%d", st.n);
    for (int c = 0; c < 4; c++)
      row[2 + c] = g_strdup(b[c]);
    g_ptr_array_add(gs, row);
  }
  const gboolean gright[] = {FALSE, TRUE, TRUE, TRUE, TRUE, TRUE};
  append_table(s, gs, 6, gright);
  return g_string_free(s, FALSE);
}

static void csv_num(GString *s, double v)
{
  g_string_append_c(s, ',');
  ts_append_g(s, 10, v);
}

char *ts_accuracy_csv(const ts_accuracy *a)
{
  const ts_meas_file *f = a->file;
  const char *mn = ts_meas_metric_name(f->metric);
  GString *s = g_string_new(NULL);
  g_string_append_printf(s,
                         "line,group,topology,vary,model,split,global_batch,micro_batch,"
                         "collective,size_bytes,measured_%s,predicted_%s,error_pct,detail\n",
                         mn, mn);
  for (int i = 0; i < f->nrows; i++) {
    const ts_meas_row *r = &f->rows[i];
    g_string_append_printf(s, "%d,", r->line);
    const char *txt[] = {r->group, r->topology, r->vary, r->model, r->split};
    for (size_t k = 0; k < G_N_ELEMENTS(txt); k++) {
      ts_csv_append(s, txt[k] != NULL ? txt[k] : "");
      g_string_append_c(s, ',');
    }
    if (r->model != NULL)
      g_string_append_printf(s, "%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",", r->global_batch,
                             r->micro_batch);
    else
      g_string_append(s, ",,");
    ts_csv_append(s, r->collective != NULL ? r->collective : "");
    if (r->collective != NULL)
      csv_num(s, r->size_bytes);
    else
      g_string_append_c(s, ',');
    csv_num(s, r->measured);
    csv_num(s, a->predicted[i]);
    csv_num(s, err_pct(a, i));
    g_string_append_c(s, ',');
    ts_csv_append(s, a->detail[i] != NULL ? a->detail[i] : "");
    g_string_append_c(s, '\n');
  }
  return g_string_free(s, FALSE);
}

static void jnum(JsonBuilder *b, const char *k, double v)
{
  json_builder_set_member_name(b, k);
  json_builder_add_double_value(b, v);
}

static void jstr(JsonBuilder *b, const char *k, const char *v)
{
  json_builder_set_member_name(b, k);
  if (v != NULL)
    json_builder_add_string_value(b, v);
  else
    json_builder_add_null_value(b);
}

static void jstats(JsonBuilder *b, const group_stats *st)
{
  json_builder_begin_object(b);
  jstr(b, "group", st->name);
  json_builder_set_member_name(b, "rows");
  json_builder_add_int_value(b, st->n);
  jnum(b, "mean_abs_error_pct", st->mean_abs);
  jnum(b, "median_abs_error_pct", st->median_abs);
  jnum(b, "max_abs_error_pct", st->max_abs);
  jnum(b, "mean_error_pct", st->mean);
  json_builder_end_object(b);
}

char *ts_accuracy_json(const ts_accuracy *a)
{
  const ts_meas_file *f = a->file;
  const char *mn = ts_meas_metric_name(f->metric);
  g_autofree char *mk = g_strdup_printf("measured_%s", mn);
  g_autofree char *pk = g_strdup_printf("predicted_%s", mn);
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  jstr(b, "command", "validate --against");
  jstr(b, "file", f->path);
  jstr(b, "metric", mn);
  jstr(b, "measurement_column", f->metric_column);
  json_builder_set_member_name(b, "rows");
  json_builder_begin_array(b);
  for (int i = 0; i < f->nrows; i++) {
    const ts_meas_row *r = &f->rows[i];
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "line");
    json_builder_add_int_value(b, r->line);
    jstr(b, "group", r->group);
    jstr(b, "topology", r->topology);
    jstr(b, "vary", r->vary);
    if (r->model != NULL) {
      jstr(b, "model", r->model);
      jstr(b, "split", r->split);
      json_builder_set_member_name(b, "global_batch");
      json_builder_add_int_value(b, r->global_batch);
      json_builder_set_member_name(b, "micro_batch");
      json_builder_add_int_value(b, r->micro_batch);
    } else {
      jstr(b, "collective", r->collective);
      jnum(b, "size_bytes", r->size_bytes);
    }
    jnum(b, mk, r->measured);
    jnum(b, pk, a->predicted[i]);
    jnum(b, "error_pct", err_pct(a, i));
    jstr(b, "detail", a->detail[i]);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "groups");
  json_builder_begin_array(b);
  g_autoptr(GPtrArray) names = group_names(a);
  for (guint k = 0; k < names->len; k++) {
    group_stats st = stats_of(a, g_ptr_array_index(names, k));
    jstats(b, &st);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "all");
  group_stats all = stats_of(a, NULL);
  jstats(b, &all);
  json_builder_end_object(b);
  g_autoptr(JsonGenerator) gen = json_generator_new();
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  json_generator_set_root(gen, root);
  json_generator_set_pretty(gen, TRUE);
  char *text = json_generator_to_data(gen, NULL);
  char *out = g_strconcat(text, "\n", NULL);
  g_free(text);
  return out;
}

char *ts_accuracy_dat(const ts_accuracy *a, char **groups_out)
{
  const ts_meas_file *f = a->file;
  double scale =
      f->metric == TS_MEAS_PEAK_MEMORY || f->metric == TS_MEAS_ACTIVATION_SUM ? 1.0 / GIB : 1.0;
  GString *s = g_string_new(NULL);
  GString *g = g_string_new(NULL);
  g_autoptr(GPtrArray) names = group_names(a);
  for (guint k = 0; k < names->len; k++) {
    const char *name = g_ptr_array_index(names, k);
    g_string_append_printf(s, "%s# group %s: measured predicted\n", k ? "\n\n" : "", name);
    for (int i = 0; i < f->nrows; i++)
      if (strcmp(f->rows[i].group, name) == 0) {
        ts_append_g(s, 8, f->rows[i].measured * scale);
        g_string_append_c(s, ' ');
        ts_append_g(s, 8, a->predicted[i] * scale);
        g_string_append_c(s, '\n');
      }
    /* gnuplot's word() splits on spaces: a group's name as one word. */
    g_string_append_printf(g, "%s", k ? " " : "");
    for (const char *p = name; *p; p++)
      g_string_append_c(g, *p == ' ' || *p == '\'' || *p == '"' ? '_' : *p);
  }
  *groups_out = g_string_free(g, FALSE);
  return g_string_free(s, FALSE);
}
