#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-planes.sh (twelfth session, call 5; the planes were reverted after it, 5011106): int8 weights as two planes of
# exact values in the whole-step kernel (NBX_DECODE_STEP_Q8=planes, the default; float: call 4's form): the decode tests,
# the kernel's tokens against the op-by-op step's at Llama-3-8B (int8 and int8+lm), the quantized rows with both forms,
# and the decode figures again (TinyLlama batch 1 / 8, Llama-3-8B batch 1).
DEC_DIR=decp5 source scripts/lib/decode-run.sh
dec_tests 240
fresh() { NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-dec-XXXXXX); }
for q in int8+lm int8 int4-g128+lm; do
  fresh; timeout -k 5 80 node scripts/decode-step-check.mjs --shape llama3-8b --quant $q --modes off,fused --steps 8 > "$L/check-$q.log" 2>&1
  at "check $q" $?; grep -E "^fused" "$L/check-$q.log" >> "$S"
done
fresh; NBX_DEBUG=1 timeout -k 5 200 node dist/bench/quant.js --no-gemv --decode --decode-schemes bf16,int8,int8+lm,int4-g128,int4-g128+lm --budget-s 180 > "$L/quant.log" 2>&1
at quant $?; grep -E "tok/s|decode steps take|rror" "$L/quant.log" | head -16 >> "$S"
fresh; NBX_DECODE_STEP_Q8=float NBX_DEBUG=1 timeout -k 5 100 node dist/bench/quant.js --no-gemv --decode --decode-schemes bf16,int8+lm --budget-s 90 > "$L/quant-float.log" 2>&1
at "quant q8 float" $?; grep -E "tok/s|decode steps take|rror" "$L/quant-float.log" | head -6 >> "$S"
[ "$(dec_left)" -lt 430 ] && { fresh; dec_bench tinyllama 1,8 150 tiny; }
[ "$(dec_left)" -lt 520 ] && { fresh; dec_bench llama3-8b 1 70 8b; }
dec_pack
