/* ts_nnet: small real networks on synthetic data; the layouts and initial values are made
 * here in double, the passes in ts_nnet_impl.h once per precision. */
#include "ts_nnet.h"
#include "ts_util.h"

#include <math.h>
#include <string.h>

#define TS_NNET_MAX_TENSORS 16

/* Tensor indices per kind, in the order ts_nnet_tensor lists them. */
enum { MLP_W1, MLP_B1, MLP_W2, MLP_B2, MLP_W3, MLP_B3, MLP_NT };
enum { CNN_C1W, CNN_C1B, CNN_C2W, CNN_C2B, CNN_FCW, CNN_FCB, CNN_NT };
enum {
  TF_LN1G,
  TF_LN1B,
  TF_WQKV,
  TF_BQKV,
  TF_WO,
  TF_BO,
  TF_LN2G,
  TF_LN2B,
  TF_W1,
  TF_B1,
  TF_W2,
  TF_B2,
  TF_WH,
  TF_BH,
  TF_NT
};

/* Activation and scratch buffers (a kind uses a subset). */
enum {
  NB_Z1,
  NB_A1,
  NB_Z2,
  NB_A2,
  NB_POOL,
  NB_LOGITS,
  NB_PROB,
  NB_DLOGITS,
  NB_D1,
  NB_D2,
  NB_DA,
  NB_WORK,
  NB_L1,
  NB_MEAN1,
  NB_RSTD1,
  NB_QKV,
  NB_ATT,
  NB_P,
  NB_H,
  NB_L2,
  NB_MEAN2,
  NB_RSTD2,
  NB_F1,
  NB_G,
  NB_Y,
  NB_DY,
  NB_DG,
  NB_DL,
  NB_DH,
  NB_DATT,
  NB_DQKV,
  NB_COUNT
};

#define TS_R float
#define TS_F(name) name##_f32
#include "ts_nnet_impl.h"
#undef TS_R
#undef TS_F
#define TS_R double
#define TS_F(name) name##_f64
#include "ts_nnet_impl.h"
#undef TS_R
#undef TS_F

struct ts_nnet {
  ts_prec prec;
  ts_nnet_config cfg;
  int nt;
  ts_nnet_tensor_info info[TS_NNET_MAX_TENSORS];
  net_f32 *f32; /* exactly one of the two is set */
  net_f64 *f64;
};

static const char *const kind_names[] = {"mlp", "cnn", "transformer"};

const char *ts_nnet_kind_name(ts_nnet_kind k)
{
  return k >= 0 && k < TS_NNET_NKINDS ? kind_names[k] : "?";
}

int ts_nnet_kind_parse(const char *s)
{
  for (int k = 0; k < TS_NNET_NKINDS; k++)
    if (s != NULL && strcmp(s, kind_names[k]) == 0)
      return k;
  return -1;
}

void ts_nnet_config_default(ts_nnet_kind kind, ts_nnet_config *out)
{
  /* Small enough that a finite-difference check of every parameter takes milliseconds, big
   * enough that every code path (several heads, padding, pooling windows) is exercised. */
  memset(out, 0, sizeof *out);
  out->kind = kind;
  out->seed = 42;
  out->classes = 5;
  switch (kind) {
  case TS_NNET_MLP:
    out->batch = 4;
    out->in = 8;
    out->hidden = 16;
    break;
  case TS_NNET_CNN:
    out->batch = 2;
    out->classes = 4;
    out->channels = 2;
    out->height = 6;
    out->width = 6;
    out->filters = 3;
    out->kernel = 3;
    break;
  default:
    out->batch = 2;
    out->seq = 4;
    out->dmodel = 8;
    out->heads = 2;
    out->dff = 16;
    out->causal = TRUE;
    break;
  }
}

static gboolean check_field(const char *name, int v, int lo, int hi, const char *what,
                            GError **error)
{
  if (v < lo || v > hi) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "network config: %s=%d: expected %s, a whole number in [%d, %d]", name, v, what, lo,
                hi);
    return FALSE;
  }
  return TRUE;
}

