/* ts_import_chakra: Chakra execution traces (MLCommons schema, third_party/chakra/et_def.proto)
 * as a trainsim trace. A Chakra trace is one file per rank: a varint-length-delimited stream of
 * one GlobalMetadata message and then Node messages. Nodes become ops of the rank's program in
 * an order that respects their data and control dependencies:
 *   COMP_NODE       delay of duration_micros when measured, else compute of num_ops FLOP and
 *                   tensor_size bytes (roofline on the topology's chip), else a wait;
 *   COMM_COLL_NODE  collective comm_type of comm_size bytes over the process group pg_name
 *                   (members from ASTRA-sim's comm-group JSON), or over every rank given;
 *   COMM_SEND/RECV  point-to-point to comm_dst / from comm_src, matched by comm_tag;
 *   MEM_LOAD/STORE  transfer of tensor_size bytes over the host link;
 *   anything else   a wait (zero cost, dependencies kept).
 * Compute runs on one stream (one kernel at a time, as ASTRA-sim's hardware resource does);
 * collectives of one group on a stream of their own (a communicator); sends to and receives from
 * one peer each on theirs.
 * Attributes named "trainsim.KEY" (what trainsim's exporter writes where Chakra's schema has no
 * field) override those defaults: a compute op's shape (class, prec, kernels, m, n, k, ...),
 * exact flops, mem_bytes, bytes and seconds, an XFER's resource and bandwidth, a collective's
 * algorithm, the op's category, tag and stream. So an export imported back replays as the
 * trace did (tests/test_import.c: to 1e-9). */
#include "et_def.pb-c.h"
#include "ts_import.h"
#include "ts_util.h"

#include <json-glib/json-glib.h>
#include <string.h>

/* Bounds on what one file may ask for (a mistaken or hostile file fails, not allocates). */
#define MAX_MESSAGE_BYTES ((gsize)64 << 20)
#define MAX_NODES_TOTAL 50000000
#define STREAM_SEND (1 << 18)
#define STREAM_RECV (1 << 19)
#define STREAM_MEM ((1 << 19) + (1 << 18))

typedef struct {
  guint64 id;
  int type;
  char *name;
  guint64 *deps;
  int ndeps;
  double duration_s, flops, bytes;
  int comm_type, peer, tag;
  char *pg;
  gboolean has_comm_type, has_peer;
  /* "trainsim.*" attributes: the fields they set in x (NULL when the node has none). */
  ts_op *x;
  ts_op_shape *xs; /* its compute shape, allocated with x */
  guint xset;
} cnode;

/* Bits of cnode.xset: which "trainsim.*" attributes a node carried. */
enum {
  X_FLOPS = 1 << 0,
  X_MEM = 1 << 1,
  X_BYTES = 1 << 2,
  X_SECONDS = 1 << 3,
  X_RESOURCE = 1 << 4,
  X_BW = 1 << 5,
  X_ALGO = 1 << 6,
  X_CAT = 1 << 7,
  X_STREAM = 1 << 8,
  X_TAG = 1 << 9,
  X_SHAPE = 1 << 10,
};

typedef struct {
  int rank;
  const char *path;
  GArray *nodes; /* cnode */
  int *order;    /* topological order: node indices */
  /* GlobalMetadata's "trainsim.*" attributes (trainsim's exporter): what produced the job. */
  char *model, *split;
  double samples, model_flops, tokens_per_sample;
} crank;

/* The job's description from GlobalMetadata attributes trainsim's exporter writes; values of
 * another kind, or out of range, are ignored (they only label the result). */
static void take_meta(crank *r, const ChakraProtoMsg__GlobalMetadata *gm)
{
  for (size_t k = 0; k < gm->n_attr; k++) {
    const ChakraProtoMsg__AttributeProto *a = gm->attr[k];
    const char *an = a->name != NULL ? a->name : "";
    gboolean str = a->value_case == CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL &&
                   a->string_val != NULL && g_utf8_validate(a->string_val, -1, NULL) &&
                   strlen(a->string_val) < 4096;
    gboolean num = a->value_case == CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_DOUBLE_VAL &&
                   a->double_val >= 0 && a->double_val <= 1e30;
    if (strcmp(an, "trainsim.model") == 0 && str) {
      g_free(r->model);
      r->model = g_strdup(a->string_val);
    } else if (strcmp(an, "trainsim.split") == 0 && str) {
      g_free(r->split);
      r->split = g_strdup(a->string_val);
    } else if (strcmp(an, "trainsim.samples") == 0 && num) {
      r->samples = a->double_val;
    } else if (strcmp(an, "trainsim.model_flops") == 0 && num) {
      r->model_flops = a->double_val;
    } else if (strcmp(an, "trainsim.tokens_per_sample") == 0 && num && a->double_val <= 1e9) {
      r->tokens_per_sample = a->double_val;
    }
  }
}

static void cnode_clear(cnode *n)
{
  g_free(n->name);
  g_free(n->deps);
  g_free(n->pg);
  g_free(n->x);
  g_free(n->xs);
}

/* Index of name in a table given by its name function (n entries); -1 when absent. */
static int find_named(const char *(*name_of)(int), int n, const char *name)
{
  for (int i = 0; i < n; i++)
    if (strcmp(name_of(i), name) == 0)
      return i;
  return -1;
}

static const char *cat_name_of(int i)
{
  return ts_op_cat_name((ts_op_cat)i);
}

