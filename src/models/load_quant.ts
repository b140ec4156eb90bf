// Quantized checkpoints for nbx.models.load (issue #21). config.json's `quantization_config` says how
// the Linear weights are stored; a QuantSource wraps the checkpoint so that it shows, for each quantized
// Linear `X`, our layout's tensors `X.qweight` (uint8 [N, rowBytes]), `X.scales` and `X.zeros` (float32),
// repacking at load where the checkpoint's packing differs, and says each Linear's layout
// (quantDecls), which the loader declares on the empty model before reading (nn.Linear.declare_quantized).
//
// - 'nbx' (what `nbx quantize` writes, docs/quantization.md): already our layout.
// - 'awq' (AutoAWQ, version 'gemm'): qweight int32 [K, N/8] packing the columns 8c + [0,2,4,6,1,3,5,7][i]
//   at bits 4i, qzeros int32 [K/g, N/8] likewise, scales float16 [K/g, N]; w = (q − z)·s.
// - 'gptq' (AutoGPTQ / optimum, checkpoint_format 'gptq', bits 4): qweight int32 [K/8, N] packing rows
//   8r + i at bits 4i, qzeros int32 [K/g, N/8] packing columns 8c + i and storing z − 1 (v1: the zero is
//   the stored value + 1; 'gptq_v2' stores z itself), scales [K/g, N], g_idx [K] which must be k / g
//   (act-order checkpoints, desc_act with a permuted g_idx, are an UnsupportedError).
// - 'fp8', 'fbgemm_fp8' and 'compressed-tensors' float8 checkpoints: `X.weight` float8_e4m3fn [N, K] with
//   `X.weight_scale` (or transformers' `weight_scale_inv`) per tensor ([] / [1]) or per channel ([N] /
//   [N, 1]); block-wise scales are an UnsupportedError. An `input_scale` (static activation scale) is
//   not used: activations stay in the model dtype (W8A16).

import type { SafetensorsHandle, TensorInfo } from '../io/index.js';
import { Tensor } from '../tensor/tensor.js';
import type { DeviceLike } from '../backend/backend.js';
import type { DTypeLike } from '../dtype/dtypes.js';
import { FormatError, UnsupportedError } from '../errors.js';
import { makeLayout, type QuantFormat, type QuantLayout } from '../quant/formats.js';
import { residentCopy } from '../quant/wasm_memory.js';

const OP = 'models.load';

export interface QuantDecl { layout: QuantLayout; asymmetric: boolean; perTensor: boolean }

/**
 * What a checkpoint's tensors are read through (nbx.models.load): a SafetensorsHandle on files, the
 * in-memory checkpoint of fetched files (load_remote.ts), a GGUF file (load_gguf.ts), or a QuantSource.
 * `decls`: the quantized Linears (module path → layout) whose `qweight`/`scales`/`zeros` it gives.
 */
export type WeightSource = Pick<SafetensorsHandle, 'names' | 'info' | 'get' | 'close'> & { decls?: Map<string, QuantDecl> };

type Maker = (device: DeviceLike) => Promise<Tensor>;

/** A checkpoint seen through our quantized layout (see the top of this file). */
export class QuantSource implements WeightSource {
  readonly decls = new Map<string, QuantDecl>();
  /** Our names → how to make them; names not here pass through to the checkpoint. */
  private readonly made = new Map<string, { info: TensorInfo; make: Maker }>();
  private readonly hidden = new Set<string>();
  constructor(private readonly inner: WeightSource) {}

  names(): string[] { return [...this.inner.names().filter((n) => !this.hidden.has(n)), ...this.made.keys()]; }
  info(name: string): TensorInfo { return this.made.get(name)?.info ?? this.inner.info(name); }
  async get(name: string, opts: { device?: DeviceLike; dtype?: DTypeLike } = {}): Promise<Tensor> {
    const m = this.made.get(name);
    if (!m) return this.inner.get(name, opts);
    return m.make(opts.device ?? 'cpu');
  }
  async close(): Promise<void> { await this.inner.close(); }

