#!/usr/bin/env bash
# Issue #20 on the H200: measures the attention code after e69b9a6 (not yet run on the card): tcsum vs lazy on every
# tile (time part), the tuner's new candidates and memoized picks in the bench (a 1 s pause after each prefill
# sweep), decode GQA after the host fix. <= 150 s; logs in $OUT/attn. Run: source .gpu/bootstrap.sh && bash scripts/gpu-attn-followup.sh
ATTN_DIR=attn source scripts/lib/attn-run.sh
st check 30 node scripts/attention-check.mjs --part=check
NBX_ATTN_VARIANTS=tcsum,lazy NBX_ATTN_VARIANTS_ALL=1 st time 45 node scripts/attention-check.mjs --part=time
st bench 35 node dist/bench/cuda_attention.js
NBX_ATTENTION_SOFTMAX=tcsum st benchtc 35 node dist/bench/cuda_attention.js
{
  echo "== check"; grep -E '^(FAIL|precompiled|check:|device:)' "$L/check.log"; grep -iE 'error' "$L/check.log" | head -5
  echo "== time"; grep -E '^(time|host)|precompiled' "$L/time.log"; grep -iE 'error' "$L/time.log" | head -3
  for f in bench benchtc; do echo "== $f"; grep -E '^\|' "$L/$f.log"; grep -E 'first call|compiled or found|failed|FAILED' "$L/$f.log" | head -14; done
} >> "$S" 2>&1
cat "$S"
