// Browser stand-ins for the Node-only modules the package imports (node:fs, node:os, koffi, yaml, ...).
// demo/vite.config.mjs aliases every such specifier here. Nothing the page runs needs them for real:
// the CPU backend's worker threads and system BLAS, CUDA, device profiles and caches are Node features;
// where a stand-in is reached it says so (or, for probes, answers "absent").
const unavailable = (what) => () => { throw new Error(`${what} is not available in the browser`); };

// koffi (and node:v8's default export): any property is a function that fails when called
const stub = new Proxy(function () {}, {
  get: (_t, key) => (key === 'then' ? undefined : unavailable(`koffi/node:v8 '${String(key)}'`)),
  apply: unavailable('native library'),
});
export default stub;

// node:fs: a small in-memory file system holding only the package's manifest, so that code locating the
// package root (src/profiles/root.ts) finds it; shipped data files are absent, a missing file fails
// with ENOENT as in Node, and what the package writes (the autotune cache) lives in memory.
const files = new Map([['/package.json', '{"name":"nbxtensor"}']]);
const norm = (p) => `/${String(p).split('/').filter((x) => x && x !== '.').join('/')}`;
const enoent = (op, p) => Object.assign(new Error(`ENOENT: no such file or directory, ${op} '${p}'`), { code: 'ENOENT' });
export const existsSync = (p) => files.has(norm(p));
export const statSync = (p) => {
  if (!files.has(norm(p))) throw enoent('stat', p);
  return { size: files.get(norm(p)).length, isFile: () => true, isDirectory: () => false };
};
export const readdirSync = () => [];
export const readFileSync = (p) => { if (!files.has(norm(p))) throw enoent('open', p); return files.get(norm(p)); };
export const writeFileSync = (p, text) => { files.set(norm(p), String(text)); };
export const mkdirSync = () => undefined;
export const renameSync = (a, b) => { const t = readFileSync(a); files.delete(norm(a)); files.set(norm(b), t); };
export const unlinkSync = (p) => { if (!files.delete(norm(p))) throw enoent('unlink', p); };
export const realpathSync = (p) => p;
export const promises = {};
export const openSync = unavailable('node:fs openSync');
export const readSync = unavailable('node:fs readSync');
export const closeSync = () => {};
export const fstatSync = unavailable('node:fs fstatSync');
// callback API (safetensors' file reader): nothing to open
export const open = (p, _flags, cb) => queueMicrotask(() => cb(enoent('open', p)));
export const read = unavailable('node:fs read');
export const fstat = unavailable('node:fs fstat');
export const close = (_fd, cb) => queueMicrotask(() => cb?.(null));

// node:path (POSIX, enough for joining package-relative names)
export const sep = '/';
export const join = (...parts) => parts.filter(Boolean).join('/').replace(/\/+/g, '/');
export const dirname = (p) => p.replace(/\/[^/]*$/, '') || '/';
export const basename = (p, ext) => { const b = p.replace(/^.*\//, ''); return ext && b.endsWith(ext) ? b.slice(0, -ext.length) : b; };
export const extname = (p) => { const m = /\.[^./]*$/.exec(p); return m ? m[0] : ''; };
export const resolve = (...parts) => join(...parts);
export const isAbsolute = (p) => String(p).startsWith('/');
export const relative = (from, to) => {
  const a = norm(from).split('/').filter(Boolean), b = norm(to).split('/').filter(Boolean);
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return [...a.slice(i).map(() => '..'), ...b.slice(i)].join('/');
};

// node:url
export const fileURLToPath = (u) => new URL(String(u)).pathname;
export const pathToFileURL = (p) => new URL(`file://${p}`);

// node:os
export const availableParallelism = () => 1;
export const cpus = () => [{}];
export const homedir = () => '/';
export const tmpdir = () => '/tmp';
export const platform = () => 'browser';
// the machine's memory as the browser reports it (navigator.deviceMemory: GiB, rounded, at most 8)
export const totalmem = () => (globalThis.navigator?.deviceMemory ?? 8) * 2 ** 30;

// node:v8 and node:vm: no gc() to expose in a page (the host-memory pressure check then never collects)
export const setFlagsFromString = unavailable('node:v8 setFlagsFromString');
export const runInNewContext = unavailable('node:vm runInNewContext');

// node:crypto
export const createHash = unavailable('node:crypto createHash');

// node:worker_threads: no worker pool (the CPU backend runs on the page's thread)
export class Worker { constructor() { throw new Error('node:worker_threads is not available in the browser'); } }
export const parentPort = null;
export const workerData = null;
export const isMainThread = true;

// node:async_hooks: a store kept during the synchronous part of run() (async scopes lose it after an
// await in the browser: tensors created there are released by the garbage collector instead)
export class AsyncLocalStorage {
  getStore() { return this.store; }
  run(store, fn, ...args) { const prev = this.store; this.store = store; try { return fn(...args); } finally { this.store = prev; } }
}

// yaml: device profiles are not read in browsers
export const parseDocument = unavailable('yaml');
export const parse = unavailable('yaml');
