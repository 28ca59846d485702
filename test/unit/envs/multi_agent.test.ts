// The multi-agent envs' episodes, driven by scripted turns (no model): nim's zero-sum outcome and
// its illegal-move rule, the proposer env's validation and its reward 4 p (1 - p) from its solver
// panel's pass rate, and the expression grammar it validates with.
import { expect, test } from "bun:test";
import type { ChatMessage } from "../../../src/data/chat.ts";
import { createEnv, loadEnv } from "../../../src/envs/index.ts";
import { playNim } from "../../../src/envs/nim/index.ts";
import { checkExpression } from "../../../src/envs/proposer/expression.ts";
import { proposeAndSolve } from "../../../src/envs/proposer/index.ts";
import type { EpisodeContext, Task } from "../../../src/envs/types.ts";

/** An episode context whose turns answer by `reply(role, trace, prompt)` and log who moved. */
function scripted(task: Task, reply: (role: string, trace: string, prompt: string) => string) {
  const log: string[] = [];
  const ctx: EpisodeContext = {
    task,
    turn: async (role: string, messages: ChatMessage[], options: { trace?: string } = {}) => {
      const trace = options.trace ?? role;
      log.push(trace);
      return reply(role, trace, String(messages.at(-1)!.content));
    },
  };
  return { ctx, log };
}

const nimTask: Task = { id: "t", prompt: [], answer: "1", info: { pile: 5 } };

test("nim: whoever takes the last stone wins, zero-sum", async () => {
  // 5 stones: first takes 1 (4 left), second 3 (1 left), first 1: first wins
  const moves = ["1", "3", "take 1"];
  const { ctx, log } = scripted(nimTask, () => moves.shift()!);
  const result = await playNim(ctx, 5, 3);
  expect(log).toEqual(["first", "second", "first"]);
  expect(result.rewards).toEqual({ first: 1, second: -1 });
  expect(result.metrics).toEqual({ first_wins: 1, illegal: 0, moves: 3 });
});

test("nim: an illegal move loses at once; an illegal opening leaves the second player without a trace", async () => {
  const late = scripted(nimTask, (role) => (role === "first" ? "2" : "5"));
  expect((await playNim(late.ctx, 5, 3)).rewards).toEqual({ first: 1, second: -1 });
  const opening = scripted(nimTask, () => "none");
  const result = await playNim(opening.ctx, 5, 3);
  expect(result.rewards).toEqual({ first: -1 });
  expect(result.metrics!.illegal).toBe(1);
});

test("nim, bare format: the pile right before the reply, the same game", async () => {
  const prompts: string[] = [];
  const { ctx } = scripted(nimTask, (_role, _trace, prompt) => {
    prompts.push(prompt);
    return "1";
  });
  const result = await playNim(ctx, 5, 3, "bare");
  expect(prompts).toEqual([
    "Take 1 to 3 stones from 5:",
    "Take 1 to 3 stones from 4:",
    "Take 1 to 3 stones from 3:",
    "Take 1 to 2 stones from 2:",
    "Take 1 to 1 stones from 1:",
  ]);
  expect(result.rewards).toEqual({ first: 1, second: -1 });
  const env = await createEnv(await loadEnv("nim"), { format: "bare" });
  const [task] = await env.load("train", 0);
  expect(task!.prompt).toEqual([{ role: "user", content: `Take 1 to 3 stones from ${task!.info!.pile}:` }]);
});

test("nim's eval reward is 1 for the winning move only", async () => {
  const env = await createEnv(await loadEnv("nim"), {});
  const [task] = await env.load("eval", 0);
  const pile = task!.info!.pile as number;
  const reward = (reply: string) =>
    env.reward(task!, { messages: [{ role: "assistant", content: reply }] } as never) as { reward: number };
  expect(reward(String(pile % 4)).reward).toBe(1);
  expect(reward(String((pile % 4) + 1 > 3 ? 1 : (pile % 4) + 1)).reward).toBe(0);
});