  /** Replaces checkpoint tensors `hide` by our `name` (shape, dtype, bytes for progress) made by `make`. */
  add(name: string, dtype: 'uint8' | 'float32', shape: number[], make: Maker, hide: string[]): void {
    const byteLength = shape.reduce((a, b) => a * b, 1) * (dtype === 'uint8' ? 1 : 4);
    this.made.set(name, { info: { name, dtype, shape, byteOffset: 0, byteLength }, make });
    for (const h of hide) this.hidden.add(h);
  }
  /** A checkpoint tensor on the host (int32 and float buffers for repacking). */
  async host(name: string): Promise<Tensor> { return this.inner.get(name, { device: 'cpu' }); }
}

/** Packed parts on the device; on the CPU in the quant memory (src/quant/wasm_memory.ts: read in place by the SIMD kernels). */
export function onDevice(data: Uint8Array | Float32Array, shape: number[], device: DeviceLike): Tensor {
  const cpu = device === 'cpu' || (typeof device === 'object' && device !== null && (device as { type?: string }).type === 'cpu');
  return Tensor.fromStorage(cpu ? residentCopy(data) : data, data instanceof Uint8Array ? 'uint8' : 'float32', shape, device);
}

/** Float32 host values of a host tensor (any float dtype). */
async function floats(src: QuantSource, name: string): Promise<Float32Array> {
  const t = await src.host(name);
  const f = t.to({ dtype: 'float32' }).contiguous();
  const out = (f.storage.buf as Float32Array).slice(f.storage_offset(), f.storage_offset() + f.numel());
  if (f !== t) f.dispose();
  t.dispose();
  return out;
}
async function int32s(src: QuantSource, name: string): Promise<Int32Array> {
  const t = await src.host(name);
  if (t.dt !== 'int32') { t.dispose(); throw new FormatError(OP, `${name} must be int32 (packed 4-bit), got ${t.dt}`); }
  const c = t.contiguous();
  const out = (c.storage.buf as Int32Array).slice(c.storage_offset(), c.storage_offset() + c.numel());
  if (c !== t) c.dispose();
  t.dispose();
  return out;
}

/** [R, C] float32 → [C, R]. */
function transpose(a: Float32Array, R: number, C: number): Float32Array {
  const o = new Float32Array(R * C);
  for (let r = 0; r < R; r++) for (let c = 0; c < C; c++) o[c * R + r] = a[r * C + c]!;
  return o;
}

const AWQ_NIBBLE = [0, 4, 1, 5, 2, 6, 3, 7]; // column j of a packed group of 8 sits at nibble AWQ_NIBBLE[j]

/**
 * Wraps `inner` for config.json's quantization_config `qc` (undefined: no wrapper). `configName` names
 * config.json in messages.
 */
