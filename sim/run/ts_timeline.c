/* ts_timeline: Chrome trace-event JSON of one replayed step (the "JSON Object Format" of the
 * Trace Event Format document, Google, 2016: "X" complete events with ts/dur in microseconds,
 * "M" metadata events naming processes and threads). A chip is a process (pid = chip id), a
 * stream of its program is a thread (tid = stream), so Perfetto shows one track group per chip
 * with compute and gradient communication on separate rows. */
#include "ts_timeline.h"
#include "ts_util.h"

#include <math.h>
#include <string.h>

/* Whole nanoseconds printed as microseconds with three decimals: start and end are rounded
 * once each, so a span's ts + dur is exactly the next span's ts when they touch. */
static void json_us(GString *s, gint64 ns)
{
  g_string_append_printf(s, "%" G_GINT64_FORMAT ".%03d", ns / 1000, (int)(ns % 1000));
}

static void json_num(GString *s, double v)
{
  ts_append_g(s, 10, v);
}

static char *chip_name(const ts_topo *t, int rank)
{
  int c[TS_MAX_DIMS];
  ts_topo_coords(t, rank, c);
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "chip %d (", rank);
  for (int d = 0; d < t->ndims; d++)
    g_string_append_printf(s, "%s%s=%d", d ? ", " : "", t->dims[d].name, c[d]);
  g_string_append_c(s, ')');
  return g_string_free(s, FALSE);
}

/* A stream is named by what its first op does: stream numbers are the planner's own, so the
 * ops say what the row carries (compute, gradient synchronisation, pipeline sends...). */
static const char *stream_name(const ts_op *o)
{
  switch (o->kind) {
  case TS_OP_COMPUTE:
    return o->cat == TS_CAT_FWD || o->cat == TS_CAT_BWD ? "compute" : "compute (other)";
  case TS_OP_SEND:
    return o->cat == TS_CAT_COMM_PP ? "pipeline send" : "send";
  case TS_OP_RECV:
    return o->cat == TS_CAT_COMM_PP ? "pipeline receive" : "receive";
  case TS_OP_COLL:
    switch (o->cat) {
    case TS_CAT_COMM_DP:
      return "gradient sync";
    case TS_CAT_COMM_TP:
      return "tensor-parallel comm";
    case TS_CAT_COMM_PP:
      return "pipeline comm";
    default:
      return "comm";
    }
  case TS_OP_XFER:
    return o->resource == TS_RES_SERVER ? "parameter server" : "off-chip transfer";
  case TS_OP_DELAY:
    return "off-chip work";
  default:
    break;
  }
  return NULL;
}

/* How much a name says about a stream: compute beats communication (a later pipeline stage's
 * compute stream starts with a pipeline receive, and was named "pipeline comm"), collectives
 * beat point-to-point. */
static int name_weight(const char *n)
{
  return strcmp(n, "compute") == 0                   ? 5
         : strcmp(n, "compute (other)") == 0         ? 4
         : strstr(n, "send") || strstr(n, "receive") ? 1
                                                     : 2;
}

/* The name of a stream given the name so far (NULL) and one more op on it. */
static const char *stream_name_merge(const char *so_far, const ts_op *o)
{
  const char *n = stream_name(o);
  if (so_far == NULL || strcmp(so_far, n) == 0)
    return n;
  if ((strstr(so_far, "send") || strstr(so_far, "receive")) &&
      (strstr(n, "send") || strstr(n, "receive")) && name_weight(so_far) == 1)
    return strstr(so_far, "pipeline") || strstr(n, "pipeline") ? "pipeline send/receive"
                                                               : "send/receive";
  return name_weight(n) > name_weight(so_far) ? n : so_far;
}

