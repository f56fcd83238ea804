/* Fuzzes the split string (--split): parse, then place on an 8x8 torus and a 2x4 switch
 * hierarchy, as run does before planning. */
#include "fuzz.h"
#include "ts_plan.h"
#include "ts_validate.h"

#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size > 4096)
    return 0;
  static ts_topo *topos[2];
  if (topos[0] == NULL) {
    topos[0] = ts_validate_topology("torus:8x8", NULL);
    topos[1] = ts_validate_topology("switch:2x4", NULL);
  }
  char *text = fuzz_text(data, size);
  ts_split *s = ts_split_parse(text, NULL);
  if (s != NULL) {
    for (int i = 0; i < 2; i++) {
      int degree[TS_AX_N];
      ts_group_shape shape[TS_AX_N];
      ts_split_place(s, topos[i], degree, shape, NULL);
    }
    ts_split_free(s);
  }
  g_free(text);
  return 0;
}
