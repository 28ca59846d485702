// `rlx sft` end to end on a micro model: the CLI learns two demonstrations of held-out math tasks
// well enough to solve them greedily (eval 0 -> 1, the loop from data to skill), writes the run
// directory `rlx report` and `rlx eval` read, and its first step's loss is the mean negative
// logprob of exactly the target tokens, as an independent path (prefill scoring) computes it.
import { beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sftConfigSchema } from "../../src/sft/config.ts";
import { loadModel } from "../../src/model/hf.ts";
import { ChatRenderer } from "../../src/model/render.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { score } from "../../src/native/generate.ts";
import { prepareExamples, runSft } from "../../src/sft/run.ts";
import { microModelDir } from "../fixtures/serve_model.ts";

const ROOT = join(import.meta.dir, "../..");
const ARGS = '{"operations": ["+"]}';

function rlx(args: string[]) {
  const proc = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() };
}

let dir: string;
let model: string;
let demos: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "rlx-sft-e2e-"));
  model = await microModelDir({ dir: join(dir, "micro"), sharpen: 1 });
  demos = join(dir, "demos.jsonl");
  // Demonstrations of the first two held-out tasks: the ones `[eval]` and `rlx eval --n 2` use.
  const wrote = rlx(["env", "demos", "math", "--split", "eval", "--n", "2", "--args", ARGS, "--out", demos]);
  expect(wrote.code).toBe(0);
});

/** The math eval on the demonstrations' two held-out tasks, as an [eval] block. */
const EVAL_MATH = `[eval]\nenv = [{ id = "math", args = ${ARGS.replaceAll(":", " =").replaceAll('"operations"', "operations")} }]\nnum_examples = 2\nmax_tokens = 40`;

/** Writes DIR/NAME.toml: the micro model, the demonstrations and `sections`; the run goes to DIR/NAME. */
function writeSftToml(name: string, sections: string[]): { config: string; out: string } {
  const out = join(dir, name);
  const config = join(dir, `${name}.toml`);
  const head = [`output_dir = "${out}"`, `[model]\npath = "${model}"`, `[data]\npath = "${demos}"`];
  writeFileSync(config, [...head, ...sections].join("\n"));
  return { config, out };
}

