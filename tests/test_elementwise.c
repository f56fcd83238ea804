/* test_elementwise: the element-wise kernels of a software stack (sim/model/ts_elementwise.c):
 * the eager op list's closed forms, FP8 dynamic scaling's bytes, what kernels=eager and
 * precision=fp8 put into the planner's op shapes, the split option, fsdp2's once-per-step
 * gathers under pp, and the cost's serial memory-bound term. */
#include "ts_cost.h"
#include "ts_elementwise.h"
#include "ts_plan.h"
#include "ts_plan_priv.h"
#include "ts_run.h"
#include "ts_test.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static gboolean close_to(double a, double b)
{
  return fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b));
}

static const ts_elem_op *find(const ts_elem_op *ops, int n, const char *name)
{
  for (int j = 0; j < n; j++)
    if (strcmp(ops[j].name, name) == 0)
      return &ops[j];
  return NULL;
}

static int layer_named(const ts_model *m, const char *name)
{
  for (int i = 0; i < m->nlayers; i++)
    if (strcmp(m->layers[i].name, name) == 0)
      return i;
  cr_assert_fail("no layer %s", name);
  return -1;
}

/* Llama 3.1 8B (bf16, T = 8192, h = 4096, 32 heads of 128, 8 KV heads, ffn 14336, vocabulary
 * 128256): every block lists RMSNorm, RoPE, SwiGLU and the residual adds with the documented
 * bytes per element; the logits list the cross-entropy. */
Test(elementwise, llama_op_list_closed_forms)
{
  g_autoptr(ts_model) m = load_model("llama3-8b");
  double T = 8192, h = 4096, D = 2;
  ts_elem_op ops[TS_ELEM_MAX_OPS];
  int n = ts_layer_elementwise_ops(m, &m->layers[layer_named(m, "block.0.norm1")], ops);
  const ts_elem_op *o = find(ops, n, "rmsnorm");
  cr_assert_not_null(o);
  cr_assert(close_to(o->elems, T * h));
  /* fp32 copy 6, pow 8, mean 4, product 8, back to bf16 6, weight 4 = 36; backward 76. */
  cr_assert(close_to(o->eager_fwd_bytes, 36) && close_to(o->eager_bwd_bytes, 76));
  cr_assert(close_to(o->fused_fwd_bytes, 2 * D) && close_to(o->fused_bwd_bytes, 3 * D));
  cr_assert_eq(o->eager_fwd_kernels, 7);
  cr_assert_eq(o->eager_bwd_kernels, 11);

  n = ts_layer_elementwise_ops(m, &m->layers[layer_named(m, "block.0.attention")], ops);
  o = find(ops, n, "rope");
  cr_assert_not_null(o);
  cr_assert(close_to(o->elems, T * 4096 + T * 1024), "Q (32 x 128) and K (8 x 128): %g", o->elems);
  cr_assert(close_to(o->eager_fwd_bytes, 20) && close_to(o->fused_fwd_bytes, 4));
  cr_assert_not_null(find(ops, n, "residual add"));
  cr_assert_null(find(ops, n, "rmsnorm"));

  n = ts_layer_elementwise_ops(m, &m->layers[layer_named(m, "block.0.fc1")], ops);
  o = find(ops, n, "swiglu");
  cr_assert_not_null(o);
  cr_assert(close_to(o->elems, T * 14336), "the gated output, half of fc1's width");
  cr_assert(close_to(o->eager_fwd_bytes - o->fused_fwd_bytes, 2 * D));
  cr_assert(close_to(o->eager_bwd_bytes - o->fused_bwd_bytes, 4 * D));

  n = ts_layer_elementwise_ops(m, &m->layers[layer_named(m, "logits")], ops);
  o = find(ops, n, "cross-entropy");
  cr_assert_not_null(o);
  cr_assert(o->loss);
  cr_assert(close_to(o->elems, T * 128256));

  /* A LayerNorm is one kernel in eager PyTorch: nothing listed for GPT-3's norms. */
  g_autoptr(ts_model) g = load_model("gpt3-1.3b");
  n = ts_layer_elementwise_ops(g, &g->layers[layer_named(g, "block.0.norm1")], ops);
  cr_assert_eq(n, 0);
}

/* FP8 dynamic scaling: 5 bytes per element cast from bf16 (two reads and a one-byte write), 2
 * per transposed FP8 copy. */
Test(elementwise, fp8_scaling_closed_form)
{
  ts_fp8_cost c;
  double m = 1000, n = 300, k = 200;
  ts_fp8_scaling_cost(m, n, k, m, m, 2.0, &c);
  cr_assert(close_to(c.fwd_bytes, 5 * (m * k + k * n)));
  cr_assert(close_to(c.dgrad_bytes, 5 * m * n + 2 * k * n));
  cr_assert(close_to(c.wgrad_bytes, 2 * (m * k + m * n)));
  cr_assert_eq(c.fwd_kernels + c.dgrad_kernels + c.wgrad_kernels, 9);
  /* An input cast on its sequence shard before the all-gather. */
  ts_fp8_scaling_cost(m, n, k, m / 8, m, 2.0, &c);
  cr_assert(close_to(c.fwd_bytes, 5 * (m / 8 * k + k * n)));
  /* A row-parallel output gradient cast on its sequence shard before the float8 all-gather;
   * its transposed copy is of the gathered m rows. */
  ts_fp8_scaling_cost(m, n, k, m, m / 8, 2.0, &c);
  cr_assert(close_to(c.dgrad_bytes, 5 * m / 8 * n + 2 * k * n));
  cr_assert(close_to(c.wgrad_bytes, 2 * (m * k + m * n)));
  ts_fp8_scaling_cost(0, n, k, 0, 0, 2.0, &c);
  cr_assert(c.fwd_bytes == 0 && c.dgrad_bytes == 0 && c.wgrad_bytes == 0);
}

