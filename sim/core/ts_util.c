/* ts_util: errors, checked number parsing, locale-free formatting and atomic file output. */
#include "ts_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

G_DEFINE_QUARK(trainsim - error - quark, ts_error)

gboolean ts_parse_double(const char *text, double *out)
{
  if (text == NULL)
    return FALSE;
  while (g_ascii_isspace(*text))
    text++;
  if (*text == '\0')
    return FALSE;
  /* g_ascii_strtod reads C99 hex ("0x10"); no file or option of ours means hex. */
  const char *digits = text + (*text == '-' || *text == '+');
  if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X'))
    return FALSE;
  char *end = NULL;
  errno = 0;
  double v = g_ascii_strtod(text, &end);
  if (end == text || errno == ERANGE)
    return FALSE;
  while (g_ascii_isspace(*end))
    end++;
  if (*end != '\0' || !isfinite(v))
    return FALSE;
  *out = v;
  return TRUE;
}

gboolean ts_parse_int(const char *text, gint64 lo, gint64 hi, gint64 *out)
{
  double v;
  /* Accept "1e3" and "1024" alike, but only whole values. */
  if (!ts_parse_double(text, &v) || v != floor(v) || v < (double)lo || v > (double)hi)
    return FALSE;
  *out = (gint64)v;
  return TRUE;
}

gboolean ts_parse_size(const char *text, double *out)
{
  if (text == NULL)
    return FALSE;
  char *end = NULL;
  errno = 0;
  double v = g_ascii_strtod(text, &end);
  if (end == text || errno == ERANGE || !isfinite(v))
    return FALSE;
  double mult = 1.0;
  static const struct {
    const char *suffix;
    double mult;
  } units[] = {{"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
               {"k", 1e3},     {"K", 1e3},        {"M", 1e6},           {"G", 1e9},
               {"T", 1e12}};
  for (size_t i = 0; i < G_N_ELEMENTS(units); i++) {
    size_t n = strlen(units[i].suffix);
    if (strncmp(end, units[i].suffix, n) == 0) {
      mult = units[i].mult;
      end += n;
      break;
    }
  }
  if (*end == 'B')
    end++;
  if (*end != '\0')
    return FALSE;
  v *= mult;
  if (!(v > 0.0) || !isfinite(v))
    return FALSE;
  *out = v;
  return TRUE;
}

gboolean ts_max_memory_env(double *bytes, GError **error)
{
  const char *env = g_getenv("TRAINSIM_MAX_MEMORY");
  *bytes = 0;
  if (env == NULL || *env == '\0' || ts_parse_size(env, bytes))
    return TRUE;
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "TRAINSIM_MAX_MEMORY '%s': expected a size in bytes, e.g. 16GiB", env);
  return FALSE;
}

gboolean ts_json_depth_ok(const char *text, gssize len, int max_depth, int *line)
{
  const char *end = len < 0 ? text + strlen(text) : text + len;
  int depth = 0, ln = 1;
  gboolean in_str = FALSE;
  for (const char *p = text; p < end; p++) {
    if (*p == '\n')
      ln++;
    if (in_str) {
      if (*p == '\\' && p + 1 < end)
        p++;
      else if (*p == '"')
        in_str = FALSE;
    } else if (*p == '"') {
      in_str = TRUE;
    } else if (*p == '[' || *p == '{') {
      if (++depth > max_depth) {
        *line = ln;
        return FALSE;
      }
    } else if (*p == ']' || *p == '}') {
      depth--;
    }
  }
  return TRUE;
}

static void free_level(gpointer level)
{
  if (level != NULL)
    g_hash_table_unref(level);
}

