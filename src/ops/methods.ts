// Tensor methods: each is the function form with `this` as the first argument (t.add(b) is add(t, b)).
// Installed from tables so the method and the function can never drift apart.

import { Tensor } from '../tensor/tensor.js';
import { ValueError } from '../errors.js';

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

/** In-place variants (add_, mul_, ...): compute, then copy into this tensor's storage. */
export function installInplace(names: string[], copyInto: (dst: Tensor, src: Tensor) => void): void {
  for (const name of names) {
    const base = name.slice(0, -1);
    Object.defineProperty(Tensor.prototype, name, {
      value: function (this: Tensor, ...args: unknown[]) {
        const f = (this as unknown as Record<string, AnyFn>)[base];
        if (!f) throw new ValueError(name, `no out-of-place ${base} to derive ${name} from`);
        const r = f.apply(this, args) as Tensor;
        copyInto(this, r);
        r.dispose();
        return this;
      },
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
