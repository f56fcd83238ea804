/* ts_run: plan -> trace -> replay -> result, the one path every prediction takes. */
#include "ts_run.h"
#include "ts_degrade.h"
#include "ts_backend_simgrid.h"
#include "ts_backends.h"
#include "ts_timeline.h"
#include "ts_progress.h"
#include "ts_util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

gboolean ts_run_backend_valid(const char *name, GError **error)
{
  return ts_backend_kind_lookup(name, error) != NULL;
}

char *ts_run_network_model(const ts_run_options *ro)
{
  const ts_backend_kind *k = ts_backend_kind_lookup(ro->backend, NULL);
  return k != NULL ? k->network_model(ro->sg_cfg) : g_strdup("?");
}

void ts_run_extra_clear(ts_run_extra *x)
{
  if (x == NULL)
    return;
  g_free(x->link_summary);
  g_free(x->network_config);
  if (x->spans != NULL)
    g_array_unref(x->spans);
  memset(x, 0, sizeof *x);
}

void ts_run_reuse_clear(ts_run_reuse *u)
{
  ts_replay_ops_free(u->ops);
  memset(u, 0, sizeof *u);
}

/* The replay itself, in whatever process runs it (ops: the view of tr's ops, or NULL). */
static gboolean replay_here(const ts_trace *tr, const ts_topo *t, const ts_run_options *ro,
                            const ts_replay_ops *ops, ts_replay_result *out, ts_run_extra *x,
                            GError **error)
{
  const ts_backend_kind *kind = ts_backend_kind_lookup(ro->backend, error);
  if (kind == NULL)
    return FALSE;
  ts_backend *b = kind->create(t, ro->sg_cfg, error);
  if (b == NULL)
    return FALSE;
  /* SimGrid, with its symmetry collapse on: one rank per class of the symmetric axes, every
   * flow of the others an image, and symmetric collective steps on one line of members. A flow
   * or image that breaks the symmetry stops the replay, which runs again with every rank (the
   * collective steps still collapsed), and once more with every flow if that breaks too: a
   * result is always the full replay's. */
  gboolean collapsed = ts_backend_is_simgrid(b) && ts_backend_simgrid_set_collapse(b, TRUE);
  /* Strided rings whose images cross them: the rank collapse would break (CPU spent for
   * nothing: 10 s of GPT-3 175B on the pod). Folded by the translations that do hold (each
   * image leaving the fundamental domain a real flow, on the quotient torus), or else every
   * rank at once. */
  gboolean cross = collapsed && !ro->full && !ro->timeline && !ts_degrade_needs_full(t) &&
                   ts_backend_simgrid_images_cross(b, tr);
  gboolean folded = cross && ts_backend_simgrid_set_fold(b, tr);
  /* A degraded array's groups and chips are no longer alike: replay every rank too. */
  gboolean full = (kind->full_replay && !collapsed) || ro->full || ts_degrade_needs_full(t) ||
                  (cross && !folded) ||
                  /* a simgrid timeline shows every chip's contention: every rank */
                  (collapsed && ro->timeline);
  ts_replay_mode mode = full ? TS_REPLAY_FULL : TS_REPLAY_COLLAPSED;
  /* The preflight expected one rank per class where the configuration allows it: an
   * every-rank replay is checked against the memory limit again before it allocates. */
  if (full && ts_backend_is_simgrid(b) && !ts_simgrid_check_every_rank(tr, t, ro->sg_cfg, error)) {
    ts_backend_free(b);
    return FALSE;
  }
  ts_replay *r = ts_replay_new_shared(tr, ops, b, mode);
  ts_replay_keep_spans(r, ro->timeline);
  gboolean ok = ts_replay_run(r, out, error);
  for (int again = 0; !ok && collapsed && ts_backend_simgrid_symmetry_broken(b) && again < 2;
       again++) {
    gboolean ranks_collapsed = ts_replay_get_mode(r) == TS_REPLAY_COLLAPSED;
    g_clear_error(error);
    ts_replay_free(r);
    r = NULL;
    if (ranks_collapsed && !ts_simgrid_check_every_rank(tr, t, ro->sg_cfg, error))
      break;
    /* Every rank with the collective steps collapsed, then every flow. */
    ts_backend_simgrid_set_collapse(b, ranks_collapsed);
    r = ts_replay_new_shared(tr, ops, b, TS_REPLAY_FULL);
    ts_replay_keep_spans(r, ro->timeline);
    ok = ts_replay_run(r, out, error);
    if (!ranks_collapsed)
      break;
  }
  if (r == NULL) {
    ts_backend_free(b);
    return FALSE;
  }
  if (ok && ro->timeline && x != NULL) {
    const GArray *spans = ts_replay_spans(r);
    x->spans = g_array_sized_new(FALSE, FALSE, sizeof(ts_span), spans->len);
    g_array_append_vals(x->spans, spans->data, spans->len);
  }
  if (ok && ts_backend_is_simgrid(b)) {
    GPtrArray *rows = NULL;
    ok = ts_backend_simgrid_link_report(b, &rows, NULL, error);
    if (ok && ro->link_report != NULL)
      ok = ts_link_report_write_csv(rows, ro->link_report, error);
    if (ok && x != NULL) {
      x->link_summary = ts_link_report_summary(rows, ro->top_links > 0 ? ro->top_links : 5);
      x->network_config = g_strdup(ts_backend_simgrid_config(b));
      x->flows = ts_backend_simgrid_flows(b);
    }
    if (rows != NULL)
      g_ptr_array_unref(rows);
  }
  ts_replay_free(r);
  ts_backend_free(b);
  return ok;
}

