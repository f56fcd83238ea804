/* ts_trace: the one intermediate form, its construction, checks and text form. */
#include "ts_trace.h"
#include "ts_coll_memo.h"
#include "ts_util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *op_kind_names[] = {"compute", "coll", "send", "recv", "wait", "xfer", "delay"};
static const char *resource_names[] = {"none",    "host_link", "nvme",
                                       "storage", "server",    "host_cpu"};
static const char *phase_names[] = {"none", "fwd", "bwd", "recompute", "sync", "optimizer"};
static const char *role_names[] = {"none",
                                   "compute",
                                   "tp",
                                   "ep",
                                   "grad",
                                   "param_gather",
                                   "pp",
                                   "offload",
                                   "optimizer",
                                   "marker",
                                   "input_grad",
                                   "weight_grad",
                                   "attention_recompute",
                                   "regather",
                                   "ps_update",
                                   "tied_grad",
                                   "expert_params",
                                   "op_recompute",
                                   "cp_kv",
                                   "cp_dkv",
                                   "cp_attention",
                                   "layout_copy",
                                   "contention"};

const char *ts_resource_name(int r)
{
  return r >= 0 && r < (int)G_N_ELEMENTS(resource_names) ? resource_names[r] : "?";
}

const char *ts_phase_name(int p)
{
  return p >= 0 && p < (int)G_N_ELEMENTS(phase_names) ? phase_names[p] : "?";
}

const char *ts_role_name(int r)
{
  return r >= 0 && r < (int)G_N_ELEMENTS(role_names) ? role_names[r] : "?";
}
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
  g_free(g->members);
  g_free(g);
}

/* The optional shape of a compute op: class, precision and kernels, then the non-zero
 * dimensions (docs/formats.md). Ops without one are written as before. */
static const char *const shape_keys[] = {"m",
                                         "n",
                                         "k",
                                         "batch",
                                         "aq",
                                         "akv",
                                         "ad",
                                         "abatch",
                                         "attn_flops",
                                         "scores_bytes",
                                         "elem_bytes",
                                         "epilogue_bytes",
                                         "attn_speedup",
                                         "causal",
                                         "conv3x3",
                                         "host_op_us",
                                         "no_sync",
                                         "chan_pad",
                                         "host_sync",
                                         "launch_blocking",
                                         "flash_eff",
                                         "split_accum",
                                         "attn_block",
                                         "attn_rerun"};

/* Offsets of the fields named by shape_keys, in its order: a constant table, not an array of
 * pointers built at every call (shape_hash and shape_equal read each field of every interned
 * compute op). */
static const size_t shape_off[] = {offsetof(ts_op_shape, m),
                                   offsetof(ts_op_shape, n),
                                   offsetof(ts_op_shape, k),
                                   offsetof(ts_op_shape, batch),
                                   offsetof(ts_op_shape, aq),
                                   offsetof(ts_op_shape, akv),
                                   offsetof(ts_op_shape, ad),
                                   offsetof(ts_op_shape, abatch),
                                   offsetof(ts_op_shape, attn_flops),
                                   offsetof(ts_op_shape, scores_bytes),
                                   offsetof(ts_op_shape, elem_bytes),
                                   offsetof(ts_op_shape, epilogue_bytes),
                                   offsetof(ts_op_shape, attn_speedup),
                                   offsetof(ts_op_shape, causal),
                                   offsetof(ts_op_shape, conv3x3),
                                   offsetof(ts_op_shape, host_op_us),
                                   offsetof(ts_op_shape, no_sync),
                                   offsetof(ts_op_shape, chan_pad),
                                   offsetof(ts_op_shape, host_sync),
                                   offsetof(ts_op_shape, launch_blocking),
                                   offsetof(ts_op_shape, flash_eff),
                                   offsetof(ts_op_shape, split_accum),
                                   offsetof(ts_op_shape, attn_block),
                                   offsetof(ts_op_shape, attn_rerun)};
G_STATIC_ASSERT(G_N_ELEMENTS(shape_off) == G_N_ELEMENTS(shape_keys));

static inline double *shape_field(ts_op_shape *sh, int i)
{
  return (double *)(void *)((char *)sh + shape_off[i]);
}

/* Shapes are interned by value: hash and compare field by field (padding is never read). Every
 * compute op a planner emits is interned, so both are on the trace builder's hot path: no copy
 * of the shape, the bits of each field mixed inline, and an interned shape (the planner passes
 * back the pointer it was given) equal to itself without reading it. */
static inline guint64 shape_mix(guint64 h, guint64 w)
{
  h = (h ^ w) * 0x9E3779B97F4A7C15u;
  return h ^ (h >> 29);
}

static guint shape_hash(gconstpointer p)
{
  const ts_op_shape *s = p;
  guint64 h = (guint64)(guint)s->oclass * 31u + (guint64)(guint)s->prec * 7u + (guint)s->kernels;
  for (size_t i = 0; i < G_N_ELEMENTS(shape_keys); i++) {
    double v = *shape_field((ts_op_shape *)s, (int)i) + 0.0; /* -0 hashes as 0, as it compares */
    guint64 bits;
    memcpy(&bits, &v, sizeof bits);
    h = shape_mix(h, bits);
  }
  return (guint)(h ^ (h >> 32));
}

