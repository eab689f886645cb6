#!/usr/bin/env bash
# The one command that runs Rill's whole test suite on a fresh Debian machine (CI runs it via .ci/run).
#
# 1. Installs what the tests need, idempotently (a second run installs nothing):
#    kcat and chromium from Debian; Python clients (tests/requirements.txt) into ./.venv; kafkajs (npm ci) in
#    tests/clients/node.
# 2. cargo fmt --check and cargo clippy (-D warnings, lints from the workspace Cargo.toml), the
#    server's layering check (ops/layering.py: no import points up server/LAYERS.md's floors), then
#    cargo build --workspace, cargo test --workspace --all-targets (--no-fail-fast: every crate reports).
# 3. The end-to-end suite (tests/e2e, pytest): a real `rill` (target/debug/rill) on a free 127.0.0.1
#    port, driven by kcat, confluent-kafka, kafka-python, aiokafka and kafkajs; RILL_E2E_WORKERS (3)
#    files at once (pytest-xdist).
# 4. The differential protocol suite (tests/differential): Apache Kafka (Maven, peers/kafka) and
#    Rill answer the same requests; every difference must be listed in COMPATIBILITY.md. Then the Java
#    module (tests/java): the Java client and Kafka's CLI tools against rill (and the tools against Kafka);
#    the Go clients (tests/go: Sarama, franz-go).
# 5. The cargo-fuzz targets, bounded (tests/fuzz.sh; RILL_FUZZ_SECONDS per target, 0 skips).
# 6. The live fuzzer against a real broker and a 3-node cluster, bounded (tests/livefuzz;
#    RILL_LIVEFUZZ_SECONDS, RILL_LIVEFUZZ_CLUSTER_SECONDS, 0 skips).
# 7. The Jepsen-style test, bounded: three nodes in network namespaces under partitions and process
#    faults, the queue and transactional workloads and their anomaly checkers (tests/jepsen;
#    RILL_JEPSEN_SECONDS, 0 skips).
#
# Exits non-zero if anything failed. Extra arguments go to pytest (e.g. `./test.sh -k kcat -x`).
# Environment: SKIP_CARGO_TEST=1 skips step 2's tests (build still runs); RILL_E2E_SHARDS=N;
# RILL_E2E_WORKERS=N e2e workers (pytest-xdist, default 3; 0: one process).
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
export DEBIAN_FRONTEND=noninteractive

# Each step's wall time is printed when it ends and again in the summary, with the total: the suite
# must stay well under 30 minutes on 2 cores, and this says where its time goes.
started=$(date +%s)
step_name=""
step_started=$started
step_names=()
step_seconds=()
step_done() {
    [ -n "$step_name" ] || return 0
    local took=$(( $(date +%s) - step_started ))
    step_names+=("$step_name")
    step_seconds+=("$took")
    printf -- '-- %s: %ss\n' "$step_name" "$took"
    step_name=""
}
step() {
    step_done
    step_name="$*"
    step_started=$(date +%s)
    printf '\n== %s\n' "$*"
}

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
apt_updated=0
apt_install() {
    if [ $apt_updated = 0 ]; then $SUDO apt-get update -qq; apt_updated=1; fi
    $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- 1. dependencies ----------------------------------------------------------------------------
step "dependencies"
if ! command -v kcat >/dev/null; then
    echo "installing kcat (Debian)"
    apt_install kcat
fi
if ! command -v chromium >/dev/null; then
    echo "installing chromium (Debian; the admin status page is rendered headless)"
    apt_install chromium
fi
# rill-bench's librdkafka links the system OpenSSL (its TLS listener measurements).
if ! [ -e /usr/include/openssl/ssl.h ] || ! command -v pkg-config >/dev/null; then
    echo "installing libssl-dev and pkg-config (Debian; rill-bench's librdkafka TLS)"
    apt_install libssl-dev pkg-config
fi
# tests/jepsen partitions its nodes with iptables inside network namespaces (iproute2's ip netns).
if ! command -v iptables >/dev/null || ! command -v ip >/dev/null; then
    echo "installing iptables and iproute2 (Debian; tests/jepsen's network partitions)"
    apt_install iptables iproute2
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "installing nodejs + npm (Debian)"
    apt_install nodejs npm
fi
PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null; then
    apt_install python3 python3-venv
fi
if [ ! -x .venv/bin/python ]; then
    echo "creating .venv"
    "$PYTHON" -m venv .venv 2>/dev/null || { apt_install python3-venv; rm -rf .venv; "$PYTHON" -m venv .venv; }
fi
req_stamp=".venv/.requirements.sha256"
req_hash=$(sha256sum tests/requirements.txt | cut -d' ' -f1)
if [ "$(cat "$req_stamp" 2>/dev/null)" != "$req_hash" ]; then
    echo "installing Python test packages into .venv"
    .venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt
    echo "$req_hash" > "$req_stamp"
fi
node_dir=tests/clients/node
lock_stamp="$node_dir/node_modules/.package-lock.sha256"
lock_hash=$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$lock_stamp" 2>/dev/null)" != "$lock_hash" ]; then
    echo "installing kafkajs (npm ci)"
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$lock_hash" > "$lock_stamp"
fi
echo "kcat: $(kcat -V 2>&1 | sed -n 's/.*librdkafka \([0-9.]*\).*/librdkafka \1/p' | head -1)," \
     "node $(node --version), $(.venv/bin/python --version)"

