/* ts_replay: the discrete-event replay engine. It resolves dependencies, stream order,
 * collective rendezvous and send/recv matching, and leaves every cost to a backend. */
#define _DEFAULT_SOURCE /* madvise */
#include "ts_replay.h"
#include "ts_evq.h"
#include "ts_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

/* Per-program structure shared by every rank running it: successors (explicit deps plus
 * the next op of the same stream) in CSR form and initial predecessor counts. */
typedef struct op_state op_state;

/* A send or receive's fields, gathered in program order by ts_replay_new, so that matching it
 * reads this record and not the trace's packed op and its side record (issue 15: two cache
 * misses per pipeline transfer, half of op_ready's time in the every-split sweep). */
typedef struct {
  int axis, offset, tag, peer; /* as ts_op names them */
  double bytes;
} p2p_info;

typedef struct {
  int nops;
  /* Every op's initial state (predecessors: explicit deps + stream predecessor; op_info_pack),
   * which the last simulated rank running the program takes as its own (issue 11: no second
   * copy of a 10-million-op program's state). */
  op_state *tmpl;
  /* Every op's initial predecessor count (tmpl's `remaining`), with a shared view: the last
   * simulated rank running the program replays in tmpl itself, so tmpl's times and counts are
   * that replay's afterwards, and each replay sets them back from here (issue 15, twentieth
   * pass). NULL in a replay's own view. */
  int *init_remaining;
  int *succ_off; /* nops + 1 offsets into succ; freed when a replay owning them has run */
  /* Every op's successors in CSR form (succ_off); an op's state names its first two itself and
   * the list here only when it has more (op_state.s0, s1). */
  int *succ;
  /* Where the program's sends and receives go (so whether a collapsed replay can pair them):
   * the axes of those along an axis (bit per axis), and whether one names its peer rank. The
   * axes' symmetry is the trace's, read per replay. */
  guint32 p2p_axes;
  gboolean p2p_peer;
  p2p_info *p2p; /* the program's sends and receives, in order (op_state.info's index) */
  /* The ops with no predecessor, in program order: the ones ts_replay_run finds ready (issue
   * 15, thirteenth pass: it scanned every op of every simulated rank for them, a pass of cache
   * misses over all the states, 1% of the every-split sweep). */
  int *roots;
  int nroots;
  /* Whether the program's matching is the same in any order of readiness (issue 15, fourteenth
   * pass): its collectives on each group are on one stream, and its sends (receives) of each
   * tag are on one stream, so each rank reaches them in program order whatever the times. */
  gboolean order_safe;
  /* The groups whose collectives this program may reach out of program order (ZeRO-3's
   * parameter all-gathers and gradient reduce-scatters share the data-parallel group on two
   * streams): harmless where the rank is its group's only simulated member (no rendezvous to
   * number), which ts_replay_new_shared checks. */
  int *unsafe_groups;
  int nunsafe_groups;
  /* With unsafe groups: each collective's number among the program's collectives on its group,
   * in program order (NULL otherwise, where readiness order is program order). Ranks issue a
   * group's collectives in program order (NCCL matches them by issue order), so a rendezvous
   * is numbered by it: numbered in time order, a straggler's ZeRO-3 parameter all-gather met
   * the other ranks' gradient reduce-scatter ("expected matching collectives"). */
  int *coll_ord;
} prog_info;
G_STATIC_ASSERT(TS_MAX_AXES <= 32);

/* The replay's view of a trace's ops: per program, what prog_info_init reads of them. */
/* A block of op states (ts_replay.states) a finished replay left for the next one, and whether
 * a replay is using the view's initial states (prog_info.tmpl) as its own. */
typedef struct {
  op_state *block; /* NULL: none */
  size_t bytes;
  gboolean tmpl_lent;
} states_spare;

struct ts_replay_ops {
  int nprograms;
  prog_info *progs;
  /* The programs' initial states in one block in huge pages, when they are many (NULL: each
   * program's tmpl is its own allocation). A replay runs in them (prog_info.init_remaining). */
  op_state *tmpl_block;
  /* The states block of the view's last replay, for its next (issue 15, eighteenth pass: its
   * pages come with their TLB entries and no fault; a pointer, as a const view lends it). */
  states_spare *spare;
};

/* What the engine needs of an op on its hot path, packed into 32 bits and copied into the op's
 * state, so that readying, starting and accounting for an op reads its state's cache line and
 * not the trace's op (issue 15: in a sweep the trace is tens of MB, and loading each op's
 * `kind` was half of the engine's time): kind (3 bits), category (3 bits) and, for a
 * collective, its group + 1, for a send or receive, its index + 1 in prog_info.p2p (26 bits; 0
 * when it does not fit: the op is read then). */
#define INFO_KIND(i) ((int)((i)&7u))
#define INFO_CAT(i) ((int)(((i) >> 3) & 7u))
#define INFO_GROUP1(i) ((int)((i) >> 6))
#define INFO_MAX_GROUP1 ((1 << 26) - 1)
G_STATIC_ASSERT(TS_OP_NKINDS <= 8 && TS_NCATS <= 8);

static guint32 op_info_pack(const ts_program *p, int i)
{
  int kind = ts_program_op_kind(p, i), group = kind == TS_OP_COLL ? ts_program_op_group(p, i) : -1;
  guint32 g1 = group >= 0 && group < INFO_MAX_GROUP1 ? (guint32)group + 1 : 0;
  return (guint32)kind | (guint32)ts_program_op_cat(p, i) << 3 | g1 << 6;
}

/* One op's state in one simulated rank: everything the engine reads of an op per event in one
 * 32-byte record, two to a cache line and never across two (issue 15, twelfth pass: the op's
 * state, its fixed duration, its successor offsets and its successor list were four arrays, four
 * streams of cache misses per event across 64 interleaved programs). `t` is the op's ready time
 * (max end of its completed predecessors) until it starts, then its start; the one reader of
 * both, the pipeline bubble, gets a receive's wait recorded when it starts (sim_rank.waits).
 * `x` is the op's fixed duration as a one-op activity (NaN: start() decides) until it
 * completes; then, when its end is stored (DONE), its end; a DONE_FIXED op ends at t + x, the
 * sum its completion was queued at. s0, s1: its successors when it has at most two (-1: none);
 * with more, s0 is the offset of its list in prog_info.succ and s1 is -2 - their number. */
struct op_state {
  double t;      /* ready time until started, then start time */
  double x;      /* fixed duration (NaN: none) until complete, then the end when DONE */
  int remaining; /* predecessors not yet complete; DONE / DONE_FIXED once it has completed */
  guint32 info;  /* op_info_pack of the op */
  int s0, s1;    /* successors (see above) */
};
G_STATIC_ASSERT(sizeof(op_state) == 32);

/* Visits op state st's successors j in list order (deps, then the stream successor). */
#define FOR_SUCC(pi, st, j, body)                                                                  \
  do {                                                                                             \
    int s0_ = (st)->s0, s1_ = (st)->s1;                                                            \
    if (s1_ >= -1) {                                                                               \
      if (s0_ >= 0) {                                                                              \
        int j = s0_;                                                                               \
        body;                                                                                      \
      }                                                                                            \
      if (s1_ >= 0) {                                                                              \
        int j = s1_;                                                                               \
        body;                                                                                      \
      }                                                                                            \
    } else {                                                                                       \
      const int *l_ = (pi)->succ + s0_;                                                            \
      for (int k_ = 0, n_ = -2 - s1_; k_ < n_; k_++) {                                             \
        int j = l_[k_];                                                                            \
        body;                                                                                      \
      }                                                                                            \
    }                                                                                              \
  } while (0)

/* Activities of one op (a compute op, a collective with one simulated member) need no record:
 * their token is the op itself, (sim, op) with the top bit set. Records (and their tokens,
 * indices below 2^63) are for collectives of several members and send/receive pairs. */
#define TOKEN_OP_BIT ((guint64)1 << 63)
#define TOKEN_OF_OP(sim, op) (TOKEN_OP_BIT | (guint64)(guint32)(sim) << 32 | (guint64)(guint32)(op))
/* A one-op activity the engine queued with its fixed duration (ts_replay.fixed): its end is its
 * start plus that duration, so it is not stored (op_state.remaining DONE_FIXED; issue 15: the
 * end array was one more stream of cache misses per event). Simulated ranks < 2^30. */
#define TOKEN_FIXED_BIT ((guint64)1 << 62)
#define TOKEN_SIM(token) ((int)(((token) >> 32) & 0x3fffffffu))
#define DONE (-1)
#define DONE_FIXED (-2)

/* One simulated rank's state. */
typedef struct {
  int rank;
  int program;
  op_state *st;  /* per op of the program */
  int *coll_seq; /* per trace group: collectives this rank has reached */
  int *base;     /* per trace group: member 0 of this rank's group, -1 until first needed */
  int *expect;   /* per trace group: simulated members of that group instance (with base) */
  /* Per axis: the peer one step forward and back (pipeline sends and receives), or -2 until
   * first needed; a peer is arithmetic over the array that a pipeline repeats per op. */
  int peer_fwd[TS_MAX_AXES], peer_back[TS_MAX_AXES];
  GArray *waits; /* ival-like (ready, start) pairs of pipeline receives that waited */
} sim_rank;

typedef struct {
  int sim; /* sim_rank index */
  int op;
} member_ref;

/* Hash keys of up to three integers (group/base/seq, src/dst/tag): no string formatting on
 * the replay's hot path. */
typedef struct {
  int a, b, c;
} key3;

/* A collective instance waiting for (or running with) its simulated members. Its key is the
 * hash table's key, and finished instances are kept for reuse: no allocation per collective
 * once the replay has warmed up. */
typedef struct {
  key3 key; /* group, base, seq */
  int expected, arrived;
  double arrival_max;
  GArray *members; /* member_ref */
} rendezvous;

/* A send or receive waiting for its partner: an entry of ts_replay.waits, in its key's queue
 * (next: the entry after it, -1 at the tail; on the free list, the next free entry). */
typedef struct {
  int sim, op;
  double ready;
  int next;
} p2p_wait;

/* Sends (or receives) waiting for their partner by (src, dst, tag): open addressing, linear
 * probing, at most half full; a key is present while its queue of waits (head, tail: indices in
 * ts_replay.waits) is not empty. No allocation per send once the tables have grown (issue 15:
 * a GQueue, a key and a wait were allocated per pipeline transfer, and the tables grew by one
 * entry per tag). */
typedef struct {
  key3 key;
  int head, tail; /* head < 0: slot empty */
} p2p_slot;

typedef struct {
  p2p_slot *slots;
  guint cap, len;
} p2p_table;

typedef struct {
  ts_activity act;
  member_ref inl[2]; /* compute (one op) and send/recv (two ops): no allocation per event */
  int ninl;
  rendezvous *rv; /* collectives of several simulated members: their list */
  gboolean in_use;
} activity_rec;

