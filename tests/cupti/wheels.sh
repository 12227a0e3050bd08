#!/bin/sh
# The real libcupti of each of NVIDIA's CUDA wheels (nvidia-cuda-cupti-cu11, -cu12 and
# nvidia-cuda-cupti on PyPI), without a GPU: the version it says, the size of each record kind it
# steps over, and whether the tracer takes it (tests/cupti/layouts.c, built as
# synctop_cupti_layouts). Needs the network (pip download) and a build (./bootstrap); not part of
# the test suite. CUPTI 13.2 and later answer
# only where a CUDA driver can be loaded: here they say "version 0" or die in their first call.
#
# usage: tests/cupti/wheels.sh [BUILD_DIR [PACKAGE==VERSION ...]]   (default: build, the list below)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- nvidia-cuda-cupti-cu11==11.8.87 \
    nvidia-cuda-cupti-cu12==12.0.146 nvidia-cuda-cupti-cu12==12.1.105 nvidia-cuda-cupti-cu12==12.2.142 \
    nvidia-cuda-cupti-cu12==12.3.101 nvidia-cuda-cupti-cu12==12.4.127 nvidia-cuda-cupti-cu12==12.5.82 \
    nvidia-cuda-cupti-cu12==12.6.80 nvidia-cuda-cupti-cu12==12.8.90 nvidia-cuda-cupti-cu12==12.9.79 \
    nvidia-cuda-cupti==13.0.85 nvidia-cuda-cupti==13.1.75 nvidia-cuda-cupti==13.1.115 \
    nvidia-cuda-cupti==13.2.86 nvidia-cuda-cupti==13.3.75 nvidia-cuda-cupti==13.4.92 nvidia-cuda-cupti==13.5.25
work=$(mktemp -d "${TMPDIR:-/tmp}/synctop-cupti-wheels.XXXXXX")
trap 'rm -rf "$work"' EXIT
layouts=$build/tests/synctop_cupti_layouts
[ -x "$layouts" ] || { echo "wheels.sh: no $layouts (build first: ./bootstrap)" >&2; exit 2; }
for spec in "$@"; do
    d="$work/$(echo "$spec" | tr '=' '_')"
    mkdir -p "$d"
    if ! python3 -m pip download --no-deps -q -d "$d" "$spec" >"$d/pip.log" 2>&1; then
        echo "$spec: cannot download: $(tail -n 1 "$d/pip.log")"
        continue
    fi
    python3 -m zipfile -e "$d"/*.whl "$d/x" >/dev/null
    lib=$(find "$d/x" -name 'libcupti.so*' -type f | sort | head -n 1)
    if [ -z "$lib" ]; then
        echo "$spec: no libcupti in the wheel"
        continue
    fi
    echo "$spec ($(basename "$lib")):"
    status=0
    timeout 60 "$layouts" "$lib" >"$d/out.txt" 2>&1 || status=$?
    sed 's/^/  /' "$d/out.txt"
    [ "$status" -eq 0 ] || echo "  (ended with status $status)"
done
