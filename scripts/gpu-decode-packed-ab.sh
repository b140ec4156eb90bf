#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-packed-ab.sh (twelfth session, call 7): A/B of the whole-step
# kernel's build choices with packed weights after the unpacking's LOP3 fix (Llama-3-8B decode, step graphs timed by the
# auto path, a fresh tuning cache each): the trace mark in the copy (NBX_DECODE_STEP_MARK=copy: it moved the bf16 kernel's
# batch-8 time by 13%), and the int4 unpacking's forms (NBX_DECODE_STEP_Q4).
DEC_DIR=decab source scripts/lib/decode-run.sh
ALL=bf16,int8,int8+lm,int4-g128,int4-g128+lm
dec_quant default $ALL 120
dec_quant mark-copy $ALL 120 NBX_DECODE_STEP_MARK=copy
dec_quant q4-xsum bf16,int4-g128+lm 120 NBX_DECODE_STEP_Q4=xsum
dec_quant q4-sub-perm bf16,int4-g128+lm 120 NBX_DECODE_STEP_Q4=sub,perm
dec_pack
