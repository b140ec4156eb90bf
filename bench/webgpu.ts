// WebGPU benchmarks next to the CUDA backend and PyTorch measured in the same run: elementwise a*x+b
// and a+b and reductions over 1 GiB (GB/s), float32/float16 GEMM 4096^3 (TFLOP/s: the tiled kernels
// always, the subgroup-matrix f16 kernel too when enabled), and the per-op cost of a dependent chain of
// 1,000 small adds (µs/op, amortized by command batching).
// Before timing it prints what a repeat needs to explain a slow run: the adapter's identity, features
// and subgroup-matrix configurations, the Dawn toggles, the limits requested, the GEMM path, where the
// launch configurations come from (shipped/user cache), and per benchmark the first call (incl.
// pipeline compile). Every row is printed the moment it is measured ("row ..." lines, with the seconds
// since start) and each phase says how long it took, so a run cut short by a timeout still has numbers.
// With --check it first compares GEMMs against the CPU on several shapes (non-multiples of the tile,
// transposed operands, both dtypes, both f16 paths) and prints the worst relative error per shape.
// --quick (or a software adapter such as llvmpipe) uses small sizes. --no-peers skips CUDA and
// PyTorch; --no-cuda / --no-torch skip one of them. Peers run fewer repetitions (a short part).
// Run: node dist/bench/webgpu.js [--quick] [--check] [--no-peers] [--no-cuda] [--no-torch]
import { execFileSync } from 'node:child_process';
import * as nbx from '../src/index.js';
import { TORCH_EVENT_TIMER } from './gpu_timing.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { type Dev, secs, sinceStartMs, out, sync, axpb, filledOn, tuneSources } from './webgpu_util.js';
import { hasSmmPlan, smmStatus, useSubgroupMatrix } from '../src/backend/webgpu/kernels/gemm_smm.js';
import { exitPromptly } from '../src/backend/exit.js';

const GiB = 2 ** 30;


/** Seconds per call: the first call (compiles) timed alone, then `reps` calls after a second warm-up. */
async function timeOn(dev: Dev, fn: () => void, reps: number): Promise<{ s: number; firstMs: number }> {
  const t0 = performance.now();
  fn(); await sync(dev);
  const firstMs = performance.now() - t0;
  // an autotune sweep the first call queued (NBX_AUTOTUNE=full, nothing cached) finishes before timing
  if (dev === 'webgpu') await nbx.webgpu.backend().tuning?.settled();
  fn(); await sync(dev);
  const t1 = performance.now();
  for (let i = 0; i < reps; i++) fn();
  await sync(dev);
  return { s: (performance.now() - t1) / 1000 / reps, firstMs };
}

/** Runs one phase, printing its duration; a failure is printed and the run goes on. */
async function phase(name: string, fn: () => Promise<void>): Promise<void> {
  const t = performance.now();
  out(`== [${secs()} s] ${name}`);
  try { await fn(); } catch (e) { out(`${name} FAILED: ${(e as Error).message.split('\n')[0]}`); }
  out(`== ${name}: ${((performance.now() - t) / 1000).toFixed(1)} s`);
}



const PEER = String.raw`
import torch, json, sys, time
q = '--quick' in sys.argv
out = {}
${TORCH_EVENT_TIMER}
G = (64 << 20) if q else (1 << 30)
for dt, name in ((torch.float32, 'f32'), (torch.float16, 'f16')):
    n = G // dt.itemsize
    x = torch.rand(n, device='cuda', dtype=dt); y = torch.rand(n, device='cuda', dtype=dt); o = torch.empty_like(x)
    out['axpb ' + name] = 2 * G / t(lambda: torch.add(torch.mul(x, 1.5, out=o), 0.25, out=o), 5)
    out['add ' + name] = 3 * G / t(lambda: torch.add(x, y, out=o), 5)
    X = x.view(-1, 16384)
    out['sum rows ' + name] = G / t(lambda: X.sum(-1), 5)
    out['sum cols ' + name] = G / t(lambda: X.sum(0), 5)
    out['sum all ' + name] = G / t(lambda: x.sum(), 5)
    del x, y, o, X
M = 512 if q else 4096
torch.backends.cuda.matmul.allow_tf32 = False
for dt, name in ((torch.float32, 'f32'), (torch.float16, 'f16')):
    a = torch.rand(M, M, device='cuda', dtype=dt); b = torch.rand(M, M, device='cuda', dtype=dt)
    out['gemm ' + name] = 2 * M**3 / t(lambda: a @ b, 5)
s = torch.ones(256, device='cuda')
def chain():
    y = s
    for _ in range(1000): y = torch.add(y, 1)
    torch.cuda.synchronize()
chain(); chain(); t0 = time.perf_counter(); chain()
out['chain'] = (time.perf_counter() - t0) / 1000 * 1e6
print(json.dumps(out))
`;

