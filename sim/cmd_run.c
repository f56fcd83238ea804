/* cmd_run: the `trainsim run` subcommand (not built yet). */
#include "ts_cmd.h"
#include "ts_util.h"

#include <stdio.h>

int ts_cmd_run(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  fprintf(stderr, "trainsim run: not implemented yet\n");
  return TS_EXIT_INPUT;
}
