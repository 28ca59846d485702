// Demonstrations that teach a small model to judge the calc env (experiments/judges/calc_check.ts):
// for each task of a split, a rollout the policy could have written, right or wrong in the ways a
// calc student is (the gold episode, a final sum off by a little, a wrong call carried through, the
// scratchpad written without the calculator, a second call instead of an answer), labelled by the
// env's own exact reward; then the conversation the judge should have about it (calc_check.ts): the
// rollout as one line, a check of its final claim against the task's sum, for a wrong one with a
// calculator call a check of the call's sum against the task's first two numbers, and `yes` exactly
// when the exact reward is 1, else `no K` with K the policy's turn that decided it (the call when the
// calculator's sum was not the task's first two numbers', else the answer). About half the
// rollouts are right (exactly half with --balanced), so a judge that always says the same thing
// scores a balanced accuracy of 0.5. Chat-messages JSONL for `rlx sft`, each line with its label
// and kind.
//
//   bun experiments/scripts/judge_calc_demos.ts OUT.jsonl [--n 6000] [--split train] [--seed 0] [--balanced]
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { ChatMessage } from "../../src/data/chat.ts";
import type { Rollout, Task } from "../../src/data/types.ts";
import calc, { answerOf } from "../../src/envs/calc/index.ts";
import { createEnv } from "../../src/envs/index.ts";
import { Rng } from "../../src/envs/random.ts";
import type { Env } from "../../src/envs/types.ts";
import { check, judgeQuestion } from "../judges/calc_check.ts";

/** The ways a rollout is written: `gold` and `direct_right` are right, the others wrong. */
export const KINDS = ["gold", "direct_right", "final_off", "call_off", "direct_off", "second_call"] as const;
export type Kind = (typeof KINDS)[number];

const OFFSETS = [1, 2, 3, 9, 10, 11, 20];

/** The policy's turns and the calculator's answers for a rollout of `kind`. */
export function rolloutTurns(task: Task, kind: Kind, rng: Rng): ChatMessage[] {
  const [a, b, c] = task.info!.terms as [number, number, number];
  const off = () => rng.pick(OFFSETS) * (rng.next() < 0.5 ? -1 : 1);
  const sum = a + b + c;
  const called = (partial: number, answer: string): ChatMessage[] => [
    { role: "assistant", content: `${a}+${partial - a}` },
    { role: "tool", content: `=${partial}` },
    { role: "assistant", content: answer },
  ];
  switch (kind) {
    case "gold":
      return called(a + b, `+${c}=${sum}`);
    case "direct_right":
      return [{ role: "assistant", content: `${a}+${b}=${a + b}+${c}=${sum}` }];
    case "final_off":
      return called(a + b, `+${c}=${Math.max(0, sum + off())}`);
    case "call_off": {
      const partial = Math.max(a, a + b + off());
      return called(partial, `+${c}=${partial + c}`);
    }
    case "direct_off":
      return [{ role: "assistant", content: `${a}+${b}=${a + b}+${c}=${Math.max(0, sum + off())}` }];
    case "second_call":
      return called(a + b, `${a + b}+${c}`);
  }
}

/** A finished rollout of the calc env with these turns (what its reward reads). */
export function calcRollout(task: Task, turns: ChatMessage[]): Rollout {
  return {
    ...{ id: task.id, env: "calc", taskId: task.id, groupId: task.id, task, segments: [], numSamples: 1 },
    ...{ messages: [...task.prompt, ...turns], reward: 0, metrics: {}, stopReason: "done", policyVersion: 0 },
    ...{ numTurns: turns.filter((m) => m.role === "assistant").length, info: {} },
  };
}

/** The policy's turn that decided a wrong rollout: its call when the calculator's sum was not the
 * task's first two numbers' (a wrong or unreadable call), else its last turn (the answer, or a
 * one-turn rollout's scratchpad). */
