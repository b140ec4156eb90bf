#!/usr/bin/env bash
# Issue #20 (attention), tenth session, suggested follow-up (not in READY): the check again after 485c559 (attn-9's check
# failed 48/72 only on n160s2Pt, listed by mistake: it needs more shared memory than sm_90 allows; every other entry,
# the new D64 n192s2pPCt included, was within tolerance), and the bench (median sweep) once more for its run-to-run spread.
# Step limits 70 s; logs in $OUT/attn10 with summary.txt.
ATTN_DIR=attn10 source scripts/lib/attn-run.sh
st check 25 node scripts/attention-check.mjs --part=check
st bench 45 node dist/bench/cuda_attention.js
{
  echo "== check"; grep -E '^(FAIL|precompiled|check:|device:)' "$L/check.log"; grep -iE 'error' "$L/check.log" | head -5
  echo "== bench"; grep -E '^\|' "$L/bench.log" | tail -13; grep -E 'failed|FAILED|rror' "$L/bench.log" | head -8
} >> "$S" 2>&1
cat "$S"
