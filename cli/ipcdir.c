#include "cli/ipcdir.h"
#include "common/errbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ipcdir {
    char path[PATH_MAX];
    int fd, parent_fd;   /* the folder made, and where it was made */
    char **names;        /* socket names handed out */
    size_t n, cap;
};

/* Appends "; what" to ERR (every candidate's reason ends up there). */
__attribute__((format(printf, 3, 4)))
static void note(char *err, size_t errlen, const char *fmt, ...)
{
    size_t used = strlen(err);
    if (used + 3 >= errlen)
        return;
    if (used)
        strcat(err, "; ");
    used = strlen(err);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + used, errlen - used, fmt, ap);
    va_end(ap);
}

/* mkdtemp under BASE with the leaf LEAF ("ddpipe-XXXXXX"); 0 when made and
 * opened, -1 (ERR noted) to try the next candidate. */
static int try_base(ipcdir_t *d, const char *base, const char *leaf, char *err, size_t errlen)
{
    if (base[0] != '/') {
        note(err, errlen, "%s: not an absolute path", base);
        return -1;
    }
    int n = snprintf(d->path, sizeof d->path, "%s%s%s", base,
                     base[strlen(base) - 1] == '/' ? "" : "/", leaf);
    if (n < 0 || (size_t)n + 1 + IPCDIR_NAME_MAX > IPCDIR_PATH_MAX) {
        note(err, errlen, "%s: too long for socket paths (over %d bytes)", base, IPCDIR_PATH_MAX);
        return -1;
    }
    int pfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0 || !mkdtemp(d->path)) {
        note(err, errlen, "%s: %s", base, strerror(errno));
        if (pfd >= 0)
            close(pfd);
        return -1;
    }
    const char *made = strrchr(d->path, '/') + 1;
    /* the folder just made, by a descriptor: nothing is resolved again */
    int fd = openat(pfd, made, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != geteuid() || fchmod(fd, 0700) != 0) {
        note(err, errlen, "%s: cannot open the folder it made (%s)", d->path, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlinkat(pfd, made, AT_REMOVEDIR);
        close(pfd);
        return -1;
    }
    d->fd = fd;
    d->parent_fd = pfd;
    return 0;
}

ipcdir_t *ipcdir_new(const char *run_dir, char *err, size_t errlen)
{
    ipcdir_t *d = calloc(1, sizeof *d);
    if (!d) {
        err_set(err, errlen, "out of memory");
        return NULL;
    }
    err[0] = 0;
    char abs[PATH_MAX];
    const char *xdg = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
    if (realpath(run_dir, abs) && try_base(d, abs, ".ipc-XXXXXX", err, errlen) == 0)
        return d;
    if (xdg && *xdg && try_base(d, xdg, "ddpipe-XXXXXX", err, errlen) == 0)
        return d;
    if (tmp && *tmp && try_base(d, tmp, "ddpipe-XXXXXX", err, errlen) == 0)
        return d;
    if (try_base(d, "/tmp", "ddpipe-XXXXXX", err, errlen) == 0)
        return d;
    free(d);
    return NULL;
}

const char *ipcdir_path(const ipcdir_t *d) { return d->path; }

static int remember(ipcdir_t *d, const char *name)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->names[i], name) == 0)
            return 0;
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 16;
        char **p = realloc(d->names, cap * sizeof *p);
        if (!p)
            return -1;
        d->names = p;
        d->cap = cap;
    }
    if (!(d->names[d->n] = strdup(name)))
        return -1;
    d->n++;
    return 0;
}

int ipcdir_endpoint(ipcdir_t *d, const char *name, char *buf, size_t len)
{
    size_t n = strlen(name);
    if (n == 0 || n > IPCDIR_NAME_MAX || strchr(name, '/') || strcmp(name, "..") == 0 ||
        remember(d, name) != 0) {
        if (len)
            buf[0] = 0;
        return -1;
    }
    snprintf(buf, len, "ipc://%s/%s", d->path, name);
    return 0;
}

void ipcdir_destroy(ipcdir_t **pd)
{
    ipcdir_t *d = *pd;
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++) {
        struct stat st;
        /* only a socket ddpipe was told to make: never a file or a link */
        if (fstatat(d->fd, d->names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode))
            unlinkat(d->fd, d->names[i], 0);
        free(d->names[i]);
    }
    free(d->names);
    const char *leaf = strrchr(d->path, '/') + 1;
    if (unlinkat(d->parent_fd, leaf, AT_REMOVEDIR) != 0 && errno != ENOENT)
        fprintf(stderr, "ddpipe: left %s in place: %s (it holds files ddpipe did not make)\n",
                d->path, strerror(errno));
    close(d->fd);
    close(d->parent_fd);
    free(d);
    *pd = NULL;
}
