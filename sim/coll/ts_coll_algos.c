/* ts_coll_algos: each collective algorithm as stages of point-to-point transfers, from which come
 * both the transfers (ts_coll_plan_step) and the flows of the analytic time (ts_coll_plan_time). */
#include "ts_coll_internal.h"
#include "ts_util.h"

#include <math.h>
#include <string.h>

/*
 * Vocabulary. A group's member index is a mixed-radix number whose digits are the pieces
 * (piece 0 fastest). A *line* is a set of members that differ in one digit only (the line
 * piece lp), in digit order; a stage runs the same exchange on every line at once, e.g. the
 * x phase of a 2D torus all-reduce runs one ring on every row. The line lp = -1 is the whole
 * group in snake (boustrophedon) order, so that consecutive members are array neighbours.
 *
 * Every stage has two readings that share the loops below: exact element ranges
 * (gen_*: the transfers run by the validator and sent by the simgrid backend) and flows of
 * fractional size S/n (flows_*: the analytic time). Tests check that the two agree step by step.
 */

/* ---- member arithmetic ---- */

static int psize(const ts_coll_plan *p, int j)
{
  return p->g.p[j].size;
}

static int digit(const ts_coll_plan *p, int m, int j)
{
  return (m / p->radix[j]) % psize(p, j);
}

static int imod(gint64 a, int n)
{
  return (int)(((a % n) + n) % n);
}

static guint all_pieces(const ts_coll_plan *p)
{
  return (1u << p->g.npieces) - 1u;
}

/* Part i of n of [lo, lo+len): floor(i*len/n) boundaries, computed without overflow. */
static void part(gint64 lo, gint64 len, gint64 n, gint64 i, gint64 *off, gint64 *cnt)
{
  gint64 q = len / n, r = len % n;
  gint64 a = i * q + (i * r) / n;
  gint64 b = (i + 1) * q + ((i + 1) * r) / n;
  *off = lo + a;
  *cnt = b - a;
}

/* Nested segment of member m before the phase along piece `level`: chunk d_0 of the buffer,
 * then chunk d_1 of that, ... (the 2D/3D torus reduce-scatter layout). */
static void segment(const ts_coll_plan *p, int m, int level, gint64 *lo, gint64 *len)
{
  *lo = 0;
  *len = p->count;
  for (int j = 0; j < level; j++)
    part(*lo, *len, psize(p, j), digit(p, m, j), lo, len);
}

static double segment_bytes(const ts_coll_plan *p, int level)
{
  double s = p->bytes;
  for (int j = 0; j < level; j++)
    s /= psize(p, j);
  return s;
}

static int line_len(const ts_coll_plan *p, const ts_stage *st)
{
  return st->lp < 0 ? p->n : psize(p, st->lp);
}

static int line_member(const ts_coll_plan *p, const ts_stage *st, int base, gint64 r)
{
  int L = line_len(p, st);
  int q = imod(r, L);
  return st->lp < 0 ? p->snake[q] : base + q * p->radix[st->lp];
}

/* Lines are the combinations of the digits in mask (other digits 0). */
static int nlines(const ts_coll_plan *p, guint mask)
{
  int n = 1;
  for (int j = 0; j < p->g.npieces; j++)
    if (mask & (1u << j))
      n *= psize(p, j);
  return n;
}

static int line_base(const ts_coll_plan *p, guint mask, int l)
{
  int m = 0;
  for (int j = 0; j < p->g.npieces; j++)
    if (mask & (1u << j)) {
      m += (l % psize(p, j)) * p->radix[j];
      l /= psize(p, j);
    }
  return m;
}

/* The lines the analytic model times: all of them, or only those on the physical line
 * through chip 0. Lines that differ in a digit of a piece on another dimension use other
 * links of the same kind and cost the same, so one representative is exact. */
static guint time_mask(const ts_coll_plan *p, guint free_mask, int lp, gboolean full)
{
  /* On a twisted torus a route may leave its line (a wrap-around lands on another line), so
   * lines that differ in another dimension's digit can share links: time them all, unless the
   * routes along this dimension stay on their lines. */
  if (full || lp < 0 || (p->net.twisted && !(p->net.line_local & (1u << p->g.p[lp].dim))))
    return free_mask;
  /* Shared NIC ports join lines that differ in the chip within the node: time them all. */
  for (int d = 0; d < p->net.arr.ndims; d++)
    if (p->net.port_share[d] > 1)
      return free_mask;
  guint m = 0;
  for (int j = 0; j < p->g.npieces; j++)
    if ((free_mask & (1u << j)) && p->g.p[j].dim == p->g.p[lp].dim)
      m |= 1u << j;
  return m;
}

static int ceil_log2(int n)
{
  int l = 0;
  while ((1 << l) < n)
    l++;
  return l;
}

static void emit(GArray *out, int src, int dst, gint64 so, gint64 dof, gint64 cnt, ts_xfer_op op)
{
  /* Empty chunks (fewer elements than members) send nothing. */
  if (cnt <= 0)
    return;
  ts_xfer x = {.src = src, .dst = dst, .src_off = so, .dst_off = dof, .count = cnt, .op = op};
  g_array_append_val(out, x);
}

/* Flows are written into space reserved up front (this loop runs for every ts_coll_time). */
typedef struct {
  ts_flow *f;
  const int *chip;
} flow_writer;

static flow_writer reserve(GArray *out, const ts_coll_plan *p, gsize k)
{
  gsize old = out->len;
  g_array_set_size(out, old + k);
  flow_writer w = {.f = &g_array_index(out, ts_flow, old), .chip = p->chip};
  return w;
}

static inline void flow(flow_writer *w, int src, int dst, double bytes)
{
  w->f->src = w->chip[src];
  w->f->dst = w->chip[dst];
  w->f->bytes = bytes;
  w->f->up_share = 0;
  w->f->down_share = 0;
  w->f++;
}

/* ---- ring reduce-scatter / all-gather (Patarasuk & Yuan 2009) ----
 *
 * n members in ring order 0 -> 1 -> ... -> n-1 -> 0, buffer in n chunks, member at ring
 * position q ends owning chunk q. Reduce-scatter step t (0..n-2): position r sends chunk
 * r-t-1 to r+1, which adds it in; chunk c thus starts at c+1 and, n-1 steps later, arrives
 * fully reduced at c. All-gather step t: position r forwards chunk r-t (its own at t = 0).
 *
 * Both directions at once (bidir), as TPU ICI rings run them (Austin et al. 2025, "How to Scale
 * Your Model", sharding.md: "each device pass[es] its shard around the ring ... in both
 * directions", ceil(N/2) hops): every chunk travels both ways, so a closed ring of L takes
 * floor(L/2) steps of whole chunks, not L-1 steps of half chunks; the bytes per link are the
 * same, (L-1)/(2L) of the segment each way, the hops half. For even L the antipodal chunk goes
 * half each way (all-gather: the last step; reduce-scatter: the first). All-gather step t:
 * position r sends chunk r-t to r+1 and chunk r+t to r-1; reduce-scatter step t: the partial
 * sum of chunk r+a-t to r+1 and of chunk r-a+t to r-1 (a = floor(L/2)), each partial starting
 * a hops from its owner and gathering a member a hop.
 * An open line (the closing edge longer than the first: a mesh axis without wrap-around, as a
 * TPU v5e axis shorter than 16, or a unit-stride piece of a longer ring) runs each chunk to both
 * ends of the line instead: L-1 steps of whole chunks and one hop, every link direction
 * carrying one chunk a step (the book's "3 hops of 8.4 MB" on a 4-chip v5e axis). All-gather
 * step t: position r sends chunk r-t to r+1 (r >= t) and chunk r+t to r-1 (r+t <= L-1);
 * reduce-scatter step t: the partial of chunk r+L-1-t to r+1 (r <= t) and of chunk r+t-(L-1)
 * to r-1 (r+t >= L-1). */

static void chunk_of(const ts_coll_plan *p, const ts_stage *st, gint64 lo, gint64 len, gint64 q,
                     gint64 *off, gint64 *cnt)
{
  int L = line_len(p, st);
  int qq = imod(q, L);
  /* Chunks are labelled by the owner's member index on the snake (so member m owns chunk m:
   * the natural reduce-scatter layout) and by the digit on a line of a torus phase. */
  int label = st->lp < 0 ? p->snake[qq] : qq;
  part(lo, len, L, label, off, cnt);
}

/* Hops along dimension d from coordinate ca to cb on the dimension-order route: a switch is
 * one hop, a ring the shorter way round, a mesh the distance. */
static int dim_hops(const ts_net *nw, int d, int ca, int cb)
{
  if (ca == cb)
    return 0;
  int n = nw->arr.size[d], h = abs(cb - ca);
  if (nw->shape[d] == TS_SHAPE_SWITCH)
    return 1;
  return nw->shape[d] == TS_SHAPE_RING ? MIN(h, n - h) : h;
}

/* Hops of the dimension-order route from chip a to chip b (a switch is one hop). */
static int route_hops(const ts_net *nw, int a, int b)
{
  int hops = 0;
  for (int d = 0; d < nw->arr.ndims; d++) {
    int n = nw->arr.size[d];
    hops += dim_hops(nw, d, a % n, b % n);
    a /= n;
    b /= n;
  }
  return hops;
}

/* Whether the line along piece lp (-1: the snake through all members) is open: its closing
 * edge, last member back to the first, is longer than its first edge. A line along the whole
 * of a dimension whose wrap-around is twisted closes through that wrap only by going back
 * along the dimensions the twist moves it (twist[d][e] places each): open unless that is as
 * short as the first edge. */
static gboolean line_open(const ts_coll_plan *p, int lp)
{
  int L = lp < 0 ? p->n : psize(p, lp);
  if (L <= 2)
    return FALSE;
  int m0 = lp < 0 ? p->snake[0] : 0;
  int m1 = lp < 0 ? p->snake[1] : p->radix[lp];
  int ml = lp < 0 ? p->snake[L - 1] : (L - 1) * p->radix[lp];
  int first = route_hops(&p->net, p->chip[m0], p->chip[m1]);
  int close = route_hops(&p->net, p->chip[ml], p->chip[m0]);
  if (lp >= 0 && p->net.twisted) {
    int d = p->g.p[lp].dim;
    int tw = 0;
    for (int e = 0; e < p->net.arr.ndims; e++)
      if (p->net.twist[d][e] != 0) {
        int n = p->net.arr.size[e], h = ((p->net.twist[d][e] % n) + n) % n;
        tw += MIN(h, n - h);
      }
    /* the line covers the whole twisted dimension: its dimension-order closing hop is the
     * wrap-around, which lands tw hops away */
    if (tw > 0 && L * p->g.p[lp].stride == p->net.arr.size[d] && close <= first)
      close = MIN(first + tw, (L - 1) * first);
  }
  return close > first;
}

/* Steps of a ring stage over a line of L (see above). */
static int ring_nsteps(int L, gboolean bidir, gboolean open)
{
  return bidir && !open ? L / 2 : L - 1;
}

/* The step of a ring stage whose chunks go half each way (an even closed bidirectional ring),
 * or -1. */
static int ring_half_step(const ts_stage *st, int L)
{
  if (!st->bidir || st->open || L % 2 != 0)
    return -1;
  return st->type == TS_ST_RING_RS ? 0 : L / 2 - 1;
}

/* What position r of a line of L sends towards r + dir (dir = 1 or -1) at step t of a
 * bidirectional ring stage: the chunk *q and the part *half (0 whole, 1 first half, 2 second
 * half). FALSE: nothing that way. */
static gboolean bidir_send(const ts_stage *st, int L, int r, int t, int dir, gint64 *q, int *half)
{
  gboolean rs = st->type == TS_ST_RING_RS;
  *half = 0;
  if (st->open) {
    if (dir > 0) {
      if (r > L - 2 || (rs ? r > t : r < t))
        return FALSE;
      *q = rs ? r + L - 1 - t : r - t;
    } else {
      if (r < 1 || (rs ? r + t < L - 1 : r + t > L - 1))
        return FALSE;
      *q = rs ? r + t - (L - 1) : r + t;
    }
    return TRUE;
  }
  int a = L / 2;
  *q = rs ? (dir > 0 ? r + a - t : r - a + t) : (dir > 0 ? r - t : r + t);
  if (t == ring_half_step(st, L))
    *half = dir > 0 ? 1 : 2;
  return TRUE;
}

/* ---- torus all-reduce over all dimensions at once (rotated chunks) ----
 * The buffer is cut into ntp chunks, one per piece of >= 2 members. Chunk c reduce-scatters
 * along pieces tp[c], tp[c+1], ..., tp[c-1] (indices mod ntp), each phase a ring reduce-scatter
 * on the chunk's current nested segment, then all-gathers back in the reverse order; the chunks
 * run in the same steps, so on a D-dimensional torus every dimension carries one chunk at a
 * time. Chunk c's phase i is along piece tp[(c + i) % ntp]. */

static int trot_piece(const ts_coll_plan *p, int c, int i)
{
  return p->tp[(c + i) % p->ntp];
}

/* Whether the rotated stage's rings along piece j run both ways (not on a switch). */
static gboolean trot_bidir(const ts_coll_plan *p, const ts_stage *st, int j)
{
  return st->bidir && p->net.shape[p->g.p[j].dim] != TS_SHAPE_SWITCH;
}

/* Phase i of chunk c at step t of a rotated stage, and the step tt within the phase. */
static void trot_phase(const ts_coll_plan *p, const ts_stage *st, int c, int t, int *i, int *tt)
{
  gboolean rs = st->type == TS_ST_TROT_RS;
  for (int s = 0; s < p->ntp; s++) {
    int ii = rs ? s : p->ntp - 1 - s;
    int j = trot_piece(p, c, ii);
    int len = ring_nsteps(psize(p, j), trot_bidir(p, st, j), line_open(p, j));
    if (t < len) {
      *i = ii;
      *tt = t;
      return;
    }
    t -= len;
  }
  g_assert_not_reached();
}

