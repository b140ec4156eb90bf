#!/usr/bin/env bash
# Issue #21 on the H200: the tensor-core quant GEMVs' whole-line (co) rings of 2-3 stages (three blocks per SM, commit
# 7cf7945, not yet run on the card) against the seventh session's best. Run: source .gpu/bootstrap.sh && bash scripts/gpu-quant-rings.sh
mkdir -p "$OUT/quant"
export NBX_CACHE_DIR=$(mktemp -d)
timeout -k 3 60 node dist/bench/quant.js --formats int4,int8 --json "$OUT/quant/bench.json" > "$OUT/quant/bench.log" 2>&1
echo "bench rc=$?" >> "$OUT/quant/bench.log"
timeout -k 3 75 node dist/bench/quant.js --formats int4,int8 --sweep --sweep-focus --no-decode --budget-s 60 > "$OUT/quant/sweep.log" 2>&1
echo "sweep rc=$?" >> "$OUT/quant/sweep.log"
