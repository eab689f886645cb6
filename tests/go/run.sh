#!/usr/bin/env bash
# Go clients against a real rill (issue 30): `go test` of tests/go (Sarama, and franz-go: kgo and kadm); each test
# starts target/debug/rill (RILL_BIN). Modules come through the Go module proxy into ~/go (cached:
# a second run downloads nothing). TestFranzGoUpstreamKgo runs a selection of franz-go's own kgo tests
# against one rill (README.md).
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
target_dir=${CARGO_TARGET_DIR:-$ROOT/target}
case "$target_dir" in /*) ;; *) target_dir="$ROOT/$target_dir" ;; esac
export RILL_BIN=${RILL_BIN:-$target_dir/debug/rill}
[ -x "$RILL_BIN" ] || { echo "run.sh: no rill at $RILL_BIN (cargo build first)" >&2; exit 2; }
exec go test -count=1 -timeout 600s "$@" ./...
