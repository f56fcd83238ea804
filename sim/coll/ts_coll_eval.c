/* ts_coll_eval: the analytic (alpha-beta with link loads) time of one step of concurrent flows. */
#include "ts_coll_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Model (Thakur, Rabenseifner & Gropp 2005, cost model: a message costs alpha + n*beta;
 * cut-through routing: the latency of every hop adds, the bandwidth is that of the slowest
 * link). A flow's time is the latency of its dimension-order route plus the largest load on
 * any link it crosses divided by that link's bandwidth, where a link's load is the bytes of
 * every flow of the step crossing it. With one flow per link this is alpha_route + bytes/bw;
 * with k equal flows on a switch port it is alpha + k*bytes/bw, the fair share of the port.
 *
 * Work is O(flows * dims + touched lines): a route is one interval per dimension on one
 * physical line, and loads are summed with difference arrays per line rather than link by
 * link, so long routes (halving-doubling across a 1024-ring) cost no more than short ones.
 */

typedef struct {
  int dim;
  int base; /* chip of coordinate 0 on this line */
  int n;
  gsize off;    /* loads: [off, off+n+1) plus / up ports, [off+n+1, off+2n+2) minus / down */
  gssize sp[2]; /* offset of the sparse table of each array in ev->sparse, -1 until built */
  int need[2];  /* levels its sparse table needs: 1 + log2 of the longest interval asked */
  guint hslot;
} ev_line;

typedef struct {
  int line;
  int arr;  /* 0: plus direction or switch up port; 1: minus direction or down port */
  int a, h; /* covers coordinates a, a+1, ..., a+h-1 (mod n) of that array */
  double w; /* fraction of the flow's bytes this segment carries (in-switch shares), 1 else */
} ev_seg;

typedef struct {
  int first, nseg;
  double lat;
  double bytes;
} ev_flow;

/* A breadth-first tree of routes on a twisted torus (see ts_route). */
typedef struct {
  int *prev; /* chip -> previous chip on the route from the root, -1 unreachable */
  signed char *dim, *dir;
  int *runs; /* chip -> offset in runs_pool of its route's runs, -1 until asked */
} tw_tree;

struct ts_eval {
  ts_net nw;
  /* Plain arrays with capacities: this is the inner loop of every ts_coll_time call. */
  ev_seg *segs;
  int nsegs, capsegs;
  ev_flow *flows;
  int nflows, capflows;
  GArray *lines;  /* ev_line */
  GArray *loads;  /* double */
  GArray *sparse; /* double */
  gint64 *hkey;   /* open-addressing map (dim, base) -> line index */
  int *hval;
  guint hcap;
  gint64 last_key; /* the line of the previous lookup: consecutive segments usually share it */
  int last_line;
  /* Twisted tori: breadth-first trees (as ts_route's), built on first use. With translate, one
   * tree from chip 0 serves every source (the array is a group and routes are its translates);
   * otherwise one tree per source. */
  gboolean translate;
  tw_tree *trees;
  GArray *runs_pool; /* int: a count k, then k runs (move << 16 | links), move = dim * 2 + minus */
  int *path;         /* scratch: one route's links as dim * 2 + (dir < 0), nchips entries */
  /* Remembered routes (ts_eval_route_cache_begin): a lookup key's flow ends, a hit's lines. */
  int *ends;
  int capends;
  GArray *hit_lines; /* ev_line */
};

ts_eval *ts_eval_new(const ts_net *nw)
{
  ts_eval *ev = g_new0(ts_eval, 1);
  ev->nw = *nw;
  ev->lines = g_array_new(FALSE, FALSE, sizeof(ev_line));
  ev->loads = g_array_new(FALSE, FALSE, sizeof(double));
  ev->sparse = g_array_new(FALSE, FALSE, sizeof(double));
  ev->hit_lines = g_array_new(FALSE, FALSE, sizeof(ev_line));
  ev->hcap = 64;
  ev->hkey = g_new(gint64, ev->hcap);
  ev->hval = g_new(int, ev->hcap);
  for (guint i = 0; i < ev->hcap; i++)
    ev->hkey[i] = -1;
  ev->last_key = -1;
  if (nw->twisted) {
    /* Routes translate when every dimension with links is a ring and no wrap-around is twisted
     * along a dimension whose own wrap-around is twisted (then chip arithmetic is a group). */
    ev->translate = TRUE;
    for (int d = 0; d < nw->arr.ndims; d++) {
      if (nw->arr.size[d] > 1 && nw->shape[d] != TS_SHAPE_RING)
        ev->translate = FALSE;
      for (int e = 0; e < nw->arr.ndims; e++)
        if (nw->twist[d][e] != 0)
          for (int f = 0; f < nw->arr.ndims; f++)
            if (nw->twist[e][f] != 0)
              ev->translate = FALSE;
    }
    ev->trees = g_new0(tw_tree, nw->nchips);
    ev->runs_pool = g_array_new(FALSE, FALSE, sizeof(int));
    ev->path = g_new(int, nw->nchips);
  }
  return ev;
}