/* Pipe framing between the child that runs SimGrid and its parent. */
static void write_str(int fd, const char *s)
{
  guint32 n = s != NULL ? (guint32)strlen(s) + 1 : 0;
  ts_write_all(fd, &n, sizeof n);
  if (n > 0)
    ts_write_all(fd, s, n);
}

static gboolean read_str(int fd, char **out)
{
  guint32 n;
  *out = NULL;
  if (ts_read_all(fd, &n, sizeof n) != 1 || n > (1u << 26))
    return FALSE;
  if (n == 0)
    return TRUE;
  *out = g_malloc(n);
  if (ts_read_all(fd, *out, n) != 1 || (*out)[n - 1] != '\0') {
    g_clear_pointer(out, g_free);
    return FALSE;
  }
  return TRUE;
}

static gboolean replay_in_child(const ts_trace *tr, const ts_topo *t, const ts_run_options *ro,
                                const ts_replay_ops *ops, ts_replay_result *out, ts_run_extra *x,
                                GError **error)
{
  int fd[2];
  if (pipe(fd) != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "cannot create a pipe: %s", g_strerror(errno));
    return FALSE;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "cannot fork the simgrid replay: %s",
                g_strerror(errno));
    return FALSE;
  }
  if (pid == 0) {
    close(fd[0]);
    ts_replay_result res;
    ts_run_extra ex = {0};
    GError *err = NULL;
    gint32 ok = replay_here(tr, t, ro, ops, &res, &ex, &err);
    gint32 code = err != NULL ? err->code : 0;
    ts_write_all(fd[1], &ok, sizeof ok);
    ts_write_all(fd[1], &code, sizeof code);
    ts_write_all(fd[1], &res, sizeof res);
    ts_write_all(fd[1], &ex.flows, sizeof ex.flows);
    write_str(fd[1], err != NULL ? err->message : NULL);
    write_str(fd[1], ex.link_summary);
    write_str(fd[1], ex.network_config);
    guint32 nspans = ex.spans != NULL ? ex.spans->len : 0;
    ts_write_all(fd[1], &nspans, sizeof nspans);
    if (nspans > 0)
      ts_write_all(fd[1], ex.spans->data, (size_t)nspans * sizeof(ts_span));
    close(fd[1]);
    _exit(0);
  }
  close(fd[1]);
  if (ro->progress != NULL) {
    /* The child writes only at its end: until then, the time elapsed (a long replay). */
    ts_progress pg;
    ts_progress_init(&pg, TRUE, ro->progress, NULL, 0);
    struct pollfd pf = {.fd = fd[0], .events = POLLIN};
    int r, wait_ms = (int)CLAMP(pg.quiet_us / 1000, 50, 1000);
    while ((r = poll(&pf, 1, wait_ms)) == 0 || (r < 0 && errno == EINTR))
      ts_progress_tick(&pg);
    ts_progress_end(&pg);
  }
  gint32 ok = 0, code = 0;
  gint64 flows = 0;
  char *msg = NULL, *summary = NULL, *config = NULL;
  guint32 nspans = 0;
  GArray *spans = NULL;
  gboolean got = (ts_read_all(fd[0], &ok, sizeof ok) == 1) &&
                 (ts_read_all(fd[0], &code, sizeof code) == 1) &&
                 (ts_read_all(fd[0], out, sizeof *out) == 1) &&
                 (ts_read_all(fd[0], &flows, sizeof flows) == 1) && read_str(fd[0], &msg) &&
                 read_str(fd[0], &summary) && read_str(fd[0], &config) &&
                 (ts_read_all(fd[0], &nspans, sizeof nspans) == 1);
  /* Spans of a timeline: at most one per op of every rank, so the trace bounds the count. */
  if (got && nspans > 0) {
    got = (gint64)nspans <= ts_trace_nops(tr) * (gint64)tr->nranks;
    if (got) {
      spans = g_array_sized_new(FALSE, FALSE, sizeof(ts_span), nspans);
      g_array_set_size(spans, nspans);
      got = ts_read_all(fd[0], spans->data, (size_t)nspans * sizeof(ts_span)) == 1;
    }
  }
  close(fd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (!got) {
    if (WIFSIGNALED(status)) {
      int sig = WTERMSIG(status);
      /* The likely cause, from what each signal has meant in practice. */
      const char *cause =
          sig == SIGKILL   ? ": out of memory, most likely (the kernel's OOM killer)"
          : sig == SIGABRT ? ": SimGrid stopped on an internal check or could not map "
                             "memory (set TS_SIMGRID_LOG=FILE to read its message)"
          : sig == SIGSEGV ? ": a crash in the simulator (a stack overflow or a bug)"
                           : "";
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "the simgrid replay died of signal %d (%s)%s; the analytic backend is not "
                  "affected",
                  sig, g_strsignal(sig), cause);
    } else {
      g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                  "the simgrid replay ended (status %d) without a result", WEXITSTATUS(status));
    }
    ok = FALSE;
  } else if (!ok) {
    g_set_error_literal(error, TS_ERROR, code, msg != NULL ? msg : "simgrid replay failed");
  } else if (x != NULL) {
    x->link_summary = g_steal_pointer(&summary);
    x->network_config = g_steal_pointer(&config);
    x->flows = flows;
    x->spans = g_steal_pointer(&spans);
  }
  if (spans != NULL)
    g_array_unref(spans);
  g_free(msg);
  g_free(summary);
  g_free(config);
  return ok;
}

