#!/bin/sh
# Summary-only against raw subscriptions for a large job: RANKS simulated ranks (synctop-testpub
# processes playing --producers each, every one a distinct producer on the wire) behind one
# `synctop relay`, and one `synctop report --ranks` live on the relay for SECONDS, first with
# --summary (the relay's once-a-second summaries only), then taking every raw batch. Prints per
# mode the bytes per second per rank that went down the relay's socket (summaries: topic and body
# frames, 9 + 184 bytes each; raw: the batches' bytes as the relay counts them, plus their 9-byte
# topic frames) and the subscriber's peak RSS. Then the viewer in summary mode (`synctop attach
# --summary`, in a tmux pane at 200x60, when tmux is installed) for SECONDS: its peak RSS and the
# producers its header counts. Last, a tree: the same relay under a top relay, the summary-only
# subscriber on the top one; the bytes per second per rank that went down the node relay's
# socket to the top relay (its summaries and any batches) and the summaries each relay published.
#
#   bench/summary_scale.sh [RANKS [SECONDS [EVENTS_PER_S_PER_RANK]]]   (default 1024 10 200)
#
# Needs a Release build (build/synctop, build/tests/synctop-testpub).
set -eu
cd "$(dirname "$0")/.."
ranks=${1:-1024}
secs=${2:-10}
rate=${3:-200}
per_proc=128
[ "$ranks" -ge "$per_proc" ] || per_proc=$ranks
procs=$(((ranks + per_proc - 1) / per_proc))
synctop=$PWD/build/synctop
testpub=$PWD/build/tests/synctop-testpub
for b in "$synctop" "$testpub"; do
    [ -x "$b" ] || { echo "summary_scale: no $b: build it first (./bootstrap)" >&2; exit 1; }
done
tmp=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# relay_start DIR ERRFILE [UPSTREAM...]: a relay that finds the processes of DIR (and UPSTREAMs);
# sets started (its pid) and started_ep (its endpoint) once it listens
relay_start() {
    rdir=$1 rerr=$2
    shift 2
    XDG_RUNTIME_DIR=$rdir "$synctop" relay --listen tcp://127.0.0.1:0 --quiet "$@" 2>"$rerr" &
    started=$!
    pids="$pids $started"
    i=0
    while ! grep -q "listening on" "$rerr" 2>/dev/null; do
        i=$((i + 1))
        [ "$i" -lt 200 ] || { cat "$rerr" >&2; exit 1; }
        sleep 0.05
    done
    started_ep=$(grep -o 'tcp://127.0.0.1:[0-9]*' "$rerr" | head -n 1)
}

