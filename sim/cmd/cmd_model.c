/* cmd_model: `trainsim model`, a model's layers as trainsim derives them: shapes, parameters,
 * FLOPs, memory traffic and kept activations per sample, and the layer graph (input, block,
 * what a pipeline cut after each layer carries). For checking a model file against its source
 * and for choosing explicit pipeline stages (stages= counts these layers). */
#include "ts_cmd.h"
#include "ts_cost.h"
#include "ts_elementwise.h"
#include "ts_model.h"
#include "ts_plan.h"
#include "ts_report.h"
#include "ts_util.h"

#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

/* The numeric columns, each with its unit in the name. */
typedef enum {
  COL_PARAMS,
  COL_FWD,
  COL_BWD_IN,
  COL_BWD_W,
  COL_FWD_MEM,
  COL_BWD_MEM,
  COL_OUT,
  COL_SAVED,
  COL_CARRY,
  NCOLS
} col;

static const char *const col_names[NCOLS] = {"params",          "fwd_FLOP",        "bwd_input_FLOP",
                                             "bwd_weight_FLOP", "fwd_mem_bytes",   "bwd_mem_bytes",
                                             "out_act_elems",   "saved_act_bytes", "carry_elems"};

static double col_value(const ts_layer *l, col c)
{
  switch (c) {
  case COL_PARAMS:
    return l->params;
  case COL_FWD:
    return l->fwd_flops;
  case COL_BWD_IN:
    return l->bwd_input_flops;
  case COL_BWD_W:
    return l->bwd_weight_flops;
  case COL_FWD_MEM:
    return l->fwd_mem_bytes;
  case COL_BWD_MEM:
    return l->bwd_mem_bytes;
  case COL_OUT:
    return l->out_act_elems;
  case COL_SAVED:
    return l->saved_act_bytes;
  default:
    return l->carry_elems;
  }
}

/* The layer-name column's width: the longest name, at least the heading's 4. */
static int name_width(const ts_model *m)
{
  int wn = 4;
  for (int i = 0; i < m->nlayers; i++)
    wn = MAX(wn, (int)strlen(m->layers[i].name));
  return wn;
}

static const char *input_name(const ts_model *m, const ts_layer *l)
{
  return l->src >= 0 ? m->layers[l->src].name : "data";
}

/* The first layer of a kind whose name ends in `suffix` (NULL: none). */
static const ts_layer *find_layer(const ts_model *m, ts_layer_kind kind, const char *suffix)
{
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].kind == kind && g_str_has_suffix(m->layers[i].name, suffix))
      return &m->layers[i];
  return NULL;
}

/* One line on the attention, MLP, experts and vocabulary of a transformer that uses the keys
 * of today's decoders (grouped-query or latent attention, rotary, gated MLP, vocabulary
 * padding, fine-grained or shared experts); NULL for a model that uses none, so the listing of
 * the older models is unchanged. Caller frees. */
