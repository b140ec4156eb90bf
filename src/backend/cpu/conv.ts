// CPU kernels: conv (placeholder)
export {};
