#!/bin/sh
# On a machine with a GPU: the stand-in libcupti's assumptions (tests/tracer/standin/standin.h)
# measured against the real CUPTI by gpu_conformance (tests/gpu/conformance.cu, built with the
# samples and carried by tests/gpu/pack.sh): flush semantics (a running kernel's record held back
# by cuptiActivityFlushAll(0), handed out with times 0 by a forced flush; a finished one's not
# there before a flush, then handed over on the calling thread), record sizes and the fields the
# converter reads, an EXTERNAL_CORRELATION record among the others, the RUNTIME twin of a call
# seen by callback, a second subscriber refused, and the order at exit (an exit handler
# registered after CUPTI's first use still flushes). Each check says what it saw, a differing one
# what the stand-in assumes and what CUPTI did; it fails naming the first that differed (all the
# others that can still run are run: a GPU session is rare). "seen" lines are facts the stand-in
# plays both ways.
#
# usage: tests/gpu/conformance.sh PACK_BUILD_DIR
# Exit status: 0 every assumption held, 1 one differed, 2 it could not run, 77 no GPU here.
set -u
build=${1:?usage: tests/gpu/conformance.sh PACK_BUILD_DIR}
bin=$build/samples/gpu_conformance
nvidia-smi -L >/dev/null 2>&1 || { echo "conformance.sh: no GPU here (nvidia-smi -L failed)" >&2; exit 77; }
[ -x "$bin" ] || { echo "conformance.sh: no $bin (tests/gpu/pack.sh builds it where nvcc is)" >&2; exit 2; }
# The toolkit's libcupti, as the probe uses, unless the loader finds one already.
cuda=${CUDA_HOME:-/usr/local/cuda}
for d in "$cuda/extras/CUPTI/lib64" "$cuda/lib64" "$cuda/targets/x86_64-linux/lib"; do
    [ -e "$d/libcupti.so.13" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout "${CONFORMANCE_TIMEOUT:-120}" "$bin"
rc=$?
case $rc in
0) echo "conformance.sh: the stand-in's assumptions hold on this machine" ;;
1) echo "conformance.sh: an assumption of the stand-in differs from this CUPTI (above): model it in tests/tracer/standin/standin.c" ;;
124) echo "conformance.sh: still running after ${CONFORMANCE_TIMEOUT:-120} s" >&2; rc=2 ;;
*) echo "conformance.sh: gpu_conformance could not run (exit status $rc)" >&2; rc=2 ;;
esac
exit "$rc"
