/* Release quality, as a user meets it: JSON documents match their shipped schemas
 * (docs/schemas/), numbers are valid JSON and byte counts exact integers, results go to stdout
 * and notes to stderr, the platform XML is well-formed (libxml2), GNU-style help and version,
 * and the bad inputs of issue 12 are refused with one line and exit status 2. */
#define _DEFAULT_SOURCE /* symlink() */
#include "ts_report.h"
#include "ts_topo.h"
#include "ts_util.h"

#include "ts_schema.h"
#include "ts_test.h"
#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libxml/parser.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void expect_input_error(const char *args, const char *needle)
{
  run_result r = run(args);
  cr_assert_eq(r.status, 2, "`%s` exited %d, expected 2; stderr: %s", args, r.status, r.err);
  cr_assert(strstr(r.err, needle) != NULL, "`%s`: stderr '%s' lacks '%s'", args, r.err, needle);
  const char *nl = strchr(r.err, '\n');
  cr_assert(nl != NULL && nl[1] == '\0', "`%s`: expected one line, got '%s'", args, r.err);
  cr_assert_str_eq(r.out, "", "nothing on stdout on error");
  run_free(&r);
}

/* Checks text against docs/schemas/<doc>.schema.json; FALSE with the reason in *why. */
static gboolean schema_ok(const char *doc, const char *text, char **why)
{
  g_autofree char *path = g_strdup_printf("%s/docs/schemas/%s.schema.json", TS_SOURCE_DIR, doc);
  g_autoptr(JsonParser) sp = json_parser_new();
  cr_assert(json_parser_load_from_file(sp, path, NULL), "%s: not JSON", path);
  g_autoptr(JsonParser) dp = json_parser_new();
  if (!json_parser_load_from_data(dp, text, -1, NULL)) {
    *why = g_strdup("not JSON");
    return FALSE;
  }
  return ts_schema_check(json_parser_get_root(dp), json_node_get_object(json_parser_get_root(sp)),
                         "$", why);
}

static char *tmp_dir(void)
{
  char *d = g_dir_make_tmp("ts-release-XXXXXX", NULL);
  cr_assert_not_null(d);
  return d;
}

static void rm_rf(const char *dir)
{
  g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(release, every_json_document_matches_its_schema)
{
  g_autofree char *dir = tmp_dir();
  static const struct {
    const char *doc, *args;
  } cases[] = {
      {"run", "run -t tpu-v3-8x8 -m bert-large -b 512 -f json"},
      {"run", "run -t dgx-a100-4node -m gpt3-1.3b -b 256 --micro-batch 4 -s "
              "tp=2,pp=4,dp=4,schedule=1f1b,recompute=full -s dp=32,zero=3,offload=cpu -f json"},
      {"run", "replay --format json -t tpu-v3-8x8 TRACE"},
      {"sweep", "sweep -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 -s tp=8@x,dp=8@y --vary "
                "link_bandwidth_GBps=x0.5,x1 --format json -j 1"},
      {"search", "search -t tpu-v3-8x8 -m gpt3-350m -b 64 --format json -j 1"},
      {"collective", "collective -t tpu-v3-8x8 --bytes-range 1MiB:16MiB -f json"},
      {"model", "model -m resnet50 -f json"},
      /* A model without a sequence: tokens_per_s is null, in run and in search. */
      {"run", "run -t tpu-v2-8 -m resnet50 -b 64 -s dp=4 -f json"},
      {"search", "search -t tpu-v2-8 -m mlp -b 16 -j 1 -f json"},
      {"model", "model -m t5-small -f json"},
      /* Issue 14's documents: time to train with failures, cost and energy; a degraded array. */
      {"run", "run -t dgx-a100-4node -m gpt3-1.3b -b 256 -s tp=8@node,dp=4@net --tokens 3e11 "
              "--monte-carlo 200 -f json"},
      {"run", "run -t tpu-v3-8x8 -m bert-large -b 512 -s tp=8@x,dp=8@y --fail link:x:3,4 "
              "--straggler chip:17=0.8 --steps 1000 -f json"},
      {"sweep", "sweep -t tpu-v3-8x8 -m bert-large -b 512 -s tp=8@x,dp=8@y --vary dead_links=0,1 "
                "--tokens 1e10 --format json -j 1"},
      {"search", "search -t tpu-v2-8 -m bert-large -b 64 -k 2 -j 1 --steps 1000 --objective cost "
                 "--price-per-hour 1 --format json"},
  };
  g_autofree char *trace = g_build_filename(dir, "b.trace", NULL);
  g_autofree char *targs =
      g_strdup_printf("trace -t tpu-v3-8x8 -m bert-large -s tp=8,dp=8 -b 64 -o %s", trace);
  run_result tr = run(targs);
  cr_assert_eq(tr.status, 0, "%s", tr.err);
  run_free(&tr);
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *args = g_strdup(cases[i].args);
    if (strstr(args, "TRACE") != NULL) {
      g_free(args);
      args = g_strdup_printf("replay --format json -t tpu-v3-8x8 %s", trace);
    }
    run_result r = run(args);
    cr_assert_eq(r.status, 0, "`%s`: exit %d: %s", args, r.status, r.err);
    g_autofree char *why = NULL;
    gboolean ok = schema_ok(cases[i].doc, r.out, &why);
    cr_expect(ok, "`%s` does not match %s.schema.json: %s", args, cases[i].doc, why);
    run_free(&r);
  }
  /* The files a sweep and a merge of its shards write, too. */
  for (int s = 0; s < 2; s++) {
    g_autofree char *a =
        g_strdup_printf("sweep -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 -s tp=16 "
                        "--shard %d/2 -j 1 -o %s/s%d",
                        s, dir, s);
    run_result r = run(a);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
  }
  g_autofree char *ma = g_strdup_printf("merge %s/s0 %s/s1 -o %s/all", dir, dir, dir);
  run_result m = run(ma);
  cr_assert_eq(m.status, 0, "%s", m.err);
  /* The merge's summary reads as the unsharded sweep's: merge printed no "fastest that fits"
   * line (only the files written, on stderr). Its files are the sweep's, byte for byte. */
  g_autofree char *ua = g_strdup_printf(
      "sweep -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 -s tp=16 -j 1 -o %s/one", dir);
  run_result u = run(ua);
  cr_assert_eq(u.status, 0, "%s", u.err);
  cr_expect_str_eq(m.out, u.out);
  cr_expect(strstr(m.out, "fastest that fits: dp=64 (dp@x+y), BERT-Large on TPU v3 slice 8x8 "
                          "(64 chips), global batch 512: ") != NULL,
            "%s", m.out);
  for (int f = 0; f < 2; f++) {
    const char *name = f ? "sweep.json" : "sweep.csv";
    g_autofree char *pa = g_build_filename(dir, "all", name, NULL);
    g_autofree char *pb = g_build_filename(dir, "one", name, NULL);
    g_autofree char *ta = NULL, *tb = NULL;
    cr_assert(g_file_get_contents(pa, &ta, NULL, NULL) && g_file_get_contents(pb, &tb, NULL, NULL));
    cr_expect_str_eq(ta, tb, "%s differs from the unsharded sweep's", name);
  }
  run_free(&m);
  run_free(&u);
  g_autofree char *mj = g_build_filename(dir, "all", "sweep.json", NULL);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(mj, &text, NULL, NULL));
  g_autofree char *why = NULL;
  gboolean ok = schema_ok("sweep", text, &why);
  cr_expect(ok, "merged sweep.json: %s", why);
  rm_rf(dir);
}

Test(release, schema_check_can_fail)
{
  /* The validator itself: a byte count written as 2.0, a wrong document name, a missing member. */
  run_result r = run("run -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 -f json");
  cr_assert_eq(r.status, 0);
  g_autofree char *why = NULL;
  gboolean ok = schema_ok("run", r.out, &why);
  cr_assert(ok, "%s", why);
  const char *field = "\"memory_per_chip_bytes\" : ";
  char *at = strstr(r.out, field);
  cr_assert_not_null(at);
  at += strlen(field);
  GString *bad = g_string_new_len(r.out, at - r.out);
  g_string_append(bad, "2.0");
  g_string_append(bad, strchr(at, ','));
  g_clear_pointer(&why, g_free);
  ok = schema_ok("run", bad->str, &why);
  cr_assert(!ok, "a byte count written as 2.0 passed");
  cr_assert(strstr(why, "memory_per_chip_bytes") != NULL, "%s", why);
  g_string_free(bad, TRUE);
  g_clear_pointer(&why, g_free);
  ok = schema_ok("sweep", r.out, &why);
  cr_assert(!ok, "a run document passed as a sweep");
  g_clear_pointer(&why, g_free);
  ok = schema_ok("run", "{\"trainsim_version\" : \"0\"}", &why);
  cr_assert(!ok && strstr(why, "missing required") != NULL, "%s", why ? why : "passed");
  run_free(&r);
}

Test(release, json_numbers_are_valid_and_bytes_exact)
{
  /* json-glib 1.6's generator wrote 1e20 as "1e+20.0": trainsim's writer must not. */
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  const double vals[] = {1e20, 1e308, -1e-300, 2.0, 0.1, -0.0};
  const char *keys[] = {"a", "b", "c", "d", "e", "f"};
  for (size_t i = 0; i < G_N_ELEMENTS(vals); i++) {
    json_builder_set_member_name(b, keys[i]);
    json_builder_add_double_value(b, vals[i]);
  }
  json_builder_set_member_name(b, "memory_bytes");
  json_builder_add_double_value(b, 13927412640.0);
  json_builder_set_member_name(b, "traffic_bytes");
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "dp");
  json_builder_add_double_value(b, 2.0);
  json_builder_end_object(b);
  json_builder_end_object(b);
  g_autofree char *text = ts_json_builder_text(b);
  g_autoptr(JsonParser) p = json_parser_new();
  cr_assert(json_parser_load_from_data(p, text, -1, NULL), "invalid JSON: %s", text);
  JsonObject *o = json_node_get_object(json_parser_get_root(p));
  for (size_t i = 0; i < G_N_ELEMENTS(vals); i++) {
    double got = json_object_get_double_member(o, keys[i]);
    cr_expect(got == vals[i], "%s: %.17g read back as %.17g", keys[i], vals[i], got);
  }
  cr_expect(strstr(text, "\"memory_bytes\" : 13927412640,") != NULL, "%s", text);
  cr_expect(strstr(text, "\"dp\" : 2\n") != NULL, "bytes inside a *_bytes object: %s", text);
  cr_expect(strstr(text, "\"d\" : 2.0,") != NULL, "a non-byte double keeps its .0: %s", text);
}

Test(release, csv_byte_columns_are_integers)
{
  /* checkpoint_bytes of GPT-3 1.3B (18,449,428,480, 11 digits) was written 1.844942848e+10. */
  run_result r = run("run -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 -s dp=64@x+y -f csv");
  run_result big = run("run -t dgx-a100-4node -m gpt3-1.3b -b 256 -s dp=32 -f csv");
  cr_assert_eq(big.status, 0, "%s", big.err);
  g_autofree char *both = g_strconcat(r.out, strchr(big.out, '\n') + 1, NULL);
  g_free(r.out);
  r.out = g_steal_pointer(&both);
  run_free(&big);
  cr_assert_eq(r.status, 0);
  g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
  g_auto(GStrv) head = g_strsplit(lines[0], ",", -1);
  int checked = 0;
  for (int l = 1; lines[l] != NULL && *lines[l] != '\0'; l++) {
    g_auto(GStrv) cells = g_strsplit(lines[l], ",", -1);
    cr_assert_eq(g_strv_length(cells), g_strv_length(head), "row %d: %s", l, lines[l]);
    for (int c = 0; head[c] != NULL; c++)
      if (g_str_has_suffix(head[c], "_bytes") || g_str_has_suffix(head[c], "_bytes_per_step")) {
        gboolean digits = *cells[c] != '\0';
        for (const char *q = cells[c]; *q; q++)
          digits &= g_ascii_isdigit(*q);
        cr_expect(digits, "%s = '%s': expected an exact integer", head[c], cells[c]);
        checked++;
      }
  }
  cr_assert_gt(checked, 20, "byte columns checked: %d", checked);
  run_free(&r);
}

Test(release, results_on_stdout_notes_on_stderr)
{
  g_autofree char *dir = tmp_dir();
  g_autofree char *args =
      g_strdup_printf("sweep -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 -j 1 -o %s/sw", dir);
  run_result r = run(args);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "wrote") == NULL, "stdout has a note: %s", r.out);
  cr_expect(strstr(r.err, "wrote") != NULL && strstr(r.err, "sweep.json") != NULL, "%s", r.err);
  run_free(&r);
  g_autofree char *xml = g_build_filename(dir, "v3.xml", NULL);
  g_autofree char *pa = g_strdup_printf("platform -t tpu-v3-8x8 -o %s", xml);
  r = run(pa);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "");
  cr_expect(strstr(r.err, "wrote") != NULL, "platform -o says nothing: '%s'", r.err);
  run_free(&r);
  rm_rf(dir);
}