interface Row { name: string; size: string; unit: string; gpu: number; cuda?: number; torch?: number; first?: string; peer?: string }
/** Records one measurement (value in the row's unit) for the device being measured. */
type Put = (key: string, row: Omit<Row, 'gpu'>, v: number, firstMs?: number) => void;

async function suite(dev: Dev, quick: boolean, bytes: number, put: Put, reps: { bw: number; gemm: number }): Promise<void> {
  const fmt = (b: number): string => (b >= GiB ? `${b / GiB} GiB` : `${b / 2 ** 20} MiB`);
  for (const [dt, name, isz] of [['float32', 'f32', 4], ['float16', 'f16', 2]] as const) {
    const n = bytes / isz;
    // filled on the device; values do not matter to bandwidth
    const x = filledOn(dev, n, 0.5, dt), y = filledOn(dev, n, 0.25, dt);
    await sync(dev);
    const gb = async (key: string, label: string, moved: number, fn: () => void): Promise<void> => {
      const t = await timeOn(dev, fn, reps.bw);
      put(key, { name: label, size: fmt(bytes), unit: 'GB/s' }, moved / t.s / 1e9, t.firstMs);
    };
    await gb(`axpb ${name}`, `a*x+b fused (${name})`, 2 * bytes, () => axpb(x, 1.5, 0.25).dispose());
    await gb(`add ${name}`, `a+b (${name})`, 3 * bytes, () => nbx.add(x, y).dispose());
    const X = x.view(-1, 16384);
    await gb(`sum rows ${name}`, `sum(dim=-1) [${n / 16384}, 16384] (${name})`, bytes, () => nbx.sum(X, -1).dispose());
    await gb(`sum cols ${name}`, `sum(dim=0) [${n / 16384}, 16384] (${name})`, bytes, () => nbx.sum(X, 0).dispose());
    await gb(`sum all ${name}`, `sum() (${name})`, bytes, () => nbx.sum(x).dispose());
    x.dispose(); y.dispose();
  }
  const M = quick ? 512 : 4096;
  // WebGPU: the tiled kernels, then the subgroup-matrix one where a plan was validated (f16 on the H200)
  const variants: [string, string, 'float32' | 'float16', boolean][] = [['gemm f32', 'f32', 'float32', false], ['gemm f16', 'f16', 'float16', false]];
  if (dev === 'webgpu') for (const d of ['float32', 'float16'] as const) if (hasSmmPlan(d)) variants.push([`gemm ${d === 'float32' ? 'f32' : 'f16'} smm`, d === 'float32' ? 'f32' : 'f16', d, true]);
  for (const [key, name, dt, smm] of variants) {
    const was = dev === 'webgpu' ? useSubgroupMatrix(smm) : false;
    try {
      const A = nbx.rand([M, M], { dtype: dt, device: dev }), B = nbx.rand([M, M], { dtype: dt, device: dev });
      const t = await timeOn(dev, () => nbx.matmul(A, B).dispose(), reps.gemm);
      const label = dev !== 'webgpu' ? `GEMM ${M}^3 (${name})` : `GEMM ${M}^3 (${name}, ${smm ? 'subgroup matrix' : 'tiled'})`;
      put(key, { name: label, size: `${M}^3`, unit: 'TFLOP/s', peer: `gemm ${name}` }, 2 * M ** 3 / t.s / 1e12, t.firstMs);
      A.dispose(); B.dispose();
    } finally {
      if (dev === 'webgpu') useSubgroupMatrix(was);
    }
  }
  // per-op cost: a dependent chain of 1000 small adds, one readback at the end
  const small = nbx.ones([256], { device: dev });
  const chain = async (ops: number): Promise<number> => {
    let v = nbx.mul(small, 1);
    await v.data();
    const t0 = performance.now();
    for (let i = 0; i < ops; i++) { const z = nbx.add(v, 1); v.dispose(); v = z; }
    await v.data();
    const us = (performance.now() - t0) * 1000 / ops;
    v.dispose();
    return us;
  };
  // the JIT warms up on the recording path first (it takes a few thousand ops to settle)
  for (let i = 0; i < 3; i++) await chain(1000);
  const runs: number[] = [];
  for (let i = 0; i < 5; i++) runs.push(await chain(1000));
  put('chain', { name: 'dependent chain of 1000 small adds (best of 5)', size: '256 f32', unit: 'µs/op' }, Math.min(...runs));
  small.dispose();
}

