/* ts_split: the --split specification and its placement of parallel axes on array dimensions. */
#include "ts_plan.h"
#include "ts_util.h"

#include <string.h>

static const char *axis_names[TS_AX_N] = {"tp", "dp", "pp"};

const char *ts_axis_kind_name(ts_axis_kind a)
{
  return (unsigned)a < TS_AX_N ? axis_names[a] : "?";
}

void ts_split_free(ts_split *s)
{
  if (s == NULL)
    return;
  for (int a = 0; a < TS_AX_N; a++)
    g_free(s->place_names[a]);
  g_free(s->text);
  g_free(s);
}

ts_split *ts_split_parse(const char *text, GError **error)
{
  g_autoptr(ts_split) s = g_new0(ts_split, 1);
  s->text = g_strdup(text != NULL ? text : "");
  if (text == NULL || *text == '\0') {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '': expected comma-separated axes such as dp=64 or tp=8@x,dp=8@y");
    return NULL;
  }
  g_auto(GStrv) items = g_strsplit(text, ",", -1);
  for (char **it = items; *it != NULL; it++) {
    char *item = g_strstrip(*it);
    const char *eq = strchr(item, '=');
    if (eq == NULL) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--split '%s': item '%s': expected AXIS=DEGREE[@DIM[+DIM...]], e.g. tp=8@x", text,
                  item);
      return NULL;
    }
    g_autofree char *key = g_strndup(item, (gsize)(eq - item));
    int a = -1;
    for (int k = 0; k < TS_AX_N; k++)
      if (strcmp(key, axis_names[k]) == 0)
        a = k;
    if (strcmp(key, "mp") == 0) /* model parallel, the older name of tensor parallel */
      a = TS_AX_TP;
    if (a < 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--split '%s': unknown axis '%s'; expected dp (data), tp or mp (tensor/model), "
                  "pp (pipeline)",
                  text, key);
      return NULL;
    }
    if (s->degree[a] != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--split '%s': axis %s given twice", text, key);
      return NULL;
    }
    const char *at = strchr(eq + 1, '@');
    g_autofree char *deg = at ? g_strndup(eq + 1, (gsize)(at - eq - 1)) : g_strdup(eq + 1);
    gint64 d;
    if (!ts_parse_int(deg, 1, 1 << 24, &d)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--split '%s': %s='%s': expected a degree, a whole number in [1, 16777216]", text,
                  key, deg);
      return NULL;
    }
    s->degree[a] = (int)d;
    if (at != NULL) {
      if (at[1] == '\0') {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--split '%s': %s: expected dimension names after '@', e.g. @x or @x+y", text,
                    key);
        return NULL;
      }
      s->place_names[a] = g_strdup(at + 1);
    }
  }
  if (s->degree[TS_AX_PP] > 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '%s': pipeline parallelism (pp) is not supported yet; expected dp and tp",
                text);
    return NULL;
  }
  return g_steal_pointer(&s);
}

/* Takes `want` chips of an axis from dimension d, innermost unused factor first. */
static gboolean take(const ts_topo *t, int *used, int d, int *remaining, ts_group_shape *shape,
                     gboolean exact)
{
  int avail = t->dims[d].size / used[d];
  if (avail <= 1 || *remaining <= 1)
    return *remaining <= 1;
  int k;
  if (*remaining % avail == 0)
    k = avail;
  else if (avail % *remaining == 0)
    k = *remaining;
  else if (exact)
    return FALSE;
  else {
    int x = avail, y = *remaining;
    while (y != 0) {
      int tmp = x % y;
      x = y;
      y = tmp;
    }
    k = x;
    if (k <= 1)
      return TRUE;
  }
  shape->p[shape->npieces++] = (ts_piece){d, k, used[d]};
  used[d] *= k;
  *remaining /= k;
  return TRUE;
}

