// Samplers in real `rlx train` runs (docs/task_samplers.md):
//   - the admission gate: with half the tasks giving every rollout the same reward, every step
//     trains batch_size rollouts, all from groups whose rewards differ, and the gate's rejections
//     are counted;
//   - the carried state: a deterministic run with a curriculum, a replay and a filter env, killed with
//     -9 after its step-2 checkpoint and resumed, draws exactly what the uninterrupted run drew
//     (the same groups, tasks, replays and policy versions, step by step) and logs the same metrics.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AuditRecord } from "../../src/rundir/audit.ts";
import {
  processesMentioning,
  readAudit,
  readMetrics,
  rlx,
  until,
  untilWhileRunning,
  type Workspace,
  workspace,
  writeConfig,
} from "./train_helpers.ts";

/** Even tasks: every reply scores 0.5 (a group without signal); odd tasks: the letters reward. */
const HALF_FLAT_ENV = `
export default {
  id: "half_flat",
  description: "even tasks reward 0.5 whatever the reply; odd tasks the share of lowercase letters",
  create() {
    return {
      tools: [],
      maxTurns: 1,
      async load(split) {
        return Array.from({ length: 20 }, (_, i) => ({ id: split + "-" + i, prompt: [{ role: "user", content: "Letters " + i + "." }], answer: "", info: { flat: i % 2 === 0 } }));
      },
      reward(task, rollout) {
        if (task.info.flat) return { reward: 0.5, metrics: {} };
        const last = rollout.messages.at(-1);
        const text = last && last.role === "assistant" ? last.content : "";
        const letters = [...text].filter((c) => c >= "a" && c <= "z").length;
        return { reward: text.length ? letters / text.length : 0, metrics: {} };
      },
    };
  },
};
`;

let ws: Workspace;
let halfEnv: string;
beforeAll(async () => {
  ws = await workspace();
  halfEnv = join(ws.dir, "half_flat.ts");
  writeFileSync(halfEnv, HALF_FLAT_ENV);
});
afterAll(() => rmSync(ws.dir, { recursive: true, force: true }));

const byGroup = (records: AuditRecord[]) => {
  const groups = new Map<string, AuditRecord[]>();
  for (const r of records) groups.set(r.group_id, [...(groups.get(r.group_id) ?? []), r]);
  return [...groups.values()];
};

test("with the gate on and half the groups flat, every step trains batch_size rollouts, all from groups with spread", async () => {
  const { path, runDir } = writeConfig(
    ws,
    "gate",
    `max_steps = 3
[orchestrator]
batch_size = 8
group_size = 2
seq_len = 128
max_tokens = 8
sampler = { type = "filter" }
[[orchestrator.train.env]]
id = ${JSON.stringify(halfEnv)}
name = "half"
`,
  );
  const { code, err } = await rlx(["train", path, "--inference", "in-process"]).done;
  expect(err).not.toContain("error:");
  expect(code).toBe(0);
  const audit = readAudit(runDir);
  expect([...audit.keys()].sort()).toEqual([1, 2, 3]);
  for (const records of audit.values()) {
    expect(new Set(records.map((r) => r.rollout_id)).size).toBe(8);
    for (const group of byGroup(records)) {
      expect(group.length).toBe(2);
      expect(group[0]!.reward).not.toBe(group[1]!.reward);
      expect(Number(group[0]!.task_id.split("-")[1]) % 2).toBe(1); // only the letters tasks have spread
      expect(group[0]!.task_stats!.attempts).toBeGreaterThanOrEqual(2);
    }
  }
  const metrics = readMetrics(runDir);
  let waiting = 0; // admitted groups drawn ahead by the step before, the first of this one
  for (const row of metrics) {
    expect(row["batch/samples"]).toBe(8);
    expect(row["rollouts/count"]).toBe(8);
    expect(row["sampling/half/admitted"]! + waiting - row["sampling/pending"]!).toBe(4);
    expect(row["sampling/signal_share"]).toBe(1);
    waiting = row["sampling/pending"]!;
  }
  // the flat half was drawn and turned away (about as many groups as were admitted)
  expect(metrics.reduce((n, row) => n + row["sampling/half/rejected"]!, 0)).toBeGreaterThanOrEqual(4);
}, 120_000);

