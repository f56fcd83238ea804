/* ts_backend_analytic: the fast backend. Shape-aware compute (ts_cost), closed-form (alpha-beta)
 * collectives from the shared decompositions, its own event queue; no link is shared. */
#include "ts_coll.h"
#include "ts_cost.h"
#include "ts_replay.h"
#include "ts_util.h"

#include <math.h>
#include <string.h>

typedef struct {
  double t;
  guint64 seq; /* insertion order breaks ties, so equal times replay deterministically */
  guint64 token;
} event;

typedef struct {
  const ts_topo *topo;
  GArray *heap; /* event, binary min-heap on (t, seq) */
  guint64 seq;
  GHashTable *coll_cache;    /* coll_key -> double* seconds */
  GHashTable *compute_cache; /* const ts_op* -> index + 1 in compute_costs */
  GArray *compute_costs;     /* double seconds */
} analytic;

static gboolean ev_less(const event *a, const event *b)
{
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void heap_push(GArray *h, event e)
{
  g_array_append_val(h, e);
  event *v = (event *)h->data;
  guint i = h->len - 1;
  while (i > 0) {
    guint p = (i - 1) / 2;
    if (!ev_less(&v[i], &v[p]))
      break;
    event tmp = v[i];
    v[i] = v[p];
    v[p] = tmp;
    i = p;
  }
}

static event heap_pop(GArray *h)
{
  event *v = (event *)h->data;
  event top = v[0];
  v[0] = v[h->len - 1];
  g_array_set_size(h, h->len - 1);
  guint n = h->len, i = 0;
  for (;;) {
    guint l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && ev_less(&v[l], &v[m]))
      m = l;
    if (r < n && ev_less(&v[r], &v[m]))
      m = r;
    if (m == i)
      break;
    event tmp = v[i];
    v[i] = v[m];
    v[m] = tmp;
    i = m;
  }
  return top;
}

double ts_compute_time(const ts_topo *t, double flops, double mem_bytes)
{
  return ts_cost_compute(&t->chip, flops, mem_bytes, NULL);
}

/* An op's compute time, costed once per op (a collapsed replay starts each op once per
 * simulated rank; a full one once per rank). */
static double compute_cost(analytic *a, const ts_op *op)
{
  gpointer hit = g_hash_table_lookup(a->compute_cache, op);
  if (hit != NULL)
    return g_array_index(a->compute_costs, double, GPOINTER_TO_UINT(hit) - 1);
  double d = ts_cost_compute(&a->topo->chip, op->flops, op->mem_bytes, &op->shape);
  g_array_append_val(a->compute_costs, d);
  g_hash_table_insert(a->compute_cache, (gpointer)op, GUINT_TO_POINTER(a->compute_costs->len));
  return d;
}

/* Memo key of a collective's cost: binary, zero-filled so padding hashes the same way. */
typedef struct {
  ts_group_shape shape;
  int kind, algo;
  double bytes;
} coll_key;

static guint coll_key_hash(gconstpointer p)
{
  const guchar *b = p;
  guint h = 2166136261u; /* FNV-1a over the key's bytes */
  for (gsize i = 0; i < sizeof(coll_key); i++)
    h = (h ^ b[i]) * 16777619u;
  return h;
}

static gboolean coll_key_equal(gconstpointer x, gconstpointer y)
{
  return memcmp(x, y, sizeof(coll_key)) == 0;
}

static double coll_cost(analytic *a, const ts_op *op, const ts_group *g, GError **error)
{
  coll_key k;
  memset(&k, 0, sizeof k);
  k.shape.npieces = g->shape.npieces;
  for (int i = 0; i < g->shape.npieces; i++)
    k.shape.p[i] = g->shape.p[i];
  k.kind = op->coll;
  k.algo = op->algo;
  k.bytes = op->bytes;
  double *hit = g_hash_table_lookup(a->coll_cache, &k);
  if (hit != NULL)
    return *hit;
  double t = ts_coll_time(a->topo, op->coll, op->algo, &g->shape, op->bytes, NULL, error);
  if (t < 0)
    return t;
  double *v = g_new(double, 1);
  *v = t;
  g_hash_table_insert(a->coll_cache, g_memdup2(&k, sizeof k), v);
  return t;
}

static gboolean analytic_start(ts_backend *b, ts_replay *r, const ts_activity *act, double now,
                               GError **error)
{
  (void)r;
  analytic *a = b->ctx;
  double d = 0.0;
  switch (act->kind) {
  case TS_OP_COMPUTE:
    d = compute_cost(a, act->op);
    break;
  case TS_OP_COLL:
    d = ts_group_size(&act->group->shape) <= 1 ? 0.0 : coll_cost(a, act->op, act->group, error);
    if (d < 0) {
      g_prefix_error(error, "'%s': ", act->label);
      return FALSE;
    }
    break;
  case TS_OP_SEND:
    d = ts_p2p_time(a->topo, act->chip, act->peer, act->op->bytes);
    break;
  default:
    break;
  }
  heap_push(a->heap, (event){now + d, a->seq++, act->token});
  return TRUE;
}

static gboolean analytic_run(ts_backend *b, ts_replay *r, GError **error)
{
  analytic *a = b->ctx;
  while (a->heap->len > 0) {
    event e = heap_pop(a->heap);
    if (!ts_replay_complete(r, e.token, e.t, error))
      return FALSE;
  }
  return TRUE;
}

static void analytic_free(ts_backend *b)
{
  analytic *a = b->ctx;
  g_array_unref(a->heap);
  g_hash_table_unref(a->coll_cache);
  g_hash_table_unref(a->compute_cache);
  g_array_unref(a->compute_costs);
  g_free(a);
  g_free(b);
}

ts_backend *ts_backend_analytic_new(const ts_topo *t)
{
  analytic *a = g_new0(analytic, 1);
  a->topo = t;
  a->heap = g_array_new(FALSE, FALSE, sizeof(event));
  a->coll_cache = g_hash_table_new_full(coll_key_hash, coll_key_equal, g_free, g_free);
  a->compute_cache = g_hash_table_new(g_direct_hash, g_direct_equal);
  a->compute_costs = g_array_new(FALSE, FALSE, sizeof(double));
  ts_backend *b = g_new0(ts_backend, 1);
  b->name = "analytic";
  b->ctx = a;
  b->start = analytic_start;
  b->run = analytic_run;
  b->free = analytic_free;
  return b;
}
