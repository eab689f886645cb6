#!/usr/bin/env bash
# Jepsen-style test of a three-node rill cluster under network partitions (tests/jepsen/README.md).
# Needs root (network namespaces, iptables), iptables and iproute2, ./.venv (test.sh makes it) and
# a built rill (RILL_BIN, default target/debug/rill). Arguments go to jepsen.py, e.g.
#   tests/jepsen/run.sh --seed 1234 --duration 3600
# Exit status: 0 no anomaly, 1 an anomaly or a failed run (the seed is printed), 2 cannot run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
for tool in ip iptables; do
    command -v "$tool" >/dev/null || { echo "tests/jepsen: $tool is missing (apt-get install iptables iproute2)"; exit 2; }
done
python=${PYTHON_VENV:-$root/.venv/bin/python}
[ -x "$python" ] || { echo "tests/jepsen: $python missing (./test.sh creates .venv)"; exit 2; }
export RILL_BIN=${RILL_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/rill}
[ -x "$RILL_BIN" ] || { echo "tests/jepsen: $RILL_BIN missing (cargo build first)"; exit 2; }
cd "$here"
exec "$python" -u jepsen.py "$@"
