/* ts_validate_net: a model file as the split validator runs it. The model must be one of the
 * three validation networks of ts_nnet (the single-processor reference): its layers are
 * matched one by one against the reference's, their parameter tensors listed in the
 * reference's order, and the tensor-parallel shard of every tensor defined as index maps. */
#include "ts_util.h"
#include "ts_validate_priv.h"

#include <string.h>

void vd_net_free(vd_net *n)
{
  if (n == NULL)
    return;
  for (int i = 0; i < n->nlayers; i++)
    g_free(n->layers[i].name);
  for (int i = 0; i < n->ntensors; i++)
    g_free(n->tensors[i].name);
  g_free(n->layers);
  g_free(n->tensors);
  g_free(n);
}

/* The [layer.NAME] group a layer came from (a repeated layer NAME.k comes from NAME). */
static char *layer_group(GKeyFile *kf, const char *name)
{
  char *g = g_strconcat("layer.", name, NULL);
  if (g_key_file_has_group(kf, g))
    return g;
  g_free(g);
  const char *dot = strrchr(name, '.');
  if (dot == NULL)
    return NULL;
  g_autofree char *base = g_strndup(name, (gsize)(dot - name));
  g = g_strconcat("layer.", base, NULL);
  if (g_key_file_has_group(kf, g))
    return g;
  g_free(g);
  return NULL;
}

/* A value of the model file, without its trailing comment (the file was already checked by
 * ts_model_load, so only presence matters here). */
static char *kf_value(GKeyFile *kf, const char *group, const char *key, const char *def)
{
  g_autofree char *v = g_key_file_get_value(kf, group, key, NULL);
  if (v == NULL)
    return g_strdup(def);
  char *hash = strchr(v, '#');
  if (hash != NULL)
    *hash = '\0';
  return g_strdup(g_strstrip(v));
}

/* What ts_layer does not carry: activation, residual, loss, pooling mode. */
static gboolean read_semantics(GKeyFile *kf, const ts_model *m, vd_layer *L, gboolean *avg,
                               gboolean *global, GError **error)
{
  g_autofree char *group = layer_group(kf, L->name);
  if (group == NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: layer '%s': no [layer.%s] group; expected an explicit layer list "
                "(kind = layers) for split validation",
                m->path, L->name, L->name);
    return FALSE;
  }
  g_autofree char *act = kf_value(kf, group, "activation", "none");
  g_autofree char *res = kf_value(kf, group, "residual", "false");
  g_autofree char *loss = kf_value(kf, group, "loss", "false");
  g_autofree char *mode = kf_value(kf, group, "mode", "max");
  g_autofree char *glob = kf_value(kf, group, "global", "false");
  if (strcmp(act, "relu") == 0)
    L->act = VD_ACT_RELU;
  else if (strcmp(act, "gelu") == 0)
    L->act = VD_ACT_GELU;
  else if (strcmp(act, "swiglu") == 0 && L->kind == TS_LAYER_DENSE)
    L->act = VD_ACT_SWIGLU;
  else if (strcmp(act, "none") == 0)
    L->act = VD_ACT_NONE;
  else {
    g_set_error(
        error, TS_ERROR, TS_ERROR_INPUT,
        "%s: [%s] activation='%s': expected relu, gelu, swiglu or none for split validation "
        "(the reference networks have no other)",
        m->path, group, act);
    return FALSE;
  }
  L->residual = strcmp(res, "true") == 0;
  L->loss = strcmp(loss, "true") == 0;
  *avg = strcmp(mode, "avg") == 0;
  *global = strcmp(glob, "true") == 0;
  return TRUE;
}

static void add_tensor(vd_net *n, GArray *ts, int layer, vd_role role, const char *suffix,
                       gint64 rows, gint64 cols)
{
  vd_tensor t = {g_strdup_printf("%s.%s", n->layers[layer].name, suffix),
                 role,
                 layer,
                 rows,
                 cols,
                 rows * cols};
  g_array_append_val(ts, t);
}

/* Says why layer i does not match the reference network, in one line. */
G_GNUC_PRINTF(5, 6)
static gboolean mismatch(const vd_net *n, int i, const char *net, GError **error, const char *fmt,
                         ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "%s: layer '%s': %s; expected the validation %s (docs/validation.md, "
              "\"Split equivalence\")",
              n->m->path ? n->m->path : n->m->name, n->layers[i].name, what, net);
  return FALSE;
}

#define MLP_SHAPE "MLP: dense+relu, dense+relu, dense+loss"
#define CNN_SHAPE                                                                                  \
  "CNN: conv2d+relu (odd kernel, same padding), conv2d+relu, max pool 2x2, dense+loss"