void ts_eval_free(ts_eval *ev)
{
  if (ev == NULL)
    return;
  g_free(ev->segs);
  g_free(ev->flows);
  g_array_free(ev->lines, TRUE);
  g_array_free(ev->loads, TRUE);
  g_array_free(ev->sparse, TRUE);
  g_array_free(ev->hit_lines, TRUE);
  g_free(ev->ends);
  g_free(ev->hkey);
  g_free(ev->hval);
  if (ev->trees != NULL)
    for (int i = 0; i < ev->nw.nchips; i++) {
      g_free(ev->trees[i].prev);
      g_free(ev->trees[i].dim);
      g_free(ev->trees[i].dir);
      g_free(ev->trees[i].runs);
    }
  if (ev->runs_pool != NULL)
    g_array_free(ev->runs_pool, TRUE);
  g_free(ev->trees);
  g_free(ev->path);
  g_free(ev);
}

static guint hash_key(gint64 k)
{
  guint64 x = (guint64)k * 0x9E3779B97F4A7C15ull;
  return (guint)(x >> 32);
}

static void hash_grow(ts_eval *ev)
{
  guint cap = ev->hcap * 2;
  gint64 *key = g_new(gint64, cap);
  int *val = g_new(int, cap);
  for (guint i = 0; i < cap; i++)
    key[i] = -1;
  for (guint i = 0; i < ev->lines->len; i++) {
    ev_line *ln = &g_array_index(ev->lines, ev_line, i);
    gint64 k = (gint64)ln->dim * ev->nw.nchips + ln->base;
    guint h = hash_key(k) & (cap - 1);
    while (key[h] != -1)
      h = (h + 1) & (cap - 1);
    key[h] = k;
    val[h] = (int)i;
    ln->hslot = h;
  }
  g_free(ev->hkey);
  g_free(ev->hval);
  ev->hkey = key;
  ev->hval = val;
  ev->hcap = cap;
}

static int line_index(ts_eval *ev, int dim, int base)
{
  gint64 k = (gint64)dim * ev->nw.nchips + base;
  if (k == ev->last_key)
    return ev->last_line;
  guint mask = ev->hcap - 1;
  guint h = hash_key(k) & mask;
  int idx = -1;
  while (ev->hkey[h] != -1) {
    if (ev->hkey[h] == k) {
      idx = ev->hval[h];
      break;
    }
    h = (h + 1) & mask;
  }
  if (idx < 0) {
    ev_line ln = {.dim = dim,
                  .base = base,
                  .n = ev->nw.arr.size[dim],
                  .sp = {-1, -1},
                  .need = {0, 0},
                  .hslot = h};
    ln.off = ev->loads->len;
    g_array_set_size(ev->loads, ev->loads->len + 2 * (guint)(ln.n + 1));
    idx = (int)ev->lines->len;
    g_array_append_val(ev->lines, ln);
    ev->hkey[h] = k;
    ev->hval[h] = idx;
    if (ev->lines->len * 2 > ev->hcap)
      hash_grow(ev);
  }
  ev->last_key = k;
  ev->last_line = idx;
  return idx;
}

static void reset(ts_eval *ev, int nf)
{
  for (guint i = 0; i < ev->lines->len; i++)
    ev->hkey[g_array_index(ev->lines, ev_line, i).hslot] = -1;
  ev->last_key = -1;
  ev->nsegs = 0;
  ev->nflows = 0;
  g_array_set_size(ev->lines, 0);
  g_array_set_size(ev->loads, 0);
  g_array_set_size(ev->sparse, 0);
  /* At most two segments (switch up and down ports) per dimension per flow. */
  int needsegs = nf * 2 * MAX(ev->nw.arr.ndims, 1);
  if (needsegs > ev->capsegs) {
    ev->capsegs = MAX(needsegs, 2 * ev->capsegs);
    ev->segs = g_renew(ev_seg, ev->segs, ev->capsegs);
  }
  if (nf > ev->capflows) {
    ev->capflows = MAX(nf, 2 * ev->capflows);
    ev->flows = g_renew(ev_flow, ev->flows, ev->capflows);
  }
}

