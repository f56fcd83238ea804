/* ts_degrade: dead links, chips out and stragglers on an array (docs/planning.md). */
#include "ts_degrade.h"
#include "ts_goodput.h"
#include "ts_util.h"

#include <string.h>

gboolean ts_degrade_active(const ts_topo *t)
{
  return t->faults.ndead > 0 || t->faults.nout > 0 || t->faults.nslow > 0;
}

gboolean ts_degrade_needs_full(const ts_topo *t)
{
  return ts_degrade_active(t);
}

/* The + neighbour of chip along d, or -1 at a mesh's edge or on a switch. */
static int plus_neighbour(const ts_topo *t, int d, int chip)
{
  const ts_dim *dm = &t->dims[d];
  int stride = ts_topo_stride(t, d);
  int c = ts_topo_coord(t, chip, d);
  if (dm->shape == TS_SHAPE_SWITCH || dm->size < 2)
    return -1;
  if (c + 1 < dm->size)
    return chip + stride;
  return dm->shape == TS_SHAPE_RING && dm->size > 2 ? chip - c * stride : -1;
}

gboolean ts_degrade_link_dead(const ts_topo *t, int d, int chip)
{
  for (int i = 0; i < t->faults.ndead; i++)
    if (t->faults.dead[i].dim == d && t->faults.dead[i].chip == chip)
      return TRUE;
  return FALSE;
}

static gboolean chip_out(const ts_topo *t, int chip)
{
  for (int i = 0; i < t->faults.nout; i++)
    if (t->faults.out[i] == chip)
      return TRUE;
  return FALSE;
}

gboolean ts_degrade_connected(const ts_topo *t)
{
  int n = t->nchips, start = -1;
  for (int c = 0; c < n && start < 0; c++)
    if (!chip_out(t, c))
      start = c;
  if (start < 0)
    return FALSE;
  guint8 *seen = g_new0(guint8, n);
  int *queue = g_new(int, n), head = 0, tail = 0, reached = 0, live = 0;
  for (int c = 0; c < n; c++)
    live += !chip_out(t, c);
  /* A switch line is reached whole the first time one of its chips is: mark lines done. */
  GHashTable *lines = g_hash_table_new(g_int64_hash, g_int64_equal);
  seen[start] = 1;
  queue[tail++] = start;
  gint64 *keybuf = g_new(gint64, (gsize)n * TS_MAX_DIMS + 1);
  int nkeys = 0;
  while (head < tail) {
    int c = queue[head++];
    reached++;
    for (int d = 0; d < t->ndims; d++) {
      const ts_dim *dm = &t->dims[d];
      int stride = ts_topo_stride(t, d), k = ts_topo_coord(t, c, d), base = c - k * stride;
      if (dm->shape == TS_SHAPE_SWITCH) {
        keybuf[nkeys] = (gint64)base * TS_MAX_DIMS + d;
        if (g_hash_table_contains(lines, &keybuf[nkeys]))
          continue;
        g_hash_table_add(lines, &keybuf[nkeys++]);
        for (int j = 0; j < dm->size; j++) {
          int o = base + j * stride;
          if (!seen[o] && !chip_out(t, o)) {
            seen[o] = 1;
            queue[tail++] = o;
          }
        }
        continue;
      }
      int up = plus_neighbour(t, d, c);
      if (up >= 0 && !ts_degrade_link_dead(t, d, c) && !seen[up] && !chip_out(t, up)) {
        seen[up] = 1;
        queue[tail++] = up;
      }
      /* The - neighbour: the chip whose + neighbour is c. */
      int down =
          k > 0 ? c - stride : (dm->shape == TS_SHAPE_RING ? base + (dm->size - 1) * stride : -1);
      if (down >= 0 && down != c && plus_neighbour(t, d, down) == c &&
          !ts_degrade_link_dead(t, d, down) && !seen[down] && !chip_out(t, down)) {
        seen[down] = 1;
        queue[tail++] = down;
      }
    }
  }
  g_hash_table_unref(lines);
  g_free(keybuf);
  g_free(queue);
  g_free(seen);
  return reached == live;
}

