/* ts_sweep: input cache, hardware what-ifs (--vary), automatic split enumeration. */
#include "ts_sweep.h"
#include "ts_capacity.h"
#include "ts_degrade.h"
#include "ts_progress.h"
#include "ts_util.h"

#include <math.h>
#include <string.h>

/* ---- inputs loaded once ----------------------------------------------------------------- */

struct ts_inputs {
  GHashTable *models; /* resolved path -> ts_model* */
  GHashTable *topos;  /* resolved path -> ts_topo* */
  GPtrArray *adopted; /* ts_topo* what-if copies */
};

ts_inputs *ts_inputs_new(void)
{
  ts_inputs *c = g_new0(ts_inputs, 1);
  c->models = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)ts_model_free);
  c->topos = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)ts_topo_free);
  c->adopted = g_ptr_array_new_with_free_func((GDestroyNotify)ts_topo_free);
  return c;
}

void ts_inputs_free(ts_inputs *c)
{
  if (c == NULL)
    return;
  g_hash_table_unref(c->models);
  g_hash_table_unref(c->topos);
  g_ptr_array_unref(c->adopted);
  g_free(c);
}

/* A relative path is looked for beside the file that names it first (scenario files keep
 * their own topologies next to them), then as trainsim resolves any name. */
static char *resolve(const char *name, const char *dir, const char *rel_dir, GError **error)
{
  if (rel_dir != NULL && name != NULL && *name != '\0' && !g_path_is_absolute(name)) {
    char *p = g_build_filename(rel_dir, name, NULL);
    if (g_file_test(p, G_FILE_TEST_IS_REGULAR))
      return p;
    g_free(p);
  }
  return ts_resolve_data_file(name, dir, error);
}

const ts_model *ts_inputs_model(ts_inputs *c, const char *name, const char *rel_dir, GError **error)
{
  g_autofree char *path = resolve(name, "models", rel_dir, error);
  if (path == NULL)
    return NULL;
  ts_model *m = g_hash_table_lookup(c->models, path);
  if (m == NULL) {
    m = ts_model_load(path, error);
    if (m == NULL)
      return NULL;
    g_hash_table_insert(c->models, g_steal_pointer(&path), m);
  }
  return m;
}

const ts_topo *ts_inputs_topo(ts_inputs *c, const char *name, const char *rel_dir, GError **error)
{
  g_autofree char *path = resolve(name, "topologies", rel_dir, error);
  if (path == NULL)
    return NULL;
  ts_topo *t = g_hash_table_lookup(c->topos, path);
  if (t == NULL) {
    t = ts_topo_load(path, error);
    if (t == NULL)
      return NULL;
    g_hash_table_insert(c->topos, g_steal_pointer(&path), t);
  }
  return t;
}

const ts_topo *ts_inputs_adopt_topo(ts_inputs *c, ts_topo *t)
{
  g_ptr_array_add(c->adopted, t);
  return t;
}

void ts_config_report_inputs(const ts_config *c, ts_report_inputs *in)
{
  memset(in, 0, sizeof *in);
  in->model_name = g_strdup(c->model->name);
  in->model_path = g_strdup(c->model->path);
  in->topology_name = g_strdup(c->topo->name);
  in->topology_path = g_strdup(c->topo->path);
  in->topology_desc = ts_topo_describe(c->topo);
  in->backend = g_strdup(c->ro.backend != NULL ? c->ro.backend : "analytic");
  in->network_model = ts_run_network_model(&c->ro);
  in->collective_algorithm = g_strdup(ts_coll_algo_name(c->po.algo));
  in->global_batch = c->po.global_batch;
  in->micro_batch = c->po.micro_batch;
}

/* ---- hardware what-ifs ------------------------------------------------------------------- */

void ts_vary_free(ts_vary *v)
{
  if (v == NULL)
    return;
  g_free(v->text);
  g_free(v->key);
  g_free(v->column);
  g_free(v->values);
  g_strfreev(v->shapes);
  g_free(v);
}

static const char *const chip_keys[] = {"peak_tflops",           "memory_GiB",
                                        "memory_bandwidth_GBps", "compute_efficiency",
                                        "flash_efficiency",      "flash_efficiency_triton",
                                        "flash_efficiency_fa1",  NULL};
static const char *const dim_keys[] = {"link_bandwidth_GBps", "latency_us", "size", NULL};

static gboolean in_list(const char *const *l, const char *s)
{
  for (; *l != NULL; l++)
    if (strcmp(*l, s) == 0)
      return TRUE;
  return FALSE;
}

/* The ranges the topology reader (model/ts_topo.c) accepts for each key a --vary sets, in the
 * key's unit: an absolute value or a factor's result outside them is refused, as in a file. */
typedef struct {
  const char *suffix, *what;
  double min, max; /* min: the lowest positive value (TOPO_MIN_RATE, TOPO_MIN_FRACTION) */
  gboolean zero_ok;
} vary_range;

static const vary_range vary_ranges[] = {
    {"peak_tflops", "a peak in TFLOP/s", 1e-3, 1e6, FALSE},
    {"memory_GiB", "a capacity in GiB", 0, 1e9, FALSE},
    {"memory_bandwidth_GBps", "a bandwidth in GB/s", 1e-3, 1e6, FALSE},
    {"compute_efficiency", "a fraction", 1e-3, 1, FALSE},
    {"flash_efficiency", "a fraction", 1e-3, 1, TRUE},
    /* 0 is the file's "not given": the split's attn-kernel would then find no rate. */
    {"flash_efficiency_triton", "a fraction", 1e-3, 1, FALSE},
    {"flash_efficiency_fa1", "a fraction", 1e-3, 1, FALSE},
    {"link_bandwidth_GBps", "a bandwidth in GB/s", 1e-3, 1e6, FALSE},
    {"latency_us", "a latency in us", 0, 1e6, TRUE},
};

static const vary_range *range_of(const char *key)
{
  const char *dot = strrchr(key, '.');
  const char *last = dot != NULL ? dot + 1 : key;
  for (size_t i = 0; i < G_N_ELEMENTS(vary_ranges); i++)
    if (strcmp(last, vary_ranges[i].suffix) == 0)
      return &vary_ranges[i];
  return NULL;
}

static gboolean in_range(const vary_range *r, double v)
{
  return r == NULL || ((v > 0 && v >= r->min && v <= r->max) || (r->zero_ok && v == 0));
}

