// Judging the calc env as an env of its own, so that the judge model of experiments/judges/calc_check.ts
// is trained and scored with rlx's own commands: `rlx sft` stops its training by a band on held-out
// judging, and `rlx eval` scores a judge. A task is one judge question written by
// experiments/scripts/judge_calc_demos.ts (a calc rollout as one line, labelled by the calc env's
// exact reward); the episode is the judge's conversation: a turn that is not a verdict is a call to
// the judge's checker, answered here as the judge class answers it. The reward is 1 when the
// verdict's yes or no is the exact reward's (`turn_named`: a `no K` naming the demonstration's K).
// On a set with as many right rollouts as wrong ones (judge_calc_demos.ts --balanced), the mean
// reward is the judge's balanced accuracy against the exact reward.
//
//   [eval]
//   env = [{ id = "experiments/envs/calc_judging.ts", args = { train = "judge-train.jsonl", eval = "judge-eval.jsonl" } }]
import { readFileSync } from "node:fs";
import type { ChatMessage } from "../../src/data/chat.ts";
import type { Task } from "../../src/data/types.ts";
import type { EnvKit } from "../../src/envs/index.ts";
import type { EnvDefinition } from "../../src/envs/types.ts";
import { check, verdictOf } from "../judges/calc_check.ts";

/** The judge tasks of a demonstrations file: its first message, the verdict it shows as the answer. */
function judgeTasks(path: string): Task[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.trim())
    .map((line, i) => {
      const demo = JSON.parse(line) as { messages: ChatMessage[]; label: number; task_id: string };
      const prompt = demo.messages.slice(0, 1);
      const answer = demo.messages.at(-1)!.content as string;
      return { id: `${i}:${demo.task_id}`, prompt, answer, info: { demo: demo.messages } };
    });
}

export default ({ z }: EnvKit): EnvDefinition<{ train: string; eval: string }> => ({
  id: "calc_judging",
  description: "judge calc rollouts (experiments/judges/calc_check.ts): 1 for the verdict the exact reward gives",
  args: z.strictObject({ train: z.string().min(1), eval: z.string().min(1) }),
  create: (args) => ({
    tools: [],
    maxTurns: 4,
    async load(split) {
      return judgeTasks(split === "train" ? args.train : args.eval);
    },
    async open() {
      return {
        async step(reply) {
          if (verdictOf(reply.content) !== undefined) return { messages: [], reward: 0, done: true };
          return { messages: [{ role: "tool", content: check(reply.content) }], reward: 0, done: false };
        },
        async close() {},
      };
    },
    reward(task, rollout) {
      const last = rollout.messages.findLast((m) => m.role === "assistant");
      const verdict = last ? verdictOf(last.content) : undefined;
      const correct = verdict?.score === verdictOf(task.answer)!.score ? 1 : 0;
      const metrics = {
        correct,
        verdict: verdict ? 1 : 0,
        calls: rollout.messages.filter((m) => m.role === "tool").length,
      };
      // a wrong rollout's verdict also names its decisive turn (what agentic credit reads)
      if (task.answer !== "yes") Object.assign(metrics, { turn_named: last?.content.trim() === task.answer ? 1 : 0 });
      return { reward: correct, metrics };
    },
    async demonstrate(task) {
      return task.info!.demo as ChatMessage[];
    },
  }),
});
