/* ts_plot: gnuplot figures of predictions. Reads trainsim's own JSON outputs (sweep.json,
 * run's results.json, a --timeline file), writes the plotted numbers as .dat files and runs
 * the scripts kept in plots/ (NAME.gp), as PNG (pngcairo, for people) and SVG (for documents). */
#ifndef TS_PLOT_H
#define TS_PLOT_H

#include <glib.h>

G_BEGIN_DECLS

/** FALSE with a one-line error when gnuplot is not on PATH. */
gboolean ts_plot_gnuplot_available(GError **error);

/**
 * Draws every plot the file supports into outdir (created): for rows (sweep.json or run's
 * results.json) the step-time breakdown and memory per chip, scaling and parallel efficiency
 * when the rows span several chip counts, what-if ratios when the sweep varied hardware; for
 * a timeline the per-chip Gantt chart of the step. Each plot is NAME.png and NAME.svg beside
 * NAME.dat. Paths written are appended to `written` (char*, owned by the array). Fails with a
 * one-line error on an unreadable file, a failed gnuplot run or an empty output.
 */
gboolean ts_plot_file(const char *json_path, const char *outdir, GPtrArray *written,
                      GError **error);

/** run --plot: plots of DIR/results.json (and the timeline, may be NULL) into DIR/plots. */
gboolean ts_cmd_plot_run(const char *outdir, const char *timeline, GError **error);

/**
 * validate --against: accuracy.dat (measured and predicted, one index block per group) and its
 * log-log scatter (y = x and +-10% bands) as accuracy.png and accuracy.svg in outdir. groups:
 * the blocks' names, space-separated; metric: the axis quantity with its unit.
 */
gboolean ts_plot_accuracy(const char *outdir, const char *dat_text, const char *groups,
                          const char *metric, GPtrArray *written, GError **error);

G_END_DECLS

#endif
