// `rlx train`'s children (the trainer and the spawned policy server) never outlive the run: not
// after Ctrl-C, not after one of them crashes. A child that dies fails the run at once, with the
// child's last log lines in the error. Nor after the orchestrator itself is SIGKILLed.
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  freePort,
  processesMentioning,
  rlx,
  until,
  untilWhileRunning,
  writeConfig,
  sharedWorkspace,
} from "./train_helpers.ts";

const ws = sharedWorkspace();

function config(name: string, extra = "", inference = "") {
  return writeConfig(
    ws,
    name,
    `max_steps = 50
${extra}
[orchestrator]
batch_size = 4
group_size = 2
seq_len = 128
max_tokens = 8
[inference]
port = ${freePort()}
${inference}
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "letters"
`,
  );
}

/** Processes of this file's runs: every command line names the workspace (model, run dir). */
const leftovers = () => processesMentioning(ws.dir);

test("Ctrl-C stops the trainer and the policy server, and exits 130", async () => {
  const { path, runDir } = config("ctrl_c");
  const run = rlx(["train", path]);
  await untilWhileRunning(
    run,
    () => existsSync(join(runDir, "weights/step_1/published.json")),
    60_000,
    "step 1 to be published",
    20,
  );
  expect(leftovers().length).toBe(3); // orchestrator, trainer, policy server
  run.proc.kill("SIGINT");
  const { code, err } = await run.done;
  expect(code).toBe(130);
  expect(err).toContain("SIGINT: stopping the run");
  await until(() => leftovers().length === 0, 30_000, "every child to exit", 50);
}, 90_000);

test("a SIGKILLed orchestrator leaves no trainer or policy server behind", async () => {
  const { path, runDir } = config("kill9");
  const run = rlx(["train", path]);
  await untilWhileRunning(
    run,
    () => existsSync(join(runDir, "weights/step_1/published.json")),
    60_000,
    "step 1 to be published",
    20,
  );
  expect(leftovers().length).toBe(3);
  run.proc.kill("SIGKILL");
  await run.done;
  await until(() => leftovers().length === 0, 30_000, "the children to notice their parent is gone", 50);
}, 90_000);

test("a trainer that dies fails the run at once with its last lines; the policy server goes too", async () => {
  const { path, runDir } = config("crash");
  const run = rlx(["train", path]);
  await untilWhileRunning(
    run,
    () => existsSync(join(runDir, "weights/step_1/published.json")),
    60_000,
    "step 1 to be published",
    20,
  );
  for (const pid of processesMentioning(`trainer --run-dir ${runDir}`)) process.kill(pid, "SIGKILL");
  const { code, err } = await run.done;
  expect(code).toBe(1);
  expect(err).toContain("error: the trainer process was killed by SIGKILL; its last lines:");
  expect(err).toContain("  | trainer: step 1 loss");
  expect(err).toContain(`fix: the whole log is ${join(runDir, "logs/trainer.log")}`);
  await until(() => leftovers().length === 0, 30_000, "every child to exit", 50);
}, 90_000);

test("a trainer that cannot start says why in the run's error", async () => {
  // the policy stays on the CPU (inference.device "auto" would follow the trainer onto CUDA and fail first)
  const { path } = config("no_cuda", 'trainer = { device = "cuda" }', 'device = "cpu"');
  const { code, err } = await rlx(["train", path, "--inference", "in-process"]).done;
  expect(code).toBe(1);
  expect(err).toMatch(
    /the trainer process exited with code 1; its last lines:\n(.*\n)*.*device "cuda" asked for, but this libtorch has no CUDA/,
  );
  await until(() => leftovers().length === 0, 30_000, "every child to exit", 50);
}, 60_000);
