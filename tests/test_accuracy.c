/* Tests of measurement files (`trainsim validate --against`, sim/ts_accuracy.c): predictions
 * agree with `run`, errors and group statistics in closed form, bad input named by file, line
 * and column with nothing written, the output set whole, the shipped files replay. */
#include "ts_accuracy.h"
#include "ts_run.h"
#include "ts_topo.h"
#include "ts_util.h"

#include "ts_test.h"
#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

/* A temporary folder with one file. */
static char *write_tmp(char **dir, const char *name, const char *text)
{
  *dir = g_dir_make_tmp("ts-acc-XXXXXX", NULL);
  cr_assert_not_null(*dir);
  char *path = g_build_filename(*dir, name, NULL);
  cr_assert(g_file_set_contents(path, text, -1, NULL));
  return path;
}

static void rm_tree(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *n;
  while (d != NULL && (n = g_dir_read_name(d)) != NULL) {
    g_autofree char *p = g_build_filename(dir, n, NULL);
    if (g_file_test(p, G_FILE_TEST_IS_DIR))
      rm_tree(p);
    else
      g_unlink(p);
  }
  if (d != NULL)
    g_dir_close(d);
  g_rmdir(dir);
}

/* The step time `run` predicts for a configuration. */
static double run_step(const char *topo, const char *model, const char *split, gint64 gb, gint64 mb)
{
  g_autoptr(ts_topo) t = load_topo(topo);
  g_autoptr(ts_model) m = load_model(model);
  GError *e = NULL;
  g_autoptr(ts_split) s = ts_split_parse(split, &e);
  cr_assert_not_null(s);
  ts_plan_options po;
  ts_plan_options_default(&po);
  po.global_batch = gb;
  po.micro_batch = mb;
  ts_run_options ro = {.backend = "analytic"};
  ts_result r;
  cr_assert(ts_run_predict(m, t, s, &po, &ro, &r, &e), "%s", e ? e->message : "");
  double v = r.step_time_s;
  ts_result_clear(&r);
  return v;
}

/* A shipped measurement file (data/published/DIR/FILE), checked to hold ROWS rows. */
static ts_meas_file *published_file(const char *dir, const char *file, int rows)
{
  g_autofree char *path = g_build_filename(TS_SOURCE_DIR, "data", "published", dir, file, NULL);
  GError *e = NULL;
  ts_meas_file *f = ts_meas_load(path, &e);
  cr_assert_not_null(f, "%s", e ? e->message : "");
  cr_assert_eq(f->nrows, rows, "%s: %d rows, %d expected", path, f->nrows, rows);
  return f;
}

/* A shipped measurement file's text, one string per line (a row's line N is [N - 1]). */
static char **published_lines(const char *dir, const char *file)
{
  g_autofree char *path = g_build_filename(TS_SOURCE_DIR, "data", "published", dir, file, NULL);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(path, &text, NULL, NULL), "%s: unreadable", path);
  return g_strsplit(text, "\n", -1);
}

/* Every row of F predicted, with JOBS worker processes. */
static ts_accuracy *replayed(const ts_meas_file *f, int jobs)
{
  GError *e = NULL;
  ts_accuracy *a = ts_accuracy_run(f, jobs, NULL, &e);
  cr_assert_not_null(a, "%s", e ? e->message : "");
  return a;
}

/* The mean and the worst |error| (%) of a shipped file's rows (data/published/DIR/FILE). */
static void file_errors(const char *dir, const char *file, int rows, double *mean, double *worst)
{
  g_autoptr(ts_meas_file) f = published_file(dir, file, rows);
  g_autoptr(ts_accuracy) a = replayed(f, 2);
  double sum = 0;
  *worst = 0;
  for (int i = 0; i < f->nrows; i++) {
    double err = 100 * fabs(a->predicted[i] / f->rows[i].measured - 1);
    sum += err;
    *worst = fmax(*worst, err);
  }
  *mean = sum / f->nrows;
}

Test(accuracy, errors_and_group_statistics_in_closed_form)
{
  /* Measured = predicted x 1.1 and x 0.8 (errors -1/11 and +1/4) in group a, x 0.5 (+100%) in
   * group b: mean |error| of a = (100/11 + 25) / 2, median the same, max 25, bias (25 -
   * 100/11) / 2; the whole file's median is the middle row's, 25. */
  double p = run_step("tpu-v3-8x8", "bert-large", "tp=8@x,dp=8@y", 512, 64);
  cr_assert(p > 0.05 && p < 1, "BERT-Large step %g s", p);
  g_autofree char *csv =
      g_strdup_printf("# a comment line\n"
                      "group,topology,model,split,global_batch,micro_batch,step_time_ms,note\n"
                      "a,tpu-v3-8x8,bert-large,\"tp=8@x,dp=8@y\",512,64,%.17g,first\n"
                      "a,tpu-v3-8x8,bert-large,\"tp=8@x,dp=8@y\",512,64,%.17g,\"with, comma\"\n"
                      "b,tpu-v3-8x8,bert-large,\"tp=8@x,dp=8@y\",512,64,%.17g,\n",
                      p * 1.1e3, p * 0.8e3, p * 0.5e3);
  g_autofree char *dir = NULL;
  g_autofree char *path = write_tmp(&dir, "m.csv", csv);
  GError *e = NULL;
  g_autoptr(ts_meas_file) f = ts_meas_load(path, &e);
  cr_assert_not_null(f, "%s", e ? e->message : "");
  cr_assert_eq(f->nrows, 3);
  cr_assert_eq(f->rows[0].line, 3, "lines count from the file's first line");
  cr_assert_float_eq(f->rows[1].measured, p * 0.8, p * 1e-12, "ms read as seconds");
  g_autoptr(ts_accuracy) a = ts_accuracy_run(f, 1, NULL, &e);
  cr_assert_not_null(a, "%s", e ? e->message : "");
  for (int i = 0; i < 3; i++)
    cr_assert_float_eq(a->predicted[i], p, p * 1e-12, "row %d: %g vs run's %g", i, a->predicted[i],
                       p);
  g_autofree char *json = ts_accuracy_json(a);
  g_autoptr(JsonParser) jp = json_parser_new();
  cr_assert(json_parser_load_from_data(jp, json, -1, NULL));
  JsonObject *root = json_node_get_object(json_parser_get_root(jp));
  cr_assert_str_eq(json_object_get_string_member(root, "metric"), "step_time_s");
  JsonArray *rows = json_object_get_array_member(root, "rows");
  const double want_err[] = {-100.0 / 11, 25, 100};
  for (int i = 0; i < 3; i++) {
    JsonObject *r = json_array_get_object_element(rows, (guint)i);
    double got = json_object_get_double_member(r, "error_pct");
    cr_assert_float_eq(got, want_err[i], 1e-9, "row %d error %g, expected %g", i, got, want_err[i]);
    cr_assert(json_object_has_member(r, "measured_step_time_s"));
    cr_assert(json_object_has_member(r, "predicted_step_time_s"));
  }
  JsonObject *ga = json_array_get_object_element(json_object_get_array_member(root, "groups"), 0);
  double mean_a = (100.0 / 11 + 25) / 2;
  cr_assert_str_eq(json_object_get_string_member(ga, "group"), "a");
  cr_assert_eq(json_object_get_int_member(ga, "rows"), 2);
  cr_assert_float_eq(json_object_get_double_member(ga, "mean_abs_error_pct"), mean_a, 1e-9);
  cr_assert_float_eq(json_object_get_double_member(ga, "median_abs_error_pct"), mean_a, 1e-9);
  cr_assert_float_eq(json_object_get_double_member(ga, "max_abs_error_pct"), 25, 1e-9);
  cr_assert_float_eq(json_object_get_double_member(ga, "mean_error_pct"), (25 - 100.0 / 11) / 2,
                     1e-9);
  JsonObject *all = json_object_get_object_member(root, "all");
  cr_assert_float_eq(json_object_get_double_member(all, "median_abs_error_pct"), 25, 1e-9);
  cr_assert_float_eq(json_object_get_double_member(all, "max_abs_error_pct"), 100, 1e-9);
  g_autofree char *text = ts_accuracy_text(a);
  cr_assert(strstr(text, "+25.0%") != NULL && strstr(text, "-9.1%") != NULL, "%s", text);
  g_autofree char *out = ts_accuracy_csv(a);
  cr_assert(g_str_has_prefix(out, "line,group,topology,vary,model,split,global_batch,micro_batch,"
                                  "collective,size_bytes,measured_step_time_s,"
                                  "predicted_step_time_s,error_pct,detail\n"),
            "%s", out);
  rm_tree(dir);
}

