// The tokenizer check every frozen endpoint gets before its token ids are used: an OPD teacher
// scores the student's token ids, an SFT sampling source's token ids become ce targets. A model
// with another tokenizer would read or write the same ids as different text, and the loss would be
// garbage without any error, so setup refuses it: the vocabulary size (when the endpoint reports
// it) and the token ids of a probe string must agree.
import { ConfigError } from "../errors.ts";
import type { AlgorithmContext, FrozenClient } from "./base.ts";

/** Text whose tokenization differs between any two tokenizers worth telling apart. */
export const TOKENIZER_PROBE =
  "Probe: The quick brown fox jumps over 13 lazy dogs; naïve café, 你好, 🙂\n\tdef f(x): return x**2";

/** Refuses a frozen model whose tokenizer is not the policy's: the vocabulary size (when the
 * endpoint reports it) and the token ids of a probe string must agree. */
export async function checkSameTokenizer(ctx: AlgorithmContext, frozen: FrozenClient, what: string): Promise<void> {
  const fix = "use a frozen model with the same tokenizer.json as the policy (the same model family)";
  const vocab = frozen.vocabSize ? await frozen.vocabSize() : undefined;
  if (vocab !== undefined && vocab !== ctx.tokenizer.size) {
    throw new ConfigError(
      `${what} has a tokenizer of ${vocab} ids, the policy's has ${ctx.tokenizer.size}: token ids would mean different text`,
      { fix },
    );
  }
  const [theirs, own] = [await frozen.tokenize(TOKENIZER_PROBE), ctx.tokenizer.encodePlain(TOKENIZER_PROBE)];
  if (theirs.length !== own.length || theirs.some((id, i) => id !== own[i])) {
    throw new ConfigError(
      `${what} tokenizes a probe string differently from the policy (${theirs.length} vs ${own.length} tokens)`,
      { fix },
    );
  }
}
