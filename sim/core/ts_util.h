/* ts_util: errors, checked number parsing, locale-free formatting and atomic file output. */
#ifndef TS_UTIL_H
#define TS_UTIL_H

#include <glib.h>
#include <stdio.h>

G_BEGIN_DECLS

/** Error domain of every trainsim input error; every code maps to exit status 2. */
#define TS_ERROR (ts_error_quark())
GQuark ts_error_quark(void);

typedef enum {
  TS_ERROR_INPUT,   /* a file, option or value the user gave is wrong */
  TS_ERROR_IO,      /* a file could not be read or written */
  TS_ERROR_INVALID, /* inputs are each valid but do not fit together (split vs array) */
  TS_ERROR_BACKEND, /* the backend could not run the trace (deadlock, engine refusal) */
} ts_error_code;

/** Exit status of the program for bad input of any kind. */
#define TS_EXIT_INPUT 2

/** Largest count trainsim accepts for sizes, degrees and layer dimensions (2^40). */
#define TS_MAX_COUNT 1099511627776.0

/**
 * Reads a finite number from GKeyFile [group] key. Missing key: *out = def and TRUE when
 * has_default, else an error. Rejects trailing junk, NaN, inf, and values outside [lo, hi].
 * what: the expected thing in words, e.g. "a bandwidth in GB/s". path names the file.
 */
gboolean ts_kf_double(GKeyFile *kf, const char *path, const char *group, const char *key,
                      gboolean has_default, double def, double lo, double hi, const char *what,
                      double *out, GError **error);

/** As ts_kf_double for whole numbers in [lo, hi]. */
gboolean ts_kf_int(GKeyFile *kf, const char *path, const char *group, const char *key,
                   gboolean has_default, gint64 def, gint64 lo, gint64 hi, const char *what,
                   gint64 *out, GError **error);

/** String value of [group] key, or a copy of def (may be NULL) when absent. Caller frees. */
gboolean ts_kf_string(GKeyFile *kf, const char *path, const char *group, const char *key,
                      const char *def, char **out, GError **error);

/**
 * Rejects any key of [group] not listed in allowed (NULL-terminated), naming the file, the
 * group and the key, and the allowed keys, so a typo never passes silently.
 */
gboolean ts_kf_check_keys(GKeyFile *kf, const char *path, const char *group,
                          const char *const *allowed, GError **error);

/** Loads a key file, error messages prefixed with the path. */
GKeyFile *ts_kf_load(const char *path, GError **error);

/** Parses key-file text already in memory; a syntax error names path, line and an excerpt. */
GKeyFile *ts_kf_load_data(const char *text, gsize len, const char *path, GError **error);

/**
 * Parses a number with an optional SI / binary suffix (k, M, G, T, Ki, Mi, Gi, Ti, and an
 * optional trailing "B"): "1e9", "64M", "1GiB". Whole string must be consumed; finite, > 0.
 */
gboolean ts_parse_size(const char *text, double *out);

/**
 * TRAINSIM_MAX_MEMORY, the bytes a simulation's trace may take: *bytes is the size, or 0 when
 * the variable is unset or empty. FALSE (TS_ERROR_INPUT, naming the variable) when it is not a
 * size ts_parse_size reads. main() checks it before any command; ts_plan_trace reads it.
 */
gboolean ts_max_memory_env(double *bytes, GError **error);

/**
 * Checks that JSON text (len bytes, or NUL-terminated when len < 0) nests arrays and objects at
 * most max_depth deep, before a recursive parser sees it (json-glib overflowed the stack on
 * 200,000 '['). FALSE sets *line to the line where the limit is passed.
 */
gboolean ts_json_depth_ok(const char *text, gssize len, int max_depth, int *line);
#define TS_JSON_MAX_DEPTH 64

/**
 * Checks that no object of JSON text (len bytes, or NUL-terminated when len < 0; already parsed
 * as valid) names a member twice: json-glib keeps the last of the two silently. FALSE sets
 * *line to the second one's line and *key to its name as written (caller frees).
 */
