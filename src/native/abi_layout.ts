// The bytes of rlx.h's input structs, rlx_batch, rlx_loss and its table's rlx_rl_loss. bun:ffi has no struct type, so each
// struct is packed here by hand from one field list in rlx.h's order: every field is 8 bytes (an
// int64, a double or a pointer), the first one the struct's size. test/native/abi.test.ts compares
// these lists with the shim's own rlx_abi_layout(), field by field.
import { ptr } from "bun:ffi";

type FieldKind = "i64" | "f64" | "ptr";
type FieldList = readonly (readonly [name: string, kind: FieldKind])[];

export const BATCH_FIELDS = [
  ["size", "i64"],
  ["n_tokens", "i64"],
  ["n_samples", "i64"],
  ["n_envs", "i64"],
  ["distill_k", "i64"],
  ["token_ids", "ptr"],
  ["sample_lengths", "ptr"],
  ["sample_parents", "ptr"],
  ["loss_mask", "ptr"],
  ["advantages", "ptr"],
  ["inference_logprobs", "ptr"],
  ["temperatures", "ptr"],
  ["ref_logprobs", "ptr"],
  ["rl_weights", "ptr"],
  ["ce_weights", "ptr"],
  ["ref_kl_weights", "ptr"],
  ["distill_weights", "ptr"],
  ["distill_betas", "ptr"],
  ["distill_ids", "ptr"],
  ["distill_logprobs", "ptr"],
  ["env_index", "ptr"],
  ["shard_group", "ptr"],
  ["activation_checkpointing", "i64"],
  ["sample_losses", "ptr"],
  ["context_group", "ptr"],
] as const satisfies FieldList;

/** One rl loss's settings, as rlx_loss holds its own (code 0) and each rlx_rl_loss entry its own. */
const RL_SETTINGS = [
  ["constant", "f64"],
  ["mask_low", "f64"],
  ["mask_high", "f64"],
  ["adv_tau", "f64"],
  ["kl_tau", "f64"],
  ["ipo_threshold", "f64"],
  ["is_low", "f64"],
  ["is_high", "f64"],
  ["is_cap", "f64"],
] as const satisfies FieldList;
const CLIP_RANGE = [
  ["clip_low", "f64"],
  ["clip_high", "f64"],
] as const satisfies FieldList;

export const LOSS_FIELDS = [
  ["size", "i64"],
  ["type", "i64"],
  ["reduction", "i64"],
  ["n_rl", "f64"],
  ["n_ce", "f64"],
  ["n_ref_kl", "f64"],
  ["n_distill", "f64"],
  ["n_rl_sequences", "f64"],
  ...RL_SETTINGS,
  ...CLIP_RANGE,
  ["n_losses", "i64"],
  ["losses", "ptr"],
] as const satisfies FieldList;

/** One entry of rlx_loss.losses: the settings of one rl loss (as rlx_loss's own). */
export const RL_LOSS_FIELDS = [
  ["size", "i64"],
  ["type", "i64"],
  ["reduction", "i64"],
  ...RL_SETTINGS,
  ...CLIP_RANGE,
] as const satisfies FieldList;

const FIELD_BYTES = 8;

/** A struct's size and each field's offset, as rlx_abi_layout() reports them. */
export interface StructLayout {
  size: number;
  fields: Record<string, number>;
}

export function layoutOf(fields: FieldList): StructLayout {
  return {
    size: fields.length * FIELD_BYTES,
    fields: Object.fromEntries(fields.map(([name], i) => [name, i * FIELD_BYTES])),
  };
}

type NameOf<F extends FieldList> = Exclude<F[number][0], "size">;
type PointerTarget = Int32Array | Uint8Array | Float32Array | Float64Array;
/** A value per field (its size is written by the packer): numbers, or the arrays pointers point at
 * (a pointer field given a number takes it as the address: a shim handle). */
export type StructValues<F extends FieldList> = { [K in NameOf<F>]?: number | PointerTarget | null };

// Where an empty array points: bun:ffi takes no address of a zero-length view, and NULL would mean
// "absent" to the shim.
const EMPTY = new Float64Array(1);

/** The struct's bytes, to pass as a pointer argument. Pointer fields hold the addresses of the
 * given arrays, so the caller keeps `values` referenced until the call returns. `bytes` (tests
 * only) packs a struct of another size: fields past it are left out, space beyond the known
 * fields is zeros, and the size field says `bytes`. */
export function packStruct<F extends FieldList>(
  fields: F,
  values: StructValues<F>,
  bytes = fields.length * FIELD_BYTES,
): Uint8Array {
  const out = new Uint8Array(bytes);
  const view = new DataView(out.buffer);
  fields.forEach(([name, kind], i) => {
    const at = i * FIELD_BYTES;
    if (at + FIELD_BYTES > bytes) return;
    const value = name === "size" ? bytes : (values as Record<string, number | PointerTarget | null | undefined>)[name];
    if (kind === "ptr") {
      // an array is pointed at; a number is an address already (a shim handle)
      const target = value as PointerTarget | number | null | undefined;
      const address = typeof target === "number" ? target : target ? ptr(target.length > 0 ? target : EMPTY) : 0;
      view.setBigUint64(at, BigInt(address), true);
    } else if (kind === "i64") view.setBigInt64(at, BigInt((value as number | undefined) ?? 0), true);
    else view.setFloat64(at, (value as number | undefined) ?? 0, true);
  });
  return out;
}