/* The cost adds elem_bytes at achieved bandwidth, after the op's own time, for every class. */
Test(elementwise, cost_adds_the_serial_memory_term)
{
  ts_chip c = {0};
  c.peak_flops = 1e15;
  c.memory_bw_Bps = 2e12;
  c.compute_efficiency = 0.5;
  c.memory_bw_efficiency = 0.8;
  ts_op_shape s = {.oclass = TS_OPC_GEMM, .kernels = 1, .m = 4096, .n = 4096, .k = 4096};
  double base = ts_cost_device(&c, 1e12, 1e6, &s);
  s.elem_bytes = 1.6e9;
  cr_assert(close_to(ts_cost_device(&c, 1e12, 1e6, &s) - base, 1.6e9 / (2e12 * 0.8)));
  ts_op_shape mshape = {.oclass = TS_OPC_MEMORY, .kernels = 1};
  base = ts_cost_device(&c, 0, 1e9, &mshape);
  mshape.elem_bytes = 1e9;
  cr_assert(close_to(ts_cost_device(&c, 0, 1e9, &mshape), 2 * base));
}

static ts_plan *plan_of(const char *topo, const char *model, const char *split, gint64 batch,
                        gint64 mb, ts_topo **t_out, ts_model **m_out)
{
  *t_out = load_topo(topo);
  *m_out = load_model(model);
  return make_plan(*m_out, *t_out, split, batch, mb);
}

/* kernels=eager puts (eager - fused) x elements into the layer's op shapes; fused adds nothing;
 * recompute=op runs a GEMM layer's forward extra again in its backward; loss=eager alone costs
 * the cross-entropy. */
Test(elementwise, planner_shapes_carry_the_eager_bytes)
{
  ts_topo *t;
  ts_model *m;
  double mb = 2, T = 8192, h = 4096;
  ts_plan *p = plan_of("dgx-h100-4node", "llama3-8b", "dp=32,zero=3,kernels=eager", 64, 2, &t, &m);
  int norm = layer_named(m, "block.3.norm2"), fc1 = layer_named(m, "block.3.fc1");
  ts_op_shape s;
  ts_plan_layer_shape(p, norm, mb, TS_PASS_FWD, &s);
  cr_assert(close_to(s.elem_bytes, (36 - 4) * T * h * mb), "norm forward %g", s.elem_bytes);
  cr_assert_eq(s.kernels, 1 + 6);
  ts_plan_layer_shape(p, norm, mb, TS_PASS_BWD, &s);
  cr_assert(close_to(s.elem_bytes, (76 - 6) * T * h * mb));
  ts_plan_layer_shape(p, fc1, mb, TS_PASS_BWD, &s);
  cr_assert(close_to(s.elem_bytes, 8 * T * 14336 * mb), "swiglu backward %g", s.elem_bytes);
  ts_plan_free(p);
  ts_model_free(m);
  ts_topo_free(t);

  p = plan_of("dgx-h100-4node", "llama3-8b", "dp=32,zero=3,recompute=op,kernels=eager", 64, 2, &t,
              &m);
  ts_plan_layer_shape(p, fc1, mb, TS_PASS_BWD, &s);
  cr_assert(close_to(s.elem_bytes, (8 + 4) * T * 14336 * mb), "op policy: forward again %g",
            s.elem_bytes);
  ts_plan_free(p);
  ts_model_free(m);
  ts_topo_free(t);

  p = plan_of("dgx-h100-4node", "llama3-8b", "dp=32,zero=3,loss=eager", 64, 2, &t, &m);
  ts_plan_layer_shape(p, norm, mb, TS_PASS_FWD, &s);
  cr_assert(s.elem_bytes == 0, "fused kernels add nothing: %g", s.elem_bytes);
  ts_plan_layer_shape(p, layer_named(m, "logits"), mb, TS_PASS_FWD, &s);
  cr_assert(close_to(s.elem_bytes, 16 * T * 128256 * mb), "eager loss %g", s.elem_bytes);
  ts_plan_free(p);
  ts_model_free(m);
  ts_topo_free(t);
}

/* kernels=eager-fused-rmsnorm (TorchTitan's norm_type = "fused_rmsnorm"): the norm carries no
 * eager extra (its fused Triton kernel moves what trainsim's norm op costs), every other op
 * carries kernels=eager's. */