Test(accuracy, memory_and_busbw_rows_match_run_and_collective)
{
  /* A memory row predicts run's memory/chip; a busbw row nccl-tests' bus bandwidth as
   * `trainsim collective` reports it: bytes / time x 2(n-1)/n for an all-reduce. */
  g_autofree char *dir = NULL;
  g_autofree char *path = write_tmp(&dir, "mem.csv",
                                    "topology,model,split,global_batch,micro_batch,peak_memory_GB\n"
                                    "dgx-a100-4node,gpt3-1.3b,\"dp=32,zero=1\",256,8,20\n");
  GError *e = NULL;
  g_autoptr(ts_meas_file) f = ts_meas_load(path, &e);
  cr_assert_not_null(f, "%s", e ? e->message : "");
  cr_assert_float_eq(f->rows[0].measured, 20e9, 1);
  g_autoptr(ts_accuracy) a = ts_accuracy_run(f, 1, NULL, &e);
  cr_assert_not_null(a, "%s", e ? e->message : "");
  run_result r = run("run -t dgx-a100-4node -m gpt3-1.3b -b 256 --micro-batch 8 -s dp=32,zero=1 "
                     "--format json");
  cr_assert_eq(r.status, 0, "%s", r.err);
  g_autoptr(JsonParser) jp = json_parser_new();
  cr_assert(json_parser_load_from_data(jp, r.out, -1, NULL));
  JsonObject *res = json_array_get_object_element(
      json_object_get_array_member(json_node_get_object(json_parser_get_root(jp)), "results"), 0);
  double want = json_object_get_double_member(res, "memory_per_chip_bytes");
  cr_assert_float_eq(a->predicted[0], want, want * 1e-9, "%g vs run's %g", a->predicted[0], want);
  run_free(&r);

  g_autofree char *bw_path = g_build_filename(dir, "bw.csv", NULL);
  cr_assert(g_file_set_contents(bw_path,
                                "topology,vary,collective,size_bytes,busbw_GBps\n"
                                "dgx-a100-1node,dim.node.size=4,allreduce,1073741824,100\n",
                                -1, NULL));
  g_autoptr(ts_meas_file) fb = ts_meas_load(bw_path, &e);
  cr_assert_not_null(fb, "%s", e ? e->message : "");
  g_autoptr(ts_accuracy) b = ts_accuracy_run(fb, 1, NULL, &e);
  cr_assert_not_null(b, "%s", e ? e->message : "");
  /* The 4-GPU node's collective as `trainsim collective` reports it. */
  g_autofree char *topo4 = g_build_filename(dir, "node4.ini", NULL);
  g_autofree char *src = g_build_filename(TS_SOURCE_DIR, "topologies", "dgx-a100-1node.ini", NULL);
  g_autofree char *txt = NULL;
  cr_assert(g_file_get_contents(src, &txt, NULL, NULL));
  char *at = strstr(txt, "size = 8");
  cr_assert_not_null(at);
  at[7] = '4';
  cr_assert(g_file_set_contents(topo4, txt, -1, NULL));
  g_autofree char *args =
      g_strdup_printf("collective -t %s --op allreduce --bytes 1073741824 --format csv", topo4);
  run_result c = run(args);
  cr_assert_eq(c.status, 0, "%s", c.err);
  g_auto(GStrv) lines = g_strsplit(c.out, "\n", -1);
  g_auto(GStrv) fields = g_strsplit(lines[1], ",", -1);
  double busbw = g_ascii_strtod(fields[5], NULL);
  cr_assert_float_eq(b->predicted[0], busbw, busbw * 1e-6, "%g vs collective's %g GB/s",
                     b->predicted[0], busbw);
  run_free(&c);
  rm_tree(dir);
}

/* `trainsim validate --against FILE` (and extra args) fails with exit 2, one line containing
 * needle, nothing on stdout, and no file in the output folder. */
static void expect_bad(const char *csv, const char *extra, const char *needle)
{
  g_autofree char *dir = NULL;
  g_autofree char *path = write_tmp(&dir, "bad.csv", csv);
  g_autofree char *out = g_build_filename(dir, "out", NULL);
  g_autofree char *args =
      g_strdup_printf("validate --against %s -o %s %s", path, out, extra != NULL ? extra : "");
  run_result r = run(args);
  cr_assert_eq(r.status, 2, "exit %d; stderr: %s", r.status, r.err);
  cr_assert(strstr(r.err, needle) != NULL, "stderr '%s' lacks '%s'", r.err, needle);
  const char *nl = strchr(r.err, '\n');
  cr_assert(nl != NULL && nl[1] == '\0', "expected one line, got '%s'", r.err);
  cr_assert_str_eq(r.out, "");
  GDir *d = g_dir_open(out, 0, NULL);
  if (d != NULL) {
    const char *n = g_dir_read_name(d);
    cr_assert_null(n, "a failed validate left %s in the output folder", n);
    g_dir_close(d);
  }
  run_free(&r);
  rm_tree(dir);
}

#define HEAD "topology,model,split,global_batch,micro_batch,step_time_s\n"
#define GOOD "tpu-v3-8x8,bert-large,dp=64,512,8,0.1\n"

Test(accuracy, bad_input_names_file_line_and_column)
{
  expect_bad("topology,model,split,global_batch,step_time_s\n" GOOD, NULL,
             "bad.csv:1: column micro_batch: missing");
  expect_bad("topology,model,split,global_batch,micro_batch,step_time_min\n" GOOD, NULL,
             "bad.csv:1: column step_time_min: unit not understood");
  expect_bad("topology,model,split,global_batch,micro_batch\n" GOOD, NULL,
             "bad.csv:1: no measurement column");
  /* machine is topology's other name: not "given twice" of a column given once. */
  expect_bad("topology,machine,model,split,global_batch,micro_batch,step_time_s\n"
             "tpu-v3-8x8," GOOD,
             NULL, "bad.csv:1: column machine: given with topology, its other name");
  expect_bad("model,model,topology,split,global_batch,micro_batch,step_time_s\n", NULL,
             "bad.csv:1: column model: given twice; expected each column once");
  expect_bad(HEAD GOOD "tpu-v3-8x8,bert-large,dp=64,512,8,fast\n", NULL,
             "bad.csv:3: column step_time_s: 'fast': expected a measurement");
  expect_bad(HEAD GOOD "tpu-v3-8x8,bert-large,dp=64,512,8\n", NULL,
             "bad.csv:3: 5 fields; expected 6");
  expect_bad(HEAD "tpu-v3-8x8,bert-large,\"dp=64,512,8,0.1\n", NULL,
             "bad.csv:2: unterminated or misplaced quote");
  expect_bad(HEAD GOOD "tpu-v3-8x8,no-such-model,dp=64,512,8,0.1\n", NULL,
             "bad.csv:3: column model: no-such-model");
  expect_bad(HEAD GOOD "tpu-v3-8x8,bert-large,dp=63,512,8,0.1\n", NULL,
             "bad.csv:3: column split: 'dp=63'");
  /* A row the planner refuses (a batch the split cannot divide) only after the others ran. */
  expect_bad(HEAD GOOD GOOD "tpu-v3-8x8,bert-large,dp=64,100,8,0.1\n", NULL,
             "bad.csv:4: column split: 'dp=64'");
  expect_bad(HEAD GOOD "tpu-v3-8x8,bert-large,dp=64,0,8,0.1\n", NULL,
             "bad.csv:3: column global_batch: '0'");
  expect_bad("topology,vary,model,split,global_batch,micro_batch,step_time_s\n"
             "tpu-v3-8x8,dim.q.size=4,bert-large,dp=64,512,8,0.1\n",
             NULL, "bad.csv:2: column vary:");
  expect_bad(HEAD, NULL, "bad.csv:1: no rows");
  /* A measured step of 1e-300 s gave a row error of +6e46%: no measurement is that small. */
  expect_bad(HEAD "tpu-v3-8x8,bert-large,dp=64,512,8,1e-300\n", NULL,
             "bad.csv:2: column step_time_s: '1e-300': expected a measurement in [1e-06, 1e+18]");
  expect_bad("topology,model,split,global_batch,micro_batch,peak_memory_bytes\n"
             "tpu-v3-8x8,bert-large,dp=64,512,8,1000\n",
             NULL,
             "bad.csv:2: column peak_memory_bytes: '1000': expected a measurement in [1.04858e+06");
  expect_bad("topology,collective,size_bytes,busbw_GBps\n"
             "dgx-a100-1node,allreduce,1e6,1e-300\n",
             NULL, "bad.csv:2: column busbw_GBps: '1e-300': expected a measurement in [1e-06,");
  expect_bad("topology,collective,size_bytes,busbw_GBps,algorithm\n"
             "dgx-a100-1node,allreduce,1e6,10,spiral\n",
             NULL, "bad.csv:2: column algorithm: 'spiral'");
  expect_bad("topology,collective,size_bytes,busbw_GBps\n"
             "dgx-a100-1node,gather,1e6,10\n",
             NULL, "bad.csv:2: column collective: 'gather'");
  expect_bad(HEAD GOOD, "--plot --format xml", "--format 'xml'");
  expect_bad(HEAD GOOD, "-m bert-large", "--model: applies to the numeric validation");
}

