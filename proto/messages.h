/* messages — every ddpipe message as a C struct: types, roles, limits,
 * and who owns a decoded message's arrays (ddp_msg_clear). The bytes on the
 * wire are codec.h's business, the sockets wire.h's.
 *
 * Wire format (see proto/PROTOCOL.md): a message is a ZeroMQ multipart
 * message whose first frame is a msgpack map with at least
 *   "v": protocol version (uint, must equal DDP_PROTO_VERSION)
 *   "t": message type (uint, ddp_type_t)
 * BATCH has a second frame: the uint8 pixels, n*c*h*w bytes, each sample
 * CHW, samples back to back. Numeric arrays travel as msgpack bin holding
 * little-endian elements (ids u64, labels/topk i32, loss f32).
 * ROUTER identity frames are the caller's business: encode/decode see only
 * the payload frames.
 *
 * Decoding validates everything (types, version, sizes, ranges, array
 * lengths against n); a bad message yields -1 and a one-line reason, and
 * the caller logs + counts it. Decoded arrays are owned by the ddp_msg_t
 * and freed by ddp_msg_clear().
 */
#ifndef DDP_PROTO_MESSAGES_H
#define DDP_PROTO_MESSAGES_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#define DDP_PROTO_VERSION 2
#define DDP_MAX_NAME 64          /* worker/host names, class names are longer: */
#define DDP_MAX_STR 4096         /* any string field (paths, reasons) */
#define DDP_MAX_FAILED 512       /* JOIN `failed`: why a gpud could not start */
#define DDP_MAX_BATCH 65536      /* samples per BATCH/RESULT */
#define DDP_MAX_K 5              /* top-k carried per sample */
#define DDP_MAX_CLASSES 100000
#define DDP_MAX_SAMPLES (1ull << 40)
#define DDP_MAX_PIXELS (1ull << 31) /* bytes in one BATCH pixel frame */
#define DDP_MAX_FILE (1ull << 28)   /* one encoded sample of a wire-1 BATCH (decode_read_file's 256 MiB) */
#define DDP_MAX_WHY 1024            /* RESULT 'why' */

/* BATCH 'wire': what frame 2 holds. */
enum { DDP_WIRE_UINT8 = 0, DDP_WIRE_ENCODED = 1 };
#define DDP_MAX_ACKS 1024
#define DDP_MAX_EP 256           /* an endpoint string (ring) */
#define DDP_TOKEN_LEN 16         /* a peer's session token (keyed BLAKE2b) */
#define DDP_SECRET_LEN 32        /* the job secret reducerd hands loaderd */
/* Several loaderds for one dataset (docs/SCALE.md "Several loaderds"): at
 * most DDP_MAX_LOADERS shards; shard i holds the ids with id % shards == i,
 * and its BATCH seqs carry i in the bits from DDP_SEQ_SHARD_SHIFT up, so a
 * seq names its loaderd and stays unique over the job. */
#define DDP_MAX_LOADERS 256
#define DDP_SEQ_SHARD_SHIFT 48
#define DDP_SEQ_SHARD(seq) ((uint32_t)((uint64_t)(seq) >> DDP_SEQ_SHARD_SHIFT))

typedef enum {
    DDP_JOIN = 1,      /* any daemon -> reducerd: who I am */
    DDP_WELCOME = 2,   /* reducerd -> joiner: your rank, world size, job */
    DDP_PLAN = 3,      /* loaderd -> reducerd: the epoch plan (N, classes, paths) */
    DDP_CREDIT = 4,    /* gpud -> loaderd: N more batches please; acks of finished ones */
    DDP_HEARTBEAT = 5, /* gpud -> loaderd, gpud -> reducerd: still alive */
    DDP_BATCH = 6,     /* loaderd -> gpud: header + pixel frame */
    DDP_END = 7,       /* loaderd -> gpud: nothing left to hand out for this epoch */
    DDP_RESULT = 8,    /* gpud -> reducerd: per-sample top-k and loss */
    DDP_FAILED = 9,    /* loaderd -> reducerd: a sample that could not be loaded */
    DDP_STOP = 10,     /* reducerd -> everyone joined: job is over (code, reason) */
    DDP_DONE = 11,     /* reporterd -> reducerd: run directory written */
    DDP_EPOCH = 12,    /* reducerd -> loaderd, gpud: epoch decided (continue / stop), training */
    DDP_ISSUED = 13,   /* loaderd -> reducerd: batch seq went to rank R (ids, labels) */
    DDP_REISSUE = 14,  /* reducerd -> loaderd: the answer to seq was rejected, hand it out again */
    DDP_MEMBERS = 15,  /* reducerd -> gpud, loaderd: a new membership generation (docs/ELASTIC.md) */
    DDP_STEP = 16,     /* gpud -> reducerd: my share of step S is summed (or my ring failed) */
    DDP_COMMIT = 17,   /* reducerd -> gpud, loaderd: every member summed step S: apply it */
    DDP_STATE = 18,    /* a joiner's training state: rank 0 -> reducerd -> joiner; the joiner's ack */
    DDP_NCCLID = 19,   /* a generation's NCCL communicator id: rank 0 -> reducerd -> members */
    DDP_TYPE_MAX = 19
} ddp_type_t;

