#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-final12.sh (twelfth session, call 4): the packed unpacking in
# one LOP3 a pair (int4) and PRMTs (int8) in the whole-step kernel: the decode tests (packed weights included), the
# whole-step kernel's tokens against the op-by-op step's at Llama-3-8B with int4+lm / int8+lm, the quantized decode rows
# (lm_head bf16 and quantized), and the session's decode figures (TinyLlama batch 1 / 8, Llama-3-8B batch 1).
DEC_DIR=decf12 source scripts/lib/decode-run.sh
dec_tests 240
fresh() { NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-dec-XXXXXX); }
for q in int4-g128+lm int8+lm; do
  fresh; timeout -k 5 80 node scripts/decode-step-check.mjs --shape llama3-8b --quant $q --modes off,fused --steps 8 > "$L/check-$q.log" 2>&1
  at "check $q" $?; grep -E "^(fused|off)" "$L/check-$q.log" >> "$S"
done
fresh; NBX_DEBUG=1 timeout -k 5 200 node dist/bench/quant.js --no-gemv --decode --decode-schemes bf16,int8,int8+lm,int4-g128,int4-g128+lm --budget-s 180 > "$L/quant.log" 2>&1
at quant $?; grep -E "tok/s|decode steps take|rror" "$L/quant.log" | head -16 >> "$S"
fresh; dec_bench tinyllama 1,8 150 tiny
[ "$(dec_left)" -lt 520 ] && { fresh; dec_bench llama3-8b 1 70 8b; }
dec_pack
