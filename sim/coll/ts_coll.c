/* ts_coll: group shapes on the array, dimension-order routes, names, and the analytic entry
 * point ts_coll_time (the algorithms themselves are in ts_coll_algos.c). */
#include "ts_coll_internal.h"
#include "ts_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[TS_COLL_NKINDS] = {"allreduce", "reducescatter", "allgather",
                                                       "alltoall", "broadcast"};
static const char *const algo_names[TS_ALGO_NALGOS] = {"auto",
                                                       "ring",
                                                       "bidir-ring",
                                                       "torus",
                                                       "hierarchical",
                                                       "tree",
                                                       "halving-doubling",
                                                       "direct",
                                                       "nccl-ring",
                                                       "nccl-tree",
                                                       "nvls",
                                                       "nccl",
                                                       "torus-dimwise"};
static const char *const proto_names[TS_PROTO_NPROTOS] = {"auto", "LL", "LL128", "Simple", "none"};

gboolean ts_coll_algo_is_choice(ts_coll_algo a)
{
  return a == TS_ALGO_AUTO || a == TS_ALGO_NCCL;
}

gboolean ts_coll_algo_is_nccl(ts_coll_algo a)
{
  return a == TS_ALGO_NCCL_RING || a == TS_ALGO_NCCL_TREE || a == TS_ALGO_NVLS;
}

const char *ts_coll_proto_name(ts_coll_proto p)
{
  return (int)p >= 0 && p < TS_PROTO_NPROTOS ? proto_names[p] : "?";
}

int ts_coll_proto_parse(const char *s)
{
  if (s == NULL)
    return -1;
  for (int i = 0; i < TS_PROTO_NONE; i++)
    if (g_ascii_strcasecmp(s, proto_names[i]) == 0)
      return i;
  return -1;
}

const char *ts_coll_kind_name(ts_coll_kind k)
{
  return (int)k >= 0 && k < TS_COLL_NKINDS ? kind_names[k] : "?";
}

const char *ts_coll_algo_name(ts_coll_algo a)
{
  return (int)a >= 0 && a < TS_ALGO_NALGOS ? algo_names[a] : "?";
}

int ts_coll_kind_parse(const char *s)
{
  if (s == NULL)
    return -1;
  for (int i = 0; i < TS_COLL_NKINDS; i++)
    if (g_ascii_strcasecmp(s, kind_names[i]) == 0)
      return i;
  return -1;
}

const char *ts_coll_algo_list(void)
{
  /* Built once from algo_names, so help texts and errors follow the table. */
  static gsize once = 0;
  static char *text = NULL;
  if (g_once_init_enter(&once)) {
    GString *s = g_string_new(NULL);
    for (int i = 0; i < TS_ALGO_NALGOS; i++)
      g_string_append_printf(s, "%s%s",
                             i == 0                    ? ""
                             : i == TS_ALGO_NALGOS - 1 ? " or "
                                                       : ", ",
                             algo_names[i]);
    text = g_string_free(s, FALSE);
    g_once_init_leave(&once, 1);
  }
  return text;
}

int ts_coll_algo_parse(const char *s)
{
  if (s == NULL)
    return -1;
  for (int i = 0; i < TS_ALGO_NALGOS; i++)
    if (g_ascii_strcasecmp(s, algo_names[i]) == 0)
      return i;
  return -1;
}

double ts_coll_busbw_factor(ts_coll_kind kind, int n)
{
  /* nccl-tests doc/PERFORMANCE.md: busBw = algBw * factor, chosen so that busBw is the
   * bandwidth a ring algorithm needs on each link, comparable with the hardware peak. */
  if (n < 1)
    return 0.0;
  switch (kind) {
  case TS_COLL_ALLREDUCE:
    return 2.0 * (n - 1) / n;
  case TS_COLL_REDUCESCATTER:
  case TS_COLL_ALLGATHER:
  case TS_COLL_ALLTOALL:
    return (double)(n - 1) / n;
  case TS_COLL_BROADCAST:
    return 1.0;
  default:
    return 0.0;
  }
}

/* ---- topology arithmetic (numbering: ts_array's; these need only the dims) ---- */

