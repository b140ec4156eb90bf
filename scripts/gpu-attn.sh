#!/usr/bin/env bash
# Issue #20 on the H200, one call (about 90-150 s: parts bounded at 50 + 20 (+ 15 if the stall part fails) + 20 + 50 s): the fused CUDA attention checked, then measured.
#   bash scripts/gpu-attn.sh          (repo root; logs in $OUT/attn/, summary.txt first; OUT defaults to /tmp/out)
# Every part runs in its own process under `timeout -k 5` (a hung kernel costs that part only), on one
# fresh kernel/tuning cache (NBX_CACHE_DIR) shared by the parts, with the Hopper kernel on
# (NBX_ATTENTION_WGMMA=1):
#   check      every prefill specialization compiled side by side, then every variant (bf16/f16, head dims
#              64/128/256, causal L=S/L<S/L>S, GQA, masks, fully masked rows, long K/V) through each wgmma tile
#              and the mma.sync kernel against the CPU float32 reference (scripts/attention-check.mjs)
#   stall      B4 H32 L4096 D128 bf16 non-causal and causal, each wgmma tile, 21 launches (the shape that
#              stalled the first Hopper kernel); if it fails, again with NBX_ATTENTION_WATCH=1 (every wait
#              bounded: the kernel traps and prints the barrier it waited on)
#   time       each wgmma tile and the mma kernel forced on the bench's prefill shapes (TFLOP/s)
#   bench      bench/cuda_attention.ts: nbx as tuned vs PyTorch's SDPA in the same process tree
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/attn"; mkdir -p "$L"
S="$L/summary.txt"; : > "$S"
source "$(dirname "$0")/lib/step.sh"
. scripts/lib/dist.sh
if dist_stale src/backend/cuda/kernels/attention src/backend/cuda/kernels/attention_sm90 src/ops/nn bench/cuda_attention; then st build 60 npx tsc -p tsconfig.json; fi
export NBX_CUDA_HOST_STAGING=0 NBX_ATTENTION_WGMMA=1 UV_THREADPOOL_SIZE=16
export NBX_CACHE_DIR; NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-attn-XXXXXX)
st check 50 node scripts/attention-check.mjs --part=check
st stall 20 node scripts/attention-check.mjs --part=stall
if ! grep -q '^stall: none' "$L/stall.log"; then st stallwatch 15 env NBX_ATTENTION_WATCH=1 node scripts/attention-check.mjs --part=stall; fi
st time 20 node scripts/attention-check.mjs --part=time
st bench 50 node dist/bench/cuda_attention.js
{
  echo "== check"; grep -E '^(FAIL|precompiled|check:|device:)' "$L/check.log"; grep -iE 'error' "$L/check.log" | head -5
  echo "== stall"; grep -E '^stall' "$L/stall.log"; tail -3 "$L/stall.log" | grep -v '^stall'
  [ -f "$L/stallwatch.log" ] && { echo "== stall (watch build)"; grep -E 'stall|WATCH|rror' "$L/stallwatch.log" | head -12; }
  echo "== kernel timings (TFLOP/s)"; grep -E '^time|precompiled' "$L/time.log"; grep -iE 'error' "$L/time.log" | head -3
  echo "== bench"; grep -E '^\|' "$L/bench.log"; grep -E 'first call|failed|FAILED' "$L/bench.log" | head -14
} | tee -a "$S"
