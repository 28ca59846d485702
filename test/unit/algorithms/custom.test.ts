// Custom algorithms: the RLOO example loads from its file, validates its own config, scores a
// group and trains one step; a malformed plug-in or config fails with the key path the user typed.
import { describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AlgoConfig } from "../../../src/algorithms/registry.ts";
import { loadConfig } from "../../../src/config/load.ts";
import { ConfigError } from "../../../src/errors.ts";
import { finishGroup } from "../../../src/algorithms/base.ts";
import { algorithmName, createAlgorithm } from "../../../src/algorithms/registry.ts";
import { createEnvAlgorithms } from "../../../src/orchestrator/setup.ts";
import { packStep } from "../../../src/data/pack.ts";
import { filterZeroAdvantage, rolloutToSamples } from "../../../src/algorithms/samples.ts";
import { trainStep } from "../../../src/trainer/step.ts";
import { rlLoss } from "../../../src/data/loss_types.ts";
import { DEFAULT_LOSS, singleTurn, UnigramPolicy } from "../../fixtures/rollouts.ts";

const ROOT = join(import.meta.dir, "../../..");
const EXAMPLE = join(ROOT, "examples/algorithms/rloo.ts");
const ENV = { path: ["orchestrator", "train", "env", 1], name: "math", groupSize: 4 };
const SITE = { source: "run.toml", path: [...ENV.path, "algo"], env: ENV };
const custom = (extra: Record<string, unknown> = {}, path = EXAMPLE) =>
  ({ type: "custom", path, sampling: { source: "policy" }, ...extra }) as AlgoConfig;

const dir = mkdtempSync(join(tmpdir(), "rlx-custom-"));
function plugin(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, body);
  return path;
}

describe("the RLOO example", () => {
  test("loads from its file, validates its config, and scores with the leave-one-out baseline", async () => {
    const { algorithm, warnings } = await createAlgorithm(custom({ scale: 2 }), SITE, { isPolicyUrl: () => false });
    expect(algorithmName(algorithm)).toBe("rloo");
    expect(algorithm.kind.actionLossType).toBe("rl");
    expect(algorithm.config).toMatchObject({ type: "custom", scale: 2, sampling: { source: "policy" } });
    expect(warnings).toEqual([]);
    const group = [1, 0, 0, 0].map((r) => singleTurn(r));
    await finishGroup(algorithm, group);
    // 1 - mean(0,0,0) = 1; 0 - mean(1,0,0) = -1/3; times scale 2
    expect(group[0]!.advantage).toBeCloseTo(2, 12);
    expect(group[1]!.advantage).toBeCloseTo(-2 / 3, 12);
    expect((await createAlgorithm(custom(), SITE, { isPolicyUrl: () => false })).algorithm.config).toMatchObject({
      scale: 1,
    });
  });

  test("trains one step", async () => {
    const { algorithm } = await createAlgorithm(custom(), SITE, { isPolicyUrl: () => false });
    const group = [1, 0, 1, 0].map((r) => singleTurn(r, 3, 4));
    await finishGroup(algorithm, group);
    const { kept } = filterZeroAdvantage(group.flatMap((r) => rolloutToSamples(r, algorithm.kind.actionLossType)));
    const policy = new UnigramPolicy(64, 3);
    const before = Float64Array.from(policy.theta);
    const { metrics } = trainStep(policy, packStep(kept, { seqLen: 32 }), {
      lr: 0.5,
      maxGradNorm: 1,
      losses: [DEFAULT_LOSS],
    });
    expect(metrics["count/rl"]).toBe(16);
    expect(metrics.grad_norm).toBeGreaterThan(0);
    expect(policy.theta.some((t, i) => t !== before[i])).toBe(true);
  });

  test("loads through a config file, one instance per env", async () => {
    const toml = plugin(
      "run.toml",
      `[model]\npath = "m"\n[orchestrator]\nbatch_size = 8\ngroup_size = 4\n[[orchestrator.train.env]]\nid = "math"\nalgo = { type = "custom", path = "${EXAMPLE}", scale = 0.5 }\n[[orchestrator.train.env]]\nid = "forth"\n`,
    );
    const { config } = loadConfig(toml);
    const { algorithms } = await createEnvAlgorithms(config, toml);
    expect([...algorithms.keys()]).toEqual(["math", "forth"]);
    expect(algorithmName(algorithms.get("math")!)).toBe("rloo");
    expect(algorithmName(algorithms.get("forth")!)).toBe("grpo");
  });
});