Test(elementwise, fused_rmsnorm_drops_only_the_norm_extra)
{
  ts_topo *t;
  ts_model *m;
  double mb = 2, T = 8192;
  ts_plan *p = plan_of("dgx-h100-4node", "llama3-8b",
                       "dp=32,zero=3,recompute=op,kernels=eager-fused-rmsnorm", 64, 2, &t, &m);
  int norm = layer_named(m, "block.3.norm2"), fc1 = layer_named(m, "block.3.fc1");
  ts_op_shape s;
  for (int pass = TS_PASS_FWD; pass <= TS_PASS_BWD; pass++) {
    ts_plan_layer_shape(p, norm, mb, (ts_pass)pass, &s);
    cr_assert(s.elem_bytes == 0, "norm pass %d: %g", pass, s.elem_bytes);
  }
  ts_plan_layer_shape(p, fc1, mb, TS_PASS_BWD, &s);
  cr_assert(close_to(s.elem_bytes, (8 + 4) * T * 14336 * mb), "swiglu %g", s.elem_bytes);
  ts_plan_free(p);
  ts_model_free(m);
  ts_topo_free(t);
  g_autoptr(GError) e = NULL;
  g_autoptr(ts_split) sp = ts_split_parse("dp=8,kernels=eager-fused-rmsnorm", &e);
  cr_assert_not_null(sp);
  cr_assert_eq(sp->kernels, 1 + TS_KERNELS_EAGER_FUSED_RMSNORM);
  cr_assert_str_eq(ts_kernels_mode_name(TS_KERNELS_EAGER_FUSED_RMSNORM), "eager-fused-rmsnorm");
}

/* precision=fp8: an FP8 layer's forward shape carries the input and weight casts. */
Test(elementwise, fp8_shapes_carry_the_casts)
{
  ts_topo *t;
  ts_model *m;
  ts_plan *p = plan_of("dgx-h100-4node", "llama3-8b", "dp=32,zero=3,precision=fp8", 64, 2, &t, &m);
  int fc2 = layer_named(m, "block.0.fc2");
  ts_op_shape s;
  ts_plan_layer_shape(p, fc2, 2, TS_PASS_FWD, &s);
  double M = 2 * 8192, K = 14336, N = 4096;
  cr_assert(close_to(s.elem_bytes, 5 * (M * K + K * N)), "fc2 casts %g", s.elem_bytes);
  ts_plan_layer_shape(p, fc2, 2, TS_PASS_WGRAD, &s);
  cr_assert(close_to(s.elem_bytes, 2 * (M * K + M * N)));
  /* The logits stay bf16: no casts. */
  ts_plan_layer_shape(p, layer_named(m, "logits"), 2, TS_PASS_FWD, &s);
  cr_assert(s.elem_bytes == 0);
  ts_plan_free(p);
  ts_model_free(m);
  ts_topo_free(t);
}

/* fsdp2 (TorchTitan's Llama): the attention's wq, wk, wv and the gated MLP's w1, w3 are
 * separate linears sharing one input, so their backward writes three (two) input gradients
 * that autograd sums: 4 (2) x rows x hidden x D bytes beyond one fused GEMM's gradient, in the
 * input-gradient pass only, rows being the tokens the chip's GEMMs see (gathered over tp under
 * sp, 1 / cp of the sequence under cp). Without fsdp2 (Megatron-LM's fused linear_qkv and
 * linear_fc1) nothing; the down projection (one linear) and the logits nothing either. */
Test(elementwise, fsdp2_sums_the_separate_projections_input_gradients)
{
  double mb = 2, T = 8192, h = 4096, D = 2;
  const char *splits[] = {"dp=32,zero=3", "dp=32,zero=3,fsdp2",
                          "tp=8@node,dp=4@net,sp,zero=3,fsdp2",
                          "tp=8@node,cp=2@net,dp=2@net,sp,zero=3,fsdp2"};
  double rows[] = {0, T * mb, T * mb, T * mb / 2};
  for (int v = 0; v < 4; v++) {
    ts_topo *t;
    ts_model *m;
    ts_plan *p = plan_of("dgx-h100-4node", "llama3-8b", splits[v], 64, 2, &t, &m);
    int attn = layer_named(m, "block.2.attention"), fc1 = layer_named(m, "block.2.fc1"),
        fc2 = layer_named(m, "block.2.fc2");
    ts_op_shape s;
    double base[3];
    ts_pass passes[] = {TS_PASS_BWD, TS_PASS_DGRAD};
    for (int k = 0; k < 2; k++) {
      ts_plan_layer_shape(p, attn, mb, passes[k], &s);
      base[0] = s.elem_bytes;
      ts_plan_layer_shape(p, fc1, mb, passes[k], &s);
      base[1] = s.elem_bytes;
      ts_plan_layer_shape(p, fc2, mb, passes[k], &s);
      base[2] = s.elem_bytes;
      cr_assert(close_to(base[0], 4 * rows[v] * h * D) || (rows[v] == 0 && base[0] == 0),
                "%s attention pass %d: %g", splits[v], passes[k], base[0]);
      cr_assert(close_to(base[1], 2 * rows[v] * h * D) || (rows[v] == 0 && base[1] == 0),
                "%s fc1 pass %d: %g", splits[v], passes[k], base[1]);
      cr_assert(base[2] == 0, "%s fc2 pass %d: %g", splits[v], passes[k], base[2]);
    }
    ts_plan_layer_shape(p, attn, mb, TS_PASS_FWD, &s);
    cr_assert(s.elem_bytes == 0, "%s forward: %g", splits[v], s.elem_bytes);
    ts_plan_layer_shape(p, attn, mb, TS_PASS_WGRAD, &s);
    cr_assert(s.elem_bytes == 0, "%s weight gradient: %g", splits[v], s.elem_bytes);
    ts_plan_free(p);
    ts_model_free(m);
    ts_topo_free(t);
  }
}

