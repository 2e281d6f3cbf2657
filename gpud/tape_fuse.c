/* tape_fuse — a training graph's fusions: an op whose forward the kernel
 * of an earlier op does in the same pass. The ops stay on the tape and
 * their backward is unchanged (but for the dropout's and, on the device,
 * the block end's ReLU's: below);
 * what changes is which op's forward writes which buffer, so a fusion is
 * only taken where no backward reads the value that is no longer stored.
 *
 * add -> relu (the residual block's tail, relu(a + b)): the add's kernel
 * applies the ReLU (bk_kernels_t.add's relu flag, every backend has it for
 * the inference plan) and writes the relu's output. The relu's forward is
 * skipped, and the sum itself is never stored: the relu's backward reads
 * the relu's output, the add's backward reads no value. One pass over the
 * activation instead of two, and one activation less in memory. The same
 * bits: max(0, v) commutes with rounding v to bf16 or fp16, so the 16-bit
 * kernels' single rounding and the bf16 emulation's rounding of the
 * relu's output give what the two ops gave.
 *
 * BatchNorm -> add -> relu (torchvision's BasicBlock and Bottleneck end
 * relu(bn(conv(t)) + identity)): where the backend has bn_add_relu, the
 * BatchNorm's normalising pass reads the residual and writes the relu's
 * output; the add's and the relu's forwards are skipped, and neither the
 * BatchNorm's output nor the sum is stored. The BatchNorm's backward reads
 * its output only for a ReLU of its own (bk_bn_t.relu, not set here), so
 * one pass reading two activations and writing one replaces three passes.
 * The kernel stores the BatchNorm's value as its own kernel would (16 bits:
 * rounded) before the sum: the same bits. The residual must exist before
 * the BatchNorm runs (an identity, or a downsample's BatchNorm recorded
 * first: the add's other input is taken). Not with --precision bf16 on fp32
 * buffers, whose rounding of the BatchNorm's output is a pass of its own.
 *
 * BatchNorm + ReLU -> dropout (WideResNet's blocks: conv, BatchNorm with
 * its ReLU, dropout, conv): where the backend has bn_relu_drop, the
 * BatchNorm's normalising pass applies the dropout's mask and scale and
 * writes the dropout's output; the dropout's forward is skipped and the
 * BatchNorm's output is not stored. The backward fuses too: the dropout's
 * is skipped, and the BatchNorm's reads the dropout's output as its ReLU's
 * mask and the dropout's output gradient times 1 / (1 - p) (bn_grad_sums'
 * gscale). That is the two backwards' result: where the mask kept a
 * value, the dropout's output is the ReLU's times a positive scale (> 0
 * exactly where the ReLU's output is), and where it dropped one the
 * output is +0, so the mask gives +0 as the dropout's backward did. The
 * dropout's read and write of the activation are gone forward and
 * backward, and its mask's hash is drawn once a step, not twice. Not
 * with --precision bf16 (the rounding of the BatchNorm's output is a pass
 * of its own), nor a frozen BatchNorm (its backward is the eval-mode
 * kernel's, which takes no scale). A training graph set to eval runs the
 * BatchNorm's own kernel into the dropout's output (the identity there).
 *
 * Backward, the block end relu(bn(x) + residual) (tape_fuse_bwd): the
 * ReLU's backward (dy' = gy where its output y > 0, else +0, into the
 * add's gradient, which both of the add's inputs share) is done by the
 * BatchNorm's gradient-sums pass, which reads gy and y for its sums
 * anyway and stores dy' as it goes (bk_bn_train_t.gres); the BatchNorm's
 * second pass reads dy' from there as before. The ReLU's pass (reading two
 * activations, writing one) is gone; the sums pass writes one activation
 * more: 14 bytes an element of 16-bit activations instead of 16. Only where
 * nothing runs between them backward (the BatchNorm right before the add,
 * whose inputs both share its gradient buffer, so its backward moves
 * nothing), and only while the BatchNorm runs on the device (bn_on_device:
 * not SyncBatchNorm's or a bitwise step's host sums, where the ReLU's
 * backward runs in its place as before). The same bits: dy' is stored as
 * the ReLU's kernel stores it, and the sums and the second pass read the
 * same values.
 *
 * ... and the last term of that ReLU's output gradient (tape_fuse_bwd,
 * grad_fold): the block's output feeds the next block's first conv and
 * its shortcut (an identity's add, or a downsample conv), so its gradient
 * is a sum; each later term went to the gradient temporary and an acc
 * pass added it (reading two activations, writing one). The first conv
 * reads it right after the ReLU, so its backward writes the last term, and
 * nothing runs backward between it and the BatchNorm (the ReLU's and the
 * add's backward move nothing). Its term is left in the temporary, and the
 * sums pass adds it as it reads gy (bk_bn_train_t.gy2): one activation
 * read more there instead of the acc pass's three, 2 bytes an element of
 * 16-bit activations instead of 6. The same bits: the sum is acc's (a
 * float add, commutative, rounded once to the buffer's type) before the
 * ReLU's mask, and dy' is stored as before; the tensor's own gradient
 * buffer then holds a partial sum, which nothing reads (not a graph
 * input, not kept).
 *
 * A training graph set to eval (bk_graph_set_training) after these were
 * made keeps them forward (tape_forward.c: the eval-mode normalising with
 * the residual); backward, each BatchNorm runs its eval-mode backward,
 * which reads no output where it has no ReLU of its own (the output the
 * add fusion does not store), and the ReLU's own backward runs
 * (tape_backward.c relu_bwd_by_bn).
 *
 * The inference plan (graph_plan.c) has its own fusions; a bitwise step's
 * chunks run tape_forward_op and tape_bn_normalize like a plain forward, so
 * they fuse alike. DDPIPE_TRAIN_FUSE=0 in gpud's environment turns these
 * off, and with them the wider gradient sharing of tape_compile.c's
 * share_add_grads (benches and tests compare). */

