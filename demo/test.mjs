// Loads the demo page in headless Chromium (playwright-core, Debian's /usr/bin/chromium) and checks
// what it computed: on WebGPU when the browser gets an adapter, else the page's CPU path (and says so).
// Runs twice: with the flags of a GPU-less CI machine (--disable-gpu), then asking Chromium for
// WebGPU on its software Vulkan (SwiftShader), which exercises the WebGPU path without a GPU.
//   node demo/test.mjs            (after `npm run build`)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve } from './server.mjs';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const BASE = ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];
const RUNS = [
  { name: 'CI flags (--disable-gpu)', args: [...BASE, '--disable-gpu'] },
  { name: 'WebGPU on SwiftShader', args: [...BASE, '--enable-unsafe-webgpu', '--enable-unsafe-swiftshader', '--use-angle=swiftshader', '--enable-features=Vulkan', '--use-vulkan=swiftshader'] },
];

let chromium;
try { ({ chromium } = await import('playwright-core')); } catch {
  process.stdout.write('demo test NOT RUN: playwright-core is not installed (npm install -D playwright-core)\n');
  process.exit(0);
}

const server = await serve(0);
const url = `http://127.0.0.1:${server.address().port}/demo/`;
let failed = false;
for (const run of RUNS) {
  const profile = mkdtempSync(join(tmpdir(), 'nbx-chromium-'));
  let browser;
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
    const r = await page.evaluate(() => window.__nbxDemo);
    process.stdout.write(`\n## ${run.name}\n`);
    if (r.error) { failed = true; process.stdout.write(`page error: ${r.error}\n${logs.join('\n')}\n`); continue; }
    process.stdout.write(r.device === 'webgpu' ? `WebGPU adapter: ${r.adapter}\n`
      : `no WebGPU adapter in this browser (${r.webgpuError}): checked the page's CPU path instead\n`);
    for (const op of r.ops) {
      const vs = op.maxError === undefined ? '' : ` (max rel. error vs CPU ${op.maxError.toExponential(1)})`;
      process.stdout.write(`  ${op.ok ? 'ok  ' : 'FAIL'} ${op.name} [${op.device}] ${op.ms.toFixed(1)} ms: ${op.preview}${vs}\n`);
      if (!op.ok) failed = true;
    }
    if (r.ops.length < 7) { failed = true; process.stdout.write(`only ${r.ops.length} operations ran\n`); }
  } catch (e) {
    failed = true;
    process.stdout.write(`\n## ${run.name}\nbrowser run failed: ${e.message}\n`);
  } finally {
    await browser?.close();
    rmSync(profile, { recursive: true, force: true });
  }
}
server.close();
process.exitCode = failed ? 1 : 0;
