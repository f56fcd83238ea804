/* ts_plan: validity, per-layer execution, pipeline stages and per-chip memory of a split.
 *
 * Tensor parallelism follows Megatron-LM (Shoeybi et al. 2019, section 3): a column-split
 * layer takes a replicated input and leaves its output split; a row-split layer takes a split
 * input and all-reduces its partial output; attention splits by heads (column QKV + row output
 * projection). Sequence parallelism (Korthikanti et al. 2022, section 4.2.2) replaces each
 * all-reduce by a reduce-scatter along the sequence and an all-gather before the next split
 * layer. Memory follows the ZeRO paper (Rajbhandari et al. 2020, section 3.1 and 5) for model
 * states and Korthikanti et al. 2022 (section 4, Table 2) for activations. The trace itself is
 * generated in ts_plan_trace.c. */
#include "ts_plan_priv.h"
#include "ts_cost.h"
#include "ts_elementwise.h"
#include "ts_util.h"

#include <math.h>
#include <string.h>

void ts_plan_options_default(ts_plan_options *o)
{
  memset(o, 0, sizeof *o);
  o->global_batch = 0;
  o->micro_batch = 0;
  o->bucket_bytes = 25.0 * 1024 * 1024;
  o->algo = TS_ALGO_AUTO;
}

void ts_plan_free(ts_plan *p)
{
  if (p == NULL)
    return;
  g_free(p->split_text);
  g_free(p->placement_text);
  g_free(p->stage_first);
  g_free(p->layer_mode);
  g_free(p->stage_mem);
  g_free(p->layer_act_bytes);
  g_free(p->exec);
  g_free(p->unit);
  ts_model_free(p->own_fp32);
  g_free(p);
}

/* Bytes of optimizer state per parameter, which the optimizer step also reads and writes:
 * Adam keeps two moments, and with 16-bit training an fp32 master copy too: K = 12 in the ZeRO
 * paper (Rajbhandari et al. 2020, section 3.1), 8 in fp32. SGD with momentum (torch.optim.SGD:
 * one momentum_buffer per parameter) keeps one fp32 velocity, and with 16-bit training the
 * fp32 master copy too (the same accounting with one moment instead of two): 8 bytes, 4 in
 * fp32. */
double ts_plan_optimizer_bytes_per_param(const ts_model *m)
{
  if (m->optimizer == TS_OPT_SGD)
    return m->dtype_bytes < 4 ? 8.0 : 4.0;
  return m->dtype_bytes < 4 ? 12.0 : 8.0;
}

/* FLOPs of the update per parameter: Adam's two moment updates, bias corrections, square root,
 * division and weight decay, about 12; SGD with momentum and weight decay (torch.optim.SGD:
 * d_p += wd * p; buf = momentum * buf + d_p; p -= lr * buf), 5. */
double ts_plan_optimizer_flops_per_param(const ts_model *m)
{
  return m->optimizer == TS_OPT_SGD ? 5.0 : 12.0;
}

/* cp-ring=torch: bytes per sample of the transient buffers PyTorch's context_parallel holds
 * in the backward of attention layer i (torch/distributed/tensor/experimental/_attention.py,
 * _templated_ring_attention_backward, as TorchTitan 9dec370 runs it: rotate method
 * all-gather, convert_to_f32 on). kv is the rank's local K and V, head-repeated (repeat_kv
 * makes them as wide as the queries, so the local queries are kv / 2): the all-gather of the
 * ring's K/V (cp x kv) and the local K/V concatenated for it (kv); fp32 accumulators of dQ,
 * dK and dV (zeros_like(..., float32)); the fp32 dK/dV concatenated and sent round (the
 * all-to-all rotater) and the one received (2 x fp32 kv); one block's SDPA gradients (q + kv,
 * in the model's dtype). The forward's buffers (the same all-gather, the fp32 output and
 * log-sum-exp of the merge) are fewer: the backward's are the layer's peak. */
static double cp_torch_attn_bytes(const ts_plan *p, int i)
{
  double kv = p->exec[i].cp_kv_bytes, D = p->model->dtype_bytes, cp = p->degree[TS_AX_CP];
  if (p->cp_ring != TS_CP_RING_TORCH || kv <= 0 || cp <= 1)
    return 0.0;
  double q = kv / 2.0, f = 4.0 / D;
  return (cp + 1.0) * kv + f * (q + kv) + 2.0 * f * kv + (q + kv);
}

/* ---- per-layer execution ------------------------------------------------------------ */

static ts_tp_coll coll(int kind, double bytes)
{
  return (ts_tp_coll){kind, bytes, FALSE};
}

static const ts_tp_coll no_coll = {TS_NO_COLL, 0.0, FALSE};

/* An attention layer's queries T, keys S and inner width I. Layers built by hand (tests, the
 * validator) may leave kv_tokens and inner 0: self-attention of width in_features. */
static void attention_dims(const ts_layer *l, double *T, double *S, double *I)
{
  *T = (double)l->tokens;
  *S = l->kv_tokens > 0 ? (double)l->kv_tokens : *T;
  *I = l->inner > 0 ? (double)l->inner : (double)l->in_features;
}

static gboolean same_block(const ts_model *m, int i, int j);

/* Parameters of a multi-head latent attention layer that tensor parallelism replicates: the
 * down projections h -> q_lora and h -> kv_lora + rope, and the two latent norms (ts_model.c,
 * derive_mla). */
static double mla_replicated_params(const ts_layer *l)
{
  double h = (double)l->in_features, rq = (double)l->q_lora_rank, rkv = (double)l->kv_lora_rank;
  return rq > 0 ? h * rq + rq + h * (rkv + (double)l->qk_rope_dim) + rkv
                : h * (rkv + (double)l->qk_rope_dim) + rkv;
}
static gboolean cuts_at_blocks_only(const ts_model *m);

/* Whether layer i ends a residual sublayer of a transformer block (the next layer is a norm or
 * another block): its output is where a residual adds a value from the sublayer's start. */
static gboolean ends_residual_sublayer(const ts_model *m, int i)
{
  if (!cuts_at_blocks_only(m) || m->layers[i].block < 0)
    return FALSE;
  return i + 1 == m->nlayers || m->layers[i + 1].kind == TS_LAYER_NORM || !same_block(m, i, i + 1);
}

/*
 * Per-op selective recomputation (TorchTitan's activation_checkpoint mode "selective",
 * selective_ac_option "op", torchtitan 9dec370 parallelisms/parallelize_llama.py): inside each
 * checkpointed block the outputs of the matrix products (torch.ops.aten.mm), of the fused
 * attention and of the sequence-parallel reduce-scatters are saved, except every second matrix
 * product, counted from the block's start; everything else (norms, rotary, activations,
 * element-wise) is recomputed before the block's backward. The products are counted as
 * TorchTitan's Llama runs them: attention's Q, K, V and output projections one by one, a gated
 * MLP's gate and up projections one by one, then its down projection. Per sample, per chip:
 * a column-split product keeps 1/tp of its output, a row-split one its whole partial output
 * (summed by the reduce-scatter after it, whose 1/tp output is kept too under sequence
 * parallelism). Layers other than attention and dense keep everything.
 * Eager, torch.utils.checkpoint's selective mode stores the output of every op the policy
 * saves (_CachingTorchDispatchMode keeps each MUST_SAVE output for the recomputation, needed
 * or not); a compiled block (TorchTitan compiles each checkpointed block, torch.compile's
 * partitioner honouring the policy) saves only the values its backward reads. The MLP's down
 * projection (the 7th product, saved) and its reduce-scatter feed only the residual add, whose
 * backward reads neither: `compiled` (kernels=fused) drops them, `residual_end` marks that
 * layer. Everything else saved is read (Q, V and the gate by their backward; the output
 * projection's through the residual sum the second norm is recomputed from).
 */
/*
 * What the policy recomputes before the block's backward (its time, per sample per chip, into
 * e->op_rc_*): the products it did not save (the even ones: K, the output projection, a gated
 * MLP's up projection), 2 T k n FLOPs each with T (k + n) D bytes of activations read and
 * written; and every element-wise op of the block, which nothing saves: the norms' whole forward
 * (the layer's own FLOPs and traffic), the rotary embedding of Q and K (3 FLOPs and a read and
 * write per element), the MLP's activation (SwiGLU: silu(gate) * up reads 2 f and writes f per
 * token, 5 FLOPs per output; after an ungated column-split product, GELU: a read and a write,
 * 8 FLOPs per element). The fused attention
 * core and the saved products are not re-run. Weights re-read by a recomputed product (once
 * per micro-batch, not per sample) and the residual additions are not counted.
 */
static double op_kept_bytes(const ts_model *m, const ts_layer *l, ts_layer_exec *e,
                            gboolean sp_split, gboolean compiled, gboolean residual_end, int *mm)
{
  double D = m->dtype_bytes, T = (double)l->tokens, div = e->pdiv > 1 ? e->pdiv : 1.0;
  double kept = 0, w[4], kin[4];
  int n = 0;
  gboolean row_last = FALSE;
  e->op_rc_flops = e->op_rc_mem = e->op_rc_n = e->op_rc_k = 0.0;
  e->op_rc_kernels = 0;
  if (l->kind == TS_LAYER_ATTENTION && l->kv_lora_rank == 0 && !l->cross) {
    double Tq, S, I, a = (double)l->heads, h = (double)l->in_features;
    attention_dims(l, &Tq, &S, &I);
    double J = l->kv_heads > 0 ? I / a * (double)l->kv_heads : I;
    kin[n] = h, w[n++] = I / div;                       /* Q */
    kin[n] = h, w[n++] = J / div;                       /* K */
    kin[n] = h, w[n++] = J / div;                       /* V */
    kin[n] = I / div, w[n++] = (double)l->out_features; /* output projection: row-split,
                                                           whole partial sums */
    row_last = div > 1;
    /* The fused attention's output and its log-sum-exp (fp32 per query and head). */
    kept += T * (I / div) * D + T * (a / div) * 4.0;
    if (l->rotary) {
      double el = T * (I + J) / div;
      e->op_rc_flops += 3.0 * el;
      e->op_rc_mem += 2.0 * el * D;
      e->op_rc_kernels++;
    }
  } else if (l->kind == TS_LAYER_DENSE && l->experts == 0) {
    double out = (double)l->out_features, in = (double)l->in_features;
    gboolean col = l->tp != TS_TP_ROW;
    double kk = col ? in : in / div;
    if (l->gated) {
      kin[n] = kk, w[n++] = out / 2.0 / (col ? div : 1.0);
      kin[n] = kk, w[n++] = out / 2.0 / (col ? div : 1.0);
      double f = T * out / 2.0 / (col ? div : 1.0);
      e->op_rc_flops += 5.0 * f;
      e->op_rc_mem += 3.0 * f * D;
      e->op_rc_kernels++;
    } else {
      kin[n] = kk, w[n++] = out / (col ? div : 1.0);
      if (l->tp == TS_TP_COLUMN) { /* an MLP's first product, followed by its activation */
        double f = T * w[0];
        e->op_rc_flops += 8.0 * f;
        e->op_rc_mem += 2.0 * f * D;
        e->op_rc_kernels++;
      }
    }
    row_last = !col && div > 1;
  } else if (l->kind == TS_LAYER_NORM) {
    /* recomputed from the saved products and the block's input */
    e->op_rc_flops = l->fwd_flops / e->cdiv;
    e->op_rc_mem = (l->fwd_mem_bytes - ts_layer_weight_bytes(m, l)) / e->cdiv;
    e->op_rc_kernels = 1;
    return 0.0;
  } else {
    return e->act_bytes;
  }
  gboolean unread = compiled && residual_end && l->kind == TS_LAYER_DENSE;
  for (int k = 0; k < n; k++) {
    (*mm)++;
    if (*mm % 2 == 1) {
      kept += unread ? 0.0 : T * w[k] * D;
    } else {
      e->op_rc_flops += 2.0 * T * kin[k] * w[k];
      e->op_rc_mem += T * (kin[k] + w[k]) * D;
      e->op_rc_n += w[k];
      e->op_rc_k = MAX(e->op_rc_k, kin[k]);
      e->op_rc_kernels++;
    }
  }
  if (row_last && sp_split && !unread)
    kept += T * (double)l->out_features / div * D; /* the reduce-scatter's output */
  return kept;
}

/*
 * MaxText's remat_policy=minimal: jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims
 * around each scanned decoder layer (MaxText/layers/models.py at 76bd53b0f, the policy of the
 * v5p 32B-256B launch scripts). Outputs of dots without batch dimensions (the weight products)
 * may be saved, and JAX saves those the block's backward reads: Q, K and V (the attention
 * kernel's backward), the output projection's (the second norm's input is recomputed as the
 * block input plus it), an MLP's first products (the activation's input). The MLP's last
 * product feeds only the residual add and is not kept; nor is anything else: the attention
 * kernel (a Pallas call, not a dot) is run forward again before the block's backward (its
 * output feeds the output projection's weight gradient; e->recompute_flops, as selective
 * recomputation with flash attention) and the element-wise ops with it (e->op_rc_*, as
 * recompute=op costs them: norms, rotary, the activation). A row-split product's output is
 * kept as the layer gives it out (1/tp under sp). Per token and block: 2 E + 3 a d_h + F
 * elements for a multi-head ungated MLP (E model width, a heads of d_h, F the MLP width);
 * layers other than plain attention and dense keep everything.
 */
static double dots_kept_bytes(const ts_model *m, const ts_layer *l, ts_layer_exec *e,
                              gboolean mlpwi)
{
  double D = m->dtype_bytes, T = (double)l->tokens, div = e->pdiv > 1 ? e->pdiv : 1.0;
  e->op_rc_flops = e->op_rc_mem = e->op_rc_n = e->op_rc_k = 0.0;
  e->op_rc_kernels = 0;
  if (l->kind == TS_LAYER_ATTENTION && l->kv_lora_rank == 0 && !l->cross) {
    double Tq, S, I, a = (double)l->heads;
    attention_dims(l, &Tq, &S, &I);
    double J = l->kv_heads > 0 ? I / a * (double)l->kv_heads : I;
    if (l->rotary) {
      double el = T * (I + J) / div;
      e->op_rc_flops += 3.0 * el;
      e->op_rc_mem += 2.0 * el * D;
      e->op_rc_kernels++;
    }
    return T * (I + 2.0 * J) / div * D + e->out_bytes;
  }
  if (l->kind == TS_LAYER_DENSE && l->experts == 0) {
    if (l->tp == TS_TP_ROW)
      return 0.0;
    double f = T * (double)l->out_features / div;
    if (l->gated) {
      e->op_rc_flops += 5.0 * f / 2.0;
      e->op_rc_mem += 3.0 * f / 2.0 * D;
      e->op_rc_kernels++;
    } else if (l->tp == TS_TP_COLUMN) {
      e->op_rc_flops += 8.0 * f;
      e->op_rc_mem += 2.0 * f * D;
      e->op_rc_kernels++;
    }
    if (mlpwi && (l->gated || l->tp == TS_TP_COLUMN)) {
      /* save_dot_except_mlpwi: the MLP's first products (wi_0, wi_1) are not among the saved
       * names, so the block's backward runs them again from the recomputed norm (one GEMM of
       * their whole width on this chip's share) and keeps nothing of them. */
      double in = (double)l->in_features;
      e->op_rc_flops += 2.0 * T * in * (double)l->out_features / div;
      e->op_rc_mem += T * in * D + f * D;
      e->op_rc_n += (double)l->out_features / div;
      e->op_rc_k = MAX(e->op_rc_k, in);
      e->op_rc_kernels++;
      return 0.0;
    }
    return f * D;
  }
  if (l->kind == TS_LAYER_NORM) {
    e->op_rc_flops = l->fwd_flops / e->cdiv;
    e->op_rc_mem = (l->fwd_mem_bytes - ts_layer_weight_bytes(m, l)) / e->cdiv;
    e->op_rc_kernels = 1;
    return 0.0;
  }
  return e->act_bytes;
}

/* TorchTitan's tensor parallelism is DTensor's (ColwiseParallel with input_layouts=Shard(1)
 * for the blocks' first products and the output projection): the sequence-sharded input is
 * all-gathered (redistributed to Replicate) and the product's autograd saves that gathered
 * input for its weight gradient; nothing gathers it again in the backward, as Megatron-LM's
 * sequence parallelism does (Korthikanti et al. 2022, 4.2.2), which ts_plan_exec_table
 * keeps. So with fsdp2 a layer whose input is gathered keeps it whole: in fp8 for a torchao
 * Float8 GEMM (Float8ColwiseParallel casts before the gather), else in the activation type.
 * Kept where the layer keeps its activations, and in the recomputed working set; per-op
 * checkpointing recomputes a block's gather with the block (collectives are not in its
 * save list). Memory only: the time model's re-gather stays. */
static void dtensor_keeps_gathered_inputs(ts_plan *p)
{
  const ts_model *m = p->model;
  int tp = p->degree[TS_AX_TP], cp = p->degree[TS_AX_CP];
  if (tp <= 1 || !p->sp)
    return;
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    ts_layer_exec *e = &p->exec[i];
    if (e->bwd_regather.kind == TS_NO_COLL)
      continue;
    int gemm, other;
    ts_layer_precision(l, p->precision, &gemm, &other);
    double gathered = l->in_act_elems * (gemm == TS_PRECISION_FP8 ? 1.0 : m->dtype_bytes);
    /* per chip: 1/cp of each sequence under context parallelism, as every activation */
    double extra = MAX(0.0, gathered - l->in_act_elems * m->dtype_bytes / tp) / cp;
    e->full_act_bytes += extra;
    if (p->recompute != TS_RECOMPUTE_OP || l->block < 0)
      e->act_bytes += extra;
  }
}

gboolean ts_plan_fp8_saves_inputs(const ts_plan *p)
{
  return p->precision == TS_PRECISION_FP8 && !p->fsdp2;
}

gboolean ts_plan_fp8_gathers(const ts_plan *p)
{
  return p->precision == TS_PRECISION_FP8;
}

/* Whether fsdp2 with precision=fp8 gathers in float8 when the split does not say: as TorchTitan
 * 9dec370's Float8Handler decides (torchtitan/float8.py: enable_fsdp_float8_all_gather =
 * parallel_dims.dp_shard_enabled and the config's flag, i.e. dp_shard > 1). FSDP2 still shards
 * over dp_shard x cp, but a run whose data-parallel shard degree is 1 (context parallelism
 * alone, "FSDP 1 CP 8") gathers its weights in bf16. Here dp_shard is the shard group (shard=,
 * else dp). */
static gboolean fp8_gather_default(const ts_plan *p)
{
  return p->fsdp2 && p->precision == TS_PRECISION_FP8 && p->shard > 1;
}

/* torchao's FSDP float8 all-gather (enable_fsdp_float8_all_gather, on in TorchTitan's 405B
 * preset of August 2024, train_configs/llama3_405b.toml at 37c4b81): a Float8Linear's weight
 * shard is cast to float8 before FSDP2's all-gather (fsdp_pre_all_gather), so the gather moves
 * one byte a weight and the block holds the gathered weight in float8. Norms, the embedding
 * and the excluded output projection gather in bf16 (ts_layer_precision). fp8-gather (the
 * default with fsdp2 and precision=fp8 where dp shards, fp8_gather_default; fp8-gather=off
 * gathers the bf16 weights, as a Float8 run without the flag does); ts_plan_new refuses it
 * without fsdp2 and fp8. */
double ts_plan_gather_bytes_per_param(const ts_plan *p, int i)
{
  const ts_layer *l = &p->model->layers[i];
  if (p->fp8_gather && l->params > 0) {
    int gemm, other;
    ts_layer_precision(l, p->precision, &gemm, &other);
    if (gemm == TS_PRECISION_FP8)
      return 1.0;
  }
  return p->model->dtype_bytes;
}

double ts_plan_sp_copy_bytes(const ts_plan *p, const ts_tp_coll *c, double mb)
{
  if (!p->fsdp2 || !p->sp || p->degree[TS_AX_TP] <= 1 || c->redistribution || !(c->bytes > 0))
    return 0.0;
  if (c->kind == TS_COLL_REDUCESCATTER || (c->kind == TS_COLL_ALLGATHER && mb > 1))
    return 2.0 * c->bytes * mb; /* read once, written once */
  return 0.0;
}

