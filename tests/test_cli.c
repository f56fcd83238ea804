/* Tests of the trainsim program as a user runs it: exit statuses, one-line errors, no partial
 * output, byte-identical results. */
#include "ts_cmd.h"
#include "ts_util.h"

#include "ts_test.h"
#include <criterion/criterion.h>
#include <json-glib/json-glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* results[0].step_time_s of a run or replay JSON document. */
static double json_step(const char *text)
{
  g_autoptr(JsonParser) p = json_parser_new();
  cr_assert(json_parser_load_from_data(p, text, -1, NULL), "not JSON: %s", text);
  JsonObject *root = json_node_get_object(json_parser_get_root(p));
  JsonArray *res = json_object_get_array_member(root, "results");
  return json_object_get_double_member(json_array_get_object_element(res, 0), "step_time_s");
}

static void expect_input_error(const char *args, const char *needle)
{
  run_result r = run(args);
  cr_assert_eq(r.status, 2, "`%s` exited %d, expected 2; stderr: %s", args, r.status, r.err);
  cr_assert(strstr(r.err, needle) != NULL, "`%s`: stderr '%s' lacks '%s'", args, r.err, needle);
  /* One line, no backtrace. */
  const char *nl = strchr(r.err, '\n');
  cr_assert(nl != NULL && nl[1] == '\0', "`%s`: expected one line, got '%s'", args, r.err);
  cr_assert_str_eq(r.out, "", "nothing on stdout on error");
  run_free(&r);
}

#define RUN "run -t tpu-v3-8x8 -m bert-large "

