// SFT batching and config: each epoch visits every example exactly once in a seeded order, steps
// respect the token budget, a restored cursor continues the same order, the training samples carry only the ce stream (so the step's ce count
// is the number of predicted target tokens), and the config loader names the key path of every
// mistake.
import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dataPaths, loadSftConfig, loadSftRun } from "../../../src/sft/config.ts";
import { type SftExample, SftBatches, sftSample } from "../../../src/sft/batches.ts";
import { stepsForEpochs } from "../../../src/sft/run.ts";

/** Example i has 10 + i tokens with targets on its second half. */
function examples(n: number): SftExample[] {
  return Array.from({ length: n }, (_, i) => {
    const len = 10 + i;
    return {
      id: `f:${i + 1}`,
      env: i % 2 ? "a" : "b",
      tokenIds: Array.from({ length: len }, (_, t) => t),
      ceWeights: Array.from({ length: len }, (_, t) => (t >= len / 2 ? 1 : 0)),
    };
  });
}

test("every example once per epoch, in a seeded order that changes between epochs; batches end with the epoch", () => {
  const data = examples(20);
  const batches = new SftBatches(data, { batchTokens: 60, seqLen: 64, seed: 3, shuffle: true });
  const seen: string[][] = [[], []];
  for (;;) {
    const batch = batches.next();
    const epoch = batches.state.epoch; // a batch never spans two epochs
    if (epoch >= 2) break;
    const tokens = batch.reduce((n, e) => n + e.tokenIds.length, 0);
    expect(tokens <= 60 || batch.length === 1).toBe(true);
    seen[epoch]!.push(...batch.map((e) => e.id));
  }
  for (const ids of seen) expect([...ids].sort()).toEqual(data.map((d) => d.id).sort());
  expect(seen[0]).not.toEqual(seen[1]);
  expect(seen[0]).not.toEqual(data.map((d) => d.id)); // shuffled
  const again = new SftBatches(data, { batchTokens: 60, seqLen: 64, seed: 3, shuffle: true });
  expect(again.next().map((e) => e.id)).toEqual(
    new SftBatches(data, { batchTokens: 60, seqLen: 64, seed: 3, shuffle: true }).next().map((e) => e.id),
  );
  const unshuffled = new SftBatches(data, { batchTokens: 30, seqLen: 64, seed: 3, shuffle: false });
  expect(unshuffled.next().map((e) => e.id)).toEqual(["f:1", "f:2"]); // 10 + 11 tokens; the third (12) would exceed 30
  expect(unshuffled.epochs).toBeCloseTo(2 / 20, 12);
});

test("restore: a batcher given another's cursor draws the same batches from there on, across epoch ends; a cursor past the data is refused", () => {
  const data = examples(20);
  const options = { batchTokens: 60, seqLen: 64, seed: 3, shuffle: true };
  for (const at of [0, 1, 4, 7, 8, 13]) {
    const original = new SftBatches(data, options);
    for (let i = 0; i < at; i++) original.next();
    const copy = new SftBatches(data, options);
    copy.restore(JSON.parse(JSON.stringify(original.state)) as typeof original.state);
    expect(copy.epochs).toBe(original.epochs);
    const ids = (b: SftBatches) => Array.from({ length: 12 }, () => b.next().map((e) => e.id));
    const epochBefore = original.state.epoch;
    const rest = ids(original);
    expect(original.state.epoch).toBeGreaterThan(epochBefore); // the 12 batches crossed an epoch end
    expect(ids(copy)).toEqual(rest);
  }
  const batches = new SftBatches(data, options);
  expect(() => batches.restore({ epoch: 0, position: 21 })).toThrow("does not fit a dataset of 20 examples");
  expect(() => batches.restore({ epoch: -1, position: 0 })).toThrow("does not fit");
});

test("an example longer than the budget is a batch of its own; lengths count up to seq_len", () => {
  const data = examples(3).map((e) => ({ ...e, tokenIds: new Array(100).fill(1), ceWeights: new Array(100).fill(1) }));
  const batches = new SftBatches(data, { batchTokens: 50, seqLen: 40, seed: 0, shuffle: false });
  expect(batches.next()).toHaveLength(1); // 40 (truncated) + 40 > 50
  const packed = batches.nextPacked();
  expect(packed.rows).toHaveLength(1);
  expect(packed.truncatedSamples).toBe(1);
  expect(packed.tokens).toBe(40);
});

test("samples carry ce weights only: the step's ce count is the predicted target tokens, rl and ref_kl are empty", () => {
  const data = examples(6);
  const sample = sftSample(data[0]!);
  expect(sample.lossMask.every((m) => m === 0)).toBe(true);
  expect(sample.rlWeights).toBeUndefined();
  expect(sample.ceWeights).toEqual(data[0]!.ceWeights);
  const packed = new SftBatches(data, { batchTokens: 1000, seqLen: 64, seed: 0, shuffle: false }).nextPacked();
  const targets = data.reduce((n, e) => n + e.ceWeights.filter(Boolean).length, 0);
  expect(packed.counts).toEqual({ rl: 0, ce: targets, refKl: 0, distill: 0, rlSequences: 0 });
  expect(
    packed.rows.every((r) => r.rlWeights === undefined && r.refKlWeights === undefined && r.ceWeights !== undefined),
  ).toBe(true);
  expect(packed.envs.sort()).toEqual(["a", "b"]);
});

