/* ts_backend_simgrid: placeholder until the contention-aware backend lands (issue 3). */
#include "ts_replay.h"
#include "ts_util.h"

ts_backend *ts_backend_simgrid_new(const ts_topo *t, const char *const *cfg, GError **error)
{
  (void)t;
  (void)cfg;
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "--backend simgrid: not available in this build yet; expected --backend analytic");
  return NULL;
}
