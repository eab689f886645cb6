#!/bin/bash
# Lead's window after the final CI: oldest vs newest sealed segment of a 4.5 GiB log on the final main.
OUT=/tmp/lead-on
rm -rf $OUT; mkdir -p $OUT
exec 9>/work/team/quiet.lock
flock 9
touch /work/team/QUIET
echo "lock taken $(date +%T) $(uptime)" | tee $OUT/window.txt
for i in $(seq 1 60); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  if ! pgrep -f "m pytest|bin/cargo " >/dev/null && awk "BEGIN{exit !($load < 0.5)}"; then break; fi
  sleep 5
done
echo "start $(date +%T) $(uptime)" | tee -a $OUT/window.txt
export RILL_IGNORE_QUIET=1 RDKAFKA_PERFORMANCE=/work/readpath-tools/rdkafka_performance
cd /work/wt/types2
timeout 600 benches/oldest_newest.sh /work/lead-window3/rill --log-mib 4608 --read-messages 500000 --rounds 2 --out $OUT/restarted > $OUT/restarted.txt 2>&1
echo "=== restarted done $(date +%T) $(uptime)" | tee -a $OUT/window.txt
tail -5 $OUT/restarted.txt | tee -a $OUT/window.txt
find $OUT/restarted -name "*.log" -size +10M -delete 2>/dev/null; rm -rf $OUT/restarted/*data* 2>/dev/null
timeout 600 benches/oldest_newest.sh /work/lead-window3/rill --log-mib 4608 --read-messages 500000 --rounds 2 --no-restart --out $OUT/not-restarted > $OUT/not-restarted.txt 2>&1
echo "=== not restarted done $(date +%T) $(uptime)" | tee -a $OUT/window.txt
tail -5 $OUT/not-restarted.txt | tee -a $OUT/window.txt
rm -rf $OUT/not-restarted/*data* 2>/dev/null
echo "end $(date +%T) $(uptime)" | tee -a $OUT/window.txt
rm -f /work/team/QUIET
flock -u 9
echo released
