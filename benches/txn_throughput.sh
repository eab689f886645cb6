#!/bin/bash
# Transactional vs idempotent vs plain produce throughput, one window, alternating order.
set -u
BIN=${BIN:-target/release}
OUT=${OUT:-txn-bench-results}
mkdir -p $OUT
uptime | tee $OUT/uptime-start.txt
$BIN/rill-bench machine --dir target > $OUT/machine.txt 2>&1
run() { # label mode txn_messages round
  local label=$1 mode=$2 n=$3 round=$4 port data pid
  port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  data=$(mktemp -d target/bench-data.XXXX)
  $BIN/rill --listen 127.0.0.1:$port --data-dir $data --admin-listen off > $OUT/broker-$label-$round.log 2>&1 &
  pid=$!
  for i in $(seq 100); do grep -q "listening" $OUT/broker-$label-$round.log 2>/dev/null && break; sleep 0.1; done
  $BIN/rill-bench throughput --brokers 127.0.0.1:$port --topic t-$label --seconds 8 --size 1024 --acks all \
     --producer $mode --txn-messages $n --broker-pid $pid > $OUT/$label-$round.txt 2>&1
  kill $pid; wait $pid
  rm -rf $data
}
for round in 1 2; do
  if [ $round = 1 ]; then order="plain idempotent txn1000 txn100"; else order="txn100 txn1000 idempotent plain"; fi
  for label in $order; do
    case $label in
      plain) run plain plain 1000 $round;;
      idempotent) run idempotent idempotent 1000 $round;;
      txn1000) run txn1000 transactional 1000 $round;;
      txn100) run txn100 transactional 100 $round;;
    esac
  done
done
uptime | tee $OUT/uptime-end.txt
