#!/usr/bin/env bash
# GEMM checks on the GPU machine (cwd = repo root, .gpu/bootstrap.sh sourced, $OUT set); ≤ 150 s.
# Logs under $OUT/gemm/:
#   summary.txt      each step's exit code and seconds, the bench tables of the three runs
#   test.log         dist/test/cuda_gemm.test.js (GEMV kernel vs CPU, cuBLASLt algorithm selection)
#   conf.log         matmul/linear/bmm/conv/linalg conformance on cuda
#   bench{1,2,3}.log node dist/bench/cuda.js --only gemm, three separate processes (PyTorch peer in each)
#   autotune-h200.json  the GEMM entries tuned here (cuda.gemm.cublaslt + cuda.gemv.*), to ship in
#                       src/autotune/shipped/nvidia-h200-sm_90.json (merge under the device key)
set -u
OUT=${OUT:-/tmp/out}; G="$OUT/gemm"; mkdir -p "$G"
# an empty autotune cache: the first bench process sweeps (and announces it), the next two reuse the choice
export NBX_CACHE_DIR=/tmp/nbx-gemm-cache; rm -rf "$NBX_CACHE_DIR"; mkdir -p "$NBX_CACHE_DIR"
# keep the compiled kernels of earlier runs (only the autotune file must start empty)
[ -d /tmp/nbx-cache/nvrtc ] && cp -r /tmp/nbx-cache/nvrtc "$NBX_CACHE_DIR/" 2>/dev/null
S="$G/summary.txt"; : > "$S"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$S" 2>&1
step() { local n=$1 to=$2; shift 2; echo "+ $*" >> "$S"; local t0=$(date +%s); timeout "$to" "$@" > "$G/$n.log" 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s" >> "$S"; }
smi() { nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,utilization.gpu --format=csv,noheader >> "$S" 2>&1; }
step bench1 55 node dist/bench/cuda.js --only gemm; smi
step bench2 22 node dist/bench/cuda.js --only gemm; smi
step bench3 22 node dist/bench/cuda.js --only gemm; smi
# the entries the benchmark tuned (before the tests add entries for their own small shapes)
cp "$NBX_CACHE_DIR/autotune.json" "$G/autotune-h200.json" 2>/dev/null || echo "no autotune.json was written" >> "$S"
step test 20 node --test dist/test/cuda_gemm.test.js
step conf 25 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda --filter 'matmul|linear|bmm|conv|^linalg|addmm|addmv|mv|einsum'
for i in 1 2 3; do echo "--- bench$i" >> "$S"; grep -E '^\| (gemm|linear)|nbx: autotuning|Error' "$G/bench$i.log" >> "$S"; done
grep -E '^# (pass|fail)|^not ok' "$G/test.log" >> "$S"; tail -n 2 "$G/conf.log" >> "$S"
cat "$S"
