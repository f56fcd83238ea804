/* Importers (Chakra, ASTRA-sim), exporters (SimGrid TIT, Chakra) and the traces/ folder: every
 * shipped trace replays to its pinned step time on both backends, imported samples are what
 * the importers write, examples are what the planner writes, and mismatches between an
 * imported trace and the topology are one line naming the file and node, before any engine. */
#include "et_def.pb-c.h"
#include "ts_import.h"
#include "ts_replay.h"
#include "ts_run.h"
#include "ts_test.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

static char *src_path(const char *rel)
{
  return g_build_filename(TS_SOURCE_DIR, rel, NULL);
}

/* Step times each shipped trace replays to (analytic, simgrid), on its topology, from
 * traces/expected-step-times.tsv (written by traces/regenerate.sh). Changing the planner, a
 * backend or an importer moves these on purpose only: regenerate and say why in the commit. */
typedef struct {
  char *file, *topo;
  double analytic_s, simgrid_s;
} pinned_row;

static GArray *pinned_rows(void)
{
  static GArray *rows = NULL;
  if (rows != NULL)
    return rows;
  g_autofree char *path =
      g_build_filename(TS_SOURCE_DIR, "traces", "expected-step-times.tsv", NULL);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(path, &text, NULL, NULL), "%s", path);
  rows = g_array_new(FALSE, TRUE, sizeof(pinned_row));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (char **l = lines; *l != NULL; l++) {
    if (**l == '#' || **l == '\0')
      continue;
    g_auto(GStrv) f = g_strsplit(*l, "\t", -1);
    cr_assert_eq(g_strv_length(f), 4, "%s: '%s': expected 4 tab-separated fields", path, *l);
    pinned_row r = {g_strdup(f[0]), g_strdup(f[1]), g_ascii_strtod(f[2], NULL),
                    g_ascii_strtod(f[3], NULL)};
    g_array_append_val(rows, r);
  }
  cr_assert_geq(rows->len, 18, "%s: expected every shipped trace", path);
  return rows;
}

#define NPINNED (pinned_rows()->len)
#define PINNED(i) (g_array_index(pinned_rows(), pinned_row, (i)))

static ts_trace *load_checked(const char *file, const ts_topo *t)
{
  g_autofree char *path = src_path(file);
  GError *err = NULL;
  ts_trace *tr = ts_trace_load(path, &err);
  cr_assert_not_null(tr, "%s", err ? err->message : "");
  cr_assert(ts_trace_check(tr, t, &err) && ts_trace_resolve_algos(tr, t, &err), "%s: %s", file,
            err ? err->message : "");
  return tr;
}

Test(traces, shipped_traces_replay_to_their_pinned_step_times)
{
  for (guint i = 0; i < NPINNED; i++) {
    g_autoptr(ts_topo) t = load_topo(PINNED(i).topo);
    g_autoptr(ts_trace) tr = load_checked(PINNED(i).file, t);
    const char *backends[] = {"analytic", "simgrid"};
    double want[] = {PINNED(i).analytic_s, PINNED(i).simgrid_s};
    for (int b = 0; b < 2; b++) {
      ts_run_options ro = {.backend = backends[b]};
      ts_replay_result rr;
      GError *err = NULL;
      cr_assert(ts_run_replay(tr, t, &ro, &rr, &err), "%s %s: %s", PINNED(i).file, backends[b],
                err ? err->message : "");
      /* analytic: closed forms, 1e-9; simgrid: its solver's precision, 1e-6 */
      double tol = (b == 0 ? 1e-9 : 1e-6) * want[b];
      cr_assert(fabs(rr.step_time_s - want[b]) <= tol, "%s %s: %.17g s, pinned %.17g s",
                PINNED(i).file, backends[b], rr.step_time_s, want[b]);
    }
  }
}

static GPtrArray *files_in(const char *dir, const char *suffix);