gboolean ts_nnet_config_check(const ts_nnet_config *c, GError **error)
{
  /* Limits keep every buffer index below 2^31 (the kernels take int dimensions). */
  const int big = 1 << 16;
  if (c->kind < 0 || c->kind >= TS_NNET_NKINDS) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "network config: kind=%d: expected mlp, cnn or transformer", (int)c->kind);
    return FALSE;
  }
  if (!check_field("batch", c->batch, 1, big, "a sample count", error) ||
      !check_field("classes", c->classes, 2, big, "a class count", error))
    return FALSE;
  gint64 elems = 0;
  switch (c->kind) {
  case TS_NNET_MLP:
    if (!check_field("in", c->in, 1, big, "an input width", error) ||
        !check_field("hidden", c->hidden, 1, big, "a layer width", error))
      return FALSE;
    elems = (gint64)c->batch * MAX(MAX(c->in, c->hidden), c->classes) +
            (gint64)MAX(c->in, c->hidden) * MAX(c->hidden, c->classes);
    break;
  case TS_NNET_CNN:
    if (!check_field("channels", c->channels, 1, 4096, "a channel count", error) ||
        !check_field("filters", c->filters, 1, 4096, "a filter count", error) ||
        !check_field("height", c->height, 2, 4096, "an image height", error) ||
        !check_field("width", c->width, 2, 4096, "an image width", error) ||
        !check_field("kernel", c->kernel, 1, 15, "a kernel size", error))
      return FALSE;
    if (c->kernel % 2 == 0 || c->height % 2 != 0 || c->width % 2 != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "network config: kernel=%d height=%d width=%d: expected an odd kernel (same "
                  "padding) and an even height and width (2x2 pooling)",
                  c->kernel, c->height, c->width);
      return FALSE;
    }
    elems = (gint64)c->batch * MAX(c->channels, c->filters) * c->height * c->width * c->kernel *
            c->kernel;
    break;
  default:
    if (!check_field("seq", c->seq, 1, 4096, "a sequence length", error) ||
        !check_field("dmodel", c->dmodel, 1, big, "a model width", error) ||
        !check_field("heads", c->heads, 1, c->dmodel, "a head count", error) ||
        !check_field("dff", c->dff, 1, big, "an MLP width", error))
      return FALSE;
    if (c->dmodel % c->heads != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "network config: heads=%d: expected a divisor of dmodel=%d", c->heads, c->dmodel);
      return FALSE;
    }
    if (c->rotary && (c->dmodel / c->heads) % 2 != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "network config: rotary with heads of width %d: expected an even width",
                  c->dmodel / c->heads);
      return FALSE;
    }
    if (c->kv_heads < 0 || (c->kv_heads > 0 && c->heads % c->kv_heads != 0)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "network config: kv_heads=%d: expected a divisor of heads=%d (0: heads)",
                  c->kv_heads, c->heads);
      return FALSE;
    }
    elems = (gint64)c->batch * c->seq * (MAX(3 * c->dmodel, 2 * c->dff) + c->heads * c->seq);
    break;
  }
  if (elems > G_MAXINT32 / 2) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "network config: %s network needs %" G_GINT64_FORMAT
                " elements in one buffer; expected at most %d (a small validation network)",
                ts_nnet_kind_name(c->kind), elems, G_MAXINT32 / 2);
    return FALSE;
  }
  return TRUE;
}

static void set_info(ts_nnet_tensor_info *t, const char *name, gint64 rows, gint64 cols)
{
  t->name = name;
  t->rows = rows;
  t->cols = cols;
  t->numel = rows * cols;
}

int ts_nnet_qkv_width(const ts_nnet_config *c)
{
  int kv = c->kv_heads > 0 ? c->kv_heads : c->heads;
  return c->dmodel + 2 * kv * (c->dmodel / c->heads);
}

