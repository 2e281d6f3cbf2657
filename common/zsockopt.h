/* zsockopt — socket setup shared by the daemons: linger, HWM, timeouts,
 * transport security (zsecurity: CURVE on tcp, the loopback rule),
 * and endpoint checks with operator-facing errors. */
#ifndef DDP_ZSOCKOPT_H
#define DDP_ZSOCKOPT_H
#include <czmq.h>

/* Create+bind/connect with the options every ddpipe socket uses; on failure
 * logs what failed and what to do, returns NULL. */
zsock_t *zs_bind(int type, const char *endpoint, const char *what);
zsock_t *zs_connect(int type, const char *endpoint, const char *what, const char *identity);

/* Make the ipc:// directory exist (ipc endpoints under the run directory). */
int zs_prepare_ipc(const char *endpoint);

/* Install SIGINT/SIGTERM handlers that set a flag read by zs_interrupted(). */
void zs_install_signals(void);
int zs_interrupted(void);
#endif
