// The `proposer` environment: proposer-solver self-play on arithmetic (docs/algorithms.md,
// "Roles"). Each episode: the `proposer` role sees a seed problem of the math env and writes a new
// expression in the math env's grammar (expression.ts: integers, + - *, parentheses); the env
// checks it; then a panel of `solvers` traces of the `solver` role each attempt it (the math
// env's prompt and grading, a \boxed{} answer). Rewards:
//
//   solver j    1 when its answer equals the expression's value, else 0
//   proposer    4 p (1 - p), p = the panel's pass rate: 1 at p = 0.5, 0 for a task every solver
//               or no solver gets (trivial or impossible); -1 for an invalid proposal (no panel).
//               With `frontier = "hardness"`: 1 - p for 0 < p < 1, else 0 (Absolute Zero's
//               learnability reward, Zhao et al. 2025): a moving target, the harder of the
//               tasks some solver still gets is worth more, so as the solver improves the same
//               task is worth less)
//
// With hierarchical_grpo (the default pairing) solver credit is centered within the panel and
// proposer credit across the group's proposals of the same seed, so a proposer's credit waits on
// its own solver panel and the group barrier on every episode's panel. Metrics: `valid`,
// `pass_rate` (of a valid proposal's panel), `frontier` (1 - |2p - 1|, 1 at p = 0.5).
// `reward` (eval, one agent) solves the seed problem itself, as the math env scores it.
//
// With `solver_env`, the solvers are groups of another train env that the orchestrator spawns, and
// the proposer's reward waits on them in the barrier book (spawned.ts).
//
// `format = "bare"` is the lean variant (as the math env's, for a model whose chat template adds
// nothing, configs/templates/bare.jinja): the solver sees `(12+5)*3=` and answers `51`, the
// proposer sees `Propose a problem like 38*17:` and answers an expression; ~4x fewer tokens.
import { z } from "zod";
import { finalReply, gradeReply } from "../answer.ts";
import { generateSplit, promptMessages } from "../tasks.ts";
import type { EnvDefinition, EpisodeContext, EpisodeResult, Task } from "../types.ts";
import { generateProblem } from "../math/generate.ts";
import { bareQuestion } from "../math/index.ts";
import { checkExpression } from "./expression.ts";
import { propose, settleProposals } from "./spawned.ts";
import { EnvError } from "../../errors.ts";

const Args = z.strictObject({
  /** Solver attempts per proposal (the panel). */
  solvers: z.number().int().min(2).default(4),
  /** Digits per number and operations per expression, for seeds and proposals alike. */
  digits: z.number().int().min(1).max(6).default(2),
  max_ops: z.number().int().min(1).max(8).default(3),
  train_size: z.number().int().positive().default(2000),
  eval_size: z.number().int().positive().default(100),
  /** chat: "Compute (12 + 5) * 3.\nPut your final answer in \\boxed{}." / bare: "(12+5)*3=" answered by "51". */
  format: z.enum(["chat", "bare"]).default("chat"),
  /** The train env whose groups solve the proposals (spawned.ts; it grades `task.answer`: math with
   * the same format); absent: the panel is solver traces inside the episode. */
  solver_env: z.string().min(1).optional(),
  /** With solver_env: the repetition penalty's weight within a group of proposals (spawned.ts). */
  diversity: z.number().min(0).default(0),
  /** The proposer's reward of its solvers' pass rate p: 4 p (1 - p), or 1 - p for 0 < p < 1. */
  frontier: z.enum(["learnability", "hardness"]).default("learnability"),
});

/** The proposer's reward for a valid proposal whose solvers' pass rate is `p` (above). */
export const frontierReward = (p: number, kind: ProposerArgs["frontier"]) =>
  kind === "hardness" ? (p > 0 && p < 1 ? 1 - p : 0) : 4 * p * (1 - p);
export type ProposerArgs = z.infer<typeof Args>;

