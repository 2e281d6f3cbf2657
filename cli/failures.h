/* failures — why the job's daemons ended, said on the console in the CLI's
 * terms: the reason a failed child gave (the last ERROR line of its log,
 * common/log.h's "TIME NAME[RANK] ERROR MESSAGE"), with the daemon's own
 * flags it names replaced by the ddpipe flags that set them, and the
 * reasons of many workers grouped so each is said once with the ranks that
 * gave it (a gang of W workers failing the same way is one line, not W). */
#ifndef DDP_CLI_FAILURES_H
#define DDP_CLI_FAILURES_H
#include "cli/launch.h"

#include <stdbool.h>
#include <stddef.h>

/* A daemon's flag and the ddpipe flag that sets it (cli/children.c); a
 * table ends with {NULL, NULL}. Flags of the same name need no row. */
typedef struct {
    const char *daemon, *cli;
} flag_alias_t;

/* IN with every whole flag that names a row's daemon flag ("--backend",
 * "--backend=cpu"; not "--backend-x") replaced by its CLI flag. */
void failure_translate(const char *in, const flag_alias_t *aliases, char *out, size_t len);

/* Why exited child c failed, translated: the last ERROR line among its
 * log's last 8 lines (of its last 64 KiB: a daemon exits right after the
 * error that ends it), else its last line there that is not a log line (a
 * message printed before logging started: a bad option, a failed exec),
 * else how it ended ("killed by signal 9", "exit 3 without an error ...").
 * A signal is the reason whatever the log says (an OOM kill). 1 when the
 * log said why, 0 when buf only says how it ended. */
int failure_reason(const child_t *c, const flag_alias_t *aliases, char *buf, size_t len);

#define FAILURE_GROUPS 64   /* distinct reasons kept; more are only counted */
#define FAILURE_RANKS 8     /* ranks named per reason; more are only counted */

typedef struct {
    char *reason;
    char first[64];         /* the child that gave it first ("gpud.0") */
    char log[1024];         /* the log of its lowest rank */
    long rank[FAILURE_RANKS];   /* its lowest ranks, ascending (-1: a child without one) */
    int nrank;
    long n;                 /* children that gave it */
    bool said;              /* printed on the console already */
} failure_group_t;

typedef struct {
    failure_group_t g[FAILURE_GROUPS];
    int ngroups;
    long n;                 /* children added */
    long unkept;            /* of them, with a reason past FAILURE_GROUPS */
} failures_t;

/* Adds child NAME ("gpud.3": rank 3) that failed with REASON; the group
 * of that reason (NULL when past FAILURE_GROUPS or out of memory). */
failure_group_t *failures_add(failures_t *f, const char *name, const char *log,
                              const char *reason);
/* How many of the children added gave a reason not printed yet. */
long failures_unsaid(const failures_t *f);
/* Prints the reasons not said yet under HEAD ("every gpud worker failed"):
 * one line "ddpipe: HEAD: REASON (see LOG)" when there is one, else HEAD
 * and at most 4 lines "ranks 0, 2: REASON (see LOG)"; marks them said. */
void failures_print(failures_t *f, const char *head);
void failures_free(failures_t *f);
#endif
