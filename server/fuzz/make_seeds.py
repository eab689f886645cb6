#!/usr/bin/env python3
"""Seed corpora for the request-path fuzz targets from real client captures.

protocol/tests/golden/frames/<client>-<api key>-v<version>-<n>.bin are request frame bodies exactly
as kcat, confluent-kafka, kafka-python, aiokafka and kafkajs sent them (size prefix stripped).

  request_frame/   one body per file, as captured
  request_stream/  one size-prefixed frame per file, plus one file per client holding its whole
                   captured session (ApiVersions, Metadata, CreateTopics, Produce, Fetch, groups...)

Usage: make_seeds.py GOLDEN_FRAMES_DIR OUT_DIR
"""
import struct
import sys
from collections import defaultdict
from pathlib import Path

# Roughly the order a client sends them in, so a whole-session seed reaches deep handler states.
API_ORDER = [18, 3, 19, 10, 11, 14, 12, 9, 8, 0, 2, 1, 23, 22, 13, 20, 37, 32, 60, 16, 15, 42, 47]


def order_key(path: Path):
    _client, key, version, n = path.stem.rsplit("-", 3)
    key = int(key)
    rank = API_ORDER.index(key) if key in API_ORDER else len(API_ORDER) + key
    return rank, int(version[1:]), int(n)


def main(golden: Path, out: Path) -> None:
    frames_dir = out / "request_frame"
    stream_dir = out / "request_stream"
    frames_dir.mkdir(parents=True, exist_ok=True)
    stream_dir.mkdir(parents=True, exist_ok=True)
    sessions = defaultdict(list)
    files = sorted(golden.glob("*.bin"))
    if not files:
        sys.exit(f"no golden frames in {golden}")
    for path in files:
        body = path.read_bytes()
        framed = struct.pack(">i", len(body)) + body
        (frames_dir / path.name).write_bytes(body)
        (stream_dir / path.name).write_bytes(framed)
        sessions[path.stem.rsplit("-", 3)[0]].append(path)
    for client, paths in sessions.items():
        stream = b"".join(struct.pack(">i", len(p.read_bytes())) + p.read_bytes()
                          for p in sorted(paths, key=order_key))
        (stream_dir / f"session-{client}.bin").write_bytes(stream)
    print(f"seeds: {len(files)} frames, {len(sessions)} client sessions -> {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
