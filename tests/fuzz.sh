#!/usr/bin/env bash
# Build and run Rill's cargo-fuzz targets, each for a bounded time, and fail on any crash.
#
#   tests/fuzz.sh                     # every target, RILL_FUZZ_SECONDS (default 25) each
#   RILL_FUZZ_SECONDS=300 tests/fuzz.sh request_stream
#
# Targets run RILL_FUZZ_JOBS at a time (default: one per core), each for its whole time on one core.
#
# Crates: server/fuzz (the request path: frame -> header -> decode -> handler -> response, on the
# in-memory fake broker) and protocol/fuzz (the decoders) when it exists; RILL_FUZZ_CRATES overrides.
# Seeds come from real client captures (protocol/tests/golden/frames, see server/fuzz/make_seeds.py);
# the growing corpus and any crash artifact live under $RILL_FUZZ_DIR (default target/fuzz-work).
#
# Toolchain: cargo-fuzz needs nightly-only rustc flags (sanitizers, coverage). Uses `+nightly` when
# rustup has it, else the default toolchain with RUSTC_BOOTSTRAP=1 (the same compiler, nightly
# features unlocked). Installs cargo-fuzz (`cargo install cargo-fuzz --locked`) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER_TARGET=${RILL_FUZZ_SECONDS:-25}
CRATES=${RILL_FUZZ_CRATES:-"server/fuzz protocol/fuzz"}
WORK=${RILL_FUZZ_DIR:-$ROOT/target/fuzz-work}
FUZZ_TARGET_DIR=${RILL_FUZZ_TARGET_DIR:-$ROOT/target/fuzz}
SANITIZER=${RILL_FUZZ_SANITIZER:-address}
# dev (default): unoptimised, several times faster to build from scratch, which is what a bounded CI
# run needs; release: optimised (codegen-units=1), for long local campaigns.
PROFILE=${RILL_FUZZ_PROFILE:-dev}
# Targets fuzzed at once (RILL_FUZZ_JOBS): one per core by default.
JOBS=${RILL_FUZZ_JOBS:-$(nproc)}
ONLY=("$@")

die() { echo "fuzz.sh: $*" >&2; exit 1; }
case "$PROFILE" in dev) PROFILE_FLAG=--dev ;; release) PROFILE_FLAG=--release ;; *) die "RILL_FUZZ_PROFILE must be dev or release" ;; esac

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz (cargo install cargo-fuzz --locked)"
    cargo install cargo-fuzz --locked || die "cannot install cargo-fuzz"
fi

# Pick a toolchain that accepts -Z flags.
TOOLCHAIN=()
if rustup toolchain list 2>/dev/null | grep -q '^nightly' && cargo +nightly --version >/dev/null 2>&1; then
    TOOLCHAIN=(+nightly)
    echo "toolchain: $(cargo +nightly --version)"
else
    export RUSTC_BOOTSTRAP=1
    echo "toolchain: $(cargo --version) with RUSTC_BOOTSTRAP=1 (no nightly installed)"
fi

mkdir -p "$WORK"
python3 server/fuzz/make_seeds.py protocol/tests/golden/frames "$WORK/seeds"

failed=()
summary=()
for crate in $CRATES; do
    [ -f "$crate/Cargo.toml" ] || { echo "skip $crate: no Cargo.toml"; continue; }
    (cd "$crate" && cargo "${TOOLCHAIN[@]}" fuzz list) > "$WORK/targets.txt" \
        || die "cannot list targets of $crate"
    echo
    echo "== build $crate (sanitizer: $SANITIZER, profile: $PROFILE)"
    (cd "$crate" && cargo "${TOOLCHAIN[@]}" fuzz build "$PROFILE_FLAG" -s "$SANITIZER" --target-dir "$FUZZ_TARGET_DIR") \
        || die "cannot build the fuzz targets of $crate (toolchain: ${TOOLCHAIN[*]:-default+RUSTC_BOOTSTRAP})"
    # The targets run side by side, JOBS at a time (libFuzzer uses one core per target): each
    # still gets its SECONDS_PER_TARGET of a whole core, in a fraction of the wall time.
    running=0
    targets=()
    while read -r target; do
        [ -n "$target" ] || continue
        if [ ${#ONLY[@]} -gt 0 ] && [[ ! " ${ONLY[*]} " == *" $target "* ]]; then continue; fi
        targets+=("$target")
        corpus="$WORK/corpus/$(basename "$(dirname "$crate")")-$target"
        artifacts="$WORK/artifacts/$(basename "$(dirname "$crate")")-$target/"
        mkdir -p "$corpus" "$artifacts"
        seeds=()
        [ -d "$WORK/seeds/$target" ] && seeds=("$WORK/seeds/$target")
        [ -d "$crate/corpus/$target" ] && seeds+=("$crate/corpus/$target")
        [ -d "$crate/seeds/$target" ] && seeds+=("$ROOT/$crate/seeds/$target")   # committed seeds
        echo "== fuzz $crate $target for ${SECONDS_PER_TARGET}s (corpus $corpus ${seeds[*]})"
        log="$WORK/$(basename "$(dirname "$crate")")-$target.log"
        rm -f "$log.rc"
        # TMPDIR on tmpfs: the fake broker keeps its topic registry in a temp dir per input.
        (
            set +e
            cd "$crate" && TMPDIR=${RILL_FUZZ_TMPDIR:-/dev/shm} cargo "${TOOLCHAIN[@]}" fuzz run \
                "$PROFILE_FLAG" -s "$SANITIZER" --target-dir "$FUZZ_TARGET_DIR" "$target" "$corpus" "${seeds[@]}" -- \
                -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
                -artifact_prefix="$artifacts" -print_final_stats=1 > "$log" 2>&1
            echo $? > "$log.rc"
        ) < /dev/null &
        running=$((running + 1))
        if [ $running -ge "$JOBS" ]; then wait -n || true; running=$((running - 1)); fi
    done < "$WORK/targets.txt"
    wait
    for target in "${targets[@]}"; do
        log="$WORK/$(basename "$(dirname "$crate")")-$target.log"
        artifacts="$WORK/artifacts/$(basename "$(dirname "$crate")")-$target/"
        rc=$(cat "$log.rc" 2>/dev/null || echo "?")
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
        summary+=("$crate $target: ${execs:-?} executions, ${cov:-cov ?}, exit $rc")
        if [ "$rc" != 0 ]; then
            tail -60 "$log"
            echo "crash artifacts: $(ls "$artifacts" 2>/dev/null | tr '\n' ' ')"
            failed+=("$crate:$target")
        fi
    done
done

echo
echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
[ ${#failed[@]} = 0 ] || die "crashed: ${failed[*]} (logs and artifacts under $WORK)"
