// Custom envs before the start (src/config/custom_envs.ts): one without a name is named by its
// file's `id` (metrics keys, console, summary), never by its path; a given name wins; two entries
// that would share a name are refused with the key; the args of train and eval entries are checked
// against the file's schema (the key path, the closest key) and left as written.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadCustomEnvs } from "../../../src/config/custom_envs.ts";
import { loadConfig } from "../../../src/config/load.ts";
import { ConfigError } from "../../../src/errors.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-custom-envs-"));
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

const schemaFile = join(dir, "reverse.ts");
writeFileSync(
  schemaFile,
  `export default ({ z }) => ({ id: "rev", description: "d", args: z.strictObject({ ops: z.string().default("+,-").transform((s) => s.split(",")) }), create() { return { tools: [], maxTurns: 1, async load() { return []; }, reward() { return { reward: 0, metrics: {} }; } }; } });\n`,
);

test("custom env args are checked, train and eval entries, and left as written for the env to parse", async () => {
  const { config, path } = load(
    `[[orchestrator.train.env]]\nid = ${JSON.stringify(schemaFile)}\nargs = { ops = "+" }\n` +
      `[[orchestrator.eval.env]]\nid = ${JSON.stringify(schemaFile)}\nargs = { opz = "+" }\n`,
  );
  const err = await loadCustomEnvs(config, path).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as Error).message).toBe(
    `${path}: orchestrator.eval.env[0].args.opz: unknown key; did you mean "ops"? (the keys here: ops)`,
  );
  const ok = load(`[[orchestrator.train.env]]\nid = ${JSON.stringify(schemaFile)}\nargs = { ops = "+" }\n`);
  await loadCustomEnvs(ok.config, ok.path);
  expect(ok.config.orchestrator.train.env[0]!.args).toEqual({ ops: "+" });
});
