#!/usr/bin/env bash
# Take the quiet window per PROTOCOL.md, run window.sh, release even on failure.
out=$1
exec 9>/work/team/quiet.lock
echo "waiting for lock $(date -u +%T)"; flock 9
echo "locked $(date -u +%T)"; touch /work/team/QUIET
trap 'rm -f /work/team/QUIET; flock -u 9; echo "released $(date -u +%T)"' EXIT
for i in $(seq 60); do
    l=$(cut -d' ' -f1 /proc/loadavg)
    awk -v l=$l 'BEGIN{exit !(l < 0.5)}' && break
    sleep 5
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%T)"; uptime
${WINDOW:-/work/alloc-bin/window.sh} "$out"
echo "window done $(date -u +%T)"