ts_layer_exec *ts_plan_exec_table(const ts_model *m, const int *degree, ts_recompute rc,
                                  gboolean mlpwi, gboolean sp, const ts_layer_mode *mode, int ep,
                                  int attention, unsigned fp8)
{
  gboolean fp8_saved = (fp8 & TS_FP8_SAVES_INPUTS) != 0;
  int tp = degree[TS_AX_TP], cp = degree[TS_AX_CP];
  double D = m->dtype_bytes;
  ts_layer_exec *x = g_new0(ts_layer_exec, m->nlayers > 0 ? m->nlayers : 1);
  int op_mm = 0; /* recompute=op: matrix products so far in the current block */
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    ts_layer_exec *e = &x[i];
    /* The state the input is in: its producer's output state (a branch may start from an
     * earlier layer than the previous one). */
    ts_act_state st = l->src >= 0 && l->src < i ? x[l->src].out : TS_ST_REPL;
    gboolean dpmode = tp > 1 && mode != NULL && mode[i] == TS_LAYER_MODE_DP;
    gboolean split = tp > 1 && !dpmode && l->tp != TS_TP_REPLICATED;
    gboolean embedding = l->kind == TS_LAYER_EMBEDDING;
    double in_full = l->in_act_elems * D, out_full = l->out_act_elems * D;
    e->fwd_pre = e->fwd_post = e->bwd_pre = e->bwd_regather = e->bwd_post = no_coll;
    /* The input state the layer needs. */
    ts_act_state need;
    if (tp == 1)
      need = TS_ST_REPL;
    else if (dpmode)
      need = TS_ST_BATCH;
    else if (split)
      need = l->tp == TS_TP_ROW ? TS_ST_FEAT : TS_ST_REPL;
    else
      need = st == TS_ST_FEAT ? TS_ST_REPL : st; /* per-token / per-sample work takes any */
    /* A layer reading fewer tokens than its producer wrote (BERT's pooler, on the first token)
     * picks them out of the whole sequence: a sequence-sharded input is all-gathered first,
     * every token of it, as Megatron-LM's Pooler does under sequence parallelism. */
    gboolean picks = l->src >= 0 && l->tokens < m->layers[l->src].tokens;
    if (picks && st == TS_ST_SEQ && need == TS_ST_SEQ)
      need = TS_ST_REPL;
    if (l->src < 0)
      st = need; /* the data loader hands each member the samples its layout needs */
    /* Split layers whose input is whole produce partial input gradients, summed over tp. */
    gboolean partial = split && !embedding && l->tp != TS_TP_ROW;
    gboolean redist = st != need && (st == TS_ST_BATCH || need == TS_ST_BATCH);
    if (st == need) {
      if (need == TS_ST_REPL && partial)
        e->bwd_post = coll(TS_COLL_ALLREDUCE, in_full); /* Megatron's f: identity / all-reduce */
    } else if (st == TS_ST_REPL) {
      e->bwd_post = coll(TS_COLL_ALLGATHER, in_full); /* forward slices, backward gathers */
    } else if (need == TS_ST_REPL) {
      e->fwd_pre = coll(TS_COLL_ALLGATHER, picks ? m->layers[l->src].out_act_elems * D : in_full);
      if (partial)
        e->bwd_post = coll(TS_COLL_REDUCESCATTER, in_full);
      /* Sequence parallelism keeps the sharded input and gathers it again for the weight
       * gradient, overlapped with the input gradient (Korthikanti et al. 2022, 4.2.2). */
      if (partial && sp && st == TS_ST_SEQ)
        e->bwd_regather = coll(TS_COLL_ALLGATHER, in_full);
    } else {
      /* Between two split layouts each member keeps 1/tp and trades the rest: all-to-all. */
      e->fwd_pre = coll(TS_COLL_ALLTOALL, in_full / tp);
      e->bwd_post = coll(TS_COLL_ALLTOALL, in_full / tp);
    }
    e->fwd_pre.redistribution = e->bwd_post.redistribution = redist;
    if (l->src < 0)
      e->bwd_post = e->bwd_regather = no_coll; /* the input is data: no gradient */
    /* The output state. */
    ts_act_state out = need;
    if (split) {
      if (l->tp == TS_TP_COLUMN || (l->tp == TS_TP_VOCAB && !embedding)) {
        out = TS_ST_FEAT; /* logits stay split: the loss is computed vocabulary-parallel */
      } else if (sp) {
        e->fwd_post = coll(TS_COLL_REDUCESCATTER, out_full);
        e->bwd_pre = coll(TS_COLL_ALLGATHER, out_full);
        out = TS_ST_SEQ;
      } else {
        e->fwd_post = coll(TS_COLL_ALLREDUCE, out_full);
        out = TS_ST_REPL;
      }
    }
    /* A layer using the tp axis for its samples at the end of a residual sublayer: the
     * residual adds a value every member holds whole, and its gradient would come back as a
     * sample block that nothing gathers. Gather the output instead (forward all-gather,
     * backward each member keeps its samples), so the residual stream stays whole. */
    if (dpmode && out == TS_ST_BATCH && ends_residual_sublayer(m, i)) {
      e->fwd_post = coll(TS_COLL_ALLGATHER, out_full);
      e->fwd_post.redistribution = TRUE;
      out = TS_ST_REPL;
    }
    /* Transformer Engine's FP8 recipe (fp8_saved) quantizes a tensor-parallel FP8 GEMM's input
     * before gathering it (its userbuffers' fp8_buf on the gathers it overlaps: qkv_fprop,
     * fc1_fprop, proj_dgrad, fc2_dgrad; gather_along_first_dim with the input quantizer
     * otherwise): the forward's input gather, the backward's output-gradient gather and the
     * saved input's re-gather carry one byte an element. The reductions (reduce-scatter,
     * all-reduce) stay in D. So does torchao's Float8 tensor parallelism (TS_FP8_GATHERS, the
     * fsdp2 runs: torchao/float8/float8_tensor_parallel.py): PrepareFloat8ModuleInput casts a
     * block's sequence-sharded input to float8 before redistributing it to Replicate (the
     * forward's all-gather, and its recomputation), and Float8RowwiseParallel's output is
     * wrapped in NoopFwToFloat8BwDynamic after its reduce-scatter, so in backward the output
     * gradient is cast on its shard before the transposed all-gather. */
    if ((fp8 & (TS_FP8_SAVES_INPUTS | TS_FP8_GATHERS)) != 0 && split && D > 1.0) {
      int gemm, other;
      ts_layer_precision(l, TS_PRECISION_FP8, &gemm, &other);
      if (gemm == TS_PRECISION_FP8 && l->kv_lora_rank == 0) {
        if (e->fwd_pre.kind == TS_COLL_ALLGATHER && !redist && !picks)
          e->fwd_pre.bytes /= D;
        if (e->bwd_pre.kind == TS_COLL_ALLGATHER)
          e->bwd_pre.bytes /= D;
        if (e->bwd_regather.kind == TS_COLL_ALLGATHER)
          e->bwd_regather.bytes /= D;
      }
    }
    e->in = need;
    e->out = out;
    e->cdiv = (split || need != TS_ST_REPL) ? tp : 1;
    e->pdiv = split ? tp : 1;
    e->dp_over_tp = tp > 1 && e->pdiv == 1 && e->cdiv > 1 && l->params > 0;
    /* Megatron-LM pads the vocabulary to a multiple of make_vocab_size_divisible_by x tp
     * (megatron/training/tokenizer: _vocab_size_with_padding): each vocabulary shard is
     * V_pad / tp rows, so a chip holds and computes V_pad / (V tp) of the layer. */
    if (l->vocab > 0 && l->vocab_divisible_by > 1 && l->tp == TS_TP_VOCAB) {
      double q = (double)l->vocab_divisible_by * (split ? tp : 1);
      double padded = ceil((double)l->vocab / q) * q, r = (double)l->vocab / padded;
      e->cdiv *= r;
      e->pdiv *= r;
    }
    /* Multi-head latent attention under tp (Megatron-Core's MLA): the down projections to the
     * latents (q_a, kv_a) and their norms are replicated on every member, the rest split by
     * heads. The member's share of the work is then (split / tp + replicated) of the whole,
     * measured on the training FLOPs; activations follow the same share. */
    if (split && l->kv_lora_rank > 0) {
      double whole = mla_replicated_params(l), all = l->params;
      e->cdiv = all / ((all - whole) / tp + whole);
      /* Each member back-propagates only its heads' up projections, so the latents' gradients
       * (and the decoupled rotary key's, shared by all heads) are partial over tp. Without
       * sequence parallelism Megatron-Core's up projections are column-parallel layers whose
       * backward all-reduces their input gradient: the latents' (q_lora + kv_lora wide; the
       * whole input's when the query is projected directly), not the layer input's, so the
       * replicated down projections see whole gradients and their input gradient is whole.
       * The trace reduces the rotary key with them (q_lora + kv_lora + rope wide). With
       * sequence parallelism the down projections run on each member's sequence shard and
       * the up projections gather their inputs: the latents and the rotary key are
       * all-gathered (not the layer input), their gradients reduce-scattered, the latents
       * gathered again for the up projections' weight gradients, and the whole layer's work
       * is split by tp; the replicated weights' gradients, each member's over its own tokens,
       * are all-reduced over tp before the dp reduction, as Megatron-Core does for its
       * duplicated linears' parameters under sequence parallelism (marked sequence_parallel,
       * like the layer norms). Found by reading the trace for trainsim validate
       * (docs/validation.md). */
      double T = (double)l->tokens, rkv = (double)l->kv_lora_rank, dr = (double)l->qk_rope_dim;
      double q = l->q_lora_rank > 0 ? (double)l->q_lora_rank : (double)l->in_features;
      if (e->bwd_post.kind == TS_COLL_ALLREDUCE) {
        e->bwd_post.bytes = T * (q + rkv + dr) * D;
      } else if (e->bwd_post.kind == TS_COLL_REDUCESCATTER && st == TS_ST_SEQ &&
                 e->fwd_pre.kind == TS_COLL_ALLGATHER) {
        e->fwd_pre.bytes = e->bwd_post.bytes = T * (q + rkv + dr) * D;
        if (e->bwd_regather.kind != TS_NO_COLL)
          e->bwd_regather.bytes = T * (q + rkv) * D;
        e->cdiv = tp;
        e->tp_grad_params = whole;
      } else if (e->bwd_post.kind != TS_NO_COLL) {
        e->tp_grad_params = whole;
      }
    }
    /* Activations (Korthikanti et al. 2022, section 4.1 and Table 2). */
    ts_act_parts ap;
    ts_layer_saved_parts(m, l, attention < 0 ? l->attention : (ts_attention)attention, fp8_saved,
                         &ap);
    double din = (need != TS_ST_REPL || e->bwd_regather.kind != TS_NO_COLL) ? tp : 1;
    double dmask = out != TS_ST_REPL ? tp : 1;
    e->full_act_bytes = ap.in / din + (ap.inner + ap.scores) / e->cdiv + ap.mask / dmask;
    e->act_bytes = e->full_act_bytes;
    gboolean dots_core =
        rc == TS_RECOMPUTE_DOTS && l->block >= 0 && l->kv_lora_rank == 0 && !l->cross;
    if ((rc == TS_RECOMPUTE_SELECTIVE || dots_core) && l->kind == TS_LAYER_ATTENTION) {
      /* Selective: drop the attention scores, softmax and its dropout (5as^2b bytes per layer)
       * and recompute QK^T, softmax and the context before backward (section 5). With flash
       * attention only the softmax statistics go, and the fused kernel's forward is re-run
       * (Megatron-LM's checkpointed core attention). */
      double T, S, I, a = (double)l->heads;
      attention_dims(l, &T, &S, &I);
      e->act_bytes -= ap.scores / e->cdiv;
      double Iqk = l->qk_inner > 0 ? (double)l->qk_inner : I; /* MLA: queries/keys wider */
      e->recompute_flops = (2.0 * T * S * (Iqk + I) + a * T * S) / e->cdiv;
    }
    e->in_bytes = in_full / (st == TS_ST_REPL ? 1 : tp);
    e->out_bytes = out_full / (out == TS_ST_REPL ? 1 : tp);
    if (rc == TS_RECOMPUTE_OP && l->block >= 0) {
      if (i == 0 || !same_block(m, i - 1, i))
        op_mm = 0;
      e->act_bytes = op_kept_bytes(m, l, e, sp && tp > 1 && split, (fp8 & TS_EXEC_COMPILED) != 0,
                                   ends_residual_sublayer(m, i), &op_mm);
      if (i == 0 || !same_block(m, i - 1, i))
        e->act_bytes += e->in_bytes; /* the checkpoint's input: the block's input */
    }
    if (rc == TS_RECOMPUTE_DOTS && l->block >= 0) {
      e->act_bytes = dots_kept_bytes(m, l, e, mlpwi);
      if (i == 0 || !same_block(m, i - 1, i))
        e->act_bytes += e->in_bytes; /* the scan's carry: the block's input */
    }
    /* Expert parallelism (GShard, Lepikhin et al. 2021, section 2.2; DeepSpeed-MoE,
     * Rajbhandari et al. 2022, section 5): each rank keeps experts / ep experts; before the
     * first expert layer every token copy is sent to the rank holding its expert (all-to-all
     * of top_k x the tokens a rank has), after the last one it comes back. */
    e->ediv = 1;
    e->ep_pre = e->ep_post = no_coll;
    if (l->experts > 0) {
      e->expert = TRUE;
      e->ediv = ep > 1 ? ep : 1;
      gboolean first = i == 0 || m->layers[i - 1].experts == 0;
      gboolean last = i + 1 == m->nlayers || m->layers[i + 1].experts == 0;
      /* With a capacity factor C each expert receives C x its balanced share: the dispatch
       * carries C top_k copies of each token (dropped or padded slots included). */
      double k = (double)l->top_k * (l->capacity_factor > 0 ? l->capacity_factor : 1.0);
      if (ep > 1 && first)
        e->ep_pre = coll(TS_COLL_ALLTOALL, k * e->in_bytes);
      if (ep > 1 && last)
        e->ep_post = coll(TS_COLL_ALLTOALL, k * e->out_bytes);
      /* The experts run on the token copies routed to them, k x the tokens (capacity slots
       * included), so their tensor-parallel collectives carry k x a dense layer's (found by
       * trainsim validate executing the experts under tp: docs/validation.md). */
      ts_tp_coll *ecs[] = {&e->fwd_pre, &e->fwd_post, &e->bwd_pre, &e->bwd_regather, &e->bwd_post};
      for (size_t c = 0; c < G_N_ELEMENTS(ecs); c++)
        ecs[c]->bytes *= k;
    }
    /* Context parallelism (Liu et al. 2023, "Ring Attention"; Megatron-Core / Transformer
     * Engine's context parallelism): every layer sees 1/cp of each sequence (2 of 2cp chunks,
     * the zig-zag that balances causal attention), so its work, its activations and the
     * tensor-parallel collectives on them shrink by cp. Attention's queries meet every key: the
     * K/V blocks go round the cp ring (ts_plan_trace.c). ts_plan_new refuses models with a
     * layer of one token (nothing to split). */
    if (cp > 1) {
      if (l->kind == TS_LAYER_ATTENTION) {
        double T, S, I, a = (double)l->heads;
        attention_dims(l, &T, &S, &I);
        e->core_flops = 4.0 * T * S * I + a * T * S;
        /* K and V are J = kv_heads / heads x I wide (grouped-query attention sends only the
         * key/value heads round the ring). */
        double J = l->kv_heads > 0 ? I / a * (double)l->kv_heads : I;
        e->cp_kv_bytes = 2.0 * (S / cp) * (J / e->pdiv) * D;
      }
      ts_tp_coll *cs[] = {&e->fwd_pre,  &e->fwd_post, &e->bwd_pre, &e->bwd_regather,
                          &e->bwd_post, &e->ep_pre,   &e->ep_post};
      for (size_t k = 0; k < G_N_ELEMENTS(cs); k++)
        cs[k]->bytes /= cp;
      e->act_bytes /= cp;
      e->full_act_bytes /= cp;
      e->in_bytes /= cp;
      e->out_bytes /= cp;
      e->recompute_flops /= cp;
      e->op_rc_flops /= cp;
      e->op_rc_mem /= cp;
      e->cdiv *= cp;
    }
  }
  return x;
}

/* Parameters of a tensor-split layer that every tp member holds whole: a row-split layer's bias
 * and attention's output-projection bias are added after the partial sums are summed
 * (Megatron-LM's RowParallelLinear, Shoeybi et al. 2019, section 3), so they are not split.
 * Dense / conv bias = out_features (per expert copy); attention biases are 3h for QKV (column,
 * split) + h for the output projection (row, whole): ts_model.c, docs/models.md. */
static double whole_params(const ts_layer *l)
{
  if (l->kind == TS_LAYER_ATTENTION && l->kv_lora_rank > 0)
    return mla_replicated_params(l); /* MLA has no biases */
  if (!l->bias)
    return 0.0;
  if ((l->kind == TS_LAYER_DENSE || l->kind == TS_LAYER_CONV2D) && l->tp == TS_TP_ROW)
    return (double)l->out_features * (double)(l->experts > 0 ? l->experts : 1);
  if (l->kind == TS_LAYER_ATTENTION && l->tp == TS_TP_HEADS)
    return (double)l->in_features;
  return 0.0;
}

/* Parameters of layer l one chip holds under its execution row: weights (and column-split
 * biases) / tp, whole biases whole, then / ep for experts. */
static double exec_params(const ts_layer *l, const ts_layer_exec *e)
{
  double whole = e->pdiv > 1 ? MIN(whole_params(l), l->params) : 0.0;
  return ((l->params - whole) / e->pdiv + whole) / e->ediv;
}

double ts_plan_layer_params(const ts_plan *p, int i)
{
  return exec_params(&p->model->layers[i], &p->exec[i]);
}

/* ---- pipeline schedules ------------------------------------------------------------- */

static void push(GArray *out, gboolean bwd, int micro, int chunk)
{
  ts_sched_item it = {bwd, micro, chunk};
  g_array_append_val(out, it);
}

void ts_sched_order(ts_schedule s, int pp, int chunks, int n_micro, int device, gboolean torch,
                    GArray *out)
{
  int M = n_micro;
  if (s == TS_SCHED_GPIPE) {
    /* GPipe (Huang et al. 2019, section 2.2): every micro-batch forward, then the backward
     * pass, which autograd runs from the last micro-batch to the first. */
    for (int c = 0; c < chunks; c++)
      for (int u = 0; u < M; u++)
        push(out, FALSE, u, c);
    for (int c = chunks - 1; c >= 0; c--)
      for (int u = M - 1; u >= 0; u--)
        push(out, TRUE, u, c);
    return;
  }
  if (s == TS_SCHED_1F1B || chunks == 1) {
    /* PipeDream-Flush (Narayanan et al. 2021, "Memory-Efficient Pipeline-Parallel DNN
     * Training", section 3.1): P - s - 1 warm-up forwards, then one forward one backward,
     * then the remaining backwards. */
    int warm = MIN(pp - device - 1, M);
    for (int u = 0; u < warm; u++)
      push(out, FALSE, u, 0);
    for (int i = 0; i < M - warm; i++) {
      push(out, FALSE, warm + i, 0);
      push(out, TRUE, i, 0);
    }
    for (int i = M - warm; i < M; i++)
      push(out, TRUE, i, 0);
    return;
  }
  /* Interleaved 1F1B (Narayanan et al. 2021 SC, section 2.2; Megatron-LM schedules.py,
   * forward_backward_pipelining_with_interleaving): micro-batches go through the device's V
   * chunks in groups of pp; warm-up (P - s - 1) * 2 + (V - 1) * P forwards. With M = P
   * micro-batches Megatron-LM runs every forward first (all_warmup_microbatches);
   * torch.distributed.pipelining's ScheduleInterleaved1F1B (TorchTitan) keeps the formula,
   * (V - 1) x (micro-batches per round, M / (M / P) = P) + 2 (P - 1 - s), capped at M V
   * (_get_rank_warmup_ops), so its later stages start their backwards early. */
  int V = chunks, total = M * V;
  int warm = M == pp && !torch ? total : MIN((pp - device - 1) * 2 + (V - 1) * pp, total);
#define FWD_ITEM(k) push(out, FALSE, ((k) / (pp * V)) * pp + (k) % pp, ((k) % (pp * V)) / pp)
#define BWD_ITEM(k) push(out, TRUE, ((k) / (pp * V)) * pp + (k) % pp, V - 1 - ((k) % (pp * V)) / pp)
  for (int k = 0; k < warm; k++)
    FWD_ITEM(k);
  for (int k = 0; k < total - warm; k++) {
    FWD_ITEM(warm + k);
    BWD_ITEM(k);
  }
  for (int k = total - warm; k < total; k++)
    BWD_ITEM(k);
#undef FWD_ITEM
#undef BWD_ITEM
}

/* ---- stages and checkpoint units ------------------------------------------------------ */

/* Whether layers i and j belong to one block (ts_layer block; the model derives it). */
static gboolean same_block(const ts_model *m, int i, int j)
{
  return m->layers[i].block >= 0 && m->layers[i].block == m->layers[j].block;
}

