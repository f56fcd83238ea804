/* ts_trace: the one intermediate form, its construction, checks and text form. */
#include "ts_trace.h"
#include "ts_util.h"

#include <math.h>
#include <string.h>

static const char *op_kind_names[] = {"compute", "coll", "send", "recv", "wait"};
static const char *op_cat_names[] = {"fwd",     "bwd",     "optimizer",  "comm_dp",
                                     "comm_tp", "comm_pp", "comm_other", "other"};

const char *ts_op_kind_name(ts_op_kind k)
{
  return (unsigned)k < G_N_ELEMENTS(op_kind_names) ? op_kind_names[k] : "?";
}

const char *ts_op_cat_name(ts_op_cat c)
{
  return (unsigned)c < G_N_ELEMENTS(op_cat_names) ? op_cat_names[c] : "?";
}

static void group_free(gpointer p)
{
  ts_group *g = p;
  g_free(g->name);
  g_free(g);
}

ts_trace *ts_trace_new(const ts_topo *t)
{
  ts_trace *tr = g_new0(ts_trace, 1);
  tr->nranks = t->nchips;
  tr->ndims = t->ndims;
  for (int d = 0; d < t->ndims; d++) {
    tr->dim_names[d] = g_strdup(t->dims[d].name);
    tr->dim_sizes[d] = t->dims[d].size;
  }
  tr->groups = g_ptr_array_new_with_free_func(group_free);
  tr->labels = g_ptr_array_new_with_free_func(g_free);
  tr->label_index = g_hash_table_new(g_str_hash, g_str_equal);
  return tr;
}

static void programs_free(ts_trace *tr)
{
  for (int p = 0; p < tr->nprograms; p++) {
    for (int i = 0; i < tr->programs[p].nops; i++)
      g_free(tr->programs[p].ops[i].deps);
    g_free(tr->programs[p].ops);
  }
  g_free(tr->programs);
  tr->programs = NULL;
  tr->nprograms = 0;
}

void ts_trace_free(ts_trace *tr)
{
  if (tr == NULL)
    return;
  programs_free(tr);
  for (int d = 0; d < tr->ndims; d++)
    g_free(tr->dim_names[d]);
  for (int a = 0; a < tr->naxes; a++)
    g_free(tr->axes[a].name);
  g_ptr_array_unref(tr->groups);
  g_hash_table_unref(tr->label_index);
  g_ptr_array_unref(tr->labels);
  g_free(tr->meta.model);
  g_free(tr->meta.split);
  g_free(tr->meta.topology);
  g_free(tr->meta.producer);
  g_free(tr);
}

int ts_trace_add_axis(ts_trace *tr, const char *name, int size, gboolean symmetric,
                      const ts_group_shape *shape)
{
  g_return_val_if_fail(tr->naxes < TS_MAX_AXES, -1);
  ts_axis *a = &tr->axes[tr->naxes];
  a->name = g_strdup(name);
  a->size = size;
  a->symmetric = symmetric;
  a->shape = *shape;
  return tr->naxes++;
}

int ts_trace_group(ts_trace *tr, const int *axes, int naxes)
{
  for (guint i = 0; i < tr->groups->len; i++) {
    const ts_group *g = g_ptr_array_index(tr->groups, i);
    if (g->naxes == naxes && memcmp(g->axes, axes, sizeof(int) * (size_t)naxes) == 0)
      return (int)i;
  }
  ts_group *g = g_new0(ts_group, 1);
  GString *name = g_string_new(NULL);
  g->naxes = naxes;
  for (int i = 0; i < naxes; i++) {
    g_return_val_if_fail(axes[i] >= 0 && axes[i] < tr->naxes, -1);
    g->axes[i] = axes[i];
    const ts_axis *a = &tr->axes[axes[i]];
    g_string_append_printf(name, "%s%s", i ? "+" : "", a->name);
    for (int k = 0; k < a->shape.npieces && g->shape.npieces < TS_MAX_PIECES; k++)
      g->shape.p[g->shape.npieces++] = a->shape.p[k];
  }
  g->name = g_string_free(name, FALSE);
  g_ptr_array_add(tr->groups, g);
  return (int)tr->groups->len - 1;
}