/* projections= states the sums fsdp2 implied: separate on any GPU split (plain DDP, ZeRO-3,
 * tensor parallel with sp) adds to the input-gradient pass of the attention 4 x rows x hidden x
 * D bytes and one kernel, of a gated MLP's fc1 2 x rows x hidden x D, where rows are the
 * tokens the chip's GEMMs see (T x mb: whole sequences under dp, gathered over tp under sp);
 * fused under fsdp2 drops them (Megatron-LM's linear_qkv and gated linear_fc1). The down
 * projection and the forward never change; the plan names the option only where it departs
 * from fsdp2's default. */
Test(elementwise, projections_option_states_the_input_gradient_sums)
{
  double mb = 2, T = 8192, h = 4096, D = 2;
  static const struct {
    const char *split;
    double rows;
    const char *named;
  } v[] = {
      {"dp=32,projections=separate", 8192 * 2, "projections=separate"},
      {"dp=32,projections=fused", 0, NULL},
      {"dp=32,zero=3,projections=separate", 8192 * 2, "projections=separate"},
      {"tp=8@node,dp=4@net,sp,projections=separate", 8192 * 2, "projections=separate"},
      {"dp=32,zero=3,fsdp2,projections=fused", 0, "projections=fused"},
      {"dp=32,zero=3,fsdp2,projections=separate", 8192 * 2, NULL},
  };
  for (size_t k = 0; k < G_N_ELEMENTS(v); k++) {
    ts_topo *t, *t0;
    ts_model *m, *m0;
    ts_plan *p = plan_of("dgx-h100-4node", "llama3-8b", v[k].split, 64, 2, &t, &m);
    /* The same split without the option (the sums' baseline): its degrees and ZeRO stage. */
    g_autofree char *base = g_strdup(v[k].split);
    *strstr(base, ",projections=") = '\0';
    ts_plan *q = plan_of("dgx-h100-4node", "llama3-8b", base, 64, 2, &t0, &m0);
    gboolean base_sums = strstr(base, "fsdp2") != NULL;
    int attn = layer_named(m, "block.2.attention"), fc1 = layer_named(m, "block.2.fc1"),
        fc2 = layer_named(m, "block.2.fc2");
    ts_op_shape s, s0;
    double want[3] = {4 * v[k].rows * h * D, 2 * v[k].rows * h * D, 0};
    double had[3] = {base_sums ? 4 * T * mb * h * D : 0, base_sums ? 2 * T * mb * h * D : 0, 0};
    int layer[3] = {attn, fc1, fc2};
    for (int j = 0; j < 3; j++) {
      ts_plan_layer_shape(p, layer[j], mb, TS_PASS_BWD, &s);
      ts_plan_layer_shape(q, layer[j], mb, TS_PASS_BWD, &s0);
      double extra = s.elem_bytes - (s0.elem_bytes - had[j]);
      cr_assert(close_to(extra, want[j]) || (want[j] == 0 && fabs(extra) < 1e-6),
                "%s layer %d: %g bytes, expected %g", v[k].split, layer[j], extra, want[j]);
      int dk = s.kernels - s0.kernels + (had[j] > 0);
      cr_assert_eq(dk, want[j] > 0 ? 1 : 0, "%s layer %d: %d kernels more", v[k].split, layer[j],
                   dk);
      ts_plan_layer_shape(p, layer[j], mb, TS_PASS_FWD, &s);
      ts_plan_layer_shape(q, layer[j], mb, TS_PASS_FWD, &s0);
      cr_assert(s.elem_bytes == s0.elem_bytes, "%s forward", v[k].split);
    }
    if (v[k].named != NULL)
      cr_assert(strstr(p->split_text, v[k].named) != NULL, "%s: %s", v[k].split, p->split_text);
    else
      cr_assert(strstr(p->split_text, "projections") == NULL, "%s: %s", v[k].split, p->split_text);
    ts_plan_free(p), ts_plan_free(q);
    ts_model_free(m), ts_model_free(m0);
    ts_topo_free(t), ts_topo_free(t0);
  }
  g_autoptr(GError) e = NULL;
  g_autoptr(ts_split) bad = ts_split_parse("dp=8,projections=split", &e);
  cr_assert_null(bad);
  cr_assert(strstr(e->message, "item 'projections=split': expected projections=fused") != NULL,
            "%s", e->message);
}

/* The split option: parsed, canonical, and a bad value is one line naming it. */
Test(elementwise, split_option)
{
  g_autoptr(GError) e = NULL;
  g_autoptr(ts_split) s = ts_split_parse("dp=8,kernels=eager", &e);
  cr_assert_not_null(s);
  cr_assert_eq(s->kernels, 1 + TS_KERNELS_EAGER);
  g_autoptr(ts_split) bad = ts_split_parse("dp=8,kernels=jit", &e);
  cr_assert_null(bad);
  cr_assert(strstr(e->message, "kernels=jit") != NULL && strstr(e->message, "eager") != NULL, "%s",
            e->message);
  cr_assert_str_eq(ts_kernels_mode_name(TS_KERNELS_FUSED), "fused");
}

