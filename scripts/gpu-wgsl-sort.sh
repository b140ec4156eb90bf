#!/usr/bin/env bash
# WebGPU native sort-family and FFT kernels on the H200's Vulkan adapter, host staging refused
# (NBX_WEBGPU_HOST_STAGING=0): test/webgpu_sort.test.ts (on a real GPU it also runs the long serial
# replays llvmpipe refuses), the conformance cases of those ops, and a short timing of the kernels against
# the CPU. Run from the repo root with .gpu/bootstrap.sh sourced and $OUT set; logs in $OUT/wgsl-sort/
# (summary.txt first). About 30-60 s.
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/wgsl-sort"; mkdir -p "$L"
S="$L/summary.txt"; : > "$S"
export NBX_WEBGPU_HOST_STAGING=0 NBX_WEBGPU_BACKEND=${NBX_WEBGPU_BACKEND:-vulkan}
FILTER='^(sort|argsort|msort|topk|kthvalue|median|nanmedian|mode|unique|unique_consecutive|searchsorted|bucketize|fft)'
source "$(dirname "$0")/lib/step.sh"
if [ ! -f dist/src/cli/nbx.js ] || [ ! -f dist/test/webgpu_sort.test.js ]; then st build 120 npx tsc -p tsconfig.json; fi
st info 20 node dist/src/cli/nbx.js info
st test 40 node --test dist/test/webgpu_sort.test.js
st conf 30 node dist/src/cli/nbx.js conformance test/conformance --device webgpu --filter "$FILTER" --verbose

# timings: WebGPU (sync after each rep) against the CPU on the same data; sort kernels with int32 indices
cat > "$L/bench.mjs" <<'EOF'
import * as nbx from '@REPO@/dist/src/index.js';
import { Tensor } from '@REPO@/dist/src/tensor/tensor.js';
import { kernel } from '@REPO@/dist/src/kernels/registry.js';
const info = await nbx.webgpu.init();
console.log('adapter:', info.adapter);
async function time(f, reps = 3) { await f(); await nbx.webgpu.synchronize(); const t0 = performance.now(); for (let i = 0; i < reps; i++) await f(); await nbx.webgpu.synchronize(); return (performance.now() - t0) / reps; }
function row(name, g, c) { console.log(`${name.padEnd(44)} webgpu ${g.toFixed(2).padStart(9)} ms   cpu ${c.toFixed(2).padStart(9)} ms   cpu/webgpu ${(c / g).toFixed(1)}x`); }
for (const [rows, n, stable] of [[4096, 256, true], [64, 65536, true], [4, 1 << 20, true], [256, 1024, false]]) {
  const x = nbx.randn([rows, n]), gx = x.to('webgpu');
  const gv = Tensor.empty([rows, n], 'float32', 'webgpu'), gi = Tensor.empty([rows, n], 'int32', 'webgpu');
  const cv = Tensor.empty([rows, n], 'float32', 'cpu'), ci = Tensor.empty([rows, n], 'int64', 'cpu');
  const g = await time(() => kernel('sort', 'webgpu', 'sort')(gx.ref(), rows, n, false, stable, gv.ref(), gi.ref()));
  const c = await time(() => kernel('sort', 'cpu', 'sort')(x.ref(), rows, n, false, stable, cv.ref(), ci.ref()), 1);
  row(`sort ${rows}x${n} stable=${stable}`, g, c);
}
{
  const rows = 256, n = 32768, k = 16, x = nbx.randn([rows, n]), gx = x.to('webgpu');
  const gv = Tensor.empty([rows, k], 'float32', 'webgpu'), gi = Tensor.empty([rows, k], 'int32', 'webgpu');
  const cv = Tensor.empty([rows, k], 'float32', 'cpu'), ci = Tensor.empty([rows, k], 'int64', 'cpu');
  row(`topk k=${k} ${rows}x${n}`, await time(() => kernel('topk', 'webgpu', 'topk')(gx.ref(), rows, n, k, true, true, gv.ref(), gi.ref())),
    await time(() => kernel('topk', 'cpu', 'topk')(x.ref(), rows, n, k, true, true, cv.ref(), ci.ref()), 1));
}
for (const [rows, n] of [[1024, 1024], [64, 65536], [4, 1000003]]) {
  const x = nbx.randn([rows, n]), gx = x.to('webgpu');
  row(`fft.fft ${rows}x${n}`, await time(() => nbx.fft.fft(gx)), await time(() => nbx.fft.fft(x), 1));
}
{
  const x = nbx.randn([8, 512, 512]), gx = x.to('webgpu');
  row('fft.rfft2 8x512x512', await time(() => nbx.fft.rfft2(gx)), await time(() => nbx.fft.rfft2(x), 1));
}
console.log('host staging used:', JSON.stringify(nbx.webgpu.hostStagingStats()));
EOF
sed -i "s#@REPO@#$PWD#g" "$L/bench.mjs"
st bench 45 node "$L/bench.mjs"
{
  echo "== adapter"; grep -iE 'webgpu|adapter|vulkan' "$L/info.log" | head -5
  echo "== tests"; grep -E '^# (tests|pass|fail|skip)|^not ok|NOT RUN|^# webgpu' "$L/test.log"
  echo "== conformance (sort family, fft)"; grep -E '^FAIL' "$L/conf.log" | head -20; grep -E "passed, .* failed" "$L/conf.log"
  echo "== skips by reason (expected: int64 indices/inputs, unique's sync readback)"; grep '^SKIP' "$L/conf.log" | sed 's/.*\]: //' | cut -c1-70 | sort | uniq -c | sort -rn | head
  echo "== timings"; grep -E 'adapter:|cpu/webgpu|host staging|Error' "$L/bench.log"
} | tee -a "$S"