gboolean ts_json_keys_unique(const char *text, gssize len, int *line, char **key)
{
  /* One set of member names per open object (NULL for an array). Names are compared as
   * written, escapes and all: trainsim writes each name one way. */
  const char *end = len < 0 ? text + strlen(text) : text + len;
  g_autoptr(GPtrArray) open = g_ptr_array_new_with_free_func(free_level);
  gboolean expect_key = FALSE;
  int ln = 1;
  for (const char *p = text; p < end; p++) {
    GHashTable *top = open->len > 0 ? g_ptr_array_index(open, open->len - 1) : NULL;
    if (*p == '\n') {
      ln++;
    } else if (*p == '"') {
      const char *s = ++p;
      while (p < end && *p != '"')
        p += (*p == '\\' && p + 1 < end) ? 2 : 1;
      if (top != NULL && expect_key) {
        char *k = g_strndup(s, (gsize)(p - s));
        if (g_hash_table_contains(top, k)) {
          *line = ln;
          *key = k;
          return FALSE;
        }
        g_hash_table_add(top, k);
        expect_key = FALSE;
      }
    } else if (*p == '{') {
      g_ptr_array_add(open, g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL));
      expect_key = TRUE;
    } else if (*p == '[') {
      g_ptr_array_add(open, NULL);
      expect_key = FALSE;
    } else if ((*p == '}' || *p == ']') && open->len > 0) {
      g_ptr_array_remove_index(open, open->len - 1);
      expect_key = FALSE;
    } else if (*p == ',') {
      expect_key = top != NULL;
    }
  }
  return TRUE;
}

/* GKeyFile's parse errors quote the offending line raw (binary and all) without its number;
 * find it ourselves and show a short, printable excerpt. */
static void kf_syntax_error(const char *path, const char *text, gsize len, GError **error)
{
  int line = 0;
  gboolean in_group = FALSE, orphan = FALSE;
  GString *excerpt = g_string_new(NULL);
  if (text != NULL) {
    const char *p = text, *end = text + len;
    while (p < end) {
      line++;
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      const char *le = nl ? nl : end;
      const char *q = p;
      while (q < le && (*q == ' ' || *q == '\t'))
        q++;
      /* A group line as GKeyFile reads one: '[', a non-empty name without brackets, ']', then
       * only blanks ("[]", "[a]x" and "[a]]" were taken for groups, and the error pointed at
       * the line after the last with an empty excerpt). */
      gboolean group = FALSE;
      if (*q == '[') {
        const char *r = q + 1;
        while (r < le && *r != ']' && *r != '[')
          r++;
        group = r > q + 1 && r < le && *r == ']';
        /* GKeyFile drops the '\r' of a CRLF line end. */
        for (r++; group && r < le; r++)
          group = *r == ' ' || *r == '\t' || (*r == '\r' && r + 1 == le);
      }
      gboolean key = !group && q < le && *q != '#' && *q != ';' && *q != '=' &&
                     memchr(q, '=', (size_t)(le - q)) != NULL;
      gboolean ok = q == le || *q == '#' || *q == ';' || group || key;
      in_group |= group;
      /* A key before the first [group] is a well-formed line GKeyFile still refuses: name it,
       * not an empty excerpt of the line after the last. */
      orphan = key && !in_group;
      if (!ok || orphan || memchr(p, '\0', (size_t)(le - p)) != NULL ||
          !g_utf8_validate(p, le - p, NULL)) {
        for (const char *c = p; c < le && excerpt->len < 40; c++)
          if (*c == '\r')
            g_string_append(excerpt, "\\r"); /* a CRLF file: say so, not '?' or nothing */
          else
            g_string_append_c(excerpt, g_ascii_isprint(*c) ? *c : '?');
        break;
      }
      p = le + 1;
    }
  }
  if (orphan)
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s:%d: '%s': a key before any [group]; expected a [group] line first", path, line,
                excerpt->str);
  else
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s:%d: '%s': expected a [group] line, a key = value line or a # comment", path,
                line, excerpt->str);
  g_string_free(excerpt, TRUE);
}

/* Names and texts go into JSON and CSV outputs as they are: a [model] name with a 0xff byte
 * made results.json invalid UTF-8 (not JSON). Checked once the file parses, so a line that is
 * no INI at all still gets the syntax error with its excerpt. */
static gboolean kf_check_utf8(const char *path, const char *text, gsize len, GError **error)
{
  const char *bad = NULL;
  if (g_utf8_validate(text, (gssize)len, &bad))
    return TRUE;
  int line = 1;
  for (const char *q = text; q < bad; q++)
    line += *q == '\n';
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "%s:%d: byte %" G_GSIZE_FORMAT " (0x%02x) is not UTF-8; expected a UTF-8 text file",
              path, line, (gsize)(bad - text) + 1, (unsigned)(unsigned char)*bad);
  return FALSE;
}

/* GKeyFile merges a group given twice and keeps the last of a key given twice, silently: a
 * pasted second [chip] or a repeated key would change the machine without a word. Refuse
 * both, naming the two lines. */
