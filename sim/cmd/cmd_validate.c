/* cmd_validate: `trainsim validate`, split equivalence: executes the planner's trace of each
 * split on real numeric kernels and compares parameters with the single-processor reference
 * (ts_validate.h). Exit status 0 when every run passes, 1 when one fails, 2 on bad input. */
#include "ts_accuracy.h"
#include "ts_capacity.h"
#include "ts_cmd.h"
#include "ts_plot.h"
#include "ts_pool.h"
#include "ts_run.h"
#include "ts_util.h"
#include "ts_validate.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The validation networks and the splits run when none is given: data parallel on one and two
 * dimensions, tensor parallel, both on a 2D array, and gradient accumulation. */
static const char *const default_models[] = {"validate-mlp", "validate-cnn", "validate-transformer",
                                             NULL};
static const char *const default_splits[] = {"dp=1",      "dp=4",          "dp=8@x+y",
                                             "tp=2",      "tp=4",          "tp=2@x,dp=2@y",
                                             "tp=2,dp=4", "tp=4@x,dp=2@y", NULL};

typedef struct {
  const char *spec;
  ts_topo *topo; /* owned */
} topo_entry;

/* A topology: a file or shipped name, or a small array spec (torus:4x2, switch:2x2, ...). */
static ts_topo *load_topology(const char *name, GError **error)
{
  if (strchr(name, ':') != NULL && !g_file_test(name, G_FILE_TEST_EXISTS))
    return ts_validate_topology(name, error);
  g_autofree char *path = ts_resolve_data_file(name, "topologies", error);
  return path ? ts_topo_load(path, error) : NULL;
}

/* Chips a split asks for: the product of its degrees (an unstated dp is 1). */
static int split_chips(const ts_split *s)
{
  gint64 c = 1;
  for (int a = 0; a < TS_AX_N; a++)
    c *= s->degree[a] > 0 ? s->degree[a] : 1;
  return (int)MIN(c, 1 << 20);
}

typedef struct {
  char *against, *outdir, *format, *backend;
  char *max_mean_text; /* --max-mean-error-pct as given, or NULL: no limit */
  gint64 jobs;         /* G_MININT64: not given (every core) */
  gboolean plot;
} against_opts;

/* Writes the output set into a fresh folder beside the outputs, then renames each file into
 * DIR: a failure leaves DIR as it was. */
static gboolean write_set(const char *dir, const ts_accuracy *a, gboolean plot, GPtrArray *written,
                          GError **error)
{
  g_autofree char *tmpl = g_build_filename(dir, ".validate-XXXXXX", NULL);
  if (g_mkdtemp(tmpl) == NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "--output-dir %s: cannot write: %s", dir,
                g_strerror(errno));
    return FALSE;
  }
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  const char *files[] = {"validate.txt", "validate.csv", "validate.json"};
  char *texts[] = {ts_accuracy_text(a), ts_accuracy_csv(a), ts_accuracy_json(a)};
  gboolean ok = TRUE;
  for (size_t k = 0; k < G_N_ELEMENTS(files); k++) {
    g_autofree char *p = g_build_filename(tmpl, files[k], NULL);
    if (ok)
      ok = ts_write_file_atomic(p, texts[k], strlen(texts[k]), error);
    if (ok)
      g_ptr_array_add(names, g_strdup(files[k]));
    g_free(texts[k]);
  }
  if (ok && plot) {
    g_autofree char *groups = NULL;
    g_autofree char *dat = ts_accuracy_dat(a, &groups);
    g_autoptr(GPtrArray) w = g_ptr_array_new_with_free_func(g_free);
    const char *metric = a->file->metric == TS_MEAS_STEP_TIME ? "step time (s)"
                         : a->file->metric == TS_MEAS_BUSBW   ? "bus bandwidth (GB/s)"
                         : a->file->metric == TS_MEAS_PEAK_MEMORY
                             ? "peak memory per chip (GiB)"
                             : "activation memory summed over devices (GiB)";
    ok = ts_plot_accuracy(tmpl, dat, groups, metric, w, error);
    for (guint k = 0; k < w->len; k++)
      g_ptr_array_add(names, g_path_get_basename(g_ptr_array_index(w, k)));
  }
  for (guint k = 0; k < names->len; k++) {
    g_autofree char *from = g_build_filename(tmpl, g_ptr_array_index(names, k), NULL);
    g_autofree char *to = g_build_filename(dir, g_ptr_array_index(names, k), NULL);
    if (ok && g_rename(from, to) != 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot rename into place: %s", to,
                  g_strerror(errno));
      ok = FALSE;
    }
    if (ok)
      g_ptr_array_add(written, g_steal_pointer(&to));
    else
      g_unlink(from);
  }
  g_rmdir(tmpl);
  return ok;
}

