// Typed wrappers over the runtime calls of the shim: what libtorch and BLAS this process runs on.
import { check, loadNative } from "./ffi.ts";

export interface RuntimeInfo {
  abi: number;
  torch_version: string;
  threads: number;
  cores: number;
  blas: string;
  blas_path: string;
  cuda: boolean;
  mkldnn: boolean;
  cxx11_abi: number;
  /** As libgomp saw it at load; ffi.ts makes it PASSIVE unless the user set it. */
  omp_wait_policy: string;
}

export async function runtimeInfo(): Promise<RuntimeInfo> {
  const lib = await loadNative();
  return JSON.parse(String(check(lib, lib.rlx_runtime_info()))) as RuntimeInfo;
}

/** Measured float32 matmul rate in GFLOP/s (n x n, iters products). */
export async function benchMatmul(n = 1024, iters = 10): Promise<number> {
  const lib = await loadNative();
  return check(lib, lib.rlx_bench_matmul(n, iters));
}