Test(release, platform_xml_is_well_formed)
{
  static const char *cases[] = {
      "platform -t tpu-v3-8x8",
      "platform -t asym-16x16",
      "platform -t dgx-a100-4node --routing dijkstra --chips-per-port net=8",
      "platform -t dgx-a100-1node",
      "platform -t tpu-v2-8 --routing full",
      "platform -t p40-pcie-8 --routing floyd",
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    run_result r = run(cases[i]);
    cr_assert_eq(r.status, 0, "%s: %s", cases[i], r.err);
    xmlDocPtr d = xmlReadMemory(r.out, (int)strlen(r.out), "platform.xml", NULL,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    cr_expect_not_null(d, "`trainsim %s` wrote XML that is not well-formed", cases[i]);
    if (d != NULL) {
      xmlNodePtr root = xmlDocGetRootElement(d);
      cr_expect(root != NULL && strcmp((const char *)root->name, "platform") == 0);
      xmlFreeDoc(d);
    }
    run_free(&r);
  }
}

Test(release, gnu_help_and_version)
{
  run_result v = run("--version");
  cr_assert_eq(v.status, 0);
  static const char *cmds[] = {"run",    "collective", "trace",    "model",    "replay",
                               "import", "export",     "platform", "validate", "sweep",
                               "search", "plot",       "merge",    "check",    "calibrate"};
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    g_autofree char *a = g_strdup_printf("help %s", cmds[i]);
    g_autofree char *b = g_strdup_printf("%s --help", cmds[i]);
    /* GNU: --version wins over the other options (given before it, valid ones). */
    g_autofree char *c = g_strdup_printf("%s%s --version", cmds[i],
                                         strcmp(cmds[i], "run") == 0 ? " -t whatever -b 3" : "");
    run_result ra = run(a), rb = run(b), rc = run(c);
    cr_expect_eq(ra.status, 0, "%s", a);
    cr_expect_str_eq(ra.out, rb.out, "`%s` differs from `%s`", a, b);
    cr_expect_eq(rc.status, 0, "`%s`: %s", c, rc.err);
    cr_expect_str_eq(rc.out, v.out, "`%s`", c);
    run_free(&ra), run_free(&rb), run_free(&rc);
  }
  run_free(&v);
  expect_input_error("help frobnicate", "unknown command 'frobnicate'");
  /* `help help` is the program's help (it said "unknown command 'help'"), as `help` alone. */
  run_result h = run("help help"), g = run("--help");
  cr_expect_eq(h.status, 0, "%s", h.err);
  cr_expect_str_eq(h.out, g.out);
  run_free(&h), run_free(&g);
}

/* `trainsim check SCENARIO` exits 0 (every golden holds); WHAT says what a failure means. */
static void expect_check_passes(const char *scenario, const char *what)
{
  g_autofree char *args = g_strdup_printf("check %s", scenario);
  run_result r = run(args);
  cr_expect_eq(r.status, 0, "%s: exit %d\n%s", what, r.status, r.out);
  run_free(&r);
}

/* Writes text to dir/name; returns the path (caller frees). */
static char *write_file(const char *dir, const char *name, const char *text)
{
  char *p = g_build_filename(dir, name, NULL);
  cr_assert(g_file_set_contents(p, text, -1, NULL));
  return p;
}

#define CHIP "[chip]\nname = c\npeak_tflops = 100\nmemory_GiB = 16\nmemory_bandwidth_GBps = 900\n"
#define DIMX "[dim.x]\nsize = 8\nshape = ring\nlink_bandwidth_GBps = 100\nlatency_us = 1\n"

Test(release, issue12_bad_inputs_are_refused)
{
  g_autofree char *dir = tmp_dir();
  /* validate: the default array past 256 chips was NULL and the program segfaulted. */
  expect_input_error("validate -m validate-mlp -s dp=512", "512 chips");
  expect_input_error("validate -m validate-mlp -s dp=67", "67 chips");
  /* The value as typed, not "1.0000000000000001e+308". */
  expect_input_error("validate -m validate-mlp -s dp=2 --lr 1e308",
                     "trainsim validate: --lr 1e+308: expected a learning rate in (0, 10]\n");
  /* A folder, FIFO or device as a model or topology is named as such. */
  g_autofree char *a1 = g_strdup_printf("run -t tpu-v3-8x8 -m %s -b 64", dir);
  expect_input_error(a1, ": a directory; expected a regular file (models/NAME.ini)");
  expect_input_error("run -t /dev/zero -m bert-large -b 64",
                     "/dev/zero: a device; expected a regular file (topologies/NAME.ini)");
  g_autofree char *fifo = g_build_filename(dir, "fifo", NULL);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  g_autofree char *a2 = g_strdup_printf("run -t tpu-v3-8x8 -m %s -b 64", fifo);
  expect_input_error(a2, ": a FIFO; expected a regular file");
  /* Options. */
  expect_input_error("run -t tpu-v3-8x8 -m bert-large -b 512 --split ''", "--split ''");
  expect_input_error("run -t tpu-v3-8x8 -m bert-large -b 512 -s tp=8@x+x,dp=8@y",
                     "'x' given twice");
  expect_input_error("sweep -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 -j -1", "--jobs -1");
  expect_input_error("search -t tpu-v3-8x8 -m bert-large -b 512 -j -1", "--jobs -1");
  expect_input_error("check tests/scenarios/tpu.ini -j -1", "--jobs -1");
  expect_input_error("sweep -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 --vary "
                     "peak_tflops=x1e308",
                     "factor 'x1e308'");
  /* Files: duplicate groups and keys, hex numbers, one range text, a visible CR. */
  g_autofree char *dupk = write_file(dir, "dupk.ini", CHIP "peak_tflops = 50\n" DIMX);
  g_autofree char *a3 = g_strdup_printf("run -t %s -m bert-large -b 64 -s dp=8", dupk);
  expect_input_error(a3, "dupk.ini:6: [chip] peak_tflops: key given twice (first at line 3)");
  g_autofree char *dupg = write_file(dir, "dupg.ini", CHIP DIMX "[dim.x]\nsize = 4\n");
  g_autofree char *a4 = g_strdup_printf("run -t %s -m bert-large -b 64 -s dp=8", dupg);
  expect_input_error(a4, "[dim.x]: group given twice (first at line 6)");
  g_autofree char *hex = write_file(
      dir, "hex.ini",
      "[chip]\nname = c\npeak_tflops = 0x64\nmemory_GiB = 16\nmemory_bandwidth_GBps = 900\n" DIMX);
  g_autofree char *a5 = g_strdup_printf("run -t %s -m bert-large -b 64 -s dp=8", hex);
  expect_input_error(a5, "peak_tflops='0x64'");
  g_autofree char *scen = write_file(dir, "s.ini",
                                     "[s]\ntopology = tpu-v3-8x8\nmodel = bert-large\nsplit = "
                                     "dp=64\nglobal_batch = 512\ntolerance_pct = 200\n");
  g_autofree char *a6 = g_strdup_printf("check %s", scen);
  run_result r = run(a6);
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_expect(strstr(r.err, "in [0, 100] in") == NULL, "range said twice: %s", r.err);
  run_free(&r);
  g_autofree char *crlf = write_file(dir, "crlf.ini", "[chip]\r\nname = c\r\nbad line\r\n");
  g_autofree char *a7 = g_strdup_printf("run -t %s -m bert-large -b 64", crlf);
  expect_input_error(a7, "'bad line\\r'");
  rm_rf(dir);
}

Test(release, tolerance_zero_means_unchanged)
{
  /* Goldens have 10 significant digits: with tolerance_pct = 0 every scenario used to drift. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *scen = write_file(dir, "s.ini",
                                     "[s]\ntopology = tpu-v3-8x8\nmodel = bert-large\nsplit = "
                                     "tp=8,dp=8\nglobal_batch = 512\ntolerance_pct = 0\n");
  g_autofree char *up = g_strdup_printf("check %s --update", scen);
  run_result r = run(up);
  cr_assert_eq(r.status, 0, "%s", r.err);
  run_free(&r);
  g_autofree char *ck = g_strdup_printf("check %s", scen);
  r = run(ck);
  cr_expect_eq(r.status, 0, "tolerance 0, unchanged prediction: exit %d\n%s", r.status, r.out);
  run_free(&r);
  /* and a golden 1e-6 relative away does drift */
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(scen, &text, NULL, NULL));
  char *g = strstr(text, "step_time_s = ");
  cr_assert_not_null(g);
  double golden = g_ascii_strtod(g + strlen("step_time_s = "), NULL);
  g_autofree char *moved = g_strdup_printf("[s]\ntopology = tpu-v3-8x8\nmodel = bert-large\nsplit "
                                           "= tp=8,dp=8\nglobal_batch = 512\ntolerance_pct = "
                                           "0\nstep_time_s = %.10g\n",
                                           golden * (1 + 1e-6));
  cr_assert(g_file_set_contents(scen, moved, -1, NULL));
  r = run(ck);
  cr_expect_eq(r.status, 1, "a 1e-6 drift with tolerance 0 passed: %s", r.out);
  /* that drift (-1e-4 %) rounds to zero at 3 decimals: shown +0.000, never "-0.000" */
  cr_expect(strstr(r.out, "-0.000") == NULL && strstr(r.out, "+0.000") != NULL, "%s", r.out);
  run_free(&r);
  rm_rf(dir);
}

Test(release, default_run_adds_a_pipeline_that_fits)
{
  /* GPT-3 175B on 256 H100s: the three default splits need 2.8-5.7 TiB per chip; the run adds
   * a pipeline with recomputation that fits, and names it the fastest that fits. */
  run_result r = run("run -t dgx-h100-32node -m gpt3-175b -b 1536");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "pp=8,schedule=1f1b,recompute=full,zero=1") != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "fastest that fits: tp=8,dp=4,pp=8") != NULL, "%s", r.out);
  run_free(&r);
  /* None fits at all: the last line points to search. */
  r = run("run -t tpu-v3-8x8 -m gpt3-175b -b 64");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "recompute=full") != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "`trainsim search`") != NULL, "%s", r.out);
  run_free(&r);
  /* A model that fits keeps the three defaults only. */
  r = run("run -t tpu-v3-8x8 -m bert-large -b 512");
  cr_assert_eq(r.status, 0);
  cr_expect(strstr(r.out, "pp=") == NULL && strstr(r.out, "trainsim search") == NULL, "%s", r.out);
  run_free(&r);
}

Test(release, replay_memory_is_not_applicable)
{
  g_autofree char *dir = tmp_dir();
  g_autofree char *a =
      g_strdup_printf("trace -t tpu-v3-8x8 -m bert-large -s dp=64 -b 64 -o %s/b.trace", dir);
  run_result r = run(a);
  cr_assert_eq(r.status, 0, "%s", r.err);
  run_free(&r);
  g_autofree char *b = g_strdup_printf("replay %s/b.trace -t tpu-v3-8x8", dir);
  r = run(b);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "0 B") == NULL, "replay claims 0 B per chip: %s", r.out);
  cr_expect(strstr(r.out, "n/a  n/a") != NULL, "%s", r.out);
  run_free(&r);
  /* JSON and CSV said fits_memory true and 0 bytes per chip: unknown is null / empty. */
  g_autofree char *j = g_strdup_printf("replay %s/b.trace -t tpu-v3-8x8 -f json", dir);
  r = run(j);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "\"fits_memory\" : null") != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "\"memory_per_chip_bytes\" : null") != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "\"fits_memory\" : true") == NULL, "%s", r.out);
  run_free(&r);
  g_autofree char *c = g_strdup_printf("replay %s/b.trace -t tpu-v3-8x8 -f csv", dir);
  r = run(c);
  cr_assert_eq(r.status, 0, "%s", r.err);
  {
    g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
    cr_assert(lines[0] != NULL && lines[1] != NULL, "%s", r.out);
    g_auto(GStrv) head = g_strsplit(lines[0], ",", -1), row = g_strsplit(lines[1], ",", -1);
    int found = 0;
    for (int k = 0; head[k] != NULL && row[k] != NULL; k++)
      if (strcmp(head[k], "fits_memory") == 0 || strcmp(head[k], "memory_per_chip_bytes") == 0) {
        cr_expect_str_eq(row[k], "", "%s is '%s' for a trace", head[k], row[k]);
        found++;
      }
    cr_expect_eq(found, 2, "%s", lines[0]);
  }
  run_free(&r);
  /* A run's JSON still says whether it fits. */
  r = run("run -t tpu-v3-8x8 -m bert-large -s dp=64 -b 512 -f json");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "\"fits_memory\" : true") != NULL, "%s", r.out);
  run_free(&r);
  rm_rf(dir);
}