#define TF_SHAPE                                                                                   \
  "transformer block: norm, attention+residual, norm, dense+gelu, dense+residual, dense+loss"

static gboolean match_mlp(vd_net *n, GError **error)
{
  const vd_layer *L = n->layers;
  for (int i = 0; i < 3; i++) {
    if (L[i].kind != TS_LAYER_DENSE || L[i].tokens != 1 || !L[i].bias || L[i].residual)
      return mismatch(n, i, MLP_SHAPE, error, "a %s layer (tokens %d, bias %d, residual %d)",
                      ts_layer_kind_name(L[i].kind), L[i].tokens, L[i].bias, L[i].residual);
    if ((i < 2) != (L[i].act == VD_ACT_RELU) || (i == 2) != L[i].loss || (i == 2 && L[i].act))
      return mismatch(n, i, MLP_SHAPE, error, "activation or loss differs");
  }
  if (L[1].in != L[1].out)
    return mismatch(n, 1, MLP_SHAPE, error, "%d -> %d features (the hidden layers are as wide)",
                    L[1].in, L[1].out);
  n->cfg.kind = TS_NNET_MLP;
  n->cfg.in = L[0].in;
  n->cfg.hidden = L[0].out;
  n->cfg.classes = L[2].out;
  n->label_tokens = 1;
  n->x_per_sample = L[0].in;
  return TRUE;
}

static gboolean match_cnn(vd_net *n, const gboolean *avg, const gboolean *global, GError **error)
{
  const vd_layer *L = n->layers;
  for (int i = 0; i < 2; i++) {
    if (L[i].kind != TS_LAYER_CONV2D || L[i].act != VD_ACT_RELU || !L[i].bias || L[i].residual ||
        L[i].stride != 1 || L[i].kernel % 2 == 0 || L[i].pad != L[i].kernel / 2 ||
        L[i].kernel != L[0].kernel || L[i].l->kernel_h != L[i].l->kernel_w)
      return mismatch(n, i, CNN_SHAPE, error,
                      "a %s layer (kernel %d, stride %d, padding %d, activation %d, bias %d)",
                      ts_layer_kind_name(L[i].kind), L[i].kernel, L[i].stride, L[i].pad, L[i].act,
                      L[i].bias);
  }
  if (L[1].out != L[0].out)
    return mismatch(n, 1, CNN_SHAPE, error, "%d filters where conv1 has %d", L[1].out, L[0].out);
  if (L[2].kind != TS_LAYER_POOL || avg[2] || global[2] || L[2].kernel != 2 || L[2].stride != 2 ||
      L[2].pad != 0 || L[0].in_h % 2 != 0 || L[0].in_w % 2 != 0)
    return mismatch(n, 2, CNN_SHAPE, error, "a %s layer (kernel %d, stride %d, padding %d)",
                    ts_layer_kind_name(L[2].kind), L[2].kernel, L[2].stride, L[2].pad);
  if (L[3].kind != TS_LAYER_DENSE || !L[3].loss || L[3].act || !L[3].bias || L[3].residual)
    return mismatch(n, 3, CNN_SHAPE, error, "a %s layer (loss %d)", ts_layer_kind_name(L[3].kind),
                    L[3].loss);
  n->cfg.kind = TS_NNET_CNN;
  n->cfg.channels = L[0].in;
  n->cfg.height = L[0].in_h;
  n->cfg.width = L[0].in_w;
  n->cfg.filters = L[0].out;
  n->cfg.kernel = L[0].kernel;
  n->cfg.classes = L[3].out;
  n->label_tokens = 1;
  n->x_per_sample = (gint64)L[0].in * L[0].in_h * L[0].in_w;
  return TRUE;
}

