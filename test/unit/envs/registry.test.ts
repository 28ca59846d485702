// The env registry: built-ins by id, args validated with key paths, and custom envs loaded from a
// .ts file that imports nothing from rlx.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, EnvError } from "../../../src/errors.ts";
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
    expect(listEnvs()).toEqual(["math", "forth", "search", "nim", "proposer"]);
    expect(envDefinitions().map((d) => d.id)).toEqual(["math", "forth", "search", "nim", "proposer"]);
    for (const id of listEnvs()) expect(envArgsSchema(id)!.safeParse({}).success).toBe(true);
    expect(envArgsSchema("nope")).toBeUndefined();
  });

  test("bad args are ConfigErrors naming the key path", async () => {
    const math = await loadEnv("math");
    await expect(createEnv(math, { digits: 0 })).rejects.toThrow(/args\.digits: /);
    await expect(createEnv(math, { digitz: 2 })).rejects.toThrow(/args\.digitz: Unrecognized key/);
    await expect(createEnv(math, { operations: ["%"] })).rejects.toThrow(ConfigError);
  });

  test("unknown ids and broken custom files are errors with fixes", async () => {
    await expect(loadEnv("nope")).rejects.toThrow(ConfigError);
    await expect(loadEnv("./does/not/exist.ts")).rejects.toThrow(EnvError);
    const dir = mkdtempSync(join(tmpdir(), "rlx-env-"));
    try {
      writeFileSync(join(dir, "bad.ts"), "export default { id: 3 };\n");
      await expect(loadEnv(join(dir, "bad.ts"))).rejects.toThrow(
        /`id` must be a non-empty string; `description` must be a string; `create\(args\)` must be a function/,
      );
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
