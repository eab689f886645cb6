#!/bin/bash
# acks=all produce at replication factor 3 vs 1 on a three-node cluster on loopback (issue 14):
# throughput (closed loop, 1 KiB, linger 5 ms) and latency (open loop, 1,000 msg/s, one message
# per request), two rounds in alternating order, one cluster for the whole run.
# Build first: cargo build --release -p rill-server -p rill-bench
# Usage: benches/replication.sh   (BIN=target/release OUT=bench-replication SHARDS=1)
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
run() { # rf round
  local rf=$1 round=$2
  "$BIN/rill-bench" throughput --brokers "$brokers" --topic "tput-rf$rf-r$round" --replication-factor "$rf" \
    --seconds 8 --size 1024 --acks all --skip-consume > "$OUT/throughput-rf$rf-r$round.txt" 2>&1
  "$BIN/rill-bench" latency --brokers "$brokers" --topic "lat-rf$rf-r$round" --replication-factor "$rf" \
    --rate 1000 --seconds 10 --size 1024 --acks all > "$OUT/latency-rf$rf-r$round.txt" 2>&1
}
run 1 1; run 3 1; run 3 2; run 1 2
uptime | tee "$OUT/uptime-end.txt"
grep -H "msg/s\|p99\|p50" "$OUT"/throughput-*.txt "$OUT"/latency-*.txt
