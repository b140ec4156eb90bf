// Every configuration of the small-M GEMM kernels (FMA 'nk'/'kn', tensor-core 'nk'/'kn'/'mmat', cuBLAS's SGEMM) against the CPU on
// awkward shapes, launched directly (not through the tuner). Under the emulator:
//   NBX_EMU_WORK=/tmp/emu_gemv node test/gen/cuda_emu.mjs node test/gen/cuda_gemv_configs.mjs
// On a GPU: node test/gen/cuda_gemv_configs.mjs
import * as nbx from '../../dist/src/index.js';
import { gemvProblem, launchGemv, mmaOk, cublasOk } from '../../dist/src/backend/cuda/kernels/gemv.js';

const be = nbx.cuda.backend();
let bad = 0, runs = 0;
const cfgs = [
  { impl: 'gemv', cols: 1 }, { impl: 'gemv', cols: 4 }, { impl: 'gemv', split: 2 }, { impl: 'gemv', split: 8 },
  ...[1, 2, 4].flatMap((nt) => [1, 2, 4].map((split) => ({ impl: 'mma', nt, split }))),
  ...[4, 8].flatMap((nt) => [1, 2].flatMap((wc) => [1, 2, 4].map((split) => ({ impl: 'mmat', nt, wc, split })))),
];
const shapes = [[1, 64, 256], [3, 40, 264], [4, 128, 512], [8, 72, 1032], [9, 24, 2048], [16, 136, 4104], [13, 8, 8]];
for (const dtype of ['bfloat16', 'float16', 'float32']) {
  for (const [m, n, k] of shapes) {
    for (const layout of ['nk', 'kn']) {
      const x = nbx.randn([m, k], { dtype: 'float32' }).to(dtype);
      const w = nbx.randn(layout === 'nk' ? [n, k] : [k, n], { dtype: 'float32' }).to(dtype);
      const bias = nbx.randn([n], { dtype: 'float32' }).to(dtype);
      const wt = layout === 'nk' ? w.t() : w;
      const want = nbx.addmm(bias.to('float64'), x.to('float64'), wt.to('float64'));
      const xc = x.to('cuda'), wc = w.to('cuda'), bc = bias.to('cuda');
      for (const cfg of cfgs) {
        const out = nbx.empty([m, n], { dtype, device: 'cuda' });
        const p = { transA: false, transB: layout === 'nk', m, n, k, alpha: 1, beta: 0, a: xc.ref(), lda: k, b: wc.ref(), ldb: layout === 'nk' ? k : n, c: out.ref(), ldc: n, bias: bc.ref() };
        const g = gemvProblem(p);
        if ((cfg.impl === 'mma' || cfg.impl === 'mmat') && !mmaOk(g)) continue;
        if (cfg.impl === 'mmat' && layout !== 'kn') continue;
        launchGemv(be, g, cfg);
        const got = out.cpu().to('float64');
        const err = nbx.sub(got, want).abs().max().item(), scale = want.abs().max().item();
        const tol = (dtype === 'float32' ? 1e-4 : dtype === 'float16' ? 4e-3 : 2e-2) * Math.max(1, scale);
        runs++;
        if (!(err <= tol)) { bad++; console.log(`BAD ${dtype} ${layout} m=${m} n=${n} k=${k} ${JSON.stringify(cfg)}: max err ${err} (scale ${scale})`); }
      }
      // cuBLAS's SGEMM (impl 'cublas'): float32 without a bias, X dense and as a row-strided view
      if (dtype === 'float32') {
        const xw = nbx.randn([m, k + 8], { dtype: 'float32' }), xv = xw.narrow(1, 0, k), xwc = xw.to('cuda');
        for (const [xs, lda, xref] of [[x, k, xc.ref()], [xv, k + 8, xwc.ref()]]) {
          const want2 = nbx.mm(xs.to('float64'), wt.to('float64'));
          const out = nbx.empty([m, n], { dtype, device: 'cuda' });
          const g = gemvProblem({ transA: false, transB: layout === 'nk', m, n, k, alpha: 1, beta: 0, a: xref, lda, b: wc.ref(), ldb: layout === 'nk' ? k : n, c: out.ref(), ldc: n });
          if (!cublasOk(be, g)) { bad++; console.log(`BAD cublas refused ${layout} m=${m} n=${n} k=${k} lda=${lda}`); continue; }
          launchGemv(be, g, { impl: 'cublas' });
          const err = nbx.sub(out.cpu().to('float64'), want2).abs().max().item(), scale = want2.abs().max().item();
          runs++;
          if (!(err <= 1e-4 * Math.max(1, scale))) { bad++; console.log(`BAD float32 cublas ${layout} m=${m} n=${n} k=${k} lda=${lda}: max err ${err}`); }
        }
      }
    }
  }
}
console.log(`${runs} runs, ${bad} bad`);
process.exit(bad ? 1 : 0);
