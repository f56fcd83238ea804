/* ts_validate_moe: split validation of a mixture-of-experts block (models/validate-moe.ini):
 * the planner's trace for ep (with dp and tp) executed on real kernels, every chip holding
 * only its experts and its tensor-parallel shard, tokens dispatched to their experts and
 * combined back by real all-to-alls over the trace's ep groups, and the result compared with
 * a single-processor reference written separately (every expert applied to its tokens in
 * place, no capacity buffers, no collectives). docs/validation.md, "Expert parallelism".
 *
 * The block: n = LN(x); shared = swiglu(n Ws1) Ws2; logits = n Wg (the router layer);
 * p = softmax(logits); each token takes its top_k experts by p (ties: the lower index), with
 * weights p_e (no renormalisation, as DeepSeek-V2); each expert takes at most C =
 * ceil(capacity_factor x tokens x top_k / experts) copies of each sequence, first choices of
 * every token before second choices, in token order (GShard, Lepikhin et al. 2021, section
 * 2.2); copies over capacity are dropped (the token keeps its residual and shared expert);
 * y = x + shared + sum_kept p_e swiglu(n We1) We2; a dense head and a cross-entropy on every
 * token. The walk runs every rank's program in lockstep (one op of every rank, then the next):
 * the programs of dp, ep and tp ranks are the same sequence; the order is a topological one
 * chosen to expose missing dependencies (walk_order). */
#include "ts_collexec.h"
#include "ts_util.h"
#include "ts_validate_priv.h"

#include <math.h>
#include <string.h>

/* The block's layers, in the order of the model file. */
enum { M_NORM, M_SH1, M_SH2, M_ROUTER, M_FC1, M_FC2, M_HEAD, M_NLAYERS };
/* Parameter tensors. */
enum { T_GAMMA, T_BETA, T_SH1, T_SH2, T_ROUTER, T_FC1, T_FC2, T_HEAD, T_N };
static const int tensor_layer[T_N] = {M_NORM, M_NORM, M_SH1, M_SH2, M_ROUTER, M_FC1, M_FC2, M_HEAD};
static const char *const tensor_suffix[T_N] = {"gamma", "beta", "w", "w", "w", "w", "w", "w"};

typedef struct {
  const ts_model *m;
  int d, T, E, K, F, Fs, classes, C; /* width, tokens, experts, top_k, expert and shared widths,
                                        classes, capacity per expert per sequence */
  double cf;
  gint64 numel[T_N];
} mo_net;

/* ---- the model ----------------------------------------------------------------------- */

gboolean vd_moe_model(const ts_model *m)
{
  gboolean moe = FALSE;
  for (int i = 0; i < m->nlayers; i++) {
    if (m->layers[i].kv_lora_rank > 0)
      return FALSE; /* latent attention is refused first, naming its layer (vd_net_new) */
    moe |= m->layers[i].experts > 0;
  }
  return moe;
}

#define MOE_SHAPE                                                                                  \
  "mixture-of-experts block: norm, shared_fc1 (swiglu, column), shared_fc2 (row), router "         \
  "(dense to experts, replicated), fc1 (experts, swiglu, column, capacity_factor), fc2 "           \
  "(experts, residual, row), head (loss, replicated); no biases (models/validate-moe.ini)"

static gboolean moe_mismatch(const ts_model *m, int i, GError **error, const char *what)
{
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "%s: layer '%s': %s; expected the validation " MOE_SHAPE, m->path ? m->path : m->name,
              i < m->nlayers ? m->layers[i].name : "(none)", what);
  return FALSE;
}

static gboolean moe_match(const ts_model *m, mo_net *n, GError **error)
{
  if (m->kind == NULL || strcmp(m->kind, "layers") != 0) {
    g_set_error(
        error, TS_ERROR, TS_ERROR_INPUT,
        "%s: kind='%s': a mixture of experts the split validator does not execute; "
        "expected an explicit layer list (kind = layers) matching the validation " MOE_SHAPE,
        m->path ? m->path : m->name, m->kind ? m->kind : "");
    return FALSE;
  }
  if (m->nlayers != M_NLAYERS)
    return moe_mismatch(m, MIN(m->nlayers, M_NLAYERS), error, "a different layer count");
  static const ts_layer_kind kinds[M_NLAYERS] = {TS_LAYER_NORM,  TS_LAYER_DENSE, TS_LAYER_DENSE,
                                                 TS_LAYER_DENSE, TS_LAYER_DENSE, TS_LAYER_DENSE,
                                                 TS_LAYER_DENSE};
  static const ts_tp_mode tps[M_NLAYERS] = {TS_TP_REPLICATED, TS_TP_COLUMN, TS_TP_ROW,
                                            TS_TP_REPLICATED, TS_TP_COLUMN, TS_TP_ROW,
                                            TS_TP_REPLICATED};
  static const gboolean gated[M_NLAYERS] = {FALSE, TRUE, FALSE, FALSE, TRUE, FALSE, FALSE};
  static const gboolean experts[M_NLAYERS] = {FALSE, FALSE, FALSE, FALSE, TRUE, TRUE, FALSE};
  const ts_layer *L = m->layers;
  for (int i = 0; i < M_NLAYERS; i++) {
    if (L[i].kind != kinds[i] || L[i].tp != tps[i] || L[i].gated != gated[i] ||
        (L[i].experts > 0) != experts[i] || (i > 0 && L[i].bias) || L[i].rms)
      return moe_mismatch(m, i, error, "a different kind, tp mode, gating, experts or bias");
    if (L[i].tokens != L[0].tokens)
      return moe_mismatch(m, i, error, "a different token count");
  }
  n->m = m;
  n->d = (int)L[M_NORM].in_features;
  n->T = (int)L[M_NORM].tokens;
  n->Fs = (int)L[M_SH1].out_features / 2;
  n->E = (int)L[M_FC1].experts;
  n->K = (int)L[M_FC1].top_k;
  n->F = (int)L[M_FC1].out_features / 2;
  n->cf = L[M_FC1].capacity_factor;
  n->classes = (int)L[M_HEAD].out_features;
  if (L[M_SH1].in_features != n->d || L[M_SH2].in_features != n->Fs ||
      L[M_SH2].out_features != n->d || L[M_ROUTER].in_features != n->d ||
      L[M_ROUTER].out_features != n->E || L[M_FC1].in_features != n->d ||
      L[M_FC2].in_features != n->F || L[M_FC2].out_features != n->d ||
      L[M_HEAD].in_features != n->d)
    return moe_mismatch(m, M_SH2, error,
                        "widths that do not chain (d -> shared -> d, d -> "
                        "experts for the router, d -> expert -> d)");
  if (L[M_FC2].experts != n->E || L[M_FC2].top_k != n->K || L[M_FC2].capacity_factor != n->cf)
    return moe_mismatch(m, M_FC2, error,
                        "fc1 and fc2 route differently (experts, top_k or capacity_factor)");
  if (!(n->cf > 0))
    return moe_mismatch(m, M_FC1, error,
                        "no capacity_factor (dropless): the trace sizes the all-to-alls for "
                        "balanced routing, so a dropless run's bytes depend on the routing; "
                        "expected capacity_factor > 0 (each expert's slots fixed)");
  double c = n->cf * n->T * n->K / n->E;
  n->C = (int)ceil(c - 1e-9);
  if (fabs(c - n->C) > 1e-9)
    return moe_mismatch(m, M_FC1, error,
                        "capacity_factor x tokens x top_k / experts is not a whole number of "
                        "slots (the trace's all-to-all bytes would not be a buffer's)");
  n->numel[T_GAMMA] = n->numel[T_BETA] = n->d;
  n->numel[T_SH1] = (gint64)n->d * 2 * n->Fs;
  n->numel[T_SH2] = (gint64)n->Fs * n->d;
  n->numel[T_ROUTER] = (gint64)n->d * n->E;
  n->numel[T_FC1] = (gint64)n->E * n->d * 2 * n->F;
  n->numel[T_FC2] = (gint64)n->E * n->F * n->d;
  n->numel[T_HEAD] = (gint64)n->d * n->classes;
  for (int i = 0; i < M_NLAYERS; i++) {
    double have = 0;
    for (int t = 0; t < T_N; t++)
      if (tensor_layer[t] == i)
        have += (double)n->numel[t];
    if (have != L[i].params)
      return moe_mismatch(m, i, error, "parameters the validator does not account for");
  }
  return TRUE;
}

/* Whole-tensor indices of the shard tp member t of tp, ep rank j of ep holds, in storage
 * order. Column splits keep member t's block of the gate and of the up columns (Megatron-LM's
 * linear_fc1); experts are split by ep in blocks of E / ep. */
static gint64 *moe_shard(const mo_net *n, int q, int tp, int t, int ep, int j, gint64 *count)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(gint64));
  int El = n->E / ep;
  switch (q) {
  case T_SH1:
  case T_FC1: {
    int f = q == T_SH1 ? n->Fs : n->F, fl = f / tp;
    int e0 = q == T_SH1 ? 0 : j * El, e1 = q == T_SH1 ? 1 : (j + 1) * El;
    for (int e = e0; e < e1; e++)
      for (int r = 0; r < n->d; r++)
        for (int h = 0; h < 2; h++)
          for (int c = 0; c < fl; c++) {
            gint64 ix = ((gint64)e * n->d + r) * 2 * f + (gint64)h * f + (gint64)t * fl + c;
            g_array_append_val(a, ix);
          }
    break;
  }
  case T_SH2:
  case T_FC2: {
    int f = q == T_SH2 ? n->Fs : n->F, fl = f / tp;
    int e0 = q == T_SH2 ? 0 : j * El, e1 = q == T_SH2 ? 1 : (j + 1) * El;
    for (int e = e0; e < e1; e++)
      for (int r = 0; r < fl; r++)
        for (int c = 0; c < n->d; c++) {
          gint64 ix = ((gint64)e * f + (gint64)t * fl + r) * n->d + c;
          g_array_append_val(a, ix);
        }
    break;
  }
  default:
    for (gint64 ix = 0; ix < n->numel[q]; ix++)
      g_array_append_val(a, ix);
    break;
  }
  *count = a->len;
  return (gint64 *)g_array_free(a, FALSE);
}

