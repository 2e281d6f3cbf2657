/* child_defaults — the defaults `ddpipe eval` and `ddpipe train` derive
 * the same way from their flags before starting the daemons: threads from
 * the cores, the model's input (channels, loaderd's resize/crop) and
 * loaderd's prefetch depth. One place, so an eval and a training run of the
 * same model see the same images. Header-only: both commands and
 * train_options.c (also linked alone into tests/cli test_cli_train_options) include it. */
#ifndef DDP_CLI_CHILD_DEFAULTS_H
#define DDP_CLI_CHILD_DEFAULTS_H
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/cpus.h"
#include "loaderd/options.h"

/* --threads and --loader-threads when not given. Below 8 cores decoding
 * and compute share every core (--threads: the cores split over the
 * workers; --loader-threads: every core). From 8 cores on, one core in 8
 * is the loaders' and the rest the workers': giving both sides every core
 * oversubscribed the machine (ResNet-18 fp32 eval from JPEG on 16 cores,
 * 2 workers: 304 img/s with 8 + 16 threads, 353 with 7 + 7 + 2;
 * bench/RESULTS.md). Decoding a 224-crop takes ~2.4 core-ms an image
 * against 16-50 for ResNet-18's compute, so 1/8 keeps the loaders ahead. */
static inline void dd_threads_for(long cores, long workers, long *threads, long *loader_threads)
{
    if (cores < 1)
        cores = 1;
    long decode = cores >= 8 ? cores / 8 : 0;   /* cores kept for the loaders */
    if (!*threads)
        *threads = (cores - decode) / workers > 0 ? (cores - decode) / workers : 1;
    if (!*loader_threads)
        *loader_threads = decode ? decode : cores;
}

/* The same for the CPUs this process may use (affinity, cgroup quota). */
static inline void dd_default_threads(long workers, long *threads, long *loader_threads)
{
    dd_threads_for(cpus_available(), workers, threads, loader_threads);
}

/* Every architecture gpud implements (gpud/model.c ARCHS; `ddpipe models`
 * prints their cards and it_models checks the two lists agree). */
#define DD_MODELS "resnet18, resnet34, resnet50, densenet121 or wideresnet"
static const char *const dd_models[] = {"resnet18", "resnet34", "resnet50", "densenet121",
                                        "wideresnet", NULL};

/* 0 when MODEL is one of dd_models; else -1 with a one-line error. */
static inline int dd_check_model(const char *cmd, const char *model)
{
    for (const char *const *m = dd_models; *m; m++)
        if (strcmp(model, *m) == 0)
            return 0;
    fprintf(stderr, "%s: --model %s is not known; choose " DD_MODELS "\n", cmd, model);
    return -1;
}

/* The seed WideResNet reads 28x28 grayscale (Fashion-MNIST) as it is; the
 * torchvision models read RGB resized to 256 and centre-cropped to 224. */
static inline bool dd_is_wrn(const char *model) { return strcmp(model, "wideresnet") == 0; }

/* Input channels: --in-channels, else the model's. */
static inline long dd_in_channels(const char *model, long in_channels)
{
    return in_channels ? in_channels : (dd_is_wrn(model) ? 1 : 3);
}

/* loaderd's --channels, --resize and --crop: the flags given, else the
 * model's (no resize or crop for the WideResNet). */
static inline void dd_loader_transform(loader_options_t *l, const char *model, long in_channels,
                                       long resize, const char *crop)
{
    l->channels = dd_in_channels(model, in_channels);
    l->resize = resize ? resize : dd_is_wrn(model) ? 0 : 256;
    l->crop = crop ? crop : dd_is_wrn(model) ? NULL : "224";
}

/* The default transform of MODEL, as `ddpipe models` prints it. */
static inline const char *dd_transform_text(const char *model)
{
    if (dd_is_wrn(model))
        return "ToTensor (1x28x28 grayscale as is, no normalisation)";
    return "Resize(256), CenterCrop(224), ToTensor, Normalize(ImageNet mean, std)";
}

/* loaderd's --prefetch: every rank's window in flight plus one, at most 16. */
static inline long dd_prefetch(long workers, long window)
{
    return workers * window + 1 < 16 ? workers * window + 1 : 16;
}
#endif
