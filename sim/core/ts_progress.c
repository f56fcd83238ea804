/* ts_progress: progress lines on stderr (see the header for the rules). */
#include "ts_progress.h"

#include "ts_util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { BAR_EVERY_US = 100000, HEARTBEAT_US = 30000000, QUIET_US = 2000000, TICK_US = 10000000 };

/* TRAINSIM_PROGRESS_S in seconds, or -1 when unset or empty (the 2 s default). */
static gboolean env_seconds(double *s, GError **error)
{
  const char *env = g_getenv("TRAINSIM_PROGRESS_S");
  *s = -1;
  if (env == NULL || *env == '\0')
    return TRUE;
  if (ts_parse_double(env, s) && *s >= 0 && *s <= 3600)
    return TRUE;
  *s = -1;
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "TRAINSIM_PROGRESS_S='%s': expected seconds in [0, 3600] (unset or empty: 2)", env);
  return FALSE;
}

void ts_progress_init(ts_progress *p, gboolean on, const char *label, const char *what, int total)
{
  memset(p, 0, sizeof *p);
  p->on = on && total >= 0;
  p->tty = isatty(STDERR_FILENO);
  p->label = label != NULL ? label : "trainsim";
  p->what = what != NULL ? what : "items";
  p->total = total;
  p->t0_us = g_get_monotonic_time();
  p->quiet_us = QUIET_US;
  double s;
  if (env_seconds(&s, NULL) && s >= 0)
    p->quiet_us = (gint64)(s * 1e6);
}

gboolean ts_progress_env_check(GError **error)
{
  double s;
  return env_seconds(&s, error);
}

/* "4.1 s elapsed, about 37 s left" from the rate so far. */
static void times(const ts_progress *p, gint64 now, char *el, char *left, size_t n)
{
  double e = (double)(now - p->t0_us) / 1e6;
  ts_fmt_time(el, n, e);
  double rate = e > 0 ? p->done / e : 0;
  ts_fmt_time(left, n, rate > 0 ? (p->total - p->done) / rate : 0);
}

static void bar(ts_progress *p, gint64 now)
{
  enum { W = 30 };
  char b[W + 1], r[32], el[32], left[32];
  int fill = (int)((gint64)W * p->done / p->total);
  for (int i = 0; i < W; i++)
    b[i] = i < fill ? '#' : '.';
  b[W] = '\0';
  double e = (double)(now - p->t0_us) / 1e6;
  g_ascii_formatd(r, sizeof r, "%.1f", e > 0 ? p->done / e : 0);
  times(p, now, el, left, sizeof el);
  int w = fprintf(stderr, "\r%s [%s] %d/%d %s, %s/s, %s left   ", p->label, b, p->done, p->total,
                  p->what, r, left);
  p->width = MAX(p->width, w);
  fflush(stderr);
  p->printed = TRUE;
}

void ts_progress_step(ts_progress *p, int done)
{
  if (!p->on || p->total <= 0)
    return;
  p->done = MIN(done, p->total);
  gint64 now = g_get_monotonic_time();
  if (now - p->t0_us < p->quiet_us && !p->printed)
    return; /* a short job prints nothing */
  if (p->tty) {
    if (p->done >= p->total || now - p->last_us >= BAR_EVERY_US) {
      p->last_us = now;
      bar(p, now);
    }
    return;
  }
  int tenth = (int)((gint64)10 * p->done / p->total);
  if (p->done >= p->total)
    return; /* the end has its own line (ts_progress_end) */
  /* The first line once the quiet start is over, then each new tenth (spaced by the quiet
   * time), and a heartbeat while the tenths are slow to come. */
  gboolean step = tenth > p->tenth && now - p->last_us >= p->quiet_us;
  gboolean beat = now - p->last_us >= HEARTBEAT_US;
  if (p->printed && !step && !beat)
    return;
  p->tenth = MAX(p->tenth, tenth);
  p->last_us = now;
  p->printed = TRUE;
  char el[32], left[32];
  times(p, now, el, left, sizeof el);
  fprintf(stderr, "%s: %d/%d %s (%d%%), %s elapsed, about %s left\n", p->label, p->done, p->total,
          p->what, (int)((gint64)100 * p->done / p->total), el, left);
  fflush(stderr);
}

void ts_progress_tick(ts_progress *p)
{
  if (!p->on || p->total > 0)
    return;
  gint64 now = g_get_monotonic_time();
  if (now - p->t0_us < p->quiet_us ||
      (p->printed && now - p->last_us < (p->tty ? 1000000 : TICK_US)))
    return;
  p->last_us = now;
  p->printed = TRUE;
  char el[32];
  ts_fmt_time(el, sizeof el, (double)(now - p->t0_us) / 1e6);
  int w = fprintf(stderr, "%s%s: %s elapsed%s", p->tty ? "\r" : "", p->label, el,
                  p->tty ? "   " : "\n");
  p->width = MAX(p->width, w);
  fflush(stderr);
}

void ts_progress_end(ts_progress *p)
{
  if (!p->on || !p->printed)
    return;
  if (p->tty) {
    fprintf(stderr, "\r%*s\r", p->width, ""); /* the longest line drawn, blanked */
  } else {
    char el[32];
    ts_fmt_time(el, sizeof el, (double)(g_get_monotonic_time() - p->t0_us) / 1e6);
    if (p->total > 0)
      fprintf(stderr, "%s: %d/%d %s (%d%%) in %s\n", p->label, p->done, p->total, p->what,
              (int)((gint64)100 * p->done / p->total), el);
    else
      fprintf(stderr, "%s: finished in %s\n", p->label, el);
  }
  fflush(stderr);
  p->printed = FALSE;
}
