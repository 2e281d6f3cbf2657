/* commands — the ddpipe subcommands. Each returns the process exit code. */
#ifndef DDP_CLI_COMMANDS_H
#define DDP_CLI_COMMANDS_H
int cmd_eval(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_tap(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
#endif
