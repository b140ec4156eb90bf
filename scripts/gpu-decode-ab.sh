#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-ab.sh (tenth session, second call): the whole-step kernel with x rows
# 64 bytes past a multiple of 128 in shared memory (batch > 1) and the attention's parts bulk-copied whole into shared memory for
# o_proj's merge; tests, TinyLlama batch 1, 2 and 8 (the auto path's timings); A/B rows forced through the kernel: the build whose
# "input ready" mark sits in the copy (NBX_DECODE_STEP_TRACE=2, 9% faster at batch 8 in call 1's traces), the norm's former
# arithmetic (NBX_DECODE_STEP_NORM=block; 8B batch 1's kernel was slower in call 1), one block a head at batch 1-2
# (NBX_DECODE_STEP_ASPLIT=1: o_proj copies the attention's output); per-phase traces; Llama-3-8B batch 1 forced both ways.
DEC_DIR=dec2 source scripts/lib/decode-run.sh
dec_tests 90
dec_bench tinyllama 1,2,8 80
NBX_DECODE_STEP=fused NBX_DECODE_STEP_TRACE=2 dec_forced staged 1,8 45
NBX_DECODE_STEP=fused NBX_DECODE_STEP_NORM=block dec_forced normblock 1,8 45
NBX_DECODE_STEP=fused NBX_DECODE_STEP_ASPLIT=1 dec_forced asplit1 1,2 45
dec_trace 1
dec_trace 8
TRACE_MODE=2 dec_trace 8 staged
NBX_DECODE_STEP=fused dec_bench llama3-8b 1 50 llama3-8b-fused
NBX_DECODE_STEP=fused NBX_DECODE_STEP_NORM=block dec_bench llama3-8b 1 50 llama3-8b-normblock
NBX_DECODE_STEP=fused NBX_DECODE_STEP_TRACE=2 dec_bench llama3-8b 1 50 llama3-8b-staged
dec_pack
