#!/usr/bin/env bash
# Device calls for the serving engine (issues #19, #22). Parts (default: graphs):
#   graphs (<= 150 s in all, each piece bounded): the engine's throughput on the TinyLlama-1.1B shape (bf16,
#          greedy, prompts of 128, 64 new tokens; 1 / 16 / 64 streams, graphs on then off; one stream also
#          on a max-batch-1 engine) [<= 55 s]; nbx serve's quick load (64 concurrent streaming chat requests
#          of 128 tokens, 10% cancelled, single stream on a batch-1 server, 8 re-run alone) [<= 65 s]; the
#          engine's CUDA graph test (replayed = eager = alone, float32 and bf16) [<= 30 s].
#   soak:  a 10,000-step soak on CUDA (tiny random Llama, float32: memory flat after the warm-up, 250
#          requests re-run alone) [<= 80 s].
#   tests: the paged CUDA tests [<= 80 s].
#   run: source .gpu/bootstrap.sh && bash scripts/gpu-engine.sh [graphs] [soak] [tests]   (carry .gpu and dist; logs in $OUT)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S="$OUT/engine_summary.txt"; : > "$S"
parts=${*:-graphs}
for p in $parts; do
  case $p in
    graphs)
      timeout -k 5 55 node scripts/engine-throughput.mjs --shape tinyllama --device cuda --streams 1,16,64 --prompt 128 --new 64 --graphs on,off > "$OUT/engine_tput.log" 2>&1
      echo "throughput rc=$?" >> "$S"; grep -E '^\[graphs|^engine|Error|error' "$OUT/engine_tput.log" | head -16 >> "$S"
      timeout -k 5 65 node scripts/load-serve.mjs --shape tinyllama --device cuda --concurrency 64 --requests 64 --output 128 --prompt 16:64 \
        --cancel 0.1 --single 2 --baseline-max-batch 1 --verify 8 --timeout-s 54 --json "$OUT/serve_quick.json" > "$OUT/serve_quick.log" 2>&1
      echo "serve quick rc=$?" >> "$S"; grep -vE '^# (nbx serve|load-serve child):' "$OUT/serve_quick.log" | tail -14 >> "$S"
      timeout -k 5 30 node --test --test-name-pattern 'CUDA graphs' dist/test/engine_graphs.test.js > "$OUT/engine_graph_test.log" 2>&1
      echo "graph test rc=$?" >> "$S"; grep -E '^(not )?ok|^# (pass|fail)|rror' "$OUT/engine_graph_test.log" | grep -v 'does not match pattern' | head -8 >> "$S"
      ;;
    soak)
      NBX_AUTOTUNE=off timeout -k 5 75 node scripts/soak-engine.mjs --random --device cuda --steps 10000 --verify 250 \
        --json "$OUT/engine_soak.json" > "$OUT/engine_soak.log" 2>&1
      echo "soak rc=$?" >> "$S"; grep -vE '^step [1-9]000:' "$OUT/engine_soak.log" | tail -8 >> "$S"
      ;;
    tests)
      timeout -k 5 75 node --test dist/test/paged_cuda.test.js > "$OUT/engine_tests.log" 2>&1
      echo "tests rc=$?" >> "$S"; grep -E '^(not )?ok|^# (pass|fail)|error:' "$OUT/engine_tests.log" | head -12 >> "$S"
      ;;
    *) echo "unknown part $p" >> "$S" ;;
  esac
done
cat "$S"
