#include "common/zsockopt.h"

#include "common/log.h"
#include "common/zsecurity.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>

static volatile sig_atomic_t s_interrupted = 0;

static void on_signal(int sig)
{
    (void)sig;
    s_interrupted = 1;
}

void zs_install_signals(void)
{
    /* czmq would install its own handler that only works with zsys; we want
     * our loops to see the flag and shut down cleanly. */
    zsys_handler_set(NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int zs_interrupted(void) { return s_interrupted; }

int zs_prepare_ipc(const char *endpoint)
{
    if (strncmp(endpoint, "ipc://", 6) != 0)
        return 0;
    char path[512];
    snprintf(path, sizeof path, "%s", endpoint + 6);
    if (strlen(path) > 100) {
        log_error("ipc endpoint '%s' is longer than the 100 characters a unix socket path allows; "
                  "use a shorter --out path or a tcp:// endpoint", endpoint);
        return -1;
    }
    char *slash = strrchr(path, '/');
    if (!slash)
        return 0;
    *slash = 0;
    /* mkdir -p */
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            mkdir(path, 0755);
            *p = '/';
        }
    }
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        log_error("cannot create the directory of ipc endpoint '%s': %s", endpoint, strerror(errno));
        return -1;
    }
    return 0;
}

static void set_common(zsock_t *s)
{
    zsock_set_linger(s, 1000);
    zsock_set_sndhwm(s, 100000);
    zsock_set_rcvhwm(s, 100000);
}

zsock_t *zs_bind(int type, const char *endpoint, const char *what)
{
    if (zs_prepare_ipc(endpoint) < 0)
        return NULL;
    zsock_t *s = zsock_new(type);
    if (!s) {
        log_error("cannot create the %s socket: %s", what, zmq_strerror(zmq_errno()));
        return NULL;
    }
    set_common(s);
    if (type == ZMQ_ROUTER)
        zsock_set_router_mandatory(s, 0);
    if (zs_secure_server(s, endpoint, what) < 0) {
        zsock_destroy(&s);
        return NULL;
    }
    if (zsock_bind(s, "%s", endpoint) < 0) {
        log_error("cannot bind the %s socket to %s: %s (is another ddpipe job using it? "
                  "pick another endpoint)", what, endpoint, zmq_strerror(zmq_errno()));
        zsock_destroy(&s);
        return NULL;
    }
    return s;
}

zsock_t *zs_connect(int type, const char *endpoint, const char *what, const char *identity)
{
    zsock_t *s = zsock_new(type);
    if (!s) {
        log_error("cannot create the %s socket: %s", what, zmq_strerror(zmq_errno()));
        return NULL;
    }
    set_common(s);
    if (identity)
        zsock_set_identity(s, identity);
    if (zs_secure_client(s, endpoint, what) < 0) {
        zsock_destroy(&s);
        return NULL;
    }
    if (zsock_connect(s, "%s", endpoint) < 0) {
        log_error("cannot connect the %s socket to %s: %s (check the endpoint syntax, "
                  "e.g. tcp://host:5555)", what, endpoint, zmq_strerror(zmq_errno()));
        zsock_destroy(&s);
        return NULL;
    }
    return s;
}
