#!/usr/bin/env bash
# Elementwise kernels on the H200 (issue #7: contiguous and broadcast bandwidth vs PyTorch).
# Run from the repo root after `source .gpu/bootstrap.sh`, with $OUT set; logs under $OUT/ew/.
#   1. sweep: autotune entries for cuda.ew_flat / cuda.ew_bcast (fresh NBX_CACHE_DIR) and GB/s of
#      every launch configuration at the benchmark's shapes (variants.md); writes
#      $OUT/ew/nvidia-h200-sm_90.json = src/autotune/shipped/nvidia-h200-sm_90.json + the new entries
#      (copy it there), and the raw autotune.json
#   2. bench: node dist/bench/cuda.js --only ew (PyTorch in the same run), with the swept cache
#   3. tests: dist/test/cuda_ew.test.js (and dist/test/cuda.test.js)
#   4. conformance of the elementwise families on cuda, no host staging
#   5. bench again (a second sample) when time is left (the whole script stays under ~120 s)
# Comes back in $OUT/ew: summary.txt, variants.md, nvidia-h200-sm_90.json, logs.tgz (every log + autotune.json).
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/ew"; mkdir -p "$L"
export NBX_CACHE_DIR; NBX_CACHE_DIR=$(mktemp -d /tmp/nbx_ew_cache.XXXXXX)
export NBX_AUTOTUNE=full
: > "$L/summary.txt"
st() { # name timeout command...: runs, logs to $L/name.log, records rc and seconds
  local n=$1 to=$2; shift 2
  echo "+ $*" | tee -a "$L/summary.txt"
  local t0; t0=$(date +%s%N)
  timeout "$to" "$@" > "$L/$n.log" 2>&1
  local rc=$?
  echo "  $n: rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$L/summary.txt"
}
EW='^(Tensor.masked_fill|Tensor.to|abs|add|addcdiv|addcmul|atan2|bitwise_and|bitwise_left_shift|bitwise_not|bitwise_or|bitwise_right_shift|bitwise_xor|ceil|clamp|clamp_min|copysign|cos|div|eq|erf|exp|exp2|expm1|floor|floor_divide|fmod|ge|gt|hypot|isfinite|isinf|isnan|isneginf|isposinf|le|lerp|log|log1p|logical_and|logical_not|logical_or|logical_xor|lt|maximum|minimum|mul|nan_to_num|ne|neg|nn.functional.celu|nn.functional.elu|nn.functional.gelu|nn.functional.hardsigmoid|nn.functional.hardswish|nn.functional.hardtanh|nn.functional.leaky_relu|nn.functional.logsigmoid|nn.functional.mish|nn.functional.relu|nn.functional.selu|nn.functional.silu|nn.functional.softplus|nn.functional.threshold|pow|reciprocal|remainder|round|rsqrt|sigmoid|sign|sin|sqrt|square|sub|tan|tanh|trunc|where|xlogy)/'

SECONDS=0
st sweep 35 node scripts/ew-sweep.mjs "$L"
st bench1 25 node dist/bench/cuda.js --only ew
st tests 40 node --test dist/test/cuda_ew.test.js
st conf $(( SECONDS < 80 ? 110 - SECONDS : 30 )) env NBX_CUDA_HOST_STAGING=0 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda --filter "$EW"
if (( SECONDS < 85 )); then st bench2 $(( 116 - SECONDS )) node dist/bench/cuda.js --only ew; else echo "bench2 skipped (${SECONDS}s used)" | tee -a "$L/summary.txt"; fi

echo "== summary"; cat "$L/summary.txt"
echo "== sweep (tail)"; tail -n 30 "$L/sweep.log"
echo "== tests"; grep -E "^# (tests|pass|fail|skip)|^not ok" "$L/tests.log"
echo "== conformance"; tail -n 3 "$L/conf.log"
for b in bench1 bench2; do [ -f "$L/$b.log" ] && { echo "== $b"; grep -E "^\|" "$L/$b.log"; }; done
# at most 8 files come back: the logs and the raw cache travel as one archive
(cd "$L" && tar czf logs.tgz ./*.log autotune.json 2>/dev/null && rm -f ./*.log autotune.json)
ls -la "$L"
rm -rf "$NBX_CACHE_DIR"
