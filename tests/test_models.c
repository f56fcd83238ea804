/* test_models: model files against published parameter counts and closed-form FLOP and
 * activation formulas, and every parser error naming its file and [group] key. */
#include "ts_model.h"
#include "ts_util.h"

#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#define MODELS TS_SOURCE_DIR "/models/"

static ts_model *load_shipped(const char *name)
{
  g_autofree char *path = g_strconcat(MODELS, name, ".ini", NULL);
  g_autoptr(GError) err = NULL;
  ts_model *m = ts_model_load(path, &err);
  cr_assert_not_null(m, "%s: %s", path, err != NULL ? err->message : "?");
  return m;
}

/* Writes text to a fresh temporary file; returns its path (caller frees, then removes). */
static char *write_tmp(const char *text)
{
  g_autoptr(GError) err = NULL;
  char *path = NULL;
  int fd = g_file_open_tmp("ts-model-XXXXXX.ini", &path, &err);
  cr_assert(fd >= 0, "tmp file: %s", err != NULL ? err->message : "?");
  close(fd);
  cr_assert(g_file_set_contents(path, text, -1, NULL));
  return path;
}

/* Loads text as a model file; returns the model (NULL on error, message in *msg). */
static ts_model *load_text(const char *text, char **path_out, char **msg)
{
  char *path = write_tmp(text);
  g_autoptr(GError) err = NULL;
  ts_model *m = ts_model_load(path, &err);
  if (msg != NULL)
    *msg = err != NULL ? g_strdup(err->message) : NULL;
  g_unlink(path);
  if (path_out != NULL)
    *path_out = path;
  else
    g_free(path);
  return m;
}

static double rel(double a, double b)
{
  return fabs(a - b) / fabs(b);
}

static double sum_kind(const ts_model *m, ts_layer_kind k, int field)
{
  double s = 0.0;
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    if (l->kind != k)
      continue;
    s += field == 0 ? l->fwd_flops : field == 1 ? l->params : l->saved_act_bytes;
  }
  return s;
}

/* ---- published parameter counts ------------------------------------------------------------ */

Test(params, mlp_closed_form)
{
  g_autoptr(ts_model) m = load_shipped("mlp");
  double p = ts_model_params(m);
  double want = 784.0 * 1024 + 1024 + 1024.0 * 1024 + 1024 + 1024.0 * 10 + 10;
  cr_assert_eq(p, want, "MLP params %.0f, closed form %.0f", p, want);
  cr_assert_eq(m->nlayers, 3);
  gint64 elems = m->sample_elems;
  cr_assert_eq(elems, 784);
}

Test(params, resnet50_torchvision)
{
  /* torchvision ResNet50_Weights.IMAGENET1K_V1 num_params = 25,557,032 (BN gamma and beta
   * included). The derivation is exact; 0.5% is the brief's tolerance, exactness is checked too. */
  g_autoptr(ts_model) m = load_shipped("resnet50");
  double p = ts_model_params(m);
  double r = rel(p, 25557032.0);
  cr_assert(r < 0.005, "ResNet-50 params %.0f vs 25557032 (%.3g)", p, r);
  cr_assert_eq(p, 25557032.0, "ResNet-50 params %.0f", p);
  double pub = m->published_params;
  cr_assert_eq(pub, 25557032.0);
}

Test(params, resnet_family_torchvision)
{
  /* torchvision num_params: resnet18 11,689,512; resnet34 21,797,672; resnet101 44,549,160;
   * resnet152 60,192,808 (pytorch.org/vision/stable/models.html). */
  const struct {
    int depth;
    double params;
  } cases[] = {{18, 11689512}, {34, 21797672}, {101, 44549160}};
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *text =
        g_strdup_printf("[model]\nkind = resnet\n[resnet]\ndepth = %d\n", cases[i].depth);
    g_autofree char *msg = NULL;
    g_autoptr(ts_model) m = load_text(text, NULL, &msg);
    cr_assert_not_null(m, "%s", msg);
    double p = ts_model_params(m);
    cr_assert_eq(p, cases[i].params, "ResNet-%d params %.0f vs %.0f", cases[i].depth, p,
                 cases[i].params);
  }
  g_autoptr(ts_model) m152 = load_shipped("resnet152");
  double p152 = ts_model_params(m152);
  cr_assert_eq(p152, 60192808.0, "ResNet-152 params %.0f", p152);
}

Test(params, vgg16_torchvision)
{
  /* torchvision VGG16_Weights.IMAGENET1K_V1 num_params 138,357,544 (Simonyan & Zisserman 2015,
   * Table 2: 138 M). */
  g_autoptr(ts_model) m = load_shipped("vgg16");
  double p = ts_model_params(m);
  cr_assert_eq(p, 138357544.0, "VGG-16 params %.0f", p);
}

Test(params, bert_large)
{
  /* Devlin et al. 2019: 340M; the checkpoint (encoder + pooler) 335,141,888; with the MLM head
   * (transform dense + norm + output bias) 336,224,058. Closed form, h = 1024, V = 30522,
   * s = 512, l = 24: 12h^2 + 13h per layer, embeddings (V + s + 2)h + norm 2h, pooler h^2 + h,
   * head transform h^2 + h + 2h, logits bias V. */
  g_autoptr(ts_model) m = load_shipped("bert-large");
  double h = 1024, V = 30522, s = 512, l = 24;
  double want =
      l * (12 * h * h + 13 * h) + (V + s + 2) * h + 2 * h + (h * h + h) + (h * h + h + 2 * h) + V;
  double p = ts_model_params(m);
  cr_assert_eq(p, want, "BERT-Large params %.0f, closed form %.0f", p, want);
  cr_assert(p >= 335e6 && p <= 340e6, "BERT-Large params %.0f not in [335M, 340M]", p);
  double encoder_pooler = p - (h * h + h + 2 * h) - V;
  cr_assert_eq(encoder_pooler, 335141888.0, "encoder + pooler %.0f", encoder_pooler);
}

/* [transformer] head_tokens: BERT's masked-LM head (transform, its norm, the logits) runs on
 * that many tokens of a sequence (DeepLearningExamples' dense sequence output: the masked
 * positions only): their FLOPs and kept activations scale by head_tokens / sequence, the
 * encoder's and every parameter stay. Refused above the sequence and without the head. */
Test(params, bert_head_tokens_scale_the_head_only)
{
  const char *base = "[model]\nname = b\nkind = transformer\ndtype = fp16\n[transformer]\n"
                     "layers = 2\nhidden = 64\nheads = 4\nsequence = 128\nvocab = 1000\n"
                     "position_embedding = learned\ntoken_types = 2\nnorm = post\n"
                     "logits_bias = true\npooler = true\ncausal = false\n";
  g_autofree char *bert = g_strconcat(base, "head_transform = true\n", NULL);
  g_autofree char *t19 = g_strconcat(bert, "head_tokens = 19\n", NULL);
  g_autoptr(ts_model) all = load_text(bert, NULL, NULL);
  g_autoptr(ts_model) few = load_text(t19, NULL, NULL);
  cr_assert(all != NULL && few != NULL && all->nlayers == few->nlayers);
  cr_assert_eq(ts_model_params(all), ts_model_params(few));
  int heads = 0;
  for (int i = 0; i < all->nlayers; i++) {
    const ts_layer *a = &all->layers[i], *b = &few->layers[i];
    gboolean head = g_str_has_prefix(a->name, "head.") || strcmp(a->name, "logits") == 0;
    double want = head ? 19.0 / 128.0 : 1.0, got = b->fwd_flops / a->fwd_flops;
    cr_assert(rel(got, want) < 1e-12, "%s: forward FLOPs x%g, expected x%g", a->name, got, want);
    got = b->saved_act_bytes / a->saved_act_bytes;
    cr_assert(rel(got, want) < 1e-12, "%s: kept x%g, expected x%g", a->name, got, want);
    heads += head;
  }
  cr_assert_eq(heads, 3);
  g_autofree char *msg = NULL;
  g_autofree char *over = g_strconcat(bert, "head_tokens = 129\n", NULL);
  cr_assert_null(load_text(over, NULL, &msg));
  cr_assert(strstr(msg, "head_tokens") != NULL, "%s", msg);
  g_autofree char *msg2 = NULL;
  g_autofree char *nohead = g_strconcat(base, "head_tokens = 19\n", NULL);
  cr_assert_null(load_text(nohead, NULL, &msg2));
  cr_assert(strstr(msg2, "without [transformer] head_transform") != NULL, "%s", msg2);
}

Test(params, bert_base)
{
  g_autoptr(ts_model) m = load_shipped("bert-base");
  double h = 768, V = 30522;
  double p = ts_model_params(m);
  double encoder_pooler = p - (h * h + h + 2 * h) - V;
  /* google-research/bert uncased_L-12_H-768_A-12 (BertModel) = 109,482,240; paper 110M. */
  cr_assert_eq(encoder_pooler, 109482240.0, "encoder + pooler %.0f", encoder_pooler);
  double r = rel(p, 110e6);
  cr_assert(r < 0.01, "BERT-Base params %.0f vs 110M", p);
}

Test(params, gpt2_xl)
{
  /* openai/gpt-2 "1558M": 48 (12h^2 + 13h) + (V + s) h + 2h = 1,557,611,200. */
  g_autoptr(ts_model) m = load_shipped("gpt2-1.5b");
  double p = ts_model_params(m);
  cr_assert_eq(p, 1557611200.0, "GPT-2 1.5B params %.0f", p);
  double r = rel(p, 1.558e9);
  cr_assert(r < 0.001, "GPT-2 1.5B params %.0f vs 1.558e9", p);
}

Test(params, gpt3_175b)
{
  /* Brown et al. 2020, Table 2.1: 175.0B. Derived 174.6B (embeddings included). */
  g_autoptr(ts_model) m = load_shipped("gpt3-175b");
  double p = ts_model_params(m);
  double r = rel(p, 175e9);
  cr_assert(r < 0.01, "GPT-3 175B params %.4g vs 175e9 (%.3g)", p, r);
  cr_assert(p >= 174.6e9 && p <= 175e9, "GPT-3 175B params %.6g not in [174.6e9, 175e9]", p);
}

Test(params, gpt3_family)
{
  /* Brown et al. 2020, Table 2.1 (rounded to 2-3 digits, so 2%). */
  const struct {
    const char *name;
    double published;
  } cases[] = {
      {"gpt3-350m", 350e6}, {"gpt3-1.3b", 1.3e9}, {"gpt3-6.7b", 6.7e9}, {"gpt3-13b", 13.0e9}};
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(ts_model) m = load_shipped(cases[i].name);
    double p = ts_model_params(m);
    double pub = m->published_params;
    cr_assert_eq(pub, cases[i].published, "%s published_params", cases[i].name);
    double r = rel(p, cases[i].published);
    cr_assert(r < 0.02, "%s params %.4g vs %.4g (%.3g)", cases[i].name, p, cases[i].published, r);
  }
}

