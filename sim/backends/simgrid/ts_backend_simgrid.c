/* ts_backend_simgrid: the contention-aware backend. Every activity the engine starts becomes
 * flows, executions and waits on a SimGrid platform built from the topology: a compute runs on
 * the chip (computes of one chip share it), a send is one flow, a collective is its
 * decomposition's flows, step after step. Flows of concurrent activities share links under
 * max-min fairness (CM02), so contention emerges instead of being assumed away.
 *
 * Two ways to drive SimGrid, the same flows at the same times (docs/backends.md, "How a replay
 * runs"): the driver (default) starts host-to-host flows and timers from SimGrid's own context
 * and keeps processor sharing itself, with no actor at all; actor mode
 * (trainsim/simgrid-mode:actors) runs each member's share on reused worker actors exchanging
 * mailbox messages. In driver mode, collective steps whose lines of members are images of each
 * other run on one line (symmetry collapse), until a flow crosses their links. */
#include "ts_backend_simgrid.h"
#include "ts_coll_members.h"
#include "ts_degrade.h"
#include "ts_sg_shim.h"
#include "ts_util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <simgrid/actor.h>
#include <simgrid/barrier.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Host speed in flop/s. Compute durations come from the cost model (ts_cost_compute) and are
 * executed as duration * speed flops; 1e9 keeps SimGrid's work-amount precision (1e-5 flop)
 * at 1e-14 s. */
#define HOST_SPEED 1e9

const char *const ts_simgrid_pinned_cfg[] = {
    /* Alpha-beta exact with max-min sharing: no LV08 latency and bandwidth factors, no 5 %
     * reverse traffic, no TCP window cap (SimGrid network_cm02.cpp; measured in
     * docs/backends.md: every closed form matched to the printed precision). */
    "network/model:CM02", "network/crosstraffic:0", "network/TCP-gamma:0",
    /* Workers run a share, the engine's completion code and the collective planner (no large
     * stack arrays); 256 KiB stacks instead of 8 MiB keep thousands of workers cheap. */
    "contexts/stack-size:256",
#ifdef __SANITIZE_ADDRESS__
    /* SimGrid's default context switching confuses AddressSanitizer. */
    "contexts/factory:thread",
#endif
    NULL};

typedef struct {
  int label;
  double bytes;
} label_bytes;

typedef struct {
  double s, e;
} ival;

/* Per-link accounting: bytes from the routes of the flows we start (exact), busy time as the
 * union of the flows' [start, end] intervals. */
typedef struct {
  double bytes;
  GArray *labels; /* label_bytes, in order of first use */
  /* Finding a flow's label: the last one hit, then (past LABEL_SCAN labels: a GPT-3 step puts
   * hundreds of layer labels on a link) label + 1 -> index + 1. The linear scan alone was a
   * quarter of a 1,024-chip GPT-3 replay. */
  guint last;
  GHashTable *index;
  GArray *busy; /* ival, compacted when it grows */
  guint compacted;
  /* The length of the busy intervals that no flow can reach any more (acc_settle), summed in
   * order: the report adds the others to it, as it would have added them all. */
  double settled_s;
} link_acc;

typedef struct sgb sgb;

/* A decomposition indexed by step and member, so that each member finds its own sends and
 * receives of a step without scanning everyone's (a 4096-member step has 8192 transfers).
 * A pair exchanges at most one message per step (transfers merged), and both sides post
 * their steps in order, so a mailbox per pair matches messages first come, first served. */
typedef struct {
  ts_coll_plan *plan;
  int n, nsteps;
  int *out_off; /* nsteps * (n + 1) offsets into out_peer / out_bytes */
  int *out_peer;
  double *out_bytes;
  int *in_off; /* likewise into in_peer */
  int *in_peer;
  /* NCCL protocols: their fixed latency, waited by every member before the first step (the
   * transfers' bytes are already divided by the protocol's bandwidth fraction). */
  double pre_s;
  /* Steps run: run[s] alike steps (the same peers for every member) start at step s and are
   * replayed as one, their bytes summed into step s; 0 for the steps merged into an earlier
   * one; 1 everywhere with trainsim/collective-flows:per-step. */
  int *run;
  int users; /* running activities using it; unused ones may be evicted */
  /* Symmetry (driver mode, synchronous steps): sym[s] = the group piece along which every
   * transfer of the run starting at step s moves, or -1. The lines of that piece (members
   * differing only in its coordinate) are then link-disjoint; lines whose members send the
   * same bytes to the same relative peers are images of one another, and line_rep[s][L] is the
   * shift (member index of its first member) of the first line like line L: the class's
   * representative, simulated, while the others are accounted as its images. NULL when the
   * group has fewer than two pieces on distinct dimensions. radix[k]: members per step of piece
   * k's coordinate; nlines[s]: lines of the step's piece. sym[s] = SYM_TRANS: the step moves
   * along several pieces (the concurrent torus all-reduce); its transfers are classed by bytes
   * and offset (the peer's coordinates minus the sender's, modulo each piece: on a torus the
   * same route translated), and line_rep[s][i] is the index (from the step's first) of the
   * first transfer like transfer i: one transfer per class is simulated, the others are its
   * images. Exact while every transfer of the step has links of its own (d_claim). */
  int *sym;
  int **line_rep;
  int radix[TS_MAX_DIMS], size[TS_MAX_DIMS];
  gsize mem; /* bytes held */
  /* Folding: fold_ok = 1 (-1) if the decomposition is (is not) invariant under the fold's
   * translations of its members, as checked for fold generation fold_gen (0: not checked). */
  int fold_gen, fold_ok;
} plan_index;

/* Plans are cached (the buckets of a data-parallel step repeat one size), but a 4096-member
 * torus plan holds ~40 MB: unused plans go once the cache passes this. */
#define PLAN_CACHE_BYTES ((gsize)256 << 20)

typedef struct job job;

/* One actor's share of an activity: a collective member, or a send's sender or receiver. */
typedef struct {
  job *j;
  int member; /* COLL: member index; SEND: 0 sender, 1 receiver */
} part;

struct job {
  sgb *b;
  ts_activity act;
  plan_index *pi;   /* COLL: borrowed from the plan cache */
  double compute_s; /* COMPUTE */
  int nparts, left; /* actors of this activity, and those still running */
  part *parts;
  sg_bar_t bar; /* COLL with synchronous steps: members meet after every step */
  /* Driver mode (no actors): a collective's members, their chips and progress. */
  struct dmember *dm;
  int *chips;
  int arrived;       /* members done with the current step (synchronous steps) */
  int cur;           /* the step the members are in (synchronous steps) */
  int ndone;         /* members done with every step */
  double rem;        /* COMPUTE: work left, in seconds at full speed (processor sharing) */
  GArray *claims;    /* links claimed by the current collapsed step (int) */
  int expect;        /* members (transfers, SYM_TRANS) simulated in the current collapsed step */
  double trans_lead; /* SYM_TRANS: every member's latency lead in the current step (d_claim) */
  /* Engine collapse: the activity's images on the symmetric axes outside its group, each a
   * copy of its chips (nimg x nchips entries: members of a collective, or a send's two ends). */
  int nimg;
  int *img;
  int img_axes[TS_MAX_AXES], img_naxes; /* the symmetric axes the images move along */
  /* SEND: ghost[e] = image e is simulated as a real flow (its route crosses a link of the
   * simulated ranks' groups or one with a flow in flight: d_img_meets_real); the send ends
   * when its original and every ghost have, checked to end together. */
  guint8 *ghost;
  int flows_left;
  double end_min, end_max;
  /* Folding (sgb.fold): a collective runs as one sub-job per copy (the activity or an image)
   * with a member in the fundamental domain; each sub-job's parent ends when all have, checked
   * to end together. flows_left then counts the sub-jobs left; t_start: when it started. */
  job *parent;
  double t_start;
  /* Driver mode: the jobs launched and not ended, in launch order (sgb.live_head): none of
   * their flows is accounted before live_t, so busy intervals ending earlier are final. */
  job *live_prev, *live_next;
  double live_t;
  int live_gen; /* sgb.live_gen when linked; 0: not linked */
};

/* Driver mode: one member of a collective. It is "at" a step, and has "posted" it once its
 * sends and receives of the step are out (after the step's latency lead): a flow starts when
 * both its ends have posted, as a mailbox message starts when both sides are there. */
typedef struct dmember {
  int at;      /* step the member is in */
  int posted;  /* step whose flows it has posted, -1 before the first */
  int pending; /* its flows (both ways) of that step not yet ended */
  double lead; /* the latency lead of its sends in that step */
} dmember;

struct sgb {
  const ts_topo *topo;
  ts_platform *plat;
  char *config;
  GPtrArray *queue; /* job*, started before run() */
  ts_replay *r;
  gboolean running, has_run;
  double t0, makespan;
  GError *error;     /* first error raised inside an actor */
  GHashTable *plans; /* key -> plan_index* */
  gsize plans_mem;   /* bytes held by the cached plans */
  link_acc *acc;
  GPtrArray *label_names; /* label index -> char* */
  gint64 flows;
  gboolean async_steps;    /* trainsim/collective-steps:async */
  gboolean per_step_flows; /* trainsim/collective-flows:per-step */
  /* Worker actors, reused: creating an actor maps and unmaps a stack, which cost more than
   * the simulation itself on a data-parallel step (half the time in the kernel). */
  GPtrArray **idle;   /* per chip: idle workers on its host */
  int live_jobs;      /* activities started and not yet reported */
  double *host_clock; /* per chip: when its host has launched every op so far (ts_cost_issue) */
  gboolean actors;    /* trainsim/simgrid-mode:actors (one share per member on worker actors) */
  struct dcpu *cpu;   /* driver mode, per chip: computes sharing the chip */
  /* Symmetry collapse (driver mode): collapse_cfg from trainsim/symmetry (default on), collapse
   * as set for this run (ts_backend_simgrid_set_collapse), sym_broken once a flow crossed a
   * collapsed step's links. Per link: flows in flight (real) and collapsed steps claiming it. */
  gboolean collapse_cfg, collapse, sym_broken;
  int *lreal, *lclaim;
  /* Per link: engine images (one rank per class) on it. Images of the whole replay are its
   * translates along the symmetric axes, so two images sharing a link share it as their
   * originals do (checked link for link, d_img_route_ok): only an image on a link with a real
   * flow, or with a collapsed step's claim, breaks the symmetry. */
  int *limg;
  /* Engine collapse: per link, whether the simulated ranks' groups use it (the routes between
   * neighbours of their member rings, both ways): a send's image crossing one, or a link with a
   * flow in flight, is a ghost. */
  guint8 *reallink;
  /* The engine replays one rank per class (TS_REPLAY_COLLAPSED): every flow stands for its
   * images on the other ranks of the class, claimed and accounted, never simulated. */
  gboolean images;
  const ts_trace *tr;
  /* Folding by translations (ts_backend_simgrid_set_fold): the torus translations G generated by
   * moving one place along a piece of a symmetric axis whose pieces each wrap a whole ring
   * (nfold pieces: dimension, stride, size). The whole replay is invariant under G, so one flow
   * per G-orbit is simulated (the one leaving a chip of the fundamental domain, indom: each
   * coordinate along fold_dim below fold_stride) on the quotient torus: every route's links are
   * replaced by their canonical translates (fold_link), where the orbit's other flows would
   * share them. report_fold: the fold of the last replay, for the link report. */
  gboolean fold;
  int nfold, fold_order, fold_gen;
  int fold_dim[TS_MAX_DIMS], fold_stride[TS_MAX_DIMS], fold_n[TS_MAX_DIMS];
  int *fold_link;
  guint8 *indom;
  const int *report_fold;
  /* Driver mode: the jobs launched and not ended, oldest first (job.live_t nondecreasing);
   * live_gen counts runs, so that a job left over from a stopped run is never unlinked. */
  job *live_head, *live_tail;
  int live_gen;
  gboolean no_settle; /* ts_backend_simgrid_set_settle(b, FALSE) */
  gint64 settled;     /* intervals settled by the last run */
  GArray *flow_route; /* d_flow_e's scratch route (int) */
};

/* Driver mode: the computes running on one chip, sharing it equally (processor sharing, as
 * SimGrid's CPU model shares a host between executions). */
typedef struct dcpu {
  GPtrArray *running; /* job* with rem > 0 */
  double last;        /* when rem was last brought up to date */
  ts_sg_timer *timer; /* the next end */
  job *next;          /* the job that timer ends */
} dcpu;

static sgb *ctx_of(const ts_backend *b)
{
  g_return_val_if_fail(ts_backend_is_simgrid(b), NULL);
  return b->ctx;
}

gboolean ts_backend_is_simgrid(const ts_backend *b)
{
  return b != NULL && b->name != NULL && strcmp(b->name, "simgrid") == 0;
}

/* ---- link accounting ---- */

static int ival_cmp(const void *a, const void *b)
{
  const ival *x = a, *y = b;
  return x->s < y->s ? -1 : x->s > y->s ? 1 : (x->e < y->e ? -1 : x->e > y->e);
}

/* Sorts and merges overlapping intervals in place. */
static void ival_merge(GArray *v)
{
  if (v->len < 2)
    return;
  ival *a = (ival *)v->data;
  qsort(a, v->len, sizeof *a, ival_cmp);
  guint k = 0;
  for (guint i = 1; i < v->len; i++) {
    if (a[i].s <= a[k].e) {
      if (a[i].e > a[k].e)
        a[k].e = a[i].e;
    } else {
      a[++k] = a[i];
    }
  }
  g_array_set_size(v, k + 1);
}

#define LABEL_SCAN 8

/* Driver mode: every flow still to be accounted belongs to a job launched and not ended, and
 * starts (lead included) no earlier than its job was launched: a collective member posts a
 * step after its lead, a flow starts when both ends have posted, and its accounted start is
 * its start less the lead of the side that posted first, so no earlier than that side's step
 * began. A merged busy interval ending before the oldest live job's launch can therefore never
 * meet a later one: its length is added to settled_s, in the order the report would add it,
 * and the interval dropped. The every-rank GPT-3 175B replay on the pod kept ~10 M of them
 * (bench/RESULTS.md, "SimGrid at scale", fourth session). Actor mode keeps every interval. */
static void acc_settle(sgb *b, link_acc *a)
{
  if (b->actors || !b->running || b->no_settle)
    return;
  double horizon = (b->live_head != NULL ? b->live_head->live_t : ts_sg_clock()) - b->t0;
  const ival *v = (const ival *)a->busy->data;
  guint k = 0;
  while (k < a->busy->len && v[k].e < horizon) {
    a->settled_s += v[k].e - v[k].s;
    k++;
  }
  if (k > 0)
    g_array_remove_range(a->busy, 0, k);
  b->settled += k;
}

static void acc_flow(sgb *b, int link, int label, double bytes, double s, double e)
{
  link_acc *a = &b->acc[link];
  a->bytes += bytes;
  if (a->labels == NULL) {
    a->labels = g_array_new(FALSE, FALSE, sizeof(label_bytes));
    a->busy = g_array_new(FALSE, FALSE, sizeof(ival));
  }
  guint n = a->labels->len, at = n;
  if (a->last < n && g_array_index(a->labels, label_bytes, a->last).label == label)
    at = a->last;
  else if (a->index != NULL)
    at = GPOINTER_TO_UINT(g_hash_table_lookup(a->index, GINT_TO_POINTER(label + 1))) - 1;
  else
    for (guint i = 0; i < n && at == n; i++)
      if (g_array_index(a->labels, label_bytes, i).label == label)
        at = i;
  if (at < n) {
    g_array_index(a->labels, label_bytes, at).bytes += bytes;
  } else {
    at = n;
    label_bytes lb = {label, bytes};
    g_array_append_val(a->labels, lb);
    if (a->index == NULL && a->labels->len > LABEL_SCAN) {
      a->index = g_hash_table_new(g_direct_hash, g_direct_equal);
      for (guint i = 0; i < a->labels->len; i++)
        g_hash_table_insert(a->index,
                            GINT_TO_POINTER(g_array_index(a->labels, label_bytes, i).label + 1),
                            GUINT_TO_POINTER(i + 1));
    } else if (a->index != NULL) {
      g_hash_table_insert(a->index, GINT_TO_POINTER(label + 1), GUINT_TO_POINTER(at + 1));
    }
  }
  a->last = at;
  /* Flows of a step share their interval: merge with the last one when it touches. */
  if (a->busy->len > 0) {
    ival *last = &g_array_index(a->busy, ival, a->busy->len - 1);
    if (s <= last->e && e >= last->s) { /* overlapping or touching, in either order */
      if (e > last->e)
        last->e = e;
      if (s < last->s)
        last->s = s;
      return;
    }
  }
  ival iv = {s, e};
  g_array_append_val(a->busy, iv);
  if (a->busy->len > 2 * a->compacted + 64) {
    ival_merge(a->busy);
    acc_settle(b, a);
    a->compacted = a->busy->len;
  }
}

