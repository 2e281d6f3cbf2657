#include "common/zsecurity.h"

#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One configuration per process: set before the first socket, read after. */
static struct {
    bool curve, insecure;
    bool have_server, have_client;   /* the secret certificates are there */
    char dir[PATH_MAX];
    char authorized[PATH_MAX + 16];
    uint8_t server_public[32], server_secret[32];
    uint8_t client_public[32], client_secret[32];
} s_sec;

static zactor_t *s_auth;   /* zauth, started at the first CURVE bind */
static pthread_mutex_t s_auth_lock = PTHREAD_MUTEX_INITIALIZER;

const char *zs_security_curve_dir(void) { return s_sec.curve ? s_sec.dir : NULL; }
bool zs_security_insecure(void) { return s_sec.insecure; }

static void fix_hint(char *buf, size_t len)
{
    snprintf(buf, len, "create the certificates with 'ddpipe keygen %s' (or copy that directory, "
             "whole, from the host where they were made)", s_sec.dir);
}

/* Reads the Z85 key at `path` in a zcert file into key[32]. */
static int read_key(zconfig_t *root, const char *file, const char *path, uint8_t key[32])
{
    char hint[PATH_MAX + 128];
    fix_hint(hint, sizeof hint);
    const char *txt = zconfig_resolve(root, path, NULL);
    if (!txt || strlen(txt) != 40 || !zmq_z85_decode(key, txt)) {
        log_error("CURVE certificate %s is malformed: no valid %s (40 Z85 characters); %s", file,
                  path, hint);
        return -1;
    }
    return 0;
}

/* Loads DIR/name (public key) or, with secret, DIR/name_secret (both keys). */
static int load_cert(const char *name, bool secret, uint8_t pub[32], uint8_t sec[32])
{
    char file[PATH_MAX + 64], hint[PATH_MAX + 128];
    snprintf(file, sizeof file, "%s/%s%s", s_sec.dir, name, secret ? "_secret" : "");
    fix_hint(hint, sizeof hint);
    struct stat st;
    if (stat(file, &st) < 0 || access(file, R_OK) < 0) {
        log_error("cannot read the CURVE certificate %s: %s; %s", file, strerror(errno), hint);
        return -1;
    }
    if (secret && (st.st_mode & 077))
        log_warn("CURVE secret certificate %s is readable by other users (mode %03o): "
                 "chmod 600 %s", file, (unsigned)(st.st_mode & 0777), file);
    zconfig_t *root = zconfig_load(file);
    if (!root) {
        log_error("CURVE certificate %s is malformed (not a zcert file); %s", file, hint);
        return -1;
    }
    int rc = read_key(root, file, "/curve/public-key", pub);
    if (rc == 0 && secret)
        rc = read_key(root, file, "/curve/secret-key", sec);
    zconfig_destroy(&root);
    return rc;
}

static int check_authorized_dir(void)
{
    snprintf(s_sec.authorized, sizeof s_sec.authorized, "%s/authorized", s_sec.dir);
    struct stat st;
    errno = 0;
    if (stat(s_sec.authorized, &st) < 0 || !S_ISDIR(st.st_mode) ||
        access(s_sec.authorized, R_OK | X_OK) < 0) {
        char hint[PATH_MAX + 128];
        fix_hint(hint, sizeof hint);
        log_error("cannot read %s, the directory of the client certificates let in: %s; %s",
                  s_sec.authorized, errno ? strerror(errno) : "not a directory", hint);
        return -1;
    }
    return 0;
}

static bool exists(const char *name)
{
    char file[PATH_MAX + 64];
    snprintf(file, sizeof file, "%s/%s", s_sec.dir, name);
    return access(file, F_OK) == 0;
}

/* server.cert (the server's public key) is needed by every connect; the
 * secret halves only by the role that uses them (a host that only connects
 * needs no server secret), so a missing one is an error at its first use,
 * a malformed one at once. */
