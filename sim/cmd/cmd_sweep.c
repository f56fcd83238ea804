/* cmd_sweep: `trainsim sweep`, predictions over a cartesian product of topologies, array
 * shapes, hardware what-ifs, models, batches and splits, on every core, in shards, as CSV and
 * JSON rows with the fields of `trainsim run`. */
#include "ts_backends.h"
#include "ts_capacity.h"
#include "ts_cmd.h"
#include "ts_mpi.h"
#include "ts_plot.h"
#include "ts_sweep.h"
#include "ts_util.h"

#include <stdio.h>
#include <string.h>

/* Options that take lists: repeated, or comma-separated within one option. */
static char **flatten(char **given)
{
  GPtrArray *v = g_ptr_array_new();
  for (char **g = given; g != NULL && *g != NULL; g++) {
    g_auto(GStrv) parts = g_strsplit(*g, ",", -1);
    if (parts[0] == NULL) /* '' is an empty item, not an absent option */
      g_ptr_array_add(v, g_strdup(""));
    for (char **p = parts; *p != NULL; p++)
      g_ptr_array_add(v, g_strdup(g_strstrip(*p)));
  }
  g_ptr_array_add(v, NULL);
  return (char **)g_ptr_array_free(v, FALSE);
}

/* A value listed twice would predict the same configurations twice (duplicate rows): a typo. */
static gboolean unique_items(char *const *items, const char *opt, GError **error)
{
  for (int i = 0; items != NULL && items[i] != NULL; i++)
    for (int j = 0; j < i; j++)
      if (strcmp(items[i], items[j]) == 0) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--%s '%s': given twice; expected each value once", opt, items[i]);
        return FALSE;
      }
  return TRUE;
}

static gboolean parse_counts(char **given, const char *opt, gint64 lo, GArray *out, GError **error)
{
  g_auto(GStrv) items = flatten(given);
  for (char **p = items; *p != NULL; p++) {
    gint64 v;
    if (!ts_parse_int(*p, lo, (gint64)TS_MAX_COUNT, &v)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--%s %s: expected a positive whole number of samples (a list: 256,512)", opt,
                  *p);
      return FALSE;
    }
    g_array_append_val(out, v);
  }
  return unique_items(items, opt, error);
}

/* Shared by sweep and search: option values into a spec; FALSE with a one-line error. */
typedef struct {
  ts_cmd_plan_args pa; /* the plan options run and trace take, as lists (ts_cmd.h) */
  char **per_chip, **vary;
  char *splits_opt, *backend, *recompute;
  gboolean fits_only, full, all_placements;
  gboolean vary_options; /* issue 13 */
  gint64 max_configs;
} sweep_args;

