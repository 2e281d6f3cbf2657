/* loaderd_load — drives one real loaderd with many simulated gpud ranks
 * that answer every batch at once, and measures how many batches per second
 * it hands out and what one batch costs it beyond decoding (docs/SCALE.md).
 *
 *   loaderd_load LOADERD DATA [--ranks N] [--batch B] [--window W]
 *                [--threads T] [--resize R] [--crop C]
 *
 * It plays reducerd (a ROUTER loaderd JOINs and PLANs to; the plan ack
 * carries a session, loaderd's token and a job secret it drew) and N gpud
 * ranks (DEALERs named gpud-R that CREDIT W batches with the token of
 * (gpud, R, name) computed from that secret, as reducerd's WELCOME would
 * give them). Each BATCH is acked at once (CREDIT 1 + its seq): the
 * workers cost nothing, so loaderd's dispatch, its decode pool and its
 * sockets are all that is measured. The clock runs from the first CREDIT
 * to the last rank's END; every sample of DATA must have come exactly once
 * and reducerd must have been told of each batch (ISSUED), or it fails.
 *
 * Printed: batches/s and samples/s (wall; driver and loaderd share the
 * machine), loaderd's CPU while driven (/proc/PID/stat, every thread) per
 * batch and per sample. With tiny samples (idx: Fashion-MNIST, 28x28) and
 * small batches the per-batch figure is loaderd's overhead per credit. */
#include "common/clock.h"
#include "common/flags.h"
#include "common/token.h"
#include "proto/codec.h"
#include "proto/wire.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define JOB "bench"

typedef struct {
    long ranks, batch, window, threads, resize, crop;
} opts_t;

static void die(const char *what)
{
    fprintf(stderr, "loaderd_load: %s (loaderd's log is in /tmp/loaderd_load.*/)\n", what);
    exit(1);
}

static int parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.ranks = 64, .batch = 32, .window = 2, .threads = 1};
    for (int i = 3; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return -1;
        int rc = strcmp(f, "--ranks") == 0     ? flags_long("ranks", v, 1, 1024, &o->ranks)
                 : strcmp(f, "--batch") == 0   ? flags_long("batch", v, 1, DDP_MAX_BATCH, &o->batch)
                 : strcmp(f, "--window") == 0  ? flags_long("window", v, 1, 64, &o->window)
                 : strcmp(f, "--threads") == 0 ? flags_long("threads", v, 1, 256, &o->threads)
                 : strcmp(f, "--resize") == 0  ? flags_long("resize", v, 1, 16384, &o->resize)
                 : strcmp(f, "--crop") == 0    ? flags_long("crop", v, 1, 16384, &o->crop)
                                               : -1;
        if (rc != 0)
            return -1;
    }
    return argc >= 3 ? 0 : -1;
}

static pid_t start_loaderd(const char *bin, const char *data, const char *dir, const opts_t *o)
{
    char bind[300], red[300], batch[32], threads[32], resize[32], crop[32];
    snprintf(bind, sizeof bind, "ipc://%s/l", dir);
    snprintf(red, sizeof red, "ipc://%s/r", dir);
    snprintf(batch, sizeof batch, "%ld", o->batch);
    snprintf(threads, sizeof threads, "%ld", o->threads);
    snprintf(resize, sizeof resize, "%ld", o->resize);
    snprintf(crop, sizeof crop, "%ld", o->crop);
    char *argv[20] = {(char *)bin, "--data", (char *)data, "--bind", bind, "--reducer", red,
                      "--batch-size", batch, "--threads", threads, "--worker-timeout", "600"};
    int argc = 13;
    if (o->resize)
        argv[argc++] = "--resize", argv[argc++] = resize;
    if (o->crop)
        argv[argc++] = "--crop", argv[argc++] = crop;
    pid_t pid = fork();
    if (pid == 0) {
        char log[320];
        snprintf(log, sizeof log, "%s/loaderd.log", dir);
        if (!freopen(log, "w", stdout) || dup2(fileno(stdout), 2) < 0)
            _exit(127);
        execv(bin, argv);
        perror("exec loaderd");
        _exit(127);
    }
    return pid;
}

