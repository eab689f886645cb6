#!/bin/bash
# Quiet-window run (issue 17): engine_append_fdatasync_each and the probe, d8fd86d / b34e350 / 1d73bf8,
# alternating, 2 rounds. Each bench executable runs `--bench fdatasync_each` and is stopped once its
# criterion cases are done (its sustained/dd part is not wanted here).
OUT=/work/wt/structure/perf/results/engine-append-2026-12-01-c
cd /work/wt/structure/target/tmp/ab
export ENGINE_BENCH_DIR=/work/wt/structure/target/tmp/benchdir PROBE_DIR=/work/wt/structure/target/tmp/benchdir
mkdir -p $ENGINE_BENCH_DIR
run_bench() { # name round cases (stopped after that many criterion results)
  local f=$OUT/bench-$1-r$2.txt
  CRITERION_HOME=/work/wt/structure/target/tmp/crit-$1-r$2 ./bench-$1 --bench fdatasync_each > $f 2>&1 &
  local pid=$!
  while kill -0 $pid 2>/dev/null; do
    if [ "$(grep -c 'thrpt:' $f)" -ge "$3" ]; then kill $pid; break; fi
    sleep 0.5
  done
  wait $pid 2>/dev/null
  rm -rf $ENGINE_BENCH_DIR/engine-bench-* 2>/dev/null
}
run_probe() { # name round
  FRAG=1 ./p-$1 4096 4096 8 3 > $OUT/probe-$1-r$2.txt 2>&1
}
uptime > $OUT/uptime-start.txt; date -u >> $OUT/uptime-start.txt
for r in 1 2; do
  if [ $r = 1 ]; then order="d8fd86d main new"; else order="new main d8fd86d"; fi
  for h in 0 3 0 3; do ./ext2 d/f $h 2000 | grep holes >> $OUT/extents-r$r.txt; done
  for v in $order; do run_probe $v $r; done
  for v in $order; do if [ $v = d8fd86d ]; then n=2; else n=6; fi; run_bench $v $r $n; done
  uptime > $OUT/uptime-r$r.txt
done
date -u >> $OUT/uptime-r2.txt