/** GEMM against the CPU: worst |gpu - cpu| / (|cpu| + 1) per shape, on each path this device has. */
async function check(): Promise<boolean> {
  let ok = true;
  const shapes: [number, number, number, boolean, boolean][] = [
    [64, 64, 64, false, false], [100, 37, 129, false, false], [257, 300, 130, false, true], [513, 77, 1000, true, false],
    [1024, 1024, 1024, false, false], [1000, 1030, 517, true, true], [2048, 64, 1536, false, false],
  ];
  const paths: ['float32' | 'float16', boolean][] = [['float32', false], ['float16', false]];
  for (const d of ['float32', 'float16'] as const) if (hasSmmPlan(d)) paths.push([d, true]);
  for (const [dt, smm] of paths) {
    const was = useSubgroupMatrix(smm);
    try {
      for (const [m, k, n, ta, tb] of shapes) {
        const a = nbx.sub(nbx.rand(ta ? [k, m] : [m, k], { dtype: 'float32' }), 0.5), b = nbx.sub(nbx.rand(tb ? [n, k] : [k, n], { dtype: 'float32' }), 0.5);
        const ac = a.copyAs(dt), bc = b.copyAs(dt);
        const A = ta ? ac.t() : ac, B = tb ? bc.t() : bc;
        const want = nbx.matmul(A.copyAs('float32'), B.copyAs('float32')).dataSync() as Float32Array;
        const Ag = ac.to('webgpu'), Bg = bc.to('webgpu');
        const got = Float32Array.from(await nbx.matmul(ta ? Ag.t() : Ag, tb ? Bg.t() : Bg).copyAs('float32').data() as Float32Array);
        let worst = 0;
        for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!) / (Math.abs(want[i]!) + 1));
        const tol = dt === 'float16' ? 2e-2 : 2e-3;
        const pass = Number.isFinite(worst) && worst <= tol;
        ok &&= pass;
        out(`check GEMM ${dt} ${smm ? 'subgroup-matrix' : 'tiled'} m=${m} k=${k} n=${n} transA=${ta} transB=${tb}: worst rel err ${worst.toExponential(2)} (tol ${tol}) ${pass ? 'ok' : 'FAIL'}`);
      }
    } finally {
      useSubgroupMatrix(was);
    }
  }
  return ok;
}

