#!/usr/bin/env bash
# Launch batching checks on the GPU machine (cwd = repo root, .gpu/bootstrap.sh sourced, $OUT set); fits 100 s
# (steps that would not fit are skipped and say so; each runs under timeout -k 5).
# Logs under $OUT/batch/ (4 files):
#   summary.txt  each step's command, exit code and seconds; the key lines of every log
#   test.log     dist/test/cuda_batch.test.js (batched vs CPU / NBX_CUDA_BATCH=0, flush safety)
#   conf.log     conformance on cuda: elementwise filter with batching on and NBX_CUDA_BATCH=0, and the
#                whole public suite with batching on; NBX_CUDA_BATCH_STATS=1 prints rebuilds, kinds
#                compiled and module compile ms at the end of each batched run
#   host.log     host cost of a small add: scripts/host-profile.mjs (fresh process) and bench/cuda.js
#                --only host (with PyTorch in the same run), batching on and off; host-context.mjs if time is left
set -u
OUT=${OUT:-/tmp/out}; B="$OUT/batch"; mkdir -p "$B"
S="$B/summary.txt"; : > "$S"; : > "$B/conf.log"; : > "$B/host.log"; : > "$B/test.log"
T0=$(date +%s); BUDGET=${BATCH_BUDGET_S:-97}
CONF=test/conformance; [ -d .gpu/conformance ] && CONF=.gpu/conformance
EW='^(Tensor\.masked_fill|Tensor\.to|abs|add|addcdiv|addcmul|atan2|bitwise_and|bitwise_left_shift|bitwise_not|bitwise_or|bitwise_right_shift|bitwise_xor|ceil|clamp|clamp_min|copysign|cos|div|eq|erf|exp|exp2|expm1|floor|floor_divide|fmod|ge|gt|hypot|isfinite|isinf|isnan|isneginf|isposinf|le|lerp|log|log1p|logical_and|logical_not|logical_or|logical_xor|lt|maximum|minimum|mul|nan_to_num|ne|neg|nn\.functional\.celu|nn\.functional\.elu|nn\.functional\.gelu|nn\.functional\.hardsigmoid|nn\.functional\.hardswish|nn\.functional\.hardtanh|nn\.functional\.leaky_relu|nn\.functional\.logsigmoid|nn\.functional\.mish|nn\.functional\.relu|nn\.functional\.selu|nn\.functional\.silu|nn\.functional\.softplus|nn\.functional\.threshold|pow|reciprocal|remainder|round|rsqrt|sigmoid|sign|sin|sqrt|square|sub|tan|tanh|trunc|where|xlogy)/'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader >> "$S" 2>&1
# step NAME LOG TIMEOUT CMD...: appends to LOG; shortened to the time left, skipped under 4 s
step() {
  local n=$1 log=$2 to=$3; shift 3
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  if [ "$left" -lt 4 ]; then echo "[$n] SKIPPED (time budget)" >> "$S"; return; fi
  [ "$to" -gt "$left" ] && to=$left
  echo "+ [$n] $* (timeout ${to}s)" >> "$S"; echo "=== [$n] $*" >> "$log"
  local t=$(date +%s); timeout -k 5 "$to" "$@" >> "$log" 2>&1; local rc=$?
  echo "[$n] rc=$rc $(( $(date +%s) - t ))s$([ $rc -eq 124 ] && echo ' TIMEOUT')" >> "$S"
}
export NBX_CUDA_BATCH_STATS=1
step test "$B/test.log" 25 node --test dist/test/cuda_batch.test.js dist/test/cuda_batch_policy.test.js
step conf-ew-on "$B/conf.log" 20 node dist/src/cli/nbx.js conformance "$CONF" --device cuda --filter "$EW"
step profile-on "$B/host.log" 6 node scripts/host-profile.mjs cuda
step profile-off "$B/host.log" 6 env NBX_CUDA_BATCH=0 node scripts/host-profile.mjs cuda
step bench-on "$B/host.log" 12 node dist/bench/cuda.js --only host
step bench-off "$B/host.log" 12 env NBX_CUDA_BATCH=0 node dist/bench/cuda.js --only host
step conf-all-on "$B/conf.log" 45 node dist/src/cli/nbx.js conformance "$CONF" --device cuda
step conf-ew-off "$B/conf.log" 20 env NBX_CUDA_BATCH=0 node dist/src/cli/nbx.js conformance "$CONF" --device cuda --filter "$EW"
step context-on "$B/host.log" 12 node scripts/host-context.mjs
{
  echo "--- test"; grep -E '^# (pass|fail)|^not ok|error:' "$B/test.log" | head -20
  echo "--- conformance (ew on / all on / ew off)"; grep -E '^=== |passed, |nbx launch batch' "$B/conf.log" | cut -c1-400
  echo "--- first failures"; grep -E '^FAIL|Error' "$B/conf.log" | cut -c1-300 | head -15
  echo "--- host cost"; grep -E '^=== |us/op|^\| host|launch batching|rounds|nbx launch batch' "$B/host.log"
  echo "total $(( $(date +%s) - T0 ))s"
} >> "$S"
cat "$S"
