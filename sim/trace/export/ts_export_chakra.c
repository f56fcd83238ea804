/* ts_export_chakra: a trainsim trace as Chakra execution traces (one NAME.RANK.et per rank and
 * the process groups as ASTRA-sim's comm-group JSON), so tools that read Chakra (ASTRA-sim,
 * trainsim import) can run it. Each op becomes a node whose id is its index in the rank's
 * program; its dependencies and its stream predecessor become data and control dependencies.
 *   compute  COMP_NODE with num_ops (FLOP) and tensor_size (bytes of memory traffic)
 *   delay    COMP_NODE with duration_micros (rounded to whole microseconds, Chakra's unit)
 *   xfer     MEM_LOAD_NODE of tensor_size bytes (the resource is not representable)
 *   coll     COMM_COLL_NODE comm_type, comm_size, pg_name (the group instance)
 *   send     COMM_SEND_NODE comm_dst, comm_tag, comm_size; recv COMM_RECV_NODE comm_src
 *   wait     METADATA_NODE (no cost)
 * What Chakra's schema has no field for travels as attributes named "trainsim.KEY", KEY as in
 * the text form (docs/formats.md#traces): a compute op's shape (class, prec, kernels, m, n, k,
 * ...: what ts_cost_compute reads, so that an imported export costs what the trace did), exact
 * values where Chakra's integers round (flops, mem_bytes, seconds), an XFER's resource and
 * bandwidth, the op's category and tag (layer, mb, phase, role, stage) and its stream. Tools
 * that do not know them ignore them; trainsim's importer reads them back. */
#include "et_def.pb-c.h"
#include "ts_import.h"
#include "ts_util.h"

#include <glib/gstdio.h>
#include <string.h>

static guint64 whole(double v)
{
  return v <= 0 ? 0 : v >= 1.8e19 ? G_MAXUINT64 : (guint64)(v + 0.5);
}

static void put_varint(GByteArray *b, guint64 v)
{
  guint8 buf[10];
  int n = 0;
  do {
    buf[n++] = (guint8)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    v >>= 7;
  } while (v > 0);
  g_byte_array_append(b, buf, (guint)n);
}

static void put_message(GByteArray *b, const ProtobufCMessage *m)
{
  size_t n = protobuf_c_message_get_packed_size(m);
  put_varint(b, n);
  guint old = b->len;
  g_byte_array_set_size(b, old + (guint)n);
  protobuf_c_message_pack(m, b->data + old);
}

/* Enough for a compute op's every attribute: 2 Chakra + 2 exact + 13 shape + 8 tag. */
#define MAX_ATTRS 32

typedef struct {
  ChakraProtoMsg__AttributeProto a[MAX_ATTRS];
  ChakraProtoMsg__AttributeProto *ap[MAX_ATTRS];
  int n;
} attrs;

static void attr_u64(attrs *as, const char *name, guint64 v)
{
  g_assert(as->n < MAX_ATTRS);
  ChakraProtoMsg__AttributeProto *a = &as->a[as->n];
  chakra_proto_msg__attribute_proto__init(a);
  a->name = (char *)name;
  a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL;
  a->uint64_val = v;
  as->ap[as->n] = a;
  as->n++;
}

static void attr_i64(attrs *as, const char *name, gint64 v)
{
  g_assert(as->n < MAX_ATTRS);
  ChakraProtoMsg__AttributeProto *a = &as->a[as->n];
  chakra_proto_msg__attribute_proto__init(a);
  a->name = (char *)name;
  a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
  a->int64_val = v;
  as->ap[as->n] = a;
  as->n++;
}

static void attr_str(attrs *as, const char *name, const char *v)
{
  g_assert(as->n < MAX_ATTRS);
  ChakraProtoMsg__AttributeProto *a = &as->a[as->n];
  chakra_proto_msg__attribute_proto__init(a);
  a->name = (char *)name;
  a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL;
  a->string_val = (char *)v;
  as->ap[as->n] = a;
  as->n++;
}

static void attr_f64(attrs *as, const char *name, double v)
{
  g_assert(as->n < MAX_ATTRS);
  ChakraProtoMsg__AttributeProto *a = &as->a[as->n];
  chakra_proto_msg__attribute_proto__init(a);
  a->name = (char *)name;
  a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_DOUBLE_VAL;
  a->double_val = v;
  as->ap[as->n] = a;
  as->n++;
}

/* Attribute names "trainsim.KEY" of the shape fields, built once. */
static const char *shape_attr_name(int i)
{
  static char *names[16];
  g_assert(i < (int)G_N_ELEMENTS(names));
  if (g_once_init_enter(&names[i])) {
    char *n = g_strdup_printf("trainsim.%s", ts_op_shape_field_name(i));
    g_once_init_leave(&names[i], n);
  }
  return names[i];
}