gboolean ts_degrade_add_link(ts_topo *t, int d, int chip, const char *option, GError **error)
{
  ts_faults *f = &t->faults;
  if (plus_neighbour(t, d, chip) < 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: no link from chip %d along %s (a %s of %d); expected a ring or mesh link "
                "that exists on the array",
                option, chip, t->dims[d].name, ts_shape_name(t->dims[d].shape), t->dims[d].size);
    return FALSE;
  }
  if (ts_degrade_link_dead(t, d, chip))
    return TRUE;
  if (f->ndead == TS_MAX_FAULTS) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: expected at most %d dead links", option,
                TS_MAX_FAULTS);
    return FALSE;
  }
  f->dead[f->ndead++] = (ts_dead_link){d, chip};
  return TRUE;
}

/* "x, y" of a topology's dimensions, for the messages (caller frees). */
static char *dim_names(const ts_topo *t)
{
  GString *s = g_string_new(NULL);
  for (int d = 0; d < t->ndims; d++)
    g_string_append_printf(s, "%s%s", d > 0 ? ", " : "", t->dims[d].name);
  return g_string_free(s, FALSE);
}

static gboolean parse_link(ts_topo *t, const char *opt, const char *spec, GError **error)
{
  /* DIM:C1,C2,... */
  g_auto(GStrv) parts = g_strsplit(spec, ":", 2);
  int d = parts[0] != NULL ? ts_topo_dim_index(t, parts[0]) : -1;
  if (d < 0 || parts[1] == NULL) {
    g_autofree char *names = dim_names(t);
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: expected link:DIM:C1,...,C%d with DIM one of the array's dimensions (%s)", opt,
                t->ndims, names);
    return FALSE;
  }
  g_auto(GStrv) cs = g_strsplit(parts[1], ",", -1);
  if ((int)g_strv_length(cs) != t->ndims) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: expected %d coordinates (one per dimension, fastest first)", opt, t->ndims);
    return FALSE;
  }
  int coords[TS_MAX_DIMS];
  for (int k = 0; k < t->ndims; k++) {
    gint64 v;
    if (!ts_parse_int(cs[k], 0, t->dims[k].size - 1, &v)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: coordinate '%s' along %s: expected a whole number in [0, %d]", opt, cs[k],
                  t->dims[k].name, t->dims[k].size - 1);
      return FALSE;
    }
    coords[k] = (int)v;
  }
  return ts_degrade_add_link(t, d, ts_topo_chip(t, coords), opt, error);
}

static gboolean parse_chip(ts_topo *t, const char *opt, const char *spec, int *chip, GError **error)
{
  gint64 v;
  if (!ts_parse_int(spec, 0, t->nchips - 1, &v)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: expected a chip id in [0, %d]", opt,
                t->nchips - 1);
    return FALSE;
  }
  *chip = (int)v;
  return TRUE;
}

/* A factor below 0.001 is no straggler but a dead part (--fail): 1e-300 printed step times of
 * 38-digit seconds. */
static gboolean parse_factor(const char *opt, const char *v, double *out, GError **error)
{
  double f;
  if (v == NULL || !ts_parse_double(v, &f) || !(f >= 1e-3) || f > 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: expected a speed factor in [0.001, 1] after '=' (0.8 = 80%% of nominal)", opt);
    return FALSE;
  }
  *out = f;
  return TRUE;
}

/* A chip out: the job shrinks by its data-parallel replica (ts_capacity_fill). The remaining
 * replicas' collectives are re-formed without it; their links are taken as healthy (a
 * limitation: on a torus the data-parallel ring that skipped the chip would detour). */
static gboolean add_out(ts_topo *t, const char *opt, int chip, GError **error)
{
  ts_faults *f = &t->faults;
  if (chip_out(t, chip))
    return TRUE;
  if (f->nout == TS_MAX_FAULTS) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: expected at most %d chips out", opt,
                TS_MAX_FAULTS);
    return FALSE;
  }
  f->out[f->nout++] = chip;
  return TRUE;
}

