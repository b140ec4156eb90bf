#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-ring2.sh (eleventh session, call 6): with packed weights the whole-step
# kernel's ring holds two items a warp (call 5's traces): the packed-weight test, then Llama-3-8B decode of bf16 / int8 /
# int4-g128 with the auto path's timings of both step graphs (a fresh tuning cache).
DEC_DIR=decr2 source scripts/lib/decode-run.sh
timeout -k 5 90 node --test --test-name-pattern="packed weights" dist/test/decode_step.test.js > "$L/packed.log" 2>&1
at "packed test" $?; grep -E "^(not ok|# pass|# fail)" "$L/packed.log" >> "$S"; grep -A12 "^not ok" "$L/packed.log" | head -16 >> "$S"
NBX_DEBUG=1 timeout -k 5 80 node dist/bench/quant.js --no-gemv --decode --decode-schemes bf16,int8,int4-g128 --budget-s 75 > "$L/quant.log" 2>&1
at quant $?; grep -E "tok/s|decode steps take|rror" "$L/quant.log" | head -10 >> "$S"
dec_pack
