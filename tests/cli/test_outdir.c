/* cli/outdir: a run directory's previous outputs are found, refused
 * without --overwrite (untouched), removed with it; files ddpipe does not
 * write, kept inputs and symlink targets survive. */
#include "cli/outdir.h"
#include "tests/reporterd/check.h" /* CHECK_MSG and check_done, shared by the C tests */

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char s_base[64];

static void touch(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "create %s", path);
    if (f) {
        fputs("x", f);
        fclose(f);
    }
}

static int has(const char *dir, const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

static const char *const outputs[] = {
    "summary.json", "predictions.csv", "metrics.csv", "classification_report.txt",
    "checkpoint.safetensors", "loss.png", "accuracy.svg", "throughput.png", "confusion.svg",
    "f1.png", "2ranks-64bs-0.05lr-0.9m-0.0w.csv", "summary.json.tmp.1234",
    "checkpoint.safetensors.tmp.Ab12Cd", "logs/reducerd.log", "logs/gpud.0.log", "membership.csv",
};
static const char *const foreign[] = {"notes.txt", "data.csv", "summary.json.bak", "tmp.x",
                                      "my.tmp.file"};

static void fill(const char *out)
{
    char path[512];
    mkdir(out, 0755);
    snprintf(path, sizeof path, "%s/logs", out);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/.ipc-a1B2c3", out);
    mkdir(path, 0700);
    for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++)
        touch(out, outputs[i]);
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++)
        touch(out, foreign[i]);
    touch(out, "model.safetensors");
    /* a stale socket in a killed job's ipc folder */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int n = snprintf(a.sun_path, sizeof a.sun_path, "%s/.ipc-a1B2c3/reducer", out);
    CHECK_MSG(n < (int)sizeof a.sun_path && fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0,
          "bind");
    if (fd >= 0)
        close(fd);
}

static void test_names(void)
{
    for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++)
        if (!strchr(outputs[i], '/'))
            CHECK_MSG(outdir_is_output(outputs[i]), "%s is an output", outputs[i]);
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++)
        CHECK_MSG(!outdir_is_output(foreign[i]), "%s is not an output", foreign[i]);
    CHECK_MSG(outdir_is_output("logs") && outdir_is_output(".ipc") && outdir_is_output(".ipc-zZ09aB"),
          "folders");
    CHECK_MSG(!outdir_is_output(".ipc-toolong") && !outdir_is_output("logs2"), "near misses");
}

static void test_refuse_and_remove(void)
{
    char out[128], keep[160];
    snprintf(out, sizeof out, "%s/run", s_base);
    CHECK_MSG(outdir_prepare("test", out, false, NULL, 0) == 0, "a missing --out is fine");
    mkdir(out, 0755);
    touch(out, "notes.txt");
    CHECK_MSG(outdir_prepare("test", out, false, NULL, 0) == 0, "foreign files only: fine");
    fill(out);
    CHECK_MSG(outdir_prepare("test", out, false, NULL, 0) < 0, "previous outputs: refused");
    for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++)
        CHECK_MSG(has(out, outputs[i]), "refusal removed %s", outputs[i]);
    snprintf(keep, sizeof keep, "%s/model.safetensors", out);
    const char *const k[] = {NULL, keep};
    CHECK_MSG(outdir_prepare("test", out, true, k, 2) == 0, "--overwrite");
    for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++)
        CHECK_MSG(!has(out, outputs[i]), "--overwrite left %s", outputs[i]);
    CHECK_MSG(!has(out, "logs") && !has(out, ".ipc-a1B2c3"), "folders left");
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++)
        CHECK_MSG(has(out, foreign[i]), "--overwrite removed %s", foreign[i]);
    CHECK_MSG(has(out, "model.safetensors"), "the kept input was removed");
    CHECK_MSG(outdir_prepare("test", out, false, k, 2) == 0, "clean after --overwrite (model.safetensors kept)");
    /* without keep, model.safetensors is an output */
    touch(out, "model.safetensors");
    CHECK_MSG(outdir_prepare("test", out, true, NULL, 0) == 0 && !has(out, "model.safetensors"),
          "model.safetensors not removed");
}

/* Symlinked outputs: the link goes, its target stays; logs/ with a file
 * ddpipe did not write stays with that file. */
static void test_links(void)
{
    char out[128], victim[128], path[512];
    snprintf(out, sizeof out, "%s/links", s_base);
    snprintf(victim, sizeof victim, "%s/victim", s_base);
    mkdir(out, 0755);
    mkdir(victim, 0755);
    touch(victim, "summary.json");
    touch(victim, "a.log");
    snprintf(path, sizeof path, "%s/summary.json", victim);
    char link[512];
    snprintf(link, sizeof link, "%s/summary.json", out);
    CHECK_MSG(symlink(path, link) == 0, "symlink");
    snprintf(link, sizeof link, "%s/.ipc", out);
    CHECK_MSG(symlink(victim, link) == 0, "symlink");
    CHECK_MSG(outdir_prepare("test", out, true, NULL, 0) == 0, "--overwrite with links");
    CHECK_MSG(!has(out, "summary.json") && !has(out, ".ipc"), "links stayed");
    CHECK_MSG(has(victim, "summary.json") && has(victim, "a.log"), "a link's target was removed");
    snprintf(path, sizeof path, "%s/logs", out);
    mkdir(path, 0755);
    touch(out, "logs/gpud.0.log");
    touch(out, "logs/mine.txt");
    CHECK_MSG(outdir_prepare("test", out, true, NULL, 0) == 0, "--overwrite, foreign file in logs/");
    CHECK_MSG(!has(out, "logs/gpud.0.log") && has(out, "logs/mine.txt"), "logs/ sweep");
}

int main(void)
{
    snprintf(s_base, sizeof s_base, "/tmp/ddpipe-test-outdir-XXXXXX");
    if (!mkdtemp(s_base)) {
        perror("mkdtemp");
        return 1;
    }
    test_names();
    test_refuse_and_remove();
    test_links();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_base);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_base);
    return check_done("test_outdir");
}