gboolean ts_degrade_apply_options(ts_topo *t, char **fails, char **stragglers, GError **error)
{
  for (char **p = fails; p != NULL && *p != NULL; p++) {
    g_autofree char *opt = g_strdup_printf("--fail %s", *p);
    if (g_str_has_prefix(*p, "link:")) {
      if (!parse_link(t, opt, *p + 5, error))
        return FALSE;
    } else if (g_str_has_prefix(*p, "chip:")) {
      int chip;
      if (!parse_chip(t, opt, *p + 5, &chip, error) || !add_out(t, opt, chip, error))
        return FALSE;
    } else {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: expected link:DIM:C1,C2,... (a dead link) or chip:ID (a chip out)", opt);
      return FALSE;
    }
  }
  for (char **p = stragglers; p != NULL && *p != NULL; p++) {
    g_autofree char *opt = g_strdup_printf("--straggler %s", *p);
    g_auto(GStrv) kv = g_strsplit(*p, "=", 2);
    double f;
    /* An empty --straggler splits into no field: kv[0] is NULL (it reached g_str_has_prefix,
     * whose GLib-CRITICAL warnings printed two lines before the error). */
    if (kv[0] == NULL) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: expected chip:ID=F (a slow chip) or dim.NAME=F (a slow fabric)", opt);
      return FALSE;
    }
    if (g_str_has_prefix(kv[0], "chip:")) {
      int chip;
      if (!parse_chip(t, opt, kv[0] + 5, &chip, error) || !parse_factor(opt, kv[1], &f, error))
        return FALSE;
      ts_faults *fl = &t->faults;
      if (fl->nslow == TS_MAX_FAULTS) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: expected at most %d stragglers", opt,
                    TS_MAX_FAULTS);
        return FALSE;
      }
      fl->slow_chip[fl->nslow] = chip;
      fl->slow_factor[fl->nslow++] = f;
    } else if (g_str_has_prefix(kv[0], "dim.")) {
      int d = ts_topo_dim_index(t, kv[0] + 4);
      if (d < 0) {
        g_autofree char *names = dim_names(t);
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "%s: expected dim.NAME=F with NAME one of the array's dimensions (%s)", opt,
                    names);
        return FALSE;
      }
      if (!parse_factor(opt, kv[1], &f, error))
        return FALSE;
      t->dims[d].link_bw_Bps *= f;
      double *ff = &t->faults.fabric_factor[d];
      *ff = (*ff > 0 ? *ff : 1.0) * f;
    } else {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: expected chip:ID=F (a slow chip) or dim.NAME=F (a slow fabric)", opt);
      return FALSE;
    }
  }
  if ((t->faults.ndead > 0 || t->faults.nout > 0) && !ts_degrade_connected(t)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--fail: these failures disconnect the array; expected a failure set that leaves "
                "every live chip reachable");
    return FALSE;
  }
  return TRUE;
}

gboolean ts_degrade_pick_links(ts_topo *t, int n, guint64 seed, GError **error)
{
  int cand[TS_MAX_DIMS], nc = 0;
  for (int d = 0; d < t->ndims; d++)
    if (t->dims[d].shape != TS_SHAPE_SWITCH && t->dims[d].size > 2)
      cand[nc++] = d;
  if (n > 0 && nc == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--vary dead_links: %s has no ring or mesh links to fail", t->name);
    return FALSE;
  }
  ts_gp_rng rng;
  ts_gp_rng_seed(&rng, seed);
  int placed = 0;
  for (int tries = 0; placed < n && tries < 1000 * (n + 1); tries++) {
    int d = cand[ts_gp_rng_next(&rng) % (guint64)nc];
    int chip = (int)(ts_gp_rng_next(&rng) % (guint64)t->nchips);
    if (plus_neighbour(t, d, chip) < 0 || ts_degrade_link_dead(t, d, chip) ||
        t->faults.ndead == TS_MAX_FAULTS)
      continue;
    t->faults.dead[t->faults.ndead++] = (ts_dead_link){d, chip};
    if (!ts_degrade_connected(t)) {
      t->faults.ndead--;
      continue;
    }
    placed++;
  }
  if (placed < n) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--vary dead_links=%d: expected at most as many dead links as %s can lose and "
                "stay connected (placed %d)",
                n, t->name, placed);
    return FALSE;
  }
  return TRUE;
}