int ts_plan_stage_of_layer(const ts_plan *p, int layer)
{
  int lo = 0, hi = p->nstages - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (p->stage_first[mid] <= layer)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

gboolean ts_plan_recomputes_forward(const ts_plan *p)
{
  return p->recompute == TS_RECOMPUTE_FULL || p->recompute == TS_RECOMPUTE_STAGE;
}

/* torchgpipe (kakaobrain/torchgpipe, GPipe's checkpoint='except_last', its default) checkpoints
 * the micro-batches before checkpoint_stop = chunks - 1: the last one runs its stages plainly,
 * keeping their activations, and is not re-run before its backward (with one micro-batch
 * nothing is). */
gboolean ts_plan_micro_recomputed(const ts_plan *p, gint64 micro, gint64 n_micro)
{
  return ts_plan_recomputes_forward(p) && !(p->recompute_keep_last && micro == n_micro - 1);
}

/* On a TPU the recomputed forward is what JAX's remat partial evaluation keeps of it: only the
 * computations the backward reads (jax.checkpoint recomputes the residuals, and dead code is
 * eliminated from the rematerialised forward). The checkpoint unit's last product, a dense
 * layer (an MLP's down projection) whose output only forms the unit's output, already kept as
 * the next unit's checkpoint and read by no backward (its own backward reads its input), is
 * not run again. PyTorch's non-reentrant checkpoint (use_reentrant=False) skips it too, eager
 * or compiled: eager, from torch 2.0, whose torch.utils.checkpoint has set_checkpoint_early_stop,
 * on by default ("stops recomputation as soon as it has computed all needed Tensors"), the
 * re-run ends once the backward's last saved tensor is rebuilt, the input of that same last
 * dense layer; compiled (torch.compile of the wrapped block), AOTAutograd's min-cut partitioner
 * (torch/_functorch/partitioners.py) builds the backward graph from the saved block input and
 * recomputes only the nodes the backward reads, so the down projection and the collective
 * after it (sequence parallelism's reduce-scatter, a pure functional collective) are not in
 * it. A split says so with early-stop; fsdp2 implies it (TorchTitan wraps each block in
 * checkpoint_wrapper, non-reentrant, on torch >= 2.4). Megatron-LM's and DeepSpeed's
 * checkpoints (reentrant: the whole block again, back-propagated from its output) re-run it. */
gboolean ts_plan_recompute_skips(const ts_plan *p, int i)
{
  const ts_layer *l = &p->model->layers[i];
  gboolean skips = p->topo->chip.systolic > 0 || p->early_stop || p->fsdp2;
  if (!skips || p->recompute != TS_RECOMPUTE_FULL || !p->unit || p->unit[i] < 0)
    return FALSE;
  gboolean last = i + 1 >= p->model->nlayers || p->unit[i + 1] != p->unit[i];
  return last && l->kind == TS_LAYER_DENSE && l->experts == 0 && l->vocab <= 0;
}

gboolean ts_plan_layer_recomputed(const ts_plan *p, int layer)
{
  if (!ts_plan_recomputes_forward(p))
    return FALSE;
  if (p->recompute == TS_RECOMPUTE_STAGE)
    return TRUE;
  int b = p->model->layers[layer].block;
  /* recompute=full:N, TorchTitan's selective layer checkpointing (torchtitan 1ea476e9f,
   * parallelize_llama.py): a counter over the blocks, from 1; a block is wrapped in checkpoint
   * when the count is a multiple of N, so with N = 2 the second, fourth, ... blocks. */
  return b >= 0 && (p->recompute_every <= 1 || (b + 1) % p->recompute_every == 0);
}

int *ts_plan_units(const ts_plan *p)
{
  const ts_model *m = p->model;
  int *unit = g_new(int, m->nlayers > 0 ? m->nlayers : 1);
  for (int i = 0; i < m->nlayers; i++) {
    if (p->recompute == TS_RECOMPUTE_STAGE) {
      /* GPipe (Huang et al. 2019, section 2.3): a stage is one checkpoint, whatever its
       * layers; the embedding and logits are re-run with the rest. */
      unit[i] = p->stage_first[ts_plan_stage_of_layer(p, i)];
      continue;
    }
    gboolean cont = i > 0 && same_block(m, i - 1, i) &&
                    ts_plan_stage_of_layer(p, i - 1) == ts_plan_stage_of_layer(p, i);
    if (cont)
      unit[i] = unit[i - 1];
    else if (m->layers[i].block >= 0 &&
             (p->recompute != TS_RECOMPUTE_FULL || ts_plan_layer_recomputed(p, i)))
      unit[i] = i;
    else
      unit[i] = -1; /* a top-level layer (embedding, logits) is kept whole, as Megatron does;
                       so is a block full:N does not checkpoint */
  }
  return unit;
}

/* FlashAttention's benchmark counts a core's forward + backward as 3.5 forwards (the backward
 * 2.5: it recomputes the scores); trainsim counts 3 (ts_plan_op_shape). */
#define FLASH_PUBLISHED_FLOPS 3.5

/* How much slower than FlashAttention-2 a fused kernel runs its forward and its backward, as
 * published (1, 1: not published apart, so its time follows the FLOP count, 1 : 2.5). The Triton
 * kernel: "FlashAttention-2 is around 1.3-1.5x faster than FlashAttention in Triton in the forward
 * pass and around 2x faster in the backward pass" (Dao 2023, arXiv 2307.08691, section 4.1, from
 * its Figures 5 and 6, A100): 1.4 and 2; with FlashAttention-2's own forward and backward at one
 * rate (its H100 causal 16k bars: 335 and 322 TFLOP/s, Shah et al. 2024 Figures 5-6), the Triton
 * pair's time is 1.4 : 5, the forward 0.219 of it where the FLOP count says 1 / 3.5 = 0.286. The
 * kernel's own header says the same ("Triton forward is generally faster than CUDA forward,
 * while Triton backward is generally slower"). */
static void attn_kernel_pass_slowdown(ts_attn_kernel k, double *fwd, double *bwd)
{
  *fwd = *bwd = 1.0;
  if (k == TS_ATTN_KERNEL_TRITON) {
    *fwd = 1.4;
    *bwd = 2.0;
  }
}

/* A fused kernel's rate as a fraction of the GEMM rate from the chip's profile (0: none given):
 * flash_efficiency_triton, flash_efficiency_fa1; FlashAttention-2's is flash_efficiency. */
static double attn_kernel_rate(const ts_chip *c, ts_attn_kernel k)
{
  switch (k) {
  case TS_ATTN_KERNEL_TRITON:
    return c->flash_efficiency_triton;
  case TS_ATTN_KERNEL_FA1:
    return c->flash_efficiency_fa1;
  default:
    return c->flash_efficiency;
  }
}

/* Whether a layer's attention keeps its scores in memory: the split's attention= when given,
 * else the layer's own (the model's [model] attention; flash by default). */
static gboolean unfused_attention(const ts_plan *p, const ts_layer *l)
{
  int a = p->attention >= 0 ? p->attention : (int)l->attention;
  return a == TS_ATTN_UNFUSED;
}

/*
 * Kernels a layer's pass launches in an eager framework (PyTorch with Megatron-LM's fused
 * kernels), the count the per-kernel launch floor multiplies ([chip] kernel_launch_us). Forward:
 * a dense layer is its GEMM (bias fused) and one epilogue kernel (activation, or bias + dropout
 * + residual); unfused attention is QKV GEMM, QK^T batched GEMM, fused scale-mask-softmax,
 * dropout, context batched GEMM, a layout copy, output GEMM and bias-dropout-add (8);
 * FlashAttention replaces the middle five by one kernel (4); a norm, a pool: 1; an embedding:
 * the lookups, their sum and dropout (3). Backward launches twice the forward's kernels (input
 * and weight gradients of each GEMM, the backward of each element-wise kernel). These are
 * counts of the software stack, not fitted.
 */
static int fwd_kernels(const ts_plan *p, const ts_layer *l)
{
  switch (l->kind) {
  case TS_LAYER_DENSE:
  case TS_LAYER_CONV2D:
    return 2;
  case TS_LAYER_ATTENTION:
    return unfused_attention(p, l) ? 8 : 4;
  case TS_LAYER_EMBEDDING:
    return 3;
  default:
    return 1;
  }
}

/*
 * Megatron's FusedScaleMaskSoftmax (megatron/model/fused_softmax.py, in Megatron-LM and
 * Megatron-DeepSpeed) runs its fused scale + causal mask + softmax kernel only under
 * custom_kernel_constraint: 16 < key length <= 2048, query length a multiple of 4 and
 * micro-batch x heads on the chip (b x np) a multiple of 4. Otherwise PyTorch's eager path
 * runs: the scores cast to fp32, scaled, masked in place, softmax, cast back: 5 kernels for the
 * fused one, D + 4, 8, 8, 8 and 4 + D bytes a score against the fused 2D (32 more); backward
 * the five ops' gradients, 2D + 36 bytes against the fused 3D. A GPU's unfused attention only
 * (XLA fuses a TPU's softmax). Counted from the code, not fitted.
 */
static gboolean eager_softmax(const ts_plan *p, const ts_layer *l, double batch_heads, double sq,
                              double sk)
{
  if (!unfused_attention(p, l) || p->topo->chip.systolic > 0)
    return FALSE;
  return !(sk > 16 && sk <= 2048 && fmod(sq, 4.0) == 0 && fmod(batch_heads, 4.0) == 0);
}
#define EAGER_SOFTMAX_EXTRA_KERNELS 4
#define EAGER_SOFTMAX_FWD_EXTRA_BYTES 32.0

/*
 * Kernels of Megatron-LM's vocabulary-parallel cross-entropy (tensor_parallel/cross_entropy.py,
 * _VocabParallelCrossEntropy, on the logits cast to fp32), the loss whose passes over the logits
 * dense_epilogue_bytes costs, counted from its code: forward the cast to fp32, the max over the
 * vocabulary, subtracting it, the target's mask (two comparisons and their or), the masked
 * target (a copy, a subtraction, a masked fill), the row index (arange), the gather of the
 * target's logits, its copy and masked fill, exp, the sum, log and the loss's subtraction, and
 * the division that keeps the softmax: 18 kernels (and three tensor-parallel all-reduces of a
 * value per token, not costed); backward the row index, the target mask as a float, 1 - it, the
 * gather, subtraction and scatter of the target's gradient, the product with the loss gradient
 * and the cast back to 16 bits: 8. With the logits' GEMM (forward) and its two gradients
 * (backward) these are the logits layer's launches; loss=eager (PyTorch's cross_entropy) keeps
 * the count of its own kernels (ts_layer_elementwise_ops). Counts of the software, not fitted.
 */
#define CE_FWD_KERNELS 18
#define CE_BWD_KERNELS 8

/*
 * Bytes of the element-wise epilogue kernel after a dense layer's GEMM (one per layer, as
 * fwd_kernels counts), over `elems` output elements on this chip: Megatron-LM's fused
 * bias + dropout + residual add (a layer with dropout) reads the GEMM's output and the
 * residual, writes the sum and a one-byte mask, (3D + 1) bytes an element, and its backward
 * reads the gradient and the mask and writes the gradient, (2D + 1); a bias + activation
 * (GeLU) reads and writes the output, 2D, and its backward reads the gradient and the
 * pre-activation and writes the gradient, 3D. Under sequence parallelism a row-parallel
 * layer's epilogue runs on its 1/tp of the sequence (after the reduce-scatter).
 */
static double dense_epilogue_bytes(const ts_plan *p, const ts_layer *l, const ts_layer_exec *e,
                                   ts_pass pass, double elems)
{
  double D = p->model->dtype_bytes;
  if (p->sp && e->pdiv > 1 && (l->tp == TS_TP_ROW || l->kind == TS_LAYER_ATTENTION))
    elems /= e->pdiv;
  if (pass == TS_PASS_WGRAD || pass == TS_PASS_ATTN_RECOMPUTE)
    return 0.0; /* the weight gradient is a GEMM alone */
  gboolean bwd = pass == TS_PASS_BWD || pass == TS_PASS_DGRAD;
  if (l->kind == TS_LAYER_DENSE && l->vocab > 0) {
    /* The logits' cross-entropy over the vocabulary (Megatron-LM's vocab-parallel loss on the
     * logits cast to fp32): forward the cast (D read, 4 written), the max (4), subtracting it
     * (4 + 4), exp (4 + 4), the sum (4), the softmax kept for backward (4 + 4): D + 36 bytes an
     * element; backward scaling the softmax by the loss gradient (4 + 4) and the cast back
     * (4 + D): D + 12. */
    return (bwd ? D + 12.0 : D + 36.0) * elems;
  }
  double per = l->dropout ? (bwd ? 2.0 * D + 1.0 : 3.0 * D + 1.0) : (bwd ? 3.0 * D : 2.0 * D);
  return per * elems;
}

/* Divides the dimension tensor parallelism splits (pdiv > 1), or the rows when the tp axis
 * carries the layer's samples or sequence (cdiv > 1, pdiv 1). */
static void split_dims(const ts_layer *l, const ts_layer_exec *e, double *m, double *n, double *k)
{
  if (e->pdiv > 1) {
    if (l->tp == TS_TP_ROW)
      *k /= e->pdiv;
    else
      *n /= e->pdiv;
  } else if (e->cdiv > 1) {
    *m /= e->cdiv;
  }
}

/* FP8 dynamic scaling around the layer's FP8 GEMMs (ts_fp8_scaling_cost), in the pass: an
 * attention layer's two projections (QKV: tokens x hidden -> q + 2 kv widths; output: q width
 * -> hidden), a dense layer's GEMM (a gated fc1's gate and up share one cast of the input, as
 * torch.compile's common-subexpression pass leaves it), each expert held. */
static void fp8_scaling(const ts_plan *p, const ts_layer *l, const ts_op_shape *s, ts_pass pass,
                        double *bytes, int *kernels)
{
  if (s->prec != TS_PRECISION_FP8 || !(s->m > 0 && s->n > 0 && s->k > 0))
    return;
  double D = p->model->dtype_bytes;
  /* An input gathered over tp (sequence parallelism) is cast on its shard, before the gather;
   * so is a row-parallel GEMM's output gradient when its output is reduce-scattered over the
   * sequence: torchao's Float8RowwiseParallel wraps the scattered output in
   * NoopFwToFloat8BwDynamic, whose backward casts the gradient shard before the backward's
   * float8 all-gather (torchao/float8/float8_tensor_parallel.py), as Transformer Engine
   * quantizes a sequence-parallel output gradient before gathering it. */
  const ts_layer_exec *e = &p->exec[l - p->model->layers];
  double xr = e->fwd_pre.kind == TS_COLL_ALLGATHER && e->pdiv > 1 ? s->m / e->pdiv : s->m;
  double gr = e->fwd_post.kind == TS_COLL_REDUCESCATTER && e->pdiv > 1 ? s->m / e->pdiv : s->m;
  ts_fp8_cost c[2];
  double wel[2]; /* each GEMM's weight elements (k x n) */
  int n = 1;
  if (l->kind == TS_LAYER_ATTENTION) {
    double I = l->inner > 0 ? (double)l->inner : (double)l->in_features, a = (double)l->heads;
    double J = l->kv_heads > 0 && a > 0 ? I / a * (double)l->kv_heads : I;
    double w = s->n / I; /* the chip's share of the heads */
    ts_fp8_scaling_cost(s->m, (I + 2.0 * J) * w, s->k, xr, s->m, D, &c[0]);
    ts_fp8_scaling_cost(s->m, s->k, s->n, s->m, gr, D, &c[1]); /* the row-parallel output */
    wel[0] = (I + 2.0 * J) * w * s->k, wel[1] = s->k * s->n;
    n = 2;
  } else {
    ts_fp8_scaling_cost(s->m, s->n, s->k, xr, l->tp == TS_TP_ROW ? gr : s->m, D, &c[0]);
    wel[0] = s->n * s->k;
  }
  /* fp8-cache: Transformer Engine casts a weight to FP8 (amax, cast: 2D + 1 bytes an element)
   * and makes its transposed copy (2 bytes) on the step's first micro-batch only and reuses
   * them (is_first_microbatch, which Megatron-Core's schedules set once per step): over the
   * step's n_micro micro-batches each pays 1 / n_micro of them. */
  if (p->fp8_cache && p->n_micro > 1) {
    double keep = 1.0 - 1.0 / (double)p->n_micro;
    for (int j = 0; j < n; j++) {
      c[j].fwd_bytes -= keep * (2.0 * D + 1.0) * wel[j];
      c[j].dgrad_bytes -= keep * 2.0 * wel[j];
    }
  }
  double copies = s->batch > 1 ? s->batch : 1.0;
  for (int j = 0; j < n; j++) {
    gboolean f = pass == TS_PASS_FWD, d = pass == TS_PASS_BWD || pass == TS_PASS_DGRAD,
             w = pass == TS_PASS_BWD || pass == TS_PASS_WGRAD;
    *bytes += copies *
              ((f ? c[j].fwd_bytes : 0) + (d ? c[j].dgrad_bytes : 0) + (w ? c[j].wgrad_bytes : 0));
    *kernels +=
        (f ? c[j].fwd_kernels : 0) + (d ? c[j].dgrad_kernels : 0) + (w ? c[j].wgrad_kernels : 0);
  }
}

/* The GEMMs a layer's projections of one input are under projections=separate: three for an
 * attention's q, k and v (not a latent attention's, whose down projections differ), two for a
 * gated MLP's gate and up (not an MoE's experts nor the logits), else one. */
static int projection_gemms(const ts_layer *l)
{
  if (l->kind == TS_LAYER_ATTENTION && l->kv_lora_rank == 0)
    return 3;
  if (l->kind == TS_LAYER_DENSE && l->gated && l->vocab == 0 && l->experts == 0)
    return 2;
  return 1;
}

/* TorchTitan's Llama (projections=separate, the default with fsdp2): the attention's query, key
 * and value projections are three nn.Linear modules (wq, wk, wv) and a gated MLP's gate and up
 * projections two (w1, w3), each reading the same input, where Megatron-LM runs one fused GEMM
 * (linear_qkv, the gated linear_fc1). In backward each writes its own input gradient (tokens x
 * hidden, in the model's dtype) and autograd sums them: the n - 1 further gradients are each
 * written by their GEMM and read by the sum, 2 (n - 1) D bytes a token and hidden unit beyond
 * the fused GEMM's one write (cuBLAS or Inductor may fold a sum into a GEMM's epilogue as
 * beta = 1, which reads the same bytes). The rows are the tokens the chip's GEMMs see:
 * gathered over tp (sequence parallelism), its share under cp. The forward's and the weight
 * gradients' extra reads of the input overlap their GEMMs and are not charged. */
static void separate_projections(const ts_plan *p, int i, double mb, ts_pass pass, double *bytes,
                                 int *kernels)
{
  const ts_layer *l = &p->model->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  if (!p->separate_projections || !(pass == TS_PASS_BWD || pass == TS_PASS_DGRAD) ||
      !(l->tokens > 0))
    return;
  double n = projection_gemms(l);
  if (n < 2)
    return;
  double rows = (double)l->tokens * mb * (e->pdiv > 1 ? e->pdiv : 1.0) / e->cdiv;
  *bytes += 2.0 * (n - 1.0) * rows * (double)l->in_features * p->model->dtype_bytes;
  *kernels += 1;
}

/* The element-wise kernels of an eager stack beyond the fused ones trainsim's default costs
 * (ts_layer_elementwise_ops), per chip for the pass: kernels=eager for the block's ops, loss=eager
 * for the cross-entropy. Under recompute=op the forward's element-wise ops run again before
 * the backward (TorchTitan's per-op policy keeps only matrix products and attention): their
 * eager extra is added to the backward here, except a norm's, whose recomputation is its
 * forward op again (that op carries its own eager extra). */
static void eager_elementwise(const ts_plan *p, int i, double mb, ts_pass pass, double *bytes,
                              int *kernels)
{
  const ts_layer *l = &p->model->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  if (pass == TS_PASS_WGRAD || pass == TS_PASS_ATTN_RECOMPUTE)
    return;
  ts_elem_op ops[TS_ELEM_MAX_OPS];
  int n = ts_layer_elementwise_ops(p->model, l, ops);
  gboolean bwd = pass == TS_PASS_BWD || pass == TS_PASS_DGRAD;
  gboolean again = bwd && (p->recompute == TS_RECOMPUTE_OP || p->recompute == TS_RECOMPUTE_DOTS) &&
                   l->block >= 0 && l->kind != TS_LAYER_NORM;
  for (int j = 0; j < n; j++) {
    const ts_elem_op *o = &ops[j];
    if (o->loss ? p->loss != TS_LOSS_EAGER : p->kernels == TS_KERNELS_FUSED)
      continue;
    /* TorchTitan's fused_rmsnorm (torchtitan/models/norms.py, a Triton kernel forward and one
     * backward) moves what trainsim's fused norm op already costs. */
    if (p->kernels == TS_KERNELS_EAGER_FUSED_RMSNORM && strcmp(o->name, "rmsnorm") == 0)
      continue;
    /* The residual add works on the layer's output: split by tp only with sp. */
    double div = e->cdiv;
    if (l->residual && strcmp(o->name, "residual add") == 0 && !p->sp && e->pdiv > 1)
      div = e->cdiv / e->pdiv;
    double el = o->elems * mb / div;
    double b =
        bwd ? o->eager_bwd_bytes - o->fused_bwd_bytes : o->eager_fwd_bytes - o->fused_fwd_bytes;
    int k = bwd ? o->eager_bwd_kernels - o->fused_bwd_kernels
                : o->eager_fwd_kernels - o->fused_fwd_kernels;
    if (again) {
      b += o->eager_fwd_bytes - o->fused_fwd_bytes;
      k += o->eager_fwd_kernels - o->fused_fwd_kernels;
    }
    *bytes += el * b;
    *kernels += k;
  }
}

/*
 * layout=nchw (PyTorch's default contiguous format): tensor cores compute convolutions in NHWC
 * (NVIDIA's Convolutional Layers User's Guide, "Tensor Layouts In Memory: NCHW vs NHWC": given
 * NCHW tensors, cuDNN transposes them to NHWC and back around a tensor-core kernel, and the
 * transposes are memory-bound kernels of their own). Per convolution call, each activation
 * operand is read and written once more: the forward's input and output, the input gradient's
 * output gradient and input gradient, the weight gradient's input and output gradient, D bytes
 * an element each way (the filters' transposes, of the parameters only, are left out). A
 * convolution on CUDA cores (fp32, or a chip whose 16-bit rate is not above its fp32 one, such
 * as the P40) runs NCHW natively: nothing. Counted from the layouts, not fitted.
 */
static void conv_layout_transposes(const ts_plan *p, int i, double mb, ts_pass pass,
                                   const ts_op_shape *s, double *bytes, int *kernels)
{
  const ts_layer *l = &p->model->layers[i];
  const ts_chip *c = &p->topo->chip;
  if (!p->layout_nchw || l->kind != TS_LAYER_CONV2D || s->oclass != TS_OPC_GEMM ||
      c->systolic > 0 || pass == TS_PASS_ATTN_RECOMPUTE)
    return;
  gboolean tensor = s->prec == TS_PRECISION_TF32   ? c->peak_flops_tf32 > 0
                    : s->prec == TS_PRECISION_FP32 ? FALSE
                                                   : c->peak_flops > c->peak_flops_fp32;
  if (!tensor)
    return;
  double D = p->model->dtype_bytes, ei = l->in_act_elems * mb, eo = l->out_act_elems * mb;
  double per = 2.0 * D * (ei + eo); /* one call's two operands, each read and written */
  gboolean dgrad = !(l->src < 0);   /* the first layer's input needs no gradient */
  int calls = pass == TS_PASS_FWD     ? 1
              : pass == TS_PASS_BWD   ? 1 + (dgrad ? 1 : 0)
              : pass == TS_PASS_DGRAD ? (dgrad ? 1 : 0)
                                      : 1;
  *bytes += calls * per / p->exec[i].cdiv;
  *kernels += 2 * calls;
}

void ts_plan_layer_shape(const ts_plan *p, int i, double mb, ts_pass pass, ts_op_shape *s)
{
  const ts_layer *l = &p->model->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  memset(s, 0, sizeof *s);
  if (pass == TS_PASS_OP_RECOMPUTE && e->op_rc_n <= 0)
    pass = TS_PASS_FWD; /* a norm: its whole forward again */
  if (pass == TS_PASS_OP_RECOMPUTE) {
    /* The recomputed products as one GEMM of their total width on the rows this chip holds
     * (its share of the layer's work beyond the parameter split: sequence or context). */
    int other;
    ts_layer_precision(l, p->precision, &s->prec, &other);
    s->oclass = TS_OPC_GEMM;
    s->m = (double)l->tokens * mb * (e->pdiv > 1 ? e->pdiv : 1.0) / e->cdiv;
    s->n = e->op_rc_n, s->k = e->op_rc_k;
    s->kernels = e->op_rc_kernels;
    return;
  }
  int kf = fwd_kernels(p, l);
  s->kernels = pass == TS_PASS_FWD ? kf : pass == TS_PASS_BWD ? 2 * kf : kf;
  if (l->kind == TS_LAYER_DENSE && l->vocab > 0 && p->loss != TS_LOSS_EAGER) {
    /* The logits: their GEMMs and the loss's kernels (the input gradient's pass carries the
     * loss's backward when the two gradients are separate ops). */
    s->kernels = pass == TS_PASS_FWD     ? 1 + CE_FWD_KERNELS
                 : pass == TS_PASS_BWD   ? 2 + CE_BWD_KERNELS
                 : pass == TS_PASS_DGRAD ? 1 + CE_BWD_KERNELS
                                         : 1;
  }
  int other;
  ts_layer_precision(l, p->precision, &s->prec, &other);
  double T = (double)l->tokens;
  switch (l->kind) {
  case TS_LAYER_DENSE: {
    s->oclass = TS_OPC_GEMM;
    double m = T * mb, n = (double)l->out_features, k = (double)l->in_features;
    split_dims(l, e, &m, &n, &k);
    if (l->experts > 0) {
      /* Each rank's experts see top_k x the tokens over the experts it holds. */
      double E = (double)l->experts, held = E / e->ediv;
      m = m * (double)l->top_k * e->ediv / E;
      s->batch = held;
    }
    s->m = m, s->n = n, s->k = k;
    s->epilogue_bytes = dense_epilogue_bytes(p, l, e, pass, m * n * (s->batch > 0 ? s->batch : 1));
    break;
  }
  case TS_LAYER_CONV2D: {
    double g = l->groups > 1 ? (double)l->groups : 1.0;
    double m = (double)l->out_h * (double)l->out_w * mb, n = (double)l->out_features / g,
           k = (double)l->in_features / g * (double)l->kernel_h * (double)l->kernel_w;
    split_dims(l, e, &m, &n, &k);
    /* A depthwise or narrow grouped convolution is not a GEMM a tensor core can use: it runs
     * as a memory-bound kernel. */
    s->oclass = n < 16 ? TS_OPC_MEMORY : TS_OPC_GEMM;
    s->m = m, s->n = n, s->k = k, s->batch = g;
    s->conv3x3 = l->kernel_h == 3 && l->kernel_w == 3 && l->stride == 1 && g == 1 ? 1.0 : 0.0;
    /* Input channels not a multiple of the tensor cores' 8 (fp16): cuDNN pads them, to 4 for a
     * stride-2 layer of at most 4 (NVIDIA's Convolutional Layers User's Guide: a first layer's
     * 3-channel images pad to 4 with a stride of 2), else to the next multiple of 8. Costed
     * only where it applies (ts_cost.c: 16-bit on a GPU). */
    double C = (double)l->in_features / g;
    double Cp = C <= 4 && l->stride >= 2 ? 4.0 : ceil(C / 8.0) * 8.0;
    /* TF32 tensor cores take channels in multiples of 4 (the same guide, "Channels In And
     * Out": 4 for TF32, 8 for FP16). */
    if (s->prec == TS_PRECISION_TF32)
      Cp = ceil(C / 4.0) * 4.0;
    s->chan_pad = Cp > C ? Cp / C : 0.0;
    if (s->oclass == TS_OPC_MEMORY)
      s->m = s->n = s->k = s->batch = 0;
    break;
  }
  case TS_LAYER_ATTENTION: {
    double S, I, a = (double)l->heads, h = (double)l->in_features;
    attention_dims(l, &T, &S, &I);
    double div = e->pdiv > 1 ? e->pdiv : 1.0, rows = e->pdiv > 1 ? 1.0 : e->cdiv;
    s->oclass = unfused_attention(p, l) ? TS_OPC_ATTENTION : TS_OPC_FLASH;
    /* Written only where it changes the cost (a fused-attention rate for the kernel). */
    s->causal = l->causal && (attn_kernel_rate(&p->topo->chip, p->attn_kernel) > 0 ||
                              (p->topo->chip.systolic > 0 && s->oclass == TS_OPC_FLASH))
                    ? 1.0
                    : 0.0;
    /* The Pallas kernels' block of this pass (attn-block=FWD:BWD; a recomputed core is a
     * forward), 0: the default. */
    s->attn_block =
        pass == TS_PASS_BWD || pass == TS_PASS_DGRAD ? p->attn_block_bwd : p->attn_block_fwd;
    /* The projections: QKV (T x h) x (h x 3I/tp) and output (T x I/tp) x (I/tp x h), written
     * as one GEMM shape of their width. */
    s->m = T * mb / rows, s->n = I / div, s->k = h;
    /* The core per (sample, head): scores T x S over the head width, then the context. */
    s->aq = T / rows, s->akv = S, s->ad = a > 0 ? I / a : I, s->abatch = a / div * mb;
    double core = 4.0 * T * S * I * mb / div / rows, scores = a * T * S * mb / div / rows;
    double D = p->model->dtype_bytes;
    /* After the core: the context's layout copy (unfused: permute + contiguous, T x I/tp
     * read and written) and the output projection's bias + dropout + residual add over T x h. */
    double ctx = unfused_attention(p, l) ? 2.0 * D * T * mb / rows * I / div : 0.0;
    s->epilogue_bytes = pass == TS_PASS_ATTN_RECOMPUTE
                            ? 0.0
                            : ctx + dense_epilogue_bytes(p, l, e, pass, T * mb / rows * h);
    if (pass == TS_PASS_FWD) {
      s->attn_flops = core;
      s->scores_bytes = unfused_attention(p, l) ? scores * (6.0 * D + 1.0) : 0.0;
    } else if (pass == TS_PASS_BWD || pass == TS_PASS_DGRAD) {
      s->attn_flops = 2.0 * core;
      /* A TPU's causal core is the Pallas backward (jax.experimental.pallas.ops.tpu
       * splash_attention / flash_attention): the dK/dV kernel recomputes the scores and dP
       * beside dV and dK, the dQ kernel the scores and dP again beside dQ, 7 block matmuls
       * where attn_flops counts 4; fused into one kernel (attn-bwd=fused, MaxText's
       * sa_use_fused_bwd_kernel) 5. */
      if (s->causal > 0 && p->topo->chip.systolic > 0 && s->oclass == TS_OPC_FLASH)
        s->attn_rerun = p->attn_bwd_fused ? 5.0 / 4.0 : 7.0 / 4.0;
      s->scores_bytes = unfused_attention(p, l) ? scores * (8.0 * D + 1.0) : 0.0;
    } else if (pass == TS_PASS_ATTN_RECOMPUTE) {
      s->attn_flops = core;
      s->scores_bytes = unfused_attention(p, l) ? scores * (6.0 * D + 1.0) : 0.0;
      s->m = s->n = s->k = 0;
      s->kernels = unfused_attention(p, l) ? 5 : 1;
    }
    if (eager_softmax(p, l, s->abatch, s->aq, s->akv) && pass != TS_PASS_WGRAD) {
      gboolean bwd = pass == TS_PASS_BWD || pass == TS_PASS_DGRAD;
      s->kernels += EAGER_SOFTMAX_EXTRA_KERNELS;
      s->scores_bytes += scores * (bwd ? 36.0 - D : EAGER_SOFTMAX_FWD_EXTRA_BYTES);
    }
    /* The stack's fused kernel (attn-kernel=): its published rate over FlashAttention-2's, the
     * backward's in the backward passes, at the core's key length. */
    if (s->oclass == TS_OPC_FLASH && p->attn_kernel == TS_ATTN_KERNEL_CUDNN)
      s->attn_speedup = ts_attn_kernel_speedup(
          p->attn_kernel, pass == TS_PASS_BWD || pass == TS_PASS_DGRAD, s->akv);
    /* A kernel with the chip's own published rate (triton, fa1; refused at plan time where the
     * profile has none). The published figures time forward and backward together and count
     * the backward as 2.5 forwards (it recomputes the scores: benchmark_flash_attention.py,
     * data/published/flash-attention/PROVENANCE.txt). Their time is spread over the passes as
     * the kernel's published forward and backward slowdowns against FlashAttention-2 spread it
     * (attn_kernel_pass_slowdown): 1 x sf : 2.5 x sb, the forward's share
     * phi = sf / (sf + 2.5 sb) (1 / 3.5 when not published apart; 0.219 for Triton). In
     * trainsim's 1 : 2 FLOP count that is the forward at 1 / (3 phi) of the rate, the backward
     * at 2 / (3 (1 - phi)) (3.5 / 3 and 3.5 / 3.75 at 1 / 3.5). Forward plus backward take what
     * they took; a recomputed forward (recompute=full re-runs the core) costs phi of them. */
    else if (s->oclass == TS_OPC_FLASH && p->attn_kernel != TS_ATTN_KERNEL_FA2) {
      double sf, sb;
      attn_kernel_pass_slowdown(p->attn_kernel, &sf, &sb);
      double phi = sf / (sf + (FLASH_PUBLISHED_FLOPS - 1.0) * sb);
      s->flash_eff = attn_kernel_rate(&p->topo->chip, p->attn_kernel) *
                     ts_attn_kernel_shape(p->attn_kernel, s->ad, s->akv) *
                     (pass == TS_PASS_BWD || pass == TS_PASS_DGRAD ? 2.0 / (3.0 * (1.0 - phi))
                                                                   : 1.0 / (3.0 * phi));
    }
    break;
  }
  default:
    s->oclass = TS_OPC_MEMORY;
    break;
  }
  double eb = 0.0;
  int ek = 0;
  eager_elementwise(p, i, mb, pass, &eb, &ek);
  fp8_scaling(p, l, s, pass, &eb, &ek);
  separate_projections(p, i, mb, pass, &eb, &ek);
  conv_layout_transposes(p, i, mb, pass, s, &eb, &ek);
  s->elem_bytes = eb;
  /* The gradients' FP8 GEMMs accumulate with fp32 promotion: torchao's Float8LinearConfig runs
   * only the output's with use_fast_accum (config.py at eab345c and 6243040:
   * gemm_config_grad_input / _grad_weight default to False), Transformer Engine likewise
   * (_2X_ACC_FPROP False, _2X_ACC_DGRAD / _2X_ACC_WGRAD True). */
  if (s->prec == TS_PRECISION_FP8 &&
      (pass == TS_PASS_BWD || pass == TS_PASS_DGRAD || pass == TS_PASS_WGRAD))
    s->split_accum = 1.0;
  if (s->kernels > 0)
    s->kernels += ek;
}

void ts_plan_optimizer_shape(ts_op_shape *s)
{
  memset(s, 0, sizeof *s);
  s->oclass = TS_OPC_OPTIMIZER;
  s->prec = TS_PRECISION_FP32; /* Adam runs in fp32 on the master weights */
  /* A fused multi-tensor Adam (apex / PyTorch foreach): a handful of launches per step. */
  s->kernels = 4;
}

void ts_plan_sgd_loop_shape(const ts_plan *p, int device, ts_op_shape *s)
{
  const ts_model *m = p->model;
  if (m->optimizer != TS_OPT_SGD || p->kernels == TS_KERNELS_FUSED || p->topo->chip.systolic > 0)
    return;
  /* Eager PyTorch before 2.0 (torch.optim.SGD without foreach, as NVIDIA DeepLearningExamples'
   * ConvNets and torchgpipe ran it): per parameter tensor, the weight decay's add (not on
   * batch-norm tensors: the examples' default bn_weight_decay=False), the velocity's mul_ and
   * add_, the parameter's add_, then optimizer.zero_grad()'s zero_ of its gradient; 5 ops, 4
   * on a norm's tensors. The chip's tensors: its stages' layers, each weight and bias, a
   * batch norm's scale and shift. */
  int pp = p->degree[TS_AX_PP], ops = 0;
  for (int k = device; k < p->nstages; k += pp)
    for (int i = p->stage_first[k]; i < p->stage_first[k + 1]; i++) {
      const ts_layer *l = &m->layers[i];
      if (!(l->params > 0))
        continue;
      if (l->kind == TS_LAYER_NORM)
        ops += 2 * 4;
      else
        ops += (l->bias ? 2 : 1) * 5;
    }
  /* Mixed precision with fp16 (torch.cuda.amp): GradScaler.step unscales the gradients (one
   * multi-tensor op), reads its found-inf flag back (.item(): the host waits for the backward
   * and the gradient all-reduce) before the loop, and updates the scale after it (one op).
   * Without a scaler (fp32, bf16) nothing is read back: the host queues the loop behind the
   * backward's kernels while they run. */
  gboolean scaler =
      m->fp16 && p->precision != TS_PRECISION_FP32 && p->precision != TS_PRECISION_TF32;
  s->kernels = ops + (scaler ? 2 : 0);
  s->host_op_us = TS_TORCH_OPTIM_OP_US;
  s->no_sync = scaler ? 0.0 : 1.0;
}

double ts_plan_bertadam_shape(const ts_plan *p, int device, ts_op_shape *s)
{
  const ts_model *m = p->model;
  /* BertAdam (DeepLearningExamples' PyTorch/LanguageModeling/BERT/optimization.py, as
   * run_squad.py runs it without --fp16; pytorch-pretrained-BERT's before it) is a Python loop
   * over the parameter tensors, each line its own fp32 kernel(s) through memory (PyTorch 1.10,
   * the pytorch:21.11 container). Per tensor, bytes per element and kernels:
   *   clip_grad_norm_(p): the norm (read 4), stack, norm, add, div, clamp, the gradient's
   *     mul_ (4 + 4): 12 bytes, 7 kernels;
   *   next_m.mul_(b1).add_(1 - b1, grad): 8 + 12; next_v.mul_(b2).addcmul_(1 - b2, grad,
   *     grad): 8 + 16; update = next_m / (next_v.sqrt() + e): 8 + 8 + 12: 72 bytes, 7 kernels;
   *   update += weight_decay * p (not on biases and LayerNorm: run_squad.py's no_decay):
   *     8 + 12 bytes, 2 kernels;
   *   lr * update, then p.add_(-update_with_lr): 8, 8 + 12: 28 bytes, 3 kernels;
   *   optimizer.zero_grad(): the gradient's zero_, 4 bytes, 1 kernel.
   * 136 bytes and 20 kernels a decayed element and tensor, 116 and 18 the others. Before the
   * loop run_squad.py's GradientClipper takes the global norm with apex's multi-tensor
   * l2norm (read 4, two kernels), reads it back (.item(): the host waits for the backward) and
   * scales by it (4 + 4, one kernel). The tensors as BERT's modeling.py holds them: the
   * embeddings' word, position and token-type tables; per attention layer the query, key,
   * value and output weights with their biases; a dense layer's weight and bias (a tied
   * decoder: its bias); a LayerNorm's weight and bias. Returns the bytes the step moves. */
  int pp = p->degree[TS_AX_PP], kernels = 3;
  double bytes = 0.0;
  for (int k = device; k < p->nstages; k += pp)
    for (int i = p->stage_first[k]; i < p->stage_first[k + 1]; i++) {
      const ts_layer *l = &m->layers[i];
      double held = ts_plan_layer_params(p, i);
      if (!(l->params > 0) || !(held > 0))
        continue;
      double share = held / l->params, bias = 0.0;
      int weights = 1, biases = 0;
      if (l->kind == TS_LAYER_NORM) {
        weights = 0, biases = 2, bias = l->params;
      } else if (l->kind == TS_LAYER_EMBEDDING) {
        weights = 3;
      } else if (l->tied) {
        weights = 0, biases = 1, bias = l->params;
      } else if (l->kind == TS_LAYER_ATTENTION) {
        weights = 4, biases = l->bias ? 4 : 0;
        double inner = (double)(l->inner > 0 ? l->inner : l->in_features);
        bias = l->bias ? 3.0 * inner + (double)l->in_features : 0.0;
      } else if (l->bias) {
        biases = 1, bias = (double)l->out_features;
      }
      bias = fmin(bias * share, held);
      kernels += 20 * weights + 18 * biases;
      bytes += 136.0 * (held - bias) + 116.0 * bias + 12.0 * held;
    }
  s->kernels = kernels;
  s->host_op_us = TS_TORCH_OPTIM_OP_US;
  return bytes;
}

/* Seconds of compute a layer costs per micro-batch (forward, backward, recomputation), as the
 * trace's ops will cost (ts_cost). */
static double layer_cost(const ts_plan *p, int i, double mb)
{
  const ts_model *m = p->model;
  const ts_layer *l = &m->layers[i];
  const ts_layer_exec *e = &p->exec[i];
  const ts_chip *c = &p->topo->chip;
  ts_op_shape s;
  double fwd = l->fwd_flops * mb / e->cdiv, fmem = ts_layer_fwd_mem_bytes_batch(m, l, mb) / e->cdiv;
  ts_plan_layer_shape(p, i, mb, TS_PASS_FWD, &s);
  double t = ts_cost_compute(c, fwd, fmem, &s);
  if (ts_plan_recomputes_forward(p) && !ts_plan_recompute_skips(p, i) &&
      (m->layers[i].block < 0 || ts_plan_layer_recomputed(p, i))) {
    /* stage:except-last: (M - 1) of the M micro-batches re-run, on average per micro-batch */
    double M = (double)MAX(p->n_micro, 1);
    t *= p->recompute_keep_last ? 1.0 + (M - 1.0) / M : 2.0;
  }
  ts_plan_layer_shape(p, i, mb, TS_PASS_BWD, &s);
  t += ts_cost_compute(c, (l->bwd_input_flops + l->bwd_weight_flops) * mb / e->cdiv,
                       ts_layer_bwd_mem_bytes_batch(m, l, mb) / e->cdiv, &s);
  if (e->recompute_flops > 0) {
    ts_plan_layer_shape(p, i, mb, TS_PASS_ATTN_RECOMPUTE, &s);
    t += ts_cost_compute(c, e->recompute_flops * mb, 0.0, &s);
  }
  if (e->op_rc_flops > 0 || e->op_rc_mem > 0) {
    ts_plan_layer_shape(p, i, mb, TS_PASS_OP_RECOMPUTE, &s);
    t += ts_cost_compute(c, e->op_rc_flops * mb, e->op_rc_mem * mb, &s);
  }
  return t;
}

/* Contiguous partition of n items with costs w into S non-empty parts minimising the largest
 * part (the pipeline's slowest stage sets its rate). Dynamic programme over prefix sums; the
 * best split point is found by bisection, as the best of k-1 parts grows with the prefix
 * while the last part shrinks. cut[k] = first item of part k (cut[S] = n). */
static void partition(const double *w, int n, int S, int *cut)
{
  double *pre = g_new(double, n + 1);
  pre[0] = 0;
  for (int i = 0; i < n; i++)
    pre[i + 1] = pre[i] + w[i];
  double *best = g_new(double, (gsize)(S + 1) * (gsize)(n + 1));
  int *arg = g_new0(int, (gsize)(S + 1) * (gsize)(n + 1));
#define B(k, j) best[(gsize)(k) * (gsize)(n + 1) + (gsize)(j)]
#define A(k, j) arg[(gsize)(k) * (gsize)(n + 1) + (gsize)(j)]
  for (int j = 0; j <= n; j++)
    B(1, j) = pre[j];
  for (int k = 2; k <= S; k++)
    for (int j = k; j <= n; j++) {
      /* i in [k-1, j-1]: the last part is items [i, j). */
      int lo = k - 1, hi = j - 1;
      while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (B(k - 1, mid) >= pre[j] - pre[mid])
          hi = mid;
        else
          lo = mid + 1;
      }
      int bi = lo;
      double bv = MAX(B(k - 1, lo), pre[j] - pre[lo]);
      if (lo - 1 >= k - 1) {
        double v = MAX(B(k - 1, lo - 1), pre[j] - pre[lo - 1]);
        if (v <= bv) {
          bv = v;
          bi = lo - 1;
        }
      }
      B(k, j) = bv;
      A(k, j) = bi;
    }
  cut[S] = n;
  for (int k = S; k >= 2; k--)
    cut[k - 1] = A(k, cut[k]);
  cut[0] = 0;
#undef B
#undef A
  g_free(pre);
  g_free(best);
  g_free(arg);
}

