// CPU kernels: shape (placeholder)
export {};
