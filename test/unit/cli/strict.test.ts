// The command line is strict (src/cli/strict.ts): an unknown flag or a stray positional argument
// on any command is an error naming it, with the closest known flag (or command) suggested, and
// nothing runs; every spelling citty accepts (--name value, --name=value, --no-name, camelCase,
// `--` before positionals) still passes. Also `rlx serve`'s refusals for an open policy server.
import { expect, test } from "bun:test";
import type { CommandDef } from "citty";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { root } from "../../../src/cli/root.ts";
import { checkCommandLine } from "../../../src/cli/strict.ts";
import { closest } from "../../../src/did_you_mean.ts";
import { UsageError } from "../../../src/errors.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

const ROOT = join(import.meta.dir, "../../..");

function rlx(args: string[], env: Record<string, string> = {}) {
  const proc = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, RLX_API_KEY: "", ...env },
  });
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() };
}

/** Every runnable command path under `rlx`, with its definition: train, env show, ... */
async function commands(cmd: CommandDef<any> = root, path: string[] = []): Promise<[string[], CommandDef<any>][]> {
  const subs = (typeof cmd.subCommands === "function" ? await cmd.subCommands() : cmd.subCommands) ?? {};
  if (Object.keys(subs).length === 0) return [[path, cmd]];
  const out: [string[], CommandDef<any>][] = [];
  for (const [name, loader] of Object.entries(subs))
    out.push(
      ...(await commands(await (typeof loader === "function" ? (loader as () => any)() : loader), [...path, name])),
    );
  return out;
}

const usageError = async (args: string[]) => {
  try {
    await checkCommandLine(root, args);
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  return undefined;
};

test("an unknown flag and a stray argument are errors on every command, naming them", async () => {
  const all = await commands();
  expect(all.map(([p]) => p.join(" "))).toEqual(
    expect.arrayContaining(["train", "trainer", "eval", "serve", "sft", "env show", "env tool", "report", "doctor"]),
  );
  for (const [path, cmd] of all) {
    const args = (typeof cmd.args === "function" ? await cmd.args() : cmd.args) ?? {};
    const positionals = Object.values(args)
      .filter((a: any) => a.type === "positional")
      .map(() => "x");
    const flag = await usageError([...path, ...positionals, "--bogus-flag", "3"]);
    expect(flag?.message).toBe(`rlx ${path.join(" ")}: unknown flag --bogus-flag`);
    const stray = await usageError([...path, ...positionals, "stray"]);
    const variadic = Object.values(args).some((a: any) => a.type === "positional" && a.variadic);
    // a variadic positional (rlx report RUN...) takes any number of arguments
    if (variadic) expect(stray).toBeUndefined();
    else expect(stray?.message).toBe(`rlx ${path.join(" ")}: unexpected argument stray`);
  }
});

test("the closest known flag or command is suggested", async () => {
  expect((await usageError(["train", "c.toml", "--nprocc", "2"]))?.fix).toContain("did you mean --nproc?");
  expect((await usageError(["train", "c.toml", "--resum"]))?.fix).toContain("did you mean --resume?");
  expect((await usageError(["serve", "--model", "m", "--prot", "9"]))?.fix).toContain("did you mean --port?");
  expect((await usageError(["serve", "--api-kye", "k"]))?.fix).toContain("did you mean --api-key?");
  expect((await usageError(["eval", "-m", "dir"]))?.message).toBe("rlx eval: unknown flag -m");
  // `--n` is eval's flag, but citty reads `-n` as another flag: one dash takes one-letter aliases only
  expect((await usageError(["eval", "--model", "m", "-n", "5"]))?.fix).toContain("did you mean --n?");
  expect((await usageError(["trian", "c.toml"]))?.fix).toContain("did you mean `rlx train`?");
  expect((await usageError(["env", "shwo", "math"]))?.fix).toContain("did you mean `rlx env show`?");
  expect(closest("nprocc", ["nproc", "resume", "set"])).toBe("nproc");
});

test("every spelling citty accepts still passes", async () => {
  for (const args of [
    ["train", "c.toml", "--set", "a=1", "--set=b=2", "--resume", "--no-force", "--dry-run", "--json"],
    ["train", "c.toml", "--resume-from", "--looks-like-a-flag"], // a string flag takes the next token whole
    ["train", "c.toml", "--dryRun"],
    ["eval", "--model", "m", "--n", "-1"],
    ["env", "tool", "forth", "--", "--not-a-flag"],
    ["serve", "--model", "m", "--policy", "--weights-root", "w", "--api-key", "k"],
  ])
    expect(await usageError(args)).toBeUndefined();
  expect((await usageError(["env", "tool", "forth", "--", "a", "b"]))?.message).toBe(
    "rlx env tool: unexpected argument b",
  );
});

test("as a process: exit 1, the error and its fix, and the command never ran", () => {
  const cwd = mkdtempSync(join(tmpdir(), "rlx-strict-"));
  const { code, err, out } = rlx(["train", join(ROOT, "configs/quickstart.toml"), "--dry-run", "--nprocc", "2"]);
  expect(code).toBe(1);
  expect(err).toContain("error: rlx train: unknown flag --nprocc\n  fix: did you mean --nproc?");
  expect(out).toBe(""); // --dry-run would have printed the config
  expect(rlx(["check", cwd, "extra"]).err).toContain("error: rlx check: unexpected argument extra");
});

test("rlx serve --policy needs a weights root, and an API key off loopback", async () => {
  const model = await microModelDir();
  const weights = mkdtempSync(join(tmpdir(), "rlx-weights-"));
  const noRoot = rlx(["serve", "--model", model, "--policy", "--port", "0"]);
  expect(noRoot.code).toBe(1);
  expect(noRoot.err).toContain("--policy needs --weights-root DIR");
  const open = rlx(["serve", "--model", model, "--policy", "--weights-root", weights, "--host", "0.0.0.0"]);
  expect(open.code).toBe(1);
  expect(open.err).toContain("--policy on --host 0.0.0.0 needs an API key");
  expect(open.err).toContain("RLX_API_KEY");
});