int ts_trace_label(ts_trace *tr, const char *label)
{
  gpointer v = g_hash_table_lookup(tr->label_index, label);
  if (v != NULL)
    return GPOINTER_TO_INT(v) - 1;
  char *copy = g_strdup(label);
  g_ptr_array_add(tr->labels, copy);
  g_hash_table_insert(tr->label_index, copy, GINT_TO_POINTER((int)tr->labels->len));
  return (int)tr->labels->len - 1;
}

void ts_trace_set_programs(ts_trace *tr, int nprograms)
{
  programs_free(tr);
  tr->nprograms = nprograms;
  tr->programs = g_new0(ts_program, nprograms);
}

int ts_trace_append(ts_trace *tr, int p, const ts_op *op, const int *deps, int ndeps)
{
  g_return_val_if_fail(p >= 0 && p < tr->nprograms, -1);
  ts_program *prog = &tr->programs[p];
  /* Grow geometrically: programs of large models have tens of thousands of ops. */
  if ((prog->nops & (prog->nops - 1)) == 0)
    prog->ops = g_renew(ts_op, prog->ops, prog->nops == 0 ? 16 : (gsize)prog->nops * 2);
  ts_op *o = &prog->ops[prog->nops];
  *o = *op;
  o->ndeps = ndeps;
  o->deps = ndeps > 0 ? g_memdup2(deps, sizeof(int) * (gsize)ndeps) : NULL;
  return prog->nops++;
}

gint64 ts_trace_nops(const ts_trace *tr)
{
  gint64 n = 0;
  for (int p = 0; p < tr->nprograms; p++)
    n += tr->programs[p].nops;
  return n;
}

/* The trace carries its array's dimension sizes, so rank arithmetic needs no topology. */
static void trace_topo(const ts_trace *tr, ts_topo *t)
{
  memset(t, 0, sizeof *t);
  t->ndims = tr->ndims;
  t->nchips = tr->nranks;
  for (int d = 0; d < tr->ndims; d++) {
    t->dims[d].size = tr->dim_sizes[d];
    t->dims[d].name = tr->dim_names[d];
  }
}

int ts_trace_axis_coord(const ts_trace *tr, int rank, int a)
{
  ts_topo t;
  trace_topo(tr, &t);
  int m = 0;
  ts_group_base_chip(&t, &tr->axes[a].shape, rank, &m);
  return m;
}

int ts_trace_axis_neighbor(const ts_trace *tr, int rank, int a, int offset)
{
  ts_topo t;
  trace_topo(tr, &t);
  int m = 0;
  int base = ts_group_base_chip(&t, &tr->axes[a].shape, rank, &m);
  int target = m + offset;
  if (target < 0 || target >= tr->axes[a].size)
    return -1;
  return ts_group_member_chip(&t, &tr->axes[a].shape, base, target);
}

int ts_trace_program_of(const ts_trace *tr, int rank)
{
  int p = 0;
  for (int a = tr->naxes - 1; a >= 0; a--)
    if (!tr->axes[a].symmetric)
      p = p * tr->axes[a].size + ts_trace_axis_coord(tr, rank, a);
  return p;
}