Test(release, vary_values_are_range_checked)
{
  /* Absolute values past what a topology file accepts overflowed (memory_GiB=1e300 gave a
   * capacity of 0 bytes that "fits"); a factor can take a value out of range too. */
  const char *base = "sweep -t tpu-v2-8 -m mlp -s dp=4 -b 16 -j 1 --vary ";
  static const struct {
    const char *vary, *needle;
  } cases[] = {
      {"memory_GiB=-5",
       "--vary 'memory_GiB=-5': value '-5': expected a capacity in GiB in (0, 1e+09]"},
      {"link_bandwidth_GBps=0", "value '0': expected a bandwidth in GB/s in [0.001, 1e+06]"},
      {"dim.x.link_bandwidth_GBps=0", "value '0': expected a bandwidth in GB/s"},
      {"memory_GiB=1e300", "value '1e300': expected a capacity in GiB"},
      {"peak_tflops=1e308", "value '1e308': expected a peak in TFLOP/s"},
      {"latency_us=1e300", "expected a latency in us in [0, 1e+06]"},
      {"memory_bandwidth_GBps=2e6", "value '2e6'"},
      {"compute_efficiency=1.5", "expected a fraction in [0.001, 1]"},
      {"peak_tflops=x1e6", "--vary 'peak_tflops=x1e6': value 'x1000000' gives"},
      {"compute_efficiency=x1,x4", "value 'x4' gives"},
      {"compute_efficiency=x4", "expected a fraction in [0.001, 1]"},
      /* The low ends: 1e-300 printed step times of 38-digit seconds, x1e-6 of 108184 s. */
      {"peak_tflops=1e-300", "value '1e-300': expected a peak in TFLOP/s in [0.001, 1e+06]"},
      {"compute_efficiency=x1e-6", "expected a fraction in [0.001, 1]"},
      {"link_bandwidth_GBps=1e-4", "value '1e-4': expected a bandwidth in GB/s in [0.001, 1e+06]"},
      {"flash_efficiency=1e-300", "expected a fraction in [0.001, 1] or 0"},
      {"straggler=1e-300", "value '1e-300': expected a speed factor in [0.001, 1]"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *a = g_strconcat(base, cases[i].vary, NULL);
    expect_input_error(a, cases[i].needle);
  }
  /* In range: runs. */
  g_autofree char *ok = g_strconcat(base, "latency_us=0,1 --vary memory_GiB=8", NULL);
  run_result r = run(ok);
  cr_expect_eq(r.status, 0, "%s", r.err);
  run_free(&r);
}

Test(release, output_to_a_device_writes_the_device)
{
  /* -o /dev/null used to be written to a temporary in /dev and renamed over the device: as root
   * /dev/null and /dev/full became regular files. A device is written in place; a write error
   * (/dev/full: no space) is reported, not "wrote". */
  run_result r = run("platform -t tpu-v2-8 -o /dev/null");
  cr_expect_eq(r.status, 0, "%s", r.err);
  run_free(&r);
  GStatBuf st;
  cr_assert_eq(g_stat("/dev/null", &st), 0);
  cr_expect(S_ISCHR(st.st_mode), "/dev/null is no longer a character device");
  expect_input_error("platform -t tpu-v2-8 -o /dev/full", "/dev/full: cannot write: No space left");
  cr_assert_eq(g_stat("/dev/full", &st), 0);
  cr_expect(S_ISCHR(st.st_mode), "/dev/full is no longer a character device");
  expect_input_error("platform -t tpu-v2-8 -o /nonexistent-folder/x.xml",
                     "folder /nonexistent-folder does not exist");
  expect_input_error("platform -t tpu-v2-8 -o /tmp", "/tmp: is a folder");
}

Test(release, plot_and_calibrate_read_bounded_regular_files)
{
  /* plot /dev/zero allocated 4 GiB, plot FIFO hung; calibrate --against /dev/zero read until
   * memory ran out. Both now refuse what is not a regular file, as the other readers do. */
  expect_input_error("plot /dev/zero", "/dev/zero: a device; expected a regular file");
  expect_input_error("calibrate --against /dev/zero -o x.ini",
                     "--against /dev/zero: a device; expected a regular file");
  g_autofree char *dir = tmp_dir();
  g_autofree char *fifo = g_build_filename(dir, "fifo", NULL);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  g_autofree char *a = g_strdup_printf("plot %s", fifo);
  expect_input_error(a, "fifo: a FIFO; expected a regular file");
  g_autofree char *b = g_strdup_printf("calibrate --against %s -o x.ini", fifo);
  expect_input_error(b, "fifo: a FIFO; expected a regular file");
  /* Binary bytes: calibrate read them as a header "with no column topology"; both readers now
   * say what the file is. */
  g_autofree char *bin = g_build_filename(dir, "bin.csv", NULL);
  cr_assert(g_file_set_contents(bin, "topology,model\n\x01\xff\0\xfe,x\n", 19, NULL));
  g_autofree char *c = g_strdup_printf("calibrate --against %s -o x.ini", bin);
  expect_input_error(c, "bin.csv: not UTF-8 text; expected a CSV file");
  g_autofree char *v = g_strdup_printf("validate --against %s", bin);
  expect_input_error(v, "bin.csv: not UTF-8 text; expected a CSV file");
  rm_rf(dir);
}

Test(release, deeply_nested_json_is_refused_not_a_crash)
{
  /* 200,000 '[' overflowed json-glib's recursive parser: plot, merge and --comm-groups died of
   * SIGSEGV (exit 139) with nothing said. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *deep = g_strnfill(200000, '[');
  g_autofree char *json = g_build_filename(dir, "deep.json", NULL);
  cr_assert(g_file_set_contents(json, deep, -1, NULL));
  g_autofree char *sw = g_build_filename(dir, "sw", NULL);
  g_autofree char *swj = g_build_filename(sw, "sweep.json", NULL);
  g_autofree char *swc = g_build_filename(sw, "sweep.csv", NULL);
  cr_assert_eq(g_mkdir(sw, 0700), 0);
  cr_assert(g_file_set_contents(swj, deep, -1, NULL));
  cr_assert(g_file_set_contents(swc, "", -1, NULL));
  g_autofree char *a = g_strdup_printf("plot %s -o %s/p", json, dir);
  expect_input_error(a, "deep.json:1: JSON nested deeper than 64 levels; expected sweep.json");
  g_autofree char *b = g_strdup_printf("merge %s -o %s/m", sw, dir);
  expect_input_error(b, "sweep.json:1: JSON nested deeper than 64 levels");
  g_autofree char *c = g_strdup_printf(
      "replay -t dgx-a100-1node --comm-groups %s %s/traces/imported/chakra/bert-base-dp8/"
      "bert-base-dp8.0.et",
      json, TS_SOURCE_DIR);
  expect_input_error(c, "deep.json:1: JSON nested deeper than 64 levels; expected {\"GROUP\"");
  rm_rf(dir);
}

Test(release, a_key_given_twice_in_trainsims_json_is_refused)
{
  /* json-glib keeps the last of two members with one name: a sweep.json edited by hand with
   * "step_time_s" twice was merged and plotted with its second value, nothing said. Now one
   * line names the file, the line and the key. The same name in two objects is fine. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *sw = g_build_filename(dir, "sw", NULL);
  g_autofree char *a =
      g_strdup_printf("sweep -t tpu-v2-8 -m mlp -b 16 -s dp=4 -j 1 --shard 0/1 -o %s", sw);
  run_result r = run(a);
  cr_assert_eq(r.status, 0, "%s", r.err);
  run_free(&r);
  g_autofree char *swj = g_build_filename(sw, "sweep.json", NULL);
  g_autofree char *m = g_strdup_printf("merge %s -o %s/m", sw, dir);
  r = run(m);
  cr_assert_eq(r.status, 0, "a clean shard: %s", r.err);
  run_free(&r);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(swj, &text, NULL, NULL));
  char *at = strstr(text, "      \"step_time_s\" : ");
  cr_assert(at != NULL, "%s", text);
  int line = 1;
  for (const char *q = text; q < at; q++)
    line += *q == '\n';
  g_autofree char *head = g_strndup(text, (gsize)(at - text));
  g_autofree char *dup =
      g_strconcat(head, "      \"step_time_s\" : 1.0,\n", at, NULL); /* the first one is line */
  cr_assert(g_file_set_contents(swj, dup, -1, NULL));
  g_autofree char *want = g_strdup_printf(
      "sweep.json:%d: key \"step_time_s\" given twice in one object; expected each key once",
      line + 1);
  g_autofree char *m2 = g_strdup_printf("merge %s -o %s/m2", sw, dir);
  expect_input_error(m2, want);
  g_autofree char *p = g_strdup_printf("plot %s -o %s/p", swj, dir);
  expect_input_error(p, want);
  rm_rf(dir);
}

Test(release, a_one_chip_profile_is_named_as_one_chip)
{
  /* The header of a run on the profile `trainsim calibrate` writes read "MLP ... on AMD EPYC
   * (1 core, fp32) 1 (1 chip)": the chip's own parentheses, then a 1-dimension array "1". */
  run_result r = run("run -t host-cpu -m mlp -b 16 -s dp=1");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(g_str_has_prefix(r.out, "MLP 784-1024-1024-10 on one AMD EPYC (1 core, fp32), global "
                                    "batch 16, analytic backend\n"),
            "%s", r.out);
  run_free(&r);
  /* An array keeps its form. */
  r = run("run -t tpu-v2-8 -m mlp -b 16 -s dp=4");
  cr_expect(strstr(r.out, " on TPU v2-8 board 2x2 (4 chips), ") != NULL, "%s", r.out);
  run_free(&r);
}

Test(release, calibrate_against_refuses_absurd_step_times)
{
  /* 1e-300 s was fitted (refine round MAPE 4e95%) and 1e300 s too; validate --against refuses
   * both. No profile is written. */
  static const char *const v[] = {"1e-300", "1e300", "nan", "-5"};
  g_autofree char *dir = tmp_dir();
  g_autofree char *csv = g_build_filename(dir, "c.csv", NULL);
  g_autofree char *out = g_build_filename(dir, "c.ini", NULL);
  for (size_t i = 0; i < G_N_ELEMENTS(v); i++) {
    g_autofree char *text = g_strdup_printf(
        "topology,model,split,global_batch,micro_batch,measured_step_time_s\n"
        "dgx-a100-1node,gpt3-350m,dp=8,8,1,0.1\ndgx-a100-1node,gpt3-350m,dp=8,8,1,%s\n",
        v[i]);
    cr_assert(g_file_set_contents(csv, text, -1, NULL));
    g_autofree char *a = g_strdup_printf("calibrate --against %s -o %s", csv, out);
    g_autofree char *want = g_strdup_printf(
        "c.csv:3: column measured_step_time_s: '%s': expected a step time in seconds in "
        "[1e-06, 1e+12]",
        v[i]);
    expect_input_error(a, want);
    cr_assert(!g_file_test(out, G_FILE_TEST_EXISTS), "%s: a profile was written", v[i]);
  }
  rm_rf(dir);
}

Test(release, calibrate_against_reads_validates_measurement_columns)
{
  /* calibrate --against took only measured_step_time_s while validate --against takes
   * step_time_s or step_time_ms (and machine for topology, algorithm for the collective
   * algorithm): one measurement file now feeds both. The same rows in milliseconds fit the same
   * values as in seconds. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *csv = g_build_filename(dir, "c.csv", NULL);
  g_autofree char *out = g_build_filename(dir, "c.ini", NULL);
  static const char *const heads[] = {"topology,model,split,global_batch,micro_batch,"
                                      "measured_step_time_s,set",
                                      "machine,model,split,global_batch,micro_batch,"
                                      "step_time_ms,set"};
  static const char *const t[2][2] = {{"0.1", "0.35"}, {"100", "350"}};
  char *fits[2];
  for (int k = 0; k < 2; k++) {
    g_autofree char *text = g_strdup_printf("%s\n"
                                            "dgx-a100-1node,gpt3-350m,dp=8,8,1,%s,fit\n"
                                            "dgx-a100-1node,gpt3-350m,dp=8,32,4,%s,fit\n",
                                            heads[k], t[k][0], t[k][1]);
    cr_assert(g_file_set_contents(csv, text, -1, NULL));
    g_autofree char *a = g_strdup_printf("calibrate -q --against %s -o %s", csv, out);
    run_result r = run(a);
    cr_assert_eq(r.status, 0, "%s: %s", heads[k], r.err);
    const char *body = strchr(r.out, '\n'); /* after the line naming the file */
    cr_assert(body != NULL && strstr(body, "compute_efficiency") != NULL, "%s", r.out);
    fits[k] = g_strdup(body);
    run_free(&r);
  }
  cr_expect_str_eq(fits[1], fits[0], "milliseconds fitted otherwise than seconds");
  /* And validate reads calibrate's file: measured_step_time_s, bucket_MiB none ("expected a
   * number in (0, 1.04858e+06]" before). */
  run_result v = run("validate --against " TS_SOURCE_DIR
                     "/data/published/vtrain/trainsim/a100-sample.csv --format csv");
  cr_expect_eq(v.status, 0, "%s", v.err);
  cr_expect(strstr(v.out, "measured_step_time_s") != NULL, "%s", v.out);
  run_free(&v);
  g_free(fits[0]);
  g_free(fits[1]);
  /* Two step-time columns, and a row validate would vary, are refused; nothing is written. */
  g_remove(out);
  cr_assert(g_file_set_contents(csv,
                                "topology,model,split,global_batch,micro_batch,step_time_s,"
                                "step_time_ms\ndgx-a100-1node,gpt3-350m,dp=8,8,1,0.1,100\n",
                                -1, NULL));
  g_autofree char *b = g_strdup_printf("calibrate --against %s -o %s", csv, out);
  expect_input_error(b, "c.csv:1: column step_time_ms: given with step_time_s; expected one");
  cr_assert(g_file_set_contents(csv,
                                "topology,vary,model,split,global_batch,micro_batch,step_time_s\n"
                                "dgx-a100-1node,chips=4,gpt3-350m,dp=8,8,1,0.1\n",
                                -1, NULL));
  expect_input_error(b, "c.csv:2: column vary: 'chips=4': calibrate does not vary topologies");
  cr_assert(g_file_set_contents(csv,
                                "topology,model,split,global_batch,micro_batch,step_time_ms\n"
                                "dgx-a100-1node,gpt3-350m,dp=8,8,1,1e-6\n",
                                -1, NULL));
  expect_input_error(b, "c.csv:2: column step_time_ms: '1e-6': expected a step time in "
                        "milliseconds in [0.001, 1e+15]");
  cr_assert(!g_file_test(out, G_FILE_TEST_EXISTS), "a profile was written");
  rm_rf(dir);
}