struct ts_replay {
  const ts_trace *tr;
  ts_backend *backend;
  ts_replay_mode mode;
  gboolean keep_spans;
  const prog_info *progs; /* the view of the ops' programs */
  ts_replay_ops *own_ops; /* ops when made for this replay (NULL: shared, borrowed) */
  int nsim;
  sim_rank *sims;
  int *sim_of_rank;         /* nranks entries, -1 when not simulated */
  GHashTable *rendezvous;   /* group/base/seq (the rendezvous's key) -> rendezvous */
  GPtrArray *rv_pool;       /* finished rendezvous, for reuse */
  p2p_table p2p_sends;      /* (src, dst, tag) -> sends waiting, in arrival order */
  p2p_table p2p_recvs;      /* likewise receives */
  GArray *waits;            /* p2p_wait: the tables' queue entries */
  int free_wait;            /* first free entry of waits (-1: none) */
  GHashTable *group_expect; /* "group/base" -> expected simulated members + 1 */
  GArray *acts;             /* activity_rec */
  GArray *free_acts;        /* int */
  member_ref *ready;        /* ops waiting to be started (a stack: no call per push) */
  int nready, ready_cap;
  GArray *spans;
  gint64 events;
  gint64 ndone; /* ops completed, over every simulated rank (a rank's own count was one more
                   write per event to a line of its own) */
  int outstanding;
  GPtrArray *opbufs; /* per activity record: its op, expanded (ts_op*, made on first use) */
  /* Replayed without time order (issue 15, fourteenth pass): every activity's end is its start
   * plus seconds that depend on the activity alone (ts_backend.pure_when_fixed) and every
   * program's matching is order_safe, so each op's times are the same max-plus values in any
   * order of completion: an activity completes as soon as it starts, its successors next, and
   * no event is queued. A failure falls back to the timed replay (fallback), whose first error
   * in time order is the one to report. */
  gboolean order_free;
  ts_replay_mode mode_asked;
  const ts_replay_ops *ops_shared; /* the borrowed view, NULL when own_ops */
  /* Every simulated rank's op states in one block (sim_rank.st point into it), when the view
   * is shared and they are many; NULL: each rank's states are a block of their own. */
  op_state *states;
  size_t states_bytes;
  /* The shared view's initial states are this replay's: each program's last simulated rank
   * replays in prog_info.tmpl (its sim_rank.st), set back from init_remaining first. */
  gboolean tmpl_lent;
};

/* Op states of a replay in one block from this many bytes: in 2 MiB pages where the system
 * has them on request (Linux's transparent huge pages, madvise mode). Issue 15, eighteenth
 * pass: the pp=64 splits' 38 MB of states, walked across 64 interleaved programs, took a TLB
 * miss at nearly every event on 4 KiB pages (9,500 pages, the TLB holds about 2,000). */
#define STATES_BLOCK_MIN ((size_t)4 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

