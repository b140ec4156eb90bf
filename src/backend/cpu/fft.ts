// CPU kernels: fft (placeholder)
export {};
