// The row the native training call reads (src/native/train.ts): one packed micro-batch's tokens,
// the lengths and parents of its samples, and the per-token streams of the four loss components
// (docs/architecture.md §4 and §6). Packing (pack.ts) builds it; the trainer hands it to the shim
// as it is, flat typed arrays with no per-token objects.

/** One packed row of T tokens (docs/architecture.md §4); every stream has length T. */
export interface TrainRow {
  tokenIds: Int32Array;
  /** Lengths of the packed samples, summing to T. */
  sampleLengths: Int32Array;
  /** Per sample: the earlier sample of the row whose tokens it continues (a shared prefix), or -1
   * (rlx.h rlx_batch.sample_parents). Absent: none shared. */
  sampleParents?: Int32Array;
  /** Per sample: its rl loss, an index into the step's loss table (PackedStep.losses; rlx.h
   * rlx_batch.sample_losses). Absent: every sample uses entry 0. */
  sampleLosses?: Int32Array;
  lossMask: Uint8Array;
  advantages: Float32Array;
  inferenceLogprobs: Float32Array;
  temperatures: Float32Array;
  refLogprobs?: Float32Array;
  rlWeights?: Float32Array;
  ceWeights?: Float32Array;
  refKlWeights?: Float32Array;
  /** The distill component (docs/architecture.md §6): per-token weights and betas (0 forward KL, 1
   * reverse KL, between: generalized JSD), and per token `distillK` slots of the target's top-k ids
   * (-1 = empty) and their logprobs, [T * distillK]. Absent weights: no member. */
  distillWeights?: Float32Array;
  distillBetas?: Float32Array;
  distillK?: number;
  distillIds?: Int32Array;
  distillLogprobs?: Float32Array;
  /** Per-token env index into 0..nEnvs-1, -1 for none (padding). */
  envIndex?: Int32Array;
}
