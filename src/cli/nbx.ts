#!/usr/bin/env node
// The `nbx` command: generate, chat, info, conformance, inspect, bench.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));

function packageVersion(): string {
  for (const p of [join(here, '../../../package.json'), join(here, '../../package.json')]) {
    try { return (JSON.parse(readFileSync(p, 'utf8')) as { version: string }).version; } catch { /* next */ }
  }
  return 'unknown';
}

const HELP = `nbx — nbxtensor command line

  nbx generate [PROMPT] [--model DIR] [--device cpu|cuda|webgpu] [--dtype D] [--max-new-tokens N]
               [--temperature T] [--top-k K] [--top-p P] [--seed S] [--chat]
                                             stream a continuation of PROMPT (default model: the embedded
                                             nbx-kjv; device: the best one here); figures on stderr
  nbx chat [--model DIR] [--device D] [--system TEXT] [sampling flags as generate]
                                             a conversation through the model's chat template (/exit ends it)
  nbx serve [--model DIR|FILE] [--device D] [--dtype D] [--host 127.0.0.1] [--port 8000] [--max-batch N]
            [--max-queue N] [--kv-blocks N] [--block-size N] [--api-key KEY] [--served-model-name NAME]
            [--warmup on|off]
                                             an OpenAI-compatible server (/v1/chat/completions, /v1/completions,
                                             /v1/models, /health, /metrics) with continuous batching; --warmup
                                             (default on off the CPU): KV cache and step graphs made before listening

  nbx quantize MODEL_DIR OUT_DIR --scheme int8|int4-g128|int4-g64|int4-g32|fp8 [--symmetric] [--lm-head]
                                             round-to-nearest quantized copy of a model folder (Linear weights;
                                             lm_head too with --lm-head, a tied embedding staying float)
  nbx info                                   version, backends found (and why any is missing), device profile
  nbx conformance DIR [--device cpu|cuda|webgpu] [--filter REGEX] [--json] [--verbose]
                                             run a conformance suite (FORMAT.md); exit 1 if any case fails
  nbx inspect FILE|DIR                       table of the tensors of a safetensors file, a sharded index or a folder
  nbx bench [SUITE] [flags]                  benchmarks against the same-run peer (numpy / PyTorch); SUITE:
                                             cpu (default), cuda, webgpu, generate, decode, quant or all, named first;
                                             e.g. nbx bench decode --device cuda [--shape tinyllama] [--batch 1,8]
`;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd !== undefined && (rest.includes('--help') || rest.includes('-h'))) {
    const line = HELP.split('\n').filter((l) => l.trimStart().startsWith(`nbx ${cmd}`));
    process.stdout.write(line.length ? `usage:\n${HELP.split('\n').slice(HELP.split('\n').indexOf(line[0]!)).join('\n').split(/\n  nbx /)[0]}\n` : HELP);
    return 0;
  }
  switch (cmd) {
    case 'info': return (await import('./info.js')).info(packageVersion(), rest);
    case 'conformance': return conformance(rest);
    case 'inspect': return (await import('./inspect.js')).inspect(rest);
    case 'generate': return (await import('./generate.js')).generateCommand(rest);
    case 'chat': return (await import('./chat.js')).chatCommand(rest);
    case 'serve': return (await import('./serve.js')).serveCommand(rest);
    case 'quantize': return (await import('./quantize.js')).quantizeCommand(rest);
    case 'bench': return (await import('../../bench/run.js')).bench(rest);
    case undefined: case '-h': case '--help': case 'help': process.stdout.write(HELP); return 0;
    case '--version': case '-v': process.stdout.write(`${packageVersion()}\n`); return 0;
    default: process.stderr.write(`nbx: unknown command '${cmd}'\n${HELP}`); return 2;
  }
}

async function conformance(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args, allowPositionals: true,
    options: { device: { type: 'string', default: 'cpu' }, filter: { type: 'string' }, json: { type: 'boolean', default: false }, verbose: { type: 'boolean', default: false } },
  });
  const dir = positionals[0];
  if (!dir) { process.stderr.write('nbx conformance: give the suite directory\n'); return 2; }
  const { runSuite } = await import('../conformance/runner.js');
  const t0 = performance.now();
  const res = await runSuite(dir, {
    device: values.device, filter: values.filter ? new RegExp(values.filter) : undefined,
    onResult: (r) => {
      if (values.json) return;
      if (r.status === 'fail') process.stdout.write(`FAIL ${r.id} [${r.op}]: ${r.message}\n`);
      else if (r.status === 'skip') process.stdout.write(`SKIP ${r.id} [${r.op}]: ${r.message}\n`);
      else if (values.verbose) process.stdout.write(`ok   ${r.id}\n`);
    },
  });
  const secs = ((performance.now() - t0) / 1000).toFixed(1);
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ device: values.device, passed: res.passed, failed: res.failed, skipped: res.skipped, seconds: Number(secs), results: res.results.filter((r) => r.status !== 'pass') }, null, 1)}\n`);
  }
  process.stdout.write(`${res.passed} passed, ${res.failed} failed, ${res.skipped} skipped\n`);
  if (!values.json) process.stderr.write(`(${values.device}, ${secs} s)\n`);
  return res.failed > 0 ? 1 : 0;
}

main(process.argv.slice(2)).then(async (code) => {
  // A command that used a GPU backend ends here, without waiting on the runtimes' native teardown.
  const { loadedBackends } = await import('../backend/backend.js');
  if (loadedBackends().some((b) => b.type !== 'cpu')) (await import('../backend/exit.js')).exitPromptly(code);
  process.exitCode = code;
}, (e: unknown) => {
  // A bad command line is the user's to fix: say what was wrong and show the usage, without a stack.
  const code = (e as { code?: string }).code;
  if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS')) {
    process.stderr.write(`nbx: ${(e as Error).message}\n\n${HELP}`);
    process.exitCode = 2;
    return;
  }
  const debug = process.env.NBX_DEBUG === '1';
  process.stderr.write(`nbx: ${e instanceof Error ? (debug ? e.stack ?? e.message : `${e.name}: ${e.message}`) : String(e)}${debug ? '' : '\n(set NBX_DEBUG=1 for the stack trace)'}\n`);
  process.exitCode = 1;
});
