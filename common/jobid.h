/* jobid — the identity of one job (docs/SECURITY.md "Job identity").
 *
 * CURVE keys say who may connect, not which job a daemon belongs to: two
 * jobs may share keys. A job id tells them apart: `ddpipe eval/train` draws
 * one at random per run and hands it to its daemons in DDPIPE_JOB;
 * daemons started by hand share one through DDPIPE_JOB (reducerd also
 * takes --job). reducerd refuses a JOIN or a message that names another
 * job; a daemon started without one joins whichever job it reaches.
 */
#ifndef DDP_COMMON_JOBID_H
#define DDP_COMMON_JOBID_H

#include <stdbool.h>
#include <stddef.h>

#define JOBID_ENV "DDPIPE_JOB"
#define JOBID_MAX 64        /* bytes with the NUL: the protocol's `job` limit */

/* 1..63 characters of [A-Za-z0-9._:-]: one word in a log line. */
bool jobid_valid(const char *id);
/* DDPIPE_JOB into out ("" when unset or empty). 0, or -1 with the reason
 * in err when it is not a valid id. */
int jobid_from_env(char *out, size_t cap, char *err, size_t errlen);
/* A fresh id: 32 hex digits, 128 bits from getrandom. 0 or -1. */
int jobid_random(char *out, size_t cap);

#endif
