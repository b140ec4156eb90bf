#!/usr/bin/env bash
# quant helper, ninth session (code at the commit READY names). New since quant-5 (all in the xf kernel, m = 1):
# - tc: int4 on tensor cores INSIDE the register kernel (16-bit x, groups >= 128, K % 128 == 0): each lane still loads
#   16 contiguous bytes of one row (a warp 512 B of a row), its 32 nibbles are the B fragment of a 4-lane segment
#   (128 elements = one group), x staged as 16-bit pairs is the A fragment as loaded (one LDS.128 a word), two
#   mma.sync a word into two accumulators, the diagonal D[g][g] + D[g+8][g] is the segment's dot (magic + nibble,
#   one LOP3 a pair, Sx staged per segment). ptxas -v sm_90a: 64 SASS instructions per 16 packed bytes and row
#   (float xf form: 96), 120-128 registers, 0 spills (nr4 db, nr4 U2, nr2 db U2).
# - pg: persistent grid (blocks = resident blocks, each stages x once and loops over tiles).
# - ab: diagnostics, WRONG results, sweep only: ab1 weight loads from each row's first 1 KB (L1: arithmetic alone),
#   ab2 loads alone (no decode), ab3 x not staged (the prologue's cost).
# (1) check on the card: int4 (tc, pg forms), (2) sweep: quant-5's best vs pg / tc / ablations (--sweep-pg, no
# decode), (3) GEMV table (tuner's choice, tc / pg now candidates) + Llama-3-8B decode ratios.
# <= 144 s + 3 s of kill grace in all; results in $OUT/quant6, summary in $OUT/quant6/summary.txt.
QUANT_DIR=quant6 source scripts/lib/quant-run.sh
qstep check 40 --check --quick --no-gemv --no-decode --formats int4
qstep sweep 56 --formats int4,int8,q4_k --sweep --sweep-pg --no-decode --budget-s 48
qstep bench 48 --formats int4,int8,q4_k --budget-s 38 --json "$R/bench.json"
qsummary check "sweep (quant-5's best vs pg / tc; /abN rows are diagnostics with wrong results: 1 L1 loads, 2 loads only, 3 no x staging)"
