/* ts_platform: topology -> SimGrid platform (XML for SimGrid's tools, or built in-process for
 * the simgrid backend), with routes taken from ts_route so both backends use the same paths. */
#include "ts_platform.h"
#include "ts_degrade.h"
#include "ts_sg_shim.h"
#include "ts_util.h"

#include <math.h>
#include <string.h>

typedef struct {
  ts_link_id id;
  char *name;
  double bw_Bps, lat_s;
} plink;

struct ts_platform {
  const ts_topo *topo; /* links' shapes, bandwidths and latencies; routes (ts_route) */
  ts_array arr;        /* the array's geometry (ts_topo_array): sizes, strides, coordinates */
  int nchips;          /* ts_array_nchips(&arr) */
  ts_platform_opts opts;
  int *slot;     /* (chip * ndims + dim) * 2 + (dir > 0 ? 0 : 1) -> link index, or -1 */
  GArray *links; /* plink */
  int max_route;
  GArray *scratch;  /* ts_link_id, for ts_route */
  GArray *zone_buf; /* int, routes asked by SimGrid */
  sg_host_t *hosts;
  const int *fold; /* ts_platform_set_fold: link -> the link SimGrid uses for it, or NULL */
  /* Routes asked before (direct-mapped on the chip pair; routes of up to ROUTE_CACHE_LINKS
   * links): a replay asks the same neighbour routes millions of times, twice per flow (the
   * backend's accounting and SimGrid's zone), and ts_route plus the detour check cost a tenth
   * of a folded GPT-3 replay. A route is a function of the pair and the platform's own copy of
   * the topology, so a hit is the route ts_route would give. */
  gint64 *rc_key; /* src * nchips + dst + 1, or 0 (empty) */
  int *rc_len;
  int *rc_links; /* ROUTE_CACHE_SLOTS x ROUTE_CACHE_LINKS */
};

#define ROUTE_CACHE_SLOTS 16384
#define ROUTE_CACHE_LINKS 16

static int slot_of(const ts_array *a, int chip, int dim, int dir)
{
  return (chip * a->ndims + dim) * 2 + (dir > 0 ? 0 : 1);
}

/* Shortest decimal form that reads back exactly ("1e-06", not "9.9999999999999995e-07"), so
 * the XML is readable and still exact. */
static void append_num(GString *s, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  for (int prec = 1; prec <= 17; prec++) {
    char fmt[8];
    g_snprintf(fmt, sizeof fmt, "%%.%dg", prec);
    g_ascii_formatd(buf, sizeof buf, fmt, v);
    if (g_ascii_strtod(buf, NULL) == v)
      break;
  }
  g_string_append(s, buf);
}

static gboolean check_topo(const ts_topo *t, const ts_platform_opts *o, GError **error)
{
  const char *path = t->path != NULL ? t->path : (t->name != NULL ? t->name : "topology");
  if (t->ndims < 1 || t->ndims > TS_MAX_DIMS || t->nchips < 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: %d dimensions and %d chips: expected 1 to %d dimensions and at least one "
                "chip",
                path, t->ndims, t->nchips, TS_MAX_DIMS);
    return FALSE;
  }
  const ts_array a = ts_topo_array(t); /* ndims checked first: the array holds TS_MAX_DIMS */
  gint64 chips = 1;                    /* not ts_array_nchips: an int product could overflow */
  for (int d = 0; d < a.ndims; d++) {
    const ts_dim *dm = &t->dims[d];
    const char *dn = a.name[d] != NULL ? a.name[d] : "?";
    if (a.size[d] < 1) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [dim.%s] size='%d': expected >= 1", path,
                  dn, a.size[d]);
      return FALSE;
    }
    chips *= a.size[d];
    /* SimGrid divides by bandwidth; a zero or infinite one would stall or skip a flow. */
    if (!(dm->link_bw_Bps > 0) || !isfinite(dm->link_bw_Bps)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [dim.%s] link_bandwidth_GBps='%g': expected a positive finite bandwidth",
                  path, dn, dm->link_bw_Bps / 1e9);
      return FALSE;
    }
    if (!(dm->latency_s >= 0) || !isfinite(dm->latency_s)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [dim.%s] latency_us='%g': expected a finite latency >= 0", path, dn,
                  dm->latency_s * 1e6);
      return FALSE;
    }
    int k = o->chips_per_port[d];
    if (k > 1 && (d == 0 || dm->shape != TS_SHAPE_SWITCH || a.size[0] % k != 0)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [dim.%s] chips_per_port='%d': expected a switch dimension other than the "
                  "first, and a divisor of the first dimension's size (%d)",
                  path, dn, k, a.size[0]);
      return FALSE;
    }
  }
  if (chips != t->nchips) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: %d chips, but the dimensions multiply to %" G_GINT64_FORMAT, path, t->nchips,
                chips);
    return FALSE;
  }
  return TRUE;
}

