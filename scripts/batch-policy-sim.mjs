// Replays a conformance run through the launch batch's real policy without a GPU (no NVRTC, no
// launches): a fake 'cuda' device computes on the CPU, and every elementwise op is first offered to
// a LaunchBatch whose compile is a cost model (NVRTC ms = base + per kind, defaults from nvcc -cubin
// timings of batch modules, see below) and whose flush only counts. Prints the batch stats: rebuilds, kinds
// compiled, modelled compile ms, commands / direct launches.
//   node scripts/batch-policy-sim.mjs <suite dir> [filter regex] [base ms] [ms per kind]
//   default model 400 ms + 40 ms/kind: nvcc -cubin of batch modules on a loaded 2-core host (23 kinds
//   2.6 s, 256 kinds 20.5 s); NVRTC on the GPU host is faster, so this errs on the slow side.
//   (NBX_CUDA_BATCH_* knobs apply as in a real run; --write-module FILE keeps the last module source)
import { writeFileSync } from 'node:fs';
import { registerBackend } from '../dist/src/backend/backend.js';
import { cpuBackend } from '../dist/src/backend/cpu/index.js';
import { setStagingProvider, kernelCpu } from '../dist/src/kernels/registry.js';
import { LaunchBatch } from '../dist/src/backend/cuda/runtime/launch_batch.js';
import { runSuite } from '../dist/src/conformance/runner.js';

const args = process.argv.slice(2);
const wi = args.indexOf('--write-module');
const moduleFile = wi >= 0 ? args.splice(wi, 2)[1] : null;
const [dir = '../shared/conformance/public', filter, base = '400', perKind = '40'] = args;

class SimBatch extends LaunchBatch {
  constructor() {
    const ctx = { info: { maxThreadsPerBlock: 1024 }, pending: null, flushPending() { const f = this.pending; this.pending = null; f?.(); } };
    super({ ctx, stream: {} }, process.env);
    this.modelled = [];
  }
  compile(src) {
    const kinds = (src.match(/^__device__ __forceinline__ void ewb/gm) ?? []).length;
    const ms = Number(base) + Number(perKind) * kinds;
    this.modelled.push(`${kinds}:${ms}`);
    return { kernel: {}, compiledMs: ms };
  }
  flush() {
    if (this.ctx.pending === this.flushFn) this.ctx.pending = null;
    if (this.count === 0) return;
    this.stats.batches++; this.stats.commands += this.count;
    this.count = 0; this.pos = 1; this.flushNo++; this.batchKinds = [];
  }
}
const batch = new SimBatch();
const fake = (r) => ({ ...r, buf: { ptr: 0x10000n } });
registerBackend({
  ...cpuBackend, type: 'cuda',
  elementwise(expr, ins, params, out) {
    batch.tryElementwise(expr, ins.map(fake), params, fake(out));
    batch.ctx.flushPending(); // stand-in for the real flush points: the CPU computes right away
    return cpuBackend.elementwise(expr, ins, params, out);
  },
});
setStagingProvider('cuda', (name) => kernelCpu(name));
const t0 = performance.now();
const res = await runSuite(dir, { device: 'cuda', filter: filter ? new RegExp(filter) : undefined });
console.log(`cases: ${res.passed} passed, ${res.failed} failed, ${res.skipped} skipped (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
console.log(`model: ${base} ms + ${perKind} ms/kind; modules (kinds:ms): ${batch.modelled.join(' ')}`);
console.log(`batch stats: ${JSON.stringify(batch.stats, (k, v) => (typeof v === 'number' ? Math.round(v) : v))}`);
if (moduleFile) writeFileSync(moduleFile, batch.source);
