#!/usr/bin/env bash
# Second GPU pass: staging counts, native-only conformance, tests, tuning sweep, benchmarks.
set -u
source .gpu/bootstrap.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NBX_CACHE_DIR=/tmp/nbx-cache
st() { local n=$1; shift; local t0=$(date +%s); timeout "$TO" "$@" > "$OUT/$n.log" 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s" >> "$OUT/summary.txt"; }
TO=120 st conf-cuda node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda
TO=100 st conf-cuda-native env NBX_CUDA_HOST_STAGING=0 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda
TO=150 st tests node --test --test-concurrency=4 dist/test/
TO=90 st tune env NBX_CACHE_DIR=/tmp/tune NBX_AUTOTUNE=full node dist/bench/cuda_tune.js
cp /tmp/tune/autotune.json "$OUT/autotune.json" 2>/dev/null
TO=120 st bench-cuda node dist/bench/cuda.js
TO=60 st conf-webgpu node dist/src/cli/nbx.js conformance .gpu/conformance --device webgpu
cat "$OUT/summary.txt"; tail -n 2 "$OUT"/conf*.log; cat "$OUT/bench-cuda.log" | tail -20
