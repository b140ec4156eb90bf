#!/usr/bin/env bash
# Device calls for issues #19-#22: one script, parts chosen per call (each bounded by timeout -k 5).
#   run: source .gpu/bootstrap.sh && bash scripts/gpu-parts.sh PART...   (carry .gpu and dist)
# Parts:
#   fused    the fused decode kernels' tests on the card (cuda_llm, static_decode)
#   ab       decode tok/s (TinyLlama and 8B shapes, batch 1) under several env settings (AB_SETTINGS, AB_SHAPES)
#   peers    nbx bench decode with the gpt-fast peer: TinyLlama and 8B at batch 1 and 8, Mixtral-4l at batch 1
#   engine4  scripts/gpu-engine.sh graphs (engine throughput with CUDA graphs on/off, serve quick, graph test)
#   wgdecode scripts/gpu-webgpu-decode.sh (WebGPU decode on the card, CUDA in the same call)
#   moe      scripts/moe-bench.mjs (Mixtral-layer prefill: grouped expert GEMM vs the host-routed loop)
#   pdl      decode of the TinyLlama shape (batch 1, nbx only) with programmatic dependent launch off / wait / wait+trigger
#            (NBX_CUDA_PDL=0|1|2), then the graph, sampler and fused-kernel tests with NBX_CUDA_PDL=2
#   attn     scripts/attention-check.mjs (issue #20: the Hopper kernel's correctness and bench rows vs SDPA)
#   quant    the quantized GEMV check and bench (issue #21; QUANT_CMD overrides)
#   engine   scripts/gpu-engine.sh (paged attention on CUDA, the engine's soak and throughput)
#   qcore    scripts/quant-device-check.mjs cuda (quantized checkpoints on the card vs the CPU)
#   serve    scripts/gpu-serve.sh (issue #22's load test on the TinyLlama shape)
#   decode   nbx bench decode with its peers (DECODE_SHAPES, DECODE_ARGS)
#   webgpu   nbx bench decode --device webgpu on the TinyLlama shape (batch 1, nbx only)
#   cli      nbx generate on the host's CPU, twice (the README's main command, timed)
#   cpugen   nbx bench generate on the host's CPU (the embedded model against PyTorch 2.11 CPU)
#   tune     the autotuner's cache, to ship (src/autotune/shipped)
#   dstep    nbx.llm.fused_decode_step: tokens and logits against the op-by-op step (TinyLlama and 8B shapes), then
#            decode tok/s with NBX_DECODE_STEP=fused and off (DSTEP_SHAPES, DSTEP_TOKENS)
#   dring    decode tok/s with NBX_DECODE_STEP=fused under weight-ring shapes DRING_SETS (space-separated items per warp, or
#            "-" for the default) on DRING_SHAPES (default tinyllama)
#   peers8   the batch-8 rows of 'peers' alone (PEERS8_SHAPES, default tinyllama llama3-8b; PEERS8_TIMEOUT s per shape,
#            default 170): one nbx run and one compiled peer per shape instead of two of each, the peer's Inductor
#            cache in /tmp/nbx-inductor-cache (kept for a later call on the same warm machine)
#   stepprof Nsight Compute over one op-by-op static step of the TinyLlama shape at batch STEPPROF_BATCHES (default "8 1"),
#            grouped by kernel (scripts/decode-kernels.mjs, scripts/ncu-step-summary.mjs): where batch 8's time goes
#   dsoak    scripts/soak-decode.mjs on the TinyLlama shape (10,000 steps, batches of 1/2/4/8 joining and leaving,
#            reserved memory flat after warm-up, rows isolated: a row's tokens unchanged when another row's prompt changes)
# Logs go to $OUT; one summary line per part in $OUT/summary.txt.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"
L=$OUT/logs
note() { echo "$*" >> "$OUT/summary.txt"; }
for p in "$@"; do
  t0=$(date +%s)
  case $p in
    pdl)
      for m in 0 1 2; do
        NBX_CUDA_PDL=$m timeout 150 node dist/src/cli/nbx.js bench decode --device cuda --shape tinyllama --batch 1 --peers none --json "$L/pdl_$m.json" > "$L/pdl_$m.log" 2>&1
        note "pdl $m rc=$? $(grep -o '"decode_tok_s":[0-9.]*' "$L/pdl_$m.json" 2>/dev/null | head -1)"
      done
      NBX_CUDA_PDL=2 timeout 200 node --test --test-concurrency=3 dist/test/static_decode.test.js dist/test/sampler.test.js dist/test/cuda_llm.test.js > "$L/pdl_tests.log" 2>&1
      note "pdl tests rc=$? $(grep -E '^# (pass|fail)' "$L/pdl_tests.log" | tr '\n' ' ')" ;;
    fused)
      timeout -k 5 150 node --test --test-concurrency=2 dist/test/cuda_llm.test.js dist/test/static_decode.test.js > "$L/fused_tests.log" 2>&1
      note "fused tests rc=$? $(grep -E '^# (pass|fail)' "$L/fused_tests.log" | tr '\n' ' ') $(grep -E '^not ok' "$L/fused_tests.log" | head -5 | tr '\n' ' ')" ;;
    dstep)
      for shape in ${DSTEP_SHAPES:-tinyllama llama3-8b}; do
        NBX_DECODE_STEP_TRACE=1 timeout -k 5 ${DSTEP_CHECK_TIMEOUT:-120} node scripts/decode-step-check.mjs --shape $shape --steps 48 --modes ${DSTEP_MODES:-off,fused,phases} > "$L/dstep_check_$shape.log" 2>&1
        note "dstep check $shape rc=$?"; grep -E '^(off|fused|phases|trace)' "$L/dstep_check_$shape.log" | cut -c1-260 >> "$OUT/summary.txt"
        for m in ${DSTEP_BENCH_MODES:-fused off}; do
          NBX_DECODE_STEP=$m timeout -k 5 ${DSTEP_BENCH_TIMEOUT:-60} node dist/src/cli/nbx.js bench decode --device cuda --shape $shape --batch 1 --peers none --new-tokens ${DSTEP_TOKENS:-256} --json "$L/dstep_${shape}_$m.json" > "$L/dstep_${shape}_$m.log" 2>&1
          note "dstep bench $shape $m rc=$? $(grep -o '"decode_tok_s": *[0-9.]*' "$L/dstep_${shape}_$m.json" 2>/dev/null | tr '\n' ' ')"
        done
      done ;;
    dring)
      for shape in ${DRING_SHAPES:-tinyllama}; do
        for r in ${DRING_SETS:--}; do
          tag=${r/,/x}
          if [ "$r" = "-" ]; then env=(); else env=(NBX_DECODE_STEP_RING=$r); fi
          env "${env[@]}" NBX_DECODE_STEP=fused timeout -k 5 ${DSTEP_BENCH_TIMEOUT:-60} node dist/src/cli/nbx.js bench decode --device cuda --shape $shape --batch 1 --peers none --new-tokens ${DSTEP_TOKENS:-256} --json "$L/dring_${shape}_$tag.json" > "$L/dring_${shape}_$tag.log" 2>&1
          note "dring $shape ring=$r rc=$? $(grep -o '"decode_tok_s": *[0-9.]*' "$L/dring_${shape}_$tag.json" 2>/dev/null | tr '\n' ' ')"
        done
      done ;;
    ab)
      # decode tok/s of the TinyLlama and 8B shapes at batch 1 under settings AB_SETTINGS (';'-separated env assignments)
      IFS=';' read -ra sets <<< "${AB_SETTINGS:-NBX_GEMV_PREFETCH=1024;NBX_GEMV_PREFETCH=0;NBX_LLM_FUSED_GEMV=none;NBX_LLM_FUSION=0}"
      for shape in ${AB_SHAPES:-tinyllama llama3-8b}; do
        for i in "${!sets[@]}"; do
          env ${sets[$i]} timeout -k 5 ${AB_TIMEOUT:-45} node dist/src/cli/nbx.js bench decode --device cuda --shape $shape --batch ${AB_BATCH:-1} --peers none --new-tokens ${AB_TOKENS:-256} --json "$L/ab_${shape}_$i.json" > "$L/ab_${shape}_$i.log" 2>&1
          note "ab $shape [${sets[$i]}] rc=$? $(grep -o '"decode_tok_s": *[0-9.]*' "$L/ab_${shape}_$i.json" 2>/dev/null | tr '\n' ' ')"
        done
      done ;;
    peers8)
      for s in ${PEERS8_SHAPES:-tinyllama llama3-8b}; do
        TORCHINDUCTOR_CACHE_DIR=/tmp/nbx-inductor-cache timeout -k 5 ${PEERS8_TIMEOUT:-170} node dist/src/cli/nbx.js bench decode --device cuda --shape $s --batch 8 --peers gpt-fast --json "$L/peers8_$s.json" > "$L/peers8_$s.log" 2>&1
        note "peers8 $s rc=$?"; grep -E '^(nbx|gpt-fast) ' "$L/peers8_$s.log" >> "$OUT/summary.txt"; grep -E '^\| [A-Z]' "$L/peers8_$s.log" | grep -v '^| shape' >> "$OUT/summary.txt"
      done ;;
    stepprof)
      for B in ${STEPPROF_BATCHES:-8 1}; do
        NBX_DECODE_STEP=off timeout -k 5 ${STEPPROF_TIMEOUT:-110} /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum --csv node scripts/decode-kernels.mjs --shape ${STEPPROF_SHAPE:-tinyllama} --batch $B --steps 2 > "$L/stepprof_$B.csv" 2> "$L/stepprof_$B.err"
        note "stepprof batch $B rc=$?"; node scripts/ncu-step-summary.mjs "$L/stepprof_$B.csv" --steps 2 2>&1 | head -25 >> "$OUT/summary.txt"
      done ;;
    dsoak)
      timeout -k 5 ${DSOAK_TIMEOUT:-170} node scripts/soak-decode.mjs --device cuda --shape tinyllama --steps ${DSOAK_STEPS:-10000} --isolation 6 --json "$L/dsoak.json" > "$L/dsoak.log" 2>&1
      note "dsoak rc=$?"; grep -E '^(round +(6|30|60|90|120|150|180) |isolation|decode soak)' "$L/dsoak.log" >> "$OUT/summary.txt" ;;
    peers)
      # the issue #19 shapes next to the compiled PyTorch peer (gpt-fast style, reduce-overhead) in the same run
      for sb in "tinyllama 1,8 110" "llama3-8b 1,8 150" "mixtral-4l 1 110"; do
        set -- $sb
        timeout -k 5 $3 node dist/src/cli/nbx.js bench decode --device cuda --shape $1 --batch $2 --peers gpt-fast --json "$L/peers_$1.json" > "$L/peers_$1.log" 2>&1
        note "peers $1 rc=$?"; grep -E '^\| [A-Z]' "$L/peers_$1.log" | grep -v '^| shape' >> "$OUT/summary.txt"
      done ;;
    engine4)
      OUT=$L bash scripts/gpu-engine.sh graphs > "$L/engine4.log" 2>&1
      note "engine4 rc=$?"; cat "$L/engine_summary.txt" >> "$OUT/summary.txt" 2>/dev/null ;;
    wgdecode)
      OUT=$L bash scripts/gpu-webgpu-decode.sh > "$L/wgdecode.log" 2>&1
      note "wgdecode rc=$?"; cat "$L/wgdecode/summary.txt" >> "$OUT/summary.txt" 2>/dev/null ;;
    moe)
      OUT=$L timeout -k 5 100 node scripts/moe-bench.mjs > "$L/moe.log" 2>&1
      note "moe rc=$?"; tail -25 "$L/moe.log" >> "$OUT/summary.txt" ;;
    attn)
      NBX_CACHE_DIR=$(mktemp -d) timeout 280 node scripts/attention-check.mjs > "$L/attn.log" 2>&1
      note "attn rc=$?" ;;
    decode8b)
      timeout -k 5 70 node dist/src/cli/nbx.js bench decode --device cuda --shape llama3-8b --batch 1 --peers none --json "$L/decode_8b.json" > "$L/decode_8b.log" 2>&1
      note "decode8b rc=$? $(grep -o '"decode_tok_s":[0-9.]*' "$L/decode_8b.json" 2>/dev/null | head -1)" ;;
    servequick)
      OUT=$L bash scripts/gpu-serve.sh quick > "$L/serve.log" 2>&1
      note "serve quick rc=$?"; cat "$L/summary.txt" >> "$OUT/summary.txt" 2>/dev/null ;;
    quantfinal)
      timeout -k 5 140 node dist/bench/quant.js --device cuda --check --quick --gemv-formats int8,int4,q4_k,q6_k --new-tokens 32 --budget-s 80 --json "$L/quant.json" > "$L/quant.log" 2>&1
      note "quant rc=$?"; tail -30 "$L/quant.log" >> "$OUT/summary.txt" ;;
    engine)
      OUT=$L bash scripts/gpu-engine.sh > "$L/engine.log" 2>&1
      note "engine rc=$?"; cat "$L/engine_summary.txt" >> "$OUT/summary.txt" 2>/dev/null ;;
    qcore)
      timeout 200 node scripts/quant-device-check.mjs cuda > "$L/qcore.log" 2>&1
      note "qcore rc=$? $(tail -1 "$L/qcore.log")" ;;
    quant)
      eval "timeout 280 ${QUANT_CMD:-node dist/bench/quant.js --check}" > "$L/quant.log" 2>&1
      note "quant rc=$?" ;;
    serve)
      OUT=$L bash scripts/gpu-serve.sh ${SERVE_PARTS:-} > "$L/serve.log" 2>&1
      note "serve rc=$?"; cat "$L/summary.txt" >> "$OUT/summary.txt" 2>/dev/null ;;
    decode)
      for s in ${DECODE_SHAPES:-tinyllama llama3-8b mixtral-4l}; do
        timeout ${DECODE_TIMEOUT:-300} node dist/src/cli/nbx.js bench decode --device cuda --shape $s --json "$L/decode_$s.json" ${DECODE_ARGS:-} > "$L/decode_$s.log" 2>&1
        note "decode $s rc=$?"
      done ;;
    webgpu)
      timeout 200 node dist/src/cli/nbx.js bench decode --device webgpu --shape tinyllama --batch 1 --peers none --new-tokens 128 --json "$L/decode_webgpu.json" > "$L/decode_webgpu.log" 2>&1
      note "webgpu decode rc=$?" ;;
    cli)
      for i in 1 2; do { TIMEFORMAT="nbx generate (cpu, 50 tokens, seed 1): %R s wall, %U s user"; time timeout 60 node dist/src/cli/nbx.js generate "And God said" --device cpu --seed 1 --max-new-tokens 50; } >> "$L/cli.log" 2>&1; done
      note "cli $(grep -E 'decode:|wall' "$L/cli.log" | tr '\n' ' ')" ;;
    cpugen)
      timeout 120 node dist/src/cli/nbx.js bench generate > "$L/cpugen.log" 2>&1
      note "cpugen rc=$?" ;;
    tune)
      cp ~/.cache/nbxtensor/autotune.json "$L/autotune.json" 2>/dev/null; note "tune $(ls -la ~/.cache/nbxtensor/ 2>&1 | tr '\n' ' ')" ;;
    *) note "unknown part $p" ;;
  esac
  note "  ($p: $(( $(date +%s) - t0 )) s)"
done
[ -n "${NOTAR:-}" ] || { tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$L"; }
