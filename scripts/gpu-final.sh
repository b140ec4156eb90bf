#!/usr/bin/env bash
# The final GPU pass: precompiled kernels for shipping, cold start, conformance (cuda and webgpu),
# the whole test suite, benchmarks against PyTorch. Results land in $OUT.
set -u
source .gpu/bootstrap.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
st() { local n=$1; shift; local t0=$(date +%s); timeout "$TO" "$@" > "$OUT/$n.log" 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s" >> "$OUT/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
# 1. kernels of common operations, compiled once here, shipped in the package
TO=120 st warm env NBX_CACHE_DIR=/tmp/ship node scripts/warm-kernels.mjs
TO=60 st warm-chain env NBX_CACHE_DIR=/tmp/ship node dist/bench/cuda_coldstart.js --child
mkdir -p src/backend/cuda/shipped-kernels && cp /tmp/ship/nvrtc/*.nbxmod src/backend/cuda/shipped-kernels/ 2>/dev/null
(cd /tmp/ship/nvrtc && tar czf "$OUT/shipped-kernels.tgz" *.nbxmod)
# 2. cold start with them (fresh cache dirs inside)
TO=60 st cold node dist/bench/cuda_coldstart.js
export NBX_CACHE_DIR=/tmp/nbx-cache
TO=30 st info node dist/src/cli/nbx.js info
TO=150 st conf-cuda node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda
TO=60 st conf-native env NBX_CUDA_HOST_STAGING=0 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda
TO=180 st tests node --test --test-concurrency=4 dist/test/
TO=100 st bench node dist/bench/cuda.js
TO=90 st conf-webgpu node dist/src/cli/nbx.js conformance .gpu/conformance --device webgpu
TO=120 st bench-webgpu node dist/bench/webgpu.js
TO=60 st selfcheck node dist/src/backend/cuda/selfcheck.js
(cd "$OUT" && tar czf logs.tgz *.log && rm -f tests.log conf-cuda.log conf-native.log conf-webgpu.log warm.log)
cat "$OUT/summary.txt"; tail -n 2 "$OUT"/conf*.log 2>/dev/null; cat "$OUT/cold.log"; tail -20 "$OUT/bench.log"; tail -14 "$OUT/bench-webgpu.log"