static char *modern_text(const ts_model *m)
{
  const ts_layer *at = find_layer(m, TS_LAYER_ATTENTION, ".attention");
  const ts_layer *fc1 = find_layer(m, TS_LAYER_DENSE, ".fc1");
  const ts_layer *emb = find_layer(m, TS_LAYER_EMBEDDING, "embedding");
  if (at == NULL || fc1 == NULL || emb == NULL)
    return NULL;
  gboolean gqa = at->kv_heads > 0 && at->kv_heads != at->heads;
  if (!gqa && !at->rotary && at->kv_lora_rank == 0 && !fc1->gated && emb->vocab_divisible_by <= 1 &&
      m->t_shared_experts == 0 && m->t_first_dense == 0)
    return NULL;
  GString *s = g_string_new("attention: ");
  gint64 a = at->heads;
  if (at->kv_lora_rank > 0)
    g_string_append_printf(
        s,
        "multi-head latent, %" G_GINT64_FORMAT " heads (query/key %" G_GINT64_FORMAT
        " of which rotary %" G_GINT64_FORMAT ", value %" G_GINT64_FORMAT
        "), q_lora_rank %" G_GINT64_FORMAT ", kv_lora_rank %" G_GINT64_FORMAT,
        a, at->qk_inner / a, at->qk_rope_dim, at->inner / a, at->q_lora_rank, at->kv_lora_rank);
  else
    g_string_append_printf(s,
                           "%" G_GINT64_FORMAT " heads, %" G_GINT64_FORMAT " key/value heads (%s)",
                           a, at->kv_heads > 0 ? at->kv_heads : a,
                           !gqa                ? "multi-head"
                           : at->kv_heads == 1 ? "multi-query"
                                               : "grouped-query");
  g_string_append_printf(s, ", position %s; MLP: %s, %" G_GINT64_FORMAT " wide",
                         at->rotary ? "rotary" : "learned or none",
                         fc1->gated ? "gated" : "ungated",
                         fc1->gated ? fc1->out_features / 2 : fc1->out_features);
  if (m->t_experts > 0) {
    g_string_append_printf(s,
                           "; experts: %" G_GINT64_FORMAT " routed (top %" G_GINT64_FORMAT
                           ", %" G_GINT64_FORMAT " wide)",
                           m->t_experts, m->t_top_k, m->t_moe_ffn);
    if (m->t_shared_experts > 0)
      g_string_append_printf(s, " + %" G_GINT64_FORMAT " shared", m->t_shared_experts);
    if (m->t_first_dense > 0)
      g_string_append_printf(s, ", first %" G_GINT64_FORMAT " blocks dense", m->t_first_dense);
  }
  g_string_append_printf(s, "; vocabulary %" G_GINT64_FORMAT " %s", emb->vocab,
                         emb->vocab_divisible_by > 1 ? "padded to a multiple of " : "unpadded");
  if (emb->vocab_divisible_by > 1)
    g_string_append_printf(s, "%" G_GINT64_FORMAT " x tp", emb->vocab_divisible_by);
  const ts_layer *lg = find_layer(m, TS_LAYER_DENSE, "logits");
  g_string_append(s, lg != NULL && !lg->tied ? ", untied output\n" : ", tied output\n");
  return g_string_free(s, FALSE);
}

static void add_num(JsonBuilder *b, const char *name, double v)
{
  json_builder_set_member_name(b, name);
  json_builder_add_double_value(b, v);
}

static char *render_json(const ts_model *m, const char *path)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  ts_json_header(b, "model");
  json_builder_set_member_name(b, "model");
  json_builder_add_string_value(b, m->name);
  json_builder_set_member_name(b, "model_file");
  json_builder_add_string_value(b, path);
  json_builder_set_member_name(b, "kind");
  json_builder_add_string_value(b, m->kind);
  add_num(b, "dtype_bytes", m->dtype_bytes);
  json_builder_set_member_name(b, "layers");
  json_builder_add_int_value(b, m->nlayers);
  json_builder_set_member_name(b, "blocks");
  json_builder_add_int_value(b, ts_model_blocks(m));
  add_num(b, "params", ts_model_params(m));
  add_num(b, "active_params", ts_model_active_params(m));
  add_num(b, "published_params", m->published_params);
  add_num(b, "fwd_FLOP_per_sample", ts_model_fwd_flops_per_sample(m));
  add_num(b, "train_FLOP_per_sample", ts_model_train_flops_per_sample(m));
  add_num(b, "saved_act_bytes_per_sample", ts_model_saved_act_bytes_per_sample(m));
  add_num(b, "sample_elems", (double)m->sample_elems);
  json_builder_set_member_name(b, "layer_table");
  json_builder_begin_array(b);
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, i);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, l->name);
    json_builder_set_member_name(b, "kind");
    json_builder_add_string_value(b, ts_layer_kind_name(l->kind));
    json_builder_set_member_name(b, "tp");
    json_builder_add_string_value(b, ts_tp_mode_name(l->tp));
    json_builder_set_member_name(b, "block");
    json_builder_add_int_value(b, l->block);
    json_builder_set_member_name(b, "input");
    json_builder_add_string_value(b, input_name(m, l));
    for (int c = 0; c < NCOLS; c++)
      add_num(b, col_names[c], col_value(l, (col)c));
    g_autofree char *shape = ts_layer_shape_text(l);
    json_builder_set_member_name(b, "shape");
    json_builder_add_string_value(b, shape);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
  return ts_json_builder_text(b);
}

static char *render_csv(const ts_model *m)
{
  GString *s = g_string_new("index,name,kind,tp,block,input");
  for (int c = 0; c < NCOLS; c++)
    g_string_append_printf(s, ",%s", col_names[c]);
  g_string_append(s, ",shape\n");
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    g_string_append_printf(s, "%d,", i);
    ts_csv_append(s, l->name);
    g_string_append_printf(s, ",%s,%s,%d,", ts_layer_kind_name(l->kind), ts_tp_mode_name(l->tp),
                           l->block);
    ts_csv_append(s, input_name(m, l));
    for (int c = 0; c < NCOLS; c++) {
      g_autofree char *v = ts_dtostr(col_value(l, (col)c));
      g_string_append_printf(s, ",%s", v);
    }
    g_autofree char *shape = ts_layer_shape_text(l);
    g_string_append_c(s, ',');
    ts_csv_append(s, shape);
    g_string_append_c(s, '\n');
  }
  return g_string_free(s, FALSE);
}

