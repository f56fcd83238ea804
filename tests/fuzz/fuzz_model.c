/* Fuzzes the model reader (ts_model_load takes a path: the input goes through a scratch file). */
#include "fuzz.h"
#include "ts_model.h"

#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size > 1 << 16)
    return 0;
  ts_model *m = ts_model_load(fuzz_file(data, size), NULL);
  if (m != NULL)
    ts_model_free(m);
  return 0;
}