/* A vary cell that gives one key twice is refused, as sweep refuses a second --vary of a key:
 * "dim.x.size=4;dim.x.size=8" ran on 8 chips and two factors compounded. */
Test(release, validate_against_refuses_a_vary_key_given_twice)
{
  g_autofree char *dir = tmp_dir();
  g_autofree char *csv = g_build_filename(dir, "v.csv", NULL);
  cr_assert(g_file_set_contents(csv,
                                "topology,vary,model,split,global_batch,micro_batch,step_time_s\n"
                                "tpu-v3-8x8,dim.x.size=4;dim.x.size=8,mlp,dp=64,64,1,0.1\n",
                                -1, NULL));
  g_autofree char *a = g_strdup_printf("validate --against %s", csv);
  expect_input_error(a, "v.csv:2: column vary: 'dim.x.size=8': key dim.x.size given twice");
  rm_rf(dir);
}

Test(release, a_zero_batch_is_refused_not_missing)
{
  /* -b 0 was reported as "missing --global-batch" although it was given. */
  expect_input_error("run -t tpu-v2-8 -m mlp -b 0", "--global-batch 0: expected a positive");
  expect_input_error("search -t tpu-v2-8 -m mlp -b 0", "--global-batch 0: expected a positive");
  expect_input_error("run -t tpu-v2-8 -m mlp", "missing --global-batch");
}

Test(release, export_writes_only_inside_its_folder)
{
  /* export --to chakra --name ../x wrote x.*.et beside the output folder, and said "into DIR". */
  g_autofree char *dir = tmp_dir();
  g_autofree char *tr =
      g_strdup_printf("trace -t tpu-v2-8 -m mlp -s dp=4 -b 16 -o %s/m.trace", dir);
  run_result r = run(tr);
  cr_assert_eq(r.status, 0, "%s", r.err);
  run_free(&r);
  static const char *const bad[] = {"../evil", "a/b", "..", "."};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *a = g_strdup_printf(
        "export --to chakra -t tpu-v2-8 %s/m.trace -o %s/out --name %s", dir, dir, bad[i]);
    g_autofree char *want = g_strdup_printf("--name '%s': expected a file name prefix", bad[i]);
    expect_input_error(a, want);
  }
  g_autofree char *evil = g_build_filename(dir, "evil.0.et", NULL);
  cr_expect(!g_file_test(evil, G_FILE_TEST_EXISTS), "a file was written outside the folder");
  rm_rf(dir);
}

Test(release, importer_crashes_found_by_fuzzing_are_input_errors)
{
  /* Each input that once crashed an importer (tests/fuzz/regressions/astrasim/, replayed by
   * fuzz_astrasim_corpus in-process) is, through the program, one line and exit 2. The first:
   * a workload declaring more layers than it has, ending in a blank line, segfaulted import. */
  g_autofree char *dir = g_build_filename(TS_SOURCE_DIR, "tests/fuzz/regressions/astrasim", NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  cr_assert_not_null(d);
  int n = 0;
  g_autofree char *out = tmp_dir();
  for (const char *f; (f = g_dir_read_name(d)) != NULL; n++) {
    g_autofree char *a = g_strdup_printf(
        "import --from astrasim -t dgx-a100-1node %s/%s -o %s/x.trace", dir, f, out);
    expect_input_error(a, f);
  }
  g_dir_close(d);
  cr_expect_gt(n, 0);
  rm_rf(out);
}

Test(release, options_are_refused_one_by_one)
{
  /* validate named seven options and four ranges for any one bad value; --cfg with the
   * analytic backend was silently ignored. */
  expect_input_error("validate -m validate-mlp -s dp=4 --tolerance -1",
                     "validate: --tolerance -1: expected a normwise relative error in [0, 1] "
                     "(0: the precision's default)\n");
  expect_input_error("validate -m validate-mlp -s dp=4 --steps 0",
                     "validate: --steps 0: expected a number of steps in [1, 1000]\n");
  expect_input_error("validate -m validate-mlp -s dp=4 --seed -4", "--seed -4: expected");
  expect_input_error("collective -t tpu-v2-8 --bytes 1e6 --cfg network/model:LV08",
                     "--cfg 'network/model:LV08': the analytic backend takes no SimGrid settings");
  expect_input_error("run -t tpu-v2-8 -m mlp -s dp=4 -b 16 --cfg x", "--cfg 'x': the analytic");
  /* An empty name said "empty topologies name". */
  expect_input_error("run -t '' -m mlp -b 16", "--topology '': empty; expected a file path");
  expect_input_error("run -t tpu-v2-8 -m '' -b 16", "--model '': empty; expected a file path");
  run_result r =
      run("collective -t tpu-v2-8 --bytes 1e6 --backend simgrid --cfg network/model:LV08");
  cr_expect_eq(r.status, 0, "%s", r.err);
  run_free(&r);
}

Test(release, sweep_lists_name_each_value_once)
{
  /* -m mlp,mlp predicted every configuration twice (duplicate rows); search --max-chips -2 was
   * compared with the array's size instead of refused. */
  const char *base = "sweep -t tpu-v2-8 -m mlp -b 16 -s dp=4 -j 1 ";
  static const struct {
    const char *extra, *needle;
  } cases[] = {
      {"-m mlp", "--model 'mlp': given twice"},
      {"-t tpu-v2-8", "--topology 'tpu-v2-8': given twice"},
      {"-b 16", "--global-batch '16': given twice"},
      {"-s dp=4", "--split 'dp=4': given twice"},
      {"--micro-batch 1,1", "--micro-batch '1': given twice"},
      /* The same for a --vary list (two identical rows per configuration). */
      {"--vary peak_tflops=x1,x1.0", "--vary 'peak_tflops=x1,x1.0': value 2 equals value 1"},
      {"--vary dims=2x2,4x4,2x2", "value 3 equals value 1; expected each value once"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *a = g_strconcat(base, cases[i].extra, NULL);
    expect_input_error(a, cases[i].needle);
  }
  expect_input_error("search -t tpu-v2-8 -m mlp -b 16 --max-chips -2",
                     "--max-chips -2: expected a number of chips >= 1 (leave it out for no bound)");
  /* --max-chips 0 was accepted by both: search read it as no bound, sweep kept every
   * configuration although it said "expected a positive number". */
  expect_input_error("search -t tpu-v2-8 -m mlp -b 16 --max-chips 0",
                     "--max-chips 0: expected a number of chips >= 1 (leave it out for no bound)");
  expect_input_error("sweep -t tpu-v2-8 -m mlp -b 16 -s dp=4 -j 1 --max-chips 0",
                     "--max-chips 0: expected a number of chips >= 1 (leave it out for no bound)");
}

Test(release, check_update_reads_groups_as_check_does)
{
  /* Found by fuzz_scenario: a group line led by a carriage return ("\r[b]") is a group to the
   * reader, but --update's rewrite skipped only blanks and tabs, so it wrote [b]'s golden with
   * [a]'s value and the next check drifted. tests/fuzz/regressions/scenario/ keeps the input. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *scen = write_file(dir, "s.ini",
                                     "[a]\ntopology = tpu-v2-8\nmodel = mlp\nsplit = dp=4\n"
                                     "global_batch = 16\ntolerance_pct = 0\nstep_time_s = 1\n"
                                     "\r[b]\ntopology = tpu-v2-8\nmodel = mlp\nsplit = dp=4\n"
                                     "global_batch = 64\ntolerance_pct = 0\nstep_time_s = 1\n");
  g_autofree char *up = g_strdup_printf("check %s --update", scen);
  run_result r = run(up);
  cr_assert_eq(r.status, 0, "%s", r.err);
  run_free(&r);
  expect_check_passes(scen, "after --update, check drifts");
  rm_rf(dir);
}

Test(release, export_says_what_it_creates_and_replaces)
{
  /* export wrote over an earlier export's files without a word (issue 12). */
  g_autofree char *dir = tmp_dir();
  g_autofree char *out = g_build_filename(dir, "tit", NULL);
  g_autofree char *args = g_strdup_printf(
      "export --to tit -t dgx-a100-1node %s/traces/handwritten/data-parallel-serial.trace -o %s",
      TS_SOURCE_DIR, out);
  run_result r = run(args);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect_str_eq(r.out, "", "export's notes belong on stderr");
  cr_expect(strstr(r.err, "created folder") != NULL, "no note of the new folder: %s", r.err);
  cr_expect(strstr(r.err, "replacing") == NULL, "a first export replaced something: %s", r.err);
  run_free(&r);
  r = run(args);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.err, "replacing 9 files of an earlier export") != NULL,
            "8 ranks + index.txt replaced without that note: %s", r.err);
  cr_expect(strstr(r.err, "created folder") == NULL, "%s", r.err);
  run_free(&r);
  rm_rf(dir);
}

Test(release, trace_numbers_are_range_checked_with_file_and_line)
{
  /* bytes=1e30 was read and replayed as given (issue 12): every numeric field of a trace has a
   * range (docs/formats.md), and a value outside it is one line naming file:line. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *src =
      g_strdup_printf("%s/traces/handwritten/data-parallel-serial.trace", TS_SOURCE_DIR);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(src, &text, NULL, NULL));
  static const struct {
    const char *from, *to, *needle;
  } cases[] = {
      {"bytes=268435456", "bytes=1e30",
       "bad.trace:16: bytes='1e30': expected a number of bytes in [0, 9007199254740992]"},
      {"bytes=268435456", "bytes=-1", "bad.trace:16: bytes='-1': expected a number of bytes"},
      {"flops=2e12", "flops=1e300", "bad.trace:15: flops='1e300': expected a number of FLOP in"},
      {"mem_bytes=1e9", "mem_bytes=inf", "bad.trace:15: mem_bytes='inf': expected"},
      {"model_flops=0", "model_flops=1e40", "bad.trace:9: model_flops='1e40': expected"},
      {"samples=8", "samples=nan", "bad.trace:9: samples='nan': expected a number of samples"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    cr_assert(strstr(text, cases[i].from) != NULL, "%s not in %s", cases[i].from, src);
    g_auto(GStrv) parts = g_strsplit(text, cases[i].from, 2);
    g_autofree char *bad = g_strjoin(cases[i].to, parts[0], parts[1], NULL);
    g_autofree char *path = write_file(dir, "bad.trace", bad);
    g_autofree char *args = g_strdup_printf("replay %s -t dgx-a100-1node", path);
    expect_input_error(args, cases[i].needle);
  }
  /* bw_Bps=1e-300 was read and replayed to a step of 1e37 s. */
  g_autofree char *src2 =
      g_strdup_printf("%s/traces/handwritten/every-op-kind.trace", TS_SOURCE_DIR);
  g_autofree char *text2 = NULL;
  cr_assert(g_file_get_contents(src2, &text2, NULL, NULL));
  g_auto(GStrv) parts = g_strsplit(text2, "bw_Bps=2e9", 2);
  cr_assert(parts[1] != NULL, "bw_Bps=2e9 not in %s", src2);
  g_autofree char *bad = g_strjoin("bw_Bps=1e-300", parts[0], parts[1], NULL);
  g_autofree char *path = write_file(dir, "bw.trace", bad);
  g_autofree char *args = g_strdup_printf("replay %s -t dgx-a100-1node", path);
  expect_input_error(args, "bw.trace:29: bw_Bps='1e-300': expected a bandwidth in bytes/s in "
                           "[1000, 1e15]");
  rm_rf(dir);
}

Test(release, search_cost_and_energy_need_a_price_and_a_power)
{
  /* Without a price every cost was 0: --objective cost ranked by nothing and every split passed
   * --budget, exit 0 (issue 14 audit). Likewise energy without a chip power. */
  expect_input_error("search -t tpu-v2-8 -m mlp -b 16 --steps 10 --objective cost",
                     "--objective cost: tpu-v2-8 has no price; expected --price-per-hour");
  expect_input_error("search -t tpu-v2-8 -m mlp -b 16 --steps 10 --budget 100",
                     "--budget: tpu-v2-8 has no price");
  expect_input_error("search -t tpu-v6e-16x16 -m mlp -b 256 --objective energy",
                     "--objective energy: tpu-v6e-16x16 has no chip power; expected --tdp-W");
  run_result r = run("search -t tpu-v2-8 -m mlp -b 16 -j 1 -k 1 --steps 10 --objective cost "
                     "--price-per-hour 1.5");
  cr_expect_eq(r.status, 0, "%s", r.err);
  run_free(&r);
}