static void acc_reset(sgb *b)
{
  int n = ts_platform_nlinks(b->plat);
  for (int i = 0; i < n; i++) {
    link_acc *a = &b->acc[i];
    a->bytes = 0;
    a->settled_s = 0;
    a->compacted = 0;
    a->last = 0;
    if (a->index != NULL)
      g_hash_table_remove_all(a->index);
    if (a->labels != NULL) {
      g_array_set_size(a->labels, 0);
      g_array_set_size(a->busy, 0);
    }
  }
  b->flows = 0;
  b->settled = 0;
}

static int label_of(sgb *b, const ts_activity *a)
{
  int label = a->op != NULL ? a->op->label : -1;
  if (label < 0)
    return -1;
  if ((guint)label >= b->label_names->len)
    g_ptr_array_set_size(b->label_names, label + 1);
  if (g_ptr_array_index(b->label_names, label) == NULL)
    b->label_names->pdata[label] = g_strdup(a->label != NULL ? a->label : "");
  return label;
}

/* ---- actors ---- */

/* Mailboxes are named by activity token and member pair. The engine reuses a token only after
 * its activity completed, when every send of it has been matched, so names never collide. */
static sg_mailbox_t mailbox(const job *j, int src, int dst)
{
  char name[64];
  g_snprintf(name, sizeof name, "%" G_GUINT64_FORMAT ":%d>%d", j->act.token, src, dst);
  return sg_mailbox_by_name(name);
}

/* A member's mailboxes, looked up once per peer rather than once per step. */
typedef struct {
  int peer;
  gboolean out;
  sg_mailbox_t mb;
} mb_cache_entry;

#define MB_CACHE 16

static sg_mailbox_t cached_mailbox(const job *j, int me, int peer, gboolean out,
                                   mb_cache_entry *cache, int *ncache)
{
  for (int i = 0; i < *ncache; i++)
    if (cache[i].peer == peer && cache[i].out == out)
      return cache[i].mb;
  sg_mailbox_t mb = out ? mailbox(j, me, peer) : mailbox(j, peer, me);
  if (*ncache < MB_CACHE)
    cache[(*ncache)++] = (mb_cache_entry){peer, out, mb};
  return mb;
}

/* Accounts finished sends from chip src on the links of their routes; each flow's link time
 * starts lead seconds before its start (the latencies of a merged run, see run_member). */
static void account(job *j, int src, const int *dst, const double *bytes, int n,
                    const double *start, const double *end, double lead)
{
  sgb *b = j->b;
  int label = label_of(b, &j->act);
  GArray *route = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
  for (int i = 0; i < n; i++) {
    g_array_set_size(route, 0);
    ts_platform_route(b->plat, src, dst[i], route);
    for (guint k = 0; k < route->len; k++)
      acc_flow(b, g_array_index(route, int, k), label, bytes[i], start[i] - lead - b->t0,
               end[i] - b->t0);
  }
  b->flows += n;
  g_array_unref(route);
}

/* The largest route latency from chip src to the chips dst[0..n-1]. */
static double max_route_latency(const sgb *b, int src, const int *dst, int n)
{
  GArray *route = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
  double worst = 0;
  for (int i = 0; i < n; i++) {
    g_array_set_size(route, 0);
    ts_platform_route(b->plat, src, dst[i], route);
    double lat = 0;
    for (guint k = 0; k < route->len; k++)
      lat += ts_platform_link_latency(b->plat, g_array_index(route, int, k));
    worst = MAX(worst, lat);
  }
  g_array_unref(route);
  return worst;
}

/* Member m of a collective: its sends and receives of each step, step after step. With
 * synchronous steps (the default) every member waits for the whole step to end before the next,
 * as the analytic time assumes (the sum over steps of the slowest transfer), so the two
 * backends agree whenever no link is shared, whatever the algorithm. With asynchronous steps
 * (trainsim/collective-steps:async) a member goes on as soon as its own transfers are done, as
 * NCCL ranks do: its data for the next step depends only on them. */
static void run_member(job *j, int m)
{
  sgb *b = j->b;
  const plan_index *pi = j->pi;
  const ts_group *g = j->act.group;
  int me = ts_trace_group_chip(b->topo, g, j->act.chip, m);
  mb_cache_entry cache[MB_CACHE];
  int ncache = 0;
  GArray *outs = g_array_new(FALSE, FALSE, sizeof(sg_mailbox_t));
  GArray *ins = g_array_new(FALSE, FALSE, sizeof(sg_mailbox_t));
  GArray *dst = g_array_new(FALSE, FALSE, sizeof(int));
  GArray *times = g_array_new(FALSE, FALSE, sizeof(double));
  if (!b->async_steps && j->bar == NULL)
    j->bar = sg_barrier_init((unsigned)pi->n);
  if (pi->pre_s > 0)
    sg_actor_sleep_for(pi->pre_s);
  for (int s = 0; s < pi->nsteps; s += pi->run[s]) {
    const int *oo = pi->out_off + (gsize)s * (pi->n + 1), *io = pi->in_off + (gsize)s * (pi->n + 1);
    int o0 = oo[m], no = oo[m + 1] - oo[m], i0 = io[m], ni = io[m + 1] - io[m];
    if (no > 0 || ni > 0) {
      g_array_set_size(outs, (guint)no);
      g_array_set_size(ins, (guint)ni);
      g_array_set_size(dst, (guint)no);
      g_array_set_size(times, 2 * (guint)no);
      for (int k = 0; k < no; k++) {
        int peer = pi->out_peer[o0 + k];
        g_array_index(outs, sg_mailbox_t, k) = cached_mailbox(j, m, peer, TRUE, cache, &ncache);
        g_array_index(dst, int, k) = ts_trace_group_chip(b->topo, g, j->act.chip, peer);
      }
      for (int k = 0; k < ni; k++)
        g_array_index(ins, sg_mailbox_t, k) =
            cached_mailbox(j, m, pi->in_peer[i0 + k], FALSE, cache, &ncache);
      /* A run of k merged steps moves k steps' bytes in one flow per peer, which pays one
       * latency: the member first waits the other k - 1, so that in isolation the run takes
       * exactly the k steps' time. */
      double lead = 0;
      if (pi->run[s] > 1 && no > 0) {
        lead = (pi->run[s] - 1) * max_route_latency(b, me, (int *)dst->data, no);
        if (lead > 0)
          sg_actor_sleep_for(lead);
      }
      double *t = (double *)times->data;
      ts_sg_exchange((sg_mailbox_t *)outs->data, pi->out_bytes + o0, no, (sg_mailbox_t *)ins->data,
                     ni, t, t + no);
      account(j, me, (int *)dst->data, pi->out_bytes + o0, no, t, t + no, lead);
    }
    if (!b->async_steps)
      sg_barrier_wait(j->bar);
  }
  g_array_unref(outs);
  g_array_unref(ins);
  g_array_unref(dst);
  g_array_unref(times);
}

static void run_send_side(job *j, int side)
{
  double bytes = j->act.op->bytes, t[2];
  sg_mailbox_t mb = mailbox(j, 0, 1);
  if (side == 0) {
    ts_sg_exchange(&mb, &bytes, 1, NULL, 0, t, t + 1);
    account(j, j->act.chip, &j->act.peer, &bytes, 1, t, t + 1, 0);
  } else {
    ts_sg_exchange(NULL, NULL, 0, &mb, 1, t, t + 1);
  }
}

static void job_end(job *j);

static void job_free(job *j)
{
  if (j->pi != NULL)
    j->pi->users--;
  g_free(j->dm);
  g_free(j->chips);
  if (j->claims != NULL)
    g_array_unref(j->claims);
  g_free(j->img);
  g_free(j->ghost);
  if (j->bar != NULL)
    sg_barrier_destroy(j->bar);
  g_free(j->parts);
  g_free(j);
}

/* Runs one actor's share of an activity; the last share to end reports the activity. */
static void run_part(part *p)
{
  job *j = p->j;
  /* Activities under way finish even after an error (only their reports are dropped): an
   * actor that stopped halfway could leave a partner waiting forever. */
  switch (j->act.kind) {
  case TS_OP_COMPUTE:
    if (j->compute_s > 0)
      ts_sg_execute(j->compute_s * HOST_SPEED);
    break;
  case TS_OP_XFER:
  case TS_OP_DELAY:
    /* Off-chip work: the platform has no host links or disks, so the resource's time passes
     * as a sleep beside the chip's own activities (the analytic backend's time exactly). */
    if (j->compute_s > 0)
      sg_actor_sleep_for(j->compute_s);
    break;
  case TS_OP_SEND:
    if (j->nparts == 2)
      run_send_side(j, p->member);
    break;
  case TS_OP_COLL:
    if (j->compute_s > 0) /* waiting for the host to launch it (ts_cost_issue_collective) */
      sg_actor_sleep_for(j->compute_s);
    if (j->pi != NULL)
      run_member(j, p->member);
    break;
  default:
    break;
  }
  if (--j->left > 0)
    return;
  job_end(j);
}

/* An activity has ended (now): record it, tell the engine, free it. */
static void d_break(sgb *b);

/* The live-job list (driver mode): linked at launch, unlinked at the end. */
static void live_link(sgb *b, job *j)
{
  j->live_t = ts_sg_clock();
  j->live_gen = b->live_gen;
  j->live_prev = b->live_tail;
  j->live_next = NULL;
  if (b->live_tail != NULL)
    b->live_tail->live_next = j;
  else
    b->live_head = j;
  b->live_tail = j;
}

static void live_unlink(sgb *b, job *j)
{
  if (j->live_gen == 0 || j->live_gen != b->live_gen)
    return;
  if (j->live_prev != NULL)
    j->live_prev->live_next = j->live_next;
  else
    b->live_head = j->live_next;
  if (j->live_next != NULL)
    j->live_next->live_prev = j->live_prev;
  else
    b->live_tail = j->live_prev;
  j->live_gen = 0;
}

static void job_end(job *j)
{
  sgb *b = j->b;
  double end = ts_sg_clock() - b->t0;
  if (j->parent != NULL) {
    /* A folded collective's copy: the activity ends with its last copy, and every copy ends
     * with the others (the engine replays one of them: they must be alike). */
    job *p = j->parent;
    p->end_min = MIN(p->end_min, end);
    p->end_max = MAX(p->end_max, end);
    job_free(j);
    if (--p->flows_left > 0)
      return;
    if (p->end_max - p->end_min > 1e-9 * (p->end_max - p->t_start) + 1e-15)
      d_break(b);
    job_end(p);
    return;
  }
  if (end > b->makespan)
    b->makespan = end;
  if (j->act.kind == TS_OP_SEND && b->host_clock != NULL) {
    ts_cost_host_sync(&b->host_clock[j->act.chip], end);
    ts_cost_host_sync(&b->host_clock[j->act.peer], end);
  }
  /* After an error the remaining activities drain without reporting: the engine has stopped. */
  if (b->error == NULL) {
    GError *e = NULL;
    if (!ts_replay_complete(b->r, j->act.token, end, &e))
      b->error = e;
  }
  b->live_jobs--;
  live_unlink(b, j);
  job_free(j);
}

/* A worker actor: runs the parts handed to it on its chip, then waits, idle, for the next.
 * When no activity is left it exits, so that the simulation ends. */
typedef struct {
  sgb *b;
  int chip;
  sg_sem_t sem;
  part *p; /* next part, or NULL to exit */
} worker;

static void stop_idle_workers(sgb *b)
{
  for (int c = 0; c < b->topo->nchips; c++)
    while (b->idle[c]->len > 0) {
      worker *w = g_ptr_array_steal_index_fast(b->idle[c], b->idle[c]->len - 1);
      w->p = NULL;
      sg_sem_release(w->sem);
    }
}

static void worker_main(void *arg)
{
  worker *w = arg;
  sgb *b = w->b;
  while (w->p != NULL) {
    run_part(w->p);
    w->p = NULL;
    if (b->live_jobs == 0) {
      stop_idle_workers(b);
      break;
    }
    g_ptr_array_add(b->idle[w->chip], w);
    sg_sem_acquire(w->sem);
  }
  sg_sem_destroy(w->sem);
  g_free(w);
}

static void dispatch(sgb *b, part *p, int chip)
{
  GPtrArray *idle = b->idle[chip];
  if (idle->len > 0) {
    worker *w = g_ptr_array_steal_index_fast(idle, idle->len - 1);
    w->p = p;
    sg_sem_release(w->sem);
    return;
  }
  worker *w = g_new0(worker, 1);
  w->b = b;
  w->chip = chip;
  w->sem = sg_sem_init(0);
  w->p = p;
  ts_sg_spawn("w", ts_platform_host(b->plat, chip), worker_main, w);
}

static void spawn(sgb *b, job *j)
{
  const ts_topo *t = b->topo;
  b->live_jobs++;
  /* A dispatched part may run, and its job end and be freed, before dispatch returns (a
   * one-part job of zero duration): nothing of j is read after its last part is dispatched. */
  int nparts = j->nparts;
  for (int i = 0; i < nparts; i++) {
    int chip = j->act.chip;
    if (j->act.kind == TS_OP_COLL)
      chip = ts_trace_group_chip(t, j->act.group, j->act.chip, i);
    else if (j->act.kind == TS_OP_SEND && i == 1)
      chip = j->act.peer;
    dispatch(b, &j->parts[i], chip);
  }
}

/* ---- driver mode: no actors ----
 *
 * The default. Every activity is driven from the simulator's own context: flows are
 * host-to-host communications (ts_sg_flow_start) whose ends are reported by callback, waits
 * (latency leads, protocol latencies, off-chip transfers) are timers, and computes share
 * their chip under processor sharing kept here, as SimGrid's CPU model would share it. The
 * network is SimGrid's, unchanged: the same flows on the same routes at the same times as in
 * actor mode (trainsim/simgrid-mode:actors), so the same max-min shares. What goes is the
 * per-member actor, its stack, its context switches and its mailboxes. */

static void d_member_begin(job *j, int m, int s);
static int line_of(const plan_index *pi, int m, int k);
static int line_shift(const plan_index *pi, int line, int k);
static gboolean d_collapsed(const job *j, int s);
/* pi->sym[s] of a step collapsed by transfer classes (see plan_index). */
#define SYM_TRANS INT_MAX

static gboolean d_trans(const job *j, int s);
static int xfer_src(const int *oo, int n, int i);
static void d_claim(job *j, int s);

static void d_flow(job *j, int m, int p, double bytes, double lead);

typedef struct {
  job *j;
  int s;
  double lead;
} dtrans;

/* Starts one transfer per class of the class-collapsed step s: every member posts at
 * the same time (the same lead, checked by d_claim), so every flow starts then. */
static void d_trans_post(void *data)
{
  dtrans *dt = data;
  job *j = dt->j;
  const plan_index *pi = j->pi;
  int s = dt->s;
  double lead = dt->lead;
  g_free(dt);
  const gsize w = (gsize)pi->n + 1;
  const int *oo = pi->out_off + (gsize)s * w, *cls = pi->line_rep[s];
  for (int i = 0; i < oo[pi->n] - oo[0]; i++)
    if (cls[i] == i) {
      int m = xfer_src(oo, pi->n, oo[0] + i);
      j->dm[m].posted = s;
      d_flow(j, m, pi->out_peer[oo[0] + i], pi->out_bytes[oo[0] + i], lead);
    }
}

static void d_trans_begin(job *j, int s)
{
  const plan_index *pi = j->pi;
  const gsize w = (gsize)pi->n + 1;
  const int *oo = pi->out_off + (gsize)s * w, *cls = pi->line_rep[s];
  j->expect = 0;
  for (int i = 0; i < oo[pi->n] - oo[0]; i++)
    j->expect += cls[i] == i;
  dtrans *dt = g_new(dtrans, 1);
  *dt = (dtrans){j, s, j->trans_lead};
  if (dt->lead > 0)
    ts_sg_at(ts_sg_clock() + dt->lead, d_trans_post, dt);
  else
    d_trans_post(dt);
}

/* Synchronous steps: every member enters step s (nsteps: the end). A collapsed step starts
 * only its representatives (the line of member 0 along its piece); their images are claimed,
 * not simulated. The last begin may end the job: nothing of j is read after it. */
