// examples/envs/reverse.ts, the single-turn example docs/environments.md walks through: it loads in
// the kit form with its args schema, its splits never share a word and are the same for a seed,
// its gold demonstrations earn reward 1, and a wrong or missing reply earns 0.
import { expect, test } from "bun:test";
import { join } from "node:path";
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
