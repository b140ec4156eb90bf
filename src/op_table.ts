// The table of declared operations, by PyTorch name. `def()` (src/ops/registry.ts) fills it; the CLI,
// the docs, the conformance runner and error attribution in the backends read it, so it lives below
// both ops and backends.

export interface Param { name: string; kwOnly: boolean; required: boolean; def: unknown; variadic: boolean }

export interface OpInfo {
  /** PyTorch name: 'add', 'nn.functional.softmax', 'fft.rfft'. */
  name: string;
  signature: string;
  params: Param[];
}

export const OPS = new Map<string, OpInfo>();
