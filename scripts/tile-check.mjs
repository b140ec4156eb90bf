import * as nbx from '../dist/src/index.js';
let bad = 0;
for (const [R, C] of [[100, 70], [64, 64], [33, 129]]) for (const dt of ['float32', 'bfloat16', 'int64', 'float64']) {
  const a = nbx.sin(nbx.arange(R * C, { dtype: 'float32' })).mul(10).to(dt).reshape(C, R);
  const b = nbx.cos(nbx.arange(R * C, { dtype: 'float32' })).mul(10).to(dt).reshape(R, C);
  const want = nbx.add(a.t(), b).to('float64').dataSync();
  const got = nbx.add(a.cuda().t(), b.cuda()).cpu().to('float64').dataSync();
  const want2 = nbx.mul(a.t(), 2).to('float64').dataSync();
  const got2 = nbx.mul(a.cuda().t(), 2).cpu().to('float64').dataSync();
  for (let i = 0; i < want.length; i++) if (want[i] !== got[i] || want2[i] !== got2[i]) { bad++; if (bad < 5) console.log(R, C, dt, i, want[i], got[i], want2[i], got2[i]); }
}
console.log('mismatches', bad);
