#include "cli/outdir.h"

#include "common/str_suffix.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a run writes into OUT: reporterd (reporterd/rundir.h), gpud's
 * training files (cli/cmd_train.c), the CLI's logs/ and ipc folder. Keep
 * in step with them; tests/integration/test_rundir.py checks a real eval
 * and train leave nothing else. */
static const char *const s_files[] = {
    "summary.json", "predictions.csv", "metrics.csv", "classification_report.txt",
    "checkpoint.safetensors", "model.safetensors", "membership.csv",
    "loss.png", "loss.svg", "accuracy.png", "accuracy.svg", "throughput.png", "throughput.svg",
    "confusion.png", "confusion.svg", "f1.png", "f1.svg",
};
/* the seed course's CSV (train_seed_csv_name), e.g. 2ranks-64bs-0.05lr-0.9m-0.0w.csv */
static const char *const s_patterns[] = {"*ranks-*bs-*lr-*m-*w.csv"};
static const char *const s_dirs[] = {"logs"};

static int is_named_output(const char *name)
{
    for (size_t i = 0; i < sizeof s_files / sizeof s_files[0]; i++)
        if (strcmp(name, s_files[i]) == 0)
            return 1;
    for (size_t i = 0; i < sizeof s_patterns / sizeof s_patterns[0]; i++)
        if (fnmatch(s_patterns[i], name, 0) == 0)
            return 1;
    return 0;
}

/* ".ipc" (before mkdtemp) or ".ipc-XXXXXX" (cli/ipcdir.h) left by a
 * killed job */
static int is_ipc_dir(const char *name)
{
    return strcmp(name, ".ipc") == 0 || fnmatch(".ipc-??????", name, 0) == 0;
}

int outdir_is_output(const char *name)
{
    if (is_named_output(name) || is_ipc_dir(name))
        return 1;
    for (size_t i = 0; i < sizeof s_dirs / sizeof s_dirs[0]; i++)
        if (strcmp(name, s_dirs[i]) == 0)
            return 1;
    /* an atomic write's temporary file: NAME.tmp.SUFFIX */
    const char *tmp = strstr(name, ".tmp.");
    if (tmp && tmp > name) {
        char base[256];
        size_t n = (size_t)(tmp - name);
        if (n < sizeof base) {
            memcpy(base, name, n);
            base[n] = 0;
            return is_named_output(base);
        }
    }
    return 0;
}

typedef struct {
    const char *const *keep;
    size_t nkeep;
    struct stat *keep_st; /* st_ino 0: missing */
} keep_t;

static int is_kept(const keep_t *k, const struct stat *st)
{
    for (size_t i = 0; i < k->nkeep; i++)
        if (k->keep_st[i].st_ino && k->keep_st[i].st_ino == st->st_ino &&
            k->keep_st[i].st_dev == st->st_dev)
            return 1;
    return 0;
}

/* Empties a folder ddpipe made (logs/: *.log; ipc: sockets) and removes it;
 * anything else in it stays, and so does the folder (a note says so). */
static int clear_dir(int dfd, const char *out, const char *name, const keep_t *k)
{
    int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
        return unlinkat(dfd, name, 0); /* not a folder (a symlink, a file): the entry goes */
    DIR *d = fdopendir(sub);
    if (!d) {
        close(sub);
        return -1;
    }
    int ipc = is_ipc_dir(name);
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        if (fstatat(sub, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || is_kept(k, &st))
            continue;
        int ours = ipc ? S_ISSOCK(st.st_mode)
                       : !S_ISDIR(st.st_mode) && str_suffix(e->d_name, ".log", NULL);
        if (ours)
            unlinkat(sub, e->d_name, 0);
    }
    closedir(d);
    if (unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno == ENOTEMPTY)
        fprintf(stderr, "ddpipe: note: %s/%s holds files ddpipe did not write; left in place\n",
                out, name);
    return 0;
}

/* The first few names, for the message. */
#define LIST_NAMES 4

static void list_add(char *list, size_t len, int nth, const char *name, int dir)
{
    size_t used = strlen(list);
    if (nth < LIST_NAMES)
        snprintf(list + used, len - used, "%s%s%s", used ? ", " : "", name, dir ? "/" : "");
}

/* Removes (or, without OVERWRITE, only lists) the outputs in DFD. */
static int sweep(int dfd, const char *out, bool overwrite, const keep_t *k, char *list,
                 size_t len, int *found)
{
    DIR *d = fdopendir(dup(dfd));
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        /* a killed job's ipc folder is no result: cleared, never a reason to refuse */
        if (!outdir_is_output(e->d_name) || (!overwrite && is_ipc_dir(e->d_name)) ||
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || is_kept(k, &st))
            continue;
        list_add(list, len, (*found)++, e->d_name, S_ISDIR(st.st_mode));
        if (!overwrite)
            continue;
        int r = S_ISDIR(st.st_mode) ? clear_dir(dfd, out, e->d_name, k)
                                    : unlinkat(dfd, e->d_name, 0);
        if (r != 0 && errno != ENOENT) {
            fprintf(stderr, "ddpipe: cannot remove %s/%s: %s\n", out, e->d_name, strerror(errno));
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

int outdir_prepare(const char *cmd, const char *out, bool overwrite, const char *const *keep,
                   size_t nkeep)
{
    int dfd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        if (errno == ENOENT)
            return 0; /* a new run directory */
        fprintf(stderr, "ddpipe %s: --out %s: %s\n", cmd, out, strerror(errno));
        return -1;
    }
    struct stat keep_st[16] = {{0}};
    keep_t k = {keep, nkeep < 16 ? nkeep : 16, keep_st};
    for (size_t i = 0; i < k.nkeep; i++)
        if (!keep[i] || stat(keep[i], &keep_st[i]) != 0)
            keep_st[i].st_ino = 0;
    char list[512] = "";
    int found = 0;
    int rc = sweep(dfd, out, overwrite, &k, list, sizeof list, &found);
    close(dfd);
    if (rc != 0 || found == 0)
        return rc;
    if (found > LIST_NAMES)
        snprintf(list + strlen(list), sizeof list - strlen(list), " and %d more", found - LIST_NAMES);
    if (!overwrite) {
        fprintf(stderr, "ddpipe %s: --out %s holds a previous run's outputs (%s); rerun with "
                "--overwrite to remove them first, or choose another --out\n", cmd, out, list);
        return -1;
    }
    fprintf(stderr, "ddpipe %s: --overwrite: removed the previous run's outputs from %s (%s)\n",
            cmd, out, list);
    return 0;
}
