/* commands — the ddpipe subcommands. Each returns the process exit code. */
#ifndef DDP_CLI_COMMANDS_H
#define DDP_CLI_COMMANDS_H
int cmd_eval(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_tap(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_models(int argc, char **argv);
/* `ddpipe completion bash`, and the build's man pages (cli/docs.c) */
int cmd_completion(int argc, char **argv);
int cmd_docs(int argc, char **argv);

/* The commands' option tables (each command's file), for cli/docs.c. */
#include "common/options.h"
extern const option_table_t tap_options_table;
extern const option_table_t keygen_options_table;
extern const option_table_t models_options_table;
#endif
