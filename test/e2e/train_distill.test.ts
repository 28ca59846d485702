// Top-k distillation end to end: `rlx train` with an opd env at k = 4 (generalized JSD) against a
// real `rlx serve` teacher (another tiny model), beside an opsd env at k = 3 (the in-process
// policy scoring hint + sequence) and another whose hinted teacher is a copy of the policy taken
// every 2 steps (teacher_refresh, src/processes/lagged_policy.ts). The teacher's top-k crosses HTTP as prompt_logprobs, the step
// file carries the slots, the trainer's distill component trains: count/distill and loss/distill
// in metrics.jsonl, distill weights and k in the audit records, no ref_kl members.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { initModel } from "../../src/model/presets.ts";
import {
  freePort,
  readAudit,
  readMetrics,
  rlx,
  type Running,
  until,
  type Workspace,
  workspace,
  writeConfig,
} from "./train_helpers.ts";

let ws: Workspace;
let teacher: Running;
let port = 0;

beforeAll(async () => {
  ws = await workspace();
  const teacherDir = join(ws.dir, "teacher");
  await initModel({ preset: "tiny", out: teacherDir, seed: 1, dtype: "f32" });
  port = freePort();
  teacher = rlx(["serve", "--model", teacherDir, "--port", String(port), "--served-model-name", "teacher"]);
  await until(
    () => Bun.spawnSync(["curl", "-sf", `http://127.0.0.1:${port}/v1/models`]).exitCode === 0,
    30_000,
    "the teacher server",
    100,
  );
}, 60_000);

afterAll(async () => {
  teacher?.proc.kill("SIGTERM");
  await teacher?.done;
  if (ws) rmSync(ws.dir, { recursive: true, force: true });
});

test("opd (k = 4, jsd) and opsd (k = 3, live and lagged teacher) train through the distill component", async () => {
  const { path, runDir } = writeConfig(
    ws,
    "distill",
    `max_steps = 2
[orchestrator]
batch_size = 12
group_size = 2
seq_len = 128
max_tokens = 8
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "opd"
algo = { type = "opd", k = 4, divergence = "jsd", beta = 0.5, teacher = { name = "teacher", base_url = "http://127.0.0.1:${port}/v1" } }
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "opsd"
algo = { type = "opsd", k = 3, demo_key = "solution" }
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "opsd-lagged"
algo = { type = "opsd", k = 3, demo_key = "solution", teacher_refresh = 2 }
`,
  );
  const { code, err } = await rlx(["train", path, "--inference", "in-process"]).done;
  expect({ code, err: code ? err : "" }).toEqual({ code: 0, err: "" });
  const rows = readMetrics(runDir);
  expect(rows.map((r) => r.step)).toEqual([1, 2]);
  for (const row of rows) {
    expect(row["count/distill"]).toBeGreaterThan(0);
    expect(row["loss/distill"]).toBeGreaterThan(0);
    expect(row["count/ref_kl"] ?? 0).toBe(0);
    expect(row["count/rl"] ?? 0).toBe(0);
  }
  const records = readAudit(runDir).get(1)!;
  const byEnv = (env: string) => records.filter((r) => r.env === env);
  for (const [env, k] of [
    ["opd", 4],
    ["opsd", 3],
    ["opsd-lagged", 3],
  ] as const) {
    expect(byEnv(env).length).toBeGreaterThan(0);
    for (const r of byEnv(env)) {
      expect(r.distill_k).toBe(k);
      expect(r.distill_weights).toEqual(r.loss_mask);
      expect(r.ref_kl_weights).toBeUndefined();
    }
  }
}, 180_000);
