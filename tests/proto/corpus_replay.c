/* proto_corpus_replay — feeds every file of the committed fuzz corpus (and
 * any files or folders given) through the fuzz target body, built with the
 * ordinary compiler + ASan/UBSan, so every ctest run replays what the
 * fuzzer found without needing clang or libFuzzer. */
#include "common/log.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern unsigned long fuzz_proto_accepted;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "proto_corpus_replay: cannot open %s\n", path);
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len + 4096 > cap) {
            cap = cap ? cap * 2 : 8192;
            uint8_t *p = realloc(buf, cap);
            if (!p) {
                free(buf);
                fclose(f);
                return -1;
            }
            buf = p;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    /* an exact-size copy, so ASan sees reads past the input */
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, buf, len);
    free(buf);
    unsigned long before = fuzz_proto_accepted;
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    /* Seeds are valid messages by construction: they must decode, or the
     * fuzzer starts from nothing useful (and the samples drifted). */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "seed-", 5) == 0 && fuzz_proto_accepted == before) {
        fprintf(stderr, "proto_corpus_replay: seed %s was rejected\n", path);
        return -1;
    }
    return 0;
}

static int replay(const char *path, int *files)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "proto_corpus_replay: %s does not exist\n", path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        (*files)++;
        return replay_file(path);
    }
    struct dirent **names;
    int n = scandir(path, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "proto_corpus_replay: cannot list %s\n", path);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, names[i]->d_name);
            if (replay(sub, files) != 0)
                rc = -1;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: proto_corpus_replay DIR|FILE...\n");
        return 2;
    }
    int files = 0, rc = 0;
    for (int i = 1; i < argc; i++)
        if (replay(argv[i], &files) != 0)
            rc = 1;
    printf("proto_corpus_replay: %d inputs replayed, %lu decoded\n", files, fuzz_proto_accepted);
    if (files == 0) {
        fprintf(stderr, "proto_corpus_replay: no inputs found\n");
        return 1;
    }
    return rc;
}
