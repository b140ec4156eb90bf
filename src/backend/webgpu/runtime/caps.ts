/// <reference types="@webgpu/types" />
// Device capabilities the kernels may use only after checking them on this device, once, at start-up
// (an init hook: it runs before any recorded work is encoded, on the raw device):
//
// - `hwHalf`: WGSL's pack2x16float rounds float32 to float16 correctly (to nearest even, subnormals
//   kept, overflow to infinity). The WGSL spec allows either neighbour, so the exact bit-level
//   nbx_f2h is the default; it costs ~20 integer operations per element, which made float16 outputs
//   ALU-bound on the H200 (1 GiB f16 a*x+b at 65% of the CUDA backend). The check converts every
//   float16 value, every midpoint between neighbours (ties) and the float32 values either side of each
//   midpoint, the overflow threshold, infinities, NaN and float32 subnormals, compared with the CPU's
//   conversion; only NaN's payload may differ (any NaN passes, as PyTorch's CUDA conversion).
// - `subgroups`: the reductions' workgroup combine through subgroupShuffleXor (fewer barriers than a
//   workgroup-memory tree), when the device has the 'subgroups' feature; the real reduction kernel is
//   compiled and run on data whose sums are exact, and must agree.
//
// NBX_WEBGPU_HW_F16 / NBX_WEBGPU_SUBGROUPS: 0 turns a capability off; 1 skips the run check (only the
// compile check remains: for compile-only testing on Dawn's null backend, which executes nothing).

import { toFloat16Bits } from '../../../dtype/convert.js';
import { env, MAP_READ, USAGE } from './gpu.js';

export const caps = {
  hwHalf: false,
  subgroups: false,
  /** Why each is on or off (benchmarks and the device script print it). */
  reason: { hwHalf: 'not checked yet', subgroups: 'not checked yet' },
};

/** A compute kernel checked on the raw device: the output buffer (binding `outBinding`) after one dispatch. */
export interface RawRun {
  code: string;
  /** Storage buffers in binding order (binding 0 is the uniform block when `uniform` is given). */
  buffers: { data?: Uint32Array<ArrayBuffer>; words: number }[];
  uniform?: Uint32Array<ArrayBuffer>;
  groups: [number, number, number];
  outBinding: number;
}

/** Compiles `r.code` (throws with the compiler's messages) and, unless `compileOnly`, runs it and returns the output words. */
export async function rawRun(device: GPUDevice, r: RawRun, compileOnly = false): Promise<Uint32Array | null> {
  device.pushErrorScope('validation');
  let failure = '';
  let pipeline: GPUComputePipeline | undefined;
  try {
    const module = device.createShaderModule({ code: r.code });
    const info = await module.getCompilationInfo();
    failure = info.messages.filter((m) => m.type === 'error').map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; ');
    if (!failure) pipeline = await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  } catch (e) {
    failure ||= (e as Error).message;
  } finally {
    const e = await device.popErrorScope();
    if (e && !failure) failure = e.message;
  }
  if (failure || !pipeline) throw new Error(failure || 'no pipeline');
  if (compileOnly) return null;
  const made: GPUBuffer[] = [];
  const buf = (bytes: number, usage: number): GPUBuffer => { const b = device.createBuffer({ size: Math.max(16, bytes), usage }); made.push(b); return b; };
  try {
    const entries: GPUBindGroupEntry[] = [];
    let binding = 0;
    if (r.uniform) {
      const u = buf(Math.ceil(r.uniform.byteLength / 16) * 16, USAGE.UNIFORM | USAGE.COPY_DST);
      device.queue.writeBuffer(u, 0, r.uniform);
      entries.push({ binding: binding++, resource: { buffer: u } });
    }
    let out: GPUBuffer | undefined;
    for (const s of r.buffers) {
      const b = buf(s.words * 4, USAGE.STORAGE | USAGE.COPY_SRC | USAGE.COPY_DST);
      if (s.data) device.queue.writeBuffer(b, 0, s.data);
      if (binding === r.outBinding) out = b;
      entries.push({ binding: binding++, resource: { buffer: b } });
    }
    const words = r.buffers[r.outBinding - (r.uniform ? 1 : 0)]!.words;
    const read = buf(words * 4, USAGE.MAP_READ | USAGE.COPY_DST);
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries }));
    pass.dispatchWorkgroups(...r.groups);
    pass.end();
    enc.copyBufferToBuffer(out!, 0, read, 0, words * 4);
    device.queue.submit([enc.finish()]);
    await read.mapAsync(MAP_READ);
    const res = new Uint32Array(read.getMappedRange().slice(0));
    read.unmap();
    return res;
  } finally {
    for (const b of made) b.destroy();
  }
}

/**
 * float32 bit patterns that decide whether a float32 -> float16 conversion rounds exactly as the CPU,
 * with the float16 bits each must give (-1: any NaN): every finite half h, the tie between h and its
 * successor (to even), one float32 ulp below it (h) and above it (h + 1), each with both signs; then the
 * overflow threshold, infinities, NaNs and float32 subnormals.
 */
