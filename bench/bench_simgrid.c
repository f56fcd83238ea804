/* bench_simgrid: one collective over every group of a shape on the simgrid backend (all groups
 * at once, as in a training step): platform build time, replay wall time, flows and flows/s,
 * and the simulated time against the analytic backend's. Built and run by bench_simgrid.sh. */
#include "ts_backend_simgrid.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
  if (argc < 5) {
    fprintf(stderr, "usage: bench_simgrid TOPOLOGY DIMS ALGORITHM BYTES [CFG...]\n"
                    "  e.g. bench_simgrid tpu-v3-pod x,y torus 1e9\n");
    return 2;
  }
  GError *e = NULL;
  g_autofree char *path = ts_resolve_data_file(argv[1], "topologies", &e);
  g_autoptr(ts_topo) t = path != NULL ? ts_topo_load(path, &e) : NULL;
  int algo = ts_coll_algo_parse(argv[3]);
  double bytes = 0;
  if (t == NULL || algo < 0 || !ts_parse_size(argv[4], &bytes)) {
    fprintf(stderr, "bench_simgrid: %s\n", e != NULL ? e->message : "bad algorithm or size");
    return 2;
  }
  int dims[TS_MAX_DIMS], nd = 0;
  g_auto(GStrv) names = g_strsplit(argv[2], ",", -1);
  for (int i = 0; names[i] != NULL && nd < TS_MAX_DIMS; i++)
    if ((dims[nd++] = ts_topo_dim_index(t, names[i])) < 0) {
      fprintf(stderr, "bench_simgrid: no dimension '%s'\n", names[i]);
      return 2;
    }
  ts_group_shape g;
  ts_group_shape_dims(t, dims, nd, &g);

  g_autoptr(ts_trace) tr = ts_trace_new(t);
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
    fprintf(stderr, "bench_simgrid: %s\n", e->message);
    return 2;
  }
  gint64 t1 = g_get_monotonic_time();
  ts_replay *r = ts_replay_new(tr, b, TS_REPLAY_FULL);
  ts_replay_result res;
  if (!ts_replay_run(r, &res, &e)) {
    fprintf(stderr, "bench_simgrid: %s\n", e->message);
    return 1;
  }
  gint64 t2 = g_get_monotonic_time();
  double an = ts_coll_time(t, TS_COLL_ALLREDUCE, algo, &g, bytes, NULL, &e);
  gint64 flows = ts_backend_simgrid_flows(b);
  double wall = (double)(t2 - t1) / 1e6;
  /* One line of key=value pairs for the script. */
  printf("chips=%d group=%d algorithm=%s bytes=%.0f platform_s=%.3f replay_s=%.3f "
         "flows=%" G_GINT64_FORMAT
         " flows_per_s=%.0f simulated_s=%.9g analytic_s=%.9g ratio=%.6f\n",
         t->nchips, ts_group_size(&g), ts_coll_algo_name(algo), bytes, (double)(t1 - t0) / 1e6,
         wall, flows, (double)flows / wall, res.step_time_s, an, res.step_time_s / an);
  ts_replay_free(r);
  ts_backend_free(b);
  return 0;
}