static gboolean attr_int(const ChakraProtoMsg__AttributeProto *a, gint64 *out)
{
  switch (a->value_case) {
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT32_VAL:
    *out = a->int32_val;
    return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL:
    *out = a->int64_val;
    return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT32_VAL:
    *out = a->uint32_val;
    return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL:
    *out = a->uint64_val > (guint64)G_MAXINT64 ? G_MAXINT64 : (gint64)a->uint64_val;
    return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT32_VAL:
    *out = a->sint32_val;
    return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT64_VAL:
    *out = a->sint64_val;
    return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_DOUBLE_VAL:
    *out = (gint64)a->double_val;
    return a->double_val >= -9e18 && a->double_val <= 9e18;
  default:
    return FALSE;
  }
}

static gboolean attr_num(const ChakraProtoMsg__AttributeProto *a, double *out)
{
  if (a->value_case == CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_DOUBLE_VAL) {
    *out = a->double_val;
    return TRUE;
  }
  if (a->value_case == CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_FLOAT_VAL) {
    *out = a->float_val;
    return TRUE;
  }
  if (a->value_case == CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL) {
    *out = (double)a->uint64_val;
    return TRUE;
  }
  gint64 v;
  if (!attr_int(a, &v))
    return FALSE;
  *out = (double)v;
  return TRUE;
}

G_GNUC_PRINTF(4, 5)
static gboolean node_err(GError **error, const char *path, guint64 id, const char *fmt, ...);

/* A "trainsim.KEY" attribute (key without the prefix) into n->x; FALSE with an error naming the
 * node when its value is not what trainsim's exporter writes. Unknown keys are ignored (a later
 * exporter's). */
static gboolean take_x(cnode *n, const char *key, const ChakraProtoMsg__AttributeProto *a,
                       const char *path, GError **error)
{
  if (n->x == NULL) {
    n->x = g_new0(ts_op, 1);
    n->xs = g_new0(ts_op_shape, 1);
  }
  ts_op *x = n->x;
  const char *str =
      a->value_case == CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL ? a->string_val : NULL;
  gint64 v = 0;
  double d = 0;
  if (strcmp(key, "class") == 0) {
    int c = str != NULL ? ts_op_class_parse(str) : -1;
    if (c <= 0)
      return node_err(error, path, n->id,
                      "attribute trainsim.class: expected gemm, attention, flash, memory, "
                      "optimizer, transfer or other");
    n->xs->oclass = c;
    n->xset |= X_SHAPE;
  } else if (strcmp(key, "prec") == 0) {
    int c = str != NULL ? ts_precision_parse(str) : -1;
    if (c < 0)
      return node_err(error, path, n->id, "attribute trainsim.prec: expected bf16, fp8 or fp32");
    n->xs->prec = c;
  } else if (strcmp(key, "kernels") == 0) {
    if (!attr_int(a, &v) || v < 0 || v > 1000000)
      return node_err(error, path, n->id, "attribute trainsim.kernels: expected 0 to 1000000");
    n->xs->kernels = (int)v;
  } else if (strcmp(key, "resource") == 0) {
    int c = str != NULL ? find_named(ts_resource_name, TS_NRES, str) : -1;
    if (c < 0)
      return node_err(error, path, n->id,
                      "attribute trainsim.resource: expected none, host_link, nvme, storage, "
                      "server or host_cpu");
    x->resource = c;
    n->xset |= X_RESOURCE;
  } else if (strcmp(key, "algo") == 0) {
    int c = str != NULL ? ts_coll_algo_parse(str) : -1;
    if (c < 0)
      return node_err(error, path, n->id, "attribute trainsim.algo: expected %s",
                      ts_coll_algo_list());
    x->algo = (ts_coll_algo)c;
    n->xset |= X_ALGO;
  } else if (strcmp(key, "cat") == 0) {
    int c = str != NULL ? find_named(cat_name_of, TS_NCATS, str) : -1;
    if (c < 0)
      return node_err(error, path, n->id,
                      "attribute trainsim.cat: expected fwd, bwd, optimizer, comm_dp, comm_tp, "
                      "comm_pp, comm_other or other");
    x->cat = (ts_op_cat)c;
    n->xset |= X_CAT;
  } else if (strcmp(key, "phase") == 0) {
    int c = str != NULL ? find_named(ts_phase_name, TS_NPHASES, str) : -1;
    if (c < 0)
      return node_err(error, path, n->id,
                      "attribute trainsim.phase: expected fwd, bwd, recompute, sync or optimizer");
    x->t_phase = c;
    n->xset |= X_TAG;
  } else if (strcmp(key, "role") == 0) {
    int c = str != NULL ? find_named(ts_role_name, TS_NROLES, str) : -1;
    if (c < 0)
      return node_err(error, path, n->id,
                      "attribute trainsim.role: expected a role of docs/formats.md#traces");
    x->t_role = c;
    n->xset |= X_TAG;
  } else if (strcmp(key, "stream") == 0) {
    if (!attr_int(a, &v) || v < 0 || v >= (1 << 20))
      return node_err(error, path, n->id, "attribute trainsim.stream: expected 0 to %d",
                      (1 << 20) - 1);
    x->stream = (int)v;
    n->xset |= X_STREAM;
  } else if (strcmp(key, "layer") == 0 || strcmp(key, "layer_last") == 0 ||
             strcmp(key, "mb") == 0 || strcmp(key, "stage") == 0) {
    if (!attr_int(a, &v) || v < 0 || v >= G_MAXINT)
      return node_err(error, path, n->id, "attribute trainsim.%s: expected 0 to %d", key,
                      G_MAXINT - 1);
    int *f = key[0] == 'm'               ? &x->t_micro
             : key[0] == 's'             ? &x->t_stage
             : strcmp(key, "layer") == 0 ? &x->t_layer
                                         : &x->t_layer_last;
    *f = (int)v + 1;
    n->xset |= X_TAG;
  } else {
    /* Numbers: exact values and shape dimensions. */
    double *f = NULL;
    guint bit = 0;
    if (strcmp(key, "flops") == 0)
      f = &x->flops, bit = X_FLOPS;
    else if (strcmp(key, "mem_bytes") == 0)
      f = &x->mem_bytes, bit = X_MEM;
    else if (strcmp(key, "bytes") == 0)
      f = &x->bytes, bit = X_BYTES;
    else if (strcmp(key, "seconds") == 0)
      f = &x->seconds, bit = X_SECONDS;
    else if (strcmp(key, "bw_Bps") == 0)
      f = &x->bw_Bps, bit = X_BW;
    else
      for (int i = 0; i < ts_op_shape_nfields(); i++)
        if (strcmp(key, ts_op_shape_field_name(i)) == 0)
          f = ts_op_shape_field(n->xs, i);
    if (f == NULL)
      return TRUE;
    if (!attr_num(a, &d) || !(d >= 0) || d > 1e25)
      return node_err(error, path, n->id, "attribute trainsim.%s: expected a number in [0, 1e25]",
                      key);
    *f = d;
    n->xset |= bit;
  }
  return TRUE;
}

