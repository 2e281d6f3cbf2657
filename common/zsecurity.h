/* zsecurity — the process-wide transport security of a ddpipe program.
 *
 * Set once at start (--curve-dir DIR / DDPIPE_CURVE_DIR, --insecure); then
 * every socket that zs_bind/zs_connect (or a caller of zs_secure_server /
 * zs_secure_client) makes follows it:
 *   - tcp:// bind: a CURVE server (DIR/server.cert_secret); a zauth actor,
 *     started once per process at the first CURVE bind, lets in only the
 *     client certificates in DIR/authorized/;
 *   - tcp:// connect: a CURVE client (DIR/client.cert_secret, the server's
 *     public key from DIR/server.cert);
 *   - ipc:// and inproc://: unchanged (the 0700 ipc directory protects them);
 *   - without CURVE, a tcp bind to anything but loopback (127.0.0.0/8, ::1,
 *     localhost) is refused unless --insecure (then a warning is logged).
 * `ddpipe keygen DIR` writes DIR. */
#ifndef DDP_ZSECURITY_H
#define DDP_ZSECURITY_H
#include "common/options.h"

#include <czmq.h>
#include <stdbool.h>

/* curve_dir NULL or "": no CURVE. Loads and checks the certificates now, so a
 * bad DIR fails at start with the file and the fix: DIR/server.cert always;
 * server.cert_secret and client.cert_secret when present (a missing one is an
 * error at the first bind, resp. connect, that needs it). 0, or -1 (logged). */
int zs_security_init(const char *curve_dir, bool insecure);
/* Takes --curve-dir DIR, --curve-dir=DIR and --insecure out of argv (every
 * ddpipe program accepts them: one parser for all) and calls
 * zs_security_init (DDPIPE_CURVE_DIR when no --curve-dir is given).
 * 0, or -1 (logged; the program should exit 2). */
int zs_security_args(int *argc, char **argv);
/* Stops the zauth actor; also registered with atexit. */
void zs_security_shutdown(void);

/* The settings, for a launcher that passes them on to its children. */
const char *zs_security_curve_dir(void);   /* NULL without CURVE */
bool zs_security_insecure(void);

/* Before zsock_bind/zmq_bind: CURVE server options on tcp endpoints (and the
 * zauth actor), the loopback rule without CURVE. 0, or -1 (logged). */
int zs_secure_server(zsock_t *s, const char *endpoint, const char *what);
/* Before zsock_connect/zmq_connect: CURVE client options on tcp endpoints. */
int zs_secure_client(zsock_t *s, const char *endpoint, const char *what);
/* The loopback rule alone, for a listener that is not ZeroMQ (the HTTP
 * /metrics): "HOST:PORT" not on loopback needs --insecure (it is never
 * encrypted). 0, or -1 (logged). */
int zs_security_check_listen(const char *hostport, const char *what);
/* true when host (as in a tcp endpoint or HOST:PORT, brackets allowed) is
 * 127.0.0.0/8, ::1 or localhost. "*" and 0.0.0.0 are not. */
bool zs_host_is_loopback(const char *host, size_t len);

/* The two options as rows of a program's option table (common/options.h):
 * declared there for its usage, man page and completion, taken out of argv
 * by zs_security_args before options_parse. */
#define ZS_SECURITY_OPTIONS                                                                    \
    OPTION_ELSEWHERE(OPTION_TYPE_STRING, "curve-dir", "DIR",                                   \
                     "CURVE on every tcp:// socket, certificates from 'ddpipe keygen DIR' "    \
                     "(default $DDPIPE_CURVE_DIR): lets in only DIR/authorized/"),             \
    OPTION_ELSEWHERE(OPTION_TYPE_FLAG, "insecure", NULL,                                       \
                     "allow a non-loopback tcp:// listen without CURVE (warned)")

#endif
