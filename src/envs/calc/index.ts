// The `calc` environment: a lean tool env in which what the tool returns is the skill the reward
// needs, so that ECHO (cross-entropy on the tool's outputs) has something to teach. A task adds
// three numbers; the model may hand two of them to a calculator once, and must add the third
// itself. The reward is on the final answer:
//
//   user:      47+18+25=
//   assistant: 47+18          a call: a turn with no `=` (two numbers joined by `+`)
//   tool:      =65            the calculator's answer (`=?` for a call it cannot read)
//   assistant: +25=90         the answer: the number after the turn's last `=`
//
// Read as one text the episode is the scratchpad `47+18+25=47+18=65+25=90`. With `tool = false`
// the env is single-turn, the prompt says so (`no tool: 47+18+25=`, so that a model taught both
// forms knows which one is asked) and the model writes that scratchpad itself (`47+18=65+25=90`):
// a held-out eval without the tool asks for exactly the numbers the tool showed during training.
// GRPO alone trains the model's own turns (the last sum), ECHO also the tool's.
//
// The env answers turns itself (the step-driven shape, `open`), which keeps an episode at ~25 byte
// tokens with a bare template instead of a tool-call JSON block. Use configs/templates/bare_tool.jinja,
// which marks the calculator's turn with a token the model never writes: with bare.jinja the
// calculator's `=65` follows the model's end token with nothing between, so it reads as the model's
// own continuation, and ECHO's cross-entropy on it taught the policy to stop calling the tool
// (docs/results.md §7).
import { z } from "zod";
import type { ChatMessage } from "../../data/chat.ts";
import { parseInteger } from "../answer.ts";
import { generateSplit, promptMessages } from "../tasks.ts";
import type { EnvDefinition, EnvSession, Task } from "../types.ts";

const Args = z.strictObject({
  digits: z.number().int().min(1).max(6).default(2),
  /** false: single-turn, no calculator; the reply is the whole scratchpad (or the answer alone). */
  tool: z.boolean().default(true),
  train_size: z.number().int().positive().default(5000),
  eval_size: z.number().int().positive().default(200),
  eval_fraction: z.number().gt(0).lt(1).default(0.2),
  system_prompt: z.string().optional(),
});

type CalcArgs = z.infer<typeof Args>;

/** What starts the prompt of the form without the calculator. */
export const NO_TOOL = "no tool: ";

/** The calculator: `=<sum>` for two numbers joined by `+`, `=?` for anything else. */
export function calculate(call: string): string {
  const match = /^(\d{1,9})\+(\d{1,9})$/.exec(call.trim());
  return match ? `=${Number(match[1]) + Number(match[2])}` : "=?";
}

/** A turn with no `=` is a call; any other turn is an answer. */
const isCall = (text: string) => !text.includes("=") && text.trim().length > 0;

/** The number an answer turn gives: after its last `=`, or the whole turn when it has none. */
export function answerOf(text: string): number | undefined {
  return parseInteger(text.slice(text.lastIndexOf("=") + 1).trim());
}

/** The gold conversation: the call and the rest with the tool, the whole scratchpad without. */
export function calcDemo(task: Task, tool: boolean): ChatMessage[] {
  const [a, b, c] = task.info!.terms as number[];
  const partial = a! + b!;
  if (!tool) return [...task.prompt, { role: "assistant", content: `${a}+${b}=${partial}+${c}=${task.answer}` }];
  return [
    ...task.prompt,
    { role: "assistant", content: `${a}+${b}` },
    { role: "tool", content: calculate(`${a}+${b}`) },
    { role: "assistant", content: `+${c}=${task.answer}` },
  ];
}

const calc: EnvDefinition<CalcArgs> = {
  id: "calc",
  description:
    "lean three-term addition with a one-call calculator (step-driven); reward on the final number; tool = false for the same task without it",
  args: Args,
  create(args) {
    const lo = args.digits === 1 ? 0 : 10 ** (args.digits - 1);
    const hi = 10 ** args.digits - 1;
    return {
      tools: [],
      maxTurns: args.tool ? 2 : 1,
      async load(split, seed) {
        const size = split === "train" ? args.train_size : args.eval_size;
        return generateSplit("calc", split, seed, size, args.eval_fraction, (rng) => {
          const terms = [rng.int(lo, hi), rng.int(lo, hi), rng.int(lo, hi)];
          const expression = terms.join("+");
          const prompt = promptMessages(args.system_prompt, `${args.tool ? "" : NO_TOOL}${expression}=`);
          return { id: expression, prompt, answer: String(terms[0]! + terms[1]! + terms[2]!), info: { terms } };
        });
      },
      // One call at most: a second call-shaped turn is an answer (and a wrong one).
      ...(args.tool && {
        async open(): Promise<EnvSession> {
          let called = false;
          return {
            async step(reply) {
              if (called || !isCall(reply.content)) return { messages: [], reward: 0, done: true };
              called = true;
              return { messages: [{ role: "tool", content: calculate(reply.content) }], reward: 0, done: false };
            },
            async close() {},
          };
        },
      }),
      reward(task, rollout) {
        const turns = rollout.messages.filter((m) => m.role === "assistant");
        const last = turns.at(-1)?.content ?? "";
        const answered = turns.length > 0 && !(args.tool && turns.length === 1 && isCall(last));
        const correct = answered && answerOf(last) === Number(task.answer) ? 1 : 0;
        const called = args.tool && turns.length > 0 && isCall(turns[0]!.content) ? 1 : 0;
        // The scratchpad's first sum, where the model wrote one (the number the tool would give).
        const [a, b] = task.info!.terms as number[];
        const written = /^\s*\d+\+\d+=(\d+)/.exec(turns[0]?.content ?? "")?.[1];
        const metrics: Record<string, number> = { correct, answered: answered ? 1 : 0, called };
        if (written !== undefined) metrics.partial_correct = Number(written) === a! + b! ? 1 : 0;
        return { reward: correct, metrics };
      },
      async demonstrate(task) {
        return calcDemo(task, args.tool);
      },
    };
  },
};

export default calc;
