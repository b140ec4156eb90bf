// Cross-check with Python's safetensors (GPU machine): our file read by safetensors.torch, and a
// file written by safetensors.torch read by us, every dtype both ways.
import { execFileSync } from 'node:child_process';
import * as nbx from '../dist/src/index.js';
const dir = process.env.OUT ?? '/tmp';
const ours = `${dir}/nbx_written.safetensors`, theirs = `${dir}/py_written.safetensors`;
const ts = {
  f32: nbx.arange(12, { dtype: 'float32' }).reshape(3, 4), f16: nbx.tensor([1.5, -2, 65504], { dtype: 'float16' }),
  bf16: nbx.tensor([1.5, -2, 3e38], { dtype: 'bfloat16' }), f64: nbx.tensor([Math.PI], { dtype: 'float64' }),
  i64: nbx.tensor([9007199254740993n, -1n]), i32: nbx.tensor([1, -2], { dtype: 'int32' }), i16: nbx.tensor([3, -4], { dtype: 'int16' }),
  i8: nbx.tensor([-128, 127], { dtype: 'int8' }), u8: nbx.tensor([0, 255], { dtype: 'uint8' }), b: nbx.tensor([true, false]),
  e4: nbx.tensor([0.5, 448]).to('float8_e4m3fn'), e5: nbx.tensor([0.5, 57344]).to('float8_e5m2'), empty: nbx.zeros(0, 3),
};
await nbx.io.saveSafetensors(ours, ts, { producer: 'nbxtensor' });
const py = String.raw`
import sys, torch
from safetensors.torch import load_file, save_file
from safetensors import safe_open
d = load_file(sys.argv[1])
with safe_open(sys.argv[1], 'pt') as f: meta = f.metadata()
out = {k: (str(v.dtype), list(v.shape), v.to(torch.float64).flatten().tolist() if v.dtype not in (torch.int64,) else [str(x) for x in v.flatten().tolist()]) for k, v in d.items()}
print(repr(sorted(out.items())), meta)
save_file({'a': torch.arange(6, dtype=torch.bfloat16).reshape(2, 3), 'b': torch.tensor([2**62 + 1]), 'c': torch.tensor([1.0, -0.0], dtype=torch.float16), 'd': torch.tensor([True, False])}, sys.argv[2], metadata={'who': 'python'})
`;
const r = execFileSync('python3', ['-c', py, ours, theirs], { encoding: 'utf8' });
console.log('python read ours:', r.trim());
const { tensors, metadata } = await nbx.io.loadSafetensors(theirs);
console.log('we read python\'s:', JSON.stringify(Object.fromEntries(Object.entries(tensors).map(([k, t]) => [k, [t.dt, t.shape, t.tolist()]])), (k, v) => (typeof v === 'bigint' ? v.toString() : v)), metadata);
