/* cmd_trace: `trainsim trace`, writes the trace of a model and split (the one intermediate form).
 */
#include "ts_cmd.h"
#include "ts_plan.h"
#include "ts_util.h"

#include <stdio.h>
#include <string.h>

int ts_cmd_trace(int argc, char **argv)
{
  g_autofree char *topo_name = NULL, *model_name = NULL, *split = NULL, *out = NULL;
  g_autofree char *algo_name = NULL;
  gint64 global_batch = 0, micro_batch = 0;
  double bucket_MiB = 25.0;
  GOptionEntry entries[] = {
      {"topology", 't', 0, G_OPTION_ARG_FILENAME, &topo_name,
       "Topology file or shipped name (topologies/NAME.ini)", "T"},
      {"model", 'm', 0, G_OPTION_ARG_FILENAME, &model_name,
       "Model file or shipped name (models/NAME.ini)", "M"},
      {"split", 's', 0, G_OPTION_ARG_STRING, &split,
       "Split, e.g. tp=8@x,dp=8@y or tp=8,pp=8,dp=1,schedule=1f1b (docs/splits.md)", "S"},
      {"global-batch", 'b', 0, G_OPTION_ARG_INT64, &global_batch,
       "Samples per step, all replicas together", "N"},
      {"micro-batch", 0, 0, G_OPTION_ARG_INT64, &micro_batch,
       "Samples per micro-batch per replica (default: global batch / dp; with pp, the largest "
       "giving >= 4 micro-batches per stage)",
       "N"},
      {"bucket-MiB", 0, 0, G_OPTION_ARG_DOUBLE, &bucket_MiB,
       "Data-parallel gradient bucket in MiB (default 25)", "MiB"},
      {"collective-algorithm", 0, 0, G_OPTION_ARG_STRING, &algo_name,
       "Algorithm recorded on every collective (default auto)", "A"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Trace file to write (default: stdout)",
       "FILE"},
      {NULL}};
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse("trace", "", "Writes the per-rank operation programs of one training step.",
                    "Example:\n  trainsim trace -t tpu-v3-8x8 -m gpt3-1.3b -s tp=8,dp=8 -b 512 "
                    "-o gpt3.trace\n  trainsim replay gpt3.trace --topology tpu-v3-8x8",
                    entries, &argc, &argv, &err))
    return ts_cmd_fail("trace", err);
  if (argc > 1) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "unexpected argument '%s'", argv[1]);
    return ts_cmd_fail("trace", err);
  }
  if (topo_name == NULL || model_name == NULL || split == NULL || global_batch <= 0) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "expected --topology T --model M --split S --global-batch N (N > 0)");
    return ts_cmd_fail("trace", err);
  }
  int algo;
  if (!ts_cmd_algo(algo_name, &algo, &err))
    return ts_cmd_fail("trace", err);
  if (!(bucket_MiB > 0 && bucket_MiB <= 1048576) || micro_batch < 0) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--bucket-MiB in (0, 1048576] MiB and --micro-batch >= 0 expected");
    return ts_cmd_fail("trace", err);
  }
  g_autoptr(ts_topo) topo = ts_cmd_load_topo(topo_name, NULL, &err);
  if (topo == NULL)
    return ts_cmd_fail("trace", err);
  g_autoptr(ts_model) model = ts_cmd_load_model(model_name, NULL, &err);
  if (model == NULL)
    return ts_cmd_fail("trace", err);
  g_autoptr(ts_split) sp = ts_split_parse(split, &err);
  if (sp == NULL)
    return ts_cmd_fail("trace", err);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = global_batch;
  po.micro_batch = micro_batch;
  po.bucket_bytes = bucket_MiB * 1024 * 1024;
  po.algo = (ts_coll_algo)algo;
  g_autoptr(ts_plan) plan = ts_plan_new(model, topo, sp, &po, &err);
  if (plan == NULL)
    return ts_cmd_fail("trace", err);
  g_autoptr(ts_trace) tr = ts_plan_trace(plan, &err);
  if (tr == NULL)
    return ts_cmd_fail("trace", err);
  g_autofree char *text = ts_trace_to_text(tr);
  if (!ts_write_file_atomic(out ? out : "-", text, strlen(text), &err))
    return ts_cmd_fail("trace", err);
  if (out != NULL && strcmp(out, "-") != 0)
    fprintf(stderr, "trainsim trace: wrote %s\n", out);
  return 0;
}
