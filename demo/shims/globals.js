// The Node globals the package touches, for browsers: imported by main.js before the package, so they
// exist while its modules load. A runtime object rather than Vite's `define`: besides process.env the
// package reads process.stderr/stdout/pid/platform, and builds a few byte strings with Buffer.

globalThis.process ??= {
  // one thread (no worker_threads in the page), no system BLAS (no koffi); autotune 'cached': the
  // in-memory cache of shims/node.js starts empty, so kernels use their defaults instead of sweeping
  // configurations in the background while the page times them
  env: { NBX_CPU_THREADS: '1', NBX_NUM_THREADS: '1', NBX_BLAS: 'off', NBX_AUTOTUNE: 'cached' },
  platform: 'browser', versions: {}, argv: [], pid: 1, exitCode: undefined,
  // no counter of array-buffer memory in a page: the engine's host-pressure check sees none
  memoryUsage: () => ({ rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 }),
  stderr: { write: (s) => console.warn(String(s).trimEnd()) },
  stdout: { write: (s) => console.log(String(s).trimEnd()) },
};

globalThis.Buffer ??= class Buffer extends Uint8Array {
  static from(v, enc) {
    if (typeof v !== 'string') return new Buffer(v);
    return new Buffer(enc === 'latin1' ? [...v].map((c) => c.charCodeAt(0) & 255) : new TextEncoder().encode(v));
  }
  static alloc(n) { return new Buffer(n); }
  static allocUnsafeSlow(n) { return new Buffer(n); }
  static concat(list) { const out = new Buffer(list.reduce((n, b) => n + b.length, 0)); let o = 0; for (const b of list) { out.set(b, o); o += b.length; } return out; }
  toString() { return new TextDecoder().decode(this); }
};
