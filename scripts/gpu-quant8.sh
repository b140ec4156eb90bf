#!/usr/bin/env bash
# quant helper, tenth session, first call (code at the commit READY names). New since quant-7: knob wu of the xf
# kernel, q4_k only: a lane's unit is a whole 64-element chunk of a block (its 32 quant bytes: sub-blocks 2c and
# 2c + 1, two 16-byte loads, plus the header) instead of half of one, so each sub-block's scale and min are decoded
# once a row, not twice (ptxas -v sm_90a, bf16 x, m 1: 109 SASS instructions per 16 packed bytes and row against
# 131 at nr2 db U1, 128 registers, 0 spills). Why: q4_k's arithmetic is its cap (quant-6: arithmetic alone, ab1,
# 1,531 GB/s = the whole kernel's 1,523; loads alone, ab2, 2,088). wu forms are tuner candidates.
# (1) check on the card: the wu cases; (2) sweep: q4_k's current best vs wu forms, with ab1 / ab2 rows of wu
# (arithmetic alone / loads alone, wrong results); (3) GEMV table + Llama-3-8B decode (tuner's choice, wu a candidate);
# (4) the tuned GEMV at the decode's other shapes (N x K: o 4096x4096, qkv 6144x4096, gate_up 28672x4096,
# lm_head 128256x4096) for q4_k, int4, q6_k next to bf16 (as its budget allows).
# <= 100 s of step limits + 4 s of kill grace; results in $OUT/quant8, summary in $OUT/quant8/summary.txt.
QUANT_DIR=quant8 source scripts/lib/quant-run.sh
CFGS='{"q4_k":[{"kw":1,"nr":2,"db":1,"U":1},{"kw":1,"nr":1,"db":1,"U":2,"lb":3},{"kw":1,"nr":2,"db":1,"U":1,"wu":1},{"kw":2,"nr":2,"db":1,"U":1,"wu":1},{"kw":1,"nr":2,"U":2,"wu":1},{"kw":1,"nr":1,"db":1,"U":1,"lb":3,"wu":1},{"kw":2,"nr":1,"db":1,"U":1,"lb":3,"wu":1},{"kw":1,"nr":1,"db":1,"U":1,"lb":4,"wu":1},{"kw":1,"nr":2,"db":1,"U":1,"pg":1,"wu":1},{"kw":1,"nr":2,"db":1,"U":1,"wu":1,"ab":1},{"kw":1,"nr":2,"db":1,"U":1,"wu":1,"ab":2}]}'
qstep check 18 --check --quick --no-gemv --no-decode --formats q4_k --check-filter=-wu
qstep sweep 28 --formats q4_k --sweep --sweep-cfgs "$CFGS" --no-decode --budget-s 24
qstep bench 38 --formats int4,int8,q4_k --budget-s 30 --json "$R/bench.json"
qstep shapes 16 --no-decode --formats q4_k,int4,q6_k --shapes 4096x4096,6144x4096,28672x4096,128256x4096 --budget-s 13
qsummary "check (wu cases)" "sweep (q4_k: current best vs wu; /ab1 arithmetic alone, /ab2 loads alone: wrong results)"
{ echo "== GEMV at the decode's other shapes (N x K)"; grep -E "GB/s|failed|skipped|rc=" "$R/shapes.log"; } >> "$R/summary.txt" 2>&1
tail -n +1 "$R/shapes.log" | grep -E "GB/s|failed|skipped|rc=" 
