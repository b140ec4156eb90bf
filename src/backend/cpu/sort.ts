// CPU kernels: sort (placeholder)
export {};
