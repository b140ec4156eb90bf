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
[ "$(dec_left)" -lt 420 ] && dec_bench tinyllama 1,8 90
[ "$(dec_left)" -lt 490 ] && dec_bench llama3-8b 1 60
dec_pack
