#!/usr/bin/env bash
# What TLS costs (issue 27 item 2): the same load over a broker's PLAINTEXT and its SSL listener,
# for Rill and Apache Kafka (defaults, and log.flush.interval.messages=1), in one run.
#
#   benches/tls_cost.sh [--out DIR] [--rounds N] [--seconds S] [--rate R]
#
# Per round and broker (the order of brokers and of the two listeners alternates by round), on a
# freshly started broker on 127.0.0.1 with both listeners:
# - `rill-bench throughput`: 1 KiB, acks=all, closed loop (linger 5 ms) for S seconds, then a
#   catch-up read of all of it; MB/s and the broker's CPU seconds per GB for each phase;
# - `rill-bench latency`: open loop at R msg/s for S seconds, acks=all: produce→ack percentiles.
# The client is librdkafka (rill-bench, `-X security.protocol=ssl`: OpenSSL, TLS 1.3 where both
# ends offer it). The broker's certificate is an ECDSA P-256 key signed by a CA this script makes
# with openssl; the client verifies it. Rill `--shards 1`; Kafka `-Xmx1g` through peers/kafka.
# Output: DIR/tls-cost.md (one row per broker, listener and round) and the raw outputs beside it.
# Needs target/release/{rill,rill-bench}; run it on a quiet machine (`uptime` is recorded).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
out=bench-results/tls-cost rounds=2 seconds=8 rate=1000
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
"$KAFKA" fetch > /dev/null
uptime | tee "$out/uptime-start.txt"

# A CA and the broker's certificate for 127.0.0.1 (PKCS#8 key + chain in one PEM: what both
# Rill's and Kafka's ssl.keystore.type=PEM read).
certs="$out/certs"
mkdir -p "$certs"
(
    cd "$certs"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=bench-ca" -keyout ca.key -out ca.pem 2> /dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
        -keyout server.key -out server.csr 2> /dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
        -extfile san.ext -out server.crt 2> /dev/null
    openssl pkcs8 -topk8 -nocrypt -in server.key -out server.pk8
    cat server.pk8 server.crt > server.pem
)

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

pid="" dir="" plain_port="" ssl_port=""
start_broker() { # NAME
    local name=$1
    plain_port=$(free_port) ssl_port=$(free_port)
    dir="$out/data-$name"
    rm -rf "$dir"
    case "$name" in
        rill)
            mkdir -p "$dir"
            {
                echo "listeners=PLAINTEXT://127.0.0.1:$plain_port,SSL://127.0.0.1:$ssl_port"
                echo "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL"
                echo "ssl.keystore.type=PEM"
                echo "ssl.keystore.location=$certs/server.pem"
            } > "$out/rill.properties"
            "$RILL" --config "$out/rill.properties" --admin-listen "127.0.0.1:$(free_port)" \
                --data-dir "$dir" --shards 1 > "$out/$name.log" 2>&1 &
            pid=$!
            until grep -qs "all shards listening" "$out/$name.log"; do
                kill -0 "$pid" 2> /dev/null || { cat "$out/$name.log" >&2; exit 1; }
                sleep 0.01
            done ;;
        kafka|kafka-fsync)
            local flag=()
            [ "$name" = kafka-fsync ] && flag=(--flush-every-message)
            eval "$("$KAFKA" start-single --dir "$dir" --port "$plain_port" --ssl-port "$ssl_port" \
                --ssl-keystore "$certs/server.pem" "${flag[@]}")"
            pid=$KAFKA_PIDS ;;
    esac
}
stop_broker() { # NAME
    case "$1" in
        kafka|kafka-fsync) "$KAFKA" stop --dir "$dir" > /dev/null ;;
        *) kill -TERM "$pid"; wait "$pid" 2> /dev/null || true ;;
    esac
    rm -rf "$dir"
}

# One listener's figures: NAME ROUND LISTENER -> a table row.
measure() {
    local name=$1 round=$2 listener=$3 port tls=() f
    f="$out/$round-$name-$listener"
    if [ "$listener" = ssl ]; then
        port=$ssl_port
        tls=(-X security.protocol=ssl -X "ssl.ca.location=$certs/ca.pem")
    else
        port=$plain_port
    fi
    "$BENCH" throughput "${tls[@]}" --brokers "127.0.0.1:$port" --topic "tp-$listener" \
        --seconds "$seconds" --size 1024 --acks all --broker-pid "$pid" > "$f-throughput.txt" 2>&1 \
        || echo FAILED >> "$f-throughput.txt"
    "$BENCH" latency "${tls[@]}" --brokers "127.0.0.1:$port" --topic "lat-$listener" \
        --rate "$rate" --seconds "$seconds" --size 1024 --acks all > "$f-latency.txt" 2>&1 \
        || echo FAILED >> "$f-latency.txt"
    python3 - "$name" "$round" "$listener" "$f-throughput.txt" "$f-latency.txt" <<'EOF'
import json, sys
name, rnd, listener, tp, lat = sys.argv[1:]
def last_json(path):
    for line in reversed(open(path).read().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None
t, l = last_json(tp), last_json(lat)
def phase(p):
    if not p:
        return "FAILED | FAILED"
    cpu = p.get("broker_cpu_s_per_gb")
    return f"{p['mb_per_s']:.1f} | {cpu:.2f}" if cpu is not None else f"{p['mb_per_s']:.1f} | -"
row = [name, rnd, listener,
       phase(t and t["produce"]), phase(t and t.get("consume"))]
if l and "p50_us" in l:
    row.append(f"{l['p50_us']:,} / {l['p99_us']:,} / {l['p999_us']:,}")
else:
    row.append("FAILED")
print("| " + " | ".join(str(x) for x in row) + " |")
EOF
}

table="$out/tls-cost.md"
{
    echo "| broker | round | listener | produce MB/s | its broker CPU s/GB | catch-up MB/s | its broker CPU s/GB | produce→ack p50 / p99 / p99.9 µs at $rate msg/s |"
    echo "|---|---:|---|---:|---:|---:|---:|---:|"
} > "$table"
read -r -a brokers <<< "${BROKERS:-rill kafka kafka-fsync}"
for ((round = 0; round < rounds; round++)); do
    order=("${brokers[@]}") listeners=(plaintext ssl)
    if [ $((round % 2)) = 1 ]; then
        order=(); for ((i = ${#brokers[@]} - 1; i >= 0; i--)); do order+=("${brokers[$i]}"); done
        listeners=(ssl plaintext)
    fi
    for name in "${order[@]}"; do
        echo "== round $round: $name" >&2
        start_broker "$name"
        sleep 2
        for listener in "${listeners[@]}"; do
            measure "$name" "$round" "$listener" | tee -a "$table"
        done
        stop_broker "$name"
    done
done
uptime | tee "$out/uptime-end.txt"
