/* ddpipe-garbage really sends garbage: every message of every kind it
 * throws at a ROUTER is rejected by proto_recv (and counted), every event
 * it publishes is rejected by event_decode, and it exits 0. */
#include "common/log.h"
#include "tests/proto/check.h"
#include "proto/event.h"
#include "proto/wire.h"

#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Starts ddpipe-garbage ENDPOINT args... in the background. */
static pid_t start_garbage(const char *endpoint, char *const *args)
{
    const char *bin = getenv("DDPIPE_BIN");
    char path[1024];
    snprintf(path, sizeof path, "%s/ddpipe-garbage", bin ? bin : ".");
    char *argv[16] = {path, (char *)endpoint};
    for (int i = 0; args[i] && i < 13; i++)
        argv[i + 2] = args[i];
    pid_t pid;
    if (posix_spawn(&pid, path, NULL, NULL, argv, environ) != 0)
        return -1;
    return pid;
}

static int wait_garbage(pid_t pid)
{
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

/* Runs it to completion: fine for sockets that queue while we wait
 * (ROUTER), not for SUB (its subscription goes out only when this thread
 * calls into the socket). */
static int run_garbage(const char *endpoint, char *const *args)
{
    return wait_garbage(start_garbage(endpoint, args));
}

static void router_rejects_everything(const char *endpoint)
{
    zsock_t *router = zsock_new_router(endpoint);
    CHECK(router != NULL);
    zsock_set_rcvtimeo(router, 1000);
    CHECK(run_garbage(endpoint, (char *[]){"all", "--count", "6", "--seed", "7", NULL}) == 0);
    proto_stats_t stats = {0};
    ddp_msg_t m;
    zframe_t *route;
    int rc, accepted = 0;
    while ((rc = proto_recv(router, &route, &m, &stats)) != -1) {
        if (rc == 0) {
            accepted++;
            fprintf(stderr, "accepted a %s from ddpipe-garbage\n", proto_type_name(m.type));
            ddp_msg_clear(&m);
            zframe_destroy(&route);
        }
    }
    CHECK_MSG(stats.received == 8 * 6, "received %lu", (unsigned long)stats.received);
    CHECK(stats.rejected == stats.received && accepted == 0);
    zsock_destroy(&router);
}

static void subscriber_rejects_everything(const char *endpoint)
{
    char bind[160];
    snprintf(bind, sizeof bind, "@%s", endpoint); /* czmq's SUB connects by default */
    zsock_t *sub = zsock_new_sub(bind, "");
    CHECK(sub != NULL);
    zsock_set_rcvtimeo(sub, 3000);
    pid_t pid = start_garbage(endpoint, (char *[]){"all", "--socket", "pub", "--count", "3", NULL});
    CHECK(pid > 0);
    int got = 0;
    zmsg_t *z;
    while (got < 8 * 3 && (z = zmsg_recv(sub))) {
        ddp_event_t ev;
        char err[256];
        got++;
        CHECK_MSG(event_decode(z, &ev, err, sizeof err) == -1, "event %d accepted", got);
        event_clear(&ev);
        zmsg_destroy(&z);
    }
    CHECK(wait_garbage(pid) == 0);
    CHECK_MSG(got == 8 * 3, "got %d events", got);
    zsock_destroy(&sub);
}

int main(void)
{
    log_init("test_garbage", -1, 0);
    char ep[128];
    snprintf(ep, sizeof ep, "ipc:///tmp/ddp-garbage-test-%d", (int)getpid());
    router_rejects_everything(ep);
    unlink(ep + strlen("ipc://"));   /* the socket file outlives the socket */
    snprintf(ep, sizeof ep, "ipc:///tmp/ddp-garbage-test-sub-%d", (int)getpid());
    subscriber_rejects_everything(ep);
    unlink(ep + strlen("ipc://"));
    /* no peer: a clear failure, not a hang */
    snprintf(ep, sizeof ep, "ipc:///tmp/ddp-garbage-nobody-%d", (int)getpid());
    CHECK(run_garbage(ep, (char *[]){"random", NULL}) == 1);
    CHECK(run_garbage(ep, (char *[]){"no-such-kind", NULL}) == 2);
    return check_exit("test_garbage");
}
