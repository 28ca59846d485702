// Envs served by another process through the CLI, as a user runs them: the two reference Python
// servers (examples/envs/python/, started with `python3 FILE`) trained on with GRPO in one run on a
// tiny random model, one env-driven and one step-driven, each named by its server; the audit records
// hold the env's own turns (its "try again" after a wrong answer) and its rewards; the held-out eval
// during the run and `rlx eval --env URL` score a remote env as a built-in one; `rlx env list/show`
// take a URL; and a server that dies during the run fails rollouts with the reason, not the run.
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { sharedEnvServers, startEnvServer } from "../fixtures/env_servers.ts";
import { readAudit, readMetrics, rlx, sharedWorkspace, writeConfig } from "./train_helpers.ts";

const ws = sharedWorkspace();
const servers = sharedEnvServers();

const RETRY = "That is not the sum. Try again; you may use the calculator.";

const body = (stepUrl: string, agentUrl: string, maxSteps = 2) => `max_steps = ${maxSteps}
[orchestrator]
max_failure_rate = 0.9   # the dying server's env is half the batch
batch_size = 8
group_size = 4
seq_len = 2048   # the env-driven server takes 4 turns: a ~700-token prompt (the tool), 3 retries
max_tokens = 8
filter_zero_advantages = false
[[orchestrator.train.env]]
id = "${stepUrl}"
args = { digits = 1, tasks = 20 }
remote = { timeout_s = 30, concurrency = 4 }
[[orchestrator.train.env]]
id = "${agentUrl}"
args = { digits = 1, tasks = 20 }
remote = { shape = "env" }
[orchestrator.eval]
interval = 2
num_examples = 4
greedy = true
[[orchestrator.eval.env]]
id = "${stepUrl}"
args = { digits = 1, tasks = 20 }
`;

test("GRPO on a step-driven and an env-driven Python env: the env's turns and rewards in the audit, eval on the remote env", async () => {
  const { path, runDir } = writeConfig(ws, "remote", body(servers.step.url, servers.agent.url));
  const dry = await rlx(["train", path, "--dry-run"]).done;
  expect(dry.code).toBe(0);
  expect(dry.out).toContain("arith_agent");

  const done = await rlx(["train", path, "--inference", "in-process"]).done;
  expect(done.code).toBe(0);
  const records = [...readAudit(runDir).values()].flat();
  expect(new Set(records.map((r) => r.env))).toEqual(new Set(["arith", "arith_agent"]));
  expect(readdirSync(join(runDir, "rollouts")).filter((f) => f.startsWith("failed"))).toEqual([]);
  const tokenizer = Tokenizer.load(ws.model);
  for (const env of ["arith", "arith_agent"]) {
    const mine = records.filter((r) => r.env === env);
    expect(mine.every((r) => r.algo === "grpo" && (r.reward === 0 || r.reward === 1))).toBe(true);
    // A random model's answer is wrong: the env asked again, and its turn is in the trained tokens.
    expect(mine.some((r) => tokenizer.decode(r.token_ids).includes(RETRY))).toBe(true);
    expect(mine.some((r) => tokenizer.decode(r.token_ids).includes("What is "))).toBe(true);
  }
  const metrics = readMetrics(runDir);
  expect(metrics.map((m) => m.step)).toEqual([0, 1, 2]); // step 0: the eval before training
  for (const key of [
    "reward/arith_agent",
    "metric/arith/wrong_answers",
    "metric/arith_agent/correct",
    "eval/arith/greedy/pass@1",
  ])
    expect(metrics.at(-1)![key]).toBeNumber();

  const evaluated = await rlx([
    "eval",
    "--model",
    ws.model,
    "--env",
    servers.step.url,
    "--args",
    '{"digits": 1, "tasks": 20}',
    "--n",
    "4",
    "--max-tokens",
    "8",
    "--json",
  ]).done;
  expect(evaluated.code).toBe(0);
  const report = JSON.parse(evaluated.out) as { envs: Array<{ env: string; tasks: number }> };
  expect(report.envs.map((e) => [e.env, e.tasks])).toEqual([["arith", 4]]);
}, 300_000);

test("rlx env list and show take an env server's URL", async () => {
  const listed = await rlx(["env", "list", servers.agent.url, "--json"]).done;
  expect(listed.code).toBe(0);
  const rows = JSON.parse(listed.out) as Array<{ id: string; description: string }>;
  expect(rows.at(-1)!.id).toBe("arith_agent");
  expect(rows.at(-1)!.description).toContain(`env-driven, served at ${servers.agent.url}`);
  const shown = await rlx(["env", "show", servers.step.url, "--args", '{"digits": 3}', "--n", "2"]).done;
  expect(shown.code).toBe(0);
  expect(shown.out).toMatch(/What is \d{3} \+ \d{3}\?/);
});

test("a server that dies during a run fails its rollouts with the reason; the run goes on and records them", async () => {
  const dying = await startEnvServer("arith_step.py");
  const { path, runDir } = writeConfig(ws, "dies", body(dying.url, servers.agent.url, 3));
  const run = rlx(["train", path, "--inference", "in-process"]);
  const firstStep = join(runDir, "rollouts", "step_1.jsonl");
  for (let i = 0; i < 600 && !existsSync(firstStep); i++) await Bun.sleep(100);
  dying.stop();
  const done = await run.done;
  expect(done.code).toBe(0);
  const failed = [2, 3]
    .map((s) => join(runDir, "rollouts", `failed_step_${s}.jsonl`))
    .filter(existsSync)
    .flatMap((f) => readFileSync(f, "utf8").trim().split("\n"))
    .map((line) => JSON.parse(line) as { env: string; error: string });
  expect(failed.length).toBeGreaterThan(0);
  expect(failed.filter((f) => !(f.env === "arith" && f.error.includes(dying.url)))).toEqual([]);
}, 300_000);
