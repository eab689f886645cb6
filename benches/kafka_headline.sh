#!/usr/bin/env bash
# The headline comparison (issue 28): Rill vs Apache Kafka (defaults, and log.flush.interval.messages=1)
# vs tansu (when TANSU_BIN is set), same run, alternating order, each broker fresh, on 127.0.0.1.
#
#   benches/kafka_headline.sh [--out DIR] [--rounds N] [--seconds S] [--rate R]
#
# Per broker and round: start-up time (launch to ready; Kafka's includes kafka-storage format) and
# idle RSS; Kafka's own load tools against it: ProducerPerformance (RECORDS x 1 KiB, acks=all,
# broker CPU over it from /proc), ConsumerPerformance (catch-up read of the same records),
# EndToEndLatency (5,000 x 1 KiB, acks=all, one at a time: closed loop); RSS after creating 1,000
# partitions. USE_RILL_BENCH=1 adds rill-bench throughput and the open-loop latency run. Machine
# limits from `rill-bench machine` when it is built. Raw outputs in DIR/<round>-<broker>-*.txt; run it under
# /work/bin/quiet. Needs target/release/{rill,rill-bench} (cargo build --release) and Maven/Java
# for peers/kafka.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
out=bench-results/headline
rounds=1
seconds=8
rate=1000
records=${RECORDS:-300000}
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
BENCH=${RILL_BENCH:-$ROOT/target/release/rill-bench}
RILL=${RILL_BIN:-$ROOT/target/release/rill}
KAFKA="$ROOT/peers/kafka/kafka.sh"
"$KAFKA" fetch >/dev/null
uptime | tee "$out/uptime-start.txt"
# The machine's limits: sequential O_DIRECT write and durable 4 KiB appends (the floor under an
# acks=all ack), as rill-bench machine measures them.
{
    dd if=/dev/zero of="$out/dd.tmp" bs=1M count=256 oflag=direct conv=fdatasync 2>&1 | tail -1
    dd if=/dev/zero of="$out/dd.tmp" bs=4k count=2000 oflag=direct,dsync 2>&1 | tail -1
    rm -f "$out/dd.tmp"
    [ -x "$BENCH" ] && "$BENCH" machine --dir "$out" --dd-mib 256 2>&1 | tail -3
    nproc; free -g | head -2
} > "$out/machine.txt" 2>&1 || true

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# utime + stime of a process, in clock ticks (100 per second here).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

pid=""; dir=""; bootstrap=""
start_broker() { # NAME
    local name=$1 port t0
    port=$(free_port)
    dir="$out/data-$name"
    rm -rf "$dir"
    t0=$(date +%s.%N)
    case "$name" in
        rill)
            mkdir -p "$dir"
            "$RILL" --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$(free_port)" \
                --data-dir "$dir" --shards 1 > "$out/$name.log" 2>&1 &
            pid=$!
            until grep -q "all shards listening" "$out/$name.log"; do sleep 0.01; done ;;
        kafka|kafka-fsync)
            local flag=()
            [ "$name" = kafka-fsync ] && flag=(--flush-every-message)
            eval "$("$KAFKA" start-single --dir "$dir" --port "$port" "${flag[@]}")"
            pid=$KAFKA_PIDS ;;
        tansu)
            "$TANSU_BIN" broker --listener-url "tcp://127.0.0.1:$port" \
                --advertised-listener-url "tcp://127.0.0.1:$port" \
                --storage-engine memory://tansu/ > "$out/$name.log" 2>&1 &
            pid=$!
            until (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do sleep 0.01; done ;;
    esac
    bootstrap="127.0.0.1:$port"
    echo "start_seconds=$(echo "$(date +%s.%N) - $t0" | bc)"
}
stop_broker() { # NAME
    case "$1" in
        kafka|kafka-fsync) "$KAFKA" stop --dir "$dir" >/dev/null ;;
        *) kill -TERM "$pid"; wait "$pid" 2>/dev/null || true ;;
    esac
    rm -rf "$dir"
}

read -r -a brokers <<< "${BROKERS:-rill kafka kafka-fsync}"
[ -n "${TANSU_BIN:-}" ] && brokers+=(tansu)
for ((round = 0; round < rounds; round++)); do
    order=("${brokers[@]}")
    if [ $((round % 2)) = 1 ]; then
        order=(); for ((i = ${#brokers[@]} - 1; i >= 0; i--)); do order+=("${brokers[$i]}"); done
    fi
    for name in "${order[@]}"; do
        f="$out/$round-$name"
        echo "== round $round: $name" >&2
        start_broker "$name" > "$f-start.txt"
        sleep 2
        echo "idle_rss_kib=$(rss_kib "$pid")" >> "$f-start.txt"
        if [ "${USE_RILL_BENCH:-0}" = 1 ]; then
            "$BENCH" throughput --brokers "$bootstrap" --topic tp --seconds "$seconds" --size 1024 \
                --acks all --broker-pid "$pid" > "$f-throughput.txt" 2>&1 || echo FAILED >> "$f-throughput.txt"
            "$BENCH" latency --brokers "$bootstrap" --topic lat --rate "$rate" --seconds "$seconds" \
                --size 1024 --acks all > "$f-latency.txt" 2>&1 || echo FAILED >> "$f-latency.txt"
        fi
        # Kafka's own load tools, the figures people quote: produce (acks=all, 1 KiB) with the
        # broker's CPU over it, catch-up consume of what was produced, end-to-end latency.
        cpu0=$(cpu_ticks "$pid")
        "$KAFKA" tool org.apache.kafka.tools.ProducerPerformance --topic pp --num-records "$records" \
            --record-size 1024 --throughput -1 \
            --producer-props "bootstrap.servers=$bootstrap" acks=all linger.ms=5 batch.size=1000000 \
            > "$f-producer-performance.txt" 2>&1 || echo FAILED >> "$f-producer-performance.txt"
        echo "broker_cpu_ticks_produce=$(( $(cpu_ticks "$pid") - cpu0 ))" >> "$f-start.txt"
        cpu0=$(cpu_ticks "$pid")
        "$KAFKA" tool org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$bootstrap" \
            --topic pp --messages "$records" --timeout 30000 \
            > "$f-consumer-performance.txt" 2>&1 || echo FAILED >> "$f-consumer-performance.txt"
        echo "broker_cpu_ticks_consume=$(( $(cpu_ticks "$pid") - cpu0 ))" >> "$f-start.txt"
        "$KAFKA" tool org.apache.kafka.tools.EndToEndLatency "$bootstrap" e2e 5000 all 1024 \
            > "$f-end-to-end-latency.txt" 2>&1 || echo FAILED >> "$f-end-to-end-latency.txt"
        "$KAFKA" tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create \
            --topic p1000 --partitions 1000 --replication-factor 1 > "$f-p1000.txt" 2>&1 || true
        sleep 3
        echo "rss_kib_1000_partitions=$(rss_kib "$pid")" >> "$f-start.txt"
        stop_broker "$name"
    done
done
uptime | tee "$out/uptime-end.txt"
