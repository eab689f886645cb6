#!/usr/bin/env bash
# Catch-up reads measured with librdkafka's own load tool, rdkafka_performance (issue 11):
# produce N messages with acks=all, then read them all back from the beginning with librdkafka's
# defaults (1 MiB per-partition fetches), one partition, on each broker given, in one run.
#
#   benches/catchup.sh [--messages N] [--size BYTES] [--rounds R] [--shards S] [--partitions P] \
#       [--config FILE] [--out DIR] NAME=RILL_BINARY ... [tansu=TANSU_BINARY] \
#       [kafka=peers/kafka/kafka.sh] [kafka-fsync=peers/kafka/kafka.sh]
#
# A NAME starting with "tansu" runs that binary as tansu with memory:// storage; a NAME starting
# with "kafka" runs Apache Kafka through that peer script (`start-single`; a NAME containing
# "fsync" adds --flush-every-message, log.flush.interval.messages=1); any other NAME
# runs a rill binary (--shards S, a fresh data dir under --out on this disk, --config FILE if
# given, e.g. rill.read.cache.bytes). Every round runs
# every broker, alternating the order, each on a freshly started process on 127.0.0.1. Per phase
# it prints msgs/s (rdkafka_performance's own figure), the broker's CPU time (utime+stime from
# /proc) per message and its page faults (minor + major, from /proc) per message. Output: a markdown table on stdout and in DIR/catchup.md.
#
# rdkafka_performance is built from the librdkafka 2.12.1 sources that the rdkafka crate vendors
# (the same client as rill-bench), against the static library of a release build of rill-bench
# (`cargo build --release -p rill-bench`), unless $RDKAFKA_PERFORMANCE names a binary.
set -euo pipefail
cd "$(dirname "$0")/.."