static void range_text(const vary_range *r, char *buf, size_t n)
{
  char min[G_ASCII_DTOSTR_BUF_SIZE], max[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_formatd(min, sizeof min, "%g", r->min);
  g_ascii_formatd(max, sizeof max, "%g", r->max);
  if (r->min > 0)
    g_snprintf(buf, n, "%s in [%s, %s]%s", r->what, min, max, r->zero_ok ? " or 0" : "");
  else
    g_snprintf(buf, n, "%s in %s0, %s]", r->what, r->zero_ok ? "[" : "(", max);
}

#define VARY_KEYS                                                                                  \
  "peak_tflops, memory_GiB, memory_bandwidth_GBps, compute_efficiency, flash_efficiency, "         \
  "flash_efficiency_triton, flash_efficiency_fa1, "                                                \
  "link_bandwidth_GBps, latency_us, dim.NAME.link_bandwidth_GBps, dim.NAME.latency_us, "           \
  "dim.NAME.size, dims, "                                                                          \
  "dead_links, straggler or straggler_per_node"

/* Parses "16x16" or "8x4x2": sizes of every dimension, fastest first. */
static gboolean parse_shape(const char *s, int *sizes, int *n)
{
  g_auto(GStrv) parts = g_strsplit(s, "x", -1);
  *n = 0;
  for (char **p = parts; *p != NULL; p++) {
    gint64 v;
    if (*n >= TS_MAX_DIMS || !ts_parse_int(*p, 1, 65536, &v))
      return FALSE;
    sizes[(*n)++] = (int)v;
  }
  return *n > 0;
}

ts_vary *ts_vary_parse(const char *text, GError **error)
{
  const char *eq = text != NULL ? strchr(text, '=') : NULL;
  if (eq == NULL || eq == text || eq[1] == '\0') {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--vary '%s': expected KEY=V1,V2,... with values or xFACTORs, e.g. "
                "link_bandwidth_GBps=x0.5,x1,x2",
                text ? text : "");
    return NULL;
  }
  g_autoptr(ts_vary) v = g_new0(ts_vary, 1);
  v->text = g_strdup(text);
  v->key = g_strndup(text, (gsize)(eq - text));
  gboolean dims = strcmp(v->key, "dims") == 0;
  /* Degraded arrays (issue 14): dead_links=N picks N dead ring/mesh links (seeded, never
   * disconnecting), straggler=F slows chip 0 to F of its speed. */
  gboolean dead = strcmp(v->key, "dead_links") == 0;
  gboolean strag = strcmp(v->key, "straggler") == 0 || strcmp(v->key, "straggler_per_node") == 0;
  gboolean ok = dims || dead || strag || in_list(chip_keys, v->key) ||
                strcmp(v->key, "link_bandwidth_GBps") == 0 || strcmp(v->key, "latency_us") == 0;
  if (!ok && g_str_has_prefix(v->key, "dim.")) {
    const char *dot = strrchr(v->key, '.');
    ok = dot > v->key + 4 && in_list(dim_keys, dot + 1);
  }
  if (!ok) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--vary '%s': unknown key '%s'; expected %s", text,
                v->key, VARY_KEYS);
    return NULL;
  }
  g_auto(GStrv) vals = g_strsplit(eq + 1, ",", -1);
  v->nvalues = (int)g_strv_length(vals);
  v->values = g_new0(double, v->nvalues);
  if (dims)
    v->shapes = g_new0(char *, v->nvalues + 1);
  gboolean is_size = g_str_has_suffix(v->key, ".size");
  int nscale = 0;
  for (int i = 0; i < v->nvalues; i++) {
    const char *s = g_strstrip(vals[i]);
    if (dims) {
      int sizes[TS_MAX_DIMS], n;
      if (!parse_shape(s, sizes, &n)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--vary '%s': shape '%s': expected sizes of every dimension joined by 'x', "
                    "each a whole number in [1, 65536], e.g. 16x16",
                    text, s);
        return NULL;
      }
      v->shapes[i] = g_strdup(s);
      continue;
    }
    if (dead || strag) {
      double d = 0;
      gint64 whole;
      gboolean good = dead ? ts_parse_int(s, 0, TS_MAX_FAULTS, &whole) && (d = (double)whole, TRUE)
                           : ts_parse_double(s, &d) && d >= 1e-3 && d <= 1;
      if (!good) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--vary '%s': value '%s': expected %s", text,
                    s,
                    dead ? "a whole number of dead links in [0, 64]"
                         : "a speed factor in [0.001, 1] (0.8 = 80% of nominal)");
        return NULL;
      }
      v->values[i] = d;
      continue;
    }
    gboolean factor = s[0] == 'x';
    double d;
    gint64 whole;
    gboolean good =
        factor ? ts_parse_double(s + 1, &d) && d > 0
        : is_size
            ? ts_parse_int(s, 1, 65536, &whole) && (d = (double)whole, TRUE)
            : ts_parse_double(s, &d) &&
                  (d > 0 || (d == 0 && range_of(v->key) != NULL && range_of(v->key)->zero_ok));
    if (factor && is_size)
      good = FALSE;
    /* A factor beyond a million either way is a typo, and x1e308 overflows what it scales. */
    if (factor && good && (d < 1e-6 || d > 1e6)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--vary '%s': factor '%s': expected a factor in [1e-06, 1e+06]", text, s);
      return NULL;
    }
    const vary_range *r = range_of(v->key);
    if (!good || (!factor && !is_size && !in_range(r, d))) {
      char want[96] = "a whole number of chips in [1, 65536]";
      if (!is_size && r != NULL) {
        char rt[64];
        range_text(r, rt, sizeof rt);
        g_snprintf(want, sizeof want, "%s, or xFACTOR (e.g. x0.5)", rt);
      }
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--vary '%s': value '%s': expected %s", text, s,
                  want);
      return NULL;
    }
    nscale += factor;
    v->values[i] = d;
  }
  if (nscale != 0 && nscale != v->nvalues) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--vary '%s': mixes factors and absolute values; expected all xFACTOR or all "
                "values",
                text);
    return NULL;
  }
  /* peak_tflops=x1,x1 predicted every configuration twice (duplicate rows), as -m mlp,mlp did
   * before the lists were checked (cmd_sweep.c). */
  for (int i = 0; i < v->nvalues; i++)
    for (int j = 0; j < i; j++)
      if (dims ? strcmp(v->shapes[i], v->shapes[j]) == 0 : v->values[i] == v->values[j]) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--vary '%s': value %d equals value %d; expected each value once", text, i + 1,
                    j + 1);
        return NULL;
      }
  v->scale = nscale > 0;
  v->column = v->scale ? g_strconcat(v->key, "_scale", NULL) : g_strdup(v->key);
  return g_steal_pointer(&v);
}

char *ts_topo_shape_text(const ts_topo *t)
{
  GString *s = g_string_new(NULL);
  for (int d = 0; d < t->ndims; d++)
    g_string_append_printf(s, "%s%d", d ? "x" : "", t->dims[d].size);
  return g_string_free(s, FALSE);
}

/* Sets the field (SI units; `unit` SI per key unit) to value i, refusing a result outside the
 * range a topology file accepts (a factor can take a value there). */
static gboolean set_val(double *field, const ts_vary *v, int i, double unit, const char *tname,
                        GError **error)
{
  double nv = v->scale ? *field * v->values[i] : v->values[i] * unit;
  const vary_range *r = range_of(v->key);
  if (!in_range(r, nv / unit)) {
    char rt[64], got[G_ASCII_DTOSTR_BUF_SIZE];
    range_text(r, rt, sizeof rt);
    g_ascii_formatd(got, sizeof got, "%g", nv / unit);
    /* The value as typed ("value 'x1000'"), as the parser's own errors quote it: "value 1"
     * read as the number 1 where it meant the first of the list. */
    g_autofree char *typed = ts_dtostr_short(v->values[i]);
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--vary '%s': value '%s%s' gives %s on %s; expected %s", v->text,
                v->scale ? "x" : "", typed, got, tname, rt);
    return FALSE;
  }
  *field = nv;
  return TRUE;
}

static gboolean recount(ts_topo *t, const char *what, GError **error)
{
  gint64 n = 1;
  for (int d = 0; d < t->ndims; d++)
    n *= t->dims[d].size;
  if (n > (1 << 20)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--vary %s on %s: %" G_GINT64_FORMAT " chips; expected at most 1048576", what,
                t->path ? t->path : t->name, n);
    return FALSE;
  }
  t->nchips = (int)n;
  return TRUE;
}

