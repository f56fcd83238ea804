/* Fuzzes the Chakra execution-trace importer (`replay --from chakra`, protobuf, one file per
 * rank; docs/formats.md) on one DGX A100 node (8 GPUs). The input is read three ways: as
 * rank 0's .et without process groups, as rank 0's .et with a fixed group file, and as the
 * comm-groups JSON beside a shipped rank-0 file that names a group. Traces that import are
 * checked and, when small, replayed on the analytic backend. */
#include "fuzz.h"
#include "fuzz_replay.h"
#include "ts_cmd.h"
#include "ts_import.h"

static void import(const guint8 *et, gsize n, const char *groups, const ts_topo *topo)
{
  const char *path = "fuzz.0.et";
  int rank = 0;
  ts_trace *tr =
      ts_import_chakra_bytes(&et, &n, &path, &rank, 1, topo, groups, "fuzz.comm_groups.json", NULL);
  if (tr != NULL) {
    fuzz_check_and_replay(tr, topo);
    ts_trace_free(tr);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size > 1 << 16)
    return 0;
  static ts_topo *topo;
  static gchar *et0;
  static gsize et0_len;
  if (topo == NULL) {
    topo = ts_cmd_load_topo("dgx-a100-1node", NULL, NULL);
    g_assert(g_file_get_contents(TS_SOURCE_DIR
                                 "/traces/imported/chakra/bert-base-dp8/bert-base-dp8.0.et",
                                 &et0, &et0_len, NULL));
  }
  import(data, size, NULL, topo);
  import(data, size, "{\"dp@0\": [0, 1, 2, 3, 4, 5, 6, 7], \"tp@0\": [0, 1]}", topo);
  char *json = fuzz_text(data, size);
  import((const guint8 *)et0, et0_len, json, topo);
  g_free(json);
  return 0;
}
