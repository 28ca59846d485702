// The lean calc judge (experiments/judges/calc_check.ts), the demonstrations that teach it
// (experiments/scripts/judge_calc_demos.ts) and the env that scores it (experiments/envs/calc_judging.ts):
// on calc rollouts made by the real rollout driver, a scripted judge endpoint that does what the
// demonstrations show reproduces the exact reward, and its conversation is the demonstration the
// writer produces for that rollout, turn for turn, so a model taught the demonstrations is taught the
// conversation it will have; the judging env replays a demonstration to reward 1.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OpenAIChatClient } from "../../../src/clients/chat_client.ts";
import { CallGate } from "../../../src/clients/gate.ts";
import calc from "../../../src/envs/calc/index.ts";
import { createEnv, loadEnv } from "../../../src/envs/index.ts";
import type { Env, Task } from "../../../src/envs/types.ts";
import { createJudge } from "../../../src/judges/index.ts";
import { judgedEnv } from "../../../src/judges/judge.ts";
import { judgeSchema } from "../../../src/judges/schema.ts";
import { runRollout } from "../../../src/rollout/driver.ts";
import { addAll, verdictOf } from "../../../experiments/judges/calc_check.ts";
import { judgeDemo, judgeDemos, KINDS } from "../../../experiments/scripts/judge_calc_demos.ts";
import { type ChatBody, type JudgeReply, type JudgeServer, startJudgeServer } from "../../fixtures/judge_server.ts";
import { ScriptedClient } from "../../fixtures/scripted_client.ts";
import { byteRenderer } from "../envs/helpers.ts";

const ROOT = join(import.meta.dir, "../../..");
const renderer = byteRenderer(readFileSync(join(ROOT, "configs/templates/bare_tool.jinja"), "utf8"));
let server: JudgeServer | undefined;
afterEach(() => server?.stop());

/** What the demonstrations teach: call the task's numbers, then `yes` when the sums agree. */
function taughtRule(body: ChatBody): JudgeReply {
  const question = body.messages[0]!.content;
  const tool = body.messages.findLast((m) => m.role === "tool");
  if (!tool) return { content: question.slice(0, question.indexOf("=")) };
  const written = /=(\d+) \?$/.exec(question)?.[1];
  return { content: written !== undefined && `=${written}` === tool.content ? "yes" : "no" };
}

async function judged(rule: (body: ChatBody) => JudgeReply, maxTurns = 4): Promise<Env> {
  server = startJudgeServer(rule);
  const config = judgeSchema.parse({
    type: "custom",
    path: join(ROOT, "experiments/judges/calc_check.ts"),
    name: "judge",
    base_url: server.url,
    max_turns: maxTurns,
  });
  const exact = await createEnv(calc, {});
  const judge = await createJudge(config, new OpenAIChatClient("judge", server.url, { retries: 0 }), exact, {
    source: "test",
    path: ["judge"],
  });
  return judgedEnv(exact, judge);
}

const roll = (env: Env, task: Task, replies: string[], envId = "calc") =>
  runRollout({
    id: `r-${replies.join("|")}`,
    groupId: "g",
    envId,
    env,
    task,
    client: new ScriptedClient(renderer, replies),
    renderer,
    sampling: { maxTokens: 16, temperature: 1, topP: 1, topK: 0, seed: 1 },
    rewardGate: new CallGate({ concurrency: 4, timeoutMs: 5000 }),
  });