Test(traces, chakra_export_round_trips)
{
  /* The generated Chakra samples are exports of the examples. The exporter carries what
   * Chakra's schema has no field for (a compute op's GEMM and attention shape and kernel count,
   * exact values, category, tag, stream) as "trainsim.*" node attributes, so imported back each
   * replays to the example's step time: analytic to 1e-9, simgrid to its solver's 1e-6. Without
   * the shapes the compute fell back to the roofline (0.57x and 0.18x of the step). */
  const char *pairs[][2] = {
      {"traces/examples/bert-base-dp8.trace", "traces/imported/chakra/bert-base-dp8.trace"},
      {"traces/examples/bert-base-tp2-pp2-dp2.trace",
       "traces/imported/chakra/bert-base-tp2-pp2-dp2.trace"}};
  for (size_t i = 0; i < G_N_ELEMENTS(pairs); i++) {
    const pinned_row *a = NULL, *b = NULL;
    for (guint k = 0; k < NPINNED; k++) {
      if (strcmp(PINNED(k).file, pairs[i][0]) == 0)
        a = &PINNED(k);
      if (strcmp(PINNED(k).file, pairs[i][1]) == 0)
        b = &PINNED(k);
    }
    cr_assert(a != NULL && b != NULL, "%s: not pinned", pairs[i][1]);
    double ea = fabs(b->analytic_s - a->analytic_s), es = fabs(b->simgrid_s - a->simgrid_s);
    cr_assert(ea <= 1e-9 * a->analytic_s, "%s analytic: %.17g vs %.17g", pairs[i][1], b->analytic_s,
              a->analytic_s);
    cr_assert(es <= 1e-6 * a->simgrid_s, "%s simgrid: %.17g vs %.17g", pairs[i][1], b->simgrid_s,
              a->simgrid_s);
  }
}

Test(traces, chakra_export_then_import_keeps_the_step_time)
{
  /* Every trace trainsim ships that its exporter can write (planner examples with shapes,
   * offload transfers, parameter-server delays; handwritten traces of every op kind), exported
   * and imported in-process: the analytic step time is the same to 1e-9. */
  const char *files[] = {"traces/examples/bert-base-dp8.trace",
                         "traces/examples/bert-base-tp2-pp2-dp2.trace",
                         "traces/examples/gpt3-350m-dp8-zero2-offload.trace",
                         "traces/examples/mlp-dp8-ps2.trace",
                         "traces/handwritten/data-parallel-serial.trace",
                         "traces/handwritten/every-op-kind.trace"};
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  g_autofree char *tmp = g_dir_make_tmp("ts-chakra-XXXXXX", NULL);
  cr_assert_not_null(tmp);
  int shaped = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
    g_autoptr(ts_trace) tr = load_checked(files[i], t);
    for (int p = 0; p < tr->nprograms; p++)
      for (int k = 0; k < tr->programs[p].nops; k++)
        shaped += ts_program_op(&tr->programs[p], k).shape != NULL;
    g_autofree char *dir = g_strdup_printf("%s/%zu", tmp, i);
    GError *err = NULL;
    cr_assert(ts_export_chakra(tr, t, dir, "x", &err), "%s: %s", files[i], err ? err->message : "");
    g_autoptr(GPtrArray) et = files_in(dir, ".et");
    g_autofree char *groups = g_build_filename(dir, "x.comm_groups.json", NULL);
    ts_import_options o = {.comm_groups = groups};
    g_autoptr(ts_trace) back = ts_import_files(TS_IMPORT_CHAKRA, (const char *const *)et->pdata,
                                               (int)et->len, t, &o, &err);
    cr_assert_not_null(back, "%s: %s", files[i], err ? err->message : "");
    cr_assert(ts_trace_resolve_algos(back, t, &err), "%s", err ? err->message : "");
    cr_assert_eq(ts_trace_nops(back), (gint64)tr->nranks * ts_trace_nops(tr) / tr->nprograms,
                 "%s: ops lost or added", files[i]);
    double s[2];
    const ts_trace *two[] = {tr, back};
    for (int k = 0; k < 2; k++) {
      ts_run_options ro = {.backend = "analytic"};
      ts_replay_result rr;
      cr_assert(ts_run_replay(two[k], t, &ro, &rr, &err), "%s: %s", files[i],
                err ? err->message : "");
      s[k] = rr.step_time_s;
    }
    cr_assert(s[0] > 0 && fabs(s[1] - s[0]) <= 1e-9 * s[0], "%s: %.17g s imported, %.17g s",
              files[i], s[1], s[0]);
    for (guint k = 0; k < et->len; k++)
      g_remove(g_ptr_array_index(et, k));
    g_remove(groups);
    g_rmdir(dir);
  }
  g_rmdir(tmp);
  cr_assert_gt(shaped, 100, "the examples carry compute shapes (else the test proves little)");
}