/* Chunk c's nested segment of member m before its phase i. */
static void trot_segment(const ts_coll_plan *p, int m, int c, int i, gint64 *lo, gint64 *len)
{
  part(0, p->count, p->ntp, c, lo, len);
  for (int k = 0; k < i; k++) {
    int j = trot_piece(p, c, k);
    part(*lo, *len, psize(p, j), digit(p, m, j), lo, len);
  }
}

static double trot_bytes(const ts_coll_plan *p, int c, int i)
{
  double s = p->bytes / p->ntp;
  for (int k = 0; k < i; k++)
    s /= psize(p, trot_piece(p, c, k));
  return s;
}

/* The ring stage chunk c's phase i runs (lines along its piece). */
static ts_stage trot_ring(const ts_coll_plan *p, const ts_stage *st, int c, int i)
{
  int j = trot_piece(p, c, i);
  return (ts_stage){.type = st->type == TS_ST_TROT_RS ? TS_ST_RING_RS : TS_ST_RING_AG,
                    .lp = j,
                    .free_mask = all_pieces(p) & ~(1u << j),
                    .bidir = trot_bidir(p, st, j),
                    .open = trot_bidir(p, st, j) && line_open(p, j),
                    .nseg = 1};
}

/* Ring step t on every line of st; the lines' segments are those of rotated chunk c at phase
 * i, or with c < 0 the nested segment before the phase along st->lp. */
static void gen_ring_chunk(const ts_coll_plan *p, const ts_stage *st, int t, int c, int i,
                           GArray *out)
{
  gboolean rs = st->type == TS_ST_RING_RS;
  ts_xfer_op op = rs ? TS_XFER_REDUCE : TS_XFER_COPY;
  int L = line_len(p, st), nl = nlines(p, st->free_mask);
  for (int l = 0; l < nl; l++) {
    int base = line_base(p, st->free_mask, l);
    gint64 lo, len, off, cnt;
    if (c < 0)
      segment(p, base, MAX(st->lp, 0), &lo, &len);
    else
      trot_segment(p, base, c, i, &lo, &len);
    for (int r = 0; r < L; r++) {
      int src = line_member(p, st, base, r);
      if (!st->bidir) {
        chunk_of(p, st, lo, len, rs ? r - t - 1 : r - t, &off, &cnt);
        emit(out, src, line_member(p, st, base, r + 1), off, off, cnt, op);
        continue;
      }
      for (int dir = 1; dir >= -1; dir -= 2) {
        gint64 q;
        int h;
        if (!bidir_send(st, L, r, t, dir, &q, &h))
          continue;
        chunk_of(p, st, lo, len, q, &off, &cnt);
        gint64 first = (cnt + 1) / 2;
        if (h == 1)
          cnt = first;
        else if (h == 2) {
          off += first;
          cnt -= first;
        }
        emit(out, src, line_member(p, st, base, r + dir), off, off, cnt, op);
      }
    }
  }
}

static void gen_ring(const ts_coll_plan *p, const ts_stage *st, int t, GArray *out)
{
  gen_ring_chunk(p, st, t, -1, 0, out);
}

static void gen_trot(const ts_coll_plan *p, const ts_stage *st, int t, GArray *out)
{
  for (int c = 0; c < p->ntp; c++) {
    int i, tt;
    trot_phase(p, st, c, t, &i, &tt);
    ts_stage ring = trot_ring(p, st, c, i);
    gen_ring_chunk(p, &ring, tt, c, i, out);
  }
}

/* Chips of a line's members in line order (into buf, L entries). */
static const int *line_chips(const ts_coll_plan *p, const ts_stage *st, int base, int *buf)
{
  int L = line_len(p, st);
  for (int r = 0; r < L; r++)
    buf[r] = p->chip[st->lp < 0 ? p->snake[r] : base + r * p->radix[st->lp]];
  return buf;
}

/* Flows of ring step t on the lines of st, each line's segment `seg` bytes. */
static void flows_ring_seg(const ts_coll_plan *p, const ts_stage *st, gboolean full, double seg,
                           int t, GArray *out)
{
  int L = line_len(p, st);
  guint mask = time_mask(p, st->free_mask, st->lp, full);
  int nl = nlines(p, mask);
  double c = seg / L;
  gsize old = out->len;
  flow_writer w = reserve(out, p, (gsize)nl * L * (st->bidir ? 2 : 1));
  ts_flow *start = w.f;
  g_autofree int *buf = g_new(int, L);
  for (int l = 0; l < nl; l++) {
    const int *ch = line_chips(p, st, line_base(p, mask, l), buf);
    for (int r = 0; r < L; r++) {
      if (!st->bidir) {
        *w.f++ = (ts_flow){.src = ch[r], .dst = ch[r + 1 == L ? 0 : r + 1], .bytes = c, 0, 0};
        continue;
      }
      for (int dir = 1; dir >= -1; dir -= 2) {
        gint64 q;
        int h;
        if (!bidir_send(st, L, r, t, dir, &q, &h))
          continue;
        *w.f++ = (ts_flow){.src = ch[r], .dst = ch[imod(r + dir, L)], .bytes = h ? c / 2 : c, 0, 0};
      }
    }
  }
  g_array_set_size(out, old + (gsize)(w.f - start));
}

static void flows_ring(const ts_coll_plan *p, const ts_stage *st, int t, gboolean full, GArray *out)
{
  flows_ring_seg(p, st, full, segment_bytes(p, MAX(st->lp, 0)), t, out);
}

static void flows_trot(const ts_coll_plan *p, const ts_stage *st, int t, gboolean full, GArray *out)
{
  for (int c = 0; c < p->ntp; c++) {
    int i, tt;
    trot_phase(p, st, c, t, &i, &tt);
    ts_stage ring = trot_ring(p, st, c, i);
    flows_ring_seg(p, &ring, full, trot_bytes(p, c, i), tt, out);
  }
}

/* ---- binomial tree (Thakur, Rabenseifner & Gropp 2005: MPICH's short-message reduce and
 * broadcast) ----
 * Reduce step k (0..ceil(log2 n)-1): members m = 2^k (mod 2^(k+1)) send their whole buffer
 * to m - 2^k. Broadcast is the mirror: step for k = L-1..0, members m = 0 (mod 2^(k+1)) send
 * to m + 2^k. Not pipelined: each step moves the whole buffer. */

static void gen_tree(const ts_coll_plan *p, const ts_stage *st, int t, GArray *out)
{
  if (st->type == TS_ST_TREE_REDUCE) {
    int d = 1 << t;
    for (int m = d; m < p->n; m += 2 * d)
      emit(out, m, m - d, 0, 0, p->count, TS_XFER_REDUCE);
  } else {
    int d = 1 << (st->nsteps - 1 - t);
    for (int m = 0; m + d < p->n; m += 2 * d)
      emit(out, m, m + d, 0, 0, p->count, TS_XFER_COPY);
  }
}

static void flows_tree(const ts_coll_plan *p, const ts_stage *st, int t, GArray *out)
{
  gboolean up = st->type == TS_ST_TREE_REDUCE;
  int d = 1 << (up ? t : st->nsteps - 1 - t);
  int k = 0;
  for (int m = d; m < p->n; m += 2 * d)
    k++;
  flow_writer w = reserve(out, p, (gsize)k);
  for (int m = d; m < p->n; m += 2 * d)
    if (up)
      flow(&w, m, m - d, p->bytes);
    else
      flow(&w, m - d, m, p->bytes);
}

/* ---- recursive halving / doubling (Thakur, Rabenseifner & Gropp 2005: reduce-scatter
 * by recursive halving, all-gather by recursive doubling, Rabenseifner's all-reduce) ----
 * n = 2^L members, buffer in n chunks. Halving step k (distance 2^k, nearest first so the
 * largest halves cross the fewest links): member m keeps the lower half of its current chunk
 * range if bit k of m is 0, else the upper half, and sends the other half to m ^ 2^k, which
 * adds it in. Member m ends with chunk bitreverse(m). Doubling is the mirror (distance 2^(L-1)
 * first): m sends its range to m ^ 2^k and both then hold the union. */

static void hd_range(const ts_coll_plan *p, int m, int steps, gint64 *a, gint64 *b)
{
  *a = 0;
  *b = p->n;
  for (int k = 0; k < steps; k++) {
    gint64 mid = (*a + *b) / 2;
    if ((m >> k) & 1)
      *a = mid;
    else
      *b = mid;
  }
}

static void chunks_elems(const ts_coll_plan *p, gint64 a, gint64 b, gint64 *off, gint64 *cnt)
{
  gint64 o1, c1, o2, c2;
  part(0, p->count, p->n, a, &o1, &c1);
  part(0, p->count, p->n, b - 1, &o2, &c2);
  *off = o1;
  *cnt = o2 + c2 - o1;
}

static void gen_hd(const ts_coll_plan *p, const ts_stage *st, int t, GArray *out)
{
  gboolean rs = st->type == TS_ST_HD_RS;
  int k = rs ? t : st->nsteps - 1 - t;
  for (int m = 0; m < p->n; m++) {
    gint64 a, b, off, cnt;
    if (rs) {
      hd_range(p, m, k, &a, &b);
      gint64 mid = (a + b) / 2;
      if ((m >> k) & 1)
        b = mid; /* keeps the upper half, sends the lower */
      else
        a = mid;
    } else {
      hd_range(p, m, k + 1, &a, &b);
    }
    chunks_elems(p, a, b, &off, &cnt);
    emit(out, m, m ^ (1 << k), off, off, cnt, rs ? TS_XFER_REDUCE : TS_XFER_COPY);
  }
}

/* Bit k of the member index is a bit of one piece's digit (every piece size is a power of
 * two): piece *j, where flipping it moves the digit by *dj. The step's pairs lie on lines
 * along that piece. */
static void hd_piece(const ts_coll_plan *p, int k, int *j, int *dj)
{
  int below = 0;
  *j = 0;
  while (below + ceil_log2(psize(p, *j)) <= k) {
    below += ceil_log2(psize(p, *j));
    (*j)++;
  }
  *dj = 1 << (k - below);
}

static void flows_hd(const ts_coll_plan *p, const ts_stage *st, int t, gboolean full, GArray *out)
{
  int k = st->type == TS_ST_HD_RS ? t : st->nsteps - 1 - t;
  int j, dj;
  hd_piece(p, k, &j, &dj);
  guint mask = time_mask(p, all_pieces(p) & ~(1u << j), j, full);
  int nl = nlines(p, mask);
  double c = p->bytes / (double)(2 << k);
  flow_writer w = reserve(out, p, (gsize)nl * psize(p, j));
  for (int l = 0; l < nl; l++) {
    int base = line_base(p, mask, l);
    for (int r = 0; r < psize(p, j); r++)
      flow(&w, base + r * p->radix[j], base + (r ^ dj) * p->radix[j], c);
  }
}

/* ---- direct: every pair at once, one step (n(n-1) concurrent flows) ---- */

static void gen_direct(const ts_coll_plan *p, const ts_stage *st, GArray *out)
{
  gint64 bs = p->count / p->n;
  for (int i = 0; i < p->n; i++) {
    if (st->type == TS_ST_DIRECT_BCAST) {
      if (i > 0)
        emit(out, 0, i, 0, 0, p->count, TS_XFER_COPY);
      continue;
    }
    for (int j = 0; j < p->n; j++) {
      if (i == j)
        continue;
      gint64 off, cnt;
      switch (st->type) {
      case TS_ST_DIRECT_RS:
        part(0, p->count, p->n, j, &off, &cnt);
        emit(out, i, j, off, off, cnt, TS_XFER_REDUCE);
        break;
      case TS_ST_DIRECT_AG:
        part(0, p->count, p->n, i, &off, &cnt);
        emit(out, i, j, off, off, cnt, TS_XFER_COPY);
        break;
      default: /* all-to-all: my block j goes to j's block i */
        emit(out, i, j, j * bs, i * bs, bs, TS_XFER_COPY);
        break;
      }
    }
  }
}

static void flows_direct(const ts_coll_plan *p, const ts_stage *st, GArray *out)
{
  if (st->type == TS_ST_DIRECT_BCAST) {
    flow_writer w = reserve(out, p, (gsize)p->n - 1);
    for (int i = 1; i < p->n; i++)
      flow(&w, 0, i, p->bytes);
    return;
  }
  flow_writer w = reserve(out, p, (gsize)p->n * (gsize)(p->n - 1));
  for (int i = 0; i < p->n; i++)
    for (int j = 0; j < p->n; j++)
      if (i != j)
        flow(&w, i, j, p->bytes / p->n);
}

/* ---- pairwise all-to-all along lines ----
 * Step k (1..floor(L/2)): position r exchanges with r+k and r-k (once when 2k = L). Each step
 * is a set of symmetric swaps, so it runs in place: the slot a member overwrites is the one it
 * sends in the same step (steps read every source before writing). With lp = -1 (the ring
 * algorithm) the line is the whole group and a member sends its block for the partner. Along
 * a piece (torus / hierarchical: dimension-wise all-to-all, as on TPU pods), a member sends
 * every block whose destination has the partner's digit, into the slot with its own digit;
 * after the phases of all pieces, member i's block j sits in member j's slot i. */

