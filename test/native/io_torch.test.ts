// A directory rlx writes means the same model to an independent implementation: PyTorch
// (bench/reference/hf_logprobs.py: transformers' Llama/Qwen2/Qwen3 math over weights read by a
// separate safetensors reader) computes the same logprobs as the shim for qwen3 (q/k norm, untied),
// qwen2 (q/k/v biases, tied, sharded), llama, and llama3 / yarn RoPE scaling. Skips when Debian's python with torch is absent.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ModelConfig, modelConfigFromShim, parseModelConfig } from "../../src/model/config.ts";
import { saveModel } from "../../src/model/hf.ts";
import { score } from "../../src/native/generate.ts";
import { NativeModel } from "../../src/native/model.ts";
import { rng } from "./tiny_model.ts";

const PYTHON = process.env.RLX_BENCH_PYTHON ?? "/usr/bin/python3";
const SCRIPT = join(import.meta.dir, "../../bench/reference/hf_logprobs.py");
const hasTorch = Bun.spawnSync([PYTHON, "-c", "import torch"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
const root = mkdtempSync(join(tmpdir(), "rlx-iotorch-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const BASE = {
  vocab_size: 96,
  hidden_size: 48,
  intermediate_size: 80,
  num_hidden_layers: 2,
  num_attention_heads: 6,
  num_key_value_heads: 2,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 5000,
  max_position_embeddings: 128,
  tie_word_embeddings: false,
  attention_bias: false,
  qk_norm: false,
};
const CASES: [string, ModelConfig, number][] = [
  ["qwen3: q/k norm, untied", modelConfigFromShim("qwen3", { ...BASE, qk_norm: true }), Infinity],
  [
    "qwen2: q/k/v biases, tied, sharded",
    modelConfigFromShim("qwen2", { ...BASE, attention_bias: true, tie_word_embeddings: true }),
    20_000,
  ],
  [
    "llama: 4 heads over 2 kv heads, head_dim 12",
    modelConfigFromShim("llama", { ...BASE, num_attention_heads: 4, head_dim: 12 }),
    Infinity,
  ],
  [
    "llama3: Llama 3.1 RoPE scaling",
    parseModelConfig(
      {
        ...BASE,
        model_type: "llama",
        rope_scaling: {
          rope_type: "llama3",
          factor: 8,
          low_freq_factor: 1,
          high_freq_factor: 4,
          original_max_position_embeddings: 16,
        },
      },
      "llama3",
    ),
    Infinity,
  ],
  [
    "yarn: YaRN RoPE scaling, q/k norm",
    parseModelConfig(
      {
        ...BASE,
        model_type: "qwen3",
        rope_scaling: { rope_type: "yarn", factor: 4, original_max_position_embeddings: 16 },
      },
      "yarn",
    ),
    Infinity,
  ],
];

for (const [label, config, shardBytes] of CASES) {
  test.skipIf(!hasTorch)(`PyTorch reads the saved directory as the same model: ${label}`, async () => {
    using model = await NativeModel.create(config.shim, { seed: 21 });
    // Random norms and biases, and a sharpened head so logprobs are far from uniform.
    const rand = rng(5);
    for (const p of model.params()) {
      const n = p.shape.reduce((a, b) => a * b, 1);
      if (p.name.endsWith("norm.weight") || p.name.endsWith(".bias")) {
        model.setParam(
          p.name,
          Float32Array.from({ length: n }, () => 0.5 + rand()),
          "f32",
          p.shape,
        );
      }
    }
    const head = config.shim.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    const w = new Float32Array(model.getParam(head, "f32").buffer).map((x) => x * 30);
    model.setParam(head, w, "f32", model.param(head).shape);

    const dir = join(root, label.split(":")[0]!);
    saveModel(model, dir, { dtype: "f32", config, shardBytes });
    const sequences = [
      [3, 17, 95, 0, 44, 44, 12, 7, 61],
      [8, 2],
    ];
    const proc = Bun.spawnSync([PYTHON, SCRIPT, dir, JSON.stringify(sequences)], { stdout: "pipe", stderr: "pipe" });
    expect(proc.stderr.toString()).toBe("");
    const theirs = JSON.parse(proc.stdout.toString()) as number[][];
    const ours = score(model, sequences).logprobs;
    let spread = 0;
    sequences.forEach((seq, i) => {
      for (let t = 1; t < seq.length; t++) {
        expect(Math.abs(ours[i]![t]! - theirs[i]![t]!)).toBeLessThan(2e-4);
        spread = Math.max(spread, Math.abs(theirs[i]![t]! + Math.log(config.shim.vocab_size)));
      }
    });
    expect(spread).toBeGreaterThan(1); // far from uniform: the comparison can fail
  });
}
