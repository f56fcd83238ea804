/* Trace format 2 (off-chip transfers, fixed durations, tags, member-list groups, peers by
 * rank) and the trace reader's bounds: what it refuses, and closed forms of what it replays. */
#include "ts_replay.h"
#include "ts_run.h"
#include "ts_test.h"
#include "ts_trace.h"
#include "ts_util.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every op kind and every format 2 field. */
static const char *const v2_text =
    "trainsim-trace 2\n"
    "ranks 4\n"
    "dim x 4\n"
    "axis rank 4 asymmetric x:4:1\n"
    "group 0 name=\"odd\" ranks=0,1,3\n"
    "group 1 name=\"all\" ranks=0,1,2,3\n"
    "group 2 rank\n"
    "meta samples=4 model_flops=0\n"
    "label 0 \"op\"\n"
    "program 0 7\n"
    "0 compute cat=fwd stream=0 label=0 flops=1000000000 mem_bytes=0 layer=3 mb=1 phase=fwd "
    "role=compute\n"
    "1 xfer cat=other stream=1 label=0 resource=host_link bytes=4194304 role=offload deps=0\n"
    "2 delay cat=optimizer stream=1 label=0 seconds=0.001 resource=host_cpu deps=1\n"
    "3 coll cat=comm_dp stream=0 label=0 kind=allreduce algo=auto group=0 bytes=3000000 deps=0\n"
    "4 send cat=comm_pp stream=2 label=0 peer=2 tag=7 bytes=1000000\n"
    "5 xfer cat=comm_dp stream=3 label=0 resource=storage bytes=1000 bw_Bps=1000000 "
    "latency_s=0.5\n"
    "6 coll cat=comm_dp stream=0 label=0 kind=allgather algo=auto group=1 bytes=4000 deps=3\n"
    "program 1 2\n"
    "0 coll cat=comm_dp stream=0 label=0 kind=allreduce algo=auto group=0 bytes=3000000\n"
    "1 coll cat=comm_dp stream=0 label=0 kind=allgather algo=auto group=1 bytes=4000 deps=0\n"
    "program 2 2\n"
    "0 recv cat=comm_pp stream=2 label=0 peer=0 tag=7 bytes=1000000\n"
    "1 coll cat=comm_dp stream=0 label=0 kind=allgather algo=auto group=1 bytes=4000\n"
    "program 3 2\n"
    "0 coll cat=comm_dp stream=0 label=0 kind=allreduce algo=auto group=0 bytes=3000000\n"
    "1 coll cat=comm_dp stream=0 label=0 kind=allgather algo=auto group=1 bytes=4000 deps=0\n"
    "end\n";

static ts_trace *parse(const char *text)
{
  GError *err = NULL;
  ts_trace *tr = ts_trace_from_text(text, "t.trace", &err);
  cr_assert_not_null(tr, "%s", err ? err->message : "");
  return tr;
}

static char *parse_error(const char *text)
{
  GError *err = NULL;
  ts_trace *tr = ts_trace_from_text(text, "bad.trace", &err);
  cr_assert_null(tr, "parsed: %s", text);
  cr_assert(strchr(err->message, '\n') == NULL, "one line: %s", err->message);
  char *m = g_strdup(err->message);
  g_error_free(err);
  return m;
}

Test(trace, v2_round_trip_is_exact)
{
  g_autoptr(ts_trace) tr = parse(v2_text);
  g_autofree char *out = ts_trace_to_text(tr);
  g_autoptr(ts_trace) back = parse(out);
  g_autofree char *out2 = ts_trace_to_text(back);
  cr_assert_str_eq(out, out2);
  const ts_op o_ = ts_program_op(&tr->programs[0], 0), *o = &o_;
  cr_assert_eq(o->t_layer, 4);
  cr_assert_eq(o->t_micro, 2);
  cr_assert_eq(o->t_phase, TS_PHASE_FWD);
  cr_assert_eq(o->t_role, TS_ROLE_COMPUTE);
  cr_assert_eq(ts_program_op(&tr->programs[0], 4).peer, 3);
  /* {0,1,3} is no regular shape of a 4-ring; {0,1,2,3} is the whole dimension. */
  const ts_group *odd = g_ptr_array_index(tr->groups, 0), *all = g_ptr_array_index(tr->groups, 1);
  cr_assert_eq(odd->shape.npieces, 0);
  cr_assert_eq(all->shape.npieces, 1);
  cr_assert_eq(all->shape.p[0].size, 4);
}