Test(release, every_shipped_machine_has_a_sourced_failure_model)
{
  /* Issue 14: failure defaults existed on the DGX H100 files only. Every shipped GPU cluster
   * and TPU pod now has a chip or node MTBF and a checkpoint bandwidth, each with its source
   * or the word ESTIMATE in the comment lines just above it. Not machines: asym-16x16 (a
   * hypothetical array) and host-cpu (the validator's one-core profile). */
  g_autofree char *dir = g_build_filename(TS_SOURCE_DIR, "topologies", NULL);
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  cr_assert_not_null(d);
  int checked = 0;
  for (const char *name; (name = g_dir_read_name(d)) != NULL;) {
    if (!g_str_has_suffix(name, ".ini") || strcmp(name, "asym-16x16.ini") == 0 ||
        strcmp(name, "host-cpu.ini") == 0)
      continue;
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(ts_topo) t = ts_topo_load(path, &err);
    cr_assert_not_null(t, "%s: %s", name, err ? err->message : "");
    cr_expect(t->cap.mtbf_chip_s > 0 || (t->cap.mtbf_node_s > 0 && t->cap.chips_per_node >= 0),
              "%s: no chip or node MTBF", name);
    cr_expect(t->cap.storage_Bps > 0, "%s: no storage_GBps_per_chip", name);
    g_autofree char *text = NULL;
    cr_assert(g_file_get_contents(path, &text, NULL, NULL));
    /* The comment block right above each key names a source (an arXiv id) or says ESTIMATE. */
    static const char *const keys[] = {"\nmtbf_chip_hours", "\nmtbf_node_hours",
                                       "\nstorage_GBps_per_chip", "\nprice_per_hour"};
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (size_t k = 0; k < G_N_ELEMENTS(keys); k++)
      for (int i = 0; lines[i] != NULL; i++) {
        if (!g_str_has_prefix(lines[i], keys[k] + 1))
          continue;
        GString *comment = g_string_new(NULL);
        for (int j = i - 1; j >= 0 && lines[j][0] == '#'; j--)
          g_string_prepend(g_string_prepend(comment, "\n"), lines[j]);
        gboolean sourced = strstr(comment->str, "ESTIMATE") != NULL ||
                           strstr(comment->str, "arXiv") != NULL ||
                           g_regex_match_simple("\\b20[0-9][0-9]\\b", comment->str, 0, 0);
        cr_expect(sourced, "%s: %s has no dated source or ESTIMATE in the comment above it:\n%s",
                  name, lines[i], comment->str);
        g_string_free(comment, TRUE);
      }
    checked++;
  }
  cr_expect_geq(checked, 22, "only %d shipped machines checked", checked);
}

Test(release, a_slow_fabric_is_named_in_the_header)
{
  /* --straggler dim.y=0.5 halved the y links but the header said nothing about it (a chip
   * straggler was named): a degraded result must say what degraded it. */
  run_result r = run("run -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 --straggler dim.y=0.5 "
                     "--straggler chip:17=0.8");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "degraded: 1 straggler, slow fabric y at 50%") != NULL, "%s", r.out);
  run_free(&r);
}

Test(release, check_update_writes_through_a_symlink)
{
  /* A golden file linked from elsewhere (a shared scenarios folder): --update replaced the link
   * by a regular file, so the shared file kept its old goldens and the link was gone. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *real = write_file(dir, "shared.ini",
                                     "[a]\ntopology = tpu-v2-8\nmodel = mlp\nsplit = dp=4\n"
                                     "global_batch = 16\ntolerance_pct = 1\nstep_time_s = 1\n");
  g_autofree char *link = g_build_filename(dir, "link.ini", NULL);
  cr_assert_eq(symlink("shared.ini", link), 0);
  g_autofree char *up = g_strdup_printf("check %s --update", link);
  run_result r = run(up);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "wrote") == NULL && strstr(r.err, "wrote the golden") != NULL,
            "the note belongs on stderr, the table on stdout:\n%s---\n%s", r.out, r.err);
  run_free(&r);
  cr_expect(g_file_test(link, G_FILE_TEST_IS_SYMLINK),
            "check --update replaced the symlink by a regular file");
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(real, &text, NULL, NULL));
  cr_expect(strstr(text, "step_time_s = 1\n") == NULL, "the linked file kept its old golden:\n%s",
            text);
  expect_check_passes(real, "the linked file drifts after --update");
  rm_rf(dir);
}

Test(release, check_names_the_file_group_and_key)
{
  g_autofree char *dir = tmp_dir();
  /* The planner's refusals named command-line options (--split 'dp=3') in a file that has none. */
  g_autofree char *s1 = write_file(dir, "s1.ini",
                                   "[a]\ntopology = tpu-v2-8\nmodel = mlp\nsplit = dp=3\n"
                                   "global_batch = 8\ntolerance_pct = 1\n");
  g_autofree char *a1 = g_strdup_printf("check %s", s1);
  expect_input_error(a1, "s1.ini: [a] split='dp=3': uses 3 chips");
  g_autofree char *s2 = write_file(dir, "s2.ini",
                                   "[a]\ntopology = tpu-v2-8\nmodel = mlp\nsplit = dp=4\n"
                                   "global_batch = 6\ntolerance_pct = 1\n");
  g_autofree char *a2 = g_strdup_printf("check %s", s2);
  expect_input_error(a2, "s2.ini: [a] global_batch=6: expected");
  /* A binary file named as the model: said so, not its first bytes echoed. NUL at byte 21
   * (1-based), on line 4; the bytes after it are not UTF-8. */
  static const char binary[] = "line1\nline2\nline3\nab\0\xff\xfe\x01"
                               "cd\n";
  g_autofree char *bin = g_build_filename(dir, "model.et", NULL);
  cr_assert(g_file_set_contents(bin, binary, sizeof binary - 1, NULL));
  g_autofree char *s3 = g_strdup_printf("[a]\ntopology = tpu-v2-8\nmodel = %s\nsplit = dp=4\n"
                                        "global_batch = 8\ntolerance_pct = 1\n",
                                        bin);
  g_autofree char *s3p = write_file(dir, "s3.ini", s3);
  g_autofree char *a3 = g_strdup_printf("check %s", s3p);
  expect_input_error(a3, "model.et:4: binary data (byte 21 is NUL); expected an INI text file");
  run_result r = run(a3);
  cr_expect(g_utf8_validate(r.err, -1, NULL), "stderr is not UTF-8: %s", r.err);
  run_free(&r);
  /* A missing key names the group and what was expected. */
  g_autofree char *s4 = write_file(dir, "s4.ini",
                                   "[a]\ntopology = tpu-v2-8\nmodel = mlp\nglobal_batch = 8\n"
                                   "tolerance_pct = 1\n");
  g_autofree char *a4 = g_strdup_printf("check %s", s4);
  expect_input_error(a4, "s4.ini: [a] split: missing; expected a split");
  rm_rf(dir);
}

Test(release, failed_write_keeps_the_previous_output_set)
{
  g_autofree char *dir = tmp_dir();
  g_autofree char *csv = g_build_filename(dir, "sweep.csv", NULL);
  g_autofree char *json = g_build_filename(dir, "sweep.json", NULL);
  cr_assert(g_file_set_contents(csv, "old\n", -1, NULL));
  cr_assert_eq(g_mkdir(json, 0755), 0); /* sweep.json cannot be replaced */
  g_autofree char *a =
      g_strdup_printf("sweep -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 -j 1 -o %s", dir);
  run_result r = run(a);
  cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
  cr_expect(strstr(r.err, "sweep.json") != NULL, "%s", r.err);
  run_free(&r);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(csv, &text, NULL, NULL));
  cr_expect_str_eq(text, "old\n", "sweep.csv replaced although sweep.json could not be");
  /* no temporary left behind */
  GDir *d = g_dir_open(dir, 0, NULL);
  int entries = 0;
  for (const char *f; (f = g_dir_read_name(d)) != NULL;)
    entries++;
  g_dir_close(d);
  cr_expect_eq(entries, 2, "temporaries left in %s", dir);
  /* A second run over a whole set says it replaces it. */
  cr_assert_eq(g_rmdir(json), 0);
  r = run(a);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.err, "replacing sweep.csv in") != NULL, "%s", r.err);
  run_free(&r);
  /* -o with missing parents: created, and said so. */
  g_autofree char *deep = g_build_filename(dir, "a", "b", NULL);
  g_autofree char *b =
      g_strdup_printf("run -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64 -o %s", deep);
  r = run(b);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.err, "created folder") != NULL, "%s", r.err);
  run_free(&r);
  rm_rf(dir);
}

Test(release, timeline_tracks_are_named_by_what_they_carry)
{
  /* A later pipeline stage's compute stream starts with a receive: it was named "pipeline
   * comm"; send and receive streams repeated one name on a chip. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *a = g_strdup_printf("run -t tpu-v3-8x8 -m bert-large -b 512 -s "
                                       "tp=2@x,pp=4@y,dp=8 --micro-batch 4 --timeline %s/t.json",
                                       dir);
  run_result r = run(a);
  cr_assert_eq(r.status, 0, "%s", r.err);
  run_free(&r);
  g_autofree char *path = g_build_filename(dir, "t.json", NULL);
  g_autoptr(JsonParser) p = json_parser_new();
  cr_assert(json_parser_load_from_file(p, path, NULL));
  JsonArray *ev =
      json_object_get_array_member(json_node_get_object(json_parser_get_root(p)), "traceEvents");
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  int compute = 0, pids = 0;
  for (guint i = 0; i < json_array_get_length(ev); i++) {
    JsonObject *e = json_array_get_object_element(ev, i);
    const char *name = json_object_get_string_member(e, "name");
    if (strcmp(name, "process_name") == 0)
      pids++;
    if (strcmp(name, "thread_name") != 0)
      continue;
    gint64 pid = json_object_get_int_member(e, "pid"), tid = json_object_get_int_member(e, "tid");
    const char *track =
        json_object_get_string_member(json_object_get_object_member(e, "args"), "name");
    g_autofree char *key = g_strdup_printf("%" G_GINT64_FORMAT "/%s", pid, track);
    cr_expect(!g_hash_table_contains(seen, key), "chip %" G_GINT64_FORMAT ": two tracks named %s",
              pid, track);
    g_hash_table_add(seen, g_steal_pointer(&key));
    if (tid == 0) {
      cr_expect_str_eq(track, "compute", "chip %" G_GINT64_FORMAT " stream 0", pid);
      compute++;
    }
  }
  cr_expect_eq(compute, pids, "every simulated chip has a compute track (%d of %d)", compute, pids);
  cr_expect_geq(pids, 4, "one chip per pipeline stage at least");
  rm_rf(dir);
}

Test(release, validate_catches_a_dropped_gradient_dependency)
{
  /* The executor ran ready computations before ready collectives and a collective freed by
   * its stream predecessor only in the next wave, so this missing dependency passed. */
  run_result r = run("validate -m mlp -s dp=4 --drop-deps 'grad all-reduce fc2..fc2'");
  cr_expect_eq(r.status, 1, "a dropped dependency passed: exit %d\n%s", r.status, r.out);
  cr_expect(strstr(r.out, "FAIL") != NULL, "%s", r.out);
  run_free(&r);
  r = run("validate -m mlp -s dp=4");
  cr_expect_eq(r.status, 0, "the intact trace must pass: %s", r.out);
  run_free(&r);
}

/* The member of a run JSON document's first result (or of its time_to_train.assumptions when
 * in_assumptions), as a node copy; NULL when missing. */
static JsonNode *run_member(const char *json, const char *name, gboolean in_assumptions)
{
  g_autoptr(JsonParser) p = json_parser_new();
  cr_assert(json_parser_load_from_data(p, json, -1, NULL), "not JSON: %s", json);
  JsonObject *r = json_array_get_object_element(
      json_object_get_array_member(json_node_get_object(json_parser_get_root(p)), "results"), 0);
  if (in_assumptions)
    r = json_object_get_object_member(json_object_get_object_member(r, "time_to_train"),
                                      "assumptions");
  JsonNode *n = r != NULL ? json_object_get_member(r, name) : NULL;
  return n != NULL ? json_node_copy(n) : NULL;
}

