// `nbx serve` as a user runs it (the built CLI in a child process, the embedded model on the CPU):
// it prints where it listens (127.0.0.1 by default), answers the OpenAI client, logs one line per
// request on stderr, and stops cleanly on SIGINT (exit 0); a bad flag is a message and exit 1 or 2.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

const NBX = join(dirname(fileURLToPath(import.meta.url)), '../src/cli/nbx.js');
const skip = existsSync(join(process.cwd(), 'assets', 'nbx-kjv', 'model.safetensors')) ? false : 'assets/nbx-kjv is missing';

test('nbx serve: listens on 127.0.0.1, answers the OpenAI client, logs each request, stops on SIGINT', { skip, timeout: 60_000 }, async () => {
  const child = spawn(process.execPath, [NBX, 'serve', '--port', '0', '--device', 'cpu', '--max-batch', '4', '--api-key', 'k1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d.toString(); });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no URL in 30 s; stderr:\n${stderr}`)), 30_000);
      child.stderr.on('data', () => {
        const m = /at (http:\/\/[^\s]+)\/v1 /.exec(stderr);
        if (m) { clearTimeout(t); resolve(m[1]!); }
      });
      void exited.then((code) => reject(new Error(`exited with ${code}:\n${stderr}`)));
    });
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.match(stderr, /model 'nbx-kjv'/);
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k1', maxRetries: 0 });
    const r = await client.chat.completions.create({ model: 'nbx-kjv', messages: [{ role: 'user', content: 'And God said' }], max_tokens: 4, seed: 7 });
    assert.equal(r.choices[0]!.message.role, 'assistant');
    assert.ok(r.usage!.completion_tokens >= 1);
    const h = await fetch(`${url}/health`);
    assert.equal(h.status, 200);
    await new Promise((res) => setTimeout(res, 50));
    assert.match(stderr, /POST \/v1\/chat\/completions 200 \d+ms prompt=\d+ completion=\d+/);
    assert.match(stderr, /GET \/health 200/);
  } finally {
    child.kill('SIGINT');
  }
  assert.equal(await exited, 0, stderr);
  assert.match(stderr, /SIGINT: stopping/);
});

test('nbx serve: a bad flag is a message without a stack trace', () => {
  const r = spawnSync(process.execPath, [NBX, 'serve', '--port', 'eighty'], { encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /--port must be an integer/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
  const u = spawnSync(process.execPath, [NBX, 'serve', '--frobnicate'], { encoding: 'utf8' });
  assert.equal(u.status, 2);
});
