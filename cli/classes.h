/* classes — `ddpipe eval`'s check of the dataset's classes against the
 * model's outputs before anything starts: with --classes the map is read
 * and every class folder must be in it; without it the model must have as
 * many outputs as the dataset has class folders, else the console says
 * what to pass. */
#ifndef DDP_CLI_CLASSES_H
#define DDP_CLI_CLASSES_H

#include <stdbool.h>

typedef struct {
    const char *cmd;            /* "ddpipe eval" */
    const char *data, *val;     /* val NULL: none */
    const char *model, *weights;/* weights NULL: training from scratch */
    long num_classes;           /* --num-classes, 0 none */
    const char *classes;        /* --classes, NULL none */
    bool strict;                /* no map: outputs must equal the class folders (eval) */
} dd_classes_t;

/* *outputs: the model's output count (--num-classes, else the rows of the
 * weights' head, else without weights the architecture's default head),
 * 0 when the weights do not say (gpud reports it then). 0, or -1 after a
 * one-line reason on stderr (exit code 2). */
int dd_check_classes(const dd_classes_t *c, long *outputs);

#endif
