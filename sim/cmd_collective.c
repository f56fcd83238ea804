/* cmd_collective: the `trainsim collective` subcommand (not built yet). */
#include "ts_cmd.h"
#include "ts_util.h"

#include <stdio.h>

int ts_cmd_collective(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  fprintf(stderr, "trainsim collective: not implemented yet\n");
  return TS_EXIT_INPUT;
}
