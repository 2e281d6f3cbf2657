#include "cli/classes.h"

#include "common/classmap.h"
#include "common/dataset.h"
#include "common/errbuf.h"
#include "common/safetensors.h"

#include <stdbool.h>
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
static int check_folders(const char *cmd, const char *flag, const char *data,
                         const dataset_t *ds, const classmap_t *map)
{
    char err[1024];
    for (uint32_t c = 0; c < dataset_num_classes(ds); c++)
        if (classmap_index(map, dataset_class_name(ds, c), err, sizeof err) < 0) {
            fprintf(stderr, "%s: --classes: class folder '%s' of %s %s: %s\n", cmd,
                    dataset_class_name(ds, c), flag, data, err);
            return -1;
        }
    return 0;
}

/* The checks of one dataset (--data or --val). */
static int check_set(const char *cmd, const char *flag, const char *data, const char *classes,
                     const classmap_t *map, long outputs, bool strict)
{
    char err[1024];
    dataset_t *ds = dataset_open(data, err, sizeof err);
    if (!ds) {
        fprintf(stderr, "%s: %s %s: %s\n", cmd, flag, data, err);
        return -1;
    }
    uint32_t folders = dataset_num_classes(ds);
    int rc = 0;
    if (map) {
        rc = check_folders(cmd, flag, data, ds, map);
    } else if (!classes && strict && outputs && (uint32_t)outputs != folders) {
        fprintf(stderr, "%s: the model has %ld outputs but %s %s has %u class%s: pass "
                MAP_FORMS "\n", cmd, outputs, flag, data, folders, folders == 1 ? "" : "es");
        rc = -1;
    }
    dataset_destroy(&ds);
    return rc;
}

int dd_check_classes(const dd_classes_t *c, long *outputs)
{
    *outputs = c->num_classes ? c->num_classes : c->weights ? head_rows(c->model, c->weights) : 0;
    if (!*outputs && !c->weights)   /* training from scratch: the constructor's head */
        *outputs = strcmp(c->model, "wideresnet") == 0 ? 10 : 1000;
    if (c->classes && !*outputs) {
        fprintf(stderr, "%s: --classes needs the model's output count: %s has no %s head; pass "
                "--num-classes N\n", c->cmd, c->weights,
                strcmp(c->model, "densenet121") == 0 ? "classifier.weight" : "fc.weight");
        return -1;
    }
    char err[1024];
    classmap_t *map = NULL;
    if (c->classes && !(map = classmap_load(c->classes, (uint32_t)*outputs, err, sizeof err))) {
        fprintf(stderr, "%s: --classes %s\n", c->cmd, err);
        return -1;
    }
    int rc = check_set(c->cmd, "--data", c->data, c->classes, map, *outputs, c->strict);
    if (rc == 0 && c->val)
        rc = check_set(c->cmd, "--val", c->val, c->classes, map, *outputs, c->strict);
    classmap_destroy(&map);
    return rc;
}
