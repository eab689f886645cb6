#!/bin/bash
# Quiet window for issue 11's mixed bound: before (b34e350) / after (608d234) / after with
# rill.read.ahead.hold.ms=0, alternating, interleaved alone/beside phases.
OUT=/tmp/mixed-window
rm -rf $OUT; mkdir -p $OUT
echo "rill.read.ahead.hold.ms=0" > $OUT/hold0.properties
exec 9>/work/team/quiet.lock
echo "waiting for the lock $(date +%T)"
flock 9
touch /work/team/QUIET
echo "lock taken $(date +%T) $(uptime)"
for i in $(seq 1 48); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  if awk "BEGIN{exit !($load < 0.5)}"; then break; fi
  sleep 5
done
echo "start $(date +%T) $(uptime)" | tee $OUT/window.txt
export RILL_IGNORE_QUIET=1
BENCH=/work/mixed-bin/after/rill-bench
COMMON="--workloads mixed --rounds 1 --mixed-backlog-mib 1024 --mixed-pairs 3 --mixed-phase-seconds 5 --dd-mib 256"
for round in 1 2; do
  for v in before after after-hold0; do
    case $v in
      before) BIN=/work/mixed-bin/before/rill; EXTRA="";;
      after) BIN=/work/mixed-bin/after/rill; EXTRA="";;
      after-hold0) BIN=/work/mixed-bin/after/rill; EXTRA="--rill-config $OUT/hold0.properties";;
    esac
    echo "=== $v round $round $(date +%T) $(uptime)" | tee -a $OUT/window.txt
    timeout 300 $BENCH compare --rill-bin $BIN $EXTRA $COMMON --out $OUT/$v-$round > $OUT/$v-$round.txt 2>&1
    rm -rf $OUT/$v-$round/rill-data
  done
done
echo "end $(date +%T) $(uptime)" | tee -a $OUT/window.txt
rm -f /work/team/QUIET
flock -u 9
echo released
