#!/usr/bin/env bash
# GEMM checks on the GPU machine (cwd = repo root, .gpu/bootstrap.sh sourced, dist/ built, $OUT set); ≤ 120 s in all
# (every step under `timeout -k 5`, its limit cut to what is left of the budget).
# Logs under $OUT/gemm/ (7 files):
#   summary.txt   GPU state and other compute processes, each step's exit code and seconds, the bench tables
#   bench.log     node dist/bench/cuda.js --only gemm, three separate processes (the first one also runs the
#                 PyTorch peer and sweeps; the other two reuse the peer's figures and the autotune choices)
#   clocks.log    SM clock / power / utilisation every 200 ms during the first bench process
#   test.log      dist/test/cuda_gemm.test.js (GEMV kernels vs CPU, cuBLASLt algorithm selection)
#   conf.log      matmul/linear/bmm/conv/linalg conformance on cuda
#   autotune-h200.json      the autotune cache the benchmark processes wrote (cuda.gemm.cublaslt + cuda.gemv.*)
#   nvidia-h200-sm_90.json  src/autotune/shipped/nvidia-h200-sm_90.json with those GEMM entries merged in
#                           under the device key: copy it over the shipped file (pins the choices)
set -u
T0=$(date +%s); BUDGET=118
OUT=${OUT:-/tmp/out}; G="$OUT/gemm"; mkdir -p "$G"
# an empty autotune cache: the first bench process sweeps (and announces it), the next two reuse the choice
export NBX_CACHE_DIR=/tmp/nbx-gemm-cache; rm -rf "$NBX_CACHE_DIR"; mkdir -p "$NBX_CACHE_DIR"
# keep the compiled kernels of earlier runs (only the autotune file must start empty)
[ -d /tmp/nbx-cache/nvrtc ] && cp -r /tmp/nbx-cache/nvrtc "$NBX_CACHE_DIR/" 2>/dev/null
PEER=/tmp/nbx-gemm-peer.json; rm -f "$PEER"
S="$G/summary.txt"; : > "$S"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,utilization.gpu --format=csv,noheader >> "$S" 2>&1
# anything else running on the card distorts every figure (run 1 had a stuck process spinning)
echo "other compute processes: $(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>&1 | tr '\n' ';')" >> "$S"
step() { # step NAME LIMIT_S CMD...: runs under timeout -k 5 with min(LIMIT, budget left)
  local n=$1 cap=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - T0) - 5 )); local to=$(( cap < left ? cap : left ))
  if [ "$to" -le 1 ]; then echo "$n skipped: budget spent" >> "$S"; return; fi
  echo "+ timeout -k 5 $to $*" >> "$S"; local t0=$(date +%s)
  timeout -k 5 "$to" "$@" > "$G/$n.log" 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s" >> "$S"
}
smi() { nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,utilization.gpu --format=csv,noheader >> "$S" 2>&1; }
nvidia-smi --query-gpu=clocks.sm,power.draw,utilization.gpu --format=csv,noheader -lms 200 > "$G/clocks.log" 2>&1 & SMI=$!
step bench1 50 node dist/bench/cuda.js --only gemm --peer "$PEER"
kill "$SMI" 2>/dev/null; wait "$SMI" 2>/dev/null; smi
step bench2 14 node dist/bench/cuda.js --only gemm --peer "$PEER"; smi
step bench3 14 node dist/bench/cuda.js --only gemm --peer "$PEER"; smi
# the entries the benchmark tuned (before the tests add entries for their own small shapes)
cp "$NBX_CACHE_DIR/autotune.json" "$G/autotune-h200.json" 2>/dev/null || echo "no autotune.json was written" >> "$S"
# the shipped H200 file with the GEMM kernels' entries merged in (copy over src/autotune/shipped/nvidia-h200-sm_90.json)
[ -f "$G/autotune-h200.json" ] && timeout -k 2 5 node -e '
const fs = require("fs"), [ship, tuned, out] = process.argv.slice(1);
const s = JSON.parse(fs.readFileSync(ship, "utf8")), t = JSON.parse(fs.readFileSync(tuned, "utf8"));
let n = 0;
for (const [dev, kernels] of Object.entries(t.entries)) for (const [k, e] of Object.entries(kernels)) {
  if (!/^cuda\.(gemm|gemv)\./.test(k)) continue;
  const d = (s.entries[dev] ??= {}); d[k] = { ...(d[k] ?? {}), ...e }; n += Object.keys(e).length;
}
fs.writeFileSync(out, JSON.stringify(s, null, 1) + "\n"); console.log("merged " + n + " GEMM entries into " + out);
' src/autotune/shipped/nvidia-h200-sm_90.json "$G/autotune-h200.json" "$G/nvidia-h200-sm_90.json" >> "$S" 2>&1
step test 20 node --test dist/test/cuda_gemm.test.js
step conf 14 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda --filter 'matmul|linear|bmm|conv|^linalg|addmm|addmv|mv|einsum'
: > "$G/bench.log"
for i in 1 2 3; do
  echo "--- bench$i" >> "$S"; grep -E '^\| (gemm|linear)|^# plan|nbx: autotuning|PyTorch peer|Error' "$G/bench$i.log" >> "$S"
  { echo "=== bench$i"; cat "$G/bench$i.log"; } >> "$G/bench.log" 2>/dev/null; rm -f "$G/bench$i.log"
done
# the GEMV-vs-cuBLASLt choices and their timings (µs per call, back to back)
[ -f "$G/autotune-h200.json" ] && timeout -k 2 5 node -e '
const t = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
for (const ks of Object.values(t.entries)) for (const [k, e] of Object.entries(ks)) for (const [key, v] of Object.entries(e)) {
  const tried = (v.tried ?? []).map((c) => JSON.stringify(c.config).replace(/"algo":"[0-9a-f]+",?/, "") + " " + (c.timeMs * 1000).toFixed(1)).slice(0, 6).join(" | ");
  console.log(`${k} ${key}: ${JSON.stringify(v.config).replace(/"algo":"[0-9a-f]+",?/, "")} ${(v.timeMs * 1000).toFixed(1)} us  [${tried}]`);
}' "$G/autotune-h200.json" >> "$S" 2>&1
awk -F', ' '{ split($1, c, " "); split($2, w, " "); n[c[1]]++; if (w[1] + 0 > p) p = w[1] + 0 } END { printf "SM clocks during bench1 (MHz: samples):"; for (k in n) printf " %s: %d", k, n[k]; printf "; max power %s W\n", p }' "$G/clocks.log" >> "$S" 2>&1
grep -E '^# (pass|fail)|^not ok' "$G/test.log" >> "$S"; tail -n 2 "$G/conf.log" >> "$S"
echo "total $(( $(date +%s) - T0 ))s" >> "$S"
cat "$S"