/* A block for `bytes` of op states: aligned to HUGE_PAGE and advised into huge pages. */
static op_state *states_block(size_t bytes)
{
  size_t size = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
  op_state *b = aligned_alloc(HUGE_PAGE, size);
  if (b == NULL)
    g_error("ts_replay: out of memory for %zu bytes of op states", size);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  (void)madvise(b, size, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
#endif
  return b;
}

/* The op before op i on its stream (-1: none), recording op i as its stream's last: from the
 * array over the streams' range, or the hash table when last_dense is NULL. */
static inline int stream_prev(const ts_program *p, int i, int *last_dense, int smin,
                              GHashTable *last)
{
  int st = ts_program_op_stream(p, i), sp;
  if (last_dense != NULL) {
    sp = last_dense[st - smin];
    last_dense[st - smin] = i;
  } else {
    gpointer v;
    sp =
        g_hash_table_lookup_extended(last, GINT_TO_POINTER(st), NULL, &v) ? GPOINTER_TO_INT(v) : -1;
    g_hash_table_insert(last, GINT_TO_POINTER(st), GINT_TO_POINTER(i));
  }
  return sp;
}

/* Whether a program's matching is the same in any order of readiness (issue 15, fourteenth
 * pass). A rank numbers its collectives on a group, and queues its sends (receives) of one
 * (source, destination, tag), in the order they become ready: in a timed replay, time order.
 * When each such op depends, directly or through others, on the one before it of its group (tag)
 * (its stream predecessor, or a chain of dependencies from it), no order of completion makes
 * them ready in another order, so the numbering is program order whatever the times. Sends and
 * receives are compared by tag whatever their peer (two directions along an axis of two ranks
 * meet one rank). order_scan_op sees the ops in program order and keeps the pairs of
 * consecutive ops of one key on two streams; order_scan_finish tests those with a vector clock
 * over the earlier ops' streams (per op, the latest op of each such stream that precedes it). A
 * collective pair that fails names its group in prog_info.unsafe_groups (harmless where no
 * rendezvous numbers them: ts_replay_new_shared checks); a send or receive pair that fails
 * makes the program unsafe. */
enum { ORDER_MAX_STREAMS = 16 };

typedef struct {
  int *last_coll; /* per group: its last collective so far (-1: none) */
  int ncoll_groups;
  p2p_table last_p2p; /* (kind, tag, 0) -> last send or receive (its head) */
  int *pairs;         /* (earlier, later) ops of one key on two streams */
  int npairs, cap_pairs;
  int dims[ORDER_MAX_STREAMS]; /* the earlier ops' streams */
  int ndims;
  gboolean overflow; /* more than ORDER_MAX_STREAMS of them, or a bad group: unsafe */
} order_scan;

static p2p_slot *p2p_find(const p2p_table *t, const key3 *k);
static p2p_slot *p2p_add(p2p_table *t, const key3 *k);

/* The last send (kind) or receive of tag id so far (-1: none, the key just added). The replay's
 * (src, dst, tag) table serves, keyed (kind, tag, 0), its head holding the op. */
static int *order_last_p2p(order_scan *os, int kind, int id)
{
  key3 k = {kind, id, 0};
  p2p_slot *s = p2p_find(&os->last_p2p, &k);
  if (s == NULL)
    s = p2p_add(&os->last_p2p, &k); /* head -1: the caller stores the op */
  return &s->head;
}

/* Op i (a collective on group id, or a send or receive of tag id) on stream st. */
static void order_scan_op(order_scan *os, const ts_program *p, int i, int kind, int id, int st)
{
  int *last;
  if (kind == TS_OP_COLL) {
    if (id < 0) {
      os->overflow = TRUE;
      return;
    }
    if (id >= os->ncoll_groups) {
      int n = MAX(id + 1, 2 * os->ncoll_groups);
      os->last_coll = g_renew(int, os->last_coll, n);
      for (int g = os->ncoll_groups; g < n; g++)
        os->last_coll[g] = -1;
      os->ncoll_groups = n;
    }
    last = &os->last_coll[id];
  } else {
    last = order_last_p2p(os, kind, id);
  }
  int prev = *last;
  *last = i;
  if (prev < 0)
    return;
  int pst = ts_program_op_stream(p, prev);
  if (pst == st) /* stream order */
    return;
  int d = 0;
  while (d < os->ndims && os->dims[d] != pst)
    d++;
  if (d == os->ndims) {
    if (os->ndims == ORDER_MAX_STREAMS) {
      os->overflow = TRUE;
      return;
    }
    os->dims[os->ndims++] = pst;
  }
  if (os->npairs == os->cap_pairs) {
    os->cap_pairs = os->cap_pairs > 0 ? 2 * os->cap_pairs : 16;
    os->pairs = g_renew(int, os->pairs, 2 * (gsize)os->cap_pairs);
  }
  os->pairs[2 * os->npairs] = prev;
  os->pairs[2 * os->npairs + 1] = i;
  os->npairs++;
}

static void unsafe_group_add(prog_info *pi, int g)
{
  for (int j = 0; j < pi->nunsafe_groups; j++)
    if (pi->unsafe_groups[j] == g)
      return;
  pi->unsafe_groups = g_renew(int, pi->unsafe_groups, pi->nunsafe_groups + 1);
  pi->unsafe_groups[pi->nunsafe_groups++] = g;
}

/* Tests the pairs (sprev: each op's stream predecessor); frees the scan. */
static gboolean order_scan_finish(order_scan *os, prog_info *pi, const ts_program *p,
                                  const int *sprev)
{
  gboolean safe = !os->overflow, p2p_pairs = FALSE;
  int n = p->nops, nd = os->ndims;
  for (int k = 0; k < os->npairs && !p2p_pairs; k++)
    p2p_pairs = ts_program_op_kind(p, os->pairs[2 * k]) != TS_OP_COLL;
  if (safe && os->npairs > 0 && !p2p_pairs) {
    /* Collectives only: their groups are named without the test (a pass of cache misses over
     * every op's dependencies, 3% of the every-split sweep), harmless where each rank is its
     * group's only simulated member, as tensor-parallel groups on a symmetric axis are. */
    for (int k = 0; k < os->npairs; k++)
      unsafe_group_add(pi, ts_program_op_group(p, os->pairs[2 * k + 1]));
  } else if (safe && os->npairs > 0) {
    /* anc[i * nd + d]: the latest op of stream dims[d] that is op i or precedes it (-1). */
    int *anc = g_new(int, (gsize)n *nd);
    for (int i = 0; i < n; i++) {
      int *a = anc + (gsize)i * nd, st = ts_program_op_stream(p, i), ndeps;
      for (int d = 0; d < nd; d++)
        a[d] = -1;
      const int *deps = ts_program_deps(p, i, &ndeps);
      for (int k = -1; k < ndeps; k++) {
        int q = k < 0 ? sprev[i] : deps[k];
        if (q < 0 || q >= i)
          continue;
        const int *b = anc + (gsize)q * nd;
        for (int d = 0; d < nd; d++)
          a[d] = b[d] > a[d] ? b[d] : a[d];
      }
      for (int d = 0; d < nd; d++)
        if (os->dims[d] == st)
          a[d] = i;
    }
    for (int k = 0; k < os->npairs && safe; k++) {
      int prev = os->pairs[2 * k], cur = os->pairs[2 * k + 1], d = 0;
      while (os->dims[d] != ts_program_op_stream(p, prev))
        d++;
      if (anc[(gsize)cur * nd + d] >= prev) /* prev precedes cur */
        continue;
      if (ts_program_op_kind(p, cur) != TS_OP_COLL) {
        safe = FALSE;
        continue;
      }
      unsafe_group_add(pi, ts_program_op_group(p, cur));
    }
    g_free(anc);
  }
  g_free(os->last_coll);
  g_free(os->last_p2p.slots);
  g_free(os->pairs);
  return safe;
}

/* Three passes over the program's ops (issue 15: ts_replay_new was 6% of a sweep): what the
 * engine reads of each op and the streams' range; stream predecessors with the predecessor and
 * successor counts; the successor lists, in the order deps then stream successor per op. */
static void prog_info_init(prog_info *pi, const ts_program *p, op_state *tmpl)
{
  int n = p->nops;
  gsize n1 = n > 0 ? (gsize)n : 1;
  pi->nops = n;
  pi->tmpl = tmpl != NULL ? tmpl : g_new(op_state, n1);
  pi->succ_off = g_new0(int, (gsize)n + 1);
  pi->p2p_axes = 0;
  pi->p2p_peer = FALSE;
  pi->p2p = NULL;
  int smin = 0, smax = -1, np2p = 0, cap2p = 0;
  order_scan os = {0};
  for (int i = 0; i < n; i++) {
    /* A send or receive a few ops on reads its side record (ts_program_op_p2p), a line away
     * from its packed op: ask for it 32 ops ahead (issue 15: half of this pass's time waited on
     * it; at 8 ahead still a quarter, thirteenth pass). */
    if (i + 32 < n && p->ext_of != NULL) {
      const ts_op_packed *ka = &p->pk[i + 32];
      if ((ka->kind == TS_OP_SEND || ka->kind == TS_OP_RECV) && (ka->flags & TS_PK_EXT))
        __builtin_prefetch(&g_array_index(p->ext, ts_op_ext, p->ext_of[i + 32] - 1));
    }
    pi->tmpl[i] = (op_state){0.0, NAN, 0, op_info_pack(p, i), -1, -1};
    int kind = INFO_KIND(pi->tmpl[i].info), tag = 0;
    if (kind == TS_OP_SEND || kind == TS_OP_RECV) {
      p2p_info x;
      ts_program_op_p2p(p, i, &x.axis, &x.offset, &x.tag, &x.peer);
      x.bytes = ts_program_op_bytes(p, i);
      tag = x.tag;
      if (x.peer > 0)
        pi->p2p_peer = TRUE;
      else if (x.axis >= 0 && x.axis < TS_MAX_AXES)
        pi->p2p_axes |= 1u << x.axis;
      if (np2p + 1 < INFO_MAX_GROUP1) {
        if (np2p == cap2p) {
          cap2p = cap2p > 0 ? 2 * cap2p : 64;
          pi->p2p = g_renew(p2p_info, pi->p2p, cap2p);
        }
        pi->p2p[np2p++] = x;
        pi->tmpl[i].info = (pi->tmpl[i].info & 63u) | (guint32)np2p << 6;
      }
    }
    int stream = ts_program_op_stream(p, i);
    if (kind == TS_OP_COLL)
      order_scan_op(&os, p, i, kind, ts_program_op_group(p, i), stream);
    else if (kind == TS_OP_SEND || kind == TS_OP_RECV)
      order_scan_op(&os, p, i, kind, tag, stream);
    if (i == 0 || stream < smin)
      smin = stream;
    if (i == 0 || stream > smax)
      smax = stream;
  }
  /* Last op seen per stream gives each op its stream predecessor: an array over the streams'
   * range (a handful of small numbers in planner traces), a hash table when it is wide. */
  gboolean dense = n == 0 || (gint64)smax - smin < 4096;
  int *last_dense = dense ? g_new(int, n > 0 ? smax - smin + 1 : 1) : NULL;
  for (int k = 0; dense && k <= smax - smin; k++)
    last_dense[k] = -1;
  GHashTable *last = dense ? NULL : g_hash_table_new(g_direct_hash, g_direct_equal);
  int *succ_n = pi->succ_off + 1; /* successors per op, then prefix sums */
  /* Each op's stream predecessor, kept for order_scan_finish when it has pairs to test. */
  int *sprev = NULL;
  for (int k = 0; k < os.npairs && sprev == NULL && !os.overflow; k++)
    if (ts_program_op_kind(p, os.pairs[2 * k]) != TS_OP_COLL)
      sprev = g_new(int, n1);
  for (int i = 0; i < n; i++) {
    int sp = stream_prev(p, i, last_dense, smin, last), ndeps;
    if (sprev != NULL)
      sprev[i] = sp;
    const int *deps = ts_program_deps(p, i, &ndeps);
    pi->tmpl[i].remaining = ndeps + (sp >= 0);
    for (int k = 0; k < ndeps; k++)
      succ_n[deps[k]]++;
    if (sp >= 0)
      succ_n[sp]++;
  }
  pi->init_remaining = g_new(int, n1);
  for (int i = 0; i < n; i++)
    pi->init_remaining[i] = pi->tmpl[i].remaining;
  pi->nroots = 0;
  for (int i = 0; i < n; i++)
    pi->nroots += pi->tmpl[i].remaining == 0;
  pi->roots = g_new(int, pi->nroots > 0 ? pi->nroots : 1);
  for (int i = 0, k = 0; i < n; i++)
    if (pi->tmpl[i].remaining == 0)
      pi->roots[k++] = i;
  for (int i = 0; i < n; i++)
    pi->succ_off[i + 1] += pi->succ_off[i];
  pi->succ = g_new(int, pi->succ_off[n] > 0 ? pi->succ_off[n] : 1);
  /* The stream predecessors again (not kept: 4 bytes an op), from a fresh last-op table. */
  for (int k = 0; dense && k <= smax - smin; k++)
    last_dense[k] = -1;
  if (last != NULL)
    g_hash_table_remove_all(last);
  int *fill = g_memdup2(pi->succ_off, sizeof(int) * n1);
  for (int i = 0; i < n; i++) {
    int sp = stream_prev(p, i, last_dense, smin, last), ndeps;
    const int *deps = ts_program_deps(p, i, &ndeps);
    for (int k = 0; k < ndeps; k++)
      pi->succ[fill[deps[k]]++] = i;
    if (sp >= 0)
      pi->succ[fill[sp]++] = i;
  }
  g_free(fill);
  for (int i = 0; i < n; i++) { /* the first two successors in the op's state, or its list */
    int k0 = pi->succ_off[i], ns = pi->succ_off[i + 1] - k0;
    if (ns <= 2) {
      pi->tmpl[i].s0 = ns > 0 ? pi->succ[k0] : -1;
      pi->tmpl[i].s1 = ns > 1 ? pi->succ[k0 + 1] : -1;
    } else {
      pi->tmpl[i].s0 = k0;
      pi->tmpl[i].s1 = -2 - ns;
    }
  }
  g_free(last_dense);
  if (last != NULL)
    g_hash_table_unref(last);
  pi->unsafe_groups = NULL;
  pi->nunsafe_groups = 0;
  pi->order_safe = order_scan_finish(&os, pi, p, sprev);
  g_free(sprev);
  pi->coll_ord = NULL;
  if (pi->nunsafe_groups > 0) {
    pi->coll_ord = g_new(int, n1);
    g_autoptr(GArray) count = g_array_new(FALSE, TRUE, sizeof(int));
    for (int i = 0; i < n; i++) {
      int g = ts_program_op_kind(p, i) == TS_OP_COLL ? ts_program_op_group(p, i) : -1;
      if (g >= 0 && (guint)g >= count->len)
        g_array_set_size(count, (guint)g + 1);
      pi->coll_ord[i] = g >= 0 ? g_array_index(count, int, g)++ : -1;
    }
  }
}

static guint key3_hash(gconstpointer p)
{
  const key3 *k = p;
  guint h = (guint)k->a * 2654435761u;
  h ^= (guint)k->b * 2246822519u + (h << 6) + (h >> 2);
  h ^= (guint)k->c * 3266489917u + (h << 6) + (h >> 2);
  return h;
}

static gboolean key3_equal(gconstpointer x, gconstpointer y)
{
  const key3 *p = x, *q = y;
  return p->a == q->a && p->b == q->b && p->c == q->c;
}

static key3 *key3_new(int a, int b, int c)
{
  key3 *k = g_new(key3, 1);
  *k = (key3){a, b, c};
  return k;
}

static void rendezvous_free(gpointer p)
{
  rendezvous *rv = p;
  g_array_unref(rv->members);
  g_free(rv);
}

static guint p2p_hash(const key3 *k)
{
  guint64 h = ((guint64)(guint)k->a << 32 | (guint)k->b) * 0x9E3779B97F4A7C15u;
  h ^= h >> 29;
  h = (h ^ (guint)k->c) * 0xBF58476D1CE4E5B9u;
  return (guint)(h ^ (h >> 32));
}

/* The slot of key k, or NULL. */
static p2p_slot *p2p_find(const p2p_table *t, const key3 *k)
{
  if (t->len == 0)
    return NULL;
  for (guint j = p2p_hash(k) & (t->cap - 1);; j = (j + 1) & (t->cap - 1)) {
    p2p_slot *s = &t->slots[j];
    if (s->head < 0)
      return NULL;
    if (s->key.a == k->a && s->key.b == k->b && s->key.c == k->c)
      return s;
  }
}

/* A slot for key k (absent), growing the table to keep it at most half full. */
static p2p_slot *p2p_add(p2p_table *t, const key3 *k)
{
  if (2 * (t->len + 1) > t->cap) {
    guint cap = t->cap > 0 ? 2 * t->cap : 64, ocap = t->cap;
    p2p_slot *old = t->slots;
    t->slots = g_new(p2p_slot, cap);
    for (guint j = 0; j < cap; j++)
      t->slots[j].head = -1;
    t->cap = cap;
    for (guint i = 0; i < ocap; i++)
      if (old[i].head >= 0) {
        guint j = p2p_hash(&old[i].key) & (cap - 1);
        while (t->slots[j].head >= 0)
          j = (j + 1) & (cap - 1);
        t->slots[j] = old[i];
      }
    g_free(old);
  }
  guint j = p2p_hash(k) & (t->cap - 1);
  while (t->slots[j].head >= 0)
    j = (j + 1) & (t->cap - 1);
  t->len++;
  t->slots[j].key = *k;
  return &t->slots[j];
}

/* Empties slot s (its queue is empty), moving later entries of its probe run back into the
 * hole so that lookups stop at the first empty slot. */
static void p2p_remove(p2p_table *t, p2p_slot *s)
{
  guint i = (guint)(s - t->slots), mask = t->cap - 1;
  t->slots[i].head = -1;
  t->len--;
  for (guint j = (i + 1) & mask; t->slots[j].head >= 0; j = (j + 1) & mask) {
    guint h = p2p_hash(&t->slots[j].key) & mask;
    /* Entry j may move to the hole at i when its home h is not in (i, j] cyclically. */
    if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
      continue;
    t->slots[i] = t->slots[j];
    t->slots[j].head = -1;
    i = j;
  }
}

/* The view of tr's ops; shared (by replays of its placements): its initial states in one block
 * when they are many, as a replay's own states are (states_block), since replays run in them. */
static ts_replay_ops *replay_ops_new(const ts_trace *tr, gboolean shared)
{
  ts_replay_ops *o = g_new0(ts_replay_ops, 1);
  o->nprograms = tr->nprograms;
  o->progs = g_new0(prog_info, tr->nprograms > 0 ? tr->nprograms : 1);
  size_t nstates = 0;
  for (int p = 0; p < tr->nprograms; p++)
    nstates += (size_t)(tr->programs[p].nops > 0 ? tr->programs[p].nops : 1);
  if (shared && nstates * sizeof(op_state) >= STATES_BLOCK_MIN)
    o->tmpl_block = states_block(nstates * sizeof(op_state));
  size_t used = 0;
  for (int p = 0; p < tr->nprograms; p++) {
    prog_info_init(&o->progs[p], &tr->programs[p],
                   o->tmpl_block != NULL ? o->tmpl_block + used : NULL);
    used += (size_t)(tr->programs[p].nops > 0 ? tr->programs[p].nops : 1);
  }
  o->spare = g_new0(states_spare, 1);
  return o;
}

ts_replay_ops *ts_replay_ops_new(const ts_trace *tr)
{
  return replay_ops_new(tr, TRUE);
}

void ts_replay_ops_free(ts_replay_ops *o)
{
  if (o == NULL)
    return;
  for (int p = 0; p < o->nprograms; p++) {
    if (o->tmpl_block == NULL)
      g_free(o->progs[p].tmpl);
    g_free(o->progs[p].init_remaining);
    g_free(o->progs[p].succ_off);
    g_free(o->progs[p].succ);
    g_free(o->progs[p].p2p);
    g_free(o->progs[p].roots);
    g_free(o->progs[p].unsafe_groups);
    g_free(o->progs[p].coll_ord);
  }
  g_free(o->progs);
  free(o->tmpl_block); /* aligned_alloc's */
  if (o->spare != NULL)
    free(o->spare->block);
  g_free(o->spare);
  g_free(o);
}

static int group_expected(ts_replay *r, int group, int base);
static int group_base(const ts_replay *r, int group, int rank);

ts_replay *ts_replay_new(const ts_trace *tr, ts_backend *b, ts_replay_mode mode)
{
  return ts_replay_new_shared(tr, NULL, b, mode);
}

ts_replay *ts_replay_new_shared(const ts_trace *tr, const ts_replay_ops *ops, ts_backend *b,
                                ts_replay_mode mode)
{
  /* A view of other ops would replay them, not these: its shape at least must agree. */
  gboolean fits = ops == NULL || ops->nprograms == tr->nprograms;
  for (int p = 0; fits && ops != NULL && p < tr->nprograms; p++)
    fits = ops->progs[p].nops == tr->programs[p].nops && ops->progs[p].succ != NULL;
  g_return_val_if_fail(fits, NULL);
  ts_replay *r = g_new0(ts_replay, 1);
  r->tr = tr;
  r->backend = b;
  if (ops == NULL) {
    ops = r->own_ops = replay_ops_new(tr, FALSE);
    for (int p = 0; p < tr->nprograms; p++) /* its initial states are taken, not set back */
      g_clear_pointer(&r->own_ops->progs[p].init_remaining, g_free);
  }
  r->progs = ops->progs;
  /* A send along a symmetric axis pairs ranks of the same class: its partner is not a class
   * representative, so collapsing cannot replay it. */
  guint32 sym_axes = 0;
  for (int a = 0; a < tr->naxes && a < TS_MAX_AXES; a++)
    if (tr->axes[a].symmetric)
      sym_axes |= 1u << a;
  gboolean sym_p2p = FALSE;
  for (int p = 0; p < tr->nprograms; p++)
    sym_p2p = sym_p2p || r->progs[p].p2p_peer || (r->progs[p].p2p_axes & sym_axes) != 0;
  r->mode = mode == TS_REPLAY_COLLAPSED && sym_p2p ? TS_REPLAY_FULL : mode;
  r->sim_of_rank = g_new(int, tr->nranks);
  GArray *sims = g_array_new(FALSE, TRUE, sizeof(sim_rank));
  guint ng = tr->groups->len > 0 ? tr->groups->len : 1;
  int *users = g_new0(int, tr->nprograms > 0 ? tr->nprograms : 1); /* simulated ranks per program */
  for (int rank = 0; rank < tr->nranks; rank++) {
    gboolean rep = TRUE;
    if (r->mode == TS_REPLAY_COLLAPSED)
      for (int a = 0; a < tr->naxes && rep; a++)
        if (tr->axes[a].symmetric && ts_trace_axis_coord(tr, rank, a) != 0)
          rep = FALSE;
    r->sim_of_rank[rank] = rep ? 0 : -1;
    if (rep)
      users[ts_trace_program_of(tr, rank)]++;
  }
  /* Each simulated program's fixed durations, when the backend has them (ts_backend
   * fixed_seconds), asked for when its first rank's states are made and written into each of its
   * ranks' states, then dropped after its last (issue 15, eighteenth pass: all programs' arrays
   * were made first, 10 MB for the pp=64 splits written and read back from memory per replay;
   * one program's is still in cache as its states are made). fixed[p] is NULL until asked,
   * then the array or no_fixed. Without time order when the backend's seconds are pure and
   * fixed for every simulated program, and every simulated program's matching is order-safe
   * (so where one program has none, the replay is timed). */
  gboolean want_fixed = b->op_on_demand && b->fixed_seconds != NULL;
  double **fixed = want_fixed ? g_new0(double *, tr->nprograms > 0 ? tr->nprograms : 1) : NULL;
  static double no_fixed;
  r->order_free = want_fixed && b->pure_when_fixed;
  r->mode_asked = mode;
  r->ops_shared = r->own_ops == NULL ? ops : NULL;
  /* With a shared view, each program's last simulated rank replays in the view's initial
   * states, set back where an earlier replay left them (issue 15, twentieth pass: every rank
   * copied its states, 38 MB written to freshly faulted memory per replay of a pp=64 split, 3-5%
   * of the every-split sweep with the page clearing), unless another replay of the view is
   * using them; the other ranks copy theirs, into one block when they are many. */
  if (r->own_ops == NULL && ops->spare != NULL && !ops->spare->tmpl_lent) {
    r->tmpl_lent = TRUE;
    ops->spare->tmpl_lent = TRUE;
  }
  size_t nstates = 0;
  for (int p = 0; r->own_ops == NULL && p < tr->nprograms; p++)
    nstates += (size_t)(users[p] - (r->tmpl_lent && users[p] > 0)) *
               (size_t)(tr->programs[p].nops > 0 ? tr->programs[p].nops : 1);
  size_t used_states = 0;
  if (nstates * sizeof(op_state) >= STATES_BLOCK_MIN) {
    states_spare *sp = ops->spare;
    if (sp != NULL && sp->block != NULL && sp->bytes >= nstates * sizeof(op_state)) {
      r->states = sp->block; /* the last replay's, its pages mapped */
      r->states_bytes = sp->bytes;
      sp->block = NULL;
    } else {
      r->states_bytes = nstates * sizeof(op_state);
      r->states = states_block(r->states_bytes);
    }
  }
  for (int rank = 0; rank < tr->nranks; rank++) {
    if (r->sim_of_rank[rank] < 0)
      continue;
    r->sim_of_rank[rank] = (int)sims->len;
    sim_rank s = {0};
    s.rank = rank;
    s.program = ts_trace_program_of(tr, rank);
    int n = tr->programs[s.program].nops;
    if (fixed != NULL && fixed[s.program] == NULL) {
      double *f = g_new(double, n > 0 ? n : 1);
      if (!b->fixed_seconds(b, r, s.program, f))
        g_clear_pointer(&f, g_free);
      fixed[s.program] = f != NULL ? f : &no_fixed;
      if (f == NULL || !r->progs[s.program].order_safe)
        r->order_free = FALSE;
    }
    const double *f = fixed != NULL && fixed[s.program] != &no_fixed ? fixed[s.program] : NULL;
    gboolean last = --users[s.program] == 0;
    if (last && r->own_ops != NULL) { /* the last: takes the initial state */
      s.st = r->own_ops->progs[s.program].tmpl;
      r->own_ops->progs[s.program].tmpl = NULL;
      for (int i = 0; f != NULL && i < n; i++)
        s.st[i].x = f[i];
    } else if (r->own_ops == NULL) {
      /* A shared view's states: its successors and op fields as they are, the times, fixed
       * durations and counts set back (tmpl's may be an earlier replay's). */
      const prog_info *pi = &r->progs[s.program];
      const op_state *t0 = pi->tmpl;
      const int *rem = pi->init_remaining;
      if (last && r->tmpl_lent) {
        s.st = pi->tmpl;
      } else if (r->states != NULL) {
        s.st = r->states + used_states;
        used_states += (size_t)(n > 0 ? n : 1);
      } else {
        s.st = g_new(op_state, n > 0 ? n : 1);
      }
      for (int i = 0; i < n; i++) {
        op_state o = t0[i];
        o.t = 0.0;
        o.x = f != NULL ? f[i] : NAN;
        o.remaining = rem[i];
        s.st[i] = o;
      }
    } else {
      const op_state *t0 = r->progs[s.program].tmpl;
      if (r->states != NULL) {
        s.st = r->states + used_states;
        used_states += (size_t)(n > 0 ? n : 1);
      } else {
        s.st = g_new(op_state, n > 0 ? n : 1);
      }
      if (f != NULL) {
        for (int i = 0; i < n; i++) {
          s.st[i] = t0[i];
          s.st[i].x = f[i];
        }
      } else {
        memcpy(s.st, t0, sizeof(op_state) * (size_t)(n > 0 ? n : 1));
      }
    }
    if (last && f != NULL) {
      g_free(fixed[s.program]);
      fixed[s.program] = &no_fixed;
    }
    s.coll_seq = g_new0(int, ng);
    s.base = g_new(int, ng);
    s.expect = g_new(int, ng);
    for (guint g = 0; g < ng; g++)
      s.base[g] = s.expect[g] = -1;
    for (int a = 0; a < TS_MAX_AXES; a++)
      s.peer_fwd[a] = s.peer_back[a] = -2;
    g_array_append_val(sims, s);
  }
  r->nsim = (int)sims->len;
  r->sims = (sim_rank *)g_array_free(sims, FALSE);
  g_free(users);
  g_free(fixed); /* each program's array went with its last rank */
  /* Every simulated rank's state is made: programs no rank runs drop their initial state. */
  for (int p = 0; r->own_ops != NULL && p < tr->nprograms; p++)
    g_clear_pointer(&r->own_ops->progs[p].tmpl, g_free);
  r->opbufs = g_ptr_array_new_with_free_func(g_free);
  r->rendezvous = g_hash_table_new(key3_hash, key3_equal);
  r->rv_pool = g_ptr_array_new_with_free_func(rendezvous_free);
  r->waits = g_array_new(FALSE, FALSE, sizeof(p2p_wait));
  r->free_wait = -1;
  r->group_expect = g_hash_table_new_full(key3_hash, key3_equal, g_free, NULL);
  r->acts = g_array_new(FALSE, TRUE, sizeof(activity_rec));
  r->free_acts = g_array_new(FALSE, FALSE, sizeof(int));
  r->spans = g_array_new(FALSE, FALSE, sizeof(ts_span));
  /* A group a program may reach out of order keeps the replay timed when one of its instances
   * has several simulated members (their rendezvous is numbered in time order). */
  for (int i = 0; r->order_free && i < r->nsim; i++) {
    sim_rank *s = &r->sims[i];
    const prog_info *pi = &r->progs[s->program];
    for (int k = 0; r->order_free && k < pi->nunsafe_groups; k++) {
      int g = pi->unsafe_groups[k];
      if (g < 0 || (guint)g >= tr->groups->len)
        continue; /* op_ready names the bad group */
      if (s->base[g] < 0) {
        s->base[g] = group_base(r, g, s->rank);
        if (s->base[g] >= 0)
          s->expect[g] = group_expected(r, g, s->base[g]);
      }
      if (s->base[g] >= 0 && s->expect[g] > 1)
        r->order_free = FALSE;
    }
  }
  return r;
}

void ts_replay_free(ts_replay *r)
{
  if (r == NULL)
    return;
  for (int i = 0; i < r->nsim; i++) {
    if (r->states == NULL && r->sims[i].st != r->progs[r->sims[i].program].tmpl)
      g_free(r->sims[i].st);
    g_free(r->sims[i].coll_seq);
    g_free(r->sims[i].base);
    g_free(r->sims[i].expect);
    if (r->sims[i].waits != NULL)
      g_array_unref(r->sims[i].waits);
  }
  /* The block goes to the view for its next replay (the larger one stays), else is freed. */
  states_spare *sp = r->ops_shared != NULL ? r->ops_shared->spare : NULL;
  if (r->tmpl_lent && sp != NULL)
    sp->tmpl_lent = FALSE;
  if (r->states != NULL && sp != NULL && (sp->block == NULL || sp->bytes < r->states_bytes)) {
    free(sp->block);
    sp->block = g_steal_pointer(&r->states);
    sp->bytes = r->states_bytes;
  }
  free(r->states); /* aligned_alloc's */
  /* Last: the loop above reads the programs' templates and the spare block is the view's, both
   * in own_ops when the replay made its own view. */
  ts_replay_ops_free(r->own_ops);
  g_free(r->sims);
  g_free(r->sim_of_rank);
  /* Collectives still running or waiting (a replay that failed) own their rendezvous. */
  for (guint i = 0; i < r->acts->len; i++) {
    activity_rec *a = &g_array_index(r->acts, activity_rec, i);
    if (a->in_use && a->rv != NULL)
      rendezvous_free(a->rv);
  }
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init(&it, r->rendezvous);
  while (g_hash_table_iter_next(&it, NULL, &v))
    rendezvous_free(v);
  g_hash_table_unref(r->rendezvous);
  g_ptr_array_unref(r->rv_pool);
  g_array_unref(r->acts);
  g_array_unref(r->free_acts);
  g_free(r->ready);
  g_array_unref(r->spans);
  g_free(r->p2p_sends.slots);
  g_free(r->p2p_recvs.slots);
  g_array_unref(r->waits);
  g_hash_table_unref(r->group_expect);
  g_ptr_array_unref(r->opbufs);
  g_free(r);
}

void ts_replay_keep_spans(ts_replay *r, gboolean keep)
{
  r->keep_spans = keep;
}

const GArray *ts_replay_spans(const ts_replay *r)
{
  return r->spans;
}

gboolean ts_replay_is_order_free(const ts_replay *r)
{
  return r->order_free;
}

const ts_trace *ts_replay_trace(const ts_replay *r)
{
  return r->tr;
}

/* The op, expanded from the trace's packed store (a copy). */
static ts_op op_of(const ts_replay *r, int sim, int op)
{
  return ts_program_op(&r->tr->programs[r->sims[sim].program], op);
}

/* A record's copy of its activity's op: act.op points here while the activity runs (backends
 * keep the activity, the record's slot outlives it). */
static const ts_op *rec_op(ts_replay *r, int idx, ts_op op)
{
  while (r->opbufs->len <= (guint)idx)
    g_ptr_array_add(r->opbufs, NULL);
  ts_op *b = g_ptr_array_index(r->opbufs, idx);
  if (b == NULL) {
    b = g_new(ts_op, 1);
    r->opbufs->pdata[idx] = b;
  }
  *b = op;
  return b;
}

/* A send or receive's record (or, when it has none, its fields read into *buf). */
static inline const p2p_info *p2p_of(const ts_replay *r, int sim, int op, p2p_info *buf)
{
  const sim_rank *s = &r->sims[sim];
  int x = INFO_GROUP1(s->st[op].info) - 1;
  if (x >= 0)
    return &r->progs[s->program].p2p[x];
  const ts_program *p = &r->tr->programs[s->program];
  ts_program_op_p2p(p, op, &buf->axis, &buf->offset, &buf->tag, &buf->peer);
  buf->bytes = ts_program_op_bytes(p, op);
  return buf;
}

/* An op starts at now: its ready time gives way to its start; a pipeline receive that waited
 * for its partner records the wait (the bubble). */
static inline void op_begin(ts_replay *r, int sim, int op, double now)
{
  op_state *st = &r->sims[sim].st[op];
  if (G_UNLIKELY(INFO_KIND(st->info) == TS_OP_RECV) && INFO_CAT(st->info) == TS_CAT_COMM_PP &&
      now > st->t) {
    sim_rank *s = &r->sims[sim];
    if (s->waits == NULL)
      s->waits = g_array_new(FALSE, FALSE, 2 * sizeof(double));
    double w[2] = {st->t, now};
    g_array_append_vals(s->waits, w, 1);
  }
  st->t = now;
  /* The op completes after about a queue's length of other events: ask now for the states its
   * completion will update (with their fixed durations, which starting them reads right
   * after), some far down the program (a backward op's forward input). The successors are
   * named in this op's own state (issue 15, twelfth pass: reading them from a list was two
   * more misses per event). */
  op_state *sts = r->sims[sim].st;
  if (st->s1 >= -1) {
    if (st->s0 >= 0)
      __builtin_prefetch(&sts[st->s0], 1);
    if (st->s1 >= 0)
      __builtin_prefetch(&sts[st->s1], 1);
  } else {
    /* A longer list is a miss of its own: only ask for it here (op_complete then asks for
     * its states all at once before updating them). */
    __builtin_prefetch(&r->progs[r->sims[sim].program].succ[st->s0]);
  }
}

static int activity_new(ts_replay *r)
{
  int idx;
  if (r->free_acts->len > 0) {
    idx = g_array_index(r->free_acts, int, r->free_acts->len - 1);
    r->free_acts->len--;
  } else {
    idx = (int)r->acts->len;
    g_array_set_size(r->acts, r->acts->len + 1);
  }
  activity_rec *a = &g_array_index(r->acts, activity_rec, idx);
  memset(a, 0, sizeof *a);
  a->in_use = TRUE;
  a->act.token = (guint64)idx;
  return idx;
}

static gboolean complete_token(ts_replay *r, guint64 token, double end_s);

/* Order-free: the activity start() just queued (the queue's only event) completes now. */
static gboolean complete_started(ts_replay *r, GError **error)
{
  ts_evq *q = r->backend->queue;
  if (G_UNLIKELY(q->len != 1)) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "order-free replay: %u events queued", q->len);
    return FALSE;
  }
  ts_event e = ts_evq_pop(q);
  return complete_token(r, e.token, e.t);
}

