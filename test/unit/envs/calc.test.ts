// The calc env: three-term tasks split by key, a calculator that adds two numbers once per
// episode, a reward on the final number, and (through the real rollout driver and the bare
// template) an episode whose tokens read as the scratchpad and whose tool tokens are exactly what
// ECHO weights. The completions are scripted (test/fixtures/scripted_client.ts) so the layout is known.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Echo } from "../../../src/algorithms/echo.ts";
import calc, { answerOf, calculate, calcDemo, NO_TOOL } from "../../../src/envs/calc/index.ts";
import { createEnv } from "../../../src/envs/index.ts";
import type { Env, Task } from "../../../src/envs/types.ts";
import { runRollout } from "../../../src/rollout/driver.ts";
import { ScriptedClient } from "../../fixtures/scripted_client.ts";
import { assistant, byteRenderer, finishedRollout, rewardNow } from "./helpers.ts";

const template = (name: string) => readFileSync(join(import.meta.dir, `../../../configs/templates/${name}`), "utf8");
const renderer = byteRenderer(template("bare.jinja"));
const task: Task = {
  id: "47+18+25",
  prompt: [{ role: "user", content: "47+18+25=" }],
  answer: "90",
  info: { terms: [47, 18, 25] },
};
const sampling = { maxTokens: 16, temperature: 1, topP: 1, topK: 0, seed: 3 };
const roll = (env: Env, replies: string[], by = renderer) =>
  runRollout({
    id: "r1",
    groupId: "g1",
    envId: "calc",
    env,
    task,
    client: new ScriptedClient(by, replies),
    renderer: by,
    sampling,
  });

