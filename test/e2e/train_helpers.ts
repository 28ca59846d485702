// Shared by the `rlx train` end-to-end tests: a tiny random model made once per test file, a
// custom env whose reward varies even for a random model (so group-relative algorithms have
// something to train on), config files written into a temp dir, the CLI run as a real process
// (`bun src/main.ts`), and readers for what a run leaves behind.
import { afterAll, beforeAll } from "bun:test";
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { initModel } from "../../src/model/presets.ts";
import { readSafetensors } from "../../src/model/safetensors.ts";
import { type AuditRecord, parseAudit } from "../../src/rundir/audit.ts";

export const ROOT = join(import.meta.dir, "../..");

/** The reward is the share of lowercase letters in the reply: it differs between any two random replies. */
export const LETTERS_ENV = `
export default {
  id: "letters",
  description: "reward = share of lowercase letters in the reply",
  create() {
    return {
      tools: [],
      maxTurns: 1,
      async load(split) {
        return Array.from({ length: 30 }, (_, i) => ({ id: split + "-" + i, prompt: [{ role: "user", content: "Write some letters, " + i + "." }], answer: "", solution: "abc" }));
      },
      reward(_task, rollout) {
        const last = rollout.messages.at(-1);
        const text = last && last.role === "assistant" ? last.content : "";
        const letters = [...text].filter((c) => c >= "a" && c <= "z").length;
        return { reward: text.length ? letters / text.length : 0, metrics: {} };
      },
    };
  },
};
`;

export interface Workspace {
  dir: string;
  model: string;
  lettersEnv: string;
}

/** A temp dir with a tiny random model (seed 0) and the letters env file. */
export async function workspace(): Promise<Workspace> {
  const dir = mkdtempSync(join(tmpdir(), "rlx-train-"));
  const model = join(dir, "tiny");
  await initModel({ preset: "tiny", out: model, seed: 0, dtype: "f32" });
  const lettersEnv = join(dir, "letters.ts");
  writeFileSync(lettersEnv, LETTERS_ENV);
  return { dir, model, lettersEnv };
}

/** The test file's workspace: filled in before its first test, removed after its last. */
export function sharedWorkspace(): Workspace {
  const ws = {} as Workspace;
  beforeAll(async () => Object.assign(ws, await workspace()));
  afterAll(() => rmSync(ws.dir, { recursive: true, force: true }));
  return ws;
}

/** Writes a run config; `body` holds everything but output_dir and the model. */
export function writeConfig(ws: Workspace, name: string, body: string): { path: string; runDir: string } {
  const runDir = join(ws.dir, name);
  const path = join(ws.dir, `${name}.toml`);
  writeFileSync(
    path,
    `output_dir = ${JSON.stringify(runDir)}\nmodel = { path = ${JSON.stringify(ws.model)} }\n${body}`,
  );
  return { path, runDir };
}

export interface Running {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  /** Resolves with the exit code and all output once the process has exited. */
  done: Promise<{ code: number; out: string; err: string }>;
}

/** Starts `rlx ARGS` (from source) in `cwd`, with `env` added to this process's environment. */
export function rlx(args: string[], cwd = ROOT, env: Record<string, string> = {}): Running {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const done = (async () => {
    const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    return { code: await proc.exited, out, err };
  })();
  return { proc, done };
}

export type MetricsRow = Record<string, number> & { step: number };

export function readMetrics(runDir: string): MetricsRow[] {
  return readFileSync(join(runDir, "metrics.jsonl"), "utf8")
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line) as MetricsRow);
}

/** Every audit record of the run, by step. */
export function readAudit(runDir: string): Map<number, AuditRecord[]> {
  const out = new Map<number, AuditRecord[]>();
  for (const name of readdirSync(join(runDir, "rollouts"))) {
    const match = /^step_(\d+)\.jsonl$/.exec(name);
    if (match) out.set(Number(match[1]), parseAudit(readFileSync(join(runDir, "rollouts", name), "utf8")));
  }
  return out;
}

/** Pids of live processes whose command line mentions `text` (a run's temp dir), this test's own excluded. */
export function processesMentioning(text: string): number[] {
  const ps = Bun.spawnSync(["ps", "-eo", "pid=,stat=,args="], { stdout: "pipe" }).stdout.toString();
  return ps
    .split("\n")
    .map((line) => /^\s*(\d+)\s+(\S+)\s+(.*)$/.exec(line))
    .filter(
      (m): m is RegExpExecArray =>
        m !== null && m[3]!.includes(text) && !m[2]!.startsWith("Z") && Number(m[1]) !== process.pid,
    )
    .map((m) => Number(m[1]));
}

/** Waits until `check()` is true (polling every `everyMs`), or throws after `timeoutMs`. */
export async function until(check: () => boolean, timeoutMs: number, what: string, everyMs = 5): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await Bun.sleep(everyMs);
  }
}

/** Like `until`, but fails with the run's output if the run exits first (or is stopped on timeout). */
export async function untilWhileRunning(
  run: Running,
  check: () => boolean,
  timeoutMs: number,
  what: string,
  everyMs = 5,
): Promise<void> {
  let exited: { code: number; out: string; err: string } | undefined;
  void run.done.then((result) => (exited = result));
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (!exited && performance.now() > deadline) {
      run.proc.kill("SIGINT");
      await run.done;
    }
    if (exited) throw new Error(`the run exited (code ${exited.code}) before ${what}:\n${exited.out}\n${exited.err}`);
    await Bun.sleep(everyMs);
  }
}

/** A port that is free now (bound and released by the OS's choice). */
export function freePort(count = 1): number {
  // `count` consecutive free ports (servers = N listens on port .. port + N - 1): the OS picks the
  // first, and the rest are checked by binding them; a taken one means another try.
  for (let attempt = 0; attempt < 50; attempt++) {
    const servers: ReturnType<typeof Bun.serve>[] = [];
    try {
      servers.push(Bun.serve({ port: 0, fetch: () => new Response() }));
      const port = servers[0]!.port!;
      for (let i = 1; i < count; i++) servers.push(Bun.serve({ port: port + i, fetch: () => new Response() }));
      return port;
    } catch {
      // one of port + 1 .. port + count - 1 is taken
    } finally {
      for (const server of servers) server.stop(true);
    }
  }
  throw new Error(`no ${count} consecutive free ports found`);
}

/** Adds delta to the first element of a float32 tensor of a safetensors file, in place. */
export function perturbFirstElement(file: string, name: string, delta: number): void {
  const view = readSafetensors(file).tensors.get(name)!;
  const value = new Float32Array(view.data.slice(0, 4).buffer);
  value[0]! += delta;
  const fd = openSync(file, "r+");
  writeSync(fd, new Uint8Array(value.buffer), 0, 4, view.offset);
  closeSync(fd);
}
