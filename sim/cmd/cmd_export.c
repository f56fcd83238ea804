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
       "NAME.comm_groups.json); created if missing, an earlier export's files replaced (both "
       "said on stderr)",
       "DIR"},
      {"name", 0, 0, G_OPTION_ARG_STRING, &name, "chakra: file name prefix (default: trace)",
       "NAME"},
      {NULL}};
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse("export", "TRACE",
                    "Writes a trace for SimGrid's MPI replay (tit) or for Chakra readers "
                    "(docs/formats.md#importing-and-exporting).",
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
  const char *prefix = name ? name : "trace";
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
  /* Like run's --output-dir: a missing folder is created and said so; files of an earlier
   * export are replaced, and said so (how many, and the first), never silently. */
  gboolean tit = strcmp(to, "tit") == 0;
  gboolean existed = g_file_test(out, G_FILE_TEST_IS_DIR);
  if (!ts_cmd_prepare_dir(out, &err))
    return ts_cmd_fail("export", err);
  int replaced = 0;
  g_autofree char *first = NULL;
  for (int r = -1; r < tr->nranks; r++) {
    g_autofree char *file =
        r < 0 ? (tit ? g_strdup("index.txt") : g_strdup_printf("%s.comm_groups.json", prefix))
        : tit ? g_strdup_printf("rank-%d.txt", r)
              : g_strdup_printf("%s.%d.et", prefix, r);
    g_autofree char *path = g_build_filename(out, file, NULL);
    if (g_file_test(path, G_FILE_TEST_EXISTS) && replaced++ == 0)
      first = g_steal_pointer(&file);
  }
  if (!existed)
    fprintf(stderr, "trainsim export: created folder %s\n", out);
  if (replaced > 0)
    fprintf(stderr, "trainsim export: replacing %d file%s of an earlier export in %s (%s%s)\n",
            replaced, replaced == 1 ? "" : "s", out, first, replaced > 1 ? ", ..." : "");
  gboolean ok =
      tit ? ts_export_tit(tr, topo, out, &err) : ts_export_chakra(tr, topo, out, prefix, &err);
  if (!ok)
    return ts_cmd_fail("export", err);
  fprintf(stderr, "trainsim export: wrote %s traces of %d ranks into %s\n", to, tr->nranks, out);
  return 0;
}
