// Reliability of files and command lines (issue 17): safetensors names that are JavaScript's special
// keys, missing files, files that are not safetensors, unknown options, huge headers; the conformance
// runner on malformed suites; unknown flags of the nbx command.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as nbx from '../src/index.js';
import { FileError, FormatError, NbxError, ValueError } from '../src/errors.js';
import { SafetensorsFile, writeSafetensors, parseHeader } from '../src/io/safetensors.js';
import { runSuite } from '../src/conformance/runner.js';

const dir = mkdtempSync(join(tmpdir(), 'nbx-rel-io-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const CLI = fileURLToPath(new URL('../src/cli/nbx.js', import.meta.url));
const nbxCli = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 120_000 });
const isErr = (cls: new (...a: never[]) => Error, msg?: RegExp) => (e: unknown): boolean =>
  e instanceof cls && (!msg || msg.test((e as Error).message));

test('safetensors: tensors named __proto__ / constructor are ordinary names (null-prototype result)', async () => {
  const p = join(dir, 'proto.safetensors');
  await nbx.io.saveSafetensors(p, Object.fromEntries([['__proto__', nbx.tensor([1, 2], { dtype: 'float32' })], ['constructor', nbx.tensor([3], { dtype: 'int32' })]]),
    Object.fromEntries([['__proto__', 'meta']]));
  const { tensors, metadata } = await nbx.io.loadSafetensors(p);
  assert.deepEqual(Object.keys(tensors).sort(), ['__proto__', 'constructor']);
  assert.deepEqual(tensors['__proto__']!.tolist(), [1, 2]);
  assert.equal(Object.getPrototypeOf(tensors), null);
  assert.deepEqual(Object.keys(metadata), ['__proto__']);
  const h = await nbx.io.openSafetensors(p);
  assert.deepEqual(h.names().sort(), ['__proto__', 'constructor']);
  assert.deepEqual((await h.get('__proto__')).tolist(), [1, 2]);
  await h.close();
});

test('safetensors: missing files and folders are FileErrors naming the operation and path', async () => {
  await assert.rejects(nbx.io.loadSafetensors(join(dir, 'nope.safetensors')), isErr(FileError, /io\.loadSafetensors: .*nope\.safetensors: no such file/));
  await assert.rejects(nbx.io.openSafetensors(join(dir, 'nope')), isErr(FileError, /ENOENT/));
  await assert.rejects(SafetensorsFile.open(join(dir, 'nope.safetensors')), isErr(FileError, /safetensors/));
  assert.throws(() => SafetensorsFile.openSync(join(dir, 'nope.safetensors')), isErr(FileError));
  await assert.rejects(nbx.io.saveSafetensors(join(dir, 'no-such-dir', 'x.safetensors'), { a: nbx.ones([1]) }), isErr(FileError));
  await assert.rejects(SafetensorsFile.open(dir), isErr(FileError, /EISDIR|folder/));
});

test('safetensors: files that are not safetensors are FormatErrors saying so', async () => {
  const cases: [string, Uint8Array][] = [['passwd', new TextEncoder().encode('root:x:0:0:root:/root:/bin/bash\n')], ['short', new Uint8Array([1, 2, 3])],
    ['png', new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13])], ['empty', new Uint8Array(0)]];
  for (const [name, bytes] of cases) {
    const p = join(dir, name);
    writeFileSync(p, bytes);
    await assert.rejects(nbx.io.loadSafetensors(p), isErr(FormatError, /not a safetensors file/), name);
  }
  // a JSON array header is framed like safetensors but is not one
  const arr = new TextEncoder().encode('[1,2]');
  const b = new Uint8Array(8 + arr.length); new DataView(b.buffer).setBigUint64(0, BigInt(arr.length), true); b.set(arr, 8);
  assert.throws(() => parseHeader(b, b.length, 'x'), isErr(FormatError, /not a safetensors file/));
});

test('io functions reject unknown options and wrong argument types', async () => {
  const p = join(dir, 'ok.safetensors');
  await nbx.io.saveSafetensors(p, { a: nbx.ones([2]) });
  await assert.rejects(nbx.io.loadSafetensors(p, { devcie: 'cpu' } as never), isErr(ValueError, /unexpected option 'devcie'/));
  await assert.rejects(nbx.io.loadSafetensors(p, 'cpu' as never), isErr(ValueError));
  await assert.rejects(nbx.io.loadSafetensors(42 as never), isErr(ValueError));
  const h = await nbx.io.openSafetensors(p);
  await assert.rejects(h.get('a', { dtpye: 'float16' } as never), isErr(ValueError, /dtpye/));
  await h.close();
  const f = await SafetensorsFile.open(p);
  await assert.rejects(f.readInto('a', new Uint8Array(8), { chunk: 4 } as never), isErr(ValueError, /chunk/));
  await f.close();
  await assert.rejects(nbx.io.saveSafetensors(p, { a: nbx.ones([1]) }, { n: 3 } as never), isErr(ValueError, /metadata/));
  await assert.rejects(nbx.io.saveSafetensors(p, nbx.ones([1]) as never), isErr(ValueError));
});