char *ts_timeline_render(const ts_trace *tr, const ts_topo *t, const GArray *spans,
                         const ts_result *res, const char *backend, int nsimulated)
{
  GString *s = g_string_new("{\"traceEvents\":[\n");
  gboolean first = TRUE;
  /* Track names first: one process per simulated chip (with its program, so a viewer can
   * pick one chip per pipeline stage), one thread per stream it used, named by its ops. */
  int last_rank = -1, last_program = 0;
  const char *names[64] = {NULL};
  GString *ranks = g_string_new(NULL);
  for (guint i = 0; i <= spans->len; i++) {
    const ts_span *sp = i < spans->len ? &g_array_index(spans, ts_span, i) : NULL;
    if (sp == NULL || sp->rank != last_rank) {
      if (last_rank >= 0) {
        for (int st = 0; st < 64; st++) {
          if (names[st] == NULL)
            continue;
          g_string_append_printf(s,
                                 ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                                 "\"args\":{\"name\":",
                                 last_rank, st);
          /* Two streams of one chip carrying the same kind of ops get numbered names. */
          int same = 0, nth = 0;
          for (int o2 = 0; o2 < 64; o2++)
            if (names[o2] != NULL && strcmp(names[o2], names[st]) == 0) {
              same++;
              nth += o2 < st;
            }
          g_autofree char *nm =
              same > 1 ? g_strdup_printf("%s %d", names[st], nth + 1) : g_strdup(names[st]);
          ts_json_append_string(s, nm);
          g_string_append(s, "}}");
        }
        for (int st = 0; st < 64; st++)
          names[st] = NULL;
      }
      if (sp == NULL)
        break;
      last_rank = sp->rank;
      last_program = sp->program;
      g_string_append_printf(ranks, "%s%d", ranks->len ? "," : "", sp->rank);
      g_autofree char *nm = chip_name(t, sp->rank);
      g_string_append_printf(s,
                             "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                             "\"args\":{\"name\":",
                             first ? "" : ",\n", sp->rank);
      ts_json_append_string(s, nm);
      g_string_append_printf(s,
                             ",\"program\":%d}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\","
                             "\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
                             last_program, sp->rank, sp->rank);
      first = FALSE;
    }
    const ts_op ob = ts_program_op(&tr->programs[sp->program], sp->op), *o = &ob;
    if (o->stream >= 0 && o->stream < 64 && o->kind != TS_OP_WAIT)
      names[o->stream] = stream_name_merge(names[o->stream], o);
  }

  /* Spans. Waits cost nothing and are left out; every other op is an "X" event. */
  for (guint i = 0; i < spans->len; i++) {
    const ts_span *sp = &g_array_index(spans, ts_span, i);
    const ts_op ob = ts_program_op(&tr->programs[sp->program], sp->op), *o = &ob;
    if (o->kind == TS_OP_WAIT)
      continue;
    g_string_append(s, ",\n{\"name\":");
    ts_json_append_string(s, g_ptr_array_index(tr->labels, o->label));
    g_string_append(s, ",\"cat\":");
    ts_json_append_string(s, ts_op_cat_name(o->cat));
    g_string_append(s, ",\"ph\":\"X\",\"ts\":");
    gint64 a_ns = llround(sp->start_s * 1e9), b_ns = llround(sp->end_s * 1e9);
    json_us(s, a_ns);
    g_string_append(s, ",\"dur\":");
    json_us(s, b_ns - a_ns);
    g_string_append_printf(s, ",\"pid\":%d,\"tid\":%d,\"args\":{\"op\":%d", sp->rank, o->stream,
                           sp->op);
    switch (o->kind) {
    case TS_OP_COMPUTE:
      g_string_append(s, ",\"flops\":");
      json_num(s, o->flops);
      g_string_append(s, ",\"mem_bytes\":");
      json_num(s, o->mem_bytes);
      break;
    case TS_OP_COLL: {
      const ts_group *g = g_ptr_array_index(tr->groups, o->group);
      g_string_append(s, ",\"collective\":");
      ts_json_append_string(s, ts_coll_kind_name(o->coll));
      g_string_append(s, ",\"group\":");
      ts_json_append_string(s, g->name);
      g_string_append_printf(s, ",\"group_members\":%d,\"bytes\":", ts_trace_group_size(g));
      json_num(s, o->bytes);
      break;
    }
    case TS_OP_SEND:
    case TS_OP_RECV:
      g_string_append(s, o->kind == TS_OP_SEND ? ",\"send_to\":" : ",\"recv_from\":");
      g_string_append_printf(s, "%d,\"bytes\":", ts_trace_op_peer(tr, o, sp->rank));
      json_num(s, o->bytes);
      break;
    case TS_OP_XFER:
      g_string_append(s, ",\"resource\":");
      ts_json_append_string(s, ts_resource_name(o->resource));
      g_string_append(s, ",\"bytes\":");
      json_num(s, o->bytes);
      break;
    case TS_OP_DELAY:
      g_string_append(s, ",\"seconds\":");
      json_num(s, o->seconds);
      break;
    default:
      break;
    }
    /* The op's tag (format 2): what the op is, without parsing its label. */
    if (o->t_layer > 0)
      g_string_append_printf(s, ",\"layer\":%d", o->t_layer - 1);
    if (o->t_micro > 0)
      g_string_append_printf(s, ",\"micro_batch\":%d", o->t_micro - 1);
    if (o->t_phase != TS_PHASE_NONE) {
      g_string_append(s, ",\"phase\":");
      ts_json_append_string(s, ts_phase_name(o->t_phase));
    }
    if (o->t_role != TS_ROLE_NONE) {
      g_string_append(s, ",\"role\":");
      ts_json_append_string(s, ts_role_name(o->t_role));
    }
    g_string_append(s, "}}");
  }
  g_string_append(s, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{");
  /* Provenance and how to read the tracks (shown by Perfetto under "metadata"). */
  g_string_append(s, "\"producer\":");
  g_autofree char *prod = g_strdup_printf("trainsim %s", TS_VERSION);
  ts_json_append_string(s, prod);
  const char *kv[][2] = {{"model", tr->meta.model},
                         {"topology", tr->meta.topology},
                         {"split", res ? res->split : tr->meta.split},
                         {"placement", res ? res->placement : NULL},
                         {"backend", backend}};
  for (size_t k = 0; k < G_N_ELEMENTS(kv); k++) {
    if (kv[k][1] == NULL)
      continue;
    g_string_append_printf(s, ",\"%s\":", kv[k][0]);
    ts_json_append_string(s, kv[k][1]);
  }
  if (res != NULL) {
    g_string_append(s, ",\"step_time_s\":");
    json_num(s, res->step_time_s);
  }
  gboolean full = nsimulated >= tr->nranks;
  g_string_append_printf(s, ",\"chips\":%d,\"replay\":\"%s\",\"simulated_chips\":%d,", tr->nranks,
                         full ? "full" : "collapsed", nsimulated);
  g_string_append(s, "\"simulated_chip_ids\":");
  ts_json_append_string(s, ranks->str);
  g_string_append(s, ",\"note\":");
  if (full)
    ts_json_append_string(s, "full replay: one track per chip of the array");
  else {
    g_autofree char *note = g_strdup_printf(
        "collapsed replay: only the chips listed in simulated_chip_ids were simulated; each stands "
        "for the %d chips that run the same program (same coordinates on the pipeline axes) and "
        "whose timeline is identical; run with --full for a track per chip",
        tr->nranks / MAX(nsimulated, 1));
    ts_json_append_string(s, note);
  }
  g_string_append(s, "}\n}\n");
  g_string_free(ranks, TRUE);
  return g_string_free(s, FALSE);
}
