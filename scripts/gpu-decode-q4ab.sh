#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-q4ab.sh (twelfth session, call 8): the int4 unpacking's forms
# interleaved, two samples each (call 7: sub,perm 1.9439 ms against xsum,perm 1.9724 for int4+lm, one sample each).
DEC_DIR=decq4 source scripts/lib/decode-run.sh
S4=bf16,int4-g128,int4-g128+lm
dec_quant xsum-1 $S4 100 NBX_DECODE_STEP_Q4=xsum,perm; dec_quant sub-1 $S4 100 NBX_DECODE_STEP_Q4=sub,perm
dec_quant xsum-2 $S4 100 NBX_DECODE_STEP_Q4=xsum,perm; dec_quant sub-2 $S4 100 NBX_DECODE_STEP_Q4=sub,perm
dec_pack