/* STOP code (and exit status of every daemon hearing it) when reducerd
 * restarted and the job's state was lost with it: not restarted by
 * supervisord (exitcodes=0,3), the job must be run again. */
#define DDP_STOP_JOB_LOST 3
/* STOP and "end" code when rank 0 could not write a checkpoint or the final
 * weights (docs/TRAINING.md "Checkpoints"): the job stops there, the run
 * directory is still written (summary.json's training.checkpoint_failures),
 * and every exit is non-zero. Rank 0 reports it with DONE(code 4, reason). */
#define DDP_STOP_CHECKPOINT_FAILED 4
/* STOP and "end" code when training stopped on a non-finite summed
 * gradient or updated weight (docs/TRAINING.md "Non-finite values"): every
 * rank stops at that step, rank 0 reports it with DONE(code 5, the step
 * and tensor), the run directory is still written (training.stopped). */
#define DDP_STOP_NONFINITE 5

typedef enum { DDP_ROLE_GPUD = 1, DDP_ROLE_LOADER = 2, DDP_ROLE_REPORTER = 3 } ddp_role_t;
typedef enum { DDP_PHASE_EVAL = 0, DDP_PHASE_TRAIN = 1 } ddp_phase_t;

/* Who sent a message (PROTOCOL.md "Trust"): the job name, reducerd's
 * session nonce and the sender's token from its WELCOME. session 0: absent
 * on the wire (then job and token are not sent either); receivers that
 * check trust reject such a message. */
typedef struct {
    char job[DDP_MAX_NAME];
    uint64_t session;
    uint8_t token[DDP_TOKEN_LEN];
} ddp_auth_t;

typedef struct {
    uint8_t role;              /* ddp_role_t */
    uint32_t pid;
    int32_t want_rank;         /* -1: any */
    char name[DDP_MAX_NAME];   /* "gpud-host-1234": also its loader identity */
    char host[DDP_MAX_NAME];
    char backend[16];          /* "cpu" | "cuda" | "" for non-compute roles */
    char ring[DDP_MAX_EP];     /* optional: gpud's all-reduce PULL endpoint ("" none) */
    /* optional, gpud --train: the job-wide settings (model, optimizer,
     * schedule, G, seed ... as flags); every rank of a job has the same */
    char config[DDP_MAX_STR];
    /* optional, loader: its shard of the dataset, shard < shards <=
     * DDP_MAX_LOADERS (absent: 0 of 1, the whole dataset) */
    uint32_t shard, shards;
    /* optional: the job it was started for ($DDPIPE_JOB; "" any job) */
    char job[DDP_MAX_NAME];
    /* optional, gpud --train: 1 = it can sum over NCCL (cuda backend, built
     * with NCCL, not disabled); 0 absent (docs/CUDA.md "NCCL in gpud") */
    uint8_t nccl;
    /* optional, gpud: it could not start and says why (its model, weights
     * or device); reducerd logs it and, in eval, stops holding the other
     * gpuds for it (docs/ELASTIC.md "Joining"); no WELCOME follows */
    char failed[DDP_MAX_FAILED];
} ddp_join_t;

