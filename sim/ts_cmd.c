/* ts_cmd: shared plumbing of the subcommands (option parsing, one-line errors). */
#include "ts_cmd.h"
#include "ts_util.h"

#include <stdio.h>

int ts_cmd_fail(const char *cmd, const GError *error)
{
  fprintf(stderr, "trainsim %s: %s\n", cmd, error != NULL ? error->message : "failed");
  return error != NULL && error->domain == TS_ERROR && error->code == TS_ERROR_BACKEND ? 1
                                                                                       : TS_EXIT_INPUT;
}

gboolean ts_cmd_parse(const char *cmd, const char *params, const char *summary,
                      const char *description, const GOptionEntry *entries, int *argc,
                      char ***argv, GError **error)
{
  g_autoptr(GOptionContext) ctx = g_option_context_new(params);
  g_autofree char *prog = g_strdup_printf("trainsim %s", cmd);
  g_set_prgname(prog);
  g_option_context_set_summary(ctx, summary);
  if (description != NULL)
    g_option_context_set_description(ctx, description);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_autoptr(GError) local = NULL;
  if (!g_option_context_parse(ctx, argc, argv, &local)) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s (see `trainsim %s --help`)", local->message,
                cmd);
    return FALSE;
  }
  return TRUE;
}
