/* Tests of split equivalence (`trainsim validate`): every split the planner supports, executed
 * on real fp32 and fp64 kernels, must reproduce the single-processor reference within 1e-5 /
 * 1e-12 (normwise, per tensor) and send the bytes its trace says; a split with a collective or
 * a dependency removed must fail; bad input exits 2 with one line. */
#include "ts_util.h"
#include "ts_validate.h"
#include "ts_validate_priv.h"

#include "ts_test.h"
#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const models[] = {"validate-mlp", "validate-cnn", "validate-transformer"};
static const ts_prec precs[] = {TS_PREC_F32, TS_PREC_F64};

typedef struct {
  const char *topo;   /* in-memory spec, or a shipped name; NULL: sized to the split */
  gint64 micro;       /* 0: whole replica batch */
  ts_coll_algo algo;  /* TS_ALGO_AUTO */
  const char *drop;   /* a label whose ops do nothing */
  const char *nodeps; /* a label whose ops lose their dependencies */
  gint64 batch;       /* 0: 8 */
} extra;

/* One validation run; NULL with *err on bad input. */
static ts_validate_result *vrun(const char *model, const char *split, ts_prec prec, const extra *x,
                                GError **err)
{
  g_autoptr(ts_model) m = NULL;
  if (g_path_is_absolute(model)) {
    m = ts_model_load(model, err); /* a model file a test wrote */
    cr_assert_not_null(m, "%s: %s", model, (*err)->message);
  } else {
    m = load_model(model);
  }
  g_autoptr(ts_split) s = ts_split_parse(split, err);
  cr_assert_not_null(s, "%s: %s", split, (*err)->message);
  g_autoptr(ts_topo) t = NULL;
  if (x != NULL && x->topo != NULL && strchr(x->topo, ':') == NULL) {
    t = load_topo(x->topo); /* a shipped topology */
  } else if (x != NULL && x->topo != NULL) {
    t = ts_validate_topology(x->topo, err);
    cr_assert_not_null(t, "%s", x->topo);
  } else {
    int chips = 1;
    for (int a = 0; a < TS_AX_N; a++)
      chips *= s->degree[a] > 0 ? s->degree[a] : 1;
    t = ts_validate_default_topology(chips, NULL);
  }
  ts_validate_options o;
  ts_validate_options_default(&o);
  o.prec = prec;
  const char *drop[2] = {x ? x->drop : NULL, NULL};
  const char *nodeps[2] = {x ? x->nodeps : NULL, NULL};
  if (x != NULL) {
    o.micro_batch = x->micro;
    o.algo = x->algo;
    o.drop_ops = x->drop ? drop : NULL;
    o.drop_deps = x->nodeps ? nodeps : NULL;
    if (x->batch > 0)
      o.global_batch = x->batch;
  }
  return ts_validate_run(m, t, s, &o, err);
}

static char *describe(const ts_validate_result *r)
{
  return ts_validate_result_text(r, TRUE);
}

/* Executed, every tensor within the tolerance, the loss equal, every chip's bytes as traced. */
static void expect_pass(const char *model, const char *split, ts_prec prec, const extra *x)
{
  GError *err = NULL;
  g_autoptr(ts_validate_result) r = vrun(model, split, prec, x, &err);
  cr_assert_not_null(r, "%s %s: %s", model, split, err ? err->message : "");
  g_autofree char *text = describe(r);
  double tol = prec == TS_PREC_F32 ? 1e-5 : 1e-12;
  cr_assert(r->executed, "%s", text);
  cr_assert(r->max_rel_err <= tol, "%s", text);
  cr_assert(r->numeric_ok && r->bytes_ok && r->passed, "%s", text);
  cr_assert_gt(r->ntensors, 0);
}

/* The run fails (numerically or by stopping), and says why. */
static void expect_fail(const char *model, const char *split, ts_prec prec, const extra *x,
                        const char *why)
{
  GError *err = NULL;
  g_autoptr(ts_validate_result) r = vrun(model, split, prec, x, &err);
  cr_assert_not_null(r, "%s %s: %s", model, split, err ? err->message : "");
  g_autofree char *text = describe(r);
  cr_assert(!r->passed, "a broken split passed: %s", text);
  cr_assert(!r->numeric_ok, "a broken split kept the numbers right: %s", text);
  cr_assert(!r->executed || r->max_rel_err > 1e-3, "%s", text);
  if (why != NULL)
    cr_assert(strstr(text, why) != NULL, "expected '%s' in:\n%s", why, text);
}

Test(validate, unsplit_is_the_reference_bit_for_bit)
{
  /* One chip runs the same kernels in the same order as ts_nnet: no rounding difference. */
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
      GError *err = NULL;
      g_autoptr(ts_validate_result) r = vrun(models[m], "dp=1", precs[p], NULL, &err);
      cr_assert_not_null(r);
      g_autofree char *text = describe(r);
      double e = r->max_rel_err, l = r->loss, lr = r->loss_ref;
      cr_assert(r->passed, "%s", text);
      cr_assert_eq(e, 0.0, "%s", text);
      cr_assert_eq(l, lr, "%s", text);
    }
}

Test(validate, data_parallel_every_algorithm_1d_and_2d, .timeout = 60)
{
  /* dp over one ring dimension, over both dimensions of a torus, a 2-level switch hierarchy
   * and a mesh, and over 3 chips; every all-reduce algorithm in turn. */
  static const struct {
    const char *topo, *split;
  } cases[] = {{"ring:4", "dp=4"},
               {"torus:4x2", "dp=8@x+y"},
               {"switch:2x2", "dp=4"},
               {"mesh:2x2", "dp=4"},
               {"ring:3", "dp=3"}};
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize c = 0; c < G_N_ELEMENTS(cases); c++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
        int ran = 0;
        for (int a = TS_ALGO_RING; a < TS_ALGO_NALGOS; a++) {
          extra x = {.topo = cases[c].topo,
                     .micro = 0,
                     .algo = (ts_coll_algo)a,
                     .drop = NULL,
                     .nodeps = NULL,
                     .batch = 24};
          GError *err = NULL;
          g_autoptr(ts_validate_result) r = vrun(models[m], cases[c].split, precs[p], &x, &err);
          if (r == NULL) {
            /* Only halving-doubling may refuse, and only a group of 3 (not a power of two);
             * and nvls where no switch reduces in place (none of these topologies). */
            if (a == TS_ALGO_NVLS) {
              cr_assert(strstr(err->message, "in_switch_reduction") != NULL, "%s", err->message);
              g_error_free(err);
              continue;
            }
            cr_assert(a == TS_ALGO_HALVING_DOUBLING && strcmp(cases[c].split, "dp=3") == 0,
                      "%s %s %s: %s", models[m], cases[c].split, ts_coll_algo_name(a),
                      err->message);
            cr_assert(strstr(err->message, "power-of-two") != NULL, "%s", err->message);
            g_error_free(err);
            continue;
          }
          g_autofree char *text = describe(r);
          cr_assert(r->passed, "%s", text);
          /* nccl is a choice: the run names what it resolved to (an NCCL algorithm). */
          if (a == TS_ALGO_NCCL)
            cr_assert(g_str_has_prefix(r->algorithms, "nccl-"), "%s", text);
          else
            cr_assert_str_eq(r->algorithms, ts_coll_algo_name(a), "%s", text);
          ran++;
        }
        /* Seven classic algorithms, nccl-ring, nccl-tree, the nccl choice and torus-dimwise
         * (nvls refuses). */
        int want = strcmp(cases[c].split, "dp=3") == 0 ? 10 : 11;
        cr_assert_eq(ran, want, "%s %s: %d algorithms ran", models[m], cases[c].split, ran);
      }
}

