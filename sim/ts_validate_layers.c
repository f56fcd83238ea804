/* ts_validate_layers: one layer's forward and backward pass on one chip, on the shard the chip
 * holds, with the layout bookkeeping that makes a wrong split visible.
 *
 * Tensor parallelism as Megatron-LM (Shoeybi et al. 2019, section 3): a column-split layer
 * reads the whole input and writes its block of output features; a row-split layer reads its
 * block of input features (slicing a whole input itself) and writes partial sums, to which the
 * bias, the activation and the residual apply only once they are summed (Megatron's
 * RowParallelLinear adds its bias after the all-reduce); attention split by heads is a column
 * QKV projection and a row output projection. Backward mirrors it: a column-split layer's input
 * gradient is a partial sum, a row-split layer's is a block.
 *
 * The layer ops never call a collective: they use what the chip holds. When the trace lacks a
 * collective, the next reader meets partial sums (and computes with them, so the parameters
 * come out wrong) or a block where it needs the whole (and execution stops, naming it). */
#include "ts_util.h"
#include "ts_validate_priv.h"

#include <string.h>

#define TS_R float
#define TS_F(name) name##_f32
#include "ts_validate_kern.h"
#undef TS_R
#undef TS_F
#define TS_R double
#define TS_F(name) name##_f64
#include "ts_validate_kern.h"
#undef TS_R
#undef TS_F

const vd_kern *vd_kern_of(ts_prec prec)
{
  return prec == TS_PREC_F32 ? &vd_kern_table_f32 : &vd_kern_table_f64;
}

static void *alloc0(const vd_exec *e, gint64 n)
{
  return g_malloc0(e->k->elem * (gsize)MAX(n, 1));
}

static void *dup(const vd_exec *e, const void *src, gint64 n)
{
  return g_memdup2(src, e->k->elem * (gsize)MAX(n, 1));
}

