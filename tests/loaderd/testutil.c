#include "testutil.h"

#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tu_failures = 0;

int tu_finish(const char *name)
{
    if (tu_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, tu_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

const char *tu_src(const char *rel)
{
    static char buf[4][4096];
    static int slot;
    const char *root = getenv("DDPIPE_SRC");
    if (!root || !*root)
        root = DDPIPE_SOURCE_DIR;
    char *b = buf[slot++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", root, rel);
    return b;
}

/* Next header token of a PNM file, skipping blanks and # comments. */
static int pnm_int(FILE *f, int *v)
{
    int c;
    while ((c = fgetc(f)) != EOF) {
        if (c == '#') {
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
        } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            ungetc(c, f);
            break;
        }
    }
    return fscanf(f, "%d", v) == 1 ? 0 : -1;
}

image_t *tu_read_pnm(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
        return NULL;
    }
    char magic[3] = {0};
    int w, h, maxval;
    image_t *img = NULL;
    if (fread(magic, 1, 2, f) != 2 || magic[0] != 'P' || (magic[1] != '5' && magic[1] != '6') ||
        pnm_int(f, &w) || pnm_int(f, &h) || pnm_int(f, &maxval) || maxval != 255 ||
        fgetc(f) == EOF) {
        fprintf(stderr, "%s: not a binary 8-bit PGM/PPM\n", path);
    } else if (!(img = image_new(w, h, magic[1] == '5' ? 1 : 3))) {
        fprintf(stderr, "%s: bad size %dx%d\n", path, w, h);
    } else if (fread(img->px, 1, (size_t)w * h * img->c, f) != (size_t)w * h * img->c) {
        fprintf(stderr, "%s: truncated pixel data\n", path);
        image_destroy(&img);
    }
    fclose(f);
    return img;
}

char *tu_mkdtemp(const char *tag)
{
    const char *tmp = getenv("TMPDIR");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/ddpipe-%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (!mkdtemp(buf)) {
        fprintf(stderr, "mkdtemp %s: %s\n", buf, strerror(errno));
        return NULL;
    }
    return strdup(buf);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void tu_rmtree(const char *path)
{
    if (path)
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int tu_mkdirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

int tu_write_file(const char *path, const void *data, size_t len)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        if (tu_mkdirs(dir) != 0)
            return -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int rc = fwrite(data, 1, len, f) == len ? 0 : -1;
    return fclose(f) != 0 ? -1 : rc;
}

int tu_maxdiff(const uint8_t *a, const uint8_t *b, size_t n, size_t *ndiff)
{
    int mx = 0;
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        int d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        mx = d > mx ? d : mx;
        nd += d != 0;
    }
    if (ndiff)
        *ndiff = nd;
    return mx;
}
