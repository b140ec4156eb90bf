// Builds the demo page with Vite (demo/vite.config.mjs → demo/dist), serves the bundle with Vite's
// preview server (cross-origin isolated, as configured there), loads it in headless Chromium
// (playwright-core, Debian's /usr/bin/chromium) and checks what it computed: on WebGPU when the
// browser gets an adapter, else the page's CPU path (and says so, with the reason).
// Runs twice: with the flags of a GPU-less CI machine (--disable-gpu: no adapter, the CPU path), then
// asking Chromium for WebGPU on its software Vulkan (SwiftShader), which runs the WebGPU path without a GPU.
// In each run the page then loads the embedded model (assets/nbx-kjv) and generates from "And God said"
// through its form: greedily and sampled with seed 42 (32 new tokens on the CPU; 12 on SwiftShader,
// which computes a token in seconds). The greedy tokens must equal what nbx generates in Node on the CPU
// from the same folder (computed here first), and the sampled text must be non-empty; both are also
// compared with Node's and transformers' tokens (test/fixtures/models/nbx-kjv-reference.json), and the
// test says where they differ.
//   npm run build && node demo/test.mjs
// Without Chromium, Vite or playwright-core it says "demo test NOT RUN" and why, and exits 0.
// CHROMIUM=<path> picks the browser; NBX_DEMO_TIMEOUT=<ms> bounds each page run (default 180000).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const configFile = here('./vite.config.mjs');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const BASE = ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];
const RUNS = [
  { name: 'CI flags (--disable-gpu)', newTokens: 32, args: [...BASE, '--disable-gpu'] },
  { name: 'WebGPU on SwiftShader', newTokens: 12, args: [...BASE, '--enable-unsafe-webgpu', '--enable-unsafe-swiftshader', '--use-angle=swiftshader', '--enable-features=Vulkan', '--use-vulkan=swiftshader'] },
];
const say = (s) => process.stdout.write(`${s}\n`);
const notRun = (why) => { say(`demo test NOT RUN: ${why}`); process.exit(0); };

// the tools are optional (devDependencies and a system browser): without one, skip visibly
let chromium, vite;
try { ({ chromium } = await import('playwright-core')); } catch { notRun('playwright-core is not installed (npm install -D playwright-core)'); }
try { vite = await import('vite'); } catch { notRun('vite is not installed (npm install -D vite)'); }
if (!existsSync(CHROMIUM)) notRun(`no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM=<path>)`);
if (!existsSync(here('../dist/src/index.js'))) {
  say('demo test FAILED: dist/src/index.js is missing: run `npm run build` first (the page bundles the compiled package)');
  process.exit(1);
}

// What the page's generations are compared with: the new token ids nbx generates in Node on the CPU
// (the same folder and options), and transformers' for the same prompt and options where the fixture
// has them. Each draw depends only on the ones before it, so a shorter run is a prefix of a longer one.
const PROMPT = 'And God said', SEED = 42, NEW_TOKENS = Math.max(...RUNS.map((r) => r.newTokens));
const expected = { node: {}, transformers: {} };
{
  const nbx = await import('../dist/src/index.js');
  const t0 = performance.now();
  const model = await nbx.models.load(here('../assets/nbx-kjv'));
  const newIds = async (opts) => {
    const prompt = model.tokenizer.encode(PROMPT).length;
    const ids = await model.generate(PROMPT, { max_new_tokens: NEW_TOKENS, ...opts });
    return Array.from(ids.dataSync(), Number).slice(prompt);
  };
  try {
    expected.node.greedy = await newIds({ do_sample: false });
    expected.node.sampled = await newIds({ seed: SEED });
    say(`nbx in Node (cpu, ${((performance.now() - t0) / 1000).toFixed(1)} s): greedy ${JSON.stringify(model.tokenizer.decode(expected.node.greedy))}`);
  } finally { model.dispose(); }
  const reference = here('../test/fixtures/models/nbx-kjv-reference.json');
  if (existsSync(reference)) {
    const ref = JSON.parse(readFileSync(reference, 'utf8'));
    const c = ref.cases.find((x) => x.prompt === PROMPT);
    if (c && ref.sampled?.manual_seed_before_generate === SEED) {
      expected.transformers.greedy = c.greedy_ids.slice(c.input_ids.length);
      expected.transformers.sampled = c.sampled_ids.slice(c.input_ids.length);
    }
  }
}

/** Fills the page's generation form, clicks Generate and waits for that run to finish. */
async function generateOnPage(page, { greedy, newTokens }, timeout) {
  const before = await page.evaluate(() => window.__nbxDemo.generation.runs.length);
  await page.fill('#gen-prompt', PROMPT);
  await page.fill('#gen-max', String(newTokens));
  await page.fill('#gen-seed', String(SEED));
  await page.setChecked('#gen-greedy', greedy);
  await page.click('#gen-run');
  await page.waitForFunction((n) => window.__nbxDemo.generation.runs[n]?.done === true, before, { timeout });
  return page.evaluate((n) => window.__nbxDemo.generation.runs[n], before);
}

let t = performance.now();
await vite.build({ configFile, logLevel: 'warn' });
say(`built demo/dist with Vite ${vite.version} in ${((performance.now() - t) / 1000).toFixed(1)} s`);
const server = await vite.preview({ configFile, logLevel: 'warn', preview: { host: '127.0.0.1', port: 0, open: false } });
const url = `http://127.0.0.1:${server.httpServer.address().port}/`;

