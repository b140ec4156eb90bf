#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-planes.sh (twelfth session, call 5; the planes were reverted
# after it, 5011106): int8 weights as two planes of exact values in the whole-step kernel (NBX_DECODE_STEP_Q8=planes, the
# default then; float: call 4's form): the decode tests, the kernel's tokens against the op-by-op step's at Llama-3-8B
# (int8 and int8+lm), the quantized rows with both forms, and the decode figures again.
DEC_DIR=decp5 source scripts/lib/decode-run.sh
dec_tests 240
dec_check int8+lm; dec_check int8; dec_check int4-g128+lm
dec_quant quant bf16,int8,int8+lm,int4-g128,int4-g128+lm 200
dec_quant quant-float bf16,int8+lm 100 NBX_DECODE_STEP_Q8=float
[ "$(dec_left)" -lt 430 ] && { dec_fresh; dec_bench tinyllama 1,8 150 tiny; }
[ "$(dec_left)" -lt 520 ] && { dec_fresh; dec_bench llama3-8b 1 70 8b; }
dec_pack
