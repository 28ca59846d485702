// The element types weights and states are stored in, and their sizes: shared by the shim's
// wrappers (src/native/) and the readers of files the shim wrote (a sharded checkpoint's slices),
// which must not load native code (rlx check).
export type DType = "f32" | "bf16" | "f16" | "f64";

export const DTYPE_BYTES: Record<DType, number> = { f32: 4, bf16: 2, f16: 2, f64: 8 };