Test(accuracy, output_set_is_whole_and_identical_for_any_jobs)
{
  g_autofree char *dir = NULL;
  g_autofree char *path =
      write_tmp(&dir, "m.csv",
                HEAD GOOD "tpu-v3-8x8,bert-large,\"tp=8@x,dp=8@y\",512,64,0.2\n"
                          "tpu-v3-8x8,bert-large,\"tp=4@x,dp=16\",512,32,0.15\n");
  g_autofree char *o1 = g_build_filename(dir, "o1", NULL);
  g_autofree char *o2 = g_build_filename(dir, "o2", NULL);
  g_autofree char *a1 = g_strdup_printf("validate --against %s -o %s -j 1", path, o1);
  g_autofree char *plot = g_find_program_in_path("gnuplot");
  g_autofree char *a2 =
      g_strdup_printf("validate --against %s -o %s -j 2%s", path, o2, plot ? " --plot" : "");
  run_result r1 = run(a1), r2 = run(a2);
  cr_assert_eq(r1.status, 0, "%s", r1.err);
  cr_assert_eq(r2.status, 0, "%s", r2.err);
  const char *files[] = {"validate.txt", "validate.csv", "validate.json"};
  for (size_t k = 0; k < G_N_ELEMENTS(files); k++) {
    g_autofree char *p1 = g_build_filename(o1, files[k], NULL);
    g_autofree char *p2 = g_build_filename(o2, files[k], NULL);
    g_autofree char *t1 = NULL, *t2 = NULL;
    cr_assert(g_file_get_contents(p1, &t1, NULL, NULL), "%s missing", p1);
    cr_assert(g_file_get_contents(p2, &t2, NULL, NULL), "%s missing", p2);
    cr_assert_str_eq(t1, t2, "%s differs between -j 1 and -j 2", files[k]);
  }
  if (plot != NULL) {
    const char *pf[] = {"accuracy.dat", "accuracy.png", "accuracy.svg"};
    for (size_t k = 0; k < G_N_ELEMENTS(pf); k++) {
      g_autofree char *p = g_build_filename(o2, pf[k], NULL);
      cr_assert(g_file_test(p, G_FILE_TEST_IS_REGULAR), "%s missing", p);
    }
  }
  /* Nothing left over from the temporary folder. */
  GDir *d = g_dir_open(o1, 0, NULL);
  const char *n;
  while ((n = g_dir_read_name(d)) != NULL)
    cr_assert(n[0] != '.', "left %s", n);
  g_dir_close(d);
  run_free(&r1);
  run_free(&r2);
  rm_tree(dir);
}

/* The shipped TorchTitan memory rows replay, and their error stays below what this branch
 * measured (docs/accuracy.md: 9.6% mean |error| over 18 rows once fsdp2's interleaved schedule
 * is torch.distributed.pipelining's, 10.0% before; 8.6% over Tables 1, 3, 4, 5, with Llama 3.1,
 * FSDP2, op-level checkpointing, the eager loss and the allocator's overhead; it was 34.4% with
 * the Llama approximations; the target is 10%); 8.2% since fsdp2's pipelines keep
 * torch.distributed.pipelining's receive buffers and the last stage's output_chunks (the
 * interleaved 405B row -11.9% -> +1.4%, its peak now the last device's, 1F1B -24.5% -> -21.7%);
 * 7.7% since DTensor's tensor parallelism keeps the gathered inputs of fsdp2's column-parallel
 * layers (70B -10.0% -> -7.2% and -4.3% -> -1.3%); 6.8% since the cp rows say cp-ring=torch
 * and its ring buffers count in the attention's backward (405B CP 2/4/8: -13.7/-15.1/-22.9% ->
 * -9.4/-10.0/-17.0%; 8B CP unchanged, the eager loss's fp32 copies are its peak); 5.8% (worst
 * 20.6% -> 16.4%) since fsdp2's pipeline gradient accumulators, re-allocated every step, take
 * the caching allocator's overhead (the six 405B rows +3.4 to +3.6 GiB); 5.92% since
 * torch.distributed.pipelining's input gradients stay in the receive buffers' .grad (the
 * interleaved row +7.6% -> +8.9%); 5.6% since each pipeline chunk's accumulators appear at
 * its first backward (the interleaved row +8.9% -> +1.9%, its device holding the second
 * chunk's only after the first chunk's backwards freed their activations; 1F1B -16.4% ->
 * -16.5%, the CP rows -0.2 to -0.3 points); 5.3% since FSDP2's sharded gradients, set to None
 * by every step's zero_grad and re-made by the reduce-scatter amid the activations, take the
 * allocator's overhead too (8B dp 8 +0.5 GiB, 405B +0.4 GiB); 5.04% (worst 15.0%, the 405B
 * 1F1B row, -16.0% before) since an fsdp2 pipeline block's backward holds its bf16 gradients
 * before FSDP2 adds them into the fp32 accumulators (the five 1F1B rows +0.86 GiB; the
 * interleaved row's peak, at its last stage's loss, does not move); 3.58% since compiled blocks
 * (kernels=fused; the eager rows say kernels=eager) save only what their backward reads under
 * recompute=op, not the down projection's output (the four 8B compile rows +5.8..+8.3% ->
 * -0.2..+0.9%); 3.11% since fsdp2 with precision=fp8 gathers in float8 by default only with a
 * data-parallel shard degree above 1, as TorchTitan 9dec370's Float8Handler enables torchao's
 * float8 all-gather (the two "FSDP 1 CP 8" rows gather in bf16: 405B -11.5% -> -3.5%, 8B
 * -2.9% -> -2.4%): a regression fails here. */
#define TORCHTITAN_MEMORY_MEAN_MAX 3.2
#define TORCHTITAN_MEMORY_WORST_MAX 15.2

Test(accuracy, shipped_torchtitan_memory_rows)
{
  double mean, worst;
  file_errors("torchtitan", "memory.csv", 18, &mean, &worst);
  cr_expect(mean < TORCHTITAN_MEMORY_MEAN_MAX, "mean |error| %.2f%%", mean);
  cr_expect(worst < TORCHTITAN_MEMORY_WORST_MAX, "worst |error| %.2f%%", worst);
}

/* Table 5's 1F1B row and Table 6's first row (docs/accuracy.md, "TorchTitan, peak memory per
 * GPU") run the same 405B stages and parallelism with 8 micro-batches of 4 x 8192 and of
 * 1 x 32768 tokens: every per-micro-batch tensor the same size, so trainsim predicts them
 * within 0.1% of each other; they measured 82.5 and 75.3 GiB, the 7.2 GiB that the docs
 * leave to run-to-run fragmentation rather than to a term of the configuration. */
Test(accuracy, shipped_torchtitan_memory_twin_rows_predicted_alike)
{
  g_autoptr(ts_meas_file) f = published_file("torchtitan", "memory.csv", 18);
  g_autoptr(ts_accuracy) a = replayed(f, 2);
  int r5 = -1, r6 = -1;
  for (int i = 0; i < f->nrows; i++) {
    const ts_meas_row *r = &f->rows[i];
    if (strcmp(r->model, "llama3-405b") == 0 && strstr(r->split, "schedule=1f1b"))
      r5 = i;
    if (strstr(r->model, "405b-seq32768"))
      r6 = i;
  }
  cr_assert(r5 >= 0 && r6 >= 0, "rows %d %d", r5, r6);
  double diff = f->rows[r5].measured - f->rows[r6].measured;
  cr_assert_float_eq(diff, 7.2 * 1073741824.0, 0.05 * 1073741824.0, "%g bytes", diff);
  cr_expect(fabs(a->predicted[r5] / a->predicted[r6] - 1) < 1e-3, "%.6g vs %.6g bytes",
            a->predicted[r5], a->predicted[r6]);
}

/* TorchTitan's H100 step times (data/published/torchtitan/llama3_h100_steps.csv): the H100
 * profile's compute_efficiency is fitted to the one "(fit)" row, which it must reproduce within
 * 1%; the held-out rows' mean |error| is pinned just above what this branch measured
 * (docs/accuracy.md), so a regression of the H100 model fails here. */