/* Program 0's one op carrying exactly this trace label (asserted to be one). */
static ts_op only_op_labelled(const ts_trace *tr, const char *label)
{
  const ts_program *pr = &tr->programs[0];
  ts_op found = {0};
  int n = 0;
  for (int k = 0; k < pr->nops; k++) {
    ts_op op = ts_program_op(pr, k);
    if (op.label >= 0 && op.label < (int)tr->labels->len &&
        strcmp((const char *)g_ptr_array_index(tr->labels, op.label), label) == 0)
      found = op, n++;
  }
  cr_assert_eq(n, 1, "%d ops labelled '%s'", n, label);
  return found;
}

static int count_label(const ts_trace *tr, int prog, const char *needle)
{
  int n = 0;
  const ts_program *pr = &tr->programs[prog];
  for (int k = 0; k < pr->nops; k++)
    if (ts_program_op(pr, k).kind == TS_OP_COLL &&
        strstr((const char *)g_ptr_array_index(tr->labels, ts_program_op(pr, k).label), needle) !=
            NULL)
      n++;
  return n;
}

/* zero=3 under pp: DeepSpeed-style ZeRO-3 gathers a stage's parameters in every forward and
 * backward pass of every micro-batch; fsdp2 (TorchTitan) gathers them once, in the stage's
 * first forward, and reduce-scatters the gradients once, after its last backward. */
Test(elementwise, fsdp2_under_pp_gathers_once_per_step)
{
  const char *z3 = "tp=4@node,dp=2@node,pp=4@net,zero=3";
  const char *f2 = "tp=4@node,dp=2@node,pp=4@net,zero=3,fsdp2";
  int gathers[2], scatters[2];
  for (int v = 0; v < 2; v++) {
    ts_topo *t;
    ts_model *m;
    ts_plan *p = plan_of("dgx-h100-4node", "llama3-8b", v ? f2 : z3, 64, 4, &t, &m);
    g_autoptr(GError) error = NULL;
    g_autoptr(ts_trace) tr = ts_plan_trace(p, &error);
    cr_assert_not_null(tr, "%s", error != NULL ? error->message : "");
    gathers[v] = count_label(tr, 1, "param all-gather");
    scatters[v] = count_label(tr, 1, "reduce-scatter");
    ts_plan_free(p);
    ts_model_free(m);
    ts_topo_free(t);
  }
  /* 8 micro-batches: 8 forward and 8 backward passes of the stage's layers. */
  cr_assert(gathers[1] > 0 && gathers[0] == 16 * gathers[1], "zero=3 %d, fsdp2 %d", gathers[0],
            gathers[1]);
  cr_assert(scatters[1] > 0 && scatters[0] == 8 * scatters[1], "zero=3 %d, fsdp2 %d", scatters[0],
            scatters[1]);
}

/* ResNet-50's batch norms (fp16, D = 2): the norm op costs batch norm's two passes (3 map
 * passes forward; 5 backward, the ReLU's gate read and the shortcut's gradient written), and
 * kernels=eager adds torchvision's own ReLU (2D forward, 3D backward less the gate D) and
 * residual add kernels (3D each way less the fused D). layer1.0: 64 x 56 x 56 after bn1 and
 * bn2, 256 x 56 x 56 after bn3 (which adds the shortcut). */
