#!/usr/bin/env bash
set -u
source .gpu/bootstrap.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
st() { local n=$1; shift; local t0=$(date +%s); timeout "$TO" "$@" > "$OUT/$n.log" 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s" >> "$OUT/summary.txt"; }
TO=150 st warm env NBX_CACHE_DIR=/tmp/ship node scripts/warm-kernels.mjs
TO=60 st warm-chain env NBX_CACHE_DIR=/tmp/ship node dist/bench/cuda_coldstart.js --child
(cd /tmp/ship/nvrtc && tar czf "$OUT/shipped-kernels.tgz" *.nbxmod)
cp /tmp/ship/nvrtc/*.nbxmod src/backend/cuda/shipped-kernels/ 2>/dev/null
TO=60 st cold node dist/bench/cuda_coldstart.js
export NBX_CACHE_DIR=/tmp/ship
TO=60 st host node scripts/host-profile.mjs cuda
TO=100 st bench node dist/bench/cuda.js
TO=150 st conf-native env NBX_CUDA_HOST_STAGING=0 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda
TO=150 st cuda-tests node --test --test-concurrency=4 dist/test/cuda.test.js dist/test/cuda_indexing.test.js dist/test/cuda_sort.test.js dist/test/cuda_conv.test.js dist/test/cuda_pool.test.js dist/test/cuda_resample.test.js dist/test/cuda_fft.test.js dist/test/cuda_loss.test.js dist/test/io.test.js dist/test/safetensors.test.js
TO=60 st conf-webgpu node dist/src/cli/nbx.js conformance .gpu/conformance --device webgpu
TO=90 st bench-webgpu node dist/bench/webgpu.js
(cd "$OUT" && tar czf logs.tgz *.log)
cat "$OUT/summary.txt"; tail -n 2 "$OUT"/conf*.log; grep -E "^# (pass|fail|skip)|^not ok" "$OUT/cuda-tests.log"; cat "$OUT/cold.log" "$OUT/host.log"; tail -17 "$OUT/bench.log"; tail -12 "$OUT/bench-webgpu.log"