/* Tensor list of a config; returns the count. Also gives each tensor's fan-in (init bound). */
static int nnet_layout(const ts_nnet_config *c, ts_nnet_tensor_info *t, gint64 *fan_in)
{
  switch (c->kind) {
  case TS_NNET_MLP:
    set_info(&t[MLP_W1], "fc1.w", c->in, c->hidden);
    set_info(&t[MLP_B1], "fc1.b", 1, c->hidden);
    set_info(&t[MLP_W2], "fc2.w", c->hidden, c->hidden);
    set_info(&t[MLP_B2], "fc2.b", 1, c->hidden);
    set_info(&t[MLP_W3], "fc3.w", c->hidden, c->classes);
    set_info(&t[MLP_B3], "fc3.b", 1, c->classes);
    fan_in[MLP_W1] = fan_in[MLP_B1] = c->in;
    fan_in[MLP_W2] = fan_in[MLP_B2] = fan_in[MLP_W3] = fan_in[MLP_B3] = c->hidden;
    return MLP_NT;
  case TS_NNET_CNN: {
    int kk = c->kernel * c->kernel, flat = c->filters * (c->height / 2) * (c->width / 2);
    set_info(&t[CNN_C1W], "conv1.w", c->filters, (gint64)c->channels * kk);
    set_info(&t[CNN_C1B], "conv1.b", 1, c->filters);
    set_info(&t[CNN_C2W], "conv2.w", c->filters, (gint64)c->filters * kk);
    set_info(&t[CNN_C2B], "conv2.b", 1, c->filters);
    set_info(&t[CNN_FCW], "fc.w", flat, c->classes);
    set_info(&t[CNN_FCB], "fc.b", 1, c->classes);
    fan_in[CNN_C1W] = fan_in[CNN_C1B] = (gint64)c->channels * kk;
    fan_in[CNN_C2W] = fan_in[CNN_C2B] = (gint64)c->filters * kk;
    fan_in[CNN_FCW] = fan_in[CNN_FCB] = flat;
    return CNN_NT;
  }
  default: {
    int d = c->dmodel;
    gint64 qkv = ts_nnet_qkv_width(c);
    set_info(&t[TF_LN1G], "ln1.gamma", 1, d);
    set_info(&t[TF_LN1B], "ln1.beta", 1, d);
    set_info(&t[TF_WQKV], "attn.wqkv", d, qkv);
    set_info(&t[TF_BQKV], "attn.bqkv", 1, qkv);
    set_info(&t[TF_WO], "attn.wo", d, d);
    set_info(&t[TF_BO], "attn.bo", 1, d);
    set_info(&t[TF_LN2G], "ln2.gamma", 1, d);
    set_info(&t[TF_LN2B], "ln2.beta", 1, d);
    set_info(&t[TF_W1], "mlp.w1", d, (c->gated ? 2 : 1) * (gint64)c->dff);
    set_info(&t[TF_B1], "mlp.b1", 1, (c->gated ? 2 : 1) * (gint64)c->dff);
    set_info(&t[TF_W2], "mlp.w2", c->dff, d);
    set_info(&t[TF_B2], "mlp.b2", 1, d);
    set_info(&t[TF_WH], "head.w", d, c->classes);
    set_info(&t[TF_BH], "head.b", 1, c->classes);
    for (int i = 0; i < TF_NT; i++)
      fan_in[i] = d;
    fan_in[TF_W2] = fan_in[TF_B2] = c->dff;
    fan_in[TF_LN1G] = fan_in[TF_LN1B] = fan_in[TF_LN2G] = fan_in[TF_LN2B] = 0; /* not dense */
    return TF_NT;
  }
  }
}