G_GNUC_PRINTF(4, 5)
static gboolean node_err(GError **error, const char *path, guint64 id, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: node %" G_GUINT64_FORMAT ": %s", path, id, msg);
  return FALSE;
}

/* One node's fields, checked. */
static gboolean take_node(const ChakraProtoMsg__Node *m, const char *path, cnode *n, GError **error)
{
  memset(n, 0, sizeof *n);
  n->id = m->id;
  n->type = m->type;
  /* Names become op labels, which outputs quote: a 0xff byte went through as "\377" in a
   * written trace and raw into link reports. */
  if (m->name != NULL && !g_utf8_validate(m->name, -1, NULL))
    return node_err(error, path, m->id, "name is not UTF-8; expected UTF-8 text");
  n->name = g_strdup(m->name != NULL && m->name[0] ? m->name : "node");
  n->ndeps = (int)(m->n_data_deps + m->n_ctrl_deps);
  n->deps = g_new(guint64, n->ndeps > 0 ? n->ndeps : 1);
  for (size_t k = 0; k < m->n_data_deps; k++)
    n->deps[k] = m->data_deps[k];
  for (size_t k = 0; k < m->n_ctrl_deps; k++)
    n->deps[m->n_data_deps + k] = m->ctrl_deps[k];
  n->duration_s = (double)m->duration_micros * 1e-6;
  n->peer = -1;
  for (size_t k = 0; k < m->n_attr; k++) {
    const ChakraProtoMsg__AttributeProto *a = m->attr[k];
    const char *an = a->name != NULL ? a->name : "";
    gint64 v = 0;
    double d = 0;
    if (strcmp(an, "comm_type") == 0) {
      if (!attr_int(a, &v) || v < 0 || v > 9)
        return node_err(error, path, n->id, "attribute comm_type: expected 0 to 9");
      n->comm_type = (int)v;
      n->has_comm_type = TRUE;
    } else if (strcmp(an, "comm_size") == 0 || strcmp(an, "tensor_size") == 0) {
      if (!attr_num(a, &d) || !(d >= 0) || d > 9e15)
        return node_err(error, path, n->id, "attribute %s: expected bytes in [0, 9e15]", an);
      n->bytes = d;
    } else if (strcmp(an, "num_ops") == 0) {
      if (!attr_num(a, &d) || !(d >= 0) || d > 1e25)
        return node_err(error, path, n->id, "attribute num_ops: expected FLOP in [0, 1e25]");
      n->flops = d;
    } else if ((strcmp(an, "comm_src") == 0 &&
                m->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE) ||
               (strcmp(an, "comm_dst") == 0 &&
                m->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE)) {
      if (!attr_int(a, &v) || v < 0 || v >= (1 << 18))
        return node_err(error, path, n->id, "attribute %s: expected a rank in [0, 262143]", an);
      n->peer = (int)v;
      n->has_peer = TRUE;
    } else if (strcmp(an, "comm_tag") == 0) {
      if (!attr_int(a, &v) || v < 0 || v > G_MAXINT)
        return node_err(error, path, n->id, "attribute comm_tag: expected a tag in [0, %d]",
                        G_MAXINT);
      n->tag = (int)v;
    } else if (g_str_has_prefix(an, "trainsim.")) {
      if (!take_x(n, an + strlen("trainsim."), a, path, error))
        return FALSE;
    } else if (strcmp(an, "pg_name") == 0) {
      if (a->value_case == CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL) {
        if (a->string_val != NULL && !g_utf8_validate(a->string_val, -1, NULL))
          return node_err(error, path, n->id, "pg_name is not UTF-8; expected UTF-8 text");
        n->pg = g_strdup(a->string_val);
      } else if (attr_int(a, &v))
        n->pg = g_strdup_printf("%" G_GINT64_FORMAT, v);
    }
  }
  if ((m->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE ||
       m->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE) &&
      !n->has_peer)
    return node_err(error, path, n->id, "%s without %s",
                    m->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE ? "send" : "recv",
                    m->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE ? "comm_dst"
                                                                           : "comm_src");
  if (m->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE && !n->has_comm_type)
    return node_err(error, path, n->id, "collective without comm_type");
  return TRUE;
}