/* Runs of layers of one block ("atoms" of the stage balancer). */
static int count_blocks(const ts_model *m)
{
  int na = 0;
  for (int i = 0; i < m->nlayers; i++)
    if (i == 0 || !same_block(m, i - 1, i))
      na++;
  return na;
}

/* Whether pipeline stages may only start at a block: a transformer block's residuals add values
 * from earlier in the block (the input of the norm opening each sublayer, pre-LN), which a cut
 * inside the block would have to send along with the boundary activation; Megatron-LM cuts
 * between transformer layers only (Narayanan et al. 2021 SC, section 2.2). */
static gboolean cuts_at_blocks_only(const ts_model *m)
{
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].kind == TS_LAYER_ATTENTION)
      return TRUE;
  return FALSE;
}

/* Balances the virtual stages by compute, cutting only between blocks when there are enough. */
static void balance_stages(ts_plan *p)
{
  const ts_model *m = p->model;
  int n = m->nlayers, S = p->nstages;
  /* Atoms: runs of layers of one block. */
  int *atom_first = g_new(int, n + 1), na = 0;
  for (int i = 0; i < n; i++)
    if (i == 0 || !same_block(m, i - 1, i))
      atom_first[na++] = i;
  atom_first[na] = n;
  gboolean by_atoms = na >= S;
  int items = by_atoms ? na : n;
  double *w = g_new0(double, (gsize)MAX(items, 1));
  for (int a = 0; a < items; a++) {
    int lo = by_atoms ? atom_first[a] : a, hi = by_atoms ? atom_first[a + 1] : a + 1;
    for (int i = lo; i < hi; i++)
      w[a] += layer_cost(p, i, (double)p->micro_batch);
  }
  int *cut = g_new(int, S + 1);
  partition(w, items, S, cut);
  for (int k = 0; k <= S; k++)
    p->stage_first[k] = by_atoms ? atom_first[cut[k]] : cut[k];
  g_free(cut);
  g_free(w);
  g_free(atom_first);
}

/* ---- memory ------------------------------------------------------------------------- */

int ts_plan_tied_group(const ts_plan *p, int *device, double *params)
{
  const ts_model *m = p->model;
  int pp = p->degree[TS_AX_PP], n = 0;
  if (pp <= 1)
    return 0;
  /* The table: the first embedding with parameters of its own. Its users: tied logits, and a
   * decoder's embedding that looks up the same table. */
  int owner = -1;
  for (int i = 0; i < m->nlayers && owner < 0; i++)
    if (m->layers[i].kind == TS_LAYER_EMBEDDING && !m->layers[i].tied && m->layers[i].vocab > 0)
      owner = i;
  if (owner < 0)
    return 0;
  device[n] = ts_plan_stage_of_layer(p, owner) % pp;
  params[n++] = 0.0;
  for (int i = 0; i < m->nlayers; i++) {
    const ts_layer *l = &m->layers[i];
    gboolean user = l->tied && (l->kind == TS_LAYER_DENSE || l->kind == TS_LAYER_EMBEDDING);
    if (!user)
      continue;
    int d = ts_plan_stage_of_layer(p, i) % pp;
    gboolean seen = FALSE;
    for (int k = 0; k < n && !seen; k++)
      seen = device[k] == d;
    if (seen)
      continue;
    device[n] = d;
    params[n++] = (double)l->vocab * (double)m->layers[owner].out_features / p->exec[i].pdiv;
  }
  return n > 1 ? n : 0;
}

void ts_plan_device_params_split(const ts_plan *p, int device, double *dense, double *expert)
{
  int pp = p->degree[TS_AX_PP];
  *dense = *expert = 0;
  for (int k = device; k < p->nstages; k += pp)
    for (int i = p->stage_first[k]; i < p->stage_first[k + 1]; i++)
      *(p->exec[i].expert ? expert : dense) += ts_plan_layer_params(p, i);
  int *dev = g_new(int, pp);
  double *copy = g_new(double, pp);
  int n = ts_plan_tied_group(p, dev, copy);
  for (int k = 1; k < n; k++)
    if (dev[k] == device)
      *dense += copy[k];
  g_free(dev);
  g_free(copy);
}

double ts_plan_device_params(const ts_plan *p, int device)
{
  double d, e;
  ts_plan_device_params_split(p, device, &d, &e);
  return d + e;
}

double ts_plan_device_shard_params(const ts_plan *p, int device)
{
  double d, e;
  ts_plan_device_params_split(p, device, &d, &e);
  if (p->zero == 0)
    return d + e;
  return d / ts_plan_shard_ranks(p) + e / (ts_plan_shard_ranks(p) / p->ep);
}

int ts_plan_grad_ranks(const ts_plan *p)
{
  return p->degree[TS_AX_DP] * p->degree[TS_AX_CP];
}

int ts_plan_shard_ranks(const ts_plan *p)
{
  return (p->shard > 0 ? p->shard : p->degree[TS_AX_DP]) * p->degree[TS_AX_CP];
}

double ts_plan_bucket_bytes(const ts_plan *p, double psi, double bucket)
{
  double D = p->model->dtype_bytes, grads = D * psi;
  if (ts_plan_grad_ranks(p) <= 1) /* dp x cp ranks sum gradients */
    return 0.0;
  /* ZeRO 2 and 3 keep a gradient shard only (and offload keeps the gradients in host memory):
   * the full gradients of the layers just run go through reduce buckets (DeepSpeed's ipg
   * buffers, two with overlap_comm), which hold at most every gradient once, however large the
   * bucket ("no bucketing" is one bucket of every gradient, not two). */
  if (p->zero >= 2 || p->offload != TS_OFFLOAD_NONE)
    return MIN(2.0 * bucket, grads);
  /* The gradients themselves live in one contiguous buffer, the buckets are views of it
   * (Megatron-LM's DistributedDataParallel grad buffer, PyTorch DDP with
   * gradient_as_bucket_view=True, FSDP); PyTorch DDP's default copies every gradient into its
   * buckets: one more gradient-sized buffer, whatever the bucket size. */
  return p->bucket_copy ? grads : 0.0;
}

