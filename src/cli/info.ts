// `nbx info`: what this installation can do on this machine, and why anything is missing. Never fails.

export async function info(version: string, args: string[]): Promise<number> {
  if (args.length) {
    process.stderr.write(`nbx info: unexpected argument${args.length > 1 ? 's' : ''} ${args.map((a) => `'${a}'`).join(' ')} (nbx info takes none)\n`);
    return 2;
  }
  const startedAt = performance.now();
  const times: Record<string, number> = {};
  let mark = performance.now();
  const took = (what: string): void => { const now = performance.now(); times[what] = (now - mark) / 1000; mark = now; status(''); };
  // On a terminal, say what is being probed while it runs: a first run after install or boot can spend
  // seconds reading the GPU libraries from disk and initializing the driver.
  const status = (text: string): void => { if (process.stderr.isTTY) process.stderr.write(`\x1b[2K\r${text}`); };
  const lines: string[] = [`nbxtensor ${version} (node ${process.version}, ${process.platform}-${process.arch})`, '', 'backends:'];
  lines.push('  cpu      available');
  try {
    status('nbx info: loading BLAS…');
    const { blasInfo } = await import('../backend/cpu/runtime/blas.js');
    lines.push(`           BLAS: ${blasInfo()}`);
  } catch { lines.push('           BLAS: (not built in this version)'); }
  took('BLAS');
  try {
    status('nbx info: probing CUDA (driver, NVRTC, cuBLAS; a first run reads these libraries from disk)…');
    const { probeCuda } = await import('../backend/cuda/runtime/libs.js');
    const p = probeCuda();
    if (p.available) {
      for (const d of p.devices ?? []) {
        lines.push(`  cuda     available: ${d.name}, compute capability ${d.cc.join('.')}, ${(Number(d.totalMem) / 2 ** 30).toFixed(1)} GiB, ${d.smCount} SMs`);
      }
      lines.push(`           driver ${p.driverVersion ?? '?'}; libraries: ${Object.entries(p.libs ?? {}).map(([k, v]) => `${k}=${v ?? 'missing'}`).join(', ')}`);
      try {
        const { matchProfile } = await import('../profiles/index.js');
        const d = p.devices?.[0];
        if (d) {
          const m = matchProfile({ vendor: 'nvidia', computeCapability: d.cc as [number, number] });
          lines.push(`           device profile: ${m.profile.family} (${m.reason})`);
        }
      } catch (e) { lines.push(`           device profile: none (${(e as Error).message})`); }
    } else lines.push(`  cuda     not available: ${p.reason}`);
  } catch (e) { lines.push(`  cuda     not available: ${(e as Error).message}`); }
  took('cuda');
  try {
    status('nbx info: probing WebGPU (Dawn: Vulkan, then OpenGL ES)…');
    const { probeWebGPU } = await import('../backend/webgpu/runtime/probe.js');
    const w = await probeWebGPU();
    lines.push(w.available ? `  webgpu   available: ${w.description}` : `  webgpu   not available: ${w.reason}`);
    // Dawn's start-up warnings (e.g. "Couldn't load Vulkan" on a machine without it) are said here, once.
    const { nativeMessages } = await import('../backend/native_stderr.js');
    for (const m of nativeMessages.filter((l) => /^(Warning|Error): /.test(l))) lines.push(`           Dawn: ${m.replace(/^(Warning|Error): /, '')}`);
  } catch (e) { lines.push(`  webgpu   not available: ${(e as Error).message}`); }
  took('webgpu');
  // What took the time, for a first run that is slow (cold disk cache of the driver and library files,
  // a GPU driver's first initialization): each probe's seconds, measured here.
  lines.push('', `probe times: ${Object.entries(times).map(([k, v]) => `${k} ${v.toFixed(2)} s`).join(', ')}; module loading ${(startedAt / 1000).toFixed(2)} s`);
  process.stdout.write(`${lines.join('\n')}\n`);
  return 0;
}
