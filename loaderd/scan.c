#include "loaderd/scan.h"

#include "common/classmap.h"
#include "common/log.h"

#include <string.h>

/* --classes: the folders relabelled as the model's outputs. */
static int apply_classes(dataset_t *dataset, const char *classes, long outputs)
{
    char err[1024];
    classmap_t *map = classmap_load(classes, (uint32_t)outputs, err, sizeof err);
    int rc = map ? dataset_apply_classmap(dataset, map, err, sizeof err) : -1;
    uint32_t folders = 0;
    if (rc < 0)
        log_error("--classes %s: %s", classes, err);
    else if (dataset_present(dataset, &folders))
        log_info("--classes %s: %u class folders mapped onto the model's %ld outputs", classes,
                 folders, outputs);
    classmap_destroy(&map);
    return rc;
}

dataset_t *scan_open(const char *spec, long limit, const char *classes, long outputs,
                     uint64_t *samples)
{
    char err[512];
    dataset_t *dataset = dataset_open(spec, err, sizeof err);
    if (!dataset) {
        log_error("cannot open dataset %s: %s", spec, err);
        return NULL;
    }
    if (classes && apply_classes(dataset, classes, outputs) < 0) {
        dataset_destroy(&dataset);
        return NULL;
    }
    *samples = dataset_size(dataset);
    if (limit >= 0 && (uint64_t)limit < *samples)
        *samples = (uint64_t)limit;
    return dataset;
}

int scan_check_val_classes(const dataset_t *train, const char *train_spec, const dataset_t *val,
                           const char *val_spec)
{
    uint32_t n_train = dataset_num_classes(train), n_val = dataset_num_classes(val);
    if (n_train != n_val) {
        log_error("--val %s has %u classes, the train set %s has %u: they must be the same",
                  val_spec, n_val, train_spec, n_train);
        return -1;
    }
    for (uint32_t c = 0; c < n_train; c++) {
        if (strcmp(dataset_class_name(train, c), dataset_class_name(val, c)) != 0) {
            log_error("class %u is '%s' in the train set but '%s' in --val %s: the class lists "
                      "must be the same", c, dataset_class_name(train, c),
                      dataset_class_name(val, c), val_spec);
            return -1;
        }
    }
    return 0;
}
