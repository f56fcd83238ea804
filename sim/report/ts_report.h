/* ts_report: one prediction (inputs, step-time breakdown, memory) and its text, CSV and JSON
 * forms. Every field name carries its unit. */
#ifndef TS_REPORT_H
#define TS_REPORT_H

#include "ts_model.h"
#include "ts_plan.h"
#include "ts_replay.h"
#include "ts_topo.h"
#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct {
  char *split;        /* canonical split, e.g. "tp=8,dp=8" */
  char *placement;    /* e.g. "tp@x,dp@y" */
  char *link_summary; /* simgrid: the most loaded links, a text table (NULL otherwise) */
  gint64 flows;       /* simgrid: point-to-point flows simulated (0 otherwise) */
  int chips;
  gint64 global_batch, micro_batch, micro_batches;
  double step_time_s, compute_time_s, comm_time_s, exposed_comm_time_s, idle_time_s;
  double bubble_time_s; /* part of idle_time_s spent waiting for pipeline receives */
  double exposed_comm_dp_s, exposed_comm_tp_s, exposed_comm_pp_s;
  double samples_per_s, mfu, model_flops_per_step;
  ts_memory mem;
  gint64 events, ops;
  int simulated_ranks;
  /* Added with issue 4 (splits). */
  int pipeline_stages;                  /* pp x chunks (1 without a pipeline) */
  double host_link_bytes_per_step;      /* offload traffic per chip */
  double ps_push_bytes_per_step;        /* parameter-server push per worker */
  double ps_pull_bytes_per_step;        /* parameter-server pull per worker */
  double redistribution_bytes_per_step; /* per-layer hybrid boundary collectives per chip */
  /* Added with issue 14 (capacity planning, ts_capacity.c). Plain numbers only: results cross
   * process boundaries as bytes (ts_pool). */
  double tokens_per_sample;     /* sequence length; 0 for models without tokens */
  double tokens_per_s;          /* samples/s x tokens per sample */
  double mean_compute_s;        /* per chip and step, averaged over the chips */
  double mean_comm_only_s;      /* communication while not computing, averaged likewise */
  double checkpoint_bytes;      /* parameters + optimizer state, each shard once */
  int dp_degree, dp_active;     /* data-parallel replicas, and those left after chips out */
  double energy_per_step_J;     /* every chip + network, times PUE; 0 without power figures */
  gboolean planned;             /* a training target was given: the fields below are set */
  double train_steps;           /* steps to reach the target */
  double train_s;               /* failure-free wall time */
  double expected_train_s;      /* expected wall time with failures, checkpoints, restarts */
  double median_train_s;        /* Monte Carlo median (expected_train_s without failures) */
  double p90_train_s;           /* Monte Carlo 90th percentile */
  double goodput;               /* train_s / expected_train_s */
  double job_mtbf_s;            /* the job's mean time between interruptions (0: none) */
  double checkpoint_s;          /* one checkpoint's write stall */
  double checkpoint_interval_s; /* work between checkpoints */
  double expected_failures;
  double chip_hours;     /* chips x expected wall time */
  double cost_usd;       /* chip-hours x price (0 without a price) */
  double energy_J;       /* whole training, failures included (0 without power) */
  double restart_s;      /* downtime per interruption: restart + checkpoint read */
  double tokens_per_usd; /* tokens (or samples, without a sequence) per USD; 0 without a price */
  double tokens_per_J;   /* likewise per joule; 0 without power */
  ts_capacity_params cap_used; /* the prices, power and reliability figures applied */
  gint64 mc_runs, mc_seed;     /* the Monte Carlo that gave the median and p90 */
  gboolean mc_skipped;         /* too many failures per run to draw: median = p90 = expected */
  /* Added with issue 10 (compute). */
  gboolean calibrated; /* the chip profile is fitted to measurements (else MFU is a bound) */
  int precision;       /* ts_precision of the GEMMs; MFU is against that precision's peak */
  /* Memory per pipeline device: each device's memory_per_chip_bytes, in pipeline order (the
   * reported mem is the largest, mem.stage); mem_devices is 0 where no memory model ran or
   * pp exceeds TS_RESULT_MAX_DEVICES. A fixed array: results travel as raw bytes (ts_pool). */
#define TS_RESULT_MAX_DEVICES 64
  int mem_devices;
  double mem_device_bytes[TS_RESULT_MAX_DEVICES];
} ts_result;

/** Inputs recorded with every result set. */
typedef struct {
  char *model_name, *model_path, *topology_name, *topology_path, *topology_desc;
  char *backend, *network_model, *collective_algorithm;
  gint64 global_batch, micro_batch;
  char *text_appendix; /* added with issue 14: printed after the text table (time to train) */
} ts_report_inputs;

/** Fills a result from a plan and a replay. */
void ts_result_fill(ts_result *r, const ts_plan *p, const ts_trace *tr, const ts_replay_result *rr);
void ts_result_clear(ts_result *r);

typedef enum { TS_FORMAT_TEXT, TS_FORMAT_CSV, TS_FORMAT_JSON } ts_format;

/** Parses "text", "csv", "json"; FALSE when unknown. */
gboolean ts_format_parse(const char *s, ts_format *out);

/** A JSON document as trainsim writes every one: pretty-printed, ending in a newline. The
 * node is not consumed. Caller frees. */
char *ts_json_text(JsonNode *root);

/** The version of the JSON documents' layout (docs/schemas/): raised when a field
 *  is renamed, removed or changes meaning; adding a field keeps it. */
#define TS_JSON_SCHEMA_VERSION 1

/** Writes the members every JSON document starts with: trainsim_version, document (run,
 *  sweep, search, collective, model) and schema_version. */
void ts_json_header(JsonBuilder *b, const char *document);

/** ts_json_text of what builder b built. */
char *ts_json_builder_text(JsonBuilder *b);

/** The comparison table (text), CSV (one row per result) or JSON document. Caller frees. */
/** A throughput cell of the text tables (samples/s, tokens/s): "%.0f" from 100 up, three
 * digits below, "-" when not known (a model without a sequence has no tokens). Caller frees. */
char *ts_report_fmt_rate(gboolean known, double v);

/** The line every text table with an uncalibrated chip's MFU ends with (newline included). */
const char *ts_report_uncalibrated_note(void);

char *ts_report_render(const ts_report_inputs *in, const ts_result *res, int n, ts_format f);

void ts_report_inputs_clear(ts_report_inputs *in);

/** Writes results.txt, results.csv and results.json into dir, each atomically. */
gboolean ts_cmd_write_outputs(const char *dir, const ts_report_inputs *in, const ts_result *res,
                              int n, GError **error);

G_END_DECLS

#endif