#define TORCHTITAN_STEP_FIT_MAX 1.0
/* Measured 4.4% over the 9 held-out rows, the worst 12.1% (the 405B interleaved row, too fast),
 * once fsdp2's interleaved schedule is torch.distributed.pipelining's (warm-up by the formula at
 * M = P, where Megatron-LM runs every forward first: that row's step 1.1% shorter); 4.3% /
 * 11.0% before; once
 * ZeRO-3/FSDP2 gathers a block at a time one block ahead as FSDP2 prefetches (the fit moved
 * 0.59 -> 0.585); 3.7% / 8.1% before that, with the three AsyncTP rows costed as PyTorch's
 * AsyncTP (tp-overlap=async, each chunk a matmul of its own; then the recomputed forward kept
 * its plain collectives); 5.6% / 13.4% with Transformer Engine's overlap on them (the 405B tp=8
 * rows 12-13% too fast); 5.9% / 13.6% before the DGX H100 node's NCCL rates were set to the
 * published ones (ring 370 GB/s, NVLS 480 GB/s busbw on 8 GPUs, were 449 and 655); 14.45% and
 * 35.5% before the splits said what TorchTitan ran (eager kernels, fsdp2's once-per-step
 * gathers under pp, 8 micro-batches for the interleaved row) and FP8 scaling, recompute=op and
 * the GPU's epilogue traffic were costed (3.3% / 5.7% in between, when the fit absorbed the
 * uncosted recomputation). Since the fused attention core has its own rate and skips the
 * causal mask's upper tiles (the profile is the 500 W 96 GB part, compute_efficiency 0.51 and
 * flash_efficiency 0.41 fitted on this row and the long-sequence file's 32K row): 5.1% / 9.2%
 * (the 8B Float8 rows -6.3 / -9.2%, were -1.3 / -4.3%; the 405B interleaved row -9.2%, was
 * -12.1%). Once fsdp2 + sp pays PyTorch's sequence-dim copies around each tp collective and no
 * re-gather after a full-recompute forward (ts_plan_sp_copy_bytes; 405B and async TP files
 * better): 4.9% / 12.7% (the 70B Float8 row +12.7%, was +5.5%; the 405B pp rows -1.0 / -3.6%,
 * were -3.8 / -6.3%). Once torchao's Float8 tensor parallelism gathers in float8
 * (ts_plan_fp8_gathers) and AsyncTP pays its symmetric-memory copy and partial sum: 4.7% /
 * 9.2% (the 70B Float8 rows +12.7 / +3.9% -> +3.3 / -3.0%, the 405B pp rows -5.7 / -8.1%; the
 * worst now the 8B Float8 128-GPU row, -9.2%). Once a row-parallel output gradient is cast on
 * its sequence shard and the gradients' FP8 GEMMs run without fast accumulation
 * (fp8_split_accum_rate 0.87; the fit moved 0.51 / 0.41 -> 0.505 / 0.43): 3.3% / 6.1% (the 8B
 * Float8 rows -6.3 / -9.2% -> -3.1 / -6.1%, the 70B/405B Float8 group 5.0 -> 3.3%). With NCCL's
 * 16 SMs charged to compute beside cross-node collectives (collective_sms on the H100 profiles;
 * the fit's one-node rows unmoved): 2.9% / 5.5%. Once a backward copy is charged only for a
 * re-gather that runs and async TP keeps a summed input gradient's reduce-scatter plain: 2.7% /
 * 5.3%. Once a compiled PyTorch checkpoint (fsdp2, full recompute) re-runs only what the
 * backward reads (no down projection, no reduce-scatter after it) with the refit it brings
 * (0.505 / 0.43 -> 0.510 / 0.41): 3.8% / 8.6% (the four 70B/405B Float8 full-recompute rows
 * +4.7 / -1.6 / -2.3 / -4.8% -> -1.8 / -4.1 / -6.3 / -8.6%, the 405B pipelined ones worst:
 * loosened, the mechanism is PyTorch's, not a fit to these rows). Once fsdp2 (TorchTitan's Llama)
 * sums the input gradients of its separate projections (wq, wk, wv; w1, w3) in backward: 2.8% /
 * 7.0% (every held-out row closer but the 8B eager 8-GPU one, +0.7 -> +1.1%; the fit row +0.4%,
 * bench/fit_h100.sh still 0.510 / 0.41). Once AsyncTP decomposes the recomputed forward of a
 * full checkpoint too (Inductor's micro-pipeline pass runs on the compiled backward graph,
 * where the re-run lives; the June 2025 async TP file 6.2% -> 4.8%, the 405B August 2024 file
 * 3.3% -> 2.5%): 4.1% / 10.4% (loosened: the three December 2024 AsyncTP rows, 70B -0.7 ->
 * -6.8%, 405B 1F1B / interleaved -4.2 / -6.6 -> -8.2 / -10.4%, now too fast; that torch's
 * measured 70B AsyncTP gain, +5.7%, is a third of March and June 2025's +15.9 / +16.4% on the
 * same 70B Float8 config, docs/accuracy.md). */
#define TORCHTITAN_STEP_HELDOUT_MEAN_MAX 4.2
#define TORCHTITAN_STEP_HELDOUT_WORST_MAX 10.5

Test(accuracy, shipped_torchtitan_h100_step_times)
{
  g_autoptr(ts_meas_file) f = published_file("torchtitan", "llama3_h100_steps.csv", 10);
  g_autoptr(ts_accuracy) a = replayed(f, 1);
  double sum = 0;
  int nheld = 0, nfit = 0;
  for (int i = 0; i < f->nrows; i++) {
    double err = 100 * fabs(a->predicted[i] / f->rows[i].measured - 1);
    if (strstr(f->rows[i].group, "(fit)") != NULL) {
      nfit++;
      cr_expect(err < TORCHTITAN_STEP_FIT_MAX, "fitted row line %d: |error| %.2f%%",
                f->rows[i].line, err);
    } else {
      sum += err, nheld++;
      cr_expect(err < TORCHTITAN_STEP_HELDOUT_WORST_MAX, "held-out row line %d: |error| %.2f%%",
                f->rows[i].line, err);
    }
  }
  cr_assert_eq(nfit, 1, "one fitted row");
  cr_expect(sum / nheld < TORCHTITAN_STEP_HELDOUT_MEAN_MAX, "held-out mean |error| %.2f%%",
            sum / nheld);
}

/* tp-overlap=async (PyTorch's AsyncTP) hides less than tp-overlap (Transformer Engine) under
 * full recomputation and more than no overlap (both decompose the re-run forward too); with or
 * without recomputation the two differ by the chunk GEMMs' shape (m / tp rows each under
 * AsyncTP: at micro-batch 1 the chunks of 1,024 rows lose more to wave quantisation than the
 * overlap gains, so micro-batch 8 here) and AsyncTP's symmetric-memory copy and partial sum in
 * place of its first gather and last reduction chunk, so AsyncTP is no faster. A mode other
 * than te / async is an error naming the item. */
Test(accuracy, tp_overlap_async_hides_less_than_transformer_engine)
{
  const char *base = "tp=8@node,dp=4@net,sp,zero=1,recompute=full";
  g_autofree char *te = g_strdup_printf("%s,tp-overlap=te", base);
  g_autofree char *as = g_strdup_printf("%s,tp-overlap=async", base);
  double t0 = run_step("dgx-h100-4node", "llama3-8b", base, 32, 8);
  double tte = run_step("dgx-h100-4node", "llama3-8b", te, 32, 8);
  double tas = run_step("dgx-h100-4node", "llama3-8b", as, 32, 8);
  cr_expect_lt(tte, tas, "te %g s, async %g s", tte, tas);
  cr_expect_lt(tas, t0, "async %g s, none %g s", tas, t0);
  double nte = run_step("dgx-h100-4node", "llama3-8b", "tp=8@node,dp=4@net,sp,tp-overlap", 32, 8);
  double nas =
      run_step("dgx-h100-4node", "llama3-8b", "tp=8@node,dp=4@net,sp,tp-overlap=async", 32, 8);
  cr_expect_geq(nas, nte, "no recomputation: async %g s, te %g s", nas, nte);
  GError *e = NULL;
  ts_split *bad = ts_split_parse("tp=8,tp-overlap=nccl", &e);
  cr_assert_null(bad);
  cr_assert_not_null(e);
  cr_expect_not_null(strstr(e->message, "tp-overlap=nccl"), "%s", e->message);
  cr_expect_not_null(strstr(e->message, "tp-overlap=async"), "%s", e->message);
  g_error_free(e);
}