Test(cli, bad_inputs_exit_2_with_one_line)
{
  expect_input_error("", "missing command");
  expect_input_error("frobnicate", "unknown command 'frobnicate'");
  expect_input_error("run --nonsense", "Unknown option --nonsense");
  expect_input_error("run -t tpu-v3-8x8 -m bert-large", "missing --global-batch");
  expect_input_error("run -t no-such-topology -m bert-large -b 64",
                     "no-such-topology: no such file");
  /* A path is not a shipped name: it said "and no models//nonexistent/model.ini.ini shipped". */
  expect_input_error(
      "run -t tpu-v3-8x8 -m /nonexistent/model.ini -b 64",
      "/nonexistent/model.ini: no such file; expected a model file (models/NAME.ini)");
  expect_input_error("run -t none.ini -m bert-large -b 64",
                     "none.ini: no such file, and no topologies/none.ini shipped;");
  expect_input_error(RUN "-b 64 -s dp=63", "uses 63 chips");
  expect_input_error(RUN "-b 64 -s dp=64@q", "no dimension 'q'");
  expect_input_error(RUN "-b 100 -s dp=64", "--global-batch 100");
  expect_input_error(RUN "-b -5", "--global-batch -5");
  expect_input_error(RUN "-b 64 --format xml", "--format 'xml'");
  expect_input_error(RUN "-b 64 --backend fast", "--backend 'fast'");
  expect_input_error(RUN "-b 64 --collective-algorithm spiral", "'spiral'");
  /* A word left over: what to do, and for a split without its -s, where it goes. */
  expect_input_error(RUN "-b 64 dp=64", "unexpected argument 'dp=64'; expected options only: a "
                                        "split goes after -s (-s dp=64)");
  expect_input_error("model -m bert-large extra",
                     "unexpected argument 'extra'; expected options only (see `trainsim model");
  expect_input_error("collective -t tpu-v3-8x8 extra", "unexpected argument 'extra'; expected");
  /* A batch beyond the trace's ranges named only "program 0 op 2: sizes out of range". */
  expect_input_error("run -t dgx-h100-4node -m llama3-8b -b 1000000000 -s dp=32",
                     "global batch 1000000000, micro-batch 31250000: beyond the sizes trainsim "
                     "costs (");
  /* A protocol the algorithm does not have was dropped without a word ("protocol none"). */
  expect_input_error("collective -t dgx-h100-4node --bytes 1GiB --protocol LL "
                     "--collective-algorithm ring",
                     "--protocol LL: the ring algorithm has no NCCL protocol; expected");
  expect_input_error("collective -t tpu-v3-8x8 --bytes 1GiB --protocol LL128",
                     "--protocol LL128: the torus algorithm has no NCCL protocol");
  /* ep larger than dp said "ep=8 experts groups inside dp=4", not a sentence. */
  expect_input_error("run -t dgx-h100-4node -m mixtral-8x7b -b 64 -s tp=8@node,dp=4,ep=8",
                     "ep=8 spreads the experts over ranks of the data-parallel group, which has "
                     "4; expected an ep that divides dp");
  /* NVLS over a dimension that cannot reduce in the switch named it "piece 0 (dimension 1)". */
  expect_input_error("collective -t dgx-h100-4node --bytes 1GiB --collective-algorithm nvls",
                     "nvls: dimension 'net' of ");
  expect_input_error("collective -t dgx-h100-4node --bytes 1GiB --collective-algorithm nvls",
                     "expected --dims node ");
  expect_input_error("run -t dgx-h100-4node -m llama3-8b -b 32 -s tp=8@node,dp=4@net "
                     "--collective-algorithm nvls",
                     "which does not reduce in the switch");
  expect_input_error(RUN "-b 64 --micro-batch 3 -s dp=64", "--micro-batch 3");
  /* "nan" was taken for "not given" (the 25 s default sweep ran), and --against fitted for
   * seconds before finding its -o folder missing. */
  expect_input_error("calibrate --min-time nan -o /tmp/x.ini",
                     "--min-time 'nan': expected seconds per kernel in [0, 60]");
  expect_input_error("calibrate --against data/published/vtrain/trainsim/a100-sample.csv -o "
                     "/nonexistent/a100.ini",
                     "--output /nonexistent/a100.ini: folder '/nonexistent' does not exist");
  expect_input_error("validate -m validate-mlp -s dp=2 --tolerance inf",
                     "--tolerance inf: expected a normwise relative error in [0, 1]");
  expect_input_error("collective -t tpu-v3-8x8 --bytes 12x", "--bytes '12x'");
  expect_input_error("collective -t tpu-v3-8x8 --bytes 0", "--bytes '0'");
  expect_input_error("collective -t tpu-v3-8x8 --bytes 1e40", "--bytes '1e40'");
  expect_input_error("collective -t tpu-v3-8x8 --dims x,q", "'q' is not a dimension");
  expect_input_error("collective -t tpu-v3-8x8 --dims ''",
                     "--dims '': expected one or more dimension names of");
  /* GLib-CRITICAL warnings (g_str_has_prefix on NULL) came before the error: three lines. */
  expect_input_error("run -t tpu-v2-8 -m mlp -b 16 -s dp=4 --straggler ''",
                     "trainsim run: --straggler : expected chip:ID=F (a slow chip) or dim.NAME=F");
  expect_input_error("sweep -t tpu-v2-8 -m mlp -b 16 -s dp=4 -j 1 --recompute ''",
                     "--recompute '': expected none, selective, full");
  /* Two empty items read "--model '': given twice". */
  expect_input_error("sweep -t tpu-v2-8 -m , -b 16 -s dp=4 -j 1",
                     "--model: an empty item in a comma-separated list; expected values");
  expect_input_error("replay '' -t tpu-v2-8",
                     "trainsim replay: '': cannot read: No such file or directory\n");
  expect_input_error("check ''", "trainsim check: '': cannot read:");
  /* --batch-per-chip '' said "missing --global-batch". */
  expect_input_error("sweep -t tpu-v2-8 -m mlp --batch-per-chip '' -s dp=4 -j 1",
                     "--batch-per-chip : expected a positive whole number of samples");
  /* --micro-batch '' searched as if not given. */
  expect_input_error("search -t tpu-v2-8 -m mlp -b 16 -j 1 --micro-batch ''",
                     "--micro-batch: an empty item in a comma-separated list");
  expect_input_error("sweep -t tpu-v2-8,,tpu-v2-8 -m mlp -b 16 -s dp=4 -j 1",
                     "--topology: an empty item in a comma-separated list");
  /* SimGrid read nan as a number and the run printed a step time; a crashing --cfg printed
   * SimGrid's "Segmentation fault." above the one line. */
  expect_input_error("run -t tpu-v2-8 -m mlp -b 16 -s dp=4 --backend simgrid --cfg "
                     "network/latency-factor:nan",
                     "--cfg 'network/latency-factor:nan': expected a finite number");
  expect_input_error("run -t tpu-v2-8 -m mlp -b 16 -s dp=4 --backend simgrid --cfg "
                     "contexts/stack-size:-1",
                     "--cfg contexts/stack-size:-1: SimGrid cannot run with these settings");
  /* -o '': "Failed to rename file “.6O2QZ3” to “”: g_rename() failed" (files), "cannot create
   * or write: Invalid argument" (folders). */
  expect_input_error("trace -t tpu-v2-8 -m mlp -b 16 -s dp=4 -o ''",
                     "trainsim trace: '': expected a file name (or - for stdout)");
  expect_input_error("run -t tpu-v2-8 -m mlp -b 16 -s dp=4 -o ''",
                     "trainsim run: --output-dir '': expected a folder name");
  expect_input_error("calibrate --against data/published/vtrain/trainsim/a100-sample.csv -o ''",
                     "trainsim calibrate: --output '': expected a file name");
  expect_input_error("collective -t tpu-v3-8x8 --op gather", "--op 'gather'");
  expect_input_error("collective -t tpu-v3-8x8 --bytes-range 1G:1M", "--bytes-range '1G:1M'");
  expect_input_error("collective -t dgx-a100-4node --protocol LL64", "--protocol 'LL64'");
  expect_input_error("collective -t dgx-a100-4node --protocol LL --backend simgrid",
                     "expected the analytic backend");
  expect_input_error("collective -t dgx-a100-4node --collective-algorithm nvls",
                     "in_switch_reduction = true");
  expect_input_error("replay /nonexistent.trace -t tpu-v3-8x8", "/nonexistent.trace: cannot read");
  /* A pair_links mesh only cuts: chips past its file's would have no links (all on PCIe). */
  /* The message named --vary-options, which was not given. */
  expect_input_error("sweep -t tpu-v2-8 -m mlp -b 16 -s dp=4 -j 1 --max-configs 5",
                     "trainsim sweep: --max-configs: expected --splits auto\n");
  expect_input_error("sweep -t dgx1-v100 -m mlp -b 16 -s dp=2 -j 1 --vary dim.node.size=2,32",
                     "--vary dim.node.size on ");
  expect_input_error(
      "sweep -t dgx1-v100 -m mlp -b 16 -s dp=2 -j 1 --vary dims=2,9",
      "[dim.node] size 9: pair_links names the links of 8 chips; expected at most 8");
  /* A kernel's rate: 0 is no rate (the file's "missing"), and no split running it is a no-op. */
  expect_input_error("sweep -t dgx-a100-1node -m gpt3-350m -b 8 -s dp=8,attn-kernel=triton -j 1 "
                     "--vary flash_efficiency_triton=0,0.3",
                     "value '0': expected a fraction in [0.001, 1]");
  expect_input_error("sweep -t dgx-a100-1node -m gpt3-350m -b 8 -s dp=8 -j 1 "
                     "--vary flash_efficiency_fa1=0.3,0.4",
                     "no --split asks for attn-kernel=fa1");
  /* attn-kernel on a model without attention changed nothing (ResNet-50: 31.6 ms either way). */
  expect_input_error("run -t dgx-a100-4node -m resnet50 -b 256 -s dp=32,attn-kernel=triton",
                     "resnet50.ini has no attention layer; expected a model with attention");
  /* GPU software stacks on a TPU: accepted before and costed as if they ran there. */
  expect_input_error(RUN "-b 256 -s dp=64,attn-kernel=cudnn",
                     "attn-kernel=cudnn runs on GPUs; expected a GPU chip");
  expect_input_error("run -t tpu-v3-8x8 -m gpt3-1.3b -b 64 -s tp=2,dp=4,pp=8,pipe-engine=deepspeed",
                     "pipe-engine=deepspeed runs on GPUs; expected a GPU chip");
  /* PyTorch AsyncTP on a TPU: 745.7 ms, costed as if it ran there (XLA's collective matmul
   * 746.4 ms). */
  expect_input_error("run -t tpu-v3-8x8 -m gpt3-350m -b 256 -s tp=8,dp=8,tp-overlap=async",
                     "tp-overlap=async runs on GPUs; expected a GPU chip");
  /* PyTorch and Megatron options on a TPU were costed as if XLA ran them: kernels=eager 738.5
   * ms against 730.9 fused, loss=eager 747.4 ms and 14.31 GB against 13.48 GB, load=sync and
   * tp-grad=serial the same step (gpt3-350m tp=2,dp=32 on tpu-v3-8x8, batch 256). */
  static const char *const gpu_only[] = {"kernels=eager",       "kernels=eager-fused-rmsnorm",
                                         "loss=eager",          "buckets=copy",
                                         "tp-grad=serial",      "load=sync",
                                         "projections=separate"};
  for (size_t i = 0; i < G_N_ELEMENTS(gpu_only); i++) {
    g_autofree char *args =
        g_strdup_printf("run -t tpu-v3-8x8 -m gpt3-350m -b 256 -s tp=2,dp=32,%s", gpu_only[i]);
    g_autofree char *want = g_strdup_printf(
        "trainsim run: --split 'tp=2,dp=32,%s': %s runs on GPUs; expected a GPU chip (TPU v3 is "
        "a systolic array programmed through XLA)\n",
        gpu_only[i], gpu_only[i]);
    expect_input_error(args, want);
  }
  expect_input_error("run -t tpu-v3-8x8 -m gpt3-350m -b 256 -s dp=64,zero=3,fsdp2",
                     "fsdp2 runs on GPUs; expected a GPU chip");
  expect_input_error("run -t tpu-v3-8x8 -m gpt3-350m -b 256 -s dp=64,recompute=full,early-stop",
                     "early-stop runs on GPUs; expected a GPU chip");
  /* Options asking for what is not there were silent no-ops (the same step and memory). */
  expect_input_error("run -t dgx-a100-1node -m gpt3-350m -b 64 --micro-batch 1 -s dp=8,fp8-cache",
                     "trainsim run: --split 'dp=8,fp8-cache': fp8-cache keeps FP8 weight copies "
                     "across micro-batches, but the GEMMs run in bf16; expected precision=fp8 "
                     "with it (or no fp8-cache)\n");
  /* fsdp2's implied TorchTitan behaviours stated per run: bad values, torchao's float8
   * all-gather without FSDP2's Float8 weights, separate projections without any. */
  expect_input_error("run -t dgx-h100-4node -m llama3-8b -b 64 -s dp=32,fp8-gather=maybe",
                     "item 'fp8-gather=maybe': expected fp8-gather, fp8-gather=on or "
                     "fp8-gather=off");
  expect_input_error("run -t dgx-h100-4node -m llama3-8b -b 64 -s dp=32,projections=split",
                     "item 'projections=split': expected projections=fused");
  expect_input_error("run -t dgx-h100-4node -m llama3-8b -b 64 -s dp=32,zero=3,fsdp2,fp8-gather",
                     "fp8-gather all-gathers FSDP2's Float8 weight shards in float8 (torchao's "
                     "enable_fsdp_float8_all_gather); expected fsdp2 and precision=fp8 with it");
  expect_input_error("run -t dgx-a100-4node -m resnet50 -b 256 -s dp=32,projections=separate",
                     "resnet50.ini has neither; expected a model with attention or a gated MLP");
  expect_input_error("run -t dgx-a100-1node -m gpt3-350m -b 8 -s dp=8,ps-placement=dedicated",
                     "trainsim run: --split 'dp=8,ps-placement=dedicated': ps-placement=dedicated "
                     "places parameter servers; expected ps=N with it (or no ps-placement)\n");
}