static gboolean match_transformer(vd_net *n, GError **error)
{
  vd_layer *L = n->layers;
  static const ts_layer_kind kinds[6] = {TS_LAYER_NORM,  TS_LAYER_ATTENTION, TS_LAYER_NORM,
                                         TS_LAYER_DENSE, TS_LAYER_DENSE,     TS_LAYER_DENSE};
  static const vd_act acts[6] = {VD_ACT_NONE, VD_ACT_NONE, VD_ACT_NONE,
                                 VD_ACT_GELU, VD_ACT_NONE, VD_ACT_NONE};
  static const gboolean res[6] = {FALSE, TRUE, FALSE, FALSE, TRUE, FALSE};
  for (int i = 0; i < 6; i++) {
    /* fc1 may be SwiGLU (the reference's gated MLP) instead of GELU. */
    gboolean act_ok = L[i].act == acts[i] || (i == 3 && L[i].act == VD_ACT_SWIGLU);
    if (L[i].kind != kinds[i] || !act_ok || L[i].residual != res[i] || L[i].loss != (i == 5) ||
        (L[i].kind != TS_LAYER_NORM && !L[i].bias) || L[i].tokens != L[0].tokens || L[i].in_h != 0)
      return mismatch(n, i, TF_SHAPE, error, "a %s layer (activation %d, residual %d, loss %d)",
                      ts_layer_kind_name(L[i].kind), L[i].act, L[i].residual, L[i].loss);
  }
  /* Pre-LN (GPT-2): each residual adds the input of the norm that opens its sublayer. */
  L[1].res_from = 0;
  L[4].res_from = 2;
  n->cfg.kind = TS_NNET_TRANSFORMER;
  n->cfg.seq = L[0].tokens;
  n->cfg.dmodel = L[0].in;
  n->cfg.heads = L[1].heads;
  n->cfg.kv_heads = L[1].kv_heads; /* grouped-query attention when fewer than heads */
  n->cfg.gated = L[3].act == VD_ACT_SWIGLU;
  n->cfg.rotary = L[1].rotary;
  n->cfg.dff = L[3].out;
  n->cfg.classes = L[5].out;
  n->cfg.causal = TRUE; /* a GPT block; the model file has no key for it */
  n->label_tokens = L[0].tokens;
  n->x_per_sample = (gint64)L[0].tokens * L[0].in;
  return TRUE;
}

/* The layer kinds of today's decoders that the reference (ts_nnet) has no kernels for: the
 * first such layer, and what it is, or NULL. Grouped-query attention, rotary and
 * SwiGLU have them (models/validate-gqa.ini, validate-llama.ini); GeGLU is refused by the
 * activation check. */
static const ts_layer *unexecutable_layer(const ts_model *m, const char **what)
{
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    *what = l->kv_lora_rank > 0 ? "multi-head latent attention" : NULL;
    if (*what != NULL)
      return l;
  }
  return NULL;
}