/** float16 loads through the hardware unpack: every bit pattern through add/mul and row/column max/min, bit-exact vs the CPU. */
async function checkHalf(): Promise<boolean> {
  const bits = new Uint16Array(65536).map((_, i) => i);
  const a = nbx.Tensor.fromStorage(bits, 'float16', [65536], 'cpu'), b = nbx.flip(a, [0]).contiguous();
  const ag = a.to('webgpu'), bg = b.to('webgpu');
  const isNaN16 = (h: number): boolean => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
  const cases: [string, (p: Tensor, q: Tensor) => Tensor][] = [['add', (p, q) => nbx.add(p, q)], ['mul', (p, q) => nbx.mul(p, q)],
    ['amax rows', (p) => nbx.amax(p.view(256, 256), -1)], ['amin rows', (p) => nbx.amin(p.view(256, 256), -1)],
    ['amax columns', (p) => nbx.amax(p.view(256, 256), 0)], ['amin odd rows', (p) => nbx.amin(p.narrow(0, 3, 254 * 257).view(254, 257), -1)]];
  let ok = true;
  for (const [name, f] of cases) {
    const got = Uint16Array.from(await f(ag, bg).dataStorage() as Uint16Array), want = f(a, b).dataStorageSync() as Uint16Array;
    let bad = 0, first = '';
    for (let i = 0; i < want.length; i++) {
      if (isNaN16(want[i]!) ? isNaN16(got[i]!) : got[i] === want[i]) continue;
      if (!bad++) first = ` (first at ${i}: got 0x${got[i]!.toString(16)}, want 0x${want[i]!.toString(16)})`;
    }
    ok &&= bad === 0;
    out(`check float16 ${name} over all 65536 bit patterns: ${bad === 0 ? 'exact ok' : `${bad} differ${first} FAIL`}`);
  }
  return ok;
}


