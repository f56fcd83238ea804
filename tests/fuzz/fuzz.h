/* Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c): each defines LLVMFuzzerTestOneInput
 * for one reader of trainsim's inputs. Built with -DTS_FUZZ=ON (clang, libFuzzer, ASan and
 * UBSan; bench/fuzz.sh), and always as a plain program (driver.c) that replays the seed and
 * regression inputs under ctest, so a crash once found stays fixed. */
#ifndef TS_FUZZ_H
#define TS_FUZZ_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a NUL-terminated string (readers of text take one). Caller frees. */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
  char *t = g_malloc(size + 1);
  memcpy(t, data, size);
  t[size] = '\0';
  return t;
}

/* Writes the input to this process's scratch file and returns its path (for readers that take
 * a path). The file is reused for every input. */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
  static char *path = NULL;
  if (path == NULL) {
    int fd = g_file_open_tmp("ts-fuzz-XXXXXX.ini", &path, NULL);
    g_assert(fd >= 0);
    close(fd);
  }
  /* Plain writes: g_file_set_contents fsyncs an existing file before renaming over it, which
   * held the path-taking harnesses to a few dozen inputs per second. */
  FILE *f = fopen(path, "wb");
  g_assert(f != NULL);
  g_assert(size == 0 || fwrite(data, 1, size, f) == size);
  g_assert(fclose(f) == 0);
  return path;
}

#endif
