/* cmd_collective: `trainsim collective`, the time, algorithm bandwidth and bus bandwidth of one
 * collective over a size range: the numbers nccl-tests users compare against. Every size is
 * replayed as a one-op trace, so it takes the same path as a training step. */
#include "ts_backends.h"
#include "ts_cmd.h"
#include "ts_run.h"
#include "ts_util.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  double bytes, time_s;
  ts_coll_algo algo;
  ts_coll_proto proto;
} coll_row;

/* A trace with one collective over `shape` run by the group at chip 0; other ranks idle. */
static ts_trace *one_collective(const ts_topo *t, const int *dims, int ndims, ts_coll_kind kind,
                                ts_coll_algo algo, double bytes)
{
  ts_trace *tr = ts_trace_new(t);
  ts_group_shape in = {0}, rest = {0};
  ts_group_shape_dims(t, dims, ndims, &in);
  int others[TS_MAX_DIMS], no = 0;
  for (int d = 0; d < t->ndims; d++) {
    gboolean used = FALSE;
    for (int k = 0; k < ndims; k++)
      used |= dims[k] == d;
    if (!used)
      others[no++] = d;
  }
  ts_group_shape_dims(t, others, no, &rest);
  int a = ts_trace_add_axis(tr, "coll", ts_group_size(&in), TRUE, &in);
  ts_trace_add_axis(tr, "rest", ts_group_size(&rest), FALSE, &rest);
  ts_trace_set_programs(tr, ts_group_size(&rest));
  ts_op op = {.kind = TS_OP_COLL, .cat = TS_CAT_COMM_OTHER};
  op.coll = kind;
  op.algo = algo;
  op.group = ts_trace_group(tr, &a, 1);
  op.bytes = bytes;
  op.label = ts_trace_label(tr, ts_coll_kind_name(kind));
  ts_trace_append(tr, 0, &op, NULL, 0);
  tr->meta.producer = g_strdup_printf("trainsim %s collective", TS_VERSION);
  return tr;
}

static gboolean parse_range(const char *text, double *lo, double *hi, double *factor)
{
  g_auto(GStrv) parts = g_strsplit(text, ":", -1);
  guint n = g_strv_length(parts);
  if (n < 2 || n > 3 || !ts_parse_size(parts[0], lo) || !ts_parse_size(parts[1], hi) || *hi < *lo)
    return FALSE;
  *factor = 2.0;
  if (n == 3 && (!ts_parse_double(parts[2], factor) || *factor <= 1.0))
    return FALSE;
  return TRUE;
}

