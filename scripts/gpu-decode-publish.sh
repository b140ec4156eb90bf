#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-publish.sh (twelfth session, call 2): greedy step graphs that
# publish their ids to mapped host memory (src/backend/cuda/runtime/publish.ts; NBX_DECODE_PUBLISH=0: the copies), where
# a step's time goes between replays (scripts/decode-gap.mjs, each variant from the same cache position), and Llama-3-8B
# quantized decode with lm_head quantized too (int8+lm, int4-g128+lm) next to bf16 and lm_head bf16, with the int4+lm
# whole-step kernel's tokens against the op-by-op step's.
DEC_DIR=decp source scripts/lib/decode-run.sh
dec_tests 240
dec_gap publish1 tinyllama NBX_DECODE_PUBLISH=1
dec_gap publish0 tinyllama NBX_DECODE_PUBLISH=0
dec_fresh; dec_bench tinyllama 1,8 150 tiny-publish1
dec_fresh; NBX_DECODE_PUBLISH=0 dec_bench tinyllama 1 100 tiny-publish0
dec_quant quant bf16,int8,int8+lm,int4-g128,int4-g128+lm 200
[ "$(dec_left)" -lt 470 ] && dec_check int4-g128+lm
[ "$(dec_left)" -lt 520 ] && { dec_fresh; dec_bench llama3-8b 1 70 8b-publish1; }
dec_pack
