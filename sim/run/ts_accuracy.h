/* ts_accuracy: measurement files (published or your own cluster's step times, bus bandwidths
 * or peak memory, one configuration per row) replayed through trainsim: predicted vs measured
 * per row, error statistics per group, text / CSV / JSON and a scatter plot's data.
 * `trainsim validate --against FILE.csv`; the format is in docs/accuracy.md. */
#ifndef TS_ACCURACY_H
#define TS_ACCURACY_H

#include <glib.h>

G_BEGIN_DECLS

/** What a measurement file measures (one kind per file, named by its measurement column). */
typedef enum {
  TS_MEAS_STEP_TIME,      /* step_time_s | step_time_ms: one training step */
  TS_MEAS_BUSBW,          /* busbw_GBps: a collective's bus bandwidth, as nccl-tests reports it */
  TS_MEAS_PEAK_MEMORY,    /* peak_memory_GiB | _GB | _MiB | _bytes: the largest chip's peak */
  TS_MEAS_ACTIVATION_SUM, /* peak_activation_memory_sum_GiB | _bytes: activations and buffers
                             summed over the pipeline's devices (torchgpipe's "Peak Activation
                             Memory": the peak less the model states) */
} ts_meas_metric;

/** One row, values in SI units (seconds, bytes, GB/s = 1e9 B/s). */
typedef struct {
  int line;       /* in the file, from 1 (the header is line 1 or later) */
  char *group;    /* the group column, else the file's base name */
  char *topology; /* name or path (relative paths from the file's folder first) */
  char *vary;     /* topology what-ifs "KEY=V;KEY=V" as sweep --vary takes them, or NULL */
  char *model;    /* step time and memory rows */
  char *split;    /* step time and memory rows */
  gint64 global_batch, micro_batch;
  double bucket_bytes; /* data-parallel bucket, 0 = the default (25 MiB) */
  char *collective;    /* busbw rows: allreduce, allgather, ... */
  double size_bytes;   /* busbw rows: the message size, as nccl-tests's "size" */
  int algo;            /* algorithm column: a ts_coll_algo (TS_ALGO_AUTO when not given) */
  double measured;
} ts_meas_row;

typedef struct {
  char *path;
  ts_meas_metric metric;
  char *metric_column; /* the column as written, e.g. "step_time_ms" */
  int nrows;
  ts_meas_row *rows;
} ts_meas_file;

/**
 * Reads a measurement file. Bad input (not a regular file, over 64 MiB, a missing or unknown
 * measurement column, a unit it cannot read, a field that is not a number in range) gives one
 * error naming the file, the line and the column.
 */
ts_meas_file *ts_meas_load(const char *path, GError **error);
void ts_meas_free(ts_meas_file *f);

/** The predicted value of every row, and the statistics. */
typedef struct {
  const ts_meas_file *file; /* borrowed */
  double *predicted;        /* nrows, SI units */
  char **detail;            /* nrows: what was run (canonical split, or algorithm), owned */
} ts_accuracy;

/**
 * Predicts every row (step times on `jobs` worker processes, with `backend`). A row trainsim
 * cannot express (an unknown model, a split that does not apply) fails the whole file with
 * one error naming the file, the line and the column; nothing is returned half-done.
 */
ts_accuracy *ts_accuracy_run(const ts_meas_file *f, int jobs, const char *backend, GError **error);
void ts_accuracy_free(ts_accuracy *a);

/** Outputs: the text table with per-group statistics, CSV rows, JSON, and the scatter plot's
 * gnuplot data (one index block per group). Caller frees. */
char *ts_accuracy_text(const ts_accuracy *a);
char *ts_accuracy_csv(const ts_accuracy *a);
char *ts_accuracy_json(const ts_accuracy *a);
char *ts_accuracy_dat(const ts_accuracy *a, char **groups_out);

/** The metric's output name with its unit ("step_time_s", "busbw_GBps", "peak_memory_GiB"). */
const char *ts_meas_metric_name(ts_meas_metric m);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_meas_file, ts_meas_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ts_accuracy, ts_accuracy_free)

G_END_DECLS

#endif
