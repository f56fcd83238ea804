/* ts_mpi: one sweep across the ranks of an MPI job (mpirun -np N trainsim sweep ...), with
 * dynamic work distribution. Compiled to stubs when the build found no MPI. */
#ifndef TS_MPI_H
#define TS_MPI_H

#include "ts_pool.h"

G_BEGIN_DECLS

/**
 * TRUE when this process is one of several ranks of an MPI job and the build has MPI; then
 * MPI is initialised (once) and ranks other than 0 have their stdout and stderr silenced, so
 * the job prints and writes as one program. A launch by mpirun of a build without MPI prints
 * a note and returns FALSE (every rank then runs the whole sweep).
 */
gboolean ts_mpi_start(void);

/** This rank (0 without MPI). */
int ts_mpi_rank(void);

/**
 * Predicts cfg[idx[k]] for k < n across the ranks: rank 0 hands out one position at a time to
 * whichever rank is free (and predicts itself while waiting), so the outcomes are those of
 * ts_pool_run, in out on rank 0 only. Every rank must call it with the same configurations.
 */
gboolean ts_mpi_run(const ts_config *cfg, const int *idx, int n, const ts_pool_options *o,
                    ts_outcome *out, GError **error);

/**
 * Whether every rank's own checks passed (ok on each): all ranks must call it at the same point.
 * A rank that failed alone (a race on a shared path, a file only it cannot read) would
 * otherwise leave the others waiting in ts_mpi_run for ever. Without MPI: ok.
 */
gboolean ts_mpi_all_ok(gboolean ok);

/** "across 2 MPI ranks: rank 0 predicted 9, rank 1 predicted 7" after ts_mpi_run on rank 0;
 * NULL without MPI. Caller frees. */
char *ts_mpi_summary(void);

/** Ends MPI when ts_mpi_start began it. */
void ts_mpi_finish(void);

G_END_DECLS

#endif
