#!/usr/bin/env bash
# Issue #20 (attention), eleventh session, device run attn-13 (code at the commit in READY). Run it alone on the GPU, from
# the repo root after `source .gpu/bootstrap.sh`, compiled dist/ present; step limits add up to 228 s (attn-12: check 34.6 s,
# bench 35.4 s, time 26.6 s, bench2 18.6 s); logs in $OUT/attn13 with summary.txt.
# After attn-12 (s11call3): the L2 group rules (tuner knob group) lifted L1024 (forced n128s2Pto 384 -> 411), GQA (608 ->
# 626) and D64 (431 -> 444) and are kept for causal problems; not causal they only cost (n128s2P 651 / 648 / 612), so the old
# rule alone there. The non-causal row stayed under SDPA (96.5% / 98.0% in the two benches): its split tiles (k) are back
# among its candidates, rerouted: the main launch runs the unsplit build without the last batch·head, a second launch of the
# split build runs that head alone, each item in 4 key runs of 8 tiles on 128 blocks (127 heads: 4,064 items in 31 rounds on
# 132 SMs, against 32 rounds with 4 items in the last; the split build ran 3-10% slower than the unsplit one in attn-11, so it
# now has ~1% of the work). Decode: the lane kernel's streaming loads lost on every row in attn-12, no candidates now.
#   check:  every build against the CPU reference (82 cases; the split cases now split a tail of batch·heads in a second launch).
#   bench:  tuned vs PyTorch SDPA (fresh cache).
#   tuned:  the sweeps from the tuning cache.
#   time:   the non-causal row's tiles forced, k against the same tile unsplit (0.2 s idle before each).
#   bench2: the bench again on the tuned cache (a second sample of every row).
ATTN_DIR=attn13 source scripts/lib/attn-run.sh
st check 75 node scripts/attention-check.mjs --part=check
st bench 70 node dist/bench/cuda_attention.js
st tuned 8 node scripts/attention-check.mjs --part=tuned
st time 30 env NBX_ATTN_PAUSE_MS=200 NBX_ATTN_VARIANTS=none NBX_ATTN_DECODE=0 node scripts/attention-check.mjs --part=time '--filter=^B4 H32 L4096 D128 bf16$'
st bench2 45 node dist/bench/cuda_attention.js
{
  sum_check split; sum_bench bench 13; sum_tuned 1500; sum_time time; sum_bench bench2 11
} >> "$S" 2>&1
cat "$S"
