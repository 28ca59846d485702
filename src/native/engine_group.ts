// An external engine's weight-update group (native/src/weights_broadcast.cpp; docs/engines.md,
// "Weights in memory"): the c10d group SGLang's POST /init_weights_update_group forms, which the
// trainer's rank 0 joins as rank 0 (serving its store) and broadcasts every parameter on, whole,
// converted to the engine's dtype, in the model's order. The engine's request names them in that
// order (EngineManifest, which the trainer writes for the orchestrator).
//
// Joining and broadcasting block the calling thread (bun:ffi is synchronous): the trainer has
// nothing else to do meanwhile, and the orchestrator, which makes the engine's HTTP requests, is
// another process.
import type { Pointer } from "bun:ffi";
import type { DType } from "../data/dtypes.ts";
import { NativeError } from "../errors.ts";
import type { DistBackend } from "./dist.ts";
import { check, loadNative, native } from "./ffi.ts";
import { cstr, DTYPE_CODE, type NativeModel } from "./model.ts";

/** The dtype names the engines' requests carry (torch's). */
export const TORCH_DTYPE: Record<DType, string> = { f32: "float32", bf16: "bfloat16", f16: "float16", f64: "float64" };

/** What an update request names, in the order the trainer broadcasts: HF names, shapes, torch dtypes. */
export interface EngineManifest {
  names: string[];
  dtypes: string[];
  shapes: number[][];
}

export function engineManifest(model: NativeModel, dtype: DType): EngineManifest {
  const params = model.params();
  return {
    names: params.map((p) => p.name),
    dtypes: params.map(() => TORCH_DTYPE[dtype]),
    shapes: params.map((p) => [...p.shape]),
  };
}

export interface EngineGroupOptions {
  backend: DistBackend;
  host: string;
  port: number;
  rank: number;
  worldSize: number;
  groupName: string;
  timeoutMs: number;
}

export class EngineGroup {
  #handle: Pointer | null;

  private constructor(
    handle: Pointer,
    readonly where: string,
  ) {
    this.#handle = handle;
  }

  /** Returns once every rank has joined; throws after timeoutMs naming the store. */
  static async join(o: EngineGroupOptions): Promise<EngineGroup> {
    const lib = await loadNative();
    const where = `tcp://${o.host}:${o.port} (group ${o.groupName})`;
    const handle = lib.rlx_engine_group_join(
      cstr(o.backend),
      cstr(o.host),
      o.port,
      o.rank,
      o.worldSize,
      cstr(o.groupName),
      Math.round(o.timeoutMs),
    );
    if (handle === null)
      throw new NativeError(String(lib.rlx_last_error()), {
        fix: "every rank must join with the same world size, group name and backend within the timeout",
      });
    return new EngineGroup(handle as Pointer, where);
  }

  get handle(): Pointer {
    if (this.#handle === null) throw new NativeError(`the update group ${this.where} has been freed`);
    return this.#handle;
  }

  /** Broadcasts `data` from `root` in place (an engine stand-in receives with it). */
  broadcastBytes(data: Uint8Array, root = 0): void {
    check(native(), native().rlx_group_broadcast_bytes(this.handle, data, data.byteLength, root));
  }

  free(): void {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#handle = null;
    check(native(), native().rlx_dist_free(handle));
  }
}

/**
 * Broadcasts the model's parameters as `dtype` on every group (rank 0 of each); on a model sharded
 * "full" the other ranks call it with no groups (their part in the gathers). Returns the indices
 * of the groups that failed and why.
 */
export function engineBroadcast(
  model: NativeModel,
  groups: EngineGroup[],
  dtype: DType,
): { failed: number[]; error: string } {
  const failed = new Int32Array(Math.max(1, groups.length));
  const handles = new BigUint64Array(Math.max(1, groups.length));
  groups.forEach((g, i) => (handles[i] = BigInt(g.handle as unknown as number)));
  const lib = native();
  const count = check(lib, lib.rlx_engine_broadcast(model.handle, handles, groups.length, DTYPE_CODE[dtype], failed));
  return {
    failed: [...failed.subarray(0, groups.length)].flatMap((f, i) => (f ? [i] : [])),
    error: count > 0 ? String(lib.rlx_last_error()) : "",
  };
}
