// examples/envs/reverse.ts, the single-turn example docs/environments.md walks through: it loads in
// the kit form with its args schema, its splits never share a word and are the same for a seed,
// its gold demonstrations earn reward 1, and a wrong or missing reply earns 0; the page's
// walkthrough configs load as written.
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { loadCustomEnvs } from "../../../src/config/custom_envs.ts";
import { loadSftRun } from "../../../src/sft/config.ts";
import { createEnv, loadEnv } from "../../../src/envs/index.ts";
import { assistant, finishedRollout, rewardNow } from "./helpers.ts";

const FILE = join(import.meta.dir, "../../../examples/envs/reverse.ts");

test("the reverse example: disjoint, seeded splits; gold replies score 1, others 0", async () => {
  const definition = await loadEnv(FILE);
  expect(definition.id).toBe("reverse");
  const env = await createEnv(definition, { length: 4, tasks: 40 });
  const train = await env.load("train", 0);
  const evalTasks = await env.load("eval", 0);
  expect([train.length, evalTasks.length]).toEqual([40, 40]);
  const trainIds = new Set(train.map((t) => t.id));
  expect(evalTasks.some((t) => trainIds.has(t.id))).toBe(false);
  const answers = new Set(train.map((t) => t.answer));
  expect(answers.size).toBe(40);
  expect(evalTasks.some((t) => answers.has(t.answer))).toBe(false);
  // two-letter words run out (676 of them): fewer tasks, still disjoint
  const short = await createEnv(definition, { length: 2, tasks: 600 });
  const [shortTrain, shortEval] = [await short.load("train", 0), await short.load("eval", 0)];
  expect(shortTrain.length + shortEval.length).toBeLessThanOrEqual(676);
  const shortWords = new Set(shortTrain.map((t) => t.answer));
  expect(shortEval.some((t) => shortWords.has(t.answer))).toBe(false);
  expect((await env.load("train", 0)).map((t) => t.id)).toEqual(train.map((t) => t.id));
  expect(new Set((await env.load("train", 1)).map((t) => t.id))).toEqual(trainIds);
  for (const task of train.slice(0, 5)) {
    expect(task.answer).toHaveLength(4);
    const gold = (await env.demonstrate!(task)).slice(task.prompt.length);
    expect(rewardNow(env, task, finishedRollout(task, ...gold))).toEqual({
      reward: 1,
      metrics: { correct: 1, answered: 1 },
    });
    expect(rewardNow(env, task, finishedRollout(task, assistant(`${task.answer}!`))).reward).toBe(0);
    expect(rewardNow(env, task, finishedRollout(task)).metrics).toEqual({ correct: 0, answered: 0 });
  }
  await expect(createEnv(definition, { lenght: 4 })).rejects.toThrow('did you mean "length"?');
});

test("docs/environments.md's walkthrough configs load as written: the sft band names the env by its file's id", async () => {
  const docs = readFileSync(join(import.meta.dir, "../../../docs/environments.md"), "utf8");
  const blocks = [...docs.matchAll(/```toml\n(output_dir = "outputs\/(sft|rl)_reverse"[\s\S]*?)```/g)];
  expect(blocks.map((b) => b[2])).toEqual(["sft", "rl"]);
  const dir = mkdtempSync(join(tmpdir(), "rlx-docs-reverse-"));
  const cwd = process.cwd();
  try {
    symlinkSync(join(import.meta.dir, "../../../examples"), join(dir, "examples"));
    for (const [, text, kind] of blocks) writeFileSync(join(dir, `${kind}.toml`), text!);
    process.chdir(dir); // the configs name the env file relative to where rlx runs
    const sft = await loadSftRun("sft.toml");
    expect(sft.eval!.env[0]!.name).toBe("reverse");
    const rl = loadConfig("rl.toml");
    await loadCustomEnvs(rl.config, "rl.toml");
    expect(rl.config.orchestrator.train.env[0]!.name).toBe("reverse");
    expect(rl.config.orchestrator.eval!.greedy).toBe(true);
  } finally {
    process.chdir(cwd);
    rmSync(dir, { recursive: true, force: true });
  }
});