static void add_link(ts_platform *p, int chip, int dim, int dir)
{
  const ts_topo *t = p->topo;
  const ts_dim *dm = &t->dims[dim];
  plink l = {{chip, dim, dir}, NULL, dm->link_bw_Bps, dm->latency_s};
  if (dm->shape == TS_SHAPE_SWITCH) {
    l.name = g_strdup_printf("c%d.%s.%s", chip, dm->name, dir > 0 ? "up" : "down");
    /* The switch latency is paid once per traversal: on the way up. */
    if (dir < 0)
      l.lat_s = 0.0;
  } else {
    l.name = g_strdup_printf("c%d.%s%c", chip, dm->name, dir > 0 ? '+' : '-');
  }
  p->slot[slot_of(&p->arr, chip, dim, dir)] = (int)p->links->len;
  g_array_append_val(p->links, l);
}

/* A route naming a link the array lacks could only surface inside SimGrid's routing callback,
 * where nothing can be reported; check before. Dimension-order routes are concatenations of
 * one-dimension routes, so routes within the lines through chip 0 (every pair up to 64 chips
 * per line, else from a few sources) cover what ts_route does in each dimension. */
static gboolean check_routes(ts_platform *p, GError **error)
{
  const ts_topo *t = p->topo;
  GArray *route = g_array_new(FALSE, FALSE, sizeof(int));
  gboolean ok = TRUE;
  for (int d = 0; d < p->arr.ndims && ok; d++) {
    int n = p->arr.size[d], stride = ts_array_stride(&p->arr, d);
    for (int a = 0; a < n && ok; a++) {
      if (n > 64 && a != 0 && a != 1 && a != n / 2 && a != n - 1)
        continue;
      for (int b = 0; b < n && ok; b++) {
        g_array_set_size(route, 0);
        ok = ts_platform_route(p, a * stride, b * stride, route) && (int)route->len <= p->max_route;
        if (!ok)
          g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                      "%s: [dim.%s]: the route from chip %d to chip %d uses a link the %s line "
                      "does not have (a bug in ts_route)",
                      t->path != NULL ? t->path : t->name, p->arr.name[d], a * stride, b * stride,
                      ts_shape_name(t->dims[d].shape));
      }
    }
  }
  g_array_unref(route);
  return ok;
}