typedef struct {
    int32_t rank;
    int32_t world;
    char job[DDP_MAX_NAME];
    uint8_t train;             /* optional: 1 in a training job */
    char next_ring[DDP_MAX_EP];/* optional: ring endpoint of rank (rank+1) % world */
    uint64_t session;          /* optional: the job's session nonce (0 absent) */
    uint8_t token[DDP_TOKEN_LEN]; /* with session: the joiner's token */
    bool has_secret;           /* optional: loaderd's plan ack carries the job secret */
    uint8_t secret[DDP_SECRET_LEN];
    uint32_t gen;              /* optional, train: membership generation (0 absent) */
    /* optional, train: 1 = the job runs already; this gpud waits for its
     * STATE and its place (MEMBERS); rank is then -1 (docs/ELASTIC.md) */
    uint8_t joining;
    /* optional, train: 1 = generation gen sums over NCCL (every member
     * offered it): rank 0 sends NCCLID, reducerd relays it; 0 absent */
    uint8_t nccl;
} ddp_welcome_t;

typedef struct {
    uint32_t epoch;
    uint8_t phase;             /* ddp_phase_t */
    uint64_t n;                /* samples in the plan: ids 0..n-1 */
    uint32_t num_classes;
    char **class_names;        /* num_classes strings */
    char **paths;              /* n strings, or NULL when not sent */
    char dataset[DDP_MAX_STR];
    uint64_t skip;             /* optional (train resume): samples of the epoch already trained */
    ddp_auth_t auth;           /* optional: the loader's token once it has one */
    /* optional (--classes): the classes the dataset holds, strictly
     * increasing, < num_classes (the model's outputs); NULL: all of them */
    uint32_t npresent;
    uint32_t *present;
} ddp_plan_t;

typedef struct {
    char worker[DDP_MAX_NAME];
    uint32_t credits;          /* additional batches the worker can take */
    uint32_t n_acks;
    uint64_t *acks;            /* batch seqs fully answered (results sent) */
    int32_t rank;              /* optional: the sender's rank; -1 absent (not encoded) */
    uint32_t gen;              /* optional, train: the generation the rank is in (0 absent) */
    ddp_auth_t auth;           /* optional on the wire, required by loaderd */
} ddp_credit_t;

typedef struct {
    char worker[DDP_MAX_NAME];
    int32_t rank;
    uint64_t batches_done;
    uint64_t rejected;         /* optional: loaderd's rejected messages so far (loader beats) */
    ddp_auth_t auth;           /* optional on the wire, required by reducerd and loaderd */
} ddp_heartbeat_t;

typedef struct {
    uint64_t seq;              /* unique per loaderd run */
    uint32_t epoch;
    uint8_t phase;
    uint32_t n;                /* 1..DDP_MAX_BATCH; 0 allowed in the train phase (empty shard) */
    uint16_t c, h, w;          /* per-sample CHW, each 1..65535 (c 1..4) */
    uint64_t *ids;             /* n sample ids (NULL when n == 0) */
    int32_t *labels;           /* n labels (-1: unknown) (NULL when n == 0) */
    zframe_t *pixels;          /* n*c*h*w bytes; owned */
    uint64_t step;             /* optional, train: absolute optimizer step of the run */
    uint32_t global_count;     /* optional, train: samples in the whole global step (>= n) */
    uint32_t gen;              /* optional, train: membership generation (0 absent) */
    uint64_t steps_per_epoch;  /* optional, train: loaderd's plan (0 absent); step is in epoch */
    /* optional, train with several loaderds (loaderd --shard) or --chunk
     * (bitwise training: the sample's chunk is pos / chunk): each
     * sample's index in the rank's list of the step, strictly increasing
     * (n entries; NULL absent). With several loaderds global_count is
     * this loaderd's part: gpud sums the parts of all loaderds. */
    uint32_t *pos;
    /* optional --wire jpeg (PROTOCOL.md): frame 2 holds the samples' original
     * files back to back; gpud decodes and transforms them to c x h x w */
    uint8_t wire;              /* DDP_WIRE_UINT8 (absent) or DDP_WIRE_ENCODED */
    uint32_t *sizes;           /* wire 1: n file sizes in bytes, summing to frame 2 */
    uint16_t resize;           /* wire 1: shorter side before the crop (0: none) */
    uint8_t crop;              /* wire 1: 1 = center crop to h x w, 0 = the image is h x w */
    uint8_t dct;               /* wire 1: libjpeg-turbo DCT scaling allowed (loaderd --fast-decode) */
    /* wire 1, train: the augmentation gpud draws per (seed, epoch, id) as
     * loaderd would (common/image/augment.h); aug_flags DDP_AUG_* */
    uint64_t aug_seed;
    uint8_t aug_flags;
    double aug_scale[2], aug_ratio[2];  /* with DDP_AUG_CROP */
    double aug_flip_p;
    double aug_degrees[2];              /* with DDP_AUG_ROTATE */
} ddp_batch_t;