static void append_g(GString *s, double v, int w)
{
  GString *t = g_string_new(NULL);
  ts_append_g(t, 4, v);
  ts_append_cell(s, t->str, w, TRUE);
  g_string_free(t, TRUE);
}

static char *render_text(const ts_model *m, const char *path)
{
  GString *s = g_string_new(NULL);
  char b1[32], b2[32];
  g_string_append_printf(s, "%s (%s): kind %s, %d layers in %d blocks, %s bytes per element\n",
                         m->name, path, m->kind, m->nlayers, ts_model_blocks(m),
                         g_ascii_formatd(b1, sizeof b1, "%g", m->dtype_bytes));
  g_string_append_printf(s, "params %s",
                         g_ascii_formatd(b1, sizeof b1, "%.0f", ts_model_params(m)));
  if (m->published_params > 0)
    g_string_append_printf(
        s, " (published %s, %+.2f%%)", g_ascii_formatd(b2, sizeof b2, "%.6g", m->published_params),
        100.0 * (ts_model_params(m) - m->published_params) / m->published_params);
  if (m->t_experts > 0)
    g_string_append_printf(s, ", active per token %s",
                           g_ascii_formatd(b2, sizeof b2, "%.0f", ts_model_active_params(m)));
  g_string_append(s, "; per sample: forward ");
  ts_append_g(s, 4, ts_model_fwd_flops_per_sample(m));
  g_string_append(s, " FLOP, train ");
  ts_append_g(s, 4, ts_model_train_flops_per_sample(m));
  g_string_append(s, " FLOP, kept activations ");
  g_string_append(s, ts_fmt_bytes(b1, sizeof b1, ts_model_saved_act_bytes_per_sample(m)));
  g_string_append(s, "\n");
  g_autofree char *modern = modern_text(m);
  if (modern != NULL)
    g_string_append(s, modern);
  g_string_append(s, "\n");
  /* Column widths: names as long as the longest. */
  int wn = name_width(m), wi = 5;
  for (int i = 0; i < m->nlayers; i++)
    wi = MAX(wi, (int)strlen(input_name(m, &m->layers[i])));
  const int wv = 11;
  ts_append_cell(s, "index", 5, TRUE);
  g_string_append_c(s, ' ');
  ts_append_cell(s, "name", wn, FALSE);
  g_string_append(s, " kind      tp         block ");
  ts_append_cell(s, "input", wi, FALSE);
  static const col shown[] = {COL_PARAMS, COL_FWD, COL_SAVED, COL_CARRY};
  for (size_t c = 0; c < G_N_ELEMENTS(shown); c++) {
    g_string_append_c(s, ' ');
    ts_append_cell(s, col_names[shown[c]], MAX(wv, (int)strlen(col_names[shown[c]])), TRUE);
  }
  g_string_append(s, "  shape\n");
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    g_string_append_printf(s, "%5d ", i);
    ts_append_cell(s, l->name, wn, FALSE);
    g_string_append_printf(s, " %-9s %-10s %5d ", ts_layer_kind_name(l->kind),
                           ts_tp_mode_name(l->tp), l->block);
    ts_append_cell(s, input_name(m, l), wi, FALSE);
    for (size_t c = 0; c < G_N_ELEMENTS(shown); c++) {
      g_string_append_c(s, ' ');
      append_g(s, col_value(l, shown[c]), MAX(wv, (int)strlen(col_names[shown[c]])));
    }
    g_autofree char *shape = ts_layer_shape_text(l);
    g_string_append_printf(s, "  %s\n", shape);
  }
  g_string_append(s, "\nblock -1: a layer of its own; input: the layer whose output it reads "
                     "(data: the model input); carry_elems: elements per sample a pipeline cut "
                     "after the layer sends besides its output. --format csv or json has every "
                     "column (FLOPs, memory traffic) at full precision.\n");
  return g_string_free(s, FALSE);
}

/* --precision P: which precision each layer's GEMMs and other work run in (text, a section
 * after the table); m as the planner trains it under P, shown the model of the table. */