Test(trace, v1_still_read_and_v2_keys_refused_there)
{
  g_autoptr(ts_trace) tr = parse("trainsim-trace 1\nranks 2\ndim x 2\naxis dp 2 symmetric x:2:1\n"
                                 "label 0 \"a\"\nprogram 0 1\n0 compute cat=fwd stream=0 label=0 "
                                 "flops=1\nend\n");
  cr_assert_eq(tr->programs[0].nops, 1);
  g_autofree char *m = parse_error("trainsim-trace 1\nranks 2\ndim x 2\naxis dp 2 symmetric x:2:1\n"
                                   "label 0 \"a\"\nprogram 0 1\n0 delay cat=fwd stream=0 label=0 "
                                   "seconds=1\nend\n");
  cr_assert(strstr(m, "bad.trace:7: op kind 'delay'") != NULL, "%s", m);
}

/* Closed forms on a 4-ring (bw 1e10 B/s, 1 us per hop) whose chip has a 1 ms launch floor:
 * the floor applies to compute only. */
Test(trace, offchip_and_member_list_times)
{
  g_autoptr(ts_topo) t = ring_topo(4, 1e10, 1e-6);
  t->chip.op_overhead_s = 1e-3;
  g_autoptr(ts_trace) tr = parse(v2_text);
  GError *err = NULL;
  cr_assert(ts_trace_check(tr, t, &err), "%s", err ? err->message : "");
  cr_assert(ts_trace_resolve_algos(tr, t, &err), "%s", err ? err->message : "");
  const ts_op x_ = ts_program_op(&tr->programs[0], 1), *x = &x_;
  cr_assert_float_eq(ts_offchip_time(t, x), 4194304 / 1e10, 1e-15, "host link: bytes / bw");
  const ts_op d2 = ts_program_op(&tr->programs[0], 2), d5 = ts_program_op(&tr->programs[0], 5);
  cr_assert_float_eq(ts_offchip_time(t, &d2), 1e-3, 1e-15);
  cr_assert_float_eq(ts_offchip_time(t, &d5), 0.5 + 1000 / 1e6, 1e-12);
  /* Ring all-reduce over ranks 0,1,3: 2(n-1) = 4 steps of B/3; the slowest hop is 1 -> 3,
   * two links on the ring. */
  ts_replay_result rr;
  ts_run_options ro = {.backend = "analytic"};
  cr_assert(ts_run_replay(tr, t, &ro, &rr, &err), "%s", err ? err->message : "");
  double ar = 4 * (2e-6 + 1e6 / 1e10);
  /* Rank 0: compute 1 ms (floor), then the all-reduce, then the all-gather over all 4. */
  double ag = 0;
  ts_group_shape whole = {1, {{0, 4, 1}}};
  ag = ts_coll_time(t, TS_COLL_ALLGATHER, TS_ALGO_AUTO, &whole, 4000, NULL, &err);
  cr_assert(ag > 0);
  /* Rank 0 ends with its storage read at 0.501 s, after the collectives. */
  cr_assert_float_eq(rr.step_time_s, 0.5 + 1000 / 1e6, 1e-12);
  cr_assert(ar + 1e-3 + ag < 0.5, "the storage read is the longest path");
  /* The same trace without the off-chip ops: the collective path sets the step. */
  g_autofree char *t2 = g_strdup(v2_text);
  const char *zero[][2] = {{"bytes=1000 bw_Bps", "bytes=0000"},
                           {"bytes=4194304", "bytes=0000000"},
                           {"seconds=0.001", "seconds=0.000"},
                           {"latency_s=0.5", "latency_s=0.0"}};
  for (size_t i = 0; i < G_N_ELEMENTS(zero); i++) {
    char *p = strstr(t2, zero[i][0]);
    memcpy(p, zero[i][1], strlen(zero[i][1]));
  }
  g_autoptr(ts_trace) tr2 = parse(t2);
  cr_assert(ts_run_replay(tr2, t, &ro, &rr, &err), "%s", err ? err->message : "");
  cr_assert(fabs(rr.step_time_s - (1e-3 + ar + ag)) < 1e-12, "%.17g vs %.17g", rr.step_time_s,
            1e-3 + ar + ag);
}

