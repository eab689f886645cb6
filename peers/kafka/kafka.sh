#!/usr/bin/env bash
# Apache Kafka as a peer on 127.0.0.1: fetched with Maven, formatted and started in KRaft mode,
# stopped cleanly. Every comparison with Kafka (benches/, the differential suite in tests/) uses it.
#
#   peers/kafka/kafka.sh fetch                         resolve the jars (cached; prints the lib dir)
#   peers/kafka/kafka.sh start-single [OPTIONS]        one node, process.roles=broker,controller
#   peers/kafka/kafka.sh start-cluster [OPTIONS]       three such nodes, one controller quorum
#   peers/kafka/kafka.sh stop [--dir DIR]              SIGTERM every node of DIR, wait, report
#   peers/kafka/kafka.sh status [--dir DIR]            the nodes of DIR and whether they run
#   peers/kafka/kafka.sh tool MAIN_CLASS ARGS...       run a Kafka main class on its classpath, e.g.
#       tool org.apache.kafka.tools.ProducerPerformance --topic t --num-records 1000 ...
#       tool org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:PORT --list
#   peers/kafka/kafka.sh classpath                     print the classpath (for java -cp)
#
# Start options:
#   --dir DIR          where configs, data, logs and pids go (default: target/kafka-peer/single or
#                      target/kafka-peer/cluster in this checkout). Wiped and formatted anew at start.
#   --port N           the (first) broker port; a cluster uses N, N+1, N+2 (default: free ports)
#   --heap SIZE        -Xmx and -Xms per node (default 1g single, 1g each for the cluster: Kafka's own
#                      default, leaving most of the 24 GiB to the page cache Kafka reads from)
#   --flush-every-message   log.flush.interval.messages=1: an fsync before every ack (Rill's acks=all)
#   --set KEY=VALUE    any other broker property (repeatable)
#   --ssl-port N --ssl-keystore PEM   (single node) also an SSL listener on N, its key and chain in
#                      PEM (ssl.keystore.type=PEM); the bootstrap printed stays the PLAINTEXT one
# A start prints shell lines to eval: KAFKA_BOOTSTRAP=127.0.0.1:PORT[,...] KAFKA_DIR=DIR KAFKA_PIDS=...
# and returns once every node has logged "Kafka Server started" and accepts connections.
#
# Environment: KAFKA_PEER_CACHE (default ~/.cache/rill-kafka-peer) holds the jars, one directory per
# pom.xml content; Maven's own repository (~/.m2) is shared as usual. KAFKA_PEER_JAVA picks the java
# binary (default: java on PATH; Kafka 4 needs Java 17+). KAFKA_PEER_TOOL_HEAP is -Xmx for `tool`
# (default 512m). KAFKA_PEER_READY_SECONDS bounds a start (default 90).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
JAVA="${KAFKA_PEER_JAVA:-java}"
CACHE="${KAFKA_PEER_CACHE:-$HOME/.cache/rill-kafka-peer}"
READY_SECONDS="${KAFKA_PEER_READY_SECONDS:-90}"
# Kafka's bin/kafka-run-class.sh performance options.
JVM_OPTS=(-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
          -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true)

die() { echo "kafka.sh: $*" >&2; exit 1; }
SSL_PORT="" SSL_KEYSTORE=

# The lib directory for this pom.xml, filled by Maven on first use.
libs_dir() {
    local hash
    hash=$(sha256sum "$HERE/pom.xml" | cut -c1-16)
    echo "$CACHE/libs-$hash"
}

fetch() {
    local dir
    dir=$(libs_dir)
    [ -f "$dir/.complete" ] && { echo "$dir"; return; }
    # One fetch at a time: the e2e workers start peers side by side, and two Mavens filling an
    # empty ~/.m2 at once fail on each other's half-written files ("….pom.part (No such file or
    # directory)", a fresh machine's first ./test.sh). The others wait, then find it complete.
    mkdir -p "$CACHE"
    exec 8>"$CACHE/fetch.lock"
    flock 8
    if [ ! -f "$dir/.complete" ]; then
        command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
        echo "kafka.sh: fetching Apache Kafka $(kafka_version) with Maven into $dir" >&2
        rm -rf "$dir.tmp"
        mvn -q -B -f "$HERE/pom.xml" dependency:copy-dependencies \
            -DoutputDirectory="$dir.tmp" >&2 || die "mvn dependency:copy-dependencies failed"
        # Never mark a partial fetch complete: the broker's and the tools' jars must be there.
        local jar
        for jar in "kafka_2.13-$(kafka_version).jar" "kafka-tools-$(kafka_version).jar" \
                   "kafka-group-coordinator-$(kafka_version).jar"; do
            [ -f "$dir.tmp/$jar" ] || die "the fetch lacks $jar: not marked complete"
        done
        rm -rf "$dir"
        mv "$dir.tmp" "$dir"
        touch "$dir/.complete"
    fi
    exec 8>&-
    echo "$dir"
}