static void d_enter_step(job *j, int s)
{
  const plan_index *pi = j->pi;
  j->cur = s;
  j->arrived = 0;
  if (j->nimg > 0 && s < pi->nsteps && !d_collapsed(j, s))
    d_claim(j, s);
  if (d_trans(j, s)) {
    d_claim(j, s);
    d_trans_begin(j, s);
    return;
  }
  if (d_collapsed(j, s)) {
    d_claim(j, s);
    int k = pi->sym[s], size = pi->size[k], radix = pi->radix[k], nlines = pi->n / size;
    const int *lr = pi->line_rep[s];
    j->expect = 0;
    for (int l = 0; l < nlines; l++)
      j->expect += lr[l] == l ? size : 0;
    for (int l = 0; l < nlines; l++)
      if (lr[l] == l) {
        int r = line_shift(pi, l, k);
        for (int c = 0; c < size; c++)
          d_member_begin(j, c * radix + r, s);
      }
    return;
  }
  int n = pi->n;
  for (int m = 0; m < n; m++)
    d_member_begin(j, m, s);
}

/* One flow of a collective (member m to member p, step s) or a send (m = 0, p = 1, s = -1),
 * with its route. */
typedef struct {
  job *j;
  int m, p, s;
  int e; /* SEND: the image it is (0: the send itself; > 0: a ghost) */
  double bytes, lead;
  int nroute;
  int route[];
} dflow;

static gboolean d_collapsed(const job *j, int s)
{
  return j->b->collapse && j->pi != NULL && j->pi->sym != NULL && s >= 0 && s < j->pi->nsteps &&
         j->pi->sym[s] >= 0;
}

/* Step s is collapsed by transfer classes (SYM_TRANS): one transfer per class simulated. */
static gboolean d_trans(const job *j, int s)
{
  return d_collapsed(j, s) && j->pi->sym[s] == SYM_TRANS;
}

/* A flow crossed links of a collapsed step that only its images would use, or another flow's:
 * the collapsed replay is no longer exact. It stops (activities drain unreported) and the
 * caller replays again without collapsing (ts_backend_simgrid_symmetry_broken). */
static void d_break(sgb *b)
{
  if (b->sym_broken)
    return;
  b->sym_broken = TRUE;
  if (b->error == NULL)
    b->error = g_error_new(TS_ERROR, TS_ERROR_BACKEND,
                           "symmetry broken: a flow crossed the links of a collapsed collective "
                           "step (replay with trainsim/symmetry:full)");
}

static void d_links_alloc(sgb *b)
{
  if (b->lreal == NULL) {
    int n = MAX(ts_platform_nlinks(b->plat), 1);
    b->lreal = g_new0(int, n);
    b->lclaim = g_new0(int, n);
    b->limg = g_new0(int, n);
  }
}

/* The images of member m's line in collapsed step s: member index offsets from m's line to
 * every other line of its class. */
static GArray *d_shifts(const plan_index *pi, int s, int m)
{
  GArray *v = g_array_new(FALSE, FALSE, sizeof(int));
  int k = pi->sym[s], nlines = pi->n / pi->size[k], line = line_of(pi, m, k);
  const int *lr = pi->line_rep[s];
  for (int l = 0; l < nlines; l++)
    if (l != line && lr[l] == line) {
      int d = line_shift(pi, l, k) - line_shift(pi, line, k);
      g_array_append_val(v, d);
    }
  return v;
}

/* Chip of image c (0: the activity itself) of the activity's chip index i (a member, or a
 * send's end 0 / 1). */
static int d_img_chip(const job *j, int c, int i)
{
  if (c == 0)
    return j->chips != NULL ? j->chips[i] : (i == 0 ? j->act.chip : j->act.peer);
  int n = j->chips != NULL ? j->pi->n : 2;
  return j->img[(gsize)(c - 1) * n + i];
}

/* Chip `chip` moved as image c (>= 1) of j moves its own chips: along each of its axes. */
static int d_img_translate(const job *j, int c, int chip)
{
  const ts_trace *tr = j->b->tr;
  int rest = c;
  for (int k = 0; k < j->img_naxes && chip >= 0; k++) {
    int size = tr->axes[j->img_axes[k]].size, off = rest % size;
    rest /= size;
    if (off > 0)
      chip = ts_trace_axis_neighbor(tr, chip, j->img_axes[k], off);
  }
  return chip;
}

/* Image c's route is its original's moved link for link (same dimension and direction,
 * leaving the moved chip): then the images of every activity share links exactly as their
 * originals do. A mesh edge, a shared port or a route that turns differently fails. */
static gboolean d_img_route_ok(const job *j, int c, const GArray *orig, const GArray *img)
{
  const ts_platform *p = j->b->plat;
  if (orig->len != img->len)
    return FALSE;
  for (guint q = 0; q < orig->len; q++) {
    ts_link_id id = *ts_platform_link_id(p, g_array_index(orig, int, q));
    id.chip = d_img_translate(j, c, id.chip);
    if (id.chip < 0 || ts_platform_link_index(p, &id) != g_array_index(img, int, q))
      return FALSE;
  }
  return TRUE;
}

/* Whether image e of send j crosses a link of the simulated ranks' groups or a link with a flow
 * in flight (route: scratch). */
static gboolean d_img_meets_real(job *j, int e, GArray *route)
{
  sgb *b = j->b;
  if (b->reallink == NULL)
    return FALSE;
  g_array_set_size(route, 0);
  ts_platform_route(b->plat, d_img_chip(j, e, 0), d_img_chip(j, e, 1), route);
  for (guint q = 0; q < route->len; q++) {
    int l = g_array_index(route, int, q);
    if (b->reallink[l] || b->lreal[l] > 0)
      return TRUE;
  }
  return FALSE;
}

/* Claims the route from src to dst for j. A collapsed step's claim (image = FALSE) needs links
 * no one else uses; an engine image (image = TRUE) needs links without real flows or collapsed
 * steps, and is checked against its original's route `orig` (moved as image c). */
static void d_claim_route(job *j, int src, int dst, GArray *route, gboolean image, int c,
                          const GArray *orig)
{
  sgb *b = j->b;
  g_array_set_size(route, 0);
  ts_platform_route(b->plat, src, dst, route);
  if (j->claims == NULL)
    j->claims = g_array_new(FALSE, FALSE, sizeof(int));
  if (image && orig != NULL && !b->sym_broken && !d_img_route_ok(j, c, orig, route))
    d_break(b);
  for (guint q = 0; q < route->len; q++) {
    int l = g_array_index(route, int, q);
    if (b->lreal[l] > 0 || b->lclaim[l] > 0 || (!image && b->limg[l] > 0))
      d_break(b);
    if (image)
      b->limg[l]++;
    else
      b->lclaim[l]++;
    int tagged = 2 * l + (image ? 1 : 0);
    g_array_append_val(j->claims, tagged);
  }
}

/* The engine's images of a collective or a send (TS_REPLAY_COLLAPSED): the same chips moved
 * along every combination of the symmetric axes outside its group. */
static void d_images(sgb *b, job *j)
{
  const ts_trace *tr = b->tr;
  const ts_group *g = j->act.kind == TS_OP_COLL ? j->act.group : NULL;
  if (g != NULL && g->members != NULL) {
    d_break(b); /* an explicit member list has no images along axes */
    return;
  }
  int axes[TS_MAX_AXES], nax = 0, count = 1;
  for (int a = 0; a < tr->naxes; a++) {
    gboolean in_group = FALSE;
    for (int k = 0; g != NULL && k < g->naxes; k++)
      in_group = in_group || g->axes[k] == a;
    if (tr->axes[a].symmetric && !in_group && tr->axes[a].size > 1) {
      axes[nax++] = a;
      count *= tr->axes[a].size;
    }
  }
  if (count <= 1)
    return;
  memcpy(j->img_axes, axes, sizeof axes);
  j->img_naxes = nax;
  int n = j->chips != NULL ? j->pi->n : 2;
  j->nimg = count - 1;
  j->img = g_new(int, (gsize)j->nimg *n);
  for (int c = 1; c < count; c++) {
    for (int i = 0; i < n; i++) {
      int chip = d_img_chip(j, 0, i), rest = c;
      for (int k = 0; k < nax && chip >= 0; k++) {
        int off = rest % tr->axes[axes[k]].size;
        rest /= tr->axes[axes[k]].size;
        if (off > 0)
          chip = ts_trace_axis_neighbor(tr, chip, axes[k], off);
      }
      if (chip < 0) {
        d_break(b);
        chip = d_img_chip(j, 0, i);
      }
      j->img[(gsize)(c - 1) * n + i] = chip;
    }
  }
}

/* Claims every link the collapsed step s would use: its representatives' routes and their
 * images'. A link already in use, or claimed, breaks the symmetry. */
static void d_claim(job *j, int s)
{
  sgb *b = j->b;
  const plan_index *pi = j->pi;
  const gsize w = (gsize)pi->n + 1;
  const int *oo = pi->out_off + (gsize)s * w;
  d_links_alloc(b);
  /* A collapsed step claims every transfer's route (its representatives' included: their own
   * flows run there); the engine's images claim theirs. */
  int e0 = d_collapsed(j, s) ? 0 : 1;
  gboolean trans = d_trans(j, s);
  const int *cls = trans ? pi->line_rep[s] : NULL;
  g_autoptr(GArray) route = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
  g_autoptr(GArray) rep = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
  g_autoptr(GArray) orig = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
  double lead0 = 0;
  for (int m = 0; m < pi->n; m++) {
    double lat = 0; /* the member's longest route latency (its lead) */
    for (int i = oo[m]; i < oo[m + 1]; i++) {
      if (e0 == 1) { /* engine images only: checked against the original's route */
        g_array_set_size(orig, 0);
        ts_platform_route(b->plat, d_img_chip(j, 0, m), d_img_chip(j, 0, pi->out_peer[i]), orig);
      }
      for (int e = e0; e <= j->nimg; e++) {
        d_claim_route(j, d_img_chip(j, e, m), d_img_chip(j, e, pi->out_peer[i]), route, e0 == 1, e,
                      e0 == 1 ? orig : NULL);
        if (trans && !b->sym_broken) {
          /* Every transfer has links of its own (claimed once); it ends when its class's
           * representative does if its route matches the representative's hop for hop
           * (bandwidth and latency) and every member posts at the same time (the same lead).
           * A torus with wrap-around always does; a mesh edge or a tie broken otherwise
           * breaks it. */
          int r = oo[0] + cls[i - oo[0]];
          g_array_set_size(rep, 0);
          ts_platform_route(b->plat, d_img_chip(j, 0, xfer_src(oo, pi->n, r)),
                            d_img_chip(j, 0, pi->out_peer[r]), rep);
          gboolean same = rep->len == route->len;
          double l = 0;
          for (guint q = 0; q < route->len && same; q++) {
            int x = g_array_index(rep, int, q), y = g_array_index(route, int, q);
            same =
                ts_platform_link_bandwidth(b->plat, x) == ts_platform_link_bandwidth(b->plat, y) &&
                ts_platform_link_latency(b->plat, x) == ts_platform_link_latency(b->plat, y);
            l += ts_platform_link_latency(b->plat, y);
          }
          lat = MAX(lat, l);
          if (!same)
            d_break(b);
        }
      }
    }
    if (trans && pi->run[s] > 1) {
      if (m == 0)
        lead0 = lat;
      else if (lat != lead0)
        d_break(b);
    }
  }
  if (trans) {
    j->trans_lead = 0;
    if (pi->run[s] > 1 && oo[1] > oo[0]) {
      int no = oo[1] - oo[0];
      int *dst = g_newa(int, no);
      for (int k = 0; k < no; k++)
        dst[k] = j->chips[pi->out_peer[oo[0] + k]];
      j->trans_lead = (pi->run[s] - 1) * max_route_latency(b, j->chips[0], dst, no);
    }
  }
}

static void d_release(job *j)
{
  if (j->claims == NULL)
    return;
  for (guint q = 0; q < j->claims->len; q++) {
    int t = g_array_index(j->claims, int, q);
    if (t & 1)
      j->b->limg[t >> 1]--;
    else
      j->b->lclaim[t >> 1]--;
  }
  g_array_set_size(j->claims, 0);
}

static void d_job_end_cb(void *data)
{
  job_end(data);
}

/* Ends j at the current time, from a timer: never from inside sgb_start, which the engine
 * calls while it is itself reporting an end. */
static void d_end_later(job *j)
{
  ts_sg_at(ts_sg_clock(), d_job_end_cb, j);
}

static void d_member_done(job *j)
{
  if (++j->ndone == j->pi->n)
    job_end(j);
}

/* Member m has ended every flow of its step. */
static void d_step_done(job *j, int m)
{
  const plan_index *pi = j->pi;
  if (j->b->async_steps) {
    int s = j->dm[m].at;
    d_member_begin(j, m, s + pi->run[s]);
    return;
  }
  int expected = d_collapsed(j, j->cur) ? j->expect : pi->n;
  if (++j->arrived < expected)
    return;
  /* Everyone is through the step (the barrier): all go on to the next one. */
  d_release(j);
  d_enter_step(j, j->cur + pi->run[j->cur]);
}

static void d_flow_done(void *data, double start_s, double end_s)
{
  dflow *f = data;
  job *j = f->j;
  sgb *b = j->b;
  int label = label_of(b, &j->act);
  double s0 = start_s - f->lead - b->t0, e0 = end_s - b->t0;
  for (int q = 0; q < f->nroute; q++) {
    b->lreal[f->route[q]]--;
    acc_flow(b, f->route[q], label, f->bytes, s0, e0);
  }
  b->flows++;
  gboolean within = d_collapsed(j, f->s);
  if (d_trans(j, f->s)) {
    /* The images of a class's flow: the other transfers of its class, on their own links. */
    const plan_index *pi = j->pi;
    const gsize w = (gsize)pi->n + 1;
    const int *oo = pi->out_off + (gsize)f->s * w, *cls = pi->line_rep[f->s];
    int me = -1;
    for (int i = oo[f->m]; i < oo[f->m + 1] && me < 0; i++)
      if (pi->out_peer[i] == f->p && pi->out_bytes[i] == f->bytes && cls[i - oo[0]] == i - oo[0])
        me = i - oo[0];
    g_autoptr(GArray) route = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
    for (int i = 0; i < oo[pi->n] - oo[0]; i++)
      if (cls[i] == me) {
        int m = xfer_src(oo, pi->n, oo[0] + i), p = pi->out_peer[oo[0] + i];
        for (int e = 0; e <= j->nimg; e++) {
          if (i == me && e == 0)
            continue; /* the flow itself */
          g_array_set_size(route, 0);
          ts_platform_route(b->plat, d_img_chip(j, e, m), d_img_chip(j, e, p), route);
          for (guint q = 0; q < route->len; q++)
            acc_flow(b, g_array_index(route, int, q), label, f->bytes, s0, e0);
        }
      }
    int m = f->m;
    g_free(f);
    d_step_done(j, m);
    return;
  }
  if (!b->fold && (within || (j->nimg > 0 && f->e == 0))) {
    /* The images of a collapsed flow: same bytes, same interval, their own links (a ghost
     * accounts for itself). */
    g_autoptr(GArray) shifts =
        within ? d_shifts(j->pi, f->s, f->m) : g_array_new(FALSE, FALSE, sizeof(int));
    g_autoptr(GArray) route = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
    for (guint x = 0; x <= shifts->len; x++) {
      int r = x == 0 ? 0 : g_array_index(shifts, int, x - 1);
      for (int e = 0; e <= j->nimg; e++) {
        if ((x == 0 && e == 0) || (j->ghost != NULL && e > 0 && j->ghost[e]))
          continue; /* the flow itself, or a ghost */
        g_array_set_size(route, 0);
        ts_platform_route(b->plat, d_img_chip(j, e, f->m + r), d_img_chip(j, e, f->p + r), route);
        for (guint q = 0; q < route->len; q++)
          acc_flow(b, g_array_index(route, int, q), label, f->bytes, s0, e0);
      }
    }
  }
  if (j->act.kind != TS_OP_COLL) {
    g_free(f);
    if (j->flows_left > 0) { /* ghosts: every one ends with the send, or the symmetry broke */
      j->end_min = MIN(j->end_min, e0);
      j->end_max = MAX(j->end_max, e0);
      if (--j->flows_left > 0)
        return;
      if (j->end_max - j->end_min > 1e-9 * (j->end_max - s0) + 1e-15)
        d_break(b);
    }
    d_release(j);
    job_end(j);
    return;
  }
  gboolean m0 = --j->dm[f->m].pending == 0, p0 = --j->dm[f->p].pending == 0;
  int m = f->m, p = f->p;
  g_free(f);
  if (m0)
    d_step_done(j, m);
  if (p0)
    d_step_done(j, p);
}

