#!/usr/bin/env bash
# Issue #20 (attention), eighth session, device run attn-5 (code at the commit in READY). Please run it alone on
# the GPU, from the repo root after `source .gpu/bootstrap.sh`, compiled dist/ present; <= 120 s; logs in $OUT/attn5.
#   check:   every prefill tile against the CPU reference (candidates pruned by attn-4: D128 n128s2, n128s2P,
#            n160s2P, n128s2Pt; D64 n192s2pP, n128s3pP, n128s3P, n192s2pPC; D256 n80s2, n64s2) and decode
#   bench:   tuned vs PyTorch SDPA (fresh tuning cache; the pruned candidate lists)
#   check3/4: the decode cases again with the tensor-core decode kernel's K/V ring at 3 / 4 tiles (diagnostic builds)
#   time2/3/4: decode forced (bench shapes, GB/s): the tensor-core kernel (mma) with a ring of 2 (as the tuner
#            runs it), 3 and 4 tiles (NBX_ATTENTION_DECODE_STAGES); lanes rows are the same kernel in each run
#   timenc:  the same with NBX_ATTENTION_ABLATE=nocompute: the mma kernel's loads and waits alone (wrong results)
# Question for the mma rows (GQA B4 H32/8: mma c4096 3580 GB/s vs SDPA 4272; the mma kernel sits near 3.6 TB/s
# on every decode shape while the lane kernel reaches 4.3-4.5 at one row per KV head): if timenc's mma rows
# reach ~4.3, the per-tile MMAs/softmax on the critical path between a tile's wait and the next issue cost the
# rate, and the deeper ring (time3/time4) should recover it; if timenc stays ~3.6, the load path itself
# (cp.async tiles, two barriers per tile) is the ceiling and the ring depth will not help.
ATTN_DIR=attn5 source scripts/lib/attn-run.sh
st check 30 node scripts/attention-check.mjs --part=check
st bench 30 node dist/bench/cuda_attention.js
# --filter matching no prefill shape: the decode part alone. The diagnostic builds run untuned (NBX_AUTOTUNE=off
# neither reads nor writes tuning results: no pick timed on a diagnostic build is left in the cache)
st time2 10 node scripts/attention-check.mjs --part=time --no-precompile '--filter=^none$'
diag() { NBX_AUTOTUNE=off "$@"; }
NBX_ATTENTION_DECODE_STAGES=3 diag st check3 8 node scripts/attention-check.mjs --part=check --no-precompile --filter=decode
NBX_ATTENTION_DECODE_STAGES=4 diag st check4 8 node scripts/attention-check.mjs --part=check --no-precompile --filter=decode
NBX_ATTENTION_DECODE_STAGES=3 diag st time3 8 node scripts/attention-check.mjs --part=time --no-precompile '--filter=^none$'
NBX_ATTENTION_DECODE_STAGES=4 diag st time4 8 node scripts/attention-check.mjs --part=time --no-precompile '--filter=^none$'
NBX_ATTENTION_ABLATE=nocompute diag st timenc 8 node scripts/attention-check.mjs --part=time --no-precompile '--filter=^none$'
{
  echo "== check"; grep -E '^(FAIL|precompiled|check:|device:)' "$L/check.log"; grep -E '3 blocks|decode' "$L/check.log"; grep -iE 'error' "$L/check.log" | head -5
  for f in check3 check4; do echo "== $f (decode ring ${f#check})"; grep -E '^(FAIL|ok|check:)' "$L/$f.log"; grep -iE 'error' "$L/$f.log" | head -3; done
  for f in time2 time3 time4 timenc; do echo "== $f"; grep -E '^time' "$L/$f.log"; grep -iE 'error' "$L/$f.log" | head -3; done
  echo "== bench"; grep -E '^\|' "$L/bench.log"; grep -E 'first call|compiled or found|failed|FAILED' "$L/bench.log" | head -14
} >> "$S" 2>&1
cat "$S"