static void append_precision(GString *s, const ts_model *m, const ts_model *shown, int prec)
{
  if (m->dtype_bytes >= 4)
    g_string_append_printf(s,
                           "\nprecision=%s (split option; docs/models.md, \"Precision\"): GEMMs / "
                           "other work (norms, softmax, attention core, element-wise); fp32 "
                           "training: activations, weights and gradients 4 bytes an element\n",
                           ts_precision_name((ts_precision)prec));
  else
    g_string_append_printf(s,
                           "\nprecision=%s (split option; docs/models.md, \"Precision\"): GEMMs / "
                           "other work (norms, softmax, attention core, element-wise); the "
                           "optimizer step runs in fp32 on fp32 master weights, and model state "
                           "stays 16 bytes per parameter (bf16 weights and gradients, fp32 master "
                           "and moments)\n",
                           ts_precision_name((ts_precision)prec));
  if (prec == TS_PRECISION_FP8)
    g_string_append(s, "FP8 dynamic scaling around each FP8 GEMM (m x k) x (k x n), bf16 "
                       "sources: forward amax + cast of input and weight, 5 (mk + kn) bytes, 4 "
                       "kernels; backward amax + cast of the output gradient 5 mn, transposed "
                       "FP8 copies of weight, input and output gradient 2 (kn + mk + mn), 5 "
                       "kernels (docs/models.md, \"Precision\")\n");
  /* The kept activations the planner counts under this precision (ts_layer_saved_bytes, the
   * one formula both use): Transformer Engine's FP8 saves its GEMMs' inputs in FP8. */
  gboolean fp8_saved = prec == TS_PRECISION_FP8;
  double kept = 0.0;
  for (int i = 0; i < m->nlayers; i++)
    kept += ts_layer_saved_bytes(m, &m->layers[i], fp8_saved);
  char b1[32], b2[32];
  g_string_append_printf(
      s, "kept activations per sample under precision=%s: %s (bf16 table above: %s)%s\n",
      ts_precision_name((ts_precision)prec), ts_fmt_bytes(b1, sizeof b1, kept),
      ts_fmt_bytes(b2, sizeof b2, ts_model_saved_act_bytes_per_sample(shown)),
      fp8_saved ? "; Transformer Engine keeps each FP8 GEMM's input in FP8, one byte an element "
                  "(with fsdp2, torchao's Float8, the bf16 bytes)"
                : "");
  int wn = name_width(m);
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    int g, o;
    ts_layer_precision(l, prec, &g, &o);
    gboolean gemm =
        l->kind == TS_LAYER_DENSE || l->kind == TS_LAYER_ATTENTION || l->kind == TS_LAYER_CONV2D;
    g_string_append_printf(s, "%5d ", i);
    ts_append_cell(s, l->name, wn, FALSE);
    g_string_append_printf(
        s, " %-9s GEMMs %-4s other %-4s saved_act_bytes ", ts_layer_kind_name(l->kind),
        gemm ? ts_precision_name((ts_precision)g) : "-", ts_precision_name((ts_precision)o));
    ts_append_g(s, 4, ts_layer_saved_bytes(m, l, fp8_saved));
    g_string_append_c(s, '\n');
  }
}

/* --kernels eager: the element-wise ops each layer runs as kernels of their own under the
 * split option kernels=eager (loss=eager for the cross-entropy), with what the fused form
 * costs (text, a section after the table; sim/model/ts_elementwise.c). */
static void append_kernels(GString *s, const ts_model *m)
{
  g_string_append(s, "\nkernels=eager (split option; docs/models.md, \"Element-wise kernels\"): "
                     "element-wise ops as eager PyTorch runs them, each its own kernel through "
                     "memory, against the fused kernel(s) of the default kernels=fused. Bytes "
                     "read + written per element, kernels launched, forward / backward; the "
                     "cross-entropy is eager under loss=eager. A step costs the eager bytes "
                     "beyond the fused ones at achieved memory bandwidth.\n");
  int wn = name_width(m);
  int listed = 0;
  for (int i = 0; i < m->nlayers; i++) {
    ts_elem_op ops[TS_ELEM_MAX_OPS];
    int n = ts_layer_elementwise_ops(m, &m->layers[i], ops);
    for (int j = 0; j < n; j++, listed++) {
      const ts_elem_op *o = &ops[j];
      g_string_append_printf(s, "%5d ", i);
      ts_append_cell(s, m->layers[i].name, wn, FALSE);
      g_string_append_printf(s,
                             " %-22s %-38s %12.6g elements/sample  eager %g / %g B, %d / %d "
                             "kernels  fused %g / %g B, %d / %d kernels\n",
                             o->name, o->tensor, o->elems, o->eager_fwd_bytes, o->eager_bwd_bytes,
                             o->eager_fwd_kernels, o->eager_bwd_kernels, o->fused_fwd_bytes,
                             o->fused_bwd_bytes, o->fused_fwd_kernels, o->fused_bwd_kernels);
    }
  }
  if (listed == 0)
    g_string_append(s, "(no layer runs an element-wise op whose eager form costs more than its "
                       "fused one)\n");
}

