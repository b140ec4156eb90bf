// Elementwise kernels for WebGPU: the IR rendered to WGSL by WgslRenderer, in two layouts like CUDA's:
// flat (one dimension after `coalesce`, each input contiguous or a broadcast scalar) and strided
// (N-d index arithmetic from the coalesced shape). Outputs of 1- and 2-byte dtypes are packed in u32
// words, so a contiguous output is written a whole word per invocation (4 bytes or 2 halves), keeping
// the neighbours of a partial first/last word; a strided packed output (copies into views) is written
// with atomic and/or on its word instead.

import { Expr } from '../../../ir/expr.js';
import { DTYPES, type DTypeName } from '../../../dtype/dtypes.js';
import { WGSL as R, perWord, wgslPrelude, checkWgslDType, WGSL_DTYPES } from '../../../ir/render_wgsl.js';
import { checkInt64Expr, i64Words, integerDivides } from '../../../ir/wgsl_int64.js';
import { DeviceLimitError, ValueError } from '../../../errors.js';
import type { StridedRef } from '../../backend.js';
import { coalesce } from '../../../tensor/shape.js';
import { broadcastStrides } from '../../../tensor/shape.js';
import type { Program, WebGPUDevice, WGBuffer } from './device.js';
import { elementwiseConfig, registerTuneProblem } from '../tuning/spaces.js';
import { caps } from './caps.js';

/** `u.w[i/4][i%4]`: word i of the uniform block. */
export const U = (i: number): string => `u.w[${i >> 2}][${i & 3}]`;

/**
 * The kernel header: uniform block of `words` words, then the storage bindings of `access` (see
 * Program): r/w read-only/read-write array<u32>, v/x the same as array<vec4<u32>>, a atomic<u32>.
 */
export function header(words: number, access: string): string {
  const lines = [`struct Params { w: array<vec4<u32>, ${Math.max(1, Math.ceil(words / 4))}> }`, '@group(0) @binding(0) var<uniform> u: Params;'];
  for (let i = 0; i < access.length; i++) {
    const a = access[i]!;
    const type = a === 'a' ? 'atomic<u32>' : a === 'v' || a === 'x' ? 'vec4<u32>' : 'u32';
    lines.push(`@group(0) @binding(${i + 1}) var<storage, ${a === 'r' || a === 'v' ? 'read' : 'read_write'}> b${i + 1}: array<${type}>;`);
  }
  return lines.join('\n');
}

/** The entry point with a flattened 2-D grid: `g` is the invocation's global index. */
export function entry(wg: number, body: string): string {
  return `@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let g = (wid.y * nwg.x + wid.x) * ${wg}u + lid;
  ${body}
}`;
}

/** Assembles a full module: header, helper prelude (only what the code uses), `extra` declarations, entry point. */
export function module(words: number, access: string, wg: number, body: string, extra = '', entryCode?: string): string {
  const main = `${extra}\n${entryCode ?? entry(wg, body)}`;
  return `${header(words, access)}\n${wgslPrelude(main)}\n${main}\n`;
}

/**
 * Element `part` (a constant) of a u32 word as its compute value (R.fromWord): float16 through the
 * unpack2x16float builtin, an exact conversion in hardware, where the bit-level nbx_h2f made 16-byte
 * float16 kernels ALU-bound (1 GiB a+b ran at 64% of float32's bandwidth on the H200).
 */
export function wordLane(d: DTypeName, word: string, part: number): string {
  return d === 'float16' ? `unpack2x16float(${word})[${part}]` : R.fromWord(d, word, part);
}

/** Uniform word of each parameter slot after the first (int64 parameters take two words), and the total. */
function paramLayout(expr: Expr): { at: number[]; words: number } {
  const at: number[] = [];
  let w = 0;
  for (const d of expr.paramDTypes()) { at.push(w); w += d === 'int64' ? 2 : 1; }
  return { at, words: w };
}

const f32 = new Float32Array(1);
const f32u = new Uint32Array(f32.buffer);
/** A parameter's 32-bit word: float bits, or the two's complement of an int (int64: see i64Words). */
function paramWord(v: number | bigint, d: DTypeName): number {
  if (typeof v === 'bigint') v = Number(BigInt.asIntN(32, v));
  if (DTYPES[d].kind === 'float') { f32[0] = v; return f32u[0]!; }
  return (v | 0) >>> 0;
}

