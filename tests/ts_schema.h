/* A validator for the subset of JSON Schema (draft 2020-12) that docs/schemas/ uses: type,
 * properties, required, items, additionalProperties (a schema), const, enum, minimum. Written
 * here because Debian 12 has no C JSON Schema library; json-glib parses both documents.
 * "integer" means the text had no fraction or exponent (json-glib parses "2.0" as a double),
 * so the check also enforces that byte counts are written as exact integers. */
#ifndef TS_SCHEMA_H
#define TS_SCHEMA_H

#include <glib.h>
#include <json-glib/json-glib.h>
#include <string.h>

static inline gboolean ts_schema_type_ok(JsonNode *n, const char *type)
{
  JsonNodeType t = JSON_NODE_TYPE(n);
  GType vt = t == JSON_NODE_VALUE ? json_node_get_value_type(n) : G_TYPE_INVALID;
  if (strcmp(type, "object") == 0)
    return t == JSON_NODE_OBJECT;
  if (strcmp(type, "array") == 0)
    return t == JSON_NODE_ARRAY;
  if (strcmp(type, "null") == 0)
    return t == JSON_NODE_NULL;
  if (strcmp(type, "string") == 0)
    return vt == G_TYPE_STRING;
  if (strcmp(type, "boolean") == 0)
    return vt == G_TYPE_BOOLEAN;
  if (strcmp(type, "integer") == 0)
    return vt == G_TYPE_INT64;
  if (strcmp(type, "number") == 0)
    return vt == G_TYPE_INT64 || vt == G_TYPE_DOUBLE;
  return FALSE;
}

static inline double ts_schema_num(JsonNode *n)
{
  return json_node_get_value_type(n) == G_TYPE_INT64 ? (double)json_node_get_int(n)
                                                     : json_node_get_double(n);
}

static inline gboolean ts_schema_equal(JsonNode *a, JsonNode *b)
{
  if (JSON_NODE_TYPE(a) != JSON_NODE_VALUE || JSON_NODE_TYPE(b) != JSON_NODE_VALUE)
    return JSON_NODE_TYPE(a) == JSON_NODE_NULL && JSON_NODE_TYPE(b) == JSON_NODE_NULL;
  GType ta = json_node_get_value_type(a), tb = json_node_get_value_type(b);
  if (ta == G_TYPE_STRING || tb == G_TYPE_STRING)
    return ta == tb && strcmp(json_node_get_string(a), json_node_get_string(b)) == 0;
  if (ta == G_TYPE_BOOLEAN || tb == G_TYPE_BOOLEAN)
    return ta == tb && json_node_get_boolean(a) == json_node_get_boolean(b);
  return ts_schema_num(a) == ts_schema_num(b);
}

/** Validates node against schema; FALSE with the first violation (a JSON path) in *why. */
static inline gboolean ts_schema_check(JsonNode *node, JsonObject *schema, const char *path,
                                       char **why)
{
  if (json_object_has_member(schema, "type")) {
    /* One type, or a list of them ("type": ["integer", "null"]). */
    JsonNode *tn = json_object_get_member(schema, "type");
    gboolean ok = FALSE;
    if (JSON_NODE_TYPE(tn) == JSON_NODE_ARRAY) {
      JsonArray *ta = json_node_get_array(tn);
      for (guint i = 0; i < json_array_get_length(ta) && !ok; i++)
        ok = ts_schema_type_ok(node, json_array_get_string_element(ta, i));
    } else
      ok = ts_schema_type_ok(node, json_node_get_string(tn));
    if (!ok) {
      *why = g_strdup_printf("%s: not of the type the schema gives", path);
      return FALSE;
    }
  }
  if (json_object_has_member(schema, "const") &&
      !ts_schema_equal(node, json_object_get_member(schema, "const"))) {
    *why = g_strdup_printf("%s: not the constant the schema gives", path);
    return FALSE;
  }
  if (json_object_has_member(schema, "enum")) {
    JsonArray *e = json_object_get_array_member(schema, "enum");
    gboolean found = FALSE;
    for (guint i = 0; i < json_array_get_length(e) && !found; i++)
      found = ts_schema_equal(node, json_array_get_element(e, i));
    if (!found) {
      *why = g_strdup_printf("%s: not one of the enum values", path);
      return FALSE;
    }
  }
  if (json_object_has_member(schema, "minimum") && JSON_NODE_TYPE(node) == JSON_NODE_VALUE &&
      json_node_get_value_type(node) != G_TYPE_STRING &&
      ts_schema_num(node) < json_object_get_double_member(schema, "minimum")) {
    *why = g_strdup_printf("%s: below the minimum", path);
    return FALSE;
  }
  if (JSON_NODE_TYPE(node) == JSON_NODE_OBJECT) {
    JsonObject *o = json_node_get_object(node);
    if (json_object_has_member(schema, "required")) {
      JsonArray *req = json_object_get_array_member(schema, "required");
      for (guint i = 0; i < json_array_get_length(req); i++) {
        const char *k = json_array_get_string_element(req, i);
        if (!json_object_has_member(o, k)) {
          *why = g_strdup_printf("%s: missing required member '%s'", path, k);
          return FALSE;
        }
      }
    }
    JsonObject *props = json_object_has_member(schema, "properties")
                            ? json_object_get_object_member(schema, "properties")
                            : NULL;
    JsonObject *extra = json_object_has_member(schema, "additionalProperties")
                            ? json_object_get_object_member(schema, "additionalProperties")
                            : NULL;
    g_autoptr(GList) members = json_object_get_members(o);
    for (GList *m = members; m != NULL; m = m->next) {
      const char *k = m->data;
      JsonObject *sub = props != NULL && json_object_has_member(props, k)
                            ? json_object_get_object_member(props, k)
                            : extra;
      if (sub == NULL)
        continue;
      g_autofree char *p = g_strdup_printf("%s.%s", path, k);
      if (!ts_schema_check(json_object_get_member(o, k), sub, p, why))
        return FALSE;
    }
  }
  if (JSON_NODE_TYPE(node) == JSON_NODE_ARRAY && json_object_has_member(schema, "items")) {
    JsonArray *a = json_node_get_array(node);
    JsonObject *items = json_object_get_object_member(schema, "items");
    for (guint i = 0; i < json_array_get_length(a); i++) {
      g_autofree char *p = g_strdup_printf("%s[%u]", path, i);
      if (!ts_schema_check(json_array_get_element(a, i), items, p, why))
        return FALSE;
    }
  }
  return TRUE;
}

#endif
