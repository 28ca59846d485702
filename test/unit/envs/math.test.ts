// The math env: deterministic generation for a seed, disjoint splits, answers that are the true
// value of the generated expression, difficulty settings that show in the problems, and the
// reward on correct, wrong, malformed and empty answers (and with number_reward, on any number).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EnvError } from "../../../src/errors.ts";
import { createEnv } from "../../../src/envs/index.ts";
import math from "../../../src/envs/math/index.ts";
import { toolCall } from "../../../src/data/chat.ts";
import { assistant, finishedRollout, rewardNow } from "./helpers.ts";

/** Evaluates "((12 + 3) * 4) / 5" exactly with integer arithmetic, by hand (no eval). */
function evaluate(expression: string): number {
  const tokens = expression.match(/\d+|[-+*/()]/g)!;
  let at = 0;
  const term = (): number => {
    const token = tokens[at++]!;
    if (token !== "(") return Number(token);
    const value = binary();
    at++; // ")"
    return value;
  };
  const binary = (): number => {
    let value = term();
    while (at < tokens.length && tokens[at] !== ")") {
      const op = tokens[at++]!;
      const right = term();
      value = op === "+" ? value + right : op === "-" ? value - right : op === "*" ? value * right : value / right;
    }
    return value;
  };
  return binary();
}

