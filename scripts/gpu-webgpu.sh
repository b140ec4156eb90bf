#!/usr/bin/env bash
# WebGPU on the H200 (issue #8): adapter probe, autotune sweep (shipped entries), GEMM correctness
# against the CPU, and bench/webgpu.ts twice (the first next to the CUDA backend and PyTorch).
# Run from the repo root with .gpu/bootstrap.sh sourced and $OUT set; logs in $OUT/webgpu/ (7 files);
# about 150 s. Every step is echoed, timed and allowed to fail without stopping the rest.
set -u
OUT=${OUT:-/tmp/out}; W="$OUT/webgpu"; mkdir -p "$W"
T0=$(date +%s)
export NBX_CACHE_DIR=/tmp/nbx-webgpu-tune; rm -rf "$NBX_CACHE_DIR"; mkdir -p "$NBX_CACHE_DIR"
step() { # step NAME TIMEOUT CMD...: runs CMD into $W/NAME.log, records rc and seconds
  local name=$1 to=$2; shift 2; local t=$(date +%s)
  echo "+ [$name, ${to}s] $*" | tee -a "$W/summary.txt"
  timeout "$to" "$@" > "$W/$name.log" 2>&1
  echo "  $name rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)" | tee -a "$W/summary.txt"
}
gpustate() { # clocks, power state and other processes: a slow run shows here
  echo "== $1 $(date -u +%T)"
  nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,memory.used --format=csv 2>&1
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>&1
  nproc; uptime
}
gpustate before > "$W/state.txt"

# 1. what the adapter offers with each set of Dawn toggles (features, subgroup sizes, subgroup-matrix configs)
step probe 20 node -e '
const { create } = require("webgpu");
(async () => {
  for (const t of [[], ["enable-dawn-features=vulkan_enable_f16_on_nvidia"], ["enable-dawn-features=vulkan_enable_f16_on_nvidia,allow_unsafe_apis"]]) {
    const a = await create(t).requestAdapter({ powerPreference: "high-performance" });
    if (!a) { console.log(JSON.stringify(t), "no adapter"); continue; }
    const i = a.info;
    console.log("toggles", JSON.stringify(t));
    console.log("  info", JSON.stringify({ vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description, subgroupMinSize: i.subgroupMinSize, subgroupMaxSize: i.subgroupMaxSize }));
    console.log("  features", [...a.features].sort().join(" "));
    console.log("  subgroupMatrixConfigs", JSON.stringify([...(i.subgroupMatrixConfigs ?? [])].map((c) => ({ componentType: c.componentType, resultComponentType: c.resultComponentType, M: c.M, N: c.N, K: c.K }))));
    const l = a.limits; console.log("  limits", JSON.stringify({ maxBufferSize: l.maxBufferSize, maxStorageBufferBindingSize: l.maxStorageBufferBindingSize, maxComputeWorkgroupsPerDimension: l.maxComputeWorkgroupsPerDimension, maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup, maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize }));
  }
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });'

# 2. autotune sweep into an empty cache: the entries to ship (src/autotune/shipped/webgpu-nvidia-h200-vulkan.json)
step tune 45 env NBX_AUTOTUNE=full NBX_WEBGPU_SUBGROUP_MATRIX=1 node dist/bench/webgpu_tune.js
cp "$NBX_CACHE_DIR/autotune.json" "$W/webgpu-nvidia-h200-vulkan.json" 2>/dev/null || echo "  no autotune.json produced" | tee -a "$W/summary.txt"

# 3. run 1: GEMM correctness (subgroup-matrix path on, several shapes incl. non-multiples of the tile), then
#    the benchmarks next to the CUDA backend and PyTorch (uses the tuned entries from step 2)
step bench1 65 env NBX_AUTOTUNE=cached NBX_WEBGPU_SUBGROUP_MATRIX=1 node dist/bench/webgpu.js --check
gpustate "after run 1" >> "$W/state.txt"
# 4. run 2: the same WebGPU figures again (a repeat of the 'unexplained slow run' check), without peers
step bench2 35 env NBX_AUTOTUNE=cached NBX_WEBGPU_SUBGROUP_MATRIX=1 node dist/bench/webgpu.js --no-peers
gpustate "after run 2" >> "$W/state.txt"

echo "== total $(( $(date +%s) - T0 ))s" | tee -a "$W/summary.txt"
grep -E "check GEMM|GEMM check|subgroup-matrix path" "$W/bench1.log" | tee -a "$W/summary.txt"
grep -E "^\|" "$W/bench1.log" | tee -a "$W/summary.txt"
grep -E "^\| (a\*x|GEMM|dependent)" "$W/bench2.log" | sed 's/^/run2 /' | tee -a "$W/summary.txt"
echo "shipped autotune entries: $W/webgpu-nvidia-h200-vulkan.json -> src/autotune/shipped/webgpu-nvidia-h200-vulkan.json" | tee -a "$W/summary.txt"