/* The op's category, tag and stream, which Chakra's schema has no field for. */
static void attr_tag(attrs *as, const ts_op *o)
{
  attr_str(as, "trainsim.cat", ts_op_cat_name(o->cat));
  attr_i64(as, "trainsim.stream", o->stream);
  if (o->t_layer > 0)
    attr_i64(as, "trainsim.layer", o->t_layer - 1);
  if (o->t_layer_last > 0)
    attr_i64(as, "trainsim.layer_last", o->t_layer_last - 1);
  if (o->t_micro > 0)
    attr_i64(as, "trainsim.mb", o->t_micro - 1);
  if (o->t_phase != TS_PHASE_NONE)
    attr_str(as, "trainsim.phase", ts_phase_name(o->t_phase));
  if (o->t_role != TS_ROLE_NONE)
    attr_str(as, "trainsim.role", ts_role_name(o->t_role));
  if (o->t_stage > 0)
    attr_i64(as, "trainsim.stage", o->t_stage - 1);
}

/* A compute op's shape and the exact values Chakra's integer fields round. */
static void attr_compute(attrs *as, const ts_op *o)
{
  if ((double)whole(o->flops) != o->flops)
    attr_f64(as, "trainsim.flops", o->flops);
  if ((double)whole(o->mem_bytes) != o->mem_bytes)
    attr_f64(as, "trainsim.mem_bytes", o->mem_bytes);
  const ts_op_shape *sh = o->shape;
  if (sh == NULL || sh->oclass == TS_OPC_ROOFLINE)
    return;
  attr_str(as, "trainsim.class", ts_op_class_name((ts_op_class)sh->oclass));
  if (sh->prec != TS_PRECISION_BF16)
    attr_str(as, "trainsim.prec", ts_precision_name((ts_precision)sh->prec));
  if (sh->kernels > 0)
    attr_i64(as, "trainsim.kernels", sh->kernels);
  ts_op_shape c = *sh;
  for (int i = 0; i < ts_op_shape_nfields(); i++)
    if (*ts_op_shape_field(&c, i) != 0)
      attr_f64(as, shape_attr_name(i), *ts_op_shape_field(&c, i));
}

static int comm_type_of(ts_coll_kind k)
{
  switch (k) {
  case TS_COLL_ALLREDUCE:
    return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_REDUCE;
  case TS_COLL_REDUCESCATTER:
    return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER;
  case TS_COLL_ALLGATHER:
    return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_GATHER;
  case TS_COLL_ALLTOALL:
    return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_TO_ALL;
  default:
    return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BROADCAST;
  }
}