static void gen_pairwise(const ts_coll_plan *p, const ts_stage *st, int t, GArray *out)
{
  int k = t + 1, L = line_len(p, st), nl = nlines(p, st->free_mask);
  gint64 bs = p->count / p->n;
  for (int l = 0; l < nl; l++) {
    int base = line_base(p, st->free_mask, l);
    for (int r = 0; r < L; r++) {
      int x = line_member(p, st, base, r);
      for (int side = 1; side >= -1; side -= 2) {
        if (side < 0 && 2 * k == L)
          continue;
        int q = imod(r + side * k, L);
        int y = line_member(p, st, base, q);
        if (st->lp < 0) {
          emit(out, x, y, y * bs, x * bs, bs, TS_XFER_COPY);
          continue;
        }
        gint64 inner = p->radix[st->lp], span = inner * L, outer = p->n / span;
        for (gint64 h = 0; h < outer; h++)
          emit(out, x, y, (h * span + q * inner) * bs, (h * span + r * inner) * bs, inner * bs,
               TS_XFER_COPY);
      }
    }
  }
}

static void flows_pairwise(const ts_coll_plan *p, const ts_stage *st, int t, gboolean full,
                           GArray *out)
{
  int k = t + 1, L = line_len(p, st);
  guint mask = time_mask(p, st->free_mask, st->lp, full);
  int nl = nlines(p, mask);
  double c = p->bytes / L;
  flow_writer w = reserve(out, p, (gsize)nl * L * (2 * k != L ? 2 : 1));
  for (int l = 0; l < nl; l++) {
    int base = line_base(p, mask, l);
    for (int r = 0; r < L; r++) {
      int x = line_member(p, st, base, r);
      flow(&w, x, line_member(p, st, base, r + k), c);
      if (2 * k != L)
        flow(&w, x, line_member(p, st, base, r - k), c);
    }
  }
}

/* ---- pipelined chain broadcast along lines ----
 * The buffer is cut in K segments; position r forwards segment t-r to r+1 at step t, so the
 * chain takes K + L - 2 steps of one segment each (Thakur et al. 2005 discuss the same
 * pipelining for long-message broadcast). Two chains (bidir): the first half of the buffer
 * goes 0 -> 1 -> ... -> L-1, the second 0 -> L-1 -> ... -> 1. */

static void gen_chain(const ts_coll_plan *p, const ts_stage *st, int t, GArray *out)
{
  int L = line_len(p, st), nl = nlines(p, st->free_mask);
  gint64 ha = st->bidir ? (p->count + 1) / 2 : p->count;
  for (int l = 0; l < nl; l++) {
    int base = line_base(p, st->free_mask, l);
    for (int r = 0; r + 1 < L; r++) {
      gint64 i = (gint64)t - r, off, cnt;
      if (i < 0 || i >= st->nseg)
        continue;
      part(0, ha, st->nseg, i, &off, &cnt);
      emit(out, line_member(p, st, base, r), line_member(p, st, base, r + 1), off, off, cnt,
           TS_XFER_COPY);
      if (st->bidir) {
        part(ha, p->count - ha, st->nseg, i, &off, &cnt);
        emit(out, line_member(p, st, base, -r), line_member(p, st, base, -r - 1), off, off, cnt,
             TS_XFER_COPY);
      }
    }
  }
}

static void flows_chain(const ts_coll_plan *p, const ts_stage *st, gboolean full, GArray *out)
{
  int L = line_len(p, st);
  guint mask = time_mask(p, st->free_mask, st->lp, full);
  int nl = nlines(p, mask);
  double c = p->bytes / (st->bidir ? 2.0 : 1.0) / (double)st->nseg;
  flow_writer w = reserve(out, p, (gsize)nl * (L - 1) * (st->bidir ? 2 : 1));
  for (int l = 0; l < nl; l++) {
    int base = line_base(p, mask, l);
    for (int r = 0; r + 1 < L; r++) {
      flow(&w, line_member(p, st, base, r), line_member(p, st, base, r + 1), c);
      if (st->bidir)
        flow(&w, line_member(p, st, base, -r), line_member(p, st, base, -r - 1), c);
    }
  }
}

/* ---- NCCL rings (NCCL src/graph/rings.cc, search.cc: one ring per channel) ----
 * nrings rings run at once, each through every member; ring c is the snake order with digit 0
 * (the chip within a node) rotated by c, so its inter-node hops leave from a different local
 * chip, i.e. a different NIC on a rail-optimised cluster (rail c-1 out of even nodes, rail c
 * out of odd ones, counting ring c). Every ring is the ring algorithm above on 1/nrings of
 * every chunk: position r of ring c sends chunk label(r-t-1) (RS) or label(r-t) (AG), chunks
 * labelled by member, so member m owns chunk m whatever the ring. */

static int mring_member(const ts_coll_plan *p, int c, gint64 r)
{
  int m = p->snake[imod(r, p->n)];
  if (c == 0 || p->g.npieces == 0)
    return m;
  int L0 = psize(p, 0), d0 = m % L0;
  return m - d0 + (d0 + c) % L0;
}

static void gen_mring(const ts_coll_plan *p, const ts_stage *st, int t, GArray *out)
{
  gboolean rs = st->type == TS_ST_MRING_RS;
  ts_xfer_op op = rs ? TS_XFER_REDUCE : TS_XFER_COPY;
  int n = p->n, C = p->nrings;
  for (int c = 0; c < C; c++)
    for (int r = 0; r < n; r++) {
      int src = mring_member(p, c, r), dst = mring_member(p, c, r + 1);
      int label = mring_member(p, c, rs ? r - t - 1 : r - t);
      gint64 off, cnt, o2, c2;
      part(0, p->count, n, label, &off, &cnt);
      part(off, cnt, C, c, &o2, &c2);
      emit(out, src, dst, o2, o2, c2, op);
    }
}

static void flows_mring(const ts_coll_plan *p, GArray *out)
{
  int n = p->n, C = p->nrings;
  flow_writer w = reserve(out, p, (gsize)C * n);
  double c = p->bytes / n / C;
  for (int k = 0; k < C; k++)
    for (int r = 0; r < n; r++)
      flow(&w, mring_member(p, k, r), mring_member(p, k, r + 1), c);
}

/* ---- NCCL tree all-reduce (NCCL src/graph/trees.cc: double binary tree across nodes, a
 * chain inside each node; Sanders, Speck & Traeff 2009, "Two-tree algorithms for full
 * bandwidth broadcast, reduction and scan", Parallel Computing 35(12)) ----
 * ntrees = 2 per channel; tree k handles part k of the buffer, cut in nseg segments. A member
 * v at height h(v) (0 at leaves) sends segment s up at step s + h(v), reduced into its parent;
 * the root holds segment s complete after step s + H - 1, and a member at depth d receives it
 * back (a copy from its parent) at step s + H + d - 1. Reduce and broadcast overlap, as in
 * NCCL's pipelined tree: nseg + H + D - 1 steps. Heights and depths make every read follow the
 * writes it needs: children send s before their parent does, and a copy of s arrives after the
 * member sent s up. */

static void tree_seg(const ts_coll_plan *p, const ts_stage *st, int k, gint64 s, gint64 *off,
                     gint64 *cnt)
{
  gint64 o, c;
  part(0, p->count, p->ntrees, k, &o, &c);
  part(o, c, st->nseg, s, off, cnt);
}

static void gen_ptree(const ts_coll_plan *p, const ts_stage *st, int t, GArray *out)
{
  int n = p->n;
  for (int k = 0; k < p->ntrees; k++) {
    const int *par = p->tparent + (gsize)k * n, *h = p->theight + (gsize)k * n,
              *d = p->tdepth + (gsize)k * n;
    int H = p->tH[k];
    for (int v = 0; v < n; v++) {
      if (par[v] < 0)
        continue;
      gint64 s = (gint64)t - h[v], off, cnt;
      if (s >= 0 && s < st->nseg) {
        tree_seg(p, st, k, s, &off, &cnt);
        emit(out, v, par[v], off, off, cnt, TS_XFER_REDUCE);
      }
      s = (gint64)t - H - (d[v] - 1);
      if (s >= 0 && s < st->nseg) {
        tree_seg(p, st, k, s, &off, &cnt);
        emit(out, par[v], v, off, off, cnt, TS_XFER_COPY);
      }
    }
  }
}

static void flows_ptree(const ts_coll_plan *p, const ts_stage *st, GArray *out)
{
  int n = p->n;
  flow_writer w = reserve(out, p, (gsize)p->ntrees * 2 * (n - 1));
  double c = p->bytes / p->ntrees / (double)st->nseg;
  for (int k = 0; k < p->ntrees; k++) {
    const int *par = p->tparent + (gsize)k * n;
    for (int v = 0; v < n; v++)
      if (par[v] >= 0) {
        flow(&w, v, par[v], c);
        flow(&w, par[v], v, c);
      }
  }
}

/* Binary tree over positions 0..N-1 by bit pattern (the construction of NCCL's trees.cc, in
 * its spirit, not its code): label position i as r = i + 1; r's parent has the next higher
 * lowest set bit, r + b or r - b (b = r's lowest set bit) whichever keeps the bit above b
 * clear. Labels above N are skipped over (their one real descendant chain attaches to the
 * next real ancestor). Odd labels are leaves, so the tree shifted by one position (the second
 * tree) has as leaves exactly the inner nodes of the first: no node is inner in both, and
 * every node's link carries at most the ring's bytes (NCCL's double binary tree). */
static void btree(int *par, int N)
{
  for (int i = 0; i < N; i++) {
    gint64 r = i + 1;
    par[i] = -1;
    while (r <= 4 * (gint64)N) {
      gint64 b = r & -r;
      r = (r & (2 * b)) ? r - b : r + b;
      if (r >= 1 && r <= N) {
        par[i] = (int)(r - 1);
        break;
      }
    }
  }
}

static void build_trees(ts_coll_plan *p)
{
  int n = p->n, L = p->local, N = n / L;
  int C = N > 1 ? L : 1;
  p->ntrees = 2 * C;
  p->tparent = g_new(int, (gsize)p->ntrees *n);
  p->theight = g_new0(int, (gsize)p->ntrees *n);
  p->tdepth = g_new0(int, (gsize)p->ntrees *n);
  p->tH = g_new0(int, p->ntrees);
  g_autofree int *npar = g_new(int, MAX(N, 1));
  for (int k = 0; k < p->ntrees; k++) {
    int c = k / 2, b = k % 2;
    int *par = p->tparent + (gsize)k * n;
    /* Node-level tree: positions in node order (tree 0) or shifted by one (tree 1), so that
     * most leaves of one tree are inner members of the other, as in NCCL's double tree. */
    btree(npar, N);
    for (int v = 0; v < n; v++) {
      int node = v / L, loc = v % L;
      /* chain in the node: head at local c; tree 1 runs the chain the other way round */
      int q = b == 0 ? imod(loc - c, L) : imod(c - loc, L);
      if (q > 0) {
        int prev = b == 0 ? imod(c + q - 1, L) : imod(c - (q - 1), L);
        par[v] = node * L + prev;
        continue;
      }
      int pos = b == 0 ? node : (node + N - 1) % N; /* tree 1: node i sits at position i-1 */
      int pp = npar[pos];
      if (pp < 0) {
        par[v] = -1;
        continue;
      }
      int pnode = b == 0 ? pp : (pp + 1) % N;
      par[v] = pnode * L + c;
    }
  }
  /* Heights and depths by repeated relaxation (trees are shallow: O(n * depth)). */
  for (int k = 0; k < p->ntrees; k++) {
    const int *par = p->tparent + (gsize)k * n;
    int *h = p->theight + (gsize)k * n, *d = p->tdepth + (gsize)k * n;
    for (int v = 0; v < n; v++) {
      int dd = 0;
      for (int u = v; par[u] >= 0; u = par[u])
        dd++;
      d[v] = dd;
    }
    for (int v = 0; v < n; v++) {
      int hh = 0;
      for (int u = v; par[u] >= 0; u = par[u]) {
        hh++;
        if (h[par[u]] < hh)
          h[par[u]] = hh;
      }
    }
    for (int v = 0; v < n; v++)
      if (par[v] < 0)
        p->tH[k] = h[v];
  }
}

/* ---- NVLink SHARP (NCCL's NVLS algorithm, multimem loads and stores on NVSwitch) ----
 * Reduce-scatter: every member sends every other member that member's chunk; the switch adds
 * the n-1 copies in flight, so a member's down port carries one chunk (down_share = n-1).
 * All-gather: a member uploads its chunk once and the switch replicates it (up_share = n-1).
 * All-reduce pipelines the two (NCCL: "AllReduce pipelines two operations"): at step t segment
 * t is reduced and segment t-1 multicast, nseg + 1 steps.
 * The multimem operations go through the switch for the member's own chunk too: the
 * ld_reduce that reduces chunk j reads member j's copy over j's up port, and the multicast
 * store of chunk j comes back down to j (NVIDIA/nccl issue #828: "multimem.ld_reduce would
 * pull data from all 4 GPUs"). So a port carries S (n+1)/n of an all-reduce (S up and S/n down
 * for the reduction, S/n up and S down for the multicast), and n/(n-1) times the n-1 remote
 * chunks of a reduce-scatter or all-gather alone. The flows below are the transfers between
 * members; the port's own-chunk traffic is charged as a lower rate, set_proto's
 * bandwidth / nvls_port_factor. With it, the published 8x H100 figures (algorithm bandwidth
 * 258 / 265 / 270 / 273 GB/s on 5-8 GPUs) are one port rate, 309 GB/s
 * (topologies/dgx-h100-4node.ini). */
static double nvls_port_factor(ts_coll_kind kind, int n)
{
  if (n < 2)
    return 1.0;
  return kind == TS_COLL_ALLREDUCE ? (n + 1.0) / n : n / (n - 1.0);
}