static gboolean kf_check_duplicates(const char *path, const char *text, gsize len, GError **error)
{
  /* Windows editors save UTF-8 with a byte-order mark, which GKeyFile takes for a key before
   * any group: "'???# TPU v3 ...': a key before any [group]". Say what it is. */
  if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s:1: starts with a UTF-8 byte-order mark (EF BB BF); expected a file without "
                "one (save it as UTF-8 without BOM)",
                path);
    return FALSE;
  }
  /* A binary file given by mistake (a trace, an executable): say so, not its first bytes. A
   * text line that is not UTF-8 is shown with '?' for its odd bytes (kf_syntax_error). */
  const char *nul = memchr(text, '\0', len);
  if (nul != NULL) {
    int line = 1;
    for (const char *q = text; q < nul; q++)
      line += *q == '\n';
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s:%d: binary data (byte %" G_GSIZE_FORMAT " is NUL); expected an INI text file",
                path, line, (gsize)(nul - text) + 1);
    return FALSE;
  }
  g_autoptr(GHashTable) groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GHashTable) keys = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *group = NULL;
  const char *p = text, *end = text + len;
  for (int line = 1; p < end; line++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    g_autofree char *l = g_strndup(p, (gsize)(le - p));
    g_strstrip(l);
    p = le + 1;
    if (*l == '\0' || *l == '#' || *l == ';')
      continue;
    if (*l == '[') {
      char *close = strchr(l, ']');
      if (close == NULL)
        continue; /* the syntax check names it */
      g_free(group);
      group = g_strndup(l + 1, (gsize)(close - l - 1));
      gpointer first = g_hash_table_lookup(groups, group);
      if (first != NULL) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "%s:%d: [%s]: group given twice (first at line %d); expected each group once",
                    path, line, group, GPOINTER_TO_INT(first));
        return FALSE;
      }
      g_hash_table_insert(groups, g_strdup(group), GINT_TO_POINTER(line));
      g_hash_table_remove_all(keys);
      continue;
    }
    char *eq = strchr(l, '=');
    if (eq == NULL)
      continue;
    *eq = '\0';
    g_strchomp(l);
    gpointer first = g_hash_table_lookup(keys, l);
    if (first != NULL) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s:%d: [%s] %s: key given twice (first at line %d); expected each key once",
                  path, line, group != NULL ? group : "", l, GPOINTER_TO_INT(first));
      return FALSE;
    }
    g_hash_table_insert(keys, g_strdup(l), GINT_TO_POINTER(line));
  }
  return TRUE;
}

GKeyFile *ts_kf_load(const char *path, GError **error)
{
  /* Read once; the checks and the parse all work on that text (ts_kf_load_data). */
  g_autofree char *text = NULL;
  gsize len = 0;
  g_autoptr(GError) local = NULL;
  if (!g_file_get_contents(path, &text, &len, &local)) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot read: %s", path,
                g_strerror(local->code == G_FILE_ERROR_NOENT ? ENOENT : EIO));
    return NULL;
  }
  return ts_kf_load_data(text, len, path, error);
}

static char *kf_raw(GKeyFile *kf, const char *group, const char *key)
{
  /* GKeyFile keeps trailing comments as part of the value ("123  # dense bf16"); strip a
   * "#" comment and surrounding blanks so files can annotate values with their sources. */
  char *v = g_key_file_get_value(kf, group, key, NULL);
  if (v == NULL)
    return NULL;
  char *hash = strchr(v, '#');
  if (hash != NULL)
    *hash = '\0';
  g_strstrip(v);
  return v;
}

GKeyFile *ts_kf_load_data(const char *text, gsize len, const char *path, GError **error)
{
  if (!kf_check_duplicates(path, text, len, error))
    return NULL;
  g_autoptr(GKeyFile) kf = g_key_file_new();
  if (!g_key_file_load_from_data(kf, text, len, G_KEY_FILE_NONE, NULL)) {
    kf_syntax_error(path, text, len, error);
    return NULL;
  }
  if (!kf_check_utf8(path, text, len, error))
    return NULL;
  return g_steal_pointer(&kf);
}

