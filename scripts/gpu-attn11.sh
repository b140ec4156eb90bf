#!/usr/bin/env bash
# Issue #20 (attention), eleventh session, device run attn-11 (code at the commit in READY). Run it alone on the GPU, from
# the repo root after `source .gpu/bootstrap.sh`, compiled dist/ present; step limits add up to 240 s (attn-9: check ~15 s,
# bench ~31 s, timefresh ~25 s); logs in $OUT/attn11 with summary.txt.
#   check:   every tile against the CPU reference, now with the split tiles (k: the last round's items split over their
#            keys; forced on small problems: tail / parts) and 8 cases for them (80 cases). Existing tiles render byte
#            for byte as before (384 renders compared).
#   bench:   tuned vs PyTorch SDPA (fresh cache); the non-causal row now has the split tiles among its candidates
#            (B4 H32 L4096: 4,096 items on 132 SMs, 31.03 rounds of work in 32; the split spreads the last round's 4 items
#            over 32 blocks, 8 parts each).
#   tuned:   the bench's sweeps from the tuning cache (the split tiles' times against the same tiles unsplit).
#   time128: D128 bf16 tiles forced (0.2 s idle before each) on causal L4096, non-causal, causal L1024, each also with
#            setmaxnreg 24/240 (r240, FlashAttention-3's split; ptxas: a different allocation, 0 spills); then the decode
#            forms forced on the bench's decode shapes.
#   time64:  D64 causal tiles forced, also with r240 and with the poly softmax (a quarter of the exps on the FMA pipes).
ATTN_DIR=attn11 source scripts/lib/attn-run.sh
st check 50 node scripts/attention-check.mjs --part=check
st bench 55 node dist/bench/cuda_attention.js
st tuned 8 node scripts/attention-check.mjs --part=tuned
st time128 80 env NBX_ATTN_PAUSE_MS=200 NBX_ATTN_VARIANTS=r240 NBX_ATTN_VARIANTS_ALL=1 node scripts/attention-check.mjs --part=time '--filter=^(causal B4 H32 L4096 D128 bf16|B4 H32 L4096 D128 bf16|causal B8 H16 L1024 D128 bf16)$'
st time64 45 env NBX_ATTN_PAUSE_MS=200 NBX_ATTN_DECODE=0 NBX_ATTN_VARIANTS=r240,poly NBX_ATTN_VARIANTS_ALL=1 node scripts/attention-check.mjs --part=time '--filter=^causal B4 H32 L4096 D64 bf16$'
{
  echo "== check"; grep -E '^(FAIL|precompiled|check:|device:)' "$L/check.log"; grep -E 'split' "$L/check.log" | head -8 | cut -c1-400; grep -iE 'error' "$L/check.log" | head -5
  echo "== bench"; grep -E '^\|' "$L/bench.log" | tail -13; grep -E 'compiled or found|autotuning|failed|FAILED|rror' "$L/bench.log" | head -8
  echo "== tuned"; grep -E '^tuned' "$L/tuned.log" | cut -c1-900
  echo "== time128"; grep -E '^(time|host|precompiled)' "$L/time128.log"; grep -iE 'error' "$L/time128.log" | head -5
  echo "== time64"; grep -E '^(time|host|precompiled)' "$L/time64.log"; grep -iE 'error' "$L/time64.log" | head -5
} >> "$S" 2>&1
cat "$S"
