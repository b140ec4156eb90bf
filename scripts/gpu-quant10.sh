#!/usr/bin/env bash
# quant helper, tenth session, optional third call (code at the commit READY names). quant-9's decode was cut by its
# time budget (its GEMV table compiled and tuned every candidate first) and its step profile timed out (the int4
# shapes were not tuned yet). Measures what it missed, nothing else:
# (1) Llama-3-8B decode of bf16, q4_k_m and int4-g128 only (q4_k's wide unit, wu, now tuned at kw 1 where it wins:
#     q4_k 4096x14336 1,766 GB/s in quant-9 against 1,475-1,492 in quant-8) (75 s, budget 68);
# (2) Nsight Compute kernel times of one eager int4-g128 decode step, 2 layers of the 8B shape, grouped by kernel,
#     with (1)'s tuning cache (nothing tuned under the profiler) (25 s).
# <= 100 s of step limits + 2 s of kill grace; results in $OUT/quant10, summary in $OUT/quant10/summary.txt.
QUANT_DIR=quant10 source scripts/lib/quant-run.sh
NCU=/usr/local/cuda/bin/ncu; [ -x "$NCU" ] || NCU=ncu
qstep bench 75 --no-gemv --decode --decode-schemes bf16,q4_k_m,int4-g128 --budget-s 68 --json "$R/bench.json"
timeout -k 1 25 "$NCU" --metrics gpu__time_duration.sum --clock-control none --csv \
  node scripts/quant-step-kernels.mjs --scheme int4-g128 --layers 2 --steps 2 > "$R/step.csv" 2> "$R/step.err"
echo "step rc=$?" >> "$R/step.err"
{
  echo "== decode (tuner's choice)"; grep -E "tok/s|failed|skipped|rc=" "$R/bench.log"
  echo "== Nsight Compute, one eager int4-g128 decode step, 2 layers of Llama-3-8B + its lm_head (kernel times, serialized)"
  node scripts/ncu-step-summary.mjs "$R/step.csv" --steps 2 2>&1 | head -30; tail -n 3 "$R/step.err"
} > "$R/summary.txt" 2>&1
cat "$R/summary.txt"