static void d_flow_e(job *j, int m, int p, double bytes, double lead, int e);

static void d_flow(job *j, int m, int p, double bytes, double lead)
{
  d_flow_e(j, m, p, bytes, lead, 0);
}

static void d_flow_e(job *j, int m, int p, double bytes, double lead, int e)
{
  sgb *b = j->b;
  int src = j->chips != NULL ? j->chips[m] : d_img_chip(j, e, 0);
  int dst = j->chips != NULL ? j->chips[p] : d_img_chip(j, e, 1);
  d_links_alloc(b);
  if (b->flow_route == NULL)
    b->flow_route = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
  GArray *route = b->flow_route;
  g_array_set_size(route, 0);
  ts_platform_route(b->plat, src, dst, route);
  dflow *f = g_malloc(sizeof *f + sizeof(int) * route->len);
  int s = j->act.kind == TS_OP_COLL ? j->dm[m].posted : -1;
  *f = (dflow){j, m, p, s, e, bytes, lead, (int)route->len};
  gboolean own = d_collapsed(j, s); /* on links its step claimed */
  for (guint q = 0; q < route->len; q++) {
    int l = g_array_index(route, int, q);
    /* On the quotient torus. A route longer than a period along a folded dimension crosses
     * one canonical link twice, as two of its translates cross that link in the full replay:
     * SimGrid's max-min counts a repeated link twice (test
     * fold/route_crossing_a_link_twice_counts_it_twice), and so does the accounting. */
    if (b->fold)
      l = b->fold_link[l];
    f->route[q] = l;
    if ((!own && b->lclaim[l] > 0) || b->limg[l] > 0)
      d_break(b);
    b->lreal[l]++;
  }
  ts_sg_flow_start(ts_platform_host(b->plat, src), ts_platform_host(b->plat, dst), bytes,
                   d_flow_done, f);
}

/* Member m posts its sends and receives of step s: flows whose other end has posted the same
 * step start now; the others start when it does. */
static void d_member_post(job *j, int m, int s, double lead)
{
  const plan_index *pi = j->pi;
  const gsize w = (gsize)pi->n + 1;
  const int *oo = pi->out_off + (gsize)s * w, *io = pi->in_off + (gsize)s * w;
  dmember *d = &j->dm[m];
  d->posted = s;
  d->lead = lead;
  /* Folding: only flows leaving the fundamental domain run (the others are their images);
   * a member with none of them is through the step once posted. */
  const guint8 *in = j->b->fold ? j->b->indom : NULL;
  gboolean out = in == NULL || in[j->chips[m]];
  d->pending = out ? oo[m + 1] - oo[m] : 0;
  for (int k = io[m]; k < io[m + 1]; k++)
    d->pending += in == NULL || in[j->chips[pi->in_peer[k]]];
  if (d->pending == 0) {
    d_step_done(j, m);
    return;
  }
  for (int k = oo[m]; k < oo[m + 1] && out; k++) {
    int p = pi->out_peer[k];
    if (j->dm[p].posted == s)
      d_flow(j, m, p, pi->out_bytes[k], lead);
  }
  for (int k = io[m]; k < io[m + 1]; k++) {
    int q = pi->in_peer[k];
    if (j->dm[q].posted != s || (in != NULL && !in[j->chips[q]]))
      continue;
    for (int i = oo[q]; i < oo[q + 1]; i++)
      if (pi->out_peer[i] == m) {
        d_flow(j, q, m, pi->out_bytes[i], j->dm[q].lead);
        break;
      }
  }
}

typedef struct {
  job *j;
  int m, s;
  double lead;
} dpost;

static void d_post_cb(void *data)
{
  dpost *dp = data;
  d_member_post(dp->j, dp->m, dp->s, dp->lead);
  g_free(dp);
}

/* Member m reaches step s (a run's first step, or nsteps when done). A merged run of k steps
 * first waits its k - 1 extra latencies, as the member's actor sleeps them in actor mode. */
static void d_member_begin(job *j, int m, int s)
{
  sgb *b = j->b;
  const plan_index *pi = j->pi;
  const gsize w = (gsize)pi->n + 1;
  for (;;) {
    if (s >= pi->nsteps) {
      j->dm[m].at = s;
      d_member_done(j);
      return;
    }
    const int *oo = pi->out_off + (gsize)s * w, *io = pi->in_off + (gsize)s * w;
    int no = oo[m + 1] - oo[m], ni = io[m + 1] - io[m];
    j->dm[m].at = s;
    if (no > 0 || ni > 0) {
      double lead = 0;
      if (pi->run[s] > 1 && no > 0) {
        int *dst = g_newa(int, no);
        for (int k = 0; k < no; k++)
          dst[k] = j->chips[pi->out_peer[oo[m] + k]];
        lead = (pi->run[s] - 1) * max_route_latency(b, j->chips[m], dst, no);
      }
      if (lead > 0) {
        dpost *dp = g_new(dpost, 1);
        *dp = (dpost){j, m, s, lead};
        ts_sg_at(ts_sg_clock() + lead, d_post_cb, dp);
      } else {
        d_member_post(j, m, s, 0);
      }
      return;
    }
    /* Nothing to move in this step. */
    if (!b->async_steps) {
      d_step_done(j, m);
      return;
    }
    s += pi->run[s];
  }
}

static void d_coll_go(void *data)
{
  job *j = data;
  if (j->b->async_steps) {
    /* The last member's begin may end the job (a collective with nothing to move). */
    int n = j->pi->n;
    for (int m = 0; m < n; m++)
      d_member_begin(j, m, 0);
  } else {
    d_enter_step(j, 0);
  }
}

/* ---- processor sharing of a chip between computes ---- */

static void d_cpu_fire(void *data);

/* Brings every running compute's remaining work up to now. */
static void d_cpu_update(dcpu *c, double now)
{
  guint k = c->running->len;
  if (k > 0 && now > c->last) {
    double done = (now - c->last) / k;
    for (guint i = 0; i < k; i++)
      ((job *)g_ptr_array_index(c->running, i))->rem -= done;
  }
  c->last = now;
}

static void d_cpu_schedule(dcpu *c, double now)
{
  if (c->timer != NULL)
    ts_sg_timer_cancel(c->timer);
  c->timer = NULL;
  c->next = NULL;
  guint k = c->running->len;
  for (guint i = 0; i < k; i++) {
    job *j = g_ptr_array_index(c->running, i);
    if (c->next == NULL || j->rem < c->next->rem)
      c->next = j;
  }
  if (c->next != NULL)
    c->timer = ts_sg_at(now + MAX(c->next->rem, 0.0) * k, d_cpu_fire, c);
}

static void d_cpu_fire(void *data)
{
  dcpu *c = data;
  double now = ts_sg_clock();
  c->timer = NULL;
  d_cpu_update(c, now);
  /* The job the timer was set for ends, with any that end within rounding of it. */
  double limit = MAX(c->next->rem, 0.0) + 1e-15 * MAX(now, 1.0);
  g_autoptr(GPtrArray) ended = g_ptr_array_new();
  for (guint i = 0; i < c->running->len;) {
    job *j = g_ptr_array_index(c->running, i);
    if (j->rem <= limit) {
      g_ptr_array_add(ended, j);
      g_ptr_array_remove_index(c->running, i);
    } else {
      i++;
    }
  }
  d_cpu_schedule(c, now);
  for (guint i = 0; i < ended->len; i++)
    job_end(g_ptr_array_index(ended, i));
}

static void d_compute(sgb *b, job *j)
{
  if (b->cpu == NULL) {
    b->cpu = g_new0(dcpu, b->topo->nchips);
    for (int c = 0; c < b->topo->nchips; c++)
      b->cpu[c].running = g_ptr_array_new();
  }
  dcpu *c = &b->cpu[j->act.chip];
  double now = ts_sg_clock();
  d_cpu_update(c, now);
  j->rem = j->compute_s;
  g_ptr_array_add(c->running, j);
  d_cpu_schedule(c, now);
}

/* ---- folding by translations (ts_backend_simgrid_set_fold) ---- */

/* Chip moved by the g-th translation of the fold (mixed radix over its pieces). */
static int f_translate(const sgb *b, int chip, int g)
{
  ts_array arr = ts_topo_array(b->topo);
  int c[TS_MAX_DIMS];
  ts_array_coords(&arr, chip, c);
  for (int i = 0; i < b->nfold; i++) {
    int d = b->fold_dim[i], k = g % b->fold_n[i];
    g /= b->fold_n[i];
    c[d] = (c[d] + k * b->fold_stride[i]) % arr.size[d];
  }
  return ts_array_chip(&arr, c);
}

/* Whether the decomposition is invariant under the fold's translations of member chips
 * (chips: one copy's): each member's transfers, moved, are the moved member's. Checked once
 * per plan and fold. */
static gboolean f_plan_ok(sgb *b, plan_index *pi, const int *chips)
{
  if (pi->fold_gen == b->fold_gen)
    return pi->fold_ok > 0;
  int n = pi->n;
  g_autoptr(GHashTable) at = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (int m = 0; m < n; m++)
    g_hash_table_insert(at, GINT_TO_POINTER(chips[m] + 1), GINT_TO_POINTER(m + 1));
  g_autofree int *sigma = g_new(int, n);
  gboolean ok = TRUE;
  const gsize w = (gsize)n + 1;
  for (int g = 1; g < b->fold_order && ok; g++) {
    gboolean inside = TRUE; /* the translation maps the group onto itself */
    for (int m = 0; m < n && inside; m++) {
      sigma[m] = GPOINTER_TO_INT(
                     g_hash_table_lookup(at, GINT_TO_POINTER(f_translate(b, chips[m], g) + 1))) -
                 1;
      inside = sigma[m] >= 0;
    }
    if (!inside)
      continue;
    for (int s = 0; s < pi->nsteps && ok; s++) {
      const int *oo = pi->out_off + (gsize)s * w;
      for (int m = 0; m < n && ok; m++) {
        int t = sigma[m];
        ok = oo[m + 1] - oo[m] == oo[t + 1] - oo[t];
        for (int i = oo[m]; i < oo[m + 1] && ok; i++) {
          gboolean found = FALSE;
          for (int k = oo[t]; k < oo[t + 1] && !found; k++)
            found =
                pi->out_peer[k] == sigma[pi->out_peer[i]] && pi->out_bytes[k] == pi->out_bytes[i];
          ok = found;
        }
      }
    }
  }
  pi->fold_gen = b->fold_gen;
  pi->fold_ok = ok ? 1 : -1;
  return ok;
}

/* Whether copy e's flows leaving the domain are one per G-orbit of its own: every translation
 * maps the copy onto itself, or onto chips none of which is in the domain (a copy no sub-job
 * simulates). Otherwise its barrier would depend on another copy's flows. */
static gboolean f_copy_ok(sgb *b, const job *j, int e)
{
  int n = j->pi->n;
  for (int g = 1; g < b->fold_order; g++) {
    int t0 = f_translate(b, d_img_chip(j, e, 0), g);
    gboolean self = FALSE;
    for (int m = 0; m < n && !self; m++)
      self = d_img_chip(j, e, m) == t0;
    for (int m = 0; m < n && !self; m++)
      if (b->indom[f_translate(b, d_img_chip(j, e, m), g)])
        return FALSE;
  }
  return TRUE;
}

/* A send: every copy (the send and its images) leaving the domain runs as a real flow; the
 * send ends when they have, checked to end together (the ghosts' bookkeeping). */
static void d_fold_send(sgb *b, job *j)
{
  d_images(b, j);
  j->ghost = g_new0(guint8, j->nimg + 1);
  j->flows_left = 0;
  j->end_min = G_MAXDOUBLE;
  j->end_max = -G_MAXDOUBLE;
  for (int e = 0; e <= j->nimg; e++)
    if (b->indom[d_img_chip(j, e, 0)]) {
      j->ghost[e] = 1;
      j->flows_left++;
    }
  if (j->flows_left == 0) { /* not symmetric after all (d_images broke it) */
    d_break(b);
    d_end_later(j);
    return;
  }
  for (int e = 0; e <= j->nimg; e++)
    if (j->ghost[e])
      d_flow_e(j, 0, 1, j->act.op->bytes, 0, e);
}

/* A collective: one sub-job per copy with a member in the domain, each its own collective
 * (own barrier) whose members all post, but whose flows run only from the domain. */
static void d_fold_coll(sgb *b, job *j, double now)
{
  d_images(b, j);
  int n = j->pi->n;
  GPtrArray *subs = g_ptr_array_new();
  for (int e = 0; e <= j->nimg; e++) {
    int k = 0;
    for (int m = 0; m < n; m++)
      k += b->indom[d_img_chip(j, e, m)];
    if (k == 0)
      continue;
    if ((k < n && !f_copy_ok(b, j, e)) || !f_plan_ok(b, j->pi, j->chips))
      d_break(b);
    job *c = g_new0(job, 1);
    c->b = b;
    c->act = j->act;
    c->pi = j->pi;
    c->pi->users++;
    c->parent = j;
    c->nparts = 1;
    c->dm = g_new(dmember, n);
    c->chips = g_new(int, n);
    for (int m = 0; m < n; m++) {
      c->dm[m] = (dmember){0, -1, 0, 0};
      c->chips[m] = d_img_chip(j, e, m);
    }
    g_ptr_array_add(subs, c);
  }
  j->flows_left = (int)subs->len;
  j->t_start = now - b->t0;
  j->end_min = G_MAXDOUBLE;
  j->end_max = -G_MAXDOUBLE;
  if (subs->len == 0) {
    d_break(b);
    d_end_later(j);
  }
  /* The last sub-job's end may end j: nothing of j is read in this loop. */
  for (guint i = 0; i < subs->len; i++) {
    job *c = g_ptr_array_index(subs, i);
    if (c->pi->pre_s > 0)
      ts_sg_at(now + c->pi->pre_s, d_coll_go, c);
    else
      d_coll_go(c);
  }
  g_ptr_array_unref(subs);
}

/* Starts job j now, in driver mode. */
static void d_launch(sgb *b, job *j)
{
  b->live_jobs++;
  live_link(b, j);
  double now = ts_sg_clock();
  switch (j->act.kind) {
  case TS_OP_COMPUTE:
    if (j->compute_s > 0) {
      d_compute(b, j);
      return;
    }
    break;
  case TS_OP_XFER:
  case TS_OP_DELAY:
    if (j->compute_s > 0) {
      ts_sg_at(now + j->compute_s, d_job_end_cb, j);
      return;
    }
    break;
  case TS_OP_SEND:
    if (j->nparts == 2 && b->fold) {
      d_fold_send(b, j);
      return;
    }
    if (j->nparts == 2) {
      if (b->images) {
        d_images(b, j);
        d_links_alloc(b);
        g_autoptr(GArray) route = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
        g_autoptr(GArray) orig = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
        ts_platform_route(b->plat, j->act.chip, j->act.peer, orig);
        for (int e = 1; e <= j->nimg; e++)
          if (d_img_meets_real(j, e, route)) {
            if (j->ghost == NULL)
              j->ghost = g_new0(guint8, j->nimg + 1);
            j->ghost[e] = 1;
          } else {
            d_claim_route(j, d_img_chip(j, e, 0), d_img_chip(j, e, 1), route, TRUE, e, orig);
          }
      }
      if (j->ghost != NULL) {
        j->flows_left = 1;
        j->end_min = G_MAXDOUBLE;
        j->end_max = -G_MAXDOUBLE;
        for (int e = 1; e <= j->nimg; e++)
          j->flows_left += j->ghost[e];
        for (int e = 1; e <= j->nimg; e++)
          if (j->ghost[e])
            d_flow_e(j, 0, 1, j->act.op->bytes, 0, e);
      }
      d_flow(j, 0, 1, j->act.op->bytes, 0);
      return;
    }
    break;
  case TS_OP_COLL:
    if (j->pi != NULL) {
      int n = j->pi->n;
      j->dm = g_new(dmember, n);
      j->chips = g_new(int, n);
      for (int m = 0; m < n; m++) {
        j->dm[m] = (dmember){0, -1, 0, 0};
        j->chips[m] = ts_trace_group_chip(b->topo, j->act.group, j->act.chip, m);
      }
      if (b->fold) {
        d_fold_coll(b, j, now);
        return;
      }
      if (b->images)
        d_images(b, j);
      if (j->pi->pre_s > 0)
        ts_sg_at(now + j->pi->pre_s, d_coll_go, j);
      else
        d_coll_go(j);
      return;
    }
    break;
  default:
    break;
  }
  d_end_later(j);
}

