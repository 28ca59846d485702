// `rlx sft --resume` after a kill -9: a run killed right after its first checkpoint and resumed
// must read as the same run uninterrupted. Both runs go through the CLI on one intra-op thread, in
// f32 on the CPU, so the comparison is bitwise: the same step numbers once each in metrics.jsonl,
// the same nll, lr and grad norm at every step (the same batches in the same order, across an epoch
// boundary after the checkpoint, on the same weights and AdamW state), and byte-identical final
// weights and later checkpoints. Also the refusals around it: --resume with nothing to resume or
// over other data, and a fresh start over a run without --force.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { microModelDir } from "../fixtures/serve_model.ts";
import { readMetrics, rlx, untilWhileRunning } from "./train_helpers.ts";

const STEPS = 40;
const INTERVAL = 3;

let dir: string;
let model: string;
let data: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "rlx-sft-resume-"));
  model = await microModelDir({ dir: join(dir, "micro") });
  data = join(dir, "sums.jsonl");
  // 24 rows of 40-60 byte tokens at 200 tokens a step: about 6 steps an epoch, so the resumed
  // part of the run crosses several epoch boundaries (each a fresh seeded order).
  const rows = Array.from({ length: 24 }, (_, i) =>
    JSON.stringify({ prompt: `${i} + ${i * 7} =${" ".repeat(i % 5)}`, completion: String(i * 8) }),
  );
  writeFileSync(data, `${rows.join("\n")}\n`);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function writeConfig(name: string): { path: string; out: string } {
  const out = join(dir, name);
  const path = join(dir, `${name}.toml`);
  writeFileSync(
    path,
    [
      `output_dir = "${out}"`,
      "seed = 5",
      `[model]\npath = "${model}"`,
      `[data]\npath = "${data}"`,
      `[trainer]\nsteps = ${STEPS}\nbatch_tokens = 200\nseq_len = 128\nthreads = 1`,
      "[trainer.optim]\nlr = 3e-3",
      '[trainer.schedule]\ntype = "cosine"\nwarmup_steps = 4\nmin_lr = 3e-4',
      `[save]\ninterval = ${INTERVAL}`,
    ].join("\n"),
  );
  return { path, out };
}

const trainRows = (out: string) => readMetrics(out).filter((row) => "nll" in row);

