/* ts_coll_internal: types shared by the files of the collectives module (not a public contract;
 * tests include it to check that the time model and the transfers come from one structure). */
#ifndef TS_COLL_INTERNAL_H
#define TS_COLL_INTERNAL_H

#include "ts_coll.h"

G_BEGIN_DECLS

/* What routing and the analytic model need of a topology, copied so that a plan does not
 * borrow the topology it was built for: the array's geometry (a ts_array, the one geometry type;
 * its names and label are not kept) and, per dimension, its links. */
typedef struct {
  ts_array arr;
  int nchips;              /* ts_array_nchips(&arr) */
  int stride[TS_MAX_DIMS]; /* chip-id stride of each dimension (dimension 0 fastest) */
  ts_shape shape[TS_MAX_DIMS];
  double bw_Bps[TS_MAX_DIMS];
  double lat_s[TS_MAX_DIMS];
  int port_share[TS_MAX_DIMS]; /* switch dims: consecutive chips of dim 0 per port (NIC), >= 1 */
  gboolean in_switch[TS_MAX_DIMS]; /* in-switch reduction (NVLS) */
  double isr_eff[TS_MAX_DIMS];     /* fraction of link bandwidth NVLS reaches */
  double ll_frac[TS_MAX_DIMS], ll128_frac[TS_MAX_DIMS]; /* LL, LL128 bandwidth / Simple's */
  double nccl_base_s[TS_MAX_DIMS][3];      /* fixed cost per protocol, 0: NCCL's baseLat */
  double nccl_step_s[TS_MAX_DIMS][2];      /* LL, LL128 per-step latency, 0: NCCL's ratio */
  double nccl_local_Bps[TS_MAX_DIMS];      /* local work rate, 0: none */
  double nccl_ll_channel_s[TS_MAX_DIMS];   /* LL's cost per channel, 0: none */
  int nccl_channels[TS_MAX_DIMS];          /* ring channels in one node, 0: no piece padding */
  double nccl_node_hop_s[TS_MAX_DIMS];     /* Simple's node hop in groups spanning it, 0: none */
  double nccl_tree_Bps[TS_MAX_DIMS];       /* cap on the tree's bus bandwidth, 0: none */
  double nccl_tree_chunk_s[TS_MAX_DIMS];   /* Simple tree's cost per chunk, 0: none */
  double nccl_model_Bps[TS_MAX_DIMS];      /* NCCL's model: Simple's bus bandwidth, 0: reached */
  int nccl_model_ch[TS_MAX_DIMS];          /* NCCL's model: search channels, 0: costs choose */
  double nccl_net_overhead_s[TS_MAX_DIMS]; /* NCCL's network post overhead, 0: 1 us */
  /* Twisted torus (ts_dim.twist): crossing ring d's wrap-around in the + direction also moves
   * twist[d][e] places along dimension e. twisted: some entry is non-zero; routes are then the
   * breadth-first shortest paths of ts_route, not dimension order. */
  int twist[TS_MAX_DIMS][TS_MAX_DIMS];
  gboolean twisted;
  /* Twisted only: bit d set when every route between two chips of a line along dimension d
   * stays on that line (its links are that line's own), so one line represents all its
   * translates in the analytic time (see time_mask in ts_coll_algos.c). */
  guint line_local;
} ts_net;

/* Whether the group's members all sit on dimension 0 (one node of a GPU cluster: its other
 * pieces have one member). */
gboolean ts_group_in_one_node(const ts_group_shape *g);
/* Whether the group spans a network dimension naming NCCL's search channels
 * (nccl_model_channels): NCCL's tuning model then chooses algorithm and protocol. */
gboolean nccl_model_spans(const ts_net *nw, const ts_group_shape *g);

/* Chip whose port into switch dim d carries chip's traffic (the NIC it shares). */
int ts_net_port_chip(const ts_net *nw, int d, int chip);

void ts_net_init(ts_net *nw, const ts_topo *t);

/* The net of an array whose dimension d has the links of dims[d] (dims[d].size is not read: the
 * array gives the sizes). ts_net_init is this with a topology's array and dimensions. */
void ts_net_init_array(ts_net *nw, const ts_array *a, const ts_dim *dims);

/* The line_local bits of a twisted net (computed from its routes; 0 for a plain one). */
guint ts_net_line_local(const ts_net *nw);

