/* cmd_run: `trainsim run`, the what-if: step time, breakdown and memory of one or more splits. */
#include "ts_backends.h"
#include "ts_capacity.h"
#include "ts_cmd.h"
#include "ts_degrade.h"
#include "ts_plot.h"
#include "ts_run.h"
#include "ts_timeline.h"
#include "ts_util.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

/* Candidate splits when none is given: pure data, hybrid with tensor parallelism along the
 * fastest dimension, and the most tensor-parallel split the model admits (and, when none of
 * them fits, a pipeline with recomputation: see ts_cmd_run). A candidate "A|B|C" is a list of
 * alternatives: the first that applies is predicted. */
static GPtrArray *default_splits(const ts_topo *t)
{
  GPtrArray *v = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(v, g_strdup_printf("dp=%d", t->nchips));
  int fast = 0;
  for (int d = 1; d < t->ndims; d++)
    if (t->dims[d].link_bw_Bps > t->dims[fast].link_bw_Bps)
      fast = d;
  int k = t->dims[fast].size;
  if (k > 1 && k < t->nchips)
    g_ptr_array_add(v, g_strdup_printf("tp=%d,dp=%d", k, t->nchips / k));
  /* The most tensor-parallel split the model admits: tp over every chip, or the largest
   * halving of it that still divides the model's heads and features (tried in order). */
  GString *alt = g_string_new(NULL);
  for (int m = t->nchips; m > k && m > 1 && m % 2 == 0; m /= 2)
    g_string_append_printf(alt, "%stp=%d", alt->len ? "|" : "", m);
  if (alt->len > 0)
    g_ptr_array_add(v, g_string_free(alt, FALSE));
  else
    g_string_free(alt, TRUE);
  return v;
}

