/* wire_input — a --wire jpeg batch at gpud (PROTOCOL.md "Encoded samples"):
 * its files decoded into self->wire_px (wire_decode.h), the samples that
 * did not decode flagged with their reasons for the RESULT.
 *
 * Training (docs/TRAINING.md "--wire jpeg"): with --wire uint8 loaderd
 * decodes a step before sending it, leaves out the samples that fail and
 * sends global_count = the samples of the step that loaded, the gradient's
 * divisor. With jpeg a sample can fail here only, after loaderd counted it.
 * So the failed samples are left out of the micro-batch (wire_input_keep:
 * BatchNorm, SyncBatchNorm and the loss see only decoded ones, in the
 * batch's order) and the ranks agree on the step's failed count F before
 * the forward pass (wire_input_agree: one tiny all-reduce on the ring), so
 * the step runs with global_count - F: the very shard and divisor --wire
 * uint8 gives, hence the same weights bit for bit. The failed rows go to
 * reducerd in the RESULT ('failed', 'why'), as in eval. */
#ifndef DDP_GPUD_WIRE_INPUT_H
#define DDP_GPUD_WIRE_INPUT_H

#include "gpud/gpud.h"

typedef struct {
    const uint8_t *pixels;     /* n*c*h*w uint8: the frame, or self->wire_px */
    uint8_t *failed;           /* the batch's n flags; NULL: a uint8 batch */
    char (*why)[DDP_MAX_WHY];  /* n reasons */
    uint32_t nfailed;
    int packed;                /* the decoded samples already at the front (--decode gpu) */
    /* training, after wire_input_keep: the decoded samples only */
    uint32_t kept;
    uint64_t *ids;
    int32_t *labels;
} wire_input_t;

/* The batch's uint8 tensor: its frame (--wire uint8), or its files decoded
 * into self->wire_px (--wire jpeg), failures flagged and logged. -1
 * (logged): the batch cannot be decoded at all (bad transform, memory). */
int wire_input(gpud_t *self, const ddp_batch_t *batch, wire_input_t *in);
void wire_input_clear(wire_input_t *in);

/* The failed rows and their reasons on RESULT R (pointers into IN; R->why
 * is malloc'd, the caller frees it). -1 when out of memory. */
int wire_input_attach(ddp_result_t *r, const wire_input_t *in);

/* Training: the decoded samples moved to the front of the tensor, their
 * ids and labels into in->ids/labels (in->kept of them). -1 (logged) when
 * out of memory. */
int wire_input_keep(wire_input_t *in, const ddp_batch_t *batch);

/* Training: the step's failed samples over all ranks (each rank's count
 * summed over the ring; exact, they are small integers in floats) into
 * *total. Collective: every rank of a --wire jpeg step calls it. 0, or -1
 * with the ring's reason in err. */
int wire_input_agree(const wire_input_t *in, allreduce_t *ring, int timeout_ms,
                     uint32_t *total, char *err, size_t errlen);

/* Training: the RESULT rows of the kept samples (LOSS, TOPK: kept rows of
 * k) spread back to the batch's n rows in place (room for n rows), the
 * failed ones zero. */
void wire_input_spread(const wire_input_t *in, uint32_t n, float *loss, int32_t *topk, int k);

#endif
