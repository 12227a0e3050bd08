#!/bin/sh
# How tests/gpu/run.sh and bench/gpu/overhead.sh reach a GPU machine, which needs neither synctop's
# Debian packages nor a package registry: builds here (Debian with synctop's build dependencies and
# nvcc; no GPU needed) what they run, into one folder that is carried there with the source tree
# (copied, or named in the device runner's `carry`):
#   DIR/build/   synctop, the tracer, the trace checker, the samples, the overhead loops and the
#                stand-in's conformance check, laid out as in a build folder (pass DIR/build to
#                run.sh, overhead.sh and conformance.sh)
#   DIR/lib/     the shared libraries they need beyond glibc, libstdc++ and libgcc (libzmq and its
#                own needs, libzstd, libdw, ncurses, yajl, ...)
#   DIR/probe/   the gpu-probe's sources (../shared/gpu-probe beside this checkout, or
#                SYNCTOP_PROBE_SRC), which travel only this way; tests/gpu/probe.sh builds and runs it
#   DIR/wheel/   the Python wheel (bootstrap --wheel), for tests/gpu/wheel.sh
#   DIR/env.sh   sourced there: puts on LD_LIBRARY_PATH those of DIR/lib that the machine lacks,
#                and only those, so the traced programs (PyTorch) keep their own versions of the rest
#
#   DIR/build/PACKED  what was packed, and from which commit: run.sh takes only such a folder
#
# usage: tests/gpu/pack.sh [DIR]        (default: .gpu, which git ignores)
# then, on the GPU machine, from the source tree:
#   . .gpu/env.sh && tests/gpu/run.sh .gpu/build && bench/gpu/overhead.sh .gpu/build
# (for another DIR: SYNCTOP_GPU=DIR . DIR/env.sh)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/.gpu}
build=$root/build-gpu
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] ||
    { echo "pack.sh: no nvcc here: the samples cannot be built" >&2; exit 2; }
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUDAToolkit_ROOT=/usr/local/cuda \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
[ -x "$build/samples/sample_item" ] || { echo "pack.sh: the samples were not built" >&2; exit 1; }
[ -x "$build/samples/gpu_conformance" ] || { echo "pack.sh: gpu_conformance was not built" >&2; exit 1; }

rm -rf "$dir"
mkdir -p "$dir/build/tracer" "$dir/build/tests" "$dir/build/samples" "$dir/lib"
cp "$build/synctop" "$dir/build/"
cp "$build/tracer/libsynctop-tracer.so" "$dir/build/tracer/"
cp "$build/tracer/libsynctop-cupti-floor.so" "$dir/build/tracer/"
cp "$build/tests/synctop_check_trace" "$dir/build/tests/"
for f in "$build"/samples/sample_* "$build"/samples/overhead_* "$build"/samples/gpu_conformance; do
    [ -f "$f" ] && [ -x "$f" ] && cp "$f" "$dir/build/samples/"
done

probe=${SYNCTOP_PROBE_SRC:-$root/../shared/gpu-probe}
if [ -f "$probe/probe.c" ]; then
    mkdir -p "$dir/probe"
    cp "$probe"/*.c "$probe"/*.py "$probe"/*.md "$dir/probe/" 2>/dev/null
    chmod -R u+w "$dir/probe"
else
    echo "pack.sh: no gpu-probe at $probe (SYNCTOP_PROBE_SRC names it): tests/gpu/probe.sh will refuse" >&2
fi

# The libraries each program loads, but not the C and C++ runtimes, which every machine has and
# which must match its loader. The CUDA driver and runtime come from the GPU machine.
for bin in "$dir"/build/synctop "$dir"/build/tracer/libsynctop-tracer.so "$dir"/build/tests/synctop_check_trace; do
    ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
    case $name in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | libstdc++.so.* | \
        libgcc_s.so.* | libcuda.so.* | libcudart.so.* | libcupti.so.*) ;;
    *) cp -L "$path" "$dir/lib/$name" ;;
    esac
done

# The wheel, for tests/gpu/wheel.sh (needs PyPI here for its build tools).
if ! SYNCTOP_BUILD_DIR="$root/build-gpu-wheel" SYNCTOP_DIST_DIR="$dir/wheel" "$root/bootstrap" --wheel \
    >"$build/wheel.log" 2>&1; then
    echo "pack.sh: no wheel (bootstrap --wheel failed, see $build/wheel.log): all.sh's wheel step will refuse" >&2
fi

{
    echo "packed by tests/gpu/pack.sh on $(uname -n), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "nvcc $( (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | tail -1)"
} >"$dir/build/PACKED"

cat >"$dir/env.sh" <<'EOF'
# Sourced on the GPU machine (see tests/gpu/pack.sh): the libraries of lib/ that this machine lacks
# go on LD_LIBRARY_PATH (through lib/missing/), the others are left to the machine's own versions.
# The folder: $SYNCTOP_GPU, else .gpu in the current directory.
_synctop_gpu=$(cd "${SYNCTOP_GPU:-.gpu}" && pwd)
mkdir -p "$_synctop_gpu/lib/missing"
for _l in "$_synctop_gpu"/lib/*.so*; do
    _n=$(basename "$_l")
    if ! ldconfig -p | grep -q "^[[:space:]]*$_n "; then
        ln -sf "$_l" "$_synctop_gpu/lib/missing/$_n"
        echo "env.sh: $_n from .gpu/lib"
    fi
done
export LD_LIBRARY_PATH="$_synctop_gpu/lib/missing${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset _l _n
EOF
echo "pack.sh: $(du -sh "$dir" | cut -f1) in $dir ($(ls "$dir/lib" | wc -l) libraries)"