describe("the calc judge", () => {
  test("its calculator adds any chain of numbers; its verdict is yes or no", () => {
    expect(addAll("47+18+25")).toBe("=90");
    expect(addAll(" 47 ")).toBe("=47");
    for (const call of ["47-18", "47+", "yes", ""]) expect(addAll(call)).toBe("=?");
    expect([verdictOf(" yes\n"), verdictOf("No"), verdictOf("47+18")]).toEqual([1, 0, undefined]);
  });

  test("judging driver-made rollouts as taught gives the exact reward, in the demonstrations' own words", async () => {
    const env = await judged(taughtRule);
    const [task] = await env.load("eval", 0);
    const [a, b, c] = task!.info!.terms as number[];
    const sum = a! + b! + c!;
    const attempts = [
      [`${a}+${b}`, `+${c}=${sum}`],
      [`${a}+${b}`, `+${c}=${sum + 1}`],
      [`${a}+${b! + 2}`, `+${c}=${sum + 2}`],
      [`${a}+${b}=${a! + b!}+${c}=${sum}`],
      [`${a}+${b}`, `${a! + b!}+${c}`], // a second call: an answer without a number
    ];
    const rollouts = await Promise.all(attempts.map((replies) => roll(env, task!, replies)));
    expect(rollouts.map((r) => r.metrics.exact_reward)).toEqual([1, 0, 0, 1, 0]);
    for (const rollout of rollouts) {
      expect(rollout.error).toBeUndefined();
      expect(rollout.reward).toBe(rollout.metrics.exact_reward!);
      expect(rollout.metrics).toMatchObject({ judge_agrees: 1, judge_turns: 2, judge_tool_calls: 1 });
      expect(rollout.judge!.messages).toEqual(judgeDemo(task!, rollout, rollout.metrics.exact_reward!));
    }
  });

  test("a judge that never says yes or no fails the rollout after max_turns replies", async () => {
    const env = await judged(() => ({ content: "maybe" }), 3);
    const [task] = await env.load("eval", 0);
    const rollout = await roll(env, task!, ["1+2", "+3=6"]);
    expect(rollout.error).toContain("the calc judge gave no yes/no in 3 replies (judge.max_turns)");
    expect(server!.requests).toHaveLength(3);
  });
});

describe("the calc judge's demonstrations", () => {
  test("half are right, every kind appears, and each label is the env's exact reward for its kind", async () => {
    const env = await createEnv(calc, {});
    const demos = await judgeDemos(env, 2000, "train", 0);
    const right = demos.filter((d) => d.label === 1).length;
    expect(right / demos.length).toBeGreaterThan(0.45);
    expect(right / demos.length).toBeLessThan(0.55);
    for (const kind of KINDS) {
      const labels = new Set(demos.filter((d) => d.kind === kind).map((d) => d.label));
      expect(labels).toEqual(new Set([kind === "gold" || kind === "direct_right" ? 1 : 0]));
    }
    for (const d of demos.slice(0, 50)) expect(d.messages.at(-1)!.content).toBe(d.label === 1 ? "yes" : "no");
    const again = await judgeDemos(env, 50, "train", 0);
    expect(again.map((d) => d.messages)).toEqual(demos.slice(0, 50).map((d) => d.messages));
    const balanced = await judgeDemos(env, 200, "eval", 1, true);
    expect(balanced.filter((d) => d.label === 1)).toHaveLength(100);
  });

  test("the judging env asks each question, answers the judge's call, and rewards the verdict the label gives", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rlx-judging-"));
    try {
      const demos = await judgeDemos(await createEnv(calc, {}), 4, "eval", 0, true);
      const file = join(dir, "judge.jsonl");
      writeFileSync(file, demos.map((d) => JSON.stringify(d)).join("\n") + "\n");
      const definition = await loadEnv(join(ROOT, "experiments/envs/calc_judging.ts"));
      const env = await createEnv(definition, { train: file, eval: file });
      const tasks = await env.load("eval", 0);
      expect(tasks.map((t) => t.answer)).toEqual(["1", "0", "1", "0"]);
      for (const [i, task] of tasks.entries()) {
        const [, call, , verdict] = demos[i]!.messages.map((m) => m.content as string);
        const right = await roll(env, task, [call!, verdict!], "calc_judging");
        expect(right.messages.slice(1)).toEqual(demos[i]!.messages.slice(1));
        expect(right.reward).toBe(1);
        const wrong = await roll(env, task, [call!, verdict === "yes" ? "no" : "yes"], "calc_judging");
        expect(wrong.reward).toBe(0);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