static gboolean activity_start(ts_replay *r, int idx, double now, GError **error)
{
  r->outstanding++;
  activity_rec *a = &g_array_index(r->acts, activity_rec, idx);
  const member_ref *m = a->rv != NULL ? (const member_ref *)a->rv->members->data : a->inl;
  guint n = a->rv != NULL ? a->rv->members->len : (guint)a->ninl;
  for (guint i = 0; i < n; i++)
    op_begin(r, m[i].sim, m[i].op, now);
  ts_activity act = a->act; /* the backend may start more activities, growing r->acts */
  if (!r->backend->start(r->backend, r, &act, now, error))
    return FALSE;
  return !r->order_free || complete_started(r, error);
}

/* "Group instance" expected simulated members: those of the group's ranks that are simulated. */
static int group_expected(ts_replay *r, int group, int base)
{
  key3 k = {group, base, 0};
  gpointer v = g_hash_table_lookup(r->group_expect, &k);
  if (v != NULL)
    return GPOINTER_TO_INT(v) - 1;
  const ts_group *g = g_ptr_array_index(r->tr->groups, group);
  int n = ts_trace_group_size(g), count = 0;
  for (int m = 0; m < n; m++)
    if (r->sim_of_rank[ts_trace_group_rank(r->tr, g, base, m)] >= 0)
      count++;
  g_hash_table_insert(r->group_expect, key3_new(group, base, 0), GINT_TO_POINTER(count + 1));
  return count;
}

