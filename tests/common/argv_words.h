/* argv_words — an argv from a line of words separated by spaces, for the
 * option-table tests: argv[0] is the program, the words point into a
 * static copy of the line (valid until the next call). Returns argc. */
#ifndef DDP_TEST_ARGV_WORDS_H
#define DDP_TEST_ARGV_WORDS_H

#include <stdio.h>
#include <string.h>

static inline int argv_words(const char *program, const char *words, char **argv, int max)
{
    static char line[2048];
    int argc = 0;
    snprintf(line, sizeof line, "%s", words);
    argv[argc++] = (char *)program;
    for (char *save = NULL, *w = strtok_r(line, " ", &save); w && argc < max - 1;
         w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    return argc;
}
#endif
