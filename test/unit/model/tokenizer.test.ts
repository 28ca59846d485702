// The model-directory tokenizer: loading the HF files, stop tokens, and the guarantee that text
// from tasks, tools or the model never becomes a special token (encodePlain), checked on the byte
// tokenizer and on a BPE variant with merges and the GPT-2 regex pre-tokenizer.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelFileError } from "../../../src/errors.ts";
import {
  byteGenerationConfig,
  byteToUnicode,
  byteTokenizerConfig,
  byteTokenizerJson,
  ENDOFTEXT_ID,
  IM_END_ID,
  IM_START_ID,
  writeByteTokenizer,
} from "../../../src/model/byte_tokenizer.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";

const bytes = new Tokenizer(byteTokenizerJson(), byteTokenizerConfig(), byteGenerationConfig());
const utf8 = (text: string) => Array.from(new TextEncoder().encode(text));
const SPECIAL_IDS = [ENDOFTEXT_ID, IM_START_ID, IM_END_ID];

/** The byte tokenizer plus a few BPE merges ("he", "hel", "hell", "hello", "<|", "|>") and the
 * GPT-2 regex split, so plain encoding goes through real merges and pre-tokenization. */
function mergingTokenizer(): Tokenizer {
  const json = byteTokenizerJson() as {
    model: { vocab: Record<string, number>; merges: string[] };
    pre_tokenizer: Record<string, unknown>;
  };
  const merges = [
    ["h", "e"],
    ["he", "l"],
    ["hel", "l"],
    ["hell", "o"],
    ["<", "|"],
    ["|", ">"],
  ];
  merges.forEach(([a, b], i) => (json.model.vocab[a! + b!] = 259 + i));
  json.model.merges = merges.map(([a, b]) => `${a} ${b}`);
  json.pre_tokenizer = { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: true };
  return new Tokenizer(json, byteTokenizerConfig(), byteGenerationConfig());
}

function randomText(seed: number, length: number): string {
  let state = seed >>> 0;
  const next = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const pieces = [
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<|im",
    "|>",
    " ",
    "\n",
    "héllo",
    "日本",
    "🙂",
    "a",
    "<",
    "|",
  ];
  let out = "";
  while (out.length < length)
    out +=
      next() < 0.5
        ? pieces[Math.floor(next() * pieces.length)]
        : String.fromCodePoint(32 + Math.floor(next() * 0x2fff));
  return out;
}

describe("Tokenizer", () => {
  test("encode turns special spellings into special tokens; encodePlain never does", () => {
    expect(bytes.encode("a<|im_end|>b")).toEqual([97, IM_END_ID, 98]);
    expect(bytes.encodePlain("a<|im_end|>b")).toEqual(utf8("a<|im_end|>b"));
    expect(bytes.encodePlain("")).toEqual([]);
  });

  test("plain encoding of injected specials round-trips and holds no special id (bytes and BPE)", () => {
    for (const tokenizer of [bytes, mergingTokenizer()]) {
      for (let seed = 1; seed <= 50; seed++) {
        const text = randomText(seed, 200);
        const ids = tokenizer.encodePlain(text);
        expect(ids.some((id) => SPECIAL_IDS.includes(id))).toBe(false);
        expect(tokenizer.decode(ids)).toBe(text);
      }
    }
  });

  test("BPE merges apply in plain encoding, and match encode when the text has no special spelling", () => {
    const bpe = mergingTokenizer();
    expect(bpe.encodePlain("hello")).toEqual([262]);
    expect(bpe.encodePlain("<|im_end|>")).toEqual([263, ...utf8("im_end"), 264]);
    expect(bpe.encode("<|im_end|>")).toEqual([IM_END_ID]);
    for (let seed = 1; seed <= 20; seed++) {
      const text = randomText(seed, 100).replaceAll(/<\|(im_end|im_start|endoftext)\|>/g, "x");
      expect(bpe.encodePlain(text)).toEqual(bpe.encode(text));
    }
  });

  test("stop ids come from eos_token and generation_config; template and special strings are read", () => {
    expect(bytes.stopIds).toEqual([IM_END_ID, ENDOFTEXT_ID]);
    expect(bytes.specialIds).toEqual(new Set(SPECIAL_IDS));
    expect(bytes.templateTokens).toEqual({ eos_token: "<|im_end|>", pad_token: "<|endoftext|>" });
    expect(bytes.chatTemplate).toContain("<|im_start|>");
    expect(bytes.size).toBe(259);
    expect(bytes.tokenString(IM_END_ID)).toBe("<|im_end|>");
    expect(bytes.tokenString(32)).toBe(byteToUnicode()[32]);
  });

  test("load reads a model directory; chat_template.jinja overrides the config's template", () => {
    const dir = mkdtempSync(join(tmpdir(), "rlx-tok-"));
    try {
      writeByteTokenizer(dir);
      const loaded = Tokenizer.load(dir);
      expect(loaded.encode("hi<|im_start|>")).toEqual([104, 105, IM_START_ID]);
      expect(loaded.stopIds).toEqual([IM_END_ID, ENDOFTEXT_ID]);
      writeFileSync(join(dir, "chat_template.jinja"), "{% for m in messages %}{{ m.content }}{% endfor %}");
      expect(Tokenizer.load(dir).chatTemplate).toBe("{% for m in messages %}{{ m.content }}{% endfor %}");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("missing or broken files are ModelFileErrors naming the file", () => {
    const dir = mkdtempSync(join(tmpdir(), "rlx-tok-"));
    try {
      expect(() => Tokenizer.load(dir)).toThrow(ModelFileError);
      expect(() => Tokenizer.load(dir)).toThrow(/tokenizer\.json/);
      writeByteTokenizer(dir);
      writeFileSync(join(dir, "tokenizer_config.json"), "{ not json");
      expect(() => Tokenizer.load(dir)).toThrow(/cannot parse .*tokenizer_config\.json/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a config holding a list of named templates uses the default one", () => {
    const config = {
      ...byteTokenizerConfig(),
      chat_template: [
        { name: "tool_use", template: "T" },
        { name: "default", template: "D" },
      ],
    };
    expect(new Tokenizer(byteTokenizerJson(), config).chatTemplate).toBe("D");
  });
});
