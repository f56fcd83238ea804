/* cmd_trace: the `trainsim trace` subcommand (not built yet). */
#include "ts_cmd.h"
#include "ts_util.h"

#include <stdio.h>

int ts_cmd_trace(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  fprintf(stderr, "trainsim trace: not implemented yet\n");
  return TS_EXIT_INPUT;
}
