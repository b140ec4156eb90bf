#!/usr/bin/env bash
# (NBX_DECODE_STEP_H16 and the float16 forms it chose were reverted in 4fff63f; run this against the dist of the commit named below.)
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-h16c.sh (thirteenth session, call 3): float16 operands with
# the norm phases' x converted as it is normalized and the other phases' pass not inlined (it spilled): the decode
# tests, phase traces (int4+lm and int8+lm; H16 sum, sub, off), the quantized rows A/B.
DEC_DIR=dech16c source scripts/lib/decode-run.sh
dec_tests 200
trace8b() { # QUANT H16
  dec_fresh; NBX_DECODE_STEP_H16=$2 NBX_DECODE_STEP_TRACE=1 timeout -k 5 90 node scripts/decode-step-check.mjs --shape llama3-8b --quant "$1" --modes off,fused --steps 8 > "$L/trace-$1-$2.log" 2>&1
  at "trace $1 $2" $?; grep -E "^(trace|fused)" "$L/trace-$1-$2.log" >> "$S"
}
trace8b int4-g128+lm sum; trace8b int4-g128+lm sub; trace8b int4-g128+lm off
trace8b int8+lm sum; trace8b int8+lm off
ALL=bf16,int8,int8+lm,int4-g128,int4-g128+lm
dec_quant h16-sum $ALL 130
dec_quant h16-off $ALL 130 NBX_DECODE_STEP_H16=off
[ "$(dec_left)" -lt 470 ] && dec_quant h16-sub $ALL 120 NBX_DECODE_STEP_H16=sub
dec_pack