static inline void add_seg(ts_eval *ev, int dim, int base, int arr, int a, int h)
{
  ev_seg *s = &ev->segs[ev->nsegs++];
  s->line = line_index(ev, dim, base);
  s->arr = arr;
  s->a = a;
  s->h = h;
  s->w = 1.0;
}

/* ---- twisted tori: the routes of ts_route (breadth-first, dimension order, + before -) ---- */

static int imod_net(int a, int n)
{
  return ((a % n) + n) % n;
}

/* The chip one link away along ring or mesh dimension d in direction dir (ts_topo_neighbor). */
static int net_neighbor(const ts_net *nw, int chip, int d, int dir)
{
  int n = nw->arr.size[d], c = ts_array_coord(&nw->arr, chip, d), v = c + dir;
  if (v >= 0 && v < n)
    return chip + dir * nw->stride[d];
  if (nw->shape[d] != TS_SHAPE_RING)
    return -1;
  int out = chip + (imod_net(v, n) - c) * nw->stride[d];
  for (int e = 0; e < nw->arr.ndims; e++)
    if (nw->twist[d][e] != 0) {
      int ce = ts_array_coord(&nw->arr, out, e);
      out += (imod_net(ce + dir * nw->twist[d][e], nw->arr.size[e]) - ce) * nw->stride[e];
    }
  return out;
}

static tw_tree *tw_tree_from(ts_eval *ev, int root)
{
  tw_tree *t = &ev->trees[root];
  if (t->prev != NULL)
    return t;
  const ts_net *nw = &ev->nw;
  int n = nw->nchips;
  t->prev = g_new(int, n);
  t->dim = g_new0(signed char, n);
  t->dir = g_new0(signed char, n);
  t->runs = g_new(int, n);
  for (int i = 0; i < n; i++) {
    t->prev[i] = -1;
    t->runs[i] = -1;
  }
  int *queue = ev->path, head = 0, tail = 0;
  queue[tail++] = root;
  t->prev[root] = root;
  while (head < tail) {
    int c = queue[head++];
    for (int d = 0; d < nw->arr.ndims; d++)
      for (int dir = 1; dir >= -1; dir -= 2) {
        if (nw->arr.size[d] < 2 || nw->shape[d] == TS_SHAPE_SWITCH)
          continue;
        int m = net_neighbor(nw, c, d, dir);
        if (m < 0 || t->prev[m] >= 0)
          continue;
        t->prev[m] = c;
        t->dim[m] = (signed char)d;
        t->dir[m] = (signed char)dir;
        queue[tail++] = m;
      }
  }
  return t;
}

/* dst - src in the array's group (translate only): coordinates subtracted, a twisted
 * dimension's carries moved along the dimensions its wrap-around is twisted by. */
static int net_sub(const ts_net *nw, int dst, int src)
{
  int a[TS_MAX_DIMS];
  for (int d = 0; d < nw->arr.ndims; d++)
    a[d] = ts_array_coord(&nw->arr, dst, d) - ts_array_coord(&nw->arr, src, d);
  for (int d = 0; d < nw->arr.ndims; d++) {
    int n = nw->arr.size[d], q = a[d] >= 0 ? a[d] / n : -((-a[d] + n - 1) / n);
    if (q == 0)
      continue;
    a[d] -= q * n;
    for (int e = 0; e < nw->arr.ndims; e++)
      a[e] += q * nw->twist[d][e];
  }
  int chip = 0;
  for (int d = 0; d < nw->arr.ndims; d++)
    chip += imod_net(a[d], nw->arr.size[d]) * nw->stride[d];
  return chip;
}

static void ensure_segs(ts_eval *ev, int more)
{
  if (ev->nsegs + more > ev->capsegs) {
    ev->capsegs = MAX(ev->nsegs + more, 2 * ev->capsegs);
    ev->segs = g_renew(ev_seg, ev->segs, ev->capsegs);
  }
}

/* A flow on a twisted torus: its breadth-first route, one segment per run of links along one
 * line in one direction (a run ends where a twisted wrap-around leaves the line). */
