#!/usr/bin/env bash
# WebGPU reductions and float16 elementwise speed (issue #8) on the H200's Vulkan adapter (Dawn):
#   1. test/webgpu_reduce.test.ts (every reduction plan vs the CPU, float16 outputs over all bit
#      patterns, determinism; prints the start-up checks: hardware float16 rounding, subgroups), with
#      test/webgpu_perf.test.ts and test/webgpu.test.ts (16-byte paths, elementwise, reductions);
#   2. the reduction conformance cases on webgpu;
#   3. a fresh autotune sweep (bench/webgpu_tune.ts) into an empty cache, copied to
#      $OUT/webgpu-reduce/webgpu-reduce-autotune.json (to merge into src/autotune/shipped/
#      webgpu-nvidia-h200-vulkan.json with scripts/merge-autotune.mjs);
#   4. bench/webgpu_reduce.ts on those entries: a*x+b, a+b, sum rows / columns / all over 1 GiB,
#      float32 and float16, WebGPU next to the CUDA backend (wall10 = bench/webgpu.ts's timing, steady,
#      and WebGPU device time), ratios WebGPU / CUDA; with --variants, WebGPU rows again with one
#      choice changed (bit-level float16 rounding, no subgroups, 1/2/8 loads in flight per thread);
#   5. the whole webgpu conformance suite (the float16 rounding touches every op).
# Run from the repo root with .gpu/bootstrap.sh sourced and $OUT set; logs in $OUT/webgpu-reduce/
# (summary.txt first). Every step is echoed, timed, hard-killed at its limit and allowed to fail; the
# limits shrink to what is left of 115 s.
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/webgpu-reduce"; mkdir -p "$L"
S="$L/summary.txt"; : > "$S"
T0=$(date +%s)
BUDGET=115
CONF=test/conformance; [ -d .gpu/conformance ] && CONF=.gpu/conformance
st() { # st NAME TIMEOUT CMD...: into $L/NAME.log; rc and seconds into the summary
  local n=$1 to=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  if [ "$left" -le 3 ]; then echo "$n SKIPPED (time budget)" | tee -a "$S"; return; fi
  [ "$to" -gt "$left" ] && to=$left
  echo "+ [$n, ${to}s] $*" | tee -a "$S"
  local t=$(date +%s%N)
  timeout -k 5 "$to" "$@" > "$L/$n.log" 2>&1
  local rc=$? ms=$(( ($(date +%s%N) - t) / 1000000 ))
  printf '%s rc=%d %d.%01ds (at %ds)\n' "$n" "$rc" $((ms / 1000)) $(((ms % 1000) / 100)) $(( $(date +%s) - T0 )) | tee -a "$S"
}
nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu,memory.used --format=csv,noheader >> "$S" 2>&1
. scripts/lib/dist.sh
if dist_stale src/backend/webgpu/kernels/index src/backend/webgpu/runtime/caps src/backend/webgpu/runtime/elementwise src/backend/webgpu/runtime/backend test/webgpu_reduce.test bench/webgpu_reduce; then st build 45 npx tsc -p tsconfig.json; fi
TUNE=/tmp/nbx-webgpu-reduce-tune; rm -rf "$TUNE"; mkdir -p "$TUNE"
export NBX_CUDA_HOST_STAGING=0

st test 30 env NBX_AUTOTUNE=off node --test dist/test/webgpu_reduce.test.js dist/test/webgpu_perf.test.js dist/test/webgpu.test.js
st conf-reduce 20 env NBX_AUTOTUNE=cached node dist/src/cli/nbx.js conformance "$CONF" --device webgpu \
  --filter '^(sum|nansum|mean|prod|amax|amin|max|min|argmax|argmin|var|std|var_mean|std_mean|logsumexp|any|all|count_nonzero|norm|linalg\.vector_norm|trace|cumsum|cumprod)/'
st tune 25 env NBX_CACHE_DIR="$TUNE" NBX_AUTOTUNE=full node dist/bench/webgpu_tune.js
cp "$TUNE/autotune.json" "$L/webgpu-reduce-autotune.json" 2>/dev/null || echo "no autotune.json written" | tee -a "$S"
st bench 55 env NBX_CACHE_DIR="$TUNE" NBX_AUTOTUNE=cached node dist/bench/webgpu_reduce.js --variants
st conf-all 45 env NBX_AUTOTUNE=cached node dist/src/cli/nbx.js conformance "$CONF" --device webgpu

{
  echo "== tests"; grep -E '^# (tests|pass|fail|skip)|^not ok|float16 rounding:' "$L/test.log" | head -20
  grep -A20 '^not ok' "$L/test.log" | grep -E 'error|got|Error|expected' | head -20
  echo "== conformance (reductions)"; grep -E '^FAIL' "$L/conf-reduce.log" | head -20; grep -E 'passed, .* failed' "$L/conf-reduce.log" | tail -1
  echo "== conformance (all of webgpu)"; grep -E '^FAIL' "$L/conf-all.log" | head -20; grep -E 'passed, .* failed' "$L/conf-all.log" | tail -1
  echo "== bench"; grep -E '^(WebGPU|start-up|launch|workgroups)' "$L/bench.log" | head -6
  if grep -qE '^\|' "$L/bench.log"; then grep -E '^\|' "$L/bench.log"; else grep -E '^row ' "$L/bench.log"; fi
  grep -iE 'failed|error' "$L/bench.log" | head -5
  echo "== tuned configs (webgpu.reduce / webgpu.elementwise)"; node -e '
    const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    for (const [dev, ks] of Object.entries(j.entries)) for (const [k, es] of Object.entries(ks)) if (/^webgpu\.(reduce|elementwise)$/.test(k))
      for (const [key, e] of Object.entries(es)) console.log(k, key, JSON.stringify(e.config), e.timeMs?.toFixed(4), "ms");
  ' "$L/webgpu-reduce-autotune.json" 2>&1 | head -60
  echo "total $(( $(date +%s) - T0 ))s"
} | tee -a "$S"