kafka_version() {
    sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$HERE/pom.xml"
}

classpath() { echo "$(fetch)/*"; }

# A Kafka Uuid as `kafka-storage random-uuid` prints it (16 random bytes, URL-safe base64, no
# padding, not starting with '-'), without starting a JVM for it.
random_uuid() {
    python3 -c 'import base64, os
while True:
    u = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
    if not u.startswith("-"): print(u); break'
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Three consecutive free ports starting at a free one (retries a few bases).
free_ports() {
    local count=$1 base port ok
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        base=$(free_port)
        ok=1
        for ((port = base; port < base + count; port++)); do
            if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then ok=0; break; fi
        done
        if [ $ok = 1 ] && [ $((base + count)) -lt 65536 ]; then echo "$base"; return; fi
    done
    die "no $count consecutive free ports found"
}

# write_node_config FILE NODE_ID BROKER_PORT CONTROLLER_PORT VOTERS DATA_DIR EXTRA...
write_node_config() {
    local file=$1 id=$2 port=$3 cport=$4 voters=$5 data=$6
    shift 6
    {
        echo "# written by peers/kafka/kafka.sh"
        echo "process.roles=broker,controller"
        echo "node.id=$id"
        echo "controller.quorum.voters=$voters"
        local ssl_listener="" ssl_map=""
        if [ -n "$SSL_PORT" ]; then
            ssl_listener=",SSL://127.0.0.1:$SSL_PORT" ssl_map=",SSL:SSL"
            echo "ssl.keystore.type=PEM"
            echo "ssl.keystore.location=$SSL_KEYSTORE"
        fi
        echo "listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport$ssl_listener"
        echo "advertised.listeners=PLAINTEXT://127.0.0.1:$port$ssl_listener"
        echo "controller.listener.names=CONTROLLER"
        echo "inter.broker.listener.name=PLAINTEXT"
        echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT$ssl_map"
        echo "log.dirs=$data"
        for kv in "$@"; do echo "$kv"; done
    } > "$file"
}

start() {
    local mode=$1
    shift
    local nodes=1 dir="" port="" heap="1g" flush=0 sets=()
    [ "$mode" = cluster ] && nodes=3
    while [ $# -gt 0 ]; do
        case "$1" in
            --dir) dir=$2; shift 2 ;;
            --port) port=$2; shift 2 ;;
            --heap) heap=$2; shift 2 ;;
            --flush-every-message) flush=1; shift ;;
            --set) sets+=("$2"); shift 2 ;;
            --ssl-port) SSL_PORT=$2; shift 2 ;;
            --ssl-keystore) SSL_KEYSTORE=$(realpath "$2"); shift 2 ;;
            *) die "unknown option $1" ;;
        esac
    done
    [ -n "$dir" ] || dir="$ROOT/target/kafka-peer/$mode"
    if [ -n "$SSL_PORT" ]; then
        [ "$nodes" = 1 ] || die "--ssl-port is for start-single"
        [ -n "$SSL_KEYSTORE" ] || die "--ssl-port needs --ssl-keystore"
    fi
    if [ -f "$dir/pids" ]; then
        stop_dir "$dir" >&2 || true
    fi
    local cp
    cp="$(fetch)/*"
    rm -rf "$dir"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [ -n "$port" ] || port=$(free_ports "$nodes")
    local cbase
    cbase=$(free_ports "$nodes")
    local extra=()
    # A single node can hold the internal topics only at replication factor 1.
    if [ "$nodes" = 1 ]; then
        extra+=(offsets.topic.replication.factor=1 transaction.state.log.replication.factor=1
                transaction.state.log.min.isr=1 share.coordinator.state.topic.replication.factor=1
                share.coordinator.state.topic.min.isr=1)
    fi
    # Tests and benchmarks start consumers at once: no 3 s initial rebalance delay.
    extra+=(group.initial.rebalance.delay.ms=0)
    [ $flush = 1 ] && extra+=(log.flush.interval.messages=1)
    extra+=(${sets[@]+"${sets[@]}"})
    local voters="" i
    for ((i = 0; i < nodes; i++)); do
        voters+="${voters:+,}$((i + 1))@127.0.0.1:$((cbase + i))"
    done
    local cluster_id
    cluster_id=$(random_uuid)
    local bootstrap="" pids=()
    for ((i = 0; i < nodes; i++)); do
        local id=$((i + 1)) node="$dir/node$((i + 1))"
        mkdir -p "$node/logs"
        write_node_config "$node/server.properties" "$id" $((port + i)) $((cbase + i)) "$voters" \
            "$node/data" "${extra[@]}"
        "$JAVA" -Xmx256m -cp "$cp" -Dlog4j2.configurationFile="$HERE/log4j2.properties" \
            -Dkafka.logs.dir="$node/logs" kafka.tools.StorageTool format -t "$cluster_id" \
            -c "$node/server.properties" > "$node/logs/format.out" 2>&1 \
            || die "format of node $id failed: $(cat "$node/logs/format.out")"
        bootstrap+="${bootstrap:+,}127.0.0.1:$((port + i))"
    done
    for ((i = 0; i < nodes; i++)); do
        local node="$dir/node$((i + 1))"
        # setsid: the node outlives this script and a Ctrl-C of the caller's shell.
        setsid "$JAVA" "-Xmx$heap" "-Xms$heap" "${JVM_OPTS[@]}" -cp "$cp" \
            -Dlog4j2.configurationFile="$HERE/log4j2.properties" -Dkafka.logs.dir="$node/logs" \
            kafka.Kafka "$node/server.properties" > "$node/logs/stdout" 2>&1 < /dev/null &
        pids+=($!)
        echo "$!" >> "$dir/pids"
    done
    echo "$bootstrap" > "$dir/bootstrap"
    echo "$(kafka_version)" > "$dir/version"
    wait_ready "$dir" "$nodes" "$port"
    echo "KAFKA_BOOTSTRAP=$bootstrap"
    echo "KAFKA_DIR=$dir"
    echo "KAFKA_PIDS=$(IFS=,; echo "${pids[*]}")"
    echo "KAFKA_VERSION=$(kafka_version)"
}

