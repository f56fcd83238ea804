/* cmd_plot: `trainsim plot`, gnuplot figures (PNG and SVG) of sweeps, runs and timelines. */
#include "ts_cmd.h"
#include "ts_plot.h"
#include "ts_util.h"

#include <stdio.h>
#include <string.h>

/* A folder stands for the JSON outputs trainsim writes into one. */
static void expand(const char *arg, GPtrArray *files)
{
  if (!g_file_test(arg, G_FILE_TEST_IS_DIR)) {
    g_ptr_array_add(files, g_strdup(arg));
    return;
  }
  const char *names[] = {"sweep.json", "results.json", "candidates.json", "timeline.json"};
  gsize before = files->len;
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
    char *p = g_build_filename(arg, names[i], NULL);
    if (g_file_test(p, G_FILE_TEST_IS_REGULAR))
      g_ptr_array_add(files, p);
    else
      g_free(p);
  }
  if (files->len == before) /* let ts_plot_file name what is missing */
    g_ptr_array_add(files, g_build_filename(arg, "sweep.json", NULL));
}

int ts_cmd_plot(int argc, char **argv)
{
  g_autofree char *outdir = NULL;
  GOptionEntry entries[] = {{"output-dir", 'o', 0, G_OPTION_ARG_FILENAME, &outdir,
                             "Write the plots (NAME.png, NAME.svg, NAME.dat) here (default: "
                             "a plots/ folder beside the first input)",
                             "DIR"},
                            {NULL}};
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse(
          "plot", "FILE_OR_DIR...",
          "Draws gnuplot figures of trainsim outputs: sweep.json (scaling, parallel "
          "efficiency, step-time breakdown, memory per chip, what-if ratios), run's "
          "results.json (breakdown, memory) and --timeline files (per-chip Gantt).",
          "Example:\n  trainsim sweep -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 "
          "--vary link_bandwidth_GBps=x0.5,x1,x2 -o out/sweep && trainsim plot out/sweep\n"
          "  trainsim run -t tpu-v3-8x8 -m bert-large -b 512 -s tp=8,dp=8 --timeline "
          "step.json && trainsim plot step.json -o figs\n"
          "Scripts: plots/*.gp (edit them to restyle). Needs gnuplot.",
          entries, &argc, &argv, &err))
    return ts_cmd_fail("plot", err);
  if (argc < 2) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "missing input; expected sweep.json, results.json, a timeline or their folder");
    return ts_cmd_fail("plot", err);
  }
  if (!ts_plot_gnuplot_available(&err))
    return ts_cmd_fail("plot", err);
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
  for (int i = 1; i < argc; i++)
    expand(argv[i], files);
  g_autofree char *dir = NULL;
  if (outdir != NULL) {
    dir = g_strdup(outdir);
  } else {
    g_autofree char *parent =
        g_file_test(argv[1], G_FILE_TEST_IS_DIR) ? g_strdup(argv[1]) : g_path_get_dirname(argv[1]);
    dir = g_build_filename(parent, "plots", NULL);
  }
  g_autoptr(GPtrArray) written = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; i < files->len; i++)
    if (!ts_plot_file(g_ptr_array_index(files, i), dir, written, &err))
      return ts_cmd_fail("plot", err);
  for (guint i = 0; i < written->len; i++) {
    const char *w = g_ptr_array_index(written, i);
    if (!g_str_has_suffix(w, ".dat"))
      fprintf(stderr, "trainsim plot: wrote %s\n", w);
  }
  return 0;
}

gboolean ts_cmd_plot_run(const char *outdir, const char *timeline, GError **error)
{
  g_autofree char *pd = g_build_filename(outdir, "plots", NULL);
  g_autofree char *res = g_build_filename(outdir, "results.json", NULL);
  g_autoptr(GPtrArray) written = g_ptr_array_new_with_free_func(g_free);
  if (!ts_plot_file(res, pd, written, error) ||
      (timeline != NULL && !ts_plot_file(timeline, pd, written, error)))
    return FALSE;
  for (guint i = 0; i < written->len; i++)
    if (!g_str_has_suffix(g_ptr_array_index(written, i), ".dat"))
      fprintf(stderr, "trainsim run: wrote %s\n", (char *)g_ptr_array_index(written, i));
  return TRUE;
}
