// The demo page: a few operations on navigator.gpu through nbxtensor's WebGPU backend, each checked
// against the CPU backend and timed (first run includes shader compilation). Without a WebGPU adapter
// the same operations run on the CPU. The outcome is also left in window.__nbxDemo for tests.
// Then the text-generation section (generate.js) loads the embedded model.
import './shims/globals.js'; // Node's process and Buffer, before the package loads
import * as nbx from 'nbxtensor';
import { setupGeneration } from './generate.js';

const state = { done: false, device: 'cpu', adapter: null, webgpuError: null, ops: [], error: null };
window.__nbxDemo = state;
const $ = (id) => document.getElementById(id);

function row(op) {
  const tr = document.createElement('tr');
  const vs = op.maxError === undefined ? '—' : `<span class="${op.ok ? 'ok' : 'bad'}">${op.ok ? '✓' : '✗'} max |Δ| ${op.maxError.toExponential(1)}</span>`;
  tr.innerHTML = `<td>${op.name}</td><td>${op.device}</td><td><code>${op.preview}</code></td><td class="num">${op.ms.toFixed(1)} ms</td><td>${vs}</td>`;
  $('results').querySelector('tbody').append(tr);
}

/** Runs `make(device)` on the demo device and on the CPU, times the first, compares the two. */
async function step(name, make, tol) {
  const t0 = performance.now();
  const t = make(state.device);
  const values = await t.data();
  const ms = performance.now() - t0;
  const op = { name, device: state.device, ms, preview: [...values.slice(0, 4)].map((v) => Number(v).toPrecision(4)).join(', ') + (values.length > 4 ? ', …' : '') };
  if (state.device !== 'cpu') {
    const ref = make('cpu').dataSync();
    op.maxError = 0;
    for (let i = 0; i < ref.length; i++) op.maxError = Math.max(op.maxError, Math.abs(Number(values[i]) - Number(ref[i])) / Math.max(1, Math.abs(Number(ref[i]))));
    op.ok = op.maxError <= tol;
  } else op.ok = true;
  state.ops.push(op);
  row(op);
}

async function main() {
  if (navigator.gpu) {
    try {
      const info = await nbx.webgpu.init();
      state.device = 'webgpu';
      state.adapter = info.adapter;
    } catch (e) { state.webgpuError = e.message; }
  } else state.webgpuError = 'navigator.gpu is undefined';
  $('status').textContent = state.device === 'webgpu'
    ? `WebGPU adapter: ${state.adapter}`
    : `No WebGPU adapter (${state.webgpuError}): running on the CPU backend instead.`;

  nbx.manual_seed?.(0);
  const A = nbx.randn([256, 256]), B = nbx.randn([256, 256]), x = nbx.randn([1 << 20]);
  const on = (t, d) => (d === 'cpu' ? t : t.to(d));
  await step('matmul 256×256 @ 256×256', (d) => nbx.matmul(on(A, d), on(B, d)), 1e-4);
  await step('gelu(x) over 1M', (d) => nbx.nn.functional.gelu(on(x, d)), 1e-5);
  await step('x * 0.5 + 1 (two kernels, batched)', (d) => nbx.add(nbx.mul(on(x, d), 0.5), 1), 1e-6);
  await step('sum over rows of 1024×1024', (d) => nbx.sum(on(x, d).view(1024, 1024), 1), 1e-4);
  await step('softmax over rows', (d) => nbx.softmax(on(A, d), 1), 1e-6);
  await step('float16 cast and back', (d) => on(x, d).to('float16').to('float32'), 0);
  // the chain a user writes most: many small ops, one readback
  const t0 = performance.now();
  let y = on(nbx.ones([256]), state.device);
  for (let i = 0; i < 500; i++) { const z = nbx.add(y, 1); y.dispose(); y = z; }
  const last = (await y.data())[0];
  const ms = performance.now() - t0;
  const chain = { name: '500 dependent small adds, one readback', device: state.device, ms, preview: String(last), ok: last === 501 };
  state.ops.push(chain);
  row(chain);
  if (state.device === 'webgpu') {
    const s = nbx.webgpu.memoryStats();
    $('stats').textContent = `${s.dispatches} dispatches in ${s.submits} submits, ${s.pipelines} pipelines; buffer pool: ${s.created} created, ${s.reuses} of ${s.allocations} allocations reused`;
  }
}

main().then(() => { state.done = true; }, (e) => {
  state.error = `${e.name}: ${e.message}`;
  state.done = true;
  $('status').textContent = `error: ${state.error}`;
  console.error(e);
}).then(() => setupGeneration(state.device === 'webgpu' ? ['webgpu', 'cpu'] : ['cpu']));