test("rlx sft: step lines, a summary with eval before/after, a run directory, and a model that solves what it was taught", () => {
  const { config, out } = writeSftToml("run", [
    "[trainer]\nsteps = 60\nbatch_tokens = 1024\nseq_len = 512",
    "[trainer.optim]\nlr = 1e-2",
    `${EVAL_MATH}\ninterval = 30`,
  ]);
  const run = rlx(["sft", config, "--set", "save.interval=30"]);
  expect(run.err).toBe("");
  expect(run.code).toBe(0);
  const lines = run.out.split("\n");
  expect(
    lines.filter((l) =>
      /^step +\d+\/60 \| nll \d+\.\d{4} \| lr 1\.0e-2 \| grad \d+\.\d+ \| \d+ tok \| \d+ tok\/s \| \d+\.\d+ s \| epoch \d+\.\d\d$/.test(
        l,
      ),
    ),
  ).toHaveLength(60);
  expect(run.out).toMatch(/eval {2}step 0: math avg@1 0\.000 pass@1 0\.000 greedy\/pass@1 0\.000/);
  expect(run.out).toMatch(/math greedy\/pass@1 +0\.000 +1\.000/);
  expect(run.out).toContain(join(out, "model"));

  const rows = readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number>);
  expect(rows.filter((r) => "nll" in r).map((r) => r.step)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
  expect(rows.filter((r) => "eval/math/greedy/pass@1" in r).map((r) => [r.step, r["eval/math/greedy/pass@1"]])).toEqual(
    [
      [0, 0],
      [30, expect.any(Number)],
      [60, 1],
    ],
  );
  // the same rows as TensorBoard scalars, read back by python3-protobuf (test/e2e/tensorboard.test.ts)
  const reader =
    existsSync("/usr/bin/python3") &&
    Bun.spawnSync(["/usr/bin/python3", join(ROOT, "test/fixtures/tfevents_read.py"), join(out, "tensorboard")]);
  if (reader && reader.exitCode === 0) {
    const events = reader.stdout
      .toString()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { step: number; tag: string; value: number });
    const scalars = new Map(events.map((e) => [`${e.step} ${e.tag}`, e.value]));
    const numeric = rows.flatMap((r) =>
      Object.entries(r)
        .filter(([k]) => k !== "step")
        .map(([k, v]) => [`${r.step} ${k}`, v]),
    );
    expect(scalars.size).toBe(numeric.length);
    for (const [key, value] of numeric) expect(scalars.get(key as string)).toBe(Math.fround(value as number));
  } else console.warn("sft.test.ts: TensorBoard files not read back (no python3-protobuf)");
  const nll = rows.filter((r) => "nll" in r).map((r) => r.nll!);
  expect(nll.at(-1)!).toBeLessThan(nll[0]! / 20);
  expect(existsSync(join(out, "config.resolved.toml"))).toBe(true);
  // a resumable checkpoint (rlx train's layout: test/e2e/sft_resume.test.ts resumes one)
  for (const file of ["manifest.json", "orchestrator.json", "trainer/optimizer.bin", "trainer/model/model.safetensors"])
    expect(existsSync(join(out, "checkpoints/step_30", file))).toBe(true);
  expect(existsSync(join(out, "checkpoints", "step_60", "manifest.json"))).toBe(true); // the last step too: the run can be extended

  // The saved model is a plain HF directory: rlx eval loads it and agrees with the in-loop eval.
  const evaluated = rlx([
    "eval",
    "--model",
    join(out, "model"),
    "--env",
    "math",
    "--args",
    ARGS,
    "--n",
    "2",
    "--k",
    "2",
    "--max-tokens",
    "40",
    "--json",
  ]);
  expect(evaluated.code).toBe(0);
  const report = JSON.parse(evaluated.out) as {
    envs: Array<{ metrics: Record<string, number>; results: Array<{ greedyReward: number }> }>;
  };
  expect(report.envs[0]!.metrics["greedy/pass@1"]).toBe(1);
  expect(report.envs[0]!.results.map((r) => r.greedyReward)).toEqual([1, 1]);
}, 120_000);

test("[eval] max_model_len bounds the eval's sequences; failed eval rollouts are a warning naming the first error", () => {
  const { config } = writeSftToml("run-short-eval", [
    "[trainer]\nsteps = 1\nbatch_tokens = 1024\nseq_len = 512",
    `${EVAL_MATH}\nmax_model_len = 8`,
  ]);
  const run = rlx(["sft", config]);
  expect(run.code).toBe(0);
  expect(run.err).toMatch(
    /\[warn\] eval: 100\.0% of math rollouts failed \(scored 0\); the first: context limit: the prompt has \d+ tokens, max_context_tokens is 8/,
  );
});

test("the first step's loss is the mean -logprob of the target tokens, as prefill scoring computes it", async () => {
  const config = sftConfigSchema.parse({
    output_dir: join(dir, "nll"),
    model: { path: model },
    data: { path: demos },
    trainer: { steps: 1, batch_tokens: 4096, seq_len: 512 },
  });
  const summary = await runSft(config, { log: () => {} });

  const examples = prepareExamples(new ChatRenderer(Tokenizer.load(model)), [demos], 512);
  using reference = await loadModel(model);
  const { logprobs } = score(
    reference,
    examples.map((e) => e.tokenIds),
  );
  let sum = 0;
  let count = 0;
  examples.forEach((e, i) => {
    e.ceWeights.forEach((w, t) => {
      if (w && t > 0) ((sum -= logprobs[i]![t]!), count++);
    });
  });
  expect(count).toBe(examples.reduce((n, e) => n + e.ceWeights.filter(Boolean).length, 0));
  expect(Math.abs(summary.firstNll - sum / count)).toBeLessThan(1e-4 * (sum / count));
  expect(summary.steps).toBe(1);
  expect(existsSync(join(dir, "nll", "model", "model.safetensors"))).toBe(true);
}, 60_000);

