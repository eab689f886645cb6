#!/bin/bash
# Catch-up reader throughput (rdkafka_performance -C, librdkafka defaults, as benches/catchup.sh)
# while a 2,000 msg/s acks=all producer (rdkafka_performance -P -r 2000, linger 0) writes to the
# same partition; fresh broker (--shards 1) per run, variants in turn (order reversed on even rounds).
#   hold_ab.sh OUT ROUNDS MESSAGES NAME=RILL_BIN:HOLD_MS ...
set -u
OUT=$1 ROUNDS=$2 N=$3; shift 3
TOOL=/work/readpath-tools/rdkafka_performance
mkdir -p $OUT
bpid= ppid=
trap '[ -n "$ppid" ] && kill $ppid 2>/dev/null; [ -n "$bpid" ] && kill $bpid 2>/dev/null; exit 1' TERM INT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
for round in $(seq 1 $ROUNDS); do
  order=("$@"); [ $((round % 2)) = 0 ] && order=($(printf '%s\n' "$@" | tac))
  for v in "${order[@]}"; do
    name=${v%%=*} rest=${v#*=}; bin=${rest%:*} hold=${rest##*:}
    port=$(free_port) data=$OUT/data-$name
    rm -rf $data
    echo "rill.read.ahead.hold.ms=$hold" > $OUT/$name.properties
    $bin --listen 127.0.0.1:$port --data-dir $data --shards 1 --admin-listen off \
        --config $OUT/$name.properties > $OUT/rill-$name-$round.log 2>&1 &
    bpid=$!
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
    $TOOL -P -t t -p 0 -b 127.0.0.1:$port -s 1024 -c $N -X acks=1 2>&1 | grep -E 'msgs/s' | tail -1 > $OUT/backlog-$name-$round.txt
    $TOOL -P -t t -p 0 -b 127.0.0.1:$port -s 1024 -r 2000 -c 1000000 -X acks=all -X linger.ms=0 > $OUT/producer-$name-$round.txt 2>&1 &
    ppid=$!
    sleep 2
    line=$($TOOL -C -t t -p 0 -b 127.0.0.1:$port -o beginning -c $N 2>&1 | grep -E 'msgs/s' | tail -1)
    kill -INT $ppid 2>/dev/null; wait $ppid 2>/dev/null
    echo "round $round $name: $line" | tee -a $OUT/summary.txt
    echo "   producer: $(grep -E "msgs/s" $OUT/producer-$name-$round.txt | tail -1)" >> $OUT/summary.txt
    kill $bpid; wait $bpid 2>/dev/null
    rm -rf $data
  done
done
