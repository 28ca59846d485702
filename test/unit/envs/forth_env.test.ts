// The forth env: gold programs reproduce independently computed answers, the tool formats the
// interpreter's result, demonstrations carry the real tool output, and the reward reads the final
// reply (numeric for computed values, text for predicted output).
import { describe, expect, test } from "bun:test";
import { createEnv } from "../../../src/envs/index.ts";
import forth from "../../../src/envs/forth/index.ts";
import { toolCall } from "../../../src/data/chat.ts";
import { assistant, finishedRollout, rewardNow } from "./helpers.ts";

/** Reference answers computed in plain TypeScript from the task key. */
function reference(id: string): string | undefined {
  const [kind, ...rest] = id.split(":");
  const n = rest.map(Number);
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  switch (kind) {
    case "sum_range": {
      let s = 0;
      for (let i = n[0]!; i <= n[1]!; i++) s += i;
      return String(s);
    }
    case "factorial": {
      let f = 1;
      for (let i = 2; i <= n[0]!; i++) f *= i;
      return String(f);
    }
    case "fibonacci": {
      let [a, b] = [0, 1];
      for (let i = 0; i < n[0]!; i++) [a, b] = [b, a + b];
      return String(a);
    }
    case "gcd":
      return String(gcd(n[0]!, n[1]!));
    case "collatz": {
      let x = n[0]!,
        steps = 0;
      while (x !== 1) {
        x = x % 2 ? 3 * x + 1 : x / 2;
        steps++;
      }
      return String(steps);
    }
    case "digit_sum":
      return String([...String(n[0])].reduce((s, d) => s + Number(d), 0));
    case "count_primes": {
      let c = 0;
      for (let k = 2; k <= n[0]!; k++) {
        let p = true;
        for (let d = 2; d * d <= k; d++) if (k % d === 0) p = false;
        if (p) c++;
      }
      return String(c);
    }
    case "power":
      return String(n[0]! ** n[1]!);
    default:
      return undefined;
  }
}

describe("forth env", () => {
  test("every kind's gold program prints the reference answer", async () => {
    const env = await createEnv(forth, { train_size: 1000 });
    const tasks = await env.load("train", 0);
    const kinds = new Set<string>();
    for (const task of tasks) {
      kinds.add(task.id.split(":")[0]!);
      const expected = reference(task.id);
      if (expected !== undefined) expect(task.answer).toBe(expected);
      else expect(task.answer).toMatch(/^<\d+>( -?\d+)*$/); // predict_stack: what .S prints
    }
    expect(kinds.size).toBe(9);
  });

  test("deterministic, disjoint splits; kinds can be restricted", async () => {
    const env = await createEnv(forth, { kinds: ["gcd", "power"], train_size: 300, eval_size: 50 });
    const train = await env.load("train", 3);
    expect(await env.load("train", 3)).toEqual(train);
    const ids = new Set(train.map((t) => t.id));
    expect((await env.load("eval", 3)).filter((t) => ids.has(t.id))).toEqual([]);
    expect(train.every((t) => /^(gcd|power):/.test(t.id))).toBe(true);
  });

  test("the tool shows output then stack or error; bad arguments are error observations", async () => {
    const env = await createEnv(forth, {});
    const [tool] = env.tools;
    const task = { id: "t", prompt: [], answer: "" };
    expect(tool!.spec.function.name).toBe("forth");
    expect(await tool!.run({ code: ": SQ DUP * ; 9 SQ . 4" }, task)).toEqual({
      output: "81 \nstack: <1> 4",
      isError: false,
    });
    expect(await tool!.run({ code: "1 0 /" }, task)).toEqual({
      output: "error: line 1, word /: division by zero",
      isError: true,
    });
    expect(await tool!.run({ program: "1" }, task)).toEqual({
      output: 'error: missing string argument "code"',
      isError: true,
    });
  });

  test("max_steps reaches the interpreter", async () => {
    const env = await createEnv(forth, { max_steps: 100 });
    const out = await env.tools[0]!.run({ code: ": L 1000 0 DO LOOP ; L" }, { id: "t", prompt: [], answer: "" });
    expect(out.output).toBe("error: line 1, word L: step budget exhausted (100 steps)");
  });

  test("demonstrations run the gold program through the tool and answer", async () => {
    const env = await createEnv(forth, { kinds: ["factorial"], train_size: 5, eval_size: 1 });
    const [task] = await env.load("train", 0);
    const demo = await env.demonstrate!(task!);
    expect(demo.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant"]);
    expect(demo[2]!.tool_calls).toEqual([toolCall("forth", { code: task!.info!.program as string })]);
    expect(demo[3]).toEqual({ role: "tool", name: "forth", content: `${task!.answer} \nstack: <0>` });
    expect(rewardNow(env, task!, finishedRollout(task!, ...demo.slice(2))).reward).toBe(1);
  });

  test("reward: numeric and text answers, wrong, malformed, empty, and ending on a tool call", async () => {
    const env = await createEnv(forth, { kinds: ["gcd", "predict_stack"], train_size: 50 });
    const tasks = await env.load("train", 0);
    const numeric = tasks.find((t) => t.id.startsWith("gcd"))!;
    const text = tasks.find((t) => t.id.startsWith("predict_stack"))!;
    const grade = (task: typeof numeric, ...replies: Parameters<typeof finishedRollout>[1][]) =>
      rewardNow(env, task, finishedRollout(task, ...replies));
    expect(grade(numeric, assistant(`The program printed it.\nAnswer: ${numeric.answer}`))).toEqual({
      reward: 1,
      metrics: { correct: 1, formatted: 1, answered: 1 },
    });
    expect(grade(numeric, assistant(`Answer: ${Number(numeric.answer) + 1}`)).reward).toBe(0);
    expect(grade(numeric, assistant("Answer: twelve")).reward).toBe(0);
    expect(grade(numeric, assistant("")).metrics).toEqual({ correct: 0, formatted: 0, answered: 0 });
    expect(
      grade(numeric, { role: "assistant", content: "", tool_calls: [toolCall("forth", { code: "1 ." })] }).reward,
    ).toBe(0);
    expect(grade(text, assistant(`Answer: \`${text.answer}\``)).reward).toBe(1);
    expect(grade(text, assistant(`Answer: ${text.answer.replaceAll(" ", "  ")}`)).reward).toBe(1);
    expect(grade(text, assistant(`Answer: ${text.answer} 0`)).reward).toBe(0);
  });
});