static void gen_nvls(const ts_coll_plan *p, const ts_stage *st, int t, GArray *out)
{
  int n = p->n;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j)
        continue;
      gint64 off, cnt, o2, c2;
      if (st->type == TS_ST_NVLS_RS || (st->type == TS_ST_NVLS_AR && t < st->nseg)) {
        part(0, p->count, n, j, &off, &cnt);
        if (st->type == TS_ST_NVLS_AR) {
          part(off, cnt, st->nseg, t, &o2, &c2);
          off = o2;
          cnt = c2;
        }
        emit(out, i, j, off, off, cnt, TS_XFER_REDUCE);
      }
      if (st->type == TS_ST_NVLS_AG || (st->type == TS_ST_NVLS_AR && t >= 1)) {
        part(0, p->count, n, i, &off, &cnt);
        if (st->type == TS_ST_NVLS_AR) {
          part(off, cnt, st->nseg, t - 1, &o2, &c2);
          off = o2;
          cnt = c2;
        }
        emit(out, i, j, off, off, cnt, TS_XFER_COPY);
      }
    }
}

static void flows_nvls(const ts_coll_plan *p, const ts_stage *st, GArray *out)
{
  int n = p->n;
  gboolean rs = st->type != TS_ST_NVLS_AG, ag = st->type != TS_ST_NVLS_RS;
  double c = p->bytes / n / (double)st->nseg;
  flow_writer w = reserve(out, p, (gsize)n * (n - 1) * ((rs ? 1 : 0) + (ag ? 1 : 0)));
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j)
        continue;
      if (rs) {
        flow(&w, i, j, c);
        (w.f - 1)->down_share = n - 1;
      }
      if (ag) {
        flow(&w, i, j, c);
        (w.f - 1)->up_share = n - 1;
      }
    }
}

/* ---- dispatch ---- */

static gboolean stage_uniform(const ts_stage *st)
{
  /* Ring and chain steps all have the same pairs and (ideal) sizes: time one, multiply. */
  return st->type == TS_ST_RING_RS || st->type == TS_ST_RING_AG || st->type == TS_ST_CHAIN ||
         st->type == TS_ST_MRING_RS || st->type == TS_ST_MRING_AG || st->type == TS_ST_PTREE ||
         st->type == TS_ST_NVLS_RS || st->type == TS_ST_NVLS_AG || st->type == TS_ST_NVLS_AR;
}

void ts_coll_stage_flows(const ts_coll_plan *p, const ts_stage *st, int t, gboolean full,
                         GArray *flows)
{
  switch (st->type) {
  case TS_ST_RING_RS:
  case TS_ST_RING_AG:
    flows_ring(p, st, t, full, flows);
    break;
  case TS_ST_TROT_RS:
  case TS_ST_TROT_AG:
    flows_trot(p, st, t, full, flows);
    break;
  case TS_ST_TREE_REDUCE:
  case TS_ST_TREE_BCAST:
    flows_tree(p, st, t, flows);
    break;
  case TS_ST_HD_RS:
  case TS_ST_HD_AG:
    flows_hd(p, st, t, full, flows);
    break;
  case TS_ST_DIRECT_RS:
  case TS_ST_DIRECT_AG:
  case TS_ST_DIRECT_A2A:
  case TS_ST_DIRECT_BCAST:
    flows_direct(p, st, flows);
    break;
  case TS_ST_PAIRWISE:
    flows_pairwise(p, st, t, full, flows);
    break;
  case TS_ST_CHAIN:
    flows_chain(p, st, full, flows);
    break;
  case TS_ST_MRING_RS:
  case TS_ST_MRING_AG:
    flows_mring(p, flows);
    break;
  case TS_ST_PTREE:
    flows_ptree(p, st, flows);
    break;
  case TS_ST_NVLS_RS:
  case TS_ST_NVLS_AG:
  case TS_ST_NVLS_AR:
    flows_nvls(p, st, flows);
    break;
  }
}

static const ts_stage *stage_of(const ts_coll_plan *p, int s, int *t)
{
  for (int i = 0; i < p->nstages; i++) {
    const ts_stage *st = &p->st[i];
    if (s >= st->first_step && s < st->first_step + st->nsteps) {
      *t = s - st->first_step;
      return st;
    }
  }
  return NULL;
}

void ts_coll_plan_step(const ts_coll_plan *p, int s, GArray *out)
{
  g_return_if_fail(p != NULL && out != NULL);
  int t = 0;
  const ts_stage *st = stage_of(p, s, &t);
  g_return_if_fail(st != NULL);
  switch (st->type) {
  case TS_ST_RING_RS:
  case TS_ST_RING_AG:
    gen_ring(p, st, t, out);
    break;
  case TS_ST_TROT_RS:
  case TS_ST_TROT_AG:
    gen_trot(p, st, t, out);
    break;
  case TS_ST_TREE_REDUCE:
  case TS_ST_TREE_BCAST:
    gen_tree(p, st, t, out);
    break;
  case TS_ST_HD_RS:
  case TS_ST_HD_AG:
    gen_hd(p, st, t, out);
    break;
  case TS_ST_DIRECT_RS:
  case TS_ST_DIRECT_AG:
  case TS_ST_DIRECT_A2A:
  case TS_ST_DIRECT_BCAST:
    gen_direct(p, st, out);
    break;
  case TS_ST_PAIRWISE:
    gen_pairwise(p, st, t, out);
    break;
  case TS_ST_CHAIN:
    gen_chain(p, st, t, out);
    break;
  case TS_ST_MRING_RS:
  case TS_ST_MRING_AG:
    gen_mring(p, st, t, out);
    break;
  case TS_ST_PTREE:
    gen_ptree(p, st, t, out);
    break;
  case TS_ST_NVLS_RS:
  case TS_ST_NVLS_AG:
  case TS_ST_NVLS_AR:
    gen_nvls(p, st, t, out);
    break;
  }
}

/* Two stages with the same flows in every step: a ring reduce-scatter and all-gather over
 * the same lines (their chunks are equal in the ideal model), and the halving and doubling
 * steps at one distance. Timing one for both halves the work of the usual all-reduce. */
static gboolean same_ring(const ts_stage *a, const ts_stage *b)
{
  gboolean ra = a->type == TS_ST_RING_RS || a->type == TS_ST_RING_AG;
  gboolean rb = b->type == TS_ST_RING_RS || b->type == TS_ST_RING_AG;
  gboolean ma = a->type == TS_ST_MRING_RS || a->type == TS_ST_MRING_AG;
  gboolean mb = b->type == TS_ST_MRING_RS || b->type == TS_ST_MRING_AG;
  if (ma && mb)
    return TRUE;
  return ra && rb && a->lp == b->lp && a->free_mask == b->free_mask && a->bidir == b->bidir;
}

/* Latency of the dimension-order route from chip a to chip b, as ts_eval_step charges it: a
 * switch traversal once, ring and mesh hops each. */
static double route_latency(const ts_net *nw, int a, int b)
{
  double lat = 0.0;
  for (int d = 0; d < nw->arr.ndims; d++) {
    int n = nw->arr.size[d];
    lat += dim_hops(nw, d, a % n, b % n) * nw->lat_s[d];
    a /= n;
    b /= n;
  }
  return lat;
}

/* "nNodes > 1": the group has a piece beyond the node dimension. */
static gboolean plan_multi_node(const ts_coll_plan *p)
{
  for (int j = 0; j < p->g.npieces; j++)
    if (p->g.p[j].dim != 0 && p->g.p[j].size > 1)
      return TRUE;
  return FALSE;
}

/* NCCL's per-channel caps of the tree all-reduce for Ampere (tuning.cc, NVIDIA/nccl 2.18-2.27:
 * perChMaxTreeBws 24.0 / 23.6 / 17.8 GB/s on 1 / 2 / more nodes; perChMaxTreeLL128Bws 20.0 on
 * all three), in the order NCCL applies them: Simple's is perChMaxTreeBw; LL128 runs at 120/128 of
 * the Simple tree's bandwidth and at most perChMaxTreeLL128Bw, so min(23.6 x 120/128, 20) = 20
 * on two nodes and min(17.8 x 120/128, 20) = 16.69 on more. LL keeps Simple's ratios (its
 * 1/3.8 is in its link bandwidth, set_proto, far below any cap).
 * The ratio of protocol PROTO's cap on NODES nodes to Simple's on three or more (the network's
 * nccl_tree_bandwidth_GBps): Simple 1.326 on two nodes, LL128 1.124 on two and 0.9375 on more.
 * Before (s11-s12) every protocol took Simple's 23.6 / 17.8 on two nodes, making LL128's mid
 * sizes there 11% too fast against the 8-16 node rows. */
static double tree_cap_ratio(ts_coll_proto proto, int nodes)
{
  static const double simple_ch[3] = {24.0, 23.6, 17.8}, ll128_ch = 20.0;
  int s = nodes <= 1 ? 0 : nodes == 2 ? 1 : 2;
  double simple = simple_ch[s];
  if (proto == TS_PROTO_LL128)
    simple = MIN(simple * 120.0 / 128.0, ll128_ch);
  return simple / simple_ch[2];
}

/* NCCL's Simple tree moves each channel's share in chunks of 512 KiB, halved while the
 * channel would have fewer than 8 x depth chunks (down to 128 KiB), 4 x depth (64 KiB) and
 * depth (32 KiB), depth being NCCL's approximation ppn - 1 + log2(nNodes) (enqueue.cc,
 * ncclPatternTreeUpDown; connect.cc). Every chunk pays a fixed cost on the pipeline's busiest
 * stage (nccl_tree_chunk_latency_us of the network dimension, the largest spanned), so the
 * tree's rate grows with the buffer up to the 512 KiB chunks. Channels: trainsim's, one per
 * chip of the node (ntrees / 2). */
static double tree_chunk_time(const ts_coll_plan *p)
{
  double c_s = 0.0;
  for (int j = 0; j < p->g.npieces; j++)
    if (p->g.p[j].size > 1)
      c_s = MAX(c_s, p->tnet.nccl_tree_chunk_s[p->g.p[j].dim]);
  if (c_s <= 0.0 || p->proto != TS_PROTO_SIMPLE || p->local < 1 || p->n / p->local < 2)
    return 0.0;
  int nodes = p->n / p->local, log2n = 0;
  while ((2 << log2n) <= nodes)
    log2n++;
  double depth = p->local - 1 + log2n, ch = MAX(p->ntrees / 2, 1);
  double chunk = 512.0 * 1024.0;
  while (floor(p->bytes / (ch * chunk)) < depth * 8 && chunk > 131072)
    chunk /= 2;
  while (floor(p->bytes / (ch * chunk)) < depth * 4 && chunk > 65536)
    chunk /= 2;
  while (floor(p->bytes / (ch * chunk)) < depth && chunk > 32768)
    chunk /= 2;
  return ceil(p->bytes / (ch * chunk)) * c_s;
}

/* NCCL's rings and trees across nodes run as pipelines of small chunks (NCCL_STEPS slots per
 * connection, many chunks in flight), so a latency is paid once per hop of the data's path,
 * not once per step of the slowest hop, and the bytes stream at the rate of the most loaded
 * link. NCCL's tuning model (src/graph/tuning.cc) times them so: ring latency = (nsteps -
 * nInterSteps) intra-node hops + nInterSteps network hops; tree latency = 2 x ((ppn - 1)
 * intra-node + log2(nNodes) network hops); plus size / bandwidth. Here the hops are the plan's
 * own: the mean hop latency of a ring times its steps (the snake crosses N node boundaries
 * per turn), twice the deepest root-to-leaf path of a tree; the bandwidth term is the link
 * loads of the whole buffer (one segment) over the protocol's bandwidths. The tree's bus
 * bandwidth is capped by the network dimension's nccl_tree_bandwidth_GBps where given. */
static double pipelined_time(const ts_coll_plan *p, const ts_stage *st, gboolean full,
                             GArray *flows)
{
  ts_net bw_only = p->tnet;
  for (int d = 0; d < bw_only.arr.ndims; d++)
    bw_only.lat_s[d] = 0.0;
  ts_eval *ev = ts_eval_new(&bw_only);
  ts_stage one = *st;
  one.nseg = 1;
  g_array_set_size(flows, 0);
  ts_coll_stage_flows(p, &one, 0, full, flows);
  double bw = ts_eval_step(ev, (const ts_flow *)(void *)flows->data, (int)flows->len);
  ts_eval_free(ev);
  double lat = 0.0;
  if (st->type == TS_ST_PTREE) {
    for (int k = 0; k < p->ntrees; k++) {
      const int *par = p->tparent + (gsize)k * p->n;
      for (int v = 0; v < p->n; v++) {
        double path = 0.0;
        for (int u = v; par[u] >= 0; u = par[u])
          path += route_latency(&p->tnet, p->chip[u], p->chip[par[u]]);
        lat = MAX(lat, 2.0 * path);
      }
    }
    double cap = INFINITY;
    for (int j = 0; j < p->g.npieces; j++)
      if (p->g.p[j].size > 1 && p->tnet.nccl_tree_Bps[p->g.p[j].dim] > 0)
        cap = MIN(cap, p->tnet.nccl_tree_Bps[p->g.p[j].dim]);
    /* The key is Simple's cap on three or more nodes; other protocols and two nodes follow
     * NCCL's per-channel tree caps (tree_cap_ratio). */
    if (isfinite(cap) && p->local > 0)
      cap *= tree_cap_ratio(p->proto, p->n / p->local);
    if (isfinite(cap) && p->n > 1)
      bw = MAX(bw, 2.0 * (p->n - 1) / p->n * p->bytes / cap);
    return lat + bw + tree_chunk_time(p);
  }
  /* Ring stages: every step moves one chunk one hop along every ring. */
  for (int c = 0; c < p->nrings; c++) {
    double sum = 0.0;
    for (int r = 0; r < p->n; r++)
      sum += route_latency(&p->tnet, p->chip[mring_member(p, c, r)],
                           p->chip[mring_member(p, c, r + 1)]);
    lat = MAX(lat, sum / p->n);
  }
  return st->nsteps * (lat + bw);
}