gboolean ts_kf_double(GKeyFile *kf, const char *path, const char *group, const char *key,
                      gboolean has_default, double def, double lo, double hi, const char *what,
                      double *out, GError **error)
{
  g_autofree char *v = kf_raw(kf, group, key);
  if (v == NULL) {
    if (has_default) {
      *out = def;
      return TRUE;
    }
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s: missing; expected %s", path, group,
                key, what);
    return FALSE;
  }
  double d;
  if (!ts_parse_double(v, &d) || d < lo || d > hi) {
    g_autofree char *los = ts_dtostr_short(lo);
    g_autofree char *his = ts_dtostr_short(hi);
    /* Many callers' texts already state their range ("..., in (0, 1048576]"): say it once. */
    gboolean has_range = strstr(what, " in [") != NULL || strstr(what, " in (") != NULL;
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s='%s': expected %s%s%s%s%s%s", path,
                group, key, v, what, has_range ? "" : " in [", has_range ? "" : los,
                has_range ? "" : ", ", has_range ? "" : his, has_range ? "" : "]");
    return FALSE;
  }
  *out = d;
  return TRUE;
}

gboolean ts_kf_int(GKeyFile *kf, const char *path, const char *group, const char *key,
                   gboolean has_default, gint64 def, gint64 lo, gint64 hi, const char *what,
                   gint64 *out, GError **error)
{
  g_autofree char *v = kf_raw(kf, group, key);
  if (v == NULL) {
    if (has_default) {
      *out = def;
      return TRUE;
    }
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s: missing; expected %s", path, group,
                key, what);
    return FALSE;
  }
  if (!ts_parse_int(v, lo, hi, out) &&
      (strstr(what, " in [") != NULL || strstr(what, ">=") != NULL)) {
    /* The caller's text states the range already: say it once. */
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s='%s': expected %s", path, group, key,
                v, what);
    return FALSE;
  }
  if (!ts_parse_int(v, lo, hi, out)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [%s] %s='%s': expected %s, a whole number in [%" G_GINT64_FORMAT
                ", %" G_GINT64_FORMAT "]",
                path, group, key, v, what, lo, hi);
    return FALSE;
  }
  return TRUE;
}

gboolean ts_kf_string(GKeyFile *kf, const char *path, const char *group, const char *key,
                      const char *def, char **out, GError **error)
{
  (void)path;
  (void)error;
  char *v = kf_raw(kf, group, key);
  if (v == NULL) {
    *out = g_strdup(def);
    return TRUE;
  }
  *out = v;
  return TRUE;
}

gboolean ts_kf_check_keys(GKeyFile *kf, const char *path, const char *group,
                          const char *const *allowed, GError **error)
{
  gsize n = 0;
  g_auto(GStrv) keys = g_key_file_get_keys(kf, group, &n, NULL);
  for (gsize i = 0; i < n; i++) {
    gboolean ok = FALSE;
    for (const char *const *a = allowed; *a != NULL; a++)
      if (strcmp(keys[i], *a) == 0)
        ok = TRUE;
    if (!ok) {
      g_autofree char *list = g_strjoinv(", ", (char **)allowed);
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: [%s] %s: unknown key; expected one of: %s",
                  path, group, keys[i], list);
      return FALSE;
    }
  }
  return TRUE;
}

/* The shortest of %.15g and %.17g that reads back as v: "1e-15", not "1.0000000000000001e-15",
 * for the bounds an error message quotes. */
char *ts_dtostr_short(double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_formatd(buf, sizeof buf, "%.15g", v);
  return g_ascii_strtod(buf, NULL) == v ? g_strdup(buf) : ts_dtostr(v);
}

char *ts_dtostr(double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  return g_strdup(g_ascii_formatd(buf, sizeof buf, "%.17g", v));
}

void ts_append_g(GString *s, int digits, double v)
{
  char fmt[16], buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_snprintf(fmt, sizeof fmt, "%%.%dg", digits);
  g_string_append(s, g_ascii_formatd(buf, sizeof buf, fmt, v));
}

const char *ts_fmt_time(char *buf, size_t n, double s)
{
  char num[G_ASCII_DTOSTR_BUF_SIZE];
  const char *unit;
  double v;
  if (s == 0.0) {
    g_snprintf(buf, n, "0 s");
    return buf;
  }
  if (s >= 1.0) {
    v = s;
    unit = "s";
  } else if (s >= 1e-3) {
    v = s * 1e3;
    unit = "ms";
  } else {
    v = s * 1e6;
    unit = "us";
  }
  const char *fmt = v >= 100.0 ? "%.0f" : v >= 10.0 ? "%.1f" : "%.2f";
  g_snprintf(buf, n, "%s %s", g_ascii_formatd(num, sizeof num, fmt, v), unit);
  return buf;
}

