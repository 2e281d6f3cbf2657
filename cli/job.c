#include "cli/job.h"

#include "cli/ipcdir.h"
#include "cli/launch.h"
#include "cli/outdir.h"
#include "common/clock.h"
#include "common/jobid.h"
#include "common/zsecurity.h"
#include "proto/messages.h"

#include <czmq.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct job {
    job_cfg_t cfg;
    launch_t L;
    ipcdir_t *ipc;
    job_endpoints_t e;
    zsock_t *tap;
    bool tty;
    double last_print;          /* of a progress line on a pipe */
    char fail_reason[1024];     /* from reducerd's "end" event */
    long ranks_lost;            /* training: ranks the membership events removed */
    unsigned char *joined;      /* step, train: joined[r] once rank r joined */
    bool formed;                /* train: the ranks formed the ring (training started) */
    bool seen_gen;              /* a membership event arrived: last_gen is the latest */
    uint32_t last_gen;
    long njoined;
    long live_workers;          /* of the last progress event: a check on missed joins */
    bool progressed;            /* eval: a progress event counted a batch done */
    failures_t fails;           /* why the gpuds that failed did (cli/failures.h) */
    const flag_alias_t *aliases[LAUNCH_MAX];   /* of child i: its flags in the CLI's terms */
};

static volatile sig_atomic_t s_stop = 0;
static void on_sig(int sig) { s_stop = sig; }

int job_mkdir_p(const char *dir)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0755);
            *p = '/';
        }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "ddpipe: cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* The job's private ipc folder (cli/ipcdir.h) and its four endpoints; the
 * tap at the user's --tap when given. */
static int pick_endpoints(job_t *j)
{
    char err[2048];
    if (!(j->ipc = ipcdir_new(j->cfg.out, err, sizeof err))) {
        fprintf(stderr, "ddpipe %s: cannot create a private folder for the job's sockets (%s); "
                "set TMPDIR to a short writable path\n", j->cfg.cmd, err);
        return -1;
    }
    job_endpoints_t *e = &j->e;
    snprintf(e->dir, sizeof e->dir, "%s", ipcdir_path(j->ipc));
    ipcdir_endpoint(j->ipc, "reducer", e->reducer, sizeof e->reducer);
    ipcdir_endpoint(j->ipc, "events", e->pub, sizeof e->pub);
    ipcdir_endpoint(j->ipc, "loader", e->loader, sizeof e->loader);
    if (j->cfg.reducer_ep)   /* gpuds on other nodes reach these two */
        snprintf(e->reducer, sizeof e->reducer, "%s", j->cfg.reducer_ep);
    if (j->cfg.loader_ep)
        snprintf(e->loader, sizeof e->loader, "%s", j->cfg.loader_ep);
    if (j->cfg.tap)
        snprintf(e->tap, sizeof e->tap, "%s", j->cfg.tap);
    else
        ipcdir_endpoint(j->ipc, "tap", e->tap, sizeof e->tap);
    return 0;
}

/* The job's identity (docs/SECURITY.md "Job identity"): $DDPIPE_JOB when
 * set (daemons of this job started elsewhere share it), else drawn; every
 * child inherits it in DDPIPE_JOB (srun passes the environment on too). */
static int settle_job_id(const job_cfg_t *cfg)
{
    char id[JOBID_MAX], err[256];
    if (jobid_from_env(id, sizeof id, err, sizeof err) < 0) {
        fprintf(stderr, "ddpipe %s: %s\n", cfg->cmd, err);
        return -1;
    }
    if (!id[0] && (jobid_random(id, sizeof id) < 0 || setenv(JOBID_ENV, id, 1) < 0)) {
        fprintf(stderr, "ddpipe %s: cannot draw a job id (no kernel randomness?)\n", cfg->cmd);
        return -1;
    }
    if (!cfg->quiet)
        fprintf(stderr, "ddpipe %s: job %s\n", cfg->cmd, id);
    return 0;
}