/* TorchTitan's long-sequence rows (llama3_h100_cp_steps.csv, Tables 2 and 6): trainsim was
 * 16.3% slow in the mean (16.9% before the DGX H100 node's published NCCL rates); 16.2% since
 * tp-overlap chunks the backward's output-gradient gather too (the 405B rows); 14.5% with the cp
 * fixes. With the fused core's causal skip and its own rate on the H100 profiles
 * (flash_efficiency 0.41 fitted with compute_efficiency 0.51 on the 32K row, "(fit)", and
 * llama3_h100_steps.csv's fit row): 11.6% mean over the 8 rows, the seven held out -21.7% to
 * +7.8% (the cp rows now too fast). With the cp rows as PyTorch's ring (cp-ring=torch: K/V
 * repeated to the query heads, one all-gather hidden by the first block only, fp32 merges and
 * gradient sums): 10.1% mean, 20.5% worst (the 405B rows 11.1% -> 8.3%). With the gradients'
 * FP8 GEMMs without fast accumulation and the refit it brings (flash_efficiency 0.41 -> 0.43:
 * the fit row's backward GEMMs slower, its attention core faster): 11.2% / 22.9% (the held-out
 * rows, too fast already, faster still). 10.8% / 22.9% with NCCL's 16 SMs charged beside
 * cross-node collectives (collective_sms). 8.0% / 20.2% with the compiled ring waiting for
 * each of its collectives (cp-ring=torch under kernels=fused: the 405B rows -10.9/-6.4/-13.5%
 * -> -4.1/+7.0/+0.4%). 8.1% / 17.7% once fsdp2 sums the input gradients of TorchTitan's separate
 * projections (wq, wk, wv; w1, w3): the 405B rows -7.7 / -5.1 / +7.2 / +1.4% -> -6.4 / -3.8 / +8.1
 * / +1.9%, the 8B rows within 0.3 points. 7.5% / 17.7% once the four 405B rows say the AsyncTP
 * Table 6 ran (tp-overlap=async, as Table 5's rows in llama3_h100_steps.csv; they said
 * tp-overlap, Transformer Engine's chunking): -6.5 / -3.9 / +8.0 / +1.9% -> -2.6 / -2.3 / +8.8 /
 * +2.0%. Pinned so it cannot get worse silently; the worst row too. */
#define TORCHTITAN_CP_MEAN_MAX 7.7
#define TORCHTITAN_CP_WORST_MAX 18.0

Test(accuracy, shipped_torchtitan_h100_long_sequences)
{
  double mean, worst;
  file_errors("torchtitan", "llama3_h100_cp_steps.csv", 8, &mean, &worst);
  cr_expect(mean < TORCHTITAN_CP_MEAN_MAX, "mean |error| %.2f%%", mean);
  cr_expect(worst < TORCHTITAN_CP_WORST_MAX, "worst |error| %.2f%%", worst);
}

/* search ranks only splits whose memory/chip plus the runtime reserve fits: with a 10 GiB
 * reserve on the 80 GiB A100, no ranked split holds more than 70 GiB, and the JSON states the
 * reserve. */
Test(memory, search_respects_the_reserve)
{
  g_autofree char *src = g_build_filename(TS_SOURCE_DIR, "topologies", "dgx-a100-4node.ini", NULL);
  g_autofree char *txt = NULL;
  cr_assert(g_file_get_contents(src, &txt, NULL, NULL));
  char *chip = strstr(txt, "[chip]\n");
  cr_assert_not_null(chip);
  g_autofree char *head = g_strndup(txt, (gsize)(chip - txt) + 7);
  g_autofree char *with = g_strdup_printf("%smemory_reserve_GiB = 10\n%s", head, chip + 7);
  g_autofree char *dir = NULL;
  g_autofree char *topo = write_tmp(&dir, "a100-reserve.ini", with);
  g_autofree char *args = g_strdup_printf("search -t %s -m gpt3-6.7b -b 64 --format json", topo);
  run_result r = run(args);
  cr_assert_eq(r.status, 0, "%s", r.err);
  g_autoptr(JsonParser) jp = json_parser_new();
  cr_assert(json_parser_load_from_data(jp, r.out, -1, NULL));
  JsonObject *root = json_node_get_object(json_parser_get_root(jp));
  double gib = 1073741824.0;
  double cap = json_object_get_double_member(root, "memory_capacity_bytes");
  double reserve = json_object_get_double_member(root, "memory_reserve_bytes");
  cr_assert_float_eq(reserve, 10 * gib, 1);
  JsonArray *ranked = json_object_get_array_member(root, "ranked");
  cr_assert(json_array_get_length(ranked) > 0, "something fits in 70 GiB");
  for (guint i = 0; i < json_array_get_length(ranked); i++) {
    JsonObject *o = json_array_get_object_element(ranked, i);
    double m = json_object_get_double_member(o, "memory_per_chip_bytes");
    cr_assert(m + reserve <= cap, "%s: %g GiB + 10 GiB reserve > %g GiB",
              json_object_get_string_member(o, "split"), m / gib, cap / gib);
  }
  run_free(&r);
  rm_tree(dir);
}

/* The shipped torchgpipe rows give tests/test_published.c's numbers (activations and buffers
 * summed over the devices: 0.628, 0.802, 1.222 and 1.948 GiB) plus the caching allocator's
 * overhead on them (the P40 is a GPU: x (1 + TS_GPU_ALLOCATOR_OVERHEAD)) and on the fp32
 * gradients, which autograd allocates amid the first backward (4 bytes x the model's 319.0M,
 * 542.7M, 1055.8M and 1844.9M parameters, `trainsim model`; the parameters and RMSprop's state,
 * which the benchmark subtracts too, add none) plus torchgpipe's copy-stream pools
 * (ts_plan.c, copy_stream_pools: 32 streams per device, 20 MiB segments; with pp = 2, 1920 MiB:
 * device 0 one segment per stream for a micro-batch's two 3.25 MiB gradients, device 1 two for
 * its four micro-batches' two inputs), which hold the received stage inputs and take no
 * overhead on top, within 1%. */
Test(accuracy, shipped_torchgpipe_activation_sums)
{
  g_autofree char *path =
      g_build_filename(TS_SOURCE_DIR, "data", "published", "torchgpipe", "memory.csv", NULL);
  GError *e = NULL;
  g_autoptr(ts_meas_file) f = ts_meas_load(path, &e);
  cr_assert_not_null(f, "%s", e ? e->message : "");
  cr_assert_eq(f->metric, TS_MEAS_ACTIVATION_SUM);
  g_autoptr(ts_accuracy) a = ts_accuracy_run(f, 1, NULL, &e);
  cr_assert_not_null(a, "%s", e ? e->message : "");
  const double want_gib[] = {0.628, 0.802, 1.222, 1.948};
  const double pools_mib[] = {0, 1920, 4480, 7680};
  const double params[] = {319024120, 542734840, 1055832376, 1844858344};
  cr_assert_eq(f->nrows, 4);
  for (int i = 0; i < 4; i++) {
    double got = a->predicted[i] / 1073741824.0;
    double want = want_gib[i] * (1.0 + TS_GPU_ALLOCATOR_OVERHEAD) + pools_mib[i] / 1024.0 +
                  TS_GPU_ALLOCATOR_OVERHEAD * 4.0 * params[i] / 1073741824.0;
    cr_expect(fabs(got / want - 1) < 0.01, "row %d: %.3f GiB, expected %.3f", i, got, want);
  }
}

/* The torchgpipe memory rows' mean |error|: 24.7% before torchgpipe's copy-stream pools
 * (ts_plan.c, copy_stream_pools), 16.5% with them (worst 20.7%, pipeline-1); 4.8% (worst 8.8%,
 * pipeline-2) since the gradients autograd allocates amid the first backward take the caching
 * allocator's overhead (pipeline-1 -20.7% -> -1.1%, pipeline-8 -10.6% -> -1.1%); pinned just
 * above. */
#define TORCHGPIPE_MEMORY_MEAN_MAX 5.0
#define TORCHGPIPE_MEMORY_WORST_MAX 9.0

Test(accuracy, shipped_torchgpipe_memory_rows)
{
  double mean, worst;
  file_errors("torchgpipe", "memory.csv", 4, &mean, &worst);
  cr_expect(mean < TORCHGPIPE_MEMORY_MEAN_MAX, "mean |error| %.2f%%", mean);
  cr_expect(worst < TORCHGPIPE_MEMORY_WORST_MAX, "worst |error| %.2f%%", worst);
}

/* torchgpipe's AmoebaNet-D (18, 256) speed rows (data/published/torchgpipe/amoebanet_speed.csv,
 * n = 2, 4, 8 P40s with 1, 4 and 32 micro-batches): the (fit) row is the one the P40's
 * compute_efficiency was fitted to and stays within 1%; the eight held-out rows measured 8.3%
 * mean |error| and 17.6% worst (n = 4, m = 4, too fast) when the file was added; 7.8% and
 * 18.2% (n = 4, m = 4, too fast) since batch norm costs its two passes and the P40 was refitted
 * (0.3167 -> 0.3335); 7.1% and 21.7% (n = 4, m = 4, too fast: it loses what the last
 * micro-batch's recomputation cost) since the m = 4 and 32 rows run torchgpipe's
 * checkpoint='except_last' (recompute=stage:except-last; the fit row, checkpoint='always', is
 * unchanged). Pinned just above. */
