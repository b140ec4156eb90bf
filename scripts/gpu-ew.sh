#!/usr/bin/env bash
# Elementwise kernels on the H200 (issue #7: contiguous and broadcast bandwidth vs PyTorch), in < 130 s.
# Run from the repo root after `source .gpu/bootstrap.sh` and `npx tsc`, with $OUT set; logs under $OUT/ew/.
#   1. sweep (<= 32 s; shipped entries ignored, so every key is measured afresh; launches.log: every launch, written before it is submitted): the benchmark's cuda.ew_flat / cuda.ew_bcast keys plus 2^20..2^26, fresh
#      NBX_CACHE_DIR, the cheap sweep a user's first run does; writes $OUT/ew/nvidia-h200-sm_90.json =
#      src/autotune/shipped/nvidia-h200-sm_90.json + the new entries (copy it there), variants.md
#      (every candidate's GB/s per key) and the raw autotune.json
#   2. bench (<= 33 s): node dist/bench/cuda.js --only ew (PyTorch in the same run), on the swept cache
#   3. correctness, concurrently (<= the time left): dist/test/cuda_ew.test.js, and the elementwise
#      conformance on cuda with NBX_CUDA_HOST_STAGING=0
# Every step runs under `timeout -k 3` (SIGKILL 3 s after SIGTERM), and a failed step does not stop the next.
# Comes back in $OUT/ew: summary.txt, variants.md, nvidia-h200-sm_90.json, logs.tgz (every log + autotune.json).
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/ew"; mkdir -p "$L"
export NBX_CACHE_DIR; NBX_CACHE_DIR=$(mktemp -d /tmp/nbx_ew_cache.XXXXXX)
export NBX_AUTOTUNE=full
: > "$L/summary.txt"
st() { # name seconds command...: runs under a hard limit, logs to $L/name.log, records rc and seconds
  local n=$1 to=$2; shift 2
  echo "+ [${SECONDS}s] $* (limit ${to}s)" | tee -a "$L/summary.txt"
  local t0; t0=$(date +%s%N)
  timeout -k 3 "$to" "$@" > "$L/$n.log" 2>&1
  local rc=$?
  echo "  $n: rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms$( ((rc == 124 || rc == 137)) && echo ' (TIMED OUT)')" | tee -a "$L/summary.txt"
}
EW='^(Tensor.masked_fill|Tensor.to|abs|add|addcdiv|addcmul|atan2|bitwise_and|bitwise_left_shift|bitwise_not|bitwise_or|bitwise_right_shift|bitwise_xor|ceil|clamp|clamp_min|copysign|cos|div|eq|erf|exp|exp2|expm1|floor|floor_divide|fmod|ge|gt|hypot|isfinite|isinf|isnan|isneginf|isposinf|le|lerp|log|log1p|logical_and|logical_not|logical_or|logical_xor|lt|maximum|minimum|mul|nan_to_num|ne|neg|nn.functional.celu|nn.functional.elu|nn.functional.gelu|nn.functional.hardsigmoid|nn.functional.hardswish|nn.functional.hardtanh|nn.functional.leaky_relu|nn.functional.logsigmoid|nn.functional.mish|nn.functional.relu|nn.functional.selu|nn.functional.silu|nn.functional.softplus|nn.functional.threshold|pow|reciprocal|remainder|round|rsqrt|sigmoid|sign|sin|sqrt|square|sub|tan|tanh|trunc|where|xlogy)/'

SECONDS=0
st sweep 32 env NBX_AUTOTUNE_SHIPPED=0 EW_SWEEP_BUDGET_S=25 node scripts/ew-sweep.mjs "$L"
st bench 30 node dist/bench/cuda.js --only ew
# correctness: nothing is timed, so both at once; they share what is left of ~84 s
left=$(( 125 - 3 - SECONDS )); (( left < 15 )) && left=15
st tests "$left" env NBX_EW_CONFIGS=default node --test dist/test/cuda_ew.test.js &
st conf "$left" env NBX_CUDA_HOST_STAGING=0 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda --filter "$EW" &
wait
echo "total ${SECONDS}s" | tee -a "$L/summary.txt"

echo "== summary"; cat "$L/summary.txt"
echo "== sweep"; grep -vE "^\|" "$L/sweep.log" | tail -n 30; [ -f "$L/variants.md" ] && cat "$L/variants.md"
echo "== last launches of the sweep (a stall: the last line is the kernel that never finished)"; tail -n 4 "$L/launches.log" | cut -c1-400
echo "== bench"; grep -E "^\|" "$L/bench.log" || tail -n 20 "$L/bench.log"
echo "== tests"; grep -E "^# (tests|pass|fail|skip)|^not ok" "$L/tests.log"
echo "== conformance"; tail -n 3 "$L/conf.log"
# at most 8 files come back: the logs and the raw cache travel as one archive
(cd "$L" && tar czf logs.tgz ./*.log autotune.json 2>/dev/null && rm -f ./*.log autotune.json)
ls -la "$L"
rm -rf "$NBX_CACHE_DIR"
