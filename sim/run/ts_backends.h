/* ts_backends: the registry of replay backends. Commands, drivers and workers look a backend up
 * by name here; nothing else compares backend names, and help texts list the table. */
#ifndef TS_BACKENDS_H
#define TS_BACKENDS_H

#include "ts_replay.h"

G_BEGIN_DECLS

typedef struct ts_backend_kind {
  const char *name;    /* "analytic", "simgrid" */
  const char *summary; /* one phrase for help texts */
  /* SimGrid can build one platform per process: such a backend replays in a child process, and
   * a worker that used it leaves afterwards. */
  gboolean one_per_process;
  /* Contention needs every flow: such a backend always replays every rank. */
  gboolean full_replay;
  /* A backend for the topology; cfg: extra --cfg strings (may be NULL). NULL with an error. */
  ts_backend *(*create)(const ts_topo *t, const char *const *cfg, GError **error);
  /* The network model recorded with results. Caller frees. */
  char *(*network_model)(const char *const *cfg);
  /* Before a replay starts (may be NULL): refuses one that would exceed the machine, with the
   * estimate and the option that overrides it, instead of dying of it. */
  gboolean (*preflight)(const ts_trace *tr, const ts_topo *t, const char *const *cfg,
                        GError **error);
} ts_backend_kind;

/** The backend called `name` (NULL: the default, analytic); NULL with an error naming the
 * accepted ones (TS_ERROR_INPUT, message "--backend 'X': expected ..."). Static. */
const ts_backend_kind *ts_backend_kind_lookup(const char *name, GError **error);

/** "analytic or simgrid": every registered name, for errors. Static. */
const char *ts_backend_kind_list(void);

/** "analytic (default, ...) or simgrid (...)": names with summaries, for --help. Static. */
const char *ts_backend_kind_help(void);

G_END_DECLS

#endif
