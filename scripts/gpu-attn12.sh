#!/usr/bin/env bash
# Issue #20 (attention), eleventh session, device run attn-12 (the session's second call; code at the commit in READY). Run
# it alone on the GPU, from the repo root after `source .gpu/bootstrap.sh`, compiled dist/ present; step limits add up to
# 263 s (attn-11: check 25.7 s, bench 29.2 s, time 20.3 s); logs in $OUT/attn12 with summary.txt.
# After attn-11 (forced timings): the persistent tiles' L2 group decides L1024 (G 50 by the old rule, groups of 50, 50, 28:
# n128s2Pto 389 TFLOP/s; G 43: 413; G 64: 419; G 128: 379), so the group rule is now a tuner knob (group: l2, the old rule;
# even, as many groups made equal; wide, up to 90% of the L2, equal) swept with every persistent tile (a launch choice, no
# compile). The split (k) build ran 3-10% slower than the same tile unsplit, also where it split nothing (its loop's
# code): now the main launch runs the unsplit build without the last batch·head(s), and a second launch of the split build
# runs those alone, each item in key runs (B4 H32 L4096 non-causal: 127 heads, 4,064 items in 31 rounds, then 1 head's 32
# items in 4 runs of 8 tiles on 128 blocks; before: 32 rounds, the last of 4 items). The ostore (o) tiles lost but at
# L1024: out of the lists but n128s2Pto (causal D128). Decode: the lane kernel with streaming loads of K and V (ld
# 'stream': ld.global.nc.L1::no_allocate.L2::256B).
#   check:  every build against the CPU reference (82 cases: + L2 groups of 3 over 8 batch·heads).
#   bench:  tuned vs PyTorch SDPA (fresh cache; the kernel column names the group rule: -even / -wide).
#   tuned:  the sweeps from the tuning cache.
#   time:   every offered tile and group rule forced (0.2 s idle before each) on the D128 rows and D64; decode forms incl.
#           the streaming loads.
#   bench2: the bench again on the tuned cache (a second sample of every row, no sweep).
ATTN_DIR=attn12 source scripts/lib/attn-run.sh
st check 75 node scripts/attention-check.mjs --part=check
st bench 70 node dist/bench/cuda_attention.js
st tuned 8 node scripts/attention-check.mjs --part=tuned
st time 65 env NBX_ATTN_PAUSE_MS=200 NBX_ATTN_VARIANTS=none node scripts/attention-check.mjs --part=time '--filter=D(128|64) (bf16|f16)$'
st bench2 45 node dist/bench/cuda_attention.js
{
  sum_check 'G3|split'; sum_bench bench 13; sum_tuned 1500; sum_time time; sum_bench bench2 11
} >> "$S" 2>&1
cat "$S"