/* Per-sample and fixed sizes of every buffer of a config, in elements. */
static void nnet_buffers(const ts_nnet_config *c, gint64 *per, gint64 *fixed)
{
  memset(per, 0, sizeof(gint64) * NB_COUNT);
  memset(fixed, 0, sizeof(gint64) * NB_COUNT);
  per[NB_LOGITS] = per[NB_PROB] = per[NB_DLOGITS] = c->classes;
  switch (c->kind) {
  case TS_NNET_MLP:
    per[NB_Z1] = per[NB_A1] = per[NB_Z2] = per[NB_A2] = per[NB_D1] = per[NB_D2] = c->hidden;
    break;
  case TS_NNET_CNN: {
    gint64 map = (gint64)c->filters * c->height * c->width;
    per[NB_Z1] = per[NB_A1] = per[NB_Z2] = per[NB_A2] = per[NB_DA] = per[NB_D1] = map;
    per[NB_POOL] = per[NB_D2] = (gint64)c->filters * (c->height / 2) * (c->width / 2);
    ts_conv_shape s = {.n = 1,
                       .c = MAX(c->channels, c->filters),
                       .h = c->height,
                       .w = c->width,
                       .oc = c->filters,
                       .kh = c->kernel,
                       .kw = c->kernel,
                       .stride = 1,
                       .pad = c->kernel / 2};
    fixed[NB_WORK] = ts_conv_work_elems(&s);
    break;
  }
  default: {
    gint64 t = c->seq, td = t * c->dmodel, tf = t * c->dff;
    per[NB_LOGITS] = per[NB_PROB] = per[NB_DLOGITS] = t * c->classes;
    per[NB_L1] = per[NB_ATT] = per[NB_H] = per[NB_L2] = per[NB_Y] = td;
    per[NB_DY] = per[NB_DL] = per[NB_DH] = per[NB_DATT] = td;
    per[NB_MEAN1] = per[NB_RSTD1] = per[NB_MEAN2] = per[NB_RSTD2] = t;
    per[NB_QKV] = per[NB_DQKV] = t * ts_nnet_qkv_width(c);
    per[NB_P] = c->heads * t * t;
    per[NB_F1] = per[NB_G] = per[NB_DG] = tf;
    if (c->gated) {
      per[NB_F1] = 2 * tf; /* gate and up */
      per[NB_DG] = 3 * tf; /* dG, then the gate and up gradient */
    }
    fixed[NB_WORK] = t * t;
    break;
  }
  }
}

ts_nnet *ts_nnet_new(const ts_nnet_config *c, ts_prec prec, GError **error)
{
  if (!ts_nnet_config_check(c, error))
    return NULL;
  ts_nnet *net = g_new0(ts_nnet, 1);
  net->prec = prec;
  net->cfg = *c;
  gint64 fan_in[TS_NNET_MAX_TENSORS];
  net->nt = nnet_layout(c, net->info, fan_in);

  /* Initial values in double from the seed, so both precisions start from the same numbers.
   * Dense weights and biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's nn.Linear and
   * nn.Conv2d default). Layer-norm gains and shifts are perturbed from 1 and 0 so that the
   * gradient checks exercise every term of their derivatives. */
  ts_rng rng;
  ts_rng_seed(&rng, c->seed);
  double *init[TS_NNET_MAX_TENSORS];
  for (int i = 0; i < net->nt; i++) {
    init[i] = g_new(double, net->info[i].numel);
    double bound = fan_in[i] > 0 ? 1.0 / sqrt((double)fan_in[i]) : 0.1;
    gboolean gain = g_str_has_suffix(net->info[i].name, ".gamma");
    for (gint64 j = 0; j < net->info[i].numel; j++)
      init[i][j] = (gain ? 1.0 : 0.0) + bound * (2.0 * ts_rng_uniform(&rng) - 1.0);
  }
  /* Data from a second stream, so that resizing the network leaves the data of the first
   * samples unchanged in kind (and vice versa). */
  ts_rng drng;
  ts_rng_seed(&drng, c->seed ^ 0xda7a5eedULL);
  gint64 x_elems, nlabels;
  switch (c->kind) {
  case TS_NNET_MLP:
    x_elems = (gint64)c->batch * c->in;
    nlabels = c->batch;
    break;
  case TS_NNET_CNN:
    x_elems = (gint64)c->batch * c->channels * c->height * c->width;
    nlabels = c->batch;
    break;
  default:
    x_elems = (gint64)c->batch * c->seq * c->dmodel;
    nlabels = (gint64)c->batch * c->seq;
    break;
  }
  double *x = g_new(double, x_elems);
  int *labels = g_new(int, nlabels);
  for (gint64 j = 0; j < x_elems; j++)
    x[j] = ts_rng_normal(&drng);
  for (gint64 j = 0; j < nlabels; j++)
    labels[j] = (int)ts_rng_below(&drng, (guint64)c->classes);

  gint64 per[NB_COUNT], fixed[NB_COUNT];
  nnet_buffers(c, per, fixed);
  if (prec == TS_PREC_F32)
    net->f32 = net_new_f32(c, net->nt, net->info, init, x, x_elems, labels, nlabels, per, fixed);
  else
    net->f64 = net_new_f64(c, net->nt, net->info, init, x, x_elems, labels, nlabels, per, fixed);
  for (int i = 0; i < net->nt; i++)
    g_free(init[i]);
  g_free(x);
  g_free(labels);
  return net;
}