double ts_coll_plan_time_full(const ts_coll_plan *p, gboolean full)
{
  g_return_val_if_fail(p != NULL, -1.0);
  ts_eval *ev = ts_eval_new(&p->tnet);
  g_autoptr(GArray) flows = g_array_new(FALSE, FALSE, sizeof(ts_flow));
  double stage_s[TS_COLL_MAX_STAGES];
  double hd_rs[32];
  int hd_rs_steps = 0;
  double total = 0.0, trot_rs = -1.0;
  gboolean multi = plan_multi_node(p);
  for (int i = 0; i < p->nstages; i++) {
    const ts_stage *st = &p->st[i];
    /* The rotated all-gather runs the reduce-scatter's steps backwards (same pieces, sizes). */
    if (st->type == TS_ST_TROT_AG && trot_rs >= 0.0) {
      total += trot_rs;
      continue;
    }
    double before = total;
    int reuse = -1;
    for (int j = 0; j < i && reuse < 0; j++)
      if (same_ring(&p->st[j], st))
        reuse = j;
    if (reuse >= 0) {
      stage_s[i] = stage_s[reuse];
      total += stage_s[i];
      continue;
    }
    if (multi &&
        (st->type == TS_ST_MRING_RS || st->type == TS_ST_MRING_AG || st->type == TS_ST_PTREE)) {
      stage_s[i] = pipelined_time(p, st, full, flows);
      total += stage_s[i];
      continue;
    }
    if (st->type == TS_ST_RING_RS || st->type == TS_ST_RING_AG) {
      /* Every step alike but the half step of an even bidirectional ring; the step timed for
       * the others has every edge busy (an open line's all-gather starts so, its
       * reduce-scatter ends so). */
      int L = line_len(p, st), h = ring_half_step(st, L);
      int rep = st->type == TS_ST_RING_RS && st->bidir ? st->nsteps - 1 : 0;
      double v = 0.0;
      if (h < 0 || st->nsteps > 1) {
        g_array_set_size(flows, 0);
        ts_coll_stage_flows(p, st, rep, full, flows);
        v += ts_eval_step(ev, (const ts_flow *)(void *)flows->data, (int)flows->len) *
             (st->nsteps - (h >= 0 ? 1 : 0));
      }
      if (h >= 0) {
        g_array_set_size(flows, 0);
        ts_coll_stage_flows(p, st, h, full, flows);
        v += ts_eval_step(ev, (const ts_flow *)(void *)flows->data, (int)flows->len);
      }
      stage_s[i] = v;
      total += v;
      continue;
    }
    int steps = stage_uniform(st) ? 1 : st->nsteps;
    for (int t = 0; t < steps; t++) {
      double v;
      if (st->type == TS_ST_HD_AG && st->nsteps == hd_rs_steps) {
        v = hd_rs[st->nsteps - 1 - t];
      } else {
        g_array_set_size(flows, 0);
        ts_coll_stage_flows(p, st, t, full, flows);
        v = ts_eval_step(ev, (const ts_flow *)(void *)flows->data, (int)flows->len);
      }
      if (st->type == TS_ST_HD_RS && t < 32) {
        hd_rs[t] = v;
        hd_rs_steps = t + 1;
      }
      total += stage_uniform(st) ? v * st->nsteps : v;
    }
    stage_s[i] = total - before;
    if (st->type == TS_ST_TROT_RS)
      trot_rs = total - before;
  }
  ts_eval_free(ev);
  return total + (p->nsteps > 0 ? p->base_lat_s : 0.0);
}

double ts_coll_plan_time(const ts_coll_plan *p)
{
  return ts_coll_plan_time_full(p, FALSE);
}

double ts_coll_plan_eval_flows(const ts_coll_plan *p)
{
  double total = 0.0;
  for (int i = 0; i < p->nstages; i++) {
    const ts_stage *st = &p->st[i];
    int L = line_len(p, st);
    double lines = nlines(p, time_mask(p, st->free_mask, st->lp, FALSE));
    double two = st->bidir ? 2.0 : 1.0;
    switch (st->type) {
    case TS_ST_RING_RS:
    case TS_ST_RING_AG:
      total += lines * L * two * (ring_half_step(st, L) >= 0 ? 2.0 : 1.0);
      break;
    case TS_ST_CHAIN:
      total += lines * (L - 1) * two;
      break;
    case TS_ST_TROT_RS:
    case TS_ST_TROT_AG:
      for (int c = 0; c < p->ntp; c++) {
        int j = p->tp[c];
        total += (double)st->nsteps *
                 nlines(p, time_mask(p, all_pieces(p) & ~(1u << j), j, FALSE)) * psize(p, j) * 2.0;
      }
      break;
    case TS_ST_MRING_RS:
    case TS_ST_MRING_AG:
      total += (double)p->nrings * p->n;
      break;
    case TS_ST_PTREE:
      total += 2.0 * p->ntrees * (p->n - 1);
      break;
    case TS_ST_NVLS_RS:
    case TS_ST_NVLS_AG:
    case TS_ST_NVLS_AR:
      total += (st->type == TS_ST_NVLS_AR ? 2.0 : 1.0) * p->n * (p->n - 1);
      break;
    case TS_ST_PAIRWISE:
      total += (double)st->nsteps * lines * L * 2.0;
      break;
    case TS_ST_DIRECT_BCAST:
      total += p->n - 1;
      break;
    case TS_ST_DIRECT_RS:
    case TS_ST_DIRECT_AG:
    case TS_ST_DIRECT_A2A:
      total += (double)p->n * (p->n - 1);
      break;
    case TS_ST_TREE_REDUCE:
    case TS_ST_TREE_BCAST:
      total += p->n - 1; /* every member but the root sends once (receives once) */
      break;
    case TS_ST_HD_RS:
    case TS_ST_HD_AG:
      for (int k = 0; k < st->nsteps; k++) {
        int j, dj;
        hd_piece(p, k, &j, &dj);
        total +=
            (double)nlines(p, time_mask(p, all_pieces(p) & ~(1u << j), j, FALSE)) * psize(p, j);
      }
      break;
    }
  }
  return total;
}

/* ---- building plans ---- */

static gboolean is_pow2(int n)
{
  return n > 0 && (n & (n - 1)) == 0;
}

static gboolean algo_supports(ts_coll_kind kind, ts_coll_algo algo)
{
  switch (algo) {
  case TS_ALGO_RING:
  case TS_ALGO_TORUS:
  case TS_ALGO_TORUS_DIMWISE:
  case TS_ALGO_HIERARCHICAL:
  case TS_ALGO_DIRECT:
    return TRUE;
  case TS_ALGO_BIDIR_RING:
    return kind != TS_COLL_ALLTOALL;
  case TS_ALGO_TREE:
    return kind == TS_COLL_ALLREDUCE || kind == TS_COLL_BROADCAST;
  case TS_ALGO_HALVING_DOUBLING:
  case TS_ALGO_NCCL_RING:
  case TS_ALGO_NVLS:
    return kind == TS_COLL_ALLREDUCE || kind == TS_COLL_REDUCESCATTER || kind == TS_COLL_ALLGATHER;
  case TS_ALGO_NCCL_TREE:
    return kind == TS_COLL_ALLREDUCE;
  default:
    return FALSE;
  }
}

static ts_stage *add_stage(ts_coll_plan *p, ts_stage_type type, int nsteps, int lp, guint free_mask,
                           gboolean bidir)
{
  g_assert(p->nstages < TS_COLL_MAX_STAGES);
  ts_stage *st = &p->st[p->nstages++];
  *st = (ts_stage){.type = type,
                   .first_step = p->nsteps,
                   .nsteps = nsteps,
                   .lp = lp,
                   .free_mask = free_mask,
                   .bidir = bidir,
                   .nseg = 1};
  p->nsteps += nsteps;
  return st;
}

/* A ring reduce-scatter or all-gather along piece lp (-1: the snake). */
static void add_ring(ts_coll_plan *p, ts_stage_type type, int lp, guint free_mask, gboolean bidir)
{
  gboolean open = bidir && line_open(p, lp);
  int L = lp < 0 ? p->n : psize(p, lp);
  ts_stage *st = add_stage(p, type, ring_nsteps(L, bidir, open), lp, free_mask, bidir);
  st->open = open;
}

/* Pipeline depth K of a chain: minimises (K + L - 2) * step(S/K), where a step costs
 * a + b*S/K with a the latency and b the seconds per byte of its slowest edge (the classic
 * optimum K* = sqrt((L-2) b S / a)); the exact model decides between floor and ceil. */
static gint64 chain_segments(const ts_coll_plan *p, ts_stage *st)
{
  int L = line_len(p, st);
  double part_bytes = p->bytes / (st->bidir ? 2.0 : 1.0);
  gint64 kmax = st->bidir ? p->count / 2 : p->count;
  kmax = CLAMP(kmax, 1, (gint64)1 << 20);
  if (L <= 2 || part_bytes <= 0.0 || kmax == 1)
    return 1;
  st->nseg = 1;
  g_autoptr(GArray) flows = g_array_new(FALSE, FALSE, sizeof(ts_flow));
  ts_coll_stage_flows(p, st, 0, FALSE, flows);
  ts_eval *ev = ts_eval_new(&p->tnet);
  ts_flow *f = (ts_flow *)(void *)flows->data;
  int nf = (int)flows->len;
  for (int i = 0; i < nf; i++)
    f[i].bytes = 0.0;
  double a = ts_eval_step(ev, f, nf);
  for (int i = 0; i < nf; i++)
    f[i].bytes = part_bytes;
  double b = (ts_eval_step(ev, f, nf) - a) / part_bytes;
  double kstar = a > 0.0 ? sqrt((L - 2) * b * part_bytes / a) : (double)kmax;
  gint64 cand[3] = {1, (gint64)floor(kstar), (gint64)ceil(kstar)};
  gint64 best_k = 1;
  double best = INFINITY;
  for (int c = 0; c < 3; c++) {
    gint64 k = CLAMP(cand[c], 1, kmax);
    for (int i = 0; i < nf; i++)
      f[i].bytes = part_bytes / (double)k;
    double total = (double)(k + L - 2) * ts_eval_step(ev, f, nf);
    if (total < best || (total == best && k < best_k)) {
      best = total;
      best_k = k;
    }
  }
  ts_eval_free(ev);
  return best_k;
}

static void add_chain(ts_coll_plan *p, int lp, guint free_mask, gboolean bidir)
{
  int L = lp < 0 ? p->n : psize(p, lp);
  if (L < 2)
    return;
  ts_stage *st = add_stage(p, TS_ST_CHAIN, 0, lp, free_mask, bidir);
  st->nseg = chain_segments(p, st);
  st->nsteps = (int)MIN(st->nseg + L - 2, G_MAXINT / 2);
  p->nsteps += st->nsteps;
}

/* Pipeline depth K of a pipelined stage of K + fill steps whose steps all cost
 * step(S/K) = a + B/K: K* = sqrt(fill B / a); the exact model decides between floor and ceil
 * (at most kmax segments). */
static gint64 pipe_segments(const ts_coll_plan *p, ts_stage *st, int fill, gint64 kmax)
{
  kmax = CLAMP(kmax, 1, (gint64)1 << 20);
  if (p->bytes <= 0.0 || kmax == 1)
    return 1;
  st->nseg = 1;
  g_autoptr(GArray) flows = g_array_new(FALSE, FALSE, sizeof(ts_flow));
  ts_coll_stage_flows(p, st, 0, FALSE, flows);
  ts_flow *f = (ts_flow *)(void *)flows->data;
  int nf = (int)flows->len;
  g_autofree double *b0 = g_new(double, MAX(nf, 1));
  for (int i = 0; i < nf; i++)
    b0[i] = f[i].bytes;
  ts_eval *ev = ts_eval_new(&p->tnet);
  for (int i = 0; i < nf; i++)
    f[i].bytes = 0.0;
  double a = ts_eval_step(ev, f, nf);
  for (int i = 0; i < nf; i++)
    f[i].bytes = b0[i];
  double B = ts_eval_step(ev, f, nf) - a;
  double kstar = a > 0.0 ? sqrt(fill * B / a) : (double)kmax;
  gint64 cand[3] = {1, (gint64)floor(MIN(kstar, 1e15)), (gint64)ceil(MIN(kstar, 1e15))};
  gint64 best_k = 1;
  double best = INFINITY;
  for (int c = 0; c < 3; c++) {
    gint64 k = CLAMP(cand[c], 1, kmax);
    for (int i = 0; i < nf; i++)
      f[i].bytes = b0[i] / (double)k;
    double total = (double)(k + fill) * ts_eval_step(ev, f, nf);
    if (total < best || (total == best && k < best_k)) {
      best = total;
      best_k = k;
    }
  }
  ts_eval_free(ev);
  return best_k;
}

static void add_pipe(ts_coll_plan *p, ts_stage_type type, int fill, gint64 kmax)
{
  ts_stage *st = add_stage(p, type, 0, -1, 0, FALSE);
  st->nseg = pipe_segments(p, st, fill, kmax);
  st->nsteps = (int)MIN(st->nseg + fill, G_MAXINT / 2);
  p->nsteps += st->nsteps;
}

