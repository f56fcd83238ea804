/* Fuzzes the trace reader (text formats 1 and 2, docs/formats.md) from bytes, then what replay
 * does with a trace: the consistency checks (without a topology, and against a shipped or
 * small topology whose dimensions match the trace's), the writer and reader agreeing, and a
 * replay on the analytic backend when the trace is small. Seeds: the shipped format 1 and 2
 * traces (tests/fuzz/seeds/trace, traces/handwritten, traces/examples). */
#include "fuzz.h"
#include "fuzz_replay.h"
#include "ts_cmd.h"
#include "ts_validate.h"

#include <string.h>

/* Topologies a trace may name by its dimensions: shipped machines and small tori. */
static const char *const shipped[] = {"dgx-a100-1node", "tpu-v2-8", "tpu-v3-8x8", "dgx-a100-4node",
                                      "host-cpu"};
static const char *const small[] = {"torus:8x8", "torus:4x2", "switch:2x4", "ring:8", "mesh:2x2"};
enum { NTOPO = G_N_ELEMENTS(shipped) + G_N_ELEMENTS(small) };

static const ts_topo *matching(const ts_trace *tr)
{
  static ts_topo *topos[NTOPO];
  static gboolean loaded;
  if (!loaded) {
    int k = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(shipped); i++)
      topos[k++] = ts_cmd_load_topo(shipped[i], NULL, NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(small); i++)
      topos[k++] = ts_validate_topology(small[i], NULL);
    loaded = TRUE;
  }
  for (int k = 0; k < NTOPO; k++) {
    const ts_topo *t = topos[k];
    if (t == NULL || t->ndims != tr->ndims)
      continue;
    gboolean same = TRUE;
    for (int d = 0; d < tr->ndims && same; d++)
      same = tr->dim_sizes[d] == t->dims[d].size && strcmp(tr->dim_names[d], t->dims[d].name) == 0;
    if (same)
      return t;
  }
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size > 1 << 16)
    return 0;
  ts_trace *tr = ts_trace_from_bytes(data, size, "fuzz.trace", NULL);
  if (tr == NULL)
    return 0;
  const ts_topo *t = matching(tr);
  if (t != NULL)
    ts_trace_check(tr, NULL, NULL);
  fuzz_check_and_replay(tr, t);
  ts_trace_free(tr);
  return 0;
}
