/* common/zsecurity: which addresses count as loopback, the bind rule with
 * and without --insecure, the argv parser, and the errors for a bad
 * --curve-dir (missing, malformed, mismatched certificates). */
#include "common/zsecurity.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CHECK(c)                                                                                \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);              \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static bool lo(const char *h) { return zs_host_is_loopback(h, strlen(h)); }

static int bind_rule(const char *ep)
{
    zsock_t *s = zsock_new(ZMQ_PULL);
    CHECK(s);
    int rc = zs_secure_server(s, ep, "test");
    zsock_destroy(&s);
    return rc;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

int main(void)
{
    CHECK(lo("127.0.0.1") && lo("127.9.8.7") && lo("localhost") && lo("::1") && lo("[::1]"));
    CHECK(!lo("*") && !lo("0.0.0.0") && !lo("10.0.0.1") && !lo("eth0") && !lo("") &&
          !lo("128.0.0.1") && !lo("[::]") && !lo("example.com"));

    CHECK(zs_security_init(NULL, false) == 0);
    CHECK(bind_rule("tcp://127.0.0.1:5555") == 0 && bind_rule("tcp://[::1]:5555") == 0);
    CHECK(bind_rule("ipc:///tmp/x") == 0 && bind_rule("inproc://x") == 0);
    CHECK(bind_rule("tcp://*:5555") < 0 && bind_rule("tcp://0.0.0.0:5555") < 0 &&
          bind_rule("tcp://10.1.2.3:5555") < 0);
    CHECK(zs_security_check_listen("127.0.0.1:9100", "http") == 0);
    CHECK(zs_security_check_listen(":9100", "http") < 0);
    CHECK(zs_security_init(NULL, true) == 0);   /* --insecure: allowed, warned */
    CHECK(bind_rule("tcp://*:5555") == 0 && zs_security_check_listen("0.0.0.0:9100", "h") == 0);

    /* the argv parser takes its options out and leaves the rest in order */
    char a0[] = "prog", a1[] = "--out", a2[] = "x", a3[] = "--insecure", a4[] = "--curve-dir=",
         a5[] = "--verbose";
    char *argv[] = {a0, a1, a2, a3, a5, NULL};
    int argc = 5;
    unsetenv("DDPIPE_CURVE_DIR");
    CHECK(zs_security_args(&argc, argv) == 0);
    CHECK(argc == 4 && strcmp(argv[1], "--out") == 0 && strcmp(argv[2], "x") == 0 &&
          strcmp(argv[3], "--verbose") == 0 && argv[4] == NULL && zs_security_insecure() &&
          !zs_security_curve_dir());
    char *argv2[] = {a0, a4, NULL};
    argc = 2;
    CHECK(zs_security_args(&argc, argv2) < 0);   /* an empty --curve-dir= */
    char a6[] = "--curve-dir", a7[] = "--insecure";
    char *argv3[] = {a0, a6, a7, NULL};
    argc = 3;
    CHECK(zs_security_args(&argc, argv3) < 0);   /* the next flag is never the directory */

    /* bad directories: each an error, never CURVE half on */
    char dir[] = "/tmp/ddp-zsecurity-XXXXXX", p[300], cmd[400];
    CHECK(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/nope", dir);
    CHECK(zs_security_init(p, false) < 0 && !zs_security_curve_dir());
    CHECK(zs_security_init(dir, false) < 0);                   /* no server.cert */
    snprintf(p, sizeof p, "%s/server.cert", dir);
    write_file(p, "curve\n    public-key = \"short\"\n");
    CHECK(zs_security_init(dir, false) < 0);                   /* malformed key */
    zcert_t *a = zcert_new(), *b = zcert_new();
    CHECK(a && b && zcert_save(a, p) == 0);
    CHECK(zs_security_init(dir, false) == 0 && zs_security_curve_dir());
    snprintf(p, sizeof p, "%s/other", dir);
    CHECK(zcert_save(b, p) == 0);
    snprintf(cmd, sizeof cmd, "cp %s/other_secret %s/server.cert_secret", dir, dir);
    CHECK(system(cmd) == 0);
    CHECK(zs_security_init(dir, false) < 0);                   /* not one pair */
    CHECK(zcert_save(a, (snprintf(p, sizeof p, "%s/server.cert", dir), p)) == 0);
    CHECK(zs_security_init(dir, false) == 0);
    CHECK(bind_rule("tcp://*:5555") < 0);                      /* no authorized/ */
    snprintf(p, sizeof p, "%s/authorized", dir);
    CHECK(mkdir(p, 0700) == 0);
    CHECK(bind_rule("tcp://*:5555") == 0);                     /* CURVE: any address */
    zsock_t *c = zsock_new(ZMQ_PUSH);
    CHECK(c && zs_secure_client(c, "tcp://10.0.0.1:1", "test") < 0);   /* no client secret */
    zsock_destroy(&c);
    zcert_destroy(&a);
    zcert_destroy(&b);
    zs_security_shutdown();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    printf("zsecurity: OK\n");
    return 0;
}
