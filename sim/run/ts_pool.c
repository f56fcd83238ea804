/* ts_pool: a pool of forked worker processes predicting configurations, fed index by index
 * over pipes, results serialised back and stored by input position. */
#include "ts_pool.h"
#include "ts_backends.h"
#include "ts_coll_memo.h"
#include "ts_progress.h"
#include "ts_util.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void ts_outcome_clear(ts_outcome *o)
{
  ts_result_clear(&o->res);
  g_free(o->message);
  memset(o, 0, sizeof *o);
}

/* The trace of the last split predicted in this process during ts_pool_run, kept for the next
 * placement of the same split (ts_plan_trace_key): configurations run grouped by split, and a
 * split's placements differ only in shapes and resolved algorithms, so each split's trace is
 * generated once. Only inside ts_pool_run, whose configurations keep their model and topology
 * alive (the key holds their addresses). */
static struct {
  gboolean on;
  char *key;
  ts_trace *tr;
  ts_run_reuse replays; /* what the trace's replays share: its check, the view of its ops */
} g_reuse;

static void reuse_clear(void)
{
  ts_run_reuse_clear(&g_reuse.replays);
  g_clear_pointer(&g_reuse.key, g_free);
  g_clear_pointer(&g_reuse.tr, ts_trace_free);
}

/* ts_run_predict through the reused trace: the same plan, trace (op for op), replay and fill. */
static gboolean predict_reusing(const ts_config *c, const ts_split *sp, ts_result *out,
                                GError **error)
{
  g_autoptr(ts_plan) p = ts_plan_new(c->model, c->topo, sp, &c->po, error);
  if (p == NULL)
    return FALSE;
  g_autofree char *key = ts_plan_trace_key(p);
  const ts_trace *tr = NULL;
  if (key != NULL && g_reuse.key != NULL && strcmp(key, g_reuse.key) == 0 &&
      ts_plan_trace_replace(p, g_reuse.tr, NULL))
    tr = g_reuse.tr;
  if (tr == NULL) {
    reuse_clear();
    ts_trace *built = ts_plan_trace(p, error);
    if (built == NULL)
      return FALSE;
    g_reuse.tr = built;
    g_reuse.key = g_steal_pointer(&key);
    tr = built;
  }
  /* Checked once per trace, as ts_run_predict checks it (its replays re-place it only). */
  gboolean ok = g_reuse.replays.checked || ts_run_check_planned(tr, c->topo, p, &c->po, error);
  g_reuse.replays.checked = ok;
  ts_replay_result rr;
  ts_run_extra x = {0};
  ts_run_options o = c->ro;
  o.timeline = FALSE;
  ok = ok && ts_run_replay_reusing(tr, c->topo, &o, &g_reuse.replays, &rr, &x, error);
  if (ok) {
    ts_result_fill(out, p, tr, &rr);
    out->link_summary = g_steal_pointer(&x.link_summary);
    out->flows = x.flows;
  }
  ts_run_extra_clear(&x);
  /* A trace the plan cannot key is not kept (it would never match). */
  if (g_reuse.key == NULL)
    reuse_clear();
  return ok;
}

void ts_pool_predict(const ts_config *c, ts_outcome *out)
{
  memset(out, 0, sizeof *out);
  g_autoptr(GError) err = NULL;
  g_autoptr(ts_split) sp = ts_split_parse(c->split, &err);
  if (sp != NULL &&
      (g_reuse.on ? predict_reusing(c, sp, &out->res, &err)
                  : ts_run_predict(c->model, c->topo, sp, &c->po, &c->ro, &out->res, &err))) {
    out->status = TS_OUTCOME_OK;
    return;
  }
  out->status = err->domain == TS_ERROR && err->code == TS_ERROR_INVALID ? TS_OUTCOME_INVALID
                                                                         : TS_OUTCOME_FAILED;
  out->error_code = err->code;
  out->message = g_strdup(err->message);
}

int ts_pool_default_jobs(void)
{
  int n = (int)g_get_num_processors();
  return n > 0 ? n : 1;
}

gboolean ts_pool_parse_jobs(gint64 jobs, GError **error)
{
  if (jobs >= 1 && jobs <= 1024)
    return TRUE;
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
              "--jobs %" G_GINT64_FORMAT ": expected a number of worker processes in [1, 1024]",
              jobs);
  return FALSE;
}