Test(release, tokens_per_second_in_every_table)
{
  /* tokens/s and tokens/s per chip were in run's text only with --tokens, and in search not at
   * all. Now: a column of every table, a field of every JSON row, tokens = samples x sequence
   * (BERT-Large: 512 tokens), and "-"/null for a model without a sequence (0 read as "0
   * tokens/s"). */
  run_result t = run("run -t tpu-v2-8 -m bert-large -b 64 -s dp=4");
  cr_assert_eq(t.status, 0, "%s", t.err);
  g_auto(GStrv) lines = g_strsplit(t.out, "\n", -1);
  cr_assert(g_strv_length(lines) > 2);
  g_auto(GStrv) head = g_strsplit_set(lines[1], " ", -1);
  int col_s = -1, col_t = -1, col_c = -1, k = 0;
  for (char **h = head; *h != NULL; h++)
    if (**h != '\0') {
      if (strcmp(*h, "samples/s") == 0)
        col_s = k;
      else if (strcmp(*h, "tokens/s") == 0)
        col_t = k;
      else if (strcmp(*h, "tokens/s/chip") == 0)
        col_c = k;
      k += strcmp(*h, "exposed") != 0; /* "exposed comm" is one column of two words */
    }
  cr_assert(col_s >= 0 && col_t == col_s + 1 && col_c == col_t + 1, "header: %s", lines[1]);
  g_auto(GStrv) row = g_strsplit_set(lines[2], " ", -1);
  double v[3] = {0};
  k = 0;
  for (char **c = row; *c != NULL; c++)
    if (**c != '\0') {
      if (k >= col_s && k <= col_c)
        v[k - col_s] = g_ascii_strtod(*c, NULL);
      /* "1.05 s": a number and its unit are two words of one cell */
      k += !(strcmp(*c, "s") == 0 || strcmp(*c, "ms") == 0 || strcmp(*c, "us") == 0);
    }
  cr_expect(fabs(v[1] / (512 * v[0]) - 1) < 0.01, "tokens/s %g vs samples/s %g x 512", v[1], v[0]);
  cr_expect(fabs(v[2] / (v[1] / 4) - 1) < 0.01, "tokens/s/chip %g vs %g / 4", v[2], v[1]);
  run_free(&t);
  run_result j = run("run -t tpu-v2-8 -m bert-large -b 64 -s dp=4 -f json");
  cr_assert_eq(j.status, 0);
  g_autoptr(JsonNode) tps = run_member(j.out, "tokens_per_s", FALSE);
  g_autoptr(JsonNode) sps = run_member(j.out, "samples_per_s", FALSE);
  cr_assert(tps != NULL && sps != NULL);
  double got = json_node_get_double(tps), want = 512 * json_node_get_double(sps);
  cr_expect(fabs(got / want - 1) < 1e-9, "tokens_per_s %g, expected %g", got, want);
  run_free(&j);
  run_result c = run("run -t tpu-v2-8 -m resnet50 -b 64 -s dp=4 --price-per-hour 1 -f json");
  cr_assert_eq(c.status, 0);
  g_autoptr(JsonNode) cnn = run_member(c.out, "tokens_per_s", FALSE);
  cr_expect(cnn != NULL && JSON_NODE_HOLDS_NULL(cnn), "a CNN's tokens_per_s is not null");
  /* tokens_per_usd held samples per USD for a CNN: null too. */
  g_autoptr(JsonNode) usd = run_member(c.out, "tokens_per_usd", FALSE);
  cr_expect(usd != NULL && JSON_NODE_HOLDS_NULL(usd), "a CNN's tokens_per_usd is not null");
  run_free(&c);
  run_result s = run("search -t tpu-v2-8 -m bert-large -b 64 -k 2 -j 1");
  cr_assert_eq(s.status, 0, "%s", s.err);
  cr_expect(strstr(s.out, "tokens/s/chip") != NULL, "search's table has no tokens/s:\n%s", s.out);
  run_free(&s);
  run_result sj = run("search -t tpu-v2-8 -m bert-large -b 64 -k 2 -j 1 -f json");
  cr_assert_eq(sj.status, 0, "%s", sj.err);
  cr_expect(strstr(sj.out, "\"tokens_per_s_per_chip\" :") != NULL, "%s", sj.out);
  run_free(&sj);
}

Test(release, restart_minutes_has_a_sourced_default)
{
  /* restart_minutes had no default: a topology without it (every shipped one) restarted in 0 s,
   * so goodput was an upper bound. 10 minutes now (ts_goodput.h, docs/planning.md), said in
   * the text and the JSON, and --restart-minutes or the key still win. */
  const char *base = "run -t dgx-h100-4node -m gpt3-1.3b -b 256 -s dp=32 --tokens 3e11 "
                     "--monte-carlo 0";
  run_result t = run(base);
  cr_assert_eq(t.status, 0, "%s", t.err);
  cr_expect(strstr(t.out, "restart 10 min (default) + checkpoint read") != NULL, "%s", t.out);
  run_free(&t);
  g_autofree char *js = g_strdup_printf("%s -f json", base);
  g_autofree char *j0 = g_strdup_printf("%s -f json --restart-minutes 0", base);
  run_result d = run(js), z = run(j0);
  cr_assert_eq(d.status, 0, "%s", d.err);
  cr_assert_eq(z.status, 0, "%s", z.err);
  g_autoptr(JsonNode) dm = run_member(d.out, "restart_minutes", TRUE);
  g_autoptr(JsonNode) dd = run_member(d.out, "restart_minutes_default", TRUE);
  g_autoptr(JsonNode) zd = run_member(z.out, "restart_minutes_default", TRUE);
  cr_assert(dm != NULL && dd != NULL && zd != NULL);
  double minutes = json_node_get_double(dm);
  cr_expect(minutes == 10.0, "restart_minutes %g, expected the default 10", minutes);
  cr_expect(json_node_get_boolean(dd) && !json_node_get_boolean(zd));
  /* The default costs time: more days expected than with free restarts. */
  g_autoptr(JsonParser) pd = json_parser_new(), pz = json_parser_new();
  cr_assert(json_parser_load_from_data(pd, d.out, -1, NULL));
  cr_assert(json_parser_load_from_data(pz, z.out, -1, NULL));
  JsonObject *td = json_object_get_object_member(
      json_array_get_object_element(
          json_object_get_array_member(json_node_get_object(json_parser_get_root(pd)), "results"),
          0),
      "time_to_train");
  JsonObject *tz = json_object_get_object_member(
      json_array_get_object_element(
          json_object_get_array_member(json_node_get_object(json_parser_get_root(pz)), "results"),
          0),
      "time_to_train");
  double ed = json_object_get_double_member(td, "days_expected"),
         ez = json_object_get_double_member(tz, "days_expected");
  cr_expect(ed > ez, "10-minute restarts: %g days, free restarts %g days", ed, ez);
  run_free(&d);
  run_free(&z);
}

Test(release, a_key_before_any_group_is_named)
{
  /* A key line before the first [group] (a pasted fragment) was reported as "'': expected a
   * [group] line" at the file's last line: the line and its text are named now. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *topo = write_file(dir, "t.ini", "# a topology\nname = t\n" CHIP DIMX);
  g_autofree char *args = g_strdup_printf("run -t %s -m mlp -b 8 -s dp=8", topo);
  g_autofree char *needle = g_strdup_printf("%s:2: 'name = t': a key before any [group]", topo);
  expect_input_error(args, needle);
  g_autofree char *scen = write_file(dir, "s.ini", "topology = tpu-v2-8\n[a]\nmodel = mlp\n");
  g_autofree char *cargs = g_strdup_printf("check %s", scen);
  g_autofree char *cneedle = g_strdup_printf("%s:1: 'topology = tpu-v2-8': a key before", scen);
  expect_input_error(cargs, cneedle);
  rm_rf(dir);
}

Test(release, time_to_train_never_hangs_or_writes_infinity)
{
  /* --tokens 1e30 made the Monte Carlo draw ~1e21 failures per run (a hang); a restart far
   * longer than the job MTBF made the expectation overflow to inf (not JSON). The first now
   * skips the Monte Carlo and says so; the second is refused, naming the figures. */
  const char *base = "run -t tpu-v3-8x8 -m gpt2-1.5b -b 512 -s dp=64 ";
  gint64 t0 = g_get_monotonic_time();
  g_autofree char *big = g_strconcat(base, "--tokens 1e30 -f json", NULL);
  run_result r = run(big);
  double secs = (g_get_monotonic_time() - t0) / 1e6;
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(secs < 60, "--tokens 1e30 took %.0f s", secs);
  g_autoptr(JsonNode) skipped = run_member(r.out, "monte_carlo_skipped", TRUE);
  cr_expect(skipped != NULL && json_node_get_boolean(skipped), "the skip is not said");
  run_free(&r);
  g_autofree char *slow = g_strconcat(base, "--tokens 1e12 --restart-minutes 1e6", NULL);
  expect_input_error(slow, "training would not finish");
  g_autofree char *rare = g_strconcat(base, "--tokens 1e12 --mtbf-chip-hours 0.1", NULL);
  expect_input_error(rare, "--restart-minutes, --checkpoint-every-minutes");
}

/* `env ENV trainsim ARGS` in dir with stdout and stderr sent to files (not a terminal): the
 * exit status; *out and *err the files' contents. */
