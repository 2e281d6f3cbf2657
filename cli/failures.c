/* failures — see failures.h. */
#include "cli/failures.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TAIL_BYTES (64 * 1024)   /* a log's tail read for its last error */
/* A daemon exits right after its fatal error (a line or two follow it,
 * gpud's "exiting: ..."): an error further up is an old one it lived on
 * after, not why it ended. */
#define LAST_LINES 8

static bool flag_char(char ch) { return isalnum((unsigned char)ch) || ch == '-' || ch == '_'; }

void failure_translate(const char *in, const flag_alias_t *aliases, char *out, size_t len)
{
    if (!len)
        return;
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < len;) {
        size_t n = 0;
        if (p[0] == '-' && p[1] == '-' && (p == in || !flag_char(p[-1])))
            while (flag_char(p[n]))
                n++;
        const char *to = NULL;
        for (const flag_alias_t *a = aliases; n && a && a->daemon; a++)
            if (strlen(a->daemon) == n && strncmp(p, a->daemon, n) == 0)
                to = a->cli;
        if (to) {
            int w = snprintf(out + o, len - o, "%s", to);
            o = w < 0 ? o : o + (size_t)w < len ? o + (size_t)w : len - 1;
            p += n;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = 0;
}

/* The message of log line LINE when it is common/log.c's "TIME NAME LEVEL
 * MESSAGE" at level ERROR; *is_log says whether it is a log line at all. */
static const char *error_message(const char *line, bool *is_log)
{
    static const char *levels[] = {"ERROR ", "WARN ", "INFO ", "DEBUG "};
    *is_log = false;
    const char *name = strchr(line, ' ');
    /* the time: 2024-05-01T12:00:00.000Z */
    if (!isdigit((unsigned char)line[0]) || !name || name - line != 24 || name[-1] != 'Z')
        return NULL;
    const char *level = strchr(name + 1, ' ');
    if (!level)
        return NULL;
    level++;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (strncmp(level, levels[i], strlen(levels[i])) == 0) {
            *is_log = true;
            return i == 0 ? level + strlen(levels[0]) : NULL;
        }
    return NULL;
}

/* 1 with the message of the last ERROR line among LOG's LAST_LINES (else
 * its last line there that is not a log line) in buf; 0 when none is. */
static int last_error(const char *log, char *buf, size_t len)
{
    int fd = open(log, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    off_t from = fstat(fd, &st) == 0 && st.st_size > TAIL_BYTES ? st.st_size - TAIL_BYTES : 0;
    char *text = malloc(TAIL_BYTES + 1);
    ssize_t got = text && lseek(fd, from, SEEK_SET) == from ? read(fd, text, TAIL_BYTES) : -1;
    close(fd);
    if (got <= 0) {
        free(text);
        return 0;
    }
    text[got] = 0;
    char *line = text;
    if (from > 0) {   /* the first line is cut: skip it */
        char *nl = strchr(text, '\n');
        line = nl ? nl + 1 : text + got;
    }
    const char *error = NULL, *raw = NULL;
    long nline = 0, error_at = 0, raw_at = 0;
    while (*line) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\r' || line[n - 1] == ' '))
            line[--n] = 0;
        bool is_log;
        const char *msg = error_message(line, &is_log);
        if (n)
            nline++;
        if (msg && *msg) {
            error = msg;
            error_at = nline;
        } else if (!is_log && n) {
            raw = line;
            raw_at = nline;
        }
        if (!nl)
            break;
        line = nl + 1;
    }
    error = error && error_at > nline - LAST_LINES ? error : NULL;
    raw = raw && raw_at > nline - LAST_LINES ? raw : NULL;
    const char *why = error ? error : raw;
    if (why) {
        snprintf(buf, len, "%s", why);
        /* a log line may quote a file name or a peer's bytes: no terminal
         * control characters reach the user's console */
        for (char *c = buf; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
    }
    free(text);
    return why != NULL;
}

int failure_reason(const child_t *c, const flag_alias_t *aliases, char *buf, size_t len)
{
    char how[64], said[2048];
    launch_describe(c, how, sizeof how);
    if (!WIFEXITED(c->status) || !last_error(c->log, said, sizeof said)) {
        snprintf(buf, len, "%s%s", how,
                 WIFEXITED(c->status) ? " without an error in its log's last lines" : "");
        return 0;
    }
    failure_translate(said, aliases, buf, len);
    return 1;
}

/* NAME's rank ("gpud.3": 3), else -1. */
static long rank_of(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot || !dot[1] || strspn(dot + 1, "0123456789") != strlen(dot + 1) || strlen(dot + 1) > 9)
        return -1;
    return strtol(dot + 1, NULL, 10);
}

/* Files NAME's rank among g's lowest FAILURE_RANKS, in order; the group's
 * log is its lowest rank's. */
static void add_rank(failure_group_t *g, const char *name, const char *log)
{
    long r = rank_of(name);
    int at = 0;
    while (at < g->nrank && g->rank[at] <= r)
        at++;
    if (at == FAILURE_RANKS)
        return;
    if (at == 0)
        snprintf(g->log, sizeof g->log, "%s", log);
    int n = g->nrank < FAILURE_RANKS ? g->nrank : FAILURE_RANKS - 1;
    memmove(g->rank + at + 1, g->rank + at, (size_t)(n - at) * sizeof g->rank[0]);
    g->rank[at] = r;
    g->nrank = n + 1;
}

failure_group_t *failures_add(failures_t *f, const char *name, const char *log,
                              const char *reason)
{
    f->n++;
    failure_group_t *g = NULL;
    for (int i = 0; i < f->ngroups && !g; i++)
        if (strcmp(f->g[i].reason, reason) == 0)
            g = &f->g[i];
    if (!g && f->ngroups < FAILURE_GROUPS && (f->g[f->ngroups].reason = strdup(reason))) {
        g = &f->g[f->ngroups++];
        snprintf(g->first, sizeof g->first, "%s", name);
    }
    if (!g) {
        f->unkept++;
        return NULL;
    }
    g->n++;
    add_rank(g, name, log);
    return g;
}

long failures_unsaid(const failures_t *f)
{
    long n = f->unkept;
    for (int i = 0; i < f->ngroups; i++)
        n += f->g[i].said ? 0 : f->g[i].n;
    return n;
}

/* "rank 3", "ranks 0, 1, 2 and 5 more"; the child's name for one without a rank */
static void who(const failure_group_t *g, char *buf, size_t len)
{
    if (g->nrank && g->rank[0] < 0) {
        snprintf(buf, len, "%s", g->first);
        return;
    }
    size_t o = (size_t)snprintf(buf, len, "rank%s", g->n == 1 ? "" : "s");
    for (int i = 0; i < g->nrank && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%ld", i ? ", " : " ", g->rank[i]);
    if (g->n > g->nrank && o < len)
        snprintf(buf + o, len - o, " and %ld more", g->n - g->nrank);
}

void failures_print(failures_t *f, const char *head)
{
    enum { SHOWN = 4 };
    int unsaid = 0, last = -1;
    for (int i = 0; i < f->ngroups; i++)
        if (!f->g[i].said) {
            unsaid++;
            last = i;
        }
    if (unsaid == 0 && f->unkept == 0) {
        fprintf(stderr, "ddpipe: %s (the errors above)\n", head);
        return;
    }
    if (unsaid == 1 && f->unkept == 0) {
        failure_group_t *g = &f->g[last];
        fprintf(stderr, "ddpipe: %s: %s (see %s)\n", head, g->reason, g->log);
        g->said = true;
        return;
    }
    fprintf(stderr, "ddpipe: %s, with %d different errors:\n", head, unsaid + (f->unkept > 0));
    int shown = 0;
    long more = f->unkept;
    const char *dir_of = NULL;
    for (int i = 0; i < f->ngroups; i++) {
        failure_group_t *g = &f->g[i];
        if (g->said)
            continue;
        dir_of = dir_of ? dir_of : g->log;
        g->said = true;
        if (shown == SHOWN) {
            more += g->n;
            continue;
        }
        char w[200];
        who(g, w, sizeof w);
        fprintf(stderr, "ddpipe:   %s: %s (see %s)\n", w, g->reason, g->log);
        shown++;
    }
    if (more) {
        const char *slash = dir_of ? strrchr(dir_of, '/') : NULL;
        fprintf(stderr, "ddpipe:   %ld more with other errors: see their logs%s%.*s\n", more,
                slash ? " in " : "", slash ? (int)(slash - dir_of) : 0, slash ? dir_of : "");
    }
    f->unkept = 0;
}

void failures_free(failures_t *f)
{
    for (int i = 0; i < f->ngroups; i++)
        free(f->g[i].reason);
    f->ngroups = 0;
}
