#!/bin/bash
# Second quiet window for issue 11 (mixed3): the reader's client unpinned, and more pinned runs to pool.
# Builds: before = 73f6a46 (main at this session's start), main = e2ee49a (write-through read
# cache), after = e2ee49a + the FlushGate (held loads paced behind flushes).
# cold = rill.read.cache.bytes=64 MiB (the 1 GiB backlog is older than the cache: every read
# is a disk load); default = the shard's cache (memory/8 since e2ee49a: the backlog stays in
# memory, written through).
OUT=/tmp/mixed3-window2
rm -rf $OUT; mkdir -p $OUT
echo "rill.read.cache.bytes=67108864" > $OUT/cold.properties
exec 9>/work/team/quiet.lock
echo "waiting for the lock $(date +%T)"
flock 9
touch /work/team/QUIET
echo "lock taken $(date +%T) $(uptime)" | tee $OUT/window.txt
for i in $(seq 1 30); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  if awk "BEGIN{exit !($load < 0.5)}"; then break; fi
  sleep 5
done
echo "start $(date +%T) $(uptime)" | tee -a $OUT/window.txt
export RILL_IGNORE_QUIET=1
BENCH=/work/mixed3-bin/rill-bench
COMMON="--workloads mixed --rounds 1 --mixed-backlog-mib 1024 --mixed-pairs 4 --mixed-phase-seconds 5 --dd-mib 256"
PIN="--mixed-reader-cpus 1"
run() { # name bin placement [config]
  local name=$1 bin=$2 place=$3 extra=""
  [ -n "${4:-}" ] && extra="--rill-config $4"
  echo "=== $name $(date +%T) $(uptime)" | tee -a $OUT/window.txt
  timeout 150 $BENCH compare --rill-bin $bin $extra $COMMON $place --out $OUT/$name > $OUT/$name.txt 2>&1
  grep -E "^ +producer p50" $OUT/$name.txt | tee -a $OUT/window.txt
  rm -rf $OUT/$name/rill-data
}
run after-cold-unpinned-1 /work/mixed3-bin/gate2/rill "" $OUT/cold.properties
run after-cache-unpinned-1 /work/mixed3-bin/gate2/rill ""
run main-cold-unpinned-1 /work/mixed3-bin/e2ee49a/rill "" $OUT/cold.properties
run after-cold-3 /work/mixed3-bin/gate2/rill "$PIN" $OUT/cold.properties
run after-cache-2 /work/mixed3-bin/gate2/rill "$PIN"
echo "end $(date +%T) $(uptime)" | tee -a $OUT/window.txt
rm -f /work/team/QUIET
flock -u 9
echo released
