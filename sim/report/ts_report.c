/* ts_report: renders predictions as a comparison table, CSV rows or a JSON document. */
#include "ts_report.h"
#include "ts_capacity.h"
#include "ts_util.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

void ts_result_fill(ts_result *r, const ts_plan *p, const ts_trace *tr, const ts_replay_result *rr)
{
  memset(r, 0, sizeof *r);
  r->split = g_strdup(p->split_text);
  r->placement = g_strdup(p->placement_text);
  r->chips = p->topo->nchips;
  r->global_batch = p->opt.global_batch;
  r->micro_batch = p->micro_batch;
  r->micro_batches = p->n_micro;
  const ts_rank_result *c = &rr->critical;
  r->step_time_s = rr->step_time_s;
  r->compute_time_s = c->compute_s;
  r->comm_time_s = c->comm_s;
  r->exposed_comm_time_s = c->exposed_comm_s;
  r->idle_time_s = c->idle_s;
  r->bubble_time_s = c->bubble_s;
  r->exposed_comm_dp_s = c->exposed_cat_s[TS_CAT_COMM_DP];
  r->exposed_comm_tp_s = c->exposed_cat_s[TS_CAT_COMM_TP];
  r->exposed_comm_pp_s = c->exposed_cat_s[TS_CAT_COMM_PP];
  r->samples_per_s = rr->step_time_s > 0 ? (double)p->opt.global_batch / rr->step_time_s : 0;
  r->model_flops_per_step = p->model_flops_per_step;
  /* MFU against the peak of the precision the GEMMs run in (fp32 models: the fp32 rate where
   * the chip gives one; FP8: the FP8 rate). */
  double rate = ts_chip_peak(&p->topo->chip, (ts_precision)p->precision);
  double peak = (rate > 0 ? rate : p->topo->chip.peak_flops) * p->topo->nchips;
  r->calibrated = !p->topo->chip.uncalibrated;
  r->precision = p->precision;
  r->mfu = rr->step_time_s > 0 ? p->model_flops_per_step / (rr->step_time_s * peak) : 0;
  r->mem = p->mem;
  int pp = p->degree[TS_AX_PP];
  r->mem_devices = p->stage_mem != NULL && pp <= TS_RESULT_MAX_DEVICES ? pp : 0;
  for (int s = 0; s < r->mem_devices; s++)
    r->mem_device_bytes[s] = p->stage_mem[s].total;
  r->events = rr->events;
  r->ops = ts_trace_nops(tr);
  r->simulated_ranks = rr->nsimulated;
  r->pipeline_stages = p->nstages;
  r->host_link_bytes_per_step = p->host_link_bytes_per_step;
  r->ps_push_bytes_per_step = p->ps_push_bytes_per_step;
  r->ps_pull_bytes_per_step = p->ps_pull_bytes_per_step;
  r->redistribution_bytes_per_step = p->redistribution_bytes_per_step;
  ts_capacity_fill(r, p, rr);
}

void ts_result_clear(ts_result *r)
{
  g_free(r->split);
  g_free(r->placement);
  g_free(r->link_summary);
  memset(r, 0, sizeof *r);
}

void ts_report_inputs_clear(ts_report_inputs *in)
{
  g_free(in->model_name);
  g_free(in->model_path);
  g_free(in->topology_name);
  g_free(in->topology_path);
  g_free(in->topology_desc);
  g_free(in->backend);
  g_free(in->network_model);
  g_free(in->collective_algorithm);
  g_free(in->text_appendix);
  memset(in, 0, sizeof *in);
}

gboolean ts_format_parse(const char *s, ts_format *out)
{
  if (s == NULL || strcmp(s, "text") == 0)
    *out = TS_FORMAT_TEXT;
  else if (strcmp(s, "csv") == 0)
    *out = TS_FORMAT_CSV;
  else if (strcmp(s, "json") == 0)
    *out = TS_FORMAT_JSON;
  else
    return FALSE;
  return TRUE;
}

/* JSON text, written here rather than by json-glib's generator: json-glib 1.6 appends ".0" to
 * every double without a '.', so 1e20 became the invalid "1e+20.0". The layout is the
 * generator's (two-space indent, "key" : value, "[]" and "{  }" for empties), so documents
 * are byte-identical to what it wrote for every value it wrote correctly. Members whose name
 * ends in "bytes" or "bytes_per_step" (and everything inside them) are byte counts: written as
 * exact integers ("2", not "2.0"; "13927412640", not "1.392741264e+10"), whatever the builder
 * stored. */
