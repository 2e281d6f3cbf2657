/* classes — `ddpipe eval`'s check of the dataset's classes against the
 * model's outputs before anything starts: with --classes the map is read
 * and every class folder must be in it; without it the model must have as
 * many outputs as the dataset has class folders, else the console says
 * what to pass. */
#ifndef DDP_CLI_CLASSES_H
#define DDP_CLI_CLASSES_H

/* *outputs: the model's output count (--num-classes, else the rows of the
 * weights' head), 0 when the weights do not say (gpud reports it then).
 * 0, or -1 after a one-line reason on stderr (exit code 2). */
int dd_check_classes(const char *cmd, const char *data, const char *model, const char *weights,
                     long num_classes, const char *classes, long *outputs);

#endif
