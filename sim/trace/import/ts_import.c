/* ts_import: the importers' front door: format names, detection, and reading the files. */
#include "ts_import.h"
#include "ts_util.h"

#include <string.h>

/* An imported file may be large (a rank's Chakra trace of a long step), but not unbounded. */
#define MAX_IMPORT_FILE_BYTES ((gint64)1 << 30)

static const char *const names[] = {"chakra", "astrasim"};

int ts_import_format_parse(const char *name)
{
  for (int i = 0; i < (int)G_N_ELEMENTS(names); i++)
    if (name != NULL && strcmp(name, names[i]) == 0)
      return i;
  return -1;
}

const char *ts_import_format_name(ts_import_format f)
{
  return (unsigned)f < G_N_ELEMENTS(names) ? names[f] : "?";
}

int ts_import_detect(const guint8 *head, gsize n)
{
  if (n >= 15 && memcmp(head, "trainsim-trace ", 15) == 0)
    return TS_IMPORT_NFORMATS;
  /* ASTRA-sim text: a parallelism keyword first. */
  static const char *const kw[] = {"DATA", "MODEL", "HYBRID_", "MICRO"};
  for (gsize i = 0; i < G_N_ELEMENTS(kw); i++) {
    gsize k = strlen(kw[i]);
    if (n >= k && memcmp(head, kw[i], k) == 0)
      return TS_IMPORT_ASTRASIM;
  }
  /* Chakra: a varint length, then a GlobalMetadata message (field 1 or 2, length-delimited:
   * tag byte 0x0a or 0x12), or an empty one (length 0). */
  if (n >= 1 && head[0] == 0)
    return TS_IMPORT_CHAKRA;
  gsize i = 0;
  while (i < n && i < 10 && (head[i] & 0x80))
    i++;
  if (i + 1 < n && (head[i + 1] == 0x0a || head[i + 1] == 0x12))
    return TS_IMPORT_CHAKRA;
  return -1;
}

/* Rank of a Chakra file named NAME.RANK.et. */
static int chakra_rank(const char *path)
{
  g_autofree char *base = g_path_get_basename(path);
  gsize n = strlen(base);
  if (n < 4 || strcmp(base + n - 3, ".et") != 0)
    return -1;
  base[n - 3] = '\0';
  char *dot = strrchr(base, '.');
  gint64 r;
  if (dot == NULL || !ts_parse_int(dot + 1, 0, (1 << 24) - 1, &r))
    return -1;
  return (int)r;
}

ts_trace *ts_import_files(ts_import_format f, const char *const *paths, int npaths,
                          const ts_topo *t, const ts_import_options *o, GError **error)
{
  if (npaths < 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "expected at least one file to import");
    return NULL;
  }
  if (f == TS_IMPORT_ASTRASIM) {
    if (npaths != 1) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: an ASTRA-sim text workload is one file (every rank runs it); got %d files",
                  paths[1], npaths);
      return NULL;
    }
    g_autofree char *text = NULL;
    gsize len = 0;
    if (!ts_read_input_file(paths[0], MAX_IMPORT_FILE_BYTES, &text, &len, error))
      return NULL;
    return ts_import_astrasim_bytes((const guint8 *)text, len, paths[0], t, error);
  }
  if (f != TS_IMPORT_CHAKRA) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "unknown import format");
    return NULL;
  }
  char **texts = g_new0(char *, npaths);
  gsize *lens = g_new0(gsize, npaths);
  int *ranks = g_new0(int, npaths);
  g_autofree char *groups = NULL;
  ts_trace *tr = NULL;
  gboolean ok = TRUE;
  for (int k = 0; k < npaths && ok; k++) {
    ranks[k] = chakra_rank(paths[k]);
    if (ranks[k] < 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: expected a Chakra trace named NAME.RANK.et (one file per rank)", paths[k]);
      ok = FALSE;
    } else {
      ok = ts_read_input_file(paths[k], MAX_IMPORT_FILE_BYTES, &texts[k], &lens[k], error);
    }
  }
  if (ok && o != NULL && o->comm_groups != NULL)
    ok = ts_read_input_file(o->comm_groups, (gint64)64 << 20, &groups, NULL, error);
  if (ok)
    tr = ts_import_chakra_bytes((const guint8 *const *)texts, lens, paths, ranks, npaths, t, groups,
                                o != NULL ? o->comm_groups : NULL, error);
  for (int k = 0; k < npaths; k++)
    g_free(texts[k]);
  g_free(texts);
  g_free(lens);
  g_free(ranks);
  return tr;
}
