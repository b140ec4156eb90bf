// CPU kernels: pool (placeholder)
export {};