ts_topo *ts_vary_apply(const ts_vary *v, int i, const ts_topo *t, GError **error)
{
  g_autoptr(ts_topo) c = ts_topo_copy(t);
  const char *tname = t->path ? t->path : t->name;
  const char *k = v->key;
  if (strcmp(k, "dims") == 0) {
    int sizes[TS_MAX_DIMS], n = 0;
    parse_shape(v->shapes[i], sizes, &n);
    if (n != t->ndims) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--vary dims=%s: %s has %d dimensions; expected %d sizes joined by 'x'",
                  v->shapes[i], tname, t->ndims, t->ndims);
      return NULL;
    }
    g_autofree char *what = g_strdup_printf("dims=%s", v->shapes[i]);
    for (int d = 0; d < n; d++)
      if (!ts_topo_dim_set_size(&c->dims[d], sizes[d], error)) {
        g_prefix_error(error, "--vary %s on %s: ", what, tname);
        return NULL;
      }
    return recount(c, what, error) ? g_steal_pointer(&c) : NULL;
  }
  if (strcmp(k, "dead_links") == 0)
    return ts_degrade_pick_links(c, (int)v->values[i], 1, error) ? g_steal_pointer(&c) : NULL;
  if (strcmp(k, "straggler") == 0 || strcmp(k, "straggler_per_node") == 0) {
    /* One slow chip (chip 0), or the first chip of every node (a dimension named node, else
     * [topology] chips_per_node). */
    int per = strcmp(k, "straggler") == 0 ? c->nchips : c->cap.chips_per_node;
    int nd = ts_topo_dim_index(c, "node");
    if (per <= 0 && nd >= 0)
      per = c->dims[nd].size;
    if (per <= 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--vary straggler_per_node: %s has no dimension named node and no [topology] "
                  "chips_per_node; expected one of them",
                  tname);
      return NULL;
    }
    for (int chip = 0; chip < c->nchips && v->values[i] < 1; chip += per) {
      if (c->faults.nslow == TS_MAX_FAULTS) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--vary %s: expected at most %d slow chips on %s", k, TS_MAX_FAULTS, tname);
        return NULL;
      }
      c->faults.slow_chip[c->faults.nslow] = chip;
      c->faults.slow_factor[c->faults.nslow++] = v->values[i];
    }
    return g_steal_pointer(&c);
  }
  gboolean ok = TRUE;
  /* The chip's fitted rates as they were: a what-if that changes one (compute_efficiency = 1.0
   * on a calibrated profile) runs another chip than the fitted one, and its MFU is the upper
   * bound an uncalibrated chip's is (the rule a topology's own [chip] keys follow, ts_topo.c).
   * Memory capacity, the network and stragglers leave the chip's fit as it was. */
  const ts_chip fitted = c->chip;
  if (strcmp(k, "peak_tflops") == 0)
    ok = set_val(&c->chip.peak_flops, v, i, 1e12, tname, error);
  else if (strcmp(k, "memory_GiB") == 0)
    ok = set_val(&c->chip.memory_bytes, v, i, 1073741824.0, tname, error);
  else if (strcmp(k, "memory_bandwidth_GBps") == 0)
    ok = set_val(&c->chip.memory_bw_Bps, v, i, 1e9, tname, error);
  else if (strcmp(k, "compute_efficiency") == 0)
    ok = set_val(&c->chip.compute_efficiency, v, i, 1.0, tname, error);
  else if (strcmp(k, "flash_efficiency") == 0)
    ok = set_val(&c->chip.flash_efficiency, v, i, 1.0, tname, error);
  else if (strcmp(k, "flash_efficiency_triton") == 0)
    ok = set_val(&c->chip.flash_efficiency_triton, v, i, 1.0, tname, error);
  else if (strcmp(k, "flash_efficiency_fa1") == 0)
    ok = set_val(&c->chip.flash_efficiency_fa1, v, i, 1.0, tname, error);
  else if (strcmp(k, "link_bandwidth_GBps") == 0) {
    for (int d = 0; d < c->ndims && ok; d++)
      ok = set_val(&c->dims[d].link_bw_Bps, v, i, 1e9, tname, error);
  } else if (strcmp(k, "latency_us") == 0) {
    for (int d = 0; d < c->ndims && ok; d++)
      ok = set_val(&c->dims[d].latency_s, v, i, 1e-6, tname, error);
  } else {
    /* dim.NAME.KEY: NAME may itself hold dots, KEY is after the last one. */
    const char *dot = strrchr(k, '.');
    g_autofree char *name = g_strndup(k + 4, (gsize)(dot - k - 4));
    int d = ts_topo_dim_index(t, name);
    if (d < 0) {
      GString *names = g_string_new(NULL);
      for (int j = 0; j < t->ndims; j++)
        g_string_append_printf(names, "%s%s", j ? ", " : "", t->dims[j].name);
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--vary %s: %s has no dimension '%s'; expected one of: %s", k, tname, name,
                  names->str);
      g_string_free(names, TRUE);
      return NULL;
    }
    if (strcmp(dot + 1, "link_bandwidth_GBps") == 0)
      ok = set_val(&c->dims[d].link_bw_Bps, v, i, 1e9, tname, error);
    else if (strcmp(dot + 1, "latency_us") == 0)
      ok = set_val(&c->dims[d].latency_s, v, i, 1e-6, tname, error);
    else {
      if (!ts_topo_dim_set_size(&c->dims[d], (int)v->values[i], error)) {
        g_prefix_error(error, "--vary %s on %s: ", k, tname);
        return NULL;
      }
      return recount(c, k, error) ? g_steal_pointer(&c) : NULL;
    }
  }
  if (c->chip.peak_flops != fitted.peak_flops || c->chip.memory_bw_Bps != fitted.memory_bw_Bps ||
      c->chip.compute_efficiency != fitted.compute_efficiency ||
      c->chip.flash_efficiency != fitted.flash_efficiency ||
      c->chip.flash_efficiency_triton != fitted.flash_efficiency_triton ||
      c->chip.flash_efficiency_fa1 != fitted.flash_efficiency_fa1)
    c->chip.uncalibrated = TRUE;
  return ok ? g_steal_pointer(&c) : NULL;
}

/* ---- automatic split enumeration ---------------------------------------------------------- */

char *ts_split_family(const char *split)
{
  g_autoptr(ts_split) s = ts_split_parse(split, NULL);
  if (s == NULL)
    return g_strdup("?");
  GString *f = g_string_new(NULL);
  for (int a = 0; a < TS_AX_N; a++)
    if (s->degree[a] > 1)
      g_string_append_printf(f, "%s%s", f->len ? "+" : "", ts_axis_kind_name(a));
  if (f->len == 0)
    g_string_append(f, "single");
  /* FSDP2 is ZeRO-3 as PyTorch allocates and reduces it: a family of its own, so a search
   * says how it fared against the other sharding stages. */
  if (s->zero == 3 && s->fsdp2)
    g_string_append(f, "+fsdp2");
  else if (s->zero > 0)
    g_string_append_printf(f, "+zero%d", s->zero);
  return g_string_free(f, FALSE);
}

/* Every ordered sequence of distinct dimensions ("x", "y", "x+y", "y+x"), shortest first. */
static void dim_sequences(const ts_topo *t, GPtrArray *out, int *used, int depth, GString *cur)
{
  for (int d = 0; d < t->ndims; d++) {
    if (used[d])
      continue;
    gsize len = cur->len;
    g_string_append_printf(cur, "%s%s", len ? "+" : "", t->dims[d].name);
    g_ptr_array_add(out, g_strdup(cur->str));
    used[d] = 1;
    dim_sequences(t, out, used, depth + 1, cur);
    used[d] = 0;
    g_string_truncate(cur, len);
  }
}

static gint by_length(gconstpointer a, gconstpointer b)
{
  const char *x = *(const char *const *)a, *y = *(const char *const *)b;
  size_t lx = strlen(x), ly = strlen(y);
  return lx != ly ? (lx < ly ? -1 : 1) : 0;
}

