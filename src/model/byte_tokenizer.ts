// The tokenizer of models made from scratch by `rlx init`: one token per byte, plus three ChatML
// special tokens. Written as ordinary Hugging Face files (tokenizer.json, tokenizer_config.json,
// generation_config.json) so the same directory loads in @huggingface/tokenizers, transformers and
// vLLM with no rlx-specific code.
//
// Why this layout:
//   - The model is a byte-level BPE with an empty merge list, so every UTF-8 byte becomes exactly
//     one token. Ids 0..255 are the byte values themselves (token strings use the GPT-2 byte-to-
//     unicode alphabet that the ByteLevel pre-tokenizer and decoder expect), so the ids of plain
//     text are its UTF-8 bytes: `new TextEncoder().encode(text)`. That is what makes a
//     no-injection encoding trivial: text that spells "<|im_end|>" can always be encoded as its
//     10 bytes instead of the special token.
//   - No normalizer: NFC or similar would change bytes and break the round trip of arbitrary text.
//   - Special tokens are 256 `<|endoftext|>` (pad, bos), 257 `<|im_start|>`, 258 `<|im_end|>` (eos),
//     as in Qwen2.5's ChatML, so chat rendering code written for Qwen works unchanged.
//   - Vocabulary size: the tokenizer has 259 entries; tiny models pad the embedding to 320
//     (259 rounded up to a multiple of 64, `paddedVocabSize`) because matmuls prefer aligned sizes.
//     Ids 259..319 are never produced by the tokenizer; a model may still sample them, and they
//     decode to nothing.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Number of byte tokens: ids 0..255 are the byte values. */
export const BYTE_TOKENS = 256;
/** Id of `<|endoftext|>`: padding and document separator (Qwen's convention). */
export const ENDOFTEXT_ID = 256;
/** Id of `<|im_start|>`, which opens a ChatML message. */
export const IM_START_ID = 257;
/** Id of `<|im_end|>`, which closes a ChatML message and ends generation. */
export const IM_END_ID = 258;
/** Entries in the tokenizer (bytes + specials); model vocab sizes must be at least this. */
export const BYTE_TOKENIZER_SIZE = 259;

const SPECIALS: ReadonlyArray<readonly [number, string]> = [
  [ENDOFTEXT_ID, "<|endoftext|>"],
  [IM_START_ID, "<|im_start|>"],
  [IM_END_ID, "<|im_end|>"],
];

/** Rounds a vocabulary size up to a multiple of `multiple` (64 by default). */
export function paddedVocabSize(size: number, multiple = 64): number {
  return Math.ceil(size / multiple) * multiple;
}

/**
 * The GPT-2 byte-to-unicode alphabet: printable Latin-1 bytes map to themselves, the other 68
 * bytes (controls, space, a few Latin-1 gaps) map to U+0100 onward in byte order. The ByteLevel
 * pre-tokenizer turns each UTF-8 byte into one of these characters, and the decoder reverses it.
 */
export function byteToUnicode(): string[] {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const chars: string[] = [];
  let shifted = 0;
  for (let b = 0; b < BYTE_TOKENS; b++) {
    chars.push(String.fromCharCode(printable(b) ? b : 256 + shifted++));
  }
  return chars;
}

/** The tokenizer.json object (Hugging Face `tokenizers` serialization format). */
export function byteTokenizerJson(): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  byteToUnicode().forEach((ch, byte) => (vocab[ch] = byte));
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: SPECIALS.map(([id, content]) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    // use_regex false: with no merges the GPT-2 word split cannot change the result, so skip it.
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    post_processor: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: [],
    },
  };
}

