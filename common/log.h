/* log — one line per event: time, daemon[rank], level, message. */
#ifndef DDP_LOG_H
#define DDP_LOG_H

#include <stdarg.h>

typedef enum { DLOG_ERROR = 0, DLOG_WARN = 1, DLOG_INFO = 2, DLOG_DEBUG = 3 } log_level_t;

/* Name the process (e.g. "loaderd") and its rank (-1: no rank yet). */
void log_init(const char *daemon, int rank, int verbose);
void log_set_rank(int rank);
int log_verbose(void);

void log_msg(log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_error(...) log_msg(DLOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(DLOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(DLOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(DLOG_DEBUG, __VA_ARGS__)

#endif
