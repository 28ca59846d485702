// Agentic credit that changes training, through `rlx train`: a multi-turn env (a TypeScript env in
// the step-driven shape, `open`: it asks "Again." after each of the model's first two turns) and a
// scripted credit judge that weighs odd steps 1 and even steps 0.25. In the audit records of
// rollouts with several turns, each part's factor differs from 1 as the rule says (A >= 0: credit
// K w_k / sum w; A < 0: blame K (1 - w_k) / sum (1 - w)), and every action token of part k carries
// the rollout's advantage times that factor: the judge's weights reach the trained tokens.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { CREDIT_SYSTEM_PROMPT } from "../../src/algorithms/agentic_credit.ts";
import { type ChatBody, type JudgeServer, startJudgeServer } from "../fixtures/judge_server.ts";
import { readAudit, rlx, sharedWorkspace, writeConfig } from "./train_helpers.ts";

const ws = sharedWorkspace();
let judge: JudgeServer;
const WEIGHTS = [1, 0.25, 1];

beforeAll(() => {
  judge = startJudgeServer((body: ChatBody) => {
    expect(body.messages[0]!.content).toBe(CREDIT_SYSTEM_PROMPT);
    const steps = Number(/CONVERSATION \((\d+) steps\)/.exec(body.messages[1]!.content)![1]);
    return { content: Array.from({ length: steps }, (_, k) => `STEP ${k + 1}: ${WEIGHTS[k]}`).join("\n") };
  });
});
afterAll(() => judge?.stop());

/** Up to three turns; each step's reward is a third of the share of lowercase letters in the reply. */
const AGAIN_ENV = `
export default {
  id: "again",
  description: "three turns, the env asking again after each of the first two",
  create() {
    return {
      tools: [],
      maxTurns: 3,
      async load(split) {
        return Array.from({ length: 20 }, (_, i) => ({ id: split + "-" + i, prompt: [{ role: "user", content: "Write some letters, " + i + "." }], answer: "" }));
      },
      async open() {
        let turns = 0;
        return {
          async step(reply) {
            turns++;
            const text = reply.content;
            const letters = [...text].filter((c) => c >= "a" && c <= "z").length;
            const done = turns >= 3;
            return { messages: done ? [] : [{ role: "user", content: "Again." }], reward: text.length ? letters / text.length / 3 : 0, done };
          },
          async close() {},
        };
      },
      reward(_task, rollout) {
        return rollout.info.envReward;
      },
    };
  },
};
`;

test("credit weights that differ from 1 reach the audit's token advantages, part by part", async () => {
  const envFile = join(ws.dir, "again.ts");
  writeFileSync(envFile, AGAIN_ENV);
  const { path, runDir } = writeConfig(
    ws,
    "credit",
    `max_steps = 2
[orchestrator]
batch_size = 16
group_size = 4
seq_len = 1024
max_tokens = 256
filter_zero_advantages = false
[[orchestrator.train.env]]
id = ${JSON.stringify(envFile)}
algo = { type = "agentic_credit", judge = { name = "judge", base_url = "${judge.url}" }, mix = 1 }
`,
  );
  const done = await rlx(["train", path, "--inference", "in-process"]).done;
  expect(done.code).toBe(0);
  const records = [...readAudit(runDir).values()].flat();
  // A rollout's parts may be spread over its samples (a chat template that re-renders history
  // starts a new sample): the rule is over all of a rollout's parts.
  const byRollout = Map.groupBy(records, (r) => r.rollout_id);
  const multi = [...byRollout.values()].filter(
    (rs) => rs.flatMap((r) => r.credit!.parts).length >= 2 && rs[0]!.advantage,
  );
  expect(multi.length).toBeGreaterThan(0); // a random model ends about half its turns itself
  for (const samples of multi) {
    const parts = samples.flatMap((r) => r.credit!.parts).sort((a, b) => a.part - b.part);
    const w = parts.map((p) => p.weight);
    expect(w).toEqual(WEIGHTS.slice(0, parts.length));
    const K = parts.length;
    const A = samples[0]!.advantage!;
    const total = A >= 0 ? w.reduce((a, b) => a + b, 0) : w.reduce((a, b) => a + (1 - b), 0);
    const want = w.map((wk) => (A >= 0 ? (K * wk) / total : (K * (1 - wk)) / total));
    for (const r of samples)
      for (const part of r.credit!.parts) {
        expect(part.factor!).toBeCloseTo(want[part.part - 1]!, 6);
        expect(part.factor!).not.toBeCloseTo(1, 3);
        for (let t = part.token_start; t < part.token_end; t++)
          if (r.loss_mask[t]) expect(r.advantages[t]!).toBeCloseTo(A * part.factor!, 5);
      }
  }
}, 300_000);
