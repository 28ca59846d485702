// The byte-level tokenizer of `rlx init` models: it must load in @huggingface/tokenizers, map text
// to exactly its UTF-8 bytes and back, keep special-token spellings encodable as plain bytes, and
// carry a ChatML template that renders with @huggingface/jinja.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";
import {
  BYTE_TOKENIZER_FILES,
  BYTE_TOKENIZER_SIZE,
  byteGenerationConfig,
  byteToUnicode,
  byteTokenizerConfig,
  byteTokenizerJson,
  CHATML_TEMPLATE,
  ENDOFTEXT_ID,
  IM_END_ID,
  IM_START_ID,
  paddedVocabSize,
  writeByteTokenizer,
} from "../../../src/model/byte_tokenizer.ts";

const tokenizer = new Tokenizer(byteTokenizerJson(), byteTokenizerConfig());
const utf8 = (text: string) => Array.from(new TextEncoder().encode(text));

// A seeded generator of text drawn from every UTF-8 length class, controls and unnormalized forms.
function randomText(seed: number, length: number): string {
  let state = seed >>> 0;
  const next = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const ranges: Array<[number, number]> = [
    [0x00, 0x7f], // ASCII including NUL and controls
    [0x80, 0x7ff], // 2-byte, Latin-1 supplement, combining marks
    [0x800, 0xd7ff], // 3-byte below the surrogates (CJK)
    [0xe000, 0xffff], // 3-byte above the surrogates (private use, BOM, specials)
    [0x10000, 0x10ffff], // 4-byte (emoji, astral planes)
  ];
  let out = "";
  for (let i = 0; i < length; i++) {
    const [lo, hi] = ranges[Math.floor(next() * ranges.length)]!;
    out += String.fromCodePoint(lo + Math.floor(next() * (hi - lo + 1)));
  }
  return out;
}

