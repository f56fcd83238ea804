/* ts_validate: split equivalence. Plans the split, makes its trace, gives every chip its
 * shard of the reference network's parameters, walks the trace numerically
 * (ts_validate_exec.c) for the requested steps, then compares the parameters every chip holds
 * with the single-processor reference (ts_nnet) and the bytes every chip sent with what the
 * trace's decompositions say it sends. docs/validation.md, "Split equivalence". */
#include "ts_util.h"
#include "ts_plan_priv.h"
#include "ts_validate_priv.h"

#include <math.h>
#include <string.h>

void ts_validate_options_default(ts_validate_options *o)
{
  memset(o, 0, sizeof *o);
  o->prec = TS_PREC_F32;
  o->steps = 2;
  o->global_batch = 8;
  o->micro_batch = 0;
  /* 256 bytes: every validation network then synchronises its gradients in several buckets,
   * so bucket boundaries are exercised (the planner's default is DDP's 25 MiB). */
  o->bucket_bytes = 256;
  o->algo = TS_ALGO_AUTO;
  o->optimizer = TS_VALIDATE_SGD;
  o->lr = 0.1;
  o->momentum = 0.9;
  o->weight_decay = 0.0;
  o->seed = 42;
}

void ts_validate_result_free(ts_validate_result *r)
{
  if (r == NULL)
    return;
  g_free(r->model);
  g_free(r->split);
  g_free(r->placement);
  g_free(r->topology);
  g_free(r->algorithms);
  for (int i = 0; i < r->ntensors; i++)
    g_free(r->tensors[i].name);
  g_free(r->tensors);
  g_free(r->ranks);
  g_free(r->failure);
  if (r->notes != NULL)
    g_ptr_array_unref(r->notes);
  g_free(r);
}

/* ---- topologies ------------------------------------------------------------------------ */

ts_topo *ts_validate_topology(const char *spec, GError **error)
{
  g_autofree char *kind = NULL;
  const char *colon = spec ? strchr(spec, ':') : NULL;
  gint64 a = 0, b = 1;
  gboolean ok = colon != NULL;
  if (ok) {
    kind = g_strndup(spec, (gsize)(colon - spec));
    g_auto(GStrv) parts = g_strsplit(colon + 1, "x", 3);
    int np = (int)g_strv_length(parts);
    ok = (np == 1 || np == 2) && ts_parse_int(parts[0], 1, 64, &a) &&
         (np == 1 || ts_parse_int(parts[1], 1, 64, &b));
    if (np == 1 && ok && strcmp(kind, "ring") != 0 && strcmp(kind, "switch") != 0)
      ok = FALSE;
    if (np == 2 && strcmp(kind, "ring") == 0)
      ok = FALSE;
    if (ok && strcmp(kind, "torus") != 0 && strcmp(kind, "mesh") != 0 &&
        strcmp(kind, "ring") != 0 && strcmp(kind, "switch") != 0)
      ok = FALSE;
  }
  if (!ok || a * b > 256) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--topology '%s': expected a topology file, a shipped name, or a small array: "
                "torus:AxB, mesh:AxB, ring:N or switch:GxN (G per node, N nodes), at most 256 "
                "chips",
                spec ? spec : "");
    return NULL;
  }
  /* Links with round numbers: the validator checks bytes, not times, but `auto` picks an
   * algorithm by time, so the dimensions differ as a real machine's would (a switch
   * hierarchy's outer level is slower). A [host] section lets offload and dedicated parameter
   * servers be planned. */
  GString *s = g_string_new(NULL);
  g_string_append_printf(s,
                         "[topology]\nname = %s\n[chip]\nname = validation chip\n"
                         "peak_tflops = 1\nmemory_GiB = 16\nmemory_bandwidth_GBps = 100\n"
                         "[host]\nlink_bandwidth_GBps = 25\nmemory_GiB = 64\n"
                         "cpu_tflops = 1\nnvme_bandwidth_GBps = 4\nnvme_GiB = 1000\n",
                         spec);
  gboolean sw = strcmp(kind, "switch") == 0;
  const char *shape = sw ? "switch" : strcmp(kind, "mesh") == 0 ? "mesh" : "ring";
  const char *names[2] = {sw ? "node" : "x", sw ? "net" : "y"};
  gint64 sizes[2] = {a, b};
  int nd = (strcmp(kind, "ring") == 0 || (sw && colon && !strchr(colon, 'x'))) ? 1 : 2;
  for (int d = 0; d < nd; d++)
    g_string_append_printf(s,
                           "[dim.%s]\nsize = %" G_GINT64_FORMAT "\nshape = %s\n"
                           "link_bandwidth_GBps = %d\nlatency_us = %d\n",
                           names[d], sizes[d], shape, sw && d == 1 ? 25 : 100,
                           sw && d == 1 ? 3 : 1);
  g_autoptr(GKeyFile) kf = g_key_file_new();
  g_autoptr(GError) local = NULL;
  gboolean loaded = g_key_file_load_from_data(kf, s->str, s->len, G_KEY_FILE_NONE, &local);
  g_string_free(s, TRUE);
  if (!loaded) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--topology '%s': %s", spec, local->message);
    return NULL;
  }
  return ts_topo_from_keyfile(kf, spec, error);
}