/* A varint at p (at most 10 bytes, not past end); 0 when malformed. */
static int read_varint(const guint8 *p, const guint8 *end, guint64 *out)
{
  guint64 v = 0;
  for (int i = 0; i < 10 && p + i < end; i++) {
    v |= (guint64)(p[i] & 0x7f) << (7 * i);
    if (!(p[i] & 0x80)) {
      *out = v;
      return i + 1;
    }
  }
  return 0;
}

static gboolean read_stream(const guint8 *data, gsize len, crank *r, gint64 *total, GError **error)
{
  const guint8 *p = data, *end = data + len;
  gboolean meta = FALSE;
  GHashTable *ids = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  gboolean ok = TRUE;
  while (p < end && ok) {
    guint64 n = 0;
    int k = read_varint(p, end, &n);
    gsize off = (gsize)(p - data);
    if (k == 0 || n > (guint64)(end - p - k) || n > MAX_MESSAGE_BYTES) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: byte %" G_GSIZE_FORMAT ": a message length that runs past the end of the "
                  "file; expected a Chakra trace (varint-length-delimited GlobalMetadata and Node "
                  "messages)",
                  r->path, off);
      ok = FALSE;
      break;
    }
    p += k;
    if (!meta) {
      ChakraProtoMsg__GlobalMetadata *gm =
          chakra_proto_msg__global_metadata__unpack(NULL, (size_t)n, p);
      if (gm == NULL) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "%s: byte %" G_GSIZE_FORMAT ": not a GlobalMetadata message; expected a "
                    "Chakra trace",
                    r->path, off);
        ok = FALSE;
        break;
      }
      take_meta(r, gm);
      chakra_proto_msg__global_metadata__free_unpacked(gm, NULL);
      meta = TRUE;
    } else {
      ChakraProtoMsg__Node *m = chakra_proto_msg__node__unpack(NULL, (size_t)n, p);
      if (m == NULL) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "%s: byte %" G_GSIZE_FORMAT ": not a Node message; expected a Chakra trace",
                    r->path, off);
        ok = FALSE;
        break;
      }
      if (++*total > MAX_NODES_TOTAL) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "%s: more than %d nodes in the import; expected fewer", r->path,
                    MAX_NODES_TOTAL);
        chakra_proto_msg__node__free_unpacked(m, NULL);
        ok = FALSE;
        break;
      }
      cnode cn;
      ok = take_node(m, r->path, &cn, error);
      chakra_proto_msg__node__free_unpacked(m, NULL);
      if (!ok) {
        cnode_clear(&cn);
        break;
      }
      if (g_hash_table_contains(ids, &cn.id)) {
        node_err(error, r->path, cn.id, "the id is used by an earlier node");
        cnode_clear(&cn);
        ok = FALSE;
        break;
      }
      g_hash_table_add(ids, g_memdup2(&cn.id, sizeof cn.id));
      g_array_append_val(r->nodes, cn);
    }
    p += n;
  }
  g_hash_table_unref(ids);
  if (ok && !meta) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: empty; expected a Chakra trace (GlobalMetadata, then Node messages)", r->path);
    ok = FALSE;
  }
  return ok;
}

/* Topological order, file order where the file already respects dependencies (depth-first,
 * iterative: a chain of millions of nodes must not overflow the stack). */
static gboolean topo_order(crank *r, GError **error)
{
  int n = (int)r->nodes->len;
  GHashTable *ix = g_hash_table_new(g_int64_hash, g_int64_equal);
  for (int i = 0; i < n; i++)
    g_hash_table_insert(ix, &g_array_index(r->nodes, cnode, i).id, GINT_TO_POINTER(i + 1));
  /* Dependencies as node indices. */
  int **dix = g_new0(int *, n > 0 ? n : 1);
  gboolean ok = TRUE;
  for (int i = 0; i < n && ok; i++) {
    cnode *c = &g_array_index(r->nodes, cnode, i);
    dix[i] = g_new(int, c->ndeps > 0 ? c->ndeps : 1);
    for (int k = 0; k < c->ndeps; k++) {
      int j = GPOINTER_TO_INT(g_hash_table_lookup(ix, &c->deps[k])) - 1;
      if (j < 0) {
        ok = node_err(error, r->path, c->id,
                      "depends on node %" G_GUINT64_FORMAT ", which the file does not have",
                      c->deps[k]);
        break;
      }
      if (j == i) {
        ok = node_err(error, r->path, c->id, "depends on itself");
        break;
      }
      dix[i][k] = j;
    }
  }
  r->order = g_new(int, n > 0 ? n : 1);
  guint8 *state = g_new0(guint8, n > 0 ? n : 1); /* 0 new, 1 on the stack, 2 emitted */
  int *stack = g_new(int, n > 0 ? n : 1), *next = g_new0(int, n > 0 ? n : 1), nout = 0;
  for (int s = 0; s < n && ok; s++) {
    if (state[s])
      continue;
    int sp = 0;
    stack[sp++] = s;
    state[s] = 1;
    while (sp > 0 && ok) {
      int v = stack[sp - 1];
      cnode *c = &g_array_index(r->nodes, cnode, v);
      if (next[v] < c->ndeps) {
        int w = dix[v][next[v]++];
        if (state[w] == 1) {
          ok = node_err(error, r->path, c->id, "dependency cycle through node %" G_GUINT64_FORMAT,
                        g_array_index(r->nodes, cnode, w).id);
        } else if (state[w] == 0) {
          state[w] = 1;
          stack[sp++] = w;
        }
      } else {
        state[v] = 2;
        r->order[nout++] = v;
        sp--;
      }
    }
  }
  g_free(state);
  g_free(stack);
  g_free(next);
  for (int i = 0; i < n; i++)
    g_free(dix[i]);
  g_free(dix);
  g_hash_table_unref(ix);
  return ok;
}

