/* launch — start the daemons of a job as child processes, watch them, and
 * make sure none is left behind (normal end, failure, Ctrl-C, or the
 * launcher itself being killed: children get PR_SET_PDEATHSIG). */
#ifndef DDP_CLI_LAUNCH_H
#define DDP_CLI_LAUNCH_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define LAUNCH_MAX 1100

typedef struct {
    char name[64];             /* "reducerd", "gpud.1" */
    char log[1024];            /* its stderr+stdout file */
    pid_t pid;
    bool running;
    int status;                /* waitpid status once exited */
} child_t;

typedef struct {
    child_t c[LAUNCH_MAX];
    int n;
    char bindir[4096];
} launch_t;

/* Directory of the daemon binaries: $DDPIPE_BIN, else next to this program. */
void launch_init(launch_t *L);
void launch_bindir(char *buf, size_t len);
/* Start bindir/prog (prog itself when it is an absolute path) with argv (NULL-terminated, argv[0] ignored); logs to logfile. */
child_t *launch_spawn(launch_t *L, const char *name, const char *prog, char *const argv[],
                      const char *logfile);
/* Reap exited children without blocking; returns the first newly exited one or NULL. */
child_t *launch_reap(launch_t *L);
int launch_running(const launch_t *L, const char *prefix);
/* The child of that name, or NULL. */
child_t *launch_find(launch_t *L, const char *name);
/* SIGTERM the children whose name starts with prefix (NULL: everyone),
 * wait up to grace_ms, then SIGKILL and reap them. */
void launch_stop(launch_t *L, const char *prefix, int grace_ms);
void launch_stop_all(launch_t *L, int grace_ms);
/* Wait up to ms for those children to exit by themselves; true if they did. */
bool launch_wait(launch_t *L, const char *prefix, int ms);
bool launch_wait_all(launch_t *L, int ms);
/* "exit 1" / "killed by signal 9" */
const char *launch_describe(const child_t *c, char *buf, int len);
/* Print the last lines of a child's log to stderr. */
void launch_tail_log(const child_t *c, int lines);
#endif