ts_platform *ts_platform_new(const ts_topo *t, const ts_platform_opts *opts, GError **error)
{
  ts_platform_opts o = {{0}};
  if (opts != NULL)
    o = *opts;
  /* The topology's NICs ([dim.X] gpus_per_nic / nics_per_node) unless an option overrides. */
  for (int d = 0; d < t->ndims; d++)
    if (o.chips_per_port[d] == 0 && t->dims[d].chips_per_port > 1)
      o.chips_per_port[d] = t->dims[d].chips_per_port;
  if (!check_topo(t, &o, error))
    return NULL;
  ts_platform *p = g_new0(ts_platform, 1);
  p->topo = t;
  p->arr = ts_topo_array(t);
  p->nchips = ts_array_nchips(&p->arr); /* t->nchips, as check_topo made sure */
  p->opts = o;
  const ts_array *a = &p->arr;
  gsize nslots = (gsize)p->nchips * (gsize)a->ndims * 2;
  p->slot = g_new(int, nslots);
  for (gsize i = 0; i < nslots; i++)
    p->slot[i] = -1;
  p->links = g_array_new(FALSE, FALSE, sizeof(plink));
  p->scratch = g_array_new(FALSE, FALSE, sizeof(ts_link_id));
  p->zone_buf = g_array_new(FALSE, FALSE, sizeof(int));
  p->rc_key = g_new0(gint64, ROUTE_CACHE_SLOTS);
  p->rc_len = g_new0(int, ROUTE_CACHE_SLOTS);
  p->rc_links = g_new(int, (gsize)ROUTE_CACHE_SLOTS *ROUTE_CACHE_LINKS);
  int coords[TS_MAX_DIMS];
  for (int c = 0; c < p->nchips; c++) {
    ts_array_coords(a, c, coords);
    for (int d = 0; d < a->ndims; d++) {
      const ts_dim *dm = &t->dims[d];
      if (a->size[d] < 2)
        continue;
      switch (dm->shape) {
      case TS_SHAPE_RING:
        add_link(p, c, d, +1);
        add_link(p, c, d, -1);
        break;
      case TS_SHAPE_MESH:
        if (coords[d] < a->size[d] - 1)
          add_link(p, c, d, +1);
        if (coords[d] > 0)
          add_link(p, c, d, -1);
        break;
      case TS_SHAPE_SWITCH: {
        int k = o.chips_per_port[d] > 1 ? o.chips_per_port[d] : 1;
        int rep = c - coords[0] % k; /* the port's lowest chip, created first */
        if (rep == c) {
          add_link(p, c, d, +1);
          add_link(p, c, d, -1);
        } else {
          p->slot[slot_of(a, c, d, +1)] = p->slot[slot_of(a, rep, d, +1)];
          p->slot[slot_of(a, c, d, -1)] = p->slot[slot_of(a, rep, d, -1)];
        }
        break;
      }
      }
    }
  }
  /* Dimension order crosses each dimension at most once, the long way round at worst. */
  p->max_route = 2 * a->ndims;
  for (int d = 0; d < a->ndims; d++)
    p->max_route += a->size[d];
  /* A detour adds two hops per dead link, or a lone ring's whole length. */
  for (int d = 0; d < a->ndims && t->faults.ndead > 0; d++)
    p->max_route += 2 * t->faults.ndead + a->size[d];
  if (!check_routes(p, error)) {
    ts_platform_free(p);
    return NULL;
  }
  return p;
}

void ts_platform_free(ts_platform *p)
{
  if (p == NULL)
    return;
  for (guint i = 0; i < p->links->len; i++)
    g_free(g_array_index(p->links, plink, i).name);
  g_array_unref(p->links);
  g_array_unref(p->scratch);
  g_array_unref(p->zone_buf);
  g_free(p->slot);
  g_free(p->hosts);
  g_free(p->rc_key);
  g_free(p->rc_len);
  g_free(p->rc_links);
  g_free(p);
}

const ts_topo *ts_platform_topo(const ts_platform *p)
{
  return p->topo;
}

int ts_platform_nlinks(const ts_platform *p)
{
  return (int)p->links->len;
}

int ts_platform_link_index(const ts_platform *p, const ts_link_id *id)
{
  if (id->chip < 0 || id->chip >= p->nchips || id->dim < 0 || id->dim >= p->arr.ndims ||
      (id->dir != 1 && id->dir != -1))
    return -1;
  return p->slot[slot_of(&p->arr, id->chip, id->dim, id->dir)];
}

const ts_link_id *ts_platform_link_id(const ts_platform *p, int i)
{
  return &g_array_index(p->links, plink, i).id;
}

const char *ts_platform_link_name(const ts_platform *p, int i)
{
  return g_array_index(p->links, plink, i).name;
}

double ts_platform_link_bandwidth(const ts_platform *p, int i)
{
  return g_array_index(p->links, plink, i).bw_Bps;
}

double ts_platform_link_latency(const ts_platform *p, int i)
{
  return g_array_index(p->links, plink, i).lat_s;
}

