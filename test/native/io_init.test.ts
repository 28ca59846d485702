// `rlx init` end to end through the real CLI: seeded and byte-reproducible, a directory that loads
// back through the shim and whose tokenizer loads in @huggingface/tokenizers, parameter counts that
// match the shim's parameter list, a chat template given on the command line, and refusals for a non-empty --out or a too-small vocabulary.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { loadModel } from "../../src/model/hf.ts";
import { ChatRenderer } from "../../src/model/render.ts";
import { Tokenizer as RlxTokenizer } from "../../src/model/tokenizer.ts";
import { countParams, PRESETS } from "../../src/model/presets.ts";
import { readSafetensors } from "../../src/model/safetensors.ts";
import { NativeModel } from "../../src/native/model.ts";

const ROOT = join(import.meta.dir, "../..");
const tmp = mkdtempSync(join(tmpdir(), "rlx-init-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function rlx(...args: string[]) {
  const proc = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() };
}

function init(out: string, ...more: string[]) {
  const run = rlx("init", "--out", out, "--json", ...more);
  if (run.code !== 0) throw new Error(`rlx init failed: ${run.err}`);
  return JSON.parse(run.out);
}

describe("rlx init", () => {
  test("the same seed writes byte-identical files; another seed other weights", () => {
    const a = init(join(tmp, "a"), "--preset", "tiny", "--seed", "5");
    init(join(tmp, "b"), "--preset", "tiny", "--seed", "5");
    init(join(tmp, "c"), "--preset", "tiny", "--seed", "6");
    expect(a.files).toEqual([
      "checksums.json",
      "config.json",
      "generation_config.json",
      "model.safetensors",
      "tokenizer.json",
      "tokenizer_config.json",
    ]);
    for (const file of a.files) expect(readFileSync(join(tmp, "b", file))).toEqual(readFileSync(join(tmp, "a", file)));
    expect(readFileSync(join(tmp, "c", "model.safetensors"))).not.toEqual(
      readFileSync(join(tmp, "a", "model.safetensors")),
    );
    expect(a).toMatchObject({
      name: "tiny",
      modelType: "qwen3",
      params: 3312384,
      dtype: "f32",
      seed: 5,
      tensorBytes: 4 * 3312384,
    });
  });

  test("the directory loads through the shim and its tokenizer loads and encodes bytes", async () => {
    const dir = join(tmp, "a");
    using model = await loadModel(dir);
    expect(model.config).toEqual(PRESETS.tiny!.config.shim);
    const tensors = readSafetensors(join(dir, "model.safetensors")).tensors;
    expect(tensors.get("model.layers.3.self_attn.q_norm.weight")!.shape).toEqual([64]);
    const tokenizer = new Tokenizer(
      JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")),
      JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")),
    );
    expect(tokenizer.encode("hi<|im_end|>").ids).toEqual([0x68, 0x69, 258]);
  });

  test("bf16 on disk is stated in config.json and in the safetensors header", () => {
    const dir = join(tmp, "bf16");
    init(dir, "--preset", "tiny", "--dtype", "bf16");
    expect(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")).torch_dtype).toBe("bfloat16");
    expect([...readSafetensors(join(dir, "model.safetensors")).tensors.values()].every((t) => t.dtype === "BF16")).toBe(
      true,
    );
  });

  test("a non-empty --out is refused unless --force, which replaces it", () => {
    const refused = rlx("init", "--preset", "tiny", "--out", join(tmp, "a"), "--seed", "9");
    expect(refused.code).toBe(1);
    expect(refused.err).toContain("exists and is not empty");
    const before = readFileSync(join(tmp, "a", "model.safetensors"));
    init(join(tmp, "a"), "--preset", "tiny", "--seed", "9", "--force");
    expect(readFileSync(join(tmp, "a", "model.safetensors"))).not.toEqual(before);
  });

  test("--chat-template writes the template the renderer then uses, and refuses one that does not parse", () => {
    const dir = join(tmp, "bare");
    const made = init(dir, "--preset", "tiny", "--chat-template", join(ROOT, "configs/templates/bare.jinja"));
    expect(made.files).toContain("chat_template.jinja");
    const renderer = new ChatRenderer(RlxTokenizer.load(dir));
    const messages = [
      { role: "user" as const, content: "48+22=" },
      { role: "assistant" as const, content: "70" },
    ];
    expect(renderer.text(messages, { addGenerationPrompt: false })).toBe("48+22=70<|im_end|>");
    const broken = join(tmp, "broken.jinja");
    writeFileSync(broken, "{% for m in messages %}{{ m.content }}");
    const refused = rlx("init", "--preset", "tiny", "--out", join(tmp, "broken"), "--chat-template", broken);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain(`--chat-template ${broken}: not a valid Jinja template`);
  });

  test("--config builds a given config.json and refuses a vocabulary smaller than the byte tokenizer", () => {
    const file = join(tmp, "llama.json");
    const llama = {
      model_type: "llama",
      hidden_size: 64,
      num_attention_heads: 2,
      num_hidden_layers: 1,
      intermediate_size: 128,
      vocab_size: 300,
    };
    writeFileSync(file, JSON.stringify(llama));
    const made = init(join(tmp, "llama"), "--config", file);
    expect(made).toMatchObject({ modelType: "llama", params: 300 * 64 * 2 + 64 * 64 * 4 + 3 * 64 * 128 + 3 * 64 });
    writeFileSync(file, JSON.stringify({ ...llama, vocab_size: 256 }));
    const refused = rlx("init", "--config", file, "--out", join(tmp, "small-vocab"));
    expect(refused.code).toBe(1);
    expect(refused.err).toContain("vocab_size 256 is smaller than the byte tokenizer's 259 tokens");
  });
});

describe("presets", () => {
  test("closed-form parameter counts equal the shim's parameter list (tiny, small)", async () => {
    for (const name of ["tiny", "small"]) {
      const { shim } = PRESETS[name]!.config;
      using model = await NativeModel.create(shim);
      const total = model.params().reduce((sum, p) => sum + p.shape.reduce((a, b) => a * b, 1), 0);
      expect(countParams(shim)).toBe(total);
    }
  });

  test("qwen3-0.6b has the published Qwen3-0.6B size: 0.6B total, 0.44B without embeddings", () => {
    const { shim } = PRESETS["qwen3-0.6b"]!.config;
    expect(countParams(shim)).toBe(596049920);
    expect(countParams(shim) - shim.vocab_size * shim.hidden_size).toBe(440467456);
  });
});
