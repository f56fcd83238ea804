/* ts_pool: predicts many configurations on every core, in worker processes, with results in
 * input order whatever the number of workers (so outputs are byte-identical for any --jobs). */
#ifndef TS_POOL_H
#define TS_POOL_H

#include "ts_run.h"

G_BEGIN_DECLS

/** One configuration: everything ts_run_predict needs. Pointers are borrowed. */
typedef struct {
  const ts_model *model;
  const ts_topo *topo;
  const char *split; /* --split text */
  ts_plan_options po;
  ts_run_options ro;
} ts_config;

typedef enum {
  TS_OUTCOME_OK,      /* res holds the prediction */
  TS_OUTCOME_INVALID, /* the configuration does not apply (split vs model, batch...): message */
  TS_OUTCOME_FAILED,  /* an input error or a replay that could not finish: message */
} ts_outcome_status;

typedef struct {
  ts_outcome_status status;
  int error_code; /* ts_error_code of the failure */
  ts_result res;  /* owned (ts_result_clear) */
  char *message;  /* owned; NULL when OK */
} ts_outcome;

void ts_outcome_clear(ts_outcome *o);

/** Predicts one configuration in this process. */
void ts_pool_predict(const ts_config *c, ts_outcome *out);

typedef struct {
  int jobs;          /* worker processes; <= 1 predicts in this process (simgrid excepted) */
  gboolean progress; /* progress on stderr (ts_progress: a bar on a terminal, else lines) */
  const char *label; /* the bar's prefix, e.g. "sweep" */
} ts_pool_options;

/**
 * Predicts cfg[idx[k]] into out[k] for k < n. Workers are forked processes fed one index at a
 * time (dynamic distribution, so long configurations do not hold up a static slice). The
 * SimGrid engine can be initialised once per process, so a worker that ran a simgrid
 * configuration exits and is replaced; simgrid configurations always run in a child.
 * FALSE only when the machinery fails (fork, pipe, a worker killed by a signal).
 */
gboolean ts_pool_run(const ts_config *cfg, const int *idx, int n, const ts_pool_options *o,
                     ts_outcome *out, GError **error);

/**
 * An outcome (of position k) as bytes for another process of the same binary: a 4-byte
 * length, then the record. Caller frees.
 */
GByteArray *ts_outcome_encode(gint32 k, const ts_outcome *o);

/** Reads a record (the bytes after the length); FALSE when malformed. */
gboolean ts_outcome_decode(const guint8 *p, gsize len, gint32 *k, ts_outcome *o);

/** The number of online processors (the default of --jobs). */
int ts_pool_default_jobs(void);

/** Parses a --jobs value: a whole number in [1, 1024]; FALSE with a one-line error. */
gboolean ts_pool_parse_jobs(gint64 jobs, GError **error);

G_END_DECLS

#endif