void ts_nnet_free(ts_nnet *net)
{
  if (net == NULL)
    return;
  if (net->f32 != NULL)
    net_free_f32(net->f32);
  if (net->f64 != NULL)
    net_free_f64(net->f64);
  g_free(net);
}

ts_prec ts_nnet_prec(const ts_nnet *net)
{
  return net->prec;
}

const ts_nnet_config *ts_nnet_config_of(const ts_nnet *net)
{
  return &net->cfg;
}

int ts_nnet_ntensors(const ts_nnet *net)
{
  return net->nt;
}

const ts_nnet_tensor_info *ts_nnet_tensor(const ts_nnet *net, int i)
{
  g_return_val_if_fail(i >= 0 && i < net->nt, NULL);
  return &net->info[i];
}

gint64 ts_nnet_nparams(const ts_nnet *net)
{
  gint64 n = 0;
  for (int i = 0; i < net->nt; i++)
    n += net->info[i].numel;
  return n;
}

void *ts_nnet_data(ts_nnet *net, int i, ts_nnet_buf which)
{
  g_return_val_if_fail(i >= 0 && i < net->nt, NULL);
  if (net->f32 != NULL)
    return which == TS_NNET_PARAM ? (void *)net->f32->w[i] : (void *)net->f32->g[i];
  return which == TS_NNET_PARAM ? (void *)net->f64->w[i] : (void *)net->f64->g[i];
}

void ts_nnet_get(const ts_nnet *net, int i, ts_nnet_buf which, double *out)
{
  g_return_if_fail(i >= 0 && i < net->nt);
  gint64 n = net->info[i].numel;
  if (net->f32 != NULL) {
    const float *src = which == TS_NNET_PARAM ? net->f32->w[i] : net->f32->g[i];
    for (gint64 j = 0; j < n; j++)
      out[j] = src[j];
  } else {
    memcpy(out, which == TS_NNET_PARAM ? net->f64->w[i] : net->f64->g[i], sizeof(double) * n);
  }
}

void ts_nnet_set(ts_nnet *net, int i, ts_nnet_buf which, const double *in)
{
  g_return_if_fail(i >= 0 && i < net->nt);
  gint64 n = net->info[i].numel;
  if (net->f32 != NULL) {
    float *dst = which == TS_NNET_PARAM ? net->f32->w[i] : net->f32->g[i];
    for (gint64 j = 0; j < n; j++)
      dst[j] = (float)in[j];
  } else {
    memcpy(which == TS_NNET_PARAM ? net->f64->w[i] : net->f64->g[i], in, sizeof(double) * n);
  }
}

void ts_nnet_zero_grad(ts_nnet *net)
{
  for (int i = 0; i < net->nt; i++) {
    gint64 n = net->info[i].numel;
    if (net->f32 != NULL)
      memset(net->f32->g[i], 0, sizeof(float) * n);
    else
      memset(net->f64->g[i], 0, sizeof(double) * n);
  }
}

static double nnet_pass(ts_nnet *net, int b0, int b1, gboolean backward)
{
  g_return_val_if_fail(0 <= b0 && b0 <= b1 && b1 <= net->cfg.batch, NAN);
  if (b0 == b1)
    return 0.0;
  return net->f32 != NULL ? net_pass_f32(net->f32, b0, b1, backward)
                          : net_pass_f64(net->f64, b0, b1, backward);
}

double ts_nnet_forward(ts_nnet *net, int b0, int b1)
{
  return nnet_pass(net, b0, b1, FALSE);
}

double ts_nnet_forward_backward(ts_nnet *net, int b0, int b1)
{
  return nnet_pass(net, b0, b1, TRUE);
}

void ts_nnet_sgd(ts_nnet *net, double lr, double momentum, double weight_decay)
{
  if (net->f32 != NULL)
    net_sgd_f32(net->f32, lr, momentum, weight_decay);
  else
    net_sgd_f64(net->f64, lr, momentum, weight_decay);
}

void ts_nnet_adam(ts_nnet *net, const ts_adam *hp)
{
  if (net->f32 != NULL)
    net_adam_f32(net->f32, hp);
  else
    net_adam_f64(net->f64, hp);
}
