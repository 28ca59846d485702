// What a model predicts where the env speaks: for the first ROWS held-out demonstrations, each
// observation token (the content of `role` messages, as obs_loss.ts selects them) with its logprob
// and the model's top 3 there. docs/results.md §7 reads the calc student's with it: why ECHO's
// first steps are large.
//
//   bun experiments/scripts/obs_top.ts MODEL_DIR DEMOS.jsonl [--role tool] [--n ROWS]
import { parseArgs } from "node:util";
import { ConfigError } from "../../src/errors.ts";
import { loadModel } from "../../src/model/hf.ts";
import { ChatRenderer } from "../../src/model/render.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { loadNative } from "../../src/native/ffi.ts";
import { scoreTop } from "../../src/native/score_top.ts";
import { readSftRows } from "../../src/sft/data.ts";
import { observationTokens } from "./obs_loss.ts";

const { values, positionals } = parseArgs({
  options: { role: { type: "string", default: "tool" }, n: { type: "string", default: "4" } },
  allowPositionals: true,
});
const { role } = values;
const n = Number(values.n);
const [modelDir, demos] = positionals;
if (!modelDir || !demos)
  throw new ConfigError("usage: obs_top.ts MODEL_DIR DEMOS.jsonl [--role tool] [--n ROWS]", {
    fix: "give a model directory and a demonstrations JSONL file",
  });
await loadNative();
const tokenizer = Tokenizer.load(modelDir);
const renderer = new ChatRenderer(tokenizer);
const model = await loadModel(modelDir);
const show = (id: number) => JSON.stringify(tokenizer.decode([id]));
try {
  for (const conv of readSftRows([demos]).slice(0, n)) {
    const { tokenIds, selected } = observationTokens(renderer, conv, role);
    const [scored] = scoreTop(model, [tokenIds], { k: 3 });
    console.log(JSON.stringify(tokenizer.decode(tokenIds)));
    for (const t of selected) {
      const top = scored!.top[t]!;
      const best = top.ids.map((id, i) => `${show(id)} ${top.logprobs[i]!.toFixed(2)}`).join(", ");
      console.log(`  ${show(tokenIds[t]!)} ${scored!.logprobs[t]!.toFixed(2)}   top: ${best}`);
    }
  }
} finally {
  model.free();
}
