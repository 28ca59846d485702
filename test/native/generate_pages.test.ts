// The paged K/V cache (native/src/kv_cache.h): long and short sequences sharing a budget smaller
// than slots x capacity decode as each would alone; rlx_gen_add admits only what the budget left
// holds and the rest waits; a group's repeats share their prompt's full blocks; a prompt that
// continues a kept prefix inside a block its group still shares copies that block first; a long
// prompt prefilled in passes equals one pass; kept prefixes give their blocks up when needed.
import { expect, setDefaultTimeout, test } from "bun:test";
import { generate, NativeGenerator, score, type GenToken } from "../../src/native/generate.ts";
import { randomIds, runTurns as run, type Turn } from "./gen_turns.ts";
import { rng, TINY_FULL, tinyModel } from "./tiny_model.ts";

setDefaultTimeout(60_000);

const ids = randomIds(rng(23));

function expectSame(got: Turn[], want: Turn[], tolerance: number) {
  got.forEach((turn, i) => {
    expect(turn.tokens).toEqual(want[i]!.tokens);
    turn.logprobs.forEach((lp, t) => expect(Math.abs(lp - want[i]!.logprobs[t]!)).toBeLessThan(tolerance));
  });
}

test("4 long and 12 short sequences share a budget slots x capacity would exceed, each decoding as it would alone", async () => {
  using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
  const prompts = [...[300, 280, 310, 290].map(ids), ...Array.from({ length: 12 }, (_, i) => ids(10 + i))];
  const sampling = prompts.map((p, i) => ({ temperature: 1, maxNewTokens: p.length > 100 ? 40 : 12, seed: 300 + i }));
  const kvTokens = 4 * 352 + 12 * 48; // each long one's 350 tokens, each short one's 34, in blocks of 16
  using gen = NativeGenerator.create(model, { slots: 16, capacity: 512, kvTokens });
  expect(gen.cacheStats().kv.budgetTokens).toBe(kvTokens);
  expect(kvTokens).toBeLessThan((16 * 512) / 4);
  const together = run(gen, prompts, sampling);
  expect(gen.cacheStats().kv.runningTokens).toBe(0);
  const alone = prompts.map((p, i) => {
    using one = NativeGenerator.create(model, { slots: 1, capacity: 512 });
    return run(one, [p], [sampling[i]!])[0]!;
  });
  expectSame(together, alone, 1e-10);
  const scored = score(
    model,
    prompts.map((p, i) => [...p, ...together[i]!.tokens]),
    { temperature: 1 },
  ).logprobs;
  together.forEach((turn, i) =>
    turn.logprobs.forEach((lp, t) => expect(Math.abs(lp - scored[i]![prompts[i]!.length + t]!)).toBeLessThan(1e-6)),
  );
});

test("add admits the prefix whose worst case fits the budget left; the rest waits and decodes the same", async () => {
  using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
  const prompts = [ids(100), ids(90), ids(20), ids(95)];
  const sampling = prompts.map((_, i) => ({ temperature: 1, maxNewTokens: 60, seed: 40 + i }));
  // 160 tokens per long sequence: one of them at a time; the 20-token one fits beside it.
  using gen = NativeGenerator.create(model, { slots: 4, capacity: 256, kvTokens: 256 });
  const first = gen.add(prompts.map((prompt, i) => ({ prompt, sampling: sampling[i]! })));
  expect(first.length).toBe(1);
  expect(gen.cacheStats().kv).toMatchObject({ runningTokens: 112, reservedTokens: 48 });
  expect(gen.add([{ prompt: prompts[1]!, sampling: sampling[1]! }])).toEqual([]);
  expect(gen.add([{ prompt: prompts[2]!, sampling: sampling[2]! }]).length).toBe(1);
  while (gen.step().length > 0);
  const queued = generate(model, prompts, sampling, { slots: 4, kvTokens: 256 });
  const roomy = generate(model, prompts, sampling, { slots: 4 });
  queued.forEach((c, i) => {
    expect(c.tokens).toEqual(roomy[i]!.tokens);
    c.logprobs.forEach((lp, t) => expect(Math.abs(lp - roomy[i]!.logprobs[t]!)).toBeLessThan(1e-10));
  });
  expect(() => NativeGenerator.create(model, { slots: 4, capacity: 256, kvTokens: 255 })).toThrow(
    /K\/V budget \(255 tokens\) must hold one sequence of capacity 256/,
  );
});

test("a group's repeats share the prompt's full blocks and copy only the partial one", async () => {
  using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
  const prompt = ids(100); // 6 full blocks and 4 tokens
  using gen = NativeGenerator.create(model, { slots: 8, capacity: 256 });
  gen.add(Array.from({ length: 8 }, (_, i) => ({ prompt, sampling: { temperature: 1, maxNewTokens: 20, seed: i } })));
  expect(gen.cacheStats().kv.runningTokens).toBe(6 * 16 + 8 * 16);
});

