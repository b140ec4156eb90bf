#!/usr/bin/env python3
"""Tiny quantized checkpoints as they are found in the wild (issue #21), for test/quant_load.test.ts.

Writes test/fixtures/quant/{awq,gptq,fp8}/ : config.json (a 1-layer Llama, hidden 32) with the
quantization_config each tool writes, model.safetensors packed as that tool packs it, and
expected.safetensors: every quantized Linear's weight dequantized here, in numpy, by the formulas of the
tools' own dequantizers (the reference the loader's repacking is checked against):

- AWQ (AutoAWQ 'gemm', as transformers' AwqConfig loads it): qweight int32 [K, N/8], column 8c+order[i]
  at bits 4i with order = [0, 2, 4, 6, 1, 3, 5, 7] (autoawq pack_awq / unpack_awq + AWQ_REVERSE_ORDER);
  qzeros int32 [K/g, N/8] packed the same way; scales float16 [K/g, N]; w = (q - z) * s.
- GPTQ (AutoGPTQ / optimum, checkpoint_format 'gptq', v1): qweight int32 [K/8, N], row 8r+i at bits 4i;
  qzeros int32 [K/g, N/8], column 8c+i at bits 4i, storing z - 1 (dequantization adds 1); scales
  float16 [K/g, N]; g_idx int32 [K] = k // g (no act order).
- fp8 (compressed-tensors 'float-quantized'): weight float8_e4m3fn [N, K], weight_scale float32 per channel
  [N, 1] (q_proj: per tensor, shape [1]), input_scale present (unused by weight-only loading).

numpy only; all files together stay well under 200 KB. Run: python3 test/gen/quant_fixtures.py
"""
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, '..', 'fixtures', 'quant')
G = 32  # group size

CONFIG = {
    'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_size': 32, 'intermediate_size': 64,
    'num_hidden_layers': 1, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 16,
    'vocab_size': 32, 'max_position_embeddings': 64, 'rms_norm_eps': 1e-5, 'rope_theta': 10000.0,
    'tie_word_embeddings': False, 'hidden_act': 'silu', 'torch_dtype': 'float16', 'bos_token_id': 0, 'eos_token_id': 1,
}
LINEARS = {  # name: (N, K)
    'self_attn.q_proj': (32, 32), 'self_attn.k_proj': (16, 32), 'self_attn.v_proj': (16, 32), 'self_attn.o_proj': (32, 32),
    'mlp.gate_proj': (64, 32), 'mlp.up_proj': (64, 32), 'mlp.down_proj': (32, 64),
}

ST_DTYPES = {np.dtype('float32'): 'F32', np.dtype('float16'): 'F16', np.dtype('int32'): 'I32', np.dtype('uint8'): 'U8'}


def save(path, tensors, f8=()):
    """safetensors writer (names sorted, 8-byte aligned header); names in f8 are uint8 arrays stored as F8_E4M3."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.tobytes()
        header[name] = {'dtype': 'F8_E4M3' if name in f8 else ST_DTYPES[a.dtype], 'shape': list(a.shape), 'data_offsets': [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


def float_parts(rng):
    """The tensors that stay float (float16): embedding, norms, lm_head."""
    t = {
        'model.embed_tokens.weight': (rng.standard_normal((32, 32)) * 0.5).astype(np.float16),
        'model.norm.weight': (1 + 0.1 * rng.standard_normal(32)).astype(np.float16),
        'lm_head.weight': (rng.standard_normal((32, 32)) * 0.2).astype(np.float16),
        'model.layers.0.input_layernorm.weight': (1 + 0.1 * rng.standard_normal(32)).astype(np.float16),
        'model.layers.0.post_attention_layernorm.weight': (1 + 0.1 * rng.standard_normal(32)).astype(np.float16),
    }
    return t


def int4_parts(rng, n, k):
    """Random 4-bit codes q [K, N], zero points z [K/g, N] (1..14), float16 scales s [K/g, N]."""
    q = rng.integers(0, 16, size=(k, n)).astype(np.int64)
    z = rng.integers(1, 15, size=(k // G, n)).astype(np.int64)
    s = (0.02 + 0.05 * rng.random((k // G, n))).astype(np.float16)
    return q, z, s


def dequant_int4(q, z, s):
    """[K, N] codes → float32 weight [N, K] (w = (q - z) * s, in float32 as the loaders compute it)."""
    k = q.shape[0]
    zz = np.repeat(z, G, axis=0)[:k].astype(np.float32)
    ss = np.repeat(s.astype(np.float32), G, axis=0)[:k]
    return ((q.astype(np.float32) - zz) * ss).T.copy()


def to_i32(words):
    return words.astype(np.uint32).view(np.int32)


def pack_awq_cols(a):
    """[R, C] 4-bit values → int32 [R, C/8]: column 8c + order[i] at bits 4i (autoawq pack order)."""
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    r, c = a.shape
    out = np.zeros((r, c // 8), dtype=np.uint64)
    for col in range(c // 8):
        for i in range(8):
            out[:, col] |= (a[:, col * 8 + order[i]].astype(np.uint64) & 15) << np.uint64(4 * i)
    return to_i32(out)


def pack_rows(a):
    """[K, N] → int32 [K/8, N]: row 8r + i at bits 4i (GPTQ qweight)."""
    k, n = a.shape
    out = np.zeros((k // 8, n), dtype=np.uint64)
    for r in range(k // 8):
        for i in range(8):
            out[r] |= (a[r * 8 + i].astype(np.uint64) & 15) << np.uint64(4 * i)
    return to_i32(out)


def pack_cols(a):
    """[R, C] → int32 [R, C/8]: column 8c + i at bits 4i (GPTQ qzeros)."""
    r, c = a.shape
    out = np.zeros((r, c // 8), dtype=np.uint64)
    for col in range(c // 8):
        for i in range(8):
            out[:, col] |= (a[:, col * 8 + i].astype(np.uint64) & 15) << np.uint64(4 * i)
    return to_i32(out)


def unpack_awq_check(qweight, n):
    """autoawq's unpack_awq + reverse order, to check the packing round-trips."""
    shifts = np.arange(0, 32, 4)
    w = (qweight.view(np.uint32)[:, :, None] >> shifts[None, None, :]) & 15
    w = w.reshape(qweight.shape[0], -1)
    rev = np.arange(n).reshape(-1, 8)[:, [0, 4, 1, 5, 2, 6, 3, 7]].reshape(-1)
    return w[:, rev]


