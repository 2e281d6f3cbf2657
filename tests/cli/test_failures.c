/* failures: a failed daemon's reason read from its log and said in the
 * CLI's terms. The daemon flags a table names are replaced only as whole
 * flags; the reason is the last ERROR line among the log's last 8 (an
 * older one the daemon lived past is not blamed), else its last line that
 * is not a log line, else how it ended; a signal is the reason whatever
 * the log says; no control character of the log reaches the console;
 * reasons are grouped with their lowest ranks in order. */
#include "cli/failures.h"
#include "tests/reporterd/check.h" /* CHECK_MSG and check_done, shared by the C tests */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const flag_alias_t s_aliases[] = {{"--backend", "--device"},
                                         {"--threads", "--loader-threads"},
                                         {NULL, NULL}};

static char s_dir[] = "/tmp/ddp-test-failures-XXXXXX";

#define LOGLINE(level, msg) "2026-11-28T12:00:00.000Z gpud[0] " level " " msg "\n"

/* child c exited with code (or was killed by signal sig) after writing text to its log */
static child_t s_child(const char *name, const char *text, int code, int sig)
{
    child_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    snprintf(c.log, sizeof c.log, "%s/%s.log", s_dir, name);
    FILE *f = fopen(c.log, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    c.status = sig ? sig : code << 8; /* as waitpid sets it */
    return c;
}

static void test_translate(void)
{
    char out[256];
    failure_translate("use --backend cpu", s_aliases, out, sizeof out);
    CHECK_MSG(strcmp(out, "use --device cpu") == 0, "%s", out);
    failure_translate("--backend=cuda or --threads 2", s_aliases, out, sizeof out);
    CHECK_MSG(strcmp(out, "--device=cuda or --loader-threads 2") == 0, "%s", out);
    /* not a whole flag: left as written */
    failure_translate("--backend-x a--backend --backendy", s_aliases, out, sizeof out);
    CHECK_MSG(strcmp(out, "--backend-x a--backend --backendy") == 0, "%s", out);
    /* a short buffer is cut, never overrun */
    failure_translate("use --backend cpu", s_aliases, out, 8);
    CHECK_MSG(strcmp(out, "use --d") == 0, "%s", out);
}

static void test_reason(void)
{
    char buf[512];
    child_t c = s_child("gpud.0",
                        LOGLINE("INFO", "starting") LOGLINE("ERROR", "no CUDA device: use --backend cpu")
                            LOGLINE("INFO", "exiting: 1"),
                        1, 0);
    CHECK(failure_reason(&c, s_aliases, buf, sizeof buf) == 1);
    CHECK_MSG(strcmp(buf, "no CUDA device: use --device cpu") == 0, "%s", buf);

    /* an error the daemon lived past, 9 lines up: not why it ended */
    c = s_child("gpud.1",
                LOGLINE("ERROR", "old trouble") LOGLINE("INFO", "1") LOGLINE("INFO", "2")
                    LOGLINE("INFO", "3") LOGLINE("INFO", "4") LOGLINE("INFO", "5") LOGLINE("INFO", "6")
                        LOGLINE("INFO", "7") LOGLINE("INFO", "8"),
                3, 0);
    CHECK(failure_reason(&c, s_aliases, buf, sizeof buf) == 0);
    CHECK_MSG(strstr(buf, "exit 3") && !strstr(buf, "old trouble"), "%s", buf);

    /* before logging started: the last plain line */
    c = s_child("gpud.2", "gpud: --threads needs a value (N)\n", 2, 0);
    CHECK(failure_reason(&c, s_aliases, buf, sizeof buf) == 1);
    CHECK_MSG(strcmp(buf, "gpud: --loader-threads needs a value (N)") == 0, "%s", buf);

    /* a signal is the reason, whatever the log said */
    c = s_child("gpud.3", LOGLINE("ERROR", "something"), 0, SIGKILL);
    CHECK(failure_reason(&c, s_aliases, buf, sizeof buf) == 0);
    CHECK_MSG(strstr(buf, "signal 9") != NULL, "%s", buf);

    /* terminal control characters never reach the console */
    c = s_child("gpud.4", LOGLINE("ERROR", "cannot read \033[31mred\033[0m.jpg\r\a"), 1, 0);
    CHECK(failure_reason(&c, s_aliases, buf, sizeof buf) == 1);
    CHECK_MSG(strchr(buf, '\033') == NULL && strchr(buf, '\a') == NULL, "%s", buf);
    CHECK(strstr(buf, "?[31mred?[0m.jpg") != NULL);

    /* a log past the 64 KiB read: its tail still gives the last error */
    size_t big = 200 * 1024;
    char *text = malloc(big + 256);
    CHECK(text != NULL);
    if (text) {
        memset(text, 'x', big);
        for (size_t i = 99; i < big; i += 100)
            text[i] = '\n';
        snprintf(text + big, 256, "\n" LOGLINE("ERROR", "the end"));
        c = s_child("gpud.5", text, 1, 0);
        CHECK(failure_reason(&c, s_aliases, buf, sizeof buf) == 1);
        CHECK_MSG(strcmp(buf, "the end") == 0, "%s", buf);
        free(text);
    }

    /* no log at all: how it ended */
    c = s_child("gpud.6", "", 1, 0);
    unlink(c.log);
    CHECK(failure_reason(&c, s_aliases, buf, sizeof buf) == 0);
    CHECK_MSG(strstr(buf, "exit 1") != NULL, "%s", buf);
}

static void test_groups(void)
{
    failures_t f;
    memset(&f, 0, sizeof f);
    CHECK(failures_add(&f, "gpud.5", "/l/gpud.5.log", "same") != NULL);
    CHECK(failures_add(&f, "gpud.2", "/l/gpud.2.log", "other") != NULL);
    failure_group_t *g = failures_add(&f, "gpud.1", "/l/gpud.1.log", "same");
    CHECK(g != NULL && f.ngroups == 2 && f.n == 3);
    if (g) {
        CHECK(g->n == 2 && g->nrank == 2 && g->rank[0] == 1 && g->rank[1] == 5);
        CHECK_MSG(strcmp(g->log, "/l/gpud.1.log") == 0, "the lowest rank's log: %s", g->log);
    }
    /* more ranks than are named: only counted */
    for (int r = 10; r < 30; r++) {
        char name[32];
        snprintf(name, sizeof name, "gpud.%d", r);
        failures_add(&f, name, "/l/x.log", "same");
    }
    CHECK(g && g->n == 22 && g->nrank == FAILURE_RANKS && g->rank[FAILURE_RANKS - 1] == 15); /* 1, 5, 10..15 */
    CHECK(failures_unsaid(&f) == 23);
    fprintf(stderr, "(the lines below are expected)\n");
    failures_print(&f, "every gpud worker failed");
    CHECK(failures_unsaid(&f) == 0);
    failures_free(&f);
}

int main(void)
{
    CHECK(mkdtemp(s_dir) != NULL);
    test_translate();
    test_reason();
    test_groups();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    CHECK(system(cmd) == 0);
    return check_done("test_failures");
}
