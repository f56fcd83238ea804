/* cmd_export: `trainsim export`, writes a trainsim trace for other tools: SimGrid's
 * time-independent traces (smpirun -replay) or Chakra execution traces. */
#include "ts_cmd.h"
#include "ts_import.h"
#include "ts_util.h"

#include <string.h>

int ts_cmd_export(int argc, char **argv)
{
  g_autofree char *to = NULL, *topo_name = NULL, *out = NULL, *name = NULL;
  GOptionEntry entries[] = {
      {"to", 0, 0, G_OPTION_ARG_STRING, &to, "tit (SimGrid time-independent traces) or chakra",
       "F"},
      {"topology", 't', 0, G_OPTION_ARG_FILENAME, &topo_name, "Topology the trace is for", "T"},
      {"output-dir", 'o', 0, G_OPTION_ARG_FILENAME, &out,
       "Folder to write (tit: rank-R.txt and index.txt; chakra: NAME.R.et and "
       "NAME.comm_groups.json)",
       "DIR"},
      {"name", 0, 0, G_OPTION_ARG_STRING, &name, "chakra: file name prefix (default: trace)",
       "NAME"},
      {NULL}};
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse("export", "TRACE",
                    "Writes a trace for SimGrid's MPI replay (tit) or for Chakra readers "
                    "(docs/formats.md#exporting).",
                    "Example:\n  trainsim export --to tit -t dgx-a100-1node "
                    "traces/handwritten/data-parallel-serial.trace -o /tmp/tit\n"
                    "  trainsim platform -t dgx-a100-1node -o /tmp/tit/platform.xml",
                    entries, &argc, &argv, &err))
    return ts_cmd_fail("export", err);
  if (argc != 2 || topo_name == NULL || out == NULL || to == NULL ||
      (strcmp(to, "tit") != 0 && strcmp(to, "chakra") != 0)) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "expected one TRACE, --to tit|chakra, --topology T and --output-dir DIR");
    return ts_cmd_fail("export", err);
  }
  /* The prefix names files inside --output-dir: '../x' or 'a/b' wrote outside it. */
  if (name != NULL && (*name == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0 ||
                       strcmp(name, "..") == 0)) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--name '%s': expected a file name prefix without '/' (the files go into "
                "--output-dir)",
                name);
    return ts_cmd_fail("export", err);
  }
  if (name != NULL && strcmp(to, "chakra") != 0) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--name '%s': only --to chakra names its files; expected it without --name", name);
    return ts_cmd_fail("export", err);
  }
  g_autoptr(ts_topo) topo = ts_cmd_load_topo(topo_name, NULL, &err);
  if (topo == NULL)
    return ts_cmd_fail("export", err);
  g_autoptr(ts_trace) tr = ts_trace_load(argv[1], &err);
  if (tr == NULL)
    return ts_cmd_fail("export", err);
  if (!ts_trace_check(tr, topo, &err) || !ts_trace_resolve_algos(tr, topo, &err)) {
    g_prefix_error(&err, "%s: ", argv[1]);
    return ts_cmd_fail("export", err);
  }
  gboolean ok = strcmp(to, "tit") == 0
                    ? ts_export_tit(tr, topo, out, &err)
                    : ts_export_chakra(tr, topo, out, name ? name : "trace", &err);
  if (!ok)
    return ts_cmd_fail("export", err);
  fprintf(stderr, "trainsim export: wrote %s traces of %d ranks into %s\n", to, tr->nranks, out);
  return 0;
}