/* Parameters and data from the seed (double; rounded to the precision when set). */
static void moe_init(const mo_net *n, guint64 seed, gint64 batch, double **w, double **x, int **lab)
{
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (int q = 0; q < T_N; q++) {
    w[q] = g_new(double, n->numel[q]);
    double fan = q == T_SH2 ? n->Fs : q == T_FC2 ? n->F : n->d;
    for (gint64 j = 0; j < n->numel[q]; j++) {
      double u = ts_rng_normal(&r);
      /* The gate is drawn wider than the rest so that routing is decided by clear margins
       * (a near-tie could flip between precisions, not between splits). */
      w[q][j] = q == T_GAMMA    ? 1.0 + 0.1 * u
                : q == T_BETA   ? 0.1 * u
                : q == T_ROUTER ? 2.0 * u / sqrt(fan)
                                : u / sqrt(fan);
    }
  }
  ts_rng_seed(&r, seed ^ 0xda7a5eedULL);
  gint64 rows = batch * n->T;
  *x = g_new(double, rows * n->d);
  *lab = g_new(int, rows);
  for (gint64 j = 0; j < rows * n->d; j++)
    (*x)[j] = ts_rng_normal(&r);
  for (gint64 j = 0; j < rows; j++)
    (*lab)[j] = (int)ts_rng_below(&r, (guint64)n->classes);
}

/* ---- routing (the definition both executions share) ----------------------------------- */

/* One sequence's routing from its logits ([T][E], read through the kernels' get): expert
 * eid[t][k], weight gate[t][k] (softmax probability), capacity slot pos[t][k] (-1: dropped),
 * and the softmax p[t][E]. */
static void moe_route(const mo_net *n, const vd_kern *k, const void *logits, gint64 row0, int *eid,
                      double *gate, int *pos, double *p)
{
  int T = n->T, E = n->E, K = n->K;
  for (int t = 0; t < T; t++) {
    double mx = -INFINITY, s = 0;
    for (int e = 0; e < E; e++)
      mx = MAX(mx, k->get(logits, (row0 + t) * E + e));
    for (int e = 0; e < E; e++) {
      p[t * E + e] = exp(k->get(logits, (row0 + t) * E + e) - mx);
      s += p[t * E + e];
    }
    for (int e = 0; e < E; e++)
      p[t * E + e] /= s;
    for (int c = 0; c < K; c++) {
      int best = -1;
      for (int e = 0; e < E; e++) {
        gboolean taken = FALSE;
        for (int b = 0; b < c; b++)
          taken |= eid[t * K + b] == e;
        if (!taken && (best < 0 || p[t * E + e] > p[t * E + best]))
          best = e;
      }
      eid[t * K + c] = best;
      gate[t * K + c] = p[t * E + best];
    }
  }
  int *fill = g_new0(int, E);
  for (int c = 0; c < K; c++)
    for (int t = 0; t < T; t++) {
      int e = eid[t * K + c];
      pos[t * K + c] = fill[e] < n->C ? fill[e]++ : -1;
    }
  g_free(fill);
}

/* d logits of one token from d gate weights (softmax backward), in double. */
static void moe_route_bwd(const mo_net *n, const double *p, const int *eid, const double *dgate,
                          double *dlogit)
{
  int E = n->E;
  double *dp = g_new0(double, E), dot = 0;
  for (int c = 0; c < n->K; c++)
    dp[eid[c]] += dgate[c];
  for (int e = 0; e < E; e++)
    dot += dp[e] * p[e];
  for (int e = 0; e < E; e++)
    dlogit[e] = p[e] * (dp[e] - dot);
  g_free(dp);
}

/* ---- the single-processor reference ---------------------------------------------------- */

static void *kbuf(const vd_kern *k, gint64 n)
{
  return g_malloc0(k->elem * (gsize)MAX(n, 1));
}

static void *kfrom(const vd_kern *k, const double *v, gint64 n)
{
  void *b = kbuf(k, n);
  for (gint64 j = 0; j < n; j++)
    k->set(b, j, v[j]);
  return b;
}

#define KP(b, off) ((char *)(b) + (gsize)(off)*k->elem)

/* One step of the reference on the whole batch: accumulates gradients into g, returns the loss
 * (mean over every token). The experts run on gathered rows of their kept tokens. */
static double ref_step(const mo_net *n, const vd_kern *k, void **w, void **g, const void *x,
                       const int *lab, gint64 B)
{
  int d = n->d, T = n->T, E = n->E, K = n->K, F = n->F, Fs = n->Fs;
  gint64 R = B * T;
  void *nrm = kbuf(k, R * d), *mean = kbuf(k, R), *rstd = kbuf(k, R);
  k->layernorm_fwd((int)R, d, x, w[T_GAMMA], w[T_BETA], nrm, mean, rstd);
  void *sz = kbuf(k, R * 2 * Fs), *sa = kbuf(k, R * Fs), *y = kbuf(k, R * d);
  k->dense_fwd((int)R, d, 2 * Fs, nrm, w[T_SH1], NULL, sz);
  k->swiglu_fwd((int)R, Fs, sz, sa);
  k->dense_fwd((int)R, Fs, d, sa, w[T_SH2], NULL, y);
  void *lg = kbuf(k, R * E);
  k->dense_fwd((int)R, d, E, nrm, w[T_ROUTER], NULL, lg);
  int *eid = g_new(int, R *K), *pos = g_new(int, R *K);
  double *gate = g_new(double, R *K), *p = g_new(double, R *E);
  for (gint64 b = 0; b < B; b++)
    moe_route(n, k, lg, b * T, eid + b * T * K, gate + b * T * K, pos + b * T * K, p + b * T * E);
  /* Each expert on the rows of the tokens it keeps, in token order. */
  gint64 *nr = g_new0(gint64, E);
  void **ex = g_new0(void *, E), **ez = g_new0(void *, E), **ea = g_new0(void *, E),
       **eo = g_new0(void *, E);
  gint64 **er = g_new0(gint64 *, E);
  int **ek = g_new0(int *, E);
  for (int e = 0; e < E; e++) {
    gint64 c = 0;
    er[e] = g_new(gint64, R * K);
    ek[e] = g_new(int, R *K);
    for (gint64 t = 0; t < R; t++)
      for (int s = 0; s < K; s++)
        if (eid[t * K + s] == e && pos[t * K + s] >= 0) {
          er[e][c] = t;
          ek[e][c++] = s;
        }
    nr[e] = c;
    ex[e] = kbuf(k, c * d);
    for (gint64 r = 0; r < c; r++)
      memcpy(KP(ex[e], r * d), KP(nrm, er[e][r] * d), k->elem * (gsize)d);
    ez[e] = kbuf(k, c * 2 * F);
    ea[e] = kbuf(k, c * F);
    eo[e] = kbuf(k, c * d);
    if (c > 0) {
      k->dense_fwd((int)c, d, 2 * F, ex[e], KP(w[T_FC1], (gint64)e * d * 2 * F), NULL, ez[e]);
      k->swiglu_fwd((int)c, F, ez[e], ea[e]);
      k->dense_fwd((int)c, F, d, ea[e], KP(w[T_FC2], (gint64)e * F * d), NULL, eo[e]);
    }
  }
  /* y = x + shared + routed, the routed copies added in token order, choice order. */
  k->axpy(R * d, 1.0, x, y);
  for (gint64 t = 0; t < R; t++)
    for (int s = 0; s < K; s++) {
      int e = eid[t * K + s];
      if (pos[t * K + s] < 0)
        continue;
      for (gint64 r = 0; r < nr[e]; r++)
        if (er[e][r] == t && ek[e][r] == s)
          k->axpy(d, gate[t * K + s], KP(eo[e], r * d), KP(y, t * d));
    }
  void *hl = kbuf(k, R * n->classes), *prob = kbuf(k, R * n->classes),
       *dhl = kbuf(k, R * n->classes);
  k->dense_fwd((int)R, d, n->classes, y, w[T_HEAD], NULL, hl);
  double loss = k->xent_fwd((int)R, n->classes, hl, lab, prob) / (double)R;
  k->xent_bwd((int)R, n->classes, prob, lab, 1.0 / (double)R, dhl);
  k->dense_wgrad((int)R, d, n->classes, y, dhl, g[T_HEAD], NULL);
  void *dy = kbuf(k, R * d), *dn = kbuf(k, R * d), *tmp = kbuf(k, R * d);
  k->dense_dgrad((int)R, d, n->classes, dhl, w[T_HEAD], dy);
  /* Routed experts backward; d gate = <expert output, dy>. */
  double *dgate = g_new0(double, R *K);
  for (int e = 0; e < E; e++) {
    gint64 c = nr[e];
    if (c == 0)
      continue;
    void *deo = kbuf(k, c * d), *dea = kbuf(k, c * F), *dez = kbuf(k, c * 2 * F),
         *dex = kbuf(k, c * d);
    for (gint64 r = 0; r < c; r++) {
      gint64 t = er[e][r];
      int s = ek[e][r];
      k->axpy(d, gate[t * K + s], KP(dy, t * d), KP(deo, r * d));
      double dot = 0;
      for (int j = 0; j < d; j++)
        dot += k->get(eo[e], r * d + j) * k->get(dy, t * d + j);
      dgate[t * K + s] = dot;
    }
    k->dense_dgrad((int)c, F, d, deo, KP(w[T_FC2], (gint64)e * F * d), dea);
    k->dense_wgrad((int)c, F, d, ea[e], deo, KP(g[T_FC2], (gint64)e * F * d), NULL);
    k->swiglu_bwd((int)c, F, ez[e], dea, dez);
    k->dense_dgrad((int)c, d, 2 * F, dez, KP(w[T_FC1], (gint64)e * d * 2 * F), dex);
    k->dense_wgrad((int)c, d, 2 * F, ex[e], dez, KP(g[T_FC1], (gint64)e * d * 2 * F), NULL);
    for (gint64 r = 0; r < c; r++)
      k->axpy(d, 1.0, KP(dex, r * d), KP(dn, er[e][r] * d));
    g_free(deo);
    g_free(dea);
    g_free(dez);
    g_free(dex);
  }
  /* Router. */
  void *dlg = kbuf(k, R * E);
  double *dl = g_new(double, E);
  for (gint64 t = 0; t < R; t++) {
    moe_route_bwd(n, p + t * E, eid + t * K, dgate + t * K, dl);
    for (int e = 0; e < E; e++)
      k->set(dlg, t * E + e, dl[e]);
  }
  k->dense_dgrad((int)R, d, E, dlg, w[T_ROUTER], tmp);
  k->axpy(R * d, 1.0, tmp, dn);
  k->dense_wgrad((int)R, d, E, nrm, dlg, g[T_ROUTER], NULL);
  /* Shared expert. */
  void *dsa = kbuf(k, R * Fs), *dsz = kbuf(k, R * 2 * Fs);
  k->dense_dgrad((int)R, Fs, d, dy, w[T_SH2], dsa);
  k->dense_wgrad((int)R, Fs, d, sa, dy, g[T_SH2], NULL);
  k->swiglu_bwd((int)R, Fs, sz, dsa, dsz);
  k->dense_dgrad((int)R, d, 2 * Fs, dsz, w[T_SH1], tmp);
  k->axpy(R * d, 1.0, tmp, dn);
  k->dense_wgrad((int)R, d, 2 * Fs, nrm, dsz, g[T_SH1], NULL);
  k->layernorm_bwd((int)R, d, x, w[T_GAMMA], mean, rstd, dn, tmp, g[T_GAMMA], g[T_BETA]);
  for (int e = 0; e < E; e++) {
    g_free(ex[e]);
    g_free(ez[e]);
    g_free(ea[e]);
    g_free(eo[e]);
    g_free(er[e]);
    g_free(ek[e]);
  }
  void *fr[] = {nrm, mean, rstd, sz, sa,   y,   lg, eid, pos, gate,  p,   nr, ex,  ez, ea,
                eo,  er,   ek,   hl, prob, dhl, dy, dn,  tmp, dgate, dlg, dl, dsa, dsz};
  for (gsize i = 0; i < G_N_ELEMENTS(fr); i++)
    g_free(fr[i]);
  return loss;
}

