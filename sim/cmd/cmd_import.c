/* cmd_import: `trainsim import`, reads traces other tools record (Chakra execution traces,
 * ASTRA-sim text workloads) and writes them as a trainsim trace. */
#include "ts_cmd.h"
#include "ts_import.h"
#include "ts_util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ts_cmd_import(int argc, char **argv)
{
  g_autofree char *from = NULL, *topo_name = NULL, *out = NULL, *groups = NULL;
  GOptionEntry entries[] = {
      {"from", 0, 0, G_OPTION_ARG_STRING, &from,
       "chakra (one NAME.RANK.et per rank) or astrasim (a text workload); default: detected", "F"},
      {"topology", 't', 0, G_OPTION_ARG_FILENAME, &topo_name,
       "Topology the trace is for (one rank per chip)", "T"},
      {"comm-groups", 0, 0, G_OPTION_ARG_FILENAME, &groups,
       "chakra: process groups as ASTRA-sim's JSON {\"GROUP\": [ranks]} (default: collectives "
       "span every rank)",
       "FILE"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Trace file to write (default: stdout)",
       "FILE"},
      {NULL}};
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse("import", "FILE...",
                    "Reads a Chakra execution trace or an ASTRA-sim text workload and writes it "
                    "as a trainsim trace (docs/formats.md#importing-and-exporting).",
                    "Example:\n  trainsim import --from astrasim -t dgx-a100-1node "
                    "traces/imported/astrasim/Resnet50_DataParallel.txt -o resnet.trace\n"
                    "  trainsim replay resnet.trace -t dgx-a100-1node",
                    entries, &argc, &argv, &err))
    return ts_cmd_fail("import", err);
  if (argc < 2 || topo_name == NULL) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "expected FILE... and --topology T");
    return ts_cmd_fail("import", err);
  }
  g_autoptr(ts_topo) topo = ts_cmd_load_topo(topo_name, NULL, &err);
  if (topo == NULL)
    return ts_cmd_fail("import", err);
  ts_import_options o = {.comm_groups = groups};
  g_autoptr(ts_trace) tr =
      ts_cmd_import_trace("import", from, (const char *const *)argv + 1, argc - 1, topo, &o, &err);
  if (tr == NULL)
    return ts_cmd_fail("import", err);
  g_autofree char *text = ts_trace_to_text(tr);
  if (!ts_write_file_atomic(out ? out : "-", text, strlen(text), &err))
    return ts_cmd_fail("import", err);
  if (out != NULL && strcmp(out, "-") != 0)
    fprintf(stderr, "trainsim import: wrote %s (%d ranks, %" G_GINT64_FORMAT " ops)\n", out,
            tr->nranks, ts_trace_nops(tr));
  return 0;
}

/* The first bytes of a regular file (what is not one is refused as ts_read_input_file does). */
static gboolean read_head(const char *path, guint8 *buf, gsize cap, gsize *len, GError **error)
{
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  struct stat st;
  memset(&st, 0, sizeof st);
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0)
      close(fd);
    char *text = NULL;
    if (ts_read_input_file(path, 0, &text, NULL, error)) { /* gives the one-line refusal */
      g_free(text);
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: changed while read", path);
    }
    return FALSE;
  }
  ssize_t r;
  do
    r = read(fd, buf, cap);
  while (r < 0 && errno == EINTR);
  close(fd);
  if (r < 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot read: %s", path, g_strerror(errno));
    return FALSE;
  }
  *len = (gsize)r;
  return TRUE;
}

/* Ranks of NAME.RANK.et files beside the first Chakra file given (its trace's other ranks). */
static int chakra_ranks_on_disk(const char *path, char **pattern)
{
  g_autofree char *dir = g_path_get_dirname(path), *base = g_path_get_basename(path);
  gsize n = strlen(base);
  char *dot = n > 3 ? strrchr(base, '.') : NULL; /* ".et" */
  if (dot == NULL)
    return 0;
  *dot = '\0';
  dot = strrchr(base, '.'); /* ".RANK" */
  if (dot == NULL)
    return 0;
  *dot = '\0';
  *pattern = g_build_filename(dir, base, NULL);
  g_autofree char *pfx = g_strconcat(base, ".", NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  int count = 0;
  for (const char *e; d != NULL && (e = g_dir_read_name(d)) != NULL;) {
    gsize len = strlen(e), pl = strlen(pfx);
    gint64 r;
    if (len > pl + 3 && strncmp(e, pfx, pl) == 0 && strcmp(e + len - 3, ".et") == 0) {
      g_autofree char *num = g_strndup(e + pl, len - pl - 3);
      count += ts_parse_int(num, 0, (1 << 24) - 1, &r) ? 1 : 0;
    }
  }
  if (d != NULL)
    g_dir_close(d);
  return count;
}

/* Chakra collectives without --comm-groups span only the ranks given: with one rank's file of
 * an 8-rank trace they move nothing and the step is 0 s. Say so on stderr (one line). */
static void note_missing_ranks(const char *cmd, const char *const *paths, int n, const ts_trace *tr,
                               const ts_import_options *o)
{
  if ((o != NULL && o->comm_groups != NULL) || tr->groups == NULL || tr->groups->len == 0)
    return;
  g_autofree char *pattern = NULL;
  int ondisk = chakra_ranks_on_disk(paths[0], &pattern);
  if (ondisk > n)
    fprintf(stderr,
            "trainsim %s: note: %s.*.et holds %d ranks but %d %s given: collectives run over the "
            "ranks given only, so communication with the other %d is not simulated; give all %d "
            "files (%s.*.et)\n",
            cmd, pattern, ondisk, n, n == 1 ? "was" : "were", ondisk - n, ondisk, pattern);
  else if (n == 1)
    fprintf(stderr,
            "trainsim %s: note: %s: one rank given, so its collectives move no data; give every "
            "rank's file (NAME.RANK.et)\n",
            cmd, paths[0]);
}

ts_trace *ts_cmd_import_trace(const char *cmd, const char *from, const char *const *paths, int n,
                              const ts_topo *topo, const ts_import_options *o, GError **error)
{
  int f = -1;
  if (from != NULL) {
    f = ts_import_format_parse(from);
    if (f < 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--from '%s': expected chakra or astrasim",
                  from);
      return NULL;
    }
  } else {
    /* Detected from the first bytes of the first file. */
    guint8 head[64];
    gsize len = 0;
    if (!read_head(paths[0], head, sizeof head, &len, error))
      return NULL;
    f = ts_import_detect(head, len);
    if (f == TS_IMPORT_NFORMATS && n == 1) {
      ts_trace *tr = ts_trace_load(paths[0], error);
      if (tr != NULL &&
          (!ts_trace_check(tr, topo, error) || !ts_trace_resolve_algos(tr, topo, error))) {
        g_prefix_error(error, "%s: ", paths[0]);
        ts_trace_free(tr);
        return NULL;
      }
      return tr;
    }
    if (f < 0 || f == TS_IMPORT_NFORMATS) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: neither a trainsim trace, a Chakra trace nor an ASTRA-sim workload; "
                  "expected one of them (or say --from chakra|astrasim)",
                  paths[0]);
      return NULL;
    }
  }
  ts_trace *tr = ts_import_files((ts_import_format)f, paths, n, topo, o, error);
  if (tr != NULL && !ts_trace_resolve_algos(tr, topo, error)) {
    ts_trace_free(tr);
    return NULL;
  }
  if (tr != NULL && f == TS_IMPORT_CHAKRA)
    note_missing_ranks(cmd, paths, n, tr, o);
  return tr;
}
