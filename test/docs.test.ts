// The user documentation stays true: docs/ops.md is what scripts/gen-ops-table.mjs makes from the op
// registry and the backends' kernel lists now, and the API reference builds from the declarations
// with TypeDoc (checked when TypeDoc is installed: a development install, as CI's `npm ci`).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const root = fileURLToPath(new URL('../..', import.meta.url));

test('docs/ops.md lists every registered operation and no other (regenerate: node scripts/gen-ops-table.mjs)', async () => {
  const { render } = await import(join(root, 'scripts/gen-ops-table.mjs')) as { render(): Promise<string> };
  const names = (text: string): string[] => [...text.matchAll(/^\| ([\w.]+) \| `/gm)].map((m) => m[1]!).sort();
  const have = readFileSync(join(root, 'docs/ops.md'), 'utf8');
  const nbx = await import('../src/index.js');
  assert.deepEqual(names(have), [...nbx.OPS.keys()].sort(), 'docs/ops.md is stale: run `npm run build && node scripts/gen-ops-table.mjs`');
  assert.deepEqual(names(await render()), names(have));
});

test('the guide names the calls it documents', () => {
  const guide = readFileSync(join(root, 'docs/guide.md'), 'utf8');
  for (const s of ['await t.cpu()', 'nbx.scalar.float(2)', 'x.index(', 'index_set_', 'set_printoptions', 'using t =', 'Autograd', 'ops.md']) {
    assert.ok(guide.includes(s), s);
  }
});

test('the API reference builds with TypeDoc (npm run docs)', (t) => {
  const bin = join(root, 'node_modules/typedoc/bin/typedoc');
  if (!existsSync(bin)) { t.skip('TypeDoc is not installed (production install): the docs build is checked where dev dependencies are'); return; }
  const r = spawnSync(process.execPath, [bin, '--emit', 'none', '--logLevel', 'Error'], { cwd: root, encoding: 'utf8', timeout: 300000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
});
