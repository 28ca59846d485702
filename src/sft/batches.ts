// SFT examples -> step batches. Each epoch visits every example once in a seeded order; a step
// takes the next examples until its token budget is full (at least one example) or the epoch
// ends, so a step never holds the same example twice (the last step of an epoch may be smaller;
// the loss is a per-token mean, so it is only noisier, not louder).
// The batch becomes training samples whose only loss is cross-entropy on the target tokens
// (ceWeights; lossMask 0 because nothing was sampled by the policy, so rl and the
// policy-sampled metrics such as mismatch_kl stay empty), then rows of seq_len via the same
// first-fit-decreasing packer RL steps use.
// The cursor (epoch, position) is the batcher's whole state: an epoch's order is a pure function of
// the seed and the epoch number, so a resumed `rlx sft` run restores it and draws exactly the
// batches the uninterrupted run would have.
import { RlxError } from "../errors.ts";
import { Rng } from "../envs/random.ts";
import { type PackedStep, packStep } from "../data/pack.ts";
import type { TrainingSample } from "../data/types.ts";

export interface SftExample {
  /** `FILE:LINE` of the row. */
  id: string;
  env: string;
  tokenIds: number[];
  ceWeights: number[];
}

/** The training sample of an example: ce on its targets, nothing else. */
export function sftSample(example: SftExample): TrainingSample {
  const n = example.tokenIds.length;
  const zeros = () => new Array<number>(n).fill(0);
  return {
    tokenIds: example.tokenIds,
    lossMask: zeros(),
    advantages: zeros(),
    inferenceLogprobs: zeros(),
    temperatures: new Array<number>(n).fill(1),
    ceWeights: example.ceWeights,
    env: example.env,
    rolloutId: example.id,
  };
}

/** Where the batcher is: resumable from these two numbers and the seed. */
export interface BatchCursorState {
  epoch: number;
  /** Index into the epoch's order of the next example. */
  position: number;
}

export class SftBatches {
  #order: number[] = [];
  #state: BatchCursorState = { epoch: 0, position: 0 };

  constructor(
    private readonly examples: readonly SftExample[],
    private readonly options: { batchTokens: number; seqLen: number; seed: number; shuffle: boolean },
  ) {
    this.#order = this.#epochOrder(0);
  }

  get state(): BatchCursorState {
    return { ...this.#state };
  }

  /** Continues from a state read off another batcher over the same examples and options. */
  restore(state: BatchCursorState): void {
    const { epoch, position } = state;
    if (
      !Number.isInteger(epoch) ||
      epoch < 0 ||
      !Number.isInteger(position) ||
      position < 0 ||
      position > this.examples.length
    ) {
      throw new RlxError(
        `the data cursor {epoch ${epoch}, position ${position}} does not fit a dataset of ${this.examples.length} examples`,
        {
          fix: "resume with the data the run was started with",
        },
      );
    }
    this.#state = { epoch, position };
    this.#order = this.#epochOrder(epoch);
  }

  /** Epochs completed, fractional (examples consumed / dataset size). */
  get epochs(): number {
    return this.#state.epoch + this.#state.position / this.examples.length;
  }

  /** The next step's examples. */
  next(): SftExample[] {
    const batch: SftExample[] = [];
    let tokens = 0;
    if (this.#state.position >= this.#order.length) {
      this.#state = { epoch: this.#state.epoch + 1, position: 0 };
      this.#order = this.#epochOrder(this.#state.epoch);
    }
    while (this.#state.position < this.#order.length) {
      const example = this.examples[this.#order[this.#state.position]!]!;
      const length = Math.min(example.tokenIds.length, this.options.seqLen);
      if (batch.length > 0 && tokens + length > this.options.batchTokens) return batch;
      batch.push(example);
      tokens += length;
      this.#state.position++;
    }
    return batch;
  }

  /** The next step packed into rows of seq_len. */
  nextPacked(): PackedStep {
    return packStep(this.next().map(sftSample), { seqLen: this.options.seqLen });
  }

  #epochOrder(epoch: number): number[] {
    const order = this.examples.map((_, i) => i);
    return this.options.shuffle ? new Rng(this.options.seed * 1_000_003 + epoch).shuffle(order) : order;
  }
}