/* validate --against FILE.csv: the measurement file replayed row by row. */
static int run_against(const against_opts *o)
{
  g_autoptr(GError) err = NULL;
  ts_format fmt = TS_FORMAT_TEXT;
  if (o->format != NULL && !ts_cmd_format(o->format, &fmt, &err))
    return ts_cmd_fail("validate", err);
  if (o->backend != NULL && !ts_run_backend_valid(o->backend, &err))
    return ts_cmd_fail("validate", err);
  if (o->jobs != G_MININT64 && !ts_pool_parse_jobs(o->jobs, &err))
    return ts_cmd_fail("validate", err);
  if (*o->against == '\0') {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--against '': empty; expected a measurement CSV file (docs/accuracy.md)");
    return ts_cmd_fail("validate", err);
  }
  double max_pct = 0;
  if (o->max_mean_text != NULL) {
    if (!ts_parse_double(o->max_mean_text, &max_pct) || !(max_pct >= 0) || !isfinite(max_pct)) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "--max-mean-error-pct '%s': expected a percentage >= 0 (e.g. 10)",
                  o->max_mean_text);
      return ts_cmd_fail("validate", err);
    }
  }
  if (o->plot && o->outdir == NULL) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--plot: expected --output-dir DIR to draw into");
    return ts_cmd_fail("validate", err);
  }
  if (o->plot && !ts_plot_gnuplot_available(&err))
    return ts_cmd_fail("validate", err);
  if (o->outdir != NULL && !ts_cmd_prepare_dir(o->outdir, &err))
    return ts_cmd_fail("validate", err);
  g_autoptr(ts_meas_file) f = ts_meas_load(o->against, &err);
  if (f == NULL)
    return ts_cmd_fail("validate", err);
  int jobs = o->jobs != G_MININT64 ? (int)o->jobs : ts_pool_default_jobs();
  g_autoptr(ts_accuracy) a = ts_accuracy_run(f, jobs, o->backend, &err);
  if (a == NULL)
    return ts_cmd_fail("validate", err);
  if (o->outdir != NULL) {
    g_autoptr(GPtrArray) written = g_ptr_array_new_with_free_func(g_free);
    if (!write_set(o->outdir, a, o->plot, written, &err))
      return ts_cmd_fail("validate", err);
    for (guint k = 0; k < written->len; k++)
      fprintf(stderr, "wrote %s\n", (const char *)g_ptr_array_index(written, k));
  } else {
    g_autofree char *out = fmt == TS_FORMAT_CSV    ? ts_accuracy_csv(a)
                           : fmt == TS_FORMAT_JSON ? ts_accuracy_json(a)
                                                   : ts_accuracy_text(a);
    if (!ts_write_file_atomic("-", out, strlen(out), &err))
      return ts_cmd_fail("validate", err);
  }
  if (o->max_mean_text != NULL) {
    double sum = 0;
    for (int i = 0; i < f->nrows; i++)
      sum += fabs(a->predicted[i] / f->rows[i].measured - 1.0);
    double mean = 100.0 * sum / f->nrows;
    if (mean > max_pct) {
      fprintf(stderr,
              "trainsim validate: mean |error| %.2f%% over %s's %d rows exceeds "
              "--max-mean-error-pct %g\n",
              mean, f->path, f->nrows, max_pct);
      return 1;
    }
  }
  return 0;
}