const char *ts_platform_link_direction(const ts_platform *p, int i)
{
  const plink *l = &g_array_index(p->links, plink, i);
  if (p->topo->dims[l->id.dim].shape == TS_SHAPE_SWITCH)
    return l->id.dir > 0 ? "up" : "down";
  return l->id.dir > 0 ? "+" : "-";
}

int ts_platform_max_route(const ts_platform *p)
{
  return p->max_route;
}

gboolean ts_platform_route(const ts_platform *p, int src, int dst, GArray *out)
{
  gint64 key = (gint64)src * p->nchips + dst + 1;
  guint slot = ((guint)src * 2654435761u ^ (guint)dst * 40503u) % ROUTE_CACHE_SLOTS;
  int *cached = p->rc_links + (gsize)slot * ROUTE_CACHE_LINKS;
  if (p->rc_key[slot] == key) {
    g_array_append_vals(out, cached, (guint)p->rc_len[slot]);
    return TRUE;
  }
  GArray *ids = p->scratch;
  g_array_set_size(ids, 0);
  ts_route(p->topo, src, dst, ids);
  ts_degrade_reroute(p->topo, ids); /* around dead links (issue 14) */
  guint first = out->len;
  for (guint i = 0; i < ids->len; i++) {
    int idx = ts_platform_link_index(p, &g_array_index(ids, ts_link_id, i));
    if (idx < 0)
      return FALSE;
    g_array_append_val(out, idx);
  }
  if (ids->len <= ROUTE_CACHE_LINKS) {
    if (ids->len > 0) /* a chip's route to itself is empty, and out's data may be NULL */
      memcpy(cached, &g_array_index(out, int, first), sizeof(int) * ids->len);
    p->rc_len[slot] = (int)ids->len;
    p->rc_key[slot] = key;
  }
  return TRUE;
}

/* ---- XML ---- */

static const char *const routing_names[] = {"auto", "torus", "full", "dijkstra", "floyd"};

const char *ts_platform_routing_name(ts_platform_routing r)
{
  return r >= 0 && r < TS_PLATFORM_NROUTINGS ? routing_names[r] : "?";
}

int ts_platform_routing_parse(const char *s)
{
  for (int i = 0; i < TS_PLATFORM_NROUTINGS; i++)
    if (s != NULL && strcmp(s, routing_names[i]) == 0)
      return i;
  return -1;
}

static gboolean shared_ports(const ts_platform *p)
{
  for (int d = 0; d < p->arr.ndims; d++)
    if (p->opts.chips_per_port[d] > 1)
      return TRUE;
  return FALSE;
}

gboolean ts_platform_shared_ports(const ts_platform *p)
{
  return shared_ports(p);
}

/* A TORUS cluster has one bandwidth and one latency, wraps every dimension, one port each. */
static gboolean uniform_torus(const ts_platform *p)
{
  const ts_topo *t = p->topo;
  if (ts_topo_twisted(t))
    return FALSE; /* SimGrid's TorusZone wraps straight round */
  for (int d = 0; d < p->arr.ndims; d++)
    if (t->dims[d].shape != TS_SHAPE_RING || t->dims[d].link_bw_Bps != t->dims[0].link_bw_Bps ||
        t->dims[d].latency_s != t->dims[0].latency_s)
      return FALSE;
  return !shared_ports(p);
}

ts_platform_routing ts_platform_auto_routing(const ts_platform *p)
{
  if (uniform_torus(p))
    return TS_PLATFORM_TORUS;
  return p->nchips <= TS_PLATFORM_FULL_MAX_CHIPS ? TS_PLATFORM_FULL : TS_PLATFORM_DIJKSTRA;
}

/* SimGrid's TorusZone picks a direction per dimension from source and target coordinates
 * (TorusZone.cpp, get_local_route): forward when the target is at most n/2 ahead, except from
 * coordinate n/2 to 0 on even rings, which goes backward. Counts the ordered pairs of
 * dimension d for which ts_route's first hop goes the other way. */
