// `rlx sft` with [model.lora] (docs/lora.md): the CLI trains only the adapters on two math
// demonstrations, the NLL falls, the final model/ is an adapter in PEFT's layout (with merged/ on
// request) whose base is the untouched starting model, and it resumes from an adapter checkpoint.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS } from "../../src/model/adapter.ts";
import { loadModel } from "../../src/model/hf.ts";
import { score } from "../../src/native/generate.ts";
import { microModelDir } from "../fixtures/serve_model.ts";

const ROOT = join(import.meta.dir, "../..");

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
  dir = mkdtempSync(join(tmpdir(), "rlx-sft-lora-"));
  model = await microModelDir({ dir: join(dir, "micro"), sharpen: 1 });
  demos = join(dir, "demos.jsonl");
  const wrote = rlx(["env", "demos", "math", "--split", "eval", "--n", "2", "--out", demos]);
  expect(wrote.code).toBe(0);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("rlx sft with [model.lora]: the NLL falls, model/ is a PEFT adapter over the untouched base, resume works", async () => {
  const baseBytes = readFileSync(join(model, "model.safetensors"));
  const out = join(dir, "run");
  const config = join(dir, "sft.toml");
  writeFileSync(
    config,
    [
      `output_dir = "${out}"`,
      `[model]\npath = "${model}"`,
      "[model.lora]\nrank = 8\nalpha = 16\nmerged = true",
      `[data]\npath = "${demos}"`,
      "[trainer]\nsteps = 20\nbatch_tokens = 1024\nseq_len = 512",
      "[trainer.optim]\nlr = 1e-2",
      "[save]\ninterval = 10",
    ].join("\n"),
  );
  const run = rlx(["sft", config]);
  expect(run.err).toBe("");
  expect(run.code).toBe(0);
  const nll = [...run.out.matchAll(/nll (\d+\.\d+)/g)].map((m) => Number(m[1]));
  expect(nll).toHaveLength(20);
  expect(nll.at(-1)!).toBeLessThan(nll[0]! - 0.5); // 5.77 -> 4.77 when written
  const final = join(out, "model");
  expect(readdirSync(final)).toContain(ADAPTER_WEIGHTS);
  expect(existsSync(join(final, "model.safetensors"))).toBe(false);
  expect(JSON.parse(readFileSync(join(final, ADAPTER_CONFIG), "utf8"))).toMatchObject({ r: 8, lora_alpha: 16 });
  expect(Buffer.compare(readFileSync(join(model, "model.safetensors")), baseBytes)).toBe(0);
  using adapted = await loadModel(final);
  using merged = await loadModel(join(final, "merged"));
  const seq = [[1, 20, 21, 22, 23, 24]];
  const [a, m] = [score(adapted, seq), score(merged, seq)].map((s) => s.logprobs[0]!);
  expect(Math.max(...a!.map((x, i) => Math.abs(x - m![i]!)))).toBeLessThan(1e-4);

  // resume from the step-10 adapter checkpoint with more steps
  writeFileSync(config, readFileSync(config, "utf8").replace("steps = 20", "steps = 24"));
  const resumed = rlx(["sft", config, "--resume"]);
  expect(resumed.err).toBe("");
  expect(resumed.code).toBe(0);
  expect(resumed.out).toMatch(/step +2[1-4]\/24/);
}, 300_000);