vd_net *vd_net_new(const ts_model *m, GError **error)
{
  g_autoptr(GKeyFile) kf = NULL;
  const char *what = NULL;
  const ts_layer *bad = unexecutable_layer(m, &what);
  if (bad != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: layer '%s' is %s, which the split validator does not execute on real "
                "kernels; expected one of the validation networks (docs/validation.md)",
                m->path ? m->path : m->name, bad->name, what);
    return NULL;
  }
  if (m->kind == NULL || strcmp(m->kind, "layers") != 0 || m->path == NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: kind='%s': expected an explicit layer list (kind = layers) matching a "
                "validation network, e.g. models/validate-mlp.ini (docs/validation.md)",
                m->path ? m->path : m->name, m->kind ? m->kind : "");
    return NULL;
  }
  kf = ts_kf_load(m->path, error);
  if (kf == NULL)
    return NULL;
  /* The validator runs its own networks, whose residuals it wires itself: graph keys (inputs,
   * concatenations, named residual sources) are for the simulator only. */
  for (int i = 0; i < m->nlayers; i++) {
    g_autofree char *group = g_strdup_printf("layer.%s", m->layers[i].name);
    char *dot = strrchr(group, '.');
    if (!g_key_file_has_group(kf, group) && dot != NULL)
      *dot = '\0'; /* a copy NAME.k of a repeated layer */
    const char *key = g_key_file_has_key(kf, group, "input", NULL)           ? "input"
                      : g_key_file_has_key(kf, group, "residual_from", NULL) ? "residual_from"
                                                                             : NULL;
    if (key != NULL) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: [%s] %s: expected a validation network without graph keys (each layer "
                  "reads the one before; docs/validation.md)",
                  m->path, group, key);
      return NULL;
    }
  }
  vd_net *n = g_new0(vd_net, 1);
  n->m = m;
  n->nlayers = m->nlayers;
  n->layers = g_new0(vd_layer, MAX(m->nlayers, 1));
  gboolean avg[8] = {0}, global[8] = {0};
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    vd_layer *L = &n->layers[i];
    L->l = l;
    L->name = g_strdup(l->name);
    L->kind = l->kind;
    L->tp = l->tp;
    L->bias = l->bias;
    L->res_from = -1;
    L->tokens = (int)MAX(l->tokens, 1);
    L->in = (int)l->in_features;
    L->out = (int)(l->gated ? l->out_features / 2 : l->out_features); /* after gating */
    L->in_h = (int)l->in_h;
    L->in_w = (int)l->in_w;
    L->out_h = (int)l->out_h;
    L->out_w = (int)l->out_w;
    L->kernel = (int)l->kernel_h;
    L->stride = (int)l->stride;
    L->pad = (int)l->padding;
    L->heads = (int)l->heads;
    L->kv_heads = l->kv_heads > 0 ? (int)l->kv_heads : L->heads;
    L->rotary = l->rotary;
    if (L->kind == TS_LAYER_NORM || L->kind == TS_LAYER_ATTENTION || L->kind == TS_LAYER_POOL)
      L->out = L->in;
    gboolean a = FALSE, g = FALSE;
    if (!read_semantics(kf, m, L, &a, &g, error)) {
      vd_net_free(n);
      return NULL;
    }
    if (i < 8) {
      avg[i] = a;
      global[i] = g;
    }
  }
  /* Which reference network: by the sequence of layer kinds. */
  gboolean ok;
  int nl = m->nlayers;
  if (nl == 3 && n->layers[0].kind == TS_LAYER_DENSE)
    ok = match_mlp(n, error);
  else if (nl == 4 && n->layers[0].kind == TS_LAYER_CONV2D)
    ok = match_cnn(n, avg, global, error);
  else if (nl == 6 && n->layers[0].kind == TS_LAYER_NORM)
    ok = match_transformer(n, error);
  else {
    g_set_error(
        error, TS_ERROR, TS_ERROR_INPUT,
        "%s: %d layers starting with %s: expected one of the validation networks (" MLP_SHAPE
        "; " CNN_SHAPE "; " TF_SHAPE "), e.g. models/validate-mlp.ini",
        m->path, nl, nl > 0 ? ts_layer_kind_name(n->layers[0].kind) : "nothing");
    ok = FALSE;
  }
  if (!ok) {
    vd_net_free(n);
    return NULL;
  }
  n->classes = n->cfg.classes;
  n->causal = n->cfg.causal;
  /* Parameter tensors in the reference's order (ts_nnet.c nnet_layout). */
  GArray *ts = g_array_new(FALSE, FALSE, sizeof(vd_tensor));
  for (int i = 0; i < nl; i++) {
    vd_layer *L = &n->layers[i];
    L->tensor0 = (int)ts->len;
    switch (L->kind) {
    case TS_LAYER_DENSE: {
      gint64 nout = L->act == VD_ACT_SWIGLU ? 2 * (gint64)L->out : L->out; /* gate and up */
      add_tensor(n, ts, i, VD_T_W, "w", L->in, nout);
      add_tensor(n, ts, i, VD_T_B, "b", 1, nout);
      break;
    }
    case TS_LAYER_CONV2D:
      add_tensor(n, ts, i, VD_T_W, "w", L->out, (gint64)L->in * L->kernel * L->kernel);
      add_tensor(n, ts, i, VD_T_B, "b", 1, L->out);
      break;
    case TS_LAYER_NORM:
      add_tensor(n, ts, i, VD_T_GAMMA, "gamma", 1, L->in);
      add_tensor(n, ts, i, VD_T_BETA, "beta", 1, L->in);
      break;
    case TS_LAYER_ATTENTION:
      add_tensor(n, ts, i, VD_T_WQKV, "wqkv", L->in, ts_nnet_qkv_width(&n->cfg));
      add_tensor(n, ts, i, VD_T_BQKV, "bqkv", 1, ts_nnet_qkv_width(&n->cfg));
      add_tensor(n, ts, i, VD_T_WO, "wo", L->in, L->in);
      add_tensor(n, ts, i, VD_T_BO, "bo", 1, L->in);
      break;
    default:
      break;
    }
    L->ntensors = (int)ts->len - L->tensor0;
  }
  n->ntensors = (int)ts->len;
  n->tensors = (vd_tensor *)g_array_free(ts, FALSE);
  return n;
}

void vd_net_data(const vd_net *n, double **x, int **labels)
{
  /* The reference draws its data from a second stream, seed ^ 0xda7a5eed: normal inputs, then
   * uniform labels (ts_nnet.c, ts_nnet_new). The validator compares its first loss with the
   * reference's, so a change there fails loudly rather than silently. */
  const ts_nnet_config *c = &n->cfg;
  ts_rng r;
  ts_rng_seed(&r, c->seed ^ 0xda7a5eedULL);
  gint64 nx = n->x_per_sample * c->batch, nl = (gint64)n->label_tokens * c->batch;
  *x = g_new(double, nx);
  *labels = g_new(int, nl);
  for (gint64 j = 0; j < nx; j++)
    (*x)[j] = ts_rng_normal(&r);
  for (gint64 j = 0; j < nl; j++)
    (*labels)[j] = (int)ts_rng_below(&r, (guint64)c->classes);
}

