// `rlx eval` end to end: the same model evaluated in-process (--model) and through `rlx serve`
// (--base-url) gives the same completions, greedy and seeded sampling alike, so a number from one
// path means the same as from the other; the JSON and --out files hold per-task results; and
// an unreachable endpoint or a missing flag is a clear error, exit 1.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServe, type ServeProcess } from "./serve_harness.ts";
import { microModelDir } from "../fixtures/serve_model.ts";

const ROOT = join(import.meta.dir, "../..");

async function rlx(args: string[]) {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { code, out, err };
}

interface Report {
  envs: Array<{
    env: string;
    tasks: number;
    k: number;
    metrics: Record<string, number>;
    results: Array<{ taskId: string; rewards: number[]; firstReply: string }>;
  }>;
}

let dir: string;
let model: string;
let server: ServeProcess;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "rlx-eval-e2e-"));
  model = await microModelDir({ dir: join(dir, "micro") });
  server = await startServe(["--model", model, "--max-batch", "8"]);
});

afterAll(async () => {
  await server?.stop();
});

const COMMON = ["--env", "math", "--n", "4", "--max-tokens", "24", "--json"];

test("in-process and served evals agree completion for completion (greedy and seeded sampling)", async () => {
  for (const flags of [
    ["--temperature", "0", "--k", "1", "--no-greedy"],
    ["--temperature", "1", "--k", "3", "--seed", "5"],
  ]) {
    const local = await rlx(["eval", "--model", model, ...COMMON, ...flags]);
    const served = await rlx(["eval", "--base-url", `${server.url}/v1`, "--tokenizer", model, ...COMMON, ...flags]);
    expect(local.code).toBe(0);
    expect(served.code).toBe(0);
    const a = JSON.parse(local.out) as Report;
    const b = JSON.parse(served.out) as Report;
    expect(a.envs[0]!.tasks).toBe(4);
    expect(a.envs[0]!.results.map((r) => r.firstReply)).toEqual(b.envs[0]!.results.map((r) => r.firstReply));
    expect(a.envs[0]!.results.map((r) => r.rewards)).toEqual(b.envs[0]!.results.map((r) => r.rewards));
    expect(a.envs[0]!.results[0]!.firstReply.length).toBeGreaterThan(0);
  }
}, 120_000);

/** A custom env with short prompts (the micro model's context is 512 tokens; search and forth prompts are longer). */
const SHORT_ENV = `
export default {
  id: "short",
  description: "say a letter",
  create() {
    return {
      tools: [],
      maxTurns: 1,
      async load(split) {
        return Array.from({ length: 3 }, (_, i) => ({ id: split + i, prompt: [{ role: "user", content: "Say x " + i }], answer: "x" }));
      },
      reward(_task, rollout) {
        return { reward: rollout.messages.at(-1).content.includes("x") ? 1 : 0, metrics: {} };
      },
    };
  },
};
`;

test("table output, --out file, two envs (one a custom env file)", async () => {
  const out = join(dir, "eval.json");
  const short = join(dir, "short.ts");
  writeFileSync(short, SHORT_ENV);
  const run = await rlx([
    "eval",
    "--model",
    model,
    "--env",
    `math,${short}`,
    "--n",
    "2",
    "--k",
    "2",
    "--max-tokens",
    "8",
    "--out",
    out,
  ]);
  expect(run.code).toBe(0);
  expect(run.out).toMatch(/^env\s+tasks\s+k\s+avg@k\s+pass@1\s+pass@k\s+greedy@1\s+errors\s+time\n/);
  expect(run.out).toMatch(/\nmath\s+2\s+2\s+/);
  expect(run.out).toMatch(/\nshort\s+2\s+2\s+/); // a custom env is named by its id, not its path
  expect(existsSync(out)).toBe(true);
  const report = JSON.parse(readFileSync(out, "utf8")) as Report & { settings: Record<string, unknown> };
  expect(report.envs.map((e) => e.env)).toEqual(["math", "short"]);
  expect(report.settings).toMatchObject({ n: 2, k: 2, max_tokens: 8, greedy: true });
  expect(Object.keys(report.envs[0]!.metrics)).toEqual(
    expect.arrayContaining(["avg@2", "pass@1", "pass@2", "greedy/pass@1", "error_rate"]),
  );
}, 120_000);

test("clear errors: no model, an endpoint nobody answers, bad flags", async () => {
  const none = await rlx(["eval"]);
  expect(none.code).toBe(1);
  expect(none.err).toContain("rlx eval needs a model to evaluate: --model DIR");
  const dead = "http://127.0.0.1:9/v1";
  const noList = await rlx(["eval", "--base-url", dead, "--tokenizer", model, "--n", "1", "--k", "1"]);
  expect(noList.code).toBe(1);
  expect(noList.err).toContain(`${dead}/models`);
  const noAnswers = await rlx([
    "eval",
    "--base-url",
    dead,
    "--served-model",
    "m",
    "--tokenizer",
    model,
    "--n",
    "1",
    "--k",
    "1",
  ]);
  expect(noAnswers.code).toBe(1);
  expect(noAnswers.err).toMatch(/every math rollout failed; the first: .*connection failed/);
  const noTokenizer = await rlx(["eval", "--base-url", dead]);
  expect(noTokenizer.err).toContain("--base-url needs the served model's tokenizer");
  const badK = await rlx(["eval", "--model", model, "--k", "0"]);
  expect(badK.err).toContain("--k 0: expected a positive integer");
  // a prompt longer than --max-model-len fails every rollout, and the fix names the flag
  const short = await rlx(["eval", "--model", model, "--n", "2", "--k", "1", "--max-model-len", "8"]);
  expect(short.code).toBe(1);
  expect(short.err).toMatch(
    /every math rollout failed; the first: context limit: the prompt has \d+ tokens, max_context_tokens is 8/,
  );
  expect(short.err).toContain("--max-model-len for long prompts");
}, 120_000);
