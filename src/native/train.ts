// Typed wrappers for training: one packed micro-batch through the shim's train step (the four loss
// components over a row that may share prefixes, passed as rlx.h's rlx_batch and rlx_loss structs
// packed by abi_layout.ts), the same loss over given logprobs and logits (lossEval, for exact
// tests), and the AdamW optimizer with its state. The metric layout mirrors rlx.h's RLX_M_* block.
import type { Pointer } from "bun:ffi";
import { NativeError } from "../errors.ts";
import { BATCH_FIELDS, LOSS_FIELDS, packStruct, RL_LOSS_FIELDS } from "./abi_layout.ts";
import { check, native } from "./ffi.ts";
import { RL_LOSS_TYPES, RL_REDUCTIONS, rlLoss, type RlLoss } from "../data/loss_types.ts";
import type { NativeModel } from "./model.ts";
import type { TrainRow } from "../data/train_row.ts";

/** Global denominators (max(1, member count) over the whole step) and the step's rl loss table. */
export interface LossSettings {
  nRl: number;
  nCe: number;
  nRefKl: number;
  /** max(1, distill members over the whole step). */
  nDistill?: number;
  /** max(1, samples with an rl member over the whole step): the sequence and constant reductions. */
  nRlSequences?: number;
  /** The rl losses row.sampleLosses indexes (absent: one, the defaults: DPPO + KL, token mean).
   * Entry 0 travels in rlx_loss's own fields, the rest as its rlx_rl_loss table. */
  losses?: readonly RlLoss[];
}

/** RLX_M_* in rlx.h order: sums over tokens, so blocks of several micro-batches add. */
export const METRIC_FIELDS = [
  "loss",
  "rlSum",
  "rlCount",
  "ceSum",
  "ceCount",
  "refKlSum",
  "refKlCount",
  "mismatchKlSum",
  "mismatchKlCount",
  "entropySum",
  "entropyCount",
  "maskedLow",
  "maskedHigh",
  "refKlMasked",
  "refKlAdvSum",
  "nllSum",
  "tokens",
  "distillSum",
  "distillCount",
  "clippedLow",
  "clippedHigh",
] as const;
export type MetricField = (typeof METRIC_FIELDS)[number];
export type StepMetrics = Record<MetricField, number>;

export interface StepResult {
  all: StepMetrics;
  /** One block per env index 0..nEnvs-1. */
  envs: StepMetrics[];
}

/** One rl loss's fields, as rlx_loss holds entry 0 and rlx_rl_loss the others. */
function rlLossValues(l: RlLoss) {
  return {
    type: RL_LOSS_TYPES.indexOf(l.type),
    reduction: RL_REDUCTIONS.indexOf(l.reduction),
    constant: l.constant,
    mask_low: l.dppo_mask_low,
    mask_high: l.dppo_mask_high,
    adv_tau: l.adv_tau,
    kl_tau: l.kl_tau,
    ipo_threshold: l.ipo_threshold,
    is_low: l.is_low,
    is_high: l.is_high,
    is_cap: l.is_cap,
    clip_low: l.clip_low,
    clip_high: l.clip_high,
  };
}

/** rlx.h's rlx_loss values: the denominators, entry 0 of the loss table in its own fields and the
 * other entries packed as rlx_rl_loss structs (the bytes stay referenced by the values). */
export function lossValues(s: LossSettings) {
  const [first = rlLoss(), ...rest] = s.losses ?? [];
  const table = new Uint8Array(rest.length * RL_LOSS_FIELDS.length * 8);
  rest.forEach((l, i) => table.set(packStruct(RL_LOSS_FIELDS, rlLossValues(l)), i * RL_LOSS_FIELDS.length * 8));
  return {
    ...rlLossValues(first),
    n_rl: s.nRl,
    n_ce: s.nCe,
    n_ref_kl: s.nRefKl,
    n_distill: s.nDistill ?? 1,
    n_rl_sequences: s.nRlSequences ?? 1,
    n_losses: rest.length,
    losses: rest.length ? table : null,
  };
}

/** rlx.h's rlx_loss; `bytes` (tests only) packs a struct of another size. The struct's bytes hold
 * the table its pointer points at, so the table lives as long as they do (through the call). */
export function lossStruct(s: LossSettings, bytes?: number): Uint8Array {
  const values = lossValues(s);
  return Object.assign(packStruct(LOSS_FIELDS, values, bytes), { table: values.losses });
}