static gboolean shape_equal(gconstpointer a, gconstpointer b)
{
  if (a == b)
    return TRUE;
  const ts_op_shape *x = a, *y = b;
  if (x->oclass != y->oclass || x->prec != y->prec || x->kernels != y->kernels)
    return FALSE;
  for (size_t i = 0; i < G_N_ELEMENTS(shape_keys); i++)
    if (*shape_field((ts_op_shape *)x, (int)i) != *shape_field((ts_op_shape *)y, (int)i))
      return FALSE;
  return TRUE;
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
    ts_program *pr = &tr->programs[p];
    g_free(pr->pk);
    g_free(pr->ext_of);
    if (pr->ext != NULL)
      g_array_unref(pr->ext);
    if (pr->wide != NULL)
      g_array_unref(pr->wide);
    g_free(pr->dep_off);
    g_free(pr->deps);
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
  if (tr->shapes != NULL)
    g_hash_table_unref(tr->shapes);
  g_free(tr->meta.model);
  g_free(tr->meta.split);
  g_free(tr->meta.topology);
  g_free(tr->meta.producer);
  if (tr->colls != NULL)
    g_array_unref(tr->colls);
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

const ts_op_shape *ts_trace_intern_shape(ts_trace *tr, const ts_op_shape *s)
{
  if (s == NULL)
    return NULL;
  guint slot = (guint)(((guintptr)s >> 4 ^ (guintptr)s >> 10) & 63u);
  if (tr->shape_recent[slot] == s) /* the trace's own copy (never of class 0) */
    return s;
  if (s->oclass == TS_OPC_ROOFLINE)
    return NULL;
  /* Created on first use: every constructor of a trace (ts_trace_new, the reader) gets it. */
  if (tr->shapes == NULL)
    tr->shapes = g_hash_table_new_full(shape_hash, shape_equal, g_free, NULL);
  ts_op_shape *have = g_hash_table_lookup(tr->shapes, s);
  if (have != NULL) {
    tr->shape_recent[((guintptr)have >> 4 ^ (guintptr)have >> 10) & 63u] = have;
    return have;
  }
  ts_op_shape *c = g_new0(ts_op_shape, 1); /* zeroed, then the fields: no stray padding */
  c->oclass = s->oclass;
  c->prec = s->prec;
  c->kernels = s->kernels;
  ts_op_shape src = *s;
  for (int i = 0; i < (int)G_N_ELEMENTS(shape_keys); i++)
    *shape_field(c, i) = *shape_field(&src, i);
  g_hash_table_add(tr->shapes, c);
  tr->shape_recent[((guintptr)c >> 4 ^ (guintptr)c >> 10) & 63u] = c;
  return c;
}

/* Whether a double is +0.0 (a field the packed form drops must be exactly that). */
static inline gboolean zero_bits(double v)
{
  guint64 b;
  memcpy(&b, &v, sizeof b);
  return b == 0;
}

/* Packs op, whose shape is `shape` (interned; NULL unless a compute op), into *k; fills *x
 * with its rare fields. Returns 0 when the packed form and x hold every field (x all zero: no
 * side record), 1 when x is needed, 2 when the op does not pack (kept whole). The op's own
 * shape field is not read: the caller's op is read in place, not copied to put the interned
 * shape in it (issue 15: that copy of a just-written ts_op stalled on its stores, ~1% of the
 * every-split sweep). */
static int op_pack(const ts_op *op, const ts_op_shape *shape, ts_op_packed *k, ts_op_ext *x)
{
  memset(k, 0, sizeof *k);
  k->kind = op->kind;
  k->cat = op->cat;
  k->coll = op->coll;
  k->algo = op->algo;
  k->resource = op->resource;
  k->t_phase = op->t_phase;
  k->t_role = op->t_role;
  k->stream = op->stream;
  k->label = op->label;
  *x = (ts_op_ext){op->t_layer, op->t_layer_last, op->t_micro, op->t_stage,
                   op->tag,     op->peer,         op->bw_Bps};
  /* What the kind's slots cannot hold must be zero (a zero-initialised op). */
  gboolean fits;
  switch (op->kind) {
  case TS_OP_COMPUTE:
    k->u.shape = shape;
    k->d0 = op->flops;
    k->d1 = op->mem_bytes;
    fits = zero_bits(op->bytes) && (op->group == 0 || op->group == -1) &&
           (op->axis == 0 || op->axis == -1) && op->offset == 0 && zero_bits(op->seconds) &&
           op->coll_id == 0;
    break;
  case TS_OP_COLL:
    k->u.g.i0 = op->group;
    k->u.g.i1 = op->coll_id;
    k->d0 = op->bytes;
    fits = zero_bits(op->flops) && zero_bits(op->mem_bytes) && shape == NULL &&
           (op->axis == 0 || op->axis == -1) && op->offset == 0 && zero_bits(op->seconds);
    break;
  case TS_OP_SEND:
  case TS_OP_RECV:
    k->u.g.i0 = op->axis;
    k->u.g.i1 = op->offset;
    k->d0 = op->bytes;
    fits = zero_bits(op->flops) && zero_bits(op->mem_bytes) && shape == NULL &&
           (op->group == 0 || op->group == -1) && zero_bits(op->seconds) && op->coll_id == 0;
    break;
  case TS_OP_XFER:
  case TS_OP_DELAY:
    k->d0 = op->bytes;
    k->d1 = op->seconds;
    fits = zero_bits(op->flops) && zero_bits(op->mem_bytes) && shape == NULL &&
           (op->group == 0 || op->group == -1) && (op->axis == 0 || op->axis == -1) &&
           op->offset == 0 && op->coll_id == 0;
    break;
  default:
    fits = zero_bits(op->flops) && zero_bits(op->mem_bytes) && shape == NULL &&
           zero_bits(op->bytes) && (op->group == 0 || op->group == -1) &&
           (op->axis == 0 || op->axis == -1) && op->offset == 0 && zero_bits(op->seconds) &&
           op->coll_id == 0;
    break;
  }
  if (!fits)
    return 2;
  if (op->kind != TS_OP_COLL && op->group == -1)
    k->flags |= TS_PK_GROUP_M1;
  if (op->kind != TS_OP_SEND && op->kind != TS_OP_RECV && op->axis == -1)
    k->flags |= TS_PK_AXIS_M1;
  return x->t_layer != 0 || x->t_layer_last != 0 || x->t_micro != 0 || x->t_stage != 0 ||
                 x->tag != 0 || x->peer != 0 || !zero_bits(x->bw_Bps)
             ? 1
             : 0;
}

/* Stores op (with the interned shape) as op i of prog, i < cap; its side record reused when it
 * has one. */
static void op_store(ts_program *prog, int i, const ts_op *op, const ts_op_shape *shape)
{
  guint8 keep = i < prog->nops ? prog->pk[i].flags & TS_PK_NODEPS : 0;
  guint32 had = prog->ext_of != NULL && i < prog->nops ? prog->ext_of[i] : 0;
  guint8 had_flags = i < prog->nops ? prog->pk[i].flags : 0;
  ts_op_ext x;
  int how = op_pack(op, shape, &prog->pk[i], &x);
  prog->pk[i].flags |= keep;
  if (how == 0) {
    if (prog->ext_of != NULL)
      prog->ext_of[i] = 0;
    return;
  }
  if (prog->ext_of == NULL)
    prog->ext_of = g_new0(guint32, (gsize)prog->cap);
  if (how == 1) {
    if (prog->ext == NULL)
      prog->ext = g_array_new(FALSE, FALSE, sizeof(ts_op_ext));
    if (had > 0 && (had_flags & TS_PK_EXT)) {
      g_array_index(prog->ext, ts_op_ext, had - 1) = x;
    } else {
      g_array_append_val(prog->ext, x);
      had = prog->ext->len;
    }
    prog->pk[i].flags |= TS_PK_EXT;
  } else {
    if (prog->wide == NULL)
      prog->wide = g_array_new(FALSE, FALSE, sizeof(ts_op));
    ts_op w = *op;
    w.shape = shape;
    w.ndeps = 0;
    w.deps = NULL;
    if (had > 0 && (had_flags & TS_PK_WIDE)) {
      g_array_index(prog->wide, ts_op, had - 1) = w;
    } else {
      g_array_append_val(prog->wide, w);
      had = prog->wide->len;
    }
    prog->pk[i].flags |= TS_PK_WIDE;
  }
  prog->ext_of[i] = had;
}

void ts_program_set_op(ts_trace *tr, int p, int i, const ts_op *op)
{
  g_return_if_fail(p >= 0 && p < tr->nprograms && i >= 0 && i < tr->programs[p].nops);
  op_store(&tr->programs[p], i, op,
           op->kind == TS_OP_COMPUTE ? ts_trace_intern_shape(tr, op->shape) : NULL);
}

void ts_program_drop_deps(ts_program *p, int i)
{
  g_return_if_fail(i >= 0 && i < p->nops);
  p->pk[i].flags |= TS_PK_NODEPS;
}

gsize ts_program_bytes(const ts_program *p)
{
  gsize b = sizeof(ts_op_packed) * (gsize)p->nops + sizeof(guint32) * ((gsize)p->nops + 1) +
            sizeof(int) * (gsize)p->ndeps_total;
  if (p->ext_of != NULL)
    b += sizeof(guint32) * (gsize)p->nops;
  if (p->ext != NULL)
    b += sizeof(ts_op_ext) * p->ext->len;
  if (p->wide != NULL)
    b += sizeof(ts_op) * p->wide->len;
  return b;
}

/* Op capacity cap (> prog->cap) for prog's op arrays. */
static void program_grow_ops(ts_program *prog, int cap)
{
  prog->pk = g_renew(ts_op_packed, prog->pk, cap);
  prog->dep_off = g_renew(guint32, prog->dep_off, (gsize)cap + 1);
  if (prog->ext_of != NULL) {
    prog->ext_of = g_renew(guint32, prog->ext_of, cap);
    memset(prog->ext_of + prog->cap, 0, sizeof(guint32) * (gsize)(cap - prog->cap));
  }
  if (prog->cap == 0)
    prog->dep_off[0] = 0;
  prog->cap = cap;
}

void ts_program_reserve(ts_trace *tr, int p, int nops, guint32 ndeps, guint next)
{
  g_return_if_fail(p >= 0 && p < tr->nprograms && nops >= 0);
  ts_program *prog = &tr->programs[p];
  if (nops > prog->cap)
    program_grow_ops(prog, nops);
  if (ndeps > prog->deps_cap) {
    prog->deps = g_renew(int, prog->deps, ndeps);
    prog->deps_cap = ndeps;
  }
  if (next > 0 && prog->ext == NULL)
    prog->ext = g_array_sized_new(FALSE, FALSE, sizeof(ts_op_ext), next);
}

int ts_trace_append(ts_trace *tr, int p, const ts_op *op, const int *deps, int ndeps)
{
  g_return_val_if_fail(p >= 0 && p < tr->nprograms && ndeps >= 0, -1);
  ts_program *prog = &tr->programs[p];
  /* Grow geometrically: programs of large models have tens of thousands of ops. */
  if (prog->nops == prog->cap)
    program_grow_ops(prog, prog->cap == 0 ? 16 : prog->cap * 2);
  if ((guint64)prog->ndeps_total + (guint64)ndeps > G_MAXUINT32)
    g_error("program %d: more than 2^32 dependencies", p);
  if (prog->ndeps_total + (guint32)ndeps > prog->deps_cap) {
    guint32 cap = MAX(prog->ndeps_total + (guint32)ndeps,
                      prog->deps_cap < 64 ? 64 : prog->deps_cap + prog->deps_cap / 2);
    prog->deps = g_renew(int, prog->deps, cap);
    prog->deps_cap = cap;
  }
  int i = prog->nops;
  op_store(prog, i, op, op->kind == TS_OP_COMPUTE ? ts_trace_intern_shape(tr, op->shape) : NULL);
  /* Most ops have a dependency or two: copied here, not by a call to memcpy. */
  int *to = prog->deps + prog->ndeps_total;
  for (int k = 0; k < ndeps; k++)
    to[k] = deps[k];
  prog->ndeps_total += (guint32)ndeps;
  prog->dep_off[i + 1] = prog->ndeps_total;
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
ts_array ts_trace_array(const ts_trace *tr)
{
  ts_array a = {0};
  a.ndims = tr->ndims;
  for (int d = 0; d < tr->ndims; d++) {
    a.size[d] = tr->dim_sizes[d];
    a.name[d] = tr->dim_names[d];
  }
  a.label = "trace";
  return a;
}

int ts_trace_axis_coord(const ts_trace *tr, int rank, int a)
{
  ts_array t = ts_trace_array(tr);
  int m = 0;
  ts_array_base_chip(&t, &tr->axes[a].shape, rank, &m);
  return m;
}

int ts_trace_axis_neighbor(const ts_trace *tr, int rank, int a, int offset)
{
  ts_array t = ts_trace_array(tr);
  int m = 0;
  int base = ts_array_base_chip(&t, &tr->axes[a].shape, rank, &m);
  int target = m + offset;
  if (target < 0 || target >= tr->axes[a].size)
    return -1;
  return ts_array_member_chip(&t, &tr->axes[a].shape, base, target);
}

int ts_trace_program_of(const ts_trace *tr, int rank)
{
  int p = 0;
  for (int a = tr->naxes - 1; a >= 0; a--)
    if (!tr->axes[a].symmetric)
      p = p * tr->axes[a].size + ts_trace_axis_coord(tr, rank, a);
  return p;
}

/* A member list as a shape placed at members[0]: pieces found from the steps between
 * successive members, then every member verified. FALSE when the list is not regular. */
static gboolean infer_shape(const ts_array *t, const int *members, int n, ts_group_shape *out)
{
  memset(out, 0, sizeof *out);
  if (n <= 1)
    return TRUE;
  int radix = 1;
  while (radix < n) {
    if (out->npieces >= TS_MAX_PIECES || n % radix != 0)
      return FALSE;
    /* The next piece: the step from member 0 to member `radix` along one dimension. */
    int d0 = members[radix] - members[0];
    if (d0 <= 0)
      return FALSE;
    int dim = -1, stride = 0;
    gint64 place = 1;
    for (int d = 0; d < t->ndims; d++) {
      int sz = t->size[d];
      if (d0 % (place * sz) != 0) {
        if (d0 % place != 0)
          return FALSE;
        dim = d;
        stride = (int)(d0 / place);
        /* Also requires no carry into higher dimensions: checked by the final verification. */
        break;
      }
      place *= sz;
    }
    if (dim < 0 || stride <= 0)
      return FALSE;
    /* Size: members radix, 2 radix, ... continue the progression. */
    int size = 1;
    while ((gint64)radix * (size + 1) <= n &&
           members[radix * size] - members[0] == (gint64)size * d0)
      size++;
    if (n % ((gint64)radix * size) != 0)
      return FALSE;
    out->p[out->npieces++] = (ts_piece){dim, size, stride};
    radix *= size;
  }
  if (!ts_array_shape_valid(t, out, NULL) || ts_group_size(out) != n)
    return FALSE;
  int m0 = -1;
  if (ts_array_base_chip(t, out, members[0], &m0) != members[0] || m0 != 0)
    return FALSE;
  for (int m = 0; m < n; m++)
    if (ts_array_member_chip(t, out, members[0], m) != members[m])
      return FALSE;
  return TRUE;
}

int ts_trace_group_members(ts_trace *tr, const char *name, const int *members, int n,
                           GError **error)
{
  if (n < 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID, "group %s: expected at least one member", name);
    return -1;
  }
  g_autofree guint8 *seen = g_new0(guint8, tr->nranks > 0 ? tr->nranks : 1);
  for (int m = 0; m < n; m++) {
    if (members[m] < 0 || members[m] >= tr->nranks) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "group %s: member %d is rank %d; the trace has ranks 0 to %d", name, m,
                  members[m], tr->nranks - 1);
      return -1;
    }
    if (seen[members[m]]++) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID, "group %s: rank %d is listed twice", name,
                  members[m]);
      return -1;
    }
  }
  ts_group *g = g_new0(ts_group, 1);
  g->name = g_strdup(name);
  g->nmembers = n;
  g->members = g_memdup2(members, sizeof(int) * (gsize)n);
  ts_array t = ts_trace_array(tr);
  if (!infer_shape(&t, members, n, &g->shape))
    memset(&g->shape, 0, sizeof g->shape);
  g_ptr_array_add(tr->groups, g);
  return (int)tr->groups->len - 1;
}

