/* Fuzzes the trace reader (text form, docs/formats.md) and its consistency check against a
 * 64-chip torus. */
#include "fuzz.h"
#include "ts_trace.h"
#include "ts_validate.h"

#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size > 1 << 16)
    return 0;
  static ts_topo *topo;
  if (topo == NULL)
    topo = ts_validate_topology("torus:8x8", NULL);
  char *text = fuzz_text(data, size);
  ts_trace *tr = ts_trace_from_text(text, "fuzz.trace", NULL);
  if (tr != NULL) {
    ts_trace_check(tr, topo, NULL);
    ts_trace_free(tr);
  }
  g_free(text);
  return 0;
}
