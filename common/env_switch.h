/* env_switch — the environment's on/off switches of ddpipe's mechanisms
 * (DDPIPE_TRAIN_FUSE, DDPIPE_CUDA_GRAPHS, ...): on unless the variable is
 * set to "0", read where the mechanism decides (docs/CUDA.md's tables say
 * when each is read). One reading rule for every switch, so "0" turns any
 * of them off and nothing else does. */
#ifndef DDP_ENV_SWITCH_H
#define DDP_ENV_SWITCH_H

/* 1 unless the environment sets name to "0". */
int env_switch_on(const char *name);

#endif