typedef struct {
  const ts_model *m;
  const ts_topo *t;
  const ts_plan_options *po;
  gboolean fits_only;
  gboolean supported[TS_AX_N];
  int degree[TS_AX_N];
  int zero_stages;    /* ZeRO stages the planner accepts (1: none beyond 0) */
  const char *suffix; /* options appended to every split, e.g. ",recompute=full" */
  gboolean all_placements;
  int perms[24][TS_MAX_DIMS]; /* dimension permutations that map the array onto itself */
  int nperms;
  GPtrArray *seqs;              /* dimension sequences */
  int (*seq_dims)[TS_MAX_DIMS]; /* each sequence's dimension indices, seq_len[i] of them */
  int *seq_len;
  int used[TS_MAX_DIMS]; /* the chips of each dimension the axes placed so far take */
  long placements;       /* axis placements tried (ts_auto_options.placements) */
  ts_progress progress;  /* time elapsed, on stderr, when the enumeration is long */
  GHashTable *seen;      /* shape key -> 1 */
  GPtrArray *out;
  gboolean vary_options;
  int max_configs;
  gboolean truncated;
  gboolean fsdp2;      /* zero=3 splits are also tried as fsdp2 (the planner accepts it here) */
  gboolean cp_default; /* cp is enumerated without vary_options (long sequences: cp_pays) */
  gint64 seq_tokens;   /* the model's longest sequence (model_tokens) */
} auto_ctx;

static char *shape_key(const int *degree, const ts_group_shape *shape)
{
  GString *k = g_string_new(NULL);
  for (int a = 0; a < TS_AX_N; a++) {
    g_string_append_printf(k, "%d:", degree[a]);
    for (int p = 0; p < shape[a].npieces; p++)
      g_string_append_printf(k, "%d/%d/%d,", shape[a].p[p].dim, shape[a].p[p].size,
                             shape[a].p[p].stride);
    g_string_append_c(k, ';');
  }
  return g_string_free(k, FALSE);
}

/* Plans one candidate split; keeps it when its groups (and options) are new and the planner
 * accepts it. */
static int try_split(auto_ctx *c, const char *text)
{
  g_autoptr(ts_split) sp = ts_split_parse(text, NULL);
  int deg[TS_AX_N];
  ts_group_shape shape[TS_AX_N];
  if (sp == NULL || !ts_split_place(sp, c->t, deg, shape, NULL))
    return -1;
  /* The key of the placement, canonical under the array's symmetries unless every placement
   * is wanted: the smallest key over the images of the shapes. */
  char *groups = shape_key(deg, shape);
  for (int k = 1; k < c->nperms && !c->all_placements; k++) {
    ts_group_shape img[TS_AX_N];
    memcpy(img, shape, sizeof img);
    for (int a = 0; a < TS_AX_N; a++)
      for (int q = 0; q < img[a].npieces; q++)
        img[a].p[q].dim = c->perms[k][img[a].p[q].dim];
    char *alt = shape_key(deg, img);
    if (strcmp(alt, groups) < 0) {
      g_free(groups);
      groups = alt;
    } else {
      g_free(alt);
    }
  }
  /* The options (items other than the placed axes AXIS=N@DIMS) complete the key. */
  GString *opts = g_string_new(NULL);
  g_auto(GStrv) items = g_strsplit(text, ",", -1);
  for (char **it = items; *it != NULL; it++)
    if (strchr(*it, '@') == NULL)
      g_string_append_printf(opts, ",%s", *it);
  char *key = g_strdup_printf("%s|zero=%d|%s", groups, sp->zero, opts->str);
  g_string_free(opts, TRUE);
  g_free(groups);
  if (g_hash_table_contains(c->seen, key)) {
    g_free(key);
    return -1;
  }
  g_hash_table_add(c->seen, key);
  if (c->max_configs > 0 && (int)c->out->len >= c->max_configs) {
    c->truncated = TRUE;
    return -1;
  }
  g_autoptr(ts_plan) p = ts_plan_new(c->m, c->t, sp, c->po, NULL);
  if (p != NULL && (!c->fits_only || p->mem.fits))
    g_ptr_array_add(c->out, g_strdup(text));
  /* Hybrid sharding: ZeRO inside each group of dp's inner pieces (the fastest dimensions),
   * one candidate per proper prefix of dp's placement (FSDP's HYBRID_SHARD over a node). With
   * fsdp2 always: HSDP (TorchTitan's data_parallel_replicate_degree) is how FSDP2 runs across
   * nodes, and it adds one candidate per fsdp2 split on a two-level array (dp over node+net). */
  if ((c->vary_options || sp->fsdp2) && p != NULL && sp->zero > 0 && sp->shard == 0) {
    int shard = 1;
    for (int k = 0; k + 1 < p->shape[TS_AX_DP].npieces; k++) {
      shard *= p->shape[TS_AX_DP].p[k].size;
      g_autofree char *h = g_strdup_printf("%s,shard=%d", text, shard);
      try_split(c, h);
    }
  }
  return p == NULL ? -1 : p->mem.fits ? 1 : 0;
}

/* Options a split is tried with besides its axes and ZeRO stage (vary_options): recomputation,
 * sequence parallelism with tp, the interleaved schedule with pp. */
static void try_options(auto_ctx *c, const char *base)
{
  if (!c->vary_options) {
    try_split(c, base);
    return;
  }
  /* Recomputation trades time for memory: a heavier kind is tried only when the lighter one
   * does not fit (Korthikanti et al. 2022: selective first, full as the last resort), which
   * keeps the search to about one candidate per split where memory is no constraint. Between
   * them TorchTitan's per-op policy, which keeps under 0.6 of selective's bytes for a part of
   * the forward's time (recompute=op, docs/splits.md). */
  static const char *const rc[] = {"", ",recompute=selective", ",recompute=op", ",recompute=full"};
  gboolean tp = strstr(base, "tp=") != NULL, pp = strstr(base, "pp=") != NULL;
  for (int sp = 0; sp < (tp ? 2 : 1); sp++)
    for (int sc = 0; sc < (pp ? 2 : 1); sc++)
      for (size_t r = 0; r < G_N_ELEMENTS(rc); r++) {
        g_autofree char *text = g_strdup_printf("%s%s%s%s", base, sp ? ",sp" : "",
                                                sc ? ",schedule=interleaved:2" : "", rc[r]);
        if (try_split(c, text) != 0)
          break; /* fits, or does not plan (a heavier kind will not either) */
      }
}

