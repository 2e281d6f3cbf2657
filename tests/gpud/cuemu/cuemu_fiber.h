/* cuemu_fiber — the emulator's fibers: one function run again and again on
 * its own stack, each run resumed until it returns (a block's thread, each
 * run one launch's body; cuemu.cc). A barrier yields back to whoever
 * resumed it.
 *
 * Why not ucontext alone: swapcontext saves and restores the signal mask
 * (a system call each switch) and under ASan clears the shadow of the whole
 * target stack; a kernel with barriers switches twice per thread per
 * barrier, and that was a quarter of the emulated tests' time. On x86-64
 * (without TSan) a switch here is six registers and the stack pointer,
 * announced to ASan through its fiber interface; elsewhere ucontext. */
#ifndef DDP_CUEMU_FIBER_H
#define DDP_CUEMU_FIBER_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuemu_fiber cuemu_fiber_t;

/* A fiber of stack_bytes that runs fn(arg) at each resume after a run has
 * returned; NULL when out of memory. */
cuemu_fiber_t *cuemu_fiber_new(size_t stack_bytes, void (*fn)(void *), void *arg);
void cuemu_fiber_destroy(cuemu_fiber_t **self_p);

/* Run the fiber until it yields (true) or its run returns (false). Only
 * from outside any fiber. */
bool cuemu_fiber_resume(cuemu_fiber_t *self);

/* From inside a fiber's run: back to its resume, which returns true. */
void cuemu_fiber_yield(void);

#ifdef __cplusplus
}
#endif

#endif
