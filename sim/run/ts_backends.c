/* ts_backends: the one table of replay backends (name, how it must run, how to make one). */
#include "ts_backends.h"
#include "ts_backend_simgrid.h"
#include "ts_util.h"

#include <string.h>

static ts_backend *make_analytic(const ts_topo *t, const char *const *cfg, GError **error)
{
  (void)cfg;
  (void)error;
  return ts_backend_analytic_new(t);
}

static char *analytic_model(const char *const *cfg)
{
  (void)cfg;
  return g_strdup("alpha-beta, contention-free, dimension-order routes");
}

static char *simgrid_model(const char *const *cfg)
{
  GString *s = g_string_new("SimGrid CM02 max-min, network/crosstraffic:0, network/TCP-gamma:0");
  for (const char *const *c = cfg; c != NULL && *c != NULL; c++)
    g_string_append_printf(s, ", %s", *c);
  return g_string_free(s, FALSE);
}

/* The first entry is the default. */
static const ts_backend_kind kinds[] = {
    {"analytic", "contention-free closed forms, fast", FALSE, FALSE, make_analytic, analytic_model,
     NULL},
    {"simgrid", "contention-aware flows on a SimGrid platform", TRUE, TRUE, ts_backend_simgrid_new,
     simgrid_model, ts_simgrid_preflight},
};
#define NKINDS ((int)G_N_ELEMENTS(kinds))

const ts_backend_kind *ts_backend_kind_lookup(const char *name, GError **error)
{
  if (name == NULL)
    return &kinds[0];
  for (int i = 0; i < NKINDS; i++)
    if (strcmp(name, kinds[i].name) == 0)
      return &kinds[i];
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--backend '%s': expected %s", name,
              ts_backend_kind_list());
  return NULL;
}

static const char *build_list(gboolean help)
{
  GString *s = g_string_new(NULL);
  for (int i = 0; i < NKINDS; i++) {
    g_string_append_printf(s, "%s%s", i == 0 ? "" : i == NKINDS - 1 ? " or " : ", ", kinds[i].name);
    if (help)
      g_string_append_printf(s, " (%s%s)", i == 0 ? "default, " : "", kinds[i].summary);
  }
  return g_string_free(s, FALSE);
}

const char *ts_backend_kind_list(void)
{
  static gsize once = 0;
  static const char *text = NULL;
  if (g_once_init_enter(&once)) {
    text = build_list(FALSE);
    g_once_init_leave(&once, 1);
  }
  return text;
}

const char *ts_backend_kind_help(void)
{
  static gsize once = 0;
  static const char *text = NULL;
  if (g_once_init_enter(&once)) {
    text = build_list(TRUE);
    g_once_init_leave(&once, 1);
  }
  return text;
}