export function quantSource(inner: WeightSource, qc: unknown, configName: string): QuantSource | null {
  if (qc === undefined || qc === null) return null;
  if (typeof qc !== 'object' || Array.isArray(qc)) throw new FormatError(OP, `${configName}: quantization_config must be an object`);
  const c = qc as Record<string, unknown>;
  const method = String(c.quant_method ?? '');
  const src = new QuantSource(inner);
  const names = new Set(inner.names());
  const info = (n: string): TensorInfo => inner.info(n);
  const linears = (suffix: string): string[] => [...names].filter((n) => n.endsWith(suffix)).map((n) => n.slice(0, -suffix.length));
  switch (method) {
    case 'nbx': {
      const format = String(c.format) as QuantFormat;
      if (!['int8', 'int4', 'fp8_e4m3'].includes(format)) throw new FormatError(OP, `${configName}: quantization_config.format '${format}' is not one nbx writes (int8, int4, fp8_e4m3)`);
      for (const p of linears('.qweight')) {
        const q = info(`${p}.qweight`), s = names.has(`${p}.scales`) ? info(`${p}.scales`) : null;
        if (q.dtype !== 'uint8' || q.shape.length !== 2 || !s || s.dtype !== 'float32') throw new FormatError(OP, `${configName}: ${p}.qweight must be uint8 [N, bytes] with float32 ${p}.scales`);
        const [N, rb] = q.shape as [number, number];
        const K = format === 'int4' ? 2 * rb : rb;
        const g = format === 'int4' ? K / (s.shape[1] ?? 1) : undefined;
        src.decls.set(p, { layout: makeLayout(OP, format, N, K, g), asymmetric: names.has(`${p}.zeros`), perTensor: format === 'fp8_e4m3' && s.shape.reduce((a, b) => a * b, 1) === 1 });
        for (const part of ['qweight', 'scales', 'zeros'] as const) {
          const n = `${p}.${part}`;
          if (!names.has(n)) continue;
          const t = info(n);
          src.add(n, t.dtype as 'uint8' | 'float32', t.shape, async (device) => {
            const h = await src.host(n);
            const c2 = h.contiguous();
            const a = c2.storage.buf as Uint8Array | Float32Array;
            const data = a.slice(c2.storage_offset(), c2.storage_offset() + c2.numel());
            if (c2 !== h) c2.dispose();
            h.dispose();
            return onDevice(data, t.shape, device);
          }, [n]);
        }
      }
      return src;
    }
    case 'awq': case 'gptq': {
      const bits = Number(c.bits ?? c.w_bit ?? 4);
      if (bits !== 4) throw new UnsupportedError(OP, `${configName}: ${method} with ${bits}-bit weights is not supported (4-bit is)`);
      const version = String(c.version ?? 'gemm').toLowerCase();
      if (method === 'awq' && version !== 'gemm') throw new UnsupportedError(OP, `${configName}: AWQ version '${version}' is not supported (the 'gemm' packing is)`);
      const fmt = String(c.checkpoint_format ?? 'gptq');
      if (method === 'gptq' && fmt !== 'gptq' && fmt !== 'gptq_v2') throw new UnsupportedError(OP, `${configName}: GPTQ checkpoint_format '${fmt}' is not supported (gptq, gptq_v2 are)`);
      const zeroOffset = method === 'gptq' && fmt === 'gptq' ? 1 : 0;
      for (const p of linears('.qweight')) {
        const qi = info(`${p}.qweight`), si = info(`${p}.scales`), zi = names.has(`${p}.qzeros`) ? info(`${p}.qzeros`) : null;
        if (!zi) throw new FormatError(OP, `${configName}: ${p} has qweight but no qzeros`);
        const [G, N] = si.shape as [number, number];
        const K = method === 'awq' ? qi.shape[0]! : qi.shape[0]! * 8;
        const wantQ = method === 'awq' ? [K, N / 8] : [K / 8, N];
        if (qi.shape.length !== 2 || qi.shape[0] !== wantQ[0] || qi.shape[1] !== wantQ[1] || zi.shape[0] !== G || zi.shape[1] !== N / 8 || K % G !== 0) {
          throw new FormatError(OP, `${configName}: ${method} tensors of ${p} do not agree: qweight [${qi.shape.join(', ')}], qzeros [${zi.shape.join(', ')}], scales [${si.shape.join(', ')}]`);
        }
        const g = K / G;
        const layout = makeLayout(OP, 'int4', N, K, g);
        src.decls.set(p, { layout, asymmetric: true, perTensor: false });
        const hide = [`${p}.qweight`, `${p}.qzeros`, `${p}.scales`, `${p}.g_idx`];
        src.add(`${p}.qweight`, 'uint8', [N, K / 2], async (device) => {
          if (names.has(`${p}.g_idx`)) {
            const idx = await int32s(src, `${p}.g_idx`);
            for (let k = 0; k < K; k++) if (idx[k] !== Math.floor(k / g)) throw new UnsupportedError(OP, `${p}.g_idx is not the trivial order (k / ${g}): act-order (desc_act) GPTQ checkpoints are not supported; requantize without desc_act`);
          }
          const w = await int32s(src, `${p}.qweight`), out = new Uint8Array(N * K / 2);
          const nib = (k: number, n: number): number => method === 'awq'
            ? (w[k * (N / 8) + (n >> 3)]! >>> (4 * AWQ_NIBBLE[n & 7]!)) & 15
            : (w[(k >> 3) * N + n]! >>> (4 * (k & 7))) & 15;
          for (let n = 0; n < N; n++) for (let k = 0; k < K; k += 2) out[n * (K / 2) + (k >> 1)] = nib(k, n) | (nib(k + 1, n) << 4);
          return onDevice(out, [N, K / 2], device);
        }, hide);
        src.add(`${p}.scales`, 'float32', [N, G], async (device) => onDevice(transpose(await floats(src, `${p}.scales`), G, N), [N, G], device), []);
        src.add(`${p}.zeros`, 'float32', [N, G], async (device) => {
          const z = await int32s(src, `${p}.qzeros`), out = new Float32Array(N * G);
          for (let gi = 0; gi < G; gi++) for (let n = 0; n < N; n++) {
            const word = z[gi * (N / 8) + (n >> 3)]!;
            out[n * G + gi] = ((word >>> (4 * (method === 'awq' ? AWQ_NIBBLE[n & 7]! : n & 7))) & 15) + zeroOffset;
          }
          return onDevice(out, [N, G], device);
        }, []);
      }
      return src;
    }
    case 'fp8': case 'fbgemm_fp8': case 'compressed-tensors': {
      if (c.weight_block_size !== undefined && c.weight_block_size !== null) throw new UnsupportedError(OP, `${configName}: block-wise fp8 scales (weight_block_size ${JSON.stringify(c.weight_block_size)}) are not supported (per-tensor and per-channel are)`);
      for (const n of names) {
        if (!n.endsWith('.weight') || info(n).dtype !== 'float8_e4m3fn') continue;
        const p = n.slice(0, -'.weight'.length);
        const sn = names.has(`${p}.weight_scale`) ? `${p}.weight_scale` : names.has(`${p}.weight_scale_inv`) ? `${p}.weight_scale_inv` : null;
        if (!sn) throw new FormatError(OP, `${configName}: ${n} is float8_e4m3fn without a weight_scale`);
        const [N, K] = info(n).shape as [number, number];
        const sc = info(sn).shape, numel = sc.reduce((a, b) => a * b, 1);
        const perTensor = numel === 1;
        if (!perTensor && !(numel === N && sc[0] === N)) throw new UnsupportedError(OP, `${configName}: ${sn} has shape [${sc.join(', ')}]: only per-tensor and per-channel fp8 scales are supported`);
        src.decls.set(p, { layout: makeLayout(OP, 'fp8_e4m3', N, K), asymmetric: false, perTensor });
        src.add(`${p}.qweight`, 'uint8', [N, K], async (device) => {
          const t = await src.host(n);
          const c2 = t.contiguous();
          const b = (c2.storage.buf as Uint8Array).slice(c2.storage_offset(), c2.storage_offset() + c2.numel());
          if (c2 !== t) c2.dispose();
          t.dispose();
          return onDevice(b, [N, K], device);
        }, [n, sn, `${p}.input_scale`, `${p}.input_scale_ub`]);
        src.add(`${p}.scales`, 'float32', [perTensor ? 1 : N], async (device) => onDevice(await floats(src, sn), [perTensor ? 1 : N], device), []);
      }
      return src;
    }
    default:
      throw new UnsupportedError(OP, `${configName}: quantization_config.quant_method '${method}' is not supported (nbx, awq, gptq, fp8, fbgemm_fp8, compressed-tensors float8 are)`);
  }
}
