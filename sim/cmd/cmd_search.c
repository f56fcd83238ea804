/* cmd_search: `trainsim search`, the best splits of a model on a topology under the memory
 * limit: every valid split, placement and micro-batch is predicted, those that fit are
 * ranked, and every split family that lost is given its reason (does not fit,
 * communication-bound, bubble-bound, compute-bound). */
#include "ts_backends.h"
#include "ts_capacity.h"
#include "ts_progress.h"
#include "ts_cmd.h"
#include "ts_sweep.h"
#include "ts_util.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  int k; /* position in the outcomes */
  const ts_config *c;
  const ts_result *r;
} cand;

/* What the ranking minimises (--objective): the step (or, with a training target, the
 * expected days, which rank the same on one topology), the cost, or the energy. */
typedef enum { OBJ_TIME, OBJ_COST, OBJ_ENERGY } objective;
static objective g_objective = OBJ_TIME;

static double obj_value(const ts_result *r)
{
  switch (g_objective) {
  case OBJ_COST:
    return r->planned ? r->cost_usd : r->step_time_s * r->chips;
  case OBJ_ENERGY:
    return r->planned ? r->energy_J : r->energy_per_step_J;
  case OBJ_TIME:
  default:
    return r->planned ? r->expected_train_s : r->step_time_s;
  }
}

static gint by_step(gconstpointer a, gconstpointer b)
{
  const cand *x = a, *y = b;
  double vx = obj_value(x->r), vy = obj_value(y->r);
  if (vx != vy)
    return vx < vy ? -1 : 1;
  if (x->r->step_time_s != y->r->step_time_s)
    return x->r->step_time_s < y->r->step_time_s ? -1 : 1;
  return x->k < y->k ? -1 : x->k > y->k; /* ties: enumeration order, so output is stable */
}

/* Why a family's best split lost to the winner: the part of the step that grew most. */
typedef struct {
  const char *family;
  const char *status; /* "best", "lost", "does not fit" */
  const char *reason; /* "communication-bound", "bubble-bound", "compute-bound", "does not fit" */
  const cand *best;   /* fastest fitting split of the family; NULL when none fits */
  double min_mem;     /* smallest memory per chip of the family, bytes */
  double loss_pct;
  char *detail;
} family;

static const char *loss_reason(const ts_result *w, const ts_result *f, char **detail)
{
  double dc = f->compute_time_s - w->compute_time_s;
  double dm = f->exposed_comm_time_s - w->exposed_comm_time_s;
  double di = f->idle_time_s - w->idle_time_s; /* pipeline bubbles and waits */
  char a[32], b[32];
  if (dm >= dc && dm >= di) {
    *detail = g_strdup_printf("exposed communication %s vs %s",
                              ts_fmt_time(a, sizeof a, f->exposed_comm_time_s),
                              ts_fmt_time(b, sizeof b, w->exposed_comm_time_s));
    return "communication-bound";
  }
  if (di >= dc) {
    *detail = g_strdup_printf("idle (bubble) %s vs %s", ts_fmt_time(a, sizeof a, f->idle_time_s),
                              ts_fmt_time(b, sizeof b, w->idle_time_s));
    return "bubble-bound";
  }
  *detail = g_strdup_printf("compute %s vs %s", ts_fmt_time(a, sizeof a, f->compute_time_s),
                            ts_fmt_time(b, sizeof b, w->compute_time_s));
  return "compute-bound";
}

/* Names each axis's dimensions with their link bandwidth, e.g. "tp on x (100 GB/s)". */
static char *placement_note(const ts_topo *t, const char *placement)
{
  GString *s = g_string_new(NULL);
  g_auto(GStrv) axes = g_strsplit(placement, ",", -1);
  for (char **a = axes; *a != NULL; a++) {
    const char *at = strchr(*a, '@');
    if (at == NULL)
      continue;
    g_string_append_printf(s, "%s%.*s on ", s->len ? ", " : "", (int)(at - *a), *a);
    g_auto(GStrv) dims = g_strsplit(at + 1, "+", -1);
    for (char **d = dims; *d != NULL; d++) {
      g_autofree char *name = g_strdup(*d);
      char *colon = strchr(name, ':');
      if (colon != NULL)
        *colon = '\0';
      int di = ts_topo_dim_index(t, name);
      char bw[G_ASCII_DTOSTR_BUF_SIZE] = "?";
      if (di >= 0)
        g_ascii_formatd(bw, sizeof bw, "%.4g", t->dims[di].link_bw_Bps / 1e9);
      g_string_append_printf(s, "%s%s (%s GB/s)", d != dims ? "+" : "", *d, bw);
    }
  }
  return g_string_free(s, FALSE);
}

