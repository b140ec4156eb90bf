#!/usr/bin/env bash
# One device call of a working session: runs the named parts and leaves logs under $OUT (tarred).
#   bash scripts/gpu-session.sh PART...   parts: launch suites suitesback norm batch gemm ew attn webgpu wgsl cold shipped tests conf bench
# Needs .gpu/ from ../shared/device/pack.sh plus .gpu/gen.py (the suite generator) and .gpu/launch_cost
# (gcc -O2 -o .gpu/launch_cost scripts/native/launch_cost.c -ldl). Each part has a time limit; a failing part does not stop the others. Summary in $OUT/summary.txt.
set -u
source .gpu/bootstrap.sh
# Parts write under a work folder (the device tool returns at most 8 files from $OUT): at the end it is
# tarred into $OUT/all.tgz, next to summary.txt and the shipped H200 autotune file as it stands.
RET=${OUT:-/tmp/out}; mkdir -p "$RET"
OUT=/tmp/session-work; rm -rf "$OUT"; mkdir -p "$OUT"
export OUT NBX_DIST_PREBUILT=1
# Each step runs under a hard limit (SIGKILL 5 s after SIGTERM), and leaves no process behind: a part's
# stray node process would otherwise share the GPU with the next part and skew its timings.
st() {
  local n=$1 to=$2; shift 2; local t0=$(date +%s); echo "== $n: $*" >> "$OUT/summary.txt"
  timeout -k 5 "$to" "$@" > "$OUT/$n.log" 2>&1; local rc=$?
  pkill -9 -x node 2>/dev/null; sleep 0.5
  echo "$n rc=$rc $(( $(date +%s) - t0 ))s; GPU apps after: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | wc -l)" >> "$OUT/summary.txt"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv > "$OUT/gpu.txt" 2>&1
for part in "$@"; do
  case $part in
    launch) st launch 60 .gpu/launch_cost; st host-fresh 40 node scripts/host-profile.mjs cuda ;;
    suites)
      for s in "11 2" "23 3"; do set -- $s
        st gen$1 120 python3 .gpu/gen.py /tmp/suite$1 --seed $1 --scale $2
        st conf$1-cpu 120 node dist/src/cli/nbx.js conformance /tmp/suite$1 --device cpu
        st conf$1-cuda 150 node dist/src/cli/nbx.js conformance /tmp/suite$1 --device cuda
      done ;;
    suitesback)
      # suites made by PyTorch 2.11 with other seeds and sizes, brought back (suites211.tgz) for local work
      for s in "11 2" "23 3" "37 1" "41 2"; do set -- $s
        st gen$1 120 python3 .gpu/gen.py /tmp/s211/seed$1 --seed $1 --scale $2
        st conf$1-cpu 120 node dist/src/cli/nbx.js conformance /tmp/s211/seed$1 --device cpu
      done
      tar czf "$RET/suites211.tgz" -C /tmp/s211 . ;;
    suites-gpu)
      # PyTorch 2.11 suites of other seeds on every device of the card (the hidden-suite check)
      st gen23 60 python3 .gpu/gen.py /tmp/g211/seed23 --seed 23 --scale 3
      st gen41 60 python3 .gpu/gen.py /tmp/g211/seed41 --seed 41 --scale 2
      for s in 23 41; do
        st conf$s-cpu 60 node dist/src/cli/nbx.js conformance /tmp/g211/seed$s --device cpu
        st conf$s-webgpu 90 node dist/src/cli/nbx.js conformance /tmp/g211/seed$s --device webgpu
      done
      st conf23-cuda 150 node dist/src/cli/nbx.js conformance /tmp/g211/seed23 --device cuda
      st conf41-cuda-half 60 node dist/src/cli/nbx.js conformance /tmp/g211/seed41 --device cuda --filter 'grid_sample|scatter|index_add|index_put|float16|bfloat16' ;;
    profmm) mkdir -p /tmp/profmm && (cd /tmp/profmm && st prof-mm 60 node --cpu-prof "$OLDPWD/scripts/prof-matmul.mjs") && st prof-mm-top 20 node scripts/profile-summary.mjs /tmp/profmm ;;
    suite23) st gen23 60 python3 .gpu/gen.py /tmp/suite23 --seed 23 --scale 3; st conf23-cpu 60 node dist/src/cli/nbx.js conformance /tmp/suite23 --device cpu; st conf23-cuda 90 node dist/src/cli/nbx.js conformance /tmp/suite23 --device cuda ;;
    diag) st diag 120 env NBX_CACHE_DIR=/tmp/bench-cache node scripts/diag-percall.mjs ;;
    diag-ew) st diag-ew 150 env NBX_CACHE_DIR=/tmp/bench-cache node scripts/diag-ew.mjs ;;
    diag-gemv) st diag-gemv 120 env NBX_CACHE_DIR=/tmp/bench-cache node scripts/diag-percall.mjs --gemv ;;
    norm) st norm 90 env NBX_CACHE_DIR=/tmp/bench-cache node dist/bench/cuda_norm.js ;;
    batch) [ -f scripts/gpu-batch.sh ] && st batch 120 bash scripts/gpu-batch.sh ;;
    gemm) [ -f scripts/gpu-gemm.sh ] && st gemm 180 bash scripts/gpu-gemm.sh
      # the shipped file with the measured GEMM choices merged in, used by later parts of this call
      [ -f "$OUT/gemm/nvidia-h200-sm_90.json" ] && cp "$OUT/gemm/nvidia-h200-sm_90.json" src/autotune/shipped/nvidia-h200-sm_90.json ;;
    ew) [ -f scripts/gpu-ew.sh ] && st ew 150 bash scripts/gpu-ew.sh
      [ -f "$OUT/ew/nvidia-h200-sm_90.json" ] && cp "$OUT/ew/nvidia-h200-sm_90.json" src/autotune/shipped/nvidia-h200-sm_90.json ;;
    attn) [ -f scripts/gpu-attn.sh ] && st attn 180 bash scripts/gpu-attn.sh ;;
    webgpu) [ -f scripts/gpu-webgpu.sh ] && st webgpu 170 bash scripts/gpu-webgpu.sh ;;
    wgsl-*|reduce|webgpu-reduce) [ -f scripts/gpu-$part.sh ] && st $part 150 bash scripts/gpu-$part.sh ;;
    torch-gemv) mkdir -p /tmp/tew && st torch-gemv 60 python3 scripts/torch-ew-profile.py /tmp/tew --gemv ;;
    torch-ew) mkdir -p /tmp/tew && st torch-ew 60 python3 scripts/torch-ew-profile.py /tmp/tew ;;
    bench-ew) st bench-ew 120 env NBX_CACHE_DIR=/tmp/bench-cache node dist/bench/cuda.js --only ew ;;
    conf-cuda) st conf-cuda 290 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda ;;
    webgpu-tune)
      # the WebGPU launch configurations measured afresh (shipped ones ignored), returned for shipping
      rm -rf /tmp/wgtune; st webgpu-tune 100 env NBX_AUTOTUNE_SHIPPED=0 NBX_AUTOTUNE=full NBX_CACHE_DIR=/tmp/wgtune node dist/bench/webgpu_tune.js
      [ -f /tmp/wgtune/autotune.json ] && cp /tmp/wgtune/autotune.json "$RET/webgpu-autotune.json" ;;
    gemv) st gemv-check 90 node test/gen/cuda_gemv_configs.mjs ;;
    # the small-M and GEMM choices measured afresh (shipped entries ignored), returned as bench-autotune.json for shipping
    bench-gemm-fresh) st bench-gemm-fresh 200 env NBX_AUTOTUNE_SHIPPED=0 NBX_CACHE_DIR=/tmp/bench-cache node dist/bench/cuda.js --only gemm ;;
    bench-gemm) st bench-gemm 150 env NBX_CACHE_DIR=/tmp/bench-cache node dist/bench/cuda.js --only gemm ;;
    wgsl) for s in wgsl-sort wgsl-index wgsl-int64; do [ -f scripts/gpu-$s.sh ] && st $s 90 bash scripts/gpu-$s.sh; done ;;
    cold)
      # precompile the cold-start chain's kernels into a fresh cache, ship them, then measure cold vs warm
      # twice: the second process compiles what a process reading the first one's tuned choices needs
      # with the shipped kernels moved aside, so the chain compiles (and ships) every kernel it needs,
      # not only those the current set lacks
      rm -rf /tmp/ship /tmp/oldship; mkdir -p /tmp/oldship; mv src/backend/cuda/shipped-kernels/*.nbxmod /tmp/oldship/ 2>/dev/null
      st warm-chain 120 env NBX_CACHE_DIR=/tmp/ship node dist/bench/cuda_coldstart.js --child
      st warm-chain2 60 env NBX_CACHE_DIR=/tmp/ship node dist/bench/cuda_coldstart.js --child
      if ls /tmp/ship/nvrtc/*.nbxmod >/dev/null 2>&1; then
        (cd /tmp/ship/nvrtc && tar czf "$OUT/shipped-kernels.tgz" *.nbxmod)
        cp /tmp/ship/nvrtc/*.nbxmod src/backend/cuda/shipped-kernels/
      else mv /tmp/oldship/*.nbxmod src/backend/cuda/shipped-kernels/ 2>/dev/null
      fi
      # and the chain's measured configurations, so the first process of the measurement sweeps nothing
      [ -f /tmp/ship/autotune.json ] && cp /tmp/ship/autotune.json "$OUT/cold-autotune.json" && \
        node scripts/merge-autotune.mjs src/autotune/shipped/nvidia-h200-sm_90.json src/autotune/shipped/nvidia-h200-sm_90.json /tmp/ship/autotune.json >> "$OUT/summary.txt"
      st cold 120 node dist/bench/cuda_coldstart.js ;;
    conf)
      st conf-cuda 150 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda
      st conf-cuda-native 150 env NBX_CUDA_HOST_STAGING=0 node dist/src/cli/nbx.js conformance .gpu/conformance --device cuda
      st conf-webgpu 150 env NBX_WEBGPU_HOST_STAGING=0 node dist/src/cli/nbx.js conformance .gpu/conformance --device webgpu ;;
    tests) st tests 280 node --test --test-concurrency=8 dist/test/ ;;
    # the benchmarks share one cache (returned as bench-autotune.json: what they tuned, to ship)
    bench) st bench-cuda 150 env NBX_CACHE_DIR=/tmp/bench-cache node dist/bench/cuda.js ;;
    bench-attn) st bench-attn 90 env NBX_CACHE_DIR=/tmp/bench-cache node dist/bench/cuda_attention.js ;;
    bench-webgpu) st bench-webgpu 120 env NBX_CACHE_DIR=/tmp/bench-cache node dist/bench/webgpu.js ;;
  esac
done
cp src/autotune/shipped/nvidia-h200-sm_90.json "$RET/shipped-h200.json"
[ -f /tmp/bench-cache/autotune.json ] && cp /tmp/bench-cache/autotune.json "$RET/bench-autotune.json"
[ -f "$OUT/shipped-kernels.tgz" ] && cp "$OUT/shipped-kernels.tgz" "$RET/"
tar czf "$RET/all.tgz" -C "$OUT" . 2>/dev/null
cp "$OUT/summary.txt" "$RET/summary.txt"
cat "$OUT/summary.txt"
for f in "$OUT"/*.log; do echo "---- $(basename $f)"; tail -n 20 "$f"; done 2>/dev/null | tail -c 9000