#include "gpud/tape_priv.h"
#include "common/env_switch.h"

int tape_fuse_enabled(void)
{
    return env_switch_on("DDPIPE_TRAIN_FUSE");
}

/* A value nobody but its one reader needs: not a graph input, one use, not
 * asked for (bk_keep), not the fp32 loss of a 16-bit graph. */
static int private_value(const bk_tensor_t *t, const int *uses)
{
    return !t->is_input && t->producer >= 0 && uses[t->id] == 1 && !t->user_keep && !t->f32;
}

/* The add at i whose sum only the relu at i + 1 reads. */
static int add_relu_pair(const bk_graph_t *g, size_t i, const int *uses)
{
    const top_t *a = &g->ops[i], *r = &g->ops[i + 1];
    return a->kind == TO_ADD && a->post.n == 0 && r->kind == TO_RELU && r->in[0] == a->out &&
           private_value(a->out, uses) && !r->out->f32;
}

/* The op index of a BatchNorm (training mode, no ReLU of its own) whose
 * output only the add reads and after which the add's other input exists,
 * or -1. */
static int bn_of_add(const bk_graph_t *g, const top_t *a, const int *uses)
{
    if (!g->k->bn_add_relu || (g->half && !g->store16))
        return -1;
    for (int j = 0; j < 2; j++) {
        const bk_tensor_t *p = a->in[j], *q = a->in[1 - j];
        if (!private_value(p, uses))
            continue;
        const top_t *b = &g->ops[p->producer];
        if (b->kind == TO_BN && !b->bn.relu && !b->bn.eval && !b->fwd_out &&
            q->producer < p->producer)
            return p->producer;
    }
    return -1;
}

/* The BatchNorm at i (training mode, its own ReLU, nothing fused yet)
 * whose output only the dropout at i + 1 reads, where the backend fuses
 * them. */
static int bn_drop_pair(const bk_graph_t *g, size_t i, const int *uses)
{
    const top_t *b = &g->ops[i], *d = &g->ops[i + 1];
    const bk_kernels_t *k = g->k;
    return k->bn_relu_drop && k->bn_grad_sums && k->bn_grad_apply && !g->half &&
           !backend_bn_on_device(g->base.be) && b->kind == TO_BN && b->bn.relu &&
           !b->bn.eval && !b->fwd_out && d->kind == TO_DROPOUT && d->in[0] == b->out &&
           private_value(b->out, uses) && !d->out->f32;
}

