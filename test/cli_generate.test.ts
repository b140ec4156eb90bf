// `nbx generate` and `nbx chat` as a user runs them (the built CLI in a child process) on a tiny
// Llama folder made here: random weights (nbx.models.fromConfig), the byte-level tokenizer of
// test/fake_lm.ts with a chat template. Checks the text and figures, exit codes, errors without a
// stack trace, piped stdin, and Ctrl-C.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import { byteTokenizerConfig, byteTokenizerJson, EOS } from './fake_lm.js';

const NBX = join(dirname(fileURLToPath(import.meta.url)), '../src/cli/nbx.js');
let dir = '';

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'nbx-cli-'));
  const config = {
    architectures: ['LlamaForCausalLM'], model_type: 'llama', vocab_size: 257, hidden_size: 32, intermediate_size: 64,
    num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 2048, rms_norm_eps: 1e-6,
    rope_theta: 10000, tie_word_embeddings: false, eos_token_id: EOS, torch_dtype: 'float32', hidden_act: 'silu',
  };
  const model = nbx.models.fromConfig(config, { seed: 1 });
  await nbx.io.saveSafetensors(join(dir, 'model.safetensors'), model.state_dict() as Record<string, nbx.Tensor>);
  model.dispose();
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: EOS }));
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(byteTokenizerJson()));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(byteTokenizerConfig()));
});
after(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

function nbxRun(args: string[], input?: string, env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [NBX, ...args], { input, encoding: 'utf8', timeout: 60_000, env: { ...process.env, ...env } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const noStack = (stderr: string): void => assert.doesNotMatch(stderr, /\n\s+at .*\(.*:\d+:\d+\)/, `a stack trace leaked: ${stderr}`);

test('nbx generate streams the prompt and its continuation; figures on stderr; same seed, same text', () => {
  const a = nbxRun(['generate', 'And God said', '--model', dir, '--device', 'cpu', '--max-new-tokens', '12', '--seed', '5', '--temperature', '0.9']);
  assert.equal(a.code, 0, a.stderr);
  assert.ok(a.stdout.startsWith('And God said'), a.stdout);
  assert.ok(a.stdout.length > 'And God said'.length);
  assert.match(a.stderr, /loaded .* on cpu in \d+ ms/);
  assert.match(a.stderr, /prompt: 12 tokens, [\d.]+ tokens\/s; time to first token: [\d.]+ ms; decode: \d+ tokens, [\d.]+ tokens\/s; seed 5/);
  const b = nbxRun(['generate', 'And God said', '--model', dir, '--device', 'cpu', '--max-new-tokens', '12', '--seed', '5', '--temperature', '0.9']);
  assert.equal(b.stdout, a.stdout);
});

test('nbx generate: prompt on stdin, default device chosen from the backends (the CPU here)', () => {
  // 16 CPU threads, as on a many-core machine: their stdout pipes must not set off Node's listener-leak warning.
  const r = nbxRun(['generate', '--model', dir, '--max-new-tokens', '3', '--temperature', '0'], 'In the beginning\n', { NBX_NUM_THREADS: '16' });
  assert.equal(r.code, 0, r.stderr);
  assert.ok(r.stdout.startsWith('In the beginning'));
  assert.match(r.stderr, /greedy/);
  const gpu = nbx.cuda.is_available?.() === true;
  if (!gpu) assert.match(r.stderr, /on cpu/);
  assert.doesNotMatch(r.stderr, /Warning: Couldn't load Vulkan/, 'the WebGPU probe keeps its warnings to itself');
  assert.doesNotMatch(r.stderr, /MaxListenersExceededWarning/);
});

test('nbx generate: bad input exits non-zero with a message and no stack trace', () => {
  const cases: [string[], RegExp][] = [
    [['generate', 'x', '--model', dir, '--device', 'cpu', '--top-p', '2'], /top_p/],
    [['generate', 'x', '--model', dir, '--device', 'cpu', '--temperature=-1'], /temperature/],
    [['generate', 'x', '--model', dir, '--device', 'cpu', '--max-new-tokens', 'many'], /--max-new-tokens/],
    [['generate', '', '--model', dir, '--device', 'cpu'], /empty/],
    [['generate', 'x', '--model', join(dir, 'missing')], /does not exist/],
    [['generate', 'x', '--model', dir, '--device', 'tpu'], /--device/],
    [['generate', 'x'.repeat(3000), '--model', dir, '--device', 'cpu'], /context of 2048/],
  ];
  for (const [args, re] of cases) {
    const r = nbxRun(args);
    assert.equal(r.code, 1, `${args.join(' ').slice(0, 80)}: ${r.stderr}`);
    assert.match(r.stderr, re);
    noStack(r.stderr);
    assert.equal(r.stdout, '', 'nothing on stdout for a rejected command');
  }
});

test('nbx chat with piped stdin: one reply per line, history kept, /exit ends it', () => {
  const r = nbxRun(['chat', '--model', dir, '--device', 'cpu', '--max-new-tokens', '4', '--seed', '2'], 'Hello\nWho are you?\n/exit\nnot read\n');
  assert.equal(r.code, 0, r.stderr);
  const stats = r.stderr.match(/prompt: (\d+) tokens/g) ?? [];
  assert.equal(stats.length, 2, r.stderr);
  const [first, second] = stats.map((s) => Number(/\d+/.exec(s)![0]));
  // The second prompt holds the first exchange: user turn, reply, then the new message.
  assert.ok(second! > first! + 'Who are you?'.length, `${first} then ${second}`);
  // End of input works as /exit.
  const eof = nbxRun(['chat', '--model', dir, '--device', 'cpu', '--max-new-tokens', '2'], 'Hi\n');
  assert.equal(eof.code, 0, eof.stderr);
});

test('nbx generate: Ctrl-C stops cleanly, prints the figures and exits 130', async () => {
  const child = spawn(process.execPath, [NBX, 'generate', 'Let there be light', '--model', dir, '--device', 'cpu', '--max-new-tokens', '2000', '--seed', '1', '--temperature', '1'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '', stderr = '';
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  const code = await new Promise<number | null>((resolve) => {
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (stdout.length > 'Let there be light'.length + 5 && !child.killed) child.kill('SIGINT');
    });
    child.on('exit', (c) => resolve(c));
  });
  assert.equal(code, 130, stderr);
  assert.match(stderr, /decode: \d+ tokens.*\(interrupted\)/);
  noStack(stderr);
});
