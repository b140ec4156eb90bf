// nn.functional.linear on cuda (bias through the cuBLASLt epilogue) against the cpu.
import * as nbx from '../dist/src/index.js';
let worst = 0;
for (const dt of ['float32', 'bfloat16', 'float16']) for (const [B, M, K, N] of [[1, 5, 64, 48], [3, 7, 32, 16], [1, 1, 128, 256]]) {
  const x = nbx.sin(nbx.arange(B * M * K, { dtype: 'float32' })).reshape(B, M, K).to(dt);
  const w = nbx.cos(nbx.arange(N * K, { dtype: 'float32' })).reshape(N, K).to(dt);
  const b = nbx.sin(nbx.arange(N, { dtype: 'float32' })).to(dt);
  const want = nbx.nn.functional.linear(x, w, b).to('float64').dataSync();
  const got = nbx.nn.functional.linear(x.cuda(), w.cuda(), b.cuda()).cpu().to('float64').dataSync();
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(want[i] - got[i]) / (1 + Math.abs(want[i])));
}
console.log('linear cuda vs cpu, worst relative error', worst.toExponential(2), worst < 2e-2 ? 'OK' : 'BAD');