/* One flow of a step in the analytic model. Chips are those of the group placed at chip 0:
 * costs do not depend on the placement (ring dims are translation invariant, and a group's
 * member 0 has the smallest coordinate, so mesh routes keep their directions and lengths). */
typedef struct {
  int src, dst;
  double bytes;
  /* In-switch reduction and multicast (NVLS): k > 1 flows that the switch merges into one
   * (down_share: k sources reduced into one delivery) or that one upload feeds (up_share: one
   * upload multicast to k ports) load that port with bytes / k each. 0 or 1: ordinary. */
  int up_share, down_share;
} ts_flow;

/* Scratch space of the step evaluator; reused across steps. Caller frees. */
typedef struct ts_eval ts_eval;
ts_eval *ts_eval_new(const ts_net *nw);
void ts_eval_free(ts_eval *ev);

/* Time of one step whose flows run concurrently: the max over flows of (route latency + the
 * largest load on any link of its route / that link's bandwidth). Loads are summed over all
 * flows of the step, so shared links (a switch port with k flows, a link crossed by several
 * routes) slow every flow that uses them. */
double ts_eval_step(ts_eval *ev, const ts_flow *f, int nf);

/* Between these (nested calls count), ts_eval_step remembers each step's routes by the
 * routing parts of the net and its flows' ends and shares, and routes a step seen before by
 * looking it up: only the loads, which depend on the bytes, are summed again, by the same
 * arithmetic, so every time is the same to the bit. ts_coll_memo_begin/_end call these. */
void ts_eval_route_cache_begin(void);
void ts_eval_route_cache_end(void);

/* The same time computed link by link from ts_route (slow; the reference the tests compare
 * ts_eval_step with). */
double ts_eval_step_reference(const ts_topo *t, const ts_flow *f, int nf);

/* A stage: consecutive steps of one kind of exchange. */
typedef enum {
  TS_ST_RING_RS,      /* ring reduce-scatter along lines (one-way or two counter-rotating rings) */
  TS_ST_RING_AG,      /* ring all-gather along lines */
  TS_ST_TREE_REDUCE,  /* binomial reduce to member 0, one step per tree level */
  TS_ST_TREE_BCAST,   /* binomial broadcast from member 0 */
  TS_ST_HD_RS,        /* recursive halving, distance 1, 2, 4, ... */
  TS_ST_HD_AG,        /* recursive doubling, distance n/2, ..., 1 */
  TS_ST_DIRECT_RS,    /* everyone sends every member its chunk, one step */
  TS_ST_DIRECT_AG,    /* everyone sends its chunk to every member, one step */
  TS_ST_DIRECT_A2A,   /* everyone sends every member its block, one step */
  TS_ST_DIRECT_BCAST, /* the root sends the buffer to every member, one step */
  TS_ST_PAIRWISE, /* all-to-all exchange along lines: step k swaps with the members k ahead and k
                     behind */
  TS_ST_CHAIN,    /* pipelined chain broadcast along lines (one or two chains) */
  TS_ST_MRING_RS, /* NCCL rings: nrings rings through all members, ring c with digit 0 rotated
                     by c, 1/nrings of every chunk each (reduce-scatter steps) */
  TS_ST_MRING_AG, /* the same rings, all-gather steps */
  TS_ST_PTREE,    /* NCCL tree all-reduce: pipelined reduce up and broadcast down of ntrees
                     trees (per channel a double binary tree over nodes, chains in nodes) */
  TS_ST_NVLS_RS,  /* in-switch reduce-scatter: one step, everyone to everyone, reduced in the
                     switch (the down port carries one chunk) */
  TS_ST_NVLS_AG,  /* multicast all-gather: one upload per member, replicated by the switch */
  TS_ST_NVLS_AR,  /* in-switch all-reduce: the two above pipelined over nseg segments */
  TS_ST_TROT_RS,  /* torus all-reduce, all dimensions at once: the buffer in ntp chunks, chunk c
                     reduce-scatters along pieces tp[c], tp[c+1], ... (rotated), ring steps of
                     every chunk in the same step */
  TS_ST_TROT_AG,  /* its all-gather: chunk c along the same pieces in reverse order */
} ts_stage_type;