test("a run killed (SIGKILL) after its first checkpoint and resumed matches the uninterrupted run bitwise", async () => {
  const whole = writeConfig("whole");
  const killed = writeConfig("killed");
  const uninterrupted = rlx(["sft", whole.path]);

  const first = rlx(["sft", killed.path]);
  await untilWhileRunning(
    first,
    () => existsSync(join(killed.out, `checkpoints/step_${INTERVAL}/manifest.json`)),
    60_000,
    "the first checkpoint",
    1,
  );
  first.proc.kill("SIGKILL");
  await first.done;
  expect(existsSync(join(killed.out, "model"))).toBe(false); // it did not get to the end
  // a checkpoint being written at the kill leaves a tmp directory; make sure one is there to skip
  mkdirSync(join(killed.out, "checkpoints/step_99.tmp-1/trainer"), { recursive: true });

  const resumed = await rlx(["sft", killed.path, "--resume"]).done;
  expect(resumed.code).toBe(0);
  expect(resumed.err).toMatch(/ignoring the partial checkpoint .*step_99\.tmp-1/);
  const from = Number(/sft: resuming after step (\d+) from /.exec(resumed.out)?.[1]);
  expect(from % INTERVAL).toBe(0);
  expect(from).toBeGreaterThanOrEqual(INTERVAL);
  expect(from).toBeLessThan(STEPS);
  const stepLines = [...resumed.out.matchAll(/^step +(\d+)\//gm)].map((m) => Number(m[1]));
  expect(stepLines).toEqual(Array.from({ length: STEPS - from }, (_, i) => from + 1 + i));

  const reference = await uninterrupted.done;
  expect(reference.code).toBe(0);
  const expected = trainRows(whole.out);
  const got = trainRows(killed.out);
  expect(got.map((row) => row.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
  expect(expected.map((row) => row.step)).toEqual(got.map((row) => row.step));
  // bitwise: every step's loss, learning rate, gradient norm, token count and epoch position
  for (const [i, row] of got.entries()) {
    const want = expected[i]!;
    for (const key of ["nll", "loss/ce", "lr", "grad_norm", "tokens", "count/ce", "epoch"])
      expect([row.step, key, row[key]]).toEqual([want.step, key, want[key]]);
  }
  expect(got.at(-1)!.epoch!).toBeGreaterThan(got[from - 1]!.epoch! + 2);

  // byte-identical final weights, and checkpoints written after the resume (weights and AdamW state)
  const bytes = (out: string, file: string) => readFileSync(join(out, file));
  expect(bytes(killed.out, "model/model.safetensors").equals(bytes(whole.out, "model/model.safetensors"))).toBe(true);
  const last = STEPS; // the final step is checkpointed as well as every INTERVAL-th
  for (const file of ["trainer/model/model.safetensors", "trainer/optimizer.bin"]) {
    expect([
      file,
      bytes(killed.out, `checkpoints/step_${last}/${file}`).equals(
        bytes(whole.out, `checkpoints/step_${last}/${file}`),
      ),
    ]).toEqual([file, true]);
  }
  // the loop's state too (data cursor, tokens, nll), all but its wall-clock times
  const state = (out: string) => {
    const {
      seconds: _wall,
      trainSeconds: _train,
      ...rest
    } = JSON.parse(bytes(out, `checkpoints/step_${last}/orchestrator.json`).toString()) as Record<string, unknown>;
    return rest;
  };
  expect(state(killed.out)).toEqual(state(whole.out));
  expect(state(killed.out)).toMatchObject({
    kind: "sft",
    step: last,
    batches: { epoch: expect.any(Number), position: expect.any(Number) },
  });
  // save.keep 0 keeps every checkpoint; no tmp directory is left
  const every = [
    ...new Set([
      ...Array.from({ length: Math.floor(STEPS / INTERVAL) }, (_, i) => `step_${(i + 1) * INTERVAL}`),
      `step_${STEPS}`,
    ]),
  ].sort();
  expect(readdirSync(join(killed.out, "checkpoints")).sort()).toEqual(every);

  // the summary stays true across the resume: first nll of step 1, tokens of all steps
  // and a finished run trains further from its last step, not from the last INTERVAL-th
  const extended = await rlx(["sft", killed.path, "--resume", "--set", `trainer.steps=${STEPS + 2}`, "--json"]).done;
  expect(extended.err).toContain(`sft: resuming after step ${STEPS} from`);
  const summary = JSON.parse(extended.out) as { steps: number; firstNll: number; tokens: number };
  expect(summary.steps).toBe(STEPS + 2);
  expect(summary.firstNll).toBe(expected[0]!.nll!);
  const tokens = trainRows(killed.out).reduce((n, row) => n + row.tokens!, 0);
  expect(summary.tokens).toBe(tokens);
}, 120_000);

test("--resume without a checkpoint or over a reseeded order, and a fresh start over a run without --force, are errors naming the fix", async () => {
  const { path, out } = writeConfig("refusals");
  const nothing = await rlx(["sft", path, "--resume"]).done;
  expect(nothing.code).toBe(1);
  expect(nothing.err).toContain(`--resume: output_dir ${out} has no whole checkpoint to continue from`);
  expect(existsSync(out)).toBe(false);

  const short = ["--set", "trainer.steps=4"];
  expect((await rlx(["sft", path, ...short]).done).code).toBe(0);
  const again = await rlx(["sft", path, ...short]).done;
  expect(again.code).toBe(1);
  expect(again.err).toContain(`output_dir ${out} already holds a run`);
  expect(again.err).toContain("--resume");
  expect(again.err).toContain("--force");
  // a resume over another order (seed) would not continue the run; both flags at once is a mistake
  const reseeded = await rlx(["sft", path, "--resume", "--set", "seed=6", ...short]).done;
  expect(reseeded.code).toBe(1);
  expect(reseeded.err).toContain("the data differs from the checkpointed run's (seed: 5 then, 6 now)");
  const both = await rlx(["sft", path, "--resume", "--force"]).done;
  expect(both.code).toBe(1);
  expect(both.err).toContain("--resume and --force contradict each other");

  const forced = await rlx(["sft", path, "--force", "--set", "trainer.steps=2"]).done;
  expect(forced.code).toBe(0);
  expect(trainRows(out).map((row) => row.step)).toEqual([1, 2]);
  expect(readdirSync(join(out, "checkpoints"))).toEqual(["step_2"]); // the old run's step 3 and 4 went with it
}, 60_000);

test("SIGTERM checkpoints the last finished step (save.on_sigterm); --resume continues from it to the uninterrupted run's weights", async () => {
  // save.interval = 0: nothing but the SIGTERM (and the end) writes a checkpoint
  const whole = writeConfig("term-whole");
  const termed = writeConfig("termed");
  const noInterval = ["--set", "save.interval=0", "--set", "trainer.steps=12"];
  const uninterrupted = rlx(["sft", whole.path, ...noInterval]);
  const first = rlx(["sft", termed.path, ...noInterval]);
  await untilWhileRunning(
    first,
    () => existsSync(join(termed.out, "metrics.jsonl")) && trainRows(termed.out).length >= 3,
    60_000,
    "step 3",
    1,
  );
  first.proc.kill("SIGTERM");
  const stopped = await first.done;
  expect(stopped.code).toBe(143);
  const last = trainRows(termed.out).at(-1)!.step;
  expect(last).toBeLessThan(12);
  expect(stopped.out).toContain(`SIGTERM: wrote the checkpoint of step ${last}: `);
  expect(readdirSync(join(termed.out, "checkpoints"))).toEqual([`step_${last}`]);
  expect(existsSync(join(termed.out, "model"))).toBe(false);

  const resumed = await rlx(["sft", termed.path, ...noInterval, "--resume"]).done;
  expect(resumed.code).toBe(0);
  expect(resumed.out).toContain(`sft: resuming after step ${last} from`);
  expect((await uninterrupted.done).code).toBe(0);
  expect(trainRows(termed.out).map((row) => row.step)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
  const weights = (out: string) => readFileSync(join(out, "model/model.safetensors"));
  expect(weights(termed.out).equals(weights(whole.out))).toBe(true);
}, 120_000);