describe("validation, with the path the user typed", () => {
  const fails = async (config: AlgoConfig, ...parts: (string | RegExp)[]) => {
    const error = await createAlgorithm(config, SITE, { isPolicyUrl: () => false }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(ConfigError);
    for (const part of parts) expect((error as Error).message).toMatch(part);
  };
  test("the class's own schema: unknown keys and bad values", async () => {
    await fails(custom({ bogus: 1 }), "run.toml: orchestrator.train.env[1].algo.bogus: unknown key");
    await fails(custom({ scale: -1 }), "orchestrator.train.env[1].algo.scale", /expected number to be >0/i);
  });
  test("an rl or ref_kl class must sample from the live policy", async () => {
    await fails(
      custom({ sampling: { source: { name: "t", base_url: "http://127.0.0.1:9/v1" } } }),
      "orchestrator.train.env[1].algo.sampling.source",
      "rloo trains with the rl loss",
      '"policy"',
    );
    const ce = plugin(
      "ce.ts",
      'export default ({ Algorithm }) => class extends Algorithm { static type = "distill"; static actionLossType = "ce"; };',
    );
    const frozen = await createAlgorithm(
      custom({ sampling: { source: { name: "t", base_url: "http://127.0.0.1:9/v1" } } }, ce),
      SITE,
      { isPolicyUrl: () => false },
    );
    expect(algorithmName(frozen.algorithm)).toBe("distill"); // ce may learn from a frozen model
  });
  test("loss is rlx's, not the class's schema's; a class whose action tokens are not rl may not name it", async () => {
    const loss = { ...rlLoss({ type: "gspo" }), constant: undefined };
    const { algorithm } = await createAlgorithm(custom({ loss }), SITE, { isPolicyUrl: () => false });
    expect(algorithm.config.loss).toEqual(loss);
    const ce = plugin(
      "ce_loss.ts",
      'export default ({ Algorithm }) => class extends Algorithm { static type = "distill"; static actionLossType = "ce"; };',
    );
    await fails(
      custom({ loss, sampling: { source: { name: "t", base_url: "http://127.0.0.1:9/v1" } } }, ce),
      "run.toml: orchestrator.train.env[1].algo.loss: distill trains its action tokens with the ce loss",
    );
  });
  test("a group-relative class with group_size 1 is a warning", async () => {
    const { warnings } = await createAlgorithm(
      custom(),
      { ...SITE, env: { ...ENV, groupSize: 1 } },
      { isPolicyUrl: () => false },
    );
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(
      'orchestrator.train.env[1] ("math"): rloo with group_size 1 gives every rollout advantage 0',
    );
  });
  test("malformed plug-in files", async () => {
    await fails(custom({}, join(dir, "missing.ts")), "algo.path", "cannot import");
    await fails(custom({}, plugin("noexport.ts", "export const x = 1;")), "no default export function");
    await fails(
      custom({}, plugin("notclass.ts", "export default () => ({});")),
      "must return a class extending the Algorithm it is given",
    );
    await fails(
      custom({}, plugin("foreign.ts", "export default () => class Foreign {};")),
      "must return a class extending",
    );
    await fails(custom({}, plugin("throws.ts", 'export default () => { throw new Error("boom"); };')), "threw: boom");
    await fails(
      custom(
        {},
        plugin(
          "badloss.ts",
          'export default ({ Algorithm }) => class extends Algorithm { static actionLossType = "ppo"; };',
        ),
      ),
      'actionLossType is "ppo"',
    );
  });
});

test("a compiled binary loads a custom algorithm file from disk, outside the repository", () => {
  // The user's copy lives where rlx's sources are not: its `import type` line must not matter.
  const user = join(dir, "user_rloo.ts");
  copyFileSync(EXAMPLE, user);
  const entry = plugin(
    "entry.ts",
    `import { createAlgorithm, algorithmName } from ${JSON.stringify(join(ROOT, "src/algorithms/registry.ts"))};
const config = { type: "custom", path: process.argv[2], sampling: { source: "policy" }, scale: 3 };
const { algorithm } = await createAlgorithm(config, { source: "x", path: ["orchestrator", "algo"] }, { isPolicyUrl: () => false });
const seg = (sampled, ids) => ({ role: sampled ? "assistant" : "user", tokenIds: ids, sampled, messageIndex: sampled ? 1 : 0, sample: 0 });
const group = [1, 0].map((reward) => ({ id: String(reward), reward, segments: [seg(false, [1]), seg(true, [2, 3])] }));
await algorithm.scoreGroup(group);
console.log(algorithmName(algorithm), JSON.stringify(group.map((r) => r.advantages)));`,
  );
  const binary = join(dir, "rlx-custom-test");
  try {
    const build = Bun.spawnSync([process.execPath, "build", "--compile", entry, "--outfile", binary], {
      stderr: "pipe",
    });
    expect(build.exitCode).toBe(0);
    const run = Bun.spawnSync([binary, "user_rloo.ts"], { cwd: dir, stdout: "pipe", stderr: "pipe" });
    expect(run.stderr.toString()).toBe("");
    expect(run.stdout.toString().trim()).toBe("rloo [[0,3,3],[0,-3,-3]]");
  } finally {
    rmSync(binary, { force: true });
  }
});
