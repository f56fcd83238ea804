/* ts_mpi: rank 0 distributes configuration positions over MPI point-to-point messages; the
 * others predict and send back serialised outcomes (ts_outcome_encode). */
#include "ts_mpi.h"
#include "ts_progress.h"
#include "ts_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Launchers announce the job size in the environment before MPI_Init is called. */
static int launcher_size(void)
{
  const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
  for (size_t i = 0; i < G_N_ELEMENTS(vars); i++) {
    const char *v = g_getenv(vars[i]);
    if (v != NULL)
      return atoi(v);
  }
  return 1;
}

#ifdef TS_HAVE_MPI
#include <mpi.h>

enum { TAG_WORK = 1, TAG_RESULT = 2 };

static gboolean started = FALSE;
static int rank = 0, nranks = 1;
static GArray *per_rank; /* int: configurations each rank predicted in the last run */

gboolean ts_mpi_start(void)
{
  if (started)
    return nranks > 1;
  if (launcher_size() <= 1)
    return FALSE;
  MPI_Init(NULL, NULL);
  started = TRUE;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (rank != 0) {
    /* One program's output: rank 0 speaks for the job. */
    if (freopen("/dev/null", "w", stdout) == NULL || freopen("/dev/null", "w", stderr) == NULL)
      return nranks > 1;
  }
  return nranks > 1;
}

int ts_mpi_rank(void)
{
  return rank;
}

void ts_mpi_finish(void)
{
  if (started)
    MPI_Finalize();
  started = FALSE;
}

/* One configuration through the process pool: a simgrid one gets its own process. */
static void predict_one(const ts_config *cfg, const int *idx, int k, ts_outcome *o)
{
  ts_pool_options one = {1, FALSE, NULL};
  if (!ts_pool_run(cfg, &idx[k], 1, &one, o, NULL)) {
    memset(o, 0, sizeof *o);
    o->status = TS_OUTCOME_FAILED;
    o->error_code = TS_ERROR_BACKEND;
    o->message = g_strdup("the worker process predicting this configuration died");
  }
}

gboolean ts_mpi_run(const ts_config *cfg, const int *idx, int n, const ts_pool_options *o,
                    ts_outcome *out, GError **error)
{
  (void)error;
  if (rank != 0) {
    for (;;) {
      int k;
      MPI_Recv(&k, 1, MPI_INT, 0, TAG_WORK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (k < 0)
        return TRUE;
      ts_outcome oc;
      predict_one(cfg, idx, k, &oc);
      GByteArray *b = ts_outcome_encode(k, &oc);
      MPI_Send(b->data, (int)b->len, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
      g_byte_array_unref(b);
      ts_outcome_clear(&oc);
    }
  }
  memset(out, 0, sizeof(ts_outcome) * (gsize)n);
  if (per_rank == NULL)
    per_rank = g_array_new(FALSE, TRUE, sizeof(int));
  g_array_set_size(per_rank, 0);
  g_array_set_size(per_rank, (guint)nranks);
  int next = 0, done = 0, stop = -1;
  /* Rank 0 alone reports progress (ts_progress, as the local pool). */
  ts_progress pg;
  ts_progress_init(&pg, o != NULL && o->progress, o != NULL ? o->label : NULL, "configurations", n);
  /* First round: one position per worker rank, or a stop when there is none left. */
  for (int w = 1; w < nranks; w++) {
    if (next < n) {
      MPI_Send(&next, 1, MPI_INT, w, TAG_WORK, MPI_COMM_WORLD);
      next++;
    } else {
      MPI_Send(&stop, 1, MPI_INT, w, TAG_WORK, MPI_COMM_WORLD);
    }
  }
  /* Rank 0 predicts too while few ranks share the work; with many it only dispatches, so no
   * worker waits for it. */
  gboolean self = nranks <= 4;
  gboolean ok = TRUE;
  while (done < n) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &st);
    if (!flag && self && next < n) {
      predict_one(cfg, idx, next, &out[next]);
      g_array_index(per_rank, int, 0)++;
      next++;
      ts_progress_step(&pg, ++done);
      continue;
    }
    if (!flag)
      MPI_Probe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &st);
    int len = 0;
    MPI_Get_count(&st, MPI_BYTE, &len);
    guint8 *buf = g_malloc(len > 0 ? (gsize)len : 1);
    MPI_Recv(buf, len, MPI_BYTE, st.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    gint32 k = -1;
    ts_outcome oc;
    if (len < 4 || !ts_outcome_decode(buf + 4, (gsize)len - 4, &k, &oc) || k < 0 || k >= n) {
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "MPI rank %d sent a malformed result",
                  st.MPI_SOURCE);
      ok = FALSE;
      g_free(buf);
      break;
    }
    g_free(buf);
    out[k] = oc;
    ts_progress_step(&pg, ++done);
    int w = st.MPI_SOURCE;
    g_array_index(per_rank, int, w)++;
    if (next < n) {
      MPI_Send(&next, 1, MPI_INT, w, TAG_WORK, MPI_COMM_WORLD);
      next++;
    } else {
      MPI_Send(&stop, 1, MPI_INT, w, TAG_WORK, MPI_COMM_WORLD);
    }
  }
  ts_progress_end(&pg);
  if (!ok)
    MPI_Abort(MPI_COMM_WORLD, 1);
  return ok;
}

gboolean ts_mpi_all_ok(gboolean ok)
{
  if (!started || nranks <= 1)
    return ok;
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

char *ts_mpi_summary(void)
{
  if (!started || per_rank == NULL)
    return NULL;
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "across %d MPI ranks:", nranks);
  for (guint r = 0; r < per_rank->len; r++)
    g_string_append_printf(s, "%s rank %u predicted %d", r ? "," : "", r,
                           g_array_index(per_rank, int, r));
  return g_string_free(s, FALSE);
}

#else /* no MPI in this build */

gboolean ts_mpi_all_ok(gboolean ok)
{
  return ok;
}

char *ts_mpi_summary(void)
{
  return NULL;
}

gboolean ts_mpi_start(void)
{
  static gboolean noted = FALSE;
  if (launcher_size() > 1 && !noted) {
    noted = TRUE;
    fprintf(stderr, "trainsim: note: started by an MPI launcher, but this build has no MPI "
                    "(install libopenmpi-dev and rebuild); every rank runs the whole sweep\n");
  }
  return FALSE;
}

int ts_mpi_rank(void)
{
  return 0;
}

gboolean ts_mpi_run(const ts_config *cfg, const int *idx, int n, const ts_pool_options *o,
                    ts_outcome *out, GError **error)
{
  return ts_pool_run(cfg, idx, n, o, out, error);
}

void ts_mpi_finish(void)
{
}

#endif