void ts_net_init_array(ts_net *nw, const ts_array *a, const ts_dim *dims)
{
  memset(nw, 0, sizeof *nw);
  nw->arr.ndims = a->ndims;
  for (int d = 0; d < a->ndims; d++) {
    const ts_dim *dm = &dims[d];
    nw->arr.size[d] = a->size[d];
    nw->stride[d] = ts_array_stride(a, d);
    nw->shape[d] = dm->shape;
    nw->bw_Bps[d] = dm->link_bw_Bps;
    nw->lat_s[d] = dm->latency_s;
    nw->port_share[d] =
        dm->shape == TS_SHAPE_SWITCH && d > 0 && dm->chips_per_port > 1 ? dm->chips_per_port : 1;
    nw->in_switch[d] = dm->in_switch_reduction;
    nw->isr_eff[d] = dm->in_switch_efficiency > 0 ? dm->in_switch_efficiency : 0.85;
    nw->ll_frac[d] = dm->ll_bw_frac > 0 ? dm->ll_bw_frac : 0.5;
    nw->ll128_frac[d] = dm->ll128_bw_frac > 0 ? dm->ll128_bw_frac : 0.92;
    for (int q = 0; q < 3; q++)
      nw->nccl_base_s[d][q] = dm->nccl_base_s[q];
    for (int q = 0; q < 2; q++)
      nw->nccl_step_s[d][q] = dm->nccl_step_s[q];
    nw->nccl_local_Bps[d] = dm->nccl_local_Bps;
    nw->nccl_ll_channel_s[d] = dm->nccl_ll_channel_s;
    nw->nccl_channels[d] = dm->nccl_channels;
    nw->nccl_node_hop_s[d] = dm->nccl_node_hop_s;
    nw->nccl_tree_Bps[d] = dm->nccl_tree_Bps;
    nw->nccl_tree_chunk_s[d] = dm->nccl_tree_chunk_s;
    nw->nccl_model_Bps[d] = dm->nccl_model_Bps;
    nw->nccl_model_ch[d] = dm->nccl_model_channels;
    nw->nccl_net_overhead_s[d] = dm->nccl_net_overhead_s;
    for (int e = 0; e < a->ndims; e++) {
      nw->twist[d][e] = dm->twist[e];
      nw->twisted = nw->twisted || dm->twist[e] != 0;
    }
  }
  nw->nchips = ts_array_nchips(a);
  nw->line_local = ts_net_line_local(nw);
}

void ts_net_init(ts_net *nw, const ts_topo *t)
{
  ts_array a = ts_topo_array(t);
  ts_net_init_array(nw, &a, t->dims);
}

int ts_net_port_chip(const ts_net *nw, int d, int chip)
{
  int k = nw->port_share[d];
  return k > 1 ? chip - (chip % nw->arr.size[0]) % k : chip;
}

/* ---- group shapes ---- */

int ts_group_size(const ts_group_shape *g)
{
  g_return_val_if_fail(g != NULL, 0);
  int n = 1;
  for (int k = 0; k < g->npieces; k++)
    n *= g->p[k].size;
  return n;
}

int ts_array_member_chip(const ts_array *t, const ts_group_shape *g, int base_chip, int m)
{
  g_return_val_if_fail(t != NULL && g != NULL, -1);
  g_return_val_if_fail(m >= 0 && m < ts_group_size(g), -1);
  int c[TS_MAX_DIMS];
  ts_array_coords(t, base_chip, c);
  for (int k = 0; k < g->npieces; k++) {
    c[g->p[k].dim] += (m % g->p[k].size) * g->p[k].stride;
    m /= g->p[k].size;
  }
  /* A base chip that is not a group's member 0 would push coordinates past the end; wrap so
   * the result is always a chip (on ring dims this is the torus neighbour). */
  for (int d = 0; d < t->ndims; d++)
    c[d] %= t->size[d];
  return ts_array_chip(t, c);
}

