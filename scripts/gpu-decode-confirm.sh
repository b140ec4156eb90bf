#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="..." bash scripts/gpu-decode-confirm.sh (tenth session, fourth call): the figures of
# record on the session's last kernel build (tests, TinyLlama batch 1-8 and Llama-3-8B batch 1 through the auto path), the
# queued scripts, and the compiled gpt-fast peer at TinyLlama batch 8 in the same run.
DEC_DIR=dec4 source scripts/lib/decode-run.sh
dec_tests 90
dec_bench tinyllama 1,2,4,8 100
dec_queued
dec_bench llama3-8b 1 50
[ "$(dec_left)" -lt 220 ] && dec_peer tinyllama 8 150
dec_pack
