// Profiles the host cost of a small op on a device: node --cpu-prof scripts/host-profile.mjs cuda
import * as nbx from '../dist/src/index.js';
const dev = process.argv[2] ?? 'cuda';
const a = nbx.ones([32], { device: dev }), b = nbx.ones([32], { device: dev });
for (let r = 0; r < 5; r++) {
  const N = 20000;
  const t0 = performance.now();
  for (let i = 0; i < N; i++) nbx.add(a, b).dispose();
  const t1 = performance.now();
  if (dev === 'cuda') await nbx.cuda.synchronize();
  console.log(`${dev} add 32: ${((t1 - t0) / N * 1000).toFixed(2)} us/op (host), sync ${(performance.now() - t1).toFixed(1)} ms`);
}
