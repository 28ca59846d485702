// The CLI contract: `rlx --help` lists every command, each command explains itself, commands
// whose machinery is not built yet say so (exit 1, no fake output), and --dry-run writes nothing.
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../../..");
const COMMANDS = ["train", "eval", "serve", "init", "sft", "env", "report", "check", "doctor", "plan", "launch"];

function rlx(args: string[], cwd = ROOT) {
  const proc = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    cwd,
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() };
}

test("rlx --help lists every command", () => {
  const { code, out } = rlx(["--help"]);
  expect(code).toBe(0);
  for (const name of COMMANDS) expect(out).toContain(name);
});

test("every command has --help with its description and flags", () => {
  for (const name of COMMANDS) {
    const { code, out } = rlx([name, "--help"]);
    expect(code).toBe(0);
    expect(out).toContain(`rlx ${name}`);
  }
  expect(rlx(["train", "--help"]).out).toContain("--dry-run");
});

test("eval with no model to evaluate is a clear error, exit 1", () => {
  const { code, err } = rlx(["eval"]);
  expect(code).toBe(1);
  expect(err).toContain("rlx eval needs a model to evaluate: --model DIR (in-process) or --base-url URL");
});

test("serve with a missing model directory is a clear error, exit 1", () => {
  const { code, err } = rlx(["serve", "--model", "m"]);
  expect(code).toBe(1);
  expect(err).toContain("--model m: no config.json there");
});

test("a missing required argument is a one-line error with the fix, no stack trace", () => {
  const { code, err } = rlx(["sft"]);
  expect(code).toBe(1);
  expect(err).toContain("error: Missing required positional argument: CONFIG");
  expect(err).toContain("rlx sft --help");
  expect(err).not.toMatch(/\n\s+at /);
});

test("train --dry-run prints the resolved config and writes nothing", () => {
  const cwd = mkdtempSync(join(tmpdir(), "rlx-dry-"));
  const { code, out } = rlx(["train", join(ROOT, "configs/quickstart.toml"), "--dry-run"], cwd);
  expect(code).toBe(0);
  expect(out).toContain("add->grpo, sub->max_rl");
  expect(existsSync(join(cwd, "outputs"))).toBe(false);
  const json = JSON.parse(rlx(["train", join(ROOT, "configs/quickstart.toml"), "--dry-run", "--json"], cwd).out);
  expect(json.config.orchestrator.train.env.map((e: { algo: { type: string } }) => e.algo.type)).toEqual([
    "grpo",
    "max_rl",
  ]);
});