const char *ts_fmt_bytes(char *buf, size_t n, double b)
{
  char num[G_ASCII_DTOSTR_BUF_SIZE];
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024.0 && u < 5) {
    b /= 1024.0;
    u++;
  }
  const char *fmt = u == 0 ? "%.0f" : b >= 100.0 ? "%.0f" : b >= 10.0 ? "%.1f" : "%.2f";
  g_snprintf(buf, n, "%s %s", g_ascii_formatd(num, sizeof num, fmt, b), units[u]);
  return buf;
}

/* The file a symbolic link chain ends at (path itself when it is no link); NULL and an error
 * after 40 links (a loop). A dangling link gives the missing file it names, which is created. */
static char *follow_links(const char *path, GError **error)
{
  char *target = g_strdup(path);
  for (int hops = 0; hops < 40; hops++) {
    if (!g_file_test(target, G_FILE_TEST_IS_SYMLINK))
      return target;
    g_autofree char *link = g_file_read_link(target, NULL);
    if (link == NULL)
      return target;
    char *next;
    if (g_path_is_absolute(link)) {
      next = g_strdup(link);
    } else {
      g_autofree char *dir = g_path_get_dirname(target);
      next = g_build_filename(dir, link, NULL);
    }
    g_free(target);
    target = next;
  }
  g_set_error(error, TS_ERROR, TS_ERROR_IO,
              "%s: cannot write: too many levels of symbolic links; expected a file", path);
  g_free(target);
  return NULL;
}

gboolean ts_write_file_atomic(const char *path, const char *contents, gsize len, GError **error)
{
  /* -o '' wrote a temporary in the current folder and failed to rename it: "Failed to rename
   * file “.6O2QZ3” to “”: g_rename() failed". */
  if (*path == '\0') {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "'': expected a file name (or - for stdout)");
    return FALSE;
  }
  if (strcmp(path, "-") == 0) {
    if (fwrite(contents, 1, len, stdout) != len || fflush(stdout) != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "<stdout>: write failed: %s", g_strerror(errno));
      return FALSE;
    }
    return TRUE;
  }
  /* A symbolic link is written through, as cp and shell redirection do: the temporary-file
   * rename below would otherwise replace the link itself by a regular file (a golden file
   * linked from a shared folder, `check --update`, would stop being shared). */
  g_autofree char *resolved = follow_links(path, error);
  if (resolved == NULL)
    return FALSE;
  if (strcmp(resolved, path) != 0)
    return ts_write_file_atomic(resolved, contents, len, error);
  /* A device, FIFO or terminal (-o /dev/null, /dev/stdout, a pipe) is written in place: the
   * rename below would replace the device node itself by a regular file (as root, /dev/null). */
  GStatBuf st;
  if (g_stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) {
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: is a folder; expected a file name", path);
      return FALSE;
    }
    FILE *f = fopen(path, "w");
    gboolean ok = f != NULL && fwrite(contents, 1, len, f) == len && fflush(f) == 0;
    int saved = errno;
    if (f != NULL && fclose(f) != 0 && ok) {
      ok = FALSE;
      saved = errno;
    }
    if (!ok) {
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot write: %s", path, g_strerror(saved));
      return FALSE;
    }
    return TRUE;
  }
  /* g_file_set_contents writes a temporary file in the same folder and renames it: name the
   * folder when it is missing, not the temporary. */
  g_autofree char *dir = g_path_get_dirname(path);
  if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO,
                "%s: cannot write: folder %s does not exist; expected an existing folder", path,
                dir);
    return FALSE;
  }
  g_autoptr(GError) local = NULL;
  if (!g_file_set_contents(path, contents, (gssize)len, &local)) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot write: %s", path, local->message);
    return FALSE;
  }
  return TRUE;
}

#ifndef TS_DATA_DIR
#define TS_DATA_DIR "/usr/local/share/trainsim"
#endif