static int group_base(const ts_replay *r, int group, int rank)
{
  return ts_trace_group_base(r->tr, g_ptr_array_index(r->tr->groups, group), rank, NULL);
}

static inline void op_complete(ts_replay *r, int sim, int op, double end, gboolean fixed);

static inline void ready_push(ts_replay *r, int sim, int op)
{
  if (G_UNLIKELY(r->nready == r->ready_cap)) {
    r->ready_cap = r->ready_cap > 0 ? 2 * r->ready_cap : 256;
    r->ready = g_renew(member_ref, r->ready, r->ready_cap);
  }
  r->ready[r->nready++] = (member_ref){sim, op};
}

static rendezvous *rendezvous_get(ts_replay *r)
{
  if (r->rv_pool->len > 0) {
    rendezvous *rv = g_ptr_array_steal_index_fast(r->rv_pool, r->rv_pool->len - 1);
    g_array_set_size(rv->members, 0);
    return rv;
  }
  rendezvous *rv = g_new0(rendezvous, 1);
  rv->members = g_array_new(FALSE, FALSE, sizeof(member_ref));
  return rv;
}

/* An activity of one op (compute, off-chip, a collective with one simulated member): no
 * record, its token names the op. The label is looked up only for backends that read it on
 * every activity (the analytic backend reads it on errors, from the op). */
static gboolean start_single(ts_replay *r, int sim, int opi, ts_op_kind kind, int chip,
                             const ts_group *group, double now, GError **error)
{
  sim_rank *s = &r->sims[sim];
  if (!r->backend->op_on_demand) {
    /* The backend keeps act.op while the activity runs: a record holds the op's copy. */
    int idx = activity_new(r);
    activity_rec *a = &g_array_index(r->acts, activity_rec, idx);
    ts_op op = op_of(r, sim, opi);
    a->inl[0] = (member_ref){sim, opi};
    a->ninl = 1;
    a->act.kind = kind;
    a->act.op = rec_op(r, idx, op);
    a->act.chip = chip;
    a->act.group = group;
    a->act.nmembers_simulated = group != NULL ? 1 : 0;
    a->act.label =
        r->backend->label_on_error_only ? NULL : g_ptr_array_index(r->tr->labels, op.label);
    a->act.program = s->program;
    a->act.index = opi;
    return activity_start(r, idx, now, error);
  }
  {
    /* Its duration is the op's own (ts_backend.fixed_seconds, in its state since the replay
     * was made; NaN otherwise): push its completion as start() would, no call. */
    double d = s->st[opi].x;
    if (!isnan(d)) {
      op_begin(r, sim, opi, now);
      if (r->order_free) { /* it ends now + d: complete it now */
        r->events++;
        op_complete(r, sim, opi, now + d, TRUE);
        return TRUE;
      }
      r->outstanding++;
      ts_evq_push(r->backend->queue, now + d, TOKEN_OF_OP(sim, opi) | TOKEN_FIXED_BIT);
      return TRUE;
    }
  }
  ts_activity act = {0};
  act.token = TOKEN_OF_OP(sim, opi);
  act.kind = kind;
  act.op = NULL; /* the backend reads it through ts_activity_op */
  act.chip = chip;
  act.group = group;
  act.nmembers_simulated = group != NULL ? 1 : 0;
  act.label = r->backend->label_on_error_only
                  ? NULL
                  : g_ptr_array_index(r->tr->labels,
                                      ts_program_op_label(&r->tr->programs[s->program], opi));
  act.program = s->program;
  act.index = opi;
  r->outstanding++;
  op_begin(r, sim, opi, now);
  if (!r->backend->start(r->backend, r, &act, now, error))
    return FALSE;
  return !r->order_free || complete_started(r, error);
}

/* A collective's algorithm, from the packed op. */
static inline int op_algo(const ts_program *p, int i)
{
  if (p->pk[i].flags & TS_PK_WIDE)
    return ts_program_op(p, i).algo;
  return p->pk[i].algo;
}

