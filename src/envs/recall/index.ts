// The `recall` environment: retrieval in context, for long rows (docs/scaling.md, "Long
// context"). The prompt is a list of `key=value` records with distinct random keys, then one of
// the keys with `=`; the answer is that record's value, so it depends on a line up to the whole
// prompt back, and nothing else in the prompt helps. Lean by construction: with the byte
// tokenizer and a bare template (configs/templates/bare.jinja) a record is `key_length +
// value_length + 2` tokens, so 1,600 records of 4 + 4 make a 16k-token episode. Example:
//
//   user:      qmxe=4821\nbtaz=0937\nlohw=5512\nbtaz=
//   assistant: 0937
//
// `depth` narrows where the asked record sits (0 the first record, 1 the last), as the
// needle-in-a-haystack evaluations vary it. `demo_queries` > 1 makes each demonstration ask more
// of its records in further turns (`\nbtaz=` -> `0937`, the task's own question first): a warm
// start's SFT then supervises that many answers a task instead of one, the dense form of
// associative recall that small models learn to retrieve from. The further records are drawn with
// replacement: asking each once lets a model that cannot retrieve rule out the values already
// answered (log 8! / 8 = 1.33 nats an answer on 8 records without reading a key).
// `distractors = false` leaves out the key-matching step: every other record becomes a line of
// random letters as long, so the asked record is the prompt's only `=` line and the answer its only
// digits (a needle in a haystack).
import { z } from "zod";
import { EnvError } from "../../errors.ts";
import { finalReply, gradeReply } from "../answer.ts";
import { hashString, Rng } from "../random.ts";
import { generateSplit, promptMessages } from "../tasks.ts";
import type { ChatMessage } from "../../data/chat.ts";
import type { EnvDefinition } from "../types.ts";

const LETTERS = "abcdefghijklmnopqrstuvwxyz";

const Args = z.strictObject({
  records: z.number().int().min(1).default(100),
  key_length: z.number().int().min(1).max(12).default(4),
  value_length: z.number().int().min(1).max(12).default(4),
  /** Where the asked record may sit: [from, to] as fractions of the list. */
  depth: z.tuple([z.number().min(0).max(1), z.number().min(0).max(1)]).default([0, 1]),
  train_size: z.number().int().positive().default(1000),
  eval_size: z.number().int().positive().default(100),
  eval_fraction: z.number().gt(0).lt(1).default(0.2),
  /** Records a demonstration asks, one a turn, the task's own first, the rest drawn with
   * replacement (default 1: the task alone). */
  demo_queries: z.number().int().min(1).default(1),
  /** false: the other records are letter lines of the same length, the asked one the only record. */
  distractors: z.boolean().default(true),
  /** A system message before the records (none by default: the task is its own format). */
  system_prompt: z.string().optional(),
});

type RecallArgs = z.infer<typeof Args>;

/** One task: its records, the asked record's index, the prompt text and the answer. */
export function makeRecall(
  rng: Rng,
  args: RecallArgs,
): { records: string[]; asked: number; text: string; answer: string } {
  const word = (length: number) => Array.from({ length }, () => rng.pick([...LETTERS])).join("");
  const digits = () => Array.from({ length: args.value_length }, () => String(rng.int(0, 9))).join("");
  const [from, to] = args.depth;
  const last = args.records - 1;
  const depth = () => rng.int(Math.round(from * last), Math.round(to * last));
  let records: string[];
  let asked: number;
  if (args.distractors) {
    const keys = new Set<string>();
    while (keys.size < args.records) keys.add(word(args.key_length));
    records = [...keys].map((key) => `${key}=${digits()}`);
    asked = depth();
  } else {
    asked = depth();
    const needle = `${word(args.key_length)}=${digits()}`;
    records = Array.from({ length: args.records }, (_, i) => (i === asked ? needle : word(needle.length)));
  }
  const [key, answer] = records[asked]!.split("=");
  return { records, asked, text: `${records.join("\n")}\n${key}=`, answer: answer! };
}

const recall: EnvDefinition<RecallArgs> = {
  id: "recall",
  description:
    "retrieval in context: a long list of key=value records, then a key; exact-match reward on its value (long-context tests and runs)",
  args: Args,
  create(args) {
    const [from, to] = args.depth;
    if (from > to)
      throw new EnvError(`recall: depth [${from}, ${to}] is empty`, {
        fix: "give depth as [from, to] with from <= to",
      });
    if (args.distractors && args.records > LETTERS.length ** args.key_length)
      throw new EnvError(
        `recall: ${args.records} records need more distinct keys than ${args.key_length} letters have`,
        {
          fix: "raise key_length",
        },
      );
    return {
      tools: [],
      maxTurns: 1,
      async load(split, seed) {
        const size = split === "train" ? args.train_size : args.eval_size;
        return generateSplit("recall", split, seed, size, args.eval_fraction, (rng) => {
          const task = makeRecall(rng, args);
          const prompt = promptMessages(args.system_prompt, task.text);
          // the id names the task without holding its 16k characters again
          const id = `${hashString(task.text).toString(16)}:${task.answer}`;
          return { id, prompt, answer: task.answer, solution: task.answer, info: { depth: task.asked } };
        });
      },
      reward(task, rollout) {
        const grade = gradeReply(finalReply(rollout.messages), task.answer, false);
        return { reward: grade.correct, metrics: grade };
      },
      async demonstrate(task) {
        const turns: ChatMessage[] = [...task.prompt, { role: "assistant", content: task.answer }];
        const text = task.prompt.at(-1)!.content as string;
        const records = text
          .split("\n")
          .slice(0, -1)
          .filter((line) => line.includes("="));
        const rng = new Rng(hashString(text));
        for (let q = 1; q < args.demo_queries; q++) {
          const [key, value] = rng.pick(records).split("=");
          turns.push({ role: "user", content: `\n${key}=` }, { role: "assistant", content: value! });
        }
        return turns;
      },
    };
  },
};

export default recall;
