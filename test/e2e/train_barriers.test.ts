// kill -9 and --resume with rollouts waiting on a barrier: a custom algorithm whose credit waits on
// sets of three consecutive groups (a group of groups spanning steps; four groups per step) is
// killed right after checkpoint 2, whose carried state holds the two groups then waiting, and resumed. Every set that trained must hold all six members, each trained once,
// with advantages centered over the six (summing to 0): a member waiting when the checkpoint's
// batch was cut came back from the carried state rather than being lost.
import { expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  processesMentioning,
  readAudit,
  readMetrics,
  rlx,
  until,
  untilWhileRunning,
  writeConfig,
  sharedWorkspace,
} from "./train_helpers.ts";

const ws = sharedWorkspace();

const THREE_GROUPS = `
export default ({ Algorithm, z, group, assignAdvantage }) =>
  class OverThreeGroups extends Algorithm {
    static type = "over_three_groups";
    static schema = z.strictObject({});
    barriers() {
      const index = (r) => Number(/g(\\d+)$/.exec(r.groupId)[1]);
      return [{ name: "three", member: (r) => ({ key: String(Math.floor(index(r) / 3)), size: 6 }), timeoutSteps: 8, onTimeout: "drop" }];
    }
    async scoreBarrier(name, members) {
      const advantages = group.centered(members.map((r) => r.reward));
      members.forEach((r, i) => assignAdvantage(r, advantages[i]));
    }
  };
`;

test("a run killed while rollouts wait on a barrier trains every complete set whole after --resume", async () => {
  const algoFile = join(ws.dir, "three.ts");
  writeFileSync(algoFile, THREE_GROUPS);
  const { path, runDir } = writeConfig(
    ws,
    "barriers",
    `max_steps = 6
seed = 5
[orchestrator]
batch_size = 8
group_size = 2
seq_len = 128
max_tokens = 8
filter_zero_advantages = false
algo = { type = "custom", path = ${JSON.stringify(algoFile)} }
[ckpt]
interval = 2
keep = 3
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "a"
`,
  );
  const args = ["train", path, "--inference", "in-process"];
  let run = rlx(args);
  await untilWhileRunning(
    run,
    () => existsSync(join(runDir, "checkpoints/step_2/manifest.json")),
    90_000,
    "checkpoint 2",
  );
  run.proc.kill("SIGKILL");
  // step 2 drew groups 4-7: the set of 3-5 trained, 6 and 7 waited for 8 when the batch was cut
  const saved = JSON.parse(readFileSync(join(runDir, "checkpoints/step_2/orchestrator.json"), "utf8"));
  expect(saved.carried["barriers/a"].waiting.map((r: { id: string }) => r.id)).toEqual([
    "a/g6/r0",
    "a/g6/r1",
    "a/g7/r0",
    "a/g7/r1",
  ]);
  await run.done;
  await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);
  const last = await rlx([...args, "--resume"]).done;
  expect(last.code).toBe(0);

  const records = [...readAudit(runDir).values()].flat();
  const ids = records.map((r) => r.rollout_id);
  expect(new Set(ids).size).toBe(ids.length); // no rollout trained twice
  const sets = new Map<number, typeof records>();
  for (const r of records) {
    const set = Math.floor(Number(/g(\d+)$/.exec(r.group_id)![1]) / 3);
    sets.set(set, [...(sets.get(set) ?? []), r]);
  }
  expect(sets.size).toBeGreaterThanOrEqual(4);
  for (const [set, members] of sets) {
    // whole: groups 3s, 3s+1, 3s+2 with both rollouts each; centered over the six
    expect(members.map((r) => r.rollout_id).sort()).toEqual(
      [0, 1, 2].flatMap((k) => [0, 1].map((i) => `a/g${3 * set + k}/r${i}`)).sort(),
    );
    expect(Math.abs(members.reduce((s, r) => s + r.advantage!, 0))).toBeLessThan(1e-9);
  }
  // every set before the last trained one was trained: none lost at the kill
  expect([...sets.keys()].sort((a, b) => a - b)).toEqual([...sets.keys()].map((_, i) => i));
  const metrics = readMetrics(runDir);
  expect(metrics.map((m) => m.step)).toEqual([1, 2, 3, 4, 5, 6]);
  expect(metrics.some((m) => (m["barrier/a/scored"] as number) > 0)).toBe(true);
});