static int torus_mismatches(const ts_platform *p, int d)
{
  const ts_topo *t = p->topo;
  int n = p->arr.size[d], stride = ts_array_stride(&p->arr, d), bad = 0;
  GArray *ids = g_array_new(FALSE, FALSE, sizeof(ts_link_id));
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      if (a == b)
        continue;
      gboolean fwd = (b > a && b <= a + n / 2) || (a > n / 2 && (a + n / 2) % n >= b);
      g_array_set_size(ids, 0);
      ts_route(t, a * stride, b * stride, ids);
      if (ids->len == 0 || (g_array_index(ids, ts_link_id, 0).dir > 0) != fwd)
        bad++;
    }
  g_array_unref(ids);
  return bad;
}

static void append_comment_text(GString *s, const char *text)
{
  /* "--" may not appear inside an XML comment. */
  for (const char *c = text; *c != '\0'; c++) {
    g_string_append_c(s, *c);
    if (c[0] == '-' && c[1] == '-')
      g_string_append_c(s, ' ');
  }
}

/* An attribute value: the five XML special characters escaped (names come from topology
 * files: a dimension may be called anything). */
static void append_attr(GString *s, const char *text)
{
  g_autofree char *e = g_markup_escape_text(text, -1);
  g_string_append(s, e);
}

static void xml_header(GString *s, const ts_platform *p, ts_platform_routing r)
{
  const ts_topo *t = p->topo;
  g_autofree char *desc = ts_topo_describe(t);
  g_string_append(s, "<?xml version='1.0'?>\n"
                     "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n<!--\n  ");
  append_comment_text(s, desc);
  g_string_append(s, "\n  Written by trainsim " TS_VERSION " (`trainsim platform`) from ");
  append_comment_text(s, t->path != NULL ? t->path : "a topology built in memory");
  g_string_append_printf(s, ", routing %s.\n", routing_names[r]);
  /* The options' "--" may not appear in a comment: they go through the same filter (XML 1.0
   * section 2.5; the comment used to make every written platform ill-formed). */
  append_comment_text(
      s, "  Host c<k> is chip k (chip id = sum of coordinate x stride, first dimension fastest).\n"
         "  Recommended model, as trainsim's simgrid backend uses it (each a SimGrid cfg "
         "option):\n    network/model:CM02 network/crosstraffic:0 network/TCP-gamma:0\n");
}

static void xml_host_speed(GString *s, const ts_topo *t)
{
  double f = t->chip.peak_flops * (t->chip.compute_efficiency > 0 ? t->chip.compute_efficiency : 1);
  append_num(s, f > 0 ? f : 1e9);
  g_string_append(s, "f");
}

static void xml_torus(GString *s, const ts_platform *p)
{
  const ts_topo *t = p->topo;
  const ts_dim *d0 = &t->dims[0];
  gboolean any = FALSE;
  const ts_array *a = &p->arr;
  for (int d = 0; d < a->ndims; d++) {
    int bad = a->size[d] > 1 ? torus_mismatches(p, d) : 0;
    if (bad > 0) {
      if (!any)
        g_string_append(s, "  Routes that differ from trainsim's dimension-order routes:\n");
      any = TRUE;
      g_string_append_printf(s,
                             "    dimension %s: %d of %d ordered pairs go the other way round "
                             "(ring ties at half the ring)\n",
                             a->name[d], bad, a->size[d] * (a->size[d] - 1));
    }
  }
  g_string_append(s, "  Links: SimGrid's TORUS names, <cluster>_link_from_<i>_to_<j>_UP/_DOWN.\n"
                     "-->\n<platform version=\"4.1\">\n");
  g_string_append_printf(s,
                         "  <cluster id=\"torus\" prefix=\"c\" suffix=\"\" radical=\"0-%d\" "
                         "speed=\"",
                         p->nchips - 1);
  xml_host_speed(s, t);
  g_string_append(s, "\" bw=\"");
  append_num(s, d0->link_bw_Bps);
  g_string_append(s, "Bps\" lat=\"");
  append_num(s, d0->latency_s);
  g_string_append(s, "s\" topology=\"TORUS\" topo_parameters=\"");
  for (int d = 0; d < a->ndims; d++)
    g_string_append_printf(s, "%s%d", d > 0 ? "," : "", a->size[d]);
  g_string_append(s, "\" sharing_policy=\"SPLITDUPLEX\"/>\n</platform>\n");
}

