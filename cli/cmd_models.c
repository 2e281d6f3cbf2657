/* ddpipe models — the architectures eval and train accept: name, parameter
 * count, input and default transform. The counts come from gpud itself
 * (`gpud --list-models` walks each architecture's description), so they
 * are the network that runs, never a copied number; the transform is the
 * one cli/child_defaults.h gives loaderd and gpud. */
#include "cli/child_defaults.h"
#include "cli/commands.h"
#include "common/json.h"
#include "common/options.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int json;
} models_options_t;

static const option_t s_rows[] = {
    OPTION_FLAG(models_options_t, json, "json", "one JSON object per line instead of a table"),
    OPTION_END};

const option_table_t models_options_table = {"ddpipe models", "[--json]", s_rows};

typedef struct {
    char name[32];
    long long params, buffers;
    int in_channels, h, w, fixed, classes;
} card_t;

/* gpud next to this program (or in $DDPIPE_BIN), as the jobs start it. */
static void gpud_path(char *path, size_t len)
{
    const char *env = getenv("DDPIPE_BIN");
    char self[PATH_MAX] = ".";
    if (env && *env) {
        snprintf(self, sizeof self, "%s", env);
    } else {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 1] = 0;
        char *slash = strrchr(self, '/');
        if (n <= 0 || !slash)
            snprintf(self, sizeof self, ".");
        else
            *slash = 0;
    }
    snprintf(path, len, "%s/gpud", self);
}

/* Reads the cards gpud prints; the count, or -1 (said why). */
static int read_cards(card_t *cards, int cap)
{
    char gpud[PATH_MAX + 8], cmd[PATH_MAX + 64];
    gpud_path(gpud, sizeof gpud);
    if (access(gpud, X_OK) != 0) {
        fprintf(stderr, "ddpipe models: cannot run %s: %s (set DDPIPE_BIN to gpud's directory)\n",
                gpud, strerror(errno));
        return -1;
    }
    snprintf(cmd, sizeof cmd, "'%s' --list-models", gpud);
    FILE *p = popen(cmd, "r");
    if (!p) {
        fprintf(stderr, "ddpipe models: cannot start %s: %s\n", gpud, strerror(errno));
        return -1;
    }
    int n = 0, bad = 0;
    char line[512];
    while (fgets(line, sizeof line, p)) {
        card_t c;
        if (n == cap || sscanf(line, "%31s %lld %lld %d %d %d %d %d", c.name, &c.params,
                               &c.buffers, &c.in_channels, &c.h, &c.w, &c.fixed,
                               &c.classes) != 8) {
            bad = 1;
            continue;
        }
        cards[n++] = c;
    }
    int st = pclose(p);
    if (bad || st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || n == 0) {
        fprintf(stderr, "ddpipe models: %s --list-models failed (%s); is it this build's gpud?\n",
                gpud, bad ? "unexpected output" : "exit status");
        return -1;
    }
    return n;
}

static void print_table(const card_t *cards, int n)
{
    printf("%-12s %12s  %-14s %s\n", "MODEL", "PARAMETERS", "INPUT", "DEFAULT TRANSFORM");
    for (int i = 0; i < n; i++) {
        const card_t *c = &cards[i];
        char input[32];
        snprintf(input, sizeof input, "%dx%dx%d%s", c->in_channels, c->h, c->w,
                 c->fixed ? "" : "+");
        printf("%-12s %12lld  %-14s %s\n", c->name, c->params, input,
               dd_transform_text(c->name));
    }
    printf("INPUT: channels x height x width; +: other sizes work too (adaptive average pooling).\n"
           "Default classes: 1000 (10 for wideresnet); --num-classes or the weights' head "
           "set them.\n");
}

static int print_json(const card_t *cards, int n)
{
    for (int i = 0; i < n; i++) {
        const card_t *c = &cards[i];
        json_t *o = json_pack("{s:s, s:I, s:I, s:i, s:[i,i], s:b, s:i, s:s}", "name", c->name,
                              "params", (json_int_t)c->params, "buffers",
                              (json_int_t)c->buffers, "in_channels", c->in_channels, "input",
                              c->h, c->w, "fixed_size", c->fixed, "num_classes", c->classes,
                              "transform", dd_transform_text(c->name));
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!text) {
            fprintf(stderr, "ddpipe models: out of memory\n");
            return -1;
        }
        printf("%s\n", text);
        free(text);
    }
    return 0;
}

int cmd_models(int argc, char **argv)
{
    models_options_t o;
    int next = 0;
    int rc = options_parse(&models_options_table, argc, argv, &o, &next);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    if (next < argc) {
        fprintf(stderr, "ddpipe models: unexpected argument '%s'\n", argv[next]);
        return 2;
    }
    card_t cards[32];
    int n = read_cards(cards, 32);
    if (n < 0)
        return 1;
    if (o.json)
        return print_json(cards, n) < 0 ? 1 : 0;
    print_table(cards, n);
    return fflush(stdout) == 0 ? 0 : 1;
}
