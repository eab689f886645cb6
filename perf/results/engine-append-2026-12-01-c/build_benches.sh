#!/bin/bash
# Builds engine_append bench executables of d8fd86d (patched) and b34e350 in a shared target dir;
# the workspace sources are touched first so cargo cannot take one tree's build for the other's.
set -e
export CARGO_TARGET_DIR=/work/wt/structure/target/ab-target
cd /work/wt/structure/target/tmp/ab
for c in d8fd86d main; do
  (cd $c && find . -name '*.rs' -exec touch {} + && cargo bench -p rill-bench --bench engine_append --no-run 2>&1 | tail -3) > build-$c.log
  exe=$(grep -o '/work[^ )]*engine_append-[0-9a-f]*' build-$c.log | tail -1)
  cp "$exe" bench-$c
  echo "$c -> $exe"
done
