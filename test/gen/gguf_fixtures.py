# Writes test/fixtures/gguf/blocks.gguf (one tensor of each float and block type, random blocks with
# finite scales) and blocks.json (gguf-py's numpy dequantization of each: the reference for
# src/io/gguf.ts). Run with gguf-py installed (pip install gguf):
#   python3 test/gen/gguf_fixtures.py
import json, os
import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, '..', 'fixtures', 'gguf')
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)

# byte offsets of each block type's float16 fields (d, and m / dmin), which random bytes could make
# infinite or NaN
F16_FIELDS = {Q.Q8_0: [0], Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q2_K: [80, 82],
              Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}
w = gguf.GGUFWriter(os.path.join(out, 'blocks.gguf'), 'llama')
expected = {}
for qt in [Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]:
    block, size = gguf.GGML_QUANT_SIZES[qt]
    rows, cols = 2, 512
    nblocks = rows * cols // block
    if qt in (Q.F32, Q.F16):
        vals = rng.standard_normal((rows, cols)).astype(np.float32 if qt == Q.F32 else np.float16)
        raw = vals.view(np.uint8).reshape(rows, -1)
    else:
        raw = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
        if qt == Q.BF16:
            f = rng.standard_normal(nblocks).astype(np.float32)
            raw = (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(nblocks, size)
        for off in F16_FIELDS.get(qt, []):
            raw[:, off:off + 2] = rng.uniform(-1, 1, nblocks).astype(np.float16).view(np.uint8).reshape(nblocks, 2)
        raw = raw.reshape(rows, -1)
    name = f't_{qt.name}'
    w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qt) if qt not in (Q.F32, Q.F16) else w.add_tensor(name, vals)
    deq = gguf.quants.dequantize(raw, qt).astype(np.float32).reshape(-1)
    expected[name] = {'type': qt.name, 'shape': [rows, cols], 'values': [float(x) for x in deq]}
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
with open(os.path.join(out, 'blocks.json'), 'w') as f:
    json.dump({'generator': 'test/gen/gguf_fixtures.py', 'gguf_py': getattr(gguf, '__version__', 'unknown'), 'tensors': expected}, f)
print('wrote', out)
