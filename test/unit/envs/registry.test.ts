// The env registry: built-ins by id, args validated with key paths, and custom envs loaded from a
// .ts file that imports nothing from rlx.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../../src/errors.ts";
import { createEnv, envArgsSchema, envDefinitions, listEnvs, loadEnv } from "../../../src/envs/index.ts";

const CUSTOM_ENV = `
// A custom env as a user writes it: a plain object, no imports.
export default {
  id: "echo_words",
  description: "repeat the word",
  create(args) {
    return {
      tools: [],
      maxTurns: 1,
      async load(split, seed) {
        const words = split === "train" ? ["alpha", "beta"] : ["gamma"];
        return words.map((w) => ({ id: w, prompt: [{ role: "user", content: "Say " + w + (args.suffix ?? "") }], answer: w }));
      },
      reward(task, rollout) {
        const last = rollout.messages.at(-1);
        const correct = last && last.role === "assistant" && last.content.trim() === task.answer ? 1 : 0;
        return { reward: correct, metrics: { correct } };
      },
    };
  },
};
`;

describe("env registry", () => {
  test("built-ins are listed with schemas", () => {
    expect(listEnvs()).toEqual(["math", "calc", "forth", "search", "nim", "proposer", "recall"]);
    expect(envDefinitions().map((d) => d.id)).toEqual(["math", "calc", "forth", "search", "nim", "proposer", "recall"]);
    for (const id of listEnvs()) expect(envArgsSchema(id)!.safeParse({}).success).toBe(true);
    expect(envArgsSchema("nope")).toBeUndefined();
  });

  test("bad args are ConfigErrors naming the key path", async () => {
    const math = await loadEnv("math");
    await expect(createEnv(math, { digits: 0 })).rejects.toThrow(/^env math: args\.digits: /);
    await expect(createEnv(math, { digitz: 2 })).rejects.toThrow(
      'env math: args.digitz: unknown key; did you mean "digits"? (the keys here: digits, operations,',
    );
    const site = { source: "run.toml", path: ["orchestrator", "train", "env", 0, "args"] };
    await expect(createEnv(math, { digits: 0 }, site)).rejects.toThrow(
      /^run\.toml: orchestrator\.train\.env\[0\]\.args\.digits: /,
    );
    await expect(createEnv(math, { operations: ["%"] })).rejects.toThrow(ConfigError);
  });

  test("unknown ids and broken custom files are errors with fixes", async () => {
    await expect(loadEnv("nope")).rejects.toThrow(ConfigError);
    await expect(loadEnv("./does/not/exist.ts")).rejects.toThrow('env: cannot import "./does/not/exist.ts"');
    const dir = mkdtempSync(join(tmpdir(), "rlx-env-"));
    try {
      const bad = join(dir, "bad.ts");
      writeFileSync(bad, "export default { id: 3 };\n");
      const site = { source: "run.toml", path: ["orchestrator", "train", "env", 0, "id"] };
      const at = `run.toml: orchestrator.train.env[0].id: the default export of "${bad}"`;
      const err = (await loadEnv(bad, site).catch((e) => e)) as ConfigError;
      expect(err).toBeInstanceOf(ConfigError);
      expect(err.message.split("\n")).toEqual([
        `${at}: id: expected string: Invalid input: expected string, received number`,
        `${at}: description: required (expected string)`,
        `${at}: create: must be a function: create(args) returns the env`,
      ]);
      expect(err.fix).toStartWith("export default ({ z }) => ({ id, description,");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a custom env loads from a .ts path and runs", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rlx-env-"));
    try {
      const path = join(dir, "echo_words.ts");
      writeFileSync(path, CUSTOM_ENV);
      const definition = await loadEnv(path);
      expect(definition.id).toBe("echo_words");
      const env = await createEnv(definition, { suffix: "!" });
      const [task] = await env.load("eval", 0);
      expect(task!.prompt[0]!.content).toBe("Say gamma!");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
