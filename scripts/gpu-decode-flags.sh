#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-flags.sh (twelfth session, call 1; the flags were reverted after
# it, 4af8535): the whole-step kernel's phase A → B handoff through flags (NBX_DECODE_STEP_FLAGS, default 1) against the
# grid barrier, and where a step's time goes between graph replays (scripts/decode-gap.mjs). Tests first; then TinyLlama /
# Llama-3-8B with a fresh tuning cache each.
DEC_DIR=decf source scripts/lib/decode-run.sh
dec_tests 240
dec_gap flags1 tinyllama NBX_DECODE_STEP_FLAGS=1
dec_gap flags0 tinyllama NBX_DECODE_STEP_FLAGS=0
dec_fresh; NBX_DECODE_STEP_FLAGS=1 dec_bench tinyllama 1,8 150 tiny-flags1
dec_fresh; NBX_DECODE_STEP_FLAGS=0 dec_bench tinyllama 1 100 tiny-flags0
NBX_DECODE_STEP_FLAGS=1 dec_trace 1 flags1
NBX_DECODE_STEP_FLAGS=0 dec_trace 1 flags0
[ "$(dec_left)" -lt 390 ] && { dec_fresh; NBX_DECODE_STEP_FLAGS=1 dec_bench llama3-8b 1 160 8b-flags1; }
[ "$(dec_left)" -lt 470 ] && { dec_fresh; NBX_DECODE_STEP_FLAGS=1 timeout -k 5 90 node scripts/decode-gap.mjs --shape llama3-8b --steps 100 > "$L/gap-8b.log" 2>&1; at "gap 8b" $?; grep -E "^decode-gap|rror" "$L/gap-8b.log" | head -5 >> "$S"; }
dec_pack
