#include "cli/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void launch_bindir(char *buf, size_t len)
{
    const char *env = getenv("DDPIPE_BIN");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        snprintf(buf, len, ".");
        return;
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = 0;
    snprintf(buf, len, "%s", self);
}

void launch_init(launch_t *L)
{
    memset(L, 0, sizeof *L);
    launch_bindir(L->bindir, sizeof L->bindir);
}

static void exec_child(const char *path, char *const argv[], const char *logfile, pid_t parent)
{
    /* die with the launcher: no orphaned daemons even on kill -9 */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int fd = open(logfile, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        close(devnull);
    }
    signal(SIGINT, SIG_IGN); /* Ctrl-C goes to the launcher, which stops us in order */
    execv(path, argv);
    fprintf(stderr, "cannot run %s: %s\n", path, strerror(errno));
    _exit(127);
}

child_t *launch_spawn(launch_t *L, const char *name, const char *prog, char *const argv[],
                      const char *logfile)
{
    if (L->n >= LAUNCH_MAX)
        return NULL;
    char path[4200];
    if (prog[0] == '/')   /* a program of the system (srun), found by the caller */
        snprintf(path, sizeof path, "%s", prog);
    else
        snprintf(path, sizeof path, "%s/%s", L->bindir, prog);
    if (access(path, X_OK) != 0) {
        fprintf(stderr, "ddpipe: %s not found or not executable (set DDPIPE_BIN to the folder "
                        "holding the daemons)\n", path);
        return NULL;
    }
    child_t *c = &L->c[L->n];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->log, sizeof c->log, "%s", logfile);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "ddpipe: cannot fork %s: %s\n", name, strerror(errno));
        return NULL;
    }
    if (pid == 0) {
        char **av = (char **)argv;
        av[0] = path;
        exec_child(path, av, logfile, parent);
    }
    c->pid = pid;
    c->running = true;
    L->n++;
    return c;
}

child_t *launch_reap(launch_t *L)
{
    for (int i = 0; i < L->n; i++) {
        child_t *c = &L->c[i];
        if (!c->running)
            continue;
        int st;
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid) {
            c->running = false;
            c->status = st;
            return c;
        }
    }
    return NULL;
}

static bool matches(const child_t *c, const char *prefix)
{
    return !prefix || strncmp(c->name, prefix, strlen(prefix)) == 0;
}

int launch_running(const launch_t *L, const char *prefix)
{
    int n = 0;
    for (int i = 0; i < L->n; i++)
        if (L->c[i].running && matches(&L->c[i], prefix))
            n++;
    return n;
}

child_t *launch_find(launch_t *L, const char *name)
{
    for (int i = 0; i < L->n; i++)
        if (strcmp(L->c[i].name, name) == 0)
            return &L->c[i];
    return NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

bool launch_wait(launch_t *L, const char *prefix, int ms)
{
    for (int waited = 0; launch_running(L, prefix) > 0; waited += 20) {
        if (waited >= ms)
            return false;
        while (launch_reap(L))
            ;
        if (launch_running(L, prefix) > 0)
            sleep_ms(20);
    }
    return true;
}

bool launch_wait_all(launch_t *L, int ms) { return launch_wait(L, NULL, ms); }

void launch_stop(launch_t *L, const char *prefix, int grace_ms)
{
    for (int i = 0; i < L->n; i++)
        if (L->c[i].running && matches(&L->c[i], prefix))
            kill(L->c[i].pid, SIGTERM);
    if (launch_wait(L, prefix, grace_ms))
        return;
    for (int i = 0; i < L->n; i++)
        if (L->c[i].running && matches(&L->c[i], prefix)) {
            fprintf(stderr, "ddpipe: %s did not stop within %d ms: killing it\n", L->c[i].name, grace_ms);
            kill(L->c[i].pid, SIGKILL);
        }
    launch_wait(L, prefix, 5000);
}

void launch_stop_all(launch_t *L, int grace_ms) { launch_stop(L, NULL, grace_ms); }

const char *launch_describe(const child_t *c, char *buf, int len)
{
    if (c->running)
        snprintf(buf, len, "running");
    else if (WIFEXITED(c->status))
        snprintf(buf, len, "exit %d", WEXITSTATUS(c->status));
    else if (WIFSIGNALED(c->status))
        snprintf(buf, len, "killed by signal %d", WTERMSIG(c->status));
    else
        snprintf(buf, len, "status %d", c->status);
    return buf;
}

void launch_tail_log(const child_t *c, int lines)
{
    FILE *f = fopen(c->log, "r");
    if (!f)
        return;
    char *ring[64] = {0};
    if (lines > 64)
        lines = 64;
    char buf[2048];
    int n = 0;
    while (fgets(buf, sizeof buf, f)) {
        free(ring[n % lines]);
        ring[n % lines] = strdup(buf);
        n++;
    }
    fclose(f);
    int start = n > lines ? n - lines : 0;
    for (int i = start; i < n; i++) {
        fprintf(stderr, "  %s| %s", c->name, ring[i % lines] ? ring[i % lines] : "\n");
    }
    for (int i = 0; i < lines; i++)
        free(ring[i]);
}