guint ts_degrade_group_mask(const ts_topo *t, const ts_group_shape *g, int base_chip)
{
  if (t->faults.ndead == 0)
    return 0;
  guint along = 0;
  for (int i = 0; i < g->npieces; i++)
    if (g->p[i].size > 1)
      along |= 1u << g->p[i].dim;
  guint mask = 0;
  int n = ts_group_size(g);
  int mc[TS_MAX_DIMS], lc[TS_MAX_DIMS];
  for (int k = 0; k < t->faults.ndead; k++) {
    const ts_dead_link *dl = &t->faults.dead[k];
    if (!(along & (1u << dl->dim)) || (mask & (1u << dl->dim)))
      continue;
    ts_topo_coords(t, dl->chip, lc);
    for (int m = 0; m < n; m++) {
      ts_topo_coords(t, ts_group_member_chip(t, g, base_chip, m), mc);
      gboolean same = TRUE;
      for (int e = 0; e < t->ndims && same; e++)
        same = e == dl->dim || mc[e] == lc[e];
      if (same) {
        mask |= 1u << dl->dim;
        break;
      }
    }
  }
  return mask;
}

guint ts_degrade_route_mask(const ts_topo *t, int src_chip, int dst_chip)
{
  if (t->faults.ndead == 0)
    return 0;
  g_autoptr(GArray) links = g_array_new(FALSE, FALSE, sizeof(ts_link_id));
  ts_route(t, src_chip, dst_chip, links);
  guint mask = 0;
  for (guint i = 0; i < links->len; i++) {
    const ts_link_id *l = &g_array_index(links, ts_link_id, i);
    if (t->dims[l->dim].shape == TS_SHAPE_SWITCH)
      continue;
    /* The link chip -> chip+1 is dead as (dim, chip); chip -> chip-1 as (dim, chip-1). */
    int from = l->chip;
    if (l->dir < 0) {
      int stride = ts_topo_stride(t, l->dim), size = t->dims[l->dim].size;
      int c = ts_topo_coord(t, from, l->dim);
      from = c > 0 ? from - stride : from + (size - 1) * stride;
    }
    if (ts_degrade_link_dead(t, l->dim, from))
      mask |= 1u << l->dim;
  }
  return mask;
}

ts_topo *ts_degrade_topo(const ts_topo *t, guint mask)
{
  ts_topo *c = ts_topo_copy(t);
  for (int d = 0; d < t->ndims; d++) {
    if (!(mask & (1u << d)))
      continue;
    double extra = -1;
    for (int e = 0; e < t->ndims; e++)
      if (e != d && t->dims[e].size > 1 && (extra < 0 || 2 * t->dims[e].latency_s < extra))
        extra = 2 * t->dims[e].latency_s;
    if (extra < 0) /* a lone ring: the long way round, n - 1 hops for one */
      extra = (t->dims[d].size - 2) * t->dims[d].latency_s;
    c->dims[d].latency_s += extra;
    c->dims[d].link_bw_Bps /= 2;
  }
  return c;
}

double ts_degrade_chip_speed(const ts_topo *t, int chip)
{
  double s = 1.0;
  for (int i = 0; i < t->faults.nslow; i++)
    if (t->faults.slow_chip[i] == chip)
      s = MIN(s, t->faults.slow_factor[i]);
  return s;
}

