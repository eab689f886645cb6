#!/bin/bash
# Lead's A/B: p99.9 stalls on the final main 7c9f32c vs f8e4655 (before alloc's commits) vs 7c9f32c without mallopt.
OUT=/tmp/lead-ab2
rm -rf $OUT; mkdir -p $OUT
echo "rill.read.cache.bytes=67108864" > $OUT/cold.properties
exec 9>/work/team/quiet.lock
flock 9
touch /work/team/QUIET
echo "lock taken $(date +%T) $(uptime)" | tee $OUT/window.txt
for i in $(seq 1 60); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  if ! pgrep -f "m pytest|bin/cargo " >/dev/null && awk "BEGIN{exit !($load < 0.5)}"; then break; fi
  sleep 5
done
echo "start $(date +%T) $(uptime)" | tee -a $OUT/window.txt
export RILL_IGNORE_QUIET=1
BENCH=/work/lead-window2/rill-bench
cd /work/wt/types2
COMMON="--workloads mixed --rounds 1 --mixed-backlog-mib 1024 --mixed-pairs 4 --mixed-phase-seconds 5 --dd-mib 256 --mixed-reader-cpus 1"
run() { # name bin [config]
  local name=$1 bin=$2 extra=""
  [ -n "${3:-}" ] && extra="--rill-config $3"
  echo "=== $name $(date +%T) $(uptime)" | tee -a $OUT/window.txt
  timeout 150 $BENCH compare --rill-bin $bin $extra $COMMON --out $OUT/$name > $OUT/$name.txt 2>&1
  grep -E "^ +producer p50|per-phase" $OUT/$name.txt | head -6 | tee -a $OUT/window.txt
  rm -rf $OUT/$name/rill-data
}
M=/work/lead-window2/rill; F=/work/iosched-bin/f8e4655/rill; N=/work/lead-window2/nomallopt/rill
run main-cache-1 $M; run f8e-cache-1 $F; run nomal-cache-1 $N
run main-cold-1 $M $OUT/cold.properties; run f8e-cold-1 $F $OUT/cold.properties; run nomal-cold-1 $N $OUT/cold.properties
run main-cache-2 $M; run f8e-cache-2 $F; run nomal-cache-2 $N
echo "end $(date +%T) $(uptime)" | tee -a $OUT/window.txt
rm -f /work/team/QUIET
flock -u 9
echo released
