/* cmd_replay: `trainsim replay`, replays a trace file on a topology and reports the step. */
#include "ts_backends.h"
#include "ts_cmd.h"
#include "ts_run.h"
#include "ts_util.h"

#include <stdio.h>
#include <string.h>

int ts_cmd_replay(int argc, char **argv)
{
  g_autofree char *topo_name = NULL, *backend = NULL, *format = NULL, *from = NULL;
  g_autofree char *groups = NULL, *link_report = NULL;
  g_auto(GStrv) cfg = NULL;
  gboolean full = FALSE;
  GOptionEntry entries[] = {
      {"topology", 't', 0, G_OPTION_ARG_FILENAME, &topo_name,
       "Topology file or shipped name; its dimensions must match the trace's", "T"},
      {"backend", 0, 0, G_OPTION_ARG_STRING, &backend, ts_backend_kind_help(), "B"},
      {"link-report", 0, 0, G_OPTION_ARG_FILENAME, &link_report,
       "simgrid backend: write every link's load (bytes, busy s, busy fraction, top operation) "
       "as CSV",
       "FILE.csv"},
      {"cfg", 0, 0, G_OPTION_ARG_STRING_ARRAY, &cfg,
       "simgrid backend: extra SimGrid setting or trainsim/... setting (docs/backends.md); "
       "repeatable",
       "KEY:VALUE"},
      {"full", 0, 0, G_OPTION_ARG_NONE, &full, "Replay every rank (same result, slower)", NULL},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &format, "text (default), csv or json", "F"},
      {"from", 0, 0, G_OPTION_ARG_STRING, &from,
       "Replay another tool's trace: chakra (TRACE... = NAME.RANK.et files) or astrasim "
       "(default: detected from the first file)",
       "F"},
      {"comm-groups", 0, 0, G_OPTION_ARG_FILENAME, &groups,
       "chakra: process groups as ASTRA-sim's JSON {\"GROUP\": [ranks]}", "FILE"},
      {NULL}};
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse("replay", "TRACE...",
                    "Replays a trace file and prints step time (s) and its breakdown.",
                    "Example:\n  trainsim trace -t tpu-v3-8x8 -m gpt3-1.3b -s tp=8,dp=8 -b 512 -o "
                    "gpt3.trace\n  trainsim replay gpt3.trace --topology tpu-v3-8x8",
                    entries, &argc, &argv, &err))
    return ts_cmd_fail("replay", err);
  ts_format fmt;
  if (argc < 2 || topo_name == NULL || !ts_format_parse(format, &fmt)) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "expected a TRACE file (or Chakra's NAME.RANK.et files) and --topology T (and "
                "--format text, csv or json)");
    return ts_cmd_fail("replay", err);
  }
  if (!ts_run_backend_valid(backend, &err) || !ts_cmd_cfg(backend, cfg, &err))
    return ts_cmd_fail("replay", err);
  if (link_report != NULL && (backend == NULL || strcmp(backend, "simgrid") != 0)) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--link-report %s: expected --backend simgrid",
                link_report);
    return ts_cmd_fail("replay", err);
  }
  const char *path = argv[1];
  g_autofree char *tpath = NULL;
  g_autoptr(ts_topo) topo = ts_cmd_load_topo(topo_name, &tpath, &err);
  if (topo == NULL)
    return ts_cmd_fail("replay", err);
  ts_import_options io = {.comm_groups = groups};
  /* A trainsim trace, or another tool's (imported first, checked before the engine starts). */
  g_autoptr(ts_trace) tr =
      ts_cmd_import_trace("replay", from, (const char *const *)argv + 1, argc - 1, topo, &io, &err);
  if (tr == NULL)
    return ts_cmd_fail("replay", err);
  ts_run_options ro = {.backend = backend ? backend : "analytic",
                       .sg_cfg = (const char *const *)cfg,
                       .full = full,
                       .link_report = link_report,
                       .progress = "replay (simgrid)"};
  ts_replay_result rr;
  ts_run_extra x = {0};
  if (!ts_run_replay_ex(tr, topo, &ro, &rr, &x, &err)) {
    ts_run_extra_clear(&x);
    g_prefix_error(&err, "%s: ", path);
    return ts_cmd_fail("replay", err);
  }
  /* A trace carries no plan: report the replayed quantities and the trace's own metadata. */
  ts_result res = {0};
  res.split = g_strdup(tr->meta.split ? tr->meta.split : "(trace)");
  res.placement = g_strdup("(trace)");
  res.chips = tr->nranks;
  res.global_batch = (gint64)tr->meta.samples;
  res.step_time_s = rr.step_time_s;
  res.compute_time_s = rr.critical.compute_s;
  res.comm_time_s = rr.critical.comm_s;
  res.exposed_comm_time_s = rr.critical.exposed_comm_s;
  res.idle_time_s = rr.critical.idle_s;
  res.bubble_time_s = rr.critical.bubble_s;
  res.exposed_comm_dp_s = rr.critical.exposed_cat_s[TS_CAT_COMM_DP];
  res.exposed_comm_tp_s = rr.critical.exposed_cat_s[TS_CAT_COMM_TP];
  res.exposed_comm_pp_s = rr.critical.exposed_cat_s[TS_CAT_COMM_PP];
  res.samples_per_s = rr.step_time_s > 0 ? tr->meta.samples / rr.step_time_s : 0;
  res.model_flops_per_step = tr->meta.model_flops;
  res.tokens_per_sample = tr->meta.tokens_per_sample;
  res.tokens_per_s = res.samples_per_s * res.tokens_per_sample;
  res.calibrated = !topo->chip.uncalibrated;
  res.mfu = rr.step_time_s > 0
                ? tr->meta.model_flops / (rr.step_time_s * topo->chip.peak_flops * topo->nchips)
                : 0;
  res.mem.capacity = topo->chip.memory_bytes;
  /* Memory is the planner's: a trace does not record it (total 0: reported as n/a / null). */
  res.mem.fits = FALSE;
  res.events = rr.events;
  res.ops = ts_trace_nops(tr);
  res.simulated_ranks = rr.nsimulated;
  res.link_summary = g_steal_pointer(&x.link_summary); /* simgrid: flows and the busiest links */
  res.flows = x.flows;
  ts_run_extra_clear(&x);
  ts_report_inputs in = {0};
  in.model_name = g_strdup(tr->meta.model ? tr->meta.model : "(trace)");
  in.model_path = g_strdup(path);
  in.topology_name = g_strdup(topo->name);
  in.topology_path = g_strdup(tpath);
  in.topology_desc = ts_topo_describe(topo);
  in.backend = g_strdup(ro.backend);
  in.network_model = ts_run_network_model(&ro);
  in.collective_algorithm = g_strdup("as recorded in the trace");
  in.global_batch = res.global_batch;
  g_autofree char *out = ts_report_render(&in, &res, 1, fmt);
  ts_report_inputs_clear(&in);
  ts_result_clear(&res);
  if (!ts_write_file_atomic("-", out, strlen(out), &err))
    return ts_cmd_fail("replay", err);
  return 0;
}