/* ---- records: an outcome serialised between processes of the same binary ------------------- */

static void put_str(GByteArray *b, const char *s)
{
  guint32 n = s != NULL ? (guint32)strlen(s) + 1 : 0;
  g_byte_array_append(b, (const guint8 *)&n, sizeof n);
  if (n > 0)
    g_byte_array_append(b, (const guint8 *)s, n);
}

GByteArray *ts_outcome_encode(gint32 k, const ts_outcome *o)
{
  GByteArray *b = g_byte_array_new();
  guint32 len = 0;
  g_byte_array_append(b, (const guint8 *)&len, sizeof len);
  gint32 head[3] = {k, (gint32)o->status, (gint32)o->error_code};
  g_byte_array_append(b, (const guint8 *)head, sizeof head);
  /* The numbers travel as raw bytes: the same binary on both ends, and doubles stay exact. */
  ts_result r = o->res;
  r.split = r.placement = r.link_summary = NULL; /* pointers travel as their strings */
  g_byte_array_append(b, (const guint8 *)&r, sizeof r);
  put_str(b, o->res.split);
  put_str(b, o->res.placement);
  put_str(b, o->res.link_summary);
  put_str(b, o->message);
  len = b->len - (guint32)sizeof len;
  memcpy(b->data, &len, sizeof len);
  return b;
}

static gboolean get_str(const guint8 **p, const guint8 *end, char **out)
{
  guint32 n;
  if (end - *p < (ptrdiff_t)sizeof n)
    return FALSE;
  memcpy(&n, *p, sizeof n);
  *p += sizeof n;
  if (n == 0) {
    *out = NULL;
    return TRUE;
  }
  if (end - *p < (ptrdiff_t)n || (*p)[n - 1] != '\0')
    return FALSE;
  *out = g_strdup((const char *)*p);
  *p += n;
  return TRUE;
}

gboolean ts_outcome_decode(const guint8 *p, gsize len, gint32 *k, ts_outcome *o)
{
  const guint8 *end = p + len;
  gint32 head[3];
  if (len < sizeof head + sizeof(ts_result))
    return FALSE;
  memcpy(head, p, sizeof head);
  p += sizeof head;
  memset(o, 0, sizeof *o);
  memcpy(&o->res, p, sizeof o->res);
  p += sizeof o->res;
  o->res.split = o->res.placement = NULL;
  o->res.link_summary = NULL; /* the child's pointer; its string follows */
  *k = head[0];
  o->status = (ts_outcome_status)head[1];
  o->error_code = head[2];
  return get_str(&p, end, &o->res.split) && get_str(&p, end, &o->res.placement) &&
         get_str(&p, end, &o->res.link_summary) && get_str(&p, end, &o->message) && p == end;
}

/* A backend that builds one platform per process (SimGrid): its worker leaves after it. */
static gboolean one_per_process(const ts_config *c)
{
  const ts_backend_kind *k = ts_backend_kind_lookup(c->ro.backend, NULL);
  return k != NULL && k->one_per_process;
}

/* ---- the pool ------------------------------------------------------------------------------ */

typedef struct {
  pid_t pid;
  int cmd_fd, res_fd;
  int busy;          /* position k being predicted, -1 when idle */
  gboolean retiring; /* ran a simgrid configuration: exits after replying */
} worker;

static G_NORETURN void worker_main(const ts_config *cfg, const int *idx, int cmd_fd, int res_fd)
{
  for (;;) {
    gint32 k;
    if (ts_read_all(cmd_fd, &k, sizeof k) != 1 || k < 0)
      _exit(0);
    ts_outcome o;
    ts_pool_predict(&cfg[idx[k]], &o);
    GByteArray *b = ts_outcome_encode(k, &o);
    gboolean ok = ts_write_all(res_fd, b->data, b->len);
    g_byte_array_unref(b);
    ts_outcome_clear(&o);
    /* A process can initialise SimGrid once: a worker that used it leaves. */
    if (!ok || one_per_process(&cfg[idx[k]]))
      _exit(ok ? 0 : 1);
  }
}

