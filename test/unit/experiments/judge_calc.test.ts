// The lean calc judge (experiments/judges/calc_check.ts), the demonstrations that teach it
// (experiments/scripts/judge_calc_demos.ts) and the env that scores it (experiments/envs/calc_judging.ts):
// on calc rollouts made by the real rollout driver, a scripted judge endpoint that does what the
// demonstrations show reproduces the exact reward, and its conversation is the demonstration the
// writer produces for that rollout, turn for turn, so a model taught the demonstrations is taught the
// conversation it will have; the judging env replays a demonstration to reward 1; and the credit
// algorithm built on the same conversation (experiments/algorithms/calc_credit.ts) moves a failed
// rollout's blame onto the turn the judge names.
import { afterEach, describe, expect, test } from "bun:test";
import { finishGroup, finishRollout } from "../../../src/algorithms/base.ts";
import { createAlgorithm, parseAlgoConfig } from "../../../src/algorithms/registry.ts";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OpenAIChatClient } from "../../../src/clients/chat_client.ts";
import { CallGate } from "../../../src/clients/gate.ts";
import calc, { answerOf } from "../../../src/envs/calc/index.ts";
import { createEnv, loadEnv } from "../../../src/envs/index.ts";
import type { Env, Task } from "../../../src/envs/types.ts";
import { createJudge } from "../../../src/judges/index.ts";
import { judgedEnv } from "../../../src/judges/judge.ts";
import { judgeSchema } from "../../../src/judges/schema.ts";
import { runRollout } from "../../../src/rollout/driver.ts";
import { check, verdictOf } from "../../../experiments/judges/calc_check.ts";
import { judgeDemo, judgeDemos, KINDS } from "../../../experiments/scripts/judge_calc_demos.ts";
import { type ChatBody, type JudgeReply, type JudgeServer, startJudgeServer } from "../../fixtures/judge_server.ts";
import { byteContext } from "../../fixtures/algo_context.ts";
import { ScriptedClient } from "../../fixtures/scripted_client.ts";
import { byteRenderer } from "../envs/helpers.ts";

const ROOT = join(import.meta.dir, "../../..");
const renderer = byteRenderer(readFileSync(join(ROOT, "configs/templates/bare_tool.jinja"), "utf8"));
let server: JudgeServer | undefined;
afterEach(() => server?.stop());

/** What the demonstrations teach: check the final claim against the task's sum; `yes` when right;
 * else, for a rollout that called the calculator, check the call's sum against the task's first two
 * numbers: `no 2` when right (the answer decided), `no 1` when wrong or without a call. */
function taughtRule(body: ChatBody): JudgeReply {
  const [task, ...turns] = body.messages[0]!.content.replace(/ \?$/, "").split(" | ");
  const checks = body.messages.filter((m) => m.role === "tool").map((m) => m.content);
  if (checks.length === 0) return { content: `${task}${answerOf(turns.at(-1)!) ?? ""}` };
  if (checks[0] === "right") return { content: "yes" };
  const sum = turns.length > 1 ? turns[1]! : undefined; // the calculator's answer to the call
  if (checks.length === 1 && sum !== undefined)
    return { content: `${task!.split("+").slice(0, 2).join("+")}=${/^=(\d+)$/.exec(sum)?.[1] ?? ""}` };
  return { content: `no ${checks[1] === "right" ? 2 : 1}` };
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
  test("its checker adds any chain of numbers and compares the claim; its verdict is yes or no K", () => {
    expect([check("47+18+25=90"), check(" 47=47 "), check("47+18+25=91"), check("47+18+25=")]).toEqual([
      "right",
      "right",
      "wrong",
      "wrong",
    ]);
    for (const call of ["47-18=29", "47+18", "=90", "yes", ""]) expect(check(call)).toBe("?");
    expect([verdictOf(" yes\n"), verdictOf("No"), verdictOf("no 2")]).toEqual([
      { score: 1 },
      { score: 0 },
      { score: 0, turn: 2 },
    ]);
    for (const reply of ["47+18", "yes 1", "no 0", "nope"]) expect(verdictOf(reply)).toBeUndefined();
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
      [`${a}+${b}=${a! + b!}+${c}=${sum + 3}`],
    ];
    const rollouts = await Promise.all(attempts.map((replies) => roll(env, task!, replies)));
    expect(rollouts.map((r) => r.metrics.exact_reward)).toEqual([1, 0, 0, 1, 0, 0]);
    const verdicts = rollouts.map((r) => r.judge!.messages.at(-1)!.content);
    expect(verdicts).toEqual(["yes", "no 2", "no 1", "yes", "no 2", "no 1"]);
    for (const rollout of rollouts) {
      expect(rollout.error).toBeUndefined();
      expect(rollout.reward).toBe(rollout.metrics.exact_reward!);
      expect(rollout.metrics.judge_agrees).toBe(1);
      expect(rollout.metrics.judge_tool_calls).toBe(rollout.metrics.judge_turns! - 1);
      expect(rollout.judge!.messages).toEqual(judgeDemo(task!, rollout, rollout.metrics.exact_reward!));
    }
  });

  test("a judge that never says yes or no fails the rollout after max_turns replies", async () => {
    const env = await judged(() => ({ content: "maybe" }), 3);
    const [task] = await env.load("eval", 0);
    const rollout = await roll(env, task!, ["1+2", "+3=6"]);
    expect(rollout.error).toContain("the calc judge gave no verdict in 3 replies (judge.max_turns)");
    expect(server!.requests).toHaveLength(3);
  });
});

