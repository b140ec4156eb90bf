#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-last12.sh (twelfth session, call 6): int8 items summed in two
# accumulators (reverted after it); the decode tests, the whole-step kernel's tokens against the op-by-op step's at
# Llama-3-8B (int8, int8+lm, int4-g128+lm), the quantized rows, and the decode figures of record.
DEC_DIR=decl12 source scripts/lib/decode-run.sh
dec_tests 240
dec_check int8; dec_check int8+lm; dec_check int4-g128+lm
dec_quant quant bf16,int8,int8+lm,int4-g128,int4-g128+lm 200
[ "$(dec_left)" -lt 430 ] && { dec_fresh; dec_bench tinyllama 1,8 150 tiny; }
[ "$(dec_left)" -lt 520 ] && { dec_fresh; dec_bench llama3-8b 1 70 8b; }
dec_pack