/* ---- the split execution ----------------------------------------------------------------- */

/* What one chip keeps for one micro-batch. States: 0 absent, 1 a partial sum over tp, 2 set. */
typedef struct {
  void *x, *nrm, *mean, *rstd, *sz, *sa, *sy, *lg, *prob_h, *y;
  int sy_st;
  int *eid, *pos;
  double *gate, *p;
  void *disp, *back;        /* source side, [E][mb C][d] */
  void *xin, *ez, *ea, *eo; /* expert side, [ep][El][mb C][d | 2F/T | F/T | d] */
  int xin_st, eo_st, back_st;
  void *dy, *dn, *dsn; /* grads of y, of the norm's output, the shared expert's part of it */
  void *dsz;           /* grad of the shared expert's first GEMM output */
  int dy_st, dsn_st;
  double *dgate;
  void *deo, *dez, *dxin, *ddisp;
  int deo_st, dxin_st, ddisp_st, dgate_st;
  gboolean fwd[M_NLAYERS], dgrad[M_NLAYERS], wgrad[M_NLAYERS];
} mo_act;

typedef struct {
  int tp, ep, dpo; /* coordinates: tp member, ep rank, dp replica group (outer) */
  int replica;     /* dpo x ep + ep: which samples */
  gint64 n[T_N];
  gint64 *shard[T_N];
  void *w[T_N], *g[T_N], *gs[T_N], *mom[T_N], *v2[T_N];
  gboolean synced[T_N];
  int own_S[T_N], own_m[T_N]; /* ZeRO 1/2: owner chunk own_m of own_S (0: not sharded) */
  int adam_step;
  mo_act *a; /* [micro] */
  double loss, sent, traced;
} mo_rank;

typedef struct {
  const mo_net *n;
  const vd_kern *k;
  const ts_validate_options *o;
  const ts_topo *topo;
  const ts_trace *tr;
  const ts_model *m;
  int tp, ep, D, nmicro, mb, nranks;
  gint64 B;
  const double *x;
  const int *lab;
  mo_rank *r;
  GHashTable *plans;
  GHashTable *algos;
  GPtrArray *notes;
  GHashTable *noted;
  char *failure;
  gint64 ncomp, ncoll;
} mo_exec;

G_GNUC_PRINTF(3, 4)
static void mo_note(mo_exec *x, const char *key, const char *fmt, ...)
{
  if (g_hash_table_contains(x->noted, key))
    return;
  g_hash_table_add(x->noted, g_strdup(key));
  va_list ap;
  va_start(ap, fmt);
  g_ptr_array_add(x->notes, g_strdup_vprintf(fmt, ap));
  va_end(ap);
}

G_GNUC_PRINTF(2, 3)
static gboolean mo_fail(mo_exec *x, const char *fmt, ...)
{
  if (x->failure == NULL) {
    va_list ap;
    va_start(ap, fmt);
    x->failure = g_strdup_vprintf(fmt, ap);
    va_end(ap);
  }
  return FALSE;
}

static gint64 slots(const mo_exec *x)
{
  return (gint64)x->mb * x->n->C; /* per expert, per source chip */
}

static void act_free(mo_act *a)
{
  void *f[] = {a->x,      a->nrm, a->mean, a->rstd, a->sz,   a->sa, a->sy,   a->lg,
               a->prob_h, a->y,   a->eid,  a->pos,  a->gate, a->p,  a->disp, a->back,
               a->xin,    a->ez,  a->ea,   a->eo,   a->dy,   a->dn, a->dsn,  a->dgate,
               a->dsz,    a->deo, a->dez,  a->dxin, a->ddisp};
  for (gsize i = 0; i < G_N_ELEMENTS(f); i++)
    g_free(f[i]);
  memset(a, 0, sizeof *a);
}

/* The routed experts' exchanges (below). */
enum { X_DISPATCH, X_COMBINE, X_COMBINE_BWD, X_DISPATCH_BWD };
static gboolean xch_local(mo_exec *x, int rank, int u, int kind, const char *label);

/* ---- layers on one chip -------------------------------------------------------------- */

static gboolean need(mo_exec *x, int rank, const char *label, gboolean ok, const char *what)
{
  if (!ok)
    return mo_fail(x, "'%s' on chip %d: %s", label, rank, what);
  return TRUE;
}

static gboolean fwd(mo_exec *x, int rank, int layer, int u, const char *label)
{
  const mo_net *n = x->n;
  const vd_kern *k = x->k;
  mo_rank *r = &x->r[rank];
  mo_act *a = &r->a[u];
  int d = n->d, T = x->tp, Fs = n->Fs / T, F = n->F / T, El = n->E / x->ep;
  gint64 R = (gint64)x->mb * n->T, S = slots(x);
  switch (layer) {
  case M_NORM: {
    gint64 row0 = ((gint64)r->replica * x->nmicro * x->mb + (gint64)u * x->mb) * n->T;
    a->x = kfrom(k, x->x + row0 * d, R * d);
    a->nrm = kbuf(k, R * d);
    a->mean = kbuf(k, R);
    a->rstd = kbuf(k, R);
    k->layernorm_fwd((int)R, d, a->x, r->w[T_GAMMA], r->w[T_BETA], a->nrm, a->mean, a->rstd);
    break;
  }
  case M_SH1:
    if (!need(x, rank, label, a->nrm != NULL, "the norm's output is missing"))
      return FALSE;
    a->sz = kbuf(k, R * 2 * Fs);
    a->sa = kbuf(k, R * Fs);
    k->dense_fwd((int)R, d, 2 * Fs, a->nrm, r->w[T_SH1], NULL, a->sz);
    k->swiglu_fwd((int)R, Fs, a->sz, a->sa);
    break;
  case M_SH2:
    if (!need(x, rank, label, a->sa != NULL, "the shared expert's first layer did not run"))
      return FALSE;
    a->sy = kbuf(k, R * d);
    k->dense_fwd((int)R, Fs, d, a->sa, r->w[T_SH2], NULL, a->sy);
    a->sy_st = T > 1 ? 1 : 2;
    break;
  case M_ROUTER:
    if (!need(x, rank, label, a->nrm != NULL, "the norm's output is missing"))
      return FALSE;
    a->lg = kbuf(k, R * n->E);
    k->dense_fwd((int)R, d, n->E, a->nrm, r->w[T_ROUTER], NULL, a->lg);
    break;
  case M_FC1:
    if (!xch_local(x, rank, u, X_DISPATCH, label) ||
        !need(x, rank, label, a->xin_st == 2,
              "its tokens were not dispatched (a missing all-to-all)"))
      return FALSE;
    a->ez = kbuf(k, x->ep * El * S * 2 * F);
    a->ea = kbuf(k, x->ep * El * S * F);
    for (int i = 0; i < x->ep; i++)
      for (int e = 0; e < El; e++) {
        gint64 b = (gint64)i * El + e;
        k->dense_fwd((int)S, d, 2 * F, KP(a->xin, b * S * d),
                     KP(r->w[T_FC1], (gint64)e * d * 2 * F), NULL, KP(a->ez, b * S * 2 * F));
        k->swiglu_fwd((int)S, F, KP(a->ez, b * S * 2 * F), KP(a->ea, b * S * F));
      }
    break;
  case M_FC2:
    if (!need(x, rank, label, a->ea != NULL, "the experts' first layer did not run"))
      return FALSE;
    a->eo = kbuf(k, x->ep * El * S * d);
    for (int i = 0; i < x->ep; i++)
      for (int e = 0; e < El; e++) {
        gint64 b = (gint64)i * El + e;
        k->dense_fwd((int)S, F, d, KP(a->ea, b * S * F), KP(r->w[T_FC2], (gint64)e * F * d), NULL,
                     KP(a->eo, b * S * d));
      }
    a->eo_st = T > 1 ? 1 : 2;
    break;
  case M_HEAD: {
    if (!xch_local(x, rank, u, X_COMBINE, label) ||
        !need(x, rank, label, a->y != NULL,
              "the block's output is missing (the experts' outputs were not combined)"))
      return FALSE;
    void *hl = kbuf(k, R * n->classes);
    a->prob_h = kbuf(k, R * n->classes);
    k->dense_fwd((int)R, d, n->classes, a->y, r->w[T_HEAD], NULL, hl);
    gint64 row0 = ((gint64)r->replica * x->nmicro * x->mb + (gint64)u * x->mb) * n->T;
    r->loss +=
        k->xent_fwd((int)R, n->classes, hl, x->lab + row0, a->prob_h) / (double)(x->B * n->T);
    g_free(hl);
    break;
  }
  }
  a->fwd[layer] = TRUE;
  return TRUE;
}