/* BATCH 'aug' bits (wire 1, train) */
enum { DDP_AUG_CROP = 1, DDP_AUG_ROTATE = 2 };
/* doubles in BATCH 'augment': scale, ratio, flip_p, degrees */
#define DDP_AUG_DOUBLES 7

typedef struct {
    uint32_t epoch;
    uint8_t phase;
} ddp_end_t;

typedef struct {
    int32_t rank;
    uint32_t epoch;
    uint8_t phase;
    uint64_t seq;              /* the BATCH seq answered */
    uint32_t n;
    uint32_t k;                /* 1..DDP_MAX_K */
    uint64_t *ids;             /* n */
    int32_t *labels;           /* n */
    int32_t *topk;             /* n*k class ids, best first */
    float *loss;               /* n cross-entropy losses */
    uint32_t nprob;            /* optional: classes per sample in probs (0 absent) */
    uint16_t *probs;           /* n*nprob softmax probabilities quantized to 1e-4:
                                  q = round(p * 10^4), 0..10000 (--probs) */
    double compute_s;          /* seconds of compute for this batch */
    double lr;                 /* optional, train: learning rate of the step (0 absent) */
    uint64_t step;             /* optional, train: absolute optimizer step */
    uint32_t gen;              /* optional, train: membership generation (0 absent) */
    double loss_scale;         /* optional, train --precision fp16: the step's loss scale
                                  (a power of two; 0 absent) */
    uint64_t skipped_steps;    /* optional, with loss_scale: steps of the job skipped for
                                  non-finite gradients, this one included */
    uint8_t *failed;           /* optional (wire 1, eval): n flags, 1 = the sample did not
                                  decode at gpud; its row's topk/loss mean nothing */
    char **why;                /* with failed: one reason per failed row, in row order */
    uint32_t nwhy;             /* the failed rows (flags set) */
    ddp_auth_t auth;           /* optional on the wire, required by reducerd */
} ddp_result_t;

typedef struct {
    uint32_t epoch;
    uint8_t phase;
    uint64_t id;
    char path[DDP_MAX_STR];
    char reason[DDP_MAX_STR];
    int32_t label;             /* optional: the sample's class when known (-1, the
                                  default, absent: unknown) */
    ddp_auth_t auth;           /* optional on the wire, required by reducerd */
} ddp_failed_t;

typedef struct {
    int32_t code;              /* 0: job finished, else failure */
    char reason[DDP_MAX_STR];
} ddp_stop_t;

typedef struct {
    int32_t code;              /* 0: written */
    char reason[DDP_MAX_STR];
} ddp_done_t;

typedef struct {
    uint32_t epoch;            /* the epoch decided */
    uint8_t decision;          /* ddp_decision_t */
    uint32_t streak;           /* consecutive epochs with val top-1 >= target */
    double val_top1;           /* the epoch's validation top-1, -1 without validation */
    char reason[1024];         /* why (e.g. "val top-1 0.861 >= 0.85 for 2 epochs") */
} ddp_epoch_t;

typedef enum { DDP_DECISION_CONTINUE = 0, DDP_DECISION_STOP = 1 } ddp_decision_t;

typedef struct {
    uint64_t seq;              /* the BATCH seq */
    uint32_t epoch;
    uint8_t phase;
    int32_t rank;              /* the rank of the worker it goes to */
    uint32_t n;                /* 0..DDP_MAX_BATCH (0: an empty train shard) */
    uint64_t *ids;             /* n, as in the BATCH */
    int32_t *labels;           /* n, as in the BATCH: the labels reducerd counts */
    uint64_t rejected;         /* optional: loaderd's rejected messages so far */
    ddp_auth_t auth;           /* optional on the wire, required by reducerd */
} ddp_issued_t;

typedef struct {
    uint64_t seq;              /* the batch whose answer was rejected */
    uint32_t epoch;
    uint8_t phase;
    int32_t rank;              /* the rank that answered it */
    char reason[1024];
} ddp_reissue_t;

