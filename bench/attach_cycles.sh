#!/bin/sh
# `synctop attach` and `synctop detach` on a running program, over and over: CYCLES times the
# tracer is loaded (the first time) or started again, its events received now and then, and
# stopped, in one long-running stand-in CUDA program (tests/tracer/inject_target.c). Prints the
# time the program's main thread was held at attach and at detach (mean and worst), the longest gap
# the program saw in its own loop, and its resident memory after the first and the last detach;
# fails if the program crashed, hung, changed its result, or kept a thread or descriptor of the
# tracer's after a detach.
#
#   bench/attach_cycles.sh [CYCLES]   (default 1000)
#
# Needs a Release build with the tracer (build/tests/test_inject) and ptrace allowed on one's own
# children (Yama ptrace_scope 0 or 1).
set -eu
cd "$(dirname "$0")/.."
cycles=${1:-1000}
bin=$PWD/build/tests/test_inject
[ -x "$bin" ] || { echo "attach_cycles: no $bin: build it first (./bootstrap)" >&2; exit 1; }
start=$(date +%s)
out=$(SYNCTOP_TEST_CYCLES=$cycles "$bin" inject_detach_stops_the_tracer_and_attach_starts_it_again 2>&1) || {
    echo "$out" >&2
    echo "attach_cycles: FAILED" >&2
    exit 1
}
echo "$out" | grep '^inject:'
echo "attach_cycles: $cycles cycles in $(($(date +%s) - start)) s"
