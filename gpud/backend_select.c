/* backend_select — the implementations this build has (cpu and ref always,
 * cuda when the toolkit was found at configure time), chosen by name. Above
 * the implementations; nothing below calls back here. */
#include "gpud/backend_impl.h"
#ifdef DDPIPE_HAVE_CUDA
#include "gpud/cuda/cuda_backend.h"
#endif

#include "common/errbuf.h"

#include <string.h>
#include <unistd.h>

backend_t *backend_new(const char *name, int threads, char *err, size_t errlen)
{
    if (threads < 0 || threads > 1024) {
        err_set(err, errlen, "backend: threads must be 0 (all cores) .. 1024, got %d", threads);
        return NULL;
    }
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    if (name && strcmp(name, "cpu") == 0)
        return cpu_backend_new(threads, err, errlen);
    if (name && strcmp(name, "ref") == 0)
        return ref_backend_new(threads, err, errlen);
#ifdef DDPIPE_HAVE_CUDA
    if (name && strcmp(name, "cuda") == 0)
        return cuda_backend_new(threads, err, errlen);
#endif
    err_set(err, errlen, "backend '%s' is not available (built: cpu, ref%s)",
            name ? name : "(null)",
            name && strcmp(name, "cuda") == 0 ? "; cuda was not found at build time" : "");
    return NULL;
}
