/* ratelog — rate limit for "rejected ..." log lines (never a flood).
 *
 * A reject line is logged at most once per RATELOG_WINDOW_S for the same
 * (scope, peer, kind), and at most RATELOG_BURST lines per second in all;
 * what is held back is counted and reported with the next line that goes
 * out. Counting the rejects themselves is the caller's business: every
 * reject is counted, only the logging is limited. The table is the
 * caller's (a ratelog_t, all zero when empty): one per receiving loop, in
 * its proto_stats_t (proto/wire.h), never shared between threads.
 */
#ifndef DDP_PROTO_RATELOG_H
#define DDP_PROTO_RATELOG_H

#include <stdbool.h>
#include <stdint.h>

#define RATELOG_WINDOW_S 10
#define RATELOG_BURST 20
#define RATELOG_SLOTS 256

typedef struct {
    uint64_t key;     /* hash of (scope, peer, kind); 0: free */
    int64_t last_ms;  /* when its last line went out */
} ratelog_entry_t;

typedef struct {
    ratelog_entry_t table[RATELOG_SLOTS];
    uint64_t held_total;  /* lines held back since the last one logged */
    int64_t second_ms;    /* start of the current second of the burst limit */
    int in_second;        /* lines logged in it */
} ratelog_t;

/* True when a line about (scope, peer, kind) may be logged now; *held gets
 * the number of reject lines suppressed since the last one logged. scope:
 * any pointer naming the socket or subsystem (NULL is fine). */
bool ratelog_allow(ratelog_t *self, const void *scope, const char *peer, const char *kind,
                   uint64_t *held);

/* Logs "rejected KIND from PEER: WHY" (WARN) when ratelog_allow lets it,
 * with the count held back before it. */
void ratelog_reject(ratelog_t *self, const void *scope, const char *peer, const char *kind,
                    const char *why);
#endif
