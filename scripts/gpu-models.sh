#!/usr/bin/env bash
# One device call for the model runner: model/nn/generation tests on the card (CUDA and WebGPU),
# `nbx generate` on each device, and `nbx bench generate --device cuda` next to transformers.
#   run: source .gpu/bootstrap.sh && bash scripts/gpu-models.sh [parts...]   (carry .gpu and dist)
# The public suite is the tracked copy in test/conformance (pack.sh's copy is left out to stay under the 64 MiB transfer).
# Parts: info tests gen bench suite conf-cuda conf-webgpu cuda-tests exit bench-cuda bench-cuda-full final decode graphs soak
# (default: tests gen bench).
# 'final' runs info first (a fresh machine's first nbx info), then cuda-tests, conf-cuda and conf-webgpu
# side by side, then exit, then the CUDA op benchmarks (--quick). Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
parts=${*:-tests gen bench}
nvidia-smi --query-gpu=name,memory.used,clocks.sm --format=csv > "$OUT/gpu.txt" 2>&1
run_part() {
  local p=$1
  case $p in
    info) { TIMEFORMAT='first nbx info: %R s'; time node dist/src/cli/nbx.js info; TIMEFORMAT='second nbx info: %R s'; time node dist/src/cli/nbx.js info; } > "$OUT/info.log" 2>&1 ;;
    cuda-tests) timeout 200 node --test --test-concurrency=4 dist/test/architecture.test.js dist/test/models_transformers.test.js \
             dist/test/nn_module.test.js dist/test/readback.test.js dist/test/inplace.test.js dist/test/cuda*.test.js > "$OUT/cuda_tests.log" 2>&1
           echo "cuda-tests rc=$?" >> "$OUT/summary.txt" ;;
    exit) # a process that used both GPU backends must end promptly: the CLI's bench and a plain script
          { TIMEFORMAT='bench webgpu --quick: %R s'; time timeout 45 node dist/src/cli/nbx.js bench webgpu --quick > /dev/null 2>&1; echo "rc=$?"
            TIMEFORMAT='script using cuda and webgpu: %R s'; time timeout 30 node --input-type=module -e "import * as nbx from './dist/src/index.js'; const a = nbx.ones([4]).to('cuda'); const b = nbx.ones([4]).to('webgpu'); console.log(await a.data(), await b.data());"; echo "rc=$?"; } > "$OUT/exit.log" 2>&1 ;;
    final) run_part info
           run_part cuda-tests & run_part conf-cuda & run_part conf-webgpu & wait
           run_part exit; run_part bench-cuda ;;
    bench-cuda) timeout 100 node dist/bench/cuda.js --quick > "$OUT/bench_cuda.log" 2>&1
           echo "bench-cuda rc=$?" >> "$OUT/summary.txt" ;;
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
    decode) # issue #19's `nbx bench decode` (nbx vs gpt-fast-style compiled PyTorch vs transformers eager), one process per
            # shape so a slow shape leaves the others' results; DECODE_SHAPES picks shapes, DECODE_ARGS adds flags (--batch 1)
           for s in ${DECODE_SHAPES:-tinyllama llama3-8b mixtral-4l}; do
             timeout ${DECODE_TIMEOUT:-560} node dist/src/cli/nbx.js bench decode --device cuda --shape $s --json "$OUT/decode_$s.json" ${DECODE_ARGS:-} > "$OUT/decode_$s.log" 2>&1
             echo "decode $s rc=$?" >> "$OUT/summary.txt"
           done ;;
    graphs) # issue #19: CUDA graph tests, then where a decode step's time goes (dynamic vs static cache vs bare replays)
           timeout 240 node --test dist/test/static_decode.test.js > "$OUT/graphs_tests.log" 2>&1
           echo "graphs tests rc=$?" >> "$OUT/summary.txt"
           for s in ${PROBE_SHAPES:-tinyllama llama3-8b}; do
             timeout 200 node scripts/decode-probe.mjs --shape $s ${PROBE_ARGS:-} --json "$OUT/probe_$s.json" > "$OUT/probe_$s.log" 2>&1
             echo "probe $s rc=$?" >> "$OUT/summary.txt"
           done ;;
    soak) timeout 240 node scripts/soak-memory.mjs --devices cuda --json "$OUT/soak_cuda.json" > "$OUT/soak_cuda.log" 2>&1
           echo "soak cuda rc=$?" >> "$OUT/summary.txt" ;;
    bench-cuda-full) timeout 560 node dist/bench/cuda.js > "$OUT/bench_cuda_full.log" 2>&1
           echo "bench-cuda-full rc=$?" >> "$OUT/summary.txt" ;;
    conf-cuda) timeout 200 node dist/src/cli/nbx.js conformance test/conformance --device cuda > "$OUT/conf_cuda.log" 2>&1
           echo "conf-cuda rc=$?" >> "$OUT/summary.txt" ;;
    conf-webgpu) timeout 200 node dist/src/cli/nbx.js conformance test/conformance --device webgpu > "$OUT/conf_webgpu.log" 2>&1
           echo "conf-webgpu rc=$?" >> "$OUT/summary.txt" ;;
  esac
}
for p in $parts; do run_part $p; done
for f in "$OUT"/*.log; do echo "== $f"; tail -n 4 "$f"; done >> "$OUT/summary.txt" 2>&1