/** The tokenizer_config.json object: special token roles and the ChatML chat template. */
export function byteTokenizerConfig(): Record<string, unknown> {
  const addedTokensDecoder: Record<string, unknown> = {};
  for (const [id, content] of SPECIALS) {
    addedTokensDecoder[String(id)] = {
      content,
      lstrip: false,
      normalized: false,
      rstrip: false,
      single_word: false,
      special: true,
    };
  }
  return {
    tokenizer_class: "PreTrainedTokenizerFast",
    added_tokens_decoder: addedTokensDecoder,
    additional_special_tokens: ["<|im_start|>", "<|im_end|>"],
    bos_token: null,
    eos_token: "<|im_end|>",
    pad_token: "<|endoftext|>",
    unk_token: null,
    // The library default (true) rewrites " ." to "." on decode, which breaks byte round trips.
    clean_up_tokenization_spaces: false,
    split_special_tokens: false,
    model_max_length: 131072,
    errors: "replace",
    chat_template: CHATML_TEMPLATE,
  };
}

/** The generation_config.json object: stop on `<|im_end|>` or `<|endoftext|>`. */
export function byteGenerationConfig(): Record<string, unknown> {
  return { bos_token_id: ENDOFTEXT_ID, eos_token_id: [IM_END_ID, ENDOFTEXT_ID], pad_token_id: ENDOFTEXT_ID };
}

/**
 * ChatML in the Qwen2.5 layout, written for rlx: `<|im_start|>ROLE\nCONTENT<|im_end|>\n` per
 * message; no default system prompt (a byte-level model from scratch has no persona); tools, when
 * given, are listed as JSON in the system message; an assistant's tool calls follow its content as
 * `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>` (arguments given as a JSON string are
 * inserted verbatim, objects are serialized); consecutive tool results share one user turn, each
 * wrapped in `<tool_response>`. Rendering a prefix of a conversation with add_generation_prompt is
 * a string prefix of rendering the conversation with the assistant's reply appended, which is what
 * multi-turn rollouts rely on.
 */
export const CHATML_TEMPLATE = [
  "{%- if tools %}",
  "{{- '<|im_start|>system\n' }}",
  "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}",
  "{{- '# Tools\n\nThese functions are available. Their signatures, one JSON object per line:\n<tools>' }}",
  "{%- for tool in tools %}{{- '\n' + (tool | tojson) }}{%- endfor %}",
  '{{- \'\n</tools>\n\nTo call a function, reply with a JSON object holding its name and arguments inside <tool_call></tool_call> tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n\' }}',
  "{%- elif messages[0].role == 'system' %}",
  "{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}",
  "{%- endif %}",
  "{%- for message in messages %}",
  "{%- if message.role == 'system' %}",
  "{%- if not loop.first %}{{- '<|im_start|>system\n' + message.content + '<|im_end|>\n' }}{%- endif %}",
  "{%- elif message.role == 'user' %}",
  "{{- '<|im_start|>user\n' + message.content + '<|im_end|>\n' }}",
  "{%- elif message.role == 'assistant' %}",
  "{{- '<|im_start|>assistant\n' }}",
  "{%- if message.content %}{{- message.content }}{%- endif %}",
  "{%- if message.tool_calls %}",
  "{%- for call in message.tool_calls %}",
  "{%- if call.function is defined %}{%- set fn = call.function %}{%- else %}{%- set fn = call %}{%- endif %}",
  "{%- if message.content or not loop.first %}{{- '\n' }}{%- endif %}",
  '{{- \'<tool_call>\n{"name": "\' + fn.name + \'", "arguments": \' }}',
  "{%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}",
  "{{- '}\n</tool_call>' }}",
  "{%- endfor %}",
  "{%- endif %}",
  "{{- '<|im_end|>\n' }}",
  "{%- elif message.role == 'tool' %}",
  "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}",
  "{{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}",
  "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}",
  "{%- endif %}",
  "{%- endfor %}",
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}",
].join("\n");

/** Names of the files `writeByteTokenizer` writes. */
export const BYTE_TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "generation_config.json"] as const;

/** Writes tokenizer.json, tokenizer_config.json and generation_config.json into `dir` (created if missing). */
export function writeByteTokenizer(dir: string): void {
  mkdirSync(dir, { recursive: true });
  const write = (name: string, value: unknown) => writeFileSync(join(dir, name), JSON.stringify(value, null, 2) + "\n");
  write("tokenizer.json", byteTokenizerJson());
  write("tokenizer_config.json", byteTokenizerConfig());
  write("generation_config.json", byteGenerationConfig());
}