const char *const *ts_data_roots(void)
{
  static const char *roots[5];
  static gsize once = 0;
  if (g_once_init_enter(&once)) {
    int n = 0;
    const char *env = g_getenv("TRAINSIM_DATA_DIR");
    if (env != NULL && *env != '\0')
      roots[n++] = g_strdup(env);
    /* Relative to the program, so an install unpacked anywhere (dpkg -x, a tarball, a
     * relocated prefix) finds its own data without the source tree. */
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    if (exe != NULL) {
      g_autofree char *bindir = g_path_get_dirname(exe);
      g_autofree char *prefix = g_path_get_dirname(bindir);
      char *share = g_build_filename(prefix, "share", "trainsim", NULL);
      if (g_file_test(share, G_FILE_TEST_IS_DIR))
        roots[n++] = share;
      else
        g_free(share);
    }
    roots[n++] = TS_DATA_DIR;
    roots[n++] = TS_SOURCE_DIR;
    roots[n] = NULL;
    g_once_init_leave(&once, 1);
  }
  return roots;
}

char *ts_find_data_file(const char *rel)
{
  for (const char *const *r = ts_data_roots(); *r != NULL; r++) {
    char *p = g_build_filename(*r, rel, NULL);
    if (g_file_test(p, G_FILE_TEST_IS_REGULAR))
      return p;
    g_free(p);
  }
  return NULL;
}

char *ts_data_roots_text(void)
{
  return g_strjoinv(":", (char **)ts_data_roots());
}

char *ts_resolve_data_file(const char *name, const char *dir, GError **error)
{
  if (name == NULL || *name == '\0') {
    /* dir is "models" or "topologies": the option is --model or --topology. */
    g_autofree char *opt = g_strndup(
        dir, strlen(dir) > 1 && g_str_has_suffix(dir, "ies") ? strlen(dir) - 3 : strlen(dir) - 1);
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--%s%s '': empty; expected a file path or a shipped name in %s/", opt,
                g_str_has_suffix(dir, "ies") ? "y" : "", dir);
    return NULL;
  }
  if (g_file_test(name, G_FILE_TEST_IS_REGULAR))
    return g_strdup(name);
  if (g_file_test(name, G_FILE_TEST_EXISTS)) {
    /* A folder, FIFO or device: reading it would fail oddly or block; say what it is. */
    GStatBuf st;
    const char *kind = "not a regular file";
    if (g_stat(name, &st) == 0)
      kind = S_ISDIR(st.st_mode)                          ? "a directory"
             : S_ISFIFO(st.st_mode)                       ? "a FIFO"
             : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                          : kind;
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: %s; expected a regular file (%s/NAME.ini)",
                name, kind, dir);
    return NULL;
  }
  /* Shipped names may name a subfolder (topologies/chips/h100); never an absolute or
   * parent-relative path, which is a file the user meant and did not find. */
  g_autofree char *file =
      g_str_has_suffix(name, ".ini") ? g_strdup(name) : g_strconcat(name, ".ini", NULL);
  if (!g_path_is_absolute(name) && !g_str_has_prefix(name, ".") && strstr(name, "..") == NULL) {
    g_autofree char *rel = g_build_filename(dir, file, NULL);
    char *p = ts_find_data_file(rel);
    if (p != NULL)
      return p;
  } else {
    /* Not a shipped name: "no topologies//tmp/x.ini.ini shipped" said nothing useful. */
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: no such file; expected a %s file (%s/NAME.ini)",
                name, g_str_has_suffix(dir, "ies") ? "topology" : "model", dir);
    return NULL;
  }
  g_autofree char *roots = ts_data_roots_text();
  g_set_error(error, TS_ERROR, TS_ERROR_IO,
              "%s: no such file, and no %s/%s shipped; expected a file path or a shipped name "
              "(searched %s; set TRAINSIM_DATA_DIR to add a folder)",
              name, dir, file, roots);
  return NULL;
}

static char *created_dir;

void ts_note_created_dir(const char *dir)
{
  g_free(created_dir);
  created_dir = g_strdup(dir);
}