static void jset_result(JsonObject *o, const cand *c)
{
  json_object_set_string_member(o, "split_arg", c->c->split);
  json_object_set_string_member(o, "split", c->r->split);
  json_object_set_string_member(o, "placement", c->r->placement);
  json_object_set_int_member(o, "micro_batch", c->r->micro_batch);
  json_object_set_double_member(o, "step_time_s", c->r->step_time_s);
  json_object_set_double_member(o, "samples_per_s", c->r->samples_per_s);
  /* Tokens as `run` reports them: null for a model without a sequence. */
  if (c->r->tokens_per_sample > 0) {
    json_object_set_double_member(o, "tokens_per_s", c->r->tokens_per_s);
    json_object_set_double_member(o, "tokens_per_s_per_chip",
                                  c->r->chips > 0 ? c->r->tokens_per_s / c->r->chips : 0);
  } else {
    json_object_set_null_member(o, "tokens_per_s");
    json_object_set_null_member(o, "tokens_per_s_per_chip");
  }
  json_object_set_double_member(o, "mfu", c->r->mfu);
  json_object_set_double_member(o, "compute_time_s", c->r->compute_time_s);
  json_object_set_double_member(o, "exposed_comm_time_s", c->r->exposed_comm_time_s);
  json_object_set_double_member(o, "idle_time_s", c->r->idle_time_s);
  json_object_set_double_member(o, "memory_per_chip_bytes", c->r->mem.total);
  json_object_set_boolean_member(o, "fits_memory", c->r->mem.fits);
}