static void val_set(vd_val *v, void *data, gint64 n, vd_layout layout)
{
  g_free(v->data);
  *v = (vd_val){data, n, layout, -1, TRUE, FALSE, FALSE, -1};
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

void vd_act_geom(const vd_net *n, int k, gint64 *outer, gint64 *f, gint64 *inner)
{
  const vd_layer *L = &n->layers[k == 0 ? 0 : k - 1];
  gboolean spatial = L->kind == TS_LAYER_CONV2D || L->kind == TS_LAYER_POOL;
  if (k == 0) {
    *outer = spatial ? 1 : L->tokens;
    *f = L->in;
    *inner = spatial ? (gint64)L->in_h * L->in_w : 1;
  } else {
    *outer = spatial ? 1 : L->tokens;
    *f = L->out;
    *inner = spatial ? (gint64)L->out_h * L->out_w : 1;
  }
}

void *vd_slice(const vd_kern *k, const void *full, gint64 outer, gint64 f, gint64 inner, int T,
               int r)
{
  gint64 fb = f / T;
  gsize row = k->elem * (gsize)(fb * inner);
  char *out = g_malloc(MAX(row * (gsize)outer, 1));
  for (gint64 o = 0; o < outer; o++)
    memcpy(out + row * (gsize)o, (const char *)full + k->elem * (gsize)((o * f + r * fb) * inner),
           row);
  return out;
}

void vd_unslice(const vd_kern *k, void *const *blocks, void *full, gint64 outer, gint64 f,
                gint64 inner, int T)
{
  gint64 fb = f / T;
  gsize row = k->elem * (gsize)(fb * inner);
  for (int r = 0; r < T; r++)
    for (gint64 o = 0; o < outer; o++)
      memcpy((char *)full + k->elem * (gsize)((o * f + r * fb) * inner),
             (const char *)blocks[r] + row * (gsize)o, row);
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
  memset(s, 0, sizeof *s);
}

void vd_rank_clear_acts(vd_exec *e, vd_rank *r)
{
  int nl = e->net->nlayers;
  for (int j = 0; j < e->nmicro * nl; j++) {
    g_free(r->y[j].data);
    g_free(r->dx[j].data);
    g_free(r->dr[j].data);
    memset(&r->y[j], 0, sizeof r->y[j]);
    memset(&r->dx[j], 0, sizeof r->dx[j]);
    memset(&r->dr[j], 0, sizeof r->dr[j]);
    r->y[j].epilogue = r->dx[j].epilogue = r->dr[j].epilogue = -1;
    saved_clear(&r->s[j]);
  }
  for (int u = 0; u < e->nmicro; u++) {
    g_free(r->a0[u].data);
    memset(&r->a0[u], 0, sizeof r->a0[u]);
  }
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

static const char *layout_name(vd_layout l)
{
  return l == VD_FULL ? "whole" : l == VD_FEAT ? "feature block" : "partial sums";
}

static gboolean split(const vd_exec *e, const vd_layer *L)
{
  return e->T > 1 && L->tp != TS_TP_REPLICATED;
}

/* Activation A_k of micro-batch u on chip r (the samples, or layer k-1's output with its
 * epilogue applied), marked read. NULL with *why when it does not exist yet. */
static vd_val *act_read(vd_exec *e, vd_rank *r, int k, int u, const char *reader, char **why)
{
  int nl = e->net->nlayers;
  if (k == 0) {
    vd_val *v = &r->a0[u];
    if (!v->set) {
      /* The samples of this chip's replica and micro-batch (samples [b0, b0 + mb)). */
      gint64 b0 = (gint64)r->dp * e->nmicro * e->mb + (gint64)u * e->mb;
      gint64 n = e->net->x_per_sample * e->mb;
      void *data = alloc0(e, n);
      for (gint64 j = 0; j < n; j++)
        e->k->set(data, j, e->x[b0 * e->net->x_per_sample + j]);
      val_set(v, data, n, VD_FULL);
    }
    v->read = TRUE;
    return v;
  }
  vd_val *v = &r->y[u * nl + k - 1];
  if (!v->set) {
    fail(why, "%s reads the output of '%s' (micro-batch %d) before that layer's forward ran",
         reader, e->net->layers[k - 1].name, u);
    return NULL;
  }
  if (v->epilogue >= 0 && !vd_epilogue(e, r, k - 1, u, why))
    return NULL;
  if (v->layout == VD_PARTIAL) {
    g_autofree char *key = g_strdup_printf("partial-fwd-%d", k);
    vd_note(e, key,
            "%s read the output of '%s' while it held partial sums: nothing summed them "
            "over the tensor-parallel group (a missing all-reduce)",
            reader, e->net->layers[k - 1].name);
  }
  v->read = TRUE;
  return v;
}

gboolean vd_epilogue(vd_exec *e, vd_rank *r, int i, int u, char **why)
{
  const vd_net *n = e->net;
  const vd_layer *L = &n->layers[i];
  vd_val *v = &r->y[u * n->nlayers + i];
  if (v->epilogue < 0)
    return TRUE;
  v->epilogue = -1;
  gint64 outer, f, inner;
  vd_act_geom(n, i + 1, &outer, &f, &inner);
  outer *= e->mb;
  gint64 fl = v->layout == VD_FEAT ? f / e->T : f;
  /* The bias: dense and conv (its block when the output is a block), attention's bo. */
  int bt = -1;
  if (L->bias && (L->kind == TS_LAYER_DENSE || L->kind == TS_LAYER_CONV2D))
    bt = L->tensor0 + 1;
  else if (L->bias && L->kind == TS_LAYER_ATTENTION)
    bt = L->tensor0 + 3;
  if (bt >= 0) {
    if (r->n[bt] != fl)
      return fail(why, "layer '%s': bias of %" G_GINT64_FORMAT " elements for %" G_GINT64_FORMAT
                  " output features held",
                  L->name, r->n[bt], fl);
    e->k->bias_add((int)outer, (int)fl, (int)inner, r->w[bt], v->data);
  }
  vd_saved *s = &r->s[u * n->nlayers + i];
  if (L->act != VD_ACT_NONE) {
    g_free(s->z);
    s->z = dup(e, v->data, v->n);
    e->k->act_fwd(L->act, v->n, s->z, v->data);
  }
  if (L->residual) {
    if (v->layout == VD_FEAT)
      return fail(why, "layer '%s': a residual on a column-split output is not supported",
                  L->name);
    g_autofree char *reader = g_strdup_printf("the residual of '%s'", L->name);
    vd_val *src = act_read(e, r, L->res_from, u, reader, why);
    if (src == NULL)
      return FALSE;
    if (src->layout == VD_FEAT || src->n != v->n)
      return fail(why, "the residual of '%s' needs the whole input of '%s' but chip %d holds a %s",
                  L->name, n->layers[L->res_from].name, r->rank, layout_name(src->layout));
    e->k->axpy(v->n, 1.0, src->data, v->data);
  }
  return TRUE;
}

gboolean vd_layer_fwd(vd_exec *e, vd_rank *r, int i, int u, char **why)
{
  const vd_net *n = e->net;
  const vd_layer *L = &n->layers[i];
  const vd_kern *k = e->k;
  int T = e->T, nl = n->nlayers, mb = e->mb;
  gboolean sp = split(e, L);
  g_autofree char *reader = g_strdup_printf("'%s fwd' on chip %d", L->name, r->rank);
  vd_val *in = act_read(e, r, i, u, reader, why);
  if (in == NULL)
    return FALSE;
  gint64 outer, f, inner;
  vd_act_geom(n, i, &outer, &f, &inner);
  outer *= mb;
  vd_saved *s = &r->s[u * nl + i];
  saved_clear(s);
  if (L->tp == TS_TP_ROW && sp) {
    if (f % T != 0)
      return fail(why, "layer '%s': %" G_GINT64_FORMAT " input features do not split %d ways",
                  L->name, f, T);
    if (in->layout == VD_FEAT) {
      s->x = dup(e, in->data, in->n);
    } else {
      s->x = vd_slice(k, in->data, outer, f, inner, T, r->tp); /* Megatron's scatter */
      s->sliced = TRUE;
    }
  } else {
    if (in->layout == VD_FEAT)
      return fail(why,
                  "%s needs its whole input, but the chip holds only a feature block of it "
                  "(no all-gather collected the output of '%s')",
                  reader, i > 0 ? n->layers[i - 1].name : "the data");
    s->x = dup(e, in->data, in->n);
  }
  const void *x = s->x;
  void **w = r->w + L->tensor0;
  void *y = NULL;
  gint64 ny = 0;
  vd_layout layout = VD_FULL;
  gboolean deferred = FALSE; /* epilogue after the partial sums are summed */
  switch (L->kind) {
  case TS_LAYER_DENSE: {
    int rows = mb * L->tokens, K = L->in, N = L->out;
    if (sp && L->tp == TS_TP_ROW) {
      K /= T;
      layout = VD_PARTIAL;
      deferred = TRUE;
    } else if (sp) {
      N /= T; /* column or vocabulary split: this member's output features */
      layout = VD_FEAT;
    }
    ny = (gint64)rows * N;
    y = alloc0(e, ny);
    k->dense_fwd(rows, K, N, x, w[0], NULL, y);
    break;
  }
  case TS_LAYER_CONV2D: {
    ts_conv_shape cs = {mb, L->in, L->in_h, L->in_w, L->out, L->kernel, L->kernel, L->stride, L->pad};
    if (sp && L->tp == TS_TP_ROW) {
      cs.c /= T;
      layout = VD_PARTIAL;
      deferred = TRUE;
    } else if (sp) {
      cs.oc /= T;
      layout = VD_FEAT;
    }
    ny = (gint64)mb * cs.oc * L->out_h * L->out_w;
    y = alloc0(e, ny);
    k->conv_fwd(&cs, x, w[0], NULL, y);
    break;
  }
  case TS_LAYER_POOL: {
    int planes = mb * L->in;
    ny = (gint64)planes * L->out_h * L->out_w;
    y = alloc0(e, ny);
    s->argmax = g_new0(gint32, MAX(ny, 1));
    k->maxpool_fwd(planes, L->in_h, L->in_w, L->kernel, x, y, s->argmax);
    break;
  }
  case TS_LAYER_NORM: {
    int rows = mb * L->tokens;
    ny = (gint64)rows * L->in;
    y = alloc0(e, ny);
    s->mean = alloc0(e, rows);
    s->rstd = alloc0(e, rows);
    k->layernorm_fwd(rows, L->in, x, w[0], w[1], y, s->mean, s->rstd);
    break;
  }
  case TS_LAYER_ATTENTION: {
    int rows = mb * L->tokens, d = L->in, heads = L->heads, dl = d;
    if (sp) {
      heads /= T;
      dl /= T;
      layout = VD_PARTIAL;
      deferred = TRUE;
    }
    s->qkv = alloc0(e, (gint64)rows * 3 * dl);
    k->dense_fwd(rows, d, 3 * dl, x, w[0], w[1], s->qkv);
    s->p = alloc0(e, (gint64)mb * heads * L->tokens * L->tokens);
    s->att = alloc0(e, (gint64)rows * dl);
    k->attn_fwd(mb, L->tokens, heads, d / L->heads, n->causal, s->qkv, s->p, s->att);
    ny = (gint64)rows * d;
    y = alloc0(e, ny);
    k->dense_fwd(rows, dl, d, s->att, w[2], NULL, y);
    break;
  }
  default:
    return fail(why, "layer '%s': %s layers are not supported by the validator", L->name,
                ts_layer_kind_name(L->kind));
  }
  vd_val *out = &r->y[u * nl + i];
  val_set(out, y, ny, layout);
  out->epilogue = i;
  s->fwd_done = 1;
  /* A whole or block output is complete here; partial sums wait for their sum. */
  return deferred ? TRUE : vd_epilogue(e, r, i, u, why);
}

/* The gradient of layer i's output for micro-batch u: from the loss, or the sum of what its
 * consumers' backward passes produced (the next layer's input gradient, residual gradients). */
static void *out_grad(vd_exec *e, vd_rank *r, int i, int u, vd_layout *layout, char **why)
{
  const vd_net *n = e->net;
  const vd_layer *L = &n->layers[i];
  int nl = n->nlayers;
  if (L->loss) {
    g_autofree char *reader = g_strdup_printf("the loss after '%s' on chip %d", L->name, r->rank);
    vd_val *v = &r->y[u * nl + i];
    if (!v->set) {
      fail(why, "%s: no logits (the forward pass did not run)", reader);
      return NULL;
    }
    if (v->epilogue >= 0 && !vd_epilogue(e, r, i, u, why))
      return NULL;
    if (v->layout == VD_FEAT) {
      fail(why,
           "%s reads logits split over the tensor-parallel group, and the trace has no "
           "collective that combines them (a vocabulary-parallel cross-entropy needs all-reduces "
           "of the row maxima and sums of exponentials: Megatron-LM's "
           "vocab_parallel_cross_entropy)",
           reader);
      return NULL;
    }
    if (v->layout == VD_PARTIAL)
      vd_note(e, "partial-loss", "%s read partial sums: nothing summed the logits", reader);
    v->read = TRUE;
    int rows = e->mb * L->tokens, cls = L->out;
    gint64 gr = e->batch * n->label_tokens;
    gint64 b0 = (gint64)r->dp * e->nmicro * e->mb + (gint64)u * e->mb;
    const int *labels = e->labels + b0 * n->label_tokens;
    void *prob = alloc0(e, (gint64)rows * cls);
    double loss = e->k->xent_fwd(rows, cls, v->data, labels, prob) / (double)gr;
    if (r->tp == 0)
      r->loss += loss; /* the tp members of a replica compute the same loss: count it once */
    void *dy = alloc0(e, (gint64)rows * cls);
    e->k->xent_bwd(rows, cls, prob, labels, 1.0 / (double)gr, dy);
    g_free(prob);
    *layout = VD_FULL;
    return dy;
  }
  /* Consumers of A_{i+1}: layer i+1 (its input), residuals that add it. */
  vd_val *parts[16];
  const char *who[16];
  int np = 0;
  parts[np] = &r->dx[u * nl + i + 1];
  who[np++] = n->layers[i + 1].name;
  for (int j = i + 1; j < nl && np < 16; j++)
    if (n->layers[j].residual && n->layers[j].res_from == i + 1) {
      parts[np] = &r->dr[u * nl + j];
      who[np++] = n->layers[j].name;
    }
  gboolean feat = FALSE, whole = FALSE;
  for (int p = 0; p < np; p++) {
    if (!parts[p]->set) {
      fail(why,
           "'%s bwd' on chip %d reads the gradient of its output before the backward pass of "
           "'%s' produced it (micro-batch %d)",
           L->name, r->rank, who[p], u);
      return NULL;
    }
    if (parts[p]->layout == VD_FEAT)
      feat = TRUE;
    else
      whole = TRUE;
    if (parts[p]->layout == VD_PARTIAL) {
      g_autofree char *key = g_strdup_printf("partial-bwd-%d-%s", i, who[p]);
      vd_note(e, key,
              "'%s bwd' read the input gradient of '%s' while it held partial sums: nothing "
              "summed it over the tensor-parallel group (a missing all-reduce)",
              L->name, who[p]);
    }
  }
  if (feat && whole) {
    fail(why,
         "'%s bwd' on chip %d: the gradient of its output comes as a feature block from one "
         "consumer and whole from another (a missing all-gather)",
         L->name, r->rank);
    return NULL;
  }
  void *sum = dup(e, parts[0]->data, parts[0]->n);
  parts[0]->read = TRUE;
  for (int p = 1; p < np; p++) {
    if (parts[p]->n != parts[0]->n) {
      g_free(sum);
      fail(why, "'%s bwd': gradients of its output of different sizes", L->name);
      return NULL;
    }
    e->k->axpy(parts[0]->n, 1.0, parts[p]->data, sum);
    parts[p]->read = TRUE;
  }
  *layout = feat ? VD_FEAT : VD_FULL;
  return sum;
}

gboolean vd_layer_bwd(vd_exec *e, vd_rank *r, int i, int u, char **why)
{
  const vd_net *n = e->net;
  const vd_layer *L = &n->layers[i];
  const vd_kern *k = e->k;
  int T = e->T, nl = n->nlayers, mb = e->mb;
  gboolean sp = split(e, L);
  vd_saved *s = &r->s[u * nl + i];
  if (!s->fwd_done)
    return fail(why, "'%s bwd' on chip %d (micro-batch %d) runs before its forward pass", L->name,
                r->rank, u);
  vd_layout dyl;
  g_autofree void *dy = out_grad(e, r, i, u, &dyl, why);
  if (dy == NULL)
    return FALSE;
  gint64 outer, f, inner;
  vd_act_geom(n, i + 1, &outer, &f, &inner);
  outer *= mb;
  gboolean want_block = sp && (L->tp == TS_TP_COLUMN || L->tp == TS_TP_VOCAB);
  if (want_block && dyl == VD_FULL) {
    /* The conjugate of the forward all-gather: keep this member's block (no communication). */
    void *b = vd_slice(k, dy, outer, f, inner, T, r->tp);
    g_free(dy);
    dy = b;
  } else if (!want_block && dyl == VD_FEAT) {
    return fail(why,
                "'%s bwd' on chip %d needs the whole gradient of its output but holds a feature "
                "block (a missing all-gather)",
                L->name, r->rank);
  }
  gint64 ndy = outer * (want_block ? f / T : f) * inner;
  if (L->residual)
    val_set(&r->dr[u * nl + i], dup(e, dy, ndy), ndy, VD_FULL);
  if (L->act != VD_ACT_NONE) {
    if (s->z == NULL)
      return fail(why, "'%s bwd': the activation's input was never computed", L->name);
    k->act_bwd(L->act, ndy, s->z, dy, dy);
  }
  void **w = r->w + L->tensor0, **g = r->g + L->tensor0;
  void *dx = NULL;
  gint64 ndx = 0;
  vd_layout dxl = VD_FULL;
  switch (L->kind) {
  case TS_LAYER_DENSE: {
    int rows = mb * L->tokens, K = L->in, N = L->out;
    if (sp && L->tp == TS_TP_ROW) {
      K /= T;
      dxl = VD_FEAT;
    } else if (sp) {
      N /= T;
      dxl = VD_PARTIAL;
    }
    ndx = (gint64)rows * K;
    dx = alloc0(e, ndx);
    k->dense_bwd(rows, K, N, s->x, w[0], dy, dx, g[0], L->bias ? g[1] : NULL);
    break;
  }
  case TS_LAYER_CONV2D: {
    ts_conv_shape cs = {mb, L->in, L->in_h, L->in_w, L->out, L->kernel, L->kernel, L->stride, L->pad};
    if (sp && L->tp == TS_TP_ROW) {
      cs.c /= T;
      dxl = VD_FEAT;
    } else if (sp) {
      cs.oc /= T;
      dxl = VD_PARTIAL;
    }
    ndx = (gint64)mb * cs.c * cs.h * cs.w;
    dx = alloc0(e, ndx);
    k->conv_bwd(&cs, s->x, w[0], dy, dx, g[0], L->bias ? g[1] : NULL);
    break;
  }
  case TS_LAYER_POOL: {
    ndx = (gint64)mb * L->in * L->in_h * L->in_w;
    dx = alloc0(e, ndx);
    k->maxpool_bwd(mb * L->in, L->in_h, L->in_w, L->kernel, dy, s->argmax, dx);
    break;
  }
  case TS_LAYER_NORM: {
    int rows = mb * L->tokens;
    ndx = (gint64)rows * L->in;
    dx = alloc0(e, ndx);
    k->layernorm_bwd(rows, L->in, s->x, w[0], s->mean, s->rstd, dy, dx, g[0], g[1]);
    break;
  }
  case TS_LAYER_ATTENTION: {
    int rows = mb * L->tokens, d = L->in, heads = L->heads, dl = d;
    if (sp) {
      heads /= T;
      dl /= T;
      dxl = VD_PARTIAL;
    }
    void *datt = alloc0(e, (gint64)rows * dl);
    k->dense_bwd(rows, dl, d, s->att, w[2], dy, datt, g[2], L->bias ? g[3] : NULL);
    void *dqkv = alloc0(e, (gint64)rows * 3 * dl);
    k->attn_bwd(mb, L->tokens, heads, d / L->heads, s->qkv, s->p, datt, dqkv);
    ndx = (gint64)rows * d;
    dx = alloc0(e, ndx);
    k->dense_bwd(rows, d, 3 * dl, s->x, w[0], dqkv, dx, g[0], L->bias ? g[1] : NULL);
    g_free(datt);
    g_free(dqkv);
    break;
  }
  default:
    return fail(why, "layer '%s': %s layers are not supported by the validator", L->name,
                ts_layer_kind_name(L->kind));
  }
  val_set(&r->dx[u * nl + i], dx, ndx, dxl);
  s->bwd_done = 1;
  return TRUE;
}
