// LoRA adapters on disk (src/model/adapter.ts): PEFT 0.14.0's layout, tensor names and config keys;
// an adapter directory loads as base + adapter (unmerged) with the logprobs of the model that wrote
// it; the merged save is a plain model with the same logprobs; and Debian's PyTorch, applying
// W + (alpha / r) B A by hand to the files (bench/reference/lora_logprobs.py, no peft package),
// gives rlx's logprobs within 1e-5. That test skips, saying so, where python3-torch is absent.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS, isAdapterDir } from "../../src/model/adapter.ts";
import { modelConfigFromShim } from "../../src/model/config.ts";
import { loadModel, saveModel } from "../../src/model/hf.ts";
import { readSafetensors } from "../../src/model/safetensors.ts";
import { score } from "../../src/native/generate.ts";
import { LORA_TARGETS } from "../../src/model/config.ts";
import { NativeModel } from "../../src/native/model.ts";
import { rng, TINY_FULL } from "./tiny_model.ts";

setDefaultTimeout(120_000);
const PYTHON = process.env.RLX_BENCH_PYTHON ?? "/usr/bin/python3";
const SCRIPT = join(import.meta.dir, "../../bench/reference/lora_logprobs.py");
const hasTorch = Bun.spawnSync([PYTHON, "-c", "import torch"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
if (!hasTorch) console.warn(`lora_io.test.ts: ${PYTHON} has no torch: the PyTorch comparison is skipped`);
const root = mkdtempSync(join(tmpdir(), "rlx-lora-io-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// PEFT 0.14.0's LoraConfig.to_dict() keys (runtime_config removed), as save_pretrained writes them.
const PEFT_KEYS = [
  "alpha_pattern",
  "auto_mapping",
  "base_model_name_or_path",
  "bias",
  "eva_config",
  "exclude_modules",
  "fan_in_fan_out",
  "inference_mode",
  "init_lora_weights",
  "layer_replication",
  "layers_pattern",
  "layers_to_transform",
  "loftq_config",
  "lora_alpha",
  "lora_bias",
  "lora_dropout",
  "megatron_config",
  "megatron_core",
  "modules_to_save",
  "peft_type",
  "r",
  "rank_pattern",
  "revision",
  "target_modules",
  "task_type",
  "use_dora",
  "use_rslora",
];

const SEQUENCES = [
  [3, 17, 60, 0, 44, 44, 12, 7, 61],
  [8, 2, 9],
];

/** A qwen3-shaped base saved to `root/base` (random norms, a sharp head), and the same model with a trained-looking adapter. */
async function baseAndAdapted(label: string) {
  const config = modelConfigFromShim("qwen3", { ...TINY_FULL, attention_bias: false });
  const base = join(root, `${label}-base`);
  const model = await NativeModel.create(config.shim, { seed: 8 });
  const rand = rng(3);
  for (const p of model.params()) {
    const n = p.shape.reduce((a, b) => a * b, 1);
    if (p.name.endsWith("norm.weight") || p.name.endsWith(".bias"))
      model.setParam(
        p.name,
        Float32Array.from({ length: n }, () => 0.5 + rand()),
        "f32",
        p.shape,
      );
  }
  const head = new Float32Array(model.getParam("lm_head.weight", "f32").buffer).map((x) => x * 20);
  model.setParam("lm_head.weight", head, "f32", model.param("lm_head.weight").shape);
  saveModel(model, base, { dtype: "f32", config });
  writeFileSync(join(base, "tokenizer.json"), "{}");
  model.addLora({ rank: 4, alpha: 16, dropout: 0.05, targets: LORA_TARGETS }, 5);
  for (const p of model.loraParams()) {
    const n = p.shape.reduce((a, b) => a * b, 1);
    model.setParam(
      p.name,
      Float32Array.from({ length: n }, () => (rand() - 0.5) * 0.2),
      "f32",
      p.shape,
    );
  }
  return { model, base };
}

test("an adapter saves in PEFT's layout: files, tensor names and shapes, adapter_config.json keys", async () => {
  const { model, base } = await baseAndAdapted("layout");
  using _ = model;
  const dir = join(root, "layout-adapter");
  const saved = saveModel(model, dir, { dtype: "bf16", sourceDir: base });
  expect(saved.files).toEqual([ADAPTER_CONFIG, ADAPTER_WEIGHTS, "checksums.json", "tokenizer.json"]);
  expect(isAdapterDir(dir)).toBe(true);
  const text = readFileSync(join(dir, ADAPTER_CONFIG), "utf8");
  const config = JSON.parse(text) as Record<string, unknown>;
  expect(Object.keys(config)).toEqual(PEFT_KEYS); // sorted, as json.dumps(sort_keys=True)
  expect(text).toBe(JSON.stringify(config, null, 2)); // indent=2
  expect(config).toMatchObject({
    peft_type: "LORA",
    task_type: "CAUSAL_LM",
    r: 4,
    lora_alpha: 16,
    lora_dropout: 0.05,
    target_modules: [...LORA_TARGETS],
    base_model_name_or_path: base,
    bias: "none",
    use_rslora: false,
    use_dora: false,
  });
  const tensors = readSafetensors(join(dir, ADAPTER_WEIGHTS)).tensors;
  expect(tensors.size).toBe(2 * 7 * TINY_FULL.num_hidden_layers);
  const q = "base_model.model.model.layers.1.self_attn.q_proj";
  expect(tensors.get(`${q}.lora_A.weight`)).toMatchObject({ dtype: "F32", shape: [4, 32] });
  expect(tensors.get(`${q}.lora_B.weight`)).toMatchObject({ dtype: "F32", shape: [32, 4] });
  expect(tensors.get("base_model.model.model.layers.0.mlp.down_proj.lora_A.weight")!.shape).toEqual([4, 48]);
  // no base weights in an adapter directory
  expect([...tensors.keys()].every((name) => /\.lora_[AB]\.weight$/.test(name))).toBe(true);
});

test("an adapter directory loads as base + adapter, unmerged, with the writer's logprobs; merged saves match", async () => {
  const { model, base } = await baseAndAdapted("roundtrip");
  using _ = model;
  const dir = join(root, "roundtrip-adapter");
  saveModel(model, dir, { dtype: "f32", sourceDir: base });
  using loaded = await loadModel(dir);
  expect(loaded.lora).toEqual({ rank: 4, alpha: 16, dropout: 0.05, targets: [...LORA_TARGETS] });
  const want = score(model, SEQUENCES).logprobs;
  const got = score(loaded, SEQUENCES).logprobs;
  SEQUENCES.forEach((_, i) => expect([...got[i]!]).toEqual([...want[i]!]));
  // the base weights under it are the base directory's, untouched
  using plain = await loadModel(base);
  for (const p of plain.params()) expect(loaded.getParam(p.name)).toEqual(plain.getParam(p.name));
  // merged: a full model directory without LoRA, the same distribution
  const mergedDir = join(root, "roundtrip-merged");
  saveModel(model, mergedDir, { dtype: "f32", sourceDir: base, merged: true });
  expect(existsSync(join(mergedDir, "config.json"))).toBe(true);
  using merged = await loadModel(mergedDir);
  expect(merged.lora).toBeNull();
  const mergedLp = score(merged, SEQUENCES).logprobs;
  SEQUENCES.forEach((seq, i) => {
    for (let t = 1; t < seq.length; t++) expect(Math.abs(mergedLp[i]![t]! - want[i]![t]!)).toBeLessThan(1e-4);
  });
});

test("adapter_config.json that rlx cannot apply exactly is an error naming the key", async () => {
  const { model, base } = await baseAndAdapted("refuse");
  using _ = model;
  const dir = join(root, "refuse-adapter");
  saveModel(model, dir, { dtype: "f32", sourceDir: base });
  const original = readFileSync(join(dir, ADAPTER_CONFIG), "utf8");
  const edit = async (change: Record<string, unknown>) => {
    writeFileSync(join(dir, ADAPTER_CONFIG), JSON.stringify({ ...JSON.parse(original), ...change }));
    return loadModel(dir).then(
      (m) => (m.free(), "loaded"),
      (err: Error) => err.message,
    );
  };
  expect(await edit({ use_dora: true })).toMatch(/"use_dora" must be false/);
  expect(await edit({ target_modules: ["q_proj", "lm_head"] })).toMatch(/"target_modules" names "lm_head"/);
  expect(await edit({ rank_pattern: { q_proj: 8 } })).toMatch(/"rank_pattern" must be empty/);
  expect(await edit({ base_model_name_or_path: join(root, "nowhere") })).toMatch(/has no config.json/);
  expect(await edit({ r: 8 })).toMatch(/has shape \[4,32\], the model's is \[8,32\]/);
});

test.skipIf(!hasTorch)(
  "PyTorch 1.13 applying base + (alpha / r) B A by hand gives rlx's logprobs within 1e-5",
  async () => {
    const { model, base } = await baseAndAdapted("torch");
    model.free();
    const dir = join(root, "torch-adapter");
    {
      using trained = await loadModel(base);
      trained.addLora({ rank: 4, alpha: 16, dropout: 0.05, targets: LORA_TARGETS }, 5);
      const rand = rng(17);
      for (const p of trained.loraParams()) {
        const n = p.shape.reduce((a, b) => a * b, 1);
        trained.setParam(
          p.name,
          Float32Array.from({ length: n }, () => (rand() - 0.5) * 0.2),
          "f32",
          p.shape,
        );
      }
      saveModel(trained, dir, { dtype: "f32", sourceDir: base });
    }
    // rlx in float64 (the f32 files widen exactly), unmerged; the reference merges in float64
    using ours = await loadModel(dir, { dtype: "f64" });
    const proc = Bun.spawnSync([PYTHON, SCRIPT, dir, JSON.stringify(SEQUENCES)], { stdout: "pipe", stderr: "pipe" });
    expect(proc.stderr.toString()).toBe("");
    const theirs = JSON.parse(proc.stdout.toString()) as number[][];
    const got = score(ours, SEQUENCES).logprobs;
    let worst = 0;
    let spread = 0;
    SEQUENCES.forEach((seq, i) => {
      for (let t = 1; t < seq.length; t++) {
        worst = Math.max(worst, Math.abs(got[i]![t]! - theirs[i]![t]!));
        spread = Math.max(spread, Math.abs(theirs[i]![t]! + Math.log(TINY_FULL.vocab_size)));
      }
    });
    console.log(`lora_io.test.ts: largest |rlx - PyTorch| logprob difference ${worst.toExponential(2)}`);
    expect(worst).toBeLessThan(1e-5);
    expect(spread).toBeGreaterThan(1); // far from uniform: the comparison can fail
    // and the adapter matters: without it the reference's logprobs are far from these
    using bare = await loadModel(base, { dtype: "f64" });
    const bareLp = score(bare, SEQUENCES).logprobs;
    expect(
      Math.max(...SEQUENCES.flatMap((seq, i) => seq.map((_, t) => Math.abs(bareLp[i]![t]! - theirs[i]![t]!)))),
    ).toBeGreaterThan(1e-2);
  },
);