/* Framework options a dataset row names whatever the degrees are accepted where they change
 * nothing, and run says so: tp-grad=serial at tp = 1 was a silent no-op (the same 160 ms). */
Test(cli, noop_framework_option_gets_a_note)
{
  run_result a = run("run -t dgx-a100-1node -m gpt3-350m -b 8 -s dp=8,tp-grad=serial,p2p=blocking "
                     "-f csv");
  run_result b = run("run -t dgx-a100-1node -m gpt3-350m -b 8 -s dp=8 -f csv");
  cr_assert_eq(a.status, 0, "%s", a.err);
  cr_assert_eq(b.status, 0, "%s", b.err);
  const char *want = "trainsim run: note: --split 'dp=8,tp-grad=serial,p2p=blocking': "
                     "tp-grad=serial has no effect without tp (tp = 1); p2p=blocking has no "
                     "effect without pp (pp = 1)\n";
  cr_assert_str_eq(a.err, want);
  g_autofree char *sa = csv_cell(a.out, 0, "step_time_s");
  g_autofree char *sb = csv_cell(b.out, 0, "step_time_s");
  cr_assert_str_eq(sa, sb, "a no-op moved the step");
  run_result c = run("run -t dgx-a100-1node -m gpt3-350m -b 8 -s tp=2,tp-grad=serial -f csv");
  cr_assert_eq(c.status, 0, "%s", c.err);
  cr_assert_str_eq(c.err, "", "tp = 2: no note");
  run_free(&a), run_free(&b), run_free(&c);
}

/* More framework options that change nothing at their degrees or micro-batch count: a note,
 * the step and memory of the split without them; where they act, no note. Each was silent
 * (dp=32 gpt3-350m on 4 DGX H100, batch 256: fp8-cache 113.9 ms either way with one
 * micro-batch; buckets=copy at dp = 1 the same 14.65 GB a chip). */
Test(cli, more_noop_options_get_a_note)
{
  static const struct {
    const char *args, *split, *same_as, *note;
  } rows[] = {
      {"-b 256", "dp=32,precision=fp8,fp8-cache", "dp=32,precision=fp8",
       "fp8-cache has no effect with one micro-batch per step (each weight is cast once either "
       "way)"},
      {"-b 256", "dp=32,recompute=stage:except-last", "dp=32",
       "recompute=stage:except-last recomputes nothing with one micro-batch per step (the last "
       "one is kept)"},
      {"-b 256 --micro-batch 2", "dp=32,schedule=interleaved", "dp=32",
       "schedule=interleaved has no effect without pp (pp = 1: one chunk, 1F1B)"},
      {"-b 256", "tp=8,pp=4,buckets=copy", "tp=8,pp=4",
       "buckets=copy has no effect without dp or cp (dp = cp = 1: no gradient buckets)"},
      {"-b 256", "dp=32,kind:attention=dp", "dp=32",
       "kind:attention=dp has no effect without tp (tp = 1: every layer is data-parallel "
       "already)"},
      {"-b 256", "dp=32,name:*=dp,kind:dense=tp", "dp=32",
       "name:*=dp has no effect without tp (tp = 1: every layer is data-parallel already)"},
      {"-b 256", "dp=32,zero=3,fsdp2,recompute=full,early-stop",
       "dp=32,zero=3,fsdp2,recompute=full",
       "early-stop has no effect with fsdp2 (FSDP2's non-reentrant checkpoint stops early "
       "already)"},
      {"-b 256", "dp=32,zero=2,buckets=copy", "dp=32,zero=2",
       "buckets=copy has no effect with zero=2, zero=3 or offload (their reduce buckets hold the "
       "gradients)"},
      /* Where they act: no note, and the step or memory moves. */
      {"-b 256 --micro-batch 2", "dp=32,precision=fp8,fp8-cache", "dp=32,precision=fp8", NULL},
      {"-b 256 --micro-batch 2", "dp=32,recompute=stage:except-last", "dp=32", NULL},
      {"-b 256", "dp=32,zero=1,buckets=copy", "dp=32,zero=1", NULL},
      {"-b 256", "tp=8,cp=4,buckets=copy", "tp=8,cp=4", NULL},
      {"-b 256", "tp=8,dp=4,kind:attention=dp", "tp=8,dp=4", NULL},
      {"-b 256", "dp=32,projections=separate", "dp=32", NULL},
      {"-b 256", "dp=32,zero=3,fsdp2,projections=fused", "dp=32,zero=3,fsdp2", NULL},
      {"-b 256", "dp=32,zero=3,fsdp2,precision=fp8,fp8-gather=off",
       "dp=32,zero=3,fsdp2,precision=fp8", NULL},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(rows); i++) {
    g_autofree char *ca = g_strdup_printf("run -t dgx-h100-4node -m gpt3-350m %s -s %s -f csv",
                                          rows[i].args, rows[i].split);
    g_autofree char *cb = g_strdup_printf("run -t dgx-h100-4node -m gpt3-350m %s -s %s -f csv",
                                          rows[i].args, rows[i].same_as);
    run_result a = run(ca), b = run(cb);
    cr_assert_eq(a.status, 0, "%s: %s", ca, a.err);
    cr_assert_eq(b.status, 0, "%s: %s", cb, b.err);
    g_autofree char *step_a = csv_cell(a.out, 0, "step_time_s");
    g_autofree char *step_b = csv_cell(b.out, 0, "step_time_s");
    g_autofree char *mem_a = csv_cell(a.out, 0, "memory_per_chip_bytes");
    g_autofree char *mem_b = csv_cell(b.out, 0, "memory_per_chip_bytes");
    if (rows[i].note != NULL) {
      g_autofree char *want =
          g_strdup_printf("trainsim run: note: --split '%s': %s\n", rows[i].split, rows[i].note);
      cr_assert_str_eq(a.err, want, "%s", ca);
      cr_assert_str_eq(step_a, step_b, "%s: a no-op moved the step", ca);
      cr_assert_str_eq(mem_a, mem_b, "%s: a no-op moved the memory", ca);
    } else {
      cr_assert_str_eq(a.err, "", "%s: acts, no note", ca);
      cr_assert(strcmp(step_a, step_b) != 0 || strcmp(mem_a, mem_b) != 0, "%s: changed nothing",
                ca);
    }
    run_free(&a), run_free(&b);
  }
}