def e4m3_table():
    t = np.zeros(256, dtype=np.float64)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e, m = (b >> 3) & 15, b & 7
        t[b] = np.nan if (e == 15 and m == 7) else (s * m * 2.0 ** -9 if e == 0 else s * (1 + m / 8) * 2.0 ** (e - 7))
    return t


def write(kind, tensors, expected, qc, f8=()):
    d = os.path.join(OUT, kind)
    os.makedirs(d, exist_ok=True)
    save(os.path.join(d, 'model.safetensors'), tensors, f8)
    save(os.path.join(d, 'expected.safetensors'), expected)
    with open(os.path.join(d, 'config.json'), 'w') as f:
        json.dump({**CONFIG, 'quantization_config': qc}, f, indent=2)


def main():
    rng = np.random.default_rng(21)
    base = float_parts(rng)
    awq, gptq, exp_int4 = dict(base), dict(base), {}
    for name, (n, k) in LINEARS.items():
        q, z, s = int4_parts(rng, n, k)
        p = f'model.layers.0.{name}'
        exp_int4[f'{p}.weight'] = dequant_int4(q, z, s)
        awq[f'{p}.qweight'] = pack_awq_cols(q)
        assert (unpack_awq_check(awq[f'{p}.qweight'], n) == q).all()
        awq[f'{p}.qzeros'] = pack_awq_cols(z)
        awq[f'{p}.scales'] = s
        gptq[f'{p}.qweight'] = pack_rows(q)
        gptq[f'{p}.qzeros'] = pack_cols(z - 1)  # v1 stores z - 1
        gptq[f'{p}.scales'] = s
        gptq[f'{p}.g_idx'] = (np.arange(k) // G).astype(np.int32)
    write('awq', awq, exp_int4, {'quant_method': 'awq', 'bits': 4, 'group_size': G, 'version': 'gemm', 'zero_point': True})
    write('gptq', gptq, exp_int4, {'quant_method': 'gptq', 'bits': 4, 'group_size': G, 'desc_act': False, 'sym': False,
                                   'checkpoint_format': 'gptq', 'true_sequential': True})

    fp8, exp_fp8 = dict(base), {}
    lut = e4m3_table()
    for name, (n, k) in LINEARS.items():
        p = f'model.layers.0.{name}'
        codes = rng.integers(0, 256, size=(n, k)).astype(np.uint8)
        codes[(codes & 0x7f) == 0x7f] = 0x38  # no NaN codes
        per_tensor = name == 'self_attn.q_proj'
        scale = (np.array([0.01], dtype=np.float32) if per_tensor else (0.005 + 0.01 * rng.random((n, 1))).astype(np.float32))
        fp8[f'{p}.weight'] = codes
        fp8[f'{p}.weight_scale'] = scale
        fp8[f'{p}.input_scale'] = np.array([1.0], dtype=np.float32)
        exp_fp8[f'{p}.weight'] = (lut[codes].astype(np.float32) * (scale[0] if per_tensor else scale)).astype(np.float32)
    qc = {'quant_method': 'compressed-tensors', 'format': 'float-quantized', 'quantization_status': 'compressed',
          'config_groups': {'group_0': {'targets': ['Linear'], 'weights': {'num_bits': 8, 'type': 'float', 'strategy': 'channel', 'symmetric': True},
                                        'input_activations': {'num_bits': 8, 'type': 'float', 'strategy': 'tensor', 'dynamic': False}}},
          'ignore': ['lm_head']}
    write('fp8', fp8, exp_fp8, qc, f8={k for k in fp8 if k.endswith('proj.weight')})
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(OUT) for f in fs)
    print(f'wrote {OUT}: {total} bytes')


if __name__ == '__main__':
    main()