Test(trace, simgrid_agrees_on_member_lists)
{
  g_autoptr(ts_topo) t = ring_topo(4, 1e10, 1e-6);
  g_autoptr(ts_trace) tr = parse(v2_text);
  ts_replay_result a, s;
  GError *err = NULL;
  ts_run_options ra = {.backend = "analytic"}, rs = {.backend = "simgrid"};
  cr_assert(ts_run_replay(tr, t, &ra, &a, &err), "%s", err ? err->message : "");
  cr_assert(ts_run_replay(tr, t, &rs, &s, &err), "%s", err ? err->message : "");
  cr_assert_float_eq(s.step_time_s, a.step_time_s, 1e-6 * a.step_time_s, "%.17g vs %.17g",
                     s.step_time_s, a.step_time_s);
}

Test(trace, bad_v2_inputs_are_one_line_errors)
{
  const struct {
    const char *text, *expect;
  } cases[] = {
      {"trainsim-trace 2\nranks 4\ndim x 4\ngroup 0 ranks=0,1,1\n", "rank 1 is listed twice"},
      {"trainsim-trace 2\nranks 4\ndim x 4\ngroup 0 ranks=0,9\n", "ranks='9'"},
      {"trainsim-trace 2\nranks 2\ndim x 2\naxis r 2 asymmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 1\n0 xfer cat=other stream=0 label=0 bytes=1\nend\n",
       "missing resource="},
      {"trainsim-trace 2\nranks 2\ndim x 2\naxis r 2 asymmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 1\n0 send cat=other stream=0 label=0 peer=2 bytes=1\nend\n",
       "peer='2'"},
      {"trainsim-trace 2\nranks 2\ndim x 2\naxis r 2 asymmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 1\n0 compute cat=fwd stream=0 label=0 phase=sideways\nend\n",
       "phase='sideways'"},
      /* A fraction of the GEMM rate and a switch: 2 and 0.5 were accepted. */
      {"trainsim-trace 2\nranks 2\ndim x 2\naxis r 2 asymmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 1\n0 compute cat=fwd stream=0 label=0 flops=1 class=flash flash_eff=2\nend\n",
       "flash_eff='2': expected a fraction of the GEMM rate in [0, 1]"},
      {"trainsim-trace 2\nranks 2\ndim x 2\naxis r 2 asymmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 1\n0 compute cat=fwd stream=0 label=0 flops=1 class=gemm launch_blocking=0.5\n"
       "end\n",
       "launch_blocking='0.5': expected a flag, 0 or 1, in [0, 1]"},
      {"trainsim-trace 2\nranks 2\ndim x 2\naxis r 2 asymmetric x:2:1\nlabel 0 \"a\"\n"
       "program 0 1\n0 compute cat=bwd stream=0 label=0 flops=1 class=gemm split_accum=2\n"
       "end\n",
       "split_accum='2': expected a flag, 0 or 1, in [0, 1]"},
      /* issue 12: a duplicated axis in a group ("replay stuck" before) */
      {"trainsim-trace 1\nranks 4\ndim x 4\naxis dp 4 symmetric x:4:1\ngroup 0 dp dp\n"
       "label 0 \"a\"\nprogram 0 0\nend\n",
       "group 0 lists axis dp twice"},
      /* issue 12: overlapping pieces (a wrong time before) */
      {"trainsim-trace 1\nranks 4\ndim x 2\ndim y 2\naxis a 2 symmetric x:2:1\n"
       "axis b 2 symmetric x:2:1\nlabel 0 \"a\"\nprogram 0 0\nend\n",
       "overlaps"},
      /* issue 12: huge asymmetric axes on a small file: refused before any allocation */
      {"trainsim-trace 1\nranks 16777216\ndim x 4096\ndim y 4096\n"
       "axis a 65536 asymmetric x:65536:1\naxis b 65536 asymmetric y:65536:1\n"
       "label 0 \"a\"\nprogram 0 0\nend\n",
       "bad.trace:8: axis a:"},
      {"trainsim-trace 1\nranks 16777216\ndim x 4096\ndim y 4096\n"
       "axis a 4096 asymmetric x:4096:1\naxis b 4096 asymmetric y:4096:1\n"
       "label 0 \"a\"\nprogram 0 0\nend\n",
       "expected 16777216 programs, found 1"},
      {"trainsim-trace 1\nranks 4\ndim x 65536\ndim y 65536\naxis a 4 asymmetric x:4:1\n"
       "label 0 \"a\"\nprogram 0 0\nend\n",
       "bad.trace:7: the dims multiply to more than 4 ranks"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *m = parse_error(cases[i].text);
    cr_assert(strstr(m, cases[i].expect) != NULL, "case %zu: '%s' lacks '%s'", i, m,
              cases[i].expect);
  }
}

Test(trace, member_list_must_hold_its_users)
{
  g_autofree char *m = parse_error("trainsim-trace 2\nranks 2\ndim x 2\naxis r 2 asymmetric "
                                   "x:2:1\ngroup 0 ranks=0\nlabel 0 \"a\"\nprogram 0 0\nprogram 1 "
                                   "1\n0 coll cat=other stream=0 label=0 kind=allreduce group=0 "
                                   "bytes=1\nend\n");
  cr_assert(strstr(m, "rank 1 op 0 'a': collective on group g0, which does not list rank 1") !=
                NULL,
            "%s", m);
}

/* issue 12: replay, check and merge read /dev/zero, FIFOs and huge files unboundedly. */
Test(trace, reader_refuses_what_is_not_a_small_regular_file)
{
  char *text = NULL;
  GError *err = NULL;
  cr_assert_not(ts_read_input_file("/dev/zero", 1 << 20, &text, NULL, &err));
  cr_assert(strstr(err->message, "/dev/zero: a device; expected a regular file"), "%s",
            err->message);
  g_clear_error(&err);
  g_autofree char *dir = g_dir_make_tmp("trace-XXXXXX", NULL);
  g_autofree char *fifo = g_build_filename(dir, "fifo", NULL);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  cr_assert_not(ts_read_input_file(fifo, 1 << 20, &text, NULL, &err));
  cr_assert(strstr(err->message, "a FIFO; expected a regular file"), "%s", err->message);
  g_clear_error(&err);
  g_autofree char *big = g_build_filename(dir, "big", NULL);
  cr_assert(g_file_set_contents(big, "0123456789abcdef", 16, NULL));
  cr_assert_not(ts_read_input_file(big, 10, &text, NULL, &err));
  cr_assert(strstr(err->message, "16 bytes; expected at most 10 bytes"), "%s", err->message);
  g_clear_error(&err);
  gsize len = 0;
  cr_assert(ts_read_input_file(big, 16, &text, &len, &err));
  cr_assert_eq(len, 16);
  g_free(text);
  /* The commands: one line, exit 2, no hang (the FIFO has no writer). */
  g_autofree char *shard = g_build_filename(dir, "shard", NULL);
  g_autofree char *sfifo = g_build_filename(shard, "sweep.json", NULL);
  cr_assert_eq(g_mkdir(shard, 0700), 0);
  cr_assert_eq(mkfifo(sfifo, 0600), 0);
  const char *cmds[] = {"replay /dev/zero -t tpu-v3-8x8", "check /dev/zero",
                        "replay %s -t tpu-v3-8x8", "check %s", "merge %s --output-dir %s/out"};
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    g_autofree char *args =
        i == 4 ? g_strdup_printf(cmds[i], shard, dir) : g_strdup_printf(cmds[i], fifo, dir);
    run_result r = run(args);
    cr_assert_eq(r.status, 2, "%s: status %d: %s", args, r.status, r.err);
    cr_assert(strstr(r.err, "expected a regular file") != NULL, "%s: %s", args, r.err);
    run_free(&r);
  }
  unlink(sfifo);
  g_rmdir(shard);
  unlink(fifo);
  unlink(big);
  g_rmdir(dir);
}

