/* trainsim: the program. Subcommands dispatch to sim/cmd_*.c. */
#include "ts_util.h"
int main(void) { return 0; }
