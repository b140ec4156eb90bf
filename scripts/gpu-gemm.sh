#!/usr/bin/env bash
# GEMM checks on the GPU machine (cwd = repo root, .gpu/bootstrap.sh sourced, $OUT set); ≤ 150 s.
# Logs under $OUT/gemm/:
#   summary.txt      each step's exit code and seconds, the bench tables of the three runs
#   test.log         dist/test/cuda_gemm.test.js (GEMV kernel vs CPU, cuBLASLt algorithm selection)
#   conf.log         matmul/linear/bmm/conv/linalg conformance on cuda
#   bench{1,2,3}.log node dist/bench/cuda.js --only gemm, three separate processes (PyTorch peer in each)
#   autotune-h200.json  the autotune cache the benchmark processes wrote (cuda.gemm.cublaslt + cuda.gemv.*)
#   nvidia-h200-sm_90.json  src/autotune/shipped/nvidia-h200-sm_90.json with those GEMM entries merged in
#                       under the device key: copy it over the shipped file
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
step bench2 20 node dist/bench/cuda.js --only gemm; smi
step bench3 20 node dist/bench/cuda.js --only gemm; smi
# the entries the benchmark tuned (before the tests add entries for their own small shapes)
cp "$NBX_CACHE_DIR/autotune.json" "$G/autotune-h200.json" 2>/dev/null || echo "no autotune.json was written" >> "$S"
# the shipped H200 file with the GEMM kernels' entries merged in (copy over src/autotune/shipped/nvidia-h200-sm_90.json)
[ -f "$G/autotune-h200.json" ] && node -e '
const fs = require("fs"), [ship, tuned, out] = process.argv.slice(1);
const s = JSON.parse(fs.readFileSync(ship, "utf8")), t = JSON.parse(fs.readFileSync(tuned, "utf8"));
let n = 0;
for (const [dev, kernels] of Object.entries(t.entries)) for (const [k, e] of Object.entries(kernels)) {
  if (!/^cuda\.(gemm|gemv)\./.test(k)) continue;
  const d = (s.entries[dev] ??= {}); d[k] = { ...(d[k] ?? {}), ...e }; n += Object.keys(e).length;
}
fs.writeFileSync(out, JSON.stringify(s, null, 1) + "\n"); console.log("merged " + n + " GEMM entries into " + out);
' src/autotune/shipped/nvidia-h200-sm_90.json "$G/autotune-h200.json" "$G/nvidia-h200-sm_90.json" >> "$S" 2>&1
step test 30 node --test dist/test/cuda_gemm.test.js
step conf 20 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda --filter 'matmul|linear|bmm|conv|^linalg|addmm|addmv|mv|einsum'
for i in 1 2 3; do echo "--- bench$i" >> "$S"; grep -E '^\| (gemm|linear)|nbx: autotuning|Error' "$G/bench$i.log" >> "$S"; done
grep -E '^# (pass|fail)|^not ok' "$G/test.log" >> "$S"; tail -n 2 "$G/conf.log" >> "$S"
cat "$S"
