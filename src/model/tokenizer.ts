// The tokenizer of a Hugging Face model directory: tokenizer.json through @huggingface/tokenizers,
// plus what tokenizer_config.json and generation_config.json say about special tokens, stop
// tokens and the chat template.
//
// Two encoders, on purpose. `encode` is for text rlx writes itself (chat-template scaffold): the
// spelling "<|im_end|>" becomes the special token. `encodePlain` is for text that comes from tasks,
// tools or the model: it runs the normalizer, pre-tokenizer and model directly, skipping the
// added-token splitter, so a tool output that spells "<|im_end|>" is encoded as ordinary text and
// can never end a message or forge a turn.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import { ModelFileError } from "../errors.ts";

type Json = Record<string, unknown>;

// The parts of the library's Tokenizer that are public at run time but absent from its .d.ts
// (or typed too loosely to call): the pipeline stages that `encodePlain` runs by hand.
interface HfPipeline {
  normalizer: ((text: string) => string) | null;
  pre_tokenizer: ((text: string, options: { section_index: number }) => string[]) | null;
  model: ((pieces: string[]) => string[]) & { tokens_to_ids: Map<string, number>; unk_token_id?: number };
}

/** A special token in tokenizer_config.json is either a string or `{ content: string, ... }`. */
function tokenString(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (value && typeof value === "object" && typeof (value as Json).content === "string")
    return (value as Json).content as string;
  return undefined;
}

function readJson(path: string, required: boolean): Json | undefined {
  if (!existsSync(path)) {
    if (!required) return undefined;
    throw new ModelFileError(`missing ${path}`, {
      fix: "a model directory needs the Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json); `rlx init` writes them for new models",
    });
  }
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Json;
  } catch (err) {
    throw new ModelFileError(`cannot parse ${path}: ${(err as Error).message}`, {
      fix: "restore the file from the model's original release",
    });
  }
}

export class Tokenizer {
  private readonly hf: HfTokenizer;
  private readonly pipeline: HfPipeline;
  /** Added-token strings (special or not) -> id: the spellings `encode` turns into one token. */
  readonly addedTokens: ReadonlyMap<string, number>;
  /** Ids of tokens flagged `special` (never counted as message content). */
  readonly specialIds: ReadonlySet<number>;
  /** Token ids that end an assistant turn: eos_token plus generation_config's eos_token_id. */
  readonly stopIds: number[];
  readonly chatTemplate: string | undefined;
  /** Special-token strings the chat template may reference (bos_token, eos_token, ...). */
  readonly templateTokens: Record<string, string>;
  /** Number of ids the tokenizer can produce (max id + 1). */
  readonly size: number;
  /** Byte-level BPE (GPT-2 alphabet: one character of a token string per byte), as Qwen and Llama 3. */
  readonly byteLevel: boolean;

  constructor(tokenizerJson: Json, config: Json = {}, generationConfig: Json = {}, chatTemplate?: string) {
    this.hf = new HfTokenizer(tokenizerJson, config);
    this.pipeline = this.hf as unknown as HfPipeline;
    const added = new Map<string, number>();
    const special = new Set<number>();
    for (const token of (tokenizerJson.added_tokens ?? []) as Array<{
      id: number;
      content: string;
      special: boolean;
    }>) {
      added.set(token.content, token.id);
      if (token.special) special.add(token.id);
    }
    this.addedTokens = added;
    this.specialIds = special;
    let maxId = -1;
    for (const id of this.hf.get_vocab(true).values()) maxId = Math.max(maxId, id);
    for (const id of added.values()) maxId = Math.max(maxId, id);
    this.size = maxId + 1;
    this.byteLevel = (tokenizerJson.decoder as Json | null | undefined)?.type === "ByteLevel";

    this.templateTokens = {};
    for (const key of ["bos_token", "eos_token", "pad_token", "unk_token"]) {
      const value = tokenString(config[key]);
      if (value !== undefined) this.templateTokens[key] = value;
    }
    const stops = new Set<number>();
    const eos = this.templateTokens.eos_token;
    if (eos !== undefined && added.has(eos)) stops.add(added.get(eos)!);
    const genEos = generationConfig.eos_token_id;
    for (const id of Array.isArray(genEos) ? genEos : genEos === undefined || genEos === null ? [] : [genEos])
      stops.add(Number(id));
    this.stopIds = [...stops];
    const template = chatTemplate ?? config.chat_template;
    // Some configs hold a list of named templates; the one named "default" is the chat template.
    if (Array.isArray(template)) {
      const entry = (template as Array<{ name: string; template: string }>).find((t) => t.name === "default");
      this.chatTemplate = entry?.template;
    } else {
      this.chatTemplate = typeof template === "string" ? template : undefined;
    }
  }

  /** Loads tokenizer.json, tokenizer_config.json, and (if present) generation_config.json and
   * chat_template.jinja (the newer place for the template) from a model directory. */
  static load(dir: string): Tokenizer {
    const tokenizerJson = readJson(join(dir, "tokenizer.json"), true)!;
    const config = readJson(join(dir, "tokenizer_config.json"), true)!;
    const generation = readJson(join(dir, "generation_config.json"), false) ?? {};
    const templatePath = join(dir, "chat_template.jinja");
    const template = existsSync(templatePath) ? readFileSync(templatePath, "utf8") : undefined;
    return new Tokenizer(tokenizerJson, config, generation, template);
  }

  /** Encodes text rlx wrote (template scaffold): added-token spellings become their tokens. */
  encode(text: string): number[] {
    if (text.length === 0) return [];
    return this.hf.encode(text, { add_special_tokens: false }).ids;
  }

  /** Encodes untrusted text (task, tool or model text): never produces an added token. */
  encodePlain(text: string): number[] {
    if (text.length === 0) return [];
    const { normalizer, pre_tokenizer, model } = this.pipeline;
    const normalized = normalizer ? normalizer(text) : text;
    if (normalized.length === 0) return [];
    const pieces = pre_tokenizer ? pre_tokenizer(normalized, { section_index: 0 }) : [normalized];
    return model(pieces).map((token) => {
      const id = model.tokens_to_ids.get(token) ?? model.unk_token_id;
      if (id === undefined)
        throw new ModelFileError(`tokenizer has no id for piece ${JSON.stringify(token)} and no unk token`, {
          fix: "check the model's tokenizer.json",
        });
      return id;
    });
  }

  /**
   * `encodePlain` with each token's length in UTF-8 bytes of `text`, for attributing tokens by
   * offset; undefined when lengths cannot be known (not byte-level, or the normalizer changed the
   * text, e.g. NFC on decomposed accents).
   */
  encodePlainWithLengths(text: string): { ids: number[]; byteLengths: number[] } | undefined {
    if (!this.byteLevel) return undefined;
    const { normalizer } = this.pipeline;
    if (normalizer && normalizer(text) !== text) return undefined;
    const ids = this.encodePlain(text);
    const byteLengths = ids.map((id) => this.hf.id_to_token(id)?.length ?? 0);
    const total = byteLengths.reduce((a, b) => a + b, 0);
    return total === Buffer.byteLength(text, "utf8") ? { ids, byteLengths } : undefined;
  }

  /** Decodes ids to text verbatim: special tokens kept, no clean-up of spaces. */
  decode(ids: number[]): string {
    if (ids.length === 0) return "";
    return this.hf.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  /** The token string of an id (for added tokens, their spelling). */
  tokenString(id: number): string | undefined {
    return this.hf.id_to_token(id);
  }
}
