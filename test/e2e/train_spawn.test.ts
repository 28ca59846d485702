// Groups spawned by an episode's trace, through `rlx train` on a tiny random model: an `asker` env
// (a TypeScript env with one role) whose every episode spawns a group of 2 rollouts of the letters
// env (a train env at ratio 0, drawn only when spawned) and settles the asker's reward as their
// mean. The audit records show the dependency: every asker sample names its spawned group, every
// letters sample the asker that spawned it, and each asker's reward is the mean of its spawned
// rollouts' rewards; those groups are ordinary letters groups (GRPO-centered among themselves).
// batch_size counts the asker's groups; the spawned ride along.
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { readAudit, readMetrics, rlx, sharedWorkspace, writeConfig } from "./train_helpers.ts";

const ws = sharedWorkspace();

const ASKER_ENV = `
export default {
  id: "asker",
  description: "asks for letters; its reward is the mean reward of the letters group it spawns",
  create() {
    return {
      tools: [],
      maxTurns: 1,
      roles: ["asker"],
      async load(split) {
        return Array.from({ length: 10 }, (_, i) => ({ id: split + "-" + i, prompt: [{ role: "user", content: "Ask." }], answer: "" }));
      },
      async episode(ctx) {
        const reply = await ctx.turn("asker", [{ role: "user", content: "Ask for letters " + ctx.task.id + "." }]);
        const task = { id: "asked:" + ctx.task.id, prompt: [{ role: "user", content: "Write letters: " + reply.slice(0, 8) }], answer: "" };
        return { rewards: {}, spawn: { asker: { env: "letters", task, size: 2 } } };
      },
      settle(group) {
        return group.map(({ spawned }) => ({
          reward: spawned.reduce((s, o) => s + o.reward, 0) / spawned.length,
          metrics: { came_back: spawned.length },
        }));
      },
      reward() { return { reward: 0, metrics: {} }; },
    };
  },
};
`;

test("an asker's reward waits on the letters group it spawned: audit records link both ends", async () => {
  const askerFile = join(ws.dir, "asker.ts");
  writeFileSync(askerFile, ASKER_ENV);
  const { path, runDir } = writeConfig(
    ws,
    "spawn",
    `max_steps = 2
[trainer.optim]
lr = 1e-4
[orchestrator]
batch_size = 4
group_size = 2
seq_len = 256
max_tokens = 6
filter_zero_advantages = false
[[orchestrator.train.env]]
id = ${JSON.stringify(askerFile)}
name = "asker"
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "letters"
ratio = 0
`,
  );
  const done = await rlx(["train", path, "--inference", "in-process"]).done;
  expect(done.code).toBe(0);
  for (const [step, records] of readAudit(runDir)) {
    const askers = records.filter((r) => r.env === "asker");
    const letters = records.filter((r) => r.env === "letters");
    expect(askers.length).toBe(4); // batch_size counts the drawn groups
    expect(letters.length).toBe(8); // each asker's 2 spawned rollouts ride along
    for (const asker of askers) {
      expect(asker.spawned).toEqual({ env: "letters", group_id: `${asker.rollout_id}/spawn`, size: 2 });
      const spawned = letters.filter((r) => r.spawned_by === asker.rollout_id);
      expect(spawned.map((r) => r.group_id)).toEqual([asker.spawned!.group_id, asker.spawned!.group_id]);
      expect(asker.reward).toBeCloseTo((spawned[0]!.reward + spawned[1]!.reward) / 2, 12);
      // the spawned group is an ordinary GRPO group of its env: centered among its own two
      const mean = (spawned[0]!.reward + spawned[1]!.reward) / 2;
      for (const r of spawned) expect(r.advantage).toBeCloseTo(r.reward - mean, 12);
    }
    // the askers are centered within their own group once each one's reward is settled
    const groups = Map.groupBy(askers, (r) => r.group_id);
    for (const members of groups.values()) {
      const mean = members.reduce((s, r) => s + r.reward, 0) / members.length;
      for (const r of members) expect(r.advantage, `step ${step}`).toBeCloseTo(r.reward - mean, 12);
    }
  }
  const metrics = readMetrics(runDir);
  expect(metrics.map((m) => m.step)).toEqual([1, 2]);
  expect(metrics.every((m) => m["role/asker/asker/came_back"] === 2)).toBe(true);
});