/* phase: 0 whole backward, 1 input gradient, 2 weight gradient. */
static gboolean bwd(mo_exec *x, int rank, int layer, int u, int phase, const char *label)
{
  const mo_net *n = x->n;
  const vd_kern *k = x->k;
  mo_rank *r = &x->r[rank];
  mo_act *a = &r->a[u];
  int d = n->d, T = x->tp, Fs = n->Fs / T, F = n->F / T, El = n->E / x->ep;
  gint64 R = (gint64)x->mb * n->T, S = slots(x);
  gboolean in = phase != 2, wt = phase != 1;
  if (!need(x, rank, label, a->fwd[layer], "its forward did not run"))
    return FALSE;
  switch (layer) {
  case M_HEAD: {
    gint64 row0 = ((gint64)r->replica * x->nmicro * x->mb + (gint64)u * x->mb) * n->T;
    void *dhl = kbuf(k, R * n->classes);
    k->xent_bwd((int)R, n->classes, a->prob_h, x->lab + row0, 1.0 / (double)(x->B * n->T), dhl);
    k->dense_wgrad((int)R, d, n->classes, a->y, dhl, r->g[T_HEAD], NULL);
    a->dy = kbuf(k, R * d);
    k->dense_dgrad((int)R, d, n->classes, dhl, r->w[T_HEAD], a->dy);
    a->dy_st = 2;
    a->dn = kbuf(k, R * d);
    g_free(dhl);
    break;
  }
  case M_FC2:
    if (!xch_local(x, rank, u, X_COMBINE_BWD, label) ||
        !need(x, rank, label, a->deo_st == 2,
              "the gradient of the experts' outputs did not arrive (a missing all-to-all)"))
      return FALSE;
    a->dez = kbuf(k, x->ep * El * S * 2 * F);
    for (int i = 0; i < x->ep; i++)
      for (int e = 0; e < El; e++) {
        gint64 b = (gint64)i * El + e;
        void *dea = kbuf(k, S * F);
        k->dense_dgrad((int)S, F, d, KP(a->deo, b * S * d), KP(r->w[T_FC2], (gint64)e * F * d),
                       dea);
        k->dense_wgrad((int)S, F, d, KP(a->ea, b * S * F), KP(a->deo, b * S * d),
                       KP(r->g[T_FC2], (gint64)e * F * d), NULL);
        k->swiglu_bwd((int)S, F, KP(a->ez, b * S * 2 * F), dea, KP(a->dez, b * S * 2 * F));
        g_free(dea);
      }
    break;
  case M_FC1:
    if (!need(x, rank, label, a->dez != NULL, "the experts' second layer's backward did not run"))
      return FALSE;
    for (int i = 0; i < x->ep; i++)
      for (int e = 0; e < El; e++) {
        gint64 b = (gint64)i * El + e;
        if (in) {
          if (a->dxin == NULL)
            a->dxin = kbuf(k, x->ep * El * S * d);
          k->dense_dgrad((int)S, d, 2 * F, KP(a->dez, b * S * 2 * F),
                         KP(r->w[T_FC1], (gint64)e * d * 2 * F), KP(a->dxin, b * S * d));
        }
        if (wt)
          k->dense_wgrad((int)S, d, 2 * F, KP(a->xin, b * S * d), KP(a->dez, b * S * 2 * F),
                         KP(r->g[T_FC1], (gint64)e * d * 2 * F), NULL);
      }
    if (in)
      a->dxin_st = T > 1 ? 1 : 2;
    break;
  case M_ROUTER: {
    if (!xch_local(x, rank, u, X_DISPATCH_BWD, label) ||
        !need(x, rank, label, a->dgate_st == 2,
              "the gate weights' gradients are missing (the combine's backward did not run)"))
      return FALSE;
    void *dlg = kbuf(k, R * n->E), *tmp = kbuf(k, R * d);
    double *dl = g_new(double, n->E);
    for (gint64 t = 0; t < R; t++) {
      moe_route_bwd(n, a->p + t * n->E, a->eid + t * n->K, a->dgate + t * n->K, dl);
      for (int e = 0; e < n->E; e++)
        k->set(dlg, t * n->E + e, dl[e]);
    }
    k->dense_dgrad((int)R, d, n->E, dlg, r->w[T_ROUTER], tmp);
    k->axpy(R * d, 1.0, tmp, a->dn);
    k->dense_wgrad((int)R, d, n->E, a->nrm, dlg, r->g[T_ROUTER], NULL);
    g_free(dlg);
    g_free(tmp);
    g_free(dl);
    break;
  }
  case M_SH2:
    if (!need(x, rank, label, a->dy_st == 2, "the block output's gradient is missing"))
      return FALSE;
    a->dsz = kbuf(k, R * 2 * Fs);
    {
      void *dsa = kbuf(k, R * Fs);
      k->dense_dgrad((int)R, Fs, d, a->dy, r->w[T_SH2], dsa);
      k->dense_wgrad((int)R, Fs, d, a->sa, a->dy, r->g[T_SH2], NULL);
      k->swiglu_bwd((int)R, Fs, a->sz, dsa, a->dsz);
      g_free(dsa);
    }
    break;
  case M_SH1:
    if (!need(x, rank, label, a->dsz != NULL,
              "the shared expert's second layer's backward did not run"))
      return FALSE;
    if (wt)
      k->dense_wgrad((int)R, d, 2 * Fs, a->nrm, a->dsz, r->g[T_SH1], NULL);
    if (in) {
      a->dsn = kbuf(k, R * d);
      k->dense_dgrad((int)R, d, 2 * Fs, a->dsz, r->w[T_SH1], a->dsn);
      a->dsn_st = T > 1 ? 1 : 2;
    }
    break;
  case M_NORM: {
    if (!need(x, rank, label, a->dsn_st == 2,
              "the shared expert's input gradient is a partial sum (a missing all-reduce)") ||
        !need(x, rank, label, a->ddisp_st == 2 && a->dgate_st == 2 && a->dgrad[M_ROUTER],
              "the routed experts' and router's input gradients are missing"))
      return FALSE;
    void *dn = kbuf(k, R * d), *dx = kbuf(k, R * d);
    memcpy(dn, a->dn, k->elem * (gsize)(R * d));
    k->axpy(R * d, 1.0, a->dsn, dn);
    k->layernorm_bwd((int)R, d, a->x, r->w[T_GAMMA], a->mean, a->rstd, dn, dx, r->g[T_GAMMA],
                     r->g[T_BETA]);
    g_free(dn);
    g_free(dx);
    break;
  }
  }
  if (in)
    a->dgrad[layer] = TRUE;
  if (wt)
    a->wgrad[layer] = TRUE;
  return TRUE;
}

/* ---- collectives ------------------------------------------------------------------------ */

/* The members (ranks, by member index) of the instance of op's group holding rank. */
static int group_ranks(const mo_exec *x, int group, int rank, int *out)
{
  const ts_group *g = g_ptr_array_index(x->tr->groups, group);
  int member = 0;
  int base = ts_trace_group_base(x->tr, g, rank, &member);
  int n = ts_trace_group_size(g);
  for (int m = 0; m < n; m++)
    out[m] = ts_trace_group_rank(x->tr, g, base, m);
  return n;
}

static const ts_coll_plan *coll_plan(mo_exec *x, const ts_op *op, gint64 count, const char *label)
{
  const ts_group *g = g_ptr_array_index(x->tr->groups, op->group);
  ts_coll_algo algo = op->algo;
  GError *err = NULL;
  if (ts_coll_algo_is_choice(op->algo) &&
      ts_coll_time(x->topo, op->coll, op->algo, &g->shape, op->bytes, &algo, &err) < 0) {
    mo_fail(x, "'%s': %s", label, err->message);
    g_error_free(err);
    return NULL;
  }
  g_hash_table_add(x->algos, g_strdup(ts_coll_algo_name(algo)));
  g_autofree char *key =
      g_strdup_printf("%d/%d/%d/%" G_GINT64_FORMAT, op->coll, algo, op->group, count);
  ts_coll_plan *p = g_hash_table_lookup(x->plans, key);
  if (p != NULL)
    return p;
  p = ts_coll_decompose(x->topo, (ts_coll_kind)op->coll, algo, &g->shape, count, (double)x->k->elem,
                        &err);
  if (p == NULL) {
    mo_fail(x, "'%s': %s", label, err->message);
    g_error_free(err);
    return NULL;
  }
  g_hash_table_insert(x->plans, g_steal_pointer(&key), p);
  return p;
}

/* Runs the collective on the members' buffers (count elements each), counting bytes; the
 * count must be what the trace says the op carries. */
static gboolean run_coll(mo_exec *x, const ts_op *op, const char *label, const int *mem, int nm,
                         void **bufs, gint64 count)
{
  double want = op->bytes / x->m->dtype_bytes;
  if (fabs(want - (double)count) > 1e-9 * MAX(1.0, want)) {
    g_autofree char *key = g_strdup_printf("count-%s", label);
    mo_note(x, key,
            "'%s' carries %" G_GINT64_FORMAT " elements per member on real buffers, the trace "
            "%.6g",
            label, count, want);
  }
  const ts_coll_plan *p = coll_plan(x, op, count, label);
  if (p == NULL)
    return FALSE;
  double *sent = g_new0(double, nm);
  GError *err = NULL;
  gboolean ok = ts_collexec_run(p, x->o->prec, nm, count, bufs, sent, &err);
  if (!ok) {
    mo_fail(x, "'%s': %s", label, err->message);
    g_error_free(err);
  }
  for (int m = 0; m < nm; m++) {
    x->r[mem[m]].sent += sent[m];
    x->r[mem[m]].traced += count > 0 ? sent[m] * want / (double)count : 0;
  }
  g_free(sent);
  x->ncoll++;
  return ok;
}

/* Routing and packing of one chip's tokens before the dispatch: [E][mb C][d], zero slots
 * where an expert has fewer tokens than its capacity. */
static gboolean pack_dispatch(mo_exec *x, int rank, int u, const char *label)
{
  const mo_net *n = x->n;
  const vd_kern *k = x->k;
  mo_act *a = &x->r[rank].a[u];
  if (!need(x, rank, label, a->lg != NULL, "the router did not run"))
    return FALSE;
  int d = n->d, K = n->K, E = n->E;
  gint64 R = (gint64)x->mb * n->T, S = slots(x);
  a->eid = g_new(int, R *K);
  a->pos = g_new(int, R *K);
  a->gate = g_new(double, R *K);
  a->p = g_new(double, R *E);
  for (int b = 0; b < x->mb; b++)
    moe_route(n, k, a->lg, (gint64)b * n->T, a->eid + b * n->T * K, a->gate + b * n->T * K,
              a->pos + b * n->T * K, a->p + b * n->T * E);
  a->disp = kbuf(k, E * S * d);
  for (gint64 t = 0; t < R; t++)
    for (int c = 0; c < K; c++)
      if (a->pos[t * K + c] >= 0) {
        gint64 slot = (gint64)a->eid[t * K + c] * S + (t / n->T) * n->C + a->pos[t * K + c];
        memcpy(KP(a->disp, slot * d), KP(a->nrm, t * d), k->elem * (gsize)d);
      }
  return TRUE;
}

/* The slot of token copy (t, c) in a source-side [E][mb C] buffer, or -1 when dropped. */
static gint64 slot_of(const mo_exec *x, const mo_act *a, gint64 t, int c)
{
  int K = x->n->K;
  if (a->pos[t * K + c] < 0)
    return -1;
  return (gint64)a->eid[t * K + c] * slots(x) + (t / x->n->T) * x->n->C + a->pos[t * K + c];
}

/* The four exchanges of the routed experts: the dispatch (forward, before fc1), the combine
 * (forward, after fc2), and in the backward the combine's gradient (before fc2's backward)
 * and the dispatch's (after fc1's). With ep > 1 each is an all-to-all of the trace; with ep = 1
 * every expert is local and the exchange is a copy, made where its result is first needed. */

