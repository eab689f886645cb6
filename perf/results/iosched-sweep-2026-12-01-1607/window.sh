#!/bin/bash
# iosched development sweep (issue 11): held piece size vs the mixed bound, cold (64 MiB cache).
OUT=/tmp/iosched-sweep
rm -rf $OUT; mkdir -p $OUT
echo "rill.read.cache.bytes=67108864" > $OUT/cold.properties
for p in 32 64 128 256; do
  printf "rill.read.cache.bytes=67108864\nrill.read.ahead.hold.piece.bytes=%d\n" $((p*1024)) > $OUT/cold-$p.properties
done
exec 9>/work/team/quiet.lock
echo "waiting for the lock $(date +%T)"
flock 9
touch /work/team/QUIET
trap 'rm -f /work/team/QUIET; flock -u 9' EXIT
echo "lock taken $(date +%T) $(uptime)" | tee $OUT/window.txt
for i in $(seq 1 24); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  if ! pgrep -f "m pytest|bin/cargo " >/dev/null && awk "BEGIN{exit !($load < 0.5)}"; then break; fi
  sleep 5
done
echo "start $(date +%T) $(uptime)" | tee -a $OUT/window.txt
export RILL_IGNORE_QUIET=1
BIN=/work/iosched-bin/80f96b6/rill
BENCH=/work/iosched-bin/80f96b6/rill-bench
cd /work/iosched-probe
for p in 32 64 128 256; do ./probe 2 $p 2 read.dat w.dat; ./probe 3 $p 2 read.dat w.dat; done 2>&1 | tee -a $OUT/window.txt
./probe 0 4 2 read.dat w.dat | tee -a $OUT/window.txt
COMMON="--workloads mixed --rounds 1 --mixed-backlog-mib 1024 --mixed-pairs 4 --mixed-phase-seconds 5 --dd-mib 256 --mixed-reader-cpus 1"
run() { # name piece
  local name=$1 p=$2
  echo "=== $name $(date +%T) $(uptime)" | tee -a $OUT/window.txt
  timeout 150 $BENCH compare --rill-bin $BIN --rill-config $OUT/cold-$p.properties $COMMON --out $OUT/$name > $OUT/$name.txt 2>&1
  grep -E "^ +producer p50|broker beside" $OUT/$name.txt | head -3 | cut -c1-400 | tee -a $OUT/window.txt
  rm -rf $OUT/$name/rill-data
}
for r in 1 2; do for p in 64 128 32 256; do run p$p-$r $p; done; done
echo "end $(date +%T) $(uptime)" | tee -a $OUT/window.txt