/* json-glib keeps the last of two members with one name: a comm-groups file giving a group
 * twice lost the first list silently, and the error came later as "collective on group "dp@0",
 * which does not list rank 1". The parser announces every member: note the second sighting. */
static void member_seen(JsonParser *p, JsonObject *o, char *name, gpointer data)
{
  (void)p;
  char **dup = data;
  if (*dup != NULL || o == NULL)
    return;
  g_autofree char *key = g_strdup_printf("%p/%s", (void *)o, name);
  GHashTable *seen = g_object_get_data(G_OBJECT(p), "ts-seen");
  if (g_hash_table_contains(seen, key))
    *dup = g_strdup(name);
  else
    g_hash_table_add(seen, g_steal_pointer(&key));
}

/* Groups by name: members from the comm-group JSON, or every rank given. */
typedef struct {
  GHashTable *members; /* name -> GArray of int */
} groups;

static gboolean load_groups(const char *json, const char *path, const ts_topo *t, groups *g,
                            GError **error)
{
  g->members =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
  if (json == NULL)
    return TRUE;
  int deep = 0;
  if (!ts_json_depth_ok(json, -1, TS_JSON_MAX_DEPTH, &deep)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s:%d: JSON nested deeper than %d levels; expected {\"GROUP\": [ranks]}", path,
                deep, TS_JSON_MAX_DEPTH);
    return FALSE;
  }
  g_autoptr(JsonParser) jp = json_parser_new();
  g_autofree char *dup = NULL;
  g_object_set_data_full(G_OBJECT(jp), "ts-seen",
                         g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
                         (GDestroyNotify)g_hash_table_unref);
  g_signal_connect(jp, "object-member", G_CALLBACK(member_seen), &dup);
  GError *e = NULL;
  if (!json_parser_load_from_data(jp, json, -1, &e)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: %s; expected JSON {\"GROUP\": [ranks]}", path,
                e->message);
    g_error_free(e);
    return FALSE;
  }
  if (dup != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: group \"%s\" given twice; expected each group once", path, dup);
    return FALSE;
  }
  JsonNode *root = json_parser_get_root(jp);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: expected a JSON object {\"GROUP\": [ranks]}",
                path);
    return FALSE;
  }
  JsonObject *o = json_node_get_object(root);
  g_autoptr(GList) keys = json_object_get_members(o);
  for (GList *k = keys; k != NULL; k = k->next) {
    JsonNode *v = json_object_get_member(o, k->data);
    if (!JSON_NODE_HOLDS_ARRAY(v)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: group \"%s\": expected an array of ranks",
                  path, (const char *)k->data);
      return FALSE;
    }
    JsonArray *a = json_node_get_array(v);
    GArray *m = g_array_new(FALSE, FALSE, sizeof(int));
    for (guint i = 0; i < json_array_get_length(a); i++) {
      JsonNode *e2 = json_array_get_element(a, i);
      gint64 r = JSON_NODE_HOLDS_VALUE(e2) && json_node_get_value_type(e2) == G_TYPE_INT64
                     ? json_node_get_int(e2)
                     : -1;
      if (r < 0 || r >= t->nchips) {
        g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                    "%s: group \"%s\" member %u: expected a rank in [0, %d) (the topology's chips)",
                    path, (const char *)k->data, i, t->nchips);
        g_array_unref(m);
        return FALSE;
      }
      int ri = (int)r;
      g_array_append_val(m, ri);
    }
    g_hash_table_insert(g->members, g_strdup(k->data), m);
  }
  return TRUE;
}

static int coll_kind_of(int ct)
{
  switch (ct) {
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_REDUCE:
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BARRIER:
    return TS_COLL_ALLREDUCE;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_GATHER:
    return TS_COLL_ALLGATHER;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BROADCAST:
    return TS_COLL_BROADCAST;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_TO_ALL:
    return TS_COLL_ALLTOALL;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER:
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER_BLOCK:
    return TS_COLL_REDUCESCATTER;
  default:
    return -1; /* REDUCE, GATHER, SCATTER: rooted collectives trainsim does not model */
  }
}

static const char *comm_type_name(int ct)
{
  static const char *names[] = {
      "ALL_REDUCE", "REDUCE",         "ALL_GATHER",           "GATHER", "SCATTER", "BROADCAST",
      "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER"};
  return ct >= 0 && ct < (int)G_N_ELEMENTS(names) ? names[ct] : "?";
}

typedef struct {
  int kind;
  double bytes;
  int rank;
  guint64 node;
} coll_sig;

