#!/usr/bin/env bash
# quant helper, tenth session, first call (code at the commit READY names). New since quant-7 (knobs of the xf kernel;
# tuner candidates, unmeasured):
#  wu (q4_k): a lane's unit is a whole 64-element chunk of a block (its 32 quant bytes: sub-blocks 2c and 2c + 1, two
#     16-byte loads, plus the header) instead of half of one: each sub-block's scale and min decoded once a row, not
#     twice (ptxas -v sm_90a, bf16 x, m 1: 109 SASS instructions per 16 packed bytes and row against 131 at nr2 db U1,
#     128 registers, 0 spills). Why: q4_k's arithmetic is its cap (quant-6: arithmetic alone, ab1, 1,531 GB/s = the
#     whole kernel's 1,523; loads alone, ab2, 2,088).
#  pb (int4, int8, q4_k with db): both rounds of weight loads issued before the grid-dependency wait, not only the
#     first: twice the bytes in flight while the previous kernel ends and x is staged (quant-6: x staging ~1.6 µs of
#     int4's 16 at 4096x14336). Same sums.
# (1) check on the card: the wu and pb cases; (2) sweep: q4_k's current best vs wu forms, with ab1 / ab2 rows of wu
# (arithmetic alone / loads alone, wrong results), and int4's two best db forms with and without pb; (3) GEMV table +
# Llama-3-8B decode (tuner's choice; wu and pb are candidates).
# <= 100 s of step limits + 3 s of kill grace; results in $OUT/quant8, summary in $OUT/quant8/summary.txt.
QUANT_DIR=quant8 source scripts/lib/quant-run.sh
CFGS='{"q4_k":[{"kw":1,"nr":2,"db":1,"U":1},{"kw":1,"nr":1,"db":1,"U":2,"lb":3},{"kw":1,"nr":2,"db":1,"U":1,"wu":1},{"kw":2,"nr":2,"db":1,"U":1,"wu":1},{"kw":1,"nr":2,"U":2,"wu":1},{"kw":1,"nr":1,"db":1,"U":1,"lb":3,"wu":1},{"kw":2,"nr":1,"db":1,"U":1,"lb":3,"wu":1},{"kw":1,"nr":1,"db":1,"U":1,"lb":4,"wu":1},{"kw":1,"nr":2,"db":1,"U":1,"pg":1,"wu":1},{"kw":1,"nr":2,"db":1,"U":1,"pb":1},{"kw":1,"nr":2,"db":1,"U":1,"wu":1,"ab":1},{"kw":1,"nr":2,"db":1,"U":1,"wu":1,"ab":2}],
"int4":[{"kw":2,"nr":4,"db":1},{"kw":2,"nr":4,"db":1,"pb":1},{"kw":1,"nr":2,"db":1,"U":1,"lb":4},{"kw":1,"nr":2,"db":1,"U":1,"lb":4,"pb":1}]}'
qstep check 22 --check --quick --no-gemv --no-decode --formats q4_k,int4,int8 --check-filter='-wu|-pb'
qstep sweep 40 --formats q4_k,int4 --sweep --sweep-cfgs "$CFGS" --no-decode --budget-s 34
qstep bench 38 --formats int4,int8,q4_k --budget-s 30 --json "$R/bench.json"
qsummary "check (wu and pb cases)" "sweep (q4_k: current best vs wu; int4: db forms with / without pb; /ab1 arithmetic alone, /ab2 loads alone: wrong results)"
