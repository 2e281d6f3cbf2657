/* slurm — the job's part on Slurm: endpoints on this node, the srun step
 * of the gpuds, and what the step's log says about its nodes. */
#include "cli/slurm.h"

#include "cli/argv.h"
#include "cli/launch.h"
#include "cli/launcher.h"
#include "common/zsecurity.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The first IPv4 address of host (ZeroMQ binds addresses, not names). */
static int resolve_ipv4(const char *host, char *addr, size_t len, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "cannot resolve %s to an IPv4 address: %s", host,
                 rc ? gai_strerror(rc) : "no address");
        return -1;
    }
    const struct sockaddr_in *in = (const struct sockaddr_in *)res->ai_addr;
    if (!inet_ntop(AF_INET, &in->sin_addr, addr, (socklen_t)len)) {
        snprintf(err, errlen, "cannot print the address of %s: %s", host, strerror(errno));
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    return 0;
}

/* A port nobody listens on at addr now: bound to port 0, the kernel's
 * choice read back. The socket stays open (*fd) so a second call gets
 * another port; the caller closes it just before the daemon binds. */
static int free_port(const char *addr, int *fd, int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
        return -1;
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t n = sizeof sa;
    if (*fd < 0 || bind(*fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(*fd, (struct sockaddr *)&sa, &n) < 0) {
        if (*fd >= 0)
            close(*fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return 0;
}

/* srun on $PATH. */
static int find_srun(char *buf, size_t len)
{
    const char *path = getenv("PATH");
    char dirs[8192];
    snprintf(dirs, sizeof dirs, "%s", path && *path ? path : "/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if ((size_t)snprintf(buf, len, "%s/srun", d) < len && access(buf, X_OK) == 0)
            return 0;
    }
    return -1;
}

static long env_long(const char *name)
{
    const char *v = getenv(name);
    return v ? strtol(v, NULL, 10) : 0;
}

/* The daemons here are reached over tcp on the node's address: a loopback
 * address reaches no other node, and anything else needs CURVE (or the
 * user's --insecure) as every non-loopback listen does. */
static int check_reachable(const slurm_t *s, const char *cmd)
{
    bool loopback = zs_host_is_loopback(s->addr, strlen(s->addr));
    if (loopback && env_long("SLURM_JOB_NUM_NODES") > 1) {
        fprintf(stderr, "ddpipe %s: %s resolves to %s (loopback) on this node: the gpuds on the "
                "other nodes of the allocation (%s) cannot reach it; give --host with this "
                "node's name or address on the cluster network\n", cmd, s->host, s->addr, s->nodes);
        return -1;
    }
    if (!loopback && !zs_security_curve_dir() && !zs_security_insecure()) {
        fprintf(stderr, "ddpipe %s: the gpuds reach this node over tcp at %s (%s): give "
                "--curve-dir DIR (keys from 'ddpipe keygen DIR', on every node) or, on a "
                "trusted network, --insecure\n", cmd, s->host, s->addr);
        return -1;
    }
    return 0;
}

/* slurm_where as job_step_t's where. */
static void step_where(const void *self, const char *log, long rank, char *buf, size_t len)
{
    slurm_where(self, log, rank, buf, len);
}

int slurm_prepare(slurm_t *s, const char *cmd, const char *host, long port)
{
    memset(s, 0, sizeof *s);
    const char *nodes = getenv("SLURM_JOB_NODELIST");
    snprintf(s->nodes, sizeof s->nodes, "%s", nodes && *nodes ? nodes : "?");
    if (host)
        snprintf(s->host, sizeof s->host, "%s", host);
    else if (gethostname(s->host, sizeof s->host - 1) < 0) {
        fprintf(stderr, "ddpipe %s: cannot read this node's host name: %s; give --host\n", cmd,
                strerror(errno));
        return -1;
    }
    char err[512];
    if (resolve_ipv4(s->host, s->addr, sizeof s->addr, err, sizeof err) < 0) {
        fprintf(stderr, "ddpipe %s: %s; give --host with this node's name or address%s\n", cmd,
                err, host ? "" : " (the host name was this node's)");
        return -1;
    }
    if (check_reachable(s, cmd) < 0)
        return -1;
    int ports[2] = {(int)port, (int)port + 1}, fds[2] = {-1, -1};
    if (!port && (free_port(s->addr, &fds[0], &ports[0]) < 0 ||
                  free_port(s->addr, &fds[1], &ports[1]) < 0)) {
        fprintf(stderr, "ddpipe %s: cannot find a free tcp port on %s (%s): %s; give --port P\n",
                cmd, s->host, s->addr, strerror(errno));
        if (fds[0] >= 0)
            close(fds[0]);
        return -1;
    }
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    snprintf(s->reducer, sizeof s->reducer, "tcp://%s:%d", s->addr, ports[0]);
    snprintf(s->loader, sizeof s->loader, "tcp://%s:%d", s->addr, ports[1]);
    snprintf(s->gpud_reducer, sizeof s->gpud_reducer, "tcp://%s:%d", s->host, ports[0]);
    snprintf(s->gpud_loader, sizeof s->gpud_loader, "tcp://%s:%d", s->host, ports[1]);
    if (find_srun(s->srun, sizeof s->srun) < 0) {
        fprintf(stderr, "ddpipe %s: --launcher slurm: srun is not on PATH (install Slurm's "
                "client, Debian's slurm-client)\n", cmd);
        return -1;
    }
    s->step = (job_step_t){SLURM_STEP_CHILD, s, step_where, slurm_print_errors};
    return 0;
}

int slurm_spawn_gpuds(job_t *j, const slurm_t *s, long workers, gpud_options_t *g)
{
    char bindir[4096], ddpipe[4200], ntasks[48];
    launch_bindir(bindir, sizeof bindir);
    snprintf(ddpipe, sizeof ddpipe, "%s/ddpipe", bindir);
    snprintf(ntasks, sizeof ntasks, "--ntasks=%ld", workers);
    g->loader = s->gpud_loader;
    g->reducer = s->gpud_reducer;
    g->rank = -1;          /* each task's own: ddpipe __slurm-task adds them */
    g->name = NULL;
    argv_t a;
    argv_init(&a, s->srun);
    /* one task dead: the step ends (the job fails, naming the node) rather
     * than the others waiting for it */
    argv_add(&a, ntasks, NULL);
    argv_add(&a, "--kill-on-bad-exit=1", NULL);
    argv_add(&a, "--label", NULL);
    argv_add(&a, ddpipe, NULL);
    argv_add(&a, "__slurm-task", NULL);
    argv_add(&a, "gpud", NULL);
    if (argv_add_options(&a, &gpud_options_table, g) < 0) {
        argv_free(&a);
        return -1;
    }
    /* argv_add stops at its capacity: a cut command line would start
     * gpuds with other settings than the job's */
    if (a.n + 4 >= (int)(sizeof a.v / sizeof a.v[0])) {
        fprintf(stderr, "ddpipe: the srun command line has too many options (%d)\n", a.n);
        argv_free(&a);
        return -1;
    }
    return job_spawn(j, SLURM_STEP_CHILD, s->srun, &a);
}

void slurm_where(const slurm_t *s, const char *step_log, long rank, char *buf, size_t len)
{
    char want[64], line[2048];
    snprintf(want, sizeof want, "srun task %ld on node ", rank);
    FILE *f = fopen(step_log, "r");
    while (f && fgets(line, sizeof line, f)) {
        char *at = strstr(line, want);
        if (!at)
            continue;
        at += strlen(want);
        at[strcspn(at, ": \n")] = 0;
        snprintf(buf, len, "node %s", at);
        fclose(f);
        return;
    }
    if (f)
        fclose(f);
    snprintf(buf, len, "no node: srun started no task %ld (the allocation's nodes: %s)", rank,
             s ? s->nodes : "?");
}

int slurm_print_errors(const char *step_log)
{
    FILE *f = fopen(step_log, "r");
    if (!f)
        return 0;
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "srun: error:", 12) == 0 && n++ < 20)
            fprintf(stderr, "  %s", line);
    fclose(f);
    return n;
}

/* ---- ddpipe __slurm-task gpud ARGS: one srun task ----------------------- */

/* gpud's ring on this node's address: a loopback one reaches no other node. */
static int task_ring(const char *node, char *ring, size_t len)
{
    char host[256] = "", addr[64], err[512];
    if (gethostname(host, sizeof host - 1) < 0 ||
        resolve_ipv4(host, addr, sizeof addr, err, sizeof err) < 0) {
        fprintf(stderr, "ddpipe: srun task on node %s: %s; the gradient ring needs this node's "
                "address\n", node, host[0] ? err : strerror(errno));
        return -1;
    }
    if (zs_host_is_loopback(addr, strlen(addr)) && env_long("SLURM_STEP_NUM_NODES") > 1) {
        fprintf(stderr, "ddpipe: srun task on node %s: its host name %s resolves to %s "
                "(loopback): the ranks on the other nodes cannot reach its ring; fix the node's "
                "/etc/hosts or DNS\n", node, host, addr);
        return -1;
    }
    snprintf(ring, len, "tcp://%s:0", addr);
    return 0;
}

int cmd_slurm_task(int argc, char **argv)
{
    const char *procid = getenv("SLURM_PROCID");
    if (argc < 2 || strcmp(argv[1], "gpud") != 0 || !procid) {
        fprintf(stderr, "ddpipe __slurm-task gpud ARGS: what each srun task of 'ddpipe eval|train "
                "--launcher slurm' runs (needs SLURM_PROCID)\n");
        return 2;
    }
    char *end;
    long rank = strtol(procid, &end, 10);
    char node[256] = "";
    const char *nodename = getenv("SLURMD_NODENAME");
    if (nodename && *nodename)
        snprintf(node, sizeof node, "%s", nodename);
    else
        gethostname(node, sizeof node - 1);
    if (*end || rank < 0 || rank > 65535) {
        fprintf(stderr, "ddpipe: srun task on node %s: SLURM_PROCID=%s is not a rank\n", node, procid);
        return 2;
    }
    bool train = false;
    for (int i = 2; i < argc; i++)
        train |= strcmp(argv[i], "--train") == 0;
    char ring[128] = "", name[64], rank_s[24], bindir[4096], gpud[4200];
    if (train && task_ring(node, ring, sizeof ring) < 0)
        return 1;
    snprintf(rank_s, sizeof rank_s, "%ld", rank);
    snprintf(name, sizeof name, "gpud.%ld@%.40s", rank, node);
    launch_bindir(bindir, sizeof bindir);
    snprintf(gpud, sizeof gpud, "%s/gpud", bindir);
    char **av = calloc((size_t)argc + 8, sizeof *av);
    if (!av) {
        fprintf(stderr, "ddpipe: srun task %ld on node %s: out of memory\n", rank, node);
        return 1;
    }
    int n = 0;
    av[n++] = gpud;
    for (int i = 2; i < argc; i++)
        av[n++] = argv[i];
    av[n++] = "--rank";
    av[n++] = rank_s;
    av[n++] = "--name";
    av[n++] = name;
    if (train) {
        av[n++] = "--ring-bind";
        av[n++] = ring;
    }
    /* the line slurm_where reads: which node this rank is on */
    fprintf(stderr, "ddpipe: srun task %ld on node %s: gpud rank %ld as %s%s%s\n", rank, node, rank,
            name, train ? ", ring " : "", ring);
    fflush(stderr);
    execv(gpud, av);
    fprintf(stderr, "ddpipe: srun task %ld on node %s: cannot run %s: %s (set DDPIPE_BIN to the "
            "folder holding the daemons on every node)\n", rank, node, gpud, strerror(errno));
    free(av);
    return 127;
}

int slurm_configure(slurm_t *s, job_cfg_t *cfg, const slurm_request_t *r)
{
    if (!dd_launcher_is_slurm(r->launcher))
        return 0;
    if (r->loaders > 1) {
        /* the extra loaderds bind private ipc sockets the srun tasks cannot reach */
        fprintf(stderr, "ddpipe %s: --loaders %ld with --launcher slurm is not supported yet: "
                "use --loaders 1, or start the loaderds by hand (docs/SCALE.md \"Several "
                "loaderds\")\n", r->cmd, r->loaders);
        return 2;
    }
    if (slurm_prepare(s, r->cmd, r->host, r->port) < 0)
        return 1;
    cfg->reducer_ep = s->reducer;
    cfg->loader_ep = s->loader;
    cfg->step = &s->step;
    cfg->workers = r->workers;
    cfg->start_timeout_s = r->start_timeout_s;
    return 0;
}
