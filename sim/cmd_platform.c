/* cmd_platform: the `trainsim platform` subcommand (not built yet). */
#include "ts_cmd.h"
#include "ts_util.h"

#include <stdio.h>

int ts_cmd_platform(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  fprintf(stderr, "trainsim platform: not implemented yet\n");
  return TS_EXIT_INPUT;
}
