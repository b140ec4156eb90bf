// CPU kernels: linalg (placeholder)
export {};
