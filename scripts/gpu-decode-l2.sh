#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="..." bash scripts/gpu-decode-l2.sh (tenth session, first call): the whole-step
# kernel with the lm_head phase's argmax over the batch in one block barrier, the norm a warp-pair a row at batch 8, and the
# attention's output written whole in the dtype where a head is one item (o_proj copies it); NBX_DECODE_STEP_L2 (each phase
# asks L2 for the weights of the phase H ahead) forced at batch 1 and 8; per-phase traces at batch 1 and 8 with and without it,
# with smaller weight rings (are the inputs slow because the ring's loads queue ahead of them?) and with the mark "input ready"
# at the copy (NBX_DECODE_STEP_TRACE=2: the copy apart from the norm's arithmetic); the queued scripts; 8B.
DEC_DIR=dec1 source scripts/lib/decode-run.sh
dec_tests 90
dec_bench tinyllama 1,8 60
NBX_DECODE_STEP=fused NBX_DECODE_STEP_L2=1 dec_forced l2-1 1,8 45
NBX_DECODE_STEP=fused NBX_DECODE_STEP_L2=2 dec_forced l2-2 1,8 45
dec_trace 1
NBX_DECODE_STEP_L2=2 dec_trace 1 l2-2
dec_trace 8
NBX_DECODE_STEP_L2=2 dec_trace 8 l2-2
NBX_DECODE_STEP_RING=2 dec_trace 8 ring2
TRACE_MODE=2 dec_trace 8 staged
dec_queued # before the rest: the call's time may run out
NBX_DECODE_STEP=fused NBX_DECODE_STEP_L2=1,128 dec_forced l2-1c128 1 30
NBX_DECODE_STEP=fused NBX_DECODE_STEP_L2=2,256 dec_forced l2-2c256 1 30
NBX_DECODE_STEP=fused NBX_DECODE_STEP_L2=2 NBX_DECODE_STEP_RING=3 dec_forced l2-2r3 1,8 40
NBX_DECODE_STEP=fused NBX_DECODE_STEP_L2=2 NBX_DECODE_STEP_RING=2 dec_forced l2-2r2 1 30
NBX_DECODE_STEP_RING=2 dec_trace 1 ring2
NBX_DECODE_STEP_RING=3 dec_trace 1 ring3
TRACE_MODE=2 dec_trace 1 staged
dec_bench llama3-8b 1 60
NBX_DECODE_STEP_L2=2 dec_bench llama3-8b 1 60 llama3-8b-l2-2
[ "$(dec_left)" -lt 470 ] && dec_ncu 8 90
dec_pack
