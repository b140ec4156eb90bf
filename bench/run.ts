// `nbx bench`: dispatches to the benchmark suites. Each measures its peer in the same run.
export async function bench(args: string[]): Promise<number> {
  const which = args.find((a) => !a.startsWith('-')) ?? 'cpu';
  if (which === 'cpu' || which === 'all') await (await import('./cpu.js')).run(args);
  return 0;
}