/** The row's streams as rlx.h's rlx_batch values (the arrays stay referenced by `row`). */
function batchValues(row: OptionalStreams & Partial<TrainRow>, T: number, nEnvs: number, model?: NativeModel) {
  return {
    n_tokens: T,
    n_samples: row.sampleLengths?.length ?? 0,
    n_envs: nEnvs,
    distill_k: row.distillK ?? 0,
    token_ids: row.tokenIds,
    sample_lengths: row.sampleLengths,
    sample_parents: row.sampleParents,
    loss_mask: row.lossMask,
    advantages: row.advantages,
    inference_logprobs: row.inferenceLogprobs,
    temperatures: row.temperatures,
    ref_logprobs: row.refLogprobs,
    rl_weights: row.rlWeights,
    ce_weights: row.ceWeights,
    ref_kl_weights: row.refKlWeights,
    distill_weights: row.distillWeights,
    distill_betas: row.distillBetas,
    distill_ids: row.distillIds,
    distill_logprobs: row.distillLogprobs,
    env_index: row.envIndex,
    sample_losses: row.sampleLosses,
    shard_group: model?.shardGroup ?? 0,
    context_group: model?.contextGroup ?? 0,
    activation_checkpointing: model?.activationCheckpointing ? 1 : 0,
  };
}

/** rlx.h's rlx_batch for a row; `bytes` (tests only) packs a struct of another size. */
export function batchStruct(
  row: OptionalStreams & Partial<TrainRow>,
  T: number,
  nEnvs: number,
  bytes?: number,
): Uint8Array {
  return packStruct(BATCH_FIELDS, batchValues(row, T, nEnvs), bytes);
}

function metricsOf(buf: Float64Array, nEnvs: number): StepResult {
  const block = (b: number) =>
    Object.fromEntries(METRIC_FIELDS.map((k, i) => [k, buf[b * METRIC_FIELDS.length + i]!])) as StepMetrics;
  return { all: block(0), envs: Array.from({ length: nEnvs }, (_, e) => block(e + 1)) };
}

function requireLength(name: string, arr: ArrayLike<number> | undefined, T: number, optional = false): void {
  if (arr === undefined) {
    if (optional) return;
    throw new NativeError(`${name} is required`);
  }
  if (arr.length !== T) throw new NativeError(`${name} has ${arr.length} entries but the row has ${T} tokens`);
}

function checkRow(row: TrainRow): number {
  const T = row.tokenIds.length;
  for (const key of ["lossMask", "advantages", "inferenceLogprobs", "temperatures"] as const)
    requireLength(key, row[key], T);
  checkOptional(row, T);
  const parents = row.sampleParents?.length;
  if (parents !== undefined && parents !== row.sampleLengths.length)
    throw new NativeError(`sampleParents has ${parents} entries but the row has ${row.sampleLengths.length} samples`);
  const codes = row.sampleLosses?.length;
  if (codes !== undefined && codes !== row.sampleLengths.length)
    throw new NativeError(`sampleLosses has ${codes} entries but the row has ${row.sampleLengths.length} samples`);
  return T;
}

type OptionalStreams = Pick<
  TrainRow,
  | "refLogprobs"
  | "rlWeights"
  | "ceWeights"
  | "refKlWeights"
  | "envIndex"
  | "distillWeights"
  | "distillBetas"
  | "distillK"
  | "distillIds"
  | "distillLogprobs"
>;

function checkOptional(row: OptionalStreams, T: number): void {
  for (const key of ["refLogprobs", "rlWeights", "ceWeights", "refKlWeights", "envIndex"] as const)
    requireLength(key, row[key], T, true);
  requireLength("distillWeights", row.distillWeights, T, true);
  requireLength("distillBetas", row.distillBetas, T, true);
  const k = row.distillK ?? 0;
  if (!Number.isInteger(k) || k < 0) throw new NativeError(`distillK must be an integer >= 0, got ${k}`);
  requireLength("distillIds", row.distillIds, T * k, k === 0);
  requireLength("distillLogprobs", row.distillLogprobs, T * k, k === 0);
}

