// Native smoke test: the shim loads, reports what it runs on, and multiplies matrices through
// libtorch, with a BLAS that is not the reference one; bad arguments are errors, not crashes.
import { expect, test } from "bun:test";
import { NativeError } from "../../src/errors.ts";
import { benchMatmul, runtimeInfo } from "../../src/native/runtime.ts";
import { ABI_VERSION } from "../../src/native/symbols.ts";

test("runtime info names libtorch, threads and a fast BLAS", async () => {
  const info = await runtimeInfo();
  expect(info.abi).toBe(ABI_VERSION);
  expect(info.torch_version).toMatch(/^\d+\.\d+/);
  expect(info.threads).toBeGreaterThanOrEqual(1);
  expect(info.blas).not.toBe("reference");
  // set through libc before the shim loaded, so libgomp does not spin-wait (ffi.ts)
  expect(info.omp_wait_policy).toBe(process.env.OMP_WAIT_POLICY ?? "PASSIVE");
});

test("a matmul runs through the shim", async () => {
  // The rate itself is for `rlx doctor` and bench/, not a test assertion (noisy machines).
  const gflops = await benchMatmul(256, 2);
  expect(Number.isFinite(gflops) && gflops > 0).toBe(true);
});

test("a bad call throws NativeError with the shim's message and the process survives", async () => {
  await expect(benchMatmul(-3, 1)).rejects.toThrow(NativeError);
  await expect(benchMatmul(-3, 1)).rejects.toThrow("n must be in 1..16384");
  expect(await benchMatmul(8, 1)).toBeGreaterThan(0);
});