static void d_kickoff(void *data)
{
  sgb *b = data;
  for (guint i = 0; i < b->queue->len; i++)
    d_launch(b, g_ptr_array_index(b->queue, i));
  g_ptr_array_set_size(b->queue, 0);
}

/* ---- backend interface ---- */

static void plan_index_free(gpointer data)
{
  plan_index *pi = data;
  ts_coll_plan_free(pi->plan);
  g_free(pi->out_off);
  g_free(pi->out_peer);
  g_free(pi->out_bytes);
  g_free(pi->in_off);
  g_free(pi->in_peer);
  g_free(pi->run);
  g_free(pi->sym);
  for (int k = 0; pi->line_rep != NULL && k < pi->nsteps; k++)
    g_free(pi->line_rep[k]);
  g_free(pi->line_rep);
  g_free(pi);
}

/* Appends one member's sends (or receives) of a step, merging those to (from) the same peer
 * into one message, as ts_coll.h allows: a pair exchanges at most one message per step. */
static void append_merged(GArray *peers, GArray *bytes, const int *p, const double *nb, int n)
{
  guint first = peers->len;
  /* Members have few peers per step, except in direct algorithms: index those by peer. Both
   * sides of a pair must merge alike, or a receive would wait for a send that never comes. */
  GHashTable *where = n > 16 ? g_hash_table_new(g_direct_hash, g_direct_equal) : NULL;
  for (int k = 0; k < n; k++) {
    int q = -1;
    if (where != NULL) {
      gpointer v;
      if (g_hash_table_lookup_extended(where, GINT_TO_POINTER(p[k]), NULL, &v))
        q = GPOINTER_TO_INT(v);
    } else {
      for (guint i = first; i < peers->len && q < 0; i++)
        if (g_array_index(peers, int, i) == p[k])
          q = (int)i;
    }
    if (q >= 0) {
      if (bytes != NULL)
        g_array_index(bytes, double, q) += nb[k];
      continue;
    }
    if (where != NULL)
      g_hash_table_insert(where, GINT_TO_POINTER(p[k]), GINT_TO_POINTER((int)peers->len));
    g_array_append_val(peers, p[k]);
    if (bytes != NULL)
      g_array_append_val(bytes, nb[k]);
  }
  if (where != NULL)
    g_hash_table_unref(where);
}

static plan_index *plan_index_new(ts_coll_plan *plan, int n)
{
  plan_index *pi = g_new0(plan_index, 1);
  pi->plan = plan;
  pi->n = n;
  pi->nsteps = ts_coll_plan_nsteps(plan);
  gsize rows = (gsize)pi->nsteps * (gsize)(n + 1);
  pi->out_off = g_new0(int, rows + 1);
  pi->in_off = g_new0(int, rows + 1);
  GArray *xf = g_array_new(FALSE, FALSE, sizeof(ts_xfer));
  GArray *op = g_array_new(FALSE, FALSE, sizeof(int)),
         *ob = g_array_new(FALSE, FALSE, sizeof(double));
  GArray *ip = g_array_new(FALSE, FALSE, sizeof(int));
  /* A step's transfers grouped by source and by destination (counting sort). */
  int *off_o = g_new(int, n + 1), *off_i = g_new(int, n + 1), *cur = g_new(int, n);
  GArray *so = g_array_new(FALSE, FALSE, sizeof(int)),
         *sb = g_array_new(FALSE, FALSE, sizeof(double));
  GArray *si = g_array_new(FALSE, FALSE, sizeof(int));
  for (int s = 0; s < pi->nsteps; s++) {
    g_array_set_size(xf, 0);
    ts_coll_plan_step(plan, s, xf);
    memset(off_o, 0, sizeof(int) * (gsize)(n + 1));
    memset(off_i, 0, sizeof(int) * (gsize)(n + 1));
    for (guint k = 0; k < xf->len; k++) {
      const ts_xfer *x = &g_array_index(xf, ts_xfer, k);
      if (x->src != x->dst) { /* a copy within one member crosses no link */
        off_o[x->src + 1]++;
        off_i[x->dst + 1]++;
      }
    }
    for (int m = 0; m < n; m++) {
      off_o[m + 1] += off_o[m];
      off_i[m + 1] += off_i[m];
    }
    g_array_set_size(so, (guint)off_o[n]);
    g_array_set_size(sb, (guint)off_o[n]);
    g_array_set_size(si, (guint)off_i[n]);
    memcpy(cur, off_o, sizeof(int) * (gsize)n);
    for (guint k = 0; k < xf->len; k++) {
      const ts_xfer *x = &g_array_index(xf, ts_xfer, k);
      if (x->src == x->dst)
        continue;
      g_array_index(so, int, cur[x->src]) = x->dst;
      g_array_index(sb, double, cur[x->src]++) = (double)x->count; /* elem_bytes = 1 */
    }
    memcpy(cur, off_i, sizeof(int) * (gsize)n);
    for (guint k = 0; k < xf->len; k++) {
      const ts_xfer *x = &g_array_index(xf, ts_xfer, k);
      if (x->src != x->dst)
        g_array_index(si, int, cur[x->dst]++) = x->src;
    }
    int *oo = pi->out_off + (gsize)s * (n + 1), *io = pi->in_off + (gsize)s * (n + 1);
    for (int m = 0; m < n; m++) {
      oo[m] = (int)op->len;
      append_merged(op, ob, (int *)so->data + off_o[m], (double *)sb->data + off_o[m],
                    off_o[m + 1] - off_o[m]);
      io[m] = (int)ip->len;
      append_merged(ip, NULL, (int *)si->data + off_i[m], NULL, off_i[m + 1] - off_i[m]);
    }
    oo[n] = (int)op->len;
    io[n] = (int)ip->len;
  }
  g_free(off_o);
  g_free(off_i);
  g_free(cur);
  g_array_unref(so);
  g_array_unref(sb);
  g_array_unref(si);
  g_array_unref(xf);
  pi->mem =
      rows * 2 * sizeof(int) + op->len * (sizeof(int) + sizeof(double)) + ip->len * sizeof(int);
  pi->out_peer = (int *)g_array_free(op, FALSE);
  pi->out_bytes = (double *)g_array_free(ob, FALSE);
  pi->in_peer = (int *)g_array_free(ip, FALSE);
  return pi;
}

/* Whether steps s and t have the same transfers but for their sizes: every member sends to
 * and receives from the same peers in the same order (the steps of a ring phase). Per-member
 * blocks are laid out in member order, so equal offsets and equal peer blocks say it. */
static gboolean steps_alike(const plan_index *pi, int s, int t)
{
  const gsize w = (gsize)pi->n + 1;
  const int *os = pi->out_off + s * w, *ot = pi->out_off + t * w;
  const int *is = pi->in_off + s * w, *it = pi->in_off + t * w;
  for (int m = 0; m < pi->n; m++)
    if (os[m + 1] - os[m] != ot[m + 1] - ot[m] || is[m + 1] - is[m] != it[m + 1] - it[m])
      return FALSE;
  return memcmp(pi->out_peer + os[0], pi->out_peer + ot[0],
                sizeof(int) * (gsize)(os[pi->n] - os[0])) == 0 &&
         memcmp(pi->in_peer + is[0], pi->in_peer + it[0],
                sizeof(int) * (gsize)(is[pi->n] - is[0])) == 0;
}

/* Fills pi->run: runs of alike steps merged into their first step (bytes summed per peer), or
 * no merging. A merged run is one flow per peer instead of k: the N - 1 steps of a ring phase
 * cost SimGrid one flow each instead of N - 1 (docs/backends.md, "Flows"). */
static void plan_index_runs(plan_index *pi, gboolean merge)
{
  pi->run = g_new(int, pi->nsteps > 0 ? pi->nsteps : 1);
  const gsize w = (gsize)pi->n + 1;
  for (int s = 0; s < pi->nsteps;) {
    int e = s + 1;
    while (merge && e < pi->nsteps && steps_alike(pi, s, e))
      e++;
    pi->run[s] = e - s;
    const int *os = pi->out_off + s * w;
    for (int t = s + 1; t < e; t++) {
      const int *ot = pi->out_off + t * w;
      for (int k = 0; k < os[pi->n] - os[0]; k++)
        pi->out_bytes[os[0] + k] += pi->out_bytes[ot[0] + k];
      pi->run[t] = 0;
    }
    s = e;
  }
  pi->mem += sizeof(int) * (gsize)pi->nsteps;
}

/* Member m's coordinate along piece k. */
static int piece_coord(const plan_index *pi, int m, int k)
{
  return (m / pi->radix[k]) % pi->size[k];
}

/* Line index of member m along piece k (its coordinates but k's, mixed radix) and back. */
static int line_of(const plan_index *pi, int m, int k)
{
  return (m / (pi->radix[k] * pi->size[k])) * pi->radix[k] + m % pi->radix[k];
}

static int line_shift(const plan_index *pi, int line, int k)
{
  return (line / pi->radix[k]) * pi->radix[k] * pi->size[k] + line % pi->radix[k];
}

/* Whether line b's transfers in step s are line a's shifted (peer for peer, byte for byte). */
static gboolean lines_alike(const plan_index *pi, int s, int k, int a, int b)
{
  const gsize w = (gsize)pi->n + 1;
  const int *oo = pi->out_off + (gsize)s * w, *io = pi->in_off + (gsize)s * w;
  int ra = line_shift(pi, a, k), rb = line_shift(pi, b, k), shift = rb - ra;
  for (int c = 0; c < pi->size[k]; c++) {
    int ma = c * pi->radix[k] + ra, mb = c * pi->radix[k] + rb;
    if (oo[mb + 1] - oo[mb] != oo[ma + 1] - oo[ma] || io[mb + 1] - io[mb] != io[ma + 1] - io[ma])
      return FALSE;
    for (int i = 0; i < oo[mb + 1] - oo[mb]; i++)
      if (pi->out_peer[oo[mb] + i] != pi->out_peer[oo[ma] + i] + shift ||
          pi->out_bytes[oo[mb] + i] != pi->out_bytes[oo[ma] + i])
        return FALSE;
    for (int i = 0; i < io[mb + 1] - io[mb]; i++)
      if (pi->in_peer[io[mb] + i] != pi->in_peer[io[ma] + i] + shift)
        return FALSE;
  }
  return TRUE;
}

/* The offset from member m to member p: the member whose coordinates are p's minus m's,
 * modulo each piece's size. */
static int member_sub(const plan_index *pi, int p, int m)
{
  int r = 0;
  for (int k = 0; k < TS_MAX_DIMS && pi->radix[k] > 0; k++)
    r += ((piece_coord(pi, p, k) - piece_coord(pi, m, k) + pi->size[k]) % pi->size[k]) *
         pi->radix[k];
  return r;
}

/* The sender of transfer i of a step whose senders' offsets are oo[0..n]. */
static int xfer_src(const int *oo, int n, int i)
{
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (oo[mid] <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* Classes step s's transfers by bytes and offset (see plan_index, SYM_TRANS): NULL when
 * nothing repeats enough to be worth it (at most half as many classes as transfers, at most
 * TRANS_MAX_CLASSES). */
#define TRANS_MAX_CLASSES 256
static int *trans_classes(const plan_index *pi, int s)
{
  const gsize w = (gsize)pi->n + 1;
  const int *oo = pi->out_off + (gsize)s * w;
  int nt = oo[pi->n] - oo[0], cells = 1;
  for (int k = 0; k < TS_MAX_DIMS && pi->radix[k] > 0; k++)
    cells *= pi->size[k];
  if (nt < 2 || cells != pi->n)
    return NULL;
  int *cls = g_new(int, nt), reps[TRANS_MAX_CLASSES], roff[TRANS_MAX_CLASSES], nr = 0;
  for (int m = 0; m < pi->n; m++)
    for (int i = oo[m]; i < oo[m + 1]; i++) {
      int off = member_sub(pi, pi->out_peer[i], m), c = -1;
      for (int q = 0; q < nr && c < 0; q++)
        if (roff[q] == off && pi->out_bytes[oo[0] + reps[q]] == pi->out_bytes[i])
          c = reps[q];
      if (c < 0) {
        if (nr == TRANS_MAX_CLASSES || (nr + 1) * 2 > nt) {
          g_free(cls);
          return NULL;
        }
        c = i - oo[0];
        reps[nr] = c;
        roff[nr++] = off;
      }
      cls[i - oo[0]] = c;
    }
  return cls;
}

/* Fills pi->sym and pi->line_rep (see plan_index). Exact on the decomposition: a step is
 * symmetric when every transfer changes one coordinate, the same piece for all; its lines are
 * then classed by their transfers (an unevenly divided buffer gives a few classes whose chunks
 * differ by a byte), one representative per class. */
static void plan_index_symmetry(plan_index *pi, const ts_group_shape *g)
{
  if (g->npieces < 2)
    return;
  for (int a = 0; a < g->npieces; a++)
    for (int c = a + 1; c < g->npieces; c++)
      if (g->p[a].dim == g->p[c].dim)
        return;
  int r = 1;
  for (int k = 0; k < g->npieces; k++) {
    pi->radix[k] = r;
    pi->size[k] = g->p[k].size;
    r *= g->p[k].size;
  }
  const gsize w = (gsize)pi->n + 1;
  pi->sym = g_new(int, pi->nsteps > 0 ? pi->nsteps : 1);
  pi->line_rep = g_new0(int *, pi->nsteps > 0 ? pi->nsteps : 1);
  GArray *reps = g_array_new(FALSE, FALSE, sizeof(int));
  for (int s = 0; s < pi->nsteps; s++) {
    pi->sym[s] = -1;
    if (pi->run[s] == 0)
      continue;
    const int *oo = pi->out_off + (gsize)s * w;
    int piece = -1;
    gboolean ok = oo[pi->n] > oo[0];
    for (int m = 0; m < pi->n && ok; m++)
      for (int i = oo[m]; i < oo[m + 1] && ok; i++) {
        int p = pi->out_peer[i], moved = -1;
        for (int k = 0; k < g->npieces && ok; k++)
          if (piece_coord(pi, m, k) != piece_coord(pi, p, k)) {
            ok = moved < 0;
            moved = k;
          }
        ok = ok && moved >= 0 && (piece < 0 || piece == moved);
        piece = moved;
      }
    if (!ok) {
      int *cls = trans_classes(pi, s);
      if (cls != NULL) {
        pi->sym[s] = SYM_TRANS;
        pi->line_rep[s] = cls;
        pi->mem += sizeof(int) * (gsize)(oo[pi->n] - oo[0]);
      }
      continue;
    }
    int nlines = pi->n / pi->size[piece];
    int *lr = g_new(int, nlines);
    g_array_set_size(reps, 0);
    for (int l = 0; l < nlines; l++) {
      lr[l] = -1;
      for (guint q = 0; q < reps->len && lr[l] < 0; q++)
        if (lines_alike(pi, s, piece, g_array_index(reps, int, q), l))
          lr[l] = g_array_index(reps, int, q);
      if (lr[l] < 0) {
        lr[l] = l;
        g_array_append_val(reps, l);
      }
    }
    /* Worth it only when lines repeat. */
    if ((int)reps->len * 2 > nlines) {
      g_free(lr);
      continue;
    }
    pi->sym[s] = piece;
    pi->line_rep[s] = lr;
    pi->mem += sizeof(int) * (gsize)nlines;
  }
  g_array_unref(reps);
  pi->mem += sizeof(int) * (gsize)pi->nsteps;
}

static plan_index *plan_for(sgb *b, const ts_activity *a, GError **error)
{
  const ts_op *op = a->op;
  const ts_group_shape *g = &a->group->shape;
  gboolean list = a->group->members != NULL && g->npieces == 0; /* irregular member list */
  /* Transfers move whole bytes (a decomposition of count = bytes elements of one byte); a
   * fractional size, e.g. fp16 gradients split 8 ways, is rounded: at most half a byte. */
  if (!(op->bytes >= 0) || op->bytes > 9.0e15) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                "collective of %g bytes: expected a size in [0, 9e15] bytes", op->bytes);
    return NULL;
  }
  double bytes = nearbyint(op->bytes);
  GString *key = g_string_new(NULL);
  if (list) /* the decomposition depends only on the member count */
    g_string_append_printf(key, "list%d,", a->group->nmembers);
  for (int k = 0; k < g->npieces; k++)
    g_string_append_printf(key, "%d:%d:%d,", g->p[k].dim, g->p[k].size, g->p[k].stride);
  g_string_append_printf(key, "|%d|%d|%.0f", op->coll, op->algo, bytes);
  plan_index *pi = g_hash_table_lookup(b->plans, key->str);
  if (pi != NULL) {
    g_string_free(key, TRUE);
    pi->users++;
    return pi;
  }
  ts_coll_algo algo = op->algo;
  if (list) {
    algo = TS_ALGO_RING;
  } else if (ts_coll_algo_is_choice(algo)) {
    /* The same choice the analytic backend makes, so both replay the same decomposition. */
    if (ts_coll_time(b->topo, op->coll, op->algo, g, op->bytes, &algo, error) < 0) {
      g_string_free(key, TRUE);
      return NULL;
    }
  }
  ts_coll_plan *p =
      list ? ts_coll_members_decompose(op->coll, op->algo, a->group->nmembers, (gint64)bytes, error)
           : ts_coll_decompose(b->topo, op->coll, algo, g, (gint64)bytes, 1.0, error);
  if (p == NULL) {
    g_string_free(key, TRUE);
    return NULL;
  }
  pi = plan_index_new(p, ts_trace_group_size(a->group));
  /* The protocol the analytic model chose (ts_coll_decompose picks the same): its bandwidth
   * fraction scales every transfer, its fixed latency delays the start. The per-hop latency
   * of LL and LL128 (lower than Simple's) is not modelled here: links keep the dimension's. */
  double frac = 1.0;
  ts_coll_plan_proto_costs(p, &frac, &pi->pre_s);
  if (frac > 0 && frac != 1.0)
    for (int k = 0; k < pi->out_off[(gsize)pi->nsteps * (pi->n + 1)]; k++)
      pi->out_bytes[k] /= frac;
  plan_index_runs(pi, !b->per_step_flows);
  if (!list)
    plan_index_symmetry(pi, g);
  pi->users = 1;
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, b->plans);
  while (b->plans_mem + pi->mem > PLAN_CACHE_BYTES && g_hash_table_iter_next(&it, &k, &v))
    if (((plan_index *)v)->users == 0) {
      b->plans_mem -= ((plan_index *)v)->mem;
      g_hash_table_iter_remove(&it);
    }
  b->plans_mem += pi->mem;
  g_hash_table_insert(b->plans, g_string_free(key, FALSE), pi);
  return pi;
}

