#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-final12.sh (twelfth session, call 4): the packed unpacking in
# one LOP3 a pair (int4) and PRMTs (int8) in the whole-step kernel: the decode tests (packed weights included), the
# whole-step kernel's tokens against the op-by-op step's at Llama-3-8B with int4+lm / int8+lm, the quantized decode rows
# (lm_head bf16 and quantized), and the session's decode figures (TinyLlama batch 1 / 8, Llama-3-8B batch 1).
DEC_DIR=decf12 source scripts/lib/decode-run.sh
dec_tests 240
dec_check int4-g128+lm; dec_check int8+lm
dec_quant quant bf16,int8,int8+lm,int4-g128,int4-g128+lm 200
dec_fresh; dec_bench tinyllama 1,8 150 tiny
[ "$(dec_left)" -lt 520 ] && { dec_fresh; dec_bench llama3-8b 1 70 8b; }
dec_pack
