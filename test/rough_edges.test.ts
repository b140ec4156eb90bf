// Issue 18, item 7: argument errors that say what was wrong, Dawn's start-up warnings kept off stderr
// (said by `nbx info` or with NBX_DEBUG=1), and `nbx bench` taking the suite by name only.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const cli = fileURLToPath(new URL('../src/cli/nbx.js', import.meta.url));
const index = fileURLToPath(new URL('../src/index.js', import.meta.url));

test("a dim that is not an int is a ValueError naming what it got (a.sum('1'))", () => {
  const a = nbx.arange(6).reshape(2, 3);
  assert.throws(() => a.sum('1'), (e: Error) => e instanceof nbx.ValueError && /argument 'dim' must be int or tuple of ints, not str "1"/.test(e.message));
  assert.throws(() => a.sum([0, '1']), (e: Error) => e instanceof nbx.ValueError && /argument 'dim' must be int, not str "1"/.test(e.message));
  assert.throws(() => a.softmax('1'), nbx.ValueError);
  assert.deepEqual(a.sum(1).tolist(), [3, 12]);
  assert.throws(() => nbx.zeros([2], [3]), nbx.ValueError);
});

test('nbx bench takes the suite by name: a flag value is never a suite', () => {
  const r = spawnSync(process.execPath, [cli, 'bench', '--device', 'cuda'], { cwd: root, encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /name the suite first \(cpu, cuda, webgpu, generate, decode, quant, all\)/);
  const u = spawnSync(process.execPath, [cli, 'bench', 'constructor'], { cwd: root, encoding: 'utf8' });
  assert.equal(u.status, 2);
  assert.match(u.stderr, /unknown suite 'constructor'/);
});

test("Dawn's start-up warnings stay off stderr unless NBX_DEBUG=1; nbx info says them", async (t) => {
  if (!(await nbx.webgpu.isAvailable())) { t.skip('no WebGPU adapter on this machine'); return; }
  const script = `const nbx = await import(${JSON.stringify(index)}); const g = nbx.ones(2).to('webgpu'); console.log(JSON.stringify((await g.cpu()).tolist())); console.error('mine');`;
  const run = (env: Record<string, string>) => spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60000 });
  const quiet = run({ NBX_DEBUG: '0' });
  assert.equal(quiet.status, 0, quiet.stderr);
  assert.equal(quiet.stdout.trim(), '[1,1]');
  assert.equal(quiet.stderr.trim(), 'mine'); // the process's own stderr is untouched, Dawn's lines are gone
  const info = spawnSync(process.execPath, [cli, 'info'], { cwd: root, encoding: 'utf8', env: { ...process.env, NBX_DEBUG: '0' }, timeout: 60000 });
  assert.equal(info.status, 0);
  assert.doesNotMatch(info.stderr, /Warning:/);
  assert.match(info.stdout, /webgpu {3}available/);
});

test('a process that used a GPU backend ends promptly with its code, its output and exit handlers intact', async (t) => {
  if (!(await nbx.webgpu.isAvailable())) { t.skip('no WebGPU adapter on this machine'); return; }
  const exitJs = fileURLToPath(new URL('../src/backend/exit.js', import.meta.url));
  const script = `const nbx = await import(${JSON.stringify(index)}); const { exitPromptly } = await import(${JSON.stringify(exitJs)});
    const g = nbx.ones(3).to('webgpu'); console.log(JSON.stringify((await g.cpu()).tolist()));
    process.on('exit', () => console.log('exit handler ran')); exitPromptly(3);`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 3, r.stderr);
  assert.equal(r.stdout, '[1,1,1]\nexit handler ran\n');
});