static gboolean sgb_start(ts_backend *bk, ts_replay *r, const ts_activity *a, double now,
                          GError **error)
{
  (void)r;
  /* activities start at the simulator's current time, which equals now */
  sgb *b = bk->ctx;
  job *j = g_new0(job, 1);
  j->b = b;
  j->act = *a;
  j->nparts = 1; /* one actor, which does nothing unless given more below */
  /* Made at the first activity of any kind: a stage's first op may be a receive. */
  if (b->host_clock == NULL)
    b->host_clock = g_new0(double, b->topo->nchips);
  switch (a->kind) {
  case TS_OP_COMPUTE: {
    const ts_chip *c = &b->topo->chip;
    const ts_op *op = a->op;
    double dev = ts_cost_device(c, op->flops, op->mem_bytes, op->shape);
    double launch = ts_cost_launch(c, op->flops, op->mem_bytes, op->shape);
    /* A straggler (issue 14) computes at a fraction of nominal speed. */
    j->compute_s = ts_cost_issue(&b->host_clock[a->chip], now, dev, launch,
                                 ts_cost_kernels(op->shape), ts_cost_op_syncs(op->shape)) /
                   ts_degrade_chip_speed(b->topo, a->chip);
  } break;
  case TS_OP_XFER:
  case TS_OP_DELAY:
    j->compute_s = ts_offchip_time(b->topo, a->op);
    if (j->compute_s < 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "'%s': transfer over %s, which the topology gives no bandwidth; expected its "
                  "[host] key or the op's bw_Bps",
                  a->label, ts_resource_name(a->op->resource));
      g_free(j);
      return FALSE;
    }
    break;
  case TS_OP_COLL:
    if (ts_trace_group_size(a->group) > 1) {
      j->pi = plan_for(b, a, error);
      if (j->pi == NULL) {
        g_prefix_error(error, "'%s': ", a->label);
        g_free(j);
        return FALSE;
      }
      j->nparts = j->pi->n;
      /* Every member's host issues it; the collective waits for the last (analytic too). */
      if (b->host_clock != NULL && b->topo->chip.collective_launch_s > 0)
        for (int m = 0; m < j->pi->n; m++) {
          int c = ts_trace_group_chip(b->topo, a->group, a->chip, m);
          if (c >= 0 && c < b->topo->nchips)
            j->compute_s =
                fmax(j->compute_s, ts_cost_issue_collective(&b->host_clock[c], now,
                                                            b->topo->chip.collective_launch_s));
        }
    }
    break;
  case TS_OP_SEND:
    if (a->chip < 0 || a->chip >= b->topo->nchips || a->peer < 0 || a->peer >= b->topo->nchips) {
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "'%s': send from rank %d to rank %d: the platform has chips 0 to %d", a->label,
                  a->chip, a->peer, b->topo->nchips - 1);
      g_free(j);
      return FALSE;
    }
    if (a->chip != a->peer)
      j->nparts = 2;
    break;
  default:
    break;
  }
  j->left = j->nparts;
  j->parts = g_new(part, j->nparts);
  for (int i = 0; i < j->nparts; i++)
    j->parts[i] = (part){j, i};
  if (b->running && !b->actors)
    d_launch(b, j);
  else if (b->running)
    spawn(b, j);
  else
    g_ptr_array_add(b->queue, j);
  return TRUE;
}

static gboolean sgb_run(ts_backend *bk, ts_replay *r, GError **error)
{
  sgb *b = bk->ctx;
  b->r = r;
  b->tr = ts_replay_trace(r);
  if (b->fold && ts_replay_get_mode(r) != TS_REPLAY_COLLAPSED)
    b->fold = FALSE; /* every rank replayed: nothing to fold */
  b->images = (b->collapse || b->fold) && ts_replay_get_mode(r) == TS_REPLAY_COLLAPSED;
  b->report_fold = b->fold ? b->fold_link : NULL;
  ts_platform_set_fold(b->plat, b->report_fold);
  if (ts_replay_get_mode(r) == TS_REPLAY_COLLAPSED && !b->images) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                "the simgrid backend replays one rank per class only with its symmetry "
                "collapse on (driver mode, synchronous steps): replay every rank");
    return FALSE;
  }
  g_clear_pointer(&b->reallink, g_free);
  if (b->images && !b->fold) {
    const ts_trace *tr = b->tr;
    b->reallink = g_new0(guint8, MAX(ts_platform_nlinks(b->plat), 1));
    g_autoptr(GArray) route = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
    for (int rank = 0; rank < tr->nranks && rank < b->topo->nchips; rank++) {
      gboolean rep = TRUE;
      for (int a = 0; a < tr->naxes && rep; a++)
        rep = !(tr->axes[a].symmetric && ts_trace_axis_coord(tr, rank, a) != 0);
      if (!rep)
        continue;
      for (guint gi = 0; gi < tr->groups->len; gi++) {
        const ts_group *g = g_ptr_array_index(tr->groups, gi);
        int base = ts_trace_group_base(tr, g, rank, NULL), n = ts_trace_group_size(g);
        for (int m = 0; base >= 0 && n > 1 && m < n; m++) {
          int c0 = ts_trace_group_rank(tr, g, base, m);
          int c1 = ts_trace_group_rank(tr, g, base, (m + 1) % n);
          for (int way = 0; way < 2 && c0 >= 0 && c1 >= 0; way++) {
            g_array_set_size(route, 0);
            ts_platform_route(b->plat, way ? c1 : c0, way ? c0 : c1, route);
            for (guint q = 0; q < route->len; q++)
              b->reallink[g_array_index(route, int, q)] = 1;
          }
        }
      }
    }
  }
  b->running = TRUE;
  b->live_gen++;
  b->live_head = b->live_tail = NULL;
  b->t0 = ts_sg_clock();
  b->makespan = 0;
  acc_reset(b);

  if (b->actors) {
    for (guint i = 0; i < b->queue->len; i++)
      spawn(b, g_ptr_array_index(b->queue, i));
    g_ptr_array_set_size(b->queue, 0);
  } else {
    ts_sg_at(b->t0, d_kickoff, b);
  }
  gboolean ok = ts_sg_run(error);
  b->running = FALSE;
  /* The next replay (after a broken symmetry, the full one) starts with idle hosts: these
   * launch clocks are engine times of this one, and the next one's first activities are
   * started, and their launches costed, before its run() begins. Kept, they delayed every
   * launch of the full replay (a 1F1B trace came out with twice its compute time). */
  if (b->host_clock != NULL)
    memset(b->host_clock, 0, sizeof(double) * (gsize)b->topo->nchips);
  b->has_run = TRUE;
  b->r = NULL;
  if (!ok)
    return FALSE;
  if (b->error != NULL) {
    g_propagate_error(error, b->error);
    b->error = NULL;
    return FALSE;
  }
  /* Our actors never block on each other, so SimGrid ends with actors left only if it found
   * a deadlock; it would return normally, so say it here. */
  if (ts_sg_actor_count() > 0 || b->live_jobs > 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                "SimGrid stopped with %d activities unfinished (deadlock in the simulator)",
                b->actors ? ts_sg_actor_count() : b->live_jobs);
    return FALSE;
  }
  return TRUE;
}

static void sgb_free(ts_backend *bk)
{
  sgb *b = bk->ctx;
  int n = ts_platform_nlinks(b->plat);
  for (int i = 0; i < n; i++) {
    if (b->acc[i].index != NULL)
      g_hash_table_unref(b->acc[i].index);
    if (b->acc[i].labels != NULL) {
      g_array_unref(b->acc[i].labels);
      g_array_unref(b->acc[i].busy);
    }
  }
  g_free(b->acc);
  /* The platform stays alive: SimGrid's routing zone calls back into it until exit. */
  for (guint i = 0; i < b->queue->len; i++)
    job_free(g_ptr_array_index(b->queue, i));
  g_ptr_array_unref(b->queue);
  g_hash_table_unref(b->plans);
  g_ptr_array_unref(b->label_names);
  for (int c = 0; c < b->topo->nchips; c++)
    g_ptr_array_unref(b->idle[c]); /* empty: workers exit when a run ends */
  g_free(b->idle);
  g_free(b->host_clock);
  g_free(b->lreal);
  if (b->flow_route != NULL)
    g_array_unref(b->flow_route);
  g_free(b->lclaim);
  g_free(b->limg);
  g_free(b->reallink);
  ts_platform_set_fold(b->plat, NULL); /* the platform outlives the backend */
  g_free(b->fold_link);
  g_free(b->indom);
  if (b->cpu != NULL) {
    for (int c = 0; c < b->topo->nchips; c++)
      g_ptr_array_unref(b->cpu[c].running);
    g_free(b->cpu);
  }
  g_free(b->config);
  if (b->error != NULL)
    g_error_free(b->error);
  g_free(b);
  g_free(bk);
}

/* ---- configuration probe ---- */

static int probe_route(void *data, int src, int dst, int *links, int max)
{
  (void)data;
  (void)dst;
  if (max < 1)
    return 0;
  links[0] = src; /* link 0 leaves host 0, link 1 leaves host 1 */
  return 1;
}

static void probe_actor(void *arg)
{
  sg_host_t *h = arg;
  double bytes = 1e6, s, e;
  ts_sg_flows(&h[0], &h[1], &bytes, 1, &s, &e);
  ts_sg_execute(1e6);
}

/* Some SimGrid settings pass every check when set and abort the process only when the models
 * are built (e.g. disabling selective update under lazy updates: an xbt_assert in
 * network_cm02.cpp). So user settings are first tried in a child process on a two-host
 * platform; the parent learns of an abort from the child's exit status and reports one line. */
static gboolean probe_cfg(const char *const *cfg, const char *user, GError **error)
{
  int fds[2];
  if (pipe(fds) != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "cannot check --cfg settings: pipe: %s",
                g_strerror(errno));
    return FALSE;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "cannot check --cfg settings: fork: %s",
                g_strerror(errno));
    return FALSE;
  }
  if (pid == 0) {
    close(fds[0]);
    /* The probe's own stderr goes where SimGrid's output goes: a crash in it printed
     * SimGrid's "Segmentation fault." above the one line the parent reports
     * (contexts/stack-size:-1). Its message reaches the parent through the pipe. */
    const char *log = g_getenv("TS_SIMGRID_LOG");
    int quiet = open(log != NULL && *log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (quiet >= 0) {
      dup2(quiet, 2);
      close(quiet);
    }
    GError *e = NULL;
    static sg_host_t h[2];
    gboolean ok = ts_sg_init(cfg, &e);
    ts_sg_zone *z = ok ? ts_sg_zone_new("probe", probe_route, NULL, 1, &e) : NULL;
    ok = z != NULL;
    if (ok) {
      h[0] = ts_sg_zone_add_host(z, "p0", HOST_SPEED);
      h[1] = ts_sg_zone_add_host(z, "p1", HOST_SPEED);
      ts_sg_zone_add_link(z, "l0", 1e9, 1e-6);
      ts_sg_zone_add_link(z, "l1", 1e9, 1e-6);
      ok = ts_sg_zone_seal(z, &e);
    }
    if (ok) {
      ts_sg_spawn("probe", h[0], probe_actor, h);
      ok = ts_sg_run(&e);
    }
    if (!ok && e != NULL && write(fds[1], e->message, strlen(e->message)) < 0)
      _exit(4);
    _exit(ok ? 0 : 3);
  }
  close(fds[1]);
  GString *msg = g_string_new(NULL);
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0)
      g_string_append_len(msg, buf, n);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  gboolean ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok && WIFEXITED(status) && WEXITSTATUS(status) == 3 && msg->len > 0)
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s", msg->str);
  else if (!ok)
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--cfg %s: SimGrid cannot run with these settings (it stopped the process; set "
                "TS_SIMGRID_LOG=FILE to read its message)",
                user);
  g_string_free(msg, TRUE);
  return ok;
}

/* trainsim's own settings ride in the same --cfg list as SimGrid's, under "trainsim/". */
static gboolean own_setting(const char *item, gboolean *async_steps, gboolean *per_step_flows,
                            gboolean *actors, GError **error)
{
  double size;
  if (g_str_has_prefix(item, "trainsim/max-memory:") &&
      ts_parse_size(item + strlen("trainsim/max-memory:"), &size))
    return TRUE; /* read by ts_simgrid_preflight, before the replay */
  if (strcmp(item, "trainsim/symmetry:collapse") == 0 ||
      strcmp(item, "trainsim/symmetry:full") == 0)
    return TRUE; /* read below */
  if (strcmp(item, "trainsim/simgrid-mode:driver") == 0 ||
      strcmp(item, "trainsim/simgrid-mode:actors") == 0) {
    *actors = g_str_has_suffix(item, ":actors");
    return TRUE;
  }
  if (strcmp(item, "trainsim/collective-steps:sync") == 0 ||
      strcmp(item, "trainsim/collective-steps:async") == 0) {
    *async_steps = g_str_has_suffix(item, ":async");
    return TRUE;
  }
  if (strcmp(item, "trainsim/collective-flows:merged") == 0 ||
      strcmp(item, "trainsim/collective-flows:per-step") == 0) {
    *per_step_flows = g_str_has_suffix(item, ":per-step");
    return TRUE;
  }
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "--cfg '%s': expected trainsim/collective-steps:sync (every member of a collective "
              "waits for the whole step, the default) or :async, or "
              "trainsim/collective-flows:merged (alike steps as one flow per peer, the default) "
              "or :per-step, or trainsim/simgrid-mode:driver (no actors, the default) or :actors, "
              "or trainsim/symmetry:collapse (the default) or :full, or trainsim/max-memory:SIZE",
              item);
  return FALSE;
}

/* "key:value" items, every key once with the value given last, in first-given order. */
static char *config_record(GPtrArray *items)
{
  GString *rec = g_string_new(NULL);
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; i < items->len; i++) {
    const char *item = g_ptr_array_index(items, i);
    const char *colon = strchr(item, ':');
    char *key = g_strndup(item, colon != NULL ? (gsize)(colon - item) : strlen(item));
    if (g_hash_table_contains(seen, key)) {
      g_free(key);
      continue;
    }
    const char *last = item;
    gsize kl = strlen(key);
    for (guint k = i + 1; k < items->len; k++) {
      const char *later = g_ptr_array_index(items, k);
      if (strncmp(later, key, kl) == 0 && later[kl] == ':')
        last = later;
    }
    g_hash_table_add(seen, key);
    g_string_append_printf(rec, "%s%s", rec->len > 0 ? " " : "", last);
  }
  g_hash_table_unref(seen);
  return g_string_free(rec, FALSE);
}