ts_topo *ts_validate_default_topology(int nchips, GError **error)
{
  int a = nchips, b = 1;
  for (int f = 2; f * f <= nchips; f++)
    if (nchips % f == 0) {
      a = nchips / f;
      b = f;
    }
  g_autofree char *spec =
      b == 1 ? g_strdup_printf("ring:%d", MAX(nchips, 1)) : g_strdup_printf("torus:%dx%d", a, b);
  g_autoptr(GError) local = NULL;
  ts_topo *t = ts_validate_topology(spec, &local);
  if (t == NULL)
    /* The validator executes every chip on this host: the small-array limits are its own,
     * not a topology the user gave, so say so (it used to return NULL with no error). */
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "a split of %d chips: the validator executes every chip on this host and builds "
                "its default array (%s) only up to 256 chips and 64 per dimension; expected a "
                "smaller split, or --topology torus:AxB",
                nchips, spec);
  return t;
}

/* ---- set-up ---------------------------------------------------------------------------- */

static void rank_free(vd_exec *e, vd_rank *r)
{
  vd_rank_clear_acts(e, r);
  for (int t = 0; t < r->ntensors; t++) {
    g_free(r->shard[t]);
    g_free(r->w[t]);
    g_free(r->g[t]);
    g_free(r->gs[t]);
    g_free(r->gp[t]);
    g_free(r->m[t]);
    g_free(r->v[t]);
  }
  g_free(r->n);
  g_free(r->shard);
  g_free(r->w);
  g_free(r->g);
  g_free(r->gs);
  g_free(r->gp);
  g_free(r->m);
  g_free(r->v);
  g_free(r->synced);
  g_free(r->own_lo);
  g_free(r->own_hi);
  g_free(r->holds);
  g_free(r->own_tp);
  g_free(r->tp_summed);
  g_free(r->materialized);
  g_free(r->y);
  g_free(r->dx);
  g_free(r->dr);
  g_free(r->dy);
  g_free(r->s);
  g_free(r->a0);
  g_free(r->ga);
}

/* Parameters each chip owns over the data-parallel group (ZeRO, parameter servers): member d
 * of D owns elements [c d / D, c (d+1) / D) of each layer's flat vector of c elements (its
 * tensors' tensor-parallel shards, concatenated). With hybrid sharding, member d of the S
 * ranks of its sharding group, in every replica alike. */
static void rank_owners(vd_exec *e, vd_rank *r)
{
  const vd_net *n = e->net;
  for (int i = 0; i < n->nlayers; i++) {
    const vd_layer *L = &n->layers[i];
    gint64 c = 0;
    for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++)
      c += r->n[t];
    gint64 lo = e->owners ? c * r->sh / e->S : 0, hi = e->owners ? c * (r->sh + 1) / e->S : c;
    gint64 base = 0;
    for (int t = L->tensor0; t < L->tensor0 + L->ntensors; t++) {
      r->own_lo[t] = CLAMP(lo - base, 0, r->n[t]);
      r->own_hi[t] = CLAMP(hi - base, 0, r->n[t]);
      base += r->n[t];
    }
  }
}