static void xml_route(GString *s, const char *src, const char *dst, const ts_platform *p,
                      const int *links, int n)
{
  g_string_append_printf(s, "    <route src=\"%s\" dst=\"%s\" symmetrical=\"NO\">", src, dst);
  for (int i = 0; i < n; i++) {
    g_string_append(s, "<link_ctn id=\"");
    append_attr(s, ts_platform_link_name(p, links[i]));
    g_string_append(s, "\"/>");
  }
  g_string_append(s, "</route>\n");
}

/* The switch of the line of `chip` along switch dimension d: named by the line's first chip. */
static int line_base(const ts_array *a, int chip, int d)
{
  int coords[TS_MAX_DIMS];
  ts_array_coords(a, chip, coords);
  return chip - coords[d] * ts_array_stride(a, d);
}

static gboolean xml_explicit(GString *s, const ts_platform *p, ts_platform_routing r,
                             GError **error)
{
  const ts_topo *t = p->topo;
  const ts_array *arr = &p->arr;
  if (r == TS_PLATFORM_FULL)
    g_string_append(s, "  Every route is trainsim's dimension-order route.\n");
  else
    g_string_append(s, "  Only adjacent routes are written; SimGrid computes shortest paths, and "
                       "where several\n  are equally short it may pick another than trainsim's "
                       "dimension-order route.\n");
  g_string_append(s, "-->\n<platform version=\"4.1\">\n");
  g_string_append_printf(s, "  <zone id=\"trainsim\" routing=\"%s\">\n",
                         r == TS_PLATFORM_FULL       ? "Full"
                         : r == TS_PLATFORM_DIJKSTRA ? "DijkstraCache"
                                                     : "Floyd");
  for (int c = 0; c < p->nchips; c++) {
    g_string_append_printf(s, "    <host id=\"c%d\" speed=\"", c);
    xml_host_speed(s, t);
    g_string_append(s, "\"/>\n");
  }
  if (r != TS_PLATFORM_FULL)
    for (int d = 0; d < arr->ndims; d++)
      if (t->dims[d].shape == TS_SHAPE_SWITCH && arr->size[d] > 1)
        for (int c = 0; c < p->nchips; c++)
          if (line_base(arr, c, d) == c) {
            g_string_append(s, "    <router id=\"s.");
            append_attr(s, arr->name[d]);
            g_string_append_printf(s, ".%d\"/>\n", c);
          }
  for (guint i = 0; i < p->links->len; i++) {
    const plink *l = &g_array_index(p->links, plink, i);
    g_string_append(s, "    <link id=\"");
    append_attr(s, l->name);
    g_string_append(s, "\" bandwidth=\"");
    append_num(s, l->bw_Bps);
    g_string_append(s, "Bps\" latency=\"");
    append_num(s, l->lat_s);
    g_string_append(s, "s\"/>\n");
  }
  char a[32], b[32];
  if (r == TS_PLATFORM_FULL) {
    GArray *route = g_array_new(FALSE, FALSE, sizeof(int));
    for (int src = 0; src < p->nchips; src++)
      for (int dst = 0; dst < p->nchips; dst++) {
        if (src == dst)
          continue;
        g_array_set_size(route, 0);
        if (!ts_platform_route(p, src, dst, route)) {
          g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                      "route from chip %d to chip %d uses a link the array lacks", src, dst);
          g_array_unref(route);
          return FALSE;
        }
        g_snprintf(a, sizeof a, "c%d", src);
        g_snprintf(b, sizeof b, "c%d", dst);
        xml_route(s, a, b, p, (int *)route->data, (int)route->len);
      }
    g_array_unref(route);
  } else {
    int coords[TS_MAX_DIMS];
    for (int c = 0; c < p->nchips; c++) {
      ts_array_coords(arr, c, coords);
      for (int d = 0; d < arr->ndims; d++) {
        const ts_dim *dm = &t->dims[d];
        for (int dir = +1; dir >= -1; dir -= 2) {
          ts_link_id id = {c, d, dir};
          int li = ts_platform_link_index(p, &id);
          if (li < 0)
            continue;
          g_snprintf(a, sizeof a, "c%d", c);
          if (dm->shape == TS_SHAPE_SWITCH) {
            g_snprintf(b, sizeof b, "s.%s.%d", arr->name[d], line_base(arr, c, d));
            if (dir > 0)
              xml_route(s, a, b, p, &li, 1);
            else
              xml_route(s, b, a, p, &li, 1);
            continue;
          }
          /* A 2-ring's two links join the same pair; one route per ordered pair. */
          if (dm->shape == TS_SHAPE_RING && arr->size[d] == 2 && dir < 0)
            continue;
          g_snprintf(b, sizeof b, "c%d", ts_topo_neighbor(t, c, d, dir));
          xml_route(s, a, b, p, &li, 1);
        }
      }
    }
  }
  g_string_append(s, "  </zone>\n</platform>\n");
  return TRUE;
}

