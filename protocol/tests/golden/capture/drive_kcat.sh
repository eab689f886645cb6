#!/bin/sh
# kcat 1.7.1 / librdkafka 2.0.2 (Debian): metadata, produce with every codec + idempotence, consume, group.
set -u
BS=$1
kcat -b "$BS" -L -t golden-kcat >/dev/null 2>&1 || true
for codec in none gzip snappy lz4 zstd; do
  seq 1 20 | sed "s/^/$codec value /" | kcat -b "$BS" -P -t golden-kcat -z "$codec" -k key -H h=v
done
seq 1 5 | kcat -b "$BS" -P -t golden-kcat -X enable.idempotence=true
kcat -b "$BS" -C -t golden-kcat -o beginning -e -q | wc -l
kcat -b "$BS" -C -t golden-kcat -o s@1 -e -q >/dev/null 2>&1 || true
timeout 12 kcat -b "$BS" -G golden-kcat-group -o beginning -e -q golden-kcat | wc -l
