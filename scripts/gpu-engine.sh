#!/usr/bin/env bash
# One device call for the engine (issues #19, #22), ≤ 2.5 minutes: a 10,000-step soak on CUDA (tiny random
# Llama, float32: memory flat after the warm-up, 250 requests re-run alone), then the engine's aggregate
# throughput on the TinyLlama-1.1B shape (bf16, 1 / 16 / 64 streams, greedy). `tests` adds the paged
# CUDA tests (passed on the H200 in call 2).
#   run: source .gpu/bootstrap.sh && bash scripts/gpu-engine.sh [tests]   (carry .gpu and dist; logs in $OUT)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S="$OUT/engine_summary.txt"; : > "$S"
if [ "${1:-}" = tests ]; then
  timeout -k 5 75 node --test dist/test/paged_cuda.test.js > "$OUT/engine_tests.log" 2>&1
  echo "tests rc=$?" >> "$S"; grep -E '^(not )?ok|^# (pass|fail)|error:' "$OUT/engine_tests.log" | head -12 >> "$S"
fi
NBX_AUTOTUNE=off timeout -k 5 75 node scripts/soak-engine.mjs --random --device cuda --steps 10000 --verify 250 \
  --json "$OUT/engine_soak.json" > "$OUT/engine_soak.log" 2>&1
echo "soak rc=$?" >> "$S"; grep -vE '^step [1-9]000:' "$OUT/engine_soak.log" | tail -8 >> "$S"
timeout -k 5 70 node scripts/engine-throughput.mjs --shape tinyllama --device cuda --streams 1,16,64 --prompt 128 --new 64 > "$OUT/engine_tput.log" 2>&1
echo "throughput rc=$?" >> "$S"; tail -5 "$OUT/engine_tput.log" >> "$S"
cat "$S"