char *ts_platform_xml(const ts_platform *p, ts_platform_routing routing, GError **error)
{
  ts_platform_routing r = routing == TS_PLATFORM_AUTO ? ts_platform_auto_routing(p) : routing;
  if (r == TS_PLATFORM_TORUS && !uniform_torus(p)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "%s: routing torus needs every dimension a ring with the same bandwidth and "
                "latency and one port per chip; use full, dijkstra or floyd",
                p->topo->path != NULL ? p->topo->path : p->topo->name);
    return NULL;
  }
  if (r == TS_PLATFORM_FULL && p->nchips > TS_PLATFORM_FULL_LIMIT_CHIPS) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "%s: routing full writes every route, %d x %d of them: expected at most %d "
                "chips; use dijkstra (or torus on a uniform torus)",
                p->topo->path != NULL ? p->topo->path : p->topo->name, p->nchips, p->nchips - 1,
                TS_PLATFORM_FULL_LIMIT_CHIPS);
    return NULL;
  }
  GString *s = g_string_new(NULL);
  xml_header(s, p, r);
  if (r == TS_PLATFORM_TORUS) {
    xml_torus(s, p);
  } else if (!xml_explicit(s, p, r, error)) {
    g_string_free(s, TRUE);
    return NULL;
  }
  return g_string_free(s, FALSE);
}

/* ---- in-process platform ---- */

static int zone_route(void *data, int src, int dst, int *links, int max)
{
  ts_platform *p = data;
  GArray *route = p->zone_buf;
  g_array_set_size(route, 0);
  /* ts_platform_new validated the array and ts_route's links exist (tests check every pair);
   * a missing link here is a programming error, which g_critical reports. */
  if (!ts_platform_route(p, src, dst, route))
    g_critical("ts_platform: route c%d -> c%d names a link the array lacks", src, dst);
  int n = (int)MIN(route->len, (guint)max);
  memcpy(links, route->data, sizeof(int) * (size_t)n);
  if (p->fold != NULL)
    for (int i = 0; i < n; i++)
      links[i] = p->fold[links[i]];
  return n;
}

void ts_platform_set_fold(ts_platform *p, const int *fold)
{
  p->fold = fold;
}

gboolean ts_platform_load(ts_platform *p, double host_speed, GError **error)
{
  if (p->hosts != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "the platform is already loaded");
    return FALSE;
  }
  ts_sg_zone *z = ts_sg_zone_new("trainsim", zone_route, p, p->max_route, error);
  if (z == NULL)
    return FALSE;
  p->hosts = g_new(sg_host_t, p->nchips);
  char name[32];
  for (int c = 0; c < p->nchips; c++) {
    g_snprintf(name, sizeof name, "c%d", c);
    p->hosts[c] = ts_sg_zone_add_host(z, name, host_speed);
  }
  for (guint i = 0; i < p->links->len; i++) {
    const plink *l = &g_array_index(p->links, plink, i);
    ts_sg_zone_add_link(z, l->name, l->bw_Bps, l->lat_s);
  }
  return ts_sg_zone_seal(z, error);
}

sg_host_t ts_platform_host(const ts_platform *p, int chip)
{
  return p->hosts[chip];
}