interface Layout {
  /** coalesced rank; 0/1 with every input stride in {0, 1} is the flat kernel */
  nd: number;
  flat: boolean;
  /** flat: per input, 0 (broadcast scalar) or 1 */
  unit: number[];
  outStrided: boolean;
  /**
   * flat 16-byte accesses: each invocation computes whole vec4<u32>s of the output (4 words: 4 floats,
   * 8 halves, 16 bytes), `vpt` of them, a grid-stride apart; unit-stride inputs share the output's
   * elements per word and are read as vec4s too. 0: not vectorized.
   */
  vpt: number;
  /** float16 outputs rounded by pack2x16float (caps.hwHalf when the program was made) */
  hwHalf: boolean;
}

/** R.bits, with float16 through pack2x16float when `hw` (the start-up check found it exact, caps.ts). */
function bitsOut(d: DTypeName, v: string, hw: boolean): string {
  return d === 'float16' && hw ? `pack2x16float(vec2<f32>(${v}, 0.0f))` : R.bits(d, v);
}

function ewProgram(expr: Expr, inD: DTypeName[], outD: DTypeName, lay: Layout, bind: number[], nIn: number, wg: number): Program {
  const { nd, flat, unit, outStrided, vpt, hwHalf } = lay;
  const vec = vpt > 0;
  const k = perWord(outD);
  const packedContig = k > 1 && !outStrided;
  // with `vec`, the buffers of unit-stride inputs are bound as vec4 arrays
  const vecBind = new Set(vec ? bind.filter((_, s) => unit[s]) : []);
  // integer division: a last binding, the error word division by zero sets (see wgsl_int64.ts)
  const zdiv = integerDivides(expr);
  const access = (vec ? 'x' : outStrided && k > 1 ? 'a' : 'w') + [...Array(nIn).keys()].map((i) => (vecBind.has(i + 2) ? 'v' : 'r')).join('') + (zdiv ? 'a' : '');
  const flagZero = zdiv ? `\n  if (nbx_divzero) { atomicStore(&b${access.length}[0], 1u); }` : '';
  // uniform: [units, n, oo, w0 | grid stride] [shape(nd)] [out strides(nd)] per input [off, strides(nd)] params
  let w = 4;
  const shapeAt = w; if (!flat) w += nd;
  const ostAt = w; if (outStrided) w += nd;
  const inAt: number[] = [];
  for (let s = 0; s < inD.length; s++) { inAt.push(w); w += flat ? 1 : 1 + nd; }
  const pAt = w;
  const pl = paramLayout(expr);
  const words = pAt + pl.words;
  const key = `ew|${vec ? `v${vpt}` : ''}${flat ? `f${unit.join('')}` : `s${nd}`}|${outStrided ? 'os' : 'oc'}|${outD}<-${inD.join(',')}|${bind.join(',')}|${wg}${hwHalf ? '|hw' : ''}|${expr.key}`;
  const param = (s: number, d: DTypeName): string => {
    const at = pAt + pl.at[s]!;
    if (d === 'int64') return `vec2<u32>(${U(at)}, ${U(at + 1)})`;
    return DTYPES[d].kind === 'float' ? `bitcast<f32>(${U(at)})` : `bitcast<i32>(${U(at)})`;
  };
  const vecSource = (): string => {
    // vector vi: output elements E*vi .. E*vi+E-1 (E = 4 words of k elements), element l in word l/k at part l%k
    const E = 4 * k, width = 32 / k;
    const pre: string[] = [];
    for (let s = 0; s < inD.length; s++) if (unit[s]) pre.push(`let v${s} = b${bind[s]}[(${U(inAt[s]!)} / ${E}u) + vi];`);
    const lanes: string[] = [];
    // float16 outputs: both halves of a word rounded by one pack2x16float where the device rounds it
    // exactly (caps.ts); the bit-level nbx_f2h made 1 GiB f16 a*x+b ALU-bound (65% of the CUDA backend)
    const hwPack = outD === 'float16' && hwHalf;
    for (let l = 0; l < E; l++) {
      const wd = Math.floor(l / k), part = l % k;
      const [code, res] = R.render(expr, (s, d) => {
        if (unit[s]) return wordLane(d, `v${s}[${wd}]`, part);
        const j = U(inAt[s]!);
        if (!vecBind.has(bind[s]!)) return R.load(d, `b${bind[s]}`, j);
        // a broadcast scalar in a buffer bound as vec4s: its word, then its part
        const ks = perWord(d);
        const word = ks === 1 ? j : `(${j} / ${ks}u)`;
        return R.fromWord(d, `b${bind[s]}[${word} >> 2u][${word} & 3u]`, ks === 1 ? 0 : `${j} % ${ks}u`);
      }, param);
      if (hwPack) lanes.push(`{\n      ${code}\n      hv[${part}] = ${res};\n    }${part === 1 ? `\n    r[${wd}] = pack2x16float(hv);` : ''}`);
      else lanes.push(k === 1 ? `{\n      ${code}\n      r[${wd}] = ${R.bits(outD, res)};\n    }`
        : `{\n      ${code}\n      r[${wd}] = r[${wd}] | (${R.bits(outD, res)} << ${part * width}u);\n    }`);
    }
    const body = `for (var q = 0u; q < ${vpt}u; q++) {
    let vi = g + q * ${U(3)};
    if (vi >= ${U(0)}) { return; }
    ${pre.join('\n    ')}
    var r = vec4<u32>(0u);${hwPack ? '\n    var hv = vec2<f32>(0.0f);' : ''}
    ${lanes.join('\n    ')}
    b1[(${U(2)} / ${E}u) + vi] = r;
  }`;
    return module(words, access, wg, body);
  };
  const source = (): string => {
    if (vec) return vecSource();
    const idx: string[] = [];
    if (!flat && nd > 0) {
      idx.push('var r = i;');
      for (let d = nd - 1; d >= 1; d--) idx.push(`let c${d} = r % ${U(shapeAt + d)}; r = r / ${U(shapeAt + d)};`);
      idx.push('let c0 = r;');
    }
    const at = (base: number, strideAt: number): string => {
      if (nd === 0) return `${U(base)}`;
      const terms = [...Array(nd).keys()].map((d) => `i32(c${d}) * bitcast<i32>(${U(strideAt + d)})`);
      return `u32(i32(${U(base)}) + ${terms.join(' + ')})`;
    };
    for (let s = 0; s < inD.length; s++) {
      if (flat) idx.push(`let j${s} = ${U(inAt[s]!)}${unit[s] ? ' + i' : ''};`);
      else idx.push(`let j${s} = ${at(inAt[s]!, inAt[s]! + 1)};`);
    }
    const [code, res] = R.render(expr, (s, d) => R.load(d, `b${bind[s]}`, `j${s}`), param);
    const compute = `${idx.join('\n    ')}\n    ${code}`;
    let body: string;
    if (packedContig) {
      // one word per invocation: elements w*k .. w*k+k-1 of the storage, those in [oo, oo+n) computed
      const width = 32 / k, mask = k === 4 ? '0xffu' : '0xffffu';
      body = `if (g >= ${U(0)}) { return; }
  let n = ${U(1)}; let oo = ${U(2)};
  let wi = ${U(3)} + g;
  let base = i32(wi * ${k}u) - i32(oo);
  var word = 0u;
  if (base < 0 || base + ${k} > i32(n)) { word = b1[wi]; }
  for (var q = 0u; q < ${k}u; q++) {
    let e = base + i32(q);
    if (e < 0 || e >= i32(n)) { continue; }
    let i = u32(e);
    ${compute}
    word = (word & ~(${mask} << (q * ${width}u))) | (${bitsOut(outD, res, hwHalf)} << (q * ${width}u));
  }
  b1[wi] = word;${flagZero}`;
    } else {
      const oi = outStrided ? at(2, ostAt) : `${U(2)} + i`;
      const store = outStrided && k > 1 ? R.storeShared(outD, 'b1', 'oi', bitsOut(outD, res, hwHalf)) : R.store(outD, 'b1', 'oi', res);
      body = `let i = g;
  if (i >= ${U(1)}) { return; }
  ${compute}
  let oi = ${oi};
  ${store}${flagZero}`;
    }
    return module(words, access, wg, body);
  };
  return { key, access, words, source };
}

