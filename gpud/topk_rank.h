/* topk_rank — each row's top-k class ids in torch.topk's order: the higher
 * logit first, equal logits by the lower class id, a NaN above everything
 * (so top-1 of a row with NaNs is torch.argmax's, its first NaN); -1 past
 * the row's classes. The host's ranking, for model_topk_ce and the host
 * backends' kernel (bk_read_topk); the cuda kernel ranks the same way
 * (ck_topk_ce). */
#ifndef DDP_TOPK_RANK_H
#define DDP_TOPK_RANK_H

#include <stdint.h>

/* logits: n rows of classes floats; topk: n * k ids. */
void topk_rank(const float *logits, int n, int classes, int k, int32_t *topk);

#endif
