/* ts_import: traces other tools record (Chakra execution traces, ASTRA-sim text workloads) as
 * trainsim traces, and trainsim traces written for other tools (SimGrid time-independent
 * traces, Chakra). Every mismatch with the topology is one line naming the file and the node
 * or line, found before any engine starts. */
#ifndef TS_IMPORT_H
#define TS_IMPORT_H

#include "ts_trace.h"
#include <glib.h>

G_BEGIN_DECLS

typedef enum { TS_IMPORT_CHAKRA, TS_IMPORT_ASTRASIM, TS_IMPORT_NFORMATS } ts_import_format;

/** "chakra" or "astrasim"; -1 when unknown. */
int ts_import_format_parse(const char *name);
const char *ts_import_format_name(ts_import_format f);

/**
 * The format of a file from its first bytes: a trainsim trace (returns TS_IMPORT_NFORMATS),
 * an ASTRA-sim text workload, or a Chakra execution trace; -1 when none fits.
 */
int ts_import_detect(const guint8 *head, gsize n);

/** Options of an import. */
typedef struct {
  const char *comm_groups; /* Chakra: ASTRA-sim's comm-group JSON {"ID": [ranks]}; may be NULL */
} ts_import_options;

/** Reads the files (Chakra: one per rank, NAME.RANK.et; ASTRA-sim: one workload) for topology t. */
ts_trace *ts_import_files(ts_import_format f, const char *const *paths, int npaths,
                          const ts_topo *t, const ts_import_options *o, GError **error);

/**
 * ASTRA-sim text workload from bytes (fuzzing entry point); path is for messages. Every rank of
 * t runs the workload.
 */
ts_trace *ts_import_astrasim_bytes(const guint8 *data, gsize len, const char *path,
                                   const ts_topo *t, GError **error);

/**
 * Chakra traces from bytes, file k being rank ranks[k] (fuzzing entry point: one file as rank
 * 0). comm_groups_json may be NULL (collectives without a known group span every rank given).
 */
ts_trace *ts_import_chakra_bytes(const guint8 *const *data, const gsize *len,
                                 const char *const *paths, const int *ranks, int nfiles,
                                 const ts_topo *t, const char *comm_groups_json,
                                 const char *comm_groups_path, GError **error);

/** SimGrid time-independent trace (one file per rank, DIR/rank-R.txt) and DIR/index.txt. */
gboolean ts_export_tit(const ts_trace *tr, const ts_topo *t, const char *dir, GError **error);

/** Chakra execution traces DIR/NAME.R.et (one per rank) and DIR/NAME.comm_groups.json. */
gboolean ts_export_chakra(const ts_trace *tr, const ts_topo *t, const char *dir, const char *name,
                          GError **error);

G_END_DECLS

#endif