/* What a chip sends: a new buffer of `count` elements, or NULL with the run failed. */
static void *xch_pre(mo_exec *x, int rank, int u, int kind, gint64 count, const char *label)
{
  const mo_net *n = x->n;
  const vd_kern *k = x->k;
  mo_act *a = &x->r[rank].a[u];
  int d = n->d;
  gint64 R = (gint64)x->mb * n->T;
  switch (kind) {
  case X_DISPATCH:
    return pack_dispatch(x, rank, u, label) ? g_memdup2(a->disp, k->elem * (gsize)count) : NULL;
  case X_COMBINE:
    if (!need(x, rank, label, a->eo_st == 2,
              a->eo == NULL ? "the experts did not run"
                            : "the experts' outputs are partial sums (a missing all-reduce)"))
      return NULL;
    return g_memdup2(a->eo, k->elem * (gsize)count);
  case X_COMBINE_BWD: {
    /* Each kept copy's output gradient is its gate weight x dy; the weight's gradient is
     * <output, dy> (the output came back with the combine). */
    if (!need(x, rank, label, a->dy_st == 2 && a->back_st == 2,
              "the block output's gradient or the combined outputs are missing"))
      return NULL;
    void *b = kbuf(k, count);
    a->dgate = g_new0(double, R * n->K);
    for (gint64 t = 0; t < R; t++)
      for (int c = 0; c < n->K; c++) {
        gint64 sl = slot_of(x, a, t, c);
        if (sl < 0)
          continue;
        k->axpy(d, a->gate[t * n->K + c], KP(a->dy, t * d), KP(b, sl * d));
        double dot = 0;
        for (int j = 0; j < d; j++)
          dot += k->get(a->back, sl * d + j) * k->get(a->dy, t * d + j);
        a->dgate[t * n->K + c] = dot;
      }
    a->dgate_st = 2;
    return b;
  }
  default:
    if (!need(x, rank, label, a->dxin_st == 2,
              a->dxin == NULL ? "the experts' input gradient was not computed"
                              : "the experts' input gradient is a partial sum (a missing "
                                "all-reduce)"))
      return NULL;
    return g_memdup2(a->dxin, k->elem * (gsize)count);
  }
}

/* What a chip does with what it received (the buffer is taken). */
static gboolean xch_post(mo_exec *x, int rank, int u, int kind, void *buf, const char *label)
{
  const mo_net *n = x->n;
  const vd_kern *k = x->k;
  mo_act *a = &x->r[rank].a[u];
  int d = n->d;
  gint64 R = (gint64)x->mb * n->T;
  switch (kind) {
  case X_DISPATCH:
    a->xin = buf;
    a->xin_st = 2;
    return TRUE;
  case X_COMBINE:
    a->back = buf;
    a->back_st = 2;
    /* y = x + shared + the kept copies weighted by their gates. */
    if (!need(x, rank, label, a->sy_st == 2,
              a->sy == NULL ? "the shared expert did not run"
                            : "the shared expert's output is a partial sum (a missing "
                              "all-reduce)"))
      return FALSE;
    a->y = kbuf(k, R * d);
    memcpy(a->y, a->sy, k->elem * (gsize)(R * d));
    k->axpy(R * d, 1.0, a->x, a->y);
    for (gint64 t = 0; t < R; t++)
      for (int c = 0; c < n->K; c++) {
        gint64 sl = slot_of(x, a, t, c);
        if (sl >= 0)
          k->axpy(d, a->gate[t * n->K + c], KP(a->back, sl * d), KP(a->y, t * d));
      }
    return TRUE;
  case X_COMBINE_BWD:
    a->deo = buf;
    a->deo_st = 2;
    return TRUE;
  default:
    a->ddisp = buf;
    a->ddisp_st = 2;
    for (gint64 t = 0; t < R; t++)
      for (int c = 0; c < n->K; c++) {
        gint64 sl = slot_of(x, a, t, c);
        if (sl >= 0)
          k->axpy(d, 1.0, KP(a->ddisp, sl * d), KP(a->dn, t * d));
      }
    return TRUE;
  }
}

static gint64 xch_count(const mo_exec *x)
{
  return x->n->E * slots(x) * x->n->d;
}

/* ep = 1: the exchange of `kind` made locally, once, when its result is first needed. */
static gboolean xch_local(mo_exec *x, int rank, int u, int kind, const char *label)
{
  if (x->ep > 1)
    return TRUE; /* the trace's all-to-all does it */
  mo_act *a = &x->r[rank].a[u];
  int *st = kind == X_DISPATCH      ? &a->xin_st
            : kind == X_COMBINE     ? &a->back_st
            : kind == X_COMBINE_BWD ? &a->deo_st
                                    : &a->ddisp_st;
  if (*st == 2)
    return TRUE;
  void *b = xch_pre(x, rank, u, kind, xch_count(x), label);
  return b != NULL && xch_post(x, rank, u, kind, b, label);
}

/* An expert-parallel all-to-all of the trace (role ep) on the members of its group. */
static gboolean ep_coll(mo_exec *x, const ts_op *op, const char *label, int layer, int u,
                        gboolean bwd_phase, const int *mem, int nm)
{
  int kind = layer == M_FC1 ? (bwd_phase ? X_DISPATCH_BWD : X_DISPATCH)
                            : (bwd_phase ? X_COMBINE_BWD : X_COMBINE);
  if (op->coll != TS_COLL_ALLTOALL || (layer != M_FC1 && layer != M_FC2))
    return mo_fail(x,
                   "'%s': an expert-parallel %s on layer %d; expected all-to-alls before fc1 "
                   "and after fc2",
                   label, ts_coll_kind_name((ts_coll_kind)op->coll), layer);
  gint64 count = xch_count(x);
  void **bufs = g_new0(void *, nm);
  gboolean ok = TRUE;
  for (int m = 0; m < nm && ok; m++)
    ok = (bufs[m] = xch_pre(x, mem[m], u, kind, count, label)) != NULL;
  if (ok)
    ok = run_coll(x, op, label, mem, nm, bufs, count);
  for (int m = 0; m < nm && ok; m++) {
    ok = xch_post(x, mem[m], u, kind, bufs[m], label);
    bufs[m] = NULL;
  }
  for (int m = 0; m < nm; m++)
    g_free(bufs[m]);
  g_free(bufs);
  return ok;
}

/* A tensor-parallel all-reduce of layer `layer`'s partial sums. */
static gboolean tp_coll(mo_exec *x, const ts_op *op, const char *label, int layer, int u,
                        gboolean bwd_phase, const int *mem, int nm)
{
  const mo_net *n = x->n;
  if (op->coll != TS_COLL_ALLREDUCE)
    return mo_fail(x, "'%s': a %s, where the block has only all-reduces over tp", label,
                   ts_coll_kind_name((ts_coll_kind)op->coll));
  gint64 R = (gint64)x->mb * n->T, S = slots(x), count = 0;
  void **bufs = g_new0(void *, nm);
  int **st = g_new0(int *, nm);
  for (int m = 0; m < nm; m++) {
    mo_act *a = &x->r[mem[m]].a[u];
    if (!bwd_phase && layer == M_SH2) {
      bufs[m] = a->sy, st[m] = &a->sy_st, count = R * n->d;
    } else if (!bwd_phase && layer == M_FC2) {
      bufs[m] = a->eo, st[m] = &a->eo_st, count = n->E * S * n->d;
    } else if (bwd_phase && layer == M_FC1) {
      bufs[m] = a->dxin, st[m] = &a->dxin_st, count = n->E * S * n->d;
    } else if (bwd_phase && layer == M_SH1) {
      bufs[m] = a->dsn, st[m] = &a->dsn_st, count = R * n->d;
    } else {
      g_free(bufs);
      g_free(st);
      return mo_fail(x, "'%s': a tensor-parallel all-reduce the block does not have", label);
    }
    if (bufs[m] == NULL || *st[m] != 1) {
      g_free(bufs);
      g_free(st);
      return mo_fail(x,
                     "'%s' on chip %d: nothing to reduce (its layer did not run, or it ran "
                     "twice)",
                     label, mem[m]);
    }
  }
  gboolean ok = run_coll(x, op, label, mem, nm, bufs, count);
  for (int m = 0; m < nm && ok; m++)
    *st[m] = 2;
  g_free(bufs);
  g_free(st);
  return ok;
}

/* ZeRO 1 and 2 (Rajbhandari et al. 2020): each tensor a chip holds is cut in S equal chunks,
 * member m of the sharding group owning chunk m. A sharded collective's flat buffer holds, at
 * member m's shard (ts_coll_shard), chunk m of each of its tensors in tensor order, so the
 * reduce-scatter leaves each owner the sums of its chunks and the all-gather brings every
 * owner's updated chunks to all (the validator's packing; the trace carries only bytes). FALSE
 * when the shards do not fit the chunks (the validator does not pad). */
static gboolean shard_check(mo_exec *x, const ts_coll_plan *p, int nm, const mo_rank *r,
                            const gboolean *in, const char *label)
{
  gint64 want = 0;
  for (int q = 0; q < T_N; q++)
    if (in[q]) {
      if (r->n[q] % nm != 0)
        return mo_fail(x,
                       "'%s': '%s.%s' holds %" G_GINT64_FORMAT " elements per chip, which the %d "
                       "owners do not divide (the validator does not pad)",
                       label, x->m->layers[tensor_layer[q]].name, tensor_suffix[q], r->n[q], nm);
      want += r->n[q] / nm;
    }
  for (int m = 0; m < nm; m++) {
    gint64 off, cnt;
    ts_coll_shard(p, m, &off, &cnt);
    if (cnt != want)
      return mo_fail(x,
                     "'%s': member %d's shard is %" G_GINT64_FORMAT " elements, its chunks "
                     "%" G_GINT64_FORMAT,
                     label, m, cnt, want);
  }
  return TRUE;
}

/* Copies chunk m of every tensor `in` (tensors[q]) to member m's shard of flat, or back
 * (to_flat FALSE: flat's shard m into chunk m, added when add); every member, or only `only`. */
static void shard_pack(mo_exec *x, const ts_coll_plan *p, int nm, const mo_rank *r,
                       const gboolean *in, void **tensors, void *flat, gboolean to_flat,
                       gboolean add, int only)
{
  const vd_kern *k = x->k;
  for (int m = 0; m < nm; m++) {
    if (only >= 0 && m != only)
      continue;
    gint64 off, cnt;
    ts_coll_shard(p, m, &off, &cnt);
    for (int q = 0; q < T_N; q++) {
      if (!in[q])
        continue;
      gint64 c = r->n[q] / nm;
      void *t = KP(tensors[q], (gint64)m * c), *f = KP(flat, off);
      if (to_flat)
        memcpy(f, t, k->elem * (gsize)c);
      else if (add)
        k->axpy(c, 1.0, f, t);
      else
        memcpy(t, f, k->elem * (gsize)c);
      off += c;
    }
  }
}

/* A gradient all-reduce or reduce-scatter over layers [lo, hi] (a bucket): the chips' local
 * gradients of those layers, flattened in tensor order (all-reduce) or by owner
 * (reduce-scatter), summed into gs. */
