// Host memory for packed weights that the CPU's WebAssembly SIMD quant kernels read in place
// (src/backend/cpu/kernels/quant.ts). WebAssembly code reads only its own memory, and copying a weight
// in for every product would cost what the packed format saves; so packed weights made on the CPU
// (quantize(), the checkpoint and GGUF loaders, QuantizedTensor.to('cpu')) live in one shared
// WebAssembly.Memory, as views the tensors hold like any Uint8Array / Float32Array. A shared memory is
// used because growing it never detaches the views already handed out. A region returns to the free
// list when its view is garbage-collected. Weights held elsewhere (plain arrays) still work: the kernel
// then runs its JavaScript loops.

const PAGE = 65536;
/** The memory's maximum in 64 KiB pages: 4 GiB, all of wasm32 (address space reserved, committed as used). */
export const MAX_PAGES = 65536;

let memory: WebAssembly.Memory | null | undefined;
/** Every SharedArrayBuffer the memory has had (one per growth): views of any of them are resident. */
const buffers = new WeakSet<ArrayBufferLike>();
let top = 0;
const free: { ptr: number; size: number }[] = [];
const registry = new FinalizationRegistry<{ ptr: number; size: number }>((r) => release(r.ptr, r.size));

/** The shared memory, or null where WebAssembly threads/SIMD memories are unavailable. */
export function quantMemory(): WebAssembly.Memory | null {
  if (memory === undefined) {
    try {
      memory = new WebAssembly.Memory({ initial: 16, maximum: MAX_PAGES, shared: true });
      buffers.add(memory.buffer);
      top = 1024; // the first KiB stays unused (null pointers)
    } catch { memory = null; }
  }
  return memory;
}

function release(ptr: number, size: number): void {
  free.push({ ptr, size });
  free.sort((a, b) => a.ptr - b.ptr);
  for (let i = free.length - 1; i > 0; i--) {
    const a = free[i - 1]!, b = free[i]!;
    if (a.ptr + a.size === b.ptr) { a.size += b.size; free.splice(i, 1); }
  }
  const last = free[free.length - 1];
  if (last && last.ptr + last.size === top) { top = last.ptr; free.pop(); }
}

/** A 64-byte aligned region of `bytes` bytes (its byte offset), growing the memory as needed; -1 when none. */
export function allocRegion(bytes: number): number {
  const mem = quantMemory();
  if (!mem) return -1;
  const size = Math.ceil(Math.max(bytes, 1) / 64) * 64;
  for (let i = 0; i < free.length; i++) {
    const f = free[i]!;
    if (f.size >= size) {
      const ptr = f.ptr;
      if (f.size === size) free.splice(i, 1); else { f.ptr += size; f.size -= size; }
      return ptr;
    }
  }
  const need = top + size;
  if (need > mem.buffer.byteLength) {
    const pages = Math.ceil((need - mem.buffer.byteLength) / PAGE);
    if (mem.buffer.byteLength / PAGE + pages > MAX_PAGES) return -1;
    try { mem.grow(pages); } catch { return -1; }
    buffers.add(mem.buffer);
  }
  const ptr = top;
  top = need;
  return ptr;
}

/** A region given back explicitly (scratch); views handed out by residentCopy are freed by the GC. */
export function freeRegion(ptr: number, bytes: number): void { release(ptr, Math.ceil(Math.max(bytes, 1) / 64) * 64); }

/** The current view of the whole memory (after any growth). */
export function memoryBytes(): Uint8Array { return new Uint8Array(quantMemory()!.buffer); }

/** Whether `a` is a view of the quant memory (then its byteOffset is its address there). */
export function isResident(a: ArrayBufferView): boolean { return buffers.has(a.buffer); }

/** A copy of `src` in the quant memory (the same array type), or `src` itself where there is none. */
export function residentCopy<T extends Uint8Array | Float32Array>(src: T): T {
  if (isResident(src)) return src;
  const ptr = allocRegion(src.byteLength);
  if (ptr < 0) return src;
  const view = (src instanceof Float32Array
    ? new Float32Array(quantMemory()!.buffer, ptr, src.length)
    : new Uint8Array(quantMemory()!.buffer, ptr, src.length)) as T;
  view.set(src as never);
  registry.register(view, { ptr, size: Math.ceil(Math.max(src.byteLength, 1) / 64) * 64 });
  return view;
}
