/* fuzz_replay — feeds every file of a committed fuzz corpus (and any files
 * or folders given) through a fuzz target body built with the ordinary
 * compiler + ASan/UBSan (proto_corpus_replay, loaderd.fuzz_replay_*), so each ctest run replays what the fuzzers found
 * without clang or libFuzzer. Files named seed-* are valid inputs by
 * construction and must be accepted (else the corpus drifted). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern unsigned long fuzz_accepted;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || st.st_size > (64 << 20)) {
        fprintf(stderr, "fuzz_replay: cannot read %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    size_t len = (size_t)st.st_size;
    uint8_t *buf = malloc(len ? len : 1); /* exact size: ASan sees reads past the input */
    if (!buf || fread(buf, 1, len, f) != len) {
        fprintf(stderr, "fuzz_replay: cannot read %s\n", path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    unsigned long before = fuzz_accepted;
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "seed-", 5) == 0 && fuzz_accepted == before) {
        fprintf(stderr, "fuzz_replay: seed %s was rejected\n", path);
        return -1;
    }
    return 0;
}

static int replay(const char *path, int *files)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "fuzz_replay: %s does not exist\n", path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        (*files)++;
        return replay_file(path);
    }
    struct dirent **names;
    int n = scandir(path, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "fuzz_replay: cannot list %s\n", path);
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
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    int files = 0, rc = 0;
    for (int i = 1; i < argc; i++)
        if (replay(argv[i], &files) != 0)
            rc = 1;
    printf("%s: %d inputs replayed, %lu accepted\n", argv[0], files, fuzz_accepted);
    if (files == 0) {
        fprintf(stderr, "%s: no inputs found\n", argv[0]);
        return 1;
    }
    return rc;
}