Test(elementwise, batch_norm_passes_and_eager_relu_and_add)
{
  g_autoptr(ts_model) m = load_model("resnet50");
  double D = 2, e1 = 64.0 * 56 * 56, e3 = 256.0 * 56 * 56;
  const ts_layer *bn1 = &m->layers[layer_named(m, "layer1.0.bn1")];
  const ts_layer *bn3 = &m->layers[layer_named(m, "layer1.0.bn3")];
  const ts_layer *ds = &m->layers[layer_named(m, "layer1.0.downsample.1")];
  cr_assert(bn1->batch_norm && bn1->relu && !bn1->residual);
  cr_assert(bn3->batch_norm && bn3->relu && bn3->residual);
  cr_assert(ds->batch_norm && !ds->relu && !ds->residual);
  cr_assert(close_to(bn1->fwd_mem_bytes, D * (2 * 64 + 3 * e1)), "%g", bn1->fwd_mem_bytes);
  cr_assert(close_to(bn1->bwd_mem_bytes, D * (4 * 64 + 6 * e1)), "%g", bn1->bwd_mem_bytes);
  cr_assert(close_to(bn3->fwd_mem_bytes, D * (2 * 256 + 4 * e3)), "%g", bn3->fwd_mem_bytes);
  cr_assert(close_to(bn3->bwd_mem_bytes, D * (4 * 256 + 7 * e3)), "%g", bn3->bwd_mem_bytes);
  cr_assert(close_to(ds->bwd_mem_bytes, D * (4 * 256 + 5 * e3)), "%g", ds->bwd_mem_bytes);

  ts_elem_op ops[TS_ELEM_MAX_OPS];
  int n = ts_layer_elementwise_ops(m, bn3, ops);
  cr_assert_eq(n, 2);
  const ts_elem_op *relu = find(ops, n, "relu"), *add = find(ops, n, "residual add");
  cr_assert(relu != NULL && add != NULL);
  cr_assert(close_to(relu->elems, e3) && close_to(add->elems, e3));
  cr_assert(close_to(relu->eager_fwd_bytes - relu->fused_fwd_bytes, 2 * D));
  cr_assert(close_to(relu->eager_bwd_bytes - relu->fused_bwd_bytes, 2 * D));
  cr_assert(close_to(add->eager_fwd_bytes - add->fused_fwd_bytes, 2 * D));
  cr_assert(close_to(add->eager_bwd_bytes - add->fused_bwd_bytes, 2 * D));
  cr_assert_eq(ts_layer_elementwise_ops(m, ds, ops), 0);

  /* The planner: kernels=eager puts 4D + 4D per element into bn3's forward (2 more kernels). */
  ts_topo *t;
  ts_model *pm;
  double mb = 32;
  ts_plan *p = plan_of("dgx-a100-1node", "resnet50", "dp=8,kernels=eager", 256, 32, &t, &pm);
  ts_op_shape s;
  ts_plan_layer_shape(p, layer_named(pm, "layer1.0.bn3"), mb, TS_PASS_FWD, &s);
  cr_assert(close_to(s.elem_bytes, 4 * D * e3 * mb), "bn3 forward %g", s.elem_bytes);
  cr_assert_eq(s.kernels, 1 + 2);
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);
  p = plan_of("dgx-a100-1node", "resnet50", "dp=8", 256, 32, &t, &pm);
  ts_plan_layer_shape(p, layer_named(pm, "layer1.0.bn3"), mb, TS_PASS_BWD, &s);
  cr_assert(s.elem_bytes == 0, "fused: nothing beyond the norm op, %g", s.elem_bytes);
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);
}

/* [model] optimizer = sgd: torch.optim.SGD keeps one momentum buffer per parameter, fp32, with
 * an fp32 master copy beside the 16-bit weights in mixed precision: 8 bytes of optimizer state
 * per parameter for ResNet-50 in fp16 (Adam's would be 12), 4 for ResNet-101 in fp32 (Adam's 8);
 * ZeRO-1 divides it by dp. Llama (Adam) keeps 12. */
Test(elementwise, sgd_optimizer_state_and_step_are_one_momentum)
{
  ts_topo *t;
  ts_model *pm;
  ts_plan *p = plan_of("dgx-a100-1node", "resnet50", "dp=8", 256, 32, &t, &pm);
  double psi = ts_model_params(pm);
  cr_assert(close_to(ts_plan_optimizer_bytes_per_param(pm), 8.0));
  cr_assert(close_to(p->mem.optimizer / psi, 8.0), "%g bytes per parameter",
            p->mem.optimizer / psi);
  cr_assert(close_to(p->mem.params / psi, 2.0) && close_to(p->mem.grads / psi, 2.0));
  /* The step reads and writes that one momentum too: 5 FLOP and 2D + 2K + around bytes a
   * parameter (K = 8, not Adam's 12), whatever else the step does around it. */
  g_autoptr(GError) error = NULL;
  g_autoptr(ts_trace) tr = ts_plan_trace(p, &error);
  cr_assert_not_null(tr, "%s", error != NULL ? error->message : "");
  cr_assert(close_to(ts_plan_optimizer_flops_per_param(pm), 5.0));
  ts_op op = only_op_labelled(tr, "optimizer step");
  cr_assert(close_to(op.flops / psi, 5.0), "%g FLOP a parameter", op.flops / psi);
  cr_assert(close_to(op.mem_bytes / psi, 2 * 2.0 + 2 * 8.0 + 2.0 + 28.0), "%g bytes a parameter",
            op.mem_bytes / psi);
  ts_plan_free(p);
  p = make_plan(pm, t, "dp=8,zero=1", 256, 32);
  cr_assert(close_to(p->mem.optimizer / psi, 1.0), "8 / dp: %g", p->mem.optimizer / psi);
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);

  p = plan_of("dgx-a100-1node", "resnet101", "dp=8", 256, 32, &t, &pm);
  psi = ts_model_params(pm);
  cr_assert(close_to(p->mem.optimizer / psi, 4.0), "fp32: %g", p->mem.optimizer / psi);
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);

  p = plan_of("dgx-a100-1node", "llama3-8b", "dp=8", 8, 1, &t, &pm);
  psi = ts_model_params(pm);
  cr_assert(close_to(p->mem.optimizer / psi, 12.0), "Adam: %g", p->mem.optimizer / psi);
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);
}

/* [model] optimizer = sgd under kernels=eager on a GPU: torch.optim's per-tensor loop.
 * ResNet-50's tensors: 53 bias-free convolutions x 5 ops (weight decay, the velocity's mul_ and
 * add_, the parameter's add_, zero_grad's zero_), 53 batch norms x 2 tensors x 4 (no weight
 * decay), the classifier's weight and bias x 5: 699 ops, plus GradScaler's unscale and update
 * with fp16 (701), at 6.7 us of host time each. fp16 waits for the device first (the
 * found-inf read-back), fp32 does not; kernels=fused keeps the multi-tensor step's 4 launches;
 * a model without the key (Adam) is unchanged. */
