/* errbuf — fill a caller's (err, errlen) buffer, the error convention of
 * every library in ddpipe: functions return -1/NULL and say why in err. */
#ifndef DDP_ERRBUF_H
#define DDP_ERRBUF_H
#include <stddef.h>

/* printf into err (NULL or errlen 0: nothing); always NUL-terminated. */
void err_set(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#endif
