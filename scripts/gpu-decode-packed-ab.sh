#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-packed-ab.sh (twelfth session, call 7): A/B of the whole-step
# kernel's build choices with packed weights after the unpacking's LOP3 fix (Llama-3-8B decode, step graphs timed by the
# auto path, a fresh tuning cache each): the trace mark in the copy (NBX_DECODE_STEP_MARK=copy: it moved the bf16 kernel's
# batch-8 time by 13%), and the int4 unpacking's forms (NBX_DECODE_STEP_Q4).
DEC_DIR=decab source scripts/lib/decode-run.sh
fresh() { NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-dec-XXXXXX); }
q() { # NAME SCHEMES [ENV...]
  local n=$1 sc=$2; shift 2
  fresh; env "$@" NBX_DEBUG=1 timeout -k 5 120 node dist/bench/quant.js --no-gemv --decode --decode-schemes "$sc" --budget-s 110 > "$L/$n.log" 2>&1
  at "$n" $?; grep -E "tok/s|decode steps take|rror" "$L/$n.log" | head -12 >> "$S"
}
q default bf16,int8,int8+lm,int4-g128,int4-g128+lm
q mark-copy bf16,int8,int8+lm,int4-g128,int4-g128+lm NBX_DECODE_STEP_MARK=copy
q q4-xsum bf16,int4-g128+lm NBX_DECODE_STEP_Q4=xsum
q q4-sub-perm bf16,int4-g128+lm NBX_DECODE_STEP_Q4=sub,perm
dec_pack