int ts_array_base_chip(const ts_array *t, const ts_group_shape *g, int chip, int *member)
{
  g_return_val_if_fail(t != NULL && g != NULL, -1);
  int c[TS_MAX_DIMS], sub[TS_MAX_DIMS] = {0};
  ts_array_coords(t, chip, c);
  int m = 0, radix = 1;
  for (int k = 0; k < g->npieces; k++) {
    const ts_piece *pc = &g->p[k];
    /* The piece's digit comes from the chip's own coordinate: pieces on one dim nest (see
     * ts_group_shape_valid), so each reads its own "place value" of the coordinate. */
    int mk = (c[pc->dim] / pc->stride) % pc->size;
    sub[pc->dim] += mk * pc->stride;
    m += mk * radix;
    radix *= pc->size;
  }
  for (int d = 0; d < t->ndims; d++)
    c[d] -= sub[d];
  if (member != NULL)
    *member = m;
  return ts_array_chip(t, c);
}

static const char *dim_label(const ts_array *t, int d)
{
  return t->name[d] != NULL ? t->name[d] : "?";
}

gboolean ts_array_shape_valid(const ts_array *t, const ts_group_shape *g, GError **error)
{
  g_return_val_if_fail(t != NULL && g != NULL, FALSE);
  const char *where = t->label != NULL ? t->label : "array";
  if (g->npieces < 0 || g->npieces > TS_MAX_PIECES) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "%s: group shape has %d pieces; expected 0 to %d", where, g->npieces,
                TS_MAX_PIECES);
    return FALSE;
  }
  gint64 members = 1;
  for (int k = 0; k < g->npieces; k++) {
    const ts_piece *pc = &g->p[k];
    if (pc->dim < 0 || pc->dim >= t->ndims) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "%s: group piece %d: dim=%d: expected a dimension index in [0, %d)", where, k,
                  pc->dim, t->ndims);
      return FALSE;
    }
    int n = t->size[pc->dim];
    if (pc->size < 1 || pc->stride < 1) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "%s: group piece %d on dim '%s': size=%d stride=%d: expected both >= 1", where, k,
                  dim_label(t, pc->dim), pc->size, pc->stride);
      return FALSE;
    }
    if ((gint64)pc->size * pc->stride > n) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "%s: group piece %d on dim '%s': size*stride=%" G_GINT64_FORMAT
                  " (size %d, stride %d): expected at most the dim's %d chips",
                  where, k, dim_label(t, pc->dim), (gint64)pc->size * pc->stride, pc->size,
                  pc->stride, n);
      return FALSE;
    }
    members *= pc->size;
  }
  /* Pieces on one dimension must nest, each stride a multiple of the span (size*stride) of
   * the next finer piece, e.g. x(16) = tp(size 4, stride 1) x dp(size 4, stride 4). Then a
   * coordinate splits into independent digits, groups of a shape tile the dimension, and
   * ts_group_base_chip is well defined. Pieces of size 1 take no room and are ignored. */
  for (int a = 0; a < g->npieces; a++) {
    for (int b = 0; b < g->npieces; b++) {
      const ts_piece *pa = &g->p[a], *pb = &g->p[b];
      if (a == b || pa->dim != pb->dim || pa->size == 1 || pb->size == 1)
        continue;
      if (pa->stride > pb->stride || (pa->stride == pb->stride && a > b))
        continue; /* check each pair once, finer piece first */
      gint64 span = (gint64)pa->size * pa->stride;
      if (pb->stride % span != 0) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "%s: group pieces %d (size %d, stride %d) and %d (size %d, stride %d) on dim "
                    "'%s' overlap or do not nest: expected piece %d's stride to be a multiple of "
                    "%" G_GINT64_FORMAT,
                    where, a, pa->size, pa->stride, b, pb->size, pb->stride, dim_label(t, pa->dim),
                    b, span);
        return FALSE;
      }
    }
  }
  if (members > ts_array_nchips(t)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "%s: group shape has %" G_GINT64_FORMAT " members: expected at most the %d chips",
                where, members, ts_array_nchips(t));
    return FALSE;
  }
  return TRUE;
}

/* The topology's versions: the same arithmetic on its array. */
int ts_group_member_chip(const ts_topo *t, const ts_group_shape *g, int base_chip, int m)
{
  g_return_val_if_fail(t != NULL, -1);
  ts_array a = ts_topo_array(t);
  return ts_array_member_chip(&a, g, base_chip, m);
}

int ts_group_base_chip(const ts_topo *t, const ts_group_shape *g, int chip, int *member)
{
  g_return_val_if_fail(t != NULL, -1);
  ts_array a = ts_topo_array(t);
  return ts_array_base_chip(&a, g, chip, member);
}

