#!/usr/bin/env bash
# The Java module (issue 30): the Java client (kafka-clients) and Kafka's CLI tools against a real rill.
# Starts the Kafka peer (peers/kafka/kafka.sh, one KRaft node, in the background: the tools' scenarios
# run against both and compare) and ONE `mvn test` of tests/java (JUnit 5, one forked JVM) that starts its own rill
# processes (RILL_BIN) on free loopback ports, and stops the peer. Extra arguments go to mvn (e.g.
# -Dtest=ProducerTest).
#
# Maven's repository (~/.m2) is the peer's; once a run resolved everything (a stamp per pom content in
# ~/.m2), later runs are offline (`mvn -o`): a second run downloads nothing.
# Environment: RILL_BIN (default target/debug/rill), CARGO_TARGET_DIR. Classes, surefire reports
# (target/java/surefire-reports: each class's output in <class>-output.txt) and the brokers' data and
# logs (target/java/work) stay for a failing run.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
target_dir=${CARGO_TARGET_DIR:-$ROOT/target}
case "$target_dir" in /*) ;; *) target_dir="$ROOT/$target_dir" ;; esac
RILL_BIN=${RILL_BIN:-$target_dir/debug/rill}
dir=$target_dir/java
[ -x "$RILL_BIN" ] || { echo "run.sh: no rill at $RILL_BIN (cargo build first)" >&2; exit 2; }
rm -rf "$dir/work" "$dir/surefire-reports" "$dir/kafka"
mkdir -p "$dir"

# The peer starts in the background while Maven compiles and the client tests run; ToolsTest (the last
# class) waits for $dir/kafka.env (kafka.sh's KAFKA_BOOTSTRAP=... lines) or $dir/kafka.failed.
rm -f "$dir/kafka.env" "$dir/kafka.failed"
started=$SECONDS
(
    if peers/kafka/kafka.sh start-single --dir "$dir/kafka" --heap 512m > "$dir/kafka.env.tmp" \
            2> "$dir/kafka-start.log"; then
        mv "$dir/kafka.env.tmp" "$dir/kafka.env"
        echo "kafka peer up after $((SECONDS - started)) s"
    else
        tail -20 "$dir/kafka-start.log" > "$dir/kafka.failed"
    fi
) &
kafka_start=$!
cleanup() {
    wait "$kafka_start" 2>/dev/null || true
    peers/kafka/kafka.sh stop --dir "$dir/kafka" >/dev/null || true
}
trap cleanup EXIT

stamp="$HOME/.m2/.rill-java-tests-$(cat tests/java/pom.xml peers/kafka/pom.xml | sha256sum | cut -c1-16)"
offline=()
[ -f "$stamp" ] && offline=(-o)
set +e
mvn -B --no-transfer-progress "${offline[@]}" -f tests/java/pom.xml test \
    -Drill.bin="$RILL_BIN" -Dkafka.env="$dir/kafka.env" -Djava.build.dir="$dir" "$@"
rc=$?
set -e
# Surefire wrote reports: every plugin and dependency resolved, so later runs can be offline.
if compgen -G "$dir/surefire-reports/TEST-*.xml" >/dev/null; then touch "$stamp"; fi
if [ $rc != 0 ]; then
    for f in "$dir"/surefire-reports/*-output.txt; do
        [ -f "$f" ] || continue
        if grep -q -- "---- .* failed: rill log tail" "$f"; then
            echo "==== $f (tail)"; tail -60 "$f"
        fi
    done
fi
echo "java module: $((SECONDS - started)) s"
exit $rc
