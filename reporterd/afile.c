#include "reporterd/afile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct afile {
    char *path;
    char *tmp;
    FILE *f;
};

static void s_why(char *why, size_t whylen, const char *what, const char *path)
{
    if (why && whylen)
        snprintf(why, whylen, "%s %s: %s", what, path, strerror(errno));
}

afile_t *afile_new(const char *path, char *why, size_t whylen)
{
    afile_t *self = calloc(1, sizeof *self);
    if (!self) {
        s_why(why, whylen, "allocating a writer for", path);
        return NULL;
    }
    size_t tmplen = strlen(path) + 32;
    self->path = strdup(path);
    self->tmp = malloc(tmplen);
    if (!self->path || !self->tmp) {
        s_why(why, whylen, "allocating a writer for", path);
        afile_destroy(&self);
        return NULL;
    }
    snprintf(self->tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
    self->f = fopen(self->tmp, "w");
    if (!self->f) {
        s_why(why, whylen, "cannot create", self->tmp);
        afile_destroy(&self);
        return NULL;
    }
    return self;
}

FILE *afile_stream(afile_t *self) { return self->f; }
const char *afile_tmp_path(const afile_t *self) { return self->tmp; }

void afile_destroy(afile_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    afile_t *self = *self_p;
    if (self->f) {
        fclose(self->f);
        unlink(self->tmp);
    }
    free(self->path);
    free(self->tmp);
    free(self);
    *self_p = NULL;
}

/* fsync so that after the rename the new content, not an empty file, is
 * what survives a power cut. */
static int s_fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

int afile_publish(const char *src, const char *dst, char *why, size_t whylen)
{
    if (s_fsync_path(src) != 0) {
        s_why(why, whylen, "cannot fsync", src);
        unlink(src);
        return -1;
    }
    if (rename(src, dst) != 0) {
        s_why(why, whylen, "cannot rename into", dst);
        unlink(src);
        return -1;
    }
    return 0;
}

int afile_commit(afile_t **self_p, char *why, size_t whylen)
{
    afile_t *self = *self_p;
    int rc = 0;
    if (fflush(self->f) != 0 || ferror(self->f)) {
        s_why(why, whylen, "cannot write", self->tmp);
        rc = -1;
    }
    if (fclose(self->f) != 0 && rc == 0) {
        s_why(why, whylen, "cannot close", self->tmp);
        rc = -1;
    }
    self->f = NULL;
    if (rc == 0)
        rc = afile_publish(self->tmp, self->path, why, whylen);
    else
        unlink(self->tmp);
    afile_destroy(self_p);
    return rc;
}

int afile_write_all(const char *path, const void *data, size_t len, char *why, size_t whylen)
{
    afile_t *f = afile_new(path, why, whylen);
    if (!f)
        return -1;
    if (len && fwrite(data, 1, len, afile_stream(f)) != len) {
        s_why(why, whylen, "cannot write", afile_tmp_path(f));
        afile_destroy(&f);
        return -1;
    }
    return afile_commit(&f, why, whylen);
}

int afile_mkdirs(const char *dir, char *why, size_t whylen)
{
    if (!dir || !*dir) {
        errno = EINVAL;
        s_why(why, whylen, "empty directory name", "");
        return -1;
    }
    char *copy = strdup(dir);
    if (!copy) {
        s_why(why, whylen, "allocating for", dir);
        return -1;
    }
    int rc = 0;
    /* create each prefix in turn; EEXIST is fine as long as it is a dir */
    for (char *p = copy + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(copy, 0777) != 0 && errno != EEXIST) {
            s_why(why, whylen, "cannot create directory", copy);
            rc = -1;
            break;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    struct stat st;
    if (rc == 0 && stat(dir, &st) != 0) {
        s_why(why, whylen, "cannot stat", dir);
        rc = -1;
    } else if (rc == 0 && !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        s_why(why, whylen, "cannot use as run directory", dir);
        rc = -1;
    }
    free(copy);
    return rc;
}
