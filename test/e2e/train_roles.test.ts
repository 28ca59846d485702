// Multi-agent envs through `rlx train` on a tiny random model, the whole stack (roles config,
// players, per-role algorithms, step files, trainer, checkpoint): nim (self-play, rae, the second
// role kept out of training with train = false) and proposer (hierarchical_grpo, solvers with an
// algorithm of their own) train two steps. A random model's replies are no legal move and no
// valid expression, so its episodes end after the first role's turn (what the frozen/untrained
// role and the solver panel do is tested with scripted players: test/unit/orchestrator/roles.test.ts).
// The audit records name each sample's role and episode; metrics carry role/<env>/<role>/*;
// rae's per-role baselines are in the checkpoint's carried state.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { readAudit, readMetrics, rlx, writeConfig, sharedWorkspace } from "./train_helpers.ts";

const ws = sharedWorkspace();

test("nim and proposer train with roles through rlx train: audit roles, per-role algorithms, rae state checkpointed", async () => {
  const { path, runDir } = writeConfig(
    ws,
    "roles",
    `max_steps = 2
[trainer.optim]
lr = 1e-4
[orchestrator]
batch_size = 8
group_size = 2
seq_len = 256
max_tokens = 6
filter_zero_advantages = false
[ckpt]
interval = 2
[[orchestrator.train.env]]
id = "nim"
algo = { type = "rae" }
args = { min_pile = 3, max_pile = 5 }
roles = { second = { train = false } }
[[orchestrator.train.env]]
id = "proposer"
algo = { type = "hierarchical_grpo" }
args = { solvers = 2 }
roles = { solver = { algo = { type = "grpo" } } }
`,
  );
  const done = await rlx(["train", path, "--inference", "in-process"]).done;
  expect(done.code).toBe(0);
  const records = [...readAudit(runDir).values()].flat();
  expect(records.length).toBeGreaterThan(0);
  expect(records.every((r) => r.role !== undefined && r.episode !== undefined)).toBe(true);
  expect(records.some((r) => r.role === "second")).toBe(false);
  for (const r of records.filter((r) => r.env === "nim")) expect([r.role, r.algo]).toEqual(["first", "rae"]);
  for (const r of records.filter((r) => r.env === "proposer"))
    expect(r.algo).toBe(r.role === "solver" ? "grpo" : "hierarchical_grpo");
  const metrics = readMetrics(runDir);
  expect(metrics.map((m) => m.step)).toEqual([1, 2]);
  const keys = new Set(metrics.flatMap((m) => Object.keys(m)));
  for (const key of ["role/nim/first/reward", "role/nim/first/illegal", "role/proposer/proposer/valid"])
    expect(keys.has(key)).toBe(true);
  const saved = JSON.parse(readFileSync(join(runDir, "checkpoints/step_2/orchestrator.json"), "utf8"));
  expect(Object.keys(saved.carried["algorithm/nim"].baselines)).toContain("first");
});