test('nbx inspect: a header of many tensors, unknown flags, missing paths, non-safetensors files', () => {
  // 2*10^5 entries: past the ~1.2*10^5 arguments where spreading rows into Math.max overflowed the stack
  // (10^6 works too; it takes ~10 s, too long for the quick suite)
  const n = 200_000;
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(`"t${i}":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`);
  const header = Buffer.from(`{${parts.join(',')}}`);
  const len = Buffer.alloc(8); len.writeBigUInt64LE(BigInt(header.length));
  const p = join(dir, 'many.safetensors');
  writeFileSync(p, Buffer.concat([len, header]));
  const r = spawnSync(process.execPath, [CLI, 'inspect', p], { encoding: 'utf8', timeout: 120_000, maxBuffer: 1 << 30 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /\n200000 tensors, 0 B in 1 file/);
  const flag = nbxCli('inspect', '--bogus', p);
  assert.equal(flag.status, 2);
  assert.match(flag.stderr, /Unknown option '--bogus'/);
  const missing = nbxCli('inspect', join(dir, 'nope.safetensors'));
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /FileError: inspect: .*no such file/);
  const passwd = join(dir, 'passwd'); writeFileSync(passwd, 'root:x:0:0:root:/root:/bin/bash\n');
  assert.match(nbxCli('inspect', passwd).stderr, /FormatError: .*not a safetensors file/);
  const info = nbxCli('info', '--bogus');
  assert.equal(info.status, 2);
  assert.match(info.stderr, /unexpected argument '--bogus'/);
});

/** Writes a suite file: `cases` as its conformance document, tensors as given. */
async function suiteFile(folder: string, name: string, doc: unknown, tensors: Record<string, nbx.Tensor> = {}): Promise<void> {
  mkdirSync(folder, { recursive: true });
  const entries = await Promise.all(Object.entries(tensors).map(async ([n, t]) => {
    const d = await t.dataStorage();
    return { name: n, dtype: t.dt, shape: [...t.shape], data: new Uint8Array(d.buffer, d.byteOffset, d.byteLength) };
  }));
  await writeSafetensors(join(folder, name), entries, { 'nbx.conformance': typeof doc === 'string' ? doc : JSON.stringify(doc) });
}

test('conformance runner: malformed suites are errors naming the file; malformed cases fail alone', async () => {
  const empty = join(dir, 'suite-empty'); mkdirSync(empty);
  await assert.rejects(runSuite(empty), isErr(FormatError, /no \.safetensors files/));
  await assert.rejects(runSuite(join(dir, 'suite-missing')), isErr(FileError, /ENOENT/));
  const nonSuite = join(dir, 'suite-non'); mkdirSync(nonSuite);
  await nbx.io.saveSafetensors(join(nonSuite, 'w.safetensors'), { a: nbx.ones([1]) });
  await assert.rejects(runSuite(nonSuite), isErr(FormatError, /none of the 1 \.safetensors files/));
  const v9 = join(dir, 'suite-v9');
  await suiteFile(v9, 'a.safetensors', { version: 9, cases: [] });
  await assert.rejects(runSuite(v9), isErr(FormatError, /a\.safetensors: unknown conformance format version 9/));
  const notJson = join(dir, 'suite-json');
  await suiteFile(notJson, 'b.safetensors', '{"version": 1, "cases": [');
  await assert.rejects(runSuite(notJson), isErr(FormatError, /b\.safetensors: the nbx.conformance metadata is not JSON/));

  // a case with no fields fails alone; two cases share an input; an expect_error case after them
  const mixed = join(dir, 'suite-mixed');
  const x = nbx.tensor([1, 2, 3], { dtype: 'float32' }), want = nbx.tensor([2, 3, 4], { dtype: 'float32' });
  await suiteFile(mixed, 'c.safetensors', { version: 1, cases: [
    {},
    { id: 'add/0', op: 'add', args: [{ tensor: 'x' }, 1], kwargs: {}, out: ['want'] },
    { id: 'add_/1', op: 'Tensor.add_', args: [{ tensor: 'x' }, 1], kwargs: {}, out: ['want'] },
    { id: 'add/2', op: 'add', args: [{ tensor: 'x' }, 1], kwargs: {}, out: ['want'] },
    { id: 'dispose/3', op: 'Tensor.dispose', args: [{ tensor: 'x' }], kwargs: {}, expect_error: true },
    { id: 'err/4', op: 'add', args: [{ tensor: 'x' }, { tensor: 'missing' }], kwargs: {}, expect_error: true },
    { id: 'err/5', op: 'reshape', args: [{ tensor: 'x' }, [2, 2]], kwargs: {}, expect_error: true },
  ] }, { x, want });
  const res = await runSuite(mixed);
  const by = new Map(res.results.map((r) => [r.id, r]));
  assert.equal(by.get('c.safetensors#0')?.status, 'fail');
  assert.match(by.get('c.safetensors#0')!.message!, /malformed case in c\.safetensors: missing or empty field 'id'/);
  for (const id of ['add/0', 'add_/1', 'add/2', 'err/5']) assert.equal(by.get(id)?.status, 'pass', `${id}: ${by.get(id)?.message}`);
  assert.equal(by.get('dispose/3')?.status, 'fail', 'a call that succeeds fails an expect_error case');
  assert.equal(by.get('err/4')?.status, 'fail', 'inputs that cannot be built fail, whatever error was expected');
  assert.match(by.get('err/4')!.message!, /could not build the arguments/);
  assert.equal(res.results.length, 7);
});

test('nbx conformance: an empty folder, a missing one and unknown flags exit non-zero', () => {
  const empty = join(dir, 'cli-empty'); mkdirSync(empty);
  const r = nbxCli('conformance', empty);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /not a conformance suite/);
  assert.notEqual(nbxCli('conformance', join(dir, 'cli-missing')).status, 0);
  const flag = nbxCli('conformance', empty, '--devcie', 'cpu');
  assert.equal(flag.status, 2);
  assert.match(flag.stderr, /Unknown option '--devcie'/);
});

test('errors are NbxErrors', () => { assert.ok(new FileError('x', 'y', 'ENOENT', '/p') instanceof NbxError); });
