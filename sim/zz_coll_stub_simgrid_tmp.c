/* TEMPORARY (simgrid branch only, deleted when the coll branch is merged): a minimal stand-in
 * for ts_coll.c (group shapes, dimension-order routes, ring decompositions) so that the simgrid
 * backend can be built and exercised before the real module lands. */
#include "ts_coll.h"
#include "ts_util.h"

#include <string.h>

int ts_group_size(const ts_group_shape *g)
{
  int n = 1;
  for (int k = 0; k < g->npieces; k++)
    n *= g->p[k].size;
  return n;
}

int ts_group_member_chip(const ts_topo *t, const ts_group_shape *g, int base_chip, int m)
{
  int coords[TS_MAX_DIMS];
  ts_topo_coords(t, base_chip, coords);
  for (int k = 0; k < g->npieces; k++) {
    int i = m % g->p[k].size;
    m /= g->p[k].size;
    coords[g->p[k].dim] += i * g->p[k].stride;
  }
  return ts_topo_chip(t, coords);
}

int ts_group_base_chip(const ts_topo *t, const ts_group_shape *g, int chip, int *member)
{
  int coords[TS_MAX_DIMS];
  ts_topo_coords(t, chip, coords);
  int m = 0, mul = 1;
  for (int k = 0; k < g->npieces; k++) {
    int span = g->p[k].size * g->p[k].stride;
    int c = coords[g->p[k].dim];
    int in_span = c % span;
    int i = in_span / g->p[k].stride;
    coords[g->p[k].dim] = c - i * g->p[k].stride;
    m += i * mul;
    mul *= g->p[k].size;
  }
  if (member != NULL)
    *member = m;
  return ts_topo_chip(t, coords);
}

void ts_group_shape_dims(const ts_topo *t, const int *dims, int ndims, ts_group_shape *out)
{
  out->npieces = ndims;
  for (int k = 0; k < ndims; k++)
    out->p[k] = (ts_piece){dims[k], t->dims[dims[k]].size, 1};
}

void ts_route(const ts_topo *t, int src, int dst, GArray *out)
{
  int a[TS_MAX_DIMS], b[TS_MAX_DIMS];
  ts_topo_coords(t, src, a);
  ts_topo_coords(t, dst, b);
  for (int d = 0; d < t->ndims; d++) {
    int n = t->dims[d].size;
    if (a[d] == b[d])
      continue;
    if (t->dims[d].shape == TS_SHAPE_SWITCH) {
      ts_link_id up = {ts_topo_chip(t, a), d, +1};
      g_array_append_val(out, up);
      a[d] = b[d];
      ts_link_id down = {ts_topo_chip(t, a), d, -1};
      g_array_append_val(out, down);
      continue;
    }
    int dir;
    if (t->dims[d].shape == TS_SHAPE_MESH)
      dir = b[d] > a[d] ? 1 : -1;
    else
      dir = ((b[d] - a[d] + n) % n) <= n / 2 ? 1 : -1;
    while (a[d] != b[d]) {
      ts_link_id l = {ts_topo_chip(t, a), d, dir};
      g_array_append_val(out, l);
      a[d] = (a[d] + dir + n) % n;
    }
  }
}

double ts_p2p_time(const ts_topo *t, int src, int dst, double bytes)
{
  GArray *r = g_array_new(FALSE, FALSE, sizeof(ts_link_id));
  ts_route(t, src, dst, r);
  double lat = 0, bw = 0;
  for (guint i = 0; i < r->len; i++) {
    ts_link_id *l = &g_array_index(r, ts_link_id, i);
    const ts_dim *d = &t->dims[l->dim];
    if (d->shape != TS_SHAPE_SWITCH || l->dir > 0)
      lat += d->latency_s;
    if (bw == 0 || d->link_bw_Bps < bw)
      bw = d->link_bw_Bps;
  }
  g_array_unref(r);
  return bw > 0 ? lat + bytes / bw : 0.0;
}

struct ts_coll_plan {
  const ts_topo *t;
  ts_group_shape g;
  int n, nsteps;
  gint64 count;
  double elem_bytes;
};

ts_coll_plan *ts_coll_decompose(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                                const ts_group_shape *g, gint64 count, double elem_bytes,
                                GError **error)
{
  if (kind != TS_COLL_ALLREDUCE || algo != TS_ALGO_RING) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID, "stub: only ring all-reduce");
    return NULL;
  }
  ts_coll_plan *p = g_new0(ts_coll_plan, 1);
  p->t = t;
  p->g = *g;
  p->n = ts_group_size(g);
  p->nsteps = 2 * (p->n - 1);
  p->count = count;
  p->elem_bytes = elem_bytes;
  return p;
}

void ts_coll_plan_free(ts_coll_plan *p)
{
  g_free(p);
}

int ts_coll_plan_nsteps(const ts_coll_plan *p)
{
  return p->nsteps;
}

void ts_coll_plan_step(const ts_coll_plan *p, int s, GArray *out)
{
  for (int m = 0; m < p->n; m++) {
    ts_xfer x = {m, (m + 1) % p->n, 0, 0, p->count / p->n, s < p->n - 1 ? TS_XFER_REDUCE : TS_XFER_COPY};
    g_array_append_val(out, x);
  }
}

double ts_coll_plan_time(const ts_coll_plan *p)
{
  double total = 0;
  for (int s = 0; s < p->nsteps; s++) {
    double worst = 0;
    for (int m = 0; m < p->n; m++) {
      int a = ts_group_member_chip(p->t, &p->g, 0, m);
      int b = ts_group_member_chip(p->t, &p->g, 0, (m + 1) % p->n);
      double x = ts_p2p_time(p->t, a, b, (double)(p->count / p->n) * p->elem_bytes);
      worst = x > worst ? x : worst;
    }
    total += worst;
  }
  return total;
}

double ts_coll_time(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                    const ts_group_shape *g, double bytes, ts_coll_algo *chosen, GError **error)
{
  if (algo == TS_ALGO_AUTO)
    algo = TS_ALGO_RING;
  if (chosen != NULL)
    *chosen = algo;
  ts_coll_plan *p = ts_coll_decompose(t, kind, algo, g, (gint64)bytes, 1.0, error);
  if (p == NULL)
    return -1;
  double v = ts_coll_plan_time(p);
  ts_coll_plan_free(p);
  return v;
}

const char *ts_coll_kind_name(ts_coll_kind k)
{
  static const char *n[] = {"allreduce", "reducescatter", "allgather", "alltoall", "broadcast"};
  return k >= 0 && k < TS_COLL_NKINDS ? n[k] : "?";
}

const char *ts_coll_algo_name(ts_coll_algo a)
{
  static const char *n[] = {"auto", "ring", "bidir-ring", "torus", "hierarchical", "tree",
                            "halving-doubling", "direct"};
  return a >= 0 && a < TS_ALGO_NALGOS ? n[a] : "?";
}

gboolean ts_group_shape_valid(const ts_topo *t, const ts_group_shape *g, GError **error)
{
  (void)t;
  (void)g;
  (void)error;
  return TRUE;
}

int ts_coll_kind_parse(const char *s)
{
  for (int k = 0; k < TS_COLL_NKINDS; k++)
    if (strcmp(s, ts_coll_kind_name(k)) == 0)
      return k;
  return -1;
}

int ts_coll_algo_parse(const char *s)
{
  for (int a = 0; a < TS_ALGO_NALGOS; a++)
    if (strcmp(s, ts_coll_algo_name(a)) == 0)
      return a;
  return -1;
}
