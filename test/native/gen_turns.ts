// Shared by the generator tests: random token ids, and one call that runs prompts to the end on a
// NativeGenerator, adding what the free slots and the K/V left admit (the rest waits for later
// adds), so each prompt's tokens and logprobs can be compared with a fresh generator's.
import { type GenToken, NativeGenerator, type SamplingParams } from "../../src/native/generate.ts";
import { TINY } from "./tiny_model.ts";

export interface Turn {
  tokens: number[];
  logprobs: number[];
}

/** n ids of the tiny vocabulary drawn from `rand`. */
export const randomIds = (rand: () => number) => (n: number) =>
  Array.from({ length: n }, () => Math.floor(rand() * TINY.vocab_size));

/** Adds every prompt (what does not fit waits for a later add) and steps until all have finished. */
export function runTurns(gen: NativeGenerator, prompts: number[][], sampling: SamplingParams[]): Turn[] {
  const turns: Turn[] = prompts.map(() => ({ tokens: [], logprobs: [] }));
  const bySlot = new Map<number, number>();
  let next = 0;
  const take = (out: GenToken[]) =>
    out.forEach((t) => {
      const turn = turns[bySlot.get(t.slot)!]!;
      turn.tokens.push(t.token);
      turn.logprobs.push(t.logprob);
      if (t.finish) bySlot.delete(t.slot);
    });
  while (next < prompts.length || bySlot.size > 0) {
    if (next < prompts.length && gen.freeSlots() > 0) {
      const batch = prompts.slice(next, next + gen.freeSlots());
      const first = gen.add(batch.map((prompt, j) => ({ prompt, sampling: sampling[next + j]! })));
      first.forEach((t, j) => bySlot.set(t.slot, next + j));
      next += first.length;
      take(first);
    }
    if (bySlot.size > 0) take(gen.step());
  }
  return turns;
}
