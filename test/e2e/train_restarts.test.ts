// `rlx train --max-restarts N` (src/orchestrator/restarts.ts): a trainer rank SIGKILLed twice (as the
// OOM killer does), at different steps, and the run resumes from its newest checkpoint by itself.
// A deterministic run so restarted ends with the weights of the run never stopped, at every step;
// a two-rank run trains every step once in the weights it ends with (each restart continues right
// after the checkpoint it resumed from, no rollout is in two steps' audit records); and past N
// restarts the run stops with the error of the death that was one too many (a policy server's).
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { RestartRecord } from "../../src/orchestrator/restarts.ts";
import {
  freePort,
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

const digest = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");
const restarts = (runDir: string): RestartRecord[] =>
  existsSync(join(runDir, "logs/restarts.jsonl"))
    ? readFileSync(join(runDir, "logs/restarts.jsonl"), "utf8")
        .split("\n")
        .filter((line) => line.trim())
        .map((line) => JSON.parse(line) as RestartRecord)
    : [];
const checkpointed = (runDir: string, step: number) =>
  existsSync(join(runDir, "checkpoints", `step_${step}`, "manifest.json"));
/** The steps each start of the trainer (rank 0) trains, from its log: "training steps A..B". */
const trainerStarts = (runDir: string, log: string) =>
  [...readFileSync(join(runDir, "logs", log), "utf8").matchAll(/loaded, training steps (\d+)\.\.(\d+)/g)].map((m) =>
    Number(m[1]),
  );

/**
 * SIGKILLs the trainer (the rank matching `rank`) once `ready` holds, then waits for the run to
 * start the trainer again (its log says "loaded" once more) before the next kill.
 */
async function killTrainer(run: Running, runDir: string, log: string, ready: () => boolean, rank = ""): Promise<void> {
  await untilWhileRunning(run, ready, 120_000, "the kill's moment", 1);
  const pids = processesMentioning(`trainer --run-dir ${runDir}`).filter((pid) =>
    rank ? readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").includes(rank) : true,
  );
  expect(pids.length).toBeGreaterThan(0);
  const starts = trainerStarts(runDir, log).length;
  for (const pid of pids) process.kill(pid, "SIGKILL");
  await untilWhileRunning(run, () => trainerStarts(runDir, log).length > starts, 120_000, "the restarted trainer", 5);
}

const deterministic = (steps: number) => `max_steps = ${steps}
deterministic = true
[trainer.optim]
lr = 3e-3
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 128
max_tokens = 12
max_async_level = 0
[ckpt]
interval = 1
keep = ${steps}
restart_backoff_s = 1
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "letters"
`;

test("deterministic: the trainer SIGKILLed at two steps, --max-restarts 2 ends bitwise equal to the undisturbed run", async () => {
  const STEPS = 4;
  // the published weights kept (the newest 3) and every step's checkpoint (ckpt.keep = STEPS)
  const weights = (runDir: string) => [
    ...[2, 3, 4].map((step) => digest(join(runDir, "weights", `step_${step}`, "model.safetensors"))),
    ...Array.from({ length: STEPS }, (_, i) =>
      digest(join(runDir, "checkpoints", `step_${i + 1}`, "trainer/model/model.safetensors")),
    ),
  ];
  const whole = writeConfig(ws, "det-whole", deterministic(STEPS));
  const undisturbed = await rlx(["train", whole.path]).done;
  expect(undisturbed.code).toBe(0);

  const { path, runDir } = writeConfig(ws, "det-killed", deterministic(STEPS));
  const run = rlx(["train", path, "--max-restarts", "2"]);
  await killTrainer(run, runDir, "trainer.log", () => checkpointed(runDir, 1));
  const second = restarts(runDir)[0]!.resume_step + 1;
  await killTrainer(run, runDir, "trainer.log", () => checkpointed(runDir, second));
  const { code, err } = await run.done;
  expect(err).not.toContain("error:");
  expect(code).toBe(0);
  const records = restarts(runDir);
  expect(records.map((r) => [r.restart, r.max_restarts, r.child, r.exit, r.backoff_s])).toEqual([
    [1, 2, "trainer", "was killed by SIGKILL", 1],
    [2, 2, "trainer", "was killed by SIGKILL", 2],
  ]);
  expect(records[0]!.resume_step).toBeGreaterThanOrEqual(1);
  expect(records[1]!.resume_step).toBeGreaterThan(records[0]!.resume_step);
  expect(err).toMatch(
    /restart 1 of 2 in 1 s, from the checkpoint of step \d: the trainer process was killed by SIGKILL/,
  );
  expect(err).toMatch(
    /restart 2 of 2 in 2 s, from the checkpoint of step \d: the trainer process was killed by SIGKILL/,
  );
  expect(weights(runDir)).toEqual(weights(whole.runDir));
  expect(readMetrics(runDir).map((row) => row.step)).toEqual([1, 2, 3, 4]);
}, 300_000);

test("two ranks, rank 1 SIGKILLed twice: every step trained once in the weights the run ends with", async () => {
  const STEPS = 8;
  const { path, runDir } = writeConfig(
    ws,
    "ranks",
    `max_steps = ${STEPS}
[orchestrator]
batch_size = 4
group_size = 2
seq_len = 96
max_tokens = 6
filter_zero_advantages = false
[trainer]
world_size = 2
[ckpt]
interval = 2
keep = 2
restart_backoff_s = 1
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
`,
  );
  const run = rlx(["train", path, "--inference", "in-process", "--max-restarts", "2"]);
  await killTrainer(run, runDir, "trainer-0.log", () => checkpointed(runDir, 2), "--rank 1");
  const second = restarts(runDir)[0]!.resume_step + 2;
  await killTrainer(run, runDir, "trainer-0.log", () => checkpointed(runDir, second), "--rank 1");
  const { code, err } = await run.done;
  expect(err).not.toContain("error:");
  expect(code).toBe(0);
  const records = restarts(runDir);
  expect(records.map((r) => r.child)).toEqual(["trainer-1", "trainer-1"]);
  expect(records[1]!.resume_step).toBeGreaterThan(records[0]!.resume_step);
  // each start of the trainer trains from the step after the checkpoint it resumed from
  expect(trainerStarts(runDir, "trainer-0.log")).toEqual([1, ...records.map((r) => r.resume_step + 1)]);
  // the run's record: every step once, and no rollout in two steps
  expect(readMetrics(runDir).map((row) => row.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
  const audit = readAudit(runDir);
  expect([...audit.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
  const ids = [...audit.values()].flat().map((r) => r.rollout_id);
  expect(new Set(ids).size).toBe(ids.length);
  expect(existsSync(join(runDir, "weights", `step_${STEPS}`, "published.json"))).toBe(true);
  await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);
}, 300_000);

test("--max-restarts 1: the trainer dies, the run restarts; the policy server dies, the run stops with its error", async () => {
  const { path, runDir } = writeConfig(ws, "too-many", deterministic(30).replace("deterministic = true\n", ""));
  const port = String(freePort());
  const run = rlx(["train", path, "--inference", "spawn", "--set", `inference.port=${port}`, "--max-restarts", "1"]);
  await killTrainer(run, runDir, "trainer.log", () => checkpointed(runDir, 1));
  // the restarted run's own policy server (on the same port), once it has trained a step
  await untilWhileRunning(run, () => checkpointed(runDir, restarts(runDir)[0]!.resume_step + 1), 120_000, "a step");
  for (const pid of processesMentioning(`--port ${port}`)) process.kill(pid, "SIGKILL");
  const { code, err } = await run.done;
  expect(code).toBe(1);
  expect(err).toContain("restart 1 of 1 in 1 s");
  expect(err).toContain("error: the policy-0 process was killed by SIGKILL");
  expect(restarts(runDir).map((r) => r.child)).toEqual(["trainer"]);
  await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);
}, 300_000);

test("--resume-if-any (a job script run again): killed before its first checkpoint it starts over, after one it continues, past its end it trains nothing; bitwise the undisturbed run", async () => {
  const STEPS = 3;
  const final = (runDir: string) =>
    digest(join(runDir, "checkpoints", `step_${STEPS}`, "trainer/model/model.safetensors"));
  const whole = writeConfig(ws, "any-whole", deterministic(STEPS));
  expect((await rlx(["train", whole.path]).done).code).toBe(0);

  const { path, runDir } = writeConfig(ws, "any-killed", deterministic(STEPS));
  const args = ["train", path, "--resume-if-any"];
  const killAll = async (run: Running) => {
    for (const pid of processesMentioning(`trainer --run-dir ${runDir}`)) process.kill(pid, "SIGKILL");
    run.proc.kill("SIGKILL");
    await run.done;
    await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);
  };
  // the loop has cut step 1 (batches/ holds a run): a plain rerun would refuse to overwrite it
  let run = rlx(args);
  await untilWhileRunning(run, () => existsSync(join(runDir, "batches")), 60_000, "the first step file", 1);
  await killAll(run);
  const hadCheckpoint = checkpointed(runDir, 1);
  run = rlx(args);
  await untilWhileRunning(run, () => checkpointed(runDir, 2), 120_000, "checkpoint 2", 1);
  await killAll(run);
  const again = await rlx(args).done;
  expect(again.err).not.toContain("error:");
  expect(again.code).toBe(0);
  // the trainer's starts: step 1 (unless the first kill came before its trainer had loaded), step 1
  // again (or 2, had checkpoint 1 been written), then step 3
  const starts = trainerStarts(runDir, "trainer.log");
  expect(starts.slice(-2)).toEqual([hadCheckpoint ? 2 : 1, 3]);
  expect(starts.slice(0, -2)).toEqual(starts.length === 3 ? [1] : []);
  expect(final(runDir)).toBe(final(whole.runDir));
  expect(readMetrics(runDir).map((row) => row.step)).toEqual([1, 2, 3]);
  // the resume record the ranks a launcher starts read
  const resumed = JSON.parse(readFileSync(join(runDir, "resume.json"), "utf8")) as { checkpoint: string };
  expect(resumed.checkpoint).toMatch(/checkpoints\/step_[23]$/);
  const past = await rlx(args).done;
  expect(past.code).toBe(0);
  expect(past.out).toContain("no steps were logged");
  expect(readMetrics(runDir).map((row) => row.step)).toEqual([1, 2, 3]);
  expect(final(runDir)).toBe(final(whole.runDir));
}, 300_000);