/* An op whose predecessors are all complete: start it, join its rendezvous, or match it. */
static gboolean op_ready(ts_replay *r, int sim, int opi, double now, GError **error)
{
  sim_rank *s = &r->sims[sim];
  guint32 info = s->st[opi].info;
  int kind = INFO_KIND(info);
  switch (kind) {
  case TS_OP_WAIT:
    s->st[opi].t = now;
    op_complete(r, sim, opi, now, FALSE);
    return TRUE;
  case TS_OP_COMPUTE:
  case TS_OP_XFER:
  case TS_OP_DELAY:
    return start_single(r, sim, opi, (ts_op_kind)kind, s->rank, NULL, now, error);
  case TS_OP_COLL: {
    int group = INFO_GROUP1(info) - 1;
    if (group < 0)
      group = ts_program_op_group(&r->tr->programs[s->program], opi);
    if (s->base[group] < 0) {
      s->base[group] = group_base(r, group, s->rank);
      if (s->base[group] >= 0)
        s->expect[group] = group_expected(r, group, s->base[group]);
    }
    int base = s->base[group];
    if (base < 0) {
      const ts_op ob = op_of(r, sim, opi), *op = &ob;
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "rank %d op %d '%s': collective on group %s, which does not list rank %d",
                  s->rank, opi, (char *)g_ptr_array_index(r->tr->labels, op->label),
                  ((ts_group *)g_ptr_array_index(r->tr->groups, op->group))->name, s->rank);
      return FALSE;
    }
    const int *ord = r->progs[s->program].coll_ord;
    int seq = ord != NULL ? ord[opi] : s->coll_seq[group];
    s->coll_seq[group]++;
    int expected = s->expect[group];
    if (expected == 1)
      /* The only simulated member (every collective of a collapsed replay on a symmetric
       * axis): no rendezvous to meet at, it starts now, as a compute op does. */
      return start_single(r, sim, opi, TS_OP_COLL, base, g_ptr_array_index(r->tr->groups, group),
                          now > 0 ? now : 0.0, error);
    key3 k = {group, base, seq};
    rendezvous *rv = g_hash_table_lookup(r->rendezvous, &k);
    if (rv == NULL) {
      rv = rendezvous_get(r);
      rv->key = k;
      rv->expected = expected;
      rv->arrived = 0;
      rv->arrival_max = 0;
      g_hash_table_insert(r->rendezvous, &rv->key, rv);
    }
    /* Members agree on the collective: read from the packed ops, not expanded. */
    const member_ref *m0 = rv->members->len > 0 ? &g_array_index(rv->members, member_ref, 0) : NULL;
    ts_coll_kind ck, fk;
    double cb, fbytes;
    ts_program_op_coll(&r->tr->programs[s->program], opi, &ck, &cb);
    if (m0 != NULL)
      ts_program_op_coll(&r->tr->programs[r->sims[m0->sim].program], m0->op, &fk, &fbytes);
    else
      fk = ck, fbytes = cb;
    if (fk != ck || fbytes != cb) {
      const ts_op ob = op_of(r, sim, opi), *op = &ob;
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "rank %d op %d '%s': collective %s of %.17g bytes on group %s meets %s of "
                  "%.17g bytes from another member; expected matching collectives",
                  s->rank, opi, (char *)g_ptr_array_index(r->tr->labels, op->label),
                  ts_coll_kind_name(op->coll), op->bytes,
                  ((ts_group *)g_ptr_array_index(r->tr->groups, op->group))->name,
                  ts_coll_kind_name(fk), fbytes);
      return FALSE;
    }
    if (G_UNLIKELY(r->order_free) && m0 != NULL &&
        op_algo(&r->tr->programs[s->program], opi) !=
            op_algo(&r->tr->programs[r->sims[m0->sim].program], m0->op)) {
      /* The backend costs a collective by its first member's op: which member comes first is
       * time order's to say when they differ, so the replay runs timed. */
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "order-free replay: members' algorithms differ");
      return FALSE;
    }
    member_ref ref = {sim, opi};
    g_array_append_val(rv->members, ref);
    rv->arrived++;
    if (now > rv->arrival_max)
      rv->arrival_max = now;
    if (rv->arrived < rv->expected)
      return TRUE;
    g_hash_table_remove(r->rendezvous, &k);
    m0 = &g_array_index(rv->members, member_ref, 0);
    int idx = activity_new(r);
    activity_rec *a = &g_array_index(r->acts, activity_rec, idx);
    const ts_program *fp = &r->tr->programs[r->sims[m0->sim].program];
    a->rv = rv;
    a->act.kind = TS_OP_COLL;
    /* The first member's op: a copy for the backend to keep, or read on demand. */
    a->act.op = r->backend->op_on_demand ? NULL : rec_op(r, idx, ts_program_op(fp, m0->op));
    a->act.chip = base;
    a->act.group = g_ptr_array_index(r->tr->groups, group);
    a->act.nmembers_simulated = rv->expected;
    a->act.label = g_ptr_array_index(r->tr->labels, ts_program_op_label(fp, m0->op));
    a->act.program = r->sims[m0->sim].program;
    a->act.index = m0->op;
    return activity_start(r, idx, rv->arrival_max, error);
  }
  case TS_OP_SEND:
  case TS_OP_RECV: {
    /* The peer fields only, from the replay's record (the whole op on errors). */
    p2p_info xb;
    const p2p_info *x = p2p_of(r, sim, opi, &xb);
    int axis = x->axis, offset = x->offset, tag = x->tag, opeer = x->peer;
    int *cached = opeer > 0 || axis < 0 || axis >= TS_MAX_AXES ? NULL
                  : offset == 1                                ? &s->peer_fwd[axis]
                  : offset == -1                               ? &s->peer_back[axis]
                                                               : NULL;
    int peer = cached != NULL && *cached != -2 ? *cached
               : opeer > 0                     ? (opeer - 1 < r->tr->nranks ? opeer - 1 : -1)
               : axis < 0 || axis >= r->tr->naxes
                   ? -1
                   : ts_trace_axis_neighbor(r->tr, s->rank, axis, offset);
    if (cached != NULL)
      *cached = peer;
    if (peer < 0 || r->sim_of_rank[peer] < 0) {
      const ts_op ob = op_of(r, sim, opi), *op = &ob;
      if (op->peer > 0)
        g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                    "rank %d op %d '%s': %s with peer rank %d, which is not replayed", s->rank, opi,
                    (char *)g_ptr_array_index(r->tr->labels, op->label), ts_op_kind_name(op->kind),
                    op->peer - 1);
      else
        g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                    "rank %d op %d '%s': %s to offset %d along axis %s has no partner rank",
                    s->rank, opi, (char *)g_ptr_array_index(r->tr->labels, op->label),
                    ts_op_kind_name(op->kind), op->offset, r->tr->axes[op->axis].name);
      return FALSE;
    }
    gboolean is_send = kind == TS_OP_SEND;
    int src = is_send ? s->rank : peer, dst = is_send ? peer : s->rank;
    key3 k = {src, dst, tag};
    p2p_table *mine = is_send ? &r->p2p_sends : &r->p2p_recvs;
    p2p_table *theirs = is_send ? &r->p2p_recvs : &r->p2p_sends;
    p2p_slot *q = p2p_find(theirs, &k);
    if (q == NULL) { /* no partner waiting: wait at the tail of this key's queue */
      int w = r->free_wait;
      if (w >= 0) {
        r->free_wait = g_array_index(r->waits, p2p_wait, w).next;
      } else {
        w = (int)r->waits->len;
        g_array_set_size(r->waits, r->waits->len + 1);
      }
      g_array_index(r->waits, p2p_wait, w) = (p2p_wait){sim, opi, now, -1};
      p2p_slot *my = p2p_find(mine, &k);
      if (my == NULL) {
        my = p2p_add(mine, &k);
        my->head = w;
      } else {
        g_array_index(r->waits, p2p_wait, my->tail).next = w;
      }
      my->tail = w;
      return TRUE;
    }
    int wi = q->head;
    const p2p_wait ow = g_array_index(r->waits, p2p_wait, wi), *other = &ow;
    g_array_index(r->waits, p2p_wait, wi).next = r->free_wait;
    r->free_wait = wi;
    if (ow.next >= 0)
      q->head = ow.next;
    else
      p2p_remove(theirs, q);
    if (r->order_free && r->backend->p2p_seconds != NULL) {
      /* Without time order and with the backend's seconds for a pair (issue 15, seventeenth
       * pass): what activity_start, start() and complete_token do for it, here, with no record
       * and no event: both ops begin (sender first), the pair ends at now + seconds and its
       * ops complete in reverse order, as complete_token completes them. */
      member_ref sr = is_send ? (member_ref){sim, opi} : (member_ref){other->sim, other->op};
      member_ref rr = is_send ? (member_ref){other->sim, other->op} : (member_ref){sim, opi};
      double start = now > other->ready ? now : other->ready;
      double bytes = is_send ? x->bytes : p2p_of(r, sr.sim, sr.op, &xb)->bytes;
      op_begin(r, sr.sim, sr.op, start);
      op_begin(r, rr.sim, rr.op, start);
      double end = start + r->backend->p2p_seconds(r->backend, r, src, dst, bytes, start);
      r->events++;
      op_complete(r, rr.sim, rr.op, end, FALSE);
      op_complete(r, sr.sim, sr.op, end, FALSE);
      return TRUE;
    }
    int idx = activity_new(r);
    activity_rec *a = &g_array_index(r->acts, activity_rec, idx);

    member_ref send_ref = is_send ? (member_ref){sim, opi} : (member_ref){other->sim, other->op};
    member_ref recv_ref = is_send ? (member_ref){other->sim, other->op} : (member_ref){sim, opi};
    a->inl[0] = send_ref;
    a->inl[1] = recv_ref;
    a->ninl = 2;
    const ts_op *sop =
        r->backend->op_on_demand ? NULL : rec_op(r, idx, op_of(r, send_ref.sim, send_ref.op));
    a->act.kind = TS_OP_SEND;
    a->act.op = sop;
    a->act.chip = src;
    a->act.peer = dst;
    a->act.bytes = is_send ? x->bytes : p2p_of(r, send_ref.sim, send_ref.op, &xb)->bytes;
    a->act.label =
        r->backend->label_on_error_only
            ? NULL
            : g_ptr_array_index(r->tr->labels,
                                ts_program_op_label(&r->tr->programs[r->sims[send_ref.sim].program],
                                                    send_ref.op));
    a->act.program = r->sims[send_ref.sim].program;
    a->act.index = send_ref.op;
    return activity_start(r, idx, now > other->ready ? now : other->ready, error);
  }
  default:
    break;
  }
  return TRUE;
}

static inline void op_complete(ts_replay *r, int sim, int opi, double end, gboolean fixed)
{
  sim_rank *s = &r->sims[sim];
  op_state *st = s->st;
  op_state *o = &st[opi];
  if (fixed) {
    o->remaining = DONE_FIXED; /* its end is st.t + its fixed duration: op_end */
  } else {
    o->x = end;
    o->remaining = DONE;
  }
  r->ndone++;
  const prog_info *pi = &r->progs[s->program];
  /* A rank's ops complete roughly in program order, but tens of ranks' programs interleave,
   * more streams than the hardware prefetcher follows: ask for the lines a few ops on. */
  int ahead = opi + 8 < pi->nops ? opi + 8 : pi->nops - 1;
  __builtin_prefetch(&st[ahead], 1);
  if (o->s1 < -1) /* a list (see op_begin): its states' misses overlap */
    FOR_SUCC(pi, o, j, __builtin_prefetch(&st[j], 1));
  FOR_SUCC(pi, o, j, {
    if (end > st[j].t)
      st[j].t = end;
    if (--st[j].remaining == 0)
      ready_push(r, sim, j);
  });
}

/* drain_ready without time order (issue 15, seventeenth pass): the same pops and pushes in the
 * same order, with the ready stack, the counters and the current rank's states in locals, not
 * reloaded through the replay at every event (a successor is always of its op's rank). Ops with
 * a fixed duration (compute, off-chip, delay, a collective whose group instance this rank alone
 * simulates, once the group is known) complete here, as op_complete would complete them;
 * anything else goes through op_ready with the stack and counters written back. */