static void route_flow_twisted(ts_eval *ev, const ts_flow *f, ev_flow *fl)
{
  const ts_net *nw = &ev->nw;
  if (f->src == f->dst)
    return;
  int root = ev->translate ? 0 : f->src;
  int target = ev->translate ? net_sub(nw, f->dst, f->src) : f->dst;
  tw_tree *t = tw_tree_from(ev, root);
  if (t->prev[target] < 0)
    return; /* not reachable over ring and mesh links (a switch dimension): no link loaded */
  if (t->runs[target] < 0) {
    int len = 0;
    for (int c = target; c != root; c = t->prev[c])
      ev->path[len++] = t->dim[c] * 2 + (t->dir[c] < 0);
    guint at = ev->runs_pool->len;
    int zero = 0;
    g_array_append_val(ev->runs_pool, zero);
    for (int k = len - 1; k >= 0;) {
      int mv = ev->path[k], h = 0;
      while (k >= 0 && ev->path[k] == mv) {
        h++;
        k--;
      }
      int run = mv << 16 | h;
      g_array_append_val(ev->runs_pool, run);
      g_array_index(ev->runs_pool, int, at)++;
    }
    t->runs[target] = (int)at;
  }
  const int *runs = &g_array_index(ev->runs_pool, int, t->runs[target]);
  int cur = f->src, nruns = runs[0];
  for (int r = 1; r <= nruns; r++) {
    int mv = runs[r] >> 16, h = runs[r] & 0xffff;
    int d = mv / 2, dir = mv % 2 ? -1 : 1, n = nw->arr.size[d];
    ensure_segs(ev, h);
    gboolean tw = FALSE;
    for (int e = 0; e < nw->arr.ndims; e++)
      tw = tw || nw->twist[d][e] != 0;
    while (h > 0) {
      int cd = ts_array_coord(&nw->arr, cur, d);
      /* On a twisted dimension the run stops at the wrap-around link (included). */
      int len_seg = !tw ? h : dir > 0 ? MIN(h, n - cd) : MIN(h, cd + 1);
      int base = cur - cd * nw->stride[d];
      add_seg(ev, d, base, dir<0, dir> 0 ? cd : imod_net(cd - len_seg + 1, n), len_seg);
      fl->lat += len_seg * nw->lat_s[d];
      int v = cd + dir * len_seg;
      if (v >= 0 && v < n) {
        cur += dir * len_seg * nw->stride[d];
      } else {
        cur = base + imod_net(v, n) * nw->stride[d];
        for (int e = 0; e < nw->arr.ndims; e++)
          if (nw->twist[d][e] != 0) {
            int ce = ts_array_coord(&nw->arr, cur, e);
            cur += (imod_net(ce + dir * nw->twist[d][e], nw->arr.size[e]) - ce) * nw->stride[e];
          }
      }
      h -= len_seg;
    }
  }
}

guint ts_net_line_local(const ts_net *nw)
{
  if (!nw->twisted)
    return 0;
  ts_eval *ev = ts_eval_new(nw);
  guint local = 0;
  for (int d = 0; d < nw->arr.ndims; d++) {
    gboolean ok = nw->shape[d] != TS_SHAPE_SWITCH;
    int n = nw->arr.size[d];
    /* Lines through chip 0 represent all (translates) when routes translate; else check the
     * line through chip 0 only when it is the only line along d. */
    if (!ev->translate && n != nw->nchips)
      ok = FALSE;
    for (int a = 0; a < n && ok; a++)
      for (int b = 0; b < n && ok; b++) {
        if (a == b)
          continue;
        ev_flow fl = {0};
        ts_flow f = {.src = a * nw->stride[d], .dst = b * nw->stride[d], .bytes = 0.0};
        ev->nsegs = 0;
        route_flow_twisted(ev, &f, &fl);
        if (ev->nsegs == 0)
          ok = FALSE;
        for (int s = 0; s < ev->nsegs && ok; s++) {
          const ev_line *ln = &g_array_index(ev->lines, ev_line, ev->segs[s].line);
          ok = ln->dim == d && ln->base == 0;
        }
      }
    if (ok)
      local |= 1u << d;
  }
  ts_eval_free(ev);
  return local;
}