/* A command refused on its inputs leaves no folder behind that -o created, parents included
 * (main removes what ts_cmd_prepare_dir made, if still empty); a folder that existed stays. */
Test(cli, failed_command_leaves_no_created_folder)
{
  g_autofree char *dir = g_dir_make_tmp("ts-cli-XXXXXX", NULL);
  g_autofree char *made = g_build_filename(dir, "new", NULL);
  g_autofree char *out = g_build_filename(made, "deeper", NULL);
  g_autofree char *sweep = g_strdup_printf(
      "sweep -t dgx1-v100 -m mlp -b 16 -s dp=2 -j 1 --vary dim.node.size=2,32 -o %s", out);
  g_autofree char *runs = g_strdup_printf(RUN "-b 256 -s dp=63 -o %s", out);
  const char *cmds[] = {sweep, runs};
  const char *needles[] = {"pair_links names the links of 8 chips", "uses 63 chips"};
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    expect_input_error(cmds[i], needles[i]);
    cr_assert(!g_file_test(made, G_FILE_TEST_EXISTS), "`%s`: %s left behind", cmds[i], made);
    cr_assert(g_file_test(dir, G_FILE_TEST_IS_DIR), "the existing folder stays");
  }
  g_rmdir(dir);
}

/* A sweep's configuration out of the trace's ranges is skipped with the reason `run` gives (the
 * batch that made it), not "program 0 op 2: sizes out of range": both check the planned trace
 * through ts_run_check_planned, the sweep once per reused trace. */
Test(cli, sweep_out_of_range_batch_names_the_batch)
{
  g_autofree char *dir = g_dir_make_tmp("ts-cli-XXXXXX", NULL);
  g_autofree char *args = g_strdup_printf(
      "sweep -t dgx-h100-4node -m llama3-8b -b 1000000000 -s dp=32 -j 1 -o %s/s", dir);
  run_result r = run(args);
  cr_assert_eq(r.status, 0, "%s", r.err);
  run_free(&r);
  g_autofree char *path = g_strdup_printf("%s/s/sweep.json", dir);
  g_autofree char *json = NULL;
  cr_assert(g_file_get_contents(path, &json, NULL, NULL));
  cr_expect(strstr(json, "\"reason\" : \"global batch 1000000000, micro-batch 31250000: beyond "
                         "the sizes trainsim costs (") != NULL,
            "%s", json);
  g_autofree char *rm = g_strdup_printf("rm -rf %s", dir);
  cr_assert(g_spawn_command_line_sync(rm, NULL, NULL, NULL, NULL));
}

/* A validation network past the executor's limits said "network config: in=100000: ..." without
 * naming the model file. */