gboolean ts_export_chakra(const ts_trace *tr, const ts_topo *t, const char *dir, const char *name,
                          GError **error)
{
  if (g_mkdir_with_parents(dir, 0755) != 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: cannot create the folder", dir);
    return FALSE;
  }
  /* Group instances: name "GROUP@BASE" -> members (written as the comm-group JSON). */
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GString *groups = g_string_new("{\n");
  gboolean first_group = TRUE;
  GByteArray *b = g_byte_array_new();
  gboolean ok = TRUE;
  for (int rank = 0; rank < tr->nranks && ok; rank++) {
    const ts_program *p = &tr->programs[ts_trace_program_of(tr, rank)];
    g_byte_array_set_size(b, 0);
    ChakraProtoMsg__GlobalMetadata gm = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
    gm.version = (char *)"0.0.4";
    /* What produced the job, so that an import reports samples/s and MFU as the trace did. */
    attrs ma = {0};
    if (tr->meta.model != NULL)
      attr_str(&ma, "trainsim.model", tr->meta.model);
    if (tr->meta.split != NULL)
      attr_str(&ma, "trainsim.split", tr->meta.split);
    attr_f64(&ma, "trainsim.samples", tr->meta.samples);
    attr_f64(&ma, "trainsim.model_flops", tr->meta.model_flops);
    if (tr->meta.tokens_per_sample > 0)
      attr_f64(&ma, "trainsim.tokens_per_sample", tr->meta.tokens_per_sample);
    gm.n_attr = (size_t)ma.n;
    gm.attr = ma.ap;
    put_message(b, &gm.base);
    /* Stream predecessors become control dependencies. */
    g_autoptr(GHashTable) last = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autofree guint64 *data = g_new(guint64, 1);
    gsize cap = 1;
    for (int i = 0; i < p->nops && ok; i++) {
      const ts_op ob = ts_program_op(p, i), *o = &ob;
      ChakraProtoMsg__Node nd = CHAKRA_PROTO_MSG__NODE__INIT;
      nd.id = (guint64)i;
      nd.name = (char *)g_ptr_array_index(tr->labels, o->label);
      int ndeps;
      const int *deps = ts_program_deps(p, i, &ndeps);
      if ((gsize)ndeps > cap) {
        cap = (gsize)ndeps;
        data = g_renew(guint64, data, cap);
      }
      for (int k = 0; k < ndeps; k++)
        data[k] = (guint64)deps[k];
      nd.n_data_deps = (size_t)ndeps;
      nd.data_deps = data;
      gpointer pv;
      guint64 ctrl = 0;
      if (g_hash_table_lookup_extended(last, GINT_TO_POINTER(o->stream), NULL, &pv)) {
        ctrl = (guint64)GPOINTER_TO_INT(pv);
        nd.n_ctrl_deps = 1;
        nd.ctrl_deps = &ctrl;
      }
      g_hash_table_insert(last, GINT_TO_POINTER(o->stream), GINT_TO_POINTER(i));
      attrs as = {0};
      g_autofree char *pg = NULL;
      switch (o->kind) {
      case TS_OP_COMPUTE:
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
        attr_u64(&as, "num_ops", whole(o->flops));
        attr_u64(&as, "tensor_size", whole(o->mem_bytes));
        attr_compute(&as, o);
        break;
      case TS_OP_DELAY:
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
        nd.duration_micros = whole(o->seconds * 1e6);
        attr_f64(&as, "trainsim.seconds", o->seconds);
        if (o->resource != TS_RES_NONE)
          attr_str(&as, "trainsim.resource", ts_resource_name(o->resource));
        break;
      case TS_OP_XFER:
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__MEM_LOAD_NODE;
        attr_u64(&as, "tensor_size", whole(o->bytes));
        if ((double)whole(o->bytes) != o->bytes)
          attr_f64(&as, "trainsim.bytes", o->bytes);
        attr_str(&as, "trainsim.resource", ts_resource_name(o->resource));
        if (o->seconds != 0)
          attr_f64(&as, "trainsim.seconds", o->seconds);
        if (o->bw_Bps != 0)
          attr_f64(&as, "trainsim.bw_Bps", o->bw_Bps);
        break;
      case TS_OP_COLL: {
        const ts_group *g = g_ptr_array_index(tr->groups, o->group);
        int base = ts_trace_group_base(tr, g, rank, NULL);
        pg = g_strdup_printf("%s@%d", g->name, base);
        if (!g_hash_table_contains(seen, pg)) {
          g_hash_table_add(seen, g_strdup(pg));
          g_string_append_printf(groups, "%s  \"%s\": [", first_group ? "" : ",\n", pg);
          first_group = FALSE;
          for (int m = 0; m < ts_trace_group_size(g); m++)
            g_string_append_printf(groups, "%s%d", m ? ", " : "",
                                   ts_trace_group_chip(t, g, base, m));
          g_string_append(groups, "]");
        }
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
        attr_i64(&as, "comm_type", comm_type_of(o->coll));
        attr_i64(&as, "comm_size", (gint64)whole(o->bytes));
        attr_str(&as, "pg_name", pg);
        if ((double)whole(o->bytes) != o->bytes)
          attr_f64(&as, "trainsim.bytes", o->bytes);
        if (o->algo != TS_ALGO_AUTO)
          attr_str(&as, "trainsim.algo", ts_coll_algo_name(o->algo));
        break;
      }
      case TS_OP_SEND:
      case TS_OP_RECV: {
        int peer = ts_trace_op_peer(tr, o, rank);
        if (peer < 0) {
          g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "rank %d op %d: %s without a partner rank",
                      rank, i, ts_op_kind_name(o->kind));
          ok = FALSE;
          break;
        }
        nd.type = o->kind == TS_OP_SEND ? CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE
                                        : CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE;
        attr_i64(&as, o->kind == TS_OP_SEND ? "comm_dst" : "comm_src", peer);
        attr_i64(&as, "comm_tag", o->tag);
        attr_i64(&as, "comm_size", (gint64)whole(o->bytes));
        if ((double)whole(o->bytes) != o->bytes)
          attr_f64(&as, "trainsim.bytes", o->bytes);
        break;
      }
      default:
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__METADATA_NODE;
        break;
      }
      if (!ok)
        break;
      attr_tag(&as, o);
      nd.n_attr = (size_t)as.n;
      nd.attr = as.ap;
      put_message(b, &nd.base);
    }
    if (!ok)
      break;
    g_autofree char *fname = g_strdup_printf("%s.%d.et", name, rank);
    g_autofree char *path = g_build_filename(dir, fname, NULL);
    ok = ts_write_file_atomic(path, (const char *)b->data, b->len, error);
  }
  g_string_append(groups, "\n}\n");
  if (ok) {
    g_autofree char *gname = g_strdup_printf("%s.comm_groups.json", name);
    g_autofree char *gpath = g_build_filename(dir, gname, NULL);
    ok = ts_write_file_atomic(gpath, groups->str, groups->len, error);
  }
  g_string_free(groups, TRUE);
  g_byte_array_unref(b);
  return ok;
}
