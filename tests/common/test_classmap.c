/* common/classmap.c: the three forms of `--classes` (folder index [label]
 * lines, LOC_synset_mapping.txt-style lists, numeric), and the errors,
 * each naming the file and line. Also dataset_apply_classmap on a small
 * ImageFolder: labels become output indices, the classes every output. */
#include "common/classmap.h"
#include "common/dataset.h"
#include "tests/proto/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir[256];

static const char *s_file(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

/* The error of loading TEXT with OUTPUTS outputs must contain WANT. */
static void s_fails(const char *text, uint32_t outputs, const char *want)
{
    char err[512] = "";
    classmap_t *m = classmap_load(s_file("bad.txt", text), outputs, err, sizeof err);
    CHECK_MSG(m == NULL, "loaded: %s", text);
    CHECK_MSG(strstr(err, want) != NULL, "'%s' lacks '%s'", err, want);
    classmap_destroy(&m);
}

static void test_synset_list(void)
{
    char err[512];
    const char *path = s_file("LOC_synset_mapping.txt",
                              "n01440764 tench, Tinca tinca\r\n"
                              "n01443537 goldfish, Carassius auratus\n"
                              "\n# a comment takes no position\n"
                              "n01484850   great white shark  \n"
                              "n01491361\n");
    classmap_t *m = classmap_load(path, 1000, err, sizeof err);
    CHECK_MSG(m != NULL, "%s", err);
    if (!m)
        return;
    CHECK(classmap_index(m, "n01440764", err, sizeof err) == 0);
    CHECK(classmap_index(m, "n01443537", err, sizeof err) == 1);
    CHECK(classmap_index(m, "n01484850", err, sizeof err) == 2);
    CHECK(classmap_index(m, "n01491361", err, sizeof err) == 3);
    CHECK_STR(classmap_name(m, 0), "tench, Tinca tinca");
    CHECK_STR(classmap_name(m, 2), "great white shark");
    CHECK_STR(classmap_name(m, 3), "n01491361");   /* no label: the folder */
    CHECK(classmap_name(m, 4) == NULL);
    CHECK(classmap_outputs(m) == 1000);
    CHECK(classmap_index(m, "n99999999", err, sizeof err) == -1);
    CHECK_MSG(strstr(err, path) && strstr(err, "'n99999999'"), "%s", err);
    classmap_destroy(&m);
    CHECK(m == NULL);
}

static void test_indexed(void)
{
    char err[512];
    classmap_t *m = classmap_load(s_file("idx.txt", "cat 3 a cat\ndog\t7\nbird 0 bird, small\n"),
                                  10, err, sizeof err);
    CHECK_MSG(m != NULL, "%s", err);
    if (!m)
        return;
    CHECK(classmap_index(m, "cat", err, sizeof err) == 3);
    CHECK(classmap_index(m, "dog", err, sizeof err) == 7);
    CHECK(classmap_index(m, "bird", err, sizeof err) == 0);
    CHECK_STR(classmap_name(m, 3), "a cat");
    CHECK_STR(classmap_name(m, 7), "dog");
    CHECK_STR(classmap_name(m, 0), "bird, small");
    CHECK(classmap_name(m, 1) == NULL);
    classmap_destroy(&m);
}

static void test_numeric(void)
{
    char err[512];
    classmap_t *m = classmap_load("numeric", 1000, err, sizeof err);
    CHECK(m != NULL);
    if (!m)
        return;
    CHECK(classmap_index(m, "0", err, sizeof err) == 0);
    CHECK(classmap_index(m, "999", err, sizeof err) == 999);
    CHECK(classmap_index(m, "1000", err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "past the model's 1000 outputs"), "%s", err);
    CHECK(classmap_index(m, "n01440764", err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "--classes numeric: folder 'n01440764' is not a number"), "%s", err);
    CHECK(classmap_index(m, "007", err, sizeof err) == -1);
    CHECK(classmap_index(m, "-1", err, sizeof err) == -1);
    CHECK(classmap_name(m, 5) == NULL);
    classmap_destroy(&m);
}

static void test_errors(void)
{
    char err[512] = "";
    CHECK(classmap_load("/nonexistent/map.txt", 10, err, sizeof err) == NULL);
    CHECK_MSG(strstr(err, "/nonexistent/map.txt: No such file"), "%s", err);
    s_fails("", 10, "bad.txt: no classes in the file");
    s_fails("# only a comment\n\n", 10, "no classes");
    s_fails("a 0\nb 1\nc x\n", 10, "bad.txt:3: want 'folder index [label]'");
    s_fails("a 0\nb\n", 10, "bad.txt:2: want 'folder index [label]'");
    s_fails("a 0\nb 10\n", 10, "bad.txt:2: index 10, but the model has 10 outputs (0..9)");
    s_fails("a\nb\nc\n", 2, "bad.txt:3: index 2, but the model has 2 outputs");
    s_fails("a\nb\nc\n", 2, "the file lists more classes than the model has");
    s_fails("a 1\nb 2\na 3\n", 10, "bad.txt:3: folder 'a' is already mapped on line 1");
    s_fails("a 1\n\nb 1\n", 10, "bad.txt:3: index 1 is already given on line 1");
    s_fails("a x\nb y\nb z\n", 10, "bad.txt:3: folder 'b' is already mapped on line 2");
    s_fails("a 1 \xff\xfe\n", 10, "bad.txt:1: not valid UTF-8");
    /* 11 digits are no index: the list form, the number its label */
    classmap_t *m = classmap_load(s_file("long.txt", "a 99999999999\n"), 10, err, sizeof err);
    CHECK(m && classmap_index(m, "a", err, sizeof err) == 0);
    CHECK(m && strcmp(classmap_name(m, 0), "99999999999") == 0);
    classmap_destroy(&m);
}

static void s_mkdir(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, rel);
    CHECK(mkdir(path, 0755) == 0);
}

