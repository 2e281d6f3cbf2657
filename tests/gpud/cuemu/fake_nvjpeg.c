/* fake_nvjpeg — the nvJPEG entry points gpud's --decode gpu loads
 * (gpud/cuda/cuda_nvjpeg.c), built as a libnvjpeg.so.13 for the kernel
 * emulator, where device memory is host memory: each JPEG is decoded by
 * libjpeg-turbo with the settings common/image uses (accurate IDCT, fancy
 * upsampling), so a decoded image is --decode cpu's bit for bit and a
 * whole job's predictions can be compared with cpu's exactly. The batched
 * call fails as a whole when one file does not decode, as nvJPEG's does,
 * so gpud's one-by-one fallback runs here too. Two output formats, gpud's:
 * interleaved RGB and Y (a gray file's plane; fake_nvjpeg_y_images counts
 * those for the tests). Prototypes are the real header's. What it cannot
 * show: nvJPEG's own pixels, speed, streams. */
#include <nvjpeg.h>
#include <turbojpeg.h>

#include <stdlib.h>
#include <string.h>

struct nvjpegHandle {
    tjhandle tj;
};
struct nvjpegJpegState {
    int batch;
    nvjpegOutputFormat_t fmt;
};

/* images decoded with NVJPEG_OUTPUT_Y (read by the tests through dlsym) */
unsigned long fake_nvjpeg_y_images;
struct nvjpegJpegStream {
    int progressive;   /* what the hardware backend refuses */
};

