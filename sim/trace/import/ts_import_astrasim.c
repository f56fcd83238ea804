/* ts_import_astrasim: ASTRA-sim's text workloads (ASTRA-sim 1.0, and 2.x before Chakra) as a
 * trainsim trace. The file:
 *   line 1   parallelism: DATA, MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_CUSTOMIZED,
 *            HYBRID_TRANSFORMER (model_parallel_NPU_group: N), HYBRID_DLRM[_ENHANCED] B, MICRO
 *   line 2   number of layers
 *   a layer  NAME RESERVED FWD_CYCLES FWD_COMM FWD_BYTES IG_CYCLES IG_COMM IG_BYTES WG_CYCLES
 *            WG_COMM WG_BYTES UPDATE_CYCLES [PARALLELISM (HYBRID_CUSTOMIZED)]
 * Compute is in cycles of a 1 GHz clock (ASTRA-sim's), written as fixed durations; each comm
 * is ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL or NONE of BYTES per rank. One training pass
 * as ASTRA-sim runs it (and Chakra's text converter writes it): forward, each layer's compute
 * then its forward collective; backward, last layer first, input-gradient compute and
 * collective (none for the first layer), weight-gradient compute and its collective, which
 * overlaps the rest of the backward pass; the step ends when every collective has.
 * Groups: data and model parallelism are placed on the topology's dimensions as ASTRA-sim 1.0
 * places them: HYBRID_DATA_MODEL data inside the first (fastest) dimension and model across
 * the others, HYBRID_MODEL_DATA the reverse, HYBRID_TRANSFORMER model over the innermost N
 * chips; DATA, MODEL, MICRO and DLRM collectives span every chip. Every chip runs the same
 * program (symmetric axes). */
#include "ts_import.h"
#include "ts_util.h"

#include <string.h>

#define CYCLE_S 1e-9
#define MAX_LAYERS 1000000

typedef enum { P_ALL, P_DATA, P_MODEL } par; /* which group a layer's collectives use */

typedef struct {
  char *name;
  double cycles[4]; /* fwd, ig, wg, update */
  int comm[3];      /* ts_coll_kind or -1 (NONE) */
  double bytes[3];
  int custom; /* HYBRID_CUSTOMIZED: the layer's own parallelism (type index), -1 otherwise */
} layer;

static const char *const types[] = {"DATA",
                                    "MODEL",
                                    "HYBRID_DATA_MODEL",
                                    "HYBRID_MODEL_DATA",
                                    "HYBRID_CUSTOMIZED",
                                    "HYBRID_TRANSFORMER",
                                    "HYBRID_DLRM",
                                    "HYBRID_DLRM_ENHANCED",
                                    "MICRO"};
enum { T_DATA, T_MODEL, T_HDM, T_HMD, T_CUSTOM, T_TRANSFORMER, T_DLRM, T_DLRM_ENH, T_MICRO };

static int find_type(const char *s)
{
  for (int i = 0; i < (int)G_N_ELEMENTS(types); i++)
    if (strcmp(types[i], s) == 0)
      return i;
  return -1;
}

static int comm_kind(const char *s)
{
  if (strcmp(s, "NONE") == 0)
    return -1;
  if (strcmp(s, "ALLREDUCE") == 0)
    return TS_COLL_ALLREDUCE;
  if (strcmp(s, "ALLGATHER") == 0)
    return TS_COLL_ALLGATHER;
  if (strcmp(s, "REDUCESCATTER") == 0)
    return TS_COLL_REDUCESCATTER;
  if (strcmp(s, "ALLTOALL") == 0)
    return TS_COLL_ALLTOALL;
  return -2;
}

G_GNUC_PRINTF(4, 5)
#define ASTRASIM_MAX_LINE 4096 /* bytes */

static gboolean lerr(GError **error, const char *path, int line, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s:%d: %s", path, line, msg);
  return FALSE;
}