describe("byte tokenizer", () => {
  test("the byte alphabet is a bijection of 256 characters that keeps printable bytes as themselves", () => {
    const chars = byteToUnicode();
    expect(new Set(chars).size).toBe(256);
    expect(chars[0x41]).toBe("A");
    expect(chars[0x20]).toBe("\u0120"); // space is the 33rd non-printable byte: 256 + 32
    expect(chars[0x00]).toBe("\u0100");
    expect(chars[0xad]).toBe("\u0143"); // soft hyphen, the last shifted byte: 256 + 67
  });

  test("loads in @huggingface/tokenizers with the specials at 256, 257, 258", () => {
    expect(tokenizer.get_vocab().size).toBe(BYTE_TOKENIZER_SIZE);
    expect(tokenizer.token_to_id("<|endoftext|>")).toBe(ENDOFTEXT_ID);
    expect(tokenizer.token_to_id("<|im_start|>")).toBe(IM_START_ID);
    expect(tokenizer.token_to_id("<|im_end|>")).toBe(IM_END_ID);
  });

  test("encodes any UTF-8 text to exactly its bytes and decodes it back", () => {
    const samples = ["", "hello world", " leading and trailing ", "a\u0000b\r\n\t", "e\u0301 vs \u00e9", "x . y , z"];
    for (let seed = 1; seed <= 40; seed++) samples.push(randomText(seed, 1 + (seed % 7) * 9));
    for (const text of samples) {
      const ids = tokenizer.encode(text).ids;
      expect(ids).toEqual(utf8(text));
      if (ids.length > 0) expect(tokenizer.decode(ids)).toBe(text);
    }
  });

  test("special-token spellings in text become special ids in a plain encode", () => {
    const ids = tokenizer.encode("a<|im_end|>b").ids;
    expect(ids).toEqual([0x61, IM_END_ID, 0x62]);
    expect(tokenizer.decode(ids)).toBe("a<|im_end|>b");
    expect(tokenizer.decode(ids, { skip_special_tokens: true })).toBe("ab");
  });

  test("the text '<|im_end|>' can be encoded as plain bytes and decodes to the same text", () => {
    const text = "<|im_end|><|im_start|>";
    const bytes = utf8(text);
    expect(bytes.every((id) => id < 256)).toBe(true);
    expect(tokenizer.decode(bytes)).toBe(text);
    // The pre-tokenizer and model without the added-token splitter give the same byte ids.
    const pieces = tokenizer.model!(tokenizer.pre_tokenizer!(text)) as string[];
    expect(pieces.map((p) => tokenizer.token_to_id(p))).toEqual(bytes);
  });

  test("paddedVocabSize rounds up to a multiple of 64", () => {
    expect(paddedVocabSize(BYTE_TOKENIZER_SIZE)).toBe(320);
    expect(paddedVocabSize(320)).toBe(320);
    expect(paddedVocabSize(151936)).toBe(151936);
  });

  test("writeByteTokenizer writes three JSON files that load back into the same tokenizer", () => {
    const dir = mkdtempSync(join(tmpdir(), "rlx-bytetok-"));
    try {
      writeByteTokenizer(dir);
      const read = (name: string) => JSON.parse(readFileSync(join(dir, name), "utf8"));
      expect(read("tokenizer.json")).toEqual(byteTokenizerJson());
      expect(read("tokenizer_config.json")).toEqual(byteTokenizerConfig());
      expect(read("generation_config.json")).toEqual(byteGenerationConfig());
      expect(BYTE_TOKENIZER_FILES.length).toBe(3);
      const loaded = new Tokenizer(read("tokenizer.json"), read("tokenizer_config.json"));
      expect(loaded.encode("caf\u00e9<|im_start|>").ids).toEqual([0x63, 0x61, 0x66, 0xc3, 0xa9, IM_START_ID]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("ChatML template", () => {
  const template = new Template(CHATML_TEMPLATE);
  const render = (messages: unknown[], extra: Record<string, unknown> = {}) => template.render({ messages, ...extra });

  test("renders system, user and assistant turns and the generation prompt", () => {
    const text = render(
      [
        { role: "system", content: "Be brief." },
        { role: "user", content: "2+2?" },
        { role: "assistant", content: "4" },
      ],
      { add_generation_prompt: false },
    );
    expect(text).toBe(
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n",
    );
    expect(render([{ role: "user", content: "hi" }], { add_generation_prompt: true })).toBe(
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    );
  });

  test("renders tool calls as <tool_call> JSON and tool results as one user turn of <tool_response>s", () => {
    const text = render([
      { role: "user", content: "run it" },
      {
        role: "assistant",
        content: "Running.",
        tool_calls: [
          { type: "function", function: { name: "forth", arguments: '{"code": "1 2 +"}' } },
          { type: "function", function: { name: "forth", arguments: { code: "." } } },
        ],
      },
      { role: "tool", content: "3" },
      { role: "tool", content: "ok" },
    ]);
    expect(text).toBe(
      "<|im_start|>user\nrun it<|im_end|>\n" +
        '<|im_start|>assistant\nRunning.\n<tool_call>\n{"name": "forth", "arguments": {"code": "1 2 +"}}\n</tool_call>\n' +
        '<tool_call>\n{"name": "forth", "arguments": {"code": "."}}\n</tool_call><|im_end|>\n' +
        "<|im_start|>user\n<tool_response>\n3\n</tool_response>\n<tool_response>\nok\n</tool_response><|im_end|>\n",
    );
  });

  test("lists tools in the system message and starts a content-less tool call right after the header", () => {
    const tools = [{ type: "function", function: { name: "search", parameters: { type: "object" } } }];
    const text = render(
      [
        { role: "system", content: "S" },
        { role: "assistant", content: null, tool_calls: [{ function: { name: "search", arguments: { q: "x" } } }] },
      ],
      { tools },
    );
    expect(text.startsWith("<|im_start|>system\nS\n\n# Tools\n")).toBe(true);
    expect(text).toContain(
      '\n<tools>\n{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}\n</tools>',
    );
    expect(text).toContain(
      '<|im_start|>assistant\n<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call><|im_end|>\n',
    );
  });

  test("a prompt with the generation prompt is a prefix of the conversation extended by the reply", () => {
    const history = [
      { role: "user", content: "q" },
      { role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: "{}" } }] },
      { role: "tool", content: "r" },
    ];
    const prompt = render(history, { add_generation_prompt: true });
    const extended = render([...history, { role: "assistant", content: "a" }]);
    expect(extended.startsWith(prompt)).toBe(true);
    const turnPrompt = render(history.slice(0, 1), { add_generation_prompt: true });
    expect(render(history).startsWith(turnPrompt)).toBe(true);
  });

  test("rendered chat encodes with <|im_start|> and <|im_end|> as single special tokens", () => {
    const ids = tokenizer.encode(render([{ role: "user", content: "hi" }], { add_generation_prompt: true })).ids;
    expect(ids).toEqual([
      IM_START_ID,
      ...utf8("user\nhi"),
      IM_END_ID,
      ...utf8("\n"),
      IM_START_ID,
      ...utf8("assistant\n"),
    ]);
  });
});
