// The autotune configurations shipped with the package (src/autotune/shipped/*.json) against the spaces
// the kernels declare today: every entry must name a live space, set exactly its knobs to declared
// values, satisfy its constraint and fit the card family's limits. A space whose knobs change must get
// a new name (its old entries are then stale and fail here until re-measured and removed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkConfig, violations, type ConfigSpace } from '../src/autotune/index.js';
import { shippedCacheDir, loadProfiles } from '../src/profiles/index.js';
import * as cudaTuning from '../src/backend/cuda/tuning/spaces.js';
import * as webgpuTuning from '../src/backend/webgpu/tuning/spaces.js';
import { GEMV_KN_SPACE, GEMV_NK_SPACE } from '../src/backend/cuda/kernels/gemv.js';
import { DECODE_SPACE, PREFILL_SPACE } from '../src/backend/cuda/kernels/attention.js';
import { GEMM_TUNE_NAME } from '../src/backend/cuda/runtime/cublaslt.js';

type Entry = { config: Record<string, number | string | boolean> };
type Space = ConfigSpace<never>;

const isSpace = (v: unknown): v is Space => typeof v === 'object' && v !== null && 'knobs' in v && 'defaultConfig' in v && 'name' in v;
const spaces = new Map<string, Space>();
for (const v of [...Object.values(cudaTuning), ...Object.values(webgpuTuning), GEMV_KN_SPACE, GEMV_NK_SPACE]) if (isSpace(v)) spaces.set(v.name, v as Space);
/** Spaces whose resources and constraint need the problem (attention: the head dim): knob values only. */
const problemSpaces = new Set([PREFILL_SPACE.name, DECODE_SPACE.name]);
for (const s of [PREFILL_SPACE, DECODE_SPACE]) spaces.set(s.name, s as unknown as Space);

test('every shipped autotune entry is a valid, fitting point of a live space', () => {
  const dir = shippedCacheDir();
  const hopper = loadProfiles().find((p) => p.family === 'hopper')!;
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  assert.ok(files.length >= 2, `shipped autotune files in ${dir}`);
  let checked = 0;
  for (const f of files) {
    const backend = f.startsWith('webgpu-') ? 'webgpu' : 'cuda';
    const data = JSON.parse(readFileSync(join(dir, f), 'utf8')) as { entries: Record<string, Record<string, Record<string, Entry>>> };
    for (const [device, bySpace] of Object.entries(data.entries)) {
      for (const [name, entries] of Object.entries(bySpace)) {
        assert.ok(name.startsWith(`${backend}.`), `${f}: ${device}: space ${name} belongs in a ${name.split('.')[0]} file`);
        if (name === GEMM_TUNE_NAME) continue; // cuBLASLt algorithms: opaque 128-hex-digit descriptors, checked by cuda_gemm's test
        const space = spaces.get(name);
        assert.ok(space, `${f}: ${device}: space ${name} is not declared by any kernel (stale entries?)`);
        for (const [key, e] of Object.entries(entries)) {
          const where = `${f}: ${device}: ${name} ${key}`;
          assert.doesNotThrow(() => checkConfig(space, e.config), where);
          if (problemSpaces.has(name) || backend !== 'cuda') { checked++; continue; }
          assert.deepEqual(violations(space, e.config, hopper.limits, undefined as never), [], where);
          checked++;
        }
      }
    }
  }
  assert.ok(checked > 100, `${checked} entries checked`);
});