/* The innermost n chips as pieces (fastest dims first), the rest of the array as the other
 * axis's pieces. FALSE when n does not split the dimensions. */
static gboolean split_inner(const ts_topo *t, int n, ts_group_shape *in, ts_group_shape *out)
{
  memset(in, 0, sizeof *in);
  memset(out, 0, sizeof *out);
  int left = n;
  for (int d = 0; d < t->ndims; d++) {
    int s = t->dims[d].size;
    if (left >= s) {
      if (left % s != 0)
        return FALSE;
      in->p[in->npieces++] = (ts_piece){d, s, 1};
      left /= s;
    } else if (left > 1) {
      if (s % left != 0)
        return FALSE;
      in->p[in->npieces++] = (ts_piece){d, left, 1};
      out->p[out->npieces++] = (ts_piece){d, s / left, left};
      left = 1;
    } else {
      out->p[out->npieces++] = (ts_piece){d, s, 1};
    }
  }
  return left == 1;
}

ts_trace *ts_import_astrasim_bytes(const guint8 *data, gsize len, const char *path,
                                   const ts_topo *t, GError **error)
{
  if (len > 0 && memchr(data, '\0', len) != NULL) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s: NUL byte; expected an ASTRA-sim text workload", path);
    return NULL;
  }
  /* The blank-splitting regex reads UTF-8 only: a layer name with a 0xff byte split into
   * nothing, and the error was "layer 6 of 6 missing (file ends)". */
  const char *bad = NULL;
  if (!g_utf8_validate((const char *)data, (gssize)len, &bad)) {
    int bl = 1;
    for (const char *q = (const char *)data; q < bad; q++)
      bl += *q == '\n';
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "%s:%d: byte %" G_GSIZE_FORMAT " (0x%02x) is not UTF-8; expected an ASTRA-sim "
                "text workload",
                path, bl, (gsize)(bad - (const char *)data) + 1, (unsigned)(unsigned char)*bad);
    return NULL;
  }
  g_autofree char *text = g_strndup((const char *)data, len);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  int nl = (int)g_strv_length(lines), li = 0, line = 0;
  /* A workload line is a name and a dozen numbers; a longer one is not a workload, and its
   * first token was quoted whole in the error (a 3 MB line gave a 3 MB message). */
  for (int i = 0; i < nl; i++)
    if (strlen(lines[i]) > ASTRASIM_MAX_LINE) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "%s:%d: a line of %zu bytes; expected an ASTRA-sim workload line of at most %d "
                  "bytes",
                  path, i + 1, strlen(lines[i]), ASTRASIM_MAX_LINE);
      return NULL;
    }
    /* Next non-blank line, split on blanks and tabs. */