#define TORCHGPIPE_SPEED_MEAN_MAX 7.4
#define TORCHGPIPE_SPEED_WORST_MAX 22.0

Test(accuracy, shipped_torchgpipe_amoebanet_speed)
{
  g_autoptr(ts_meas_file) f = published_file("torchgpipe", "amoebanet_speed.csv", 9);
  g_autoptr(ts_accuracy) a = replayed(f, 2);
  double sum = 0, worst = 0;
  int held = 0;
  for (int i = 0; i < f->nrows; i++) {
    double err = 100 * fabs(a->predicted[i] / f->rows[i].measured - 1);
    if (strstr(f->rows[i].group, "(fit)") != NULL) {
      cr_expect(err < 1.0, "fit row, line %d: |error| %.2f%%", f->rows[i].line, err);
      continue;
    }
    sum += err, held++;
    worst = fmax(worst, err);
  }
  cr_assert_eq(held, 8);
  cr_expect(sum / held < TORCHGPIPE_SPEED_MEAN_MAX, "held-out mean |error| %.2f%%", sum / held);
  cr_expect(worst < TORCHGPIPE_SPEED_WORST_MAX, "held-out worst |error| %.2f%%", worst);
}

/* torchgpipe's ResNet-101 speed rows (resnet101_speed.csv: one P40 without GPipe, GPipe on 1-8
 * P40s), all held out: 10.5% mean |error|, every row too slow (42.1% before Winograd's fp32 3x3
 * convolutions and batch norm's two passes; the P40's efficiency is fitted on AmoebaNet-D's
 * cells; docs/accuracy.md); 7.5% since the GPipe rows run torchgpipe's default
 * checkpoint='except_last' (recompute=stage:except-last; pipeline-1's 2 micro-batches
 * +18.9% -> +3.9%). Pinned just above, and the sign with it. */
#define TORCHGPIPE_RESNET_MEAN_MAX 8.0

Test(accuracy, shipped_torchgpipe_resnet101_speed)
{
  g_autoptr(ts_meas_file) f = published_file("torchgpipe", "resnet101_speed.csv", 5);
  g_autoptr(ts_accuracy) a = replayed(f, 2);
  double sum = 0;
  for (int i = 0; i < f->nrows; i++) {
    double err = 100 * (a->predicted[i] / f->rows[i].measured - 1);
    cr_expect(err > 0, "line %d: %.2f%%, expected too slow", f->rows[i].line, err);
    sum += fabs(err);
  }
  cr_expect(sum / f->nrows < TORCHGPIPE_RESNET_MEAN_MAX, "mean |error| %.2f%%", sum / f->nrows);
}

/* --max-mean-error-pct: exit 1 when the file's mean |error| is larger, 0 otherwise (BERT-Large
 * dp=64 measured at twice its predicted step: error -50%). */
Test(accuracy, max_mean_error_gate)
{
  double p = run_step("tpu-v3-8x8", "bert-large", "dp=64", 512, 8);
  g_autofree char *csv = g_strdup_printf(HEAD "tpu-v3-8x8,bert-large,dp=64,512,8,%.17g\n", 2 * p);
  g_autofree char *dir = NULL;
  g_autofree char *path = write_tmp(&dir, "g.csv", csv);
  g_autofree char *strict = g_strdup_printf("validate --against %s --max-mean-error-pct 49", path);
  g_autofree char *loose = g_strdup_printf("validate --against %s --max-mean-error-pct 51", path);
  run_result a = run(strict), b = run(loose);
  cr_assert_eq(a.status, 1, "exit %d: %s", a.status, a.err);
  cr_assert(strstr(a.err, "mean |error| 50.00%") != NULL, "%s", a.err);
  cr_assert_eq(b.status, 0, "exit %d: %s", b.status, b.err);
  run_free(&a);
  run_free(&b);
  rm_tree(dir);
}

/* NVIDIA DeepLearningExamples' PyTorch BERT-Large on a DGX-1 V100 32G
 * (data/published/deeplearningexamples-bert, docs/accuracy.md "DeepLearningExamples BERT-Large
 * on V100"): the V100 profile's compute_efficiency (0.58) and compute_efficiency_fp32 (0.95)
 * are fitted by bench/fit_v100.sh on the 4 rows marked "fit"; the 4 held-out rows are 5.7%
 * mean |error|, 9.8% the worst (8-GPU FP32 SQuAD, too fast), the fitted rows 3.6% (10.0%,
 * 17.0% and 9.1% at 0.64 before the FP32 SQuAD rows ran BertAdam's per-tensor loop,
 * optimizer=bertadam, and pre-training's masked-LM head ran on its 19 masked tokens,
 * head_tokens; with the A100 fit borrowed before: 16.9% held out, 19.9% fitted). Pinned just
 * above. Session 14: the FP32 rows train in fp32 (precision=fp32 reads the fp16 model as fp32,
 * 4-byte activations in every memory-bound kernel, where they had been costed at 2): the fp32
 * fit stays at its ceiling (0.95), the FP32 rows 1-3 points slower (pre-training +10.7% / +7.1%,
 * SQuAD +5.4% / -5.9%): held out 5.4% mean, 10.7% worst; fitted 5.4%. */
#define V100_BERT_HELDOUT_MEAN_MAX 6.0
#define V100_BERT_HELDOUT_WORST_MAX 11.0
#define V100_BERT_FIT_MEAN_MAX 5.7

Test(accuracy, shipped_v100_bert_step_times, .timeout = 120)
{
  g_autoptr(ts_meas_file) f = published_file("deeplearningexamples-bert", "bert_v100.csv", 8);
  cr_assert_eq(f->metric, TS_MEAS_STEP_TIME);
  g_auto(GStrv) lines = published_lines("deeplearningexamples-bert", "bert_v100.csv");
  g_autoptr(ts_accuracy) a = replayed(f, 1);
  double held = 0, fit = 0, worst = 0;
  int nheld = 0, nfit = 0;
  for (int i = 0; i < f->nrows; i++) {
    const char *line = lines[f->rows[i].line - 1];
    gboolean is_held = strstr(line, ",held-out,") != NULL;
    cr_assert(is_held || strstr(line, ",fit,") != NULL, "line %d: no set: %s", f->rows[i].line,
              line);
    double err = 100 * fabs(a->predicted[i] / f->rows[i].measured - 1);
    if (is_held) {
      held += err, nheld++;
      worst = fmax(worst, err);
    } else {
      fit += err, nfit++;
    }
  }
  cr_assert(nheld == 4 && nfit == 4, "%d held-out and %d fitting rows, expected 4 and 4", nheld,
            nfit);
  cr_expect(held / nheld < V100_BERT_HELDOUT_MEAN_MAX, "held-out mean |error| %.2f%%",
            held / nheld);
  cr_expect(worst < V100_BERT_HELDOUT_WORST_MAX, "held-out worst |error| %.2f%%", worst);
  cr_expect(fit / nfit < V100_BERT_FIT_MEAN_MAX, "fitted mean |error| %.2f%%", fit / nfit);
}