gboolean ts_trace_check(const ts_trace *tr, const ts_topo *t, GError **error)
{
  if (t != NULL) {
    if (tr->ndims != t->ndims) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "trace has %d array dimensions but topology %s has %d; expected the topology "
                  "the trace was made for",
                  tr->ndims, t->path ? t->path : t->name, t->ndims);
      return FALSE;
    }
    for (int d = 0; d < tr->ndims; d++)
      if (tr->dim_sizes[d] != t->dims[d].size || strcmp(tr->dim_names[d], t->dims[d].name) != 0) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "trace dimension %d is %s of size %d but topology %s has %s of size %d; "
                    "expected the topology the trace was made for",
                    d, tr->dim_names[d], tr->dim_sizes[d], t->path ? t->path : t->name,
                    t->dims[d].name, t->dims[d].size);
        return FALSE;
      }
  }
  int asym = 1;
  gint64 prod = 1;
  ts_topo tt;
  trace_topo(tr, &tt);
  for (int a = 0; a < tr->naxes; a++) {
    const ts_axis *ax = &tr->axes[a];
    if (ts_group_size(&ax->shape) != ax->size) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "axis %s: size %d differs from its shape's %d members", ax->name, ax->size,
                  ts_group_size(&ax->shape));
      return FALSE;
    }
    if (!ts_group_shape_valid(&tt, &ax->shape, error)) {
      g_prefix_error(error, "axis %s: ", ax->name);
      return FALSE;
    }
    prod *= ax->size;
    if (!ax->symmetric)
      asym *= ax->size;
  }
  if (tr->naxes > 0 && prod != tr->nranks) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "axes cover %" G_GINT64_FORMAT " ranks but the trace has %d", prod, tr->nranks);
    return FALSE;
  }
  if (tr->nprograms != asym) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "trace has %d programs; its asymmetric axes need %d", tr->nprograms, asym);
    return FALSE;
  }
  for (int p = 0; p < tr->nprograms; p++) {
    const ts_program *prog = &tr->programs[p];
    for (int i = 0; i < prog->nops; i++) {
      const ts_op *o = &prog->ops[i];
      for (int k = 0; k < o->ndeps; k++)
        if (o->deps[k] < 0 || o->deps[k] >= i) {
          g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                      "program %d op %d: dependency %d is not an earlier op", p, i, o->deps[k]);
          return FALSE;
        }
      if (o->label < 0 || o->label >= (int)tr->labels->len) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID, "program %d op %d: label %d undefined", p, i,
                    o->label);
        return FALSE;
      }
      if (o->kind == TS_OP_COLL && (o->group < 0 || o->group >= (int)tr->groups->len)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID, "program %d op %d: group %d undefined", p, i,
                    o->group);
        return FALSE;
      }
      if ((o->kind == TS_OP_SEND || o->kind == TS_OP_RECV) &&
          (o->axis < 0 || o->axis >= tr->naxes || o->offset == 0)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "program %d op %d: send/recv needs a defined axis and a non-zero offset", p, i);
        return FALSE;
      }
      if (!(o->flops >= 0 && o->mem_bytes >= 0 && o->bytes >= 0) || !isfinite(o->flops) ||
          !isfinite(o->mem_bytes) || !isfinite(o->bytes)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "program %d op %d: sizes must be finite and >= 0", p, i);
        return FALSE;
      }
    }
  }
  return TRUE;
}

/* ---- text form ---------------------------------------------------------------------- */

static void append_quoted(GString *s, const char *text)
{
  g_autofree char *esc = g_strescape(text != NULL ? text : "", NULL);
  g_string_append_printf(s, "\"%s\"", esc);
}

static void append_num(GString *s, const char *key, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append_printf(s, " %s=%s", key, g_ascii_formatd(buf, sizeof buf, "%.17g", v));
}

/* The optional shape of a compute op: class, precision and kernels, then the non-zero
 * dimensions (docs/formats.md). Ops without one are written as before. */
static const char *const shape_keys[] = {"m",   "n",  "k",      "batch",      "aq",
                                         "akv", "ad", "abatch", "attn_flops", "scores_bytes"};

static double *shape_field(ts_op_shape *sh, int i)
{
  double *f[] = {&sh->m,   &sh->n,  &sh->k,      &sh->batch,      &sh->aq,
                 &sh->akv, &sh->ad, &sh->abatch, &sh->attn_flops, &sh->scores_bytes};
  return f[i];
}

static void append_shape(GString *s, const ts_op_shape *sh)
{
  if (sh->oclass == TS_OPC_ROOFLINE)
    return;
  g_string_append_printf(s, " class=%s", ts_op_class_name((ts_op_class)sh->oclass));
  if (sh->prec != TS_PRECISION_BF16)
    g_string_append_printf(s, " prec=%s", ts_precision_name((ts_precision)sh->prec));
  if (sh->kernels > 0)
    g_string_append_printf(s, " kernels=%d", sh->kernels);
  ts_op_shape c = *sh;
  for (size_t i = 0; i < G_N_ELEMENTS(shape_keys); i++)
    if (*shape_field(&c, (int)i) != 0)
      append_num(s, shape_keys[i], *shape_field(&c, (int)i));
}

