// Which samples of a step share a prefix in their packed row (pack.ts; rlx.h rlx_batch.sample_parents).
// A group's samples share their whole prompt, and an env's samples its system prompt and tool
// schema; packed whole, every copy is computed again. A unit here is a set of samples plus P, the
// number of leading tokens they all have: the row holds those P tokens once, then each member's
// tokens from P on, attending to the prefix. The tokens saved are (members - 1) * P.
//
// What may be shared: tokens 0..P of every member must carry no weight in any component (loss
// mask 0; ce, ref_kl and distill weights 0). Tokens 0..P-1 are in the prefix, computed once; token
// P, each member's first own token, is predicted by nothing (as every segment's first token), so
// it must not be a member of anything either. Loss and gradient then equal the whole samples'.
//
// Choice: the samples sorted by their tokens, so that those with the longest common prefix are
// neighbours, then the partition of that order into runs that saves the most tokens (dynamic
// programming over run ends), each run fitting in seq_len. A run shares only when P >= MIN_SHARED:
// chat templates start every sample with the same few tokens, and saving those is not worth a
// segment of its own. Deterministic: ties go by sample index.
import type { TrainingSample } from "./types.ts";

/** The fewest tokens worth sharing. */
export const MIN_SHARED = 16;

export interface ShareUnit {
  /** Indices into the samples, in the order they are packed. */
  members: number[];
  /** Prefix tokens held once (0: the members are packed whole; then there is one member). */
  shared: number;
  /** Tokens the unit takes in a row. */
  tokens: number;
}

/** Leading tokens of a sample (within its first `length`) that are members of no component. */
export function weightlessLength(s: TrainingSample, length: number): number {
  for (let t = 0; t < length; t++) {
    if (s.lossMask[t] || s.ceWeights?.[t] || s.refKlWeights?.[t] || s.distillWeights?.[t]) return t;
  }
  return length;
}

function compareTokens(a: ArrayLike<number>, b: ArrayLike<number>, n: number): number {
  for (let t = 0; t < n; t++) if (a[t] !== b[t]) return a[t]! - b[t]!;
  return 0;
}

function commonLength(a: ArrayLike<number>, b: ArrayLike<number>, n: number): number {
  let t = 0;
  while (t < n && a[t] === b[t]) t++;
  return t;
}

/** Units covering every sample once; `lengths` are the samples' packed (truncated) lengths. */
export function shareUnits(
  samples: readonly TrainingSample[],
  lengths: readonly number[],
  seqLen: number,
): ShareUnit[] {
  // Most tokens a member can put in a prefix: tokens 0..P must be weightless.
  const most = samples.map((s, i) => weightlessLength(s, lengths[i]!) - 1);
  const order = samples
    .map((_, i) => i)
    .sort(
      (x, y) =>
        compareTokens(samples[x]!.tokenIds, samples[y]!.tokenIds, Math.min(lengths[x]!, lengths[y]!)) ||
        lengths[x]! - lengths[y]! ||
        x - y,
    );
  // common[j]: the prefix order[j - 1] and order[j] can share.
  const common = order.map((i, j) =>
    j === 0
      ? 0
      : commonLength(samples[order[j - 1]!]!.tokenIds, samples[i]!.tokenIds, Math.min(most[order[j - 1]!]!, most[i]!)),
  );
  // saved[e]: the most tokens saved over order[0..e); from[e]: where the last run starts, and its P.
  const saved = new Array<number>(order.length + 1).fill(0);
  const from = new Array<{ start: number; shared: number }>(order.length + 1);
  for (let end = 1; end <= order.length; end++) {
    saved[end] = saved[end - 1]!;
    from[end] = { start: end - 1, shared: 0 };
    let shared = Infinity;
    let total = lengths[order[end - 1]!]!;
    for (let start = end - 2; start >= 0; start--) {
      shared = Math.min(shared, common[start + 1]!);
      if (shared < MIN_SHARED) break;
      total += lengths[order[start]!]!;
      const k = end - start;
      // Adding a member never shrinks the unit (it brings at least one token of its own).
      if (total - (k - 1) * shared > seqLen) break;
      if (saved[start]! + (k - 1) * shared > saved[end]!) {
        saved[end] = saved[start]! + (k - 1) * shared;
        from[end] = { start, shared };
      }
    }
  }
  const units: ShareUnit[] = [];
  for (let end = order.length; end > 0; end = from[end]!.start) {
    const { start, shared } = from[end]!;
    const members = order.slice(start, end).sort((x, y) => x - y);
    const tokens = members.reduce((n, i) => n + lengths[i]!, 0) - (members.length - 1) * shared;
    units.push({ members, shared, tokens });
  }
  return units.reverse();
}
