/* Fuzzes check's scenarios-file reader (tests/scenarios/NAME.ini; docs/regression.md) and its
 * --update rewrite: a file that reads is rewritten with new goldens, and the rewritten text must
 * read back to the same scenarios with exactly those goldens (the rewrite keeps every other
 * byte, so a file check accepts can never be corrupted by --update). */
#include "fuzz.h"
#include "ts_cmd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size > 1 << 16)
    return 0;
  char *text = fuzz_text(data, size);
  char **names = NULL;
  double *golden = NULL;
  int n = ts_check_parse("fuzz.ini", text, size, &names, &golden, NULL);
  if (n > 0) {
    double *now = g_new(double, n);
    for (int i = 0; i < n; i++)
      now[i] = 1e-3 * (i + 1) + 1.25e-7;
    char *nt = ts_check_rewrite(text, names, now, n);
    char **names2 = NULL;
    double *golden2 = NULL;
    GError *e = NULL;
    int n2 = ts_check_parse("fuzz.ini", nt, strlen(nt), &names2, &golden2, &e);
    if (n2 != n) {
      fprintf(stderr,
              "rewrite changed the file: %d scenarios, then %d (%s)\n--- before\n%s\n"
              "--- after\n%s\n",
              n, n2, e ? e->message : "", text, nt);
      abort();
    }
    for (int i = 0; i < n; i++)
      if (strcmp(names[i], names2[i]) != 0 || !(fabs(golden2[i] - now[i]) <= 1e-9 * now[i])) {
        fprintf(stderr, "rewrite: scenario %d [%s] -> [%s], golden %.10g written, %.10g read\n", i,
                names[i], names2[i], now[i], golden2[i]);
        abort();
      }
    g_strfreev(names2);
    g_free(golden2);
    g_free(nt);
    g_free(now);
  }
  g_strfreev(names);
  g_free(golden);
  g_free(text);
  return 0;
}