Test(cli, validation_network_limits_name_the_file)
{
  g_autofree char *dir = g_dir_make_tmp("ts-cli-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "wide.ini", NULL);
  cr_assert(g_file_set_contents(path,
                                "[model]\nname = wide\nkind = layers\ndtype = fp32\n"
                                "[layer.fc1]\nkind = dense\nin_features = 100000\nout_features = "
                                "16\nactivation = relu\ntp = column\n"
                                "[layer.fc2]\nkind = dense\nout_features = 16\nactivation = "
                                "relu\ntp = row\n"
                                "[layer.fc3]\nkind = dense\nout_features = 8\nloss = true\ntp = "
                                "replicated\n",
                                -1, NULL));
  g_autofree char *args = g_strdup_printf("validate -m %s -s dp=2", path);
  g_autofree char *want = g_strdup_printf("%s: network config: in=100000", path);
  expect_input_error(args, want);
  g_unlink(path);
  g_rmdir(dir);
}

/* A [model] name with a 0xff byte went into results.json as is: not UTF-8, not JSON. A
 * byte-order mark read as "'???[model]': a key before any [group]". */
Test(cli, ini_files_must_be_utf8_without_bom)
{
  g_autofree char *dir = g_dir_make_tmp("ts-cli-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "m.ini", NULL);
  const char *body = "kind = layers\n\n[layer.fc]\nkind = dense\nin_features = 4\n"
                     "out_features = 4\n";
  g_autofree char *bad = g_strconcat("[model]\nname = \xff", "MLP\n", body, NULL);
  cr_assert(g_file_set_contents(path, bad, -1, NULL));
  g_autofree char *args = g_strdup_printf("run -t tpu-v2-8 -m %s -b 16 -s dp=4", path);
  g_autofree char *want =
      g_strdup_printf("%s:2: byte 16 (0xff) is not UTF-8; expected a UTF-8 text file", path);
  expect_input_error(args, want);
  g_autofree char *bom = g_strconcat("\xef\xbb\xbf[model]\nname = m\n", body, NULL);
  cr_assert(g_file_set_contents(path, bom, -1, NULL));
  g_autofree char *want_bom = g_strdup_printf(
      "%s:1: starts with a UTF-8 byte-order mark (EF BB BF); expected a file without one", path);
  expect_input_error(args, want_bom);
  g_unlink(path);
  g_rmdir(dir);
}

Test(cli, topology_errors_name_file_and_key)
{
  g_autofree char *dir = g_dir_make_tmp("ts-cli-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "bad.ini", NULL);
  const char *text = "[chip]\nname = c\npeak_tflops = 100\nmemory_GiB = 16\n"
                     "memory_bandwidth_GBps = 900\n[dim.x]\nsize = 0\nshape = ring\n"
                     "link_bandwidth_GBps = 100\nlatency_us = 1\n";
  cr_assert(g_file_set_contents(path, text, -1, NULL));
  g_autofree char *args = g_strdup_printf("run -t %s -m bert-large -b 64", path);
  expect_input_error(args, "[dim.x] size='0'");
  /* Not an INI file at all: the line number and a printable excerpt, not raw bytes. */
  const char bin[] = "[chip]\nname = c\n\x01\xff\xfe garbage\n";
  cr_assert(g_file_set_contents(path, bin, sizeof bin - 1, NULL));
  expect_input_error(args, "bad.ini:3: '??? garbage': expected a [group] line");
  g_unlink(path);
  g_rmdir(dir);
}

/* A 100 kB value was echoed whole, some twice: 200 kB on the one line of stderr (a --split
 * twice; -b, --vary, file names and CSV fields once). Long words are cut to their ends. */
Test(cli, huge_values_are_shortened_in_errors)
{
  g_autofree char *big = g_strnfill(100000, '6');
  const char *const fmt[] = {"run -t tpu-v2-8 -m mlp -b 16 -s dp=%s",
                             "run -t tpu-v2-8 -m mlp -b %s -s dp=4",
                             "sweep -t tpu-v2-8 -m mlp -b 16 -s dp=4 --vary peak_tflops=%s",
                             "run -t %s -m mlp -b 16", "validate --against %s"};
  for (size_t i = 0; i < G_N_ELEMENTS(fmt); i++) {
    g_autofree char *args = g_strdup_printf(fmt[i], big);
    run_result r = run(args);
    size_t n = strlen(r.err);
    cr_assert_eq(r.status, 2, "%.80s: status %d", args, r.status);
    cr_assert(n < 2000, "%.80s: %zu bytes of stderr", args, n);
    cr_assert(strstr(r.err, " bytes]...") != NULL, "%.80s: %.300s", args, r.err);
    const char *nl = strchr(r.err, '\n');
    cr_assert(nl != NULL && nl[1] == '\0', "%.80s: one line", args);
    run_free(&r);
  }
  /* A short message is untouched, and a cut never splits a UTF-8 character. */
  g_autofree char *same = ts_cmd_shorten_words("a 'b' c");
  cr_assert_str_eq(same, "a 'b' c");
  g_autoptr(GString) w = g_string_new("x");
  for (int i = 0; i < 300; i++)
    g_string_append(w, "\xc3\xa9");
  g_autofree char *cut = ts_cmd_shorten_words(w->str);
  cr_assert(g_utf8_validate(cut, -1, NULL), "%s", cut);
  cr_assert(strstr(cut, "...[601 bytes]...") != NULL, "%s", cut);
}

Test(cli, failed_run_leaves_no_output_files)
{
  g_autofree char *dir = g_dir_make_tmp("ts-cli-XXXXXX", NULL);
  g_autofree char *args = g_strdup_printf(RUN "-b 64 -s dp=64 -s dp=7 --output-dir %s", dir);
  run_result r = run(args);
  cr_assert_eq(r.status, 2, "%s", r.err);
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *name = g_dir_read_name(d);
  cr_assert_null(name, "a failed run left '%s' in the output folder", name);
  g_dir_close(d);
  g_rmdir(dir);
  run_free(&r);
}

/* A sweep whose CSV goes to stdout has no sweep.json to point at: the exit status 1 comes with
 * the first reason (it said "see sweep.json skipped" and gave none). */
Test(cli, sweep_to_stdout_names_why_a_configuration_failed)
{
  run_result r =
      run("sweep -t dgx-a100-4node,dgx-h100-4node -m gpt3-1.3b -b 64 -s dp=32,precision=fp8");
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert(strstr(r.err, "the first: ") != NULL && strstr(r.err, "peak_tflops_fp8") != NULL, "%s",
            r.err);
  cr_assert(strstr(r.out, "DGX H100 4 nodes") != NULL, "the H100 row is predicted: %s", r.out);
  run_free(&r);
}

Test(cli, same_inputs_give_identical_bytes)
{
  const char *formats[] = {"text", "csv", "json"};
  for (size_t i = 0; i < G_N_ELEMENTS(formats); i++) {
    g_autofree char *args = g_strdup_printf(RUN "-b 512 --format %s", formats[i]);
    run_result a = run(args), b = run(args);
    cr_assert_eq(a.status, 0, "%s", a.err);
    cr_assert_str_eq(a.out, b.out, "two runs of `%s` differ", args);
    run_free(&a);
    run_free(&b);
  }
}

Test(cli, run_json_fields_carry_units)
{
  run_result r = run(RUN "-b 512 -s dp=64 --format json");
  cr_assert_eq(r.status, 0, "%s", r.err);
  const char *fields[] = {"\"step_time_s\"",
                          "\"compute_time_s\"",
                          "\"exposed_comm_time_s\"",
                          "\"samples_per_s\"",
                          "\"mfu\"",
                          "\"memory_per_chip_bytes\"",
                          "\"fits_memory\"",
                          "\"global_batch\""};
  for (size_t i = 0; i < G_N_ELEMENTS(fields); i++)
    cr_assert(strstr(r.out, fields[i]) != NULL, "JSON lacks %s", fields[i]);
  run_free(&r);
}

Test(cli, default_run_compares_three_splits)
{
  run_result r = run(RUN "-b 512");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(strstr(r.out, "fastest:") != NULL, "%s", r.out);
  cr_assert(strstr(r.out, "dp=64") != NULL && strstr(r.out, "tp=8,dp=8") != NULL, "%s", r.out);
  /* tp=64 and tp=32 do not divide BERT-Large's 16 heads: the fallback is tp=16. */
  cr_assert(strstr(r.out, "tp=16,dp=4") != NULL, "%s", r.out);
  run_free(&r);
}

Test(cli, trace_then_replay_gives_run_step_time)
{
  g_autofree char *dir = g_dir_make_tmp("ts-cli-XXXXXX", NULL);
  g_autofree char *tpath = g_build_filename(dir, "t.trace", NULL);
  g_autofree char *targs =
      g_strdup_printf("trace -t tpu-v3-8x8 -m bert-large -s tp=8,dp=8 -b 64 -o %s", tpath);
  run_result t = run(targs);
  cr_assert_eq(t.status, 0, "%s", t.err);
  g_autofree char *rargs = g_strdup_printf("replay %s -t tpu-v3-8x8 --format json", tpath);
  run_result a = run(rargs);
  run_result b = run(RUN "-b 64 -s tp=8,dp=8 --format json");
  cr_assert_eq(a.status, 0, "%s", a.err);
  double sa = json_step(a.out), sb = json_step(b.out);
  cr_assert(sa > 0 && sa == sb, "replayed step %.17g vs run step %.17g", sa, sb);
  g_autofree char *wrong = g_strdup_printf("replay %s -t tpu-v3-pod", tpath);
  expect_input_error(wrong, "expected the topology the trace was made for");
  g_unlink(tpath);
  g_rmdir(dir);
  run_free(&t);
  run_free(&a);
  run_free(&b);
}

/* A simgrid replay of a trace reports its flows and busiest links as `run` does for the split
 * the trace was made from (the replay printed neither), and writes --link-report. */
Test(cli, simgrid_replay_reports_flows_as_run_does)
{
  g_autofree char *dir = g_dir_make_tmp("ts-cli-XXXXXX", NULL);
  g_autofree char *tpath = g_build_filename(dir, "t.trace", NULL);
  g_autofree char *lpath = g_build_filename(dir, "links.csv", NULL);
  g_autofree char *targs =
      g_strdup_printf("trace -t tpu-v3-8x8 -m bert-large -s tp=8,dp=8 -b 64 -o %s", tpath);
  run_result t = run(targs);
  cr_assert_eq(t.status, 0, "%s", t.err);
  g_autofree char *rargs =
      g_strdup_printf("replay %s -t tpu-v3-8x8 --backend simgrid --link-report %s", tpath, lpath);
  run_result a = run(rargs);
  run_result b = run(RUN "-b 64 -s tp=8,dp=8 --backend simgrid");
  cr_assert_eq(a.status, 0, "%s", a.err);
  cr_assert_eq(b.status, 0, "%s", b.err);
  const char *fa = strstr(a.out, " flows simulated"), *fb = strstr(b.out, " flows simulated");
  cr_assert(fa != NULL && fb != NULL, "no flow count: replay '%s', run '%s'", a.out, b.out);
  while (fa > a.out && fa[-1] != ' ')
    fa--;
  while (fb > b.out && fb[-1] != ' ')
    fb--;
  cr_assert(atoll(fa) > 0 && atoll(fa) == atoll(fb), "replay %lld flows, run %lld", atoll(fa),
            atoll(fb));
  cr_assert(strstr(a.out, "most loaded links") != NULL, "%s", a.out);
  g_autofree char *csv = NULL;
  cr_assert(g_file_get_contents(lpath, &csv, NULL, NULL), "no %s", lpath);
  cr_assert(g_str_has_prefix(csv, "link,chip,dim,direction,bandwidth_Bps,bytes,"), "%s", csv);
  g_autofree char *bad = g_strdup_printf("replay %s -t tpu-v3-8x8 --link-report %s", tpath, lpath);
  expect_input_error(bad, "--link-report");
  g_unlink(lpath);
  g_unlink(tpath);
  g_rmdir(dir);
  run_free(&t);
  run_free(&a);
  run_free(&b);
}

/* A short option's value may be attached, as getopt takes it ("-b512", "-fjson", "-j2"):
 * GOption alone refused them ("Unknown option -b512", "Missing argument for -j"). */
Test(cli, short_options_take_attached_values)
{
  run_result a = run("run -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 -f json");
  run_result b = run("run -ttpu-v3-8x8 -mbert-large -b512 -sdp=64 -fjson");
  cr_assert_eq(a.status, 0, "%s", a.err);
  cr_assert_eq(b.status, 0, "%s", b.err);
  cr_assert_str_eq(a.out, b.out);
  run_free(&a);
  run_free(&b);
  run_result c = run("search -t tpu-v3-8x8 -m bert-large -b 512 -k1 -j1 -f json");
  cr_assert_eq(c.status, 0, "%s", c.err);
  run_free(&c);
  /* A negative value is still a value, and a flag without one is not split. */
  expect_input_error("run -t tpu-v3-8x8 -m bert-large -b -5", "--global-batch -5");
  expect_input_error("run -t tpu-v3-8x8 -m bert-large -b 64 -x", "Unknown option -x");
}

/* Every command with --format takes it as -f too: validate alone did not ("Unknown option -f"
 * for `validate --against FILE -f csv`, which run, sweep and search accept). */
Test(cli, every_format_option_has_its_short_form)
{
  const char *cmds[] = {"run", "collective", "model", "replay", "sweep", "search", "validate"};
  for (size_t c = 0; c < G_N_ELEMENTS(cmds); c++) {
    g_autofree char *args = g_strdup_printf("%s --help", cmds[c]);
    run_result r = run(args);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "-f, --format=F") != NULL, "`trainsim %s` has no -f", cmds[c]);
    run_free(&r);
  }
}

Test(cli, help_names_units)
{
  run_result r = run("run --help");
  cr_assert_eq(r.status, 0);
  cr_assert(strstr(r.out, "MiB") && strstr(r.out, "Samples"), "%s", r.out);
  run_free(&r);
  run_result c = run("collective --help");
  cr_assert(strstr(c.out, "GB/s") && strstr(c.out, "bytes"), "%s", c.out);
  run_free(&c);
}

/* nccl-tests' columns with NCCL's choice: on a DGX A100 cluster an NCCL algorithm and protocol
 * for every size, and Simple on a ring for 8 GiB, whose bus bandwidth is bounded by the 8 NICs
 * per node (8 x 25 GB/s x the fitted efficiency). */
Test(cli, collective_reports_nccl_algorithm_and_protocol)
{
  run_result r = run("collective -t dgx-a100-4node --bytes-range 8:8GiB:1024 --format csv");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(g_str_has_prefix(r.out, "op,members,bytes,time_s,algbw_GBps,busbw_GBps,algorithm,"
                                    "protocol\n"),
            "%.80s", r.out);
  g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
  cr_assert(g_strv_length(lines) >= 5, "%s", r.out);
  g_auto(GStrv) first = g_strsplit(lines[1], ",", -1);
  cr_assert(g_str_has_prefix(first[6], "nccl-"), "%s", lines[1]);
  cr_assert(strcmp(first[7], "LL") == 0 || strcmp(first[7], "LL128") == 0 ||
                strcmp(first[7], "Simple") == 0,
            "%s", lines[1]);
  g_auto(GStrv) last = g_strsplit(lines[4], ",", -1);
  cr_assert_str_eq(last[6], "nccl-ring", "%s", lines[4]);
  cr_assert_str_eq(last[7], "Simple", "%s", lines[4]);
  double busbw = g_ascii_strtod(last[5], NULL);
  cr_assert(busbw > 100 && busbw <= 200, "8 GiB busbw %g GB/s", busbw);
  run_free(&r);
}

Test(cli, model_lists_layers_and_totals)
{
  /* `trainsim model`: the JSON totals equal the model's closed forms (ResNet-50: torchvision's
   * 25,557,032 parameters), the layer table has one row per layer that sums to them, and the
   * CSV has the same rows; bad input is one line and exit 2. */
  run_result r = run("model -m resnet50 --format json");
  cr_assert_eq(r.status, 0, "%s", r.err);
  g_autoptr(JsonParser) p = json_parser_new();
  cr_assert(json_parser_load_from_data(p, r.out, -1, NULL), "not JSON: %s", r.out);
  JsonObject *root = json_node_get_object(json_parser_get_root(p));
  cr_expect_eq(json_object_get_double_member(root, "params"), 25557032.0);
  JsonArray *rows = json_object_get_array_member(root, "layer_table");
  guint n = json_array_get_length(rows);
  cr_expect_eq(n, (guint)json_object_get_int_member(root, "layers"));
  double sum = 0;
  for (guint i = 0; i < n; i++)
    sum += json_object_get_double_member(json_array_get_object_element(rows, i), "params");
  cr_expect_eq(sum, 25557032.0);
  JsonObject *conv1 = json_array_get_object_element(rows, 0);
  cr_expect_str_eq(json_object_get_string_member(conv1, "input"), "data");
  run_free(&r);
  run_result c = run("model -m resnet50 --format csv");
  cr_assert_eq(c.status, 0, "%s", c.err);
  int lines = 0;
  for (const char *q = c.out; *q; q++)
    lines += *q == '\n';
  cr_expect_eq(lines, (int)n + 1, "a header and one line per layer");
  cr_expect(g_str_has_prefix(c.out, "index,name,kind,tp,block,input,params,fwd_FLOP"), "%.80s",
            c.out);
  run_free(&c);
  run_result t = run("model -m amoebanet-d-18-208");
  cr_assert_eq(t.status, 0, "%s", t.err);
  cr_expect(strstr(t.out, "630 layers in 22 blocks") != NULL, "%.200s", t.out);
  cr_expect(strstr(t.out, "params 81505540") != NULL, "%.200s", t.out);
  run_free(&t);
  expect_input_error("model", "missing --model");
  expect_input_error("model -m no-such-model", "no-such-model: no such file");
  expect_input_error("model -m resnet50 --format xml", "--format 'xml'");
}

Test(cli, fastest_is_among_splits_that_fit)
{
  /* AmoebaNet-D (18, 544), batch 128 on 4 TPU v2 chips: data parallelism is faster but needs
   * about 31 GiB per 16 GiB chip; GPipe's pipeline with re-materialisation fits. The run
   * names the fastest split that fits, and says the other is faster but does not fit. */
  const char *args = "run -t tpu-v2-8 -m amoebanet-d-18-544 -b 128 -s dp=4 "
                     "-s pp=4,schedule=gpipe,recompute=stage";
  run_result r = run(args);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "fastest that fits: pp=4,schedule=gpipe,recompute=stage; dp=4 is ") !=
                NULL,
            "%s", r.out);
  cr_expect(strstr(r.out, "faster but does not fit") != NULL, "%s", r.out);
  run_free(&r);
  g_autofree char *json = g_strdup_printf("%s --format json", args);
  run_result j = run(json);
  cr_assert_eq(j.status, 0, "%s", j.err);
  cr_expect(strstr(j.out, "\"fastest_split\" : \"pp=4,schedule=gpipe,recompute=stage\"") != NULL,
            "%s", j.out);
  run_free(&j);
}

