/* A main for the harnesses without libFuzzer: runs LLVMFuzzerTestOneInput on every file named
 * on the command line (folders: every file inside, and their folders'), so ctest replays seeds
 * and regressions. It prints the slowest input and its CPU time: bench/fuzz.sh replays each
 * final corpus through it, since libFuzzer's -timeout is wall-clock time, which a loaded,
 * shared machine stretches. */
#include "fuzz.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static double slowest_s;
static char *slowest;

static int run_file(const char *path)
{
  gchar *data = NULL;
  gsize len = 0;
  if (!g_file_get_contents(path, &data, &len, NULL)) {
    fprintf(stderr, "%s: cannot read\n", path);
    return 1;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  LLVMFuzzerTestOneInput((const uint8_t *)data, len);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  if (slowest == NULL || s > slowest_s) {
    slowest_s = s;
    g_free(slowest);
    slowest = g_strdup(path);
  }
  g_free(data);
  return 0;
}

/* A file, or every file below a folder (topologies/chips/ holds the chip profiles). */
static void run_path(const char *path, int *n, int *bad)
{
  if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    GDir *d = g_dir_open(path, 0, NULL);
    for (const char *f; d != NULL && (f = g_dir_read_name(d)) != NULL;) {
      char *p = g_build_filename(path, f, NULL);
      run_path(p, n, bad);
      g_free(p);
    }
    if (d != NULL)
      g_dir_close(d);
  } else {
    *bad += run_file(path);
    (*n)++;
  }
}

int main(int argc, char **argv)
{
  int n = 0, bad = 0;
  for (int i = 1; i < argc; i++)
    run_path(argv[i], &n, &bad);
  printf("%d inputs replayed, %d unreadable; slowest %.3f s CPU: %s\n", n, bad, slowest_s,
         slowest != NULL ? slowest : "-");
  return bad != 0 || n == 0;
}
