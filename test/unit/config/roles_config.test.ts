// The roles table of a train env entry (docs/algorithms.md, "Roles"): defaults (the policy plays
// and trains, a frozen endpoint plays and never trains), a role's own algo block parsed like an
// env's, and errors naming the key path: a frozen role set to train, a bad role algo, a role the
// env does not play, roles on a single-agent env.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { createEnv, loadEnv } from "../../../src/envs/index.ts";
import { ConfigError } from "../../../src/errors.ts";
import { checkRole } from "../../../src/orchestrator/setup.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-roles-config-"));
let n = 0;
const load = (roles: string) => {
  const path = join(dir, `c${n++}.toml`);
  writeFileSync(path, `[model]\npath = "m"\n[[orchestrator.train.env]]\nid = "nim"\nroles = ${roles}\n`);
  return loadConfig(path).config.orchestrator.train.env[0]!;
};
const FROZEN = '{ name = "start", base_url = "http://127.0.0.1:8001/v1" }';
const error = (run: () => unknown): Error => {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as Error;
  }
  throw new Error("expected a ConfigError");
};

test("a role's defaults: the policy trains, a frozen endpoint never does; its own algo is parsed", () => {
  const env = load(`{ first = { algo = { type = "rae", decay = 0.9 } }, second = { source = ${FROZEN} } }`);
  expect(env.roles.first).toEqual({
    source: "policy",
    train: true,
    algo: { type: "rae", decay: 0.9, sampling: { source: "policy" } },
  });
  expect(env.roles.second).toEqual({
    source: { name: "start", base_url: "http://127.0.0.1:8001/v1" },
    train: false,
  });
  expect(load("{}").roles).toEqual({});
});

test("errors name the role's key path", () => {
  expect(error(() => load(`{ second = { source = ${FROZEN}, train = true } }`)).message).toContain(
    'orchestrator.train.env[0].roles.second.train: role "second" is played by the frozen model "start"',
  );
  expect(error(() => load('{ first = { algo = { type = "rae", decay = 2 } } }')).message).toContain(
    "orchestrator.train.env[0].roles.first.algo.decay",
  );
  expect(error(() => load('{ first = { algo = { type = "nope" } } }')).message).toContain(
    'orchestrator.train.env[0].roles.first.algo.type: unknown algorithm type "nope"',
  );
});

test("a role must be one the env plays, on a multi-agent env", async () => {
  const nim = await createEnv(await loadEnv("nim"), {});
  expect(() => checkRole("first", nim, "nim", "run.toml: orchestrator.train.env[0].roles.first")).not.toThrow();
  expect(error(() => checkRole("third", nim, "nim", "at")).message).toBe(
    'at: env "nim" has no role "third"; its roles: first, second',
  );
  const math = await createEnv(await loadEnv("math"), {});
  expect(error(() => checkRole("solver", math, "math", "at")).message).toContain("is single-agent");
});
