/* loaderd's options: the table every flag is declared in once (usage,
 * parsing, and the argv a launcher emits from it) and the checks across
 * options. */
#ifndef DDP_LOADERD_OPTIONS_H
#define DDP_LOADERD_OPTIONS_H

#include "common/options.h"

#include <stdint.h>

/* The most batches decoded ahead (--prefetch): the state's ready array. */
#define LOADER_MAX_READY 64

/* --augment, as loader_options_parse reads it. */
typedef enum {
    LOADER_AUGMENT_DEFAULT = -1, /* crop-flip, none for idx: */
    LOADER_AUGMENT_NONE = 0,
    LOADER_AUGMENT_FLIP = 1,
    LOADER_AUGMENT_CROP_FLIP = 2
} loader_augment_t;

/* A default outside its row's range is a sentinel (common/options.h): the
 * option was not given and loaderd derives the value, as said beside it. */
typedef struct {
    const char *data;          /* ImageFolder directory or idx:PREFIX */
    const char *bind;          /* ROUTER: gpud workers */
    const char *reducer;       /* reducerd's ROUTER */
    long batch_size;
    long threads;              /* 0: all cores (loader_options_parse counts them) */
    long prefetch;
    long resize;               /* 0: no resize */
    const char *crop;          /* "N" or "HxW"; NULL: no crop */
    long channels;             /* 0: the dataset's (1 for idx:, else 3) */
    int no_dct_scaling;
    long limit;                /* -1: every sample */
    const char *wire;          /* uint8|jpeg (BATCH 'wire'); NULL: uint8 */
    int predictions;
    const char *classes;       /* class map (common/classmap.h): FILE or "numeric"; NULL none */
    long outputs;              /* with classes: the model's output count */
    long worker_timeout_s;
    const char *shard;         /* "I/N": one of N loaderds of the dataset; NULL: the whole */
    int verbose;
    /* training (--train) */
    int train;
    const char *val;
    long val_limit;            /* -1: --limit's; 0: every --val sample */
    long workers;
    long global_batch;         /* 0: batch_size * workers (loader_options_parse) */
    long chunk;                /* --chunk: shards are whole chunks of this many; 0 off */
    long epochs;
    long seed;
    const char *augment;       /* none|flip|crop-flip; NULL: the default */
    double rotate;             /* degrees; 0: no RandomRotation */
    const char *cache;         /* "memory" or a folder: decoded train samples; NULL none */
    long cache_size_mb;
    long start_epoch;
    long start_step;
    /* read from the text options by loader_options_parse (not in the table) */
    int crop_h, crop_w;        /* 0: no crop */
    uint32_t shard_index, shard_count; /* --shard I/N (0/1 without it) */
    int wire_encoded;          /* --wire jpeg: ship the files, gpud decodes */
    loader_augment_t augment_mode;
} loader_options_t;

/* Every option of loaderd, for its usage and for a launcher's
 * options_emit (with a filled loader_options_t). */
extern const option_table_t loader_options_table;

/* Takes the security options (zs_security_args), then the table's, then
 * reads --crop and --augment and checks the options together. 0; 1 after
 * --help (exit 0); -1 after the error went to stderr (exit 2). */
int loader_options_parse(loader_options_t *self, int argc, char **argv);

#endif