/* Dimensions ordered fastest link first; ties keep file order. */
static void dims_by_speed(const ts_topo *t, int *order)
{
  for (int d = 0; d < t->ndims; d++)
    order[d] = d;
  for (int i = 1; i < t->ndims; i++)
    for (int j = i; j > 0 && t->dims[order[j]].link_bw_Bps > t->dims[order[j - 1]].link_bw_Bps;
         j--) {
      int tmp = order[j];
      order[j] = order[j - 1];
      order[j - 1] = tmp;
    }
}

gboolean ts_split_place(const ts_split *s, const ts_topo *t, int *degree, ts_group_shape *shape,
                        GError **error)
{
  gint64 prod = 1;
  for (int a = 0; a < TS_AX_N; a++) {
    degree[a] = s->degree[a] > 0 ? s->degree[a] : 1;
    prod *= degree[a];
    memset(&shape[a], 0, sizeof shape[a]);
  }
  /* An unstated data-parallel degree takes the chips the other axes leave. */
  if (s->degree[TS_AX_DP] == 0 && prod < t->nchips && t->nchips % prod == 0) {
    degree[TS_AX_DP] = (int)(t->nchips / prod);
    prod = t->nchips;
  }
  if (prod != t->nchips) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s' uses %" G_GINT64_FORMAT " chips but topology %s has %d; expected "
                "the degrees to multiply to %d",
                s->text, prod, t->path ? t->path : t->name, t->nchips, t->nchips);
    return FALSE;
  }
  int used[TS_MAX_DIMS];
  for (int d = 0; d < t->ndims; d++)
    used[d] = 1;
  /* Explicit placements first, in axis order. */
  for (int a = 0; a < TS_AX_N; a++) {
    if (s->place_names[a] == NULL)
      continue;
    int remaining = degree[a];
    g_auto(GStrv) dims = g_strsplit(s->place_names[a], "+", -1);
    for (char **dn = dims; *dn != NULL; dn++) {
      int d = ts_topo_dim_index(t, *dn);
      if (d < 0) {
        GString *names = g_string_new(NULL);
        for (int k = 0; k < t->ndims; k++)
          g_string_append_printf(names, "%s%s", k ? ", " : "", t->dims[k].name);
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "--split '%s': %s@%s: topology %s has no dimension '%s'; expected one of: %s",
                    s->text, axis_names[a], s->place_names[a], t->path ? t->path : t->name, *dn,
                    names->str);
        g_string_free(names, TRUE);
        return FALSE;
      }
      if (!take(t, used, d, &remaining, &shape[a], TRUE)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "--split '%s': %s=%d@%s: dimension %s has %d chips left, which neither "
                    "divides nor is divided by %d",
                    s->text, axis_names[a], degree[a], s->place_names[a], *dn,
                    t->dims[d].size / used[d], remaining);
        return FALSE;
      }
    }
    if (remaining != 1) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': %s=%d@%s: those dimensions hold only %d of its chips; expected "
                  "more dimensions or a smaller degree",
                  s->text, axis_names[a], degree[a], s->place_names[a], degree[a] / remaining);
      return FALSE;
    }
  }
  /* Unplaced axes: the most communication-heavy (tensor, then data) on the fastest dims. */
  int order[TS_MAX_DIMS];
  dims_by_speed(t, order);
  for (int a = 0; a < TS_AX_N; a++) {
    if (s->place_names[a] != NULL || degree[a] == 1)
      continue;
    int remaining = degree[a];
    for (int i = 0; i < t->ndims && remaining > 1; i++) {
      int d = a == TS_AX_PP ? order[t->ndims - 1 - i] : order[i];
      take(t, used, d, &remaining, &shape[a], FALSE);
    }
    if (remaining != 1) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': %s=%d does not fit the dimensions the other axes leave free; "
                  "expected degrees that factor into the array's dimension sizes",
                  s->text, axis_names[a], degree[a]);
      return FALSE;
    }
  }
  return TRUE;
}
