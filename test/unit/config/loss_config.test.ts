// The rl loss per env (docs/architecture.md §6): `loss` in any algo block, parsed by the schema
// [trainer.loss] has; an env's block replaces the run's (its unset keys take the schema's
// defaults, not [trainer.loss]'s), constant defaults to orchestrator.max_tokens; an algorithm
// whose action tokens are not rl may not name one; `rlx train --dry-run` spells each env's out.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig, resolvedToml } from "../../../src/config/load.ts";
import { parse as parseToml } from "smol-toml";
import { ConfigError } from "../../../src/errors.ts";
import { rlLoss } from "../../../src/data/loss_types.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-loss-config-"));
const ROOT = join(import.meta.dir, "../../..");
let counter = 0;
function write(toml: string): string {
  const path = join(dir, `c${counter++}.toml`);
  writeFileSync(path, toml);
  return path;
}

const BASE = `
[model]
path = "models/tiny"
[orchestrator]
batch_size = 16
group_size = 4
max_tokens = 64
`;
const env = (id: string, algo = "") => `[[orchestrator.train.env]]\nid = "${id}"\n${algo ? `algo = ${algo}\n` : ""}`;
const TEACHER = `sampling = { source = { name = "t", base_url = "http://10.0.0.1:8001/v1" } }`;

