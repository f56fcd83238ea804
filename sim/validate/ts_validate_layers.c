/* ts_validate_layers: one layer's forward and backward pass on one chip, on the shard the chip
 * holds, with the layout bookkeeping that makes a wrong split visible.
 *
 * Tensor parallelism as Megatron-LM (Shoeybi et al. 2019, section 3): a column-split layer
 * reads the whole input and writes its block of output features; a row-split layer reads its
 * block of input features (slicing a whole input itself) and writes partial sums, to which the
 * bias, the activation and the residual apply only once they are summed (Megatron's
 * RowParallelLinear adds its bias after the all-reduce); attention split by heads is a column
 * QKV projection and a row output projection. Backward mirrors it: a column-split layer's input
 * gradient is a partial sum, a row-split layer's is a block. A replicated layer computes on
 * whatever block of samples (per-layer hybrid) or tokens (sequence parallelism, Korthikanti et
 * al. 2022, 4.2.2) it is given, when its work is per sample or per token.
 *
 * The layer ops never call a collective: they use what the chip holds. When the trace lacks a
 * collective, the next reader meets partial sums (and computes with them, so the parameters
 * come out wrong) or a block where it needs the whole (and execution stops, naming it). */
#include "ts_util.h"
#include "ts_validate_priv.h"

#include <math.h>
#include <string.h>

#define TS_R float
#define TS_F(name) name##_f32
#define TS_EXP expf
#define TS_LOG logf
#define TS_SQRT sqrtf
#include "ts_validate_kern.h"
#undef TS_R
#undef TS_F
#undef TS_EXP
#undef TS_LOG
#undef TS_SQRT
#define TS_R double
#define TS_F(name) name##_f64
#define TS_EXP exp
#define TS_LOG log
#define TS_SQRT sqrt
#include "ts_validate_kern.h"
#undef TS_R
#undef TS_F
#undef TS_EXP
#undef TS_LOG
#undef TS_SQRT

const vd_kern *vd_kern_of(ts_prec prec)
{
  return prec == TS_PREC_F32 ? &vd_kern_table_f32 : &vd_kern_table_f64;
}

const char *vd_layout_name(vd_layout l)
{
  static const char *const names[] = {"whole",        "feature block", "token block",
                                      "sample block", "partial sums",  "flat chunk"};
  return (unsigned)l <= VD_FLAT ? names[l] : "?";
}

static void *alloc0(const vd_exec *e, gint64 n)
{
  return g_malloc0(e->k->elem * (gsize)MAX(n, 1));
}

static void *dup(const vd_exec *e, const void *src, gint64 n)
{
  return g_memdup2(src, e->k->elem * (gsize)MAX(n, 1));
}

void vd_val_clear(vd_val *v)
{
  g_free(v->data);
  g_free(v->pre);
  memset(v, 0, sizeof *v);
  v->epilogue = v->coll_label = -1;
}

void vd_val_set(vd_val *v, void *data, gint64 n, vd_layout layout)
{
  vd_val_clear(v);
  v->data = data;
  v->n = n;
  v->layout = v->orig = layout;
  v->set = TRUE;
}

void vd_note(vd_exec *e, const char *key, const char *fmt, ...)
{
  if (g_hash_table_contains(e->noted, key))
    return;
  g_hash_table_add(e->noted, g_strdup(key));
  va_list ap;
  va_start(ap, fmt);
  g_ptr_array_add(e->notes, g_strdup_vprintf(fmt, ap));
  va_end(ap);
}

static gboolean spatial(const vd_layer *L)
{
  return L->kind == TS_LAYER_CONV2D || L->kind == TS_LAYER_POOL;
}

void vd_act_dims(const vd_exec *e, int k, gint64 *dims)
{
  const vd_layer *L = &e->net->layers[k == 0 ? 0 : k - 1];
  dims[0] = e->mb;
  dims[1] = spatial(L) ? 1 : L->tokens / MAX(e->C, 1);
  dims[2] = k == 0 ? L->in : L->out;
  dims[3] = !spatial(L) ? 1 : k == 0 ? (gint64)L->in_h * L->in_w : (gint64)L->out_h * L->out_w;
}

gint64 vd_box(const gint64 *dims, vd_layout l, int T, int r, gint64 *lo, gint64 *hi)
{
  int d = l == VD_FEAT ? 2 : l == VD_SEQ ? 1 : l == VD_BATCH ? 0 : -1;
  gint64 n = 1;
  for (int q = 0; q < 4; q++) {
    lo[q] = 0;
    hi[q] = dims[q];
    if (q == d) {
      lo[q] = r * (dims[q] / T);
      hi[q] = (r + 1) * (dims[q] / T);
    }
    n *= hi[q] - lo[q];
  }
  return n;
}

void vd_box_copy(const vd_kern *k, const void *src, const gint64 *slo, const gint64 *shi, void *dst,
                 const gint64 *dlo, const gint64 *dhi, const gint64 *rlo, const gint64 *rhi)
{
  gsize run = k->elem * (gsize)(rhi[3] - rlo[3]);
  for (gint64 s = rlo[0]; s < rhi[0]; s++)
    for (gint64 t = rlo[1]; t < rhi[1]; t++)
      for (gint64 f = rlo[2]; f < rhi[2]; f++) {
        gint64 so =
            (((s - slo[0]) * (shi[1] - slo[1]) + (t - slo[1])) * (shi[2] - slo[2]) + (f - slo[2])) *
                (shi[3] - slo[3]) +
            (rlo[3] - slo[3]);
        gint64 d =
            (((s - dlo[0]) * (dhi[1] - dlo[1]) + (t - dlo[1])) * (dhi[2] - dlo[2]) + (f - dlo[2])) *
                (dhi[3] - dlo[3]) +
            (rlo[3] - dlo[3]);
        memcpy((char *)dst + k->elem * (gsize)d, (const char *)src + k->elem * (gsize)so, run);
      }
}

void *vd_slice_box(const vd_exec *e, const void *full, const gint64 *dims, vd_layout l, int r)
{
  gint64 lo[4], hi[4], wlo[4] = {0, 0, 0, 0};
  gint64 n = vd_box(dims, l, e->T, r, lo, hi);
  void *out = alloc0(e, n);
  vd_box_copy(e->k, full, wlo, dims, out, lo, hi, lo, hi);
  return out;
}

static void saved_clear(vd_saved *s)
{
  g_free(s->x);
  g_free(s->z);
  g_free(s->qkv);
  g_free(s->p);
  g_free(s->att);
  g_free(s->mean);
  g_free(s->rstd);
  g_free(s->argmax);
  g_free(s->dz);
  g_free(s->dqkv);
  void **arrays[] = {s->cp_kv[0], s->cp_kv[1], s->cp_kv[2], s->cp_dkv, s->cp_dout};
  for (size_t a = 0; a < G_N_ELEMENTS(arrays); a++) {
    for (int j = 0; arrays[a] != NULL && j < s->cp_len; j++)
      g_free(arrays[a][j]);
    g_free(arrays[a]);
  }
  g_free(s->cp_m);
  g_free(s->cp_l);
  g_free(s->cp_acc);
  g_free(s->cp_lse);
  g_free(s->cp_dsum);
  g_free(s->cp_dq);
  memset(s, 0, sizeof *s);
}