static gboolean spawn(worker *w, worker *all, int nw, const ts_config *cfg, const int *idx,
                      GError **error)
{
  int cmd[2], res[2];
  if (pipe(cmd) != 0 || pipe(res) != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "cannot create a pipe to a worker: %s",
                g_strerror(errno));
    return FALSE;
  }
  fflush(NULL); /* nothing buffered may be written twice */
  pid_t pid = fork();
  if (pid < 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "cannot start a worker process: %s",
                g_strerror(errno));
    return FALSE;
  }
  if (pid == 0) {
    /* The child keeps only its own two pipe ends. */
    for (int i = 0; i < nw; i++)
      if (all[i].pid > 0) {
        close(all[i].cmd_fd);
        close(all[i].res_fd);
      }
    close(cmd[1]);
    close(res[0]);
    /* The workers share the machine's memory: ts_plan_trace refuses a trace over its share. */
    char share[16];
    g_snprintf(share, sizeof share, "%d", nw);
    g_setenv("TRAINSIM_MEMORY_SHARE", share, TRUE);
    worker_main(cfg, idx, cmd[0], res[1]);
  }
  close(cmd[0]);
  close(res[1]);
  w->pid = pid;
  w->cmd_fd = cmd[1];
  w->res_fd = res[0];
  w->busy = -1;
  w->retiring = FALSE;
  return TRUE;
}

static void retire(worker *w, gboolean kill_it)
{
  if (w->pid <= 0)
    return;
  close(w->cmd_fd);
  close(w->res_fd);
  if (kill_it)
    kill(w->pid, SIGKILL);
  int st;
  while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR)
    ;
  w->pid = 0;
}

static gboolean feed(worker *w, int k, const ts_config *cfg, const int *idx, GError **error)
{
  gint32 v = k;
  if (!ts_write_all(w->cmd_fd, &v, sizeof v)) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "worker process %d stopped taking work",
                (int)w->pid);
    return FALSE;
  }
  w->busy = k;
  w->retiring = one_per_process(&cfg[idx[k]]);
  return TRUE;
}

/* The order configurations are predicted in: grouped by their split without its placements
 * (then model, topology and position), so that consecutive predictions share a trace
 * (g_reuse). Outcomes are stored by position, so the order changes no output. */
typedef struct {
  char *split; /* without "@..." placements */
  const ts_config *c;
  int k;
} order_item;

/* Items of one group (the same split but for placements, model and topology): 0 when so. */
static int group_cmp(const order_item *a, const order_item *b)
{
  int d = strcmp(a->split, b->split);
  if (d != 0)
    return d;
  if (a->c->model != b->c->model)
    return (guintptr)a->c->model < (guintptr)b->c->model ? -1 : 1;
  if (a->c->topo != b->c->topo)
    return (guintptr)a->c->topo < (guintptr)b->c->topo ? -1 : 1;
  return 0;
}

static gint order_cmp(gconstpointer pa, gconstpointer pb, gpointer data)
{
  (void)data;
  const order_item *a = pa, *b = pb;
  int d = group_cmp(a, b);
  if (d != 0)
    return d;
  return a->k < b->k ? -1 : a->k > b->k;
}

/* Positions in prediction order (ord[j]) and the group of each (grp[j], groups numbered from 0
 * in order; *ngroups of them). */
static int *grouped_order(const ts_config *cfg, const int *idx, int n, int **grp, int *ngroups)
{
  order_item *it = g_new(order_item, n > 0 ? n : 1);
  for (int k = 0; k < n; k++) {
    const char *s = cfg[idx[k]].split != NULL ? cfg[idx[k]].split : "";
    GString *b = g_string_sized_new(strlen(s));
    gboolean skip = FALSE;
    for (const char *q = s; *q != '\0'; q++) {
      if (*q == '@')
        skip = TRUE;
      else if (*q == ',')
        skip = FALSE;
      if (!skip)
        g_string_append_c(b, *q);
    }
    it[k] = (order_item){g_string_free(b, FALSE), &cfg[idx[k]], k};
  }
  g_qsort_with_data(it, n, sizeof *it, order_cmp, NULL);
  int *ord = g_new(int, n > 0 ? n : 1);
  *grp = g_new(int, n > 0 ? n : 1);
  *ngroups = 0;
  for (int k = 0; k < n; k++) {
    ord[k] = it[k].k;
    if (k == 0 || group_cmp(&it[k - 1], &it[k]) != 0)
      (*ngroups)++;
    (*grp)[k] = *ngroups - 1;
  }
  for (int k = 0; k < n; k++)
    g_free(it[k].split);
  g_free(it);
  return ord;
}

