#!/usr/bin/env bash
# One device call for the engine (issues #19, #22): the CUDA paged attention kernel against the CPU
# composite, the VMM-backed pools, the engine batched = alone on CUDA; a 10,000-step soak on CUDA (tiny
# random Llama, float32: memory flat after warm-up, every 10th request re-run alone); the engine's
# aggregate throughput on the TinyLlama-1.1B shape (bf16, 1 / 16 / 64 streams). ≤ 4 minutes.
#   run: source .gpu/bootstrap.sh && bash scripts/gpu-engine.sh   (carry .gpu and dist; logs in $OUT)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S="$OUT/engine_summary.txt"; : > "$S"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader >> "$S" 2>&1
timeout 75 node --test dist/test/paged_cuda.test.js > "$OUT/engine_tests.log" 2>&1
echo "tests rc=$?" >> "$S"; grep -E '^(not )?ok|^# (pass|fail)|error:|Error' "$OUT/engine_tests.log" | head -20 >> "$S"
NBX_AUTOTUNE=off timeout 110 node scripts/soak-engine.mjs --random --device cuda --steps 10000 --verify 250 \
  --json "$OUT/engine_soak.json" > "$OUT/engine_soak.log" 2>&1
echo "soak rc=$?" >> "$S"; grep -vE '^step [1-9]000:' "$OUT/engine_soak.log" | tail -9 >> "$S"; grep -E '^step (1|5|9)000:' "$OUT/engine_soak.log" >> "$S"
timeout 50 node scripts/engine-throughput.mjs --shape tinyllama --device cuda --streams 1,16,64 --prompt 128 --new 128 > "$OUT/engine_tput.log" 2>&1
echo "throughput rc=$?" >> "$S"; tail -5 "$OUT/engine_tput.log" >> "$S"
cat "$S"
