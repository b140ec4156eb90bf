// Host profile of small-M matmul calls: node --cpu-prof scripts/prof-matmul.mjs (then scripts/profile-summary.mjs DIR)
import * as nbx from '../dist/src/index.js';
const x = nbx.randn([1, 4096], { dtype: 'bfloat16' }).to('cuda'), w = nbx.randn([4096, 4096], { dtype: 'bfloat16' }).to('cuda');
for (let i = 0; i < 200; i++) nbx.matmul(x, w).dispose();
const t0 = performance.now();
for (let i = 0; i < 3000; i++) nbx.matmul(x, w).dispose();
console.log('host us/call', ((performance.now() - t0) / 3000 * 1000).toFixed(1));
await nbx.cuda.synchronize();
