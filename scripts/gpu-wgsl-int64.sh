#!/usr/bin/env bash
# WebGPU int64 emulation (src/ir/wgsl_int64.ts: vec2<u32> values, two storage words) on the H200's
# Vulkan adapter, host staging refused (NBX_WEBGPU_HOST_STAGING=0): test/webgpu_int64.test.ts (edge
# cases against the CPU), the sort/indexing kernel tests (int64 index I/O), the whole WebGPU conformance
# suite (expected: no int64 skips left, 0 failures), and timings of int64 kernels against int32 and the
# CPU. Run from the repo root with .gpu/bootstrap.sh sourced and $OUT set; logs in $OUT/wgsl-int64/
# (summary.txt first). About 20-40 s on the H200 (at most 60 s: every step has a timeout).
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/wgsl-int64"; mkdir -p "$L"
S="$L/summary.txt"; : > "$S"
export NBX_WEBGPU_HOST_STAGING=0 NBX_WEBGPU_BACKEND=${NBX_WEBGPU_BACKEND:-vulkan}
source "$(dirname "$0")/lib/step.sh"
if [ ! -f dist/src/cli/nbx.js ] || [ ! -f dist/test/webgpu_int64.test.js ]; then st build 120 npx tsc -p tsconfig.json; fi
st test 25 node --test dist/test/webgpu_int64.test.js dist/test/webgpu_sort.test.js dist/test/webgpu_indexing.test.js
st conf 15 node dist/src/cli/nbx.js conformance test/conformance --device webgpu

# timings: WebGPU (synchronized) against int32 on WebGPU and against the CPU, same data
cat > "$L/bench.mjs" <<'EOF'
import * as nbx from '@REPO@/dist/src/index.js';
const info = await nbx.webgpu.init();
console.log('adapter:', info.adapter);
async function time(f, reps = 5) { await f().data?.(); await nbx.webgpu.synchronize(); const t0 = performance.now(); for (let i = 0; i < reps; i++) f(); await nbx.webgpu.synchronize(); return (performance.now() - t0) / reps; }
const cpuTime = (f, reps = 1) => { f(); const t0 = performance.now(); for (let i = 0; i < reps; i++) f(); return (performance.now() - t0) / reps; };
function row(name, g64, g32, c) { console.log(`${name.padEnd(30)} int64 ${g64.toFixed(3).padStart(8)} ms   int32 ${g32.toFixed(3).padStart(8)} ms   int64/int32 ${(g64 / g32).toFixed(1).padStart(5)}x   cpu int64 ${c.toFixed(2).padStart(8)} ms`); }
const N = Number(process.env.NBX_I64_N ?? 1 << 22);
const a = nbx.randint(-(2 ** 40), 2 ** 40, [N]), b = nbx.randint(1, 2 ** 20, [N]);
const a32 = a.to('int32'), b32 = b.to('int32');
const [ga, gb, ga32, gb32] = [a, b, a32, b32].map((t) => t.to('webgpu'));
for (const [name, f] of [['add', nbx.add], ['mul', nbx.mul], ['floor_divide', nbx.floor_divide], ['remainder', nbx.remainder], ['maximum', nbx.maximum],
  ['bitwise_right_shift(x, 7)', (x) => nbx.bitwise_right_shift(x, 7)], ['to float32', (x) => x.to('float32')]]) {
  row(`${name} ${N}`, await time(() => f(ga, gb)), await time(() => f(ga32, gb32)), cpuTime(() => f(a, b)));
}
const m = a.reshape([1024, N / 1024]), gm = ga.reshape([1024, N / 1024]), gm32 = ga32.reshape([1024, N / 1024]);
for (const [name, f] of [['sum dim1', (x) => nbx.sum(x, 1)], ['sum all', (x) => nbx.sum(x)], ['argmax dim1', (x) => nbx.argmax(x, { dim: 1 })],
  ['cumsum dim1', (x) => nbx.cumsum(x, 1)], ['amax dim0', (x) => nbx.amax(x, 0)]]) {
  row(`${name} 1024x${N / 1024}`, await time(() => f(gm)), await time(() => f(gm32)), cpuTime(() => f(m)));
}
{
  const x = nbx.randint(-(2 ** 40), 2 ** 40, [256, 1024]), gx = x.to('webgpu'), gx32 = x.to('int32').to('webgpu');
  row('sort 256x1024 (values)', await time(() => nbx.sort(gx, { dim: 1, stable: true }).values, 3), await time(() => nbx.sort(gx32, { dim: 1, stable: true }).values, 3),
    cpuTime(() => nbx.sort(x, { dim: 1, stable: true }), 1));
}
{
  const w = nbx.randn([50000, 256]), gw = w.to('webgpu'), idx = nbx.randint(0, 50000, [8192]);
  const gi = idx.to('webgpu'), gi32 = idx.to('int32').to('webgpu');
  row('embedding 8192 of 50000x256', await time(() => nbx.nn.functional.embedding(gi, gw)), await time(() => nbx.nn.functional.embedding(gi32, gw)),
    cpuTime(() => nbx.nn.functional.embedding(idx, w)));
}
console.log('host staging used:', JSON.stringify(nbx.webgpu.hostStagingStats()));
EOF
sed -i "s#@REPO@#$PWD#g" "$L/bench.mjs"
st bench 20 node "$L/bench.mjs"
{
  echo "== tests"; grep -E '^# (tests|pass|fail|skip)|^not ok|NOT RUN' "$L/test.log"
  echo "== conformance (all, webgpu)"; grep -E '^FAIL' "$L/conf.log" | head -20; grep -E "passed, .* failed" "$L/conf.log"
  echo "== skips by reason (expected: float64/complex128, synchronous readback, llvmpipe-only limits absent)"
  grep '^SKIP' "$L/conf.log" | sed 's/.*\]: //' | cut -c1-70 | sort | uniq -c | sort -rn | head
  echo "== int64 skips (expected: none)"; grep '^SKIP' "$L/conf.log" | grep -i 'int64 is not' | head
  echo "== timings"; grep -E 'adapter:|int32 |host staging|Error' "$L/bench.log"
} | tee -a "$S"