/* Which position a free worker predicts next: the next of its group (its kept trace serves
 * it), else the first of a group no worker has started, else any left. */
typedef struct {
  const int *ord, *grp;
  int n, ngroups;
  int *gnext, *gend; /* per group: next position not fed, end */
  gboolean *started; /* per group */
  gboolean *fed;     /* per position */
  int gcur, cur, nfed;
} sched;

static int sched_pick(sched *s, int *wgroup)
{
  int j = -1;
  if (*wgroup >= 0) {
    int g = *wgroup;
    while (s->gnext[g] < s->gend[g] && s->fed[s->gnext[g]])
      s->gnext[g]++;
    if (s->gnext[g] < s->gend[g])
      j = s->gnext[g];
  }
  if (j < 0) {
    while (s->gcur < s->ngroups && s->started[s->gcur])
      s->gcur++;
    if (s->gcur < s->ngroups)
      j = s->gnext[s->gcur];
  }
  if (j < 0) {
    while (s->cur < s->n && s->fed[s->cur])
      s->cur++;
    j = s->cur;
  }
  s->fed[j] = TRUE;
  s->nfed++;
  s->started[s->grp[j]] = TRUE;
  *wgroup = s->grp[j];
  return s->ord[j];
}

static gboolean pool_run(const ts_config *cfg, const int *idx, int n, const ts_pool_options *o,
                         ts_outcome *out, GError **error)
{
  ts_progress pg;
  ts_progress_init(&pg, o != NULL && o->progress, o != NULL ? o->label : NULL, "configurations", n);
  gboolean any_sg = FALSE;
  for (int k = 0; k < n && !any_sg; k++)
    any_sg = one_per_process(&cfg[idx[k]]);
  int jobs = o != NULL && o->jobs > 0 ? o->jobs : 1;
  if (jobs > n)
    jobs = n;
  if (n == 0)
    return TRUE;
  int ngroups = 0;
  g_autofree int *grp = NULL;
  g_autofree int *ord = grouped_order(cfg, idx, n, &grp, &ngroups);
  if (jobs <= 1 && !any_sg) {
    for (int j = 0; j < n; j++) {
      ts_pool_predict(&cfg[idx[ord[j]]], &out[ord[j]]);
      ts_progress_step(&pg, j + 1);
    }
    ts_progress_end(&pg);
    return TRUE;
  }
  /* A worker that dies leaves its pipe closed: writing to it must fail, not kill us. */
  struct sigaction ign = {0}, old;
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, &old);
  worker *ws = g_new0(worker, jobs);
  struct pollfd *pfd = g_new0(struct pollfd, jobs);
  sched sc = {.ord = ord, .grp = grp, .n = n, .ngroups = ngroups};
  sc.gnext = g_new(int, ngroups);
  sc.gend = g_new(int, ngroups);
  sc.started = g_new0(gboolean, ngroups);
  sc.fed = g_new0(gboolean, n);
  for (int j = n - 1; j >= 0; j--)
    sc.gnext[grp[j]] = j;
  for (int j = 0; j < n; j++)
    sc.gend[grp[j]] = j + 1;
  int *wgroup = g_new(int, jobs); /* per worker: the group of its kept trace, -1 none */
  int done = 0;
  gboolean ok = TRUE;
  for (int w = 0; w < jobs && ok; w++) {
    wgroup[w] = -1;
    ok = spawn(&ws[w], ws, jobs, cfg, idx, error) &&
         feed(&ws[w], sched_pick(&sc, &wgroup[w]), cfg, idx, error);
  }
  while (ok && done < n) {
    int np = 0;
    int map[1024];
    for (int w = 0; w < jobs; w++)
      if (ws[w].pid > 0 && ws[w].busy >= 0) {
        pfd[np] = (struct pollfd){.fd = ws[w].res_fd, .events = POLLIN};
        map[np++] = w;
      }
    if (poll(pfd, (nfds_t)np, -1) < 0) {
      if (errno == EINTR)
        continue;
      g_set_error(error, TS_ERROR, TS_ERROR_IO, "waiting for workers: %s", g_strerror(errno));
      ok = FALSE;
      break;
    }
    for (int i = 0; i < np && ok; i++) {
      if (pfd[i].revents == 0)
        continue;
      worker *w = &ws[map[i]];
      guint32 len;
      int r = ts_read_all(w->res_fd, &len, sizeof len);
      guint8 *buf = NULL;
      if (r == 1) {
        buf = g_malloc(len > 0 ? len : 1);
        r = ts_read_all(w->res_fd, buf, len) == 1 ? 1 : -1;
      }
      gint32 k = -1;
      ts_outcome oc;
      if (r != 1 || !ts_outcome_decode(buf, len, &k, &oc) || k != w->busy) {
        /* A worker killed (the kernel's OOM killer, a crash) loses its configuration only:
         * the others' results are kept and the search or sweep reports this one's reason. */
        g_free(buf);
        buf = NULL;
        int st = 0;
        close(w->cmd_fd);
        close(w->res_fd);
        while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR)
          ;
        w->pid = 0;
        k = w->busy;
        memset(&oc, 0, sizeof oc);
        oc.status = TS_OUTCOME_FAILED;
        oc.error_code = TS_ERROR_BACKEND;
        oc.message = g_strdup_printf(
            "the worker process predicting it died (%s %d%s)",
            WIFSIGNALED(st) ? "signal" : "exit status",
            WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
            WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? ", likely out of memory" : "");
        g_printerr("trainsim %s: configuration %d (%s): %s\n", o->label != NULL ? o->label : "",
                   idx[k], cfg[idx[k]].split, oc.message);
      }
      g_free(buf);
      out[k] = oc;
      w->busy = -1;
      ts_progress_step(&pg, ++done);
      if (w->retiring)
        retire(w, FALSE);
      if (sc.nfed < n) {
        if (w->pid <= 0) {
          ok = spawn(w, ws, jobs, cfg, idx, error);
          wgroup[map[i]] = -1; /* a new process keeps no trace */
        }
        if (ok)
          ok = feed(w, sched_pick(&sc, &wgroup[map[i]]), cfg, idx, error);
      }
    }
  }
  for (int w = 0; w < jobs; w++)
    retire(&ws[w], !ok);
  g_free(sc.gnext);
  g_free(sc.gend);
  g_free(sc.started);
  g_free(sc.fed);
  g_free(wgroup);
  g_free(ws);
  g_free(pfd);
  sigaction(SIGPIPE, &old, NULL);
  ts_progress_end(&pg);
  if (!ok)
    for (int k = 0; k < n; k++)
      ts_outcome_clear(&out[k]);
  return ok;
}

