/* atomic_file: a commit puts the whole content under the final name, an
 * abandoned file leaves nothing, and a commit sweeps the temporary files of
 * writers that died mid-write (a PID that no longer exists) but keeps a live
 * writer's. */
#include "common/atomic_file.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int s_fail;
#define CHECK(c, ...) \
    do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
                     fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); s_fail++; } } while (0)

static int exists(const char *p) { return access(p, F_OK) == 0; }

static void touch(const char *p)
{
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
}

/* A PID that is certainly dead: a child that exited and was reaped. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

int main(void)
{
    char dir[] = "/tmp/test_atomic_file.XXXXXX", path[256], stale[300], live[300], other[300];
    char err[256], buf[64] = {0};
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    snprintf(stale, sizeof stale, "%s.tmp.%ld.0", path, (long)dead_pid());
    snprintf(live, sizeof live, "%s.tmp.%ld.0", path, (long)getppid());
    snprintf(other, sizeof other, "%s/summary.json.tmp.%ld.0", dir, (long)dead_pid());
    touch(stale), touch(live), touch(other);

    CHECK(atomic_file_write(path, "hello", 5, err, sizeof err) == 0, "write: %s", err);
    FILE *f = fopen(path, "r");
    CHECK(f && fread(buf, 1, sizeof buf - 1, f) == 5 && strcmp(buf, "hello") == 0,
          "content after commit: '%s'", buf);
    if (f)
        fclose(f);
    CHECK(!exists(stale), "a dead writer's temporary file survived the commit: %s", stale);
    CHECK(exists(live), "a live writer's temporary file was removed: %s", live);
    CHECK(exists(other), "another file's temporary file was removed: %s", other);

    atomic_file_t *a = atomic_file_new(path, err, sizeof err);
    CHECK(a != NULL, "new: %s", err);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s", a ? atomic_file_tmp_path(a) : "");
    CHECK(a && exists(tmp), "no temporary file while writing");
    atomic_file_destroy(&a);
    CHECK(!exists(tmp) && a == NULL, "destroy left %s", tmp);

    unlink(live), unlink(other), unlink(path), rmdir(dir);
    printf("%s\n", s_fail ? "FAILED" : "1 passed, 0 failed");
    return s_fail ? 1 : 0;
}
