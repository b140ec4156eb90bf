#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-q4ab.sh (twelfth session, call 8): the int4 unpacking's forms
# interleaved, two samples each (call 7: sub,perm 1.9439 ms against xsum,perm 1.9724 for int4+lm, one sample each).
DEC_DIR=decq4 source scripts/lib/decode-run.sh
fresh() { NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-dec-XXXXXX); }
q() { # NAME Q4FORM
  fresh; NBX_DECODE_STEP_Q4=$2 NBX_DEBUG=1 timeout -k 5 100 node dist/bench/quant.js --no-gemv --decode --decode-schemes bf16,int4-g128,int4-g128+lm --budget-s 90 > "$L/$1.log" 2>&1
  at "$1" $?; grep -E "tok/s|decode steps take|rror" "$L/$1.log" | head -8 >> "$S"
}
q xsum-1 xsum,perm; q sub-1 sub,perm; q xsum-2 xsum,perm; q sub-2 sub,perm
dec_pack
