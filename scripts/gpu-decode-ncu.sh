#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="..." bash scripts/gpu-decode-ncu.sh (eleventh session, call 3): the decode tests
# (the packed-weight test now on shared tokens), Nsight Compute of one whole-step launch at Llama-3-8B's shape with int4
# projections (why the kernel's products run at 2-3 TB/s there: call 1/2 traces), the Mixtral-4l row against the
# compiled gpt-fast peer (issue #19's MoE row), then the queued scripts.
DEC_DIR=decq3 source scripts/lib/decode-run.sh
dec_tests 150
NCU=/usr/local/cuda/bin/ncu; [ -x "$NCU" ] || NCU=ncu
for q in int4-g128; do
  NBX_DECODE_STEP=fused timeout -k 5 100 "$NCU" --kernel-name decode_step --launch-skip 2 --launch-count 1 --set full \
    node scripts/decode-step-check.mjs --shape llama3-8b --quant $q --batch 1 --steps 4 --prompt 64 --modes fused > "$L/ncu-8b-$q.txt" 2>&1
  at "ncu 8b $q" $?
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Issued Ipc|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued|Registers Per|Local Memory|L2 Hit" "$L/ncu-8b-$q.txt" | head -20 >> "$S"
done
dec_queued
[ "$(dec_left)" -lt 390 ] && dec_peer mixtral-4l 1 170
dec_pack