int ts_cmd_run(int argc, char **argv)
{
  g_autofree char *format = NULL, *outdir = NULL;
  g_autofree char *backend = NULL, *timeline = NULL, *timeline_json = NULL;
  g_auto(ts_cmd_machine_args) ma = {0};
  gboolean full = FALSE, plot = FALSE;
  g_autofree char *link_report = NULL;
  g_auto(ts_capacity_options) cap;
  ts_capacity_options_init(&cap);
  g_auto(ts_cmd_plan_args) pa;
  ts_cmd_plan_args_init(&pa, TS_CMD_PLAN_COMPARE);
  GOptionEntry run_entries[] = {
      {"backend", 0, 0, G_OPTION_ARG_STRING, &backend, ts_backend_kind_help(), "B"},
      {"link-report", 0, 0, G_OPTION_ARG_FILENAME, &link_report,
       "simgrid backend: write every link's load (bytes, busy s, busy fraction, top operation) "
       "as CSV; needs one --split",
       "FILE.csv"},
      {"full", 0, 0, G_OPTION_ARG_NONE, &full,
       "Replay every rank even where ranks are identical (slower; same result)", NULL},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &format, "Output format: text (default), csv, json",
       "F"},
      {"output-dir", 'o', 0, G_OPTION_ARG_FILENAME, &outdir,
       "Also write results.txt, results.csv and results.json here (atomically)", "DIR"},
      {"plot", 0, 0, G_OPTION_ARG_NONE, &plot,
       "Also draw breakdown, memory (and timeline) plots into DIR/plots; needs --output-dir "
       "and gnuplot",
       NULL},
      {"timeline", 0, 0, G_OPTION_ARG_FILENAME, &timeline,
       "Write the replayed step (one --split) as Chrome trace-event JSON (Perfetto); tracks for "
       "the simulated chips, every chip with --full",
       "FILE.json"},
      {NULL}};
  g_autofree GOptionEntry *plan_entries = ts_cmd_plan_entries(&pa);
  g_autofree GOptionEntry *cap_entries = ts_capacity_option_entries(&cap);
  g_autofree GOptionEntry *machine_entries = ts_cmd_machine_entries(&ma);
  g_autofree GOptionEntry *own_entries = ts_option_entries_concat(plan_entries, run_entries);
  g_autofree GOptionEntry *e2 = ts_option_entries_concat(own_entries, machine_entries);
  g_autofree GOptionEntry *entries = ts_option_entries_concat(e2, cap_entries);
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse("run", "",
                    "Predicts step time (s), its breakdown, throughput (samples/s), "
                    "MFU and memory per chip (bytes) of splits of a model on a topology.",
                    "Example:\n  trainsim run --topology tpu-v3-8x8 --model bert-large "
                    "--global-batch 512\n  trainsim run -t dgx-a100-4node -m gpt3-1.3b -b 256 "
                    "--split tp=8@node,dp=4@net --format json",
                    entries, &argc, &argv, &err) ||
      !ts_capacity_options_finish(&cap, &err))
    return ts_cmd_fail("run", err);
  ts_format fmt;
  if (argc > 1) {
    ts_cmd_unexpected("run", argv[1], &err);
    return ts_cmd_fail("run", err);
  }
  if (!ts_cmd_format(format, &fmt, &err))
    return ts_cmd_fail("run", err);
  ts_plan_options po;
  if (!ts_cmd_plan_args_finish(&pa, &po, &err))
    return ts_cmd_fail("run", err);
  char **splits = pa.splits;
  gint64 global_batch = pa.global_batch, micro_batch = pa.micro_batch;
  if (!ts_run_backend_valid(backend, &err) || !ts_cmd_cfg(backend, ma.cfg, &err))
    return ts_cmd_fail("run", err);
  if (link_report != NULL &&
      (backend == NULL || strcmp(backend, "simgrid") != 0 || g_strv_length(splits) != 1)) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--link-report %s: expected --backend simgrid and exactly one --split",
                link_report);
    return ts_cmd_fail("run", err);
  }
  if (timeline != NULL && (splits == NULL || splits[0] == NULL || splits[1] != NULL)) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--timeline %s: expected exactly one --split (a timeline shows one split's step)",
                timeline);
    return ts_cmd_fail("run", err);
  }
  if (plot && (outdir == NULL || !ts_plot_gnuplot_available(&err))) {
    if (err == NULL)
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--plot: expected --output-dir DIR too");
    return ts_cmd_fail("run", err);
  }
  if (outdir != NULL && !ts_cmd_prepare_dir(outdir, &err))
    return ts_cmd_fail("run", err);
  g_autofree char *tpath = NULL, *mpath = NULL;
  g_autoptr(ts_topo) topo = ts_cmd_load_topo(pa.topology, &tpath, &err);
  if (topo == NULL || !ts_degrade_apply_options(topo, ma.fails, ma.stragglers, &err))
    return ts_cmd_fail("run", err);
  g_autoptr(ts_model) model = ts_cmd_load_model(pa.model, &mpath, &err);
  if (model == NULL)
    return ts_cmd_fail("run", err);

  ts_run_options ro = {.backend = backend ? backend : "analytic",
                       .sg_cfg = (const char *const *)ma.cfg,
                       .full = full};
  ro.link_report = link_report;
  ro.progress = "run (simgrid)";

  gboolean defaults = splits == NULL;
  g_autoptr(GPtrArray) list = defaults ? default_splits(topo) : g_ptr_array_new();
  if (!defaults)
    for (char **s = splits; *s != NULL; s++)
      g_ptr_array_add(list, *s);
  GArray *results = g_array_new(FALSE, TRUE, sizeof(ts_result));
  int status = 0;
  GError *first_skip = NULL;
  for (guint i = 0; i < list->len; i++) {
    g_auto(GStrv) alts = g_strsplit(g_ptr_array_index(list, i), "|", -1);
    ts_result res;
    gboolean ok = FALSE;
    const char *text = alts[0];
    if (text == NULL) {
      /* --split '': g_strsplit gives no piece; the parser names what was expected. */
      ts_split_free(ts_split_parse("", &err));
      text = "";
    }
    for (char **a = alts; *a != NULL && !ok; a++) {
      g_clear_error(&err);
      text = *a;
      g_autoptr(ts_split) sp = ts_split_parse(text, &err);
      ok = sp != NULL;
      if (ok && timeline != NULL) /* one split (checked above): predict it and keep its spans */
        ok = ts_run_predict_ex(model, topo, sp, &po, &ro, &res, &timeline_json, &err);
      else if (ok)
        ok = ts_run_predict(model, topo, sp, &po, &ro, &res, &err);
      if (!ok && !(defaults && err->code == TS_ERROR_INVALID))
        break;
      /* Said, not refused: a framework option a dataset row names whatever the degrees. */
      g_autofree char *noop =
          ok ? ts_split_noop_options(sp, res.dp_degree, res.micro_batches) : NULL;
      if (noop != NULL)
        fprintf(stderr, "trainsim run: note: --split '%s': %s\n", text, noop);
    }
    if (!ok) {
      /* A default candidate that does not apply to this model is skipped with a note; a split
       * the user asked for is an error. */
      if (defaults && err->code == TS_ERROR_INVALID) {
        fprintf(stderr, "trainsim run: note: skipped %s: %s\n", text, err->message);
        if (first_skip == NULL)
          first_skip = g_steal_pointer(&err);
        g_clear_error(&err);
        continue;
      }
      status = ts_cmd_fail("run", err);
      break;
    }
    if (!ts_capacity_apply(&cap, topo, &res, &err)) {
      ts_result_clear(&res);
      status = ts_cmd_fail("run", err);
      break;
    }
    g_array_append_val(results, res);
  }
  /* None of the defaults fits (GPT-3 175B on 256 chips needs 2.8-5.7 TiB per chip that way):
   * add Megatron's answer, tensor parallelism on the fastest dimension, a 1F1B pipeline with
   * full recomputation, the optimizer state sharded over data parallelism (zero=1) and
   * micro-batches of one sample unless --micro-batch says otherwise, at the first pipeline
   * depth that fits (else the leanest tried). */
  gboolean any_fits = FALSE;
  for (guint i = 0; i < results->len; i++)
    any_fits |= g_array_index(results, ts_result, i).mem.fits;
  if (status == 0 && defaults && results->len > 0 && !any_fits && timeline == NULL) {
    int k = 1;
    for (int d = 0; d < topo->ndims; d++)
      if (topo->dims[d].link_bw_Bps >= topo->dims[0].link_bw_Bps && topo->dims[d].size > k &&
          topo->dims[d].size < topo->nchips)
        k = topo->dims[d].size;
    static const int depths[] = {8, 16, 32, 4, 64, 2};
    ts_plan_options ppo = po;
    if (ppo.micro_batch == 0)
      ppo.micro_batch = 1;
    ts_result best;
    gboolean have = FALSE;
    for (size_t i = 0; i < G_N_ELEMENTS(depths) && !(have && best.mem.fits); i++) {
      int p = depths[i];
      if (topo->nchips % (k * p) != 0)
        continue;
      int dp = topo->nchips / (k * p);
      g_autofree char *text = g_strdup_printf("tp=%d,pp=%d,dp=%d%s,schedule=1f1b,recompute=full", k,
                                              p, dp, dp > 1 ? ",zero=1" : "");
      g_autoptr(GError) perr = NULL;
      g_autoptr(ts_split) sp = ts_split_parse(text, &perr);
      ts_result r;
      if (sp == NULL || !ts_run_predict(model, topo, sp, &ppo, &ro, &r, &perr))
        continue;
      if (!have || r.mem.fits || r.mem.total < best.mem.total) {
        if (have)
          ts_result_clear(&best);
        best = r;
        have = TRUE;
      } else
        ts_result_clear(&r);
    }
    if (have)
      g_array_append_val(results, best);
  }
  if (status == 0 && results->len == 0) /* every default candidate failed: say why */
    status = ts_cmd_fail("run", first_skip);
  g_clear_error(&first_skip);
  if (status == 0) {
    ts_report_inputs in = {0};
    in.model_name = g_strdup(model->name);
    in.model_path = g_strdup(mpath);
    in.topology_name = g_strdup(topo->name);
    in.topology_path = g_strdup(tpath);
    in.topology_desc = ts_topo_describe(topo);
    g_autofree char *faults = ts_degrade_describe(topo);
    if (*faults != '\0') {
      char *d = g_strdup_printf("%s, degraded: %s", in.topology_desc, faults);
      g_free(in.topology_desc);
      in.topology_desc = d;
    }
    in.backend = g_strdup(ro.backend);
    in.network_model = ts_run_network_model(&ro);
    in.collective_algorithm = g_strdup(ts_coll_algo_name(po.algo));
    in.global_batch = global_batch;
    in.micro_batch = micro_batch;
    const ts_result *res = (const ts_result *)results->data;
    in.text_appendix = ts_capacity_render_text(&cap, topo, res, (int)results->len);
    g_autofree char *text = ts_report_render(&in, res, (int)results->len, fmt);
    if (timeline_json != NULL &&
        !ts_write_file_atomic(timeline, timeline_json, strlen(timeline_json), &err))
      status = ts_cmd_fail("run", err);
    else if (outdir != NULL && !ts_cmd_write_outputs(outdir, &in, res, (int)results->len, &err))
      status = ts_cmd_fail("run", err);
    else if (!ts_write_file_atomic("-", text, strlen(text), &err))
      status = ts_cmd_fail("run", err);
    if (status == 0 && plot && !ts_cmd_plot_run(outdir, timeline, &err))
      status = ts_cmd_fail("run", err);
    ts_report_inputs_clear(&in);
  }
  for (guint i = 0; i < results->len; i++)
    ts_result_clear(&g_array_index(results, ts_result, i));
  g_array_unref(results);
  return status;
}