static int load_all(void)
{
    uint8_t pub_of_secret[32];
    if (load_cert("server.cert", false, s_sec.server_public, NULL) < 0)
        return -1;
    s_sec.have_server = exists("server.cert_secret");
    if (s_sec.have_server &&
        load_cert("server.cert", true, pub_of_secret, s_sec.server_secret) < 0)
        return -1;
    s_sec.have_client = exists("client.cert_secret");
    if (s_sec.have_client &&
        load_cert("client.cert", true, s_sec.client_public, s_sec.client_secret) < 0)
        return -1;
    /* a server.cert from one keygen and a server.cert_secret from another
     * would fail every handshake without a word: say it now */
    if (s_sec.have_server && memcmp(pub_of_secret, s_sec.server_public, 32) != 0) {
        log_error("CURVE certificates %s/server.cert and %s/server.cert_secret are not one pair "
                  "(copied from two different 'ddpipe keygen' runs?); copy the whole directory "
                  "again from one host", s_sec.dir, s_sec.dir);
        return -1;
    }
    return 0;
}

/* The role's files, checked at its first socket: the error names them. */
static int need(bool have, const char *name)
{
    if (have)
        return 0;
    char file[PATH_MAX + 64], hint[PATH_MAX + 128];
    snprintf(file, sizeof file, "%s/%s", s_sec.dir, name);
    fix_hint(hint, sizeof hint);
    log_error("cannot read the CURVE certificate %s: %s; %s", file, strerror(ENOENT), hint);
    return -1;
}

void zs_security_shutdown(void)
{
    pthread_mutex_lock(&s_auth_lock);
    zactor_destroy(&s_auth);
    pthread_mutex_unlock(&s_auth_lock);
}

int zs_security_init(const char *curve_dir, bool insecure)
{
    static bool s_atexit;
    s_sec.insecure = insecure;
    s_sec.curve = false;
    if (!curve_dir || !curve_dir[0])
        return 0;
    if (!zsys_has_curve()) {
        log_error("--curve-dir %s: this libzmq was built without CURVE (libsodium); install a "
                  "libzmq with CURVE support", curve_dir);
        return -1;
    }
    /* children started from another working directory get the same path */
    if (!realpath(curve_dir, s_sec.dir)) {
        log_error("--curve-dir %s: %s; create the certificates with 'ddpipe keygen %s'",
                  curve_dir, strerror(errno), curve_dir);
        return -1;
    }
    if (load_all() < 0)
        return -1;
    s_sec.curve = true;
    if (!s_atexit) {
        /* czmq's own atexit (zsys_shutdown) must run after ours, which
         * stops zauth's socket: register it first */
        zsys_init();
        atexit(zs_security_shutdown);
        s_atexit = true;
    }
    return 0;
}

/* Removes argv[i] .. argv[i+n-1], keeping the NULL terminator. */
static void take_out(int *argc, char **argv, int i, int n)
{
    memmove(argv + i, argv + i + n, (size_t)(*argc - i - n + 1) * sizeof *argv);
    *argc -= n;
}

int zs_security_args(int *argc, char **argv)
{
    const char *dir = NULL;
    bool insecure = false;
    const char *slash = strrchr(argv[0], '/');
    log_init(slash ? slash + 1 : argv[0], -1, 0);   /* the program's own log_init comes later */
    for (int i = 1; i < *argc;) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "--insecure") == 0) {
            insecure = true;
            take_out(argc, argv, i, 1);
        } else if (strncmp(argv[i], "--curve-dir=", 12) == 0) {
            dir = argv[i] + 12;
            take_out(argc, argv, i, 1);
        } else if (strcmp(argv[i], "--curve-dir") == 0) {
            /* never the next flag as the value, like every option table
             * (common/options.c): --curve-dir=--x is the way to name one */
            if (i + 1 >= *argc || strncmp(argv[i + 1], "--", 2) == 0) {
                log_error("--curve-dir needs a directory (made by 'ddpipe keygen DIR')%s%s",
                          i + 1 < *argc ? ", got the flag " : "", i + 1 < *argc ? argv[i + 1] : "");
                return -1;
            }
            dir = argv[i + 1];
            take_out(argc, argv, i, 2);
        } else {
            i++;
        }
    }
    if (dir && !dir[0]) {
        log_error("--curve-dir needs a directory (made by 'ddpipe keygen DIR')");
        return -1;
    }
    if (!dir)
        dir = getenv("DDPIPE_CURVE_DIR");
    return zs_security_init(dir, insecure);
}

bool zs_host_is_loopback(const char *host, size_t len)
{
    char h[256];
    if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
        host++;
        len -= 2;
    }
    if (len == 0 || len >= sizeof h)
        return false;
    memcpy(h, host, len);
    h[len] = 0;
    if (strcmp(h, "localhost") == 0)
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, h, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, h, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

