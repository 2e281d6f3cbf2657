/* version — what every ddpipe program answers to --version.
 *
 * One source: project(VERSION) in the root CMakeLists.txt, plus `git
 * describe` of the source tree when it is a git checkout (both written into
 * version_gen.h at build time by cmake/version.cmake). */
#ifndef DDP_VERSION_H
#define DDP_VERSION_H

#include <stdio.h>

/* "0.1.0" */
const char *version_string(void);
/* "v0.1.0-12-gabc1234-dirty", or "" outside a git checkout. */
const char *version_git(void);
/* "PROGRAM 0.1.0 (git DESCRIBE)" for ddpipe and "ddpipe CMD", "PROGRAM (ddpipe) 0.1.0 (git
 * DESCRIBE)" for the others (GNU style), and a newline. */
void version_print(FILE *f, const char *program);

#endif
