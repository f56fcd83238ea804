/* ts_export_tit: a trainsim trace as SimGrid's time-independent traces (one file per rank,
 * replayed by `smpirun -replay`), so SimGrid's own MPI replay can run the same workload.
 *
 * A TIT file is one sequential program per rank, so ops are written in program order:
 *   compute  `compute F` with F = the roofline time on the topology's chip x the platform's
 *            host speed (trainsim platform writes peak x efficiency), so SMPI takes that time;
 *   xfer, delay  `sleep S` with the backend's time;
 *   coll     the collective's decomposition (the one both trainsim backends replay): per step,
 *            `isend`/`irecv` of the step's transfers to and from the member's peers, `waitall`.
 *            TIT's own collectives act on MPI_COMM_WORLD only, and trainsim's groups are
 *            sub-communicators;
 *   send     `isend` (completed by the final waitall), recv a blocking `recv`;
 *   wait     nothing.
 * Streams that overlap in trainsim run one after another here: the exported program is exact
 * for traces whose ops run in program order (one stream, or streams that never overlap). */
#include "ts_coll_members.h"
#include "ts_import.h"
#include "ts_util.h"

#include <glib/gstdio.h>
#include <string.h>

#define COLL_TAG (1 << 30)

static void append_g(GString *s, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append(s, g_ascii_formatd(buf, sizeof buf, "%.17g", v));
}

/* The decomposition a collective replays (algorithm resolved as the backends resolve it). */
static ts_coll_plan *coll_plan(const ts_topo *t, const ts_op *o, const ts_group *g, GError **error)
{
  double bytes = o->bytes < 0 ? 0 : o->bytes;
  if (g->members != NULL && g->shape.npieces == 0)
    return ts_coll_members_decompose(o->coll, o->algo, g->nmembers, (gint64)(bytes + 0.5), error);
  ts_coll_algo algo = o->algo;
  if (algo == TS_ALGO_AUTO &&
      ts_coll_time(t, o->coll, TS_ALGO_AUTO, &g->shape, bytes, &algo, error) < 0)
    return NULL;
  return ts_coll_decompose(t, o->coll, algo, &g->shape, (gint64)(bytes + 0.5), 1.0, error);
}

gboolean ts_export_tit(const ts_trace *tr, const ts_topo *t, const char *dir, GError **error)
{
  if (g_mkdir_with_parents(dir, 0755) != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot create the folder", dir);
    return FALSE;
  }
  double speed =
      t->chip.peak_flops * (t->chip.compute_efficiency > 0 ? t->chip.compute_efficiency : 1);
  if (!(speed > 0))
    speed = 1e9;
  GString *index = g_string_new(NULL);
  GString *s = g_string_new(NULL);
  g_autoptr(GArray) xs = g_array_new(FALSE, FALSE, sizeof(ts_xfer));
  g_autoptr(GHashTable) plans =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)ts_coll_plan_free);
  gboolean ok = TRUE;
  for (int rank = 0; rank < tr->nranks && ok; rank++) {
    const ts_program *p = &tr->programs[ts_trace_program_of(tr, rank)];
    g_string_truncate(s, 0);
    g_string_append_printf(s, "%d init\n", rank);
    for (int i = 0; i < p->nops && ok; i++) {
      const ts_op ob = ts_program_op(p, i), *o = &ob;
      switch (o->kind) {
      case TS_OP_COMPUTE: {
        /* Costed as the backends cost it: from the op's shape where the trace gives one. */
        double f = ts_cost_compute(&t->chip, o->flops, o->mem_bytes, o->shape) * speed;
        if (f > 0) {
          g_string_append_printf(s, "%d compute ", rank);
          append_g(s, f);
          g_string_append_c(s, '\n');
        }
        break;
      }
      case TS_OP_XFER:
      case TS_OP_DELAY: {
        double d = ts_offchip_time(t, o);
        if (d > 0) {
          g_string_append_printf(s, "%d sleep ", rank);
          append_g(s, d);
          g_string_append_c(s, '\n');
        }
        break;
      }
      case TS_OP_SEND:
      case TS_OP_RECV: {
        int peer = ts_trace_op_peer(tr, o, rank);
        if (peer < 0) {
          g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "rank %d op %d: %s without a partner rank",
                      rank, i, ts_op_kind_name(o->kind));
          ok = FALSE;
          break;
        }
        g_string_append_printf(s, "%d %s %d %d ", rank, o->kind == TS_OP_SEND ? "isend" : "recv",
                               peer, o->tag);
        append_g(s, (double)(gint64)(o->bytes + 0.5));
        g_string_append_c(s, '\n');
        break;
      }
      case TS_OP_COLL: {
        const ts_group *g = g_ptr_array_index(tr->groups, o->group);
        int m = 0, base = ts_trace_group_base(tr, g, rank, &m);
        if (base < 0 || ts_trace_group_size(g) <= 1)
          break;
        g_autofree char *key =
            g_strdup_printf("%d/%d/%d/%.17g", o->group, (int)o->coll, (int)o->algo, o->bytes);
        ts_coll_plan *pl = g_hash_table_lookup(plans, key);
        if (pl == NULL) {
          pl = coll_plan(t, o, g, error);
          if (pl == NULL) {
            g_prefix_error(error, "rank %d op %d: ", rank, i);
            ok = FALSE;
            break;
          }
          g_hash_table_insert(plans, g_steal_pointer(&key), pl);
        }
        for (int st = 0; st < ts_coll_plan_nsteps(pl); st++) {
          g_array_set_size(xs, 0);
          ts_coll_plan_step(pl, st, xs);
          gboolean any = FALSE;
          /* A pair exchanges one message per step: bytes of its transfers summed. */
          for (int pass = 0; pass < 2; pass++)
            for (guint k = 0; k < xs->len; k++) {
              const ts_xfer *x = &g_array_index(xs, ts_xfer, k);
              int other = pass == 0 ? x->dst : x->src;
              if ((pass == 0 ? x->src : x->dst) != m)
                continue;
              gboolean first = TRUE;
              double bytes = 0;
              for (guint q = 0; q < xs->len; q++) {
                const ts_xfer *y = &g_array_index(xs, ts_xfer, q);
                if ((pass == 0 ? y->src : y->dst) == m && (pass == 0 ? y->dst : y->src) == other) {
                  if (q < k)
                    first = FALSE;
                  bytes += (double)y->count;
                }
              }
              if (!first)
                continue;
              g_string_append_printf(s, "%d %s %d %d ", rank, pass == 0 ? "isend" : "irecv",
                                     ts_trace_group_chip(t, g, base, other), COLL_TAG + st);
              append_g(s, bytes);
              g_string_append_c(s, '\n');
              any = TRUE;
            }
          if (any)
            g_string_append_printf(s, "%d waitall\n", rank);
        }
        break;
      }
      default:
        break;
      }
    }
    if (!ok)
      break;
    g_string_append_printf(s, "%d waitall\n%d finalize\n", rank, rank);
    g_autofree char *name = g_strdup_printf("rank-%d.txt", rank);
    g_autofree char *path = g_build_filename(dir, name, NULL);
    ok = ts_write_file_atomic(path, s->str, s->len, error);
    g_string_append_printf(index, "%s\n", path);
  }
  if (ok) {
    g_autofree char *ipath = g_build_filename(dir, "index.txt", NULL);
    ok = ts_write_file_atomic(ipath, index->str, index->len, error);
  }
  g_string_free(s, TRUE);
  g_string_free(index, TRUE);
  return ok;
}
