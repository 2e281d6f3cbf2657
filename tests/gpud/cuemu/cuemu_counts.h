/* cuemu_counts — what the emulated CUDA runtime (cuemu.cc) was asked, for
 * tests of the host code's behaviour per step: which calls a steady-state
 * training step makes (a device-wide wait or an allocation per step is a
 * cost a GPU pays; the emulator cannot time it, so the tests count it). */
#ifndef DDP_CUEMU_COUNTS_H
#define DDP_CUEMU_COUNTS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    unsigned long malloc_calls;     /* cudaMalloc */
    unsigned long free_calls;       /* cudaFree */
    unsigned long device_syncs;     /* cudaDeviceSynchronize */
    unsigned long stream_syncs;     /* cudaStreamSynchronize */
    unsigned long launches;         /* kernels run outside a recording (a graph launch's count once) */
} cuemu_counts_t;

cuemu_counts_t cuemu_counts(void);

#ifdef __cplusplus
}
#endif
#endif