int ts_trace_group_size(const ts_group *g)
{
  return g->members != NULL ? g->nmembers : ts_group_size(&g->shape);
}

int ts_trace_group_chip(const ts_topo *t, const ts_group *g, int base, int m)
{
  if (g->members != NULL)
    return m >= 0 && m < g->nmembers ? g->members[m] : -1;
  return ts_group_member_chip(t, &g->shape, base, m);
}

int ts_trace_group_rank(const ts_trace *tr, const ts_group *g, int base, int m)
{
  if (g->members != NULL)
    return g->members[m];
  ts_array t = ts_trace_array(tr);
  return ts_array_member_chip(&t, &g->shape, base, m);
}

int ts_trace_group_base(const ts_trace *tr, const ts_group *g, int rank, int *member)
{
  if (g->members != NULL) {
    for (int m = 0; m < g->nmembers; m++)
      if (g->members[m] == rank) {
        if (member != NULL)
          *member = m;
        return g->members[0];
      }
    return -1;
  }
  ts_array t = ts_trace_array(tr);
  return ts_array_base_chip(&t, &g->shape, rank, member);
}

int ts_trace_op_peer(const ts_trace *tr, const ts_op *op, int rank)
{
  if (op->peer > 0)
    return op->peer - 1 < tr->nranks ? op->peer - 1 : -1;
  if (op->axis < 0 || op->axis >= tr->naxes)
    return -1;
  return ts_trace_axis_neighbor(tr, rank, op->axis, op->offset);
}

double ts_resource_bw_Bps(const ts_topo *t, int resource)
{
  switch (resource) {
  case TS_RES_HOST_LINK:
    return t->chip.host_link_bw_Bps;
  case TS_RES_NVME:
    return t->chip.nvme_bw_Bps;
  case TS_RES_SERVER: {
    /* The slowest network dimension's port (a server on another host, reached over it). */
    double bw = 0;
    for (int d = 0; d < t->ndims; d++)
      if (bw == 0 || t->dims[d].link_bw_Bps < bw)
        bw = t->dims[d].link_bw_Bps;
    return bw;
  }
  default:
    return 0.0; /* storage: the op must say its bandwidth */
  }
}

/* Memo key of ts_trace_resolve_algos: a collective as the trace states it (algo may be auto),
 * hashed field by field (the bytes by their bits), never formatted. */
typedef struct {
  int group, coll, algo;
  guint64 bytes_bits;
} coll_memo_key;

static guint coll_memo_hash(gconstpointer p)
{
  const coll_memo_key *k = p;
  guint64 h = k->bytes_bits * 0x9E3779B97F4A7C15u;
  h ^= ((guint64)(guint)k->group << 32 | (guint)k->coll << 16 | (guint)k->algo) *
       0xC2B2AE3D27D4EB4Fu;
  h ^= h >> 31;
  return (guint)(h ^ (h >> 32));
}

static gboolean coll_memo_equal(gconstpointer x, gconstpointer y)
{
  const coll_memo_key *a = x, *b = y;
  return a->group == b->group && a->coll == b->coll && a->algo == b->algo &&
         a->bytes_bits == b->bytes_bits;
}

void ts_program_set_resolved(ts_program *prog, int i, int algo, int coll_id)
{
  if (prog->pk[i].flags & TS_PK_WIDE) {
    ts_op *w = &g_array_index(prog->wide, ts_op, prog->ext_of[i] - 1);
    w->algo = (guint8)algo;
    w->coll_id = coll_id;
    return;
  }
  prog->pk[i].algo = (guint8)algo;
  prog->pk[i].u.g.i1 = coll_id;
}

gboolean ts_trace_resolve_algos(ts_trace *tr, const ts_topo *t, GError **error)
{
  /* Memo per collective as stated (group, kind, algo, bytes): a step repeats a few sizes
   * thousands of times. The value is the distinct collective's id (ts_op.coll_id). In front of
   * it, the last collective seen on each group, since a layer's ops repeat per micro-batch. */
  g_autoptr(GHashTable) memo = g_hash_table_new_full(coll_memo_hash, coll_memo_equal, g_free, NULL);
  if (tr->colls != NULL)
    g_array_unref(tr->colls);
  tr->colls = g_array_new(FALSE, FALSE, sizeof(ts_coll_desc));
  guint ng = tr->groups->len;
  coll_memo_key *last_key = g_new0(coll_memo_key, ng > 0 ? ng : 1);
  int *last_id = g_new0(int, ng > 0 ? ng : 1);
  gboolean ok = TRUE;
  for (int p = 0; p < tr->nprograms && ok; p++)
    for (int i = 0; i < tr->programs[p].nops; i++) {
      if (ts_program_op_kind(&tr->programs[p], i) != TS_OP_COLL)
        continue;
      ts_program *prog = &tr->programs[p];
      /* The collective's fields from the packed op (a wide one expanded). */
      ts_op ob;
      const ts_op_packed *pk = &prog->pk[i];
      if (pk->flags & TS_PK_WIDE) {
        ob = ts_program_op(prog, i);
      } else {
        ob.group = pk->u.g.i0;
        ob.coll = pk->coll;
        ob.algo = pk->algo;
        ob.bytes = pk->d0;
        ob.label = pk->label;
      }
      const ts_op *o = &ob;
      ts_program_set_resolved(prog, i, o->algo, 0);
      if (o->group < 0 || (guint)o->group >= ng)
        continue; /* ts_trace_check refuses it */
      coll_memo_key k = {o->group, (int)o->coll, (int)o->algo, 0};
      memcpy(&k.bytes_bits, &o->bytes, sizeof k.bytes_bits);
      const ts_coll_desc *d;
      /* Field by field against the values, not the key just stored (issue 15, twentieth pass:
       * comparing the key as a whole loaded 8 bytes over two 4-byte stores, a store-forwarding
       * stall per collective, 2% of the every-split sweep). */
      const coll_memo_key *lk = &last_key[o->group];
      if (last_id[o->group] > 0 && lk->group == o->group && lk->coll == (int)o->coll &&
          lk->algo == (int)o->algo && memcmp(&lk->bytes_bits, &o->bytes, sizeof o->bytes) == 0) {
        d = &g_array_index(tr->colls, ts_coll_desc, last_id[o->group] - 1);
        ts_program_set_resolved(prog, i, d->algo, last_id[o->group]);
        continue;
      }
      gpointer v = g_hash_table_lookup(memo, &k);
      if (v == NULL) {
        const ts_group *g = g_ptr_array_index(tr->groups, o->group);
        ts_coll_desc nd = {o->group, o->coll, o->algo, o->bytes};
        if (o->algo != TS_ALGO_AUTO || ts_trace_group_size(g) <= 1) {
          /* stated algorithms, and groups of one (no communication), as they are */
        } else if (g->shape.npieces == 0) {
          nd.algo = TS_ALGO_RING; /* irregular member lists: a ring over the list */
        } else {
          ts_coll_algo chosen = TS_ALGO_AUTO;
          if (ts_coll_time_memo(t, o->coll, TS_ALGO_AUTO, &g->shape, o->bytes, &chosen, error) <
              0) {
            g_prefix_error(error, "program %d op %d '%s': ", p, i,
                           (const char *)g_ptr_array_index(tr->labels, o->label));
            ok = FALSE;
            break;
          }
          nd.algo = chosen;
        }
        g_array_append_val(tr->colls, nd);
        v = GINT_TO_POINTER((int)tr->colls->len);
        g_hash_table_insert(memo, g_memdup2(&k, sizeof k), v);
      }
      int id = GPOINTER_TO_INT(v);
      d = &g_array_index(tr->colls, ts_coll_desc, id - 1);
      ts_program_set_resolved(prog, i, d->algo, id);
      last_key[o->group] = k;
      last_id[o->group] = id;
    }
  g_free(last_key);
  g_free(last_id);
  return ok;
}

/* Axes must partition the ranks: on each dimension, the pieces of all axes, ordered by stride,
 * are the mixed-radix digits of the coordinate (stride 1, then the product of the sizes before,
 * ending at the dimension's size). Overlapping or missing pieces give wrong replays, not
 * errors, further on, so they are refused here. */
static gboolean axes_partition(const ts_trace *tr, GError **error)
{
  for (int d = 0; d < tr->ndims; d++) {
    ts_piece pcs[TS_MAX_AXES * TS_MAX_PIECES];
    const char *owner[TS_MAX_AXES * TS_MAX_PIECES];
    int n = 0;
    for (int a = 0; a < tr->naxes; a++)
      for (int k = 0; k < tr->axes[a].shape.npieces; k++)
        if (tr->axes[a].shape.p[k].dim == d) {
          pcs[n] = tr->axes[a].shape.p[k];
          owner[n++] = tr->axes[a].name;
        }
    /* Insertion sort by stride (a handful of pieces). */
    for (int i = 1; i < n; i++)
      for (int j = i; j > 0 && pcs[j].stride < pcs[j - 1].stride; j--) {
        ts_piece tp = pcs[j];
        pcs[j] = pcs[j - 1];
        pcs[j - 1] = tp;
        const char *to = owner[j];
        owner[j] = owner[j - 1];
        owner[j - 1] = to;
      }
    gint64 place = 1;
    for (int i = 0; i < n; i++) {
      if (pcs[i].stride != place) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "axis %s: piece %s:%d:%d %s; expected the axes' pieces on dim %s to "
                    "partition it (the next stride is %" G_GINT64_FORMAT ")",
                    owner[i], tr->dim_names[d], pcs[i].size, pcs[i].stride,
                    pcs[i].stride < place ? "overlaps another axis's" : "leaves a gap",
                    tr->dim_names[d], place);
        return FALSE;
      }
      place *= pcs[i].size;
      if (place > tr->dim_sizes[d])
        break;
    }
    if (tr->naxes > 0 && place != tr->dim_sizes[d]) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "the axes cover %" G_GINT64_FORMAT " of the %d positions of dim %s; expected "
                  "their pieces to partition it exactly",
                  place, tr->dim_sizes[d], tr->dim_names[d]);
      return FALSE;
    }
  }
  return TRUE;
}