Test(elementwise, sgd_loop_ops_and_the_loss_scaler_sync)
{
  ts_topo *t;
  ts_model *pm;
  ts_op_shape s;
  ts_plan *p = plan_of("dgx-a100-1node", "resnet50", "dp=8,kernels=eager", 256, 32, &t, &pm);
  cr_assert_eq(pm->optimizer, TS_OPT_SGD);
  cr_assert(pm->fp16);
  ts_plan_optimizer_shape(&s);
  ts_plan_sgd_loop_shape(p, 0, &s);
  cr_assert_eq(s.kernels, 701);
  cr_assert(close_to(s.host_op_us, 6.7));
  cr_assert(ts_cost_op_syncs(&s));
  cr_assert(close_to(ts_cost_launch(&t->chip, 1, 1, &s), 701 * 6.7e-6));
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);

  p = plan_of("dgx-a100-1node", "resnet50", "dp=8,precision=fp32,kernels=eager", 256, 32, &t, &pm);
  ts_plan_optimizer_shape(&s);
  ts_plan_sgd_loop_shape(p, 0, &s);
  cr_assert_eq(s.kernels, 699);
  cr_assert(!ts_cost_op_syncs(&s), "no loss scaler in fp32: nothing read back");
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);

  p = plan_of("dgx-a100-1node", "resnet50", "dp=8", 256, 32, &t, &pm);
  ts_plan_optimizer_shape(&s);
  ts_plan_sgd_loop_shape(p, 0, &s);
  cr_assert_eq(s.kernels, 4);
  cr_assert(s.host_op_us == 0 && ts_cost_op_syncs(&s));
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);

  p = plan_of("dgx-a100-1node", "llama3-8b", "dp=8,kernels=eager", 8, 1, &t, &pm);
  cr_assert_eq(pm->optimizer, TS_OPT_ADAM);
  ts_plan_optimizer_shape(&s);
  ts_plan_sgd_loop_shape(p, 0, &s);
  cr_assert(s.kernels == 4 && s.host_op_us == 0 && ts_cost_op_syncs(&s));
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);
}

/* precision=fp32 on a 16-bit model (ResNet-50's dtype = fp16) is FP32 training: the plan reads
 * the model again as fp32 (ts_plan.c), so a batch norm's traffic and what it keeps are 4 bytes
 * an element, twice the AMP plan's: forward 3 map passes (3 x 4 x 64 x 56 x 56 bytes an image
 * for layer1.0.bn1, plus its 128 fp32 parameters) and its eager ReLU's 2 passes more; the model
 * the caller holds stays fp16. A model written in fp32 is not read again. */
Test(elementwise, fp32_precision_moves_four_byte_activations)
{
  ts_topo *t;
  ts_model *pm;
  ts_op_shape s16, s32;
  ts_plan *p = plan_of("dgx1-v100", "resnet50", "dp=8,kernels=eager", 256, 32, &t, &pm);
  int bn = layer_named(pm, "layer1.0.bn1");
  double e = 64.0 * 56 * 56;
  ts_plan_layer_shape(p, bn, 32, TS_PASS_FWD, &s16);
  cr_assert(p->own_fp32 == NULL && p->model == pm);
  ts_plan_free(p);
  p = make_plan(pm, t, "dp=8,kernels=eager,precision=fp32", 256, 32);
  cr_assert_not_null(p->own_fp32);
  cr_assert(p->model == p->own_fp32 && p->model->dtype_bytes == 4.0 && !p->model->fp16);
  cr_assert(pm->dtype_bytes == 2.0 && pm->fp16, "the caller's model is unchanged");
  const ts_layer *l16 = &pm->layers[bn], *l32 = &p->model->layers[bn];
  double fwd = l32->fwd_mem_bytes;
  cr_assert(close_to(fwd, 4.0 * (128 + 3 * e)), "fp32 forward %g bytes an image", fwd);
  cr_assert(close_to(l32->saved_act_bytes, 2 * l16->saved_act_bytes));
  cr_assert(close_to(l32->bwd_mem_bytes, 2 * l16->bwd_mem_bytes));
  ts_plan_layer_shape(p, bn, 32, TS_PASS_FWD, &s32);
  cr_assert(close_to(s32.elem_bytes, 2 * s16.elem_bytes), "eager ReLU %g against %g bytes",
            s32.elem_bytes, s16.elem_bytes);
  cr_assert(s16.elem_bytes > 0);
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);
  /* A model already in fp32 keeps its own. */
  p = plan_of("dgx1-v100", "validate-cnn", "dp=8,precision=fp32", 64, 8, &t, &pm);
  cr_assert(pm->dtype_bytes == 4.0 && p->own_fp32 == NULL && p->model == pm);
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);
}

