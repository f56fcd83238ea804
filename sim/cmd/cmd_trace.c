/* cmd_trace: `trainsim trace`, writes the trace of a model and split (the one intermediate form).
 */
#include "ts_capacity.h"
#include "ts_cmd.h"
#include "ts_plan.h"
#include "ts_util.h"

#include <stdio.h>
#include <string.h>

/* Plans the step and writes its trace to out (NULL or "-": stdout); the exit status. */
static int write_trace(const ts_cmd_plan_args *pa, const ts_plan_options *po, const char *out)
{
  g_autoptr(GError) err = NULL;
  g_autoptr(ts_topo) topo = ts_cmd_load_topo(pa->topology, NULL, &err);
  if (topo == NULL)
    return ts_cmd_fail("trace", err);
  g_autoptr(ts_model) model = ts_cmd_load_model(pa->model, NULL, &err);
  if (model == NULL)
    return ts_cmd_fail("trace", err);
  g_autoptr(ts_split) sp = ts_split_parse(pa->splits[0], &err);
  if (sp == NULL)
    return ts_cmd_fail("trace", err);
  g_autoptr(ts_plan) plan = ts_plan_new(model, topo, sp, po, &err);
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

int ts_cmd_trace(int argc, char **argv)
{
  g_autofree char *out = NULL;
  ts_cmd_plan_args pa;
  ts_cmd_plan_args_init(&pa, TS_CMD_PLAN_ONE);
  const GOptionEntry trace_entries[] = {{"output", 'o', 0, G_OPTION_ARG_FILENAME, &out,
                                         "Trace file to write (default: stdout)", "FILE"},
                                        G_OPTION_ENTRY_NULL};
  g_autofree GOptionEntry *plan_entries = ts_cmd_plan_entries(&pa);
  g_autofree GOptionEntry *entries = ts_option_entries_concat(plan_entries, trace_entries);
  g_autoptr(GError) err = NULL;
  int status = 0;
  ts_plan_options po;
  if (!ts_cmd_parse("trace", "", "Writes the per-rank operation programs of one training step.",
                    "Example:\n  trainsim trace -t tpu-v3-8x8 -m gpt3-1.3b -s tp=8,dp=8 -b 512 "
                    "-o gpt3.trace\n  trainsim replay gpt3.trace --topology tpu-v3-8x8",
                    entries, &argc, &argv, &err)) {
    status = ts_cmd_fail("trace", err);
  } else if (argc > 1) {
    ts_cmd_unexpected("trace", argv[1], &err);
    status = ts_cmd_fail("trace", err);
  } else if (!ts_cmd_plan_args_finish(&pa, &po, &err)) {
    status = ts_cmd_fail("trace", err);
  } else {
    status = write_trace(&pa, &po, out);
  }
  ts_cmd_plan_args_clear(&pa);
  return status;
}