# run MODE: a fresh relay and fresh producers, one subscriber for $secs seconds
run() {
    mode=$1
    dir=$tmp/$mode
    mkdir -p "$dir"
    chmod 700 "$dir"
    relay_start "$dir" "$dir/relay.err"
    relay=$started
    ep=$started_ep
    p=0
    left=$ranks
    pubs=""
    while [ "$p" -lt "$procs" ]; do
        n=$per_proc
        [ "$left" -ge "$n" ] || n=$left
        # enough events for the whole run at the rate, in batches of about a quarter second
        XDG_RUNTIME_DIR=$dir "$testpub" --producers "$n" --seed $((p * per_proc * 7 + 1)) --rank $((p * per_proc)) \
            --host "node-$p" --events $((rate * (secs + 15))) --batch $(((rate + 3) / 4)) --rate $((rate * n)) \
            --wait-subscribers 1 --linger-ms 0 >"$dir/pub$p.out" 2>&1 &
        pubs="$pubs $!"
        left=$((left - n))
        p=$((p + 1))
    done
    pids="$pids $pubs"
    sleep 2 # the relay finds the processes (it looks once a second)
    if [ "$mode" = tree ]; then
        mkdir -p "$dir/top"
        chmod 700 "$dir/top"
        relay_start "$dir/top" "$dir/top.err" "$ep"
        top=$started
        top_ep=$started_ep
        /usr/bin/time -f '%M' -o "$dir/rss" "$synctop" report --ranks --summary --for "$secs" --format json "$top_ep" \
            >"$dir/report.json" 2>"$dir/report.err"
        kill -INT "$top"
        wait "$top" || true
    elif [ "$mode" = summary ]; then
        /usr/bin/time -f '%M' -o "$dir/rss" "$synctop" report --ranks --summary --for "$secs" --format json "$ep" \
            >"$dir/report.json" 2>"$dir/report.err"
    elif [ "$mode" = viewer ]; then
        sock=summary-scale-$$
        tmux -L "$sock" -f /dev/null new-session -d -x 200 -y 60 \
            "env TERM=screen-256color LANG=C.UTF-8 /usr/bin/time -f '%M' -o '$dir/rss' '$synctop' attach --summary '$ep' 2>'$dir/viewer.err'"
        sleep "$secs"
        tmux -L "$sock" capture-pane -p >"$dir/screen.txt" 2>/dev/null || true
        tmux -L "$sock" send-keys q 2>/dev/null || true
        i=0
        while [ ! -s "$dir/rss" ] && [ "$i" -lt 100 ]; do
            sleep 0.1
            i=$((i + 1))
        done
        tmux -L "$sock" kill-server 2>/dev/null || true
    else
        /usr/bin/time -f '%M' -o "$dir/rss" timeout -s INT "$secs" "$synctop" report --ranks --format json "$ep" \
            >"$dir/report.json" 2>"$dir/report.err" || true
    fi
    kill -INT "$relay"
    wait "$relay" || true
    # shellcheck disable=SC2086
    kill $pubs 2>/dev/null || true
    said=$(tail -n 1 "$dir/relay.err")
    if [ "$mode" = viewer ]; then
        shown=$(grep -o '[0-9]* producers' "$dir/screen.txt" | head -n 1)
        printf '  %-8s the viewer (attach --summary, 200x60) for %s s: its header says %s; its peak RSS %d MiB\n' \
            "$mode" "$secs" "${shown:-nothing (see $dir/viewer.err)}" "$(($(tail -n 1 "$dir/rss" 2>/dev/null || echo 0) / 1024))"
        return
    fi
    if [ "$mode" = tree ]; then
        n=$(echo "$said" | sed -n 's/.* \([0-9]*\) summaries published.*/\1/p')
        batches=$(echo "$said" | sed -n 's/^synctop relay: \([0-9]*\) batches.*/\1/p')
        mb=$(echo "$said" | sed -n 's/.* batches (\([0-9.]*\) MB).*/\1/p')
        bytes=$(echo "$n * 193 + $mb * 1000000 + $batches * 9" | bc -l)
        topn=$(tail -n 1 "$dir/top.err" | sed -n 's/.* \([0-9]*\) summaries published.*/\1/p')
        printf '  %-8s %10.1f bytes/s per rank from the node relay to the top one (%s summaries, %s batches in %s s); the top relay published %s summaries; subscriber peak RSS %d MiB\n' \
            "$mode" "$(echo "$bytes / $secs / $ranks" | bc -l)" "$n" "$batches" "$secs" "$topn" "$(($(tail -n 1 "$dir/rss") / 1024))"
        return
    fi
    if [ "$mode" = summary ]; then
        n=$(echo "$said" | sed -n 's/.* \([0-9]*\) summaries published.*/\1/p')
        bytes=$((n * 193))
        what="$n summaries"
    else
        batches=$(echo "$said" | sed -n 's/^synctop relay: \([0-9]*\) batches.*/\1/p')
        mb=$(echo "$said" | sed -n 's/.* batches (\([0-9.]*\) MB).*/\1/p')
        bytes=$(echo "$mb * 1000000 + $batches * 9" | bc -l)
        what="$batches batches, $(grep -o 'recorded [0-9]* events' "$dir/report.err" | head -n 1 | cut -d' ' -f2) events"
    fi
    printf '  %-8s %10.1f bytes/s per rank (%s in %s s); subscriber peak RSS %d MiB\n' "$mode" \
        "$(echo "$bytes / $secs / $ranks" | bc -l)" "$what" "$secs" "$(($(tail -n 1 "$dir/rss") / 1024))"
}

echo "summary_scale: $ranks ranks ($procs processes) at $rate events/s each, one relay, one subscriber for $secs s"
run summary
run raw
if command -v tmux >/dev/null 2>&1; then
    run viewer
else
    echo "  (tmux is not installed: the viewer is not measured)"
fi
run tree
