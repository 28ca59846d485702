// The judge and reward keys of a train env entry: defaults, and errors that name the key path
// the user typed (docs/algorithms.md, "Judges").
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { ConfigError } from "../../../src/errors.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-judge-config-"));
let n = 0;
const load = (entry: string, extra = "") => {
  const path = join(dir, `c${n++}.toml`);
  writeFileSync(path, `[model]\npath = "m"\n${extra}[[orchestrator.train.env]]\nid = "forth"\n${entry}\n`);
  return loadConfig(path).config;
};
const fails = (entry: string, ...parts: string[]) => {
  let error: unknown;
  try {
    load(entry);
  } catch (err) {
    error = err;
  }
  expect(error).toBeInstanceOf(ConfigError);
  for (const part of parts) expect((error as Error).message).toContain(part);
};
const URL = '"http://127.0.0.1:8002/v1"';

test("a judge block's defaults, and the reward limits every env has", () => {
  const [plain] = load("").orchestrator.train.env;
  expect(plain!.judge).toBeUndefined();
  expect(plain!.reward).toEqual({ concurrency: 16, timeout_s: 300 });
  const [judged] = load(`judge = { type = "agentic", name = "j", base_url = ${URL} }\nreward = { timeout_s = 60 }`)
    .orchestrator.train.env;
  expect(judged!.judge).toEqual({
    type: "agentic",
    name: "j",
    base_url: "http://127.0.0.1:8002/v1",
    max_tokens: 512,
    temperature: 0,
    max_turns: 8,
    args: {},
  });
  expect(judged!.reward).toEqual({ concurrency: 16, timeout_s: 60 });
});

test("judge and reward errors name the key path", () => {
  fails(`judge = { type = "agentic", name = "j" }`, "orchestrator.train.env[0].judge.base_url", "required");
  fails(`judge = { type = "oracle", name = "j", base_url = ${URL} }`, "orchestrator.train.env[0].judge.type");
  fails(`judge = { type = "custom", name = "j", base_url = ${URL} }`, "orchestrator.train.env[0].judge.path");
  fails(`judge = { type = "rubric", name = "j", base_url = ${URL}, turns = 3 }`, "judge.turns", "unknown key");
  fails(`reward = { concurrency = 0 }`, "orchestrator.train.env[0].reward.concurrency");
  fails(`algo = { type = "agentic_credit" }`, "orchestrator.train.env[0].algo.judge");
});

test("eval envs score with the exact reward: a judge there is an unknown key", () => {
  let error: unknown;
  try {
    load(
      "",
      `[orchestrator.eval]\nenv = [{ id = "forth", judge = { type = "rubric", name = "j", base_url = ${URL} } }]\n`,
    );
  } catch (err) {
    error = err;
  }
  expect((error as Error).message).toContain("orchestrator.eval.env[0].judge");
});