typedef struct {
  ts_stage_type type;
  int first_step, nsteps;
  /* Line structure: lp is the piece the lines run along, or -1 for one line through all
   * members in snake order. Lines are every combination of the digits of the pieces in
   * free_mask; the digits of other pieces (and of lp) are 0 at a line's base member. */
  int lp;
  guint free_mask;
  gboolean bidir; /* rings: both directions at once (ts_coll_algos.c); chains: two, half the
                     data each */
  gboolean open;  /* bidirectional ring stage on an open line (no closing link): L-1 steps */
  gint64 nseg;    /* chain: pipeline segments */
} ts_stage;

#define TS_COLL_MAX_STAGES (2 * TS_MAX_PIECES + 2)

struct ts_coll_plan {
  ts_net net;
  ts_net tnet; /* what the analytic time uses: net with the protocol's bandwidth and latency */
  ts_coll_kind kind;
  ts_coll_algo algo;
  ts_group_shape g;
  int n;                    /* members */
  int radix[TS_MAX_PIECES]; /* weight of each piece's digit in the member index */
  gint64 count;             /* elements per member buffer */
  double elem_bytes;
  double bytes; /* S of the analytic model (count * elem_bytes, or ts_coll_time's bytes) */
  int *snake;   /* n entries: ring position -> member (boustrophedon order) */
  int *chip;    /* n entries: member -> chip of the group placed at chip 0 */
  int nstages, nsteps;
  ts_stage st[TS_COLL_MAX_STAGES];
  double *sent_bytes; /* per member, computed on first use (g_once) */
  /* NCCL algorithms: protocol, its fixed latency (added once), rings and trees. */
  ts_coll_proto proto;
  double base_lat_s;
  double nccl_model_s; /* NCCL's own tuning-model estimate of this (algorithm, protocol) */
  int nrings;
  int ntrees, local;     /* trees (2 per channel) and members per node (leading dim-0 pieces) */
  int *tparent;          /* ntrees * n: parent member in tree k, -1 at the root */
  int *theight, *tdepth; /* ntrees * n: height above the deepest leaf below, depth below root */
  int *tH;               /* ntrees: height of the root */
  /* Torus all-reduce over all dimensions at once: the pieces with >= 2 members, fastest first. */
  int ntp;
  int tp[TS_MAX_PIECES];
};

/* Builds the stage structure of a collective (no transfers are expanded). count is the element
 * count of the buffers; bytes is S for the analytic time. Returns NULL with TS_ERROR_INVALID
 * when the algorithm does not apply. */
ts_coll_plan *ts_coll_plan_build(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                                 const ts_group_shape *g, gint64 count, double elem_bytes,
                                 double bytes, GError **error);

/* The same with a protocol (TS_PROTO_AUTO: the fastest for NCCL algorithms). */
ts_coll_plan *ts_coll_plan_build_proto(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                                       ts_coll_proto proto, const ts_group_shape *g, gint64 count,
                                       double elem_bytes, double bytes, GError **error);

/* The same on a net already built (ts_net_init, ts_net_init_array). */
ts_coll_plan *ts_coll_plan_build_net(const ts_net *nw, ts_coll_kind kind, ts_coll_algo algo,
                                     ts_coll_proto proto, const ts_group_shape *g, gint64 count,
                                     double elem_bytes, double bytes, GError **error);

/* ts_coll_decompose on an array whose dimension d has the links of dims[d] (no topology: the
 * member-list collectives' ring). */
ts_coll_plan *ts_coll_decompose_array(const ts_array *a, const ts_dim *dims, ts_coll_kind kind,
                                      ts_coll_algo algo, const ts_group_shape *g, gint64 count,
                                      double elem_bytes, GError **error);

/* Appends the flows of step t of a stage (fractional sizes from S). full: every line; else
 * only the lines that share the physical line through chip 0 (the others are link-disjoint
 * translates with the same cost). */
void ts_coll_stage_flows(const ts_coll_plan *p, const ts_stage *st, int t, gboolean full,
                         GArray *flows);

/* Analytic time of a plan; full as in ts_coll_stage_flows (both give the same time). */
double ts_coll_plan_time_full(const ts_coll_plan *p, gboolean full);

/* Flows the analytic model routes to time the plan (for the work limit of ts_coll_time). */
double ts_coll_plan_eval_flows(const ts_coll_plan *p);

/* Largest number of flows ts_coll_time routes for one collective before refusing. */
#define TS_COLL_MAX_EVAL_FLOWS 1048576.0

G_END_DECLS

#endif
