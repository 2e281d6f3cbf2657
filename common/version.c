#include "common/version.h"

#include "version_gen.h"

#include <string.h>

const char *version_string(void) { return DDPIPE_VERSION; }

const char *version_git(void) { return DDPIPE_GIT_DESCRIBE; }

void version_print(FILE *f, const char *program)
{
    const char *git = version_git();
    /* "ddpipe eval" is ddpipe itself; a daemon names the package it is from */
    int ours = strncmp(program, "ddpipe", 6) == 0 && (program[6] == '\0' || program[6] == ' ');
    fprintf(f, "%s%s %s%s%s%s\n", program, ours ? "" : " (ddpipe)",
            version_string(), git[0] ? " (git " : "", git, git[0] ? ")" : "");
}