static gint cmp_str_ptr(gconstpointer a, gconstpointer b)
{
  return g_strcmp0(*(char *const *)a, *(char *const *)b);
}

/* Files of a folder ending in suffix, sorted (NAME.0.et, NAME.1.et, ...: by rank). */
static GPtrArray *files_in(const char *dir, const char *suffix)
{
  GPtrArray *v = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  cr_assert_not_null(d, "%s", dir);
  const char *n;
  while ((n = g_dir_read_name(d)) != NULL)
    if (g_str_has_suffix(n, suffix) && strcmp(n, "PROVENANCE.txt") != 0)
      g_ptr_array_add(v, g_build_filename(dir, n, NULL));
  g_ptr_array_sort(v, cmp_str_ptr);
  return v;
}

static void assert_same_text(const ts_trace *tr, const char *expected_rel)
{
  g_autofree char *text = ts_trace_to_text(tr);
  g_autofree char *path = src_path(expected_rel);
  g_autofree char *want = NULL;
  cr_assert(g_file_get_contents(path, &want, NULL, NULL), "%s", path);
  cr_assert(strcmp(text, want) == 0, "%s: the importer now writes a different trace", path);
}

Test(traces, imported_samples_are_what_the_importers_write)
{
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  g_autofree char *adir = src_path("traces/imported/astrasim");
  g_autoptr(GPtrArray) txt = files_in(adir, ".txt");
  cr_assert_geq(txt->len, 7);
  for (guint i = 0; i < txt->len; i++) {
    const char *p = g_ptr_array_index(txt, i);
    GError *err = NULL;
    g_autoptr(ts_trace) tr = ts_import_files(TS_IMPORT_ASTRASIM, &p, 1, t, NULL, &err);
    cr_assert_not_null(tr, "%s", err ? err->message : "");
    cr_assert(ts_trace_resolve_algos(tr, t, &err));
    g_autofree char *base = g_path_get_basename(p);
    g_autofree char *rel =
        g_strdup_printf("traces/imported/astrasim/%.*s.trace", (int)strlen(base) - 4, base);
    assert_same_text(tr, rel);
  }
  const char *chakra[] = {"astrasim-all_reduce-8npus", "astrasim-all_to_all-8npus", "bert-base-dp8",
                          "bert-base-tp2-pp2-dp2"};
  for (size_t i = 0; i < G_N_ELEMENTS(chakra); i++) {
    g_autofree char *rel = g_strdup_printf("traces/imported/chakra/%s", chakra[i]);
    g_autofree char *dir = src_path(rel);
    g_autoptr(GPtrArray) et = files_in(dir, ".et");
    cr_assert_eq(et->len, 8, "%s", dir);
    g_autofree char *gname = g_strdup_printf("%s/%s.comm_groups.json", dir, chakra[i]);
    ts_import_options o = {.comm_groups = g_file_test(gname, G_FILE_TEST_EXISTS) ? gname : NULL};
    GError *err = NULL;
    g_autoptr(ts_trace) tr = ts_import_files(TS_IMPORT_CHAKRA, (const char *const *)et->pdata,
                                             (int)et->len, t, &o, &err);
    cr_assert_not_null(tr, "%s", err ? err->message : "");
    cr_assert(ts_trace_resolve_algos(tr, t, &err));
    g_autofree char *trel = g_strdup_printf("traces/imported/chakra/%s.trace", chakra[i]);
    assert_same_text(tr, trel);
  }
}

