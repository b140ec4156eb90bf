#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-ring.sh (eleventh session, call 5): does the weight ring's depth
# limit the whole-step kernel's packed products? Llama-3-8B, int4-g128 and int8 projections, batch 1, the traced step's µs
# (GPU timestamps: compiles excluded) at NBX_DECODE_STEP_RING = 2, 3, 4 (and the default); a ring that does not fit shared
# memory declines (the trace then reads none).
DEC_DIR=decr source scripts/lib/decode-run.sh
for q in int4-g128 int8; do
  for r in default 2 3 4; do
    env $( [ $r = default ] || echo NBX_DECODE_STEP_RING=$r ) NBX_DEBUG=1 NBX_DECODE_STEP_TRACE=1 timeout -k 5 45 node scripts/decode-step-check.mjs --shape llama3-8b --quant $q --batch 1 --steps 4 --prompt 64 --modes fused > "$L/ring-$q-$r.log" 2>&1
    at "$q ring $r" $?; grep -E "^trace: step|^trace [DE]|composite" "$L/ring-$q-$r.log" | head -4 >> "$S"
  done
done
dec_pack