gboolean ts_write_set(const char *dir, const char *const *names, const char *const *texts, int n,
                      const char *cmd, GError **error)
{
  g_autoptr(GPtrArray) tmps = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) finals = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GString) replaced = g_string_new(NULL);
  gboolean ok = TRUE;
  for (int i = 0; i < n && ok; i++) {
    char *final = g_build_filename(dir, names[i], NULL);
    g_ptr_array_add(finals, final);
    if (g_file_test(final, G_FILE_TEST_EXISTS)) {
      if (!g_file_test(final, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, TS_ERROR, TS_ERROR_IO,
                    "%s: exists and is not a regular file; expected a file trainsim may replace "
                    "(nothing was written)",
                    final);
        ok = FALSE;
        break;
      }
      g_string_append_printf(replaced, "%s%s", replaced->len ? ", " : "", names[i]);
    }
    char *tmp = g_strdup_printf("%s/.%s.XXXXXX", dir, names[i]);
    int fd = g_mkstemp_full(tmp, O_WRONLY, 0644);
    if (fd < 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot write: %s (nothing was written)", final,
                  g_strerror(errno));
      g_free(tmp);
      ok = FALSE;
      break;
    }
    g_ptr_array_add(tmps, tmp);
    gboolean w = ts_write_all(fd, texts[i], strlen(texts[i]));
    int saved = errno;
    if (close(fd) != 0 && w) {
      w = FALSE;
      saved = errno;
    }
    if (!w) {
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot write: %s (nothing was written)", final,
                  g_strerror(saved));
      ok = FALSE;
    }
  }
  if (!ok) {
    for (guint i = 0; i < tmps->len; i++)
      g_unlink(g_ptr_array_index(tmps, i));
    return FALSE;
  }
  if (replaced->len > 0)
    fprintf(stderr, "trainsim %s: replacing %s in %s\n", cmd, replaced->str, dir);
  if (created_dir != NULL && strcmp(created_dir, dir) == 0) {
    fprintf(stderr, "trainsim %s: created folder %s\n", cmd, dir);
    g_clear_pointer(&created_dir, g_free);
  }
  for (guint i = 0; i < tmps->len; i++)
    if (g_rename(g_ptr_array_index(tmps, i), g_ptr_array_index(finals, i)) != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot replace: %s",
                  (char *)g_ptr_array_index(finals, i), g_strerror(errno));
      for (guint j = i; j < tmps->len; j++)
        g_unlink(g_ptr_array_index(tmps, j));
      return FALSE;
    }
  return TRUE;
}

gboolean ts_write_all(int fd, const void *buf, gsize n)
{
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return FALSE;
    p += w;
    n -= (gsize)w;
  }
  return TRUE;
}

int ts_read_all(int fd, void *buf, gsize n)
{
  char *p = buf;
  gsize got = 0;
  while (got < n) {
    ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return got == 0 && r == 0 ? 0 : -1;
    got += (gsize)r;
  }
  return 1;
}

void ts_csv_append(GString *s, const char *v)
{
  if (strpbrk(v, ",\"\n\r") == NULL) {
    g_string_append(s, v);
    return;
  }
  g_string_append_c(s, '"');
  for (const char *p = v; *p; p++) {
    if (*p == '"')
      g_string_append_c(s, '"');
    g_string_append_c(s, *p);
  }
  g_string_append_c(s, '"');
}

void ts_append_cell(GString *s, const char *text, int w, gboolean right)
{
  int len = (int)g_utf8_strlen(text, -1);
  if (right)
    for (int i = len; i < w; i++)
      g_string_append_c(s, ' ');
  g_string_append(s, text);
  if (!right)
    for (int i = len; i < w; i++)
      g_string_append_c(s, ' ');
}

/* RFC 8259 section 7: quotes, backslashes and control characters escaped. */
void ts_json_append_string(GString *s, const char *v)
{
  g_string_append_c(s, '"');
  for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
    switch (*p) {
    case '"':
      g_string_append(s, "\\\"");
      break;
    case '\\':
      g_string_append(s, "\\\\");
      break;
    case '\b':
      g_string_append(s, "\\b");
      break;
    case '\f':
      g_string_append(s, "\\f");
      break;
    case '\n':
      g_string_append(s, "\\n");
      break;
    case '\r':
      g_string_append(s, "\\r");
      break;
    case '\t':
      g_string_append(s, "\\t");
      break;
    default:
      if (*p < 0x20)
        g_string_append_printf(s, "\\u%04x", *p);
      else
        g_string_append_c(s, (char)*p);
    }
  }
  g_string_append_c(s, '"');
}
