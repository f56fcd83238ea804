/* cmd_calibrate: the `trainsim calibrate` subcommand (not built yet). */
#include "ts_cmd.h"
#include "ts_util.h"

#include <stdio.h>

int ts_cmd_calibrate(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  fprintf(stderr, "trainsim calibrate: not implemented yet\n");
  return TS_EXIT_INPUT;
}