char *ts_trace_to_text(const ts_trace *tr)
{
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "trainsim-trace %d\n", TS_TRACE_FORMAT_VERSION);
  g_string_append(s, "# Format: docs/formats.md#traces. Units: flops in FLOP, bytes in bytes.\n");
  g_string_append_printf(s, "ranks %d\n", tr->nranks);
  for (int d = 0; d < tr->ndims; d++)
    g_string_append_printf(s, "dim %s %d\n", tr->dim_names[d], tr->dim_sizes[d]);
  for (int a = 0; a < tr->naxes; a++) {
    const ts_axis *ax = &tr->axes[a];
    g_string_append_printf(s, "axis %s %d %s", ax->name, ax->size,
                           ax->symmetric ? "symmetric" : "asymmetric");
    for (int k = 0; k < ax->shape.npieces; k++)
      g_string_append_printf(s, " %s:%d:%d", tr->dim_names[ax->shape.p[k].dim], ax->shape.p[k].size,
                             ax->shape.p[k].stride);
    g_string_append_c(s, '\n');
  }
  for (guint i = 0; i < tr->groups->len; i++) {
    const ts_group *g = g_ptr_array_index(tr->groups, i);
    g_string_append_printf(s, "group %u", i);
    for (int k = 0; k < g->naxes; k++)
      g_string_append_printf(s, " %s", tr->axes[g->axes[k]].name);
    g_string_append_c(s, '\n');
  }
  const struct {
    const char *key;
    const char *val;
  } strs[] = {{"model", tr->meta.model},
              {"split", tr->meta.split},
              {"topology", tr->meta.topology},
              {"producer", tr->meta.producer}};
  for (size_t i = 0; i < G_N_ELEMENTS(strs); i++)
    if (strs[i].val != NULL) {
      g_string_append_printf(s, "meta %s ", strs[i].key);
      append_quoted(s, strs[i].val);
      g_string_append_c(s, '\n');
    }
  g_string_append(s, "meta");
  append_num(s, "samples", tr->meta.samples);
  append_num(s, "model_flops", tr->meta.model_flops);
  g_string_append_c(s, '\n');
  for (guint i = 0; i < tr->labels->len; i++) {
    g_string_append_printf(s, "label %u ", i);
    append_quoted(s, g_ptr_array_index(tr->labels, i));
    g_string_append_c(s, '\n');
  }
  for (int p = 0; p < tr->nprograms; p++) {
    const ts_program *prog = &tr->programs[p];
    g_string_append_printf(s, "program %d %d\n", p, prog->nops);
    for (int i = 0; i < prog->nops; i++) {
      const ts_op *o = &prog->ops[i];
      g_string_append_printf(s, "%d %s cat=%s stream=%d label=%d", i, ts_op_kind_name(o->kind),
                             ts_op_cat_name(o->cat), o->stream, o->label);
      switch (o->kind) {
      case TS_OP_COMPUTE:
        append_num(s, "flops", o->flops);
        append_num(s, "mem_bytes", o->mem_bytes);
        append_shape(s, &o->shape);
        break;
      case TS_OP_COLL:
        g_string_append_printf(s, " kind=%s algo=%s group=%d", ts_coll_kind_name(o->coll),
                               ts_coll_algo_name(o->algo), o->group);
        append_num(s, "bytes", o->bytes);
        break;
      case TS_OP_SEND:
      case TS_OP_RECV:
        g_string_append_printf(s, " axis=%d offset=%d tag=%d", o->axis, o->offset, o->tag);
        append_num(s, "bytes", o->bytes);
        break;
      case TS_OP_WAIT:
        break;
      }
      if (o->ndeps > 0) {
        g_string_append(s, " deps=");
        for (int k = 0; k < o->ndeps; k++)
          g_string_append_printf(s, "%s%d", k ? "," : "", o->deps[k]);
      }
      g_string_append_c(s, '\n');
    }
  }
  g_string_append(s, "end\n");
  return g_string_free(s, FALSE);
}

/* Splits a line into tokens; a token in double quotes may hold blanks and C escapes. */
static gboolean tokenize(const char *line, GPtrArray *out)
{
  const char *p = line;
  for (;;) {
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p == '\0' || *p == '#')
      return TRUE;
    if (*p == '"') {
      const char *q = ++p;
      while (*q != '\0' && *q != '"') {
        if (*q == '\\' && q[1] != '\0')
          q++;
        q++;
      }
      if (*q != '"')
        return FALSE;
      g_autofree char *raw = g_strndup(p, (gsize)(q - p));
      g_ptr_array_add(out, g_strcompress(raw));
      p = q + 1;
    } else {
      const char *q = p;
      while (*q != '\0' && *q != ' ' && *q != '\t')
        q++;
      g_ptr_array_add(out, g_strndup(p, (gsize)(q - p)));
      p = q;
    }
  }
}

