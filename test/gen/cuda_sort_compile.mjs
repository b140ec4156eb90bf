// Compile check for the CUDA sort/selection kernels without a GPU (run after `npx tsc`):
//   node test/gen/cuda_sort_compile.mjs [--no-suite] [--keep DIR] | --simulate [NAME]
// Same method as test/gen/cuda_indexing_compile.mjs (whose helpers it uses): the public suite's sort cases on a
// fake 'cuda' device (launchers run against a recording backend, the CPU answers), the launch plans of long
// rows / large k / chunked top-k exercised directly, every generator specialization added, all compiled
// with nvcc for sm_90.

import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { fakeCuda, runConformance, compileAll, recordingBackend, sources, problems, staged, simCuda, runSimChecks, installIndexingAndSort } from './cuda_indexing_compile.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const imp = (p) => import(pathToFileURL(join(resolve(here, '../../dist/src'), p)).href);
const IDX = await imp('backend/cuda/kernels/indexing.js');
const SORT = await imp('backend/cuda/kernels/sort.js');
const { hasKernel } = await imp('kernels/registry.js');

const DTYPES = ['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'bfloat16', 'float32', 'float64'];
const FLOATS = ['float16', 'bfloat16', 'float32', 'float64'];

export function sortSpecializations() {
  const out = [];
  for (const d of DTYPES) {
    for (const from of ['values', 'pairs']) for (const select of ['full', 'topk']) for (const epi of ['pairs', 'sort', 'topk', 'kth', 'median']) {
      for (const ign of epi === 'median' ? [false, true] : [false]) out.push(SORT.blockSource(d, from, select, epi, ign));
    }
    for (const epi of ['sort', 'topk', 'kth', 'median']) for (const ign of epi === 'median' ? [false, true] : [false]) out.push(SORT.finalSource(d, epi, ign));
    for (const kind of ['sort', 'topk', 'kth', 'median', 'mode']) out.push(SORT.emulateSource(d, kind, kind === 'median'));
    out.push(SORT.topkReplaySource(d), SORT.sortReplaySource(d));
    if (d !== 'bool') for (const o of ['int32', 'int64']) for (const s of [false, true]) out.push(SORT.searchsortedSource(d, o, s));
    for (const step of FLOATS.includes(d) ? ['exotic', 'emulate', 'groups'] : ['emulate', 'groups']) for (const r1 of [true, false]) out.push(SORT.uniqueSource(d, step, r1));
  }
  out.push(SORT.mergeSource('unsigned'), SORT.mergeSource('unsigned long long'));
  return out;
}

/** The launch plans that the suite's small cases do not reach: long rows, chunked top-k, unique's grouping. */
function exercisePlans() {
  const ref = (dtype, shape) => ({ buf: { ptr: 0x1000n, bytes: 8 }, dtype, shape, strides: shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1)), offset: 0 });
  for (const d of ['float32', 'int64', 'bfloat16']) {
    for (const [rows, n] of [[3, 7], [1000, 33], [2, 5000], [3, 100000], [1, 3_000_000]]) {
      for (const st of [false, true]) SORT.cudaSort(ref(d, [rows, n]), rows, n, st, st, ref(d, [rows, n]), ref('int64', [rows, n]));
      for (const k of [1, 5, 50, 64, Math.min(n, 1000), n]) for (const sorted of [true, false]) SORT.cudaTopk(ref(d, [rows, n]), rows, n, k, k % 2 === 0, sorted, ref(d, [rows, k]), ref('int64', [rows, k]));
      SORT.cudaKthvalue(ref(d, [rows, n]), rows, n, Math.ceil(n / 2), ref(d, [rows]), ref('int64', [rows]));
      for (const ign of [false, true]) SORT.cudaMedian(ref(d, [rows, n]), rows, n, ign, ref(d, [rows]), ref('int64', [rows]));
      SORT.cudaMode(ref(d, [rows, n]), rows, n, ref(d, [rows]), ref('int64', [rows]));
    }
  }
  for (const d of DTYPES) for (const [rows, len] of [[40, 1], [50000, 1], [20, 3]]) for (const c of [false, true]) SORT.cudaUnique(ref(d, [rows, len]), rows, len, c);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const keep = process.argv.includes('--keep') ? process.argv[process.argv.indexOf('--keep') + 1] : undefined;
  if (process.argv.includes('--simulate')) {
    await simCuda([(be, reg) => installIndexingAndSort(be, reg)]);
    await runSimChecks('cuda_sort.test.js', 'sortChecks', process.argv[process.argv.indexOf('--simulate') + 1]);
    process.exit();
  }
  fakeCuda([(be, reg) => installIndexingAndSort(be, reg)]);
  const mine = ['sort', 'topk', 'kthvalue', 'median', 'mode', 'searchsorted', 'unique'];
  if (!process.argv.includes('--no-suite')) {
    const res = await runConformance(/^(sort|argsort|msort|topk|kthvalue|median|nanmedian|mode|quantile|nanquantile|unique|unique_consecutive|searchsorted|bucketize)\//);
    if (res) console.log(`conformance (fake cuda, sort ops): ${res.passed} passed, ${res.failed} failed, ${res.skipped} skipped`);
    const stagedMine = mine.filter((n) => staged.has(n));
    console.log(`staged kernels of this family: ${stagedMine.length ? stagedMine.join(', ') : 'none'}; others staged: ${[...staged.keys()].filter((n) => !mine.includes(n)).join(', ') || 'none'}`);
    console.log(`native kernels registered: ${mine.filter((n) => hasKernel(n, 'cuda')).join(', ')}`);
  }
  const fromSuite = sources.size;
  installIndexingAndSort(recordingBackend, () => {});
  exercisePlans();
  const all = [...sources.values(), ...sortSpecializations()];
  if (problems.length) { console.log(`launch problems:\n  ${[...new Set(problems)].join('\n  ')}`); process.exitCode = 1; }
  const r = await compileAll(all, 'sort', keep);
  console.log(`sources: ${fromSuite} rendered by the suite, ${all.length} with the plans and enumerated specializations; nvcc sm_90: ${r.sources} distinct sources, ${r.entries} kernels compiled (${r.dir})`);
  if (r.warnings) console.log(`nvcc warnings:\n${r.warnings}`);
}
