/* classmap — which model output a dataset folder is (`ddpipe eval --classes`).
 *
 * Without a map, class c is the c-th folder in sorted order (torchvision's
 * ImageFolder). A map replaces that position by the model's output index,
 * so a dataset may hold any subset of the model's classes. Three forms:
 *
 *   FILE, "folder index [label]" lines: the second token an integer.
 *       n01440764 0 tench
 *   FILE, a list of folder names in model order (ImageNet's
 *       LOC_synset_mapping.txt): the first token the folder, the rest of the
 *       line its label, the index the entry's position (0-based).
 *       n01440764 tench, Tinca tinca
 *   "numeric": a folder named by digits is that output (ImageNetV2's 0..999).
 *
 * A file is the first form when its first entry's second token is an
 * integer, else the second; every line must then follow the same form.
 * Blank lines and lines starting with '#' are skipped (they take no
 * position). A folder named twice, an index given twice or >= the model's
 * outputs is an error naming FILE:LINE. */
#ifndef DDP_CLASSMAP_H
#define DDP_CLASSMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct classmap classmap_t;

/* SPEC: a file path or "numeric". outputs: the model's output count (every
 * index must be below it). NULL with "FILE:LINE: why" in err. */
classmap_t *classmap_load(const char *spec, uint32_t outputs, char *err, size_t errlen);
void classmap_destroy(classmap_t **map);

/* The output index of FOLDER, or -1 with the reason in err (naming the
 * file, or why the folder is not a number for "numeric"). */
int32_t classmap_index(const classmap_t *map, const char *folder, char *err, size_t errlen);

/* Output INDEX's name for reports: its label when the file gives one, else
 * its folder name, else NULL (no line names it; "numeric" never does). */
const char *classmap_name(const classmap_t *map, uint32_t index);

uint32_t classmap_outputs(const classmap_t *map);

#endif
