#include "common/log.h"
#include "common/utf8.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static char s_daemon[32] = "ddpipe";
static int s_rank = -1;
static int s_verbose = 0;

void log_init(const char *daemon, int rank, int verbose)
{
    snprintf(s_daemon, sizeof s_daemon, "%s", daemon);
    s_rank = rank;
    s_verbose = verbose;
}

void log_set_rank(int rank) { s_rank = rank; }
int log_verbose(void) { return s_verbose; }

void log_msg(log_level_t level, const char *fmt, ...)
{
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    if (level == DLOG_DEBUG && !s_verbose)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char line[2048];
    int off = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %s",
                       tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                       tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000), s_daemon);
    if (s_rank >= 0)
        off += snprintf(line + off, sizeof line - off, "[%d]", s_rank);
    off += snprintf(line + off, sizeof line - off, " %s ", names[level]);
    /* the message escaped (utf8_escape_line): a file name's newline or
     * raw bytes never split or garble the line */
    char msg[sizeof line];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (off < (int)sizeof line)
        utf8_escape_line(msg, line + off, sizeof line - off);
    /* one write per line so lines of concurrent daemons never interleave */
    size_t n = strnlen(line, sizeof line - 2);
    line[n] = '\n';
    fwrite(line, 1, n + 1, stderr);
    fflush(stderr);
}
