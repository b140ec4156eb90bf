#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="..." bash scripts/gpu-decode-final11.sh (eleventh session, last call): tests, the
# figures of record (TinyLlama batch 1-8, Llama-3-8B batch 1 and 8: the auto path's choice and timings), Llama-3-8B decode of
# bf16 / int8 / int4-g128 / q4_k_m with int4 unpacked the default way (xsum,perm), then int4 with NBX_DECODE_STEP_Q4=sub
# (each with a tuning cache of its own, so both step graphs are timed again), a phase trace of the int4 step, then the
# queued scripts.
DEC_DIR=decf source scripts/lib/decode-run.sh
dec_tests 150
dec_bench tinyllama 1,2,4,8 100
dec_bench llama3-8b 1,8 100
qrun() { # qrun NAME SCHEMES [ENV...]: the quant decode bench with a fresh tuning cache
  local n=$1 sc=$2; shift 2
  env NBX_CACHE_DIR="$(mktemp -d)" NBX_DEBUG=1 "$@" timeout -k 5 90 node dist/bench/quant.js --no-gemv --decode --decode-schemes "$sc" --budget-s 85 > "$L/$n.log" 2>&1
  at "$n" $?; grep -E "tok/s|decode steps take|rror" "$L/$n.log" | head -10 >> "$S"
}
qrun quant bf16,int8,int4-g128,q4_k_m
qrun quant-q4sub int4-g128 NBX_DECODE_STEP_Q4=sub
NBX_DECODE_STEP_TRACE=1 timeout -k 5 60 node scripts/decode-step-check.mjs --shape llama3-8b --quant int4-g128 --batch 1 --steps 8 --prompt 64 --modes off,fused > "$L/trace-8b-int4.log" 2>&1
at "trace 8b int4" $?; grep -E "^(trace|fused)" "$L/trace-8b-int4.log" >> "$S"
dec_queued
if [ "$(dec_left)" -lt 470 ]; then # Nsight Compute of the int8 step (the kernel's int8 products ran at ~1.3 TB/s in call 1)
  NBX_DECODE_STEP=fused timeout -k 5 80 /usr/local/cuda/bin/ncu --kernel-name decode_step --launch-skip 2 --launch-count 1 --set full \
    node scripts/decode-step-check.mjs --shape llama3-8b --quant int8 --batch 1 --steps 4 --prompt 64 --modes fused > "$L/ncu-8b-int8.txt" 2>&1
  at "ncu 8b int8" $?
  grep -E "Duration|DRAM Throughput|Issued Ipc|Issue Slots Busy|No Eligible|Eligible Warps|Local Memory Spilling Requests  |excessive" "$L/ncu-8b-int8.txt" | head -12 >> "$S"
fi
dec_pack