test("calc_credit puts a failed rollout's blame on the turn the judge names, as agentic_credit's rule says", async () => {
  server = startJudgeServer(taughtRule);
  const block = {
    type: "custom",
    path: join(ROOT, "experiments/algorithms/calc_credit.ts"),
    judge: { name: "judge", base_url: server.url },
    mix: 1,
  };
  const site = { source: "run.toml", path: ["orchestrator", "algo"] };
  const { algorithm } = await createAlgorithm(parseAlgoConfig(block, site), site, { isPolicyUrl: () => false });
  const connectJudge = async (j: { name: string; base_url: string }) =>
    new OpenAIChatClient(j.name, j.base_url, { retries: 0 });
  await algorithm.setup(byteContext({ env: "calc", connectJudge, tokenizer: renderer.tokenizer, renderer }));
  const env = await createEnv(calc, {});
  const [task] = await env.load("eval", 0);
  const [a, b, c] = task!.info!.terms as number[];
  const rollouts = await Promise.all([
    roll(env, task!, [`${a}+${b}`, `+${c}=${a! + b! + c!}`]),
    roll(env, task!, [`${a}+${b! + 1}`, `+${c}=${a! + b! + c! + 1}`]), // the call was wrong
    roll(env, task!, [`${a}+${b}`, `+${c}=${a! + b! + c! + 5}`]), // the answer was wrong
  ]);
  for (const r of rollouts) await finishRollout(algorithm, r);
  await finishGroup(algorithm, rollouts);
  expect(rollouts.map((r) => r.credit!.judge.messages.at(-1)!.content)).toEqual(["yes", "no 1", "no 2"]);
  const [good, badCall, badAnswer] = rollouts;
  [2 / 3, -1 / 3, -1 / 3].forEach((A, i) => expect(rollouts[i]!.advantage!).toBeCloseTo(A, 12));
  const factors = (r: typeof good) => r!.credit!.parts.map((p) => p.factor);
  expect(factors(good)).toEqual([1, 1]);
  expect(factors(badCall)).toEqual([2, 0]); // K (1 - w_k) / sum (1 - w): all of it on turn 1
  expect(factors(badAnswer)).toEqual([0, 2]);
  for (const r of rollouts) {
    const actions = r!.advantages!.filter((_, t) => r!.advantages![t] !== 0);
    const weighted = r!.credit!.parts.flatMap((p) => new Array(p.end - p.start).fill(r!.advantage! * p.factor!));
    expect(actions).toEqual(weighted.filter((x) => x !== 0));
    expect(actions.length).toBeGreaterThan(0);
  }
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
    const verdicts = (kind: string) =>
      new Set(demos.filter((d) => d.kind === kind).map((d) => d.messages.at(-1)!.content));
    expect([...KINDS].map(verdicts)).toEqual(["yes", "yes", "no 2", "no 1", "no 1", "no 2"].map((v) => new Set([v])));
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
      expect(tasks.map((t) => t.answer.split(" ")[0])).toEqual(["yes", "no", "yes", "no"]);
      for (const [i, task] of tasks.entries()) {
        const replies = demos[i]!.messages.filter((m) => m.role === "assistant").map((m) => m.content as string);
        const right = await roll(env, task, [...replies], "calc_judging"); // the client consumes its list
        expect(right.messages.slice(1)).toEqual(demos[i]!.messages.slice(1));
        expect(right.reward).toBe(1);
        const flipped = [...replies.slice(0, -1), replies.at(-1) === "yes" ? "no" : "yes"];
        expect((await roll(env, task, flipped, "calc_judging")).reward).toBe(0);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