char *ts_degrade_describe(const ts_topo *t)
{
  const ts_faults *f = &t->faults;
  GString *s = g_string_new(NULL);
  if (f->ndead > 0)
    g_string_append_printf(s, "%d dead link%s", f->ndead, f->ndead > 1 ? "s" : "");
  if (f->nout > 0)
    g_string_append_printf(s, "%s%d chip%s out", s->len ? ", " : "", f->nout,
                           f->nout > 1 ? "s" : "");
  if (f->nslow > 0)
    g_string_append_printf(s, "%s%d straggler%s", s->len ? ", " : "", f->nslow,
                           f->nslow > 1 ? "s" : "");
  /* A slow fabric was applied to the bandwidth silently: the header did not say it. */
  for (int d = 0; d < t->ndims; d++)
    if (f->fabric_factor[d] > 0) {
      char pct[G_ASCII_DTOSTR_BUF_SIZE];
      g_string_append_printf(s, "%sslow fabric %s at %s%%", s->len ? ", " : "", t->dims[d].name,
                             g_ascii_formatd(pct, sizeof pct, "%.3g", 100 * f->fabric_factor[d]));
    }
  return g_string_free(s, FALSE);
}

/* The chip one hop from chip along d in direction dir, or -1 (a mesh's edge, a switch). */
static int step_chip(const ts_topo *t, int chip, int d, int dir)
{
  const ts_dim *dm = &t->dims[d];
  if (dm->shape == TS_SHAPE_SWITCH || dm->size < 2)
    return -1;
  int stride = ts_topo_stride(t, d), c = ts_topo_coord(t, chip, d), n = c + dir;
  if (n < 0 || n >= dm->size) {
    if (dm->shape != TS_SHAPE_RING)
      return -1;
    n = (n + dm->size) % dm->size;
  }
  return chip + (n - c) * stride;
}

static gboolean hop_dead(const ts_topo *t, int chip, int d, int dir)
{
  if (t->dims[d].shape == TS_SHAPE_SWITCH)
    return FALSE;
  if (dir > 0)
    return ts_degrade_link_dead(t, d, chip);
  int down = step_chip(t, chip, d, -1);
  return down >= 0 && ts_degrade_link_dead(t, d, down);
}

void ts_degrade_reroute(const ts_topo *t, GArray *links)
{
  if (t->faults.ndead == 0)
    return;
  g_autoptr(GArray) out = g_array_sized_new(FALSE, FALSE, sizeof(ts_link_id), links->len + 4);
  for (guint i = 0; i < links->len; i++) {
    ts_link_id l = g_array_index(links, ts_link_id, i);
    if (!hop_dead(t, l.chip, l.dim, l.dir)) {
      g_array_append_val(out, l);
      continue;
    }
    /* Around the dead hop through a neighbouring line: one hop along another dimension, the
     * hop along this one there, one hop back (the analytic model's detour). */
    gboolean done = FALSE;
    for (int e = 0; e < t->ndims && !done; e++) {
      if (e == l.dim || t->dims[e].shape == TS_SHAPE_SWITCH || t->dims[e].size < 2)
        continue;
      for (int s = 1; s >= -1 && !done; s -= 2) {
        int a = step_chip(t, l.chip, e, s);
        int b = a >= 0 ? step_chip(t, a, l.dim, l.dir) : -1;
        if (b < 0 || hop_dead(t, l.chip, e, s) || hop_dead(t, a, l.dim, l.dir) ||
            hop_dead(t, b, e, -s))
          continue;
        ts_link_id h[3] = {{l.chip, e, s}, {a, l.dim, l.dir}, {b, e, -s}};
        g_array_append_vals(out, h, 3);
        done = TRUE;
      }
    }
    if (!done) {
      /* A lone ring: the long way round, n - 1 hops the other way. */
      int n = t->dims[l.dim].size, c = l.chip;
      for (int k = 0; k < n - 1; k++) {
        ts_link_id h = {c, l.dim, -l.dir};
        g_array_append_val(out, h);
        c = step_chip(t, c, l.dim, -l.dir);
      }
    }
  }
  g_array_set_size(links, 0);
  g_array_append_vals(links, out->data, out->len);
}
