// The `forth` environment: a terminal-like coding env. The model writes Forth, runs it with the
// `forth` tool, reads the interpreter's output, and answers; the reward is on the final answer.
// Tool outputs are deterministic and structured (printed text, stacks, error messages), which is
// what ECHO learns to predict. Example task (kind "factorial"):
//
//   user:      Use Forth to compute 7 factorial. ...
//   assistant: <tool_call>{"name": "forth", "arguments": {"code": ": FACT ... ; 7 FACT ."}}</tool_call>
//   tool:      5040 \nstack: <0>
//   assistant: Answer: 5040
import { z } from "zod";
import { toolCall } from "../../data/chat.ts";
import { finalReply, gradeReply, parseInteger } from "../answer.ts";
import { generateSplit, loadJsonlSplit, promptMessages, sampleTasks } from "../tasks.ts";
import { runToolCall } from "../tools.ts";
import type { EnvDefinition, Task } from "../types.ts";
import { DEFAULT_LIMITS, runForth } from "./interpreter.ts";
import { FORTH_KINDS, makeForthTask } from "./tasks.ts";
import { forthTool } from "./tool.ts";

export const FORTH_SYSTEM_PROMPT =
  "You solve problems by writing and running Forth code with the `forth` tool. Each call runs on a fresh interpreter, " +
  "so include every definition you need. When you know the result, reply without a tool call and end with a line `Answer: <result>`.";

const Args = z.strictObject({
  kinds: z
    .array(z.enum(FORTH_KINDS))
    .min(1)
    .default([...FORTH_KINDS]),
  train_size: z.number().int().positive().default(2000),
  eval_size: z.number().int().positive().default(100),
  eval_fraction: z.number().gt(0).lt(1).default(0.2),
  max_turns: z.number().int().min(1).default(4),
  max_steps: z.number().int().positive().default(DEFAULT_LIMITS.maxSteps),
  /** Replaces FORTH_SYSTEM_PROMPT; "" leaves the system message out (the tool schema stays). */
  system_prompt: z.string().optional(),
  data_file: z.string().optional(),
});

type ForthArgs = z.infer<typeof Args>;

function forthTask(
  system: string,
  key: string,
  question: string,
  answer: string,
  numeric: boolean,
  program?: string,
): Task {
  return {
    id: key,
    prompt: promptMessages(system, question),
    answer,
    solution: program ? `Run this program:\n${program}\nIt prints ${answer}.` : undefined,
    info: { numeric, ...(program ? { program } : {}) },
  };
}

const forth: EnvDefinition<ForthArgs> = {
  id: "forth",
  description:
    "write and run Forth with a `forth` tool (interpreter outputs as observations); reward on the final answer",
  args: Args,
  create(args) {
    const tool = forthTool({ ...DEFAULT_LIMITS, maxSteps: args.max_steps });
    const system = args.system_prompt ?? FORTH_SYSTEM_PROMPT;
    return {
      tools: [tool],
      maxTurns: args.max_turns,
      async load(split, seed) {
        if (args.data_file) {
          const rows = loadJsonlSplit(args.data_file, split, args.eval_fraction);
          const size = split === "train" ? args.train_size : args.eval_size;
          return sampleTasks(rows, seed, size).map((row) =>
            forthTask(system, row.id!, row.question, row.answer, parseInteger(row.answer) !== undefined),
          );
        }
        const size = split === "train" ? args.train_size : args.eval_size;
        return generateSplit("forth", split, seed, size, args.eval_fraction, (rng) => {
          const spec = makeForthTask(rng, args.kinds);
          const answer = runForth(spec.program).output.trim();
          return forthTask(system, spec.key, spec.question, answer, spec.numeric, spec.program);
        });
      },
      reward(task, rollout) {
        const grade = gradeReply(finalReply(rollout.messages), task.answer, task.info?.numeric === true);
        return { reward: grade.correct, metrics: grade };
      },
      async demonstrate(task) {
        const program = task.info?.program;
        if (typeof program !== "string")
          return [...task.prompt, { role: "assistant", content: `Answer: ${task.answer}` }];
        const call = toolCall("forth", { code: program });
        const observation = await runToolCall([tool], call, task);
        return [
          ...task.prompt,
          { role: "assistant", content: "", tool_calls: [call] },
          observation.message,
          { role: "assistant", content: `Answer: ${task.answer}` },
        ];
      },
    };
  },
};

export default forth;