Test(trace, planner_emits_offchip_ops_without_the_launch_floor)
{
  /* Review appendix B: a 4 MiB host-link transfer on dgx-a100 (op_overhead_us 201.2) took
   * 201.2 us as a compute op; as an xfer it is 4 MiB / 25 GB/s. */
  run_result r = run("trace -t dgx-a100-1node -m gpt3-350m -b 8 -s dp=8,zero=2,offload=cpu -o -");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(strstr(r.out, "trainsim-trace 2\n") == r.out);
  cr_assert(strstr(r.out, " xfer cat=other stream=8 label=") != NULL);
  cr_assert(strstr(r.out, "resource=host_link bytes=4198400") != NULL);
  cr_assert(strstr(r.out, " delay cat=optimizer ") != NULL);
  cr_assert(strstr(r.out, "algo=auto") == NULL, "the algorithm is resolved once, in the trace");
  run_free(&r);
}

/* The trace `trainsim CMD` (a trace command) prints; the test fails if it exits non-zero or
 * the text does not parse. */
static ts_trace *planner_trace(const char *cmd)
{
  run_result r = run(cmd);
  cr_assert_eq(r.status, 0, "%s", r.err);
  GError *err = NULL;
  ts_trace *tr = ts_trace_from_text(r.out, "planner", &err);
  cr_assert_not_null(tr, "%s", err ? err->message : "");
  run_free(&r);
  return tr;
}

