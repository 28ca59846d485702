// ProcessGroup: the TypeScript handle of a c10d process group (native/src/dist.cpp) for
// data-parallel trainer ranks. Every rank creates one with the same world size and store, then per
// step: allreduceCounts (the loss denominators, before the first micro-batch), backward on its own
// micro-batches, allreduceGrads (before the optimizer step). At start, broadcastParams from rank 0
// (or verifyParams when every rank loaded the same files).
//
// Gradients are SUMMED, not averaged: every loss term is already divided by a token count over the
// whole step (all ranks), so the sum of the ranks' gradients is exactly the single-rank gradient
// of the whole step, whatever the split. Averaging would shrink it by the world size.
//
// Every call blocks the calling thread until all ranks reach it (bun:ffi is synchronous), bounded
// by timeoutMs: a dead or stuck peer becomes a NativeError naming this rank and the call.
import type { Pointer } from "bun:ffi";
import { NativeError } from "../errors.ts";
import { check, loadNative, native } from "./ffi.ts";
import { cstr, type NativeModel, SHARD_MODE_CODE, type ShardMode } from "./model.ts";

export type DistBackend = "gloo" | "nccl";

/** The rendezvous: rank 0 serves a TCPStore at host:port, or every rank opens one store file. */
export type StoreSpec = { type: "tcp"; host: string; port: number } | { type: "file"; path: string };

export interface GroupOptions {
  rank: number;
  worldSize: number;
  store: StoreSpec;
  /** Bounds the rendezvous and every collective (default 10 minutes; c10d's own default is 30). */
  timeoutMs?: number;
  /** Default "gloo" (CPU); "nccl" needs a CUDA build. */
  backend?: DistBackend;
}

export type ReduceOp = "sum" | "min" | "max";

const OPS: Record<ReduceOp, number> = { sum: 0, min: 1, max: 2 };
/** rlx.h dtype codes accepted by rlx_dist_allreduce. */
const RLX_F32 = 0;
const RLX_F64 = 3;
const RLX_I64 = 4;
export const DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024;
export const DEFAULT_TIMEOUT_MS = 600_000;

/** Whether this shim was built with the backend (Gloo needs libgloo-dev at build time). */
export async function distAvailable(backend: DistBackend = "gloo"): Promise<boolean> {
  const lib = await loadNative();
  return check(lib, lib.rlx_dist_available(cstr(backend))) === 1;
}

export class ProcessGroup {
  #handle: Pointer | null;
  readonly rank: number;
  readonly worldSize: number;
  readonly backend: DistBackend;

  private constructor(handle: Pointer, rank: number, worldSize: number, backend: DistBackend) {
    this.#handle = handle;
    this.rank = rank;
    this.worldSize = worldSize;
    this.backend = backend;
  }

  /** Joins the group; returns once every rank has joined (or throws after timeoutMs). */
  static async create(opts: GroupOptions): Promise<ProcessGroup> {
    const lib = await loadNative();
    const backend = opts.backend ?? "gloo";
    const timeout = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isInteger(opts.rank) || !Number.isInteger(opts.worldSize)) {
      throw new NativeError(`rank and worldSize must be integers, got ${opts.rank} and ${opts.worldSize}`);
    }
    const address = opts.store.type === "tcp" ? opts.store.host : opts.store.path;
    const port = opts.store.type === "tcp" ? opts.store.port : 0;
    const handle = lib.rlx_dist_create(
      cstr(backend),
      cstr(opts.store.type),
      cstr(address),
      port,
      opts.rank,
      opts.worldSize,
      Math.round(timeout),
    );
    if (handle === null) {
      const message = String(lib.rlx_last_error());
      const fix = message.includes("built without")
        ? "install libgloo-dev and rebuild the shim (`bun build.ts --shim`)"
        : "start every rank with the same world size and store within the timeout; a file store must be a fresh path";
      throw new NativeError(message, { fix });
    }
    return new ProcessGroup(handle as Pointer, opts.rank, opts.worldSize, backend);
  }

  get handle(): Pointer {
    if (this.#handle === null) throw new NativeError("this process group has been freed");
    return this.#handle;
  }

  /** Sums every parameter's gradient over the ranks in place (see the file header: sum, not mean). */
  allreduceGrads(model: NativeModel, bucketBytes = DEFAULT_BUCKET_BYTES): void {
    this.#call(native().rlx_dist_allreduce_grads(this.handle, model.handle, bucketBytes));
  }

  /** Reduces values in place over the ranks: BigInt64Array exactly (int64), Float64Array and
   * Float32Array as floating point. Every rank must pass the same length. */
  allreduce(values: BigInt64Array | Float64Array | Float32Array, op: ReduceOp = "sum"): void {
    const dtype = values instanceof BigInt64Array ? RLX_I64 : values instanceof Float64Array ? RLX_F64 : RLX_F32;
    this.#call(native().rlx_dist_allreduce(this.handle, values, dtype, values.length, OPS[op]));
  }

  /** The step's token counts (loss denominators' numerators), summed over the ranks in place. */
  allreduceCounts(counts: BigInt64Array | Float64Array): void {
    this.allreduce(counts, "sum");
  }

  /** Copies root's parameters to every rank, bit for bit. */
  broadcastParams(model: NativeModel, root = 0): void {
    this.#call(native().rlx_dist_broadcast_params(this.handle, model.handle, root));
  }

  /** Throws unless every rank holds bit-identical parameters. */
  verifyParams(model: NativeModel): void {
    this.#call(
      native().rlx_dist_verify_params(this.handle, model.handle),
      "load the same weights on every rank, or broadcastParams from rank 0",
    );
  }

  /** Cuts the model into slices over this group (rlx.h, "Sharded training"): right after
   * loading, before its optimizer is created. Every later train and optimizer step is collective. */
  shard(model: NativeModel, mode: Exclude<ShardMode, "none">): void {
    this.#call(native().rlx_model_shard(model.handle, this.handle, SHARD_MODE_CODE[mode]), "shard right after loading");
    model.shardGroup = this.handle;
  }

  /** A group of some of this group's ranks (ascending, this rank among them), e.g. a
   * context-parallel group. Only they call it, and every rank makes its subgroups in one order. */
  subgroup(ranks: readonly number[]): ProcessGroup {
    const handle = native().rlx_dist_subgroup(this.handle, Int32Array.from(ranks), ranks.length);
    if (handle === null) throw new NativeError(String(native().rlx_last_error()));
    return new ProcessGroup(handle as Pointer, ranks.indexOf(this.rank), ranks.length, this.backend);
  }

  /** Splits each of the model's train rows along the sequence over this group's ranks (context
   * parallelism, docs/scaling.md "Long context"): every rank of it then trains the same rows. */
  splitRows(model: NativeModel): void {
    model.contextGroup = this.handle;
  }

  barrier(): void {
    this.#call(native().rlx_dist_barrier(this.handle));
  }

  /** Idempotent. Leaves the group; a failed group can be freed too. */
  free(): void {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#handle = null;
    check(native(), native().rlx_dist_free(handle));
  }

  [Symbol.dispose](): void {
    this.free();
  }

  #call(
    result: number,
    fix = "end every rank and restart them from the last checkpoint (rlx train --resume); the failing rank's log says why it stopped",
  ): void {
    if (result === -1) throw new NativeError(String(native().rlx_last_error()), { fix });
  }
}
