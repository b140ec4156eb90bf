// Compiles the CUDA reduction modules (kernels/reduce.ts reduceModules) ahead of use, several at once
// (NVRTC runs on the libuv worker threads: set UV_THREADPOOL_SIZE), into $NBX_CACHE_DIR's kernel
// cache; later processes load them from disk. Doubles as the NVRTC compile check of every
// specialization on the card. Starts no new compile after --budget seconds (the rest compile on use).
// Order: the sum modules of float32/bfloat16/float16 (the benchmark's), then float32, then the rest.
//   UV_THREADPOOL_SIZE=16 node scripts/warm-reduce.mjs [--budget 30] [--dtypes float32,bfloat16]
import * as nbx from '../dist/src/index.js';
import { Nvrtc } from '../dist/src/backend/cuda/runtime/nvrtc.js';
import { CUDA_PRELUDE } from '../dist/src/ir/render_c.js';
import { reduceModules } from '../dist/src/backend/cuda/kernels/reduce.js';

const arg = (name, dflt) => { const i = process.argv.indexOf(name); return i >= 0 ? process.argv[i + 1] : dflt; };
const budget = Number(arg('--budget', '30')) * 1000;
const dtypes = arg('--dtypes', 'float32,bfloat16,float16,float64,int32,int64,bool,uint8').split(',');
const rank = (m) => (/^(rows|cols)( partials)? sum (float32|bfloat16|float16|float64)>/.test(m.label) ? 0 : m.label.includes('float32') ? 1 : 2);
const mods = reduceModules(dtypes).map((m, i) => ({ ...m, i })).sort((a, b) => rank(a) - rank(b) || a.i - b.i);
const cc = nbx.cuda.backend().ctx.info.cc;
const nv = Nvrtc.get();
const t0 = performance.now();
let next = 0, done = 0, cached = 0, failed = 0, ms = 0;
const worker = async () => {
  while (next < mods.length && performance.now() - t0 < budget) {
    const m = mods[next++];
    try {
      const c = await nv.compileAsync(`${CUDA_PRELUDE}\n${m.src}`, cc, { options: ['--std=c++17'], includeCudaHeaders: false, name: m.name });
      if (c.from === 'compiled') { done++; ms += c.compileMs; } else cached++;
    } catch (e) {
      failed++;
      console.error(`FAILED ${m.label}: ${String(e.message ?? e).slice(0, 1500)}`);
    }
  }
};
const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
await Promise.all(Array.from({ length: threads }, worker));
const wall = (performance.now() - t0) / 1000;
console.log(`reduce modules: ${mods.length} for [${dtypes}]; compiled ${done} (mean ${(ms / Math.max(done, 1)).toFixed(0)} ms each), ${cached} already cached, ${failed} failed, ${mods.length - next} left for on-demand; ${wall.toFixed(1)} s on ${threads} threads`);
if (failed) process.exitCode = 1;
