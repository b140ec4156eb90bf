#!/usr/bin/env bash
# One device call for nbx serve (issue #22): the load generator against a server on CUDA, TinyLlama-1.1B
# shape in bfloat16 (random weights, word-level tokenizer; built in the server process, nothing on disk).
#   run: source .gpu/bootstrap.sh && bash scripts/gpu-serve.sh [target] [load]   (carry .gpu and dist)
# target: the targets: 64 concurrent streams of 256 tokens (aggregate >= 15x single-stream,
#         ITL p99 <= 3x single-stream), nothing cancelled; single-stream measured on a batch-1 server
#         too (the faster is the baseline); 16 requests re-run alone to compare texts.
# load:   the load test: 1,000 streaming chat requests, 64 at a time, random prompt (8..256 words
#         = tokens) and output (16..256) lengths, 10% cancelled mid-stream; 64 re-run alone.
# Each part stops by itself (--timeout-s) before its shell timeout; logs and JSON in $OUT (summary.txt
# has the report lines). Together they fit a 10-minute call.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
parts=${*:-target load}
nvidia-smi --query-gpu=name,memory.used,clocks.sm --format=csv > "$OUT/gpu.txt" 2>&1
for p in $parts; do
  case $p in
    target) timeout 240 node scripts/load-serve.mjs --shape tinyllama --device cuda --concurrency 64 --requests 192 \
              --output 256 --prompt 16:128 --cancel 0 --single 3 --baseline-max-batch 1 --verify 16 --timeout-s 215 \
              --json "$OUT/serve_target.json" > "$OUT/serve_target.log" 2>&1
            echo "target rc=$?" >> "$OUT/summary.txt"; grep -vE '^#' "$OUT/serve_target.log" | tail -8 >> "$OUT/summary.txt" ;;
    load)   timeout 300 node scripts/load-serve.mjs --shape tinyllama --device cuda --concurrency 64 --requests 1000 \
              --output 16:256 --prompt 8:256 --cancel 0.1 --single 2 --verify 64 --timeout-s 270 \
              --json "$OUT/serve_load.json" > "$OUT/serve_load.log" 2>&1
            echo "load rc=$?" >> "$OUT/summary.txt"; grep -vE '^#' "$OUT/serve_load.log" | tail -8 >> "$OUT/summary.txt" ;;
    *) echo "unknown part $p" >> "$OUT/summary.txt" ;;
  esac
done
cat "$OUT/summary.txt"
