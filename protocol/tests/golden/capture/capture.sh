#!/bin/sh
# Captures request frames from real clients into ../frames/.
# Needs a Kafka-compatible broker on 127.0.0.1:$BROKER_PORT that advertises 127.0.0.1:$PROXY_PORT
# (e.g. tansu: `tansu broker --listener-url tcp://127.0.0.1:39492
#  --advertised-listener-url tcp://127.0.0.1:39493 --storage-engine memory://tansu/`),
# kcat on PATH, a venv with confluent-kafka kafka-python aiokafka ($VENV), kafkajs under $NODE_DIR.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$HERE/../frames
BROKER_PORT=${BROKER_PORT:-39492}
PROXY_PORT=${PROXY_PORT:-39493}
VENV=${VENV:?set VENV to a venv with confluent-kafka, kafka-python and aiokafka}
NODE_DIR=${NODE_DIR:?set NODE_DIR to a directory with kafkajs installed}
mkdir -p "$OUT"

run() { # label, command...
  label=$1; shift
  python3 "$HERE/proxy.py" "$PROXY_PORT" "$BROKER_PORT" "$OUT" "$label" 2 &
  proxy=$!
  sleep 0.5
  "$@" || echo "$label driver exited with $?"
  kill "$proxy"
  wait "$proxy" 2>/dev/null || true
}

BS=127.0.0.1:$PROXY_PORT
run kcat "$HERE/drive_kcat.sh" "$BS"
run confluent "$VENV/bin/python" "$HERE/drive_confluent.py" "$BS"
run kafka-python "$VENV/bin/python" "$HERE/drive_kafka_python.py" "$BS"
run aiokafka "$VENV/bin/python" "$HERE/drive_aiokafka.py" "$BS"
run kafkajs env NODE_PATH="$NODE_DIR/node_modules" node "$HERE/drive_kafkajs.js" "$BS"
ls "$OUT" | wc -l
