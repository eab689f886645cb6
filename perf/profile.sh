#!/usr/bin/env bash
# Profile the rill broker under load with Linux perf (issue 6).
#
#   perf/profile.sh --seconds S --out DIR [--mode throughput|latency] [--acks 0|1|all] [--size B]
#                   [--rate MSG_PER_S] [--partitions N] [--shards N] [--broker rill|tansu]
#
# Builds rill and rill-bench (--release; the release profile keeps debug line info), starts rill on
# a free 127.0.0.1 port with a scratch data dir, drives it with `rill-bench throughput` (default) or
# `rill-bench latency`, and while the load runs records the broker's process with
#   perf record -g --call-graph dwarf  (-e cycles, or -e cpu-clock where hardware events are not
#                                       supported, e.g. in VMs like this one)
#   perf stat                          (task-clock, context switches, migrations, page faults,
#                                       cycles/instructions where supported)
# Writes DIR/flamegraph.svg, DIR/perf-stat.txt, DIR/top-costs.txt (leaf functions by samples),
# DIR/stacks.folded, DIR/load.txt, DIR/broker.log. --broker tansu profiles the peer instead
# ($TANSU_BIN or tansu on PATH). RILL_BIN=path profiles an already built rill (no cargo build).
# PERF_CALL_GRAPH=fp uses frame pointers instead of DWARF unwinding.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=10 out="" mode=throughput acks=all size=1024 rate=5000 partitions=1 shards=1 broker=rill
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --mode) mode="$2"; shift 2 ;;
        --acks) acks="$2"; shift 2 ;;
        --size) size="$2"; shift 2 ;;
        --rate) rate="$2"; shift 2 ;;
        --partitions) partitions="$2"; shift 2 ;;
        --shards) shards="$2"; shift 2 ;;
        --broker) broker="$2"; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done
[[ -n "$out" ]] || { echo "usage: perf/profile.sh --seconds S --out DIR [...]" >&2; exit 2; }

if ! command -v perf >/dev/null 2>&1; then
    echo "perf is MISSING: install it (Debian: apt-get install linux-perf) and rerun. Nothing was profiled." >&2
    exit 3
fi
if perf stat -e cycles true 2>&1 | grep -q "not supported"; then
    event=cpu-clock; stat_events=task-clock,context-switches,cpu-migrations,page-faults
    echo "== hardware cycle counter not supported here: sampling the cpu-clock software event" >&2
else
    event=cycles; stat_events=task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions
fi
if [[ "${PERF_CALL_GRAPH:-dwarf}" == fp ]]; then call_graph=(-g); else call_graph=(-g --call-graph dwarf,16384); fi

mkdir -p "$out"; out="$(cd "$out" && pwd)"
target_dir="${CARGO_TARGET_DIR:-target}"
echo "== building (--release)" >&2
cargo build --release -p rill-bench --bin rill-bench >&2
bench="$target_dir/release/rill-bench"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
address="127.0.0.1:$port"
data_dir="$(mktemp -d "${TMPDIR:-/tmp}/rill-profile.XXXXXX")"
if [[ "$broker" == rill ]]; then
    rill_bin="${RILL_BIN:-$target_dir/release/rill}"
    [[ -n "${RILL_BIN:-}" ]] || cargo build --release -p rill-server --bin rill >&2
    "$rill_bin" --listen "$address" --data-dir "$data_dir" --shards "$shards" >"$out/broker.log" 2>&1 &
else
    tansu="${TANSU_BIN:-$(command -v tansu)}"
    "$tansu" broker --listener-url "tcp://$address" --advertised-listener-url "tcp://$address" \
        --storage-engine memory://tansu/ >"$out/broker.log" 2>&1 &
fi
broker_pid=$!
cleanup() { kill -TERM "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; rm -rf "$data_dir"; }
trap cleanup EXIT
for _ in $(seq 1 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$broker_pid" 2>/dev/null || { echo "broker exited at start; see $out/broker.log" >&2; exit 1; }
    sleep 0.1
done
echo "== $broker pid $broker_pid on $address; load: $mode acks=$acks size=$size for $((seconds + 3)) s" >&2

load_seconds=$((seconds + 3))
common=(--brokers "$address" --topic "profile-$mode" --partitions "$partitions" --size "$size" --acks "$acks")
if [[ "$mode" == latency ]]; then
    "$bench" latency "${common[@]}" --rate "$rate" --seconds "$load_seconds" >"$out/load.txt" 2>&1 &
else
    "$bench" throughput "${common[@]}" --seconds "$load_seconds" --broker-pid "$broker_pid" --skip-consume >"$out/load.txt" 2>&1 &
fi
load_pid=$!
sleep 2   # past topic creation and connection set-up
perf stat -e "$stat_events" -p "$broker_pid" -o "$out/perf-stat.txt" -- sleep "$seconds" &
stat_pid=$!
perf record -e "$event" -F 499 "${call_graph[@]}" -p "$broker_pid" -o "$out/perf.data" -- sleep "$seconds" 2>"$out/perf-record.log"
wait "$stat_pid" || true
wait "$load_pid" || echo "!! load generator failed; see $out/load.txt" >&2
echo "== perf script → flame graph" >&2
perf script -i "$out/perf.data" >"$out/perf.script" 2>/dev/null
"$bench" flamegraph --perf-script "$out/perf.script" --out "$out/flamegraph.svg" \
    --folded "$out/stacks.folded" --title "$broker: $mode acks=$acks ${size} B ($event)" | tee "$out/top-costs.txt"
rm -f "$out/perf.script"
echo "== wrote $out/flamegraph.svg, $out/perf-stat.txt, $out/top-costs.txt; load summary:" >&2
tail -n 4 "$out/load.txt" >&2
