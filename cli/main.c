/* ddpipe — the command line: run a whole job locally, tap a job's events. */
#include "cli/commands.h"
#include "cli/slurm.h"
#include "common/version.h"
#include "common/zsecurity.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ddpipe COMMAND [options]\n"
            "  eval   evaluate a classifier with W worker processes, exact metrics\n"
            "  train  train a classifier data-parallel over W worker processes\n"
            "  tap    print a job's live events (ddpipe tap ENDPOINT [--json])\n"
            "  keygen write the CURVE certificates of a cluster (ddpipe keygen DIR)\n"
            "  models list the architectures: parameters, input, default transform\n"
            "  completion bash  print the bash completion script\n"
            "eval, train and tap take --curve-dir DIR (CURVE on every tcp:// socket, passed on\n"
            "to every daemon; default $DDPIPE_CURVE_DIR) and --insecure (allow a non-loopback\n"
            "tcp:// listen without CURVE).\n"
            "Run 'ddpipe COMMAND --help' for the options of a command, 'ddpipe --version'\n"
            "for the version; man ddpipe-COMMAND has the same as a page.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "keygen") == 0)
        return cmd_keygen(argc - 1, argv + 1);
    if (strcmp(argv[1], "models") == 0)
        return cmd_models(argc - 1, argv + 1);
    if (strcmp(argv[1], "completion") == 0)
        return cmd_completion(argc - 1, argv + 1);
    if (strcmp(argv[1], "__slurm-task") == 0)   /* each srun task of --launcher slurm */
        return cmd_slurm_task(argc - 1, argv + 1);
    if (strcmp(argv[1], "__docs") == 0)   /* the build's man pages (cli/docs.c) */
        return cmd_docs(argc - 1, argv + 1);
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        version_print(stdout, "ddpipe");
        return 0;
    }
    /* the commands that open sockets: --curve-dir/--insecure, one parser */
    if ((strcmp(argv[1], "eval") == 0 || strcmp(argv[1], "train") == 0 ||
         strcmp(argv[1], "tap") == 0) && zs_security_args(&argc, argv) < 0)
        return 2;
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
