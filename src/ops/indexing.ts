// Operation family: indexing. (Placeholder: filled in by its owner.)
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Fn = (...args: any[]) => any;
/** nbx.nn.functional.X entries of this family. */
export const functional: Record<string, Fn> = {};
/** Tensor methods of this family (tensor as first argument). */
export const methods: Record<string, Fn> = {};
