/* ddpipe — the command line: run a whole job locally, tap a job's events. */
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ddpipe COMMAND [options]\n"
            "  eval   evaluate a classifier with W worker processes, exact metrics\n"
            "  train  train a classifier data-parallel over W worker processes\n"
            "  tap    print a job's live events (ddpipe tap ENDPOINT [--json])\n"
            "Run 'ddpipe COMMAND --help' for the options of a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "eval") == 0)
        return cmd_eval(argc - 1, argv + 1);
    if (strcmp(argv[1], "train") == 0)
        return cmd_train(argc - 1, argv + 1);
    if (strcmp(argv[1], "tap") == 0)
        return cmd_tap(argc - 1, argv + 1);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "ddpipe: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
