#!/bin/sh
# Runs each fuzz target for SECONDS (default 120) seeded from the golden corpus.
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -eu
cd "$(dirname "$0")"
SECONDS_PER_TARGET=${1:-120}
GOLDEN=../tests/golden/frames
mkdir -p corpus/request corpus/frame corpus/record_batch
cp "$GOLDEN"/*.bin corpus/request/ 2>/dev/null || true
for f in "$GOLDEN"/*.bin; do
  # frame target sees size-prefixed frames
  python3 -c 'import sys,struct; d=open(sys.argv[1],"rb").read(); sys.stdout.buffer.write(b"\x40"+struct.pack(">i",len(d))+d)' "$f" > "corpus/frame/$(basename "$f")"
done
# record_batch seeds: the records blobs of captured Produce requests, mode byte 0 prepended
python3 - "$GOLDEN" corpus/record_batch <<'PY'
import os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
for name in os.listdir(src):
    data = open(os.path.join(src, name), "rb").read()
    if struct.unpack(">h", data[:2])[0] != 0:
        continue
    # find record batches by magic 2 at offset 16 with a plausible batchLength
    for i in range(len(data) - 61):
        if data[i + 16] == 2:
            length = struct.unpack(">i", data[i + 8:i + 12])[0]
            if 49 <= length and i + 12 + length <= len(data):
                open(os.path.join(dst, f"{name}-{i}"), "wb").write(b"\x00" + data[i:i + 12 + length])
PY
cargo +nightly fuzz build -O
# The three targets run side by side; each prints "Done N runs in S second(s)" at the end.
for target in frame request record_batch; do
  cargo +nightly fuzz run -O "$target" "corpus/$target" -- -max_total_time="$SECONDS_PER_TARGET" \
    -rss_limit_mb=4096 > "fuzz-$target.log" 2>&1 &
done
wait
grep -hE "Done [0-9]+ runs|ERROR|panicked" fuzz-*.log