static gboolean grad_coll(mo_exec *x, const ts_op *op, const char *label, int lo, int hi,
                          const int *mem, int nm)
{
  const vd_kern *k = x->k;
  gboolean rs = op->coll == TS_COLL_REDUCESCATTER;
  if (op->coll != TS_COLL_ALLREDUCE && !rs)
    return mo_fail(x, "'%s': a %s, where gradients are all-reduced or reduce-scattered", label,
                   ts_coll_kind_name((ts_coll_kind)op->coll));
  gboolean in[T_N] = {0};
  gint64 count = 0;
  for (int q = 0; q < T_N; q++)
    if (tensor_layer[q] >= MIN(lo, hi) && tensor_layer[q] <= MAX(lo, hi)) {
      in[q] = TRUE;
      count += x->r[mem[0]].n[q];
    }
  const ts_coll_plan *p = rs ? coll_plan(x, op, count, label) : NULL;
  if (rs && (p == NULL || !shard_check(x, p, nm, &x->r[mem[0]], in, label)))
    return FALSE;
  void **bufs = g_new0(void *, nm);
  for (int m = 0; m < nm; m++) {
    mo_rank *r = &x->r[mem[m]];
    bufs[m] = kbuf(k, count);
    if (rs) {
      shard_pack(x, p, nm, r, in, r->g, bufs[m], TRUE, FALSE, -1);
      continue;
    }
    gint64 off = 0;
    for (int q = 0; q < T_N; q++)
      if (in[q]) {
        memcpy(KP(bufs[m], off), r->g[q], k->elem * (gsize)r->n[q]);
        off += r->n[q];
      }
  }
  gboolean ok = run_coll(x, op, label, mem, nm, bufs, count);
  for (int m = 0; m < nm && ok; m++) {
    mo_rank *r = &x->r[mem[m]];
    if (rs)
      shard_pack(x, p, nm, r, in, r->gs, bufs[m], FALSE, TRUE, m);
    gint64 off = 0;
    for (int q = 0; q < T_N; q++)
      if (in[q]) {
        if (!rs)
          k->axpy(r->n[q], 1.0, KP(bufs[m], off), r->gs[q]);
        memset(r->g[q], 0, k->elem * (gsize)r->n[q]);
        r->synced[q] = TRUE;
        r->own_S[q] = rs ? nm : 0;
        r->own_m[q] = rs ? m : 0;
        off += r->n[q];
      }
  }
  for (int m = 0; m < nm; m++)
    g_free(bufs[m]);
  g_free(bufs);
  return ok;
}

/* ZeRO 1/2's gather of the updated parameters after the optimizer step: every dense tensor
 * (`updated param all-gather`, over all dp ranks) or every expert tensor (`updated expert param
 * all-gather`, over the dp / ep ranks holding the same experts), each owner's chunks. */
static gboolean param_coll(mo_exec *x, const ts_op *op, const char *label, gboolean experts,
                           const int *mem, int nm)
{
  const vd_kern *k = x->k;
  if (op->coll != TS_COLL_ALLGATHER || op->t_layer > 0)
    return mo_fail(x,
                   "'%s': a %s of %s; the MoE walk executes ZeRO 1 and 2's gather of every "
                   "updated parameter",
                   label, ts_coll_kind_name((ts_coll_kind)op->coll),
                   op->t_layer > 0 ? "one layer" : "the parameters");
  gboolean in[T_N] = {0};
  gint64 count = 0;
  for (int q = 0; q < T_N; q++)
    if ((q == T_FC1 || q == T_FC2) == experts) {
      in[q] = TRUE;
      count += x->r[mem[0]].n[q];
      for (int m = 0; m < nm; m++)
        if (x->r[mem[m]].own_S[q] != nm || x->r[mem[m]].own_m[q] != m)
          return mo_fail(x,
                         "'%s' on chip %d: it does not own chunk %d of %d of '%s.%s' (no "
                         "reduce-scatter over this group gave it one)",
                         label, mem[m], m, nm, x->m->layers[tensor_layer[q]].name,
                         tensor_suffix[q]);
    }
  const ts_coll_plan *p = coll_plan(x, op, count, label);
  if (p == NULL || !shard_check(x, p, nm, &x->r[mem[0]], in, label))
    return FALSE;
  void **bufs = g_new0(void *, nm);
  for (int m = 0; m < nm; m++) {
    bufs[m] = kbuf(k, count);
    shard_pack(x, p, nm, &x->r[mem[m]], in, x->r[mem[m]].w, bufs[m], TRUE, FALSE, m);
  }
  gboolean ok = run_coll(x, op, label, mem, nm, bufs, count);
  for (int m = 0; m < nm && ok; m++)
    shard_pack(x, p, nm, &x->r[mem[m]], in, x->r[mem[m]].w, bufs[m], FALSE, FALSE, -1);
  for (int m = 0; m < nm; m++)
    g_free(bufs[m]);
  g_free(bufs);
  return ok;
}

static void optimizer(mo_exec *x, mo_rank *r, int rank)
{
  const vd_kern *k = x->k;
  const ts_validate_options *o = x->o;
  r->adam_step++;
  for (int q = 0; q < T_N; q++) {
    /* Replicas that must agree: every dp replica for dense tensors, dp / ep for experts. */
    gboolean expert = q == T_FC1 || q == T_FC2;
    int copies = expert ? x->D / x->ep : x->D;
    if (copies > 1 && !r->synced[q]) {
      g_autofree char *key = g_strdup_printf("unsynced-%d", q);
      mo_note(x, key,
              "the optimizer step on chip %d used gradients of '%s.%s' that no data-parallel "
              "synchronisation summed (a missing all-reduce)",
              rank, x->m->layers[tensor_layer[q]].name, tensor_suffix[q]);
    }
    void *g = g_memdup2(r->g[q], k->elem * (gsize)r->n[q]);
    if (r->synced[q])
      k->axpy(r->n[q], 1.0, r->gs[q], g);
    /* ZeRO 1/2: only the owned chunk (the others come with the parameter all-gather). */
    gint64 lo = 0, n = r->n[q];
    if (r->own_S[q] > 0) {
      n = r->n[q] / r->own_S[q];
      lo = n * r->own_m[q];
    }
    if (o->optimizer == TS_VALIDATE_ADAM) {
      ts_adam hp = {o->lr, 0.9, 0.999, 1e-8, o->weight_decay};
      k->adam(n, &hp, r->adam_step, KP(r->w[q], lo), KP(g, lo), KP(r->mom[q], lo),
              KP(r->v2[q], lo));
    } else {
      k->sgd(n, o->lr, o->momentum, o->weight_decay, KP(r->w[q], lo), KP(g, lo), KP(r->mom[q], lo));
    }
    g_free(g);
  }
}

/* ---- the walk --------------------------------------------------------------------------- */

static gboolean is_dropped(const ts_validate_options *o, const char *label)
{
  for (int i = 0; o->drop_ops != NULL && o->drop_ops[i] != NULL; i++)
    if (strcmp(o->drop_ops[i], label) == 0)
      return TRUE;
  return FALSE;
}

static gboolean is_nodeps(const ts_validate_options *o, const char *label)
{
  for (int i = 0; o->drop_deps != NULL && o->drop_deps[i] != NULL; i++)
    if (strcmp(o->drop_deps[i], label) == 0)
      return TRUE;
  return FALSE;
}

/* The order the walk runs the (identical) programs in: a topological order of the ops under
 * their dependencies and their streams' program order, chosen to expose a missing dependency
 * rather than hide it. Gradient synchronisation runs as soon as it may (without its dependency
 * it would read gradients not yet computed), the main stream next, the other side streams (the
 * async tp all-reduces) as late as they may (a reader without its dependency would find
 * partial sums). Ops whose label is in --drop-deps lose their explicit dependencies first. */
static int *walk_order(const mo_exec *x, const ts_program *p)
{
  int n = p->nops;
  int *order = g_new(int, MAX(n, 1)), *left = g_new0(int, MAX(n, 1));
  gboolean *done = g_new0(gboolean, MAX(n, 1));
  GPtrArray **succ = g_new0(GPtrArray *, MAX(n, 1));
  for (int j = 0; j < n; j++)
    succ[j] = g_ptr_array_new();
  for (int j = 0; j < n; j++) {
    const ts_op op_ = ts_program_op(p, j), *op = &op_;
    const char *label = g_ptr_array_index(x->tr->labels, op->label);
    int nd = 0;
    const int *d = ts_program_deps(p, j, &nd);
    if (is_nodeps(x->o, label))
      nd = 0;
    for (int i = 0; i < nd; i++) {
      g_ptr_array_add(succ[d[i]], GINT_TO_POINTER(j));
      left[j]++;
    }
    for (int i = j - 1; i >= 0; i--)
      if (ts_program_op_stream(p, i) == op->stream) {
        g_ptr_array_add(succ[i], GINT_TO_POINTER(j));
        left[j]++;
        break;
      }
  }
  for (int k = 0; k < n; k++) {
    int best = -1, best_rank = 3;
    for (int j = 0; j < n; j++) {
      if (done[j] || left[j] > 0)
        continue;
      const ts_op op_ = ts_program_op(p, j), *op = &op_;
      int rank = op->t_role == TS_ROLE_GRAD ? 0 : op->stream == 0 ? 1 : 2;
      if (rank < best_rank) {
        best = j;
        best_rank = rank;
      }
    }
    g_assert(best >= 0); /* dependencies point to earlier ops: never a cycle */
    order[k] = best;
    done[best] = TRUE;
    for (guint i = 0; i < succ[best]->len; i++)
      left[GPOINTER_TO_INT(g_ptr_array_index(succ[best], i))]--;
  }
  for (int j = 0; j < n; j++)
    g_ptr_array_free(succ[j], TRUE);
  g_free(succ);
  g_free(left);
  g_free(done);
  return order;
}