/* The bytes per sample a recomputed block's checkpoint (its input) keeps. On a GPU the input
 * as the layer receives it: whole on every tensor-parallel rank unless sequence parallelism
 * shards it. On a TPU the program is XLA's SPMD partitioning of the whole model (GSPMD, Xu et
 * al. 2021, sections 3.3 and 5: the 2D layout shards the [batch, length, model] activations
 * between layers over the model axis as well as the batch; PaLM, Chowdhery et al. 2022,
 * section 4, trains that way; MaxText's logical_axis_rules map activation_embed to the
 * tensor axis): the residual stream a checkpoint saves is 1/tp of the layer's input whatever
 * the collectives around the layer. Only the memory term: the collectives and the work are
 * the split's. */
static double checkpoint_bytes(const ts_plan *p, int i)
{
  const ts_layer_exec *e = &p->exec[i];
  int tp = p->degree[TS_AX_TP], cp = p->degree[TS_AX_CP];
  if (p->topo->chip.systolic <= 0 || tp <= 1)
    return e->in_bytes;
  double sharded = p->model->layers[i].in_act_elems * p->model->dtype_bytes / tp / cp;
  return MIN(e->in_bytes, sharded);
}

/* TPU (XLA) memory terms, used by ts_plan_memory_at when the chip has a systolic array and the
 * device runs the whole model (pp = 1, one chunk), as MaxText's runs do.
 *
 * XLA compiles the training step into one program and assigns its buffers by live range over
 * the scheduled program (buffer assignment's heap simulation), so the peak is the largest sum
 * of the buffers live at one point, not the sum of each phase's largest: the loss's gradient
 * (vocabulary wide) is freed before any block's backward starts, and the layers after the last
 * block free what they kept with it. XLA fuses element-wise work into the matmuls and
 * reductions that consume it (the time model charges no separate element-wise kernels on a
 * TPU either), so what a backward reads from an element-wise op is recomputed inside its
 * consumer and never materialised:
 * - the loss keeps the logits as the matmul wrote them, in the activation type, not an fp32
 *   copy (the fp32 cast, the softmax and its exp are fused into the loss's forward reduction
 *   and again into its backward; MaxText's cross_entropy_with_logits, max_utils.py);
 * - a recomputed block materialises the outputs of its matmuls the backward reads (Q, K, V,
 *   the output projection's, an MLP's first products: dots_kept_bytes, the set of
 *   checkpoint_dots_with_no_batch_dims) and the attention kernel's output; norms, rotary and
 *   the activation are recomputed inside the matmuls that read them. */
static double xla_logits_fp32_bytes(const ts_plan *p, int i)
{
  const ts_layer *l = &p->model->layers[i];
  if (l->kind != TS_LAYER_DENSE || l->vocab <= 0 || p->loss == TS_LOSS_EAGER)
    return 0.0;
  /* ts_model.c keeps the loss's logits in fp32 (4 bytes); XLA keeps them in D. */
  return (4.0 - p->model->dtype_bytes) * (double)l->out_act_elems / p->exec[i].cdiv;
}

/* What layer i keeps for its backward per sample: its saved activations, less on a TPU the
 * fp32 copy of the logits XLA does not make. */
static double kept_act_bytes(const ts_plan *p, int i)
{
  double xla = p->topo->chip.systolic > 0 ? xla_logits_fp32_bytes(p, i) : 0.0;
  return p->exec[i].act_bytes - xla;
}

/* What a layer of a recomputed block materialises again before its backward (per sample). */
static double xla_recomputed_bytes(const ts_plan *p, int i)
{
  const ts_layer *l = &p->model->layers[i];
  ts_layer_exec tmp = p->exec[i];
  double kept = dots_kept_bytes(p->model, l, &tmp, FALSE);
  if (l->kind == TS_LAYER_ATTENTION && l->kv_lora_rank == 0 && !l->cross) {
    double T, S, I;
    attention_dims(l, &T, &S, &I);
    double div = tmp.pdiv > 1 ? tmp.pdiv : 1.0;
    kept += T * I / div * p->model->dtype_bytes; /* the attention kernel's output */
  }
  return kept;
}

/* The working memory of the forward-backward on top of every kept activation (pp = 1, one
 * chunk): the backward visits the layers last to first and frees what each kept; at layer i's
 * backward, a recomputed block holds its materialised tensors up to i, and i's output and
 * input gradients are live with its block's residual-stream gradient, while the layers after
 * i have freed what they kept. The peak of that over i (>= 0: the last layer frees nothing
 * before its backward). */
static double xla_backward_extra(const ts_plan *p, double mb)
{
  const ts_model *m = p->model;
  int n = p->stage_first[1] - p->stage_first[0];
  double *kept = g_new0(double, n > 0 ? n : 1), *need = g_new0(double, n > 0 ? n : 1);
  gboolean full = ts_plan_recomputes_forward(p);
  double rec = 0, block_in = 0;
  int cur_block = -2;
  for (int k = 0; k < n; k++) {
    int i = p->stage_first[0] + k;
    const ts_layer_exec *e = &p->exec[i];
    const ts_layer *l = &m->layers[i];
    if (l->block < 0 || l->block != cur_block) {
      cur_block = l->block;
      rec = 0;
      block_in = l->block >= 0 ? e->in_bytes * mb : 0.0;
    }
    if (full && p->unit[i] >= 0) {
      if (p->unit[i] == i || k == 0)
        kept[k] = checkpoint_bytes(p, i) * mb;
      rec += xla_recomputed_bytes(p, i) * mb;
    } else {
      kept[k] = kept_act_bytes(p, i) * mb;
      /* Selective and dots recomputation run the attention kernel forward again before the
       * block's backward. */
      if (l->block >= 0 && l->kind == TS_LAYER_ATTENTION && e->recompute_flops > 0) {
        double T, S, I;
        attention_dims(l, &T, &S, &I);
        rec += T * I / (e->pdiv > 1 ? e->pdiv : 1.0) * m->dtype_bytes * mb;
      }
      /* dots:except-mlpwi materialises the MLP's first products again. */
      if (p->recompute_mlpwi && l->block >= 0 && l->kind == TS_LAYER_DENSE) {
        ts_layer_exec tmp = *e;
        double saved = dots_kept_bytes(m, l, &tmp, FALSE);
        rec += (saved - dots_kept_bytes(m, l, &tmp, TRUE)) * mb;
      }
    }
    need[k] = rec + (e->in_bytes + e->out_bytes) * mb + block_in;
  }
  double after = 0, best = 0;
  for (int k = n - 1; k >= 0; k--) {
    best = MAX(best, need[k] - after);
    after += kept[k];
  }
  g_free(kept);
  g_free(need);
  return best;
}

/* PyTorch's CUDA caching allocator as of torch 1.3 (c10/cuda/CUDACachingAllocator.cpp), the
 * allocator of torchgpipe's benchmarks: a request is rounded up to 512 bytes; one of at most
 * 1 MiB comes from the small pool, whose segments are 2 MiB; a larger one from the large pool,
 * whose new segment is 20 MiB for a request under 10 MiB, else the request rounded up to 2 MiB.
 * A free block serves the smallest fit (best fit) and is split when what remains is at least
 * 512 bytes (small pool) or more than 1 MiB (large); otherwise the request takes it whole.
 * Free blocks belong to the stream that allocated them and serve no other stream. */
#define TS_ALLOC_MIB 1048576.0

typedef struct {
  double small[64], large[64]; /* free blocks of one stream's pools, bytes */
  int nsmall, nlarge;
  double reserved; /* segments the stream holds, bytes */
} ts_stream_pool;

static void stream_pool_alloc(ts_stream_pool *sp, double bytes)
{
  if (bytes <= 0)
    return;
  double s = bytes < 512.0 ? 512.0 : 512.0 * ceil(bytes / 512.0);
  gboolean small = s <= TS_ALLOC_MIB;
  double *fb = small ? sp->small : sp->large;
  int *n = small ? &sp->nsmall : &sp->nlarge;
  int best = -1;
  for (int k = 0; k < *n; k++)
    if (fb[k] >= s && (best < 0 || fb[k] < fb[best]))
      best = k;
  if (best < 0) {
    double seg = small                     ? 2.0 * TS_ALLOC_MIB
                 : s < 10.0 * TS_ALLOC_MIB ? 20.0 * TS_ALLOC_MIB
                                           : 2.0 * TS_ALLOC_MIB * ceil(s / (2.0 * TS_ALLOC_MIB));
    sp->reserved += seg;
    if (*n == 64) { /* more blocks than tracked: forget the smallest free one */
      int lo = 0;
      for (int k = 1; k < *n; k++)
        lo = fb[k] < fb[lo] ? k : lo;
      fb[lo] = fb[--*n];
    }
    best = (*n)++;
    fb[best] = seg;
  }
  double rest = fb[best] - s;
  if (small ? rest >= 512.0 : rest > TS_ALLOC_MIB)
    fb[best] = rest;
  else
    fb[best] = fb[--*n];
}

/* The tensors a pipeline device receives per micro-batch under torchgpipe, bytes, into t[]
 * (at most n): its first block's inputs from before the stage, one per source layer (an
 * AmoebaNet cell's two: the previous cell's output and the one before it, torchgpipe's
 * (output, skip) tuple), each as the layer reading it takes it. Returns how many. */
static int stage_received(const ts_plan *p, int device, double mb, double *t, int n)
{
  const ts_model *m = p->model;
  int first = p->stage_first[device], k = 0, srcs[8];
  for (int i = first; i < p->stage_first[device + 1] && k < MIN(n, 8); i++) {
    if (i > first && m->layers[i].block != m->layers[first].block)
      break;
    int src = m->layers[i].src;
    if (src >= first || (src < 0 && i > first))
      continue;
    gboolean seen = FALSE;
    for (int j = 0; j < k; j++)
      seen = seen || srcs[j] == src;
    if (seen)
      continue;
    srcs[k] = src;
    t[k++] = p->exec[i].in_bytes * mb;
  }
  return k;
}

/* torchgpipe's copy streams (torchgpipe 0.0.5, the version of its benchmarks, on torch 1.3):
 * GPipe keeps one torch.cuda.Stream per device and micro-batch for the copies between devices
 * (gpipe.py, _ensure_copy_streams), and PyTorch hands those out round-robin from its pool of
 * 32 low-priority streams per device (c10/cuda/CUDAStream.cpp, kStreamsPerPool), so micro-batch
 * i uses stream i mod 32. Copy.forward allocates each micro-batch's received tensors on the
 * receiving device's copy stream (copy.py: the .to() under use_stream(next_stream)), where
 * they stay as the checkpoint's input until the micro-batch's backward; Copy.backward
 * allocates the gradient sent back on the sending device's copy stream. Each stream's blocks
 * serve that stream only (stream_pool_alloc), so every stream holds segments for its own
 * micro-batches' inputs and one gradient, and max_memory_cached counts all of them. Returns
 * the segments the copy streams of `device` reserve, bytes. */
#define TS_TORCH_STREAMS_PER_POOL 32

static double copy_stream_pools(const ts_plan *p, int device, double mb, int M)
{
  int pp = p->degree[TS_AX_PP], nin = 0, ngrad = 0;
  double in[8], grad[8];
  if (device > 0)
    nin = stage_received(p, device, mb, in, 8);
  if (device + 1 < pp)
    ngrad = stage_received(p, device + 1, mb, grad, 8);
  int S = MIN(M, TS_TORCH_STREAMS_PER_POOL);
  double total = 0;
  for (int k = 0; k < S && M > 0; k++) {
    int n = M / S + (k < M % S ? 1 : 0);
    ts_stream_pool sp = {0};
    for (int i = 0; i < n; i++)
      for (int j = 0; j < nin; j++)
        stream_pool_alloc(&sp, in[j]);
    for (int j = 0; j < ngrad; j++)
      stream_pool_alloc(&sp, grad[j]);
    total += sp.reserved;
  }
  return total;
}

void ts_plan_memory_at(const ts_plan *p, int device, gint64 micro_batch, ts_memory *mem)
{
  const ts_model *m = p->model;
  int pp = p->degree[TS_AX_PP], dp = p->degree[TS_AX_DP], V = p->chunks;
  /* ZeRO shards over the ranks holding the same parameters (dp x cp), or with hybrid sharding
   * over the shard group only (FSDP's HYBRID_SHARD, Zhao et al. 2023, section 3.2.1; MiCS,
   * Zhang et al. 2022, section 3.1): states then divide by the group's size, not dp's. */
  double D = m->dtype_bytes, mb = (double)micro_batch, N = ts_plan_shard_ranks(p);
  memset(mem, 0, sizeof *mem);
  gboolean tpu = p->topo->chip.systolic > 0; /* XLA's program (xla_backward_extra) */
  mem->stage = device;
  double psi_d, psi_e;
  ts_plan_device_params_split(p, device, &psi_d, &psi_e);
  double psi = psi_d + psi_e;
  /* Expert parameters are replicated over dp / ep ranks only, so ZeRO shards them over those. */
  double Ne = N / p->ep;
  double shard = psi_d / N + psi_e / Ne;
  /* Model states (ZeRO, Rajbhandari et al. 2020, section 5.1, Figure 1): 16-bit parameters
   * and gradients, K bytes of optimizer state per parameter; stage 1 partitions the
   * optimizer state over the N data-parallel ranks, stage 2 the gradients too, stage 3 the
   * parameters too. */
  double K = ts_plan_optimizer_bytes_per_param(m);
  mem->params = D * (p->zero >= 3 ? shard : psi);
  mem->grads = D * (p->zero >= 2 ? shard : psi);
  mem->optimizer = K * (p->zero >= 1 ? shard : psi);
  if (p->fsdp2) {
    /* FSDP2 with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=float32), as TorchTitan
     * runs it: the sharded parameter is the fp32 master, its gradient shard fp32, Adam's two
     * moments fp32 (the same 16 bytes per parameter as ZeRO-3, split differently; SGD's one
     * momentum, 12). */
    mem->params = 4.0 * shard;
    mem->grads = 4.0 * shard;
    mem->optimizer = (K + 2.0 * D - 8.0) * shard;
  }
  /* Offload (ZeRO-Offload, Ren et al. 2021, section 4.1: optimizer state and gradients live
   * in host memory, parameters stay on the device; ZeRO-Infinity, Rajbhandari et al. 2021,
   * section 5: on NVMe, and with stage 3 the parameters too). */
  /* Parameter servers (GeePS, Cui et al. 2016, section 3.2) keep the optimizer state: a
   * colocated server holds one shard of it beside its worker; dedicated servers take it off
   * the chips entirely. */
  if (p->ps > 0)
    mem->optimizer = p->ps_placement == TS_PS_COLOCATED ? K * psi / p->ps : 0.0;
  if (p->offload == TS_OFFLOAD_CPU) {
    mem->host = mem->optimizer + mem->grads;
    mem->optimizer = mem->grads = 0;
  } else if (p->offload == TS_OFFLOAD_NVME) {
    mem->nvme = mem->optimizer + mem->grads + (p->zero >= 3 ? mem->params : 0);
    if (p->zero >= 3)
      mem->params = 0;
    mem->optimizer = mem->grads = 0;
  }
  /* Activations the schedule holds: walk its order, adding a micro-batch's activations of a
   * chunk at its forward and releasing them at its backward; the peak is what is kept. */
  gint64 per_replica = p->opt.global_batch / dp;
  int M = (int)(per_replica / micro_batch);
  double *chunk_act = g_new0(double, V);
  /* stage:except-last: what the last micro-batch keeps of a chunk, all its layers' activations */
  double *chunk_kept = g_new0(double, V);
  double work = 0, largest_out = 0, largest_params = 0, largest_layer_params = 0;
  /* FSDP2: parameters gathered whole (in the GEMMs' precision with FP8's all-gather), per
   * block and for the layers of no block (the root module: embedding, final norm, logits). */
  double root_gathered = 0, dev_gathered = 0, block_gathered = 0, largest_block = 0;
  double largest_block_params = 0, block_params = 0, loss_temp = 0;
  int cur_block = -2, zunit_block = -2;
  double zunit_params = 0;
  for (int c = 0; c < V; c++) {
    int k = c * pp + device;
    double unit_work = 0, held = 0, cross = 0;
    int cur_unit = -2;
    for (int i = p->stage_first[k]; i < p->stage_first[k + 1]; i++) {
      const ts_layer_exec *e = &p->exec[i];
      const ts_layer *l = &m->layers[i];
      gboolean ckpt = ts_plan_recomputes_forward(p) && p->unit[i] >= 0;
      chunk_kept[c] += kept_act_bytes(p, i) * mb;
      if (ckpt) {
        /* The checkpoint: the block's input. The stage's first block may also read tensors
         * that came with it from the previous stage (a cell's second input): kept too. Later
         * blocks find those among earlier checkpoints. */
        if (p->unit[i] == i || i == p->stage_first[k])
          chunk_act[c] += checkpoint_bytes(p, i) * mb;
        if (i == p->stage_first[k] && i > 0)
          held = m->layers[i - 1].carry_elems;
        if (p->unit[i] != cur_unit) {
          cur_unit = p->unit[i];
          unit_work = 0;
        }
        unit_work += e->full_act_bytes * mb;
        work = MAX(work, unit_work);
      } else {
        chunk_act[c] += kept_act_bytes(p, i) * mb;
      }
      gboolean logits = l->kind == TS_LAYER_DENSE && l->vocab > 0;
      if (!(logits && p->loss == TS_LOSS_EAGER))
        largest_out = MAX(largest_out, e->out_bytes * mb);
      /* ZeRO-3 gathers a block at a time (ts_plan_trace.c, zero_need): a layer of no block is
       * a unit of its own. */
      if (l->block < 0 || l->block != zunit_block) {
        zunit_block = l->block;
        zunit_params = 0;
      }
      zunit_params += ts_plan_layer_params(p, i);
      largest_layer_params = MAX(largest_layer_params, ts_plan_layer_params(p, i));
      largest_params = MAX(largest_params, zunit_params);
      if (logits && p->loss == TS_LOSS_EAGER) {
        /* PyTorch's cross_entropy(logits.float()) uncompiled: its backward holds the saved
         * log-probabilities (the fp32 copy the layer keeps), the NLL gradient and the
         * log-softmax gradient (aten's fused kernel): 3 fp32 copies; under loss parallelism
         * DTensor's handler computes (grad + exp(logp)) * grad_out, 4 copies. */
        double copies = e->pdiv > 1 ? 4.0 : 3.0;
        loss_temp += (copies - 1.0) * 4.0 * (double)l->tokens * (double)l->vocab / e->cdiv * mb;
      }
      if (p->fsdp2) {
        double gd = ts_plan_gather_bytes_per_param(p, i);
        double lp = ts_plan_layer_params(p, i);
        dev_gathered += gd * lp;
        if (l->block < 0) {
          root_gathered += gd * lp;
        } else {
          if (l->block != cur_block) {
            cur_block = l->block;
            block_gathered = block_params = 0;
          }
          block_gathered += gd * lp;
          block_params += lp;
          largest_block = MAX(largest_block, block_gathered);
          largest_block_params = MAX(largest_block_params, block_params);
        }
      }
      mem->cp_attn = MAX(mem->cp_attn, cp_torch_attn_bytes(p, i) * mb);
      if (l->kind == TS_LAYER_ATTENTION && l->cross) {
        held = MAX(held, (double)l->kv_tokens * (double)l->in_features);
        cross = MAX(cross, (double)l->kv_tokens * (double)l->in_features);
      }
    }
    /* An encoder-decoder's encoder output, which the chunk's cross-attentions read forward
     * and backward (ts_model.c counts it in no layer's saved bytes), is the same tensor as
     * a decoder stage's received carry: whole on every tensor-parallel rank, held once per
     * micro-batch in flight. */
    chunk_act[c] += held * D * mb;
    chunk_kept[c] += cross * D * mb; /* as without recomputation */
  }
  /* fsdp2's pipelines run torch.distributed.pipelining (ts_sched_order) as of TorchTitan's
   * December 2024 runs (torch 1963fc8), whose stages allocate their receive buffers once, one
   * per micro-batch, and keep them: a non-first stage one buffer of its input per micro-batch
   * (_prepare_forward_infra; the received buffer is the stage's input, so it is the first
   * block's checkpoint, not counted again), a non-last stage one buffer of its output's
   * gradient per micro-batch (_prepare_backward_infra). Every stage appends each micro-batch's
   * output to output_chunks at its forward and keeps it until the next step (torch kept only
   * the last stage's from May 2025, pytorch#153383): the stage output, and on the last stage
   * the logits as the model returns them; fwd_cache holds the same tensors. A stage's
   * backward (stage_backward: autograd.backward, then each input's .grad) leaves every
   * micro-batch's input gradient in its receive buffer's .grad, which only the next step's
   * clear_runtime_states sets to None: one more input-sized tensor per micro-batch whose
   * backward is done, on every stage but the first. */
  double recv = 0, *chunk_out = g_new0(double, V), *chunk_in_grad = g_new0(double, V);
  for (int c = 0; c < V && p->fsdp2 && pp > 1; c++) {
    int k = c * pp + device, first = p->stage_first[k], last = p->stage_first[k + 1] - 1;
    if (last < first)
      continue;
    if (k > 0) {
      recv += M * p->exec[first].in_bytes * mb;
      chunk_in_grad[c] = p->exec[first].in_bytes * mb;
      if (ts_plan_recomputes_forward(p) && p->unit[first] >= 0)
        chunk_act[c] -= checkpoint_bytes(p, first) * mb;
    }
    if (k + 1 < p->nstages)
      recv += M * p->exec[last + 1].in_bytes * mb;
    chunk_out[c] = p->exec[last].out_bytes * mb;
  }
  /* fsdp2 with pp: FSDP2 skips the reduce-scatter of every micro-batch but the last
   * (backward_maybe_with_nosync: set_requires_gradient_sync(False)) and keeps each block's
   * unsharded gradient in fp32 (reduce_dtype) from its first backward on
   * (FSDPParam.to_accumulated_grad_if_needed) until the chunk's last backward reduce-scatters
   * it: a chunk's accumulators appear with its first backward, so a device with two chunks
   * makes the second chunk's only once the first chunk's backwards have freed their
   * activations (ScheduleInterleaved1F1B's all-forward warm-up at M = pp), where a single
   * stage holds all of them beside the micro-batches still in flight. */
  double *chunk_acc = g_new0(double, V), acc_layers = 0;
  for (int c = 0; c < V && p->fsdp2 && pp > 1; c++) {
    int k = c * pp + device;
    for (int i = p->stage_first[k]; i < p->stage_first[k + 1]; i++)
      chunk_acc[c] += 4.0 * ts_plan_layer_params(p, i);
    acc_layers += chunk_acc[c];
  }
  if (p->fsdp2 && pp > 1) /* a tied copy (ts_plan_tied_group) with the device's first chunk */
    chunk_acc[0] += MAX(0.0, 4.0 * psi - acc_layers);
  g_autoptr(GArray) order = g_array_new(FALSE, FALSE, sizeof(ts_sched_item));
  ts_sched_order(p->schedule, pp, V, M, device, p->fsdp2, order);
  /* outs: the outputs kept so far (added at each forward) and the input gradients (added at
   * each backward), released after the step; acc: the fp32 accumulators made so far */
  double cur = 0, peak = 0, peak_rc = 0, outs = 0, peak_outs = 0, acc = 0, peak_acc = 0;
  int live = 0, peak_live = 0, *bwd_seen = g_new0(int, V);
  for (guint i = 0; i < order->len; i++) {
    const ts_sched_item *it = &g_array_index(order, ts_sched_item, i);
    gboolean kept = !ts_plan_micro_recomputed(p, it->micro, M);
    double a = kept ? chunk_kept[it->chunk] : chunk_act[it->chunk];
    if (it->bwd && !kept)
      peak_rc = MAX(peak_rc, cur + outs + acc + work); /* a recomputed unit on what is held */
    if (it->bwd && bwd_seen[it->chunk]++ == 0)
      acc += chunk_acc[it->chunk];
    cur += it->bwd ? -a : a;
    outs += it->bwd ? chunk_in_grad[it->chunk] : chunk_out[it->chunk];
    live += it->bwd ? -1 : 1;
    if (cur + outs + acc > peak + peak_outs + peak_acc) {
      peak = cur;
      peak_outs = outs;
      peak_acc = acc;
    }
    peak_live = MAX(peak_live, live);
  }
  g_free(chunk_out);
  g_free(chunk_in_grad);
  g_free(chunk_acc);
  g_free(bwd_seen);
  /* At the forward-backward peak and through the optimizer step (ts_plan_memory_at's end). */
  mem->pipeline = recv + peak_outs;
  double pipe_step = recv + outs;
  /* GPipe on a GPU runs torchgpipe: the micro-batches' received stage inputs live in its copy
   * streams' pools (copy_stream_pools), not the compute stream's, and those pools are never
   * released: the walk's received inputs move from the activations to the pipeline's buffers
   * as the segments the pools reserve, through the step too; the allocator's fraction below
   * leaves them out (the pools are the allocator's own reservation). */
  double copy_pools = 0;
  if (p->schedule == TS_SCHED_GPIPE && pp > 1 && V == 1 && !p->fsdp2 &&
      ts_chip_allocator_overhead(&p->topo->chip) > 0) {
    copy_pools = copy_stream_pools(p, device, mb, M);
    int first = p->stage_first[device];
    if (device > 0) {
      /* What the walk holds of them: the checkpoint and what came with it, or without
       * recomputation the received tensors the first block keeps. */
      double walk = 0, t[8];
      if (ts_plan_recomputes_forward(p) && p->unit[first] >= 0) {
        walk = checkpoint_bytes(p, first) * mb + m->layers[first - 1].carry_elems * D * mb;
      } else {
        int n = stage_received(p, device, mb, t, 8);
        for (int j = 0; j < n; j++)
          walk += t[j];
      }
      peak = MAX(0.0, peak - M * walk);
      peak_rc = MAX(0.0, peak_rc - M * walk);
    }
    mem->pipeline += copy_pools;
    pipe_step += copy_pools;
  }
  /* torchgpipe trains plain PyTorch modules: autograd's AccumulateGrad makes each parameter's
   * .grad at the first backward that reaches it, amid that backward's activations and
   * recomputations (torchgpipe's memory benchmark measures max_memory_cached over its first
   * two iterations, from an emptied cache, and never zeroes the gradients), so the gradients
   * take the caching allocator's overhead as the activations do (below). */
  gboolean torchgpipe = p->schedule == TS_SCHED_GPIPE && V == 1 && !p->fsdp2 &&
                        ts_chip_allocator_overhead(&p->topo->chip) > 0;
  g_free(chunk_act);
  g_free(chunk_kept);
  mem->activations = peak;
  mem->inflight = (double)peak_live / V;
  /* stage:except-last: the last micro-batch's kept activations are freed by its backward, which
   * comes before the others' recomputation, so the recomputed unit is counted only where it is
   * live (above the held peak, if at all). */
  if (p->recompute_keep_last)
    work = MAX(0.0, peak_rc - peak - peak_outs - peak_acc);
  /* Working buffers: gradient buckets (ts_plan_bucket_bytes), the largest layer output once
   * more for its gradient and once for the next, the recomputed block of full recomputation,
   * and ZeRO-3's gathered parameters (the block and the one prefetched). */
  /* cp-ring=torch: the attention's ring buffers (cp_torch_attn_bytes) live in its backward,
   * beside the recomputed block. */
  double buffers = 2.0 * largest_out + work + mem->cp_attn;
  /* States the step allocates and frees again (counted with the allocator's overhead below). */
  double step_allocated = torchgpipe ? mem->grads : 0.0;
  mem->loss_temp = loss_temp;
  if (p->loss == TS_LOSS_EAGER)
    buffers = MAX(buffers, loss_temp); /* the loss's backward comes before any block's */
  if (p->fsdp2) {
    /* FSDP2 (torch.distributed._composable.fsdp.fully_shard per block, then the root; as
     * TorchTitan 9dec370 applies it). Without pp each block's parameters are gathered before
     * its forward and backward and freed after (the block running and the one prefetched), the
     * root's stay gathered from forward through backward; each block's gradients are copied to
     * fp32 for the reduce-scatter. With pp nothing is resharded after forward (TorchTitan sets
     * reshard_after_forward=False): every layer of the device stays gathered through the step,
     * and the gradients of the micro-batches accumulate unsharded in fp32 (reduce_dtype) until
     * the last one's reduce-scatter. Those accumulators are made at the first micro-batch's
     * backward (FSDPParam.to_accumulated_grad_if_needed, amid its activations and recomputed
     * blocks) and freed at every step's end, so the allocator's overhead counts them as it
     * counts the activations (step_allocated), where the sharded parameters and optimizer
     * states, allocated once, add none. The sharded fp32 gradients churn too: TorchTitan's
     * train step begins with optimizer.zero_grad(), which sets every .grad to None (torch's
     * default since 2.0, set_to_none=True), and FSDP2's post-backward reduce-scatter gives
     * each block's sharded gradients as views of a new output buffer (foreach_reduce), amid
     * the block's activations. The optimizer step (AdamW, foreach) allocates one fp32
     * temporary per sharded parameter (the square root of the second moment). */
    step_allocated += mem->grads;
    if (pp > 1) {
      mem->gathered = dev_gathered;
      mem->grads += peak_acc;
      step_allocated += peak_acc;
    } else {
      mem->gathered = root_gathered + 2.0 * largest_block;
    }
    mem->step_temp = 4.0 * shard;
    /* The block's gradients in bf16 and (without pp) their fp32 copy for the reduce-scatter
     * live in the block's backward, after the loss's. With pp the micro-batches' gradients are
     * accumulated instead: autograd still makes the block's bf16 .grad in each backward, which
     * FSDP2's post-backward adds into the fp32 accumulator and sets to None
     * (FSDPParam.accumulate_unsharded_grad_if_needed), so one block's bf16 gradients join the
     * recomputed block's working set; the reduce-scatter's fp32 copy comes only with the
     * last micro-batch, when a stage holds the fewest activations. */
    double block_bufs =
        2.0 * largest_out + work + mem->cp_attn + (pp == 1 ? 4.0 + D : D) * largest_block_params;
    mem->temp = p->loss == TS_LOSS_EAGER ? MAX(loss_temp, block_bufs) : block_bufs;
  } else if (tpu && pp == 1 && V == 1) {
    /* A TPU (xla_backward_extra): the backward's working set at its peak; under ZeRO 2-3 the
     * gradient of the layer whose reduce-scatter is pending (XLA reduce-scatters each layer's
     * weight gradients as the scanned backward makes them); under ZeRO-3 the block running,
     * gathered, and the next one's gathers as far as memory allows: XLA's latency-hiding
     * scheduler tracks memory pressure and starts an asynchronous all-gather only within the
     * program's memory limit, so a program fits if one layer's gather can run ahead (the time
     * model keeps the block-ahead prefetch: where memory is short the gathers are later). */
    mem->temp = xla_backward_extra(p, mb);
    mem->temp +=
        p->zero >= 2 ? D * largest_layer_params : ts_plan_bucket_bytes(p, psi, p->opt.bucket_bytes);
    if (p->zero >= 3)
      mem->temp += D * (largest_params + largest_layer_params);
  } else {
    mem->temp = ts_plan_bucket_bytes(p, psi, p->opt.bucket_bytes) + buffers;
    if (p->zero >= 3)
      mem->temp += 2.0 * D * largest_params;
  }
  double states = mem->params + mem->grads + mem->optimizer;
  /* The pipeline's buffers live through the step (ts_plan_memory_at's walk above). */
  double fb = states + mem->gathered + mem->activations + mem->temp + mem->pipeline;
  double step = states + mem->step_temp + pipe_step;
  if (step > fb) {
    /* The peak is the optimizer step: the activations and the gathered parameters are freed. */
    mem->step_peak = TRUE;
    mem->activations = mem->gathered = mem->cp_attn = 0;
    mem->temp = mem->step_temp;
    mem->pipeline = pipe_step;
    fb = step;
  }
  /* The allocator reserves more than the tensors it holds at the peak (PyTorch's caching
   * allocator: freed blocks kept for reuse, 2 MiB segment rounding, blocks split too small
   * for the next request); a fraction ([chip] allocator_overhead) of what the step allocates
   * and frees: all but the states, plus the states it re-allocates each step (fsdp2's pipeline
   * accumulators), less torchgpipe's copy-stream pools (their segments are counted whole). */
  mem->allocator = ts_chip_allocator_overhead(&p->topo->chip) *
                   MAX(0.0, fb - states + (mem->step_peak ? 0.0 : step_allocated) - copy_pools);
  mem->total = fb + mem->allocator;
  mem->capacity = p->topo->chip.memory_bytes;
  mem->reserve = ts_chip_memory_reserve(&p->topo->chip);
  mem->host_capacity = p->topo->chip.host_memory_bytes;
  mem->nvme_capacity = p->topo->chip.nvme_bytes;
  mem->fits = mem->total + mem->reserve <= mem->capacity && mem->host <= mem->host_capacity &&
              mem->nvme <= mem->nvme_capacity;
  mem->over = MAX(0.0, mem->total + mem->reserve - mem->capacity);
}

