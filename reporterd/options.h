/* reporterd's options: the table every flag is declared in once (usage,
 * parsing, and the argv a launcher emits from it) and the checks across
 * options. */
#ifndef DDP_REPORTERD_OPTIONS_H
#define DDP_REPORTERD_OPTIONS_H

#include "common/options.h"

typedef struct {
    const char *sub;          /* reducerd's event endpoint (its --pub) */
    const char *reducer;      /* reducerd's ROUTER: JOIN, and DONE at the end */
    const char *out;          /* the run directory */
    const char *tap;          /* XPUB re-publishing every event; NULL: none */
    const char *tensorboard;  /* TensorBoard event files there; NULL: none */
    long tap_hwm;
    const char *metrics_http; /* HOST:PORT of /metrics; NULL: none */
    long http_max_connections; /* its connections at once */
    long http_max_per_address; /* ... from one client address */
    long linger_s;            /* after the end, keep /metrics and the tap up this long */
    /* training */
    const char *seed_csv;     /* the seed course's time,val_accuracy file */
    long start_epoch;         /* a resumed run: earlier rows kept; -1 none */
    int verbose;
} reporter_options_t;

/* Every option of reporterd, for its usage and for a launcher's
 * options_emit (with a filled reporter_options_t). */
extern const option_table_t reporter_options_table;

/* Takes the security options (zs_security_args), then the table's, then
 * checks the required ones. 0; 1 after --help (exit 0); -1 after the error
 * went to stderr (exit 2). */
int reporter_options_parse(reporter_options_t *self, int argc, char **argv);

#endif