static void json_indent(GString *s, int level)
{
  for (int i = 0; i < level; i++)
    g_string_append(s, "  ");
}

static void json_double(GString *s, double v, gboolean bytes)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  if (!isfinite(v)) {
    /* JSON has no infinity or NaN; the builders never store them, but never write invalid
     * text if one does. */
    g_string_append(s, "null");
    return;
  }
  if (bytes && fabs(v) < 9.2e18) {
    g_string_append_printf(s, "%" G_GINT64_FORMAT, (gint64)llround(v));
    return;
  }
  g_ascii_formatd(buf, sizeof buf, "%.17g", v);
  g_string_append(s, buf);
  if (strpbrk(buf, ".e") == NULL)
    g_string_append(s, ".0");
}

static void json_value(GString *s, JsonNode *n, int level, gboolean bytes)
{
  switch (JSON_NODE_TYPE(n)) {
  case JSON_NODE_NULL:
    g_string_append(s, "null");
    return;
  case JSON_NODE_VALUE:
    switch (json_node_get_value_type(n)) {
    case G_TYPE_INT64:
      g_string_append_printf(s, "%" G_GINT64_FORMAT, json_node_get_int(n));
      return;
    case G_TYPE_DOUBLE:
      json_double(s, json_node_get_double(n), bytes);
      return;
    case G_TYPE_BOOLEAN:
      g_string_append(s, json_node_get_boolean(n) ? "true" : "false");
      return;
    default:
      ts_json_append_string(s, json_node_get_string(n) != NULL ? json_node_get_string(n) : "");
      return;
    }
  case JSON_NODE_ARRAY: {
    JsonArray *a = json_node_get_array(n);
    guint len = json_array_get_length(a);
    if (len == 0) {
      g_string_append(s, "[]");
      return;
    }
    g_string_append(s, "[\n");
    for (guint i = 0; i < len; i++) {
      json_indent(s, level + 1);
      json_value(s, json_array_get_element(a, i), level + 1, bytes);
      g_string_append(s, i + 1 < len ? ",\n" : "\n");
    }
    json_indent(s, level);
    g_string_append_c(s, ']');
    return;
  }
  case JSON_NODE_OBJECT: {
    JsonObject *o = json_node_get_object(n);
    GList *members = json_object_get_members(o); /* in insertion order */
    if (members == NULL) {
      g_string_append(s, "{  }");
      return;
    }
    g_string_append(s, "{\n");
    for (GList *m = members; m != NULL; m = m->next) {
      const char *key = m->data;
      json_indent(s, level + 1);
      ts_json_append_string(s, key);
      g_string_append(s, " : ");
      gboolean b =
          bytes || g_str_has_suffix(key, "bytes") || g_str_has_suffix(key, "bytes_per_step");
      json_value(s, json_object_get_member(o, key), level + 1, b);
      g_string_append(s, m->next != NULL ? ",\n" : "\n");
    }
    g_list_free(members);
    json_indent(s, level);
    g_string_append_c(s, '}');
    return;
  }
  }
}

char *ts_json_text(JsonNode *root)
{
  GString *s = g_string_new(NULL);
  json_value(s, root, 0, FALSE);
  g_string_append_c(s, '\n');
  return g_string_free(s, FALSE);
}

void ts_json_header(JsonBuilder *b, const char *document)
{
  json_builder_set_member_name(b, "trainsim_version");
  json_builder_add_string_value(b, TS_VERSION);
  json_builder_set_member_name(b, "document");
  json_builder_add_string_value(b, document);
  json_builder_set_member_name(b, "schema_version");
  json_builder_add_int_value(b, TS_JSON_SCHEMA_VERSION);
}

char *ts_json_builder_text(JsonBuilder *b)
{
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  return ts_json_text(root);
}

static int fastest(const ts_result *res, int n)
{
  gboolean any_fits = FALSE;
  for (int i = 0; i < n; i++)
    any_fits |= res[i].mem.fits;
  int best = -1;
  for (int i = 0; i < n; i++)
    if ((res[i].mem.fits || !any_fits) && (best < 0 || res[i].step_time_s < res[best].step_time_s))
      best = i;
  return best;
}