typedef struct {
  const char *path;
  int line;
  GError **error;
} parse_ctx;

G_GNUC_PRINTF(2, 3) static gboolean perr(parse_ctx *c, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(c->error, TS_ERROR, TS_ERROR_INPUT, "%s:%d: %s", c->path, c->line, msg);
  return FALSE;
}

static gboolean parse_int_tok(parse_ctx *c, const char *what, const char *tok, gint64 lo, gint64 hi,
                              int *out)
{
  gint64 v;
  if (!ts_parse_int(tok, lo, hi, &v))
    return perr(c,
                "%s='%s': expected a whole number in [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]",
                what, tok, lo, hi);
  *out = (int)v;
  return TRUE;
}

static gboolean parse_num_tok(parse_ctx *c, const char *what, const char *tok, double *out)
{
  if (!ts_parse_double(tok, out) || *out < 0)
    return perr(c, "%s='%s': expected a finite number >= 0", what, tok);
  return TRUE;
}

static int find_name(const char *const *names, size_t n, const char *s)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], s) == 0)
      return (int)i;
  return -1;
}

static int shape_key_index(const char *key)
{
  for (size_t i = 0; i < G_N_ELEMENTS(shape_keys); i++)
    if (strcmp(key, shape_keys[i]) == 0)
      return (int)i;
  return -1;
}

