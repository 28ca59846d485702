// The `math` environment: single-turn arithmetic with an exact-match reward. Tasks come from the
// generator in generate.ts (difficulty: digits, operations, steps) or from a JSONL file of
// {question, answer[, solution]} rows. Example task (steps = 2):
//
//   user:      Compute (47 + 18) * 3.  Put your final answer in \boxed{}.
//   solution:  47 + 18 = 65.  65 * 3 = 195.  Answer: \boxed{195}
//   reward:    1 when the boxed (or last-line) number equals 195, else 0 (or `number_reward`
//              when the answer is a wrong number: shaping for a model that starts from nothing)
//
// `format = "bare"` is the lean variant for experiments that want few tokens per step: the user
// turn is the expression alone (`(47+18)*3=`) and the demonstration is the answer alone (`195`),
// about a quarter of the chat format's tokens. The model's chat template still wraps the turns;
// a model directory whose chat_template.jinja just concatenates contents (as the reproduce
// script's lean student uses, configs/templates/bare.jinja) leaves the prompt bare.
import { z } from "zod";
import { extractAnswer, finalReply, gradeReply, parseInteger } from "../answer.ts";
import { generateSplit, loadJsonlSplit, promptMessages, sampleTasks } from "../tasks.ts";
import type { EnvDefinition, Task } from "../types.ts";
import { EnvError } from "../../errors.ts";
import { generateProblem, OPERATIONS } from "./generate.ts";

const ANSWER_FORMAT = "Put your final answer in \\boxed{}.";

const Args = z.strictObject({
  digits: z.number().int().min(1).max(6).default(2),
  operations: z.array(z.enum(OPERATIONS)).min(1).default(["+", "-", "*"]),
  steps: z.number().int().min(1).max(6).default(1),
  /** chat: "Compute 47 + 18.\nPut your final answer in \\boxed{}." / bare: "47+18=" answered by "65". */
  format: z.enum(["chat", "bare"]).default("chat"),
  /** Word problems for some one-step tasks (chat format only; default true there). */
  word_problems: z.boolean().optional(),
  train_size: z.number().int().positive().default(5000),
  eval_size: z.number().int().positive().default(200),
  eval_fraction: z.number().gt(0).lt(1).default(0.2),
  system_prompt: z.string().optional(),
  /** Reward for a wrong final answer that is at least a number (a correct one gets 1): shaping
   * that gives a model starting from nothing a reward with spread (configs/debug.toml); 0 = exact match only. */
  number_reward: z.number().min(0).max(1).default(0),
  data_file: z.string().optional(),
});

type MathArgs = z.infer<typeof Args>;

/** The bare prompt of an expression: no spaces, an equals sign to complete. */
export const bareQuestion = (expression: string) => `${expression.replaceAll(" ", "")}=`;

function mathTask(
  id: string,
  question: string,
  answer: string,
  solution: string | undefined,
  system: string | undefined,
): Task {
  return { id, prompt: promptMessages(system, `${question}\n${ANSWER_FORMAT}`), answer, solution };
}

const math: EnvDefinition<MathArgs> = {
  id: "math",
  description:
    "single-turn arithmetic problems (digits, operations, steps); exact-match reward on a boxed or final-line number",
  args: Args,
  create(args) {
    const bare = args.format === "bare";
    if (bare && (args.word_problems || args.data_file)) {
      throw new EnvError(
        `math: ${args.word_problems ? "word_problems" : "data_file"} applies to format chat; a bare prompt is a generated expression alone`,
        { fix: 'drop it, or use format = "chat"' },
      );
    }
    return {
      tools: [],
      maxTurns: 1,
      async load(split, seed) {
        const size = split === "train" ? args.train_size : args.eval_size;
        if (args.data_file) {
          const rows = loadJsonlSplit(args.data_file, split, args.eval_fraction);
          return sampleTasks(rows, seed, size).map((row) =>
            mathTask(row.id!, row.question, row.answer, row.solution, args.system_prompt),
          );
        }
        const settings = {
          digits: args.digits,
          operations: args.operations,
          steps: args.steps,
          wordProblems: !bare && (args.word_problems ?? true),
        };
        return generateSplit("math", split, seed, size, args.eval_fraction, (rng) => {
          const problem = generateProblem(rng, settings);
          if (bare) {
            const answer = String(problem.answer);
            const prompt = promptMessages(args.system_prompt, bareQuestion(problem.expression));
            return { id: problem.expression, prompt, answer, solution: answer };
          }
          return mathTask(
            problem.expression,
            problem.question,
            String(problem.answer),
            problem.solution,
            args.system_prompt,
          );
        });
      },
      reward(task, rollout) {
        const reply = finalReply(rollout.messages);
        const grade = gradeReply(reply, task.answer, true);
        if (args.number_reward === 0) return { reward: grade.correct, metrics: grade };
        const extracted = reply === undefined ? undefined : extractAnswer(reply);
        const number = extracted !== undefined && parseInteger(extracted.answer) !== undefined ? 1 : 0;
        return { reward: grade.correct || args.number_reward * number, metrics: { ...grade, number } };
      },
      async demonstrate(task) {
        return [...task.prompt, { role: "assistant", content: task.solution ?? `Answer: \\boxed{${task.answer}}` }];
      },
    };
  },
};

export default math;
