/* ts_export_chakra: a trainsim trace as Chakra execution traces (one NAME.RANK.et per rank and
 * the process groups as ASTRA-sim's comm-group JSON), so tools that read Chakra (ASTRA-sim,
 * trainsim import) can run it. Each op becomes a node whose id is its index in the rank's
 * program; its dependencies and its stream predecessor become data and control dependencies.
 *   compute  COMP_NODE with num_ops (FLOP) and tensor_size (bytes of memory traffic)
 *   delay    COMP_NODE with duration_micros (rounded to whole microseconds, Chakra's unit)
 *   xfer     MEM_LOAD_NODE of tensor_size bytes (the resource is not representable)
 *   coll     COMM_COLL_NODE comm_type, comm_size, pg_name (the group instance)
 *   send     COMM_SEND_NODE comm_dst, comm_tag, comm_size; recv COMM_RECV_NODE comm_src
 *   wait     METADATA_NODE (no cost) */
#include "et_def.pb-c.h"
#include "ts_import.h"
#include "ts_util.h"

#include <glib/gstdio.h>
#include <string.h>

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

typedef struct {
  ChakraProtoMsg__AttributeProto a[4];
  ChakraProtoMsg__AttributeProto *ap[4];
  int n;
} attrs;

static void attr_u64(attrs *as, const char *name, guint64 v)
{
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
  ChakraProtoMsg__AttributeProto *a = &as->a[as->n];
  chakra_proto_msg__attribute_proto__init(a);
  a->name = (char *)name;
  a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL;
  a->string_val = (char *)v;
  as->ap[as->n] = a;
  as->n++;
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

static guint64 whole(double v)
{
  return v <= 0 ? 0 : v >= 1.8e19 ? G_MAXUINT64 : (guint64)(v + 0.5);
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
    put_message(b, &gm.base);
    /* Stream predecessors become control dependencies. */
    g_autoptr(GHashTable) last = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autofree guint64 *data = g_new(guint64, 1);
    gsize cap = 1;
    for (int i = 0; i < p->nops && ok; i++) {
      const ts_op *o = &p->ops[i];
      ChakraProtoMsg__Node nd = CHAKRA_PROTO_MSG__NODE__INIT;
      nd.id = (guint64)i;
      nd.name = (char *)g_ptr_array_index(tr->labels, o->label);
      if ((gsize)o->ndeps > cap) {
        cap = (gsize)o->ndeps;
        data = g_renew(guint64, data, cap);
      }
      for (int k = 0; k < o->ndeps; k++)
        data[k] = (guint64)o->deps[k];
      nd.n_data_deps = (size_t)o->ndeps;
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
        break;
      case TS_OP_DELAY:
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
        nd.duration_micros = whole(o->seconds * 1e6);
        break;
      case TS_OP_XFER:
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__MEM_LOAD_NODE;
        attr_u64(&as, "tensor_size", whole(o->bytes));
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
        break;
      }
      default:
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__METADATA_NODE;
        break;
      }
      if (!ok)
        break;
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