static gboolean build_spec(const sweep_args *a, ts_sweep_spec *sp, GError **error)
{
  memset(sp, 0, sizeof *sp);
  sp->global_batch = g_array_new(FALSE, FALSE, sizeof(gint64));
  sp->batch_per_chip = g_array_new(FALSE, FALSE, sizeof(gint64));
  sp->micro_batch = g_array_new(FALSE, FALSE, sizeof(gint64));
  sp->vary = g_ptr_array_new_with_free_func((GDestroyNotify)ts_vary_free);
  const ts_cmd_plan_args *pa = &a->pa;
  sp->topologies = g_strdupv(pa->topologies);
  sp->models = g_strdupv(pa->models);
  g_array_append_vals(sp->global_batch, pa->global_batches->data, pa->global_batches->len);
  g_array_append_vals(sp->micro_batch, pa->micro_batches->data, pa->micro_batches->len);
  if (!parse_counts(a->per_chip, "batch-per-chip", 1, sp->batch_per_chip, error))
    return FALSE;
  if ((sp->global_batch->len > 0) == (sp->batch_per_chip->len > 0)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                sp->global_batch->len > 0
                    ? "--global-batch and --batch-per-chip given; expected one of them"
                    : "missing --global-batch; expected --global-batch N[,N...] or "
                      "--batch-per-chip N[,N...]");
    return FALSE;
  }
  if (sp->micro_batch->len == 0) {
    gint64 zero = 0;
    g_array_append_val(sp->micro_batch, zero);
  }
  /* Splits: a list (-s, repeatable; or --splits 'S1;S2'), or --splits auto. */
  GPtrArray *sl = g_ptr_array_new();
  for (char **s = pa->splits; s != NULL && *s != NULL; s++)
    g_ptr_array_add(sl, g_strdup(*s));
  if (a->splits_opt != NULL && strcmp(a->splits_opt, "auto") == 0) {
    sp->auto_splits = TRUE;
  } else if (a->splits_opt != NULL) {
    g_auto(GStrv) parts = g_strsplit(a->splits_opt, ";", -1);
    for (char **p = parts; *p != NULL; p++)
      if (*g_strstrip(*p) != '\0')
        g_ptr_array_add(sl, g_strdup(*p));
  }
  g_ptr_array_add(sl, NULL);
  sp->splits = (char **)g_ptr_array_free(sl, FALSE);
  if (sp->auto_splits == (sp->splits[0] != NULL)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                sp->auto_splits ? "--splits auto and --split given; expected one of them"
                                : "missing splits; expected --splits auto, --split S (repeatable) "
                                  "or --splits 'S1;S2'");
    return FALSE;
  }
  for (char **s = sp->splits; *s != NULL; s++) {
    g_autoptr(ts_split) parsed = ts_split_parse(*s, error);
    if (parsed == NULL)
      return FALSE;
  }
  if (!unique_items(sp->splits, "split", error))
    return FALSE;
  if ((a->fits_only || a->all_placements) && !sp->auto_splits) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--fits-only and --all-placements: expected --splits auto");
    return FALSE;
  }
  sp->fits_only = a->fits_only;
  sp->all_placements = a->all_placements;
  if ((a->vary_options || a->max_configs != 0) && !sp->auto_splits) {
    /* Name what was given: "--vary-options and --max-configs" was said for either alone. */
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: expected --splits auto",
                a->vary_options && a->max_configs != 0 ? "--vary-options and --max-configs"
                : a->vary_options                      ? "--vary-options"
                                                       : "--max-configs");
    return FALSE;
  }
  if (a->max_configs < 0 || a->max_configs > 100000000) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--max-configs %" G_GINT64_FORMAT ": expected a count in [0, 100000000] (0: no "
                "bound)",
                a->max_configs);
    return FALSE;
  }
  sp->vary_options = a->vary_options;
  sp->max_configs = (int)a->max_configs;
  if (a->recompute != NULL) {
    /* Each value is appended to every split, as another dimension of the sweep. */
    g_auto(GStrv) parts = g_strsplit(a->recompute, ",", -1);
    /* '' split into no value: the sweep ran as if --recompute were not given. */
    if (parts[0] == NULL) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--recompute '': expected none, selective, full, full:N, stage, "
                  "stage:except-last, op, dots or dots:except-mlpwi (a list: none,full)");
      return FALSE;
    }
    GPtrArray *sfx = g_ptr_array_new();
    for (char **p = parts; *p != NULL; p++) {
      const char *v = g_strstrip(*p);
      gint64 every;
      gboolean full_n = g_str_has_prefix(v, "full:") && ts_parse_int(v + 5, 1, 1024, &every);
      if (strcmp(v, "none") != 0 && strcmp(v, "selective") != 0 && strcmp(v, "full") != 0 &&
          !full_n && strcmp(v, "stage") != 0 && strcmp(v, "stage:except-last") != 0 &&
          strcmp(v, "op") != 0 && strcmp(v, "dots") != 0 && strcmp(v, "dots:except-mlpwi") != 0) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "--recompute '%s': expected none, selective, full, full:N (N in [1, 1024]), "
                    "stage, stage:except-last, op, dots or dots:except-mlpwi (a list: none,full)",
                    v);
        g_ptr_array_free(sfx, TRUE);
        return FALSE;
      }
      g_ptr_array_add(sfx,
                      strcmp(v, "none") == 0 ? g_strdup("") : g_strconcat(",recompute=", v, NULL));
    }
    g_ptr_array_add(sfx, NULL);
    sp->suffixes = (char **)g_ptr_array_free(sfx, FALSE);
  }
  for (char **v = a->vary; v != NULL && *v != NULL; v++) {
    ts_vary *tv = ts_vary_parse(*v, error);
    if (tv == NULL)
      return FALSE;
    g_ptr_array_add(sp->vary, tv);
  }
  if (!ts_run_backend_valid(a->backend, error))
    return FALSE;
  sp->backend = a->backend != NULL ? a->backend : "analytic";
  sp->algo = (ts_coll_algo)pa->algo;
  sp->bucket_MiB = pa->bucket_MiB;
  sp->full = a->full;
  return TRUE;
}