const cache = new Map<string, Program>();

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
/** Row-major contiguous (dimensions of size 1 may have any stride). */
function isContiguous(shape: readonly number[], strides: readonly number[]): boolean {
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    if (shape[d] !== 1 && strides[d] !== acc) return false;
    acc *= shape[d]!;
  }
  return true;
}

/**
 * Evaluates `expr` for every element of `out` (any strides when `outStrided`, else contiguous from its
 * offset), inputs broadcast to out's shape, on the recorded command list.
 */
export function runElementwise(be: WebGPUDevice, expr: Expr, ins: StridedRef[], params: (number | bigint)[], out: StridedRef, outStrided = false,
  force?: { wg: number; vpt: number }): void {
  checkWgslDType('elementwise', out.dtype, true);
  for (const r of ins) if (!WGSL_DTYPES.has(r.dtype)) checkWgslDType('elementwise', r.dtype);
  // complex values reach WGSL only as float pairs (complex ops run on view_as_real views); an
  // expression over complex elements themselves has no WGSL form
  if (DTYPES[out.dtype].kind === 'complex' || ins.some((r) => DTYPES[r.dtype].kind === 'complex')) {
    throw new DeviceLimitError('webgpu', `an elementwise operation on complex64 elements is not supported on webgpu (operands ${ins.map((r) => r.dtype).join(', ')} -> ${out.dtype}); run it on the CPU or on nbx.view_as_real(x)`);
  }
  const shape = out.shape;
  let n = 1;
  for (const d of shape) n *= d;
  if (n === 0) return;
  // the common case of small op chains without the general broadcast/coalesce work: every input one
  // element or contiguous at out's shape, out contiguous
  let cs: number[], cst: number[][];
  const quick = !outStrided && ins.every((r) => r.strides.every((st, d) => r.shape[d] === 1) || (sameShape(r.shape, shape) && isContiguous(r.shape, r.strides)));
  if (quick) {
    cs = [n];
    cst = [[1], ...ins.map((r) => [r.shape.length === shape.length && n > 1 && !r.shape.every((d) => d === 1) ? 1 : 0])];
  } else {
    const bs = ins.map((r) => broadcastStrides(r.shape, r.strides, shape));
    let outStrides: number[] = [];
    if (outStrided) outStrides = [...out.strides];
    else { let acc = 1; for (let d = shape.length - 1; d >= 0; d--) { outStrides[d] = acc; acc *= shape[d]!; } }
    ({ shape: cs, strides: cst } = coalesce(shape, [outStrides, ...bs]));
  }
  const outContig = cs.length <= 1 && (cst[0]![0] ?? 1) === 1;
  const oStrided = outStrided && !outContig;
  const flat = !oStrided && cs.length <= 1 && cst.slice(1).every((s) => (s[0] ?? 0) === 0 || s[0] === 1);
  const nd = cs.length;

  // Distinct input buffers get one binding each; an input in the output's buffer reads a copy taken first.
  const outBuf = out.buf as WGBuffer;
  const bufs: WGBuffer[] = [outBuf];
  const bind: number[] = [];
  let temp: WGBuffer | null = null;
  for (const r of ins) {
    let b = r.buf as WGBuffer;
    if (b === outBuf) {
      if (!temp) { temp = be.allocBytes(outBuf.bytes); be.copyBuffer(outBuf, temp, outBuf.bytes); }
      b = temp;
    }
    let j = bufs.indexOf(b);
    if (j < 0) { bufs.push(b); j = bufs.length - 1; }
    bind.push(j + 1);
  }
  const unit = flat ? cst.slice(1).map((s) => (s[0] === 1 ? 1 : 0)) : [];
  const inD = ins.map((r) => r.dtype);
  // 16-byte accesses: a flat output whose n and offset are whole vectors (E elements), every unit-stride
  // input of the output's element width with a whole-vector offset, and none in a buffer read otherwise
  const k = perWord(out.dtype), E = 4 * k;
  // (int64, two words an element, is never vectorized)
  const vec = flat && !oStrided && n % E === 0 && out.offset % E === 0 && n >= 1024 && out.dtype !== 'int64'
    && ins.every((r, s) => r.dtype !== 'int64' && (!unit[s] || (perWord(r.dtype) === k && r.offset % E === 0))) && !integerDivides(expr);
  const cfg = vec ? force ?? elementwiseConfig(be, n, out.dtype) : { wg: be.wgElementwise, vpt: 0 };
  const wg = cfg.wg;
  const hwHalf = out.dtype === 'float16' && caps.hwHalf;
  const lay: Layout = { nd, flat, unit, outStrided: oStrided, vpt: vec ? cfg.vpt : 0, hwHalf };
  const probe = `${vec ? `v${cfg.vpt}` : ''}${flat ? `f${unit.join('')}` : `s${nd}`}|${oStrided ? 'os' : 'oc'}|${out.dtype}<-${inD.join(',')}|${bind.join(',')}|${wg}${hwHalf ? '|hw' : ''}|${expr.key}`;
  let prog = cache.get(probe);
  if (!prog) {
    try { checkInt64Expr(expr); } catch (e) { if (temp) be.free(temp); throw e; }
    prog = ewProgram(expr, inD, out.dtype, lay, bind, bufs.length - 1, wg);
    cache.set(probe, prog);
  }

  const u = new Uint32Array(prog.words);
  const packedContig = k > 1 && !oStrided;
  const w0 = Math.floor(out.offset / k);
  const units = vec ? n / E : packedContig ? Math.floor((out.offset + n - 1) / k) - w0 + 1 : n;
  const threads = vec ? Math.ceil(units / cfg.vpt) : units;
  u[0] = units; u[1] = n; u[2] = out.offset; u[3] = vec ? threads : w0;
  let w = 4;
  if (!flat) for (let d = 0; d < nd; d++) u[w++] = cs[d]!;
  if (oStrided) for (let d = 0; d < nd; d++) u[w++] = cst[0]![d]! >>> 0;
  for (let s = 0; s < ins.length; s++) {
    u[w++] = ins[s]!.offset;
    if (!flat) for (let d = 0; d < nd; d++) u[w++] = cst[s + 1]![d]! >>> 0;
  }
  const pds = expr.paramDTypes();
  for (let s = 0; s < params.length; s++) {
    const d = pds[s] ?? 'float32';
    if (d === 'int64') { const [lo, hi] = i64Words(params[s]!); u[w++] = lo; u[w++] = hi; } else u[w++] = paramWord(params[s]!, d);
  }
  const zdiv = prog.access.length > bufs.length ? be.allocBytes(16, true) : null;
  if (zdiv) bufs.push(zdiv);
  be.dispatch(prog, bufs, u, threads, wg);
  if (temp) be.free(temp);
  if (zdiv) {
    // as the CPU's integer division: raised at the next read (a kernel cannot raise)
    be.check('div', zdiv, (host) => { if (new Uint32Array(host.get(zdiv)!, 0, 1)[0] !== 0) throw new ValueError('div', 'ZeroDivisionError: integer division or modulo by zero'); }, [outBuf]);
    be.free(zdiv);
  }
}