/* Splits a flow's dimension-order route into one interval per dimension (see ts_route). */
static void route_flow(ts_eval *ev, const ts_flow *f)
{
  const ts_net *nw = &ev->nw;
  ev_flow *fl = &ev->flows[ev->nflows++];
  fl->first = ev->nsegs;
  fl->lat = 0.0;
  fl->bytes = f->bytes;
  if (nw->twisted) {
    route_flow_twisted(ev, f, fl);
    fl->nseg = ev->nsegs - fl->first;
    return;
  }
  int cur = f->src, rs = f->src, rd = f->dst;
  for (int d = 0; d < nw->arr.ndims; d++) {
    int n = nw->arr.size[d];
    int cs = rs % n, cd = rd % n;
    rs /= n;
    rd /= n;
    if (cs == cd)
      continue;
    int base = cur - cs * nw->stride[d];
    switch (nw->shape[d]) {
    case TS_SHAPE_RING: {
      int fwd = cd - cs < 0 ? cd - cs + n : cd - cs;
      if (fwd <= n - fwd) {
        add_seg(ev, d, base, 0, cs, fwd);
        fl->lat += fwd * nw->lat_s[d];
      } else {
        /* Backward from cs to cd uses the minus links leaving cd+1, ..., cs. */
        add_seg(ev, d, base, 1, cd + 1 == n ? 0 : cd + 1, n - fwd);
        fl->lat += (n - fwd) * nw->lat_s[d];
      }
      break;
    }
    case TS_SHAPE_MESH:
      if (cd > cs)
        add_seg(ev, d, base, 0, cs, cd - cs);
      else
        add_seg(ev, d, base, 1, cd + 1, cs - cd);
      fl->lat += abs(cd - cs) * nw->lat_s[d];
      break;
    case TS_SHAPE_SWITCH: {
      /* A shared port (NIC) is one line for the chips that share it. */
      int pb = ts_net_port_chip(nw, d, base);
      add_seg(ev, d, pb, 0, cs, 1);
      if (f->up_share > 1)
        ev->segs[ev->nsegs - 1].w = 1.0 / f->up_share;
      add_seg(ev, d, pb, 1, cd, 1);
      if (f->down_share > 1)
        ev->segs[ev->nsegs - 1].w = 1.0 / f->down_share;
      fl->lat += nw->lat_s[d];
      break;
    }
    }
    cur += (cd - cs) * nw->stride[d];
  }
  fl->nseg = ev->nsegs - fl->first;
}

static double *arr_ptr(ts_eval *ev, const ev_line *ln, int arr)
{
  return &g_array_index(ev->loads, double, ln->off + (gsize)arr * (gsize)(ln->n + 1));
}

/* Sparse table of range maxima over one load array, built the first time a long interval
 * asks (short intervals are scanned directly), with only the levels the step's longest
 * interval on this array needs. */
static const double *sparse_table(ts_eval *ev, ev_line *ln, int arr)
{
  int n = ln->n, lv = ln->need[arr];
  if (ln->sp[arr] < 0) {
    gsize off = ev->sparse->len;
    g_array_set_size(ev->sparse, off + (gsize)lv * (gsize)n);
    double *tab = &g_array_index(ev->sparse, double, off);
    memcpy(tab, arr_ptr(ev, ln, arr), sizeof(double) * (gsize)n);
    for (int k = 1; k < lv; k++) {
      double *prev = tab + (gsize)(k - 1) * (gsize)n, *cur = tab + (gsize)k * (gsize)n;
      int half = 1 << (k - 1);
      for (int i = 0; i + (1 << k) <= n; i++)
        cur[i] = MAX(prev[i], prev[i + half]);
    }
    ln->sp[arr] = (gssize)off;
  }
  return &g_array_index(ev->sparse, double, (gsize)ln->sp[arr]);
}

#define SCAN_MAX 32 /* intervals up to this many links are scanned, longer ones use the table */

static int level_of(int h)
{
  int k = 0;
  while ((2 << k) <= h)
    k++;
  return k;
}

/* Maximum load over coordinates [a, a+h) of one array, no wrap. */
static double range_max(ts_eval *ev, ev_line *ln, int arr, int a, int h)
{
  if (h <= SCAN_MAX) {
    const double *v = arr_ptr(ev, ln, arr);
    double m = v[a];
    for (int i = a + 1; i < a + h; i++)
      m = MAX(m, v[i]);
    return m;
  }
  const double *tab = sparse_table(ev, ln, arr);
  int k = level_of(h);
  const double *row = tab + (gsize)k * (gsize)ln->n;
  return MAX(row[a], row[a + h - (1 << k)]);
}

/* ---- routes remembered across steps (see ts_eval_route_cache_begin) ---- */

/* A step's routes: everything ts_eval_step derives from its flows' ends and shares, not from
 * their bytes. */
#define ROUTES_MAX_UNIFORM 16

