#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-publish.sh (twelfth session, call 2): greedy step graphs that
# publish their ids to mapped host memory (src/backend/cuda/runtime/publish.ts; NBX_DECODE_PUBLISH=0: the copies), where
# a step's time goes between replays (scripts/decode-gap.mjs, each variant from the same cache position), and Llama-3-8B
# quantized decode with lm_head quantized too (int8+lm, int4-g128+lm) next to bf16 and lm_head bf16, with the int4+lm
# whole-step kernel's tokens against the op-by-op step's.
DEC_DIR=decp source scripts/lib/decode-run.sh
dec_tests 240
fresh() { NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-dec-XXXXXX); }
for p in 1 0; do
  fresh; NBX_DECODE_PUBLISH=$p timeout -k 5 90 node scripts/decode-gap.mjs --shape tinyllama --steps 300 > "$L/gap-publish$p.log" 2>&1
  at "gap publish=$p" $?; grep -E "^decode-gap|rror" "$L/gap-publish$p.log" | head -5 >> "$S"
done
fresh; dec_bench tinyllama 1,8 150 tiny-publish1
fresh; NBX_DECODE_PUBLISH=0 dec_bench tinyllama 1 100 tiny-publish0
fresh; NBX_DEBUG=1 timeout -k 5 200 node dist/bench/quant.js --no-gemv --decode --decode-schemes bf16,int8,int8+lm,int4-g128,int4-g128+lm --budget-s 180 > "$L/quant.log" 2>&1
at quant $?; grep -E "tok/s|decode steps take|rror" "$L/quant.log" | head -16 >> "$S"
[ "$(dec_left)" -lt 470 ] && { fresh; timeout -k 5 80 node scripts/decode-step-check.mjs --shape llama3-8b --quant int4-g128+lm --modes off,fused --steps 8 > "$L/check-int4lm.log" 2>&1; at "check int4+lm" $?; grep -E "^(fused|off)" "$L/check-int4lm.log" >> "$S"; }
[ "$(dec_left)" -lt 520 ] && { fresh; dec_bench llama3-8b 1 70 8b-publish1; }
dec_pack