/* The line of `help` that documents option opt ("  -b, --global-batch=N   Samples ..."), its
 * runs of blanks collapsed (GOption pads the text to the longest option of each command). */
static char *help_line(const char *help, const char *opt)
{
  g_auto(GStrv) lines = g_strsplit(help, "\n", -1);
  for (char **l = lines; *l != NULL; l++) {
    if (strstr(*l, opt) == NULL || !g_str_has_prefix(g_strstrip(*l), "-"))
      continue;
    GString *s = g_string_new(NULL);
    for (const char *p = *l; *p != '\0'; p++)
      if (*p != ' ' || (s->len > 0 && s->str[s->len - 1] != ' '))
        g_string_append_c(s, *p);
    return g_string_free(s, FALSE);
  }
  return NULL;
}

Test(cli, run_and_trace_document_their_plan_options_alike)
{
  /* The plan options were two GOption tables (cmd_run.c, cmd_trace.c) whose help had drifted
   * apart ("Samples per step" vs "Samples (sequences or images) per step", two --bucket-MiB
   * defaults texts). One table now: every line equal, except --split, which run may repeat. */
  run_result r = run("run --help"), t = run("trace --help");
  cr_assert_eq(r.status, 0);
  cr_assert_eq(t.status, 0);
  static const char *const same[] = {"--topology=",    "--model=",      "--global-batch=",
                                     "--micro-batch=", "--bucket-MiB=", "--collective-algorithm="};
  for (size_t i = 0; i < G_N_ELEMENTS(same); i++) {
    g_autofree char *a = help_line(r.out, same[i]);
    g_autofree char *b = help_line(t.out, same[i]);
    cr_assert(a != NULL && b != NULL, "%s missing from run or trace --help", same[i]);
    cr_expect_str_eq(a, b, "%s is documented differently by run and trace", same[i]);
  }
  g_autofree char *rs = help_line(r.out, "--split=");
  g_autofree char *ts = help_line(t.out, "--split=");
  cr_assert(rs != NULL && ts != NULL);
  cr_expect(strstr(rs, "repeat to compare") != NULL && strstr(ts, "repeat") == NULL,
            "run's --split is repeatable, trace's is not:\n%s\n%s", rs, ts);
  /* --split's help names every option the parser takes, as the unknown-axis error lists them:
   * this session's fsdp1, dp-engine, attn-block and attn-bwd were in neither --help. */
  static const char *const opts[] = {"fsdp1", "dp-engine",  "attn-block", "attn-bwd",
                                     "fsdp2", "fp8-gather", "projections"};
  for (size_t i = 0; i < G_N_ELEMENTS(opts); i++)
    cr_expect(strstr(rs, opts[i]) != NULL, "run --help's --split lacks %s:\n%s", opts[i], rs);
  run_result u = run("run -t tpu-v2-8 -m mlp -b 8 -s dp=4,nosuch=1");
  const char *listed = strstr(u.err, "an option: ");
  cr_assert(u.status == 2 && listed != NULL, "%s", u.err);
  g_autofree char *list = g_strchomp(g_strdup(listed + strlen("an option: ")));
  cr_expect(strstr(rs, list) != NULL, "--split help:\n%s\nlacks the error's list:\n%s", rs, list);
  run_free(&u);
  run_free(&r);
  run_free(&t);
  /* And they check alike: the same refusal, named by the same option. */
  static const char *const bad[] = {"-b 0", "-b 8 --micro-batch -1", "-b 8 --bucket-MiB 0",
                                    "-b 8 --collective-algorithm fastest"};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *ra = g_strdup_printf("run -t tpu-v2-8 -m mlp -s dp=4 %s", bad[i]);
    g_autofree char *ta = g_strdup_printf("trace -t tpu-v2-8 -m mlp -s dp=4 %s", bad[i]);
    run_result x = run(ra), y = run(ta);
    cr_expect_eq(x.status, 2, "%s: %s", ra, x.err);
    cr_expect_eq(y.status, 2, "%s: %s", ta, y.err);
    const char *xm = strstr(x.err, ": "), *ym = strstr(y.err, ": ");
    cr_expect(xm != NULL && ym != NULL && strcmp(xm, ym) == 0,
              "run and trace refuse '%s' differently:\n%s%s", bad[i], x.err, y.err);
    run_free(&x);
    run_free(&y);
  }
  expect_input_error("trace -t tpu-v2-8 -m mlp -b 16 -s dp=4 -s dp=8", "--split given twice");
}

