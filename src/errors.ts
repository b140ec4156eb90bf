// Typed errors. Every error names the operation that raised it, so a user reading a stack-less
// message (e.g. from the conformance runner or a server log) knows where it came from.
// The class tells *what kind* of mistake it was; `instanceof` is the stable API.

export class NbxError extends Error {
  /** The operation (PyTorch name, e.g. "gather" or "nn.functional.conv2d") or subsystem. */
  readonly op: string;
  constructor(op: string, message: string) {
    super(`${op}: ${message}`);
    this.op = op;
    this.name = new.target.name;
  }
}

/** Shapes that do not fit together (broadcasting, matmul inner dims, view of a non-viewable layout). */
export class ShapeError extends NbxError {}
/**
 * A dtype the operation does not accept, or a cast the rules forbid. An int64 tensor met where a float
 * was wanted usually came from integral JS numbers (`tensor(9.0)` is `tensor(9)`), so the message says so.
 */
export class DTypeError extends NbxError {
  constructor(op: string, message: string) {
    super(op, /\b(int64|Long)\b/.test(message) && /float|Float|not implemented/.test(message) ? message + INT64_HINT : message);
  }
}
const INT64_HINT = ' (integral JS numbers make int64 tensors, as Python ints do: nbx.tensor(9.0) is nbx.tensor(9); ' +
  "pass { dtype: nbx.float32 }, call .float(), or write a float scalar as nbx.scalar.float(9))";
/** Tensors on different devices in one operation, or a device that is not available. */
export class DeviceError extends NbxError {}
/** An index or dim out of range. */
export class IndexError extends NbxError {}
/** A tensor used after `dispose()`. */
export class DisposedError extends NbxError {}
/** An argument value PyTorch would reject (bad mode string, negative size, ...). */
export class ValueError extends NbxError {}
/** A supported operation asked for something this engine or device does not implement: never computed silently. */
export class UnsupportedError extends NbxError {}
/** A documented limitation of a device (float64 or int64 on WebGPU, say): the conformance runner counts it as skipped. */
export class DeviceLimitError extends UnsupportedError {}
/**
 * Work that a CUDA graph capture cannot record (a read of a device value on the host, a host-to-device
 * copy whose bytes would be re-read at every replay, a synchronization, autotuning): raised during the
 * capture, which is then abandoned, never left out of the graph silently.
 */
export class GraphCaptureError extends UnsupportedError {}
/** Device memory exhausted; the message says what was requested and what to try. */
export class OutOfMemoryError extends NbxError {}
/** A server-side queue that holds as many requests as it may (the engine's maxQueue): retry later (HTTP 429). */
export class QueueFullError extends NbxError {}
/**
 * The paged KV cache has fewer free blocks than a sequence needs; the message and the fields say how many
 * were needed and how many are free (of how many in all).
 */
export class KVCacheFullError extends NbxError {
  constructor(op: string, message: string, readonly needed: number, readonly free: number, readonly total: number) { super(op, message); }
}
/** A file that breaks its format's rules (safetensors, profiles, caches). */
export class FormatError extends NbxError {}
/** A fault reported by a device runtime (CUDA sticky error, lost WebGPU device). */
export class DeviceFaultError extends NbxError {}
/**
 * A state dict that does not fit a module (nn.Module.load_state_dict): every missing key, unexpected key
 * and shape mismatch at once, so one run tells the user everything to fix.
 */
export class StateDictError extends NbxError {
  constructor(op: string, message: string,
    readonly missing: readonly string[],
    readonly unexpected: readonly string[],
    readonly mismatched: readonly { key: string; expected: readonly number[]; got: readonly number[] }[]) {
    super(op, message);
  }
}
/** A parameter or buffer declared on the meta device (shape and dtype only) was read before anything was loaded into it. */
export class MetaTensorError extends NbxError {}
/** A file or folder that cannot be used (missing, a folder where a file was expected, no permission). */
export class FileError extends NbxError {
  constructor(op: string, message: string, readonly code: string, readonly path: string) { super(op, message); }
}

const FS_REASONS: Record<string, string> = {
  ENOENT: 'no such file or folder', EISDIR: 'is a folder, where a file was expected', ENOTDIR: 'a path component is not a folder',
  EACCES: 'permission denied', EPERM: 'operation not permitted', EMFILE: 'too many open files', ENOSPC: 'no space left on the device',
};
/**
 * Node's file-system errors (ENOENT and the like, which carry no hint of what the library was doing)
 * as a FileError naming the operation and the path; anything else is returned unchanged. The one place
 * every file-reading entry point turns errno codes into library errors.
 */
export function fileErrorOf(op: string, path: string, e: unknown): unknown {
  const code = (e as { code?: unknown } | null)?.code;
  if (e instanceof NbxError || typeof code !== 'string' || !/^E[A-Z]+$/.test(code)) return e;
  return new FileError(op, `${path}: ${FS_REASONS[code] ?? (e as Error).message} (${code})`, code, path);
}