const RESUME_CONFIG = (letters: string) => `max_steps = 4
seed = 5
deterministic = true
[trainer.optim]
lr = 3e-3
[orchestrator]
batch_size = 8
group_size = 2
seq_len = 128
max_tokens = 8
max_async_level = 0
max_off_policy_steps = 2
filter_zero_advantages = false
[ckpt]
interval = 2
[[orchestrator.train.env]]
id = ${letters}
name = "a"
sampler = { type = "curriculum", pass_reward = 0.5, retry_after = 2 }
[[orchestrator.train.env]]
id = ${letters}
name = "b"
sampler = { type = "replay", share = 0.5, max_age = 2 }
[[orchestrator.train.env]]
id = ${letters}
name = "c"
sampler = { type = "filter", pass_reward = 0.3, max_pass_rate = 0.5 }
`;

/** What a run drew, step by step: (step, group, rollout, task, replayed, version) of every trained sample. */
const draws = (runDir: string) =>
  [...readAudit(runDir).entries()]
    .sort(([a], [b]) => a - b)
    .flatMap(([, records]) =>
      records.map((r) => `${r.step} ${r.group_id} ${r.rollout_id} ${r.task_id} ${r.replayed} v${r.policy_version}`),
    );
const timing = (key: string) => key === "time" || key.startsWith("time/") || key.startsWith("throughput/");
const metricsOf = (runDir: string) =>
  readMetrics(runDir).map((row) => Object.fromEntries(Object.entries(row).filter(([key]) => !timing(key))));

test("kill -9 after a checkpoint and --resume reproduce a curriculum, replay and filter run's draws exactly", async () => {
  const letters = JSON.stringify(ws.lettersEnv);
  const whole = writeConfig(ws, "whole", RESUME_CONFIG(letters));
  const first = await rlx(["train", whole.path]).done;
  expect(first.err).not.toContain("error:");
  expect(first.code).toBe(0);

  const killed = writeConfig(ws, "killed", RESUME_CONFIG(letters));
  const run = rlx(["train", killed.path]);
  const manifest = join(killed.runDir, "checkpoints/step_2/manifest.json");
  await untilWhileRunning(run, () => existsSync(manifest), 90_000, "checkpoint 2");
  run.proc.kill("SIGKILL");
  await run.done;
  await until(() => processesMentioning(killed.runDir).length === 0, 30_000, "no process of the run left", 50);
  const resumed = await rlx(["train", killed.path, "--resume"]).done;
  expect(resumed.err).not.toContain("error:");
  expect(resumed.code).toBe(0);
  // killed mid-run, not after it: the resumed run logs from step 3 on
  expect(resumed.out).toMatch(/^step 3\/4 \|/m);
  expect(resumed.out).not.toMatch(/^step [12]\/4 \|/m);

  const expected = draws(whole.runDir);
  expect(expected.length).toBe(4 * 8); // every drawn rollout is trained (and audited)
  expect(expected.some((line) => line.includes(" true v"))).toBe(true); // something was replayed
  expect(draws(killed.runDir)).toEqual(expected);
  expect(metricsOf(killed.runDir)).toEqual(metricsOf(whole.runDir));
  expect(readMetrics(whole.runDir).reduce((n, row) => n + row["sampling/c/rejected"]!, 0)).toBeGreaterThan(0);
  // replayed samples carry the version that sampled them, never older than max_off_policy_steps
  for (const records of readAudit(whole.runDir).values())
    for (const r of records.filter((r) => r.replayed)) {
      expect(r.policy_version).toBeLessThan(r.step - 1);
      expect(r.policy_version).toBeGreaterThanOrEqual(r.step - 1 - 2);
    }
}, 300_000);
