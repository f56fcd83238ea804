/* ts_progress: the progress of a long job (a sweep, a search, a check), on stderr only, so
 * results on stdout stay byte-identical whoever watches.
 *
 * On a terminal: one line rewritten in place (a bar, at most 10 times a second), erased at the
 * end. Otherwise (a log file, a pipe, a CI job): nothing during the first 2 s; then a plain
 * line (never a carriage return) each time another tenth of the job is done, at most one line
 * per 2 s, and one every 30 s while no tenth completes; when any line was printed, a last line
 * with the total time. So a job prints at most about 10 lines plus one per 30 s. A job of
 * unknown length (one SimGrid replay) shows the time elapsed instead: in place on a terminal,
 * a line every 10 s in a log.
 * TRAINSIM_PROGRESS_S=N sets the 2 s (the quiet start and the spacing; 0: a line at every
 * tenth, as the tests use). */
#ifndef TS_PROGRESS_H
#define TS_PROGRESS_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  gboolean on, tty, printed;
  const char *label; /* e.g. "sweep" */
  const char *what;  /* what is counted, plural: "configurations" */
  int total, done, tenth;
  int width; /* terminal: the longest line drawn (what the end blanks) */
  gint64 t0_us, last_us, quiet_us;
} ts_progress;

/**
 * Starts counting total items; on FALSE nothing is ever printed. label and what are borrowed.
 * total 0: a job of unknown length (a single SimGrid replay), followed by ts_progress_tick.
 */
void ts_progress_init(ts_progress *p, gboolean on, const char *label, const char *what, int total);

/**
 * A job of unknown length is still running (call it every second or so): after the quiet
 * start, the time elapsed, rewritten in place on a terminal, else a plain line every 10 s.
 */
void ts_progress_tick(ts_progress *p);

/**
 * FALSE, with a message naming it, when TRAINSIM_PROGRESS_S is set to anything but seconds in
 * [0, 3600] (the program refuses it before any command runs; ts_progress_init then never
 * meets a bad value).
 */
gboolean ts_progress_env_check(GError **error);

/** done items of total are finished. */
void ts_progress_step(ts_progress *p, int done);

/** The job is over: erases the terminal's line, or prints the last line of a log. */
void ts_progress_end(ts_progress *p);

G_END_DECLS

#endif