int ts_cmd_model(int argc, char **argv)
{
  g_autofree char *model = NULL, *format = NULL, *output = NULL, *precision = NULL;
  g_autofree char *kernels = NULL;
  GOptionEntry entries[] = {
      {"model", 'm', 0, G_OPTION_ARG_FILENAME, &model, "Model file or shipped name (required)",
       "M"},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &format, "text (default), csv or json", "F"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
       "write here instead of stdout (atomically)", "FILE"},
      {"precision", 0, 0, G_OPTION_ARG_STRING, &precision,
       "text: also list which precision each layer's GEMMs and other work run in under a split's "
       "precision=P (bf16, fp8, fp32 or tf32)",
       "P"},
      {"kernels", 0, 0, G_OPTION_ARG_STRING, &kernels,
       "text: also list the element-wise ops each layer runs as kernels of their own under a "
       "split's kernels=eager, with their bytes and launches eager and fused (eager)",
       "K"},
      {NULL}};
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse("model", "",
                    "Lists a model's layers as trainsim derives them: shape, parameters, FLOPs, "
                    "memory traffic and kept activations per sample, and the layer graph.",
                    "Example:\n  trainsim model -m resnet50\n"
                    "  trainsim model -m amoebanet-d-18-208 --format csv -o amoebanet.csv\n"
                    "  trainsim model -m gpt3-1.3b --precision fp8\n"
                    "  trainsim model -m llama3-8b --kernels eager",
                    entries, &argc, &argv, &err))
    return ts_cmd_fail("model", err);
  ts_format fmt;
  if (argc > 1 || model == NULL) {
    if (argc > 1)
      ts_cmd_unexpected("model", argv[1], &err);
    else
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "missing --model M");
    return ts_cmd_fail("model", err);
  }
  if (!ts_cmd_format(format, &fmt, &err))
    return ts_cmd_fail("model", err);
  int prec = -1;
  if (precision != NULL) {
    prec = ts_precision_parse(precision);
    if (prec < 0 || strcmp(precision, "fp16") == 0) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "--precision '%s': expected bf16, fp8, fp32 or tf32", precision);
      return ts_cmd_fail("model", err);
    }
    if (fmt != TS_FORMAT_TEXT) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "--precision %s: listed in the text format only; expected no --format",
                  precision);
      return ts_cmd_fail("model", err);
    }
  }
  if (kernels != NULL && (strcmp(kernels, "eager") != 0 || fmt != TS_FORMAT_TEXT)) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                strcmp(kernels, "eager") != 0
                    ? "--kernels '%s': expected eager (the fused default lists nothing)"
                    : "--kernels %s: listed in the text format only; expected no --format",
                kernels);
    return ts_cmd_fail("model", err);
  }
  g_autofree char *path = NULL;
  g_autoptr(ts_model) m = ts_cmd_load_model(model, &path, &err);
  if (m == NULL)
    return ts_cmd_fail("model", err);
  g_autofree char *text = fmt == TS_FORMAT_JSON  ? render_json(m, path)
                          : fmt == TS_FORMAT_CSV ? render_csv(m)
                                                 : render_text(m, path);
  if (prec >= 0 || kernels != NULL) {
    GString *t = g_string_new(text);
    /* fp32 / tf32 on a 16-bit model: the model as the planner trains it, in fp32
     * (ts_plan_new). */
    g_autoptr(ts_model) m32 =
        (prec == TS_PRECISION_FP32 || prec == TS_PRECISION_TF32) && m->dtype_bytes < 4
            ? ts_model_load_fp32(path, &err)
            : NULL;
    if (prec >= 0)
      append_precision(t, m32 != NULL ? m32 : m, m, prec);
    if (kernels != NULL)
      append_kernels(t, m);
    g_free(text);
    text = g_string_free(t, FALSE);
  }
  if (!ts_write_file_atomic(output != NULL ? output : "-", text, strlen(text), &err))
    return ts_cmd_fail("model", err);
  if (output != NULL && strcmp(output, "-") != 0)
    fprintf(stderr, "trainsim model: wrote %s\n", output);
  return 0;
}