static void rank_init(vd_exec *e, vd_rank *r, int rank, double *const *init)
{
  const vd_net *n = e->net;
  const ts_trace *tr = e->tr;
  r->rank = rank;
  r->tp = e->ax[TS_AX_TP] >= 0 ? ts_trace_axis_coord(tr, rank, e->ax[TS_AX_TP]) : 0;
  r->dp = e->ax[TS_AX_DP] >= 0 ? ts_trace_axis_coord(tr, rank, e->ax[TS_AX_DP]) : 0;
  r->sh = r->dp;
  if (e->ax_shard >= 0) {
    /* Hybrid sharding: the trace's dp axis is the replicas; the data-parallel index (which
     * samples the chip takes) is replica x S + its place in the sharding group. */
    r->sh = ts_trace_axis_coord(tr, rank, e->ax_shard);
    r->dp = r->dp * e->S + r->sh;
  }
  r->pp = e->ax[TS_AX_PP] >= 0 ? ts_trace_axis_coord(tr, rank, e->ax[TS_AX_PP]) : 0;
  r->cp = e->ax[TS_AX_CP] >= 0 ? ts_trace_axis_coord(tr, rank, e->ax[TS_AX_CP]) : 0;
  if (e->C > 1 && e->ax_shard < 0) {
    /* Context parallelism: sharded states are owned over dp x cp, the gradient group (the
     * trace's dp and cp axes); the owner index is the chip's member index in it. */
    for (guint q = 0; q < tr->groups->len; q++) {
      const ts_group *g = g_ptr_array_index(tr->groups, q);
      if (g->naxes == 2 && g->axes[0] == e->ax[TS_AX_DP] && g->axes[1] == e->ax[TS_AX_CP]) {
        ts_group_base_chip(e->topo, &g->shape, rank, &r->sh);
        break;
      }
    }
  }
  int nt = r->ntensors = n->ntensors, nl = n->nlayers;
  r->n = g_new0(gint64, MAX(nt, 1));
  r->shard = g_new0(gint64 *, MAX(nt, 1));
  r->w = g_new0(void *, MAX(nt, 1));
  r->g = g_new0(void *, MAX(nt, 1));
  r->gs = g_new0(void *, MAX(nt, 1));
  r->gp = g_new0(void *, MAX(nt, 1));
  r->m = g_new0(void *, MAX(nt, 1));
  r->v = g_new0(void *, MAX(nt, 1));
  r->synced = g_new0(gboolean, MAX(nt, 1));
  r->own_lo = g_new0(gint64, MAX(nt, 1));
  r->own_hi = g_new0(gint64, MAX(nt, 1));
  r->holds = g_new0(gboolean, MAX(nl, 1));
  r->own_tp = g_new0(gboolean, MAX(nl, 1));
  r->tp_summed = g_new0(gboolean, MAX(nl, 1));
  r->materialized = g_new0(gboolean, MAX(nl, 1));
  for (int i = 0; i < nl; i++) {
    r->holds[i] = e->stage[i] == r->pp;
    r->materialized[i] = e->zero < 3 || e->S == 1;
  }
  gsize es = e->k->elem;
  for (int t = 0; t < nt; t++) {
    /* This chip's shard: the planner splits a layer by its tp mode over the tp axis, unless
     * the layer uses the tp axis for its batch (per-layer hybrid). */
    int layer = n->tensors[t].layer;
    r->shard[t] = vd_tensor_shard(n, t, e->dpmode[layer] ? 1 : e->T, r->tp, &r->n[t]);
    gint64 cnt = MAX(r->n[t], 1);
    r->w[t] = g_malloc0(es * (gsize)cnt);
    r->g[t] = g_malloc0(es * (gsize)cnt);
    r->gs[t] = g_malloc0(es * (gsize)cnt);
    r->gp[t] = g_malloc0(es * (gsize)cnt);
    r->m[t] = g_malloc0(es * (gsize)cnt);
    r->v[t] = g_malloc0(es * (gsize)cnt);
    for (gint64 j = 0; j < r->n[t]; j++)
      e->k->set(r->w[t], j, init[t][r->shard[t] ? r->shard[t][j] : j]);
  }
  int cells = MAX(e->nmicro * nl, 1);
  r->y = g_new0(vd_val, cells);
  r->dx = g_new0(vd_val, cells);
  r->dr = g_new0(vd_val, cells);
  r->dy = g_new0(vd_val, cells);
  r->s = g_new0(vd_saved, cells);
  r->a0 = g_new0(vd_val, MAX(e->nmicro, 1));
  r->ga = g_new0(vd_val, MAX(e->nmicro * (nl + 1), 1));
  vd_rank_clear_acts(e, r);
}

