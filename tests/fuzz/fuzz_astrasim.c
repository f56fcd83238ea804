/* Fuzzes the ASTRA-sim text-workload importer (`replay --from astrasim`, docs/formats.md) on
 * one DGX A100 node (8 GPUs): bytes -> trace -> the checks replay makes before any engine
 * starts; a trace that passes is replayed on the analytic backend when small. */
#include "fuzz.h"
#include "fuzz_replay.h"
#include "ts_cmd.h"
#include "ts_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size > 1 << 16)
    return 0;
  static ts_topo *topo;
  if (topo == NULL)
    topo = ts_cmd_load_topo("dgx-a100-1node", NULL, NULL);
  ts_trace *tr = ts_import_astrasim_bytes(data, size, "fuzz.txt", topo, NULL);
  if (tr != NULL) {
    fuzz_check_and_replay(tr, topo);
    ts_trace_free(tr);
  }
  return 0;
}