gboolean ts_group_shape_valid(const ts_topo *t, const ts_group_shape *g, GError **error)
{
  g_return_val_if_fail(t != NULL, FALSE);
  ts_array a = ts_topo_array(t);
  return ts_array_shape_valid(&a, g, error);
}

void ts_group_shape_dims(const ts_topo *t, const int *dims, int ndims, ts_group_shape *out)
{
  g_return_if_fail(t != NULL && out != NULL && ndims >= 0 && ndims <= TS_MAX_PIECES);
  memset(out, 0, sizeof *out);
  out->npieces = ndims;
  for (int i = 0; i < ndims; i++) {
    out->p[i].dim = dims[i];
    out->p[i].size = dims[i] >= 0 && dims[i] < t->ndims ? t->dims[dims[i]].size : 0;
    out->p[i].stride = 1;
  }
}

/* ---- routes ---- */

/* A shortest route on a twisted torus (breadth-first from the source, links tried in
 * dimension order, + before -, so the route is deterministic): dimension order is no longer
 * minimal once wrap-arounds are twisted (Camara et al. 2010, section 3). Every backend takes
 * this same route. */
static void twisted_route(const ts_topo *t, int src, int dst, GArray *out)
{
  int n = t->nchips;
  int *prev = g_new(int, n);
  signed char *pdim = g_new(signed char, n), *pdir = g_new(signed char, n);
  for (int i = 0; i < n; i++)
    prev[i] = -1;
  int *queue = g_new(int, n), head = 0, tail = 0;
  queue[tail++] = src;
  prev[src] = src;
  while (head < tail && prev[dst] < 0) {
    int c = queue[head++];
    for (int d = 0; d < t->ndims && prev[dst] < 0; d++)
      for (int dir = 1; dir >= -1; dir -= 2) {
        if (t->dims[d].size < 2 || t->dims[d].shape == TS_SHAPE_SWITCH)
          continue;
        int m = ts_topo_neighbor(t, c, d, dir);
        if (m < 0 || prev[m] >= 0)
          continue;
        prev[m] = c;
        pdim[m] = (signed char)d;
        pdir[m] = (signed char)dir;
        queue[tail++] = m;
      }
  }
  int len = 0;
  for (int c = dst; c != src; c = prev[c])
    len++;
  guint base = out->len;
  g_array_set_size(out, base + (guint)len);
  for (int c = dst, k = len - 1; c != src; c = prev[c], k--)
    g_array_index(out, ts_link_id, base + (guint)k) = (ts_link_id){prev[c], pdim[c], pdir[c]};
  g_free(prev);
  g_free(pdim);
  g_free(pdir);
  g_free(queue);
}

void ts_route(const ts_topo *t, int src_chip, int dst_chip, GArray *out)
{
  g_return_if_fail(t != NULL && out != NULL);
  if (ts_topo_twisted(t)) {
    if (src_chip != dst_chip)
      twisted_route(t, src_chip, dst_chip, out);
    return;
  }
  int cur[TS_MAX_DIMS], dst[TS_MAX_DIMS];
  ts_topo_coords(t, src_chip, cur);
  ts_topo_coords(t, dst_chip, dst);
  /* Dimension order (x first): the deterministic route of TPU tori and of most mesh routers;
   * every backend uses this same route so that link loads agree. */
  for (int d = 0; d < t->ndims; d++) {
    int n = t->dims[d].size;
    if (cur[d] == dst[d])
      continue;
    switch (t->dims[d].shape) {
    case TS_SHAPE_RING:
    case TS_SHAPE_MESH: {
      int dir, hops;
      if (t->dims[d].shape == TS_SHAPE_RING) {
        int fwd = ((dst[d] - cur[d]) % n + n) % n;
        dir = fwd <= n - fwd ? 1 : -1; /* the shorter way; a tie goes towards +1 */
        hops = dir > 0 ? fwd : n - fwd;
      } else {
        dir = dst[d] > cur[d] ? 1 : -1;
        hops = abs(dst[d] - cur[d]);
      }
      for (int h = 0; h < hops; h++) {
        ts_link_id l = {.chip = ts_topo_chip(t, cur), .dim = d, .dir = dir};
        g_array_append_val(out, l);
        cur[d] = ((cur[d] + dir) % n + n) % n;
      }
      break;
    }
    case TS_SHAPE_SWITCH: {
      /* A port shared by several chips (a NIC per gpus_per_nic GPUs) is named after its
       * lowest chip along dimension 0. */
      int k = d > 0 && t->dims[d].chips_per_port > 1 ? t->dims[d].chips_per_port : 1;
      ts_link_id up = {.chip = ts_topo_chip(t, cur) - cur[0] % k, .dim = d, .dir = 1};
      g_array_append_val(out, up);
      cur[d] = dst[d];
      ts_link_id down = {.chip = ts_topo_chip(t, cur) - cur[0] % k, .dim = d, .dir = -1};
      g_array_append_val(out, down);
      break;
    }
    }
  }
}