/* Header-level checks, before any program is allocated: dims against ranks and the axes'
 * sizes in 64 bits (a few lines of text must not ask for gigabytes). */
static gboolean check_layout(const ts_trace *tr, GError **error)
{
  gint64 dprod = 1;
  for (int d = 0; d < tr->ndims; d++) {
    dprod *= tr->dim_sizes[d];
    if (dprod > tr->nranks)
      break;
  }
  if (tr->ndims > 0 && dprod != tr->nranks) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "the dims multiply to %s%" G_GINT64_FORMAT " ranks but the trace has %d",
                dprod > tr->nranks ? "more than " : "",
                dprod > tr->nranks ? (gint64)tr->nranks : dprod, tr->nranks);
    return FALSE;
  }
  gint64 prod = 1;
  ts_array tt = ts_trace_array(tr);
  for (int a = 0; a < tr->naxes; a++) {
    const ts_axis *ax = &tr->axes[a];
    if (ts_group_size(&ax->shape) != ax->size) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "axis %s: size %d differs from its shape's %d members", ax->name, ax->size,
                  ts_group_size(&ax->shape));
      return FALSE;
    }
    if (!ts_array_shape_valid(&tt, &ax->shape, error)) {
      g_prefix_error(error, "axis %s: ", ax->name);
      return FALSE;
    }
    prod *= ax->size;
    if (prod > tr->nranks) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "axes %s..%s cover more than the trace's %d ranks", tr->axes[0].name, ax->name,
                  tr->nranks);
      return FALSE;
    }
  }
  if (tr->naxes > 0 && prod != tr->nranks) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "axes cover %" G_GINT64_FORMAT " ranks but the trace has %d", prod, tr->nranks);
    return FALSE;
  }
  if (!axes_partition(tr, error))
    return FALSE;
  for (guint gi = 0; gi < tr->groups->len; gi++) {
    const ts_group *g = g_ptr_array_index(tr->groups, gi);
    for (int i = 0; i < g->naxes; i++)
      for (int j = 0; j < i; j++)
        if (g->axes[i] == g->axes[j]) {
          g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                      "group %u lists axis %s twice; expected distinct axes", gi,
                      tr->axes[g->axes[i]].name);
          return FALSE;
        }
  }
  return TRUE;
}

/* Programs the asymmetric axes define (<= ranks once check_layout passed). */
static int asym_programs(const ts_trace *tr)
{
  gint64 asym = 1;
  for (int a = 0; a < tr->naxes; a++)
    if (!tr->axes[a].symmetric)
      asym *= tr->axes[a].size;
  return (int)MIN(asym, (gint64)G_MAXINT);
}

static int int_cmp(const void *a, const void *b)
{
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The fields of an op that ts_trace_check reads. */
typedef struct {
  int kind, resource, t_phase, t_role, label, group, axis, offset, peer;
  int t_layer, t_layer_last, t_micro, t_stage;
  double flops, mem_bytes, bytes, seconds, bw_Bps;
} check_view;

/* Op i's checked fields, read from the packed store (issue 15: expanding every op of every
 * configuration of a sweep into a whole ts_op was 5% of the sweep); the values are those of
 * ts_program_op's expansion, field by field. */
static inline void check_view_of(const ts_program *p, int i, check_view *v)
{
  const ts_op_packed *k = &p->pk[i];
  if (k->flags & TS_PK_WIDE) {
    const ts_op o = ts_program_op(p, i);
    *v = (check_view){o.kind,    o.resource, o.t_phase,   o.t_role,  o.label,        o.group,
                      o.axis,    o.offset,   o.peer,      o.t_layer, o.t_layer_last, o.t_micro,
                      o.t_stage, o.flops,    o.mem_bytes, o.bytes,   o.seconds,      o.bw_Bps};
    return;
  }
  memset(v, 0, sizeof *v);
  v->kind = k->kind;
  v->resource = k->resource;
  v->t_phase = k->t_phase;
  v->t_role = k->t_role;
  v->label = k->label;
  v->group = k->flags & TS_PK_GROUP_M1 ? -1 : 0;
  v->axis = k->flags & TS_PK_AXIS_M1 ? -1 : 0;
  switch (k->kind) {
  case TS_OP_COMPUTE:
    v->flops = k->d0;
    v->mem_bytes = k->d1;
    break;
  case TS_OP_COLL:
    v->group = k->u.g.i0;
    v->bytes = k->d0;
    break;
  case TS_OP_SEND:
  case TS_OP_RECV:
    v->axis = k->u.g.i0;
    v->offset = k->u.g.i1;
    v->bytes = k->d0;
    break;
  case TS_OP_XFER:
  case TS_OP_DELAY:
    v->bytes = k->d0;
    v->seconds = k->d1;
    break;
  default:
    break;
  }
  if (k->flags & TS_PK_EXT) {
    const ts_op_ext *x = &g_array_index(p->ext, ts_op_ext, p->ext_of[i] - 1);
    v->t_layer = x->t_layer;
    v->t_layer_last = x->t_layer_last;
    v->t_micro = x->t_micro;
    v->t_stage = x->t_stage;
    v->peer = x->peer;
    v->bw_Bps = x->bw_Bps;
  }
}

/* The first transfer whose resource has no bandwidth (the op's or the topology's). */
static gboolean check_xfer_bandwidth(const ts_trace *tr, const ts_topo *t, GError **error)
{
  for (int p = 0; p < tr->nprograms; p++)
    for (int i = 0; i < tr->programs[p].nops; i++) {
      if (ts_program_op_kind(&tr->programs[p], i) != TS_OP_XFER)
        continue;
      const ts_op ob = ts_program_op(&tr->programs[p], i), *o = &ob;
      if (o->kind == TS_OP_XFER && o->bw_Bps <= 0 && o->bytes > 0 &&
          ts_resource_bw_Bps(t, o->resource) <= 0) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "program %d op %d '%s': transfer over %s, which topology %s gives no "
                    "bandwidth; expected its [host] key or the op's bw_Bps",
                    p, i, (const char *)g_ptr_array_index(tr->labels, o->label),
                    ts_resource_name(o->resource), t->path ? t->path : t->name);
        return FALSE;
      }
    }
  return TRUE;
}

/* Whether a size is in [0, max] (FALSE for NaN). */
static inline gboolean in_range(double v, double max)
{
  return v >= 0 && v <= max;
}

/* Whether packed op i of prog passes every check of check_ops (a TRUE here is exact; FALSE
 * only sends the op to check_ops' field-by-field tests, which name what failed). Reads the
 * packed fields where they are, without expanding the op (issue 15: ts_trace_check was 3% of
 * the every-split sweep). */
static inline gboolean packed_op_ok(const ts_trace *tr, const ts_program *prog, int i)
{
  const ts_op_packed *k = &prog->pk[i];
  if (k->flags & TS_PK_WIDE)
    return FALSE;
  if (k->kind >= TS_OP_NKINDS || k->resource >= TS_NRES || k->t_phase >= TS_NPHASES ||
      k->t_role >= TS_NROLES || k->label < 0 || k->label >= (int)tr->labels->len)
    return FALSE;
  if (!(k->flags & TS_PK_NODEPS)) {
    const int *deps = prog->deps + prog->dep_off[i];
    guint32 n = prog->dep_off[i + 1] - prog->dep_off[i];
    for (guint32 j = 0; j < n; j++)
      if ((unsigned)deps[j] >= (unsigned)i)
        return FALSE;
  }
  int peer = 0;
  double bw = 0;
  if (k->flags & TS_PK_EXT) {
    const ts_op_ext *x = &g_array_index(prog->ext, ts_op_ext, prog->ext_of[i] - 1);
    if (x->t_layer < 0 || x->t_layer_last < 0 || x->t_micro < 0 || x->t_stage < 0)
      return FALSE;
    peer = x->peer;
    bw = x->bw_Bps;
  }
  if (!in_range(bw, 1e15))
    return FALSE;
  switch (k->kind) {
  case TS_OP_COMPUTE:
    return in_range(k->d0, 1e21) && in_range(k->d1, 9007199254740992.0);
  case TS_OP_COLL:
    return k->u.g.i0 >= 0 && k->u.g.i0 < (int)tr->groups->len &&
           in_range(k->d0, 9007199254740992.0);
  case TS_OP_SEND:
  case TS_OP_RECV:
    return (peer > 0 ? peer <= tr->nranks
                     : k->u.g.i0 >= 0 && k->u.g.i0 < tr->naxes && k->u.g.i1 != 0) &&
           in_range(k->d0, 9007199254740992.0);
  case TS_OP_XFER:
  case TS_OP_DELAY:
    return (k->kind != TS_OP_XFER || k->resource != TS_RES_NONE) &&
           in_range(k->d0, 9007199254740992.0) && in_range(k->d1, 1e6);
  default:
    return TRUE;
  }
}

/* Every op's own fields (dependencies, label, group, peer, enumerations, ranges); *any_xfer
 * is set when an op is a transfer. */
