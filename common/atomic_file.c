#include "common/atomic_file.h"

#include "common/errbuf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct atomic_file {
    char *path;
    char *tmp;
    FILE *f;
};

/* Suffix of the temporary names, so that two threads of one process writing
 * the same path never share a temporary file. An atomic: every thread that
 * writes a file takes the next number. */
static atomic_uint s_seq;

/* Picks "PATH.tmp.PID.N" that does not exist yet (one left by a killed
 * process with our pid is skipped) and opens it. */
static FILE *s_create(atomic_file_t *self, size_t tmplen, char *err, size_t errlen)
{
    for (int tries = 0; tries < 100; tries++) {
        snprintf(self->tmp, tmplen, "%s.tmp.%ld.%u", self->path, (long)getpid(),
                 atomic_fetch_add(&s_seq, 1u));
        int fd = open(self->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST)
            continue;
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (f)
            return f;
        err_set(err, errlen, "cannot create %s: %s", self->tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(self->tmp);
        }
        return NULL;
    }
    err_set(err, errlen, "cannot create %s: %s", self->tmp, strerror(EEXIST));
    return NULL;
}

atomic_file_t *atomic_file_new(const char *path, char *err, size_t errlen)
{
    atomic_file_t *self = calloc(1, sizeof *self);
    size_t tmplen = strlen(path) + 48;
    if (self) {
        self->path = strdup(path);
        self->tmp = malloc(tmplen);
    }
    if (!self || !self->path || !self->tmp) {
        err_set(err, errlen, "cannot write %s: out of memory", path);
        atomic_file_destroy(&self);
        return NULL;
    }
    self->f = s_create(self, tmplen, err, errlen);
    if (!self->f)
        atomic_file_destroy(&self);
    return self;
}

FILE *atomic_file_stream(atomic_file_t *self) { return self->f; }
const char *atomic_file_tmp_path(const atomic_file_t *self) { return self->tmp; }

void atomic_file_destroy(atomic_file_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    atomic_file_t *self = *self_p;
    if (self->f) {
        fclose(self->f);
        unlink(self->tmp);
    }
    free(self->path);
    free(self->tmp);
    free(self);
    *self_p = NULL;
}

/* fsync the directory holding path so that the rename is durable too; a
 * failure here loses nothing already visible, so it is not an error. */
static void s_fsync_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return;
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(copy);
}

/* Removes the temporary files of PATH ("PATH.tmp.PID.N") left by writers
 * that died mid-write (a killed rank 0 in its checkpoint): only those of a
 * PID that no longer exists here, so another live writer keeps its file. */
static void s_sweep_stale(const char *path)
{
    char *dcopy = strdup(path), *bcopy = strdup(path);
    const char *dir = dcopy ? dirname(dcopy) : NULL, *base = bcopy ? basename(bcopy) : NULL;
    DIR *d = dir && base ? opendir(dir) : NULL;
    size_t blen = base ? strlen(base) : 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        long pid;
        unsigned n;
        char tail, stale[4096];
        if (strncmp(e->d_name, base, blen) != 0 ||
            sscanf(e->d_name + blen, ".tmp.%ld.%u%c", &pid, &n, &tail) != 2 || pid <= 0 ||
            pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        if (snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name) < (int)sizeof stale)
            (void)unlink(stale);
    }
    if (d)
        closedir(d);
    free(dcopy);
    free(bcopy);
}

static atomic_bool s_fault_before_rename;

void atomic_file_fault_before_rename(void)
{
    atomic_store(&s_fault_before_rename, true);
}

int atomic_file_commit(atomic_file_t **self_p, char *err, size_t errlen)
{
    atomic_file_t *self = *self_p;
    FILE *f = self->f;
    self->f = NULL;
    /* fsync so that after the rename the new content, not an empty file, is
     * what survives a power cut; ferror catches any earlier failed write */
    errno = 0;
    int bad = fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0;
    int saved = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        saved = errno;
    }
    int rc = -1;
    if (!bad && atomic_load(&s_fault_before_rename))
        raise(SIGKILL);
    if (bad)
        err_set(err, errlen, "cannot write %s: %s", self->tmp, strerror(saved ? saved : EIO));
    else if (rename(self->tmp, self->path) != 0)
        err_set(err, errlen, "cannot rename %s into %s: %s", self->tmp, self->path,
                strerror(errno));
    else
        rc = 0;
    if (rc == 0) {
        s_fsync_dir(self->path);
        s_sweep_stale(self->path);
    } else
        unlink(self->tmp);
    atomic_file_destroy(self_p);
    return rc;
}

int atomic_file_write(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    atomic_file_t *f = atomic_file_new(path, err, errlen);
    if (!f)
        return -1;
    if (len && fwrite(data, 1, len, f->f) != len) {
        err_set(err, errlen, "cannot write %s: %s", f->tmp, strerror(errno));
        atomic_file_destroy(&f);
        return -1;
    }
    return atomic_file_commit(&f, err, errlen);
}
