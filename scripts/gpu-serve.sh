#!/usr/bin/env bash
# One device call for nbx serve (issue #22): the load generator against a server on CUDA, TinyLlama-1.1B
# shape in bfloat16 (random weights, word-level tokenizer; built in the server process, nothing on disk).
#   run: source .gpu/bootstrap.sh && bash scripts/gpu-serve.sh [quick] [target] [load]   (carry .gpu and dist)
# quick (default, <= 2 min): 64 concurrent streams, 64 requests of 128 tokens, 10% cancelled, single-stream
#         on a batch-1 server and on the load's server, 8 re-run alone; ratio, ITL, memory, isolation.
# target: the targets: 64 concurrent streams of 256 tokens (aggregate >= 15x single-stream,
#         ITL p99 <= 3x single-stream), nothing cancelled; single-stream measured on a batch-1 server
#         too (the faster is the baseline); a random 8 of the requests re-run alone (<= 150 s).
# load:   the load test: 1,000 streaming chat requests, 64 at a time, random prompt (8..256 words
#         = tokens) and output (16..256) lengths, 10% cancelled mid-stream; single stream also on a
#         batch-1 server (the faster is the ratio's baseline, as in 'target'); a random 48 of the
#         completed re-run alone (<= 5 min). Memory PASS/FAIL: the allocator's reserved bytes and the KV cache's
#         mapped bytes after the load and after the verification equal the warm level, to the byte.
# Each part stops by itself before its shell timeout: --timeout-s bounds the servers' start (the engine's
# warm-up included), the warm-up requests, the single streams and the load; --verify-timeout-s the
# re-runs alone, whose sample is cut beforehand to what fits (requests aborted at a limit, the report
# still printed). The shell timeout kills the whole process group (the server child too) 5 s later.
# Logs and JSON in $OUT (mem_<part>/: the allocator's segments at each memory reading); summary.txt has the report lines.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
parts=${*:-quick}
nvidia-smi --query-gpu=name,memory.used,clocks.sm --format=csv > "$OUT/gpu.txt" 2>&1
part() {  # name, shell timeout, load-serve flags...
  local name=$1 limit=$2; shift 2
  timeout -k 5 "$limit" node scripts/load-serve.mjs --shape tinyllama --device cuda --concurrency 64 "$@" \
    --json "$OUT/serve_$name.json" --mem-dump "$OUT/mem_$name" > "$OUT/serve_$name.log" 2>&1
  echo "$name rc=$?" >> "$OUT/summary.txt"; grep -vE '^# (nbx serve|load-serve child):' "$OUT/serve_$name.log" | tail -16 >> "$OUT/summary.txt"
}
for p in $parts; do
  case $p in
    quick)  part quick 120 --requests 64 --output 128 --prompt 16:64 --cancel 0.1 --single 2 --baseline-max-batch 1 --verify 8 --timeout-s 80 --verify-timeout-s 30 ;;
    target) part target 150 --requests 192 --output 256 --prompt 16:128 --cancel 0 --single 3 --baseline-max-batch 1 --verify 8 --timeout-s 100 --verify-timeout-s 40 ;;
    load)   part load 300 --requests 1000 --output 16:256 --prompt 8:256 --cancel 0.1 --single 2 --baseline-max-batch 1 --verify 48 --timeout-s 160 --verify-timeout-s 125 ;;
    *) echo "unknown part $p" >> "$OUT/summary.txt" ;;
  esac
done
cat "$OUT/summary.txt"