void tape_fuse(bk_graph_t *g, const int *uses)
{
    if (g->fops || g->nops < 2 || !tape_fuse_enabled())
        return;
    for (size_t i = 0; i + 1 < g->nops; i++) {
        if (!bn_drop_pair(g, i, uses))
            continue;
        top_t *b = &g->ops[i], *d = &g->ops[i + 1];
        b->fwd_out = d->out;
        b->fwd_drop = d;
        b->out->no_val = 1;
        d->fwd_skip = 1;
    }
    for (size_t i = 0; i + 1 < g->nops; i++) {
        top_t *a = &g->ops[i], *r = &g->ops[i + 1];
        if (a->fwd_skip || !add_relu_pair(g, i, uses))
            continue;
        int b = bn_of_add(g, a, uses);
        a->out->no_val = 1;
        r->fwd_skip = 1;
        if (b < 0) {
            a->fwd_out = r->out;
            continue;
        }
        top_t *bn = &g->ops[b];
        bk_tensor_t *res = a->in[0] == bn->out ? a->in[1] : a->in[0];
        bn->fwd_out = r->out;
        bn->fwd_res = res;
        bn->out->no_val = 1;
        a->fwd_skip = 1;
    }
}

/* Whether BN at i (forward-fused with the add at i + 1 and its ReLU at
 * i + 2) may do the ReLU's backward: the add's backward moves nothing (each
 * input shares its gradient buffer or needs none) and the ReLU's output
 * wants a gradient. */
static int relu_bwd_pair(const bk_graph_t *g, size_t i)
{
    if (i + 2 >= g->nops || !backend_bn_on_device(g->base.be))
        return 0;
    const top_t *b = &g->ops[i], *a = &g->ops[i + 1], *r = &g->ops[i + 2];
    if (b->kind != TO_BN || !b->fwd_res || !bn_training(g, b) || a->kind != TO_ADD ||
        !a->fwd_skip || r->kind != TO_RELU || !r->fwd_skip || r->in[0] != a->out ||
        b->fwd_out != r->out || !r->out->needs_grad || !a->out->needs_grad || !a->out->grad)
        return 0;
    for (int j = 0; j < 2; j++)
        if (a->in[j]->needs_grad && !a->in[j]->grad_shared)
            return 0;
    return a->in[0] == b->out || a->in[1] == b->out;
}

/* Whether the op after BN i's fused ReLU (at i + 2) writes the last term of
 * the ReLU's output's gradient for the BatchNorm to add: a conv reading
 * that tensor, its first reader (the ReLU made it at i + 2), which nobody
 * reads after the backward. */
static int grad_fold_op(const bk_graph_t *g, size_t i)
{
    if (i + 3 >= g->nops)
        return 0;
    const top_t *r = &g->ops[i + 2], *c = &g->ops[i + 3];
    return c->kind == TO_CONV && c->nin == 1 && c->in[0] == r->out && !r->out->user_keep &&
           !r->out->is_input;
}

void tape_fuse_bwd(bk_graph_t *g)
{
    if (g->fops || !g->training || g->forward_only || !tape_fuse_enabled())
        return;
    for (size_t i = 0; i + 2 < g->nops; i++)
        if (relu_bwd_pair(g, i)) {
            g->ops[i].bwd_relu = &g->ops[i + 2];
            g->ops[i + 2].bwd_fused = 1;
            if (grad_fold_op(g, i))
                g->ops[i + 3].grad_fold = &g->ops[i];
        }
}

int bk_graph_bwd_fusions(const bk_graph_t *g)
{
    int n = 0;
    for (size_t i = 0; g && i < g->nops; i++)
        n += g->ops[i].bwd_relu != NULL;
    return n;
}

int bk_graph_grad_folds(const bk_graph_t *g)
{
    int n = 0;
    for (size_t i = 0; g && i < g->nops; i++)
        n += g->ops[i].grad_fold != NULL;
    return n;
}

void tape_fuse_clear(bk_graph_t *g)
{
    for (size_t i = 0; i < g->nops; i++) {
        g->ops[i].fwd_out = g->ops[i].fwd_res = NULL;
        g->ops[i].fwd_drop = NULL;
        g->ops[i].fwd_skip = 0;
        g->ops[i].bwd_relu = NULL;
        g->ops[i].bwd_fused = 0;
        g->ops[i].grad_fold = NULL;
    }
    for (size_t i = 0; i < g->nv; i++)
        g->v[i]->no_val = g->v[i]->grad_left = 0;
}
