/* trainsim: the program. Dispatches to the subcommands declared in ts_cmd.h. */
#include "ts_cmd.h"
#include "ts_progress.h"
#include "ts_util.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>

static const ts_cmd commands[] = {
    {"run", ts_cmd_run, "predict step time, breakdown and memory of one or more splits"},
    {"collective", ts_cmd_collective, "predict the time of one collective over a size range"},
    {"trace", ts_cmd_trace, "write the trace (per-rank op programs) of a model and split"},
    {"model", ts_cmd_model, "list a model's layers, costs per sample and layer graph"},
    {"replay", ts_cmd_replay, "replay a trace file on a topology"},
    {"import", ts_cmd_import, "read a Chakra or ASTRA-sim trace as a trainsim trace"},
    {"export", ts_cmd_export, "write a trace as SimGrid time-independent or Chakra traces"},
    {"platform", ts_cmd_platform, "write the SimGrid platform XML of a topology"},
    {"validate", ts_cmd_validate, "execute splits on real numeric kernels and compare gradients"},
    {"calibrate", ts_cmd_calibrate, "time real kernels on this host and fit a chip profile"},
    {"sweep", ts_cmd_sweep,
     "predict every combination of topologies, what-ifs, batches and splits"},
    {"search", ts_cmd_search, "rank the splits that fit in memory; why the other families lost"},
    {"plot", ts_cmd_plot, "gnuplot figures of sweeps, runs and timelines (PNG and SVG)"},
    {"merge", ts_cmd_merge, "combine the shards of a sweep (sweep --shard i/n)"},
    {"check", ts_cmd_check, "re-predict regression scenarios and compare with golden step times"},
};

static void usage(FILE *f)
{
  fprintf(f, "Usage: trainsim COMMAND [OPTION...]\n\n"
             "Discrete-event simulator of distributed deep-learning training.\n\nCommands:\n");
  for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
    fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fprintf(f,
          "\n`trainsim COMMAND --help` (or `trainsim help COMMAND`) shows a command's options\n"
          "(with units). `trainsim --version` prints the version.\n\n"
          "Environment:\n"
          "  TRAINSIM_DATA_DIR    folder searched first for models/, topologies/ and plots/\n"
          "  TRAINSIM_PROGRESS_S  seconds of quiet before a long job's progress shows on\n"
          "                       stderr, and between its lines in a log (default 2;\n"
          "                       seconds in [0, 3600], anything else is refused)\n"
          "  TRAINSIM_MAX_MEMORY  memory a simulation's trace may take (a size, e.g. 16GiB;\n"
          "                       default: the available memory, shared by a search's or\n"
          "                       sweep's workers); a larger one is refused with its estimate\n");
}

int main(int argc, char **argv)
{
  /* Numbers are parsed and printed with g_ascii_* functions, so the locale cannot change
   * them; set it only for messages. */
  setlocale(LC_ALL, "");
  setlocale(LC_NUMERIC, "C");
  if (argc < 2) {
    fprintf(stderr, "trainsim: missing command; expected one of:");
    for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
      fprintf(stderr, " %s", commands[i].name);
    fprintf(stderr, " (see trainsim --help)\n");
    return TS_EXIT_INPUT;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      (strcmp(argv[1], "help") == 0 && (argc == 2 || strcmp(argv[2], "help") == 0))) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "help") == 0) {
    /* `trainsim help CMD` is `trainsim CMD --help`, as git and GNU tools with commands do. */
    for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
      if (strcmp(argv[2], commands[i].name) == 0) {
        char *args[] = {argv[2], "--help", NULL};
        return commands[i].fn(2, args);
      }
    fprintf(stderr, "trainsim help: unknown command '%s'; expected one of:", argv[2]);
    for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
      fprintf(stderr, " %s", commands[i].name);
    fprintf(stderr, "\n");
    return TS_EXIT_INPUT;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("trainsim %s\n", TS_VERSION);
    return 0;
  }
  /* An environment variable is input like an option: TRAINSIM_PROGRESS_S=5s (or 1e9) was
   * silently replaced by the 2 s default, so the user's setting seemed to do nothing. It only
   * shapes stderr, but a typo in it is still a typo: refused, as a bad --option is. */
  g_autoptr(GError) env_error = NULL;
  if (!ts_progress_env_check(&env_error)) {
    fprintf(stderr, "trainsim: %s\n", env_error->message);
    return TS_EXIT_INPUT;
  }
  double max_memory_bytes;
  if (!ts_max_memory_env(&max_memory_bytes, &env_error)) {
    fprintf(stderr, "trainsim: %s\n", env_error->message);
    return TS_EXIT_INPUT;
  }
  for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
    if (strcmp(argv[1], commands[i].name) == 0) {
      int status = commands[i].fn(argc - 1, argv + 1);
      if (status != 0)
        ts_cmd_remove_created_dir();
      return status;
    }
  fprintf(stderr, "trainsim: unknown command '%s'; expected one of:", argv[1]);
  for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
    fprintf(stderr, " %s", commands[i].name);
  fprintf(stderr, "\n");
  return TS_EXIT_INPUT;
}
