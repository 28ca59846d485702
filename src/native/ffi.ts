// The only file in rlx that calls dlopen. Loads the shim once, on first use (so `rlx --help` and
// config errors never pay libtorch's ~0.5 s start-up), checks the ABI version, sets the thread
// count, and turns failed calls into NativeError.
//
// Before the shim, libc's setenv puts OMP_WAIT_POLICY=PASSIVE into the real environment (unless
// the user set it): libgomp reads it once, when the shim pulls it in, and its default spin-waiting
// makes every OpenMP region 10-60x slower whenever another process (a trainer beside a policy
// server, another test) wants the same cores. (A short spin, GOMP_SPINCOUNT=30000, made a
// batch-64 decode step 40% faster alone, but the three-env RL step with trainer.share_cores off
// took 11.4 s against 4.6 s, and GOMP_SPINCOUNT=10000 with share_cores on doubled the trainer's
// compute: experiments/bench_history.md, "Page faults" and "Decode on the CPU".) Bun's process.env does not
// reach libc's environ, hence the second, tiny dlopen. The heap's settings are the shim's own
// (native/src/heap.h), made when it loads.
//
// Which shim: src/native/shim_path.ts ($RLX_SHIM, the shipped one, or one compiled for this node's
// libtorch). A compiled binary's embedded copy is written by Bun to /tmp and dlopened there.
import { dlopen, FFIType, type ConvertFns } from "bun:ffi";
import { cpus } from "node:os";
import { NativeError } from "../errors.ts";
import { shimPath } from "./shim_path.ts";
import { ABI_VERSION, symbols } from "./symbols.ts";

export type Rlx = ConvertFns<typeof symbols>;

let loaded: Rlx | null = null;
let loadedPath = "";

/** The environment the shim's OpenMP reads, set before it loads (see the file header). */
function setOpenMpWaitPolicy(): void {
  const libc = dlopen("libc.so.6", {
    setenv: { args: [FFIType.cstring, FFIType.cstring, FFIType.i32], returns: FFIType.i32 },
  });
  if (!process.env.OMP_WAIT_POLICY) libc.symbols.setenv(Buffer.from("OMP_WAIT_POLICY\0"), Buffer.from("PASSIVE\0"), 0);
  libc.close();
}

/** Loads the shim (once) and returns its functions. `threads` <= 0 means one per core. */
export async function loadNative(threads = Number(process.env.RLX_THREADS ?? 0)): Promise<Rlx> {
  if (loaded) return loaded;
  const path = await shimPath();
  setOpenMpWaitPolicy();
  let lib: Rlx;
  try {
    lib = dlopen(path, symbols).symbols as Rlx;
  } catch (err) {
    throw new NativeError(`cannot load the native shim ${path}: ${(err as Error).message}`, {
      fix: "run `rlx doctor`; libtorch must be installed where the shim was built against it (`bash scripts/setup.sh`)",
    });
  }
  const abi = lib.rlx_abi_version();
  if (abi !== ABI_VERSION) {
    throw new NativeError(`native shim ABI ${abi} does not match this build's ${ABI_VERSION}`, {
      fix: "rebuild: `bun build.ts`",
    });
  }
  check(lib, lib.rlx_set_threads(threads > 0 ? threads : cpus().length));
  loaded = lib;
  loadedPath = path;
  return lib;
}

/** The path the shim was loaded from ("" before loadNative()). */
export function loadedShimPath(): string {
  return loadedPath;
}

/** The loaded shim; throws if loadNative() has not run yet. */
export function native(): Rlx {
  if (!loaded) throw new NativeError("native shim used before loadNative()");
  return loaded;
}

/** Throws the shim's last error when a call returned its failure value (-1, null or NaN). */
export function check<T>(lib: Rlx, result: T): NonNullable<T> {
  const failed = result === null || result === -1 || (typeof result === "number" && Number.isNaN(result));
  if (failed) throw new NativeError(String(lib.rlx_last_error()) || "native call failed without a message");
  return result as NonNullable<T>;
}