Test(params, t5_family_checkpoints)
{
  /* T5 (Raffel et al. 2020): closed form written out here, independently of the generator:
   * shared embedding V h; encoder blocks 4hI (attention) + 2hf (ReLU MLP, no biases) + 2h (two
   * RMS scales); decoder blocks 8hI (self + cross) + 2hf + 3h; two final RMS norms 2h; the
   * relative-position tables 2 x 32 x heads; tied logits. It equals the released checkpoints'
   * counts (t5-small 60,506,624 ... t5-11b 11,307,321,344), and the paper's rounded figures
   * (section 3.7) within 5 % (its "770 million" for Large is 4.2 % above the checkpoint). */
  const struct {
    const char *name;
    double L, h, a, kv, f, checkpoint, published;
  } cases[] = {
      {"t5-small", 6, 512, 8, 64, 2048, 60506624, 60e6},
      {"t5-base", 12, 768, 12, 64, 3072, 222903552, 220e6},
      {"t5-large", 24, 1024, 16, 64, 4096, 737668096, 770e6},
      {"t5-3b", 24, 1024, 32, 128, 16384, 2851598336, 2.8e9},
      {"t5-11b", 24, 1024, 128, 128, 65536, 11307321344, 11e9},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(ts_model) m = load_shipped(cases[i].name);
    double L = cases[i].L, h = cases[i].h, I = cases[i].a * cases[i].kv, f = cases[i].f;
    double want = 32128 * h + L * (4 * h * I + 2 * h * f + 2 * h) +
                  L * (8 * h * I + 2 * h * f + 3 * h) + 2 * h + 2 * 32 * cases[i].a;
    double p = ts_model_params(m);
    cr_expect_eq(want, cases[i].checkpoint, "%s closed form %.0f", cases[i].name, want);
    cr_expect_eq(p, cases[i].checkpoint, "%s params %.0f, checkpoint %.0f", cases[i].name, p,
                 cases[i].checkpoint);
    double pub = m->published_params;
    cr_expect_eq(pub, cases[i].published, "%s published_params", cases[i].name);
    cr_expect(rel(p, pub) < 0.05, "%s params %.4g vs published %.4g", cases[i].name, p, pub);
  }
}

/* ---- FLOPs ------------------------------------------------------------------------------ */

/* Narayanan et al. 2021, section 5.1: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with activation
 * recomputation; without it the block terms scale by 3/4 and the logits term 6 B s h V stays:
 * per sample, 72 s l h^2 (1 + s/(6h) + V/(12 l h)). */
