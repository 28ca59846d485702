// The recall env: the asked key is in the prompt once, its value is the answer, the record count
// sets the length (a 16k-token episode with the byte tokenizer), depth places the asked record,
// and the reward takes the value alone.
import { describe, expect, test } from "bun:test";
import { EnvError } from "../../../src/errors.ts";
import { createEnv } from "../../../src/envs/index.ts";
import recall from "../../../src/envs/recall/index.ts";
import { assistant, finishedRollout, rewardNow } from "./helpers.ts";

describe("recall env", () => {
  test("each prompt holds the asked key's record once, and its value is the answer", async () => {
    const env = await createEnv(recall, { records: 50 });
    const tasks = await env.load("train", 3);
    expect(tasks).toHaveLength(1000);
    for (const task of tasks.slice(0, 20)) {
      const text = task.prompt[0]!.content as string;
      const lines = text.split("\n");
      expect(lines).toHaveLength(51);
      const key = lines.at(-1)!.slice(0, -1);
      const matches = lines.slice(0, -1).filter((line) => line.startsWith(`${key}=`));
      expect(matches).toEqual([`${key}=${task.answer}`]);
      expect(new Set(lines.slice(0, -1).map((line) => line.split("=")[0])).size).toBe(50);
    }
    const again = await env.load("train", 3);
    expect(again.map((t) => t.id)).toEqual(tasks.map((t) => t.id));
    const evalIds = new Set((await env.load("eval", 3)).map((t) => t.id));
    expect(tasks.some((t) => evalIds.has(t.id))).toBe(false);
  });

  test("1,600 records of 4 + 4 make a 16k-token prompt with the byte tokenizer", async () => {
    const env = await createEnv(recall, { records: 1600, train_size: 2 });
    for (const task of await env.load("train", 0))
      expect((task.prompt[0]!.content as string).length).toBe(1600 * 10 + 5);
  });

  test("depth [0, 0] asks the first record, [1, 1] the last", async () => {
    for (const [depth, index] of [
      [0, 0],
      [1, 19],
    ] as const) {
      const env = await createEnv(recall, { records: 20, depth: [depth, depth], train_size: 5 });
      for (const task of await env.load("train", 1)) expect(task.info!.depth).toBe(index);
    }
  });

  test("the reward takes the value as the final line; another value scores 0", async () => {
    const env = await createEnv(recall, { records: 10 });
    const [task] = await env.load("train", 0);
    expect(rewardNow(env, task!, finishedRollout(task!, assistant(task!.answer))).reward).toBe(1);
    const wrong = task!.answer === "0000" ? "1111" : "0000";
    expect(rewardNow(env, task!, finishedRollout(task!, assistant(wrong))).reward).toBe(0);
    const demo = await env.demonstrate!(task!);
    expect(demo.at(-1)).toEqual({ role: "assistant", content: task!.answer });
  });

  test("demo_queries asks the task's question, then records drawn with replacement, in turns", async () => {
    const env = await createEnv(recall, { records: 8, demo_queries: 9, train_size: 60 });
    let again = 0; // further turns asking the task's own key again
    const tasks = await env.load("train", 2);
    for (const task of tasks) {
      const demo = await env.demonstrate!(task);
      expect(demo.slice(0, 2)).toEqual([...task.prompt, { role: "assistant", content: task.answer }]);
      expect(demo).toHaveLength(2 * 9);
      const lines = (task.prompt[0]!.content as string).split("\n");
      for (let i = 2; i < demo.length; i += 2) {
        const key = (demo[i]!.content as string).slice(1, -1);
        expect(demo[i]!.content).toBe(`\n${key}=`);
        expect(lines.slice(0, -1)).toContain(`${key}=${demo[i + 1]!.content}`);
        if (`${key}=` === lines.at(-1)) again++;
      }
      expect(await env.demonstrate!(task)).toEqual(demo); // the same task, the same turns
    }
    // each draw is the asked record with probability 1/8 (asking each record once never repeats it)
    expect(again / (8 * tasks.length)).toBeGreaterThan(0.05);
    expect(again / (8 * tasks.length)).toBeLessThan(0.25);
  });

  test("distractors = false: the asked record is the only record, the rest letter lines as long", async () => {
    const env = await createEnv(recall, { records: 40, key_length: 2, value_length: 3, distractors: false });
    const tasks = await env.load("train", 4);
    const depths = new Set<number>();
    for (const task of tasks.slice(0, 100)) {
      const lines = (task.prompt[0]!.content as string).split("\n");
      expect(lines).toHaveLength(41);
      const key = lines.at(-1)!.slice(0, -1);
      const asked = lines.findIndex((line) => line.includes("="));
      expect(lines[asked]).toBe(`${key}=${task.answer}`);
      expect(task.info!.depth).toBe(asked);
      depths.add(asked);
      const others = lines.slice(0, -1).filter((_, i) => i !== asked);
      for (const line of others) expect(line).toMatch(/^[a-z]{6}$/);
      expect((await env.demonstrate!(task)).at(-1)).toEqual({ role: "assistant", content: task.answer });
    }
    expect(depths.size).toBeGreaterThan(20); // the needle sits anywhere
    // 1,600 records with one-letter keys need no distinct keys without distractors
    await expect(createEnv(recall, { records: 1600, key_length: 1, distractors: false })).resolves.toBeDefined();
  });

  test("impossible settings are refused by name", async () => {
    await expect(createEnv(recall, { depth: [0.8, 0.2] })).rejects.toThrow(EnvError);
    await expect(createEnv(recall, { records: 30, key_length: 1 })).rejects.toThrow(/need more distinct keys/);
  });
});
