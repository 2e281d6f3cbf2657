#include "cli/classes.h"

#include "common/classmap.h"
#include "common/dataset.h"
#include "common/errbuf.h"
#include "common/safetensors.h"

#include <stdio.h>
#include <string.h>

#define MAP_FORMS                                                                             \
    "--classes FILE (a 'folder index [label]' line per folder, or the folder names in model " \
    "order, one a line, as ImageNet's LOC_synset_mapping.txt) or --classes numeric (folders " \
    "named by their output index, as ImageNetV2)"

/* The rows of the model's head in the weights (fc, or densenet's
 * classifier); 0 when the file or the tensor is not there. */
static long head_rows(const char *model, const char *weights)
{
    char err[512];
    safetensors_t *st = safetensors_open(weights, err, sizeof err);
    if (!st)
        return 0;   /* gpud says what is wrong with the file */
    const char *head = strcmp(model, "densenet121") == 0 ? "classifier.weight" : "fc.weight";
    const st_tensor_t *t = safetensors_get(st, head);
    long rows = t && t->ndim == 2 && t->shape[0] > 0 ? (long)t->shape[0] : 0;
    safetensors_destroy(&st);
    return rows;
}

/* Every class folder of ds known to the map. */
static int check_folders(const char *cmd, const char *data, const dataset_t *ds,
                         const classmap_t *map)
{
    char err[1024];
    for (uint32_t c = 0; c < dataset_num_classes(ds); c++)
        if (classmap_index(map, dataset_class_name(ds, c), err, sizeof err) < 0) {
            fprintf(stderr, "%s: --classes: class folder '%s' of --data %s: %s\n", cmd,
                    dataset_class_name(ds, c), data, err);
            return -1;
        }
    return 0;
}

int dd_check_classes(const char *cmd, const char *data, const char *model, const char *weights,
                     long num_classes, const char *classes, long *outputs)
{
    *outputs = num_classes ? num_classes : head_rows(model, weights);
    char err[1024];
    dataset_t *ds = dataset_open(data, err, sizeof err);
    if (!ds) {
        fprintf(stderr, "%s: --data %s: %s\n", cmd, data, err);
        return -1;
    }
    uint32_t folders = dataset_num_classes(ds);
    int rc = 0;
    if (classes && !*outputs) {
        fprintf(stderr, "%s: --classes needs the model's output count: %s has no %s head; pass "
                "--num-classes N\n", cmd, weights,
                strcmp(model, "densenet121") == 0 ? "classifier.weight" : "fc.weight");
        rc = -1;
    } else if (classes) {
        classmap_t *map = classmap_load(classes, (uint32_t)*outputs, err, sizeof err);
        if (!map)
            fprintf(stderr, "%s: --classes %s\n", cmd, err);
        rc = map ? check_folders(cmd, data, ds, map) : -1;
        classmap_destroy(&map);
    } else if (*outputs && (uint32_t)*outputs != folders) {
        fprintf(stderr, "%s: the model has %ld outputs but --data %s has %u class%s: pass "
                MAP_FORMS "\n", cmd, *outputs, data, folders, folders == 1 ? "" : "es");
        rc = -1;
    }
    dataset_destroy(&ds);
    return rc;
}
