// Where the time of a call goes on the GPU machine: host time per call (no sync), device time per call
// (events around N back-to-back calls) and wall time per call (N calls + synchronize), for a 1 GiB add,
// a bf16 x*2 and small-M matmuls.  node scripts/diag-percall.mjs
import * as nbx from '../dist/src/index.js';
const be = nbx.cuda.backend();
async function measure(name, fn, n = 20) {
  fn().dispose(); await nbx.cuda.synchronize();
  const e0 = be.ctx.createEvent({ timing: true }), e1 = be.ctx.createEvent({ timing: true });
  const t0 = performance.now();
  e0.record(be.stream);
  let host = 0;
  for (let i = 0; i < n; i++) { const h = performance.now(); const r = fn(); host += performance.now() - h; r.dispose(); }
  e1.record(be.stream);
  await nbx.cuda.synchronize();
  const wall = (performance.now() - t0) / n * 1000;
  e1.synchronize();
  const dev = e1.elapsedSince(e0) / n * 1000;
  console.log(`${name.padEnd(34)} wall ${wall.toFixed(1).padStart(8)} us  device ${dev.toFixed(1).padStart(8)} us  host (call only) ${(host / n * 1000).toFixed(1).padStart(7)} us`);
}
const gemvOnly = process.argv.includes('--gemv'); // node scripts/diag-percall.mjs --gemv: the small-M rows only
for (const dt of gemvOnly ? [] : ['float32', 'bfloat16']) {
  const n = (1 << 30) / (2 * (dt === 'float32' ? 4 : 2));
  const a = nbx.zeros([n], { device: 'cuda', dtype: dt }), b = nbx.zeros([n], { device: 'cuda', dtype: dt });
  for (let r = 0; r < 3; r++) await measure(`add 1GiB ${dt}`, () => nbx.add(a, b));
  await measure(`mul by 2 ${dt}`, () => nbx.mul(a, 2));
  const o = nbx.empty([n], { device: 'cuda', dtype: dt });
  a.dispose(); b.dispose(); o.dispose();
}
console.log('allocator', JSON.stringify(nbx.cuda.memoryStats()).slice(0, 400));
for (const m of [1, 4, 16]) {
  const x = nbx.randn([m, 4096], { dtype: 'bfloat16' }).to('cuda'), w = nbx.randn([4096, 4096], { dtype: 'bfloat16' }).to('cuda');
  for (let i = 0; i < 2000; i++) { nbx.matmul(x, w).dispose(); nbx.nn.functional.linear(x, w).dispose(); }
  await measure(`matmul m=${m} x@w bf16`, () => nbx.matmul(x, w), 200);
  await measure(`matmul m=${m} x@w bf16 (20 calls)`, () => nbx.matmul(x, w), 20);
  await measure(`linear m=${m} bf16`, () => nbx.nn.functional.linear(x, w), 200);
  // the kernel alone, launched as the tuner times it (no op layer, no allocation)
  const { gemvProblem, launchGemv } = await import('../dist/src/backend/cuda/kernels/gemv.js');
  const o = nbx.empty([m, 4096], { dtype: 'bfloat16', device: 'cuda' });
  const g = gemvProblem({ transA: false, transB: false, m, n: 4096, k: 4096, alpha: 1, beta: 0, a: x.ref(), lda: 4096, b: w.ref(), ldb: 4096, c: o.ref(), ldc: 4096 });
  const mmat = [4, 8].flatMap((nt) => [1, 2].flatMap((wc) => [1, 2, 4].map((split) => ({ impl: 'mmat', split, nt, wc }))));
  for (const cfg of [{ impl: 'gemv', split: 2 }, { impl: 'mma', split: 2, nt: 4 }, ...mmat]) {
    await measure(`launchGemv m=${m} kn ${JSON.stringify(cfg)}`, () => { launchGemv(be, g, cfg); return { dispose() {} }; }, 200);
  }
  o.dispose();
}
// float32 x@w m=1 (64 MB of weight): the FMA kernel's K splits
{
  const { gemvProblem, launchGemv } = await import('../dist/src/backend/cuda/kernels/gemv.js');
  const x = nbx.randn([1, 4096]).to('cuda'), w = nbx.randn([4096, 4096]).to('cuda'), o = nbx.empty([1, 4096], { device: 'cuda' });
  for (let i = 0; i < 500; i++) nbx.matmul(x, w).dispose();
  await measure('matmul m=1 x@w f32', () => nbx.matmul(x, w), 200);
  const g = gemvProblem({ transA: false, transB: false, m: 1, n: 4096, k: 4096, alpha: 1, beta: 0, a: x.ref(), lda: 4096, b: w.ref(), ldb: 4096, c: o.ref(), ldc: 4096 });
  for (const cfg of [...[2, 4, 8].map((split) => ({ impl: 'gemv', split })), { impl: 'cublas' }]) {
    await measure(`launchGemv m=1 kn f32 ${JSON.stringify(cfg)}`, () => { launchGemv(be, g, cfg); return { dispose() {} }; }, 200);
  }
  // cuBLAS's SGEMM called directly: without a workspace (cuBLAS's own) and then with cuBLASLt's (as the
  // tuner's 'cublas' runs it); PyTorch's same call runs gemvx at 16.8 us (torch-ew-profile.py)
  const { Cublas } = await import('../dist/src/backend/cuda/runtime/cublas.js');
  const { CublasLt } = await import('../dist/src/backend/cuda/runtime/cublaslt.js');
  const sg = { transA: false, transB: false, m: 1, n: 4096, k: 4096, A: x.ref().buf.ptr, lda: 4096, B: w.ref().buf.ptr, ldb: 4096, C: o.ref().buf.ptr, ldc: 4096, alpha: 1, beta: 0 };
  const none = { dispose() {} };
  const fresh = Cublas.create(be.ctx); // a second handle that never had a workspace set
  await measure('cublasSgemm m=1 f32, its own workspace', () => { fresh.sgemm(sg, be.stream.handle, null); return none; }, 200);
  await measure('cublasSgemm m=1 f32, cuBLASLt workspace', () => { Cublas.get(be.ctx).sgemm(sg, be.stream.handle, CublasLt.current()?.workspace ?? null); return none; }, 200);
  const sgT = { ...sg, transB: true }; // W read transposed (x @ w.T, nn.Linear's layout)
  await measure('cublasSgemm m=1 f32 x@w.T', () => { fresh.sgemm(sgT, be.stream.handle, null); return none; }, 200);
}
// registers and local memory (spills) of the tensor-core x@w kernels: occupancy decides their bandwidth
{
  const { gemvMmatKnSource, gemvMmaKnSource } = await import('../dist/src/backend/cuda/kernels/gemv.js');
  for (const mr of [8, 16]) {
    for (const nt of [4, 8]) for (const wc of [1, 2]) {
      const r = be.kernel(`gemv_mmat_kn:bfloat16:${mr}:${nt}:${wc}`, () => gemvMmatKnSource('bfloat16', mr, nt, wc)).resources();
      console.log(`mmat mr=${mr} nt=${nt} wc=${wc}: ${r.numRegs} regs, ${r.localBytes} B local, ${r.sharedBytes} B shared`);
    }
    const r = be.kernel(`gemv_mma_kn:bfloat16:${mr}:4`, () => gemvMmaKnSource('bfloat16', mr, 4)).resources();
    console.log(`mma kn mr=${mr} nt=4: ${r.numRegs} regs, ${r.localBytes} B local`);
  }
}