gboolean ts_json_keys_unique(const char *text, gssize len, int *line, char **key);

/** Parses a plain finite number (locale-independent); whole string must be consumed. */
gboolean ts_parse_double(const char *text, double *out);

/** Parses a whole number in [lo, hi]; whole string must be consumed. */
gboolean ts_parse_int(const char *text, gint64 lo, gint64 hi, gint64 *out);

/** Formats a double so it reads back exactly (locale-independent, "%.17g"). Caller frees. */
char *ts_dtostr(double v);
/** The shortest of "%.15g" and "%.17g" that reads back exactly, for a value an error message
 * quotes ("1e+300", not "1.0000000000000001e+300"). Caller frees. */
char *ts_dtostr_short(double v);

/** Appends a double in %.*g, locale independent, to s. */
void ts_append_g(GString *s, int digits, double v);

/** Human-readable duration "412 ms", "1.19 s", "35.2 us" into buf (size >= 32). */
const char *ts_fmt_time(char *buf, size_t n, double seconds);

/** Human-readable byte count "21.3 GiB" into buf (size >= 32). */
const char *ts_fmt_bytes(char *buf, size_t n, double bytes);

/**
 * Writes contents to path atomically: a temporary file beside it, then rename, so a failed
 * run never leaves a half-written output file. path "-" writes to stdout.
 */
gboolean ts_write_file_atomic(const char *path, const char *contents, gsize len, GError **error);

/**
 * The folders searched for shipped data (models/, topologies/, plots/), first match wins:
 * $TRAINSIM_DATA_DIR, <program dir>/../share/trainsim (an install, relocated or not), the
 * configured install prefix's share/trainsim, then the source tree. NULL-terminated; borrowed.
 */
const char *const *ts_data_roots(void);

/** The first "<root>/<rel>" over ts_data_roots() that is a regular file, or NULL. Caller frees. */
char *ts_find_data_file(const char *rel);

/** The search path as one "a:b:c" text for error messages. Caller frees. */
char *ts_data_roots_text(void);

/**
 * Resolves a model or topology name: an existing path is used as is, else
 * "<root>/<dir>/<name>.ini" over ts_data_roots(). Caller frees. Returns NULL with an error
 * naming what was tried; a path that exists but is not a regular file is named as such.
 */
char *ts_resolve_data_file(const char *name, const char *dir, GError **error);

/**
 * Writes a set of n files into dir as one: every file is first written in full to a temporary
 * beside its target, and only when all are written are they renamed into place, so a failed
 * write leaves the previous set whole (no new sweep.csv beside an old sweep.json). A target
 * that exists but is not a regular file fails before anything is replaced. When earlier
 * results are replaced, one note on stderr says so ("trainsim CMD: replacing ..."). The
 * "wrote" note is the caller's.
 */
/** Records that dir was created for the outputs: ts_write_set into it says so once. */
void ts_note_created_dir(const char *dir);

gboolean ts_write_set(const char *dir, const char *const *names, const char *const *texts, int n,
                      const char *cmd, GError **error);

/** Writes all n bytes to fd, retrying on EINTR; FALSE on error. */
gboolean ts_write_all(int fd, const void *buf, gsize n);

/** Reads exactly n bytes from fd: 1 when read, 0 on end of file before any byte, -1 otherwise. */
int ts_read_all(int fd, void *buf, gsize n);

/** Appends one CSV field, quoted as RFC 4180 asks when it holds a comma, quote or line break. */
void ts_csv_append(GString *s, const char *field);

/** Appends v as a JSON string literal (quotes, backslashes, control characters escaped). */
void ts_json_append_string(GString *s, const char *v);

/** Appends text padded with blanks to w columns (UTF-8 aware), right- or left-aligned. */
void ts_append_cell(GString *s, const char *text, int w, gboolean right);

G_END_DECLS

#endif
