// The server's counters and histograms, written as Prometheus' text exposition format (version
// 0.0.4): `# HELP` / `# TYPE` lines, then samples; histograms as cumulative `_bucket{le=...}`, `_sum`
// and `_count`. Gauges that the engine owns (queue, batch, KV blocks) are read when /metrics is asked.

import { ValueError } from '../errors.js';

/** Cumulative histogram with fixed upper bounds (seconds). */
export class Histogram {
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(readonly bounds: readonly number[]) { this.counts = new Array<number>(bounds.length).fill(0); }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    for (let i = 0; i < this.bounds.length; i++) if (v <= this.bounds[i]!) this.counts[i]!++;
  }
}

// Latency buckets from 1 ms to 60 s: an H200 decode step is a few ms, a CPU prefill can take seconds.
const TTFT_BOUNDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 60];
const ITL_BOUNDS = [0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5];
const E2E_BOUNDS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 300];

/** Engine-side gauges, read at scrape time. */
export interface GaugeSnapshot {
  running: number;
  waiting: number;
  kv_blocks_used: number;
  kv_blocks_total: number;
  engine_steps: number;
  in_flight: number;
  /**
   * Reserved device memory (bytes): the device allocator's on CUDA / WebGPU, the process's RSS on the
   * CPU. A KV cache backed by CUDA's virtual memory API is not in it (kv_cache.mappedBytes is).
   */
  reserved_bytes: number;
  /** What reserved_bytes counts: the device allocator's segments, or the process's RSS (the CPU). */
  reserved_source: 'allocator' | 'rss';
  /** The paged KV cache's memory, when the engine reports it (VMM ranges are outside the allocator). */
  kv_cache?: { backing: string; reservedBytes: number; mappedBytes: number } | null;
}

export class ServerMetrics {
  /** endpoint -> status -> count */
  private readonly requests = new Map<string, Map<number, number>>();
  promptTokens = 0;
  completionTokens = 0;
  readonly ttft = new Histogram(TTFT_BOUNDS);
  readonly itl = new Histogram(ITL_BOUNDS);
  readonly e2e = new Histogram(E2E_BOUNDS);
  /** Output tokens per second over a sliding window: [time ms, tokens] per second-bucket. */
  private readonly window: { t: number; n: number }[] = [];
  private static readonly WINDOW_MS = 10_000;

  request(endpoint: string, status: number): void {
    let m = this.requests.get(endpoint);
    if (!m) this.requests.set(endpoint, m = new Map());
    m.set(status, (m.get(status) ?? 0) + 1);
  }

  /** A generated token was sent (for tokens/s). */
  tokenOut(now = performance.now()): void {
    const sec = Math.floor(now / 1000) * 1000;
    const last = this.window[this.window.length - 1];
    if (last && last.t === sec) last.n++;
    else this.window.push({ t: sec, n: 1 });
    while (this.window.length && this.window[0]!.t < sec - ServerMetrics.WINDOW_MS) this.window.shift();
  }

  /** Output tokens per second over the last 10 s (the current, partial second counted in). */
  tokensPerSecond(now = performance.now()): number {
    const from = now - ServerMetrics.WINDOW_MS;
    let n = 0, first = Infinity;
    for (const b of this.window) if (b.t >= Math.floor(from / 1000) * 1000) { n += b.n; first = Math.min(first, b.t); }
    if (n === 0) return 0;
    const span = Math.max(1, (now - Math.max(first, from)) / 1000);
    return n / span;
  }