test("stepsForEpochs: as many steps as the batcher takes to pass over the data", () => {
  const data = examples(10); // 10..19 tokens, 145 in all
  expect(stepsForEpochs(data, { batchTokens: 1000, seqLen: 64, seed: 0, shuffle: false }, 1)).toBe(1);
  expect(stepsForEpochs(data, { batchTokens: 1000, seqLen: 64, seed: 0, shuffle: false }, 3)).toBe(3);
  expect(stepsForEpochs(data, { batchTokens: 30, seqLen: 64, seed: 0, shuffle: false }, 1)).toBe(7); // 21, 25, 29, 16+17>30...
});

test("sft config: defaults, --set, key paths in errors, eval env args checked at load", () => {
  const dir = mkdtempSync(join(tmpdir(), "rlx-sft-config-"));
  const path = join(dir, "sft.toml");
  writeFileSync(
    path,
    '[model]\npath = "m"\n[data]\npath = ["a.jsonl", "b.jsonl"]\n[[eval.env]]\nid = "math"\nargs = { operations = ["+"] }\n',
  );
  const config = loadSftConfig(path, ["trainer.steps=7", "trainer.optim.lr=3e-4"]);
  expect(config.trainer.steps).toBe(7);
  expect(config.trainer.optim.lr).toBe(3e-4);
  expect(config.trainer.optim.max_norm).toBe(1.0);
  expect(config.trainer.schedule.type).toBe("constant");
  expect(dataPaths(config)).toEqual(["a.jsonl", "b.jsonl"]);
  expect(dataPaths(loadSftConfig(path, ["data.repeat=[3, 1]"]))).toEqual(["a.jsonl", "a.jsonl", "a.jsonl", "b.jsonl"]);
  expect(() => loadSftConfig(path, ["data.repeat=[3]"])).toThrow(/data\.repeat has 1 counts for 2 data file\(s\)/);
  expect(() => loadSftConfig(path, ["data.repeat=[0, 1]"])).toThrow(/data\.repeat\[0\]/);
  expect(config.eval!.env[0]!.args.digits).toBe(2); // the env's default, filled in
  expect(loadSftConfig(path).trainer.optim.lr).toBe(1e-5);
  expect(config.save).toEqual({ interval: 0, keep: 0, dtype: "f32", on_sigterm: true }); // keep 0: every checkpoint stays
  expect(() => loadSftConfig(path, ["save.keep=-1"])).toThrow(/save\.keep/);

  expect(() => loadSftConfig(path, ["trainer.batch_tokenz=1"])).toThrow(
    /sft\.toml \(with --set\): trainer\.batch_tokenz: unknown key; did you mean "batch_tokens"\? \(the keys here: steps, epochs, batch_tokens,/,
  );
  expect(() => loadSftConfig(path, ["trainer.seq_len=-3"])).toThrow(/trainer\.seq_len/);
  expect(() => loadSftConfig(path, ["eval.env[0].args.digitz=3"])).toThrow(/eval\.env\[0\]\.args\.digitz: unknown key/);
  expect(() => loadSftConfig(path, ["eval.env[0].id=nope"])).toThrow(/eval\.env\[0\]\.id: unknown environment "nope"/);
  expect(() => loadSftConfig(path, ["eval.env[0].id=./missing_env.js"])).toThrow(
    /eval\.env\[0\]\.id: no such file "\.\/missing_env\.js"/,
  );
  writeFileSync(path, '[data]\npath = "a.jsonl"\n');
  expect(() => loadSftConfig(path)).toThrow(/model: required/);
});

test("every configs/sft_*.toml loads", () => {
  const dir = join(import.meta.dir, "../../../configs");
  const files = readdirSync(dir).filter((f) => /^sft_.*\.toml$/.test(f));
  expect(files.length).toBeGreaterThanOrEqual(2);
  for (const file of files) expect(loadSftConfig(join(dir, file)).model.path).toMatch(/^models\/tiny(-bare)?$/);
});

test("sft config: a custom eval env is named by its file's id, as rlx train names it, and the stop band checked against that name", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rlx-sft-custom-"));
  const file = join(import.meta.dir, "../../../examples/envs/reverse.ts");
  const write = (metric: string) => {
    const path = join(dir, `${metric.split("/")[1]}.toml`);
    writeFileSync(
      path,
      `[model]\npath = "m"\n[data]\npath = "a.jsonl"\n[eval]\nenv = [{ id = ${JSON.stringify(file)}, args = { length = 4 } }]\n[eval.stop]\nmetric = "${metric}"\nmin = 0.3\n`,
    );
    return path;
  };
  const config = await loadSftRun(write("eval/reverse/greedy/pass@1"));
  expect(config.eval!.env[0]!.name).toBe("reverse");
  const wrong = write("eval/rev/greedy/pass@1");
  await expect(loadSftRun(wrong)).rejects.toThrow(
    `${wrong}: eval.stop.metric eval/rev/greedy/pass@1 names env rev, which is not an eval env`,
  );
  await expect(loadSftRun(wrong)).rejects.toMatchObject({ fix: "use eval/<name>/..., where <name> is one of reverse" });
});
