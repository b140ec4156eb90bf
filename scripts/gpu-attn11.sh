#!/usr/bin/env bash
# Issue #20 (attention), eleventh session, device run attn-11 (code at the commit in READY). Run it alone on the GPU, from
# the repo root after `source .gpu/bootstrap.sh`, compiled dist/ present; step limits add up to 278 s (attn-9: check ~15 s,
# bench ~31 s, timefresh ~25 s; this run compiles ~3x the tiles: ~170 s expected); logs in $OUT/attn11 with summary.txt.
# New tiles (offered to the tuner; with NBX_ATTENTION_EARLY=0 the existing tiles render byte for byte as before, 384 renders):
#   k (split; not causal): the last, partial round's items split over their keys (B4 H32 L4096: 4,096 items on 132 SMs,
#     31.03 rounds of work in 32; the 4 items of the last spread 8 ways over 32 blocks), merged by each item's last part.
#   early (every tile, not a knob): the programmatic-dependent-launch wait after the block's prologue (mbarrier init, the
#     TMA descriptors' prefetch), not first thing, so the prologue overlaps the previous launch's tail.
#   o (ostore; every persistent tile): O through a staging tile in shared memory and 16-byte stores (the 4-byte stores
#     from the accumulators touch 8 rows a warp instruction: ~2,000 L1 wavefronts an item on the consumers' path).
#   check:   every tile (now 14 at D128 and D64) against the CPU reference, 8 new cases for the split (80 cases).
#   bench:   tuned vs PyTorch SDPA (fresh cache): the split and o tiles among the candidates.
#   tuned:   the bench's sweeps from the tuning cache (each tile's median time: k and o against the same tile without).
#   time:    tiles forced (0.2 s idle before each) on causal L4096, non-causal, causal L1024 (D128 bf16) and D64 causal,
#            then the decode forms forced on the bench's decode shapes.
ATTN_DIR=attn11 source scripts/lib/attn-run.sh
st check 75 node scripts/attention-check.mjs --part=check
st bench 70 node dist/bench/cuda_attention.js
st tuned 8 node scripts/attention-check.mjs --part=tuned
st time 85 env NBX_ATTN_PAUSE_MS=200 NBX_ATTN_VARIANTS=none node scripts/attention-check.mjs --part=time '--filter=^(causal B4 H32 L4096 D128 bf16|B4 H32 L4096 D128 bf16|causal B8 H16 L1024 D128 bf16|causal B4 H32 L4096 D64 bf16)$'
# L1024: every tile also with the grid-dependency wait first thing (late: as before this run; the default now waits after
# the prologue and prefetches the TMA descriptors before it), and the persistent tiles with the L2 group G forced (47 by
# the L2 rule: groups of 47, 47, 34; a model of the rounds puts that order at 97% of the work's balance, 128 at 99.4%)
st groups 40 env NBX_ATTN_PAUSE_MS=200 NBX_ATTN_VARIANTS=late NBX_ATTN_VARIANTS_ALL=1 NBX_ATTN_DECODE=0 NBX_ATTN_GROUPS=43,64,128 node scripts/attention-check.mjs --part=time '--filter=^causal B8 H16 L1024 D128 bf16$'
{
  sum_check split; sum_bench bench 13; sum_tuned 1200; sum_time time; sum_time groups
} >> "$S" 2>&1
cat "$S"
