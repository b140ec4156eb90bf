#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="..." bash scripts/gpu-decode-final.sh (tenth session, last call): tests, then the
# figures of record (TinyLlama batch 1-8, Llama-3-8B batch 1 and 8, the auto path's choice) with x rows 64 bytes past a multiple
# of 128 in shared memory; A/B rows forced through the kernel: the build whose "input ready" mark sits in the copy
# (NBX_DECODE_STEP_TRACE=2, 9% faster at batch 8 in call 1's traces), the norm's former arithmetic (NBX_DECODE_STEP_NORM=block,
# for 8B batch 1's kernel, slower in call 1), one block a head at batch 1-2 (NBX_DECODE_STEP_ASPLIT=1: o_proj copies
# the attention's output); traces; the queued scripts; the compiled gpt-fast peer at TinyLlama batch 1 in the same run.
DEC_DIR=dec2 source scripts/lib/decode-run.sh
dec_tests 90
dec_bench tinyllama 1,2,4,8 100
NBX_DECODE_STEP=fused NBX_DECODE_STEP_TRACE=2 dec_forced staged 1,8 45
NBX_DECODE_STEP=fused NBX_DECODE_STEP_NORM=block dec_forced normblock 1,8 45
NBX_DECODE_STEP=fused NBX_DECODE_STEP_ASPLIT=1 dec_forced asplit1 1,2 45
dec_trace 8
dec_queued # before the rest: the call's time may run out
dec_bench llama3-8b 1,8 90
NBX_DECODE_STEP=fused dec_bench llama3-8b 1 50 llama3-8b-fused
NBX_DECODE_STEP=fused NBX_DECODE_STEP_NORM=block dec_bench llama3-8b 1 50 llama3-8b-normblock
dec_trace 1
[ "$(dec_left)" -lt 430 ] && dec_peer tinyllama 1 150
dec_pack