#define NEXT_LINE(toks)                                                                            \
  do {                                                                                             \
    g_strfreev(toks);                                                                              \
    toks = NULL;                                                                                   \
    while (li < nl) {                                                                              \
      line = ++li;                                                                                 \
      g_strchomp(lines[li - 1]);                                                                   \
      toks = g_regex_split_simple("[ \\t\\r]+", g_strstrip(lines[li - 1]), 0, 0);                  \
      if (toks != NULL && toks[0] != NULL && toks[0][0] != '\0')                                   \
        break;                                                                                     \
      g_strfreev(toks);                                                                            \
      toks = NULL;                                                                                 \
    }                                                                                              \
  } while (0)
  char **tok = NULL;
  ts_trace *tr = NULL;
  layer *ls = NULL;
  int n = 0;
  NEXT_LINE(tok);
  if (tok == NULL) {
    lerr(error, path, 1, "empty; expected an ASTRA-sim workload (DATA, MODEL, HYBRID_...)");
    goto fail;
  }
  int type = find_type(tok[0]);
  if (type < 0) {
    lerr(error, path, line,
         "parallelism '%s': expected DATA, MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, "
         "HYBRID_CUSTOMIZED, HYBRID_TRANSFORMER, HYBRID_DLRM or MICRO",
         tok[0]);
    goto fail;
  }
  int mp = 0; /* model-parallel group size (HYBRID_TRANSFORMER) */
  for (int i = 1; tok[i] != NULL; i++) {
    if (strcmp(tok[i], "model_parallel_NPU_group:") == 0 && tok[i + 1] != NULL) {
      gint64 v;
      if (!ts_parse_int(tok[i + 1], 1, 1 << 24, &v)) {
        lerr(error, path, line, "model_parallel_NPU_group: '%s': expected a whole number >= 1",
             tok[i + 1]);
        goto fail;
      }
      mp = (int)v;
      i++;
    } else if ((type == T_DLRM || type == T_DLRM_ENH) && i == 1) {
      /* the last bottom-MLP layer: ordering inside ASTRA-sim's DLRM; collectives span all */
    } else {
      lerr(error, path, line,
           "'%s': trainsim reads model_parallel_NPU_group only (checkpoints and other keys of "
           "this line are not modelled)",
           tok[i]);
      goto fail;
    }
  }
  if (type == T_TRANSFORMER && mp == 0) {
    lerr(error, path, line, "HYBRID_TRANSFORMER without model_parallel_NPU_group: N");
    goto fail;
  }
  NEXT_LINE(tok);
  gint64 nv = 0;
  if (tok == NULL || tok[1] != NULL || !ts_parse_int(tok[0], 1, MAX_LAYERS, &nv)) {
    lerr(error, path, line, "expected the number of layers (1 to %d) alone on the line",
         MAX_LAYERS);
    goto fail;
  }
  n = (int)nv;
  ls = g_new0(layer, n);
  for (int i = 0; i < n; i++) {
    NEXT_LINE(tok);
    if (tok == NULL) {
      lerr(error, path, line + 1, "layer %d of %d missing (file ends)", i + 1, n);
      goto fail;
    }
    int nt = (int)g_strv_length(tok);
    if (nt < 12 || nt > 13 || (type == T_CUSTOM) != (nt == 13)) {
      lerr(error, path, line,
           "%d field%s; expected %d: NAME RESERVED then compute, comm, bytes for forward, input "
           "gradient and weight gradient, then update cycles%s",
           nt, nt == 1 ? "" : "s", type == T_CUSTOM ? 13 : 12,
           type == T_CUSTOM ? ", then the layer's parallelism" : "");
      goto fail;
    }
    layer *l = &ls[i];
    l->name = g_strdup(tok[0]);
    static const int cyc_col[4] = {2, 5, 8, 11};
    static const char *const what[4] = {"forward cycles", "input-gradient cycles",
                                        "weight-gradient cycles", "update cycles"};
    for (int k = 0; k < 4; k++) {
      gint64 v;
      if (!ts_parse_int(tok[cyc_col[k]], 0, G_GINT64_CONSTANT(1) << 53, &v)) {
        lerr(error, path, line, "%s '%s': expected a whole number >= 0", what[k], tok[cyc_col[k]]);
        goto fail;
      }
      l->cycles[k] = (double)v;
    }
    for (int k = 0; k < 3; k++) {
      l->comm[k] = comm_kind(tok[3 + 3 * k]);
      if (l->comm[k] == -2) {
        lerr(error, path, line,
             "comm '%s': expected ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL "
             "or NONE",
             tok[3 + 3 * k]);
        goto fail;
      }
      gint64 v;
      if (!ts_parse_int(tok[4 + 3 * k], 0, G_GINT64_CONSTANT(1) << 53, &v)) {
        lerr(error, path, line, "comm bytes '%s': expected a whole number >= 0", tok[4 + 3 * k]);
        goto fail;
      }
      l->bytes[k] = (double)v;
    }
    l->custom = -1;
    if (type == T_CUSTOM) {
      l->custom = find_type(tok[12]);
      if (l->custom != T_DATA && l->custom != T_MODEL && l->custom != T_HDM && l->custom != T_HMD) {
        lerr(error, path, line,
             "layer parallelism '%s': expected DATA, MODEL, HYBRID_DATA_MODEL or "
             "HYBRID_MODEL_DATA",
             tok[12]);
        goto fail;
      }
    }
  }
  NEXT_LINE(tok);
  if (tok != NULL) {
    lerr(error, path, line, "'%s' after the %d layers the file declares; expected nothing", tok[0],
         n);
    goto fail;
  }

  /* Axes: "mp" (model) and "dp" (data) on the topology's dimensions. */
  ts_group_shape mshape, dshape;
  gboolean hybrid = type == T_HDM || type == T_HMD || type == T_CUSTOM || type == T_TRANSFORMER;
  if (hybrid) {
    int inner = type == T_TRANSFORMER ? mp : t->dims[0].size;
    if (!split_inner(t, inner, &mshape, &dshape)) {
      lerr(error, path, 1,
           "model_parallel_NPU_group: %d does not split topology %s's dimensions; expected a "
           "divisor or multiple of the fastest dimensions",
           inner, t->path ? t->path : t->name);
      goto fail;
    }
    if (type == T_HDM || type == T_CUSTOM) {
      /* data inside the first dimension, model across the others */
      ts_group_shape tmp = mshape;
      mshape = dshape;
      dshape = tmp;
    }
  } else {
    split_inner(t, t->nchips, &dshape, &mshape);
  }
  tr = ts_trace_new(t);
  int am = ts_trace_add_axis(tr, "mp", ts_group_size(&mshape), TRUE, &mshape);
  int ad = ts_trace_add_axis(tr, "dp", ts_group_size(&dshape), TRUE, &dshape);
  int both[2] = {am, ad};
  int g_model = ts_trace_group(tr, &am, 1), g_data = ts_trace_group(tr, &ad, 1);
  int g_all = ts_trace_group(tr, both, 2);
  ts_trace_set_programs(tr, 1);
  /* Which group each phase's collective uses, per layer. */
  int phase_group[3];
  GArray *wg = g_array_new(FALSE, FALSE, sizeof(int));
  int prev = -1;
  char lbl[512];