describe("math env", () => {
  test("the same seed gives the same tasks; another seed other tasks", async () => {
    const env = await createEnv(math, {});
    const a = await env.load("train", 7);
    expect(await env.load("train", 7)).toEqual(a);
    const b = await env.load("train", 8);
    expect(b.map((t) => t.id)).not.toEqual(a.map((t) => t.id));
    expect(a.length).toBe(5000);
  });

  test("train and eval never share a task, for any seeds", async () => {
    const env = await createEnv(math, { train_size: 2000, eval_size: 300 });
    const train = new Set((await env.load("train", 1)).map((t) => t.id));
    for (const seed of [1, 2, 3]) expect((await env.load("eval", seed)).filter((t) => train.has(t.id))).toEqual([]);
  });

  test("answers are the exact value of the expression, with division exact", async () => {
    const env = await createEnv(math, { steps: 3, operations: ["+", "-", "*", "/"], digits: 2, eval_size: 300 });
    const tasks = await env.load("eval", 0);
    let divisions = 0;
    for (const task of tasks) {
      const value = evaluate(task.id);
      expect(Number.isInteger(value)).toBe(true);
      expect(task.answer).toBe(String(value));
      expect(task.prompt.at(-1)!.content).toBe(`Compute ${task.id}.\nPut your final answer in \\boxed{}.`);
      expect(task.solution!.endsWith(`Answer: \\boxed{${value}}`)).toBe(true);
      if (task.id.includes("/")) divisions++;
    }
    expect(divisions).toBeGreaterThan(20);
  });

  test("difficulty dials: digits and steps show in the problems", async () => {
    const easy = await (
      await createEnv(math, { digits: 1, steps: 1, word_problems: false, eval_size: 20 })
    ).load("eval", 0);
    const hard = await (await createEnv(math, { digits: 4, steps: 4, eval_size: 20 })).load("eval", 0);
    for (const t of easy) expect(t.id).toMatch(/^\d [-+*] \d$/);
    for (const t of hard) {
      expect(t.id.match(/\d+/g)!.length).toBe(5);
      expect(t.id.match(/\d+/g)!.every((n) => n.length === 4 || t.id.includes("/"))).toBe(true);
    }
    const words = await (await createEnv(math, { eval_size: 20 })).load("eval", 0);
    for (const t of words) expect(t.prompt.at(-1)!.content).toMatch(/How many/);
  });

  test("reward: correct, wrong, malformed, empty, and no final reply", async () => {
    const env = await createEnv(math, {});
    const [task] = await env.load("eval", 0);
    const answer = task!.answer;
    const grade = (...replies: Parameters<typeof finishedRollout>[1][]) =>
      rewardNow(env, task!, finishedRollout(task!, ...replies));
    expect(grade(assistant(`Adding up gives \\boxed{${answer}}.`))).toEqual({
      reward: 1,
      metrics: { correct: 1, formatted: 1, answered: 1 },
    });
    expect(grade(assistant(`Answer: ${answer}`)).reward).toBe(1);
    expect(grade(assistant(`so it is\n${answer}`))).toEqual({
      reward: 1,
      metrics: { correct: 1, formatted: 0, answered: 1 },
    });
    expect(grade(assistant(`\\boxed{${Number(answer) + 1}}`))).toEqual({
      reward: 0,
      metrics: { correct: 0, formatted: 1, answered: 1 },
    });
    expect(grade(assistant("\\boxed{seven}")).reward).toBe(0);
    expect(grade(assistant(`\\boxed{${answer}`)).metrics.formatted).toBe(0); // unbalanced box: falls back to the last line
    expect(grade(assistant(""))).toEqual({ reward: 0, metrics: { correct: 0, formatted: 0, answered: 0 } });
    expect(grade({ role: "assistant", content: "", tool_calls: [toolCall("calc", {})] }).reward).toBe(0);
    expect(grade().reward).toBe(0);
  });

  test("format bare: the expression alone to complete, the answer alone as reply and demonstration, the chat format's task ids", async () => {
    const args = { operations: ["+", "-"], steps: 2 };
    const bare = await createEnv(math, { ...args, format: "bare" });
    const chat = await createEnv(math, args);
    const [bareTasks, chatTasks] = [await bare.load("eval", 3), await chat.load("eval", 3)];
    expect(bareTasks.map((t) => t.id)).toEqual(chatTasks.map((t) => t.id));
    for (const task of bareTasks) {
      expect(task.prompt).toEqual([{ role: "user", content: `${task.id.replaceAll(" ", "")}=` }]);
      expect(task.prompt[0]!.content).toMatch(/^\(\d+[-+]\d+\)[-+]\d+=$/);
      expect(Number(task.answer)).toBe(evaluate(task.id));
      const demo = await bare.demonstrate!(task);
      expect(demo.at(-1)).toEqual(assistant(task.answer));
      expect(rewardNow(bare, task, finishedRollout(task, demo.at(-1)!)).reward).toBe(1);
      expect(rewardNow(bare, task, finishedRollout(task, assistant(String(Number(task.answer) + 1)))).reward).toBe(0);
    }
    for (const extra of [{ word_problems: true }, { data_file: "tasks.jsonl" }]) {
      await expect(createEnv(math, { format: "bare", ...extra })).rejects.toThrow(
        new RegExp(`${Object.keys(extra)[0]} applies to format chat`),
      );
    }
  });

  test("demonstrations are the worked solution", async () => {
    const env = await createEnv(math, {});
    const [task] = await env.load("train", 0);
    const demo = await env.demonstrate!(task!);
    expect(demo.slice(0, -1)).toEqual(task!.prompt);
    expect(demo.at(-1)).toEqual(assistant(task!.solution!));
    expect(rewardNow(env, task!, finishedRollout(task!, demo.at(-1)!)).reward).toBe(1);
  });

  test("JSONL tasks: explicit split column wins, hashing splits the rest, bad rows are EnvErrors", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rlx-math-"));
    try {
      const file = join(dir, "tasks.jsonl");
      const rows = Array.from({ length: 40 }, (_, i) =>
        JSON.stringify({ question: `What is ${i} + ${i}?`, answer: 2 * i, ...(i < 5 ? { split: "eval" } : {}) }),
      );
      writeFileSync(file, rows.join("\n") + "\n");
      const env = await createEnv(math, { data_file: file, train_size: 100, eval_size: 100 });
      const train = await env.load("train", 0);
      const evalSet = await env.load("eval", 0);
      expect(train.length + evalSet.length).toBe(40);
      expect(evalSet.filter((t) => /What is [0-4] \+/.test(t.prompt[0]!.content)).length).toBe(5);
      expect(new Set([...train, ...evalSet].map((t) => t.id)).size).toBe(40);
      writeFileSync(file, '{"question": "no answer"}\n');
      await expect(env.load("train", 0)).rejects.toThrow(EnvError);
      await expect(env.load("train", 0)).rejects.toThrow(/tasks\.jsonl:1/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a generator space too small for the requested size is an EnvError with a fix", async () => {
    const env = await createEnv(math, { digits: 1, operations: ["+"], eval_size: 500 });
    await expect(env.load("eval", 0)).rejects.toThrow(/found only \d+ distinct eval tasks/);
  });

  test("number_reward: a wrong number earns it, a right one 1, text that is no number 0", async () => {
    const env = await createEnv(math, { number_reward: 0.2 });
    const [task] = await env.load("eval", 0);
    const grade = (text: string) => rewardNow(env, task!, finishedRollout(task!, assistant(text)));
    expect(grade(`\\boxed{${task!.answer}}`).reward).toBe(1);
    expect(grade(`x7`)).toEqual({ reward: 0.2, metrics: { correct: 0, formatted: 0, answered: 1, number: 1 } });
    expect(grade(`${Number(task!.answer) + 1}`).reward).toBe(0.2);
    expect(grade(`no digits here`)).toEqual({
      reward: 0,
      metrics: { correct: 0, formatted: 0, answered: 1, number: 0 },
    });
    expect(grade(`1 and 2`).reward).toBe(0); // two numbers: no single answer
    await expect(createEnv(math, { number_reward: 1.5 })).rejects.toThrow(/number_reward/);
  });
});