static gboolean check_ops(const ts_trace *tr, gboolean *any_xfer, GError **error)
{
  for (int p = 0; p < tr->nprograms; p++) {
    const ts_program *prog = &tr->programs[p];
    for (int i = 0; i < prog->nops; i++) {
      if (packed_op_ok(tr, prog, i)) {
        if (prog->pk[i].kind == TS_OP_XFER)
          *any_xfer = TRUE;
        continue;
      }
      check_view ob, *o = &ob;
      check_view_of(prog, i, o);
      if (o->kind == TS_OP_XFER)
        *any_xfer = TRUE;
      int ndeps;
      const int *deps = ts_program_deps(prog, i, &ndeps);
      for (int k = 0; k < ndeps; k++)
        if (deps[k] < 0 || deps[k] >= i) {
          g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                      "program %d op %d: dependency %d is not an earlier op", p, i, deps[k]);
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
          !(o->peer > 0 ? o->peer <= tr->nranks
                        : o->axis >= 0 && o->axis < tr->naxes && o->offset != 0)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "program %d op %d: send/recv needs a peer rank in [0, %d), or a defined "
                    "axis and a non-zero offset",
                    p, i, tr->nranks);
        return FALSE;
      }
      if ((unsigned)o->kind >= TS_OP_NKINDS || (unsigned)o->resource >= TS_NRES ||
          (unsigned)o->t_phase >= TS_NPHASES || (unsigned)o->t_role >= TS_NROLES ||
          o->t_layer < 0 || o->t_layer_last < 0 || o->t_micro < 0 || o->t_stage < 0) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "program %d op %d: kind, resource or tag out of range", p, i);
        return FALSE;
      }
      if (o->kind == TS_OP_XFER && o->resource == TS_RES_NONE) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "program %d op %d: xfer needs a resource (host_link, nvme, storage, server)", p,
                    i);
        return FALSE;
      }
      /* The text reader's ranges (num_max), for traces built otherwise (importers, API). */
      if (!(o->flops >= 0 && o->flops <= 1e21 && o->mem_bytes >= 0 &&
            o->mem_bytes <= 9007199254740992.0 && o->bytes >= 0 && o->bytes <= 9007199254740992.0 &&
            o->seconds >= 0 && o->seconds <= 1e6 && o->bw_Bps >= 0 && o->bw_Bps <= 1e15)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "program %d op %d: sizes out of range; expected flops in [0, 1e21], "
                    "bytes and mem_bytes in [0, 2^53], seconds in [0, 1e6], bw_Bps in [0, 1e15]",
                    p, i);
        return FALSE;
      }
    }
  }
  return TRUE;
}

/* The trace's frame: its array against the topology's, its axes' and groups' layout. */
static gboolean check_frame(const ts_trace *tr, const ts_topo *t, GError **error)
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
  return check_layout(tr, error);
}

gboolean ts_trace_check_placement(const ts_trace *tr, const ts_topo *t, GError **error)
{
  if (!check_frame(tr, t, error))
    return FALSE;
  if (tr->nprograms != asym_programs(tr)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "trace has %d programs; its asymmetric axes need %d", tr->nprograms,
                asym_programs(tr));
    return FALSE;
  }
  return TRUE;
}

gboolean ts_trace_check(const ts_trace *tr, const ts_topo *t, GError **error)
{
  if (!check_frame(tr, t, error))
    return FALSE;
  int asym = asym_programs(tr);
  /* Off-chip transfers need a bandwidth: the op's, or the topology's for the resource. That
   * check's error comes first; it reads the trace again only when an op is a transfer or
   * another check failed (issue 15: a separate pass over every op of every configuration). */
  if (tr->nprograms != asym) {
    if (t != NULL && !check_xfer_bandwidth(tr, t, error))
      return FALSE;
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "trace has %d programs; its asymmetric axes need %d", tr->nprograms, asym);
    return FALSE;
  }
  GError *op_error = NULL;
  gboolean any_xfer = FALSE, ops_ok = check_ops(tr, &any_xfer, &op_error);
  if (t != NULL && (!ops_ok || any_xfer) && !check_xfer_bandwidth(tr, t, error)) {
    g_clear_error(&op_error);
    return FALSE;
  }
  if (!ops_ok) {
    g_propagate_error(error, op_error);
    return FALSE;
  }
  /* Member-list groups are one instance: every rank that runs a collective on one must be a
   * member. Per program, the member-list groups it uses (first op of each); then each rank is
   * looked up in the sorted member lists. Nothing here grows with ranks x groups. */
  gboolean any = FALSE;
  for (guint gi = 0; gi < tr->groups->len; gi++)
    any |= ((const ts_group *)g_ptr_array_index(tr->groups, gi))->members != NULL;
  if (!any)
    return TRUE;
  int ng = (int)tr->groups->len;
  GArray **used = g_new0(GArray *, tr->nprograms); /* per program: (group, op) pairs */
  g_autoptr(GHashTable) seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (int p = 0; p < tr->nprograms; p++) {
    used[p] = g_array_new(FALSE, FALSE, 2 * sizeof(int));
    g_hash_table_remove_all(seen);
    for (int i = 0; i < tr->programs[p].nops; i++) {
      if (ts_program_op_kind(&tr->programs[p], i) != TS_OP_COLL)
        continue;
      const ts_op ob = ts_program_op(&tr->programs[p], i), *o = &ob;
      if (o->kind != TS_OP_COLL ||
          ((const ts_group *)g_ptr_array_index(tr->groups, o->group))->members == NULL ||
          g_hash_table_contains(seen, GINT_TO_POINTER(o->group + 1)))
        continue;
      g_hash_table_add(seen, GINT_TO_POINTER(o->group + 1));
      int pair[2] = {o->group, i};
      g_array_append_vals(used[p], pair, 1);
    }
  }
  int **sorted = g_new0(int *, ng);
  for (int gi = 0; gi < ng; gi++) {
    const ts_group *g = g_ptr_array_index(tr->groups, gi);
    if (g->members == NULL)
      continue;
    sorted[gi] = g_memdup2(g->members, sizeof(int) * (gsize)g->nmembers);
    qsort(sorted[gi], (size_t)g->nmembers, sizeof(int), int_cmp);
  }
  gboolean ok = TRUE;
  for (int rank = 0; rank < tr->nranks && ok; rank++) {
    int p = ts_trace_program_of(tr, rank);
    for (guint k = 0; k < used[p]->len && ok; k++) {
      const int *pair = (const int *)used[p]->data + 2 * k;
      const ts_group *g = g_ptr_array_index(tr->groups, pair[0]);
      if (bsearch(&rank, sorted[pair[0]], (size_t)g->nmembers, sizeof(int), int_cmp) == NULL) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "rank %d op %d '%s': collective on group %s, which does not list rank %d", rank,
                    pair[1],
                    (const char *)g_ptr_array_index(tr->labels,
                                                    ts_program_op_label(&tr->programs[p], pair[1])),
                    g->name, rank);
        ok = FALSE;
      }
    }
  }
  for (int p = 0; p < tr->nprograms; p++)
    g_array_unref(used[p]);
  g_free(used);
  for (int gi = 0; gi < ng; gi++)
    g_free(sorted[gi]);
  g_free(sorted);
  return ok;
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

int ts_op_shape_nfields(void)
{
  return (int)G_N_ELEMENTS(shape_keys);
}

const char *ts_op_shape_field_name(int i)
{
  g_return_val_if_fail(i >= 0 && i < ts_op_shape_nfields(), NULL);
  return shape_keys[i];
}

double *ts_op_shape_field(ts_op_shape *sh, int i)
{
  g_return_val_if_fail(i >= 0 && i < ts_op_shape_nfields(), NULL);
  return shape_field(sh, i);
}

static void append_shape(GString *s, const ts_op_shape *sh)
{
  if (sh->oclass == TS_OPC_ROOFLINE)
    return;
  g_string_append_printf(s, " class=%s", ts_op_class_name((ts_op_class)sh->oclass));
  if (sh->prec != TS_PRECISION_BF16)
    g_string_append_printf(s, " prec=%s", ts_precision_name((ts_precision)sh->prec));
  if (sh->kernels != 0)
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
    if (g->members != NULL) {
      g_string_append(s, " name=");
      append_quoted(s, g->name);
      g_string_append(s, " ranks=");
      for (int m = 0; m < g->nmembers; m++)
        g_string_append_printf(s, "%s%d", m ? "," : "", g->members[m]);
    }
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
  if (tr->meta.tokens_per_sample > 0) /* written only when known: older traces read the same */
    append_num(s, "tokens_per_sample", tr->meta.tokens_per_sample);
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
      const ts_op ob = ts_program_op(prog, i), *o = &ob;
      g_string_append_printf(s, "%d %s cat=%s stream=%d label=%d", i, ts_op_kind_name(o->kind),
                             ts_op_cat_name(o->cat), o->stream, o->label);
      switch (o->kind) {
      case TS_OP_COMPUTE:
        append_num(s, "flops", o->flops);
        append_num(s, "mem_bytes", o->mem_bytes);
        if (o->shape != NULL)
          append_shape(s, o->shape);
        break;
      case TS_OP_COLL:
        g_string_append_printf(s, " kind=%s algo=%s group=%d", ts_coll_kind_name(o->coll),
                               ts_coll_algo_name(o->algo), o->group);
        append_num(s, "bytes", o->bytes);
        break;
      case TS_OP_SEND:
      case TS_OP_RECV:
        if (o->peer > 0)
          g_string_append_printf(s, " peer=%d tag=%d", o->peer - 1, o->tag);
        else
          g_string_append_printf(s, " axis=%d offset=%d tag=%d", o->axis, o->offset, o->tag);
        append_num(s, "bytes", o->bytes);
        break;
      case TS_OP_XFER:
        g_string_append_printf(s, " resource=%s", ts_resource_name(o->resource));
        append_num(s, "bytes", o->bytes);
        if (o->bw_Bps > 0)
          append_num(s, "bw_Bps", o->bw_Bps);
        if (o->seconds > 0)
          append_num(s, "latency_s", o->seconds);
        break;
      case TS_OP_DELAY:
        append_num(s, "seconds", o->seconds);
        if (o->resource != TS_RES_NONE)
          g_string_append_printf(s, " resource=%s", ts_resource_name(o->resource));
        break;
      default:
        break;
      }
      if (o->t_layer > 0)
        g_string_append_printf(s, " layer=%d", o->t_layer - 1);
      if (o->t_layer_last > 0)
        g_string_append_printf(s, " layer_last=%d", o->t_layer_last - 1);
      if (o->t_micro > 0)
        g_string_append_printf(s, " mb=%d", o->t_micro - 1);
      if (o->t_stage > 0)
        g_string_append_printf(s, " stage=%d", o->t_stage - 1);
      if (o->t_phase != TS_PHASE_NONE)
        g_string_append_printf(s, " phase=%s", ts_phase_name(o->t_phase));
      if (o->t_role != TS_ROLE_NONE)
        g_string_append_printf(s, " role=%s", ts_role_name(o->t_role));
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
/* Unescapes C escapes of [p, end) into p, NUL-terminated (never longer than the escaped). */
static void unescape_in_place(char *p, const char *end)
{
  g_autofree char *raw = g_strndup(p, (gsize)(end - p));
  g_autofree char *v = g_strcompress(raw);
  gsize n = strlen(v);
  memcpy(p, v, n);
  p[n] = '\0';
}

/* Splits a line into tokens in place (pointers into line, NUL-terminated there): no copy per
 * token, as a trace has millions of lines. A token in double quotes may hold blanks and C
 * escapes; so may the value of key="value". */
static gboolean tokenize(char *line, GPtrArray *out)
{
  char *p = line;
  for (;;) {
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p == '\0' || *p == '#')
      return TRUE;
    if (*p == '"') {
      char *q = ++p;
      while (*q != '\0' && *q != '"') {
        if (*q == '\\' && q[1] != '\0')
          q++;
        q++;
      }
      if (*q != '"')
        return FALSE;
      unescape_in_place(p, q);
      g_ptr_array_add(out, p);
      p = q + 1;
      continue;
    }
    char *q = p;
    while (*q != '\0' && *q != ' ' && *q != '\t' && !(*q == '"' && q > p && q[-1] == '='))
      q++;
    if (*q == '"') {
      /* key="quoted value" (format 2 group names): the token is key=value, unescaped. */
      char *e = q + 1;
      while (*e != '\0' && *e != '"') {
        if (*e == '\\' && e[1] != '\0')
          e++;
        e++;
      }
      if (*e != '"')
        return FALSE;
      memmove(q, q + 1, (gsize)(e - q - 1));
      unescape_in_place(q, e - 1);
      g_ptr_array_add(out, p);
      p = e + 1;
      continue;
    }
    g_ptr_array_add(out, p);
    if (*q == '\0')
      return TRUE;
    *q = '\0';
    p = q + 1;
  }
}

