/* cli/ipcdir: where the private socket folder goes for short and long run
 * directories, that it is a fresh 0700 folder never at a predictable path,
 * and that removal touches nothing but the sockets handed out and that
 * folder (a symlink planted at the old /tmp/ddpipe-PID path, or inside the
 * folder, leads nowhere). */
#include "cli/ipcdir.h"
#include "tests/reporterd/check.h" /* CHECK_MSG and check_done, shared by the C tests */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char s_base[64];

static void touch(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A unix socket at PATH, as a daemon's bind leaves it. */
static void make_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    CHECK_MSG(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind %s: %s", path,
          strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* A run directory whose path is LEN characters long. */
static void long_dir(char *buf, size_t len)
{
    snprintf(buf, 4096, "%s/", s_base);
    while (strlen(buf) + 20 < len) {
        strcat(buf, "long-long-long-name/");
        mkdir(buf, 0755);
    }
    strcat(buf, "run");
    mkdir(buf, 0755);
}

static void check_folder(const ipcdir_t *d, const char *prefix, const char *leaf)
{
    const char *p = ipcdir_path(d);
    struct stat st;
    CHECK_MSG(strncmp(p, prefix, strlen(prefix)) == 0 && strstr(p + strlen(prefix), leaf) &&
              strlen(p) + 1 + IPCDIR_NAME_MAX <= IPCDIR_PATH_MAX,
          "folder %s, want under %s (%s)", p, prefix, leaf);
    CHECK_MSG(lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700 &&
              st.st_uid == geteuid(), "%s: mode %o", p, st.st_mode & 0777);
}

static void test_places(void)
{
    char err[2048], run[4096], xdg[128], tmp[128], deep[4096];
    snprintf(run, sizeof run, "%s/run", s_base);
    mkdir(run, 0755);
    ipcdir_t *d = ipcdir_new(run, err, sizeof err);
    CHECK_MSG(d, "short run dir: %s", err);
    if (d) {
        check_folder(d, run, "/.ipc-");
        ipcdir_destroy(&d);
    }
    /* a deep run directory: XDG_RUNTIME_DIR, then TMPDIR, then /tmp */
    long_dir(deep, 150);
    snprintf(xdg, sizeof xdg, "%s/xdg", s_base);
    snprintf(tmp, sizeof tmp, "%s/tmp", s_base);
    mkdir(xdg, 0700);
    mkdir(tmp, 0700);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    setenv("TMPDIR", tmp, 1);
    d = ipcdir_new(deep, err, sizeof err);
    CHECK_MSG(d, "deep, XDG: %s", err);
    if (d) {
        check_folder(d, xdg, "/ddpipe-");
        ipcdir_destroy(&d);
    }
    setenv("XDG_RUNTIME_DIR", "relative/dir", 1); /* not absolute: skipped */
    d = ipcdir_new(deep, err, sizeof err);
    CHECK_MSG(d, "deep, TMPDIR: %s", err);
    if (d) {
        check_folder(d, tmp, "/ddpipe-");
        ipcdir_destroy(&d);
    }
    unsetenv("XDG_RUNTIME_DIR");
    setenv("TMPDIR", deep, 1); /* too long for sockets: /tmp */
    d = ipcdir_new(deep, err, sizeof err);
    CHECK_MSG(d, "deep, /tmp: %s", err);
    if (d) {
        check_folder(d, "/tmp/", "ddpipe-");
        ipcdir_destroy(&d);
    }
    unsetenv("TMPDIR");
    /* nothing stray: the folders went with their ipcdir */
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "test -z \"$(find %s %s %s -mindepth 1)\"", xdg, tmp, run);
    CHECK_MSG(system(cmd) == 0, "stray folders left in %s, %s or %s", xdg, tmp, run);
}

/* The old predictable path, pre-made as a symlink to a victim: never used,
 * the victim's file survives. */
static void test_predictable_path(void)
{
    char victim[128], file[160], old[64], deep[4096], err[2048];
    snprintf(victim, sizeof victim, "%s/victim", s_base);
    mkdir(victim, 0755);
    snprintf(file, sizeof file, "%s/precious", victim);
    touch(file, "keep me");
    snprintf(old, sizeof old, "/tmp/ddpipe-%d", (int)getpid());
    int planted = symlink(victim, old) == 0;
    long_dir(deep, 150);
    ipcdir_t *d = ipcdir_new(deep, err, sizeof err);
    CHECK_MSG(d && strcmp(ipcdir_path(d), old) != 0, "used the predictable path: %s", err);
    char ep[256];
    if (d) {
        CHECK_MSG(ipcdir_endpoint(d, "precious", ep, sizeof ep) == 0, "endpoint");
        ipcdir_destroy(&d);
    }
    CHECK_MSG(exists(file), "the victim's file was removed");
    if (planted)
        unlink(old);
}

static void test_removal(void)
{
    char run[256], err[2048], ep[256], path[512], victim[256];
    snprintf(run, sizeof run, "%s/rm", s_base);
    mkdir(run, 0755);
    snprintf(victim, sizeof victim, "%s/victim2", s_base);
    touch(victim, "keep me");
    ipcdir_t *d = ipcdir_new(run, err, sizeof err);
    CHECK_MSG(d, "%s", err);
    if (!d)
        return;
    char dir[256];
    snprintf(dir, sizeof dir, "%s", ipcdir_path(d));
    CHECK_MSG(ipcdir_endpoint(d, "reducer", ep, sizeof ep) == 0 && strstr(ep, "ipc://") == ep &&
              !strcmp(ep + 6 + strlen(dir), "/reducer"), "endpoint %s", ep);
    CHECK_MSG(ipcdir_endpoint(d, "", ep, sizeof ep) < 0 && !ep[0], "empty name");
    CHECK_MSG(ipcdir_endpoint(d, "../x", ep, sizeof ep) < 0, "a name with a slash");
    CHECK_MSG(ipcdir_endpoint(d, "..", ep, sizeof ep) < 0, "..");
    CHECK_MSG(ipcdir_endpoint(d, "sixteen-chars-xx", ep, sizeof ep) < 0, "a name too long");
    ipcdir_endpoint(d, "ring-0", ep, sizeof ep);
    ipcdir_endpoint(d, "notasocket", ep, sizeof ep);
    ipcdir_endpoint(d, "link", ep, sizeof ep);
    snprintf(path, sizeof path, "%s/reducer", dir);
    make_socket(path);
    snprintf(path, sizeof path, "%s/notasocket", dir);
    touch(path, "x");
    snprintf(path, sizeof path, "%s/link", dir);
    CHECK_MSG(symlink(victim, path) == 0, "symlink");
    /* ring-0 was never bound: nothing to remove */
    ipcdir_destroy(&d);
    snprintf(path, sizeof path, "%s/reducer", dir);
    CHECK_MSG(!exists(path), "the socket stayed");
    snprintf(path, sizeof path, "%s/notasocket", dir);
    CHECK_MSG(exists(path), "a regular file was removed");
    snprintf(path, sizeof path, "%s/link", dir);
    CHECK_MSG(exists(path) && exists(victim), "the link or its target was removed");
    CHECK_MSG(exists(dir), "a folder with foreign files was removed");
    /* only sockets: the folder goes too */
    d = ipcdir_new(run, err, sizeof err);
    if (d) {
        snprintf(dir, sizeof dir, "%s", ipcdir_path(d));
        ipcdir_endpoint(d, "events", ep, sizeof ep);
        snprintf(path, sizeof path, "%s/events", dir);
        make_socket(path);
        ipcdir_destroy(&d);
        CHECK_MSG(!exists(dir), "%s stayed", dir);
    }
}

int main(void)
{
    snprintf(s_base, sizeof s_base, "/tmp/ddpipe-test-ipcdir-XXXXXX");
    if (!mkdtemp(s_base)) {
        perror("mkdtemp");
        return 1;
    }
    test_places();
    test_predictable_path();
    test_removal();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_base);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_base);
    return check_done("test_ipcdir");
}
