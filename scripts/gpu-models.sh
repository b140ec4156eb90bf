#!/usr/bin/env bash
# One device call for the model runner: model/nn/generation tests on the card (CUDA and WebGPU),
# `nbx generate` on each device, and `nbx bench generate --device cuda` next to transformers.
#   run: source .gpu/bootstrap.sh && bash scripts/gpu-models.sh [parts...]   (carry .gpu and dist)
# The public suite is the tracked copy in test/conformance (pack.sh's copy is left out to stay under the 64 MiB transfer).
# Parts: tests gen bench suite conf-cuda conf-webgpu (default: tests gen bench). Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
parts=${*:-tests gen bench}
nvidia-smi --query-gpu=name,memory.used,clocks.sm --format=csv > "$OUT/gpu.txt" 2>&1
for p in $parts; do
  case $p in
    tests) timeout 240 node --test --test-concurrency=4 dist/test/models_transformers.test.js dist/test/models.test.js \
             dist/test/nn_module.test.js dist/test/generation.test.js dist/test/models_kjv.test.js > "$OUT/tests.log" 2>&1
           echo "tests rc=$?" >> "$OUT/summary.txt" ;;
    gen) for d in cuda webgpu cpu; do
           echo "== $d" >> "$OUT/generate.log"
           timeout 60 node dist/src/cli/nbx.js generate "And God said" --device $d --seed 1 --max-new-tokens 50 >> "$OUT/generate.log" 2>&1
           echo " rc=$?" >> "$OUT/generate.log"
         done ;;
    bench) timeout 420 node dist/src/cli/nbx.js bench generate --device cuda > "$OUT/bench_generate.log" 2>&1
           echo "bench rc=$?" >> "$OUT/summary.txt" ;;
    suite) timeout 420 node --test --test-concurrency=8 dist/test/ > "$OUT/suite.log" 2>&1
           echo "suite rc=$?" >> "$OUT/summary.txt" ;;
    conf-cuda) timeout 290 node dist/src/cli/nbx.js conformance test/conformance --device cuda > "$OUT/conf_cuda.log" 2>&1
           echo "conf-cuda rc=$?" >> "$OUT/summary.txt" ;;
    conf-webgpu) timeout 290 node dist/src/cli/nbx.js conformance test/conformance --device webgpu > "$OUT/conf_webgpu.log" 2>&1
           echo "conf-webgpu rc=$?" >> "$OUT/summary.txt" ;;
  esac
done
tail -3 "$OUT"/*.log >> "$OUT/summary.txt" 2>&1
