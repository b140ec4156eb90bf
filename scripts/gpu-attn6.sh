#!/usr/bin/env bash
# Issue #20 (attention), ninth session, device run attn-6 (code at the commit in READY): the GQA decode row (86.0% in
# attn-5: mma c4096 3563 GB/s vs SDPA 4144). Please run it alone on the GPU, from the repo root after
# `source .gpu/bootstrap.sh`, compiled dist/ present; step limits add up to 100 s (attn-5's steps: 14 + 24 + 4 + 4);
# logs in $OUT/attn6 with summary.txt.
#   check:  every prefill tile and the decode cases against the CPU reference; decode now also forces the new forms:
#           'lanes x' (the lane kernel's transposed shuffle reduction, 8 SHFL + 5 FADD per key and lane at 4 rows
#           instead of 16 + 16), 'mma w' (per-warp cp.async tiles, no block barrier per tile), 'mma tma' (per-warp
#           TMA boxes on a per-warp mbarrier, no cp.async), rings of 2 and 3 (s3). A 'tma' entry marked (not TMA)
#           fell back to the cp.async build (descriptors refused).
#   bench:  tuned vs PyTorch SDPA (fresh tuning cache; DECODE_SPACE v5 offers the new forms: lanes x where a block
#           holds 2-4 rows, mma w / tma at rings 2 and 3, chunks 512-4096)
#   time:   decode forced, GB/s (the bench's shapes): the earlier rows, then x / w / w s3 / tma / tma s3
#   timenc: the same with NBX_ATTENTION_ABLATE=nocompute (the mma kernels' loads and waits alone; wrong results).
#           attn-5: block tiles 3.68-3.87 TB/s. Question: do per-warp cp.async or TMA tiles lift that ceiling?
ATTN_DIR=attn6 source scripts/lib/attn-run.sh
st check 25 node scripts/attention-check.mjs --part=check
st bench 40 node dist/bench/cuda_attention.js
# --filter matching no prefill shape: the decode part alone
st time 20 node scripts/attention-check.mjs --part=time --no-precompile '--filter=^none$'
NBX_AUTOTUNE=off NBX_ATTENTION_ABLATE=nocompute st timenc 15 node scripts/attention-check.mjs --part=time --no-precompile '--filter=^none$'
{
  echo "== check"; grep -E '^(FAIL|precompiled|check:|device:)' "$L/check.log"; grep -E '3 blocks|decode' "$L/check.log"; grep -iE 'error' "$L/check.log" | head -5
  for f in time timenc; do echo "== $f"; grep -E '^time' "$L/$f.log"; grep -iE 'error' "$L/$f.log" | head -3; done
  echo "== bench"; grep -E '^\|' "$L/bench.log"; grep -E 'first call|compiled or found|failed|FAILED' "$L/bench.log" | head -14
} >> "$S" 2>&1
cat "$S"
