// CPU kernels: nn (placeholder)
export {};
