// Kill -9 and --resume, at three points of one run: the orchestrator right after checkpoint 2 is
// whole; the orchestrator and the trainer together while the trainer writes checkpoint 4; the
// orchestrator once the last step file is written. After the last resume the run must read as if
// it had never stopped: steps 1..6 once each in metrics.jsonl, every group the sampler drew
// trained exactly once in draw order with the task a fresh sampler draws for it (no task repeated
// or skipped, no rollout trained twice), and no process left behind after any kill.
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createEnv, loadEnv } from "../../src/envs/index.ts";
import { TaskSampler, uniformEnv } from "../../src/orchestrator/task_sampler.ts";
import {
  processesMentioning,
  readAudit,
  readMetrics,
  rlx,
  type Running,
  until,
  untilWhileRunning,
  writeConfig,
  sharedWorkspace,
} from "./train_helpers.ts";

const ws = sharedWorkspace();

const SEED = 3;
const GROUPS_PER_STEP = 4; // batch_size 8 / group_size 2

async function killAndReap(run: Running, runDir: string, alsoTrainer: boolean): Promise<void> {
  if (alsoTrainer) for (const pid of processesMentioning(`trainer --run-dir ${runDir}`)) process.kill(pid, "SIGKILL");
  run.proc.kill("SIGKILL");
  await run.done;
  // the trainer notices its parent is gone and exits by itself
  await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);
}

test("a run killed three times and resumed trains every step and every drawn group exactly once", async () => {
  const letters = JSON.stringify(ws.lettersEnv);
  const { path, runDir } = writeConfig(
    ws,
    "resume",
    `max_steps = 6
seed = ${SEED}
[trainer.optim]
lr = 1e-4
[orchestrator]
batch_size = 8
group_size = 2
seq_len = 128
max_tokens = 8
filter_zero_advantages = false
[ckpt]
interval = 2
keep = 2
[[orchestrator.train.env]]
id = ${letters}
name = "a"
[[orchestrator.train.env]]
id = ${letters}
name = "b"
ratio = 2
`,
  );
  const args = ["train", path, "--inference", "in-process"];
  const checkpoints = join(runDir, "checkpoints");
  const stderr: string[] = [];

  let run = rlx(args);
  await untilWhileRunning(run, () => existsSync(join(checkpoints, "step_2/manifest.json")), 60_000, "checkpoint 2");
  await killAndReap(run, runDir, false);

  run = rlx([...args, "--resume"]);
  await untilWhileRunning(
    run,
    () => existsSync(checkpoints) && readdirSync(checkpoints).some((name) => name.startsWith("step_4")),
    60_000,
    "checkpoint 4 being written",
    1,
  );
  await killAndReap(run, runDir, true);
  // the kill may land before or after the rename: what matters is whether it left a partial one
  const caughtPartial = readdirSync(checkpoints).some((name) => name.startsWith("step_4.tmp-"));
  stderr.push((await run.done).err);

  run = rlx([...args, "--resume"]);
  await untilWhileRunning(run, () => existsSync(join(runDir, "rollouts/step_6.jsonl")), 60_000, "the last step file");
  await killAndReap(run, runDir, false);
  stderr.push((await run.done).err);

  const last = await rlx([...args, "--resume"]).done;
  stderr.push(last.err);
  expect(last.code).toBe(0);
  await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);
  if (caughtPartial) expect(stderr.join("\n")).toMatch(/ignoring the partial checkpoint .*step_4\.tmp-\d+/);

  // every step once, in order, in the metrics and the audit
  expect(readMetrics(runDir).map((row) => row.step)).toEqual([1, 2, 3, 4, 5, 6]);
  const audit = readAudit(runDir);
  expect([...audit.keys()].sort()).toEqual([1, 2, 3, 4, 5, 6]);
  const records = [...audit.entries()].flatMap(([step, list]) => list.map((r) => ({ ...r, file: step })));
  for (const r of records) expect(r.step).toBe(r.file);

  // no rollout trained twice; every drawn group trained once, in draw order, with its task
  const ids = records.map((r) => r.rollout_id);
  expect(new Set(ids).size).toBe(ids.length);
  const definition = await loadEnv(ws.lettersEnv);
  const tasks = await (await createEnv(definition, {})).load("train", SEED);
  const replay = new TaskSampler(
    [
      uniformEnv({ name: "a", ratio: 1, groupSize: 2, tasks }, SEED),
      uniformEnv({ name: "b", ratio: 2, groupSize: 2, tasks }, SEED),
    ],
    SEED,
  );
  for (let g = 0; g < 6 * GROUPS_PER_STEP; g++) {
    const draw = replay.next(1 + Math.floor(g / GROUPS_PER_STEP));
    if (!draw.task) throw new Error("a uniform sampler never replays");
    const members = records.filter((r) => r.group_id === draw.groupId);
    expect(members.map((r) => r.rollout_id).sort()).toEqual([`${draw.groupId}/r0`, `${draw.groupId}/r1`]);
    for (const r of members) {
      expect(r.task_id).toBe(draw.task.id);
      expect(r.step).toBe(1 + Math.floor(g / GROUPS_PER_STEP));
    }
  }
  expect(records.length).toBe(6 * GROUPS_PER_STEP * 2);

  // the trainer resumed from checkpoints; the newest two are kept
  const trainerLog = readFileSync(join(runDir, "logs/trainer.log"), "utf8");
  expect(trainerLog).toContain(`${join(checkpoints, "step_2")}/trainer/model loaded, training steps 3..6`);
  expect(readdirSync(checkpoints).sort()).toEqual(["step_4", "step_6"]);

  // a finished run is not started over by accident, and another run can branch off a checkpoint
  const again = await rlx(args).done;
  expect(again.code).toBe(1);
  expect(again.err).toContain(`output_dir ${runDir} already holds a run`);
  const branchDir = join(ws.dir, "branch");
  const branch = await rlx([
    ...args,
    "--set",
    `output_dir=${branchDir}`,
    "--set",
    "max_steps=5",
    "--resume-from",
    join(checkpoints, "step_4"),
  ]).done;
  expect(branch.code).toBe(0);
  expect(readMetrics(branchDir).map((row) => row.step)).toEqual([5]);
  const branchRecords = [...readAudit(branchDir).values()].flat();
  expect(new Set(branchRecords.map((r) => r.group_id))).toEqual(
    new Set(records.filter((r) => r.step === 5).map((r) => r.group_id)),
  );
}, 180_000);
