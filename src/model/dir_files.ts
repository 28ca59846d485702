// What model and adapter directories share: the tokenizer files carried beside the weights, and
// the atomic swap of a freshly written directory into place (hf.ts, adapter.ts).
import { existsSync, renameSync, rmSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/** Files copied from a source directory on save, when present. */
export const TOKENIZER_FILES = [
  "tokenizer.json",
  "tokenizer_config.json",
  "generation_config.json",
  "special_tokens_map.json",
  "vocab.json",
  "merges.txt",
  "tokenizer.model",
  "chat_template.jinja",
  "added_tokens.json",
];

/** Moves `tmp` to `dir`; an existing `dir` is swapped out first and removed after. */
export function replaceDir(tmp: string, dir: string): void {
  if (!existsSync(dir)) {
    renameSync(tmp, dir);
    return;
  }
  const old = join(dirname(dir), `${basename(dir)}.old-${process.pid}`);
  rmSync(old, { recursive: true, force: true });
  renameSync(dir, old);
  renameSync(tmp, dir);
  rmSync(old, { recursive: true, force: true });
}