/* ts_run_replay_reusing once tr has passed its check on t. */
static gboolean replay_checked(const ts_trace *tr, const ts_topo *t, const ts_run_options *ro,
                               ts_run_reuse *u, ts_replay_result *out, ts_run_extra *x,
                               GError **error)
{
  const ts_backend_kind *kind = ts_backend_kind_lookup(ro->backend, error);
  if (kind == NULL)
    return FALSE;
  if (kind->preflight != NULL && !kind->preflight(tr, t, ro->sg_cfg, error))
    return FALSE;
  /* Made before a child is forked for the replay, so that the next replay has it too. */
  if (u != NULL && u->ops == NULL)
    u->ops = ts_replay_ops_new(tr);
  const ts_replay_ops *ops = u != NULL ? u->ops : NULL;
  if (kind->one_per_process)
    return replay_in_child(tr, t, ro, ops, out, x, error);
  return replay_here(tr, t, ro, ops, out, x, error);
}

gboolean ts_run_replay_reusing(const ts_trace *tr, const ts_topo *t, const ts_run_options *ro,
                               ts_run_reuse *u, ts_replay_result *out, ts_run_extra *x,
                               GError **error)
{
  if (x != NULL)
    memset(x, 0, sizeof *x);
  if (u != NULL && u->checked ? !ts_trace_check_placement(tr, t, error)
                              : !ts_trace_check(tr, t, error))
    return FALSE;
  if (u != NULL)
    u->checked = TRUE;
  return replay_checked(tr, t, ro, u, out, x, error);
}