wait_ready() {
    local dir=$1 nodes=$2 port=$3 deadline i
    deadline=$((SECONDS + READY_SECONDS))
    for ((i = 0; i < nodes; i++)); do
        local node="$dir/node$((i + 1))" pid
        pid=$(sed -n "$((i + 1))p" "$dir/pids")
        until grep -q "Kafka Server started" "$node/logs/server.log" 2>/dev/null \
                && (exec 3<>/dev/tcp/127.0.0.1/$((port + i))) 2>/dev/null; do
            if ! kill -0 "$pid" 2>/dev/null; then
                tail -20 "$node/logs/stdout" "$node/logs/server.log" >&2 2>/dev/null || true
                die "node $((i + 1)) (pid $pid) exited at start; logs in $node/logs"
            fi
            if [ $SECONDS -ge "$deadline" ]; then
                die "node $((i + 1)) not ready in ${READY_SECONDS}s; logs in $node/logs"
            fi
            sleep 0.1
        done
    done
}

# SIGTERM every node (a controlled shutdown), all at once so the quorum stays up while the brokers
# leave; SIGKILL whatever has not exited after 60 s, and say so.
stop_dir() {
    local dir=$1 pid alive deadline
    [ -f "$dir/pids" ] || { echo "kafka.sh: nothing running in $dir"; return 0; }
    local pids
    mapfile -t pids < "$dir/pids"
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    deadline=$((SECONDS + 60))
    while :; do
        alive=()
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
        [ ${#alive[@]} = 0 ] && break
        if [ $SECONDS -ge $deadline ]; then
            echo "kafka.sh: ${alive[*]} still running 60 s after SIGTERM: SIGKILL" >&2
            for pid in "${alive[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
            rm -f "$dir/pids"
            return 1
        fi
        sleep 0.1
    done
    rm -f "$dir/pids"
    echo "kafka.sh: stopped ${#pids[@]} node(s) in $dir"
}

# The default dirs of this checkout that have a pids file.
default_dirs() {
    local d
    for d in "$ROOT/target/kafka-peer/single" "$ROOT/target/kafka-peer/cluster"; do
        [ -f "$d/pids" ] && echo "$d"
    done
    return 0
}

stop() {
    if [ "${1:-}" = --dir ]; then stop_dir "$2"; return; fi
    local d any=0 rc=0
    for d in $(default_dirs); do any=1; stop_dir "$d" || rc=1; done
    [ $any = 1 ] || echo "kafka.sh: nothing running"
    return $rc
}

status() {
    local dirs d pid
    if [ "${1:-}" = --dir ]; then dirs=("$2"); else mapfile -t dirs < <(default_dirs); fi
    for d in ${dirs[@]+"${dirs[@]}"}; do
        echo "$d: Kafka $(cat "$d/version" 2>/dev/null) at $(cat "$d/bootstrap" 2>/dev/null)"
        while read -r pid; do
            if kill -0 "$pid" 2>/dev/null; then echo "  pid $pid running"; else echo "  pid $pid gone"; fi
        done < "$d/pids"
    done
}

tool() {
    [ $# -ge 1 ] || die "tool needs a main class"
    local main=$1
    shift
    exec "$JAVA" "-Xmx${KAFKA_PEER_TOOL_HEAP:-512m}" -cp "$(fetch)/*" \
        -Dlog4j2.configurationFile="$HERE/log4j2-tools.properties" "$main" "$@"
}

case "${1:-}" in
    fetch) fetch ;;
    classpath) classpath ;;
    version) kafka_version ;;
    start-single) shift; start single "$@" ;;
    start-cluster) shift; start cluster "$@" ;;
    stop) shift; stop "$@" ;;
    status) shift; status "$@" ;;
    tool) shift; tool "$@" ;;
    *) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
