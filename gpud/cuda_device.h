/* cuda_device — which GPU a gpud computes on (docs/CUDA.md "Devices"):
 * one per local rank, as torchrun's LOCAL_RANK. Plain C (no CUDA), so the
 * rule is tested on every machine; the cuda backend applies it. */
#ifndef DDP_CUDA_DEVICE_H
#define DDP_CUDA_DEVICE_H

#include <stddef.h>

/* The ordinal among `count` visible devices: device_env (DDPIPE_CUDA_DEVICE,
 * explicit: must be < count) when set, else local_env (DDPIPE_LOCAL_RANK)
 * modulo count, else 0. -1 with the reason in err. */
int cuda_device_pick(const char *device_env, const char *local_env, int count, char *err,
                     size_t errlen);

/* gpud, before it opens its backend: DDPIPE_LOCAL_RANK, unless already set,
 * from LOCAL_RANK, else SLURM_LOCALID, else rank (its --rank; < 0: none). */
void cuda_device_set_local_rank(long rank);

#endif