void vd_rank_clear_acts(vd_exec *e, vd_rank *r)
{
  int nl = e->net->nlayers;
  for (int j = 0; j < e->nmicro * nl; j++) {
    vd_val_clear(&r->y[j]);
    vd_val_clear(&r->dx[j]);
    vd_val_clear(&r->dr[j]);
    vd_val_clear(&r->dy[j]);
    saved_clear(&r->s[j]);
  }
  for (int u = 0; u < e->nmicro; u++)
    vd_val_clear(&r->a0[u]);
  for (int j = 0; j < e->nmicro * (nl + 1); j++)
    vd_val_clear(&r->ga[j]);
}

static gboolean fail(char **why, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean fail(char **why, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  *why = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  return FALSE;
}

/* Is layer i split over the tensor-parallel group (by its tp mode)? */
gboolean vd_layer_split(const vd_exec *e, int i)
{
  return e->T > 1 && e->net->layers[i].tp != TS_TP_REPLICATED && !e->dpmode[i];
}

static gboolean split(const vd_exec *e, int i)
{
  return vd_layer_split(e, i);
}

vd_layout vd_layer_want(const vd_exec *e, int i, vd_layout in)
{
  if (split(e, i))
    return e->net->layers[i].tp == TS_TP_ROW ? VD_FEAT : VD_FULL;
  if (e->dpmode[i])
    return VD_BATCH;
  return in == VD_FEAT || in == VD_PARTIAL ? VD_FULL : in; /* per-sample / per-token work */
}

static gboolean column_like(const vd_exec *e, int i)
{
  ts_tp_mode tp = e->net->layers[i].tp;
  return split(e, i) && (tp == TS_TP_COLUMN || tp == TS_TP_VOCAB);
}

/* Row-split layers and attention split by heads end with partial sums. */
static gboolean partial_out(const vd_exec *e, int i)
{
  ts_tp_mode tp = e->net->layers[i].tp;
  return split(e, i) && (tp == TS_TP_ROW || tp == TS_TP_HEADS);
}

vd_val *vd_act_read(vd_exec *e, vd_rank *r, int k, int u, const char *reader, char **why)
{
  const vd_net *n = e->net;
  int nl = n->nlayers;
  if (k == 0) {
    vd_val *v = &r->a0[u];
    if (!r->holds[0]) {
      g_autofree char *key = g_strdup_printf("data-%d", r->pp);
      vd_note(e, key,
              "%s reads the input samples on pipeline stage %d, which does not hold the first "
              "layer: the samples are loaded there (in a deeper network this would be an "
              "activation the trace never sends)",
              reader, r->pp);
    }
    if (!v->set) {
      /* The samples of this chip's replica and micro-batch (samples [b0, b0 + mb)). */
      gint64 b0 = (gint64)r->dp * e->nmicro * e->mb + (gint64)u * e->mb;
      gint64 cnt = n->x_per_sample * e->mb / MAX(e->C, 1);
      void *data = alloc0(e, cnt);
      if (e->C > 1) {
        /* Context parallelism: this rank's tokens of each sample (zig-zag chunks). */
        int tok = n->layers[0].tokens, nt = tok / e->C;
        gint64 f = n->x_per_sample / tok, j = 0;
        for (gint64 sm = 0; sm < e->mb; sm++)
          for (int t = 0; t < nt; t++)
            for (gint64 c = 0; c < f; c++)
              e->k->set(data, j++,
                        e->x[(b0 + sm) * n->x_per_sample + vd_cp_pos(e, r->cp, t, tok) * f + c]);
      } else {
        for (gint64 j = 0; j < cnt; j++)
          e->k->set(data, j, e->x[b0 * n->x_per_sample + j]);
      }
      vd_val_set(v, data, cnt, VD_FULL);
    }
    v->read = TRUE;
    return v;
  }
  vd_val *v = &r->y[u * nl + k - 1];
  if (!v->set) {
    if (!r->holds[k - 1])
      fail(why,
           "%s needs the output of '%s', which pipeline stage %d computes and the trace never "
           "sends to stage %d (a stage boundary inside a residual block?)",
           reader, n->layers[k - 1].name, e->stage[k - 1], r->pp);
    else
      fail(why, "%s reads the output of '%s' (micro-batch %d) before that layer's forward ran",
           reader, n->layers[k - 1].name, u);
    return NULL;
  }
  if (v->epilogue >= 0 && !vd_epilogue(e, r, k - 1, u, why))
    return NULL;
  if (v->layout == VD_PARTIAL) {
    g_autofree char *key = g_strdup_printf("partial-fwd-%d", k);
    vd_note(e, key,
            "%s read the output of '%s' while it held partial sums: nothing summed them "
            "over the tensor-parallel group (a missing all-reduce)",
            reader, n->layers[k - 1].name);
  }
  v->read = TRUE;
  return v;
}

/* Output features of a dense layer's GEMM: twice out for a gated layer (gate and up). */
static int gemm_out(const vd_layer *L)
{
  return L->act == VD_ACT_SWIGLU ? 2 * L->out : L->out;
}

/* Bias tensor of a layer (dense and conv: b; attention: bo), or -1. */
static int bias_tensor(const vd_layer *L)
{
  if (L->bias && (L->kind == TS_LAYER_DENSE || L->kind == TS_LAYER_CONV2D))
    return L->tensor0 + 1;
  if (L->bias && L->kind == TS_LAYER_ATTENTION)
    return L->tensor0 + 3;
  return -1;
}

gboolean vd_epilogue(vd_exec *e, vd_rank *r, int i, int u, char **why)
{
  const vd_net *n = e->net;
  const vd_layer *L = &n->layers[i];
  vd_val *v = &r->y[u * n->nlayers + i];
  if (v->epilogue < 0)
    return TRUE;
  v->epilogue = -1;
  gint64 dims[4], lo[4], hi[4];
  vd_act_dims(e, i + 1, dims);
  vd_layout box = v->layout == VD_PARTIAL ? VD_FULL : v->layout;
  vd_box(dims, box, e->T, r->tp, lo, hi);
  gint64 rows = (hi[0] - lo[0]) * (hi[1] - lo[1]), f = hi[2] - lo[2], inner = hi[3] - lo[3];
  int bt = bias_tensor(L);
  gboolean gated = L->act == VD_ACT_SWIGLU;
  if (gated)
    f *= 2; /* the value holds gate and up until the activation halves it */
  if (bt >= 0) {
    if (r->n[bt] != f)
      return fail(why,
                  "layer '%s': a bias of %" G_GINT64_FORMAT " elements for %" G_GINT64_FORMAT
                  " output features held",
                  L->name, r->n[bt], f);
    e->k->bias_add((int)rows, (int)f, (int)inner, r->w[bt], v->data);
  }
  vd_saved *s = &r->s[u * n->nlayers + i];
  if (gated) {
    if (inner != 1 || v->n != rows * f)
      return fail(why, "layer '%s': a gated activation on %" G_GINT64_FORMAT " elements", L->name,
                  v->n);
    g_free(s->z);
    s->z = v->data; /* kept for backward: gate and up */
    void *y = alloc0(e, rows * (f / 2));
    e->k->swiglu_fwd((int)rows, (int)(f / 2), s->z, y);
    v->data = y;
    v->n = rows * (f / 2);
  } else if (L->act != VD_ACT_NONE) {
    g_free(s->z);
    s->z = dup(e, v->data, v->n);
    e->k->act_fwd(L->act, v->n, s->z, v->data);
  }
  if (L->residual) {
    g_autofree char *reader = g_strdup_printf("the residual of '%s' on chip %d", L->name, r->rank);
    vd_val *src = vd_act_read(e, r, L->res_from, u, reader, why);
    if (src == NULL)
      return FALSE;
    vd_layout sl = src->layout == VD_PARTIAL ? VD_FULL : src->layout;
    if (sl == box) {
      e->k->axpy(v->n, 1.0, src->data, v->data);
    } else if (sl == VD_FULL) {
      g_autofree void *part = vd_slice_box(e, src->data, dims, box, r->tp);
      e->k->axpy(v->n, 1.0, part, v->data);
    } else {
      return fail(why, "%s adds the input of '%s', held as a %s, to a %s", reader,
                  n->layers[L->res_from].name, vd_layout_name(sl), vd_layout_name(box));
    }
  }
  return TRUE;
}

/* Local extent of the work on a layout: samples, tokens and the first sample / token. */
static void work_extent(const vd_exec *e, const vd_layer *L, vd_layout w, int r, int *ns, int *nt)
{
  *ns = w == VD_BATCH ? e->mb / e->T : e->mb;
  int tokens = L->tokens / MAX(e->C, 1); /* context parallelism: this rank's share */
  *nt = spatial(L) ? 1 : w == VD_SEQ ? tokens / e->T : tokens;
  (void)r;
}

static gboolean fwd_finish(vd_exec *e, vd_rank *r, int i, int u, gboolean recompute, void *y,
                           gint64 ny, vd_layout layout, char **why);

/* Ring state of a layer (context parallelism): its arrays, once. */
static void cp_state_init(vd_saved *s, int C)
{
  if (s->cp_len > 0)
    return;
  s->cp_len = C + 1;
  s->cp_kv[0] = g_new0(void *, s->cp_len);
  s->cp_kv[1] = g_new0(void *, s->cp_len);
  s->cp_kv[2] = g_new0(void *, s->cp_len);
  s->cp_dkv = g_new0(void *, s->cp_len);
  s->cp_dout = g_new0(void *, s->cp_len);
}
static void cp_rope(const vd_exec *e, const vd_rank *r, int ns, int nt, int heads, int dh, void *x,
                    int ld, gboolean inverse);

gboolean vd_layer_fwd(vd_exec *e, vd_rank *r, int i, int u, gboolean recompute, char **why)
{
  const vd_net *n = e->net;
  const vd_layer *L = &n->layers[i];
  const vd_kern *k = e->k;
  int T = e->T, nl = n->nlayers;
  g_autofree char *reader =
      g_strdup_printf("'%s %s' on chip %d", L->name, recompute ? "recompute" : "fwd", r->rank);
  if (!r->holds[i])
    return fail(why, "%s: the layer is not on this chip's pipeline stage", reader);
  if (L->ntensors > 0 && !r->materialized[i])
    return fail(why,
                "%s: its parameters are sharded over the data-parallel group (ZeRO-3, or "
                "updated shard by shard with dp-overlap) and no all-gather collected them",
                reader);
  vd_val *in = vd_act_read(e, r, i, u, reader, why);
  if (in == NULL)
    return FALSE;
  gint64 dims[4];
  vd_act_dims(e, i, dims);
  vd_layout inl = in->layout == VD_PARTIAL ? VD_FULL : in->layout;
  if (inl == VD_FLAT)
    return fail(why,
                "%s holds only a 1/%d chunk of its input (the pipeline's scatter) and no "
                "all-gather reassembled it",
                reader, T);
  /* The layout the layer computes in. */
  vd_layout want = vd_layer_want(e, i, inl);
  vd_saved *s = &r->s[u * nl + i];
  /* Ring blocks that arrived before this forward (their receives wait for nothing) stay. */
  vd_saved ring = *s;
  gboolean keep = e->C > 1 && L->kind == TS_LAYER_ATTENTION && s->cp_len > 0;
  if (keep)
    s->cp_kv[0] = s->cp_kv[1] = s->cp_kv[2] = s->cp_dkv = s->cp_dout = NULL, s->cp_len = 0;
  saved_clear(s);
  if (keep) {
    s->cp_len = ring.cp_len;
    for (int ps = 0; ps < 3; ps++) {
      s->cp_kv[ps] = ring.cp_kv[ps];
      s->cp_recvd[ps] = ring.cp_recvd[ps];
      s->cp_sent[ps] = ring.cp_sent[ps];
      s->cp_blocks[ps] = ring.cp_blocks[ps];
    }
    s->cp_dkv = ring.cp_dkv, s->cp_dout = ring.cp_dout;
    s->cp_drecvd = ring.cp_drecvd, s->cp_dsent = ring.cp_dsent;
    s->cp_kv_n = ring.cp_kv_n;
  }
  if (inl != want && inl != VD_FULL)
    return fail(why, "%s needs its input as a %s but the chip holds a %s of it (%s)", reader,
                vd_layout_name(want), vd_layout_name(inl),
                want == VD_FULL ? "a missing all-gather" : "a missing all-to-all");
  if (want == VD_SEQ && L->kind != TS_LAYER_NORM && L->kind != TS_LAYER_DENSE)
    return fail(why, "%s works on a token block, but a %s layer needs the whole sequence", reader,
                ts_layer_kind_name(L->kind));
  int d = want == VD_FEAT ? 2 : want == VD_SEQ ? 1 : want == VD_BATCH ? 0 : -1;
  if (d >= 0 && dims[d] % T != 0)
    return fail(why, "%s: %" G_GINT64_FORMAT " %s do not split %d ways", reader, dims[d],
                d == 2   ? "features"
                : d == 1 ? "tokens"
                         : "samples",
                T);
  if (inl != want) {
    s->x = vd_slice_box(e, in->data, dims, want, r->tp); /* Megatron's scatter: no traffic */
    s->sliced = TRUE;
  } else {
    s->x = dup(e, in->data, in->n);
  }
  s->work = want;
  s->in_orig = in->orig;
  if (u == 0 && !recompute)
    e->work[i] = want;
  int ns, nt;
  work_extent(e, L, want, r->tp, &ns, &nt);
  const void *x = s->x;
  void **w = r->w + L->tensor0;
  void *y = NULL;
  gint64 ny = 0;
  vd_layout layout = want == VD_FEAT ? VD_FULL : want;
  gboolean sp = split(e, i);
  switch (L->kind) {
  case TS_LAYER_DENSE: {
    int rows = ns * nt, K = L->in, N = gemm_out(L);
    if (sp && L->tp == TS_TP_ROW)
      K /= T;
    else if (sp)
      N /= T; /* column or vocabulary split: this member's output features */
    ny = (gint64)rows * N;
    y = alloc0(e, ny);
    k->dense_fwd(rows, K, N, x, w[0], NULL, y);
    break;
  }
  case TS_LAYER_CONV2D: {
    ts_conv_shape cs = {ns,        L->in,     L->in_h,   L->in_w, L->out,
                        L->kernel, L->kernel, L->stride, L->pad};
    if (sp && L->tp == TS_TP_ROW)
      cs.c /= T;
    else if (sp)
      cs.oc /= T;
    ny = (gint64)ns * cs.oc * L->out_h * L->out_w;
    y = alloc0(e, ny);
    k->conv_fwd(&cs, x, w[0], NULL, y);
    break;
  }
  case TS_LAYER_POOL: {
    int planes = ns * L->in;
    ny = (gint64)planes * L->out_h * L->out_w;
    y = alloc0(e, ny);
    s->argmax = g_new0(gint32, MAX(ny, 1));
    k->maxpool_fwd(planes, L->in_h, L->in_w, L->kernel, x, y, s->argmax);
    break;
  }
  case TS_LAYER_NORM: {
    int rows = ns * nt;
    ny = (gint64)rows * L->in;
    y = alloc0(e, ny);
    s->mean = alloc0(e, rows);
    s->rstd = alloc0(e, rows);
    k->layernorm_fwd(rows, L->in, x, w[0], w[1], y, s->mean, s->rstd);
    break;
  }
  case TS_LAYER_ATTENTION: {
    int rows = ns * nt, dm = L->in, heads = L->heads, kv = L->kv_heads, dl = dm;
    if (sp) {
      heads /= T;
      kv /= T;
      dl /= T;
    }
    int wq = dl + 2 * kv * (dm / L->heads); /* this member's fused Q, K, V */
    s->qkv = alloc0(e, (gint64)rows * wq);
    k->dense_fwd(rows, dm, wq, x, w[0], w[1], s->qkv);
    if (L->rotary && e->C > 1) {
      /* Context parallelism: the tokens' places in the whole sequence (zig-zag). */
      cp_rope(e, r, ns, nt, heads, dm / L->heads, s->qkv, wq, FALSE);
      cp_rope(e, r, ns, nt, kv, dm / L->heads, (char *)s->qkv + k->elem * (gsize)dl, wq, FALSE);
    } else if (L->rotary) {
      /* Positions are the tokens' places in the sequence: attention holds whole sequences. */
      k->rope(ns, nt, heads, dm / L->heads, s->qkv, wq, FALSE);
      k->rope(ns, nt, kv, dm / L->heads, (char *)s->qkv + k->elem * (gsize)dl, wq, FALSE);
    }
    if (e->C > 1) {
      /* Ring attention: the core and the output projection run with the ring's blocks
       * (vd_cp_block); here this chip's own K/V block and the merge state. */
      int ldk = 2 * kv * (dm / L->heads);
      cp_state_init(s, e->C);
      s->cp_kv_n = (gint64)rows * ldk;
      int ps = recompute ? 2 : 0;
      g_free(s->cp_kv[ps][0]);
      s->cp_kv[ps][0] = alloc0(e, s->cp_kv_n);
      for (gint64 q = 0; q < rows; q++)
        memcpy((char *)s->cp_kv[ps][0] + k->elem * (gsize)(q * ldk),
               (char *)s->qkv + k->elem * (gsize)(q * wq + dl), k->elem * (gsize)ldk);
      g_free(s->cp_kv[1][0]); /* this chip's block, kept for the backward ring */
      s->cp_kv[1][0] = dup(e, s->cp_kv[ps][0], s->cp_kv_n);
      gint64 nst = (gint64)ns * heads * nt;
      s->cp_m = alloc0(e, nst);
      for (gint64 q = 0; q < nst; q++)
        k->set(s->cp_m, q, -INFINITY);
      s->cp_l = alloc0(e, nst);
      s->cp_acc = alloc0(e, (gint64)rows * dl);
      return TRUE;
    }
    s->p = alloc0(e, (gint64)ns * heads * nt * nt);
    s->att = alloc0(e, (gint64)rows * dl);
    k->attn_fwd(ns, nt, heads, kv, dm / L->heads, n->causal, s->qkv, s->p, s->att);
    ny = (gint64)rows * dm;
    y = alloc0(e, ny);
    k->dense_fwd(rows, dl, dm, s->att, w[2], NULL, y);
    break;
  }
  default:
    return fail(why, "layer '%s': %s layers are not supported by the validator", L->name,
                ts_layer_kind_name(L->kind));
  }
  return fwd_finish(e, r, i, u, recompute, y, ny, layout, why);
}

/* The end of a forward pass: the output set with its layout, what the plan drops marked. */
static gboolean fwd_finish(vd_exec *e, vd_rank *r, int i, int u, gboolean recompute, void *y,
                           gint64 ny, vd_layout layout, char **why)
{
  const vd_layer *L = &e->net->layers[i];
  int nl = e->net->nlayers;
  vd_saved *s = &r->s[u * nl + i];
  if (column_like(e, i))
    layout = VD_FEAT;
  else if (partial_out(e, i))
    layout = VD_PARTIAL;
  vd_val *out = &r->y[u * nl + i];
  vd_val_set(out, y, ny, layout);
  out->epilogue = i;
  s->fwd_done = TRUE;
  /* What the plan drops after the forward pass, to be recomputed or re-gathered. */
  if (!recompute && e->drop_all[i] && ts_plan_micro_recomputed(e->plan, u, e->plan->n_micro))
    s->stale = TRUE;
  if (e->drop_p[i] && L->kind == TS_LAYER_ATTENTION)
    s->p_stale = TRUE;
  if (e->drop_x[i])
    s->x_stale = TRUE;
  /* A whole or block output is complete here; partial sums wait for their sum. */
  return layout == VD_PARTIAL ? TRUE : vd_epilogue(e, r, i, u, why);
}

gboolean vd_attn_recompute(vd_exec *e, vd_rank *r, int i, int u, char **why)
{
  const vd_layer *L = &e->net->layers[i];
  vd_saved *s = &r->s[u * e->net->nlayers + i];
  if (L->kind != TS_LAYER_ATTENTION || !s->fwd_done || s->qkv == NULL)
    return fail(why, "'%s recompute attention' on chip %d: no attention forward to recompute",
                L->name, r->rank);
  int ns, nt, heads = split(e, i) ? L->heads / e->T : L->heads;
  int kv = split(e, i) ? L->kv_heads / e->T : L->kv_heads;
  work_extent(e, L, s->work, r->tp, &ns, &nt);
  memset(s->p, 0, e->k->elem * (gsize)((gint64)ns * heads * nt * nt));
  e->k->attn_fwd(ns, nt, heads, kv, L->in / L->heads, e->net->causal, s->qkv, s->p, s->att);
  s->p_stale = FALSE;
  return TRUE;
}

gboolean vd_act_grad(vd_exec *e, vd_rank *r, int k, int u, vd_val *out, char **why)
{
  const vd_net *n = e->net;
  int nl = n->nlayers;
  vd_val *parts[16];
  const char *who[16];
  int np = 0;
  if (k < nl && r->holds[k]) {
    parts[np] = &r->dx[u * nl + k];
    who[np++] = n->layers[k].name;
  }
  for (int j = k; j < nl && np < 16; j++)
    if (n->layers[j].residual && n->layers[j].res_from == k && r->holds[j]) {
      parts[np] = &r->dr[u * nl + j];
      who[np++] = n->layers[j].name;
    }
  const char *of = k > 0 ? n->layers[k - 1].name : "the data";
  if (np == 0)
    return fail(why, "chip %d: no layer on this chip consumes the output of '%s'", r->rank, of);
  vd_layout lay = VD_FULL;
  int block = -1, whole = -1;
  for (int p = 0; p < np; p++) {
    if (!parts[p]->set)
      return fail(why,
                  "chip %d reads the gradient of the output of '%s' before the backward pass of "
                  "'%s' produced it (micro-batch %d)",
                  r->rank, of, who[p], u);
    if (parts[p]->layout == VD_FULL || parts[p]->layout == VD_PARTIAL) {
      whole = p;
    } else {
      if (block >= 0 && parts[p]->layout != lay)
        return fail(why, "chip %d: the gradient of the output of '%s' comes as a %s and a %s",
                    r->rank, of, vd_layout_name(lay), vd_layout_name(parts[p]->layout));
      block = p;
      lay = parts[p]->layout;
    }
    if (parts[p]->layout == VD_PARTIAL) {
      g_autofree char *key = g_strdup_printf("partial-bwd-%d-%s", k, who[p]);
      vd_note(e, key,
              "the input gradient of '%s' was used while it held partial sums: nothing summed it "
              "over the tensor-parallel group (a missing all-reduce)",
              who[p]);
    }
  }
  if (block >= 0 && whole >= 0)
    return fail(why,
                "chip %d: the gradient of the output of '%s' comes as a %s from '%s'%s and whole "
                "from '%s'%s, and no collective gathers the %s (a missing all-gather)",
                r->rank, of, vd_layout_name(lay), who[block],
                parts[block] != &r->dx[u * nl + k] ? " (its residual)" : "", who[whole],
                parts[whole] != &r->dx[u * nl + k] ? " (its residual)" : "", vd_layout_name(lay));
  void *sum = dup(e, parts[0]->data, parts[0]->n);
  parts[0]->read = TRUE;
  for (int p = 1; p < np; p++) {
    if (parts[p]->n != parts[0]->n) {
      g_free(sum);
      return fail(why, "chip %d: gradients of the output of '%s' of different sizes", r->rank, of);
    }
    e->k->axpy(parts[0]->n, 1.0, parts[p]->data, sum);
    parts[p]->read = TRUE;
  }
  vd_val_set(out, sum, parts[0]->n, block >= 0 ? lay : VD_FULL);
  return TRUE;
}

vd_val *vd_out_grad(vd_exec *e, vd_rank *r, int i, int u, char **why)
{
  const vd_net *n = e->net;
  const vd_layer *L = &n->layers[i];
  int nl = n->nlayers;
  vd_val *v = &r->dy[u * nl + i];
  if (v->set)
    return v;
  if (L->loss) {
    g_autofree char *reader = g_strdup_printf("the loss after '%s' on chip %d", L->name, r->rank);
    vd_val *lg = &r->y[u * nl + i];
    if (!lg->set) {
      fail(why, "%s: no logits (the forward pass did not run)", reader);
      return NULL;
    }
    if (lg->epilogue >= 0 && !vd_epilogue(e, r, i, u, why))
      return NULL;
    if (lg->layout == VD_FEAT) {
      fail(why,
           "%s reads logits split over the tensor-parallel group, and the trace has no "
           "collective that combines them (a vocabulary-parallel cross-entropy needs all-reduces "
           "of the row maxima and sums of exponentials: Megatron-LM's "
           "vocab_parallel_cross_entropy)",
           reader);
      return NULL;
    }
    if (lg->layout == VD_PARTIAL)
      vd_note(e, "partial-loss", "%s read partial sums: nothing summed the logits", reader);
    lg->read = TRUE;
    vd_layout lay = lg->layout == VD_PARTIAL ? VD_FULL : lg->layout;
    gint64 dims[4], lo[4], hi[4];
    vd_act_dims(e, i + 1, dims);
    vd_box(dims, lay, e->T, r->tp, lo, hi);
    int rows = (int)((hi[0] - lo[0]) * (hi[1] - lo[1])), cls = L->out;
    /* Labels of the samples and tokens this chip holds. */
    gint64 b0 = (gint64)r->dp * e->nmicro * e->mb + (gint64)u * e->mb;
    int *labels = g_new(int, MAX(rows, 1)), c = 0;
    for (gint64 s = lo[0]; s < hi[0]; s++)
      for (gint64 t = lo[1]; t < hi[1]; t++)
        labels[c++] = e->labels[(b0 + s) * n->label_tokens +
                                (e->C > 1 ? vd_cp_pos(e, r->cp, (int)t, n->label_tokens) : t)];
    gint64 gr = e->batch * n->label_tokens;
    void *prob = alloc0(e, (gint64)rows * cls);
    double loss = e->k->xent_fwd(rows, cls, lg->data, labels, prob) / (double)gr;
    /* Members holding the whole logits compute the same loss: count it once. */
    if (lay != VD_FULL || r->tp == 0)
      r->loss += loss;
    void *dl = alloc0(e, (gint64)rows * cls);
    e->k->xent_bwd(rows, cls, prob, labels, 1.0 / (double)gr, dl);
    g_free(prob);
    g_free(labels);
    vd_val_set(v, dl, (gint64)rows * cls, lay);
  } else if (r->ga[u * (nl + 1) + i + 1].set) {
    /* Received from the next pipeline stage, plus what consumers on this chip added (a
     * residual whose layer sits on another virtual stage of the same device). */
    vd_val *g = &r->ga[u * (nl + 1) + i + 1];
    g->read = TRUE;
    vd_val_set(v, dup(e, g->data, g->n), g->n, g->layout);
    for (int j = i + 1; j < nl; j++)
      if (n->layers[j].residual && n->layers[j].res_from == i + 1 && r->holds[j]) {
        vd_val *c = &r->dr[u * nl + j];
        if (!c->set || c->n != v->n || c->layout != v->layout) {
          fail(why,
               "chip %d: the residual gradient of '%s' for the output of '%s' is missing or "
               "lies otherwise than the gradient received",
               r->rank, n->layers[j].name, L->name);
          return NULL;
        }
        e->k->axpy(v->n, 1.0, c->data, v->data);
        c->read = TRUE;
      }
  } else if (!vd_act_grad(e, r, i + 1, u, v, why)) {
    return NULL;
  }
  /* The residual added its source as the output lay then: its gradient is this one. */
  if (L->residual)
    vd_val_set(&r->dr[u * nl + i], dup(e, v->data, v->n), v->n, v->layout);
  return v;
}

/* The gradient of layer i's pre-activation output (micro u) into s->dz, in the layout its
 * output had. */
static gboolean bwd_dz(vd_exec *e, vd_rank *r, int i, int u, const char *what, char **why)
{
  const vd_layer *L = &e->net->layers[i];
  const vd_kern *k = e->k;
  int T = e->T;
  vd_saved *s = &r->s[u * e->net->nlayers + i];
  vd_val *dyv = vd_out_grad(e, r, i, u, why);
  if (dyv == NULL)
    return FALSE;
  dyv->read = TRUE;
  gint64 dims[4];
  vd_act_dims(e, i + 1, dims);
  /* The layout this layer's output gradient must have: its output's, before any sum. */
  vd_layout want = column_like(e, i) ? VD_FEAT : partial_out(e, i) ? VD_FULL : s->work;
  if (want == VD_FEAT && !column_like(e, i))
    want = VD_FULL;
  vd_layout have = dyv->layout == VD_PARTIAL ? VD_FULL : dyv->layout;
  if (have == VD_FLAT)
    return fail(why,
                "%s holds only a 1/%d chunk of its output gradient (the pipeline's scatter) "
                "and no all-gather reassembled it",
                what, T);
  g_free(s->dz);
  if (have == want)
    s->dz = dup(e, dyv->data, dyv->n);
  else if (have == VD_FULL)
    s->dz = vd_slice_box(e, dyv->data, dims, want, r->tp); /* conjugate of a gather */
  else
    return fail(why, "%s needs the gradient of its output as a %s but holds a %s (%s)", what,
                vd_layout_name(want), vd_layout_name(have),
                want == VD_FULL ? "a missing all-gather" : "a missing all-to-all");
  gint64 lo[4], hi[4];
  gint64 ndz = vd_box(dims, want, T, r->tp, lo, hi);
  if (L->act == VD_ACT_SWIGLU) {
    if (s->z == NULL)
      return fail(why, "%s: the activation's input was never computed", what);
    gint64 f = hi[2] - lo[2], rows = ndz / MAX(f, 1);
    void *dz2 = alloc0(e, 2 * ndz);
    k->swiglu_bwd((int)rows, (int)f, s->z, s->dz, dz2);
    g_free(s->dz);
    s->dz = dz2;
  } else if (L->act != VD_ACT_NONE) {
    if (s->z == NULL)
      return fail(why, "%s: the activation's input was never computed", what);
    k->act_bwd(L->act, ndz, s->z, s->dz, s->dz);
  }
  return TRUE;
}

gboolean vd_layer_bwd(vd_exec *e, vd_rank *r, int i, int u, int phase, char **why)
{
  const vd_net *n = e->net;
  const vd_layer *L = &n->layers[i];
  const vd_kern *k = e->k;
  int T = e->T, nl = n->nlayers;
  gboolean sp = split(e, i);
  vd_saved *s = &r->s[u * nl + i];
  g_autofree char *what = g_strdup_printf("'%s bwd%s' on chip %d (micro-batch %d)", L->name,
                                          phase == 1   ? " input grad"
                                          : phase == 2 ? " weight grad"
                                                       : "",
                                          r->rank, u);
  if (!s->fwd_done)
    return fail(why, "%s runs before its forward pass", what);
  if (s->stale)
    return fail(why,
                "%s: the plan drops this layer's activations for full recomputation, and no "
                "'%s recompute' ran before its backward pass",
                what, L->name);
  if (L->ntensors > 0 && !r->materialized[i])
    return fail(why,
                "%s: its parameters are sharded over the data-parallel group (ZeRO-3, or "
                "updated shard by shard with dp-overlap) and no all-gather collected them",
                what);
  int ns, nt;
  work_extent(e, L, s->work, r->tp, &ns, &nt);
  void **w = r->w + L->tensor0, **g = r->g + L->tensor0;
  gboolean cp_attn = L->kind == TS_LAYER_ATTENTION && e->C > 1;
  if (phase != 2) {
    if (!cp_attn && !bwd_dz(e, r, i, u, what, why))
      return FALSE;
    if (cp_attn && (s->cp_blocks[1] < e->C || s->cp_dkv == NULL || s->cp_dkv[e->C] == NULL))
      return fail(why,
                  "%s: ring attention's backward has not finished (%d of %d blocks, this chip's "
                  "K/V gradient %s): a missing ring op or dependency",
                  what, s->cp_blocks[1], e->C,
                  s->cp_dkv != NULL && s->cp_dkv[e->C] != NULL ? "home" : "not home");
    if (L->kind == TS_LAYER_ATTENTION && s->p_stale)
      return fail(why,
                  "%s: the plan drops the attention probabilities (selective recomputation) and "
                  "no '%s recompute attention' ran",
                  what, L->name);
    void *dx = NULL;
    gint64 ndx = 0;
    switch (L->kind) {
    case TS_LAYER_DENSE: {
      int rows = ns * nt, K = L->in, N = gemm_out(L);
      if (sp && L->tp == TS_TP_ROW)
        K /= T;
      else if (sp)
        N /= T;
      ndx = (gint64)rows * K;
      dx = alloc0(e, ndx);
      k->dense_dgrad(rows, K, N, s->dz, w[0], dx);
      break;
    }
    case TS_LAYER_CONV2D: {
      ts_conv_shape cs = {ns,        L->in,     L->in_h,   L->in_w, L->out,
                          L->kernel, L->kernel, L->stride, L->pad};
      if (sp && L->tp == TS_TP_ROW)
        cs.c /= T;
      else if (sp)
        cs.oc /= T;
      ndx = (gint64)ns * cs.c * cs.h * cs.w;
      dx = alloc0(e, ndx);
      /* ts_conv2d_bwd computes the weight gradient too: into scratch here. */
      g_autofree void *scratch = alloc0(e, (gint64)cs.oc * cs.c * cs.kh * cs.kw);
      g_autofree void *x0 = s->x_stale ? alloc0(e, ndx) : NULL;
      k->conv_bwd(&cs, s->x_stale ? x0 : s->x, w[0], s->dz, dx, scratch, NULL);
      break;
    }
    case TS_LAYER_POOL:
      ndx = (gint64)ns * L->in * L->in_h * L->in_w;
      dx = alloc0(e, ndx);
      k->maxpool_bwd(ns * L->in, L->in_h, L->in_w, L->kernel, s->dz, s->argmax, dx);
      break;
    case TS_LAYER_NORM: {
      /* Layer norm's input and parameter gradients come from one kernel: both here. */
      int rows = ns * nt;
      ndx = (gint64)rows * L->in;
      dx = alloc0(e, ndx);
      if (s->x_stale)
        return fail(why, "%s: its input was never re-gathered", what);
      k->layernorm_bwd(rows, L->in, s->x, w[0], s->mean, s->rstd, s->dz, dx, g[0], g[1]);
      break;
    }
    case TS_LAYER_ATTENTION: {
      int rows = ns * nt, dm = L->in, heads = L->heads, kv = L->kv_heads, dl = dm;
      if (sp) {
        heads /= T;
        kv /= T;
        dl /= T;
      }
      int wq = dl + 2 * kv * (dm / L->heads);
      g_free(s->dqkv);
      s->dqkv = alloc0(e, (gint64)rows * wq);
      if (cp_attn) {
        /* Ring attention: dQ accumulated over the blocks, dK/dV come home round the ring. */
        int ldk = wq - dl;
        for (gint64 q = 0; q < rows; q++) {
          memcpy((char *)s->dqkv + k->elem * (gsize)(q * wq),
                 (char *)s->cp_dq + k->elem * (gsize)(q * dl), k->elem * (gsize)dl);
          memcpy((char *)s->dqkv + k->elem * (gsize)(q * wq + dl),
                 (char *)s->cp_dkv[e->C] + k->elem * (gsize)(q * ldk), k->elem * (gsize)ldk);
        }
        if (L->rotary) {
          cp_rope(e, r, ns, nt, heads, dm / L->heads, s->dqkv, wq, TRUE);
          cp_rope(e, r, ns, nt, kv, dm / L->heads, (char *)s->dqkv + k->elem * (gsize)dl, wq, TRUE);
        }
      } else {
        g_autofree void *datt = alloc0(e, (gint64)rows * dl);
        k->dense_dgrad(rows, dl, dm, s->dz, w[2], datt);
        k->attn_bwd(ns, nt, heads, kv, dm / L->heads, s->qkv, s->p, datt, s->dqkv);
      }
      if (L->rotary && !cp_attn) {
        k->rope(ns, nt, heads, dm / L->heads, s->dqkv, wq, TRUE);
        k->rope(ns, nt, kv, dm / L->heads, (char *)s->dqkv + k->elem * (gsize)dl, wq, TRUE);
      }
      ndx = (gint64)rows * dm;
      dx = alloc0(e, ndx);
      k->dense_dgrad(rows, dm, wq, s->dqkv, w[0], dx);
      break;
    }
    default:
      return fail(why, "layer '%s': %s layers are not supported by the validator", L->name,
                  ts_layer_kind_name(L->kind));
    }
    /* Column-split and head-split layers leave partial input gradients; a row-split layer
     * its block; the others the layout they worked in. */
    vd_layout dxl = s->work;
    if (sp && L->tp != TS_TP_ROW)
      dxl = VD_PARTIAL;
    vd_val_set(&r->dx[u * nl + i], dx, ndx, dxl);
    s->dgrad_done = TRUE;
  }
  if (phase != 1) {
    if (!s->dgrad_done || s->dz == NULL)
      return fail(why, "%s runs before the layer's input gradient", what);
    if (s->x_stale && L->kind != TS_LAYER_NORM)
      return fail(why,
                  "%s: the plan keeps only a block of this layer's input, and no re-gather "
                  "brought it back for the weight gradient",
                  what);
    switch (L->kind) {
    case TS_LAYER_DENSE: {
      int rows = ns * nt, K = L->in, N = gemm_out(L);
      if (sp && L->tp == TS_TP_ROW)
        K /= T;
      else if (sp)
        N /= T;
      k->dense_wgrad(rows, K, N, s->x, s->dz, g[0], L->bias ? g[1] : NULL);
      break;
    }
    case TS_LAYER_CONV2D: {
      ts_conv_shape cs = {ns,        L->in,     L->in_h,   L->in_w, L->out,
                          L->kernel, L->kernel, L->stride, L->pad};
      if (sp && L->tp == TS_TP_ROW)
        cs.c /= T;
      else if (sp)
        cs.oc /= T;
      k->conv_bwd(&cs, s->x, w[0], s->dz, NULL, g[0], L->bias ? g[1] : NULL);
      break;
    }
    case TS_LAYER_ATTENTION: {
      int rows = ns * nt, dm = L->in, dl = sp ? dm / T : dm;
      int wq = dl + 2 * (sp ? L->kv_heads / T : L->kv_heads) * (dm / L->heads);
      k->dense_wgrad(rows, dl, dm, s->att, s->dz, g[2], L->bias ? g[3] : NULL);
      k->dense_wgrad(rows, dm, wq, s->x, s->dqkv, g[0], L->bias ? g[1] : NULL);
      break;
    }
    default:
      break; /* pool: no parameters; norm: done with its input gradient */
    }
    s->wgrad_done = TRUE;
  }
  return TRUE;
}

/* ---- context parallelism: ring attention ---------------------------------------------- */

int vd_cp_pos(const vd_exec *e, int c, int t, int tokens)
{
  int ch = tokens / (2 * e->C);
  return t < ch ? c * ch + t : (2 * e->C - 1 - c) * ch + (t - ch);
}

/* Rotary embedding of local rows by the tokens' places in the whole sequence: the rows are put
 * at their places in a whole-sequence buffer, rotated by the reference kernel, taken back. */
static void cp_rope(const vd_exec *e, const vd_rank *r, int ns, int nt, int heads, int dh, void *x,
                    int ld, gboolean inverse)
{
  const vd_kern *k = e->k;
  int tok = nt * e->C, wd = heads * dh; /* the rotated columns of each row */
  char *full = g_malloc0(k->elem * (gsize)ns * tok * wd);
  for (int sm = 0; sm < ns; sm++)
    for (int t = 0; t < nt; t++)
      memcpy(full + k->elem * (gsize)(((gint64)sm * tok + vd_cp_pos(e, r->cp, t, tok)) * wd),
             (char *)x + k->elem * (gsize)(((gint64)sm * nt + t) * ld), k->elem * (gsize)wd);
  k->rope(ns, tok, heads, dh, full, wd, inverse);
  for (int sm = 0; sm < ns; sm++)
    for (int t = 0; t < nt; t++)
      memcpy((char *)x + k->elem * (gsize)(((gint64)sm * nt + t) * ld),
             full + k->elem * (gsize)(((gint64)sm * tok + vd_cp_pos(e, r->cp, t, tok)) * wd),
             k->elem * (gsize)wd);
  g_free(full);
}

/* Shapes of attention layer i on this chip: samples, local tokens, local heads and key/value
 * heads, head width, local Q width and fused QKV width. */
static void cp_dims(const vd_exec *e, int i, const vd_saved *s, int *ns, int *nt, int *heads,
                    int *kv, int *dh, int *dl, int *wq)
{
  const vd_layer *L = &e->net->layers[i];
  work_extent(e, L, s->work, 0, ns, nt);
  gboolean sp = split(e, i);
  *heads = sp ? L->heads / e->T : L->heads;
  *kv = sp ? L->kv_heads / e->T : L->kv_heads;
  *dh = L->in / L->heads;
  *dl = *heads * *dh;
  *wq = *dl + 2 * *kv * *dh;
}

gboolean vd_cp_block(vd_exec *e, vd_rank *r, int i, int u, int pass, char **why)
{
  const vd_layer *L = &e->net->layers[i];
  const vd_kern *k = e->k;
  int nl = e->net->nlayers, C = e->C;
  vd_saved *s = &r->s[u * nl + i];
  int j = s->cp_blocks[pass];
  g_autofree char *what =
      g_strdup_printf("'%s ring attention block%s' %d on chip %d (micro-batch %d)", L->name,
                      pass ? " bwd" : "", j + 1, r->rank, u);
  if (L->kind != TS_LAYER_ATTENTION || C <= 1 || s->qkv == NULL || s->cp_kv[pass] == NULL ||
      s->cp_kv[pass][0] == NULL)
    return fail(why, "%s runs before the layer's projections (no local Q, K, V)", what);
  if (j >= C)
    return fail(why, "%s: more ring steps than the %d cp ranks", what, C);
  if (pass == 1 && j == 0) {
    if (!s->fwd_done)
      return fail(why, "%s: the ring's forward did not finish", what);
    if (s->stale)
      return fail(why,
                  "%s: the plan drops this layer's activations for full recomputation, and no "
                  "'%s recompute' went round the ring before its backward",
                  what, L->name);
    /* The backward's first block: the output projection's input gradient, the merge statistics
     * and this chip's own K/V block to send round again. */
    g_autofree char *w2 =
        g_strdup_printf("'%s bwd' on chip %d (micro-batch %d)", L->name, r->rank, u);
    if (!bwd_dz(e, r, i, u, w2, why))
      return FALSE;
    int ns, nt, heads, kv, dh, dl, wq;
    cp_dims(e, i, s, &ns, &nt, &heads, &kv, &dh, &dl, &wq);
    gint64 rows = (gint64)ns * nt;
    void **w = r->w + L->tensor0;
    g_free(s->cp_acc); /* reused: the gradient of the attention output */
    s->cp_acc = alloc0(e, rows * dl);
    k->dense_dgrad((int)rows, dl, L->in, s->dz, w[2], s->cp_acc);
    s->cp_dsum = alloc0(e, (gint64)ns * heads * nt);
    for (int sm = 0; sm < ns; sm++)
      for (int h = 0; h < heads; h++)
        for (int t = 0; t < nt; t++) {
          double d = 0;
          gint64 o = ((gint64)sm * nt + t) * dl + (gint64)h * dh;
          for (int c = 0; c < dh; c++)
            d += k->get(s->cp_acc, o + c) * k->get(s->att, o + c);
          k->set(s->cp_dsum, ((gint64)sm * heads + h) * nt + t, d);
        }
    s->cp_dq = alloc0(e, rows * dl);
    s->cp_dkv[0] = alloc0(e, s->cp_kv_n);
  }
  const void *kvb = s->cp_kv[pass][j];
  int owner = ((r->cp - j) % C + C) % C;
  if (kvb == NULL)
    return fail(why,
                "%s: the K/V block of cp rank %d has not arrived (a missing cp send or receive, "
                "or a missing dependency)",
                what, owner);
  int ns, nt, heads, kv, dh, dl, wq;
  cp_dims(e, i, s, &ns, &nt, &heads, &kv, &dh, &dl, &wq);
  int tok = nt * C;
  int *qpos = g_new(int, nt), *kpos = g_new(int, nt);
  for (int t = 0; t < nt; t++) {
    qpos[t] = e->net->causal ? vd_cp_pos(e, r->cp, t, tok) : G_MAXINT;
    kpos[t] = vd_cp_pos(e, owner, t, tok);
  }
  if (pass != 1) {
    k->cp_block_fwd(ns, nt, nt, heads, kv, dh, wq, s->qkv, kvb, qpos, kpos, s->cp_m, s->cp_l,
                    s->cp_acc);
  } else {
    /* The block's own dK/dV, added to the partial sum from the previous rank only when the sum
     * goes on (vd_cp_send): Transformer Engine waits for that sum right before the add. */
    void *dpart = alloc0(e, s->cp_kv_n);
    k->cp_block_bwd(ns, nt, nt, heads, kv, dh, wq, s->qkv, kvb, qpos, kpos, s->cp_lse, s->cp_dsum,
                    s->cp_acc, s->cp_dq, dpart);
    s->cp_dout[j] = dpart;
  }
  g_free(qpos);
  g_free(kpos);
  s->cp_blocks[pass]++;
  if (pass == 1 || j + 1 < C)
    return TRUE;
  /* The last block: normalise, then the output projection (the layer's output from here). */
  gint64 rows = (gint64)ns * nt;
  g_free(s->att);
  s->att = alloc0(e, rows * dl);
  s->cp_lse = alloc0(e, (gint64)ns * heads * nt);
  k->cp_finish(ns, nt, heads, dh, s->cp_m, s->cp_l, s->cp_acc, s->att, s->cp_lse);
  void **w = r->w + L->tensor0;
  gint64 ny = rows * L->in;
  void *y = alloc0(e, ny);
  k->dense_fwd((int)rows, dl, L->in, s->att, w[2], NULL, y);
  return fwd_finish(e, r, i, u, pass == 2, y, ny, s->work == VD_FEAT ? VD_FULL : s->work, why);
}

const void *vd_cp_send(vd_exec *e, vd_rank *r, int i, int u, int pass, gboolean dkv, gint64 *n,
                       char **why)
{
  const vd_layer *L = &e->net->layers[i];
  vd_saved *s = &r->s[u * e->net->nlayers + i];
  int j = dkv ? s->cp_dsent : s->cp_sent[pass];
  const void *buf = NULL;
  if (L->kind == TS_LAYER_ATTENTION && s->cp_len > 0 && j < e->C)
    buf = dkv ? (s->cp_dout != NULL ? s->cp_dout[j] : NULL) : s->cp_kv[pass][j];
  if (buf == NULL) {
    fail(why, "'%s cp %ssend %s' %d on chip %d (micro-batch %d): nothing to send yet (%s)", L->name,
         pass && !dkv ? "bwd " : "", dkv ? "dK/dV" : "K/V", j + 1, r->rank, u,
         dkv ? "its block's backward has not run"
             : "the block has not arrived, or the layer's forward or recomputation did not run");
    return NULL;
  }
  if (dkv) {
    /* The add: this block's dK/dV plus the partial sum that came from the previous rank. */
    if (s->cp_dkv[j] == NULL) {
      fail(why,
           "'%s cp send dK/dV' %d on chip %d (micro-batch %d): the partial K/V gradient to add "
           "has not arrived (a missing cp send or receive of dK/dV, or a missing dependency)",
           L->name, j + 1, r->rank, u);
      return NULL;
    }
    e->k->axpy(s->cp_kv_n, 1.0, s->cp_dkv[j], s->cp_dout[j]);
    g_free(s->cp_dkv[j]);
    s->cp_dkv[j] = NULL;
    s->cp_dsent++;
  } else
    s->cp_sent[pass]++;
  *n = s->cp_kv_n;
  return buf;
}

gboolean vd_cp_recv(vd_exec *e, vd_rank *r, int i, int u, int pass, gboolean dkv, void *data,
                    gint64 n, char **why)
{
  const vd_layer *L = &e->net->layers[i];
  vd_saved *s = &r->s[u * e->net->nlayers + i];
  if (L->kind == TS_LAYER_ATTENTION && e->C > 1)
    cp_state_init(s, e->C);
  int j = dkv ? s->cp_drecvd : s->cp_recvd[pass];
  void **dst = dkv ? s->cp_dkv : s->cp_kv[pass];
  if (L->kind != TS_LAYER_ATTENTION || dst == NULL || j + 1 >= s->cp_len ||
      (s->cp_kv_n > 0 && n != s->cp_kv_n)) {
    g_free(data);
    return fail(why,
                "'%s cp recv %s' on chip %d (micro-batch %d): a block this chip's ring state "
                "cannot take (step %d, %" G_GINT64_FORMAT " elements)",
                L->name, dkv ? "dK/dV" : "K/V", r->rank, u, j + 1, n);
  }
  g_free(dst[j + 1]);
  dst[j + 1] = data;
  if (dkv)
    s->cp_drecvd++;
  else
    s->cp_recvd[pass]++;
  return TRUE;
}
