#!/usr/bin/env bash
# quant helper, ninth call of the eighth session (code at the commit READY names). New since quant-4: knob lb (the x-staged
# register kernel's __launch_bounds__ blocks per SM: 3 -> <= 80 registers, 24 warps/SM; 4 -> <= 64, 32 warps where shared
# memory allows; ptxas -v sm_90a, m = 1: int4 xf nr4 db lb3 80 regs 0 spills 97.5 SASS instr per 16 packed bytes and row,
# nr2 db U1 lb4 63 regs 0 spills 107; int8 nr8 lb3 / nr4 db lb3 80 regs 0 spills) and q4_k in the xf form (x staged
# interleaved, two sub-block sums a unit: nr2 db U1 128 regs 0 spills, 122 instr per unit-row vs 170 for q4_k vec xs;
# nr1 db U2 lb3 80 regs 0 spills, 159). Tuner candidates: call 2's winners (int4 xf nr4 db at kw/2, int8 xf nr8 / nr2) plus
# the lb and q4_k xf forms. (1) check on the card of the new forms (int4, int8, q4_k), (2) sweep: call 2's best vs the lb /
# q4_k xf forms (--sweep-lb, no decode), (3) GEMV table + Llama-3-8B decode ratios (int4, int8, q4_k; tuner's choice).
# <= 170 s + 3 s of kill grace in all; results in $OUT/quant5, summary in $OUT/quant5/summary.txt.
QUANT_DIR=quant5 source scripts/lib/quant-run.sh
qstep check 50 --check --quick --no-gemv --no-decode --formats int8,int4,q4_k
qstep sweep 62 --formats int4,int8,q4_k --sweep --sweep-lb --no-decode --budget-s 50
qstep bench 58 --formats int4,int8,q4_k --json "$R/bench.json"
qsummary check "sweep (call 2's best vs lb / q4_k xf forms)"
