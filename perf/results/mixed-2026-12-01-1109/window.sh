#!/bin/bash
# Quiet window (<= 8 min) for issue 11's mixed bound, helper mixed2:
#  1. compare --workloads mixed, --mixed-pairs 6 --mixed-phase-seconds 5, the reader's client on
#     CPU 1 (the shard is pinned to CPU 0): before (b34e350) / after (9393c67), alternating;
#  2. rdkafka_performance -C throughput beside a 2,000 msg/s acks=all producer:
#     after hold 100 / after hold 0 / 608d234 hold 100 (hold_ab.sh).
# Every step is skipped once it could not end within the 8 minutes.
D=/work/mixed-bin/mixed2
OUT=/tmp/mixed2-window
rm -rf $OUT; mkdir -p $OUT
exec 9>/work/team/quiet.lock
echo "waiting for the lock $(date +%T)"
flock 9
if [ $(date -u +%H%M) -ge 1120 ]; then echo "lock only at $(date +%T): past 11:20, not starting" | tee $OUT/window.txt; flock -u 9; exit 1; fi
touch /work/team/QUIET
trap "rm -f /work/team/QUIET" EXIT
T0=$(date +%s)
left() { echo $(( 480 - ($(date +%s) - T0) )); }
echo "lock taken $(date +%T) $(uptime)" | tee $OUT/window.txt
for i in $(seq 1 18); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  if awk "BEGIN{exit !($load < 0.5)}"; then break; fi
  sleep 5
done
echo "start $(date +%T) $(uptime)" | tee -a $OUT/window.txt
export RILL_IGNORE_QUIET=1
COMMON="--workloads mixed --rounds 1 --mixed-backlog-mib 1024 --mixed-pairs 6 --mixed-phase-seconds 5 --dd-mib 256 --mixed-reader-cpus 1"
mixed() { # run name
  local run=$1 BIN
  [ $(left) -lt 85 ] && { echo "skip $run: $(left) s left" | tee -a $OUT/window.txt; return 1; }
  case $run in before*) BIN=/work/mixed-bin/before/rill;; after*) BIN=$D/rill-after;; esac
  echo "=== $run $(date +%T) $(uptime)" | tee -a $OUT/window.txt
  timeout 120 $D/rill-bench compare --rill-bin $BIN $COMMON --out $OUT/$run > $OUT/$run.txt 2>&1
  rm -rf $OUT/$run/rill-data
}
mixed before-1; mixed after-1; mixed before-2; mixed after-2
if [ $(left) -gt 50 ]; then
  echo "=== throughput $(date +%T) $(uptime)" | tee -a $OUT/window.txt
  timeout $(( $(left) - 5 )) $D/hold_ab.sh $OUT/throughput 2 1000000 \
      after-hold100=$D/rill-after:100 after-hold0=$D/rill-after:0 b608d234-hold100=/work/mixed-bin/after/rill:100 \
      > $OUT/throughput.txt 2>&1
fi
mixed before-3 && mixed after-3
echo "end $(date +%T) $(uptime)" | tee -a $OUT/window.txt
rm -f /work/team/QUIET
flock -u 9
echo released $(date +%T)
