#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="gpu-attn7.sh" bash scripts/gpu-decode-bulk.sh (ninth session, last call): the
# whole-step kernel with its inputs staged by sm_90 bulk copies and two query heads an attention item at batch 8: tests first
# (should they fail, the rest runs with NBX_DECODE_STEP_BULK=0), tok/s at batch 1-8 (TinyLlama) and 1, 8 (8B) with the auto
# path's timings, a per-phase trace at batch 8, the queued scripts, then for comparison the register-staged inputs (NBX_DECODE_STEP_BULK=0)
# at batch 1 and 8 and one head an attention item (NBX_DECODE_STEP_HEADS=1) at batch 8, 8B at batch 1 and 8, a trace at batch 1.
DEC_DIR=dec3 source scripts/lib/decode-run.sh
if ! dec_tests 90; then export NBX_DECODE_STEP_BULK=0; echo "tests failed: the rest with NBX_DECODE_STEP_BULK=0" >> "$S"; fi
dec_bench tinyllama 1,2,4,8 100
dec_trace 8
dec_queued # before the rest: the call's time may run out
NBX_DECODE_STEP=fused NBX_DECODE_STEP_HEADS=1 dec_forced heads1 8 40
dec_bench llama3-8b 1,8 90
dec_trace 1
NBX_DECODE_STEP=fused NBX_DECODE_STEP_BULK=0 dec_forced nobulk 1,8 60
dec_pack