/* The host part of "HOST:PORT" ("[v6]:PORT" too); no colon: all of it. */
static bool hostport_is_loopback(const char *hp)
{
    const char *colon = strrchr(hp, ':');
    size_t len = colon ? (size_t)(colon - hp) : strlen(hp);
    if (hp[0] != '[' && colon && memchr(hp, ':', len))   /* bare v6 without a port */
        len = strlen(hp);
    return zs_host_is_loopback(hp, len);
}

/* why: what is missing; fix: what to do instead of --insecure. */
static int loopback_rule(const char *address, bool loopback, const char *what, const char *why,
                         const char *fix)
{
    if (loopback)
        return 0;
    if (s_sec.insecure) {
        log_warn("the %s listens on %s, not a loopback address, and %s (--insecure): anyone who "
                 "can reach it can read its traffic%s", what, address, why,
                 s_sec.curve ? "" : " and send to it");
        return 0;
    }
    log_error("refusing to listen on %s for the %s: it is not a loopback address and %s; %s, "
              "or, on a network you trust, give --insecure", address, what, why, fix);
    return -1;
}

int zs_security_check_listen(const char *hostport, const char *what)
{
    return loopback_rule(hostport, hostport_is_loopback(hostport), what,
                         "HTTP is never encrypted",
                         "listen on 127.0.0.1 (a local Prometheus or an SSH tunnel can read it)");
}

static int set_key(void *h, int opt, const void *val, size_t len, const char *what, const char *ep)
{
    if (zmq_setsockopt(h, opt, val, len) == 0)
        return 0;
    log_error("cannot set CURVE option %d on the %s socket for %s: %s", opt, what, ep,
              zmq_strerror(zmq_errno()));
    return -1;
}

static int start_auth(void)
{
    int rc = 0;
    pthread_mutex_lock(&s_auth_lock);
    if (!s_auth) {
        s_auth = zactor_new(zauth, NULL);
        if (!s_auth || (log_verbose() && (zstr_send(s_auth, "VERBOSE") < 0 ||
                                          zsock_wait(s_auth) < 0)) ||
            zstr_sendx(s_auth, "CURVE", s_sec.authorized, NULL) < 0 || zsock_wait(s_auth) < 0) {
            log_error("cannot start the CURVE authenticator (czmq zauth) for %s: %s; no tcp "
                      "socket can be served securely", s_sec.authorized, zmq_strerror(zmq_errno()));
            zactor_destroy(&s_auth);
            rc = -1;
        } else {
            log_debug("CURVE: clients let in are the certificates in %s", s_sec.authorized);
        }
    }
    pthread_mutex_unlock(&s_auth_lock);
    return rc;
}

static bool is_tcp(const char *endpoint) { return strncmp(endpoint, "tcp://", 6) == 0; }

int zs_secure_server(zsock_t *s, const char *endpoint, const char *what)
{
    if (!is_tcp(endpoint))
        return 0;
    if (!s_sec.curve)
        return loopback_rule(endpoint, hostport_is_loopback(endpoint + 6), what, "CURVE is off",
                             "give --curve-dir DIR (certificates from 'ddpipe keygen DIR')");
    int one = 1;
    void *h = zsock_resolve(s);
    if (need(s_sec.have_server, "server.cert_secret") < 0 || check_authorized_dir() < 0 ||
        start_auth() < 0 || set_key(h, ZMQ_CURVE_SERVER, &one, sizeof one, what, endpoint) < 0 ||
        set_key(h, ZMQ_CURVE_SECRETKEY, s_sec.server_secret, 32, what, endpoint) < 0)
        return -1;
    return 0;
}

int zs_secure_client(zsock_t *s, const char *endpoint, const char *what)
{
    if (!is_tcp(endpoint) || !s_sec.curve)
        return 0;
    void *h = zsock_resolve(s);
    if (need(s_sec.have_client, "client.cert_secret") < 0 || set_key(h, ZMQ_CURVE_SERVERKEY, s_sec.server_public, 32, what, endpoint) < 0 ||
        set_key(h, ZMQ_CURVE_PUBLICKEY, s_sec.client_public, 32, what, endpoint) < 0 ||
        set_key(h, ZMQ_CURVE_SECRETKEY, s_sec.client_secret, 32, what, endpoint) < 0)
        return -1;
    return 0;
}