Test(trace, planner_tags_every_op)
{
  /* The validator and the timeline read tags, not labels: every op the planner writes has a
   * role; layer ops their layer, pipeline ops their stage, gradient buckets their layers. */
  const char *cmds[] = {
      "trace -t dgx-a100-1node -m bert-base -s tp=2,pp=2,dp=2,sp,recompute=selective -b 16",
      "trace -t dgx-a100-1node -m gpt3-350m -s dp=8,zero=3,offload=nvme -b 8",
      "trace -t dgx-a100-1node -m mlp -s dp=8,ps=2 -b 16"};
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    g_autoptr(ts_trace) tr = planner_trace(cmds[i]);
    for (int p = 0; p < tr->nprograms; p++)
      for (int k = 0; k < tr->programs[p].nops; k++) {
        const ts_op o_ = ts_program_op(&tr->programs[p], k), *o = &o_;
        const char *label = g_ptr_array_index(tr->labels, o->label);
        cr_assert_neq(o->t_role, TS_ROLE_NONE, "%s: '%s' untagged", cmds[i], label);
        if (o->t_role == TS_ROLE_COMPUTE || o->t_role == TS_ROLE_TP)
          cr_assert_gt(o->t_layer, 0, "%s: '%s' without its layer", cmds[i], label);
        if (o->t_role == TS_ROLE_PP && o->kind != TS_OP_WAIT)
          cr_assert_gt(o->t_stage, 0, "%s: '%s' without its stage", cmds[i], label);
        if (o->t_role == TS_ROLE_GRAD)
          cr_assert(o->t_layer > 0 && o->t_layer_last >= o->t_layer, "%s: '%s'", cmds[i], label);
      }
  }
}

Test(trace, parameter_server_update_waits_for_every_push_of_its_stage)
{
  /* Bulk-synchronous servers (GeePS): each stage's program updates its shard after every one
   * of its gradient pushes (small buckets: several pushes per stage), directly or through
   * another dependency; the pull follows the update. */
  const char *cmds[] = {
      "trace -t dgx-a100-1node -m mlp -s pp=2,dp=4,ps=1 -b 16 --micro-batch 2 --bucket-MiB 1",
      "trace -t dgx-a100-1node -m mlp -s pp=2,dp=4,ps=2,ps-placement=dedicated,schedule=gpipe "
      "-b 16 --micro-batch 2 --bucket-MiB 1"};
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    g_autoptr(ts_trace) tr = planner_trace(cmds[i]);
    cr_assert_eq(tr->nprograms, 2);
    int pushes_total = 0;
    for (int p = 0; p < tr->nprograms; p++) {
      const ts_program *pr = &tr->programs[p];
      /* after[k * n + j]: op k follows op j (transitively). */
      int n = pr->nops, upd = -1, pull = -1, npush = 0;
      g_autofree gboolean *after = g_new0(gboolean, (gsize)n * (gsize)n);
      for (int k = 0; k < n; k++) {
        int nd;
        const int *d = ts_program_deps(pr, k, &nd);
        for (int q = 0; q < nd; q++) {
          after[(gsize)k * n + d[q]] = TRUE;
          for (int j = 0; j < n; j++)
            after[(gsize)k * n + j] |= after[(gsize)d[q] * n + j];
        }
        const ts_op o = ts_program_op(pr, k);
        if (o.t_role == TS_ROLE_GRAD)
          npush++;
        if (o.t_role == TS_ROLE_PS_UPDATE)
          upd = k;
        if (o.t_role == TS_ROLE_PARAM_GATHER)
          pull = k;
      }
      cr_assert(upd >= 0 && pull > upd, "%s: program %d", cmds[i], p);
      cr_assert(after[(gsize)pull * n + upd], "%s: the pull does not follow the update", cmds[i]);
      for (int k = 0; k < n; k++)
        if (ts_program_op(pr, k).t_role == TS_ROLE_GRAD)
          cr_assert(after[(gsize)upd * n + k], "%s: program %d's update skips push op %d", cmds[i],
                    p, k);
      pushes_total += npush;
    }
    cr_assert_gt(pushes_total, 2, "%s: expected several buckets", cmds[i]);
  }
}

