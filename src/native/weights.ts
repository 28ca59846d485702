// Weight transfer over c10d (native/src/weights_*.cpp; docs/engines.md, "Weights in memory"): the
// trainer's rank 0 sends each step's weights over one channel per policy server, a two-rank group
// in which it is rank 0 and serves the rendezvous store; each server's WeightReceiver joins as
// rank 1. A channel per server (not one group for all) keeps a dead server's failure to its own
// channel, the others finishing the transfer: a c10d group cannot shrink.
//
// The sending side blocks (the trainer has nothing else to do meanwhile); the receiving side never
// does: the receiver's native thread joins and receives, and the engine polls it between decode
// steps (src/engine/reloads.ts).
import type { Pointer } from "bun:ffi";
import { NativeError } from "../errors.ts";
import type { DType } from "../data/dtypes.ts";
import type { DistBackend, ProcessGroup } from "./dist.ts";
import { check, loadNative, native } from "./ffi.ts";
import { cstr, DTYPE_CODE, type LoraSpec, NativeModel } from "./model.ts";

export const DEFAULT_TRANSFER_BUCKET = 64 * 1024 * 1024;
const RLX_SEND_CHANGED = 1;

/** A run's weight channels: where the trainer serves their stores (src/processes/weight_channels.ts). */
export interface ChannelPlan {
  host: string;
  /** One per policy process, in the order of the policy's servers. */
  ports: number[];
  backend: DistBackend;
  timeoutMs: number;
  /** With [model.lora]: the adapters' shape (only they travel). */
  lora?: AdapterShape;
  /** SGLang as the engine: each port is an update group's (engine_group.ts) rather than a channel's. */
  engine?: {
    kind: "sglang";
    /** One per server: the group_name its /init_weights_update_group and updates carry. */
    groupNames: string[];
    /** Where the trainer writes the parameters' names, shapes and dtypes (EngineManifest) before it joins. */
    manifest: string;
  };
}

/** The shape of a run's LoRA adapters, as a policy needs it to receive them. */
export type AdapterShape = Omit<LoraSpec, "dropout">;

export interface SendResult {
  /** The bytes of the tensors sent (with changedOnly, those that changed). */
  bytes: number;
  /** Indices of the channels that failed: one that broke mid-transfer refuses later calls, one
   * whose server refused the header (another version, dtype or size) stays usable. */
  failed: number[];
  /** Each failed channel's reason, joined. */
  error: string;
}

/**
 * Sends the model's weights as `dtype` (a LoRA model's adapters, at their own dtype), stamped
 * `version`, over every channel; with `changedOnly`, only the tensors whose bytes changed since each
 * channel's last transfer. On a model sharded "full" every rank calls it, only the sender with
 * channels (the others take part in the gathers).
 */
export function sendWeights(
  model: NativeModel,
  channels: ProcessGroup[],
  options: { dtype: DType; version: number; bucketBytes?: number; changedOnly?: boolean },
): SendResult {
  const failed = new Int32Array(Math.max(1, channels.length));
  const sent = new BigInt64Array(1);
  const handles = new BigUint64Array(Math.max(1, channels.length));
  channels.forEach((c, i) => (handles[i] = BigInt(c.handle as unknown as number)));
  const lib = native();
  const result = lib.rlx_weights_send(
    model.handle,
    handles,
    channels.length,
    DTYPE_CODE[options.dtype],
    options.version,
    options.bucketBytes ?? DEFAULT_TRANSFER_BUCKET,
    options.changedOnly ? RLX_SEND_CHANGED : 0,
    failed,
    sent,
  );
  const count = check(lib, result);
  return {
    bytes: Number(sent[0]),
    failed: [...failed.subarray(0, channels.length)].flatMap((f, i) => (f ? [i] : [])),
    error: count > 0 ? String(lib.rlx_last_error()) : "",
  };
}

export type ReceiveState = "busy" | "ready" | "idle";

/** A server's end of its weight channel (rank 1); see the file header. */
export class WeightReceiver {
  #handle: Pointer | null;
  readonly where: string;
  /** The run's adapters, when only they travel (src/engine/reloads.ts gives a base model empty ones). */
  readonly lora: AdapterShape | undefined;

  private constructor(handle: Pointer, where: string, lora: AdapterShape | undefined) {
    this.#handle = handle;
    this.where = where;
    this.lora = lora;
  }

  /** Starts joining the channel whose store the trainer serves at host:port; returns at once. */
  static async open(options: {
    host: string;
    port: number;
    backend?: DistBackend;
    timeoutMs: number;
    lora?: AdapterShape;
  }): Promise<WeightReceiver> {
    const lib = await loadNative();
    const handle = check(
      lib,
      lib.rlx_receiver_open(cstr(options.backend ?? "gloo"), cstr(options.host), options.port, options.timeoutMs),
    );
    return new WeightReceiver(handle as Pointer, `tcp://${options.host}:${options.port}`, options.lora);
  }

  get handle(): Pointer {
    if (this.#handle === null) throw new NativeError("this weight receiver has been closed");
    return this.#handle;
  }

  /**
   * Starts receiving `version` (on the native thread) for the served model `like` (alive until
   * taken): full weights into `into` when given (a model of that shape no longer used, which the
   * receiver takes over: it must not be used or freed after), else a new one; a LoRA model's
   * adapters into staging copies (no `into`).
   */
  start(like: NativeModel, version: number, into?: NativeModel): void {
    const target = into?.handle ?? null;
    check(native(), native().rlx_receiver_start(this.handle, like.handle, target, version));
    into?.disown();
  }

  /** "busy" while joining or receiving; throws the transfer's failure. */
  poll(): ReceiveState {
    const state = native().rlx_receiver_poll(this.handle);
    if (state === -1)
      throw new NativeError(String(native().rlx_last_error()), {
        fix: "see the trainer's log (logs/trainer.log) for its side of the transfer",
      });
    return state === 1 ? "ready" : state === 2 ? "idle" : "busy";
  }

  /** The received model of a full-weights transfer, once poll() said "ready"; the caller owns it. */
  take(like: NativeModel): NativeModel {
    const handle = check(native(), native().rlx_receiver_take(this.handle));
    return NativeModel.adopt(handle as Pointer, like);
  }

  /** A LoRA model's transfer, once poll() said "ready": copies the adapters into `served` (the model start() was given). */
  takeAdapters(served: NativeModel): void {
    check(native(), native().rlx_receiver_take_adapters(this.handle, served.handle));
  }

  /** Idempotent; a transfer in progress is abandoned. */
  close(): void {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#handle = null;
    check(native(), native().rlx_receiver_free(handle));
  }
}
