/* ts_plan: validity, per-chip memory and the trace of one training step under a split.
 *
 * Tensor parallelism follows Megatron-LM (Shoeybi et al. 2019, section 3): a column-split
 * layer takes a replicated input and leaves its output split; a row-split layer takes a split
 * input and all-reduces its partial output; attention splits by heads (column QKV + row output
 * projection). The backward pass mirrors it: an all-reduce of the input gradient at every
 * column-split layer. Data parallelism all-reduces gradients in buckets that start as soon
 * as the backward pass has produced them (Li et al. 2020, "PyTorch Distributed", section 3.2). */
#include "ts_plan.h"
#include "ts_util.h"

#include <math.h>
#include <string.h>

enum { STREAM_COMPUTE = 0, STREAM_DP = 1 };

void ts_plan_options_default(ts_plan_options *o)
{
  memset(o, 0, sizeof *o);
  o->global_batch = 0;
  o->micro_batch = 0;
  o->bucket_bytes = 25.0 * 1024 * 1024;
  o->algo = TS_ALGO_AUTO;
}

void ts_plan_free(ts_plan *p)
{
  if (p == NULL)
    return;
  g_free(p->split_text);
  g_free(p->placement_text);
  g_free(p);
}

static gboolean layer_split(const ts_layer *l)
{
  return l->tp != TS_TP_REPLICATED;
}

/* Bytes of optimizer state per parameter: Adam keeps two moments, and with 16-bit training
 * an fp32 master copy too: K = 12 in the ZeRO paper (Rajbhandari et al. 2020, section 3.1). */
static double optimizer_bytes_per_param(const ts_model *m)
{
  return m->dtype_bytes < 4 ? 12.0 : 8.0;
}

static char *placement_text(const ts_plan *p)
{
  GString *s = g_string_new(NULL);
  for (int a = 0; a < TS_AX_N; a++) {
    if (p->degree[a] <= 1)
      continue;
    g_string_append_printf(s, "%s%s@", s->len ? "," : "", ts_axis_kind_name(a));
    for (int k = 0; k < p->shape[a].npieces; k++) {
      const ts_piece *pc = &p->shape[a].p[k];
      g_string_append_printf(s, "%s%s", k ? "+" : "", p->topo->dims[pc->dim].name);
      if (pc->size != p->topo->dims[pc->dim].size)
        g_string_append_printf(s, ":%d", pc->size);
    }
  }
  if (s->len == 0)
    g_string_append(s, "-");
  return g_string_free(s, FALSE);
}

static char *split_text(const ts_plan *p)
{
  GString *s = g_string_new(NULL);
  for (int a = 0; a < TS_AX_N; a++)
    if (p->degree[a] > 1)
      g_string_append_printf(s, "%s%s=%d", s->len ? "," : "", ts_axis_kind_name(a), p->degree[a]);
  if (s->len == 0)
    g_string_append(s, "dp=1");
  return g_string_free(s, FALSE);
}

static void plan_memory(ts_plan *p)
{
  const ts_model *m = p->model;
  int tp = p->degree[TS_AX_TP];
  double params = 0, acts = 0, largest_out = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    double div = layer_split(l) ? tp : 1;
    params += l->params / div;
    acts += l->saved_act_bytes * (double)p->micro_batch / div;
    double out = l->out_act_elems * m->dtype_bytes * (double)p->micro_batch;
    if (out > largest_out)
      largest_out = out;
  }
  p->params_per_chip = params;
  ts_memory *mem = &p->mem;
  mem->params = params * m->dtype_bytes;
  mem->grads = params * m->dtype_bytes;
  mem->optimizer = params * optimizer_bytes_per_param(m);
  mem->activations = acts;
  /* Working buffers: the gradient buckets in flight (two, as DDP double-buffers) and the
   * largest layer output, once more for its gradient. */
  double buckets = p->degree[TS_AX_DP] > 1 ? 2.0 * MIN(p->opt.bucket_bytes, mem->grads) : 0.0;
  mem->temp = buckets + 2.0 * largest_out;
  mem->total = mem->params + mem->grads + mem->optimizer + mem->activations + mem->temp;
  mem->capacity = p->topo->chip.memory_bytes;
  mem->fits = mem->total <= mem->capacity;
}