double ts_p2p_time(const ts_topo *t, int src_chip, int dst_chip, double bytes)
{
  g_return_val_if_fail(t != NULL, -1.0);
  if (ts_topo_twisted(t)) {
    if (src_chip == dst_chip)
      return 0.0;
    g_autoptr(GArray) r = g_array_new(FALSE, FALSE, sizeof(ts_link_id));
    twisted_route(t, src_chip, dst_chip, r);
    double lat = 0.0, bw = INFINITY;
    for (guint i = 0; i < r->len; i++) {
      const ts_dim *dm = &t->dims[g_array_index(r, ts_link_id, i).dim];
      lat += dm->latency_s;
      bw = MIN(bw, dm->link_bw_Bps);
    }
    return lat + bytes / bw;
  }
  int cur[TS_MAX_DIMS], dst[TS_MAX_DIMS];
  ts_topo_coords(t, src_chip, cur);
  ts_topo_coords(t, dst_chip, dst);
  double lat = 0.0, bw = INFINITY;
  for (int d = 0; d < t->ndims; d++) {
    int n = t->dims[d].size;
    if (cur[d] == dst[d])
      continue;
    int hops = 1;
    if (t->dims[d].shape == TS_SHAPE_RING) {
      int fwd = ((dst[d] - cur[d]) % n + n) % n;
      hops = MIN(fwd, n - fwd);
    } else if (t->dims[d].shape == TS_SHAPE_MESH) {
      hops = abs(dst[d] - cur[d]);
    }
    lat += hops * t->dims[d].latency_s;
    bw = MIN(bw, t->dims[d].link_bw_Bps);
  }
  /* Cut-through: latencies add, the slowest link sets the rate. Same chip: free. */
  return isinf(bw) ? 0.0 : lat + bytes / bw;
}

/* ---- analytic time of a collective ---- */

static double one_time(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo, ts_coll_proto proto,
                       const ts_group_shape *g, gint64 count, double bytes,
                       ts_coll_proto *chosen_proto, double *model_s, GError **error)
{
  g_autoptr(ts_coll_plan) p =
      ts_coll_plan_build_proto(t, kind, algo, proto, g, count, 1.0, bytes, error);
  if (p == NULL)
    return -1.0;
  double work = ts_coll_plan_eval_flows(p);
  if (work > TS_COLL_MAX_EVAL_FLOWS) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "%s %s over %d members: the analytic model would route %.0f flows (limit %.0f); "
                "expected a smaller group, or ring, torus or hierarchical, or the simgrid backend",
                ts_coll_algo_name(algo), ts_coll_kind_name(kind), p->n, work,
                TS_COLL_MAX_EVAL_FLOWS);
    return -1.0;
  }
  if (chosen_proto != NULL)
    *chosen_proto = p->proto;
  if (model_s != NULL)
    *model_s = p->nccl_model_s;
  return ts_coll_plan_time_full(p, FALSE);
}

/* Distinct ring or mesh dimensions (not switches) on which the group has >= 2 members. */
static int torus_axes(const ts_topo *t, const ts_group_shape *g)
{
  guint seen = 0;
  int n = 0;
  for (int k = 0; k < g->npieces; k++)
    if (g->p[k].size > 1 && t->dims[g->p[k].dim].shape != TS_SHAPE_SWITCH &&
        !(seen & (1u << g->p[k].dim))) {
      seen |= 1u << g->p[k].dim;
      n++;
    }
  return n;
}