// The autotuner's scratch problem: a + b over `size` contiguous elements of `dtype` (16-byte path).
registerTuneProblem('webgpu.elementwise', (be, [size], dtype) => {
  const bytes = size! * DTYPES[dtype].itemsize;
  const a = be.allocBytes(bytes, true), b = be.allocBytes(bytes, true), o = be.allocBytes(bytes);
  const ref = (buf: WGBuffer): StridedRef => ({ buf, dtype, shape: [size!], strides: [1], offset: 0 });
  const expr = Expr.load(0, dtype).add(Expr.load(1, dtype));
  return {
    run: (cfg) => runElementwise(be, expr, [ref(a), ref(b)], [], ref(o), false, { wg: cfg.wg as number, vpt: cfg.vpt as number }),
    dispose: () => { be.free(a); be.free(b); be.free(o); },
  };
});

/**
 * WGSL: an inclusive scan (Hillis-Steele) of `sh[0..n)` in workgroup memory, invocation `lid` holding
 * element lid; `combine(earlier, later)` is the operator (the order matters for float sums). Ends on a
 * barrier, so every invocation may read any sh[] afterwards.
 */
export const wgslInclusiveScan = (n: number, combine: (a: string, b: string) => string = (a, b) => `${a} + ${b}`): string => `for (var s = 1u; s < ${n}u; s <<= 1u) {
      var t = sh[lid];
      if (lid >= s) { t = ${combine('sh[lid - s]', 't')}; }
      workgroupBarrier();
      sh[lid] = t;
      workgroupBarrier();
    }`;
