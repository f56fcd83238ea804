/* ts_run: plan -> trace -> replay -> result, the one path every prediction takes. */
#include "ts_run.h"
#include "ts_util.h"

#include <string.h>

gboolean ts_run_backend_valid(const char *name, GError **error)
{
  if (name == NULL || strcmp(name, "analytic") == 0 || strcmp(name, "simgrid") == 0)
    return TRUE;
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--backend '%s': expected analytic or simgrid",
              name);
  return FALSE;
}

char *ts_run_network_model(const ts_run_options *ro)
{
  if (ro->backend == NULL || strcmp(ro->backend, "analytic") == 0)
    return g_strdup("alpha-beta, contention-free, dimension-order routes");
  GString *s = g_string_new("SimGrid CM02 max-min, network/crosstraffic:0, network/TCP-gamma:0");
  for (const char *const *c = ro->sg_cfg; c != NULL && *c != NULL; c++)
    g_string_append_printf(s, ", %s", *c);
  return g_string_free(s, FALSE);
}

gboolean ts_run_replay(const ts_trace *tr, const ts_topo *t, const ts_run_options *ro,
                       ts_replay_result *out, GError **error)
{
  if (!ts_trace_check(tr, t, error))
    return FALSE;
  gboolean sg = ro->backend != NULL && strcmp(ro->backend, "simgrid") == 0;
  ts_backend *b = sg ? ts_backend_simgrid_new(t, ro->sg_cfg, error) : ts_backend_analytic_new(t);
  if (b == NULL)
    return FALSE;
  /* Contention needs every flow, so the simgrid backend replays every rank. */
  ts_replay *r = ts_replay_new(tr, b, sg || ro->full ? TS_REPLAY_FULL : TS_REPLAY_COLLAPSED);
  gboolean ok = ts_replay_run(r, out, error);
  ts_replay_free(r);
  ts_backend_free(b);
  return ok;
}

gboolean ts_run_predict(const ts_model *m, const ts_topo *t, const ts_split *s,
                        const ts_plan_options *po, const ts_run_options *ro, ts_result *out,
                        GError **error)
{
  g_autoptr(ts_plan) p = ts_plan_new(m, t, s, po, error);
  if (p == NULL)
    return FALSE;
  g_autoptr(ts_trace) tr = ts_plan_trace(p, error);
  if (tr == NULL)
    return FALSE;
  ts_replay_result rr;
  if (!ts_run_replay(tr, t, ro, &rr, error))
    return FALSE;
  ts_result_fill(out, p, tr, &rr);
  return TRUE;
}
