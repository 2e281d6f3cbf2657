/* results — what the ranks and the loader report about samples: RESULTs
 * (counted only when they answer a batch loaderd ISSUED to that rank, with
 * the issued labels and classes the dataset has), FAILED samples, ISSUED
 * batches. What is refused is counted and named for the stall message. */
#ifndef DDP_REDUCERD_RESULTS_H
#define DDP_REDUCERD_RESULTS_H

#include "reducerd/reducer.h"

void results_on_result(reducer_t *self, zframe_t *route, ddp_result_t *res);
void results_on_failed(reducer_t *self, zframe_t *route, const ddp_failed_t *failed);
void results_on_issued(reducer_t *self, zframe_t *route, ddp_issued_t *issued);
/* Tallies a judged train RESULT of p whose step was committed (membership.c):
 * labels are the issued ones. */
void results_count_committed(reducer_t *self, peer_t *p, const ddp_result_t *res,
                             int32_t *labels);
/* (epoch, phase) is over: its issued batches are forgotten and RESULTs
 * still held for them (never issued) are rejected. */
void results_end_phase(reducer_t *self, uint32_t epoch, uint8_t phase);

#endif