int ts_plan_syncs_per_step(const ts_plan *p)
{
  return p->zero >= 2 ? (int)p->n_micro : 1;
}

/* The network a worker reaches the servers through: the slowest link of the data-parallel
 * axis's dimensions (the whole array's slowest when dp = 1). */
static void ps_port(const ts_plan *p, double *bw, double *lat)
{
  const ts_topo *t = p->topo;
  const ts_group_shape *g = &p->shape[TS_AX_DP];
  *bw = 0;
  *lat = 0;
  for (int k = 0; k < g->npieces; k++) {
    const ts_dim *d = &t->dims[g->p[k].dim];
    if (*bw == 0 || d->link_bw_Bps < *bw)
      *bw = d->link_bw_Bps;
    *lat = MAX(*lat, d->latency_s);
  }
  if (*bw == 0)
    for (int d = 0; d < t->ndims; d++) {
      if (*bw == 0 || t->dims[d].link_bw_Bps < *bw)
        *bw = t->dims[d].link_bw_Bps;
      *lat = MAX(*lat, t->dims[d].latency_s);
    }
}

double ts_plan_ps_remote_bytes(const ts_plan *p, double bytes)
{
  int W = p->degree[TS_AX_DP], N = p->ps;
  /* Colocated with a server on every worker, 1/N of the push stays local; otherwise some
   * worker hosts no shard and sends all of it (bulk-synchronous: the slowest sets the pace). */
  if (p->ps_placement == TS_PS_COLOCATED && N >= W)
    return bytes * (double)(N - 1) / N;
  return bytes;
}

void ts_plan_ps_xfer(const ts_plan *p, double bytes, double *wire_bytes, double *bw_Bps,
                     double *latency_s)
{
  int W = p->degree[TS_AX_DP], N = p->ps;
  ps_port(p, bw_Bps, latency_s);
  double egress = ts_plan_ps_remote_bytes(p, bytes);
  /* A server receives its 1/N of every worker's push (its own, when colocated, is local). */
  double ingress = (p->ps_placement == TS_PS_COLOCATED ? W - 1 : W) * bytes / N;
  *wire_bytes = MAX(egress, ingress);
}

double ts_plan_ps_time(const ts_plan *p, double bytes)
{
  double wire, bw, lat;
  ts_plan_ps_xfer(p, bytes, &wire, &bw, &lat);
  return lat + wire / bw;
}

/* Per-step traffic of the reported device: over its host link (offload), to and from the
 * parameter servers, and at per-layer split boundaries. */
static void plan_traffic(ts_plan *p)
{
  const ts_model *m = p->model;
  int dev = p->mem.stage, N = ts_plan_shard_ranks(p);
  double D = m->dtype_bytes, psi = ts_plan_device_params(p, dev), M = (double)p->n_micro;
  if (p->offload != TS_OFFLOAD_NONE) {
    /* Gradient shards go down after each synchronisation; updated parameter shards come back
     * up once, or with ZeRO-Infinity's parameter offload, layer by layer in each pass. */
    double shard = D * ts_plan_device_shard_params(p, dev);
    p->host_link_bytes_per_step = ts_plan_syncs_per_step(p) * shard;
    if (p->offload == TS_OFFLOAD_NVME && p->zero >= 3) {
      double layers = 0;
      for (int k = dev; k < p->nstages; k += p->degree[TS_AX_PP])
        for (int i = p->stage_first[k]; i < p->stage_first[k + 1]; i++)
          layers += D * ts_plan_layer_params(p, i) / (p->exec[i].expert ? N / p->ep : N);
      p->host_link_bytes_per_step += 2.0 * M * layers;
    } else {
      p->host_link_bytes_per_step += shard;
    }
  }
  if (p->ps > 0) {
    p->ps_push_bytes_per_step = ts_plan_ps_remote_bytes(p, D * psi);
    p->ps_pull_bytes_per_step = p->ps_push_bytes_per_step;
  }
  double r = 0;
  for (int i = 0; i < m->nlayers; i++) {
    if (ts_plan_stage_of_layer(p, i) % p->degree[TS_AX_PP] != dev)
      continue;
    const ts_layer_exec *e = &p->exec[i];
    if (e->fwd_pre.redistribution && e->fwd_pre.kind != TS_NO_COLL)
      r += e->fwd_pre.bytes;
    if (e->bwd_post.redistribution && e->bwd_post.kind != TS_NO_COLL && i > 0)
      r += e->bwd_post.bytes;
  }
  p->redistribution_bytes_per_step = r * (double)p->micro_batch * M;
  /* Context parallelism: per attention layer and micro-batch, the K/V block goes cp - 1 hops
   * forward; backward the K/V blocks go cp - 1 hops and their gradients cp hops (the last
   * returns each to its owner). */
  double cpb = 0;
  int cp = p->degree[TS_AX_CP];
  /* cp-ring=torch: the same K/V blocks arrive by all-gather, and the gradients go round in
   * fp32, twice the bytes. */
  double dkv = p->cp_ring == TS_CP_RING_TORCH ? 2.0 : 1.0;
  for (int i = 0; i < m->nlayers && cp > 1; i++)
    if (ts_plan_stage_of_layer(p, i) % p->degree[TS_AX_PP] == dev)
      cpb += p->exec[i].cp_kv_bytes * (double)(cp - 1 + cp - 1) + dkv * cp * p->exec[i].cp_kv_bytes;
  if (ts_plan_recomputes_forward(p))
    for (int i = 0; i < m->nlayers && cp > 1; i++)
      if (ts_plan_stage_of_layer(p, i) % p->degree[TS_AX_PP] == dev && p->unit[i] >= 0)
        cpb += p->exec[i].cp_kv_bytes * (double)(cp - 1);
  p->cp_bytes_per_step = cpb * (double)p->micro_batch * M;
}

/* Most micro-batches per step the planner accepts: each is a pass of the whole schedule. */
#define MAX_MICRO_BATCHES 65536

/* Divisors of n, largest first (trial division; n <= 2^40 keeps it under a million steps). */
static GArray *divisors_desc(gint64 n)
{
  GArray *lo = g_array_new(FALSE, FALSE, sizeof(gint64));
  GArray *hi = g_array_new(FALSE, FALSE, sizeof(gint64));
  for (gint64 d = 1; d * d <= n; d++)
    if (n % d == 0) {
      g_array_append_val(lo, d);
      gint64 q = n / d;
      if (q != d)
        g_array_append_val(hi, q);
    }
  /* hi holds the large divisors, in decreasing order; lo the small ones, increasing. */
  for (guint i = lo->len; i-- > 0;)
    g_array_append_val(hi, g_array_index(lo, gint64, i));
  g_array_unref(lo);
  return hi;
}

/* Whether a micro-batch is usable with the plan's schedule and per-layer splits. */
static gboolean micro_batch_ok(const ts_plan *p, gint64 mb, gint64 per_replica)
{
  if (mb <= 0 || per_replica % mb != 0)
    return FALSE;
  gint64 M = per_replica / mb;
  if (M > MAX_MICRO_BATCHES)
    return FALSE;
  if (p->schedule == TS_SCHED_INTERLEAVED && p->degree[TS_AX_PP] > 1 &&
      M % p->degree[TS_AX_PP] != 0)
    return FALSE;
  for (int i = 0; i < p->model->nlayers; i++)
    if (p->exec[i].in == TS_ST_BATCH && mb % p->degree[TS_AX_TP] != 0)
      return FALSE;
  return TRUE;
}

static void plan_memory(ts_plan *p)
{
  int pp = p->degree[TS_AX_PP];
  gint64 per_replica = p->opt.global_batch / p->degree[TS_AX_DP];
  p->stage_mem = g_new0(ts_memory, pp);
  int worst = 0;
  for (int s = 0; s < pp; s++) {
    ts_plan_memory_at(p, s, p->micro_batch, &p->stage_mem[s]);
    if (p->stage_mem[s].total > p->stage_mem[worst].total)
      worst = s;
  }
  p->mem = p->stage_mem[worst];
  p->params_per_chip = ts_plan_device_params(p, worst);
  /* The largest micro-batch that fits on every device: memory grows with the micro-batch
   * (activations and buffers), so try the usable ones from the largest down. */
  p->mem.max_micro_batch = 0;
  g_autoptr(GArray) cands = divisors_desc(per_replica);
  for (guint c = 0; c < cands->len; c++) {
    gint64 mb = g_array_index(cands, gint64, c);
    if (!micro_batch_ok(p, mb, per_replica))
      continue;
    gboolean all = TRUE;
    for (int s = 0; s < pp && all; s++) {
      ts_memory t;
      ts_plan_memory_at(p, s, mb, &t);
      all = t.fits;
    }
    if (all) {
      p->mem.max_micro_batch = mb;
      break;
    }
  }
  for (int s = 0; s < pp; s++)
    p->stage_mem[s].max_micro_batch = p->mem.max_micro_batch;
  p->layer_act_bytes = g_new0(double, p->model->nlayers > 0 ? p->model->nlayers : 1);
  for (int i = 0; i < p->model->nlayers; i++)
    p->layer_act_bytes[i] = kept_act_bytes(p, i) * (double)p->micro_batch;
}

/* ---- text ---------------------------------------------------------------------------- */

static char *placement_text(const ts_plan *p)
{
  GString *s = g_string_new(NULL);
  for (int a = 0; a < TS_AX_N; a++) {
    if (p->degree[a] <= 1)
      continue;
    g_string_append_printf(s, "%s%s@", s->len ? "," : "", ts_axis_kind_name(a));
    for (int k = 0; k < p->shape[a].npieces; k++) {
      const ts_piece *pc = &p->shape[a].p[k];
      g_string_append_printf(s, "%s%s", k ? "+" : "", p->topo->dims[pc->dim].name);
      if (pc->size != p->topo->dims[pc->dim].size)
        g_string_append_printf(s, ":%d", pc->size);
    }
  }
  if (p->ep_placed) {
    /* ep=N@DIMS: where the expert all-to-alls run. */
    g_string_append(s, ",ep@");
    for (int k = 0; k < p->ep_shape.npieces; k++) {
      const ts_piece *pc = &p->ep_shape.p[k];
      g_string_append_printf(s, "%s%s", k ? "+" : "", p->topo->dims[pc->dim].name);
      if (pc->size != p->topo->dims[pc->dim].size)
        g_string_append_printf(s, ":%d", pc->size);
    }
  }
  if (s->len == 0)
    g_string_append(s, "-");
  return g_string_free(s, FALSE);
}

