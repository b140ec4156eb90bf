#!/usr/bin/env bash
# Runs on the GPU machine (see ../shared/device/README.md): self-check, the test suite, the conformance
# suite on cuda (and webgpu), and the benchmarks against PyTorch. Everything lands in $OUT.
set -u
source .gpu/bootstrap.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NBX_CACHE_DIR=/tmp/nbx-cache
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
node --version >> "$OUT/gpu.txt"
node dist/src/cli/nbx.js info > "$OUT/info.txt" 2>&1
step() { local name=$1; shift; local t0=$(date +%s); timeout "${STEP_TIMEOUT:-240}" "$@" > "$OUT/$name.log" 2>&1; echo "$name rc=$? $(( $(date +%s) - t0 ))s" >> "$OUT/summary.txt"; }
for s in ${STEPS:-selfcheck tests conf-cuda bench-cuda}; do
  case $s in
    selfcheck) step selfcheck node dist/src/backend/cuda/selfcheck.js ;;
    tests) step tests node --test --test-concurrency=1 dist/test/ ;;
    conf-cuda) step conf-cuda node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda ;;
    conf-webgpu) step conf-webgpu node dist/src/cli/nbx.js conformance .gpu/conformance --device webgpu ;;
    bench-cuda) step bench-cuda node dist/bench/cuda.js ${BENCH_ARGS:-} ;;
    bench-webgpu) step bench-webgpu node dist/bench/webgpu.js ;;
  esac
done
tail -n 3 "$OUT"/*.log >> "$OUT/summary.txt" 2>/dev/null
cat "$OUT/summary.txt"
