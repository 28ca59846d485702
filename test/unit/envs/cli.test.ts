// `rlx env` through the real CLI entry point (a child process per command, as a user runs it):
// list, show, tool (exact observation and exit code), demos (JSONL that round-trips into the env's
// own reward), and errors for bad ids and args.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEnv, loadEnv } from "../../../src/envs/index.ts";
import type { ChatMessage } from "../../../src/data/chat.ts";
import { finishedRollout, rewardNow } from "./helpers.ts";

const ROOT = join(import.meta.dir, "../../..");

function rlx(...args: string[]): { stdout: string; stderr: string; code: number } {
  const proc = Bun.spawnSync([process.execPath, "src/main.ts", "env", ...args], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: "1" },
  });
  return { stdout: proc.stdout.toString(), stderr: proc.stderr.toString(), code: proc.exitCode ?? -1 };
}

describe("rlx env", () => {
  test("list names the built-ins", () => {
    const out = rlx("list", "--json");
    expect(out.code).toBe(0);
    expect((JSON.parse(out.stdout) as Array<{ id: string }>).map((e) => e.id)).toEqual([
      "math",
      "calc",
      "forth",
      "search",
      "nim",
      "proposer",
      "recall",
    ]);
  });

  test("show prints tasks of a split with env args applied", () => {
    const out = rlx(
      "show",
      "math",
      "--split",
      "eval",
      "--n",
      "2",
      "--json",
      "--args",
      '{"steps": 2, "word_problems": false}',
    );
    expect(out.code).toBe(0);
    const tasks = out.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { id: string; answer: string });
    expect(tasks.length).toBe(2);
    for (const task of tasks) expect(task.id).toMatch(/^\(\d+ [-+*] \d+\) [-+*] \d+$/);
    expect(rlx("show", "forth", "--n", "1").stdout).toMatch(
      /^── .+\n\[system\] You solve problems by writing and running Forth/,
    );
  });

  test("tool prints exactly the observation; an error observation exits 2", () => {
    const ok = rlx("tool", "forth", ": SQ DUP * ; 7 SQ . 1 2");
    expect([ok.stdout, ok.code]).toEqual(["49 \nstack: <2> 1 2\n", 0]);
    const bad = rlx("tool", "forth", "1 +");
    expect([bad.stdout, bad.code]).toEqual(["error: line 1, word +: stack underflow\n", 2]);
    const search = rlx("tool", "search", "--json", '{"query": "headquarters"}', "--args", '{"top_k": 1}');
    expect(search.stdout).toMatch(/^\[1\] .+\n.+ company founded in \d{4}\. The headquarters of .+ are in .+\.\n$/);
    expect(rlx("tool", "math", "x").stderr).toContain("has no tool");
  });

  test("demos writes chat-messages JSONL whose conversations earn full reward", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rlx-demos-"));
    try {
      for (const id of ["math", "forth", "search"]) {
        const file = join(dir, `${id}.jsonl`);
        const out = rlx("demos", id, "--n", "4", "--out", file);
        expect(out.stdout.trim()).toBe(`wrote 4 demonstrations of ${id} to ${file}`);
        const env = await createEnv(await loadEnv(id), {});
        const tasks = await env.load("train", 0);
        const rows = readFileSync(file, "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as { messages: ChatMessage[]; tools?: unknown[]; env: string; task_id: string });
        expect(rows.length).toBe(4);
        rows.forEach((row, i) => {
          expect([row.env, row.task_id]).toEqual([id, tasks[i]!.id]);
          expect(row.tools?.length ?? 0).toBe(env.tools.length);
          const task = tasks[i]!;
          expect(row.messages.slice(0, task.prompt.length)).toEqual(task.prompt);
          expect(rewardNow(env, task, finishedRollout(task, ...row.messages.slice(task.prompt.length))).reward).toBe(1);
        });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  test("list takes a custom env's file; demos makes --out's folder, and a path it cannot write is an error", () => {
    const listed = JSON.parse(rlx("list", "examples/envs/guess.ts", "--json").stdout) as Array<{ id: string }>;
    expect(listed.map((e) => e.id).at(-1)).toBe("guess");
    const dir = mkdtempSync(join(tmpdir(), "rlx-demos-"));
    try {
      const nested = join(dir, "missing", "dir", "math.jsonl");
      expect(rlx("demos", "math", "--n", "2", "--out", nested).code).toBe(0);
      expect(readFileSync(nested, "utf8").trim().split("\n").length).toBe(2);
      const blocked = rlx("demos", "math", "--n", "2", "--out", join(nested, "x.jsonl")); // under a file
      expect(blocked.code).toBe(1);
      expect(blocked.stderr).toContain(`rlx env demos: cannot write ${join(nested, "x.jsonl")}`);
      expect(blocked.stderr).toContain("fix: give --out a file path");
      expect(blocked.stderr).not.toContain("    at ");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("bad ids and args are reported with a fix", () => {
    const unknown = rlx("show", "nope");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('unknown env "nope"');
    expect(unknown.stderr).toContain("fix:");
    expect(rlx("show", "math", "--args", '{"digitz": 3}').stderr).toContain("rlx env --args: digitz: unknown key");
    expect(rlx("show", "math", "--args", "{oops").stderr).toContain("--args is not valid JSON");
    expect(rlx("show", "math", "--split", "test").stderr).toContain('--split must be "train" or "eval"');
    // A custom env's fix names it as the user does, by its path (its id "reverse" is no built-in).
    const typo = rlx("show", "examples/envs/reverse.ts", "--args", '{"lenght": 4}');
    expect(typo.stderr).toContain('lenght: unknown key; did you mean "length"?');
    expect(typo.stderr).toContain("`rlx env show examples/envs/reverse.ts --args '{...}'`");
  });
});
