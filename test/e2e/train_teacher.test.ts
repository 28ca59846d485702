// A teacher that breaks mid-run: OPD's rollouts fail as data (counted per env in metrics, a
// warning per step naming the error) while the other env keeps training; the run aborts only when
// more than orchestrator.max_failure_rate of the recent rollouts failed.
//
// The teacher is a real `rlx serve` behind a proxy in this process that, once switched "down",
// answers its scoring requests with an error. (A teacher that stops answering altogether first
// goes through the client's retries with backoff, src/clients/http.ts, and then takes this same
// path; the retries would only make this test slower.)
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { initModel } from "../../src/model/presets.ts";
import {
  freePort,
  processesMentioning,
  readMetrics,
  rlx,
  type Running,
  until,
  untilWhileRunning,
  type Workspace,
  workspace,
  writeConfig,
} from "./train_helpers.ts";

let ws: Workspace;
let teacher: Running;
let proxy: ReturnType<typeof Bun.serve>;
let down = false;

beforeAll(async () => {
  ws = await workspace();
  const teacherDir = join(ws.dir, "teacher");
  await initModel({ preset: "tiny", out: teacherDir, seed: 1, dtype: "f32" });
  const port = freePort();
  teacher = rlx([
    "serve",
    "--model",
    teacherDir,
    "--port",
    String(port),
    "--served-model-name",
    "teacher",
    "--max-model-len",
    "256",
  ]);
  const upstream = `http://127.0.0.1:${port}`;
  await until(
    () => Bun.spawnSync(["curl", "-sf", `${upstream}/v1/models`]).exitCode === 0,
    30_000,
    "the teacher server",
    100,
  );
  proxy = Bun.serve({
    port: 0,
    async fetch(request) {
      const url = new URL(request.url);
      if (down && url.pathname === "/v1/completions")
        return Response.json({ error: { message: "the teacher is down (test)" } }, { status: 400 });
      return fetch(`${upstream}${url.pathname}`, {
        method: request.method,
        headers: request.headers,
        body: request.method === "GET" ? undefined : await request.text(),
      });
    },
  });
});

afterAll(async () => {
  proxy?.stop(true);
  teacher?.proc.kill("SIGTERM");
  await teacher?.done;
  if (ws) rmSync(ws.dir, { recursive: true, force: true });
});

function config(name: string, maxFailureRate: number) {
  return writeConfig(
    ws,
    name,
    `max_steps = 4
[orchestrator]
batch_size = 8
group_size = 2
seq_len = 128
max_tokens = 8
max_failure_rate = ${maxFailureRate}
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "letters"
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "opd"
algo = { type = "opd", teacher = { name = "teacher", base_url = "http://127.0.0.1:${proxy.port}/v1" } }
`,
  );
}

test("the teacher goes down after step 1: opd's rollouts fail as data, letters keeps training", async () => {
  down = false;
  const { path, runDir } = config("down", 0.9);
  const run = rlx(["train", path, "--inference", "in-process"]);
  await untilWhileRunning(run, () => existsSync(join(runDir, "rollouts/step_1.jsonl")), 60_000, "step 1's batch");
  down = true;
  const { code, err } = await run.done;
  expect(code).toBe(0);
  expect(err).toMatch(
    /\[warn\] step \d: \d+\/\d+ rollouts of opd failed \(excluded from training\); first: scoreRollout failed: .*the teacher is down \(test\)/,
  );
  const rows = readMetrics(runDir);
  expect(rows.map((r) => r.step)).toEqual([1, 2, 3, 4]);
  expect(rows[0]!["errors/opd"] ?? 0).toBe(0);
  expect(rows.slice(1).reduce((n, r) => n + (r["errors/opd"] ?? 0), 0)).toBeGreaterThan(0);
  for (const row of rows) {
    expect(row["errors/letters"] ?? 0).toBe(0);
    expect(row["errors/count"]).toBe(row["errors/opd"] ?? 0);
  }
  expect(rows.every((r) => typeof r["reward/letters"] === "number")).toBe(true);
  await until(() => processesMentioning(runDir).length === 0, 30_000, "the run's children to exit", 50);
}, 90_000);

test("past max_failure_rate the run aborts, naming the rate and the error", async () => {
  down = true;
  const { path, runDir } = config("abort", 0.2);
  const { code, err } = await rlx(["train", path, "--inference", "in-process"]).done;
  expect(code).toBe(1);
  expect(err).toMatch(
    /error: step 1: \d+ of the last \d+ rollouts failed \(\d+%, more than orchestrator.max_failure_rate = 0.2\); opd: scoreRollout failed: .*the teacher is down \(test\)/,
  );
  await until(() => processesMentioning(runDir).length === 0, 30_000, "the run's children to exit", 50);
}, 60_000);