static char *split_text(const ts_plan *p, const ts_split *sp)
{
  GString *s = g_string_new(NULL);
  for (int a = 0; a < TS_AX_N; a++)
    if (p->degree[a] > 1)
      g_string_append_printf(s, "%s%s=%d", s->len ? "," : "", ts_axis_kind_name(a), p->degree[a]);
  if (s->len == 0)
    g_string_append(s, "dp=1");
  if (p->degree[TS_AX_PP] > 1) {
    g_string_append_printf(s, ",schedule=%s", ts_schedule_name(p->schedule));
    if (p->schedule == TS_SCHED_INTERLEAVED)
      g_string_append_printf(s, ":%d", p->chunks);
  }
  if (p->recompute != TS_RECOMPUTE_NONE)
    g_string_append_printf(s, ",recompute=%s", ts_recompute_name(p->recompute));
  if (p->recompute == TS_RECOMPUTE_FULL && p->recompute_every > 1)
    g_string_append_printf(s, ":%d", p->recompute_every);
  if (p->recompute_keep_last)
    g_string_append(s, ":except-last");
  if (p->recompute_mlpwi)
    g_string_append(s, ":except-mlpwi");
  if (p->sp)
    g_string_append(s, ",sp");
  if (sp->precision >= 0)
    g_string_append_printf(s, ",precision=%s", ts_precision_name((ts_precision)p->precision));
  if (p->ep > 1)
    g_string_append_printf(s, ",ep=%d%s%s", p->ep, sp->ep_place ? "@" : "",
                           sp->ep_place ? sp->ep_place : "");
  if (p->zero > 0)
    g_string_append_printf(s, ",zero=%d", p->zero);
  if (p->shard > 0 && p->shard < p->degree[TS_AX_DP])
    g_string_append_printf(s, ",shard=%d", p->shard);
  if (p->tp_overlap)
    g_string_append(s, p->tp_overlap_mode == TS_TP_OVERLAP_ASYNC ? ",tp-overlap=async"
                       : p->tp_overlap_mode == TS_TP_OVERLAP_XLA ? ",tp-overlap=xla"
                                                                 : ",tp-overlap");
  if (p->dp_overlap)
    g_string_append(s, ",dp-overlap");
  if (p->offload != TS_OFFLOAD_NONE)
    g_string_append_printf(s, ",offload=%s", ts_offload_name(p->offload));
  if (p->ps > 0)
    g_string_append_printf(s, ",ps=%d%s", p->ps,
                           p->ps_placement == TS_PS_DEDICATED ? ",ps-placement=dedicated" : "");
  if (p->attention >= 0)
    g_string_append_printf(s, ",attention=%s", ts_attention_name((ts_attention)p->attention));
  if (p->attn_kernel != TS_ATTN_KERNEL_FA2)
    g_string_append_printf(s, ",attn-kernel=%s", ts_attn_kernel_name(p->attn_kernel));
  if (p->attn_block_fwd > 0 && p->attn_block_bwd != p->attn_block_fwd)
    g_string_append_printf(s, ",attn-block=%d:%d", p->attn_block_fwd, p->attn_block_bwd);
  else if (p->attn_block_fwd > 0)
    g_string_append_printf(s, ",attn-block=%d", p->attn_block_fwd);
  if (p->attn_bwd_fused)
    g_string_append(s, ",attn-bwd=fused");
  if (p->fp8_cache)
    g_string_append(s, ",fp8-cache");
  if (p->early_stop)
    g_string_append(s, ",early-stop");
  if (p->bucket_copy)
    g_string_append(s, ",buckets=copy");
  if (p->p2p_blocking)
    g_string_append(s, ",p2p=blocking");
  if (p->cp_ring == TS_CP_RING_TORCH)
    g_string_append(s, ",cp-ring=torch");
  if (p->load_sync)
    g_string_append(s, ",load=sync");
  if (p->tp_grad_serial)
    g_string_append(s, ",tp-grad=serial");
  if (p->replica_reduce_end && p->shard < p->degree[TS_AX_DP])
    g_string_append(s, ",replica-reduce=end");
  if (p->pipe_engine_ds)
    g_string_append(s, p->pipe_engine_ds == TS_PIPE_ENGINE_DS03 ? ",pipe-engine=deepspeed-0.3"
                                                                : ",pipe-engine=deepspeed");
  if (p->dp_engine_apex)
    g_string_append(s, ",dp-engine=apex");
  if (p->dp_engine_autograd)
    g_string_append(s, ",dp-engine=autograd");
  if (p->launch_blocking)
    g_string_append(s, ",launch=blocking");
  if (p->opt_bertadam)
    g_string_append(s, ",optimizer=bertadam");
  if (p->loss != TS_LOSS_FUSED)
    g_string_append_printf(s, ",loss=%s", ts_loss_name(p->loss));
  if (p->kernels != TS_KERNELS_FUSED)
    g_string_append_printf(s, ",kernels=%s", ts_kernels_mode_name(p->kernels));
  if (p->fsdp2)
    g_string_append(s, ",fsdp2");
  if (p->fsdp1)
    g_string_append(s, p->fsdp1 == 2 ? ",fsdp1=fp32" : ",fsdp1");
  /* Only where they differ from what fsdp2 and precision imply (ts_plan_new). */
  if (p->fp8_gather != fp8_gather_default(p))
    g_string_append(s, p->fp8_gather ? ",fp8-gather" : ",fp8-gather=off");
  if (p->separate_projections != p->fsdp2)
    g_string_append_printf(s, ",projections=%s", p->separate_projections ? "separate" : "fused");
  if (p->layout_nchw)
    g_string_append(s, ",layout=nchw");
  for (guint i = 0; i < sp->rules->len; i++) {
    const ts_layer_rule *r = g_ptr_array_index(sp->rules, i);
    g_string_append_printf(s, ",%s:%s=%s", r->by_kind ? "kind" : "name",
                           r->by_kind ? ts_layer_kind_name(r->kind) : r->glob,
                           r->mode == TS_LAYER_MODE_DP ? "dp" : "tp");
  }
  return g_string_free(s, FALSE);
}

/* ---- the plan ------------------------------------------------------------------------ */

/* Degrees as ts_split_place resolves them (dp takes the chips left), before placement. */
static void resolve_degrees(const ts_split *s, const ts_topo *t, int *degree)
{
  gint64 prod = 1;
  for (int a = 0; a < TS_AX_N; a++) {
    degree[a] = s->degree[a] > 0 ? s->degree[a] : 1;
    prod *= degree[a];
  }
  if (s->degree[TS_AX_DP] == 0 && prod < t->nchips && t->nchips % prod == 0)
    degree[TS_AX_DP] = (int)(t->nchips / prod);
}

/* Cuts the first `inner` members (fastest pieces first) off a group shape: the expert-parallel
 * ranks are the inner part of the data-parallel axis, the rest replicate each expert. */
static gboolean split_shape(const ts_group_shape *g, int inner, ts_group_shape *in,
                            ts_group_shape *out)
{
  memset(in, 0, sizeof *in);
  memset(out, 0, sizeof *out);
  int rem = inner;
  for (int k = 0; k < g->npieces; k++) {
    ts_piece pc = g->p[k];
    if (rem == 1) {
      out->p[out->npieces++] = pc;
    } else if (rem % pc.size == 0) {
      in->p[in->npieces++] = pc;
      rem /= pc.size;
    } else if (pc.size % rem == 0) {
      in->p[in->npieces++] = (ts_piece){pc.dim, rem, pc.stride};
      out->p[out->npieces++] = (ts_piece){pc.dim, pc.size / rem, pc.stride * rem};
      rem = 1;
    } else {
      return FALSE;
    }
  }
  return rem == 1;
}

/* As split_shape, but the inner group takes its members from the pieces on the dimensions in
 * `dims` (a mask), in dp's order, and the rest stay with the outer group: ep=N@DIMS. */
static gboolean split_shape_on(const ts_group_shape *g, int inner, guint dims, ts_group_shape *in,
                               ts_group_shape *out)
{
  memset(in, 0, sizeof *in);
  memset(out, 0, sizeof *out);
  int rem = inner;
  for (int k = 0; k < g->npieces; k++) {
    ts_piece pc = g->p[k];
    if (rem == 1 || !(dims & (1u << pc.dim))) {
      out->p[out->npieces++] = pc;
    } else if (rem % pc.size == 0) {
      in->p[in->npieces++] = pc;
      rem /= pc.size;
    } else if (pc.size % rem == 0) {
      in->p[in->npieces++] = (ts_piece){pc.dim, rem, pc.stride};
      out->p[out->npieces++] = (ts_piece){pc.dim, pc.size / rem, pc.stride * rem};
      rem = 1;
    } else {
      return FALSE;
    }
  }
  return rem == 1;
}

/* The expert-parallel members inside dp's placement: the inner end, or with ep=N@DIMS the
 * pieces of dp on those dimensions. */
static gboolean place_ep(ts_plan *p, const ts_split *s, const ts_topo *t, GError **error)
{
  g_autofree char *where = placement_text(p);
  if (s->ep_place == NULL) {
    if (split_shape(&p->shape[TS_AX_DP], p->ep, &p->ep_shape, &p->edp_shape))
      return TRUE;
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': ep=%d cannot be cut from the inner end of dp's placement %s; "
                "expected ep to divide the dp pieces in order",
                s->text, p->ep, where);
    return FALSE;
  }
  guint mask = 0;
  g_auto(GStrv) dims = g_strsplit(s->ep_place, "+", -1);
  for (char **dn = dims; *dn != NULL; dn++) {
    int d = ts_topo_dim_index(t, *dn);
    gboolean in_dp = FALSE;
    for (int k = 0; d >= 0 && k < p->shape[TS_AX_DP].npieces; k++)
      in_dp = in_dp || p->shape[TS_AX_DP].p[k].dim == d;
    if (d < 0 || !in_dp) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': ep=%d@%s: '%s' is not a dimension dp is placed on (dp: %s); "
                  "expected ep on some of dp's dimensions",
                  s->text, p->ep, s->ep_place, *dn, where);
      return FALSE;
    }
    mask |= 1u << d;
  }
  if (split_shape_on(&p->shape[TS_AX_DP], p->ep, mask, &p->ep_shape, &p->edp_shape)) {
    p->ep_placed = TRUE;
    return TRUE;
  }
  g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
              "--split '%s': ep=%d@%s: dp's pieces on those dimensions (dp: %s) do not hold %d "
              "ranks; expected ep to divide them in order",
              s->text, p->ep, s->ep_place, where, p->ep);
  return FALSE;
}

/* Ranks tensor and data parallelism by the bytes each chip puts into their collectives per
 * step, so the heavier one takes the fastest dimensions (docs/splits.md, placement). */
static void rank_axes(const ts_plan *p, const ts_layer_exec *x, gint64 mb, gint64 n_micro,
                      int *rank)
{
  const ts_model *m = p->model;
  double tp_bytes = 0, dp_bytes = 0, D = m->dtype_bytes;
  for (int i = 0; i < m->nlayers; i++) {
    const ts_tp_coll *c[] = {&x[i].fwd_pre, &x[i].fwd_post, &x[i].bwd_pre, &x[i].bwd_regather,
                             &x[i].bwd_post};
    for (size_t k = 0; k < G_N_ELEMENTS(c); k++)
      if (c[k]->kind != TS_NO_COLL)
        tp_bytes += c[k]->bytes * (double)mb * (double)n_micro *
                    (c[k]->kind == TS_COLL_ALLREDUCE ? 2.0 : 1.0);
    double w = exec_params(&m->layers[i], &x[i]) * D;
    dp_bytes += 2.0 * w;
    /* Expert all-to-alls run inside the dp axis (its inner ep ranks). */
    if (x[i].ep_pre.kind != TS_NO_COLL)
      dp_bytes += 2.0 * x[i].ep_pre.bytes * (double)mb * (double)n_micro;
    if (x[i].ep_post.kind != TS_NO_COLL)
      dp_bytes += 2.0 * x[i].ep_post.bytes * (double)mb * (double)n_micro;
    if (p->zero >= 3)
      dp_bytes += 2.0 * w * (double)n_micro; /* a gather per layer per pass */
  }
  /* Context parallelism: K/V blocks round the ring, 3cp - 2 hops per attention layer and
   * micro-batch (forward and backward). */
  double cp_bytes = 0;
  int cp = p->degree[TS_AX_CP];
  for (int i = 0; i < m->nlayers && cp > 1; i++)
    cp_bytes += x[i].cp_kv_bytes * (double)(3 * cp - 2) * (double)mb * (double)n_micro;
  if (p->degree[TS_AX_TP] <= 1)
    tp_bytes = 0;
  if (p->degree[TS_AX_DP] <= 1)
    dp_bytes = 0;
  /* Heaviest first; ties keep the order tp, cp, dp (Megatron-LM's rank order). */
  int ax[3] = {TS_AX_TP, TS_AX_CP, TS_AX_DP};
  double by[3] = {tp_bytes, cp_bytes, dp_bytes};
  for (int i = 1; i < 3; i++)
    for (int j = i; j > 0 && by[j] > by[j - 1]; j--) {
      double tb = by[j];
      by[j] = by[j - 1];
      by[j - 1] = tb;
      int ta = ax[j];
      ax[j] = ax[j - 1];
      ax[j - 1] = ta;
    }
  rank[0] = ax[0];
  rank[1] = ax[1];
  rank[2] = ax[2];
  rank[3] = TS_AX_PP;
}

static gboolean layer_matches(const ts_layer_rule *r, const ts_layer *l)
{
  return r->by_kind ? l->kind == r->kind : g_pattern_match_simple(r->glob, l->name);
}

/* The first option of the split that only a GPU software stack runs, as written, or NULL:
 * DeepSpeed's pipeline engine, PyTorch's AsyncTP (CUDA symmetric memory), the CUDA attention
 * kernels other than FlashAttention 2's algorithm (which XLA's fused attention stands for),
 * uncompiled PyTorch (eager kernels, the eager loss), DDP's bucket copies, FSDP2's allocation,
 * Megatron-DeepSpeed's serial input-gradient all-reduce, Megatron's synchronous batch
 * broadcast and PyTorch's checkpoint early stop (JAX's remat skips the same layer on its own:
 * ts_plan_recompute_skips). On a TPU every program is compiled by XLA, whose fusions and
 * collectives these options would replace. */
static char *gpu_only_option(const ts_split *s, const ts_plan *p)
{
  if (p->pipe_engine_ds)
    return g_strdup(p->pipe_engine_ds == TS_PIPE_ENGINE_DS03 ? "pipe-engine=deepspeed-0.3"
                                                             : "pipe-engine=deepspeed");
  if (p->dp_engine_apex)
    return g_strdup("dp-engine=apex");
  if (p->dp_engine_autograd)
    return g_strdup("dp-engine=autograd");
  if (p->opt_bertadam)
    return g_strdup("optimizer=bertadam");
  if (p->tp_overlap && p->tp_overlap_mode == TS_TP_OVERLAP_ASYNC)
    return g_strdup("tp-overlap=async");
  if (s->attn_kernel > 0 && p->attn_kernel != TS_ATTN_KERNEL_FA2)
    return g_strdup_printf("attn-kernel=%s", ts_attn_kernel_name(p->attn_kernel));
  if (s->kernels > 0 && s->kernels != 1 + TS_KERNELS_FUSED)
    return g_strdup_printf("kernels=%s", ts_kernels_mode_name(s->kernels - 1));
  if (s->loss == 1 + TS_LOSS_EAGER)
    return g_strdup("loss=eager");
  if (s->layout == 2)
    return g_strdup("layout=nchw");
  if (s->bucket_copy)
    return g_strdup("buckets=copy");
  if (s->fsdp2)
    return g_strdup("fsdp2");
  if (s->fsdp1)
    return g_strdup(s->fsdp1 == 2 ? "fsdp1=fp32" : "fsdp1");
  if (s->tp_grad_serial)
    return g_strdup("tp-grad=serial");
  if (s->load_sync)
    return g_strdup("load=sync");
  if (s->early_stop)
    return g_strdup("early-stop");
  if (s->projections == 2)
    return g_strdup("projections=separate");
  return NULL;
}

