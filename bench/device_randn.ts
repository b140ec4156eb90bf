// Large random inputs for GPU benchmarks without the host cost: nbx.randn draws PyTorch's CPU stream on
// the host (a 4 x 32 x 4096 x 128 bfloat16 tensor took 100+ s on a dev box, tens of seconds on the GPU
// host), which made attention timings look like a hung kernel. Here one block of 2^20 values is drawn
// once per dtype and tiled on the device (rolled by a per-call amount so q, k and v differ). For timing
// only: the values repeat every 2^20 elements.
import * as nbx from '../src/index.js';

const BLOCK = 1 << 20;
const bases = new Map<string, nbx.Tensor>();
let calls = 0;

/** A CUDA tensor of `shape` and `dtype` filled with standard-normal values, tiled from one host draw. */
export function deviceRandn(shape: number[], dtype: 'bfloat16' | 'float16' | 'float32'): nbx.Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  if (n <= BLOCK || n % BLOCK !== 0) return nbx.randn(shape, { dtype, device: 'cuda' });
  let base = bases.get(dtype);
  if (!base) { base = nbx.randn([BLOCK], { dtype }).to('cuda'); bases.set(dtype, base); }
  const rolled = base.roll(((++calls) * 7919) % BLOCK);
  const out = rolled.repeat([n / BLOCK]).view(shape);
  rolled.dispose();
  return out;
}