export async function run(args: string[] = []): Promise<void> {
  const info = await nbx.webgpu.init();
  const initMs = sinceStartMs();
  const soft = /llvmpipe|swiftshader|lavapipe|software/i.test(info.adapter);
  // a software adapter's sweeps take minutes: a smoke run there uses what is cached unless told otherwise
  if (soft && !process.env.NBX_AUTOTUNE) process.env.NBX_AUTOTUNE = 'cached';
  const quick = args.includes('--quick') || soft;
  const maxBind = Math.min(info.limits.maxStorageBufferBindingSize ?? GiB, info.limits.maxBufferSize ?? GiB);
  const bytes = Math.min(quick ? 64 * 2 ** 20 : GiB, 2 ** Math.floor(Math.log2(maxBind)));
  const M = quick ? 512 : 4096;

  out(`WebGPU: ${info.adapter} (${info.via}${info.compatibility ? ', compatibility' : ''}); device up in ${initMs.toFixed(0)} ms`);
  out(`adapter info: ${JSON.stringify(info.identity)}`);
  out(`profile: ${info.profile}`);
  out(`Dawn toggles: ${info.toggles.join(' ') || '(none)'}`);
  out(`adapter features: ${info.adapterFeatures.join(' ')}`);
  out(`device features: ${info.features.join(' ')}`);
  out(`limits requested: ${JSON.stringify(info.limits)}`);
  out(`subgroup matrix configs: ${JSON.stringify(info.subgroupMatrixConfigs)}`);
  out(`GEMM subgroup-matrix path: ${smmStatus.reason}; ${JSON.stringify(smmStatus.plans)}`);
  out(`workgroups: elementwise ${info.wgElementwise}, reduction ${info.wgReduce}; autotune key ${info.tuneKey}; NBX_AUTOTUNE=${process.env.NBX_AUTOTUNE ?? '(unset: full)'}`);
  out(`launch configurations: ${tuneSources(info.tuneKey, bytes, M)}`);
  out(`sizes: ${bytes / 2 ** 20} MiB operands${quick ? ' (quick)' : ''}; largest binding ${maxBind / 2 ** 20} MiB\n`);

  if (args.includes('--check')) {
    await phase('GEMM and float16 checks against the CPU', async () => {
      const ok = await check();
      out(`GEMM check: ${ok ? 'all ok' : 'FAILURES'}`);
      const half = await checkHalf();
      out(`float16 check: ${half ? 'all ok' : 'FAILURES'}`);
    });
  }

  const rows = new Map<string, Row>();
  const f = (v: number | undefined): string => (v === undefined || Number.isNaN(v) ? '—' : v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toFixed(3));
  /** Stores a value in the row (made on first sight) and prints it at once. */
  const putter = (who: 'gpu' | 'cuda' | 'torch'): Put => (key, row, v, firstMs) => {
    let r = rows.get(key);
    if (!r) { r = { ...row, gpu: NaN }; rows.set(key, r); }
    r[who] = v;
    if (who === 'gpu' && firstMs !== undefined) r.first = `${firstMs.toFixed(0)} ms`;
    out(`row [${secs()} s] ${who === 'gpu' ? 'WebGPU' : who === 'cuda' ? 'CUDA backend' : 'PyTorch'} | ${r.name} | ${r.size} | ${f(v)} ${r.unit}${firstMs !== undefined ? ` | first call ${firstMs.toFixed(0)} ms` : ''}`);
  };
  const pipes0 = nbx.webgpu.memoryStats().pipelines;
  await phase('WebGPU benchmarks', () => suite('webgpu', quick, bytes, putter('gpu'), { bw: quick ? 5 : 10, gemm: quick ? 3 : 5 }));
  const s = nbx.webgpu.memoryStats();
  nbx.webgpu.emptyCache();
  await nbx.webgpu.synchronize();

  const peers = !args.includes('--no-peers') && !soft;
  if (peers && !args.includes('--no-cuda')) {
    await phase('CUDA backend (short)', async () => {
      const cudaOk = (nbx as unknown as { cuda?: { is_available?: () => boolean } }).cuda?.is_available?.();
      if (!cudaOk) { out('CUDA backend: not available'); return; }
      // the CUDA backend fills the rows WebGPU made; its GEMM figure serves both f16 rows
      const put = putter('cuda');
      await suite('cuda', quick, bytes, (key, row, v) => {
        for (const [k, r] of rows) if (k !== key && row.peer !== undefined && r.peer === row.peer) put(k, r, v);
        put(key, row, v);
      }, { bw: 3, gemm: 3 });
      (nbx as unknown as { cuda?: { emptyCache?: () => void } }).cuda?.emptyCache?.();
    });
  }
  if (peers && !args.includes('--no-torch')) {
    await phase('PyTorch (short)', async () => {
      const peer = JSON.parse(execFileSync('python3', ['-c', PEER, ...(quick ? ['--quick'] : [])], { encoding: 'utf8', maxBuffer: 1 << 20, timeout: 60_000 })) as Record<string, number>;
      const put = putter('torch');
      for (const [k, r] of rows) {
        const v = peer[r.peer ?? k];
        if (v !== undefined) put(k, r, r.unit === 'GB/s' ? v / 1e9 : r.unit === 'TFLOP/s' ? v / 1e12 : v);
      }
    });
  }

  const ratio = (r: Row, peer?: number): string => {
    if (peer === undefined || Number.isNaN(peer) || Number.isNaN(r.gpu)) return '—';
    return `${((r.unit === 'µs/op' ? peer / r.gpu : r.gpu / peer) * 100).toFixed(0)}%`;
  };
  out(`\n[${secs()} s] summary`);
  out('| benchmark | size | unit | WebGPU | CUDA backend | PyTorch | WebGPU/CUDA | WebGPU/PyTorch | first call |');
  out('| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const r of rows.values()) out(`| ${r.name} | ${r.size} | ${r.unit} | ${f(r.gpu)} | ${f(r.cuda)} | ${f(r.torch)} | ${ratio(r, r.cuda)} | ${ratio(r, r.torch)} | ${r.first ?? ''} |`);
  out(`\nWebGPU: ${s.dispatches} dispatches in ${s.submits} submits; ${s.pipelines - pipes0} pipelines built during the run; pool: ${s.created} buffers created, ${s.reuses}/${s.allocations} allocations reused; peak ${(s.peakReservedBytes / GiB).toFixed(2)} GiB reserved`);
  out(`total ${secs()} s`);
}

if (process.argv[1]?.endsWith('webgpu.js')) run(process.argv.slice(2)).then(() => exitPromptly(Number(process.exitCode ?? 0)), (e) => { console.error(e); exitPromptly(1); });