test("the expression grammar: the math env's integers, + - * and parentheses, exactly evaluated", () => {
  expect(checkExpression("(38 + 17) * 4 - 29", 2, 3)).toEqual({ value: 191, ops: 3 });
  expect(checkExpression("12*12", 2, 3)).toEqual({ value: 144, ops: 1 });
  expect(checkExpression("7", 2, 3)).toEqual({ error: "0 operations (1 to 3 allowed)" });
  expect(checkExpression("100 + 1", 2, 3)).toEqual({ error: "100 has more than 2 digits" });
  expect(checkExpression("(1 + 2", 2, 3)).toEqual({ error: "a parenthesis is not closed" });
  expect(checkExpression("1 / 2", 2, 3)).toEqual({ error: "unexpected /" });
  expect(checkExpression("1+1+1+1+1", 2, 3)).toEqual({ error: "4 operations (1 to 3 allowed)" });
});

const seed: Task = { id: "3 + 4", prompt: [], answer: "7", info: { expression: "3 + 4" } };
const args = {
  solvers: 4,
  digits: 2,
  max_ops: 3,
  train_size: 10,
  eval_size: 10,
  format: "chat" as const,
  frontier: "learnability" as const,
};

test("proposer: a valid proposal is solved by its panel; 2 of 4 right gives the proposer 4 p (1 - p) = 1", async () => {
  const { ctx, log } = scripted(seed, (role, trace, prompt) => {
    if (role === "proposer") return "(12 + 5) * 3\n";
    expect(prompt).toContain("Compute (12 + 5) * 3.");
    return trace === "solver0" || trace === "solver2" ? "\\boxed{51}" : "\\boxed{50}";
  });
  const result = await proposeAndSolve(ctx, args);
  expect(log).toEqual(["proposer", "solver0", "solver1", "solver2", "solver3"]);
  expect(result.rewards).toEqual({ proposer: 1, solver0: 1, solver1: 0, solver2: 1, solver3: 0 });
  expect(result.metrics).toEqual({ valid: 1, pass_rate: 0.5, frontier: 1 });
  const easy = scripted(seed, (role) => (role === "proposer" ? "1 + 1" : "\\boxed{2}"));
  const solved = await proposeAndSolve(easy.ctx, { ...args, solvers: 4 });
  expect(solved.rewards.proposer).toBe(0); // trivial: every solver gets it
  expect(solved.metrics!.frontier).toBe(0);
  const three = scripted(seed, (role, trace) => (role === "proposer" ? "9 * 9" : trace === "solver3" ? "80" : "81"));
  expect((await proposeAndSolve(three.ctx, args)).rewards.proposer).toBeCloseTo(4 * 0.75 * 0.25, 15);
});

test("proposer, bare format: the lean prompts, and a bare number graded as the chat format's boxed one", async () => {
  const prompts: string[] = [];
  const { ctx } = scripted(seed, (role, trace, prompt) => {
    prompts.push(prompt);
    if (role === "proposer") return "(12+5)*3";
    return trace === "solver0" ? "51" : "50";
  });
  const result = await proposeAndSolve(ctx, { ...args, format: "bare" });
  expect(prompts.slice(0, 2)).toEqual(["Propose a problem like 3+4:", "(12+5)*3="]);
  expect(result.rewards).toEqual({ proposer: 4 * 0.25 * 0.75, solver0: 1, solver1: 0, solver2: 0, solver3: 0 });
  const env = await createEnv(await loadEnv("proposer"), { format: "bare", train_size: 4, eval_size: 4 });
  const [task] = await env.load("train", 0);
  expect(task!.prompt).toEqual([{ role: "user", content: `${task!.id.replaceAll(" ", "")}=` }]);
});

test("proposer: an invalid proposal gets -1 and no solver panel", async () => {
  const { ctx, log } = scripted(seed, () => "the answer is a lot");
  const result = await proposeAndSolve(ctx, args);
  expect(log).toEqual(["proposer"]);
  expect(result).toEqual({ rewards: { proposer: -1 }, metrics: { valid: 0 } });
});