static gboolean parse_op(parse_ctx *c, ts_trace *tr, int prog, GPtrArray *tok)
{
  ts_op op = {0};
  op.offset = 0;
  op.axis = -1;
  op.group = -1;
  int idx = 0;
  if (!parse_int_tok(c, "op index", g_ptr_array_index(tok, 0), 0, G_MAXINT, &idx))
    return FALSE;
  if (idx != tr->programs[prog].nops)
    return perr(c, "op index %d: expected %d (ops are numbered in order)", idx,
                tr->programs[prog].nops);
  const char *kind = g_ptr_array_index(tok, 1);
  int k = find_name(op_kind_names, G_N_ELEMENTS(op_kind_names), kind);
  if (k < 0)
    return perr(c, "op kind '%s': expected compute, coll, send, recv or wait", kind);
  op.kind = (ts_op_kind)k;
  g_autoptr(GArray) deps = g_array_new(FALSE, FALSE, sizeof(int));
  gboolean have_label = FALSE;
  for (guint i = 2; i < tok->len; i++) {
    const char *kv = g_ptr_array_index(tok, i);
    const char *eq = strchr(kv, '=');
    if (eq == NULL)
      return perr(c, "'%s': expected key=value", kv);
    g_autofree char *key = g_strndup(kv, (gsize)(eq - kv));
    const char *val = eq + 1;
    if (strcmp(key, "cat") == 0) {
      int v = find_name(op_cat_names, G_N_ELEMENTS(op_cat_names), val);
      if (v < 0)
        return perr(c,
                    "cat='%s': expected fwd, bwd, optimizer, comm_dp, comm_tp, comm_pp, "
                    "comm_other or other",
                    val);
      op.cat = (ts_op_cat)v;
    } else if (strcmp(key, "stream") == 0) {
      if (!parse_int_tok(c, key, val, 0, 63, &op.stream))
        return FALSE;
    } else if (strcmp(key, "label") == 0) {
      if (!parse_int_tok(c, key, val, 0, (gint64)tr->labels->len - 1, &op.label))
        return FALSE;
      have_label = TRUE;
    } else if (strcmp(key, "flops") == 0 && op.kind == TS_OP_COMPUTE) {
      if (!parse_num_tok(c, key, val, &op.flops))
        return FALSE;
    } else if (strcmp(key, "mem_bytes") == 0 && op.kind == TS_OP_COMPUTE) {
      if (!parse_num_tok(c, key, val, &op.mem_bytes))
        return FALSE;
    } else if (strcmp(key, "class") == 0 && op.kind == TS_OP_COMPUTE) {
      int v = ts_op_class_parse(val);
      if (v <= 0)
        return perr(c,
                    "class='%s': expected gemm, attention, flash, memory, optimizer, transfer or "
                    "other",
                    val);
      op.shape.oclass = v;
    } else if (strcmp(key, "prec") == 0 && op.kind == TS_OP_COMPUTE) {
      int v = ts_precision_parse(val);
      if (v < 0)
        return perr(c, "prec='%s': expected bf16, fp8 or fp32", val);
      op.shape.prec = v;
    } else if (strcmp(key, "kernels") == 0 && op.kind == TS_OP_COMPUTE) {
      if (!parse_int_tok(c, key, val, 0, 1000000, &op.shape.kernels))
        return FALSE;
    } else if (op.kind == TS_OP_COMPUTE && shape_key_index(key) >= 0) {
      if (!parse_num_tok(c, key, val, shape_field(&op.shape, shape_key_index(key))))
        return FALSE;
    } else if (strcmp(key, "bytes") == 0 &&
               (op.kind == TS_OP_COLL || op.kind == TS_OP_SEND || op.kind == TS_OP_RECV)) {
      if (!parse_num_tok(c, key, val, &op.bytes))
        return FALSE;
    } else if (strcmp(key, "kind") == 0 && op.kind == TS_OP_COLL) {
      int v = ts_coll_kind_parse(val);
      if (v < 0)
        return perr(c,
                    "kind='%s': expected allreduce, reducescatter, allgather, alltoall or "
                    "broadcast",
                    val);
      op.coll = (ts_coll_kind)v;
    } else if (strcmp(key, "algo") == 0 && op.kind == TS_OP_COLL) {
      int v = ts_coll_algo_parse(val);
      if (v < 0)
        return perr(c,
                    "algo='%s': expected auto, ring, bidir-ring, torus, hierarchical, tree, "
                    "halving-doubling or direct",
                    val);
      op.algo = (ts_coll_algo)v;
    } else if (strcmp(key, "group") == 0 && op.kind == TS_OP_COLL) {
      if (!parse_int_tok(c, key, val, 0, (gint64)tr->groups->len - 1, &op.group))
        return FALSE;
    } else if (strcmp(key, "axis") == 0 && (op.kind == TS_OP_SEND || op.kind == TS_OP_RECV)) {
      if (!parse_int_tok(c, key, val, 0, tr->naxes - 1, &op.axis))
        return FALSE;
    } else if (strcmp(key, "offset") == 0 && (op.kind == TS_OP_SEND || op.kind == TS_OP_RECV)) {
      if (!parse_int_tok(c, key, val, -65536, 65536, &op.offset))
        return FALSE;
    } else if (strcmp(key, "tag") == 0 && (op.kind == TS_OP_SEND || op.kind == TS_OP_RECV)) {
      if (!parse_int_tok(c, key, val, 0, G_MAXINT, &op.tag))
        return FALSE;
    } else if (strcmp(key, "deps") == 0) {
      g_auto(GStrv) parts = g_strsplit(val, ",", -1);
      for (char **d = parts; *d != NULL; d++) {
        int dep;
        if (!parse_int_tok(c, "deps", *d, 0, idx - 1, &dep))
          return FALSE;
        g_array_append_val(deps, dep);
      }
    } else {
      return perr(c, "'%s': not a key of a %s op", key, kind);
    }
  }
  if (!have_label)
    return perr(c, "%s op: missing label=", kind);
  if (op.kind == TS_OP_COLL && op.group < 0)
    return perr(c, "coll op: missing group=");
  if ((op.kind == TS_OP_SEND || op.kind == TS_OP_RECV) && (op.axis < 0 || op.offset == 0))
    return perr(c, "%s op: missing axis= or a non-zero offset=", kind);
  ts_trace_append(tr, prog, &op, (const int *)deps->data, (int)deps->len);
  return TRUE;
}