int ts_cmd_collective(int argc, char **argv)
{
  g_autofree char *topo_name = NULL, *op_name = NULL, *bytes_text = NULL, *range = NULL;
  g_autofree char *dims_text = NULL, *algo_name = NULL, *format = NULL, *backend = NULL;
  g_autofree char *proto_name = NULL;
  g_auto(GStrv) cfg = NULL;
  GOptionEntry entries[] = {
      {"topology", 't', 0, G_OPTION_ARG_FILENAME, &topo_name, "Topology file or shipped name", "T"},
      {"op", 0, 0, G_OPTION_ARG_STRING, &op_name,
       "allreduce (default), reducescatter, allgather, alltoall, broadcast", "OP"},
      {"bytes", 0, 0, G_OPTION_ARG_STRING, &bytes_text,
       "Buffer size in bytes per member (nccl-tests convention), e.g. 1e9, 64MiB", "SIZE"},
      {"bytes-range", 0, 0, G_OPTION_ARG_STRING, &range,
       "Sizes from LO to HI, multiplying by F (default 2), e.g. 1MiB:1GiB or 1M:1G:4", "LO:HI[:F]"},
      {"dims", 0, 0, G_OPTION_ARG_STRING, &dims_text,
       "Array dimensions the group spans, comma-separated, fastest first (default: all)", "D,D"},
      {"collective-algorithm", 0, 0, G_OPTION_ARG_STRING, &algo_name, ts_cmd_algo_help(), "A"},
      {"protocol", 0, 0, G_OPTION_ARG_STRING, &proto_name,
       "NCCL protocol of the NCCL algorithms: auto (default, the fastest, as NCCL picks), LL, "
       "LL128, Simple (analytic backend)",
       "P"},
      {"backend", 0, 0, G_OPTION_ARG_STRING, &backend, ts_backend_kind_help(), "B"},
      {"cfg", 0, 0, G_OPTION_ARG_STRING_ARRAY, &cfg,
       "simgrid backend: extra SimGrid setting or trainsim/... setting (docs/backends.md); "
       "repeatable",
       "KEY:VALUE"},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &format, "text (default), csv or json", "F"},
      {NULL}};
  g_autoptr(GError) err = NULL;
  if (!ts_cmd_parse(
          "collective", "",
          "Predicts one collective: time (s), algorithm bandwidth and bus bandwidth "
          "(GB/s, 1e9 B/s, as nccl-tests reports them).",
          "Example:\n  trainsim collective --topology tpu-v3-pod --op allreduce --bytes 1e9\n"
          "  trainsim collective -t dgx-a100-4node --bytes-range 8:8GiB --format csv\n"
          "  trainsim collective -t dgx-h100-4node --dims node --bytes 1GiB "
          "--collective-algorithm nvls",
          entries, &argc, &argv, &err))
    return ts_cmd_fail("collective", err);
  ts_format fmt;
  if (argc > 1 || topo_name == NULL || !ts_format_parse(format, &fmt)) {
    if (argc > 1)
      ts_cmd_unexpected("collective", argv[1], &err);
    else
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "%s",
                  topo_name == NULL ? "missing --topology T"
                                    : "--format: expected text, csv or json");
    return ts_cmd_fail("collective", err);
  }
  int kind = op_name ? ts_coll_kind_parse(op_name) : TS_COLL_ALLREDUCE;
  if (kind < 0) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--op '%s': expected allreduce, reducescatter, allgather, alltoall or broadcast",
                op_name);
    return ts_cmd_fail("collective", err);
  }
  int algo;
  if (!ts_cmd_algo(algo_name, &algo, &err))
    return ts_cmd_fail("collective", err);
  if (!ts_run_backend_valid(backend, &err) || !ts_cmd_cfg(backend, cfg, &err))
    return ts_cmd_fail("collective", err);
  int proto = proto_name != NULL ? ts_coll_proto_parse(proto_name) : TS_PROTO_AUTO;
  if (proto < 0) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--protocol '%s': expected auto, LL, LL128 or Simple", proto_name);
    return ts_cmd_fail("collective", err);
  }
  if (proto != TS_PROTO_AUTO && backend != NULL && strcmp(backend, "analytic") != 0) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                "--protocol %s: expected the analytic backend (the simgrid backend runs the "
                "protocol NCCL picks)",
                proto_name);
    return ts_cmd_fail("collective", err);
  }
  g_autoptr(GArray) sizes = g_array_new(FALSE, FALSE, sizeof(double));
  if (bytes_text != NULL && range != NULL) {
    g_set_error(&err, TS_ERROR, TS_ERROR_INPUT, "give --bytes or --bytes-range, not both");
    return ts_cmd_fail("collective", err);
  }
  if (range != NULL) {
    double lo, hi, f;
    if (!parse_range(range, &lo, &hi, &f) || lo < 1 || hi > 1e15) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "--bytes-range '%s': expected LO:HI[:F] with 1 <= LO <= HI <= 1e15 bytes and "
                  "F > 1, e.g. 1MiB:1GiB",
                  range);
      return ts_cmd_fail("collective", err);
    }
    for (double b = lo; b <= hi * (1 + 1e-12); b *= f) {
      /* The table stopped at 10,000 rows without a word (1:1e15:1.0000001 asks for 3e8). */
      if (sizes->len >= 10000) {
        g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                    "--bytes-range '%s': more than 10000 sizes; expected a larger factor F or a "
                    "narrower range",
                    range);
        return ts_cmd_fail("collective", err);
      }
      g_array_append_val(sizes, b);
    }
  } else {
    double b = 1e9;
    /* 1e-300 bytes printed a row of size_bytes 0 and busbw 0.00 (validate --against refuses
     * a fractional size the same way). */
    if (bytes_text != NULL &&
        (!ts_parse_size(bytes_text, &b) || b < 1 || b > 1e15 || b != floor(b))) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "--bytes '%s': expected a whole number of bytes in [1, 1e15], e.g. 1e9 or 64MiB",
                  bytes_text);
      return ts_cmd_fail("collective", err);
    }
    g_array_append_val(sizes, b);
  }
  g_autofree char *tpath = NULL;
  g_autoptr(ts_topo) topo = ts_cmd_load_topo(topo_name, &tpath, &err);
  if (topo == NULL)
    return ts_cmd_fail("collective", err);
  int dims[TS_MAX_DIMS], nd = 0;
  if (dims_text != NULL) {
    g_auto(GStrv) names = g_strsplit(dims_text, ",", -1);
    for (char **n = names; *n != NULL; n++) {
      int d = ts_topo_dim_index(topo, g_strstrip(*n));
      gboolean dup = FALSE;
      for (int k = 0; k < nd; k++)
        dup |= dims[k] == d;
      if (d < 0 || dup || nd >= TS_MAX_DIMS) {
        g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                    "--dims '%s': '%s' is %s; expected distinct dimension names of %s", dims_text,
                    *n, d < 0 ? "not a dimension" : "repeated", tpath);
        return ts_cmd_fail("collective", err);
      }
      dims[nd++] = d;
    }
    /* --dims '' split into no names: a "collective over 1 chips (dims )" of 0 us. */
    if (nd == 0) {
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "--dims '': expected one or more dimension names of %s, comma-separated", tpath);
      return ts_cmd_fail("collective", err);
    }
  } else {
    for (int d = 0; d < topo->ndims; d++)
      dims[nd++] = d;
  }
  /* NVLS reduces in the switch: say which named dimension cannot, where the collectives module
   * (which keeps no names) could only give its index ("piece 0 (dimension 1)"). */
  if (algo == TS_ALGO_NVLS)
    for (int k = 0; k < nd; k++) {
      const ts_dim *dm = &topo->dims[dims[k]];
      if (dm->size > 1 && !dm->in_switch_reduction) {
        GString *ok = g_string_new(NULL);
        for (int d = 0; d < topo->ndims; d++)
          if (topo->dims[d].in_switch_reduction)
            g_string_append_printf(ok, "%s%s", ok->len ? "," : "", topo->dims[d].name);
        if (ok->len > 0)
          g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                      "--collective-algorithm nvls: dimension '%s' of %s does not reduce in the "
                      "switch; expected --dims %s (the dimensions with in_switch_reduction = "
                      "true) or another algorithm",
                      dm->name, tpath, ok->str);
        else
          g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                      "--collective-algorithm nvls: no dimension of %s reduces in the switch "
                      "(in_switch_reduction = true); expected another algorithm",
                      tpath);
        g_string_free(ok, TRUE);
        return ts_cmd_fail("collective", err);
      }
    }
  ts_group_shape shape;
  ts_group_shape_dims(topo, dims, nd, &shape);
  int n = ts_group_size(&shape);
  ts_run_options ro = {
      .backend = backend ? backend : "analytic", .sg_cfg = (const char *const *)cfg, .full = FALSE};
  g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(coll_row));
  for (guint i = 0; i < sizes->len; i++) {
    coll_row row = {g_array_index(sizes, double, i), 0, (ts_coll_algo)algo, TS_PROTO_NONE};
    /* Resolve auto first so the row names the algorithm and both backends run the same one. */
    double direct = 0.0;
    if (n > 1 && (direct = ts_coll_time_ex(topo, kind, algo, proto, &shape, row.bytes, &row.algo,
                                           &row.proto, &err)) < 0)
      return ts_cmd_fail("collective", err);
    if (proto != TS_PROTO_AUTO && n > 1 && row.proto == TS_PROTO_NONE) {
      /* The protocol was dropped without a word ("ring ... protocol none" for --protocol LL). */
      g_set_error(&err, TS_ERROR, TS_ERROR_INPUT,
                  "--protocol %s: the %s algorithm has no NCCL protocol; expected an NCCL "
                  "algorithm (--collective-algorithm nccl-ring, nccl-tree, nvls or nccl; auto "
                  "picks them on switch dimensions) or no --protocol",
                  ts_coll_proto_name(proto), ts_coll_algo_name(row.algo));
      return ts_cmd_fail("collective", err);
    }
    if (proto != TS_PROTO_AUTO) {
      /* A forced protocol: the analytic time of the one collective (what a replay of it
       * gives with the protocol NCCL would pick). */
      row.time_s = direct;
      g_array_append_val(rows, row);
      continue;
    }
    g_autoptr(ts_trace) tr = one_collective(topo, dims, nd, kind, row.algo, row.bytes);
    ts_replay_result rr;
    if (!ts_run_replay(tr, topo, &ro, &rr, &err))
      return ts_cmd_fail("collective", err);
    row.time_s = rr.step_time_s;
    g_array_append_val(rows, row);
  }
  GString *s = g_string_new(NULL);
  double factor = ts_coll_busbw_factor(kind, n);
  if (fmt == TS_FORMAT_JSON) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    ts_json_header(b, "collective");
    json_builder_set_member_name(b, "topology");
    json_builder_add_string_value(b, topo->name);
    json_builder_set_member_name(b, "topology_file");
    json_builder_add_string_value(b, tpath);
    json_builder_set_member_name(b, "op");
    json_builder_add_string_value(b, ts_coll_kind_name(kind));
    json_builder_set_member_name(b, "members");
    json_builder_add_int_value(b, n);
    json_builder_set_member_name(b, "backend");
    json_builder_add_string_value(b, ro.backend);
    g_autofree char *nm = ts_run_network_model(&ro);
    json_builder_set_member_name(b, "network_model");
    json_builder_add_string_value(b, nm);
    json_builder_set_member_name(b, "sizes");
    json_builder_begin_array(b);
    for (guint i = 0; i < rows->len; i++) {
      const coll_row *r = &g_array_index(rows, coll_row, i);
      double algbw = r->time_s > 0 ? r->bytes / r->time_s / 1e9 : 0;
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "bytes");
      json_builder_add_double_value(b, r->bytes);
      json_builder_set_member_name(b, "time_s");
      json_builder_add_double_value(b, r->time_s);
      json_builder_set_member_name(b, "algbw_GBps");
      json_builder_add_double_value(b, algbw);
      json_builder_set_member_name(b, "busbw_GBps");
      json_builder_add_double_value(b, algbw * factor);
      json_builder_set_member_name(b, "algorithm");
      json_builder_add_string_value(b, ts_coll_algo_name(r->algo));
      json_builder_set_member_name(b, "protocol");
      json_builder_add_string_value(b, ts_coll_proto_name(r->proto));
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    g_autofree char *js = ts_json_builder_text(b);
    g_string_append(s, js);
  } else {
    if (fmt == TS_FORMAT_TEXT) {
      g_autofree char *desc = ts_topo_describe(topo);
      g_string_append_printf(s, "%s over %d chips (dims %s) of %s, %s backend\n",
                             ts_coll_kind_name(kind), n, dims_text ? dims_text : "all", desc,
                             ro.backend);
      g_string_append_printf(s, "%14s  %12s  %12s  %12s  %-16s  %s\n", "size_bytes", "time_us",
                             "algbw_GBps", "busbw_GBps", "algorithm", "protocol");
    } else {
      g_string_append(s, "op,members,bytes,time_s,algbw_GBps,busbw_GBps,algorithm,protocol\n");
    }
    for (guint i = 0; i < rows->len; i++) {
      const coll_row *r = &g_array_index(rows, coll_row, i);
      double algbw = r->time_s > 0 ? r->bytes / r->time_s / 1e9 : 0;
      char b1[40], b2[40], b3[40], b4[40];
      if (fmt == TS_FORMAT_TEXT)
        g_string_append_printf(
            s, "%14s  %12s  %12s  %12s  %-16s  %s\n", g_ascii_formatd(b1, 40, "%.0f", r->bytes),
            g_ascii_formatd(b2, 40, "%.2f", r->time_s * 1e6),
            g_ascii_formatd(b3, 40, "%.2f", algbw), g_ascii_formatd(b4, 40, "%.2f", algbw * factor),
            ts_coll_algo_name(r->algo), ts_coll_proto_name(r->proto));
      else
        g_string_append_printf(s, "%s,%d,%s,%s,%s,%s,%s,%s\n", ts_coll_kind_name(kind), n,
                               g_ascii_formatd(b1, 40, "%.17g", r->bytes),
                               g_ascii_formatd(b2, 40, "%.10g", r->time_s),
                               g_ascii_formatd(b3, 40, "%.10g", algbw),
                               g_ascii_formatd(b4, 40, "%.10g", algbw * factor),
                               ts_coll_algo_name(r->algo), ts_coll_proto_name(r->proto));
    }
  }
  gboolean ok = ts_write_file_atomic("-", s->str, s->len, &err);
  g_string_free(s, TRUE);
  return ok ? 0 : ts_cmd_fail("collective", err);
}