typedef struct {
  guint hash;
  int nf, nsegs, nlines;
  gsize nloads;
  int *ends;      /* nf * 4: src, dst, up_share, down_share */
  ev_flow *flows; /* bytes unset */
  ev_seg *segs;
  ev_line *lines; /* need[] set, sp[] -1 */
  /* the routing parts of the net */
  int ndims, size[TS_MAX_DIMS], stride[TS_MAX_DIMS], port_share[TS_MAX_DIMS];
  ts_shape shape[TS_MAX_DIMS];
  double lat_s[TS_MAX_DIMS], bw_Bps[TS_MAX_DIMS];
  /* Times of this step when every flow carried the same bytes: (bytes, seconds) pairs. */
  double uni[2 * ROUTES_MAX_UNIFORM];
  int nuni;
} route_entry;

static GHashTable *g_routes; /* route_entry (owned) -> itself */
static int g_routes_depth;
static gsize g_routes_flows; /* flows remembered, bounded by ROUTES_MAX_FLOWS */
#define ROUTES_MAX_FLOWS ((gsize)1 << 20)

static guint route_hash(gconstpointer p)
{
  return ((const route_entry *)p)->hash;
}

static gboolean route_equal(gconstpointer x, gconstpointer y)
{
  const route_entry *a = x, *b = y;
  if (a->hash != b->hash || a->nf != b->nf || a->ndims != b->ndims)
    return FALSE;
  for (int d = 0; d < a->ndims; d++)
    if (a->size[d] != b->size[d] || a->stride[d] != b->stride[d] ||
        a->port_share[d] != b->port_share[d] || a->shape[d] != b->shape[d] ||
        memcmp(&a->lat_s[d], &b->lat_s[d], sizeof(double)) != 0 ||
        memcmp(&a->bw_Bps[d], &b->bw_Bps[d], sizeof(double)) != 0)
      return FALSE;
  return memcmp(a->ends, b->ends, sizeof(int) * 4 * (gsize)a->nf) == 0;
}

static void route_free(gpointer p)
{
  route_entry *e = p;
  g_free(e->ends);
  g_free(e->flows);
  g_free(e->segs);
  g_free(e->lines);
  g_free(e);
}

void ts_eval_route_cache_begin(void)
{
  if (g_routes_depth++ == 0) {
    g_routes = g_hash_table_new_full(route_hash, route_equal, route_free, NULL);
    g_routes_flows = 0;
  }
}

void ts_eval_route_cache_end(void)
{
  g_return_if_fail(g_routes_depth > 0);
  if (--g_routes_depth == 0)
    g_clear_pointer(&g_routes, g_hash_table_unref);
}

/* Fills a lookup key (ends borrowed from the caller's scratch). */
static void route_key(route_entry *k, const ts_net *nw, const ts_flow *f, int nf, int *ends)
{
  memset(k, 0, sizeof *k);
  k->nf = nf;
  k->ndims = nw->arr.ndims;
  guint64 h = 0x243F6A8885A308D3u ^ (guint64)(guint)nf;
  for (int d = 0; d < k->ndims; d++) {
    k->size[d] = nw->arr.size[d];
    k->stride[d] = nw->stride[d];
    k->port_share[d] = nw->port_share[d];
    k->shape[d] = nw->shape[d];
    k->lat_s[d] = nw->lat_s[d];
    k->bw_Bps[d] = nw->bw_Bps[d];
    guint64 lb, bb;
    memcpy(&lb, &nw->lat_s[d], sizeof lb);
    memcpy(&bb, &nw->bw_Bps[d], sizeof bb);
    h = (h ^ bb) * 0x9E3779B97F4A7C15u;
    h = (h ^ ((guint64)(guint)k->size[d] << 32 ^ (guint64)(guint)k->stride[d])) *
        0x9E3779B97F4A7C15u;
    h = (h ^ lb ^ (guint64)(guint)k->port_share[d] << 8 ^ (guint64)k->shape[d]) *
        0x9E3779B97F4A7C15u;
  }
  for (int i = 0; i < nf; i++) {
    int *e = ends + 4 * (gsize)i;
    e[0] = f[i].src;
    e[1] = f[i].dst;
    e[2] = f[i].up_share;
    e[3] = f[i].down_share;
    h = (h ^ ((guint64)(guint)e[0] << 32 ^ (guint64)(guint)e[1])) * 0x9E3779B97F4A7C15u;
    if ((e[2] | e[3]) != 0)
      h = (h ^ ((guint64)(guint)e[2] << 32 ^ (guint64)(guint)e[3])) * 0x9E3779B97F4A7C15u;
    h ^= h >> 31;
  }
  k->hash = (guint)(h ^ (h >> 32));
  k->ends = ends;
}

