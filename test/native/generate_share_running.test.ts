// A prompt that begins with what a running sequence has written shares those K/V blocks (rlx.h
// rlx_gen_add; native/src/slots.cpp share_running): a group's rollouts admitted after the first
// one prefill only the prompt's last partial block, hold fewer blocks, and draw the tokens and
// logprobs of a group admitted together (float64, 1e-10). After new weights (rlx_gen_set_model) a
// sequence that ran across the swap neither shares its K/V with a new prompt nor keeps them.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { type GenToken, NativeGenerator } from "../../src/native/generate.ts";
import { randomIds, runTurns, type Turn } from "./gen_turns.ts";
import { TINY_FULL, rng, tinyModel } from "./tiny_model.ts";

setDefaultTimeout(60_000);

const ids = randomIds(rng(23));
const PROMPT = ids(40); // two whole blocks of 16 and a partial one

/** Appends each token to its slot's turn (slots not in `turns` are not followed); returns how many
 * of the followed sequences finished. */
function record(turns: Map<number, Turn>, out: GenToken[]): number {
  let finished = 0;
  for (const t of out) {
    const turn = turns.get(t.slot);
    if (!turn) continue;
    (turn.tokens.push(t.token), turn.logprobs.push(t.logprob));
    if (t.finish) finished++;
  }
  return finished;
}

describe("a prompt shares the blocks a running sequence wrote", () => {
  test("a group's last three rollouts, admitted after the first, share its prompt's whole blocks", async () => {
    using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
    const sampling = (i: number) => ({ temperature: 1, maxNewTokens: 8, seed: 60 + i });
    using gen = NativeGenerator.create(model, { slots: 4, capacity: 128 });
    const bySlot = new Map<number, Turn>();
    const order: Turn[] = [];
    const admit = (out: GenToken[]) =>
      out.forEach((t) => {
        const turn = { tokens: [], logprobs: [] };
        (bySlot.set(t.slot, turn), order.push(turn));
      });
    const first = gen.add([{ prompt: PROMPT, sampling: sampling(0) }]);
    admit(first);
    let finished = record(bySlot, first);
    finished += record(bySlot, gen.step());
    const reusedBefore = gen.cacheStats().reusedTokens;
    const rest = gen.add([1, 2, 3].map((i) => ({ prompt: PROMPT, sampling: sampling(i) })));
    admit(rest);
    finished += record(bySlot, rest);
    expect(gen.cacheStats().reusedTokens - reusedBefore).toBe(32);
    // The first holds 3 blocks; each of the others its own third block only (16 tokens a block).
    expect(gen.cacheStats().kv.runningTokens).toBe((3 + 3) * 16);
    while (finished < 4) finished += record(bySlot, gen.step());

    using together = NativeGenerator.create(model, { slots: 4, capacity: 128 });
    const reference = runTurns(together, [PROMPT, PROMPT, PROMPT, PROMPT], [0, 1, 2, 3].map(sampling));
    order.forEach((turn, i) => {
      expect(turn.tokens).toEqual(reference[i]!.tokens);
      turn.logprobs.forEach((lp, t) => expect(Math.abs(lp - reference[i]!.logprobs[t]!)).toBeLessThan(1e-10));
    });
  });

  test("without keepPrefixes nothing is shared", async () => {
    using model = await tinyModel({ dtype: "f32", config: TINY_FULL });
    using gen = NativeGenerator.create(model, { slots: 2, capacity: 128, keepPrefixes: false });
    gen.add([{ prompt: PROMPT, sampling: { temperature: 0, maxNewTokens: 4 } }]);
    gen.add([{ prompt: PROMPT, sampling: { temperature: 0, maxNewTokens: 4 } }]);
    expect(gen.cacheStats().reusedTokens).toBe(0);
  });
});

describe("new weights: K/V written before them is never reused", () => {
  const greedy = { temperature: 0, maxNewTokens: 6 };

  test("a prompt added after the swap is prefilled whole, as a fresh generator on the new weights does", async () => {
    using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
    using other = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2, seed: 9 });
    using gen = NativeGenerator.create(model, { slots: 2, capacity: 128 });
    gen.add([{ prompt: PROMPT, sampling: greedy }]);
    gen.step();
    gen.setModel(other);
    const added = gen.add([{ prompt: PROMPT, sampling: greedy }]);
    expect(gen.cacheStats().reusedTokens).toBe(0);
    const after: Turn = { tokens: [], logprobs: [] };
    const turns = new Map([[added[0]!.slot, after]]);
    for (let finished = record(turns, added); finished < 1;) finished += record(turns, gen.step());
    using fresh = NativeGenerator.create(other, { slots: 2, capacity: 128 });
    const [alone] = runTurns(fresh, [PROMPT], [greedy]);
    expect(after.tokens).toEqual(alone!.tokens);
    after.logprobs.forEach((lp, t) => expect(Math.abs(lp - alone!.logprobs[t]!)).toBeLessThan(1e-10));
  });

  test("a sequence that ran across the swap keeps nothing for its next turn", async () => {
    using model = await tinyModel({ dtype: "f32", config: TINY_FULL });
    using other = await tinyModel({ dtype: "f32", config: TINY_FULL, seed: 9 });
    for (const swap of [false, true]) {
      using gen = NativeGenerator.create(model, { slots: 2, capacity: 128 });
      const turns = new Map<number, Turn>();
      const first = gen.add([{ prompt: PROMPT, sampling: greedy }]);
      turns.set(first[0]!.slot, { tokens: [], logprobs: [] });
      let finished = record(turns, first);
      if (swap) gen.setModel(other);
      while (finished < 1) finished += record(turns, gen.step());
      const turn = [...turns.values()][0]!;
      runTurns(gen, [[...PROMPT, ...turn.tokens, 1, 2]], [greedy]);
      // Without the swap the next turn continues every cached token: the prompt and the reply but its last.
      expect(gen.cacheStats().reusedTokens).toBe(swap ? 0 : 40 + turn.tokens.length - 1);
    }
  });
});