/* Chooses a placement for axis a onwards, then tries the split. */
static void place_axes(auto_ctx *c, int a, int *choice)
{
  /* Once --max-configs has turned a new candidate away, no later one can be kept: stop. The
   * rest of the enumeration only parsed and placed candidates to refuse them, for minutes on
   * a large array (search on PaLM's 6,144-chip two-pod array ran 5 minutes silent). */
  if (c->truncated)
    return;
  if (a == TS_AX_N) {
    c->placements++;
    ts_progress_tick(&c->progress);
    GString *s = g_string_new(NULL);
    for (int k = 0; k < TS_AX_N; k++)
      if (c->degree[k] > 1)
        g_string_append_printf(s, "%s%s=%d@%s", s->len ? "," : "", ts_axis_kind_name(k),
                               c->degree[k], (char *)g_ptr_array_index(c->seqs, choice[k]));
    if (s->len == 0)
      g_string_append(s, "dp=1");
    /* Sharding (ZeRO stage) only means something across data-parallel replicas. */
    int nzero = c->degree[TS_AX_DP] > 1 ? c->zero_stages : 1;
    for (int z = 0; z < nzero; z++) {
      g_autofree char *zs = z > 0 ? g_strdup_printf(",zero=%d", z) : g_strdup("");
      g_autofree char *text = g_strconcat(s->str, zs, c->suffix, NULL);
      try_options(c, text);
    }
    /* ZeRO-3 as PyTorch FSDP2 runs it (TorchTitan's sharding), after the stages above. */
    if (nzero == 4 && c->fsdp2) {
      g_autofree char *text = g_strconcat(s->str, ",zero=3,fsdp2", c->suffix, NULL);
      try_options(c, text);
    }
    g_string_free(s, TRUE);
    return;
  }
  if (c->degree[a] <= 1) {
    choice[a] = 0;
    place_axes(c, a + 1, choice);
    return;
  }
  /* Axes are placed in axis order as ts_split_place places explicit ones, so the pieces of
   * axis a are known here. Sequences that give the same pieces (on a 4-dimension array most of
   * the 64: every dimension after the axis is complete, or a full one, changes nothing) lead to
   * the same subtree of group shapes, whose candidates try_split would parse, place and refuse
   * as seen; a sequence that does not place the axis makes every candidate below fail to place.
   * Both are skipped here, the first sequence of each placement kept: the same splits in the
   * same order. (PaLM's 6,144-chip 12x16x16x2 array: minutes to seconds, bench/RESULTS.md.) */
  ts_group_shape *tried = g_new(ts_group_shape, c->seqs->len);
  int ntried = 0;
  int saved[TS_MAX_DIMS];
  memcpy(saved, c->used, sizeof saved);
  for (guint i = 0; i < c->seqs->len && !c->truncated; i++) {
    ts_group_shape g = {0};
    memcpy(c->used, saved, sizeof saved);
    if (!ts_split_place_on(c->t, c->used, c->seq_dims[i], c->seq_len[i], c->degree[a], &g))
      continue;
    gboolean dup = FALSE;
    for (int k = 0; k < ntried && !dup; k++)
      dup = tried[k].npieces == g.npieces &&
            memcmp(tried[k].p, g.p, sizeof(ts_piece) * (size_t)g.npieces) == 0;
    if (dup)
      continue;
    tried[ntried++] = g;
    choice[a] = (int)i;
    place_axes(c, a + 1, choice);
  }
  memcpy(c->used, saved, sizeof saved);
  g_free(tried);
}

/* Whether context parallelism of degree d can split every layer's sequence into 2d chunks
 * (ts_plan_new's rule): checked once per degree, so models it cannot apply to (a CNN, BERT's
 * one-token pooler) do not multiply the enumeration by cp's placements. */
static gboolean cp_applies(const ts_model *m, int d)
{
  for (int i = 0; i < m->nlayers && d > 1; i++) {
    const ts_layer *l = &m->layers[i];
    gint64 kv = l->kind == TS_LAYER_ATTENTION && l->kv_tokens > 0 ? l->kv_tokens : l->tokens;
    if (l->tokens <= 1 || l->tokens % (2 * d) != 0 || kv % (2 * d) != 0)
      return FALSE;
  }
  return TRUE;
}

/* One sample per chip with every other state sharded over every chip: "dp=N,zero=3" at
 * micro-batch 1, with the options every split gets (suffix), so no recomputation unless they
 * ask for it. The split that leaves a chip the most room for a sample; planned once for the
 * two rules below. NULL when the planner refuses it (one chip, or zero=3 not accepted). */
static ts_plan *probe_plan(const auto_ctx *c, const char *extra)
{
  ts_plan_options o = *c->po;
  o.global_batch = c->t->nchips;
  o.micro_batch = 1;
  g_autofree char *text = g_strdup_printf("dp=%d,zero=3%s%s", c->t->nchips, extra, c->suffix);
  g_autoptr(ts_split) s = ts_split_parse(text, NULL);
  return s != NULL ? ts_plan_new(c->m, c->t, s, &o, NULL) : NULL;
}

/* Context parallelism is enumerated without vary_options where it could pay: where a whole
 * sample does not fit a chip even with every other state sharded over all chips (probe; the
 * default search has no recomputation and no sp to shrink a sample's activations, which grow
 * with its tokens), and then only at degrees that leave every rank at least CP_MIN_TOKENS of
 * each sequence. Llama 3.1 8B at 8,192 tokens on H100s needs 54 GiB a sample (38 GiB of it
 * activations): it fits, and cp would only add its ring to data parallelism's work; at 65,536
 * tokens it needs 392 GiB, and cp 2 to 8 are tried. */
static gboolean cp_pays(const auto_ctx *c, const ts_plan *probe)
{
  if (!c->supported[TS_AX_CP] || !cp_applies(c->m, 2))
    return FALSE;
  return probe == NULL || !probe->mem.fits;
}

/* The fewest tokens of a sequence a cp rank keeps in the default enumeration. Published
 * long-context runs keep 8K-32K a rank (TorchTitan's Table 2: 32,768 at 64K-262K tokens;
 * NeMo's recipes llama3_8b_16k and llama3_8b_64k: cp 2 at 16K and cp 4 at 64K, 8,192 and
 * 16,384), the length of a whole pre-training sample, where each ring step's attention (chunk x
 * chunk work) hides its key/value block (chunk x kv bytes) over the network too; the bound also
 * keeps the enumeration to log2(s / 8192) degrees (3 at 64K, 5 at 256K) instead of every
 * divisor of the chips. */
#define CP_MIN_TOKENS 8192

/* The longest sequence of any layer: what a cp rank's share is a part of. */
static gint64 model_tokens(const ts_model *m)
{
  gint64 s = 1;
  for (int i = 0; i < m->nlayers; i++)
    s = MAX(s, m->layers[i].tokens);
  return s;
}

/* Chooses a degree for axis a onwards (data parallelism takes what is left). */
static void choose_degrees(auto_ctx *c, int a, int left)
{
  if (c->truncated) /* as in place_axes */
    return;
  if (a == TS_AX_N) {
    c->degree[TS_AX_DP] = left;
    int choice[TS_AX_N] = {0};
    place_axes(c, 0, choice);
    return;
  }
  /* Context parallelism multiplies the enumeration by its degrees and placements: it is
   * searched with the other issue-13 options (vary_options), or where a whole sample cannot
   * sit on one chip (cp_pays), at degrees that leave a rank CP_MIN_TOKENS. */
  if (a == TS_AX_DP || !c->supported[a] || (a == TS_AX_CP && !c->vary_options && !c->cp_default)) {
    c->degree[a] = 1;
    choose_degrees(c, a + 1, left);
    return;
  }
  for (int d = 1; d <= left; d++)
    if (left % d == 0 &&
        (a != TS_AX_CP || (cp_applies(c->m, d) &&
                           (c->vary_options || d == 1 || c->seq_tokens / d >= CP_MIN_TOKENS)))) {
      c->degree[a] = d;
      choose_degrees(c, a + 1, left / d);
    }
}

/* Permutations of the dimensions that map the array onto itself: dimensions of the same
 * size, shape, link bandwidth and latency are interchangeable, and a placement and its image
 * under such a permutation predict the same step (the array cannot tell them apart). */
static void perm_rec(auto_ctx *c, int d, int *cur, int *used)
{
  const ts_topo *t = c->t;
  if (d == t->ndims) {
    memcpy(c->perms[c->nperms++], cur, sizeof(int) * TS_MAX_DIMS);
    return;
  }
  for (int e = 0; e < t->ndims && c->nperms < 24; e++) {
    const ts_dim *a = &t->dims[d], *b = &t->dims[e];
    if (used[e] || a->size != b->size || a->shape != b->shape || a->link_bw_Bps != b->link_bw_Bps ||
        a->latency_s != b->latency_s)
      continue;
    used[e] = 1;
    cur[d] = e;
    perm_rec(c, d + 1, cur, used);
    used[e] = 0;
  }
}