ts_plan *ts_plan_new(const ts_model *m, const ts_topo *t, const ts_split *s,
                     const ts_plan_options *o, GError **error)
{
  g_autoptr(ts_plan) p = g_new0(ts_plan, 1);
  p->model = m;
  p->topo = t;
  p->opt = *o;
  p->recompute = s->recompute;
  p->recompute_every = s->recompute == TS_RECOMPUTE_FULL ? MAX(s->recompute_every, 1) : 1;
  p->recompute_keep_last = s->recompute == TS_RECOMPUTE_STAGE && s->recompute_keep_last;
  p->recompute_mlpwi = s->recompute == TS_RECOMPUTE_DOTS && s->recompute_mlpwi;
  p->sp = s->sp;
  p->zero = s->zero;
  p->offload = s->offload;
  p->ps = s->ps;
  p->ps_placement = s->ps_placement;
  p->attention = s->attention > 0 ? s->attention - 1 : -1;
  p->bucket_copy = s->bucket_copy;
  p->loss = s->loss > 0 ? (ts_loss)(s->loss - 1) : TS_LOSS_FUSED;
  p->kernels = s->kernels > 0 ? (ts_kernels_mode)(s->kernels - 1) : TS_KERNELS_FUSED;
  p->attn_kernel = s->attn_kernel > 0 ? (ts_attn_kernel)(s->attn_kernel - 1) : TS_ATTN_KERNEL_FA2;
  p->attn_block_fwd = s->attn_block_fwd;
  p->attn_block_bwd = s->attn_block_bwd;
  p->attn_bwd_fused = s->attn_bwd_fused;
  p->fp8_cache = s->fp8_cache;
  p->early_stop = s->early_stop;
  p->p2p_blocking = s->p2p_blocking;
  p->load_sync = s->load_sync;
  p->tp_grad_serial = s->tp_grad_serial;
  p->replica_reduce_end = s->replica_reduce_end;
  p->pipe_engine_ds = s->pipe_engine_ds;
  p->dp_engine_apex = s->dp_engine_apex;
  p->dp_engine_autograd = s->dp_engine_autograd;
  p->opt_bertadam = s->opt_bertadam;
  p->launch_blocking = s->launch_blocking;
  p->fsdp2 = s->fsdp2;
  p->fsdp1 = s->fsdp1;
  p->separate_projections = s->projections > 0 ? s->projections == 2 : s->fsdp2;
  p->layout_nchw = s->layout == 2;
  p->tp_overlap = s->tp_overlap;
  p->tp_overlap_mode = (ts_tp_overlap_mode)s->tp_overlap_mode;
  p->dp_overlap = s->dp_overlap;
  p->precision = s->precision >= 0     ? s->precision
                 : m->dtype_bytes >= 4 ? TS_PRECISION_FP32
                                       : TS_PRECISION_BF16;
  /* precision=fp32 (or tf32) on a model written for 16-bit training (ResNet-50's mixed
   * precision, BERT's fp16) is FP32 training: no autocast, so every activation, its gradient and
   * what backward keeps is 4 bytes an element, and the norms, element-wise kernels and pools move
   * twice the bytes they move in AMP (NVIDIA DeepLearningExamples' FP32 runs). The model is read
   * again as fp32 (a model built without a file keeps its dtype). */
  if ((p->precision == TS_PRECISION_FP32 || p->precision == TS_PRECISION_TF32) &&
      m->dtype_bytes < 4 && m->path != NULL) {
    p->own_fp32 = ts_model_load_fp32(m->path, error);
    if (p->own_fp32 == NULL)
      return NULL;
    m = p->model = p->own_fp32;
  }
  if ((p->attn_kernel == TS_ATTN_KERNEL_TRITON || p->attn_kernel == TS_ATTN_KERNEL_FA1) &&
      !(attn_kernel_rate(&t->chip, p->attn_kernel) > 0)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [chip] flash_efficiency_%s: missing; --split '%s' asks for attn-kernel=%s, "
                "which needs the chip's published rate for that kernel (%s has none)",
                t->path != NULL ? t->path : "<topology>", ts_attn_kernel_name(p->attn_kernel),
                s->text, ts_attn_kernel_name(p->attn_kernel), t->chip.name);
    return NULL;
  }
  if (p->opt_bertadam && (m->optimizer != TS_OPT_ADAM || p->zero > 0 ||
                          p->offload != TS_OFFLOAD_NONE || p->ps > 0 || p->dp_engine_apex)) {
    /* BertAdam is a replicated Adam run by Python on each replica's whole model. A model
     * trained with another optimizer makes the split not apply (a sweep over models skips
     * it, as projections=separate on a model without projections); the rest is a bad split. */
    g_set_error(error, TS_ERROR, m->optimizer != TS_OPT_ADAM ? TS_ERROR_INVALID : TS_ERROR_INPUT,
                "--split '%s': optimizer=bertadam is BERT's per-tensor Adam on every replica; "
                "expected a model with [model] optimizer = adam and no zero=, offload=, ps or "
                "dp-engine=apex (%s)",
                s->text, m->path ? m->path : m->name);
    return NULL;
  }
  if (p->early_stop && p->recompute != TS_RECOMPUTE_FULL) {
    /* Early stopping ends a re-run block's forward: without one there is nothing to end. */
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '%s': early-stop ends the re-run of each checkpointed block early; "
                "expected recompute=full (or full:N) with it (or no early-stop)",
                s->text);
    return NULL;
  }
  if (p->fp8_cache && p->precision != TS_PRECISION_FP8) {
    /* Transformer Engine's FP8 weight cache: there is no FP8 copy of a weight to keep. */
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '%s': fp8-cache keeps FP8 weight copies across micro-batches, but the "
                "GEMMs run in %s; expected precision=fp8 with it (or no fp8-cache)",
                s->text, ts_precision_name((ts_precision)p->precision));
    return NULL;
  }
  /* torchao's float8 all-gather is an FSDP2 extension (fsdp_pre_all_gather on a Float8 weight):
   * without FSDP2's sharded parameters or FP8 GEMMs there is no float8 weight to gather. */
  if (s->fp8_gather == 2 && (!p->fsdp2 || p->precision != TS_PRECISION_FP8)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '%s': fp8-gather all-gathers FSDP2's Float8 weight shards in float8 "
                "(torchao's enable_fsdp_float8_all_gather); expected fsdp2 and precision=fp8 "
                "with it (or fp8-gather=off)",
                s->text);
    return NULL;
  }
  if (p->precision == TS_PRECISION_FP8 && !(t->chip.peak_flops_fp8 > 0)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: [chip] peak_tflops_fp8: missing; --split '%s' asks for precision=fp8, which "
                "needs the chip's FP8 rate (%s has none)",
                t->path != NULL ? t->path : "<topology>", s->text, t->chip.name);
    return NULL;
  }
  resolve_degrees(s, t, p->degree);
  int pp = p->degree[TS_AX_PP];
  p->schedule = s->schedule >= 0 ? (ts_schedule)s->schedule : TS_SCHED_1F1B;
  p->chunks = p->schedule == TS_SCHED_INTERLEAVED && pp > 1 ? s->chunks : 1;
  if (pp == 1 && p->schedule != TS_SCHED_GPIPE)
    p->schedule = TS_SCHED_1F1B; /* one stage: every schedule is forward then backward */
  p->nstages = pp * p->chunks;
  /* Per-layer modes (hybrid splits): later rules win. */
  p->layer_mode = g_new0(ts_layer_mode, m->nlayers > 0 ? m->nlayers : 1);
  for (int i = 0; i < m->nlayers; i++)
    for (guint r = 0; r < s->rules->len; r++)
      if (layer_matches(g_ptr_array_index(s->rules, r), &m->layers[i]))
        p->layer_mode[i] = ((const ts_layer_rule *)g_ptr_array_index(s->rules, r))->mode;
  for (guint r = 0; r < s->rules->len; r++) {
    const ts_layer_rule *rule = g_ptr_array_index(s->rules, r);
    gboolean any = FALSE;
    for (int i = 0; i < m->nlayers && !any; i++)
      any = layer_matches(rule, &m->layers[i]);
    if (!any) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': %s:%s matches no layer of %s; expected a layer kind or name "
                  "pattern the model has",
                  s->text, rule->by_kind ? "kind" : "name",
                  rule->by_kind ? ts_layer_kind_name(rule->kind) : rule->glob,
                  m->path ? m->path : m->name);
      return NULL;
    }
  }
  if (p->sp && p->degree[TS_AX_TP] <= 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': sp (sequence parallelism) splits the sequence over the tensor-"
                "parallel group; expected tp > 1",
                s->text);
    return NULL;
  }
  if (p->zero > 0 && ts_plan_grad_ranks(p) <= 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': zero=%d shards model states over the data-parallel group; "
                "expected dp > 1",
                s->text, p->zero);
    return NULL;
  }
  if (p->pipe_engine_ds && pp <= 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': pipe-engine=deepspeed is DeepSpeed's pipeline engine; expected "
                "pp > 1",
                s->text);
    return NULL;
  }
  /* DeepSpeed's PipelineEngine asserts zero_optimization_stage() < 2 ("ZeRO-2 and ZeRO-3 are
   * incompatible with pipeline parallelism") and runs only its TrainSchedule, a 1F1B. */
  if (p->pipe_engine_ds && p->zero >= 2) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': pipe-engine=deepspeed with zero=%d; expected zero=0 or 1 "
                "(DeepSpeed's PipelineEngine refuses ZeRO-2 and ZeRO-3)",
                s->text, p->zero);
    return NULL;
  }
  /* apex's DistributedFusedAdam shards the optimizer state over dp and, as NeMo-Megatron runs
   * it (no_sync on every micro-batch but the last), reduce-scatters the gradients once a step:
   * trainsim's zero=1. */
  if (p->dp_engine_apex && p->zero != 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': dp-engine=apex with zero=%d; expected zero=1 (apex's "
                "DistributedFusedAdam shards the optimizer state and reduce-scatters the "
                "gradients once a step)",
                s->text, p->zero);
    return NULL;
  }
  /* dp-engine=autograd is the accumulation pass of a stack that keeps whole 16-bit gradients
   * in .grad; DeepSpeed's pipeline engine costs its own (pipe-engine=deepspeed), and FSDP's
   * sharded gradients are made by its own passes (fsdp1, fsdp2). */
  if (p->dp_engine_autograd && (p->pipe_engine_ds || p->fsdp1 || p->fsdp2 || p->zero >= 2)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '%s': dp-engine=autograd with %s; expected neither pipe-engine=deepspeed "
                "(which costs its own accumulation) nor fsdp1, fsdp2 or zero=2/3 (whose gradients "
                "are sharded)",
                s->text,
                p->pipe_engine_ds ? "pipe-engine=deepspeed"
                : p->fsdp1        ? "fsdp1"
                : p->fsdp2        ? "fsdp2"
                                  : "zero=2/3");
    return NULL;
  }
  if (p->pipe_engine_ds && p->schedule != TS_SCHED_1F1B) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': pipe-engine=deepspeed with schedule=%s; expected schedule=1f1b "
                "(DeepSpeed's PipelineEngine runs its TrainSchedule, a 1F1B)",
                s->text, ts_schedule_name(p->schedule));
    return NULL;
  }
  if (s->attn_kernel > 0 && s->attention == 1 + TS_ATTN_UNFUSED) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': attn-kernel=%s with attention=unfused; expected one of them "
                "(attn-kernel names the fused attention kernel)",
                s->text, ts_attn_kernel_name(p->attn_kernel));
    return NULL;
  }
  gboolean attention = FALSE;
  for (int i = 0; i < m->nlayers && !attention; i++)
    attention = m->layers[i].kind == TS_LAYER_ATTENTION;
  if (s->attn_kernel > 0 && !attention) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': attn-kernel=%s picks the fused attention kernel, but %s has no "
                "attention layer; expected a model with attention",
                s->text, ts_attn_kernel_name(p->attn_kernel), m->path ? m->path : m->name);
    return NULL;
  }
  gboolean projections = FALSE;
  for (int i = 0; i < m->nlayers && !projections; i++)
    projections = projection_gemms(&m->layers[i]) > 1;
  if (s->projections == 2 && !projections) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': projections=separate runs the attention's q/k/v and a gated MLP's "
                "gate/up projections as separate GEMMs, but %s has neither; expected a model "
                "with attention or a gated MLP",
                s->text, m->path ? m->path : m->name);
    return NULL;
  }
  /* GPU software stacks on a systolic chip (a TPU runs XLA): each was accepted and costed as
   * if it ran there (docs/splits.md, "Options on a TPU"). */
  g_autofree char *gpu_only = t->chip.systolic > 0 ? gpu_only_option(s, p) : NULL;
  if (gpu_only != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': %s runs on GPUs; expected a GPU chip (%s is a systolic array "
                "programmed through XLA)",
                s->text, gpu_only, t->chip.name);
    return NULL;
  }
  if ((p->attn_block_fwd > 0 || s->attn_bwd_fused) && !(t->chip.systolic > 0)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': %s sets how a TPU's Pallas attention kernels run; expected a "
                "systolic chip ([chip] systolic_array; %s has none)",
                s->text, p->attn_block_fwd > 0 ? "attn-block=" : "attn-bwd=fused", t->chip.name);
    return NULL;
  }
  if (p->launch_blocking && !(t->chip.kernel_launch_s > 0)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': launch=blocking is CUDA_LAUNCH_BLOCKING=1, a wait on every kernel "
                "launch; expected a chip whose host launches kernels ([chip] kernel_launch_us "
                "> 0; %s has none)",
                s->text, t->chip.name);
    return NULL;
  }
  if (p->fsdp2 && (p->zero != 3 || s->offload != TS_OFFLOAD_NONE || s->ps > 0)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': fsdp2 is ZeRO-3 as PyTorch FSDP2 allocates it; expected zero=3 "
                "with it (and no offload or ps)",
                s->text);
    return NULL;
  }
  if (p->fsdp1 && (p->zero < 2 || p->fsdp2 || s->offload != TS_OFFLOAD_NONE || s->ps > 0)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': fsdp1 is PyTorch FSDP's FlatParameter gradient path "
                "(FULL_SHARD or SHARD_GRAD_OP); expected zero=2 or zero=3 with it (and no fsdp2, "
                "offload or ps)",
                s->text);
    return NULL;
  }
  /* Hybrid sharding (FSDP HYBRID_SHARD, MiCS): ZeRO inside groups of `shard` dp ranks. */
  p->shard = p->degree[TS_AX_DP];
  if (s->shard > 0) {
    if (p->zero == 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': shard=%d is the group ZeRO shards over; expected zero=1, 2 or 3 "
                  "with it",
                  s->text, s->shard);
      return NULL;
    }
    if (p->degree[TS_AX_DP] % s->shard != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': shard=%d does not divide dp=%d; expected a sharding group size "
                  "that divides the data-parallel degree",
                  s->text, s->shard, p->degree[TS_AX_DP]);
      return NULL;
    }
    if (s->shard < p->degree[TS_AX_DP] && (s->ep > 1 || s->offload != TS_OFFLOAD_NONE)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': shard=%d with %s; expected hybrid sharding without expert "
                  "parallelism or offload (not modelled together)",
                  s->text, s->shard, s->ep > 1 ? "ep" : "offload");
      return NULL;
    }
    p->shard = s->shard;
  }
  p->fp8_gather = s->fp8_gather > 0 ? s->fp8_gather == 2 : fp8_gather_default(p);
  if (p->tp_overlap && p->degree[TS_AX_TP] <= 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': tp-overlap overlaps tensor-parallel collectives with their GEMMs; "
                "expected tp > 1",
                s->text);
    return NULL;
  }
  if (p->tp_grad_serial && p->tp_overlap) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': tp-grad=serial with tp-overlap; expected one of them (tp-overlap "
                "chunks the tensor-parallel collectives beside their GEMMs)",
                s->text);
    return NULL;
  }
  if (p->dp_overlap && (p->zero < 1 || p->zero > 2 || s->offload != TS_OFFLOAD_NONE)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': dp-overlap overlaps the distributed optimizer's parameter "
                "all-gather with the next forward; expected zero=1 or zero=2 without offload "
                "(ZeRO-3 already prefetches each layer's parameters)",
                s->text);
    return NULL;
  }
  if (p->offload != TS_OFFLOAD_NONE && p->zero == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': offload=%s moves ZeRO's partitioned states; expected zero=1, 2 "
                "or 3 with it",
                s->text, ts_offload_name(p->offload));
    return NULL;
  }
  if (p->offload != TS_OFFLOAD_NONE && t->chip.host_link_bw_Bps <= 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': offload=%s needs the chip's host link; topology %s has no [host] "
                "link_bandwidth_GBps",
                s->text, ts_offload_name(p->offload), t->path ? t->path : t->name);
    return NULL;
  }
  if (p->offload != TS_OFFLOAD_NONE && t->chip.host_flops <= 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': offload=%s runs the optimizer on the host CPU; topology %s has no "
                "[host] cpu_tflops",
                s->text, ts_offload_name(p->offload), t->path ? t->path : t->name);
    return NULL;
  }
  if (p->ps == 0 && p->ps_placement == TS_PS_DEDICATED) {
    /* Hosts of their own for servers that are not there: asks for another configuration. */
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '%s': ps-placement=dedicated places parameter servers; expected ps=N "
                "with it (or no ps-placement)",
                s->text);
    return NULL;
  }
  if (p->ps > 0 && p->ps_placement == TS_PS_DEDICATED && t->chip.host_flops <= 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': dedicated parameter servers update on their host CPUs; topology %s "
                "has no [host] cpu_tflops to rate them by",
                s->text, t->path ? t->path : t->name);
    return NULL;
  }
  if (p->offload == TS_OFFLOAD_NVME && t->chip.nvme_bw_Bps <= 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': offload=nvme needs NVMe; topology %s has no [host] "
                "nvme_bandwidth_GBps",
                s->text, t->path ? t->path : t->name);
    return NULL;
  }
  if (p->ps > 0 && (p->zero > 0 || p->offload != TS_OFFLOAD_NONE)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': ps=%d keeps parameters on servers; expected it without zero or "
                "offload",
                s->text, p->ps);
    return NULL;
  }
  if (p->ps > 0 && p->ps_placement == TS_PS_COLOCATED && p->ps > p->degree[TS_AX_DP]) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': ps=%d colocated servers run on the data-parallel workers; "
                "expected at most dp=%d shards (or ps-placement=dedicated)",
                s->text, p->ps, p->degree[TS_AX_DP]);
    return NULL;
  }
  if (p->nstages > m->nlayers) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': %d pipeline stages but %s has %d layers; expected at most one "
                "stage per layer",
                s->text, p->nstages, m->path ? m->path : m->name, m->nlayers);
    return NULL;
  }
  int dp = p->degree[TS_AX_DP], tp = p->degree[TS_AX_TP], cp = p->degree[TS_AX_CP];
  gint64 prod = (gint64)dp * tp * pp * cp;
  if (o->global_batch <= 0 || prod != t->nchips || o->global_batch % dp != 0) {
    /* Placement reports a wrong chip count; the batch check needs the right dp first. */
    if (prod == t->nchips) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--global-batch %" G_GINT64_FORMAT ": expected a positive multiple of the "
                  "data-parallel degree %d (split %s)",
                  o->global_batch, dp, s->text);
      return NULL;
    }
  }
  p->ep = s->ep > 0 ? s->ep : 1;
  if (p->ep > 1) {
    gboolean any = FALSE;
    for (int i = 0; i < m->nlayers; i++)
      if (m->layers[i].experts > 0) {
        any = TRUE;
        if (m->layers[i].experts % p->ep != 0) {
          g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                      "--split '%s': ep=%d does not divide the %" G_GINT64_FORMAT " experts of "
                      "layer '%s'; expected an expert-parallel degree that divides them",
                      s->text, p->ep, m->layers[i].experts, m->layers[i].name);
          return NULL;
        }
      }
    if (!any) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': ep=%d spreads experts, but %s has no mixture-of-experts layer; "
                  "expected a model with [transformer] experts",
                  s->text, p->ep, m->path ? m->path : m->name);
      return NULL;
    }
    if (p->degree[TS_AX_DP] % p->ep != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': ep=%d spreads the experts over ranks of the data-parallel "
                  "group, which has %d; expected an ep that divides dp",
                  s->text, p->ep, p->degree[TS_AX_DP]);
      return NULL;
    }
    if (p->ps > 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': ps=%d with ep=%d; expected parameter servers without expert "
                  "parallelism",
                  s->text, p->ps, p->ep);
      return NULL;
    }
  }
  p->exec = ts_plan_exec_table(m, p->degree, p->recompute, p->recompute_mlpwi, p->sp, p->layer_mode,
                               p->ep, p->attention,
                               (ts_plan_fp8_saves_inputs(p) ? TS_FP8_SAVES_INPUTS : 0u) |
                                   (ts_plan_fp8_gathers(p) ? TS_FP8_GATHERS : 0u) |
                                   (p->kernels == TS_KERNELS_FUSED ? TS_EXEC_COMPILED : 0u));
  p->cp_ring = s->cp_ring > 0 ? (ts_cp_ring)(s->cp_ring - 1) : TS_CP_RING_P2P;
  if (p->cp_ring == TS_CP_RING_TORCH && p->degree[TS_AX_CP] <= 1) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '%s': cp-ring=torch without context parallelism; expected cp=N with "
                "N >= 2 (or no cp-ring)",
                s->text);
    return NULL;
  }
  /* cp-ring=torch: TorchTitan's Llama attention repeats the key/value heads to the query heads
   * (repeat_kv) before calling SDPA, and PyTorch's ring exchanges what SDPA is given: K/V as
   * wide as the queries, heads / kv_heads times the grouped-query blocks. */
  for (int i = 0; i < m->nlayers && p->cp_ring == TS_CP_RING_TORCH; i++)
    if (p->exec[i].cp_kv_bytes > 0 && m->layers[i].kv_heads > 0)
      p->exec[i].cp_kv_bytes *= (double)m->layers[i].heads / (double)m->layers[i].kv_heads;
  if (p->fsdp2)
    dtensor_keeps_gathered_inputs(p);
  gint64 per_replica = prod == t->nchips && o->global_batch > 0 ? o->global_batch / dp : 1;
  /* Default micro-batch: none without a pipeline; with one, the largest that gives at least
   * 4 micro-batches per stage (GPipe, Huang et al. 2019, section 2.2: the bubble is negligible
   * when M >= 4P), a multiple of pp for the interleaved schedule. */
  p->micro_batch = o->micro_batch;
  if (p->micro_batch <= 0) {
    p->micro_batch = per_replica;
    if (pp > 1 && per_replica <= (gint64)TS_MAX_COUNT) {
      gint64 pick = 0;
      g_autoptr(GArray) cands = divisors_desc(per_replica);
      for (guint c = 0; c < cands->len && pick == 0; c++) {
        gint64 mb = g_array_index(cands, gint64, c);
        if (micro_batch_ok(p, mb, per_replica) && per_replica / mb >= 4 * pp)
          pick = mb;
      }
      for (guint c = 0; c < cands->len && pick == 0; c++)
        if (micro_batch_ok(p, g_array_index(cands, gint64, c), per_replica))
          pick = g_array_index(cands, gint64, c);
      p->micro_batch = pick > 0 ? pick : 1;
    }
  }
  p->n_micro = per_replica / MAX(p->micro_batch, 1);
  int rank[TS_AX_N];
  rank_axes(p, p->exec, p->micro_batch, p->n_micro, rank);
  if (!ts_split_place_ranked(s, t, rank, p->degree, p->shape, error))
    return NULL;
  if (p->shard < dp &&
      !split_shape(&p->shape[TS_AX_DP], p->shard, &p->shard_shape, &p->rep_shape)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': shard=%d cannot be cut from the inner end of dp's placement; "
                "expected shard to divide the dp pieces in order (place dp, e.g. dp=%d@x+y)",
                s->text, p->shard, dp);
    return NULL;
  }
  if (p->ep > 1 && !place_ep(p, s, t, error))
    return NULL;
  if (o->global_batch <= 0 || o->global_batch % dp != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--global-batch %" G_GINT64_FORMAT ": expected a positive multiple of the "
                "data-parallel degree %d (split %s)",
                o->global_batch, dp, s->text);
    return NULL;
  }
  if (per_replica % p->micro_batch != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--micro-batch %" G_GINT64_FORMAT ": expected a divisor of the %" G_GINT64_FORMAT
                " samples each data-parallel replica gets (global batch %" G_GINT64_FORMAT
                " / dp %d)",
                p->micro_batch, per_replica, o->global_batch, dp);
    return NULL;
  }
  if (per_replica > (gint64)TS_MAX_COUNT || p->n_micro > MAX_MICRO_BATCHES) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--micro-batch %" G_GINT64_FORMAT ": %" G_GINT64_FORMAT " samples per replica "
                "make %" G_GINT64_FORMAT " micro-batches per step; expected at most %d "
                "micro-batches and 2^40 samples per replica",
                p->micro_batch, per_replica, p->n_micro, MAX_MICRO_BATCHES);
    return NULL;
  }
  if (p->schedule == TS_SCHED_INTERLEAVED && pp > 1 && p->n_micro % pp != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                "--split '%s': schedule=interleaved runs micro-batches in groups of pp=%d but "
                "there are %" G_GINT64_FORMAT "; expected a multiple of %d (set --micro-batch)",
                s->text, pp, p->n_micro, pp);
    return NULL;
  }
  for (int i = 0; i < m->nlayers; i++)
    if (p->exec[i].in == TS_ST_BATCH && p->micro_batch % tp != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--micro-batch %" G_GINT64_FORMAT ": layer '%s' splits its batch over tp=%d; "
                  "expected a micro-batch that is a multiple of %d",
                  p->micro_batch, m->layers[i].name, tp, tp);
      return NULL;
    }
  /* Tensor parallelism must divide what it splits: heads, features, channels, vocabulary. */
  for (int i = 0; i < m->nlayers && tp > 1; i++) {
    const ts_layer *l = &m->layers[i];
    if (p->exec[i].pdiv == 1)
      continue;
    gint64 what = 0;
    const char *name = NULL;
    switch (l->tp) {
    case TS_TP_HEADS:
      what = l->heads;
      name = "attention heads";
      /* Grouped-query attention: Megatron-LM splits the key/value heads too and requires tp
       * to divide them (megatron/core/transformer/attention.py: num_query_groups_per_partition
       * = divide(num_query_groups, world_size)); it does not replicate them when tp > kv_heads
       * as some inference engines do. */
      if (what % tp == 0 && l->kv_heads > 0 && l->kv_lora_rank == 0) {
        what = l->kv_heads;
        name = "key/value heads";
      }
      break;
    case TS_TP_COLUMN:
      /* A gated fc1 splits its gate and its up projection alike: tp must divide each half. */
      what = l->gated ? l->out_features / 2 : l->out_features;
      name = l->kind == TS_LAYER_CONV2D ? "output channels"
             : l->gated                 ? "gated MLP features (of each of gate and up)"
                                        : "output features";
      break;
    case TS_TP_ROW:
      what = l->in_features;
      name = "input features";
      break;
    case TS_TP_VOCAB:
    case TS_TP_REPLICATED:
      break; /* vocabulary shards may be uneven (Megatron pads the vocabulary) */
    }
    if (name != NULL && what % tp != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': tp=%d does not divide the %" G_GINT64_FORMAT " %s of layer '%s' "
                  "of %s; expected a tensor-parallel degree that divides them",
                  s->text, tp, what, name, l->name, m->path ? m->path : m->name);
      return NULL;
    }
  }
  /* Sequence parallelism splits tokens (Korthikanti et al. 2022, 4.2.2): a model whose layers
   * all see one token per sample (an MLP, a CNN) has nothing to split. A 1-token dense layer
   * after a sequence (BERT's pooler) works on the whole value and is allowed. */
  if (p->sp && m->nlayers > 0) {
    gboolean seq = FALSE;
    for (int i = 0; i < m->nlayers; i++)
      seq = seq || m->layers[i].tokens > 1;
    if (!seq) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': sp splits the sequence over tp, but every layer of %s has 1 "
                  "token per sample (layer '%s'); expected a model with a sequence, or no sp",
                  s->text, m->path ? m->path : m->name, m->layers[0].name);
      return NULL;
    }
  }
  if (p->sp)
    for (int i = 0; i < m->nlayers; i++)
      if (m->layers[i].tokens > 0 && m->layers[i].tokens % tp != 0 &&
          m->layers[i].kind != TS_LAYER_DENSE) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "--split '%s': sp splits the %" G_GINT64_FORMAT "-token sequence of layer "
                    "'%s' over tp=%d; expected tp to divide the sequence",
                    s->text, m->layers[i].tokens, m->layers[i].name, tp);
        return NULL;
      }
  /* Context parallelism splits every sequence into 2cp chunks, two per rank (the zig-zag
   * that balances causal attention, as Megatron-Core and Transformer Engine do). */
  for (int i = 0; i < m->nlayers && cp > 1; i++) {
    const ts_layer *l = &m->layers[i];
    gint64 kv = l->kind == TS_LAYER_ATTENTION && l->kv_tokens > 0 ? l->kv_tokens : l->tokens;
    if (l->tokens <= 1 || l->tokens % (2 * cp) != 0 || kv % (2 * cp) != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': cp=%d splits each sequence into %d chunks (two per rank, for "
                  "causal load balance) but layer '%s' of %s has %" G_GINT64_FORMAT " tokens; "
                  "expected a sequence length divisible by 2 x cp = %d",
                  s->text, cp, 2 * cp, l->name, m->path ? m->path : m->name,
                  l->tokens <= 1 || l->tokens % (2 * cp) != 0 ? l->tokens : kv, 2 * cp);
      return NULL;
    }
    if (p->sp && (l->tokens / cp) % tp != 0 && l->kind != TS_LAYER_DENSE) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': sp splits the %" G_GINT64_FORMAT " tokens each cp rank holds of "
                  "layer '%s' over tp=%d; expected tp to divide them",
                  s->text, l->tokens / cp, l->name, tp);
      return NULL;
    }
  }
  /* Pipeline stages: given, or balanced by compute. */
  p->stage_first = g_new0(int, p->nstages + 1);
  if (s->nstages_given > 0) {
    int sum = 0;
    for (int k = 0; k < s->nstages_given; k++)
      sum += s->stage_layers[k];
    if (s->nstages_given != p->nstages || sum != m->nlayers) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': stages= lists %d stages of %d layers in all; expected %d stages "
                  "(pp x chunks) of %d layers in all",
                  s->text, s->nstages_given, sum, p->nstages, m->nlayers);
      return NULL;
    }
    for (int k = 0; k < p->nstages; k++)
      p->stage_first[k + 1] = p->stage_first[k] + s->stage_layers[k];
    for (int k = 1; k < p->nstages && cuts_at_blocks_only(m); k++) {
      int i = p->stage_first[k];
      if (i > 0 && i < m->nlayers && same_block(m, i - 1, i)) {
        g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                    "--split '%s': stage %d starts at layer '%s', inside the block of '%s'; "
                    "expected stages of a transformer to start at a block, so no residual "
                    "crosses a stage",
                    s->text, k, m->layers[i].name, m->layers[i - 1].name);
        return NULL;
      }
    }
  } else if (p->nstages > 1) {
    int blocks = count_blocks(m);
    if (cuts_at_blocks_only(m) && blocks < p->nstages) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': %d pipeline stages but %s has %d blocks; expected at most one "
                  "stage per block (stages of a transformer start at a block, so no residual "
                  "crosses a stage)",
                  s->text, p->nstages, m->path ? m->path : m->name, blocks);
      return NULL;
    }
    balance_stages(p);
  } else {
    p->stage_first[1] = m->nlayers;
  }
  p->unit = ts_plan_units(p);
  p->split_text = split_text(p, s);
  p->placement_text = placement_text(p);
  plan_memory(p);
  plan_traffic(p);
  p->model_flops_per_step = ts_model_train_flops_per_sample(m) * (double)o->global_batch;
  return g_steal_pointer(&p);
}
