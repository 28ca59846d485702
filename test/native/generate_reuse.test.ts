// Kept prefixes (rlx.h rlx_gen_cache_stats): a tool episode's next turn, added after its previous
// turn ended, continues from the K/V its slot kept and prefills only the new tokens, with the
// tokens and logprobs of a full prefill (float64 1e-10, float32 1e-5); a running sequence left in
// a high slot after the others finish decodes as it would alone; sampled turns of a group each
// continue their own slot; new weights drop every kept prefix.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import type { NativeModel } from "../../src/native/model.ts";
import { NativeGenerator, type SamplingParams } from "../../src/native/generate.ts";
import { randomIds, runTurns as run, type Turn } from "./gen_turns.ts";
import { TINY_FULL, rng, tinyModel } from "./tiny_model.ts";

setDefaultTimeout(60_000);

const ids = randomIds(rng(11));

/** Three turns of an episode: each next prompt is the last one, its reply and a tool's output. */
const FIRST = ids(40);
const TOOLS = [ids(9), ids(14)];

function episode(model: NativeModel, fresh: boolean, sampling: SamplingParams) {
  let gen = NativeGenerator.create(model, { slots: 4, capacity: 256 });
  let prompt = FIRST;
  const turns: Turn[] = [];
  const reused: number[] = [];
  for (let k = 0; k < 3; k++) {
    if (fresh) (gen.free(), (gen = NativeGenerator.create(model, { slots: 4, capacity: 256 })));
    const before = gen.cacheStats().reusedTokens;
    const [turn] = run(gen, [prompt], [{ ...sampling, seed: 7 + k }]);
    reused.push(gen.cacheStats().reusedTokens - before);
    turns.push(turn!);
    if (k < 2) prompt = [...prompt, ...turn!.tokens, ...TOOLS[k]!];
  }
  gen.free();
  return { turns, reused };
}

describe("a tool episode's next turn continues from its kept K/V", () => {
  for (const [dtype, tol] of [
    ["f64", 1e-10],
    ["f32", 1e-5],
  ] as const) {
    test(`three greedy turns: the tokens and logprobs of full prefills (${dtype}, tolerance ${tol})`, async () => {
      using model = await tinyModel({ dtype, config: TINY_FULL, sharpen: 4 });
      const sampling = { temperature: 0, maxNewTokens: 12 };
      const kept = episode(model, false, sampling);
      const full = episode(model, true, sampling);
      expect(full.reused).toEqual([0, 0, 0]);
      // Turn k + 1 continues every token turn k cached: its prompt and its reply but the last token.
      expect(kept.reused).toEqual([0, 40 + 12 - 1, 40 + 12 + 9 + 12 - 1]);
      kept.turns.forEach((turn, k) => {
        expect(turn.tokens).toEqual(full.turns[k]!.tokens);
        turn.logprobs.forEach((lp, t) => expect(Math.abs(lp - full.turns[k]!.logprobs[t]!)).toBeLessThan(tol));
      });
    });
  }

  test("sampled turns at temperature 1 draw the same tokens as full prefills (same seeds)", async () => {
    using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
    const sampling = { temperature: 1, maxNewTokens: 10 };
    const kept = episode(model, false, sampling);
    const full = episode(model, true, sampling);
    expect(kept.reused[2]).toBeGreaterThan(40);
    kept.turns.forEach((turn, k) => expect(turn.tokens).toEqual(full.turns[k]!.tokens));
  });

  test("a sequence left running in a high slot, the others done, decodes as it would alone", async () => {
    using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
    const prompts = [0, 1, 2, 3, 4, 5].map((i) => ids(12 + i));
    const sampling = prompts.map((_, i) => ({ temperature: 1, maxNewTokens: i === 5 ? 24 : 2, seed: 70 + i }));
    using gen = NativeGenerator.create(model, { slots: 6, capacity: 128 });
    const together = run(gen, prompts, sampling);
    using alone = NativeGenerator.create(model, { slots: 1, capacity: 128 });
    const [single] = run(alone, [prompts[5]!], [sampling[5]!]);
    expect(together[5]!.tokens).toEqual(single!.tokens);
    together[5]!.logprobs.forEach((lp, t) => expect(Math.abs(lp - single!.logprobs[t]!)).toBeLessThan(1e-10));
  });

  test("a group's second turns each continue their own slot, past kept slots that share the prompt's blocks", async () => {
    using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
    const prompt = ids(30);
    // Different max lengths: the short ones end first and sit as kept slots between running ones.
    const sampling = [4, 12, 6, 12].map((n, i) => ({ temperature: 1, maxNewTokens: n, seed: 50 + i }));
    using gen = NativeGenerator.create(model, { slots: 6, capacity: 128 });
    const first = run(gen, [prompt, prompt, prompt, prompt], sampling);
    const tools = [0, 1, 2, 3].map((i) => ids(5 + i));
    const prompts = first.map((t, i) => [...prompt, ...t.tokens, ...tools[i]!]);
    const before = gen.cacheStats().reusedTokens;
    const kept = run(
      gen,
      prompts,
      sampling.map((s) => ({ ...s, seed: s.seed + 10 })),
    );
    expect(gen.cacheStats().reusedTokens - before).toBe(first.reduce((n, t) => n + 30 + t.tokens.length - 1, 0));
    using fresh = NativeGenerator.create(model, { slots: 6, capacity: 128 });
    const full = run(
      fresh,
      prompts,
      sampling.map((s) => ({ ...s, seed: s.seed + 10 })),
    );
    expect(fresh.cacheStats().reusedTokens).toBe(0);
    kept.forEach((turn, i) => {
      expect(turn.tokens).toEqual(full[i]!.tokens);
      turn.logprobs.forEach((lp, t) => expect(Math.abs(lp - full[i]!.logprobs[t]!)).toBeLessThan(1e-10));
    });
  });

  test("keepPrefixes false: every prefill is a full one, bit for bit a fresh generator's", async () => {
    using model = await tinyModel({ dtype: "f32", config: TINY_FULL, sharpen: 4 });
    using gen = NativeGenerator.create(model, { slots: 2, capacity: 128, keepPrefixes: false });
    const greedy = [{ temperature: 0, maxNewTokens: 6 }];
    const [first] = run(gen, [FIRST], greedy);
    const next = [...FIRST, ...first!.tokens, ...TOOLS[0]!];
    const [second] = run(gen, [next], greedy);
    expect(gen.cacheStats().reusedTokens).toBe(0);
    using fresh = NativeGenerator.create(model, { slots: 2, capacity: 128 });
    expect(run(fresh, [next], greedy)[0]).toEqual(second!);
  });

  test("new weights drop every kept prefix; a short match is not reused", async () => {
    using model = await tinyModel({ dtype: "f32", config: TINY_FULL });
    using other = await tinyModel({ dtype: "f32", config: TINY_FULL, seed: 9 });
    using gen = NativeGenerator.create(model, { slots: 2, capacity: 128 });
    const prompt = ids(30);
    const [turn] = run(gen, [prompt], [{ temperature: 0, maxNewTokens: 5 }]);
    gen.setModel(other);
    run(gen, [[...prompt, ...turn!.tokens, 1]], [{ temperature: 0, maxNewTokens: 2 }]);
    expect(gen.cacheStats().reusedTokens).toBe(0);
    run(gen, [[...prompt.slice(0, 10), 2, 3]], [{ temperature: 0, maxNewTokens: 2 }]); // 10 < 16 common tokens
    expect(gen.cacheStats()).toMatchObject({ prompts: 3, promptTokens: 30 + 36 + 12, reusedTokens: 0 });
  });
});