ts_trace *ts_trace_from_text(const char *text, const char *path, GError **error)
{
  parse_ctx c = {path, 0, error};
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  ts_trace *tr = g_new0(ts_trace, 1);
  tr->groups = g_ptr_array_new_with_free_func(group_free);
  tr->labels = g_ptr_array_new_with_free_func(g_free);
  tr->label_index = g_hash_table_new(g_str_hash, g_str_equal);
  int prog = -1, prog_ops = 0;
  gboolean header = FALSE, ended = FALSE;
  for (char **l = lines; *l != NULL; l++) {
    c.line++;
    g_autoptr(GPtrArray) tok = g_ptr_array_new_with_free_func(g_free);
    if (!tokenize(*l, tok)) {
      perr(&c, "unterminated string; expected a closing \"");
      goto fail;
    }
    if (tok->len == 0)
      continue;
    const char *w = g_ptr_array_index(tok, 0);
    if (ended) {
      perr(&c, "'%s' after 'end'; expected nothing", w);
      goto fail;
    }
    if (!header) {
      int ver = 0;
      if (strcmp(w, "trainsim-trace") != 0 || tok->len != 2) {
        perr(&c, "expected the header 'trainsim-trace %d'", TS_TRACE_FORMAT_VERSION);
        goto fail;
      }
      if (!parse_int_tok(&c, "version", g_ptr_array_index(tok, 1), 1, 1, &ver))
        goto fail;
      header = TRUE;
      continue;
    }
    if (prog >= 0 && prog_ops < tr->programs[prog].nops + 1 && g_ascii_isdigit(w[0])) {
      perr(&c, "more ops than program %d declared (%d)", prog, prog_ops);
      goto fail;
    }
    if (g_ascii_isdigit(w[0])) {
      if (prog < 0) {
        perr(&c, "op before any 'program' line");
        goto fail;
      }
      if (tok->len < 2) {
        perr(&c, "expected 'INDEX KIND key=value...'");
        goto fail;
      }
      if (!parse_op(&c, tr, prog, tok))
        goto fail;
      continue;
    }
    if (prog >= 0 && tr->programs[prog].nops != prog_ops) {
      perr(&c, "program %d declared %d ops but has %d", prog, prog_ops, tr->programs[prog].nops);
      goto fail;
    }
    if (strcmp(w, "ranks") == 0 && tok->len == 2) {
      if (!parse_int_tok(&c, "ranks", g_ptr_array_index(tok, 1), 1, 1 << 24, &tr->nranks))
        goto fail;
    } else if (strcmp(w, "dim") == 0 && tok->len == 3) {
      if (tr->ndims >= TS_MAX_DIMS) {
        perr(&c, "more than %d dims", TS_MAX_DIMS);
        goto fail;
      }
      if (!parse_int_tok(&c, "dim size", g_ptr_array_index(tok, 2), 1, 1 << 24,
                         &tr->dim_sizes[tr->ndims]))
        goto fail;
      tr->dim_names[tr->ndims++] = g_strdup(g_ptr_array_index(tok, 1));
    } else if (strcmp(w, "axis") == 0 && tok->len >= 4) {
      if (tr->naxes >= TS_MAX_AXES) {
        perr(&c, "more than %d axes", TS_MAX_AXES);
        goto fail;
      }
      ts_group_shape shape = {0};
      int size = 0;
      if (!parse_int_tok(&c, "axis size", g_ptr_array_index(tok, 2), 1, 1 << 24, &size))
        goto fail;
      const char *sym = g_ptr_array_index(tok, 3);
      if (strcmp(sym, "symmetric") != 0 && strcmp(sym, "asymmetric") != 0) {
        perr(&c, "'%s': expected symmetric or asymmetric", sym);
        goto fail;
      }
      for (guint i = 4; i < tok->len; i++) {
        g_auto(GStrv) f = g_strsplit(g_ptr_array_index(tok, i), ":", -1);
        int d = -1;
        for (int k = 0; k < tr->ndims; k++)
          if (g_strv_length(f) == 3 && strcmp(tr->dim_names[k], f[0]) == 0)
            d = k;
        if (d < 0 || shape.npieces >= TS_MAX_PIECES) {
          perr(&c, "piece '%s': expected DIM:SIZE:STRIDE with a declared dim",
               (char *)g_ptr_array_index(tok, i));
          goto fail;
        }
        ts_piece *pc = &shape.p[shape.npieces++];
        pc->dim = d;
        if (!parse_int_tok(&c, "piece size", f[1], 1, 1 << 24, &pc->size) ||
            !parse_int_tok(&c, "piece stride", f[2], 1, 1 << 24, &pc->stride))
          goto fail;
      }
      ts_trace_add_axis(tr, g_ptr_array_index(tok, 1), size, sym[0] == 's', &shape);
    } else if (strcmp(w, "group") == 0 && tok->len >= 3) {
      int gi = 0, axes[TS_MAX_AXES], n = 0;
      if (!parse_int_tok(&c, "group index", g_ptr_array_index(tok, 1), tr->groups->len,
                         tr->groups->len, &gi))
        goto fail;
      for (guint i = 2; i < tok->len; i++) {
        int a = -1;
        for (int k = 0; k < tr->naxes; k++)
          if (strcmp(tr->axes[k].name, g_ptr_array_index(tok, i)) == 0)
            a = k;
        if (a < 0 || n >= TS_MAX_AXES) {
          perr(&c, "group axis '%s': expected a declared axis", (char *)g_ptr_array_index(tok, i));
          goto fail;
        }
        axes[n++] = a;
      }
      if (ts_trace_group(tr, axes, n) != gi) {
        perr(&c, "group %d repeats an earlier group", gi);
        goto fail;
      }
    } else if (strcmp(w, "meta") == 0 && tok->len == 3 && !strchr(g_ptr_array_index(tok, 1), '=')) {
      const char *key = g_ptr_array_index(tok, 1);
      char **slot = strcmp(key, "model") == 0      ? &tr->meta.model
                    : strcmp(key, "split") == 0    ? &tr->meta.split
                    : strcmp(key, "topology") == 0 ? &tr->meta.topology
                    : strcmp(key, "producer") == 0 ? &tr->meta.producer
                                                   : NULL;
      if (slot == NULL) {
        perr(&c, "meta '%s': expected model, split, topology or producer", key);
        goto fail;
      }
      g_free(*slot);
      *slot = g_strdup(g_ptr_array_index(tok, 2));
    } else if (strcmp(w, "meta") == 0) {
      for (guint i = 1; i < tok->len; i++) {
        const char *kv = g_ptr_array_index(tok, i);
        if (g_str_has_prefix(kv, "samples=")) {
          if (!parse_num_tok(&c, "samples", kv + 8, &tr->meta.samples))
            goto fail;
        } else if (g_str_has_prefix(kv, "model_flops=")) {
          if (!parse_num_tok(&c, "model_flops", kv + 12, &tr->meta.model_flops))
            goto fail;
        } else {
          perr(&c, "meta '%s': expected samples= or model_flops=", kv);
          goto fail;
        }
      }
    } else if (strcmp(w, "label") == 0 && tok->len == 3) {
      int li = 0;
      if (!parse_int_tok(&c, "label index", g_ptr_array_index(tok, 1), tr->labels->len,
                         tr->labels->len, &li))
        goto fail;
      if (ts_trace_label(tr, g_ptr_array_index(tok, 2)) != li) {
        perr(&c, "label %d repeats an earlier label", li);
        goto fail;
      }
    } else if (strcmp(w, "program") == 0 && tok->len == 3) {
      if (tr->programs == NULL) {
        int asym = 1;
        for (int a = 0; a < tr->naxes; a++)
          if (!tr->axes[a].symmetric)
            asym *= tr->axes[a].size;
        ts_trace_set_programs(tr, asym);
      }
      int pi = 0;
      if (!parse_int_tok(&c, "program index", g_ptr_array_index(tok, 1), prog + 1, prog + 1, &pi))
        goto fail;
      if (pi >= tr->nprograms) {
        perr(&c, "program %d: the asymmetric axes define only %d programs", pi, tr->nprograms);
        goto fail;
      }
      if (!parse_int_tok(&c, "op count", g_ptr_array_index(tok, 2), 0, 1 << 28, &prog_ops))
        goto fail;
      prog = pi;
    } else if (strcmp(w, "end") == 0 && tok->len == 1) {
      ended = TRUE;
    } else {
      perr(&c, "'%s': expected ranks, dim, axis, group, meta, label, program, an op or end", w);
      goto fail;
    }
  }
  if (!header) {
    c.line = 1;
    perr(&c, "empty file; expected the header 'trainsim-trace %d'", TS_TRACE_FORMAT_VERSION);
    goto fail;
  }
  if (!ended) {
    perr(&c, "file ends without 'end' (truncated?)");
    goto fail;
  }
  if (tr->programs == NULL || prog != tr->nprograms - 1) {
    perr(&c, "expected %d programs, found %d", tr->programs ? tr->nprograms : 1, prog + 1);
    goto fail;
  }
  if (!ts_trace_check(tr, NULL, error)) {
    g_prefix_error(error, "%s: ", path);
    ts_trace_free(tr);
    return NULL;
  }
  return tr;
fail:
  ts_trace_free(tr);
  return NULL;
}