static gboolean build_stages(ts_coll_plan *p, GError **error)
{
  ts_coll_kind kind = p->kind;
  ts_coll_algo algo = p->algo;
  int n = p->n, P = p->g.npieces;
  gboolean rs = kind == TS_COLL_ALLREDUCE || kind == TS_COLL_REDUCESCATTER;
  gboolean ag = kind == TS_COLL_ALLREDUCE || kind == TS_COLL_ALLGATHER;
  if (!algo_supports(kind, algo)) {
    g_autoptr(GString) ok = g_string_new(NULL);
    for (int a = TS_ALGO_AUTO + 1; a < TS_ALGO_NALGOS; a++)
      if (algo_supports(kind, (ts_coll_algo)a))
        g_string_append_printf(ok, "%s%s", ok->len > 0 ? ", " : "",
                               ts_coll_algo_name((ts_coll_algo)a));
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "algorithm '%s' does not implement %s; expected one of: %s",
                ts_coll_algo_name(algo), ts_coll_kind_name(kind), ok->str);
    return FALSE;
  }
  if (algo == TS_ALGO_HALVING_DOUBLING && !is_pow2(n)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "halving-doubling %s over %d members: expected a power-of-two group size",
                ts_coll_kind_name(kind), n);
    return FALSE;
  }
  if (algo == TS_ALGO_NVLS)
    for (int k = 0; k < P; k++)
      if (psize(p, k) > 1 && !p->net.in_switch[p->g.p[k].dim]) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "nvls %s spans the topology's dimension %d (its [dim.*] groups counted "
                    "from 0), which does not reduce in the switch; expected nvls only over "
                    "dimensions with in_switch_reduction = true (--collective-algorithm auto "
                    "picks it where it applies)",
                    ts_coll_kind_name(kind), p->g.p[k].dim);
        return FALSE;
      }
  if (n == 1)
    return TRUE;
  switch (algo) {
  case TS_ALGO_NCCL_RING:
    if (rs)
      add_stage(p, TS_ST_MRING_RS, n - 1, -1, 0, FALSE);
    if (ag)
      add_stage(p, TS_ST_MRING_AG, n - 1, -1, 0, FALSE);
    break;
  case TS_ALGO_NCCL_TREE: {
    build_trees(p);
    int fill = 0;
    for (int k = 0; k < p->ntrees; k++)
      fill = MAX(fill, 2 * p->tH[k] - 1);
    add_pipe(p, TS_ST_PTREE, fill, p->count / p->ntrees);
    break;
  }
  case TS_ALGO_NVLS:
    if (kind == TS_COLL_ALLREDUCE)
      add_pipe(p, TS_ST_NVLS_AR, 1, p->count / n);
    else
      add_stage(p, rs ? TS_ST_NVLS_RS : TS_ST_NVLS_AG, 1, -1, 0, FALSE);
    break;
  case TS_ALGO_RING:
  case TS_ALGO_BIDIR_RING: {
    gboolean bidir = algo == TS_ALGO_BIDIR_RING;
    if (kind == TS_COLL_ALLTOALL)
      add_stage(p, TS_ST_PAIRWISE, n / 2, -1, 0, FALSE);
    else if (kind == TS_COLL_BROADCAST)
      add_chain(p, -1, 0, bidir);
    if (rs)
      add_ring(p, TS_ST_RING_RS, -1, 0, bidir);
    if (ag)
      add_ring(p, TS_ST_RING_AG, -1, 0, bidir);
    break;
  }
  case TS_ALGO_TORUS:
  case TS_ALGO_TORUS_DIMWISE:
  case TS_ALGO_HIERARCHICAL:
    p->ntp = 0;
    for (int k = 0; k < P; k++)
      if (psize(p, k) >= 2)
        p->tp[p->ntp++] = k;
    if (algo == TS_ALGO_TORUS && kind == TS_COLL_ALLREDUCE && p->ntp >= 2) {
      /* All dimensions at once (see TS_ST_TROT_RS): the bandwidth-optimal multi-dimensional
       * torus all-reduce, as TPU pods run it over their ICI. The other kinds keep the
       * dimension-wise schedule below, whose shards are contiguous (ts_coll_shard). */
      int steps = 0;
      for (int c = 0; c < p->ntp; c++) {
        int j = p->tp[c];
        gboolean b = p->net.shape[p->g.p[j].dim] != TS_SHAPE_SWITCH;
        steps += ring_nsteps(psize(p, j), b, b && line_open(p, j));
      }
      add_stage(p, TS_ST_TROT_RS, steps, -1, 0, TRUE);
      add_stage(p, TS_ST_TROT_AG, steps, -1, 0, TRUE);
      break;
    }
    /* Dimension by dimension (Ying et al. 2018, arXiv:1811.06992, "2-D torus all-reduce"; Kumar et
     * al. 2019, arXiv:1909.09756): reduce-scatter along piece 0 on S, piece 1 on S/n0, ..., then
     * all-gather back. Torus uses two counter-rotating rings on ring and mesh dims; the
     * hierarchical variant one ring everywhere, which on [node x net] switches is Horovod's
     * hierarchical all-reduce (reduce-scatter in the node, all-reduce across, all-gather). */
    for (int k = 0; k < P; k++) {
      int nk = psize(p, k);
      gboolean bidir =
          algo != TS_ALGO_HIERARCHICAL && p->net.shape[p->g.p[k].dim] != TS_SHAPE_SWITCH;
      guint others = all_pieces(p) & ~(1u << k);
      if (nk < 2)
        continue;
      if (kind == TS_COLL_ALLTOALL)
        add_stage(p, TS_ST_PAIRWISE, nk / 2, k, others, FALSE);
      else if (kind == TS_COLL_BROADCAST)
        add_chain(p, k, (1u << k) - 1u, bidir);
      else if (rs)
        add_ring(p, TS_ST_RING_RS, k, others, bidir);
    }
    if (ag)
      for (int k = P - 1; k >= 0; k--) {
        int nk = psize(p, k);
        gboolean bidir =
            algo != TS_ALGO_HIERARCHICAL && p->net.shape[p->g.p[k].dim] != TS_SHAPE_SWITCH;
        if (nk >= 2)
          add_ring(p, TS_ST_RING_AG, k, all_pieces(p) & ~(1u << k), bidir);
      }
    break;
  case TS_ALGO_TREE:
    if (kind == TS_COLL_ALLREDUCE)
      add_stage(p, TS_ST_TREE_REDUCE, ceil_log2(n), -1, 0, FALSE);
    add_stage(p, TS_ST_TREE_BCAST, ceil_log2(n), -1, 0, FALSE);
    break;
  case TS_ALGO_HALVING_DOUBLING:
    if (rs)
      add_stage(p, TS_ST_HD_RS, ceil_log2(n), -1, 0, FALSE);
    if (ag)
      add_stage(p, TS_ST_HD_AG, ceil_log2(n), -1, 0, FALSE);
    break;
  case TS_ALGO_DIRECT:
    if (kind == TS_COLL_ALLTOALL)
      add_stage(p, TS_ST_DIRECT_A2A, 1, -1, 0, FALSE);
    else if (kind == TS_COLL_BROADCAST)
      add_stage(p, TS_ST_DIRECT_BCAST, 1, -1, 0, FALSE);
    if (rs)
      add_stage(p, TS_ST_DIRECT_RS, 1, -1, 0, FALSE);
    if (ag)
      add_stage(p, TS_ST_DIRECT_AG, 1, -1, 0, FALSE);
    break;
  default:
    break;
  }
  return TRUE;
}

/* Boustrophedon (snake) order: digit 0 runs up, then back down after digit 1 moves one step,
 * and so on for higher digits (a reflected mixed-radix counter), so consecutive positions
 * differ by one in exactly one digit: array neighbours for unit-stride pieces. */
static void fill_snake(ts_coll_plan *p)
{
  int d[TS_MAX_PIECES] = {0}, dir[TS_MAX_PIECES];
  for (int j = 0; j < p->g.npieces; j++)
    dir[j] = 1;
  int m = 0;
  for (int r = 0; r < p->n; r++) {
    p->snake[r] = m;
    for (int j = 0; j < p->g.npieces; j++) {
      int nd = d[j] + dir[j];
      if (nd >= 0 && nd < psize(p, j)) {
        d[j] = nd;
        m += dir[j] * p->radix[j];
        break;
      }
      dir[j] = -dir[j];
    }
  }
}

/* Chip of every member for the group at chip 0, by a mixed-radix counter (no divisions). */
static void fill_chips(ts_coll_plan *p)
{
  int d[TS_MAX_PIECES] = {0}, w[TS_MAX_PIECES];
  for (int j = 0; j < p->g.npieces; j++)
    w[j] = p->g.p[j].stride * p->net.stride[p->g.p[j].dim];
  int c = 0;
  for (int m = 0; m < p->n; m++) {
    p->chip[m] = c;
    for (int j = 0; j < p->g.npieces; j++) {
      c += w[j];
      if (++d[j] < psize(p, j))
        break;
      c -= psize(p, j) * w[j];
      d[j] = 0;
    }
  }
}

/* NCCL's tuning model (src/graph/tuning.cc, NVIDIA/nccl 5067397, 2026-06): per-hop latency of
 * each protocol relative to Simple (hwLatencies, NVLink and network rows), fixed latency per
 * (algorithm, protocol) (baseLatencies, us), and the fraction of the bus bandwidth each
 * protocol reaches. Facts, not code: the dimension's own latency_us is Simple's per-step
 * latency, and its bandwidth what Simple reaches; the others follow by these ratios. */
enum { HW_NVLINK, HW_NET };
static const double hw_lat[2][2][3] = {
    /* NVLink: tree {LL, LL128, Simple}, ring {LL, LL128, Simple} */
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}},
    /* network */
    {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}},
};
static const double base_lat_us[2][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}}; /* tree, ring */
/* Simple's ring pieces in one node (set_proto, nccl_channels) and the share of the padded
 * bytes' link time paid. */
#define NCCL_PIECE_BYTES 131072.0
#define NCCL_PIECE_PAD_SHARE 0.25

static int tree_levels(int nodes);