static double tolerance_of(const ts_validate_options *o)
{
  if (o->tolerance > 0)
    return o->tolerance;
  return o->prec == TS_PREC_F32 ? 1e-5 : 1e-12;
}

/* Per tensor, the largest normwise error over the whole copies the chips hold. Copies are told
 * apart by data-parallel replica (unless ZeRO-3 shards the tensor over it) and, for a tensor tp
 * replicates, by tp member; a copy whose elements do not add up to the tensor is missing a
 * shard and counts as infinitely wrong. */
static void compare(vd_exec *e, ts_nnet *ref, ts_validate_result *res)
{
  const vd_net *n = e->net;
  res->ntensors = n->ntensors;
  res->tensors = g_new0(ts_validate_tensor, MAX(n->ntensors, 1));
  res->max_rel_err = 0;
  /* ZeRO-3 keeps only its shard; with dp-overlap the updated shards are gathered at the start
   * of the next step (the trace is a steady-state step), so after the last step each owner's
   * shard is what is current. Either way the whole tensor is the owners' shards assembled. */
  gboolean sharded = (e->zero >= 3 || e->plan->dp_overlap) && e->S > 1;
  for (int t = 0; t < n->ntensors; t++) {
    gint64 numel = n->tensors[t].numel;
    double *want = g_new(double, numel);
    ts_nnet_get(ref, t, TS_NNET_PARAM, want);
    double norm = 0;
    for (gint64 j = 0; j < numel; j++)
      norm += want[j] * want[j];
    GHashTable *copies = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    for (int rank = 0; rank < e->nranks; rank++) {
      vd_rank *r = &e->ranks[rank];
      if (!r->holds[n->tensors[t].layer])
        continue;
      /* A copy: per replica (dp x cp when not sharded: cp ranks update copies of their own;
       * sharded over dp x cp or a sharding group: the group's shards together), per tp member
       * for tensors tp replicates. */
      int rep = !sharded ? r->dp * e->C + r->cp : e->C > 1 ? 0 : r->dp / e->S;
      int copy = rep * e->T + (r->shard[t] == NULL ? r->tp : 0);
      double *acc = g_hash_table_lookup(copies, GINT_TO_POINTER(copy));
      if (acc == NULL) {
        acc = g_new0(double, 2);
        g_hash_table_insert(copies, GINT_TO_POINTER(copy), acc);
      }
      gint64 lo = sharded ? r->own_lo[t] : 0, hi = sharded ? r->own_hi[t] : r->n[t];
      for (gint64 j = lo; j < hi; j++) {
        double d = e->k->get(r->w[t], j) - want[r->shard[t] ? r->shard[t][j] : j];
        acc[0] += d * d;
      }
      acc[1] += (double)(hi - lo);
    }
    double worst = 0;
    GHashTableIter it;
    gpointer key, val;
    g_hash_table_iter_init(&it, copies);
    while (g_hash_table_iter_next(&it, &key, &val)) {
      double *acc = val;
      double err = norm > 0 ? sqrt(acc[0] / norm) : sqrt(acc[0]);
      if (acc[1] != (double)numel || isnan(err))
        err = INFINITY;
      worst = MAX(worst, err);
    }
    if (g_hash_table_size(copies) == 0)
      worst = INFINITY;
    ts_validate_tensor *vt = &res->tensors[t];
    vt->name = g_strdup(n->tensors[t].name);
    vt->numel = numel;
    vt->copies = (int)g_hash_table_size(copies);
    vt->rel_err = worst;
    res->max_rel_err = MAX(res->max_rel_err, worst);
    g_hash_table_unref(copies);
    g_free(want);
  }
}