nvjpegStatus_t nvjpegGetProperty(libraryPropertyType type, int *value)
{
    *value = type == MAJOR_VERSION ? NVJPEG_VER_MAJOR
             : type == MINOR_VERSION ? NVJPEG_VER_MINOR
                                     : NVJPEG_VER_PATCH;
    return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t nvjpegCreateSimple(nvjpegHandle_t *handle)
{
    struct nvjpegHandle *h = calloc(1, sizeof *h);
    if (!h || !(h->tj = tjInitDecompress())) {
        free(h);
        return NVJPEG_STATUS_ALLOCATOR_FAILURE;
    }
    *handle = h;
    return NVJPEG_STATUS_SUCCESS;
}

/* the hardware backend: the emulator has "engines" that decode as the
 * CUDA path does (so a job's pixels stay --decode cpu's), and refuse
 * progressive files as the real ones do */
nvjpegStatus_t nvjpegCreateEx(nvjpegBackend_t backend, nvjpegDevAllocator_t *dev,
                              nvjpegPinnedAllocator_t *pinned, unsigned int flags,
                              nvjpegHandle_t *handle)
{
    if (dev || pinned || flags != NVJPEG_FLAGS_DEFAULT ||
        (backend != NVJPEG_BACKEND_DEFAULT && backend != NVJPEG_BACKEND_HARDWARE))
        return NVJPEG_STATUS_INVALID_PARAMETER;
    return nvjpegCreateSimple(handle);
}

nvjpegStatus_t nvjpegJpegStreamCreate(nvjpegHandle_t handle, nvjpegJpegStream_t *stream)
{
    (void)handle;
    *stream = calloc(1, sizeof **stream);
    return *stream ? NVJPEG_STATUS_SUCCESS : NVJPEG_STATUS_ALLOCATOR_FAILURE;
}

nvjpegStatus_t nvjpegJpegStreamDestroy(nvjpegJpegStream_t stream)
{
    free(stream);
    return NVJPEG_STATUS_SUCCESS;
}

/* a progressive file's frame header: marker SOF2 (FF C2) before the scan */
nvjpegStatus_t nvjpegJpegStreamParseHeader(nvjpegHandle_t handle, const unsigned char *data,
                                           size_t length, nvjpegJpegStream_t stream)
{
    (void)handle;
    if (length < 4 || data[0] != 0xFF || data[1] != 0xD8)
        return NVJPEG_STATUS_BAD_JPEG;
    stream->progressive = 0;
    for (size_t i = 2; i + 1 < length; i++)
        if (data[i] == 0xFF && (data[i + 1] == 0xC2 || data[i + 1] == 0xDA)) {
            stream->progressive = data[i + 1] == 0xC2;
            break;
        }
    return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t nvjpegDecodeBatchedSupported(nvjpegHandle_t handle, nvjpegJpegStream_t stream,
                                            int *is_supported)
{
    (void)handle;
    *is_supported = stream->progressive;   /* 0: supported */
    return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t nvjpegDestroy(nvjpegHandle_t handle)
{
    if (handle)
        tjDestroy(handle->tj);
    free(handle);
    return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t nvjpegJpegStateCreate(nvjpegHandle_t handle, nvjpegJpegState_t *state)
{
    (void)handle;
    *state = calloc(1, sizeof **state);
    return *state ? NVJPEG_STATUS_SUCCESS : NVJPEG_STATUS_ALLOCATOR_FAILURE;
}

nvjpegStatus_t nvjpegJpegStateDestroy(nvjpegJpegState_t state)
{
    free(state);
    return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t nvjpegGetImageInfo(nvjpegHandle_t handle, const unsigned char *data,
                                  size_t length, int *ncomp, nvjpegChromaSubsampling_t *ss,
                                  int *widths, int *heights)
{
    int w, h, sub, cs;
    if (tjDecompressHeader3(handle->tj, data, (unsigned long)length, &w, &h, &sub, &cs) != 0)
        return NVJPEG_STATUS_BAD_JPEG;
    for (int i = 0; i < NVJPEG_MAX_COMPONENT; i++)
        widths[i] = heights[i] = 0;
    if (cs == TJCS_CMYK || cs == TJCS_YCCK) {   /* 4 components: nvJPEG reads them too */
        *ncomp = 4;
        *ss = NVJPEG_CSS_444;
    } else {
        *ncomp = sub == TJSAMP_GRAY ? 1 : 3;
        *ss = sub == TJSAMP_GRAY ? NVJPEG_CSS_GRAY
              : sub == TJSAMP_444 ? NVJPEG_CSS_444
              : sub == TJSAMP_422 ? NVJPEG_CSS_422
              : sub == TJSAMP_420 ? NVJPEG_CSS_420
              : sub == TJSAMP_440 ? NVJPEG_CSS_440
              : sub == TJSAMP_411 ? NVJPEG_CSS_411
                                  : NVJPEG_CSS_UNKNOWN;
    }
    widths[0] = w;
    heights[0] = h;
    return NVJPEG_STATUS_SUCCESS;
}

/* one image, interleaved RGB or Y (what gpud asks for); a warning (a
 * truncated file) is a failure, as nvJPEG reports one */
static nvjpegStatus_t decode_one(nvjpegHandle_t handle, const unsigned char *data, size_t len,
                                 nvjpegOutputFormat_t fmt, nvjpegImage_t *dst)
{
    int w, h, sub, cs;
    if (fmt != NVJPEG_OUTPUT_RGBI && fmt != NVJPEG_OUTPUT_Y)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    int c = fmt == NVJPEG_OUTPUT_Y ? 1 : 3;
    if (tjDecompressHeader3(handle->tj, data, (unsigned long)len, &w, &h, &sub, &cs) != 0)
        return NVJPEG_STATUS_BAD_JPEG;
    if (!dst->channel[0] || dst->pitch[0] < (size_t)w * c)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    if (tjDecompress2(handle->tj, data, (unsigned long)len, dst->channel[0], w,
                      (int)dst->pitch[0], h, c == 1 ? TJPF_GRAY : TJPF_RGB, 0) != 0)
        return NVJPEG_STATUS_BAD_JPEG;
    fake_nvjpeg_y_images += c == 1;
    return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t nvjpegDecode(nvjpegHandle_t handle, nvjpegJpegState_t state,
                            const unsigned char *data, size_t length, nvjpegOutputFormat_t fmt,
                            nvjpegImage_t *dst, cudaStream_t stream)
{
    (void)state;
    (void)stream;   /* the emulator's work is done when it is queued */
    return decode_one(handle, data, length, fmt, dst);
}

nvjpegStatus_t nvjpegDecodeBatchedInitialize(nvjpegHandle_t handle, nvjpegJpegState_t state,
                                             int batch_size, int max_cpu_threads,
                                             nvjpegOutputFormat_t fmt)
{
    (void)handle;
    if (batch_size < 1 || max_cpu_threads < 1 ||
        (fmt != NVJPEG_OUTPUT_RGBI && fmt != NVJPEG_OUTPUT_Y))
        return NVJPEG_STATUS_INVALID_PARAMETER;
    state->batch = batch_size;
    state->fmt = fmt;
    return NVJPEG_STATUS_SUCCESS;
}

nvjpegStatus_t nvjpegDecodeBatched(nvjpegHandle_t handle, nvjpegJpegState_t state,
                                   const unsigned char *const *data, const size_t *lengths,
                                   nvjpegImage_t *dst, cudaStream_t stream)
{
    (void)stream;
    for (int i = 0; i < state->batch; i++) {
        nvjpegStatus_t s = decode_one(handle, data[i], lengths[i], state->fmt, &dst[i]);
        if (s != NVJPEG_STATUS_SUCCESS)
            return s;
    }
    return NVJPEG_STATUS_SUCCESS;
}
