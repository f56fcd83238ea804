/* Fuzzes the measurement-file reader of `validate --against` (docs/accuracy.md): CSV with a
 * header naming the measurement and its unit, one configuration per row. ts_meas_load takes
 * a path, so the input goes through a scratch file. Every row it accepts must carry a finite,
 * positive measurement and a line inside the file; its vary column goes through the --vary
 * parser, as validate --against applies it. */
#include "fuzz.h"
#include "ts_accuracy.h"
#include "ts_sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size > 1 << 16)
    return 0;
  ts_meas_file *f = ts_meas_load(fuzz_file(data, size), NULL);
  if (f == NULL)
    return 0;
  int lines = 1;
  for (size_t i = 0; i < size; i++)
    lines += data[i] == '\n';
  for (int i = 0; i < f->nrows; i++) {
    const ts_meas_row *r = &f->rows[i];
    if (!(isfinite(r->measured) && r->measured > 0) || r->line < 1 || r->line > lines ||
        r->topology == NULL || r->group == NULL) {
      fprintf(stderr, "row %d (line %d of %d) accepted with measured %g\n", i, r->line, lines,
              r->measured);
      abort();
    }
    if (r->vary != NULL) {
      char **items = g_strsplit(r->vary, ";", -1);
      for (char **it = items; *it != NULL; it++)
        ts_vary_free(ts_vary_parse(*it, NULL));
      g_strfreev(items);
    }
  }
  ts_meas_free(f);
  return 0;
}