typedef struct {
  const char *path;
  int line;
  int version;
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
  gint64 v = 0;
  /* Fast path for plain digits (op indices, labels, dependencies: most of a trace's numbers);
   * anything else through the general reader, which also takes "1e3". */
  const char *d = tok;
  while (*d >= '0' && *d <= '9' && d - tok < 18)
    v = v * 10 + (*d++ - '0');
  if (d > tok && *d == '\0') {
    if (v >= lo && v <= hi) {
      *out = (int)v;
      return TRUE;
    }
  }
  if (!ts_parse_int(tok, lo, hi, &v))
    return perr(c,
                "%s='%s': expected a whole number in [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]",
                what, tok, lo, hi);
  *out = (int)v;
  return TRUE;
}

/* The largest value each numeric field may take, and what it counts (docs/formats.md). Byte
 * counts stop at 2^53 so they stay exact integers in a double (and in CSV and JSON); the other
 * bounds are far above any real step (a zettaFLOP op, 11.6 days of delay, 1 PB/s) and below
 * where sums over a step lose meaning. bytes=1e30 used to be read and replayed as given. */
static double num_max(const char *what, const char **noun)
{
  static const struct {
    const char *key, *noun;
    double max;
  } limits[] = {
      {"bytes", "a number of bytes", 9007199254740992.0},
      {"mem_bytes", "a number of bytes", 9007199254740992.0},
      {"scores_bytes", "a number of bytes", 9007199254740992.0},
      {"flops", "a number of FLOP", 1e21},
      {"attn_flops", "a number of FLOP", 1e21},
      {"model_flops", "a number of FLOP per step", 1e27},
      {"samples", "a number of samples", 9007199254740992.0},
      {"tokens_per_sample", "a number of tokens per sample", 1e9},
      {"bw_Bps", "a bandwidth in bytes/s", 1e15},
      {"seconds", "a time in seconds", 1e6},
      {"latency_s", "a time in seconds", 1e6},
      /* Read as a fraction of the GEMM rate and as a switch: 2 ran the core at twice the
       * GEMM rate, 0.5 half-blocking. */
      {"flash_eff", "a fraction of the GEMM rate", 1},
      {"launch_blocking", "a flag, 0 or 1,", 1},
      {"split_accum", "a flag, 0 or 1,", 1},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(limits); i++)
    if (strcmp(what, limits[i].key) == 0) {
      *noun = limits[i].noun;
      return limits[i].max;
    }
  *noun = "a size"; /* the shape's dimensions: m, n, k, batch, aq, akv, ad, abatch */
  return 1e12;
}

static gboolean parse_num_tok(parse_ctx *c, const char *what, const char *tok, double *out)
{
  const char *noun;
  double max = num_max(what, &noun);
  if (!ts_parse_double(tok, out) || !(*out >= 0 && *out <= max) ||
      (g_str_has_prefix(noun, "a flag") && *out != 0 && *out != 1))
    return perr(c, "%s='%s': expected %s in [0, %.17g]", what, tok, noun, max);
  return TRUE;
}

static int find_name(const char *const *names, size_t n, const char *s)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], s) == 0)
      return (int)i;
  return -1;
}

/* "a,b,c" of whole numbers in [lo, hi] appended to out. */
static gboolean parse_int_list(parse_ctx *c, const char *what, const char *val, gint64 lo,
                               gint64 hi, GArray *out)
{
  const char *p = val;
  for (;;) {
    const char *q = strchr(p, ',');
    gsize n = q ? (gsize)(q - p) : strlen(p);
    char buf[32];
    g_autofree char *big = NULL;
    char *item = buf;
    if (n < sizeof buf) {
      memcpy(buf, p, n);
      buf[n] = '\0';
    } else {
      item = big = g_strndup(p, n);
    }
    int v;
    if (!parse_int_tok(c, what, item, lo, hi, &v))
      return FALSE;
    g_array_append_val(out, v);
    if (q == NULL)
      return TRUE;
    p = q + 1;
  }
}

static gboolean is_p2p(ts_op_kind k)
{
  return k == TS_OP_SEND || k == TS_OP_RECV;
}

/* One key=value of an op. Keys are grouped by the kinds that take them; format 2 keys are
 * refused in a format 1 file. Keys starting with x_ are extensions and are ignored. */
static int shape_key_index(const char *key)
{
  for (size_t i = 0; i < G_N_ELEMENTS(shape_keys); i++)
    if (strcmp(key, shape_keys[i]) == 0)
      return (int)i;
  return -1;
}

static gboolean parse_op_key(parse_ctx *c, ts_trace *tr, int idx, ts_op *op, ts_op_shape *sh,
                             const char *kind, const char *key, const char *val, GArray *deps,
                             gboolean *have_label)
{
  gboolean v2 = c->version >= 2;
  if (strcmp(key, "cat") == 0) {
    int v = find_name(op_cat_names, G_N_ELEMENTS(op_cat_names), val);
    if (v < 0)
      return perr(c,
                  "cat='%s': expected fwd, bwd, optimizer, comm_dp, comm_tp, comm_pp, "
                  "comm_other or other",
                  val);
    op->cat = (ts_op_cat)v;
  } else if (strcmp(key, "stream") == 0) {
    return parse_int_tok(c, key, val, 0, (1 << 20) - 1, &op->stream);
  } else if (strcmp(key, "label") == 0) {
    *have_label = TRUE;
    return parse_int_tok(c, key, val, 0, (gint64)tr->labels->len - 1, &op->label);
  } else if (strcmp(key, "flops") == 0 && op->kind == TS_OP_COMPUTE) {
    return parse_num_tok(c, key, val, &op->flops);
  } else if (strcmp(key, "mem_bytes") == 0 && op->kind == TS_OP_COMPUTE) {
    return parse_num_tok(c, key, val, &op->mem_bytes);
  } else if (strcmp(key, "bytes") == 0 &&
             (op->kind == TS_OP_COLL || is_p2p(op->kind) || op->kind == TS_OP_XFER)) {
    return parse_num_tok(c, key, val, &op->bytes);
  } else if (strcmp(key, "kind") == 0 && op->kind == TS_OP_COLL) {
    int v = ts_coll_kind_parse(val);
    if (v < 0)
      return perr(c,
                  "kind='%s': expected allreduce, reducescatter, allgather, alltoall or "
                  "broadcast",
                  val);
    op->coll = (ts_coll_kind)v;
  } else if (strcmp(key, "algo") == 0 && op->kind == TS_OP_COLL) {
    int v = ts_coll_algo_parse(val);
    if (v < 0)
      return perr(c, "algo='%s': expected %s", val, ts_coll_algo_list());
    op->algo = (ts_coll_algo)v;
  } else if (strcmp(key, "group") == 0 && op->kind == TS_OP_COLL) {
    if (tr->groups->len == 0)
      return perr(c, "group=%s: no group is declared", val);
    return parse_int_tok(c, key, val, 0, (gint64)tr->groups->len - 1, &op->group);
  } else if (strcmp(key, "axis") == 0 && is_p2p(op->kind)) {
    if (tr->naxes == 0)
      return perr(c, "axis=%s: no axis is declared", val);
    return parse_int_tok(c, key, val, 0, tr->naxes - 1, &op->axis);
  } else if (strcmp(key, "offset") == 0 && is_p2p(op->kind)) {
    return parse_int_tok(c, key, val, -65536, 65536, &op->offset);
  } else if (strcmp(key, "tag") == 0 && is_p2p(op->kind)) {
    return parse_int_tok(c, key, val, 0, G_MAXINT, &op->tag);
  } else if (strcmp(key, "deps") == 0) {
    if (idx == 0)
      return perr(c, "deps='%s': op 0 has no earlier op to depend on", val);
    return parse_int_list(c, "deps", val, 0, idx - 1, deps);
  } else if (v2 && strcmp(key, "peer") == 0 && is_p2p(op->kind)) {
    int v = 0;
    if (!parse_int_tok(c, key, val, 0, (gint64)tr->nranks - 1, &v))
      return FALSE;
    op->peer = v + 1;
  } else if (v2 && strcmp(key, "resource") == 0 &&
             (op->kind == TS_OP_XFER || op->kind == TS_OP_DELAY)) {
    int v = find_name(resource_names, G_N_ELEMENTS(resource_names), val);
    if (v <= 0)
      return perr(c, "resource='%s': expected host_link, nvme, storage, server or host_cpu", val);
    if (op->kind == TS_OP_XFER && v == TS_RES_HOST_CPU)
      return perr(c, "resource='host_cpu': an xfer moves bytes; use a delay op for host work");
    op->resource = v;
  } else if (v2 && strcmp(key, "bw_Bps") == 0 && op->kind == TS_OP_XFER) {
    if (!parse_num_tok(c, key, val, &op->bw_Bps))
      return FALSE;
    /* 1e-300 replayed to a step of 1e37 s: below 1 kB/s is no link (topologies refuse rates
     * under 1 MB/s). */
    if (op->bw_Bps < 1e3)
      return perr(c, "bw_Bps='%s': expected a bandwidth in bytes/s in [1000, 1e15]", val);
  } else if (v2 && strcmp(key, "latency_s") == 0 && op->kind == TS_OP_XFER) {
    return parse_num_tok(c, key, val, &op->seconds);
  } else if (v2 && strcmp(key, "seconds") == 0 && op->kind == TS_OP_DELAY) {
    return parse_num_tok(c, key, val, &op->seconds);
  } else if (v2 && (strcmp(key, "layer") == 0 || strcmp(key, "layer_last") == 0 ||
                    strcmp(key, "mb") == 0 || strcmp(key, "stage") == 0)) {
    int v = 0;
    if (!parse_int_tok(c, key, val, 0, G_MAXINT - 1, &v))
      return FALSE;
    *(key[0] == 'm'   ? &op->t_micro
      : key[0] == 's' ? &op->t_stage
      : key[5] == '_' ? &op->t_layer_last
                      : &op->t_layer) = v + 1;
  } else if (v2 && strcmp(key, "phase") == 0) {
    int v = find_name(phase_names, G_N_ELEMENTS(phase_names), val);
    if (v <= 0)
      return perr(c, "phase='%s': expected fwd, bwd, recompute, sync or optimizer", val);
    op->t_phase = v;
  } else if (v2 && strcmp(key, "role") == 0) {
    int v = find_name(role_names, G_N_ELEMENTS(role_names), val);
    if (v <= 0)
      return perr(c,
                  "role='%s': expected compute, tp, ep, grad, param_gather, pp, offload, "
                  "optimizer, marker, input_grad, weight_grad, attention_recompute, regather, "
                  "ps_update, tied_grad, expert_params, op_recompute, cp_kv, cp_dkv, "
                  "cp_attention, layout_copy or contention",
                  val);
    op->t_role = v;
  } else if (strcmp(key, "class") == 0 && op->kind == TS_OP_COMPUTE) {
    int v = ts_op_class_parse(val);
    if (v <= 0)
      return perr(c,
                  "class='%s': expected gemm, attention, flash, memory, optimizer, transfer or "
                  "other",
                  val);
    sh->oclass = v;
  } else if (strcmp(key, "prec") == 0 && op->kind == TS_OP_COMPUTE) {
    int v = ts_precision_parse(val);
    if (v < 0)
      return perr(c, "prec='%s': expected bf16, fp8 or fp32", val);
    sh->prec = v;
  } else if (strcmp(key, "kernels") == 0 && op->kind == TS_OP_COMPUTE) {
    return parse_int_tok(c, key, val, -1, 1000000, &sh->kernels);
  } else if (op->kind == TS_OP_COMPUTE && shape_key_index(key) >= 0) {
    return parse_num_tok(c, key, val, shape_field(sh, shape_key_index(key)));
  } else if (v2 && g_str_has_prefix(key, "x_")) {
    /* an extension another tool wrote: ignored */
  } else {
    return perr(c, "'%s': not a key of a %s op in format %d", key, kind, c->version);
  }
  return TRUE;
}

