#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="..." bash scripts/gpu-decode-final.sh (tenth session, last call): tests, then the
# figures of record (TinyLlama batch 1-8, Llama-3-8B batch 1 and 8, the auto path's choice): the whole-step kernel built with
# the trace's input mark in the copy from batch 2 up (NBX_DECODE_STEP_MARK; call 2: batch 8 13% faster that way, batch 1 2%
# slower); A/B rows forced through the kernel with the other placement at batch 1-8; per-phase traces; the queued scripts;
# the compiled gpt-fast peer at TinyLlama batch 1 in the same run.
DEC_DIR=dec3 source scripts/lib/decode-run.sh
dec_tests 90
dec_bench tinyllama 1,2,4,8 100
NBX_DECODE_STEP=fused NBX_DECODE_STEP_MARK=gemv dec_forced mark-gemv 2,4,8 50
NBX_DECODE_STEP=fused NBX_DECODE_STEP_MARK=copy dec_forced mark-copy 1,2,4 50
dec_trace 8
dec_queued # before the rest: the call's time may run out
dec_bench llama3-8b 1,8 90
dec_trace 1
[ "$(dec_left)" -lt 400 ] && dec_peer tinyllama 1 150
dec_pack