ts_validate_result *ts_validate_run(const ts_model *m, const ts_topo *t, const ts_split *s,
                                    const ts_validate_options *o, GError **error)
{
  if (o->steps < 1 || !(o->lr > 0) || o->momentum < 0 || o->weight_decay < 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--steps %d, --lr %g: expected at least one step and a positive learning rate",
                o->steps, o->lr);
    return NULL;
  }
  g_autoptr(GError) local = NULL;
  /* Mixtures of experts: their own walk (dispatch, experts, combine; ts_validate_moe.c). */
  if (vd_moe_model(m))
    return vd_moe_run(m, t, s, o, error);
  /* Context parallelism runs with dp, tp (and sp), pp and ZeRO (owners over dp x cp); with
   * hybrid sharding (a sharding group times cp), parameter servers or recomputation the walk
   * does not execute it yet: say so rather than compare something else. */
  if (s->degree[TS_AX_CP] > 1 &&
      ((s->shard > 0 && s->zero > 0) || s->ps > 0 || s->recompute == TS_RECOMPUTE_SELECTIVE ||
       s->recompute == TS_RECOMPUTE_DOTS)) {
    g_set_error(
        error, TS_ERROR, TS_ERROR_INPUT,
        "--split '%s': the validator executes context parallelism (cp) with dp, tp, sp, "
        "pp, zero and recompute=full, stage or op, not yet with shard, ps or "
        "recompute=selective or dots; expected a split without them (docs/validation.md lists "
        "what trainsim validate executes)",
        s->text);
    return NULL;
  }
  /* cp-ring=torch (PyTorch's all-gathered ring) is costed, not executed: the walk runs the
   * point-to-point ring only. */
  if (s->cp_ring == 1 + TS_CP_RING_TORCH) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--split '%s': the validator executes the point-to-point cp ring only; expected "
                "cp-ring=p2p or no cp-ring (cp-ring=torch is costed by run, not executed)",
                s->text);
    return NULL;
  }
  vd_net *net = vd_net_new(m, error);
  if (net == NULL)
    return NULL;
  gint64 batch = o->global_batch > 0 ? o->global_batch : 8;
  net->cfg.batch = (int)MIN(batch, G_MAXINT);
  net->cfg.seed = o->seed;
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = batch;
  po.micro_batch = o->micro_batch;
  po.bucket_bytes = o->bucket_bytes > 0 ? o->bucket_bytes : 256;
  po.algo = o->algo;
  g_autoptr(ts_plan) plan = ts_plan_new(m, t, s, &po, error);
  g_autoptr(ts_nnet) ref = plan ? ts_nnet_new(&net->cfg, o->prec, error) : NULL;
  /* The network's limits name its fields ("network config: in=100000"): say which file. */
  if (plan != NULL && ref == NULL)
    g_prefix_error(error, "%s: ", m->path != NULL ? m->path : m->name);
  g_autoptr(ts_trace) tr = ref ? ts_plan_trace(plan, error) : NULL;
  if (tr == NULL || !ts_trace_check(tr, t, error)) {
    vd_net_free(net);
    return NULL;
  }
  /* tp-overlap: a layer whose input is gathered and output reduced in chunks would have to
   * compute output rows from input chunks alone; attention mixes every token, so the
   * validator (which runs a chunked layer whole at one chunk) cannot execute it. */
  /* Under context parallelism such a layer runs its projections in chunks on either side of
   * the ring (ts_plan_trace's cp_ring_fwd), which the validator does not execute either. */
  /* Which collectives are chunked is the planner's rule (ts_plan_fwd_chunked). */
  for (int i = 0; i < m->nlayers; i++) {
    unsigned chunked = ts_plan_fwd_chunked(plan, i);
    if (plan->exec[i].cp_kv_bytes > 0 && chunked != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--split '%s': with tp-overlap and cp layer '%s' runs its projections in "
                  "chunks around the context-parallel ring, which the validator does not execute; "
                  "expected tp-overlap or cp, not both",
                  s->text, m->layers[i].name);
      vd_net_free(net);
      return NULL;
    }
    if (chunked == (TS_CHUNK_GATHER | TS_CHUNK_REDUCE)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--split '%s': with tp-overlap layer '%s' all-gathers its input and "
                  "reduce-scatters its output in chunks, which the validator does not execute "
                  "(it runs a chunked layer whole at one chunk); expected tp-overlap without "
                  "sp, or a model without such a layer",
                  s->text, m->layers[i].name);
      vd_net_free(net);
      return NULL;
    }
  }
  /* The validator's tensors are the reference's, one for one. */
  g_assert(ts_nnet_ntensors(ref) == net->ntensors);
  for (int i = 0; i < net->ntensors; i++)
    g_assert(ts_nnet_tensor(ref, i)->numel == net->tensors[i].numel);

  vd_exec ex = {0}, *e = &ex;
  e->net = net;
  e->prec = o->prec;
  e->k = vd_kern_of(o->prec);
  e->topo = t;
  e->tr = tr;
  e->plan = plan;
  e->notes = g_ptr_array_new_with_free_func(g_free);
  e->noted = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (int a = 0; a < TS_AX_N; a++) {
    e->ax[a] = -1;
    for (int x = 0; x < tr->naxes; x++)
      if (strcmp(tr->axes[x].name, ts_axis_kind_name(a)) == 0)
        e->ax[a] = x;
  }
  e->T = plan->degree[TS_AX_TP];
  e->D = plan->degree[TS_AX_DP];
  e->C = plan->degree[TS_AX_CP] > 1 ? plan->degree[TS_AX_CP] : 1;
  e->S = ts_plan_shard_ranks(plan);
  e->ax_shard = -1;
  for (int x = 0; x < tr->naxes; x++)
    if (strcmp(tr->axes[x].name, "shard") == 0)
      e->ax_shard = x;
  e->P = plan->degree[TS_AX_PP];
  e->nmicro = (int)plan->n_micro;
  e->mb = (int)plan->micro_batch;
  e->batch = batch;
  e->nranks = tr->nranks;
  e->zero = plan->zero;
  int nl = net->nlayers;
  e->drop_x = g_new0(gboolean, MAX(nl, 1));
  e->drop_p = g_new0(gboolean, MAX(nl, 1));
  e->drop_all = g_new0(gboolean, MAX(nl, 1));
  e->stage = g_new0(int, MAX(nl, 1));
  e->dpmode = g_new0(gboolean, MAX(nl, 1));
  e->work = g_new0(vd_layout, MAX(nl, 1));
  for (int i = 0; i < nl; i++) {
    /* What the plan drops after the forward pass (its memory model) must come back. */
    e->drop_all[i] = ts_plan_recomputes_forward(plan) && plan->unit && plan->unit[i] >= 0;
    e->drop_p[i] = plan->recompute == TS_RECOMPUTE_SELECTIVE;
    e->dpmode[i] = e->T > 1 && plan->layer_mode && plan->layer_mode[i] == TS_LAYER_MODE_DP;
  }
  for (int k = 0; k < plan->nstages; k++)
    for (int i = plan->stage_first[k]; i < plan->stage_first[k + 1] && i < nl; i++)
      e->stage[i] = k % MAX(e->P, 1);
  double *x = NULL;
  int *labels = NULL;
  vd_net_data(net, &x, &labels);
  e->x = x;
  e->labels = labels;
  double **init = g_new(double *, MAX(net->ntensors, 1));
  for (int i = 0; i < net->ntensors; i++) {
    init[i] = g_new(double, net->tensors[i].numel);
    ts_nnet_get(ref, i, TS_NNET_PARAM, init[i]);
  }
  e->ranks = g_new0(vd_rank, MAX(e->nranks, 1));
  for (int rank = 0; rank < e->nranks; rank++)
    rank_init(e, &e->ranks[rank], rank, init);
  for (int i = 0; i < net->ntensors; i++)
    g_free(init[i]);
  g_free(init);

  ts_validate_result *res = NULL;
  vd_run *run = vd_run_new(e, tr, m, o, error);
  /* Owners (ZeRO, servers on every worker) need whole shares: DeepSpeed pads its flat buffers
   * to a multiple of dp, the trace carries unpadded bytes, so the validator asks for layers
   * that divide. */
  for (int i = 0; run != NULL && i < nl && e->owners && e->S > 1; i++) {
    gint64 c = 0;
    for (int q = net->layers[i].tensor0; q < net->layers[i].tensor0 + net->layers[i].ntensors; q++)
      c += e->ranks[0].n[q];
    if (c % e->S != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INVALID,
                  "--split '%s': layer '%s' holds %" G_GINT64_FORMAT " parameters per chip, "
                  "which %s=%d does not divide; expected a model whose layers divide by dp (or "
                  "shard) when ZeRO or parameter servers shard them (the validator does not pad)",
                  s->text, net->layers[i].name, c, e->ax_shard >= 0 ? "shard" : "dp", e->S);
      vd_run_free(run);
      run = NULL;
    }
  }
  for (int rank = 0; run != NULL && rank < e->nranks; rank++) {
    vd_rank *r = &e->ranks[rank];
    rank_owners(e, r);
    /* ZeRO-3: a chip holds only what it owns; the rest is gathered before use. */
    for (int q = 0; q < r->ntensors && e->zero >= 3 && e->S > 1; q++)
      for (gint64 j = 0; j < r->n[q]; j++)
        if (j < r->own_lo[q] || j >= r->own_hi[q])
          e->k->set(r->w[q], j, NAN);
  }
  if (run != NULL) {
    res = g_new0(ts_validate_result, 1);
    res->executed = TRUE;
    for (int step = 0; step < o->steps && res->executed; step++) {
      for (int rank = 0; rank < e->nranks; rank++) {
        vd_rank *r = &e->ranks[rank];
        vd_rank_clear_acts(e, r);
        for (int q = 0; q < r->ntensors; q++) {
          memset(r->g[q], 0, e->k->elem * (gsize)MAX(r->n[q], 1));
          memset(r->gs[q], 0, e->k->elem * (gsize)MAX(r->n[q], 1));
          memset(r->gp[q], 0, e->k->elem * (gsize)MAX(r->n[q], 1));
          r->synced[q] = FALSE;
        }
        r->loss = 0;
      }
      res->executed = vd_run_step(run);
      if (step == 0)
        for (int rank = 0; rank < e->nranks; rank++)
          res->loss += e->ranks[rank].loss;
      if (res->executed)
        vd_run_note_unread(run);
    }
    /* The reference's steps. */
    for (int step = 0; step < o->steps; step++) {
      ts_nnet_zero_grad(ref);
      double l = ts_nnet_forward_backward(ref, 0, net->cfg.batch);
      if (step == 0)
        res->loss_ref = l;
      if (o->optimizer == TS_VALIDATE_ADAM) {
        ts_adam hp = {o->lr, 0.9, 0.999, 1e-8, o->weight_decay};
        ts_nnet_adam(ref, &hp);
      } else {
        ts_nnet_sgd(ref, o->lr, o->momentum, o->weight_decay);
      }
    }
    compare(e, ref, res);
    res->tolerance = tolerance_of(o);
    res->nranks = e->nranks;
    res->ranks = g_new0(ts_validate_rank, MAX(e->nranks, 1));
    res->bytes_ok = res->executed;
    for (int rank = 0; rank < e->nranks; rank++) {
      res->ranks[rank].trace_bytes = e->ranks[rank].trace_bytes;
      res->ranks[rank].sent_bytes = e->ranks[rank].sent_bytes;
      if (!(res->ranks[rank].trace_bytes == res->ranks[rank].sent_bytes))
        res->bytes_ok = FALSE;
    }
    double loss_err = fabs(res->loss - res->loss_ref) / MAX(fabs(res->loss_ref), 1e-300);
    res->numeric_ok =
        res->executed && res->max_rel_err <= res->tolerance && loss_err <= res->tolerance;
    res->passed = res->executed && res->numeric_ok && res->bytes_ok;
    res->failure = vd_run_take_failure(run);
    gint64 p2p;
    vd_run_counts(run, &res->ops_compute, &res->ops_coll, &p2p);
    res->ops_p2p = p2p;
    res->model = g_strdup(m->name);
    res->split = g_strdup(plan->split_text);
    res->placement = g_strdup(plan->placement_text);
    res->topology = g_strdup(t->name);
    res->prec = o->prec;
    res->steps = o->steps;
    res->algorithms = vd_run_algorithms(run);
    res->notes = g_steal_pointer(&e->notes);
    vd_run_free(run);
  }
  for (int rank = 0; rank < e->nranks; rank++)
    rank_free(e, &e->ranks[rank]);
  g_free(e->ranks);
  if (e->notes != NULL)
    g_ptr_array_unref(e->notes);
  g_hash_table_unref(e->noted);
  g_free(e->drop_x);
  g_free(e->drop_p);
  g_free(e->drop_all);
  g_free(e->stage);
  g_free(e->dpmode);
  g_free(e->work);
  g_free(x);
  g_free(labels);
  vd_net_free(net);
  return res;
}