const char *ts_report_uncalibrated_note(void)
{
  return "note: the chip profile is not calibrated (datasheet rates derated by assumed "
         "defaults): step times are estimates, MFU an upper bound (<=); docs/topologies.md, "
         "\"Chip profiles\"\n";
}

char *ts_report_fmt_rate(gboolean known, double v)
{
  if (!known || !isfinite(v))
    return g_strdup("-");
  char b[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_formatd(b, sizeof b, v >= 100 ? "%.0f" : "%.3g", v);
  return g_strdup(b);
}

static char *render_text(const ts_report_inputs *in, const ts_result *res, int n)
{
  GString *s = g_string_new(NULL);
  /* An imported trace may record no batch (ASTRA-sim's workloads do not): n/a, not 0. */
  char gb[32] = "n/a";
  if (in->global_batch > 0)
    g_snprintf(gb, sizeof gb, "%" G_GINT64_FORMAT, in->global_batch);
  g_string_append_printf(s, "%s on %s, global batch %s, %s backend\n", in->model_name,
                         in->topology_desc, gb, in->backend);
  /* Throughput in samples and, for models with a sequence, in tokens, in total and per chip:
   * LLM runs are compared in tokens/s per chip whatever the array size. */
  enum { NCOL = 12 };
  const char *head[NCOL] = {"split",         "placement", "step",        "compute",
                            "exposed comm",  "idle",      "samples/s",   "tokens/s",
                            "tokens/s/chip", "MFU",       "memory/chip", "fits"};
  gboolean right[NCOL] = {FALSE, FALSE, TRUE, TRUE, TRUE, TRUE,
                          TRUE,  TRUE,  TRUE, TRUE, TRUE, FALSE};
  char ***cells = g_new0(char **, n);
  int w[NCOL];
  for (int c = 0; c < NCOL; c++)
    w[c] = (int)strlen(head[c]);
  for (int i = 0; i < n; i++) {
    const ts_result *r = &res[i];
    char b[8][48];
    cells[i] = g_new0(char *, NCOL + 1); /* NULL-terminated for g_strfreev */
    cells[i][0] = g_strdup(r->split);
    cells[i][1] = g_strdup(r->placement);
    cells[i][2] = g_strdup(ts_fmt_time(b[0], 48, r->step_time_s));
    cells[i][3] = g_strdup(ts_fmt_time(b[1], 48, r->compute_time_s));
    cells[i][4] = g_strdup(ts_fmt_time(b[2], 48, r->exposed_comm_time_s));
    cells[i][5] = g_strdup(ts_fmt_time(b[3], 48, r->idle_time_s));
    cells[i][6] = ts_report_fmt_rate(r->global_batch > 0, r->samples_per_s);
    cells[i][7] = ts_report_fmt_rate(r->tokens_per_sample > 0, r->tokens_per_s);
    cells[i][8] =
        ts_report_fmt_rate(r->tokens_per_sample > 0 && r->chips > 0, r->tokens_per_s / r->chips);
    g_ascii_formatd(b[5], 48, "%.1f", 100.0 * r->mfu);
    /* An uncalibrated chip's MFU comes from assumed rates: an upper bound, shown as one. A
     * trace that records no model FLOPs has none. */
    cells[i][9] = r->model_flops_per_step > 0
                      ? g_strdup_printf("%s%s%%", r->calibrated ? "" : "<=", b[5])
                      : g_strdup("n/a");
    cells[i][10] = g_strdup(ts_fmt_bytes(b[6], 48, r->mem.total));
    if (r->mem.total <= 0) {
      /* A replayed trace carries no memory model: say so, not "0 B, fits". */
      g_free(cells[i][10]);
      cells[i][10] = g_strdup("n/a");
      cells[i][11] = g_strdup("n/a");
    } else if (r->mem.fits)
      cells[i][11] = g_strdup("yes");
    else if (r->mem.over <= 0)
      cells[i][11] = g_strdup("no (host or NVMe full)");
    else if (r->mem.max_micro_batch > 0)
      cells[i][11] = g_strdup_printf("no (over by %s; micro-batch <= %" G_GINT64_FORMAT " fits)",
                                     ts_fmt_bytes(b[7], 48, r->mem.over), r->mem.max_micro_batch);
    else
      cells[i][11] = g_strdup_printf("no (over by %s; no micro-batch fits)",
                                     ts_fmt_bytes(b[7], 48, r->mem.over));
    for (int c = 0; c < NCOL; c++) {
      int len = (int)g_utf8_strlen(cells[i][c], -1);
      if (len > w[c])
        w[c] = len;
    }
  }
  for (int c = 0; c < NCOL; c++) {
    ts_append_cell(s, head[c], c + 1 < NCOL ? w[c] : 0, right[c]);
    g_string_append(s, c + 1 < NCOL ? "  " : "\n");
  }
  for (int i = 0; i < n; i++) {
    for (int c = 0; c < NCOL; c++) {
      ts_append_cell(s, cells[i][c], c + 1 < NCOL ? w[c] : 0, right[c]);
      g_string_append(s, c + 1 < NCOL ? "  " : "\n");
    }
    g_strfreev(cells[i]);
  }
  g_free(cells);
  if (n > 1) {
    /* Ranked among the splits that fit; one that does not fit is never "fastest". */
    int best = fastest(res, n), fit = 0;
    for (int i = 0; i < n; i++)
      fit += res[i].mem.fits;
    g_string_append_printf(s, "%s: %s",
                           fit == n   ? "fastest"
                           : fit == 0 ? "fastest (none fits)"
                                      : "fastest that fits",
                           res[best].split);
    for (int i = 0; i < n; i++) {
      if (i == best)
        continue;
      char num[32];
      double ratio = res[i].step_time_s / res[best].step_time_s;
      g_ascii_formatd(num, sizeof num, "%.2f", ratio >= 1 ? ratio : 1 / ratio);
      g_string_append_printf(s, "; %s is %sx %s%s", res[i].split, num,
                             ratio >= 1 ? "slower" : "faster",
                             res[best].mem.fits && !res[i].mem.fits ? " but does not fit" : "");
    }
    g_string_append_c(s, '\n');
    if (fit == 0)
      g_string_append(s, "none fits in memory: `trainsim search` ranks the splits that do "
                         "(pipelines, ZeRO, recomputation, offload)\n");
  }
  for (int i = 0; i < n; i++) {
    /* memory/chip as it adds up: model states, gathered parameters, kept activations, working
     * buffers (or the optimizer step's temporary when the peak is there) and the allocator's
     * overhead. */
    const ts_memory *mm = &res[i].mem;
    if (mm->total <= 0)
      continue;
    char b[7][48];
    g_string_append_printf(
        s, "memory/chip %s: params+grads+optimizer %s, gathered %s, activations %s, %s %s, ",
        res[i].split, ts_fmt_bytes(b[0], 48, mm->params + mm->grads + mm->optimizer),
        ts_fmt_bytes(b[1], 48, mm->gathered), ts_fmt_bytes(b[2], 48, mm->activations),
        mm->step_peak ? "optimizer step" : "buffers", ts_fmt_bytes(b[3], 48, mm->temp));
    if (mm->cp_attn > 0) /* only cp-ring=torch's */
      g_string_append_printf(s, "cp attention buffers %s (in buffers), ",
                             ts_fmt_bytes(b[6], 48, mm->cp_attn));
    if (mm->pipeline > 0) /* only torch.distributed.pipelining's (fsdp2 with pp) */
      g_string_append_printf(s, "pipeline buffers %s, ", ts_fmt_bytes(b[5], 48, mm->pipeline));
    g_string_append_printf(s, "allocator %s\n", ts_fmt_bytes(b[4], 48, mm->allocator));
  }
  if (n > 0 && res[0].mem.reserve > 0) {
    /* One line: what "fits" compares (every row of a run shares the chip). */
    char cap[48], rsv[48];
    g_string_append_printf(s,
                           "fits: memory/chip <= capacity %s less the runtime reserve %s "
                           "(runtime context, communication buffers: [chip] "
                           "memory_reserve_GiB)\n",
                           ts_fmt_bytes(cap, sizeof cap, res[0].mem.capacity),
                           ts_fmt_bytes(rsv, sizeof rsv, res[0].mem.reserve));
  }
  for (int i = 0; i < n; i++)
    if (!res[i].calibrated) {
      g_string_append(s, ts_report_uncalibrated_note());
      break;
    }
  for (int i = 0; i < n; i++)
    if (res[i].link_summary != NULL)
      g_string_append_printf(s, "\n%s: %" G_GINT64_FORMAT " flows simulated\n%s", res[i].split,
                             res[i].flows, res[i].link_summary);
  if (in->text_appendix != NULL)
    g_string_append(s, in->text_appendix);
  return g_string_free(s, FALSE);
}

#define CSV_HEADER                                                                                 \
  "model,topology,backend,split,placement,chips,global_batch,micro_batch,micro_batches,"           \
  "step_time_s,compute_time_s,comm_time_s,exposed_comm_time_s,exposed_comm_dp_s,"                  \
  "exposed_comm_tp_s,exposed_comm_pp_s,idle_time_s,bubble_time_s,samples_per_s,mfu,"               \
  "memory_params_bytes,memory_grads_bytes,memory_optimizer_bytes,memory_activations_bytes,"        \
  "memory_temp_bytes,memory_per_chip_bytes,memory_capacity_bytes,fits_memory,"                     \
  "memory_over_bytes,max_micro_batch_fits,memory_host_bytes,memory_nvme_bytes,"                    \
  "inflight_micro_batches,memory_stage,pipeline_stages,host_link_bytes_per_step,"                  \
  "ps_push_bytes_per_step,ps_pull_bytes_per_step,redistribution_bytes_per_step,"                   \
  "memory_reserve_bytes,calibrated,precision\n"

static void csv_num(GString *s, double v)
{
  g_string_append_c(s, ',');
  ts_append_g(s, 10, v);
}

/* A byte count: an exact integer ("13927412640", not "1.392741264e+10"). */
static void csv_bytes(GString *s, double v)
{
  g_string_append_printf(s, ",%" G_GINT64_FORMAT, isfinite(v) ? (gint64)llround(v) : (gint64)0);
}

static char *render_csv(const ts_report_inputs *in, const ts_result *res, int n)
{
  GString *s = g_string_new(CSV_HEADER);
  /* Capacity-planning columns (issue 14) follow the run columns. */
  g_string_truncate(s, s->len - 1);
  g_string_append(s, ts_capacity_csv_header());
  g_string_append(s, ",memory_gathered_bytes,memory_loss_temp_bytes,memory_step_temp_bytes,"
                     "memory_allocator_bytes");
  g_string_append_c(s, '\n');
  for (int i = 0; i < n; i++) {
    const ts_result *r = &res[i];
    ts_csv_append(s, in->model_name);
    g_string_append_c(s, ',');
    ts_csv_append(s, in->topology_name);
    g_string_append_c(s, ',');
    ts_csv_append(s, in->backend);
    g_string_append_c(s, ',');
    ts_csv_append(s, r->split);
    g_string_append_c(s, ',');
    ts_csv_append(s, r->placement);
    /* A trace without a batch or model FLOPs: those cells empty, as the memory's below. */
    g_string_append_printf(s, ",%d,", r->chips);
    if (r->global_batch > 0)
      g_string_append_printf(s, "%" G_GINT64_FORMAT, r->global_batch);
    g_string_append_printf(s, ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT, r->micro_batch,
                           r->micro_batches);
    const double v[] = {r->step_time_s,
                        r->compute_time_s,
                        r->comm_time_s,
                        r->exposed_comm_time_s,
                        r->exposed_comm_dp_s,
                        r->exposed_comm_tp_s,
                        r->exposed_comm_pp_s,
                        r->idle_time_s,
                        r->bubble_time_s,
                        r->samples_per_s,
                        r->mfu};
    for (size_t k = 0; k < G_N_ELEMENTS(v); k++) {
      if ((k == 9 && r->global_batch <= 0) || (k == 10 && r->model_flops_per_step <= 0))
        g_string_append_c(s, ',');
      else
        csv_num(s, v[k]);
    }
    const double bytes[] = {r->mem.params, r->mem.grads, r->mem.optimizer, r->mem.activations,
                            r->mem.temp,   r->mem.total, r->mem.capacity};
    /* A replayed trace carries no memory model: its memory and fits cells are empty. */
    gboolean known = r->mem.total > 0;
    for (size_t k = 0; k < G_N_ELEMENTS(bytes); k++)
      if (known || k != 5)
        csv_bytes(s, bytes[k]);
      else
        g_string_append_c(s, ',');
    g_string_append_printf(s, ",%s", !known ? "" : r->mem.fits ? "true" : "false");
    csv_bytes(s, r->mem.over);
    g_string_append_printf(s, ",%" G_GINT64_FORMAT, r->mem.max_micro_batch);
    csv_bytes(s, r->mem.host);
    csv_bytes(s, r->mem.nvme);
    csv_num(s, r->mem.inflight);
    g_string_append_printf(s, ",%d,%d", r->mem.stage, r->pipeline_stages);
    csv_bytes(s, r->host_link_bytes_per_step);
    csv_bytes(s, r->ps_push_bytes_per_step);
    csv_bytes(s, r->ps_pull_bytes_per_step);
    csv_bytes(s, r->redistribution_bytes_per_step);
    csv_bytes(s, r->mem.reserve);
    g_string_append_printf(s, ",%s,%s", r->calibrated ? "true" : "false",
                           ts_precision_name((ts_precision)r->precision));
    ts_capacity_csv_row(s, r);
    csv_bytes(s, r->mem.gathered);
    csv_bytes(s, r->mem.loss_temp);
    csv_bytes(s, r->mem.step_temp);
    csv_bytes(s, r->mem.allocator);
    g_string_append_c(s, '\n');
  }
  return g_string_free(s, FALSE);
}

static void jnum(JsonBuilder *b, const char *k, double v)
{
  json_builder_set_member_name(b, k);
  json_builder_add_double_value(b, v);
}

static void jint(JsonBuilder *b, const char *k, gint64 v)
{
  json_builder_set_member_name(b, k);
  json_builder_add_int_value(b, v);
}

/* v when positive, else null (a quantity a replayed trace does not record). */
static void jint_known(JsonBuilder *b, const char *k, gint64 v)
{
  json_builder_set_member_name(b, k);
  if (v > 0)
    json_builder_add_int_value(b, v);
  else
    json_builder_add_null_value(b);
}

static void jnum_known(JsonBuilder *b, const char *k, gboolean known, double v)
{
  json_builder_set_member_name(b, k);
  if (known)
    json_builder_add_double_value(b, v);
  else
    json_builder_add_null_value(b);
}

static void jstr(JsonBuilder *b, const char *k, const char *v)
{
  json_builder_set_member_name(b, k);
  if (v != NULL)
    json_builder_add_string_value(b, v);
  else
    json_builder_add_null_value(b);
}

static char *render_json(const ts_report_inputs *in, const ts_result *res, int n)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  ts_json_header(b, "run");
  json_builder_set_member_name(b, "inputs");
  json_builder_begin_object(b);
  jstr(b, "model", in->model_name);
  jstr(b, "model_file", in->model_path);
  jstr(b, "topology", in->topology_name);
  jstr(b, "topology_file", in->topology_path);
  jstr(b, "backend", in->backend);
  jstr(b, "network_model", in->network_model);
  jstr(b, "collective_algorithm", in->collective_algorithm);
  jint_known(b, "global_batch", in->global_batch);
  jint(b, "micro_batch", in->micro_batch);
  json_builder_end_object(b);
  json_builder_set_member_name(b, "results");
  json_builder_begin_array(b);
  for (int i = 0; i < n; i++) {
    const ts_result *r = &res[i];
    json_builder_begin_object(b);
    jstr(b, "split", r->split);
    jstr(b, "placement", r->placement);
    jint(b, "chips", r->chips);
    jint_known(b, "global_batch", r->global_batch);
    jint(b, "micro_batch", r->micro_batch);
    jint(b, "micro_batches", r->micro_batches);
    jnum(b, "step_time_s", r->step_time_s);
    jnum(b, "compute_time_s", r->compute_time_s);
    jnum(b, "comm_time_s", r->comm_time_s);
    jnum(b, "exposed_comm_time_s", r->exposed_comm_time_s);
    jnum(b, "exposed_comm_dp_s", r->exposed_comm_dp_s);
    jnum(b, "exposed_comm_tp_s", r->exposed_comm_tp_s);
    jnum(b, "exposed_comm_pp_s", r->exposed_comm_pp_s);
    jnum(b, "idle_time_s", r->idle_time_s);
    jnum(b, "bubble_time_s", r->bubble_time_s);
    /* null for a trace that records no batch or no model FLOPs (an imported one). */
    jnum_known(b, "samples_per_s", r->global_batch > 0, r->samples_per_s);
    jnum_known(b, "mfu", r->model_flops_per_step > 0, r->mfu);
    json_builder_set_member_name(b, "mfu_is_upper_bound");
    json_builder_add_boolean_value(b, !r->calibrated);
    json_builder_set_member_name(b, "calibrated");
    json_builder_add_boolean_value(b, r->calibrated);
    jstr(b, "precision", ts_precision_name((ts_precision)r->precision));
    jnum(b, "model_flops_per_step", r->model_flops_per_step);
    /* A replayed trace carries no memory model: null, not "0 bytes, fits". */
    json_builder_set_member_name(b, "memory_per_chip_bytes");
    if (r->mem.total > 0)
      json_builder_add_double_value(b, r->mem.total);
    else
      json_builder_add_null_value(b);
    json_builder_set_member_name(b, "memory_breakdown_bytes");
    json_builder_begin_object(b);
    jnum(b, "params", r->mem.params);
    jnum(b, "grads", r->mem.grads);
    jnum(b, "optimizer", r->mem.optimizer);
    jnum(b, "activations", r->mem.activations);
    jnum(b, "temp", r->mem.temp);
    jnum(b, "gathered", r->mem.gathered);
    jnum(b, "pipeline", r->mem.pipeline);
    if (r->mem.cp_attn > 0) /* cp-ring=torch only; part of temp */
      jnum(b, "cp_attention", r->mem.cp_attn);
    jnum(b, "allocator", r->mem.allocator);
    jnum(b, "reserve", r->mem.reserve);
    json_builder_end_object(b);
    jnum(b, "memory_reserve_bytes", r->mem.reserve);
    jnum(b, "memory_capacity_bytes", r->mem.capacity);
    json_builder_set_member_name(b, "fits_memory");
    if (r->mem.total > 0)
      json_builder_add_boolean_value(b, r->mem.fits);
    else
      json_builder_add_null_value(b);
    jnum(b, "memory_over_bytes", r->mem.over);
    jint(b, "max_micro_batch_fits", r->mem.max_micro_batch);
    json_builder_set_member_name(b, "memory_offloaded_bytes");
    json_builder_begin_object(b);
    jnum(b, "host", r->mem.host);
    jnum(b, "nvme", r->mem.nvme);
    json_builder_end_object(b);
    jnum(b, "host_memory_capacity_bytes", r->mem.host_capacity);
    jnum(b, "nvme_capacity_bytes", r->mem.nvme_capacity);
    jnum(b, "inflight_micro_batches", r->mem.inflight);
    jint(b, "memory_stage", r->mem.stage);
    if (r->mem.total > 0 && r->mem_devices > 0) {
      /* Every pipeline device's total (memory_per_chip_bytes is the largest, memory_stage). */
      json_builder_set_member_name(b, "memory_per_device_bytes");
      json_builder_begin_array(b);
      for (int d = 0; d < r->mem_devices; d++)
        json_builder_add_double_value(b, r->mem_device_bytes[d]);
      json_builder_end_array(b);
    }
    jint(b, "pipeline_stages", r->pipeline_stages);
    jnum(b, "host_link_bytes_per_step", r->host_link_bytes_per_step);
    jnum(b, "ps_push_bytes_per_step", r->ps_push_bytes_per_step);
    jnum(b, "ps_pull_bytes_per_step", r->ps_pull_bytes_per_step);
    jnum(b, "redistribution_bytes_per_step", r->redistribution_bytes_per_step);
    jint(b, "trace_ops", r->ops);
    jint(b, "replay_events", r->events);
    jint(b, "simulated_ranks", r->simulated_ranks);
    ts_capacity_json(b, r);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  if (n > 0)
    jstr(b, "fastest_split", res[fastest(res, n)].split);
  json_builder_end_object(b);
  return ts_json_builder_text(b);
}

char *ts_report_render(const ts_report_inputs *in, const ts_result *res, int n, ts_format f)
{
  switch (f) {
  case TS_FORMAT_CSV:
    return render_csv(in, res, n);
  case TS_FORMAT_JSON:
    return render_json(in, res, n);
  case TS_FORMAT_TEXT:
  default:
    return render_text(in, res, n);
  }
}
