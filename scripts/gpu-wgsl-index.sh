#!/usr/bin/env bash
# WebGPU native indexing / resampling / loss / integer kernels on the H200's Vulkan adapter, host staging
# refused (NBX_WEBGPU_HOST_STAGING=0): test/webgpu_indexing.test.ts, then the conformance cases of those
# ops, then the whole webgpu conformance suite (regressions elsewhere). Run from the repo root with
# .gpu/bootstrap.sh sourced and $OUT set; logs in $OUT/wgsl-index/ (summary.txt first). About 30-60 s.
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/wgsl-index"; mkdir -p "$L"
S="$L/summary.txt"; : > "$S"
export NBX_WEBGPU_HOST_STAGING=0 NBX_WEBGPU_BACKEND=vulkan
FILTER='gather|scatter|index|embedding|take|masked|nonzero|interpolate|grid_sample|nll_loss|cross_entropy|local_response|conv|pool|matmul|one_hot|repeat_interleave'
source "$(dirname "$0")/lib/step.sh"
if [ ! -f dist/src/cli/nbx.js ] || [ ! -f dist/test/webgpu_indexing.test.js ]; then st build 120 npx tsc -p tsconfig.json; fi
st info 20 node dist/src/cli/nbx.js info
st test 30 node --test dist/test/webgpu_indexing.test.js
st conf-ops 30 node dist/src/cli/nbx.js conformance test/conformance --device webgpu --filter "$FILTER"
st conf-all 45 node dist/src/cli/nbx.js conformance test/conformance --device webgpu
{
  echo "== adapter"; grep -iE 'webgpu|adapter|vulkan' "$L/info.log" | head -5
  echo "== tests"; grep -E '^# (tests|pass|fail|skip)|^not ok|NOT RUN|^# webgpu' "$L/test.log"
  echo "== conformance (ops)"; grep -E '^FAIL' "$L/conf-ops.log" | head -20; grep -E "passed, .* failed" "$L/conf-ops.log"
  echo "== conformance (all)"; grep -E '^FAIL' "$L/conf-all.log" | head -20; grep -E "passed, .* failed" "$L/conf-all.log"
  echo "== skips in these ops by reason"; grep '^SKIP' "$L/conf-ops.log" | sed 's/.*: //' | sort | uniq -c | sort -rn | head
} | tee -a "$S"