static int run_to_files(const char *dir, const char *env, const char *args, char **out, char **err)
{
  g_autofree char *o = g_build_filename(dir, "stdout.txt", NULL);
  g_autofree char *e = g_build_filename(dir, "stderr.txt", NULL);
  g_autofree char *cmd = g_strdup_printf("cd '%s' && env %s %s %s > '%s' 2> '%s'", dir, env,
                                         TS_TRAINSIM_BIN, args, o, e);
  int st = system(cmd);
  cr_assert(g_file_get_contents(o, out, NULL, NULL) && g_file_get_contents(e, err, NULL, NULL));
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The progress lines of stderr: those that start with prefix and carry "(N%)"; N must rise. */
static int progress_lines(const char *err, const char *prefix)
{
  g_auto(GStrv) lines = g_strsplit(err, "\n", -1);
  int n = 0, last = -1;
  for (int i = 0; lines[i] != NULL; i++) {
    const char *pc = strstr(lines[i], "%)");
    if (!g_str_has_prefix(lines[i], prefix) || pc == NULL)
      continue;
    const char *open = pc;
    while (open > lines[i] && open[-1] != '(')
      open--;
    int v = atoi(open);
    cr_expect(v >= last, "percentages fall: '%s' after %d%%", lines[i], last);
    last = v;
    n++;
  }
  return n;
}

Test(release, progress_lines_when_stderr_is_a_file)
{
  /* Issue 12: a sweep, a search or a long simgrid run printed progress only on a terminal; a
   * log file got nothing for minutes. Now plain lines (no carriage return) at each tenth after
   * a quiet start (TRAINSIM_PROGRESS_S, 0 here so that a short job shows them), on stderr
   * only: stdout is the same bytes with or without them. */
  g_autofree char *dir = tmp_dir();
  const char *sweep = "sweep -t tpu-v3-8x8 -m bert-large -b 512 --splits auto -j 2 -o sw";
  g_autofree char *out0 = NULL, *err0 = NULL, *out1 = NULL, *err1 = NULL;
  cr_assert_eq(run_to_files(dir, "TRAINSIM_PROGRESS_S=1000", sweep, &out0, &err0), 0, "%s", err0);
  cr_assert_eq(run_to_files(dir, "TRAINSIM_PROGRESS_S=0", sweep, &out1, &err1), 0, "%s", err1);
  cr_expect_str_eq(out1, out0, "progress changed stdout");
  cr_expect(strchr(err1, '\r') == NULL, "a carriage return in a log: %s", err1);
  cr_expect(strstr(out1, "configurations (") == NULL, "progress on stdout: %s", out1);
  /* 140 configurations: the first, one per tenth (10% .. 90%), the last; never more. */
  int n = progress_lines(err1, "sweep: ");
  cr_expect(n >= 10 && n <= 12, "%d progress lines: %s", n, err1);
  cr_expect(strstr(err1, "sweep: 140/140 configurations (100%) in ") != NULL, "%s", err1);
  cr_expect_eq(progress_lines(err0, "sweep: "), 0, "lines inside the quiet start: %s", err0);

  /* search: planning, then prediction, each with its lines. */
  const char *search = "search -t tpu-v3-8x8 -m gpt3-1.3b -b 64 -j 2";
  g_autofree char *so0 = NULL, *se0 = NULL, *so1 = NULL, *se1 = NULL;
  cr_assert_eq(run_to_files(dir, "TRAINSIM_PROGRESS_S=1000", search, &so0, &se0), 0, "%s", se0);
  cr_assert_eq(run_to_files(dir, "TRAINSIM_PROGRESS_S=0", search, &so1, &se1), 0, "%s", se1);
  cr_expect_str_eq(so1, so0, "progress changed search's stdout");
  cr_expect_geq(progress_lines(se1, "search (planning): "), 10, "%s", se1);
  cr_expect_geq(progress_lines(se1, "search: "), 10, "%s", se1);
  cr_expect(strchr(se1, '\r') == NULL);

  /* A single simgrid replay (about 0.5 CPU s): the time elapsed, then the total. */
  const char *sg =
      "run -t dgx-h100-4node -m llama3-405b -b 8 --micro-batch 1 -s tp=8@node,pp=2,dp=2 "
      "--backend simgrid";
  g_autofree char *go0 = NULL, *ge0 = NULL, *go1 = NULL, *ge1 = NULL;
  cr_assert_eq(run_to_files(dir, "TRAINSIM_PROGRESS_S=1000", sg, &go0, &ge0), 0, "%s", ge0);
  cr_assert_eq(run_to_files(dir, "TRAINSIM_PROGRESS_S=0", sg, &go1, &ge1), 0, "%s", ge1);
  cr_expect_str_eq(go1, go0, "progress changed run's stdout");
  cr_expect(strstr(ge1, "run (simgrid): ") != NULL && strstr(ge1, " elapsed\n") != NULL, "%s", ge1);
  cr_expect(strstr(ge1, "run (simgrid): finished in ") != NULL, "%s", ge1);
  cr_expect(strstr(ge0, "run (simgrid)") == NULL, "%s", ge0);
  rm_rf(dir);
}

/* Runs a small `run` under VAR=each of bad (quoted for the shell): exit 2, stdout empty, stderr
 * exactly "trainsim: " + want (a format of the value) + newline; then under each env of good
 * (assignments or `-u VAR`): exit 0. */
static void expect_env_checked(const char *var, const char *const *bad, size_t nbad,
                               const char *want, const char *const *good, size_t ngood)
{
  g_autofree char *dir = tmp_dir();
  for (size_t i = 0; i < nbad; i++) {
    g_autofree char *env = g_strdup_printf("%s='%s'", var, bad[i]);
    g_autofree char *out = NULL, *err = NULL;
    int st = run_to_files(dir, env, "run -t tpu-v2-8 -m mlp -b 16 -s dp=4", &out, &err);
    cr_expect_eq(st, 2, "%s: status %d", bad[i], st);
    g_autofree char *msg = g_strdup_printf(want, bad[i]);
    g_autofree char *line = g_strdup_printf("trainsim: %s\n", msg);
    cr_expect_str_eq(err, line);
    cr_expect_str_eq(out, "");
  }
  for (size_t i = 0; i < ngood; i++) {
    g_autofree char *out = NULL, *err = NULL;
    int st = run_to_files(dir, good[i], "run -t tpu-v2-8 -m mlp -b 16 -s dp=4", &out, &err);
    cr_expect_eq(st, 0, "%s: %s", good[i], err);
  }
  rm_rf(dir);
}

Test(release, a_bad_progress_setting_is_refused)
{
  /* TRAINSIM_PROGRESS_S=5s (or -1, 7200) was silently replaced by the 2 s default, so the
   * setting seemed to do nothing. It is refused in one line before the command runs; unset,
   * empty, 0 and 3600 run. */
  static const char *const bad[] = {"5s", "-1", "7200", "nan"};
  static const char *const good[] = {"TRAINSIM_PROGRESS_S=", "TRAINSIM_PROGRESS_S=0",
                                     "TRAINSIM_PROGRESS_S=3600", "-u TRAINSIM_PROGRESS_S"};
  expect_env_checked("TRAINSIM_PROGRESS_S", bad, G_N_ELEMENTS(bad),
                     "TRAINSIM_PROGRESS_S='%s': expected seconds in [0, 3600] (unset or empty: 2)",
                     good, G_N_ELEMENTS(good));
}

Test(release, a_bad_memory_limit_is_refused)
{
  /* TRAINSIM_MAX_MEMORY was read only by a trace of several programs, so a typo in it passed
   * every single-program run unnoticed. It is refused in one line before the command runs,
   * as TRAINSIM_PROGRESS_S is; a size runs. */
  static const char *const bad[] = {"lots", "-1", "0", "nan", "16 apples"};
  static const char *const good[] = {"TRAINSIM_MAX_MEMORY=", "TRAINSIM_MAX_MEMORY=16GiB",
                                     "-u TRAINSIM_MAX_MEMORY"};
  expect_env_checked("TRAINSIM_MAX_MEMORY", bad, G_N_ELEMENTS(bad),
                     "TRAINSIM_MAX_MEMORY '%s': expected a size in bytes, e.g. 16GiB", good,
                     G_N_ELEMENTS(good));
}

Test(release, replay_reports_tokens_and_calibration_as_run_does)
{
  /* replay of a trace trainsim wrote showed "-" for tokens/s (the trace did not record the
   * sequence length) and marked the calibrated A100's MFU as an upper bound ("<=32.0%" and the
   * uncalibrated note): the trace now records tokens_per_sample, and replay reports the chip's
   * calibration. Same step, so the same samples/s, tokens/s and MFU cells as run's. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *a =
      g_strdup_printf("trace -t dgx-a100-1node -m bert-base -s dp=8 -b 64 -o %s/b.trace", dir);
  run_result t = run(a);
  cr_assert_eq(t.status, 0, "%s", t.err);
  run_free(&t);
  run_result r = run("run -t dgx-a100-1node -m bert-base -s dp=8 -b 64 -f csv");
  g_autofree char *b = g_strdup_printf("replay -t dgx-a100-1node %s/b.trace -f csv", dir);
  run_result p = run(b);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert_eq(p.status, 0, "%s", p.err);
  static const char *const cols[] = {"tokens_per_s", "mfu", "calibrated"};
  for (gsize k = 0; k < G_N_ELEMENTS(cols); k++) {
    g_autofree char *vr = csv_cell(r.out, 0, cols[k]);
    g_autofree char *vp = csv_cell(p.out, 0, cols[k]);
    cr_assert(vr != NULL && vp != NULL, "column %s missing:\n%s\n%s", cols[k], r.out, p.out);
    cr_expect_str_eq(vp, vr, "%s: replay %s, run %s", cols[k], vp, vr);
  }
  run_free(&r);
  run_free(&p);
  g_autofree char *c = g_strdup_printf("replay -t dgx-a100-1node %s/b.trace", dir);
  p = run(c);
  cr_assert_eq(p.status, 0, "%s", p.err);
  cr_expect(strstr(p.out, "<=") == NULL && strstr(p.out, "not calibrated") == NULL, "%s", p.out);
  run_free(&p);
  rm_rf(dir);
}

Test(release, a_trace_without_batch_or_flops_reports_n_a)
{
  /* ASTRA-sim's workloads record no batch and no model FLOPs: replay printed "global batch 0",
   * 0 samples/s and MFU <=0.0%, and its JSON (global_batch 0) broke run.schema.json's minimum
   * of 1. Now n/a in text, null in JSON, empty cells in CSV; the step time is unchanged. */
  g_autofree char *args = g_strdup_printf(
      "replay -t dgx-a100-1node %s/traces/imported/astrasim/Resnet50_DataParallel.txt -f ",
      TS_SOURCE_DIR);
  g_autofree char *text = g_strconcat(args, "text", NULL);
  run_result t = run(text);
  cr_assert_eq(t.status, 0, "%s", t.err);
  cr_expect(strstr(t.out, "global batch n/a,") != NULL, "%s", t.out);
  cr_expect(strstr(t.out, "global batch 0") == NULL && strstr(t.out, "0.0%") == NULL, "%s", t.out);
  run_free(&t);
  g_autofree char *json = g_strconcat(args, "json", NULL);
  run_result j = run(json);
  cr_assert_eq(j.status, 0, "%s", j.err);
  g_autofree char *why = NULL;
  cr_expect(schema_ok("run", j.out, &why), "%s", why);
  static const char *nulls[] = {"global_batch", "samples_per_s", "mfu"};
  for (size_t i = 0; i < G_N_ELEMENTS(nulls); i++) {
    g_autoptr(JsonNode) v = run_member(j.out, nulls[i], FALSE);
    cr_expect(v != NULL && JSON_NODE_HOLDS_NULL(v), "%s is not null", nulls[i]);
  }
  g_autoptr(JsonNode) step = run_member(j.out, "step_time_s", FALSE);
  cr_expect(step != NULL && json_node_get_double(step) > 0);
  run_free(&j);
  g_autofree char *csv = g_strconcat(args, "csv", NULL);
  run_result c = run(csv);
  cr_assert_eq(c.status, 0, "%s", c.err);
  g_auto(GStrv) lines = g_strsplit(c.out, "\n", 3);
  g_auto(GStrv) head = g_strsplit(lines[0], ",", -1);
  g_auto(GStrv) row = g_strsplit(lines[1], ",", -1);
  cr_assert_eq(g_strv_length(head), g_strv_length(row), "%s", c.out);
  for (int k = 0; head[k] != NULL; k++)
    if (strcmp(head[k], "global_batch") == 0 || strcmp(head[k], "samples_per_s") == 0 ||
        strcmp(head[k], "mfu") == 0)
      cr_expect_str_eq(row[k], "", "column %s: '%s'", head[k], row[k]);
  run_free(&c);
}

Test(release, run_help_first_example_compares_the_default_splits)
{
  /* The first example of `run --help` is what a new user types first. On GPT-2 1.5B (25
   * heads) two of the three default splits were skipped (tp=8, tp=16) and the one left did
   * not fit: nothing was compared. Its model now takes every default split. */
  run_result h = run("run --help");
  cr_assert_eq(h.status, 0);
  const char *ex = strstr(h.out, "Example:");
  ex = ex != NULL ? strstr(ex, "\n  trainsim run ") : NULL;
  cr_assert_not_null(ex, "no example in run --help");
  g_autofree char *line = g_strndup(ex + strlen("\n  trainsim "), strcspn(ex + 1, "\n") - 11);
  run_free(&h);
  run_result r = run(line);
  cr_assert_eq(r.status, 0, "`%s`: %s", line, r.err);
  cr_expect(strstr(r.err, "skipped") == NULL, "`%s` skips a default split: %s", line, r.err);
  cr_expect(strstr(r.out, "fastest: ") != NULL, "`%s` compares nothing: %s", line, r.out);
  cr_expect(strstr(r.out, "(none fits)") == NULL, "`%s`: %s", line, r.out);
  run_free(&r);
}

Test(release, search_marks_an_uncalibrated_mfu_as_run_does)
{
  /* run writes an uncalibrated chip's MFU as an upper bound ("<=62.9%") and says why; search
   * printed the same number as a plain "75.5%". Both tables now agree. */
  run_result u = run("search -t tpu-v2-8 -m gpt3-350m -b 16 -k 2 -j 1");
  cr_assert_eq(u.status, 0, "%s", u.err);
  const char *row = strstr(u.out, "\n1  ");
  cr_assert_not_null(row, "%s", u.out);
  g_autofree char *line = g_strndup(row + 1, strcspn(row + 1, "\n"));
  cr_expect(strstr(line, "<=") != NULL, "uncalibrated MFU without <=: %s", line);
  cr_expect(strstr(u.out, "note: the chip profile is not calibrated") != NULL, "%s", u.out);
  run_free(&u);
  run_result c = run("search -t dgx-a100-1node -m gpt3-350m -b 16 -k 2 -j 1");
  cr_assert_eq(c.status, 0, "%s", c.err);
  cr_expect(strstr(c.out, "<=") == NULL && strstr(c.out, "not calibrated") == NULL,
            "a calibrated chip's MFU is marked: %s", c.out);
  run_free(&c);
}

Test(release, an_inline_chip_without_calibrated_is_an_upper_bound)
{
  /* A user's inline [chip] with no calibrated key (here the datasheet peak at
   * compute_efficiency 1.0) was taken as calibrated: run printed "62.9%" with no mark. Its MFU
   * is now an upper bound, marked and explained; calibrated = true removes the mark. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *u = write_file(dir, "u.ini", CHIP "compute_efficiency = 1.0\n" DIMX);
  g_autofree char *c =
      write_file(dir, "c.ini", CHIP "compute_efficiency = 1.0\ncalibrated = true\n" DIMX);
  g_autofree char *ua = g_strdup_printf("run -t %s -m gpt3-350m -b 16 -s dp=8", u);
  run_result r = run(ua);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "<=") != NULL, "uncalibrated MFU without <=: %s", r.out);
  cr_expect(strstr(r.out, "note: the chip profile is not calibrated") != NULL, "%s", r.out);
  run_free(&r);
  g_autofree char *ca = g_strdup_printf("run -t %s -m gpt3-350m -b 16 -s dp=8 -f csv", c);
  r = run(ca);
  cr_assert_eq(r.status, 0, "%s", r.err);
  g_autofree char *cell = csv_cell(r.out, 0, "calibrated");
  cr_expect(cell != NULL && strcmp(cell, "true") == 0, "calibrated = true: %s", r.out);
  run_free(&r);
  rm_rf(dir);
}

Test(release, every_split_option_the_parser_names_is_in_the_split_table)
{
  /* The man pages and completion come from --help, which points to docs/splits.md for the
   * split grammar: that table must list every option the parser accepts (the list its error
   * message gives), with tp-overlap's values (te, async, on, off). */
  run_result r = run("run -t tpu-v3-8x8 -m bert-large -b 512 -s dp=64,frob=1");
  cr_assert_eq(r.status, 2, "%s", r.err);
  const char *list = strstr(r.err, "or an option: ");
  cr_assert_not_null(list, "%s", r.err);
  g_autofree char *keys =
      g_strndup(list + strlen("or an option: "), strcspn(list + strlen("or an option: "), "\n"));
  run_free(&r);
  g_autofree char *path = g_build_filename(TS_SOURCE_DIR, "docs", "splits.md", NULL);
  g_autofree char *doc = NULL;
  cr_assert(g_file_get_contents(path, &doc, NULL, NULL));
  g_auto(GStrv) k = g_strsplit(keys, ", ", -1);
  cr_assert_geq(g_strv_length(k), 15, "%s", keys);
  for (int i = 0; k[i] != NULL; i++) {
    g_autofree char *row = g_strdup_printf("\n| `%s", k[i]);
    cr_expect(strstr(doc, row) != NULL, "docs/splits.md has no table row for split option '%s'",
              k[i]);
  }
  const char *tpo = strstr(doc, "\n| `tp-overlap`");
  cr_assert_not_null(tpo);
  g_autofree char *line = g_strndup(tpo + 1, strcspn(tpo + 1, "\n"));
  static const char *values[] = {"`=te`", "`=async`", "`=on/off`"};
  for (size_t i = 0; i < G_N_ELEMENTS(values); i++)
    cr_expect(strstr(line, values[i]) != NULL, "tp-overlap's row lacks %s: %s", values[i], line);
}

Test(release, out_of_range_numbers_are_refused_not_ignored)
{
  /* validate --against --max-mean-error-pct nan or -3 read as "no limit" (exit 0 on a file
   * whose mean error is 9.6%); collective --bytes-range 1:1e15:1.0000001 printed 10,000 of the
   * 3e8 sizes it asked for, without a word. */
  static const char *const pct[] = {"nan", "-3", "inf", "ten"};
  for (size_t i = 0; i < G_N_ELEMENTS(pct); i++) {
    g_autofree char *a = g_strdup_printf(
        "validate --against data/published/torchtitan/memory.csv --max-mean-error-pct %s", pct[i]);
    g_autofree char *want =
        g_strdup_printf("--max-mean-error-pct '%s': expected a percentage", pct[i]);
    expect_input_error(a, want);
  }
  expect_input_error("validate --against ''", "--against '': empty; expected a measurement CSV");
  expect_input_error("collective -t tpu-v2-8 --bytes-range 1:1e15:1.0000001",
                     "more than 10000 sizes; expected a larger factor F");
  /* 1e-300 bytes printed a row of size_bytes 0, busbw 0.00. */
  expect_input_error("collective -t tpu-v2-8 --bytes 1e-300",
                     "--bytes '1e-300': expected a whole number of bytes in [1, 1e15]");
  expect_input_error("collective -t tpu-v2-8 --bytes 0.3KiB", "--bytes '0.3KiB'");
  expect_input_error("collective -t tpu-v2-8 --bytes 1.5", "--bytes '1.5'");
  expect_input_error("collective -t tpu-v2-8 --bytes-range 1e-300:1",
                     "expected LO:HI[:F] with 1 <= LO <= HI <= 1e15 bytes");
  /* A busbw row of 0.5 bytes was costed as a 0-byte collective: busbw 0, error -100%. */
  g_autofree char *dir = tmp_dir();
  g_autofree char *csv = g_build_filename(dir, "half.csv", NULL);
  cr_assert(g_file_set_contents(
      csv, "topology,collective,size_bytes,busbw_GBps\ntpu-v2-8,allreduce,0.5,100\n", -1, NULL));
  g_autofree char *a = g_strdup_printf("validate --against %s", csv);
  expect_input_error(a, "half.csv:2: column size_bytes: '0.5': expected a whole number of bytes");
  rm_rf(dir);
}

Test(release, a_full_stdout_is_an_error_not_a_pass, .timeout = 60)
{
  /* validate, validate --against and check wrote their results with fputs and exited 0 (all
   * runs passed, every scenario within tolerance) when stdout was a full disk; run, model,
   * replay and the others already said "write failed" and exited 2. */
  static const char *const args[] = {
      "validate -m validate-mlp -s dp=2",
      "validate --against " TS_SOURCE_DIR "/data/published/torchtitan/memory.csv -j 1",
      "check " TS_SOURCE_DIR "/tests/scenarios/tpu.ini -j 1",
      "model -m mlp",
  };
  for (size_t i = 0; i < G_N_ELEMENTS(args); i++) {
    g_autofree char *cmd = g_strdup_printf("%s %s > /dev/full", TS_TRAINSIM_BIN, args[i]);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    g_autofree char *err = NULL;
    int wait = 0;
    g_autoptr(GError) e = NULL;
    cr_assert(
        g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, &err, &wait, &e),
        "%s", e ? e->message : "");
    cr_assert(WIFEXITED(wait) && WEXITSTATUS(wait) == 2, "`%s` > /dev/full: status %d, stderr %s",
              args[i], wait, err);
    cr_assert(strstr(err, "<stdout>: write failed") != NULL, "`%s`: %s", args[i], err);
  }
}

