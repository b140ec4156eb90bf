#!/usr/bin/env bash
# Issue #20 (attention), ninth session, device run attn-7 (code at the commit in READY): the rows under SDPA after
# attn-5/attn-6. Please run it alone on the GPU, from the repo root after `source .gpu/bootstrap.sh`, compiled dist/
# present; step limits add up to 67 s (attn-6: check 11.1 s; attn-5: bench 23.8 s); logs in $OUT/attn7 with summary.txt.
#   check:  every prefill tile and the decode cases against the CPU reference; new tiles: D128 n128s2t (non-persistent,
#           row sums on the tensor cores; the tuner offers it on non-causal and float16 problems only) and D64
#           n192s3pPC (the D64 pick n192s2pPC with a ring of 3).
#   bench:  tuned vs PyTorch SDPA (fresh tuning cache). What changed for the tuner:
#           - decode B1 H32 S32768 and B8 H32 S4096 are tuned now (512 MiB of K/V each but 2^20 score elements, under
#             the 2^22 threshold: attn-5/attn-6 ran the untuned default lanes t128 c2048 kernel there); expected
#             picks among lanes t256 c4096 / mma tma c4096 (B1, 4234-4287 forced in attn-6) and mma tma s3 c4096 /
#             c1024-2048 (B8, 4227-4305), against SDPA 4188 / 4281 (attn-5);
#           - decode on sm_90: the per-warp cp.async ('mma w') and block-tile mma forms of 512+ keys are no longer
#             candidates (lost to 'mma tma' on every row of attn-6);
#           - prefill: n128s2t on the non-causal and f16 rows (their pick in attn-5 was n128s2), n192s3pPC at D64.
#           The causal bf16 D128 L4096 / GQA / D256 rows (>= 100%) keep their candidate lists.
ATTN_DIR=attn7 source scripts/lib/attn-run.sh
st check 22 node scripts/attention-check.mjs --part=check
st bench 45 node dist/bench/cuda_attention.js
{
  echo "== check"; grep -E '^(FAIL|precompiled|check:|device:)' "$L/check.log"; grep -E 'n128s2t|n192s3pPC|decode' "$L/check.log" | head -12; grep -iE 'error' "$L/check.log" | head -5
  echo "== bench"; grep -E '^\|' "$L/bench.log"; grep -E 'first call|compiled or found|failed|FAILED|rror' "$L/bench.log" | head -14
} >> "$S" 2>&1
cat "$S"
