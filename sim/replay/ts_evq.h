/* ts_evq: the event queue of the analytic backend (issue 15): events ordered by time, ties by
 * insertion order (a sequence number), so equal times replay deterministically. A 4-ary heap in
 * one flat array: half the levels of a binary heap, and the four children of a node share a
 * cache line's worth of keys. Elements move into a hole rather than by swaps. Any queue that
 * pops by (time, sequence) pops the same order: sequence numbers are unique. */
#ifndef TS_EVQ_H
#define TS_EVQ_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  double t;
  guint64 seq;
  guint64 token;
} ts_event;

typedef struct {
  ts_event *v;
  guint len, cap;
  guint64 seq; /* next sequence number */
} ts_evq;

static inline gboolean ts_event_less(const ts_event *a, const ts_event *b)
{
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

/** Adds an event at time t; its sequence number is the queue's next. */
static inline void ts_evq_push(ts_evq *q, double t, guint64 token)
{
  if (G_UNLIKELY(q->len == q->cap)) {
    q->cap = q->cap > 0 ? 2 * q->cap : 256;
    q->v = g_renew(ts_event, q->v, q->cap);
  }
  ts_event e = {t, q->seq++, token};
  guint i = q->len++;
  while (i > 0) {
    guint p = (i - 1) / 4;
    if (!ts_event_less(&e, &q->v[p]))
      break;
    q->v[i] = q->v[p];
    i = p;
  }
  q->v[i] = e;
}

/** Removes and returns the earliest event (the queue must not be empty). */
static inline ts_event ts_evq_pop(ts_evq *q)
{
  ts_event top = q->v[0];
  ts_event e = q->v[--q->len];
  guint n = q->len, i = 0;
  for (;;) {
    guint c = 4 * i + 1;
    if (c >= n)
      break;
    guint m = c;
    guint end = c + 4 < n ? c + 4 : n;
    for (guint k = c + 1; k < end; k++)
      if (ts_event_less(&q->v[k], &q->v[m]))
        m = k;
    if (!ts_event_less(&q->v[m], &e))
      break;
    q->v[i] = q->v[m];
    i = m;
  }
  if (n > 0)
    q->v[i] = e;
  return top;
}

static inline void ts_evq_clear(ts_evq *q)
{
  g_free(q->v);
  q->v = NULL;
  q->len = q->cap = 0;
}

G_END_DECLS

#endif