static gboolean drain_order_free(ts_replay *r, GError **error)
{
  member_ref *stk = r->ready;
  int n = r->nready, cap = r->ready_cap, cur = -1;
  gint64 events = 0;
  sim_rank *s = NULL;
  op_state *st = NULL;
  const prog_info *pi = NULL;
  gboolean ok = TRUE;
  while (n > 0) {
    member_ref ref = stk[--n];
    if (ref.sim != cur) {
      cur = ref.sim;
      s = &r->sims[cur];
      st = s->st;
      pi = &r->progs[s->program];
    }
    op_state *o = &st[ref.op];
    int kind = INFO_KIND(o->info);
    double now = o->t, d = o->x;
    /* Ends at now + d and completes here, its successors onto the stack (its state's start is
     * its ready time already, and the successors' states are read next: op_begin's requests
     * for them would come too late to help). */
    gboolean fixed = !isnan(d) && (kind == TS_OP_COMPUTE || kind == TS_OP_XFER ||
                                   kind == TS_OP_DELAY || kind == TS_OP_COLL);
    if (fixed && kind == TS_OP_COLL) {
      int group = INFO_GROUP1(o->info) - 1;
      fixed = group >= 0 && s->base[group] >= 0 && s->expect[group] == 1;
      if (fixed) { /* start_single's start: its state's start */
        s->coll_seq[group]++;
        now = now > 0 ? now : 0.0;
        o->t = now;
      }
    }
    if (!fixed) {
      r->ready = stk;
      r->nready = n;
      r->ready_cap = cap;
      r->events += events;
      r->ndone += events;
      events = 0;
      ok = op_ready(r, ref.sim, ref.op, now, error);
      stk = r->ready;
      n = r->nready;
      cap = r->ready_cap;
      cur = -1;
      if (!ok)
        break;
      continue;
    }
    /* op_complete(r, ref.sim, ref.op, now + d, TRUE), its pushes onto the local stack. */
    double end = now + d;
    o->remaining = DONE_FIXED;
    events++;
    int ahead = ref.op + 8 < pi->nops ? ref.op + 8 : pi->nops - 1;
    __builtin_prefetch(&st[ahead], 1);
    if (o->s1 < -1)
      FOR_SUCC(pi, o, j, __builtin_prefetch(&st[j], 1));
    FOR_SUCC(pi, o, j, {
      if (end > st[j].t)
        st[j].t = end;
      if (--st[j].remaining == 0) {
        if (G_UNLIKELY(n == cap)) {
          cap = cap > 0 ? 2 * cap : 256;
          stk = g_renew(member_ref, stk, cap);
        }
        stk[n].sim = cur; /* (no comma: a macro argument) */
        stk[n++].op = j;
      }
    });
  }
  r->ready = stk;
  r->nready = n;
  r->ready_cap = cap;
  r->events += events; /* one event per op completed here */
  r->ndone += events;
  return ok;
}

/* Starts everything that became ready, in a fixed order, so replays are deterministic. */
static gboolean drain_ready(ts_replay *r, GError **error)
{
  if (r->order_free)
    return drain_order_free(r, error);
  while (r->nready > 0) {
    member_ref ref = r->ready[--r->nready];
    const op_state *o = &r->sims[ref.sim].st[ref.op];
    int kind = INFO_KIND(o->info);
    double now = o->t, d = o->x;
    /* A compute op, off-chip transfer or delay with a fixed duration (the most common event):
     * what op_ready and start_single do for it, here (issue 15, twelfth pass). */
    if ((kind == TS_OP_COMPUTE || kind == TS_OP_XFER || kind == TS_OP_DELAY) && !isnan(d)) {
      op_begin(r, ref.sim, ref.op, now);
      r->outstanding++;
      ts_evq_push(r->backend->queue, now + d, TOKEN_OF_OP(ref.sim, ref.op) | TOKEN_FIXED_BIT);
      continue;
    }
    if (!op_ready(r, ref.sim, ref.op, now, error))
      return FALSE;
  }
  return TRUE;
}

/* The activity with this token ended at end_s: its ops complete (their successors become ready,
 * not started). */
static gboolean complete_token(ts_replay *r, guint64 token, double end_s)
{
  if (token & TOKEN_OP_BIT) {
    int sim = TOKEN_SIM(token), op = (int)(guint32)token;
    g_return_val_if_fail(sim < r->nsim && op < r->progs[r->sims[sim].program].nops &&
                             r->sims[sim].st[op].remaining == 0,
                         FALSE);
    r->outstanding--;
    r->events++;
    op_complete(r, sim, op, end_s, (token & TOKEN_FIXED_BIT) != 0);
    return TRUE;
  }
  g_return_val_if_fail(token < r->acts->len, FALSE);
  activity_rec *a = &g_array_index(r->acts, activity_rec, token);
  g_return_val_if_fail(a->in_use, FALSE);
  rendezvous *rv = a->rv;
  member_ref inl[2] = {a->inl[0], a->inl[1]};
  const member_ref *m = rv != NULL ? (const member_ref *)rv->members->data : inl;
  guint n = rv != NULL ? rv->members->len : (guint)a->ninl;
  a->in_use = FALSE;
  a->rv = NULL;
  int idx = (int)token;
  g_array_append_val(r->free_acts, idx);
  r->outstanding--;
  r->events++;
  /* Reverse order on the ready stack keeps member order = start order. */
  for (guint i = n; i-- > 0;)
    op_complete(r, m[i].sim, m[i].op, end_s, FALSE);
  if (rv != NULL)
    g_ptr_array_add(r->rv_pool, rv);
  return TRUE;
}

gboolean ts_replay_complete(ts_replay *r, guint64 token, double end_s, GError **error)
{
  return complete_token(r, token, end_s) && drain_ready(r, error);
}

gboolean ts_replay_drain_queue(ts_replay *r, ts_evq *q, GError **error)
{
  while (q->len > 0) {
    ts_event e = ts_evq_pop(q);
    if (e.token & TOKEN_OP_BIT) { /* a one-op activity: its op, as ts_replay_complete does */
      int sim = TOKEN_SIM(e.token), op = (int)(guint32)e.token;
      r->outstanding--;
      r->events++;
      op_complete(r, sim, op, e.t, (e.token & TOKEN_FIXED_BIT) != 0);
      if (!drain_ready(r, error))
        return FALSE;
    } else if (!ts_replay_complete(r, e.token, e.t, error)) {
      return FALSE;
    }
  }
  return TRUE;
}

/* Length of the union of intervals (sorted in place by start). */
typedef struct {
  double s, e;
} ival;

/* An interval with its category (communication, per category). */
typedef struct {
  ival v;
  int cat;
} cival;

static inline gboolean ival_less(const ival *x, const ival *y)
{
  return x->s < y->s || (x->s == y->s && x->e < y->e);
}

/* Stable merge sort by (start, end), as glibc's qsort sorts (a merge sort): equal intervals
 * keep their order, so the results do not depend on which sort ran. Replayed intervals come
 * nearly sorted, so a merge of two ordered halves is skipped, and short runs take an
 * insertion sort; the comparison is inline, not called through a pointer per pair. A list
 * already in order is found by one scan and left as it is (issue 15: 4,245 of 8,192 lists of
 * the every-split sweep, 59% of the intervals). */
