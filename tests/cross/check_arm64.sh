#!/bin/sh
# The aarch64 injector, checked from a machine of another architecture (no aarch64 hardware):
#  1. inject/inject.c, inject_proc.c and inject_elf.c compile for aarch64 with the project's warnings
#     as errors, with each aarch64 compiler found (aarch64-linux-gnu-gcc, clang --target), -O0 and
#     -O2; with CUDA's headers, tests/tracer/test_inject.c and inject_target.c too;
#  2. the ELF reader, built for this machine, finds dlopen, dlerror and __errno_location in the
#     cross toolchain's aarch64 C library (elf_arm64.c);
#  3. with qemu-aarch64, a return to address 0 faults with the pc at 0, with pointer
#     authentication on, and glibc's syscall() holds the svc word the injector looks for
#     (ret_to_zero.c). qemu-user cannot run the injector itself: ptrace of another process does
#     not work under it, so attach and detach need a real aarch64 machine.
# A step whose tools are missing is skipped with a message; the script fails only on a failed check.
# Not part of CI. Usage: tests/cross/check_arm64.sh   (AARCH64_CC=... names another compiler;
# CUDA_INCLUDE=... CUDA's include folder, default /usr/local/cuda/include)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
flags="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
       -Wno-unused-parameter -Wvla -Wformat=2 -Werror"

# The aarch64 compilers that work here (each must compile a file that includes <sys/ptrace.h>).
printf '#include <sys/ptrace.h>\n#include <asm/ptrace.h>\nint main(void) { return 0; }\n' >"$out/probe.c"
compilers=""
for cc in "${AARCH64_CC:-}" aarch64-linux-gnu-gcc "clang --target=aarch64-linux-gnu"; do
    [ -n "$cc" ] || continue
    if $cc -c "$out/probe.c" -o "$out/probe.o" 2>/dev/null; then
        compilers="$compilers|$cc"
    fi
done
if [ -z "$compilers" ]; then
    echo "SKIP: no aarch64 compiler (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)"
    exit 0
fi

cuda=${CUDA_INCLUDE:-/usr/local/cuda/include}
IFS='|'
for cc in $compilers; do
    [ -n "$cc" ] || continue
    unset IFS
    extra=""
    case "$cc" in *gcc*) extra="-Wno-format-truncation" ;; esac
    for opt in -O0 -O2; do
        for f in inject/inject.c inject/inject_proc.c inject/inject_elf.c; do
            # shellcheck disable=SC2086
            if $cc $flags $extra $opt -I"$root/include" -I"$root/inject" -c "$root/$f" -o "$out/x.o"; then
                echo "ok: $cc $opt $f"
            else
                echo "FAIL: $cc $opt $f"
                failed=1
            fi
        done
        if [ -f "$cuda/cupti.h" ]; then
            # shellcheck disable=SC2086
            if $cc $flags $extra $opt -I"$root/include" -I"$root/inject" -I"$root/tests/lib" -I"$root/tests" \
                -isystem "$cuda" -DSYNCTOP_HAVE_TRACER=1 -DINJECT_BADLIB='"x"' -DINJECT_TARGET='"x"' \
                -DINJECT_TARGET_STATIC='"x"' -DTRACER_SO='"x"' -DSTANDIN_SO='"x"' -DDRIVER_SO='"x"' \
                -c "$root/tests/tracer/test_inject.c" -o "$out/t.o" &&
                $cc $flags $extra $opt -isystem "$cuda" -c "$root/tests/tracer/inject_target.c" -o "$out/t2.o"; then
                echo "ok: $cc $opt tests/tracer/test_inject.c inject_target.c"
            else
                echo "FAIL: $cc $opt tests/tracer/test_inject.c inject_target.c"
                failed=1
            fi
        fi
    done
    IFS='|'
done
unset IFS
[ -f "$cuda/cupti.h" ] || echo "SKIP: the tests' aarch64 compile (no CUDA headers at $cuda)"

# The ELF reader on the aarch64 C library.
libc=""
for l in /usr/aarch64-linux-gnu/lib/libc.so.6 /usr/aarch64-linux-gnu/lib64/libc.so.6; do
    [ -f "$l" ] && libc=$l && break
done
if [ -z "$libc" ]; then
    echo "SKIP: no aarch64 libc.so.6 to read"
elif ! command -v "${CC:-cc}" >/dev/null; then
    echo "SKIP: no compiler for this machine"
elif "${CC:-cc}" -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$root/include" -I"$root/inject" \
    "$here/elf_arm64.c" "$root/inject/inject_elf.c" "$root/common/error.c" -o "$out/elf_arm64" &&
    "$out/elf_arm64" "$libc"; then
    echo "ok: the ELF reader finds the functions in $libc"
else
    echo "FAIL: the ELF reader on $libc"
    failed=1
fi

# The return to 0, under qemu-user (or natively on aarch64).
gcc_a64=""
for cc in "${AARCH64_CC:-}" aarch64-linux-gnu-gcc; do
    [ -n "$cc" ] && command -v "$cc" >/dev/null && gcc_a64=$cc && break
done
runner=""
if [ "$(uname -m)" = aarch64 ]; then
    runner="env"
elif command -v qemu-aarch64 >/dev/null; then
    runner=qemu-aarch64
elif command -v qemu-aarch64-static >/dev/null; then
    runner=qemu-aarch64-static
fi
if [ -z "$gcc_a64" ] || [ -z "$runner" ]; then
    echo "SKIP: the return-to-0 check (needs aarch64-linux-gnu-gcc and qemu-aarch64: apt-get install qemu-user)"
elif "$gcc_a64" -std=gnu11 -O2 -Wall -Wextra -Werror -mbranch-protection=standard -static \
    "$here/ret_to_zero.c" -o "$out/ret_to_zero" && "$runner" "$out/ret_to_zero"; then
    echo "ok: return to 0 and svc under $runner"
else
    echo "FAIL: return to 0 under $runner"
    failed=1
fi

[ "$failed" = 0 ] && echo "all aarch64 checks passed (compile and emulation only: attach/detach itself needs an aarch64 machine)"
exit "$failed"