/* One step: op j of every rank, for j in walk_order. */
static gboolean walk(mo_exec *x)
{
  const ts_trace *tr = x->tr;
  const ts_program *p0 = &tr->programs[ts_trace_program_of(tr, 0)];
  int *mem = g_new(int, x->nranks);
  gboolean *done = g_new0(gboolean, x->nranks);
  gboolean ok = TRUE;
  int *order = walk_order(x, p0);
  for (int k = 0; k < p0->nops && ok; k++) {
    int j = order[k];
    const ts_op op_ = ts_program_op(p0, j), *op = &op_;
    const char *label = g_ptr_array_index(tr->labels, op->label);
    if (is_dropped(x->o, label))
      continue;
    int layer = op->t_layer - 1, u = MAX(op->t_micro - 1, 0);
    gboolean bwd_phase = op->t_phase == TS_PHASE_BWD;
    memset(done, 0, sizeof(gboolean) * (gsize)x->nranks);
    for (int rank = 0; rank < x->nranks && ok; rank++) {
      if (done[rank])
        continue;
      switch (op->t_role) {
      case TS_ROLE_COMPUTE:
        x->ncomp++;
        ok = bwd_phase ? bwd(x, rank, layer, u, 0, label) : fwd(x, rank, layer, u, label);
        break;
      case TS_ROLE_INPUT_GRAD:
      case TS_ROLE_WEIGHT_GRAD:
        x->ncomp++;
        ok = bwd(x, rank, layer, u, op->t_role == TS_ROLE_INPUT_GRAD ? 1 : 2, label);
        break;
      case TS_ROLE_OPTIMIZER:
        x->ncomp++;
        optimizer(x, &x->r[rank], rank);
        break;
      case TS_ROLE_MARKER:
      case TS_ROLE_CONTENTION: /* timing only */
        break;
      case TS_ROLE_TP:
      case TS_ROLE_EP:
      case TS_ROLE_GRAD:
      case TS_ROLE_PARAM_GATHER:
      case TS_ROLE_EXPERT_PARAMS: {
        int nm = group_ranks(x, op->group, rank, mem);
        for (int m = 0; m < nm; m++)
          done[mem[m]] = TRUE;
        if (op->t_role == TS_ROLE_PARAM_GATHER || op->t_role == TS_ROLE_EXPERT_PARAMS) {
          ok = param_coll(x, op, label, op->t_role == TS_ROLE_EXPERT_PARAMS, mem, nm);
          break;
        }
        ok = op->t_role == TS_ROLE_TP ? tp_coll(x, op, label, layer, u, bwd_phase, mem, nm)
             : op->t_role == TS_ROLE_EP
                 ? ep_coll(x, op, label, layer, u, bwd_phase, mem, nm)
                 : grad_coll(x, op, label, layer,
                             op->t_layer_last > 0 ? op->t_layer_last - 1 : layer, mem, nm);
        break;
      }
      default:
        ok = mo_fail(x, "'%s': an op of role %s, which the MoE walk does not execute", label,
                     ts_role_name(op->t_role));
        break;
      }
    }
  }
  g_free(mem);
  g_free(done);
  g_free(order);
  return ok;
}

/* Every --drop-op label names an op of the trace (else it is bad input, as for the layer
 * walk). */
static gboolean drops_known(const ts_trace *tr, const ts_validate_options *o, GError **error)
{
  for (int i = 0; o->drop_ops != NULL && o->drop_ops[i] != NULL; i++) {
    gboolean hit = FALSE;
    for (guint l = 0; l < tr->labels->len && !hit; l++)
      hit = strcmp(g_ptr_array_index(tr->labels, l), o->drop_ops[i]) == 0;
    if (!hit) {
      GString *known = g_string_new(NULL);
      for (guint l = 0; l < tr->labels->len && l < 40; l++)
        g_string_append_printf(known, "%s'%s'", l ? ", " : "",
                               (char *)g_ptr_array_index(tr->labels, l));
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--drop-op '%s': no op of the trace has this label; expected one of: %s",
                  o->drop_ops[i], known->str);
      g_string_free(known, TRUE);
      return FALSE;
    }
  }
  return TRUE;
}

/* Every collective's algorithm is resolved and decomposed before anything runs: one that does
 * not apply is bad input (`-a all` skips it), as in the layer walk. */
static gboolean prescan(const ts_trace *tr, const ts_topo *t, double elem, GError **error)
{
  const ts_program *p = &tr->programs[ts_trace_program_of(tr, 0)];
  for (int j = 0; j < p->nops; j++) {
    const ts_op op_ = ts_program_op(p, j), *op = &op_;
    if (op->kind != TS_OP_COLL)
      continue;
    const ts_group *g = g_ptr_array_index(tr->groups, op->group);
    ts_coll_algo a = op->algo;
    g_autoptr(GError) local = NULL;
    gint64 count = MAX((gint64)nearbyint(op->bytes / elem), 1);
    ts_coll_plan *cp = NULL;
    if ((!ts_coll_algo_is_choice(op->algo) ||
         ts_coll_time(t, op->coll, op->algo, &g->shape, op->bytes, &a, &local) >= 0) &&
        (cp = ts_coll_decompose(t, (ts_coll_kind)op->coll, a, &g->shape, count, elem, &local)) !=
            NULL) {
      ts_coll_plan_free(cp);
      continue;
    }
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--algorithm %s: op '%s' (%s over the %d members of group %s): %s",
                ts_coll_algo_name(op->algo), (char *)g_ptr_array_index(tr->labels, op->label),
                ts_coll_kind_name((ts_coll_kind)op->coll), ts_trace_group_size(g), g->name,
                local ? local->message : "no algorithm");
    return FALSE;
  }
  return TRUE;
}

/* Every rank's program is op for op the same (labels, roles, collectives): the walk's
 * lockstep needs it. */
static gboolean spmd(const ts_trace *tr, GError **error)
{
  const ts_program *p0 = &tr->programs[ts_trace_program_of(tr, 0)];
  for (int rank = 1; rank < tr->nranks; rank++) {
    const ts_program *p = &tr->programs[ts_trace_program_of(tr, rank)];
    gboolean same = p->nops == p0->nops;
    for (int j = 0; same && j < p->nops; j++) {
      const ts_op a_ = ts_program_op(p0, j), b_ = ts_program_op(p, j), *a = &a_, *b = &b_;
      same = a->label == b->label && a->kind == b->kind && a->group == b->group &&
             a->t_role == b->t_role;
    }
    if (!same) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "the trace's programs differ between chips 0 and %d; the MoE validator runs "
                  "splits whose chips run the same program (dp, ep, tp), not pp",
                  rank);
      return FALSE;
    }
  }
  return TRUE;
}

