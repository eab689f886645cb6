#!/usr/bin/env bash
# The differential protocol suite: starts Apache Kafka (peers/kafka/kafka.sh, one KRaft node) and
# Rill (target/debug/rill, one shard) on free 127.0.0.1 ports, runs `kdiff` against both, stops
# both. Extra arguments go to kdiff (e.g. --only groups --all).
#
# Environment: RILL_BIN (default target/debug/rill), KDIFF_BIN (default target/debug/kdiff),
# CARGO_TARGET_DIR. Logs stay in $KDIFF_DIR (default target/kdiff) for a failing run.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
target_dir=${CARGO_TARGET_DIR:-$ROOT/target}
case "$target_dir" in /*) ;; *) target_dir="$ROOT/$target_dir" ;; esac
RILL_BIN=${RILL_BIN:-$target_dir/debug/rill}
KDIFF_BIN=${KDIFF_BIN:-$target_dir/debug/kdiff}
dir=${KDIFF_DIR:-$target_dir/kdiff}
[ -x "$RILL_BIN" ] || { echo "run.sh: no rill at $RILL_BIN (cargo build first)" >&2; exit 2; }
[ -x "$KDIFF_BIN" ] || { echo "run.sh: no kdiff at $KDIFF_BIN (cargo build -p rill-differential)" >&2; exit 2; }
rm -rf "$dir"
mkdir -p "$dir/rill-data"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

rill_pid=""
cleanup() {
    [ -n "$rill_pid" ] && kill -TERM "$rill_pid" 2>/dev/null && wait "$rill_pid" 2>/dev/null
    peers/kafka/kafka.sh stop --dir "$dir/kafka" >/dev/null || true
}
trap cleanup EXIT

started=$SECONDS
# KDIFF_AUTHORIZER=1: both with Kafka's StandardAuthorizer, the PLAINTEXT principal a super user
# (what the acls case compares the bindings under; the other cases are not written for it).
authorizer=()
authorizer_props=""
if [ "${KDIFF_AUTHORIZER:-0}" = 1 ]; then
    authorizer=(--set authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
                --set super.users=User:ANONYMOUS)
    authorizer_props=$'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:ANONYMOUS'
fi
eval "$(peers/kafka/kafka.sh start-single --dir "$dir/kafka" "${authorizer[@]}")"
echo "kafka $KAFKA_VERSION at $KAFKA_BOOTSTRAP ($((SECONDS - started)) s to start)"

# What kafka.sh writes into Kafka's server.properties, so that both start alike (the same node
# id, listeners and data directory set in a file: STATIC_BROKER_CONFIG in DescribeConfigs).
rill_port=$(free_port)
cat > "$dir/rill.properties" <<PROPS
node.id=1
listeners=PLAINTEXT://127.0.0.1:$rill_port
advertised.listeners=PLAINTEXT://127.0.0.1:$rill_port
log.dirs=$dir/rill-data
group.initial.rebalance.delay.ms=0
$authorizer_props
PROPS
"$RILL_BIN" --admin-listen "127.0.0.1:$(free_port)" --shards 1 --config "$dir/rill.properties" \
    > "$dir/rill.log" 2>&1 &
rill_pid=$!
until grep -qs "all shards listening" "$dir/rill.log"; do
    kill -0 "$rill_pid" 2>/dev/null || { tail -20 "$dir/rill.log"; echo "rill exited at start" >&2; exit 1; }
    sleep 0.1
done
echo "rill at 127.0.0.1:$rill_port"

set +e
"$KDIFF_BIN" --kafka "$KAFKA_BOOTSTRAP" --rill "127.0.0.1:$rill_port" "$@"
rc=$?
set -e
if grep -q panicked "$dir/rill.log"; then
    echo "rill panicked during the differential run; see $dir/rill.log" >&2
    rc=1
fi
echo "differential suite: $((SECONDS - started)) s"
exit $rc
