// Browser stand-ins for the Node-only modules the package imports (node:fs, node:os, koffi, yaml, ...).
// The import map in index.html points every such specifier here. Nothing the page runs calls them for
// real: the CPU backend's worker threads and system BLAS, CUDA, device profiles and caches are Node
// features; where a stand-in is reached it says so (or, for probes, answers "absent").
const unavailable = (what) => () => { throw new Error(`${what} is not available in the browser`); };

// koffi (and node:v8's default export): any property is a function that fails when called
const stub = new Proxy(function () {}, {
  get: (_t, key) => (key === 'then' ? undefined : unavailable(`koffi/node:v8 '${String(key)}'`)),
  apply: unavailable('native library'),
});
export default stub;

// node:fs: nothing exists
export const existsSync = () => false;
export const statSync = unavailable('node:fs statSync');
export const readdirSync = () => [];
export const readFileSync = unavailable('node:fs readFileSync');
export const writeFileSync = unavailable('node:fs writeFileSync');
export const mkdirSync = unavailable('node:fs mkdirSync');
export const renameSync = unavailable('node:fs renameSync');
export const unlinkSync = unavailable('node:fs unlinkSync');
export const realpathSync = (p) => p;
export const promises = {};
export const openSync = unavailable('node:fs openSync');
export const readSync = unavailable('node:fs readSync');
export const closeSync = () => {};
export const fstatSync = unavailable('node:fs fstatSync');

// node:path (POSIX, enough for joining package-relative names)
export const sep = '/';
export const join = (...parts) => parts.filter(Boolean).join('/').replace(/\/+/g, '/');
export const dirname = (p) => p.replace(/\/[^/]*$/, '') || '/';
export const basename = (p, ext) => { const b = p.replace(/^.*\//, ''); return ext && b.endsWith(ext) ? b.slice(0, -ext.length) : b; };
export const extname = (p) => { const m = /\.[^./]*$/.exec(p); return m ? m[0] : ''; };
export const resolve = (...parts) => join(...parts);

// node:url
export const fileURLToPath = (u) => new URL(String(u)).pathname;
export const pathToFileURL = (p) => new URL(`file://${p}`);

// node:os
export const availableParallelism = () => 1;
export const cpus = () => [{}];
export const homedir = () => '/';
export const tmpdir = () => '/tmp';
export const platform = () => 'browser';

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