gboolean ts_run_check_planned(const ts_trace *tr, const ts_topo *t, const ts_plan *p,
                              const ts_plan_options *po, GError **error)
{
  /* A planned trace fails the trace's range check only when the batch is absurd (one op over
   * 1e21 FLOP at -b 1e9); "program 0 op 2: sizes out of range" named nothing a user gave. */
  g_autoptr(GError) range = NULL;
  if (ts_trace_check(tr, t, &range))
    return TRUE;
  g_set_error(error, range->domain, range->code,
              "global batch %" G_GINT64_FORMAT ", micro-batch %" G_GINT64_FORMAT
              ": beyond the sizes trainsim costs (%s); expected a smaller --global-batch or "
              "--micro-batch",
              po->global_batch, p->micro_batch, range->message);
  return FALSE;
}

gboolean ts_run_replay_ex(const ts_trace *tr, const ts_topo *t, const ts_run_options *ro,
                          ts_replay_result *out, ts_run_extra *x, GError **error)
{
  return ts_run_replay_reusing(tr, t, ro, NULL, out, x, error);
}

gboolean ts_run_replay(const ts_trace *tr, const ts_topo *t, const ts_run_options *ro,
                       ts_replay_result *out, GError **error)
{
  return ts_run_replay_ex(tr, t, ro, out, NULL, error);
}

gboolean ts_run_predict_ex(const ts_model *m, const ts_topo *t, const ts_split *s,
                           const ts_plan_options *po, const ts_run_options *ro, ts_result *out,
                           char **timeline_json, GError **error)
{
  g_autoptr(ts_plan) p = ts_plan_new(m, t, s, po, error);
  if (p == NULL)
    return FALSE;
  g_autoptr(ts_trace) tr = ts_plan_trace(p, error);
  if (tr == NULL)
    return FALSE;
  if (!ts_run_check_planned(tr, t, p, po, error))
    return FALSE;
  ts_run_options o = *ro;
  o.timeline = timeline_json != NULL;
  ts_replay_result rr;
  ts_run_extra x = {0};
  if (!replay_checked(tr, t, &o, NULL, &rr, &x, error))
    return FALSE;
  ts_result_fill(out, p, tr, &rr);
  out->link_summary = g_steal_pointer(&x.link_summary);
  out->flows = x.flows;
  if (timeline_json != NULL) {
    const ts_backend_kind *kind = ts_backend_kind_lookup(ro->backend, NULL);
    *timeline_json = ts_timeline_render(tr, t, x.spans, out, kind->name, rr.nsimulated);
  }
  ts_run_extra_clear(&x);
  return TRUE;
}

gboolean ts_run_predict(const ts_model *m, const ts_topo *t, const ts_split *s,
                        const ts_plan_options *po, const ts_run_options *ro, ts_result *out,
                        GError **error)
{
  return ts_run_predict_ex(m, t, s, po, ro, out, NULL, error);
}