Test(validate, data_parallel_bytes_closed_form)
{
  /* A ring all-reduce sends 2 (n-1)/n of its buffer from every member (Patarasuk & Yuan
   * 2009). The MLP has 144 + 272 + 136 = 552 parameters, 4 bytes each, every bucket divisible
   * by 4: per chip and step 2 * 3/4 * 552 * 4 = 3312 bytes; two steps. */
  extra x = {.topo = "torus:4x2", .micro = 0, .algo = TS_ALGO_RING, .drop = NULL, .nodeps = NULL};
  GError *err = NULL;
  g_autoptr(ts_validate_result) r = vrun("validate-mlp", "dp=4@x,tp=2@y", TS_PREC_F64, &x, &err);
  cr_assert_not_null(r, "%s", err ? err->message : "");
  g_autoptr(ts_validate_result) d = NULL;
  extra y = {.topo = "ring:4", .micro = 0, .algo = TS_ALGO_RING, .drop = NULL, .nodeps = NULL};
  d = vrun("validate-mlp", "dp=4", TS_PREC_F64, &y, &err);
  cr_assert_not_null(d);
  g_autofree char *text = describe(d);
  cr_assert(d->passed, "%s", text);
  for (int i = 0; i < d->nranks; i++) {
    double sent = d->ranks[i].sent_bytes, traced = d->ranks[i].trace_bytes;
    cr_assert_eq(sent, 6624.0, "chip %d sent %g: %s", i, sent, text);
    cr_assert_eq(traced, 6624.0, "chip %d traced %g", i, traced);
  }
}

Test(validate, fp8_tensor_parallel_gathers_carry_one_byte, .timeout = 60)
{
  /* precision=fp8 under Transformer Engine's recipe (not fsdp2) gathers the FP8 GEMMs' inputs
   * and output gradients in FP8: the trace's gathers carry one byte an element, which the
   * validator counts so; the numbers and every chip's bytes match. On the DGX H100 (32 chips:
   * an FP8 rate). */
  extra x = {.topo = "dgx-h100-4node", .batch = 32};
  expect_pass("validate-transformer", "tp=2,dp=16,sp,precision=fp8", TS_PREC_F64, &x);
  expect_pass("validate-llama", "tp=2,dp=16,sp,precision=fp8", TS_PREC_F32, &x);
}

Test(validate, tensor_parallel_column_row_heads)
{
  /* MLP: fc1 column, fc2 row; CNN: conv1 by output channels, conv2 by input channels;
   * transformer: attention by heads, fc1 column, fc2 row. One and two dimensions. */
  static const char *const splits[] = {"tp=2", "tp=4"};
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize s = 0; s < G_N_ELEMENTS(splits); s++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
        expect_pass(models[m], splits[s], precs[p], NULL);
  extra x = {
      .topo = "switch:2x2", .micro = 0, .algo = TS_ALGO_HIERARCHICAL, .drop = NULL, .nodeps = NULL};
  expect_pass("validate-transformer", "tp=4", TS_PREC_F64, &x);
}

Test(validate, hybrid_tensor_and_data_parallel_on_2d_arrays)
{
  static const struct {
    const char *topo, *split;
  } cases[] = {{"torus:2x2", "tp=2@x,dp=2@y"},
               {"torus:4x2", "tp=4@x,dp=2@y"},
               {"torus:4x2", "tp=2@y,dp=4@x"},
               {"switch:2x4", "tp=2@node,dp=4@net"}};
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize c = 0; c < G_N_ELEMENTS(cases); c++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
        extra x = {
            .topo = cases[c].topo, .micro = 0, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
        expect_pass(models[m], cases[c].split, precs[p], &x);
        x.micro = 1; /* gradient accumulation over micro-batches */
        expect_pass(models[m], cases[c].split, precs[p], &x);
      }
}

Test(validate, row_split_biases_are_counted_whole)
{
  /* A row-split layer's bias is whole on every tp member (Megatron's RowParallelLinear): with
   * tp=2 the MLP's fc2 gradient bucket carries all 16 elements of fc2.b, so the bytes agree.
   * (The planner used to divide it by tp, 136 elements for the 144 each member holds.) */
  extra x = {.topo = "torus:2x2", .micro = 0, .algo = TS_ALGO_RING, .drop = NULL, .nodeps = NULL};
  GError *err = NULL;
  g_autoptr(ts_validate_result) r = vrun("validate-mlp", "tp=2@x,dp=2@y", TS_PREC_F32, &x, &err);
  cr_assert_not_null(r);
  g_autofree char *text = describe(r);
  cr_assert(r->numeric_ok && r->bytes_ok && r->passed, "%s", text);
}

Test(validate, broken_splits_fail, .timeout = 60)
{
  static const struct {
    const char *model, *split, *drop, *nodeps, *why;
    gint64 micro;
  } cases[] = {
      {"validate-mlp", "tp=2", "fc2 fwd all-reduce", NULL, "a missing all-reduce", 0},
      {"validate-transformer", "tp=2", "block.0.attention bwd all-reduce", NULL,
       "missing all-reduce", 0},
      {"validate-transformer", "tp=2", "block.0.fc2 fwd all-reduce", NULL, "partial sums", 0},
      {"validate-cnn", "tp=2", "conv2 fwd all-reduce", NULL, "partial sums", 0},
      {"validate-cnn", "dp=4", "grad all-reduce fc..fc", NULL, "no data-parallel", 0},
      {"validate-cnn", "dp=4", NULL, "grad all-reduce fc..fc", "missing dependency", 0},
      {"validate-mlp", "pp=2", "send activations fc1 stage 0", NULL, "no matching send", 2},
      {"validate-transformer", "dp=4,zero=3", "block.0.fc1 param all-gather", NULL, "ZeRO-3", 0},
      {"validate-transformer", "dp=4,zero=1", "updated param all-gather", NULL, NULL, 0},
      {"validate-mlp", "dp=4,zero=2", "grad reduce-scatter fc3..fc3", NULL, NULL, 1},
      {"validate-transformer", "tp=2,sp", "block.0.fc1 bwd input re-gather", NULL, "re-gather", 0},
      {"validate-transformer", "tp=2,sp", "block.0.attention fwd reduce-scatter", NULL, NULL, 0},
      {"validate-transformer", "tp=2,recompute=selective", "block.0.attention recompute attention",
       NULL, "recompute attention", 0},
      {"validate-transformer", "tp=2,recompute=full", "block.0.fc1 recompute", NULL,
       "no 'block.0.fc1 recompute' ran", 0},
      {"validate-transformer", "tp=2,recompute=full", "block.0.attention recompute all-reduce",
       NULL, "partial sums", 0},
      {"validate-cnn", "tp=2,kind:dense=dp", "fc bwd all-gather (redistribution)", NULL,
       "missing all-gather", 0},
      {"validate-mlp", "dp=4,ps=4", "ps pull parameters", NULL, NULL, 0},
      {"validate-mlp", "tp=2,pp=2", "stage 1 activations all-gather", NULL, "1/2 chunk", 2},
      {"validate-cnn", "tp=2,pp=2", "stage 0 gradients all-gather", NULL, "1/2 chunk", 2},
      {"validate-mlp", "pp=2,recompute=stage", "fc1 recompute", NULL, "no 'fc1 recompute' ran", 2},
  };
  for (gsize c = 0; c < G_N_ELEMENTS(cases); c++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
      extra x = {.topo = NULL,
                 .micro = cases[c].micro,
                 .algo = TS_ALGO_AUTO,
                 .drop = cases[c].drop,
                 .nodeps = cases[c].nodeps};
      expect_fail(cases[c].model, cases[c].split, precs[p], &x, cases[c].why);
    }
}