ts_plan *ts_plan_new(const ts_model *m, const ts_topo *t, const ts_split *s,
                     const ts_plan_options *o, GError **error)
{
  g_autoptr(ts_plan) p = g_new0(ts_plan, 1);
  p->model = m;
  p->topo = t;
  p->opt = *o;
  if (!ts_split_place(s, t, p->degree, p->shape, error))
    return NULL;
  int dp = p->degree[TS_AX_DP], tp = p->degree[TS_AX_TP];
  if (o->global_batch <= 0 || o->global_batch % dp != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--global-batch %" G_GINT64_FORMAT ": expected a positive multiple of the "
                "data-parallel degree %d (split %s)",
                o->global_batch, dp, s->text);
    return NULL;
  }
  gint64 per_replica = o->global_batch / dp;
  p->micro_batch = o->micro_batch > 0 ? o->micro_batch : per_replica;
  if (per_replica % p->micro_batch != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--micro-batch %" G_GINT64_FORMAT ": expected a divisor of the %" G_GINT64_FORMAT
                " samples each data-parallel replica gets (global batch %" G_GINT64_FORMAT
                " / dp %d)",
                p->micro_batch, per_replica, o->global_batch, dp);
    return NULL;
  }
  p->n_micro = per_replica / p->micro_batch;
  /* Tensor parallelism must divide what it splits: heads, features, channels, vocabulary. */
  for (int i = 0; i < m->nlayers && tp > 1; i++) {
    const ts_layer *l = &m->layers[i];
    gint64 what = 0;
    const char *name = NULL;
    switch (l->tp) {
    case TS_TP_HEADS:
      what = l->heads;
      name = "attention heads";
      break;
    case TS_TP_COLUMN:
      what = l->out_features;
      name = l->kind == TS_LAYER_CONV2D ? "output channels" : "output features";
      break;
    case TS_TP_ROW:
      what = l->in_features;
      name = "input features";
      break;
    case TS_TP_VOCAB:
    case TS_TP_REPLICATED:
      break; /* vocabulary shards may be uneven (Megatron pads the vocabulary) */
    }
    if (name != NULL && what % tp != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': tp=%d does not divide the %" G_GINT64_FORMAT " %s of layer '%s' "
                  "of %s; expected a tensor-parallel degree that divides them",
                  s->text, tp, what, name, l->name, m->path ? m->path : m->name);
      return NULL;
    }
  }
  p->split_text = split_text(p);
  p->placement_text = placement_text(p);
  plan_memory(p);
  p->model_flops_per_step = ts_model_train_flops_per_sample(m) * (double)o->global_batch;
  return g_steal_pointer(&p);
}

/* ---- trace generation --------------------------------------------------------------- */

typedef struct {
  const ts_plan *p;
  ts_trace *tr;
  int tp_group, dp_group;
  int last; /* last op on the compute stream, -1 at the start */
} gen;

static int emit(gen *g, const ts_op *op, const char *label, const int *deps, int ndeps)
{
  ts_op o = *op;
  o.label = ts_trace_label(g->tr, label);
  return ts_trace_append(g->tr, 0, &o, deps, ndeps);
}

static void emit_compute(gen *g, ts_op_cat cat, double flops, double mem, const char *label)
{
  ts_op op = {.kind = TS_OP_COMPUTE, .cat = cat, .stream = STREAM_COMPUTE};
  op.flops = flops;
  op.mem_bytes = mem;
  g->last = emit(g, &op, label, NULL, 0);
}

/* A tensor-parallel collective sits on the compute stream: the next layer needs its result. */
static void emit_tp(gen *g, ts_coll_kind kind, double bytes, ts_op_cat cat, const char *label)
{
  if (g->p->degree[TS_AX_TP] <= 1 || bytes <= 0)
    return;
  ts_op op = {.kind = TS_OP_COLL, .cat = cat, .stream = STREAM_COMPUTE};
  op.coll = kind;
  op.algo = g->p->opt.algo;
  op.group = g->tp_group;
  op.bytes = bytes;
  g->last = emit(g, &op, label, NULL, 0);
}

