// Vite build of the demo page: demo/ → demo/dist (git-ignored).
//   npm run build && npm run demo:build     then  npm run demo:preview   (or npm run demo:dev)
//
// The page imports the package as a user would (`import * as nbx from 'nbxtensor'`), resolved to the
// compiled build dist/src/index.js, the file the package's "exports" names: the demo bundles what the
// package ships, compiled by tsc as for Node, rather than a second transpilation of src/ by Vite.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const shim = here('./shims/node.js');

// Cross-origin isolation: the CPU backend allocates large tensors in SharedArrayBuffers, which
// browsers only provide to cross-origin-isolated pages.
const isolation = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };

export default defineConfig({
  root: here('.'),
  // assets/ (the embedded model, assets/nbx-kjv) is served as is and copied into the build: the page
  // fetches ./nbx-kjv/config.json, model.safetensors, ... with nbx.models.loadFromUrl
  publicDir: here('../assets'),
  // a missing file is a 404, not index.html (the model loader asks for optional files such as chat_template.jinja)
  appType: 'mpa',
  base: './',
  // the package reads process.* at run time, not only process.env: shims/globals.js defines it
  resolve: {
    alias: [
      { find: /^nbxtensor$/, replacement: here('../dist/src/index.js') },
      // Node-only modules (worker threads, system BLAS through koffi, CUDA, device profiles, caches)
      { find: /^node:.*$/, replacement: shim },
      { find: /^(koffi|yaml)$/, replacement: shim },
    ],
  },
  // The CPU backend's WebAssembly kernels are generated as bytes in JS and compiled at run time, so
  // there are no .wasm assets. Its worker pool is Node's worker_threads (the shim's Worker throws, and
  // the backend runs on the page's thread); Vite still bundles the worker module it sees referenced,
  // as an ES module like the rest.
  worker: { format: 'es' },
  build: {
    outDir: here('./dist'),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
    // one chunk holds the whole package (CPU, WebGPU and the CUDA backend's code): large by design
    chunkSizeWarningLimit: 4096,
    // the WebGPU backend imports device profiles lazily, the CUDA backend eagerly (one chunk either way);
    // bundler self-timing notes are noise on a busy machine
    rolldownOptions: { checks: { ineffectiveDynamicImport: false, pluginTimings: false } },
  },
  server: { headers: isolation },
  preview: { headers: isolation },
});