static void set_proto(ts_coll_plan *p, ts_coll_proto proto)
{
  p->tnet = p->net;
  p->proto = proto;
  p->base_lat_s = 0.0;
  if (proto == TS_PROTO_NONE || proto == TS_PROTO_AUTO)
    return;
  int q = proto - TS_PROTO_LL; /* 0 LL, 1 LL128, 2 Simple */
  gboolean multi = FALSE;      /* "nNodes > 1": a piece beyond the node dimension */
  for (int j = 0; j < p->g.npieces; j++)
    if (p->g.p[j].dim != 0 && p->g.p[j].size > 1)
      multi = TRUE;
  if (p->algo == TS_ALGO_NVLS) {
    /* nvlsEfficiency (0.85 on Hopper), Simple only; NVLS has no base latency. The port also
     * carries the member's own chunk through the switch (nvls_port_factor). */
    for (int d = 0; d < p->net.arr.ndims; d++)
      if (p->net.in_switch[d])
        p->tnet.bw_Bps[d] = p->net.bw_Bps[d] * p->net.isr_eff[d] / nvls_port_factor(p->kind, p->n);
    return;
  }
  int a = p->algo == TS_ALGO_NCCL_TREE ? 0 : 1;
  /* The node's Simple hop in a group across nodes (nccl_node_hop_latency_us of the outermost
   * dimension spanned that gives one): the node's own steps are measured by one thread driving
   * all its GPUs, a group across nodes runs one process per GPU. */
  double node_hop = 0.0;
  for (int j = 0; j < p->g.npieces; j++)
    if (p->g.p[j].dim != 0 && p->g.p[j].size > 1 && p->net.nccl_node_hop_s[p->g.p[j].dim] > 0)
      node_hop = p->net.nccl_node_hop_s[p->g.p[j].dim];
  for (int d = 0; d < p->net.arr.ndims; d++) {
    /* Ring: LL and LL128 reach the dimension's fractions of Simple (NCCL's nominal 0.5 and
     * 0.92 unless the topology gives measured ones). Tree: 0.92 of the ring's Simple, and
     * NCCL's tree-to-ring ratios for LL (1/3.8 against 1/2) and LL128 (7/9 in one node,
     * 120/128 across nodes, against 0.92). */
    double ll = p->net.ll_frac[d], ll128 = p->net.ll128_frac[d];
    double frac = q == 0 ? ll : q == 1 ? ll128 : 1.0;
    if (a == 0)
      frac = 0.92 * (q == 0   ? ll * (1.0 / 3.8) / 0.5
                     : q == 1 ? ll128 * (multi ? 120.0 / 128.0 : 7.0 / 9.0) / 0.92
                              : 1.0);
    /* Per-step latency: Simple's is the dimension's latency_us, LL's and LL128's the measured
     * ring steps (nccl_ll_latency_us, nccl_ll128_latency_us) or, where none is given, Simple's
     * times NCCL's hwLat ratio. The tree's hop is the ring's step of the same protocol times
     * NCCL's tree-to-ring ratio for that protocol (NVLink: LL 0.6 / 0.6, LL128 1.25 / 1.9;
     * network: LL 5.0 / 2.7, LL128 8.5 / 4.0). NCCL releases before 2.18.1 also multiplied LL's
     * intra-node latency by 1.8 on several nodes; the hwLat values above are 2.18's and later,
     * which dropped it (it made the tree's LL hop inside a node 2.76 us against the 1.8 us the
     * node's ring step measures). */
    int hw = d == 0 ? HW_NVLINK : HW_NET;
    double r = hw_lat[hw][a][q] / hw_lat[hw][a][2];
    p->tnet.lat_s[d] = p->net.lat_s[d] * r;
    if (q < 2 && p->net.nccl_step_s[d][q] > 0)
      p->tnet.lat_s[d] = p->net.nccl_step_s[d][q] * hw_lat[hw][a][q] / hw_lat[hw][1][q];
    /* LL inside a node of a multi-node group: NCCL's NVLink hop (0.6 us, ring and tree). The
     * node's measured LL step (~1.8 us) comes from nccl-tests driving every GPU of the node from
     * one thread (Echo's and vTrain's one-node logs: "nThread 1 nGpus 8"), whose kernel launches
     * are serialised; multi-node runs, like training, have one process per GPU. Echo's 1-8 KiB
     * all-reduce across nodes takes 35 us on 2 nodes, ~20 us more per doubling: ~10 us per tree
     * level of the network, leaving ~0.7 us per hop for the node's chain of 8. */
    if (multi && hw == HW_NVLINK && q == 0)
      p->tnet.lat_s[d] = hw_lat[hw][a][q] * 1e-6;
    /* LL128 and Simple there: the given Simple hop times NCCL's ratio (ring LL128 1.9 / 3.4,
     * tree Simple 4.0 / 3.4, tree LL128 1.25 / 3.4). */
    if (multi && hw == HW_NVLINK && q > 0 && node_hop > 0)
      p->tnet.lat_s[d] = node_hop * hw_lat[hw][a][q] / hw_lat[hw][1][2];
    p->tnet.bw_Bps[d] = p->net.bw_Bps[d] * frac;
  }
  /* The fixed cost: NCCL's baseLat, or the measured one of the outermost dimension spanned
   * that gives one (the network's across nodes: measured on groups that span it; given for the
   * ring, the tree keeps NCCL's difference to the ring). */
  double given = 0.0;
  int outer = -1;
  for (int j = 0; j < p->g.npieces; j++)
    if (p->g.p[j].size > 1 && p->net.nccl_base_s[p->g.p[j].dim][q] > 0)
      outer = MAX(outer, p->g.p[j].dim);
  if (outer >= 0)
    given = p->net.nccl_base_s[outer][q];
  double base =
      given > 0 ? given + (base_lat_us[a][q] - base_lat_us[1][q]) * 1e-6 : base_lat_us[a][q] * 1e-6;
  p->base_lat_s = MAX(base, 0.0);
  /* Local work on the buffer (reductions and copies through the chip's memory), paid once per
   * byte whatever the group size: what makes nccl-tests' bus bandwidth grow with the group. */
  double rate = INFINITY;
  for (int j = 0; j < p->g.npieces; j++) {
    double v = p->net.nccl_local_Bps[p->g.p[j].dim];
    if (p->g.p[j].size > 1 && v > 0)
      rate = MIN(rate, v);
  }
  if (isfinite(rate))
    p->base_lat_s += p->bytes / rate;
  /* Simple's ring all-reduce in one node moves each channel's per-rank chunk, bytes / (channels
   * x n), in pieces of 128 KiB: the buffer is padded to a whole number of pieces per channel and
   * rank, Q = channels x n x 128 KiB (nccl_channels; 24 on an HGX A100). vTrain's nccl-tests LUT
   * (1 MiB steps) shows it: the time steps up just past each multiple of Q = 3n MiB (6, 12, 18,
   * 24 MiB on 2, 4, 6, 8 GPUs) and is flat-to-falling against a straight line until the next,
   * from half a piece per chunk (Q / 2) up; on nccl-tests' powers of two the padding alternates
   * between odd and even powers. A quarter of the padded bytes' link time is paid
   * (NCCL_PIECE_PAD_SHARE: of 0, 1/4, 1/2 and 1, the one that fits both A100 nodes' training
   * halves best; docs/accuracy.md). */
  if (q == 2 && a == 1 && !multi && p->kind == TS_COLL_ALLREDUCE && p->net.nccl_channels[0] > 0 &&
      p->n > 1) {
    double Q = (double)p->net.nccl_channels[0] * p->n * NCCL_PIECE_BYTES;
    if (p->bytes >= 0.5 * Q)
      p->base_lat_s += NCCL_PIECE_PAD_SHARE * (ceil(p->bytes / Q) * Q - p->bytes) * 2.0 *
                       (p->n - 1) / p->n / p->net.bw_Bps[0];
  }
  /* LL's cost per channel (nccl_ll_channel_latency_us, the largest of the dimensions spanned:
   * the channels are the chips' own thread blocks). NCCL runs a collective on as many threads
   * as bytes / threadThreshold allows, up to 512 per channel (enqueue.cc, topoGetAlgoInfo;
   * LL's threshold NCCL_LL_THREAD_THRESHOLD = 8 B per thread, times nRanks for the ring,
   * tuning.cc): bytes / (8 B x 512 x n) channels for the ring, bytes / (8 B x 512) for the tree,
   * counted fractionally (below one channel NCCL halves the threads instead). */
  double per_ch = 0.0, net_ch = 0.0;
  for (int j = 0; j < p->g.npieces; j++)
    if (p->g.p[j].size > 1 && p->g.p[j].dim == 0)
      per_ch = MAX(per_ch, p->net.nccl_ll_channel_s[0]);
    else if (p->g.p[j].size > 1)
      net_ch = MAX(net_ch, p->net.nccl_ll_channel_s[p->g.p[j].dim]);
  /* Across nodes a network dimension's cost per channel beyond the first is paid on every
   * network hop of the data's path (each GPU's proxy thread serves its channels' network sends
   * and receives in turn; the first channel's are in the hop's latency): the tree's
   * 2 x log2(nodes) levels (up and down), the ring's network steps (2 (nodes - 1) for
   * all-reduce). Echo's LL rows show it: from 8 to 16 KiB (2 to 4 channels) the time grows by
   * ~11, 26, 42 and 71 us on 2, 4, 8 and 16 nodes, with the tree's levels. */
  double ch = p->bytes / (8.0 * 512.0 * (a == 1 ? p->n : 1));
  int nodes = p->local > 0 ? p->n / p->local : 1;
  double hops =
      a == 0 ? 2.0 * tree_levels(nodes) : (p->kind == TS_COLL_ALLREDUCE ? 2.0 : 1.0) * (nodes - 1);
  if (q == 0)
    p->base_lat_s += per_ch * ch + net_ch * MAX(hops, 0.0) * MAX(ch - 1.0, 0.0);
}

/* Tree bandwidth correction of NCCL's model for all-reduce (treeCorrectionFactor, tuning.cc):
 * per protocol, per power of two of bytes / 64 from 64 B to 256 MiB. */
static const double tree_corr[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6, .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6, .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

/* treeCorrectionFactor for protocol q at this buffer size (1 outside 64 B to 256 MiB). */
static double tree_correction(int q, double bytes)
{
  double l = bytes >= 64.0 ? floor(log2(bytes / 64.0)) : -1.0;
  return l >= 0 && l < 23 ? tree_corr[q][(int)l] : 1.0;
}

/* The tree's network levels across NODES nodes as NCCL counts them (floor(log2(nodes))). */
static int tree_levels(int nodes)
{
  int lg = 0;
  while ((2 << lg) <= nodes)
    lg++;
  return lg;
}

/* NCCL's per-channel caps for Ampere (tuning.cc: perChMaxTreeBws, N2 and N4 columns;
 * perChMaxRingLL128Bws and perChMaxTreeLL128Bws, 20 GB/s) and llMaxBws of multi-node hosts
 * (index by CPU: Intel 39.0 / 20.4, AMD 22.5 / 19.0 GB/s on 2 / more nodes), GB/s. */
static const double tree_ch_GBps[2] = {23.6, 17.8};
static const double ll128_ch_GBps = 20.0;
static const double ll_max_GBps[2][2] = {{39.0, 20.4}, {22.5, 19.0}}; /* Intel, AMD */

/* NCCL's estimate across nodes where the network dimension names its search's channels
 * (nccl_model_channels; nccl_model_bus_bandwidth_GBps = channels x bwInter), from tuning.cc
 * (ncclTopoTuneModel, ncclTopoGetAlgoTime; NCCL 2.18-2.21, the releases of 2023-2024):
 * bandwidths per algorithm and protocol, ring LL min(llMaxBw, bus / 4), ring LL128
 * min(0.92 bus, channels x 20), tree min(0.92 bus, channels x perChMaxTreeBw) with LL at
 * min(1/3.8 of it, llMaxBw) and LL128 at min(120/128 of it, channels x 20); the ring's algorithm
 * bandwidth n / (2 (n - 1)) of its bus bandwidth, the tree's half, times the tree's correction per
 * size; latencies baseLat + the ring's (nsteps - 2 nodes) intra-node steps at max(hwLat NVLink,
 * net overhead, x3 for Simple) and 2 nodes network steps (hwLat NET), x1.4 for Simple (the
 * ring's plateau), or the tree's 2 ((ppn - 1) NVLink + log2(nodes) NET) hops. Returns -1 where no
 * dimension spanned gives channels (the caller falls back to the older estimate). Seconds. */
static double nccl_model_time_net(const ts_net *nw, ts_coll_kind kind, ts_coll_algo algo,
                                  const ts_group_shape *g, double bytes, int q, int n, int local)
{
  int nodes = n / MAX(local, 1), ch = 0;
  double bus = 0.0, overhead = 0.0;
  for (int j = 0; j < g->npieces; j++) {
    int d = g->p[j].dim;
    if (d == 0 || g->p[j].size <= 1 || nw->nccl_model_ch[d] <= 0)
      continue;
    ch = nw->nccl_model_ch[d];
    bus = nw->nccl_model_Bps[d] > 0 ? nw->nccl_model_Bps[d] : ch * 24e9;
    overhead = nw->nccl_net_overhead_s[d] > 0 ? nw->nccl_net_overhead_s[d] * 1e6 : 1.0;
  }
  if (ch <= 0)
    return -1.0;
  int n4 = nodes > 2, amd = overhead >= 1.5;
  double llmax = ll_max_GBps[amd][n4] * 1e9, ch_bw = ch * ll128_ch_GBps * 1e9;
  int nsteps = kind == TS_COLL_ALLREDUCE ? 2 * (n - 1) : n - 1;
  double bw, lat;
  if (algo != TS_ALGO_NCCL_TREE) {
    bw = q == 0 ? MIN(llmax, bus / 4.0) : q == 1 ? MIN(0.92 * bus, ch_bw) : bus;
    bw *= (double)n / nsteps;
    double intra = MAX(hw_lat[HW_NVLINK][1][q], q == 2 ? 3.0 * overhead : overhead);
    int ninter = kind == TS_COLL_ALLREDUCE ? 2 * (nodes - 1) : nodes - 1;
    lat = base_lat_us[1][q] + (nsteps - ninter) * intra + ninter * hw_lat[HW_NET][1][q];
    if (q == 2 && kind == TS_COLL_ALLREDUCE)
      lat *= 1.4;
  } else {
    double tb = MIN(0.92 * bus, ch * tree_ch_GBps[n4] * 1e9);
    bw = q == 0 ? MIN(tb / 3.8, llmax) : q == 1 ? MIN(tb * 120.0 / 128.0, ch_bw) : tb;
    bw *= 0.5 * tree_correction(q, bytes);
    int lg = tree_levels(nodes);
    lat = base_lat_us[0][q] +
          2.0 * ((local - 1) * hw_lat[HW_NVLINK][0][q] + lg * hw_lat[HW_NET][0][q]);
  }
  return lat * 1e-6 + bytes / bw;
}

/* NCCL's own estimate of a collective with one (algorithm, protocol) (tuning.cc,
 * ncclTopoTuneModel and ncclTopoGetAlgoTime, NVIDIA/nccl 5067397), which is how NCCL *chooses*
 * (enqueue.cc, topoGetAlgoInfo: the lowest estimate wins). What nccl-tests then measures is the
 * chosen protocol's real cost, which trainsim times with the dimension's measured constants
 * (set_proto): the two differ, and where NCCL's estimate of LL128 is optimistic NCCL keeps it
 * past the size where Simple would already be faster (the knee nccl-tests shows at 8-32 MiB on
 * 8 A100s). The model's bus bandwidth for Simple is the graph's (bwIntra or bwInter times the
 * channels); trainsim's stand-in is what Simple reaches here: the node's port rate in one node,
 * and across nodes the smaller of it and the node's NICs' rate (NCCL uses bwIntra on <= 2
 * nodes), or the dimension's nccl_model_bus_bandwidth_GBps where given. The rest are NCCL's
 * constants: LL at half of it (NCCL caps it further by llMaxBw; LL's estimate decides
 * nothing here, see ts_coll_plan_build_net), LL128 0.92; the tree 0.92 (NCCL's per-channel tree
 * caps are not modelled), LL 1/3.8, LL128 7/9 (one node) or 120/128, times its correction per size;
 * latency baseLat + per-step hwLat (NVLink inside a node, network between, at least 1 us network
 * overhead (x3 for Simple) per step on several nodes; the ring's Simple latency x1.4 across
 * nodes, its plateau). Seconds. */
static double nccl_model_time(const ts_net *nw, ts_coll_kind kind, ts_coll_algo algo,
                              const ts_group_shape *g, double bytes, int q)
{
  int n = 1, local = 1;
  for (int j = 0; j < g->npieces; j++)
    n *= g->p[j].size;
  for (int j = 0; j < g->npieces && g->p[j].dim == 0; j++)
    local *= g->p[j].size;
  if (n <= 1)
    return 0.0;
  int nodes = n / MAX(local, 1);
  if (nodes > 1) {
    double v = nccl_model_time_net(nw, kind, algo, g, bytes, q, n, local);
    if (v >= 0.0)
      return v;
  }
  double bnode = INFINITY, bnet = INFINITY;
  for (int j = 0; j < g->npieces; j++) {
    int d = g->p[j].dim;
    if (g->p[j].size <= 1)
      continue;
    double given = nw->nccl_model_Bps[d];
    if (d == 0)
      bnode = MIN(bnode, given > 0 ? given : nw->bw_Bps[d]);
    else
      bnet = MIN(bnet, given > 0 ? given : nw->bw_Bps[d] * local / MAX(nw->port_share[d], 1));
  }
  double bus = nodes <= 2 && isfinite(bnode) ? bnode : MIN(bnode, bnet);
  if (!isfinite(bus))
    bus = MIN(bnode, bnet);
  int nsteps = kind == TS_COLL_ALLREDUCE ? 2 * (n - 1) : n - 1;
  int a = algo == TS_ALGO_NCCL_TREE ? 0 : 1;
  double bw, lat;
  double intra = hw_lat[HW_NVLINK][a][q], inter = hw_lat[HW_NET][a][q];
  if (local == 1)
    inter = hw_lat[HW_NET][0][q]; /* one GPU per node: the tree's network latency */
  if (a == 1) {
    bw = q == 0 ? 0.5 * bus : q == 1 ? 0.92 * bus : bus;
    bw *= (double)n / nsteps;
    if (nodes > 1)
      intra = MAX(intra, q == 2 ? 3.0 : 1.0);
    int ninter = nodes == 1 ? 0 : kind == TS_COLL_ALLREDUCE ? 2 * (nodes - 1) : nodes - 1;
    lat = base_lat_us[1][q] + (nsteps - ninter) * intra + ninter * inter;
    if (q == 2 && nodes > 1 && kind == TS_COLL_ALLREDUCE)
      lat *= 1.4;
  } else {
    double tb = 0.92 * bus;
    bw = q == 0 ? tb / 3.8 : q == 1 ? tb * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0) : tb;
    bw *= 0.5 * tree_correction(q, bytes);
    int lg = tree_levels(nodes);
    lat = base_lat_us[0][q] + 2.0 * ((local - 1) * intra + lg * inter);
  }
  return lat * 1e-6 + (bw > 0 ? bytes / bw : INFINITY);
}

