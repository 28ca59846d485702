// The TypeScript mirror of native/include/rlx.h: one entry per C function, same order, same
// arity. test/native/abi.test.ts parses rlx.h and checks that both agree.
import { FFIType } from "bun:ffi";

const { i32, f64, cstring } = FFIType;

export const symbols = {
  // runtime
  rlx_abi_version: { args: [], returns: i32 },
  rlx_last_error: { args: [], returns: cstring },
  rlx_set_threads: { args: [i32], returns: i32 },
  rlx_runtime_info: { args: [], returns: cstring },
  rlx_bench_matmul: { args: [i32, i32], returns: f64 },
} as const;

export const ABI_VERSION = 1;