/* Routes the flows into ev (segments, flows, lines with the levels their sparse tables need). */
static void route_step(ts_eval *ev, const ts_flow *f, int nf)
{
  reset(ev, nf);
  for (int i = 0; i < nf; i++)
    route_flow(ev, &f[i]);
  /* Levels each long-interval array needs (a wrapped interval is two shorter queries). */
  for (int s = 0; s < ev->nsegs; s++) {
    const ev_seg *sg = &ev->segs[s];
    if (sg->h > SCAN_MAX) {
      ev_line *ln = &g_array_index(ev->lines, ev_line, sg->line);
      ln->need[sg->arr] = MAX(ln->need[sg->arr], level_of(MIN(sg->h, ln->n)) + 1);
    }
  }
}

static double eval_loads(ts_eval *ev, ev_line *lines, int nlines, const ev_seg *segs,
                         const ev_flow *flows, const ts_flow *f, int nf);

double ts_eval_step(ts_eval *ev, const ts_flow *f, int nf)
{
  if (g_routes == NULL || ev->nw.twisted || nf <= 0) {
    route_step(ev, f, nf);
    return eval_loads(ev, (ev_line *)(void *)ev->lines->data, (int)ev->lines->len, ev->segs,
                      ev->flows, f, nf);
  }
  if (nf > ev->capends) {
    ev->capends = MAX(nf, 2 * ev->capends);
    ev->ends = g_renew(int, ev->ends, 4 * (gsize)ev->capends);
  }
  route_entry key;
  route_key(&key, &ev->nw, f, nf, ev->ends);
  route_entry *e = g_hash_table_lookup(g_routes, &key);
  /* A step whose flows all carry the same bytes, asked before: its time. */
  gboolean uniform = TRUE;
  for (int i = 1; i < nf && uniform; i++)
    uniform = memcmp(&f[i].bytes, &f[0].bytes, sizeof(double)) == 0;
  if (e != NULL && uniform)
    for (int u = 0; u < e->nuni; u++)
      if (memcmp(&e->uni[2 * u], &f[0].bytes, sizeof(double)) == 0)
        return e->uni[2 * u + 1];
  double v;
  if (e == NULL) {
    route_step(ev, f, nf);
    if (g_routes_flows + (gsize)nf <= ROUTES_MAX_FLOWS) {
      route_entry *ne = g_memdup2(&key, sizeof key);
      ne->ends = g_memdup2(ev->ends, sizeof(int) * 4 * (gsize)nf);
      ne->flows = g_memdup2(ev->flows, sizeof(ev_flow) * (gsize)nf);
      ne->nsegs = ev->nsegs;
      ne->segs = g_memdup2(ev->segs, sizeof(ev_seg) * (gsize)MAX(ev->nsegs, 1));
      ne->nlines = (int)ev->lines->len;
      ne->lines = g_memdup2(ev->lines->data, sizeof(ev_line) * (gsize)MAX(ne->nlines, 1));
      ne->nloads = ev->loads->len;
      g_hash_table_add(g_routes, ne);
      g_routes_flows += (gsize)nf;
      e = ne;
    }
    v = eval_loads(ev, (ev_line *)(void *)ev->lines->data, (int)ev->lines->len, ev->segs, ev->flows,
                   f, nf);
  } else {
    /* The remembered routes, on this evaluator's scratch: a copy of the lines (their sparse
     * tables are this step's), the loads sized as routing them would have. */
    g_array_set_size(ev->hit_lines, (guint)e->nlines);
    memcpy(ev->hit_lines->data, e->lines, sizeof(ev_line) * (gsize)e->nlines);
    g_array_set_size(ev->loads, (guint)e->nloads);
    g_array_set_size(ev->sparse, 0);
    v = eval_loads(ev, (ev_line *)(void *)ev->hit_lines->data, e->nlines, e->segs, e->flows, f, nf);
  }
  if (e != NULL && uniform && e->nuni < ROUTES_MAX_UNIFORM) {
    e->uni[2 * e->nuni] = f[0].bytes;
    e->uni[2 * e->nuni + 1] = v;
    e->nuni++;
  }
  return v;
}