Test(release, plot_checks_the_members_it_reads)
{
  /* A string where a number belongs was plotted as 0; an event that was not an object, or
   * args that were not one, made json-glib print CRITICAL assertions (a crash under
   * G_DEBUG=fatal-criticals) and the plot went on. Each is now one line naming the place. */
  static const struct {
    const char *json, *needle;
  } cases[] = {
      {"{\"results\":[{\"step_time_s\":\"fast\"}]}",
       "\"results\"[0] \"step_time_s\": \"fast\"; expected a finite number"},
      {"{\"results\":[{}]}", "\"results\"[0] \"step_time_s\": absent; expected a finite number"},
      {"{\"results\":[5]}", "\"results\"[0]: expected an object (one result row)"},
      {"{\"results\":[{\"step_time_s\":1,\"fits_memory\":\"yes\"}]}",
       "\"fits_memory\": \"yes\"; expected true or false"},
      {"{\"results\":[{\"step_time_s\":1,\"time_to_train\":{\"cost_usd\":\"a lot\"}}]}",
       "\"time_to_train\" \"cost_usd\": \"a lot\"; expected a finite number"},
      {"{\"traceEvents\":5}", "\"traceEvents\": 5; expected an array"},
      {"{\"traceEvents\":[1]}", "\"traceEvents\"[0]: expected an object (one event)"},
      {"{\"traceEvents\":[{\"ph\":\"X\",\"pid\":\"a\",\"ts\":0,\"dur\":1}]}",
       "\"traceEvents\"[0] \"pid\": \"a\"; expected a whole number"},
      {"{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"args\":5}]}",
       "\"traceEvents\"[0] \"args\": 5; expected an object"},
      {"{\"traceEvents\":[{\"ph\":\"X\",\"pid\":0,\"ts\":0,\"dur\":-1}]}",
       "\"dur\": -1; expected a duration >= 0"},
      {"{\"traceEvents\":[{}]}", "the timeline has no spans to plot"},
  };
  g_autofree char *dir = tmp_dir();
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *path = g_strdup_printf("%s/doc%zu.json", dir, i);
    cr_assert(g_file_set_contents(path, cases[i].json, -1, NULL));
    g_autofree char *a = g_strdup_printf("plot %s -o %s/plots", path, dir);
    expect_input_error(a, cases[i].needle);
  }
  g_autofree char *plots = g_build_filename(dir, "plots", NULL);
  cr_expect(!g_file_test(plots, G_FILE_TEST_EXISTS), "a refused plot created its folder");
  rm_rf(dir);
}

Test(release, bench_scripts_refuse_bad_arguments_in_one_line)
{
  /* bench/a100_whatif.sh passed "compute_efficiency=1/2" to sed (its own error, exit 1) and a
   * key the profile refuses printed each file as 0 rows and -nan%. The argument is now checked
   * as KEY=NUMBER (before anything is built) and a refused replay stops with validate's line. */
  static const char *const cases[][3] = {
      {"a100_whatif.sh", "compute_efficiency=1/2", "argument 'compute_efficiency=1/2'"},
      {"a100_whatif.sh", "x=", "expected KEY=NUMBER"},
      {"a100_whatif.sh", "compute_efficiency=0.5x", "expected KEY=NUMBER"},
      {"mpt_residuals.sh", "b300", "argument 1: expected a100-80gb"},
      {"a100_breakdown.sh", "mtnlg/no-such-file", "argument 'mtnlg/no-such-file': expected"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *script = g_build_filename(TS_SOURCE_DIR, "bench", cases[i][0], NULL);
    const char *argv[] = {"sh", script, cases[i][1], NULL};
    g_autofree char *out = NULL, *err = NULL;
    int wait = 0;
    g_autoptr(GError) e = NULL;
    cr_assert(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                           &wait, &e),
              "%s", e ? e->message : "");
    int status = WIFEXITED(wait) ? WEXITSTATUS(wait) : -1;
    cr_expect_eq(status, 2, "%s %s: exit %d: %s", cases[i][0], cases[i][1], status, err);
    const char *nl = strchr(err, '\n');
    cr_expect(strstr(err, cases[i][2]) != NULL && nl != NULL && nl[1] == '\0',
              "%s %s: '%s' lacks '%s' or is not one line", cases[i][0], cases[i][1], err,
              cases[i][2]);
    cr_expect_str_eq(out, "", "%s %s", cases[i][0], cases[i][1]);
  }
}

/* Every docs/NAME.md#ANCHOR a --help names is a heading of that page (GitHub's anchor: the
 * heading in lower case, punctuation dropped, spaces as hyphens). import and export named
 * #importing and #exporting, which no heading makes. */
Test(release, help_links_name_existing_headings)
{
  const char *cmds[] = {"run",    "collective", "trace",    "model",    "replay",
                        "import", "export",     "platform", "validate", "calibrate",
                        "sweep",  "search",     "plot",     "merge",    "check"};
  g_autoptr(GRegex) link = g_regex_new("docs/([a-z-]+\\.md)#([a-z0-9-]+)", 0, 0, NULL);
  int checked = 0;
  for (size_t c = 0; c < G_N_ELEMENTS(cmds); c++) {
    g_autofree char *args = g_strdup_printf("%s --help", cmds[c]);
    run_result r = run(args);
    cr_assert_eq(r.status, 0, "%s: %s", args, r.err);
    g_autoptr(GMatchInfo) mi = NULL;
    g_regex_match(link, r.out, 0, &mi);
    for (; g_match_info_matches(mi); g_match_info_next(mi, NULL)) {
      g_autofree char *page = g_match_info_fetch(mi, 1), *anchor = g_match_info_fetch(mi, 2);
      g_autofree char *path = g_build_filename(TS_SOURCE_DIR, "docs", page, NULL), *text = NULL;
      cr_assert(g_file_get_contents(path, &text, NULL, NULL), "%s: no %s", args, path);
      gboolean found = FALSE;
      g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
      for (char **l = lines; *l != NULL && !found; l++) {
        if ((*l)[0] != '#')
          continue;
        const char *h = *l + strspn(*l, "#");
        GString *a = g_string_new(NULL);
        for (h += strspn(h, " "); *h != '\0'; h++)
          if (g_ascii_isalnum(*h) || *h == '-' || *h == '_')
            g_string_append_c(a, g_ascii_tolower(*h));
          else if (*h == ' ')
            g_string_append_c(a, '-');
        found = strcmp(a->str, anchor) == 0;
        g_string_free(a, TRUE);
      }
      cr_assert(found, "`trainsim %s` names docs/%s#%s, which is no heading there", args, page,
                anchor);
      checked++;
    }
    run_free(&r);
  }
  cr_assert_gt(checked, 0, "no link checked");
}

/* Every option a command's --help lists is in README.md or a docs .md file: `calibrate --quiet` was
 * in --help and nowhere in the documentation. */
Test(release, every_help_option_is_documented)
{
  GString *docs = g_string_new(NULL);
  g_autofree char *readme = g_build_filename(TS_SOURCE_DIR, "README.md", NULL);
  g_autofree char *ddir = g_build_filename(TS_SOURCE_DIR, "docs", NULL);
  char *text = NULL;
  cr_assert(g_file_get_contents(readme, &text, NULL, NULL), "%s", readme);
  g_string_append(docs, text);
  g_free(text);
  GDir *d = g_dir_open(ddir, 0, NULL);
  cr_assert(d != NULL, "%s", ddir);
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL)
    if (g_str_has_suffix(name, ".md")) {
      g_autofree char *p = g_build_filename(ddir, name, NULL);
      cr_assert(g_file_get_contents(p, &text, NULL, NULL), "%s", p);
      g_string_append(docs, text);
      g_free(text);
    }
  g_dir_close(d);
  const char *cmds[] = {"run",    "collective", "trace",    "model",    "replay",
                        "import", "export",     "platform", "validate", "calibrate",
                        "sweep",  "search",     "plot",     "merge",    "check"};
  int options = 0;
  for (size_t c = 0; c < G_N_ELEMENTS(cmds); c++) {
    g_autofree char *args = g_strdup_printf("%s --help", cmds[c]);
    run_result r = run(args);
    cr_assert_eq(r.status, 0, "%s: %s", args, r.err);
    g_auto(GStrv) lines = g_strsplit(r.out, "\n", -1);
    for (char **l = lines; *l != NULL; l++) {
      /* "  -t, --topology=T   ..." or "  --full   ...": the option's name up to '=' or a space. */
      const char *o = strstr(*l, "--");
      if (!g_str_has_prefix(*l, "  ") || o == NULL || o > *l + 8)
        continue;
      size_t len = strcspn(o, "= ");
      g_autofree char *opt = g_strndup(o, len);
      if (strcmp(opt, "--help") == 0 || strcmp(opt, "--version") == 0)
        continue;
      options++;
      cr_expect(strstr(docs->str, opt) != NULL, "trainsim %s %s is in --help, not in the docs",
                cmds[c], opt);
    }
    run_free(&r);
  }
  cr_assert(options > 100, "only %d options read from --help", options);
  g_string_free(docs, TRUE);
}
