/* bench_simgrid: wall time, flows/s and platform load time of the simgrid backend on one
 * collective over every group of a shape (all groups run concurrently, so links are loaded as
 * in a real step). Build and run with bench/bench_simgrid.sh. */
#include "ts_backend_simgrid.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ts_topo *torus(int x, int y, double bw_x, double bw_y)
{
  ts_topo *t = g_new0(ts_topo, 1);
  t->name = g_strdup_printf("torus %dx%d", x, y);
  t->chip.name = g_strdup("bench chip");
  t->chip.peak_flops = 123e12;
  t->chip.compute_efficiency = 1;
  t->chip.memory_bw_Bps = 900e9;
  t->ndims = 2;
  t->dims[0] = (ts_dim){g_strdup("x"), x, TS_SHAPE_RING, bw_x, 1e-6};
  t->dims[1] = (ts_dim){g_strdup("y"), y, TS_SHAPE_RING, bw_y, 1e-6};
  t->nchips = x * y;
  return t;
}

int main(int argc, char **argv)
{
  if (argc < 5) {
    fprintf(stderr,
            "usage: bench_simgrid (TOPOLOGY.ini | XxY) DIMS(e.g. x or x,y) ALGO BYTES [CFG...]\n");
    return 2;
  }
  GError *e = NULL;
  ts_topo *t = NULL;
  int x, y;
  if (sscanf(argv[1], "%dx%d", &x, &y) == 2)
    t = torus(x, y, 100e9, 100e9);
  else
    t = ts_topo_load(argv[1], &e);
  if (t == NULL) {
    fprintf(stderr, "%s\n", e->message);
    return 2;
  }
  int dims[TS_MAX_DIMS], nd = 0;
  gchar **names = g_strsplit(argv[2], ",", -1);
  for (int i = 0; names[i] != NULL; i++)
    dims[nd++] = ts_topo_dim_index(t, names[i]);
  g_strfreev(names);
  ts_group_shape g;
  ts_group_shape_dims(t, dims, nd, &g);
  int algo = ts_coll_algo_parse(argv[3]);
  double bytes = 0;
  ts_parse_size(argv[4], &bytes);

  ts_trace *tr = ts_trace_new(t);
  int ax = ts_trace_add_axis(tr, "g", ts_group_size(&g), TRUE, &g);
  ts_trace_set_programs(tr, 1);
  ts_op op = {0};
  op.kind = TS_OP_COLL;
  op.label = ts_trace_label(tr, "allreduce");
  op.bytes = bytes;
  op.coll = TS_COLL_ALLREDUCE;
  op.algo = algo;
  op.group = ts_trace_group(tr, &ax, 1);
  ts_trace_append(tr, 0, &op, NULL, 0);

  gint64 t0 = g_get_monotonic_time();
  ts_backend *b = ts_backend_simgrid_new(t, argc > 5 ? (const char *const *)argv + 5 : NULL, &e);
  if (b == NULL) {
    fprintf(stderr, "%s\n", e->message);
    return 2;
  }
  gint64 t1 = g_get_monotonic_time();
  ts_replay *r = ts_replay_new(tr, b, TS_REPLAY_FULL);
  ts_replay_result res;
  if (!ts_replay_run(r, &res, &e)) {
    fprintf(stderr, "%s\n", e->message);
    return 1;
  }
  gint64 t2 = g_get_monotonic_time();
  double an = ts_coll_time(t, TS_COLL_ALLREDUCE, algo, &g, bytes, NULL, &e);
  gint64 flows = ts_backend_simgrid_flows(b);
  double wall = (t2 - t1) / 1e6;
  printf("chips %d  groups of %d  algo %s  bytes %g\n", t->nchips, ts_group_size(&g),
         ts_coll_algo_name(algo), bytes);
  printf("platform build+load %.3f s\n", (t1 - t0) / 1e6);
  printf("replay wall %.3f s  flows %" G_GINT64_FORMAT "  flows/s %.0f\n", wall, flows,
         flows / wall);
  printf("simulated %.9g s  analytic %.9g s  ratio %.6f\n", res.step_time_s, an,
         res.step_time_s / an);
  ts_replay_free(r);
  ts_backend_free(b);
  ts_trace_free(tr);
  ts_topo_free(t);
  return 0;
}