/* The step's time from its routes: link loads from the flows' bytes, then each flow's worst. */
static double eval_loads(ts_eval *ev, ev_line *lines, int nlines, const ev_seg *segs,
                         const ev_flow *flows, const ts_flow *f, int nf)
{
  /* Difference arrays: +bytes where an interval starts, -bytes after it ends. */
  if (ev->loads->len > 0)
    memset(ev->loads->data, 0, sizeof(double) * ev->loads->len);
  double *loads = (double *)(void *)ev->loads->data;
  for (int i = 0; i < nf; i++) {
    const ev_flow *fl = &flows[i];
    for (int s = fl->first; s < fl->first + fl->nseg; s++) {
      const ev_seg *sg = &segs[s];
      const ev_line *ln = &lines[sg->line];
      double *v = loads + ln->off + (gsize)sg->arr * (gsize)(ln->n + 1);
      int end = sg->a + sg->h;
      double b = f[i].bytes * sg->w;
      v[sg->a] += b;
      if (end <= ln->n) {
        v[end] -= b;
      } else {
        v[ln->n] -= b;
        v[0] += b;
        v[end - ln->n] -= b;
      }
    }
  }
  for (int l = 0; l < nlines; l++) {
    const ev_line *ln = &lines[l];
    for (int arr = 0; arr < 2; arr++) {
      double *v = loads + ln->off + (gsize)arr * (gsize)(ln->n + 1);
      for (int i = 1; i < ln->n; i++)
        v[i] += v[i - 1];
    }
  }
  double worst = 0.0;
  for (int i = 0; i < nf; i++) {
    const ev_flow *fl = &flows[i];
    double bott = 0.0;
    for (int s = fl->first; s < fl->first + fl->nseg; s++) {
      const ev_seg *sg = &segs[s];
      ev_line *ln = &lines[sg->line];
      int end = sg->a + sg->h;
      double m;
      if (sg->h == 1)
        m = loads[ln->off + (gsize)sg->arr * (gsize)(ln->n + 1) + (gsize)sg->a];
      else if (end <= ln->n)
        m = range_max(ev, ln, sg->arr, sg->a, sg->h);
      else
        m = MAX(range_max(ev, ln, sg->arr, sg->a, ln->n - sg->a),
                range_max(ev, ln, sg->arr, 0, end - ln->n));
      bott = MAX(bott, m / ev->nw.bw_Bps[ln->dim]);
    }
    worst = MAX(worst, fl->lat + bott);
  }
  return worst;
}

double ts_eval_step_reference(const ts_topo *t, const ts_flow *f, int nf)
{
  g_autoptr(GHashTable) load = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  g_autoptr(GPtrArray) routes = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  for (int i = 0; i < nf; i++) {
    GArray *r = g_array_new(FALSE, FALSE, sizeof(ts_link_id));
    ts_route(t, f[i].src, f[i].dst, r);
    for (guint k = 0; k < r->len; k++) {
      ts_link_id l = g_array_index(r, ts_link_id, k);
      gint64 key = ((gint64)l.chip * TS_MAX_DIMS + l.dim) * 2 + (l.dir < 0);
      double *v = g_hash_table_lookup(load, &key);
      if (v == NULL) {
        gint64 *kp = g_new(gint64, 1);
        *kp = key;
        v = g_new0(double, 1);
        g_hash_table_insert(load, kp, v);
      }
      int share = t->dims[l.dim].shape != TS_SHAPE_SWITCH ? 1
                  : l.dir > 0                             ? f[i].up_share
                                                          : f[i].down_share;
      *v += f[i].bytes / (share > 1 ? share : 1);
    }
    g_ptr_array_add(routes, r);
  }
  double worst = 0.0;
  for (int i = 0; i < nf; i++) {
    GArray *r = g_ptr_array_index(routes, i);
    double lat = 0.0, bott = 0.0;
    for (guint k = 0; k < r->len; k++) {
      ts_link_id l = g_array_index(r, ts_link_id, k);
      gint64 key = ((gint64)l.chip * TS_MAX_DIMS + l.dim) * 2 + (l.dir < 0);
      const double *v = g_hash_table_lookup(load, &key);
      bott = MAX(bott, *v / t->dims[l.dim].link_bw_Bps);
      /* A switch traversal is two ports (up, down) but one latency. */
      if (t->dims[l.dim].shape != TS_SHAPE_SWITCH || l.dir > 0)
        lat += t->dims[l.dim].latency_s;
    }
    worst = MAX(worst, lat + bott);
  }
  return worst;
}