/* optimizer=bertadam: BertAdam's Python loop over BERT-Large's tensors (sim/plan/ts_plan.c,
 * ts_plan_bertadam_shape). Tensors: the embeddings' 3 tables (decayed, 20 kernels each) and
 * their LayerNorm (2 x 18); per layer the attention's 4 weights (20) and 4 biases (18), two
 * LayerNorms (4 x 18), the two dense layers' weights (2 x 20) and biases (2 x 18): 300 a layer,
 * 7,200 for 24; the head's transform (20 + 18) and LayerNorm (2 x 18), the tied decoder's bias
 * (18), the pooler (20 + 18); and GradientClipper's 3: 7,429 kernels at 6.7 us of host time.
 * Bytes: 136 a decayed element, 116 a bias or LayerNorm one, 12 the global clip's on every one:
 * 148 P - 20 B, with B the 356,154 elements of biases and LayerNorms (2,048 + 24 x 13,312 +
 * 1,024 + 2,048 + 30,522 + 1,024). The clipper reads its norm back: the step waits for the
 * backward. SGD and ZeRO are refused; SGD's refusal says the split does not apply to that model
 * (a sweep over models skips it). */
Test(elementwise, bertadam_loop_tensors_kernels_and_bytes)
{
  ts_topo *t;
  ts_model *pm;
  ts_op_shape s;
  ts_plan *p =
      plan_of("dgx1-v100", "bert-large", "dp=8,precision=fp32,optimizer=bertadam", 64, 8, &t, &pm);
  double P = ts_model_params(pm), B = 2048.0 + 24 * 13312.0 + 1024.0 + 2048.0 + 30522.0 + 1024.0;
  cr_assert(close_to(P, 336224058.0), "%.0f parameters", P);
  ts_plan_optimizer_shape(&s);
  double bytes = ts_plan_bertadam_shape(p, 0, &s);
  cr_assert_eq(s.kernels, 7429);
  cr_assert(close_to(s.host_op_us, 6.7));
  cr_assert(ts_cost_op_syncs(&s), "GradientClipper's .item(): the host waits");
  cr_assert(close_to(bytes, 148.0 * P - 20.0 * B), "%g bytes, %g a parameter", bytes, bytes / P);
  g_autoptr(ts_trace) tr = trace_of(p);
  ts_op op = only_op_labelled(tr, "optimizer step");
  cr_assert(close_to(op.mem_bytes, bytes), "%g bytes in the trace", op.mem_bytes);
  ts_plan_free(p);
  g_autoptr(GError) zero = plan_refusal(pm, t, "dp=8,zero=1,optimizer=bertadam", 64, 8);
  cr_assert_not_null(strstr(zero->message, "optimizer=bertadam"), "%s", zero->message);
  cr_assert_eq(zero->code, TS_ERROR_INPUT, "a bad split in every configuration");
  ts_model_free(pm);
  ts_topo_free(t);

  p = plan_of("dgx1-v100", "resnet50", "dp=8", 512, 64, &t, &pm);
  ts_plan_free(p);
  g_autoptr(GError) sgd = plan_refusal(pm, t, "dp=8,optimizer=bertadam", 512, 64);
  cr_assert_not_null(strstr(sgd->message, "optimizer = adam"), "%s", sgd->message);
  cr_assert_eq(sgd->code, TS_ERROR_INVALID, "a sweep over models skips the SGD one");
  ts_model_free(pm);
  ts_topo_free(t);
}

/* The first convolution's 3 colour channels pad to 4 for a GPU's 16-bit tensor cores (stride
 * 2: NVIDIA's Convolutional Layers User's Guide); 64 channels do not pad. The padded op costs
 * what the unpadded one would with 4/3 the work on a 4/3 longer reduction; in fp32 (CUDA cores)
 * the padding is not costed. */
Test(elementwise, first_conv_channels_pad_for_tensor_cores)
{
  ts_topo *t;
  ts_model *pm;
  ts_op_shape s, u;
  ts_plan *p = plan_of("dgx-a100-1node", "resnet50", "dp=8", 256, 32, &t, &pm);
  ts_plan_layer_shape(p, layer_named(pm, "conv1"), 32, TS_PASS_FWD, &s);
  cr_assert(close_to(s.chan_pad, 4.0 / 3.0), "%g", s.chan_pad);
  ts_plan_layer_shape(p, layer_named(pm, "layer1.0.conv1"), 32, TS_PASS_FWD, &u);
  cr_assert(u.chan_pad == 0);
  const ts_layer *l = &pm->layers[layer_named(pm, "conv1")];
  double f = l->fwd_flops * 32;
  u = s;
  u.chan_pad = 0, u.k = s.k * 4.0 / 3.0;
  cr_assert(
      close_to(ts_cost_device(&t->chip, f, 0, &s), ts_cost_device(&t->chip, f * 4 / 3, 0, &u)));
  u = s;
  u.chan_pad = 0;
  /* 4/3 the work, its longer reduction a little nearer the rate (gemm_k_overhead): 1.18x. */
  cr_assert(ts_cost_device(&t->chip, f, 0, &s) > 1.1 * ts_cost_device(&t->chip, f, 0, &u));
  s.prec = u.prec = TS_PRECISION_FP32;
  cr_assert(ts_cost_device(&t->chip, f, 0, &s) == ts_cost_device(&t->chip, f, 0, &u));
  ts_plan_free(p);
  ts_model_free(pm);
  ts_topo_free(t);
}
