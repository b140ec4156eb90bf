#!/usr/bin/env bash
# Issue #20 on the H200, one call (at most ~150 s: parts bounded at 60 + 50 + 40 s, plus a build if dist/ is stale):
# the fused CUDA attention checked, then measured.
#   bash scripts/gpu-attn.sh          (repo root; logs in $OUT/attn/, summary.txt first; OUT defaults to /tmp/out)
#   NBX_ATTN_PARTS="check bench time stall" selects parts (default: check bench time, in that order)
# Every part runs in its own process under `timeout -k 5` (a hung kernel costs that part only), on one
# fresh kernel/tuning cache (NBX_CACHE_DIR) shared by the parts, with the Hopper kernel on
# (NBX_ATTENTION_WGMMA=1):
#   check      every prefill specialization compiled side by side, then every variant (bf16/f16, head dims
#              64/128/256, causal L=S/L<S/L>S, GQA, masks, fully masked rows, long K/V; K/V by TMA and by
#              cp.async) through each wgmma tile (persistent ones too) and the mma.sync kernel against the CPU
#              float32 reference; decode (GQA groups) through the lane and the tensor-core kernels
#              (scripts/attention-check.mjs)
#   bench      bench/cuda_attention.ts: nbx as tuned vs PyTorch's SDPA in the same process tree
#   time       each wgmma tile and the mma kernel forced on the bench's prefill shapes (TFLOP/s), the first
#              tile also with the other softmax forms (NBX_ATTENTION_SOFTMAX), with cp.async loads and, on the
#              D128 L4096 shapes, with loads or softmax left out (NBX_ATTENTION_ABLATE: where the time goes)
#   ttft       (optional) time to first token, `nbx bench decode` (dist/bench/decode.js) on the shape
#              NBX_ATTN_TTFT_SHAPE (default tinyllama), batch 1, prompts NBX_ATTN_TTFT_PROMPTS (default
#              "128 4096"), 8 new tokens, against the compiled gpt-fast peer (it compiles for 40-90 s): ~85 s a prompt
#   stall      (optional) B4 H32 L4096 D128 bf16, each wgmma tile, 21 launches; if it fails, again with
#              NBX_ATTENTION_WATCH=1 (every wait bounded: the kernel traps and prints the barrier it waited on)
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/attn"; mkdir -p "$L"
S="$L/summary.txt"; : > "$S"
PARTS=${NBX_ATTN_PARTS:-check bench time}
source "$(dirname "$0")/lib/step.sh"
. scripts/lib/dist.sh
if dist_stale src/backend/cuda/kernels/attention src/backend/cuda/kernels/attention_sm90 src/backend/cuda/runtime/driver src/ops/nn bench/cuda_attention; then st build 60 npx tsc -p tsconfig.json; fi
export NBX_CUDA_HOST_STAGING=0 NBX_ATTENTION_WGMMA=1 UV_THREADPOOL_SIZE=16
export NBX_CACHE_DIR; NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-attn-XXXXXX)
has() { case " $PARTS " in *" $1 "*) return 0;; *) return 1;; esac; }
has check && st check 60 node scripts/attention-check.mjs --part=check
has bench && st bench 50 node dist/bench/cuda_attention.js
if has stall; then
  st stall 20 node scripts/attention-check.mjs --part=stall
  if ! grep -q '^stall: none' "$L/stall.log"; then st stallwatch 15 env NBX_ATTENTION_WATCH=1 node scripts/attention-check.mjs --part=stall; fi
fi
has time && st time 40 node scripts/attention-check.mjs --part=time
if has ttft; then
  for P in ${NBX_ATTN_TTFT_PROMPTS:-128 4096}; do
    st "ttft_$P" 90 node dist/bench/decode.js --device cuda --shape "${NBX_ATTN_TTFT_SHAPE:-tinyllama}" --batch 1 --prompt "$P" --new-tokens 8 --warmup-tokens 8 --peers gpt-fast --peer-timeout 80 --json "$L/ttft_$P.json"
  done
fi
{
  [ -f "$L/check.log" ] && { echo "== check"; grep -E '^(FAIL|precompiled|check:|device:)' "$L/check.log"; grep -iE 'error' "$L/check.log" | head -5; }
  [ -f "$L/stall.log" ] && { echo "== stall"; grep -E '^stall' "$L/stall.log"; tail -3 "$L/stall.log" | grep -v '^stall'; }
  [ -f "$L/stallwatch.log" ] && { echo "== stall (watch build)"; grep -E 'stall|WATCH|rror' "$L/stallwatch.log" | head -12; }
  [ -f "$L/time.log" ] && { echo "== kernel timings (TFLOP/s)"; grep -E '^(time|host)|precompiled' "$L/time.log"; grep -iE 'error' "$L/time.log" | head -3; }
  for f in "$L"/ttft_*.log; do [ -f "$f" ] && { echo "== $(basename "$f" .log)"; grep -E '^\||TTFT|rror' "$f" | head -8; }; done
  [ -f "$L/bench.log" ] && { echo "== bench"; grep -E '^\|' "$L/bench.log"; grep -E 'first call|compiled or found|failed|FAILED' "$L/bench.log" | head -14; }
} | tee -a "$S"