export function halfProbe(): { input: Uint32Array<ArrayBuffer>; want: Int32Array } {
  const extras = [65504, 65519.99609375, 65520, 1e6, 3.4e38, Infinity, NaN, 2 ** -25, 3 * 2 ** -26, 2 ** -26, 1e-45, 1.1754942e-38];
  const count = 0x7c00 * 8 + extras.length * 2;
  const input = new Uint32Array(count + (count % 2)), want = new Int32Array(input.length);
  const f = new Float32Array(1), u = new Uint32Array(f.buffer);
  let i = 0;
  const put = (bits: number, h: number): void => { input[i] = bits >>> 0; want[i++] = h; input[i] = (bits | 0x80000000) >>> 0; want[i++] = h | 0x8000; };
  for (let h = 0; h < 0x7c00; h++) {
    // the value of h and of its successor (65536 past the largest half), exactly
    const e = h >> 10, m = h & 0x3ff, ulp = 2 ** (Math.max(e, 1) - 25);
    const lo = e === 0 ? m * 2 ** -24 : (1024 + m) * ulp;
    f[0] = lo; put(u[0]!, h);
    f[0] = lo + ulp / 2; const tie = u[0]!; // exact in float32: a half has 11 significant bits
    put(tie, h & 1 ? h + 1 : h);
    put(tie - 1, h);
    put(tie + 1, h + 1);
  }
  for (const x of extras) { f[0] = x; put(u[0]!, Number.isNaN(x) ? -1 : toFloat16Bits(x)); }
  return { input, want };
}

async function checkHwHalf(device: GPUDevice): Promise<string> {
  const { input, want } = halfProbe();
  const pairs = input.length / 2;
  const code = `@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x + gid.y * 65535u * 64u;
  if (i >= ${pairs}u) { return; }
  dst[i] = pack2x16float(vec2<f32>(bitcast<f32>(src[2u * i]), bitcast<f32>(src[2u * i + 1u])));
}`;
  const groups = Math.ceil(pairs / 64);
  const force = env('NBX_WEBGPU_HW_F16') === '1';
  const got = await rawRun(device, { code, buffers: [{ data: input, words: input.length }, { words: pairs }],
    groups: [Math.min(groups, 65535), Math.ceil(groups / 65535), 1], outBinding: 1 }, force);
  if (!got) return '';
  let bad = 0, first = '';
  for (let i = 0; i < input.length; i++) {
    const h = (got[i >> 1]! >>> ((i & 1) * 16)) & 0xffff, w = want[i]!;
    if (w < 0 ? (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0 : h === w) continue;
    if (!bad++) first = `0x${input[i]!.toString(16)} -> 0x${h.toString(16)}, want ${w < 0 ? 'NaN' : `0x${w.toString(16)}`}`;
  }
  return bad ? `${bad} of ${input.length} conversions differ (first: ${first})` : '';
}

/** Runs the checks (an init hook); `subgroupCheck` compiles and runs the reduction kernel with subgroups. */
export async function probeCaps<B extends { readonly device: GPUDevice }>(be: B, subgroupCheck: (be: B, compileOnly: boolean) => Promise<string>): Promise<void> {
  const off = (v: string | undefined): boolean => v === '0';
  caps.hwHalf = false;
  caps.subgroups = false;
  if (off(env('NBX_WEBGPU_HW_F16'))) caps.reason.hwHalf = 'off (NBX_WEBGPU_HW_F16=0)';
  else {
    try {
      const why = await checkHwHalf(be.device);
      caps.hwHalf = why === '';
      caps.reason.hwHalf = why === '' ? (env('NBX_WEBGPU_HW_F16') === '1' ? 'forced (NBX_WEBGPU_HW_F16=1, compiled only)' : 'pack2x16float rounds exactly') : `bit-level rounding: pack2x16float ${why}`;
    } catch (e) {
      caps.reason.hwHalf = `bit-level rounding: the check failed: ${(e as Error).message.split('\n')[0]}`;
    }
  }
  if (off(env('NBX_WEBGPU_SUBGROUPS'))) caps.reason.subgroups = 'off (NBX_WEBGPU_SUBGROUPS=0)';
  else if (!be.device.features.has('subgroups' as GPUFeatureName)) caps.reason.subgroups = 'the device has no subgroups (workgroup-memory trees)';
  else {
    try {
      const why = await subgroupCheck(be, env('NBX_WEBGPU_SUBGROUPS') === '1');
      caps.subgroups = why === '';
      caps.reason.subgroups = why === '' ? (env('NBX_WEBGPU_SUBGROUPS') === '1' ? 'forced (NBX_WEBGPU_SUBGROUPS=1, compiled only)' : 'subgroupShuffleXor combine checked') : `workgroup-memory trees: ${why}`;
    } catch (e) {
      caps.subgroups = false;
      caps.reason.subgroups = `workgroup-memory trees: the subgroup kernel failed: ${(e as Error).message.split('\n')[0]!.slice(0, 300)}`;
    }
  }
}