int ts_cmd_validate(int argc, char **argv)
{
  against_opts ag = {0};
  ag.jobs = G_MININT64; /* not given: every core (-j 0 is refused, as by sweep, check, search) */
  g_auto(GStrv) drop_ops = NULL, drop_deps = NULL, algo_alias = NULL, bucket_bytes = NULL;
  g_autofree char *prec_name = NULL, *opt_name = NULL;
  ts_validate_options o;
  ts_validate_options_default(&o);
  gint64 steps = o.steps, seed = (gint64)o.seed;
  double tolerance = 0;
  gboolean verbose = FALSE;
  /* The plan options of run, trace, sweep and search (ts_cmd.h), with validate's defaults. */
  g_auto(ts_cmd_plan_args) pa;
  ts_cmd_plan_args_init(&pa, TS_CMD_PLAN_VALIDATE);
  g_autofree GOptionEntry *plan_entries = ts_cmd_plan_entries(&pa);
  GOptionEntry own_entries[] = {
      {"precision", 'p', 0, G_OPTION_ARG_STRING, &prec_name, "fp32 (default), fp64 or both", "P"},
      {"steps", 0, 0, G_OPTION_ARG_INT64, &steps, "Training steps (default 2)", "N"},
      /* The names validate had before it took the shared table: kept for scripts. */
      {"algorithm", 'a', 0, G_OPTION_ARG_STRING_ARRAY, &algo_alias,
       "Same as --collective-algorithm", "A"},
      {"bucket-bytes", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING_ARRAY, &bucket_bytes,
       "Same as --bucket-MiB, in bytes", "BYTES"},
      {"optimizer", 0, 0, G_OPTION_ARG_STRING, &opt_name, "sgd (default, momentum 0.9) or adam",
       "O"},
      {"lr", 0, 0, G_OPTION_ARG_DOUBLE, &o.lr, "Learning rate (default 0.1)", "LR"},
      {"seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Seed of parameters and data (default 42)", "N"},
      {"tolerance", 0, 0, G_OPTION_ARG_DOUBLE, &tolerance,
       "Largest normwise relative error accepted, in [0, 1] (default 1e-5 fp32, 1e-12 fp64)", "X"},
      {"drop-op", 0, 0, G_OPTION_ARG_STRING_ARRAY, &drop_ops,
       "Negative test: ops with this label do nothing (e.g. 'fc2 fwd all-reduce'); repeatable",
       "LABEL"},
      {"drop-deps", 0, 0, G_OPTION_ARG_STRING_ARRAY, &drop_deps,
       "Negative test: ops with this label lose their explicit dependencies; repeatable", "LABEL"},
      {"verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose,
       "Per-tensor errors and per-chip bytes for every run", NULL},
      {"against", 0, 0, G_OPTION_ARG_FILENAME, &ag.against,
       "Replay a measurement CSV (step time, busbw or peak memory per row) and report "
       "predicted vs measured (docs/accuracy.md); the options above do not apply",
       "FILE.csv"},
      {"output-dir", 'o', 0, G_OPTION_ARG_FILENAME, &ag.outdir,
       "--against: write validate.txt, validate.csv and validate.json here (all or none)", "DIR"},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &ag.format,
       "--against without -o: text (default), csv or json on stdout", "F"},
      {"plot", 0, 0, G_OPTION_ARG_NONE, &ag.plot,
       "--against -o DIR: also the log-log scatter accuracy.png / .svg (gnuplot)", NULL},
      {"jobs", 'j', 0, G_OPTION_ARG_INT64, &ag.jobs,
       "--against: worker processes for step-time rows (default: every core)", "N"},
      {"backend", 0, 0, G_OPTION_ARG_STRING, &ag.backend,
       "--against: analytic (default) or simgrid", "B"},
      {"max-mean-error-pct", 0, 0, G_OPTION_ARG_STRING, &ag.max_mean_text,
       "--against: exit 1 when the mean |error| over the file is larger", "PCT"},
      {NULL}};
  g_autofree GOptionEntry *entries = ts_option_entries_concat(plan_entries, own_entries);
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse(
          "validate", "",
          "Executes the planner's trace of each split on real fp32/fp64 kernels (each chip holds "
          "only its shard; collectives run their real decomposition) and compares the "
          "parameters after the step(s) with one processor's, and the bytes each chip sent with "
          "the trace's.",
          "Examples:\n"
          "  trainsim validate                                      # the default suite\n"
          "  trainsim validate -m validate-transformer -s tp=2@x,dp=2@y -p fp64 -v\n"
          "  trainsim validate -m validate-mlp -s dp=8@x+y -t torus:4x2 --collective-algorithm "
          "all\n"
          "  trainsim validate -m validate-mlp -s tp=2 --drop-op 'fc2 fwd all-reduce'  # fails: "
          "exit 1\n"
          "  trainsim validate --against data/published/torchtitan/memory.csv\n"
          "Exit status: 0 every run passed, 1 a run failed, 2 bad input. docs/validation.md",
          entries, &argc, &argv, &err))
    return ts_cmd_fail("validate", err);
  if (argc > 1) {
    ts_cmd_unexpected("validate", argv[1], &err);
    return ts_cmd_fail("validate", err);
  }
  if (ag.against != NULL) {
    /* Every option of the numeric validation, the plan options included (-b was ignored
     * here without a word). */
    const char *numeric = pa.g_model               ? "--model"
                          : pa.g_split             ? "--split"
                          : pa.g_topology          ? "--topology"
                          : pa.g_batch             ? "--global-batch"
                          : pa.g_micro             ? "--micro-batch"
                          : pa.g_bucket            ? "--bucket-MiB"
                          : bucket_bytes           ? "--bucket-bytes"
                          : pa.g_algo              ? "--collective-algorithm"
                          : algo_alias             ? "--algorithm"
                          : prec_name              ? "--precision"
                          : opt_name               ? "--optimizer"
                          : drop_ops               ? "--drop-op"
                          : drop_deps              ? "--drop-deps"
                          : verbose                ? "--verbose"
                          : steps != o.steps       ? "--steps"
                          : seed != (gint64)o.seed ? "--seed"
                          : tolerance != 0         ? "--tolerance"
                                                   : NULL;
    int status;
    if (numeric != NULL) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "%s: applies to the numeric validation, not to --against (the measurement "
                  "file gives each row's configuration)",
                  numeric);
      status = ts_cmd_fail("validate", err);
    } else {
      status = run_against(&ag);
    }
    g_free(ag.against);
    g_free(ag.outdir);
    g_free(ag.format);
    g_free(ag.backend);
    g_free(ag.max_mean_text);
    return status;
  }
  if (ag.outdir != NULL || ag.format != NULL || ag.plot || ag.jobs != G_MININT64 ||
      ag.backend != NULL || ag.max_mean_text != NULL) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--output-dir, --format, --plot, --jobs, --backend and --max-mean-error-pct: "
                "expected --against FILE.csv with them");
    g_free(ag.outdir);
    g_free(ag.format);
    g_free(ag.backend);
    g_free(ag.max_mean_text);
    return ts_cmd_fail("validate", err);
  }
  /* Options, checked before anything runs. */
  gboolean both = FALSE;
  if (prec_name == NULL || strcmp(prec_name, "fp32") == 0)
    o.prec = TS_PREC_F32;
  else if (strcmp(prec_name, "fp64") == 0)
    o.prec = TS_PREC_F64;
  else if (strcmp(prec_name, "both") == 0)
    both = TRUE;
  else {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--precision '%s': expected fp32, fp64 or both",
                prec_name);
    return ts_cmd_fail("validate", err);
  }
  /* The old spellings: -a/--algorithm is --collective-algorithm, --bucket-bytes is
   * --bucket-MiB in bytes; one of each pair. */
  if ((algo_alias != NULL && pa.g_algo != NULL) || (bucket_bytes != NULL && pa.g_bucket != NULL)) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "%s: expected one of them",
                algo_alias != NULL && pa.g_algo != NULL ? "--algorithm and --collective-algorithm"
                                                        : "--bucket-bytes and --bucket-MiB");
    return ts_cmd_fail("validate", err);
  }
  gboolean aliased = algo_alias != NULL;
  if (aliased)
    pa.g_algo = g_steal_pointer(&algo_alias);
  ts_plan_options unused;
  if (!ts_cmd_plan_args_finish(&pa, &unused, &err)) {
    /* Named as the user typed it. */
    if (aliased && g_str_has_prefix(err->message, "--collective-algorithm")) {
      char *m = g_strconcat("--algorithm", err->message + strlen("--collective-algorithm"), NULL);
      g_free(err->message);
      err->message = m;
    }
    return ts_cmd_fail("validate", err);
  }
  if (bucket_bytes != NULL) {
    double v = 0;
    if (bucket_bytes[1] != NULL || !ts_parse_double(bucket_bytes[0], &v) || !(v > 0)) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "--bucket-bytes %s: expected one positive size in bytes", bucket_bytes[0]);
      return ts_cmd_fail("validate", err);
    }
    pa.bucket_MiB = v / 1048576.0;
  }
  gboolean all_algos = pa.algo < 0;
  int algo = all_algos ? TS_ALGO_AUTO : pa.algo;
  if (pa.global_batch != G_MININT64)
    o.global_batch = pa.global_batch;
  o.micro_batch = pa.micro_batch;
  o.bucket_bytes = pa.bucket_MiB * 1048576.0;
  if (opt_name != NULL && strcmp(opt_name, "sgd") != 0 && strcmp(opt_name, "adam") != 0) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--optimizer '%s': expected sgd or adam", opt_name);
    return ts_cmd_fail("validate", err);
  }
  o.optimizer = opt_name && strcmp(opt_name, "adam") == 0 ? TS_VALIDATE_ADAM : TS_VALIDATE_SGD;
  /* One option per message (one line naming the option, its value and the range). */
  g_autofree char *bb = ts_dtostr_short(o.bucket_bytes), *lrs = ts_dtostr_short(o.lr),
                  *tol = ts_dtostr_short(tolerance);
  if (steps < 1 || steps > 1000)
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--steps %" G_GINT64_FORMAT ": expected a number of steps in [1, 1000]", steps);
  else if (o.global_batch < 1 || o.global_batch > 1 << 16)
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--global-batch %" G_GINT64_FORMAT ": expected a batch in [1, 65536]",
                o.global_batch);
  else if (o.micro_batch < 0)
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--micro-batch %" G_GINT64_FORMAT ": expected a micro-batch >= 0 (0: none)",
                o.micro_batch);
  else if (!(o.bucket_bytes > 0))
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--bucket-bytes %s: expected a positive size", bb);
  else if (!(o.lr > 0))
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--lr %s: expected a learning rate in (0, 10]",
                lrs);
  /* A relative error past 1 is no agreement at all: --tolerance inf passed every split, a
   * gate that cannot fail. */
  else if (!(tolerance >= 0 && tolerance <= 1))
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--tolerance %s: expected a normwise relative error in [0, 1] (0: the precision's "
                "default)",
                tol);
  else if (seed < 0)
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--seed %" G_GINT64_FORMAT ": expected a seed >= 0",
                seed);
  if (err != NULL)
    return ts_cmd_fail("validate", err);
  /* A learning rate past 10 makes the weights overflow in a step or two: the comparison then
   * fails on infinities (exit 1), which reads as a broken split. Refuse it as input. */
  if (!(o.lr <= 10.0)) {
    g_autofree char *lr = ts_dtostr_short(o.lr);
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "--lr %s: expected a learning rate in (0, 10]", lr);
    return ts_cmd_fail("validate", err);
  }
  o.steps = (int)steps;
  o.seed = (guint64)seed;
  o.tolerance = tolerance;
  o.drop_ops = (const char *const *)drop_ops;
  o.drop_deps = (const char *const *)drop_deps;

  /* Models and splits, all loaded before the first run. */
  const char *const *mnames = pa.g_model ? (const char *const *)pa.models : default_models;
  const char *const *snames = pa.splits ? (const char *const *)pa.splits : default_splits;
  GPtrArray *mlist = g_ptr_array_new_with_free_func((GDestroyNotify)ts_model_free);
  GPtrArray *slist = g_ptr_array_new_with_free_func((GDestroyNotify)ts_split_free);
  g_autoptr(ts_topo) given = NULL;
  int status = 0;
  GString *out = g_string_new(NULL);
  for (const char *const *mn = mnames; *mn != NULL && err == NULL; mn++) {
    g_autofree char *path = ts_resolve_data_file(*mn, "models", &err);
    ts_model *m = path ? ts_model_load(path, &err) : NULL;
    if (m != NULL)
      g_ptr_array_add(mlist, m);
  }
  for (const char *const *sn = snames; *sn != NULL && err == NULL; sn++) {
    ts_split *s = ts_split_parse(*sn, &err);
    if (s != NULL)
      g_ptr_array_add(slist, s);
  }
  if (err == NULL && pa.topology != NULL)
    given = load_topology(pa.topology, &err);
  if (err != NULL) {
    status = ts_cmd_fail("validate", err);
    goto done;
  }

  ts_prec precs[2] = {o.prec, TS_PREC_F64};
  if (both)
    precs[0] = TS_PREC_F32;
  int nprec = both ? 2 : 1;
  int runs = 0, passed = 0, skipped = 0;
  gboolean single = mlist->len == 1 && slist->len == 1 && nprec == 1 && !all_algos;
  for (guint mi = 0; mi < mlist->len; mi++)
    for (guint si = 0; si < slist->len; si++) {
      const ts_split *s = g_ptr_array_index(slist, si);
      g_autoptr(GError) terr = NULL;
      g_autoptr(ts_topo) own = given ? NULL : ts_validate_default_topology(split_chips(s), &terr);
      const ts_topo *t = given ? given : own;
      if (t == NULL) {
        status = ts_cmd_fail("validate", terr);
        goto done;
      }
      for (int pi = 0; pi < nprec; pi++)
        for (int a = all_algos ? TS_ALGO_RING : algo; a <= (all_algos ? TS_ALGO_NALGOS - 1 : algo);
             a++) {
          ts_validate_options ro = o;
          ro.prec = precs[pi];
          ro.algo = (ts_coll_algo)a;
          g_autoptr(GError) rerr = NULL;
          g_autoptr(ts_validate_result) r =
              ts_validate_run(g_ptr_array_index(mlist, mi), t, s, &ro, &rerr);
          if (r == NULL) {
            if (all_algos && rerr->code == TS_ERROR_INVALID &&
                g_str_has_prefix(rerr->message, "--algorithm")) {
              g_string_append_printf(out, "skipped: %s\n", rerr->message);
              skipped++;
              continue;
            }
            status = ts_cmd_fail("validate", rerr);
            goto done;
          }
          runs++;
          passed += r->passed;
          g_autofree char *text = ts_validate_result_text(r, single || verbose);
          g_string_append(out, text);
        }
    }
  g_string_append_printf(out, "%d of %d runs passed", passed, runs);
  if (skipped > 0)
    g_string_append_printf(out, " (%d skipped: algorithm not applicable)", skipped);
  g_string_append_c(out, '\n');
  /* A failed write (a full disk) is not a pass. (No g_autoptr here: the gotos above jump past
   * it to `done`, and its cleanup would free an uninitialised pointer.) */
  GError *werr = NULL;
  if (!ts_write_file_atomic("-", out->str, out->len, &werr))
    status = ts_cmd_fail("validate", werr);
  else
    status = passed == runs ? 0 : 1;
  g_clear_error(&werr);
done:
  g_string_free(out, TRUE);
  g_ptr_array_unref(mlist);
  g_ptr_array_unref(slist);
  return status;
}
