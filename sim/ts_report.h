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
  /* Added with issue 10 (compute). */
  gboolean calibrated; /* the chip profile is fitted to measurements (else MFU is a bound) */
  int precision;       /* ts_precision of the GEMMs; MFU is against that precision's peak */
} ts_result;

/** Inputs recorded with every result set. */
typedef struct {
  char *model_name, *model_path, *topology_name, *topology_path, *topology_desc;
  char *backend, *network_model, *collective_algorithm;
  gint64 global_batch, micro_batch;
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

/** ts_json_text of what builder b built. */
char *ts_json_builder_text(JsonBuilder *b);

/** The comparison table (text), CSV (one row per result) or JSON document. Caller frees. */
char *ts_report_render(const ts_report_inputs *in, const ts_result *res, int n, ts_format f);

void ts_report_inputs_clear(ts_report_inputs *in);

/** Writes results.txt, results.csv and results.json into dir, each atomically. */
gboolean ts_cmd_write_outputs(const char *dir, const ts_report_inputs *in, const ts_result *res,
                              int n, GError **error);

G_END_DECLS

#endif
