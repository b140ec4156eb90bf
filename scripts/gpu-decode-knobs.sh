#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-knobs.sh (thirteenth session, call 5): the whole-step
# kernel's build knobs with packed weights at Llama-3-8B (bench/quant.js --decode, a fresh tuning cache each): L2
# prefetch of the phase ahead (NBX_DECODE_STEP_L2, slower for bf16 in the tenth session, not timed with packed
# weights), one block a head in the attention phase (ASPLIT=1: o_proj's input a plain copy), a ring of 3 items a warp.
DEC_DIR=decknobs source scripts/lib/decode-run.sh
ALL=bf16,int8,int8+lm,int4-g128,int4-g128+lm
dec_quant default-1 $ALL 100
dec_quant l2-1-128 $ALL 100 NBX_DECODE_STEP_L2=1,128
dec_quant l2-1-512 $ALL 100 NBX_DECODE_STEP_L2=1,512
dec_quant l2-2-256 $ALL 100 NBX_DECODE_STEP_L2=2,256
dec_quant asplit-1 $ALL 100 NBX_DECODE_STEP_ASPLIT=1
dec_quant ring-3 $ALL 100 NBX_DECODE_STEP_RING=3
dec_quant default-2 $ALL 100
dec_pack
