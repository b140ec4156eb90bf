#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="gpu-quant6.sh" bash scripts/gpu-decode-b8.sh (ninth session, call 2): the whole-step
# kernel after its inputs became cp.async loads (21a3b38): tests, tok/s at batch 1-8 (TinyLlama) and 1, 8 (8B) with the
# auto path's timings, per-phase traces at batch 8 and 1, batch 8 forced at two blocks a head, then the queued scripts.
DEC_DIR=dec2 source scripts/lib/decode-run.sh
dec_tests 120
dec_bench tinyllama 1,2,4,8 100
dec_bench llama3-8b 1,8 90
dec_trace 8
dec_trace 1
NBX_DECODE_STEP=fused NBX_DECODE_STEP_ASPLIT=2 dec_forced b8-asplit2 8 40
dec_finish
