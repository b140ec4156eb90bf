#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="..." bash scripts/gpu-decode-quant.sh (eleventh session): packed weights (int8,
# int4 group 128 with and without zero points) read by the whole-step kernel. Tests (decode_step's packed-weight test
# among them), then Llama-3-8B decode of bf16 / int8 / int4-g128 / q4_k_m with the auto path's timings of both step
# graphs (NBX_DEBUG), then the bf16 figures of record (TinyLlama batch 1 and 8, Llama-3-8B batch 1) against the tenth
# session's (the kernel's loader changed for every format), then the queued scripts.
DEC_DIR=decq source scripts/lib/decode-run.sh
dec_tests 120
NBX_DEBUG=1 timeout -k 5 190 node dist/bench/quant.js --no-gemv --decode --decode-schemes bf16,int8,int4-g128,q4_k_m --budget-s 180 > "$L/quant.log" 2>&1
at quant $?; grep -E "tok/s|decode steps take|composite|failed|skipped|rror" "$L/quant.log" | head -30 >> "$S"
dec_queued
if [ "$(dec_left)" -lt 470 ]; then # the whole-step kernel's phases with packed int4 weights at Llama-3-8B's shape
  NBX_DECODE_STEP_TRACE=1 timeout -k 5 70 node scripts/decode-step-check.mjs --shape llama3-8b --quant int4-g128 --batch 1 --steps 8 --prompt 64 --modes fused > "$L/trace-8b-int4.log" 2>&1
  at "trace 8b int4" $?; grep -E "^(trace|fused)" "$L/trace-8b-int4.log" >> "$S"
fi
if [ "$(dec_left)" -lt 520 ]; then # A/B: symmetric int4 as 128 + q with the group sums' correction (NBX_DECODE_STEP_Q4=xsum), tokens against the op-by-op step
  NBX_DECODE_STEP_Q4=xsum timeout -k 5 60 node scripts/decode-step-check.mjs --shape llama3-8b --quant int4-g128 --batch 1 --steps 16 --prompt 64 --modes off,fused > "$L/q4xsum-8b.log" 2>&1
  at "q4 xsum 8b" $?; grep -E "^(off|fused|tokens|logits|match|differ)" "$L/q4xsum-8b.log" | cut -c1-300 >> "$S"
fi
[ "$(dec_left)" -lt 420 ] && dec_bench tinyllama 1,8 90
[ "$(dec_left)" -lt 490 ] && dec_bench llama3-8b 1 60
dec_pack
