#!/usr/bin/env bash
# Issue #19's WebGPU target on the H200: the TinyLlama-1.1B shape (bf16 random weights, batch 1,
# 128-token prompt, 256 new tokens, greedy) decoded on WebGPU (Dawn/Vulkan) and on CUDA in the same
# call, and the ratio (target: WebGPU >= 50% of CUDA). Before that: the adapter (subgroups and their
# size decide the kernels' reduction path) and the WebGPU decode kernels' tests against the CPU on the
# card (test/webgpu_decode.test.ts: the subgroup variants only run there).
# Run from the repo root with .gpu/bootstrap.sh sourced and $OUT set (dist/ built, .gpu and dist carried):
#   source .gpu/bootstrap.sh && bash scripts/gpu-webgpu-decode.sh
# Logs in $OUT/wgdecode/ ($OUT/$WGD_DIR/ when set; summary.txt first). About 100-140 s; every step is echoed, timed, hard-killed at
# its limit (timeout -k 5; limits add up to 163 s without WGD_TOGGLES) and allowed to fail without stopping the rest.
set -u
OUT=${OUT:-/tmp/out}; W="$OUT/${WGD_DIR:-wgdecode}"; mkdir -p "$W"
T0=$(date +%s)
step() { # step NAME TIMEOUT CMD...: runs CMD into $W/NAME.log, records rc and seconds
  local name=$1 to=$2; shift 2; local t=$(date +%s)
  echo "+ [$name, ${to}s] $*" | tee -a "$W/summary.txt"
  timeout -k 5 "$to" "$@" > "$W/$name.log" 2>&1
  echo "  $name rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)" | tee -a "$W/summary.txt"
}
nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,power.draw,utilization.gpu,memory.used --format=csv > "$W/state.txt" 2>&1

# 1. the adapter: features, subgroup sizes
step probe 8 node -e '
import("./dist/src/index.js").then(async (nbx) => {
  const i = await nbx.webgpu.init();
  console.log(JSON.stringify({ adapter: i.adapter, via: i.via, identity: i.identity, features: i.features }));
  process.exit(0);
}).catch((e) => { console.error(e); process.exit(1); });'

# 2. the decode kernels against the CPU, on the card
step test 30 node --test dist/test/webgpu_decode.test.js

# the warm-up as long as the timed run (the default): the same capacity bucket, so neither backend captures its step graph inside the timed run
BENCH=${WGD_BENCH:-"--shape tinyllama --batch 1 --prompt 128 --new-tokens 256 --peers none"}
# 3. CUDA decode: the figure the target is relative to, and the card's HBM roofline (1 GiB a + b)
step cuda 45 node dist/src/cli/nbx.js bench decode --device cuda $BENCH --json "$W/cuda.json"

# 4. WebGPU decode, same settings (pipelined loop = the row's figure; generate() beside it; a step profile),
#    its % of roofline against the roofline CUDA measured on the same card (WebGPU's own measurement uses
#    64 MiB operands, where a submit and readback round trip dominates)
RF=$(node -e 'try { const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).roofline_gbs; if (r) process.stdout.write(`--roofline-gbs ${Math.round(r)}`); } catch {}' "$W/cuda.json")
step webgpu 50 node dist/src/cli/nbx.js bench decode --device webgpu $BENCH $RF --webgpu-profile --json "$W/webgpu.json"

# 4b. (WGD_AB="VAR=value;VAR=value+VAR2=value") the decode again (128 tokens) under each set of environment
#     variables (e.g. NBX_WEBGPU_GEMV, NBX_WEBGPU_ATTN_WG; "-" for none): an A/B inside the real step (the sweep
#     of step 5 times its calls from the op layer; its µs per call came out ~2.7x the step's own timestamps in
#     call B, so its absolute figures are not the step's)
i=0
for ab in $(echo "${WGD_AB:-}" | tr ';' ' '); do
  i=$((i+1))
  vars=$( [ "$ab" = - ] && echo "" || echo "$ab" | tr '+' ' ')
  echo "  ab$i = ${ab}" >> "$W/summary.txt"
  step "ab$i" 25 env $vars node dist/src/cli/nbx.js bench decode --device webgpu --shape tinyllama --batch 1 --prompt 128 --new-tokens 128 --peers none --json "$W/ab$i.json"
done

# 5. the matrix-vector kernel's launch shapes on the step's products (GPU µs and GB/s by timestamps; WGD_SWEEP=0 skips)
[ "${WGD_SWEEP:-1}" = 1 ] && step gemv 30 node dist/bench/webgpu_gemv.js --json "$W/gemv.json"

# 6. (WGD_TOGGLES=1) what Dawn's checks cost: the default kernels without robustness (index clamping), and
#    the decode without validation (host time per step); diagnostics only, both toggles are unsafe
if [ "${WGD_TOGGLES:-0}" = 1 ]; then
  NBX_WEBGPU_DAWN_TOGGLES=disable_robustness step gemv_norobust 20 node dist/bench/webgpu_gemv.js --shapes default
  NBX_WEBGPU_DAWN_TOGGLES=skip_validation,disable_robustness step webgpu_noval 45 node dist/src/cli/nbx.js bench decode --device webgpu --shape tinyllama --batch 1 --prompt 128 --new-tokens 128 --peers none --webgpu-profile --json "$W/webgpu_noval.json"
fi

echo "== total $(( $(date +%s) - T0 ))s" | tee -a "$W/summary.txt"
{
  cat "$W/probe.log" | cut -c1-600
  grep -E "^# (pass|fail)|^not ok|NOT RUN" "$W/test.log"
  grep -E "^nbx |^  (dispatches|slowest)|^roofline|Error|error" "$W/webgpu.log" | head -24
  grep -E "^nbx |^roofline|Error|error" "$W/cuda.log" | head -10
  grep -E "^floor|^BEST|ERROR" "$W/gemv.log" 2>/dev/null
  for f in "$W"/ab*.log; do [ -f "$f" ] && echo "$(basename "$f" .log): $(grep -E '^nbx .* pipelined' "$f" | head -1)"; done
  [ -f "$W/gemv_norobust.log" ] && { echo "-- disable_robustness:"; grep -E "^floor|shape default|ERROR" "$W/gemv_norobust.log"; }
  [ -f "$W/webgpu_noval.log" ] && { echo "-- skip_validation,disable_robustness:"; grep -E "^nbx |^  (dispatches|slowest)|Error|error" "$W/webgpu_noval.log" | head -8; }
  node -e '
    const fs = require("fs"), w = process.argv[1], c = process.argv[2];
    const rd = (f) => { try { return JSON.parse(fs.readFileSync(f, "utf8")).rows[0].nbx; } catch (e) { return { error: String(e.message) }; } };
    const a = rd(w), b = rd(c);
    const r = a.decode_tok_s && b.decode_tok_s ? (100 * a.decode_tok_s / b.decode_tok_s).toFixed(1) + "%" : "-";
    console.log(`RATIO webgpu ${a.decode_tok_s?.toFixed(1) ?? a.error} tok/s (generate() ${a.generate?.decode_tok_s?.toFixed(1) ?? "-"}) / cuda ${b.decode_tok_s?.toFixed(1) ?? b.error} tok/s = ${r} (target >= 50%)`);
  ' "$W/webgpu.json" "$W/cuda.json"
} | tee -a "$W/summary.txt"
