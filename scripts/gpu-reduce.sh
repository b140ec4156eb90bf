#!/usr/bin/env bash
# CUDA reductions (issue #7) on the H200: every reduction module compiled ahead in parallel (NVRTC
# check of each specialization; fills the kernel cache the later steps use), bench/cuda_reduce.ts (sum
# rows/cols/all in f32, bf16, f16 at 512 MiB and 1 GiB against PyTorch, CUDA events on both sides)
# with an empty autotune cache: its warm-up calls sweep the launch configurations, and the picks go to
# $OUT/reduce/reduce-autotune.json; then test/cuda_reduce.test.ts (CUDA vs CPU: every kind, dtype, dim
# and kernel path under several forced launch configurations) and the reduction conformance cases.
# Run from the repo root with .gpu/bootstrap.sh sourced and $OUT set; logs in $OUT/reduce/ (summary.txt
# first). Every step under a hard limit; the whole run ≤ 118 s.
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/reduce"; mkdir -p "$L"
S="$L/summary.txt"; : > "$S"
T0=$(date +%s)
. scripts/lib/step.sh
CONF=test/conformance; [ -d .gpu/conformance ] && CONF=.gpu/conformance; [ -d ../shared/conformance/public ] && [ ! -d "$CONF" ] && CONF=../shared/conformance/public
# stb NAME TIMEOUT CMD...: st with the timeout cut to what is left of 112 s (skipped when < 4 s are left)
stb() {
  local n=$1 to=$2; shift 2
  local left=$(( 112 - ($(date +%s) - T0) ))
  if [ "$left" -lt 4 ]; then echo "$n SKIPPED (time budget)" | tee -a "$S"; return; fi
  [ "$to" -gt "$left" ] && to=$left
  st "$n" "$to" "$@"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader >> "$S" 2>&1
. scripts/lib/dist.sh
if dist_stale src/backend/cuda/kernels/reduce src/backend/cuda/kernels/index src/backend/cuda/tuning/spaces test/cuda_reduce.test bench/cuda_reduce; then stb build 40 npx tsc -p tsconfig.json; fi
export NBX_CUDA_HOST_STAGING=0
C=/tmp/nbx-reduce-cache; rm -rf "$C"; mkdir -p "$C"
export NBX_CACHE_DIR="$C"
stb warm 25 env UV_THREADPOOL_SIZE="$(nproc)" node scripts/warm-reduce.mjs --budget 20
# the bench first, on an empty autotune cache (its warm-up calls sweep); its picks are copied before the tests tune anything
rm -f "$C/autotune.json"
stb bench 40 env NBX_AUTOTUNE=full node dist/bench/cuda_reduce.js
cp "$C/autotune.json" "$L/reduce-autotune.json" 2>/dev/null || echo "no autotune.json written" | tee -a "$S"
stb test 45 node --test dist/test/cuda_reduce.test.js
stb conf 20 node dist/src/cli/nbx.js conformance "$CONF" --device cuda \
  --filter '^(sum|nansum|mean|prod|amax|amin|max|min|argmax|argmin|var|std|logsumexp|norm|linalg.vector_norm|any|all|count_nonzero)'
{
  echo "== warm"; grep -E 'reduce modules|FAILED' "$L/warm.log" | head -12; grep -q 'reduce modules' "$L/warm.log" || grep -m2 -E 'Error' "$L/warm.log" | cut -c1-200
  echo "== tests"; grep -E '^# (tests|pass|fail|skip)|^not ok|SKIP|launches per path' "$L/test.log" | head -20
  grep -A14 '^not ok' "$L/test.log" | grep -E 'error|element|Error|did not' | head -20
  echo "== conformance"; grep -E '^FAIL' "$L/conf.log" | head -20; grep -E 'passed' "$L/conf.log" | tail -3
  echo "== bench"; grep -E '^\|' "$L/bench.log" | tail -20; grep -iE 'error|failed' "$L/bench.log" | head -5
  echo "== tuned configs"; [ -f "$L/reduce-autotune.json" ] && node -e '
    const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    for (const [dev, ks] of Object.entries(j.entries)) for (const [k, es] of Object.entries(ks)) if (/reduce/.test(k))
      for (const [key, e] of Object.entries(es)) console.log(k, key, JSON.stringify(e.config), e.timeMs?.toFixed(4), "ms;", (e.tried ?? []).map((t) => `${t.config.threads}/${t.config.unroll}:${t.timeMs.toFixed(4)}`).join(" "));
  ' "$L/reduce-autotune.json" 2>&1 | head -60
  echo "total $(( $(date +%s) - T0 ))s"
} | tee -a "$S"