static void array_symmetries(auto_ctx *c)
{
  int cur[TS_MAX_DIMS] = {0}, used[TS_MAX_DIMS] = {0};
  c->nperms = 0;
  perm_rec(c, 0, cur, used);
}

GPtrArray *ts_splits_auto(const ts_model *m, const ts_topo *t, const ts_plan_options *po,
                          const ts_auto_options *o)
{
  auto_ctx c = {0};
  c.m = m;
  c.t = t;
  c.po = po;
  c.fits_only = o != NULL && o->fits_only;
  c.all_placements = o != NULL && o->all_placements;
  c.suffix = o != NULL && o->suffix != NULL ? o->suffix : "";
  c.vary_options = o != NULL && o->vary_options;
  c.max_configs = o != NULL ? o->max_configs : 0;
  c.zero_stages = 1;
  array_symmetries(&c);
  for (int a = 0; a < TS_AX_N; a++) {
    /* An axis the planner does not accept yet (ts_split_parse says so) is left out. */
    g_autofree char *probe = g_strdup_printf("%s=2", ts_axis_kind_name(a));
    g_autoptr(ts_split) s = ts_split_parse(probe, NULL);
    c.supported[a] = s != NULL;
  }
  /* Sharding: every ZeRO stage the split parser accepts (Rajbhandari et al. 2020: 1 shards
   * optimizer states, 2 also gradients, 3 also parameters). */
  for (int z = 1; z <= 3; z++) {
    g_autofree char *probe = g_strdup_printf("dp=2,zero=%d", z);
    g_autoptr(ts_split) s = ts_split_parse(probe, NULL);
    if (s != NULL && s->zero == z)
      c.zero_stages = z + 1;
  }

  /* FSDP2 (fsdp2 with zero=3) where the planner accepts it: a GPU stack (a TPU refuses it),
   * decided once on the probe rather than by planning and refusing every zero=3 split twice.
   * When the probe itself does not plan, every fsdp2 candidate is planned on its own. */
  {
    g_autoptr(ts_plan) probe = c.zero_stages == 4 ? probe_plan(&c, "") : NULL;
    g_autoptr(ts_plan) probe2 = probe != NULL ? probe_plan(&c, ",fsdp2") : NULL;
    c.fsdp2 = c.zero_stages == 4 && (probe == NULL || probe2 != NULL);
    c.cp_default = cp_pays(&c, probe);
    c.seq_tokens = model_tokens(m);
  }

  c.seqs = g_ptr_array_new_with_free_func(g_free);
  int used[TS_MAX_DIMS] = {0};
  GString *cur = g_string_new(NULL);
  dim_sequences(t, c.seqs, used, 0, cur);
  g_string_free(cur, TRUE);
  g_ptr_array_sort(c.seqs, by_length); /* stable: single dimensions first, in file order */
  c.seq_dims = g_malloc0_n(c.seqs->len, sizeof *c.seq_dims);
  c.seq_len = g_new0(int, c.seqs->len);
  for (guint i = 0; i < c.seqs->len; i++) {
    g_auto(GStrv) names = g_strsplit(g_ptr_array_index(c.seqs, i), "+", -1);
    for (char **n = names; *n != NULL; n++)
      c.seq_dims[i][c.seq_len[i]++] = ts_topo_dim_index(t, *n);
  }
  for (int d = 0; d < t->ndims; d++)
    c.used[d] = 1;
  /* Enumerating plans every new candidate (ts_plan_new): with --vary-options and no
   * --max-configs, minutes on a 6,144-chip array, which say so rather than stay silent. */
  ts_progress_init(&c.progress, o != NULL && o->progress != NULL,
                   o != NULL && o->progress != NULL ? o->progress : "", "splits", 0);
  c.seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  c.out = g_ptr_array_new_with_free_func(g_free);
  choose_degrees(&c, 0, t->nchips);
  if (o != NULL && o->truncated != NULL)
    *o->truncated = c.truncated;
  if (o != NULL && o->placements != NULL)
    *o->placements = c.placements;
  ts_progress_end(&c.progress);
  g_free(c.seq_dims);
  g_free(c.seq_len);
  g_hash_table_unref(c.seen);
  g_ptr_array_unref(c.seqs);
  return c.out;
}

/* ---- sweeps -------------------------------------------------------------------------------- */

typedef struct {
  char *array;     /* "32x32" */
  char *split_arg; /* the --split text predicted */
  double *vals;    /* one per non-dims --vary: the factor or value of this configuration */
} row_meta;

struct ts_sweep {
  GArray *cfgs;   /* ts_config */
  GArray *meta;   /* row_meta */
  int nvary;      /* --vary options */
  char **columns; /* column name of each --vary, NULL for dims */
  char *backend;
  JsonNode *spec;
};

static void meta_clear(gpointer p)
{
  row_meta *m = p;
  g_free(m->array);
  g_free(m->split_arg);
  g_free(m->vals);
}

void ts_sweep_free(ts_sweep *s)
{
  if (s == NULL)
    return;
  g_array_unref(s->cfgs);
  g_array_unref(s->meta);
  g_strfreev(s->columns);
  g_free(s->backend);
  if (s->spec != NULL)
    json_node_unref(s->spec);
  g_free(s);
}

int ts_sweep_size(const ts_sweep *s)
{
  return (int)s->cfgs->len;
}

const ts_config *ts_sweep_configs(const ts_sweep *s)
{
  return (const ts_config *)s->cfgs->data;
}

void ts_sweep_set_sg_cfg(ts_sweep *s, const char *const *cfg)
{
  for (guint i = 0; i < s->cfgs->len; i++)
    g_array_index(s->cfgs, ts_config, i).ro.sg_cfg = cfg;
}

JsonNode *ts_sweep_spec_json(const ts_sweep *s)
{
  return s->spec;
}

typedef struct {
  const ts_sweep_spec *spec;
  ts_sweep *sw;
  ts_inputs *cache;
  const char *topo_arg;
  double *vals; /* current value of each --vary */
} enum_ctx;

