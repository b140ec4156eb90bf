// The typed arrays tensor storage is made of. A leaf module: the host buffer pool (memory/host_pool.ts),
// which dtypes.ts allocates from, names the type without importing dtypes.ts back.

export type StorageArray = Uint8Array | Int8Array | Int16Array | Int32Array | BigInt64Array | Uint16Array | Float32Array | Float64Array;
