/* cuemu_fiber — see cuemu_fiber.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* ucontext on glibc */
#endif
#include "cuemu_fiber.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUEMU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define CUEMU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CUEMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define CUEMU_TSAN 1
#endif

/* TSan keeps a shadow call stack per thread that a bare stack switch would
 * tangle; its fiber interface is not worth it for a test build: ucontext.
 * Defining CUEMU_UCONTEXT forces the fallback (to test or time it). */
#if defined(__x86_64__) && !defined(CUEMU_TSAN) && !defined(CUEMU_UCONTEXT)
#define CUEMU_FAST_SWITCH 1
#else
#include <ucontext.h>
#endif

#ifdef CUEMU_ASAN
#include <sanitizer/common_interface_defs.h>
#define asan_start_switch __sanitizer_start_switch_fiber
#define asan_finish_switch __sanitizer_finish_switch_fiber
#else
/* without ASan the announcements are nothing */
static inline void asan_start_switch(void **fake, const void *bottom, size_t size)
{
    (void)fake, (void)bottom, (void)size;
}
static inline void asan_finish_switch(void *fake, const void **bottom, size_t *size)
{
    (void)fake, (void)bottom, (void)size;
}
#endif

struct cuemu_fiber {
    void (*fn)(void *);
    void *arg;
    char *stack;
    size_t stack_bytes;
    bool returned;    /* the last run returned (not a yield) */
    void *asan_fake;  /* ASan's fake stack while switched away */
#ifdef CUEMU_FAST_SWITCH
    void *sp;         /* the saved stack pointer while switched away */
#else
    ucontext_t ctx;
#endif
};

/* The resumer's side, per OS thread: the fiber running, where resume
 * switched from, and (for ASan) that stack's bounds. */
static _Thread_local cuemu_fiber_t *t_cur;
static _Thread_local void *t_sched_fake;
static _Thread_local const void *t_sched_bottom;
static _Thread_local size_t t_sched_size;
#ifdef CUEMU_FAST_SWITCH
static _Thread_local void *t_sched_sp;

/* Save the callee-saved registers (SysV x86-64: rbx, rbp, r12-r15) on the
 * running stack, store its pointer in *save_sp, load to_sp and pop the
 * other side's. MXCSR and the x87 control word are callee-saved too, but
 * nothing here changes them, so they are not switched. */
void ddp_cuemu_switch(void **save_sp, void *to_sp);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl ddp_cuemu_switch\n"
        ".hidden ddp_cuemu_switch\n"
        ".type ddp_cuemu_switch, @function\n"
        "ddp_cuemu_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size ddp_cuemu_switch, .-ddp_cuemu_switch\n"
        ".section .note.GNU-stack,\"\",@progbits\n"
        ".text\n");
#else
static _Thread_local ucontext_t t_sched_ctx;
#endif

/* The fiber's first frame: runs fn at every resume after a return. */
static void fiber_entry(void)
{
    asan_finish_switch(NULL, &t_sched_bottom, &t_sched_size);
    cuemu_fiber_t *self = t_cur;
    for (;;) {
        self->fn(self->arg);
        self->returned = true;
        cuemu_fiber_yield();
    }
}

#ifndef CUEMU_FAST_SWITCH
/* getcontext returns twice, as setjmp: alone in a small function, no
 * caller's variable lives across it (-Wclobbered) */
static int ctx_init(cuemu_fiber_t *self)
{
    if (getcontext(&self->ctx) != 0)
        return -1;
    self->ctx.uc_stack.ss_sp = self->stack;
    self->ctx.uc_stack.ss_size = self->stack_bytes;
    self->ctx.uc_link = NULL;   /* fiber_entry never returns */
    makecontext(&self->ctx, fiber_entry, 0);
    return 0;
}
#endif

cuemu_fiber_t *cuemu_fiber_new(size_t stack_bytes, void (*fn)(void *), void *arg)
{
    cuemu_fiber_t *self = calloc(1, sizeof *self);
    stack_bytes = (stack_bytes + 63) & ~(size_t)63;
    char *stack = self ? aligned_alloc(64, stack_bytes) : NULL;
    if (!stack) {
        free(self);
        return NULL;
    }
    self->fn = fn;
    self->arg = arg;
    self->stack = stack;
    self->stack_bytes = stack_bytes;
#ifdef CUEMU_FAST_SWITCH
    /* What ddp_cuemu_switch pops on the first resume: six zero registers
     * (rbp 0 ends a backtrace), then fiber_entry as the return address,
     * above it a zero return address of fiber_entry's own (it never
     * returns), which leaves rsp = 8 mod 16 at its entry, as after a call. */
    uintptr_t *top = (uintptr_t *)(stack + stack_bytes);
    top[-1] = 0;
    top[-2] = (uintptr_t)fiber_entry;
    for (int i = 3; i <= 8; i++)
        top[-i] = 0;
    self->sp = &top[-8];
#else
    if (ctx_init(self) != 0) {
        free(stack);
        free(self);
        return NULL;
    }
#endif
    return self;
}

void cuemu_fiber_destroy(cuemu_fiber_t **self_p)
{
    if (!*self_p)
        return;
    free((*self_p)->stack);
    free(*self_p);
    *self_p = NULL;
}

bool cuemu_fiber_resume(cuemu_fiber_t *self)
{
    t_cur = self;
    self->returned = false;
    asan_start_switch(&t_sched_fake, self->stack, self->stack_bytes);
#ifdef CUEMU_FAST_SWITCH
    ddp_cuemu_switch(&t_sched_sp, self->sp);
#else
    if (swapcontext(&t_sched_ctx, &self->ctx) != 0) {
        perror("cuemu: swapcontext into a fiber");
        abort();
    }
#endif
    asan_finish_switch(t_sched_fake, NULL, NULL);
    t_cur = NULL;
    return !self->returned;
}

void cuemu_fiber_yield(void)
{
    cuemu_fiber_t *self = t_cur;
    if (!self) {
        fprintf(stderr, "cuemu: a fiber yield outside any fiber\n");
        abort();
    }
    asan_start_switch(&self->asan_fake, t_sched_bottom, t_sched_size);
#ifdef CUEMU_FAST_SWITCH
    ddp_cuemu_switch(&self->sp, t_sched_sp);
#else
    if (swapcontext(&self->ctx, &t_sched_ctx) != 0) {
        perror("cuemu: swapcontext out of a fiber");
        abort();
    }
#endif
    asan_finish_switch(self->asan_fake, &t_sched_bottom, &t_sched_size);
}
