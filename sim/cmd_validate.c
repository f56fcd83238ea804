/* cmd_validate: the `trainsim validate` subcommand (not built yet). */
#include "ts_cmd.h"
#include "ts_util.h"

#include <stdio.h>

int ts_cmd_validate(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  fprintf(stderr, "trainsim validate: not implemented yet\n");
  return TS_EXIT_INPUT;
}
