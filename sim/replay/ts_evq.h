/* ts_evq: the event queue of the analytic backend (issue 15): events ordered by time, ties by
 * insertion order (a sequence number), so equal times replay deterministically.
 *
 * Two forms of one array. While the queue is short (a replay keeps about one event per simulated
 * rank pending: 37 on average in the every-split sweep), a sorted run v[head, head + len): a pop
 * takes the front with no comparison; a push makes room on the shorter side of its place,
 * shifting the events before it down by one (into the slot a pop freed) when it is earlier than
 * the middle event, else the events after it up by one: a few moves whose loop mispredicts once.
 * (A binary search for the place, its loads dependent one on the next, cost as much as the heap.)
 * The 4-ary heap it replaced spent its time on mispredicted comparisons (12% of the sweep).
 * When the queue grows past TS_EVQ_SORTED_MAX the run becomes a 4-ary heap in one flat array (an
 * ascending array is already one: a parent precedes its children), elements moving into a hole
 * rather than by swaps; when a heap shrinks to TS_EVQ_SORTED_MIN it is sorted back. Both pop by
 * (time, sequence), and sequence numbers are unique, so the order popped is the same whichever form
 * holds the events. */
#ifndef TS_EVQ_H
#define TS_EVQ_H

#include <glib.h>
#include <string.h>

G_BEGIN_DECLS

typedef struct {
  double t;
  guint64 seq;
  guint64 token;
} ts_event;

typedef struct ts_evq {
  ts_event *v;
  guint len, cap;
  guint64 seq;   /* next sequence number */
  guint head;    /* sorted form: the events are v[head, head + len), ascending */
  gboolean heap; /* heap form: v[0, len) is a 4-ary heap */
} ts_evq;

enum { TS_EVQ_SORTED_MAX = 256, TS_EVQ_SORTED_MIN = 64 };

static inline gboolean ts_event_less(const ts_event *a, const ts_event *b)
{
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static inline void ts_evq_heap_push(ts_evq *q, ts_event e)
{
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

static inline ts_event ts_evq_heap_pop(ts_evq *q)
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

/* A heap shrunk to TS_EVQ_SORTED_MIN events back to a sorted run (insertion sort: few events). */
static inline void ts_evq_to_sorted(ts_evq *q)
{
  for (guint i = 1; i < q->len; i++) {
    ts_event x = q->v[i];
    guint j = i;
    for (; j > 0 && ts_event_less(&x, &q->v[j - 1]); j--)
      q->v[j] = q->v[j - 1];
    q->v[j] = x;
  }
  q->head = 0;
  q->heap = FALSE;
}

/** Adds an event at time t; its sequence number is the queue's next. */
static inline void ts_evq_push(ts_evq *q, double t, guint64 token)
{
  ts_event e = {t, q->seq++, token};
  if (G_UNLIKELY(q->head + q->len == q->cap)) {
    if (q->head > 0 && q->head >= q->len) { /* half the array free at the front: slide down */
      memmove(q->v, q->v + q->head, sizeof(ts_event) * q->len);
      q->head = 0;
    } else {
      q->cap = q->cap > 0 ? 2 * q->cap : 256;
      q->v = g_renew(ts_event, q->v, q->cap);
    }
  }
  if (G_UNLIKELY(q->heap)) {
    ts_evq_heap_push(q, e);
    return;
  }
  /* Room is made on the shorter side: an event earlier than the middle one shifts the events
   * not later than it down by one (into the slot a pop freed), another shifts those later than it
   * up by one. Ties stay before the new event: their sequence numbers are smaller. */
  ts_event *first = q->v + q->head;
  if (q->head > 0 && q->len > 0 && t < first[q->len / 2].t) {
    ts_event *b = first;
    while (b->t <= t) { /* stops at the middle one at the latest */
      b[-1] = b[0];
      b++;
    }
    b[-1] = e;
    q->head--;
    first--;
  } else {
    ts_event *b = first + q->len;
    while (b > first && b[-1].t > t) {
      *b = b[-1];
      b--;
    }
    *b = e;
  }
  q->len++;
  if (G_UNLIKELY(q->len > TS_EVQ_SORTED_MAX)) { /* long: a heap (the ascending run is one) */
    memmove(q->v, first, sizeof(ts_event) * q->len);
    q->head = 0;
    q->heap = TRUE;
  }
}

/** Removes and returns the earliest event (the queue must not be empty). */
static inline ts_event ts_evq_pop(ts_evq *q)
{
  if (G_UNLIKELY(q->heap)) {
    ts_event top = ts_evq_heap_pop(q);
    if (q->len <= TS_EVQ_SORTED_MIN)
      ts_evq_to_sorted(q);
    return top;
  }
  ts_event top = q->v[q->head];
  q->len--;
  q->head = q->len > 0 ? q->head + 1 : 0;
  return top;
}

static inline void ts_evq_clear(ts_evq *q)
{
  g_free(q->v);
  q->v = NULL;
  q->len = q->cap = q->head = 0;
  q->heap = FALSE;
}

G_END_DECLS

#endif