static double narayanan(double s, double l, double h, double V)
{
  return 72.0 * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

/* The small terms docs/models.md adds on top (DeepSpeed profiler element-wise counts), written
 * out independently of sim/model/ts_model.c: per block, 2 layer norms x (5 + 5 + 3) sh, attention
 * bias 8sh + softmax 2as^2 + residual 2sh, fc1 bias + GeLU 4sf, fc2 bias + residual 4sh; the
 * embedding's position add and table gradients 3sh (learned positions) or sh; the final norm
 * 13sh; the loss softmax 2sV. */
static double small_terms(double s, double l, double h, double a, double f, double V, gboolean bias,
                          gboolean learned_pos)
{
  double b = bias ? 1.0 : 0.0;
  double block =
      26 * s * h + (8 * b + 2) * s * h + 2 * a * s * s + (2 * b + 2) * s * f + (2 * b + 2) * s * h;
  return l * block + (learned_pos ? 3.0 : 1.0) * s * h + 13 * s * h + 2 * s * V;
}

static void check_transformer_flops(const ts_model *m, gboolean bias, gboolean learned_pos)
{
  double s = (double)m->t_seq, l = (double)m->t_layers, h = (double)m->t_hidden;
  double a = (double)m->t_heads, f = (double)m->t_ffn, V = (double)m->t_vocab;
  cr_assert_eq(f, 4 * h, "the formula assumes ffn = 4h");
  double got = ts_model_train_flops_per_sample(m);
  double gemm = narayanan(s, l, h, V);
  double small = small_terms(s, l, h, a, f, V, bias, learned_pos);
  double r = rel(got, gemm + small);
  cr_assert(r < 1e-9, "%s: train FLOPs %.12g vs formula %.12g + small %.6g (rel %.3g)", m->name,
            got, gemm, small, r);
  /* The small terms are small: under 1% of the total. */
  double share = small / got;
  cr_assert(share < 0.01, "%s: element-wise share %.3g", m->name, share);
}

Test(flops, narayanan_gpt2)
{
  g_autoptr(ts_model) m = load_shipped("gpt2-1.5b");
  check_transformer_flops(m, TRUE, TRUE);
}

Test(flops, narayanan_gpt3_175b)
{
  g_autoptr(ts_model) m = load_shipped("gpt3-175b");
  check_transformer_flops(m, TRUE, TRUE);
}

Test(flops, narayanan_no_bias_no_positions)
{
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m = load_text("[model]\nkind = transformer\n[transformer]\nlayers = 3\n"
                                    "hidden = 256\nheads = 8\nsequence = 128\nvocab = 1000\n"
                                    "bias = false\nposition_embedding = none\n",
                                    NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  check_transformer_flops(m, FALSE, FALSE);
}

Test(flops, backward_twice_forward_for_gemms)
{
  /* Input gradient and weight gradient each cost one forward GEMM (Narayanan 2021, 5.1); no
   * bias, activation or loss, so the equality is exact; the first layer skips its input
   * gradient (its input is data). */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m = load_text("[model]\nkind = layers\n"
                                    "[layer.a]\nkind = dense\nin_features = 64\n"
                                    "out_features = 32\ntokens = 16\nbias = false\n"
                                    "[layer.b]\nkind = dense\nout_features = 8\nbias = false\n",
                                    NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  const ts_layer *a = &m->layers[0], *b = &m->layers[1];
  double fa = a->fwd_flops, fb = b->fwd_flops;
  cr_assert_eq(fa, 2.0 * 16 * 64 * 32);
  cr_assert_eq(fb, 2.0 * 16 * 32 * 8);
  double ai = a->bwd_input_flops, aw = a->bwd_weight_flops;
  double bi = b->bwd_input_flops, bw = b->bwd_weight_flops;
  cr_assert_eq(ai, 0.0, "first layer input gradient %g", ai);
  cr_assert_eq(aw, fa);
  cr_assert_eq(bi, fb);
  cr_assert_eq(bw, fb);
}

Test(flops, mlp_closed_form)
{
  g_autoptr(ts_model) m = load_shipped("mlp");
  /* GEMMs 2 x MACs, bias adds, ReLU on two hidden layers, softmax loss on 10 logits. */
  double gemm = 2.0 * (784.0 * 1024 + 1024.0 * 1024 + 1024.0 * 10);
  double fwd_want = gemm + (1024 + 1024 + 10) + (1024 + 1024) + 10;
  double fwd = ts_model_fwd_flops_per_sample(m);
  cr_assert_eq(fwd, fwd_want, "MLP forward %.0f vs %.0f", fwd, fwd_want);
}

Test(flops, resnet50_torchvision)
{
  /* torchvision ResNet50_Weights.IMAGENET1K_V1: 4.089 GFLOPS, counted as multiply-adds, at
   * 224x224; multiply-add = 2 gives 8.178e9. Convolutions + fc should match closely (0.5%);
   * with batch norm, ReLU, pooling and residual adds the forward is within 3%. */
  g_autoptr(ts_model) m = load_shipped("resnet50");
  double want = 2.0 * 4.089e9;
  double gemm = sum_kind(m, TS_LAYER_CONV2D, 0) + sum_kind(m, TS_LAYER_DENSE, 0);
  double r_gemm = rel(gemm, want);
  cr_assert(r_gemm < 0.005, "ResNet-50 conv + fc forward %.5g vs %.5g (%.3g)", gemm, want, r_gemm);
  double fwd = ts_model_fwd_flops_per_sample(m);
  double r = rel(fwd, want);
  cr_assert(r < 0.03, "ResNet-50 forward %.5g vs %.5g (%.3g)", fwd, want, r);
}

/* AmoebaNet-D (L, D) in torchgpipe's layout (benchmarks/models/amoebanet): parameter and
 * multiply-add counts of that PyTorch model, from its closed form (params: stem 29D/4; a
 * normal cell over inputs of a and b channels with c filters (a + b)c + 23c^2/4 + 17c, a
 * reduction cell (a + b)c + 55c^2/16 + 25c/2; classifier 16D x 1000 + 1000) and a layer-by-
 * layer count of convolution and classifier multiply-adds at 224x224. GPipe (Huang et al.
 * 2019, Table 1) prints the same models rounded: 82M, 318M, 542M, 1.05B, 1.8B. */
static const struct {
  const char *file;
  double params, macs, published;
} amoeba_cases[] = {
    {"amoebanet-d-18-208", 81505540.0, 10018557952.0, 82e6},
    {"amoebanet-d-18-256", 122470120.0, 15170093056.0, 0.0},
    {"amoebanet-d-18-416", 319024120.0, 40032352256.0, 318e6},
    {"amoebanet-d-18-544", 542734840.0, 68440840192.0, 542e6},
    {"amoebanet-d-36-544", 1055832376.0, 125864261632.0, 1.05e9},
    {"amoebanet-d-72-512", 1844858344.0, 213228093440.0, 1.8e9},
};

/* Closed-form parameters of torchgpipe's AmoebaNet-D (L, D) with 1000 classes. */
static double amoeba_closed_form(double L, double D)
{
  double n = L / 3, p = 29.0 * D / 4;
#define NORMAL(a, b, c) (((a) + (b)) * (c) + 23.0 * (c) * (c) / 4 + 17.0 * (c))
#define REDUCE(a, b, c) (((a) + (b)) * (c) + 55.0 * (c) * (c) / 16 + 25.0 * (c) / 2)
  p += REDUCE(D / 4, D / 4, D / 2) + REDUCE(3 * D / 2, D / 4, D);
  /* stack s (filters c = 2^s D) after an input of `in` channels, with `in2` before it */
  double in = 3 * D, in2 = 3 * D / 2;
  for (int s = 0; s < 3; s++) {
    double c = D * (1 << s);
    if (s > 0) {
      p += REDUCE(in, in2, c);
      in2 = in;
      in = 3 * c;
    }
    for (int i = 0; i < n; i++) {
      p += NORMAL(in, in2, c);
      in2 = in;
      in = 4 * c;
    }
  }
#undef NORMAL
#undef REDUCE
  return p + 16 * D * 1000 + 1000;
}

Test(params, amoebanet_d_gpipe)
{
  const double LD[][2] = {{18, 208}, {18, 256}, {18, 416}, {18, 544}, {36, 544}, {72, 512}};
  for (size_t k = 0; k < G_N_ELEMENTS(amoeba_cases); k++) {
    g_autoptr(ts_model) m = load_shipped(amoeba_cases[k].file);
    double p = ts_model_params(m), want = amoeba_cases[k].params;
    cr_expect_eq(p, want, "%s: params %.0f, torchgpipe %.0f", amoeba_cases[k].file, p, want);
    double cf = amoeba_closed_form(LD[k][0], LD[k][1]);
    cr_expect_eq(cf, want, "%s: closed form %.0f", amoeba_cases[k].file, cf);
    /* GPipe's rounded figures: within 2.5% (1.8B is two digits of 1.845B). */
    double pub = m->published_params;
    cr_expect_eq(pub, amoeba_cases[k].published, "%s published_params", amoeba_cases[k].file);
    if (pub > 0)
      cr_expect(rel(p, pub) < 0.025, "%s: %.4g vs GPipe %.4g", amoeba_cases[k].file, p, pub);
  }
}

Test(flops, amoebanet_d_multiply_adds)
{
  /* Every convolution and the classifier: the weight gradient is one GEMM as large as the
   * forward one (plus the classifier's 1000 bias additions), 2 FLOPs per multiply-add. */
  for (size_t k = 0; k < G_N_ELEMENTS(amoeba_cases); k++) {
    g_autoptr(ts_model) m = load_shipped(amoeba_cases[k].file);
    double gemm = 0;
    for (int i = 0; i < m->nlayers; i++) {
      const ts_layer *l = &m->layers[i];
      if (l->kind == TS_LAYER_CONV2D || l->kind == TS_LAYER_DENSE)
        gemm += l->bwd_weight_flops - (l->bias ? (double)l->out_features : 0.0);
    }
    double want = 2 * amoeba_cases[k].macs;
    cr_expect_eq(gemm, want, "%s: %.0f GEMM FLOPs, expected %.0f", amoeba_cases[k].file, gemm,
                 want);
    /* Batch norm, ReLU, pooling and the node sums add a few percent, not more. */
    double fwd = ts_model_fwd_flops_per_sample(m);
    cr_expect(fwd > want && fwd < 1.05 * want, "%s: forward %.4g vs GEMMs %.4g",
              amoeba_cases[k].file, fwd, want);
  }
}

Test(structure, amoebanet_cells_and_carry)
{
  /* (18, 208): 2 stem cells, 3 stacks of 6 normal cells, 2 reductions between them: 22
   * blocks. A cell reads the two cells before it, so a cut after a cell sends both their
   * outputs: its own concatenation (4 maps of c channels for a normal cell) and the one
   * before it; the stem (conv + bn) and the head (pool + fc) belong to no cell. */
  g_autoptr(ts_model) m = load_shipped("amoebanet-d-18-208");
  const double D = 208;
  int blocks = 0, convs = 0, norms = 0;
  for (int i = 0; i < m->nlayers; i++) {
    blocks = MAX(blocks, m->layers[i].block + 1);
    convs += m->layers[i].kind == TS_LAYER_CONV2D;
    norms += m->layers[i].kind == TS_LAYER_NORM;
  }
  cr_expect_eq(blocks, 22);
  cr_expect_eq(norms, 275, "torchgpipe's AmoebaNet-D (18, 208) has 275 batch norms");
  cr_expect_eq(convs, 279);
  cr_expect_eq(m->layers[0].src, -1);
  cr_expect_eq(m->layers[0].block, -1);
  cr_expect_eq(m->layers[m->nlayers - 1].block, -1);
  for (int i = 0; i + 1 < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i], *next = &m->layers[i + 1];
    if (l->block == next->block || l->block < 0 || next->block < 0)
      continue;
    /* Stack 1 (28 x 28, c = D) after its first cell: two normal-cell outputs of 4D channels,
     * of which the last layer's output (one map of D) is the layer's own. */
    if (g_str_has_prefix(l->name, "stack1.cell") && !g_str_has_prefix(l->name, "stack1.cell0.")) {
      double px = 28.0 * 28;
      cr_expect_eq(l->out_act_elems, D * px, "%s", l->name);
      cr_expect_eq(l->carry_elems, 7 * D * px, "%s carries %g, expected %g", l->name,
                   l->carry_elems, 7 * D * px);
    }
    cr_expect_gt(l->carry_elems, 0.0, "%s: a cell boundary carries the cell before", l->name);
  }
  cr_expect_eq(m->layers[m->nlayers - 2].carry_elems, 0.0, "nothing crosses the head");
}

Test(structure, amoebanet_normal_cell_wiring)
{
  /* A normal cell, written out by hand from the AmoebaNet-D genotype (tensorflow/tpu
   * model_specs amoeba_net_d): s0 = ReLU-conv-BN(h_{i-1}), s1 = ReLU-conv-BN(h_{i-2});
   * n2 = conv1x1(s1) + maxpool3x3(s1); n3 = s1 + conv1x7_7x1(s0); n4 = conv1x1(s0) +
   * conv1x7_7x1(s0); n5 = maxpool3x3(n2) + n2; n6 = avgpool3x3(s1) + conv1x1(n5). Each layer
   * and the layer it reads, in order ("<" = the previous cell, "<<" = the one before). */
  static const char *const want[][2] = {
      {"pre0.conv", "<"},
      {"pre0.bn", "pre0.conv"},
      {"pre1.conv", "<<"},
      {"pre1.bn", "pre1.conv"},
      {"node2.a.conv", "pre1.bn"},
      {"node2.a.bn", "node2.a.conv"},
      {"node2.b.pool", "pre1.bn"},
      {"node3.b.reduce.conv", "pre0.bn"},
      {"node3.b.reduce.bn", "node3.b.reduce.conv"},
      {"node3.b.conv1x7.conv", "node3.b.reduce.bn"},
      {"node3.b.conv1x7.bn", "node3.b.conv1x7.conv"},
      {"node3.b.conv7x1.conv", "node3.b.conv1x7.bn"},
      {"node3.b.conv7x1.bn", "node3.b.conv7x1.conv"},
      {"node3.b.expand.conv", "node3.b.conv7x1.bn"},
      {"node3.b.expand.bn", "node3.b.expand.conv"},
      {"node4.a.conv", "pre0.bn"},
      {"node4.a.bn", "node4.a.conv"},
      {"node4.b.reduce.conv", "pre0.bn"},
      {"node4.b.reduce.bn", "node4.b.reduce.conv"},
      {"node4.b.conv1x7.conv", "node4.b.reduce.bn"},
      {"node4.b.conv1x7.bn", "node4.b.conv1x7.conv"},
      {"node4.b.conv7x1.conv", "node4.b.conv1x7.bn"},
      {"node4.b.conv7x1.bn", "node4.b.conv7x1.conv"},
      {"node4.b.expand.conv", "node4.b.conv7x1.bn"},
      {"node4.b.expand.bn", "node4.b.expand.conv"},
      {"node5.a.pool", "node2.b.pool"},
      {"node6.a.pool", "pre1.bn"},
      {"node6.b.conv", "node5.a.pool"},
      {"node6.b.bn", "node6.b.conv"},
  };
  g_autoptr(ts_model) m = load_shipped("amoebanet-d-18-208");
  int first = -1;
  for (int i = 0; i < m->nlayers && first < 0; i++)
    if (strcmp(m->layers[i].name, "stack1.cell2.pre0.conv") == 0)
      first = i;
  cr_assert_geq(first, 0);
  int block = m->layers[first].block;
  for (size_t k = 0; k < G_N_ELEMENTS(want); k++) {
    const ts_layer *l = &m->layers[first + (int)k];
    g_autofree char *name = g_strdup_printf("stack1.cell2.%s", want[k][0]);
    const char *src = want[k][1];
    g_autofree char *src_name = strcmp(src, "<") == 0    ? g_strdup("stack1.cell1.node6.b.bn")
                                : strcmp(src, "<<") == 0 ? g_strdup("stack1.cell0.node6.b.bn")
                                                         : g_strdup_printf("stack1.cell2.%s", src);
    cr_expect_str_eq(l->name, name);
    cr_expect_eq(l->block, block, "%s in the cell's block", l->name);
    cr_assert_geq(l->src, 0);
    cr_expect_str_eq(m->layers[l->src].name, src_name, "%s reads %s", l->name,
                     m->layers[l->src].name);
  }
  cr_expect_neq(m->layers[first + (int)G_N_ELEMENTS(want)].block, block, "29 layers per cell");
  /* The 1x7 and 7x1 convolutions keep the 28 x 28 map (padding along their long axis only). */
  const ts_layer *c17 = &m->layers[first + 9];
  cr_expect(c17->kernel_h == 1 && c17->kernel_w == 7 && c17->out_h == 28 && c17->out_w == 28);
}

Test(structure, explicit_graph_inputs_and_residuals)
{
  /* An explicit list written as a graph: a residual block (b adds the block input `in`), an
   * Inception-like split and join (left and right both read `b`, join reads both,
   * concatenated), and a second input read from the data. */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m = load_text("[model]\nkind = layers\n"
                                    "[layer.in]\nkind = conv2d\nin_channels = 8\nin_h = 8\n"
                                    "in_w = 8\nout_channels = 8\nkernel = 3\npadding = 1\n"
                                    "[layer.a]\nkind = conv2d\nout_channels = 8\nkernel = 3\n"
                                    "padding = 1\n"
                                    "[layer.b]\nkind = norm\nresidual_from = in\n"
                                    "[layer.left]\nkind = conv2d\ninput = b\nout_channels = 4\n"
                                    "kernel = 1\n"
                                    "[layer.right]\nkind = conv2d\ninput = b\nout_channels = 6\n"
                                    "kernel = 3\npadding = 1\n"
                                    "[layer.join]\nkind = conv2d\ninput = left, right\n"
                                    "out_channels = 2\nkernel = 1\nbias = false\n"
                                    "[layer.side]\nkind = dense\ninput = data\nin_features = 5\n"
                                    "out_features = 3\n",
                                    NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  const double map = 8.0 * 8;
  /* in (0), a (1), b (2), left (3), right (4), join (5), side (6) */
  cr_expect_eq(m->layers[2].src, 1);
  cr_expect_eq(m->layers[1].carry_elems, 8 * map, "after a, b still needs in");
  cr_expect_eq(m->layers[2].fwd_flops, (5.0 + 1.0) * 8 * map, "norm + the residual add");
  cr_expect_eq(m->layers[3].src, 2);
  cr_expect_eq(m->layers[4].src, 2, "right reads b, not left");
  cr_expect_eq(m->layers[3].carry_elems, 8 * map, "after left, right still needs b");
  cr_expect_eq(m->layers[4].carry_elems, 4 * map, "after right, join still needs left");
  cr_expect_eq(m->layers[5].in_features, 10, "join reads 4 + 6 concatenated channels");
  cr_expect_eq(m->layers[5].params, 10.0 * 2);
  cr_expect_eq(m->layers[5].src, 4);
  cr_expect_eq(m->layers[6].src, -1);
  cr_expect_eq(m->layers[6].bwd_input_flops, 0.0, "a layer reading data has no input gradient");
  gint64 elems = m->sample_elems;
  cr_expect_eq(elems, 8 * 64 + 5, "a sample is both inputs");
}

Test(flops, resnet50_v1_paper)
{
  /* He et al. 2016, Table 1: ResNet-50 "3.8 x 10^9 FLOPs" (multiply-adds), with the stride on
   * the first 1x1 convolution of each down-sampling bottleneck (variant = v1). */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m =
      load_text("[model]\nkind = resnet\n[resnet]\ndepth = 50\nvariant = v1\n", NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  double macs = (sum_kind(m, TS_LAYER_CONV2D, 0) + sum_kind(m, TS_LAYER_DENSE, 0)) / 2.0;
  double r = rel(macs, 3.8e9);
  cr_assert(r < 0.03, "ResNet-50 v1 multiply-adds %.4g vs 3.8e9 (%.3g)", macs, r);
}

Test(flops, resnet152_and_vgg16_torchvision)
{
  /* torchvision: resnet152 11.514 GFLOPS, vgg16 15.47 GFLOPS (multiply-adds). */
  g_autoptr(ts_model) r152 = load_shipped("resnet152");
  double g152 = sum_kind(r152, TS_LAYER_CONV2D, 0) + sum_kind(r152, TS_LAYER_DENSE, 0);
  double r1 = rel(g152, 2.0 * 11.514e9);
  cr_assert(r1 < 0.005, "ResNet-152 conv + fc %.5g (%.3g)", g152, r1);
  g_autoptr(ts_model) vgg = load_shipped("vgg16");
  double gv = sum_kind(vgg, TS_LAYER_CONV2D, 0) + sum_kind(vgg, TS_LAYER_DENSE, 0);
  double r2 = rel(gv, 2.0 * 15.47e9);
  cr_assert(r2 < 0.005, "VGG-16 conv + fc %.5g (%.3g)", gv, r2);
}

Test(flops, gpt3_six_n_rule)
{
  /* Kaplan et al. 2020 / Brown et al. 2020 appendix D: training costs about 6 N FLOPs per
   * token, attention scores and context excluded (12 s^2 h l per sample, Narayanan 2021). */
  g_autoptr(ts_model) m = load_shipped("gpt3-175b");
  double s = (double)m->t_seq, l = (double)m->t_layers, h = (double)m->t_hidden;
  double N = ts_model_params(m);
  double per_token = (ts_model_train_flops_per_sample(m) - 12.0 * s * s * h * l) / s;
  double r = rel(per_token, 6.0 * N);
  cr_assert(r < 0.02, "GPT-3 per-token training FLOPs without attention %.5g vs 6N %.5g (%.3g)",
            per_token, 6.0 * N, r);
  /* Brown et al. 2020, Table D.1: 3.14e23 FLOPs to train 175B on 300B tokens (6 N D). */
  double total = 6.0 * N * 300e9;
  double r2 = rel(total, 3.14e23);
  cr_assert(r2 < 0.01, "6 N D = %.4g vs 3.14e23 (%.3g)", total, r2);
}

Test(flops, t5_encoder_decoder_closed_form)
{
  /* Forward GEMM and attention-core FLOPs per sample of T5-Base, s = 512 input and t = 114
   * target tokens, I = h (Vaswani et al. 2017; Kaplan et al. 2020, Table 1, extended to
   * cross-attention): encoder blocks 8shI + 4s^2 I + 4shf; decoder blocks: self 8thI + 4t^2 I,
   * cross 4thI (Q, output) + 4shI (K, V from the encoder output) + 4tsI, MLP 4thf; logits
   * 2thV. The model adds element-wise terms (softmax, relative bias, ReLU, residuals, norms,
   * loss): within 1 %. */
  g_autoptr(ts_model) m = load_shipped("t5-base");
  double s = 512, t = 114, h = 768, I = 768, f = 3072, V = 32128, L = 12;
  double enc = L * (8 * s * h * I + 4 * s * s * I + 4 * s * h * f);
  double dec = L * (8 * t * h * I + 4 * t * t * I + 4 * t * h * I + 4 * s * h * I + 4 * t * s * I +
                    4 * t * h * f);
  double want = enc + dec + 2 * t * h * V;
  double got = ts_model_fwd_flops_per_sample(m);
  cr_expect(got >= want && rel(got, want) < 0.01, "T5-Base forward %.6g, closed form %.6g (%.3g)",
            got, want, rel(got, want));
  /* One cross-attention layer exactly: projections, core, softmax, residual (no biases). */
  const ts_layer *x = NULL;
  for (int i = 0; i < m->nlayers && x == NULL; i++)
    if (strcmp(m->layers[i].name, "decoder.block.3.cross_attention") == 0)
      x = &m->layers[i];
  cr_assert_not_null(x);
  double exact = 4 * h * I * (t + s) + 4 * t * s * I + 12 * t * s + t * h;
  cr_expect_eq(x->fwd_flops, exact, "cross-attention %.6g, expected %.6g", x->fwd_flops, exact);
  gint64 kv = x->kv_tokens, tok = x->tokens;
  cr_expect(kv == 512 && tok == 114, "kv_tokens %" G_GINT64_FORMAT " tokens %" G_GINT64_FORMAT, kv,
            tok);
}

/* ---- saved activations ------------------------------------------------------------------ */

Test(activations, korthikanti_per_layer)
{
  /* Korthikanti et al. 2022, section 4.1: s b h (34 + 5 a s / h) bytes per transformer layer in
   * 16-bit with dropout, no recomputation, no parallelism (b = 1). */
  const char *names[] = {"gpt3-175b", "gpt2-1.5b", "bert-large"};
  for (size_t k = 0; k < G_N_ELEMENTS(names); k++) {
    g_autoptr(ts_model) m = load_shipped(names[k]);
    double s = (double)m->t_seq, h = (double)m->t_hidden, a = (double)m->t_heads;
    double block = 0.0, flash = 0.0;
    for (int i = 0; i < m->nlayers; i++)
      if (g_str_has_prefix(m->layers[i].name, "block.0.")) {
        ts_act_parts u;
        ts_layer_act_parts(m, &m->layers[i], TS_ATTN_UNFUSED, &u);
        block += u.in + u.inner + u.mask + u.scores;
        flash += m->layers[i].saved_act_bytes;
      }
    double want = s * h * (34.0 + 5.0 * a * s / h);
    cr_assert_eq(block, want, "%s: block saved %.0f vs %.0f", names[k], block, want);
    /* The model file's default, flash attention: 5as^2 bytes become one fp32 log-sum-exp per
     * query and head (Dao et al. 2022, Algorithm 2). */
    double want_flash = s * h * 34.0 + 4.0 * a * s;
    cr_assert_eq(flash, want_flash, "%s: flash block saved %.0f vs %.0f", names[k], flash,
                 want_flash);
  }
}

Test(activations, no_dropout_fp32)
{
  /* Without dropout the masks (1 byte) and the dropout output go; in fp32 elements are 4 bytes:
   * norms 2 x 4sh, attention 4 (5sh + as^2), fc1 4 (sh + 4sh), fc2 4 (4sh). */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m =
      load_text("[model]\nkind = transformer\ndtype = fp32\nattention = unfused\n"
                "[transformer]\n"
                "layers = 2\nhidden = 64\nheads = 4\nsequence = 32\n"
                "vocab = 100\ndropout = false\n",
                NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  double s = 32, h = 64, a = 4, block = 0.0;
  for (int i = 0; i < m->nlayers; i++)
    if (g_str_has_prefix(m->layers[i].name, "block.1."))
      block += m->layers[i].saved_act_bytes;
  double want = 4.0 * (2 * s * h + 5 * s * h + a * s * s + 5 * s * h + 4 * s * h);
  cr_assert_eq(block, want, "block saved %.0f vs %.0f", block, want);
}

/* ---- structure and tensor-parallel modes ------------------------------------------------ */

Test(structure, transformer_layers_and_tp)
{
  g_autoptr(ts_model) m = load_shipped("gpt2-1.5b");
  cr_assert_eq(m->nlayers, 1 + 48 * 5 + 2);
  const ts_layer *L = m->layers;
  cr_assert_eq(L[0].kind, TS_LAYER_EMBEDDING);
  cr_assert_eq(L[0].tp, TS_TP_VOCAB);
  cr_assert_str_eq(L[2].name, "block.0.attention");
  cr_assert_eq(L[1].tp, TS_TP_REPLICATED);
  cr_assert_eq(L[2].tp, TS_TP_HEADS);
  cr_assert_eq(L[3].tp, TS_TP_REPLICATED);
  cr_assert_eq(L[4].tp, TS_TP_COLUMN);
  cr_assert_eq(L[5].tp, TS_TP_ROW);
  const ts_layer *logits = &L[m->nlayers - 1];
  cr_assert_eq(logits->tp, TS_TP_VOCAB);
  cr_assert(logits->tied);
  double lp = logits->params;
  cr_assert_eq(lp, 0.0, "tied logits own no parameters");
  gint64 f1 = L[4].out_features, f2 = L[5].in_features;
  cr_assert_eq(f1, 6400);
  cr_assert_eq(f2, 6400);
  gint64 se = m->sample_elems;
  cr_assert_eq(se, 1024);
  cr_assert_str_eq(ts_layer_kind_name(TS_LAYER_ATTENTION), "attention");
  cr_assert_str_eq(ts_tp_mode_name(TS_TP_ROW), "row");
}

Test(structure, untied_embeddings_add_vocab_params)
{
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) t = load_text("[model]\nkind = transformer\n[transformer]\nlayers = 1\n"
                                    "hidden = 64\nheads = 4\nsequence = 16\nvocab = 100\n",
                                    NULL, &msg);
  g_autoptr(ts_model) u = load_text("[model]\nkind = transformer\n[transformer]\nlayers = 1\n"
                                    "hidden = 64\nheads = 4\nsequence = 16\nvocab = 100\n"
                                    "tied_embeddings = false\n",
                                    NULL, &msg);
  cr_assert_not_null(t);
  cr_assert_not_null(u);
  double d = ts_model_params(u) - ts_model_params(t);
  cr_assert_eq(d, 64.0 * 100, "untied logits add V h = 6400, got %.0f", d);
}

Test(structure, explicit_shapes_chain)
{
  /* In an explicit list, each layer's input is the previous layer's output. */
  const char *names[] = {"mlp", "vgg16"};
  for (size_t k = 0; k < G_N_ELEMENTS(names); k++) {
    g_autoptr(ts_model) m = load_shipped(names[k]);
    for (int i = 1; i < m->nlayers; i++) {
      double in = m->layers[i].in_act_elems, prev = m->layers[i - 1].out_act_elems;
      cr_assert_eq(in, prev, "%s: %s input %.0f != %s output %.0f", names[k], m->layers[i].name, in,
                   m->layers[i - 1].name, prev);
    }
  }
  g_autoptr(ts_model) v = load_shipped("vgg16");
  const ts_layer *fc6 = NULL;
  for (int i = 0; i < v->nlayers; i++)
    if (strcmp(v->layers[i].name, "fc6") == 0)
      fc6 = &v->layers[i];
  cr_assert_not_null(fc6);
  gint64 fin = fc6->in_features;
  cr_assert_eq(fin, 512 * 7 * 7, "fc6 flattens 512x7x7, got %" G_GINT64_FORMAT, fin);
}

Test(structure, explicit_transformer_with_tied_logits)
{
  /* The explicit form of a 1-block pre-norm transformer equals the generator's layer for layer. */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) e =
      load_text("[model]\nkind = layers\n"
                "[layer.embedding]\nkind = embedding\nvocab = 100\nhidden = 64\ntokens = 16\n"
                "position_embedding = learned\ndropout = true\n"
                "[layer.norm1]\nkind = norm\n"
                "[layer.attention]\nkind = attention\nheads = 4\nresidual = true\ndropout = true\n"
                "[layer.norm2]\nkind = norm\n"
                "[layer.fc1]\nkind = dense\nout_features = 256\nactivation = gelu\n"
                "[layer.fc2]\nkind = dense\nout_features = 64\nresidual = true\ndropout = true\n"
                "tp = row\n"
                "[layer.final_norm]\nkind = norm\n"
                "[layer.logits]\nkind = dense\nout_features = 100\ntied = true\nbias = false\n"
                "loss = true\n",
                NULL, &msg);
  cr_assert_not_null(e, "%s", msg);
  g_autoptr(ts_model) g = load_text("[model]\nkind = transformer\n[transformer]\nlayers = 1\n"
                                    "hidden = 64\nheads = 4\nsequence = 16\nvocab = 100\n",
                                    NULL, &msg);
  cr_assert_not_null(g, "%s", msg);
  cr_assert_eq(e->nlayers, g->nlayers);
  for (int i = 0; i < e->nlayers; i++) {
    const ts_layer *a = &e->layers[i], *b = &g->layers[i];
    cr_assert_eq(a->kind, b->kind, "layer %d", i);
    cr_assert_eq(a->tp, b->tp, "layer %d (%s) tp %s vs %s", i, a->name, ts_tp_mode_name(a->tp),
                 ts_tp_mode_name(b->tp));
    const double x[] = {a->params,        a->fwd_flops,     a->bwd_input_flops, a->bwd_weight_flops,
                        a->fwd_mem_bytes, a->bwd_mem_bytes, a->saved_act_bytes};
    const double y[] = {b->params,        b->fwd_flops,     b->bwd_input_flops, b->bwd_weight_flops,
                        b->fwd_mem_bytes, b->bwd_mem_bytes, b->saved_act_bytes};
    for (size_t j = 0; j < G_N_ELEMENTS(x); j++)
      cr_assert_eq(x[j], y[j], "layer %d (%s) field %zu: %g vs %g", i, a->name, j, x[j], y[j]);
  }
}

Test(structure, repeat_names_and_invariants)
{
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m =
      load_text("[model]\nname = deep\nkind = layers\n"
                "[layer.in]\nkind = dense\nin_features = 10\nout_features = 32\n"
                "[layer.h]\nkind = dense\nout_features = 32\nrepeat = 3\nactivation = relu\n"
                "tp = row\n",
                NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  cr_assert_eq(m->nlayers, 4);
  cr_assert_str_eq(m->name, "deep");
  cr_assert_str_eq(m->layers[1].name, "h.0");
  cr_assert_str_eq(m->layers[3].name, "h.2");
  cr_assert_eq(m->layers[3].tp, TS_TP_ROW);
  cr_assert_eq(m->layers[0].tp, TS_TP_COLUMN);
  double pub = m->published_params;
  cr_assert_eq(pub, 0.0);
}

Test(structure, all_shipped_finite_and_consistent)
{
  const char *names[] = {"mlp",
                         "resnet50",
                         "resnet152",
                         "vgg16",
                         "bert-base",
                         "bert-large",
                         "gpt2-1.5b",
                         "gpt3-350m",
                         "gpt3-1.3b",
                         "gpt3-6.7b",
                         "gpt3-13b",
                         "gpt3-175b",
                         "t5-small",
                         "t5-base",
                         "t5-large",
                         "t5-3b",
                         "t5-11b",
                         "amoebanet-d-18-208",
                         "amoebanet-d-72-512"};
  for (size_t k = 0; k < G_N_ELEMENTS(names); k++) {
    g_autoptr(ts_model) m = load_shipped(names[k]);
    cr_assert_gt(m->nlayers, 0);
    for (int i = 0; i < m->nlayers; i++) {
      const ts_layer *l = &m->layers[i];
      const double v[] = {l->params,           l->fwd_flops,     l->bwd_input_flops,
                          l->bwd_weight_flops, l->fwd_mem_bytes, l->bwd_mem_bytes,
                          l->in_act_elems,     l->out_act_elems, l->saved_act_bytes};
      for (size_t j = 0; j < G_N_ELEMENTS(v); j++)
        cr_assert(isfinite(v[j]) && v[j] >= 0.0, "%s %s field %zu = %g", names[k], l->name, j,
                  v[j]);
      /* A lookup with no position or segment table to add does no arithmetic (T5). */
      if (!(l->kind == TS_LAYER_EMBEDDING && l->fwd_flops == 0.0))
        cr_assert_gt(l->fwd_flops, 0.0, "%s %s: no forward work", names[k], l->name);
      cr_assert_gt(l->out_act_elems, 0.0);
      /* A layer with weights computes their gradient; one without has none to compute. */
      gboolean has_weights = l->params > 0.0 || l->tied;
      cr_assert_eq(has_weights, l->bwd_weight_flops > 0.0, "%s %s", names[k], l->name);
    }
    if (m->published_params > 0.0) {
      double r = rel(ts_model_params(m), m->published_params);
      /* Published figures are rounded to 2-3 digits; T5's paper rounds more coarsely
       * (params.t5_family_checkpoints checks T5 exactly against its checkpoints); GPipe's
       * 1.8B is 1.845B to two digits. */
      double tol = g_str_has_prefix(names[k], "t5-") ? 0.05 : 0.025;
      cr_assert(r < tol, "%s: params %.6g vs published %.6g", names[k], ts_model_params(m),
                m->published_params);
    }
  }
}

Test(structure, batch_memory_counts_weights_once)
{
  g_autoptr(ts_model) m = load_shipped("gpt2-1.5b");
  const ts_layer *fc1 = &m->layers[4], *logits = &m->layers[m->nlayers - 1];
  double w = ts_layer_weight_bytes(m, fc1);
  cr_assert_eq(w, 2.0 * fc1->params);
  double b8 = ts_layer_fwd_mem_bytes_batch(m, fc1, 8.0);
  double want = w + 8.0 * (fc1->fwd_mem_bytes - w);
  cr_assert_eq(b8, want);
  double b1 = ts_layer_fwd_mem_bytes_batch(m, fc1, 1.0), f1 = fc1->fwd_mem_bytes;
  cr_assert_eq(b1, f1);
  double bw = ts_layer_bwd_mem_bytes_batch(m, fc1, 4.0);
  cr_assert_eq(bw, 2.0 * w + 4.0 * (fc1->bwd_mem_bytes - 2.0 * w));
  /* Tied logits own nothing but read the V x h table. */
  double lw = ts_layer_weight_bytes(m, logits);
  cr_assert_eq(lw, 2.0 * 50257.0 * 1600.0);
  g_autofree char *text = ts_model_describe(m);
  cr_assert_not_null(strstr(text, "block.47.fc2 dense row"));
}

Test(structure, t5_layout_and_carry)
{
  g_autoptr(ts_model) m = load_shipped("t5-small");
  /* embedding, 6 x 5 encoder layers, encoder norm, decoder embedding, 6 x 7 decoder layers,
   * final norm, logits */
  cr_assert_eq(m->nlayers, 1 + 30 + 1 + 1 + 42 + 2);
  cr_expect_str_eq(m->layers[31].name, "encoder.final_norm");
  cr_expect_str_eq(m->layers[32].name, "decoder.embedding");
  cr_expect_str_eq(m->layers[36].name, "decoder.block.0.cross_attention");
  gint64 se = m->sample_elems, dl = m->t_dec_layers, ds = m->t_dec_seq;
  cr_expect(se == 512 + 114 && dl == 6 && ds == 114);
  /* What a pipeline cut after a layer sends besides its output: between blocks, the encoder
   * output inside the decoder until its last cross-attention; inside a block, also the
   * residual stream that the sublayer adds back (T x 512). */
  double enc = 512.0 * 512, dec = 114.0 * 512;
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    gboolean in_dec =
        i >= 32 && i < m->nlayers - 2 && !g_str_has_prefix(l->name, "decoder.block.5");
    double want = in_dec ? enc : 0.0;
    if (g_str_has_suffix(l->name, "norm1") || g_str_has_suffix(l->name, "norm2") ||
        g_str_has_suffix(l->name, "norm3") || g_str_has_suffix(l->name, "fc1"))
      want += g_str_has_prefix(l->name, "decoder.") ? dec : enc;
    if (g_str_has_prefix(l->name, "decoder.block.5") &&
        (g_str_has_suffix(l->name, "norm1") || g_str_has_suffix(l->name, ".attention") ||
         g_str_has_suffix(l->name, "norm2")))
      want += enc; /* the last cross-attention still reads the encoder output */
    cr_expect_eq(l->carry_elems, want, "%s carries %g, expected %g", l->name, l->carry_elems, want);
    if (l->kind == TS_LAYER_NORM)
      cr_expect_eq(l->params, 512.0, "%s: RMS norm, one scale per feature", l->name);
  }
  cr_expect(m->layers[36].cross && !m->layers[34].cross, "cross-attention flagged");
  cr_expect_eq(m->layers[32].src, -1, "the decoder embedding reads the target tokens");
  cr_expect_eq(m->layers[32].params, 0.0, "the decoder embedding shares the encoder's table");
}

/* ---- parser errors ---------------------------------------------------------------------- */

/* Loads text, expects failure with a one-line message naming the file and every needle. */
static void expect_error(const char *text, const char *needle1, const char *needle2)
{
  g_autofree char *path = NULL, *msg = NULL;
  ts_model *m = load_text(text, &path, &msg);
  cr_assert_null(m, "expected an error for:\n%s", text);
  cr_assert_not_null(msg);
  cr_assert_null(strchr(msg, '\n'), "multi-line message: %s", msg);
  cr_assert(g_str_has_prefix(msg, path), "message does not start with the path %s: %s", path, msg);
  cr_assert_not_null(strstr(msg, needle1), "'%s' not in: %s", needle1, msg);
  if (needle2 != NULL)
    cr_assert_not_null(strstr(msg, needle2), "'%s' not in: %s", needle2, msg);
}

#define T_HEAD "[model]\nkind = transformer\n[transformer]\n"
#define T_OK "layers = 2\nhidden = 64\nheads = 4\nsequence = 16\nvocab = 100\n"
#define T_STD_MHA T_HEAD "layers = 2\nhidden = 64\nheads = 4\nsequence = 16\nvocab = 100\n"

Test(errors, missing_file)
{
  g_autoptr(GError) err = NULL;
  const char *path = "/nonexistent/trainsim/model.ini";
  ts_model *m = ts_model_load(path, &err);
  cr_assert_null(m);
  cr_assert_not_null(err);
  cr_assert(g_str_has_prefix(err->message, path), "%s", err->message);
  cr_assert_eq(err->domain, TS_ERROR);
}

Test(errors, not_an_ini)
{
  expect_error("this is not a key file\n", "expected a [group] line", NULL);
}

Test(errors, missing_model_group)
{
  expect_error("[transformer]\n" T_OK, "[model]", "missing group");
}

Test(errors, unknown_key)
{
  expect_error(T_HEAD T_OK "hiden = 12\n", "[transformer] hiden", "unknown key");
  expect_error("[model]\nkind = transformer\nsize = 3\n[transformer]\n" T_OK, "[model] size",
               "unknown key");
  expect_error("[model]\nkind = layers\n[layer.a]\nkind = dense\nin_features = 3\n"
               "out_features = 4\nkernel = 3\n",
               "[layer.a] kernel", "unknown key");
}

Test(errors, unknown_group)
{
  expect_error(T_HEAD T_OK "[resnet]\ndepth = 50\n", "[resnet]", "unknown group");
  expect_error("[model]\nkind = layers\n[layer.a]\nkind = dense\nin_features = 3\n"
               "out_features = 4\n[layers.b]\nkind = dense\n",
               "[layers.b]", "unknown group");
}

Test(errors, bad_values)
{
  expect_error(T_HEAD "layers = 12x\nhidden = 64\nheads = 4\nsequence = 16\nvocab = 100\n",
               "[transformer] layers='12x'", "whole number");
  expect_error(T_HEAD "layers = 2\nhidden = 0\nheads = 4\nsequence = 16\nvocab = 100\n",
               "[transformer] hidden='0'", NULL);
  expect_error(T_HEAD "layers = 2\nhidden = 64\nheads = 4\nsequence = -16\nvocab = 100\n",
               "[transformer] sequence='-16'", NULL);
  expect_error(T_HEAD "layers = 2\nhidden = 1e30\nheads = 4\nsequence = 16\nvocab = 100\n",
               "[transformer] hidden='1e30'", NULL);
  expect_error(T_HEAD "layers = 2\nhidden = 64.5\nheads = 4\nsequence = 16\nvocab = 100\n",
               "[transformer] hidden='64.5'", NULL);
  expect_error(T_HEAD "layers = 2\nhidden = 64\nheads = 4\nsequence = 16\n", "[transformer] vocab",
               "missing");
  expect_error("[model]\nkind = transformer\ndtype = int8\n[transformer]\n" T_OK,
               "[model] dtype='int8'", "bf16 | fp16 | fp32");
  expect_error("[model]\nkind = cnn\n", "[model] kind='cnn'", "layers | transformer | resnet");
  expect_error("[model]\nkind = transformer\npublished_params = -3\n[transformer]\n" T_OK,
               "[model] published_params='-3'", NULL);
  expect_error(T_HEAD T_OK "tied_embeddings = yes\n", "[transformer] tied_embeddings='yes'",
               "false | true");
  expect_error("[model]\nkind = resnet\n[resnet]\ndepth = 42\n", "[resnet] depth='42'", NULL);
}

Test(errors, encoder_decoder_keys)
{
  expect_error(T_HEAD T_OK "decoder_sequence = 8\n", "[transformer] decoder_sequence='8'",
               "decoder_layers");
  expect_error(T_HEAD T_OK "decoder_layers = 2\nnorm = post\n", "[transformer] norm",
               "decoder_layers");
  expect_error(T_HEAD T_OK "decoder_layers = 2\nexperts = 4\n", "[transformer] experts", NULL);
  expect_error(T_HEAD T_OK "norm_type = batch\n", "[transformer] norm_type='batch'", "rms");
  expect_error(T_HEAD T_OK "kv_channels = 16777216\n", "[transformer] kv_channels", "inner");
  expect_error(T_HEAD T_OK "decoder_layers = -1\n", "[transformer] decoder_layers='-1'", NULL);
  /* With kv_channels the heads need not divide hidden (T5-3B: 32 x 128 on 1024). */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m = load_text(T_HEAD "layers = 2\nhidden = 100\nheads = 3\nsequence = 16\n"
                                           "vocab = 100\nkv_channels = 32\n",
                                    NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  gint64 inner = m->layers[2].inner;
  cr_expect_eq(inner, 96);
}

Test(errors, explicit_graph_keys)
{
  const char *head = "[model]\nkind = layers\n"
                     "[layer.a]\nkind = conv2d\nin_channels = 4\nin_h = 8\nin_w = 8\n"
                     "out_channels = 4\nkernel = 1\n"
                     "[layer.p]\nkind = pool\nkernel = 2\n";
  g_autofree char *a = g_strconcat(head,
                                   "[layer.c]\nkind = conv2d\ninput = nope\n"
                                   "out_channels = 4\nkernel = 1\n",
                                   NULL);
  expect_error(a, "[layer.c] input='nope'", "earlier layers");
  g_autofree char *b = g_strconcat(head,
                                   "[layer.c]\nkind = conv2d\ninput = a, p\n"
                                   "out_channels = 4\nkernel = 1\n",
                                   NULL);
  expect_error(b, "[layer.c] input='a, p'", "height and width");
  g_autofree char *c = g_strconcat(head, "[layer.c]\nkind = norm\nresidual_from = a\n", NULL);
  expect_error(c, "[layer.c] residual_from='a'", "output shape");
  g_autofree char *d = g_strconcat(head,
                                   "[layer.c]\nkind = norm\nresidual_from = p\n"
                                   "residual = false\n",
                                   NULL);
  expect_error(d, "[layer.c] residual_from='p'", "residual = false");
  g_autofree char *e =
      g_strconcat(head, "[layer.c]\nkind = norm\nresidual_from = p\nrepeat = 2\n", NULL);
  expect_error(e, "[layer.c] residual_from='p'", "repeat = 1");
  g_autofree char *f = g_strconcat(head,
                                   "[layer.c]\nkind = conv2d\ninput = c\n"
                                   "out_channels = 4\nkernel = 1\n",
                                   NULL);
  expect_error(f, "[layer.c] input='c'", "earlier layers");
}

Test(errors, amoebanet_values)
{
  const char *head = "[model]\nkind = amoebanet\n[amoebanet]\n";
  g_autofree char *a = g_strconcat(head, "normal_cells = 16\nfilters = 208\n", NULL);
  expect_error(a, "[amoebanet] normal_cells='16'", "multiple of 3");
  g_autofree char *b = g_strconcat(head, "normal_cells = 18\nfilters = 212\n", NULL);
  expect_error(b, "[amoebanet] filters='212'", "multiple of 8");
  g_autofree char *c = g_strconcat(head, "normal_cells = 18\nfilters = 208\nimage = 200\n", NULL);
  expect_error(c, "[amoebanet] image='200'", "multiple of 32");
  g_autofree char *d = g_strconcat(head, "normal_cells = 18\nfilter = 208\n", NULL);
  expect_error(d, "[amoebanet] filter", "unknown key");
  expect_error("[model]\nkind = amoebanet\n", "[amoebanet]", "missing group");
  expect_error("[model]\nkind = layers\n"
               "[layer.c]\nkind = conv2d\nin_channels = 6\nin_h = 8\nin_w = 8\n"
               "out_channels = 8\nkernel = 3\ngroups = 4\n",
               "[layer.c] groups='4'", "divisor of in_channels = 6 and out_channels = 8");
}

Test(params, grouped_convolution)
{
  /* A depthwise 3x3 convolution of 32 channels: 32 x 1 x 9 weights; grouped in 4: 32 x 8 x 9. */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m = load_text("[model]\nkind = layers\n"
                                    "[layer.dw]\nkind = conv2d\nin_channels = 32\nin_h = 8\n"
                                    "in_w = 8\nout_channels = 32\nkernel = 3\npadding = 1\n"
                                    "groups = 32\nbias = false\n"
                                    "[layer.g]\nkind = conv2d\nout_channels = 32\nkernel = 3\n"
                                    "padding = 1\ngroups = 4\nbias = false\n",
                                    NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  cr_expect_eq(m->layers[0].params, 32.0 * 9);
  cr_expect_eq(m->layers[1].params, 32.0 * 8 * 9);
  cr_expect_eq(m->layers[0].fwd_flops, 2.0 * 32 * 9 * 64, "one input channel per output");
}

Test(errors, huge_model)
{
  /* Every size in range, but 65536 layers of hidden 2^24 is ~2e20 parameters. */
  expect_error(T_HEAD "layers = 65536\nhidden = 16777216\nheads = 1\nsequence = 1\n"
                      "vocab = 1\n",
               "parameters", "at most 1e15");
}

Test(errors, heads_must_divide_hidden)
{
  expect_error(T_HEAD "layers = 2\nhidden = 100\nheads = 7\nsequence = 16\nvocab = 100\n",
               "[transformer] heads='7'", "divisor of [transformer] hidden = 100");
  expect_error("[model]\nkind = layers\n[layer.att]\nkind = attention\nhidden = 100\n"
               "heads = 3\ntokens = 8\n",
               "[layer.att] heads='3'", "divisor");
}

Test(errors, shape_mismatch)
{
  expect_error("[model]\nkind = layers\n"
               "[layer.fc1]\nkind = dense\nin_features = 784\nout_features = 512\n"
               "[layer.fc2]\nkind = dense\nin_features = 1024\nout_features = 10\n",
               "[layer.fc2] in_features='1024'", "expected 512, the output of [layer.fc1]");
  expect_error("[model]\nkind = layers\n"
               "[layer.c]\nkind = conv2d\nin_channels = 3\nin_h = 5\nin_w = 5\n"
               "out_channels = 8\nkernel = 7\npadding = 0\n",
               "[layer.c] kernel_h='7'", "padded input");
  expect_error("[model]\nkind = layers\n"
               "[layer.c]\nkind = conv2d\nin_channels = 3\nin_h = 8\nin_w = 8\n"
               "out_channels = 8\nkernel = 3\n"
               "[layer.d]\nkind = conv2d\nin_channels = 3\nout_channels = 8\nkernel = 3\n",
               "[layer.d] in_channels='3'", "expected 8");
  expect_error("[model]\nkind = layers\n"
               "[layer.fc]\nkind = dense\nin_features = 8\nout_features = 8\n"
               "[layer.c]\nkind = conv2d\nout_channels = 8\nkernel = 3\n",
               "[layer.c] kind='conv2d'", "feature-map input");
  expect_error("[model]\nkind = layers\n"
               "[layer.fc]\nkind = dense\nin_features = 8\nout_features = 4\nrepeat = 2\n",
               "[layer.fc] repeat='2'", NULL);
  expect_error("[model]\nkind = layers\n"
               "[layer.fc]\nkind = dense\nin_features = 8\nout_features = 4\n"
               "[layer.e]\nkind = embedding\nvocab = 10\nhidden = 4\ntokens = 2\n",
               "[layer.e] kind='embedding'", "first layer");
  expect_error("[model]\nkind = layers\n"
               "[layer.fc]\nkind = dense\nin_features = 8\nout_features = 4\ntied = true\n",
               "[layer.fc] tied='true'", "embedding");
  expect_error("[model]\nkind = layers\n"
               "[layer.p]\nkind = pool\nchannels = 3\nin_h = 4\nin_w = 4\nkernel = 2\n"
               "padding = 2\n",
               "[layer.p] padding='2'", "half");
  expect_error("[model]\nkind = layers\n"
               "[layer.fc]\nkind = dense\nin_features = 8\nout_features = 4\ntp = heads\n",
               "[layer.fc] tp='heads'", "column | row | replicated");
  expect_error("[model]\nkind = layers\n", "[model] kind='layers'", "[layer.NAME]");
  expect_error("[model]\nkind = layers\n"
               "[layer.a]\nkind = dense\nin_features = 8\nout_features = 4\n"
               "[layer.b]\nkind = dense\nout_features = 2\nresidual = true\n",
               "[layer.b] residual='true'", "earlier layer");
}

/* ---- today's decoders: grouped-query and latent attention, gated MLPs, experts ---------- */

Test(params, llama3_mixtral_deepseek_checkpoints)
{
  /* The sums of the released checkpoints' tensors (config.json shapes; each model file cites
   * its source). DeepSeek-V3: the main model, without the 14B multi-token-prediction module. */
  static const struct {
    const char *name;
    double params;
  } want[] = {{"llama3-8b", 8030261248.0},       {"llama3-70b", 70553706496.0},
              {"llama3-405b", 405853388800.0},   {"mixtral-8x7b", 46702792704.0},
              {"mixtral-8x22b", 140620634112.0}, {"deepseek-v3", 671026419200.0},
              {"llama2-13b", 13015864320.0},     {"llama2-70b", 68976648192.0}};
  for (size_t k = 0; k < G_N_ELEMENTS(want); k++) {
    g_autoptr(ts_model) m = load_shipped(want[k].name);
    double got = ts_model_params(m), pub = m->published_params;
    cr_assert_eq(got, want[k].params, "%s: %.0f parameters, checkpoint %.0f", want[k].name, got,
                 want[k].params);
    cr_assert_eq(pub, want[k].params, "%s: published_params %.0f", want[k].name, pub);
  }
}

Test(params, active_parameters_of_experts)
{
  /* Active = everything but the routed experts a token skips. Mixtral 8x7B: 32 layers of
   * 8 SwiGLU experts 3 x 4096 x 14336, top 2: 46.70B - 32 x 6 x 176,160,768 = 12.88B (the
   * paper's "13B active"). DeepSeek-V3: 58 MoE layers of 256 experts 3 x 7168 x 2048, top 8:
   * 671.03B - 58 x 248 x 44,040,192 = 37.55B (the report's "37B activated"). A dense model's
   * active parameters are all of them. */
  g_autoptr(ts_model) mx = load_shipped("mixtral-8x7b");
  double a = ts_model_active_params(mx), want = 46702792704.0 - 32.0 * 6 * 3 * 4096 * 14336;
  cr_assert_eq(a, want, "Mixtral active %.0f vs %.0f", a, want);
  g_autoptr(ts_model) ds = load_shipped("deepseek-v3");
  a = ts_model_active_params(ds);
  want = 671026419200.0 - 58.0 * 248 * 3 * 7168 * 2048;
  cr_assert_eq(a, want, "DeepSeek-V3 active %.0f vs %.0f", a, want);
  g_autoptr(ts_model) l = load_shipped("llama3-8b");
  double p = ts_model_params(l);
  a = ts_model_active_params(l);
  cr_assert_eq(a, p);
}

/* A small decoder of today's kind: h 64, 8 heads of 8 in 2 key/value groups, SwiGLU 96, rotary,
 * RMS norms, untied, no biases or dropout, 16 tokens, bf16. */
#define GQA_MODEL                                                                                  \
  "[model]\nkind = transformer\n[transformer]\nlayers = 1\nhidden = 64\nheads = 8\n"               \
  "kv_heads = 2\nsequence = 16\nvocab = 100\nffn_hidden = 96\nactivation = swiglu\n"               \
  "position_embedding = rotary\nnorm_type = rms\ntied_embeddings = false\nbias = false\n"          \
  "dropout = false\n"

static const ts_layer *layer_named(const ts_model *m, const char *name)
{
  for (int i = 0; i < m->nlayers; i++)
    if (strcmp(m->layers[i].name, name) == 0)
      return &m->layers[i];
  cr_assert_fail("no layer %s", name);
  return NULL;
}

Test(params, grouped_query_attention_closed_form)
{
  /* Ainslie et al. 2023: g key/value heads of width d = h / a shared by a / g query heads each.
   * Q and output h x ad each, K and V h x gd each: 2h(ad) + 2h(gd) (no biases). FLOPs per
   * sample: Q and output 2T h I each, K and V 2T h J each (J = g d), scores and context 2T^2 I
   * each, softmax a T^2, residual T h, rotary 3 (T I + T J) (Su et al. 2021). Kept (no
   * dropout, flash attention, the default): D (T h + 2 T I + 2 T J) + 4 a T (the softmax
   * statistics, one fp32 per query row and head). */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m = load_text(GQA_MODEL, NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  const ts_layer *at = layer_named(m, "block.0.attention");
  double T = 16, h = 64, a = 8, I = 64, J = 16, D = 2;
  double p = at->params, want = 2 * h * I + 2 * h * J;
  cr_assert_eq(p, want, "attention params %.0f vs %.0f", p, want);
  double f = at->fwd_flops;
  want = 4 * T * h * I + 4 * T * h * J + 4 * T * T * I + a * T * T + T * h + 3 * (T * I + T * J);
  cr_assert_eq(f, want, "attention fwd %.0f vs %.0f", f, want);
  double bi = at->bwd_input_flops;
  want = 4 * T * h * I + 4 * T * h * J + 8 * T * T * I + a * T * T + T * h + 3 * (T * I + T * J);
  cr_assert_eq(bi, want, "attention bwd input %.0f vs %.0f", bi, want);
  double bw = at->bwd_weight_flops;
  want = 4 * T * h * I + 4 * T * h * J;
  cr_assert_eq(bw, want);
  double kept = at->saved_act_bytes;
  want = D * (T * h + 2 * T * I + 2 * T * J) + 4 * a * T;
  cr_assert_eq(kept, want, "attention kept %.0f vs %.0f", kept, want);
  /* Multi-query (g = 1): K and V are one head wide. */
  g_autoptr(ts_model) mq =
      load_text("[model]\nkind = transformer\n[transformer]\nlayers = 1\nhidden = 64\nheads = 8\n"
                "kv_heads = 1\nsequence = 16\nvocab = 100\nbias = false\n",
                NULL, &msg);
  cr_assert_not_null(mq, "%s", msg);
  p = layer_named(mq, "block.0.attention")->params;
  cr_assert_eq(p, 2 * h * I + 2 * h * 8);
  /* kv_heads = heads is standard multi-head attention, to the bit. */
  g_autoptr(ts_model) mh = load_text(T_STD_MHA, NULL, &msg);
  g_autoptr(ts_model) mh2 = load_text(T_STD_MHA "kv_heads = 4\n", NULL, &msg);
  cr_assert_not_null(mh);
  cr_assert_not_null(mh2);
  for (int i = 0; i < mh->nlayers; i++) {
    const ts_layer *x = &mh->layers[i], *y = &mh2->layers[i];
    cr_assert(x->params == y->params && x->fwd_flops == y->fwd_flops &&
                  x->bwd_input_flops == y->bwd_input_flops &&
                  x->saved_act_bytes == y->saved_act_bytes && x->fwd_mem_bytes == y->fwd_mem_bytes,
              "%s differs with kv_heads = heads", x->name);
  }
}

Test(params, gated_mlp_closed_form)
{
  /* SwiGLU (Shazeer 2020): fc1 holds gate and up, h x 2f; fc2 f x h: 3 h f parameters. fc1
   * forward 2 T h 2f, plus the gate's activation and the product, 1 FLOP per element each
   * (2 T f); it keeps its input and both halves D (T h + 2 T f), and its output is T f wide. */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m = load_text(GQA_MODEL, NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  const ts_layer *f1 = layer_named(m, "block.0.fc1"), *f2 = layer_named(m, "block.0.fc2");
  double T = 16, h = 64, f = 96, D = 2;
  double p = f1->params + f2->params;
  cr_assert_eq(p, 3 * h * f);
  double fw = f1->fwd_flops;
  cr_assert_eq(fw, 2 * T * h * 2 * f + 2 * T * f);
  double kept = f1->saved_act_bytes, out = f1->out_act_elems, in2 = f2->in_act_elems;
  cr_assert_eq(kept, D * (T * h + 2 * T * f));
  cr_assert_eq(out, T * f);
  cr_assert_eq(in2, T * f);
  cr_assert(f1->gated);
  /* The whole model: untied embedding and logits V h each, RMS norms h each (3), attention,
   * MLP; no position table (rotary). */
  double total = ts_model_params(m),
         want = 2 * 100 * h + 3 * h + (2 * h * 64 + 2 * h * 16) + 3 * h * f;
  cr_assert_eq(total, want, "%.0f vs %.0f", total, want);
  /* GeGLU has the same shapes. */
  g_autofree char *geglu = g_strconcat(GQA_MODEL, "", NULL);
  char *at = strstr(geglu, "swiglu");
  memcpy(at, "geglu ", 6);
  g_autoptr(ts_model) g = load_text(geglu, NULL, &msg);
  cr_assert_not_null(g, "%s", msg);
  double pg = ts_model_params(g);
  cr_assert_eq(pg, total);
}

Test(params, multi_head_latent_attention_closed_form)
{
  /* DeepSeek-V2 (Liu et al. 2024, section 2.1): q_a h x rq, its norm rq, q_b rq x a(dn + dr),
   * kv_a h x (rkv + dr), its norm rkv, kv_b rkv x a(dn + dv), o a dv x h. FLOPs: 2T x each
   * projection, norms 5 per element, rotary 3 (a dr + dr) per token, scores 2 T^2 a (dn + dr),
   * context 2 T^2 a dv, softmax a T^2, residual T h. Kept (no dropout): D (T h + 2 T (rq +
   * rkv) + T dr + 2 T a (dn + dr) + 2 T a dv + a T^2). */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m = load_text(
      "[model]\nkind = transformer\n[transformer]\nlayers = 1\nhidden = 64\nheads = 4\n"
      "sequence = 16\nvocab = 100\nq_lora_rank = 16\nkv_lora_rank = 8\nqk_nope_head_dim = 8\n"
      "qk_rope_head_dim = 4\nv_head_dim = 8\nposition_embedding = rotary\nbias = false\n"
      "dropout = false\nnorm_type = rms\n",
      NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  const ts_layer *at = layer_named(m, "block.0.attention");
  double T = 16, h = 64, a = 4, rq = 16, rkv = 8, dn = 8, dr = 4, dv = 8, D = 2;
  double macs = h * rq + rq * a * (dn + dr) + h * (rkv + dr) + rkv * a * (dn + dv) + a * dv * h;
  double p = at->params, want = macs + rq + rkv;
  cr_assert_eq(p, want, "MLA params %.0f vs %.0f", p, want);
  double f = at->fwd_flops;
  want = 2 * T * macs + 5 * T * (rq + rkv) + 3 * T * (a * dr + dr) + 2 * T * T * a * (dn + dr) +
         2 * T * T * a * dv + a * T * T + T * h;
  cr_assert_eq(f, want, "MLA fwd %.0f vs %.0f", f, want);
  double kept = at->saved_act_bytes;
  want = D *
         (T * h + 2 * T * (rq + rkv) + T * dr + 2 * T * a * (dn + dr) + 2 * T * a * dv + a * T * T);
  cr_assert_eq(kept, want, "MLA kept %.0f vs %.0f", kept, want);
  gint64 qk = at->qk_inner, v = at->inner;
  cr_assert_eq(qk, 48);
  cr_assert_eq(v, 32);
  /* Without a query latent (DeepSeek-V2-Lite): one h x a (dn + dr) query projection. */
  g_autoptr(ts_model) lite =
      load_text("[model]\nkind = transformer\n[transformer]\nlayers = 1\nhidden = 64\nheads = 4\n"
                "sequence = 16\nvocab = 100\nkv_lora_rank = 8\nqk_nope_head_dim = 8\n"
                "qk_rope_head_dim = 4\nv_head_dim = 8\nposition_embedding = rotary\nbias = false\n",
                NULL, &msg);
  cr_assert_not_null(lite, "%s", msg);
  p = layer_named(lite, "block.0.attention")->params;
  want = h * a * (dn + dr) + h * (rkv + dr) + rkv + rkv * a * (dn + dv) + a * dv * h;
  cr_assert_eq(p, want, "MLA without q latent %.0f vs %.0f", p, want);
}

Test(params, latent_attention_in_a_layer_list)
{
  /* The [transformer] MLA keys on an explicit attention layer give the same layer as the
   * generator's (parameters, FLOPs, kept bytes, widths); misuse is one line naming the key. */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) gen = load_text(
      "[model]\nkind = transformer\n[transformer]\nlayers = 1\nhidden = 64\nheads = 4\n"
      "sequence = 16\nvocab = 100\nq_lora_rank = 16\nkv_lora_rank = 8\nqk_nope_head_dim = 8\n"
      "qk_rope_head_dim = 4\nv_head_dim = 8\nposition_embedding = rotary\nbias = false\n"
      "dropout = false\nnorm_type = rms\n",
      NULL, &msg);
  cr_assert_not_null(gen, "%s", msg);
#define L_HEAD                                                                                     \
  "[model]\nkind = layers\n[layer.norm]\nkind = norm\nfeatures = 64\ntokens = 16\n"                \
  "[layer.attention]\nkind = attention\nheads = 4\nresidual = true\n"
  g_autoptr(ts_model) m = load_text(L_HEAD "bias = false\nq_lora_rank = 16\nkv_lora_rank = 8\n"
                                           "qk_nope_head_dim = 8\nqk_rope_head_dim = 4\n"
                                           "v_head_dim = 8\n",
                                    NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  const ts_layer *a = layer_named(gen, "block.0.attention"), *b = layer_named(m, "attention");
  double pa = a->params, pb = b->params;
  cr_assert_eq(pb, pa, "params %.0f vs the generator's %.0f", pb, pa);
  cr_assert_eq(b->fwd_flops, a->fwd_flops);
  cr_assert_eq(b->bwd_input_flops + b->bwd_weight_flops, a->bwd_input_flops + a->bwd_weight_flops);
  cr_assert_eq(b->saved_act_bytes, a->saved_act_bytes);
  gint64 kv = b->kv_lora_rank, q = b->q_lora_rank, r = b->qk_rope_dim, qk = b->qk_inner;
  cr_assert(kv == 8 && q == 16 && r == 4 && qk == 48, "%" G_GINT64_FORMAT, qk);
  expect_error(L_HEAD "bias = false\nqk_rope_head_dim = 4\n", "[layer.attention] qk_rope_head_dim",
               "kv_lora_rank > 0");
  expect_error(L_HEAD "kv_lora_rank = 8\nqk_nope_head_dim = 8\nqk_rope_head_dim = 4\n"
                      "v_head_dim = 8\n",
               "[layer.attention] bias", "not available with kv_lora_rank");
  expect_error(L_HEAD "bias = false\nkv_lora_rank = 8\nqk_nope_head_dim = 8\nv_head_dim = 8\n",
               "[layer.attention] qk_rope_head_dim", NULL);
  expect_error(L_HEAD "bias = false\nkv_heads = 2\nkv_lora_rank = 8\nqk_nope_head_dim = 8\n"
                      "qk_rope_head_dim = 4\nv_head_dim = 8\n",
               "[layer.attention] kv_heads", "not available with kv_lora_rank");
#undef L_HEAD
}

Test(params, fine_grained_shared_experts_and_capacity)
{
  /* 3 blocks, the first dense (ffn 96); then E = 4 routed SwiGLU experts of width 32, top 2,
   * one shared expert of width 32, a gate with a per-expert bias, capacity factor 1.25.
   * Routed fc1: E h 2 m; the gate a layer of its own (block.1.router, reading norm2), h E + E;
   * fc2 E m h; shared 3 h m. Work of the routed experts: k C x one expert's; the gate's
   * 2 T h E, its bias add T E and its softmax T E. */
  g_autofree char *msg = NULL;
  g_autoptr(ts_model) m = load_text(
      "[model]\nkind = transformer\n[transformer]\nlayers = 3\nhidden = 64\nheads = 4\n"
      "sequence = 16\nvocab = 100\nffn_hidden = 96\nactivation = swiglu\nbias = false\n"
      "dropout = false\nposition_embedding = rotary\nexperts = 4\ntop_k = 2\nmoe_every = 1\n"
      "first_dense_layers = 1\nmoe_ffn_hidden = 32\nshared_experts = 1\nrouter_bias = true\n"
      "capacity_factor = 1.25\n",
      NULL, &msg);
  cr_assert_not_null(m, "%s", msg);
  double T = 16, h = 64, E = 4, k = 2, mf = 32, C = 1.25, D = 2;
  const ts_layer *d1 = layer_named(m, "block.0.fc1");
  gint64 dense_experts = d1->experts;
  cr_assert_eq(dense_experts, 0, "block 0 is dense");
  const ts_layer *e1 = layer_named(m, "block.1.fc1"), *e2 = layer_named(m, "block.1.fc2");
  const ts_layer *s1 = layer_named(m, "block.1.shared_fc1"),
                 *s2 = layer_named(m, "block.1.shared_fc2");
  const ts_layer *g1 = layer_named(m, "block.1.router");
  double p = e1->params;
  cr_assert_eq(p, E * h * 2 * mf);
  p = g1->params;
  cr_assert_eq(p, h * E + E);
  gint64 gate_experts = g1->experts;
  cr_assert_eq(gate_experts, 0, "the router is replicated, not an expert layer");
  double gf = g1->fwd_flops, gwant = 2 * T * h * E + T * E + T * E;
  cr_assert_eq(gf, gwant, "router fwd %.0f vs %.0f", gf, gwant);
  cr_assert_str_eq(m->layers[g1->src].name, "block.1.norm2");
  p = e2->params;
  cr_assert_eq(p, E * mf * h);
  p = s1->params + s2->params;
  cr_assert_eq(p, 3 * h * mf);
  double f = e1->fwd_flops, want = k * C * (2 * T * h * 2 * mf + 2 * T * mf);
  cr_assert_eq(f, want, "routed fc1 fwd %.0f vs %.0f", f, want);
  double kept = e1->saved_act_bytes;
  want = k * C * D * (T * h + 2 * T * mf);
  cr_assert_eq(kept, want);
  /* Active: the shared expert, k routed experts and the gate. */
  double act = e1->active_params + e2->active_params + g1->active_params;
  want = k * 3 * h * mf + h * E + E;
  cr_assert_eq(act, want);
  /* The graph: routed fc1 reads norm2 (beside the shared branch), fc2 adds the residual stream
   * and the shared output; the shared output is carried past fc1. */
  const ts_layer *n2 = layer_named(m, "block.1.norm2");
  cr_assert_str_eq(m->layers[e1->src].name, "block.1.norm2");
  cr_assert_str_eq(m->layers[s1->src].name, "block.1.norm2");
  double carry = e1->carry_elems, want_carry = 2 * T * h; /* residual stream + shared output */
  cr_assert_eq(carry, want_carry, "carry after routed fc1 %.0f", carry);
  (void)n2;
}

Test(flops, megatron_formula_for_llama3)
{
  /* Megatron-LM's num_floating_point_operations (megatron/training/training.py) for GQA and
   * SwiGLU: 12 s l h^2 ((1 + g/a + s/h) + 3/2 f/h + V/(2 l h)) per sample, its GEMMs only. Our
   * count adds norms, softmax, rotary, activations and residual adds: within 0.1% above it. */
  const char *names[] = {"llama3-8b", "llama3-70b", "llama3-405b"};
  for (size_t n = 0; n < G_N_ELEMENTS(names); n++) {
    g_autoptr(ts_model) m = load_shipped(names[n]);
    double s = (double)m->t_seq, l = (double)m->t_layers, h = (double)m->t_hidden;
    double a = (double)m->t_heads, g = (double)m->t_kv_heads, f = (double)m->t_ffn;
    double V = (double)m->t_vocab;
    double want = 12 * s * l * h * h * ((1 + g / a + s / h) + 1.5 * f / h + V / (2 * l * h));
    double got = ts_model_train_flops_per_sample(m);
    cr_assert(got >= want && got < want * 1.001, "%s: %.6g FLOPs vs Megatron's %.6g", names[n], got,
              want);
  }
}

Test(errors, modern_transformer_keys)
{
  expect_error(T_HEAD T_OK "kv_heads = 3\n", "[transformer] kv_heads='3'",
               "a divisor of [transformer] heads = 4");
  expect_error(T_HEAD T_OK "kv_heads = 0\n", "[transformer] kv_heads='0'", NULL);
  expect_error(T_HEAD T_OK "experts = 4\ntop_k = 5\n", "[transformer] top_k='5'",
               "at most [transformer] experts = 4");
  expect_error(T_HEAD T_OK "shared_experts = 1\n", "[transformer] shared_experts", "experts > 0");
  expect_error(T_HEAD T_OK "capacity_factor = 1.5\n", "[transformer] capacity_factor",
               "experts > 0");
  expect_error(T_HEAD T_OK "experts = 4\ncapacity_factor = -1\n",
               "[transformer] capacity_factor='-1'", NULL);
  expect_error(T_HEAD T_OK "experts = 4\nfirst_dense_layers = 2\n",
               "[transformer] first_dense_layers='2'", "fewer than [transformer] layers = 2");
  expect_error(T_HEAD T_OK "activation = swish\n", "[transformer] activation='swish'",
               "swiglu | geglu");
  expect_error(T_HEAD T_OK "position_embedding = alibi\n",
               "[transformer] position_embedding='alibi'", "rotary");
  expect_error(T_HEAD T_OK "q_lora_rank = 16\n", "[transformer] q_lora_rank", "kv_lora_rank > 0");
  expect_error(T_HEAD T_OK "kv_lora_rank = 8\nposition_embedding = rotary\nbias = false\n",
               "[transformer] qk_nope_head_dim", "missing");
  expect_error(T_HEAD T_OK "kv_lora_rank = 8\nqk_nope_head_dim = 8\nqk_rope_head_dim = 4\n"
                           "v_head_dim = 8\nposition_embedding = rotary\n",
               "[transformer] bias", "not available with kv_lora_rank");
  expect_error(T_HEAD T_OK "kv_lora_rank = 8\nqk_nope_head_dim = 8\nqk_rope_head_dim = 4\n"
                           "v_head_dim = 8\nbias = false\nkv_heads = 2\n",
               "[transformer] kv_heads", "not available with kv_lora_rank");
  expect_error(T_HEAD T_OK "vocab_divisible_by = 0\n", "[transformer] vocab_divisible_by='0'",
               NULL);
  expect_error("[model]\nkind = layers\n[layer.a]\nkind = dense\nin_features = 4\n"
               "out_features = 8\nactivation = swiglu\ntp = row\n",
               "[layer.a] activation='swiglu'", "a gated MLP's first layer");
  expect_error("[model]\nkind = layers\n[layer.a]\nkind = attention\nhidden = 8\ntokens = 4\n"
               "heads = 4\nkv_heads = 3\n",
               "[layer.a] kv_heads='3'", "a divisor of heads = 4");
}