messages=300000 size=1024 rounds=2 shards=1 partitions=1 out=bench-results/catchup config=
brokers=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --messages) messages=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --shards) shards=$2; shift 2 ;;
        --partitions) partitions=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --config) config=$(realpath "$2"); shift 2 ;;
        *=*) brokers+=("$1"); shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ ${#brokers[@]} -gt 0 ]] || { echo "give at least one NAME=BINARY" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

perf_tool() {
    if [[ -n "${RDKAFKA_PERFORMANCE:-}" ]]; then echo "$RDKAFKA_PERFORMANCE"; return; fi
    local tool="$out/rdkafka_performance"
    if [[ ! -x "$tool" ]]; then
        local lib zstd src
        lib=$(ls -t target/release/build/rdkafka-sys-*/out/src/librdkafka.a | head -n1)
        zstd=$(ls -t target/release/build/zstd-sys-*/out/libzstd.a | head -n1)
        src=$(dirname "$(dirname "$lib")")
        gcc -O2 -o "$tool" "$src/examples/rdkafka_performance.c" -I"$src/src" "$lib" "$zstd" \
            -lssl -lcrypto -lm -lz -ldl -lpthread -lrt >&2
    fi
    echo "$tool"
}
tool=$(perf_tool)
# A command substitution hides perf_tool's failures from `set -e`: without this check a missing
# release build of rill-bench gave a table of zeros and exit 0.
[[ -x $tool ]] || { echo "no rdkafka_performance at $tool: run cargo build --release -p rill-bench first, or set RDKAFKA_PERFORMANCE" >&2; exit 2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
page_faults() { awk '{print $10 + $12}' "/proc/$1/stat"; }
ticks_per_s=$(getconf CLK_TCK)

start_broker() { # name binary port -> pid
    local name=$1 bin=$2 port=$3
    if [[ $name == tansu* ]]; then
        "$bin" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url \
            "tcp://127.0.0.1:$port" --storage-engine memory://tansu/ >"$out/$name.log" 2>&1 &
    elif [[ $name == kafka* ]]; then
        local flags=(--dir "$out/$name-kafka" --port "$port" --set "num.partitions=$partitions")
        [[ $name == *fsync* ]] && flags+=(--flush-every-message)
        local started
        started=$("$bin" start-single "${flags[@]}" 2>"$out/$name.log") || {
            echo "$name did not start; see $out/$name.log" >&2; return 1; }
        eval "$started"
        echo "$KAFKA_PIDS"
        return
    else
        rm -rf "$out/$name-data"
        # No admin listener: its fixed default port would still be held by the broker stopped
        # just before.
        local extra=()
        [[ -n $config ]] && extra=(--config "$config")
        "$bin" --listen "127.0.0.1:$port" --data-dir "$out/$name-data" --shards "$shards" --admin-listen off \
            --default-partitions "$partitions" "${extra[@]}" >"$out/$name.log" 2>&1 &
    fi
    local pid=$!
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$pid"; return; fi
        sleep 0.1
    done
    echo "$name did not start; see $out/$name.log" >&2
    kill "$pid"; return 1
}

# Kafka's JVM is not this shell's child (kafka.sh starts it): wait for its pid to go.
stop_broker() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    echo "broker $1 did not stop in 30 s" >&2
}

# One phase: run rdkafka_performance, print "msgs/s cpu_us_per_msg page_faults_per_msg".
phase() { # pid args...
    local pid=$1; shift
    local before after faults_before faults_after line rate
    before=$(cpu_ticks "$pid") faults_before=$(page_faults "$pid")
    line=$("$tool" "$@" 2>&1 | grep -E 'msgs/s' | tail -n1)
    after=$(cpu_ticks "$pid") faults_after=$(page_faults "$pid")
    rate=$(sed -E 's/.*: ([0-9]+) msgs\/s.*/\1/' <<<"$line")
    awk -v r="$rate" -v t=$((after - before)) -v hz="$ticks_per_s" -v n="$messages" \
        -v f=$((faults_after - faults_before)) \
        'BEGIN { printf "%d %.2f %.3f\n", r, 1e6 * t / hz / n, f / n }'
}

declare -A results
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null || true' EXIT
for round in $(seq 1 "$rounds"); do
    order=("${brokers[@]}")
    if (( round % 2 == 0 )); then
        order=(); for (( i=${#brokers[@]}-1; i>=0; i-- )); do order+=("${brokers[$i]}"); done
    fi
    for entry in "${order[@]}"; do
        name=${entry%%=*} bin=${entry#*=}
        port=$(free_port)
        pid=$(start_broker "$name" "$bin" "$port")
        topic="catchup-r$round"
        produce=$(phase "$pid" -P -t "$topic" -p 0 -b "127.0.0.1:$port" -s "$size" -c "$messages" -X acks=all)
        consume=$(phase "$pid" -C -t "$topic" -p 0 -b "127.0.0.1:$port" -o beginning -c "$messages")
        stop_broker "$pid"
        echo "round $round $name: produce $produce, consume $consume (msgs/s, broker CPU µs/msg, page faults/msg)" >&2
        results[$name]+="$produce $consume;"
    done
done

{
    echo "$messages messages of $size B, $partitions partition(s), acks=all, then consumed from the beginning with rdkafka_performance defaults; $rounds round(s), alternating; rill --shards $shards${config:+ --config $config ($(tr '\n' ' ' <"$config"))}."
    echo
    echo "| broker | produce msg/s | consume msg/s | broker CPU µs/msg produce | consume | produce + consume | page faults/msg produce | consume |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for entry in "${brokers[@]}"; do
        name=${entry%%=*}
        tr ';' '\n' <<<"${results[$name]}" | awk -v name="$name" 'NF == 6 {
            pr += $1; pc += $2; pf += $3; cr += $4; cc += $5; cf += $6; n++ }
            END { printf "| %s | %d | %d | %.2f | %.2f | %.2f | %.3f | %.3f |\n",
                name, pr/n, cr/n, pc/n, cc/n, (pc+cc)/n, pf/n, cf/n }'
    done
} | tee "$out/catchup.md"
