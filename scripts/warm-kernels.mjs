// Compiles the CUDA kernels of common operations (run on a card with an empty NBX_CACHE_DIR; the
// resulting $NBX_CACHE_DIR/nvrtc/*.nbxmod go to src/backend/cuda/shipped-kernels/).
import * as nbx from '../dist/src/index.js';
const F = nbx.nn.functional;
for (const dtype of ['float32', 'bfloat16', 'float16']) {
  for (const n of [1 << 20, 4099]) {
    const a = nbx.ones([n], { device: 'cuda', dtype }), b = nbx.ones([n], { device: 'cuda', dtype });
    for (const f of [nbx.add, nbx.sub, nbx.mul, nbx.div, nbx.maximum, nbx.minimum, nbx.pow]) f(a, b).dispose();
    for (const f of [(x) => nbx.add(x, 1), (x) => nbx.mul(x, 0.5), (x) => nbx.sub(x, 1), (x) => nbx.div(x, 2)]) f(a).dispose();
    for (const f of [nbx.exp, nbx.log, nbx.sqrt, nbx.rsqrt, nbx.tanh, nbx.sigmoid, nbx.neg, nbx.abs, nbx.sin, nbx.cos, nbx.erf, nbx.log1p,
      F.gelu, (x) => F.gelu(x, { approximate: 'tanh' }), F.silu, F.relu, F.softplus, F.mish]) f(a).dispose();
    nbx.where(nbx.gt(a, 0), a, b).dispose(); nbx.clamp(a, -1, 1).dispose(); for (const d of ['float32', 'bfloat16', 'float16']) if (d !== dtype) a.to(d).dispose();
    a.dispose(); b.dispose();
  }
  const m = nbx.ones([1024, 4096], { device: 'cuda', dtype });
  for (const f of [(x) => nbx.sum(x, -1), (x) => nbx.mean(x, -1), (x) => nbx.amax(x, -1), (x) => nbx.argmax(x, -1), (x) => nbx.sum(x, 0), (x) => nbx.sum(x),
    (x) => F.softmax(x, { dim: -1 }), (x) => F.log_softmax(x, { dim: -1 }), (x) => F.layer_norm(x, [4096]), (x) => F.rms_norm(x, [4096]),
    (x) => x.t().contiguous(), (x) => nbx.add(x, x.t().contiguous().t())]) f(m).dispose();
  m.dispose();
}
await nbx.cuda.synchronize();
console.log('warmed');
