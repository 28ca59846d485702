// Scoring with the top-k of each position's distribution (rlx_score_top): what `rlx serve`
// answers for prompt_logprobs = N and echo, and what top-k distillation reads from a teacher.
// The top-k is taken in the shim, chunk by chunk, so only k values per token cross to the host;
// the logprobs are bit-identical to score()'s.
import { NativeError } from "../errors.ts";
import { check, native } from "./ffi.ts";
import { concatSequences, type TopLogprobs } from "./generate.ts";
import type { NativeModel } from "./model.ts";

export interface ScoredTop {
  /** Element t: log p(token t | tokens before it); element 0 is 0 (no prediction). */
  logprobs: Float32Array;
  /** Element t: the top-k of the distribution that predicts token t, and token t's rank in it;
   * element 0 is null. */
  top: (TopLogprobs | null)[];
}

/** Prefill logprobs and top-k of every position of each sequence at one temperature (default 1). */
export function scoreTop(
  model: NativeModel,
  sequences: ArrayLike<number>[],
  options: { k: number; temperature?: number; rowTokens?: number },
): ScoredTop[] {
  const { k } = options;
  if (!Number.isInteger(k) || k < 0) throw new NativeError(`scoreTop: k must be an integer >= 0, got ${k}`);
  const { ids, lengths, total } = concatSequences(sequences);
  const temps = new Float32Array(total).fill(options.temperature ?? 1);
  const logprobs = new Float32Array(total);
  const ranks = new Int32Array(total);
  const topIds = new Int32Array(total * k);
  const topLogprobs = new Float32Array(total * k);
  const lib = native();
  check(
    lib,
    lib.rlx_score_top(
      model.handle,
      total,
      ids,
      lengths,
      sequences.length,
      temps,
      options.rowTokens ?? 4096,
      k,
      logprobs,
      ranks,
      topIds,
      topLogprobs,
    ),
  );
  let start = 0;
  return Array.from(lengths, (n) => {
    const from = start;
    start += n;
    return {
      logprobs: logprobs.slice(from, from + n),
      top: Array.from({ length: n }, (_, i) =>
        i === 0
          ? null
          : {
              ids: Array.from(topIds.subarray((from + i) * k, (from + i + 1) * k)),
              logprobs: Array.from(topLogprobs.subarray((from + i) * k, (from + i + 1) * k)),
              rank: ranks[from + i]!,
            },
      ),
    };
  });
}
