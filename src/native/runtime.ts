// Typed wrappers over the runtime calls of the shim: what libtorch and BLAS this process runs on.
import { check, loadedShimPath, loadNative, native } from "./ffi.ts";
import { cstr } from "./model.ts";

export interface RuntimeInfo {
  abi: number;
  torch_version: string;
  /** The libtorch_cpu.so this process loaded. */
  torch_lib: string;
  threads: number;
  cores: number;
  blas: string;
  blas_path: string;
  /** A GPU is usable (a CUDA libtorch on a machine with a driver and a device). */
  cuda: boolean;
  /** The shim was built against a CUDA libtorch. */
  cuda_build: boolean;
  /** c10d's NCCL backend is compiled in (usable where a GPU is). */
  nccl_built: boolean;
  /** CUDA runtime and cuDNN versions as libtorch reports them (e.g. 13000, 92400); 0 without a GPU. */
  cuda_runtime: number;
  cudnn: number;
  gpus: Array<{ name: string; memory_gib: number; capability: string }>;
  mkldnn: boolean;
  cxx11_abi: number;
  /** As libgomp saw it at load; ffi.ts makes it PASSIVE unless the user set it. */
  omp_wait_policy: string;
}

export async function runtimeInfo(): Promise<RuntimeInfo & { shim: string }> {
  const lib = await loadNative();
  return { ...(JSON.parse(String(check(lib, lib.rlx_runtime_info()))) as RuntimeInfo), shim: loadedShimPath() };
}

/** This process's intra-op threads now (the shim loaded). */
export function currentThreads(): number {
  const lib = native();
  return (JSON.parse(String(check(lib, lib.rlx_runtime_info()))) as RuntimeInfo).threads;
}

/** Measured float32 matmul rate in GFLOP/s (n x n, iters products). */
export async function benchMatmul(n = 1024, iters = 10): Promise<number> {
  const lib = await loadNative();
  return check(lib, lib.rlx_bench_matmul(n, iters));
}

/** The CUDA caching allocator of `device` in GiB (all 0 on the CPU); resetPeak starts a new peak. */
export async function deviceMemory(
  device: string,
  resetPeak = false,
): Promise<{ allocated: number; peak: number; reserved: number }> {
  const lib = await loadNative();
  const out = new BigInt64Array(3);
  check(lib, lib.rlx_device_memory(cstr(device), resetPeak ? 1 : 0, out));
  const gib = (i: number) => Number(out[i]!) / 2 ** 30;
  return { allocated: gib(0), peak: gib(1), reserved: gib(2) };
}