/** Forward + backward of one packed micro-batch; gradients accumulate in the model. */
export function trainStep(model: NativeModel, row: TrainRow, loss: LossSettings, nEnvs = 0): StepResult {
  const T = checkRow(row);
  if (row.envIndex === undefined && nEnvs !== 0) throw new NativeError("nEnvs > 0 needs envIndex");
  const out = new Float64Array(METRIC_FIELDS.length * (1 + nEnvs));
  const lib = native();
  check(
    lib,
    lib.rlx_train_step(
      model.handle,
      packStruct(BATCH_FIELDS, batchValues(row, T, nEnvs, model)),
      lossStruct(loss),
      out,
      out.length,
    ),
  );
  return metricsOf(out, nEnvs);
}

export type LossEvalRow = Omit<TrainRow, "tokenIds" | "sampleLengths" | "temperatures"> & {
  logprobs: Float64Array;
  /** The row's samples (for sequence-level types and reductions); absent: one sample. */
  sampleLengths?: Int32Array;
  /** The student's temperature-1 logits [T * vocab] (distill members need them). */
  studentLogits?: Float64Array;
  vocab?: number;
};

/** The train step's loss over given logprobs (and, for distill, logits; float64, every token valid):
 * metrics, dL/dlogprobs and dL/dlogits ([T * vocab], zeros without distill streams). */
export function lossEval(
  row: LossEvalRow,
  loss: LossSettings,
  nEnvs = 0,
): StepResult & { grad: Float64Array; gradLogits: Float64Array } {
  const T = row.logprobs.length;
  for (const key of ["lossMask", "advantages", "inferenceLogprobs"] as const) requireLength(key, row[key], T);
  checkOptional(row, T);
  const vocab = row.vocab ?? 0;
  requireLength("studentLogits", row.studentLogits, T * vocab, true);
  const out = new Float64Array(METRIC_FIELDS.length * (1 + nEnvs));
  const grad = new Float64Array(T);
  const gradLogits = new Float64Array(T * vocab);
  const lib = native();
  const batch = batchStruct({ ...row, tokenIds: undefined, temperatures: undefined }, T, nEnvs);
  const studentLogits = row.studentLogits ?? null;
  check(
    lib,
    lib.rlx_loss_eval(
      batch,
      lossStruct(loss),
      row.logprobs,
      vocab,
      studentLogits,
      out,
      out.length,
      grad,
      vocab > 0 ? gradLogits : null,
    ),
  );
  return { ...metricsOf(out, nEnvs), grad, gradLogits };
}

export interface AdamWSettings {
  beta1?: number;
  beta2?: number;
  eps?: number;
  weightDecay?: number;
}

export interface OptimStepResult {
  gradNorm: number;
  skipped: boolean;
  /** Updates applied so far. */
  step: number;
}

/** AdamW over all of a model's parameters; step() clips, updates and clears the gradients. */
export class NativeOptimizer {
  #handle: Pointer | null;

  private constructor(handle: Pointer) {
    this.#handle = handle;
  }

  static create(model: NativeModel, s: AdamWSettings = {}): NativeOptimizer {
    const lib = native();
    const handle = check(
      lib,
      lib.rlx_optim_create(model.handle, s.beta1 ?? 0.9, s.beta2 ?? 0.999, s.eps ?? 1e-8, s.weightDecay ?? 0.01),
    );
    return new NativeOptimizer(handle as Pointer);
  }

  get handle(): Pointer {
    if (this.#handle === null) throw new NativeError("this optimizer has been freed");
    return this.#handle;
  }

  /** maxGradNorm <= 0 disables clipping. */
  step(lr: number, maxGradNorm = 1.0): OptimStepResult {
    const out = new Float64Array(3);
    const lib = native();
    check(lib, lib.rlx_optim_step(this.handle, lr, maxGradNorm, out, out.length));
    return { gradNorm: out[0]!, skipped: out[1] === 1, step: out[2]! };
  }

  zeroGrad(): void {
    check(native(), native().rlx_optim_zero_grad(this.handle));
  }

  /** The state image (step count, exp_avg, exp_avg_sq) for a checkpoint. */
  saveState(): Uint8Array {
    const lib = native();
    const out = new Uint8Array(Number(check(lib, lib.rlx_optim_state_size(this.handle))));
    check(lib, lib.rlx_optim_state_save(this.handle, out, out.byteLength));
    return out;
  }

  loadState(image: Uint8Array): void {
    check(native(), native().rlx_optim_state_load(this.handle, image, image.byteLength));
  }

  free(): void {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#handle = null;
    check(native(), native().rlx_optim_free(handle));
  }

  [Symbol.dispose](): void {
    this.free();
  }
}