Test(traces, examples_are_what_the_planner_writes)
{
  /* A planner change that alters any op of these shows here: regenerate with the command and
   * say why in the commit (traces/README.md lists them). */
  const char *cmds[][2] = {
      {"traces/examples/bert-base-dp8.trace", "trace -t dgx-a100-1node -m bert-base -s dp=8 -b 64"},
      {"traces/examples/bert-base-tp2-pp2-dp2.trace",
       "trace -t dgx-a100-1node -m bert-base -s tp=2,pp=2,dp=2 -b 16 --micro-batch 2"},
      {"traces/examples/gpt3-350m-dp8-zero2-offload.trace",
       "trace -t dgx-a100-1node -m gpt3-350m -s dp=8,zero=2,offload=cpu -b 8"},
      {"traces/examples/mlp-dp8-ps2.trace",
       "trace -t dgx-a100-1node -m mlp -s dp=8,ps=2,ps-placement=dedicated -b 16"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    run_result r = run(cmds[i][1]);
    cr_assert_eq(r.status, 0, "%s: %s", cmds[i][1], r.err);
    g_autofree char *path = src_path(cmds[i][0]);
    g_autofree char *want = NULL;
    cr_assert(g_file_get_contents(path, &want, NULL, NULL));
    cr_assert(strcmp(r.out, want) == 0, "%s differs from `trainsim %s`", cmds[i][0], cmds[i][1]);
    run_free(&r);
  }
}

/* A Chakra file's bytes: GlobalMetadata, then nodes. */
static void put_msg(GByteArray *b, const ProtobufCMessage *m)
{
  size_t n = protobuf_c_message_get_packed_size(m);
  guint8 v[10];
  int k = 0;
  size_t x = n;
  do {
    v[k++] = (guint8)((x & 0x7f) | (x >= 0x80 ? 0x80 : 0));
    x >>= 7;
  } while (x > 0);
  g_byte_array_append(b, v, (guint)k);
  guint old = b->len;
  g_byte_array_set_size(b, old + (guint)n);
  protobuf_c_message_pack(m, b->data + old);
}

static GByteArray *et_recv_only(void)
{
  GByteArray *b = g_byte_array_new();
  ChakraProtoMsg__GlobalMetadata gm = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
  put_msg(b, &gm.base);
  ChakraProtoMsg__Node nd = CHAKRA_PROTO_MSG__NODE__INIT;
  nd.id = 7;
  nd.name = (char *)"recv activations";
  nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE;
  ChakraProtoMsg__AttributeProto a[3];
  ChakraProtoMsg__AttributeProto *ap[3] = {&a[0], &a[1], &a[2]};
  const char *names[] = {"comm_src", "comm_tag", "comm_size"};
  gint64 vals[] = {0, 5, 1024};
  for (int i = 0; i < 3; i++) {
    chakra_proto_msg__attribute_proto__init(&a[i]);
    a[i].name = (char *)names[i];
    a[i].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
    a[i].int64_val = vals[i];
  }
  nd.n_attr = 3;
  nd.attr = ap;
  put_msg(b, &nd.base);
  return b;
}

static GByteArray *et_allreduce(gint64 bytes)
{
  GByteArray *b = g_byte_array_new();
  ChakraProtoMsg__GlobalMetadata gm = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
  put_msg(b, &gm.base);
  ChakraProtoMsg__Node nd = CHAKRA_PROTO_MSG__NODE__INIT;
  nd.id = 3;
  nd.name = (char *)"grad all-reduce";
  nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
  ChakraProtoMsg__AttributeProto a[2];
  ChakraProtoMsg__AttributeProto *ap[2] = {&a[0], &a[1]};
  const char *names[] = {"comm_type", "comm_size"};
  gint64 vals[] = {CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_REDUCE, bytes};
  for (int i = 0; i < 2; i++) {
    chakra_proto_msg__attribute_proto__init(&a[i]);
    a[i].name = (char *)names[i];
    a[i].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
    a[i].int64_val = vals[i];
  }
  nd.n_attr = 2;
  nd.attr = ap;
  put_msg(b, &nd.base);
  return b;
}

/* A compute node carrying a trainsim.* attribute of the wrong value (a negative GEMM
 * dimension): one line naming the file, node and attribute. */
static GByteArray *et_bad_shape(void)
{
  GByteArray *b = g_byte_array_new();
  ChakraProtoMsg__GlobalMetadata gm = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
  put_msg(b, &gm.base);
  ChakraProtoMsg__Node nd = CHAKRA_PROTO_MSG__NODE__INIT;
  nd.id = 4;
  nd.name = (char *)"gemm";
  nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
  ChakraProtoMsg__AttributeProto a[3];
  ChakraProtoMsg__AttributeProto *ap[3] = {&a[0], &a[1], &a[2]};
  for (int i = 0; i < 3; i++)
    chakra_proto_msg__attribute_proto__init(&a[i]);
  a[0].name = (char *)"num_ops";
  a[0].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
  a[0].int64_val = 1000000000;
  a[1].name = (char *)"trainsim.class";
  a[1].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL;
  a[1].string_val = (char *)"gemm";
  a[2].name = (char *)"trainsim.m";
  a[2].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_DOUBLE_VAL;
  a[2].double_val = -5;
  nd.n_attr = 3;
  nd.attr = ap;
  put_msg(b, &nd.base);
  return b;
}

static GByteArray *et_empty(void)
{
  GByteArray *b = g_byte_array_new();
  ChakraProtoMsg__GlobalMetadata gm = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
  put_msg(b, &gm.base);
  return b;
}

Test(traces, import_mismatches_are_one_line_before_the_engine)
{
  g_autofree char *dir = g_dir_make_tmp("import-XXXXXX", NULL);
  g_autofree char *src = src_path("traces/imported/chakra/bert-base-dp8");
  /* A recv with no send: rank 1 receives from rank 0, which sends nothing. */
  g_autoptr(GByteArray) r0 = et_empty(), r1 = et_recv_only();
  g_autofree char *p0 = g_build_filename(dir, "job.0.et", NULL);
  g_autofree char *p1 = g_build_filename(dir, "job.1.et", NULL);
  cr_assert(g_file_set_contents(p0, (const char *)r0->data, r0->len, NULL));
  cr_assert(g_file_set_contents(p1, (const char *)r1->data, r1->len, NULL));
  /* Members of one group whose collectives differ in size. */
  g_autoptr(GByteArray) c0 = et_allreduce(1024), c1 = et_allreduce(2048);
  g_autofree char *q0 = g_build_filename(dir, "coll.0.et", NULL);
  g_autofree char *q1 = g_build_filename(dir, "coll.1.et", NULL);
  cr_assert(g_file_set_contents(q0, (const char *)c0->data, c0->len, NULL));
  cr_assert(g_file_set_contents(q1, (const char *)c1->data, c1->len, NULL));
  g_autoptr(GByteArray) s0 = et_bad_shape();
  g_autofree char *sp0 = g_build_filename(dir, "shape.0.et", NULL);
  cr_assert(g_file_set_contents(sp0, (const char *)s0->data, s0->len, NULL));
  g_autofree char *bad_groups = g_build_filename(dir, "groups.json", NULL);
  cr_assert(g_file_set_contents(bad_groups, "{\"dp@0\": [0, 1, 2, 3, 4, 5, 6, 99]}", -1, NULL));
  /* json-glib kept the second list: the error blamed the trace ("does not list rank 1"). */
  g_autofree char *dup_groups = g_build_filename(dir, "dup.json", NULL);
  cr_assert(g_file_set_contents(
      dup_groups, "{\"dp@0\": [0, 1, 2, 3, 4, 5, 6, 7], \"x\": [0], \"dp@0\": [0]}", -1, NULL));
  g_autofree char *short_groups = g_build_filename(dir, "short.json", NULL);
  cr_assert(g_file_set_contents(short_groups, "{\"dp@0\": [0, 1, 2, 3, 4, 5, 6, 7]}", -1, NULL));
  g_autofree char *trunc = g_build_filename(dir, "cut.0.et", NULL);
  g_autofree char *whole = g_build_filename(src, "bert-base-dp8.0.et", NULL);
  g_autofree char *wt = NULL;
  gsize wl = 0;
  cr_assert(g_file_get_contents(whole, &wt, &wl, NULL));
  cr_assert(g_file_set_contents(trunc, wt, (gssize)(wl / 2), NULL));
  /* A node name with a 0xff byte went into labels, and out as "\377" in written traces. */
  g_autofree char *uname = g_build_filename(dir, "uname.0.et", NULL);
  {
    g_autofree char *copy = g_memdup2(wt, wl);
    char *at = NULL; /* binary data: no strstr */
    for (gsize i = 0; at == NULL && i + 9 <= wl; i++)
      if (memcmp(copy + i, "embedding", 9) == 0)
        at = copy + i;
    cr_assert_not_null(at);
    *at = (char)0xff;
    cr_assert(g_file_set_contents(uname, copy, (gssize)wl, NULL));
  }
  g_autofree char *astra = g_build_filename(dir, "bad.txt", NULL);
  cr_assert(g_file_set_contents(astra,
                                "DATA\n2\nconv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 64 5\n"
                                "conv2 -1 5 NONE\n",
                                -1, NULL));
  /* A 0xff in a layer name: the regex that splits fields read nothing ("layer 1 of 1 missing"). */
  g_autofree char *astra_utf8 = g_build_filename(dir, "utf8.txt", NULL);
  cr_assert(g_file_set_contents(astra_utf8,
                                "DATA\n1\n\xff"
                                "conv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 64 5\n",
                                -1, NULL));
  /* A 100 kB first token was quoted whole in the error: 100 kB on one line of stderr. */
  g_autofree char *longl = g_build_filename(dir, "long.txt", NULL);
  g_autofree char *lt = g_strnfill(100000, 'b');
  g_autofree char *ltext = g_strconcat("DATA\n", lt, "\n", NULL);
  cr_assert(g_file_set_contents(longl, ltext, -1, NULL));
  const struct {
    char *args;
    const char *expect;
  } cases[] = {
      {g_strdup_printf("import -t dgx-a100-1node --from astrasim %s", longl),
       "long.txt:2: a line of 100000 bytes; expected an ASTRA-sim workload line of at most 4096 "
       "bytes"},
      {g_strdup_printf("replay -t dgx-a100-1node %s %s", p0, p1),
       "job.1.et: node 7: recv from rank 0 tag 5 has no matching send"},
      {g_strdup_printf("replay -t dgx-a100-1node %s %s", q0, q1),
       "coll.1.et: node 3: collective on group \"all ranks\" differs from rank 0's"},
      {g_strdup_printf("replay -t tpu-v2-8 %s/bert-base-dp8.*.et", src), "8 ranks but topology"},
      {g_strdup_printf("replay -t dgx-a100-1node --comm-groups %s %s/bert-base-dp8.0.et",
                       bad_groups, src),
       "groups.json: group \"dp@0\" member 7: expected a rank in [0, 8)"},
      {g_strdup_printf("replay -t dgx-a100-1node --comm-groups %s %s/bert-base-dp8.0.et",
                       dup_groups, src),
       "dup.json: group \"dp@0\" given twice; expected each group once"},
      {g_strdup_printf("replay -t dgx-a100-1node --comm-groups %s %s/bert-base-dp8.0.et "
                       "%s/bert-base-dp8.1.et",
                       short_groups, src, src),
       "bert-base-dp8.0.et: node "},
      {g_strdup_printf("replay -t dgx-a100-1node %s", trunc), "cut.0.et: byte "},
      {g_strdup_printf("replay -t dgx-a100-1node %s", uname),
       ": name is not UTF-8; expected UTF-8 text"},
      {g_strdup_printf("replay -t dgx-a100-1node %s", sp0),
       "shape.0.et: node 4: attribute trainsim.m: expected a number in [0, 1e25]"},
      {g_strdup_printf("replay -t dgx-a100-1node --from astrasim %s", astra),
       "bad.txt:4: 4 fields; expected 12: NAME RESERVED"},
      {g_strdup_printf("replay -t dgx-a100-1node --from astrasim %s", astra_utf8),
       "utf8.txt:3: byte 8 (0xff) is not UTF-8; expected an ASTRA-sim text workload"},
      {g_strdup_printf("import -t dgx-a100-1node --from nope %s", astra),
       "--from 'nope': expected chakra or astrasim"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    /* The shell expands no globs here: expand the one case that needs it. */
    g_autofree char *args = cases[i].args;
    if (strstr(args, "*.et") != NULL) {
      g_autoptr(GPtrArray) et = files_in(src, ".et");
      g_ptr_array_add(et, NULL);
      g_autofree char *joined = g_strjoinv(" ", (char **)et->pdata);
      g_free(args);
      args = g_strdup_printf("replay -t tpu-v2-8 %s", joined);
    }
    run_result r = run(args);
    cr_assert_eq(r.status, 2, "%s: status %d: %s", args, r.status, r.err);
    cr_assert(strstr(r.err, cases[i].expect) != NULL, "%s: '%s' lacks '%s'", args, r.err,
              cases[i].expect);
    cr_assert(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "one line: %s", r.err);
    run_free(&r);
  }
  g_autoptr(GPtrArray) rm = files_in(dir, "");
  for (guint i = 0; i < rm->len; i++)
    g_unlink(g_ptr_array_index(rm, i));
  g_rmdir(dir);
}

Test(traces, importers_take_bytes)
{
  /* The fuzzing entry points: any bytes give a trace or one error, never a crash. */
  g_autoptr(ts_topo) t = load_topo("dgx-a100-1node");
  const char *const junk[] = {"",
                              "\x07",
                              "\x05\x0a\x03\x30\x2e",
                              "DATA\n1\n",
                              "MODEL\n-3\n",
                              "HYBRID_TRANSFORMER model_parallel_NPU_group: 3\n1\n"
                              "a -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n"};
  for (size_t i = 0; i < G_N_ELEMENTS(junk); i++) {
    GError *err = NULL;
    const guint8 *d = (const guint8 *)junk[i];
    gsize n = strlen(junk[i]);
    const char *p = "fuzz.0.et";
    int rank = 0;
    ts_trace *a = ts_import_chakra_bytes(&d, &n, &p, &rank, 1, t, NULL, NULL, &err);
    if (a == NULL) {
      cr_assert(strchr(err->message, '\n') == NULL);
      g_clear_error(&err);
    }
    ts_trace_free(a);
    ts_trace *b = ts_import_astrasim_bytes(d, n, "fuzz.txt", t, &err);
    cr_assert_null(b, "case %zu", i);
    cr_assert(strchr(err->message, '\n') == NULL);
    g_clear_error(&err);
  }
}

/* SimGrid's own MPI replay of an exported trace agrees with trainsim's simgrid backend. */
Test(traces, tit_export_replays_in_smpirun_within_1_percent)
{
  g_autofree char *smpirun = g_find_program_in_path("smpirun");
  if (smpirun == NULL) {
    cr_skip_test("smpirun not found (Debian: libsimgrid-dev ships it): TIT replay not checked");
    return;
  }
  g_autofree char *dir = g_dir_make_tmp("tit-XXXXXX", NULL);
  g_autofree char *trace = src_path("traces/handwritten/data-parallel-serial.trace");
  g_autofree char *a1 = g_strdup_printf("export --to tit -t dgx-a100-1node %s -o %s", trace, dir);
  g_autofree char *a2 = g_strdup_printf("platform -t dgx-a100-1node -o %s/platform.xml", dir);
  const char *args[] = {a1, a2};
  for (int i = 0; i < 2; i++) {
    run_result r = run(args[i]);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
  }
  g_autofree char *hosts = g_build_filename(dir, "hosts", NULL);
  cr_assert(g_file_set_contents(hosts, "c0\nc1\nc2\nc3\nc4\nc5\nc6\nc7\n", -1, NULL));
  g_autofree char *plat = g_build_filename(dir, "platform.xml", NULL);
  g_autofree char *index = g_build_filename(dir, "index.txt", NULL);
  const char *argv[] = {smpirun,
                        "-np",
                        "8",
                        "-platform",
                        plat,
                        "-hostfile",
                        hosts,
                        "-replay",
                        index,
                        "--cfg=network/model:CM02",
                        "--cfg=network/crosstraffic:0",
                        "--cfg=network/TCP-gamma:0",
                        "--log=root.thres:warning",
                        "--log=smpi_replay.thres:info",
                        NULL};
  g_autofree char *out = NULL, *err = NULL;
  int status = 0;
  GError *e = NULL;
  cr_assert(
      g_spawn_sync(dir, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &e),
      "%s", e ? e->message : "");
  const char *m = strstr(err, "Simulation time ");
  cr_assert_not_null(m, "smpirun printed no simulation time: %s", err);
  double smpi = g_ascii_strtod(m + 16, NULL);
  double want = 0;
  for (guint k = 0; k < NPINNED; k++)
    if (strcmp(PINNED(k).file, "traces/handwritten/data-parallel-serial.trace") == 0)
      want = PINNED(k).simgrid_s;
  cr_assert(fabs(smpi - want) <= 0.01 * want, "smpirun %.9g s, trainsim simgrid %.9g s", smpi,
            want);
  g_autoptr(GPtrArray) rm = files_in(dir, "");
  for (guint i = 0; i < rm->len; i++)
    g_unlink(g_ptr_array_index(rm, i));
  g_rmdir(dir);
}