#define DEFINE_IVAL_SORT(NAME, T, KEY)                                                             \
  static void NAME##_rec(T *v, T *tmp, size_t n)                                                   \
  {                                                                                                \
    if (n <= 16) {                                                                                 \
      for (size_t i = 1; i < n; i++) {                                                             \
        T x = v[i];                                                                                \
        size_t j = i;                                                                              \
        for (; j > 0 && ival_less(&KEY(x), &KEY(v[j - 1])); j--)                                   \
          v[j] = v[j - 1];                                                                         \
        v[j] = x;                                                                                  \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    size_t h = n / 2;                                                                              \
    NAME##_rec(v, tmp, h);                                                                         \
    NAME##_rec(v + h, tmp, n - h);                                                                 \
    if (!ival_less(&KEY(v[h]), &KEY(v[h - 1])))                                                    \
      return;                                                                                      \
    memcpy(tmp, v, h * sizeof *v);                                                                 \
    size_t i = 0, j = h, k = 0;                                                                    \
    while (i < h && j < n)                                                                         \
      v[k++] = ival_less(&KEY(v[j]), &KEY(tmp[i])) ? v[j++] : tmp[i++];                            \
    while (i < h)                                                                                  \
      v[k++] = tmp[i++];                                                                           \
  }                                                                                                \
  static void NAME(T *v, size_t n)                                                                 \
  {                                                                                                \
    size_t k = 1;                                                                                  \
    while (k < n && !ival_less(&KEY(v[k]), &KEY(v[k - 1])))                                        \
      k++;                                                                                         \
    if (k >= n)                                                                                    \
      return; /* already in order (about half the replay's lists): the sort would keep it */       \
    T *tmp = g_new(T, n / 2 + 1);                                                                  \
    NAME##_rec(v, tmp, n);                                                                         \
    g_free(tmp);                                                                                   \
  }

#define IVAL_SELF(x) (x)
#define IVAL_OF_CIVAL(x) ((x).v)
DEFINE_IVAL_SORT(ival_sort, ival, IVAL_SELF)
DEFINE_IVAL_SORT(cival_sort, cival, IVAL_OF_CIVAL)

static double union_len(ival *v, int n)
{
  if (n == 0)
    return 0.0;
  ival_sort(v, (size_t)n);
  double total = 0, cs = v[0].s, ce = v[0].e;
  for (int i = 1; i < n; i++) {
    if (v[i].s > ce) {
      total += ce - cs;
      cs = v[i].s;
      ce = v[i].e;
    } else if (v[i].e > ce) {
      ce = v[i].e;
    }
  }
  return total + (ce - cs);
}

static gboolean is_comm(ts_op_kind k)
{
  return k == TS_OP_COLL || k == TS_OP_SEND || k == TS_OP_RECV;
}

/* A running union of intervals fed in order of start: the length closed so far and the open
 * segment [cs, ce]. Fed the same intervals in the same order, it does the same additions as a
 * merge pass over them, so every sum keeps its bits. */
typedef struct {
  double total, cs, ce;
  gboolean open;
} ival_union;

static inline void ival_union_add(ival_union *u, const ival *v)
{
  if (!u->open || v->s > u->ce) {
    if (u->open)
      u->total += u->ce - u->cs;
    u->cs = v->s;
    u->ce = v->e;
    u->open = TRUE;
  } else if (v->e > u->ce) {
    u->ce = v->e;
  }
}

static inline double ival_union_len(const ival_union *u)
{
  return u->open ? u->total + (u->ce - u->cs) : 0.0;
}

/* Union length of two interval lists, each sorted by start, in one merge pass. */
static double union_len_merged(const ival *a, int na, const ival *b, int nb)
{
  ival_union u = {0};
  for (int i = 0, j = 0; i < na || j < nb;)
    ival_union_add(&u, j >= nb || (i < na && a[i].s <= b[j].s) ? &a[i++] : &b[j++]);
  return ival_union_len(&u);
}

/* A completed op's end: stored, or its start plus its fixed duration (the sum its completion
 * was queued at, so the same bits). */
static inline double op_end(const sim_rank *s, int i)
{
  return s->st[i].remaining == DONE_FIXED ? s->st[i].t + s->st[i].x : s->st[i].x;
}

static void rank_breakdown(const ts_replay *r, int sim, ts_rank_result *out)
{
  const sim_rank *s = &r->sims[sim];
  const ts_program *p = &r->tr->programs[s->program];
  memset(out, 0, sizeof *out);
  out->rank = s->rank;
  ival *comp = g_new(ival, p->nops + 1);
  /* Communication is sorted with its categories, so each category's intervals stay sorted. */
  cival *cc = g_new(cival, p->nops + 1);
  /* Pipeline bubble: the rank waits for a pipeline receive whose partner has not sent yet
   * (from when the receive could start to when the transfer began), doing nothing else. */
  int nc = 0, nm = 0, nw = s->waits != NULL ? (int)s->waits->len : 0;
  ival *wait = g_new(ival, nw + 1);
  if (nw > 0)
    memcpy(wait, s->waits->data, sizeof(ival) * (gsize)nw);
  for (int i = 0; i < p->nops; i++) {
    const op_state *st = &s->st[i];
    int kind = INFO_KIND(st->info), cat = INFO_CAT(st->info);
    double e = op_end(s, i), d = e - st->t;
    if (e > out->end_s)
      out->end_s = e;
    out->cat_s[cat] += d;
    /* Off-chip transfers and fixed durations count as busy time, as the compute-like ops
     * that stood for them in format 1 did. */
    if (kind == TS_OP_COMPUTE || kind == TS_OP_XFER || kind == TS_OP_DELAY)
      comp[nc++] = (ival){st->t, e};
    else if (is_comm(kind))
      cc[nm++] = (cival){{st->t, e}, cat};
  }
  out->compute_s = union_len(comp, nc); /* sorts comp */
  cival_sort(cc, (size_t)nm);
  /* The sorted communication intervals, in place over cc (an ival is smaller than a cival:
   * element i is read before it is written over), and their categories beside them. */
  guint8 *comm_cat = g_new(guint8, nm + 1);
  ival *comm = (ival *)cc;
  for (int i = 0; i < nm; i++) {
    cival c = cc[i];
    comm_cat[i] = (guint8)c.cat;
    comm[i] = c.v;
  }
  /* One merge of compute with all communication (issue 15: one pass instead of one per
   * category) feeds each running union the intervals its own merge would see, in the same
   * order: in a merge of two lists sorted by start, a compute interval comes before a
   * communication one exactly when its start is not later, whatever else lies between. So:
   * communication alone; compute with all communication; per category present, compute with
   * that category's communication (what that category alone adds on top of compute); and the
   * busy intervals for the pipeline bubble. */
  int cats[TS_NCATS], ncats = 0, slot[TS_NCATS];
  {
    gboolean seen[TS_NCATS] = {FALSE};
    for (int i = 0; i < nm; i++)
      seen[comm_cat[i]] = TRUE;
    for (int c = 0; c < TS_NCATS; c++) {
      slot[c] = ncats;
      if (seen[c])
        cats[ncats++] = c;
    }
  }
  ival_union u_comm = {0}, u_both = {0}, u_cat[TS_NCATS] = {{0}};
  ival *busy = nw > 0 ? g_new(ival, nc + nm + 1) : NULL;
  int nb = 0;
  for (int i = 0, j = 0; i < nc || j < nm;) {
    if (j >= nm || (i < nc && comp[i].s <= comm[j].s)) {
      const ival *v = &comp[i++];
      ival_union_add(&u_both, v);
      for (int k = 0; k < ncats; k++)
        ival_union_add(&u_cat[k], v);
      if (busy != NULL)
        busy[nb++] = *v;
    } else {
      const ival *v = &comm[j];
      ival_union_add(&u_comm, v);
      ival_union_add(&u_both, v);
      ival_union_add(&u_cat[slot[comm_cat[j]]], v);
      if (busy != NULL)
        busy[nb++] = *v;
      j++;
    }
  }
  out->comm_s = ival_union_len(&u_comm);
  double u_all = ival_union_len(&u_both);
  out->exposed_comm_s = u_all - out->compute_s;
  out->idle_s = out->end_s - u_all;
  if (nw > 0) {
    ival_sort(wait, (size_t)nw);
    out->bubble_s = union_len_merged(busy, nb, wait, nw) - u_all;
    g_free(busy);
  }
  g_free(wait);
  for (int k = 0; k < ncats; k++)
    out->exposed_cat_s[cats[k]] = ival_union_len(&u_cat[k]) - out->compute_s;
  g_free(comp);
  g_free(cc);
  g_free(comm_cat);
}

/* What the replay's averages read of a rank that is not the critical one: its end, compute
 * (the union of its compute intervals) and exposed communication (the union of compute with
 * all communication, less compute), by the same sorts and the same running union as
 * rank_breakdown, so each sum has the same bits; the per-category unions, the bubble and the
 * category sums, read only of the critical rank, are left out (issue 15: the breakdown of
 * every simulated rank was 6-8% of the every-split sweep). */
static void rank_breakdown_light(const ts_replay *r, int sim, ts_rank_result *out, ival *comp,
                                 ival *comm)
{
  const sim_rank *s = &r->sims[sim];
  const ts_program *p = &r->tr->programs[s->program];
  memset(out, 0, sizeof *out);
  out->rank = s->rank;
  int nc = 0, nm = 0;
  for (int i = 0; i < p->nops; i++) {
    const op_state *st = &s->st[i];
    int kind = INFO_KIND(st->info);
    double e = op_end(s, i);
    if (e > out->end_s)
      out->end_s = e;
    if (kind == TS_OP_COMPUTE || kind == TS_OP_XFER || kind == TS_OP_DELAY)
      comp[nc++] = (ival){st->t, e};
    else if (is_comm(kind))
      comm[nm++] = (ival){st->t, e};
  }
  out->compute_s = union_len(comp, nc); /* sorts comp */
  /* Sorted by (start, end) as rank_breakdown's cival_sort sorts them: the same sequence of
   * intervals (a stable sort; intervals of equal key are equal). */
  ival_sort(comm, (size_t)nm);
  ival_union u_both = {0};
  for (int i = 0, j = 0; i < nc || j < nm;)
    ival_union_add(&u_both,
                   j >= nm || (i < nc && comp[i].s <= comm[j].s) ? &comp[i++] : &comm[j++]);
  double u_all = ival_union_len(&u_both);
  out->exposed_comm_s = u_all - out->compute_s;
  out->idle_s = out->end_s - u_all;
}

static gboolean replay_run(ts_replay *r, ts_replay_result *out, GError **error)
{
  memset(out, 0, sizeof *out);
  /* The ready ops, in the order a scan of every op (ranks and ops from the last) found them:
   * before the first event only the roots have no predecessor left. */
  for (int i = r->nsim - 1; i >= 0; i--) {
    const sim_rank *s = &r->sims[i];
    const prog_info *pi = &r->progs[s->program];
    for (int k = pi->nroots - 1; k >= 0; k--)
      if (s->st[pi->roots[k]].remaining == 0)
        ready_push(r, i, pi->roots[k]);
  }
  if (!drain_ready(r, error))
    return FALSE;
  if (!r->backend->run(r->backend, r, error))
    return FALSE;
  /* A replay whose partner never arrives ends with ops left: name the first stuck one. */
  gint64 nops = 0;
  for (int i = 0; i < r->nsim; i++)
    nops += r->progs[r->sims[i].program].nops;
  for (int i = 0; r->ndone != nops && i < r->nsim; i++) {
    const sim_rank *s = &r->sims[i];
    int n = r->progs[s->program].nops, ndone = 0;
    for (int k = 0; k < n; k++)
      ndone += s->st[k].remaining < 0;
    if (ndone == n)
      continue;
    for (int k = 0; k < n; k++)
      if (s->st[k].remaining == 0) { /* ready, not done */
        const ts_op ob = op_of(r, i, k), *o = &ob;
        const char *what = o->kind == TS_OP_COLL ? "its collective's other members never arrived"
                                                 : "its send/recv partner never arrived";
        g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                    "replay stuck: rank %d (program %d) op %d '%s' (%s %s) cannot finish: %s",
                    s->rank, s->program, k, (char *)g_ptr_array_index(r->tr->labels, o->label),
                    ts_op_kind_name(o->kind),
                    o->kind == TS_OP_COLL ? ts_coll_kind_name(o->coll) : "", what);
        return FALSE;
      }
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "replay stuck: rank %d finished %d of %d ops",
                s->rank, ndone, n);
    return FALSE;
  }
  /* The successor lists are not read again: free them before the breakdown's arrays (those
   * of a shared view serve the next replay). */
  for (int p = 0; r->own_ops != NULL && p < r->tr->nprograms; p++) {
    g_clear_pointer(&r->own_ops->progs[p].succ, g_free);
    g_clear_pointer(&r->own_ops->progs[p].succ_off, g_free);
  }
  out->events = r->events;
  out->nsimulated = r->nsim;
  out->critical_rank = -1;
  /* Every rank's end, compute and exposed communication (the averages), then the critical
   * rank, the first whose end is the latest, gets the whole breakdown, whose end, compute and
   * exposed communication are the same bits (issue 15: a separate pass found the critical rank
   * first, reading every op's end once more). */
  int crit = -1, maxops = 0;
  double crit_end = 0;
  for (int i = 0; i < r->nsim; i++)
    maxops = MAX(maxops, r->tr->programs[r->sims[i].program].nops);
  /* One pair of interval arrays for every rank (issue 15: two allocations per rank). */
  ival *comp = g_new(ival, (gsize)maxops + 1), *comm = g_new(ival, (gsize)maxops + 1);
  for (int i = 0; i < r->nsim; i++) {
    ts_rank_result rr;
    rank_breakdown_light(r, i, &rr, comp, comm);
    out->mean_compute_s += rr.compute_s / r->nsim;
    out->mean_comm_only_s += rr.exposed_comm_s / r->nsim;
    if (crit < 0 || rr.end_s > crit_end) {
      crit = i;
      crit_end = rr.end_s;
    }
  }
  g_free(comp);
  g_free(comm);
  if (crit >= 0) {
    rank_breakdown(r, crit, &out->critical);
    out->step_time_s = out->critical.end_s;
    out->critical_rank = out->critical.rank;
  }
  if (r->keep_spans)
    for (int i = 0; i < r->nsim; i++) {
      const sim_rank *s = &r->sims[i];
      for (int k = 0; k < r->progs[s->program].nops; k++) {
        ts_span sp = {s->rank, s->program, k, s->st[k].t, op_end(s, k)};
        g_array_append_val(r->spans, sp);
      }
    }
  return TRUE;
}

gboolean ts_replay_run(ts_replay *r, ts_replay_result *out, GError **error)
{
  GError *err = NULL;
  if (replay_run(r, out, &err))
    return TRUE;
  if (!r->order_free) {
    g_propagate_error(error, err);
    return FALSE;
  }
  /* The order-free replay failed (a partner that never arrives, a backend error): the timed
   * replay, on states made afresh, fails first where time order meets the failure, and names
   * that op. Its results (and spans) are this replay's. */
  g_clear_error(&err);
  ts_evq *q = r->backend->queue;
  while (q != NULL && q->len > 0)
    ts_evq_pop(q);
  ts_replay *t = ts_replay_new_shared(r->tr, r->ops_shared, r->backend, r->mode_asked);
  g_return_val_if_fail(t != NULL, FALSE);
  /* The states are made again (from the shared view, or a view of its own), not order-free. */
  t->order_free = FALSE;
  t->keep_spans = r->keep_spans;
  gboolean ok = replay_run(t, out, error);
  GArray *spans = r->spans;
  r->spans = t->spans;
  t->spans = spans;
  ts_replay_free(t);
  return ok;
}

const char *ts_activity_label(const ts_replay *r, const ts_activity *act)
{
  if (act->label != NULL)
    return act->label;
  int label = act->op != NULL ? act->op->label
              : act->program >= 0 && act->program < r->tr->nprograms && act->index >= 0 &&
                      act->index < r->tr->programs[act->program].nops
                  ? ts_program_op_label(&r->tr->programs[act->program], act->index)
                  : -1;
  return label >= 0 ? g_ptr_array_index(r->tr->labels, label) : "";
}

ts_op ts_activity_op(const ts_replay *r, const ts_activity *act)
{
  if (act->op != NULL)
    return *act->op;
  return ts_program_op(&r->tr->programs[act->program], act->index);
}

void ts_backend_free(ts_backend *b)
{
  if (b != NULL && b->free != NULL)
    b->free(b);
}

ts_replay_mode ts_replay_get_mode(const ts_replay *r)
{
  return r->mode;
}