let failed = false;
for (const run of RUNS) {
  say(`\n## ${run.name}`);
  const profile = mkdtempSync(join(tmpdir(), 'nbx-chromium-'));
  let browser;
  t = performance.now();
  try {
    // playwright sets --user-data-dir itself from the persistent context's directory
    browser = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: run.args, timeout: 60000 });
    const page = browser.pages()[0] ?? await browser.newPage();
    const logs = [];
    page.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
    await page.goto(url);
    try {
      await page.waitForFunction(() => window.__nbxDemo?.done === true, null, { timeout: Number(process.env.NBX_DEMO_TIMEOUT ?? 180000) });
    } catch (e) { throw new Error(`${e.message.split('\n')[0]}\n${logs.slice(-20).join('\n')}`); }
    const r = await page.evaluate(() => ({ ...window.__nbxDemo, isolated: window.crossOriginIsolated }));
    // the preview server's COOP/COEP headers (vite.config.mjs) are what give the page SharedArrayBuffer
    if (!r.isolated) { failed = true; say('FAIL the page is not cross-origin isolated (COOP/COEP headers missing)'); }
    if (r.error) { failed = true; say(`page error: ${r.error}\n${logs.join('\n')}`); continue; }
    say(r.device === 'webgpu' ? `path: WebGPU (the browser gave an adapter: ${r.adapter})`
      : `path: CPU (no WebGPU adapter in this browser: ${r.webgpuError}), so the page's CPU path was checked instead`);
    for (const op of r.ops) {
      const vs = op.maxError === undefined ? '' : ` (max rel. error vs CPU ${op.maxError.toExponential(1)})`;
      say(`  ${op.ok ? 'ok  ' : 'FAIL'} ${op.name} [${op.device}] ${op.ms.toFixed(1)} ms: ${op.preview}${vs}`);
      if (!op.ok) failed = true;
    }
    if (r.ops.length < 7) { failed = true; say(`FAIL only ${r.ops.length} operations ran`); }

    // text generation with the embedded model, on the device the ops ran on
    const timeout = Number(process.env.NBX_DEMO_TIMEOUT ?? 180000);
    try {
      await page.waitForFunction(() => window.__nbxDemo.generation?.ready === true || !!window.__nbxDemo.generation?.error, null, { timeout });
    } catch (e) { throw new Error(`the model did not load: ${e.message.split('\n')[0]}\n${logs.slice(-20).join('\n')}`); }
    const gen = await page.evaluate(() => ({ ...window.__nbxDemo.generation }));
    if (gen.error) { failed = true; say(`FAIL loading the model: ${gen.error}\n${logs.slice(-20).join('\n')}`); continue; }
    say(`  model ${gen.model} loaded on ${gen.device} in ${gen.loadMs.toFixed(0)} ms`);
    if (gen.device !== r.device) { failed = true; say(`FAIL the model loaded on ${gen.device}, the ops ran on ${r.device}`); }
    for (const greedy of [true, false]) {
      const kind = greedy ? 'greedy' : 'sampled';
      const got = await generateOnPage(page, { greedy, newTokens: run.newTokens }, timeout);
      const speed = got.tokensPerSec ? `, ${got.tokensPerSec.toFixed(1)} tokens/s after the first (first after ${got.ttftMs.toFixed(0)} ms)` : '';
      const gpu = got.gpu ? `, ${got.gpu.dispatchesPerToken.toFixed(0)} dispatches and ${got.gpu.newPipelines.toFixed(2)} new pipelines per token after the first` : '';
      if (got.error) { failed = true; say(`  FAIL ${kind}: ${got.error}`); continue; }
      // the page's tokens against the first as many of Node's and transformers' (null: nothing to compare)
      const same = (who) => {
        const want = expected[who][kind];
        if (want === undefined || want.length < got.tokenIds.length) return null;
        return got.tokenIds.every((id, i) => id === want[i]);
      };
      const asNode = same('node'), asTransformers = same('transformers');
      // greedy must match Node; sampled text must exist (on WebGPU, float32 sums in another order may pick other draws)
      const ok = got.text.length > 0 && got.tokenIds.length > 0 && (!greedy || asNode === true);
      if (!ok) failed = true;
      say(`  ${ok ? 'ok  ' : 'FAIL'} ${kind}${greedy ? '' : ` (seed ${SEED})`} [${got.device}] ${got.tokenIds.length} tokens${speed}${gpu}: ${JSON.stringify(PROMPT + got.text)}`);
      const verdict = (label, who, v) => (v === null ? `no ${label} to compare` : v ? `equal ${label}`
        : `differ from ${label} ${JSON.stringify(expected[who][kind].slice(0, got.tokenIds.length))} (page: ${JSON.stringify(got.tokenIds)})`);
      say(`       token ids ${verdict("Node's (nbx, cpu)", 'node', asNode)}; ${verdict("transformers'", 'transformers', asTransformers)}`);
    }
    say(`(${((performance.now() - t) / 1000).toFixed(1)} s in the browser)`);
  } catch (e) {
    failed = true;
    say(`browser run failed: ${e.message}`);
  } finally {
    await browser?.close();
    rmSync(profile, { recursive: true, force: true });
  }
}
await server.close();
say(failed ? '\ndemo test FAILED' : '\ndemo test passed');
process.exitCode = failed ? 1 : 0;
