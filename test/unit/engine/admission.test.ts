// Which queued requests the engine prefills together: the prompt-token budget counts each distinct
// prompt once, so an RL group whose one prompt exceeds the budget is admitted (and prefilled) as one
// batch, while distinct long prompts still go one admission each. Checked on the rule itself and on
// a real engine through its schedule record (the generator calls it made).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { prefillBatchSize } from "../../../src/engine/admission.ts";
import { Engine } from "../../../src/engine/engine.ts";
import { loadModel } from "../../../src/model/hf.ts";
import type { NativeModel } from "../../../src/native/model.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

const queued = (...prompts: number[][]) => prompts.map((prompt) => ({ request: { prompt } }));
const long = (seed: number, length = 40) => Array.from({ length }, (_, t) => 1 + ((seed * 31 + t * 7) % 200));

describe("prefillBatchSize", () => {
  test("distinct prompts fill the token budget; the first goes in however long", () => {
    expect(prefillBatchSize(queued([1, 2], [3, 4], [5, 6]), 8, 4)).toBe(2);
    expect(prefillBatchSize(queued(long(1), long(2)), 8, 16)).toBe(1);
    expect(prefillBatchSize(queued([1, 2], [3, 4], [5, 6]), 2, 100)).toBe(2); // the free slots
    expect(prefillBatchSize([], 8, 16)).toBe(0);
    expect(prefillBatchSize(queued([1]), 0, 16)).toBe(0);
  });

  test("a repeated prompt costs no tokens: a group of one long prompt is one batch", () => {
    const group = [long(1), long(1), [...long(1)], long(1)]; // equal tokens, not only the same array
    expect(prefillBatchSize(queued(...group), 8, 16)).toBe(4);
    expect(prefillBatchSize(queued(...group, long(2), long(2)), 8, 16)).toBe(4);
    expect(prefillBatchSize(queued(...group, long(2), long(2)), 8, 100)).toBe(6);
    expect(prefillBatchSize(queued(long(1), long(1, 39)), 8, 16)).toBe(1); // a prefix is another prompt
  });
});

describe("the engine's admissions", () => {
  let model: NativeModel;
  beforeAll(async () => void (model = await loadModel(await microModelDir({ seed: 1 }))));
  afterAll(() => model?.free());

  /** Submits the prompts together; returns each generator.add's request count and the tokens. */
  async function admissions(prompts: number[][], firstSeed = 7): Promise<{ adds: number[]; tokens: number[][] }> {
    const path = join(mkdtempSync(join(tmpdir(), "rlx-admission-")), "schedule.jsonl");
    const engine = new Engine(model, {
      maxBatch: 8,
      maxModelLen: 64,
      maxPrefillTokens: 16,
      ownsModel: false,
      schedule: { path, model: "micro" },
    });
    const results = await Promise.all(
      prompts.map((prompt, i) =>
        engine.submit({ prompt, sampling: { temperature: 1, maxNewTokens: 4, seed: firstSeed + i } }),
      ),
    );
    await engine.close();
    const lines = readFileSync(path, "utf8")
      .trim()
      .split("\n")
      .slice(1)
      .map((line) => JSON.parse(line));
    return { adds: lines.filter((line) => line.a).map((line) => line.a.length), tokens: results.map((r) => r.tokens) };
  }

  test("a group of one prompt longer than maxPrefillTokens is admitted in one add; distinct ones one at a time", async () => {
    const group = await admissions([long(1), long(1), long(1), long(1)]);
    expect(group.adds).toEqual([4]);
    const distinct = await admissions([long(1), long(2), long(3)]);
    expect(distinct.adds).toEqual([1, 1, 1]);
    // Sharing the prefill changes no token: each rollout decodes as it does alone.
    const alone: number[][] = [];
    for (const i of [0, 1, 2, 3]) alone.push((await admissions([long(1)], 7 + i)).tokens[0]!);
    expect(group.tokens).toEqual(alone);
    expect(group.tokens.map((tokens) => tokens.length)).toEqual([4, 4, 4, 4]);
  });
});