/* MaxText's published TPU step times (data/published/maxtext, docs/accuracy.md "MaxText on
 * TPU"): one compute_efficiency per TPU generation fitted on the rows marked "fit" (the 1st,
 * 3rd, ... of each chip's rows, bench/fit_tpu.sh); the held-out rows' error is pinned just above
 * what the fitted profiles give (ICI links at the scaling book's rates, the tensor-parallel rows
 * as tp-overlap=xla, the remat_policy=minimal rows as recompute=dots, the rematerialised
 * forward without each block's last product, the save_dot_except_mlpwi / custom recipes as
 * recompute=dots:except-mlpwi, v5e's ICI at 0.82; refitted v4 0.72, v5e 0.78, v5p 0.72, v6e
 * 0.70): v4 4.4%, v5e 7.7%, v5p 7.4%, v6e 0.1% mean |error| held out, 6.2% over the 8 held-out
 * rows (12.4% the worst: the 512B and the 1024B on 2,048 chips, see docs/accuracy.md), 5.2%
 * over all 18 (5.7% with those rows as recompute=full; before the remat change: 7.2% held out,
 * 16.1% the worst, 6.2% over all). With the TPU attention kernel's causal block skipping
 * (Pallas blocks of 512) and the fit by least squares (bench/fit_tpu.sh; v4 0.71, v5e 0.75,
 * v5p 0.72, v6e 0.59): v4 3.9%, v5e 8.0%, v5p 6.7%, v6e 3.2% held out, 6.24% over the 8
 * (11.7% the worst, the 1024B on 2,048 chips), 4.75% over all 18. With the v6e recipes' own
 * attention blocks (split attn-block=: Llama 3.1 2,048 in every pass, Llama 2 70B 1,024
 * forward and 2,048 backward; v6e refitted 0.59 -> 0.60): v6e's held-out Llama 3.1 8B 3.2% ->
 * 0.5%, 5.91% over the 8 held out, 4.65% over all 18. With the Pallas backward's block matmuls
 * (7 where 4 were costed, 5 with the fused kernel: attn-bwd=; v5e 0.76, v5p 0.73, v6e 0.62):
 * v4 3.35%, v5e 7.93%, v5p 6.20%, v6e 0.25% held out, 5.53% over the 8 (10.6% the worst, the
 * 512B and the 1024B on 2,048 chips), 4.54% over all 18 (10.6% the worst). With the TPU
 * bidirectional rings' floor(N/2) hops and XLA's collective matmul starting on the own shard
 * (s14; fits unchanged): v4 3.3%, v5e 8.65% (32B +10.0%, 128B -7.3%), v5p 5.4%, v6e 0.3% held
 * out, 5.3% over the 8 (10.0% the worst, the v5e 32B; the 1024B on 4,096 chips +9.8%), 4.5%
 * over all 18. */
#define MAXTEXT_HELDOUT_MEAN_MAX 5.8
#define MAXTEXT_HELDOUT_WORST_MAX 10.5
#define MAXTEXT_ALL_MEAN_MAX 4.8
/* Every row, fitted ones included: 11.7% (the 1024B on 2,048 chips, held out; 15.1%, v6e Llama 2
 * 70B, before the causal blocks; 17.4% before dots:except-mlpwi). */
#define MAXTEXT_ALL_WORST_MAX 10.5
static const struct {
  const char *group;
  double heldout_mean_max;
} maxtext_chips[] = {{"TPU v4", 3.6}, {"TPU v5e", 9.0}, {"TPU v5p", 6.5}, {"TPU v6e", 0.6}};

Test(accuracy, shipped_maxtext_tpu_step_times, .timeout = 300)
{
  /* 18 single-slice rows (published.csv). */
  g_autoptr(ts_meas_file) f = published_file("maxtext", "maxtext-tpu.csv", 18);
  cr_assert_eq(f->metric, TS_MEAS_STEP_TIME);
  g_auto(GStrv) lines = published_lines("maxtext", "maxtext-tpu.csv");
  g_autoptr(ts_accuracy) a = replayed(f, 1);
  double all = 0, held = 0, worst = 0, all_worst = 0;
  int nheld = 0;
  for (size_t c = 0; c < G_N_ELEMENTS(maxtext_chips); c++) {
    double sum = 0;
    int n = 0, k = 0;
    for (int i = 0; i < f->nrows; i++) {
      if (strcmp(f->rows[i].group, maxtext_chips[c].group) != 0)
        continue;
      /* The set column follows the rule: every second row of a chip is held out. */
      gboolean is_held = k++ % 2 == 1;
      const char *line = lines[f->rows[i].line - 1];
      cr_assert(strstr(line, is_held ? ",held-out," : ",fit,") != NULL,
                "line %d: expected set %s: %s", f->rows[i].line, is_held ? "held-out" : "fit",
                line);
      double err = 100 * fabs(a->predicted[i] / f->rows[i].measured - 1);
      all += err;
      all_worst = fmax(all_worst, err);
      if (!is_held)
        continue;
      sum += err;
      n++;
      worst = fmax(worst, err);
    }
    cr_assert(n > 0, "%s: no held-out row", maxtext_chips[c].group);
    cr_expect(sum / n < maxtext_chips[c].heldout_mean_max, "%s: held-out mean |error| %.2f%%",
              maxtext_chips[c].group, sum / n);
    held += sum;
    nheld += n;
  }
  cr_expect(held / nheld < MAXTEXT_HELDOUT_MEAN_MAX, "held-out mean |error| %.2f%%", held / nheld);
  cr_expect(worst < MAXTEXT_HELDOUT_WORST_MAX, "worst held-out |error| %.2f%%", worst);
  cr_expect(all / f->nrows < MAXTEXT_ALL_MEAN_MAX, "mean |error| over all rows %.2f%%",
            all / f->nrows);
  cr_expect(all_worst < MAXTEXT_ALL_WORST_MAX, "worst |error| over all rows %.2f%%", all_worst);
}

/* The one measured TPU collective found (data/published/scaling-book: an all-gather profiled on
 * a 4-chip TPU v5e axis without wrap-around, "How to Scale Your Model"). With the book's link
 * rate, 4.5e10 B/s one way, trainsim's busbw was +19.7% (32 MiB, 680 us measured) and +35.3%
 * (128 KiB, ~8 us) above it. The v5e links now carry the achieved fraction that profile
 * measures (bandwidth_efficiency 0.82: 3 x 8.4 MB in 680 us), so the 32 MiB row is the fit
 * (-1.6%) and the 128 KiB row the only check (+22.1%: latency-bound, 3 hops of 1 us; the ~2 us
 * left has no published source). Pinned in a band so that a change to the TPU links, hop
 * latency or the mesh all-gather shows here, whichever way it goes. Since s14 the all-gather
 * over the open 4-chip line runs each shard to both ends, one hop a step (before: a ring whose
 * closing transfer crossed the 3 links back, 3 hops of latency every step): 32 MiB -0.7%
 * (685 us), 128 KiB +41.2% (5.66 us against ~8: the book's own estimate, 3 us, is further
 * off; what costs the other ~2.3 us on the chip is not published). */
Test(accuracy, shipped_scaling_book_tpu_allgather)
{
  g_autoptr(ts_meas_file) f = published_file("scaling-book", "collective.csv", 2);
  cr_assert_eq(f->metric, TS_MEAS_BUSBW);
  g_autoptr(ts_accuracy) a = replayed(f, 1);
  const double want[2] = {-0.7, 41.2};
  for (int i = 0; i < f->nrows; i++) {
    double err = 100 * (a->predicted[i] / f->rows[i].measured - 1);
    cr_expect(fabs(err - want[i]) < 2.0, "line %d: error %+.2f%%, recorded %+.1f%%",
              f->rows[i].line, err, want[i]);
  }
}

/* Echo's nccl-tests all-reduce on Azure ND A100 v4 (data/published/echo-nccl/nccl-allreduce.csv,
 * written by bench/echo_nccl_csv.sh) replays through `validate`, and its busbw errors on the
 * issue's target range (1 MiB-1 GiB) stay at what this branch measured (docs/accuracy.md):
 * one node median 1.9%, worst 11.6% (4 GPUs at 1 MiB; was 2.5% / 17.3% at nccl-tests' knee,
 * 16 MiB on 8 GPUs, before LL128 against Simple was chosen by NCCL's own model); 2-16 nodes
 * median 3.6%, worst 12.6% (2 nodes, 8 MiB; was 3.7% / 10.7%). Targets: median 3%, worst 15%. */
/* With LL's cost per channel (nccl_ll_channel_latency_us) and both dimensions refitted: one node
 * median 1.7%, worst 7.9% (2 GPUs, 8 MiB); 2-16 nodes median 3.5%, worst 11.5%. */
/* With the node's Simple hop across nodes fitted on the network (nccl_node_hop_latency_us):
 * 2-16 nodes median 3.8%, worst 14.0% (4 nodes, 4 MiB). */
/* With Simple's 128 KiB pieces in one node (nccl_channels, s11) and both dimensions refitted: one
 * node median 1.7%, worst 6.8% (2 GPUs, 2 MiB); 2-16 nodes median 3.7%, worst 13.3%. */
#define ECHO_NODE_MEDIAN_MAX 2.0
#define ECHO_NODE_WORST_MAX 7.5
/* With the Simple tree's cost per chunk (nccl_tree_chunk_latency_us, s11) and the network
 * refitted: 2-16 nodes median 3.4%, worst 13.3% (16 nodes, 32 MiB). */
/* With the network fitted inside NCCL's tuning constants (s12): 2-16 nodes median 3.2%, worst
 * 11.3% (2 nodes, 16 MiB). */
/* With LL128's tree cap following NCCL's per-channel caps (0.9375 of Simple's on 3+ nodes,
 * 20/17.8 of it on 2; s12 nccl2) and the network refitted: 2-16 nodes median 3.1%, worst 11.6%
 * (4 nodes, 4 MiB). */
