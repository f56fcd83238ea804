/* cmd_platform: `trainsim platform`, the SimGrid platform XML of a topology, for SimGrid's own
 * tools (smpirun, simgrid examples) or for inspecting what the simgrid backend simulates. */
#include "ts_cmd.h"
#include "ts_platform.h"
#include "ts_util.h"

#include <stdio.h>
#include <string.h>

/* Parses the --chips-per-port items "DIM=K" into opts. */
static gboolean parse_ports(const ts_topo *t, char **items, ts_platform_opts *opts, GError **error)
{
  for (int i = 0; items != NULL && items[i] != NULL; i++) {
    const char *eq = strchr(items[i], '=');
    gint64 k = 0;
    g_autofree char *dim = eq != NULL ? g_strndup(items[i], (gsize)(eq - items[i])) : NULL;
    int d = dim != NULL ? ts_topo_dim_index(t, dim) : -1;
    if (d < 0 || !ts_parse_int(eq + 1, 1, 65536, &k)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                  "--chips-per-port '%s': expected DIM=K with DIM a dimension of %s and K a "
                  "whole number >= 1",
                  items[i], t->path != NULL ? t->path : t->name);
      return FALSE;
    }
    opts->chips_per_port[d] = (int)k;
  }
  return TRUE;
}

int ts_cmd_platform(int argc, char **argv)
{
  g_autofree char *topology = NULL, *output = NULL, *routing = NULL;
  g_auto(GStrv) ports = NULL;
  const GOptionEntry entries[] = {
      {"topology", 't', 0, G_OPTION_ARG_STRING, &topology,
       "topology name (topologies/NAME.ini) or .ini path (required)", "T"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
       "where to write the XML ('-' = stdout, the default)", "FILE"},
      {"routing", 0, 0, G_OPTION_ARG_STRING, &routing,
       "auto (default), torus, full, dijkstra or floyd", "R"},
      {"chips-per-port", 0, 0, G_OPTION_ARG_STRING_ARRAY, &ports,
       "switch dimension DIM: K consecutive chips of the first dimension share one port (NIC); "
       "repeatable",
       "DIM=K"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GError) error = NULL;
  if (!ts_cmd_parse(
          "platform", "", "Writes the SimGrid platform (XML, version 4.1) of a topology.",
          "Chip k is host c<k>. Routes follow trainsim's dimension-order paths: exactly with\n"
          "--routing full (every route written out) and with torus on uniform tori except ring\n"
          "ties; dijkstra and floyd write adjacent routes only. auto picks torus for uniform\n"
          "tori, full up to 256 chips, dijkstra above.\n\n"
          "Example:\n"
          "  trainsim platform --topology tpu-v3-8x8 -o v3.xml\n"
          "  smpirun -platform v3.xml ... --cfg=network/model:CM02 "
          "--cfg=network/crosstraffic:0 --cfg=network/TCP-gamma:0",
          entries, &argc, &argv, &error))
    return ts_cmd_fail("platform", error);
  if (argc > 1) {
    ts_cmd_unexpected("platform", argv[1], &error);
    return ts_cmd_fail("platform", error);
  }
  if (topology == NULL) {
    g_set_error(&error, TS_ERROR, TS_ERROR_INPUT, "--topology is required");
    return ts_cmd_fail("platform", error);
  }
  int r = routing != NULL ? ts_platform_routing_parse(routing) : TS_PLATFORM_AUTO;
  if (r < 0) {
    g_set_error(&error, TS_ERROR, TS_ERROR_INPUT,
                "--routing '%s': expected auto, torus, full, dijkstra or floyd", routing);
    return ts_cmd_fail("platform", error);
  }
  g_autofree char *path = ts_resolve_data_file(topology, "topologies", &error);
  if (path == NULL)
    return ts_cmd_fail("platform", error);
  g_autoptr(ts_topo) t = ts_topo_load(path, &error);
  if (t == NULL)
    return ts_cmd_fail("platform", error);
  ts_platform_opts opts = {{0}};
  if (!parse_ports(t, ports, &opts, &error))
    return ts_cmd_fail("platform", error);
  g_autoptr(ts_platform) p = ts_platform_new(t, &opts, &error);
  if (p == NULL)
    return ts_cmd_fail("platform", error);
  g_autofree char *xml = ts_platform_xml(p, (ts_platform_routing)r, &error);
  if (xml == NULL || !ts_write_file_atomic(output != NULL ? output : "-", xml, strlen(xml), &error))
    return ts_cmd_fail("platform", error);
  if (output != NULL && strcmp(output, "-") != 0)
    fprintf(stderr, "trainsim platform: wrote %s\n", output);
  return 0;
}
