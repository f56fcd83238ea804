/* ts_test: helpers shared by the test binaries (shipped inputs, running the program). Each
 * test binary includes this once; the functions are static so each binary has its copy. */
#ifndef TS_TEST_H
#define TS_TEST_H

#include "ts_model.h"
#include "ts_topo.h"

#include <criterion/criterion.h>
#include <glib.h>
#include <sys/wait.h>

/** A shipped topology (topologies/NAME.ini); the test fails if it does not load. */
static inline ts_topo *load_topo(const char *name)
{
  g_autofree char *path = g_strdup_printf("%s/topologies/%s.ini", TS_SOURCE_DIR, name);
  GError *err = NULL;
  ts_topo *t = ts_topo_load(path, &err);
  cr_assert_not_null(t, "%s", err ? err->message : "");
  return t;
}

/** A shipped model (models/NAME.ini); the test fails if it does not load. */
static inline ts_model *load_model(const char *name)
{
  g_autofree char *path = g_strdup_printf("%s/models/%s.ini", TS_SOURCE_DIR, name);
  GError *err = NULL;
  ts_model *m = ts_model_load(path, &err);
  cr_assert_not_null(m, "%s", err ? err->message : "");
  return m;
}

/** n chips on one ring dimension; a 1 TFLOP/s chip with fast memory and a host, in memory. */
static inline ts_topo *ring_topo(int n, double bw, double lat)
{
  ts_topo *t = g_new0(ts_topo, 1);
  t->name = g_strdup("ring");
  t->chip.name = g_strdup("chip");
  t->chip.peak_flops = 1e12;
  t->chip.compute_efficiency = 1.0;
  t->chip.memory_bw_Bps = 1e12;
  t->chip.memory_bytes = 1e12;
  t->chip.host_link_bw_Bps = 1e10;
  t->chip.host_memory_bytes = 1e13;
  t->chip.host_flops = 1e11;
  t->chip.nvme_bw_Bps = 1e9;
  t->chip.nvme_bytes = 1e14;
  t->ndims = 1;
  t->dims[0] = (ts_dim){.name = g_strdup("x"),
                        .size = n,
                        .shape = TS_SHAPE_RING,
                        .link_bw_Bps = bw,
                        .latency_s = lat};
  t->nchips = n;
  return t;
}

/** What one run of the trainsim program gave. */
typedef struct {
  int status; /* exit status, or 128 + signal */
  char *out, *err;
} run_result;

/** Runs `trainsim ARGS` (ARGS split as a shell would) and collects its outputs. */
static inline run_result run(const char *args)
{
  g_autofree char *line = g_strdup_printf("%s %s", TS_TRAINSIM_BIN, args);
  gchar **argv = NULL;
  GError *e = NULL;
  cr_assert(g_shell_parse_argv(line, NULL, &argv, &e), "%s", e ? e->message : "");
  run_result r = {0};
  int wait = 0;
  cr_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &r.out, &r.err, &wait, &e),
            "%s", e ? e->message : "");
  g_strfreev(argv);
  r.status = WIFEXITED(wait) ? WEXITSTATUS(wait) : 128 + WTERMSIG(wait);
  return r;
}

static inline void run_free(run_result *r)
{
  g_free(r->out);
  g_free(r->err);
}

/** The cell of column col in data row `row` (0 is the first after the header) of a CSV text
 * (quoted cells may hold commas), or NULL when the row or column is absent. Caller frees. */
static inline char *csv_cell(const char *csv, int row, const char *col)
{
  g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
  if ((int)g_strv_length(lines) <= row + 1)
    return NULL;
  const char *text[2] = {lines[0], lines[row + 1]};
  g_autoptr(GPtrArray) head = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) data = g_ptr_array_new_with_free_func(g_free);
  GPtrArray *cells[2] = {head, data};
  for (int l = 0; l < 2; l++) {
    g_autoptr(GString) cell = g_string_new(NULL);
    gboolean quoted = FALSE;
    for (const char *c = text[l];; c++) {
      if (*c == '"')
        quoted = !quoted;
      else if ((*c == ',' && !quoted) || *c == '\0') {
        g_ptr_array_add(cells[l], g_strdup(cell->str));
        g_string_truncate(cell, 0);
        if (*c == '\0')
          break;
      } else
        g_string_append_c(cell, *c);
    }
  }
  for (guint i = 0; i < head->len && i < data->len; i++)
    if (g_strcmp0(g_ptr_array_index(head, i), col) == 0)
      return g_strdup(g_ptr_array_index(data, i));
  return NULL;
}

#ifdef TS_TRACE_H
/** A trace on t (two chips) with its two programs joined by one pipeline axis, "pp" (axis 0:
 * rank 0 reaches rank 1 at offset 1, rank 1 rank 0 at offset -1), and no ops yet: the setup of
 * the engine's send and receive tests. For binaries that include ts_trace.h first. */
static inline ts_trace *pp2_trace(const ts_topo *t)
{
  ts_trace *tr = ts_trace_new(t);
  ts_group_shape pp = {1, {{0, 2, 1}}};
  ts_trace_add_axis(tr, "pp", 2, FALSE, &pp);
  ts_trace_set_programs(tr, 2);
  return tr;
}
#endif

#ifdef TS_PLAN_H
/** Split planned on model m and topology t (batch, micro-batch; other options default): the
 * plan, or NULL with *err set; the test fails if the split does not parse. For binaries that
 * include ts_plan.h first (make_plan and plan_refusal below). */
static inline ts_plan *plan_attempt(const ts_model *m, const ts_topo *t, const char *split,
                                    gint64 batch, gint64 micro, GError **err)
{
  g_autoptr(ts_split) s = ts_split_parse(split, err);
  cr_assert_not_null(s, "%s: %s", split, *err ? (*err)->message : "");
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  po.micro_batch = micro;
  return ts_plan_new(m, t, s, &po, err);
}

/** The plan of split on model m and topology t (batch, micro-batch; other options default); the
 * test fails if the split does not parse or plan. */
static inline ts_plan *make_plan(const ts_model *m, const ts_topo *t, const char *split,
                                 gint64 batch, gint64 micro)
{
  g_autoptr(GError) err = NULL;
  ts_plan *p = plan_attempt(m, t, split, batch, micro, &err);
  cr_assert_not_null(p, "%s: %s", split, err ? err->message : "");
  return p;
}

/** The error with which planning refuses split on m and t (batch, micro-batch; other options
 * default); the test fails if the split does not parse or if it plans. The caller frees it. */
static inline GError *plan_refusal(const ts_model *m, const ts_topo *t, const char *split,
                                   gint64 batch, gint64 micro)
{
  GError *err = NULL;
  ts_plan *p = plan_attempt(m, t, split, batch, micro, &err);
  cr_assert_null(p, "%s: planned, expected a refusal", split);
  cr_assert_not_null(err, "%s: refused without an error", split);
  return err;
}

/** The trace of plan p; the test fails if there is none. */
static inline ts_trace *trace_of(const ts_plan *p)
{
  g_autoptr(GError) err = NULL;
  ts_trace *tr = ts_plan_trace(p, &err);
  cr_assert_not_null(tr, "%s", err ? err->message : "");
  return tr;
}
#endif

#endif
