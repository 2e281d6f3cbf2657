/* ddpipe keygen DIR — the CURVE certificates of a cluster (zcert format).
 *
 * DIR/server.cert(+_secret): the key pair every tcp:// bind serves with;
 * DIR/client.cert(+_secret): the key pair every tcp:// connect presents;
 * DIR/authorized/client.cert: the public client certificate, the only one
 * zauth lets in. One DIR, copied whole to every host of the job, is what
 * --curve-dir DIR (or DDPIPE_CURVE_DIR) reads: see common/zsecurity.h. */
#include "cli/commands.h"
#include "common/options.h"

#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const s_files[] = {"server.cert", "server.cert_secret", "client.cert",
                                      "client.cert_secret", "authorized/client.cert"};

static int make_dir(const char *path)
{
    if (mkdir(path, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "ddpipe keygen: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "ddpipe keygen: %s is not a directory\n", path);
        return -1;
    }
    if (chmod(path, 0700) < 0) {   /* secrets inside: only the owner */
        fprintf(stderr, "ddpipe keygen: cannot chmod 700 %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Refuses when any key file is there already (unless force). */
static int check_fresh(const char *dir, int force)
{
    int found = 0;
    for (size_t i = 0; i < sizeof s_files / sizeof s_files[0]; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, s_files[i]);
        if (access(p, F_OK) == 0) {
            if (!force)
                fprintf(stderr, "ddpipe keygen: %s exists\n", p);
            found++;
        }
    }
    if (found && !force) {
        fprintf(stderr, "ddpipe keygen: refusing to overwrite the keys in %s (running jobs and "
                "other hosts use them); give --force to replace them, then copy %s to every "
                "host again\n", dir, dir);
        return -1;
    }
    return 0;
}

static int save(zcert_t *cert, const char *dir, const char *name, int secret)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p) {
        fprintf(stderr, "ddpipe keygen: %s/%s: path too long\n", dir, name);
        return -1;
    }
    int rc = secret ? zcert_save(cert, p) : zcert_save_public(cert, p);
    if (rc != 0) {
        fprintf(stderr, "ddpipe keygen: cannot write %s%s: %s\n", p, secret ? "(_secret)" : "",
                strerror(errno));
        return -1;
    }
    if (secret) {
        snprintf(p, sizeof p, "%s/%s_secret", dir, name);
        if (chmod(p, 0600) < 0) {
            fprintf(stderr, "ddpipe keygen: cannot chmod 600 %s: %s\n", p, strerror(errno));
            return -1;
        }
    }
    return 0;
}

static zcert_t *new_cert(const char *role)
{
    zcert_t *c = zcert_new();
    if (!c)
        return NULL;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    zcert_set_meta(c, "name", "ddpipe %s", role);
    zcert_set_meta(c, "created-by", "ddpipe keygen on %s", host);
    return c;
}

static int write_all(const char *dir)
{
    char auth[PATH_MAX];
    snprintf(auth, sizeof auth, "%s/authorized", dir);
    zcert_t *server = new_cert("server"), *client = new_cert("client");
    int rc = -1;
    if (!server || !client)
        fprintf(stderr, "ddpipe keygen: cannot make a key pair: %s\n", zmq_strerror(zmq_errno()));
    else if (make_dir(auth) == 0 && save(server, dir, "server.cert", 1) == 0 &&
             save(client, dir, "client.cert", 1) == 0 &&
             save(client, auth, "client.cert", 0) == 0)
        rc = 0;
    zcert_destroy(&server);
    zcert_destroy(&client);
    return rc;
}

typedef struct {
    int force;
} keygen_options_t;

static const option_t s_rows[] = {
    OPTION_FLAG(keygen_options_t, force, "force",
                "replace existing keys (then copy DIR to every host again)"),
    OPTION_END};

const option_table_t keygen_options_table = {"ddpipe keygen", "DIR [--force]", s_rows};

int cmd_keygen(int argc, char **argv)
{
    keygen_options_t o;
    int next = 0;
    int prc = options_parse(&keygen_options_table, argc, argv, &o, &next);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    if (next != argc - 1) {
        fprintf(stderr, "ddpipe keygen: want one DIR (where the certificates go)\n");
        options_usage(&keygen_options_table, stderr);
        return 2;
    }
    int force = o.force;
    const char *dir = argv[next];
    if (strlen(dir) > 200) {   /* czmq's zcert_save takes 255-character paths */
        fprintf(stderr, "ddpipe keygen: %s is longer than 200 characters; pick a shorter DIR\n",
                dir);
        return 2;
    }
    if (!zsys_has_curve()) {
        fprintf(stderr, "ddpipe keygen: this libzmq has no CURVE (built without libsodium)\n");
        return 1;
    }
    zsys_handler_set(NULL);
    if (make_dir(dir) < 0 || check_fresh(dir, force) < 0 || write_all(dir) < 0)
        return 1;
    printf("CURVE certificates written to %s\n"
           "  server.cert, server.cert_secret   the key pair every tcp:// endpoint serves with\n"
           "  client.cert, client.cert_secret   the key pair every daemon connects with\n"
           "  authorized/client.cert            the clients let in (add or remove .cert files)\n"
           "Copy the whole directory, keeping it private (mode 700, secrets 600), to every\n"
           "host of the job, e.g.:\n"
           "  rsync -a %s/ HOST:%s/\n"
           "then give each daemon and ddpipe eval/train/tap --curve-dir %s (or\n"
           "DDPIPE_CURVE_DIR=%s). Anyone with the *_secret files can join the job.\n",
           dir, dir, dir, dir, dir);
    return 0;
}
