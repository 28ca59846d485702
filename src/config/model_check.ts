// What `rlx train --dry-run` says about the run's model directory without loading weights: its
// config.json parsed the way the run will parse it (a config rlx cannot build is refused naming
// the key), its parameter count and RoPE, its tokenizer against the embedding, and the run's
// seq_len against the model's positions. A directory that is not there yet is reported, not an
// error: a recipe resolves before the model is downloaded.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ModelFileError } from "../errors.ts";
import { readModelConfig } from "../model/config.ts";
import { countParams } from "../model/presets.ts";
import { Tokenizer } from "../model/tokenizer.ts";

export interface ModelCheck {
  /** One line describing the model (or saying it is absent). */
  line: string;
  warnings: string[];
}

export function checkModelDir(dir: string, seqLen: number): ModelCheck {
  if (!existsSync(join(dir, "config.json")))
    return { line: `model ${dir}: no config.json yet (checked when the run starts)`, warnings: [] };
  const { modelType, shim } = readModelConfig(dir);
  const warnings: string[] = [];
  let tokenizerPart = "no tokenizer.json";
  if (existsSync(join(dir, "tokenizer.json"))) {
    const tokenizer = Tokenizer.load(dir);
    if (tokenizer.size > shim.vocab_size)
      throw new ModelFileError(
        `${dir}: the tokenizer has ${tokenizer.size} ids but the embedding has ${shim.vocab_size} rows`,
        { fix: "use the tokenizer files that came with the model" },
      );
    if (!tokenizer.chatTemplate) warnings.push(`${dir}: the tokenizer has no chat template; rollouts need one`);
    tokenizerPart = `tokenizer ${tokenizer.size} ids${tokenizer.chatTemplate ? ", chat template" : ""}`;
  }
  if (seqLen > shim.max_position_embeddings)
    warnings.push(
      `orchestrator.seq_len ${seqLen} is past the model's max_position_embeddings ${shim.max_position_embeddings}`,
    );
  const rope = shim.rope_scaling ? `${shim.rope_scaling.rope_type} RoPE x${shim.rope_scaling.factor}` : "plain RoPE";
  const params = countParams(shim).toLocaleString("en-US");
  return {
    line: `model ${dir}: ${modelType}, ${params} params, vocab ${shim.vocab_size} (${tokenizerPart}), ${rope}, ${shim.max_position_embeddings} positions`,
    warnings,
  };
}
