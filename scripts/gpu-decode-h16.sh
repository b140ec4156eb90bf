#!/usr/bin/env bash
# (NBX_DECODE_STEP_H16 and the float16 forms it chose were reverted in 4fff63f; run this against the dist of the commit named below.)
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-h16.sh (thirteenth session, call 1): the packed products with
# float16 operands (NBX_DECODE_STEP_H16=sum, the new default; sub; off = the twelfth session's forms): the decode tests,
# the whole-step kernel's tokens against the op-by-op step's at Llama-3-8B, and the quantized rows A/B in one call.
DEC_DIR=dech16 source scripts/lib/decode-run.sh
ALL=bf16,int8,int8+lm,int4-g128,int4-g128+lm
dec_tests 200
dec_quant h16-sum $ALL 130
dec_quant h16-off $ALL 130 NBX_DECODE_STEP_H16=off
dec_check int4-g128+lm; dec_check int8+lm
[ "$(dec_left)" -lt 480 ] && dec_quant h16-sub bf16,int8+lm,int4-g128+lm 90 NBX_DECODE_STEP_H16=sub
[ "$(dec_left)" -lt 510 ] && dec_check int8
dec_pack