/* Whether every piece of the group lies on a switch dimension (a GPU cluster: NCCL's world). */
static gboolean on_switches(const ts_topo *t, const ts_group_shape *g)
{
  for (int k = 0; k < g->npieces; k++)
    if (g->p[k].size > 1 && t->dims[g->p[k].dim].shape != TS_SHAPE_SWITCH)
      return FALSE;
  return TRUE;
}

/* Linear in the members, not logarithmic: MaxText's multi-slice tables (v5e, 2-32 slices) lose
 * about the same time per layer per added slice for the 16B, 32B and 64B models (0.94-0.98 ms;
 * docs/accuracy.md, "MaxText multi-slice"), which is what one hand-off per peer gives. */
double ts_coll_chip_stall_s(const ts_topo *t, ts_coll_kind kind, const ts_group_shape *g)
{
  double s = 0.0;
  for (int i = 0; i < g->npieces; i++) {
    const ts_piece *pc = &g->p[i];
    if (pc->size <= 1 || pc->dim < 0 || pc->dim >= t->ndims)
      continue;
    double stall = t->dims[pc->dim].transfer_stall_s;
    s += stall * (kind == TS_COLL_ALLREDUCE ? 2.0 : 1.0) * (pc->size - 1);
  }
  return s;
}

double ts_coll_time(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo, const ts_group_shape *g,
                    double bytes, ts_coll_algo *chosen, GError **error)
{
  return ts_coll_time_ex(t, kind, algo, TS_PROTO_AUTO, g, bytes, chosen, NULL, error);
}

