#!/usr/bin/env bash
# WebGPU on the H200 (issue #8): a one-line adapter probe; bench/webgpu.ts with the GEMM check against
# the CPU and the CUDA backend and PyTorch measured in the same run (shipped launch configurations only:
# the user cache is empty, so "launch configurations: ... from shipped" confirms the shipped file's key);
# a fresh autotune sweep (timestamps unquantized) into its own cache; and the WebGPU figures again with
# those entries, without the subgroup-matrix opt-in (the default path) and without peers.
# Run from the repo root with .gpu/bootstrap.sh sourced and $OUT set; logs in $OUT/webgpu/ (7 files).
# About 60-90 s, at most ~120 s (the step limits add up to 120); every step is echoed, timed,
# hard-killed at its limit (timeout -k 5) and allowed to fail without stopping the rest. Rows are
# printed as they are measured ("row ..." lines), so a step cut short still leaves its numbers.
set -u
OUT=${OUT:-/tmp/out}; W="$OUT/webgpu"; mkdir -p "$W"
T0=$(date +%s)
SHIPPED_ONLY=/tmp/nbx-webgpu-empty; TUNED=/tmp/nbx-webgpu-tune
rm -rf "$SHIPPED_ONLY" "$TUNED"; mkdir -p "$SHIPPED_ONLY" "$TUNED"
step() { # step NAME TIMEOUT CMD...: runs CMD into $W/NAME.log, records rc and seconds
  local name=$1 to=$2; shift 2; local t=$(date +%s)
  echo "+ [$name, ${to}s] $*" | tee -a "$W/summary.txt"
  timeout -k 5 "$to" "$@" > "$W/$name.log" 2>&1
  echo "  $name rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)" | tee -a "$W/summary.txt"
}
gpustate() { # clocks, power state and other processes: a slow run shows here
  echo "== $1 $(date -u +%T)"
  nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,memory.used --format=csv 2>&1
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>&1
  uptime
}
gpustate before > "$W/state.txt"

# 1. the adapter with the backend's toggles (bench1 prints the full detail)
step probe 10 env NBX_WEBGPU_SUBGROUP_MATRIX=1 node -e '
import("./dist/src/index.js").then(async (nbx) => {
  const i = await nbx.webgpu.init();
  console.log(JSON.stringify({ adapter: i.adapter, via: i.via, tuneKey: i.tuneKey, toggles: i.toggles, f16: i.features.includes("shader-f16"),
    subgroupMatrix: i.features.includes("chromium-experimental-subgroup-matrix"), smmConfigs: i.subgroupMatrixConfigs.length }));
  process.exit(0);
}).catch((e) => { console.error(e); process.exit(1); });'

# 2. GEMM check (tiled f32/f16 and subgroup-matrix f16 vs the CPU), then WebGPU next to the CUDA backend
#    and PyTorch, on the shipped launch configurations (empty user cache, NBX_AUTOTUNE=cached)
step bench1 65 env NBX_CACHE_DIR="$SHIPPED_ONLY" NBX_AUTOTUNE=cached NBX_WEBGPU_SUBGROUP_MATRIX=1 node dist/bench/webgpu.js --check
gpustate "after bench1" >> "$W/state.txt"

# 3. a fresh sweep into an empty cache (to compare with / replace src/autotune/shipped/webgpu-nvidia-h200-vulkan.json)
step tune 25 env NBX_CACHE_DIR="$TUNED" NBX_AUTOTUNE=full node dist/bench/webgpu_tune.js
cp "$TUNED/autotune.json" "$W/webgpu-tuned.json" 2>/dev/null || echo "  no autotune.json produced" | tee -a "$W/summary.txt"

# 4. the WebGPU figures again on the fresh entries, default path (no subgroup-matrix opt-in), no peers
step bench2 20 env NBX_CACHE_DIR="$TUNED" NBX_AUTOTUNE=cached node dist/bench/webgpu.js --no-peers
gpustate "after bench2" >> "$W/state.txt"

echo "== total $(( $(date +%s) - T0 ))s" | tee -a "$W/summary.txt"
table() { # the final table of a bench log, else the rows it printed before it was cut short
  if grep -qE '^\|' "$1" 2>/dev/null; then grep -E '^\| (a\*x|a\+b|sum|GEMM|dependent)' "$1"; else grep -E '^row ' "$1" 2>/dev/null; fi
}
{
  cat "$W/probe.log"
  grep -E "GEMM subgroup-matrix path|launch configurations|FAIL|GEMM check:|float16 check:|^== " "$W/bench1.log"
  table "$W/bench1.log"
  table "$W/bench2.log" | sed 's/^/bench2 /'
  grep -E "done in" "$W/tune.log"
} 2>/dev/null | tee -a "$W/summary.txt"
