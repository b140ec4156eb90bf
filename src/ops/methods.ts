// Tensor methods: each is the function form with `this` as the first argument (t.add(b) is add(t, b)).
// Installed from tables so the method and the function can never drift apart.

import { Tensor } from '../tensor/tensor.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyFn = (...args: any[]) => any;

/** Installs `fns` as methods (name → function taking the tensor first). */
export function installMethods(fns: Record<string, AnyFn>): void {
  for (const [name, fn] of Object.entries(fns)) {
    if (name in Tensor.prototype) continue; // view methods defined on the class win
    Object.defineProperty(Tensor.prototype, name, {
      value: function (this: Tensor, ...args: unknown[]) { return fn(this, ...args); },
      writable: true, configurable: true,
    });
  }
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    [method: string]: any;
  }
}