/* An ImageFolder of 3 classes mapped onto 8 outputs. */
static void test_dataset(void)
{
    s_mkdir("data");
    const char *cls[] = {"zebra", "ant", "mole"};
    for (int c = 0; c < 3; c++) {
        char rel[64];
        snprintf(rel, sizeof rel, "data/%s", cls[c]);
        s_mkdir(rel);
        for (int i = 0; i <= c; i++) {
            snprintf(rel, sizeof rel, "data/%s/%d.jpg", cls[c], i);
            s_file(rel, "not decoded here");
        }
    }
    char err[512], data[300];
    snprintf(data, sizeof data, "%s/data", s_dir);
    dataset_t *ds = dataset_open(data, err, sizeof err);
    CHECK_MSG(ds != NULL, "%s", err);
    if (!ds)
        return;
    uint32_t np = 9;
    CHECK(dataset_present(ds, &np) == NULL && np == 0);
    /* sorted: ant (2 images), mole (3), zebra (1) */
    classmap_t *m = classmap_load(s_file("map.txt", "zebra 6 Zebra\nant 2\nmole 4 Mole\nfox 5\n"),
                                  8, err, sizeof err);
    CHECK_MSG(m != NULL, "%s", err);
    CHECK(dataset_apply_classmap(ds, m, err, sizeof err) == 0);
    CHECK(dataset_num_classes(ds) == 8);
    CHECK(dataset_size(ds) == 6);
    CHECK(dataset_label(ds, 0) == 2 && dataset_label(ds, 1) == 2);
    CHECK(dataset_label(ds, 2) == 4 && dataset_label(ds, 4) == 4);
    CHECK(dataset_label(ds, 5) == 6);
    CHECK_STR(dataset_class_name(ds, 2), "ant");
    CHECK_STR(dataset_class_name(ds, 4), "Mole");
    CHECK_STR(dataset_class_name(ds, 5), "fox");   /* in the map, not in the dataset */
    CHECK_STR(dataset_class_name(ds, 6), "Zebra");
    CHECK_STR(dataset_class_name(ds, 0), "0");     /* in neither: its index */
    const uint32_t *present = dataset_present(ds, &np);
    CHECK(present && np == 3 && present[0] == 2 && present[1] == 4 && present[2] == 6);
    classmap_destroy(&m);
    dataset_destroy(&ds);

    /* a folder the map does not know: named with the map's file */
    ds = dataset_open(data, err, sizeof err);
    m = classmap_load(s_file("map2.txt", "zebra 6\nant 2\n"), 8, err, sizeof err);
    CHECK(ds && m && dataset_apply_classmap(ds, m, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "class folder 'mole'") && strstr(err, "map2.txt: no line maps folder"),
              "%s", err);
    CHECK(dataset_present(ds, &np) == NULL && dataset_num_classes(ds) == 3);   /* unchanged */
    classmap_destroy(&m);
    dataset_destroy(&ds);
}

int main(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/ddp-classmap-%d", (int)getpid());
    CHECK(mkdir(s_dir, 0700) == 0);
    test_synset_list();
    test_indexed();
    test_numeric();
    test_errors();
    test_dataset();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    CHECK(system(cmd) == 0);
    return check_exit("test_classmap");
}