export function decisiveTurn(task: Task, rollout: Pick<Rollout, "messages">): number {
  const [a, b] = task.info!.terms as number[];
  const turns = rollout.messages.filter((m) => m.role === "assistant").length;
  const sum = rollout.messages.find((m) => m.role === "tool")?.content;
  return turns < 2 ? 1 : sum === `=${a! + b!}` ? 2 : 1;
}

/** The judge's conversation about a rollout whose exact reward is `label`: it checks the final
 * claim against the task's sum; when that is wrong and the rollout called the calculator, it checks
 * the call's sum against the task's first two numbers; then the verdict. */
export function judgeDemo(task: Task, rollout: Rollout, label: number): ChatMessage[] {
  const [a, b] = task.info!.terms as number[];
  const turns = rollout.messages.filter((m) => m.role === "assistant");
  const claim = answerOf(turns.at(-1)?.content ?? "") ?? "";
  const messages: ChatMessage[] = [{ role: "user", content: judgeQuestion(rollout) }];
  const ask = (call: string) => {
    messages.push({ role: "assistant", content: call }, { role: "tool", content: check(call) });
    return messages.at(-1)!.content === "right";
  };
  const claimRight = ask(`${(task.info!.terms as number[]).join("+")}=${claim}`);
  if (claimRight !== (label === 1))
    throw new Error(`task ${task.id}: the check of ${claim} disagrees with the exact reward`);
  let verdict = "yes";
  if (!claimRight) {
    const sum = rollout.messages.find((m) => m.role === "tool")?.content;
    const decisive = decisiveTurn(task, rollout);
    if (turns.length > 1 && ask(`${a}+${b}=${/^=(\d+)$/.exec(sum ?? "")?.[1] ?? ""}`) !== (decisive === 2))
      throw new Error(`task ${task.id}: the check of the call disagrees with its decisive turn`);
    verdict = `no ${decisive}`;
  }
  messages.push({ role: "assistant", content: verdict });
  return messages;
}

export interface JudgeDemo {
  messages: ChatMessage[];
  label: number;
  kind: Kind;
  task_id: string;
}

/** `n` demonstrations over the split's tasks (cycled), half of them right: about half, or with
 * `balanced` exactly (every other one), so that accuracy on them is balanced accuracy. */
export async function judgeDemos(
  env: Env,
  n: number,
  split: "train" | "eval",
  seed: number,
  balanced = false,
): Promise<JudgeDemo[]> {
  const tasks = await env.load(split, seed);
  const rng = new Rng(seed + 1);
  const demos: JudgeDemo[] = [];
  for (let i = 0; i < n; i++) {
    const task = tasks[i % tasks.length]!;
    const right = balanced ? i % 2 === 0 : rng.next() < 0.5;
    const kind: Kind = right ? (rng.next() < 0.8 ? "gold" : "direct_right") : rng.pick(KINDS.slice(2));
    const rollout = calcRollout(task, rolloutTurns(task, kind, rng));
    const label = (await env.reward(task, rollout)).reward;
    demos.push({ messages: judgeDemo(task, rollout, label), label, kind, task_id: task.id });
  }
  return demos;
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      n: { type: "string", default: "6000" },
      split: { type: "string", default: "train" },
      seed: { type: "string", default: "0" },
      args: { type: "string", default: "{}" },
      balanced: { type: "boolean", default: false },
    },
  });
  const out = positionals[0];
  if (!out || (values.split !== "train" && values.split !== "eval"))
    throw new Error(
      "usage: judge_calc_demos.ts OUT.jsonl [--n 6000] [--split train|eval] [--seed 0] [--args JSON] [--balanced]",
    );
  const env = await createEnv(calc, JSON.parse(values.args!));
  const demos = await judgeDemos(env, Number(values.n), values.split, Number(values.seed), values.balanced);
  writeFileSync(out, demos.map((d) => JSON.stringify({ ...d, env: "calc-judge" })).join("\n") + "\n");
  const right = demos.filter((d) => d.label === 1).length;
  console.log(`${demos.length} judge demos (${right} right, ${demos.length - right} wrong) -> ${out}`);
}
