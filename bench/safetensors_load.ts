// Benchmark: how close does SafetensorsFile.readInto come to a plain fs.read of the whole file?
//
//   npx tsc -p tsconfig.json && node dist/bench/safetensors_load.js [--reps N] [--file PATH]
//
// Writes a 1 GiB float32 safetensors file to os.tmpdir() (unless present), reads it once to warm
// the page cache, then times (a) one fs.read of the whole file into one preallocated Buffer and
// (b) readInto of its one tensor into a preallocated Uint8Array, for the default settings and a
// sweep of chunk sizes and reads in flight. Prints markdown tables. Target: (b)/(a) >= 0.9.

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  DEFAULT_CHUNK_BYTES, DEFAULT_READ_CONCURRENCY, SafetensorsFile, writeSafetensors,
} from '../src/io/safetensors.js';

const MiB = 2 ** 20;
const NUMEL = 2 ** 28; // float32: 1 GiB of data

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : dflt;
}

const file = arg('--file', path.join(os.tmpdir(), 'nbx-bench-1gib-f32.safetensors'));
const reps = Number(arg('--reps', '5'));

// The writer runs in a child process, so its 1 GiB source buffer never counts in our RSS.
if (process.argv.includes('--write-only')) {
  const data = new Float32Array(NUMEL);
  for (let i = 0; i < NUMEL; i++) data[i] = i * 1e-3;
  await writeSafetensors(file, [{ name: 'weight', dtype: 'float32', shape: [NUMEL], data: new Uint8Array(data.buffer) }],
    { purpose: 'nbx safetensors_load benchmark' });
  process.exit(0);
}

function ensureFile(): void {
  try {
    const f = SafetensorsFile.openSync(file);
    const ok = f.entries.get('weight')?.byteLength === NUMEL * 4;
    f.closeSync();
    if (ok) return;
  } catch { /* missing or stale: rewrite */ }
  console.error(`writing ${file} ...`);
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--write-only', '--file', file], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error('writing the benchmark file failed');
}

// Peak RSS, sampled every few ms while a measurement runs (and at its end).
let peakRss = 0;
let overallPeak = 0;
const sample = () => {
  const rss = process.memoryUsage().rss;
  peakRss = Math.max(peakRss, rss);
  overallPeak = Math.max(overallPeak, rss);
};
const sampler = setInterval(sample, 2);

async function plainRead(dest: Buffer): Promise<void> {
  const fd = await fs.promises.open(file, 'r');
  try {
    for (let got = 0; got < dest.byteLength;) {
      const { bytesRead } = await fd.read(dest, got, dest.byteLength - got, got);
      if (bytesRead === 0) throw new Error('short file');
      got += bytesRead;
    }
  } finally { await fd.close(); }
}

interface Stat { median: number; best: number; peakAbove: number }

/** Times `fn` `reps` times; GB/s (10^9 bytes) over `bytes`, plus peak RSS above `base`. */
async function time(bytes: number, base: number, fn: () => Promise<void>): Promise<Stat> {
  peakRss = 0;
  const rates: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await fn();
    const s = (performance.now() - t0) / 1000;
    sample();
    rates.push(bytes / 1e9 / s);
  }
  rates.sort((a, b) => a - b);
  return { median: rates[Math.floor(rates.length / 2)]!, best: rates.at(-1)!, peakAbove: peakRss - base };
}

ensureFile();
const fileSize = fs.statSync(file).size;
const st = await SafetensorsFile.open(file);
const tensorBytes = st.entries.get('weight')!.byteLength;

// Preallocated and touched once, so page faults on fresh memory are not timed.
const whole = Buffer.allocUnsafeSlow(fileSize).fill(0);
const dest = new Uint8Array(tensorBytes).fill(0);

await plainRead(whole); // warm the page cache
await st.readInto('weight', dest);
if (!Buffer.from(whole.buffer, whole.byteOffset + 8 + st.headerLength, tensorBytes).equals(dest)) throw new Error('readInto bytes differ from the file');

const base = process.memoryUsage().rss;
const plain = await time(fileSize, base, () => plainRead(whole));
const ours = await time(tensorBytes, base, () => st.readInto('weight', dest));

const sweep: { chunk: number; conc: number; s: Stat }[] = [];
for (const chunk of [4 * MiB, 16 * MiB, 32 * MiB, 64 * MiB, 256 * MiB]) {
  for (const conc of [1, 2, 4]) {
    sweep.push({ chunk, conc, s: await time(tensorBytes, base, () => st.readInto('weight', dest, { chunkBytes: chunk, concurrency: conc })) });
  }
}
clearInterval(sampler);
await st.close();

const f2 = (x: number) => x.toFixed(2);
const mib = (x: number) => `${(x / MiB).toFixed(0)} MiB`;
console.log(`\n## safetensors load: ${mib(fileSize)} float32 file, page cache warm, ${reps} reps (median / best)\n`);
console.log(`node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), UV_THREADPOOL_SIZE=${process.env.UV_THREADPOOL_SIZE ?? '4 (default)'}\n`);
console.log('| method | GB/s median | GB/s best | peak RSS above baseline | file size |');
console.log('| --- | --- | --- | --- | --- |');
console.log(`| (a) fs.read whole file, one call | ${f2(plain.median)} | ${f2(plain.best)} | ${mib(plain.peakAbove)} | ${mib(fileSize)} |`);
console.log(`| (b) readInto, ${mib(DEFAULT_CHUNK_BYTES)} chunks x ${DEFAULT_READ_CONCURRENCY} in flight (default) | ${f2(ours.median)} | ${f2(ours.best)} | ${mib(ours.peakAbove)} | ${mib(fileSize)} |`);
console.log(`\nratio (b)/(a), medians: **${f2(ours.median / plain.median)}** (target >= 0.9)`);
console.log(`peak RSS overall: ${mib(overallPeak)}, of which ${mib(fileSize + tensorBytes)} are the two preallocated destination buffers; baseline after allocating them: ${mib(base)}\n`);
console.log('### readInto sweep\n');
console.log('| chunk | in flight | GB/s median | GB/s best | vs (a) |');
console.log('| --- | --- | --- | --- | --- |');
for (const { chunk, conc, s } of sweep) console.log(`| ${mib(chunk)} | ${conc} | ${f2(s.median)} | ${f2(s.best)} | ${f2(s.median / plain.median)} |`);