ts_trace *ts_import_chakra_bytes(const guint8 *const *data, const gsize *len,
                                 const char *const *paths, const int *ranks, int nfiles,
                                 const ts_topo *t, const char *comm_groups_json,
                                 const char *comm_groups_path, GError **error)
{
  if (nfiles > t->nchips) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: %d ranks but topology %s has %d chips; expected at most one rank per chip",
                paths[nfiles - 1], nfiles, t->path ? t->path : t->name, t->nchips);
    return NULL;
  }
  for (int k = 0; k < nfiles; k++)
    if (ranks[k] < 0 || ranks[k] >= t->nchips) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: rank %d but topology %s has chips 0 to %d; expected more chips or fewer "
                  "ranks",
                  paths[k], ranks[k], t->path ? t->path : t->name, t->nchips - 1);
      return NULL;
    }
  ts_trace *tr = NULL;
  crank *rs = g_new0(crank, nfiles);
  int *file_of = g_new(int, t->nchips);
  for (int c = 0; c < t->nchips; c++)
    file_of[c] = -1;
  groups gs = {0};
  GHashTable *pairs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GHashTable *gidx = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GHashTable *sigs =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
  gint64 total = 0;
  gboolean ok = TRUE;
  for (int k = 0; k < nfiles && ok; k++) {
    rs[k].rank = ranks[k];
    rs[k].path = paths[k];
    rs[k].nodes = g_array_new(FALSE, FALSE, sizeof(cnode));
    g_array_set_clear_func(rs[k].nodes, (GDestroyNotify)cnode_clear);
    if (file_of[ranks[k]] >= 0) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s: rank %d is also %s; expected one file per rank", paths[k], ranks[k],
                  paths[file_of[ranks[k]]]);
      ok = FALSE;
      break;
    }
    file_of[ranks[k]] = k;
    ok = read_stream(data[k], len[k], &rs[k], &total, error) && topo_order(&rs[k], error);
  }
  if (ok)
    ok = load_groups(comm_groups_json, comm_groups_path, t, &gs, error);
  /* Cross-rank checks before anything runs: peers exist and every send has its receive (per
   * source, destination and tag, in count), collectives name groups that hold their ranks. */
  for (int k = 0; k < nfiles && ok; k++)
    for (guint i = 0; i < rs[k].nodes->len && ok; i++) {
      cnode *c = &g_array_index(rs[k].nodes, cnode, i);
      if (c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE ||
          c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE) {
        gboolean send = c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE;
        if (c->peer >= t->nchips || file_of[c->peer] < 0) {
          ok = node_err(error, rs[k].path, c->id, "%s %s rank %d, which %s",
                        send ? "send to" : "recv", send ? "" : "from", c->peer,
                        c->peer >= t->nchips ? "the topology does not have" : "no file given is");
          break;
        }
        int src = send ? rs[k].rank : c->peer, dst = send ? c->peer : rs[k].rank;
        g_autofree char *key = g_strdup_printf("%d/%d/%d", src, dst, c->tag);
        int v = GPOINTER_TO_INT(g_hash_table_lookup(pairs, key));
        g_hash_table_insert(pairs, g_strdup(key), GINT_TO_POINTER(v + (send ? 1 : -1)));
      } else if (c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE) {
        if (coll_kind_of(c->comm_type) < 0) {
          ok = node_err(error, rs[k].path, c->id,
                        "collective %s: expected ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, "
                        "ALL_TO_ALL, BROADCAST or BARRIER",
                        comm_type_name(c->comm_type));
          break;
        }
        if (c->pg != NULL && gs.members != NULL && comm_groups_json != NULL &&
            !g_hash_table_contains(gs.members, c->pg)) {
          ok = node_err(error, rs[k].path, c->id, "process group \"%s\" is not in %s", c->pg,
                        comm_groups_path);
          break;
        }
      }
    }
  if (ok) {
    /* Unmatched point-to-point: name the first node of the side left over. */
    GHashTableIter it;
    gpointer key, val;
    g_hash_table_iter_init(&it, pairs);
    while (ok && g_hash_table_iter_next(&it, &key, &val)) {
      int v = GPOINTER_TO_INT(val);
      if (v == 0)
        continue;
      int src, dst, tag;
      if (sscanf(key, "%d/%d/%d", &src, &dst, &tag) != 3)
        continue;
      int who = v > 0 ? src : dst;
      int k = file_of[who];
      for (guint i = 0; i < rs[k].nodes->len; i++) {
        cnode *c = &g_array_index(rs[k].nodes, cnode, i);
        if (c->type == (v > 0 ? CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE
                              : CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE) &&
            c->peer == (v > 0 ? dst : src) && c->tag == tag) {
          ok = node_err(error, rs[k].path, c->id,
                        v > 0 ? "send to rank %d tag %d has no matching recv (%d more sends)"
                              : "recv from rank %d tag %d has no matching send (%d more recvs)",
                        v > 0 ? dst : src, tag, v > 0 ? v : -v);
          break;
        }
      }
    }
  }
  if (!ok)
    goto out;

  /* The trace: every chip of the topology a rank of its own (asymmetric over the array). */
  tr = ts_trace_new(t);
  {
    ts_group_shape all = {0};
    for (int d = 0; d < t->ndims; d++)
      all.p[all.npieces++] = (ts_piece){d, t->dims[d].size, 1};
    ts_trace_add_axis(tr, "rank", t->nchips, FALSE, &all);
    ts_trace_set_programs(tr, t->nchips);
  }
  GArray *every = g_array_new(FALSE, FALSE, sizeof(int));
  for (int c = 0; c < t->nchips; c++)
    if (file_of[c] >= 0)
      g_array_append_val(every, c);
  for (int k = 0; k < nfiles && ok; k++) {
    crank *r = &rs[k];
    int n = (int)r->nodes->len;
    GHashTable *opix = g_hash_table_new(g_int64_hash, g_int64_equal);
    GArray *deps = g_array_new(FALSE, FALSE, sizeof(int));
    for (int oi = 0; oi < n && ok; oi++) {
      cnode *c = &g_array_index(r->nodes, cnode, r->order[oi]);
      ts_op op = {0};
      op.axis = -1;
      op.group = -1;
      op.cat = TS_CAT_OTHER;
      switch (c->type) {
      case CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE:
        op.t_role = TS_ROLE_COMPUTE;
        if (c->duration_s > 0 || (c->xset & X_SECONDS)) {
          op.kind = TS_OP_DELAY;
          op.seconds = c->xset & X_SECONDS ? c->x->seconds : c->duration_s;
          op.resource = c->xset & X_RESOURCE ? c->x->resource : TS_RES_NONE;
        } else if (c->flops > 0 || c->bytes > 0 || (c->xset & X_SHAPE)) {
          op.kind = TS_OP_COMPUTE;
          op.flops = c->xset & X_FLOPS ? c->x->flops : c->flops;
          op.mem_bytes = c->xset & X_MEM ? c->x->mem_bytes : c->bytes;
          if (c->xset & X_SHAPE)
            op.shape = c->xs; /* interned by ts_trace_append */
        } else {
          op.kind = TS_OP_WAIT;
        }
        break;
      case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE: {
        const char *gname = c->pg != NULL && comm_groups_json != NULL ? c->pg : "all ranks";
        GArray *mem = c->pg != NULL && comm_groups_json != NULL
                          ? g_hash_table_lookup(gs.members, c->pg)
                          : every;
        gboolean in = FALSE;
        for (guint m = 0; m < mem->len; m++)
          in |= g_array_index(mem, int, m) == r->rank;
        if (!in) {
          ok = node_err(error, r->path, c->id,
                        "collective on group \"%s\", which does not list rank %d", gname, r->rank);
          break;
        }
        for (guint m = 0; m < mem->len && ok; m++)
          if (file_of[g_array_index(mem, int, m)] < 0)
            ok = node_err(error, r->path, c->id,
                          "collective on group \"%s\", whose member rank %d has no file", gname,
                          g_array_index(mem, int, m));
        if (!ok)
          break;
        gpointer gv;
        int gi;
        if (g_hash_table_lookup_extended(gidx, gname, NULL, &gv)) {
          gi = GPOINTER_TO_INT(gv);
        } else {
          gi = ts_trace_group_members(tr, gname, (const int *)mem->data, (int)mem->len, error);
          if (gi < 0) {
            g_prefix_error(error, "%s: node %" G_GUINT64_FORMAT ": ", r->path, c->id);
            ok = FALSE;
            break;
          }
          g_hash_table_insert(gidx, g_strdup(gname), GINT_TO_POINTER(gi));
        }
        op.kind = TS_OP_COLL;
        op.coll = (ts_coll_kind)coll_kind_of(c->comm_type);
        op.group = gi;
        op.bytes = c->comm_type == CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BARRIER ? 0 : c->bytes;
        op.stream = 1 + gi;
        op.cat = TS_CAT_COMM_OTHER;
        /* The sequence of collectives on a group must agree between members. */
        GArray *sq = g_hash_table_lookup(sigs, gname);
        if (sq == NULL) {
          sq = g_array_new(FALSE, FALSE, sizeof(coll_sig));
          g_hash_table_insert(sigs, g_strdup(gname), sq);
        }
        coll_sig sg = {op.coll, op.bytes, r->rank, c->id};
        g_array_append_val(sq, sg);
        break;
      }
      case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE:
      case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE:
        op.kind = c->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE ? TS_OP_SEND : TS_OP_RECV;
        op.peer = c->peer + 1;
        op.tag = c->tag;
        op.bytes = c->bytes;
        op.stream = (op.kind == TS_OP_SEND ? STREAM_SEND : STREAM_RECV) + c->peer;
        op.cat = TS_CAT_COMM_OTHER;
        break;
      case CHAKRA_PROTO_MSG__NODE_TYPE__MEM_LOAD_NODE:
      case CHAKRA_PROTO_MSG__NODE_TYPE__MEM_STORE_NODE:
        op.kind = TS_OP_XFER;
        op.resource = c->xset & X_RESOURCE ? c->x->resource : TS_RES_HOST_LINK;
        op.bytes = c->bytes;
        op.seconds = c->xset & X_SECONDS ? c->x->seconds : 0;
        op.bw_Bps = c->xset & X_BW ? c->x->bw_Bps : 0;
        op.stream = STREAM_MEM;
        op.t_role = TS_ROLE_OFFLOAD;
        break;
      default:
        op.kind = TS_OP_WAIT;
        op.t_role = TS_ROLE_MARKER;
        break;
      }
      if (!ok)
        break;
      /* What trainsim's exporter carried: exact bytes, algorithm, category, tag, stream. */
      if ((c->xset & X_BYTES) && op.kind != TS_OP_COMPUTE && op.kind != TS_OP_DELAY &&
          op.kind != TS_OP_WAIT && !(op.kind == TS_OP_COLL && op.bytes == 0))
        op.bytes = c->x->bytes;
      if ((c->xset & X_ALGO) && op.kind == TS_OP_COLL)
        op.algo = c->x->algo;
      if (c->xset & X_CAT)
        op.cat = c->x->cat;
      if (c->xset & X_STREAM)
        op.stream = c->x->stream;
      if (c->xset & X_TAG) {
        op.t_layer = c->x->t_layer;
        op.t_layer_last = c->x->t_layer_last;
        op.t_micro = c->x->t_micro;
        op.t_phase = c->x->t_phase;
        op.t_role = c->x->t_role;
        op.t_stage = c->x->t_stage;
      }
      g_array_set_size(deps, 0);
      for (int d = 0; d < c->ndeps; d++) {
        int j = GPOINTER_TO_INT(g_hash_table_lookup(opix, &c->deps[d])) - 1;
        g_array_append_val(deps, j);
      }
      op.label = ts_trace_label(tr, c->name);
      int idx = ts_trace_append(tr, r->rank, &op, (const int *)deps->data, (int)deps->len);
      g_hash_table_insert(opix, &c->id, GINT_TO_POINTER(idx + 1));
    }
    g_array_unref(deps);
    g_hash_table_unref(opix);
  }
  g_array_unref(every);
  if (ok) {
    /* Members of a group must issue the same collectives in the same order. */
    GHashTableIter it;
    gpointer key, val;
    g_hash_table_iter_init(&it, sigs);
    while (ok && g_hash_table_iter_next(&it, &key, &val)) {
      GArray *sq = val;
      int gi = GPOINTER_TO_INT(g_hash_table_lookup(gidx, key));
      const ts_group *g = g_ptr_array_index(tr->groups, gi);
      /* Each rank's entries are contiguous (ranks are read one after another): its run
       * (start, length), then the n-th collective of each member against member 0's. */
      g_autoptr(GHashTable) run = g_hash_table_new(g_direct_hash, g_direct_equal);
      for (guint q = 0; q < sq->len; q++) {
        int rk = g_array_index(sq, coll_sig, q).rank;
        if (!g_hash_table_contains(run, GINT_TO_POINTER(rk + 1)))
          g_hash_table_insert(run, GINT_TO_POINTER(rk + 1), GINT_TO_POINTER((int)q + 1));
      }
      int m0 = g->members[0];
      int s0 = GPOINTER_TO_INT(g_hash_table_lookup(run, GINT_TO_POINTER(m0 + 1))) - 1;
      for (int m = 1; m < g->nmembers && ok; m++) {
        int sm = GPOINTER_TO_INT(g_hash_table_lookup(run, GINT_TO_POINTER(g->members[m] + 1))) - 1;
        for (int n = 0;; n++) {
          int a = s0 >= 0 ? s0 + n : (int)sq->len, b = sm >= 0 ? sm + n : (int)sq->len;
          const coll_sig *x = a < (int)sq->len && g_array_index(sq, coll_sig, a).rank == m0
                                  ? &g_array_index(sq, coll_sig, a)
                                  : NULL;
          const coll_sig *y =
              b < (int)sq->len && g_array_index(sq, coll_sig, b).rank == g->members[m]
                  ? &g_array_index(sq, coll_sig, b)
                  : NULL;
          if (x == NULL && y == NULL)
            break;
          if (x == NULL || y == NULL || x->kind != y->kind || x->bytes != y->bytes) {
            const coll_sig *w = y != NULL ? y : x;
            int k = file_of[w->rank];
            ok = node_err(error, rs[k].path, w->node,
                          "collective on group \"%s\" %s rank %d's (%s); expected the members' "
                          "collectives to match in order",
                          (const char *)key,
                          x == NULL || y == NULL ? "has no partner in" : "differs from",
                          y != NULL ? m0 : g->members[m],
                          x != NULL ? ts_coll_kind_name((ts_coll_kind)x->kind) : "none");
            break;
          }
        }
      }
    }
  }
  if (ok) {
    g_autofree char *base = g_path_get_basename(paths[0]);
    /* What trainsim's exporter recorded (in the first file), else the file name. */
    tr->meta.model = g_strdup(rs[0].model != NULL ? rs[0].model : base);
    tr->meta.split = g_strdup(rs[0].split != NULL ? rs[0].split : "(chakra)");
    tr->meta.samples = rs[0].samples;
    tr->meta.model_flops = rs[0].model_flops;
    tr->meta.tokens_per_sample = rs[0].tokens_per_sample;
    tr->meta.topology = g_strdup(t->name);
    tr->meta.producer = g_strdup_printf("trainsim %s import --from chakra", TS_VERSION);
    ok = ts_trace_check(tr, t, error);
  }
  if (!ok) {
    ts_trace_free(tr);
    tr = NULL;
  }
out:
  for (int k = 0; k < nfiles; k++) {
    if (rs[k].nodes != NULL)
      g_array_unref(rs[k].nodes);
    g_free(rs[k].order);
    g_free(rs[k].model);
    g_free(rs[k].split);
  }
  g_free(rs);
  g_free(file_of);
  if (gs.members != NULL)
    g_hash_table_unref(gs.members);
  g_hash_table_unref(pairs);
  g_hash_table_unref(gidx);
  g_hash_table_unref(sigs);
  return tr;
}
