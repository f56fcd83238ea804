/* cmd_replay: the `trainsim replay` subcommand (not built yet). */
#include "ts_cmd.h"
#include "ts_util.h"

#include <stdio.h>

int ts_cmd_replay(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  fprintf(stderr, "trainsim replay: not implemented yet\n");
  return TS_EXIT_INPUT;
}