test("a prompt continuing a kept prefix inside a block its group still shares copies that block; the group decodes on unchanged", async () => {
  using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
  const prompt = ids(40); // blocks 0 and 1 shared by the group
  const sampling = [2, 30, 30].map((n, i) => ({ temperature: 1, maxNewTokens: n, seed: 90 + i }));
  const branch = [...prompt.slice(0, 20), ...ids(8)]; // continues 20 tokens: inside shared block 1
  const turns: Turn[] = [0, 1, 2, 3].map(() => ({ tokens: [], logprobs: [] }));
  const owner = new Map<number, number>();
  const take = (out: GenToken[]) =>
    out.forEach((t) => {
      (turns[owner.get(t.slot)!]!.tokens.push(t.token), turns[owner.get(t.slot)!]!.logprobs.push(t.logprob));
      if (t.finish) owner.delete(t.slot);
    });
  using gen = NativeGenerator.create(model, { slots: 4, capacity: 128 });
  const first = gen.add([0, 1, 2].map((i) => ({ prompt, sampling: sampling[i]! })));
  first.forEach((t, i) => owner.set(t.slot, i));
  take(first);
  while (owner.has(first[0]!.slot)) take(gen.step());
  const reused = gen.cacheStats().reusedTokens;
  const third = gen.add([{ prompt: branch, sampling: { temperature: 1, maxNewTokens: 10, seed: 7 } }]);
  expect(third[0]!.slot).toBe(first[0]!.slot); // took the finished repeat's slot over
  expect(gen.cacheStats().reusedTokens - reused).toBe(20);
  owner.set(third[0]!.slot, 3);
  take(third);
  while (owner.size > 0) take(gen.step());
  const alone = [1, 2].map((i) => {
    using one = NativeGenerator.create(model, { slots: 1, capacity: 128 });
    return run(one, [prompt], [sampling[i]!])[0]!;
  });
  expectSame([turns[1]!, turns[2]!], alone, 1e-10);
  using fresh = NativeGenerator.create(model, { slots: 1, capacity: 128 });
  expectSame([turns[3]!], run(fresh, [branch], [{ temperature: 1, maxNewTokens: 10, seed: 7 }]), 1e-10);
});

test("a long prompt prefilled in passes of 64 tokens equals one pass (float64 1e-10)", async () => {
  using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
  const prompts = [ids(300), ids(50), ids(170), ids(200)];
  const sampling = prompts.map((_, i) => ({ temperature: 1, maxNewTokens: 8, seed: 60 + i }));
  using whole = NativeGenerator.create(model, { slots: 4, capacity: 512 });
  using passes = NativeGenerator.create(model, { slots: 4, capacity: 512, prefillTokens: 64 });
  expectSame(run(passes, prompts, sampling), run(whole, prompts, sampling), 1e-10);
  expect(() => NativeGenerator.create(model, { slots: 1, capacity: 8, prefillTokens: 0 })).toThrow(
    /prefill_tokens must be an integer >= 1/,
  );
});

test("kept prefixes give their blocks up, least recently used first, when a new sequence needs them", async () => {
  using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
  const [a, b] = [ids(60), ids(60)];
  using gen = NativeGenerator.create(model, { slots: 4, capacity: 128, kvTokens: 160 });
  const greedy = { temperature: 0, maxNewTokens: 4 };
  run(gen, [a], [greedy]);
  run(gen, [b], [greedy]);
  expect(gen.cacheStats().kv).toMatchObject({ runningTokens: 0, keptTokens: 128 });
  run(gen, [ids(60)], [{ temperature: 0, maxNewTokens: 20 }]); // 80 tokens: 2 blocks free, a's 4 go
  const before = gen.cacheStats().reusedTokens;
  run(gen, [[...b, 1, 2]], [greedy]); // b was used later than a: still kept
  expect(gen.cacheStats().reusedTokens - before).toBe(60);
  run(gen, [[...a, 1, 2]], [greedy]);
  expect(gen.cacheStats().reusedTokens - before).toBe(60);
});

test("two prompts continuing kept prefixes in one add, with no block free: giving kept blocks up never takes the continued ones", async () => {
  using model = await tinyModel({ dtype: "f64", config: TINY_FULL, sharpen: 2 });
  const [pa, pb, pc] = [ids(32), ids(32), ids(32)];
  const once = { temperature: 0, maxNewTokens: 1 };
  using gen = NativeGenerator.create(model, { slots: 6, capacity: 48, kvTokens: 96 }); // 6 blocks
  run(gen, [pb, pb], [once, once]); // least recently used: b's two slots share its 2 blocks
  run(gen, [pc], [once]);
  run(gen, [pa, pa], [once, once]);
  expect(gen.cacheStats().kv).toMatchObject({ keptTokens: 96, runningTokens: 0 });
  // Each continues 20 tokens, inside a block its prefix's twin slot shares: a copy, a block taken.
  const prompts = [
    [...pa.slice(0, 20), ...ids(5)],
    [...pb.slice(0, 20), ...ids(5)],
  ];
  const sampling = [0, 1].map((i) => ({ temperature: 1, maxNewTokens: 2, seed: 20 + i }));
  const before = gen.cacheStats().reusedTokens;
  const continued = run(gen, prompts, sampling);
  expect(gen.cacheStats().reusedTokens - before).toBe(40);
  using fresh = NativeGenerator.create(model, { slots: 2, capacity: 48 });
  expectSame(continued, run(fresh, prompts, sampling), 1e-10);
});