ts_trace *ts_plan_trace(const ts_plan *p, GError **error)
{
  (void)error;
  const ts_model *m = p->model;
  ts_trace *tr = ts_trace_new(p->topo);
  int axis_of[TS_AX_N];
  for (int a = 0; a < TS_AX_N; a++)
    axis_of[a] =
        ts_trace_add_axis(tr, ts_axis_kind_name(a), p->degree[a], a != TS_AX_PP, &p->shape[a]);
  ts_trace_set_programs(tr, p->degree[TS_AX_PP]);
  gen g = {p, tr, ts_trace_group(tr, &axis_of[TS_AX_TP], 1),
           ts_trace_group(tr, &axis_of[TS_AX_DP], 1), -1};
  tr->meta.model = g_strdup(m->name);
  tr->meta.split = g_strdup(p->split_text);
  tr->meta.topology = g_strdup(p->topo->name);
  tr->meta.producer = g_strdup_printf("trainsim %s plan", TS_VERSION);
  tr->meta.samples = (double)p->opt.global_batch;
  tr->meta.model_flops = p->model_flops_per_step;

  int tp = p->degree[TS_AX_TP];
  double mb = (double)p->micro_batch, db = m->dtype_bytes;
  int n = m->nlayers;
  /* Per layer, from the forward pass: did it slice a replicated input (row split)? */
  gboolean *sliced = g_new0(gboolean, n);
  int *bwd_op = g_new(int, n);
  GArray *bucket_deps = g_array_new(FALSE, FALSE, sizeof(int));
  char label[256];

  for (gint64 u = 0; u < p->n_micro; u++) {
    gboolean split_act = FALSE; /* is the activation between layers split across tp? */
    for (int i = 0; i < n; i++) {
      const ts_layer *l = &m->layers[i];
      gboolean split = layer_split(l) && tp > 1;
      double div = split ? tp : 1;
      gboolean needs_split_in = l->tp == TS_TP_ROW;
      if (!needs_split_in && split_act) {
        g_snprintf(label, sizeof label, "%s fwd all-gather", l->name);
        emit_tp(&g, TS_COLL_ALLGATHER, l->in_act_elems * db * mb, TS_CAT_COMM_TP, label);
        split_act = FALSE;
      }
      sliced[i] = needs_split_in && !split_act;
      double out_b = l->out_act_elems * db * mb;
      /* A split layer moves its share of weights and activations. */
      double mem = ts_layer_fwd_mem_bytes_batch(m, l, mb) / div;
      g_snprintf(label, sizeof label, "%s fwd", l->name);
      emit_compute(&g, TS_CAT_FWD, l->fwd_flops * mb / div, mem, label);
      if (split) {
        if (l->tp == TS_TP_COLUMN || (l->tp == TS_TP_VOCAB && l->kind != TS_LAYER_EMBEDDING)) {
          split_act = TRUE; /* logits stay split: the loss is computed vocabulary-parallel */
        } else {
          g_snprintf(label, sizeof label, "%s fwd all-reduce", l->name);
          emit_tp(&g, TS_COLL_ALLREDUCE, out_b, TS_CAT_COMM_TP, label);
          split_act = FALSE;
        }
      } else if (l->tp == TS_TP_COLUMN) {
        split_act = FALSE;
      }
    }
    gboolean last_micro = u == p->n_micro - 1;
    double bucket = 0;
    int bucket_first = n - 1;
    for (int i = n - 1; i >= 0; i--) {
      const ts_layer *l = &m->layers[i];
      gboolean split = layer_split(l) && tp > 1;
      double div = split ? tp : 1;
      double in_b = l->in_act_elems * db * mb;
      double mem = ts_layer_bwd_mem_bytes_batch(m, l, mb) / div;
      g_snprintf(label, sizeof label, "%s bwd", l->name);
      emit_compute(&g, TS_CAT_BWD, (l->bwd_input_flops + l->bwd_weight_flops) * mb / div, mem,
                   label);
      bwd_op[i] = g.last;
      if (split && (l->tp == TS_TP_COLUMN || l->tp == TS_TP_HEADS ||
                    (l->tp == TS_TP_VOCAB && l->kind != TS_LAYER_EMBEDDING))) {
        g_snprintf(label, sizeof label, "%s bwd all-reduce", l->name);
        emit_tp(&g, TS_COLL_ALLREDUCE, in_b, TS_CAT_COMM_TP, label);
      } else if (sliced[i] && tp > 1) {
        g_snprintf(label, sizeof label, "%s bwd all-gather", l->name);
        emit_tp(&g, TS_COLL_ALLGATHER, in_b, TS_CAT_COMM_TP, label);
      }
      /* Gradients are complete after the last micro-batch: bucket them for the all-reduce. */
      if (!last_micro || p->degree[TS_AX_DP] <= 1)
        continue;
      bucket += l->params / div * db;
      if (bucket > 0 && (bucket >= p->opt.bucket_bytes || i == 0)) {
        ts_op op = {.kind = TS_OP_COLL, .cat = TS_CAT_COMM_DP, .stream = STREAM_DP};
        op.coll = TS_COLL_ALLREDUCE;
        op.algo = p->opt.algo;
        op.group = g.dp_group;
        op.bytes = bucket;
        g_snprintf(label, sizeof label, "grad all-reduce %s..%s", m->layers[bucket_first].name,
                   l->name);
        int id = emit(&g, &op, label, &bwd_op[i], 1);
        g_array_append_val(bucket_deps, id);
        bucket = 0;
        bucket_first = i - 1;
      }
    }
  }
  /* The optimizer step waits for every gradient bucket. Adam reads the gradient, reads and
   * writes master weights and both moments, and writes the compute copy of the weights. */
  double local = p->params_per_chip;
  ts_op op = {.kind = TS_OP_COMPUTE, .cat = TS_CAT_OPTIMIZER, .stream = STREAM_COMPUTE};
  op.flops = 12.0 * local;
  op.mem_bytes = local * (2.0 * db + 2.0 * optimizer_bytes_per_param(m));
  g.last = emit(&g, &op, "optimizer step", (const int *)bucket_deps->data, (int)bucket_deps->len);
  g_array_unref(bucket_deps);
  g_free(sliced);
  g_free(bwd_op);
  return tr;
}
