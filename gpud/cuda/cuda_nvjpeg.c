/* cuda_nvjpeg — see cuda_nvjpeg.h. */
#include "gpud/cuda/cuda_nvjpeg.h"

#include "common/errbuf.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DDPIPE_NVJPEG_LIBDIR
#define DDPIPE_NVJPEG_LIBDIR "/opt/nvjpeg-13/lib"
#endif

static cu_nvjpeg_t s_lib;
static char s_err[1024];
static int s_ok;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

#define NVJPEG_HOW                                                                          \
    "install nvJPEG (scripts/install-deps.sh puts it in /opt/nvjpeg-13; or pip install "    \
    "nvidia-nvjpeg) and set DDPIPE_NVJPEG_LIB to its libnvjpeg.so.13, or put its folder on " \
    "LD_LIBRARY_PATH; without it, leave --decode at cpu"

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p && !s_err[0])
        snprintf(s_err, sizeof s_err, "%s has no %s (nvJPEG too old?); " NVJPEG_HOW,
                 s_lib.path, name);
    return p;
}

static void load(void)
{
    const char *env = getenv("DDPIPE_NVJPEG_LIB");
    /* the variable alone when set; else the library path, then where
     * scripts/install-deps.sh puts it (CMake's DDPIPE_NVJPEG_ROOT) */
    const char *names[] = {env && *env ? env : "libnvjpeg.so.13",
                           env && *env ? NULL : DDPIPE_NVJPEG_LIBDIR "/libnvjpeg.so.13",
                           env && *env ? NULL : "libnvjpeg.so"};
    void *lib = NULL;
    for (int i = 0; i < 3 && !lib && names[i]; i++) {
        snprintf(s_lib.path, sizeof s_lib.path, "%s", names[i]);
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
        const char *why = dlerror();
        snprintf(s_err, sizeof s_err, "cannot load nvJPEG (%s: %s); " NVJPEG_HOW, s_lib.path,
                 why ? why : "not found");
        return;
    }
    /* dlsym's void * to a function pointer: POSIX guarantees the conversion */
    *(void **)&s_lib.create_simple = sym(lib, "nvjpegCreateSimple");
    *(void **)&s_lib.destroy = sym(lib, "nvjpegDestroy");
    *(void **)&s_lib.state_create = sym(lib, "nvjpegJpegStateCreate");
    *(void **)&s_lib.state_destroy = sym(lib, "nvjpegJpegStateDestroy");
    *(void **)&s_lib.get_image_info = sym(lib, "nvjpegGetImageInfo");
    *(void **)&s_lib.decode = sym(lib, "nvjpegDecode");
    *(void **)&s_lib.batched_init = sym(lib, "nvjpegDecodeBatchedInitialize");
    *(void **)&s_lib.batched = sym(lib, "nvjpegDecodeBatched");
    *(void **)&s_lib.create_ex = sym(lib, "nvjpegCreateEx");
    *(void **)&s_lib.stream_create = sym(lib, "nvjpegJpegStreamCreate");
    *(void **)&s_lib.stream_destroy = sym(lib, "nvjpegJpegStreamDestroy");
    *(void **)&s_lib.parse_header = sym(lib, "nvjpegJpegStreamParseHeader");
    *(void **)&s_lib.batched_supported = sym(lib, "nvjpegDecodeBatchedSupported");
    __typeof__(&nvjpegGetProperty) prop;
    *(void **)&prop = sym(lib, "nvjpegGetProperty");
    if (s_err[0])
        return;   /* the library stays loaded: dlclose of a CUDA library is not worth it */
    if (prop(MAJOR_VERSION, &s_lib.version[0]) != NVJPEG_STATUS_SUCCESS ||
        prop(MINOR_VERSION, &s_lib.version[1]) != NVJPEG_STATUS_SUCCESS ||
        prop(PATCH_LEVEL, &s_lib.version[2]) != NVJPEG_STATUS_SUCCESS) {
        snprintf(s_err, sizeof s_err, "%s does not tell its version; " NVJPEG_HOW, s_lib.path);
        return;
    }
    s_ok = 1;
}

const cu_nvjpeg_t *cu_nvjpeg(char *err, size_t errlen)
{
    if (pthread_once(&s_once, load) != 0) {
        err_set(err, errlen, "cannot load nvJPEG: pthread_once failed");
        return NULL;
    }
    if (!s_ok) {
        err_set(err, errlen, "%s", s_err);
        return NULL;
    }
    return &s_lib;
}

const char *cu_nvjpeg_status(nvjpegStatus_t s)
{
    static const char *full[] = {
        "NVJPEG_STATUS_SUCCESS", "NVJPEG_STATUS_NOT_INITIALIZED",
        "NVJPEG_STATUS_INVALID_PARAMETER", "NVJPEG_STATUS_BAD_JPEG",
        "NVJPEG_STATUS_JPEG_NOT_SUPPORTED", "NVJPEG_STATUS_ALLOCATOR_FAILURE",
        "NVJPEG_STATUS_EXECUTION_FAILED", "NVJPEG_STATUS_ARCH_MISMATCH",
        "NVJPEG_STATUS_INTERNAL_ERROR", "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
        "NVJPEG_STATUS_INCOMPLETE_BITSTREAM"};
    return (unsigned)s < sizeof full / sizeof *full ? full[s] : "NVJPEG_STATUS_(unknown)";
}
