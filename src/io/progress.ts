// A small byte-progress reporter for loading weights: a one-line bar on stderr, redrawn in place,
// only when stderr is a terminal and the job is big enough to be worth watching (logs and pipes
// stay clean). The read rate (MB/s, MB = 10^6 bytes) is measured either way, for callers to log.

export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(s: string): unknown;
}

export interface ProgressOptions {
  /** Where to draw (default process.stderr). */
  stream?: ProgressStream;
  /** Show the bar only for jobs over this many bytes (default 256 MiB). */
  minBytes?: number;
  /** true/false forces the bar on/off; default: on for a TTY when totalBytes > minBytes. */
  show?: boolean;
  /** Least time between redraws (default 100 ms). */
  intervalMs?: number;
}

export interface ProgressSummary {
  bytes: number;
  seconds: number;
  /** Decimal megabytes per second. */
  mbPerSec: number;
}

export const DEFAULT_PROGRESS_MIN_BYTES = 256 * 1024 * 1024;

const MB = 1e6;

/** "1.23 GB" / "456.7 MB" / "12 kB": decimal units, as the rate. */
export function formatBytes(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(0)} kB`;
  return `${n} B`;
}

export function formatRate(bytes: number, seconds: number): string {
  return `${seconds > 0 ? (bytes / MB / seconds).toFixed(1) : '-'} MB/s`;
}

export class Progress {
  readonly label: string;
  readonly totalBytes: number;
  /** Whether the bar is drawn. */
  readonly visible: boolean;
  private readonly stream: ProgressStream;
  private readonly intervalMs: number;
  private readonly start = performance.now();
  private done = 0;
  private lastDraw = -Infinity;
  private finished: ProgressSummary | undefined;

  constructor(label: string, totalBytes: number, opts: ProgressOptions = {}) {
    this.label = label;
    this.totalBytes = Math.max(0, totalBytes);
    this.stream = opts.stream ?? process.stderr;
    this.intervalMs = opts.intervalMs ?? 100;
    this.visible = opts.show ?? (this.stream.isTTY === true && this.totalBytes > (opts.minBytes ?? DEFAULT_PROGRESS_MIN_BYTES));
  }

  get bytesDone(): number { return this.done; }

  get seconds(): number { return this.finished ? this.finished.seconds : (performance.now() - this.start) / 1000; }

  get mbPerSec(): number { return this.seconds > 0 ? this.done / MB / this.seconds : 0; }

  /** Set the absolute number of bytes done. */
  update(bytesDone: number): void {
    if (this.finished) return;
    this.done = Math.min(Math.max(bytesDone, this.done), this.totalBytes || bytesDone);
    this.maybeDraw();
  }

  /** Add bytes to the count (for callers that see one chunk at a time). */
  advance(bytes: number): void {
    this.update(this.done + bytes);
  }

  /** Stop: draw the final line (ending it with a newline) and return the totals. Idempotent. */
  finish(): ProgressSummary {
    if (this.finished) return this.finished;
    const seconds = (performance.now() - this.start) / 1000;
    this.finished = { bytes: this.done, seconds, mbPerSec: seconds > 0 ? this.done / MB / seconds : 0 };
    if (this.visible) this.stream.write(`\r${this.line()}\x1b[K\n`);
    return this.finished;
  }

  private maybeDraw(): void {
    if (!this.visible) return;
    const now = performance.now();
    if (now - this.lastDraw < this.intervalMs && this.done < this.totalBytes) return;
    this.lastDraw = now;
    this.stream.write(`\r${this.line()}\x1b[K`);
  }

  private line(): string {
    const frac = this.totalBytes > 0 ? this.done / this.totalBytes : 1;
    const tail = ` ${(frac * 100).toFixed(0).padStart(3)}% ${formatBytes(this.done)}/${formatBytes(this.totalBytes)} ${formatRate(this.done, this.seconds)}`;
    // Fit the bar to the terminal width; the label and numbers take what they need.
    const width = Math.max(10, Math.min(40, (this.stream.columns ?? 80) - this.label.length - tail.length - 4));
    const full = Math.round(frac * width);
    return `${this.label} [${'#'.repeat(full)}${'.'.repeat(width - full)}]${tail}`;
  }
}

/** Convenience: a Progress for `label` over `totalBytes`. */
export function createProgress(label: string, totalBytes: number, opts?: ProgressOptions): Progress {
  return new Progress(label, totalBytes, opts);
}