static void add_configs(enum_ctx *c, const ts_topo *t)
{
  const ts_sweep_spec *sp = c->spec;
  g_autofree char *array = ts_topo_shape_text(t);
  gboolean per_chip = sp->batch_per_chip != NULL && sp->batch_per_chip->len > 0;
  GArray *batches = per_chip ? sp->batch_per_chip : sp->global_batch;
  for (char **mn = sp->models; *mn != NULL; mn++) {
    const ts_model *m = ts_inputs_model(c->cache, *mn, NULL, NULL); /* loaded before */
    for (guint b = 0; b < batches->len; b++) {
      gint64 gb = g_array_index(batches, gint64, b) * (per_chip ? t->nchips : 1);
      guint nmicro = sp->micro_auto ? 1 : sp->micro_batch->len;
      for (guint u = 0; u < nmicro; u++) {
        ts_config cfg = {0};
        cfg.model = m;
        cfg.topo = t;
        ts_plan_options_default(&cfg.po);
        cfg.po.global_batch = gb;
        cfg.po.micro_batch = sp->micro_auto ? 0 : g_array_index(sp->micro_batch, gint64, u);
        cfg.po.bucket_bytes = sp->bucket_MiB * 1024 * 1024;
        cfg.po.algo = sp->algo;
        cfg.ro.backend = c->sw->backend;
        cfg.ro.full = sp->full;
        static char *no_suffix[] = {(char *)"", NULL};
        char **suffixes = sp->suffixes != NULL ? sp->suffixes : no_suffix;
        for (char **sfx = suffixes; *sfx != NULL; sfx++) {
          gboolean cut = FALSE;
          ts_auto_options ao = {sp->fits_only && !sp->micro_auto,
                                sp->all_placements,
                                *sfx,
                                sp->vary_options,
                                sp->max_configs,
                                &cut,
                                NULL,
                                sp->progress};
          g_autoptr(GPtrArray) auto_list =
              sp->auto_splits ? ts_splits_auto(m, t, &cfg.po, &ao) : NULL;
          if (cut && sp->truncated != NULL)
            *sp->truncated = TRUE;
          guint ns = auto_list ? auto_list->len : g_strv_length(sp->splits);
          for (guint k = 0; k < ns; k++) {
            g_autofree char *text = auto_list ? g_strdup(g_ptr_array_index(auto_list, k))
                                              : g_strconcat(sp->splits[k], *sfx, NULL);
            /* Micro-batch candidates: the whole per-replica batch, then halves of it down to 1
             * (smaller micro-batches hold fewer activations; pipelines need several). */
            GArray *micros = g_array_new(FALSE, FALSE, sizeof(gint64));
            g_array_append_val(micros, cfg.po.micro_batch);
            if (sp->micro_auto) {
              g_autoptr(ts_split) parsed = ts_split_parse(text, NULL);
              g_autoptr(ts_plan) p = parsed ? ts_plan_new(m, t, parsed, &cfg.po, NULL) : NULL;
              g_array_set_size(micros, 0);
              gint64 r = p != NULL ? p->micro_batch : 0;
              for (gint64 v = r; v >= 1; v = v % 2 == 0 ? v / 2 : (v > 1 ? 1 : 0)) {
                g_array_append_val(micros, v);
                if (v == 1)
                  break;
              }
              if (micros->len == 0) /* does not plan: keep it, the reason is reported */
                g_array_append_val(micros, cfg.po.micro_batch);
            }
            for (guint q = 0; q < micros->len; q++) {
              row_meta rm = {0};
              rm.array = g_strdup(array);
              rm.split_arg = g_strdup(text);
              rm.vals = g_memdup2(c->vals, sizeof(double) * (gsize)MAX(c->sw->nvary, 1));
              ts_config one = cfg;
              one.po.micro_batch = g_array_index(micros, gint64, q);
              one.split = rm.split_arg; /* owned by the row's meta, which lives as long */
              g_array_append_val(c->sw->meta, rm);
              g_array_append_val(c->sw->cfgs, one);
            }
            g_array_unref(micros);
          }
        }
      }
    }
  }
}

/* --vary flash_efficiency_triton / _fa1 sets the rate only attn-kernel=triton / fa1 runs at:
 * without a split (or split option) naming that kernel every row would be the same. */
static gboolean vary_rate_used(const ts_sweep_spec *spec, const ts_vary *v, GError **error)
{
  int kernel = strcmp(v->key, "flash_efficiency_triton") == 0 ? TS_ATTN_KERNEL_TRITON
               : strcmp(v->key, "flash_efficiency_fa1") == 0  ? TS_ATTN_KERNEL_FA1
                                                              : -1;
  if (kernel < 0)
    return TRUE;
  static char *none[] = {(char *)"", NULL};
  static char *any[] = {(char *)"dp=1", NULL};
  char **splits = spec->splits != NULL ? spec->splits : any;
  char **sfx = spec->suffixes != NULL ? spec->suffixes : none;
  for (char **sp = splits; *sp != NULL; sp++)
    for (char **x = sfx; *x != NULL; x++) {
      g_autofree char *text = g_strconcat(*sp, *x, NULL);
      g_autoptr(ts_split) s = ts_split_parse(text, NULL);
      if (s != NULL && s->attn_kernel == 1 + kernel)
        return TRUE;
    }
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "--vary '%s': no --split asks for attn-kernel=%s; expected one that does (the "
              "rate is that kernel's, every row would be the same)",
              v->text, ts_attn_kernel_name((ts_attn_kernel)kernel));
  return FALSE;
}

static gboolean vary_level(enum_ctx *c, int level, const ts_topo *t, GError **error)
{
  if (level == c->sw->nvary) {
    add_configs(c, t);
    return TRUE;
  }
  const ts_vary *v = g_ptr_array_index(c->spec->vary, level);
  for (int i = 0; i < v->nvalues; i++) {
    ts_topo *nt = ts_vary_apply(v, i, t, error);
    if (nt == NULL)
      return FALSE;
    ts_inputs_adopt_topo(c->cache, nt);
    c->vals[level] = v->shapes != NULL ? NAN : v->values[i];
    if (!vary_level(c, level + 1, nt, error))
      return FALSE;
  }
  return TRUE;
}

static void json_strv(JsonBuilder *b, const char *name, char **v)
{
  json_builder_set_member_name(b, name);
  json_builder_begin_array(b);
  for (; v != NULL && *v != NULL; v++)
    json_builder_add_string_value(b, *v);
  json_builder_end_array(b);
}

static void json_ints(JsonBuilder *b, const char *name, const GArray *a)
{
  json_builder_set_member_name(b, name);
  json_builder_begin_array(b);
  for (guint i = 0; a != NULL && i < a->len; i++)
    json_builder_add_int_value(b, g_array_index(a, gint64, i));
  json_builder_end_array(b);
}

ts_sweep *ts_sweep_new(const ts_sweep_spec *spec, ts_inputs *cache, GError **error)
{
  g_autoptr(ts_sweep) sw = g_new0(ts_sweep, 1);
  sw->cfgs = g_array_new(FALSE, TRUE, sizeof(ts_config));
  sw->meta = g_array_new(FALSE, TRUE, sizeof(row_meta));
  g_array_set_clear_func(sw->meta, meta_clear);
  sw->backend = g_strdup(spec->backend != NULL ? spec->backend : "analytic");
  sw->nvary = spec->vary != NULL ? (int)spec->vary->len : 0;
  sw->columns = g_new0(char *, sw->nvary + 1);
  for (int i = 0; i < sw->nvary; i++) {
    const ts_vary *v = g_ptr_array_index(spec->vary, i);
    for (int j = 0; j < i; j++)
      if (strcmp(((const ts_vary *)g_ptr_array_index(spec->vary, j))->key, v->key) == 0) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--vary '%s': key %s given twice; expected one --vary per key", v->text,
                    v->key);
        return NULL;
      }
    sw->columns[i] = g_strdup(v->column);
    if (!vary_rate_used(spec, v, error))
      return NULL;
  }
  /* Every input is loaded (and so checked) before the first configuration is made. */
  for (char **mn = spec->models; mn != NULL && *mn != NULL; mn++)
    if (ts_inputs_model(cache, *mn, NULL, error) == NULL)
      return NULL;
  enum_ctx c = {spec, sw, cache, NULL, g_new0(double, MAX(sw->nvary, 1))};
  gboolean ok = TRUE;
  for (char **tn = spec->topologies; ok && tn != NULL && *tn != NULL; tn++) {
    const ts_topo *t = ts_inputs_topo(cache, *tn, NULL, error);
    c.topo_arg = *tn;
    ok = t != NULL && vary_level(&c, 0, t, error);
  }
  g_free(c.vals);
  if (!ok)
    return NULL;
  /* The spec as written, so shards of one sweep can be recognised and merged. */
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_strv(b, "topologies", spec->topologies);
  json_strv(b, "models", spec->models);
  if (spec->auto_splits) {
    json_builder_set_member_name(b, "splits");
    json_builder_add_string_value(b, "auto");
    json_builder_set_member_name(b, "fits_only");
    json_builder_add_boolean_value(b, spec->fits_only);
    json_builder_set_member_name(b, "all_placements");
    json_builder_add_boolean_value(b, spec->all_placements);
  } else {
    json_strv(b, "splits", spec->splits);
  }
  if (spec->batch_per_chip != NULL && spec->batch_per_chip->len > 0)
    json_ints(b, "batch_per_chip", spec->batch_per_chip);
  else
    json_ints(b, "global_batch", spec->global_batch);
  if (spec->micro_auto) {
    json_builder_set_member_name(b, "micro_batch");
    json_builder_add_string_value(b, "auto");
  } else {
    json_ints(b, "micro_batch", spec->micro_batch);
  }
  if (spec->suffixes != NULL)
    json_strv(b, "split_options", spec->suffixes);
  json_builder_set_member_name(b, "vary");
  json_builder_begin_array(b);
  for (int i = 0; i < sw->nvary; i++)
    json_builder_add_string_value(b, ((const ts_vary *)g_ptr_array_index(spec->vary, i))->text);
  json_builder_end_array(b);
  json_builder_set_member_name(b, "backend");
  json_builder_add_string_value(b, sw->backend);
  json_builder_set_member_name(b, "collective_algorithm");
  json_builder_add_string_value(b, ts_coll_algo_name(spec->algo));
  json_builder_set_member_name(b, "bucket_MiB");
  json_builder_add_double_value(b, spec->bucket_MiB);
  json_builder_set_member_name(b, "full");
  json_builder_add_boolean_value(b, spec->full);
  json_builder_set_member_name(b, "configurations");
  json_builder_add_int_value(b, sw->cfgs->len);
  json_builder_end_object(b);
  sw->spec = json_builder_get_root(b);
  return g_steal_pointer(&sw);
}