static void install_signals(void)
{
    s_stop = 0;
    zsys_handler_set(NULL);
    struct sigaction sa = {.sa_handler = on_sig};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

job_t *job_new(const job_cfg_t *cfg)
{
    job_t *j = calloc(1, sizeof *j);
    if (!j) {
        fprintf(stderr, "ddpipe %s: out of memory\n", cfg->cmd);
        return NULL;
    }
    j->cfg = *cfg;
    char logs[1024];
    snprintf(logs, sizeof logs, "%s/logs", cfg->out);
    /* the previous run's outputs go (or the job is refused) before anything starts */
    if ((!cfg->resume && outdir_prepare(cfg->cmd, cfg->out, cfg->overwrite, cfg->keep,
                                        cfg->nkeep) < 0) ||
        job_mkdir_p(logs) < 0 || settle_job_id(cfg) < 0 || pick_endpoints(j) < 0) {
        free(j);
        return NULL;
    }
    if ((cfg->step || cfg->train) && !(j->joined = calloc((size_t)cfg->workers + 1, 1))) {
        fprintf(stderr, "ddpipe %s: out of memory\n", cfg->cmd);
        ipcdir_destroy(&j->ipc);
        free(j);
        return NULL;
    }
    install_signals();
    launch_init(&j->L);
    j->tty = isatty(STDERR_FILENO);
    j->tap = zsock_new(ZMQ_SUB);
    if (!j->tap) {
        fprintf(stderr, "ddpipe %s: cannot create the tap socket\n", cfg->cmd);
        ipcdir_destroy(&j->ipc);
        free(j->joined);
        free(j);
        return NULL;
    }
    const char *topics[] = {"progress", "worker", "metric", "end", "log", "membership"};
    for (size_t i = 0; i < sizeof topics / sizeof topics[0]; i++)
        zsock_set_subscribe(j->tap, topics[i]);
    if (zs_secure_client(j->tap, j->e.tap, "tap") < 0 ||
        zsock_connect(j->tap, "%s", j->e.tap) < 0) {
        fprintf(stderr, "ddpipe %s: cannot connect to the tap %s: %s\n", cfg->cmd, j->e.tap,
                zmq_strerror(zmq_errno()));
        zsock_destroy(&j->tap);
        ipcdir_destroy(&j->ipc);
        free(j->joined);
        free(j);
        return NULL;
    }
    return j;
}

void job_destroy(job_t **pj)
{
    job_t *j = *pj;
    if (!j)
        return;
    launch_stop_all(&j->L, 3000);
    failures_free(&j->fails);
    zsock_destroy(&j->tap);
    ipcdir_destroy(&j->ipc);
    free(j->joined);
    free(j);
    *pj = NULL;
}

const job_endpoints_t *job_endpoints(const job_t *j) { return &j->e; }

int job_ipc(job_t *j, const char *name, char *buf, size_t len)
{
    if (ipcdir_endpoint(j->ipc, name, buf, len) == 0)
        return 0;
    fprintf(stderr, "ddpipe %s: bad ipc socket name '%s'\n", j->cfg.cmd, name);
    return -1;
}

int job_loader_endpoint(job_t *j, long i, char *buf, size_t len)
{
    if (i == 0) {
        snprintf(buf, len, "%s", j->e.loader);
        return 0;
    }
    char name[32];
    snprintf(name, sizeof name, "loader%ld", i);
    return job_ipc(j, name, buf, len);
}

int job_spawn(job_t *j, const char *name, const char *prog, argv_t *a)
{
    return job_spawn_as(j, name, prog, a, NULL);
}

int job_spawn_as(job_t *j, const char *name, const char *prog, argv_t *a,
                 const flag_alias_t *aliases)
{
    char log[1024];
    snprintf(log, sizeof log, "%s/logs/%s.log", j->cfg.out, name);
    unlink(log);
    /* every daemon gets the job's transport security (common/zsecurity.h) */
    if (zs_security_curve_dir())
        argv_add(a, "--curve-dir", zs_security_curve_dir());
    if (zs_security_insecure())
        argv_add(a, "--insecure", NULL);
    child_t *c = launch_spawn(&j->L, name, prog, a->v, log);
    argv_free(a);
    if (c)
        j->aliases[c - j->L.c] = aliases;
    return c ? 0 : -1;
}

const char *job_fail_reason(const job_t *j) { return j->fail_reason; }
int job_signal(const job_t *j) { (void)j; return s_stop; }

bool job_wait(job_t *j, const char *prefix, int ms) { return launch_wait(&j->L, prefix, ms); }
void job_stop(job_t *j, const char *prefix, int grace_ms) { launch_stop(&j->L, prefix, grace_ms); }

void job_fmt_eta(double s, char *buf, size_t len)
{
    if (!(s >= 0) || s > 1e8) {
        snprintf(buf, len, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

/* One line that rewrites itself on a terminal; on a pipe or file a plain
 * line at most every 5 s, plus the last one (done == total), so logs stay
 * short but complete. Training prints its own line per epoch, so its
 * progress lines show on a terminal only. */
static void print_progress(job_t *j, const ev_progress_t *p)
{
    if (j->cfg.quiet || (j->cfg.train && !j->tty))
        return;
    double now = clock_mono_s();
    bool last = p->total && p->done >= p->total;
    if (!j->tty && !last && now - j->last_print < 5.0)
        return;
    j->last_print = now;
    double pct = p->total ? 100.0 * (double)p->done / (double)p->total : 0;
    char eta[32], failed[48] = "";
    job_fmt_eta(p->eta_s, eta, sizeof eta);
    if (p->failed)
        snprintf(failed, sizeof failed, "  %llu failed", (unsigned long long)p->failed);
    fprintf(stderr, "%s%s epoch %u  %llu/%llu (%5.1f%%)  %.1f img/s  ETA %s  workers %d%s%s",
            j->tty ? "\r" : "", p->phase ? "train" : "eval", p->epoch,
            (unsigned long long)p->done, (unsigned long long)p->total, pct, p->images_per_sec,
            eta, p->workers, failed, j->tty ? "\033[K" : "\n");
    fflush(stderr);
}

/* One console line per membership change of a training job. */
static void print_membership(job_t *j, const ev_membership_t *m)
{
    if (strcmp(m->change, "formed") == 0)
        return; /* the gang as started: not a change */
    if (strcmp(m->change, "lost") == 0)
        j->ranks_lost += m->n;
    fprintf(stderr, "%sddpipe: membership generation %u: %s; %d rank%s continue from step %llu%s\n",
            j->tty ? "\n" : "", m->gen, m->reason, m->world, m->world == 1 ? "" : "s",
            (unsigned long long)m->step, m->redone ? " (the interrupted step is redone)" : "");
}

/* The error child c gave (its log's), in the CLI's terms; 1 when its log
 * said why, 0 when reason only says how it ended. */
static int reason_of(job_t *j, const child_t *c, char *reason, size_t len)
{
    return failure_reason(c, j->aliases[c - j->L.c], reason, len);
}

/* The job runs (eval: a batch was done; training: the ranks formed the
 * ring): a gpud that fails from now on says why at once. One that fails
 * before says it later (say_failures), so that a gang failing alike at
 * its start (no GPU, weights of another model) says it once, not W times. */
static bool job_going(const job_t *j) { return j->cfg.train ? j->formed : j->progressed; }

/* The reasons of the gpuds that failed and have not said why yet. */
static void say_failures(job_t *j, const char *then)
{
    long n = failures_unsaid(&j->fails);
    if (!n)
        return;
    char head[160];
    snprintf(head, sizeof head, "%ld gpud worker%s failed%s", n, n == 1 ? "" : "s", then);
    if (j->tty)
        fputc('\n', stderr);
    failures_print(&j->fails, head);
}

static void on_tap_event(job_t *j)
{
    zmsg_t *m = zmsg_recv(j->tap);
    if (!m)
        return;
    ddp_event_t ev;
    char err[256];
    if (event_decode(m, &ev, err, sizeof err) == 0) {
        if (ev.topic == EV_WORKER && j->joined && strcmp(ev.u.worker.state, "joined") == 0 &&
            ev.u.worker.rank >= 0 && ev.u.worker.rank < j->cfg.workers && !j->joined[ev.u.worker.rank]) {
            j->joined[ev.u.worker.rank] = 1;
            j->njoined++;
        }
        if (ev.topic == EV_PROGRESS) {
            j->live_workers = ev.u.progress.workers;
            print_progress(j, &ev.u.progress);
            if (ev.u.progress.done > 0 && !j->progressed) {
                j->progressed = true;
                say_failures(j, " (the others go on)");
            }
        }
        else if (ev.topic == EV_WORKER && strcmp(ev.u.worker.state, "dead") == 0)
            fprintf(stderr, "%sddpipe: worker rank %d (%s) is dead%s\n", j->tty ? "\n" : "",
                    ev.u.worker.rank, ev.u.worker.name,
                    j->cfg.train ? "" : "; its batches go to the others");
        else if (ev.topic == EV_END && ev.u.end.code != 0)
            snprintf(j->fail_reason, sizeof j->fail_reason, "%s", ev.u.end.reason);
        else if (ev.topic == EV_MEMBERSHIP) {
            j->formed = true;   /* "formed" comes first: any membership event means it */
            /* reporterd replays the generation in force to a new subscriber
             * (tapcache.h): one already seen is not a change */
            if (!j->seen_gen || ev.u.membership.gen > j->last_gen) {
                print_membership(j, &ev.u.membership);
                j->last_gen = ev.u.membership.gen;
                j->seen_gen = true;
            }
        }
        if (j->cfg.on_event)
            j->cfg.on_event(j->cfg.arg, &ev, j->tty);
        event_clear(&ev);
    }
    zmsg_destroy(&m);
}

static void drain_tap(job_t *j, zpoller_t *poller, int wait_ms)
{
    if (zpoller_wait(poller, wait_ms) == j->tap) /* all queued events: the last line too */
        do
            on_tap_event(j);
        while (zsock_events(j->tap) & ZMQ_POLLIN);
}

/* State of one supervision loop. */
typedef struct {
    child_t *last_dead;         /* the last gpud that failed */
    double dead_at;             /* when (train: reducerd's verdict is due) */
    bool gpud_finished;         /* a worker exited 0: it was told the job is over */
    long gpud_failures;         /* gpuds that failed (train: each must be a lost rank) */
} watch_t;

/* Exit 4 or 5 (a reporterd that wrote the run directory, a gpud told to
 * stop): reducerd ended a training job for a reason every rank shares (a
 * failed checkpoint write, a non-finite step), in the end event the caller
 * prints; not a daemon that failed on its own. */
static bool ended_by_reducerd(const child_t *c)
{
    return WIFEXITED(c->status) && (WEXITSTATUS(c->status) == DDP_STOP_CHECKPOINT_FAILED ||
                                    WEXITSTATUS(c->status) == DDP_STOP_NONFINITE);
}

static int on_reporterd_exit(job_t *j, child_t *c, bool ok, const char *how)
{
    if (j->tty && !j->cfg.quiet)
        fputc('\n', stderr);
    if (ok)
        return 0;
    if (ended_by_reducerd(c))
        return 1;
    fprintf(stderr, "ddpipe: the job failed (reporterd %s); the coordinator's log:\n", how);
    child_t *r = launch_find(&j->L, "reducerd");
    if (r)
        launch_tail_log(r, 8);
    launch_tail_log(c, 4);
    return 1;
}

static void on_gpud_failure(job_t *j, watch_t *w, child_t *c, const char *how)
{
    w->last_dead = c;
    w->dead_at = clock_mono_s();
    w->gpud_failures++;
    const char *then = "";
    int running = launch_running(&j->L, "gpud");
    if (j->cfg.train && running >= (j->cfg.min_workers > 0 ? j->cfg.min_workers : 1))
        then = "; the survivors continue once reducerd re-forms the ring";
    else if (j->cfg.train && running > 0 && j->cfg.rejoin_timeout_s > 0)
        then = "; too few ranks are left: training pauses for gpuds to join (--rejoin-timeout)";
    else if (j->cfg.train)
        then = "; training cannot go on without it";
    else if (launch_running(&j->L, "gpud") > 0)
        then = "; the other workers take over its batches";
    char reason[2048];
    int why = reason_of(j, c, reason, sizeof reason);
    failure_group_t *g = failures_add(&j->fails, c->name, c->log, reason);
    const char *nl = j->tty ? "\n" : "";
    if (g && !why)   /* "killed by signal 9": the line below says all there is */
        g->said = true;
    if (!job_going(j)) {   /* its reason: once the others run, or when all failed */
        fprintf(stderr, "%sddpipe: %s ended (%s)%s\n", nl, c->name, how, then);
        return;
    }
    if (g && g->said && strcmp(g->first, c->name) != 0)
        fprintf(stderr, "%sddpipe: %s ended (%s) with the error of %s%s\n", nl, c->name, how,
                g->first, then);
    else
        fprintf(stderr, "%sddpipe: %s ended (%s)%s%s%s (see %s)\n", nl, c->name, how,
                why ? ": " : "", why ? reason : "", then, c->log);
    if (g)
        g->said = true;
}

/* Training: a rank that ends before the ranks formed the ring is a failed
 * start, not a lost rank (the gang waits for all --workers ranks, and
 * --min-workers applies once training runs): name it and stop now. */
static int on_start_failure(job_t *j, child_t *c, const char *how)
{
    const char *dot = strchr(c->name, '.');
    long r = dot ? strtol(dot + 1, NULL, 10) : -1;
    bool joined = r >= 0 && r < j->cfg.workers && j->joined && j->joined[r];
    char reason[2048];
    int why = reason_of(j, c, reason, sizeof reason);
    failure_group_t *g = failures_add(&j->fails, c->name, c->log, reason);
    if (g)
        g->said = true;
    fprintf(stderr, "%sddpipe: gpud rank %ld (%s) exited %s (%s): training cannot start "
            "without it%s%s; its log: %s\n", j->tty ? "\n" : "", r, c->name,
            joined ? "after it joined, before training started" : "before it joined", how,
            why ? ": " : "", why ? reason : "", c->log);
    return 1;
}

/* --launcher slurm: the srun step of every gpud (cfg.step) ended. After the job
 * (every gpud told to stop) it exits 0; otherwise no worker is left. */
static int on_step_exit(job_t *j, watch_t *w, child_t *c, bool ok, const char *how)
{
    if (ok) {
        w->gpud_finished = true;
        return -1;
    }
    if (j->fail_reason[0])   /* reducerd ended the job and stopped the ranks: its reason counts */
        return -1;
    fprintf(stderr, "%sddpipe: the srun step of the gpuds ended (%s); Slurm says:\n",
            j->tty ? "\n" : "", how);
    j->cfg.step->print_errors(c->log);
    fprintf(stderr, "ddpipe: the tasks' last lines (TASK: line):\n");
    launch_tail_log(c, 6);
    fprintf(stderr, "ddpipe: every gpud task is gone (srun --kill-on-bad-exit); the tasks' "
            "output: %s\n", c->log);
    return 1;
}

/* -1: go on; else the job's result. */
static int on_child_exit(job_t *j, watch_t *w, child_t *c)
{
    char how[64];
    launch_describe(c, how, sizeof how);
    bool ok = WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0;
    if (strcmp(c->name, "reporterd") == 0)
        return on_reporterd_exit(j, c, ok, how);
    if (j->cfg.step && strcmp(c->name, j->cfg.step->child) == 0)
        return on_step_exit(j, w, c, ok, how);
    if (strncmp(c->name, "gpud", 4) == 0) {
        if (!ok && !ended_by_reducerd(c) && j->cfg.train && !j->formed && !j->fail_reason[0])
            return on_start_failure(j, c, how);
        if (ok || ended_by_reducerd(c))
            w->gpud_finished = true;
        else
            on_gpud_failure(j, w, c, how);
        return -1;
    }
    if (ok)
        return -1;
    if (strcmp(c->name, "reducerd") == 0 && j->fail_reason[0]) {
        /* it ended the job and said why: the caller prints the reason */
        fprintf(stderr, "%sddpipe: reducerd ended the job (%s); its log: %s\n", j->tty ? "\n" : "", how, c->log);
        return 1;
    }
    char reason[2048];
    if (reason_of(j, c, reason, sizeof reason)) {   /* it said why: that, in the CLI's terms */
        fprintf(stderr, "%sddpipe: %s failed (%s): %s (see %s)\n", j->tty ? "\n" : "", c->name,
                how, reason, c->log);
        return 1;
    }
    fprintf(stderr, "%sddpipe: %s failed (%s); its log (%s):\n", j->tty ? "\n" : "", c->name, how, c->log);
    launch_tail_log(c, 15);
    return 1;
}

/* A job nobody can finish any more: -1 while it still can. */
static int check_orphaned(job_t *j, const watch_t *w)
{
    if (!w->last_dead || w->gpud_finished)
        return -1;
    if (launch_running(&j->L, "gpud") == 0) {
        long started = 0;
        for (int i = 0; i < j->L.n; i++)
            started += strncmp(j->L.c[i].name, "gpud", 4) == 0;
        if (j->tty)
            fputc('\n', stderr);
        failures_print(&j->fails, started == 1 ? "the gpud worker failed" : "every gpud worker failed");
        return 1;
    }
    /* training: reducerd either re-forms the ring without the dead rank (a
     * membership event: every failed gpud is a lost rank; a fenced rank
     * exits after it was removed) or names it and ends the job; if neither
     * happens within the bound, end the job here so the exit stays bounded */
    if (j->cfg.train && w->gpud_failures <= j->ranks_lost)
        return -1;
    if (j->cfg.train && j->cfg.verdict_s > 0 && clock_mono_s() - w->dead_at > j->cfg.verdict_s) {
        fprintf(stderr, "ddpipe: %s died and the coordinator neither re-formed the ring nor ended "
                "the job within %lds; stopping it (see %s)\n", w->last_dead->name,
                j->cfg.verdict_s, w->last_dead->log);
        return 1;
    }
    return -1;
}

/* --launcher slurm: the ranks that have not joined yet, each with the node
 * its srun task was started on (or that none was). */
static void print_missing(job_t *j, const char *what)
{
    const job_step_t *st = j->cfg.step;
    child_t *step = launch_find(&j->L, st->child);
    for (long r = 0; r < j->cfg.workers; r++) {
        if (j->joined[r])
            continue;
        char where[1200];
        st->where(st->self, step ? step->log : "", r, where, sizeof where);
        fprintf(stderr, "ddpipe: gpud rank %ld %s; its srun task: %s\n", r, what, where);
    }
    if (step)
        fprintf(stderr, "ddpipe: the tasks' output: %s\n", step->log);
}

/* -1 while every gpud joined or may still join within --start-timeout. */
static int check_started(job_t *j, double t0)
{
    /* a "joined" event published before the tap's subscription took hold
     * is lost (PUB/SUB): the live count of the progress events says so too */
    if (!j->cfg.step || j->njoined >= j->cfg.workers || j->live_workers >= j->cfg.workers ||
        j->cfg.start_timeout_s <= 0 || clock_mono_s() - t0 <= j->cfg.start_timeout_s)
        return -1;
    char what[160];
    snprintf(what, sizeof what, "did not join reducerd within %lds (--start-timeout)",
             j->cfg.start_timeout_s);
    fprintf(stderr, "%sddpipe: %ld of %ld gpud%s joined the job:\n", j->tty ? "\n" : "",
            j->njoined, j->cfg.workers, j->cfg.workers == 1 ? "" : "s");
    print_missing(j, what);
    return 1;
}

int job_supervise(job_t *j)
{
    double t0 = clock_mono_s();
    watch_t w = {0};
    zpoller_t *poller = zpoller_new(j->tap, NULL);
    int result = -1;
    while (result < 0) {
        drain_tap(j, poller, 100);
        if (s_stop) {
            fprintf(stderr, "%sddpipe: interrupted: stopping the daemons\n", j->tty ? "\n" : "");
            result = 130;
            break;
        }
        if (j->cfg.timeout_s && clock_mono_s() - t0 > j->cfg.timeout_s) {
            fprintf(stderr, "ddpipe: --timeout %lds reached: stopping the job\n", j->cfg.timeout_s);
            result = 1;
            break;
        }
        child_t *c;
        while (result < 0 && (c = launch_reap(&j->L)))
            result = on_child_exit(j, &w, c);
        if (result < 0)
            result = check_orphaned(j, &w);
        if (result < 0)
            result = check_started(j, t0);
    }
    if (result == 0 && j->cfg.step && j->njoined < j->cfg.workers && j->live_workers < j->cfg.workers)
        print_missing(j, "never joined: the others did its share");
    say_failures(j, result == 0 ? " (the others did their batches)" : "");
    if (result != 0 && !j->fail_reason[0])
        drain_tap(j, poller, 200); /* the "end" event may trail reporterd's exit */
    zpoller_destroy(&poller);
    return result;
}