function errorOf(toml: string): ConfigError {
  const path = write(toml);
  try {
    loadConfig(path);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain(path);
    return err as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

describe("per-env rl loss", () => {
  test("an env without loss trains with [trainer.loss], its constant orchestrator.max_tokens", () => {
    const { config } = loadConfig(write(`${BASE}[trainer.loss]\nkl_tau = 0.01\n${env("math")}`));
    const [math] = config.orchestrator.train.env;
    expect(math!.loss).toEqual(rlLoss({ kl_tau: 0.01, constant: 64 }));
    expect(math!.algo.loss).toBeUndefined();
  });

  test("an env's loss replaces [trainer.loss]: its unset keys are the schema's defaults, reduction and clip by type", () => {
    const toml =
      `${BASE}[trainer.loss]\nkl_tau = 0.01\nreduction = "constant"\n` +
      env("math") +
      env("forth", `{ type = "grpo", loss = { type = "gspo" } }`) +
      `[[orchestrator.train.env]]\nid = "math"\nname = "m2"\nalgo = { type = "max_rl", loss = { type = "cispo", reduction = "constant", constant = 100, clip_high = 0.5 } }\n`;
    const { config } = loadConfig(write(toml));
    const [math, forth, m2] = config.orchestrator.train.env;
    expect(math!.loss).toEqual(rlLoss({ kl_tau: 0.01, reduction: "constant", constant: 64 }));
    expect(forth!.loss).toEqual(rlLoss({ type: "gspo", constant: 64 }));
    expect(forth!.loss).toMatchObject({ reduction: "sequence", clip_low: 3e-4, clip_high: 4e-4, kl_tau: 1e-3 });
    expect(m2!.loss).toEqual(rlLoss({ type: "cispo", reduction: "constant", constant: 100, clip_high: 0.5 }));
    expect(m2!.loss).toMatchObject({ clip_low: 1 });
  });

  test("[orchestrator.algo]'s loss is every env's that does not set algo", () => {
    const toml = `${BASE}[orchestrator.algo]\ntype = "grpo"\nloss = { type = "gmpo" }\n${env("math")}${env("forth", `{ type = "max_rl" }`)}`;
    const [math, forth] = loadConfig(write(toml)).config.orchestrator.train.env;
    expect(math!.loss).toEqual(rlLoss({ type: "gmpo", constant: 64 }));
    expect(forth!.loss).toEqual(rlLoss({ constant: 64 }));
  });

  test("[trainer.loss] fills reduction and clip range by type", () => {
    const { config } = loadConfig(write(`${BASE}[trainer.loss]\ntype = "gspo"\n${env("math")}`));
    expect(config.trainer.loss).toMatchObject({ type: "gspo", reduction: "sequence", clip_low: 3e-4, clip_high: 4e-4 });
  });

  test("a non-rl algorithm has no rl loss; the resolved TOML loads again to the same losses", () => {
    const toml = `${BASE}${env("math", `{ type = "sft", ${TEACHER} }`)}${env("forth", `{ type = "grpo", loss = { type = "tis", is_cap = 3 } }`)}`;
    const first = loadConfig(write(toml)).config;
    expect(first.orchestrator.train.env[0]!.loss).toBeUndefined();
    const text = resolvedToml(first);
    expect(text).not.toMatch(/^\[orchestrator\.train\.env\.loss\]/m);
    const again = loadConfig(write(text)).config;
    expect(again.orchestrator.train.env.map((e) => e.loss)).toEqual(first.orchestrator.train.env.map((e) => e.loss));
    const parsed = parseToml(text) as { orchestrator: { train: { env: Record<string, unknown>[] } } };
    expect(parsed.orchestrator.train.env.every((e) => !("loss" in e))).toBe(true);
  });
});

describe("loss errors name the key path, the file and the fix", () => {
  test("sft naming a loss", () => {
    const err = errorOf(`${BASE}${env("math", `{ type = "sft", ${TEACHER}, loss = { type = "gspo" } }`)}`);
    expect(err.message).toContain("orchestrator.train.env[0].algo.loss");
    expect(err.message).toContain("sft trains its action tokens with the ce loss");
    expect(err.fix).toContain("remove loss");
  });

  test("opd naming a loss, in [orchestrator.algo]", () => {
    const err = errorOf(
      `${BASE}[orchestrator.algo]\ntype = "opd"\nteacher = { name = "t", base_url = "http://10.0.0.1:8001/v1" }\nloss = {}\n${env("math")}`,
    );
    expect(err.message).toContain("orchestrator.algo.loss");
    expect(err.message).toContain("ref_kl");
  });

  test("an unknown key in the loss block", () => {
    const err = errorOf(`${BASE}${env("math", `{ type = "grpo", loss = { type = "gspo", clip = 0.2 } }`)}`);
    expect(err.message).toContain("orchestrator.train.env[0].algo.loss");
    expect(err.message).toContain("clip");
  });

  test("an unknown loss type, and is_low above is_high", () => {
    expect(errorOf(`${BASE}${env("math", `{ type = "grpo", loss = { type = "ppo" } }`)}`).message).toContain(
      "orchestrator.train.env[0].algo.loss.type",
    );
    expect(errorOf(`${BASE}${env("math", `{ type = "grpo", loss = { is_low = 3, is_high = 2 } }`)}`).message).toContain(
      "is_low must be <= is_high",
    );
  });

  test("a role's algo naming a loss (a role trains with its env's)", () => {
    const toml = `${BASE}[[orchestrator.train.env]]\nid = "nim"\n[orchestrator.train.env.roles.first]\nalgo = { type = "grpo", loss = { type = "gspo" } }\n`;
    expect(errorOf(toml).message).toContain("orchestrator.train.env[0].roles.first.algo.loss");
  });
});

describe("rlx train --dry-run", () => {
  const toml = `${BASE}${env("math")}${env("forth", `{ type = "grpo", loss = { type = "gspo" } }`)}${env("math", `{ type = "sft", ${TEACHER} }`).replace('id = "math"', 'id = "math"\nname = "distil"')}`;
  const run = (args: string[]) =>
    Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), "train", write(toml), "--dry-run", ...args], {
      cwd: dir,
      stdout: "pipe",
      stderr: "pipe",
    });

  test("prints each env's loss: type, reduction and the settings its type reads", () => {
    const proc = run([]);
    expect(proc.exitCode).toBe(0);
    const out = proc.stdout.toString();
    expect(out).toContain(
      "# math rl loss: dppo_kl, reduction token (dppo_mask_low 0.2, dppo_mask_high 0.2, adv_tau 1, kl_tau 0.001)\n",
    );
    expect(out).toContain("# forth rl loss: gspo, reduction sequence (clip_low 0.0003, clip_high 0.0004)\n");
    expect(out).toContain("# distil rl loss: none (no rl tokens)\n");
  });

  test("--json has each env's whole loss and what it reads", () => {
    const json = JSON.parse(run(["--json"]).stdout.toString());
    expect(json.losses.forth).toEqual({
      ...rlLoss({ type: "gspo", constant: 64 }),
      reads: { clip_low: 3e-4, clip_high: 4e-4 },
    });
    expect(json.losses.math.reads).toEqual({ dppo_mask_low: 0.2, dppo_mask_high: 0.2, adv_tau: 1, kl_tau: 1e-3 });
    expect(json.losses.distil).toBeNull();
  });
});
