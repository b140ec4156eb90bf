#!/usr/bin/env bash
# Launch batching checks on the GPU machine (cwd = repo root, .gpu/bootstrap.sh sourced, $OUT set); ≤ 90 s.
# Logs under $OUT/batch/ (4 files):
#   summary.txt  each step's command, exit code and seconds; the key lines of every log
#   test.log     dist/test/cuda_batch.test.js (batched vs CPU / NBX_CUDA_BATCH=0, flush safety)
#   conf.log     elementwise conformance on cuda: batching on, NBX_CUDA_BATCH=0, and forced batching
#                (every kind joins the batch module after one run)
#   host.log     host cost of a small add: scripts/host-profile.mjs (fresh process), bench/cuda.js --only
#                host (with PyTorch in the same run), scripts/host-context.mjs (after big ops / GEMMs):
#                each with batching on and off
set -u
OUT=${OUT:-/tmp/out}; B="$OUT/batch"; mkdir -p "$B"
S="$B/summary.txt"; : > "$S"; : > "$B/conf.log"; : > "$B/host.log"
T0=$(date +%s)
CONF=test/conformance; [ -d .gpu/conformance ] && CONF=.gpu/conformance
EW='^(Tensor\.masked_fill|Tensor\.to|abs|add|addcdiv|addcmul|atan2|bitwise_and|bitwise_left_shift|bitwise_not|bitwise_or|bitwise_right_shift|bitwise_xor|ceil|clamp|clamp_min|copysign|cos|div|eq|erf|exp|exp2|expm1|floor|floor_divide|fmod|ge|gt|hypot|isfinite|isinf|isnan|isneginf|isposinf|le|lerp|log|log1p|logical_and|logical_not|logical_or|logical_xor|lt|maximum|minimum|mul|nan_to_num|ne|neg|nn\.functional\.celu|nn\.functional\.elu|nn\.functional\.gelu|nn\.functional\.hardsigmoid|nn\.functional\.hardswish|nn\.functional\.hardtanh|nn\.functional\.leaky_relu|nn\.functional\.logsigmoid|nn\.functional\.mish|nn\.functional\.relu|nn\.functional\.selu|nn\.functional\.silu|nn\.functional\.softplus|nn\.functional\.threshold|pow|reciprocal|remainder|round|rsqrt|sigmoid|sign|sin|sqrt|square|sub|tan|tanh|trunc|where|xlogy)/'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader >> "$S" 2>&1
# step NAME LOG TIMEOUT CMD...: appends to LOG, skipped once 85 s have gone by
step() {
  local n=$1 log=$2 to=$3; shift 3
  local left=$(( 85 - ($(date +%s) - T0) ))
  if [ "$left" -le 3 ]; then echo "$n SKIPPED (time budget)" >> "$S"; return; fi
  [ "$to" -gt "$left" ] && to=$left
  echo "+ [$n] $*" >> "$S"; echo "=== [$n] $*" >> "$log"
  local t=$(date +%s); timeout "$to" "$@" >> "$log" 2>&1; local rc=$?
  echo "[$n] rc=$rc $(( $(date +%s) - t ))s" >> "$S"
}
step test "$B/test.log" 35 node --test dist/test/cuda_batch.test.js
step profile-on "$B/host.log" 8 node scripts/host-profile.mjs cuda
step profile-off "$B/host.log" 8 env NBX_CUDA_BATCH=0 node scripts/host-profile.mjs cuda
step bench-on "$B/host.log" 15 node dist/bench/cuda.js --only host
step bench-off "$B/host.log" 15 env NBX_CUDA_BATCH=0 node dist/bench/cuda.js --only host
step conf-on "$B/conf.log" 20 node dist/src/cli/nbx.js conformance "$CONF" --device cuda --filter "$EW"
step conf-off "$B/conf.log" 15 env NBX_CUDA_BATCH=0 node dist/src/cli/nbx.js conformance "$CONF" --device cuda --filter "$EW"
step context-on "$B/host.log" 12 node scripts/host-context.mjs
step context-off "$B/host.log" 12 env NBX_CUDA_BATCH=0 node scripts/host-context.mjs
step conf-forced "$B/conf.log" 25 env NBX_CUDA_BATCH_MIN_USES=1 NBX_CUDA_BATCH_REBUILD_AFTER=48 node dist/src/cli/nbx.js conformance "$CONF" --device cuda --filter "$EW"
{
  echo "--- test"; grep -E '^# (pass|fail)|^not ok|error:' "$B/test.log" | head -20
  echo "--- conformance (on / off / forced)"; grep -E 'passed, |FAIL|Error' "$B/conf.log" | head -30
  echo "--- host cost"; grep -E '^=== |us/op|^\| host|launch batching|rounds' "$B/host.log"
  echo "total $(( $(date +%s) - T0 ))s"
} >> "$S"
cat "$S"