/* The process's one SimGrid platform: SimGrid can be initialised and given a platform only
 * once per process, but it can run again. Later backends on the same array (same dimensions,
 * bandwidths, latencies, port sharing) and the same settings reuse it, so a size sweep or
 * several replays need no new process. The platform keeps its own copy of the topology. */
static struct {
  ts_topo *topo;
  ts_platform *plat;
  ts_platform_opts opts;
  char *sg_cfg; /* the SimGrid items applied, joined */
} proc;

static gboolean same_array(const ts_topo *a, const ts_topo *b)
{
  /* The geometry through ts_array (issue 11: one geometry type); the links' kinds, bandwidths
   * and latencies from the dimensions. */
  ts_array aa = ts_topo_array(a), ab = ts_topo_array(b);
  if (aa.ndims != ab.ndims || ts_array_nchips(&aa) != ts_array_nchips(&ab))
    return FALSE;
  for (int d = 0; d < aa.ndims; d++)
    if (aa.size[d] != ab.size[d] || a->dims[d].shape != b->dims[d].shape ||
        a->dims[d].link_bw_Bps != b->dims[d].link_bw_Bps ||
        a->dims[d].latency_s != b->dims[d].latency_s || strcmp(a->dims[d].name, b->dims[d].name))
      return FALSE;
  /* Dead links and chips out of the job: the platform's routes detour around them. */
  const ts_faults *fa = &a->faults, *fb = &b->faults;
  return fa->ndead == fb->ndead && fa->nout == fb->nout &&
         memcmp(fa->dead, fb->dead, (size_t)fa->ndead * sizeof fa->dead[0]) == 0 &&
         memcmp(fa->out, fb->out, (size_t)fa->nout * sizeof fa->out[0]) == 0;
}

ts_backend *ts_backend_simgrid_new_opts(const ts_topo *t, const char *const *cfg,
                                        const ts_platform_opts *opts, GError **error)
{
  gboolean async_steps = FALSE, per_step_flows = FALSE, actors = FALSE;
  ts_platform_opts o = {{0}};
  if (opts != NULL)
    o = *opts;
  g_autoptr(GPtrArray) sg = g_ptr_array_new();   /* pinned, then the user's SimGrid items */
  g_autoptr(GPtrArray) user = g_ptr_array_new(); /* the user's SimGrid items */
  g_autoptr(GPtrArray) rec = g_ptr_array_new();  /* everything, for the record */
  for (int i = 0; ts_simgrid_pinned_cfg[i] != NULL; i++)
    g_ptr_array_add(sg, (char *)ts_simgrid_pinned_cfg[i]);
  g_ptr_array_extend(rec, sg, NULL, NULL);
  g_ptr_array_add(rec, "trainsim/collective-steps:sync");
  g_ptr_array_add(rec, "trainsim/collective-flows:merged");
  g_ptr_array_add(rec, "trainsim/simgrid-mode:driver");
  for (int i = 0; cfg != NULL && cfg[i] != NULL; i++) {
    if (g_str_has_prefix(cfg[i], "trainsim/")) {
      if (!own_setting(cfg[i], &async_steps, &per_step_flows, &actors, error))
        return NULL;
    } else {
      g_ptr_array_add(sg, (char *)cfg[i]);
      g_ptr_array_add(user, (char *)cfg[i]);
    }
    g_ptr_array_add(rec, (char *)cfg[i]);
  }
  g_ptr_array_add(sg, NULL);
  g_ptr_array_add(user, NULL);
  g_autofree char *sg_joined = g_strjoinv(" ", (char **)sg->pdata);

  if (ts_sg_initialised()) {
    if (proc.plat == NULL || !same_array(proc.topo, t) || memcmp(&proc.opts, &o, sizeof o) != 0 ||
        strcmp(proc.sg_cfg, sg_joined) != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "SimGrid already runs another platform or other settings in this process: it "
                  "takes one platform per process (replay each array in its own process)");
      return NULL;
    }
    if (ts_sg_actor_count() > 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "the simulator of this process stopped in a deadlock; replay in a new process");
      return NULL;
    }
  } else {
    ts_topo *copy = ts_topo_copy(t);
    g_autoptr(ts_platform) plat = ts_platform_new(copy, &o, error);
    gboolean ok = plat != NULL;
    if (ok && user->len > 1) {
      g_autofree char *joined = g_strjoinv(" ", (char **)user->pdata);
      ok = probe_cfg((const char *const *)sg->pdata, joined, error);
    }
    ok = ok && ts_sg_init((const char *const *)sg->pdata, error) &&
         ts_platform_load(plat, HOST_SPEED, error);
    if (!ok) {
      ts_topo_free(copy);
      return NULL;
    }
    /* Kept to the end of the process: SimGrid's routing calls back into the platform. */
    proc.topo = copy;
    proc.plat = g_steal_pointer(&plat);
    proc.opts = o;
    proc.sg_cfg = g_steal_pointer(&sg_joined);
  }

  sgb *b = g_new0(sgb, 1);
  b->topo = t;
  b->plat = proc.plat;
  b->config = config_record(rec);
  b->async_steps = async_steps;
  b->per_step_flows = per_step_flows;
  b->actors = actors;
  b->collapse_cfg = TRUE;
  for (int i = 0; cfg != NULL && cfg[i] != NULL; i++)
    if (g_str_has_prefix(cfg[i], "trainsim/symmetry:"))
      b->collapse_cfg = strcmp(cfg[i], "trainsim/symmetry:collapse") == 0;
  b->queue = g_ptr_array_new();
  b->plans = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, plan_index_free);
  b->acc = g_new0(link_acc, ts_platform_nlinks(b->plat) > 0 ? ts_platform_nlinks(b->plat) : 1);
  b->label_names = g_ptr_array_new_with_free_func(g_free);
  b->idle = g_new(GPtrArray *, t->nchips);
  for (int c = 0; c < t->nchips; c++)
    b->idle[c] = g_ptr_array_new();
  ts_backend *bk = g_new0(ts_backend, 1);
  bk->name = "simgrid";
  bk->ctx = b;
  bk->start = sgb_start;
  bk->run = sgb_run;
  bk->free = sgb_free;
  return bk;
}

ts_backend *ts_backend_simgrid_new(const ts_topo *t, const char *const *cfg, GError **error)
{
  return ts_backend_simgrid_new_opts(t, cfg, NULL, error);
}

const char *ts_backend_simgrid_config(const ts_backend *b)
{
  sgb *s = ctx_of(b);
  return s != NULL ? s->config : NULL;
}

gint64 ts_backend_simgrid_flows(const ts_backend *b)
{
  sgb *s = ctx_of(b);
  return s != NULL ? s->flows : 0;
}

gboolean ts_backend_simgrid_set_settle(ts_backend *bk, gboolean on)
{
  sgb *b = ctx_of(bk);
  if (b == NULL)
    return FALSE;
  gboolean was = !b->no_settle;
  b->no_settle = !on;
  return was;
}

gint64 ts_backend_simgrid_settled(const ts_backend *bk)
{
  sgb *b = ctx_of(bk);
  return b != NULL ? b->settled : 0;
}

const ts_platform *ts_backend_simgrid_platform(const ts_backend *b)
{
  sgb *s = ctx_of(b);
  return s != NULL ? s->plat : NULL;
}

gboolean ts_backend_simgrid_set_collapse(ts_backend *bk, gboolean on)
{
  sgb *b = ctx_of(bk);
  if (b == NULL)
    return FALSE;
  /* Exact only where images behave alike: synchronous steps (a step ends for every line when
   * the slowest ends), links that are images of each other (no shared ports, no dead links,
   * no twisted wrap-around), the driver (actor mode runs every member). */
  b->collapse = on && b->collapse_cfg && !b->actors && !b->async_steps &&
                !ts_degrade_needs_full(b->topo) && !ts_topo_twisted(b->topo) &&
                !ts_platform_shared_ports(b->plat);
  b->sym_broken = FALSE;
  b->fold = FALSE;
  return b->collapse;
}

/* Whether every distinct collective of tr on a group that a translation of the fold maps onto
 * itself decomposes invariantly (f_plan_ok), so that a replay is not run to its gradient
 * all-reduce only to break there: a data-parallel ring snaked over a 4 x 2 grid of members
 * has no wrap-around edge along x, and the full replay's replicas then differ. */
static gboolean f_precheck(sgb *b, const ts_trace *tr)
{
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (int k = 0; k < tr->nprograms; k++) {
    const ts_program *pg = &tr->programs[k];
    for (int i = 0; i < pg->nops; i++) {
      const ts_op op_ = ts_program_op(pg, i), *op = &op_;
      if (op->kind != TS_OP_COLL || op->group < 0 || (guint)op->group >= tr->groups->len)
        continue;
      const ts_group *g = g_ptr_array_index(tr->groups, op->group);
      int n = ts_trace_group_size(g), base = ts_trace_group_base(tr, g, 0, NULL);
      if (g->members != NULL || n < 2 || base < 0)
        continue;
      char key[96];
      g_snprintf(key, sizeof key, "%d|%d|%d|%.17g", op->group, op->coll, op->algo, op->bytes);
      if (g_hash_table_contains(seen, key))
        continue;
      g_hash_table_add(seen, g_strdup(key));
      ts_activity a = {.kind = TS_OP_COLL, .op = op, .chip = base, .group = g, .label = ""};
      GError *e = NULL;
      plan_index *pi = plan_for(b, &a, &e);
      if (pi == NULL) {
        g_clear_error(&e);
        return FALSE; /* the replay would fail the same way: no folding */
      }
      int *chips = g_new(int, n);
      for (int m = 0; m < n; m++)
        chips[m] = ts_trace_group_chip(b->topo, g, base, m);
      gboolean ok = f_plan_ok(b, pi, chips);
      g_free(chips);
      pi->users--;
      if (!ok)
        return FALSE;
    }
  }
  return TRUE;
}

gboolean ts_backend_simgrid_set_fold(ts_backend *bk, const ts_trace *tr)
{
  sgb *b = ctx_of(bk);
  if (b == NULL || !ts_backend_simgrid_set_collapse(bk, TRUE) || tr == NULL ||
      tr->nranks != b->topo->nchips)
    return FALSE;
  const ts_topo *t = b->topo;
  ts_array arr = ts_topo_array(t);
  int nfold = 0, order = 1, axis_of[TS_MAX_DIMS], below[TS_MAX_DIMS];
  guint used = 0;
  for (int a = 0; a < tr->naxes; a++) {
    const ts_group_shape *sh = &tr->axes[a].shape;
    if (!tr->axes[a].symmetric || tr->axes[a].size < 2 || sh->npieces < 1)
      continue;
    /* Every piece of the axis must wrap a whole ring: moving along it is a translation. */
    gboolean ok = TRUE;
    guint dims = 0;
    for (int k = 0; k < sh->npieces && ok; k++) {
      const ts_piece *pc = &sh->p[k];
      ok = pc->dim >= 0 && pc->dim < arr.ndims && t->dims[pc->dim].shape == TS_SHAPE_RING &&
           (pc->size == 1 ||
            (pc->size * pc->stride == arr.size[pc->dim] && !((used | dims) & (1u << pc->dim))));
      if (pc->size > 1)
        dims |= 1u << pc->dim;
    }
    if (!ok || nfold + sh->npieces > TS_MAX_DIMS)
      continue;
    int radix = 1;
    for (int k = 0; k < sh->npieces; k++) {
      if (sh->p[k].size > 1) {
        b->fold_dim[nfold] = sh->p[k].dim;
        b->fold_stride[nfold] = sh->p[k].stride;
        b->fold_n[nfold] = sh->p[k].size;
        axis_of[nfold] = a;
        below[nfold] = radix;
        order *= sh->p[k].size;
        nfold++;
      }
      radix *= sh->p[k].size;
    }
    used |= dims;
  }
  b->nfold = nfold;
  b->fold_order = order;
  if (order < 2)
    return FALSE;
  /* The planner's layout: a chip moved one place along a folded piece is the rank whose
   * coordinates are the same but that piece's, one more (modulo its size). */
  const int nc = ts_array_nchips(&arr);
  int gen = 1;
  for (int i = 0; i < nfold; i++) {
    for (int r = 0; r < nc; r++) {
      int moved = f_translate(b, r, gen);
      for (int a = 0; a < tr->naxes; a++) {
        int c0 = ts_trace_axis_coord(tr, r, a), c1 = ts_trace_axis_coord(tr, moved, a);
        if (a == axis_of[i]) {
          int pc = (c0 / below[i]) % b->fold_n[i];
          c0 += (((pc + 1) % b->fold_n[i]) - pc) * below[i];
        }
        if (c0 != c1)
          return FALSE;
      }
    }
    gen *= b->fold_n[i];
  }
  int nl = ts_platform_nlinks(b->plat);
  g_free(b->fold_link);
  g_free(b->indom);
  b->fold_link = g_new(int, MAX(nl, 1));
  b->indom = g_new(guint8, nc);
  for (int c = 0; c < nc; c++) {
    int x[TS_MAX_DIMS];
    ts_array_coords(&arr, c, x);
    gboolean in = TRUE;
    for (int i = 0; i < nfold; i++)
      in = in && x[b->fold_dim[i]] < b->fold_stride[i];
    b->indom[c] = in;
  }
  for (int l = 0; l < nl; l++) {
    ts_link_id id = *ts_platform_link_id(b->plat, l);
    int x[TS_MAX_DIMS];
    ts_array_coords(&arr, id.chip, x);
    for (int i = 0; i < nfold; i++)
      x[b->fold_dim[i]] %= b->fold_stride[i];
    id.chip = ts_array_chip(&arr, x);
    b->fold_link[l] = ts_platform_link_index(b->plat, &id);
    if (b->fold_link[l] < 0)
      return FALSE;
  }
  b->fold_gen++;
  if (!f_precheck(b, tr))
    return FALSE;
  b->fold = TRUE;
  b->collapse = FALSE; /* no collapsed steps or claims: folding alone */
  return TRUE;
}

gboolean ts_backend_simgrid_images_cross(const ts_backend *bk, const ts_trace *tr)
{
  const sgb *b = ctx_of(bk);
  if (b == NULL || tr == NULL || tr->nranks != b->topo->nchips)
    return FALSE;
  int nl = MAX(ts_platform_nlinks(b->plat), 1);
  g_autofree guint8 *mine = g_new0(guint8, nl);
  g_autoptr(GArray) route = g_array_sized_new(FALSE, FALSE, sizeof(int), 16);
  gboolean cross = FALSE;
  for (guint gi = 0; gi < tr->groups->len && !cross; gi++) {
    const ts_group *g = g_ptr_array_index(tr->groups, gi);
    int n = ts_trace_group_size(g), base = ts_trace_group_base(tr, g, 0, NULL);
    if (g->members != NULL || n < 2 || base < 0)
      continue;
    int axes[TS_MAX_AXES], nax = 0, count = 1;
    for (int a = 0; a < tr->naxes; a++) {
      gboolean in_group = FALSE;
      for (int k = 0; k < g->naxes; k++)
        in_group = in_group || g->axes[k] == a;
      if (tr->axes[a].symmetric && !in_group && tr->axes[a].size > 1) {
        axes[nax++] = a;
        count *= tr->axes[a].size;
      }
    }
    if (count <= 1)
      continue;
    memset(mine, 0, (gsize)nl);
    for (int c = 0; c < count && !cross; c++)
      for (int m = 0; m < n && !cross; m++) {
        int ends[2] = {ts_trace_group_rank(tr, g, base, m),
                       ts_trace_group_rank(tr, g, base, (m + 1) % n)};
        for (int e = 0, rest = c; e < 2; e++, rest = c)
          for (int k = 0; k < nax && ends[e] >= 0; k++) {
            int size = tr->axes[axes[k]].size, off = rest % size;
            rest /= size;
            if (off > 0)
              ends[e] = ts_trace_axis_neighbor(tr, ends[e], axes[k], off);
          }
        if (ends[0] < 0 || ends[1] < 0)
          continue;
        g_array_set_size(route, 0);
        ts_platform_route(b->plat, ends[0], ends[1], route);
        for (guint q = 0; q < route->len; q++) {
          int l = g_array_index(route, int, q);
          if (c == 0)
            mine[l] = 1;
          else if (mine[l])
            cross = TRUE;
        }
      }
  }
  return cross;
}