/* MEMBERS: the members of generation gen, in ring order (docs/ELASTIC.md). */
#define DDP_MAX_WORLD 4096
typedef struct {
    uint32_t gen;              /* >= 1 (0 is the gang's first, announced by WELCOME) */
    int32_t rank;              /* the recipient's new rank, -1 for loaderd */
    int32_t world;             /* 1..DDP_MAX_WORLD */
    char next_ring[DDP_MAX_EP];/* ring of rank (rank+1) % world ("" for loaderd, world 1) */
    uint64_t step;             /* the first step of this generation (last committed + 1) */
    uint32_t epoch;            /* the epoch that step belongs to */
    char **names;              /* world worker names, by new rank (owned) */
    char reason[1024];         /* "rank 1 (gpud-a-12) lost: ..." */
    /* optional, to a gpud: the session and its token for its *new* rank
     * (a token binds (role, rank, name): the old one is void with the old
     * rank, at reducerd and at loaderd). 0: absent (loaderd keeps its own) */
    uint64_t session;
    uint8_t token[DDP_TOKEN_LEN];
    /* optional: 1 = too few ranks (or the --pause-at-step hook): nobody
     * trains until a later MEMBERS; joiners may enter meanwhile */
    uint8_t paused;
    /* optional: 1 = this generation sums over NCCL, as WELCOME's (0 absent) */
    uint8_t nccl;
} ddp_members_t;

typedef enum { DDP_STEP_SUMMED = 0, DDP_STEP_RING_FAILED = 1 } ddp_step_status_t;

/* STEP: gpud -> reducerd after its all-reduce of step `step`. */
typedef struct {
    int32_t rank;
    uint32_t gen;
    uint32_t epoch;
    uint64_t step;
    uint8_t status;            /* ddp_step_status_t */
    int32_t suspect;           /* status 1: the silent ring predecessor's rank, else -1 */
    ddp_auth_t auth;           /* optional on the wire, required by reducerd */
} ddp_step_t;

/* COMMIT: reducerd -> members and loaderd: step `step` of gen may be applied. */
typedef struct {
    uint32_t gen;
    uint32_t epoch;
    uint64_t step;
    uint8_t snapshot;          /* optional, to rank 0: send STATE after applying it (a joiner waits) */
} ddp_commit_t;

/* STATE (docs/ELASTIC.md "Joining"): with an image, the training state
 * after the last committed step (a checkpoint file's bytes) from rank 0 to
 * reducerd and from reducerd to the joiner; without one, the joiner's
 * "loaded" answer. step: the first step the joiner will run (C + 1). */
#define DDP_MAX_STATE (1ull << 34)
typedef struct {
    uint32_t gen;              /* the generation it was made in */
    uint32_t epoch;            /* the epoch of step */
    uint64_t step;
    zframe_t *image;           /* optional second frame; owned */
    ddp_auth_t auth;           /* optional on the wire, required by reducerd */
} ddp_state_t;

/* NCCLID (docs/CUDA.md "NCCL in gpud"): the ncclUniqueId of generation
 * gen's communicator (opaque bytes: a bootstrap address in the process that
 * made it), from rank 0 of gen to reducerd (with its token) and from
 * reducerd to every other member of gen (without). One per generation: a
 * new generation is a new communicator. */
#define DDP_NCCL_ID_LEN 128
typedef struct {
    uint32_t gen;              /* the generation whose communicator it opens */
    int32_t world;             /* that generation's size (the communicator's) */
    uint8_t id[DDP_NCCL_ID_LEN];
    ddp_auth_t auth;           /* optional on the wire, required by reducerd */
} ddp_ncclid_t;

typedef struct {
    ddp_type_t type;
    union {
        ddp_join_t join;
        ddp_welcome_t welcome;
        ddp_plan_t plan;
        ddp_credit_t credit;
        ddp_heartbeat_t heartbeat;
        ddp_batch_t batch;
        ddp_end_t end;
        ddp_result_t result;
        ddp_failed_t failed;
        ddp_stop_t stop;
        ddp_done_t done;
        ddp_epoch_t epoch;
        ddp_issued_t issued;
        ddp_reissue_t reissue;
        ddp_members_t members;
        ddp_step_t step;
        ddp_commit_t commit;
        ddp_state_t state;
        ddp_ncclid_t ncclid;
    } u;
} ddp_msg_t;

/* Free what decode allocated; safe on a zeroed or already-cleared msg. */
void ddp_msg_clear(ddp_msg_t *msg);

const char *proto_type_name(int type);
const char *proto_role_name(int role);

#endif