static gint cmp_name(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ---- entry -------------------------------------------------------------------------------- */

ts_validate_result *vd_moe_run(const ts_model *m, const ts_topo *t, const ts_split *s,
                               const ts_validate_options *o, GError **error)
{
  mo_net net = {0};
  if (!moe_match(m, &net, error))
    return NULL;
  if (s->degree[TS_AX_PP] > 1 || s->degree[TS_AX_CP] > 1 || s->sp || s->zero > 2 || s->ps > 0 ||
      s->offload != TS_OFFLOAD_NONE || s->shard > 0 || s->tp_overlap || s->dp_overlap ||
      s->recompute != TS_RECOMPUTE_NONE) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '%s': the validator executes a mixture of experts with dp, ep, tp and "
                "zero=1|2 only (not pp, cp, sp, zero=3, ps, offload, shard, overlaps or "
                "recompute); expected e.g. tp=2,dp=4,ep=2 "
                "(docs/validation.md)",
                s->text);
    return NULL;
  }
  gint64 batch = o->global_batch > 0 ? o->global_batch : 8;
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  po.micro_batch = o->micro_batch;
  po.bucket_bytes = o->bucket_bytes > 0 ? o->bucket_bytes : 256;
  po.algo = o->algo;
  g_autoptr(ts_plan) plan = ts_plan_new(m, t, s, &po, error);
  g_autoptr(ts_trace) tr = plan ? ts_plan_trace(plan, error) : NULL;
  if (tr == NULL || !ts_trace_check(tr, t, error) || !spmd(tr, error) ||
      !drops_known(tr, o, error) || !prescan(tr, t, m->dtype_bytes, error))
    return NULL;
  mo_exec ex = {0}, *x = &ex;
  x->n = &net;
  x->k = vd_kern_of(o->prec);
  x->o = o;
  x->topo = t;
  x->tr = tr;
  x->m = m;
  x->tp = plan->degree[TS_AX_TP];
  x->ep = MAX(plan->ep, 1);
  x->D = plan->degree[TS_AX_DP];
  x->nmicro = (int)plan->n_micro;
  x->mb = (int)plan->micro_batch;
  x->B = batch;
  x->nranks = tr->nranks;
  if (net.Fs % x->tp != 0 || net.F % x->tp != 0 || net.E % x->ep != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '%s': tp=%d must divide the shared and expert widths (%d, %d) and "
                "ep=%d the experts (%d)",
                s->text, x->tp, net.Fs, net.F, x->ep, net.E);
    return NULL;
  }
  if ((gint64)x->D * x->nmicro * x->mb != batch) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '%s': %d replicas x %d micro-batches x %d samples is not the global "
                "batch %" G_GINT64_FORMAT,
                s->text, x->D, x->nmicro, x->mb, batch);
    return NULL;
  }
  int ax_tp = -1, ax_dp = -1, ax_ep = -1;
  for (int a = 0; a < tr->naxes; a++) {
    if (strcmp(tr->axes[a].name, "tp") == 0)
      ax_tp = a;
    else if (strcmp(tr->axes[a].name, "dp") == 0)
      ax_dp = a;
    else if (strcmp(tr->axes[a].name, "ep") == 0)
      ax_ep = a;
  }
  double *w0[T_N], *xd = NULL;
  int *lab = NULL;
  moe_init(&net, o->seed, batch, w0, &xd, &lab);
  x->x = xd;
  x->lab = lab;
  x->plans =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)ts_coll_plan_free);
  x->algos = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  x->notes = g_ptr_array_new_with_free_func(g_free);
  x->noted = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  x->r = g_new0(mo_rank, x->nranks);
  const vd_kern *k = x->k;
  for (int rank = 0; rank < x->nranks; rank++) {
    mo_rank *r = &x->r[rank];
    r->tp = ax_tp >= 0 ? ts_trace_axis_coord(tr, rank, ax_tp) : 0;
    r->ep = ax_ep >= 0 ? ts_trace_axis_coord(tr, rank, ax_ep) : 0;
    r->dpo = ax_dp >= 0 ? ts_trace_axis_coord(tr, rank, ax_dp) : 0;
    r->replica = r->dpo * x->ep + r->ep;
    for (int q = 0; q < T_N; q++) {
      r->shard[q] = moe_shard(&net, q, x->tp, r->tp, x->ep, r->ep, &r->n[q]);
      r->w[q] = kbuf(k, r->n[q]);
      for (gint64 j = 0; j < r->n[q]; j++)
        k->set(r->w[q], j, w0[q][r->shard[q][j]]);
      r->g[q] = kbuf(k, r->n[q]);
      r->gs[q] = kbuf(k, r->n[q]);
      r->mom[q] = kbuf(k, r->n[q]);
      r->v2[q] = kbuf(k, r->n[q]);
    }
    r->a = g_new0(mo_act, MAX(x->nmicro, 1));
  }
  ts_validate_result *res = g_new0(ts_validate_result, 1);
  res->executed = TRUE;
  for (int step = 0; step < o->steps && res->executed; step++) {
    for (int rank = 0; rank < x->nranks; rank++) {
      mo_rank *r = &x->r[rank];
      for (int u = 0; u < x->nmicro; u++)
        act_free(&r->a[u]);
      for (int q = 0; q < T_N; q++) {
        memset(r->g[q], 0, k->elem * (gsize)r->n[q]);
        memset(r->gs[q], 0, k->elem * (gsize)r->n[q]);
        r->synced[q] = FALSE;
        r->own_S[q] = r->own_m[q] = 0;
      }
      r->loss = 0;
    }
    res->executed = walk(x);
    if (step == 0)
      for (int rank = 0; rank < x->nranks; rank++)
        if (x->r[rank].tp == 0)
          res->loss += x->r[rank].loss;
  }
  /* The reference: whole batch, one processor. */
  void *rw[T_N], *rg[T_N], *rm[T_N], *rv[T_N];
  for (int q = 0; q < T_N; q++) {
    rw[q] = kfrom(k, w0[q], net.numel[q]);
    rg[q] = kbuf(k, net.numel[q]);
    rm[q] = kbuf(k, net.numel[q]);
    rv[q] = kbuf(k, net.numel[q]);
  }
  void *rx = kfrom(k, xd, batch * net.T * net.d);
  for (int step = 0; step < o->steps; step++) {
    for (int q = 0; q < T_N; q++)
      memset(rg[q], 0, k->elem * (gsize)net.numel[q]);
    double l = ref_step(&net, k, rw, rg, rx, lab, batch);
    if (step == 0)
      res->loss_ref = l;
    for (int q = 0; q < T_N; q++) {
      if (o->optimizer == TS_VALIDATE_ADAM) {
        ts_adam hp = {o->lr, 0.9, 0.999, 1e-8, o->weight_decay};
        k->adam(net.numel[q], &hp, step + 1, rw[q], rg[q], rm[q], rv[q]);
      } else {
        k->sgd(net.numel[q], o->lr, o->momentum, o->weight_decay, rw[q], rg[q], rm[q]);
      }
    }
  }
  /* Compare: per tensor, whole copies assembled from the chips (experts over ep and tp,
   * shared layers over tp), one per dp replica (dp / ep for the experts). */
  res->ntensors = T_N;
  res->tensors = g_new0(ts_validate_tensor, T_N);
  for (int q = 0; q < T_N; q++) {
    gboolean expert = q == T_FC1 || q == T_FC2, split = q == T_SH1 || q == T_SH2 || expert;
    double norm = 0;
    for (gint64 j = 0; j < net.numel[q]; j++) {
      double v = k->get(rw[q], j);
      norm += v * v;
    }
    GHashTable *copies = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    for (int rank = 0; rank < x->nranks; rank++) {
      mo_rank *r = &x->r[rank];
      int copy = expert ? r->dpo : r->replica * x->tp + (split ? 0 : r->tp);
      double *acc = g_hash_table_lookup(copies, GINT_TO_POINTER(copy));
      if (acc == NULL) {
        acc = g_new0(double, 2);
        g_hash_table_insert(copies, GINT_TO_POINTER(copy), acc);
      }
      for (gint64 j = 0; j < r->n[q]; j++) {
        double dv = k->get(r->w[q], j) - k->get(rw[q], r->shard[q][j]);
        acc[0] += dv * dv;
      }
      acc[1] += (double)r->n[q];
    }
    double worst = 0;
    GHashTableIter it;
    gpointer key, val;
    g_hash_table_iter_init(&it, copies);
    while (g_hash_table_iter_next(&it, &key, &val)) {
      double *acc = val;
      double err = norm > 0 ? sqrt(acc[0] / norm) : sqrt(acc[0]);
      if (acc[1] != (double)net.numel[q] || isnan(err))
        err = INFINITY;
      worst = MAX(worst, err);
    }
    ts_validate_tensor *vt = &res->tensors[q];
    vt->name = g_strdup_printf("%s.%s", m->layers[tensor_layer[q]].name, tensor_suffix[q]);
    vt->numel = net.numel[q];
    vt->copies = (int)g_hash_table_size(copies);
    vt->rel_err = worst;
    res->max_rel_err = MAX(res->max_rel_err, worst);
    g_hash_table_unref(copies);
  }
  res->tolerance = o->tolerance > 0 ? o->tolerance : o->prec == TS_PREC_F32 ? 1e-5 : 1e-12;
  res->nranks = x->nranks;
  res->ranks = g_new0(ts_validate_rank, MAX(x->nranks, 1));
  res->bytes_ok = res->executed;
  for (int rank = 0; rank < x->nranks; rank++) {
    res->ranks[rank].trace_bytes = x->r[rank].traced;
    res->ranks[rank].sent_bytes = x->r[rank].sent;
    if (fabs(x->r[rank].traced - x->r[rank].sent) > 1e-9 * MAX(1.0, x->r[rank].sent))
      res->bytes_ok = FALSE;
  }
  double loss_err = fabs(res->loss - res->loss_ref) / MAX(fabs(res->loss_ref), 1e-300);
  res->numeric_ok =
      res->executed && res->max_rel_err <= res->tolerance && loss_err <= res->tolerance;
  res->passed = res->executed && res->numeric_ok && res->bytes_ok;
  res->failure = g_steal_pointer(&x->failure);
  res->ops_compute = x->ncomp;
  res->ops_coll = x->ncoll;
  res->model = g_strdup(m->name);
  res->split = g_strdup(plan->split_text);
  res->placement = g_strdup(plan->placement_text);
  res->topology = g_strdup(t->name);
  res->prec = o->prec;
  res->steps = o->steps;
  {
    GPtrArray *names = g_ptr_array_new();
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, x->algos);
    while (g_hash_table_iter_next(&it, &key, NULL))
      g_ptr_array_add(names, key);
    g_ptr_array_sort(names, cmp_name);
    g_ptr_array_add(names, NULL);
    res->algorithms = g_strjoinv(", ", (char **)names->pdata);
    g_ptr_array_free(names, TRUE);
  }
  res->notes = g_steal_pointer(&x->notes);
  /* Free. */
  for (int rank = 0; rank < x->nranks; rank++) {
    mo_rank *r = &x->r[rank];
    for (int u = 0; u < x->nmicro; u++)
      act_free(&r->a[u]);
    g_free(r->a);
    for (int q = 0; q < T_N; q++) {
      g_free(r->shard[q]);
      g_free(r->w[q]);
      g_free(r->g[q]);
      g_free(r->gs[q]);
      g_free(r->mom[q]);
      g_free(r->v2[q]);
    }
  }
  g_free(x->r);
  for (int q = 0; q < T_N; q++) {
    g_free(w0[q]);
    g_free(rw[q]);
    g_free(rg[q]);
    g_free(rm[q]);
    g_free(rv[q]);
  }
  g_free(rx);
  g_free(xd);
  g_free(lab);
  g_hash_table_unref(x->plans);
  g_hash_table_unref(x->algos);
  g_hash_table_unref(x->noted);
  return res;
}

/* ---- a check of the reference by finite differences -------------------------------------- */

/* The reference's loss at parameters w (double), fp64. */
static double ref_loss(const mo_net *n, const vd_kern *k, double **w, const double *xd,
                       const int *lab, gint64 B, double **grad)
{
  void *kw[T_N], *kg[T_N];
  for (int q = 0; q < T_N; q++) {
    kw[q] = kfrom(k, w[q], n->numel[q]);
    kg[q] = kbuf(k, n->numel[q]);
  }
  void *kx = kfrom(k, xd, B * n->T * n->d);
  double l = ref_step(n, k, kw, kg, kx, lab, B);
  for (int q = 0; q < T_N; q++) {
    for (gint64 j = 0; grad != NULL && j < n->numel[q]; j++)
      grad[q][j] = k->get(kg[q], j);
    g_free(kw[q]);
    g_free(kg[q]);
  }
  g_free(kx);
  return l;
}

gboolean vd_moe_fd_check(const ts_model *m, guint64 seed, gint64 batch, double *max_rel_err,
                         int *dropped, GError **error)
{
  mo_net net = {0};
  if (!moe_match(m, &net, error))
    return FALSE;
  const vd_kern *k = vd_kern_of(TS_PREC_F64);
  double *w[T_N], *g[T_N], *xd = NULL;
  int *lab = NULL;
  moe_init(&net, seed, batch, w, &xd, &lab);
  for (int q = 0; q < T_N; q++)
    g[q] = g_new0(double, net.numel[q]);
  ref_loss(&net, k, w, xd, lab, batch, g);
  /* Token copies the capacity dropped at these parameters (the check must cover drops). */
  {
    void *kx = kfrom(k, xd, batch * net.T * net.d), *kg = kfrom(k, w[T_GAMMA], net.d),
         *kb = kfrom(k, w[T_BETA], net.d), *kr = kfrom(k, w[T_ROUTER], net.numel[T_ROUTER]);
    gint64 R = batch * net.T;
    void *nrm = kbuf(k, R * net.d), *mean = kbuf(k, R), *rstd = kbuf(k, R),
         *lg = kbuf(k, R * net.E);
    k->layernorm_fwd((int)R, net.d, kx, kg, kb, nrm, mean, rstd);
    k->dense_fwd((int)R, net.d, net.E, nrm, kr, NULL, lg);
    int *eid = g_new(int, net.T *net.K), *pos = g_new(int, net.T *net.K);
    double *gate = g_new(double, net.T *net.K), *p = g_new(double, net.T *net.E);
    *dropped = 0;
    for (gint64 b = 0; b < batch; b++) {
      moe_route(&net, k, lg, b * net.T, eid, gate, pos, p);
      for (int j = 0; j < net.T * net.K; j++)
        *dropped += pos[j] < 0;
    }
    void *fr[] = {kx, kg, kb, kr, nrm, mean, rstd, lg, eid, pos, gate, p};
    for (gsize i = 0; i < G_N_ELEMENTS(fr); i++)
      g_free(fr[i]);
  }
  *max_rel_err = 0;
  for (int q = 0; q < T_N; q++) {
    double num = 0, den = 0;
    for (gint64 j = 0; j < net.numel[q]; j++) {
      double h = 1e-6 * MAX(1.0, fabs(w[q][j])), keep = w[q][j];
      w[q][j] = keep + h;
      double lp = ref_loss(&net, k, w, xd, lab, batch, NULL);
      w[q][j] = keep - h;
      double lm = ref_loss(&net, k, w, xd, lab, batch, NULL);
      w[q][j] = keep;
      double fd = (lp - lm) / (2 * h);
      num += (fd - g[q][j]) * (fd - g[q][j]);
      den += g[q][j] * g[q][j];
    }
    *max_rel_err = MAX(*max_rel_err, den > 0 ? sqrt(num / den) : sqrt(num));
  }
  for (int q = 0; q < T_N; q++) {
    g_free(w[q]);
    g_free(g[q]);
  }
  g_free(xd);
  g_free(lab);
  return TRUE;
}