int ts_cmd_search(int argc, char **argv)
{
  g_autofree char *outdir = NULL, *format = NULL;
  g_autofree char *backend = NULL;
  gint64 top = 5, max_chips = G_MININT64 /* not given: no bound */, max_configs = 2000;
  gboolean vary_options = FALSE, full = FALSE;
  g_auto(ts_cmd_plan_args) pa;
  ts_cmd_plan_args_init(&pa, TS_CMD_PLAN_SEARCH);
  g_auto(ts_cmd_machine_args) ma = {0};
  gint64 jobs = G_MININT64; /* not given: every core */
  g_autofree char *objective_opt = NULL, *max_days_opt = NULL, *budget_opt = NULL;
  g_auto(ts_capacity_options) cap;
  ts_capacity_options_init(&cap);
  GOptionEntry search_entries[] = {
      {"top", 'k', 0, G_OPTION_ARG_INT64, &top, "How many ranked splits to show (default 5)", "K"},
      {"vary-options", 0, 0, G_OPTION_ARG_NONE, &vary_options,
       "Also search every context-parallel degree (without it: only where a sample does not fit "
       "a chip, >= 8192 tokens a rank), sp, interleaved stages, recomputation and the hybrid "
       "sharding group (many more candidates; bound them with --max-configs)",
       NULL},
      {"max-configs", 0, 0, G_OPTION_ARG_INT64, &max_configs,
       "At most N splits are planned (default 2000; 0: no bound); a note says when it cut the "
       "search short",
       "N"},
      {"backend", 0, 0, G_OPTION_ARG_STRING, &backend, ts_backend_kind_help(), "B"},
      {"full", 0, 0, G_OPTION_ARG_NONE, &full,
       "Replay every rank even where ranks are identical (slower; same result)", NULL},
      {"jobs", 'j', 0, G_OPTION_ARG_INT64, &jobs, "Worker processes (default: every core)", "N"},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &format, "text (default) or json", "F"},
      {"output-dir", 'o', 0, G_OPTION_ARG_FILENAME, &outdir,
       "Also write search.txt, search.json and every candidate (candidates.csv, .json)", "DIR"},
      {"objective", 0, 0, G_OPTION_ARG_STRING, &objective_opt,
       "Rank by time (default), cost (needs a price and --tokens, --samples or --steps) or "
       "energy (needs tdp_W)",
       "time|cost|energy"},
      {"max-days", 0, 0, G_OPTION_ARG_STRING, &max_days_opt,
       "With a training target: drop splits expected to take longer", "D"},
      {"max-chips", 0, 0, G_OPTION_ARG_INT64, &max_chips,
       "Refuse a topology of more chips (compare sizes with sweep --vary dims --max-chips)", "N"},
      {"budget", 0, 0, G_OPTION_ARG_STRING, &budget_opt,
       "With a training target: drop splits expected to cost more, USD", "USD"},
      {NULL}};
  g_autofree GOptionEntry *plan_entries = ts_cmd_plan_entries(&pa);
  g_autofree GOptionEntry *machine_entries = ts_cmd_machine_entries(&ma);
  g_autofree GOptionEntry *cap_entries = ts_capacity_option_entries(&cap);
  g_autofree GOptionEntry *e1 = ts_option_entries_concat(plan_entries, search_entries);
  g_autofree GOptionEntry *e2 = ts_option_entries_concat(e1, machine_entries);
  g_autofree GOptionEntry *entries = ts_option_entries_concat(e2, cap_entries);
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse("search", "",
                    "Finds the fastest splits (and placements, micro-batches) of a model on a "
                    "topology that fit in memory, ranked, and says why each other split family "
                    "lost. Tries tensor, pipeline and data parallelism with ZeRO 0-3, FSDP2 "
                    "(zero=3,fsdp2, and shard=N across nodes) on GPUs, and context parallelism "
                    "for sequences too long for one chip.",
                    "Example:\n  trainsim search -t asym-16x16 -m gpt3-6.7b -b 256\nSee "
                    "docs/whatif.md.",
                    entries, &argc, &argv, &err) ||
      !ts_capacity_options_finish(&cap, &err))
    return ts_cmd_fail("search", err);
  double max_days = 0, budget = 0;
  g_objective = OBJ_TIME;
  if (objective_opt != NULL) {
    if (strcmp(objective_opt, "cost") == 0)
      g_objective = OBJ_COST;
    else if (strcmp(objective_opt, "energy") == 0)
      g_objective = OBJ_ENERGY;
    else if (strcmp(objective_opt, "time") != 0)
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--objective '%s': expected time, cost or energy",
                  objective_opt);
  }
  /* Without a training target a cost is chip-seconds per step, which on the one topology
   * searched ranks exactly as time: the ranking looked like a cost ranking but had no cost. */
  if (err == NULL && g_objective == OBJ_COST && !cap.any)
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--objective cost: expected --tokens, --samples or --steps (the cost is of the "
                "training run; without one it ranks as --objective time)");
  if (err == NULL && max_days_opt != NULL &&
      (!ts_parse_double(max_days_opt, &max_days) || !(max_days > 0) || !cap.any))
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--max-days '%s': expected a positive number of days, with --tokens, --samples "
                "or --steps",
                max_days_opt);
  if (err == NULL && budget_opt != NULL &&
      (!ts_parse_double(budget_opt, &budget) || !(budget > 0) || !cap.any))
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--budget '%s': expected a positive number of USD, with --tokens, --samples or "
                "--steps and a price",
                budget_opt);
  if (err != NULL)
    return ts_cmd_fail("search", err);
  gboolean json_out = format != NULL && strcmp(format, "json") == 0;
  if (argc > 1)
    ts_cmd_unexpected("search", argv[1], &err);
  else if (format != NULL && !json_out && strcmp(format, "text") != 0)
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--format '%s': expected text or json", format);
  else if (!ts_cmd_plan_args_finish(&pa, NULL, &err)) {
    /* err is set */
  } else if (max_chips != G_MININT64 && max_chips < 1)
    /* 0 read as "no bound", which leaving the option out already says; a bound of 0 chips
     * is a typo or a script's empty value. */
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--max-chips %" G_GINT64_FORMAT
                ": expected a number of chips >= 1 (leave it out for no bound)",
                max_chips);
  else if (max_configs < 0 || max_configs > 100000000)
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--max-configs %" G_GINT64_FORMAT ": expected a count in [0, 100000000] (0: no "
                "bound)",
                max_configs);
  else if (top < 1 || top > 1000000)
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--top %" G_GINT64_FORMAT ": expected a count in [1, 1000000]", top);
  else if (jobs != G_MININT64 && !ts_pool_parse_jobs(jobs, &err)) {
    /* err is set */
  } else if (!ts_run_backend_valid(backend, &err) || !ts_cmd_cfg(backend, ma.cfg, &err)) {
    /* err is set */
  } else if (outdir != NULL && !ts_cmd_prepare_dir(outdir, &err)) {
    /* err is set */
  }
  if (err != NULL)
    return ts_cmd_fail("search", err);

  /* Cost and energy need their inputs: without a price every cost was 0, so --objective cost
   * ranked by nothing and every split passed --budget; without a power, likewise energy. */
  if (g_objective != OBJ_TIME || budget_opt != NULL) {
    g_autoptr(ts_topo) t0 = ts_cmd_load_topo(pa.topology, NULL, &err);
    if (t0 == NULL)
      return ts_cmd_fail("search", err);
    ts_capacity_params c;
    ts_capacity_params_effective(&cap, t0, &c);
    const char *what = g_objective == OBJ_ENERGY ? "--objective energy" : NULL;
    if ((g_objective == OBJ_COST || budget_opt != NULL) && !(c.price_per_chip_hour > 0))
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "%s: %s has no price; expected --price-per-hour USD (or [chip] "
                  "price_per_hour in the topology)",
                  g_objective == OBJ_COST ? "--objective cost" : "--budget", pa.topology);
    else if (what != NULL && !(c.busy_W > 0))
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "%s: %s has no chip power; expected --tdp-W W (or [chip] tdp_W in the topology)",
                  what, pa.topology);
    if (err != NULL)
      return ts_cmd_fail("search", err);
  }

  ts_sweep_spec spec = {0};
  char *tl[] = {pa.topology, NULL}, *ml[] = {pa.model, NULL};
  const gint64 global_batch = pa.global_batch;
  spec.topologies = tl;
  spec.models = ml;
  spec.auto_splits = TRUE;
  spec.global_batch = g_array_new(FALSE, FALSE, sizeof(gint64));
  g_array_append_val(spec.global_batch, global_batch);
  spec.micro_batch = g_array_new(FALSE, FALSE, sizeof(gint64));
  spec.micro_auto = pa.micro_auto;
  g_array_append_vals(spec.micro_batch, pa.micro_batches->data, pa.micro_batches->len);
  spec.vary = g_ptr_array_new();
  spec.backend = backend != NULL ? backend : "analytic";
  /* The plan options run takes: the collective algorithm and the gradient bucket were fixed
   * at auto and 25 MiB here, so a search and a run of its winner could disagree. */
  spec.algo = (ts_coll_algo)pa.algo;
  spec.bucket_MiB = pa.bucket_MiB;
  spec.full = full;
  /* Issue 13: with --vary-options the options a planner chooses besides the axes (context
   * parallelism, recomputation, sequence parallelism, interleaved stages, the hybrid-sharding
   * group) are searched too, within a bound on the splits planned. Off by default: on 256
   * chips they multiply the candidates past what a 2-core search replays in minutes. */
  spec.vary_options = vary_options;
  spec.max_configs = (int)max_configs;
  gboolean cut = FALSE;
  spec.truncated = &cut;
  spec.progress = "search (splits)";
  g_autoptr(ts_inputs) cache = ts_inputs_new();
  if (err == NULL)
    ts_cmd_machine_apply(&ma, cache, tl, NULL, &err);
  g_autoptr(ts_sweep) sw = err == NULL ? ts_sweep_new(&spec, cache, &err) : NULL;
  if (sw != NULL && ma.cfg != NULL)
    ts_sweep_set_sg_cfg(sw, (const char *const *)ma.cfg);
  if (sw != NULL && cut)
    g_printerr("trainsim search: note: --max-configs %" G_GINT64_FORMAT " stopped the split "
               "enumeration; later splits were not evaluated (raise it, or 0 for all)\n",
               max_configs);
  g_array_unref(spec.global_batch);
  g_array_unref(spec.micro_batch);
  g_ptr_array_unref(spec.vary);
  if (sw == NULL)
    return ts_cmd_fail("search", err);
  int n = ts_sweep_size(sw);
  if (max_chips != G_MININT64 && n > 0 && ts_sweep_configs(sw)[0].topo->nchips > max_chips) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--max-chips %" G_GINT64_FORMAT ": %s has %d chips; expected a topology of at "
                "most that many (sweep --vary dims compares array sizes)",
                max_chips, pa.topology, n > 0 ? ts_sweep_configs(sw)[0].topo->nchips : 0);
    return ts_cmd_fail("search", err);
  }
  const ts_config *cfg = ts_sweep_configs(sw);
  if (n == 0) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INVALID,
                "no valid split of %s on %s at global batch %" G_GINT64_FORMAT
                "; expected a batch that the data-parallel degrees divide",
                pa.model, pa.topology, global_batch);
    return ts_cmd_fail("search", err);
  }
  int *idx = g_new(int, n);
  for (int i = 0; i < n; i++)
    idx[i] = i;
  ts_outcome *out = g_new0(ts_outcome, n);
  /* Memory needs only the plan: a configuration that does not fit is never replayed, its
   * family's smallest memory per chip is all the report needs. */
  int *pidx = g_new(int, n);
  int np = 0;
  GHashTable *unfit_mem = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  GPtrArray *unfit_order = g_ptr_array_new();
  /* Planning is the first half of a long search: its own progress (ts_progress). */
  ts_progress pg;
  ts_progress_init(&pg, TRUE, "search (planning)", "configurations", n);
  for (int i = 0; i < n; i++) {
    if (i > 0)
      ts_progress_step(&pg, i);
    g_autoptr(GError) pe = NULL;
    g_autoptr(ts_split) sp = ts_split_parse(cfg[i].split, &pe);
    g_autoptr(ts_plan) p =
        sp != NULL ? ts_plan_new(cfg[i].model, cfg[i].topo, sp, &cfg[i].po, &pe) : NULL;
    if (p != NULL && p->mem.fits) {
      pidx[np++] = i;
      continue;
    }
    out[i].status = TS_OUTCOME_INVALID;
    out[i].error_code = TS_ERROR_INVALID;
    if (p == NULL) {
      out[i].message = g_strdup(pe->message);
      continue;
    }
    char b1[32], b2[32];
    out[i].message = g_strdup_printf("does not fit: %s per chip, %s available (capacity less the "
                                     "runtime reserve)",
                                     ts_fmt_bytes(b1, sizeof b1, p->mem.total),
                                     ts_fmt_bytes(b2, sizeof b2, p->mem.capacity - p->mem.reserve));
    char *f = ts_split_family(p->split_text);
    double *mm = g_hash_table_lookup(unfit_mem, f);
    if (mm == NULL) {
      mm = g_new(double, 1);
      *mm = p->mem.total;
      g_hash_table_insert(unfit_mem, f, mm);
      g_ptr_array_add(unfit_order, f);
    } else {
      *mm = MIN(*mm, p->mem.total);
      g_free(f);
    }
  }
  ts_progress_step(&pg, n);
  gboolean noted = pg.printed;
  ts_progress_end(&pg);
  if (noted)
    g_printerr("search: %d of %d configurations fit; predicting them\n", np, n);
  ts_outcome *pout = g_new0(ts_outcome, MAX(np, 1));
  ts_pool_options po = {jobs > 0 ? (int)jobs : ts_pool_default_jobs(), TRUE, "search"};
  int status = 0;
  gboolean ran = ts_pool_run(cfg, pidx, np, &po, pout, &err);
  for (int k = 0; k < np; k++)
    out[pidx[k]] = pout[k]; /* ownership moves */
  g_free(pout);
  g_free(pidx);
  if (!ran) {
    status = ts_cmd_fail("search", err);
    goto done;
  }
  {
    const ts_topo *t = cfg[0].topo;
    const ts_model *m = cfg[0].model;
    GArray *fit = g_array_new(FALSE, FALSE, sizeof(cand));
    GArray *all = g_array_new(FALSE, FALSE, sizeof(cand));
    for (int k = 0; k < n && status == 0; k++)
      if (out[k].status == TS_OUTCOME_OK &&
          !ts_capacity_apply(&cap, cfg[k].topo, &out[k].res, &err))
        status = ts_cmd_fail("search", err);
    if (status != 0)
      goto done;
    for (int k = 0; k < n; k++) {
      if (out[k].status != TS_OUTCOME_OK)
        continue;
      /* Constraints: a split over the deadline or the budget is out, as one that does not
       * fit would be (it is kept in the candidates' CSV). */
      ts_result *rk = &out[k].res;
      if ((max_days > 0 && rk->expected_train_s > max_days * 86400.0) ||
          (budget > 0 && rk->cost_usd > budget)) {
        out[k].status = TS_OUTCOME_INVALID;
        out[k].message = g_strdup_printf(
            "%s: over %s", rk->split,
            max_days > 0 && rk->expected_train_s > max_days * 86400.0 ? "--max-days" : "--budget");
        continue;
      }
      cand c = {k, &cfg[k], &out[k].res};
      g_array_append_val(all, c);
      if (out[k].res.mem.fits)
        g_array_append_val(fit, c);
    }
    g_array_sort(fit, by_step);
    g_array_sort(all, by_step);
    /* Families in the order of their fastest member (fitting or not). */
    GArray *fams = g_array_new(FALSE, TRUE, sizeof(family));
    GHashTable *fam_of = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (guint i = 0; i < all->len; i++) {
      const cand *c = &g_array_index(all, cand, i);
      char *f = ts_split_family(c->r->split);
      gpointer v;
      family *fm;
      if (g_hash_table_lookup_extended(fam_of, f, NULL, &v)) {
        fm = &g_array_index(fams, family, GPOINTER_TO_INT(v));
        g_free(f);
      } else {
        family nf = {0};
        nf.family = f;
        nf.min_mem = INFINITY;
        g_array_append_val(fams, nf);
        g_hash_table_insert(fam_of, f, GINT_TO_POINTER((int)fams->len - 1));
        fm = &g_array_index(fams, family, fams->len - 1);
      }
      if (c->r->mem.total < fm->min_mem)
        fm->min_mem = c->r->mem.total;
      if (c->r->mem.fits && fm->best == NULL)
        fm->best = c;
    }
    /* Families none of whose splits fit: known from their plans alone. */
    for (guint i = 0; i < unfit_order->len; i++) {
      const char *f = g_ptr_array_index(unfit_order, i);
      double mm = *(double *)g_hash_table_lookup(unfit_mem, f);
      gpointer v;
      if (g_hash_table_lookup_extended(fam_of, f, NULL, &v)) {
        family *fm = &g_array_index(fams, family, GPOINTER_TO_INT(v));
        fm->min_mem = MIN(fm->min_mem, mm);
        continue;
      }
      family nf = {0};
      nf.family = g_strdup(f);
      nf.min_mem = mm;
      g_array_append_val(fams, nf);
      g_hash_table_insert(fam_of, (char *)nf.family, GINT_TO_POINTER((int)fams->len - 1));
    }
    const cand *win = fit->len > 0 ? &g_array_index(fit, cand, 0) : NULL;
    const cand *second = fit->len > 1 ? &g_array_index(fit, cand, 1) : NULL;
    for (guint i = 0; i < fams->len; i++) {
      family *f = &g_array_index(fams, family, i);
      char b1[32], b2[32];
      if (f->best == NULL) {
        f->status = "does not fit";
        f->reason = "does not fit";
        f->detail = g_strdup_printf(
            "needs at least %s per chip, %s available (capacity less the runtime reserve)",
            ts_fmt_bytes(b1, sizeof b1, f->min_mem),
            ts_fmt_bytes(b2, sizeof b2, t->chip.memory_bytes - ts_chip_memory_reserve(&t->chip)));
      } else if (f->best->k == win->k) {
        f->status = "best";
        f->reason = "";
        f->detail = g_strdup("");
      } else {
        f->status = "lost";
        f->loss_pct = 100.0 * (f->best->r->step_time_s / win->r->step_time_s - 1.0);
        if (f->loss_pct < 0.05) { /* lost on the enumeration order only */
          f->reason = "tie";
          f->detail = g_strdup("same step time within 0.05%, listed later");
        } else {
          f->reason = loss_reason(win->r, f->best->r, &f->detail);
        }
      }
    }
    /* Placements of the winner's degrees and micro-batch: where each axis went matters. */
    GArray *places = g_array_new(FALSE, FALSE, sizeof(cand));
    for (guint i = 0; win != NULL && i < all->len; i++) {
      const cand *c = &g_array_index(all, cand, i);
      if (strcmp(c->r->split, win->r->split) == 0 && c->r->micro_batch == win->r->micro_batch)
        g_array_append_val(places, *c);
    }

    GString *s = g_string_new(NULL);
    char b[6][48];
    g_autofree char *desc = ts_topo_describe(t);
    g_string_append_printf(
        s, "Split search: %s on %s, global batch %" G_GINT64_FORMAT ", %s backend\n", m->name, desc,
        global_batch, spec.backend);
    g_string_append_printf(s,
                           "%d configurations (splits x placements x micro-batches): %u fit in "
                           "%s per chip\n\n",
                           n, fit->len, ts_fmt_bytes(b[0], 48, t->chip.memory_bytes));
    if (win == NULL) {
      g_string_append(s, "no split fits in memory.\n");
      /* Without --vary-options no split recomputes activations or shards the sequence, which is
       * how most large models fit (Llama 3.1 70B on 32 H100s: nothing fits here, while
       * tp=8,dp=4,zero=3,recompute=full takes 47 GiB). */
      if (!vary_options)
        g_string_append(s, "recomputation, sequence and context parallelism were not searched: "
                           "--vary-options adds them\n");
    } else {
      int ws = 5, wp = 9;
      for (guint i = 0; i < fit->len && i < (guint)top; i++) {
        const cand *c = &g_array_index(fit, cand, i);
        ws = MAX(ws, (int)strlen(c->r->split));
        wp = MAX(wp, (int)strlen(c->r->placement));
      }
      g_string_append_printf(s, "%-4s  %-*s  %-*s  %5s  %9s  %9s  %9s  %13s  %7s  %11s\n", "rank",
                             ws, "split", wp, "placement", "micro", "step", "samples/s", "tokens/s",
                             "tokens/s/chip", "MFU", "memory/chip");
      for (guint i = 0; i < fit->len && i < (guint)top; i++) {
        const cand *c = &g_array_index(fit, cand, i);
        gboolean tok = c->r->tokens_per_sample > 0 && c->r->chips > 0;
        g_autofree char *tps = ts_report_fmt_rate(tok, c->r->tokens_per_s);
        g_autofree char *tpc = ts_report_fmt_rate(tok, tok ? c->r->tokens_per_s / c->r->chips : 0);
        g_ascii_formatd(b[1], 48, "%.4g", c->r->samples_per_s);
        char mfu[32];
        g_ascii_formatd(mfu, sizeof mfu, "%.1f", 100 * c->r->mfu);
        g_snprintf(b[2], 48, "%s%s%%", c->r->calibrated ? "" : "<=", mfu);
        g_string_append_printf(
            s, "%-4u  %-*s  %-*s  %5" G_GINT64_FORMAT "  %9s  %9s  %9s  %13s  %7s  %11s\n", i + 1,
            ws, c->r->split, wp, c->r->placement, c->r->micro_batch,
            ts_fmt_time(b[0], 48, c->r->step_time_s), b[1], tps, tpc, b[2],
            ts_fmt_bytes(b[3], 48, c->r->mem.total));
      }
      if (cap.any) {
        /* The time-to-train table of the ranked splits, in rank order. */
        guint nt = MIN(fit->len, (guint)top);
        ts_result *tr = g_new(ts_result, MAX(nt, 1));
        for (guint i = 0; i < nt; i++)
          tr[i] = *g_array_index(fit, cand, i).r; /* shallow: rendering only reads */
        g_autofree char *tt = ts_capacity_render_text(&cap, t, tr, (int)nt);
        g_string_append(s, tt);
        g_free(tr);
      }
      g_autofree char *note = placement_note(t, win->r->placement);
      g_string_append_printf(
          s, "\nbest: --split %s --micro-batch %" G_GINT64_FORMAT ": %s per step (%s)\n",
          win->c->split, win->r->micro_batch, ts_fmt_time(b[0], 48, win->r->step_time_s), note);
      if (second != NULL) {
        g_ascii_formatd(b[2], 48, "%+.1f",
                        100.0 * (second->r->step_time_s / win->r->step_time_s - 1.0));
        g_string_append_printf(
            s, "runner-up: --split %s --micro-batch %" G_GINT64_FORMAT ": %s per step (%s%%)\n",
            second->c->split, second->r->micro_batch, ts_fmt_time(b[1], 48, second->r->step_time_s),
            b[2]);
      }
      if (places->len > 1) {
        g_string_append_printf(s, "\nplacements of %s (micro-batch %" G_GINT64_FORMAT "):\n",
                               win->r->split, win->r->micro_batch);
        /* The placement column as wide as its longest entry: a fixed 24 pushed the times of
         * "tp@net:8,dp@node+net:2,pp@net:2" out of line with the others. */
        int pw = 24;
        for (guint i = 0; i < places->len; i++)
          pw = MAX(pw, (int)strlen(g_array_index(places, cand, i).r->placement));
        for (guint i = 0; i < places->len; i++) {
          const cand *c = &g_array_index(places, cand, i);
          g_autofree char *pn = placement_note(t, c->r->placement);
          g_ascii_formatd(b[2], 48, "%+.1f",
                          100.0 * (c->r->step_time_s / win->r->step_time_s - 1.0));
          g_string_append_printf(s, "  %-*s  %9s  %7s%%  %s\n", pw, c->r->placement,
                                 ts_fmt_time(b[0], 48, c->r->step_time_s), b[2], pn);
        }
      }
    }
    g_string_append(s, "\nsplit families:\n");
    for (guint i = 0; i < fams->len; i++) {
      const family *f = &g_array_index(fams, family, i);
      if (f->best == NULL) {
        g_string_append_printf(s, "  %-16s  does not fit: %s\n", f->family, f->detail);
      } else if (f->best->k == win->k) {
        g_string_append_printf(s, "  %-16s  best: %s\n", f->family,
                               ts_fmt_time(b[0], 48, f->best->r->step_time_s));
      } else {
        g_ascii_formatd(b[1], 48, "%+.1f", f->loss_pct);
        g_string_append_printf(s, "  %-16s  lost by %s%% (%s, %s): best %s at %s\n", f->family,
                               b[1], f->reason, f->detail, f->best->r->placement,
                               ts_fmt_time(b[0], 48, f->best->r->step_time_s));
      }
    }
    int unfit = 0, invalid = 0;
    for (int k = 0; k < n; k++)
      if (out[k].status != TS_OUTCOME_OK) {
        gboolean uf = out[k].message != NULL && g_str_has_prefix(out[k].message, "does not fit");
        unfit += uf;
        invalid += !uf;
      }
    g_string_append_printf(s, "(%d configurations not replayed because they do not fit", unfit);
    if (invalid > 0)
      g_string_append_printf(s, "; %d could not be predicted", invalid);
    g_string_append(s, "; every candidate with its reason: search -o DIR, candidates.json)\n");
    /* As run's table: an uncalibrated chip's MFU is an upper bound, marked <= and said. */
    if (win != NULL && !win->r->calibrated)
      g_string_append(s, ts_report_uncalibrated_note());

    /* JSON: the same content, machine-readable. */
    JsonObject *root = json_object_new();
    json_object_set_string_member(root, "trainsim_version", TS_VERSION);
    json_object_set_string_member(root, "document", "search");
    json_object_set_int_member(root, "schema_version", TS_JSON_SCHEMA_VERSION);
    json_object_set_string_member(root, "model", m->name);
    json_object_set_string_member(root, "topology", t->name);
    json_object_set_int_member(root, "global_batch", global_batch);
    json_object_set_string_member(root, "backend", spec.backend);
    json_object_set_string_member(root, "collective_algorithm", ts_coll_algo_name(spec.algo));
    json_object_set_double_member(root, "bucket_MiB", spec.bucket_MiB);
    json_object_set_int_member(root, "configurations", n);
    json_object_set_int_member(root, "fitting", fit->len);
    json_object_set_double_member(root, "memory_capacity_bytes", t->chip.memory_bytes);
    json_object_set_double_member(root, "memory_reserve_bytes", ts_chip_memory_reserve(&t->chip));
    JsonArray *ranked = json_array_new();
    for (guint i = 0; i < fit->len && i < (guint)top; i++) {
      JsonObject *o = json_object_new();
      json_object_set_int_member(o, "rank", i + 1);
      jset_result(o, &g_array_index(fit, cand, i));
      json_array_add_object_element(ranked, o);
    }
    json_object_set_array_member(root, "ranked", ranked);
    if (second != NULL)
      json_object_set_double_member(root, "runner_up_step_time_s", second->r->step_time_s);
    JsonArray *pl = json_array_new();
    for (guint i = 0; i < places->len; i++) {
      JsonObject *o = json_object_new();
      jset_result(o, &g_array_index(places, cand, i));
      json_array_add_object_element(pl, o);
    }
    json_object_set_array_member(root, "placements_of_best", pl);
    JsonArray *fa = json_array_new();
    for (guint i = 0; i < fams->len; i++) {
      const family *f = &g_array_index(fams, family, i);
      JsonObject *o = json_object_new();
      json_object_set_string_member(o, "family", f->family);
      json_object_set_string_member(o, "status", f->status);
      json_object_set_string_member(o, "reason", f->reason);
      json_object_set_string_member(o, "detail", f->detail);
      json_object_set_double_member(o, "min_memory_per_chip_bytes", f->min_mem);
      if (f->best != NULL) {
        JsonObject *bo = json_object_new();
        jset_result(bo, f->best);
        json_object_set_object_member(o, "best", bo);
        json_object_set_double_member(o, "loss_pct", f->loss_pct);
      }
      json_array_add_object_element(fa, o);
    }
    json_object_set_array_member(root, "families", fa);
    g_autoptr(JsonNode) rn = json_node_init_object(json_node_alloc(), root);
    json_object_unref(root);
    ts_cmd_machine_record(&ma, rn);
    g_autofree char *jt = ts_json_text(rn);

    if (outdir != NULL) {
      g_autofree char *csv = ts_sweep_render_csv(sw, idx, out, n);
      g_autoptr(GPtrArray) results =
          g_ptr_array_new_with_free_func((GDestroyNotify)json_node_unref);
      g_autoptr(GPtrArray) skip = g_ptr_array_new_with_free_func((GDestroyNotify)json_node_unref);
      ts_sweep_render_json(sw, idx, out, n, results, skip);
      g_autofree char *cj = ts_sweep_document(ts_sweep_spec_json(sw), 0, 0, results, skip);
      const char *names[] = {"search.txt", "search.json", "candidates.csv", "candidates.json"};
      const char *texts[] = {s->str, jt, csv, cj};
      if (!ts_write_set(outdir, names, texts, (int)G_N_ELEMENTS(names), "search", &err))
        status = ts_cmd_fail("search", err);
      else
        fprintf(stderr, "trainsim search: wrote %s, %s, %s and %s in %s\n", names[0], names[1],
                names[2], names[3], outdir);
    }
    if (status == 0) {
      const char *o = json_out ? jt : s->str;
      if (!ts_write_file_atomic("-", o, strlen(o), &err))
        status = ts_cmd_fail("search", err);
    }
    g_string_free(s, TRUE);
    for (guint i = 0; i < fams->len; i++)
      g_free(g_array_index(fams, family, i).detail);
    g_array_unref(fams);
    g_hash_table_unref(fam_of);
    g_array_unref(places);
    g_array_unref(fit);
    g_array_unref(all);
  }
done:
  g_hash_table_unref(unfit_mem);
  g_ptr_array_unref(unfit_order);
  for (int k = 0; k < n; k++)
    ts_outcome_clear(&out[k]);
  g_free(out);
  g_free(idx);
  return status;
}