Test(trace, files_read_in_blocks_equal_text_read_whole)
{
  /* ts_trace_load reads 1 MiB blocks: a 2.5 MB trace has lines across block boundaries. */
  GString *s = g_string_new("trainsim-trace 2\r\nranks 2\ndim x 2\naxis dp 2 symmetric x:2:1\n"
                            "group 0 dp\nlabel 0 \"a\"\n");
  int n = 40000;
  g_string_append_printf(s, "program 0 %d\n", n);
  for (int i = 0; i < n; i++)
    g_string_append_printf(s, "%d compute cat=fwd stream=0 label=0 flops=%d mem_bytes=%d\n", i,
                           1000 + i, 7 * i);
  g_string_append(s, "end"); /* no final newline */
  g_autofree char *dir = g_dir_make_tmp("blocks-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "big.trace", NULL);
  cr_assert(g_file_set_contents(path, s->str, (gssize)s->len, NULL));
  cr_assert_gt(s->len, 2u << 20);
  GError *err = NULL;
  g_autoptr(ts_trace) a = ts_trace_load(path, &err);
  cr_assert_not_null(a, "%s", err ? err->message : "");
  g_autoptr(ts_trace) b = parse(s->str);
  g_autofree char *ta = ts_trace_to_text(a), *tb = ts_trace_to_text(b);
  cr_assert_str_eq(ta, tb);
  cr_assert_eq(a->programs[0].nops, n);
  /* A NUL byte deep in the file names its line. */
  s->str[s->len - 100] = '\0';
  int line = 1;
  for (gsize k = 0; k < s->len - 100; k++)
    line += s->str[k] == '\n';
  cr_assert_gt(line, n);
  cr_assert(g_file_set_contents(path, s->str, (gssize)s->len, NULL));
  ts_trace *c = ts_trace_load(path, &err);
  cr_assert_null(c);
  g_autofree char *want = g_strdup_printf(":%d: NUL byte", line);
  cr_assert(strstr(err->message, want) != NULL, "%s lacks %s", err->message, want);
  g_clear_error(&err);
  g_string_free(s, TRUE);
  g_unlink(path);
  g_rmdir(dir);
}

Test(trace, one_array_geometry_for_topology_trace_and_groups)
{
  /* ts_array is the one geometry type (issue 11, review B4): a trace's array is its topology's,
   * and group arithmetic on it (what the trace and the replay use, with no topology built for
   * the purpose) agrees with the topology's for every chip of a 3D twisted torus. */
  g_autoptr(ts_topo) t = load_topo("tpu-v4-4x4x8-twisted");
  g_autoptr(ts_trace) tr = ts_trace_new(t);
  ts_array a = ts_topo_array(t), b = ts_trace_array(tr);
  cr_assert_eq(b.ndims, 3);
  cr_assert_eq(a.ndims, b.ndims);
  for (int d = 0; d < a.ndims; d++) {
    cr_assert_eq(a.size[d], b.size[d]);
    cr_assert_str_eq(a.name[d], b.name[d]);
  }
  int n = ts_array_nchips(&b);
  cr_assert_eq(n, t->nchips);
  ts_group_shape g = {.npieces = 2, .p = {{0, 2, 2}, {2, 4, 2}}};
  cr_assert(ts_array_shape_valid(&b, &g, NULL));
  int seen_bases = 0;
  for (int c = 0; c < n; c++) {
    int m = -1, mt = -2;
    int base = ts_array_base_chip(&b, &g, c, &m);
    int bt = ts_group_base_chip(t, &g, c, &mt);
    cr_assert(base == bt && m == mt, "chip %d: base %d/%d member %d/%d", c, base, bt, m, mt);
    int back = ts_array_member_chip(&b, &g, base, m);
    cr_assert_eq(back, c, "chip %d: member %d of base %d is chip %d", c, m, base, back);
    seen_bases += base == c;
  }
  cr_assert_eq(seen_bases, n / 8, "groups of 8 tile the array");
  /* An axis group's ranks on the trace's array, and a member list's as listed. */
  int ax = ts_trace_add_axis(tr, "g", 8, TRUE, &g);
  int gi = ts_trace_group(tr, &ax, 1);
  const ts_group *tg = g_ptr_array_index(tr->groups, gi);
  int r5 = ts_trace_group_rank(tr, tg, 0, 5);
  cr_assert_eq(r5, ts_group_member_chip(t, &g, 0, 5));
  int members[] = {3, 9, 1};
  GError *err = NULL;
  int li = ts_trace_group_members(tr, "list", members, 3, &err);
  cr_assert_geq(li, 0, "%s", err ? err->message : "");
  cr_assert_eq(ts_trace_group_rank(tr, g_ptr_array_index(tr->groups, li), 0, 1), 9);
  /* Messages name where the array came from. */
  ts_group_shape bad = {.npieces = 1, .p = {{1, 4, 2}}};
  cr_assert_not(ts_array_shape_valid(&b, &bad, &err));
  cr_assert(g_str_has_prefix(err->message, "trace: "), "%s", err->message);
  g_clear_error(&err);
}

/* Every field of two ops equal (doubles bit for bit, so -0.0 is not 0.0); the shape by
 * pointer (both interned), dependencies by content. */
static void expect_same_op(const ts_op *got, const ts_op *want, const char *what)
{
#define SAME_INT(f)                                                                                \
  cr_expect_eq((int)got->f, (int)want->f, "%s: %s %d, expected %d", what, #f, (int)got->f,         \
               (int)want->f)
#define SAME_DBL(f)                                                                                \
  cr_expect(memcmp(&got->f, &want->f, sizeof(double)) == 0, "%s: %s %.17g, expected %.17g", what,  \
            #f, got->f, want->f)
  SAME_INT(kind);
  SAME_INT(cat);
  SAME_INT(coll);
  SAME_INT(algo);
  SAME_INT(resource);
  SAME_INT(t_phase);
  SAME_INT(t_role);
  SAME_INT(stream);
  SAME_INT(label);
  SAME_DBL(flops);
  SAME_DBL(mem_bytes);
  SAME_DBL(bytes);
  SAME_INT(group);
  SAME_INT(axis);
  SAME_INT(offset);
  SAME_INT(tag);
  SAME_INT(peer);
  SAME_DBL(seconds);
  SAME_DBL(bw_Bps);
  SAME_INT(t_layer);
  SAME_INT(t_layer_last);
  SAME_INT(t_micro);
  SAME_INT(t_stage);
  SAME_INT(coll_id);
  SAME_INT(ndeps);
  cr_expect(got->shape == want->shape, "%s: shape %p, expected %p", what, (void *)got->shape,
            (void *)want->shape);
  for (int k = 0; k < got->ndeps && k < want->ndeps; k++)
    cr_expect_eq(got->deps[k], want->deps[k], "%s: dep %d", what, k);
#undef SAME_INT
#undef SAME_DBL
}

Test(trace, packed_store_keeps_every_field_of_every_op)
{
  /* Ops are stored packed (issue 11: 40 bytes, a 10-million-op trace in <= 1 GB) with the
   * rare fields in side tables and ops that fit no packed form kept whole: whatever an op
   * holds comes back, including fields its kind does not use. */
  g_autoptr(ts_trace) tr = parse("trainsim-trace 2\nranks 4\ndim x 4\naxis dp 4 symmetric x:4:1\n"
                                 "group 0 dp\nlabel 0 \"a\"\nlabel 1 \"b\"\nprogram 0 0\nend\n");
  ts_op_shape sh = {0};
  sh.oclass = TS_OPC_GEMM;
  sh.kernels = 1;
  sh.m = 64;
  sh.n = 128;
  sh.k = 256;
  ts_op ops[16];
  memset(ops, 0, sizeof ops);
  int n = 0;
  /* Plain ops of every kind (no side record): the reader's -1 for unused group and axis. */
  ops[n++] = (ts_op){.kind = TS_OP_COMPUTE,
                     .cat = TS_CAT_BWD,
                     .stream = 0,
                     .label = 1,
                     .flops = 1e9,
                     .mem_bytes = 1e6,
                     .group = -1,
                     .axis = -1};
  ops[n++] = (ts_op){.kind = TS_OP_COMPUTE, .flops = 3, .mem_bytes = 4, .shape = &sh};
  ops[n++] = (ts_op){.kind = TS_OP_COLL,
                     .cat = TS_CAT_COMM_DP,
                     .stream = 1,
                     .coll = TS_COLL_ALLREDUCE,
                     .algo = TS_ALGO_RING,
                     .group = 0,
                     .bytes = 1048576,
                     .coll_id = 3,
                     .axis = -1};
  ops[n++] = (ts_op){.kind = TS_OP_WAIT, .stream = 0, .group = -1, .axis = -1};
  ops[n++] = (ts_op){.kind = TS_OP_DELAY, .resource = TS_RES_HOST_CPU, .seconds = 0.25};
  int plain = n;
  /* Side records: tags, a send's tag and peer, an XFER's bandwidth. */
  ops[n++] = (ts_op){.kind = TS_OP_COMPUTE,
                     .flops = 5,
                     .t_phase = TS_PHASE_FWD,
                     .t_role = TS_ROLE_COMPUTE,
                     .t_layer = 7,
                     .t_micro = 2,
                     .t_stage = 1,
                     .t_layer_last = 9};
  ops[n++] = (ts_op){.kind = TS_OP_SEND,
                     .cat = TS_CAT_COMM_PP,
                     .stream = 2,
                     .axis = 0,
                     .offset = 1,
                     .tag = 7,
                     .peer = 3,
                     .bytes = 1e6};
  ops[n++] = (ts_op){
      .kind = TS_OP_XFER, .resource = TS_RES_STORAGE, .bytes = 1000, .seconds = 0.5, .bw_Bps = 1e6};
  /* Fields the kind's packed form has no room for: the op is kept whole. */
  ops[n++] =
      (ts_op){.kind = TS_OP_COLL, .coll = TS_COLL_ALLGATHER, .group = 0, .bytes = 8, .flops = 5};
  ops[n++] = (ts_op){.kind = TS_OP_COMPUTE, .flops = 1, .group = 2};
  ops[n++] = (ts_op){.kind = TS_OP_COMPUTE, .flops = 1, .bytes = -0.0};
  ops[n++] = (ts_op){.kind = TS_OP_RECV, .axis = 0, .offset = -1, .seconds = 1, .tag = 3};
  ops[n++] = (ts_op){.kind = TS_OP_WAIT, .mem_bytes = 2, .t_micro = 4};
  for (int i = 0; i < n; i++) {
    int deps[3] = {i - 1, i - 2, 0};
    int nd = i >= 2 ? 2 + (i % 2) : i;
    cr_assert_eq(ts_trace_append(tr, 0, &ops[i], deps, nd), i);
  }
  const ts_program *p = &tr->programs[0];
  const ts_op_shape *interned = ts_trace_intern_shape(tr, &sh);
  cr_assert(interned != NULL && interned != &sh);
  for (int i = 0; i < n; i++) {
    ts_op want = ops[i];
    if (want.shape != NULL)
      want.shape = interned;
    int deps[3] = {i - 1, i - 2, 0};
    want.ndeps = i >= 2 ? 2 + (i % 2) : i;
    want.deps = deps;
    ts_op got = ts_program_op(p, i);
    g_autofree char *what = g_strdup_printf("op %d", i);
    expect_same_op(&got, &want, what);
    cr_expect_eq(ts_program_op_kind(p, i), ops[i].kind);
    cr_expect_eq(ts_program_op_group(p, i), ops[i].kind == TS_OP_COLL ? ops[i].group : -1);
    /* Plain ops take no side record: 40 bytes and their dependencies. */
    cr_expect_eq(p->pk[i].flags & (TS_PK_EXT | TS_PK_WIDE),
                 i < plain ? 0u
                 : i < 8   ? TS_PK_EXT
                           : TS_PK_WIDE,
                 "op %d flags %u", i, p->pk[i].flags);
  }
  cr_assert_eq(sizeof(ts_op_packed), 40u);
  /* Replacing an op keeps its dependencies; a side record is dropped when no longer needed;
   * dropped dependencies are gone. */
  ts_op c = ts_program_op(p, 6);
  c.bytes = 2e6;
  c.tag = 0;
  c.peer = 0;
  ts_program_set_op(tr, 0, 6, &c);
  ts_op back = ts_program_op(p, 6);
  expect_same_op(&back, &c, "op 6 replaced");
  cr_expect_eq(p->pk[6].flags & (TS_PK_EXT | TS_PK_WIDE), 0u);
  ts_program_set_op(tr, 0, 0, &ops[8]); /* a plain op replaced by one kept whole */
  back = ts_program_op(p, 0);
  ts_op w = ops[8];
  w.ndeps = 0;
  w.deps = NULL;
  expect_same_op(&back, &w, "op 0 replaced");
  ts_program_drop_deps(&tr->programs[0], 5);
  int nd = -1;
  cr_expect_null(ts_program_deps(p, 5, &nd));
  cr_expect_eq(nd, 0);
  cr_expect_eq(ts_program_op(p, 5).ndeps, 0);
  cr_expect_eq(ts_program_op(p, 5).t_layer, 7, "the op itself is kept");
  cr_expect_eq(ts_program_op(p, 4).ndeps, 2, "its neighbours' dependencies are kept");
  cr_expect_eq(ts_program_op(p, 6).ndeps, 2);
}
