#!/usr/bin/env bash
# quant helper, tenth session, second call (code at the commit READY names). Since quant-8: q4_k's wide unit (wu)
# is offered to the tuner at the shape's kw and at kw/2 (quant-8: wu nr2 db U1 1,764 GB/s at kw 1 against 1,448 at
# kw 2, the kw the tuner was given at 4096x14336); pb and the slower wu forms are sweep-only. Three parts:
# (1) GEMV table + Llama-3-8B decode (tuner's choice) as every call runs it (38 s);
# (2) Nsight Compute on one launch each of the best forms at 4096x14336 (int4 xf nr4 db kw2, q4_k wu nr2 db U1, q4_k
#     narrow nr2 db U1, int8 vec xs): warp stall reasons, warps per scheduler, DRAM throughput (30 s);
# (3) Nsight Compute kernel times of one int4-g128 decode step, 2 layers of the 8B shape run eagerly, grouped by
#     kernel (what a step spends outside the GEMVs; the tuning cache of (1) holds every choice) (28 s).
# <= 96 s of step limits + 3 s of kill grace; results in $OUT/quant9, summary in $OUT/quant9/summary.txt.
QUANT_DIR=quant9 source scripts/lib/quant-run.sh
NCU=/usr/local/cuda/bin/ncu; [ -x "$NCU" ] || NCU=ncu
qstep bench 38 --formats int4,int8,q4_k --budget-s 30 --json "$R/bench.json"
CF='[{"f":"int4","kw":2,"nr":4,"db":1},{"f":"q4_k","kw":1,"nr":2,"db":1,"U":1,"wu":1},{"f":"q4_k","kw":1,"nr":2,"db":1,"U":1},{"f":"int8","xf":0}]'
echo "$CF" | node -e 'for (const c of JSON.parse(require("fs").readFileSync(0, "utf8"))) console.log(JSON.stringify(c))' > "$R/stall_labels.txt"
timeout -k 1 30 "$NCU" -k quant_gemv_v --clock-control none --section WarpStateStats --section SchedulerStats --section Occupancy --section SpeedOfLight --page raw --csv \
  node scripts/quant-gemv-one.mjs --shape 4096x14336 --cfgs "$CF" > "$R/stalls.csv" 2> "$R/stalls.err"
echo "stalls rc=$?" >> "$R/stalls.err"
timeout -k 1 28 "$NCU" --metrics gpu__time_duration.sum --clock-control none --csv \
  node scripts/quant-step-kernels.mjs --scheme int4-g128 --layers 2 --steps 2 > "$R/step.csv" 2> "$R/step.err"
echo "step rc=$?" >> "$R/step.err"
{
  echo "== GEMV (tuner's choice) and decode"; grep -E "roofline|GB/s|tok/s|failed|skipped|rc=" "$R/bench.log"
  echo "== Nsight Compute, one launch each at 4096x14336 (clocks not locked; caches flushed before each)"
  node scripts/ncu-stall-summary.mjs "$R/stalls.csv" --labels "$R/stall_labels.txt" 2>&1; tail -n 3 "$R/stalls.err"
  echo "== Nsight Compute, one eager int4-g128 decode step, 2 layers of Llama-3-8B + its lm_head (kernel times, serialized)"
  node scripts/ncu-step-summary.mjs "$R/step.csv" --steps 2 2>&1 | head -30; tail -n 3 "$R/step.err"
} > "$R/summary.txt" 2>&1
cat "$R/summary.txt"
