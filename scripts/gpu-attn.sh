#!/usr/bin/env bash
# Fused CUDA attention on the H200: test/cuda_attention.test.ts (fused vs CPU composed path, every tile
# configuration), the SDPA/softmax conformance cases on cuda, then bench/cuda_attention.ts against
# PyTorch SDPA with a fresh autotune cache (the sweep of every benchmarked shape bucket runs in the
# warm-up calls) whose result is copied to $OUT/attn/attention-autotune.json: its "cuda.attention" and
# "cuda.attention_decode" entries go into src/autotune/shipped/nvidia-h200-sm_90.json.
# Run from the repo root with .gpu/bootstrap.sh sourced and $OUT set; logs in $OUT/attn/ (summary.txt
# first). About 60-150 s.
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/attn"; mkdir -p "$L"
S="$L/summary.txt"; : > "$S"
source "$(dirname "$0")/lib/step.sh"
. scripts/lib/dist.sh
if dist_stale src/backend/cuda/kernels/attention src/ops/nn test/cuda_attention.test bench/cuda_attention; then st build 120 npx tsc -p tsconfig.json; fi
export NBX_CUDA_HOST_STAGING=0
# one fresh cache for the whole run: compiled kernels are shared by the steps, and autotune.json ends
# up holding exactly the sweeps of this run
TUNE=/tmp/nbx-attn-tune; rm -rf "$TUNE"; mkdir -p "$TUNE"
export NBX_CACHE_DIR="$TUNE" NBX_AUTOTUNE=full
st test 70 node --test dist/test/cuda_attention.test.js
st conf 15 node dist/src/cli/nbx.js conformance test/conformance --device cuda --filter 'attention|softmax'
st bench 60 node dist/bench/cuda_attention.js
cp "$TUNE/autotune.json" "$L/attention-autotune.json" 2>/dev/null || echo "no autotune.json written" | tee -a "$S"
{
  echo "== tests"; grep -E '^# (tests|pass|fail|skip)|^not ok|SKIP' "$L/test.log" | head -20
  grep -B2 -A12 '^not ok' "$L/test.log" | grep -E 'error|element|did not run|Error' | head -20
  echo "== conformance"; grep -E '^FAIL' "$L/conf.log" | head -20; grep -E "passed, .* failed" "$L/conf.log"
  echo "== bench"; cat "$L/bench.log" | grep -E '^\|' ; grep -iE 'error|failed' "$L/bench.log" | head -5
  echo "== tuned configs"; node -e '
    const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    for (const [dev, ks] of Object.entries(j.entries)) for (const [k, es] of Object.entries(ks)) if (k.startsWith("cuda.attention"))
      for (const [key, e] of Object.entries(es)) console.log(dev, k, key, JSON.stringify(e.config), e.timeMs?.toFixed(4), "ms of", (e.tried ?? []).length);
  ' "$L/attention-autotune.json" 2>&1 | head -40
} | tee -a "$S"