describe("calc env", () => {
  test("tasks add three numbers of `digits` digits; train and eval share none; a seed repeats its tasks", async () => {
    const env = await createEnv(calc, {});
    const tasks = await env.load("train", 2);
    expect(tasks).toHaveLength(5000);
    for (const t of tasks.slice(0, 50)) {
      const terms = t.info!.terms as number[];
      expect(terms.every((x) => x >= 10 && x <= 99)).toBe(true);
      expect(t.prompt).toEqual([{ role: "user", content: `${terms.join("+")}=` }]);
      expect(Number(t.answer)).toBe(terms[0]! + terms[1]! + terms[2]!);
    }
    expect((await env.load("train", 2)).map((t) => t.id)).toEqual(tasks.map((t) => t.id));
    const evalIds = new Set((await env.load("eval", 2)).map((t) => t.id));
    expect(tasks.some((t) => evalIds.has(t.id))).toBe(false);
  });

  test("the calculator adds two numbers and nothing else; an answer is the number after the last `=`", () => {
    expect(calculate("47+18")).toBe("=65");
    expect(calculate(" 99+99 ")).toBe("=198");
    for (const call of ["47+18+25", "47-18", "47*18", "forty+one", ""]) expect(calculate(call)).toBe("=?");
    expect(answerOf("+25=90")).toBe(90);
    expect(answerOf("47+18=65+25=90")).toBe(90);
    expect(answerOf("90")).toBe(90);
    expect(answerOf("47+18")).toBeUndefined();
  });

  test("an episode with the calculator: its tokens read as the scratchpad, and ECHO weights the tool's tokens alone", async () => {
    const env = await createEnv(calc, {});
    const rollout = await roll(env, ["47+18", "+25=90"]);
    expect(rollout.error).toBeUndefined();
    expect(rollout.messages.slice(1)).toEqual([
      { role: "assistant", content: "47+18" },
      { role: "tool", content: "=65" },
      { role: "assistant", content: "+25=90" },
    ]);
    expect(rollout.reward).toBe(1);
    expect(rollout.metrics).toMatchObject({ correct: 1, answered: 1, called: 1, num_turns: 2 });
    const tokenIds = rollout.segments.flatMap((s) => s.tokenIds);
    expect(renderer.tokenizer.decode(tokenIds)).toBe("47+18+25=47+18<|im_end|>=65+25=90<|im_end|>");

    const echo = new Echo(Echo.schema.parse({ type: "echo" }));
    const weights_N = echo.observationWeights(rollout);
    const weighted = tokenIds.filter((_, i) => weights_N[i]! > 0);
    expect(renderer.tokenizer.decode(weighted)).toBe("=65");
    expect(weights_N.filter((w) => w > 0).every((w) => w === 0.1)).toBe(true);
  });

  test("bare_tool.jinja marks the tool's turn with a token the model never writes, and ECHO leaves the mark out", async () => {
    const marked = byteRenderer(template("bare_tool.jinja"));
    const rollout = await roll(await createEnv(calc, {}), ["47+18", "+25=90"], marked);
    expect(rollout.reward).toBe(1);
    const tokenIds = rollout.segments.flatMap((s) => s.tokenIds);
    expect(marked.tokenizer.decode(tokenIds)).toBe("47+18+25=47+18<|im_end|><|im_start|>=65+25=90<|im_end|>");
    const weights_N = new Echo(Echo.schema.parse({ type: "echo" })).observationWeights(rollout);
    expect(marked.tokenizer.decode(tokenIds.filter((_, i) => weights_N[i]! > 0))).toBe("=65");
  });

  test("one call per episode: a second call is a (wrong) answer; a call cut off is no answer", async () => {
    const env = await createEnv(calc, {});
    const twice = await roll(env, ["47+18", "65+25"]);
    expect(twice.messages.filter((m) => m.role === "tool")).toHaveLength(1);
    expect(twice.reward).toBe(0);
    expect(twice.metrics).toMatchObject({ correct: 0, answered: 1, called: 1 });
    const bad = await roll(env, ["47+18+25", "90"]);
    expect(bad.messages[2]).toEqual({ role: "tool", content: "=?" });
    expect(bad.reward).toBe(1); // a failed call still leaves the model to answer
    expect(rewardNow(env, task, finishedRollout(task, assistant("47+18"))).metrics.answered).toBe(0);
    const direct = await roll(env, ["47+18=65+25=90"]);
    expect(direct.metrics).toMatchObject({ correct: 1, called: 0, num_turns: 1, partial_correct: 1 });
  });

  test("without the tool the episode is one turn: the whole scratchpad, graded on its last number", async () => {
    const env = await createEnv(calc, { tool: false });
    expect(env.open).toBeUndefined();
    expect(env.maxTurns).toBe(1);
    // the same tasks, the prompt saying which form is asked (a model taught both must know)
    const [withTool, without] = [await (await createEnv(calc, {})).load("eval", 0), await env.load("eval", 0)];
    expect(without.map((t) => t.id)).toEqual(withTool.map((t) => t.id));
    for (const [i, t] of without.entries())
      expect(t.prompt[0]!.content).toBe(`${NO_TOOL}${withTool[i]!.prompt[0]!.content as string}`);
    const right = await roll(env, ["47+18=65+25=90"]);
    expect(right.metrics).toMatchObject({ correct: 1, called: 0, partial_correct: 1 });
    const wrongPartial = await roll(env, ["47+18=64+25=89"]);
    expect(wrongPartial.metrics).toMatchObject({ correct: 0, partial_correct: 0 });
    const call = await roll(env, ["47+18"]);
    expect(call.reward).toBe(0);
  });

  test("the demonstrations are graded correct in both forms", async () => {
    for (const tool of [true, false]) {
      const env = await createEnv(calc, { tool });
      for (const t of (await env.load("eval", 0)).slice(0, 20)) {
        const demo = calcDemo(t, tool);
        expect(rewardNow(env, t, finishedRollout(t, ...demo.slice(1))).reward).toBe(1);
        if (tool) expect(demo[2]).toEqual({ role: "tool", content: calculate(demo[1]!.content as string) });
      }
    }
  });
});