/** The solver's prompt for an expression. */
export const solvePrompt = (expression: string, format: ProposerArgs["format"]) =>
  promptMessages(
    undefined,
    format === "bare" ? bareQuestion(expression) : `Compute ${expression}.\nPut your final answer in \\boxed{}.`,
  );

/** The proposer's prompt, around a seed problem's expression. */
export const proposePrompt = (seed: string, a: Pick<ProposerArgs, "digits" | "max_ops" | "format">) =>
  promptMessages(
    undefined,
    a.format === "bare"
      ? `Propose a problem like ${seed.replaceAll(" ", "")}:`
      : `Write a new arithmetic problem like ${seed}: numbers of at most ${a.digits} digits, + - * and parentheses, at most ${a.max_ops} operations. Make it hard enough that about half of the attempts at it fail. Reply with the expression only.`,
  );

/** One episode: a proposal, its check, its solver panel. */
export async function proposeAndSolve(
  ctx: EpisodeContext,
  a: Pick<ProposerArgs, "solvers" | "digits" | "max_ops" | "format" | "frontier">,
): Promise<EpisodeResult> {
  const reply = await ctx.turn("proposer", proposePrompt(ctx.task.info!.expression as string, a));
  const expression = reply.trim().split("\n")[0]!.replace(/=\s*$/, "").trim();
  const checked = checkExpression(expression, a.digits, a.max_ops);
  if ("error" in checked) return { rewards: { proposer: -1 }, metrics: { valid: 0 } };
  const names = Array.from({ length: a.solvers }, (_, j) => `solver${j}`);
  const answers = await Promise.all(
    names.map((trace) => ctx.turn("solver", solvePrompt(expression, a.format), { trace })),
  );
  const correct = answers.map((answer) => gradeReply(answer, String(checked.value), true).correct);
  const p = correct.reduce((s, c) => s + c, 0) / correct.length;
  const rewards: Record<string, number> = { proposer: frontierReward(p, a.frontier) };
  names.forEach((trace, j) => (rewards[trace] = correct[j]!));
  return { rewards, metrics: { valid: 1, pass_rate: p, frontier: 1 - Math.abs(2 * p - 1) } };
}

function tasks(split: "train" | "eval", seed: number, a: ProposerArgs): Promise<Task[]> | Task[] {
  const size = split === "train" ? a.train_size : a.eval_size;
  const settings = { digits: a.digits, operations: ["+", "-", "*"] as const, steps: 1, wordProblems: false };
  return generateSplit("proposer", split, seed, size, 0.2, (rng) => {
    const problem = generateProblem(rng, { ...settings, operations: [...settings.operations] });
    return {
      id: problem.expression,
      prompt: solvePrompt(problem.expression, a.format),
      answer: String(problem.answer),
      info: { expression: problem.expression },
    };
  });
}

const proposer: EnvDefinition<ProposerArgs> = {
  id: "proposer",
  description: "proposer-solver self-play on arithmetic: roles proposer (rewarded near a 0.5 pass rate) and solver",
  args: Args,
  create(a) {
    const { solver_env } = a;
    if (a.diversity > 0 && solver_env === undefined)
      throw new EnvError("proposer: diversity compares a group's proposals, which only solver_env's groups settle", {
        fix: "set solver_env (the train env that solves the proposals), or remove diversity",
      });
    return {
      tools: [],
      maxTurns: 1,
      roles: solver_env === undefined ? ["proposer", "solver"] : ["proposer"],
      load: async (split, seed) => tasks(split, seed, a),
      episode: (ctx) => (solver_env === undefined ? proposeAndSolve(ctx, a) : propose(ctx, { ...a, solver_env })),
      settle: (group) => settleProposals(group, a),
      reward(task, rollout) {
        const grade = gradeReply(finalReply(rollout.messages), task.answer, true);
        return { reward: grade.correct, metrics: grade };
      },
    };
  },
};

export default proposer;
