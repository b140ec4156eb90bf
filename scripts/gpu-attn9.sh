#!/usr/bin/env bash
# Issue #20 (attention), tenth session, device run attn-9 (code at the commit in READY). Please run it alone on the GPU,
# from the repo root after `source .gpu/bootstrap.sh`, compiled dist/ present; step limits add up to 103 s (attn-8: bench
# 31.3 s, timefresh 25.0 s; attn-7: check 14.7 s); logs in $OUT/attn9 with summary.txt.
#   check:     every tile against the CPU reference; new candidate D64 n192s2pPCt (the D64 pick with tcsum: 434 forced in
#              attn-8 against n192s2pPC 426, SDPA 434.7); n128s3P (D64) no longer listed. The existing tiles' sources render
#              byte for byte as in attn-8 (a new knob, edge, builds only where set).
#   bench:     tuned vs PyTorch SDPA (fresh cache). The sweep (interleaved rounds, since attn-8) keeps the median of 5
#              samples, each of at least ~2 ms (4-16 launches): attn-8's best-of-5 four-launch samples took lanes t256 c4096
#              for decode B8 at 0.1246 ms, which ran at 3,204 GB/s (73.8%) in the bench (3,219-3,228 in every forced run).
#   tuned:     the bench's sweeps from the tuning cache.
#   timefresh: tiles forced (0.3 s idle before each) on causal L4096, non-causal, L1024 (D128 bf16) and D64, with tiles that
#              are no candidates (NBX_ATTN_EXTRA, timed only; ptxas sm_90a 0 spills unmasked): n160s2Pe (edge: warpgroup 0
#              releases the tiles past its rows' causal edge unread; same bits; emulator tests pass), n144s2Pt, n144s2Pte,
#              n128s3P (a ring of 3 at BLOCK_N 128).
ATTN_DIR=attn9 source scripts/lib/attn-run.sh
st check 25 node scripts/attention-check.mjs --part=check
st bench 45 node dist/bench/cuda_attention.js
st tuned 5 node scripts/attention-check.mjs --part=tuned
EXTRA='{"128":[{"blockN":160,"stages":2,"persistent":true,"edge":true},{"blockN":144,"stages":2,"persistent":true,"softmax":"tcsum"},{"blockN":144,"stages":2,"persistent":true,"softmax":"tcsum","edge":true},{"blockN":128,"stages":3,"persistent":true}]}'
st timefresh 28 env NBX_ATTN_PAUSE_MS=300 NBX_ATTN_DECODE=0 NBX_ATTN_VARIANTS=none NBX_ATTN_EXTRA="$EXTRA" node scripts/attention-check.mjs --part=time '--filter=^(causal B4 H32 L4096 D128 bf16|B4 H32 L4096 D128 bf16|causal B8 H16 L1024 D128 bf16|causal B4 H32 L4096 D64 bf16)$'
{
  echo "== check"; grep -E '^(FAIL|precompiled|check:|device:)' "$L/check.log"; grep -E 'n192s2pPCt' "$L/check.log" | head -4; grep -iE 'error' "$L/check.log" | head -5
  echo "== bench"; grep -E '^\|' "$L/bench.log" | tail -13; grep -E 'compiled or found|autotuning|failed|FAILED|rror' "$L/bench.log" | head -8
  echo "== tuned"; grep -E '^tuned' "$L/tuned.log" | cut -c1-700
  echo "== timefresh"; grep -E '^(time|host|precompiled)' "$L/timefresh.log"; grep -iE 'error' "$L/timefresh.log" | head -5
} >> "$S" 2>&1
cat "$S"
