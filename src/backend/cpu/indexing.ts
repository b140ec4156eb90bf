// CPU kernels: indexing (placeholder)
export {};
