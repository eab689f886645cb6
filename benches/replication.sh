#!/bin/bash
# acks=all produce at replication factor 3 vs 1 on a three-node cluster on loopback (issues 14
# and 28): throughput (closed loop, 1 KiB, linger 5 ms) and latency (open loop, 1,000 msg/s, one
# message per request), two rounds in alternating order, one cluster per broker for its rounds.
# Rill first, then Apache Kafka (peers/kafka/kafka.sh start-cluster) with its defaults and with
# log.flush.interval.messages=1 (an fsync before every ack), when java and mvn are present.
# Build first: cargo build --release -p rill-server -p rill-bench
# Usage: benches/replication.sh   (BIN=target/release OUT=bench-replication SHARDS=1 KAFKA=0 skips Kafka)
set -u
BIN=${BIN:-target/release}
OUT=${OUT:-bench-replication}
SHARDS=${SHARDS:-1}
mkdir -p "$OUT"
uptime | tee "$OUT/uptime-start.txt"
"$BIN/rill-bench" machine --dir target > "$OUT/machine.txt" 2>&1
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
data=$(mktemp -d target/bench-replication.XXXX)
declare -a client controller pids
for n in 1 2 3; do client[$n]=$(port); controller[$n]=$(port); done
voters="1@127.0.0.1:${controller[1]},2@127.0.0.1:${controller[2]},3@127.0.0.1:${controller[3]}"
for n in 1 2 3; do
  # min.insync.replicas=1: an RF 1 topic's ISR is one replica, and Kafka (and Rill) refuse
  # acks=all under 2; at RF 3 acks=all waits for the whole ISR either way.
  cat > "$data/node$n.properties" <<EOF
node.id=$n
process.roles=broker,controller
listeners=PLAINTEXT://127.0.0.1:${client[$n]},CONTROLLER://127.0.0.1:${controller[$n]}
advertised.listeners=PLAINTEXT://127.0.0.1:${client[$n]}
controller.listener.names=CONTROLLER
controller.quorum.voters=$voters
log.dirs=$data/node$n
default.replication.factor=3
min.insync.replicas=1
rill.shards=$SHARDS
rill.admin.listen=off
EOF
  "$BIN/rill" --config "$data/node$n.properties" > "$OUT/node$n.log" 2>&1 &
  pids[$n]=$!
done
brokers="127.0.0.1:${client[1]},127.0.0.1:${client[2]},127.0.0.1:${client[3]}"
stop() { kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; rm -rf "$data"; }
trap stop EXIT
for n in 1 2 3; do
  for _ in $(seq 300); do grep -q "all shards listening" "$OUT/node$n.log" && break; sleep 0.1; done
done
sleep 3 # brokers register with the controller
run() { # label brokers rf round
  local label=$1 brokers=$2 rf=$3 round=$4
  "$BIN/rill-bench" throughput --brokers "$brokers" --topic "tput-rf$rf-r$round" --replication-factor "$rf" \
    --seconds 8 --size 1024 --acks all --skip-consume > "$OUT/$label-throughput-rf$rf-r$round.txt" 2>&1
  "$BIN/rill-bench" latency --brokers "$brokers" --topic "lat-rf$rf-r$round" --replication-factor "$rf" \
    --rate 1000 --seconds 10 --size 1024 --acks all > "$OUT/$label-latency-rf$rf-r$round.txt" 2>&1
}
rounds() { # label brokers
  run "$1" "$2" 1 1; run "$1" "$2" 3 1; run "$1" "$2" 3 2; run "$1" "$2" 1 2
}
rounds rill "$brokers"
stop; trap - EXIT
if [[ "${KAFKA:-1}" != 0 ]] && command -v java >/dev/null && command -v mvn >/dev/null \
    && peers/kafka/kafka.sh fetch >/dev/null; then
  for flavour in kafka kafka-fsync; do
    flags=(--dir "target/kafka-peer/replication-$flavour" --set min.insync.replicas=1
           --set default.replication.factor=3)
    [[ $flavour == kafka-fsync ]] && flags+=(--flush-every-message)
    eval "$(peers/kafka/kafka.sh start-cluster "${flags[@]}")"
    trap 'peers/kafka/kafka.sh stop --dir "$KAFKA_DIR"' EXIT
    rounds "$flavour" "$KAFKA_BOOTSTRAP"
    peers/kafka/kafka.sh stop --dir "$KAFKA_DIR" >&2; trap - EXIT
  done
else
  echo "Apache Kafka not available (java, mvn or its Maven fetch missing): no Kafka rows" >&2
fi
uptime | tee "$OUT/uptime-end.txt"
grep -H "msg/s\|p99\|p50" "$OUT"/*-throughput-*.txt "$OUT"/*-latency-*.txt
