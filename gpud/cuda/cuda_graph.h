/* cuda_graph — what the cuda backend's CUDA graphs (cuda_graph.c: the
 * engine's recorded inference forward, gpud/tape_capture.c) did in this
 * process, for tests and logs. Switch: DDPIPE_CUDA_GRAPHS=0 turns
 * recording off (read at every attempt; a recording already made keeps
 * replaying). */
#ifndef DDP_CUDA_GRAPH_H
#define DDP_CUDA_GRAPH_H

typedef struct {
    unsigned long captured;   /* forwards recorded and instantiated */
    unsigned long replayed;   /* launches of a recording */
    unsigned long failed;     /* captures or launches that failed (the ops ran op by op) */
} cuda_graph_counts_t;

/* The counts since the process started, over every cuda backend. */
cuda_graph_counts_t cuda_graph_counts(void);

#endif