Test(validate, pipeline_schedules)
{
  static const char *const splits[] = {"pp=2,schedule=gpipe", "pp=2,schedule=1f1b", "pp=2,dp=4",
                                       "pp=3,dp=2"};
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize s = 0; s < G_N_ELEMENTS(splits); s++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
        extra x = {.topo = NULL, .micro = 1, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
        /* The transformer has two blocks: three stages are refused (tested below). */
        if (m == 2 && s == 3)
          continue;
        expect_pass(models[m], splits[s], precs[p], &x);
      }
  /* Interleaved 1F1B needs two chunks per device: the CNN has the layers (the transformer's
   * two blocks make only two stages). */
  for (gsize m = 1; m < 2; m++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
      extra x = {.topo = NULL, .micro = 2, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
      expect_pass(models[m], "pp=2,schedule=interleaved:2", precs[p], &x);
    }
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++) {
    extra x = {.topo = "torus:2x2", .micro = 2, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
    expect_pass(models[m], "tp=2@x,pp=2@y", TS_PREC_F64, &x);
    /* GPipe's re-materialisation: each stage re-run from its kept input before its backward. */
    expect_pass(models[m], "tp=2@x,pp=2@y,schedule=gpipe,recompute=stage", TS_PREC_F64, &x);
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
      expect_pass(models[m], "pp=2,dp=2,recompute=stage", precs[p], &x);
  }
  /* torchgpipe's checkpoint='except_last': every micro-batch but the step's last re-run before
   * its backward, the last keeping its activations (the validator dropped them too, and failed
   * on the last micro-batch's backward for want of a re-run). */
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++) {
    extra x = {.topo = NULL, .micro = 2, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
    expect_pass(models[m], "pp=2,schedule=1f1b,recompute=stage:except-last", TS_PREC_F64, &x);
  }
}

Test(validate, gpipe_backward_by_micro_batch_tag, .timeout = 60)
{
  /* GPipe runs the backward passes from the step's last micro-batch to its first. With
   * recompute=stage:except-last the last keeps its activations and the others are re-run, so a
   * validator numbering backward passes in run order (as it did) takes the first one run (the
   * last micro-batch's, not re-run) for the first micro-batch's, whose activations were
   * dropped: normwise error 0.49. Numbered by the trace's micro-batch tags every network
   * reproduces the reference (1e-5 fp32, 1e-12 fp64) under GPipe and 1F1B, alone, with dp and
   * with tp (4 micro-batches per replica: batch 8, micro 2). */
  static const char *const splits[] = {
      "pp=2,schedule=gpipe,recompute=stage:except-last",
      "pp=2,schedule=1f1b,recompute=stage:except-last",
      "pp=2,dp=2,schedule=gpipe,recompute=stage:except-last",
  };
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++) {
    for (gsize s = 0; s < G_N_ELEMENTS(splits); s++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
        extra x = {.topo = NULL, .micro = 2, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
        expect_pass(models[m], splits[s], precs[p], &x);
      }
    extra t = {.topo = "torus:2x2", .micro = 2, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
    expect_pass(models[m], "tp=2@x,pp=2@y,schedule=gpipe,recompute=stage:except-last", TS_PREC_F64,
                &t);
    /* One micro-batch per replica: the step's last is its only one, kept whole. */
    extra one = {.topo = NULL, .micro = 0, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
    expect_pass(models[m], "pp=2,schedule=gpipe,recompute=stage:except-last", TS_PREC_F64, &one);
  }
  /* The trace's sends under GPipe carry the tagged micro-batch too: a gradient the last stage
   * sends back (micro-batch 3 first) lands where the first stage's backward of micro-batch 3
   * reads it; with every stage's backward re-run (recompute=stage) any order would be
   * symmetric, so except-last is what tells the numberings apart. With tp-overlap chunking
   * the forward GEMMs, the chunk index still comes from program order within the micro-batch. */
  extra x = {.topo = NULL, .micro = 2, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
  expect_pass("validate-transformer", "tp=2,pp=2,schedule=gpipe,tp-overlap", TS_PREC_F64, &x);
  expect_pass("validate-transformer",
              "tp=2,sp,pp=2,schedule=gpipe,recompute=stage:except-last,tp-overlap", TS_PREC_F64,
              &x);
}

/* pipe-engine=deepspeed executes: each non-last stage all-gathers its own output back over tp
 * before its backward (PartitionedTensor.full) after the received gradient's gather, and
 * accumulates its gradients per micro-batch (timing only). The validator read the second
 * gather of the boundary as the gradient's again and stopped ("no chunk 0 of the boundary
 * value was received"), then did not know the accumulation op: every such run FAILed. */
Test(validate, deepspeed_pipeline_engine, .timeout = 60)
{
  static const char *const splits[] = {"tp=2@x,pp=2@y,pipe-engine=deepspeed",
                                       "tp=2@x,sp,pp=2@y,pipe-engine=deepspeed,tp-grad=serial"};
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize s = 0; s < G_N_ELEMENTS(splits); s++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
        extra x = {
            .topo = "torus:2x2", .micro = 2, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
        if (s == 1 && m != 2) /* sp: the transformer */
          continue;
        expect_pass(models[m], splits[s], precs[p], &x);
      }
}

Test(validate, pytorch_tensor_parallel_backward_and_layout_copies, .timeout = 60)
{
  /* With fsdp2 the planner emits PyTorch's tensor parallelism: the weight gradient runs before
   * the input gradient's collective (serial backward), and with sp a sequence-dim copy sits
   * next to each collective. A validator that took only the op just before a collective as
   * the pass it follows read the output gradient instead of the input gradient ("all-reduces
   * a feature block", normwise error 0.11) and, with sp, an unsummed forward output. */
  static const char *const splits[] = {
      "tp=2,dp=2,zero=3,fsdp2",
      "tp=2,dp=2,sp,zero=3,fsdp2",
      "tp=2,dp=2,sp,zero=3,fsdp2,tp-overlap=async",
  };
  for (gsize s = 0; s < G_N_ELEMENTS(splits); s++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
      extra x = {.topo = NULL, .micro = 0, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
      expect_pass("validate-transformer", splits[s], precs[p], &x);
    }
}

Test(validate, zero_stages_and_offload)
{
  static const char *const splits[] = {"dp=4,zero=1",
                                       "dp=4,zero=2",
                                       "dp=4,zero=3",
                                       "dp=8,zero=3",
                                       "dp=4,zero=2,offload=cpu",
                                       "dp=4,zero=3,offload=nvme"};
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize s = 0; s < G_N_ELEMENTS(splits); s++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
        extra x = {.topo = NULL, .micro = 1, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
        expect_pass(models[m], splits[s], precs[p], &x);
      }
}

Test(validate, parameter_servers)
{
  /* A server on every worker (collectives), fewer servers than workers and dedicated servers
   * (both timed as durations, checked by their semantics). */
  static const char *const splits[] = {"dp=4,ps=4", "dp=4,ps=2",
                                       "dp=4,ps=4,ps-placement=dedicated"};
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize s = 0; s < G_N_ELEMENTS(splits); s++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
        expect_pass(models[m], splits[s], precs[p], NULL);
}

Test(validate, parameter_servers_with_a_pipeline)
{
  /* Each stage pushes and updates only its own layers (pp=2,dp=2,ps=1 failed under every
   * schedule: the executor expected every stage's pushes P times over and updated every
   * tensor at the first stage's update). */
  static const char *const splits[] = {"pp=2,dp=2,ps=1,schedule=gpipe",
                                       "pp=2,dp=2,ps=1,schedule=1f1b",
                                       "pp=2,dp=2,ps=1,schedule=1f1b,recompute=full",
                                       "pp=2,dp=2,ps=2,ps-placement=dedicated,schedule=gpipe"};
  extra x = {.topo = "torus:2x2", .micro = 2, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize s = 0; s < G_N_ELEMENTS(splits); s++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
        expect_pass(models[m], splits[s], precs[p], &x);
  expect_pass("validate-cnn", "pp=2,dp=2,ps=1,schedule=interleaved", TS_PREC_F64, &x);
  /* An update that does not wait for its stage's pushes is still caught. */
  extra y = {.topo = "torus:2x2",
             .micro = 2,
             .algo = TS_ALGO_AUTO,
             .drop = NULL,
             .nodeps = "ps update (colocated server shard)"};
  expect_fail("validate-mlp", "pp=2,dp=2,ps=1", TS_PREC_F64, &y, "the servers update stage 1");
}

Test(validate, per_layer_hybrid)
{
  /* Dense layers use the tp axis for their batch; the convolutions stay split. */
  for (gsize m = 0; m < 2; m++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
      expect_pass(models[m], "tp=2,kind:dense=dp", precs[p], NULL);
      extra x = {
          .topo = "torus:2x2", .micro = 0, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
      expect_pass(models[m], "tp=2@x,dp=2@y,kind:dense=dp", precs[p], &x);
    }
  /* The transformer's fc2 works on a sample block, but its residual adds the attention output
   * every member holds whole: its residual gradient came back as a sample block that nothing
   * gathered (a planner finding). The planner now gathers fc2's output in forward, so the
   * residual stream stays whole. */
  for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
    expect_pass("validate-transformer", "tp=2,kind:dense=dp", precs[p], NULL);
    extra x = {.topo = "torus:2x2", .micro = 2, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
    expect_pass("validate-transformer", "tp=2@x,dp=2@y,kind:dense=dp,zero=1", precs[p], &x);
    expect_pass("validate-transformer", "tp=2@x,pp=2@y,kind:dense=dp,recompute=full", precs[p], &x);
  }
}

Test(validate, sequence_parallelism_and_recomputation)
{
  for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
    expect_pass("validate-transformer", "tp=2,sp", precs[p], NULL);
    extra x = {.topo = "torus:2x2", .micro = 0, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
    expect_pass("validate-transformer", "tp=2@x,dp=2@y,sp", precs[p], &x);
    for (gsize m = 0; m < G_N_ELEMENTS(models); m++) {
      expect_pass(models[m], "tp=2,recompute=selective", precs[p], NULL);
      expect_pass(models[m], "tp=2,recompute=full", precs[p], NULL);
    }
  }
  /* With ZeRO, the norms' gradients (per-token work under sequence parallelism) were
   * reduce-scattered over dp and tp but their parameters gathered over dp, so the tp members'
   * copies diverged (a planner finding). They are now summed over tp, then sharded over dp. */
  extra x = {.topo = "torus:2x2", .micro = 1, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
  static const char *const zsplits[] = {"tp=2@x,dp=2@y,sp,zero=1", "tp=2@x,dp=2@y,sp,zero=2",
                                        "tp=2@x,dp=2@y,sp,zero=3"};
  for (gsize z = 0; z < G_N_ELEMENTS(zsplits); z++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
      expect_pass("validate-transformer", zsplits[z], precs[p], &x);
  /* The same for the per-layer hybrid's dense layers (work over dp and tp). */
  x.micro = 2;
  expect_pass("validate-mlp", "tp=2@x,dp=2@y,kind:dense=dp,zero=1", TS_PREC_F64, &x);
  expect_pass("validate-cnn", "tp=2@x,dp=2@y,kind:dense=dp,zero=3", TS_PREC_F64, &x);
}

/* The run is refused as bad input, with a message containing `why`. */
static void expect_refused(const char *model, const char *split, const extra *x, const char *why)
{
  GError *err = NULL;
  g_autoptr(ts_validate_result) r = vrun(model, split, TS_PREC_F32, x, &err);
  cr_assert_null(r, "%s %s was accepted", model, split);
  cr_assert_not_null(err);
  cr_assert(strstr(err->message, why) != NULL, "expected '%s' in: %s", why, err->message);
  g_error_free(err);
}

Test(validate, stage_boundaries_fall_between_transformer_blocks)
{
  /* stages=3:3 cut the block between norm2 and fc1, and fc2's residual needed the attention
   * output, which the trace never sent to stage 1 (a planner finding, now refused). */
  extra x = {.topo = NULL, .micro = 2, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
  expect_refused("validate-transformer", "pp=2,stages=3:3", &x,
                 "stage 1 starts at layer 'block.0.fc1'");
  expect_refused("validate-transformer", "pp=2,stages=2:4", &x, "inside the block");
  expect_pass("validate-transformer", "pp=2,stages=5:1", TS_PREC_F32, &x);
  /* The planner's own balancing cut inside the block with three stages: now refused too. */
  extra y = {.topo = NULL, .micro = 1, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
  expect_refused("validate-transformer", "pp=3,dp=2", &y, "has 2 blocks");
  expect_pass("validate-transformer", "pp=2,dp=2", TS_PREC_F32, &y);
}

Test(validate, sequence_parallelism_needs_a_sequence)
{
  /* The MLP was accepted with sp although its 1-token samples have no sequence to split; the
   * CNN was refused. Both are refused now, the same way. */
  expect_refused("validate-mlp", "tp=2,sp", NULL, "1 token per sample (layer 'fc1')");
  expect_refused("validate-cnn", "tp=2,sp", NULL, "1 token per sample (layer 'conv1')");
}

Test(validate, deterministic)
{
  GError *err = NULL;
  extra x = {.topo = "torus:2x2", .micro = 1, .algo = TS_ALGO_AUTO, .drop = NULL, .nodeps = NULL};
  g_autoptr(ts_validate_result) a =
      vrun("validate-transformer", "tp=2,dp=2", TS_PREC_F32, &x, &err);
  g_autoptr(ts_validate_result) b =
      vrun("validate-transformer", "tp=2,dp=2", TS_PREC_F32, &x, &err);
  cr_assert(a != NULL && b != NULL);
  g_autofree char *ta = describe(a);
  g_autofree char *tb = describe(b);
  cr_assert_str_eq(ta, tb);
}

/* ---- the command ------------------------------------------------------------------------ */

static run_result cmd(const char *args)
{
  g_autofree char *line = g_strdup_printf("validate %s", args);
  return run(line);
}

static void cmd_free(run_result *r)
{
  run_free(r);
}

static void expect_input_error(const char *args, const char *needle)
{
  run_result r = cmd(args);
  cr_assert_eq(r.status, 2, "`validate %s` exited %d, expected 2; stderr: %s", args, r.status,
               r.err);
  cr_assert(strstr(r.err, needle) != NULL, "`%s`: stderr '%s' lacks '%s'", args, r.err, needle);
  const char *nl = strchr(r.err, '\n');
  cr_assert(nl != NULL && nl[1] == '\0', "`%s`: expected one line, got '%s'", args, r.err);
  cr_assert_str_eq(r.out, "", "nothing on stdout on error");
  cmd_free(&r);
}

Test(validate_cli, exit_statuses)
{
  run_result ok = cmd("-m validate-transformer -s tp=2@x,dp=2@y -t torus:2x2 -p fp64");
  cr_assert_eq(ok.status, 0, "tp+dp passes, bytes included: %s", ok.out);
  cr_assert(strstr(ok.out, "largest normwise relative error") != NULL, "%s", ok.out);
  cmd_free(&ok);
  run_result pass = cmd("-m validate-mlp -m validate-cnn -s dp=4 -s tp=2 -p both -a all");
  cr_assert_eq(pass.status, 0, "%s%s", pass.out, pass.err);
  cr_assert(strstr(pass.out, "88 of 88 runs passed") != NULL, "%s", pass.out);
  cmd_free(&pass);
  run_result broken = cmd("-m validate-mlp -s tp=2 --drop-op 'fc2 fwd all-reduce'");
  cr_assert_eq(broken.status, 1, "%s", broken.out);
  cr_assert(strstr(broken.out, "result: FAIL") != NULL, "%s", broken.out);
  cmd_free(&broken);
}

Test(validate_cli, bad_input_exits_2_with_one_line)
{
  expect_input_error("-m gpt2-1.5b -s dp=2", "expected an explicit layer list");
  expect_input_error("-m vgg16 -s dp=2", "expected one of the validation networks");
  expect_input_error("-m no-such-model", "no-such-model");
  expect_input_error("-p fp16", "--precision 'fp16'");
  expect_input_error("-a spiral", "--algorithm 'spiral'");
  expect_input_error("-s dp=0", "dp='0'");
  expect_input_error("-s dp=3 -b 6 -m validate-mlp -a halving-doubling", "power-of-two");
  expect_input_error("-s tp=2 -m validate-mlp --drop-op 'nothing like it'", "--drop-op 'nothing");
  expect_input_error("-t torus:0x2", "--topology 'torus:0x2'");
  expect_input_error("--steps 0", "--steps 0");
  expect_input_error("-s dp=2 -t torus:2x2", "uses 2 chips");
  expect_input_error("-m validate-mlp -b 6 -s dp=3,zero=1", "does not divide");
  /* tp-overlap chunks attention's projections around the cp ring (the planner's
   * ts_plan_fwd_chunked), which the validator does not execute. */
  expect_input_error("-m validate-transformer -s tp=2,cp=2,sp,tp-overlap",
                     "expected tp-overlap or cp, not both");
  expect_input_error("extra", "unexpected argument 'extra'");
  /* --jobs takes [1, 1024] as sweep, check and search do: 0 was "not given" (every core) with
   * --against and silently ignored without it. */
  expect_input_error("--against data/published/torchtitan/memory.csv -j 0", "--jobs 0");
  expect_input_error("-j 0", "expected --against");
  /* Graph keys: the simulator honours them, the validator's networks are chains. */
  g_autofree char *dir = g_dir_make_tmp("ts_validate_XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "graph.ini", NULL);
  cr_assert(g_file_set_contents(path,
                                "[model]\nkind = layers\ndtype = fp32\n"
                                "[layer.fc1]\nkind = dense\nin_features = 16\nout_features = 16\n"
                                "activation = relu\n"
                                "[layer.fc2]\nkind = dense\nout_features = 16\nactivation = relu\n"
                                "residual_from = fc1\n"
                                "[layer.out]\nkind = dense\nout_features = 4\nloss = true\n",
                                -1, NULL));
  g_autofree char *args = g_strdup_printf("-m %s -s dp=2", path);
  expect_input_error(args, "[layer.fc2] residual_from: expected a validation network");
  g_unlink(path);
  g_rmdir(dir);
}

Test(validate, grouped_query_attention_matches_one_processor, .timeout = 60)
{
  /* validate-gqa: 4 query heads on 2 key/value heads. Data, tensor (query and key/value heads
   * split alike), sequence, pipeline, ZeRO and selective recomputation reproduce the
   * single-processor reference (ts_nnet with kv_heads); dropping the attention's forward
   * all-reduce or its input-gradient all-reduce fails. */
  static const char *const splits[] = {"dp=2",       "tp=2",
                                       "tp=2,sp",    "tp=2,dp=2,zero=3",
                                       "tp=2,pp=2",  "tp=2,dp=2,recompute=selective",
                                       "dp=4,zero=1"};
  for (gsize k = 0; k < G_N_ELEMENTS(splits); k++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
      expect_pass("validate-gqa", splits[k], precs[p], NULL);
  static const char *const drops[] = {"block.0.attention fwd all-reduce",
                                      "block.0.attention bwd all-reduce"};
  for (gsize k = 0; k < G_N_ELEMENTS(drops); k++) {
    extra x = {.drop = drops[k]};
    expect_fail("validate-gqa", "tp=2", TS_PREC_F64, &x, "missing all-reduce");
  }
}

Test(validate, swiglu_llama_block_matches_one_processor, .timeout = 60)
{
  /* validate-llama: grouped-query attention with rotary embeddings (positions are global
   * under sp: attention gathers the sequence first) and a SwiGLU MLP whose fc1 gives each tp member
   * the same columns of the gate and of the up projection. Every split below reproduces the
   * reference (ts_nnet gated); dropping fc1's input-gradient all-reduce or fc2's forward
   * all-reduce fails. */
  static const char *const splits[] = {"dp=2",
                                       "tp=2",
                                       "tp=2,sp",
                                       "tp=2,dp=2,zero=3",
                                       "tp=2,pp=2",
                                       "tp=2,dp=2,recompute=full",
                                       "tp=2,kind:dense=dp",
                                       "tp=2,recompute=selective",
                                       "dp=8,zero=2"};
  for (gsize k = 0; k < G_N_ELEMENTS(splits); k++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
      expect_pass("validate-llama", splits[k], precs[p], NULL);
  static const char *const drops[] = {"block.0.fc1 bwd all-reduce", "block.0.fc2 fwd all-reduce"};
  for (gsize k = 0; k < G_N_ELEMENTS(drops); k++) {
    extra x = {.drop = drops[k]};
    expect_fail("validate-llama", "tp=2", TS_PREC_F64, &x, NULL);
  }
}

Test(errors, new_layer_kinds_are_refused_naming_the_layer)
{
  /* The reference has no kernels for latent attention: validating a model with it is
   * refused, naming the layer and what it is, exit 2. A generated mixture of experts (Mixtral)
   * is refused too: the validator runs its own MoE block (models/validate-moe.ini). */
  /* An explicit layer list declaring latent attention (its keys on an attention layer) is
   * refused the same way. */
  g_autofree char *dir = g_dir_make_tmp("ts-mla-XXXXXX", NULL);
  g_autofree char *mla = g_build_filename(dir, "mla.ini", NULL);
  cr_assert(g_file_set_contents(
      mla,
      "[model]\nkind = layers\ndtype = fp32\n[layer.norm]\nkind = norm\nfeatures = 8\n"
      "tokens = 4\n[layer.attention]\nkind = attention\nheads = 2\nresidual = true\n"
      "bias = false\nq_lora_rank = 4\nkv_lora_rank = 4\nqk_nope_head_dim = 2\n"
      "qk_rope_head_dim = 2\nv_head_dim = 2\n[layer.head]\nkind = dense\nout_features = 8\n"
      "loss = true\ntp = replicated\n",
      -1, NULL));
  const struct {
    const char *model, *layer, *what;
  } cases[] = {{"mixtral-8x7b", "kind='transformer'", "mixture-of-experts block"},
               {"deepseek-v3", "block.0.attention", "multi-head latent attention"},
               {mla, "layer 'attention'", "multi-head latent attention"}};
  for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autofree char *args = g_strdup_printf("validate -m %s -s dp=2", cases[k].model);
    run_result r = run(args);
    cr_assert_eq(r.status, 2, "%s: exit %d", cases[k].model, r.status);
    cr_assert_not_null(strstr(r.err, cases[k].layer), "%s", r.err);
    cr_assert_not_null(strstr(r.err, cases[k].what), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "does not execute"), "%s", r.err);
    char *nl = strchr(r.err, '\n');
    cr_assert(nl == NULL || nl[1] == '\0', "more than one line: %s", r.err);
    run_free(&r);
  }
  g_unlink(mla);
  g_rmdir(dir);
}

Test(validate, hybrid_sharding_matches_one_processor, .timeout = 60)
{
  /* shard=S (FSDP HYBRID_SHARD, MiCS): ZeRO inside groups of S data-parallel ranks, the
   * reduce-scattered gradient shards all-reduced across the dp/S replicas. Every ZeRO stage,
   * with tp, sp and pp, on every network reproduces the reference; dropping one all-reduce
   * across the replicas leaves that bucket's shards summed over one group only and fails, and
   * the note names it. */
  static const char *const splits[] = {"dp=8,zero=1,shard=4", "dp=8,zero=2,shard=2",
                                       "dp=8,zero=3,shard=4", "tp=2,dp=4,zero=1,shard=2",
                                       "pp=2,dp=4,zero=2,shard=2"};
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize k = 0; k < G_N_ELEMENTS(splits); k++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
        expect_pass(models[m], splits[k], precs[p], NULL);
  expect_pass("validate-transformer", "tp=2,dp=4,zero=3,shard=2,sp", TS_PREC_F64, NULL);
  expect_pass("validate-llama", "dp=8,zero=3,shard=4", TS_PREC_F64, NULL);
  extra x = {.drop = "grad shard all-reduce across replicas fc3..fc3"};
  expect_fail("validate-mlp", "dp=8,zero=1,shard=4", TS_PREC_F64, &x,
              "never all-reduced across the replicas");
  extra y = {.drop = "grad shard all-reduce across replicas head..head"};
  expect_fail("validate-transformer", "dp=8,zero=3,shard=2", TS_PREC_F64, &y,
              "never all-reduced across the replicas");
  /* replica-reduce=end: one all-reduce of every shard after the backward, tagged with every
   * layer (untagged it carried no gradient: "expected ranges in [0, 0)"). */
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    expect_pass(models[m], "dp=8,zero=3,shard=4,replica-reduce=end", TS_PREC_F64, NULL);
  expect_pass("validate-llama", "tp=2,dp=4,zero=1,shard=2,replica-reduce=end", TS_PREC_F32, NULL);
  extra z = {.drop = "grad shard all-reduce across replicas, after the backward"};
  expect_fail("validate-mlp", "dp=8,zero=3,shard=4,replica-reduce=end", TS_PREC_F64, &z,
              "never all-reduced across the replicas");
}

Test(validate, dp_overlap_matches_one_processor, .timeout = 60)
{
  /* dp-overlap (Megatron's overlap-param-gather): each layer's updated parameters are gathered
   * at the start of the next step, before its forward. Two steps, so the second uses gathered
   * updates; with ZeRO 1 and 2, tp, pp and hybrid sharding every network reproduces the
   * reference. Without one layer's gather its forward reads parameters only partly updated:
   * the run stops there. */
  static const char *const splits[] = {"dp=4,zero=1,dp-overlap", "dp=8,zero=2,dp-overlap",
                                       "tp=2,dp=4,zero=1,dp-overlap", "pp=2,dp=4,zero=1,dp-overlap",
                                       "dp=8,zero=1,shard=4,dp-overlap"};
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize k = 0; k < G_N_ELEMENTS(splits); k++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
        expect_pass(models[m], splits[k], precs[p], NULL);
  expect_pass("validate-llama", "tp=2,dp=4,zero=1,sp,dp-overlap", TS_PREC_F64, NULL);
  extra x = {.drop = "fc1 updated param all-gather"};
  expect_fail("validate-mlp", "dp=4,zero=1,dp-overlap", TS_PREC_F64, &x,
              "no all-gather collected them");
}

/* Sequence parallelism under a tp-overlap MODE that chunks the backward's output-gradient
 * all-gather beside the GEMMs it feeds (fc2's whole backward, attention's input gradient): with
 * dp, ZeRO-3, pp and recomputation the transformer and Llama reproduce the reference, and
 * dropping either layer's backward gather chunks fails. */
static void backward_chunks_reproduce(const char *mode)
{
  static const char *const sp[] = {"tp=2,sp", "tp=2,dp=2,zero=3,sp", "tp=2,pp=2,sp",
                                   "tp=2,dp=2,sp,recompute=full", "tp=2,pp=2,sp,recompute=full"};
  for (gsize k = 0; k < G_N_ELEMENTS(sp); k++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
      g_autofree char *split = g_strdup_printf("%s,%s", sp[k], mode);
      expect_pass("validate-transformer", split, precs[p], NULL);
      expect_pass("validate-llama", split, precs[p], NULL);
    }
  g_autofree char *one = g_strdup_printf("tp=2,sp,%s", mode);
  extra a = {.drop = "block.0.fc2 bwd all-gather chunk"};
  expect_fail("validate-transformer", one, TS_PREC_F64, &a, "ran before its all-gather chunk");
  extra b = {.drop = "block.0.attention bwd all-gather chunk"};
  expect_fail("validate-llama", one, TS_PREC_F64, &b, "ran before its all-gather chunk");
}

Test(validate, tp_overlap_xla_backward_matches_one_processor, .timeout = 60)
{
  /* tp-overlap=xla (XLA's collective matmul) chunks the backward's gathers as te does on a GPU;
   * the validator runs the gather chunks on real buffers and the layer's backward once every
   * chunk is there. */
  backward_chunks_reproduce("tp-overlap=xla");
}

Test(validate, tp_overlap_matches_one_processor, .timeout = 60)
{
  /* tp-overlap: each forward GEMM with a gathered input or a reduced output runs in tp chunks
   * beside chunked collectives. The validator runs every chunk collective on real buffers (chunk
   * c carries the c-th part of every member's shard) and the layer once its input is complete,
   * so the chunks must assemble exactly what the whole collective would. Without and with
   * sequence parallelism (all-gather and reduce-scatter chunks), with dp, pp, ZeRO and
   * recomputation, every network reproduces the reference; dropping one layer's chunks, or the
   * dependency of a reduction chunk on its GEMM chunk, fails. A recomputed forward
   * (recompute=full, the blocks of the transformer and Llama) is chunked as the forward is, its
   * chunks tagged as a recomputation: the validator runs them on real buffers too (dropping a
   * recompute chunk, or a reduction chunk's dependency, fails). */
  static const char *const splits[] = {"tp=2,tp-overlap", "tp=2,dp=2,tp-overlap",
                                       "tp=2,pp=2,tp-overlap",
                                       "tp=2,dp=2,zero=1,tp-overlap,dp-overlap"};
  for (gsize m = 0; m < G_N_ELEMENTS(models); m++)
    for (gsize k = 0; k < G_N_ELEMENTS(splits); k++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
        expect_pass(models[m], splits[k], precs[p], NULL);
  extra a = {.drop = "fc2 fwd all-reduce chunk"};
  expect_fail("validate-mlp", "tp=2,tp-overlap", TS_PREC_F64, &a, "missing all-reduce");
  extra b = {.drop = "block.0.fc1 fwd all-gather chunk"};
  expect_fail("validate-transformer", "tp=2,sp,tp-overlap", TS_PREC_F64, &b,
              "before its all-gather chunk");
  extra c = {.nodeps = "block.0.fc2 fwd reduce-scatter chunk"};
  expect_fail("validate-transformer", "tp=2,sp,tp-overlap", TS_PREC_F64, &c, "not computed yet");
  /* The recomputed forward's chunks are its own ops, checked as the forward's are (the MLP and
   * CNN have no blocks, so nothing of theirs is recomputed). */
  extra d = {.drop = "block.0.attention recompute all-reduce chunk"};
  expect_fail("validate-transformer", "tp=2,recompute=full,tp-overlap", TS_PREC_F64, &d,
              "missing all-reduce");
  extra f = {.drop = "block.0.fc1 recompute all-gather chunk"};
  expect_fail("validate-transformer", "tp=2,sp,recompute=full,tp-overlap", TS_PREC_F64, &f,
              "before its all-gather chunk");
  /* Without its dependency on the GEMM chunk, the recompute reduction chunk reads as a
   * collective before the layer's pass; the forward's values are still there, so it meets the
   * token block the forward left and the run stops on it. */
  extra h = {.nodeps = "block.0.fc2 recompute reduce-scatter chunk"};
  expect_fail("validate-transformer", "tp=2,sp,recompute=full,tp-overlap", TS_PREC_F64, &h,
              "execution failed: 'block.0.fc2 recompute reduce-scatter chunk'");
  /* With sequence parallelism the backward's output-gradient gather is chunked with the GEMM
   * that reads it, as Transformer Engine's ring exchange runs it. */
  backward_chunks_reproduce("tp-overlap");
}

/* A copy of validate-transformer with 8 tokens, so cp = 4 has its two chunks per rank. */
static char *transformer_seq8(void)
{
  g_autoptr(GError) err = NULL;
  g_autofree char *text = NULL;
  g_autofree char *src =
      g_build_filename(TS_SOURCE_DIR, "models", "validate-transformer.ini", NULL);
  cr_assert(g_file_get_contents(src, &text, NULL, &err), "%s", err ? err->message : "");
  char *at = strstr(text, "tokens = 4");
  cr_assert_not_null(at);
  at[9] = '8';
  char *path = g_build_filename(g_get_tmp_dir(), "ts-validate-seq8-XXXXXX.ini", NULL);
  int fd = g_mkstemp(path);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  return path;
}

Test(validate, context_parallel_ring_attention_matches_one_processor, .timeout = 60)
{
  /* cp: every rank holds 2 of 2 cp chunks of each sequence (zig-zag), attention goes round
   * the ring (K/V blocks forward, then K/V and their partial gradients backward), merged by
   * online softmax with the causal mask by position in the whole sequence; the gradients are
   * summed over dp x cp. With dp, tp, sp, pp, grouped-query attention and rotary embeddings
   * (positions of the zig-zag chunks), every run reproduces the reference. */
  static const char *const splits[] = {"cp=2",         "cp=2,dp=2",      "tp=2,cp=2",
                                       "tp=2,cp=2,sp", "cp=2,dp=2,pp=2", "tp=2,cp=2,pp=2,sp"};
  static const char *const nets[] = {"validate-transformer", "validate-gqa", "validate-llama"};
  for (gsize m = 0; m < G_N_ELEMENTS(nets); m++)
    for (gsize k = 0; k < G_N_ELEMENTS(splits); k++)
      for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
        expect_pass(nets[m], splits[k], precs[p], NULL);
  expect_pass("validate-llama", "cp=2,dp=2,recompute=op", TS_PREC_F64, NULL);
  /* ZeRO with cp: states owned over dp x cp (the gradient group), each owner its member
   * index there; a dropped gather stops or leaves parameters partly updated. */
  static const char *const zsplits[] = {"cp=2,dp=2,zero=1", "cp=2,dp=2,zero=2", "cp=2,dp=2,zero=3",
                                        "tp=2,cp=2,dp=2,zero=3,sp", "cp=2,dp=2,zero=1,dp-overlap"};
  for (gsize k = 0; k < G_N_ELEMENTS(zsplits); k++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
      expect_pass(k % 2 ? "validate-llama" : "validate-transformer", zsplits[k], precs[p], NULL);
  /* Full and stage recomputation go round the ring again (ops tagged recompute); without the
   * recomputed ring the backward finds the forward dropped. */
  static const char *const rsplits[] = {"cp=2,recompute=full", "tp=2,cp=2,sp,recompute=full",
                                        "cp=2,dp=2,pp=2,recompute=stage",
                                        "cp=2,dp=2,zero=3,recompute=full"};
  for (gsize k = 0; k < G_N_ELEMENTS(rsplits); k++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
      expect_pass(k % 2 ? "validate-transformer" : "validate-llama", rsplits[k], precs[p], NULL);
  extra rc = {.drop = "block.0.attention recompute ring attention block"};
  expect_fail("validate-transformer", "cp=2,recompute=full", TS_PREC_F64, &rc,
              "the ring's forward did not finish");
  extra g = {.drop = "block.0.fc1 param all-gather"};
  expect_fail("validate-transformer", "cp=2,dp=2,zero=3", TS_PREC_F64, &g, "no all-gather");
  extra h = {.drop = "updated param all-gather"};
  expect_fail("validate-gqa", "cp=2,dp=2,zero=1", TS_PREC_F64, &h, NULL);
  g_autofree char *seq8 = transformer_seq8();
  expect_pass(seq8, "cp=4", TS_PREC_F32, NULL);
  expect_pass(seq8, "cp=4,dp=2", TS_PREC_F64, NULL);
  /* Broken rings: a K/V block or a partial gradient that is never sent or received stops the
   * run at its reader; without the gradient all-reduce over dp x cp each cp rank updates with
   * the gradient of its own tokens only, and the numbers are wrong. */
  extra a = {.drop = "block.0.attention cp send K/V"};
  expect_fail("validate-transformer", "cp=2", TS_PREC_F64, &a, "no matching send");
  extra b = {.drop = "block.0.attention cp recv dK/dV"};
  expect_fail("validate-transformer", "cp=2", TS_PREC_F64, &b,
              "the partial K/V gradient to add has not arrived");
  extra c = {.drop = "block.0.attention cp send dK/dV"};
  expect_fail("validate-llama", "tp=2,cp=2,sp", TS_PREC_F32, &c, "no matching send");
  extra d = {.drop = "grad all-reduce head..head"};
  expect_fail("validate-transformer", "cp=2", TS_PREC_F64, &d, NULL);
  expect_fail(seq8, "cp=4", TS_PREC_F64, &a, "no matching send");
  extra f = {.drop = "block.0.attention ring attention block"};
  expect_fail("validate-gqa", "cp=2", TS_PREC_F64, &f, NULL);
  g_unlink(seq8);
  /* Not executed yet: cp with hybrid sharding, servers or selective recomputation. */
  GError *err = NULL;
  ts_validate_result *r =
      vrun("validate-transformer", "cp=2,dp=4,zero=1,shard=2", TS_PREC_F32, NULL, &err);
  cr_assert_null(r);
  cr_assert_not_null(err);
  cr_assert_not_null(strstr(err->message, "not yet with shard"), "%s", err->message);
  g_error_free(err);
}

/* ---- mixture of experts (issue 13) ------------------------------------------------------ */

Test(validate, moe_reference_gradients_match_finite_differences)
{
  /* The MoE reference (router softmax and top-k, capacity drops, gate-weighted combine,
   * shared expert) differentiated by hand, checked against central differences of its own
   * loss in fp64: the split runs share the routing definition with it, so this is what
   * checks the router's and the gates' gradients. The batch must drop copies over capacity. */
  g_autoptr(ts_model) m = load_model("validate-moe");
  double err = 1;
  int dropped = 0;
  GError *e = NULL;
  cr_assert(vd_moe_fd_check(m, 1, 8, &err, &dropped, &e), "%s", e ? e->message : "");
  cr_log_info("moe reference vs finite differences: %.3g normwise, %d copies dropped", err,
              dropped);
  cr_assert_lt(err, 1e-6, "finite differences differ by %g", err);
  cr_assert_gt(dropped, 0, "no token copy was dropped: the capacity is not exercised");
  cr_assert_lt(dropped, 8 * 4 * 2, "every copy dropped");
}

Test(validate, moe_expert_parallel_matches_one_processor, .timeout = 60)
{
  /* Top-2 of 4 fine-grained experts, a shared expert and capacity 1.5 (drops): ep alone, with
   * dp replicas outside the ep groups (expert gradients summed over dp / ep), with tp inside
   * the experts (fc1 column, fc2 row), with gradient accumulation, on 1D and 2D arrays. */
  static const char *const splits[] = {
      "dp=1",           "tp=2",      "dp=2,ep=2",           "dp=4,ep=4",
      "dp=8,ep=2",      "dp=8,ep=4", "tp=2,dp=2,ep=2",      "tp=2,dp=4,ep=2",
      "tp=2,dp=4,ep=4", "tp=4,dp=2", "tp=2@x,dp=4@y,ep=4@y"};
  for (gsize k = 0; k < G_N_ELEMENTS(splits); k++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++) {
      extra x = {0};
      if (strchr(splits[k], '@') != NULL)
        x.topo = "torus:2x4";
      expect_pass("validate-moe", splits[k], precs[p], &x);
    }
  /* ep placed on one dimension of dp's two; tp on a node's switch, ep across nodes. */
  extra torus = {.topo = "torus:4x2"}, sw = {.topo = "switch:2x4"};
  expect_pass("validate-moe", "dp=8@x+y,ep=2@y", TS_PREC_F64, &torus);
  expect_pass("validate-moe", "dp=8@x+y,ep=4@x", TS_PREC_F32, &torus);
  expect_pass("validate-moe", "tp=2@node,dp=4,ep=2", TS_PREC_F32, &sw);
  expect_pass("validate-moe", "dp=8,ep=4", TS_PREC_F64, &sw);
  /* ZeRO 1 and 2: gradients reduce-scattered (the experts' over dp / ep), each owner updates
   * its chunk, the updated dense and expert parameters all-gathered over their groups. */
  static const char *const zero[] = {"dp=4,ep=2,zero=1", "dp=8,ep=2,zero=2", "dp=8,ep=4,zero=1",
                                     "tp=2,dp=4,ep=2,zero=1"};
  for (gsize k = 0; k < G_N_ELEMENTS(zero); k++)
    for (gsize p = 0; p < G_N_ELEMENTS(precs); p++)
      expect_pass("validate-moe", zero[k], precs[p], NULL);
  extra mb = {.micro = 1};
  expect_pass("validate-moe", "dp=4,ep=2", TS_PREC_F64, &mb);
  /* Every algorithm that implements both the all-to-alls and the all-reduces, on a 2D torus
   * (those that do not are refused as bad input, which `-a all` skips). */
  static const ts_coll_algo algos[] = {TS_ALGO_RING, TS_ALGO_TORUS, TS_ALGO_HIERARCHICAL,
                                       TS_ALGO_DIRECT, TS_ALGO_TORUS_DIMWISE};
  for (gsize a = 0; a < G_N_ELEMENTS(algos); a++) {
    extra x = {.topo = "torus:4x2", .algo = algos[a]};
    expect_pass("validate-moe", "tp=2,dp=4,ep=2", TS_PREC_F64, &x);
  }
  expect_pass("validate-moe", "tp=2,dp=2,ep=2", TS_PREC_F32, &mb);
}

Test(validate, moe_unsplit_is_exact_in_fp64)
{
  /* One chip: capacity slots instead of gathered rows, the same kernels per row: the
   * parameters after two steps equal the reference's to rounding of the combine's order. */
  GError *err = NULL;
  g_autoptr(ts_validate_result) r = vrun("validate-moe", "dp=1", TS_PREC_F64, NULL, &err);
  cr_assert_not_null(r);
  g_autofree char *text = describe(r);
  cr_assert(r->passed, "%s", text);
  cr_assert_lt(r->max_rel_err, 1e-15, "%s", text);
  cr_assert_eq(r->ops_coll, 0, "%s", text);
}

Test(validate, moe_dropped_exchanges_fail)
{
  /* Each all-to-all of the trace and the expert-gradient reduction, removed in turn. */
  static const struct {
    const char *split, *drop, *why;
  } cases[] = {
      {"tp=2,dp=4,ep=2", "block.0.fc1 fwd dispatch all-to-all", "its tokens were not dispatched"},
      {"tp=2,dp=4,ep=2", "block.0.fc2 fwd combine all-to-all", "were not combined"},
      {"dp=4,ep=4", "block.0.fc2 bwd combine all-to-all",
       "the gradient of the experts' outputs did not arrive"},
      {"dp=4,ep=4", "block.0.fc1 bwd dispatch all-to-all",
       "the routed experts' and router's input gradients are missing"},
      {"tp=2,dp=4,ep=2", "block.0.fc2 fwd all-reduce", "partial sums (a missing all-reduce)"},
      {"tp=2,dp=4,ep=2", "block.0.fc1 bwd all-reduce", "partial sum (a missing all-reduce)"},
      {"dp=8,ep=2", "grad all-reduce block.0.fc1..block.0.fc1", "block.0.fc1.w' that no"},
      {"tp=2,dp=4,ep=2", "grad all-reduce block.0.fc2..block.0.fc1", "block.0.fc2.w' that no"},
      {"dp=8,ep=2,zero=1", "grad reduce-scatter block.0.fc1..block.0.fc1",
       "it does not own chunk 0 of 4 of 'block.0.fc1.w'"},
      {"dp=8,ep=2,zero=1", "updated expert param all-gather", NULL},
      {"dp=8,ep=2,zero=2", "updated param all-gather", NULL},
      {"dp=4,ep=2", "grad all-reduce block.0.router..block.0.shared_fc2",
       "block.0.router.w' that no"},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    extra x = {.drop = cases[k].drop};
    expect_fail("validate-moe", cases[k].split, TS_PREC_F64, &x, cases[k].why);
  }
}

Test(validate, moe_dropped_dependencies_fail)
{
  /* The walk runs gradient synchronisation as early as it may and the async tp all-reduces as
   * late as they may: a reader that lost its dependency on one runs too soon. */
  static const struct {
    const char *op, *why;
  } cases[] = {
      {"block.0.fc1 bwd dispatch all-to-all", "the experts' input gradient is a partial sum"},
      {"block.0.norm2 bwd", "the shared expert's input gradient is a partial sum"},
      {"grad all-reduce block.0.fc2..block.0.fc1", NULL},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    extra x = {.nodeps = cases[k].op};
    expect_fail("validate-moe", "tp=2,dp=4,ep=2", TS_PREC_F64, &x, cases[k].why);
  }
}

Test(validate, moe_bytes_closed_form)
{
  /* tp=2, dp=4, ep=2, 8 sequences of 4 tokens, width 8, fp32: per chip and step, each of the
   * four all-to-alls carries E x C x mb x d = 4 x 3 x 2 x 8 elements (capacity C = 1.5 x 4 x
   * 2 / 4 = 3 slots per expert per sequence), and the experts' tp all-reduces as many; the
   * direct all-to-all sends (ep - 1) / ep of it. The run checks every chip's bytes against the
   * trace; here the trace's own numbers against the closed form. */
  GError *err = NULL;
  g_autoptr(ts_validate_result) r = vrun("validate-moe", "tp=2,dp=4,ep=2", TS_PREC_F32, NULL, &err);
  cr_assert_not_null(r);
  g_autofree char *text = describe(r);
  cr_assert(r->passed, "%s", text);
  g_autoptr(ts_model) m = load_model("validate-moe");
  g_autoptr(ts_split) s = ts_split_parse("tp=2,dp=4,ep=2", NULL);
  g_autoptr(ts_topo) t = ts_validate_default_topology(8, NULL);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = 8;
  g_autoptr(ts_plan) plan = ts_plan_new(m, t, s, &po, &err);
  cr_assert_not_null(plan);
  g_autoptr(ts_trace) tr = ts_plan_trace(plan, &err);
  cr_assert_not_null(tr);
  const ts_program *p = &tr->programs[ts_trace_program_of(tr, 0)];
  int a2a = 0, tp_expert = 0;
  for (int j = 0; j < p->nops; j++) {
    const ts_op op_ = ts_program_op(p, j), *op = &op_;
    if (op->kind != TS_OP_COLL)
      continue;
    if (op->t_role == TS_ROLE_EP) {
      cr_assert_float_eq(op->bytes, 4.0 * 3 * 2 * 8 * 4, 1e-9, "all-to-all bytes %g", op->bytes);
      a2a++;
    }
    if (op->t_role == TS_ROLE_TP && (op->t_layer - 1 == 4 || op->t_layer - 1 == 5)) {
      cr_assert_float_eq(op->bytes, 4.0 * 3 * 2 * 8 * 4, 1e-9, "expert tp bytes %g", op->bytes);
      tp_expert++;
    }
  }
  cr_assert_eq(a2a, 4);
  cr_assert_eq(tp_expert, 2);
}

Test(validate, moe_refused_splits_and_models)
{
  expect_refused("validate-moe", "dp=2,ep=2,pp=2", NULL, "zero=1|2 only");
  expect_refused("validate-moe", "dp=4,ep=2,zero=3", NULL, "zero=1|2 only");
  expect_refused("validate-moe", "tp=8", NULL, "does not divide");
  extra x = {.drop = "block.0.fc1 fwd dispatch"};
  expect_refused("validate-moe", "dp=2,ep=2", &x, "no op of the trace has this label");
}

/* validate-moe.ini with `from` replaced by `to` (everywhere), written to a temporary file. */
static char *moe_variant(const char *from, const char *to)
{
  g_autoptr(GError) err = NULL;
  g_autofree char *text = NULL;
  g_autofree char *src = g_build_filename(TS_SOURCE_DIR, "models", "validate-moe.ini", NULL);
  cr_assert(g_file_get_contents(src, &text, NULL, &err), "%s", err ? err->message : "");
  cr_assert_not_null(strstr(text, from), "%s", from);
  g_auto(GStrv) parts = g_strsplit(text, from, -1);
  g_autofree char *out = g_strjoinv(to, parts);
  char *path = g_build_filename(g_get_tmp_dir(), "ts-validate-moe-XXXXXX.ini", NULL);
  int fd = g_mkstemp(path);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, out, strlen(out)), (ssize_t)strlen(out));
  close(fd);
  return path;
}

Test(validate_cli, moe_bad_models_exit_2_with_one_line)
{
  /* Expert keys on an explicit layer without experts; a dropless block; capacity slots that
   * are not whole; expert layers routing differently: one line naming the file, exit 2. */
  static const struct {
    const char *from, *to, *needle;
  } cases[] = {
      {"experts = 4\ntop_k = 2\ncapacity_factor = 1.5\ntp = column",
       "top_k = 2\ncapacity_factor = 1.5\ntp = column", "expected experts > 0 with them"},
      {"capacity_factor = 1.5\n", "", "no capacity_factor (dropless)"},
      {"capacity_factor = 1.5\n", "capacity_factor = 1.3\n", "not a whole number of slots"},
      {"top_k = 2\ncapacity_factor = 1.5\nresidual", "top_k = 1\ncapacity_factor = 1.5\nresidual",
       "fc1 and fc2 route differently"},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autofree char *path = moe_variant(cases[k].from, cases[k].to);
    g_autofree char *args = g_strdup_printf("validate -m %s -s dp=2,ep=2", path);
    run_result r = run(args);
    g_unlink(path);
    cr_assert_eq(r.status, 2, "case %zu: exit %d: %s", k, r.status, r.err);
    cr_assert_not_null(strstr(r.err, cases[k].needle), "case %zu: %s", k, r.err);
    cr_assert_not_null(strstr(r.err, "ts-validate-moe-"), "no file named: %s", r.err);
    char *nl = strchr(r.err, '\n');
    cr_assert(nl == NULL || nl[1] == '\0', "more than one line: %s", r.err);
    run_free(&r);
  }
}
