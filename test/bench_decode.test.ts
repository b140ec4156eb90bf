// `nbx bench decode` on the CPU's smoke shape: its time to first token is the median of --ttft-samples samples
// (the timed generation's first), with the prompt's forward timed alone beside it, and a 4,096-token prompt
// fits the shapes' context (issue #20 measures TTFT at 128 and 4,096 tokens).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../bench/decode.js';

interface Row { nbx: { ttft_ms: number; ttft_samples_ms?: number[]; prefill_host_ms?: number; prefill_ms?: number; new_tokens: number } }

async function bench(args: string[]): Promise<{ ttft_samples: number; prompt_tokens: number; rows: Row[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'nbx-bench-decode-'));
  try {
    await run(['--device', 'cpu', '--shape', 'tiny', '--peers', 'none', '--roofline-gbs', '1', '--json', join(dir, 'r.json'), ...args]);
    return JSON.parse(readFileSync(join(dir, 'r.json'), 'utf8'));
  } finally { rmSync(dir, { recursive: true, force: true }); }
}

test('bench decode: TTFT is the median of --ttft-samples samples, the prefill timed alone beside it', async () => {
  const r = await bench(['--batch', '1', '--prompt', '16', '--new-tokens', '4', '--ttft-samples', '3']);
  assert.equal(r.ttft_samples, 3);
  const n = r.rows[0]!.nbx;
  assert.equal(n.new_tokens, 4);
  assert.equal(n.ttft_samples_ms?.length, 3);
  assert.equal(n.ttft_ms, [...n.ttft_samples_ms!].sort((a, b) => a - b)[1]);
  assert.ok(n.prefill_host_ms! > 0 && n.prefill_ms! >= n.prefill_host_ms!, JSON.stringify(n));
});

test('bench decode: one sample is the timed generation\'s own; a 4,096-token prompt fits', async () => {
  const r = await bench(['--batch', '1', '--prompt', '4096', '--new-tokens', '2', '--ttft-samples', '1']);
  assert.equal(r.prompt_tokens, 4096);
  const n = r.rows[0]!.nbx;
  assert.equal(n.new_tokens, 2, JSON.stringify(n));
  assert.equal(n.ttft_samples_ms, undefined);
  assert.ok(n.ttft_ms > 0);
});
