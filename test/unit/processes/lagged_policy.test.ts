// Lagged copies of the live policy (OPSD's teacher_refresh), on real micro models: the copy starts
// on the policy's starting weights, takes a loaded step only once it is `every` steps newer than
// its own (its scores are then exactly that step's model's), and a run whose weights travel over
// the weight channels cannot make one.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { ConfigError } from "../../../src/errors.ts";
import { loadModel } from "../../../src/model/hf.ts";
import { score } from "../../../src/native/generate.ts";
import { LaggedCopies } from "../../../src/processes/lagged_policy.ts";
import { InProcessPolicy } from "../../../src/processes/live_policy.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

const sequences = [
  [1, 7, 42, 3, 99, 5],
  [8, 8, 200, 13],
];
let dirs: string[];
let expected: number[][][]; // per model: its scores of `sequences`

beforeAll(async () => {
  dirs = await Promise.all([1, 2, 3, 4].map((seed) => microModelDir({ seed })));
  expected = [];
  for (const dir of dirs) {
    const model = await loadModel(dir);
    expected.push(score(model, sequences).logprobs.map((lp) => Array.from(lp)));
    model.free();
  }
});

function config(transfer: string) {
  const path = join(mkdtempSync(join(tmpdir(), "rlx-lagged-")), "c.toml");
  writeFileSync(
    path,
    `[model]\npath = "${dirs[0]}"\n[orchestrator]\nbatch_size = 8\ngroup_size = 4\nseq_len = 64\n[inference]\nweight_transfer = "${transfer}"\n[[orchestrator.train.env]]\nid = "math"\n`,
  );
  return loadConfig(path).config;
}

const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const close of closers) await close();
});

test("a copy every 2 steps: the start's weights, then each step 2 newer than its own, exactly", async () => {
  const copies = new LaggedCopies(config("disk"), {
    runDir: mkdtempSync(join(tmpdir(), "rlx-lagged-run-")),
    modelDir: dirs[0]!,
    version: 0,
  });
  const live = copies.following(
    await InProcessPolicy.create(dirs[0]!, 0, { maxBatch: 4, maxModelLen: 64, prefixCaching: false }),
  );
  closers.push(() => live.close());
  const teacher = await copies.client(2);
  expect(await copies.client(2)).toBe(teacher); // one copy per period
  expect(await teacher.score(sequences)).toEqual(expected[0]!);

  const seen: number[] = [];
  for (const version of [1, 2, 3]) {
    await live.load(dirs[version]!, version);
    expect(live.version).toBe(version);
    expect(await live.client.score(sequences)).toEqual(expected[version]!);
    const scores = await teacher.score(sequences);
    seen.push(expected.findIndex((e) => JSON.stringify(e) === JSON.stringify(scores)));
  }
  expect(seen).toEqual([0, 2, 2]); // step 1 is 1 newer: kept the start; 2 taken; 3 is 1 newer than 2
});

test("weights over the weight channels: no copy can be made, and the error says why", async () => {
  const copies = new LaggedCopies(config("c10d"), {
    runDir: mkdtempSync(join(tmpdir(), "rlx-lagged-run-")),
    modelDir: dirs[0]!,
    version: 0,
  });
  const error = await copies.client(2).catch((err: Error) => err);
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as Error).message).toContain('inference.weight_transfer is "c10d"');
});