/* The line of `CMD --help` that documents --opt, or NULL. */
static char *cmd_help_line(const char *cmd, const char *opt)
{
  g_autofree char *args = g_strdup_printf("%s --help", cmd);
  run_result r = run(args);
  cr_assert_eq(r.status, 0, "%s: %s", args, r.err);
  char *line = help_line(r.out, opt);
  run_free(&r);
  return line;
}

Test(cli, every_planning_command_takes_the_plan_options_alike)
{
  /* sweep, search and validate kept plan options of their own: search had no --bucket-MiB and
   * no --collective-algorithm (fixed at 25 MiB and auto, so a search and a run of its winner
   * disagreed), validate called them --algorithm and --bucket-bytes, sweep's texts differed.
   * One table now: each option, with its base text, in all five. */
  static const char *const cmds[] = {"run", "trace", "sweep", "search", "validate"};
  static const struct {
    const char *opt, *text;
  } opts[] = {
      {"--topology=", "Topology file or shipped name (topologies/NAME.ini)"},
      {"--model=", "Model file or shipped name (models/NAME.ini)"},
      {"--global-batch=", "Samples (sequences or images) per step, all replicas together"},
      {"--micro-batch=", "Samples per micro-batch per replica"},
      {"--bucket-MiB=", "Data-parallel gradient bucket in MiB"},
      {"--collective-algorithm=", "auto (default: what NCCL picks on switch dimensions"},
  };
  for (size_t c = 0; c < G_N_ELEMENTS(cmds); c++)
    for (size_t o = 0; o < G_N_ELEMENTS(opts); o++) {
      g_autofree char *line = cmd_help_line(cmds[c], opts[o].opt);
      cr_expect(line != NULL && strstr(line, opts[o].text) != NULL,
                "`%s --help` documents %s as '%s', expected '%s'", cmds[c], opts[o].opt,
                line ? line : "(missing)", opts[o].text);
    }
  /* And they are checked alike, named by the same option. */
  static const char *const base[] = {
      "run -t tpu-v2-8 -m mlp -s dp=4", "trace -t tpu-v2-8 -m mlp -s dp=4",
      "sweep -t tpu-v2-8 -m mlp -s dp=4 -j 1", "search -t tpu-v2-8 -m mlp -j 1",
      "validate -m validate-mlp -s dp=4"};
  static const struct {
    const char *extra, *needle;
  } bad[] = {
      {"-b 0", "expected a positive whole number of samples"},
      {"-b 8 --bucket-MiB 0", "--bucket-MiB 0: expected a size in (0, 1048576] MiB"},
      {"-b 8 --collective-algorithm fastest", "--collective-algorithm 'fastest': expected auto"},
      {"-b 8 --micro-batch x", "--micro-batch"},
  };
  for (size_t c = 0; c < G_N_ELEMENTS(base); c++)
    for (size_t k = 0; k < G_N_ELEMENTS(bad); k++) {
      g_autofree char *a = g_strdup_printf("%s %s", base[c], bad[k].extra);
      expect_input_error(a, bad[k].needle);
    }
  /* An option taken once, given twice, was last-wins without a word (GOption's default). */
  expect_input_error("run -t tpu-v2-8 -m mlp -s dp=4 -b 8 -b 16",
                     "--global-batch given twice ('8', '16')");
  expect_input_error("search -t tpu-v2-8 -m mlp -b 8 --bucket-MiB 1 --bucket-MiB 2",
                     "--bucket-MiB given twice");
  expect_input_error("validate -m validate-mlp -s dp=4 -a ring --collective-algorithm ring",
                     "--algorithm and --collective-algorithm: expected one of them");
  expect_input_error("search -t tpu-v2-8 -m mlp -b 8 -s dp=4", "search ranks every split itself");
  /* validate --against replays the file's rows: a plan option there was ignored silently. */
  expect_input_error("validate --against data/published/torchtitan/memory.csv -b 8",
                     "--global-batch: applies to the numeric validation");
}

