// Where the package's shipped data lives at runtime.
//
// The build is plain `tsc`, which compiles .ts and copies nothing else, so data files (the device
// profiles' YAML, the shipped autotune caches) are read from the package's own `src/` tree, which
// the package ships. The package root is found by walking up from this module's directory to the
// first package.json whose name is "nbxtensor": that works identically from `src/profiles/*.ts`
// (run through a TS loader) and from `dist/src/profiles/*.js` (the compiled build).

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NbxError } from '../errors.js';

const PACKAGE_NAME = 'nbxtensor';
let cachedRoot: string | undefined;

/** Absolute path of the nbxtensor package root (the directory holding its package.json). */
export function packageRoot(): string {
  if (cachedRoot !== undefined) return cachedRoot;
  const start = dirname(fileURLToPath(import.meta.url));
  let dir = start;
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        const parsed = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown };
        if (parsed.name === PACKAGE_NAME) {
          cachedRoot = dir;
          return dir;
        }
      } catch {
        // an unreadable package.json further down (a fixture, a vendored dep) is not ours: keep walking
      }
    }
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  throw new NbxError('profiles', `cannot locate the ${PACKAGE_NAME} package root above ${start} ` +
    `(no package.json named "${PACKAGE_NAME}"); the shipped data files cannot be found`);
}

/** The shipped device-profile directory: `<package>/src/profiles/data` (one subdirectory per vendor). */
export function profileDataDir(): string {
  return join(packageRoot(), 'src', 'profiles', 'data');
}

/** The shipped autotune-cache directory: `<package>/src/autotune/shipped` (one JSON file per device). */
export function shippedCacheDir(): string {
  return join(packageRoot(), 'src', 'autotune', 'shipped');
}