gboolean ts_pool_run(const ts_config *cfg, const int *idx, int n, const ts_pool_options *o,
                     ts_outcome *out, GError **error)
{
  /* The configurations' topologies live as long as cfg: collective times on them are
   * remembered across the predictions (workers forked below inherit the memo and fill their
   * own copy of it). */
  const ts_topo **topos = g_new(const ts_topo *, n > 0 ? n : 1);
  for (int k = 0; k < n; k++)
    topos[k] = cfg[idx[k]].topo;
  ts_coll_memo_begin(topos, n);
  g_free(topos);
  /* Traces are reused across this run's predictions only: the kept one is dropped at the end
   * (its key holds addresses that live as long as cfg), a nested run's too. */
  gboolean outer = !g_reuse.on;
  g_reuse.on = TRUE;
#ifdef __GLIBC__
  /* Each prediction allocates and frees tens of MB (op states, tables, the trace). glibc maps
   * blocks past its mmap threshold afresh and trims the heap's top back to the kernel, so the
   * next prediction faulted the same memory back in, zeroed (issue 15: 0.4 of the every-split
   * GPT-3 175B sweep's 10 CPU s in the kernel, 0.14 with this). Keep blocks up to glibc's
   * largest threshold (32 MiB) in the heap, and the heap's top: a sweep's peak stays its peak. */
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, G_MAXINT);
#endif
  gboolean ok = pool_run(cfg, idx, n, o, out, error);
  reuse_clear();
  if (outer)
    g_reuse.on = FALSE;
  ts_coll_memo_end();
  return ok;
}
