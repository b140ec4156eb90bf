#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="..." bash scripts/gpu-decode-quant2.sh (eleventh session, call 2):
# (1) the packed-weight test with the autotuner off (call 1: int4 with zero points at batch 3 differed from the op-by-op
#     step in sequence 1 only, after the first step; is the reference's tuned quant kernel the cause?);
# (2) Llama-3-8B int4-g128 decode, the auto path's timings of both step graphs, under NBX_DECODE_STEP_Q4 = sub, xsum,
#     perm, xsum,perm (how the whole-step kernel unpacks int4: call 1's trace had its products at 2.0-2.9 TB/s);
# (3) WebGPU decode at TinyLlama's shape against CUDA in the same call (issue #19's WebGPU row);
# then the queued scripts.
DEC_DIR=decq2 source scripts/lib/decode-run.sh
NBX_AUTOTUNE=off timeout -k 5 100 node --test --test-name-pattern="packed weights" dist/test/decode_step.test.js > "$L/packed-noautotune.log" 2>&1
at "packed test, autotune off" $?; grep -E "^(not ok|ok|# pass|# fail)" "$L/packed-noautotune.log" | cut -c1-200 >> "$S"; grep -A12 "^not ok" "$L/packed-noautotune.log" | head -20 >> "$S"
for q4 in sub xsum perm xsum,perm; do
  NBX_DECODE_STEP_Q4=$q4 NBX_DEBUG=1 timeout -k 5 60 node dist/bench/quant.js --no-gemv --decode --decode-schemes int4-g128 --budget-s 55 > "$L/q4-$q4.log" 2>&1
  at "int4 Q4=$q4" $?; grep -E "tok/s|decode steps take|rror" "$L/q4-$q4.log" | head -6 >> "$S"
done
NBX_DECODE_STEP_Q4=xsum,perm NBX_DECODE_STEP_TRACE=1 timeout -k 5 60 node scripts/decode-step-check.mjs --shape llama3-8b --quant int4-g128 --batch 1 --steps 8 --prompt 64 --modes off,fused > "$L/trace-8b-int4-xp.log" 2>&1
at "trace 8b int4 xsum,perm" $?; grep -E "^(trace|fused)" "$L/trace-8b-int4-xp.log" >> "$S"
dec_queued
if [ "$(dec_left)" -lt 400 ]; then WGD_SWEEP=0 WGD_DIR=$DECD/wgdecode timeout -k 5 180 bash scripts/gpu-webgpu-decode.sh > "$L/webgpu.log" 2>&1; at webgpu $?; grep -E "tok/s|%|rc=" "$L/wgdecode/summary.txt" | tail -14 >> "$S"; fi
dec_pack
