#!/usr/bin/env bash
set -u
source .gpu/bootstrap.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NBX_CACHE_DIR=/tmp/nbx-cache
st() { local n=$1; shift; local t0=$(date +%s); timeout "$TO" "$@" > "$OUT/$n.log" 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s" >> "$OUT/summary.txt"; }
TO=60 st host node --cpu-prof --cpu-prof-dir=/tmp/prof scripts/host-profile.mjs cuda
node scripts/profile-summary.mjs /tmp/prof >> "$OUT/host.log" 2>&1
TO=120 st conf-cuda node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda
TO=60 st conf-native env NBX_CUDA_HOST_STAGING=0 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda
TO=150 st tests node --test --test-concurrency=4 dist/test/
TO=120 st tune env NBX_CACHE_DIR=/tmp/tune NBX_AUTOTUNE=full node dist/bench/cuda_tune.js
cp /tmp/tune/autotune.json "$OUT/autotune.json" 2>/dev/null
TO=100 st bench node dist/bench/cuda.js
TO=60 st cold node dist/bench/cuda_coldstart.js
(cd "$OUT" && tar czf logs.tgz *.log && rm -f tests.log conf-cuda.log conf-native.log)
cat "$OUT/summary.txt"; cat "$OUT/host.log" | head -40; cat "$OUT/bench.log" | tail -18; cat "$OUT/cold.log"
