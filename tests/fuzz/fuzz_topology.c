/* Fuzzes the topology reader: INI text -> GKeyFile (with trainsim's duplicate and syntax
 * checks) -> ts_topo. */
#include "fuzz.h"
#include "ts_topo.h"
#include "ts_util.h"

#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  GKeyFile *kf = ts_kf_load_data((const char *)data, size, "fuzz.ini", NULL);
  if (kf != NULL) {
    ts_topo *t = ts_topo_from_keyfile(kf, "fuzz.ini", NULL);
    if (t != NULL)
      ts_topo_free(t);
    g_key_file_free(kf);
  }
  return 0;
}
