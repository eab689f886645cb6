#!/usr/bin/env bash
# Catch-up read speed from the oldest vs the newest sealed segment of a large log (issue 11):
# a position far back in the log must not read slower than a recent one.
#
#   benches/oldest_newest.sh BROKER [--log-mib 4608] [--segment-mib 1024] [--read-messages 500000] \
#       [--rounds 2] [--no-restart] [--kafka-fsync] [--out DIR]
#
# BROKER is a rill binary, or peers/kafka/kafka.sh for Apache Kafka (issue 28; --kafka-fsync adds
# log.flush.interval.messages=1). Starts the broker (rill --shards 1; Kafka -Xmx1g; segments of
# --segment-mib, a fresh data dir under --out on this disk), fills one partition with --log-mib of
# 1 KiB messages (rdkafka_performance, acks=1), then empties every cache: rill is restarted (its
# read cache is in the process; it reads with O_DIRECT), and the kernel's page cache, which Kafka
# reads through, is dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`; the script stops if it
# cannot). With --no-restart neither happens: rill goes on serving with its read cache holding
# the newest bytes written (up to rill.read.cache.bytes), Kafka with the page cache as writing
# left it. Then it reads --read-messages from the base offset of the oldest and of the newest
# sealed segment, alternating which goes first, and prints msgs/s of each.
# rdkafka_performance: as in benches/catchup.sh ($RDKAFKA_PERFORMANCE or built there first).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1; shift
log_mib=4608 segment_mib=1024 read_messages=500000 rounds=2 out=bench-results/oldest-newest restart=1
kafka_fsync=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --no-restart) restart=0; shift ;;
        --kafka-fsync) kafka_fsync=1; shift ;;
        --log-mib) log_mib=$2; shift 2 ;;
        --segment-mib) segment_mib=$2; shift 2 ;;
        --read-messages) read_messages=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"; out=$(cd "$out" && pwd)
tool=${RDKAFKA_PERFORMANCE:-$out/../catchup/rdkafka_performance}
[[ -x $tool ]] || { echo "run benches/catchup.sh once first, or set RDKAFKA_PERFORMANCE" >&2; exit 2; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
data=$out/data
echo "log.segment.bytes=$((segment_mib << 20))" >"$out/rill.properties"

kafka=0
[[ $(basename "$bin") == kafka.sh ]] && kafka=1
pid=
if (( kafka )); then
    trap '"$bin" stop --dir "$out/kafka" >/dev/null 2>&1 || true' EXIT
    data=$out/kafka/node1/data
else
    trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null || true' EXIT
fi
start() {
    if (( kafka )); then
        local flag=()
        (( kafka_fsync )) && flag=(--flush-every-message)
        eval "$("$bin" start-single --dir "$out/kafka" --port "$port" \
            --set "log.segment.bytes=$((segment_mib << 20))" "${flag[@]}")"
        return
    fi
    "$bin" --listen "127.0.0.1:$port" --data-dir "$data" --shards 1 --admin-listen off --config "$out/rill.properties" \
        >>"$out/rill.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return
        sleep 0.1
    done
    echo "rill did not start" >&2; exit 1
}
drop_page_cache() {
    sync
    echo 3 > /proc/sys/vm/drop_caches || { echo "cannot drop the page cache (needs root)" >&2; exit 1; }
}

rm -rf "$data" "$out/kafka"
start
"$tool" -P -t big -p 0 -b "127.0.0.1:$port" -s 1024 -c $((log_mib * 1024)) -X acks=1 2>&1 | tail -n1 >&2
if (( restart )); then
    if (( ! kafka )); then
        kill "$pid"; wait "$pid" || true
        start
    fi
    drop_page_cache
fi
mapfile -t bases < <(ls "$data/big-0" | sed -n 's/^0*\([0-9][0-9]*\)\.log$/\1/p' | sort -n)
(( ${#bases[@]} >= 3 )) || { echo "need at least two sealed segments, got ${#bases[@]} segments" >&2; exit 1; }
oldest=${bases[0]} newest=${bases[${#bases[@]}-2]}
echo "segments: ${#bases[@]}; oldest sealed at offset $oldest, newest sealed at $newest" >&2
read_from() {
    "$tool" -C -t big -p 0 -b "127.0.0.1:$port" -o "$1" -c "$read_messages" 2>&1 |
        grep -E 'msgs/s' | tail -n1 | sed -E 's/.*: ([0-9]+) msgs\/s.*/\1/'
}
declare -a old_rates new_rates
for round in $(seq 1 "$rounds"); do
    if (( round % 2 == 1 )); then
        old_rates+=("$(read_from "$oldest")"); new_rates+=("$(read_from "$newest")")
    else
        new_rates+=("$(read_from "$newest")"); old_rates+=("$(read_from "$oldest")")
    fi
    echo "round $round: oldest ${old_rates[-1]} msg/s, newest ${new_rates[-1]} msg/s" >&2
done
if (( kafka )); then "$bin" stop --dir "$out/kafka" >/dev/null; else kill "$pid"; wait "$pid" || true; fi
mean() { printf '%s\n' "$@" | awk '{ s += $1 } END { printf "%d", s / NR }'; }
o=$(mean "${old_rates[@]}") n=$(mean "${new_rates[@]}")
{
    who=$( (( kafka )) && echo "Apache Kafka$( (( kafka_fsync )) && echo ' (log.flush.interval.messages=1)')" || echo "Rill")
    emptied=$( (( kafka )) && echo "page cache dropped" || echo "rill restarted, page cache dropped")
    how=$( (( restart )) && echo "caches emptied before reading ($emptied)" || echo "not restarted (caches as writing left them)")
    echo "$who: log of $log_mib MiB (1 KiB messages, ${#bases[@]} segments of $segment_mib MiB), $how; $read_messages messages read from each start, $rounds round(s), alternating."
    echo
    echo "| start | msgs/s |"
    echo "|---|---:|"
    echo "| oldest sealed segment (offset $oldest) | $o |"
    echo "| newest sealed segment (offset $newest) | $n |"
    awk -v o="$o" -v n="$n" 'BEGIN { printf "| oldest / newest | %.2f |\n", o / n }'
} | tee "$out/oldest-newest.md"
rm -rf "$data" "$out/kafka"