# --- 2. lints, build and Rust tests --------------------------------------------------------------
failed=()
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    echo "installing rustfmt and clippy (rustup)"
    rustup component add rustfmt clippy
fi
step "cargo fmt --all --check"
cargo fmt --all --check || failed+=("cargo fmt")
step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings || failed+=("cargo clippy")

step "server layering (ops/layering.py, floors in server/LAYERS.md)"
"$PYTHON" ops/layering.py || failed+=("layering")

step "cargo build --workspace"
cargo build --workspace

if [ "${SKIP_CARGO_TEST:-0}" != 1 ]; then
    step "cargo test --workspace --all-targets --no-fail-fast"
    cargo test --workspace --all-targets --no-fail-fast || failed+=("cargo test")
fi

# --- 3. end-to-end tests with real clients ---------------------------------------------------------
step "end-to-end tests (tests/e2e) against target/debug/rill"
target_dir=${CARGO_TARGET_DIR:-$ROOT/target}
case "$target_dir" in /*) ;; *) target_dir="$ROOT/$target_dir" ;; esac
export RILL_BIN="$target_dir/debug/rill"
unset RILL_E2E_BROKER   # always the real rill here
set +e
# Side by side (pytest-xdist): the suite mostly waits on brokers and clients, not on the CPU.
# --dist loadfile keeps a file's tests on one worker, so a module's broker or cluster starts once;
# every broker has its own ports (free_port: never one another worker holds) and data dir.
# RILL_E2E_WORKERS=0 runs them one at a time in one process; a later `-n` argument wins.
e2e_workers=${RILL_E2E_WORKERS:-3}
(cd tests/e2e && "$ROOT/.venv/bin/python" -m pytest -p no:cacheprovider -n "$e2e_workers" --dist loadfile "$@")
rc=$?
set -e
if [ $rc = 5 ]; then
    echo "pytest collected no tests: that is a failure here"
fi
[ $rc = 0 ] || failed+=("e2e (pytest exit $rc)")

# --- 3b. the differential protocol suite: the same requests to Apache Kafka and to Rill -------------
# tests/differential/run.sh starts Kafka (peers/kafka/kafka.sh: Maven fetches it once into
# ~/.cache/rill-kafka-peer; one JVM for the whole suite) and target/debug/rill, and fails on any
# difference COMPATIBILITY.md does not list. Skipped when pytest arguments were given.
if [ $# = 0 ]; then
    step "differential protocol suite against Apache Kafka (tests/differential)"
    if ! command -v java >/dev/null; then apt_install openjdk-17-jre-headless; fi
    if ! command -v mvn >/dev/null; then apt_install maven; fi
    CARGO_TARGET_DIR="$target_dir" tests/differential/run.sh || failed+=("differential")
fi

# --- 3c. the Java client and Kafka's CLI tools (tests/java, issue 30) ------------------------------
# tests/java/run.sh starts the Kafka peer (the tools' scenarios run against both and compare) and runs
# ONE `mvn test` (JUnit 5, kafka-clients and kafka-tools at the peer's version, one JVM) whose tests
# start target/debug/rill processes; Maven's ~/.m2 is cached (offline once warm). Skipped when pytest
# arguments were given.
if [ $# = 0 ]; then
    step "Java client and Kafka's CLI tools against rill (tests/java)"
    if ! command -v java >/dev/null; then apt_install openjdk-17-jre-headless; fi
    if ! command -v javac >/dev/null; then apt_install openjdk-17-jdk-headless; fi
    if ! command -v mvn >/dev/null; then apt_install maven; fi
    CARGO_TARGET_DIR="$target_dir" RILL_BIN="$RILL_BIN" tests/java/run.sh || failed+=("java")
fi

# --- 3d. Go clients (tests/go, issue 30): Sarama and franz-go (kgo, kadm) against target/debug/rill ----
# Modules through the Go module proxy into ~/go (cached; the build cache keeps the compiled test).
# With them a selection of franz-go's own kgo tests against one rill (~60 s; tests/go/README.md).
if [ $# = 0 ]; then
    step "Go clients against rill (tests/go: Sarama, franz-go)"
    if ! command -v go >/dev/null; then apt_install golang-go; fi
    CARGO_TARGET_DIR="$target_dir" RILL_BIN="$RILL_BIN" tests/go/run.sh || failed+=("go")
fi

# --- 4. fuzz targets, bounded (crash-safety work, issue 7: tests/fuzz.sh) --------------------------
# cargo-fuzz on the request path (server/fuzz: frame -> decode -> handler -> response), seeded from
# real client captures. RILL_FUZZ_SECONDS per target (0 skips), RILL_FUZZ_CRATES adds crates (e.g.
# "server/fuzz protocol/fuzz"); skipped when pytest arguments were given (a filtered run).
fuzz_seconds=${RILL_FUZZ_SECONDS:-20}
if [ "$fuzz_seconds" != 0 ] && [ $# = 0 ]; then
    step "fuzz targets, ${fuzz_seconds}s each (tests/fuzz.sh)"
    RILL_FUZZ_SECONDS=$fuzz_seconds RILL_FUZZ_CRATES=${RILL_FUZZ_CRATES:-server/fuzz} tests/fuzz.sh \
        || failed+=("fuzz")
fi
# --- end of step 4 ---------------------------------------------------------------------------------

# --- 6. the live fuzzer, bounded (issue 26: tests/livefuzz, SECURITY.md) ---------------------------
# Spec-generated requests for every API and version on 24 connections against a real target/debug/rill,
# beside a friendly producer and consumer; the broker's liveness, the friendly clients' progress and RSS
# are checked after every batch. A fresh seed each run, printed; `target/debug/livefuzz --seed S` replays
# it. RILL_LIVEFUZZ_SECONDS (single node) and RILL_LIVEFUZZ_CLUSTER_SECONDS (3 nodes); 0 skips.
livefuzz_seconds=${RILL_LIVEFUZZ_SECONDS:-60}
livefuzz_cluster_seconds=${RILL_LIVEFUZZ_CLUSTER_SECONDS:-30}
if [ $# = 0 ] && [ "$livefuzz_seconds" != 0 ]; then
    step "live fuzzer, single node, ${livefuzz_seconds}s (tests/livefuzz)"
    "$target_dir/debug/livefuzz" --rill-bin "$RILL_BIN" --seconds "$livefuzz_seconds" \
        --work-dir "$target_dir/livefuzz/single" || failed+=("livefuzz (single node)")
fi
if [ $# = 0 ] && [ "$livefuzz_cluster_seconds" != 0 ]; then
    step "live fuzzer, 3-node cluster, ${livefuzz_cluster_seconds}s (tests/livefuzz)"
    "$target_dir/debug/livefuzz" --rill-bin "$RILL_BIN" --cluster 3 --seconds "$livefuzz_cluster_seconds" \
        --work-dir "$target_dir/livefuzz/cluster" || failed+=("livefuzz (3-node cluster)")
fi
# --- end of step 6 ---------------------------------------------------------------------------------

# --- 7. Jepsen-style network partitions, bounded (issue 32 item 4: tests/jepsen) -------------------
# Three target/debug/rill nodes, each in its own network namespace, behind a bridge; a seeded
# schedule isolates leaders, the controller and followers (iptables DROP), kill -9s and SIGSTOPs
# nodes while both workloads run: idempotent acks=all producers with assign/subscribe consumers
# (queue), and transactional producers committing and aborting at random with read_committed
# consumers (txn); the checkers look for Jepsen's anomaly classes. A fresh seed each run,
# printed; `tests/jepsen/run.sh --workload both --seed S` replays its schedule.
# RILL_JEPSEN_SECONDS of faults (0 skips); needs root (or sudo).
jepsen_seconds=${RILL_JEPSEN_SECONDS:-60}
if [ $# = 0 ] && [ "$jepsen_seconds" != 0 ]; then
    step "Jepsen-style partitions, ${jepsen_seconds}s of faults (tests/jepsen)"
    (cd tests/jepsen && "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider test_checker.py) \
        || failed+=("jepsen checker tests")
    # Scripted partitions with exact expectations (issue 32 item 5), one cluster, ~30 s.
    (cd tests/jepsen && $SUDO env RILL_BIN="$RILL_BIN" "$ROOT/.venv/bin/python" -m pytest -q \
        -p no:cacheprovider test_partition_scenarios.py) || failed+=("jepsen partition scenarios")
    $SUDO env RILL_BIN="$RILL_BIN" CARGO_TARGET_DIR="$target_dir" tests/jepsen/run.sh \
        --workload both --duration "$jepsen_seconds" || failed+=("jepsen")
fi
# --- end of step 7 ---------------------------------------------------------------------------------

step_done
total=$(( $(date +%s) - started ))
printf '\n== summary: %ss in all\n' "$total"
for i in "${!step_names[@]}"; do
    printf '%6ss  %s\n' "${step_seconds[$i]}" "${step_names[$i]}"
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all tests passed"
