// CPU kernels: resample (placeholder)
export {};
