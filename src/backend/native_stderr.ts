// Dawn (WebGPU for Node) prints its start-up warnings ("Couldn't load Vulkan", "... artificially
// reduced ...") from native code straight to file descriptor 2, where no JavaScript hook sees them.
// While Dawn starts, fd 2 points at a temporary file; afterwards everything that was not Dawn's is
// written back to stderr and Dawn's lines are kept for `nbx info` (or shown at once with NBX_DEBUG=1).

// Node-only modules are imported by computed names when used, so browser bundles of the WebGPU
// backend (which imports this file) never try to resolve them.

/** Dawn's messages seen so far in this process (for `nbx info` and nbx.webgpu.messages()). */
export const nativeMessages: string[] = [];

interface Libc { dup(fd: number): number; dup2(a: number, b: number): number; close(fd: number): number }
let libc: Libc | null | undefined;

async function loadLibc(): Promise<Libc | null> {
  if (libc !== undefined) return libc;
  libc = null;
  if (typeof process === 'undefined' || (process.platform !== 'linux' && process.platform !== 'darwin')) return libc;
  try {
    const name = 'koffi';
    const koffi = (await import(/* @vite-ignore */ name)).default as unknown as {
      load(p: string): { func(sig: string): (...a: number[]) => number };
    };
    const lib = koffi.load(process.platform === 'darwin' ? 'libSystem.B.dylib' : 'libc.so.6');
    const dup = lib.func('int dup(int)'), dup2 = lib.func('int dup2(int, int)'), close = lib.func('int close(int)');
    libc = { dup: (fd) => dup(fd), dup2: (a, b) => dup2(a, b), close: (fd) => close(fd) };
  } catch { libc = null; }
  return libc;
}

/** Dawn's lines: a "Warning:"/"Error:" line and its indented or blank continuation lines. */
function splitNative(text: string): { native: string[]; other: string } {
  const native: string[] = [];
  const other: string[] = [];
  let inNative = false;
  for (const line of text.split('\n')) {
    if (/^(Warning|Error|Info): /.test(line)) { native.push(line); inNative = true; continue; }
    if (inNative && (line.startsWith(' ') || line === '')) { if (line !== '') native.push(line); continue; }
    inNative = false;
    other.push(line);
  }
  return { native, other: other.join('\n') };
}

/**
 * Runs `fn` (Dawn's instance, adapter or device creation) with native stderr captured. Without a way to
 * redirect (Windows, browsers, no koffi) it just runs `fn`.
 */
export async function quietNative<T>(fn: () => Promise<T>): Promise<T> {
  const c = await loadLibc();
  if (!c || process.env.NBX_DEBUG === '1') return fn();
  const [fsName, osName, pathName] = ['node:fs', 'node:os', 'node:path'];
  const { closeSync, openSync, readFileSync, unlinkSync } = await import(/* @vite-ignore */ fsName) as typeof import('node:fs');
  const { tmpdir } = await import(/* @vite-ignore */ osName) as typeof import('node:os');
  const { join } = await import(/* @vite-ignore */ pathName) as typeof import('node:path');
  const path = join(tmpdir(), `nbx-dawn-${process.pid}-${Date.now()}.log`);
  let fd = -1, saved = -1;
  try {
    fd = openSync(path, 'w+');
    saved = c.dup(2);
    if (saved < 0 || c.dup2(fd, 2) < 0) { if (saved >= 0) c.close(saved); saved = -1; }
  } catch { saved = -1; }
  try {
    return await fn();
  } finally {
    if (saved >= 0) { c.dup2(saved, 2); c.close(saved); }
    if (fd >= 0) {
      let text = '';
      try { text = readFileSync(path, 'utf8'); } catch { /* nothing captured */ }
      try { closeSync(fd); unlinkSync(path); } catch { /* already gone */ }
      const { native, other } = splitNative(text);
      nativeMessages.push(...native);
      if (other.trim() !== '') process.stderr.write(other.endsWith('\n') ? other : `${other}\n`);
    }
  }
}