static gboolean parse_op(parse_ctx *c, ts_trace *tr, int prog, GPtrArray *tok, GArray *deps)
{
  ts_op op = {0};
  ts_op_shape sh = {0};
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
  if (k < 0 || (c->version < 2 && k > TS_OP_WAIT))
    return perr(c, "op kind '%s': expected compute, coll, send, recv, wait%s", kind,
                c->version < 2 ? " (xfer and delay need format 2)" : ", xfer or delay");
  op.kind = (ts_op_kind)k;
  g_array_set_size(deps, 0);
  gboolean have_label = FALSE;
  for (guint i = 2; i < tok->len; i++) {
    char *kv = g_ptr_array_index(tok, i);
    char *eq = strchr(kv, '=');
    if (eq == NULL)
      return perr(c, "'%s': expected key=value", kv);
    *eq = '\0'; /* the token is the line's own bytes: the key ends here */
    if (!parse_op_key(c, tr, idx, &op, &sh, kind, kv, eq + 1, deps, &have_label))
      return FALSE;
  }
  if (!have_label)
    return perr(c, "%s op: missing label=", kind);
  if (op.kind == TS_OP_COLL && op.group < 0)
    return perr(c, "coll op: missing group=");
  if (is_p2p(op.kind) && op.peer == 0 && (op.axis < 0 || op.offset == 0))
    return perr(c, "%s op: missing peer=, or axis= and a non-zero offset=", kind);
  if (op.kind == TS_OP_XFER && op.resource == TS_RES_NONE)
    return perr(c, "xfer op: missing resource=");
  op.shape = &sh; /* interned by ts_trace_append (NULL when no class was given) */
  ts_trace_append(tr, prog, &op, (const int *)deps->data, (int)deps->len);
  return TRUE;
}

/* Where the reader's lines come from: text in memory, or a file read in blocks, so a trace
 * of gigabytes is never held whole. */
#define SRC_BLOCK ((gsize)1 << 20)
typedef struct {
  const char *text; /* in memory, or NULL */
  gboolean started;
  int fd; /* a file */
  char *buf;
  gsize len, pos;
  gboolean eof;
  gint64 total, max;
} line_src;

/* Appends the next line (without its newline) to line: 1, or 0 at the end, -1 on an error. */
static int src_next(line_src *s, GString *line, parse_ctx *c)
{
  if (s->text != NULL) {
    if (*s->text == '\0' && s->started)
      return 0;
    s->started = TRUE;
    const char *nl = strchr(s->text, '\n');
    gsize n = nl ? (gsize)(nl - s->text) : strlen(s->text);
    g_string_append_len(line, s->text, (gssize)n);
    s->text += n + (nl != NULL);
    return 1;
  }
  for (;;) {
    if (s->pos < s->len) {
      char *b = s->buf + s->pos;
      char *nl = memchr(b, '\n', s->len - s->pos);
      gsize n = nl ? (gsize)(nl - b) : s->len - s->pos;
      g_string_append_len(line, b, (gssize)n);
      s->pos += n + (nl != NULL);
      if (nl != NULL)
        return 1;
    }
    if (s->eof) {
      if (line->len > 0 || !s->started) {
        s->started = TRUE;
        return 1;
      }
      return 0;
    }
    ssize_t r = read(s->fd, s->buf, SRC_BLOCK);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      g_set_error(c->error, TS_ERROR, TS_ERROR_IO, "%s: cannot read: %s", c->path,
                  g_strerror(errno));
      return -1;
    }
    s->len = (gsize)r;
    s->pos = 0;
    s->eof = r == 0;
    s->total += r;
    if (s->total > s->max) {
      g_set_error(c->error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: more than %" G_GINT64_FORMAT " bytes; expected at most that for a trace",
                  c->path, s->max);
      return -1;
    }
    const char *z = r > 0 ? memchr(s->buf, '\0', (gsize)r) : NULL;
    if (z != NULL) {
      int ln = c->line + 1;
      for (const char *q = s->buf; q < z; q++)
        ln += *q == '\n';
      g_set_error(c->error, TS_ERROR, TS_ERROR_INPUT, "%s:%d: NUL byte; expected a text file",
                  c->path, ln);
      return -1;
    }
    s->started = TRUE;
  }
}

static ts_trace *parse_src(line_src *src, const char *path, GError **error);

ts_trace *ts_trace_from_text(const char *text, const char *path, GError **error)
{
  line_src src = {0};
  src.text = text;
  return parse_src(&src, path, error);
}