gboolean ts_backend_simgrid_symmetry_broken(const ts_backend *bk)
{
  sgb *b = ctx_of(bk);
  return b != NULL && b->sym_broken;
}

/* ---- link report ---- */

void ts_link_load_free(ts_link_load *l)
{
  if (l == NULL)
    return;
  g_free(l->top_label);
  g_free(l);
}

static int load_cmp(gconstpointer a, gconstpointer b)
{
  const ts_link_load *x = *(ts_link_load *const *)a, *y = *(ts_link_load *const *)b;
  if (x->bytes != y->bytes)
    return x->bytes > y->bytes ? -1 : 1;
  return x->link - y->link;
}

gboolean ts_backend_simgrid_link_report(const ts_backend *bk, GPtrArray **rows, double *makespan_s,
                                        GError **error)
{
  sgb *b = ctx_of(bk);
  if (b == NULL || !b->has_run) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "no simgrid replay has run: no link report");
    return FALSE;
  }
  const ts_topo *t = b->topo;
  int n = ts_platform_nlinks(b->plat);
  GPtrArray *out = g_ptr_array_new_full((guint)n, (GDestroyNotify)ts_link_load_free);
  for (int i = 0; i < n; i++) {
    /* Folded: a link carries what its canonical translate does (the flows of each orbit). */
    link_acc *a = &b->acc[b->report_fold != NULL ? b->report_fold[i] : i];
    const ts_link_id *id = ts_platform_link_id(b->plat, i);
    ts_link_load *l = g_new0(ts_link_load, 1);
    l->link = i;
    l->name = ts_platform_link_name(b->plat, i);
    l->chip = id->chip;
    l->dim = t->dims[id->dim].name;
    l->direction = ts_platform_link_direction(b->plat, i);
    l->bandwidth_Bps = ts_platform_link_bandwidth(b->plat, i);
    l->bytes = a->bytes;
    int top = -1;
    if (a->busy != NULL) {
      ival_merge(a->busy);
      a->compacted = a->busy->len;
      l->busy_s = a->settled_s;
      for (guint k = 0; k < a->busy->len; k++)
        l->busy_s += g_array_index(a->busy, ival, k).e - g_array_index(a->busy, ival, k).s;
      for (guint k = 0; k < a->labels->len; k++) {
        const label_bytes *lb = &g_array_index(a->labels, label_bytes, k);
        /* Ties go to the lower label index, so reports are deterministic. */
        if (top < 0 || lb->bytes > l->top_label_bytes ||
            (lb->bytes == l->top_label_bytes && lb->label < top)) {
          top = lb->label;
          l->top_label_bytes = lb->bytes;
        }
      }
    }
    l->top_label = g_strdup(top >= 0 && (guint)top < b->label_names->len &&
                                    g_ptr_array_index(b->label_names, top) != NULL
                                ? (char *)g_ptr_array_index(b->label_names, top)
                                : "");
    if (b->makespan > 0) {
      l->busy_fraction = l->busy_s / b->makespan;
      l->utilization = l->bytes / (l->bandwidth_Bps * b->makespan);
    }
    g_ptr_array_add(out, l);
  }
  g_ptr_array_sort(out, load_cmp);
  *rows = out;
  if (makespan_s != NULL)
    *makespan_s = b->makespan;
  return TRUE;
}

static void csv_field(GString *s, const char *text)
{
  /* RFC 4180: quote fields holding separators or quotes, doubling the quotes. */
  if (strpbrk(text, ",\"\n") == NULL) {
    g_string_append(s, text);
    return;
  }
  g_string_append_c(s, '"');
  for (const char *c = text; *c != '\0'; c++) {
    if (*c == '"')
      g_string_append_c(s, '"');
    g_string_append_c(s, *c);
  }
  g_string_append_c(s, '"');
}

char *ts_link_report_csv(const GPtrArray *rows)
{
  GString *s = g_string_new("link,chip,dim,direction,bandwidth_Bps,bytes,busy_s,busy_fraction,"
                            "utilization,top_label,top_label_bytes\n");
  for (guint i = 0; i < rows->len; i++) {
    const ts_link_load *l = g_ptr_array_index(rows, i);
    csv_field(s, l->name);
    g_string_append_printf(s, ",%d,", l->chip);
    csv_field(s, l->dim);
    g_string_append_printf(s, ",%s,", l->direction);
    ts_append_g(s, 17, l->bandwidth_Bps);
    g_string_append_c(s, ',');
    ts_append_g(s, 17, l->bytes);
    g_string_append_c(s, ',');
    ts_append_g(s, 9, l->busy_s);
    g_string_append_c(s, ',');
    ts_append_g(s, 6, l->busy_fraction);
    g_string_append_c(s, ',');
    ts_append_g(s, 6, l->utilization);
    g_string_append_c(s, ',');
    csv_field(s, l->top_label);
    g_string_append_c(s, ',');
    ts_append_g(s, 17, l->top_label_bytes);
    g_string_append_c(s, '\n');
  }
  return g_string_free(s, FALSE);
}

gboolean ts_link_report_write_csv(const GPtrArray *rows, const char *path, GError **error)
{
  g_autofree char *csv = ts_link_report_csv(rows);
  return ts_write_file_atomic(path, csv, strlen(csv), error);
}

char *ts_link_report_summary(const GPtrArray *rows, int top)
{
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "%-22s %12s %10s %10s  %s\n", "most loaded links", "bytes", "busy",
                         "busy/step", "top collective");
  for (guint i = 0; i < rows->len && (int)i < top; i++) {
    const ts_link_load *l = g_ptr_array_index(rows, i);
    if (l->bytes <= 0)
      break;
    char b1[32], b2[32];
    GString *frac = g_string_new(NULL);
    ts_append_g(frac, 3, 100.0 * l->busy_fraction);
    g_string_append_printf(s, "%-22s %12s %10s %9s%%  %s\n", l->name,
                           ts_fmt_bytes(b1, sizeof b1, l->bytes),
                           ts_fmt_time(b2, sizeof b2, l->busy_s), frac->str,
                           l->top_label[0] != '\0' ? l->top_label : "-");
    g_string_free(frac, TRUE);
  }
  return g_string_free(s, FALSE);
}

gboolean ts_backend_simgrid_report_links(const ts_backend *b, const char *csv_path, int top,
                                         char **summary, GError **error)
{
  if (summary != NULL)
    *summary = NULL;
  if (!ts_backend_is_simgrid(b))
    return TRUE;
  GPtrArray *rows = NULL;
  if (!ts_backend_simgrid_link_report(b, &rows, NULL, error))
    return FALSE;
  gboolean ok = csv_path == NULL || ts_link_report_write_csv(rows, csv_path, error);
  if (ok && summary != NULL)
    *summary = ts_link_report_summary(rows, top);
  g_ptr_array_unref(rows);
  return ok;
}

/* ---- cost estimate before a run ---- */

/* Resident bytes per item, measured on this build (bench/RESULTS.md, "SimGrid at scale"):
 * process and libraries; a host with its CPU model; a one-direction link with its max-min
 * constraint; an op of one rank in the replay engine (its state and its share of the trace);
 * a flow in flight (comm, network action, max-min variable, route, records); a transfer of
 * a cached collective decomposition. */
#define EST_BASE_BYTES 40e6
#define EST_HOST_BYTES 1500.0
#define EST_LINK_BYTES 800.0
/* An op of a replayed rank (the engine's state for it) and an op of the trace (its program,
 * shared by the ranks that run it). Fitted on GPT-3 175B tp=8,pp=16,dp=8 on the pod
 * (2026-12-07, bench/RESULTS.md "Fifth session"): peak RSS 39.8 / 61.4 MiB folded (16 ranks
 * replayed, 26.5 k / 314 k trace ops) and 85 / 568 MiB every rank (1.69 M / 20.1 M ops replayed)
 * at -b 128 / -b 1536 give 26.7 B a replayed op and 52 B a trace op over a 40 MB base. 48 B a
 * replayed op (the first session's, before the per-flow records were settled) put the
 * every-rank estimate 73-75 % over the measured peaks. */
#define EST_OP_BYTES 28.0
#define EST_TRACE_OP_BYTES 52.0
#define EST_FLOW_BYTES 2500.0
/* Every rank's share of a replay of one rank per class (the engine's per-rank state, the
 * images' flows and ghosts, the hosts' routes): the Llama-3-405B 16,384-GPU step (16 ranks
 * replayed, 325 MiB peak, 2026-12-07) leaves 12.8 kB a rank over the other terms; ResNet-50 on
 * 65,536 and 16,384 chips 6.3 and 4-7 kB; GPT-3 175B on the 1,024-chip pod ~0. The largest,
 * so the estimate errs high (+30 % on the GPT-3 pod fold). */
#define EST_RANK_BYTES 13e3
/* A transfer of the largest decomposition: 16 B held and the arrays doubling while built gave
 * 24 B, but ResNet-50 data parallelism on 128x128 and 256x256 tori (2026-12-02, the merged
 * main: 1.30 GB and 10.0 GB peak, 16.7 M and 134 M transfers) needs 49 and 59 B a transfer
 * once the other terms are counted (the flows' records of each step live while it runs); 60 B
 * keeps the estimate above both (+14% and +1%; it was 32% and 47% low). Those runs replay one
 * rank per class, whose estimate (2026-12-07) no longer counts every rank's ops and flows but
 * 13 kB a rank: 63 B keeps it above both again (1.35 GiB against 1.21, 9.46 against 9.31). */
#define EST_PLAN_XFER_BYTES 63.0
#define EST_PLAN_OFFSET_BYTES 8.0 /* an offset per step and member */

static double available_memory(void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/meminfo", &text, NULL, NULL))
    return 0;
  const char *p = strstr(text, "MemAvailable:");
  return p != NULL ? g_ascii_strtod(p + strlen("MemAvailable:"), NULL) * 1024.0 : 0;
}

/* Transfers per member per step of a collective (merged: a pair exchanges one message). */
static int peers_per_member(const ts_op *op, int n)
{
  if (op->coll == TS_COLL_ALLTOALL || op->algo == TS_ALGO_DIRECT)
    return n - 1;
  return MIN(n - 1, 2);
}

void ts_simgrid_estimate_cost(const ts_trace *tr, const ts_topo *t, const char *const *cfg,
                              ts_simgrid_estimate *out)
{
  memset(out, 0, sizeof *out);
  out->hosts = t->nchips;
  gint64 links = 0;
  for (int d = 0; d < t->ndims; d++)
    links += (gint64)t->nchips * 2;
  out->links = (int)MIN(links, G_MAXINT);
  /* Ops: every rank runs its program; the trace holds each program once. */
  gint64 *per_program = g_new0(gint64, tr->nprograms > 0 ? tr->nprograms : 1);
  gint64 trace_ops = 0;
  int peers = 1;
  double plan_bytes = 0;
  for (int p = 0; p < tr->nprograms; p++) {
    const ts_program *pr = &tr->programs[p];
    per_program[p] = pr->nops;
    trace_ops += pr->nops;
    for (int i = 0; i < pr->nops; i++) {
      const ts_op ob = ts_program_op(pr, i), *op = &ob;
      if (op->kind != TS_OP_COLL || op->group < 0 || (guint)op->group >= tr->groups->len)
        continue;
      const ts_group *g = g_ptr_array_index(tr->groups, op->group);
      int n = ts_trace_group_size(g);
      int k = peers_per_member(op, n);
      peers = MAX(peers, k);
      /* A decomposition: 2(size - 1) steps of n transfers per piece (rings, tori). */
      double steps = 0;
      for (int q = 0; q < g->shape.npieces; q++)
        steps += 2.0 * (g->shape.p[q].size - 1);
      if (g->shape.npieces == 0)
        steps = 2.0 * (n - 1);
      /* Offsets per step and member, then the transfers themselves. */
      plan_bytes = MAX(plan_bytes, steps * (n + 1) * EST_PLAN_OFFSET_BYTES +
                                       steps * n * k * EST_PLAN_XFER_BYTES);
    }
  }
  /* One rank per class (TS_REPLAY_COLLAPSED: every symmetric axis's coordinate 0), as the
   * rank collapse and the fold replay; the other ranks' flows are images (claimed, or real
   * flows of the fold), about 1/classes of every rank's. */
  int nsym = 0;
  for (int a = 0; a < tr->naxes; a++)
    nsym += tr->axes[a].symmetric && tr->axes[a].size > 1;
  for (int r = 0; r < tr->nranks; r++) {
    int p = ts_trace_program_of(tr, r);
    if (p < 0 || p >= tr->nprograms)
      continue;
    out->ops += per_program[p];
    gboolean rep = TRUE;
    for (int a = 0; a < tr->naxes && rep && nsym > 0; a++)
      rep = !(tr->axes[a].symmetric && tr->axes[a].size > 1) || ts_trace_axis_coord(tr, r, a) == 0;
    if (rep) {
      out->ops_collapsed += per_program[p];
      out->ranks_collapsed++;
    }
  }
  g_free(per_program);
  out->flows_at_once = (gint64)tr->nranks * (peers + 1);
  /* The largest decomposition is held whole while it runs, whatever the cache's limit. */
  double plan = MAX(plan_bytes, 0.0);
  double fixed = EST_BASE_BYTES + out->hosts * EST_HOST_BYTES + out->links * EST_LINK_BYTES +
                 trace_ops * EST_TRACE_OP_BYTES + plan;
  out->memory_bytes = fixed + out->ops * EST_OP_BYTES + out->flows_at_once * EST_FLOW_BYTES;
  out->memory_collapsed_bytes =
      fixed + out->ops_collapsed * EST_OP_BYTES + (double)tr->nranks * EST_RANK_BYTES;
  /* What the replay is expected to run: one rank per class unless the configuration or the
   * array rules it out here (the child checks memory_bytes again before any every-rank
   * replay: ts_simgrid_check_every_rank). */
  gboolean collapse = out->ranks_collapsed > 0 && out->ranks_collapsed < tr->nranks &&
                      !ts_degrade_needs_full(t) && !ts_topo_twisted(t);
  for (int i = 0; cfg != NULL && cfg[i] != NULL; i++)
    if (strcmp(cfg[i], "trainsim/symmetry:full") == 0 ||
        strcmp(cfg[i], "trainsim/simgrid-mode:actors") == 0)
      collapse = FALSE;
  out->expected_bytes = collapse ? out->memory_collapsed_bytes : out->memory_bytes;
  out->available_bytes = available_memory();
  for (int i = 0; cfg != NULL && cfg[i] != NULL; i++)
    if (g_str_has_prefix(cfg[i], "trainsim/max-memory:") &&
        !ts_parse_size(cfg[i] + strlen("trainsim/max-memory:"), &out->max_memory_bytes))
      out->max_memory_bytes = -1;
}

/* Refuses when need (every rank: all ops, else one rank per class) is over the limit. */
static gboolean check_memory(const ts_simgrid_estimate *e, gboolean every_rank, GError **error)
{
  if (e->max_memory_bytes < 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--cfg trainsim/max-memory: expected a size in bytes, e.g. 8GiB");
    return FALSE;
  }
  double need = every_rank ? e->memory_bytes : e->expected_bytes;
  gint64 ops = every_rank || e->expected_bytes == e->memory_bytes ? e->ops : e->ops_collapsed;
  double limit = e->max_memory_bytes > 0 ? e->max_memory_bytes : e->available_bytes;
  if (limit <= 0 || need <= limit)
    return TRUE;
  char nb[32], have[32];
  g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
              "the simgrid replay would need about %s (%d hosts, %d links, %" G_GINT64_FORMAT
              " ops%s, up to %" G_GINT64_FORMAT " flows at once), over %s %s; set --cfg "
              "trainsim/max-memory:SIZE above the estimate to run it anyway",
              ts_fmt_bytes(nb, sizeof nb, need), e->hosts, e->links, ops,
              ops == e->ops ? "" : " of one rank per class", e->flows_at_once,
              e->max_memory_bytes > 0 ? "--cfg trainsim/max-memory" : "the available",
              ts_fmt_bytes(have, sizeof have, limit));
  return FALSE;
}

gboolean ts_simgrid_preflight(const ts_trace *tr, const ts_topo *t, const char *const *cfg,
                              GError **error)
{
  ts_simgrid_estimate e;
  ts_simgrid_estimate_cost(tr, t, cfg, &e);
  return check_memory(&e, FALSE, error);
}

gboolean ts_simgrid_check_every_rank(const ts_trace *tr, const ts_topo *t, const char *const *cfg,
                                     GError **error)
{
  ts_simgrid_estimate e;
  ts_simgrid_estimate_cost(tr, t, cfg, &e);
  return check_memory(&e, TRUE, error);
}
