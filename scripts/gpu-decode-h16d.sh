#!/usr/bin/env bash
# (NBX_DECODE_STEP_H16 and the float16 forms it chose were reverted in 4fff63f; run this against the dist of the commit named below.)
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-h16d.sh (thirteenth session, call 4): int4 products with
# float16 operands, one scale a sequence (the norm phases' x converted as it is normalized, the others' by a block pass),
# the magic's term taken off by MMAs of constants: the decode tests, phase traces (int4+lm, H16 on and off), the
# whole-step kernel's tokens at Llama-3-8B (int4-g128), the quantized rows A/B.
DEC_DIR=dech16d source scripts/lib/decode-run.sh
dec_tests 200
trace8b() { # QUANT H16
  dec_fresh; NBX_DECODE_STEP_H16=$2 NBX_DECODE_STEP_TRACE=1 timeout -k 5 90 node scripts/decode-step-check.mjs --shape llama3-8b --quant "$1" --modes off,fused --steps 8 > "$L/trace-$1-$2.log" 2>&1
  at "trace $1 $2" $?; grep -E "^(trace|fused)" "$L/trace-$1-$2.log" >> "$S"
}
trace8b int4-g128+lm on; trace8b int4-g128+lm off; trace8b int4-g128 on
S4=bf16,int4-g128,int4-g128+lm
dec_quant h16-on-1 $S4 100; dec_quant h16-off-1 $S4 100 NBX_DECODE_STEP_H16=off
dec_quant h16-on-2 $S4 100; dec_quant h16-off-2 $S4 100 NBX_DECODE_STEP_H16=off
dec_pack
