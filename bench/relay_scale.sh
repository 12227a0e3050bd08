#!/bin/sh
# A multi-node job through relays: NODES simulated nodes (each its own endpoint directory) of RANKS
# publishing processes each (synctop-testpub: the tracer's stand-in on real sockets), one
# `synctop relay` per node, and one `synctop record` taking all the relays, as a viewer would.
# Prints the events and batches that arrived, the losses counted, the events/s reached end to
# end, the recorder's peak RSS, and the clock offsets it measured through the relays (all on this
# machine's clock: each should hold 0 within its uncertainty, which is the figure).
#
#   bench/relay_scale.sh [NODES [RANKS [EVENTS_PER_RANK]]]   (default 8 8 200000)
#
# Needs a Release build (build/synctop, build/tests/synctop-testpub).
set -eu
cd "$(dirname "$0")/.."
nodes=${1:-8}
ranks=${2:-8}
events=${3:-200000}
synctop=$PWD/build/synctop
testpub=$PWD/build/tests/synctop-testpub
for b in "$synctop" "$testpub"; do
    [ -x "$b" ] || { echo "relay_scale: no $b: build it first (./bootstrap)" >&2; exit 1; }
done
tmp=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

eps=""
n=1
while [ "$n" -le "$nodes" ]; do
    mkdir -p "$tmp/node$n"
    chmod 700 "$tmp/node$n"
    XDG_RUNTIME_DIR="$tmp/node$n" "$synctop" relay --listen tcp://127.0.0.1:0 --quiet 2>"$tmp/relay$n.err" &
    pids="$pids $!"
    i=0
    while ! grep -q "listening on" "$tmp/relay$n.err" 2>/dev/null; do
        i=$((i + 1))
        [ "$i" -lt 200 ] || { cat "$tmp/relay$n.err" >&2; exit 1; }
        sleep 0.05
    done
    eps="$eps $(grep -o 'tcp://127.0.0.1:[0-9]*' "$tmp/relay$n.err" | head -n 1)"
    r=1
    while [ "$r" -le "$ranks" ]; do
        XDG_RUNTIME_DIR="$tmp/node$n" "$testpub" --events "$events" --seed $((n * 100 + r)) \
            --wait-subscribers 1 >"$tmp/pub$n-$r.out" 2>&1 &
        pids="$pids $!"
        r=$((r + 1))
    done
    n=$((n + 1))
done
sleep 1 # the relays find their node's processes
start=$(date +%s.%N)
# shellcheck disable=SC2086
/usr/bin/time -f '%M' -o "$tmp/rss" "$synctop" record $eps --producers $((nodes * ranks)) -o "$tmp/job.trace" \
    >"$tmp/record.out" 2>&1
end=$(date +%s.%N)
total=$((nodes * ranks * events))
secs=$(echo "$end - $start" | bc -l)
info=$("$synctop" info "$tmp/job.trace")
got=$(echo "$info" | sed -n 's/^events: //p')
echo "relay_scale: $nodes nodes x $ranks ranks, $events events each, through $nodes relays into one recorder"
echo "  arrived: $got of $total events; $(grep -o 'drops: [^;]*' "$tmp/record.out" | head -n 1)"
printf '  %.2f s from the first subscription to the last batch: %.2f M events/s; recorder peak RSS %d MiB\n' \
    "$secs" "$(echo "$got / $secs / 1000000" | bc -l)" "$(($(cat "$tmp/rss") / 1024))"
grep -o 'clocks against.*' "$tmp/record.out" | sed 's/^/  /' || echo "  no relay answered a clock request"
