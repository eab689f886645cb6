#!/bin/bash
# iosched window (issue 11): mixed bound with every catch-up read a disk load (64 MiB cache),
# main 6f64fda (before) vs f8e4655 (main with 954e18f: held pieces of 128 KiB), 3 interleaved runs each.
OUT=/tmp/iosched-w3-$(date +%H%M)
rm -rf $OUT; mkdir -p $OUT
echo "rill.read.cache.bytes=67108864" > $OUT/cold.properties
while pgrep -f "/work/team/ci.sh" >/dev/null; do sleep 10; done; echo "ci done $(date +%T)"
exec 9>/work/team/quiet.lock
echo "waiting for the lock $(date +%T)"
flock 9
touch /work/team/QUIET
trap 'rm -f /work/team/QUIET; flock -u 9; echo released $(date +%T)' EXIT
echo "lock taken $(date +%T) $(uptime)" | tee $OUT/window.txt
for i in $(seq 1 48); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  if ! pgrep -f "m pytest|bin/cargo |rustc" >/dev/null && awk "BEGIN{exit !($load < 0.5)}"; then break; fi
  sleep 5
done
echo "start $(date +%T) $(uptime)" | tee -a $OUT/window.txt
export RILL_IGNORE_QUIET=1
BENCH=/work/iosched-bin/f8e4655/rill-bench
COMMON="--workloads mixed --rounds 1 --mixed-backlog-mib 1024 --mixed-pairs 4 --mixed-phase-seconds 5 --dd-mib 256 --mixed-reader-cpus 1"
run() { # name commit
  local name=$1 bin=/work/iosched-bin/$2/rill
  echo "=== $name $(date +%T) $(uptime)" | tee -a $OUT/window.txt
  timeout 150 $BENCH compare --rill-bin $bin --rill-config $OUT/cold.properties $COMMON --out $OUT/$name > $OUT/$name.txt 2>&1
  grep -E "^ +producer p50" $OUT/$name.txt | head -1 | tee -a $OUT/window.txt
  rm -rf $OUT/$name/rill-data
}
for r in 1 2 3; do run before-cold-$r 6f64fda; run after-cold-$r f8e4655; done
echo "end $(date +%T) $(uptime)" | tee -a $OUT/window.txt
echo $OUT > /work/iosched-probe/ab/last-out-w3
