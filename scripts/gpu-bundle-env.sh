# Sourced by scripts/gpu-check.sh and scripts/gpu-probe.sh: bundle_env FILE
# unpacks a bundle made by scripts/gpu-bundle.sh at the path it was built at,
# sets BUILD to that tree and puts its libraries, then the machine's NVIDIA
# stack (CUDA's lib64 and pip's nvidia/*/lib, the newest cuDNN 9 first),
# on LD_LIBRARY_PATH. 2 (said on stderr) when the bundle is unusable.
# nccl_loaded BIN: the libnccl BIN resolves and its ncclGetVersion code
# ("23007 /path/libnccl.so.2"), nothing when either is unknown.
# nvjpeg_find: an nvJPEG 13 gpud's --decode gpu can load (DDPIPE_NVJPEG_LIB
# when it names a file; the bundle's; scripts/install-deps.sh's
# /opt/nvjpeg-13; pip's nvidia-nvjpeg; the copy torchvision's wheel
# carries), its path, nothing when there is none.
bundle_env() {
    BUILD=$(tar -tJf "$1" | sed -n 's|^\(.*\)/lib-bundle/*$|/\1|p' | head -n 1)
    [ -n "$BUILD" ] || { echo "$1 has no lib-bundle/ (make it with scripts/gpu-bundle.sh)" >&2; return 2; }
    rm -f "$BUILD/bundle-gpu-only"   # an earlier bundle's mark (gpu-bundle.sh --gpu-only)
    tar -C / -xJf "$1" || { echo "unpacking $1 failed" >&2; return 2; }
    nv=$(find -L /usr/local/cuda/ /opt /usr/lib /usr/local/lib \
            \( -name 'libcudnn.so.9' -o -name 'libnccl.so.2' -o -name 'libcublas.so.1*' \
               -o -name 'libcudart.so.1*' \) 2>/dev/null | xargs -r -n1 dirname | sort -u | tr '\n' ':')
    # several cuDNN 9s (CUDA's, PyTorch's wheel): the newest first, as the
    # build's (the backend's log names the one loaded)
    dnn=$(find -L /usr/local/cuda/ /opt /usr/lib /usr/local/lib -name 'libcudnn.so.9.*' 2>/dev/null |
            awk -F'libcudnn.so.' '{ print $2 "\t" $0 }' | sort -t. -k1,1n -k2,2n -k3,3n |
            tail -n 1 | cut -f2)
    [ -n "$dnn" ] && nv="$(dirname "$dnn"):$nv"
    export LD_LIBRARY_PATH="$BUILD/lib-bundle:${nv}${LD_LIBRARY_PATH:-}"
    return 0
}

nccl_loaded() {
    lib=$(ldd "$1" 2>/dev/null | awk '$1 ~ /^libnccl\.so/ && $3 ~ /^\// { print $3; exit }')
    [ -n "$lib" ] || return 0
    code=$("${PY:-python3}" -c 'import ctypes, sys
v = ctypes.c_int(0)
r = ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v))
print(v.value if r == 0 and v.value > 0 else "")' "$lib" 2>/dev/null)
    [ -n "$code" ] && echo "$code $lib"
    return 0
}

nvjpeg_find() {
    if [ -n "${DDPIPE_NVJPEG_LIB:-}" ] && [ -f "$DDPIPE_NVJPEG_LIB" ]; then
        echo "$DDPIPE_NVJPEG_LIB"
        return 0
    fi
    for f in "${BUILD:-/nonexistent}/lib-bundle/libnvjpeg.so.13" /opt/nvjpeg-13/lib/libnvjpeg.so.13; do
        [ -f "$f" ] && { echo "$f"; return 0; }
    done
    site=$("${PY:-python3}" -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
    for d in $site; do
        f=$(find "$d/nvidia" "$d/torchvision.libs" -maxdepth 3 -name 'libnvjpeg*.so.13*' 2>/dev/null | head -n 1)
        [ -n "$f" ] && { echo "$f"; return 0; }
    done
    return 0
}