/* The form of each header line, for a line of a known kind with the wrong number of fields. */
static const char *header_form(const char *w)
{
  static const char *const forms[][2] = {
      {"ranks", "'ranks N'"},
      {"dim", "'dim NAME SIZE', e.g. 'dim x 8'"},
      {"axis",
       "'axis NAME SIZE symmetric|asymmetric DIM:SIZE:STRIDE...', e.g. 'axis dp 8 symmetric "
       "x:8:1'"},
      {"group", "'group INDEX AXIS...' or 'group INDEX ranks=R,R,...'"},
      {"label", "'label INDEX \"TEXT\"'"},
      {"program", "'program INDEX OPS'"},
      {"end", "'end' alone"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(forms); i++)
    if (strcmp(w, forms[i][0]) == 0)
      return forms[i][1];
  return NULL;
}

static ts_trace *parse_src(line_src *src, const char *path, GError **error)
{
  parse_ctx c = {path, 0, 1, error};
  ts_trace *tr = g_new0(ts_trace, 1);
  tr->groups = g_ptr_array_new_with_free_func(group_free);
  tr->labels = g_ptr_array_new_with_free_func(g_free);
  tr->label_index = g_hash_table_new(g_str_hash, g_str_equal);
  int prog = -1, prog_ops = 0, want_programs = 0, prog_cap = 0;
  gboolean header = FALSE, ended = FALSE;
  /* Line by line in place (no copy of the whole text: traces run to gigabytes). */
  GString *line = g_string_new(NULL);
  g_autoptr(GPtrArray) tok = g_ptr_array_new();
  g_autoptr(GArray) deps = g_array_new(FALSE, FALSE, sizeof(int));
  for (;;) {
    g_string_truncate(line, 0);
    int got = src_next(src, line, &c);
    if (got < 0)
      goto fail;
    if (got == 0)
      break;
    if (line->len > 0 && line->str[line->len - 1] == '\r')
      g_string_truncate(line, line->len - 1);
    c.line++;
    /* Labels and meta strings go into JSON and CSV outputs: a 0xff byte in `meta model` made
     * replay's JSON invalid UTF-8. */
    const char *bad = NULL;
    if (!g_utf8_validate(line->str, (gssize)line->len, &bad)) {
      perr(&c, "byte %u (0x%02x) of the line is not UTF-8; expected UTF-8 text",
           (unsigned)(bad - line->str) + 1, (unsigned)(unsigned char)*bad);
      goto fail;
    }
    g_ptr_array_set_size(tok, 0);
    if (!tokenize(line->str, tok)) {
      perr(&c, "unterminated string; expected a closing \"");
      goto fail;
    }
    if (tok->len == 0)
      continue;
    /* A string's escapes ("\377") decode to bytes: the decoded text must be UTF-8 as well. */
    for (guint i = 0; i < tok->len; i++)
      if (!g_utf8_validate(g_ptr_array_index(tok, i), -1, NULL)) {
        perr(&c,
             "field %u decodes to bytes that are not UTF-8 (an escape such as \\377?); "
             "expected UTF-8 text",
             i + 1);
        goto fail;
      }
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
      if (!parse_int_tok(&c, "version", g_ptr_array_index(tok, 1), 1, TS_TRACE_FORMAT_VERSION,
                         &ver))
        goto fail;
      c.version = ver;
      header = TRUE;
      continue;
    }
    if (tr->programs != NULL &&
        (strcmp(w, "ranks") == 0 || strcmp(w, "dim") == 0 || strcmp(w, "axis") == 0 ||
         strcmp(w, "group") == 0 || strcmp(w, "label") == 0)) {
      perr(&c, "'%s' after the first program; expected it before", w);
      goto fail;
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
      if (!parse_op(&c, tr, prog, tok, deps))
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
    } else if (strcmp(w, "group") == 0 && tok->len >= 3 &&
               strchr(g_ptr_array_index(tok, 2), '=') != NULL) {
      /* Format 2: group I [name=NAME] ranks=R,R,... */
      int gi = 0;
      if (c.version < 2) {
        perr(&c, "group with ranks= needs format 2");
        goto fail;
      }
      if (!parse_int_tok(&c, "group index", g_ptr_array_index(tok, 1), tr->groups->len,
                         tr->groups->len, &gi))
        goto fail;
      if (tr->nranks <= 0) {
        perr(&c, "group with ranks= before 'ranks N'; expected the rank count first");
        goto fail;
      }
      g_autofree char *gname = g_strdup_printf("g%d", gi);
      g_autoptr(GArray) mem = g_array_new(FALSE, FALSE, sizeof(int));
      for (guint i = 2; i < tok->len; i++) {
        const char *kv = g_ptr_array_index(tok, i);
        if (g_str_has_prefix(kv, "name=") && kv[5] != '\0') {
          g_free(gname);
          gname = g_strdup(kv + 5);
        } else if (g_str_has_prefix(kv, "ranks=") && mem->len == 0) {
          if (!parse_int_list(&c, "ranks", kv + 6, 0, (gint64)tr->nranks - 1, mem))
            goto fail;
        } else {
          perr(&c, "'%s': expected name=NAME and ranks=R,R,...", kv);
          goto fail;
        }
      }
      GError *ge = NULL;
      if (ts_trace_group_members(tr, gname, (const int *)mem->data, (int)mem->len, &ge) < 0) {
        perr(&c, "%s", ge->message);
        g_error_free(ge);
        goto fail;
      }
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
        } else if (g_str_has_prefix(kv, "tokens_per_sample=")) {
          if (!parse_num_tok(&c, "tokens_per_sample", kv + 18, &tr->meta.tokens_per_sample))
            goto fail;
        } else {
          perr(&c, "meta '%s': expected samples=, model_flops= or tokens_per_sample=", kv);
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
        /* Checked in 64 bits against the ranks before anything is allocated. */
        GError *le = NULL;
        if (tr->nranks <= 0) {
          perr(&c, "program before 'ranks N'");
          goto fail;
        }
        if (!check_layout(tr, &le)) {
          perr(&c, "%s", le->message);
          g_error_free(le);
          goto fail;
        }
        /* Programs are allocated as they are read, not all at once from the axes: a short
         * file declaring millions of programs must fail on its missing ones, not allocate. */
        want_programs = asym_programs(tr);
        prog_cap = MIN(want_programs, 64);
        tr->programs = g_new0(ts_program, prog_cap);
      }
      int pi = 0;
      if (!parse_int_tok(&c, "program index", g_ptr_array_index(tok, 1), prog + 1, prog + 1, &pi))
        goto fail;
      if (pi >= want_programs) {
        perr(&c, "program %d: the asymmetric axes define only %d programs", pi, want_programs);
        goto fail;
      }
      if (pi >= prog_cap) {
        int ncap = (int)MIN((gint64)prog_cap * 2, (gint64)want_programs);
        tr->programs = g_renew(ts_program, tr->programs, ncap);
        memset(tr->programs + prog_cap, 0, sizeof(ts_program) * (gsize)(ncap - prog_cap));
        prog_cap = ncap;
      }
      tr->nprograms = pi + 1;
      if (!parse_int_tok(&c, "op count", g_ptr_array_index(tok, 2), 0, 1 << 28, &prog_ops))
        goto fail;
      prog = pi;
    } else if (strcmp(w, "end") == 0 && tok->len == 1) {
      ended = TRUE;
    } else if (header_form(w) != NULL) {
      /* A known line with too few or too many fields (a truncated "dim" said "'dim': expected
       * ranks, dim, axis, ..."): say what the line takes. */
      perr(&c, "'%s' with %u field%s; expected %s", w, tok->len - 1, tok->len == 2 ? "" : "s",
           header_form(w));
      goto fail;
    } else {
      perr(&c, "'%s': expected ranks, dim, axis, group, meta, label, program, an op or end", w);
      goto fail;
    }
  }
  g_string_free(line, TRUE);
  line = NULL;
  if (!header) {
    c.line = 1;
    perr(&c, "empty file; expected the header 'trainsim-trace %d'", TS_TRACE_FORMAT_VERSION);
    goto fail;
  }
  if (!ended) {
    perr(&c, "file ends without 'end' (truncated?)");
    goto fail;
  }
  if (tr->programs == NULL || prog != want_programs - 1) {
    perr(&c, "expected %d programs, found %d", tr->programs ? want_programs : 1, prog + 1);
    goto fail;
  }
  if (!ts_trace_check(tr, NULL, error)) {
    g_prefix_error(error, "%s: ", path);
    ts_trace_free(tr);
    return NULL;
  }
  return tr;
fail:
  if (line != NULL)
    g_string_free(line, TRUE);
  ts_trace_free(tr);
  return NULL;
}

static gboolean no_nul(const guint8 *data, gsize len, const char *path, GError **error)
{
  const guint8 *nul = len > 0 ? memchr(data, '\0', len) : NULL;
  if (nul == NULL)
    return TRUE;
  int line = 1;
  for (const guint8 *p = data; p < nul; p++)
    line += *p == '\n';
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s:%d: NUL byte; expected a text file", path, line);
  return FALSE;
}

ts_trace *ts_trace_from_bytes(const guint8 *data, gsize len, const char *path, GError **error)
{
  if (!no_nul(data, len, path, error))
    return NULL;
  g_autofree char *text = g_malloc(len + 1);
  if (len > 0)
    memcpy(text, data, len);
  text[len] = '\0';
  return ts_trace_from_text(text, path, error);
}

gboolean ts_read_input_file(const char *path, gint64 max_bytes, char **text, gsize *len,
                            GError **error)
{
  /* O_NONBLOCK: opening a FIFO with no writer must not hang; the fstat below refuses it. */
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot read: %s", path, g_strerror(errno));
    return FALSE;
  }
  struct stat st;
  memset(&st, 0, sizeof st);
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: %s; expected a regular file", path,
                S_ISDIR(st.st_mode)                          ? "a directory"
                : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                             : "not a regular file");
    close(fd);
    return FALSE;
  }
  if ((gint64)st.st_size > max_bytes) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: %" G_GINT64_FORMAT " bytes; expected at most %" G_GINT64_FORMAT
                " bytes for this input",
                path, (gint64)st.st_size, max_bytes);
    close(fd);
    return FALSE;
  }
  /* Read at most the cap + 1 bytes: a file that grows while read is still bounded. */
  gsize cap = (gsize)st.st_size + 1, n = 0;
  char *buf = g_malloc(cap + 1);
  for (;;) {
    if (n == cap) {
      if ((gint64)cap > max_bytes)
        break;
      cap = MIN(cap * 2, (gsize)max_bytes + 1);
      buf = g_realloc(buf, cap + 1);
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot read: %s", path, g_strerror(errno));
      g_free(buf);
      close(fd);
      return FALSE;
    }
    if (r == 0)
      break;
    n += (gsize)r;
  }
  close(fd);
  if ((gint64)n > max_bytes) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: more than %" G_GINT64_FORMAT " bytes; expected at most that for this input",
                path, max_bytes);
    g_free(buf);
    return FALSE;
  }
  buf[n] = '\0';
  *text = buf;
  if (len != NULL)
    *len = n;
  return TRUE;
}

ts_trace *ts_trace_load(const char *path, GError **error)
{
  /* As ts_read_input_file refuses (not a regular file, too large), then read in blocks. */
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot read: %s", path, g_strerror(errno));
    return NULL;
  }
  struct stat st;
  memset(&st, 0, sizeof st);
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (gint64)st.st_size > TS_TRACE_MAX_FILE_BYTES) {
    close(fd);
    char *text = NULL;
    /* the same one-line refusal */
    if (ts_read_input_file(path, TS_TRACE_MAX_FILE_BYTES, &text, NULL, error)) {
      g_free(text);
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: changed while read", path);
    }
    return NULL;
  }
  line_src src = {0};
  src.fd = fd;
  src.buf = g_malloc(SRC_BLOCK);
  src.max = TS_TRACE_MAX_FILE_BYTES;
  ts_trace *tr = parse_src(&src, path, error);
  g_free(src.buf);
  close(fd);
  return tr;
}

double ts_offchip_time(const ts_topo *t, const ts_op *op)
{
  if (op->kind == TS_OP_DELAY)
    return op->seconds;
  if (op->kind != TS_OP_XFER)
    return 0.0;
  /* Bytes over the resource at its bandwidth, plus the op's fixed latency. No kernel-launch
   * floor: nothing is launched on the chip (a format 1 trace paid op_overhead_us here). */
  double bw = op->bw_Bps;
  if (bw <= 0)
    bw = ts_resource_bw_Bps(t, op->resource);
  if (bw <= 0)
    return op->bytes > 0 ? -1.0 : op->seconds;
  return op->seconds + op->bytes / bw;
}
