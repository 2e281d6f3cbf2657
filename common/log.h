/* log — one line per event: time, daemon[rank], level, message. */
#ifndef DDP_LOG_H
#define DDP_LOG_H

#include <stdarg.h>

typedef enum { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 } log_level_t;

/* Name the process (e.g. "loaderd") and its rank (-1: no rank yet). */
void log_init(const char *daemon, int rank, int verbose);
void log_set_rank(int rank);
int log_verbose(void);

void log_msg(log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
