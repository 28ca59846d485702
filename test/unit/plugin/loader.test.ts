// The plugin loader (src/plugin.ts): a custom algorithm, sampler, judge and env file each load
// through the one function with their registry's kind, and each fails the same way: a missing
// file, no default export, a factory that throws, a class of the wrong base or an object of the
// wrong shape are ConfigErrors naming the config file, the key the user typed and the file, with
// the file's expected shape (or where paths start) as the fix.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Algorithm } from "../../../src/algorithms/base.ts";
import { algorithmPlugin } from "../../../src/algorithms/registry.ts";
import { createEnv, envPlugin } from "../../../src/envs/index.ts";
import { ConfigError } from "../../../src/errors.ts";
import { Judge } from "../../../src/judges/judge.ts";
import { judgePlugin } from "../../../src/judges/index.ts";
import { checkPluginFile, type FactoryKind, loadPlugin, type ObjectKind } from "../../../src/plugin.ts";
import { Sampler } from "../../../src/task_samplers/base.ts";
import { samplerPlugin } from "../../../src/task_samplers/registry.ts";

const EXAMPLES = join(import.meta.dir, "../../../examples");
const SITE = { source: "run.toml", path: ["orchestrator", "train", "env", 1, "algo", "path"] };
const AT = "run.toml: orchestrator.train.env[1].algo.path";

const dir = mkdtempSync(join(tmpdir(), "rlx-plugin-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
function file(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, body);
  return path;
}

/** The ConfigError loading `path` as `kind` throws. */
async function failure(path: string, kind: FactoryKind | ObjectKind<unknown>): Promise<ConfigError> {
  const load = "schema" in kind ? loadPlugin(path, SITE, kind) : loadPlugin(path, SITE, kind);
  const err = await load.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return err as ConfigError;
}

const FACTORIES = [
  { name: "algorithm", kind: algorithmPlugin, base: Algorithm, example: "algorithms/rloo.ts" },
  { name: "sampler", kind: samplerPlugin, base: Sampler, example: "samplers/least_seen.ts" },
  { name: "judge", kind: judgePlugin, base: Judge, example: "judges/yes_no.ts" },
] as const;

const KINDS = [...FACTORIES.map(({ name, kind }) => ({ name, kind })), { name: "env", kind: envPlugin }];

describe.each(KINDS)("every kind ($name) fails the same way", ({ kind }) => {
  test("a missing file cannot be imported; the fix says where paths start", async () => {
    const missing = join(dir, "missing.ts");
    const err = await failure(missing, kind);
    expect(err.message).toStartWith(`${AT}: cannot import "${missing}": `);
    expect(err.fix).toStartWith("paths are relative to the directory rlx runs in");
  });

  test("a file that throws as it loads names the file and the error", async () => {
    const path = file("throws_on_import.ts", 'throw new Error("bad import");\n');
    expect((await failure(path, kind)).message).toBe(`${AT}: cannot import "${path}": bad import`);
  });

  test("no default export; the fix is the file's shape", async () => {
    const path = file("no_default.ts", "export const x = 1;\n");
    const err = await failure(path, kind);
    expect(err.message).toBe(
      `${AT}: "${path}" has no default export ${"base" in kind ? "function" : "object (or function of the kit returning one)"}`,
    );
    expect(err.fix).toBe(kind.shape);
  });
});

describe.each(FACTORIES)("a custom $name file", ({ kind, base, example }) => {
  test("its example loads: the factory gets the kit and returns a class extending the base", async () => {
    const cls = (await loadPlugin(join(EXAMPLES, example), SITE, kind)) as { prototype: unknown };
    expect(cls.prototype).toBeInstanceOf(base);
  });

  test("a factory that throws names the file and the error", async () => {
    const path = file("factory_throws.ts", 'export default () => { throw new Error("boom"); };\n');
    const err = await failure(path, kind);
    expect(err.message).toBe(`${AT}: the default export of "${path}" threw: boom`);
    expect(err.fix).toBe(kind.shape);
  });

  test("a factory returning no class, or a class of another base, is refused", async () => {
    const expected = (path: string) =>
      `${AT}: the default export of "${path}" must return a class extending the ${base.name} it is given`;
    const plain = file("not_a_class.ts", "export default () => ({});\n");
    expect((await failure(plain, kind)).message).toBe(expected(plain));
    const foreign = file("foreign.ts", "class Base {}\nexport default () => class Foreign extends Base {};\n");
    const err = await failure(foreign, kind);
    expect(err.message).toBe(expected(foreign));
    expect(err.fix).toBe(kind.shape);
  });
});

describe("a custom env file", () => {
  test("its example loads as exported", async () => {
    const path = join(EXAMPLES, "envs/guess.ts");
    const definition = await loadPlugin(path, SITE, envPlugin);
    expect(definition).toBe((await import(path)).default);
    expect(definition.id).toBe("guess");
  });

  test("in the kit form it gets zod for its args schema, whose unknown keys are answered with the known ones", async () => {
    const path = file(
      "kit_env.ts",
      `export default ({ z }) => ({
  id: "rev",
  description: "reverse a word",
  args: z.strictObject({ words: z.number().int().positive().default(50) }),
  create: (args) => ({ tools: [], maxTurns: 1, load: async () => [], reward: () => args.words }),
});
`,
    );
    const definition = await loadPlugin(path, SITE, envPlugin);
    const env = await createEnv(definition, { words: 7 });
    expect(env.reward({} as never, {} as never) as unknown).toBe(7);
    await expect(createEnv(definition, { wrods: 7 })).rejects.toThrow(
      'env rev: args.wrods: unknown key; did you mean "words"? (the keys here: words)',
    );
  });

  test("a file that imports a package is told to take it from the kit", async () => {
    const path = file(
      "imports_zod.ts",
      'import { z } from "zod-not-installed-here";\nexport default { id: String(z) };\n',
    );
    const err = await failure(path, envPlugin);
    expect(err.fix).toStartWith('a plugin file cannot import packages ("zod-not-installed-here")');
    expect(err.fix).toContain(envPlugin.shape);
  });

  test("a default export of the wrong shape lists each wrong field; a factory file is not an env", async () => {
    const path = file("bad_env.ts", 'export default { id: "", args: {}, create: 1 };\n');
    const err = await failure(path, envPlugin);
    const at = `${AT}: the default export of "${path}"`;
    expect(err.message.split("\n")).toEqual([
      `${at}: id: Too small: expected string to have >=1 characters`,
      `${at}: description: required (expected string)`,
      `${at}: args: must be a zod schema`,
      `${at}: create: must be a function: create(args) returns the env`,
    ]);
    expect(err.fix).toBe(envPlugin.shape);
    const factory = join(EXAMPLES, "algorithms/rloo.ts");
    expect((await failure(factory, envPlugin)).message).toStartWith(
      `${AT}: the default export of "${factory}" threw: `,
    );
    const cls = file("class_env.ts", "export default class Env {}\n");
    expect((await failure(cls, envPlugin)).message).toBe(
      `${AT}: the default export of "${cls}" is a class, not an object`,
    );
  });
});

test("a path that names no file is refused at config time, naming the key", () => {
  expect(() => checkPluginFile(join(dir, "nope.ts"), SITE)).toThrow(`${AT}: no such file "${join(dir, "nope.ts")}"`);
  expect(() => checkPluginFile(join(EXAMPLES, "envs/guess.ts"), SITE)).not.toThrow();
});