test("rlx sft: a bad config or dataset row fails before training, naming the key or the line", () => {
  const bad = join(dir, "bad.jsonl");
  writeFileSync(bad, '{"prompt": "q", "completion": "a"}\n{"prompt": "q"}\n');
  const config = join(dir, "bad.toml");
  writeFileSync(
    config,
    `output_dir = "${join(dir, "bad-run")}"\n[model]\npath = "${model}"\n[data]\npath = "${bad}"\n`,
  );
  const row = rlx(["sft", config]);
  expect(row.code).toBe(1);
  expect(row.err).toContain(`${bad}:2: a row needs "messages", or "prompt" and "completion"`);
  expect(existsSync(join(dir, "bad-run"))).toBe(false);
  const key = rlx(["sft", config, "--set", "trainer.stepz=3"]);
  expect(key.code).toBe(1);
  expect(key.err).toContain("trainer.stepz: unknown key");
  const noArgs = rlx(["sft"]);
  expect(noArgs.code).toBe(1);
  expect(noArgs.err).toContain("Missing required positional argument: CONFIG");
}, 60_000);

test("[eval.stop]: the run stops at the first eval inside the band and records it; a jump past the band or a last step short of it is an error", async () => {
  const base = {
    model: { path: model },
    data: { path: demos },
    trainer: { steps: 60, batch_tokens: 1024, seq_len: 512, optim: { lr: 1e-2 } },
    save: { interval: 10 },
  };
  const evalBlock = (stop: Record<string, number | string>) => ({
    env: [{ id: "math", args: { operations: ["+"] } }],
    num_examples: 2,
    max_tokens: 40,
    interval: 5,
    stop: { metric: "eval/math/greedy/pass@1", ...stop },
  });
  const out = join(dir, "band");
  const summary = await runSft(sftConfigSchema.parse({ ...base, output_dir: out, eval: evalBlock({ min: 0.5 }) }), {
    log: () => {},
  });
  const evals = readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number>)
    .filter((r) => "eval/math/greedy/pass@1" in r)
    .map((r) => [r.step!, r["eval/math/greedy/pass@1"]!]);
  const first = evals.find(([step, value]) => step! > 0 && value! >= 0.5)!;
  expect(summary.steps).toBe(first[0]!);
  expect(summary.steps).toBeLessThan(60);
  expect(evals.at(-1)).toEqual(first); // nothing trained or evaluated after the stop
  const record = JSON.parse(readFileSync(join(out, "band.json"), "utf8"));
  expect(record).toEqual({ ...summary.band, max: undefined });
  expect(record).toMatchObject({ metric: "eval/math/greedy/pass@1", min: 0.5, step: first[0], value: first[1] });
  expect(record.seen).toEqual(evals.filter(([step]) => step! > 0));
  expect(existsSync(join(out, "model", "model.safetensors"))).toBe(true);
  expect(existsSync(join(out, "checkpoints", `step_${summary.steps}`, "manifest.json"))).toBe(true);

  // With two tasks the value is 0, 0.5 or 1: nothing lands in [0.2, 0.4], so the first nonzero eval jumped past it.
  const past = sftConfigSchema.parse({
    ...base,
    output_dir: join(dir, "band-past"),
    eval: evalBlock({ min: 0.2, max: 0.4 }),
  });
  await expect(runSft(past, { log: () => {} })).rejects.toThrow(
    /jumped past the stop band \[0\.2, 0\.4\] at step \d+ \(step:value 5:/,
  );
  const short = sftConfigSchema.parse({
    ...base,
    trainer: { ...base.trainer, steps: 10 },
    output_dir: join(dir, "band-short"),
    eval: evalBlock({ min: 1.5 }),
  });
  await expect(runSft(short, { log: () => {} })).rejects.toThrow(
    /never entered the stop band \[1\.5, ∞\] by the last step 10/,
  );
}, 120_000);