#define EMIT(opv, deps, nd) ts_trace_append(tr, 0, &(opv), (deps), (nd))
  for (int pass = 0; pass < 2; pass++) {
    int i0 = pass == 0 ? 0 : n - 1, step = pass == 0 ? 1 : -1;
    for (int i = i0; i >= 0 && i < n; i += step) {
      const layer *l = &ls[i];
      int lt = type == T_CUSTOM ? l->custom : type;
      switch (lt) {
      case T_DATA:
        phase_group[0] = phase_group[1] = g_all;
        phase_group[2] = g_all;
        break;
      case T_MODEL:
        phase_group[0] = phase_group[1] = phase_group[2] = g_all;
        break;
      case T_HDM:
      case T_HMD:
      case T_TRANSFORMER:
        phase_group[0] = phase_group[1] = g_model;
        phase_group[2] = g_data;
        break;
      default:
        phase_group[0] = phase_group[1] = phase_group[2] = g_all;
        break;
      }
      /* Phases of this pass: forward (0); backward input gradient (1) then weight gradient (2). */
      int ph[2] = {pass == 0 ? 0 : 1, pass == 0 ? -1 : 2};
      for (int q = 0; q < 2; q++) {
        int k = ph[q];
        if (k < 0)
          continue;
        if (k == 1 && i == 0)
          continue; /* the first layer computes no input gradient */
        if (type == T_MICRO && k != 2)
          continue; /* a microbenchmark is its collectives alone */
        static const char *const pname[3] = {"fwd", "bwd input grad", "bwd weight grad"};
        ts_op c = {0};
        c.kind = type == T_MICRO ? TS_OP_WAIT : TS_OP_DELAY;
        c.cat = k == 0 ? TS_CAT_FWD : TS_CAT_BWD;
        c.seconds = l->cycles[k] * CYCLE_S;
        c.t_layer = i + 1;
        c.t_phase = k == 0 ? TS_PHASE_FWD : TS_PHASE_BWD;
        c.t_role = TS_ROLE_COMPUTE;
        c.axis = c.group = -1;
        g_snprintf(lbl, sizeof lbl, "%s %s", l->name, pname[k]);
        c.label = ts_trace_label(tr, lbl);
        prev = EMIT(c, prev >= 0 ? &prev : NULL, prev >= 0 ? 1 : 0);
        if (l->comm[k] < 0 || l->bytes[k] <= 0)
          continue;
        ts_op m = {0};
        m.kind = TS_OP_COLL;
        m.coll = (ts_coll_kind)l->comm[k];
        m.bytes = l->bytes[k];
        m.group = phase_group[k];
        m.axis = -1;
        m.t_layer = i + 1;
        g_snprintf(lbl, sizeof lbl, "%s %s %s", l->name, pname[k], ts_coll_kind_name(m.coll));
        m.label = ts_trace_label(tr, lbl);
        if (k == 2) {
          /* weight gradients: synchronised beside the rest of the backward pass */
          m.stream = 1;
          m.cat = TS_CAT_COMM_DP;
          m.t_phase = TS_PHASE_SYNC;
          m.t_role = TS_ROLE_GRAD;
          int id = EMIT(m, &prev, 1);
          if (l->cycles[3] > 0) {
            /* the layer's weight update, once its gradients are synchronised */
            ts_op u = {0};
            u.kind = TS_OP_DELAY;
            u.cat = TS_CAT_OPTIMIZER;
            u.stream = 1;
            u.seconds = l->cycles[3] * CYCLE_S;
            u.axis = u.group = -1;
            u.t_layer = i + 1;
            u.t_phase = TS_PHASE_OPTIMIZER;
            u.t_role = TS_ROLE_OPTIMIZER;
            g_snprintf(lbl, sizeof lbl, "%s weight update", l->name);
            u.label = ts_trace_label(tr, lbl);
            id = EMIT(u, &id, 1);
          }
          g_array_append_val(wg, id);
        } else {
          m.stream = 0;
          m.cat = TS_CAT_COMM_TP;
          m.t_phase = k == 0 ? TS_PHASE_FWD : TS_PHASE_BWD;
          m.t_role = TS_ROLE_TP;
          prev = EMIT(m, &prev, 1);
        }
      }
    }
  }
  /* Weight updates once each layer's gradients are synchronised, then the step ends. */
  ts_op end = {0};
  end.kind = TS_OP_WAIT;
  end.cat = TS_CAT_OTHER;
  end.axis = end.group = -1;
  end.t_role = TS_ROLE_MARKER;
  end.label = ts_trace_label(tr, "step end");
  g_array_append_val(wg, prev);
  EMIT(end, (const int *)wg->data, (int)wg->len);
  g_array_unref(wg);
#undef EMIT
  {
    g_autofree char *base = g_path_get_basename(path);
    tr->meta.model = g_strdup(base);
    tr->meta.split = g_strdup_printf("(astrasim %s)", types[type]);
    tr->meta.topology = g_strdup(t->name);
    tr->meta.producer = g_strdup_printf("trainsim %s import --from astrasim", TS_VERSION);
  }
  (void)g_data;
  g_strfreev(tok);
  for (int i = 0; i < n; i++)
    g_free(ls[i].name);
  g_free(ls);
  if (!ts_trace_check(tr, t, error)) {
    g_prefix_error(error, "%s: ", path);
    ts_trace_free(tr);
    return NULL;
  }
  return tr;
fail:
  g_strfreev(tok);
  if (ls != NULL)
    for (int i = 0; i < n; i++)
      g_free(ls[i].name);
  g_free(ls);
  ts_trace_free(tr);
  return NULL;
#undef NEXT_LINE
}