static double proc_cpu(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        die("cannot read loaderd's CPU time from /proc");
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The next valid message on sock within 20 s, else fatal. */
static void recv_msg(void *sock, zframe_t **route, ddp_msg_t *m)
{
    proto_stats_t st = {0};
    for (;;) {
        int rc = proto_recv(sock, route, m, &st);
        if (rc == 0)
            return;
        if (rc < 0)
            die("loaderd said nothing for 20 s");
        if (route)
            zframe_destroy(route);
    }
}

typedef struct {
    uint8_t secret[TOKEN_SECRET_LEN];
    uint64_t session;
    zsock_t *router;
    zframe_t *loader;
    char loader_name[DDP_MAX_NAME];
    uint64_t issued;      /* ISSUED messages heard */
} fake_reducer_t;

/* JOIN, PLAN, and the plan ack with the loader's token and the secret. */
static uint64_t plan_handshake(fake_reducer_t *r)
{
    ddp_msg_t m;
    uint64_t n = 0;
    for (int got_plan = 0; !got_plan;) {
        zframe_t *route = NULL;
        recv_msg(zsock_resolve(r->router), &route, &m);
        if (m.type == DDP_JOIN && m.u.join.role == DDP_ROLE_LOADER) {
            zframe_destroy(&r->loader);
            r->loader = zframe_dup(route);
            snprintf(r->loader_name, sizeof r->loader_name, "%s", m.u.join.name);
        } else if (m.type == DDP_PLAN && r->loader) {
            n = m.u.plan.n;
            got_plan = 1;
        }
        ddp_msg_clear(&m);
        zframe_destroy(&route);
    }
    ddp_msg_t w = {.type = DDP_WELCOME};
    w.u.welcome = (ddp_welcome_t){.rank = 0, .world = 1, .session = r->session,
                                  .has_secret = true};
    snprintf(w.u.welcome.job, sizeof w.u.welcome.job, "%s", JOB);
    token_compute(r->secret, r->session, DDP_ROLE_LOADER, -1, r->loader_name,
                  w.u.welcome.token);
    memcpy(w.u.welcome.secret, r->secret, sizeof r->secret);
    if (proto_send(zsock_resolve(r->router), r->loader, &w) != 0)
        die("cannot send the plan ack");
    return n;
}

static void send_credit(zsock_t *s, const fake_reducer_t *r, int32_t rank, uint32_t credits,
                        const uint64_t *ack)
{
    ddp_msg_t m = {.type = DDP_CREDIT};
    m.u.credit = (ddp_credit_t){.credits = credits, .rank = rank, .n_acks = ack ? 1 : 0,
                                .acks = (uint64_t *)ack, .auth = {.session = r->session}};
    snprintf(m.u.credit.worker, sizeof m.u.credit.worker, "gpud-%d", rank);
    snprintf(m.u.credit.auth.job, sizeof m.u.credit.auth.job, "%s", JOB);
    token_compute(r->secret, r->session, DDP_ROLE_GPUD, rank, m.u.credit.worker,
                  m.u.credit.auth.token);
    if (proto_send(zsock_resolve(s), NULL, &m) != 0)
        die("cannot send a CREDIT");
}

int main(int argc, char **argv)
{
    opts_t o;
    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: loaderd_load LOADERD DATA [--ranks N] [--batch B] [--window W] "
                        "[--threads T] [--resize R] [--crop C]\n");
        return 2;
    }
    char dir[] = "/tmp/loaderd_load.XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp failed");
    fake_reducer_t r = {0};
    if (token_random(r.secret, sizeof r.secret) < 0 || token_new_session(&r.session) < 0)
        die("no random bytes");
    r.router = zsock_new(ZMQ_ROUTER);
    if (!r.router || zsock_bind(r.router, "ipc://%s/r", dir) != 0)
        die("cannot bind the fake reducerd");
    zsock_set_rcvtimeo(r.router, 20000);
    pid_t pid = start_loaderd(argv[1], argv[2], dir, &o);
    uint64_t planned = plan_handshake(&r);
    if (planned == 0)
        die("loaderd planned no samples");

    int n = (int)o.ranks;
    zsock_t **gpud = calloc((size_t)n, sizeof *gpud);
    zmq_pollitem_t *items = calloc((size_t)n + 1, sizeof *items);
    uint8_t *seen = calloc(planned, 1);
    if (!gpud || !items || !seen)
        die("out of memory");
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "gpud-%d", i);
        gpud[i] = zsock_new(ZMQ_DEALER);
        zsock_set_identity(gpud[i], name);
        if (zsock_connect(gpud[i], "ipc://%s/l", dir) != 0)
            die("cannot connect to loaderd");
        items[i] = (zmq_pollitem_t){.socket = zsock_resolve(gpud[i]), .events = ZMQ_POLLIN};
    }
    items[n] = (zmq_pollitem_t){.socket = zsock_resolve(r.router), .events = ZMQ_POLLIN};

    double t0 = clock_mono_s(), cpu0 = proc_cpu(pid);
    for (int i = 0; i < n; i++)
        send_credit(gpud[i], &r, i, (uint32_t)o.window, NULL);
    uint64_t batches = 0, samples = 0, dups = 0;
    int ended = 0;
    while (ended < n) {
        int rc = zmq_poll(items, n + 1, 20000);
        if (rc == 0)
            die("nothing from loaderd for 20 s");
        if (rc < 0)
            die("zmq_poll failed");
        for (int i = 0; i < n; i++) {
            if (!(items[i].revents & ZMQ_POLLIN))
                continue;
            ddp_msg_t m;
            recv_msg(items[i].socket, NULL, &m);
            if (m.type == DDP_BATCH) {
                batches++;
                for (uint32_t k = 0; k < m.u.batch.n; k++) {
                    uint64_t id = m.u.batch.ids[k];
                    if (id >= planned || seen[id])
                        dups++;
                    else
                        seen[id] = 1, samples++;
                }
                send_credit(gpud[i], &r, i, 1, &m.u.batch.seq);
            } else if (m.type == DDP_END) {
                ended++;
            }
            ddp_msg_clear(&m);
        }
        if (items[n].revents & ZMQ_POLLIN) {
            zframe_t *route = NULL;
            ddp_msg_t m;
            recv_msg(items[n].socket, &route, &m);
            r.issued += m.type == DDP_ISSUED;
            ddp_msg_clear(&m);
            zframe_destroy(&route);
        }
    }
    double t1 = clock_mono_s(), cpu1 = proc_cpu(pid);
    /* the ISSUEDs still in the pipe, then STOP: loaderd exits 0 */
    zsock_set_rcvtimeo(r.router, 200);
    for (zframe_t *route = NULL; r.issued < batches; zframe_destroy(&route)) {
        ddp_msg_t m;
        if (proto_recv(zsock_resolve(r.router), &route, &m, &(proto_stats_t){0}) < 0)
            break;
        r.issued += m.type == DDP_ISSUED;
        ddp_msg_clear(&m);
    }
    ddp_msg_t stop = {.type = DDP_STOP};
    snprintf(stop.u.stop.reason, sizeof stop.u.stop.reason, "bench done");
    proto_send(zsock_resolve(r.router), r.loader, &stop);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("loaderd did not exit 0");
    if (samples != planned || dups || r.issued != batches) {
        fprintf(stderr, "loaderd_load: %llu of %llu samples, %llu duplicates, %llu ISSUED for "
                "%llu batches\n", (unsigned long long)samples, (unsigned long long)planned,
                (unsigned long long)dups, (unsigned long long)r.issued,
                (unsigned long long)batches);
        return 1;
    }
    double wall = t1 - t0, cpu = cpu1 - cpu0;
    printf("ranks %ld  batch %ld  window %ld  threads %ld  batches %llu  samples %llu\n", o.ranks,
           o.batch, o.window, o.threads, (unsigned long long)batches,
           (unsigned long long)samples);
    printf("wall %.3f s: %.0f batches/s, %.0f samples/s\n", wall, batches / wall,
           samples / wall);
    printf("loaderd CPU while driven %.2f s: %.1f us per batch, %.2f us per sample\n", cpu,
           cpu / (double)batches * 1e6, cpu / (double)samples * 1e6);
    for (int i = 0; i < n; i++)
        zsock_destroy(&gpud[i]);
    zsock_destroy(&r.router);
    zframe_destroy(&r.loader);
    free(gpud);
    free(items);
    free(seen);
    char path[320];
    const char *files[] = {"loaderd.log", "l", "r"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    return 0;
}
