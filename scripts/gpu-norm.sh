#!/usr/bin/env bash
# CUDA softmax / layer_norm / rms_norm (issue #7) on the H200: test/cuda_norm.test.ts (CUDA vs CPU
# across dtypes, row lengths 1..70000, vectors, masks, affine kinds), the softmax/norm conformance
# cases on cuda, then bench/cuda_norm.ts against PyTorch with a fresh autotune cache (the warm-up call
# of each benchmarked bucket sweeps the thread counts; the picks are copied to $OUT/norm/).
# Run from the repo root with .gpu/bootstrap.sh sourced and $OUT set; logs in $OUT/norm/ (summary.txt
# first, 5 files). About 40-80 s; every step under timeout -k 5, the whole run ≤ 90 s.
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/norm"; mkdir -p "$L"
S="$L/summary.txt"; : > "$S"
T0=$(date +%s)
CONF=test/conformance; [ -d .gpu/conformance ] && CONF=.gpu/conformance
# st NAME TIMEOUT CMD...: echo what runs, keep going after a failure, record rc and seconds; the
# timeout shrinks to what is left of 88 s
st() {
  local n=$1 to=$2; shift 2
  local left=$(( 88 - ($(date +%s) - T0) ))
  if [ "$left" -le 3 ]; then echo "$n SKIPPED (time budget)" | tee -a "$S"; return; fi
  [ "$to" -gt "$left" ] && to=$left
  echo "+ $*" | tee -a "$S"
  local t=$(date +%s.%N)
  timeout -k 5 "$to" "$@" > "$L/$n.log" 2>&1
  local rc=$?
  printf '%s rc=%d %.1fs\n' "$n" "$rc" "$(echo "$(date +%s.%N) - $t" | bc)" | tee -a "$S"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader >> "$S" 2>&1
. scripts/lib/dist.sh
if dist_stale src/backend/cuda/kernels/nn src/backend/cuda/tuning/spaces src/ops/nn test/cuda_norm.test bench/cuda_norm; then st build 40 npx tsc -p tsconfig.json; fi
export NBX_CUDA_HOST_STAGING=0
TUNE=/tmp/nbx-norm-tune; rm -rf "$TUNE"; mkdir -p "$TUNE"
export NBX_CACHE_DIR="$TUNE" NBX_AUTOTUNE=full
st test 35 node --test dist/test/cuda_norm.test.js
st conf 15 node dist/src/cli/nbx.js conformance "$CONF" --device cuda --filter 'softmax|norm'
st bench 35 node dist/bench/cuda_norm.js
cp "$TUNE/autotune.json" "$L/norm-autotune.json" 2>/dev/null || echo "no autotune.json written" | tee -a "$S"
{
  echo "== tests"; grep -E '^# (tests|pass|fail|skip)|^not ok|SKIP' "$L/test.log" | head -20
  grep -A14 '^not ok' "$L/test.log" | grep -E 'error|element|Error|did not' | head -20
  echo "== conformance"; grep -E '^FAIL' "$L/conf.log" | head -20; grep -E "passed, .* failed|passed" "$L/conf.log" | tail -3
  echo "== bench"; grep -E '^\|' "$L/bench.log" | tail -12; grep -iE 'error|failed' "$L/bench.log" | head -5
  echo "== tuned configs"; node -e '
    const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    for (const [dev, ks] of Object.entries(j.entries)) for (const [k, es] of Object.entries(ks)) if (/softmax|row_norm/.test(k))
      for (const [key, e] of Object.entries(es)) console.log(k, key, JSON.stringify(e.config), e.timeMs?.toFixed(4), "ms;", (e.tried ?? []).map((t) => `${t.config.threads}:${t.timeMs.toFixed(4)}`).join(" "));
  ' "$L/norm-autotune.json" 2>&1 | head -40
  echo "total $(( $(date +%s) - T0 ))s"
} | tee -a "$S"