static void spec_clear(ts_sweep_spec *sp)
{
  g_strfreev(sp->topologies);
  g_strfreev(sp->models);
  g_strfreev(sp->splits);
  g_strfreev(sp->suffixes);
  if (sp->global_batch)
    g_array_unref(sp->global_batch);
  if (sp->batch_per_chip)
    g_array_unref(sp->batch_per_chip);
  if (sp->micro_batch)
    g_array_unref(sp->micro_batch);
  if (sp->vary)
    g_ptr_array_unref(sp->vary);
  memset(sp, 0, sizeof *sp);
}

int ts_cmd_sweep(int argc, char **argv)
{
  sweep_args a = {0};
  ts_cmd_plan_args_init(&a.pa, TS_CMD_PLAN_SWEEP);
  g_auto(ts_cmd_machine_args) ma = {0};
  g_autofree char *outdir = NULL, *format = NULL, *shard = NULL;
  gint64 jobs = G_MININT64;      /* not given: every core (-j -1 is refused) */
  gint64 max_chips = G_MININT64; /* not given: no bound */
  gboolean plot = FALSE;
  g_auto(ts_capacity_options) cap;
  ts_capacity_options_init(&cap);
  GOptionEntry sweep_entries[] = {
      {"splits", 0, 0, G_OPTION_ARG_STRING, &a.splits_opt,
       "auto (every valid split and placement: ZeRO 0-3 and FSDP2, cp for sequences too long "
       "for one chip) or a ';'-separated list",
       "auto|S1;S2"},
      {"fits-only", 0, 0, G_OPTION_ARG_NONE, &a.fits_only,
       "With --splits auto: only splits whose memory per chip fits", NULL},
      {"all-placements", 0, 0, G_OPTION_ARG_NONE, &a.all_placements,
       "With --splits auto: also placements that mirror others on interchangeable dimensions",
       NULL},
      {"vary-options", 0, 0, G_OPTION_ARG_NONE, &a.vary_options,
       "With --splits auto: also vary context parallelism (every degree, any sequence), "
       "recomputation, sp, interleaved stages and the hybrid sharding group",
       NULL},
      {"max-configs", 0, 0, G_OPTION_ARG_INT64, &a.max_configs,
       "With --splits auto: at most N splits per topology, model and batch (default 0: all)", "N"},
      {"recompute", 0, 0, G_OPTION_ARG_STRING, &a.recompute,
       "Activation recomputation for every split: none (default), selective, full, full:N "
       "(every N-th block), stage, stage:except-last, op, dots, dots:except-mlpwi; a list sweeps",
       "R[,R...]"},
      {"batch-per-chip", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a.per_chip,
       "Instead of --global-batch: samples per chip per step (weak scaling)", "N[,N...]"},
      {"vary", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a.vary,
       "Hardware what-if KEY=V1,V2 or xFACTORs: peak_tflops, memory_GiB, "
       "memory_bandwidth_GBps, compute_efficiency, flash_efficiency, flash_efficiency_triton, "
       "flash_efficiency_fa1, link_bandwidth_GBps, "
       "latency_us, "
       "dim.NAME.{link_bandwidth_GBps,latency_us,size}, dims=16x16,32x32, dead_links=0,1,2,4, "
       "straggler=1,0.9,0.8 (chip 0), straggler_per_node=0.9; repeatable",
       "KEY=V,..."},
      {"backend", 0, 0, G_OPTION_ARG_STRING, &a.backend, ts_backend_kind_help(), "B"},
      {"full", 0, 0, G_OPTION_ARG_NONE, &a.full, "Replay every rank (slower; same result)", NULL},
      {"jobs", 'j', 0, G_OPTION_ARG_INT64, &jobs, "Worker processes (default: every core)", "N"},
      {"max-chips", 0, 0, G_OPTION_ARG_INT64, &max_chips,
       "Leave out configurations on more chips (with --vary dims)", "N"},
      {"shard", 0, 0, G_OPTION_ARG_STRING, &shard,
       "Run only configurations k with k mod n = i (0 <= i < n); combine with trainsim merge",
       "i/n"},
      {"output-dir", 'o', 0, G_OPTION_ARG_FILENAME, &outdir,
       "Write sweep.csv and sweep.json here (atomically)", "DIR"},
      {"plot", 0, 0, G_OPTION_ARG_NONE, &plot,
       "Also draw the sweep's plots (PNG, SVG) into DIR/plots; needs --output-dir and gnuplot",
       NULL},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &format,
       "csv (default) or json (on stdout, without --output-dir)", "F"},
      {NULL}};
  g_autofree GOptionEntry *plan_entries = ts_cmd_plan_entries(&a.pa);
  g_autofree GOptionEntry *machine_entries = ts_cmd_machine_entries(&ma);
  g_autofree GOptionEntry *cap_entries = ts_capacity_option_entries(&cap);
  g_autofree GOptionEntry *e1 = ts_option_entries_concat(plan_entries, sweep_entries);
  g_autofree GOptionEntry *e2 = ts_option_entries_concat(e1, machine_entries);
  g_autofree GOptionEntry *entries = ts_option_entries_concat(e2, cap_entries);
  g_autoptr(GError) err = NULL;
  int status = 0;
  if (!ts_cmd_parse("sweep", "",
                    "Predicts every combination of topologies, array shapes, hardware what-ifs, "
                    "models, batches and splits; one row per configuration with the fields of "
                    "trainsim run.",
                    "Examples:\n  trainsim sweep -t tpu-v3-pod -m gpt3-175b -b 1024 "
                    "--micro-batch 1 --splits auto -o out/\n  trainsim sweep -t tpu-v3-8x8 -m "
                    "bert-large -b 512 -s dp=64 -s tp=8@x,dp=8@y --vary "
                    "link_bandwidth_GBps=x0.5,x1,x2 -o out/\n  trainsim sweep -t tpu-v3-8x8 -m "
                    "bert-large --batch-per-chip 8 --vary dims=2x2,4x4,8x8,16x16 -s tp=1 -s "
                    "tp=4@x -o out/\nSee docs/whatif.md.",
                    entries, &argc, &argv, &err) ||
      !ts_capacity_options_finish(&cap, &err))
    return ts_cmd_fail("sweep", err);
  /* Under mpirun (MPI build), every rank enumerates the same sweep; rank 0 hands out the
   * configurations and alone prints and writes. */
  gboolean mpi = ts_mpi_start();
  ts_sweep_spec spec = {0};
  int shard_i = 0, shard_n = 0;
  gboolean json_out = FALSE;
  if (argc > 1)
    ts_cmd_unexpected("sweep", argv[1], &err);
  else if (format != NULL && strcmp(format, "csv") != 0 && strcmp(format, "json") != 0)
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--format '%s': expected csv or json", format);
  else if (jobs != G_MININT64 && !ts_pool_parse_jobs(jobs, &err)) {
    /* err is set */
  } else if (shard != NULL && !ts_shard_parse(shard, &shard_i, &shard_n, &err)) {
    /* err is set */
  } else if (max_chips != G_MININT64 && max_chips < 1) {
    /* 0 left every configuration in although the message below says "positive". */
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--max-chips %" G_GINT64_FORMAT
                ": expected a number of chips >= 1 (leave it out for no bound)",
                max_chips);
  } else if (ts_cmd_plan_args_finish(&a.pa, NULL, &err) && build_spec(&a, &spec, &err) &&
             ts_cmd_cfg(a.backend, ma.cfg, &err) && outdir != NULL)
    ts_cmd_prepare_dir(outdir, &err);
  json_out = format != NULL && strcmp(format, "json") == 0;
  g_autoptr(ts_inputs) cache = ts_inputs_new();
  if (err == NULL)
    ts_cmd_machine_apply(&ma, cache, spec.topologies, a.vary, &err);
  gboolean cut = FALSE;
  spec.truncated = &cut;
  spec.progress = "sweep (splits)";
  g_autoptr(ts_sweep) sw = err == NULL ? ts_sweep_new(&spec, cache, &err) : NULL;
  if (mpi && !ts_mpi_all_ok(sw != NULL) && sw != NULL) {
    /* This rank's inputs were fine but another rank's were not (its message went to its own
     * silenced stderr): stop together rather than wait for it. */
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "another MPI rank of this job could not prepare the sweep (it reads the same "
                "inputs and --output-dir; run it without mpirun to see why)");
    g_clear_pointer(&sw, ts_sweep_free);
  }
  if (sw == NULL) {
    status = ts_cmd_fail("sweep", err);
    goto out;
  }
  if (cut)
    g_printerr("trainsim sweep: note: --max-configs %" G_GINT64_FORMAT " stopped the split "
               "enumeration; later splits were not evaluated (raise it, or 0 for all)\n",
               a.max_configs);
  int total = ts_sweep_size(sw);
  /* --cfg, as run takes it: every configuration's replay reads the SimGrid settings. */
  if (ma.cfg != NULL)
    ts_sweep_set_sg_cfg(sw, (const char *const *)ma.cfg);
  ts_cmd_machine_record(&ma, ts_sweep_spec_json(sw));
  /* A listed split that applies to no configuration of the whole sweep is a mistake (a typo in
   * a dimension name, a degree no topology has): say so before predicting anything. Planning
   * is cheap and the check covers every shard alike. */
  for (char **sp = spec.splits; sp != NULL && *sp != NULL && status == 0; sp++) {
    g_autoptr(GError) first = NULL;
    gboolean applies = FALSE;
    for (int i = 0; i < total && !applies; i++) {
      const ts_config *c = &ts_sweep_configs(sw)[i];
      if (strcmp(c->split, *sp) != 0)
        continue;
      g_autoptr(GError) e = NULL;
      g_autoptr(ts_split) parsed = ts_split_parse(c->split, &e);
      g_autoptr(ts_plan) p = parsed ? ts_plan_new(c->model, c->topo, parsed, &c->po, &e) : NULL;
      applies = p != NULL;
      if (!applies && first == NULL)
        first = g_steal_pointer(&e);
    }
    if (!applies && first != NULL) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INVALID, "%s (and in every other configuration)",
                  first->message);
      status = ts_cmd_fail("sweep", err);
    }
  }
  if (status != 0)
    goto out;
  GArray *idx = g_array_new(FALSE, FALSE, sizeof(int));
  for (int i = 0; i < total; i++)
    if ((shard_n == 0 || i % shard_n == shard_i) &&
        (max_chips == G_MININT64 || ts_sweep_configs(sw)[i].topo->nchips <= max_chips))
      g_array_append_val(idx, i);
  int n = (int)idx->len;
  ts_outcome *out = g_new0(ts_outcome, MAX(n, 1));
  ts_pool_options po = {jobs > 0 ? (int)jobs : ts_pool_default_jobs(), TRUE, "sweep"};
  gboolean ran = mpi ? ts_mpi_run(ts_sweep_configs(sw), (int *)idx->data, n, &po, out, &err)
                     : ts_pool_run(ts_sweep_configs(sw), (int *)idx->data, n, &po, out, &err);
  if (!ran) {
    status = ts_cmd_fail("sweep", err);
  } else if (mpi && ts_mpi_rank() != 0) {
    /* A worker rank: its outcomes went to rank 0. */
  } else {
    /* Time to train, cost and energy: cheap arithmetic on each predicted step, here. */
    for (int k = 0; k < n && status == 0; k++) {
      const ts_config *c = &ts_sweep_configs(sw)[g_array_index(idx, int, k)];
      if (out[k].status == TS_OUTCOME_OK && !ts_capacity_apply(&cap, c->topo, &out[k].res, &err))
        status = ts_cmd_fail("sweep", err);
    }
  }
  if (!ran || status != 0 || (mpi && ts_mpi_rank() != 0)) {
    /* reported above */
  } else {
    g_autofree char *csv = ts_sweep_render_csv(sw, (int *)idx->data, out, n);
    g_autoptr(GPtrArray) results = g_ptr_array_new_with_free_func((GDestroyNotify)json_node_unref);
    g_autoptr(GPtrArray) skipped = g_ptr_array_new_with_free_func((GDestroyNotify)json_node_unref);
    ts_sweep_render_json(sw, (int *)idx->data, out, n, results, skipped);
    g_autofree char *json =
        ts_sweep_document(ts_sweep_spec_json(sw), shard_i, shard_n, results, skipped);
    int failed = 0, best = -1;
    for (int k = 0; k < n; k++) {
      failed += out[k].status == TS_OUTCOME_FAILED;
      if (out[k].status == TS_OUTCOME_OK && out[k].res.mem.fits &&
          (best < 0 || out[k].res.step_time_s < out[best].res.step_time_s))
        best = k;
    }
    if (outdir != NULL) {
      g_autofree char *pc = g_build_filename(outdir, "sweep.csv", NULL);
      g_autofree char *pj = g_build_filename(outdir, "sweep.json", NULL);
      const char *names[] = {"sweep.csv", "sweep.json"};
      const char *texts[] = {csv, json};
      if (!ts_write_set(outdir, names, texts, 2, "sweep", &err)) {
        status = ts_cmd_fail("sweep", err);
      } else {
        printf("sweep: %d configuration%s", n, n == 1 ? "" : "s");
        if (shard_n > 0)
          printf(" (shard %d/%d of %d)", shard_i, shard_n, total);
        printf(": %u predicted, %u skipped (reasons in sweep.json)\n", results->len, skipped->len);
        if (best >= 0) {
          const ts_config *c = &ts_sweep_configs(sw)[g_array_index(idx, int, best)];
          char t[32];
          /* The model and the chip count too: a sweep over models or --vary dims has rows
           * that differ in nothing else this line showed (the topology's name stays). When the
           * array was resized the name alone misleads ("DGX H100 32 nodes (16384 chips)"), so
           * the array it ran as is said too. */
          g_autofree char *shape = ts_topo_shape_text(c->topo);
          g_autoptr(ts_topo) file =
              c->topo->path != NULL ? ts_topo_load(c->topo->path, NULL) : NULL;
          g_autofree char *fshape = file != NULL ? ts_topo_shape_text(file) : NULL;
          gboolean resized = fshape != NULL && strcmp(fshape, shape) != 0;
          g_autofree char *desc = ts_topo_describe(c->topo);
          g_autofree char *where =
              resized ? g_strdup_printf("%s resized to %s (%d chip%s)", c->topo->name, shape,
                                        c->topo->nchips, c->topo->nchips == 1 ? "" : "s")
                      : g_strdup(desc);
          printf("fastest that fits: %s (%s), %s on %s, global batch %" G_GINT64_FORMAT
                 ": %s per step\n",
                 out[best].res.split, out[best].res.placement, c->model->name, where,
                 c->po.global_batch, ts_fmt_time(t, sizeof t, out[best].res.step_time_s));
        }
        g_autofree char *ms = mpi ? ts_mpi_summary() : NULL;
        if (ms != NULL)
          printf("%s\n", ms);
        fprintf(stderr, "trainsim sweep: wrote %s and %s\n", pc, pj);
        if (plot) {
          g_autofree char *pd = g_build_filename(outdir, "plots", NULL);
          g_autoptr(GPtrArray) written = g_ptr_array_new_with_free_func(g_free);
          if (!ts_plot_file(pj, pd, written, &err))
            status = ts_cmd_fail("sweep", err);
          for (guint w = 0; w < written->len; w++)
            if (!g_str_has_suffix(g_ptr_array_index(written, w), ".dat"))
              fprintf(stderr, "trainsim sweep: wrote %s\n", (char *)g_ptr_array_index(written, w));
        }
      }
    } else {
      const char *text = json_out ? json : csv;
      if (!ts_write_file_atomic("-", text, strlen(text), &err))
        status = ts_cmd_fail("sweep", err);
    }
    if (status == 0 && failed > 0) {
      /* Without -o there is no sweep.json, and the CSV on stdout has no skipped list: name
       * the first reason here so the exit status 1 comes with one. */
      int first = 0;
      while (out[first].status != TS_OUTCOME_FAILED)
        first++;
      if (outdir != NULL || json_out)
        fprintf(stderr, "trainsim sweep: %d configuration%s could not be replayed (see %s)\n",
                failed, failed == 1 ? "" : "s",
                outdir != NULL ? "sweep.json skipped" : "skipped in the JSON");
      else
        fprintf(stderr,
                "trainsim sweep: %d configuration%s could not be replayed (every reason: -f "
                "json, skipped); the first: %s\n",
                failed, failed == 1 ? "" : "s", out[first].message);
      status = 1;
    }
  }
  for (int k = 0; k < n; k++)
    ts_outcome_clear(&out[k]);
  g_free(out);
  g_array_unref(idx);
out:
  /* Before MPI_Finalize: once every rank has finalized, the launcher may stop this one as soon
   * as another exits with a failure, before main() would remove the folder. */
  if (status != 0)
    ts_cmd_remove_created_dir();
  ts_mpi_finish();
  spec_clear(&spec);
  ts_cmd_plan_args_clear(&a.pa);
  g_strfreev(a.per_chip);
  g_strfreev(a.vary);
  g_free(a.splits_opt);
  g_free(a.recompute);
  g_free(a.backend);
  return status;
}
