// A custom env without a name is named by its file's `id` (metrics keys, console, summary), never
// by its path; a given name wins; two entries that would share a name are refused with the key.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadCustomEnvs } from "../../../src/config/custom_envs.ts";
import { loadConfig } from "../../../src/config/load.ts";
import { ConfigError } from "../../../src/errors.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-env-names-"));
const envFile = join(dir, "vowels.ts");
writeFileSync(
  envFile,
  `export default { id: "vowels", description: "d", create() { return { tools: [], maxTurns: 1, async load() { return []; }, reward() { return { reward: 0, metrics: {} }; } }; } };\n`,
);

function load(entries: string) {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.toml`);
  writeFileSync(path, `[model]\npath = "models/tiny"\n${entries}`);
  return { config: loadConfig(path).config, path };
}
const entry = (extra = "") => `[[orchestrator.train.env]]\nid = ${JSON.stringify(envFile)}\n${extra}\n`;

test("an unnamed custom env takes its definition's id; built-ins and given names are kept", async () => {
  const { config, path } = load(`${entry()}[[orchestrator.train.env]]\nid = "math"\n${entry('name = "mine"')}`);
  expect(config.orchestrator.train.env.map((e) => e.name)).toEqual([envFile, "math", "mine"]);
  await loadCustomEnvs(config, path);
  expect(config.orchestrator.train.env.map((e) => e.name)).toEqual(["vowels", "math", "mine"]);
});

test("a file's id that another entry already uses as its name is refused, naming the key", async () => {
  const { config, path } = load(`${entry('name = "vowels"')}${entry()}`);
  const err = await loadCustomEnvs(config, path).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as Error).message).toContain("orchestrator.train.env[1].name");
  expect((err as Error).message).toContain('named "vowels" by its file');
});
