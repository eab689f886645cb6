#!/bin/sh
MIMALLOC_ALLOW_THP=0 exec /work/alloc-bin/mimalloc/rill "$@"