  render(g: GaugeSnapshot, model: string): string {
    const out: string[] = [];
    const esc = (s: string): string => s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
    const head = (name: string, type: string, help: string): void => { out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`); };
    const lbl = `model="${esc(model)}"`;
    head('nbx_requests_total', 'counter', 'HTTP requests answered, by endpoint and status code.');
    for (const [ep, m] of this.requests) for (const [st, n] of m) out.push(`nbx_requests_total{${lbl},endpoint="${esc(ep)}",status="${st}"} ${n}`);
    head('nbx_prompt_tokens_total', 'counter', 'Prompt tokens of the generation requests admitted.');
    out.push(`nbx_prompt_tokens_total{${lbl}} ${this.promptTokens}`);
    head('nbx_generation_tokens_total', 'counter', 'Tokens generated.');
    out.push(`nbx_generation_tokens_total{${lbl}} ${this.completionTokens}`);
    head('nbx_generation_tokens_per_second', 'gauge', 'Tokens generated per second over the last 10 seconds.');
    out.push(`nbx_generation_tokens_per_second{${lbl}} ${round(this.tokensPerSecond())}`);
    head('nbx_requests_waiting', 'gauge', 'Requests in the engine queue, not yet in the running batch.');
    out.push(`nbx_requests_waiting{${lbl}} ${g.waiting}`);
    head('nbx_requests_running', 'gauge', 'Sequences in the running batch.');
    out.push(`nbx_requests_running{${lbl}} ${g.running}`);
    head('nbx_requests_in_flight', 'gauge', 'HTTP generation requests being answered.');
    out.push(`nbx_requests_in_flight{${lbl}} ${g.in_flight}`);
    head('nbx_kv_blocks_used', 'gauge', 'KV cache blocks in use.');
    out.push(`nbx_kv_blocks_used{${lbl}} ${g.kv_blocks_used}`);
    head('nbx_kv_blocks_free', 'gauge', 'KV cache blocks free.');
    out.push(`nbx_kv_blocks_free{${lbl}} ${Math.max(0, g.kv_blocks_total - g.kv_blocks_used)}`);
    head('nbx_engine_steps_total', 'counter', 'Engine steps (one forward of the running batch each).');
    out.push(`nbx_engine_steps_total{${lbl}} ${g.engine_steps}`);
    head('nbx_device_memory_reserved_bytes', 'gauge', "Memory reserved by the model's device allocator (source=\"allocator\"), or the process RSS on the CPU (source=\"rss\"); a KV cache on CUDA's virtual memory API is outside it (nbx_kv_cache_mapped_bytes).");
    out.push(`nbx_device_memory_reserved_bytes{${lbl},source="${g.reserved_source}"} ${g.reserved_bytes}`);
    if (g.kv_cache) {
      const kl = `${lbl},backing="${esc(g.kv_cache.backing)}"`;
      head('nbx_kv_cache_reserved_bytes', 'gauge', 'Bytes the paged KV cache holds (VMM: address space reserved; plain: tensor bytes).');
      out.push(`nbx_kv_cache_reserved_bytes{${kl}} ${g.kv_cache.reservedBytes}`);
      head('nbx_kv_cache_mapped_bytes', 'gauge', 'Bytes of the paged KV cache backed by physical memory.');
      out.push(`nbx_kv_cache_mapped_bytes{${kl}} ${g.kv_cache.mappedBytes}`);
    }
    histogram(out, 'nbx_time_to_first_token_seconds', 'Time from a request\'s arrival to its first token.', this.ttft, lbl);
    histogram(out, 'nbx_inter_token_latency_seconds', 'Time between consecutive tokens of a stream.', this.itl, lbl);
    histogram(out, 'nbx_request_duration_seconds', 'Time from a generation request\'s arrival to its last byte.', this.e2e, lbl);
    return `${out.join('\n')}\n`;
  }
}

function round(v: number): string { return Number.isInteger(v) ? String(v) : v.toFixed(3); }

function histogram(out: string[], name: string, help: string, h: Histogram, lbl: string): void {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
  h.bounds.forEach((b, i) => out.push(`${name}_bucket{${lbl},le="${b}"} ${h.counts[i]}`));
  out.push(`${name}_bucket{${lbl},le="+Inf"} ${h.count}`, `${name}_sum{${lbl}} ${h.sum.toFixed(6)}`, `${name}_count{${lbl}} ${h.count}`);
}

/** Parses Prometheus text into { 'name{labels}': value } (for tests and the load generator). */
export function parsePrometheus(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?)\s+(\S+)$/.exec(line);
    if (!m) throw new ValueError('parsePrometheus', `not a Prometheus sample line: ${line}`);
    out.set(m[1]!, Number(m[2]));
  }
  return out;
}
