/* ts_coll_memo: ts_coll_time is a pure function of the topology, the collective, its group's
 * shape and its size; a sweep of hundreds of splits on one array asks for the same few
 * hundred of them again and again (every placement, ZeRO stage and micro-batch of a split
 * repeats its tensor-parallel all-reduces), and each costs a decomposition into steps and
 * routes. The topologies are keyed by address, so only those registered by a caller that
 * keeps them alive are remembered: a freed one's address can never alias a new one. */
#include "ts_coll_memo.h"

#include "ts_coll_internal.h"

#include <string.h>

typedef struct {
  const ts_topo *t;
  int kind, algo, npieces;
  ts_piece p[TS_MAX_PIECES];
  guint64 bytes_bits;
} memo_key;

typedef struct {
  double seconds;
  ts_coll_algo chosen;
} memo_val;

static GHashTable *g_memo;  /* memo_key -> memo_val (both owned) */
static GHashTable *g_topos; /* registered topologies (a set) */
static int g_depth;

static guint64 mix(guint64 h, guint64 w)
{
  h = (h ^ w) * 0x9E3779B97F4A7C15u;
  return h ^ (h >> 29);
}

static guint key_hash(gconstpointer p)
{
  const memo_key *k = p;
  guint64 h = mix((guint64)(guintptr)k->t, k->bytes_bits);
  h = mix(h, (guint64)(guint)k->kind << 40 ^ (guint64)(guint)k->algo << 20 ^ (guint)k->npieces);
  for (int i = 0; i < k->npieces; i++)
    h = mix(h, (guint64)(guint)k->p[i].dim << 48 ^ (guint64)(guint)k->p[i].size << 24 ^
                   (guint64)(guint)k->p[i].stride);
  return (guint)(h ^ (h >> 32));
}

static gboolean key_equal(gconstpointer x, gconstpointer y)
{
  const memo_key *a = x, *b = y;
  if (a->t != b->t || a->kind != b->kind || a->algo != b->algo || a->npieces != b->npieces ||
      a->bytes_bits != b->bytes_bits)
    return FALSE;
  for (int i = 0; i < a->npieces; i++)
    if (a->p[i].dim != b->p[i].dim || a->p[i].size != b->p[i].size ||
        a->p[i].stride != b->p[i].stride)
      return FALSE;
  return TRUE;
}

void ts_coll_memo_begin(const ts_topo *const *topos, int n)
{
  if (g_depth++ == 0) {
    g_memo = g_hash_table_new_full(key_hash, key_equal, g_free, g_free);
    g_topos = g_hash_table_new(g_direct_hash, g_direct_equal);
    ts_eval_route_cache_begin();
  }
  for (int i = 0; i < n; i++)
    if (topos[i] != NULL)
      g_hash_table_add(g_topos, (gpointer)topos[i]);
}

void ts_coll_memo_end(void)
{
  g_return_if_fail(g_depth > 0);
  if (--g_depth > 0)
    return;
  g_clear_pointer(&g_memo, g_hash_table_unref);
  g_clear_pointer(&g_topos, g_hash_table_unref);
  ts_eval_route_cache_end();
}

double ts_coll_time_memo(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                         const ts_group_shape *g, double bytes, ts_coll_algo *chosen,
                         GError **error)
{
  if (g_memo == NULL || t == NULL || g == NULL || g->npieces < 0 || g->npieces > TS_MAX_PIECES ||
      !g_hash_table_contains(g_topos, t))
    return ts_coll_time(t, kind, algo, g, bytes, chosen, error);
  memo_key k;
  memset(&k, 0, sizeof k);
  k.t = t;
  k.kind = (int)kind;
  k.algo = (int)algo;
  k.npieces = g->npieces;
  memcpy(k.p, g->p, sizeof(ts_piece) * (gsize)g->npieces);
  memcpy(&k.bytes_bits, &bytes, sizeof k.bytes_bits);
  const memo_val *v = g_hash_table_lookup(g_memo, &k);
  if (v != NULL) {
    if (chosen != NULL)
      *chosen = v->chosen;
    return v->seconds;
  }
  ts_coll_algo got = algo;
  double s = ts_coll_time(t, kind, algo, g, bytes, &got, error);
  if (s < 0)
    return s; /* errors are not remembered: each caller gets its own message */
  memo_val *nv = g_new(memo_val, 1);
  nv->seconds = s;
  nv->chosen = got;
  g_hash_table_insert(g_memo, g_memdup2(&k, sizeof k), nv);
  /* A choice (auto, nccl) is the time of the algorithm it chose, computed by the same call
   * (ts_coll_time_ex evaluates each candidate as it evaluates a stated algorithm): remember it
   * under that algorithm too, which is what the trace states once ts_trace_resolve_algos has
   * replaced the choice, and what the backend then asks for. */
  if (got != algo && ts_coll_algo_is_choice(algo) && !ts_coll_algo_is_choice(got)) {
    k.algo = (int)got;
    if (!g_hash_table_contains(g_memo, &k)) {
      memo_val *cv = g_new(memo_val, 1);
      cv->seconds = s;
      cv->chosen = got;
      g_hash_table_insert(g_memo, g_memdup2(&k, sizeof k), cv);
    }
  }
  if (chosen != NULL)
    *chosen = got;
  return s;
}