double ts_coll_time_ex(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo, ts_coll_proto proto,
                       const ts_group_shape *g, double bytes, ts_coll_algo *chosen,
                       ts_coll_proto *chosen_proto, GError **error)
{
  g_return_val_if_fail(t != NULL && g != NULL, -1.0);
  if ((int)kind < 0 || kind >= TS_COLL_NKINDS || (int)algo < 0 || algo >= TS_ALGO_NALGOS ||
      (int)proto < 0 || proto > TS_PROTO_SIMPLE) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "collective kind %d / algorithm %d / protocol %d: expected a ts_coll_kind, a "
                "ts_coll_algo and a ts_coll_proto",
                (int)kind, (int)algo, (int)proto);
    return -1.0;
  }
  if (!isfinite(bytes) || bytes < 0.0) {
    g_autofree char *b = ts_dtostr(bytes);
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID, "%s: bytes=%s: expected a finite size >= 0",
                ts_coll_kind_name(kind), b);
    return -1.0;
  }
  if (!ts_group_shape_valid(t, g, error))
    return -1.0;
  /* Elements of one byte: only pipelined stages look at the count (segments <= elements). */
  gint64 count = (gint64)llround(MIN(bytes, 1125899906842624.0));
  if (!ts_coll_algo_is_choice(algo)) {
    ts_coll_proto got = TS_PROTO_NONE;
    double v = one_time(t, kind, algo, proto, g, count, bytes, &got, NULL, error);
    if (v >= 0.0 && chosen != NULL)
      *chosen = algo;
    if (v >= 0.0 && chosen_proto != NULL)
      *chosen_proto = got;
    return v;
  }
  /* The candidates. nccl (and auto on switch dims, where NCCL runs): NCCL's algorithms for
   * all-reduce, reduce-scatter and all-gather, its send/recv to every peer (direct, routed
   * through the node's switch to the peer's rail, as PXN does) for all-to-all, its ring
   * (pipelined chain) for broadcast. auto elsewhere: every classic algorithm. */
  ts_coll_algo cand[TS_ALGO_NALGOS];
  int nc = 0;
  if (algo == TS_ALGO_NCCL || on_switches(t, g)) {
    switch (kind) {
    case TS_COLL_ALLREDUCE:
      cand[nc++] = TS_ALGO_NCCL_RING;
      cand[nc++] = TS_ALGO_NCCL_TREE;
      cand[nc++] = TS_ALGO_NVLS;
      break;
    case TS_COLL_REDUCESCATTER:
    case TS_COLL_ALLGATHER:
      cand[nc++] = TS_ALGO_NCCL_RING;
      cand[nc++] = TS_ALGO_NVLS;
      break;
    case TS_COLL_ALLTOALL:
      cand[nc++] = TS_ALGO_DIRECT;
      break;
    default:
      cand[nc++] = TS_ALGO_RING;
      break;
    }
  } else {
    /* An all-reduce over several torus axes (a sub-grid of the array) runs axis by axis, as
     * TPU runtimes do: a collective over several hardware mesh axes gets the ICI bandwidth of
     * every axis, with the longest path sum |X_i| / 2 as its latency (Austin et al. 2025, "How
     * to Scale Your Model", sharding.md), and TPU pods reduce gradients dimension by dimension
     * (Ying et al. 2018, arXiv:1811.06992). One flat ring snaking through the sub-grid is not
     * among those schedules, so ring and bidir-ring are not candidates there, however short
     * their contention-free time (docs/collectives.md). Reduce-scatter and all-gather keep
     * every candidate: the same rule for them moved MaxText's TPU v5p ZeRO-3 rows further
     * from their measurements (+16.1% -> +17.5%), a question for the TPU profiles. */
    gboolean per_axis = torus_axes(t, g) >= 2 && kind == TS_COLL_ALLREDUCE;
    for (int a = TS_ALGO_RING; a <= TS_ALGO_DIRECT; a++)
      if (!per_axis || (a != TS_ALGO_RING && a != TS_ALGO_BIDIR_RING))
        cand[nc++] = (ts_coll_algo)a;
    /* The concurrent torus all-reduce runs its chunks in lockstep: on dims of unequal
     * bandwidth or size a step waits for the slowest chunk, where one dim at a time can win. */
    cand[nc++] = TS_ALGO_TORUS_DIMWISE;
  }
  /* One node: NCCL's model prefers the ring there (the tree is a chain of the node's GPUs:
   * per step 4 us against 3.4 for Simple, LL128's 7/9 and the tree's size corrections, tuning.cc),
   * so the tree is not a candidate; across nodes NCCL's choice depends on channel counts and
   * per-channel tree caps of its topology search that trainsim does not know, so the two are
   * compared by their measured costs. */
  gboolean one_node = ts_group_in_one_node(g);
  /* Across a network that names NCCL's search channels (nccl_model_channels), NCCL's own model
   * chooses between the ring and the tree too (tuning.cc, enqueue.cc topoGetAlgoInfo); the
   * chosen one is then timed with the fitted costs. */
  gboolean by_model = FALSE;
  for (int k = 0; k < g->npieces && !one_node; k++)
    if (g->p[k].dim != 0 && g->p[k].size > 1 && t->dims[g->p[k].dim].nccl_model_channels > 0)
      by_model = TRUE;
  double best_model = INFINITY;
  double best = -1.0;
  ts_coll_algo best_algo = TS_ALGO_AUTO;
  ts_coll_proto best_proto = TS_PROTO_NONE;
  g_autoptr(GString) why = g_string_new(NULL);
  for (int i = 0; i < nc; i++) {
    g_autoptr(GError) local = NULL;
    ts_coll_proto got = TS_PROTO_NONE;
    if (cand[i] == TS_ALGO_NCCL_TREE && one_node)
      continue;
    double model = 0.0;
    double v = one_time(t, kind, cand[i], proto, g, count, bytes, &got, &model, &local);
    if (v < 0.0) {
      g_string_append_printf(why, "%s%s", why->len > 0 ? "; " : "", local->message);
      continue;
    }
    if (by_model && ts_coll_algo_is_nccl(cand[i])) {
      if (model > 0.0 && model < best_model) {
        best_model = model;
        best = v;
        best_algo = cand[i];
        best_proto = got;
      }
      continue;
    }
    /* Ties keep the earlier candidate, so the choice is deterministic. */
    if (best < 0.0 || v < best) {
      best = v;
      best_algo = cand[i];
      best_proto = got;
    }
  }
  if (best < 0.0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID, "%s over %d members: no algorithm applies (%s)",
                ts_coll_kind_name(kind), ts_group_size(g), why->str);
    return -1.0;
  }
  if (chosen != NULL)
    *chosen = best_algo;
  if (chosen_proto != NULL)
    *chosen_proto = best_proto;
  return best;
}