gint64 *vd_tensor_shard(const vd_net *n, int t, int T, int r, gint64 *count)
{
  const vd_tensor *ts = &n->tensors[t];
  const vd_layer *L = &n->layers[ts->layer];
  *count = ts->numel;
  if (T <= 1)
    return NULL;
  gint64 R = ts->rows, C = ts->cols;
  gint64 *idx = NULL, k = 0;
  /* Column blocks [R][C/T] of a [R][C] matrix; row blocks [R/T][C]. */
#define COLS(R_, C_)                                                                               \
  do {                                                                                             \
    gint64 cb = (C_) / T;                                                                          \
    idx = g_new(gint64, (R_)*cb);                                                                  \
    for (gint64 i = 0; i < (R_); i++)                                                              \
      for (gint64 j = 0; j < cb; j++)                                                              \
        idx[k++] = i * (C_) + r * cb + j;                                                          \
  } while (0)
#define ROWS(R_, C_)                                                                               \
  do {                                                                                             \
    gint64 rb = (R_) / T;                                                                          \
    idx = g_new(gint64, rb * (C_));                                                                \
    for (gint64 i = 0; i < rb; i++)                                                                \
      for (gint64 j = 0; j < (C_); j++)                                                            \
        idx[k++] = (r * rb + i) * (C_) + j;                                                        \
  } while (0)
  switch (L->kind) {
  case TS_LAYER_DENSE:
    if (L->act == VD_ACT_SWIGLU && L->tp == TS_TP_COLUMN) {
      /* A gated layer: this member's columns of the gate and the same columns of the up
       * projection (Megatron-LM's linear_fc1 under SwiGLU), gate block first. */
      gint64 f = C / 2, fb = f / T;
      idx = g_new(gint64, R * 2 * fb);
      for (gint64 i = 0; i < R; i++)
        for (gint64 half = 0; half < 2; half++)
          for (gint64 j = 0; j < fb; j++)
            idx[k++] = i * C + half * f + r * fb + j;
    } else if (L->tp == TS_TP_COLUMN || L->tp == TS_TP_VOCAB)
      COLS(R, C); /* weight columns and bias entries of this member's output features */
    else if (L->tp == TS_TP_ROW && ts->role == VD_T_W)
      ROWS(R, C); /* weight rows of its input features; the bias stays whole */
    break;
  case TS_LAYER_CONV2D:
    if (L->tp == TS_TP_COLUMN) {
      if (ts->role == VD_T_W)
        ROWS(R, C); /* output channels are the rows of [out][in k k] */
      else
        COLS(R, C);
    } else if (L->tp == TS_TP_ROW && ts->role == VD_T_W) {
      /* input channels: [out][in/T][k k] out of [out][in][k k] */
      gint64 kk = (gint64)L->kernel * L->kernel, cb = L->in / T;
      idx = g_new(gint64, R * cb * kk);
      for (gint64 o = 0; o < R; o++)
        for (gint64 c = 0; c < cb; c++)
          for (gint64 q = 0; q < kk; q++)
            idx[k++] = o * C + (r * cb + c) * kk + q;
    }
    break;
  case TS_LAYER_ATTENTION:
    if (L->tp == TS_TP_HEADS) {
      gint64 d = L->in, db = d / T, dkv = (gint64)L->kv_heads * (d / L->heads), kb = dkv / T;
      if (ts->role == VD_T_WQKV || ts->role == VD_T_BQKV) {
        /* this member's heads in each of the Q, K and V column blocks (K and V: its
         * key/value heads, kv_heads / T of them, Megatron-LM's split of query groups) */
        idx = g_new(gint64, R * (db + 2 * kb));
        for (gint64 i = 0; i < R; i++) {
          for (gint64 j = 0; j < db; j++)
            idx[k++] = i * C + r * db + j;
          for (gint64 part = 0; part < 2; part++)
            for (gint64 j = 0; j < kb; j++)
              idx[k++] = i * C + d + part * dkv + r * kb + j;
        }
      } else if (ts->role == VD_T_WO) {
        ROWS(R, C); /* rows of Wo that read its heads' context */
      }
    }
    break;
  default:
    break;
  }
#undef COLS
#undef ROWS
  if (idx != NULL)
    *count = k;
  return idx;
}