gboolean nccl_model_spans(const ts_net *nw, const ts_group_shape *g)
{
  for (int j = 0; j < g->npieces; j++)
    if (g->p[j].dim != 0 && g->p[j].size > 1 && nw->nccl_model_ch[g->p[j].dim] > 0)
      return TRUE;
  return FALSE;
}

gboolean ts_group_in_one_node(const ts_group_shape *g)
{
  for (int j = 0; j < g->npieces; j++)
    if (g->p[j].size > 1 && g->p[j].dim != 0)
      return FALSE;
  return TRUE;
}

static ts_coll_plan *build_one(const ts_net *nw, ts_coll_kind kind, ts_coll_algo algo,
                               ts_coll_proto proto, const ts_group_shape *g, gint64 count,
                               double elem_bytes, double bytes, GError **error)
{
  ts_coll_plan *p = g_new0(ts_coll_plan, 1);
  p->net = *nw;
  p->kind = kind;
  p->algo = algo;
  p->g = *g;
  p->count = count;
  p->elem_bytes = elem_bytes;
  p->bytes = bytes;
  p->n = 1;
  for (int j = 0; j < g->npieces; j++) {
    p->radix[j] = p->n;
    p->n *= g->p[j].size;
  }
  /* Only the ring algorithms walk the snake (lines with lp = -1). */
  if (algo == TS_ALGO_RING || algo == TS_ALGO_BIDIR_RING || algo == TS_ALGO_NCCL_RING) {
    p->snake = g_new(int, p->n);
    fill_snake(p);
  }
  p->chip = g_new(int, p->n);
  fill_chips(p);
  /* NCCL's rings: one per chip of a node (channel / NIC) when the group spans several pieces. */
  p->nrings = g->npieces >= 2 && g->p[0].size > 1 ? MIN(g->p[0].size, 16) : 1;
  /* Members per node: the leading pieces on dimension 0. */
  p->local = 1;
  for (int j = 0; j < g->npieces && g->p[j].dim == 0; j++)
    p->local *= g->p[j].size;
  set_proto(p, proto);
  p->nccl_model_s =
      algo == TS_ALGO_NCCL_RING || algo == TS_ALGO_NCCL_TREE
          ? nccl_model_time(nw, kind, algo, g, bytes,
                            proto >= TS_PROTO_LL && proto <= TS_PROTO_SIMPLE ? proto - TS_PROTO_LL
                                                                             : 2)
          : 0.0;
  if (!build_stages(p, error)) {
    ts_coll_plan_free(p);
    return NULL;
  }
  return p;
}

ts_coll_plan *ts_coll_plan_build(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                                 const ts_group_shape *g, gint64 count, double elem_bytes,
                                 double bytes, GError **error)
{
  return ts_coll_plan_build_proto(t, kind, algo, TS_PROTO_AUTO, g, count, elem_bytes, bytes, error);
}

ts_coll_plan *ts_coll_plan_build_proto(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                                       ts_coll_proto proto, const ts_group_shape *g, gint64 count,
                                       double elem_bytes, double bytes, GError **error)
{
  ts_net nw;
  ts_net_init(&nw, t);
  return ts_coll_plan_build_net(&nw, kind, algo, proto, g, count, elem_bytes, bytes, error);
}

ts_coll_plan *ts_coll_plan_build_net(const ts_net *nw, ts_coll_kind kind, ts_coll_algo algo,
                                     ts_coll_proto proto, const ts_group_shape *g, gint64 count,
                                     double elem_bytes, double bytes, GError **error)
{
  if (!ts_coll_algo_is_nccl(algo) || proto != TS_PROTO_AUTO)
    return build_one(nw, kind, algo, ts_coll_algo_is_nccl(algo) ? proto : TS_PROTO_NONE, g, count,
                     elem_bytes, bytes, error);
  /* NCCL picks the protocol whose time in its own model is lowest (enqueue.cc,
   * topoGetAlgoInfo; nccl_model_time); ties keep the earlier of LL, LL128, Simple. NVLS runs
   * Simple only. */
  ts_coll_plan *c[3] = {NULL, NULL, NULL};
  for (int q = TS_PROTO_LL; q <= TS_PROTO_SIMPLE; q++) {
    if (algo == TS_ALGO_NVLS && q != TS_PROTO_SIMPLE)
      continue;
    c[q - TS_PROTO_LL] = build_one(nw, kind, algo, (ts_coll_proto)q, g, count, elem_bytes, bytes,
                                   q == TS_PROTO_SIMPLE || algo != TS_ALGO_NVLS ? error : NULL);
    if (c[q - TS_PROTO_LL] == NULL)
      break;
  }
  /* LL128 against Simple inside one node: NCCL's own model decides. LL: where its measured cost
   * is lower than that choice's (NCCL's estimate of LL depends on llMaxBw and hwLat values that
   * changed between releases, and the release of a measurement is often not known; the LL128 /
   * Simple boundary is what nccl-tests shows as its knee). Across nodes NCCL's estimate rests on
   * the channel counts and per-channel caps of its topology search, which trainsim does not
   * know: there the measured costs decide, as before. */
  gboolean one_node = ts_group_in_one_node(g);
  if (!one_node && nccl_model_spans(nw, g) && algo != TS_ALGO_NVLS) {
    /* Across a network that names NCCL's search channels: NCCL's model picks among all three. */
    int best = -1;
    for (int k = 0; k < 3; k++)
      if (c[k] != NULL && (best < 0 || c[k]->nccl_model_s < c[best]->nccl_model_s))
        best = k;
    for (int k = 0; k < 3; k++)
      if (k != best)
        ts_coll_plan_free(c[k]);
    return best >= 0 ? c[best] : NULL;
  }
  int pick = 2;
  if (c[2] == NULL)
    pick = c[1] != NULL ? 1 : 0;
  else if (c[1] != NULL &&
           (one_node ? c[1]->nccl_model_s < c[2]->nccl_model_s
                     : ts_coll_plan_time_full(c[1], FALSE) < ts_coll_plan_time_full(c[2], FALSE)))
    pick = 1;
  if (c[0] != NULL && c[pick] != NULL && pick != 0 &&
      ts_coll_plan_time_full(c[0], FALSE) < ts_coll_plan_time_full(c[pick], FALSE))
    pick = 0;
  for (int k = 0; k < 3; k++)
    if (k != pick)
      ts_coll_plan_free(c[k]);
  return c[pick];
}

/* ---- public plan API ---- */

/* What ts_coll_decompose checks of its arguments other than the group shape. */
static gboolean decompose_args_ok(ts_coll_kind kind, ts_coll_algo algo, gint64 count,
                                  double elem_bytes, GError **error)
{
  if ((int)kind < 0 || kind >= TS_COLL_NKINDS) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "collective kind %d: expected one of "
                "allreduce, reducescatter, allgather, alltoall, broadcast",
                (int)kind);
    return FALSE;
  }
  if ((int)algo <= TS_ALGO_AUTO || algo >= TS_ALGO_NALGOS || ts_coll_algo_is_choice(algo)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "%s: algorithm '%s': expected a concrete algorithm (auto and nccl are resolved "
                "by ts_coll_time)",
                ts_coll_kind_name(kind), ts_coll_algo_name(algo));
    return FALSE;
  }
  if (count < 0 || !(elem_bytes > 0.0) || !isfinite(elem_bytes)) {
    g_autofree char *eb = ts_dtostr(elem_bytes);
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "%s: count=%" G_GINT64_FORMAT " elem_bytes=%s: expected count >= 0 and "
                "elem_bytes > 0",
                ts_coll_kind_name(kind), count, eb);
    return FALSE;
  }
  return TRUE;
}

ts_coll_plan *ts_coll_decompose(const ts_topo *t, ts_coll_kind kind, ts_coll_algo algo,
                                const ts_group_shape *g, gint64 count, double elem_bytes,
                                GError **error)
{
  g_return_val_if_fail(t != NULL && g != NULL, NULL);
  if (!decompose_args_ok(kind, algo, count, elem_bytes, error) ||
      !ts_group_shape_valid(t, g, error))
    return NULL;
  return ts_coll_plan_build(t, kind, algo, g, count, elem_bytes, (double)count * elem_bytes, error);
}

ts_coll_plan *ts_coll_decompose_array(const ts_array *a, const ts_dim *dims, ts_coll_kind kind,
                                      ts_coll_algo algo, const ts_group_shape *g, gint64 count,
                                      double elem_bytes, GError **error)
{
  g_return_val_if_fail(a != NULL && dims != NULL && g != NULL, NULL);
  if (!decompose_args_ok(kind, algo, count, elem_bytes, error) ||
      !ts_array_shape_valid(a, g, error))
    return NULL;
  ts_net nw;
  ts_net_init_array(&nw, a, dims);
  return ts_coll_plan_build_net(&nw, kind, algo, TS_PROTO_AUTO, g, count, elem_bytes,
                                (double)count * elem_bytes, error);
}

void ts_coll_plan_free(ts_coll_plan *p)
{
  if (p == NULL)
    return;
  g_free(p->snake);
  g_free(p->chip);
  g_free(p->tparent);
  g_free(p->theight);
  g_free(p->tdepth);
  g_free(p->tH);
  g_free(p->sent_bytes);
  g_free(p);
}

int ts_coll_plan_nmembers(const ts_coll_plan *p)
{
  return p->n;
}

int ts_coll_plan_nsteps(const ts_coll_plan *p)
{
  g_return_val_if_fail(p != NULL, 0);
  return p->nsteps;
}

double ts_coll_plan_bytes_sent(const ts_coll_plan *p, int m)
{
  g_return_val_if_fail(p != NULL && m >= 0 && m < p->n, 0.0);
  /* Counted from the transfers themselves (once per plan), so a check against it checks
   * the decomposition, not a formula. */
  ts_coll_plan *mp = (ts_coll_plan *)p;
  if (g_once_init_enter(&mp->sent_bytes)) {
    double *v = g_new0(double, p->n);
    g_autoptr(GArray) xs = g_array_new(FALSE, FALSE, sizeof(ts_xfer));
    for (int s = 0; s < p->nsteps; s++) {
      g_array_set_size(xs, 0);
      ts_coll_plan_step(p, s, xs);
      for (guint i = 0; i < xs->len; i++) {
        const ts_xfer *x = &g_array_index(xs, ts_xfer, i);
        v[x->src] += (double)x->count * p->elem_bytes;
      }
    }
    g_once_init_leave(&mp->sent_bytes, v);
  }
  return p->sent_bytes[m];
}

void ts_coll_shard(const ts_coll_plan *p, int m, gint64 *offset, gint64 *count)
{
  g_return_if_fail(p != NULL && m >= 0 && m < p->n && offset != NULL && count != NULL);
  gboolean layout = p->kind == TS_COLL_ALLREDUCE || p->kind == TS_COLL_REDUCESCATTER ||
                    p->kind == TS_COLL_ALLGATHER;
  if (layout && (p->algo == TS_ALGO_TORUS || p->algo == TS_ALGO_TORUS_DIMWISE ||
                 p->algo == TS_ALGO_HIERARCHICAL)) {
    segment(p, m, p->g.npieces, offset, count);
  } else if (layout && p->algo == TS_ALGO_HALVING_DOUBLING) {
    gint64 a, b;
    hd_range(p, m, ceil_log2(p->n), &a, &b);
    part(0, p->count, p->n, a, offset, count);
  } else {
    part(0, p->count, p->n, m, offset, count);
  }
}

ts_coll_proto ts_coll_plan_proto(const ts_coll_plan *p)
{
  g_return_val_if_fail(p != NULL, TS_PROTO_NONE);
  return p->proto;
}

void ts_coll_plan_proto_costs(const ts_coll_plan *p, double *bw_frac, double *base_lat_s)
{
  g_return_if_fail(p != NULL);
  double f = 1.0;
  for (int j = 0; j < p->g.npieces; j++) {
    int d = p->g.p[j].dim;
    if (p->g.p[j].size > 1 && p->net.bw_Bps[d] > 0) {
      f = p->tnet.bw_Bps[d] / p->net.bw_Bps[d];
      break;
    }
  }
  if (bw_frac != NULL)
    *bw_frac = f;
  if (base_lat_s != NULL)
    *base_lat_s = p->nsteps > 0 ? p->base_lat_s : 0.0;
}
