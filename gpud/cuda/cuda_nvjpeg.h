/* cuda_nvjpeg — nvJPEG's few entry points that --decode gpu uses, loaded
 * at run time (dlopen), so a gpud built with nvJPEG's header starts and
 * runs everything else where the library is missing: only --decode gpu
 * then fails, saying where to get it. The prototypes are the header's
 * own (__typeof__ of its declarations), so a mismatch fails the build. */
#ifndef DDP_CUDA_NVJPEG_H
#define DDP_CUDA_NVJPEG_H

#include <nvjpeg.h>
#include <stddef.h>

typedef struct {
    int version[3];   /* major, minor, patch of the library loaded */
    char path[256];   /* what was loaded (the name dlopen was given) */
    __typeof__(&nvjpegCreateSimple) create_simple;
    __typeof__(&nvjpegDestroy) destroy;
    __typeof__(&nvjpegJpegStateCreate) state_create;
    __typeof__(&nvjpegJpegStateDestroy) state_destroy;
    __typeof__(&nvjpegGetImageInfo) get_image_info;
    __typeof__(&nvjpegDecode) decode;
    __typeof__(&nvjpegDecodeBatchedInitialize) batched_init;
    __typeof__(&nvjpegDecodeBatched) batched;
    /* DDPIPE_NVJPEG_BACKEND=hardware: the GPU's JPEG engines */
    __typeof__(&nvjpegCreateEx) create_ex;
    __typeof__(&nvjpegJpegStreamCreate) stream_create;
    __typeof__(&nvjpegJpegStreamDestroy) stream_destroy;
    __typeof__(&nvjpegJpegStreamParseHeader) parse_header;
    __typeof__(&nvjpegDecodeBatchedSupported) batched_supported;
} cu_nvjpeg_t;

/* The process's nvJPEG: $DDPIPE_NVJPEG_LIB when set, else libnvjpeg.so.13,
 * then libnvjpeg.so, on the library path (loaded once; later calls return
 * the same table or the same failure). NULL with what to do in err. */
const cu_nvjpeg_t *cu_nvjpeg(char *err, size_t errlen);

/* nvJPEG's name for a status ("NVJPEG_STATUS_BAD_JPEG"). */
const char *cu_nvjpeg_status(nvjpegStatus_t s);

#endif