/* ranked[0] of a search JSON document: its split_arg, micro-batch and step time. */
static double search_best(const char *args, char **split, gint64 *micro)
{
  run_result r = run(args);
  cr_assert_eq(r.status, 0, "%s: %s", args, r.err);
  g_autoptr(JsonParser) p = json_parser_new();
  cr_assert(json_parser_load_from_data(p, r.out, -1, NULL), "not JSON: %s", r.out);
  JsonObject *best = json_array_get_object_element(
      json_object_get_array_member(json_node_get_object(json_parser_get_root(p)), "ranked"), 0);
  double step = json_object_get_double_member(best, "step_time_s");
  if (split != NULL)
    *split = g_strdup(json_object_get_string_member(best, "split_arg"));
  if (micro != NULL)
    *micro = json_object_get_int_member(best, "micro_batch");
  run_free(&r);
  return step;
}

Test(cli, search_predicts_with_the_plan_options_run_uses)
{
  /* 1 KiB gradient buckets on the MLP: more, smaller all-reduces than 25 MiB's one. search
   * ignored --bucket-MiB; now its best split predicts what run predicts for it. */
  g_autofree char *split = NULL;
  gint64 micro = 0;
  double plain = search_best("search -t tpu-v2-8 -m mlp -b 16 -j 1 -f json", NULL, NULL);
  double small = search_best("search -t tpu-v2-8 -m mlp -b 16 -j 1 --bucket-MiB 0.001 -f json",
                             &split, &micro);
  cr_expect(small != plain, "--bucket-MiB 0.001 changed nothing (%g s)", plain);
  g_autofree char *args =
      g_strdup_printf("run -t tpu-v2-8 -m mlp -b 16 -s %s --micro-batch %" G_GINT64_FORMAT
                      " --bucket-MiB 0.001 -f json",
                      split, micro);
  run_result r = run(args);
  cr_assert_eq(r.status, 0, "%s: %s", args, r.err);
  double ran = json_step(r.out);
  cr_expect(fabs(ran / small - 1) < 1e-9, "search says %.9g s, run of its best %.9g s", small, ran);
  run_free(&r);
}

Test(cli, sweep_and_search_take_runs_machine_options)
{
  /* --straggler, --fail and --cfg were run's only: sweep and search said "Unknown option".
   * A chip at half speed slows the data-parallel step (the step is the straggler's), in
   * sweep and in search alike, and the sweep's spec records it. */
  run_result a = run("sweep -t tpu-v2-8 -m mlp -b 16 -s dp=4 -j 1 -f json");
  run_result b = run("sweep -t tpu-v2-8 -m mlp -b 16 -s dp=4 -j 1 -f json --straggler chip:0=0.5");
  cr_assert_eq(a.status, 0, "%s", a.err);
  cr_assert_eq(b.status, 0, "%s", b.err);
  double sa = 0, sb = 0;
  {
    g_autoptr(JsonParser) p = json_parser_new();
    cr_assert(json_parser_load_from_data(p, a.out, -1, NULL));
    JsonObject *root = json_node_get_object(json_parser_get_root(p));
    sa = json_object_get_double_member(
        json_array_get_object_element(json_object_get_array_member(root, "results"), 0),
        "step_time_s");
  }
  {
    g_autoptr(JsonParser) p = json_parser_new();
    cr_assert(json_parser_load_from_data(p, b.out, -1, NULL));
    JsonObject *root = json_node_get_object(json_parser_get_root(p));
    sb = json_object_get_double_member(
        json_array_get_object_element(json_object_get_array_member(root, "results"), 0),
        "step_time_s");
    JsonObject *spec = json_object_get_object_member(root, "sweep");
    cr_expect(json_object_has_member(spec, "straggler"), "the sweep spec does not record it");
  }
  cr_expect(sb > 1.2 * sa, "a chip at half speed: %g s, healthy %g s", sb, sa);
  run_free(&a);
  run_free(&b);
  double ha = search_best("search -t tpu-v2-8 -m mlp -b 16 -j 1 -f json", NULL, NULL);
  double hb = search_best("search -t tpu-v2-8 -m mlp -b 16 -j 1 -f json --straggler chip:0=0.5",
                          NULL, NULL);
  cr_expect(hb > ha, "search with a straggler: %g s, healthy %g s", hb, ha);
  expect_input_error("sweep -t tpu-v2-8 -m mlp -b 16 -s dp=4 -j 1 --fail link:x:0,0 --vary "
                     "dims=2x2,4x4",
                     "--fail with --vary 'dims=2x2,4x4'");
  expect_input_error("search -t tpu-v2-8 -m mlp -b 16 -j 1 --cfg network/model:LV08",
                     "--cfg 'network/model:LV08': the analytic backend takes no SimGrid settings");
}

/* One rank's file of an 8-rank Chakra trace: its all-reduce spans only that rank, moves
 * nothing, and the step was 0 s with no word why. A note names the 8 files on disk and what to
 * give; with every file (or one that has no siblings' collectives to lose) no note. */
Test(cli, chakra_replay_of_some_ranks_says_their_collectives_are_not_simulated)
{
  const char *dir = TS_SOURCE_DIR "/traces/imported/chakra/astrasim-all_reduce-8npus";
  g_autofree char *one = g_strdup_printf("replay %s/all_reduce.0.et -t dgx-a100-1node", dir);
  run_result a = run(one);
  cr_assert_eq(a.status, 0, "%s", a.err);
  g_autofree char *want = g_strdup_printf(
      "trainsim replay: note: %s/all_reduce.*.et holds 8 ranks but 1 was given: collectives run "
      "over the ranks given only, so communication with the other 7 is not simulated; give all "
      "8 files (%s/all_reduce.*.et)\n",
      dir, dir);
  cr_expect_str_eq(a.err, want);
  g_autofree char *all = g_strdup_printf(
      "replay %s/all_reduce.0.et %s/all_reduce.1.et %s/all_reduce.2.et %s/all_reduce.3.et "
      "%s/all_reduce.4.et %s/all_reduce.5.et %s/all_reduce.6.et %s/all_reduce.7.et "
      "-t dgx-a100-1node",
      dir, dir, dir, dir, dir, dir, dir, dir);
  run_result b = run(all);
  cr_assert_eq(b.status, 0, "%s", b.err);
  cr_expect_str_eq(b.err, "", "every rank given: no note");
  run_free(&a), run_free(&b);
}