char *ts_sweep_render_csv(const ts_sweep *s, const int *idx, const ts_outcome *out, int n)
{
  GString *csv = g_string_new("config,array,split_arg");
  for (int v = 0; v < s->nvary; v++)
    if (s->columns[v] != NULL && strcmp(s->columns[v], "dims") != 0)
      g_string_append_printf(csv, ",%s", s->columns[v]);
  /* The columns of `trainsim run`, from its own renderer, so both stay the same. */
  ts_report_inputs in0 = {0};
  in0.model_name = in0.topology_name = in0.backend = (char *)"";
  g_autofree char *head = ts_report_render(&in0, NULL, 0, TS_FORMAT_CSV);
  g_string_append_printf(csv, ",%s", head);
  for (int k = 0; k < n; k++) {
    if (out[k].status != TS_OUTCOME_OK)
      continue;
    int i = idx[k];
    const ts_config *c = &g_array_index(s->cfgs, ts_config, i);
    const row_meta *m = &g_array_index(s->meta, row_meta, i);
    g_string_append_printf(csv, "%d,%s,", i, m->array);
    ts_csv_append(csv, m->split_arg);
    for (int v = 0; v < s->nvary; v++)
      if (s->columns[v] != NULL && strcmp(s->columns[v], "dims") != 0) {
        g_string_append_c(csv, ',');
        ts_append_g(csv, 10, m->vals[v]);
      }
    ts_report_inputs in;
    ts_config_report_inputs(c, &in);
    g_autofree char *row = ts_report_render(&in, &out[k].res, 1, TS_FORMAT_CSV);
    ts_report_inputs_clear(&in);
    const char *body = strchr(row, '\n');
    g_string_append_printf(csv, ",%s", body != NULL ? body + 1 : "\n");
  }
  return g_string_free(csv, FALSE);
}

/* The leading members of a row: which configuration, and what was varied. */
static void row_head(const ts_sweep *s, int i, JsonObject *o)
{
  const ts_config *c = &g_array_index(s->cfgs, ts_config, i);
  const row_meta *m = &g_array_index(s->meta, row_meta, i);
  json_object_set_int_member(o, "config", i);
  json_object_set_string_member(o, "model", c->model->name);
  json_object_set_string_member(o, "topology", c->topo->name);
  json_object_set_string_member(o, "array", m->array);
  json_object_set_string_member(o, "backend", s->backend);
  json_object_set_string_member(o, "split_arg", m->split_arg);
  for (int v = 0; v < s->nvary; v++)
    if (s->columns[v] != NULL && strcmp(s->columns[v], "dims") != 0)
      json_object_set_double_member(o, s->columns[v], m->vals[v]);
}

void ts_sweep_render_json(const ts_sweep *s, const int *idx, const ts_outcome *out, int n,
                          GPtrArray *results, GPtrArray *skipped)
{
  g_autoptr(JsonParser) parser = json_parser_new();
  for (int k = 0; k < n; k++) {
    int i = idx[k];
    const ts_config *c = &g_array_index(s->cfgs, ts_config, i);
    JsonObject *o = json_object_new();
    row_head(s, i, o);
    if (out[k].status == TS_OUTCOME_OK) {
      /* The fields of `trainsim run`'s results, from its own renderer. */
      ts_report_inputs in;
      ts_config_report_inputs(c, &in);
      g_autofree char *text = ts_report_render(&in, &out[k].res, 1, TS_FORMAT_JSON);
      ts_report_inputs_clear(&in);
      if (json_parser_load_from_data(parser, text, -1, NULL)) {
        JsonObject *root = json_node_get_object(json_parser_get_root(parser));
        JsonObject *r =
            json_array_get_object_element(json_object_get_array_member(root, "results"), 0);
        GList *names = json_object_get_members(r);
        for (GList *l = names; l != NULL; l = l->next)
          json_object_set_member(o, l->data, json_node_copy(json_object_get_member(r, l->data)));
        g_list_free(names);
      }
      JsonNode *node = json_node_init_object(json_node_alloc(), o);
      g_ptr_array_add(results, node);
    } else {
      json_object_set_int_member(o, "global_batch", c->po.global_batch);
      json_object_set_int_member(o, "micro_batch", c->po.micro_batch);
      json_object_set_string_member(o, "reason", out[k].message ? out[k].message : "");
      g_ptr_array_add(skipped, json_node_init_object(json_node_alloc(), o));
    }
    json_object_unref(o);
  }
}

char *ts_sweep_document(JsonNode *spec, int shard_index, int shard_count, GPtrArray *results,
                        GPtrArray *skipped)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  ts_json_header(b, "sweep");
  json_builder_set_member_name(b, "sweep");
  json_builder_add_value(b, json_node_copy(spec));
  if (shard_count > 0) {
    json_builder_set_member_name(b, "shard");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, shard_index);
    json_builder_set_member_name(b, "count");
    json_builder_add_int_value(b, shard_count);
    json_builder_end_object(b);
  }
  json_builder_set_member_name(b, "results");
  json_builder_begin_array(b);
  for (guint i = 0; i < results->len; i++)
    json_builder_add_value(b, json_node_copy(g_ptr_array_index(results, i)));
  json_builder_end_array(b);
  json_builder_set_member_name(b, "skipped");
  json_builder_begin_array(b);
  for (guint i = 0; i < skipped->len; i++)
    json_builder_add_value(b, json_node_copy(g_ptr_array_index(skipped, i)));
  json_builder_end_array(b);
  json_builder_end_object(b);
  return ts_json_builder_text(b);
}

gboolean ts_shard_parse(const char *text, int *index, int *count, GError **error)
{
  const char *slash = text != NULL ? strchr(text, '/') : NULL;
  gint64 i = -1, n = 0;
  if (slash != NULL) {
    g_autofree char *a = g_strndup(text, (gsize)(slash - text));
    if (!ts_parse_int(a, 0, 999999, &i) || !ts_parse_int(slash + 1, 1, 1000000, &n))
      i = -1;
  }
  if (i < 0 || i >= n) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--shard '%s': expected i/n with shard index i in [0, n) and n in [1, 1000000], "
                "e.g. 0/4",
                text ? text : "");
    return FALSE;
  }
  *index = (int)i;
  *count = (int)n;
  return TRUE;
}