/* With LL's cost per channel on the network's hops (s13 nccl) and the network refitted: 2-16
 * nodes median 3.05%, worst 10.8% (4 nodes, 4 MiB); per channel beyond the first 3.07%, 11.1%. */
#define ECHO_NET_MEDIAN_MAX 3.2
#define ECHO_NET_WORST_MAX 11.5

/* Below 1 MiB (steady state: without the sweeps' first size across nodes, a group of its own,
 * "first size (start-up)"): one node (51 rows) median 2.4%; 2-16 nodes (36 rows) median 12.6%
 * before LL's channel cost on the network's hops (s13 nccl), 9.2% with it, 8.0% with it per
 * channel beyond the first. */
#define ECHO_NODE_SMALL_MEDIAN_MAX 2.6
#define ECHO_NET_SMALL_MEDIAN_MAX 8.5

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

Test(accuracy, shipped_echo_nccl_allreduce, .timeout = 300)
{
  g_autoptr(ts_meas_file) f = published_file("echo-nccl", "nccl-allreduce.csv", 178);
  g_autoptr(ts_accuracy) a = replayed(f, 1);
  double err[2][64], small[2][64];
  int n[2] = {0, 0}, ns[2] = {0, 0}, nfirst = 0;
  for (int i = 0; i < f->nrows; i++) {
    const ts_meas_row *r = &f->rows[i];
    int multi = strstr(r->group, " nodes ") != NULL;
    if (strstr(r->group, "first size (start-up)") != NULL) {
      /* the first size of a sweep across nodes: 1 KiB, no accuracy statistic (a start-up cost) */
      cr_assert(multi && r->size_bytes == 1024, "line %d: first size %g B", r->line, r->size_bytes);
      nfirst++;
      continue;
    }
    double e = 100 * fabs(a->predicted[i] / r->measured - 1);
    if (r->size_bytes < 1048576) {
      cr_assert(ns[multi] < 64 && strstr(r->group, "< 1 MiB") != NULL);
      small[multi][ns[multi]++] = e;
    }
    if (r->size_bytes < 1048576 || r->size_bytes > 1073741824)
      continue;
    cr_assert(n[multi] < 64);
    err[multi][n[multi]++] = e;
  }
  cr_assert_eq(n[0], 33);
  cr_assert_eq(n[1], 44);
  cr_assert_eq(nfirst, 4);
  cr_assert_eq(ns[0], 51);
  cr_assert_eq(ns[1], 36);
  const double small_max[2] = {ECHO_NODE_SMALL_MEDIAN_MAX, ECHO_NET_SMALL_MEDIAN_MAX};
  for (int m = 0; m < 2; m++) {
    qsort(small[m], (size_t)ns[m], sizeof(double), cmp_double);
    double med =
        ns[m] % 2 ? small[m][ns[m] / 2] : 0.5 * (small[m][ns[m] / 2 - 1] + small[m][ns[m] / 2]);
    cr_expect(med <= small_max[m], "%s below 1 MiB: median |error| %.2f%% > %g%%",
              m ? "2-16 nodes" : "one node", med, small_max[m]);
  }
  const double med_max[2] = {ECHO_NODE_MEDIAN_MAX, ECHO_NET_MEDIAN_MAX};
  const double worst_max[2] = {ECHO_NODE_WORST_MAX, ECHO_NET_WORST_MAX};
  for (int m = 0; m < 2; m++) {
    qsort(err[m], (size_t)n[m], sizeof(double), cmp_double);
    double med = n[m] % 2 ? err[m][n[m] / 2] : 0.5 * (err[m][n[m] / 2 - 1] + err[m][n[m] / 2]);
    cr_expect(med <= med_max[m], "%s: median |error| %.2f%% > %g%%", m ? "2-16 nodes" : "one node",
              med, med_max[m]);
    cr_expect(err[m][n[m] - 1] <= worst_max[m], "%s: worst |error| %.2f%% > %g%%",
              m ? "2-16 nodes" : "one node", err[m][n[m] - 1], worst_max[m]);
  }
}

/* Megatron-LM's published A100 runs (data/published/megatron, docs/accuracy.md "Megatron-LM on
 * A100"), held out of every fit. Narayanan et al. 2021's Table 1 gives teraFLOP/s per GPU; the
 * file's step times must be its equation 3 divided by that rate (closed form, to the 6 digits
 * written), and the batch and GPUs must be the table's. */
Test(accuracy, megatron_table1_step_times_are_the_published_rates)
{
  /* Table 1: 10 models. */
  g_autoptr(ts_meas_file) f = published_file("megatron", "narayanan2021-table1.csv", 10);
  cr_assert_eq(f->metric, TS_MEAS_STEP_TIME);
  g_auto(GStrv) lines = published_lines("megatron", "narayanan2021-table1.csv");
  /* Table 1: GPUs, batch, achieved teraFLOP/s per GPU. */
  static const double table[10][3] = {{32, 512, 137},    {64, 512, 138},    {128, 512, 142},
                                      {256, 1024, 135},  {512, 1536, 138},  {1024, 1792, 140},
                                      {1536, 2304, 148}, {1920, 2160, 155}, {2520, 2520, 163},
                                      {3072, 3072, 163}};
  for (int i = 0; i < f->nrows; i++) {
    /* After the quoted split: global_batch, micro_batch, bucket_MiB, step_time_s,
     * published_tflops_per_gpu, gpus, layers, hidden. */
    const char *tail = strrchr(lines[f->rows[i].line - 1], '"');
    cr_assert_not_null(tail);
    g_auto(GStrv) c = g_strsplit(tail + 1, ",", -1);
    cr_assert_eq(g_strv_length(c), 9, "line %d", f->rows[i].line);
    double B = g_ascii_strtod(c[1], NULL), X = g_ascii_strtod(c[5], NULL),
           n = g_ascii_strtod(c[6], NULL), l = g_ascii_strtod(c[7], NULL),
           h = g_ascii_strtod(c[8], NULL), s = 2048, V = 51200;
    cr_assert_eq(n, table[i][0], "line %d: GPUs", f->rows[i].line);
    cr_assert_eq(B, table[i][1], "line %d: batch", f->rows[i].line);
    cr_assert_eq(X, table[i][2], "line %d: teraFLOP/s", f->rows[i].line);
    cr_assert_eq((double)f->rows[i].global_batch, B);
    double F = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    double t = F / (X * 1e12 * n);
    cr_assert_float_eq(f->rows[i].measured, t, t * 1e-5, "line %d: %.6g s, equation 3 gives %.6g",
                       f->rows[i].line, f->rows[i].measured, t);
  }
}

/* The A100 profile on Megatron-LM's published runs, none of them fitted: Narayanan et al.
 * 2021 Table 1 (10 models, 32-3,072 GPUs) and Korthikanti et al. 2022 Table 4 (4 models, full
 * vs selective recomputation; Calculon reports 3.65% mean on these 8). The means and the worst
 * row are pinned just above what this branch measured (docs/accuracy.md): with the pipelines'
 * blocking sends (p2p=blocking, December 2026) Table 1 6.0% mean, 13.4% worst; Korthikanti 1.7%
 * mean, 3.4% worst. Table 1's rows state tp-grad=serial (the input gradient's all-reduce after
 * the weight gradient, as the Megatron-LM of 2021 ran it, before its asynchronous all-reduce):
 * 3.1% mean, 9.3% worst. With dp-engine=autograd (the fp16 gradients added by autograd each
 * micro-batch after the first, as Megatron-LM did before February 2022): 2.4% mean, 7.4% worst
 * (76B). */
#define MEGATRON_TABLE1_MEAN_MAX 2.6
#define MEGATRON_TABLE1_WORST_MAX 7.8
#define MEGATRON_KORTHIKANTI_MEAN_MAX 2.0
#define MEGATRON_KORTHIKANTI_WORST_MAX 3.7

Test(accuracy, shipped_megatron_a100_step_times, .timeout = 300)
{
  double mean, worst;
  file_errors("megatron", "narayanan2021-table1.csv", 10, &mean, &worst);
  cr_expect(mean < MEGATRON_TABLE1_MEAN_MAX, "Table 1: mean |error| %.2f%%", mean);
  cr_expect(worst < MEGATRON_TABLE1_WORST_MAX, "Table 1: worst |error| %.2f%%", worst);
  file_errors("megatron", "korthikanti2022-table4.csv", 8, &mean, &worst);
  cr_expect(mean < MEGATRON_KORTHIKANTI_MEAN_MAX, "Korthikanti: mean |error| %.2f%%", mean);
  cr_expect(worst < MEGATRON_KORTHIKANTI_WORST_MAX, "Korthikanti: worst |error| %.2f%%", worst);
}