/* ---- report ---------------------------------------------------------------------------- */

char *ts_validate_result_text(const ts_validate_result *r, gboolean per_tensor)
{
  GString *s = g_string_new(NULL);
  char e1[32], e2[32];
  g_string_append_printf(s, "%s, split %s (%s) on %s, %s, %d step%s, collectives: %s\n", r->model,
                         r->split, r->placement, r->topology, ts_prec_name(r->prec), r->steps,
                         r->steps == 1 ? "" : "s", r->algorithms);
  g_string_append_printf(s,
                         "  executed %" G_GINT64_FORMAT " compute ops, %" G_GINT64_FORMAT
                         " collectives and %" G_GINT64_FORMAT " sends and receives per step%s\n",
                         r->ops_compute / MAX(r->steps, 1), r->ops_coll / MAX(r->steps, 1),
                         r->ops_p2p / MAX(r->steps, 1), r->executed ? "" : " (stopped)");
  if (r->failure != NULL)
    g_string_append_printf(s, "  execution failed: %s\n", r->failure);
  g_string_append_printf(s, "  loss of step 1: %s split, %s reference\n",
                         g_ascii_formatd(e1, sizeof e1, "%.10f", r->loss),
                         g_ascii_formatd(e2, sizeof e2, "%.10f", r->loss_ref));
  if (per_tensor) {
    g_string_append_printf(s, "  %-22s %10s %7s %12s\n", "tensor", "elements", "copies", "rel_err");
    for (int i = 0; i < r->ntensors; i++)
      g_string_append_printf(s, "  %-22s %10" G_GINT64_FORMAT " %7d %12s\n", r->tensors[i].name,
                             r->tensors[i].numel, r->tensors[i].copies,
                             g_ascii_formatd(e1, sizeof e1, "%.3e", r->tensors[i].rel_err));
  }
  g_string_append_printf(s, "  largest normwise relative error %s (tolerance %s): %s\n",
                         g_ascii_formatd(e1, sizeof e1, "%.3e", r->max_rel_err),
                         g_ascii_formatd(e2, sizeof e2, "%.0e", r->tolerance),
                         r->numeric_ok ? "pass" : "FAIL");
  double tb = 0, sb = 0;
  int bad = 0;
  for (int i = 0; i < r->nranks; i++) {
    tb += r->ranks[i].trace_bytes;
    sb += r->ranks[i].sent_bytes;
    bad += !(r->ranks[i].trace_bytes == r->ranks[i].sent_bytes);
  }
  g_string_append_printf(s,
                         "  bytes sent, all chips: %s by the trace, %s executed; %d of %d chips "
                         "differ: %s\n",
                         g_ascii_formatd(e1, sizeof e1, "%.0f", tb),
                         g_ascii_formatd(e2, sizeof e2, "%.0f", sb), bad, r->nranks,
                         r->bytes_ok ? "pass" : "FAIL");
  if (bad > 0 || per_tensor)
    for (int i = 0; i < r->nranks; i++)
      if (per_tensor || r->ranks[i].trace_bytes != r->ranks[i].sent_bytes)
        g_string_append_printf(s, "    chip %d: trace %s, executed %s\n", i,
                               g_ascii_formatd(e1, sizeof e1, "%.0f", r->ranks[i].trace_bytes),
                               g_ascii_formatd(e2, sizeof e2, "%.0f", r->ranks[i].sent_bytes));
  for (guint i = 0; r->notes != NULL && i < r->notes->len; i++)
    g_string_append_printf(s, "  note: %s\n", (char *)g_ptr_array_index(r->notes, i));
  g_string_append_printf(s, "  result: %s\n", r->passed ? "PASS" : "FAIL");
  return g_string_free(s, FALSE);
}
